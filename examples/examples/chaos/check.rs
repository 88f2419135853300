//! The checker. Safety verdicts are exact and come from the committed logs alone:
//!
//! * **pairs never go back**: in a role's data partition (read_committed, offset order), once a
//!   record of another pair follows a pair, that pair never appears again; the same holds for
//!   the lease records of the role in the state topic;
//! * **one member per pair**: every record of a pair comes from one member process;
//! * **terms only grow**: a pair's records carry one term, and a new pair's term is larger than
//!   the previous pair's; the term is the offset of that pair's first lease record;
//! * **no write twice, none out of order**: a member process's sequence numbers strictly grow
//!   along the partition;
//! * **no acknowledged write is missing**: every write a member journaled as acknowledged is
//!   at its returned offset, with its tag.
//!
//! Liveness figures (elections per failover, overhead, the L1 bound) are measured from the
//! lease records' own instants and the fault log, and reported, never asserted.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use kafka_coordination::core::record::{KeyKind, KeyRef, Lease, MemberId};
use kafka_coordination::{Record, RoleState};

use crate::format::{Line, Pair, Tag};

/// A record of a role's data partition: its offset and value.
#[derive(Clone, Debug)]
pub struct DataRecord {
    pub offset: i64,
    pub value: Option<Vec<u8>>,
}

/// A write a member journaled as acknowledged (the guarded write returned its offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    pub role: String,
    pub offset: i64,
    pub instance: u64,
    pub seq: u64,
    pub pair: Pair,
    pub term: i64,
}

/// A way in which the logs contradict a guarantee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A data record that is not a chaos tag of this role.
    Malformed {
        role: String,
        offset: i64,
        why: String,
    },
    /// A pair came back after another pair had written.
    PairWentBack {
        role: String,
        log: &'static str,
        offset: i64,
        pair: Pair,
        first_offset: i64,
        after: Pair,
    },
    /// Two member processes wrote with one pair.
    PairFromTwoMembers {
        role: String,
        pair: Pair,
        offset: i64,
        first: String,
        other: String,
    },
    /// A new pair's term is not larger than the previous pair's.
    TermWentBack {
        role: String,
        offset: i64,
        pair: Pair,
        term: i64,
        previous_pair: Pair,
        previous_term: i64,
    },
    /// A pair's records carry more than one term, or a term that is not the offset of the
    /// pair's first lease record.
    WrongTerm {
        role: String,
        offset: i64,
        pair: Pair,
        term: i64,
        expected: Option<i64>,
    },
    /// A member process's sequence numbers did not strictly grow (a duplicate or a reorder).
    SequenceWentBack {
        role: String,
        offset: i64,
        instance: u64,
        seq: u64,
        previous: u64,
    },
    /// An acknowledged write is not at its offset.
    AckMissing { ack: Ack, found: String },
}

impl Violation {
    /// A short name of the kind, for the summary.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::Malformed { .. } => "malformed record",
            Violation::PairWentBack { .. } => "pair went back",
            Violation::PairFromTwoMembers { .. } => "pair from two members",
            Violation::TermWentBack { .. } => "term went back",
            Violation::WrongTerm { .. } => "wrong term",
            Violation::SequenceWentBack { .. } => "sequence went back",
            Violation::AckMissing { .. } => "acknowledged write missing",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Malformed { role, offset, why } => {
                write!(
                    f,
                    "role {role}: the data record at offset {offset} is malformed: {why}"
                )
            }
            Violation::PairWentBack {
                role,
                log,
                offset,
                pair,
                first_offset,
                after,
            } => write!(
                f,
                "role {role}: pair {pair} wrote again at offset {offset} of the {log} log after \
                 pair {after} had written (its first record was at {first_offset})"
            ),
            Violation::PairFromTwoMembers {
                role,
                pair,
                offset,
                first,
                other,
            } => write!(
                f,
                "role {role}: pair {pair} wrote from {other} at offset {offset}, but its \
                 earlier records came from {first}"
            ),
            Violation::TermWentBack {
                role,
                offset,
                pair,
                term,
                previous_pair,
                previous_term,
            } => {
                write!(
                    f,
                    "role {role}: pair {pair} wrote term {term} at offset {offset}, after pair \
                     {previous_pair} wrote the larger or equal term {previous_term}"
                )
            }
            Violation::WrongTerm {
                role,
                offset,
                pair,
                term,
                expected,
            } => match expected {
                Some(e) => write!(
                    f,
                    "role {role}: the record at offset {offset} carries term {term} for pair \
                     {pair}, whose term is {e}"
                ),
                None => write!(
                    f,
                    "role {role}: the record at offset {offset} carries pair {pair} (term \
                     {term}), which wrote no lease record: it was never elected"
                ),
            },
            Violation::SequenceWentBack {
                role,
                offset,
                instance,
                seq,
                previous,
            } => write!(
                f,
                "role {role}: member process #{instance} wrote seq {seq} at offset {offset} \
                 after seq {previous} (a duplicate or a reorder)"
            ),
            Violation::AckMissing { ack, found } => write!(
                f,
                "role {}: the write acknowledged to #{} (seq {}, pair {}, term {}) at offset {} \
                 is missing: {found}",
                ack.role, ack.instance, ack.seq, ack.pair, ack.term, ack.offset
            ),
        }
    }
}

/// What [`check_data`] counted besides the violations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataFigures {
    pub records: usize,
    pub pairs: usize,
    pub acks: usize,
}

/// Checks one role's data partition (read_committed, offset order) against the safety
/// properties, and every acknowledged write of the role against the partition. `terms` (pair
/// -> term, from the state log) adds the check that every pair was elected with that term.
pub fn check_data(
    role: &str,
    records: &[DataRecord],
    acks: &[Ack],
    terms: Option<&HashMap<Pair, i64>>,
) -> (DataFigures, Vec<Violation>) {
    let mut violations = Vec::new();
    // pair -> (first offset, writer, term)
    let mut pairs: HashMap<Pair, (i64, String, i64)> = HashMap::new();
    let mut current: Option<(Pair, i64)> = None;
    let mut last_seq: HashMap<u64, u64> = HashMap::new();
    let mut by_offset: HashMap<i64, Tag> = HashMap::new();
    let mut by_write: HashMap<(u64, u64), i64> = HashMap::new();
    for r in records {
        let tag = match r.value.as_deref().map(Tag::parse) {
            Some(Ok(tag)) if tag.role == role => tag,
            Some(Ok(tag)) => {
                violations.push(Violation::Malformed {
                    role: role.to_owned(),
                    offset: r.offset,
                    why: format!("it is tagged for role {}", tag.role),
                });
                continue;
            }
            Some(Err(why)) => {
                violations.push(Violation::Malformed {
                    role: role.to_owned(),
                    offset: r.offset,
                    why,
                });
                continue;
            }
            None => {
                violations.push(Violation::Malformed {
                    role: role.to_owned(),
                    offset: r.offset,
                    why: "a tombstone".to_owned(),
                });
                continue;
            }
        };
        let writer = format!("{}#{}", tag.member, tag.instance);
        match pairs.get(&tag.pair) {
            Some((first_offset, first_writer, first_term)) => {
                if let Some((now, _)) = current.filter(|(p, _)| *p != tag.pair) {
                    violations.push(Violation::PairWentBack {
                        role: role.to_owned(),
                        log: "data",
                        offset: r.offset,
                        pair: tag.pair,
                        first_offset: *first_offset,
                        after: now,
                    });
                }
                if *first_writer != writer {
                    violations.push(Violation::PairFromTwoMembers {
                        role: role.to_owned(),
                        pair: tag.pair,
                        offset: r.offset,
                        first: first_writer.clone(),
                        other: writer.clone(),
                    });
                }
                if *first_term != tag.term {
                    violations.push(Violation::WrongTerm {
                        role: role.to_owned(),
                        offset: r.offset,
                        pair: tag.pair,
                        term: tag.term,
                        expected: Some(*first_term),
                    });
                }
            }
            None => {
                if let Some((previous_pair, previous_term)) = current {
                    if tag.term <= previous_term {
                        violations.push(Violation::TermWentBack {
                            role: role.to_owned(),
                            offset: r.offset,
                            pair: tag.pair,
                            term: tag.term,
                            previous_pair,
                            previous_term,
                        });
                    }
                }
                if let Some(terms) = terms {
                    let expected = terms.get(&tag.pair).copied();
                    if expected != Some(tag.term) {
                        violations.push(Violation::WrongTerm {
                            role: role.to_owned(),
                            offset: r.offset,
                            pair: tag.pair,
                            term: tag.term,
                            expected,
                        });
                    }
                }
                pairs.insert(tag.pair, (r.offset, writer, tag.term));
            }
        }
        // Only the pair's first term moves `current`'s term, so a wrong term is reported once.
        let term = pairs.get(&tag.pair).map_or(tag.term, |p| p.2);
        current = Some((tag.pair, term));
        if let Some(previous) = last_seq.insert(tag.instance, tag.seq) {
            if tag.seq <= previous {
                violations.push(Violation::SequenceWentBack {
                    role: role.to_owned(),
                    offset: r.offset,
                    instance: tag.instance,
                    seq: tag.seq,
                    previous,
                });
            }
        }
        by_write.entry((tag.instance, tag.seq)).or_insert(r.offset);
        by_offset.insert(r.offset, tag);
    }
    let mut acked = 0;
    for ack in acks.iter().filter(|a| a.role == role) {
        acked += 1;
        let offset = if ack.offset >= 0 {
            Some(ack.offset)
        } else {
            by_write.get(&(ack.instance, ack.seq)).copied()
        };
        let found = offset.and_then(|o| by_offset.get(&o));
        let matches = found.is_some_and(|t| {
            t.instance == ack.instance
                && t.seq == ack.seq
                && t.pair == ack.pair
                && t.term == ack.term
        });
        if !matches {
            let found = match (found, offset) {
                (Some(t), Some(o)) => format!(
                    "offset {o} holds #{} seq {} pair {} term {} instead",
                    t.instance, t.seq, t.pair, t.term
                ),
                (None, Some(o)) => format!("no committed record at offset {o}"),
                _ => "no committed record of that write".to_owned(),
            };
            violations.push(Violation::AckMissing {
                ack: ack.clone(),
                found,
            });
        }
    }
    (
        DataFigures {
            records: records.len(),
            pairs: pairs.len(),
            acks: acked,
        },
        violations,
    )
}

/// One term of a role, from its lease records in the state topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// The term number: the offset of its first lease record.
    pub term: i64,
    pub member: String,
    pub pair: Pair,
    /// When its first lease was written (`deadline - lease`, by the writer's clock).
    pub first_write: i64,
    /// When its epoch was granted (the challenge that fenced the previous pair), by the
    /// writer's clock.
    pub granted_at: i64,
    /// The deadline of its last lease record.
    pub last_deadline: i64,
    /// The longest time between two consecutive lease writes of the term, in ms.
    pub longest_gap: i64,
    /// The new leader's rank in the roster just before its first lease record.
    pub rank: usize,
    /// When the next term's first lease was written, if there is one.
    pub next_start: Option<i64>,
    /// Whether its lease was cleared (a resign) before the next term began.
    pub cleared: bool,
}

/// The terms of `role` from the records of its state partition (offset order); `lease_ms` is
/// the lease duration every member uses. A pair that writes a lease again after another pair
/// did is a violation.
pub fn terms_of(role: &str, records: &[Record], lease_ms: i64) -> (Vec<Term>, Vec<Violation>) {
    let mut violations = Vec::new();
    let mut terms: Vec<Term> = Vec::new();
    let Ok(role_name) = kafka_coordination::core::record::Role::new(role) else {
        return (terms, violations);
    };
    let mut state = RoleState::new(role_name);
    let mut first_offsets: HashMap<Pair, i64> = HashMap::new();
    for r in records {
        let lease_key =
            KeyRef::decode(&r.key).is_ok_and(|k| k.kind() == KeyKind::Lease && k.role() == role);
        if lease_key {
            match r.value.as_deref().filter(|v| !v.is_empty()) {
                None => {
                    if let Some(t) = terms.last_mut() {
                        t.cleared = true;
                    }
                }
                Some(v) => {
                    if let Ok(lease) = Lease::decode(v) {
                        let pair = Pair::from(lease.token);
                        let deadline = lease.deadline.0;
                        match terms.last_mut() {
                            Some(t) if t.pair == pair && !t.cleared => {
                                t.longest_gap = t.longest_gap.max(deadline - t.last_deadline);
                                t.last_deadline = t.last_deadline.max(deadline);
                            }
                            _ => {
                                if let Some(first) = first_offsets.get(&pair) {
                                    violations.push(Violation::PairWentBack {
                                        role: role.to_owned(),
                                        log: "state",
                                        offset: r.offset,
                                        pair,
                                        first_offset: *first,
                                        after: terms.last().map_or(pair, |t| t.pair),
                                    });
                                } else {
                                    first_offsets.insert(pair, r.offset);
                                    let rank = MemberId::new(lease.member.as_str())
                                        .ok()
                                        .and_then(|m| state.rank_of(&m))
                                        .unwrap_or(0);
                                    let first_write = deadline - lease_ms;
                                    if let Some(t) = terms.last_mut() {
                                        t.next_start = Some(first_write);
                                    }
                                    terms.push(Term {
                                        term: r.offset,
                                        member: lease.member.as_str().to_owned(),
                                        pair,
                                        first_write,
                                        granted_at: lease.granted_at.0,
                                        last_deadline: deadline,
                                        longest_gap: 0,
                                        rank,
                                        next_start: None,
                                        cleared: false,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        state.apply(r);
    }
    (terms, violations)
}

/// The faults the orchestrator injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    KillLeader,
    StopLeader,
    ResignLeader,
    KillStandby,
    StopStandby,
    KillStateLeaderBroker,
    KillDataLeaderBroker,
    KillCoordinatorBroker,
}

impl FaultKind {
    pub const ALL: [FaultKind; 8] = [
        FaultKind::KillLeader,
        FaultKind::StopLeader,
        FaultKind::ResignLeader,
        FaultKind::KillStandby,
        FaultKind::StopStandby,
        FaultKind::KillStateLeaderBroker,
        FaultKind::KillDataLeaderBroker,
        FaultKind::KillCoordinatorBroker,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillLeader => "kill-leader",
            FaultKind::StopLeader => "stop-leader",
            FaultKind::ResignLeader => "resign-leader",
            FaultKind::KillStandby => "kill-standby",
            FaultKind::StopStandby => "stop-standby",
            FaultKind::KillStateLeaderBroker => "kill-broker-state-leader",
            FaultKind::KillDataLeaderBroker => "kill-broker-data-leader",
            FaultKind::KillCoordinatorBroker => "kill-broker-coordinator",
        }
    }

    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// A fault aimed at a role's leader.
    pub fn at_leader(self) -> bool {
        matches!(
            self,
            FaultKind::KillLeader | FaultKind::StopLeader | FaultKind::ResignLeader
        )
    }

    /// A fault aimed at a broker.
    pub fn at_broker(self) -> bool {
        matches!(
            self,
            FaultKind::KillStateLeaderBroker
                | FaultKind::KillDataLeaderBroker
                | FaultKind::KillCoordinatorBroker
        )
    }
}

/// One injected fault, from the fault log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub n: u64,
    pub at: i64,
    pub kind: FaultKind,
    /// The member process it was aimed at.
    pub instance: Option<u64>,
    /// The roles that process led when the fault was injected, with their pairs.
    pub led: Vec<(String, Pair)>,
}

/// The timing every member used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub lease_ms: i64,
    pub stagger_ms: i64,
}

/// The slack of the simulation's L1 bound: deadline + rank x stagger + this.
pub const L1_SLACK_MS: i64 = 250;

/// One failover: a fault aimed at a leader, and how the role found its next leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failover {
    pub fault: u64,
    pub kind: FaultKind,
    pub role: String,
    /// The old lease's deadline (kill, stop) or the instant the resign began.
    pub trigger: i64,
    /// How many terms began until one lasted a lease (1 = no churn).
    pub elections: usize,
    /// The first successor's first lease minus the trigger.
    pub overhead: i64,
    /// The first successor's rank.
    pub rank: usize,
    /// The first lease of the term that lasted, minus the trigger.
    pub settled: i64,
    /// The first successor's first lease minus `trigger + rank x stagger + L1 slack` (positive
    /// when the L1 bound was exceeded).
    pub l1_excess: i64,
}

/// A broker fault and the terms that began on a role while it lasted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEpisode {
    pub fault: u64,
    pub kind: FaultKind,
    pub role: String,
    pub elections: usize,
}

/// A term that ended with no fault aimed at it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unprovoked {
    pub role: String,
    pub term: Term,
    /// How long it lasted, in ms.
    pub lasted: i64,
    /// The member process that took over, if known.
    pub by: Option<u64>,
    /// Whether that process had been resumed from a SIGSTOP within two leases before (or at
    /// most 500 ms after: the resume is logged once the signal was sent).
    pub by_resumed: bool,
    /// When the successor's epoch was granted minus the deposed term's last lease deadline:
    /// negative when the successor challenged while the last lease written was still valid.
    pub challenged_vs_deadline: Option<i64>,
}

/// What the liveness analysis found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Liveness {
    pub failovers: Vec<Failover>,
    pub broker_episodes: Vec<BrokerEpisode>,
    /// Faults aimed at a leader whose role had no later term.
    pub no_successor: Vec<(u64, String)>,
    /// Faults aimed at a member that had already been deposed (the orchestrator's view was
    /// stale), or at a pair with no lease record: not failovers.
    pub not_failovers: usize,
    /// Terms that ended with a successor.
    pub ended_terms: usize,
    /// Of those, the terms that ended with no fault aimed at them.
    pub unprovoked: Vec<Unprovoked>,
}

/// What the analysis needs besides a role's terms: the faults, when each fault's episode ended
/// (the next fault, or the end of the run), the journals, the timing, and when the
/// orchestrator began to stop the members.
pub struct Run<'a> {
    pub journals: &'a Journals,
    pub episode_end: &'a [i64],
    pub timing: Timing,
    pub run_end: i64,
}

/// The liveness analysis of one role, added to `out`.
pub fn analyse_role(role: &str, terms: &[Term], run: &Run<'_>, out: &mut Liveness) {
    let (faults, holders, timing) = (&run.journals.faults, &run.journals.holders, run.timing);
    // Whether a fault was aimed at the term: at its pair or its process while it ran, or a
    // broker fault whose episode covers its end.
    let aimed = |t: &Term, end: i64| {
        faults.iter().zip(run.episode_end).any(|(f, &episode)| {
            if f.kind.at_broker() {
                return f.at <= end && end <= episode;
            }
            let at_pair = f.led.iter().any(|(r, p)| r == role && *p == t.pair);
            // A kill or a stop hits every term of the process; a resign only the one asked for.
            let at_process = f.kind != FaultKind::ResignLeader
                && f.instance.is_some()
                && f.instance == holders.get(&t.pair).copied();
            (at_pair || at_process) && f.at >= t.first_write && f.at <= end
        })
    };
    for (i, t) in terms.iter().enumerate() {
        let end = match t.next_start {
            Some(end) if end <= run.run_end => end,
            _ => continue,
        };
        out.ended_terms += 1;
        if !aimed(t, end) {
            let next = terms.get(i + 1);
            let by = next.and_then(|n| holders.get(&n.pair)).copied();
            let by_resumed = by.is_some_and(|by| {
                // The resume is logged once `kill -CONT` returned: the process may act a moment
                // before that.
                run.journals.resumes.iter().any(|&(at, instance)| {
                    instance == by && end >= at - 500 && end - at <= 2 * timing.lease_ms
                })
            });
            out.unprovoked.push(Unprovoked {
                role: role.to_owned(),
                term: t.clone(),
                lasted: end - t.first_write,
                by,
                by_resumed,
                challenged_vs_deadline: next.map(|n| n.granted_at - t.last_deadline),
            });
        }
    }
    for (f, &episode) in faults.iter().zip(run.episode_end) {
        if f.kind.at_broker() {
            let elections = terms
                .iter()
                .filter(|t| t.first_write >= f.at && t.first_write < episode)
                .count();
            out.broker_episodes.push(BrokerEpisode {
                fault: f.n,
                kind: f.kind,
                role: role.to_owned(),
                elections,
            });
            continue;
        }
        if !f.kind.at_leader() {
            continue;
        }
        for (_, pair) in f.led.iter().filter(|(r, _)| r == role) {
            let Some(i) = terms.iter().position(|t| t.pair == *pair) else {
                out.not_failovers += 1;
                continue;
            };
            if terms[i].next_start.is_some_and(|s| s < f.at) {
                out.not_failovers += 1;
                continue;
            }
            let trigger = match f.kind {
                FaultKind::ResignLeader => run
                    .journals
                    .resigns
                    .get(&(role.to_owned(), *pair))
                    .copied()
                    .unwrap_or(f.at),
                _ => terms[i].last_deadline,
            };
            let Some(first) = terms.get(i + 1) else {
                out.no_successor.push((f.n, role.to_owned()));
                continue;
            };
            let mut last = i + 1;
            while let (Some(t), Some(next)) = (terms.get(last), terms.get(last + 1)) {
                if next.first_write - t.first_write >= timing.lease_ms || aimed(t, next.first_write)
                {
                    break;
                }
                last += 1;
            }
            let bound = trigger + first.rank as i64 * timing.stagger_ms + L1_SLACK_MS;
            out.failovers.push(Failover {
                fault: f.n,
                kind: f.kind,
                role: role.to_owned(),
                trigger,
                elections: last - i,
                overhead: first.first_write - trigger,
                rank: first.rank,
                settled: terms[last].first_write - trigger,
                l1_excess: first.first_write - bound,
            });
        }
    }
}

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
                j.faults.push(Fault {
                    n: line.fields.number("n").map_err(bad)?,
                    at: line.at,
                    kind,
                    instance: line.fields.get("instance").and_then(|i| i.parse().ok()),
                    led,
                });
            }
            "END" => j.run_end = Some(line.at),
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
            if let Some(took) = f.get("took_ms") {
                j.write_ms.push(
                    took.parse()
                        .map_err(|_| "took_ms= is not a number".to_owned())?,
                );
            }
        }
        "WRITE_FAILED" => {
            let took = f.number("took_ms").unwrap_or(0);
            j.failed_writes.push((
                took,
                f.get("error").is_some_and(|e| e.starts_with("fenced")),
            ));
        }
        "ELECTED" => {
            j.holders.insert(f.pair("pair")?, f.number("instance")?);
        }
        "RESIGN" => {
            j.resigns
                .insert((f.text("role")?.to_owned(), f.pair("pair")?), line.at);
        }
        _ => {}
    }
    Ok(())
}

/// The value at quantile `q` (nearest rank) of sorted `v`.
pub fn quantile(v: &[i64], q: f64) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i.min(v.len() - 1)]
}

/// `median / p90 / max` of `values`, in ms.
pub fn spread(values: impl IntoIterator<Item = i64>) -> String {
    let mut v: Vec<i64> = values.into_iter().collect();
    if v.is_empty() {
        return "n/a (none)".to_owned();
    }
    v.sort_unstable();
    format!(
        "median {} ms, p90 {} ms, max {} ms (n={})",
        quantile(&v, 0.5),
        quantile(&v, 0.9),
        v[v.len() - 1],
        v.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination::core::record::{Key, Registration, Role};
    use kafka_coordination::{FencingToken, UnixMillis};

    const ROLE: &str = "r0";

    fn pair(id: i64, epoch: i16) -> Pair {
        Pair {
            producer_id: id,
            epoch,
        }
    }

    fn tag(instance: u64, pair: Pair, term: i64, seq: u64) -> Tag {
        Tag {
            role: ROLE.into(),
            member: format!("m{instance}"),
            instance,
            pair,
            term,
            seq,
        }
    }

    /// A data log of the tags, at offsets 0, 2, 4, ... (transaction markers in between).
    fn log(tags: &[Tag]) -> Vec<DataRecord> {
        tags.iter()
            .enumerate()
            .map(|(i, t)| DataRecord {
                offset: 2 * i as i64,
                value: Some(t.value().into_bytes()),
            })
            .collect()
    }

    fn ack_of(t: &Tag, offset: i64) -> Ack {
        Ack {
            role: t.role.clone(),
            offset,
            instance: t.instance,
            seq: t.seq,
            pair: t.pair,
            term: t.term,
        }
    }

    /// A clean history: m1 leads with 100/0 (term 5), m2 takes over with 100/1 (term 9), m1
    /// (restarted as #3) with 200/0 (term 20); every write acknowledged.
    fn clean() -> (Vec<Tag>, Vec<Ack>) {
        let tags = vec![
            tag(1, pair(100, 0), 5, 1),
            tag(1, pair(100, 0), 5, 2),
            tag(2, pair(100, 1), 9, 1),
            tag(2, pair(100, 1), 9, 4),
            tag(3, pair(200, 0), 20, 1),
        ];
        let acks = tags
            .iter()
            .enumerate()
            .map(|(i, t)| ack_of(t, 2 * i as i64))
            .collect();
        (tags, acks)
    }

    fn kinds(v: &[Violation]) -> Vec<&'static str> {
        v.iter().map(Violation::kind).collect()
    }

    #[test]
    fn a_clean_history_passes() {
        let (tags, acks) = clean();
        let terms: HashMap<Pair, i64> =
            [(pair(100, 0), 5), (pair(100, 1), 9), (pair(200, 0), 20)].into();
        let (figures, v) = check_data(ROLE, &log(&tags), &acks, Some(&terms));
        assert_eq!(v, vec![]);
        assert_eq!(
            figures,
            DataFigures {
                records: 5,
                pairs: 3,
                acks: 5
            }
        );
    }

    #[test]
    fn a_pair_that_comes_back_is_caught() {
        let (mut tags, _) = clean();
        // The deposed m1 writes once more after m2 took over.
        tags.insert(4, tag(1, pair(100, 0), 5, 3));
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["pair went back"], "{v:?}");
        assert!(
            v[0].to_string()
                .contains("pair 100/0 wrote again at offset 8"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn a_pair_written_by_two_members_is_caught() {
        let (mut tags, _) = clean();
        tags[3].instance = 7;
        tags[3].member = "m7".into();
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["pair from two members"], "{v:?}");
    }

    #[test]
    fn a_term_that_goes_back_or_changes_is_caught() {
        let (mut tags, _) = clean();
        tags[4].term = 9; // 200/0 claims a term not larger than 100/1's
        tags[4].seq = 1;
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["term went back"], "{v:?}");

        let (mut tags, _) = clean();
        tags[1].term = 6; // one pair, two terms
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["wrong term"], "{v:?}");

        // A pair the state log never elected, and one whose term is not its first lease.
        let (tags, _) = clean();
        let terms: HashMap<Pair, i64> = [(pair(100, 0), 5), (pair(100, 1), 8)].into();
        let (_, v) = check_data(ROLE, &log(&tags), &[], Some(&terms));
        assert_eq!(kinds(&v), ["wrong term", "wrong term"], "{v:?}");
        assert!(v[1].to_string().contains("never elected"), "{}", v[1]);
    }

    #[test]
    fn a_duplicate_or_reordered_write_is_caught() {
        let (mut tags, _) = clean();
        tags[1].seq = 1; // the same write twice
        let (_, v) = check_data(ROLE, &log(&tags), &[], None);
        assert_eq!(kinds(&v), ["sequence went back"], "{v:?}");
    }

    #[test]
    fn a_missing_or_different_acknowledged_write_is_caught() {
        let (tags, mut acks) = clean();
        // An acknowledged write whose record is not in the committed log at all.
        let lost = Ack {
            offset: 10,
            seq: 5,
            ..acks[4].clone()
        };
        acks.push(lost);
        // One whose offset holds another write.
        acks[2].seq = 2;
        // One acknowledged without an offset, found by its sequence number; and one not found.
        acks.push(Ack {
            offset: -1,
            ..acks[0].clone()
        });
        acks.push(Ack {
            offset: -1,
            seq: 99,
            ..acks[0].clone()
        });
        let (figures, v) = check_data(ROLE, &log(&tags), &acks, None);
        assert_eq!(figures.acks, 8);
        assert_eq!(kinds(&v), ["acknowledged write missing"; 3], "{v:?}");
        let text: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert!(text[0].contains("holds #2 seq 1"), "{text:?}");
        assert!(
            text[1].contains("no committed record at offset 10"),
            "{text:?}"
        );
        assert!(
            text[2].contains("no committed record of that write"),
            "{text:?}"
        );
    }

    #[test]
    fn malformed_and_foreign_records_are_caught() {
        let (tags, _) = clean();
        let mut records = log(&tags);
        records.push(DataRecord {
            offset: 11,
            value: Some(b"hello".to_vec()),
        });
        records.push(DataRecord {
            offset: 12,
            value: None,
        });
        let mut other = tags[4].clone();
        other.role = "r1".into();
        other.seq = 2;
        records.push(DataRecord {
            offset: 13,
            value: Some(other.value().into_bytes()),
        });
        let (_, v) = check_data(ROLE, &records, &[], None);
        assert_eq!(kinds(&v), ["malformed record"; 3], "{v:?}");
    }

    // ---- the state log: terms, ranks, and the liveness analysis ----

    struct StateLog {
        records: Vec<Record>,
    }

    impl StateLog {
        fn new() -> StateLog {
            StateLog {
                records: Vec::new(),
            }
        }
        fn next(&self) -> i64 {
            self.records.len() as i64
        }
        fn register(&mut self, member: &str) {
            let role = Role::new(ROLE).unwrap();
            let m = MemberId::new(member).unwrap();
            let value = Registration {
                member: m.clone(),
                registered_at: UnixMillis(0),
            }
            .encode();
            let key = Key::registration(role, m).encode();
            self.records.push(Record::new(self.next(), key, value));
        }
        fn lease(&mut self, member: &str, p: Pair, written: i64) {
            let value = Lease {
                member: MemberId::new(member).unwrap(),
                token: FencingToken::new(p.producer_id, p.epoch),
                granted_at: UnixMillis(written),
                deadline: UnixMillis(written + LEASE),
            }
            .encode();
            let key = Key::lease(Role::new(ROLE).unwrap()).encode();
            self.records.push(Record::new(self.next(), key, value));
        }
        fn clear(&mut self) {
            let key = Key::lease(Role::new(ROLE).unwrap()).encode();
            self.records.push(Record::tombstone(self.next(), key));
        }
    }

    const LEASE: i64 = 2000;
    const TIMING: Timing = Timing {
        lease_ms: LEASE,
        stagger_ms: 300,
    };

    #[test]
    fn a_state_lease_that_comes_back_is_caught() {
        let mut s = StateLog::new();
        s.register("a");
        s.register("b");
        s.lease("a", pair(1, 0), 0);
        s.lease("b", pair(1, 1), 3000);
        s.lease("a", pair(1, 0), 3100);
        let (terms, v) = terms_of(ROLE, &s.records, LEASE);
        assert_eq!(terms.len(), 2);
        assert_eq!(kinds(&v), ["pair went back"], "{v:?}");
        assert!(v[0].to_string().contains("state log"), "{}", v[0]);
    }

    fn fault(n: u64, at: i64, kind: FaultKind, instance: u64, led: &[Pair]) -> Fault {
        Fault {
            n,
            at,
            kind,
            instance: Some(instance),
            led: led.iter().map(|p| (ROLE.to_owned(), *p)).collect(),
        }
    }

    #[test]
    fn failovers_count_elections_overhead_and_the_l1_bound() {
        let mut s = StateLog::new();
        for m in ["a", "ghost", "b", "c"] {
            s.register(m);
        }
        // a leads (1/0) and renews; killed at 1200, its lease ran to 1000 + LEASE = 3000.
        s.lease("a", pair(1, 0), 0);
        s.lease("a", pair(1, 0), 1000);
        // b (rank 1: the ghost joined before it) first writes at 3000 + 300 + 40.
        s.lease("b", pair(1, 1), 3340);
        // c challenges 200 ms later: an extra short term; c lasts.
        s.lease("c", pair(1, 2), 3540);
        s.lease("c", pair(1, 2), 4040);
        // c resigns at 9000; b writes at 9030.
        s.clear();
        s.lease("b", pair(1, 4), 9030);
        let (terms, v) = terms_of(ROLE, &s.records, LEASE);
        assert_eq!(v, vec![]);
        assert_eq!(terms.len(), 4);
        assert_eq!(terms[1].rank, 1, "{terms:?}");
        assert!(terms[1].next_start == Some(3540) && terms[2].cleared);

        let journals = Journals {
            holders: [
                (pair(1, 0), 1),
                (pair(1, 1), 2),
                (pair(1, 2), 3),
                (pair(1, 4), 2),
            ]
            .into(),
            resigns: [((ROLE.to_owned(), pair(1, 2)), 9000)].into(),
            faults: vec![
                fault(1, 1200, FaultKind::KillLeader, 1, &[pair(1, 0)]),
                fault(2, 8990, FaultKind::ResignLeader, 3, &[pair(1, 2)]),
            ],
            // c (process 3) had been resumed from a SIGSTOP just before it challenged.
            resumes: vec![(3400, 3)],
            ..Journals::default()
        };
        let run = Run {
            journals: &journals,
            episode_end: &[8990, 20_000],
            timing: TIMING,
            run_end: 20_000,
        };
        let mut out = Liveness::default();
        analyse_role(ROLE, &terms, &run, &mut out);
        assert_eq!(out.failovers.len(), 2, "{out:?}");
        let kill = &out.failovers[0];
        assert_eq!(
            (
                kill.trigger,
                kill.elections,
                kill.overhead,
                kill.rank,
                kill.settled,
                kill.l1_excess
            ),
            (3000, 2, 340, 1, 540, 340 - 300 - L1_SLACK_MS)
        );
        let resign = &out.failovers[1];
        assert_eq!(
            (resign.trigger, resign.elections, resign.overhead),
            (9000, 1, 30)
        );
        // b's short term ended with no fault aimed at it: churn, by a resumed process.
        assert_eq!(out.ended_terms, 3);
        assert_eq!(out.unprovoked.len(), 1, "{:?}", out.unprovoked);
        let churn = &out.unprovoked[0];
        assert_eq!(
            (churn.term.term, churn.lasted, churn.by, churn.by_resumed),
            (6, 200, Some(3), true)
        );
        // c's epoch was granted at 3540, while b's lease ran to 3340 + LEASE.
        assert_eq!(churn.challenged_vs_deadline, Some(3540 - (3340 + LEASE)));
        assert!(out.no_successor.is_empty() && out.not_failovers == 0);
    }

    #[test]
    fn a_resign_of_one_role_is_not_aimed_at_the_processs_other_terms() {
        // Process 1 leads this role (1/0) and resigns another one at 1000; at 5000 process 2,
        // resumed from a SIGSTOP at 5010 (logged after the signal), deposes it.
        let mut s = StateLog::new();
        s.register("a");
        s.register("b");
        s.lease("a", pair(1, 0), 0);
        s.lease("b", pair(1, 1), 5000);
        let (terms, _) = terms_of(ROLE, &s.records, LEASE);
        let mut resign = fault(1, 1000, FaultKind::ResignLeader, 1, &[]);
        resign.led = vec![("other".to_owned(), pair(9, 0))];
        let journals = Journals {
            holders: [(pair(1, 0), 1), (pair(1, 1), 2)].into(),
            faults: vec![resign, fault(2, 2000, FaultKind::StopLeader, 3, &[])],
            resumes: vec![(5010, 2)],
            ..Journals::default()
        };
        let run = Run {
            journals: &journals,
            episode_end: &[2000, 9000],
            timing: TIMING,
            run_end: 9000,
        };
        let mut out = Liveness::default();
        analyse_role(ROLE, &terms, &run, &mut out);
        assert_eq!(out.unprovoked.len(), 1, "{out:?}");
        assert!(out.unprovoked[0].by_resumed && out.unprovoked[0].by == Some(2));
        // A kill of process 1 at the same instant would have been aimed at the term.
        let mut killed = journals.faults.clone();
        killed[0].kind = FaultKind::KillLeader;
        let journals = Journals {
            faults: killed,
            holders: journals.holders.clone(),
            ..Journals::default()
        };
        let run = Run {
            journals: &journals,
            episode_end: &[2000, 9000],
            timing: TIMING,
            run_end: 9000,
        };
        let mut out = Liveness::default();
        analyse_role(ROLE, &terms, &run, &mut out);
        assert!(out.unprovoked.is_empty(), "{out:?}");
    }

    #[test]
    fn a_fault_on_a_deposed_leader_or_without_a_successor_is_not_a_failover() {
        let mut s = StateLog::new();
        s.register("a");
        s.register("b");
        s.lease("a", pair(1, 0), 0);
        s.lease("b", pair(1, 1), 2500);
        let (terms, _) = terms_of(ROLE, &s.records, LEASE);
        let journals = Journals {
            holders: [(pair(1, 0), 1), (pair(1, 1), 2)].into(),
            faults: vec![
                // The orchestrator still thought a led at 2600.
                fault(1, 2600, FaultKind::KillLeader, 1, &[pair(1, 0)]),
                // b is stopped and nobody follows it.
                fault(2, 5000, FaultKind::StopLeader, 2, &[pair(1, 1)]),
            ],
            ..Journals::default()
        };
        let run = Run {
            journals: &journals,
            episode_end: &[5000, 9000],
            timing: TIMING,
            run_end: 9000,
        };
        let mut out = Liveness::default();
        analyse_role(ROLE, &terms, &run, &mut out);
        assert!(out.failovers.is_empty(), "{out:?}");
        assert_eq!(out.not_failovers, 1);
        assert_eq!(out.no_successor, vec![(2, ROLE.to_owned())]);
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
        assert_eq!(j.faults[0].led, vec![(ROLE.to_owned(), pair(1, 0))]);
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
