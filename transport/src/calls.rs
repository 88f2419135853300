//! The four traits and what their calls carry (see the [module docs](super)).

use std::time::Duration;

use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

pub use kafka_coordination_core::state::Record;

use crate::error::TransportError;

/// One record of a guarded write: a write of the role's own work (to any topic) that the
/// broker accepts only while the writer's pair is the role's current one.
#[derive(Clone, Copy, Debug)]
pub struct GuardedRecord<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition, always explicit: the transport applies no partitioner. For Java-compatible
    /// key partitioning use
    /// [`partition_of_bytes`](kafka_coordination_core::partition::partition_of_bytes).
    pub partition: i32,
    /// The key, if any.
    pub key: Option<&'a [u8]>,
    /// The value; `None` writes a tombstone.
    pub value: Option<&'a [u8]>,
    /// The record's headers (name, value), in order; empty for none. Give each name once (the
    /// Kafka transport refuses a name given twice).
    pub headers: &'a [(&'a str, Option<&'a [u8]>)],
}

impl<'a> GuardedRecord<'a> {
    /// A record of `value` with `key` to `topic`/`partition`, without headers.
    pub fn new(
        topic: &'a str,
        partition: i32,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
    ) -> GuardedRecord<'a> {
        GuardedRecord {
            topic,
            partition,
            key,
            value,
            headers: &[],
        }
    }

    /// The same record with `headers` (name, value), in order.
    pub fn with_headers(self, headers: &'a [(&'a str, Option<&'a [u8]>)]) -> GuardedRecord<'a> {
        GuardedRecord { headers, ..self }
    }
}

/// The position of a consumer group in one input partition, committed with a guarded write
/// (see [`LeaseWriter::guarded_write_with_offsets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumedOffset<'a> {
    /// The input topic.
    pub topic: &'a str,
    /// The input partition.
    pub partition: i32,
    /// The offset of the next input record to process: the last processed record's offset
    /// plus one (Kafka's convention for committed offsets).
    pub next_offset: i64,
    /// Metadata stored with the offset, if any.
    pub metadata: Option<&'a str>,
}

/// Offsets of one consumer group to commit in a guarded write's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupOffsets<'a> {
    /// The consumer group (`group.id`) whose committed offsets move.
    pub group: &'a str,
    /// One entry per input partition.
    pub offsets: &'a [ConsumedOffset<'a>],
}

/// A guarded write's records (and a group's offsets, if any), owned: what
/// [`LeaseWriter::start_guarded_write`] carries to wherever the write runs after its caller
/// returned. [`lend`](GuardedWrite::lend) and [`borrow`](GuardedWrite::borrow) give the
/// borrowed forms back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuardedWrite {
    records: Vec<OwnedRecord>,
    offsets: Option<OwnedOffsets>,
}

/// A guarded record's bytes, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OwnedRecord {
    topic: String,
    partition: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A group's offsets, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct OwnedOffsets {
    group: String,
    offsets: Vec<(String, i32, i64, Option<String>)>,
}

/// The headers of each record of a [`GuardedWrite`], borrowed from it (see
/// [`GuardedWrite::header_refs`]).
pub type HeaderRefs<'a> = Vec<Vec<(&'a str, Option<&'a [u8]>)>>;

impl GuardedWrite {
    /// A copy of `records` and of `offsets` (`None`: a write without offsets).
    pub fn new(records: &[GuardedRecord<'_>], offsets: Option<GroupOffsets<'_>>) -> GuardedWrite {
        let records = records
            .iter()
            .map(|r| OwnedRecord {
                topic: r.topic.to_owned(),
                partition: r.partition,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.map(<[u8]>::to_vec)))
                    .collect(),
            })
            .collect();
        let offsets = offsets.map(|o| OwnedOffsets {
            group: o.group.to_owned(),
            offsets: o
                .offsets
                .iter()
                .map(|c| {
                    (
                        c.topic.to_owned(),
                        c.partition,
                        c.next_offset,
                        c.metadata.map(str::to_owned),
                    )
                })
                .collect(),
        });
        GuardedWrite { records, offsets }
    }

    /// How many records it writes.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it writes no record (it may still commit offsets).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The headers of each record, borrowed: the first step of [`borrow`](Self::borrow).
    pub fn header_refs(&self) -> HeaderRefs<'_> {
        self.records
            .iter()
            .map(|r| {
                r.headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_deref()))
                    .collect()
            })
            .collect()
    }

    /// The group's offsets, borrowed (empty without offsets): the second step of
    /// [`borrow`](Self::borrow).
    pub fn offset_refs(&self) -> Vec<ConsumedOffset<'_>> {
        self.offsets
            .iter()
            .flat_map(|o| &o.offsets)
            .map(|(topic, partition, next_offset, metadata)| ConsumedOffset {
                topic,
                partition: *partition,
                next_offset: *next_offset,
                metadata: metadata.as_deref(),
            })
            .collect()
    }

    /// The records and the offsets, borrowed, given what [`header_refs`](Self::header_refs)
    /// and [`offset_refs`](Self::offset_refs) returned: for a write that borrows them across
    /// waits (an async task). [`lend`](Self::lend) is the short form.
    pub fn borrow<'a>(
        &'a self,
        headers: &'a HeaderRefs<'a>,
        offsets: &'a [ConsumedOffset<'a>],
    ) -> (Vec<GuardedRecord<'a>>, Option<GroupOffsets<'a>>) {
        let records = self
            .records
            .iter()
            .zip(headers)
            .map(|(r, h)| GuardedRecord {
                topic: &r.topic,
                partition: r.partition,
                key: r.key.as_deref(),
                value: r.value.as_deref(),
                headers: h,
            })
            .collect();
        let offsets = self.offsets.as_ref().map(|o| GroupOffsets {
            group: &o.group,
            offsets,
        });
        (records, offsets)
    }

    /// Calls `write` with the records and the offsets, borrowed.
    pub fn lend<R>(
        &self,
        write: impl FnOnce(&[GuardedRecord<'_>], Option<GroupOffsets<'_>>) -> R,
    ) -> R {
        let headers = self.header_refs();
        let offsets = self.offset_refs();
        let (records, offsets) = self.borrow(&headers, &offsets);
        write(&records, offsets)
    }

    /// Runs it as `writer`'s blocking [`guarded_write`](LeaseWriter::guarded_write) (or
    /// [`guarded_write_with_offsets`](LeaseWriter::guarded_write_with_offsets) when it has
    /// offsets), on the caller's thread.
    pub fn run_blocking<W: LeaseWriter + ?Sized>(
        &self,
        writer: &W,
        token: FencingToken,
    ) -> Result<Vec<i64>, TransportError> {
        self.lend(|records, offsets| match offsets {
            Some(offsets) => writer.guarded_write_with_offsets(token, records, offsets),
            None => writer.guarded_write(token, records),
        })
    }
}

/// Records read from one partition, and how far the read reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadBatch {
    /// Committed records at offsets `>= from_offset`, in offset order, tombstones included.
    pub records: Vec<Record>,
    /// The offset after the last one the read covered: the partition's last stable offset at
    /// the time of the read. The next read starts here.
    pub end_offset: i64,
    /// Whether the read stopped short of the partition's high watermark because an open
    /// transaction holds the last stable offset back (records past `end_offset` exist but are
    /// not readable yet). `false` when the transport cannot tell.
    pub stalled: bool,
    /// The partition's high watermark when the read was answered (the offset after its last
    /// record, committed or not), `None` when the transport cannot tell. Every record
    /// committed before the read was answered lies below it: a standby whose reads keep
    /// stalling knows it has read everything its turn's read could not see once its reads get
    /// this far (see `Event::RecordsRead` in the core).
    pub high_watermark: Option<i64>,
}

/// Mints and describes leadership epochs (Kafka's transaction coordinator).
pub trait Coordinator {
    /// Calls InitProducerId for `transactional.id = role` with `transaction_timeout`, keeps the
    /// producer that the returned pair binds, and hands the pair to `done`. Every call fences
    /// whoever held the role's previous pair. Returns at once; `done` is called exactly once,
    /// before this returns or later on a thread of the transport's.
    ///
    /// `priority` says how soon the call should go, smaller first (a host gives its queue's
    /// due instants, in milliseconds): a transport that queues requests serves them in this
    /// order; others ignore it. The same holds for every `start_*` method and
    /// [`append_all`](Registrar::append_all).
    fn start_acquire_epoch(
        &self,
        role: Role,
        transaction_timeout: Duration,
        priority: i64,
        done: AcquireDone,
    );

    /// The coordinator's current pair and transaction state for each role
    /// (DescribeTransactions), or [`LeadershipStatus::NOT_FOUND`] for a role no member ever
    /// took: one answer per role, in the order asked, handed to `done` (called once, as for
    /// [`start_acquire_epoch`](Coordinator::start_acquire_epoch)). A host asks for every
    /// check due in the same round together; Kafka answers many transactional ids of one
    /// coordinator in one request.
    fn start_describe_epochs(&self, roles: Vec<Role>, priority: i64, done: DescribeDone);

    /// Reserves `role` for one candidacy on this transport. A transport shared by many
    /// candidacies (one client per process) refuses a second candidacy for a role it already
    /// holds or contests, with a [`Config`](crate::error::ErrorKind::Config) error: two candidacies of
    /// one process for one role would fence each other. Drivers call it when a candidacy
    /// starts; when the holder is a candidacy whose term is over and whose exit still runs,
    /// the driver waits for that exit ([`release_role`](Coordinator::release_role)) and asks
    /// again, so campaigning again right after a term is no error. The default accepts
    /// everything.
    fn claim_role(&self, role: &Role) -> Result<(), TransportError> {
        let _ = role;
        Ok(())
    }

    /// Ends a candidacy's hold on `role`: drops the producer session held for it (so this
    /// transport writes nothing more with its pair) and the claim. Drivers call it when a
    /// candidacy ends. The default does nothing.
    fn release_role(&self, role: &Role) {
        let _ = role;
    }

    /// Which set of claims [`claim_role`](Coordinator::claim_role) checks: transports (and
    /// their clones and wrappers) that answer the same value share one. A driver uses it to
    /// tell a candidacy of this process that is still leaving a role on this transport (a new
    /// candidacy then waits for its exit) from one on another transport. The default, `None`,
    /// groups every such transport together. Wrappers forward it.
    fn claims_scope(&self) -> Option<usize> {
        None
    }
}

/// What [`Coordinator::start_describe_epochs`] hands its answers to: one per role, in the
/// order asked.
pub type DescribeDone = Box<dyn FnOnce(Vec<Result<LeadershipStatus, TransportError>>) + Send>;

/// What [`StateReader::start_read_partition`] hands its batch to.
pub type ReadDone = Box<dyn FnOnce(Result<ReadBatch, TransportError>) + Send>;

/// What [`Coordinator::start_acquire_epoch`] hands its outcome to.
pub type AcquireDone = Box<dyn FnOnce(Result<FencingToken, TransportError>) + Send>;

/// What [`LeaseWriter::start_write_lease`] hands its outcome to: the record's offset, or the
/// error.
pub type LeaseDone = Box<dyn FnOnce(Result<i64, TransportError>) + Send>;

/// What [`LeaseWriter::start_guarded_write`] hands its outcome to: each record's offset, or
/// the error.
pub type GuardedDone = Box<dyn FnOnce(Result<Vec<i64>, TransportError>) + Send>;

/// Reads a partition of `__coordination_state` with read_committed isolation.
pub trait StateReader {
    /// The topic's partition count, which decides the partition of every role (murmur2 of the
    /// role name). The transport is where it is given, once (`KafkaConfig::new`,
    /// `MemoryBroker::new`); drivers and `describe_role_state` take it from here.
    fn partitions(&self) -> i32;

    /// Reads committed records from `from_offset` up to the last stable offset, in offset
    /// order, and hands the batch to `done` (called once, as for
    /// [`Coordinator::start_acquire_epoch`]).
    ///
    /// `max_wait` lets a transport that can long-poll ([`can_long_poll`](Self::can_long_poll))
    /// wait up to that long for records at or past `from_offset` before it answers (so a
    /// standby learns of a resign as soon as it is readable); it still returns at once and
    /// answers later. A transport that cannot wait answers at once; `Duration::ZERO` never
    /// waits.
    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: ReadDone,
    );

    /// Whether [`start_read_partition`](StateReader::start_read_partition) really waits up to
    /// `max_wait` for new records. Drivers then keep a standby listening until its turn, so it
    /// sees a resign or a new lease as soon as the record is readable; otherwise they read
    /// only at the standby's wake-up instants. Default: `false`.
    fn can_long_poll(&self) -> bool {
        false
    }

    /// What the transport already holds of `partition` at offsets `>= from_offset`, without
    /// asking the broker: `Some` when it **tails** the partition (keeps a read of it going on its
    /// own, such as the Kafka transport's long-polling Fetch, one per broker, shared by every
    /// partition that broker leads) and its copy has caught up with the partition once; `None`
    /// otherwise, and then the caller reads with
    /// [`start_read_partition`](StateReader::start_read_partition).
    ///
    /// The answer may lag the broker by what the tail has not brought yet, so it suits a reader
    /// that waits for news (a host's parked standbys), not one that must
    /// see everything readable when it asked. Default: `None`.
    fn read_tailed(&self, partition: i32, from_offset: i64) -> Option<ReadBatch> {
        let _ = (partition, from_offset);
        None
    }

    /// Asks the transport to call `hook` with a partition's number each time its tail of that
    /// partition brings records or a new last stable offset, from the transport's own thread
    /// (so the hook must only note the partition and wake its owner). The transport keeps the
    /// hook while it can be upgraded. Returns whether the transport tails at all; the default
    /// does not, and drops the hook.
    fn on_tailed(&self, hook: std::sync::Weak<TailHook>) -> bool {
        let _ = hook;
        false
    }
}

/// A hook of [`StateReader::on_tailed`]: called with a partition whose tail moved.
pub type TailHook = dyn Fn(i32) + Send + Sync;

/// The hooks a tailing transport was given ([`StateReader::on_tailed`]), kept while they live.
/// Not a public API: shared by the transports of the workspace.
#[doc(hidden)]
#[derive(Default)]
pub struct TailHooks(std::sync::Mutex<Vec<std::sync::Weak<TailHook>>>);

impl TailHooks {
    fn hooks(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::Weak<TailHook>>> {
        crate::lock::lock(&self.0)
    }

    /// Keeps `hook` (dropping the hooks that died).
    pub fn add(&self, hook: std::sync::Weak<TailHook>) {
        let mut hooks = self.hooks();
        hooks.retain(|h| h.strong_count() > 0);
        hooks.push(hook);
    }

    /// Calls every live hook with each of `partitions`, outside the lock.
    pub fn tell(&self, partitions: &[i32]) {
        let live: Vec<_> = self
            .hooks()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for hook in live {
            for &p in partitions {
                hook(p);
            }
        }
    }
}

/// What an [`Append`] hands its outcome to: called once, on whichever thread finishes the
/// append.
pub type AppendDone = Box<dyn FnOnce(Result<i64, TransportError>) + Send>;

/// One append handed to [`Registrar::append_all`]: its record, and who hears how it went.
pub struct Append {
    /// The partition written (no partitioner).
    pub partition: i32,
    /// The record's key.
    pub key: Vec<u8>,
    /// The record's value; `None` writes a tombstone.
    pub value: Option<Vec<u8>>,
    /// Called exactly once with the record's offset or the error.
    pub done: AppendDone,
}

impl Append {
    /// An append of `key`/`value` to `partition` whose outcome goes to `done`.
    pub fn new(
        partition: i32,
        key: impl Into<Vec<u8>>,
        value: Option<Vec<u8>>,
        done: impl FnOnce(Result<i64, TransportError>) + Send + 'static,
    ) -> Append {
        Append {
            partition,
            key: key.into(),
            value,
            done: Box::new(done),
        }
    }
}

impl std::fmt::Debug for Append {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Append")
            .field("partition", &self.partition)
            .field("key_len", &self.key.len())
            .field("value_len", &self.value.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

/// Appends registration records with a plain (non-transactional) idempotent producer.
pub trait Registrar {
    /// Appends every record of `appends` to its partition (no partitioner) with `acks=all`,
    /// and hands each its offset (or the error) through its [`done`](Append::done), called
    /// exactly once, before this returns or later on a thread of the transport's. A `value`
    /// of `None` writes a tombstone. (A transport that drops a `done` uncalled has lost that
    /// append; a host (`kafka_coordination::host`) then fails that call with a retriable error.)
    ///
    /// A transport whose appends travel in batches queues all of them before it sends any:
    /// the Kafka transport sends up to 500 records to a Produce per partition, one sender per
    /// partition, and leaves the appends queued behind a batch in flight to that batch's
    /// sender. A host hands its candidacies' registrations over this way.
    fn append_all(&self, appends: Vec<Append>, priority: i64);
}

/// Writes lease records through the producer that holds the role's epoch.
pub trait LeaseWriter {
    /// Writes one record to `partition` in one transaction of the producer bound by the last
    /// acquire of the role, which must have granted `token`, and hands `done` the record's
    /// offset (`-1` when the write committed but the offset could not be learned); `done` is
    /// called once, as for [`Coordinator::start_acquire_epoch`]. A superseded pair fails with
    /// [`ErrorKind::Fenced`](crate::error::ErrorKind::Fenced). `value = None` writes a
    /// tombstone. The offset of a term's first lease record is the term number.
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
        priority: i64,
        done: LeaseDone,
    );

    /// Writes `records` (any topics, each to its explicit partition) in **one transaction** of
    /// the producer that holds `token`, and returns each record's offset. The broker refuses
    /// the whole transaction once a newer pair exists: a
    /// [`Fenced`](crate::error::ErrorKind::Fenced) error, and nothing of it ever becomes
    /// readable to read_committed readers.
    ///
    /// The blocking form, for a caller on its own thread, with records it borrows;
    /// [`start_guarded_write`](LeaseWriter::start_guarded_write) is the completion form. The
    /// default refuses with a
    /// [`Config`](crate::error::ErrorKind::Config) error: a transport without transactions
    /// cannot fence.
    fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        let _ = (token, records);
        Err(no_guarded_writes())
    }

    /// [`guarded_write`](LeaseWriter::guarded_write) that also commits `offsets` (a consumer
    /// group's position in its input) **in the same transaction**: the records become
    /// readable and the group's committed offsets move together, or neither happens. Once a
    /// newer pair exists the broker refuses the whole transaction
    /// ([`Fenced`](crate::error::ErrorKind::Fenced)), so a deposed leader can neither write
    /// output nor move the group's position. On Kafka: AddOffsetsToTxn and TxnOffsetCommit
    /// (as a producer outside the group: generation -1, no member id) before the commit.
    ///
    /// The default writes without offsets when `offsets` is empty and otherwise refuses with a
    /// [`Config`](crate::error::ErrorKind::Config) error: a transport that cannot commit
    /// offsets transactionally must not commit them apart from the records.
    fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        without_offsets(offsets, || self.guarded_write(token, records))
    }

    /// The completion form of [`guarded_write`](LeaseWriter::guarded_write) (and, when
    /// `write` carries offsets, of
    /// [`guarded_write_with_offsets`](LeaseWriter::guarded_write_with_offsets)): starts the
    /// write of `write` with the producer that holds `token`, with `priority` (as for
    /// [`Coordinator::start_acquire_epoch`]), and hands `done` each record's offset or the
    /// error; `done` is called exactly once, before this returns or later on a thread of the
    /// transport's. The async handles (`Leadership::guarded_write`) await it.
    ///
    /// The default runs the blocking form on the caller's thread before it returns. A
    /// transport whose blocking form waits for the network should override it, so that an
    /// async caller's thread does not wait: the Kafka transport queues the transaction's
    /// requests for its connection threads, [`OnPool`](crate::OnPool) runs the write on its
    /// pool.
    fn start_guarded_write(
        &self,
        token: FencingToken,
        write: GuardedWrite,
        priority: i64,
        done: GuardedDone,
    ) {
        let _ = priority;
        done(write.run_blocking(self, token));
    }
}

/// The default refusal of a guarded write, by a transport without transactions.
pub(crate) fn no_guarded_writes() -> TransportError {
    TransportError::config("this transport does not support guarded writes")
}

/// The default of a guarded write with offsets: no offsets, `write` (a plain guarded write);
/// offsets, a refusal.
pub(crate) fn without_offsets(
    offsets: GroupOffsets<'_>,
    write: impl FnOnce() -> Result<Vec<i64>, TransportError>,
) -> Result<Vec<i64>, TransportError> {
    if offsets.offsets.is_empty() {
        return write();
    }
    Err(TransportError::config(format!(
        "this transport cannot commit the offsets of group '{}' in a guarded write",
        offsets.group
    )))
}

/// All four traits: what a member needs.
pub trait Transport: Coordinator + StateReader + Registrar + LeaseWriter {}

impl<T: Coordinator + StateReader + Registrar + LeaseWriter + ?Sized> Transport for T {}

/// A shared transport is a transport: hand one client (`Arc<KafkaTransport>`, or any other) to
/// every candidacy of the process.
impl<T: Coordinator + ?Sized> Coordinator for std::sync::Arc<T> {
    fn start_acquire_epoch(
        &self,
        role: Role,
        transaction_timeout: Duration,
        priority: i64,
        done: AcquireDone,
    ) {
        (**self).start_acquire_epoch(role, transaction_timeout, priority, done)
    }
    fn start_describe_epochs(&self, roles: Vec<Role>, priority: i64, done: DescribeDone) {
        (**self).start_describe_epochs(roles, priority, done)
    }
    fn claim_role(&self, role: &Role) -> Result<(), TransportError> {
        (**self).claim_role(role)
    }
    fn release_role(&self, role: &Role) {
        (**self).release_role(role)
    }
    fn claims_scope(&self) -> Option<usize> {
        (**self).claims_scope()
    }
}

impl<T: StateReader + ?Sized> StateReader for std::sync::Arc<T> {
    fn partitions(&self) -> i32 {
        (**self).partitions()
    }
    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: ReadDone,
    ) {
        (**self).start_read_partition(partition, from_offset, max_wait, priority, done)
    }
    fn can_long_poll(&self) -> bool {
        (**self).can_long_poll()
    }
    fn read_tailed(&self, partition: i32, from_offset: i64) -> Option<ReadBatch> {
        (**self).read_tailed(partition, from_offset)
    }
    fn on_tailed(&self, hook: std::sync::Weak<TailHook>) -> bool {
        (**self).on_tailed(hook)
    }
}

impl<T: Registrar + ?Sized> Registrar for std::sync::Arc<T> {
    fn append_all(&self, appends: Vec<Append>, priority: i64) {
        (**self).append_all(appends, priority)
    }
}

impl<T: LeaseWriter + ?Sized> LeaseWriter for std::sync::Arc<T> {
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
        priority: i64,
        done: LeaseDone,
    ) {
        (**self).start_write_lease(partition, key, value, token, priority, done)
    }
    fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        (**self).guarded_write(token, records)
    }
    fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        (**self).guarded_write_with_offsets(token, records, offsets)
    }
    fn start_guarded_write(
        &self,
        token: FencingToken,
        write: GuardedWrite,
        priority: i64,
        done: GuardedDone,
    ) {
        (**self).start_guarded_write(token, write, priority, done)
    }
}
