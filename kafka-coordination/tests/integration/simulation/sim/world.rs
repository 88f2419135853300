//! Multi-role processes.
//!
//! A real service often leads one role per shard: one process holds a candidate for each of
//! several roles, all of them talking through the process's one client. [`run_seed_roles`]
//! models that with R roles (`SIM_ROLES`; [`role_names`]: `sim-role` first, then `sim-shard-*`
//! names picked so that every odd-numbered role lands on `sim-role`'s partition, murmur2 of
//! the name modulo `PARTITIONS`, and the others spread over the remaining partitions).
//!
//! * **Structure.** Each role is a [`Sim`] of its own, with its members, its audit cursor,
//!   its L1 watch, churn window and G1/G2 bookkeeping exactly as in a single-role run. A
//!   [`World`] owns what the roles share: the broker, the clock, the trace and the processes.
//!   Member `i` of every role is process `i`: one name, one skew, one `MemoryTransport` (the
//!   producer sessions of all its roles live in it). The world picks the next event over its
//!   own agenda and every role's (I/O legs, timers, rejoins, ghosts), sets every role's clock
//!   to that instant, runs it, and then checks every role's invariants; a role's L1 deadline
//!   is compared with the next event of any role.
//! * **Process faults hit every role in the same step.** A crash drops the process's
//!   candidate in every role: each role it led may leave a lease write open (which stalls
//!   every role on that partition, not only its own: the other roles count it as a stall
//!   until the transaction's timeout, the lease duration), each call on the wire may land as
//!   a ghost, and only then are the transport's sessions dropped (once, as a dying process
//!   loses its client). Every role the process led arms its own L1 watch; the restart, 0.5 to
//!   20 s later, starts all its roles together, with the same or a new transport, under the
//!   same name or (a quarter of the time) a new one for all of them, and sometimes a corrected
//!   clock. A pause freezes every role's member until the common resume; a role whose rejoin
//!   comes due during the pause starts when the process resumes. A crash cancels pending
//!   rejoins: the restart starts every role.
//! * **Other faults.** Slow windows, failed calls and lost replies are broker-wide (whichever
//!   role's call comes next meets them); unavailable windows, compaction and another role's
//!   stall hit every role on the chosen partition; resigns and epoch exhaustion hit one role.
//!   A fault disturbs (for L1's calm bound) the roles it can reach; the schedule counts the
//!   system calm only when every role is.
//! * **Invariants.** Every invariant above holds for every role, after every step. Those
//!   that read the broker's audit log (`accepted_lease_writes`: S2, R1, T1) take only the
//!   role's own entries; `epoch_of`, `describe_epoch` and the transport's `session` are per
//!   role already. After a crash of a process that led k >= 2 roles, each of the k roles must
//!   elect a new leader within its own L1 bound (the figures `multi_role_crashes`,
//!   `multi_role_l1_checked` and `multi_role_l1_met` show it happened and was met).
//!
//! With one role, the single-role simulation runs unchanged: same draws, same schedule, same
//! traces for a given seed.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use kafka_coordination::core::record::{MemberId, Role};
use kafka_coordination::core::{role_partition, UnixMillis};
use kafka_coordination::error::ErrorKind;
use kafka_coordination::memory::{BrokerOp, MemoryBroker, MemoryTransport};
use kafka_coordination::ManualClock;

use super::faults::pick_fault;
use super::harness::{
    new_trace, push_trace, run_seed, Action, Crashed, Member, Next, Res, Rng, Sim, SimParts, Trace,
};
use super::report::{confirmed, Failure, Stats};
use super::{
    At, LEASE_MS, MAX_MEMBERS, MAX_SKEW_MS, PARTITIONS, QUIET_BEFORE_MS, RENEW_MS, STAGGER_MS, T0,
};

/// The roles of a multi-role run: `sim-role` first, then roles named `sim-shard-<k>` chosen
/// so that every odd-numbered role shares `sim-role`'s partition (one role's open transaction
/// stalls the other's reads) and the even-numbered ones spread over the other partitions.
pub fn role_names(count: usize) -> Vec<Role> {
    let partition = |r: &Role| role_partition(r, PARTITIONS).expect("valid partition count");
    let first = Role::new("sim-role").expect("valid role");
    let p0 = partition(&first);
    let mut roles = vec![first];
    let mut k = 0;
    while roles.len() < count {
        let j = roles.len();
        let want = if j % 2 == 1 {
            p0
        } else {
            (p0 + (j / 2) as i32) % PARTITIONS
        };
        loop {
            let role = Role::new(format!("sim-shard-{k}")).expect("valid role");
            k += 1;
            if partition(&role) == want {
                roles.push(role);
                break;
            }
        }
    }
    roles
}

/// A process of a multi-role run: it hosts one member of every role, all on its one
/// transport (one client), under one name and one clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProcState {
    Up,
    Paused,
    Down,
}

#[derive(Debug)]
struct Process {
    state: ProcState,
    /// Restarts so far (a renamed process is `m<p>.<restarts>`).
    restarts: u32,
}

#[derive(Debug)]
enum WorldAction {
    Fault,
    Start { process: usize },
    Resume { process: usize },
}

#[derive(Debug)]
struct Planned {
    at: i64,
    seq: u64,
    action: WorldAction,
}

/// Who runs the next event of a multi-role run.
#[derive(Clone, Copy, Debug)]
enum Turn {
    World(usize),
    Role(usize, Next),
}

/// A multi-role run: R roles (one [`Sim`] each) over one broker, one clock, one timeline and
/// one set of processes. Every process hosts a member of every role on its one transport;
/// process faults (crash, restart, pause, resume) hit all its roles in the same step;
/// broker faults hit every role (slow windows, failed calls, lost replies) or every role on
/// a partition (unavailable windows, compaction, another role's stall); resigns and epoch
/// exhaustion hit one role. The roles' own events (I/O, timers, rejoins after a candidate
/// ended, ghosts) run in one order by time, and every role's invariants are checked after
/// every step.
struct World {
    rng: Rng,
    print: bool,
    clock: ManualClock,
    broker: MemoryBroker,
    now: i64,
    end: i64,
    sims: Vec<Sim>,
    procs: Vec<Process>,
    agenda: Vec<Planned>,
    seq: u64,
    trace: Trace,
    stats: Stats,
}

impl World {
    fn new(seed: u64, roles: usize, run_ms: i64, detail: bool, print: bool) -> World {
        let mut rng = Rng::new(seed);
        let clock = ManualClock::new(UnixMillis(T0));
        let broker = MemoryBroker::new(PARTITIONS, Arc::new(clock.clone()));
        let n = rng.range(2, MAX_MEMBERS as i64) as usize;
        let skews: Vec<i64> = (0..n)
            .map(|_| rng.range(-MAX_SKEW_MS, MAX_SKEW_MS))
            .collect();
        let transports: Vec<MemoryTransport> =
            (0..n).map(|i| broker.transport(format!("m{i}"))).collect();
        let slow_coordinator = rng.chance(1, 3);
        let trace = new_trace();
        let names = role_names(roles);
        let sims: Vec<Sim> = names
            .iter()
            .enumerate()
            .map(|(r, role)| {
                let members = (0..n)
                    .map(|i| Member::new(&format!("m{i}"), skews[i], transports[i].clone()))
                    .collect();
                Sim::with(SimParts {
                    seed,
                    rng: Rng::new(seed ^ (r as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)),
                    detail,
                    print,
                    clock: clock.clone(),
                    broker: broker.clone(),
                    role: role.clone(),
                    partition: role_partition(role, PARTITIONS).expect("valid partition count"),
                    run_ms,
                    members,
                    slow_coordinator,
                    trace: trace.clone(),
                    label: Some(role.to_string()),
                })
            })
            .collect();
        let mut world = World {
            rng,
            print,
            clock,
            broker,
            now: T0,
            end: T0 + run_ms,
            sims,
            procs: (0..n)
                .map(|_| Process {
                    state: ProcState::Down,
                    restarts: 0,
                })
                .collect(),
            agenda: Vec::new(),
            seq: 0,
            trace,
            stats: Stats {
                roles: roles as u64,
                processes: n as u64,
                ..Stats::default()
            },
        };
        for process in 0..n {
            let at = T0 + world.rng.range(0, 2_000);
            world.schedule(at, WorldAction::Start { process });
        }
        let first_fault = T0 + world.rng.range(4_000, 10_000);
        world.schedule(first_fault, WorldAction::Fault);
        if print {
            let skews: Vec<String> = skews
                .iter()
                .enumerate()
                .map(|(i, s)| format!("m{i}:{s:+}ms"))
                .collect();
            let roles: Vec<String> = world
                .sims
                .iter()
                .map(|s| format!("{} (partition {})", s.role, s.partition))
                .collect();
            println!(
                "seed {seed}: {n} processes (skew {}), each hosting a member of {} roles: {}; \
                 lease {LEASE_MS} ms, renew {RENEW_MS} ms, stagger {STAGGER_MS} ms, run {run_ms} \
                 ms{}",
                skews.join(" "),
                world.sims.len(),
                roles.join(", "),
                if slow_coordinator {
                    ", slow coordinator"
                } else {
                    ""
                }
            );
        }
        world
    }

    fn schedule(&mut self, at: i64, action: WorldAction) {
        self.seq += 1;
        self.agenda.push(Planned {
            at,
            seq: self.seq,
            action,
        });
    }

    fn note(&self, what: impl fmt::Display) {
        push_trace(
            &self.trace,
            self.print,
            format!("{} ** {what}", At(self.now)),
        );
    }

    /// The figures of the run: the world's own and every role's.
    fn totals(&self) -> Stats {
        let mut totals = self.stats.clone();
        for sim in &self.sims {
            totals.add(&sim.stats);
        }
        totals
    }

    /// A failure of role `r` (or of the world, `r = None`), with every other role's state.
    fn enrich(&self, r: Option<usize>, mut f: Failure) -> Failure {
        f.roles = self.sims.len();
        let mut context = String::new();
        let states: Vec<String> = self
            .procs
            .iter()
            .enumerate()
            .map(|(p, pr)| format!("m{p} {:?}", pr.state))
            .collect();
        let _ = writeln!(context, "processes: {}", states.join(", "));
        for (s, sim) in self.sims.iter().enumerate() {
            if Some(s) != r {
                context.push_str(&sim.summary());
            }
        }
        f.context = context + &f.context;
        f
    }

    fn fail(&self, invariant: &'static str, message: impl Into<String>) -> Failure {
        let mut context = String::new();
        let trace = self.trace.borrow();
        let _ = writeln!(context, "last {} events:", trace.len());
        for line in trace.iter() {
            let _ = writeln!(context, "  {line}");
        }
        let f = Failure {
            seed: self.sims[0].seed,
            roles: self.sims.len(),
            invariant,
            at: self.now,
            message: message.into(),
            context,
        };
        self.enrich(None, f)
    }

    fn on_role<T>(&self, r: usize, res: Res<T>) -> Res<T> {
        res.map_err(|f| self.enrich(Some(r), f))
    }

    fn check_all(&mut self) -> Res {
        for r in 0..self.sims.len() {
            let res = self.sims[r].check();
            self.on_role(r, res)?;
        }
        Ok(())
    }

    fn next_event(&self) -> Option<(i64, Turn)> {
        let mut best: Option<(i64, usize, u64, Turn)> = None;
        let mut offer = |t: i64, class: usize, order: u64, turn: Turn| {
            if best.is_none_or(|(bt, bc, bo, _)| (t, class, order) < (bt, bc, bo)) {
                best = Some((t, class, order, turn));
            }
        };
        for (k, a) in self.agenda.iter().enumerate() {
            offer(a.at.max(self.now), 0, a.seq, Turn::World(k));
        }
        for (r, sim) in self.sims.iter().enumerate() {
            if let Some((t, order, next)) = sim.next_event_keyed() {
                offer(t, r + 1, order, Turn::Role(r, next));
            }
        }
        best.map(|(t, _, _, turn)| (t, turn))
    }

    fn run(&mut self) -> Res {
        self.check_all()?;
        loop {
            let Some((t, turn)) = self.next_event() else {
                if let Some(r) = self.sims.iter().position(|s| s.watch.is_some()) {
                    let f = self.sims[r].l1_failure("nothing left to happen");
                    return Err(self.enrich(Some(r), f));
                }
                break;
            };
            for r in 0..self.sims.len() {
                let res = self.sims[r].before_step(t);
                self.on_role(r, res)?;
            }
            if t > self.end && self.sims.iter().all(|s| s.watch.is_none()) {
                break;
            }
            if t > self.end + 120_000 {
                return Err(self.fail("harness", "the run did not wind down"));
            }
            debug_assert!(t >= self.now);
            self.now = t;
            self.clock.set(UnixMillis(t));
            for sim in &mut self.sims {
                sim.now = t;
            }
            self.stats.steps += 1;
            match turn {
                Turn::World(k) => {
                    let item = self.agenda.swap_remove(k);
                    self.on_action(item.action)?;
                }
                Turn::Role(r, next) => {
                    let res = self.sims[r].step(next);
                    self.on_role(r, res)?;
                }
            }
            self.check_all()?;
        }
        for r in 0..self.sims.len() {
            let res = self.sims[r].final_checks();
            self.on_role(r, res)?;
        }
        Ok(())
    }

    /// Marks the roles in `which` disturbed (see [`Sim::disturb`]).
    fn disturb(&mut self, which: impl Fn(&Sim) -> bool, fault: bool) {
        for sim in self.sims.iter_mut().filter(|s| which(s)) {
            sim.disturb(fault);
        }
    }

    fn on_action(&mut self, action: WorldAction) -> Res {
        match action {
            WorldAction::Fault => {
                // Calm when every role is: the process faults hit them all.
                let calm = self
                    .sims
                    .iter()
                    .all(|s| self.now - s.last_disturbance >= QUIET_BEFORE_MS);
                let kind = pick_fault(&mut self.rng, calm);
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
                    self.schedule(self.now + gap, WorldAction::Fault);
                }
                self.fault(kind)
            }
            WorldAction::Start { process } => {
                self.disturb(|_| true, false);
                self.restart(process)
            }
            WorldAction::Resume { process } => {
                self.disturb(|_| true, false);
                self.resume(process)
            }
        }
    }

    /// The process that is the real leader of the most roles (paused leaders only with
    /// `paused`), if it leads any.
    fn leader_process(&mut self, paused: bool) -> Option<usize> {
        let mut led = vec![0usize; self.procs.len()];
        for sim in &self.sims {
            if let Some(i) = sim.real_leader() {
                if paused || sim.members[i].live().is_some_and(|l| !l.paused) {
                    led[i] += 1;
                }
            }
        }
        let most = led.iter().copied().max().unwrap_or(0);
        if most == 0 {
            return None;
        }
        let top: Vec<usize> = (0..led.len()).filter(|&p| led[p] == most).collect();
        Some(self.rng.pick(&top))
    }

    fn any_process(&mut self, ok: impl Fn(ProcState) -> bool) -> Option<usize> {
        let up: Vec<usize> = (0..self.procs.len())
            .filter(|&p| ok(self.procs[p].state))
            .collect();
        (!up.is_empty()).then(|| self.rng.pick(&up))
    }

    fn fault(&mut self, kind: &'static str) -> Res {
        let roles = self.sims.len() as u64;
        match kind {
            "crash-leader" | "crash-any" => {
                let target = if kind == "crash-leader" {
                    self.leader_process(false)
                } else {
                    None
                };
                let target = target.or_else(|| self.any_process(|s| s != ProcState::Down));
                if let Some(p) = target {
                    self.disturb(|_| true, true);
                    return self.crash(p);
                }
            }
            "pause-leader" | "pause-any" => {
                let target = if kind == "pause-leader" {
                    self.leader_process(false)
                } else {
                    None
                };
                let target = target.or_else(|| self.any_process(|s| s == ProcState::Up));
                if let Some(p) = target {
                    self.disturb(|_| true, true);
                    return self.pause(p);
                }
            }
            "resign-leader" | "resign-any" | "exhaust" | "exhaust-smaller-pid" => {
                // One role only: a service resigns one shard; the coordinator's pairs are per
                // role.
                let r = self.rng.below(roles) as usize;
                let before = self.sims[r].stats.broker_faults;
                self.sims[r].disturb(true);
                let res = self.sims[r].fault(kind);
                self.on_role(r, res)?;
                if self.sims[r].stats.broker_faults > before {
                    // No target: the role injected failed calls instead, which any role's
                    // calls may meet.
                    self.disturb(|_| true, true);
                }
                return Ok(());
            }
            "foreign-stall" | "compact" => {
                // Every role on the partition reads the same log.
                let r = self.rng.below(roles) as usize;
                let partition = self.sims[r].partition;
                self.disturb(|s| s.partition == partition, true);
                let res = self.sims[r].fault(kind);
                self.on_role(r, res)?;
                let until = self.sims[r].stall_until;
                for sim in self.sims.iter_mut().filter(|s| s.partition == partition) {
                    sim.stall_until = sim.stall_until.max(until);
                }
                return Ok(());
            }
            "unavailable" => {
                let r = self.rng.below(roles) as usize;
                let partition = self.sims[r].partition;
                let until = self.now + self.rng.range(300, 6_000);
                self.disturb(|s| s.partition == partition, true);
                for sim in self.sims.iter_mut().filter(|s| s.partition == partition) {
                    sim.open_unavailable(until);
                }
                self.stats.broker_faults += 1;
                return Ok(());
            }
            "slow" => {
                let until = self.now + self.rng.range(1_000, 8_000);
                self.disturb(|_| true, true);
                for sim in &mut self.sims {
                    sim.open_slow(until);
                }
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
                self.disturb(|_| true, true);
                self.broker.lose_next_reply_op(op, n);
                self.stats.broker_faults += 1;
                self.note(format!("the next {n} {op} replies will be lost (any role)"));
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
        self.disturb(|_| true, true);
        self.broker.fail_next_op(op, n, ErrorKind::Retriable);
        self.stats.broker_faults += 1;
        self.note(format!("the next {n} {op} calls will fail (any role)"));
        Ok(())
    }

    /// Crashes process `p`: its member in every role, in one step. Every lease write a leader
    /// of it leaves open stalls every role on that partition; then the transport's sessions go
    /// (all roles at once); the process restarts later, all its roles together.
    fn crash(&mut self, p: usize) -> Res {
        let led: Vec<usize> = (0..self.sims.len())
            .filter(|&r| self.sims[r].real_leader() == Some(p))
            .collect();
        self.stats.process_crashes += 1;
        self.procs[p].state = ProcState::Down;
        self.agenda
            .retain(|a| !matches!(a.action, WorldAction::Resume { process } if process == p));
        for sim in &mut self.sims {
            // The restart starts every role: a rejoin still due is moot.
            sim.agenda
                .retain(|s| !matches!(s.action, Action::Start { member } if member == p));
            sim.deferred.retain(|&m| m != p);
            sim.members[p].frozen = false;
            sim.members[p].crashed = true;
        }
        let crashed: Vec<Option<Crashed>> =
            self.sims.iter_mut().map(|sim| sim.crash_begin(p)).collect();
        for (r, c) in crashed.iter().enumerate() {
            if !c.is_some_and(|c| c.open) {
                continue;
            }
            // The open transaction holds back the partition's LSO for every role on it until
            // a takeover of role r or its timeout (the lease duration) aborts it.
            let partition = self.sims[r].partition;
            let until = self.now + LEASE_MS;
            let mut others = 0;
            for (s, sim) in self.sims.iter_mut().enumerate() {
                if s != r && sim.partition == partition {
                    sim.stall_until = sim.stall_until.max(until);
                    others += 1;
                }
            }
            if others > 0 {
                self.stats.cross_role_stalls += 1;
            }
        }
        self.sims[0].members[p].transport.crash();
        let back = self.now + self.rng.range(500, 20_000);
        self.schedule(back, WorldAction::Start { process: p });
        let names: Vec<String> = led.iter().map(|&r| self.sims[r].role.to_string()).collect();
        self.note(format!(
            "process {} CRASHES{}, restarts at {}",
            self.sims[0].members[p].id,
            if led.is_empty() {
                String::new()
            } else {
                format!(" (leader of {})", names.join(", "))
            },
            At(back)
        ));
        for (r, c) in crashed.into_iter().enumerate() {
            if let Some(c) = c {
                let res = self.sims[r].crash_end(p, c, Some(back));
                self.on_role(r, res)?;
            }
        }
        if led.len() >= 2 {
            self.stats.multi_role_crashes += 1;
            self.stats.multi_role_moves += led.len() as u64;
            for &r in &led {
                if let Some(w) = self.sims[r].watch.as_mut().filter(|w| w.died == p) {
                    if !w.multi {
                        w.multi = true;
                        self.stats.multi_role_l1_checked += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Restarts process `p`: the same or a new transport, sometimes a new name and a
    /// corrected clock, all shared by its roles, whose members all start in this step.
    fn restart(&mut self, p: usize) -> Res {
        if self.procs[p].state != ProcState::Down {
            return Err(self.fail(
                "harness",
                "a restart of a live process was left on the agenda",
            ));
        }
        self.procs[p].state = ProcState::Up;
        self.procs[p].restarts += 1;
        let started = self.sims[0].members[p].incarnation > 0;
        let mut fresh = !started || self.rng.chance(1, 2);
        let renamed = started && self.rng.chance(1, 4);
        if renamed {
            // Back under a new name: its registration in every role stays behind, a ghost.
            let name = format!("m{p}.{}", self.procs[p].restarts);
            for sim in &mut self.sims {
                let old = std::mem::replace(
                    &mut sim.members[p].id,
                    MemberId::new(name.as_str()).expect("valid member"),
                );
                sim.ghost_ids.insert(old);
            }
            self.stats.renamed += 1;
            fresh = true;
        }
        if fresh && started {
            let transport = self.broker.transport(self.sims[0].members[p].id.as_str());
            for sim in &mut self.sims {
                sim.members[p].transport = transport.clone();
            }
        }
        if started {
            self.stats.process_restarts += 1;
            if self.rng.chance(1, 4) {
                // The process came back with a corrected clock.
                let skew = self.rng.range(-MAX_SKEW_MS, MAX_SKEW_MS);
                for sim in &mut self.sims {
                    sim.members[p].skew = skew;
                }
            }
            self.note(format!(
                "process {} restarts ({} transport{}), every role",
                self.sims[0].members[p].id,
                if fresh { "new" } else { "same" },
                if renamed { ", a new name" } else { "" }
            ));
        }
        for r in 0..self.sims.len() {
            if self.sims[r].members[p].live().is_none() {
                let res = self.sims[r].start_candidate(p, fresh, renamed, false);
                self.on_role(r, res)?;
            }
        }
        Ok(())
    }

    /// Pauses process `p`: every role's member at once.
    fn pause(&mut self, p: usize) -> Res {
        let until = self.now + self.rng.range(LEASE_MS + 500, 3 * LEASE_MS + 4_000);
        let led = self
            .sims
            .iter()
            .filter(|s| s.real_leader() == Some(p))
            .count();
        if led >= 2 {
            self.stats.multi_role_pauses += 1;
        }
        self.procs[p].state = ProcState::Paused;
        self.note(format!(
            "process {} PAUSES until {} (leader of {led} roles)",
            self.sims[0].members[p].id,
            At(until)
        ));
        for r in 0..self.sims.len() {
            self.sims[r].members[p].frozen = true;
            let res = self.sims[r].pause_until(p, until);
            self.on_role(r, res)?;
        }
        self.schedule(until, WorldAction::Resume { process: p });
        Ok(())
    }

    /// Resumes process `p`: every role's member; rejoins that came due meanwhile start now.
    fn resume(&mut self, p: usize) -> Res {
        if self.procs[p].state != ProcState::Paused {
            return Err(self.fail("harness", "a stale resume was left on the agenda"));
        }
        self.procs[p].state = ProcState::Up;
        self.note(format!("process {} resumes", self.sims[0].members[p].id));
        for sim in &mut self.sims {
            sim.members[p].frozen = false;
            sim.resume(p);
        }
        for r in 0..self.sims.len() {
            let due = self.sims[r].deferred.contains(&p);
            self.sims[r].deferred.retain(|&m| m != p);
            if due && self.sims[r].members[p].live().is_none() {
                let res = self.sims[r].start_candidate(p, false, false, false);
                self.on_role(r, res)?;
            }
        }
        Ok(())
    }
}

/// Runs one seed of the multi-role simulation: `roles` roles hosted by the same 2..=5
/// processes (see [`World`]); with `roles <= 1`, the single-role simulation ([`run_seed`]).
/// A failing run is run again with every I/O in its trace, as [`run_seed`] does.
pub fn run_seed_roles(
    seed: u64,
    roles: usize,
    run_ms: i64,
    print: bool,
) -> Result<Stats, Box<Failure>> {
    if roles <= 1 {
        return run_seed(seed, run_ms, print);
    }
    let mut world = World::new(seed, roles, run_ms, print, print);
    let first = match world.run() {
        Ok(()) => return Ok(world.totals()),
        Err(f) => f,
    };
    if print {
        return Err(Box::new(first));
    }
    let mut again = World::new(seed, roles, run_ms, true, false);
    Err(confirmed(first, again.run()))
}
