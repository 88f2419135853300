//! The sans-IO core of **kafka-coordination**: leader election, leases and fencing tokens on
//! Apache Kafka, with no I/O, no clock and no async.
//!
//! * [`record`]: the frozen byte layout of `__coordination_state` keys and values.
//! * [`partition`]: Kafka's murmur2 partitioning of a role name.
//! * [`token`]: the fencing token, the (producer id, producer epoch) pair.
//! * [`state`]: the roster and lease of one role, built from its partition's records.
//! * [`mod@evaluate`]: one decision from that state: wait, challenge or renew.
//! * [`machine`]: [`Candidate`], the life of one member as a state machine.
//! * [`leadership_status`]: a third party's view of who is authoritative.
//! * [`timing`]: the timing of leases and challenges.
//! * [`time`]: wall-clock instants in milliseconds; the caller always passes `now`.
//!
//! The crate is `#![no_std]` with `alloc`; the default `std` feature only adds
//! `std::error::Error` implementations.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod evaluate;
pub mod leadership_status;
pub mod machine;
pub mod partition;
pub mod record;
pub mod state;
pub mod time;
pub mod timing;
pub mod token;

/// The old path of [`leadership_status`].
#[doc(hidden)]
pub use leadership_status as describe;
/// The old path of [`timing`].
#[doc(hidden)]
pub use timing as config;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use evaluate::{evaluate, Standing, Step};
pub use leadership_status::{LeadershipStatus, PairRelation, TransactionState};
pub use machine::{Candidate, Command, EndReason, Event, MachineError, Status};
pub use state::{Record, RoleState};

pub use partition::{murmur2, role_partition, to_positive, PartitionCountError};
pub use record::{
    FormatError, FormatErrorKind, Key, KeyKind, KeyRef, Lease, LeaseRef, MemberId, NameError, Part,
    Registration, RegistrationRef, Role,
};

pub use time::UnixMillis;
pub use timing::{Timing, TimingError};
pub use token::FencingToken;
