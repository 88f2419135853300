//! The deterministic simulation: N members, each a [`Candidate`] with its own clock skew,
//! against one [`MemoryBroker`], in virtual time, under a seeded schedule of faults. By
//! default one role is contested; with several roles, every member is a process that hosts a
//! candidate of each (see "Multi-role processes" below).
//!
//! # The model
//!
//! * **Time.** One [`ManualClock`] is the broker's clock and the true time; the simulator sets
//!   it before every step. Nothing waits in real time, nothing runs on another thread. Member
//!   `i` sees `true time + skew_i`, with `|skew_i| <= MAX_SKEW_MS` (100 ms; drawn per member,
//!   drawn again for a quarter of the restarts). That bound is the assumption L1, L2 and L3
//!   rest on: skew must stay well below `lease - renew` (2 s here), or a
//!   live leader's lease looks lapsed to a standby whose clock runs ahead.
//! * **Members.** A member is a `Candidate` plus a `MemoryTransport`. Each I/O command is one
//!   transport call: its request leg takes `req` ms, then the call takes effect on the broker
//!   (at that virtual instant), then the reply leg takes `rep` ms, then the answer is handed to
//!   the candidate. Outside slow windows `req, rep <= LEG_MS` (25 ms), often both zero (the
//!   whole chain then runs in one step). In a third of the runs the coordinator is slow: a
//!   third of the acquires then take `STAGGER_MS / 2 ..= SLOW_ACQUIRE_MS` (up to three
//!   staggers) to reach it, so the next rank's turn comes while a challenge is on the wire.
//!   `ReadPartition` never blocks (`max_wait = 0`); it reports `stalled` while an open
//!   transaction holds the partition's last stable offset below its end.
//!   Transport errors map as: `Fenced` on a lease write -> `Event::Fenced`, `Retriable` ->
//!   `Event::Failed`, anything else fails the run.
//! * **Faults**, drawn from the seed: crash (the candidate is dropped and the transport's
//!   sessions too; a crashed leader may leave a lease write open with
//!   `begin_lease_write_and_crash`; a request still on the wire may reach the broker after the
//!   crash, a "ghost" request), restart after 0.5..20 s (a new candidate, same member id, the
//!   same or a new transport; after a quarter of the crashes a **new member id**, as a pod that
//!   comes back under another name: the old registration stays behind, a ghost member that
//!   never challenges), pause longer than the lease (SIGSTOP / GC pause: requests on the wire
//!   still land, the member is not driven and keeps its stale belief until it resumes),
//!   resign, failed calls (`fail_next_op`), lost replies (`lose_next_reply_op`), partition
//!   unavailable windows, slow windows (legs up to 1.5 s), epoch exhaustion (`force_epoch`
//!   near 32766, sometimes after `next_producer_id_smaller`), compaction, and **stalls**: the
//!   holder of another role on the same partition dies in the middle of a write, so every read
//!   of the partition stops at its open transaction for 1..8 s (its timeout). A member whose
//!   candidate ends (fenced, resigned) rejoins later as a new incarnation.
//!
//! # The invariants, checked after every step
//!
//! * **S1** At most one member that believes it leads (`is_leader()`) holds the broker's
//!   current pair (`epoch_of`). A paused or not-yet-fenced old leader believes with a
//!   superseded pair; that is allowed: the broker fences it.
//! * **S2** Every accepted lease write carries the pair current at that instant: at the
//!   instant a write returns `Ok`, `epoch_of == token`; and every new entry of the broker's
//!   audit log `accepted_lease_writes()` has `token == current` and was committed at that
//!   step's instant.
//! * **S3** A member that saw a fence for token T (a `Deposed { T }` command, or `Fenced`
//!   answered to a lease write with T) never believes it leads with T again, nor emits
//!   `Elected { T }`, in that incarnation or a later one.
//! * **S4** Third-party view (`describe_epoch` + `LeadershipStatus::authoritative`): at most
//!   one member holds (as its leader token or its transport's producer session) a token that
//!   is authoritative; `describe` agrees with `epoch_of`; a pair once superseded never becomes
//!   current again; every acquire returns a pair never returned before.
//! * **L1** After the real leader (`is_leader()` with the current pair) dies (crash or pause),
//!   a live member emits `Elected` by a bound computed from what the harness knows, checked at
//!   every death and kept up to date as things happen (see `Sim::l1_bound`). In a calm system
//!   it is `D + r * STAGGER_MS + SLACK_MS`: D the deadline of the dead pair's last committed
//!   lease, r the smallest rank among the members that can take over, `SLACK_MS =
//!   MAX_SKEW_MS + 5 * MAX_IO_MS` = 350 ms (the successor's clock may run 100 ms behind; after
//!   its turn it reads, checks, announces, acquires and writes its first lease, each within
//!   `MAX_IO_MS`); a calm failover that takes longer fails the run. Disturbances add terms
//!   instead of cancelling the check: a failed call, a lost race, a challenge seen under way or
//!   announced (up to a lease of waiting), a stall (until it ends), a lease write the dead
//!   leader left open (the hold on it), a member that just started or resumed, slow calls (the
//!   slowest call X and the slowest acquire A replace `MAX_IO_MS`; once `3 X` reaches the
//!   stagger less two skews, every rank may challenge unseen, and the largest rank counts).
//!   The bound is not stated while no member can take over (all down or paused); members
//!   always come back.
//! * **L2** A restarted member lands at the tail and never preempts: (a) each rank it
//!   evaluates equals the number of registered members, other than itself and the lease
//!   holder, whose registration precedes its own (all of them, when it registered); (b) it
//!   never issues AcquireEpoch while, in its own view, another member's lease is live by its
//!   tail rank (`now < deadline + tail_rank * STAGGER`).
//!
//! * **L3** A live leader keeps its lease: the real leader, unless paused or in trouble (a
//!   failed or slow call, a start, a resume, the end of an unavailable or slow window) since
//!   its last accepted lease write, writes again within `RENEW_MS + LEG_MS`. (Without it, a
//!   leader that stops renewing goes unnoticed: its successor takes over on time, and the old
//!   leader, never writing again, never learns it was fenced; S1 allows a stale belief.)
//!
//! * **L4** A healthy leader is never challenged: no member issues a (non-exit) AcquireEpoch
//!   when the same real leader was already healthy (unpaused, untroubled and on schedule as in
//!   L3, not resigning, the broker up and fast) at the instant its latest read took effect and, once it checks
//!   before challenging, at the instant its latest check took effect. Such a read held the
//!   leader's live lease, unless another role's open transaction stalled it, and such a check
//!   named the leader's pair: a standby that challenged on them would depose a healthy leader.
//!   (A challenge whose inputs came before the new leader's first lease committed is allowed:
//!   that is the race the stagger and the check make rare.)
//! * **G1** Ghosts cost one failover, once: by a new leader's first renewal, no registration
//!   that was ranked ahead of it at its election counts in a rank any more (unless the member
//!   registered again meanwhile). Without eviction (the default, three quarters of the runs:
//!   [`evicts`]) each is passed over in the log as committed, once the leader's lease is
//!   readable there. With eviction the leader has tombstoned each (unless one of its calls
//!   failed or was slow in between: the renewal then comes first and the tombstones after it).
//! * **G2** A live member is never lost: one that a new leader passed over (without eviction)
//!   or whose registration a leader tombstoned (with it) registers again within `G2_BOUND_MS`
//!   (counted from the election or the tombstone, its last failed call or its resume).
//! * **G3** Without eviction no member ever writes a record of another member's key.
//! * **R1** A resign fences: when a member's candidate ends `Resigned` and no call failed on
//!   its way out (judged by the harness, not by the candidate's report), its exit reports
//!   complete, no pair it was granted for a challenge in that
//!   incarnation is the broker's current one (so none is `authoritative`), and the broker never
//!   accepts a lease write carrying one of them afterwards. (The current pair is then the one
//!   it minted on the way out, which nobody was handed and its transport released.)
//! * **T1** Terms strictly grow with the pairs: of two elected pairs, the one the coordinator
//!   granted later has the larger term (across hand-overs, crashes, producer-id changes and
//!   exhaustion), and every `Elected { term }` is the offset of a lease record the broker
//!   accepted with the elected pair.
//!
//! Besides: the candidate's contract (one I/O outstanding; a due `Tick` acts; no event is
//! refused) and a livelock guard.
//!
//! # Multi-role processes
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

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::fmt::{self, Write as _};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::core::machine::{Candidate, Command, EndReason, Event, Status};
use kafka_coordination::core::record::{Key, Lease, MemberId, Role};
use kafka_coordination::core::state::RoleState;
use kafka_coordination::core::{role_partition, FencingToken, Timing, UnixMillis};
use kafka_coordination::memory::{BrokerOp, MemoryBroker, MemoryTransport, EXHAUSTED_EPOCH};
use kafka_coordination::{
    Coordinator, ErrorKind, LeaseWriter, ManualClock, Registrar, StateReader, TransportError,
};

/// The virtual instant the simulation starts at.
pub const T0: i64 = 1_700_000_000_000;
/// Lease duration (also the transaction timeout).
pub const LEASE_MS: i64 = 3_000;
/// Renew interval.
pub const RENEW_MS: i64 = 1_000;
/// Challenge stagger between consecutive ranks.
pub const STAGGER_MS: i64 = 500;
/// Partitions of the modelled topic.
pub const PARTITIONS: i32 = 4;
/// Members per run: 2..=MAX_MEMBERS.
pub const MAX_MEMBERS: usize = 5;
/// Bound on each member's clock skew (both directions). Must stay well below
/// `LEASE_MS - RENEW_MS` for L1/L2 to hold; safety (S1..S4) does not depend on it.
pub const MAX_SKEW_MS: i64 = 100;
/// Bound on each leg (request, reply) of a transport call outside slow windows.
pub const LEG_MS: i64 = 25;
/// Bound on one transport call outside slow windows.
pub const MAX_IO_MS: i64 = 2 * LEG_MS;
/// Bound on each leg inside a slow window.
pub const SLOW_LEG_MS: i64 = 1_500;
/// L1's slack in a calm system: the successor's clock may be `MAX_SKEW_MS` behind, and after
/// its turn it needs a read, a check (DescribeTransactions), an announcement (the holder's
/// registration tombstoned), an acquire and a claim write, each at most `MAX_IO_MS`.
pub const SLACK_MS: i64 = MAX_SKEW_MS + (L1_CALLS + 1) * MAX_IO_MS;
/// The calls other than the acquire that a successor makes from its turn to its election:
/// read, check, announcement, claim.
pub const L1_CALLS: i64 = 4;
/// A system with no disturbance for this long before a death is "calm" (the fault schedule
/// kills the leader more often then).
pub const QUIET_BEFORE_MS: i64 = LEASE_MS + MAX_MEMBERS as i64 * STAGGER_MS + SLACK_MS;
/// In runs with a slow coordinator, a third of the acquires take this long (at most) to reach
/// it: longer than the stagger, so the next rank's turn comes while the challenge is on the wire.
pub const SLOW_ACQUIRE_MS: i64 = 3 * STAGGER_MS;
/// How long a standby waits on the lease holder's own open transaction while reads stall
/// (the machine's hold: half the renew interval).
pub const HOLD_MS: i64 = RENEW_MS / 2;
/// How often a waiting standby checks again (the machine's `RECHECK`, at most an eighth of the
/// renew interval).
pub const RECHECK_MS: i64 = 100;
/// G2: a live member that a leader passed over, or whose registration a leader tombstoned,
/// registers again within this long
/// (its next read comes at its turn, after at most a lease and a contest window, plus the
/// stagger of every rank and four slow calls).
pub const G2_BOUND_MS: i64 = 2 * LEASE_MS + MAX_MEMBERS as i64 * STAGGER_MS + 8 * SLOW_LEG_MS;
/// Virtual length of one run of the default suite.
pub const RUN_MS: i64 = 60_000;
/// How many trace lines a failure shows.
const TRACE_LINES: usize = 60;

fn ms(v: i64) -> Duration {
    Duration::from_millis(u64::try_from(v).unwrap_or(0))
}

fn timing() -> Timing {
    Timing {
        partitions: PARTITIONS,
        lease_duration: ms(LEASE_MS),
        renew_interval: ms(RENEW_MS),
        challenge_stagger: ms(STAGGER_MS),
    }
}

/// `+12.345s`: a virtual instant relative to the start.
struct At(i64);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0 - T0;
        let sign = if d < 0 { "-" } else { "+" };
        let a = d.unsigned_abs();
        write!(f, "{sign}{}.{:03}s", a / 1000, a % 1000)
    }
}

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

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

// ------------------------------------------------------------------------------------------
// Results

/// Why a run failed: the invariant, the seed, the virtual time and the recent trace.
#[derive(Debug)]
pub struct Failure {
    /// The seed of the run.
    pub seed: u64,
    /// How many roles the run had (1: the single-role simulation).
    pub roles: usize,
    /// The invariant (S1..S4, L1, L2) or contract that failed.
    pub invariant: &'static str,
    /// The virtual instant.
    pub at: i64,
    /// What was seen.
    pub message: String,
    /// The members' state and the last trace lines.
    pub context: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation seed {} failed: [{}] at t={} (virtual): {}",
            self.seed,
            self.invariant,
            At(self.at),
            self.message
        )?;
        f.write_str(&self.context)?;
        let roles = if self.roles > 1 {
            format!("SIM_ROLES={} ", self.roles)
        } else {
            String::new()
        };
        write!(
            f,
            "replay: {roles}SIM_SEED={} cargo test -p kafka-coordination --features memory --test \
             simulation replay_seed -- --nocapture",
            self.seed
        )
    }
}

/// What one run exercised.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Events processed.
    pub steps: u64,
    /// `Elected` commands.
    pub elections: u64,
    /// `Deposed` commands.
    pub depositions: u64,
    /// Crashes (of which leaders).
    pub crashes: u64,
    /// Crashes of the real leader.
    pub leader_crashes: u64,
    /// Crashed leaders that left a lease write open.
    pub open_writes: u64,
    /// Requests that reached the broker after their member crashed.
    pub ghosts: u64,
    /// Pauses longer than the lease (of which leaders).
    pub pauses: u64,
    /// Pauses of the real leader.
    pub leader_pauses: u64,
    /// Restarts and rejoins (new incarnations after the first).
    pub restarts: u64,
    /// Resign requests.
    pub resigns: u64,
    /// Broker fault injections (failures, lost replies, unavailable and slow windows).
    pub broker_faults: u64,
    /// `force_epoch` near exhaustion.
    pub exhaustions: u64,
    /// Acquires that returned a fresh producer id after the first.
    pub fresh_producer_ids: u64,
    /// `Failed` events handed to candidates.
    pub failed_events: u64,
    /// `Fenced` events handed to candidates.
    pub fenced_events: u64,
    /// Leader deaths L1 watched: every death of the real leader whose lease could be found.
    pub l1_checked: u64,
    /// ... of which met within the calm bound `D + r x stagger + SLACK_MS` (no disturbance,
    /// slow call, stall or open write counted in the bound).
    pub l1_calm: u64,
    /// ... of which ended by the paused leader resuming with the role still its own.
    pub l1_leader_back: u64,
    /// Leader deaths L1 could not watch: the committed lease was not the dead leader's.
    pub l1_skipped: u64,
    /// Largest `elected_at - (D + r * STAGGER)` among calm L1 checks (how much of the slack
    /// was used).
    pub l1_worst_ms: i64,
    /// `elected_at - (D + r * STAGGER)` of calm failovers: the failover overhead (true time).
    pub overhead: Histogram,
    /// The same by the successor's own clock (without its skew against the dead leader's):
    /// what the protocol's calls add.
    pub overhead_own_clock: Histogram,
    /// Failovers (met L1 watches) whose new term was watched for one lease duration.
    pub failovers: u64,
    /// ... in which exactly one member was elected.
    pub failovers_one_election: u64,
    /// Elections beyond the first within those windows (extra short terms).
    pub extra_elections: u64,
    /// Failovers in runs whose coordinator answers every acquire within the normal latency.
    pub fast_failovers: u64,
    /// ... in which exactly one member was elected.
    pub fast_failovers_one_election: u64,
    /// Acquires that took longer than half the stagger to reach the coordinator.
    pub slow_acquires: u64,
    /// Challenges (non-exit acquires) L4 checked.
    pub l4_checked: u64,
    /// Open transactions of another role left on the role's partition (stalled reads).
    pub foreign_stalls: u64,
    /// Restarts under a new member name: the old registration stays behind as a ghost.
    pub renamed: u64,
    /// Challenges announced (the lease holder's registration tombstoned before an acquire).
    pub announcements: u64,
    /// Registrations of other members that a new leader tombstoned.
    pub evictions: u64,
    /// ... of which a ghost's (a name that never comes back).
    pub ghost_evictions: u64,
    /// ... of which a live member's (it registers again at the tail).
    pub live_evictions: u64,
    /// Live members registered again after their eviction (G2).
    pub g2_rejoined: u64,
    /// Live members passed over by an election without eviction (G2 then asks them to
    /// register again).
    pub live_passed_over: u64,
    /// First renewals after an election at which G1 checked the passed-over registrations.
    pub g1_checked: u64,
    /// Calm failovers whose successor had a ghost ranked ahead of it.
    pub ghost_ahead_failovers: u64,
    /// With `SIM_LENIENT` set: L1 misses and L4 violations counted instead of failing the run.
    pub l1_violations: u64,
    /// See `l1_violations`.
    pub l4_violations: u64,
    /// See `l1_violations` (G1 and G2).
    pub g_violations: u64,
    /// L2 rank checks of restarted incarnations.
    pub l2_rank_checks: u64,
    /// L2 challenge checks of restarted incarnations.
    pub l2_challenge_checks: u64,
    /// Accepted lease writes audited.
    pub audited_writes: u64,
    /// Completed resigns whose pairs R1 checked.
    pub r1_checked: u64,
    /// Elections whose term T1 checked.
    pub terms_checked: u64,
    /// Multi-role runs: roles, and processes hosting one member of each.
    pub roles: u64,
    /// ... processes.
    pub processes: u64,
    /// ... process crashes (each crashes the process's member in every role).
    pub process_crashes: u64,
    /// ... of which crashed the real leader of two roles or more at once.
    pub multi_role_crashes: u64,
    /// ... the roles those crashes left without their leader (each must fail over: L1 per role).
    pub multi_role_moves: u64,
    /// ... of which L1 watched (a lease of the dead pair committed).
    pub multi_role_l1_checked: u64,
    /// ... of which a new leader was elected within the role's L1 bound.
    pub multi_role_l1_met: u64,
    /// `elected_at - (D + r x stagger)` of those failovers, calm or not (as `overhead`).
    pub multi_role_overhead: Histogram,
    /// The smallest time left to the role's L1 bound at those elections (ms; `None`: none
    /// had a bound yet).
    pub multi_role_min_margin_ms: Option<i64>,
    /// Process pauses that paused the real leader of two roles or more at once.
    pub multi_role_pauses: u64,
    /// Process restarts (every role's member restarts together; under a new name for all).
    pub process_restarts: u64,
    /// Lease writes a crashed leader left open that stalled another simulated role's reads
    /// on the same partition.
    pub cross_role_stalls: u64,
}

impl Stats {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &Stats) {
        self.steps += o.steps;
        self.elections += o.elections;
        self.depositions += o.depositions;
        self.crashes += o.crashes;
        self.leader_crashes += o.leader_crashes;
        self.open_writes += o.open_writes;
        self.ghosts += o.ghosts;
        self.pauses += o.pauses;
        self.leader_pauses += o.leader_pauses;
        self.restarts += o.restarts;
        self.resigns += o.resigns;
        self.broker_faults += o.broker_faults;
        self.exhaustions += o.exhaustions;
        self.fresh_producer_ids += o.fresh_producer_ids;
        self.failed_events += o.failed_events;
        self.fenced_events += o.fenced_events;
        self.l1_checked += o.l1_checked;
        self.l1_calm += o.l1_calm;
        self.l1_leader_back += o.l1_leader_back;
        self.l1_skipped += o.l1_skipped;
        self.l1_worst_ms = self.l1_worst_ms.max(o.l1_worst_ms);
        self.overhead.add(&o.overhead);
        self.overhead_own_clock.add(&o.overhead_own_clock);
        self.failovers += o.failovers;
        self.failovers_one_election += o.failovers_one_election;
        self.extra_elections += o.extra_elections;
        self.fast_failovers += o.fast_failovers;
        self.fast_failovers_one_election += o.fast_failovers_one_election;
        self.slow_acquires += o.slow_acquires;
        self.l4_checked += o.l4_checked;
        self.foreign_stalls += o.foreign_stalls;
        self.renamed += o.renamed;
        self.announcements += o.announcements;
        self.evictions += o.evictions;
        self.ghost_evictions += o.ghost_evictions;
        self.live_evictions += o.live_evictions;
        self.g2_rejoined += o.g2_rejoined;
        self.live_passed_over += o.live_passed_over;
        self.g1_checked += o.g1_checked;
        self.ghost_ahead_failovers += o.ghost_ahead_failovers;
        self.l1_violations += o.l1_violations;
        self.l4_violations += o.l4_violations;
        self.g_violations += o.g_violations;
        self.l2_rank_checks += o.l2_rank_checks;
        self.l2_challenge_checks += o.l2_challenge_checks;
        self.r1_checked += o.r1_checked;
        self.terms_checked += o.terms_checked;
        self.audited_writes += o.audited_writes;
        self.roles += o.roles;
        self.processes += o.processes;
        self.process_crashes += o.process_crashes;
        self.multi_role_crashes += o.multi_role_crashes;
        self.multi_role_moves += o.multi_role_moves;
        self.multi_role_l1_checked += o.multi_role_l1_checked;
        self.multi_role_l1_met += o.multi_role_l1_met;
        self.multi_role_overhead.add(&o.multi_role_overhead);
        self.multi_role_min_margin_ms =
            match (self.multi_role_min_margin_ms, o.multi_role_min_margin_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        self.multi_role_pauses += o.multi_role_pauses;
        self.process_restarts += o.process_restarts;
        self.cross_role_stalls += o.cross_role_stalls;
    }
}

/// A histogram of milliseconds in 5 ms buckets (the last one open-ended).
#[derive(Clone, Default)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max: i64,
}

impl Histogram {
    const WIDTH: i64 = 5;
    const BUCKETS: usize = 600;

    /// Records one value.
    pub fn record(&mut self, ms: i64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; Self::BUCKETS];
        }
        let b = usize::try_from(ms.max(0) / Self::WIDTH)
            .unwrap_or(usize::MAX)
            .min(Self::BUCKETS - 1);
        self.buckets[b] += 1;
        self.count += 1;
        self.max = if self.count == 1 {
            ms
        } else {
            self.max.max(ms)
        };
    }

    /// Adds another histogram's values.
    pub fn add(&mut self, o: &Histogram) {
        if o.count == 0 {
            return;
        }
        if self.buckets.is_empty() {
            self.buckets = vec![0; Self::BUCKETS];
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.max = if self.count == 0 {
            o.max
        } else {
            self.max.max(o.max)
        };
        self.count += o.count;
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The upper edge of the bucket holding the `q`-quantile (0 < q <= 1).
    pub fn quantile(&self, q: f64) -> i64 {
        let want = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return (i as i64 + 1) * Self::WIDTH;
            }
        }
        self.max
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 0 {
            return f.write_str("(none)");
        }
        write!(
            f,
            "n {} median <= {} ms, p90 <= {} ms, p99 <= {} ms, max {} ms",
            self.count,
            self.quantile(0.5),
            self.quantile(0.9),
            self.quantile(0.99),
            self.max
        )
    }
}

/// Runs one seed for `run_ms` of virtual time. With `print`, prints every trace line
/// (I/O included) as it happens.
///
/// A failing run is run again with every I/O in its trace (the run is deterministic, so it
/// fails the same way), and that failure, with the detailed trace, is returned.
/// The failure of a quiet run, checked against the detailed re-run of the same seed: the
/// re-run's failure (with its trace) when it fails the same way, else the first one, marked as
/// a sign that the simulation is not deterministic.
fn confirmed(first: Failure, again: Res) -> Box<Failure> {
    match again {
        Err(f) if f.invariant == first.invariant && f.at == first.at => Box::new(f),
        other => {
            let mut first = first;
            let _ = write!(
                first.message,
                " (and the detailed re-run did not fail the same way: {}; the simulation is not \
                 deterministic)",
                match other {
                    Ok(()) => "it passed".to_string(),
                    Err(f) => format!("[{}] at {}", f.invariant, At(f.at)),
                }
            );
            Box::new(first)
        }
    }
}

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
enum Op {
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
    fn name(&self) -> &'static str {
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

    fn token(&self) -> Option<FencingToken> {
        match self {
            Op::Write { token, .. } => Some(*token),
            _ => None,
        }
    }
}

/// A call on the wire.
#[derive(Debug)]
struct InFlight {
    op: Op,
    /// When the request reaches the broker; `None` once it took effect.
    effect_at: Option<i64>,
    /// The reply leg.
    reply_ms: i64,
    /// The answer, once the call took effect.
    answer: Option<Event>,
    /// When the answer reaches the member.
    answer_at: i64,
    /// Both legs together: the call's latency.
    legs: i64,
}

#[derive(Debug)]
struct Live {
    cand: Candidate,
    io: Option<InFlight>,
    paused: bool,
    /// Every pair a challenge of this incarnation was granted (R1). The pair minted on the
    /// way out (to supersede these) is not among them: it is never handed out, and the
    /// transport releases it when the candidate ends.
    held: Vec<FencingToken>,
    /// Whether the outstanding acquire is the exit's supersede.
    exit_acquire: bool,
    /// Whether a call failed while the member was leaving (R1 then does not apply).
    exit_trouble: bool,
    /// The candidate's contest window as last seen (L1 counts its growth as a disturbance).
    contest_seen: Option<UnixMillis>,
    /// L1: the largest rank this member held since the watch was armed (its timer may still
    /// rest on it after a read lowered its rank).
    rank_high: Option<usize>,
}

#[derive(Debug)]
enum Life {
    Down,
    Up(Box<Live>),
}

#[derive(Debug)]
struct Member {
    id: MemberId,
    skew: i64,
    transport: MemoryTransport,
    /// Starts so far; 1 for the first life, >= 2 for a restarted or rejoined member.
    incarnation: u32,
    /// Every token this member saw fenced, in any incarnation.
    fenced: HashSet<FencingToken>,
    /// When a lease write of this member last took effect (L3).
    last_write: i64,
    /// When this member last met trouble: a `Failed` answer, a start or a resume (L3).
    last_trouble: i64,
    /// L4: the pair of the healthy leader (if one led) when this member's latest read took
    /// effect, and when its latest check did (`None` before its first check).
    read_healthy: Option<FencingToken>,
    check_healthy: Option<Option<FencingToken>>,
    /// G2: since when this live member's registration has been tombstoned by a leader (reset
    /// by trouble and resumes), until it registers again.
    evicted_since: Option<i64>,
    /// The offset of this member's latest registration that took effect on the broker (its
    /// answer may still be on the wire).
    logged_join: Option<i64>,
    /// Whether its last life ended in a crash (its registration stays behind).
    crashed: bool,
    /// When it last started or resumed (L1: it needs a call to catch up from then).
    up_since: i64,
    /// Multi-role: its process is paused (a rejoin that comes due waits for the resume).
    frozen: bool,
    life: Life,
}

impl Member {
    fn new(name: &str, skew: i64, transport: MemoryTransport) -> Member {
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

    fn live(&self) -> Option<&Live> {
        match &self.life {
            Life::Up(l) => Some(l),
            Life::Down => None,
        }
    }

    fn live_mut(&mut self) -> Option<&mut Live> {
        match &mut self.life {
            Life::Up(l) => Some(l),
            Life::Down => None,
        }
    }

    fn restarted(&self) -> bool {
        self.incarnation >= 2
    }
}

#[derive(Debug)]
enum Action {
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
struct Scheduled {
    at: i64,
    seq: u64,
    action: Action,
}

/// The next thing to happen.
#[derive(Clone, Copy, Debug)]
enum Next {
    Agenda(usize),
    Effect(usize),
    Answer(usize),
    Tick(usize),
}

/// An armed L1 check: the real leader `died` at `t0`.
#[derive(Clone, Copy, Debug)]
struct Watch {
    died: usize,
    /// The dead leader's pair.
    pair: FencingToken,
    t0: i64,
    /// D: the latest deadline a lease of `pair` committed (a write on the wire may still
    /// raise it).
    deadline: i64,
    /// The latest deadline of a lease of another pair committed since the death: a successor
    /// that wrote its first lease, and has not heard of its election yet or died before it
    /// did. Standbys go by the latest lease.
    successor_deadline: Option<i64>,
    /// Whether anything else happened since the death (a fault, a start, a resume): the
    /// failover then does not count as calm.
    disturbed: bool,
    /// Whether the dead leader left a lease write open (reads stall until it is aborted).
    open_write: bool,
    /// Whether a ghost registration ranked ahead of every standby at the death.
    ghost_ahead: bool,
    /// The bound as last computed before an event.
    last: Option<Bound>,
    /// Whether the coordinator's pair moved without an election since the death (epoch
    /// exhaustion): the check then sees another pair and reads once more.
    exhausted: bool,
    /// When the lease was cleared since the death (a challenger that resigned on its way):
    /// members count their turn again from when they read that.
    cleared_at: Option<i64>,
    /// Multi-role: the death was a process crash that took this role's leader together with
    /// the leader of at least one other role.
    multi: bool,
}

/// What the first half of a crash leaves for the second.
#[derive(Clone, Copy, Debug)]
struct Crashed {
    was_real_leader: bool,
    held: Option<FencingToken>,
    /// A lease write left open (it stalls the partition until aborted).
    open: bool,
    /// A request still on the wire (it lands later).
    ghost: bool,
}

/// L1's bound as things stand (see the module docs).
#[derive(Clone, Copy, Debug)]
struct Bound {
    at: i64,
    /// The rank it was computed with.
    rank: usize,
    /// Whether it is the calm bound `D + r x stagger + SLACK_MS`.
    calm: bool,
}

/// The lease duration after a failover's first election, in which further elections are
/// counted as churn.
#[derive(Clone, Copy, Debug)]
struct Settle {
    until: i64,
    elections: u64,
}

/// G1: what a new leader must have tombstoned by its first renewal.
#[derive(Clone, Debug)]
struct PassedOver {
    member: usize,
    incarnation: u32,
    elected_at: i64,
    /// The registrations ahead of it in its own view at its election.
    ahead: Vec<(MemberId, i64)>,
    /// A call of the leader failed since (G1 then does not apply to this election).
    troubled: bool,
    /// Members whose registration key was tombstoned by the leader, or registered again,
    /// since the election (whether or not a stall keeps it unreadable).
    cleared: HashSet<MemberId>,
}

/// The trace: the last `TRACE_LINES` lines, rendered when they were noted. Shared by the
/// roles of a multi-role run (one timeline).
type Trace = Rc<RefCell<VecDeque<String>>>;

fn new_trace() -> Trace {
    Rc::new(RefCell::new(VecDeque::with_capacity(TRACE_LINES + 1)))
}

fn push_trace(trace: &Trace, print: bool, line: String) {
    if print {
        println!("{line}");
    }
    let mut t = trace.borrow_mut();
    if t.len() == TRACE_LINES {
        t.pop_front();
    }
    t.push_back(line);
}

struct Sim {
    seed: u64,
    rng: Rng,
    /// Record I/O in the trace, not only faults and changes of leadership.
    detail: bool,
    /// Print every trace line as it happens.
    print: bool,
    clock: ManualClock,
    broker: MemoryBroker,
    observer: MemoryTransport,
    role: Role,
    partition: i32,
    timing: Timing,
    now: i64,
    end: i64,
    members: Vec<Member>,
    agenda: Vec<Scheduled>,
    seq: u64,
    trace: Trace,
    /// Multi-role runs: the role's name, shown in trace lines and failures.
    label: Option<String>,
    /// Multi-role runs: the role is one of several hosted by the same processes. Process-level
    /// faults (crash, restart, pause, resume) and broker-wide ones come from the [`World`];
    /// the role schedules only its own rejoins, ghosts and window ends.
    hosted: bool,
    /// Hosted: members whose rejoin came due while their process was paused (they start when
    /// it resumes).
    deferred: Vec<usize>,
    unavailable_until: i64,
    slow_until: i64,
    /// When the last unavailable or slow window ended (L3).
    last_window_end: i64,
    last_disturbance: i64,
    last_current: Option<FencingToken>,
    superseded: HashSet<FencingToken>,
    granted: HashSet<FencingToken>,
    /// Pairs of members whose resign completed (R1).
    resigned: HashSet<FencingToken>,
    /// The order in which the broker granted each pair (T1).
    grant_order: std::collections::HashMap<FencingToken, u64>,
    /// Elected terms by the grant order of their pair (T1).
    terms: std::collections::BTreeMap<u64, i64>,
    producer_ids: BTreeSet<i64>,
    audit_seen: usize,
    audit_dirty: bool,
    watch: Option<Watch>,
    /// L1: the latest disturbance that may hold a standby back from its turn for up to a
    /// lease duration (a failed call, a contest window that grew, a registration during a
    /// stall).
    delay_mark: i64,
    /// L1: the slowest call on the wire since the watch was armed, other than acquires.
    window_io: i64,
    /// L1: the slowest acquire on the wire since the watch was armed.
    window_acquire: i64,
    /// When the last open transaction of another role on the partition times out.
    stall_until: i64,
    /// Runs with a slow coordinator: a third of the acquires take longer than the stagger.
    slow_coordinator: bool,
    /// The other role that shares the partition, and its holder's transport.
    other_role: Role,
    other_holder: MemoryTransport,
    /// Member names that will never come back (their registrations are ghosts).
    ghost_ids: HashSet<MemberId>,
    /// L1: the latest deadline committed with each pair (readable or still behind a stall).
    deadlines: std::collections::HashMap<FencingToken, i64>,
    settle: Option<Settle>,
    passed_over: Option<PassedOver>,
    /// Whether the members evict the members they pass over ([`evicts`]); without it they
    /// skip them, and no member writes another member's records (G3).
    evict: bool,
    /// Measurement mode (`SIM_LENIENT` set): L1 and L4 violations are counted, not failures,
    /// so that a machine that does not meet them can be measured.
    lenient: bool,
    stats: Stats,
}

type Res<T = ()> = Result<T, Failure>;

/// What [`Sim::with`] builds a role's state from.
struct SimParts {
    seed: u64,
    rng: Rng,
    detail: bool,
    print: bool,
    clock: ManualClock,
    broker: MemoryBroker,
    role: Role,
    partition: i32,
    run_ms: i64,
    members: Vec<Member>,
    slow_coordinator: bool,
    trace: Trace,
    /// The role's name in trace lines: `Some` for a role hosted with others (multi-role).
    label: Option<String>,
}

impl Sim {
    fn new(seed: u64, run_ms: i64, detail: bool, print: bool) -> Sim {
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
    fn with(p: SimParts) -> Sim {
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

    fn note(&mut self, who: Option<usize>, what: impl Into<String>) {
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

    fn schedule(&mut self, at: i64, action: Action) {
        self.seq += 1;
        self.agenda.push(Scheduled {
            at,
            seq: self.seq,
            action,
        });
    }

    fn fail(&self, invariant: &'static str, message: impl Into<String>) -> Failure {
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
    fn summary(&self) -> String {
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

    fn describe_member(&self, i: usize, m: &Member) -> String {
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
    fn real_leader(&self) -> Option<usize> {
        let current = self.broker.epoch_of(&self.role)?;
        self.members.iter().position(|m| {
            m.live()
                .is_some_and(|l| l.cand.is_leader() && l.cand.token() == Some(current))
        })
    }

    fn committed_state(&self) -> Res<RoleState> {
        let records = self
            .broker
            .committed_records(self.partition)
            .map_err(|e| self.fail("harness", format!("committed_records: {e}")))?;
        Ok(RoleState::build(self.role.clone(), &records))
    }

    // ----- the loop -----

    fn run(&mut self) -> Res {
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
    fn before_step(&mut self, t: i64) -> Res {
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
    fn step(&mut self, next: Next) -> Res {
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

    fn next_event(&self) -> Option<(i64, Next)> {
        self.next_event_keyed().map(|(t, _, n)| (t, n))
    }

    /// The next event with its tie-break order (events at the same instant run by order).
    fn next_event_keyed(&self) -> Option<(i64, u64, Next)> {
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

    // ----- members -----

    fn latency(&mut self, op: &Op) -> (i64, i64) {
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
    fn drive(&mut self, i: usize, first: Option<(Event, Option<FencingToken>)>) -> Res {
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
                let grew = contest.is_some() && contest > live.contest_seen;
                live.contest_seen = contest;
                live.rank_high = live.rank_high.max(live.cand.rank());
                if grew {
                    // A lost race or a challenge seen under way: this member counts its turn
                    // from a lease duration later.
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

    fn command_op(&mut self, i: usize, cmd: Command) -> Res<Op> {
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

    fn on_effect(&mut self, i: usize) -> Res {
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
    fn execute(&mut self, who: Option<usize>, transport: &MemoryTransport, op: &Op) -> Res<Event> {
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

    fn on_elected(&mut self, i: usize, token: FencingToken, term: i64) -> Res {
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
    fn close_settle(&mut self) {
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
    fn on_lease_committed(&mut self, token: FencingToken, value: Option<&[u8]>) {
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
    fn partition_stalled(&self) -> bool {
        let lso = self.broker.last_stable_offset(self.partition);
        let end = self.broker.log_end_offset(self.partition);
        matches!((lso, end), (Ok(l), Ok(e)) if l < e)
    }

    /// Bookkeeping of an append that took effect: registrations (G2) and tombstones of other
    /// members' registrations (evictions).
    fn on_appended(
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
    fn check_g1(&mut self, i: usize) -> Res {
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
    fn healthy_leader(&self) -> Option<usize> {
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
    fn healthy_pair(&self) -> Option<FencingToken> {
        let i = self.healthy_leader()?;
        self.members[i].live()?.cand.token()
    }

    /// L4: a healthy leader is never challenged. A challenge rests on the member's latest read
    /// and (once it checks before challenging) its latest check. When the same healthy leader
    /// already led at both (a healthy leader's lease runs at least `LEASE_MS - RENEW_MS - 2 x
    /// LEG_MS` past now), the read held its live lease or stalled, and the check named its
    /// pair: no AcquireEpoch may follow. (A challenge whose inputs came before that leader's
    /// election is the race a check cannot see.)
    fn check_l4(&mut self, i: usize) -> Res {
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

    fn on_ended(&mut self, i: usize, reason: EndReason) -> Res {
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

    fn start(&mut self, i: usize) -> Res {
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
    fn start_candidate(&mut self, i: usize, fresh: bool, renamed: bool, redraw_skew: bool) -> Res {
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

    // ----- faults -----

    fn on_agenda(&mut self, action: Action) -> Res {
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
    fn resume(&mut self, member: usize) {
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
    fn disturb(&mut self, fault: bool) -> bool {
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
    fn open_unavailable(&mut self, until: i64) {
        let until = self.unavailable_until.max(until);
        self.unavailable_until = until;
        self.broker.set_partition_unavailable(self.partition, true);
        self.agenda
            .retain(|s| !matches!(s.action, Action::EndUnavailable));
        self.schedule(until, Action::EndUnavailable);
        self.note(None, format!("partition unavailable until {}", At(until)));
    }

    /// Opens (or extends) a slow window of the broker until `until`.
    fn open_slow(&mut self, until: i64) {
        let until = self.slow_until.max(until);
        self.slow_until = until;
        self.agenda.retain(|s| !matches!(s.action, Action::EndSlow));
        self.schedule(until, Action::EndSlow);
        self.note(None, format!("broker slow until {}", At(until)));
    }

    fn up_members(&self, unpaused: bool) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| {
                self.members[i]
                    .live()
                    .is_some_and(|l| !unpaused || !l.paused)
            })
            .collect()
    }

    fn pick_fault(&mut self, calm: bool) -> &'static str {
        pick_fault(&mut self.rng, calm)
    }

    fn fault(&mut self, kind: &'static str) -> Res {
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

    fn crash(&mut self, i: usize) -> Res {
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
    fn crash_begin(&mut self, i: usize) -> Option<Crashed> {
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
    fn crash_end(&mut self, i: usize, c: Crashed, back: Option<i64>) -> Res {
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

    fn pause(&mut self, i: usize) -> Res {
        let until = self.now + self.rng.range(LEASE_MS + 500, 3 * LEASE_MS + 4_000);
        self.pause_until(i, until)
    }

    /// Pauses member `i` until `until`. Single-role runs schedule its resume; a multi-role
    /// run's world resumes the whole process.
    fn pause_until(&mut self, i: usize, until: i64) -> Res {
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

    // ----- invariants -----

    /// Arms the L1 check for the death of the real leader `died`, which held `pair`.
    fn arm_l1(&mut self, died: usize, pair: FencingToken, open_write: bool) -> Res {
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
    ///   challenge seen under way or announced; a registration written while reads stall);
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
    fn l1_bound(&self, w: &Watch) -> Option<Bound> {
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

    fn l1_failure(&self, why: &str) -> Failure {
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
    fn check_l2_rank(&mut self, i: usize) -> Res {
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
    fn check_l2_challenge(&mut self, i: usize) -> Res {
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

    fn check(&mut self) -> Res {
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
    fn check_g2(&mut self) -> Res {
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
    fn check_l3(&self, leader: usize) -> Res {
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
    fn check_audit(&mut self, this_step: bool) -> Res {
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

    fn final_checks(&mut self) -> Res {
        self.check_audit(false)?;
        if self.stats.elections == 0 {
            return Err(self.fail("L1", "no member was ever elected"));
        }
        Ok(())
    }
}

/// Draws a fault kind (the leader's death more often in a calm system).
fn pick_fault(rng: &mut Rng, calm: bool) -> &'static str {
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

/// The rank a member registered at `join` has when it lands at the tail: the registered
/// members other than itself and the lease holder whose registration precedes its own.
fn tail_rank(state: &RoleState, me: &MemberId, join: i64) -> usize {
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

fn short_event(e: &Event) -> String {
    match e {
        Event::Appended { offset } => format!("Appended at {offset}"),
        Event::RecordsRead {
            records,
            end_offset,
            stalled,
        } => format!(
            "RecordsRead {} records to {end_offset}{}",
            records.len(),
            if *stalled { " (stalled)" } else { "" }
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

// ------------------------------------------------------------------------------------------
// Multi-role processes

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
