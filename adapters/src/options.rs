//! Options of [`acquire_leadership`](crate::blocking::acquire_leadership) in every flavour.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::config::Timing;

use crate::clock::{Clock, SystemClock};

/// How long a standby's read may wait for new records at most (a long poll), so that a resign
/// or a cancellation is noticed within this bound even while waiting.
pub const DEFAULT_LONG_POLL: Duration = Duration::from_secs(1);

/// Options of a candidacy. The partition count is not here: it comes from the transport,
/// where it is given once. Defaults: a 30 s lease renewed every 10 s, ranks 5 s
/// apart, the system clock, and giving up after two lease durations of transport failures
/// while not leading.
#[derive(Clone)]
pub struct Options {
    pub(crate) timing: Timing,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) give_up_after: Option<Duration>,
    pub(crate) long_poll: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timing: Timing::default(),
            clock: Arc::new(SystemClock),
            give_up_after: None,
            long_poll: DEFAULT_LONG_POLL,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("timing", &self.timing)
            .field("manual_clock", &self.clock.as_manual().is_some())
            .field("give_up_after", &self.give_up_after_or_default())
            .field("long_poll", &self.long_poll)
            .finish()
    }
}

impl Options {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a lease lasts after each write (also the role producer's transaction timeout).
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.timing.lease_duration = d;
        self
    }

    /// How often the leader renews; must be shorter than the lease.
    pub fn renew_interval(mut self, d: Duration) -> Self {
        self.timing.renew_interval = d;
        self
    }

    /// The gap between the challenge instants of consecutive ranks.
    pub fn challenge_stagger(mut self, d: Duration) -> Self {
        self.timing.challenge_stagger = d;
        self
    }

    /// The lease, renew and stagger values at once. (The drivers replace `timing.partitions`
    /// with the transport's [`partitions`](crate::StateReader::partitions).)
    pub fn timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// The clock the driver reads and waits on; a [`ManualClock`](crate::ManualClock) in tests.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// A member that is not leading ends with [`Error::Unavailable`](crate::Error::Unavailable)
    /// once its transport has failed for this long without a success. Default: two lease
    /// durations. A leader never gives up on failures; only a fence ends it.
    pub fn give_up_after(mut self, d: Duration) -> Self {
        self.give_up_after = Some(d);
        self
    }

    /// The longest a standby's read waits for new records (default 1 s). Zero turns long
    /// polling off: standbys then read only at their wake-up instants.
    pub fn long_poll(mut self, d: Duration) -> Self {
        self.long_poll = d;
        self
    }

    /// The timing as given (validated when a candidacy starts).
    pub fn timing_value(&self) -> Timing {
        self.timing
    }

    pub(crate) fn give_up_after_or_default(&self) -> Duration {
        self.give_up_after
            .unwrap_or(self.timing.lease_duration.saturating_mul(2))
    }
}
