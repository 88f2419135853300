//! [`MemoryBroker`]: the handle on the broker's state, shared by its clones and its transports.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use event_listener::Event;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use crate::clock::Clock;
use crate::error::{ErrorKind, TransportError};
use crate::transport::Record;

use super::broker_state::{
    AcceptedLeaseWrite, CallHook, Inner, ProducerIds, DEFAULT_MAX_TRANSACTION_TIMEOUT,
    FIRST_PRODUCER_ID,
};
use super::faults::{BrokerOp, CallCounts, Faults};
use super::log::PartitionLog;

/// The state shared by a broker's clones and its transports.
pub(super) struct Shared {
    pub(super) inner: Mutex<Inner>,
    /// One event per partition, notified on every append and every transaction end there.
    pub(super) events: Vec<Event>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) partitions: i32,
    pub(super) hook: Mutex<Option<CallHook>>,
    /// The hooks of tailing transports ([`MemoryTransport::tailing`]), called with every
    /// partition that changed.
    pub(super) tail_hooks: crate::transport::TailHooks,
    /// The threads long polls wait on (see [`MemoryBroker`]).
    pub(super) waiting: kafka_coordination_transport::thread_pool::Pool,
}

/// How many long polls of one [`MemoryBroker`] may wait at once, each on a thread.
pub const LONG_POLL_THREADS: usize = 256;

/// The broker's lock, held. Lazily expired transactions are aborted when it is taken; readers
/// of the partitions that changed are woken when it is released.
pub(super) struct Locked<'a> {
    pub(super) shared: &'a Shared,
    pub(super) guard: MutexGuard<'a, Inner>,
}

impl Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let dirty = std::mem::take(&mut self.guard.dirty);
        if dirty.is_empty() {
            return;
        }
        for &index in &dirty {
            if let Some(event) = self.shared.events.get(index) {
                event.notify(usize::MAX);
            }
        }
        // The tails of tailing transports moved too. A hook only notes the partition and
        // wakes its owner (it never calls back into the broker).
        let partitions: Vec<i32> = dirty
            .iter()
            .filter_map(|&index| i32::try_from(index).ok())
            .collect();
        self.shared.tail_hooks.tell(&partitions);
        // Drivers on a manual clock wait on the clock, not on the partition: count the change
        // there too (after the new state is visible), so `ManualClock::settle` is exact.
        if let Some(manual) = self.shared.clock.as_manual() {
            manual.notify_change();
        }
    }
}

impl Shared {
    /// Takes the lock (recovering it if a panicking thread poisoned it) and aborts the
    /// transactions whose timeout passed.
    pub(super) fn lock(&self) -> Locked<'_> {
        let guard = kafka_coordination_transport::lock::lock(&self.inner);
        let mut locked = Locked {
            shared: self,
            guard,
        };
        let now = self.clock.now();
        locked.expire(now);
        locked
    }

    pub(super) fn hook(&self) -> Option<CallHook> {
        kafka_coordination_transport::lock::lock(&self.hook).clone()
    }

    /// The start of every transport call: counts it, tells the hook, sleeps an injected delay,
    /// takes the lock and answers an injected failure.
    pub(super) fn begin_call(&self, op: BrokerOp) -> Result<Locked<'_>, TransportError> {
        let delay = {
            let mut locked = self.lock();
            locked.counts.record(op);
            locked.faults.take_delay(op)
        };
        if let Some(hook) = self.hook() {
            hook(op);
        }
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
        let mut locked = self.lock();
        if let Some(kind) = locked.faults.take_failure(op) {
            return Err(TransportError::new(
                kind,
                format!("injected failure of a {op} call"),
            ));
        }
        Ok(locked)
    }
}

impl Locked<'_> {
    /// The end of a transport call that took effect: answers an injected lost reply.
    pub(super) fn finish_call(&mut self, op: BrokerOp) -> Result<(), TransportError> {
        if self.faults.take_lost_reply(op) {
            return Err(TransportError::retriable(format!(
                "injected lost reply of a {op} call (the call took effect)"
            )));
        }
        Ok(())
    }
}

/// An in-process model of Kafka's transaction coordinator and of the compacted topic
/// `__coordination_state`, with Kafka's semantics.
///
/// Cloning is cheap and shares the broker. Hand each member its own
/// [`transport`](Self::transport).
///
/// # The model
///
/// **Coordinator.** Per transactional id (= role): a producer id, an epoch, a
/// [`TransactionState`](kafka_coordination_core::leadership_status::TransactionState), a transaction
/// timeout and at most one open transaction.
///
/// * `acquire_epoch` (InitProducerId): a brand-new id gets a fresh producer id and epoch 0; an
///   id in `Empty` / `Complete*` gets epoch + 1; an id with an `Ongoing` transaction has that
///   transaction aborted with a fencing bump, and then a further bump, so a takeover of an open
///   transaction **skips an epoch**. When the epoch to bump from is `>=`
///   [`EXHAUSTED_EPOCH`](super::EXHAUSTED_EPOCH) (32766), the id gets a fresh producer id and epoch 0. The state after
///   an acquire is `Empty`. A transaction timeout of zero or above the broker's maximum
///   ([`DEFAULT_MAX_TRANSACTION_TIMEOUT`], see
///   [`MemoryBroker::set_max_transaction_timeout`]) fails with a `Config` error.
/// * A transaction open for longer than its timeout is aborted by the coordinator with an epoch
///   bump (its holder is fenced, state `CompleteAbort`). The check is lazy: it runs, with the
///   clock's `now`, at the start of every broker call (any transport call and most
///   `MemoryBroker` methods; [`MemoryBroker::expire_transactions`] runs only the check).
/// * Producer ids come from a counter starting at [`FIRST_PRODUCER_ID`] and are never reused;
///   [`MemoryBroker::next_producer_id_smaller`] and [`MemoryBroker::set_next_producer_id`]
///   model a coordinator move (or an expired transactional id) that yields a smaller id.
/// * `describe_epoch` answers the current pair and state, or
///   [`LeadershipStatus::NOT_FOUND`](kafka_coordination_core::leadership_status::LeadershipStatus::NOT_FOUND).
///
/// **Transport sessions.** A [`MemoryTransport`](super::MemoryTransport) is one member. Like the Kafka transport it
/// keeps the producer that its last `acquire_epoch` of a role bound (the pair that call
/// returned). `write_lease(.., token)` writes through the session whose pair is `token`; it
/// fails with `Fenced` when the transport holds no such pair or when the coordinator's current
/// pair for the role is another one (the message names both pairs). An accepted write is one
/// transaction: the record is appended as transactional, then committed with a commit marker.
///
/// **Topic.** `partitions` partitions, each an append-only log with Kafka's offsets: control
/// markers (commit / abort) take an offset and are never returned. Reads are read_committed:
/// the records at offsets `>= from` and below the **last stable offset** (LSO: the first offset
/// of the oldest open transaction, else the log end), committed ones only, in offset order,
/// tombstones included; `end_offset` is the LSO, and the read reports `stalled` while the LSO
/// is below the log end (this model's high watermark). An open transaction (see
/// [`MemoryTransport::begin_lease_write_and_crash`](super::MemoryTransport::begin_lease_write_and_crash) and [`MemoryBroker::open_transaction`];
/// [`MemoryBroker::stall_partition`] leaves one open for another role on a given partition)
/// therefore hides every later record, registrations included, until it is aborted by a
/// takeover or by its timeout. [`MemoryBroker::compact`] keeps the latest record per key below
/// the LSO, offsets unchanged.
///
/// **Manual clocks.** With a [`ManualClock`](crate::clock::ManualClock), every change that
/// wakes readers (an append, a commit, an abort) is also counted on the clock
/// ([`ManualClock::notify_change`](crate::clock::ManualClock::notify_change)); that is what lets
/// [`ManualClock::settle`](crate::clock::ManualClock::settle) know that every driver has seen
/// every record.
///
/// **Calls.** Every call answers on the caller's thread before it returns, but a long poll:
/// `start_read_partition` with `max_wait > 0` waits on a thread of the broker's (at most
/// [`LONG_POLL_THREADS`] wait at once; more queue).
///
/// **Long poll.** A read with `max_wait > 0` and nothing readable at or past `from`
/// waits, in real time, until a record is appended or a transaction ends on that partition, or
/// until `max_wait` passes, and then answers. With a [`ManualClock`](crate::clock::ManualClock)
/// it also answers as soon as the clock is moved (so a driver waiting on the read reacts to
/// virtual time at once; a transaction that the move timed out is aborted first). With
/// `max_wait == 0` it answers at once.
///
/// **Faults.** [`MemoryBroker::fail_next`] and friends inject failures of any
/// [`ErrorKind`] (the call then has no effect),
/// [`MemoryBroker::lose_next_reply`] makes a call take effect and then fail `Retriable` (a lost
/// reply), [`MemoryBroker::delay_next`] sleeps in real time before a call,
/// [`MemoryBroker::set_partition_unavailable`] makes reads, appends and lease writes of a
/// partition fail `Retriable`. [`MemoryBroker::call_counts`] and [`MemoryBroker::on_call`] let
/// a simulation see every call, and [`MemoryBroker::accepted_lease_writes`] is the audit log of
/// every committed lease write with the coordinator's pair at that instant.
///
/// Errors: `Fenced` for stale pairs, `Retriable` for injected failures and unavailable
/// partitions, `Config` for a partition out of range or a bad transaction timeout, `Fatal` for a
/// read past the log end. A lease write by a transport that holds no session is `Fenced`.
#[derive(Clone)]
pub struct MemoryBroker {
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBroker")
            .field("partitions", &self.shared.partitions)
            .finish()
    }
}

impl MemoryBroker {
    /// A broker whose topic has `partitions` partitions (a count below 1 gives a topic without
    /// partitions: every partition is out of range), reading the time from `clock`.
    pub fn new(partitions: i32, clock: Arc<dyn Clock>) -> MemoryBroker {
        let count = usize::try_from(partitions).unwrap_or(0);
        let inner = Inner {
            logs: (0..count).map(|_| PartitionLog::default()).collect(),
            txns: BTreeMap::new(),
            ids: ProducerIds::new(FIRST_PRODUCER_ID),
            faults: Faults::default(),
            unavailable: BTreeSet::new(),
            audit: Vec::new(),
            counts: CallCounts::default(),
            max_transaction_timeout: DEFAULT_MAX_TRANSACTION_TIMEOUT,
            dirty: BTreeSet::new(),
            data: BTreeMap::new(),
            group_offsets: BTreeMap::new(),
            next_expiry: None,
        };
        MemoryBroker {
            shared: Arc::new(Shared {
                inner: Mutex::new(inner),
                events: (0..count).map(|_| Event::new()).collect(),
                clock,
                partitions: partitions.max(0),
                hook: Mutex::new(None),
                tail_hooks: crate::transport::TailHooks::default(),
                waiting: kafka_coordination_transport::thread_pool::Pool::new(
                    "kc-memory-poll",
                    LONG_POLL_THREADS,
                ),
            }),
        }
    }

    /// The partition count of the topic.
    pub fn partitions(&self) -> i32 {
        self.shared.partitions
    }

    /// The broker's clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.shared.clock)
    }

    /// The coordinator's current pair for `role`, `None` when no member ever took it.
    pub fn epoch_of(&self, role: &Role) -> Option<FencingToken> {
        self.shared.lock().txns.get(role).map(|e| e.pair)
    }

    /// Sets the coordinator's epoch for `role` (negative values count as 0) and returns the
    /// new current pair, to reach exhaustion quickly. An open transaction of the role is
    /// aborted first (without a bump); a role never taken gets a fresh producer id. Every
    /// session holding the previous pair is fenced.
    pub fn force_epoch(&self, role: &Role, epoch: i16) -> FencingToken {
        self.shared.lock().force_epoch(role, epoch.max(0))
    }

    /// Makes the next fresh producer id smaller than every id handed out so far (1000 below the
    /// smallest, at least 0), as when a role's coordinator moves to another broker. Returns the
    /// id the next fresh producer will get (ids are never reused: an id already issued is
    /// skipped).
    pub fn next_producer_id_smaller(&self) -> i64 {
        self.shared.lock().ids.go_smaller()
    }

    /// Sets the producer id the next fresh producer gets (at least 0; an id already issued is
    /// skipped, ids are never reused).
    pub fn set_next_producer_id(&self, id: i64) {
        self.shared.lock().ids.set_next(id);
    }

    /// Sets the broker's `transaction.max.timeout.ms` (default
    /// [`DEFAULT_MAX_TRANSACTION_TIMEOUT`]); an `acquire_epoch` with a longer transaction
    /// timeout fails with a `Config` error.
    pub fn set_max_transaction_timeout(&self, max: Duration) {
        self.shared.lock().max_transaction_timeout = max;
    }

    /// Models the current holder of `role` crashing in the middle of a lease write: appends
    /// the record to `partition` inside a transaction of the role's current pair and leaves
    /// that transaction open. The record is invisible and holds back the partition's LSO until
    /// the transaction is aborted by the next `acquire_epoch` of the role or by its timeout
    /// (counted from now). Returns the record's offset. Fails with `Config` for a partition out
    /// of range and with `Fatal` for a role no member has taken. No fault or count applies.
    pub fn open_transaction(
        &self,
        role: &Role,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<i64, TransportError> {
        let mut locked = self.shared.lock();
        let Some(pair) = locked.txns.get(role).map(|e| e.pair) else {
            return Err(TransportError::fatal(format!(
                "no producer holds role `{role}`: acquire it before opening a transaction"
            )));
        };
        let now = self.shared.clock.now();
        locked.lease_write(
            role,
            pair,
            partition,
            key,
            value,
            "(crashed holder)",
            now,
            false,
        )
    }

    /// Models another role's holder dying in the middle of a lease write on `partition`: takes
    /// the first role named `other-0`, `other-1`, ... whose partition that is, with a
    /// transaction timeout of `timeout`, and leaves a lease write of it open (see
    /// [`open_transaction`](Self::open_transaction)). Reads of the partition stall short of
    /// every record after it until the transaction is aborted: once it has been open longer
    /// than `timeout` by the clock, or by the next `acquire_epoch` of that role. Returns that
    /// role. Fails with a
    /// `Config` error for a partition out of range or a timeout above the broker's maximum.
    pub fn stall_partition(
        &self,
        partition: i32,
        timeout: Duration,
    ) -> Result<Role, TransportError> {
        use kafka_coordination_core::partition::role_partition;
        use kafka_coordination_core::record::Key;
        let partitions = self.partitions();
        if !(0..partitions).contains(&partition) {
            return Err(TransportError::config(format!(
                "stall_partition: partition {partition} is out of range (the topic has \
                 {partitions})"
            )));
        }
        // Murmur2 spreads the names over every partition, so the search ends.
        let role = (0u64..)
            .filter_map(|k| Role::new(format!("other-{k}")).ok())
            .find(|r| role_partition(r, partitions).ok() == Some(partition))
            .ok_or_else(|| TransportError::fatal("no role name found for the partition"))?;
        crate::transport::Wait::acquire_epoch(&self.transport("other-holder"), &role, timeout)?;
        self.open_transaction(
            &role,
            partition,
            &Key::lease(role.clone()).encode(),
            Some(b"half-written"),
        )?;
        Ok(role)
    }

    /// Runs the lazy timeout check now: aborts, with an epoch bump, every transaction open
    /// longer than its timeout by the clock, and wakes the readers of its partitions. Every
    /// broker call does this anyway; a simulation calls it after moving its clock.
    pub fn expire_transactions(&self) {
        drop(self.shared.lock());
    }

    /// Compacts `partition` as the log cleaner does: below the LSO, keeps the latest record
    /// per key (offsets unchanged, tombstones kept) and drops superseded records, aborted
    /// records and control markers. Returns how many log entries were removed.
    pub fn compact(&self, partition: i32) -> Result<usize, TransportError> {
        self.compact_with(partition, None)
    }

    /// [`compact`](Self::compact), also dropping the tombstones at offsets below
    /// `drop_tombstones_before` (as `delete.retention.ms` eventually does).
    pub fn compact_with(
        &self,
        partition: i32,
        drop_tombstones_before: Option<i64>,
    ) -> Result<usize, TransportError> {
        let mut locked = self.shared.lock();
        let index = locked.index(partition)?;
        Ok(locked.log_mut(index)?.compact(drop_tombstones_before))
    }

    /// The last stable offset of `partition`.
    pub fn last_stable_offset(&self, partition: i32) -> Result<i64, TransportError> {
        let locked = self.shared.lock();
        let index = locked.index(partition)?;
        Ok(locked.log(index)?.last_stable_offset())
    }

    /// The log end offset of `partition` (the offset of the next append).
    pub fn log_end_offset(&self, partition: i32) -> Result<i64, TransportError> {
        let locked = self.shared.lock();
        let index = locked.index(partition)?;
        Ok(locked.log(index)?.end_offset())
    }

    /// Every record a read_committed reader sees in `partition` now, from offset 0 to the LSO;
    /// no fault, unavailability or count applies.
    pub fn committed_records(&self, partition: i32) -> Result<Vec<Record>, TransportError> {
        let locked = self.shared.lock();
        let index = locked.index(partition)?;
        Ok(locked.log(index)?.read(0).records)
    }

    /// The records guarded writes committed to `topic`/`partition`, in offset order.
    pub fn topic_records(&self, topic: &str, partition: i32) -> Vec<Record> {
        self.shared
            .lock()
            .data
            .get(&(topic.to_owned(), partition))
            .cloned()
            .unwrap_or_default()
    }

    /// The offsets of consumer group `group` that guarded writes committed, one answer per
    /// (topic, partition) of `partitions`, in order: the next offset to consume, or `None` where
    /// the group has committed nothing (Kafka's OffsetFetch with `require_stable`: only
    /// committed transactions count).
    pub fn committed_offsets(&self, group: &str, partitions: &[(&str, i32)]) -> Vec<Option<i64>> {
        let locked = self.shared.lock();
        let offsets = locked.group_offsets.get(group);
        partitions
            .iter()
            .map(|(t, p)| offsets.and_then(|o| o.get(&((*t).to_owned(), *p)).copied()))
            .collect()
    }

    /// Every lease write the broker accepted (committed), in commit order.
    pub fn accepted_lease_writes(&self) -> Vec<AcceptedLeaseWrite> {
        self.shared.lock().audit.clone()
    }

    /// The lease writes the broker accepted after the first `seen`, in commit order (what
    /// [`accepted_lease_writes`](Self::accepted_lease_writes) returns past index `seen`).
    pub fn accepted_lease_writes_since(&self, seen: usize) -> Vec<AcceptedLeaseWrite> {
        self.shared
            .lock()
            .audit
            .get(seen..)
            .map(<[AcceptedLeaseWrite]>::to_vec)
            .unwrap_or_default()
    }

    /// How many calls of each kind the transports made, failed ones included.
    pub fn call_counts(&self) -> CallCounts {
        self.shared.lock().counts
    }

    /// Calls `hook` at the start of every transport call (after counting it, before any
    /// injected delay or failure), on the calling thread and without the broker's lock held.
    /// Replaces an earlier hook.
    pub fn on_call(&self, hook: impl Fn(BrokerOp) + Send + Sync + 'static) {
        *kafka_coordination_transport::lock::lock(&self.shared.hook) = Some(Arc::new(hook));
    }

    /// Removes the hook set by [`on_call`](Self::on_call).
    pub fn clear_call_hook(&self) {
        *kafka_coordination_transport::lock::lock(&self.shared.hook) = None;
    }

    /// Fails the next `n` transport calls of any kind with `kind`, without effect.
    pub fn fail_next(&self, n: usize, kind: ErrorKind) {
        self.shared.lock().faults.add_failures(None, n, kind);
    }

    /// Fails the next `n` calls of `op` with `kind`, without effect.
    pub fn fail_next_op(&self, op: BrokerOp, n: usize, kind: ErrorKind) {
        self.shared.lock().faults.add_failures(Some(op), n, kind);
    }

    /// Lets the next `n` transport calls of any kind take effect and then fail `Retriable`, as
    /// when the reply is lost (an acquire then bumps the epoch without binding the caller's
    /// session; an append or lease write is in the log).
    pub fn lose_next_reply(&self, n: usize) {
        self.shared.lock().faults.add_lost_replies(None, n);
    }

    /// [`lose_next_reply`](Self::lose_next_reply) for the next `n` calls of `op`.
    pub fn lose_next_reply_op(&self, op: BrokerOp, n: usize) {
        self.shared.lock().faults.add_lost_replies(Some(op), n);
    }

    /// Sleeps `delay` in real time before each of the next `n` transport calls of any kind
    /// (before the call takes effect). Simulations on virtual time use
    /// [`on_call`](Self::on_call) instead.
    pub fn delay_next(&self, n: usize, delay: Duration) {
        self.shared.lock().faults.add_delays(None, n, delay);
    }

    /// [`delay_next`](Self::delay_next) for the next `n` calls of `op`.
    pub fn delay_next_op(&self, op: BrokerOp, n: usize, delay: Duration) {
        self.shared.lock().faults.add_delays(Some(op), n, delay);
    }

    /// Forgets every injected failure, lost reply and delay still pending.
    pub fn clear_faults(&self) {
        self.shared.lock().faults = Faults::default();
    }

    /// Makes `partition` unavailable (reads, appends and lease writes fail `Retriable`) or
    /// available again.
    pub fn set_partition_unavailable(&self, partition: i32, unavailable: bool) {
        let mut locked = self.shared.lock();
        if unavailable {
            locked.unavailable.insert(partition);
        } else {
            locked.unavailable.remove(&partition);
        }
    }
}
