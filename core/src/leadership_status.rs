//! A third party's view of a role: who holds the current pair, and is a given token it?

use alloc::string::String;
use core::fmt;

use crate::record::Lease;
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

/// Who the coordinator considers the current holder of a role's transactional id: the answer
/// any third party gets with one request. A member's own view of where it stands is
/// [`machine::Status`](crate::machine::Status).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// The cluster's finalized `transaction.version` feature level, as the coordinator's broker
    /// announced it (ApiVersions) when the transport connected to it: 2 or more means clients
    /// that opt into transaction version 2 (KIP-890) get a new epoch at the end of every
    /// transaction. `None` when the transport does not know (the memory broker, a broker
    /// without feature flags) and in [`NOT_FOUND`](Self::NOT_FOUND), which stays one value. A
    /// level changed later on the cluster shows on a new connection.
    pub transaction_version: Option<i16>,
}

/// How the pair a lease record names stands to the coordinator's current pair: the reading
/// [`LeadershipStatus::relation`] gives `describe` and the CLI.
///
/// This is a reading of evidence for people and tools, never a fencing decision: only the
/// broker's fence decides which writes land, and only [`LeadershipStatus::authoritative`] with
/// the writer's own pair says whether a writer is current.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PairRelation {
    /// The lease's pair is the coordinator's current pair, and the coordinator is not fencing
    /// it.
    Current,
    /// The lease's holder commits with transaction version 2 (KIP-890, EndTxn v5 or newer on a
    /// cluster at `transaction.version` 2 or more): the coordinator gives its producer a new
    /// epoch at the end of every transaction, so the pair written in the lease is behind the
    /// coordinator's by `by` epochs of the same producer id, with no challenge in sight (the
    /// lease is live, and the coordinator shows a committed or open transaction, not an
    /// InitProducerId's fresh `Empty` or a fence).
    ///
    /// **The lease's pair is then not authoritative for fencing**: a guarded write must carry
    /// the producer's current pair (the one its client holds now), and the broker refuses the
    /// lease's. Nothing here proves the holder is that producer's only user; it says the
    /// evidence fits the holder's own commits better than a rival's challenge.
    CommitsLater {
        /// How many epochs the coordinator's pair is ahead of the lease's (one per
        /// transaction the producer ended since it wrote the lease).
        by: u16,
    },
    /// The lease's pair is not the current one, and nothing explains it as the holder's own
    /// commits: a challenger took the role or is taking it, the coordinator is fencing the
    /// pair, the producer id changed, or the cluster does not run transaction version 2.
    Superseded,
}

impl PairRelation {
    /// Whether the lease's pair is the coordinator's current pair.
    pub fn is_current(&self) -> bool {
        matches!(self, PairRelation::Current)
    }
}

impl fmt::Display for PairRelation {
    /// The verdict in one line; [`note`](PairRelation::note) has the explanation that goes
    /// with it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PairRelation::Current => f.write_str("the lease's pair is the current one"),
            PairRelation::CommitsLater { by } => write!(
                f,
                "the lease's pair is {by} epoch(s) behind the current one of the same producer \
                 (its client commits with transaction version 2)"
            ),
            PairRelation::Superseded => {
                f.write_str("the lease's pair is NOT the current one (superseded)")
            }
        }
    }
}

impl PairRelation {
    /// What a reader should know beside the verdict, if anything.
    pub fn note(&self) -> Option<&'static str> {
        match self {
            PairRelation::CommitsLater { .. } => Some(
                "the leader's client commits with transaction version 2 (KIP-890, EndTxn v5 or \
                 newer): the coordinator gives its producer a new epoch at every commit, so the \
                 pair written in its lease falls behind at each renewal. No rival's challenge is \
                 visible. The lease's pair does not fence: a guarded write must carry the \
                 producer's current pair.",
            ),
            _ => None,
        }
    }

    /// A short name for machine-readable output: `current`, `commits_later`, `superseded`.
    pub fn name(&self) -> &'static str {
        match self {
            PairRelation::Current => "current",
            PairRelation::CommitsLater { .. } => "commits_later",
            PairRelation::Superseded => "superseded",
        }
    }
}

impl LeadershipStatus {
    /// The status of a role the coordinator has never seen (TRANSACTIONAL_ID_NOT_FOUND).
    pub const NOT_FOUND: LeadershipStatus = LeadershipStatus {
        token: FencingToken::NO_EPOCH,
        state: None,
        transaction_started: None,
        transaction_version: None,
    };

    /// The status from a DescribeTransactions answer.
    pub fn described(producer_id: i64, producer_epoch: i16, state: TransactionState) -> Self {
        LeadershipStatus {
            token: FencingToken::new(producer_id, producer_epoch),
            state: Some(state),
            transaction_started: None,
            transaction_version: None,
        }
    }

    /// The same status, with the cluster's finalized `transaction.version` level.
    pub fn with_transaction_version(mut self, level: i16) -> Self {
        self.transaction_version = Some(level);
        self
    }

    /// Whether the cluster runs transaction version 2 or newer (KIP-890), as far as the
    /// transport knows ([`transaction_version`](Self::transaction_version)).
    pub fn transaction_version_2(&self) -> bool {
        self.transaction_version.is_some_and(|v| v >= 2)
    }

    /// How `lease_pair`, the pair a lease record names, stands to the current pair;
    /// `lease_live` says whether that lease's deadline is still ahead (by the reader's clock).
    ///
    /// * [`Current`](PairRelation::Current) when [`authoritative`](Self::authoritative)
    ///   holds for it.
    /// * [`CommitsLater`](PairRelation::CommitsLater) when the cluster runs transaction
    ///   version 2, the producer id is the same, the coordinator's epoch is ahead, the lease
    ///   is live, and the coordinator's state is `CompleteCommit`, `Ongoing` or
    ///   `PrepareCommit`: a TV2 client's own transactions move its epoch that way, and a
    ///   challenge shows otherwise (an InitProducerId leaves `Empty`, a fence
    ///   `PrepareEpochFence` and then an abort; members of the spec challenge only an expired
    ///   lease).
    /// * [`Superseded`](PairRelation::Superseded) otherwise: a different producer id, an
    ///   epoch that is not ahead, `Empty`, an abort, a fence, an expired lease, or a cluster
    ///   not known to run transaction version 2.
    ///
    /// A reading of a moment, not a proof: a rival's first lease is readable a moment after
    /// its commit, so within that moment a fresh takeover can read as `CommitsLater` (only on
    /// a TV2 cluster, and only if the old lease still looks live to the reader's clock).
    pub fn relation(&self, lease_pair: &FencingToken, lease_live: bool) -> PairRelation {
        if self.authoritative(lease_pair) {
            return PairRelation::Current;
        }
        let same_producer = !lease_pair.is_no_epoch()
            && !self.token.is_no_epoch()
            && lease_pair.producer_id == self.token.producer_id;
        let ahead = i32::from(self.token.producer_epoch) - i32::from(lease_pair.producer_epoch);
        let own_transactions = matches!(
            self.state,
            Some(TransactionState::CompleteCommit)
                | Some(TransactionState::Ongoing)
                | Some(TransactionState::PrepareCommit)
        );
        match u16::try_from(ahead) {
            Ok(by)
                if by > 0
                    && same_producer
                    && lease_live
                    && own_transactions
                    && self.transaction_version_2() =>
            {
                PairRelation::CommitsLater { by }
            }
            _ => PairRelation::Superseded,
        }
    }

    /// [`relation`](Self::relation) for a lease record read from the state topic, judged live
    /// at `now` (its deadline is still ahead).
    pub fn relation_to_lease(&self, lease: &Lease, now: UnixMillis) -> PairRelation {
        self.relation(&lease.token, now < lease.deadline)
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
    use alloc::string::ToString;

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

    fn tv2(pid: i64, epoch: i16, state: TransactionState) -> LeadershipStatus {
        LeadershipStatus::described(pid, epoch, state).with_transaction_version(2)
    }

    #[test]
    fn the_current_pair_is_current_whatever_the_transaction_version() {
        let lease = FencingToken::new(7, 3);
        for s in [
            LeadershipStatus::described(7, 3, TransactionState::CompleteCommit),
            tv2(7, 3, TransactionState::Ongoing),
            tv2(7, 3, TransactionState::Empty),
        ] {
            assert_eq!(s.relation(&lease, true), PairRelation::Current);
            assert_eq!(s.relation(&lease, false), PairRelation::Current);
            assert!(s.relation(&lease, true).is_current());
        }
        // A pair being fenced is not current, also under TV2.
        let fencing = tv2(7, 3, TransactionState::PrepareEpochFence);
        assert_eq!(fencing.relation(&lease, true), PairRelation::Superseded);
    }

    #[test]
    fn a_tv2_leaders_own_commits_are_told_apart_from_a_challenge() {
        let lease = FencingToken::new(7, 3);
        // Three commits of the leader's TV2 client since it wrote the lease.
        assert_eq!(
            tv2(7, 6, TransactionState::CompleteCommit).relation(&lease, true),
            PairRelation::CommitsLater { by: 3 }
        );
        // Its next transaction open, or its commit being written.
        assert_eq!(
            tv2(7, 4, TransactionState::Ongoing).relation(&lease, true),
            PairRelation::CommitsLater { by: 1 }
        );
        assert_eq!(
            tv2(7, 5, TransactionState::PrepareCommit).relation(&lease, true),
            PairRelation::CommitsLater { by: 2 }
        );
        // Version 3 or newer counts too.
        assert_eq!(
            LeadershipStatus::described(7, 4, TransactionState::CompleteCommit)
                .with_transaction_version(3)
                .relation(&lease, true),
            PairRelation::CommitsLater { by: 1 }
        );
    }

    #[test]
    fn anything_else_ahead_of_the_lease_is_superseded() {
        let lease = FencingToken::new(7, 3);
        let superseded = |s: LeadershipStatus, live: bool| {
            assert_eq!(s.relation(&lease, live), PairRelation::Superseded, "{s:?}");
        };
        // Without TV2 on the cluster (or not known), a moved epoch is a challenge's.
        superseded(
            LeadershipStatus::described(7, 6, TransactionState::CompleteCommit),
            true,
        );
        superseded(
            LeadershipStatus::described(7, 6, TransactionState::CompleteCommit)
                .with_transaction_version(1),
            true,
        );
        superseded(
            LeadershipStatus::described(7, 6, TransactionState::CompleteCommit)
                .with_transaction_version(0),
            true,
        );
        // An InitProducerId (a challenger's acquire) leaves Empty; a fence and its abort.
        superseded(tv2(7, 4, TransactionState::Empty), true);
        superseded(tv2(7, 4, TransactionState::PrepareEpochFence), true);
        superseded(tv2(7, 5, TransactionState::PrepareAbort), true);
        superseded(tv2(7, 5, TransactionState::CompleteAbort), true);
        superseded(tv2(7, 5, TransactionState::Dead), true);
        superseded(tv2(7, 5, TransactionState::Other("Weird".into())), true);
        // An expired lease: a challenger may have taken the role.
        superseded(tv2(7, 6, TransactionState::CompleteCommit), false);
        superseded(tv2(7, 4, TransactionState::Ongoing), false);
        // Another producer id (exhaustion, an expired transactional id, ...).
        superseded(tv2(8, 6, TransactionState::CompleteCommit), true);
        superseded(tv2(6, 6, TransactionState::CompleteCommit), true);
        // An epoch behind the lease's, or the role never taken.
        superseded(tv2(7, 2, TransactionState::CompleteCommit), true);
        superseded(LeadershipStatus::NOT_FOUND, true);
        superseded(
            LeadershipStatus::NOT_FOUND.with_transaction_version(2),
            true,
        );
        // A lease that names no pair.
        assert_eq!(
            tv2(7, 6, TransactionState::CompleteCommit).relation(&FencingToken::NO_EPOCH, true),
            PairRelation::Superseded
        );
    }

    #[test]
    fn a_lease_is_judged_live_by_its_deadline() {
        use crate::record::MemberId;
        let lease = Lease {
            member: MemberId::new("a").expect("member"),
            token: FencingToken::new(7, 3),
            granted_at: UnixMillis(1_000),
            deadline: UnixMillis(31_000),
        };
        let s = tv2(7, 5, TransactionState::CompleteCommit);
        assert_eq!(
            s.relation_to_lease(&lease, UnixMillis(30_999)),
            PairRelation::CommitsLater { by: 2 }
        );
        assert_eq!(
            s.relation_to_lease(&lease, UnixMillis(31_000)),
            PairRelation::Superseded
        );
    }

    #[test]
    fn relations_read_as_text() {
        assert_eq!(
            PairRelation::Current.to_string(),
            "the lease's pair is the current one"
        );
        assert_eq!(
            PairRelation::Superseded.to_string(),
            "the lease's pair is NOT the current one (superseded)"
        );
        let later = PairRelation::CommitsLater { by: 3 };
        assert!(later.to_string().contains("3 epoch(s) behind"), "{later}");
        let note = later.note().expect("a note");
        assert!(note.contains("transaction version 2 (KIP-890"), "{note}");
        assert!(note.contains("does not fence"), "{note}");
        assert_eq!(PairRelation::Current.note(), None);
        assert_eq!(PairRelation::Superseded.note(), None);
        assert_eq!(later.name(), "commits_later");
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
