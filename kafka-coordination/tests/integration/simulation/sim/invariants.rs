//! The invariants, checked after every step (see the module above for each one's statement).

use kafka_coordination::core::machine::Status;
use kafka_coordination::core::record::MemberId;
use kafka_coordination::core::state::RoleState;
use kafka_coordination::core::FencingToken;
use kafka_coordination::transport::Wait;

use super::harness::{Bound, Life, Op, Res, Sim, Watch};
use super::report::Failure;
use super::{
    At, G2_BOUND_MS, HOLD_MS, L1_CALLS, LEASE_MS, LEG_MS, MAX_IO_MS, MAX_SKEW_MS, RECHECK_MS,
    RENEW_MS, STAGGER_MS,
};

impl Sim {
    /// Arms the L1 check for the death of the real leader `died`, which held `pair`.
    pub(super) fn arm_l1(&mut self, died: usize, pair: FencingToken, open_write: bool) -> Res {
        if let Some(w) = self.watch.as_mut().filter(|w| w.pair == pair) {
            // A paused leader crashed: the same death, watched since the pause.
            w.open_write |= open_write;
            return Ok(());
        }
        self.close_settle();
        let state = self.committed_state()?;
        // D counts the leases committed behind a stall too: readers see them once it ends.
        let Some(&deadline) = self.deadlines.get(&pair) else {
            self.stats.l1_skipped += 1;
            self.note(
                None,
                "L1 not armed: no lease of the leader's pair committed",
            );
            return Ok(());
        };
        // A ghost registration ahead of every live standby costs this failover one stagger
        // (and, once passed over, no later one: G1).
        let first_live = self
            .members
            .iter()
            .filter(|m| m.live().is_some())
            .filter_map(|m| state.join_offset(&m.id))
            .min()
            .unwrap_or(i64::MAX);
        let holder = state.lease().map(|e| e.lease.member.clone());
        let ghost_ahead = state.roster().any(|(m, o)| {
            o < first_live && self.ghost_ids.contains(m) && Some(m) != holder.as_ref()
        });
        for m in &mut self.members {
            if let Life::Up(l) = &mut m.life {
                l.rank_high = l.cand.rank();
            }
        }
        // The slowest calls still on the wire count too.
        let on_wire = |acquires: bool| {
            self.members
                .iter()
                .filter_map(|m| m.live())
                .filter_map(|l| l.io.as_ref())
                .filter(|f| matches!(f.op, Op::Acquire { .. }) == acquires)
                .map(|f| f.legs)
                .max()
                .unwrap_or(0)
        };
        self.window_io = on_wire(false);
        self.window_acquire = on_wire(true);
        self.stats.l1_checked += 1;
        let watch = Watch {
            died,
            pair,
            t0: self.now,
            deadline,
            open_write,
            ghost_ahead,
            last: None,
            exhausted: false,
            cleared_at: None,
            successor_deadline: None,
            disturbed: false,
            multi: false,
        };
        if let Some(old) = self.watch.filter(|w| w.multi) {
            return Err(self.fail(
                "L1",
                format!(
                    "the watch of {}'s death at {} (a process crash that took several roles' \
                     leaders) was replaced by another death before the role elected a leader",
                    self.members[old.died].id,
                    At(old.t0)
                ),
            ));
        }
        self.watch = Some(watch);
        let bound = self.l1_bound(&watch);
        self.note(
            None,
            format!(
                "L1 armed: lease deadline {}{}; bound now {}",
                At(deadline),
                if open_write {
                    ", a lease write left open"
                } else {
                    ""
                },
                bound.map_or("(no standby yet)".to_string(), |b| format!(
                    "{} (rank {}{})",
                    At(b.at),
                    b.rank,
                    if b.calm { ", calm" } else { "" }
                ))
            ),
        );
        Ok(())
    }

    /// L1's bound for `w` as things stand: `None` while no member could take over (none is up,
    /// unpaused, registered and ranked).
    ///
    /// For each member j that could take over (rank r):
    /// `max(max(D, M + LEASE) + r x STAGGER, max(F + RECHECK, U + X) + r x STAGGER) + SKEW + k x X + A + H`
    /// (without the second r x STAGGER when nobody could have waited: no stall, no open write):
    ///
    /// * D: the dead pair's latest committed deadline (or a later lease a successor committed
    ///   before it died), or the death itself when that deadline had passed (a paused leader
    ///   that resumed late and died again);
    /// * M: the latest disturbance that can hold a standby back for up to a lease (a failed
    ///   call: backoff <= min(5 s, lease); a contest window that grew: a lost race, or a
    ///   challenge seen under way or announced; an outage extension that grew; a registration
    ///   written while reads stall);
    /// * F: the end of another role's open transaction (reads stall until then; the ranks
    ///   waiting on it, or on an open write, are released together, or each at its first
    ///   check after it resumed, and staggered again);
    /// * U: when j last started or resumed (it finishes the call it was in first);
    /// * X: the slowest call other than an acquire on the wire since the death, A the slowest
    ///   acquire (both at least `MAX_IO_MS`);
    /// * H: when the dead leader left a lease write open, the hold on it (`HOLD_MS`), a
    ///   recheck cycle and, released by its abort, r staggers again;
    /// * when the lease was cleared since the death (a challenger resigned on its way), j counts
    ///   r staggers again from the read that first finds no lease (by its turn, once it is up).
    ///
    /// When `3 X < STAGGER - 2 x SKEW` no rank misses a challenge on its way (a rank's
    /// announcement is in the log within three calls of its turn, however long its acquire
    /// takes; the next rank reads a stagger later, less the skew of two clocks): k =
    /// `L1_CALLS` (read, check, announcement, claim), plus one read when the coordinator's pair
    /// moved without an election (an exhaustion), and the bound is the smallest over the
    /// members. Otherwise every rank may challenge unseen and the last one wins: the bound is
    /// the largest over the members, with one more acquire on the wire in k.
    pub(super) fn l1_bound(&self, w: &Watch) -> Option<Bound> {
        let x = self.window_io.max(MAX_IO_MS);
        let xa = self.window_acquire.max(MAX_IO_MS);
        let fast = 3 * x < STAGGER_MS - 2 * MAX_SKEW_MS;
        // A leader that resumed after its lease ran out and then died: the standbys count
        // from the death, not from the deadline already past.
        let delayed = w.deadline.max(self.delay_mark + LEASE_MS).max(w.t0);
        let base = delayed.max(w.successor_deadline.unwrap_or(i64::MIN));
        let stall = self.stall_until + RECHECK_MS;
        let calls = L1_CALLS + i64::from(w.exhausted) + i64::from(!fast);
        let hold = if w.open_write {
            HOLD_MS + RECHECK_MS + 2 * x
        } else {
            0
        };
        // Whoever waited (a stall, an open write) is released with the other ranks and
        // staggered again from the release.
        let each = self.members.iter().filter_map(|m| {
            let l = m.live()?;
            let eligible = !l.paused
                && matches!(l.cand.status(), Status::Standby | Status::Challenging)
                && l.cand.join_offset().is_some();
            // A read that lowered its rank (a registration ahead of it gone) comes at the turn
            // of the rank it held before.
            let rank = l.cand.rank().max(l.rank_high).filter(|_| eligible)?;
            // A member that (re)started or resumed finishes the call it was in first.
            let ready = m.up_since + x;
            let mut turn = base + rank as i64 * STAGGER_MS;
            if let Some(cleared) = w.cleared_at {
                // With the lease cleared, it counts its rank's staggers from the read that
                // first finds no lease: at its turn at the latest, or once it is up.
                turn = turn.max(cleared).max(ready) + rank as i64 * STAGGER_MS + x;
            }
            let again = rank as i64 * STAGGER_MS;
            let hold = if hold > 0 { hold + again } else { 0 };
            // A member that waited on a stall or an open write is released by its end, or at
            // the first check after it resumed, and then waits its rank's staggers again.
            let waited = w.open_write || stall >= w.t0;
            let released = if waited {
                stall.max(ready) + again
            } else {
                ready
            };
            let at = turn.max(released) + MAX_SKEW_MS + calls * x + xa + hold;
            // Calm: nothing but the death counted, by the dead pair's deadline.
            let calm_turn = w.deadline + rank as i64 * STAGGER_MS;
            let calm = !w.disturbed
                && x == MAX_IO_MS
                && xa == MAX_IO_MS
                && delayed == w.deadline
                && stall <= calm_turn
                && ready <= calm_turn
                && !w.open_write
                && !w.exhausted
                && w.cleared_at.is_none();
            Some(Bound { at, rank, calm })
        });
        if fast {
            each.min_by_key(|b| b.at)
        } else {
            each.max_by_key(|b| b.at)
        }
    }

    pub(super) fn l1_failure(&self, why: &str) -> Failure {
        let w = self.watch.expect("an armed watch");
        let bound = self.l1_bound(&w).or(w.last);
        self.fail(
            "L1",
            format!(
                "after the leader {} died at {}, no live member was elected by {} (lease \
                 deadline {}, rank {}, slowest call {} ms, last disturbance {}, stalls until \
                 {}{}); {why}",
                self.members[w.died].id,
                At(w.t0),
                bound.map_or("-".to_string(), |b| At(b.at).to_string()),
                At(w.deadline),
                bound.map_or("-".to_string(), |b| b.rank.to_string()),
                self.window_io.max(MAX_IO_MS),
                At(self.delay_mark),
                At(self.stall_until),
                if w.open_write {
                    ", a lease write left open"
                } else {
                    ""
                },
            ),
        )
    }

    /// L2 (a): a restarted member's rank counts exactly the members before its registration.
    pub(super) fn check_l2_rank(&mut self, i: usize) -> Res {
        let m = &self.members[i];
        if !m.restarted() {
            return Ok(());
        }
        let Some(l) = m.live() else { return Ok(()) };
        let c = &l.cand;
        let (Some(join), Some(rank)) = (c.join_offset(), c.rank()) else {
            return Ok(());
        };
        if matches!(
            c.status(),
            Status::Leaving | Status::Ended | Status::Registering
        ) {
            return Ok(());
        }
        let expected = tail_rank(c.state(), &m.id, join);
        if rank == expected {
            self.stats.l2_rank_checks += 1;
        } else {
            let roster: Vec<String> = c
                .state()
                .roster()
                .map(|(m, o)| format!("{m}@{o}"))
                .collect();
            return Err(self.fail(
                "L2",
                format!(
                    "restarted {} registered at offset {join} evaluated rank {rank}, but {expected} members \
                     other than itself and the holder precede it (roster {}, holder {})",
                    m.id,
                    roster.join(" "),
                    c.state().lease().map_or("none".to_string(), |e| e.lease.member.to_string())
                ),
            ));
        }
        Ok(())
    }

    /// L2 (b): a restarted member challenges only when another member's lease is over by its
    /// tail rank.
    pub(super) fn check_l2_challenge(&mut self, i: usize) -> Res {
        let m = &self.members[i];
        if !m.restarted() {
            return Ok(());
        }
        let Some(l) = m.live() else { return Ok(()) };
        if l.cand.status() == Status::Leaving {
            // A resigning member supersedes its own pair on the way out: not a challenge.
            return Ok(());
        }
        let c = &l.cand;
        let (Some(entry), Some(join)) = (c.state().lease(), c.join_offset()) else {
            return Ok(());
        };
        if entry.lease.member == m.id {
            return Ok(());
        }
        let rank = tail_rank(c.state(), &m.id, join);
        let turn = entry.lease.deadline.0 + rank as i64 * STAGGER_MS;
        let now_m = self.now + m.skew;
        if now_m < turn {
            return Err(self.fail(
                "L2",
                format!(
                    "restarted {} challenges at {} (its clock) while {}'s lease {} is live until its turn {} \
                     (deadline {} + tail rank {rank} x {STAGGER_MS} ms): it preempts",
                    m.id,
                    At(now_m),
                    entry.lease.member,
                    entry.lease.token,
                    At(turn),
                    At(entry.lease.deadline.0)
                ),
            ));
        }
        self.stats.l2_challenge_checks += 1;
        Ok(())
    }

    pub(super) fn check(&mut self) -> Res {
        let current = self.broker.epoch_of(&self.role);
        if current != self.last_current {
            if let Some(c) = current {
                if self.superseded.contains(&c) {
                    return Err(
                        self.fail("S4", format!("the superseded pair {c} is current again"))
                    );
                }
            }
            if let Some(old) = self.last_current {
                self.superseded.insert(old);
            }
            self.last_current = current;
        }
        let status = self
            .observer
            .describe_epoch(&self.role)
            .map_err(|e| self.fail("S4", format!("describe_epoch failed: {e}")))?;
        if status.token != current.unwrap_or(FencingToken::NO_EPOCH) {
            return Err(self.fail(
                "S4",
                format!(
                    "describe says {} but the coordinator's pair is {}",
                    status.token,
                    current.map_or("none".to_string(), |t| t.to_string())
                ),
            ));
        }
        let mut believers = Vec::new();
        let mut authoritative = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            let Some(l) = m.live() else { continue };
            let token = l.cand.token();
            if let Some(t) = token {
                if current == Some(t) {
                    believers.push(i);
                }
                if m.fenced.contains(&t) {
                    return Err(self.fail(
                        "S3",
                        format!("{} believes it leads with {t}, a pair it saw fenced", m.id),
                    ));
                }
            }
            let session = m.transport.session(&self.role);
            if [token, session]
                .iter()
                .flatten()
                .any(|t| status.authoritative(t))
            {
                authoritative.push(i);
            }
        }
        if let [leader] = believers[..] {
            self.check_l3(leader)?;
        }
        if believers.len() > 1 {
            let names: Vec<String> = believers
                .iter()
                .map(|&i| self.members[i].id.to_string())
                .collect();
            return Err(self.fail(
                "S1",
                format!(
                    "{} believe they lead with the current pair {}",
                    names.join(" and "),
                    current.map_or("none".to_string(), |t| t.to_string())
                ),
            ));
        }
        if authoritative.len() > 1 {
            let names: Vec<String> = authoritative
                .iter()
                .map(|&i| self.members[i].id.to_string())
                .collect();
            return Err(self.fail(
                "S4",
                format!(
                    "{} each hold a token that describe calls authoritative ({})",
                    names.join(" and "),
                    status.token
                ),
            ));
        }
        if self.audit_dirty {
            self.audit_dirty = false;
            self.check_audit(true)?;
        }
        if let Some(w) = self.watch {
            // A paused leader that resumes while the role is still its own leads again: the
            // same member with the dead pair (a later incarnation of it that wrote a claim
            // and resigned before it heard of its election believes it leads with another
            // pair, and was never elected: the watch goes on).
            let back = self.real_leader().filter(|&i| {
                i == w.died
                    && self.members[i]
                        .live()
                        .is_some_and(|l| !l.paused && l.cand.token() == Some(w.pair))
            });
            if back.is_some() && w.multi {
                return Err(self.fail(
                    "L1",
                    "a role whose leader died in a multi-role process crash ended its watch \
                     without an election (\"leader back\")",
                ));
            }
            if back.is_some() {
                self.watch = None;
                self.stats.l1_leader_back += 1;
                self.note(
                    None,
                    "L1 watch over: the paused leader resumed and still leads",
                );
            }
        }
        self.check_g2()
    }

    /// G2: a live member whose registration a leader tombstoned registers again (it reads the
    /// tombstone at its next turn at the latest) within `G2_BOUND_MS`, counted from the
    /// eviction, its last failed call or its resume.
    pub(super) fn check_g2(&mut self) -> Res {
        for i in 0..self.members.len() {
            let m = &self.members[i];
            let Some(since) = m.evicted_since else {
                continue;
            };
            let active = m.live().is_some_and(|l| {
                !l.paused && matches!(l.cand.status(), Status::Standby | Status::Challenging)
            });
            if active && self.now - since > G2_BOUND_MS && self.lenient {
                self.stats.g_violations += 1;
                self.members[i].evicted_since = None;
                continue;
            }
            if active && self.now - since > G2_BOUND_MS {
                return Err(self.fail(
                    "G2",
                    format!(
                        "{} is alive but has not registered again since its registration was \
                         tombstoned at {}: it is lost from the roster",
                        m.id,
                        At(since)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// L3: a live leader with the current pair renews. Unless it is paused, or met trouble (a
    /// failed call, a slow call, a start, a resume, the end of an unavailable or slow window)
    /// since its last accepted
    /// lease write, its next write takes effect at most `RENEW_MS + LEG_MS` after the last one
    /// (the renewal is due `RENEW_MS` after the last one was issued, and a request leg is at
    /// most `LEG_MS`).
    pub(super) fn check_l3(&self, leader: usize) -> Res {
        let m = &self.members[leader];
        if m.live().is_none_or(|l| l.paused)
            || self.now < self.unavailable_until
            || self.now < self.slow_until
        {
            return Ok(());
        }
        let since = m.last_write.max(m.last_trouble).max(self.last_window_end);
        if self.now - since > RENEW_MS + LEG_MS {
            return Err(self.fail(
                "L3",
                format!(
                    "the live leader {} has written no lease since {} ({} ms, renew interval {RENEW_MS} ms) \
                     with nothing in its way",
                    m.id,
                    At(m.last_write),
                    self.now - m.last_write
                ),
            ));
        }
        Ok(())
    }

    /// S2 from the broker's audit log: every new entry carries the pair current at its commit.
    pub(super) fn check_audit(&mut self, this_step: bool) -> Res {
        let new = self.broker.accepted_lease_writes_since(self.audit_seen);
        self.audit_seen += new.len();
        // The audit log is the broker's: other roles' writes are theirs to check.
        for w in new.iter().filter(|w| w.role == self.role) {
            self.stats.audited_writes += 1;
            if self.resigned.contains(&w.token) {
                return Err(self.fail(
                    "R1",
                    format!(
                        "the broker accepted a lease write by {} at offset {} with {}, a pair whose holder completed its resign",
                        w.member, w.offset, w.token
                    ),
                ));
            }
            if w.token != w.current {
                return Err(self.fail(
                    "S2",
                    format!(
                        "the broker accepted a lease write by {} at offset {} with {} while the current pair was {}",
                        w.member, w.offset, w.token, w.current
                    ),
                ));
            }
            if this_step && w.at.0 != self.now {
                return Err(self.fail(
                    "S2",
                    format!(
                        "an accepted write committed at {} surfaced only at {}",
                        At(w.at.0),
                        At(self.now)
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn final_checks(&mut self) -> Res {
        self.check_audit(false)?;
        if self.stats.elections == 0 {
            return Err(self.fail("L1", "no member was ever elected"));
        }
        Ok(())
    }
}

/// The rank a member registered at `join` has when it lands at the tail: the registered
/// members other than itself and the lease holder whose registration precedes its own.
pub(super) fn tail_rank(state: &RoleState, me: &MemberId, join: i64) -> usize {
    // The holder counts unless it leads from this registration (one before its lease record).
    let leading = |m: &MemberId, o: i64| {
        state
            .lease()
            .is_some_and(|e| e.lease.member == *m && o < e.offset)
    };
    state
        .roster()
        .filter(|(m, o)| *o < join && *m != me && !leading(m, *o) && !state.passed_over(m))
        .count()
}
