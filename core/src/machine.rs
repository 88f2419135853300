//! [`Candidate`]: the whole life of one member of one role as a sans-IO state machine.
//!
//! Life: register, read the role's partition and evaluate, wait or challenge, mint the epoch,
//! write the first lease, lead and renew every renew interval, end on a fence error only. A
//! member that loses the race for its first lease write (fenced before it ever led) goes back
//! to waiting. Resign: a member that holds a pair first mints one more epoch for the role (so
//! that no pair it held stays authoritative or writable), tombstones the lease through that
//! new pair, then every member tombstones its registration and the candidate ends.
//!
//! Before it challenges, a standby checks with the coordinator that no other challenge is
//! under way and that its read is not held back by another role's open transaction. Members
//! that were passed over are skipped in the ranks, not deleted (see [`Candidate`], "Ghosts").
//!
//! The **term** of a leader is the offset of its first committed lease record in the role's
//! partition. A new leader's first lease is appended after its acquire fenced every older pair,
//! so it lands past every record an earlier term could write: terms strictly grow per role,
//! across hand-overs, producer-id changes and epoch exhaustion, and compaction never renumbers
//! offsets.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::time::Duration;

use crate::leadership_status::{LeadershipStatus, TransactionState};
use crate::partition::role_partition;
use crate::record::{Key, MemberId, Role};
use crate::state::RoleState;
use crate::time::UnixMillis;
use crate::timing::{Timing, TimingError};
use crate::token::FencingToken;

mod answers;
mod leader;
mod messages;
mod standby;

pub use messages::{Cleanup, Command, EndReason, Event, MachineError, Status};

/// The first retry waits this long; each further one twice as long, up to a cap.
pub const BACKOFF_BASE: Duration = Duration::from_millis(100);

/// The longest wait between retries of a member that is not leading.
pub const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// Cleanup writes (lease tombstone, deregistration) are tried this many times, and so is a
/// leader's deregistration of each member that was passed over (see [`Candidate`], "Ghosts").
pub const CLEANUP_ATTEMPTS: u32 = 5;

/// How often a standby that waits on a stalled read, or on a coordinator that is in the middle
/// of a commit or an abort, checks again (at most; an eighth of the renew interval when that
/// is shorter).
pub const RECHECK: Duration = Duration::from_millis(100);

/// How far ahead of this member's clock another member's clock is trusted to run, by default:
/// a lease read is taken to run at most a lease duration plus this much from when this member
/// first read it (see "Another member's clock" on [`Candidate`]).
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(10);

/// The wait before retry number `attempt` (1-based): `BACKOFF_BASE * 2^(attempt-1)`, at most
/// `cap`, at least 1 ms. A pure function of its inputs.
pub fn backoff(attempt: u32, cap: Duration) -> Duration {
    let shift = attempt.saturating_sub(1).min(20);
    let d = BACKOFF_BASE.saturating_mul(1u32 << shift);
    d.min(cap).max(Duration::from_millis(1))
}

/// The I/O a candidate can have outstanding (or scheduled on its timer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Io {
    Register,
    Read {
        wait_until: Option<UnixMillis>,
    },
    /// The pre-challenge check: DescribeTransactions for the role.
    Describe,
    /// The same call made while waiting for a holder that is late to renew: only whether the
    /// coordinator answers (see "When the cluster cannot serve the role").
    Probe,
    /// A challenger tombstones the registration of the holder whose lease ran out, right
    /// before its acquire: the sign, readable by the other standbys, that a challenge is on its
    /// way to the coordinator.
    Announce,
    Acquire,
    /// A resigning holder of `FencingToken` mints one more epoch to supersede it.
    Supersede(FencingToken),
    Claim(FencingToken),
    Renew(FencingToken),
    ClearLease(FencingToken),
    Deregister,
    /// A leader tombstones the registration of the first member of `Candidate::evictions`.
    Evict,
}

impl Io {
    fn expects(self) -> &'static str {
        match self {
            Io::Register | Io::Deregister | Io::Evict | Io::Announce => {
                "an Append is outstanding (Appended or Failed)"
            }
            Io::Read { .. } => "a ReadPartition is outstanding (RecordsRead or Failed)",
            Io::Describe | Io::Probe => "a DescribeRole is outstanding (Described or Failed)",
            Io::Acquire | Io::Supersede(_) => {
                "an AcquireEpoch is outstanding (EpochGranted or Failed)"
            }
            Io::Claim(_) | Io::Renew(_) | Io::ClearLease(_) => {
                "a WriteLease is outstanding (LeaseWritten, Fenced or Failed)"
            }
        }
    }
}

/// The renewal phase of `role` for a process that leads many roles (see
/// [`Candidate::set_renewal_phase`]): a fraction of `interval` taken from a hash of the role's
/// name, the same in every process, always below `interval` (zero for a zero interval).
///
/// The hash is 64-bit FNV-1a followed by murmur3's 64-bit finalizer. FNV-1a alone leaves the
/// high bits of names that differ in one character (`shard-1`, `shard-2`) close together, and
/// the phase is read from the high bits. It is deliberately not murmur2, which picks the
/// role's partition: roles that share a partition still get phases of their own.
///
/// ```
/// use core::time::Duration;
/// use kafka_coordination_core::machine::renewal_phase;
/// use kafka_coordination_core::Role;
///
/// let interval = Duration::from_secs(3);
/// let a = renewal_phase(&Role::new("shard-1").unwrap(), interval);
/// let b = renewal_phase(&Role::new("shard-2").unwrap(), interval);
/// assert!(a < interval && b < interval && a != b);
/// ```
pub fn renewal_phase(role: &Role, interval: Duration) -> Duration {
    let mut hash = role
        .as_str()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^= hash >> 33;
    let nanos = (u128::from(hash) * interval.as_nanos()) >> 64;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// What a pre-challenge check found at the coordinator, relative to the lease last read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// No member ever took the role: no pair was minted, so no lease can exist.
    Untaken,
    /// A pair other than the lease's is in use: another member minted it after the lease this
    /// standby read and has not finished with it (its challenge, its first lease write or its
    /// resign is under way). `minted_only`: no transaction yet (`Empty`).
    Challenger {
        pair: FencingToken,
        minted_only: bool,
    },
    /// The coordinator is writing a commit, an abort or a fence: the outcome is moments away.
    Settling,
    /// The holder of the lease read has a transaction open (a renewal in flight, or a write
    /// its holder died in the middle of).
    HolderWriting,
    /// No transaction is open: whatever the last one wrote is readable (unless a read stalls).
    Quiet,
}

impl Seen {
    fn of(status: &LeadershipStatus, lease_pair: Option<FencingToken>) -> Seen {
        let Some(state) = &status.state else {
            return Seen::Untaken;
        };
        let holder = lease_pair == Some(status.token);
        match state {
            TransactionState::Empty | TransactionState::Ongoing if !holder => Seen::Challenger {
                pair: status.token,
                minted_only: *state == TransactionState::Empty,
            },
            TransactionState::Ongoing => Seen::HolderWriting,
            TransactionState::PrepareCommit
            | TransactionState::PrepareAbort
            | TransactionState::PrepareEpochFence => Seen::Settling,
            // Empty under the holder's own pair does not happen (a pair is Empty only before
            // its first transaction, and the holder committed its lease); Complete*, Dead and
            // states this library does not know: nothing in flight.
            _ => Seen::Quiet,
        }
    }
}

#[derive(Clone, Copy, Debug, Hash)]
struct Term {
    token: FencingToken,
    granted_at: UnixMillis,
    elected: bool,
    /// The offset of the first lease record, once written.
    number: i64,
}

/// One member of one role, from registration to leadership and back, with no I/O, no clock
/// and no async inside.
///
/// This is the core's machine. An application of the `kafka-coordination` crate never holds one: it holds
/// a `Candidacy` (and, once elected, a `Leadership`), handles whose driver (the blocking loop,
/// an async task or a host) runs a `Candidate` for it.
///
/// # Calls for drivers only
///
/// [`set_renewal_phase`](Self::set_renewal_phase), [`spread_renewals`](Self::spread_renewals)
/// and [`lease_write_delayed`](Self::lease_write_delayed) tune how a driver that runs many
/// candidates at once (a host) schedules and accounts their lease writes. A driver calls them
/// (the last one only for a write it held in a queue); a test of the machine may; an
/// application never needs them. Everything else is the machine's ordinary drive loop and its
/// getters.
///
/// # The drive loop
///
/// Feed it events, execute the commands it emits, and wake it at its timeout:
///
/// ```
/// use kafka_coordination_core::machine::{Candidate, Command, Event};
/// use kafka_coordination_core::{FencingToken, LeadershipStatus, MemberId, Record, Role, Timing, UnixMillis};
///
/// let role = Role::new("scheduler").unwrap();
/// let me = MemberId::new("node-a").unwrap();
/// let mut now = UnixMillis(1_000);
/// let mut c = Candidate::new(role, me, Timing::default(), now).unwrap();
/// let mut log: Vec<Record> = Vec::new(); // this example's one-partition "broker"
/// while !c.is_leader() {
///     // 1. Drain every command; answer I/O with the matching event.
///     while let Some(cmd) = c.poll_command() {
///         let answer = match cmd {
///             Command::Append { key, value, .. } | Command::WriteLease { key, value, .. } => {
///                 let offset = log.len() as i64;
///                 log.push(Record { offset, key, value });
///                 if offset == 0 { Event::Appended { offset } } else { Event::LeaseWritten { offset } }
///             }
///             Command::ReadPartition { from_offset, .. } => Event::RecordsRead {
///                 records: log[from_offset as usize..].to_vec(),
///                 end_offset: log.len() as i64,
///                 stalled: false, // no transaction holds this log back
///                 high_watermark: Some(log.len() as i64),
///             },
///             // Nobody ever took the role (a real coordinator answers DescribeTransactions).
///             Command::DescribeRole { .. } => Event::Described { status: LeadershipStatus::NOT_FOUND },
///             Command::AcquireEpoch { .. } => Event::EpochGranted { token: FencingToken::new(1, 0) },
///             Command::Elected { token, term } => { println!("leading with {token}, term {term}"); continue }
///             Command::Deposed { .. } | Command::Ended { .. } => continue,
///         };
///         c.handle(now, answer).unwrap();
///     }
///     // 2. Sleep until the timeout (or until I/O completes), then tick.
///     if let Some(wake) = c.poll_timeout() { now = now.max(wake); }
///     c.handle(now, Event::Tick).unwrap();
/// }
/// assert_eq!(c.token(), Some(FencingToken::new(1, 0)));
/// ```
///
/// Rules: at most one I/O command is outstanding; after every `handle`, drain `poll_command`
/// until `None`, then read `poll_timeout`. `poll_timeout` is exactly the instant at which a
/// `Tick` acts; earlier ticks and extra ticks do nothing. Time that goes backwards is clamped.
/// An event that does not fit is an `Err`, never a panic, and changes nothing.
///
/// A leader ends only on a fence; it never fences itself on time. Transient failures are
/// retried with [`backoff`], capped below the renew interval for a leader.
///
/// # Before a challenge
///
/// Until its reads reach its own registration, a member counts its turn from a lease duration
/// after it registered (a lease it has not read yet may exist). Meanwhile it long-polls the
/// partition, and reads again every [`RECHECK`] when the reader answers long polls at once, so
/// that a read stalled short of its registration costs it milliseconds, not that lease. With
/// no lease read either (the role's first claim open), it does not challenge until its reads
/// get through (members ahead of it may be unread); when the read that first reaches its
/// registration comes after reads held short of it, and its turn went by in between, it counts
/// as released (see "Stalled reads").
///
/// A resign is the exception: when a read that is not stalled brings a lease tombstone that
/// cleared a lease before its deadline, the holder left (its exit pair fenced every pair it
/// held), and no other member's turn came, since theirs are staggers after they read the same
/// tombstone. The first rank then challenges at once, without the check below: what the check
/// would find is the exit pair with nothing open. That is what makes a hand-over take the
/// calls of the resign and of the claim, and no more.
///
/// Otherwise, when a standby's turn comes (a read issued at or after its turn shows the lease
/// run out; a read issued earlier, such as a long poll that answered at the turn, is followed
/// by a fresh one, since the holder may have renewed meanwhile under the same pair), it does
/// not challenge at once. It asks the coordinator ([`Command::DescribeRole`]) for the role's pair
/// and transaction state, and compares the pair with the pair `K` of the last lease it read
/// (producer ids have no order, so "newer" means "another pair than the lease's"):
///
/// * **another pair, no transaction yet (`Empty`) or one open (`Ongoing`)**: another member
///   minted an epoch after that lease and is still at work with it: its challenge, its first
///   lease write, or a resign on its way out. The standby *defers*: it treats the role as
///   leased until a lease duration from now (the lease that challenger is about to write would
///   run that long; [`contested_until`](Self::contested_until)) and counts its turn (plus its
///   rank's staggers) from then, or from a lease after the claim's transaction began when the
///   coordinator dates it. It tails the partition meanwhile, and reading any lease record or
///   lease tombstone (a resign's, say) ends the wait. If
///   none comes and the next check finds **the same pair**, its challenger is taken to be gone
///   and the standby challenges, unless that pair's transaction is still open and the
///   standby's reads have not reached its own registration: that transaction holds them, and
///   every member that registered behind it alike, so none of them knows its rank. The
///   standby then reads again every [`RECHECK`] until the coordinator aborts the transaction
///   at its timeout (a lease after it began), which releases all their reads at once, and
///   their ranks stagger from then (see "Stalled reads"). A pair minted, unused, right after the
///   standby's own acquire failed (within one stagger) is taken to be its own, whose answer
///   was lost: it challenges again rather than wait for itself.
/// * **no pair at all** (nobody ever took the role), or **`K` itself** with nothing open or
///   with the holder's own transaction open past its deadline, and the read was not stalled:
///   challenge (the acquire aborts an open transaction).
/// * **a commit, abort or fence being written** (`Prepare*`): asked again after [`RECHECK`].
/// * **otherwise** (another pair with nothing open: a resign's exit pair, a coordinator's
///   timeout abort, a new leader whose lease the read missed; or a stalled read), a fresh read
///   follows the answer, so anything the coordinator finished before it is readable; if that
///   read still says it is the standby's turn:
///   * **nothing open**: challenge, unless the read is stalled short of what the stall hid at
///     the turn (below);
///   * **the holder's own transaction open** (`Ongoing` under `K`) while reads stall: a renewal
///     may be in flight while another role stalls the partition, so only a transaction open
///     for half a renew interval is taken for a dead holder's. How long it has been open comes
///     from the start time the coordinator reports
///     ([`LeadershipStatus::transaction_started`]), or, when the transport reports none, from
///     the checks: seen open at every one of them.
///
/// **Bound.** With every call answered within `X`, every clock within `S` of true time and
/// `4 X < stagger - 2 S`, no check misses a challenge that is under way (a rank's acquire
/// reaches the coordinator within four calls of its turn, the next rank's check comes a
/// stagger later), and a standby of rank `r` is elected by `D + r x stagger + S + 4 X` after
/// the holder of the lease with deadline `D` died (read, check, acquire, first lease write;
/// one more read when the coordinator's pair moved without an election). A challenger that dies after its acquire
/// costs those who deferred to it one lease duration (plus their staggers) and one more check.
/// When a call can take longer, a check can miss a challenge still on its way to the
/// coordinator, and two challenges follow each other; the later one wins and the bound takes
/// the largest rank and one more call.
///
/// # Stalled reads
///
/// A read reports `stalled` when an open transaction holds the partition's last stable offset
/// below its high watermark. If no transaction of this role is open, the stall is another
/// role's (a holder that died in the middle of a write to the same partition), and the records
/// it hides may include this role's renewals: the standby does not take the lease it read for
/// expired while its reads stall short of what the stall hid when it checked: the high
/// watermark (`high_watermark` of [`Event::RecordsRead`]) of its first stalled read after a
/// check that found the same pair with nothing open. A holder alive at its deadline committed
/// its renewal before the turn, and a leader elected since wrote its first lease before the
/// check, both below that offset; reads that reach it with the lease unchanged show that
/// neither happened, even while newer transactions keep the partition stalled (a partition
/// that thousands of roles renew on is seldom without one). Until the reads get there (or
/// past the stall, when the transport gives no high watermark) it checks again every
/// [`RECHECK`], which the stalled transaction's timeout bounds (Kafka aborts it after its
/// `transaction.timeout.ms`, plus up to its abort cleanup interval), and which usually ends
/// sooner: a standby of the role whose transaction it is aborts it once it is that role's turn
/// and the transaction has been open for half a renew interval. A process killed in the middle
/// of a renewal stalls that partition this way, and its roles' turns all fall within one renew
/// interval after the kill. The role whose renewal was cut has the earliest deadline, and with
/// a lease at least one and a half renew intervals long its transaction has been open half an
/// interval by then, so its standby ends the stall at the start of that window. Every rank
/// waiting on the same stall is released by its end at about the same moment; a released rank
/// `r` waits `r` more staggers (and checks again) before it challenges, so the ranks do not
/// collide. The same holds for a read that ends a stall and moves its member up past its turn:
/// a member ahead of it registered again (or left) behind the stall, every member held by the
/// stall counted it ahead, and one of them may be challenging right then on its old rank, which
/// can be this member's new one.
///
/// # When the cluster cannot serve the role
///
/// A broker that dies takes its partitions and the transactions it coordinates with it until
/// the cluster elects new leaders for them (seconds: the controller first has to notice the
/// death). Meanwhile the holder's renewals fail, and so do the standby's reads or checks: nobody
/// can do anything useful, so that time does not count against the holder.
///
/// A standby counts how long the cluster could not serve it: from the start of the first of its
/// calls for the role (registration, reads, checks) that failed to the answer of the first that
/// succeeded, and the whole of a check that succeeded but took longer than a challenge stagger (a
/// transport that retried until a new coordinator answered). A lease granted after the calls
/// began to fail ends the matter: its holder could write, and was not held up. Otherwise the
/// standby takes that lease to run until its deadline plus the blind time, and in any case until
/// as long again after the cluster answered (at most a renew interval); its rank's staggers come
/// on top, as always. A holder that kept retrying (a leader retries every quarter renew interval
/// at most) renews within that window, and the read of its renewal ends the wait; a holder that
/// died during the outage is taken over that much later: by the outage plus at most a renew
/// interval. Reads and checks are retried at least every renew interval, so the standby sees the
/// outage end within one.
///
/// A coordinator that dies stops the holder's renewals while the partition reads on, so reads
/// alone do not show that outage. While the holder is late to renew (nothing from it for a
/// renew interval and a half since its lease was written), the standby therefore also asks the
/// coordinator every half renew interval whether it answers (the check of its turn, a
/// DescribeTransactions, whose answer it otherwise ignores), until the lease's deadline. A probe
/// that fails, or that the transport answered only after more than a challenge stagger, counts
/// like any other call. A holder that died with its coordinator up costs nothing more: its
/// standbys are answered, and challenge at their turns as before.
/// [`set_probe_late_holder`](Self::set_probe_late_holder) turns the probes off.
///
/// The rule is the standby's alone: the epoch still fences, so safety does not move; a member
/// of another implementation that does not follow it can only challenge sooner. It cannot save
/// a holder that Kafka itself holds up while the standbys read on: a transaction of the holder
/// open when its coordinator died is aborted with an epoch bump (a fence) if the new
/// coordinator loads it after its timeout (the lease duration), and a guarded write whose
/// partition lost its leader holds every later transaction of the role, renewals included,
/// until that partition has a leader again.
///
/// # Another member's clock
///
/// A lease's deadline is an instant on its holder's clock. A holder whose clock runs ahead of
/// this member's writes deadlines that look further away than a lease duration, and so does
/// any principal that may write the topic and names a deadline of its choosing. A standby
/// trusts a deadline only up to a lease duration plus the skew allowance
/// ([`set_max_clock_skew`](Self::set_max_clock_skew), default [`DEFAULT_MAX_CLOCK_SKEW`])
/// after it first read that lease's record: a dead holder whose clock ran an hour ahead
/// leaves the role vacant for at most that long after its last lease was read, not for an
/// hour. A healthy holder is never taken over by this bound: it writes a new lease every renew
/// interval, and the bound of each counts from its own read. Outages of the cluster
/// (above) still move the turn later, from the bounded deadline.
///
/// # Ghosts
///
/// A member registered ahead of a member that has held the lease had its turn first and did
/// not take the role: it is passed over ([`RoleState::passed_over`]), and ranks skip it. A
/// member that died for good (a pod that comes back under a new name) so costs at most one
/// failover one stagger, once, and its registration stays where it is: this member never
/// writes another member's records. A live member that finds itself passed over (it was slow,
/// or paused across its turn) registers again, at the tail, and so does a member that reads
/// its own registration deleted (by an operator, or by a member that evicts). A member of
/// another implementation that follows the spec alone keeps its place on the roster and
/// counts the passed-over members in its own rank: it only waits longer.
///
/// [`set_evict_passed_over`](Self::set_evict_passed_over) brings back eviction: a new leader
/// tombstones the registrations it passed over, and a challenger tombstones the expired
/// holder's as the sign that a challenge is on its way. Use it only where every member of the
/// role re-registers when its registration disappears, as this library's members do.
#[derive(Clone, Debug, Hash)]
pub struct Candidate {
    role: Role,
    member: MemberId,
    timing: Timing,
    partition: i32,
    registration_key: Vec<u8>,
    lease_key: Vec<u8>,
    state: RoleState,
    now: UnixMillis,
    io: Option<Io>,
    issued_at: UnixMillis,
    timer: Option<(UnixMillis, Io)>,
    commands: VecDeque<Command>,
    join_offset: Option<i64>,
    registered_at: UnixMillis,
    unleased_since: Option<UnixMillis>,
    contested_until: Option<UnixMillis>,
    term: Option<Term>,
    rank: Option<usize>,
    failures: u32,
    failing_since: Option<UnixMillis>,
    give_up_after: Option<Duration>,
    resigning: bool,
    pending_end: Option<EndReason>,
    ended: Option<EndReason>,
    deregistered: bool,
    /// Whether the pair this member held (if any) is known to be superseded.
    superseded: bool,
    /// Whether a lease this member wrote is still uncleared.
    lease_written: bool,
    /// A fence seen outside the machine while I/O was outstanding, acted on once it completes.
    superseded_pending: Option<FencingToken>,
    /// When this member's last lease write (claim or renewal) was issued, and the deadline it
    /// wrote.
    last_lease: Option<(UnixMillis, UnixMillis)>,
    /// The coordinator's answer to a pre-challenge check, kept for the read that follows it.
    check: Option<LeadershipStatus>,
    /// The pair of another member's challenge that this standby deferred to.
    deferred_to: Option<FencingToken>,
    /// Since when the lease holder's transaction has been seen open while reads stall.
    holding_since: Option<UnixMillis>,
    /// When this member's last acquire failed (its outcome unknown: it may have minted a pair).
    acquire_failed_at: Option<UnixMillis>,
    /// Whether the last read was stalled by an open transaction.
    stalled: bool,
    /// The partition's high watermark at the last read, when the transport tells it.
    high_watermark: Option<i64>,
    /// Where the reads must get to before a lease read as expired is taken for expired while
    /// reads stall and the check finds this pair with nothing open: the high watermark of the
    /// first stalled read after such a check. Cleared when the lease moves.
    stall_horizon: Option<(FencingToken, i64)>,
    /// When the last read was issued: what it found was true at some instant after that.
    read_issued_at: UnixMillis,
    /// Whether this member waited at its turn (a stall, a coordinator mid-abort).
    waited: bool,
    /// Whether a read since this member registered stopped short of its registration (an
    /// open transaction held the partition back).
    held_back: bool,
    /// The offset of this member's own announcement (not a sign of another challenge).
    announced_at: Option<i64>,
    /// When such a wait ended: the ranks count their staggers again from then.
    released_at: Option<UnixMillis>,
    /// Since when this standby's calls (registration, reads, checks) have failed, while a run
    /// of failures lasts: the cluster could not serve the role (see "When the cluster cannot
    /// serve the role").
    blind_since: Option<UnixMillis>,
    /// How long the cluster could not serve the role, as this standby saw it, since the lease
    /// it read last moved.
    blind: Duration,
    /// The lease read is taken to run at least until this instant: its deadline plus the time
    /// the cluster could not serve the role, and as long again after it served again (at most
    /// a renew interval). Cleared when the lease moves.
    outage_until: Option<UnixMillis>,
    /// When this standby last asked the coordinator whether it answers, while the holder was
    /// late to renew.
    probed_at: Option<UnixMillis>,
    /// See [`set_probe_late_holder`](Self::set_probe_late_holder).
    probe_late_holder: bool,
    /// The lease record read last (its offset) and when this member first read it.
    lease_read: Option<(i64, UnixMillis)>,
    /// See [`set_max_clock_skew`](Self::set_max_clock_skew).
    max_clock_skew: Duration,
    /// A new leader's list of members registered ahead of it at its election (with failed
    /// attempts so far), whose registrations it tombstones.
    evictions: VecDeque<(MemberId, u32)>,
    /// Whether this member deletes the registrations of members it passed over (and announces
    /// its challenges by deleting the expired holder's); see "Ghosts".
    evict: bool,
    /// When the leader's next renewal is due (while it evicts).
    renew_at: UnixMillis,
    /// The term's renewal schedule: renewals are due at this instant plus whole renew
    /// intervals (a renew interval after the claim was issued, less the phase).
    renew_grid: UnixMillis,
    /// Whether the term's schedule has a phase (its points are not a renew interval after
    /// the claim's start): only then does a missed point bring the next renewal at once.
    renew_phased: bool,
    /// How much earlier than a renew interval after its claim a term's first renewal comes.
    renewal_phase: Duration,
    /// How much later than issued the outstanding lease write began, as its driver reported
    /// ([`lease_write_delayed`](Candidate::lease_write_delayed)); the record's deadline moved
    /// as much.
    lease_delay: Duration,
}

impl Candidate {
    /// A candidate for `role` that starts by registering `member`: its first command is the
    /// registration append.
    pub fn new(
        role: Role,
        member: MemberId,
        timing: Timing,
        now: UnixMillis,
    ) -> Result<Candidate, TimingError> {
        let timing = timing.validate()?;
        let partition =
            role_partition(&role, timing.partitions).map_err(|e| TimingError::Partitions {
                partitions: e.partitions,
            })?;
        let registration_key = Key::registration(role.clone(), member.clone()).encode();
        let lease_key = Key::lease(role.clone()).encode();
        let mut c = Candidate {
            state: RoleState::new(role.clone()),
            role,
            member,
            timing,
            partition,
            registration_key,
            lease_key,
            now,
            io: None,
            issued_at: now,
            timer: None,
            commands: VecDeque::new(),
            join_offset: None,
            registered_at: now,
            unleased_since: None,
            contested_until: None,
            term: None,
            rank: None,
            failures: 0,
            failing_since: None,
            give_up_after: None,
            resigning: false,
            pending_end: None,
            ended: None,
            deregistered: false,
            superseded: true,
            lease_written: false,
            superseded_pending: None,
            last_lease: None,
            check: None,
            deferred_to: None,
            holding_since: None,
            acquire_failed_at: None,
            stalled: false,
            high_watermark: None,
            stall_horizon: None,
            read_issued_at: now,
            waited: false,
            held_back: false,
            released_at: None,
            blind_since: None,
            blind: Duration::ZERO,
            outage_until: None,
            probed_at: None,
            probe_late_holder: true,
            lease_read: None,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
            announced_at: None,
            evictions: VecDeque::new(),
            evict: false,
            renew_at: now,
            renew_grid: now,
            renew_phased: false,
            renewal_phase: Duration::ZERO,
            lease_delay: Duration::ZERO,
        };
        c.issue(Io::Register);
        Ok(c)
    }

    /// Ends a member that is not leading with [`EndReason::Unavailable`] once its transport has
    /// failed without a single success for `after`. `None` (the default) retries forever.
    /// A leader is never ended by failures: it keeps renewing until the broker fences it.
    pub fn set_give_up_after(&mut self, after: Option<Duration>) {
        self.give_up_after = after;
    }

    /// Whether this member evicts the members it passes over (default `false`): as a new
    /// leader it tombstones the registration of every member registered ahead of it, right
    /// after its first lease; as a challenger it tombstones the expired holder's registration
    /// right before its acquire, a sign other standbys read as a challenge on its way.
    ///
    /// Every member of the role must register again when it finds its registration gone, as
    /// this library's members do; a member of another implementation that follows the spec
    /// alone does not, and is lost from the roster for good. Without eviction, passed-over
    /// members stay registered and ranks skip them ([`RoleState::passed_over`]).
    pub fn set_evict_passed_over(&mut self, evict: bool) {
        self.evict = evict;
    }

    /// Whether this member, as a standby, asks the coordinator every half renew interval
    /// whether it answers while the holder is late to renew (default `true`; see "When the
    /// cluster cannot serve the role"). Off, it asks only at its turn: one call fewer per half
    /// interval of a late holder, and a coordinator that died and came back before the turn
    /// counts against the holder.
    pub fn set_probe_late_holder(&mut self, probe: bool) {
        self.probe_late_holder = probe;
    }

    /// How far ahead of this member's clock another member's clock is trusted to run (default
    /// [`DEFAULT_MAX_CLOCK_SKEW`]): a standby takes a lease to run at most a lease duration plus
    /// this much from when it first read the lease's record, whatever deadline the record
    /// names (see "Another member's clock"). Only ever makes a challenge earlier, never a
    /// write unsafe: the epoch still fences.
    pub fn set_max_clock_skew(&mut self, skew: Duration) {
        self.max_clock_skew = skew;
    }

    /// Brings the first renewal of each term `phase` earlier than a renew interval after the
    /// claim; the renewals after it follow every renew interval, as always, on the schedule
    /// the first one set (a write that finishes after its point is followed by a renewal at
    /// once, and the ones after it keep to the schedule). A `phase` of a renew interval or
    /// more counts modulo the interval; zero (the default) changes nothing.
    ///
    /// For a process that leads many roles: roles it won together would otherwise renew
    /// together for as long as it leads them, so their leases would run out together if it
    /// died, and their standbys would all challenge at the same moment. Distinct phases
    /// spread those renewals, and the takeovers, over a renew interval. Renewing early is
    /// always safe: it only moves the lease's deadline later than it would have been. A term
    /// that starts with passed-over members to evict keeps the plain schedule, so that the
    /// evictions still come before its first renewal.
    ///
    /// For drivers only (see "Calls for drivers only" on [`Candidate`]).
    pub fn set_renewal_phase(&mut self, phase: Duration) {
        let interval = self.timing.renew_interval.as_nanos().max(1);
        let nanos = phase.as_nanos() % interval;
        self.renewal_phase = Duration::from_nanos(u64::try_from(nanos).unwrap_or(0));
    }

    /// Tells the machine that its outstanding lease write (a claim or a renewal) began
    /// `waited` after the machine issued it, and that the driver moved the deadline in its
    /// record as much later ([`Lease::delayed`](crate::record::Lease::delayed)). Call it
    /// before handing over the write's outcome; without a lease write outstanding it does
    /// nothing.
    ///
    /// A driver that queues calls (a host whose I/O threads are all busy) does this, so that
    /// the wait in its queue is not taken out of the lease: the record promises a lease
    /// duration from when the write began, as a write made at once would. The machine's own
    /// account of the lease ([`last_lease`](Self::last_lease)) then names the deadline the
    /// record carries. The renewal schedule does not move.
    ///
    /// For drivers only (see "Calls for drivers only" on [`Candidate`]).
    pub fn lease_write_delayed(&mut self, waited: Duration) {
        if matches!(self.io, Some(Io::Claim(_) | Io::Renew(_))) {
            self.lease_delay = waited;
        }
    }

    /// The deadline the outstanding lease write's record carries.
    fn written_deadline(&self) -> UnixMillis {
        self.issued_at + self.timing.lease_duration + self.lease_delay
    }

    /// [`set_renewal_phase`](Self::set_renewal_phase) with the phase [`renewal_phase`] gives
    /// this candidate's role: what a process that hosts many roles sets on each of them. Every
    /// process computes the same phase for a role.
    ///
    /// For drivers only (see "Calls for drivers only" on [`Candidate`]).
    pub fn spread_renewals(&mut self) {
        self.set_renewal_phase(renewal_phase(&self.role, self.timing.renew_interval));
    }

    // ----- getters -----

    /// The role.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// This member.
    pub fn member(&self) -> &MemberId {
        &self.member
    }

    /// The validated timing.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The role's partition of `__coordination_state`.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Whether this member evicts the members it passes over
    /// ([`set_evict_passed_over`](Self::set_evict_passed_over)).
    pub fn evicts_passed_over(&self) -> bool {
        self.evict
    }

    /// The role's state as last read.
    pub fn state(&self) -> &RoleState {
        &self.state
    }

    /// The pair this member leads with, while it leads.
    pub fn token(&self) -> Option<FencingToken> {
        self.term.filter(|t| t.elected).map(|t| t.token)
    }

    /// The term number of this member's leadership, while it leads: the offset of the term's
    /// first lease record (see the [module docs](self)).
    pub fn term(&self) -> Option<i64> {
        self.term.filter(|t| t.elected).map(|t| t.number)
    }

    /// While leading: when the last successful lease write (the claim or a renewal) was issued
    /// and the deadline it wrote, by this member's clock.
    pub fn last_lease(&self) -> Option<(UnixMillis, UnixMillis)> {
        self.last_lease.filter(|_| self.is_leader())
    }

    /// What the exit managed to do (meaningful once ended; see [`Cleanup`]).
    pub fn cleanup(&self) -> Cleanup {
        Cleanup {
            superseded: self.superseded,
            lease_cleared: !self.lease_written,
            deregistered: self.deregistered || self.join_offset.is_none(),
        }
    }

    /// Whether this member leads (its first lease write committed and no fence since).
    pub fn is_leader(&self) -> bool {
        self.token().is_some() && self.ended.is_none()
    }

    /// This member's rank at its last evaluation.
    pub fn rank(&self) -> Option<usize> {
        self.rank
    }

    /// While a standby treats the role as claimed by another member's challenge (it lost a
    /// race for the first lease, or its pre-challenge check saw another challenge under way):
    /// the instant, by this member's clock, from which it counts its turn instead of the lease
    /// deadline. Cleared when a lease record (or a lease tombstone) is read.
    pub fn contested_until(&self) -> Option<UnixMillis> {
        self.contested_until
    }

    /// While a standby takes the lease it read to run longer than its deadline because the
    /// cluster could not serve the role for a while (see "When the cluster cannot serve the
    /// role"): the instant, by this member's clock, until which it does. Cleared when a lease
    /// record (or a lease tombstone) is read.
    pub fn outage_until(&self) -> Option<UnixMillis> {
        self.outage_until
    }

    /// The offset of this member's registration, once appended.
    pub fn join_offset(&self) -> Option<i64> {
        self.join_offset
    }

    /// Why the candidate ended, once it has.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.ended
    }

    /// Whether the candidate has ended.
    pub fn is_done(&self) -> bool {
        self.ended.is_some()
    }

    /// Whether the candidate's registration tombstone was written before it ended (false when
    /// the transport kept failing during cleanup, or the candidate never registered).
    pub fn deregistered(&self) -> bool {
        self.deregistered
    }

    /// Where the candidate is in its life.
    pub fn status(&self) -> Status {
        if self.ended.is_some() {
            return Status::Ended;
        }
        if self.resigning || self.pending_end.is_some() {
            return Status::Leaving;
        }
        match self.term {
            Some(t) if t.elected => Status::Leading,
            Some(_) => Status::Challenging,
            None if self.join_offset.is_none() => Status::Registering,
            None if matches!(self.io, Some(Io::Acquire | Io::Announce)) => Status::Challenging,
            None => Status::Standby,
        }
    }

    // ----- poll -----

    /// The next command, if any. Drain until `None` after every [`handle`](Self::handle).
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// The instant at which [`Event::Tick`] will act; `None` while I/O is outstanding or after
    /// the candidate ended.
    pub fn poll_timeout(&self) -> Option<UnixMillis> {
        if self.ended.is_some() {
            return None;
        }
        self.timer.map(|(at, _)| at)
    }

    // ----- handle -----

    /// Feeds one event at `now`.
    pub fn handle(&mut self, now: UnixMillis, event: Event) -> Result<(), MachineError> {
        if now > self.now {
            self.now = now;
        }
        let now = self.now;
        if self.ended.is_some() {
            return match event {
                Event::Tick | Event::Resign | Event::Superseded { .. } => Ok(()),
                other => Err(MachineError::Ended {
                    event: other.name(),
                }),
            };
        }
        match event {
            Event::Tick => {
                self.on_tick(now);
                Ok(())
            }
            Event::Resign => {
                self.on_resign();
                Ok(())
            }
            Event::Fatal => self.on_fatal(),
            Event::Superseded { token } => {
                self.superseded_pending = Some(token);
                if self.io.is_none() {
                    self.act_on_superseded();
                }
                Ok(())
            }
            event => {
                let r = self.on_io(now, event);
                if self.io.is_none() && self.ended.is_none() {
                    self.act_on_superseded();
                }
                r
            }
        }
    }

    /// Deposes the leader if a pending outside fence names its pair.
    fn act_on_superseded(&mut self) {
        let Some(token) = self.superseded_pending.take() else {
            return;
        };
        let leads_with_it = self.term.is_some_and(|t| t.elected && t.token == token);
        if !leads_with_it || self.resigning {
            return;
        }
        self.timer = None;
        self.term = None;
        self.superseded = true;
        self.lease_written = false;
        self.commands.push_back(Command::Deposed { token });
        self.pending_end = Some(EndReason::Fenced { token });
        self.deregister_or_finish();
    }

    fn on_tick(&mut self, now: UnixMillis) {
        if let Some((at, io)) = self.timer {
            if now >= at {
                self.timer = None;
                self.issue(io);
            }
        }
    }

    fn on_resign(&mut self) {
        if self.resigning {
            return;
        }
        self.resigning = true;
        if self.io.is_some() {
            // Handled when the outstanding I/O completes.
            return;
        }
        self.timer = None;
        self.start_cleanup();
    }

    /// Begins the exit: a member holding a pair supersedes it and clears the lease through the
    /// new pair; then it deregisters (if it registered) and ends.
    fn start_cleanup(&mut self) {
        self.failures = 0;
        self.evictions.clear();
        match self.term {
            Some(t) => self.issue(Io::Supersede(t.token)),
            None => self.deregister_or_finish(),
        }
    }

    fn deregister_or_finish(&mut self) {
        self.term = None;
        self.evictions.clear();
        if self.join_offset.is_some() {
            self.issue(Io::Deregister);
        } else {
            self.finish(self.pending_end.unwrap_or(EndReason::Resigned));
        }
    }

    /// The outstanding I/O failed for good: skip that step, clean up what is left, end with
    /// [`EndReason::Failed`].
    fn on_fatal(&mut self) -> Result<(), MachineError> {
        let Some(io) = self.io else {
            return Err(MachineError::Unexpected {
                event: "Fatal",
                expected: "no I/O is outstanding",
            });
        };
        self.io = None;
        self.timer = None;
        if self.pending_end.is_none() {
            self.pending_end = Some(EndReason::Failed);
        }
        let first = !self.resigning;
        self.resigning = true;
        self.failures = 0;
        match io {
            Io::Supersede(old) => self.issue(Io::ClearLease(old)),
            Io::ClearLease(_) => self.deregister_or_finish(),
            Io::Deregister => self.finish(self.pending_end.unwrap_or(EndReason::Failed)),
            Io::Register if self.join_offset.is_none() && self.term.is_none() => {
                self.finish(EndReason::Failed)
            }
            _ if first => self.start_cleanup(),
            _ => self.deregister_or_finish(),
        }
        Ok(())
    }
}
