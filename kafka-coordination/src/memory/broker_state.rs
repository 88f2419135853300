//! Everything behind the broker's lock: the partitions' logs, the coordinator's record of each
//! transactional id, the fault switches and the audit log.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::leadership_status::TransactionState;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::token::FencingToken;

use crate::error::TransportError;
use crate::transport::{ReadBatch, Record};

use super::faults::{BrokerOp, CallCounts, Faults};
use super::log::PartitionLog;

/// The epoch at which the coordinator stops bumping and hands out a fresh producer id with
/// epoch 0 (`Short.MAX_VALUE - 1`).
pub const EXHAUSTED_EPOCH: i16 = i16::MAX - 1;

/// The broker's default `transaction.max.timeout.ms`: 15 minutes.
pub const DEFAULT_MAX_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(900);

/// The first producer id the broker hands out.
pub const FIRST_PRODUCER_ID: i64 = 100_000;

/// The name of the modelled topic, used in messages.
pub(super) const TOPIC: &str = "__coordination_state";

/// One lease write the broker accepted (committed), for a simulation to check that every
/// accepted write carried the pair that was current at that instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedLeaseWrite {
    /// The partition written.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// The role (transactional id) whose producer wrote it.
    pub role: Role,
    /// The name of the transport (member) that wrote it.
    pub member: String,
    /// The pair the write carried.
    pub token: FencingToken,
    /// The coordinator's current pair for the role when the write committed.
    pub current: FencingToken,
    /// The broker clock's time of the commit.
    pub at: UnixMillis,
}

/// A callback told of every transport call, before the call runs.
pub(super) type CallHook = Arc<dyn Fn(BrokerOp) + Send + Sync>;

/// Everything behind the broker's lock.
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) logs: Vec<PartitionLog>,
    /// Per transactional id; ordered so that effects across roles are deterministic.
    pub(super) txns: BTreeMap<Role, TxnEntry>,
    pub(super) ids: ProducerIds,
    pub(super) faults: Faults,
    pub(super) unavailable: BTreeSet<i32>,
    pub(super) audit: Vec<AcceptedLeaseWrite>,
    pub(super) counts: CallCounts,
    pub(super) max_transaction_timeout: Duration,
    /// Partitions whose readers must be woken when the lock is released.
    pub(super) dirty: BTreeSet<usize>,
    /// Data topics written by guarded writes: (topic, partition) -> committed records.
    pub(super) data: BTreeMap<(String, i32), Vec<Record>>,
    /// Consumer group offsets committed with guarded writes: group -> (topic, partition) ->
    /// the next offset.
    pub(super) group_offsets: BTreeMap<String, BTreeMap<(String, i32), i64>>,
    /// No open transaction times out before this instant (`None`: none is open), so that the
    /// timeout check at every call looks at the transactions only when one may be due.
    pub(super) next_expiry: Option<UnixMillis>,
}

impl Inner {
    /// The index of `partition`, or a `Config` error naming it and the partition count.
    pub(super) fn index(&self, partition: i32) -> Result<usize, TransportError> {
        usize::try_from(partition)
            .ok()
            .filter(|&i| i < self.logs.len())
            .ok_or_else(|| {
                TransportError::config(format!(
                    "partition {partition} is out of range: {TOPIC} has {} partitions",
                    self.logs.len()
                ))
            })
    }

    /// [`index`](Self::index), then a `Retriable` error if the partition is unavailable.
    pub(super) fn available(&self, partition: i32) -> Result<usize, TransportError> {
        let index = self.index(partition)?;
        if self.unavailable.contains(&partition) {
            return Err(TransportError::retriable(format!(
                "partition {partition} of {TOPIC} is unavailable (LEADER_NOT_AVAILABLE)"
            )));
        }
        Ok(index)
    }

    /// The log of an index returned by [`index`](Self::index).
    pub(super) fn log(&self, index: usize) -> Result<&PartitionLog, TransportError> {
        self.logs
            .get(index)
            .ok_or_else(|| TransportError::fatal("partition index lost"))
    }

    pub(super) fn log_mut(&mut self, index: usize) -> Result<&mut PartitionLog, TransportError> {
        self.logs
            .get_mut(index)
            .ok_or_else(|| TransportError::fatal("partition index lost"))
    }

    /// A read_committed read of partition `index` from `from`.
    pub(super) fn read(
        &self,
        index: usize,
        partition: i32,
        from: i64,
    ) -> Result<ReadBatch, TransportError> {
        let log = self.log(index)?;
        if from > log.end_offset() {
            return Err(TransportError::fatal(format!(
                "offset {from} is past the end ({}) of partition {partition} of {TOPIC} \
                 (OFFSET_OUT_OF_RANGE)",
                log.end_offset()
            )));
        }
        Ok(log.read(from))
    }
}

/// The coordinator's record of one transactional id.
#[derive(Clone, Debug)]
pub(super) struct TxnEntry {
    /// The current (producer id, epoch).
    pub(super) pair: FencingToken,
    pub(super) state: TransactionState,
    /// The transaction timeout of the last InitProducerId.
    pub(super) timeout: Duration,
    /// The open transaction, if any; always of `pair`.
    pub(super) open: Option<OpenTxn>,
}

/// An open transaction.
#[derive(Clone, Debug)]
pub(super) struct OpenTxn {
    pub(super) started: UnixMillis,
    /// The transport that writes it, for the audit log.
    pub(super) member: String,
    /// (partition index, offset) of each record, in write order.
    pub(super) records: Vec<(usize, i64)>,
}

/// The producer id allocator: a counter that never hands out an id twice.
#[derive(Clone, Debug)]
pub(super) struct ProducerIds {
    next: i64,
    issued: BTreeSet<i64>,
}

impl ProducerIds {
    pub(super) fn new(first: i64) -> ProducerIds {
        ProducerIds {
            next: first,
            issued: BTreeSet::new(),
        }
    }

    /// A fresh producer id.
    pub(super) fn allocate(&mut self) -> i64 {
        while self.issued.contains(&self.next) {
            self.next = self.next.saturating_add(1);
        }
        let id = self.next;
        self.issued.insert(id);
        self.next = self.next.saturating_add(1);
        id
    }

    /// Moves the counter 1000 below the smallest id issued or pending (at least 0).
    pub(super) fn go_smaller(&mut self) -> i64 {
        let lowest = self
            .issued
            .first()
            .copied()
            .unwrap_or(self.next)
            .min(self.next);
        self.next = lowest.saturating_sub(1000).max(0);
        self.peek()
    }

    pub(super) fn set_next(&mut self, id: i64) {
        self.next = id.max(0);
    }

    /// The id the next [`allocate`](Self::allocate) returns.
    fn peek(&self) -> i64 {
        let mut id = self.next;
        while self.issued.contains(&id) {
            id = id.saturating_add(1);
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_ids_are_never_reused() {
        let mut ids = ProducerIds::new(1000);
        assert_eq!(ids.allocate(), 1000);
        assert_eq!(ids.go_smaller(), 0);
        assert_eq!(ids.allocate(), 0);
        ids.set_next(999);
        assert_eq!(ids.allocate(), 999);
        assert_eq!(ids.allocate(), 1001, "1000 was issued already");
        assert_eq!(ids.go_smaller(), 1, "0 is taken; the next free id above it");
    }
}
