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
//!   reads and a bounded window of transport calls in flight.
//! * Observing a role from any process: [`leader`](describe::leader) (who leads now) and a [`Watch`](watch::Watch) (every
//!   change of leader, in log order) — see [`watch`].
//! * Handles: [`Candidacy`](leadership::Candidacy) while waiting,
//!   [`Leadership`](leadership::Leadership) while leading.
//! * Transports: the four traits of [`transport`], each call of a member in one completion
//!   form (the leader's guarded write is the one call that blocks), and
//!   [`transport::OnPool`] for a client whose calls block; [`memory::MemoryBroker`] (feature
//!   `memory`, default) and `kafka::KafkaTransport` (feature `kafka`).
//! * Clocks: [`SystemClock`], and [`ManualClock`] for tests, with exact quiescence
//!   ([`ManualClock::settle`]).
//! * Testing your own code: `testkit::TestCluster` (features `memory` and a driver): members on
//!   any driver, a manual clock, cuttable links and the broker's fault switches.
//! * Observing: [`Leadership::health`](leadership::Leadership::health) and [`HealthCheck`] for probes; with feature
//!   `metrics`, the `metrics` module's series through the `metrics` facade.
//! * Writes to PostgreSQL fenced like writes to Kafka: `postgres::Fence` (feature `postgres`)
//!   refuses a deposed leader's transaction inside the database.
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

#[cfg(async_driver)]
mod async_api;
#[cfg(async_driver)]
mod awaited;
pub mod clock;
pub mod cuttable_link;
pub mod describe;
#[cfg_attr(not(any_driver), allow(dead_code, unused_imports))]
mod driver;
pub mod error;
pub mod health;
#[cfg_attr(not(any_driver), allow(dead_code, unused_imports))]
pub mod host;
pub mod leadership;
/// The old path of [`cuttable_link`].
#[doc(hidden)]
pub use cuttable_link as link;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
mod metrics;
pub mod options;
#[cfg(async_driver)]
mod runtime;
pub mod transport;
// Without a driver nothing starts a watch loop (`leader` and `LeaseTracker` still work).
#[cfg_attr(not(any_driver), allow(dead_code))]
pub mod watch;

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;

#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod fleet;

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

/// The native Kafka client (crate `kafka-coordination-kafka`): [`kafka::KafkaTransport`].
#[cfg(feature = "kafka")]
#[cfg_attr(docsrs, doc(cfg(feature = "kafka")))]
#[doc(inline)]
pub use kafka_coordination_kafka as kafka;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;

/// Every place the Kafka transport parses broker bytes, for the fuzz harness in `fuzz/`.
/// Not a public API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use kafka_coordination_kafka::fuzzing;

#[cfg(all(feature = "memory", any_driver))]
// docs.rs shows this condition to readers, so it names the features (`any_driver` is build.rs's).
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

// What the README and the guide import; everything else is named by its module (the handles
// in `leadership`, the transport seam in `transport`, errors in `error`, ...).
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::Error;
pub use health::HealthCheck;
pub use kafka_coordination_core::{FencingToken, LeadershipStatus, Timing};
pub use options::Options;
pub use transport::GuardedRecord;
pub use watch::{WatchEvent, WatchOptions};
