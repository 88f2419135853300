//! [`OnPool`]: a transport whose calls block, run on a bounded pool of threads.

use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use crate::calls::{
    no_guarded_writes, without_offsets, AcquireDone, Append, Coordinator, DescribeDone,
    GroupOffsets, GuardedDone, GuardedRecord, GuardedWrite, LeaseDone, LeaseWriter, ReadBatch,
    ReadDone, Registrar, StateReader,
};
use crate::error::TransportError;
use crate::thread_pool::Pool;

/// A transport whose calls block the calling thread until the broker answers (a client
/// library without callbacks). Wrap it in [`OnPool`] to use it wherever a
/// [`Transport`](crate::Transport) is asked for. Each method does what the completion form of
/// the same name does (see [`Coordinator`], [`StateReader`], [`Registrar`] and
/// [`LeaseWriter`]) and returns the outcome instead of handing it over.
pub trait BlockingTransport: Send + Sync + 'static {
    /// As [`StateReader::partitions`].
    fn partitions(&self) -> i32;

    /// As [`Coordinator::start_acquire_epoch`].
    fn acquire_epoch(
        &self,
        role: &Role,
        transaction_timeout: Duration,
    ) -> Result<FencingToken, TransportError>;

    /// As [`Coordinator::start_describe_epochs`] for one role.
    fn describe_epoch(&self, role: &Role) -> Result<LeadershipStatus, TransportError>;

    /// As [`StateReader::start_read_partition`].
    fn read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch, TransportError>;

    /// As [`Registrar::append_all`] for one record.
    fn append(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<i64, TransportError>;

    /// As [`LeaseWriter::start_write_lease`].
    fn write_lease(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError>;

    /// As [`StateReader::can_long_poll`]. Default: `false`.
    fn can_long_poll(&self) -> bool {
        false
    }

    /// As [`LeaseWriter::guarded_write`] (run on the caller's thread). Default: refused.
    fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        let _ = (token, records);
        Err(no_guarded_writes())
    }

    /// As [`LeaseWriter::guarded_write_with_offsets`]. Default: without offsets, a guarded
    /// write; with offsets, refused.
    fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        without_offsets(offsets, || self.guarded_write(token, records))
    }

    /// As [`Coordinator::claim_role`]. Default: accepts everything.
    fn claim_role(&self, role: &Role) -> Result<(), TransportError> {
        let _ = role;
        Ok(())
    }

    /// As [`Coordinator::release_role`]. Default: nothing.
    fn release_role(&self, role: &Role) {
        let _ = role;
    }

    /// As [`Coordinator::claims_scope`]. Default: `None`.
    fn claims_scope(&self) -> Option<usize> {
        None
    }
}

/// A [`BlockingTransport`] as a [`Transport`](crate::Transport): each call is queued for a
/// pool of at most `threads` threads (started as calls come, ended after 30 s without one),
/// the smallest priority first, and its outcome handed over from the thread that ran it. A
/// long poll holds one of the threads while it waits. Cloning shares the transport and the
/// pool.
pub struct OnPool<T> {
    inner: Arc<T>,
    pool: Arc<Pool>,
}

impl<T> Clone for OnPool<T> {
    fn clone(&self) -> Self {
        OnPool {
            inner: Arc::clone(&self.inner),
            pool: Arc::clone(&self.pool),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for OnPool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnPool")
            .field("inner", &self.inner)
            .field("threads", &self.pool.threads())
            .finish()
    }
}

impl<T: BlockingTransport> OnPool<T> {
    /// `transport`, its calls run on at most `threads` threads (at least one).
    pub fn new(transport: T, threads: usize) -> OnPool<T> {
        OnPool {
            inner: Arc::new(transport),
            pool: Arc::new(Pool::new("kc-on-pool", threads.max(1)).numbered()),
        }
    }

    /// The wrapped transport.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// How many calls wait for a thread now.
    pub fn queued(&self) -> usize {
        self.pool.queued()
    }

    /// Runs `call` on the pool with the wrapped transport.
    fn run(&self, priority: i64, call: impl FnOnce(&T) + Send + 'static) {
        let inner = Arc::clone(&self.inner);
        self.pool.submit(priority, Box::new(move || call(&inner)));
    }
}

impl<T: BlockingTransport> Coordinator for OnPool<T> {
    fn start_acquire_epoch(
        &self,
        role: Role,
        transaction_timeout: Duration,
        priority: i64,
        done: AcquireDone,
    ) {
        self.run(priority, move |t| {
            done(t.acquire_epoch(&role, transaction_timeout))
        });
    }

    fn start_describe_epochs(&self, roles: Vec<Role>, priority: i64, done: DescribeDone) {
        self.run(priority, move |t| {
            done(roles.iter().map(|r| t.describe_epoch(r)).collect())
        });
    }

    fn claim_role(&self, role: &Role) -> Result<(), TransportError> {
        self.inner.claim_role(role)
    }

    fn release_role(&self, role: &Role) {
        self.inner.release_role(role)
    }

    fn claims_scope(&self) -> Option<usize> {
        self.inner.claims_scope()
    }
}

impl<T: BlockingTransport> StateReader for OnPool<T> {
    fn partitions(&self) -> i32 {
        self.inner.partitions()
    }

    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: ReadDone,
    ) {
        self.run(priority, move |t| {
            done(t.read_partition(partition, from_offset, max_wait))
        });
    }

    fn can_long_poll(&self) -> bool {
        self.inner.can_long_poll()
    }
}

impl<T: BlockingTransport> Registrar for OnPool<T> {
    /// One job for all of `appends`, run in order.
    fn append_all(&self, appends: Vec<Append>, priority: i64) {
        self.run(priority, move |t| {
            for a in appends {
                (a.done)(t.append(a.partition, &a.key, a.value.as_deref()));
            }
        });
    }
}

impl<T: BlockingTransport> LeaseWriter for OnPool<T> {
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
        priority: i64,
        done: LeaseDone,
    ) {
        self.run(priority, move |t| {
            done(t.write_lease(partition, &key, value.as_deref(), token))
        });
    }

    fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        self.inner.guarded_write(token, records)
    }

    fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        self.inner
            .guarded_write_with_offsets(token, records, offsets)
    }

    /// Runs the write on the pool, as every other call.
    fn start_guarded_write(
        &self,
        token: FencingToken,
        write: GuardedWrite,
        priority: i64,
        done: GuardedDone,
    ) {
        self.run(priority, move |t| {
            done(write.lend(|records, offsets| match offsets {
                Some(offsets) => t.guarded_write_with_offsets(token, records, offsets),
                None => t.guarded_write(token, records),
            }))
        });
    }
}
