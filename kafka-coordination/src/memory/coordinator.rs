//! The transaction coordinator: producer ids, epochs, transaction states and timeouts.

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_coordination_core::leadership_status::{LeadershipStatus, TransactionState};
use kafka_coordination_core::record::Role;
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::token::FencingToken;

use super::broker_state::{AcceptedLeaseWrite, Inner, OpenTxn, TxnEntry, EXHAUSTED_EPOCH};
use super::log::PartitionLog;
use crate::error::TransportError;

/// Ends the open transaction of `entry` (if any) in every partition it wrote, and sets the
/// state. Returns the transaction.
fn end_open(
    entry: &mut TxnEntry,
    logs: &mut [PartitionLog],
    dirty: &mut BTreeSet<usize>,
    commit: bool,
) -> Option<OpenTxn> {
    let open = entry.open.take()?;
    let partitions: BTreeSet<usize> = open.records.iter().map(|(p, _)| *p).collect();
    for index in partitions {
        if let Some(log) = logs.get_mut(index) {
            log.end_transaction(entry.pair, commit);
            dirty.insert(index);
        }
    }
    entry.state = if commit {
        TransactionState::CompleteCommit
    } else {
        TransactionState::CompleteAbort
    };
    Some(open)
}

/// The coordinator's fencing bump: the epoch grows by one (at most to `i16::MAX`).
fn fence_bump(entry: &mut TxnEntry) {
    entry.pair.producer_epoch = entry.pair.producer_epoch.saturating_add(1);
}

fn fenced(member: &str, role: &Role, bound: FencingToken, current: FencingToken) -> TransportError {
    TransportError::fenced(format!(
        "member `{member}` writes for role `{role}` with pair {bound}, but the coordinator's \
         current pair is {current} (PRODUCER_FENCED)"
    ))
}

impl Inner {
    /// Aborts, with an epoch bump, every transaction open longer than its timeout at `now`.
    pub(super) fn expire(&mut self, now: UnixMillis) {
        if self.next_expiry.is_none_or(|first| now <= first) {
            return;
        }
        let Inner {
            txns,
            logs,
            dirty,
            next_expiry,
            ..
        } = self;
        *next_expiry = None;
        for entry in txns.values_mut() {
            let expired = entry
                .open
                .as_ref()
                .is_some_and(|open| now > open.started.saturating_add(entry.timeout));
            if expired {
                end_open(entry, logs, dirty, false);
                fence_bump(entry);
            }
            if let Some(open) = &entry.open {
                let at = open.started.saturating_add(entry.timeout);
                *next_expiry = Some(next_expiry.map_or(at, |first| first.min(at)));
            }
        }
    }

    /// InitProducerId for `transactional.id = role`.
    pub(super) fn acquire(
        &mut self,
        role: &Role,
        timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        if timeout.as_millis() == 0 || timeout > self.max_transaction_timeout {
            return Err(TransportError::config(format!(
                "transaction timeout {} ms for role `{role}` is outside the broker's range \
                 (1 ms to transaction.max.timeout.ms = {} ms) (INVALID_TRANSACTION_TIMEOUT)",
                timeout.as_millis(),
                self.max_transaction_timeout.as_millis()
            )));
        }
        let Inner {
            txns,
            logs,
            dirty,
            ids,
            ..
        } = self;
        let Some(entry) = txns.get_mut(role) else {
            let pair = FencingToken::new(ids.allocate(), 0);
            let entry = TxnEntry {
                pair,
                state: TransactionState::Empty,
                timeout,
                open: None,
            };
            txns.insert(role.clone(), entry);
            return Ok(pair);
        };
        if end_open(entry, logs, dirty, false).is_some() {
            // The coordinator fences the holder of the open transaction and aborts it; the
            // client's retry then gets a further bump, so the epoch skips one.
            fence_bump(entry);
        }
        entry.pair = if entry.pair.producer_epoch >= EXHAUSTED_EPOCH {
            FencingToken::new(ids.allocate(), 0)
        } else {
            FencingToken::new(entry.pair.producer_id, entry.pair.producer_epoch + 1)
        };
        entry.state = TransactionState::Empty;
        entry.timeout = timeout;
        Ok(entry.pair)
    }

    /// DescribeTransactions for `role`.
    pub(super) fn describe(&self, role: &Role) -> LeadershipStatus {
        match self.txns.get(role) {
            None => LeadershipStatus::NOT_FOUND,
            Some(e) => {
                let status = LeadershipStatus::described(
                    e.pair.producer_id,
                    e.pair.producer_epoch,
                    e.state.clone(),
                );
                match &e.open {
                    Some(open) => status.with_transaction_started(open.started),
                    None => status,
                }
            }
        }
    }

    /// See [`MemoryBroker::force_epoch`](super::MemoryBroker::force_epoch).
    pub(super) fn force_epoch(&mut self, role: &Role, epoch: i16) -> FencingToken {
        let Inner {
            txns,
            logs,
            dirty,
            ids,
            max_transaction_timeout,
            ..
        } = self;
        let entry = txns.entry(role.clone()).or_insert_with(|| TxnEntry {
            pair: FencingToken::new(ids.allocate(), 0),
            state: TransactionState::Empty,
            timeout: *max_transaction_timeout,
            open: None,
        });
        end_open(entry, logs, dirty, false);
        entry.pair.producer_epoch = epoch;
        entry.pair
    }

    /// A lease write of `role` through a session holding `bound`: appends the record inside
    /// the role's transaction (opening one if none is open) and, when `commit`, commits it.
    /// Fenced when `bound` is not the coordinator's current pair. Returns the record's offset.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lease_write(
        &mut self,
        role: &Role,
        bound: FencingToken,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        member: &str,
        now: UnixMillis,
        commit: bool,
    ) -> Result<i64, TransportError> {
        let index = self.available(partition)?;
        let current = self.current_pair(role, member)?;
        if current != bound {
            return Err(fenced(member, role, bound, current));
        }
        let offset = self.log_mut(index)?.append_transactional(key, value, bound);
        let entry = self.entry_mut(role, member)?;
        entry.state = TransactionState::Ongoing;
        let timeout = entry.timeout;
        let open = entry.open.get_or_insert_with(|| OpenTxn {
            started: now,
            member: member.to_owned(),
            records: Vec::new(),
        });
        open.records.push((index, offset));
        let at = open.started.saturating_add(timeout);
        self.next_expiry = Some(self.next_expiry.map_or(at, |first| first.min(at)));
        if commit {
            self.commit(role, bound, member, now)?;
        }
        Ok(offset)
    }

    /// Commits the open transaction of `role` through a session holding `bound`. Fenced when
    /// `bound` is not the current pair (a takeover or a timeout aborted the transaction).
    pub(super) fn commit(
        &mut self,
        role: &Role,
        bound: FencingToken,
        member: &str,
        now: UnixMillis,
    ) -> Result<(), TransportError> {
        let current = self.current_pair(role, member)?;
        if current != bound {
            return Err(fenced(member, role, bound, current));
        }
        let partitions: BTreeSet<usize> = match &self.entry_mut(role, member)?.open {
            Some(open) => open.records.iter().map(|(p, _)| *p).collect(),
            None => {
                return Err(TransportError::fatal(format!(
                    "member `{member}` has no open transaction for role `{role}` to commit"
                )))
            }
        };
        for index in partitions {
            let partition = i32::try_from(index).unwrap_or(i32::MAX);
            self.available(partition)?;
        }
        let Inner {
            txns,
            logs,
            dirty,
            audit,
            ..
        } = self;
        let Some(entry) = txns.get_mut(role) else {
            return Err(no_producer(member, role));
        };
        if let Some(open) = end_open(entry, logs, dirty, true) {
            for (index, offset) in open.records {
                audit.push(AcceptedLeaseWrite {
                    partition: i32::try_from(index).unwrap_or(i32::MAX),
                    offset,
                    role: role.clone(),
                    member: open.member.clone(),
                    token: bound,
                    current: entry.pair,
                    at: now,
                });
            }
        }
        Ok(())
    }

    /// A guarded write of `role` through a session holding `bound`: every record is appended,
    /// committed, to its data topic partition, or none is (fenced when `bound` is not the
    /// current pair). Data topics spring into being on first use. `group`'s offsets, if given,
    /// are committed with the records, or refused with them. Headers are not kept.
    pub(super) fn guarded_write(
        &mut self,
        role: &Role,
        bound: FencingToken,
        records: &[crate::transport::GuardedRecord<'_>],
        group: Option<crate::transport::GroupOffsets<'_>>,
        member: &str,
    ) -> Result<Vec<i64>, TransportError> {
        let current = self.current_pair(role, member)?;
        if current != bound {
            return Err(fenced(member, role, bound, current));
        }
        let negative = records
            .iter()
            .map(|r| (r.topic, r.partition))
            .chain(
                group
                    .iter()
                    .flat_map(|g| g.offsets.iter().map(|o| (o.topic, o.partition))),
            )
            .find(|(_, p)| *p < 0);
        if let Some((topic, partition)) = negative {
            return Err(TransportError::config(format!(
                "partition {partition} of topic '{topic}' is negative"
            )));
        }
        if let Some(g) = group {
            if g.group.is_empty() {
                return Err(TransportError::config("the consumer group id is empty"));
            }
            let committed = self.group_offsets.entry(g.group.to_owned()).or_default();
            for o in g.offsets {
                committed.insert((o.topic.to_owned(), o.partition), o.next_offset);
            }
        }
        let mut offsets = Vec::with_capacity(records.len());
        for r in records {
            let log = self
                .data
                .entry((r.topic.to_owned(), r.partition))
                .or_default();
            let offset = i64::try_from(log.len()).unwrap_or(i64::MAX);
            log.push(crate::transport::Record {
                offset,
                key: r.key.map(<[u8]>::to_vec).unwrap_or_default(),
                value: r.value.map(<[u8]>::to_vec),
            });
            offsets.push(offset);
        }
        Ok(offsets)
    }

    fn entry_mut(&mut self, role: &Role, member: &str) -> Result<&mut TxnEntry, TransportError> {
        self.txns
            .get_mut(role)
            .ok_or_else(|| no_producer(member, role))
    }

    fn current_pair(&self, role: &Role, member: &str) -> Result<FencingToken, TransportError> {
        self.txns
            .get(role)
            .map(|e| e.pair)
            .ok_or_else(|| no_producer(member, role))
    }
}

fn no_producer(member: &str, role: &Role) -> TransportError {
    TransportError::fatal(format!(
        "member `{member}`: the coordinator has no producer for role `{role}`"
    ))
}
