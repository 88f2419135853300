//! Clocks: the only way drivers learn the time.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use event_listener::{Event, EventListener};
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

/// A clock that moves only when a test moves it. Cloning shares the clock.
///
/// Every driver waiting on it wakes when it is set or advanced, so a test drives leases,
/// renewals and challenges without waiting real time.
#[derive(Clone, Debug)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug)]
struct ManualInner {
    now: AtomicI64,
    moved: Event,
}

impl ManualClock {
    /// A clock that reads `start`.
    pub fn new(start: UnixMillis) -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                now: AtomicI64::new(start.0),
                moved: Event::new(),
            }),
        }
    }

    /// Sets the time (it may go backwards; the machine clamps that) and wakes every waiter.
    pub fn set(&self, now: UnixMillis) {
        self.inner.now.store(now.0, Ordering::SeqCst);
        self.inner.moved.notify(usize::MAX);
    }

    /// Moves the time forward by `d` and wakes every waiter.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.inner.now.fetch_add(ms, Ordering::SeqCst);
        self.inner.moved.notify(usize::MAX);
    }

    /// Wakes every waiter without moving the time (drivers use it to deliver a resign).
    pub fn ring(&self) {
        self.inner.moved.notify(usize::MAX);
    }

    /// A listener that fires at the next [`set`](Self::set) or [`advance`](Self::advance).
    /// Create it *before* reading [`now`](Clock::now) to never miss a move.
    pub fn listen(&self) -> EventListener {
        self.inner.moved.listen()
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
