//! Many candidacies on one loop: a [`Host`] runs every candidacy started on it on one thread
//! (blocking flavour) or one task (tokio, smol, async-std), for services that hold one role per
//! shard, tenant or partition.
//!
//! A host shares one timer heap, one read per partition of `__coordination_state` (each
//! candidacy sees only its role's records), the transport's tail for standbys' long polls
//! ([`HostOptions::tail_reads`]), and at most [`HostOptions::max_in_flight`] transport calls in
//! flight. Queued calls go out in order of urgency: reads, then takeovers under way, then
//! renewals that can still afford the wait. The first renewal of each term comes a fraction of
//! the renew interval early ([`HostOptions::spread_renewals`]), which only lengthens a lease.
//! Otherwise each candidacy behaves as one started alone, with the same [`Candidacy`](crate::leadership::Candidacy) and
//! [`Leadership`](crate::leadership::Leadership) handles. Why and with what effect: the guide's
//! `docs/guide/many-roles.md`.
//!
//! ```
//! # #[cfg(all(feature = "memory", feature = "blocking"))] {
//! use std::sync::Arc;
//! use kafka_coordination::host::HostOptions;
//! use kafka_coordination::memory::MemoryBroker;
//! use kafka_coordination::{blocking, ManualClock, Options};
//!
//! let clock = ManualClock::default();
//! let broker = MemoryBroker::new(16, Arc::new(clock.clone()));
//! let host = blocking::host(
//!     Arc::new(broker.transport("node-a")),
//!     HostOptions::new().clock(clock.clone()),
//! )?;
//! let shards: Vec<_> = (0..100)
//!     .map(|i| host.start(&format!("shard-{i}"), "node-a", Options::new().clock(clock.clone())))
//!     .collect::<Result<_, _>>()?;
//! clock.settle().unwrap();
//! assert!(shards.iter().all(|c| c.snapshot().token.is_some()));
//! # }
//! # Ok::<(), kafka_coordination::Error>(())
//! ```

mod completions;
mod event_loop;
mod handle;
mod host_options;
mod inbox;
mod io;
mod shared_reads;
mod window;

pub use completions::DESCRIBE_BATCH;
pub(crate) use event_loop::build;
#[cfg(async_driver)]
pub(crate) use event_loop::run_as_task;
#[cfg(feature = "blocking")]
pub(crate) use event_loop::run_on_thread;
pub use handle::Host;
pub use host_options::{HostOptions, HostStats, DEFAULT_MAX_IN_FLIGHT, DEFAULT_REFRESH};
