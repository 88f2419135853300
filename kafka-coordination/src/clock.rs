//! Clocks: the only way drivers learn the time.

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use event_listener::{Event, EventListener, Listener};
use kafka_coordination_core::time::UnixMillis;

/// A source of wall-clock time. Drivers read the time through it and nothing else.
pub trait Clock: Send + Sync + 'static {
    /// The current wall-clock time.
    fn now(&self) -> UnixMillis;

    /// `Some` for a [`ManualClock`]: drivers then wait for the clock to be moved instead of
    /// arming real timers.
    fn as_manual(&self) -> Option<&ManualClock> {
        None
    }
}

/// The system's wall clock (`SystemTime::now()`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        let ms = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        };
        UnixMillis(ms)
    }
}

/// How long [`ManualClock::settle`] waits in real time before it reports which drivers did not
/// settle. It is a guard against a hung test, never a verdict: a settled world answers at once.
pub const SETTLE_GUARD: Duration = Duration::from_secs(120);

/// A clock that moves only when a test moves it. Cloning shares the clock.
///
/// Every driver waiting on it wakes when it is set or advanced, so a test drives leases,
/// renewals and challenges without waiting real time.
///
/// # Exact quiescence
///
/// The clock counts **changes**: every [`set`](Self::set), [`advance`](Self::advance) and
/// [`ring`](Self::ring), and every [`notify_change`](Self::notify_change) of a transport on
/// this clock ([`MemoryBroker`](crate::memory::MemoryBroker) calls it on every append, commit
/// and abort). Every driver started with this clock records the count it had acted on when it
/// went idle. [`settle`](Self::settle) returns once each live driver is idle at the current
/// count: it has seen every move of the clock and every record written so far, and it waits
/// for the next change. No sleep, no polling, no verdict that depends on thread scheduling.
///
/// ```
/// # #[cfg(all(feature = "memory", feature = "blocking"))] {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use kafka_coordination::memory::MemoryBroker;
/// use kafka_coordination::{blocking, ManualClock, Options};
///
/// let clock = ManualClock::default();
/// let broker = MemoryBroker::new(16, Arc::new(clock.clone()));
/// let options = Options::new().clock(clock.clone());
/// let a = blocking::start(broker.transport("a"), "jobs", "a", options.clone()).unwrap();
/// let b = blocking::start(broker.transport("b"), "jobs", "b", options).unwrap();
/// clock.settle().unwrap(); // both registered, one elected, the other standing by
/// let standby = if a.snapshot().token.is_some() { &b } else { &a };
/// assert_eq!(standby.snapshot().rank, Some(0));
/// # }
/// ```
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .field("changes", &self.changes())
            .finish()
    }
}

struct ManualInner {
    now: AtomicI64,
    /// Counts every change a driver may have to act on.
    changes: AtomicU64,
    /// Notified on every change.
    moved: Event,
    /// Notified when a participant went idle, got busy or ended.
    progress: Event,
    participants: Mutex<Vec<Weak<dyn Participant>>>,
}

/// A driver that [`ManualClock::settle`] waits for.
pub(crate) trait Participant: Send + Sync {
    /// `None` when settled at `changes` (idle after acting on every change up to it, or ended);
    /// otherwise what it is doing, for the report of a settle that did not finish.
    fn unsettled(&self, changes: u64) -> Option<String>;
}

/// [`ManualClock::settle`] gave up: some drivers stayed busy, or idle at an older change,
/// for the whole guard time. Usually a driver blocked in a transport call (an injected real
/// delay) or a bug; the message names each driver and what it was doing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("drivers did not settle within {guard:?} (clock at change {changes}): {}", .waiting.join("; "))]
pub struct Unsettled {
    /// The real time waited.
    pub guard: Duration,
    /// The clock's change count when it gave up.
    pub changes: u64,
    /// One line per driver that had not settled.
    pub waiting: Vec<String>,
}

impl ManualClock {
    /// A clock that reads `start`.
    pub fn new(start: UnixMillis) -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                now: AtomicI64::new(start.0),
                changes: AtomicU64::new(0),
                moved: Event::new(),
                progress: Event::new(),
                participants: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Sets the time (it may go backwards; the machine clamps that) and wakes every waiter.
    pub fn set(&self, now: UnixMillis) {
        self.inner.now.store(now.0, Ordering::SeqCst);
        self.notify_change();
    }

    /// Moves the time forward by `d` and wakes every waiter. Saturates instead of overflowing.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let _ = self
            .inner
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(ms))
            });
        self.notify_change();
    }

    /// Wakes every waiter without moving the time (drivers use it to deliver a resign).
    pub fn ring(&self) {
        self.notify_change();
    }

    /// Tells every driver on this clock that something it may act on changed (a record was
    /// written, a transaction ended): counts one change and wakes every waiter. A transport
    /// used in tests with this clock calls it after each change of its state, as
    /// [`MemoryBroker`](crate::memory::MemoryBroker) does; drivers on a manual clock rely on it
    /// to notice new records instead of long-polling the transport.
    pub fn notify_change(&self) {
        self.inner.changes.fetch_add(1, Ordering::SeqCst);
        self.inner.moved.notify(usize::MAX);
    }

    /// How many changes the clock has counted (moves, rings, transport changes).
    pub fn changes(&self) -> u64 {
        self.inner.changes.load(Ordering::SeqCst)
    }

    /// A listener that fires at the next change (a move, a ring, a transport change).
    /// Create it *before* reading [`now`](Clock::now) or [`changes`](Self::changes) to never
    /// miss one.
    pub fn listen(&self) -> EventListener {
        self.inner.moved.listen()
    }

    /// Blocks until every driver started with this clock has acted on every change so far and
    /// waits for the next one (or has ended); see [exact quiescence](Self#exact-quiescence).
    /// Gives up after [`SETTLE_GUARD`] of real time with [`Unsettled`], naming the drivers.
    pub fn settle(&self) -> Result<(), Unsettled> {
        self.settle_within(SETTLE_GUARD)
    }

    /// [`settle`](Self::settle) with another hang guard.
    pub fn settle_within(&self, guard: Duration) -> Result<(), Unsettled> {
        let deadline = Instant::now().checked_add(guard);
        loop {
            let listener = self.inner.progress.listen();
            let changes = self.changes();
            let waiting = self.unsettled(changes);
            // Settled only if nothing changed while the drivers were asked: a driver that
            // makes a change and then ends in between (a resigning member's deregistration)
            // counts as settled, and so do the drivers that change woke but whose threads
            // have not run yet (still idle at the older count). Asked again at the new count,
            // they are not.
            if waiting.is_empty() {
                if self.changes() == changes {
                    return Ok(());
                }
                continue;
            }
            let timed_out = match deadline {
                Some(d) => listener.wait_deadline(d).is_none() && Instant::now() >= d,
                None => {
                    listener.wait();
                    false
                }
            };
            if timed_out {
                let changes = self.changes();
                let waiting = self.unsettled(changes);
                if waiting.is_empty() && self.changes() == changes {
                    return Ok(());
                }
                return Err(Unsettled {
                    guard,
                    changes,
                    waiting,
                });
            }
        }
    }

    /// [`advance`](Self::advance), then [`settle`](Self::settle).
    pub fn advance_and_settle(&self, d: Duration) -> Result<(), Unsettled> {
        self.advance(d);
        self.settle()
    }

    /// How many drivers on this clock are still running (not ended).
    pub fn live_drivers(&self) -> usize {
        self.participants().len()
    }

    fn participants(&self) -> Vec<Arc<dyn Participant>> {
        let mut list = kafka_coordination_transport::lock::lock(&self.inner.participants);
        list.retain(|w| w.strong_count() > 0);
        list.iter().filter_map(Weak::upgrade).collect()
    }

    fn unsettled(&self, changes: u64) -> Vec<String> {
        self.participants()
            .iter()
            .filter_map(|p| p.unsettled(changes))
            .collect()
    }

    /// Registers a driver for [`settle`](Self::settle); it stays registered while it lives.
    pub(crate) fn register(&self, participant: Weak<dyn Participant>) {
        kafka_coordination_transport::lock::lock(&self.inner.participants).push(participant);
        self.note_progress();
    }

    /// Whether `other` is this very clock (a clone of it), not merely one at the same time.
    pub(crate) fn same_as(&self, other: &ManualClock) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Wakes every waiter without counting a change: a host whose transport call finished
    /// (it is busy, not settled, until it takes the result).
    pub(crate) fn wake_waiters(&self) {
        self.inner.moved.notify(usize::MAX);
    }

    /// A participant went idle, got busy or ended.
    pub(crate) fn note_progress(&self) {
        self.inner.progress.notify(usize::MAX);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new(UnixMillis(1_700_000_000_000))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        UnixMillis(self.inner.now.load(Ordering::SeqCst))
    }

    fn as_manual(&self) -> Option<&ManualClock> {
        Some(self)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> UnixMillis {
        (**self).now()
    }
    fn as_manual(&self) -> Option<&ManualClock> {
        (**self).as_manual()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64};

    /// Makes one change when first asked, and is ended from then on: a member that appends its
    /// deregistration and stops.
    struct ChangesThenEnds {
        clock: ManualClock,
        done: AtomicBool,
    }

    impl Participant for ChangesThenEnds {
        fn unsettled(&self, _: u64) -> Option<String> {
            if !self.done.swap(true, Ordering::SeqCst) {
                self.clock.notify_change();
            }
            None
        }
    }

    /// Idle at the change count its thread last acted on.
    struct Standby {
        idle_at: AtomicU64,
    }

    impl Participant for Standby {
        fn unsettled(&self, changes: u64) -> Option<String> {
            let at = self.idle_at.load(Ordering::SeqCst);
            (at != changes).then(|| format!("standby idle at {at}"))
        }
    }

    #[test]
    fn a_change_made_while_the_drivers_are_asked_is_waited_for() {
        let clock = ManualClock::default();
        let standby = Arc::new(Standby {
            idle_at: AtomicU64::new(clock.changes()),
        });
        let ender = Arc::new(ChangesThenEnds {
            clock: clock.clone(),
            done: AtomicBool::new(false),
        });
        let ender_dyn: Arc<dyn Participant> = ender.clone();
        let standby_dyn: Arc<dyn Participant> = standby.clone();
        clock.register(Arc::downgrade(&ender_dyn));
        clock.register(Arc::downgrade(&standby_dyn));
        // The ender changes something while settle asks, after which the standby, idle at the
        // count before that change, has not acted on it (its thread has not run): not settled,
        // however long settle waits.
        let e = clock
            .settle_within(Duration::from_millis(100))
            .expect_err("the standby has not acted on the last change");
        assert!(ender.done.load(Ordering::SeqCst));
        assert_eq!(e.waiting, vec!["standby idle at 0".to_owned()], "{e}");
        // Once it has, the clock is settled.
        standby.idle_at.store(clock.changes(), Ordering::SeqCst);
        clock.note_progress();
        clock.settle().expect("settled");
    }
}
