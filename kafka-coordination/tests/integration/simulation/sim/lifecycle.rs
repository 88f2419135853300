//! What happens to a member: elections, lease commits, appends (with the ghosts a new leader
//! passes over, G1, and the healthy-leader check, L4), the end of a candidate, and its start.

use std::collections::HashSet;

use kafka_coordination::core::machine::{Candidate, EndReason, Status};
use kafka_coordination::core::record::{Key, Lease, MemberId};
use kafka_coordination::core::{FencingToken, UnixMillis};
use kafka_coordination::transport::Coordinator;

use super::harness::{Action, Life, Live, PassedOver, Res, Settle, Sim};
use super::{At, LEASE_MS, LEG_MS, MAX_SKEW_MS, RENEW_MS, SLACK_MS, STAGGER_MS};

impl Sim {
    pub(super) fn on_elected(&mut self, i: usize, token: FencingToken, term: i64) -> Res {
        self.stats.elections += 1;
        self.last_disturbance = self.now;
        self.note(Some(i), format!("ELECTED {token} term {term}"));
        // Terms follow the order in which the coordinator granted the pairs: a pair granted
        // later (which fenced every earlier one) has a larger term. (A member can hear of its
        // election only after a later pair was granted and elected, when its claim's reply was
        // slow: its smaller term then correctly ranks it below its successor.)
        let Some(&order) = self.grant_order.get(&token) else {
            return Err(self.fail("T1", format!("elected with {token}, never granted")));
        };
        let before = self.terms.range(..order).next_back().map(|(_, t)| *t);
        let after = self.terms.range(order + 1..).next().map(|(_, t)| *t);
        if before.is_some_and(|b| b >= term) || after.is_some_and(|a| a <= term) {
            return Err(self.fail(
                "T1",
                format!(
                    "{} was elected with {token} and term {term}; the term of the pair granted                      before is {before:?}, after {after:?}: terms must grow with the grant order",
                    self.members[i].id
                ),
            ));
        }
        self.terms.insert(order, term);
        let names_a_record = self
            .broker
            .accepted_lease_writes()
            .iter()
            .any(|w| w.role == self.role && w.offset == term && w.token == token);
        if !names_a_record {
            return Err(self.fail(
                "T1",
                format!("term {term} is not the offset of a lease record accepted with {token}"),
            ));
        }
        self.stats.terms_checked += 1;
        if self.members[i].fenced.contains(&token) {
            return Err(self.fail(
                "S3",
                format!(
                    "{} was elected with {token}, a pair it saw fenced",
                    self.members[i].id
                ),
            ));
        }
        if !self.granted.contains(&token) {
            return Err(self.fail(
                "S4",
                format!("elected with {token}, which no acquire granted"),
            ));
        }
        if let Some(w) = self.watch.take() {
            let bound = w.last;
            let rank = bound.map_or(0, |b| b.rank);
            let used = self.now - (w.deadline + rank as i64 * STAGGER_MS);
            let calm = bound.is_some_and(|b| b.calm);
            if calm && used > SLACK_MS {
                return Err(self.fail(
                    "L1",
                    format!(
                        "a calm failover took {used} ms past D + r x stagger, more than the \
                         slack of {SLACK_MS} ms"
                    ),
                ));
            }
            if w.multi {
                self.stats.multi_role_l1_met += 1;
                self.stats.multi_role_overhead.record(used);
                if let Some(b) = bound {
                    let margin = b.at - self.now;
                    let m = &mut self.stats.multi_role_min_margin_ms;
                    *m = Some(m.map_or(margin, |m| m.min(margin)));
                }
            }
            if calm {
                self.stats.l1_calm += 1;
                self.stats.l1_worst_ms = self.stats.l1_worst_ms.max(used);
                self.stats.overhead.record(used);
                // The successor compares its own clock with D: by that clock, the overhead is
                // what its calls took.
                let own = used + self.members[i].skew;
                self.stats.overhead_own_clock.record(own);
                if w.ghost_ahead {
                    self.stats.ghost_ahead_failovers += 1;
                }
            }
            self.note(
                None,
                format!(
                    "L1 met: elected {used} ms after D + r x stagger (r = {rank}; {})",
                    match bound {
                        Some(b) if b.calm => format!("calm bound, slack {SLACK_MS} ms"),
                        Some(b) => format!("bound {}", At(b.at)),
                        None => "no bound yet".to_string(),
                    }
                ),
            );
            self.settle = Some(Settle {
                until: self.now + LEASE_MS,
                elections: 0,
            });
        }
        if let Some(st) = self.settle.as_mut().filter(|st| self.now <= st.until) {
            st.elections += 1;
        }
        // G1: what this leader passed over must be gone by its first renewal.
        let me = &self.members[i];
        if let Some(l) = me.live() {
            let join = l.cand.join_offset().unwrap_or(i64::MIN);
            let ahead = l
                .cand
                .state()
                .roster()
                .filter(|(m, o)| *o < join && **m != me.id)
                .map(|(m, o)| (m.clone(), o))
                .collect();
            self.passed_over = Some(PassedOver {
                member: i,
                incarnation: me.incarnation,
                elected_at: self.now,
                ahead,
                troubled: false,
                cleared: HashSet::new(),
            });
        }
        self.members[i].evicted_since = None;
        if !self.evict {
            // G2 without eviction: a live member whose latest registration precedes the new
            // leader's is passed over once it reads the new lease, and must register again.
            let leader_join = self.members[i].live().and_then(|l| l.cand.join_offset());
            let now = self.now;
            for (j, m) in self.members.iter_mut().enumerate() {
                let joined = m.logged_join;
                let behind = m.live().is_some_and(|l| {
                    !l.cand.is_leader()
                        && !matches!(l.cand.status(), Status::Leaving | Status::Ended)
                        && joined.is_some_and(|o| Some(o) < leader_join)
                });
                if j != i && behind && m.evicted_since.is_none() {
                    m.evicted_since = Some(now);
                    self.stats.live_passed_over += 1;
                }
            }
        }
        Ok(())
    }

    /// Ends the churn window of the last failover.
    pub(super) fn close_settle(&mut self) {
        if let Some(st) = self.settle.take() {
            self.stats.failovers += 1;
            if st.elections == 1 {
                self.stats.failovers_one_election += 1;
            }
            if !self.slow_coordinator {
                self.stats.fast_failovers += 1;
                if st.elections == 1 {
                    self.stats.fast_failovers_one_election += 1;
                }
            }
            self.stats.extra_elections += st.elections.saturating_sub(1);
            if st.elections > 1 {
                self.note(
                    None,
                    format!("churn: {} elections in the failover", st.elections),
                );
            }
        }
    }

    /// L1's bookkeeping of a committed lease write (or lease tombstone) with `token`.
    pub(super) fn on_lease_committed(&mut self, token: FencingToken, value: Option<&[u8]>) {
        let Some(value) = value else {
            if let Some(w) = self.watch.as_mut() {
                w.cleared_at = Some(self.now);
            }
            return;
        };
        let Ok(lease) = Lease::decode(value) else {
            return;
        };
        let d = self.deadlines.entry(token).or_insert(lease.deadline.0);
        *d = (*d).max(lease.deadline.0);
        if let Some(w) = self.watch.as_mut() {
            if token == w.pair {
                // A write of the dead leader that was on the wire: it moves D.
                w.deadline = w.deadline.max(lease.deadline.0);
            } else {
                let d = w.successor_deadline.unwrap_or(lease.deadline.0);
                w.successor_deadline = Some(d.max(lease.deadline.0));
            }
            w.cleared_at = None;
        }
    }

    /// Whether an open transaction holds the partition's last stable offset back.
    pub(super) fn partition_stalled(&self) -> bool {
        let lso = self.broker.last_stable_offset(self.partition);
        let end = self.broker.log_end_offset(self.partition);
        matches!((lso, end), (Ok(l), Ok(e)) if l < e)
    }

    /// Bookkeeping of an append that took effect: registrations (G2) and tombstones of other
    /// members' registrations (evictions).
    pub(super) fn on_appended(
        &mut self,
        who: Option<usize>,
        key: &[u8],
        offset: i64,
        registration: bool,
        stalled: bool,
    ) -> Res {
        let Ok(key) = Key::decode(key) else {
            return Ok(());
        };
        let Some(name) = key.member() else {
            return Ok(());
        };
        if let Some(p) = self.passed_over.as_mut() {
            let by_leader = who == Some(p.member);
            if registration || by_leader {
                p.cleared.insert(name.clone());
            }
        }
        if registration {
            if stalled {
                // Its own registration is unreadable: the member counts a lease from now.
                self.delay_mark = self.now;
            }
            if let Some(i) = who.filter(|&i| self.members[i].id == *name) {
                self.members[i].logged_join = Some(offset);
                if self.members[i].evicted_since.take().is_some() {
                    self.stats.g2_rejoined += 1;
                    self.note(Some(i), "registered again after its eviction (G2)");
                }
            }
            return Ok(());
        }
        let Some(i) = who else { return Ok(()) };
        if self.members[i].id == *name {
            return Ok(());
        }
        if !self.evict {
            return Err(self.fail(
                "G3",
                format!(
                    "{} tombstoned {name}'s registration, and members do not evict",
                    self.members[i].id
                ),
            ));
        }
        let leads = self.members[i].live().is_some_and(|l| l.cand.is_leader());
        if leads {
            self.stats.evictions += 1;
        } else {
            self.stats.announcements += 1;
        }
        let ghost = self.ghost_ids.contains(name);
        if ghost {
            self.stats.ghost_evictions += 1;
        }
        let now = self.now;
        let live = self.members.iter_mut().enumerate().find(|(_, m)| {
            m.id == *name
                && m.live().is_some_and(|l| {
                    !l.cand.is_leader()
                        && !matches!(l.cand.status(), Status::Leaving | Status::Ended)
                })
        });
        let evicted_live = live.map(|(j, m)| {
            m.evicted_since = Some(now);
            j
        });
        if evicted_live.is_some() {
            self.stats.live_evictions += 1;
        }
        self.note(
            Some(i),
            format!(
                "{} {name}{}",
                if leads {
                    "evicts"
                } else {
                    "announces its challenge against"
                },
                if ghost {
                    " (a ghost)"
                } else if evicted_live.is_some() {
                    " (alive: it must register again)"
                } else {
                    ""
                }
            ),
        );
        Ok(())
    }

    /// G1: at a new leader's first renewal, no registration it passed over at its election is
    /// still on the roster (unless one of its calls failed in between).
    pub(super) fn check_g1(&mut self, i: usize) -> Res {
        let due = self
            .passed_over
            .as_ref()
            .is_some_and(|p| p.member == i && p.incarnation == self.members[i].incarnation);
        if !due {
            return Ok(());
        }
        let p = self.passed_over.take().expect("checked above");
        if !self.evict {
            // Without eviction the registrations stay, and every reader of the log skips them
            // once it reads the leader's lease (a stall of another role may hide it a while).
            let state = self.committed_state()?;
            let token = self.members[i].live().and_then(|l| l.cand.token());
            let readable = state.lease().is_some_and(|e| Some(e.lease.token) == token);
            if !readable {
                return Ok(());
            }
            for (m, o) in &p.ahead {
                let still = state.join_offset(m) == Some(*o);
                if still && !state.passed_over(m) {
                    return Err(self.fail(
                        "G1",
                        format!(
                            "{} renewed, but {m}'s registration at offset {o}, ranked ahead of \
                             it at its election, still counts in the ranks",
                            self.members[i].id
                        ),
                    ));
                }
            }
            self.stats.g1_checked += 1;
            return Ok(());
        }
        // A failed call, or calls slow enough that the renewal fell due first (the renewal
        // comes before the evictions left), only delays the tombstones.
        // (A slow claim counts: its trouble ends at the election itself.)
        if p.troubled || self.members[i].last_trouble >= p.elected_at {
            return Ok(());
        }
        for (m, o) in &p.ahead {
            let kept = !p.cleared.contains(m);
            if kept && self.lenient {
                self.stats.g_violations += 1;
                return Ok(());
            }
            if kept {
                return Err(self.fail(
                    "G1",
                    format!(
                        "{} renewed, but never tombstoned {m}'s registration at offset {o}, \
                         ranked ahead of it at its election (nor did {m} register again)",
                        self.members[i].id
                    ),
                ));
            }
        }
        self.stats.g1_checked += 1;
        Ok(())
    }

    /// The real leader, if it is healthy: unpaused, not resigning, on schedule (a lease write
    /// within `RENEW_MS + LEG_MS`) and untroubled since its last accepted write, with the
    /// broker neither unavailable nor slow (L3's conditions).
    pub(super) fn healthy_leader(&self) -> Option<usize> {
        let i = self.real_leader()?;
        let m = &self.members[i];
        let l = m.live()?;
        // A resigning leader no longer renews (its exit comes first): its lease runs out, or
        // its exit clears it, and a standby may take the role.
        let healthy = !l.paused
            && l.cand.status() != Status::Leaving
            && self.now >= self.unavailable_until
            && self.now >= self.slow_until
            && m.last_trouble <= m.last_write
            && self.last_window_end <= m.last_write
            && self.now - m.last_write <= RENEW_MS + LEG_MS;
        healthy.then_some(i)
    }

    /// The pair of the healthy leader, if one leads.
    pub(super) fn healthy_pair(&self) -> Option<FencingToken> {
        let i = self.healthy_leader()?;
        self.members[i].live()?.cand.token()
    }

    /// L4: a healthy leader is never challenged. A challenge rests on the member's latest read
    /// and (once it checks before challenging) its latest check. When the same healthy leader
    /// already led at both (a healthy leader's lease runs at least `LEASE_MS - RENEW_MS - 2 x
    /// LEG_MS` past now), the read held its live lease or stalled, and the check named its
    /// pair: no AcquireEpoch may follow. (A challenge whose inputs came before that leader's
    /// election is the race a check cannot see.)
    pub(super) fn check_l4(&mut self, i: usize) -> Res {
        self.stats.l4_checked += 1;
        let m = &self.members[i];
        let violated =
            m.read_healthy.is_some() && m.check_healthy.is_none_or(|check| check == m.read_healthy);
        if violated && self.lenient {
            self.stats.l4_violations += 1;
        } else if violated {
            let leader = self
                .healthy_leader()
                .map_or("a healthy leader".to_string(), |j| {
                    self.members[j].id.to_string()
                });
            return Err(self.fail(
                "L4",
                format!(
                    "{} challenges, although its latest read took effect while {leader} led and \
                     renewed on schedule",
                    self.members[i].id
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn on_ended(&mut self, i: usize, reason: EndReason) -> Res {
        self.last_disturbance = self.now;
        let (cleanup, held, exit_trouble) = match self.members[i].live() {
            Some(l) => (Some(l.cand.cleanup()), l.held.clone(), l.exit_trouble),
            None => (None, Vec::new(), true),
        };
        self.note(
            Some(i),
            format!(
                "ENDED: {reason} (cleanup: {})",
                cleanup.map_or("-".into(), |c| c.to_string())
            ),
        );
        // As the drivers do: the transport lets go of whatever session it holds for the role.
        self.members[i].transport.release_role(&self.role);
        // Judged by the harness, not by the candidate's own report: every resign whose exit met
        // no failed call must leave none of its pairs current.
        if reason == EndReason::Resigned && !exit_trouble {
            if cleanup.is_some_and(|c| !c.complete()) {
                return Err(self.fail(
                    "R1",
                    format!(
                        "{} resigned with no failed call on the way out, yet reports an incomplete exit: {}",
                        self.members[i].id,
                        cleanup.map_or(String::new(), |c| c.to_string())
                    ),
                ));
            }
            let current = self.broker.epoch_of(&self.role);
            for t in held {
                if current == Some(t) {
                    return Err(self.fail(
                        "R1",
                        format!(
                            "{} resigned, but its pair {t} is still the current one (authoritative)",
                            self.members[i].id
                        ),
                    ));
                }
                self.resigned.insert(t);
            }
            self.stats.r1_checked += 1;
        }
        self.members[i].life = Life::Down;
        self.members[i].evicted_since = None;
        self.members[i].crashed = false;
        let delay = match reason {
            EndReason::Fenced { .. } => self.rng.range(200, 5_000),
            // Half the resigns are a balancing member's moves: it registers again at once
            // (at the back), as a fleet's leader does after a hand-over and a standby after
            // withdrawing to stand behind the member that should have the role.
            EndReason::Resigned if self.rng.chance(1, 2) => {
                self.stats.balancing_moves += 1;
                self.rng.range(0, 300)
            }
            EndReason::Resigned => self.rng.range(1_000, 15_000),
            EndReason::Unavailable | EndReason::Failed => {
                return Err(self.fail(
                    "contract",
                    format!("ended {reason:?}: no give-up time and no fatal error in the model"),
                ));
            }
        };
        self.schedule(self.now + delay, Action::Start { member: i });
        Ok(())
    }

    pub(super) fn start(&mut self, i: usize) -> Res {
        if self.members[i].live().is_some() {
            return Ok(());
        }
        let mut fresh = self.members[i].incarnation == 0 || self.rng.chance(1, 2);
        let renamed = self.members[i].crashed && self.rng.chance(1, 4);
        if renamed {
            // A pod that comes back under a new name: the old registration stays behind, a
            // ghost that never challenges.
            let old = self.members[i].id.clone();
            let name = format!("m{i}.{}", self.members[i].incarnation);
            self.members[i].id = MemberId::new(name.as_str()).expect("valid member");
            self.ghost_ids.insert(old);
            self.stats.renamed += 1;
            fresh = true;
        }
        if fresh && self.members[i].incarnation > 0 {
            let name = self.members[i].id.as_str().to_string();
            self.members[i].transport = self.broker.transport(name);
        }
        self.start_candidate(i, fresh, renamed, true)
    }

    /// Starts a new incarnation of member `i` (its name, transport and skew already chosen;
    /// with `redraw_skew`, a restart draws a corrected clock a quarter of the time).
    pub(super) fn start_candidate(
        &mut self,
        i: usize,
        fresh: bool,
        renamed: bool,
        redraw_skew: bool,
    ) -> Res {
        self.members[i].crashed = false;
        self.members[i].evicted_since = None;
        self.members[i].up_since = self.now;
        self.members[i].incarnation += 1;
        if self.members[i].restarted() {
            self.stats.restarts += 1;
            if redraw_skew && self.rng.chance(1, 4) {
                // The process came back with a corrected clock.
                self.members[i].skew = self.rng.range(-MAX_SKEW_MS, MAX_SKEW_MS);
            }
        }
        let now_m = UnixMillis(self.now + self.members[i].skew);
        let mut cand = Candidate::new(
            self.role.clone(),
            self.members[i].id.clone(),
            self.timing,
            now_m,
        )
        .map_err(|e| self.fail("harness", format!("Candidate::new: {e}")))?;
        cand.set_evict_passed_over(self.evict);
        if self.hosted {
            // As a host does (the same call): the role's renewals run at a phase of their own,
            // so the roles of one process do not all renew (and run out) together.
            cand.spread_renewals();
        }
        self.members[i].life = Life::Up(Box::new(Live {
            cand,
            io: None,
            paused: false,
            held: Vec::new(),
            exit_acquire: false,
            exit_trouble: false,
            contest_seen: None,
            outage_seen: None,
            rank_high: None,
        }));
        self.members[i].last_trouble = self.members[i].last_trouble.max(self.now);
        self.note(
            Some(i),
            format!(
                "start ({} transport{})",
                if fresh { "new" } else { "same" },
                if renamed { ", a new name" } else { "" }
            ),
        );
        self.drive(i, None)
    }
}
