//! [`Wait`]: one call of a transport, answered on the caller's thread.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use crate::calls::{Append, Coordinator, ReadBatch, StateReader, Transport};
use crate::error::TransportError;

/// Starts a call with `start` and blocks until its `done` is called; a `done` dropped
/// uncalled is a retriable error named by `what`.
pub fn wait_for<R: Send + 'static>(
    what: &str,
    start: impl FnOnce(Box<dyn FnOnce(Result<R, TransportError>) + Send>),
) -> Result<R, TransportError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    start(Box::new(move |outcome| {
        // The caller may have gone (a panic): nobody to tell.
        let _ = tx.send(outcome);
    }));
    rx.recv().unwrap_or_else(|_| {
        Err(TransportError::retriable(format!(
            "the transport dropped a {what} without answering it"
        )))
    })
}

/// The priority of a call started now, as [`Wait`] gives its calls: now, in Unix milliseconds
/// (the same scale as a host's due instants, so such a caller queues about as a host's call
/// issued now). An async driver gives its calls the same.
pub fn priority_now() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// [`Wait::read_partition`] for a reader that is only a [`StateReader`].
pub fn read<R: StateReader + ?Sized>(
    reader: &R,
    partition: i32,
    from_offset: i64,
    max_wait: Duration,
) -> Result<ReadBatch, TransportError> {
    wait_for("read", |done| {
        reader.start_read_partition(partition, from_offset, max_wait, priority_now(), done)
    })
}

/// [`Wait::describe_epochs`] for a transport that is only a [`Coordinator`].
pub fn describe<C: Coordinator + ?Sized>(
    coordinator: &C,
    roles: &[Role],
) -> Vec<Result<LeadershipStatus, TransportError>> {
    let answers = wait_for("check", |done| {
        coordinator.start_describe_epochs(
            roles.to_vec(),
            priority_now(),
            Box::new(move |a| done(Ok(a))),
        )
    });
    match answers {
        Ok(answers) => answers,
        Err(e) => roles.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// [`Wait::describe_epoch`] for a transport that is only a [`Coordinator`].
pub fn describe_one<C: Coordinator + ?Sized>(
    coordinator: &C,
    role: &Role,
) -> Result<LeadershipStatus, TransportError> {
    describe(coordinator, std::slice::from_ref(role))
        .pop()
        .unwrap_or_else(|| {
            Err(TransportError::fatal(
                "describe_epochs answered fewer roles than it was asked for",
            ))
        })
}

/// One call of a [`Transport`], answered on the caller's thread: each method starts the
/// call's completion form and blocks until it is done. For tools, tests and one-off calls;
/// drivers and hosts use the completion forms themselves.
///
/// ```
/// use kafka_coordination::memory::MemoryBroker;
/// use kafka_coordination::transport::Wait;
/// use kafka_coordination::{core::record::Role, SystemClock};
///
/// let broker = MemoryBroker::new(4, std::sync::Arc::new(SystemClock));
/// let member = broker.transport("a");
/// let role = Role::new("scheduler").unwrap();
/// let token = member.acquire_epoch(&role, std::time::Duration::from_secs(10)).unwrap();
/// assert!(member.describe_epoch(&role).is_ok());
/// # let _ = token;
/// ```
pub trait Wait: Transport {
    /// [`Coordinator::start_acquire_epoch`], waited for.
    fn acquire_epoch(
        &self,
        role: &Role,
        transaction_timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        wait_for("acquire", |done| {
            self.start_acquire_epoch(role.clone(), transaction_timeout, priority_now(), done)
        })
    }

    /// [`Coordinator::start_describe_epochs`] for one role, waited for.
    fn describe_epoch(&self, role: &Role) -> Result<LeadershipStatus, TransportError> {
        describe_one(self, role)
    }

    /// [`Coordinator::start_describe_epochs`], waited for: one answer per role, in order.
    fn describe_epochs(&self, roles: &[Role]) -> Vec<Result<LeadershipStatus, TransportError>> {
        describe(self, roles)
    }

    /// [`StateReader::start_read_partition`], waited for.
    fn read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch, TransportError> {
        read(self, partition, from_offset, max_wait)
    }

    /// [`Registrar::append_all`](crate::Registrar::append_all) of one record, waited for: its
    /// offset.
    fn append(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<i64, TransportError> {
        wait_for("registration", |done| {
            self.append_all(
                vec![Append::new(partition, key, value.map(<[u8]>::to_vec), done)],
                priority_now(),
            )
        })
    }

    /// [`LeaseWriter::start_write_lease`](crate::LeaseWriter::start_write_lease), waited for:
    /// the record's offset.
    fn write_lease(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        wait_for("lease write", |done| {
            self.start_write_lease(
                partition,
                key.to_vec(),
                value.map(<[u8]>::to_vec),
                token,
                priority_now(),
                done,
            )
        })
    }
}

impl<T: Transport + ?Sized> Wait for T {}
