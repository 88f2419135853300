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

use crate::config::{Timing, TimingError};
use crate::describe::{LeadershipStatus, TransactionState};
use crate::evaluate::{evaluate, Standing, Step};
use crate::partition::role_partition;
use crate::record::{Key, Lease, MemberId, Registration, Role};
use crate::state::{Applied, Record, RoleState};
use crate::time::{duration_millis, UnixMillis};
use crate::token::FencingToken;

mod messages;

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
            Io::Describe => "a DescribeRole is outstanding (Described or Failed)",
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
/// When a standby's turn comes (a read issued at or after its turn shows the lease run out; a
/// read issued earlier, such as a long poll that answered at the turn, is followed by a fresh
/// one, since the holder may have renewed meanwhile under the same pair), it does not
/// challenge at once. It asks the coordinator ([`Command::DescribeRole`]) for the role's pair
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
///   and the standby challenges. A pair minted, unused, right after the standby's own acquire
///   failed (within one stagger) is taken to be its own, whose answer was lost: it challenges
///   again rather than wait for itself.
/// * **no pair at all** (nobody ever took the role), or **`K` itself** with nothing open or
///   with the holder's own transaction open past its deadline, and the read was not stalled:
///   challenge (the acquire aborts an open transaction).
/// * **a commit, abort or fence being written** (`Prepare*`): asked again after [`RECHECK`].
/// * **otherwise** (another pair with nothing open: a resign's exit pair, a coordinator's
///   timeout abort, a new leader whose lease the read missed; or a stalled read), a fresh read
///   follows the answer, so anything the coordinator finished before it is readable; if that
///   read still says it is the standby's turn:
///   * **nothing open**: challenge, unless the read is stalled (below);
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
/// expired while its reads stall. It checks again every [`RECHECK`] until the read gets past
/// the stall, which the stalled transaction's timeout bounds (Kafka aborts it after its
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
            read_issued_at: now,
            waited: false,
            held_back: false,
            released_at: None,
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

    fn on_io(&mut self, now: UnixMillis, event: Event) -> Result<(), MachineError> {
        let Some(io) = self.io else {
            return Err(MachineError::Unexpected {
                event: event.name(),
                expected: "no I/O is outstanding",
            });
        };
        let fits = matches!(
            (io, &event),
            (_, Event::Failed)
                | (
                    Io::Register | Io::Deregister | Io::Evict | Io::Announce,
                    Event::Appended { .. }
                )
                | (Io::Read { .. }, Event::RecordsRead { .. })
                | (Io::Describe, Event::Described { .. })
                | (Io::Acquire | Io::Supersede(_), Event::EpochGranted { .. })
                | (
                    Io::Claim(_) | Io::Renew(_) | Io::ClearLease(_),
                    Event::LeaseWritten { .. }
                )
                | (
                    Io::Claim(_) | Io::Renew(_) | Io::ClearLease(_),
                    Event::Fenced
                )
        );
        if !fits {
            return Err(MachineError::Unexpected {
                event: event.name(),
                expected: io.expects(),
            });
        }
        self.io = None;
        if !matches!(event, Event::Failed) {
            self.failures = 0;
            self.failing_since = None;
        }
        match (io, event) {
            (Io::Register, Event::Appended { offset }) => {
                self.join_offset = Some(offset);
                self.registered_at = self.issued_at;
                if self.resigning {
                    self.issue(Io::Deregister);
                } else {
                    self.issue(Io::Read { wait_until: None });
                }
            }
            (Io::Deregister, Event::Appended { .. }) => {
                self.deregistered = true;
                self.finish(self.pending_end.unwrap_or(EndReason::Resigned));
            }
            (Io::Evict, Event::Appended { .. }) => {
                self.evictions.pop_front();
                self.after_evict(true);
            }
            (Io::Announce, Event::Appended { offset }) => {
                self.announced_at = Some(offset);
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.issue(Io::Acquire);
                }
            }
            (
                Io::Read { wait_until },
                Event::RecordsRead {
                    records,
                    end_offset,
                    stalled,
                },
            ) => {
                let long_poll = wait_until.is_some();
                self.on_read(now, &records, end_offset, stalled, long_poll);
            }
            (Io::Describe, Event::Described { status }) => self.on_described(now, status),
            (Io::Acquire, Event::EpochGranted { token }) => {
                self.term = Some(Term {
                    token,
                    granted_at: now,
                    elected: false,
                    number: -1,
                });
                self.superseded = false;
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.issue(Io::Claim(token));
                }
            }
            (Io::Supersede(_), Event::EpochGranted { token }) => {
                // The pair this member held is superseded; clear the lease through the new one,
                // which nobody else will ever be handed.
                self.superseded = true;
                self.issue(Io::ClearLease(token));
            }
            (Io::Claim(token), Event::LeaseWritten { offset }) => {
                self.last_lease = Some((self.issued_at, self.written_deadline()));
                if let Some(t) = self.term.as_mut() {
                    t.elected = true;
                    t.number = offset;
                }
                self.lease_written = true;
                self.contested_until = None;
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.commands.push_back(Command::Elected {
                        token,
                        term: offset,
                    });
                    if self.evict {
                        self.evictions = self.passed_over();
                    }
                    // The evictions come before the first renewal (they run only while it is
                    // not due): a term with members to evict renews on the plain schedule.
                    let phase = if self.evictions.is_empty() {
                        self.renewal_phase
                    } else {
                        Duration::ZERO
                    };
                    self.renew_grid = self.issued_at + (self.timing.renew_interval - phase);
                    self.renew_phased = !phase.is_zero();
                    self.renew_at = self.next_renewal(now);
                    self.lead_on(token);
                }
            }
            (Io::Renew(token), Event::LeaseWritten { .. }) => {
                self.last_lease = Some((self.issued_at, self.written_deadline()));
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.renew_at = self.next_renewal(now);
                    self.lead_on(token);
                }
            }
            (Io::ClearLease(_), Event::LeaseWritten { .. }) => {
                self.lease_written = false;
                self.deregister_or_finish();
            }
            (Io::Claim(_), Event::Fenced) => {
                // Lost the race: another member minted a newer pair after ours. Wait for the
                // winner's first lease instead of challenging again at once.
                self.term = None;
                self.superseded = true;
                if self.resigning {
                    self.deregister_or_finish();
                } else {
                    self.contested_until = Some(now + self.timing.lease_duration);
                    self.issue(Io::Read { wait_until: None });
                }
            }
            (Io::Renew(token), Event::Fenced) => {
                self.term = None;
                self.superseded = true;
                // The lease names a superseded pair: the new leader overwrites it.
                self.lease_written = false;
                self.commands.push_back(Command::Deposed { token });
                self.pending_end = Some(EndReason::Fenced { token });
                self.deregister_or_finish();
            }
            (Io::ClearLease(_), Event::Fenced) => {
                // Someone took over while we resigned: the hand-over happened anyway.
                self.superseded = true;
                self.lease_written = false;
                self.deregister_or_finish();
            }
            (io, Event::Failed) => self.on_failure(now, io),
            // `fits` admitted only the pairs above.
            (io, event) => {
                self.io = Some(io);
                return Err(MachineError::Unexpected {
                    event: event.name(),
                    expected: io.expects(),
                });
            }
        }
        Ok(())
    }

    /// A read's answer; `long_poll` says whether the read could wait for the partition to move.
    fn on_read(
        &mut self,
        now: UnixMillis,
        records: &[Record],
        end_offset: i64,
        stalled: bool,
        long_poll: bool,
    ) {
        let unseen_before = self.registration_unseen();
        let mut lease_moved = false;
        let was_held_back = self.held_back;
        let was_stalled = self.stalled;
        let rank_before = self.rank;
        for r in records {
            match self.state.apply(r) {
                Applied::Leased | Applied::LeaseCleared => {
                    lease_moved = true;
                    // The lease moved on: whatever challenge this member waited for is decided.
                    self.contested_until = None;
                    self.deferred_to = None;
                    self.holding_since = None;
                    self.waited = false;
                    self.released_at = None;
                }
                Applied::Deregistered if self.announces_a_challenge(r) => {
                    // Another member's challenge is on its way to the coordinator: wait for
                    // its first lease as for a challenge seen at the coordinator.
                    let until = now + self.timing.lease_duration;
                    self.contested_until =
                        Some(self.contested_until.map_or(until, |c| c.max(until)));
                    self.holding_since = None;
                    self.waited = false;
                }
                _ => {}
            }
        }
        self.state.advance_to(end_offset);
        self.held_back = self.registration_unseen();
        if unseen_before && !self.registration_unseen() && self.contested_until.is_some() {
            // A wait for another member's challenge begun before our reads reached our own
            // registration was timed by a rank we did not know. Judge that challenge again,
            // with a fresh check, now that the roster is read.
            self.contested_until = None;
            self.deferred_to = None;
        }
        self.stalled = stalled;
        self.read_issued_at = self.issued_at;
        // A check answers only the read that directly follows it, and only while the lease it
        // was compared with stands: once the lease moved (a renewal, a new holder, a resign's
        // tombstone), what the check saw is judged again by a new one.
        let check = self.check.take().filter(|_| !lease_moved);
        if self.resigning {
            self.issue(Io::Deregister);
            return;
        }
        if self.state.lease().is_some() {
            self.unleased_since = None;
        } else if self.unleased_since.is_none() {
            self.unleased_since = Some(now);
        }
        let Some(join_offset) = self.join_offset else {
            self.issue(Io::Register);
            return;
        };
        let standing = self.standing(join_offset, now);
        match evaluate(&self.state, &self.member, &standing, now, &self.timing) {
            Step::NotRegistered | Step::PassedOver => {
                self.rank = None;
                self.issue(Io::Register);
            }
            Step::Challenge { rank } => {
                self.rank = Some(rank);
                if was_held_back && !self.registration_unseen() {
                    // Our reads were held back short of our own registration (an open
                    // transaction stalls every standby's reads alike) and this one is the
                    // first past it. If our turn came after we registered, it went by while
                    // we could not see it, and the other ranks learn theirs at this moment
                    // too. Count as released, so that the ranks stagger again from now.
                    let then = self.registered_at;
                    let held = evaluate(&self.state, &self.member, &standing, then, &self.timing);
                    self.waited |= matches!(held, Step::Wait { .. });
                }
                if was_stalled && !stalled && rank_before.is_some_and(|before| rank < before) {
                    // The read that ends a stall moved this member up, past its turn: a
                    // member ahead of it registered again (or left) behind the stall. Every
                    // member whose reads the stall held counted that member ahead, and one
                    // of them may be challenging right now on the rank it read before the
                    // stall ended, which can be this member's new one. Count as released,
                    // so that the ranks stagger again from now.
                    self.waited = true;
                }
                let stagger = self.timing.challenge_stagger;
                let turn = self.state.lease().map(|e| {
                    e.lease.deadline
                        + stagger.saturating_mul(u32::try_from(rank).unwrap_or(u32::MAX))
                });
                if turn.is_some_and(|turn| turn > self.read_issued_at) {
                    // The lease ran out only after this read was issued (a long poll, or an
                    // answer held up): its holder may have renewed since, under the same pair.
                    // A challenge rests on a read issued at or after the turn.
                    self.issue(Io::Read { wait_until: None });
                    return;
                }
                match check {
                    Some(status) => self.decide(now, &status),
                    None => self.issue(Io::Describe),
                }
            }
            Step::Wait { until, rank } => {
                self.rank = Some(rank);
                if !records.is_empty() || !long_poll {
                    // The partition moved, or this read did not wait for it (a read at a turn,
                    // after a check or a lost race): keep tailing, and let a reader that can
                    // long-poll wait for the next record until the turn, so that the record
                    // that ends the wait (a new lease, a resign's tombstone) is read as it
                    // lands. A reader that answers at once returns nothing and the timer takes
                    // over: no busy loop.
                    self.issue(Io::Read {
                        wait_until: Some(until),
                    });
                } else {
                    self.wait_until(now, until);
                }
            }
        }
    }

    /// Whether this member's reads have not reached its own registration yet.
    fn registration_unseen(&self) -> bool {
        self.join_offset
            .is_some_and(|join| self.state.next_offset() <= join)
    }

    /// Waits for this member's turn at `until` with nothing to long-poll on, then reads. While
    /// its reads have not reached its own registration (a partition whose reads stall behind
    /// another role's open transaction, common when a process claims thousands of roles at
    /// once), that turn is a whole lease after it registered: it reads again every
    /// [`RECHECK`] instead, so that it learns its real turn once the stall ends, not a lease
    /// later.
    fn wait_until(&mut self, now: UnixMillis, until: UnixMillis) {
        let at = if self.registration_unseen() {
            until.min(now + self.recheck_interval())
        } else {
            until
        };
        self.timer = Some((at, Io::Read { wait_until: None }));
    }

    /// Whether `record`, a registration tombstone just applied, announces another member's
    /// challenge: it names the holder of the lease (a holder deregisters itself only after its
    /// lease was cleared or overwritten), and it is not this member's own announcement.
    fn announces_a_challenge(&self, record: &Record) -> bool {
        let Some(holder) = self.state.lease().map(|e| &e.lease.member) else {
            return false;
        };
        let named = crate::record::KeyRef::decode(&record.key)
            .ok()
            .and_then(|k| k.member())
            .is_some_and(|m| m == holder.as_str());
        named && *holder != self.member && self.announced_at != Some(record.offset)
    }

    /// The pair of the lease this member read, if any.
    fn lease_pair(&self) -> Option<FencingToken> {
        self.state.lease().map(|e| e.lease.token)
    }

    /// Whether the read that led to a check settles the matter when the check finds the lease's
    /// own pair: the pair is unchanged, so no other member took the role, and the read (issued
    /// at or after this member's turn, see [`on_read`](Self::on_read)) found the lease already
    /// run out then: the holder had stopped renewing (a healthy holder keeps its deadline a
    /// lease minus a renew interval ahead), and a renewal it wrote later came too late. Not
    /// when the read stalled: the renewals may be behind the stall.
    fn read_settles(&self, status: &LeadershipStatus) -> bool {
        !self.stalled && self.lease_pair() == Some(status.token)
    }

    /// The coordinator answered the pre-challenge check. A challenge under way elsewhere is
    /// waited out at once, and the holder of the lease read (quiet, or writing past its
    /// deadline) is challenged at once when the read was not stalled; otherwise a fresh read
    /// follows (so that anything the coordinator finished is readable in it) and
    /// [`decide`](Self::decide) settles the matter.
    fn on_described(&mut self, now: UnixMillis, status: LeadershipStatus) {
        if self.resigning {
            self.start_cleanup();
            return;
        }
        match Seen::of(&status, self.lease_pair()) {
            Seen::Untaken => self.challenge(now),
            // The holder whose lease ran out still has the coordinator's pair, and the read
            // found the lease already expired when it was issued: that read stands.
            Seen::Quiet | Seen::HolderWriting if self.read_settles(&status) => self.challenge(now),
            Seen::Challenger { pair, minted_only } => {
                // A pair minted and unused right after our own acquire failed is most likely
                // ours (the reply was lost): carry the challenge on rather than wait it out.
                let ours = minted_only
                    && self
                        .acquire_failed_at
                        .is_some_and(|at| now < at + self.timing.challenge_stagger);
                if ours || self.deferred_to == Some(pair) {
                    // Ours, or a challenge that was given a whole lease to write its first
                    // lease and did not: its challenger is gone.
                    self.acquire();
                } else {
                    self.defer(now, pair, &status);
                }
            }
            Seen::Settling | Seen::HolderWriting | Seen::Quiet => {
                self.check = Some(status);
                self.issue(Io::Read { wait_until: None });
            }
        }
    }

    /// The read that followed a check still says it is this member's turn.
    fn decide(&mut self, now: UnixMillis, status: &LeadershipStatus) {
        match Seen::of(status, self.lease_pair()) {
            Seen::Untaken => self.challenge(now),
            Seen::Challenger { pair, .. } => self.defer(now, pair, status),
            Seen::Settling => {
                self.holding_since = None;
                self.recheck(now);
            }
            Seen::HolderWriting if self.stalled => {
                // The holder's transaction is open and reads stall. Either the holder died in
                // the middle of a write (the acquire will abort it) or another role stalls the
                // partition while a healthy holder renews: a renewal commits within moments,
                // so only a transaction open for half a renew interval is taken as dead. How
                // long it has been open: since the coordinator says it began, when it says so
                // (a holder killed mid-write is found at the turn, not half an interval
                // later, and frees the partition its transaction stalls); else since this
                // standby first saw it open.
                let seen = *self.holding_since.get_or_insert(now);
                let since = status.transaction_started.map_or(seen, |at| at.min(now));
                if now >= since + self.hold() {
                    // The lower ranks, if holding too, started later: this one goes first.
                    self.acquire();
                } else {
                    self.recheck(now);
                }
            }
            Seen::Quiet if self.stalled => {
                // Nothing of this role is open, yet the read stops short: another role's open
                // transaction hides the partition's newer records, among them (perhaps) this
                // role's renewals. The lease read is not known to be expired: wait until the
                // read gets past the stall (the stalling transaction's timeout bounds it).
                self.holding_since = None;
                self.recheck(now);
            }
            Seen::HolderWriting | Seen::Quiet => self.challenge(now),
        }
    }

    /// Nothing stands in the way any more. A member that had to wait at its turn (a stall, a
    /// coordinator in the middle of an abort) is released together with every other rank that
    /// waited on the same thing: the ranks are staggered again from the release, so that rank
    /// `r` challenges `r` staggers after it (and rank 0 at once).
    fn challenge(&mut self, now: UnixMillis) {
        let rank = self.rank.unwrap_or(0);
        if self.waited && rank > 0 {
            self.waited = false;
            self.holding_since = None;
            self.released_at = Some(now);
            self.wait_for_turn(now);
            return;
        }
        self.acquire();
    }

    /// The challenge proper: announce it (when evicting, and a lease names another holder),
    /// then mint the epoch.
    ///
    /// Not while this member's reads have neither reached its own registration nor read any
    /// lease: the role's first claim is open (its challenger died in it), every member that
    /// registered since is held back alike, and none of them knows its rank, so they would
    /// challenge together. The coordinator's abort of that claim at its timeout (or a member
    /// that reads its registration) releases them; this member reads again every [`RECHECK`]
    /// until then. With a lease read, a member held back short of its registration still
    /// challenges at its turn (a lease after it registered): a holder that died in the middle
    /// of a renewal is aborted by the first standby that comes, not by the timeout.
    fn acquire(&mut self) {
        if self.registration_unseen() && self.lease_pair().is_none() && !self.resigning {
            // Read again shortly (not only check: a check alone never reaches the
            // registration).
            let at = self.now + self.recheck_interval();
            self.timer = Some((at, Io::Read { wait_until: None }));
            return;
        }
        self.deferred_to = None;
        self.holding_since = None;
        self.acquire_failed_at = None;
        self.waited = false;
        self.released_at = None;
        let announce = self.evict
            && self
                .state
                .lease()
                .is_some_and(|e| e.lease.member != self.member);
        self.issue(if announce { Io::Announce } else { Io::Acquire });
    }

    /// Another member's challenge under `pair` is under way: treat the role as leased to it for
    /// one lease duration from now (the lease it is about to write would run that long), and
    /// count this member's turn from then. If that challenge writes its first lease, the read
    /// of it ends the wait; if not, the next check finds the same pair and challenges.
    ///
    /// When its claim's transaction is open and the coordinator says since when, the wait ends
    /// no later than a lease after that start: a claim open that long belongs to a challenger
    /// that died in the middle of it (a live one commits its first lease within moments), and
    /// the coordinator aborts it about then. The members released by that abort then all count
    /// their turns from about the same instant, so their ranks keep them apart. Not while this
    /// member's reads have not reached its own registration: its rank is not known yet, and
    /// the abort that releases the reads shows it.
    fn defer(&mut self, now: UnixMillis, pair: FencingToken, status: &LeadershipStatus) {
        self.deferred_to = Some(pair);
        self.holding_since = None;
        self.waited = false;
        let open_since = status
            .transaction_started
            .filter(|_| status.state == Some(TransactionState::Ongoing))
            .filter(|_| !self.registration_unseen());
        let until = now + self.timing.lease_duration;
        let until = open_since.map_or(until, |at| until.min(at + self.timing.lease_duration));
        self.contested_until = Some(self.contested_until.map_or(until, |c| c.max(until)));
        self.wait_for_turn(now);
    }

    /// Looks at the state again at `now + recheck` (a check, then a read).
    fn recheck(&mut self, now: UnixMillis) {
        self.waited = true;
        self.timer = Some((now + self.recheck_interval(), Io::Describe));
    }

    fn recheck_interval(&self) -> Duration {
        RECHECK
            .min(self.timing.renew_interval / 8)
            .max(Duration::from_millis(1))
    }

    /// How long the holder's transaction must be seen open during a stall before it is taken
    /// for a dead holder's: half a renew interval.
    fn hold(&self) -> Duration {
        (self.timing.renew_interval / 2).max(Duration::from_millis(1))
    }

    /// What this member, registered at `join_offset`, knows about itself at `now`, for
    /// [`evaluate`].
    fn standing(&self, join_offset: i64, now: UnixMillis) -> Standing {
        Standing {
            join_offset,
            registered_at: self.registered_at,
            unleased_since: self.unleased_since.unwrap_or(now),
            contested_until: self.contested_until.max(self.released_at),
        }
    }

    /// Waits for this member's next turn as the state now stands.
    fn wait_for_turn(&mut self, now: UnixMillis) {
        let Some(join_offset) = self.join_offset else {
            self.issue(Io::Register);
            return;
        };
        let standing = self.standing(join_offset, now);
        match evaluate(&self.state, &self.member, &standing, now, &self.timing) {
            Step::NotRegistered | Step::PassedOver => self.issue(Io::Register),
            Step::Wait { until, rank } => {
                // Tail the partition until the turn rather than sleep: the record that ends
                // the wait (the lease of the challenger deferred to, or the tombstone of a
                // resign whose exit pair the check saw) is read as it lands. A reader that
                // answers at once brings nothing new, and the timer takes over.
                self.rank = Some(rank);
                self.issue(Io::Read {
                    wait_until: Some(until),
                });
            }
            // Not reachable with a contest window in the future; look again shortly.
            Step::Challenge { .. } => self.recheck(now),
        }
    }

    /// The members registered ahead of this new leader: each had its turn before this
    /// member's and did not take the role (it died, left without deregistering, or is too slow
    /// to lead), and the previous holder among them. Their registrations are tombstoned so
    /// that no later failover waits a stagger for them.
    fn passed_over(&self) -> VecDeque<(MemberId, u32)> {
        let Some(join) = self.join_offset else {
            return VecDeque::new();
        };
        self.state
            .roster()
            .filter(|(m, o)| *o < join && **m != self.member)
            .map(|(m, _)| (m.clone(), 0))
            .collect()
    }

    /// When the renewal after the lease write issued at `issued_at` and finished at `now` is
    /// due. Never later than a renew interval after the write's start, so no lease is held to
    /// a thinner margin than without a schedule.
    ///
    /// Keeping the schedule matters to a process that leads many roles. A write that finished
    /// late (a loop that fell behind, a claim that waited behind thousands of others, a retry)
    /// would otherwise move every later renewal of its role to when the write happened to
    /// finish. A process whose loop was slow once (typically while it claimed its roles)
    /// would keep the renewals, and so the lease deadlines, of all the roles delayed together
    /// bunched for as long as it held them; if it died, their standbys would all have to take
    /// over in the same second.
    ///
    /// - **A term with a phase** (a host's spread): the term's one point in (`issued_at`,
    ///   `issued_at` + renew interval], at once if the write finished after it. A role that
    ///   missed its point is back on its points after one or a few early renewals (while
    ///   writes take less than a renew interval). The rule before, below, kept every role
    ///   whose writes finished later than its phase allowed on its claim's plain schedule for
    ///   as long as its host's queue stayed that far behind, in step with every role claimed
    ///   in the same second.
    /// - **A term without one** (its points are a renew interval after the claim's start and
    ///   every renew interval after that): the next point after `now`, capped at a renew
    ///   interval after the write's start. A write issued on its point that finished before
    ///   the next one keeps the schedule; one that finished later is followed a renew interval
    ///   after its start, never back to back with it unless it took a whole renew interval.
    fn next_renewal(&self, now: UnixMillis) -> UnixMillis {
        let interval = duration_millis(self.timing.renew_interval).max(1);
        let grid = self.renew_grid.as_millis();
        // The first point after `after` (the grid's points are `grid + k * interval`).
        let point_after = |after: i64| {
            if after < grid {
                grid
            } else {
                let passed = (after - grid) / interval + 1;
                grid.saturating_add(passed.saturating_mul(interval))
            }
        };
        let next = if self.renew_phased {
            point_after(self.issued_at.as_millis())
        } else {
            point_after(now.as_millis())
        };
        UnixMillis(next).min(self.issued_at + self.timing.renew_interval)
    }

    /// A leader between lease writes: tombstone the next passed-over registration, or wait
    /// for the renewal.
    fn lead_on(&mut self, token: FencingToken) {
        if !self.evictions.is_empty() && self.now < self.renew_at {
            self.issue(Io::Evict);
        } else {
            self.timer = Some((self.renew_at, Io::Renew(token)));
        }
    }

    /// An eviction append finished (`ok`) or failed.
    fn after_evict(&mut self, ok: bool) {
        if self.resigning {
            self.start_cleanup();
            return;
        }
        let Some(token) = self.term.filter(|t| t.elected).map(|t| t.token) else {
            self.deregister_or_finish();
            return;
        };
        if ok && self.superseded_pending.is_none() {
            self.lead_on(token);
        } else {
            // After a failure (or with a fence to act on), the renewal comes first; the
            // evictions left resume after it.
            self.timer = Some((self.renew_at, Io::Renew(token)));
        }
    }

    fn on_failure(&mut self, now: UnixMillis, io: Io) {
        self.failures = self.failures.saturating_add(1);
        let since = *self.failing_since.get_or_insert(now);
        let leader_cap = (self.timing.renew_interval / 4).min(BACKOFF_CAP);
        let standby_cap = BACKOFF_CAP.min(self.timing.lease_duration);
        match io {
            Io::Announce => {
                // Best effort: the check was made; challenge without the sign.
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.issue(Io::Acquire);
                }
            }
            Io::Evict => {
                if let Some(front) = self.evictions.front_mut() {
                    front.1 += 1;
                    if front.1 >= CLEANUP_ATTEMPTS {
                        self.evictions.pop_front();
                    }
                }
                self.failures = 0;
                self.after_evict(false);
            }
            Io::Renew(_) => {
                if self.resigning {
                    self.start_cleanup();
                } else {
                    let at = now + backoff(self.failures, leader_cap);
                    self.timer = Some((at, io));
                }
            }
            Io::Supersede(_) | Io::ClearLease(_) | Io::Deregister => {
                if self.failures >= CLEANUP_ATTEMPTS {
                    self.failures = 0;
                    match io {
                        // Best effort: clear the lease through the old pair.
                        Io::Supersede(old) => self.issue(Io::ClearLease(old)),
                        Io::ClearLease(_) => self.deregister_or_finish(),
                        _ => self.finish(self.pending_end.unwrap_or(EndReason::Resigned)),
                    }
                } else {
                    self.timer = Some((now + backoff(self.failures, leader_cap), io));
                }
            }
            Io::Register | Io::Read { .. } | Io::Describe | Io::Acquire | Io::Claim(_) => {
                if io == Io::Acquire {
                    // It may have minted a pair whose answer was lost.
                    self.acquire_failed_at = Some(now);
                }
                if self.resigning {
                    self.start_cleanup();
                    return;
                }
                if let Some(limit) = self.give_up_after {
                    if now.since(since) >= limit {
                        // Best effort on the way out: supersede a pair it was granted, deregister.
                        self.pending_end = Some(EndReason::Unavailable);
                        self.resigning = true;
                        self.start_cleanup();
                        return;
                    }
                }
                // After a failed acquire, look at the state again before another challenge.
                let retry = match io {
                    Io::Acquire | Io::Read { .. } => Io::Read { wait_until: None },
                    other => other,
                };
                self.timer = Some((now + backoff(self.failures, standby_cap), retry));
            }
        }
    }

    fn finish(&mut self, reason: EndReason) {
        self.io = None;
        self.timer = None;
        self.ended = Some(reason);
        self.commands.push_back(Command::Ended { reason });
    }

    fn issue(&mut self, io: Io) {
        let now = self.now;
        self.io = Some(io);
        self.issued_at = now;
        self.lease_delay = Duration::ZERO;
        let cmd = match io {
            Io::Register => Command::Append {
                partition: self.partition,
                key: self.registration_key.clone(),
                value: Some(
                    Registration {
                        member: self.member.clone(),
                        registered_at: now,
                    }
                    .encode(),
                ),
            },
            Io::Deregister => Command::Append {
                partition: self.partition,
                key: self.registration_key.clone(),
                value: None,
            },
            Io::Read { wait_until } => Command::ReadPartition {
                partition: self.partition,
                from_offset: self.state.next_offset(),
                wait_until,
            },
            Io::Describe => Command::DescribeRole {
                transactional_id: self.role.clone(),
            },
            Io::Announce => {
                let holder = match self.state.lease() {
                    Some(e) => e.lease.member.clone(),
                    // `acquire` announces only with a lease read; never stall a challenge.
                    None => {
                        self.io = None;
                        self.issue(Io::Acquire);
                        return;
                    }
                };
                Command::Append {
                    partition: self.partition,
                    key: Key::registration(self.role.clone(), holder).encode(),
                    value: None,
                }
            }
            Io::Evict => {
                let Some((member, _)) = self.evictions.front() else {
                    // `lead_on` issues an eviction only with one queued; never stall a leader.
                    self.io = None;
                    if let Some(t) = self.term {
                        self.timer = Some((self.renew_at, Io::Renew(t.token)));
                    }
                    return;
                };
                Command::Append {
                    partition: self.partition,
                    key: Key::registration(self.role.clone(), member.clone()).encode(),
                    value: None,
                }
            }
            Io::Acquire | Io::Supersede(_) => Command::AcquireEpoch {
                transactional_id: self.role.clone(),
                transaction_timeout: self.timing.lease_duration,
            },
            Io::Claim(token) | Io::Renew(token) => {
                let granted_at = self.term.map_or(now, |t| t.granted_at);
                let lease = Lease {
                    member: self.member.clone(),
                    token,
                    granted_at,
                    deadline: now + self.timing.lease_duration,
                };
                Command::WriteLease {
                    partition: self.partition,
                    key: self.lease_key.clone(),
                    value: Some(lease.encode()),
                    token,
                }
            }
            Io::ClearLease(token) => Command::WriteLease {
                partition: self.partition,
                key: self.lease_key.clone(),
                value: None,
                token,
            },
        };
        self.commands.push_back(cmd);
    }
}
