//! What a watch knows of a role: the lease records read so far ([`LeaseTracker`]), who leads
//! by them ([`RoleLeader`]), and the changes it reports ([`WatchEvent`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::partition::role_partition;
use kafka_coordination_core::record::{MemberId, Role};
use kafka_coordination_core::state::{Applied, Record, RoleState};
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::token::FencingToken;
use kafka_coordination_core::TimingError;

use crate::clock::{Clock, SystemClock};
use crate::leadership::Error;
use crate::options::{Options, DEFAULT_LONG_POLL};
use crate::transport::{ReadBatch, StateReader};

/// The member that leads a role, as the role's lease records say.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The lease holder.
    pub member: MemberId,
    /// The pair it was granted (and writes its lease records with).
    pub token: FencingToken,
    /// The term number: the offset of the term's first lease record (see the [module
    /// docs](crate::watch) for a term whose first record was compacted away before it was read).
    pub term: i64,
    /// When the term began (the epoch was granted), by the leader's clock.
    pub granted_at: UnixMillis,
    /// The deadline of its latest lease record, by the leader's clock: standbys challenge from
    /// this instant on.
    pub deadline: UnixMillis,
    /// The offset of the lease record this was read from (the term's latest renewal).
    pub offset: i64,
}

impl Leader {
    /// Whether the lease is still running at `now`.
    pub fn is_live(&self, now: UnixMillis) -> bool {
        now < self.deadline
    }
}

impl fmt::Display for Leader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} leads with {} (term {}, lease until {} ms)",
            self.member, self.token, self.term, self.deadline.0
        )
    }
}

/// Why nobody leads a role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VacancyReason {
    /// No lease record of the role was read: nobody ever led it, or compaction removed its
    /// lease records.
    Unclaimed,
    /// The lease was cleared: its holder resigned (a lease tombstone).
    Resigned,
    /// The lease ran out without a renewal (judged with the watch's clock).
    Expired,
}

impl fmt::Display for VacancyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VacancyReason::Unclaimed => "unclaimed",
            VacancyReason::Resigned => "resigned",
            VacancyReason::Expired => "expired",
        })
    }
}

/// A role that nobody leads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Vacancy {
    /// Why.
    pub reason: VacancyReason,
    /// The last leader, when the watch read its lease.
    pub previous: Option<Leader>,
    /// The offset of the lease tombstone, for [`VacancyReason::Resigned`].
    pub offset: Option<i64>,
}

/// Who leads a role at one instant: the answer of [`leader`](crate::describe::leader).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RoleLeader {
    /// A member leads; its lease was live when read.
    Leading(Leader),
    /// Nobody leads.
    Vacant(Vacancy),
}

impl RoleLeader {
    /// The leader, if a member leads.
    pub fn leader(&self) -> Option<&Leader> {
        match self {
            RoleLeader::Leading(l) => Some(l),
            RoleLeader::Vacant(_) => None,
        }
    }
}

/// One change of a role's leadership, reported by a [`Watch`](super::Watch).
///
/// # What a watch reports
///
/// A watch reads the role's partition once from its start, up to the last stable offset, and
/// then tails it from the last offset it read (a long poll where the transport has one, such as
/// the Kafka client's shared reader): it never reads from offset 0 again. It applies every
/// record to a [`RoleState`] one by one ([`RoleState::apply`]), so every lease record is seen,
/// however short the term it belongs to and however late the watch reads it.
///
/// * First, the state when the watch caught up: [`WatchEvent::Leading`] or
///   [`WatchEvent::Vacant`] (with [`WatchOptions::history`], every change in the retained log
///   instead, then the state).
/// * [`WatchEvent::Leading`] when a **term** begins: a lease record names a holder or pair
///   that the lease before it did not. The term number is the offset of that record, which is
///   what the leader's own [`Leadership::term`](crate::leadership::Leadership::term) is.
/// * [`WatchEvent::Renewed`] for each renewal of the current term, only with
///   [`WatchOptions::renewals`] (an operator wants one line per change of leader, not one per
///   renewal).
/// * [`WatchEvent::Vacant`] when the lease is cleared ([`VacancyReason::Resigned`]: the leader
///   resigned) or runs out ([`VacancyReason::Expired`]: a read that began at or after the
///   lease's deadline, by the watch's clock, found no renewal; also reported, before the next
///   term, when that term's lease was granted after the previous lease's deadline and the watch
///   had not yet said so). Expiry is judged with the clock of the [`WatchOptions`], so tests
///   drive it with a [`ManualClock`](crate::ManualClock). A lease that expired and is then
///   renewed after all (a slow leader that nobody replaced) is reported as
///   [`WatchEvent::Leading`] again, with the same term.
///
/// # Guarantees and limits
///
/// * Every term whose first lease record the watch reads is reported, in offset order, with its
///   member, pair and term; none is skipped, even one that began and ended between two reads.
/// * A term's number is exact when the watch read its first lease record. A term already
///   running when the watch started whose first lease record was compacted away (only in
///   closed segments older than the topic's compaction lag) is reported with the offset of its
///   oldest retained lease record: a larger number of the same term.
/// * Compaction may remove whole short terms before a watch that starts later reads them; a
///   running watch has read them already.
/// * Events wait in the [`Watch`](super::Watch) until taken; a consumer that never takes them lets them pile
///   up (one per change of leader, more with renewals on).
/// * Expiry is a judgement of the watch's clock against the leader's deadline: with clock skew
///   it comes early or late by the skew, exactly as a standby's challenge does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WatchEvent {
    /// A member leads: a term began, or the watch started during one, or a lease the watch had
    /// reported expired was renewed after all (the same term again).
    Leading(Leader),
    /// The leader renewed its lease: the same term, a new deadline. Only with
    /// [`WatchOptions::renewals`].
    Renewed(Leader),
    /// Nobody leads.
    Vacant(Vacancy),
}

impl WatchEvent {
    /// The leader this event names, if any (for a vacancy: none).
    pub fn leader(&self) -> Option<&Leader> {
        match self {
            WatchEvent::Leading(l) | WatchEvent::Renewed(l) => Some(l),
            WatchEvent::Vacant(_) => None,
        }
    }
}

impl From<RoleLeader> for WatchEvent {
    fn from(r: RoleLeader) -> Self {
        match r {
            RoleLeader::Leading(l) => WatchEvent::Leading(l),
            RoleLeader::Vacant(v) => WatchEvent::Vacant(v),
        }
    }
}

/// Options of a watch (the partition count comes from the reader). Defaults: the system clock, renewals not reported, no
/// history, a long poll of 1 s, a read every 500 ms on a transport that cannot long-poll, and
/// giving up after 60 s of transport failures.
#[derive(Clone)]
pub struct WatchOptions {
    pub(super) clock: Arc<dyn Clock>,
    pub(super) renewals: bool,
    pub(super) history: bool,
    pub(super) long_poll: Duration,
    pub(super) poll_interval: Duration,
    pub(super) give_up_after: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            clock: Arc::new(SystemClock),
            renewals: false,
            history: false,
            long_poll: DEFAULT_LONG_POLL,
            poll_interval: Duration::from_millis(500),
            give_up_after: Duration::from_secs(60),
        }
    }
}

impl fmt::Debug for WatchOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchOptions")
            .field("manual_clock", &self.clock.as_manual().is_some())
            .field("renewals", &self.renewals)
            .field("history", &self.history)
            .field("long_poll", &self.long_poll)
            .field("poll_interval", &self.poll_interval)
            .field("give_up_after", &self.give_up_after)
            .finish()
    }
}

impl From<&Options> for WatchOptions {
    /// The clock and long poll of a candidacy's options.
    fn from(o: &Options) -> Self {
        WatchOptions {
            clock: o.clock.clone(),
            long_poll: if o.long_poll.is_zero() {
                DEFAULT_LONG_POLL
            } else {
                o.long_poll
            },
            ..WatchOptions::default()
        }
    }
}

impl WatchOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The clock that judges expiry; a [`ManualClock`](crate::ManualClock) in tests (the watch
    /// then takes part in [`ManualClock::settle`](crate::ManualClock::settle)).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Report every renewal as [`WatchEvent::Renewed`] (default: no).
    pub fn renewals(mut self, on: bool) -> Self {
        self.renewals = on;
        self
    }

    /// Report every change in the retained log first, instead of only the state the watch
    /// found when it caught up (default: no).
    pub fn history(mut self, on: bool) -> Self {
        self.history = on;
        self
    }

    /// The longest one read waits for new records (default 1 s, at least 1 ms): a stop is
    /// noticed within this bound.
    pub fn long_poll(mut self, d: Duration) -> Self {
        self.long_poll = d.max(Duration::from_millis(1));
        self
    }

    /// How often to read on a transport that cannot long-poll (default 500 ms, at least 1 ms).
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d.max(Duration::from_millis(1));
        self
    }

    /// End the watch with [`Error::Unavailable`] once reads have failed for this long without a
    /// success (default 60 s, by the watch's clock).
    pub fn give_up_after(mut self, d: Duration) -> Self {
        self.give_up_after = d;
        self
    }
}

/// The partition of `role` for a topic of `partitions` partitions.
pub(crate) fn partition_of(role: &Role, partitions: i32) -> Result<i32, Error> {
    role_partition(role, partitions).map_err(|e| {
        Error::InvalidOptions(TimingError::Partitions {
            partitions: e.partitions,
        })
    })
}

/// The leadership of one role, kept up to date one record at a time: a [`RoleState`] plus the
/// term of its lease and what has been reported. The sans-IO heart of [`Watch`](super::Watch) and
/// [`leader`](crate::describe::leader), public for custom loops and tools that read many roles at once.
#[derive(Clone, Debug)]
pub struct LeaseTracker {
    state: RoleState,
    /// The term of the current lease: the offset of the first record of its (member, pair).
    term: Option<i64>,
    /// The current lease was reported expired (the role is vacant until a lease record).
    expired: bool,
    /// The last lease record read was a tombstone, at this offset.
    cleared_at: Option<i64>,
    /// The last leader whose lease was cleared (for a vacancy's `previous`).
    previous: Option<Leader>,
}

impl LeaseTracker {
    /// A tracker of `role` before any record.
    pub fn new(role: Role) -> Self {
        LeaseTracker {
            state: RoleState::new(role),
            term: None,
            expired: false,
            cleared_at: None,
            previous: None,
        }
    }

    /// The roster and lease.
    pub fn state(&self) -> &RoleState {
        &self.state
    }

    /// The offset the next read starts at.
    pub fn next_offset(&self) -> i64 {
        self.state.next_offset()
    }

    /// Notes that a read covered the partition up to `end_offset` (exclusive).
    pub fn advance_to(&mut self, end_offset: i64) {
        self.state.advance_to(end_offset);
    }

    /// Takes one catch-up read's records (their changes are not kept) and its end; true once
    /// the tracker has reached the last stable offset the read saw.
    fn caught_up_with(&mut self, batch: &ReadBatch) -> bool {
        let mut sink = Vec::new();
        for r in &batch.records {
            self.apply(r, &mut sink);
        }
        let read_any = !batch.records.is_empty();
        self.advance_to(batch.end_offset);
        !read_any || self.next_offset() >= batch.end_offset
    }

    /// The leader the current lease names, whether or not it is live.
    pub fn lease_holder(&self) -> Option<Leader> {
        let entry = self.state.lease()?;
        Some(Leader {
            member: entry.lease.member.clone(),
            token: entry.lease.token,
            term: self.term.unwrap_or(entry.offset),
            granted_at: entry.lease.granted_at,
            deadline: entry.lease.deadline,
            offset: entry.offset,
        })
    }

    /// Applies one record (in offset order) and appends what it changed to `events`: nothing,
    /// one event, or a vacancy by expiry followed by the new term's [`WatchEvent::Leading`].
    /// Renewals are appended as [`WatchEvent::Renewed`]; filter them if unwanted.
    pub fn apply(&mut self, record: &Record, events: &mut Vec<WatchEvent>) {
        let before = self.lease_holder();
        match self.state.apply(record) {
            Applied::Leased => {
                let Some(entry) = self.state.lease() else {
                    return;
                };
                let same_term = before.as_ref().is_some_and(|b| {
                    b.member == entry.lease.member && b.token == entry.lease.token
                });
                if same_term {
                    let resumed = std::mem::take(&mut self.expired);
                    if let Some(leader) = self.lease_holder() {
                        events.push(if resumed {
                            WatchEvent::Leading(leader)
                        } else {
                            WatchEvent::Renewed(leader)
                        });
                    }
                    return;
                }
                let granted_at = entry.lease.granted_at;
                if let Some(prev) = before.filter(|_| !self.expired) {
                    if granted_at >= prev.deadline {
                        events.push(WatchEvent::Vacant(Vacancy {
                            reason: VacancyReason::Expired,
                            previous: Some(prev),
                            offset: None,
                        }));
                    }
                }
                self.term = Some(record.offset);
                self.expired = false;
                self.cleared_at = None;
                if let Some(leader) = self.lease_holder() {
                    events.push(WatchEvent::Leading(leader));
                }
            }
            Applied::LeaseCleared => {
                let was_vacant = before.is_none() || self.expired;
                self.term = None;
                self.expired = false;
                self.cleared_at = Some(record.offset);
                if before.is_some() {
                    self.previous = before.clone();
                }
                if !was_vacant {
                    events.push(WatchEvent::Vacant(Vacancy {
                        reason: VacancyReason::Resigned,
                        previous: before,
                        offset: Some(record.offset),
                    }));
                }
            }
            _ => {}
        }
    }

    /// The deadline at which [`expire`](Self::expire) will report a vacancy, if it has not yet.
    pub fn expires_at(&self) -> Option<UnixMillis> {
        if self.expired {
            return None;
        }
        self.state.lease().map(|e| e.lease.deadline)
    }

    /// Once the current lease has run out at `now` (a read that began at `now` found no
    /// renewal): the vacancy, reported once.
    pub fn expire(&mut self, now: UnixMillis) -> Option<WatchEvent> {
        let deadline = self.expires_at()?;
        if now < deadline {
            return None;
        }
        self.expired = true;
        Some(WatchEvent::Vacant(Vacancy {
            reason: VacancyReason::Expired,
            previous: self.lease_holder(),
            offset: None,
        }))
    }

    /// Who leads at `now`; an expired lease counts as vacant (and is then noted as reported).
    pub fn current(&mut self, now: UnixMillis) -> RoleLeader {
        if let Some(WatchEvent::Vacant(v)) = self.expire(now) {
            return RoleLeader::Vacant(v);
        }
        match self.lease_holder() {
            Some(l) if !self.expired => RoleLeader::Leading(l),
            Some(l) => RoleLeader::Vacant(Vacancy {
                reason: VacancyReason::Expired,
                previous: Some(l),
                offset: None,
            }),
            None => RoleLeader::Vacant(Vacancy {
                reason: if self.cleared_at.is_some() {
                    VacancyReason::Resigned
                } else {
                    VacancyReason::Unclaimed
                },
                previous: self.previous.clone(),
                offset: self.cleared_at,
            }),
        }
    }
}

/// Reads `role`'s partition from the start to the last stable offset into a tracker.
fn catch_up<R: StateReader + ?Sized>(
    reader: &R,
    partition: i32,
    tracker: &mut LeaseTracker,
) -> Result<(), Error> {
    loop {
        let batch =
            crate::transport::read(reader, partition, tracker.next_offset(), Duration::ZERO)
                .map_err(Error::Transport)?;
        if tracker.caught_up_with(&batch) {
            return Ok(());
        }
    }
}

/// Who leads `role` at `now`: one read of its partition. A lease whose deadline has passed at
/// `now` is a [`VacancyReason::Expired`] vacancy.
pub fn leader_at<R: StateReader + ?Sized>(
    reader: &R,
    role: &str,
    now: UnixMillis,
) -> Result<RoleLeader, Error> {
    let role = Role::new(role)?;
    let partition = partition_of(&role, reader.partitions())?;
    let mut tracker = LeaseTracker::new(role);
    catch_up(reader, partition, &mut tracker)?;
    Ok(tracker.current(now))
}

/// [`leader_at`] awaited on a task: each read's answer wakes it.
#[cfg(async_driver)]
pub(crate) async fn leader_at_async<R: StateReader + ?Sized>(
    reader: &R,
    role: &str,
    now: UnixMillis,
) -> Result<RoleLeader, Error> {
    let role = Role::new(role)?;
    let partition = partition_of(&role, reader.partitions())?;
    let mut tracker = LeaseTracker::new(role);
    loop {
        let batch = crate::awaited::read(reader, partition, tracker.next_offset(), Duration::ZERO)
            .await
            .map_err(Error::Transport)?;
        if tracker.caught_up_with(&batch) {
            return Ok(tracker.current(now));
        }
    }
}

/// Every role that has records in the state topic, with its tracker caught up to the last
/// stable offset of its partition, sorted by name. Reads each partition of the reader's topic
/// once from its start.
pub fn roles<R: StateReader + ?Sized>(reader: &R) -> Result<Vec<LeaseTracker>, Error> {
    let partitions = reader.partitions();
    if partitions <= 0 {
        return Err(Error::InvalidOptions(TimingError::Partitions {
            partitions,
        }));
    }
    let mut found: std::collections::BTreeMap<String, LeaseTracker> = Default::default();
    let mut sink = Vec::new();
    for partition in 0..partitions {
        let mut next = 0;
        loop {
            let batch = crate::transport::read(reader, partition, next, Duration::ZERO)
                .map_err(Error::Transport)?;
            for r in &batch.records {
                let Ok(key) = kafka_coordination_core::record::KeyRef::decode(&r.key) else {
                    continue;
                };
                let name = key.role();
                if !found.contains_key(name) {
                    let Ok(role) = Role::new(name) else { continue };
                    found.insert(name.to_owned(), LeaseTracker::new(role));
                }
                if let Some(t) = found.get_mut(name) {
                    t.apply(r, &mut sink);
                    sink.clear();
                }
            }
            let read_any = !batch.records.is_empty();
            next = batch
                .records
                .last()
                .map_or(next, |r| r.offset.saturating_add(1))
                .max(batch.end_offset);
            if !read_any || next >= batch.end_offset {
                break;
            }
        }
    }
    Ok(found.into_values().collect())
}
