//! The blocking flavour: the driver runs on its own thread; calls block the caller.
//!
//! ```
//! # #[cfg(feature = "memory")] {
//! use std::time::Duration;
//! use kafka_coordination::blocking::acquire_leadership;
//! use kafka_coordination::memory::MemoryBroker;
//! use kafka_coordination::{ManualClock, Options};
//!
//! let clock = ManualClock::default();
//! let broker = MemoryBroker::new(16, std::sync::Arc::new(clock.clone()));
//! let options = Options::new().clock(clock.clone()).lease_duration(Duration::from_secs(3))
//!     .renew_interval(Duration::from_secs(1));
//! let leadership = acquire_leadership(broker.transport("a"), "scheduler", "node-a", options)?;
//! println!("leading with {}", leadership.token());
//! assert!(!leadership.is_done());
//! leadership.resign_blocking();
//! assert!(leadership.is_done() && leadership.err().is_none());
//! # }
//! # Ok::<(), kafka_coordination::Error>(())
//! ```

use std::sync::Arc;

use crate::driver::thread::run_blocking;
use crate::driver::Driver;
use crate::error::TransportError;
use crate::leadership::{Candidacy, Error, Leadership};
use crate::options::Options;
use crate::transport::{StateReader, Transport};
use crate::watch::{Watch, WatchOptions};

/// Starts competing for `role` as `member` on a new thread and returns at once. Wait on the
/// returned [`Candidacy`] (or cancel it through its [`CancelHandle`](crate::leadership::CancelHandle)).
pub fn start<T: Transport + Send + Sync + 'static>(
    transport: T,
    role: &str,
    member: &str,
    options: Options,
) -> Result<Candidacy, Error> {
    start_shared(Arc::new(transport), role, member, options)
}

/// [`start`] with a transport that is already shared.
pub fn start_shared<T: Transport + Send + Sync + ?Sized + 'static>(
    transport: Arc<T>,
    role: &str,
    member: &str,
    options: Options,
) -> Result<Candidacy, Error> {
    let (driver, candidacy) = Driver::new(transport, role, member, options)?;
    std::thread::Builder::new()
        // A thread name may not contain NUL; a role name may (it is any UTF-8).
        .name(format!("kc-{}", role.replace('\0', "?")))
        .spawn(move || run_blocking(driver))
        .map_err(|e| {
            Error::Transport(TransportError::fatal(format!(
                "could not start the driver thread: {e}"
            )))
        })?;
    Ok(candidacy)
}

/// Registers `member`, waits for its turn, mints the epoch, writes the first lease and returns
/// the [`Leadership`]; the lease is then renewed on a background thread. Blocks until elected
/// or until the candidacy fails (transport failing for longer than the give-up time, invalid
/// options, a configuration error).
pub fn acquire_leadership<T: Transport + Send + Sync + 'static>(
    transport: T,
    role: &str,
    member: &str,
    options: Options,
) -> Result<Leadership, Error> {
    start(transport, role, member, options)?.elected_blocking()
}

/// Starts a [`Host`](crate::host::Host): many candidacies on one thread of their own, with
/// at most [`HostOptions::max_in_flight`](crate::host::HostOptions::max_in_flight) transport
/// calls in flight. Start candidacies with
/// [`Host::start`](crate::host::Host::start).
pub fn host<T: Transport + Send + Sync + ?Sized + 'static>(
    transport: Arc<T>,
    options: crate::host::HostOptions,
) -> Result<crate::host::Host, Error> {
    let (host, core) = crate::host::build(transport, options)?;
    std::thread::Builder::new()
        .name("kc-host".to_owned())
        .spawn(move || crate::host::run_on_thread(core))
        .map_err(|e| {
            Error::Transport(TransportError::fatal(format!(
                "could not start the host's thread: {e}"
            )))
        })?;
    Ok(host)
}

pub use crate::describe::{describe_leadership, describe_role_state};
/// Watches `role`'s leadership from any process, member or not: a [`Watch`] whose loop runs on
/// a thread of its own; iterate it (blocking) or poll it as a `Stream`. See
/// [`watch`](crate::watch) for what it reports.
pub fn watch<S: StateReader + Send + Sync + 'static>(
    reader: S,
    role: &str,
    options: WatchOptions,
) -> Result<Watch, Error> {
    crate::watch::watch_on_thread(Arc::new(reader), role, options)
}
