//! The chaos suite's text formats: the tag every guarded write carries, the members' journal
//! lines and the orchestrator's fault log. Every line is `<unix ms> <EVENT> key=value ...`; a
//! value that may contain spaces (an error message) comes last, as `error=<rest of the line>`.

use std::collections::BTreeMap;
use std::fmt;

use kafka_coordination::FencingToken;

/// A leadership pair (producer id, epoch) as the suite records it. It has an order only so that
/// it can key a `BTreeMap`; the suite never orders terms by pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pair {
    pub producer_id: i64,
    pub epoch: i16,
}

impl From<FencingToken> for Pair {
    fn from(t: FencingToken) -> Pair {
        Pair {
            producer_id: t.producer_id,
            epoch: t.producer_epoch,
        }
    }
}

impl fmt::Display for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.producer_id, self.epoch)
    }
}

impl std::str::FromStr for Pair {
    type Err = String;
    fn from_str(s: &str) -> Result<Pair, String> {
        let (id, epoch) = s
            .split_once('/')
            .ok_or_else(|| format!("a pair is `producer_id/epoch`, got `{s}`"))?;
        Ok(Pair {
            producer_id: id
                .parse()
                .map_err(|_| format!("bad producer id in pair `{s}`"))?,
            epoch: epoch
                .parse()
                .map_err(|_| format!("bad epoch in pair `{s}`"))?,
        })
    }
}

/// The tag of one guarded write: who wrote it, with which pair and term, and its sequence
/// number (unique per member process: `instance`, `seq`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    pub role: String,
    /// The member id the process campaigns as (a restarted process may reuse one).
    pub member: String,
    /// The process incarnation: unique per spawned member process in a run.
    pub instance: u64,
    pub pair: Pair,
    pub term: i64,
    pub seq: u64,
}

/// The first word of every data record's value: the format and its version.
pub const TAG_FORMAT: &str = "chaos/1";

impl Tag {
    /// The record value.
    pub fn value(&self) -> String {
        format!(
            "{TAG_FORMAT} role={} member={} instance={} pair={} term={} seq={}",
            self.role, self.member, self.instance, self.pair, self.term, self.seq
        )
    }

    /// The record key: role, instance and sequence (unique per write).
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.role, self.instance, self.seq)
    }

    /// Parses a record value written by [`Tag::value`].
    pub fn parse(value: &[u8]) -> Result<Tag, String> {
        let text = std::str::from_utf8(value).map_err(|_| "the value is not UTF-8".to_owned())?;
        let rest = text
            .strip_prefix(TAG_FORMAT)
            .ok_or_else(|| format!("the value does not start with `{TAG_FORMAT}`: `{text}`"))?;
        let f = Fields::parse(rest)?;
        Ok(Tag {
            role: f.text("role")?.to_owned(),
            member: f.text("member")?.to_owned(),
            instance: f.number("instance")?,
            pair: f.pair("pair")?,
            term: f.number("term")?,
            seq: f.number("seq")?,
        })
    }
}

/// The `key=value` fields of a line (an `error=` field takes the rest of the line).
#[derive(Debug, Default)]
pub struct Fields {
    map: BTreeMap<String, String>,
}

impl Fields {
    pub fn parse(text: &str) -> Result<Fields, String> {
        let mut map = BTreeMap::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let (word, after) = match rest.find(' ') {
                Some(i) => (&rest[..i], rest[i..].trim_start()),
                None => (rest, ""),
            };
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| format!("`{word}` is not key=value"))?;
            if k == "error" {
                map.insert(k.to_owned(), rest["error=".len()..].to_owned());
                break;
            }
            map.insert(k.to_owned(), v.to_owned());
            rest = after;
        }
        Ok(Fields { map })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    pub fn text(&self, key: &str) -> Result<&str, String> {
        self.get(key).ok_or_else(|| format!("no `{key}=` field"))
    }

    pub fn number<T: std::str::FromStr>(&self, key: &str) -> Result<T, String> {
        let v = self.text(key)?;
        v.parse()
            .map_err(|_| format!("`{key}={v}` is not a number"))
    }

    pub fn pair(&self, key: &str) -> Result<Pair, String> {
        self.text(key)?.parse()
    }
}

/// One line of a journal or the fault log: its instant, event and fields.
#[derive(Debug)]
pub struct Line {
    pub at: i64,
    pub event: String,
    pub fields: Fields,
}

impl Line {
    pub fn parse(line: &str) -> Result<Line, String> {
        let mut parts = line.splitn(3, ' ');
        let at = parts
            .next()
            .unwrap_or_default()
            .parse()
            .map_err(|_| format!("no timestamp at the start of `{line}`"))?;
        let event = parts
            .next()
            .filter(|e| !e.is_empty())
            .ok_or_else(|| format!("no event in `{line}`"))?
            .to_owned();
        let fields = Fields::parse(parts.next().unwrap_or_default())?;
        Ok(Line { at, event, fields })
    }
}

/// Formats a journal or fault-log line (without the newline).
pub fn line(at: i64, event: &str, fields: &[(&str, String)]) -> String {
    let mut s = format!("{at} {event}");
    for (k, v) in fields {
        // Values other than a trailing error never contain spaces.
        let v = if *k == "error" {
            v.replace('\n', " ")
        } else {
            v.replace(char::is_whitespace, "_")
        };
        s.push_str(&format!(" {k}={v}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_round_trips_and_bad_values_are_refused() {
        let tag = Tag {
            role: "r0".into(),
            member: "m1".into(),
            instance: 7,
            pair: Pair {
                producer_id: 1000,
                epoch: 3,
            },
            term: 42,
            seq: 9,
        };
        assert_eq!(Tag::parse(tag.value().as_bytes()), Ok(tag.clone()));
        assert_eq!(tag.key(), "r0/7/9");
        assert!(Tag::parse(b"other/1 role=r0").is_err());
        assert!(Tag::parse(b"chaos/1 role=r0 member=m1").is_err());
        assert!(Tag::parse(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn a_line_keeps_a_trailing_error_with_spaces() {
        let text = line(
            5,
            "WRITE_FAILED",
            &[
                ("role", "r0".into()),
                ("error", "broker down: try again".into()),
            ],
        );
        let parsed = Line::parse(&text).expect("parses");
        assert_eq!(parsed.at, 5);
        assert_eq!(parsed.event, "WRITE_FAILED");
        assert_eq!(parsed.fields.get("role"), Some("r0"));
        assert_eq!(parsed.fields.get("error"), Some("broker down: try again"));
        assert!(Line::parse("x EVENT").is_err());
        assert!(Line::parse("5 EVENT novalue").is_err());
    }
}
