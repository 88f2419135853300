//! The timing of leases and challenges, validated once.

use core::time::Duration;

/// How long leases last, how often the leader renews, how far apart standbys challenge, and how
/// many partitions `__coordination_state` has.
///
/// The lease decides only *when* a standby stops waiting; safety comes from the broker's fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timing {
    /// Partitions of `__coordination_state`: every member must pass the topic's real count.
    pub partitions: i32,
    /// How long a lease lasts after each write. Also the transaction timeout of the role's
    /// producer, so the coordinator aborts a dead holder's open lease write after this long.
    pub lease_duration: Duration,
    /// How often the leader writes a fresh lease. Must be shorter than `lease_duration`.
    pub renew_interval: Duration,
    /// The gap between the challenge instants of consecutive ranks.
    pub challenge_stagger: Duration,
}

impl Default for Timing {
    /// 16 partitions, a 30 s lease renewed every 10 s, ranks 5 s apart.
    fn default() -> Self {
        Timing {
            partitions: 16,
            lease_duration: Duration::from_secs(30),
            renew_interval: Duration::from_secs(10),
            challenge_stagger: Duration::from_secs(5),
        }
    }
}

/// The longest lease: Kafka's `transaction.timeout.ms` is an `i32` of milliseconds.
pub const MAX_LEASE: Duration = Duration::from_millis(i32::MAX as u64);

/// A [`Timing`] that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// `partitions` is zero or negative.
    #[error("partitions must be positive, got {partitions}")]
    Partitions {
        /// The value given.
        partitions: i32,
    },
    /// `lease_duration` is under one millisecond (records carry milliseconds).
    #[error("lease_duration must be at least 1 ms, got {lease:?}")]
    LeaseTooShort {
        /// The value given.
        lease: Duration,
    },
    /// `lease_duration` does not fit Kafka's `transaction.timeout.ms` (an i32 of ms).
    #[error("lease_duration {lease:?} exceeds {MAX_LEASE:?}, the largest transaction timeout Kafka accepts")]
    LeaseTooLong {
        /// The value given.
        lease: Duration,
    },
    /// `renew_interval` is zero.
    #[error("renew_interval must be positive, got {renew:?}")]
    RenewZero {
        /// The value given.
        renew: Duration,
    },
    /// `renew_interval` is not shorter than `lease_duration`.
    #[error("renew_interval {renew:?} must be shorter than lease_duration {lease:?}")]
    RenewNotBelowLease {
        /// The renew interval given.
        renew: Duration,
        /// The lease duration given.
        lease: Duration,
    },
    /// `challenge_stagger` is longer than a day; almost surely a unit mistake.
    #[error("challenge_stagger {stagger:?} is over a day; pass a Duration in the intended unit")]
    StaggerTooLong {
        /// The value given.
        stagger: Duration,
    },
}

impl Timing {
    /// Checks every constraint and returns the timing unchanged when it holds.
    pub fn validate(self) -> Result<Timing, TimingError> {
        let Timing {
            partitions,
            lease_duration: lease,
            renew_interval: renew,
            challenge_stagger,
        } = self;
        if partitions <= 0 {
            return Err(TimingError::Partitions { partitions });
        }
        if lease < Duration::from_millis(1) {
            return Err(TimingError::LeaseTooShort { lease });
        }
        if lease > MAX_LEASE {
            return Err(TimingError::LeaseTooLong { lease });
        }
        if renew.is_zero() {
            return Err(TimingError::RenewZero { renew });
        }
        if renew >= lease {
            return Err(TimingError::RenewNotBelowLease { renew, lease });
        }
        if challenge_stagger > Duration::from_secs(86_400) {
            return Err(TimingError::StaggerTooLong {
                stagger: challenge_stagger,
            });
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Timing::default().validate(), Ok(Timing::default()));
    }

    #[test]
    fn each_violation_names_its_field() {
        let t = Timing::default();
        assert_eq!(
            Timing { partitions: 0, ..t }.validate(),
            Err(TimingError::Partitions { partitions: 0 })
        );
        assert_eq!(
            Timing {
                lease_duration: Duration::ZERO,
                ..t
            }
            .validate(),
            Err(TimingError::LeaseTooShort {
                lease: Duration::ZERO
            })
        );
        assert_eq!(
            Timing {
                renew_interval: Duration::ZERO,
                ..t
            }
            .validate(),
            Err(TimingError::RenewZero {
                renew: Duration::ZERO
            })
        );
        let e = Timing {
            renew_interval: Duration::from_secs(30),
            ..t
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            alloc::format!("{e}"),
            "renew_interval 30s must be shorter than lease_duration 30s"
        );
        assert!(matches!(
            Timing {
                lease_duration: MAX_LEASE + Duration::from_millis(1),
                ..t
            }
            .validate(),
            Err(TimingError::LeaseTooLong { .. })
        ));
    }
}
