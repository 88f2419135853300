//! The fencing token: the (producer id, producer epoch) pair the transaction coordinator minted.

use core::cmp::Ordering;
use core::fmt;

/// The pair that Kafka's transaction coordinator granted for `transactional.id = <role>`.
///
/// Pass it to every guarded write; the broker rejects a write whose pair was superseded.
///
/// # Order
///
/// Tokens compare by producer id first, then by epoch. The epoch is an `i16` and, at exhaustion
/// (epoch 32766), Kafka hands out a fresh producer id with epoch 0, so comparing epochs alone
/// would call a stale writer newer after about 32,000 leadership changes.
///
/// **Caveat.** Kafka does not promise that producer ids grow cluster-wide: ids come from
/// per-broker blocks, so when the role's transaction coordinator moves to another broker, or the
/// transactional id expires after a long idle period, the next producer id can be *smaller*. The
/// order across a producer-id change is therefore this library's convention, not a fact from
/// Kafka. Equality is exact: the broker's current pair is the only authoritative one, which is
/// what [`LeadershipStatus::authoritative`](crate::describe::LeadershipStatus::authoritative)
/// checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FencingToken {
    /// The producer id the coordinator assigned to the role's transactional id.
    pub producer_id: i64,
    /// The producer epoch of this term.
    pub producer_epoch: i16,
}

impl FencingToken {
    /// The token of a role that no member has taken. It ranks below every minted token and is
    /// never authoritative.
    pub const NO_EPOCH: FencingToken = FencingToken {
        producer_id: -1,
        producer_epoch: -1,
    };

    /// A token for a pair the coordinator granted.
    pub const fn new(producer_id: i64, producer_epoch: i16) -> FencingToken {
        FencingToken {
            producer_id,
            producer_epoch,
        }
    }

    /// Whether this is [`FencingToken::NO_EPOCH`].
    pub fn is_no_epoch(&self) -> bool {
        *self == FencingToken::NO_EPOCH
    }
}

impl Ord for FencingToken {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.is_no_epoch(), other.is_no_epoch()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => self
                .producer_id
                .cmp(&other.producer_id)
                .then(self.producer_epoch.cmp(&other.producer_epoch)),
        }
    }
}

impl PartialOrd for FencingToken {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for FencingToken {
    /// `7042/3` for producer id 7042, epoch 3; `none` for [`FencingToken::NO_EPOCH`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_no_epoch() {
            f.write_str("none")
        } else {
            write!(f, "{}/{}", self.producer_id, self.producer_epoch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    #[test]
    fn producer_id_is_read_first() {
        let old = FencingToken::new(7, 32766);
        let fresh = FencingToken::new(8, 0);
        assert!(old < fresh);
        assert!(FencingToken::new(7, 1) < FencingToken::new(7, 2));
    }

    #[test]
    fn no_epoch_is_below_every_minted_token() {
        assert!(FencingToken::NO_EPOCH < FencingToken::new(0, 0));
        assert!(FencingToken::NO_EPOCH < FencingToken::new(i64::MIN, i16::MIN));
        assert_eq!(format!("{}", FencingToken::new(7042, 3)), "7042/3");
        assert_eq!(format!("{}", FencingToken::NO_EPOCH), "none");
    }
}
