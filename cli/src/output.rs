//! How the tool prints: times, leaders and vacancies, as text or JSON.
//!
//! Role and member names come from the state topic, which anyone allowed to write it fills:
//! every name in a text line goes through [`escaped`], so that a name cannot move the cursor,
//! retitle the terminal or reorder the line. JSON escapes control characters itself.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use kafka_coordination::core::{PairRelation, UnixMillis};
use kafka_coordination::watch::{Leader, Vacancy};
use kafka_coordination::WatchEvent;
use serde_json::{json, Value};

/// Whether `c` must not reach a terminal as it is: a control character (C0, DEL, C1), a
/// bidirectional formatting character (which reorders what follows it), or a line or
/// paragraph separator.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `name` for a text line: each unsafe character (see above) as `\u{..}` and a backslash as
/// `\\`, so that what is shown is unambiguous; a name with neither is returned as it is.
pub fn escaped(name: &str) -> Cow<'_, str> {
    if !name.chars().any(|c| c == '\\' || is_unsafe(c)) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `2025-03-01T12:00:00.123Z` for epoch milliseconds (UTC).
pub fn time(at: UnixMillis) -> String {
    let ms = at.0.rem_euclid(1000);
    let secs = at.0.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

/// `in 2.4s` or `2.4s ago`.
pub fn relative(at: UnixMillis, now: UnixMillis) -> String {
    let secs = |d: Duration| format!("{:.1}s", d.as_secs_f64());
    if at >= now {
        format!("in {}", secs(at.since(now)))
    } else {
        format!("{} ago", secs(now.since(at)))
    }
}

pub fn leader_json(l: &Leader, now: UnixMillis) -> Value {
    json!({
        "member": l.member.as_str(),
        "token": l.token.to_string(),
        "producer_id": l.token.producer_id,
        "producer_epoch": l.token.producer_epoch,
        "term": l.term,
        "granted_at": time(l.granted_at),
        "granted_at_ms": l.granted_at.0,
        "deadline": time(l.deadline),
        "deadline_ms": l.deadline.0,
        "offset": l.offset,
        "live": l.is_live(now),
    })
}

/// How a lease's pair stands to the coordinator's current pair: `{"relation": "current" |
/// "commits_later" | "superseded", "behind_by": N or null, "note": text or null}`, or null
/// when there is no lease (or the coordinator could not be asked).
pub fn relation_json(relation: Option<&PairRelation>) -> Value {
    match relation {
        None => Value::Null,
        Some(r) => json!({
            "relation": r.name(),
            "behind_by": match r {
                PairRelation::CommitsLater { by } => Some(*by),
                _ => None,
            },
            "note": r.note(),
        }),
    }
}

pub fn vacancy_json(v: &Vacancy, now: UnixMillis) -> Value {
    json!({
        "reason": v.reason.to_string(),
        "previous": v.previous.as_ref().map(|p| leader_json(p, now)),
        "offset": v.offset,
    })
}

pub fn leader_text(l: &Leader) -> String {
    format!(
        "{} with pair {}, term {}, lease until {}",
        escaped(l.member.as_str()),
        l.token,
        l.term,
        time(l.deadline)
    )
}

pub fn vacancy_text(v: &Vacancy) -> String {
    let was = v
        .previous
        .as_ref()
        .map(|p| format!(" (was {}, term {})", escaped(p.member.as_str()), p.term))
        .unwrap_or_default();
    match v.reason {
        kafka_coordination::watch::VacancyReason::Expired => {
            let at = v
                .previous
                .as_ref()
                .map(|p| format!(" at {}", time(p.deadline)))
                .unwrap_or_default();
            format!("vacant: the lease expired{at}{was}")
        }
        kafka_coordination::watch::VacancyReason::Resigned => {
            format!("vacant: the leader resigned{was}")
        }
        kafka_coordination::watch::VacancyReason::Unclaimed => {
            format!("vacant: no lease was ever read{was}")
        }
        _ => format!("vacant: {}{was}", v.reason),
    }
}

/// One watch event as a line.
pub fn event_line(role: &str, e: &WatchEvent, now: UnixMillis, json: bool) -> String {
    if json {
        let mut v = match e {
            WatchEvent::Leading(l) => {
                let mut v = leader_json(l, now);
                v["event"] = "leading".into();
                v
            }
            WatchEvent::Renewed(l) => {
                let mut v = leader_json(l, now);
                v["event"] = "renewed".into();
                v
            }
            WatchEvent::Vacant(vac) => {
                let mut v = vacancy_json(vac, now);
                v["event"] = "vacant".into();
                v
            }
        };
        v["role"] = role.into();
        v["at"] = time(now).into();
        return v.to_string();
    }
    let what = match e {
        WatchEvent::Leading(l) => format!("leader {}", leader_text(l)),
        WatchEvent::Renewed(l) => format!("renewed {}", leader_text(l)),
        WatchEvent::Vacant(v) => vacancy_text(v),
    };
    format!("{} {} {what}", time(now), escaped(role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_for_the_terminal() {
        assert!(matches!(escaped("billing-1 ok"), Cow::Borrowed(_)));
        assert_eq!(escaped("caf\u{e9} \u{4e2d}"), "caf\u{e9} \u{4e2d}");
        // C0 (ESC, BEL, newline, CR), DEL, C1 (CSI), bidi overrides and isolates.
        assert_eq!(
            escaped("a\u{1b}]0;owned\u{7}\nb\r\u{7f}\u{9b}2J\u{202e}x\u{2066}y\u{200f}"),
            "a\\u{1b}]0;owned\\u{7}\\u{a}b\\u{d}\\u{7f}\\u{9b}2J\\u{202e}x\\u{2066}y\\u{200f}"
        );
        assert_eq!(
            escaped("a\\u{1b}"),
            "a\\\\u{1b}",
            "a literal escape stays distinct"
        );
        for c in (0..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            let name = format!("m{c}");
            let shown = escaped(&name);
            assert!(!shown.chars().any(char::is_control), "{c:?}: {shown:?}");
        }
    }

    /// Every text line that prints a name from the topic escapes it.
    #[test]
    fn text_lines_escape_role_and_member_names() {
        use kafka_coordination::core::record::MemberId;
        use kafka_coordination::watch::VacancyReason;
        use kafka_coordination::FencingToken;
        let evil = "m\u{1b}[2J\u{202e}";
        let leader = Leader {
            member: MemberId::new(evil).expect("a valid name"),
            token: FencingToken {
                producer_id: 7,
                producer_epoch: 1,
            },
            term: 3,
            granted_at: UnixMillis(0),
            deadline: UnixMillis(1000),
            offset: 5,
        };
        let vacancy = Vacancy {
            reason: VacancyReason::Expired,
            previous: Some(leader.clone()),
            offset: Some(6),
        };
        for line in [
            leader_text(&leader),
            vacancy_text(&vacancy),
            event_line(
                evil,
                &WatchEvent::Leading(leader.clone()),
                UnixMillis(0),
                false,
            ),
            event_line(
                evil,
                &WatchEvent::Vacant(vacancy.clone()),
                UnixMillis(0),
                false,
            ),
        ] {
            assert!(
                !line.contains('\u{1b}') && !line.contains('\u{202e}'),
                "{line:?}"
            );
            assert!(line.contains("m\\u{1b}[2J\\u{202e}"), "{line:?}");
        }
        let json = event_line(evil, &WatchEvent::Leading(leader), UnixMillis(0), true);
        let v: Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(
            v["member"], evil,
            "JSON keeps the name, escaped by JSON itself"
        );
        assert_eq!(v["role"], evil);
    }

    #[test]
    fn times_are_utc_rfc3339_with_milliseconds() {
        assert_eq!(time(UnixMillis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            time(UnixMillis(951_782_400_123)),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            time(UnixMillis(1_700_000_000_000)),
            "2023-11-14T22:13:20.000Z"
        );
        assert_eq!(time(UnixMillis(-1)), "1969-12-31T23:59:59.999Z");
    }
}
