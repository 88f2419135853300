//! What the handles and the transport's callbacks share with the loop: the doorbell, the candidacies
//! started and not yet taken, and the calls finished and not yet taken.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use event_listener::{Event, EventListener};

use crate::clock::{Clock, ManualClock};
use crate::driver::Driver;
use crate::error::TransportError;
use crate::leadership::{Candidacy, Doorbell, Error, Wake};
use crate::options::Options;
use crate::transport::{ReadBatch, Transport};
use kafka_coordination_transport::lock::lock;

use super::handle::Hosting;
use super::host_options::HostStats;

/// The host's doorbell: rung by the transport's threads when a call finished, by [`Host::start`], and by
/// a hosted candidacy's cancel or resign (which also marks that some candidacy wants
/// attention, so the loop looks at all of them only then).
#[derive(Debug, Default)]
pub(crate) struct Bell {
    pub(super) event: Event,
    pub(super) cancels: AtomicBool,
}

impl Bell {
    pub(crate) fn listen(&self) -> EventListener {
        self.event.listen()
    }
    pub(super) fn ring(&self) {
        self.event.notify(usize::MAX);
    }
    pub(crate) fn ring_for_cancel(&self) {
        self.cancels.store(true, Ordering::SeqCst);
        self.ring();
    }
    pub(super) fn take_cancels(&self) -> bool {
        self.cancels.swap(false, Ordering::SeqCst)
    }
}

impl Wake for Bell {
    fn listen(&self) -> EventListener {
        Bell::listen(self)
    }
    fn ring(&self) {
        self.ring_for_cancel();
    }
}

/// A finished transport call.
pub(super) enum Done {
    Call {
        slot: usize,
        gen: u64,
    },
    Read {
        partition: i32,
        outcome: Result<ReadBatch, TransportError>,
    },
}

/// What the handles and the transport's callbacks share with the loop.
pub(super) struct Inbox<T: Transport + Send + Sync + ?Sized + 'static> {
    pub(super) transport: Arc<T>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) spread_renewals: bool,
    pub(super) bell: Arc<Bell>,
    pub(super) pending: Mutex<Vec<Driver<T>>>,
    pub(super) done: Mutex<Vec<Done>>,
    /// Candidacies started and not yet ended.
    pub(super) hosted: AtomicUsize,
    /// Some handle on the host lives.
    pub(super) open: AtomicBool,
    /// The loop has stopped; nothing new is taken.
    pub(super) closed: AtomicBool,
    /// On a manual clock: the change count the loop had acted on when it went idle.
    pub(super) idle_seen: Mutex<Option<u64>>,
    /// Published at the end of every turn.
    pub(super) stats: Mutex<HostStats>,
    /// Partitions whose tail moved since the loop last looked ([`StateReader::on_tailed`]).
    ///
    /// [`StateReader::on_tailed`]: crate::transport::StateReader::on_tailed
    pub(super) tail_news: Mutex<Vec<i32>>,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Inbox<T> {
    pub(super) fn manual(&self) -> Option<&ManualClock> {
        self.clock.as_manual()
    }

    /// Wakes the loop. On a manual clock a change the loop acts on is counted (a new
    /// candidacy); a finished call is not a change (the loop is busy until it takes it).
    pub(super) fn wake(&self, counted: bool) {
        match self.manual() {
            Some(c) if counted => c.ring(),
            Some(c) => c.wake_waiters(),
            None => self.bell.ring(),
        }
    }

    pub(super) fn listen(&self) -> EventListener {
        match self.manual() {
            Some(c) => c.listen(),
            None => self.bell.listen(),
        }
    }

    pub(super) fn finished(&self, done: Vec<Done>) {
        lock(&self.done).extend(done);
        self.wake(false);
    }

    pub(super) fn set_idle(&self, seen: Option<u64>) {
        let mut idle = lock(&self.idle_seen);
        if *idle != seen {
            *idle = seen;
            drop(idle);
            if let Some(c) = self.manual() {
                c.note_progress();
            }
        }
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> crate::clock::Participant for Inbox<T> {
    fn unsettled(&self, changes: u64) -> Option<String> {
        if self.closed.load(Ordering::SeqCst) || *lock(&self.idle_seen) == Some(changes) {
            return None;
        }
        Some(format!(
            "a host of {} candidacies: busy (transport calls under way or acting on a change)",
            self.hosted.load(Ordering::SeqCst)
        ))
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Hosting for Inbox<T> {
    fn start(&self, role: &str, member: &str, options: Options) -> Result<Candidacy, Error> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Transport(TransportError::config(
                "this host has stopped (its runtime went away); start the candidacy on a new host",
            )));
        }
        match (options.clock.as_manual(), self.manual()) {
            (Some(a), Some(b)) if !a.same_as(b) => {
                return Err(Error::Transport(TransportError::config(
                    "the options name another manual clock than the host's: give the host \
                     (HostOptions::clock) and its candidacies the same clock",
                )))
            }
            (Some(_), None) => {
                return Err(Error::Transport(TransportError::config(
                    "the options name a manual clock but the host runs on the system clock: \
                     give it the same clock with HostOptions::clock",
                )))
            }
            _ => {}
        }
        let options = Options {
            clock: self.clock.clone(),
            ..options
        };
        let doorbell = match self.manual() {
            Some(c) => Doorbell::Clock(c.clone()),
            None => Doorbell::Runner(self.bell.clone()),
        };
        let (mut driver, candidacy) = Driver::with_doorbell(
            self.transport.clone(),
            role,
            member,
            options,
            Some(doorbell),
        )?;
        if self.spread_renewals {
            driver.spread_renewals();
        }
        self.hosted.fetch_add(1, Ordering::SeqCst);
        lock(&self.pending).push(driver);
        self.wake(true);
        Ok(candidacy)
    }

    fn hosted(&self) -> usize {
        self.hosted.load(Ordering::SeqCst)
    }

    fn stats(&self) -> HostStats {
        *lock(&self.stats)
    }

    fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
        self.wake(true);
    }
}
