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
//!   candidate ends (fenced, resigned) rejoins later as a new incarnation; half the resigns
//!   are a balancing member's moves, which register again within 300 ms (a fleet leader's
//!   hand-over; a standby that withdraws to stand behind the member that should have the
//!   role), so the invariants hold with a fleet's members among the candidates.
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
//! # The files
//!
//! [`harness`] holds what every run shares (the generator, the members, the agenda, the loop);
//! [`calls`] drives members and their calls; [`lifecycle`] what happens to them (elections,
//! appends, ends, starts); [`faults`] the seeded faults; [`invariants`] the checks above;
//! [`report`] failures and figures; [`world`] the multi-role runs (see "Multi-role processes"
//! there).

mod calls;
mod faults;
mod harness;
mod invariants;
mod lifecycle;
mod report;
mod world;

pub use harness::with_eviction;
pub use report::{Failure, Stats};
pub use world::run_seed_roles;

use std::fmt;
use std::time::Duration;

use kafka_coordination::core::Timing;

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
