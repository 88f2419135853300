//! How the tool prints: times, leaders and vacancies, as text or JSON.

use std::time::Duration;

use kafka_coordination::{Leader, PairRelation, UnixMillis, Vacancy, WatchEvent};
use serde_json::{json, Value};

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
        l.member,
        l.token,
        l.term,
        time(l.deadline)
    )
}

pub fn vacancy_text(v: &Vacancy) -> String {
    let was = v
        .previous
        .as_ref()
        .map(|p| format!(" (was {}, term {})", p.member, p.term))
        .unwrap_or_default();
    match v.reason {
        kafka_coordination::VacancyReason::Expired => {
            let at = v
                .previous
                .as_ref()
                .map(|p| format!(" at {}", time(p.deadline)))
                .unwrap_or_default();
            format!("vacant: the lease expired{at}{was}")
        }
        kafka_coordination::VacancyReason::Resigned => format!("vacant: the leader resigned{was}"),
        kafka_coordination::VacancyReason::Unclaimed => {
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
    format!("{} {role} {what}", time(now))
}

#[cfg(test)]
mod tests {
    use super::*;

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
