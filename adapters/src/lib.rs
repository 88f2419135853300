//! **kafka-coordination**: leader election, leases and fencing tokens on Apache Kafka.
//!
//! One member of a role does the work; the Kafka cluster fences every other member; any third
//! party checks who is authoritative with one request. The leadership epoch is the producer
//! epoch Kafka's transaction coordinator mints for `transactional.id = <role>`, so safety comes
//! from the broker's fence, never from clocks. The guide (`docs/guide/` in the repository)
//! states the guarantees and the tests that show them.
//!
//! * Drivers, one per way of running: [`blocking`] (feature `blocking`, default), and
//!   `tokio_driver`, `smol_driver`, `async_std_driver` (features `tokio`, `smol`, `async-std`),
//!   each with `start`, `acquire_leadership`, `describe_leadership`, `describe_role_state`,
//!   `watch`, `leader`; the async modules' functions are `async`. async-std is discontinued
//!   upstream: new code should use `smol_driver`.
//! * Many roles in one process: a [`host::Host`] runs any number of candidacies on one thread
//!   (`blocking::host`) or one task (`tokio_driver::host`, ...), sharing timers, partition
//!   reads and a bounded pool of I/O threads.
//! * Observing a role from any process: [`leader`] (who leads now) and a [`Watch`] (every
//!   change of leader, in log order) — see [`watch`].
//! * Handles: [`Candidacy`] while waiting, [`Leadership`] while leading.
//! * Transports: the four traits of [`transport`]; [`memory::MemoryBroker`] (feature `memory`,
//!   default) and `kafka::KafkaTransport` (feature `kafka`).
//! * Clocks: [`SystemClock`], and [`ManualClock`] for tests, with exact quiescence
//!   ([`ManualClock::settle`]).
//! * Testing your own code: `testkit::TestCluster` (features `memory` and a driver): members on
//!   any driver, a manual clock, cuttable links and the broker's fault switches.
//! * Observing: [`Leadership::health`] and [`HealthCheck`] for probes; with feature
//!   `metrics`, the `metrics` module's series through the `metrics` facade.
//! * The sans-IO core is re-exported as [`core`] for custom event loops.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use kafka_coordination_core as core;

/// The README's Rust blocks, compiled (and those that need no broker run) as doc tests. The
/// guide's (`docs/guide/`) are doc tests of the examples crate.
#[cfg(all(
    doctest,
    feature = "memory",
    feature = "blocking",
    feature = "kafka",
    feature = "tokio"
))]
#[doc = include_str!("../README.md")]
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
#[cfg(any(feature = "tokio", feature = "smol", feature = "async-std"))]
mod flavour;
pub mod health;
#[cfg_attr(
    not(any(
        feature = "blocking",
        feature = "tokio",
        feature = "smol",
        feature = "async-std"
    )),
    allow(dead_code, unused_imports)
)]
pub mod host;
pub mod leadership;
pub mod link;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
mod metrics;
pub mod options;
mod pool;
#[cfg(any(feature = "tokio", feature = "smol", feature = "async-std"))]
mod runtime;
mod sync;
pub mod transport;
// Without a driver nothing starts a watch loop (`leader` and `LeaseTracker` still work).
#[cfg_attr(
    not(any(
        feature = "blocking",
        feature = "tokio",
        feature = "smol",
        feature = "async-std"
    )),
    allow(dead_code)
)]
pub mod watch;

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod tokio_driver;

#[cfg(feature = "smol")]
#[cfg_attr(docsrs, doc(cfg(feature = "smol")))]
pub mod smol_driver;

#[cfg(feature = "async-std")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-std")))]
pub mod async_std_driver;

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
pub use describe::{describe_leadership, describe_role_state, leader};
pub use error::{Error, ErrorKind, TransportError};
pub use health::{HealthCheck, StaleTerm, Unhealthy};
pub use kafka_coordination_core::machine::{Cleanup, EndReason, Status};
pub use kafka_coordination_core::{
    FencingToken, LeadershipStatus, PairRelation, RoleState, Timing, UnixMillis,
};
pub use leadership::{CancelHandle, Candidacy, Health, Leadership, Snapshot};
pub use link::Link;
pub use options::Options;
// The completion callbacks (`AcquireDone`, `LeaseDone`, ...) and `TailHook` are for
// transport implementors: they stay in `transport`.
pub use transport::{
    Append, ConsumedOffset, Coordinator, GroupOffsets, GuardedRecord, LeaseWriter, ReadBatch,
    Record, Registrar, StateReader, Transport,
};
pub use watch::{Leader, RoleLeader, Vacancy, VacancyReason, Watch, WatchEvent, WatchOptions};
