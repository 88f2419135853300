//! A member's calls: the latency of each leg, driving the candidate, and what each call does
//! on the broker.

use std::time::Duration;

use kafka_coordination::core::machine::{Command, Event, Status};
use kafka_coordination::core::{FencingToken, UnixMillis};
use kafka_coordination::error::{ErrorKind, TransportError};
use kafka_coordination::memory::MemoryTransport;
use kafka_coordination::transport::Wait;

use super::harness::{InFlight, Op, Res, Rng, Sim};
use super::{At, LEG_MS, SLOW_ACQUIRE_MS, SLOW_LEG_MS, STAGGER_MS};

impl Sim {
    pub(super) fn latency(&mut self, op: &Op) -> (i64, i64) {
        if self.slow_coordinator && matches!(op, Op::Acquire { .. }) && self.rng.chance(1, 3) {
            // The coordinator takes its time: the acquire reaches it only after the next
            // rank's turn may have come.
            self.stats.slow_acquires += 1;
            let req = self.rng.range(STAGGER_MS / 2, SLOW_ACQUIRE_MS);
            let rep = self.rng.range(0, LEG_MS);
            return (req, rep);
        }
        let slow = self.now < self.slow_until;
        let leg = |rng: &mut Rng| {
            if slow && rng.chance(1, 2) {
                rng.range(0, SLOW_LEG_MS)
            } else {
                rng.range(0, LEG_MS)
            }
        };
        if !slow && self.rng.chance(1, 2) {
            return (0, 0);
        }
        let req = leg(&mut self.rng);
        let rep = leg(&mut self.rng);
        (req, rep)
    }

    /// Hands `first` (an event, and the token of a fenced write) to member `i`, then drains its
    /// commands and runs its I/O until something is on the wire or it waits on its timer.
    pub(super) fn drive(&mut self, i: usize, first: Option<(Event, Option<FencingToken>)>) -> Res {
        let mut pending = first;
        for _round in 0..10_000 {
            let now_m = UnixMillis(self.now + self.members[i].skew);
            let mut was_tick = false;
            if let Some((event, fenced_token)) = pending.take() {
                was_tick = matches!(event, Event::Tick);
                let read = matches!(event, Event::RecordsRead { .. });
                match &event {
                    Event::Tick => {}
                    Event::Fenced => {
                        self.stats.fenced_events += 1;
                        self.last_disturbance = self.now;
                        if let Some(t) = fenced_token {
                            self.members[i].fenced.insert(t);
                        }
                        self.note(
                            Some(i),
                            format!(
                                "<- Fenced ({})",
                                fenced_token.map_or("-".into(), |t| t.to_string())
                            ),
                        );
                    }
                    Event::Failed => {
                        if let Some(live) = self.members[i].live_mut() {
                            if live.cand.status() == Status::Leaving {
                                live.exit_trouble = true;
                            }
                        }
                        self.members[i].last_trouble = self.members[i].last_trouble.max(self.now);
                        self.stats.failed_events += 1;
                        self.last_disturbance = self.now;
                        // A standby backs off (at most min(5 s, lease)) after a failure.
                        self.delay_mark = self.now;
                        if let Some(p) = self.passed_over.as_mut().filter(|p| p.member == i) {
                            p.troubled = true;
                        }
                        if let Some(since) = self.members[i].evicted_since.as_mut() {
                            *since = self.now;
                        }
                        self.note(Some(i), "<- Failed");
                    }
                    e => {
                        if self.detail {
                            self.note(Some(i), format!("<- {}", short_event(e)));
                        }
                    }
                }
                let live = self.members[i].live_mut().expect("driving a live member");
                let name = event.name();
                if let Err(e) = live.cand.handle(now_m, event) {
                    return Err(self.fail("contract", format!("the candidate refused {name}: {e}")));
                }
                let contest = live.cand.contested_until();
                let outage = live.cand.outage_until();
                let grew = (contest.is_some() && contest > live.contest_seen)
                    || (outage.is_some() && outage > live.outage_seen);
                live.contest_seen = contest;
                live.outage_seen = outage;
                live.rank_high = live.rank_high.max(live.cand.rank());
                if grew {
                    // A lost race or a challenge seen under way: this member counts its turn
                    // from a lease duration later. So, at most, does a member whose calls
                    // failed for a while: the lease it read was written before they began, so
                    // its deadline plus the blind time is at most a lease from now.
                    self.delay_mark = self.now;
                }
                if read {
                    self.check_l2_rank(i)?;
                }
            }
            let mut commands = Vec::new();
            {
                let live = self.members[i].live_mut().expect("driving a live member");
                while let Some(cmd) = live.cand.poll_command() {
                    commands.push(cmd);
                }
            }
            let mut started: Option<Op> = None;
            let mut ended = None;
            for cmd in commands {
                match cmd {
                    Command::Elected { token, term } => self.on_elected(i, token, term)?,
                    Command::Deposed { token } => {
                        self.members[i].fenced.insert(token);
                        self.stats.depositions += 1;
                        self.last_disturbance = self.now;
                        self.note(Some(i), format!("DEPOSED {token}"));
                    }
                    Command::Ended { reason } => ended = Some(reason),
                    io => {
                        let op = self.command_op(i, io)?;
                        let outstanding = self.members[i].live().is_some_and(|l| l.io.is_some());
                        if started.is_some() || outstanding {
                            return Err(self.fail(
                                "contract",
                                format!(
                                    "a second I/O command ({}) while one is outstanding",
                                    op.name()
                                ),
                            ));
                        }
                        started = Some(op);
                    }
                }
            }
            if let Some(reason) = ended {
                if started.is_some() {
                    return Err(self.fail("contract", "I/O issued together with Ended"));
                }
                return self.on_ended(i, reason);
            }
            let Some(op) = started else {
                if was_tick {
                    let timeout = self.members[i].live().and_then(|l| l.cand.poll_timeout());
                    if let Some(at) = timeout.filter(|at| *at <= now_m) {
                        return Err(self.fail(
                            "contract",
                            format!(
                                "a due Tick did nothing and the timeout {} stays due: busy loop",
                                At(at.0)
                            ),
                        ));
                    }
                }
                return Ok(());
            };
            let (req, rep) = self.latency(&op);
            if self.watch.is_some() {
                if matches!(op, Op::Acquire { .. }) {
                    self.window_acquire = self.window_acquire.max(req + rep);
                } else {
                    self.window_io = self.window_io.max(req + rep);
                }
            }
            if req > LEG_MS || rep > LEG_MS {
                // A slow call is trouble until it completes (L3).
                let m = &mut self.members[i];
                m.last_trouble = m.last_trouble.max(self.now + req + rep);
            }
            if self.detail {
                let tok = op.token().map_or(String::new(), |t| format!(" {t}"));
                self.note(
                    Some(i),
                    format!("-> {}{tok} (legs {req}+{rep} ms)", op.name()),
                );
            }
            if req > 0 {
                let live = self.members[i].live_mut().expect("live");
                live.io = Some(InFlight {
                    op,
                    effect_at: Some(self.now + req),
                    reply_ms: rep,
                    answer: None,
                    answer_at: 0,
                    legs: req + rep,
                });
                return Ok(());
            }
            let transport = self.members[i].transport.clone();
            let answer = self.execute(Some(i), &transport, &op)?;
            if rep > 0 {
                let live = self.members[i].live_mut().expect("live");
                live.io = Some(InFlight {
                    op,
                    effect_at: None,
                    reply_ms: rep,
                    answer: Some(answer),
                    answer_at: self.now + rep,
                    legs: req + rep,
                });
                return Ok(());
            }
            pending = Some((answer, op.token()));
        }
        Err(self.fail(
            "contract",
            "livelock: 10000 rounds of zero-latency I/O in one step",
        ))
    }

    pub(super) fn command_op(&mut self, i: usize, cmd: Command) -> Res<Op> {
        Ok(match cmd {
            Command::Append {
                partition,
                key,
                value,
            } => Op::Append {
                partition,
                key,
                value,
            },
            Command::ReadPartition {
                partition,
                from_offset,
                ..
            } => Op::Read {
                partition,
                from: from_offset,
            },
            Command::AcquireEpoch {
                transactional_id,
                transaction_timeout,
            } => {
                if transactional_id != self.role {
                    return Err(
                        self.fail("contract", format!("acquire for role {transactional_id}"))
                    );
                }
                self.check_l2_challenge(i)?;
                let exit = self.members[i]
                    .live()
                    .is_some_and(|l| l.cand.status() == Status::Leaving);
                if let Some(live) = self.members[i].live_mut() {
                    live.exit_acquire = exit;
                }
                if !exit {
                    self.check_l4(i)?;
                }
                Op::Acquire {
                    timeout: transaction_timeout,
                }
            }
            Command::WriteLease {
                partition,
                key,
                value,
                token,
            } => Op::Write {
                partition,
                key,
                value,
                token,
            },
            Command::DescribeRole { transactional_id } => {
                if transactional_id != self.role {
                    return Err(
                        self.fail("contract", format!("describe for role {transactional_id}"))
                    );
                }
                Op::Describe
            }
            other => return Err(self.fail("harness", format!("not an I/O command: {other:?}"))),
        })
    }

    pub(super) fn on_effect(&mut self, i: usize) -> Res {
        let (op, rep) = {
            let live = self.members[i].live_mut().expect("effect of a live member");
            let f = live.io.as_mut().expect("an outstanding call");
            f.effect_at = None;
            (f.op.clone(), f.reply_ms)
        };
        let transport = self.members[i].transport.clone();
        let answer = self.execute(Some(i), &transport, &op)?;
        let live = self.members[i].live_mut().expect("live");
        let f = live.io.as_mut().expect("an outstanding call");
        f.answer = Some(answer);
        f.answer_at = self.now + rep;
        Ok(())
    }

    /// Runs one call against the broker now. `who = None` for a ghost (errors are dropped).
    pub(super) fn execute(
        &mut self,
        who: Option<usize>,
        transport: &MemoryTransport,
        op: &Op,
    ) -> Res<Event> {
        let result: Result<Event, TransportError> = match op {
            Op::Append {
                partition,
                key,
                value,
            } => {
                self.last_disturbance = self.now;
                let stalled = self.partition_stalled();
                let appended = transport
                    .append(*partition, key, value.as_deref())
                    .map(|offset| Event::Appended { offset });
                if let Ok(Event::Appended { offset }) = &appended {
                    self.on_appended(who, key, *offset, value.is_some(), stalled)?;
                }
                appended
            }
            Op::Read { partition, from } => {
                if let Some(i) = who {
                    // L4: what the member's latest view may rest on.
                    self.members[i].read_healthy = self.healthy_pair();
                }
                transport
                    .read_partition(*partition, *from, Duration::ZERO)
                    .map(|b| Event::RecordsRead {
                        records: b.records,
                        end_offset: b.end_offset,
                        stalled: b.stalled,
                        high_watermark: b.high_watermark,
                    })
            }
            Op::Acquire { timeout } => transport
                .acquire_epoch(&self.role, *timeout)
                .map(|token| Event::EpochGranted { token }),
            Op::Describe => {
                if let Some(i) = who {
                    self.members[i].check_healthy = Some(self.healthy_pair());
                }
                transport
                    .describe_epoch(&self.role)
                    .map(|status| Event::Described { status })
            }
            Op::Write {
                partition,
                key,
                value,
                token,
            } => {
                self.audit_dirty = true;
                let end = self.broker.log_end_offset(*partition).ok();
                let written = transport
                    .write_lease(*partition, key, value.as_deref(), *token)
                    .map(|offset| Event::LeaseWritten { offset });
                // Committed (the record and its marker appended), even if the reply is lost.
                if self.broker.log_end_offset(*partition).ok() > end {
                    self.on_lease_committed(*token, value.as_deref());
                }
                written
            }
        };
        match &result {
            Ok(Event::LeaseWritten { .. }) => {
                if let Some(i) = who {
                    self.members[i].last_write = self.now;
                }
                let token = op.token().expect("a write carries a token");
                if let (Op::Write { value: Some(_), .. }, Some(i)) = (op, who) {
                    self.check_g1(i)?;
                }
                let current = self.broker.epoch_of(&self.role);
                if current != Some(token) {
                    return Err(self.fail(
                        "S2",
                        format!(
                            "a lease write with {token} by {} was accepted while the current pair is {}",
                            transport.name(),
                            current.map_or("none".into(), |t| t.to_string())
                        ),
                    ));
                }
            }
            Ok(Event::EpochGranted { token }) => {
                let token = *token;
                if !self.granted.insert(token) {
                    return Err(self.fail("S4", format!("the pair {token} was granted twice")));
                }
                let order = self.grant_order.len() as u64;
                self.grant_order.insert(token, order);
                if self.producer_ids.insert(token.producer_id) && self.producer_ids.len() > 1 {
                    self.stats.fresh_producer_ids += 1;
                }
                if self.broker.epoch_of(&self.role) != Some(token) {
                    return Err(self.fail(
                        "S4",
                        format!("acquire returned {token}, which is not the current pair"),
                    ));
                }
                if let Some(live) = who.and_then(|i| self.members[i].live_mut()) {
                    if !live.exit_acquire {
                        live.held.push(token);
                    }
                }
            }
            _ => {}
        }
        let Some(i) = who else {
            self.stats.ghosts += 1;
            let outcome = match &result {
                Ok(e) => short_event(e),
                Err(e) => format!("error: {e}"),
            };
            self.note(
                None,
                format!(
                    "ghost {} of a crashed {}: {outcome}",
                    op.name(),
                    transport.name()
                ),
            );
            return Ok(Event::Tick);
        };
        if result.is_err() {
            self.members[i].last_trouble = self.members[i].last_trouble.max(self.now);
        }
        match result {
            Ok(event) => Ok(event),
            Err(e) => match e.kind() {
                ErrorKind::Fenced if matches!(op, Op::Write { .. }) => Ok(Event::Fenced),
                ErrorKind::Retriable => Ok(Event::Failed),
                _ => Err(self.fail(
                    "transport",
                    format!(
                        "{} of {} failed with an error the machine cannot take: {e}",
                        op.name(),
                        self.members[i].id
                    ),
                )),
            },
        }
    }
}

fn short_event(e: &Event) -> String {
    match e {
        Event::Appended { offset } => format!("Appended at {offset}"),
        Event::RecordsRead {
            records,
            end_offset,
            stalled,
            high_watermark,
        } => format!(
            "RecordsRead {} records to {end_offset}{}",
            records.len(),
            match (*stalled, high_watermark) {
                (true, Some(hw)) => format!(" (stalled, high watermark {hw})"),
                (true, None) => " (stalled)".to_owned(),
                (false, _) => String::new(),
            }
        ),
        Event::EpochGranted { token } => format!("EpochGranted {token}"),
        Event::Described { status } => format!(
            "Described {} {}",
            status.token,
            status
                .state
                .as_ref()
                .map_or("(never taken)", |s| s.as_str())
        ),
        other => other.name().to_string(),
    }
}
