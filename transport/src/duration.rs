//! Durations as configuration files and the command line write them (`30s`, `1500ms`, `2m`).

use std::time::Duration;

/// Parses a duration as configuration files and the command line write it: a whole number
/// followed by a unit, `ms`, `s`, `m` or `h` (`1500ms`, `30s`, `2m`, `1h`); a bare number is
/// milliseconds. Several parts add up (`1m30s`).
///
/// ```
/// use std::time::Duration;
/// use kafka_coordination_transport::duration::parse_duration;
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("250"), Ok(Duration::from_millis(250)));
/// assert!(parse_duration("30 sec").unwrap_err().contains("30 sec"));
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| {
        format!("invalid duration '{text}': {why} (write a number and a unit: 1500ms, 30s, 2m, 1h)")
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(bad("it is empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| bad("too large"));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("a unit without a number"));
        }
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        let n: u64 = number.parse().map_err(|_| bad("too large"))?;
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "" => return Err(bad("a number without a unit")),
            other => return Err(bad(&format!("unknown unit '{other}'"))),
        };
        total = total.checked_add(part).ok_or_else(|| bad("too large"))?;
        rest = tail;
    }
    Ok(total)
}

/// Serde support for durations written as [`parse_duration`] reads them, or as whole
/// milliseconds.
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod serde_duration {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Deserializer, Visitor};

    struct DurationVisitor;

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a duration such as \"30s\", \"1500ms\", \"2m\", or whole milliseconds")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_millis(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_millis)
                .map_err(|_| E::custom(format!("a duration cannot be negative, got {v}")))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            super::parse_duration(v).map_err(E::custom)
        }
    }

    /// A required duration.
    pub fn required<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    /// An optional duration (use with `#[serde(default)]`).
    pub fn option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        required(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_bad_ones_are_named() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(" 2m "), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h1s"), Ok(Duration::from_secs(3601)));
        for bad in ["", "s", "10x", "1.5s", "-3s", "99999999999999999999"] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }
}
