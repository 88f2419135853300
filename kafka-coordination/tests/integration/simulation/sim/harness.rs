//! The shared harness: the seeded generator, the world a role runs in (members, calls on
//! the wire, the agenda, the watches of the invariants), and the loop that runs it step by step.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::core::machine::{Candidate, Event};
use kafka_coordination::core::record::{MemberId, Role};
use kafka_coordination::core::state::RoleState;
use kafka_coordination::core::{role_partition, FencingToken, Timing, UnixMillis};
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::ManualClock;

use super::report::{confirmed, Failure, Stats};
use super::{
    timing, At, LEASE_MS, MAX_MEMBERS, MAX_SKEW_MS, PARTITIONS, RENEW_MS, STAGGER_MS, T0,
    TRACE_LINES,
};

// ------------------------------------------------------------------------------------------
// PRNG

/// splitmix64: small, fast, and good enough to draw schedules from.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x6A09_E667_F3BC_C908)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    pub(super) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Runs one seed for `run_ms` of virtual time. With `print`, prints every trace line
/// (I/O included) as it happens.
///
/// A failing run is run again with every I/O in its trace (the run is deterministic, so it
/// fails the same way), and that failure, with the detailed trace, is returned.
pub fn run_seed(seed: u64, run_ms: i64, print: bool) -> Result<Stats, Box<Failure>> {
    let mut sim = Sim::new(seed, run_ms, print, print);
    let first = match sim.run() {
        Ok(()) => return Ok(sim.stats),
        Err(f) => f,
    };
    if print {
        return Err(Box::new(first));
    }
    let mut again = Sim::new(seed, run_ms, true, false);
    Err(confirmed(first, again.run()))
}

// ------------------------------------------------------------------------------------------
// The world

/// One transport call.
#[derive(Clone, Debug)]
pub(super) enum Op {
    Append {
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    Read {
        partition: i32,
        from: i64,
    },
    Acquire {
        timeout: Duration,
    },
    Describe,
    Write {
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
    },
}

impl Op {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Op::Append { value: Some(_), .. } => "register",
            Op::Append { value: None, .. } => "deregister",
            Op::Read { .. } => "read",
            Op::Acquire { .. } => "acquire",
            Op::Describe => "describe",
            Op::Write { value: Some(_), .. } => "write-lease",
            Op::Write { value: None, .. } => "clear-lease",
        }
    }

    pub(super) fn token(&self) -> Option<FencingToken> {
        match self {
            Op::Write { token, .. } => Some(*token),
            _ => None,
        }
    }
}

/// A call on the wire.
#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) op: Op,
    /// When the request reaches the broker; `None` once it took effect.
    pub(super) effect_at: Option<i64>,
    /// The reply leg.
    pub(super) reply_ms: i64,
    /// The answer, once the call took effect.
    pub(super) answer: Option<Event>,
    /// When the answer reaches the member.
    pub(super) answer_at: i64,
    /// Both legs together: the call's latency.
    pub(super) legs: i64,
}

#[derive(Debug)]
pub(super) struct Live {
    pub(super) cand: Candidate,
    pub(super) io: Option<InFlight>,
    pub(super) paused: bool,
    /// Every pair a challenge of this incarnation was granted (R1). The pair minted on the
    /// way out (to supersede these) is not among them: it is never handed out, and the
    /// transport releases it when the candidate ends.
    pub(super) held: Vec<FencingToken>,
    /// Whether the outstanding acquire is the exit's supersede.
    pub(super) exit_acquire: bool,
    /// Whether a call failed while the member was leaving (R1 then does not apply).
    pub(super) exit_trouble: bool,
    /// The candidate's contest window as last seen (L1 counts its growth as a disturbance).
    pub(super) contest_seen: Option<UnixMillis>,
    /// The candidate's outage extension as last seen (L1 counts its growth as a disturbance).
    pub(super) outage_seen: Option<UnixMillis>,
    /// L1: the largest rank this member held since the watch was armed (its timer may still
    /// rest on it after a read lowered its rank).
    pub(super) rank_high: Option<usize>,
}

#[derive(Debug)]
pub(super) enum Life {
    Down,
    Up(Box<Live>),
}

#[derive(Debug)]
pub(super) struct Member {
    pub(super) id: MemberId,
    pub(super) skew: i64,
    pub(super) transport: MemoryTransport,
    /// Starts so far; 1 for the first life, >= 2 for a restarted or rejoined member.
    pub(super) incarnation: u32,
    /// Every token this member saw fenced, in any incarnation.
    pub(super) fenced: HashSet<FencingToken>,
    /// When a lease write of this member last took effect (L3).
    pub(super) last_write: i64,
    /// When this member last met trouble: a `Failed` answer, a start or a resume (L3).
    pub(super) last_trouble: i64,
    /// L4: the pair of the healthy leader (if one led) when this member's latest read took
    /// effect, and when its latest check did (`None` before its first check).
    pub(super) read_healthy: Option<FencingToken>,
    pub(super) check_healthy: Option<Option<FencingToken>>,
    /// G2: since when this live member's registration has been tombstoned by a leader (reset
    /// by trouble and resumes), until it registers again.
    pub(super) evicted_since: Option<i64>,
    /// The offset of this member's latest registration that took effect on the broker (its
    /// answer may still be on the wire).
    pub(super) logged_join: Option<i64>,
    /// Whether its last life ended in a crash (its registration stays behind).
    pub(super) crashed: bool,
    /// When it last started or resumed (L1: it needs a call to catch up from then).
    pub(super) up_since: i64,
    /// Multi-role: its process is paused (a rejoin that comes due waits for the resume).
    pub(super) frozen: bool,
    pub(super) life: Life,
}

impl Member {
    pub(super) fn new(name: &str, skew: i64, transport: MemoryTransport) -> Member {
        Member {
            id: MemberId::new(name).expect("valid member"),
            skew,
            transport,
            incarnation: 0,
            fenced: HashSet::new(),
            last_write: T0,
            last_trouble: T0,
            read_healthy: None,
            check_healthy: None,
            evicted_since: None,
            logged_join: None,
            crashed: false,
            up_since: T0,
            frozen: false,
            life: Life::Down,
        }
    }

    pub(super) fn live(&self) -> Option<&Live> {
        match &self.life {
            Life::Up(l) => Some(l),
            Life::Down => None,
        }
    }

    pub(super) fn live_mut(&mut self) -> Option<&mut Live> {
        match &mut self.life {
            Life::Up(l) => Some(l),
            Life::Down => None,
        }
    }

    pub(super) fn restarted(&self) -> bool {
        self.incarnation >= 2
    }
}

#[derive(Debug)]
pub(super) enum Action {
    Fault,
    Start {
        member: usize,
    },
    Resume {
        member: usize,
        incarnation: u32,
    },
    EndUnavailable,
    EndSlow,
    Ghost {
        member: usize,
        transport: Box<MemoryTransport>,
        op: Op,
    },
}

#[derive(Debug)]
pub(super) struct Scheduled {
    pub(super) at: i64,
    pub(super) seq: u64,
    pub(super) action: Action,
}

/// The next thing to happen.
#[derive(Clone, Copy, Debug)]
pub(super) enum Next {
    Agenda(usize),
    Effect(usize),
    Answer(usize),
    Tick(usize),
}

/// An armed L1 check: the real leader `died` at `t0`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    pub(super) died: usize,
    /// The dead leader's pair.
    pub(super) pair: FencingToken,
    pub(super) t0: i64,
    /// D: the latest deadline a lease of `pair` committed (a write on the wire may still
    /// raise it).
    pub(super) deadline: i64,
    /// The latest deadline of a lease of another pair committed since the death: a successor
    /// that wrote its first lease, and has not heard of its election yet or died before it
    /// did. Standbys go by the latest lease.
    pub(super) successor_deadline: Option<i64>,
    /// Whether anything else happened since the death (a fault, a start, a resume): the
    /// failover then does not count as calm.
    pub(super) disturbed: bool,
    /// Whether the dead leader left a lease write open (reads stall until it is aborted).
    pub(super) open_write: bool,
    /// Whether a ghost registration ranked ahead of every standby at the death.
    pub(super) ghost_ahead: bool,
    /// The bound as last computed before an event.
    pub(super) last: Option<Bound>,
    /// Whether the coordinator's pair moved without an election since the death (epoch
    /// exhaustion): the check then sees another pair and reads once more.
    pub(super) exhausted: bool,
    /// When the lease was cleared since the death (a challenger that resigned on its way):
    /// members count their turn again from when they read that.
    pub(super) cleared_at: Option<i64>,
    /// Multi-role: the death was a process crash that took this role's leader together with
    /// the leader of at least one other role.
    pub(super) multi: bool,
}

/// What the first half of a crash leaves for the second.
#[derive(Clone, Copy, Debug)]
pub(super) struct Crashed {
    pub(super) was_real_leader: bool,
    pub(super) held: Option<FencingToken>,
    /// A lease write left open (it stalls the partition until aborted).
    pub(super) open: bool,
    /// A request still on the wire (it lands later).
    pub(super) ghost: bool,
}

/// L1's bound as things stand (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(super) struct Bound {
    pub(super) at: i64,
    /// The rank it was computed with.
    pub(super) rank: usize,
    /// Whether it is the calm bound `D + r x stagger + SLACK_MS`.
    pub(super) calm: bool,
}

/// The lease duration after a failover's first election, in which further elections are
/// counted as churn.
#[derive(Clone, Copy, Debug)]
pub(super) struct Settle {
    pub(super) until: i64,
    pub(super) elections: u64,
}

/// G1: what a new leader must have tombstoned by its first renewal.
#[derive(Clone, Debug)]
pub(super) struct PassedOver {
    pub(super) member: usize,
    pub(super) incarnation: u32,
    pub(super) elected_at: i64,
    /// The registrations ahead of it in its own view at its election.
    pub(super) ahead: Vec<(MemberId, i64)>,
    /// A call of the leader failed since (G1 then does not apply to this election).
    pub(super) troubled: bool,
    /// Members whose registration key was tombstoned by the leader, or registered again,
    /// since the election (whether or not a stall keeps it unreadable).
    pub(super) cleared: HashSet<MemberId>,
}

/// The trace: the last `TRACE_LINES` lines, rendered when they were noted. Shared by the
/// roles of a multi-role run (one timeline).
pub(super) type Trace = Rc<RefCell<VecDeque<String>>>;

pub(super) fn new_trace() -> Trace {
    Rc::new(RefCell::new(VecDeque::with_capacity(TRACE_LINES + 1)))
}

pub(super) fn push_trace(trace: &Trace, print: bool, line: String) {
    if print {
        println!("{line}");
    }
    let mut t = trace.borrow_mut();
    if t.len() == TRACE_LINES {
        t.pop_front();
    }
    t.push_back(line);
}

pub(super) struct Sim {
    pub(super) seed: u64,
    pub(super) rng: Rng,
    /// Record I/O in the trace, not only faults and changes of leadership.
    pub(super) detail: bool,
    /// Print every trace line as it happens.
    pub(super) print: bool,
    pub(super) clock: ManualClock,
    pub(super) broker: MemoryBroker,
    pub(super) observer: MemoryTransport,
    pub(super) role: Role,
    pub(super) partition: i32,
    pub(super) timing: Timing,
    pub(super) now: i64,
    pub(super) end: i64,
    pub(super) members: Vec<Member>,
    pub(super) agenda: Vec<Scheduled>,
    pub(super) seq: u64,
    pub(super) trace: Trace,
    /// Multi-role runs: the role's name, shown in trace lines and failures.
    pub(super) label: Option<String>,
    /// Multi-role runs: the role is one of several hosted by the same processes. Process-level
    /// faults (crash, restart, pause, resume) and broker-wide ones come from the [`World`];
    /// the role schedules only its own rejoins, ghosts and window ends.
    pub(super) hosted: bool,
    /// Hosted: members whose rejoin came due while their process was paused (they start when
    /// it resumes).
    pub(super) deferred: Vec<usize>,
    pub(super) unavailable_until: i64,
    pub(super) slow_until: i64,
    /// When the last unavailable or slow window ended (L3).
    pub(super) last_window_end: i64,
    pub(super) last_disturbance: i64,
    pub(super) last_current: Option<FencingToken>,
    pub(super) superseded: HashSet<FencingToken>,
    pub(super) granted: HashSet<FencingToken>,
    /// Pairs of members whose resign completed (R1).
    pub(super) resigned: HashSet<FencingToken>,
    /// The order in which the broker granted each pair (T1).
    pub(super) grant_order: std::collections::HashMap<FencingToken, u64>,
    /// Elected terms by the grant order of their pair (T1).
    pub(super) terms: std::collections::BTreeMap<u64, i64>,
    pub(super) producer_ids: BTreeSet<i64>,
    pub(super) audit_seen: usize,
    pub(super) audit_dirty: bool,
    pub(super) watch: Option<Watch>,
    /// L1: the latest disturbance that may hold a standby back from its turn for up to a
    /// lease duration (a failed call, a contest window that grew, a registration during a
    /// stall).
    pub(super) delay_mark: i64,
    /// L1: the slowest call on the wire since the watch was armed, other than acquires.
    pub(super) window_io: i64,
    /// L1: the slowest acquire on the wire since the watch was armed.
    pub(super) window_acquire: i64,
    /// When the last open transaction of another role on the partition times out.
    pub(super) stall_until: i64,
    /// Runs with a slow coordinator: a third of the acquires take longer than the stagger.
    pub(super) slow_coordinator: bool,
    /// The other role that shares the partition, and its holder's transport.
    pub(super) other_role: Role,
    pub(super) other_holder: MemoryTransport,
    /// Member names that will never come back (their registrations are ghosts).
    pub(super) ghost_ids: HashSet<MemberId>,
    /// L1: the latest deadline committed with each pair (readable or still behind a stall).
    pub(super) deadlines: std::collections::HashMap<FencingToken, i64>,
    pub(super) settle: Option<Settle>,
    pub(super) passed_over: Option<PassedOver>,
    /// Whether the members evict the members they pass over ([`evicts`]); without it they
    /// skip them, and no member writes another member's records (G3).
    pub(super) evict: bool,
    /// Measurement mode (`SIM_LENIENT` set): L1 and L4 violations are counted, not failures,
    /// so that a machine that does not meet them can be measured.
    pub(super) lenient: bool,
    pub(super) stats: Stats,
}

pub(super) type Res<T = ()> = Result<T, Failure>;

/// What [`Sim::with`] builds a role's state from.
pub(super) struct SimParts {
    pub(super) seed: u64,
    pub(super) rng: Rng,
    pub(super) detail: bool,
    pub(super) print: bool,
    pub(super) clock: ManualClock,
    pub(super) broker: MemoryBroker,
    pub(super) role: Role,
    pub(super) partition: i32,
    pub(super) run_ms: i64,
    pub(super) members: Vec<Member>,
    pub(super) slow_coordinator: bool,
    pub(super) trace: Trace,
    /// The role's name in trace lines: `Some` for a role hosted with others (multi-role).
    pub(super) label: Option<String>,
}

impl Sim {
    pub(super) fn new(seed: u64, run_ms: i64, detail: bool, print: bool) -> Sim {
        let mut rng = Rng::new(seed);
        let clock = ManualClock::new(UnixMillis(T0));
        let broker = MemoryBroker::new(PARTITIONS, Arc::new(clock.clone()));
        let role = Role::new("sim-role").expect("valid role");
        let partition = role_partition(&role, PARTITIONS).expect("valid partition count");
        let n = rng.range(2, MAX_MEMBERS as i64) as usize;
        let members = (0..n)
            .map(|i| {
                let name = format!("m{i}");
                let skew = rng.range(-MAX_SKEW_MS, MAX_SKEW_MS);
                Member::new(name.as_str(), skew, broker.transport(name.as_str()))
            })
            .collect();
        let slow_coordinator = rng.chance(1, 3);
        let mut sim = Sim::with(SimParts {
            seed,
            rng,
            detail,
            print,
            clock,
            broker,
            role,
            partition,
            run_ms,
            members,
            slow_coordinator,
            trace: new_trace(),
            label: None,
        });
        for member in 0..n {
            let at = T0 + sim.rng.range(0, 2_000);
            sim.schedule(at, Action::Start { member });
        }
        let first_fault = T0 + sim.rng.range(4_000, 10_000);
        sim.schedule(first_fault, Action::Fault);
        if print {
            let skews: Vec<String> = sim
                .members
                .iter()
                .map(|m| format!("{}:{:+}ms", m.id, m.skew))
                .collect();
            println!(
                "seed {seed}: {n} members (skew {}), lease {LEASE_MS} ms, renew {RENEW_MS} ms, \
                 stagger {STAGGER_MS} ms, partition {}, run {} ms{}",
                skews.join(" "),
                sim.partition,
                run_ms,
                if slow_coordinator {
                    ", slow coordinator"
                } else {
                    ""
                }
            );
        }
        sim
    }

    /// A role's state over the broker, clock and members given.
    pub(super) fn with(p: SimParts) -> Sim {
        let SimParts {
            seed,
            rng,
            detail,
            print,
            clock,
            broker,
            role,
            partition,
            run_ms,
            members,
            slow_coordinator,
            trace,
            label,
        } = p;
        let observer = broker.transport("observer");
        let other_role = (0..)
            .map(|k| Role::new(format!("sim-other-{k}")).expect("valid role"))
            .find(|r| role_partition(r, PARTITIONS).ok() == Some(partition))
            .expect("some role shares the partition");
        let other_holder = broker.transport("other-role-holder");
        let hosted = label.is_some();
        Sim {
            seed,
            rng,
            detail,
            print,
            clock,
            broker,
            observer,
            role,
            partition,
            timing: timing(),
            now: T0,
            end: T0 + run_ms,
            members,
            agenda: Vec::new(),
            seq: 0,
            trace,
            label,
            hosted,
            deferred: Vec::new(),
            unavailable_until: T0,
            slow_until: T0,
            last_window_end: T0,
            last_disturbance: T0,
            last_current: None,
            superseded: HashSet::new(),
            granted: HashSet::new(),
            resigned: HashSet::new(),
            grant_order: std::collections::HashMap::new(),
            terms: std::collections::BTreeMap::new(),
            producer_ids: BTreeSet::new(),
            audit_seen: 0,
            audit_dirty: false,
            watch: None,
            delay_mark: T0,
            window_io: 0,
            window_acquire: 0,
            stall_until: T0,
            slow_coordinator,
            other_role,
            other_holder,
            ghost_ids: HashSet::new(),
            deadlines: std::collections::HashMap::new(),
            settle: None,
            passed_over: None,
            evict: evicts(seed),
            lenient: std::env::var_os("SIM_LENIENT").is_some(),
            stats: Stats::default(),
        }
    }

    // ----- bookkeeping -----

    pub(super) fn note(&mut self, who: Option<usize>, what: impl Into<String>) {
        let what = what.into();
        let role = self
            .label
            .as_ref()
            .map_or(String::new(), |l| format!("[{l}] "));
        let line = match who {
            Some(i) => format!(
                "{} {}#{} {role}{what}",
                At(self.now),
                self.members[i].id,
                self.members[i].incarnation
            ),
            None => format!("{} ** {role}{what}", At(self.now)),
        };
        push_trace(&self.trace, self.print, line);
    }

    pub(super) fn schedule(&mut self, at: i64, action: Action) {
        self.seq += 1;
        self.agenda.push(Scheduled {
            at,
            seq: self.seq,
            action,
        });
    }

    pub(super) fn fail(&self, invariant: &'static str, message: impl Into<String>) -> Failure {
        let mut context = self.summary();
        let trace = self.trace.borrow();
        let _ = writeln!(context, "last {} events:", trace.len());
        for line in trace.iter() {
            let _ = writeln!(context, "  {line}");
        }
        let message = match &self.label {
            Some(l) => format!("role {l}: {}", message.into()),
            None => message.into(),
        };
        Failure {
            seed: self.seed,
            roles: 1,
            invariant,
            at: self.now,
            message,
            context,
        }
    }

    /// The broker's view of the role and its members' states.
    pub(super) fn summary(&self) -> String {
        let mut context = String::new();
        let current = self.broker.epoch_of(&self.role);
        let _ = writeln!(
            context,
            "broker{}: current pair {}, unavailable until {}, slow until {}, stalls until {}",
            self.label.as_ref().map_or(String::new(), |l| format!(
                " (role {l}, partition {})",
                self.partition
            )),
            current.map_or("none".into(), |t| t.to_string()),
            At(self.unavailable_until),
            At(self.slow_until),
            At(self.stall_until)
        );
        for (i, m) in self.members.iter().enumerate() {
            let _ = writeln!(context, "  {}", self.describe_member(i, m));
        }
        context
    }

    pub(super) fn describe_member(&self, i: usize, m: &Member) -> String {
        let head = format!("m{i} inc {} skew {:+}ms", m.incarnation, m.skew);
        match &m.life {
            Life::Down => format!("{head}: down"),
            Life::Up(l) => {
                let c = &l.cand;
                let io = match &l.io {
                    None => "idle".to_string(),
                    Some(f) => match (f.effect_at, &f.answer) {
                        (Some(e), _) => format!("{} on the wire until {}", f.op.name(), At(e)),
                        (None, Some(_)) => {
                            format!("{} answered at {}", f.op.name(), At(f.answer_at))
                        }
                        (None, None) => format!("{} taking effect now", f.op.name()),
                    },
                };
                let lease = c.state().lease().map_or("none".to_string(), |e| {
                    format!(
                        "{} {} until {}",
                        e.lease.member,
                        e.lease.token,
                        At(e.lease.deadline.0)
                    )
                });
                format!(
                    "{head}: {:?}{} token {} rank {:?} join {:?} timer {} io {} lease-seen {}",
                    c.status(),
                    if l.paused { " (paused)" } else { "" },
                    c.token().map_or("-".to_string(), |t| t.to_string()),
                    c.rank(),
                    c.join_offset(),
                    c.poll_timeout()
                        .map_or("-".to_string(), |t| At(t.0 - m.skew).to_string()),
                    io,
                    lease
                )
            }
        }
    }

    /// The member that believes it leads with the broker's current pair.
    pub(super) fn real_leader(&self) -> Option<usize> {
        let current = self.broker.epoch_of(&self.role)?;
        self.members.iter().position(|m| {
            m.live()
                .is_some_and(|l| l.cand.is_leader() && l.cand.token() == Some(current))
        })
    }

    pub(super) fn committed_state(&self) -> Res<RoleState> {
        let records = self
            .broker
            .committed_records(self.partition)
            .map_err(|e| self.fail("harness", format!("committed_records: {e}")))?;
        Ok(RoleState::build(self.role.clone(), &records))
    }

    // ----- the loop -----

    pub(super) fn run(&mut self) -> Res {
        self.check()?;
        loop {
            let next = self.next_event();
            let Some((t, next)) = next else {
                if self.watch.is_some() {
                    return Err(self.l1_failure("nothing left to happen"));
                }
                break;
            };
            self.before_step(t)?;
            if t > self.end && self.watch.is_none() {
                break;
            }
            if t > self.end + 120_000 {
                return Err(self.fail("harness", "the run did not wind down"));
            }
            debug_assert!(t >= self.now);
            self.now = t;
            self.clock.set(UnixMillis(t));
            self.stats.steps += 1;
            self.step(next)?;
            self.check()?;
        }
        self.final_checks()
    }

    /// Before the step at `t` (the next event, of this role or, in a multi-role run, of any):
    /// L1 fails when `t` is past the bound with no election yet; the churn window closes.
    pub(super) fn before_step(&mut self, t: i64) -> Res {
        if let Some(mut w) = self.watch {
            let bound = self.l1_bound(&w);
            // An election in the step in which its member became able to take over (it
            // started, or resumed) has no bound to compare with: it counts as met, not calm.
            w.last = bound;
            self.watch = Some(w);
            if let Some(b) = bound {
                if t > b.at {
                    if !self.lenient {
                        return Err(self.l1_failure(&format!("next event at {}", At(t))));
                    }
                    self.stats.l1_violations += 1;
                    self.watch = None;
                }
            }
        }
        if self.settle.is_some_and(|st| t > st.until) {
            self.close_settle();
        }
        Ok(())
    }

    /// Runs one event of this role (the clock is already set).
    pub(super) fn step(&mut self, next: Next) -> Res {
        match next {
            Next::Agenda(k) => {
                let item = self.agenda.swap_remove(k);
                self.on_agenda(item.action)?;
            }
            Next::Effect(i) => self.on_effect(i)?,
            Next::Answer(i) => {
                let live = self.members[i].live_mut().expect("answer of a live member");
                let io = live.io.take().expect("answer of an outstanding call");
                let answer = io.answer.expect("an answered call");
                self.drive(i, Some((answer, io.op.token())))?;
            }
            Next::Tick(i) => self.drive(i, Some((Event::Tick, None)))?,
        }
        Ok(())
    }

    pub(super) fn next_event(&self) -> Option<(i64, Next)> {
        self.next_event_keyed().map(|(t, _, n)| (t, n))
    }

    /// The next event with its tie-break order (events at the same instant run by order).
    pub(super) fn next_event_keyed(&self) -> Option<(i64, u64, Next)> {
        let mut best: Option<(i64, u64, Next)> = None;
        let mut offer = |t: i64, order: u64, n: Next| {
            if best.is_none_or(|(bt, bo, _)| (t, order) < (bt, bo)) {
                best = Some((t, order, n));
            }
        };
        for (k, s) in self.agenda.iter().enumerate() {
            offer(s.at.max(self.now), s.seq, Next::Agenda(k));
        }
        for (i, m) in self.members.iter().enumerate() {
            let Some(l) = m.live() else { continue };
            let base = 1u64 << 40 | (i as u64) << 2;
            match &l.io {
                Some(f) => {
                    if let Some(e) = f.effect_at {
                        offer(e.max(self.now), base, Next::Effect(i));
                    } else if !l.paused {
                        offer(f.answer_at.max(self.now), base | 1, Next::Answer(i));
                    }
                }
                None if !l.paused => {
                    if let Some(at) = l.cand.poll_timeout() {
                        offer((at.0 - m.skew).max(self.now), base | 2, Next::Tick(i));
                    }
                }
                None => {}
            }
        }
        best
    }
}

thread_local! {
    /// The rule of the runs on this thread, when a test chooses it ([`with_eviction`]).
    static EVICT: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every run on this thread evicting (or not), whatever the seed says.
pub fn with_eviction<R>(evict: bool, f: impl FnOnce() -> R) -> R {
    EVICT.with(|e| e.set(Some(evict)));
    let r = f();
    EVICT.with(|e| e.set(None));
    r
}

/// Whether the members of the run with `seed` evict the members they pass over: a quarter of
/// the runs, drawn from the seed alone so that the rest of the schedule does not change.
/// `SIM_EVICT=1` (or `0`) makes every run evict (or none), to compare the two rules.
pub fn evicts(seed: u64) -> bool {
    if let Some(evict) = EVICT.with(std::cell::Cell::get) {
        return evict;
    }
    match std::env::var("SIM_EVICT").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => seed % 4 == 3,
    }
}
