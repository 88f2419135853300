//! `chaos check`: reads a run's journals and fault log, and the data and state topics with
//! read_committed from offset 0; runs the checker; prints the figures.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use kafka_coordination::core::partition::role_partition;
use kafka_coordination::core::record::Role;
use kafka_coordination::transport::Record;
use kafka_coordination::{Clock, SystemClock};

use crate::check::{check_data, DataRecord, Violation};
use crate::journal::load_journals;
use crate::kafka;
use crate::liveness::{
    analyse_role, quantile, spread, terms_of, FaultKind, Liveness, Run, Timing, L1_SLACK_MS,
};

/// The verdict of a check.
pub struct Verdict {
    pub violations: usize,
    pub failovers: usize,
    /// Broker faults injected, and the terms that ended in one with no fault aimed at their
    /// member.
    pub broker_faults: usize,
    pub lost_to_brokers: usize,
}

/// How long the checker waits for a partition's open transactions to end (a killed member's
/// last write is aborted by the coordinator after the transaction timeout, the lease).
const SETTLE: Duration = Duration::from_secs(180);

/// Checks the run in `dir` against the cluster at `bootstrap` and prints the figures.
/// With `terms`, every role's terms are listed too.
/// A run with `--postgres` is checked in its table too, at `postgres` (a connection URL).
pub fn check(
    dir: &Path,
    bootstrap: &str,
    terms_table: bool,
    postgres: Option<&str>,
) -> Result<Verdict, String> {
    let j = load_journals(dir)?;
    let config = |key: &str| -> Result<&str, String> {
        j.config
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("the fault log's CONFIG line has no {key}="))
    };
    let number = |key: &str| -> Result<i64, String> {
        config(key)?
            .parse()
            .map_err(|_| format!("CONFIG {key}= is not a number"))
    };
    let roles: Vec<String> = config("roles")?.split(',').map(str::to_owned).collect();
    let state_topic = config("state_topic")?.to_owned();
    let data_topic = config("data_topic")?.to_owned();
    let partitions = number("partitions")? as i32;
    let timing = Timing {
        lease_ms: number("lease_ms")?,
        stagger_ms: number("stagger_ms")?,
    };
    let run_end = j.run_end.unwrap_or_else(|| SystemClock.now().0);
    let episode_end: Vec<i64> = (0..j.faults.len())
        .map(|i| j.faults.get(i + 1).map_or(run_end, |f| f.at))
        .collect();

    let mut violations: Vec<Violation> = Vec::new();
    let mut liveness = Liveness::default();
    let mut records = 0;
    let mut pairs = 0;
    let mut acks = 0;
    let mut terms_total = 0;
    let mut gaps: Vec<i64> = Vec::new();
    let mut lapsed = 0;
    let mut tables: Vec<String> = Vec::new();
    let mut all_terms: Vec<(String, crate::liveness::Term)> = Vec::new();
    for (index, role) in roles.iter().enumerate() {
        let r = Role::new(role.clone()).map_err(|e| e.to_string())?;
        let p = role_partition(&r, partitions).map_err(|e| e.to_string())?;
        let state: Vec<Record> = kafka::read_committed(bootstrap, &state_topic, p, SETTLE)?
            .into_iter()
            .map(|(offset, key, value)| Record {
                offset,
                key: key.unwrap_or_default(),
                value,
            })
            .collect();
        let (terms, v) = terms_of(role, &state, timing.lease_ms);
        violations.extend(v);
        terms_total += terms.len();
        for t in &terms {
            // A term with a single lease record has no gap.
            if t.longest_gap > 0 {
                gaps.push(t.longest_gap);
            }
            if t.longest_gap > timing.lease_ms {
                lapsed += 1;
            }
            if terms_table {
                let start = j.faults.first().map_or(0, |f| f.at - 1);
                tables.push(format!(
                    "    {role} term {:>6} {:<4} {:<12} from {:>9.3} s for {:>7} ms, rank {}, \
                     longest renewal gap {} ms{}",
                    t.term,
                    t.member,
                    t.pair.to_string(),
                    (t.first_write - start) as f64 / 1000.0,
                    t.next_start
                        .map_or("-".to_owned(), |n| (n - t.first_write).to_string()),
                    t.rank,
                    t.longest_gap,
                    if t.cleared { ", cleared (resign)" } else { "" }
                ));
            }
        }
        let by_pair: HashMap<_, _> = terms.iter().map(|t| (t.pair, t.term)).collect();
        let data: Vec<DataRecord> =
            kafka::read_committed(bootstrap, &data_topic, index as i32, SETTLE)?
                .into_iter()
                .map(|(offset, _, value)| DataRecord { offset, value })
                .collect();
        let (figures, v) = check_data(role, &data, &j.acks, Some(&by_pair));
        for missing in v.iter().filter_map(|v| match v {
            Violation::AckMissing { ack, .. } if ack.offset >= 0 => Some(ack.offset),
            _ => None,
        }) {
            // What the log holds there, committed or not: an aborted record, or none at all.
            let around = kafka::read_uncommitted(
                bootstrap,
                &data_topic,
                index as i32,
                missing - 3,
                missing + 3,
            )
            .map(|records| {
                records
                    .iter()
                    .map(|(offset, _, value)| {
                        let text = value
                            .as_deref()
                            .map(String::from_utf8_lossy)
                            .unwrap_or_default();
                        format!("{offset}: {text}")
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            println!(
                "  read_uncommitted around offset {missing} of {data_topic}/{index}: {}",
                around.unwrap_or_else(|e| e)
            );
        }
        violations.extend(v);
        records += figures.records;
        pairs += figures.pairs;
        acks += figures.acks;
        let run = Run {
            journals: &j,
            episode_end: &episode_end,
            timing,
            run_end,
        };
        analyse_role(role, &terms, &run, &mut liveness);
        all_terms.extend(terms.into_iter().map(|t| (role.clone(), t)));
    }

    println!("\nchaos check: {}", dir.display());
    let mut injected: BTreeMap<FaultKind, usize> = BTreeMap::new();
    for f in &j.faults {
        *injected.entry(f.kind).or_default() += 1;
    }
    println!(
        "  run         seed {}, {} broker(s), {} roles, lease {} ms, renew {} ms, stagger {} ms",
        config("seed").unwrap_or("?"),
        config("brokers").unwrap_or("?"),
        roles.len(),
        timing.lease_ms,
        config("renew_ms").unwrap_or("?"),
        timing.stagger_ms
    );
    println!(
        "  faults      {} injected: {}",
        j.faults.len(),
        injected
            .iter()
            .map(|(k, n)| format!("{} {n}", k.name()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  records     {records} committed data records from {pairs} pairs; {acks} acknowledged \
         writes in the journals ({} journal line(s) cut by a SIGKILL); {terms_total} terms",
        j.torn_lines
    );
    let mut writes = j.write_ms.clone();
    writes.sort_unstable();
    let slow = writes.iter().filter(|w| **w > timing.lease_ms).count();
    let fenced = j.failed_writes.iter().filter(|(_, f)| *f).count();
    println!(
        "  writes      acknowledged guarded writes took median {} ms, p99 {} ms, max {} ms; {slow} \
         took longer than a lease; {} failed ({fenced} fenced, the longest after {} ms)",
        quantile(&writes, 0.5),
        quantile(&writes, 0.99),
        writes.last().copied().unwrap_or(0),
        j.failed_writes.len(),
        j.failed_writes.iter().map(|(t, _)| *t).max().unwrap_or(0)
    );
    gaps.sort_unstable();
    println!(
        "  renewals    the longest gap between two lease writes of a term (terms that renewed): \
         median {} ms, p99 {} ms, max {} ms; {lapsed} term(s) went longer than a lease without \
         renewing",
        quantile(&gaps, 0.5),
        quantile(&gaps, 0.99),
        gaps.last().copied().unwrap_or(0)
    );
    if terms_table {
        println!("  terms       (instants in s from the first fault)");
        for t in &tables {
            println!("{t}");
        }
    }
    let broker_failovers = liveness
        .broker_episodes
        .iter()
        .filter(|e| e.elections > 0)
        .count();
    let failovers = liveness.failovers.len() + broker_failovers;
    let mut by_kind: BTreeMap<FaultKind, usize> = BTreeMap::new();
    for f in &liveness.failovers {
        *by_kind.entry(f.kind).or_default() += 1;
    }
    println!(
        "  failovers   {failovers}: {}, broker faults that moved a role {broker_failovers}; \
         without a successor {}; faults on an already deposed leader {}",
        by_kind
            .iter()
            .map(|(k, n)| format!("{} {n}", k.name()))
            .collect::<Vec<_>>()
            .join(", "),
        liveness.no_successor.len(),
        liveness.not_failovers
    );
    let n = liveness.failovers.len();
    if n > 0 {
        let mut elections: BTreeMap<usize, usize> = BTreeMap::new();
        for f in &liveness.failovers {
            *elections.entry(f.elections).or_default() += 1;
        }
        let one = elections.get(&1).copied().unwrap_or(0);
        println!(
            "  elections   per leader failover: {} ; exactly one: {:.1} % (target >= 95 %)",
            elections
                .iter()
                .map(|(e, c)| format!("{e}: {c}"))
                .collect::<Vec<_>>()
                .join(", "),
            100.0 * one as f64 / n as f64
        );
        let deadline: Vec<_> = liveness
            .failovers
            .iter()
            .filter(|f| f.kind != FaultKind::ResignLeader)
            .collect();
        let resigns: Vec<_> = liveness
            .failovers
            .iter()
            .filter(|f| f.kind == FaultKind::ResignLeader)
            .collect();
        let beyond =
            |f: &&crate::liveness::Failover| f.overhead - f.rank as i64 * timing.stagger_ms;
        println!(
            "  overhead    the old lease's deadline (kill, stop) or the resign's start, to the \
             first successor's first lease, minus its rank x stagger (target p90 <= 100 ms):"
        );
        println!(
            "              all          {}",
            spread(liveness.failovers.iter().map(|f| beyond(&f)))
        );
        println!(
            "              kill, stop   {}",
            spread(deadline.iter().map(beyond))
        );
        println!(
            "              resign       {}",
            spread(resigns.iter().map(beyond))
        );
        println!(
            "  raw         the same with the rank x stagger: {}",
            spread(liveness.failovers.iter().map(|f| f.overhead))
        );
        println!(
            "  settled     to the first lease of the leader that lasted: {}",
            spread(liveness.failovers.iter().map(|f| f.settled))
        );
        let mut ranks: BTreeMap<usize, usize> = BTreeMap::new();
        for f in &liveness.failovers {
            *ranks.entry(f.rank).or_default() += 1;
        }
        println!(
            "  ranks       of the first successors: {}",
            ranks
                .iter()
                .map(|(r, c)| format!("{r}: {c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let exceeded: Vec<i64> = liveness
            .failovers
            .iter()
            .map(|f| f.l1_excess)
            .filter(|e| *e > 0)
            .collect();
        println!(
            "  L1 bound    (deadline + rank x stagger + {L1_SLACK_MS} ms) exceeded by {} of {n} \
             failovers{}",
            exceeded.len(),
            exceeded
                .iter()
                .max()
                .map_or(String::new(), |m| format!(" (worst by {m} ms)"))
        );
    }
    if !liveness.broker_episodes.is_empty() {
        let mut elections: BTreeMap<usize, usize> = BTreeMap::new();
        for e in &liveness.broker_episodes {
            *elections.entry(e.elections).or_default() += 1;
        }
        println!(
            "  brokers     {} (fault, role) episodes; elections per episode: {}",
            liveness.broker_episodes.len(),
            elections
                .iter()
                .map(|(e, c)| format!("{e}: {c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let short = liveness
        .unprovoked
        .iter()
        .filter(|u| u.lasted < timing.lease_ms)
        .count();
    let resumed = liveness.unprovoked.iter().filter(|u| u.by_resumed).count();
    let premature = liveness
        .unprovoked
        .iter()
        .filter(|u| u.challenged_vs_deadline.is_some_and(|d| d < 0))
        .count();
    println!(
        "  churn       {} terms ended before the run's end; {} with no fault aimed at them: {short} \
         within one lease, {premature} challenged while the deposed term's last lease was still \
         valid, {resumed} taken by a member just resumed from SIGSTOP",
        liveness.ended_terms,
        liveness.unprovoked.len()
    );
    let lost_to_brokers: Vec<_> = liveness
        .unprovoked
        .iter()
        .filter_map(|u| u.during_broker_fault.map(|(n, kind)| (u, n, kind)))
        .collect();
    let broker_faults: std::collections::BTreeSet<u64> =
        liveness.broker_episodes.iter().map(|e| e.fault).collect();
    if !broker_faults.is_empty() {
        println!(
            "  steady      {} broker fault(s); terms that ended during one with no fault aimed at \
             their member: {} (target 0)",
            broker_faults.len(),
            lost_to_brokers.len()
        );
        for (u, n, kind) in &lost_to_brokers {
            println!(
                "    term {} of {} ({}) ended in fault #{n} ({})",
                u.term.term,
                u.role,
                u.term.member,
                kind.name()
            );
        }
    }
    for u in &liveness.unprovoked {
        println!(
            "    term {} of {} ({} with {}) ended after {} ms with no fault aimed at it; taken by \
             #{}{}, challenging {}",
            u.term.term,
            u.role,
            u.term.member,
            u.term.pair,
            u.lasted,
            u.by.map_or("?".to_owned(), |b| b.to_string()),
            if u.by_resumed {
                " (resumed from SIGSTOP shortly before)"
            } else {
                ""
            },
            match u.challenged_vs_deadline {
                Some(d) if d < 0 => format!("{} ms before its last lease deadline", -d),
                Some(d) => format!("{d} ms after its last lease deadline"),
                None => "at an unknown instant".to_owned(),
            }
        );
    }
    crate::netreport::print(&j, &all_terms, &episode_end);
    for (fault, role) in &liveness.no_successor {
        println!("  NO SUCCESSOR after fault #{fault} on role {role}");
    }
    let mut database_violations = Vec::new();
    if let (Some(fence), Some(rows)) = (j.config.get("pg_fence"), j.config.get("pg_rows")) {
        let url = postgres.ok_or(
            "this run wrote to PostgreSQL: give its URL (--postgres URL, or KC_POSTGRES_URL)",
        )?;
        let tables = crate::database::Tables {
            fence: fence.clone(),
            rows: rows.clone(),
        };
        let f = crate::database::check(url, &tables, &j)?;
        println!(
            "  postgres    {} rows from {} terms in {rows} (through the fence {fence}); {} \
             acknowledged writes, {} missing; {} stale writes refused by the fence; {} \
             writes failed otherwise (a lost connection, no answer to COMMIT); rows of a \
             deposed term after its successor's first write: {} (target 0)",
            f.rows,
            f.terms,
            f.acked,
            f.missing.len(),
            f.refused,
            f.failed,
            f.stale.len()
        );
        database_violations.extend(f.stale);
        database_violations.extend(f.missing);
    }
    for v in &database_violations {
        println!("    VIOLATION (postgres) {v}");
    }
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &violations {
        *kinds.entry(v.kind()).or_default() += 1;
    }
    println!(
        "  violations  {}{}",
        violations.len(),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                kinds
                    .iter()
                    .map(|(k, c)| format!("{k}: {c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    for v in violations.iter().take(20) {
        println!("    VIOLATION {v}");
    }
    if violations.len() > 20 {
        println!("    ... and {} more", violations.len() - 20);
    }
    Ok(Verdict {
        violations: violations.len() + database_violations.len(),
        failovers,
        broker_faults: broker_faults.len(),
        lost_to_brokers: lost_to_brokers.len(),
    })
}

/// The self-test's forgery: replays the run's first acknowledged write with a plain producer
/// (a write of an old pair that bypassed the fence: the pair goes back and the sequence
/// repeats), and adds a journal that claims an acknowledged write the log does not have. A
/// check of `dir` must then fail.
/// With `postgres` (a run with `--postgres`), also forges a stale row and a lost commit in the
/// table (see `database::forge`).
pub fn forge(dir: &Path, bootstrap: &str, postgres: Option<&str>) -> Result<(), String> {
    let j = load_journals(dir)?;
    if let (Some(url), Some(fence), Some(rows)) =
        (postgres, j.config.get("pg_fence"), j.config.get("pg_rows"))
    {
        let tables = crate::database::Tables {
            fence: fence.clone(),
            rows: rows.clone(),
        };
        crate::database::forge(url, &tables, dir)?;
    }
    let roles: Vec<&str> = j
        .config
        .get("roles")
        .map(|r| r.split(',').collect())
        .unwrap_or_default();
    let data_topic = j
        .config
        .get("data_topic")
        .ok_or("the fault log's CONFIG line has no data_topic=")?;
    let first = j.acks.first().ok_or("the run acknowledged no write")?;
    let partition = roles
        .iter()
        .position(|r| *r == first.role)
        .ok_or("the first acknowledged write is of an unknown role")? as i32;
    let records = kafka::read_committed(bootstrap, data_topic, partition, SETTLE)?;
    let (_, key, value) = records
        .iter()
        .find(|(offset, _, _)| *offset == first.offset)
        .ok_or("the first acknowledged write is not in the log")?;
    kafka::produce_plain(
        bootstrap,
        data_topic,
        partition,
        key.as_deref().unwrap_or_default(),
        value.as_deref().unwrap_or_default(),
    )?;
    let end = records.last().map_or(0, |r| r.0);
    let lost = crate::format::line(
        SystemClock.now().0,
        "ACK",
        &[
            ("role", first.role.clone()),
            ("instance", "999999".to_owned()),
            ("pair", first.pair.to_string()),
            ("term", first.term.to_string()),
            ("partition", partition.to_string()),
            ("offset", (end + 1000).to_string()),
            ("seq", "1".to_owned()),
        ],
    );
    std::fs::write(dir.join("journal-forged.log"), format!("{lost}\n"))
        .map_err(|e| format!("cannot write the forged journal: {e}"))
}
