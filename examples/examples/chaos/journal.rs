//! The run directory's files: the orchestrator's fault log (`faults.log`) and the member
//! processes' journals (`journal-*.log`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::check::Ack;
use crate::format::{Line, Pair};
use crate::liveness::{Fault, FaultKind};

/// Everything the members and the orchestrator wrote to their files.
#[derive(Debug, Default)]
pub struct Journals {
    pub acks: Vec<Ack>,
    /// pair -> member process, from the members' ELECTED lines.
    pub holders: HashMap<Pair, u64>,
    /// (role, pair) -> when the member began to resign it.
    pub resigns: HashMap<(String, Pair), i64>,
    pub faults: Vec<Fault>,
    /// The CONFIG line's fields.
    pub config: BTreeMap<String, String>,
    /// When the orchestrator began to stop the members (END line), if it got there.
    pub run_end: Option<i64>,
    /// When a stopped member process was resumed (SIGCONT): (instant, process).
    pub resumes: Vec<(i64, u64)>,
    /// How long each acknowledged guarded write took, in ms.
    pub write_ms: Vec<i64>,
    /// Guarded writes that failed: (how long they took in ms, fenced or not).
    pub failed_writes: Vec<(i64, bool)>,
    /// Journal lines cut short by a SIGKILL (the last line of a file only).
    pub torn_lines: usize,
    /// `--postgres`: rows whose COMMIT returned (PG_ACK).
    pub pg_acks: Vec<PgAck>,
    /// `--postgres`: writes the fence refused (PG_REFUSED), and writes that failed otherwise
    /// (PG_FAILED: a lost connection, a COMMIT without an answer).
    pub pg_refused: usize,
    pub pg_failed: usize,
    /// Network faults: when each fault (by number) was healed.
    pub heals: HashMap<u64, i64>,
    /// Network faults: the namespaces cut and the brokers they were cut from, by fault number.
    pub cuts: HashMap<u64, (String, String)>,
    /// Every acknowledged write: (acknowledged at, begun at, role, instance).
    pub ack_times: Vec<(i64, i64, String, i64)>,
    /// Every ENDED line: (at, role, pair).
    pub ended: Vec<(i64, String, Pair)>,
}

/// A row a member committed through the database fence.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub struct PgAck {
    pub role: String,
    pub instance: i64,
    pub seq: i64,
    pub term: i64,
}

/// Reads the fault log (`faults.log`) and every member journal (`journal-*.log`) of `dir`. A
/// line that does not parse is an error, except a journal's last line (a SIGKILL may cut it).
pub fn load_journals(dir: &Path) -> Result<Journals, String> {
    let mut j = Journals::default();
    let faults = dir.join("faults.log");
    let text = std::fs::read_to_string(&faults)
        .map_err(|e| format!("cannot read {}: {e}", faults.display()))?;
    for (n, raw) in text.lines().enumerate() {
        let line = Line::parse(raw).map_err(|e| format!("{}:{}: {e}", faults.display(), n + 1))?;
        let bad = |e: String| format!("{}:{}: {e}", faults.display(), n + 1);
        match line.event.as_str() {
            "CONFIG" => {
                for key in [
                    "lease_ms",
                    "stagger_ms",
                    "renew_ms",
                    "roles",
                    "data_topic",
                    "state_topic",
                    "partitions",
                    "seed",
                    "brokers",
                    "pg_fence",
                    "pg_rows",
                ] {
                    if let Some(v) = line.fields.get(key) {
                        j.config.insert(key.to_owned(), v.to_owned());
                    }
                }
            }
            "FAULT" => {
                let kind = line.fields.text("kind").map_err(bad)?;
                let kind =
                    FaultKind::parse(kind).ok_or_else(|| bad(format!("unknown kind {kind}")))?;
                let led = match line
                    .fields
                    .get("led")
                    .filter(|l| !l.is_empty() && *l != "-")
                {
                    None => Vec::new(),
                    Some(list) => list
                        .split(',')
                        .map(|item| {
                            let (role, pair) = item
                                .split_once(':')
                                .ok_or_else(|| bad(format!("`{item}` is not role:pair")))?;
                            Ok((role.to_owned(), pair.parse().map_err(bad)?))
                        })
                        .collect::<Result<_, String>>()?,
                };
                if let (Some(nodes), Some(peers)) =
                    (line.fields.get("nodes"), line.fields.get("peers"))
                {
                    j.cuts.insert(
                        line.fields.number("n").map_err(bad)?,
                        (nodes.to_owned(), peers.to_owned()),
                    );
                }
                j.faults.push(Fault {
                    n: line.fields.number("n").map_err(bad)?,
                    at: line.at,
                    kind,
                    instance: line.fields.get("instance").and_then(|i| i.parse().ok()),
                    led,
                });
            }
            "END" => j.run_end = Some(line.at),
            "HEAL" => {
                j.heals
                    .insert(line.fields.number("n").map_err(bad)?, line.at);
            }
            "CONT" => j
                .resumes
                .push((line.at, line.fields.number("instance").map_err(bad)?)),
            _ => {}
        }
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("journal-") && n.ends_with(".log"))
        })
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let lines: Vec<&str> = text.lines().collect();
        let complete = text.ends_with('\n');
        for (n, raw) in lines.iter().enumerate() {
            let last = n + 1 == lines.len();
            let parsed = Line::parse(raw).and_then(|line| {
                journal_line(&line, &mut j).map_err(|e| format!("{e} in `{raw}`"))
            });
            match parsed {
                Ok(()) => {}
                Err(_) if last && !complete => j.torn_lines += 1,
                Err(e) => return Err(format!("{}:{}: {e}", path.display(), n + 1)),
            }
        }
    }
    Ok(j)
}

fn journal_line(line: &Line, j: &mut Journals) -> Result<(), String> {
    let f = &line.fields;
    match line.event.as_str() {
        "ACK" => {
            j.acks.push(Ack {
                role: f.text("role")?.to_owned(),
                offset: f.number("offset")?,
                instance: f.number("instance")?,
                seq: f.number("seq")?,
                pair: f.pair("pair")?,
                term: f.number("term")?,
            });
            let mut began = line.at;
            if let Some(took) = f.get("took_ms") {
                let took: i64 = took
                    .parse()
                    .map_err(|_| "took_ms= is not a number".to_owned())?;
                j.write_ms.push(took);
                began -= took;
            }
            j.ack_times.push((
                line.at,
                began,
                f.text("role")?.to_owned(),
                f.number("instance")?,
            ));
        }
        "WRITE_FAILED" => {
            let took = f.number("took_ms").unwrap_or(0);
            j.failed_writes.push((
                took,
                f.get("error").is_some_and(|e| e.starts_with("fenced")),
            ));
        }
        "PG_ACK" => j.pg_acks.push(PgAck {
            role: f.text("role")?.to_owned(),
            instance: f.number("instance")?,
            seq: f.number("seq")?,
            term: f.number("term")?,
        }),
        "PG_REFUSED" => j.pg_refused += 1,
        "PG_FAILED" => j.pg_failed += 1,
        "ELECTED" => {
            j.holders.insert(f.pair("pair")?, f.number("instance")?);
        }
        "ENDED" => j
            .ended
            .push((line.at, f.text("role")?.to_owned(), f.pair("pair")?)),
        "RESIGN" => {
            j.resigns
                .insert((f.text("role")?.to_owned(), f.pair("pair")?), line.at);
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(id: i64, epoch: i16) -> Pair {
        Pair {
            producer_id: id,
            epoch,
        }
    }

    #[test]
    fn journals_parse_and_a_torn_last_line_is_tolerated_but_nothing_else() {
        let dir = std::env::temp_dir().join(format!("chaos-journal-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("faults.log"),
            "1 CONFIG lease_ms=2000 stagger_ms=300 roles=r0\n\
             5 FAULT n=1 kind=kill-leader instance=1 member=m1 led=r0:1/0\n\
             9 END failovers=1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("journal-1.log"),
            "2 ELECTED role=r0 instance=1 pair=1/0 term=4\n\
             3 ACK role=r0 partition=0 offset=0 instance=1 seq=1 pair=1/0 term=4\n\
             4 ACK role=r0 partition=0 off",
        )
        .unwrap();
        let j = load_journals(&dir).expect("loads");
        assert_eq!(j.acks.len(), 1);
        assert_eq!(j.torn_lines, 1);
        assert_eq!(j.holders.get(&pair(1, 0)), Some(&1));
        assert_eq!(j.faults.len(), 1);
        assert_eq!(j.faults[0].led, vec![("r0".to_owned(), pair(1, 0))]);
        assert_eq!(j.run_end, Some(9));
        assert_eq!(j.config.get("lease_ms").map(String::as_str), Some("2000"));
        // A bad line that is not the last one is an error.
        std::fs::write(
            dir.join("journal-2.log"),
            "2 ACK role=r0 offset=x\n3 ELECTED role=r0 instance=2 pair=1/1 term=9\n",
        )
        .unwrap();
        let err = load_journals(&dir).expect_err("refused");
        assert!(err.contains("journal-2.log:1"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
