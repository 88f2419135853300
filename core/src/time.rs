//! Wall-clock instants.
//!
//! The core never reads a clock. Every operation that depends on the time takes `now` as a
//! [`UnixMillis`]. Lease deadlines are written into records and compared by other processes, so
//! the time here is wall time (milliseconds since the Unix epoch), not a monotonic instant.

use core::fmt;
use core::time::Duration;

/// Milliseconds since the Unix epoch (1970-01-01T00:00:00Z), as written in records.
///
/// Arithmetic with [`Duration`] saturates at `i64::MIN` / `i64::MAX` instead of overflowing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(pub i64);

impl UnixMillis {
    /// The instant `0`, 1970-01-01T00:00:00Z.
    pub const EPOCH: UnixMillis = UnixMillis(0);

    /// The raw millisecond count.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// `self + d`, saturating at `i64::MAX`.
    pub fn saturating_add(self, d: Duration) -> UnixMillis {
        UnixMillis(self.0.saturating_add(duration_millis(d)))
    }

    /// `self - d`, saturating at `i64::MIN`.
    pub fn saturating_sub(self, d: Duration) -> UnixMillis {
        UnixMillis(self.0.saturating_sub(duration_millis(d)))
    }

    /// The time from `earlier` to `self`, or zero when `earlier` is later than `self`.
    pub fn since(self, earlier: UnixMillis) -> Duration {
        let diff = self.0.saturating_sub(earlier.0);
        if diff <= 0 {
            Duration::ZERO
        } else {
            Duration::from_millis(diff as u64)
        }
    }
}

impl core::ops::Add<Duration> for UnixMillis {
    type Output = UnixMillis;
    fn add(self, rhs: Duration) -> UnixMillis {
        self.saturating_add(rhs)
    }
}

impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// Whole milliseconds of `d`, saturating at `i64::MAX`.
pub(crate) fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(
            UnixMillis(i64::MAX - 1) + Duration::from_millis(5),
            UnixMillis(i64::MAX)
        );
        assert_eq!(
            UnixMillis(i64::MIN + 1).saturating_sub(Duration::from_millis(5)),
            UnixMillis(i64::MIN)
        );
        assert_eq!(UnixMillis(10).since(UnixMillis(20)), Duration::ZERO);
        assert_eq!(
            UnixMillis(20).since(UnixMillis(10)),
            Duration::from_millis(10)
        );
    }
}
