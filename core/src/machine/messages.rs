//! The messages between a [`Candidate`](crate::machine::Candidate) and the code that drives
//! it: the [`Event`]s it is given, the [`Command`]s it asks for, how a term ends
//! ([`EndReason`], [`Cleanup`]), the [`MachineError`] of an event that does not fit, and the
//! [`Status`] it reports.

use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use crate::leadership_status::LeadershipStatus;
use crate::record::Role;
use crate::state::Record;
use crate::time::UnixMillis;
use crate::token::FencingToken;

/// An input to [`Candidate::handle`](crate::machine::Candidate::handle): the outcome of the
/// outstanding I/O command, the passing of time, or the caller's wish to resign.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The outstanding [`Command::Append`] was written at `offset`.
    Appended {
        /// The record's offset.
        offset: i64,
    },
    /// The outstanding [`Command::ReadPartition`] returned these records, in offset order,
    /// covering the partition up to `end_offset` (exclusive; the last stable offset).
    RecordsRead {
        /// The records read.
        records: Vec<Record>,
        /// Where the read stopped.
        end_offset: i64,
        /// Whether the read stopped short of the partition's high watermark because an open
        /// transaction (of this role or of any other role on the partition) holds the last
        /// stable offset back: committed records may exist past `end_offset` that no
        /// read_committed reader can see yet. A standby does not take a lease it read as
        /// expired while its reads are stalled by another role's transaction (see
        /// [`Candidate`](crate::machine::Candidate)). `false` when the transport cannot tell.
        stalled: bool,
        /// The partition's high watermark when the read was answered (the offset after the
        /// last record written, committed or not), `None` when the transport cannot tell. A
        /// stalled read stops below it. Every record committed before the read was answered
        /// lies below it, so a later read that gets this far has seen them all, however many
        /// other transactions keep the partition stalled meanwhile.
        high_watermark: Option<i64>,
    },
    /// The outstanding [`Command::DescribeRole`] found the coordinator's current pair and
    /// transaction state for the role ([`LeadershipStatus::NOT_FOUND`] when no member ever took
    /// it).
    Described {
        /// What the coordinator reported.
        status: LeadershipStatus,
    },
    /// The outstanding [`Command::AcquireEpoch`] minted `token`.
    EpochGranted {
        /// The granted pair.
        token: FencingToken,
    },
    /// The outstanding [`Command::WriteLease`] committed; its record is at `offset` (negative
    /// when the transport could not learn it).
    LeaseWritten {
        /// The lease record's offset in the role's partition.
        offset: i64,
    },
    /// The outstanding [`Command::WriteLease`] was rejected: a newer pair exists.
    Fenced,
    /// The outstanding I/O command failed in a way that may pass; the candidate retries with
    /// backoff. (Errors that will not pass, such as configuration errors, are the driver's to
    /// report; it stops feeding the candidate.)
    Failed,
    /// The outstanding I/O command failed in a way that will not pass (authorization, a broken
    /// producer, a configuration error). The candidate cleans up as far as it can (supersede
    /// its pair, clear its lease, deregister: each step tried a bounded number of times and
    /// skipped when it fails for good) and ends with [`EndReason::Failed`].
    Fatal,
    /// A write outside the machine (a guarded write of the role's work) carrying `token` was
    /// fenced by the broker: a newer leader holds the role. A leader with that pair is deposed
    /// at once (after the I/O it has outstanding, if any), without waiting for its next renewal
    /// to meet the fence. Answers no command; any other token is ignored.
    Superseded {
        /// The pair the fenced write carried.
        token: FencingToken,
    },
    /// Time passed. Only acts at or after
    /// [`Candidate::poll_timeout`](crate::machine::Candidate::poll_timeout); an extra tick is a
    /// no-op.
    Tick,
    /// Give up the role (or stop competing for it). Idempotent.
    Resign,
}

impl Event {
    /// The variant's name, for logs and errors (`"Appended"`, `"Tick"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Event::Appended { .. } => "Appended",
            Event::RecordsRead { .. } => "RecordsRead",
            Event::Described { .. } => "Described",
            Event::EpochGranted { .. } => "EpochGranted",
            Event::LeaseWritten { .. } => "LeaseWritten",
            Event::Fenced => "Fenced",
            Event::Failed => "Failed",
            Event::Fatal => "Fatal",
            Event::Superseded { .. } => "Superseded",
            Event::Tick => "Tick",
            Event::Resign => "Resign",
        }
    }
}

/// An output of [`Candidate::poll_command`](crate::machine::Candidate::poll_command): I/O to
/// perform (at most one outstanding at a time, answered with an [`Event`]) or a change the
/// caller acts on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// Append a record with the plain producer; answer [`Event::Appended`] or [`Event::Failed`].
    Append {
        /// The role's partition.
        partition: i32,
        /// The encoded key.
        key: Vec<u8>,
        /// The encoded value; `None` for a tombstone.
        value: Option<Vec<u8>>,
    },
    /// Read the partition from `from_offset` (read_committed, up to the last stable offset);
    /// answer [`Event::RecordsRead`] or [`Event::Failed`].
    ReadPartition {
        /// The role's partition.
        partition: i32,
        /// The first offset wanted.
        from_offset: i64,
        /// When set, the reader may wait until this instant for records at or past
        /// `from_offset` before it answers (a long poll). Answering at once is always correct.
        wait_until: Option<UnixMillis>,
    },
    /// Ask the coordinator for the role's current pair and transaction state
    /// (DescribeTransactions); answer [`Event::Described`] or [`Event::Failed`]. A standby
    /// sends it when its turn has come, before it challenges, to see whether another member's
    /// challenge is already under way (see [`Candidate`](crate::machine::Candidate), "Before a
    /// challenge").
    DescribeRole {
        /// The transactional id: the role.
        transactional_id: Role,
    },
    /// Mint the role's epoch (InitProducerId); answer [`Event::EpochGranted`] or
    /// [`Event::Failed`]. This fences the previous holder. A resigning member sends it too, to
    /// supersede its own pair before it clears the lease.
    AcquireEpoch {
        /// The transactional id: the role.
        transactional_id: Role,
        /// The transaction timeout: the lease duration.
        transaction_timeout: Duration,
    },
    /// Write a lease record through the producer that holds `token`; answer
    /// [`Event::LeaseWritten`], [`Event::Fenced`] or [`Event::Failed`].
    WriteLease {
        /// The role's partition.
        partition: i32,
        /// The encoded lease key.
        key: Vec<u8>,
        /// The encoded lease; `None` for the tombstone of a resign.
        value: Option<Vec<u8>>,
        /// The pair the write must carry.
        token: FencingToken,
    },
    /// This member leads with `token`: start the role's work and pass `token` to guarded writes.
    Elected {
        /// The leader's pair.
        token: FencingToken,
        /// The term number: the offset of the term's first lease record (see the module docs);
        /// negative when the transport could not report the offset.
        term: i64,
    },
    /// The broker fenced this leader: stop the role's work now. The candidate still
    /// deregisters before it ends.
    Deposed {
        /// The pair that was superseded.
        token: FencingToken,
    },
    /// The candidate is finished; drop it.
    Ended {
        /// Why.
        reason: EndReason,
    },
}

/// Why a candidate ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndReason {
    /// The leader's write was fenced: another member holds a newer pair.
    Fenced {
        /// The superseded pair.
        token: FencingToken,
    },
    /// The member resigned (or stopped competing) as asked.
    Resigned,
    /// The transport kept failing for longer than the give-up time while the member was not
    /// leading.
    Unavailable,
    /// A transport call failed in a way that will not pass ([`Event::Fatal`]).
    Failed,
}

/// What a candidate's exit managed to do, once it ended. Every field is `true` when the step
/// was done or was not needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cleanup {
    /// No pair this member held is still the coordinator's current pair: it minted one more
    /// epoch on the way out, or was superseded by another member.
    pub superseded: bool,
    /// The lease record it wrote was tombstoned (or it never wrote one, or another member took
    /// over).
    pub lease_cleared: bool,
    /// Its registration was tombstoned (or it never registered).
    pub deregistered: bool,
}

impl Cleanup {
    /// Whether every step was done.
    pub fn complete(&self) -> bool {
        self.superseded && self.lease_cleared && self.deregistered
    }
}

impl fmt::Display for Cleanup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.complete() {
            return f.write_str("complete");
        }
        let steps = [
            (
                self.superseded,
                "its pair was not superseded (it stays authoritative until a successor acquires)",
            ),
            (
                self.lease_cleared,
                "its lease was not cleared (standbys wait for the deadline)",
            ),
            (
                self.deregistered,
                "its registration was not withdrawn (a ghost on the roster)",
            ),
        ];
        let mut first = true;
        for (done, what) in steps {
            if !done {
                if !first {
                    f.write_str("; ")?;
                }
                f.write_str(what)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::Fenced { token } => write!(f, "fenced: the pair {token} was superseded"),
            EndReason::Resigned => f.write_str("resigned"),
            EndReason::Unavailable => f.write_str("the transport kept failing"),
            EndReason::Failed => f.write_str("a transport call failed for good"),
        }
    }
}

/// An event that does not fit the candidate's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// The event answers no outstanding command (or the wrong one).
    #[error("event {event} does not fit: {expected}")]
    Unexpected {
        /// The event given.
        event: &'static str,
        /// What the candidate was waiting for.
        expected: &'static str,
    },
    /// The candidate has ended; only `Tick` and `Resign` are accepted (and do nothing).
    #[error("event {event} after the candidate ended")]
    Ended {
        /// The event given.
        event: &'static str,
    },
}

/// Where a candidate is in its life, for logs and tools: this member's own view. Not to be
/// confused with [`LeadershipStatus`](crate::LeadershipStatus), the coordinator's answer about
/// a role, which is what any third party's check sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Writing its registration.
    Registering,
    /// Registered, waiting for its turn.
    Standby,
    /// Minting the epoch or writing the first lease.
    Challenging,
    /// Leading.
    Leading,
    /// Deposed or resigning, cleaning up.
    Leaving,
    /// Finished.
    Ended,
}
