//! **kafka-coordination**: leader election, leases and fencing tokens on Apache Kafka.
//!
//! One member of a role does the work; the Kafka cluster fences every other member; any third
//! party checks who is authoritative with one request. The leadership epoch is the producer
//! epoch Kafka's transaction coordinator mints for `transactional.id = <role>`, so safety comes
//! from the broker's fence, never from clocks. See the README for the guarantees.
//!
//! * Drivers, one per way of running: [`blocking`] (default), `tokio`, `smol`, `async_std`
//!   (features of the same names), each with `start`, `acquire_leadership`,
//!   `describe_leadership`, `describe_role_state`.
//! * Handles: [`Candidacy`] while waiting, [`Leadership`] while leading.
//! * Transports: the four traits of [`transport`]; [`memory::MemoryBroker`] (feature `memory`,
//!   default) and `kafka::KafkaTransport` (feature `kafka`).
//! * Clocks: [`SystemClock`], and [`ManualClock`] for tests, with exact quiescence
//!   ([`ManualClock::settle`]).
//! * Testing your own code: `testkit::TestCluster` (features `memory` and a driver): members on
//!   any driver, a manual clock, cuttable links and the broker's fault switches.
//! * The sans-IO core is re-exported as [`core`] for custom event loops.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use kafka_coordination_core as core;

/// The README's Rust blocks, compiled and run as doc tests (the Kafka ten-liner is compiled in
/// the `kafka` module's docs, where it has its feature).
#[cfg(all(doctest, feature = "memory", feature = "blocking"))]
#[doc = include_str!("../../README.md")]
mod readme {}

mod log;

pub mod clock;
pub mod describe;
#[cfg_attr(
    not(any(
        feature = "blocking",
        feature = "tokio",
        feature = "smol",
        feature = "async-std"
    )),
    allow(dead_code, unused_imports)
)]
mod driver;
pub mod error;
pub mod leadership;
pub mod link;
pub mod options;
pub mod transport;

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
#[path = "runtime_tokio.rs"]
pub mod tokio;

#[cfg(feature = "smol")]
#[cfg_attr(docsrs, doc(cfg(feature = "smol")))]
#[path = "runtime_smol.rs"]
pub mod smol;

#[cfg(feature = "async-std")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-std")))]
#[path = "runtime_async_std.rs"]
pub mod async_std;

#[cfg(feature = "memory")]
#[cfg_attr(docsrs, doc(cfg(feature = "memory")))]
pub mod memory;

#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
pub mod kafka;

/// Every place the Kafka transport parses broker bytes, for the fuzz harness in `fuzz/`.
/// Not a public API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use kafka::fuzzing;

#[cfg(all(
    feature = "memory",
    any(
        feature = "blocking",
        feature = "tokio",
        feature = "smol",
        feature = "async-std"
    )
))]
#[cfg_attr(
    docsrs,
    doc(cfg(all(
        feature = "memory",
        any(
            feature = "blocking",
            feature = "tokio",
            feature = "smol",
            feature = "async-std"
        )
    )))
)]
pub mod testkit;

pub use clock::{Clock, ManualClock, SystemClock, Unsettled};
pub use describe::{describe_leadership, describe_role_state};
pub use error::{ErrorKind, TransportError};
pub use kafka_coordination_core::machine::{Cleanup, EndReason, Status};
pub use kafka_coordination_core::{FencingToken, LeadershipStatus, RoleState, Timing, UnixMillis};
pub use leadership::{CancelHandle, Candidacy, Error, Health, Leadership, Snapshot};
pub use link::Link;
pub use options::Options;
pub use transport::{
    Coordinator, GuardedRecord, LeaseWriter, ReadBatch, Record, Registrar, StateReader, Transport,
};
