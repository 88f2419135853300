//! The faults drawn from the seed: crashes, pauses, resigns, failed calls, lost replies,
//! unavailable and slow windows, epoch exhaustion, compaction and stalls.

use kafka_coordination::core::machine::Event;
use kafka_coordination::core::record::{Key, Lease};
use kafka_coordination::core::UnixMillis;
use kafka_coordination::error::ErrorKind;
use kafka_coordination::memory::{BrokerOp, EXHAUSTED_EPOCH};
use kafka_coordination::transport::Wait;

use super::harness::{Action, Crashed, Life, Live, Res, Rng, Sim};
use super::{ms, At, LEASE_MS, QUIET_BEFORE_MS};

impl Sim {
    pub(super) fn on_agenda(&mut self, action: Action) -> Res {
        let calm = self.disturb(matches!(action, Action::Fault));
        match action {
            Action::Fault => {
                let kind = self.pick_fault(calm);
                // The next fault is on the agenda before this one runs, so that a death's L1
                // check sees it. Deaths are followed by a long gap more often than other faults.
                let death = matches!(kind, "crash-leader" | "pause-leader");
                let long = if death {
                    self.rng.chance(3, 4)
                } else {
                    self.rng.chance(1, 2)
                };
                let gap = if long {
                    self.rng.range(6_000, 18_000)
                } else {
                    self.rng.range(300, 4_000)
                };
                if self.now + gap <= self.end {
                    self.schedule(self.now + gap, Action::Fault);
                }
                self.fault(kind)?;
            }
            Action::Start { member } => {
                if self.members[member].live().is_some() {
                    return Err(
                        self.fail("harness", "a start of a live member was left on the agenda")
                    );
                }
                if !self.hosted {
                    self.start(member)?;
                } else if self.members[member].frozen {
                    // Its process is paused: the rejoin waits for the resume.
                    self.deferred.push(member);
                } else {
                    // A rejoin of this role only: the process, its transport, name and clock
                    // stay as they are.
                    self.start_candidate(member, false, false, false)?;
                }
            }
            Action::Resume {
                member,
                incarnation,
            } => {
                let current = self.members[member].incarnation == incarnation;
                let paused = self.members[member].live().is_some_and(|l| l.paused);
                if !(current && paused) {
                    return Err(self.fail("harness", "a stale resume was left on the agenda"));
                }
                self.resume(member);
            }
            Action::EndUnavailable => {
                self.last_window_end = self.now;
                self.broker.set_partition_unavailable(self.partition, false);
                self.note(None, "partition available again");
            }
            Action::EndSlow => {
                self.last_window_end = self.now;
                self.note(None, "slow window over");
            }
            Action::Ghost {
                member,
                transport,
                op,
            } => {
                self.note(
                    Some(member),
                    format!("(ghost of an earlier incarnation) {}", op.name()),
                );
                self.execute(None, &transport, &op)?;
            }
        }
        Ok(())
    }

    /// A paused member resumes.
    pub(super) fn resume(&mut self, member: usize) {
        let now = self.now;
        let m = &mut self.members[member];
        let Some(l) = m.live_mut().filter(|l| l.paused) else {
            return;
        };
        l.paused = false;
        m.last_trouble = m.last_trouble.max(now);
        m.up_since = now;
        if let Some(since) = m.evicted_since.as_mut() {
            *since = now;
        }
        self.note(Some(member), "resumed");
    }

    /// The preamble of every agenda action: a disturbance (L1's calm bound no longer applies
    /// to an armed watch); a fault also closes the churn window of the last failover.
    /// Returns whether the role was calm before it.
    pub(super) fn disturb(&mut self, fault: bool) -> bool {
        let calm = self.now - self.last_disturbance >= QUIET_BEFORE_MS;
        self.last_disturbance = self.now;
        if let Some(w) = self.watch.as_mut() {
            w.disturbed = true;
        }
        if fault {
            // Elections after a fault are not churn of the failover before it.
            self.close_settle();
        }
        calm
    }

    /// Opens (or extends) an unavailable window of the role's partition until `until`.
    pub(super) fn open_unavailable(&mut self, until: i64) {
        let until = self.unavailable_until.max(until);
        self.unavailable_until = until;
        self.broker.set_partition_unavailable(self.partition, true);
        self.agenda
            .retain(|s| !matches!(s.action, Action::EndUnavailable));
        self.schedule(until, Action::EndUnavailable);
        self.note(None, format!("partition unavailable until {}", At(until)));
    }

    /// Opens (or extends) a slow window of the broker until `until`.
    pub(super) fn open_slow(&mut self, until: i64) {
        let until = self.slow_until.max(until);
        self.slow_until = until;
        self.agenda.retain(|s| !matches!(s.action, Action::EndSlow));
        self.schedule(until, Action::EndSlow);
        self.note(None, format!("broker slow until {}", At(until)));
    }

    pub(super) fn up_members(&self, unpaused: bool) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| {
                self.members[i]
                    .live()
                    .is_some_and(|l| !unpaused || !l.paused)
            })
            .collect()
    }

    pub(super) fn pick_fault(&mut self, calm: bool) -> &'static str {
        pick_fault(&mut self.rng, calm)
    }

    pub(super) fn fault(&mut self, kind: &'static str) -> Res {
        let leader = self
            .real_leader()
            .filter(|&i| self.members[i].live().is_some_and(|l| !l.paused));
        let target = |sim: &mut Sim, prefer_leader: bool, unpaused: bool| -> Option<usize> {
            if prefer_leader && leader.is_some() {
                return leader;
            }
            let up = sim.up_members(unpaused);
            if up.is_empty() {
                None
            } else {
                Some(sim.rng.pick(&up))
            }
        };
        match kind {
            "crash-leader" | "crash-any" => {
                if let Some(i) = target(self, kind == "crash-leader", false) {
                    return self.crash(i);
                }
            }
            "pause-leader" | "pause-any" => {
                if let Some(i) = target(self, kind == "pause-leader", true) {
                    return self.pause(i);
                }
            }
            "resign-leader" | "resign-any" => {
                if let Some(i) = target(self, kind == "resign-leader", true) {
                    self.stats.resigns += 1;
                    self.note(Some(i), "asked to resign");
                    return self.drive(i, Some((Event::Resign, None)));
                }
            }
            "exhaust" | "exhaust-smaller-pid" => {
                let current = self.broker.epoch_of(&self.role);
                let epoch = EXHAUSTED_EPOCH - self.rng.range(0, 2) as i16;
                if current.is_some_and(|c| c.producer_epoch < epoch) {
                    let smaller = (kind == "exhaust-smaller-pid")
                        .then(|| self.broker.next_producer_id_smaller());
                    let pair = self.broker.force_epoch(&self.role, epoch);
                    self.stats.exhaustions += 1;
                    if let Some(w) = self.watch.as_mut() {
                        w.exhausted = true;
                    }
                    self.note(
                        None,
                        format!(
                            "force_epoch -> {pair}{}",
                            smaller.map_or(String::new(), |p| format!(", next producer id {p}"))
                        ),
                    );
                    return Ok(());
                }
            }
            "foreign-stall" => {
                // The holder of another role on the same partition dies in the middle of a
                // write: reads of the partition stall until its transaction times out.
                let timeout = self.rng.range(1_000, 8_000);
                let key = Key::lease(self.other_role.clone()).encode();
                let end = self.broker.log_end_offset(self.partition).ok();
                let opened = self
                    .other_holder
                    .acquire_epoch(&self.other_role, ms(timeout))
                    .and_then(|token| {
                        self.other_holder.begin_lease_write_and_crash(
                            self.partition,
                            &key,
                            Some(b"stalled"),
                            token,
                        )
                    });
                // Open when the write took effect, even if its reply was lost.
                if self.broker.log_end_offset(self.partition).ok() > end {
                    self.stats.foreign_stalls += 1;
                    self.stall_until = self.stall_until.max(self.now + timeout);
                    self.note(
                        None,
                        format!(
                            "role {} opens a transaction and dies: reads stall until {}",
                            self.other_role,
                            At(self.now + timeout)
                        ),
                    );
                } else if let Err(e) = opened {
                    self.note(None, format!("foreign stall not opened: {e}"));
                }
                return Ok(());
            }
            "compact" => {
                let removed = self
                    .broker
                    .compact(self.partition)
                    .map_err(|e| self.fail("harness", format!("compact: {e}")))?;
                self.note(None, format!("compacted: {removed} entries removed"));
                return Ok(());
            }
            "unavailable" => {
                let until = self.now + self.rng.range(300, 6_000);
                self.open_unavailable(until);
                self.stats.broker_faults += 1;
                return Ok(());
            }
            "slow" => {
                let until = self.now + self.rng.range(1_000, 8_000);
                self.open_slow(until);
                self.stats.broker_faults += 1;
                return Ok(());
            }
            "lose-replies" => {
                let op = self.rng.pick(&[
                    BrokerOp::Acquire,
                    BrokerOp::Read,
                    BrokerOp::Append,
                    BrokerOp::WriteLease,
                ]);
                let n = self.rng.range(1, 2) as usize;
                self.broker.lose_next_reply_op(op, n);
                self.stats.broker_faults += 1;
                self.note(None, format!("the next {n} {op} replies will be lost"));
                return Ok(());
            }
            _ => {}
        }
        // "fail-ops", and the fallback of a fault without a target.
        let op = self.rng.pick(&[
            BrokerOp::Acquire,
            BrokerOp::Read,
            BrokerOp::Append,
            BrokerOp::WriteLease,
        ]);
        let n = self.rng.range(1, 4) as usize;
        self.broker.fail_next_op(op, n, ErrorKind::Retriable);
        self.stats.broker_faults += 1;
        self.note(None, format!("the next {n} {op} calls will fail"));
        Ok(())
    }

    pub(super) fn crash(&mut self, i: usize) -> Res {
        let Some(crashed) = self.crash_begin(i) else {
            return Ok(());
        };
        self.members[i].transport.crash();
        self.crash_end(i, crashed, None)
    }

    /// The first half of a crash of member `i`: its candidate is dropped; a leader may leave
    /// a lease write open, a request on the wire may land later (a ghost). `None` when the
    /// member was down. The caller then drops the transport's sessions (once per process) and
    /// calls [`crash_end`](Self::crash_end).
    pub(super) fn crash_begin(&mut self, i: usize) -> Option<Crashed> {
        let was_real_leader = self.real_leader() == Some(i);
        let Life::Up(live) = std::mem::replace(&mut self.members[i].life, Life::Down) else {
            return None;
        };
        let Live { cand, io, .. } = *live;
        self.stats.crashes += 1;
        self.members[i].crashed = true;
        self.members[i].evicted_since = None;
        let held = cand.token();
        let transport = self.members[i].transport.clone();
        let mut open = false;
        if let Some(token) = cand.token() {
            if self.rng.chance(1, 3) {
                let now_m = UnixMillis(self.now + self.members[i].skew);
                let lease = Lease {
                    member: self.members[i].id.clone(),
                    token,
                    granted_at: now_m,
                    deadline: now_m + self.timing.lease_duration,
                };
                let key = Key::lease(self.role.clone()).encode();
                self.audit_dirty = true;
                // Open when it took effect, even if its reply was lost (an injected fault).
                let end = self.broker.log_end_offset(self.partition).ok();
                let _ = transport.begin_lease_write_and_crash(
                    self.partition,
                    &key,
                    Some(&lease.encode()),
                    token,
                );
                open = self.broker.log_end_offset(self.partition).ok() > end;
                if open {
                    self.stats.open_writes += 1;
                }
            }
        }
        let mut ghost = false;
        if let Some(f) = io {
            if let Some(at) = f.effect_at {
                if self.rng.chance(1, 2) {
                    ghost = true;
                    self.schedule(
                        at,
                        Action::Ghost {
                            member: i,
                            transport: Box::new(transport.clone()),
                            op: f.op,
                        },
                    );
                }
            }
        }
        Some(Crashed {
            was_real_leader,
            held,
            open,
            ghost,
        })
    }

    /// The second half of a crash: the restart (drawn here, or at `back` for a process of a
    /// multi-role run, whose restart the world schedules), the trace, and L1's watch when the
    /// member led.
    pub(super) fn crash_end(&mut self, i: usize, c: Crashed, back: Option<i64>) -> Res {
        let Crashed {
            was_real_leader,
            held,
            open,
            ghost,
        } = c;
        // A crash while paused: the resume is moot.
        self.agenda
            .retain(|s| !matches!(s.action, Action::Resume { member, .. } if member == i));
        let back = match back {
            Some(at) => at,
            None => {
                let at = self.now + self.rng.range(500, 20_000);
                self.schedule(at, Action::Start { member: i });
                at
            }
        };
        self.note(
            Some(i),
            format!(
                "CRASH{}{}{}, restarts at {}",
                if was_real_leader { " (the leader)" } else { "" },
                if open { ", lease write left open" } else { "" },
                if ghost {
                    ", a request still on the wire"
                } else {
                    ""
                },
                At(back)
            ),
        );
        if was_real_leader {
            self.stats.leader_crashes += 1;
            if let Some(pair) = held {
                self.arm_l1(i, pair, open)?;
            }
        }
        Ok(())
    }

    pub(super) fn pause(&mut self, i: usize) -> Res {
        let until = self.now + self.rng.range(LEASE_MS + 500, 3 * LEASE_MS + 4_000);
        self.pause_until(i, until)
    }

    /// Pauses member `i` until `until`. Single-role runs schedule its resume; a multi-role
    /// run's world resumes the whole process.
    pub(super) fn pause_until(&mut self, i: usize, until: i64) -> Res {
        let was_real_leader = self.real_leader() == Some(i);
        let held = self.members[i].live().and_then(|l| l.cand.token());
        let incarnation = self.members[i].incarnation;
        {
            let Some(l) = self.members[i].live_mut() else {
                return Ok(());
            };
            l.paused = true;
        }
        self.stats.pauses += 1;
        if !self.hosted {
            self.schedule(
                until,
                Action::Resume {
                    member: i,
                    incarnation,
                },
            );
        }
        self.note(
            Some(i),
            format!(
                "PAUSE{} until {}",
                if was_real_leader { " (the leader)" } else { "" },
                At(until)
            ),
        );
        if was_real_leader {
            self.stats.leader_pauses += 1;
            // A request still on the wire may extend the lease after the pause began: the
            // watch follows D.
            if let Some(pair) = held {
                self.arm_l1(i, pair, false)?;
            }
        }
        Ok(())
    }
}

/// Draws a fault kind (the leader's death more often in a calm system).
pub(super) fn pick_fault(rng: &mut Rng, calm: bool) -> &'static str {
    const KINDS: [(u64, &str); 14] = [
        (14, "crash-leader"),
        (8, "crash-any"),
        (10, "pause-leader"),
        (5, "pause-any"),
        (6, "resign-leader"),
        (3, "resign-any"),
        (10, "fail-ops"),
        (5, "lose-replies"),
        (5, "unavailable"),
        (5, "slow"),
        (4, "exhaust"),
        (2, "exhaust-smaller-pid"),
        (3, "compact"),
        (4, "foreign-stall"),
    ];
    if calm && rng.chance(1, 2) {
        // A calm system is where L1 can be checked: kill the leader more often there.
        return if rng.chance(1, 2) {
            "crash-leader"
        } else {
            "pause-leader"
        };
    }
    let total: u64 = KINDS.iter().map(|k| k.0).sum();
    let mut roll = rng.below(total);
    for (w, k) in KINDS {
        if roll < w {
            return k;
        }
        roll -= w;
    }
    KINDS[0].1
}
