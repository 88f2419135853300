//! Looking at a role from outside: who is authoritative, and the roster and lease.

use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::state::RoleState;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::leadership::Error;
use crate::transport::{Coordinator, ReadBatch, StateReader};
use crate::watch::{leader_at, partition_of, RoleLeader};

/// The coordinator's current pair for `role`: one DescribeTransactions request. Use
/// [`LeadershipStatus::authoritative`] to check a writer's token, and
/// [`LeadershipStatus::relation_to_lease`] to say how a lease read with
/// [`describe_role_state`] stands to it.
///
/// **Transaction version 2.** This library's Kafka client keeps one pair per term (it sends
/// EndTxn <= v3 and Produce <= v9, below KIP-890's transaction version 2), so a live leader of
/// its own reads [`Current`](kafka_coordination_core::PairRelation::Current). A member whose
/// client commits with transaction version 2 (EndTxn v5+, the default of franz-go and of the
/// Java client 4.x, on a cluster at `transaction.version` 2 or more) gets a new epoch at every
/// commit: its lease's pair falls behind its own producer's, and the relation reads
/// [`CommitsLater { by }`](kafka_coordination_core::PairRelation::CommitsLater) instead of
/// `Superseded`. Such a lease's pair is **not** authoritative for fencing: a guarded write must
/// carry the producer's current pair, which only its client knows
/// ([`LeadershipStatus::transaction_version`] says whether the cluster runs version 2).
pub fn describe_leadership<C: Coordinator + ?Sized>(
    coordinator: &C,
    role: &str,
) -> Result<LeadershipStatus, Error> {
    let role = Role::new(role)?;
    crate::transport::describe_one(coordinator, &role).map_err(Error::Transport)
}

/// The member that leads `role` now, with its pair, term and lease deadline, or why the role
/// is vacant: one read of the role's partition, the lease judged live or expired by the system clock
/// ([`watch::leader_at`](crate::watch::leader_at) takes another instant).
/// [`describe_leadership`] answers "which pair is current" from the coordinator; this answers
/// "which member", from the role's lease records. To follow every change, use a
/// [`Watch`](crate::watch::Watch).
///
/// It can lag a write by a moment: see [`describe_role_state`].
pub fn leader<R: StateReader + ?Sized>(reader: &R, role: &str) -> Result<RoleLeader, Error> {
    leader_at(reader, role, SystemClock.now())
}

/// The roster (join order) and lease of `role`, read from the start of its partition to the
/// last stable offset, in the partition the reader's partition count gives the role.
///
/// **A lease write shows a moment after it is acknowledged.** Kafka's transaction coordinator
/// answers a commit once it has logged the decision, and writes the commit marker to the
/// partition after that; until the marker lands, the last stable offset stays below the
/// record, and a read_committed read does not reach it. So right after a member reports its
/// election (its first lease committed), this read may still show the previous holder's lease.
/// On a local broker a read sent the instant the commit was answered missed the record about
/// two times in three (the transport suite's
/// `a_committed_lease_becomes_readable_once_its_marker_lands` prints the count).
/// Registrations are not transactional and show at once, unless another member's open
/// transaction holds the partition back. To learn which pair is current without that lag,
/// ask the coordinator: [`describe_leadership`].
pub fn describe_role_state<R: StateReader + ?Sized>(
    reader: &R,
    role: &str,
) -> Result<RoleState, Error> {
    let (mut state, partition) = role_state_at(reader, role)?;
    loop {
        let from = state.next_offset();
        let batch = crate::transport::read(reader, partition, from, Duration::ZERO)
            .map_err(Error::Transport)?;
        if absorb(&mut state, &batch) {
            return Ok(state);
        }
    }
}

/// [`describe_leadership`] awaited on a task: the check's answer wakes it.
#[cfg(async_driver)]
pub(crate) async fn describe_leadership_async<C: Coordinator + ?Sized>(
    coordinator: &C,
    role: &str,
) -> Result<LeadershipStatus, Error> {
    let role = Role::new(role)?;
    crate::awaited::describe_one(coordinator, role)
        .await
        .map_err(Error::Transport)
}

/// [`describe_role_state`] awaited on a task: each read's answer wakes it.
#[cfg(async_driver)]
pub(crate) async fn describe_role_state_async<R: StateReader + ?Sized>(
    reader: &R,
    role: &str,
) -> Result<RoleState, Error> {
    let (mut state, partition) = role_state_at(reader, role)?;
    loop {
        let from = state.next_offset();
        let batch = crate::awaited::read(reader, partition, from, Duration::ZERO)
            .await
            .map_err(Error::Transport)?;
        if absorb(&mut state, &batch) {
            return Ok(state);
        }
    }
}

/// An empty state of `role` and the partition that holds its records.
fn role_state_at<R: StateReader + ?Sized>(
    reader: &R,
    role: &str,
) -> Result<(RoleState, i32), Error> {
    let role = Role::new(role)?;
    let partition = partition_of(&role, reader.partitions())?;
    Ok((RoleState::new(role), partition))
}

/// Takes one read into `state`; true once the state has reached the last stable offset the
/// read saw (a read of nothing, or one that ends at its end).
fn absorb(state: &mut RoleState, batch: &ReadBatch) -> bool {
    for r in &batch.records {
        state.apply(r);
    }
    let read_any = !batch.records.is_empty();
    state.advance_to(batch.end_offset);
    !read_any || state.next_offset() >= batch.end_offset
}
