//! The environment as a stateright [`Model`]: which actions each state allows, what each does,
//! and the properties.

use kafka_coordination_core::machine::{Candidate, Command, Event, Status};
use kafka_coordination_core::{
    FencingToken, LeadershipStatus, MemberId, Record, Role, RoleState, TransactionState, UnixMillis,
};
use stateright::{Model, Property};

use crate::properties::{
    FENCE, HANDOVER, LEASE_ORDER, LIVENESS, NO_FAILBACK, NO_MACHINE_ERROR, ONE_ELECTION,
    ONE_LEADER, STEP_DOWN,
};
use crate::scenario::{Config, Mutation};
use crate::system::{
    Action, Broker, Budget, Entry, Fault, Ghost, Io, Member, State, Txn, TxnState, PRODUCER_ID,
};

/// The model: a configuration.
#[derive(Clone, Debug)]
pub struct CoordinationModel {
    /// What it explores.
    pub cfg: Config,
}

fn role() -> Role {
    Role::new("r").expect("valid role")
}

fn member_id(i: usize) -> MemberId {
    MemberId::new(format!("m{i}")).expect("valid member id")
}

impl CoordinationModel {
    /// A model of `cfg`.
    pub fn new(cfg: Config) -> CoordinationModel {
        CoordinationModel { cfg }
    }

    fn local(&self, s: &State, i: usize) -> UnixMillis {
        UnixMillis(s.now + s.members[i].clock)
    }

    fn candidate(&self, s: &State, i: usize) -> Candidate {
        let mut c = Candidate::new(role(), member_id(i), self.cfg.timing(), self.local(s, i))
            .expect("valid timing");
        c.set_evict_passed_over(self.cfg.evict);
        c
    }

    fn faults_allowed(&self, s: &State) -> bool {
        s.now >= self.cfg.faults_after && self.cfg.faults_before.is_none_or(|t| s.now < t)
    }

    /// Whether the broker would answer member `i`'s request now (a long poll waits for data).
    fn servable(&self, s: &State, i: usize) -> bool {
        let Io::Request(Command::ReadPartition {
            from_offset,
            wait_until: Some(until),
            ..
        }) = &s.members[i].io
        else {
            return matches!(s.members[i].io, Io::Request(_));
        };
        self.local(s, i) >= *until
            || !s
                .broker
                .readable_from(*from_offset, self.cfg.is(Mutation::ReadPastLso))
                .is_empty()
    }

    fn due(&self, s: &State, i: usize) -> bool {
        let m = &s.members[i];
        m.io == Io::Idle
            && m.cand
                .as_ref()
                .and_then(|c| c.poll_timeout())
                .is_some_and(|at| at <= self.local(s, i))
    }

    /// Whether member `i` has something that must happen before time moves on.
    fn urgent(&self, s: &State, i: usize) -> bool {
        let m = &s.members[i];
        if m.cand.is_some() && m.paused && s.now >= m.paused_until {
            return true;
        }
        if m.cand.is_none() || m.paused {
            return false;
        }
        if self.due(s, i) {
            return true;
        }
        !m.delayed
            && match &m.io {
                Io::Idle => false,
                Io::Request(_) => self.servable(s, i),
                Io::InTxn { .. } | Io::Reply(_) => true,
            }
    }

    /// Serves member `i`'s request at the broker: the answer, or `None` for a lease write left
    /// open in its transaction (then `m.io` is `InTxn`).
    fn serve(&self, s: &mut State, i: usize) -> Option<Event> {
        let Io::Request(cmd) = std::mem::replace(&mut s.members[i].io, Io::Idle) else {
            unreachable!("serve without a request");
        };
        let now = s.now;
        let leaving = s.members[i]
            .cand
            .as_ref()
            .is_some_and(|c| c.status() == Status::Leaving);
        let b = &mut s.broker;
        match cmd {
            Command::Append { key, value, .. } => {
                b.log.push(Entry {
                    key,
                    value,
                    txn: Txn::Committed,
                    pair: None,
                    by: i,
                });
                Some(Event::Appended {
                    offset: b.log.len() as i64 - 1,
                })
            }
            Command::ReadPartition { from_offset, .. } => {
                let past = self.cfg.is(Mutation::ReadPastLso);
                let records = b.readable_from(from_offset, past);
                let end_offset = if past { b.log.len() as i64 } else { b.lso() };
                Some(Event::RecordsRead {
                    records,
                    end_offset: end_offset.max(from_offset),
                    stalled: end_offset < b.log.len() as i64,
                    high_watermark: Some(b.log.len() as i64),
                })
            }
            Command::DescribeRole { .. } => {
                let status = match b.epoch {
                    None => LeadershipStatus::NOT_FOUND,
                    Some(e) => {
                        let (state, started) = match b.txn {
                            TxnState::Empty => (TransactionState::Empty, None),
                            TxnState::Ongoing(at) => (TransactionState::Ongoing, Some(at)),
                            TxnState::CompleteCommit => (TransactionState::CompleteCommit, None),
                            TxnState::CompleteAbort => (TransactionState::CompleteAbort, None),
                        };
                        let st = LeadershipStatus::described(PRODUCER_ID, e, state);
                        match started {
                            Some(at) => st.with_transaction_started(UnixMillis(at)),
                            None => st,
                        }
                    }
                };
                Some(Event::Described { status })
            }
            Command::AcquireEpoch { .. } => {
                if self.cfg.is(Mutation::NeverChallenge) && !leaving {
                    return Some(Event::Failed);
                }
                if !leaving {
                    s.ghost.mints = s.ghost.mints.saturating_add(1);
                }
                let b = &mut s.broker;
                if self.cfg.is(Mutation::SharedPair) && b.txn == TxnState::Empty {
                    if let Some(p) = b.pair() {
                        return Some(Event::EpochGranted { token: p });
                    }
                }
                let token = if let TxnState::Ongoing(_) = b.txn {
                    b.abort_open();
                    b.mint(now, 2)
                } else {
                    b.mint(now, 1)
                };
                b.txn = TxnState::Empty;
                Some(Event::EpochGranted { token })
            }
            Command::WriteLease {
                key, value, token, ..
            } => {
                if value.is_none() && self.cfg.is(Mutation::ResignKeepsLease) {
                    return Some(Event::Failed);
                }
                let current = b.pair() == Some(token);
                if !current && !self.cfg.is(Mutation::NoFence) {
                    return Some(Event::Fenced);
                }
                if b.accepted_max
                    .is_some_and(|m| token.producer_epoch < m.producer_epoch)
                {
                    s.ghost.stale_write = true;
                }
                let b = &mut s.broker;
                b.accepted_max = Some(match b.accepted_max {
                    Some(m) if m.producer_epoch > token.producer_epoch => m,
                    _ => token,
                });
                if !current {
                    // The defective broker commits a stale write on its own.
                    b.log.push(Entry {
                        key,
                        value,
                        txn: Txn::Committed,
                        pair: Some(token),
                        by: i,
                    });
                    return Some(Event::LeaseWritten {
                        offset: b.log.len() as i64 - 1,
                    });
                }
                if !matches!(b.txn, TxnState::Ongoing(_)) {
                    b.txn = TxnState::Ongoing(now);
                }
                b.log.push(Entry {
                    key,
                    value,
                    txn: Txn::Open,
                    pair: Some(token),
                    by: i,
                });
                s.members[i].io = Io::InTxn {
                    offset: b.log.len() as i64 - 1,
                };
                None
            }
            other => unreachable!("not an I/O command: {other:?}"),
        }
    }

    fn commit(&self, s: &mut State, i: usize) -> Event {
        let Io::InTxn { offset } = std::mem::replace(&mut s.members[i].io, Io::Idle) else {
            unreachable!("commit without a transaction");
        };
        let b = &mut s.broker;
        let e = &mut b.log[offset as usize];
        if e.txn == Txn::Open {
            e.txn = Txn::Committed;
            b.txn = TxnState::CompleteCommit;
            Event::LeaseWritten { offset }
        } else {
            // Aborted meanwhile (by a newer pair's InitProducerId or a timeout): EndTxn fails.
            Event::Fenced
        }
    }

    /// Feeds `event` to member `i` at its clock and collects its commands.
    fn deliver(&self, s: &mut State, i: usize, event: Event) {
        let event = match event {
            Event::Fenced if self.cfg.is(Mutation::IgnoreFence) && s.members[i].leads.is_some() => {
                Event::Failed
            }
            e => e,
        };
        let now = self.local(s, i);
        let m = &mut s.members[i];
        m.delayed = false;
        let Some(c) = m.cand.as_mut() else { return };
        if let Err(e) = c.handle(now, event.clone()) {
            s.ghost.machine_error = Some(format!("m{i}: {e} ({})", event.name()));
        }
        if self.cfg.is(Mutation::DoubleAnswer) && matches!(event, Event::Appended { .. }) {
            if let Err(e) = c.handle(now, event.clone()) {
                s.ghost.machine_error = Some(format!("m{i}: {e} ({}, again)", event.name()));
            }
        }
        self.drain(s, i);
    }

    fn drain(&self, s: &mut State, i: usize) {
        loop {
            let m = &mut s.members[i];
            let Some(cmd) = m.cand.as_mut().and_then(|c| c.poll_command()) else {
                break;
            };
            match cmd {
                Command::Elected { token, .. } => {
                    m.leads = Some(token);
                    s.ghost.mints = 0;
                    s.ghost.leaderless_since = None;
                }
                Command::Deposed { .. } | Command::Ended { .. } => m.leads = None,
                io => {
                    if m.io != Io::Idle {
                        s.ghost.machine_error = Some(format!("m{i}: a second I/O command {io:?}"));
                    }
                    m.io = Io::Request(io);
                    m.delayed = false;
                }
            }
        }
    }

    fn disturb(s: &mut State, fault: Fault) {
        s.ghost.disturbed_at = s.now;
        s.ghost.last_fault = fault;
    }

    fn after(&self, s: &mut State) {
        if s.members.iter().all(|m| m.leads.is_none()) {
            s.ghost.leaderless_since.get_or_insert(s.now);
        } else {
            s.ghost.leaderless_since = None;
        }
    }
}

impl Model for CoordinationModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let n = self.cfg.members;
        let options = (self.cfg.skew + 1) as usize;
        let mut out = Vec::new();
        for combo in 0..options.pow(n as u32) {
            let mut clocks = Vec::with_capacity(n);
            let mut c = combo;
            for _ in 0..n {
                clocks.push((c % options) as i64);
                c /= options;
            }
            // Members differ only in name: one assignment of offsets per multiset suffices.
            if clocks.windows(2).any(|w| w[0] > w[1]) {
                continue;
            }
            if self.cfg.is(Mutation::EarlyChallenge) {
                clocks[n - 1] += self.cfg.stagger_ms as i64;
            }
            let mut s = State {
                now: 0,
                members: clocks
                    .iter()
                    .map(|&clock| Member {
                        cand: None,
                        clock,
                        paused: false,
                        paused_until: 0,
                        io: Io::Idle,
                        delayed: false,
                        leads: None,
                        restarted_at: None,
                    })
                    .collect(),
                broker: Broker {
                    log: Vec::new(),
                    epoch: None,
                    txn: TxnState::Empty,
                    minted_at: Vec::new(),
                    accepted_max: None,
                },
                budget: Budget {
                    crashes: self.cfg.crashes,
                    restarts: self.cfg.restarts,
                    pauses: self.cfg.pauses,
                    losses: self.cfg.losses,
                    delays: self.cfg.delays,
                    resigns: self.cfg.resigns,
                    withdraws: self.cfg.withdraws,
                    rejoins: self.cfg.rejoins,
                },
                ghost: Ghost {
                    leaderless_since: Some(0),
                    ..Ghost::default()
                },
            };
            for i in 0..n {
                s.members[i].cand = Some(self.candidate(&s, i));
                self.drain(&mut s, i);
            }
            out.push(s);
        }
        out
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        if s.ghost.machine_error.is_some() {
            return;
        }
        // A tick only issues its member's next command: it changes nothing another action
        // reads, and no property reads it. The first due tick goes first, alone (a partial
        // order reduction; a fault at that instant then comes just after the tick).
        if let Some(i) = (0..s.members.len())
            .find(|&i| !s.members[i].paused && s.members[i].cand.is_some() && self.due(s, i))
        {
            out.push(Action::Tick(i));
            return;
        }
        let faults = self.faults_allowed(s);
        let mut urgent = false;
        for (i, m) in s.members.iter().enumerate() {
            urgent |= self.urgent(s, i);
            let Some(c) = &m.cand else {
                continue;
            };
            if m.paused {
                if s.now >= m.paused_until {
                    out.push(Action::Resume(i));
                }
            } else {
                match &m.io {
                    Io::Idle => {}
                    Io::Request(_) => {
                        if self.servable(s, i) {
                            out.push(Action::Complete(i));
                        }
                    }
                    Io::InTxn { .. } => out.push(Action::Commit(i)),
                    Io::Reply(_) => out.push(Action::Deliver(i)),
                }
                if faults && m.io != Io::Idle {
                    if s.budget.losses > 0 {
                        out.push(Action::Lose(i));
                    }
                    if s.budget.delays > 0
                        && !m.delayed
                        && matches!(m.io, Io::Request(_) | Io::InTxn { .. })
                        && (!matches!(m.io, Io::Request(_)) || self.servable(s, i))
                    {
                        out.push(Action::Delay(i));
                    }
                }
                if faults && m.io != Io::Idle && s.budget.pauses > 0 && !c.is_done() {
                    out.push(Action::Pause(i));
                    if matches!(m.io, Io::Request(_)) && self.servable(s, i) {
                        out.push(Action::PauseServed(i));
                    }
                }
                if faults && s.budget.resigns > 0 && m.leads.is_some() {
                    out.push(Action::Resign(i));
                }
                if faults && s.budget.withdraws > 0 && m.leads.is_none() && competing(c) {
                    out.push(Action::Withdraw(i));
                }
                // A member whose candidacy ended may register anew (a balancing member's
                // second half of a hand-over); the driver starts the new candidacy only once
                // the old one has left, unless the mutation drops that wait.
                let early = self.cfg.is(Mutation::EarlyRejoin) && c.status() == Status::Leaving;
                if faults && s.budget.rejoins > 0 && (c.is_done() || early) {
                    out.push(Action::Rejoin(i));
                }
            }
            // A process dies or stops in the middle of a call: between its calls it does
            // nothing another member could notice, so a crash or pause there is the same to
            // them as one at its next call (a reduction; the bounds then count from later).
            let in_call = m.io != Io::Idle && !m.paused;
            if faults && in_call && s.budget.crashes > 0 && !c.is_done() {
                out.push(Action::Crash(i));
                if s.budget.restarts > 0 {
                    out.push(Action::Restart(i));
                }
            }
        }
        if let TxnState::Ongoing(at) = s.broker.txn {
            if s.now >= at + self.cfg.lease_ms as i64 {
                out.push(Action::TimeoutAbort);
            }
        }
        if !urgent && s.now < self.cfg.horizon {
            out.push(Action::Advance);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Advance => s.now += 1,
            Action::Tick(i) => {
                let now = self.local(&s, i);
                if let Some(c) = s.members[i].cand.as_mut() {
                    if let Err(e) = c.handle(now, Event::Tick) {
                        s.ghost.machine_error = Some(format!("m{i}: {e} (Tick)"));
                    }
                }
                self.drain(&mut s, i);
            }
            Action::Complete(i) => {
                if let Some(ev) = self.serve(&mut s, i) {
                    self.deliver(&mut s, i, ev);
                }
            }
            Action::Commit(i) => {
                if s.members[i].delayed {
                    Self::disturb(&mut s, Fault::Other);
                }
                let ev = self.commit(&mut s, i);
                self.deliver(&mut s, i, ev);
            }
            Action::Deliver(i) => {
                let Io::Reply(ev) = std::mem::replace(&mut s.members[i].io, Io::Idle) else {
                    unreachable!("deliver without an answer");
                };
                if s.members[i].delayed {
                    Self::disturb(&mut s, Fault::Other);
                }
                self.deliver(&mut s, i, ev);
            }
            Action::Lose(i) => {
                s.budget.losses -= 1;
                s.ghost.unclean = true;
                Self::disturb(&mut s, Fault::Other);
                match s.members[i].io.clone() {
                    Io::InTxn { .. } => {
                        self.commit(&mut s, i);
                    }
                    Io::Request(_) | Io::Reply(_) => s.members[i].io = Io::Idle,
                    Io::Idle => unreachable!("lose without a call"),
                }
                s.members[i].io = Io::Idle;
                self.deliver(&mut s, i, Event::Failed);
            }
            Action::Delay(i) => {
                s.budget.delays -= 1;
                s.ghost.unclean = true;
                Self::disturb(&mut s, Fault::Other);
                if matches!(s.members[i].io, Io::Request(_)) {
                    if let Some(ev) = self.serve(&mut s, i) {
                        s.members[i].io = Io::Reply(ev);
                    }
                }
                s.members[i].delayed = true;
            }
            Action::Crash(i) | Action::Restart(i) => {
                let restart = matches!(action, Action::Restart(_));
                s.budget.crashes -= 1;
                if restart {
                    s.budget.restarts -= 1;
                }
                s.ghost.mints = 0;
                let leading = s.members[i]
                    .cand
                    .as_ref()
                    .is_some_and(|c| c.status() == Status::Leading);
                Self::disturb(
                    &mut s,
                    if leading {
                        Fault::LeaderCrash
                    } else {
                        Fault::Other
                    },
                );
                let m = &mut s.members[i];
                let old = m.cand.take();
                m.io = Io::Idle;
                m.delayed = false;
                m.paused = false;
                m.leads = None;
                if restart {
                    m.restarted_at = Some(s.broker.log.len() as i64);
                    match old.filter(|_| self.cfg.is(Mutation::Failback)) {
                        Some(mut old) => {
                            // The old machine, with its old registration; its outstanding
                            // call died with the process.
                            while old.poll_command().is_some() {}
                            let had_io = old.poll_timeout().is_none();
                            s.members[i].cand = Some(old);
                            if had_io {
                                self.deliver(&mut s, i, Event::Failed);
                            }
                        }
                        None => {
                            s.members[i].cand = Some(self.candidate(&s, i));
                            self.drain(&mut s, i);
                        }
                    }
                }
            }
            Action::Pause(i) | Action::PauseServed(i) => {
                s.budget.pauses -= 1;
                s.ghost.unclean = true;
                Self::disturb(&mut s, Fault::Other);
                if matches!(action, Action::PauseServed(_)) {
                    if let Some(ev) = self.serve(&mut s, i) {
                        s.members[i].io = Io::Reply(ev);
                    }
                }
                s.members[i].paused = true;
                s.members[i].paused_until = s.now + self.cfg.pause_ms;
            }
            Action::Resume(i) => {
                Self::disturb(&mut s, Fault::Other);
                s.members[i].paused = false;
            }
            Action::Resign(i) => {
                s.budget.resigns -= 1;
                Self::disturb(&mut s, Fault::Resign);
                let now = self.local(&s, i);
                if let Some(c) = s.members[i].cand.as_mut() {
                    let _ = c.handle(now, Event::Resign);
                }
                self.drain(&mut s, i);
            }
            Action::Withdraw(i) => {
                s.budget.withdraws -= 1;
                let challenging = s.members[i]
                    .cand
                    .as_ref()
                    .is_some_and(|c| c.status() == Status::Challenging);
                if challenging {
                    // It may hold a pair that others deferred to, as a challenger that crashes
                    // does: its exit costs them up to a lease, and the count of mints starts
                    // again. A standby's withdraw is no fault: no bound counts from it.
                    s.ghost.mints = 0;
                    Self::disturb(&mut s, Fault::Other);
                }
                let now = self.local(&s, i);
                if let Some(c) = s.members[i].cand.as_mut() {
                    let _ = c.handle(now, Event::Resign);
                }
                self.drain(&mut s, i);
            }
            Action::Rejoin(i) => {
                s.budget.rejoins -= 1;
                // Beside a member that can take the role a rejoin is no fault: the bounds keep
                // counting from the role's loss. Into a role no one was waiting for, it starts
                // the election, as the first one starts.
                if !s.members.iter().any(|m| m.live() && !m.paused) {
                    let fault = match s.ghost.last_fault {
                        Fault::Other => Fault::Other,
                        _ => Fault::Rejoin,
                    };
                    Self::disturb(&mut s, fault);
                }
                let m = &mut s.members[i];
                // The old candidacy has ended (or, under the mutation, is abandoned mid-exit:
                // its outstanding call is dropped, an open transaction stays open).
                m.io = Io::Idle;
                m.delayed = false;
                m.leads = None;
                m.restarted_at = Some(s.broker.log.len() as i64);
                s.members[i].cand = Some(self.candidate(&s, i));
                self.drain(&mut s, i);
            }
            Action::TimeoutAbort => {
                Self::disturb(&mut s, Fault::Other);
                s.broker.abort_open();
                s.broker.mint(s.now, 1);
                s.broker.txn = TxnState::CompleteAbort;
            }
        }
        self.after(&mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_MACHINE_ERROR, |_, s: &State| {
                s.ghost.machine_error.is_none()
            }),
            Property::always(FENCE, |_, s: &State| !s.ghost.stale_write),
            Property::always(ONE_LEADER, |_, s: &State| {
                let current = s.broker.pair();
                s.members
                    .iter()
                    .filter(|m| m.leads.is_some() && m.leads == current)
                    .count()
                    <= 1
            }),
            Property::always(LEASE_ORDER, |_, s: &State| {
                let pairs: Vec<FencingToken> = s
                    .broker
                    .log
                    .iter()
                    .filter(|e| e.txn == Txn::Committed)
                    .filter_map(|e| e.pair)
                    .collect();
                pairs
                    .windows(2)
                    .all(|w| w[0].producer_epoch <= w[1].producer_epoch)
            }),
            Property::always(NO_FAILBACK, no_failback),
            Property::always(LIVENESS, |model, s: &State| {
                let Some(since) = s.ghost.leaderless_since else {
                    return true;
                };
                if !waiting_is_fair(s) {
                    return true;
                }
                let bound = match s.ghost.last_fault {
                    Fault::Other => model.cfg.failover_bound() + model.cfg.lease_ms as i64,
                    _ => model.cfg.failover_bound(),
                };
                s.now - since.max(s.ghost.disturbed_at) <= bound
            }),
            Property::always(HANDOVER, |model, s: &State| {
                let Some(since) = s.ghost.leaderless_since else {
                    return true;
                };
                if s.ghost.last_fault != Fault::Resign || !waiting_is_fair(s) {
                    return true;
                }
                s.now - since.max(s.ghost.disturbed_at) <= model.cfg.handover_bound()
            }),
            Property::always(ONE_ELECTION, |_, s: &State| {
                s.ghost.unclean || s.ghost.mints <= 1
            }),
            Property::always(STEP_DOWN, |model, s: &State| {
                let current = s.broker.pair();
                s.members.iter().all(|m| {
                    let Some(t) = m.leads else { return true };
                    if Some(t) == current || m.paused || m.delayed {
                        return true;
                    }
                    let next = (t.producer_epoch as usize) + 1;
                    let superseded = s.broker.minted_at.get(next).copied().unwrap_or(s.now);
                    s.now - superseded.max(s.ghost.disturbed_at) <= model.cfg.step_down_bound()
                })
            }),
        ]
    }
}

/// Whether `c` is still in the race without leading: registering, standing by or challenging
/// (not leaving, not ended).
fn competing(c: &Candidate) -> bool {
    matches!(
        c.status(),
        Status::Registering | Status::Standby | Status::Challenging
    )
}

/// A leader may be expected: some member is up, not paused and not ended, and no delayed
/// answer is outstanding.
fn waiting_is_fair(s: &State) -> bool {
    s.members.iter().any(|m| m.live() && !m.paused) && s.members.iter().all(|m| !m.delayed)
}

fn no_failback(_: &CoordinationModel, s: &State) -> bool {
    if s.members
        .iter()
        .all(|m| m.restarted_at.is_none() || m.cand.is_none())
    {
        return true;
    }
    let committed: Vec<Record> = s
        .broker
        .log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.txn == Txn::Committed)
        .map(|(o, e)| Record {
            offset: o as i64,
            key: e.key.clone(),
            value: e.value.clone(),
        })
        .collect();
    let state = RoleState::build(role(), &committed);
    s.members.iter().enumerate().all(|(i, m)| {
        let (Some(p), Some(c)) = (m.restarted_at, &m.cand) else {
            return true;
        };
        let Some(join) = c.join_offset() else {
            return true;
        };
        if join < p {
            return false;
        }
        let me = member_id(i);
        if state.join_offset(&me) != Some(join) {
            return true;
        }
        let Some(mine) = state.rank_of(&me) else {
            return true;
        };
        let holder = state.lease().map(|e| e.lease.member.clone());
        state
            .roster()
            .filter(|(other, o)| *o < p && **other != me && Some(*other) != holder.as_ref())
            .all(|(other, _)| state.rank_of(other).is_none_or(|r| r < mine))
    })
}
