//! [`MemoryTransport`]: one member's connection to a [`MemoryBroker`](super::MemoryBroker).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use event_listener::EventListener;
use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use super::broker::{MemoryBroker, Shared};
use super::faults::BrokerOp;
use crate::error::TransportError;
use crate::transport::{
    Coordinator, GuardedRecord, LeaseWriter, ReadBatch, Registrar, StateReader,
};
use kafka_coordination_transport::lock::lock;

/// The producer sessions of one member: role -> the pair its last `acquire_epoch` bound, and
/// the way back (a lease write names its pair; a member may hold thousands of roles).
#[derive(Debug, Default)]
struct Sessions {
    by_role: BTreeMap<Role, FencingToken>,
    by_token: HashMap<FencingToken, Role>,
}

impl Sessions {
    fn get(&self, role: &Role) -> Option<&FencingToken> {
        self.by_role.get(role)
    }
    fn insert(&mut self, role: Role, pair: FencingToken) {
        if let Some(old) = self.by_role.insert(role.clone(), pair) {
            self.by_token.remove(&old);
        }
        self.by_token.insert(pair, role);
    }
    fn remove(&mut self, role: &Role) {
        if let Some(pair) = self.by_role.remove(role) {
            self.by_token.remove(&pair);
        }
    }
    fn remove_token(&mut self, token: FencingToken) {
        if let Some(role) = self.by_token.remove(&token) {
            self.by_role.remove(&role);
        }
    }
    fn clear(&mut self) {
        self.by_role.clear();
        self.by_token.clear();
    }
    fn role_of(&self, token: FencingToken) -> Option<&Role> {
        self.by_token.get(&token)
    }
    fn is_empty(&self) -> bool {
        self.by_role.is_empty()
    }
    fn iter(&self) -> impl Iterator<Item = (&Role, &FencingToken)> {
        self.by_role.iter()
    }
}

/// One member's transport to a [`MemoryBroker`]: implements [`Coordinator`], [`StateReader`],
/// [`Registrar`] and [`LeaseWriter`].
///
/// Like the Kafka transport it holds the member's producer session per role: the pair that the
/// last acquire of the role returned. Lease writes go
/// through that session. Cloning shares the sessions (the same member).
#[derive(Clone)]
pub struct MemoryTransport {
    shared: Arc<Shared>,
    name: Arc<str>,
    sessions: Arc<Mutex<Sessions>>,
    claims: Arc<Mutex<std::collections::BTreeSet<Role>>>,
    /// Whether it tails the partitions ([`MemoryTransport::tailing`]).
    tail: bool,
}

impl fmt::Debug for MemoryTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTransport")
            .field("name", &self.name)
            .field("sessions", &*self.sessions())
            .finish()
    }
}

impl MemoryTransport {
    pub(super) fn new(shared: Arc<Shared>, name: String) -> MemoryTransport {
        MemoryTransport {
            shared,
            name: name.into(),
            sessions: Arc::default(),
            claims: Arc::default(),
            tail: false,
        }
    }

    /// A transport that **tails** the partitions as the Kafka transport does
    /// ([`StateReader::read_tailed`] and [`StateReader::on_tailed`]), so that a
    /// [`Host`](crate::host::Host) on the memory broker serves its standbys' long polls the way
    /// it does on Kafka: from the tail, woken by every change of a partition. The tail is not a
    /// broker call: it is not counted in [`MemoryBroker::call_counts`] and no scheduled fault
    /// touches it; an unavailable partition has no tail (the host then reads, and meets the
    /// fault). Off by default: every read of the broker answers at once anyway.
    pub fn tailing(mut self, on: bool) -> MemoryTransport {
        self.tail = on;
        self
    }

    /// The member's name, as given to [`MemoryBroker::transport`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The broker this transport talks to.
    pub fn broker(&self) -> MemoryBroker {
        MemoryBroker {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The pair this member's session for `role` holds, if it acquired the role. The pair may
    /// be stale: the coordinator may have moved on.
    pub fn session(&self, role: &Role) -> Option<FencingToken> {
        self.sessions().get(role).copied()
    }

    /// Drops every producer session, as a process crash does. The next lease write fails
    /// until the member acquires again.
    pub fn crash(&self) {
        self.sessions().clear();
    }

    /// The first half of a lease write: appends the record inside a transaction of the
    /// session holding `token` and leaves the transaction open (the holder paused or is about
    /// to crash). The record is invisible and holds back the LSO of `partition` until
    /// [`commit_lease_write`](Self::commit_lease_write), a takeover (`acquire_epoch` of the
    /// role by anyone) or the transaction timeout. Checked like
    /// a lease write; counted as a
    /// [`BrokerOp::WriteLease`] call. Returns the record's offset.
    pub fn begin_lease_write(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::WriteLease)?;
        let sessions = self.sessions();
        let role = self.resolve(&sessions, token)?;
        let now = self.shared.clock.now();
        let offset =
            locked.lease_write(&role, token, partition, key, value, &self.name, now, false)?;
        locked.finish_call(BrokerOp::WriteLease)?;
        Ok(offset)
    }

    /// Commits the transaction opened by [`begin_lease_write`](Self::begin_lease_write) through
    /// the session holding `token`: its records become visible. Fails with `Fenced` when a
    /// takeover or the timeout aborted it (the coordinator's pair moved on).
    pub fn commit_lease_write(&self, token: FencingToken) -> Result<(), TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::WriteLease)?;
        let sessions = self.sessions();
        let role = self.resolve(&sessions, token)?;
        let now = self.shared.clock.now();
        locked.commit(&role, token, &self.name, now)?;
        locked.finish_call(BrokerOp::WriteLease)
    }

    /// Models a holder that crashes in the middle of a lease write:
    /// [`begin_lease_write`](Self::begin_lease_write), then the session for the role is
    /// dropped (the process is gone). The open transaction holds back the LSO until another
    /// member acquires the role or its timeout passes. Returns the record's offset.
    pub fn begin_lease_write_and_crash(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        let offset = self.begin_lease_write(partition, key, value, token)?;
        self.sessions().remove_token(token);
        Ok(offset)
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        lock(&self.sessions)
    }

    /// The role whose session holds `token`; `Fenced` when no session holds it.
    fn resolve(&self, sessions: &Sessions, token: FencingToken) -> Result<Role, TransportError> {
        if let Some(role) = sessions.role_of(token) {
            return Ok(role.clone());
        }
        if sessions.is_empty() {
            // As the Kafka transport: a transport that holds no epoch refuses as fenced.
            return Err(TransportError::fenced(format!(
                "member `{}` holds no producer session for pair {token}: it never acquired the \
                 role, or its term ended (PRODUCER_FENCED)",
                self.name
            )));
        }
        let held: Vec<String> = sessions
            .iter()
            .map(|(role, pair)| format!("{pair} for role `{role}`"))
            .collect();
        Err(TransportError::fenced(format!(
            "member `{}` writes with pair {token}, but its producer holds {} (PRODUCER_FENCED)",
            self.name,
            held.join(", ")
        )))
    }
}

impl MemoryTransport {
    fn acquire(
        &self,
        role: &Role,
        transaction_timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::Acquire)?;
        let mut sessions = self.sessions();
        let pair = locked.acquire(role, transaction_timeout)?;
        locked.finish_call(BrokerOp::Acquire)?;
        sessions.insert(role.clone(), pair);
        Ok(pair)
    }

    fn describe(&self, role: &Role) -> Result<LeadershipStatus, TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::Describe)?;
        let status = locked.describe(role);
        locked.finish_call(BrokerOp::Describe)?;
        Ok(status)
    }
}

/// Every call but a long poll runs on the caller's thread and calls `done` before it
/// returns (a broker in memory answers at once); a long poll with nothing to read waits on a
/// thread of the broker's.
impl Coordinator for MemoryTransport {
    fn start_acquire_epoch(
        &self,
        role: Role,
        transaction_timeout: Duration,
        _priority: i64,
        done: crate::transport::AcquireDone,
    ) {
        done(self.acquire(&role, transaction_timeout));
    }

    fn start_describe_epochs(
        &self,
        roles: Vec<Role>,
        _priority: i64,
        done: crate::transport::DescribeDone,
    ) {
        done(roles.iter().map(|role| self.describe(role)).collect());
    }

    /// One candidacy per role on a transport (its clones included).
    fn claim_role(&self, role: &Role) -> Result<(), TransportError> {
        let mut claims = lock(&self.claims);
        if !claims.insert(role.clone()) {
            return Err(TransportError::config(format!(
                "role `{role}` already has a candidacy on transport `{}`: one candidacy per role \
                 per client (two would fence each other)",
                self.name
            )));
        }
        Ok(())
    }

    fn claims_scope(&self) -> Option<usize> {
        Some(Arc::as_ptr(&self.claims).cast::<u8>() as usize)
    }

    /// Forgets the session for `role` (later lease writes of this member for it fail) and the
    /// claim.
    fn release_role(&self, role: &Role) {
        self.sessions().remove(role);
        lock(&self.claims).remove(role);
    }
}

impl StateReader for MemoryTransport {
    fn partitions(&self) -> i32 {
        self.shared.partitions
    }
    /// The broker wakes waiting readers on every append, commit and manual-clock move.
    fn can_long_poll(&self) -> bool {
        true
    }

    fn read_tailed(&self, partition: i32, from_offset: i64) -> Option<ReadBatch> {
        if !self.tail {
            return None;
        }
        let locked = self.shared.lock();
        let index = locked.available(partition).ok()?;
        locked.read(index, partition, from_offset.max(0)).ok()
    }

    fn on_tailed(&self, hook: std::sync::Weak<crate::transport::TailHook>) -> bool {
        if !self.tail {
            return false;
        }
        self.shared.tail_hooks.add(hook);
        true
    }

    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: crate::transport::ReadDone,
    ) {
        if max_wait.is_zero() {
            return done(self.read(partition, from_offset, max_wait));
        }
        let me = self.clone();
        let _ = self.shared.waiting.submit(
            priority,
            Box::new(move || done(me.read(partition, from_offset, max_wait))),
        );
    }
}

impl MemoryTransport {
    /// A read, waiting up to `max_wait` for records (see [`MemoryBroker`]'s long polls).
    fn read(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch, TransportError> {
        // Listen to the clock before the lock reads it, so that no move is missed. The manual
        // clock also counts changes that do not move time (this broker's own appends): only a
        // move of the time answers early.
        let manual = self.shared.clock.as_manual();
        let mut clock_moved = manual.map(|c| c.listen());
        let started_at = self.shared.clock.now();
        let mut locked = self.shared.begin_call(BrokerOp::Read)?;
        let index = locked.available(partition)?;
        let deadline = Instant::now().checked_add(max_wait);
        let mut answer_now = max_wait.is_zero();
        loop {
            let batch = locked.read(index, partition, from_offset)?;
            let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            if answer_now || timed_out || !batch.records.is_empty() {
                locked.finish_call(BrokerOp::Read)?;
                return Ok(batch);
            }
            let Some(event) = self.shared.events.get(index) else {
                return Ok(batch);
            };
            // Registered while the lock is held: every later change notifies this listener.
            let mut changed = event.listen();
            drop(locked);
            let woke = wait_any(&mut changed, clock_moved.as_mut(), deadline);
            answer_now = match woke {
                Woke::Partition => false,
                Woke::Deadline => true,
                Woke::Clock => {
                    clock_moved = manual.map(|c| c.listen());
                    self.shared.clock.now() != started_at
                }
            };
            locked = self.shared.lock();
        }
    }
}

impl Registrar for MemoryTransport {
    fn append_all(&self, appends: Vec<crate::transport::Append>, _priority: i64) {
        for a in appends {
            (a.done)(self.append_record(a.partition, &a.key, a.value.as_deref()));
        }
    }
}

impl MemoryTransport {
    fn append_record(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<i64, TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::Append)?;
        let index = locked.available(partition)?;
        let offset = locked.log_mut(index)?.append(key, value);
        locked.dirty.insert(index);
        locked.finish_call(BrokerOp::Append)?;
        Ok(offset)
    }

    fn write_lease_record(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::WriteLease)?;
        let sessions = self.sessions();
        let role = self.resolve(&sessions, token)?;
        let now = self.shared.clock.now();
        let offset =
            locked.lease_write(&role, token, partition, key, value, &self.name, now, true)?;
        locked.finish_call(BrokerOp::WriteLease)?;
        Ok(offset)
    }
}

impl LeaseWriter for MemoryTransport {
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
        _priority: i64,
        done: crate::transport::LeaseDone,
    ) {
        done(self.write_lease_record(partition, &key, value.as_deref(), token));
    }

    /// Appends every record to its data topic (see [`MemoryBroker::topic_records`]) if `token`
    /// is the current pair of the role this member's session holds it for; counted and
    /// faulted as a [`BrokerOp::WriteLease`] call.
    fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::WriteLease)?;
        let sessions = self.sessions();
        let role = self.resolve(&sessions, token)?;
        let offsets = locked.guarded_write(&role, token, records, None, &self.name)?;
        locked.finish_call(BrokerOp::WriteLease)?;
        Ok(offsets)
    }

    /// [`guarded_write`](LeaseWriter::guarded_write) that also commits the group's offsets
    /// (see [`MemoryBroker::committed_offsets`]), all or nothing.
    fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: crate::transport::GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        let mut locked = self.shared.begin_call(BrokerOp::WriteLease)?;
        let sessions = self.sessions();
        let role = self.resolve(&sessions, token)?;
        let written = locked.guarded_write(&role, token, records, Some(offsets), &self.name)?;
        locked.finish_call(BrokerOp::WriteLease)?;
        Ok(written)
    }

    /// Runs the write on the broker's pool of waiting threads (an injected delay or a call
    /// hook may hold it there), never on the caller's thread.
    fn start_guarded_write(
        &self,
        token: FencingToken,
        write: crate::transport::GuardedWrite,
        priority: i64,
        done: crate::transport::GuardedDone,
    ) {
        let me = self.clone();
        let _ = self.shared.waiting.submit(
            priority,
            Box::new(move || done(write.run_blocking(&me, token))),
        );
    }
}

/// Why [`wait_any`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Woke {
    /// The partition changed.
    Partition,
    /// The manual clock moved.
    Clock,
    /// The deadline passed.
    Deadline,
}

/// Blocks the thread until `changed` fires, `clock` (if any) fires, or `deadline` (if any)
/// passes.
fn wait_any(
    changed: &mut EventListener,
    mut clock: Option<&mut EventListener>,
    deadline: Option<Instant>,
) -> Woke {
    let (parker, unparker) = parking::pair();
    let waker = Waker::from(unparker);
    let mut cx = Context::from_waker(&waker);
    loop {
        if Pin::new(&mut *changed).poll(&mut cx).is_ready() {
            return Woke::Partition;
        }
        if let Some(clock) = clock.as_deref_mut() {
            if Pin::new(clock).poll(&mut cx).is_ready() {
                return Woke::Clock;
            }
        }
        match deadline {
            None => parker.park(),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return Woke::Deadline;
                }
                parker.park_deadline(deadline);
            }
        }
    }
}

impl MemoryBroker {
    /// A transport for one member, named `name` in messages and in the audit log. Each member
    /// needs its own: it holds the member's producer session.
    pub fn transport(&self, name: impl Into<String>) -> MemoryTransport {
        MemoryTransport::new(Arc::clone(&self.shared), name.into())
    }
}
