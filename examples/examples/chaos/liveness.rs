//! The liveness figures, measured from the lease records' own instants (the state topic) and
//! the fault log, and reported, never asserted: elections per failover, failover overhead, the
//! simulation's L1 bound, and terms that ended with no fault aimed at them.

use std::collections::HashMap;

use kafka_coordination::core::record::{KeyKind, KeyRef, Lease, MemberId};
use kafka_coordination::core::RoleState;
use kafka_coordination::transport::Record;

use crate::check::Violation;
use crate::format::Pair;
use crate::journal::Journals;

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
    /// The state partition's leader and the coordinator at once (two brokers, or one when a
    /// single broker is both).
    KillStateAndCoordinatorBrokers,
    /// A leader's wall clock ahead, then the leader killed (run/clock.rs).
    ClockAheadLeader,
    /// A standby's wall clock behind.
    ClockBehindStandby,
    /// A leader's wall clock jumps ahead, then behind, by more than a lease.
    ClockJumpLeader,
    /// Network faults (nftables drops between namespaces, healed after a hold): the leader
    /// cut from the role's transaction coordinator, from its state partition's leader, from
    /// its data partition's leader, from every broker; the leader's packets to every broker
    /// dropped (one way), every broker's packets to the leader dropped (the other way).
    CutLeaderFromCoordinator,
    CutLeaderFromStateLeader,
    CutLeaderFromDataLeader,
    CutLeaderFromAll,
    CutLeaderOutbound,
    CutLeaderInbound,
    /// A standby, or every standby, cut from every broker.
    CutStandby,
    CutAllStandbys,
    /// A broker cut from the other two (controller quorum and replication) while clients
    /// still reach it; the same for the controller quorum's leader.
    IsolateBroker,
    IsolateQuorumLeader,
    /// The leader's connections through the proxy: every chunk from a broker 12 s late (above
    /// the 10 s request timeout), or held half-way through a response until the heal.
    SlowLeader,
    StallLeader,
}

impl FaultKind {
    pub const ALL: [FaultKind; 24] = [
        FaultKind::KillLeader,
        FaultKind::StopLeader,
        FaultKind::ResignLeader,
        FaultKind::KillStandby,
        FaultKind::StopStandby,
        FaultKind::KillStateLeaderBroker,
        FaultKind::KillDataLeaderBroker,
        FaultKind::KillCoordinatorBroker,
        FaultKind::KillStateAndCoordinatorBrokers,
        FaultKind::ClockAheadLeader,
        FaultKind::ClockBehindStandby,
        FaultKind::ClockJumpLeader,
        FaultKind::CutLeaderFromCoordinator,
        FaultKind::CutLeaderFromStateLeader,
        FaultKind::CutLeaderFromDataLeader,
        FaultKind::CutLeaderFromAll,
        FaultKind::CutLeaderOutbound,
        FaultKind::CutLeaderInbound,
        FaultKind::CutStandby,
        FaultKind::CutAllStandbys,
        FaultKind::IsolateBroker,
        FaultKind::IsolateQuorumLeader,
        FaultKind::SlowLeader,
        FaultKind::StallLeader,
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
            FaultKind::KillStateAndCoordinatorBrokers => "kill-brokers-state-and-coordinator",
            FaultKind::ClockAheadLeader => "clock-ahead-leader",
            FaultKind::ClockBehindStandby => "clock-behind-standby",
            FaultKind::ClockJumpLeader => "clock-jump-leader",
            FaultKind::CutLeaderFromCoordinator => "cut-leader-from-coordinator",
            FaultKind::CutLeaderFromStateLeader => "cut-leader-from-state-leader",
            FaultKind::CutLeaderFromDataLeader => "cut-leader-from-data-leader",
            FaultKind::CutLeaderFromAll => "cut-leader-from-all",
            FaultKind::CutLeaderOutbound => "cut-leader-outbound",
            FaultKind::CutLeaderInbound => "cut-leader-inbound",
            FaultKind::CutStandby => "cut-standby",
            FaultKind::CutAllStandbys => "cut-all-standbys",
            FaultKind::IsolateBroker => "isolate-broker",
            FaultKind::IsolateQuorumLeader => "isolate-quorum-leader",
            FaultKind::SlowLeader => "slow-leader",
            FaultKind::StallLeader => "stall-leader",
        }
    }

    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// A fault aimed at a role's leader.
    pub fn at_leader(self) -> bool {
        matches!(
            self,
            FaultKind::KillLeader
                | FaultKind::StopLeader
                | FaultKind::ResignLeader
                | FaultKind::CutLeaderFromCoordinator
                | FaultKind::CutLeaderFromStateLeader
                | FaultKind::CutLeaderFromDataLeader
                | FaultKind::CutLeaderFromAll
                | FaultKind::CutLeaderOutbound
                | FaultKind::CutLeaderInbound
                | FaultKind::SlowLeader
                | FaultKind::StallLeader
        )
    }

    /// A fault that moves a member's wall clock.
    pub fn at_clock(self) -> bool {
        matches!(
            self,
            FaultKind::ClockAheadLeader
                | FaultKind::ClockBehindStandby
                | FaultKind::ClockJumpLeader
        )
    }

    /// A network fault (a cut healed after a hold).
    pub fn is_net(self) -> bool {
        FaultKind::ALL[12..].contains(&self)
    }

    /// A fault aimed at a broker.
    pub fn at_broker(self) -> bool {
        matches!(
            self,
            FaultKind::KillStateLeaderBroker
                | FaultKind::KillDataLeaderBroker
                | FaultKind::KillCoordinatorBroker
                | FaultKind::KillStateAndCoordinatorBrokers
                | FaultKind::IsolateBroker
                | FaultKind::IsolateQuorumLeader
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
    /// The broker fault (number, kind) whose episode the term ended in, if any: a broker
    /// fault is aimed at the cluster, not at a member, so such a term counts here.
    pub during_broker_fault: Option<(u64, FaultKind)>,
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
    // Whether a fault was aimed at the term: at its pair or its process while it ran. A
    // broker fault is aimed at the cluster: a healthy leader is meant to keep its term through
    // it, so a term that ends in one counts as unprovoked (and says which).
    let aimed = |t: &Term, end: i64| {
        faults.iter().any(|f| {
            if f.kind.at_broker() {
                return false;
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
                during_broker_fault: faults
                    .iter()
                    .zip(run.episode_end)
                    .find(|(f, &episode)| f.kind.at_broker() && f.at <= end && end <= episode)
                    .map(|(f, _)| (f.n, f.kind)),
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
            // A network cut need not depose the leader (one cut from its data partition's
            // leader keeps renewing): it is a failover only if a successor began in its episode.
            let net_kept = |first: Option<&Term>| {
                f.kind.is_net() && first.is_none_or(|t| t.first_write > episode)
            };
            if net_kept(terms.get(i + 1)) {
                continue;
            }
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

pub use kafka_coordination_examples::stats::quantile;

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
    use kafka_coordination::core::UnixMillis;
    use kafka_coordination::FencingToken;

    const ROLE: &str = "r0";

    fn kinds(v: &[Violation]) -> Vec<&'static str> {
        v.iter().map(Violation::kind).collect()
    }

    fn pair(id: i64, epoch: i16) -> Pair {
        Pair {
            producer_id: id,
            epoch,
        }
    }

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
    fn a_term_that_ends_during_a_broker_fault_counts_against_the_broker_fault() {
        // a leads; the coordinator's broker is killed at 1000 (episode until 9000) and b takes
        // over at 4000: no fault was aimed at a, so its term ended unprovoked, in that episode.
        let mut s = StateLog::new();
        s.register("a");
        s.register("b");
        s.lease("a", pair(1, 0), 0);
        s.lease("b", pair(1, 1), 4000);
        let (terms, _) = terms_of(ROLE, &s.records, LEASE);
        let mut broker = fault(1, 1000, FaultKind::KillCoordinatorBroker, 0, &[]);
        broker.instance = None;
        let journals = Journals {
            holders: [(pair(1, 0), 1), (pair(1, 1), 2)].into(),
            faults: vec![broker],
            ..Journals::default()
        };
        let run = Run {
            journals: &journals,
            episode_end: &[9000],
            timing: TIMING,
            run_end: 9000,
        };
        let mut out = Liveness::default();
        analyse_role(ROLE, &terms, &run, &mut out);
        assert_eq!(out.unprovoked.len(), 1, "{out:?}");
        assert_eq!(
            out.unprovoked[0].during_broker_fault,
            Some((1, FaultKind::KillCoordinatorBroker))
        );
        assert_eq!(out.broker_episodes.len(), 1);
        assert_eq!(out.broker_episodes[0].elections, 1);
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
}
