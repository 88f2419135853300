//! The [`Host`] handle: starts candidacies on the loop, whatever the transport's type.

use std::sync::Arc;

use crate::leadership::{Candidacy, Error};
use crate::options::Options;

use super::host_options::HostStats;

/// What a [`Host`] handle can do, whatever the transport's type.
pub(super) trait Hosting: Send + Sync {
    fn start(&self, role: &str, member: &str, options: Options) -> Result<Candidacy, Error>;
    fn hosted(&self) -> usize;
    fn stats(&self) -> HostStats;
    fn close(&self);
}

/// A handle on a host: starts candidacies on its loop. Clone it freely; the loop runs while a
/// handle lives or a candidacy it runs has not ended, then stops.
///
/// Made by `blocking::host`, `tokio_driver::host`, `smol_driver::host` or
/// `async_std_driver::host`.
#[derive(Clone)]
pub struct Host {
    pub(super) handle: Arc<HostHandle>,
}

pub(super) struct HostHandle {
    pub(super) inner: Arc<dyn Hosting>,
}

impl Drop for HostHandle {
    fn drop(&mut self) {
        self.inner.close();
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("hosted", &self.handle.inner.hosted())
            .finish()
    }
}

impl Host {
    /// Starts competing for `role` as `member` on this host's loop and returns at once, as
    /// `blocking::start` or `tokio_driver::start` do; the [`Candidacy`] and the
    /// [`Leadership`](crate::leadership::Leadership) it yields behave exactly as theirs. The host's clock
    /// drives the candidacy (a manual clock in `options` must be the host's), and its
    /// [`Options::long_poll`] is replaced by the host's shared refresh.
    ///
    /// Fails as `start` does (invalid names or options, a role this transport already
    /// contests), and with a configuration error once the host's loop has stopped.
    pub fn start(&self, role: &str, member: &str, options: Options) -> Result<Candidacy, Error> {
        self.handle.inner.start(role, member, options)
    }

    /// How many candidacies the host runs now (started and not yet ended).
    pub fn len(&self) -> usize {
        self.handle.inner.hosted()
    }

    /// What the loop is doing, as of a recent turn (published at most every 100 ms; on a manual
    /// clock at every turn, so exact once settled): how many candidacies wait for a timer, a
    /// call or a read. For dashboards and for finding where a slow host spends its time.
    pub fn stats(&self) -> HostStats {
        self.handle.inner.stats()
    }

    /// Whether the host runs no candidacy now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
