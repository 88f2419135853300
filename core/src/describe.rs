//! A third party's view of a role: who holds the current pair, and is a given token it?

use alloc::string::String;
use core::fmt;

use crate::time::UnixMillis;
use crate::token::FencingToken;

/// The state of a transactional id at its coordinator, as DescribeTransactions reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TransactionState {
    /// No transaction is open.
    Empty,
    /// A transaction is open (a lease write in flight, or a guarded write).
    Ongoing,
    /// A commit is being written.
    PrepareCommit,
    /// An abort is being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
    /// The coordinator is bumping the epoch to fence the current producer.
    PrepareEpochFence,
    /// The transactional id is being removed.
    Dead,
    /// A state this library does not know, as the broker spelled it.
    Other(String),
}

impl TransactionState {
    /// Parses the broker's spelling (`"Ongoing"`, `"CompleteCommit"`, ...).
    pub fn parse(s: &str) -> TransactionState {
        match s {
            "Empty" => TransactionState::Empty,
            "Ongoing" => TransactionState::Ongoing,
            "PrepareCommit" => TransactionState::PrepareCommit,
            "PrepareAbort" => TransactionState::PrepareAbort,
            "CompleteCommit" => TransactionState::CompleteCommit,
            "CompleteAbort" => TransactionState::CompleteAbort,
            "PrepareEpochFence" => TransactionState::PrepareEpochFence,
            "Dead" => TransactionState::Dead,
            other => TransactionState::Other(String::from(other)),
        }
    }

    /// The broker's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            TransactionState::Empty => "Empty",
            TransactionState::Ongoing => "Ongoing",
            TransactionState::PrepareCommit => "PrepareCommit",
            TransactionState::PrepareAbort => "PrepareAbort",
            TransactionState::CompleteCommit => "CompleteCommit",
            TransactionState::CompleteAbort => "CompleteAbort",
            TransactionState::PrepareEpochFence => "PrepareEpochFence",
            TransactionState::Dead => "Dead",
            TransactionState::Other(s) => s,
        }
    }
}

impl fmt::Display for TransactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who the coordinator considers the current holder of a role's transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadershipStatus {
    /// The current pair, or [`FencingToken::NO_EPOCH`] when no member ever took the role.
    pub token: FencingToken,
    /// The transaction state, `None` when no member ever took the role.
    pub state: Option<TransactionState>,
    /// When the open transaction began, by the coordinator's clock (DescribeTransactions
    /// reports it); `None` when no transaction is open or the transport does not say. A
    /// standby uses it to tell a holder that died in the middle of a write from a renewal in
    /// flight (see [`Candidate`](crate::machine::Candidate), "Stalled reads").
    pub transaction_started: Option<UnixMillis>,
}

impl LeadershipStatus {
    /// The status of a role the coordinator has never seen (TRANSACTIONAL_ID_NOT_FOUND).
    pub const NOT_FOUND: LeadershipStatus = LeadershipStatus {
        token: FencingToken::NO_EPOCH,
        state: None,
        transaction_started: None,
    };

    /// The status from a DescribeTransactions answer.
    pub fn described(producer_id: i64, producer_epoch: i16, state: TransactionState) -> Self {
        LeadershipStatus {
            token: FencingToken::new(producer_id, producer_epoch),
            state: Some(state),
            transaction_started: None,
        }
    }

    /// The same status, with the start of its open transaction (by the coordinator's clock).
    pub fn with_transaction_started(mut self, at: UnixMillis) -> Self {
        self.transaction_started = Some(at);
        self
    }

    /// Whether a writer holding `token` is authoritative: true only when `token` is exactly the
    /// coordinator's current pair, and never for [`FencingToken::NO_EPOCH`] or while the
    /// coordinator is fencing that pair (`PrepareEpochFence`, `Dead`).
    ///
    /// The answer is a snapshot: a challenger may supersede the pair right after the request.
    /// The broker's fence, not this check, is what stops a deposed writer's writes.
    ///
    /// After a member's resign returned without error, its pair is never authoritative again:
    /// the member minted one more epoch on its way out. (The current pair is then that exit
    /// pair, which no member was handed, until a successor acquires.) To order writes across
    /// terms, compare the leader's term number, never tokens: producer ids are not ordered.
    pub fn authoritative(&self, token: &FencingToken) -> bool {
        !token.is_no_epoch()
            && *token == self.token
            && !matches!(
                self.state,
                Some(TransactionState::PrepareEpochFence) | Some(TransactionState::Dead) | None
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_current_pair_is_authoritative() {
        let s = LeadershipStatus::described(7, 3, TransactionState::CompleteCommit);
        assert!(s.authoritative(&FencingToken::new(7, 3)));
        assert!(!s.authoritative(&FencingToken::new(7, 2)));
        assert!(!s.authoritative(&FencingToken::new(8, 3)));
        assert!(!s.authoritative(&FencingToken::NO_EPOCH));
        assert!(!LeadershipStatus::NOT_FOUND.authoritative(&FencingToken::NO_EPOCH));
        let fencing = LeadershipStatus::described(7, 3, TransactionState::PrepareEpochFence);
        assert!(!fencing.authoritative(&FencingToken::new(7, 3)));
    }

    #[test]
    fn states_round_trip() {
        for s in [
            "Empty",
            "Ongoing",
            "PrepareEpochFence",
            "CompleteAbort",
            "Weird",
        ] {
            assert_eq!(TransactionState::parse(s).as_str(), s);
        }
    }
}
