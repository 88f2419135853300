//! The crate's tests that need no Kafka broker, as one test binary with a module per subject:
//! `cargo test -p kafka-coordination --test integration` runs them all, and a module's name
//! selects one subject (`--test integration drivers::`, or several filters at once:
//! `--test integration -- drivers:: watch::`).
//!
//! The modules share one process, so none of them may depend on running alone: process-wide
//! state (the global `metrics` recorder, which only `metrics` installs) is written so that the
//! other modules' tests cannot change what a test sees, and no test sets environment variables.
//! `postgres_fence` needs a PostgreSQL server (`KC_POSTGRES_URL`) and says loudly when it skips.
//!
//! `cfg(any_driver)` is on when the build has at least one driver (the crate's `build.rs`).

#[cfg(all(feature = "memory", any_driver))]
mod drivers;
#[cfg(all(feature = "memory", feature = "blocking"))]
mod fleet;
#[cfg(all(feature = "memory", feature = "blocking"))]
mod fleet_observe;
#[cfg(all(feature = "memory", any_driver))]
mod health;
#[cfg(all(feature = "memory", any_driver))]
mod host;
#[cfg(all(feature = "memory", feature = "blocking", feature = "tokio"))]
mod lifecycle;
#[cfg(feature = "memory")]
mod memory_broker;
#[cfg(all(feature = "metrics", feature = "memory", any_driver))]
mod metrics;
#[cfg(all(feature = "memory", feature = "blocking"))]
mod on_pool;
#[cfg(feature = "postgres")]
mod postgres_fence;
#[cfg(feature = "memory")]
mod simulation;
#[cfg(all(feature = "memory", any_driver))]
mod watch;
