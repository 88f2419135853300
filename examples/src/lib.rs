//! The runnable examples of **kafka-coordination**, as a library.
//!
//! Every example under `examples/examples/` is a thin `main` around one `run` function here, so
//! the integration tests of this crate run the very same scenarios (`cargo test -p
//! kafka-coordination-examples`) and fail if an example breaks.
//!
//! | module | example | shows |
//! |---|---|---|
//! | [`failover`] | `cargo run --example failover` | election, renewal, death of the leader, takeover, fencing, third-party check, resign hand-over |
//! | [`blocking_worker`] | `cargo run --example blocking_worker` | work done only while leading, a zombie's writes refused by token, stop on fence |
//! | [`custom_event_loop`] | `cargo run --example custom_event_loop` | driving the sans-IO [`Candidate`](kafka_coordination::core::machine::Candidate) by hand |
//! | [`custom_transport`] | `cargo run --example custom_transport` | a transport of your own: an in-process broker over a `HashMap` implementing only what the seam requires |
//! | [`manual_clock`] | `cargo run --example manual_clock` | unit-testing leader-only code with the test kit ([`TestCluster`](kafka_coordination::testkit::TestCluster), a [`ManualClock`](kafka_coordination::ManualClock)) |
//! | `prometheus` | `cargo run --example prometheus` | the library's metrics served as Prometheus text on `/metrics`, a leader liveness check on `/healthz` (feature `prometheus`, default) |
//! | `singleton_consumer` | `cargo run --example singleton_consumer --features kafka -- bench` | a singleton consumer on rdkafka with exactly-once output: results and input offsets in one guarded transaction (feature `kafka`) |
//! | `job_scheduler` | `cargo run --example job_scheduler --features postgres` | job runs written to PostgreSQL through the database fence and to Kafka through guarded writes (feature `postgres`; a broker and a database) |
//! | [`tokio_service`] | `cargo run --example tokio_service` | a tokio service: guarded writes awaited, `select!` on `done()`, resign on shutdown |
//! | `scheduler` | `cargo run --example scheduler --features kafka-client -- MEMBER` | the README's program on a real broker: leads `scheduler`, writes to `jobs`, resigns on SIGTERM, Ctrl-C and errors (`scripts/first-run.sh` runs it) |
//! | `scheduler_blocking` | `cargo run --example scheduler_blocking --features kafka-client -- MEMBER` | the same on the blocking driver, signals through `signal-hook` |
//!
//! Each `run` takes the command-line arguments (without the program name) and a [`Timeline`]
//! to print to, and returns `Err` with a message when anything did not happen as expected.
//!
//! The programs keep the system clock, for people watching them run. The tests run every
//! scenario in virtual time (`--virtual-time`, the default of `custom_event_loop`, the test kit
//! in `manual_clock`): on a [`ManualClock`](kafka_coordination::ManualClock) that only the
//! scenario moves, so no verdict depends on how fast threads are scheduled. See [`time`].
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod args;
pub mod blocking_worker;
pub mod capacity;
pub mod custom_event_loop;
pub mod custom_transport;
pub mod elections;
pub mod failover;
#[cfg(feature = "postgres")]
pub mod job_scheduler;
pub mod manual_clock;
pub mod procfs;
#[cfg(feature = "prometheus")]
pub mod prometheus;
#[cfg(feature = "kafka")]
pub mod singleton_consumer;
pub mod stats;
pub mod time;
pub mod timeline;
pub mod tokio_service;

/// The guide's Rust blocks (`docs/guide/`), compiled and run as doc tests of this crate, which
/// has the features they use; `scripts/docs-check.py` checks that every page is listed here.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../../docs/guide/README.md")]
    mod index {}
    #[doc = include_str!("../../docs/guide/how-it-works.md")]
    mod how_it_works {}
    #[doc = include_str!("../../docs/guide/guarantees.md")]
    mod guarantees {}
    #[doc = include_str!("../../docs/guide/fencing-stores.md")]
    mod fencing_stores {}
    #[doc = include_str!("../../docs/guide/operating.md")]
    mod operating {}
    #[doc = include_str!("../../docs/guide/many-roles.md")]
    mod many_roles {}
    #[doc = include_str!("../../docs/guide/fleet.md")]
    mod fleet {}
    #[doc = include_str!("../../docs/guide/testing.md")]
    mod testing {}
    #[doc = include_str!("../../docs/guide/performance.md")]
    mod performance {}
    // Its blocks configure the Kafka transport (feature `kafka`).
    #[cfg(feature = "kafka")]
    #[doc = include_str!("../../docs/guide/deploying.md")]
    mod deploying {}
    #[doc = include_str!("../../docs/guide/troubleshooting.md")]
    mod troubleshooting {}
}

pub use time::Time;
pub use timeline::Timeline;

/// Runs an example's `run` function as a program: prints the error and exits with status 1 on
/// failure, 2 when the arguments were wrong. Used by the thin mains in `examples/examples/`.
pub fn main_with(name: &str, run: fn(&[String], &Timeline) -> Result<(), args::Failure>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let timeline = Timeline::stdout();
    match run(&args, &timeline) {
        Ok(()) => {}
        Err(args::Failure::Usage(message)) => {
            eprintln!("{name}: {message}");
            std::process::exit(2);
        }
        Err(args::Failure::Failed(message)) => {
            eprintln!("{name}: FAILED: {message}");
            std::process::exit(1);
        }
    }
}
