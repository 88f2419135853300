//! The member process protocol: one line per event on the member's stdout.
//!
//! ```text
//! READY <member> <unix_ms>
//! LEAD <role> <unix_ms> <term>
//! END <role> <unix_ms> <resigned|handover|fenced|other>
//! DRAINED <member> <unix_ms>
//! STATS <unix_ms> leading=<n> preferred=<n> in_motion=<n> [key=<n> ...]
//! ```
//!
//! STATS may carry more `key=value` fields; `requests=<n>` (requests sent so far by the
//! member's client), when present, gives the request rate per role. A line whose first word
//! is none of these is not an event ([`parse_line`] gives `Ok(None)`); a line that starts with
//! one of them but does not follow its shape is an error naming what is wrong.
//!
//! The safety check compares stamps of two processes, so the stamps must bound the terms:
//! `LEAD` is stamped once the member is elected (not before), and `END` with `resigned` or
//! `handover` when the member stopped acting as the leader, before its resignation can be
//! seen by another member; an `END` stamped after the resignation completed can fall after the
//! successor's `LEAD` and shows as two leaders. `END ... other` (a lease that ran out, say) is
//! held to the same rule; only `fenced` ends may come after a successor's `LEAD`.

use std::fmt;

/// How a term ended, as the member reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndReason {
    /// The member resigned (not to hand the role to a preferred member).
    Resigned,
    /// The member resigned to hand the role to a member the fleet prefers.
    Handover,
    /// The member learned that another member's term fenced its own.
    Fenced,
    /// Any other end (lease lost, a failure).
    Other,
}

impl EndReason {
    fn parse(word: &str) -> Option<EndReason> {
        match word {
            "resigned" => Some(EndReason::Resigned),
            "handover" => Some(EndReason::Handover),
            "fenced" => Some(EndReason::Fenced),
            "other" => Some(EndReason::Other),
            _ => None,
        }
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndReason::Resigned => "resigned",
            EndReason::Handover => "handover",
            EndReason::Fenced => "fenced",
            EndReason::Other => "other",
        })
    }
}

/// A member's periodic figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// When the member printed them.
    pub at: i64,
    /// Roles it leads.
    pub leading: u64,
    /// Roles for which it is the preferred member.
    pub preferred: u64,
    /// Roles it is moving now (handing over or taking over).
    pub in_motion: u64,
    /// Requests its client sent so far, if it reports them.
    pub requests: Option<u64>,
}

/// One line of a member's event stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The member started all its candidacies.
    Ready { member: String, at: i64 },
    /// The member was elected for `role` with term `term`.
    Lead { role: String, at: i64, term: i64 },
    /// The member's term of `role` ended.
    End {
        role: String,
        at: i64,
        reason: EndReason,
    },
    /// A drain finished: the member leads nothing.
    Drained { member: String, at: i64 },
    /// The member's periodic figures.
    Stats(Stats),
}

#[cfg(test)]
impl Event {
    /// The instant the member stamped on the event.
    pub fn at(&self) -> i64 {
        match self {
            Event::Ready { at, .. }
            | Event::Lead { at, .. }
            | Event::End { at, .. }
            | Event::Drained { at, .. } => *at,
            Event::Stats(s) => s.at,
        }
    }
}

fn number<T: std::str::FromStr>(line: &str, what: &str, word: Option<&str>) -> Result<T, String> {
    let word = word.ok_or_else(|| format!("`{line}`: {what} is missing"))?;
    word.parse()
        .map_err(|_| format!("`{line}`: {what} must be an integer, got `{word}`"))
}

fn word<'a>(line: &str, what: &str, word: Option<&'a str>) -> Result<&'a str, String> {
    word.ok_or_else(|| format!("`{line}`: {what} is missing"))
}

fn no_more<'a>(line: &str, mut rest: impl Iterator<Item = &'a str>) -> Result<(), String> {
    match rest.next() {
        None => Ok(()),
        Some(extra) => Err(format!("`{line}`: unexpected `{extra}` at the end")),
    }
}

/// Parses one line of a member's stdout: `Ok(None)` when the line is not an event (its first
/// word is not one of the protocol's), an error naming the problem when it is one but malformed.
pub fn parse_line(line: &str) -> Result<Option<Event>, String> {
    let line = line.trim_end_matches(['\r', '\n']);
    let mut words = line.split_whitespace();
    let Some(kind) = words.next() else {
        return Ok(None);
    };
    let event = match kind {
        "READY" | "DRAINED" => {
            let member = word(line, "the member", words.next())?.to_owned();
            let at = number(line, "unix_ms", words.next())?;
            no_more(line, words)?;
            if kind == "READY" {
                Event::Ready { member, at }
            } else {
                Event::Drained { member, at }
            }
        }
        "LEAD" => {
            let role = word(line, "the role", words.next())?.to_owned();
            let at = number(line, "unix_ms", words.next())?;
            let term = number(line, "the term", words.next())?;
            no_more(line, words)?;
            Event::Lead { role, at, term }
        }
        "END" => {
            let role = word(line, "the role", words.next())?.to_owned();
            let at = number(line, "unix_ms", words.next())?;
            let reason = word(line, "the reason", words.next())?;
            let reason = EndReason::parse(reason).ok_or_else(|| {
                format!(
                    "`{line}`: the reason must be resigned, handover, fenced or other, got \
                     `{reason}`"
                )
            })?;
            no_more(line, words)?;
            Event::End { role, at, reason }
        }
        "STATS" => {
            let at = number(line, "unix_ms", words.next())?;
            let (mut leading, mut preferred, mut in_motion, mut requests) =
                (None, None, None, None);
            for field in words {
                let (key, value) = field
                    .split_once('=')
                    .ok_or_else(|| format!("`{line}`: `{field}` is not key=value"))?;
                let slot = match key {
                    "leading" => &mut leading,
                    "preferred" => &mut preferred,
                    "in_motion" => &mut in_motion,
                    "requests" => &mut requests,
                    // Other figures a member may add are not used here.
                    _ => continue,
                };
                *slot = Some(number::<u64>(line, key, Some(value))?);
            }
            let need = |v: Option<u64>, key: &str| {
                v.ok_or_else(|| format!("`{line}`: {key}=<n> is missing"))
            };
            Event::Stats(Stats {
                at,
                leading: need(leading, "leading")?,
                preferred: need(preferred, "preferred")?,
                in_motion: need(in_motion, "in_motion")?,
                requests,
            })
        }
        _ => return Ok(None),
    };
    Ok(Some(event))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_parses() {
        assert_eq!(
            parse_line("READY m1 1700000000000").unwrap(),
            Some(Event::Ready {
                member: "m1".into(),
                at: 1_700_000_000_000
            })
        );
        assert_eq!(
            parse_line("LEAD p-17 1700000000001 42\n").unwrap(),
            Some(Event::Lead {
                role: "p-17".into(),
                at: 1_700_000_000_001,
                term: 42
            })
        );
        for (word, reason) in [
            ("resigned", EndReason::Resigned),
            ("handover", EndReason::Handover),
            ("fenced", EndReason::Fenced),
            ("other", EndReason::Other),
        ] {
            let e = parse_line(&format!("END p-17 5 {word}")).unwrap().unwrap();
            assert_eq!(
                e,
                Event::End {
                    role: "p-17".into(),
                    at: 5,
                    reason
                }
            );
            assert_eq!(reason.to_string(), word);
        }
        assert_eq!(
            parse_line("DRAINED m2 9").unwrap(),
            Some(Event::Drained {
                member: "m2".into(),
                at: 9
            })
        );
        assert_eq!(
            parse_line("STATS 10 leading=3 preferred=4 in_motion=1").unwrap(),
            Some(Event::Stats(Stats {
                at: 10,
                leading: 3,
                preferred: 4,
                in_motion: 1,
                requests: None
            }))
        );
        let s = parse_line("STATS 10 in_motion=0 requests=77 leading=3 queue=5 preferred=4")
            .unwrap()
            .unwrap();
        assert_eq!(s.at(), 10);
        assert!(matches!(
            s,
            Event::Stats(Stats {
                requests: Some(77),
                leading: 3,
                ..
            })
        ));
    }

    #[test]
    fn other_lines_are_not_events() {
        assert_eq!(parse_line("").unwrap(), None);
        assert_eq!(parse_line("   ").unwrap(), None);
        assert_eq!(parse_line("starting member m1").unwrap(), None);
        assert_eq!(parse_line("lead p-1 5 1").unwrap(), None);
    }

    #[test]
    fn malformed_events_name_what_is_wrong() {
        let cases = [
            ("READY", "the member is missing"),
            ("READY m1", "unix_ms is missing"),
            ("READY m1 soon", "unix_ms must be an integer, got `soon`"),
            ("READY m1 5 extra", "unexpected `extra`"),
            ("LEAD p-1 5", "the term is missing"),
            ("LEAD p-1 5 x", "the term must be an integer"),
            ("END p-1 5", "the reason is missing"),
            ("END p-1 5 lost", "got `lost`"),
            ("STATS 5 leading=1 preferred=2", "in_motion=<n> is missing"),
            (
                "STATS 5 leading=1 preferred=2 in_motion",
                "`in_motion` is not key=value",
            ),
            (
                "STATS 5 leading=-1 preferred=2 in_motion=0",
                "leading must be an integer",
            ),
            ("STATS leading=1", "unix_ms must be an integer"),
        ];
        for (line, wanted) in cases {
            let e = parse_line(line).expect_err(line);
            assert!(e.contains(wanted), "{line}: {e}");
            assert!(e.contains(line), "{line}: the error names the line: {e}");
        }
    }
}
