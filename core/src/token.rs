//! The fencing token: the (producer id, producer epoch) pair the transaction coordinator minted.

use core::cmp::Ordering;
use core::fmt;

/// The pair that Kafka's transaction coordinator granted for `transactional.id = <role>`.
///
/// Pass it to every guarded write; the broker rejects a write whose pair was superseded.
///
/// # No order
///
/// `FencingToken` has equality but deliberately no `Ord`: Kafka does not promise that producer
/// ids grow cluster-wide. Ids come from per-broker blocks, so when the role's transaction
/// coordinator moves to another broker, or the transactional id expires after a long idle
/// period, the next producer id can be *smaller*. A store that kept "the largest token seen"
/// would then refuse the new leader and accept the deposed one. Decide with:
///
/// * equality with the coordinator's current pair,
///   [`LeadershipStatus::authoritative`](crate::leadership_status::LeadershipStatus::authoritative), for
///   "is this writer the current one";
/// * the term number (the offset of the term's first lease record, which strictly grows per
///   role across every hand-over, producer-id change and epoch exhaustion) for "is this write
///   newer than the last one I accepted".
///
/// The specification's Compare (producer id first, then epoch; `NO_EPOCH` lowest) is kept as
/// [`FencingToken::spec_compare`] for ports and test vectors, with that caveat.
///
/// ```compile_fail
/// use kafka_coordination_core::FencingToken;
/// // Does not compile: tokens have no order.
/// let newer = FencingToken::new(8, 0) > FencingToken::new(7, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FencingToken {
    /// The producer id the coordinator assigned to the role's transactional id.
    pub producer_id: i64,
    /// The producer epoch of this term.
    pub producer_epoch: i16,
}

impl FencingToken {
    /// The token of a role that no member has taken. It is never authoritative.
    /// [`spec_compare`](Self::spec_compare) puts it below every minted token; that comparison
    /// is no order of leaders (see [No order](Self#no-order)).
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

    /// The specification's Compare: producer id first, then epoch; [`NO_EPOCH`](Self::NO_EPOCH)
    /// below every minted token.
    ///
    /// **Not a fencing decision.** It is exact between two pairs of one producer id (epochs
    /// only grow under one id), but across a producer-id change a newer pair can compare
    /// *less* (see [No order](Self#no-order)). Fence with
    /// [`authoritative`](crate::leadership_status::LeadershipStatus::authoritative) and the term number
    /// instead. Kept for ports of the record format and the golden `tokens.json` vectors.
    pub fn spec_compare(&self, other: &FencingToken) -> Ordering {
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
    fn spec_compare_reads_the_producer_id_first() {
        let old = FencingToken::new(7, 32766);
        let fresh = FencingToken::new(8, 0);
        assert_eq!(old.spec_compare(&fresh), Ordering::Less);
        assert_eq!(
            FencingToken::new(7, 1).spec_compare(&FencingToken::new(7, 2)),
            Ordering::Less
        );
    }

    #[test]
    fn no_epoch_is_below_every_minted_token() {
        let no = FencingToken::NO_EPOCH;
        assert_eq!(no.spec_compare(&FencingToken::new(0, 0)), Ordering::Less);
        assert_eq!(
            no.spec_compare(&FencingToken::new(i64::MIN, i16::MIN)),
            Ordering::Less
        );
        assert_eq!(format!("{}", FencingToken::new(7042, 3)), "7042/3");
        assert_eq!(format!("{}", FencingToken::NO_EPOCH), "none");
    }
}
