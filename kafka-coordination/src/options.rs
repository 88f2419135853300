//! Options of [`acquire_leadership`](crate::blocking::acquire_leadership) in every flavour.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use kafka_coordination_core::machine::DEFAULT_MAX_CLOCK_SKEW;
use kafka_coordination_core::timing::Timing;

use crate::clock::{Clock, SystemClock};
pub use kafka_coordination_transport::duration::parse_duration;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use kafka_coordination_transport::duration::serde_duration;

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
    pub(crate) evict_passed_over: bool,
    pub(crate) max_clock_skew: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timing: Timing::default(),
            clock: Arc::new(SystemClock),
            give_up_after: None,
            long_poll: DEFAULT_LONG_POLL,
            evict_passed_over: false,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
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
            .field("evict_passed_over", &self.evict_passed_over)
            .field("max_clock_skew", &self.max_clock_skew)
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
    /// with the transport's [`partitions`](crate::transport::StateReader::partitions).)
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

    /// Whether this member deletes the registrations of the members it passes over (default
    /// `false`). **Every member of the role must register again when its registration
    /// disappears**, as this library's members do; a member of another implementation of the
    /// spec that does not is lost from the roster for good.
    ///
    /// Without eviction (the default) a member registered ahead of one that has held the
    /// lease is *passed over*: it stays registered, ranks skip it, and a live member that
    /// finds itself passed over registers again at the tail. A member that died for good costs
    /// one failover one stagger, once, either way (see [`Candidate`] "Ghosts").
    ///
    /// [`Candidate`]: kafka_coordination_core::machine::Candidate
    pub fn evict_passed_over(mut self, evict: bool) -> Self {
        self.evict_passed_over = evict;
        self
    }

    /// How far ahead of this process's clock another member's clock is trusted to run
    /// (default 10 s, [`DEFAULT_MAX_CLOCK_SKEW`]). A standby takes a lease to run at most a
    /// lease duration plus this much from when it first read the lease, whatever deadline the
    /// lease names: a dead holder whose clock ran hours ahead (or a record forged by any
    /// principal allowed to write the topic) leaves the role vacant for at most that long, not
    /// for hours. A healthy holder is never taken over because of it (each renewal starts a
    /// bound of its own), and safety does not depend on it: the epoch fences. See the
    /// guarantees page, "Clocks".
    pub fn max_clock_skew(mut self, d: Duration) -> Self {
        self.max_clock_skew = d;
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

/// The timing of [`Options`] as a configuration file states it (feature `serde`): every field
/// optional, durations as [`parse_duration`] reads them or as whole milliseconds. Unknown
/// fields are refused, so a typo is an error that names it.
///
/// ```toml
/// lease_duration = "30s"
/// renew_interval = "10s"
/// challenge_stagger = "5s"
/// give_up_after = "1m"
/// long_poll = "1s"
/// ```
///
/// `Options` itself deserialises from the same table (the defaults filled in). The partition
/// count is not part of it: it belongs to the topic, and comes from the transport's
/// configuration (`KafkaConfig`).
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingSettings {
    /// See [`Options::lease_duration`].
    #[serde(default, deserialize_with = "serde_duration::option")]
    pub lease_duration: Option<Duration>,
    /// See [`Options::renew_interval`].
    #[serde(default, deserialize_with = "serde_duration::option")]
    pub renew_interval: Option<Duration>,
    /// See [`Options::challenge_stagger`].
    #[serde(default, deserialize_with = "serde_duration::option")]
    pub challenge_stagger: Option<Duration>,
    /// See [`Options::give_up_after`].
    #[serde(default, deserialize_with = "serde_duration::option")]
    pub give_up_after: Option<Duration>,
    /// See [`Options::long_poll`].
    #[serde(default, deserialize_with = "serde_duration::option")]
    pub long_poll: Option<Duration>,
    /// See [`Options::max_clock_skew`].
    #[serde(default, deserialize_with = "serde_duration::option")]
    pub max_clock_skew: Option<Duration>,
}

#[cfg(feature = "serde")]
impl TimingSettings {
    /// `other`'s values where it has them, `self`'s elsewhere (layers: file, then flags).
    pub fn merge(self, other: TimingSettings) -> TimingSettings {
        TimingSettings {
            lease_duration: other.lease_duration.or(self.lease_duration),
            renew_interval: other.renew_interval.or(self.renew_interval),
            challenge_stagger: other.challenge_stagger.or(self.challenge_stagger),
            give_up_after: other.give_up_after.or(self.give_up_after),
            long_poll: other.long_poll.or(self.long_poll),
            max_clock_skew: other.max_clock_skew.or(self.max_clock_skew),
        }
    }

    /// `options` with the values that are set.
    pub fn apply(&self, mut options: Options) -> Options {
        if let Some(d) = self.lease_duration {
            options = options.lease_duration(d);
        }
        if let Some(d) = self.renew_interval {
            options = options.renew_interval(d);
        }
        if let Some(d) = self.challenge_stagger {
            options = options.challenge_stagger(d);
        }
        if let Some(d) = self.give_up_after {
            options = options.give_up_after(d);
        }
        if let Some(d) = self.long_poll {
            options = options.long_poll(d);
        }
        if let Some(d) = self.max_clock_skew {
            options = options.max_clock_skew(d);
        }
        options
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Options {
    /// The defaults, with the values of a [`TimingSettings`] table on top.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(TimingSettings::deserialize(d)?.apply(Options::new()))
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;

    #[test]
    fn options_deserialise_from_toml_over_the_defaults() {
        let o: Options =
            toml::from_str("lease_duration = \"20s\"\nrenew_interval = 4000\n").expect("valid");
        let t = o.timing_value();
        assert_eq!(t.lease_duration, Duration::from_secs(20));
        assert_eq!(t.renew_interval, Duration::from_secs(4));
        assert_eq!(t.challenge_stagger, Timing::default().challenge_stagger);
        let e = toml::from_str::<Options>("lease = \"20s\"").expect_err("unknown field");
        assert!(e.to_string().contains("unknown field `lease`"), "{e}");
        let e = toml::from_str::<Options>("long_poll = -5").expect_err("negative");
        assert!(e.to_string().contains("negative"), "{e}");
        // Layers: the later one wins where it is set.
        let file = TimingSettings {
            lease_duration: Some(Duration::from_secs(9)),
            renew_interval: Some(Duration::from_secs(3)),
            ..TimingSettings::default()
        };
        let flags = TimingSettings {
            lease_duration: Some(Duration::from_secs(6)),
            ..TimingSettings::default()
        };
        let o: Options = toml::from_str("max_clock_skew = \"2s\"").expect("valid");
        assert_eq!(o.max_clock_skew, Duration::from_secs(2));
        assert_eq!(Options::new().max_clock_skew, DEFAULT_MAX_CLOCK_SKEW);
        let merged = file.merge(flags);
        assert_eq!(merged.lease_duration, Some(Duration::from_secs(6)));
        assert_eq!(merged.renew_interval, Some(Duration::from_secs(3)));
    }
}
