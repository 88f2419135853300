//! [`Link`]: a transport wrapper whose connection to the broker can be cut, to play a process
//! that dies, freezes or is partitioned away **without resigning**, in tests and failover drills.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use crate::error::TransportError;
use crate::transport::{
    AcquireDone, Coordinator, DescribeDone, GuardedRecord, LeaseDone, LeaseWriter, ReadBatch,
    ReadDone, Registrar, StateReader,
};

/// Wraps a member's transport. While [`cut`](Link::cut), every call fails as a retriable
/// transport error before it reaches the broker, as if the process had died or lost its network:
/// a leader cannot renew, and it does not know that it has been replaced. [`restore`](Link::restore)
/// brings the link back; the leader's next renewal then meets the broker's fence.
///
/// Cloning shares the switch and the transport (the same member).
#[derive(Debug)]
pub struct Link<T> {
    inner: Arc<T>,
    cut: Arc<AtomicBool>,
}

impl<T> Clone for Link<T> {
    fn clone(&self) -> Self {
        Link {
            inner: Arc::clone(&self.inner),
            cut: Arc::clone(&self.cut),
        }
    }
}

impl<T> Link<T> {
    /// A link to `transport`, connected.
    pub fn new(transport: T) -> Link<T> {
        Link {
            inner: Arc::new(transport),
            cut: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Cuts the link: every later call fails (calls already in flight complete).
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Restores the link.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Whether the link is cut.
    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    /// The wrapped transport, reachable even while the link is cut.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn check(&self) -> Result<(), TransportError> {
        if self.is_cut() {
            Err(TransportError::retriable(
                "the link to the broker is cut (Link::cut: a simulated dead, frozen or partitioned process)",
            ))
        } else {
            Ok(())
        }
    }
}

impl<T: Coordinator> Coordinator for Link<T> {
    fn start_acquire_epoch(
        &self,
        role: Role,
        transaction_timeout: Duration,
        priority: i64,
        done: AcquireDone,
    ) {
        match self.check() {
            Ok(()) => self
                .inner
                .start_acquire_epoch(role, transaction_timeout, priority, done),
            Err(e) => done(Err(e)),
        }
    }

    fn start_describe_epochs(&self, roles: Vec<Role>, priority: i64, done: DescribeDone) {
        match self.check() {
            Ok(()) => self.inner.start_describe_epochs(roles, priority, done),
            Err(e) => done(roles.iter().map(|_| Err(e.clone())).collect()),
        }
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

impl<T: StateReader> StateReader for Link<T> {
    fn partitions(&self) -> i32 {
        self.inner().partitions()
    }
    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: ReadDone,
    ) {
        match self.check() {
            Ok(()) => {
                self.inner
                    .start_read_partition(partition, from_offset, max_wait, priority, done)
            }
            Err(e) => done(Err(e)),
        }
    }

    fn can_long_poll(&self) -> bool {
        self.inner.can_long_poll()
    }

    /// Nothing while the link is cut: the caller then reads, and learns of the cut.
    fn read_tailed(&self, partition: i32, from_offset: i64) -> Option<ReadBatch> {
        self.check().ok()?;
        self.inner.read_tailed(partition, from_offset)
    }

    fn on_tailed(&self, hook: std::sync::Weak<crate::transport::TailHook>) -> bool {
        self.inner.on_tailed(hook)
    }
}

impl<T: Registrar> Registrar for Link<T> {
    fn append_all(&self, appends: Vec<crate::transport::Append>, priority: i64) {
        match self.check() {
            Ok(()) => self.inner.append_all(appends, priority),
            Err(e) => {
                for a in appends {
                    (a.done)(Err(e.clone()));
                }
            }
        }
    }
}

impl<T: LeaseWriter> LeaseWriter for Link<T> {
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
        priority: i64,
        done: LeaseDone,
    ) {
        match self.check() {
            Ok(()) => self
                .inner
                .start_write_lease(partition, key, value, token, priority, done),
            Err(e) => done(Err(e)),
        }
    }

    fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        self.check()?;
        self.inner.guarded_write(token, records)
    }

    fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: crate::transport::GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        self.check()?;
        self.inner
            .guarded_write_with_offsets(token, records, offsets)
    }

    fn start_guarded_write(
        &self,
        token: FencingToken,
        write: crate::transport::GuardedWrite,
        priority: i64,
        done: crate::transport::GuardedDone,
    ) {
        match self.check() {
            Ok(()) => self.inner.start_guarded_write(token, write, priority, done),
            Err(e) => done(Err(e)),
        }
    }
}

#[cfg(all(test, feature = "memory"))]
mod tests {
    use super::*;
    use crate::memory::MemoryBroker;
    use crate::transport::Wait;
    use crate::ManualClock;

    #[test]
    fn a_cut_link_fails_every_call_as_retriable() {
        let broker = MemoryBroker::new(1, Arc::new(ManualClock::default()));
        let link = Link::new(broker.transport("a"));
        link.append(0, b"k", Some(b"v")).unwrap();
        link.cut();
        let e = link.read_partition(0, 0, Duration::ZERO).unwrap_err();
        assert!(e.is_retriable());
        assert!(link.append(0, b"k", None).unwrap_err().is_retriable());
        link.restore();
        assert_eq!(
            link.read_partition(0, 0, Duration::ZERO)
                .unwrap()
                .records
                .len(),
            1
        );
    }
}
