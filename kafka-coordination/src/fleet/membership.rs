//! The fleet's loop: reads the heartbeats, keeps a candidacy per role, and moves roles.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use event_listener::{Event, Listener};
use kafka_coordination_core::machine::Status;
use kafka_coordination_core::partition::role_partition;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::time::UnixMillis;

use super::announce::Announcement;
use super::fleet_error::FleetError;
use super::preference::{self, Candidate, Policy, Version};
use crate::clock::{Clock, Participant};
use crate::host::Host;
use crate::leadership::{Candidacy, Error, Leadership, Shared, Snapshot};
use crate::options::Options;
use crate::transport::Transport;
use crate::watch::{LeaseTracker, WatchEvent};
use kafka_coordination_transport::lock::lock;

/// How a member joins a fleet. `FleetOptions::new(fleet, member)` and the builder methods.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    fleet: String,
    member: String,
    weight: f64,
    version: Option<String>,
    ready: bool,
    policy: Policy,
    max_in_motion: usize,
    options: Options,
}

impl FleetOptions {
    /// Member `member` of fleet `fleet`: weight 1, no version, ready, [`Policy::Balance`], at
    /// most 8 roles in hand-over at once, the default [`Options`]. The member id is the one
    /// its role candidacies use: unique per process, as for any candidacy.
    pub fn new(fleet: &str, member: &str) -> FleetOptions {
        FleetOptions {
            fleet: fleet.to_owned(),
            member: member.to_owned(),
            weight: 1.0,
            version: None,
            ready: true,
            policy: Policy::Balance,
            max_in_motion: 8,
            options: Options::new(),
        }
    }

    /// Its weight: its share of the roles is `weight / sum of the live members' weights`.
    /// A finite number above 0.
    pub fn weight(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// Its version (dot-separated numbers), for [`Policy::PreferNewest`] and
    /// [`Policy::PreferOldest`].
    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.to_owned());
        self
    }

    /// Whether it starts ready to lead (default true). A member that warms a cache first
    /// starts with `false` and calls [`Fleet::set_ready`]; until then it is preferred for no
    /// role (it still takes a role when it is next in rank and the leader is gone).
    pub fn ready(mut self, ready: bool) -> Self {
        self.ready = ready;
        self
    }

    /// The fleet's policy. Every member of a fleet must give the same one.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// How many of its roles it hands over at once, at most (at least 1). Standby
    /// registrations that move behind a preferred member (no term changes hands) count
    /// separately: at most eight times as many, and at least 64.
    pub fn max_in_motion(mut self, n: usize) -> Self {
        self.max_in_motion = n;
        self
    }

    /// The options of its candidacies: its heartbeat's and every role's (the timing, the
    /// clock). The heartbeat's lease is the liveness bound of the member.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }
}

/// A member of the fleet as the last read of the heartbeats showed it.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetMember {
    /// What it announced.
    pub announcement: Announcement,
    /// Until when its heartbeat lease runs.
    pub live_until: UnixMillis,
}

/// What a member's fleet is doing, as of its last pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetStats {
    /// Roles this member hosts.
    pub roles: usize,
    /// Roles it leads now.
    pub leading: usize,
    /// Roles for which it is the preferred owner.
    pub preferred: usize,
    /// Roles it is handing over now.
    pub in_motion: usize,
    /// Standby registrations it is moving behind a preferred member now.
    pub requeues_in_motion: usize,
    /// Live members, itself included.
    pub live_members: usize,
    /// Hand-overs it started since it joined.
    pub handovers: u64,
    /// Standby moves it started since it joined.
    pub requeues: u64,
    /// Passes in which live members announced different policies (no move for preference).
    pub policy_conflicts: u64,
    /// Heartbeats in the fleet topic that were not announcements (ignored).
    pub bad_announcements: u64,
    /// Whether it drains (or has drained).
    pub draining: bool,
    /// Whether the drain was asked for through the fleet topic ([`request_drain`]).
    pub drain_requested: bool,
    /// Whether the last pass shared the roles with bounded loads (every kept member announced
    /// the same roles) rather than by rendezvous alone.
    pub bounded: bool,
}

/// What [`Fleet::drain_blocking`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// Roles it handed over.
    pub handed_over: usize,
    /// Standby registrations it withdrew.
    pub withdrawn: usize,
    /// Roles it still leads: no live member was registered behind it to take them when the
    /// wait ended. Empty when the drain is complete.
    pub kept: Vec<String>,
}

impl DrainReport {
    /// Whether the member leads nothing and hosts nothing now.
    pub fn is_complete(&self) -> bool {
        self.kept.is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Move {
    /// A leader resigning for the preferred member; registers again once ended.
    Handover,
    /// A standby withdrawing to register again behind a preferred member.
    Requeue,
    /// Draining: withdraws or resigns for good.
    Leave,
}

struct Slot {
    /// The running candidacy's shared state.
    shared: Option<Arc<Shared>>,
    /// The candidacy, until the application takes it with `next_term`.
    pending: Option<Candidacy>,
    moving: Option<Move>,
    /// When its current candidacy started (moves wait a settle time after it).
    started: UnixMillis,
    /// A start that failed, to try again.
    failed_start: Option<Error>,
}

/// Incremental reads of the fleet topic: one tracker per heartbeat and announcement role of
/// the fleet.
struct Heartbeats {
    next: Vec<i64>,
    trackers: BTreeMap<String, LeaseTracker>,
}

/// The fleet's roles in the fleet topic: `<fleet>/<member>` (heartbeat, led by `<member>`),
/// `<fleet>//a/<member>` (announcement, led by the encoded announcement) and
/// `<fleet>//drain/<member>` (drain requests).
fn heartbeat_role(fleet: &str, member: &str) -> String {
    format!("{fleet}/{member}")
}

fn announce_role(fleet: &str, member: &str) -> String {
    format!("{fleet}//a/{member}")
}

struct St {
    roles: BTreeMap<String, Slot>,
    /// This member's drain-request role in the fleet topic (see [`drain_role`]).
    drain_requests: LeaseTracker,
    draining: bool,
    /// [`Fleet::leave`] took the heartbeat and the announcement: neither starts again.
    left: bool,
    ready: bool,
    /// The heartbeat candidacy (liveness).
    heartbeat: Option<Candidacy>,
    /// The announcement candidacy and the id it announces with.
    announcing: Option<(String, Candidacy)>,
    /// The last announcement read of each member, kept while its announcement moves.
    announced: HashMap<String, Announcement>,
    /// The digest of the hosted roles as last announced, and when the role set last changed.
    roles_digest: Option<(u64, usize)>,
    roles_changed_at: Option<UnixMillis>,
    beats: Heartbeats,
    live: Vec<FleetMember>,
    /// When each member was first seen live in its current run of liveness.
    live_since: HashMap<String, UnixMillis>,
    stats: FleetStats,
    drain: DrainReport,
    /// A drain request came through the fleet topic.
    drain_requested: bool,
    read_error: Option<String>,
    /// Why this member's heartbeat or announcement candidacy last ended with an error, until
    /// the member is seen live again.
    heartbeat_error: Option<String>,
}

/// Starts a candidacy in the fleet topic: (role, member id, options).
type StartFn = dyn Fn(&str, &str, Options) -> Result<Candidacy, Error> + Send + Sync;
/// Reads a partition of the fleet topic from an offset.
type ReadFn = dyn Fn(i32, i64) -> Result<crate::transport::ReadBatch, String> + Send + Sync;

pub(super) struct Inner {
    fleet: String,
    me: String,
    /// The clock when the member joined: drain requests granted before it are old news.
    joined_at: UnixMillis,
    weight: f64,
    version: Option<Version>,
    policy: Policy,
    max_in_motion: usize,
    options: Options,
    clock: Arc<dyn Clock>,
    host: Host,
    start_heartbeat: Box<StartFn>,
    read: Box<ReadFn>,
    partitions: i32,
    state: Mutex<St>,
    /// Rung when a role's slot changed (a new candidacy, a drain): `next_term` waits on it.
    changed: Event,
    /// Wakes the loop (a drain, a readiness change, the last handle gone).
    wake: Event,
    closed: AtomicBool,
    idle: Arc<Idle>,
}

/// The loop as a participant of a manual clock's `settle`.
struct Idle {
    seen: Mutex<Option<u64>>,
    ended: AtomicBool,
    name: String,
    inner: Mutex<Weak<Inner>>,
}

impl Participant for Idle {
    fn unsettled(&self, changes: u64) -> Option<String> {
        if self.ended.load(Ordering::SeqCst) {
            return None;
        }
        let ended_unseen = || {
            let inner = lock(&self.inner).upgrade();
            inner.is_some_and(|i| i.ended_unseen())
        };
        match *lock(&self.seen) {
            Some(seen) if seen >= changes && !ended_unseen() => None,
            _ => Some(format!("{}: balancing", self.name)),
        }
    }
}

/// A member's place in a fleet: starts the roles it hosts and moves them (see the
/// [module](super) docs). Clone it freely; the loop runs on a thread of its own while a handle
/// (a `Fleet` or a [`FleetRole`]) lives.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("fleet", &self.inner.fleet)
            .field("member", &self.inner.me)
            .finish()
    }
}

/// One role a fleet member hosts: wait for its terms with [`next_term_blocking`] or
/// [`next_term`].
///
/// [`next_term_blocking`]: Self::next_term_blocking
/// [`next_term`]: Self::next_term
pub struct FleetRole {
    inner: Arc<Inner>,
    role: String,
}

impl std::fmt::Debug for FleetRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetRole")
            .field("role", &self.role)
            .finish()
    }
}

fn check_name(what: &'static str, name: &str) -> Result<(), FleetError> {
    if name.is_empty() || name.contains('/') {
        return Err(FleetError::InvalidName {
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}

impl Fleet {
    /// Joins fleet `options`' fleet as its member: starts its heartbeat in the fleet topic
    /// (`fleet_transport`, a transport on a topic of the fleet's own, one partition is enough)
    /// and the loop that moves roles; roles are started on `host` with [`start`](Self::start).
    ///
    /// Refuses a weight that is not above 0, a version that does not parse, an empty member
    /// or fleet name (or one with `/`), and `max_in_motion` 0, with an error naming the value.
    pub fn join<T: Transport + Send + Sync + ?Sized + 'static>(
        host: &Host,
        fleet_transport: Arc<T>,
        options: FleetOptions,
    ) -> Result<Fleet, FleetError> {
        check_name("name", &options.fleet)?;
        check_name("member", &options.member)?;
        if !(options.weight.is_finite() && options.weight > 0.0) {
            return Err(FleetError::InvalidWeight {
                weight: options.weight,
            });
        }
        if options.max_in_motion == 0 {
            return Err(FleetError::NoMotion);
        }
        let version = options.version.as_deref().map(Version::parse).transpose()?;
        let partitions = fleet_transport.partitions();
        if partitions <= 0 {
            return Err(FleetError::Start(Error::InvalidOptions(
                kafka_coordination_core::TimingError::Partitions { partitions },
            )));
        }
        let clock = options.options.clock.clone();
        let drain_requests = Role::new(drain_role(&options.fleet, &options.member))
            .map_err(|e| FleetError::Start(e.into()))?;
        let starter = fleet_transport.clone();
        let reader = fleet_transport;
        let inner = Arc::new(Inner {
            fleet: options.fleet.clone(),
            me: options.member.clone(),
            joined_at: clock.now(),
            weight: options.weight,
            version,
            policy: options.policy,
            max_in_motion: options.max_in_motion,
            options: options.options.clone(),
            clock: clock.clone(),
            host: host.clone(),
            start_heartbeat: Box::new(move |role, member, opts| {
                crate::blocking::start_shared(starter.clone(), role, member, opts)
            }),
            read: Box::new(move |partition, from| {
                crate::transport::read(&*reader, partition, from, Duration::ZERO)
                    .map_err(|e| e.to_string())
            }),
            partitions,
            state: Mutex::new(St {
                roles: BTreeMap::new(),
                drain_requests: LeaseTracker::new(drain_requests),
                draining: false,
                left: false,
                ready: options.ready,
                heartbeat: None,
                announcing: None,
                announced: HashMap::new(),
                roles_digest: None,
                roles_changed_at: None,
                beats: Heartbeats {
                    next: vec![0; usize::try_from(partitions).unwrap_or(0)],
                    trackers: BTreeMap::new(),
                },
                live: Vec::new(),
                live_since: HashMap::new(),
                stats: FleetStats::default(),
                drain: DrainReport::default(),
                drain_requested: false,
                read_error: None,
                heartbeat_error: None,
            }),
            changed: Event::new(),
            wake: Event::new(),
            closed: AtomicBool::new(false),
            idle: Arc::new(Idle {
                seen: Mutex::new(None),
                ended: AtomicBool::new(false),
                name: format!("fleet {} member {}", options.fleet, options.member),
                inner: Mutex::new(Weak::new()),
            }),
        });
        // The heartbeat goes first: the member is announced before it takes part.
        inner.ensure_heartbeat(&mut lock(&inner.state))?;
        *lock(&inner.idle.inner) = Arc::downgrade(&inner);
        if let Some(manual) = clock.as_manual() {
            let idle: Arc<dyn Participant> = inner.idle.clone();
            manual.register(Arc::downgrade(&idle));
        }
        let weak = Arc::downgrade(&inner);
        let idle = inner.idle.clone();
        std::thread::Builder::new()
            .name(format!("kc-fleet-{}", options.member.replace('\0', "?")))
            .spawn(move || run(weak, idle, clock))
            .map_err(|e| {
                FleetError::Start(Error::Transport(crate::error::TransportError::fatal(
                    format!("could not start the fleet's thread: {e}"),
                )))
            })?;
        Ok(Fleet { inner })
    }

    /// Starts hosting `role`: a candidacy on the host, moved by the fleet from then on. Every
    /// member of the fleet should host the same roles: a role is moved only to a member
    /// registered for it.
    pub fn start(&self, role: &str) -> Result<FleetRole, Error> {
        Role::new(role)?;
        let mut st = lock(&self.inner.state);
        if st.draining {
            return Err(Error::Cancelled);
        }
        if !st.roles.contains_key(role) {
            let slot = self.inner.start_slot(role)?;
            st.roles.insert(role.to_owned(), slot);
            st.stats.roles = st.roles.len();
            st.roles_changed_at = Some(self.inner.clock.now());
        }
        drop(st);
        self.inner.changed.notify(usize::MAX);
        self.inner.wake.notify(usize::MAX);
        Ok(FleetRole {
            inner: self.inner.clone(),
            role: role.to_owned(),
        })
    }

    /// Says whether this member is ready to lead. A member that is not is preferred for no
    /// role; the others move its roles away (and it takes a role only when it is next in rank
    /// and the leader is gone).
    pub fn set_ready(&self, ready: bool) {
        lock(&self.inner.state).ready = ready;
        self.inner.poke();
    }

    /// The live members as of the last pass, sorted by member id.
    pub fn members(&self) -> Vec<FleetMember> {
        lock(&self.inner.state).live.clone()
    }

    /// What the fleet is doing: [`FleetStats::leading`] as of now, the rest as of the last
    /// pass.
    pub fn stats(&self) -> FleetStats {
        let st = lock(&self.inner.state);
        let mut stats = st.stats.clone();
        stats.leading = st
            .roles
            .values()
            .filter(|slot| slot.shared.as_deref().is_some_and(is_leading))
            .count();
        stats
    }

    /// The roles this member leads now, sorted.
    pub fn leading(&self) -> Vec<String> {
        let st = lock(&self.inner.state);
        st.roles
            .iter()
            .filter(|(_, slot)| slot.shared.as_ref().is_some_and(|s| is_leading(s)))
            .map(|(role, _)| role.clone())
            .collect()
    }

    /// The last failure to read the fleet topic, if the last read failed.
    pub fn read_error(&self) -> Option<String> {
        lock(&self.inner.state).read_error.clone()
    }

    /// Why this member's heartbeat or its announcement in the fleet topic last ended with an
    /// error (an ACL the broker refused, say), until the member is seen live again. A member
    /// that never becomes live shows here what holds it back; the fleet keeps starting the
    /// candidacy again meanwhile.
    pub fn heartbeat_error(&self) -> Option<String> {
        lock(&self.inner.state).heartbeat_error.clone()
    }

    /// Starts draining and returns at once: the member announces that it drains (so nobody
    /// prefers it), withdraws every standby registration, and hands every role it leads to a
    /// live member registered behind it, at most `max_in_motion` at a time. A role with no
    /// live member behind it stays led until one registers. Cannot be undone: a drained member
    /// is meant to exit. [`Fleet::drain_report`] says how far it is.
    pub fn start_drain(&self) {
        lock(&self.inner.state).draining = true;
        self.inner.poke();
    }

    /// How far the drain is (empty before it starts).
    pub fn drain_report(&self) -> DrainReport {
        let st = lock(&self.inner.state);
        let mut report = st.drain.clone();
        report.kept = st
            .roles
            .iter()
            .filter(|(_, s)| s.shared.is_some())
            .map(|(r, _)| r.clone())
            .collect();
        report
    }

    /// [`start_drain`](Self::start_drain), then waits until the member hosts no role or
    /// `timeout` passed (real time), and says what was done: [`DrainReport::kept`] lists the
    /// roles it could not hand over in time.
    pub fn drain_blocking(&self, timeout: Duration) -> DrainReport {
        self.start_drain();
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let listener = self.inner.changed.listen();
            let report = self.drain_report();
            if report.is_complete() || std::time::Instant::now() >= deadline {
                return report;
            }
            listener.wait_deadline(deadline);
        }
    }

    /// [`drain_blocking`](Self::drain_blocking) for async code: waits on the fleet's events,
    /// without a timeout (wrap it in the runtime's own).
    pub async fn drain(&self) -> DrainReport {
        self.start_drain();
        loop {
            let listener = self.inner.changed.listen();
            let report = self.drain_report();
            if report.is_complete() {
                return report;
            }
            listener.await;
        }
    }

    /// Leaves the fleet: resigns this member's heartbeat and announcement in the fleet topic
    /// and waits until both exits are done. The other members see it gone at their next read,
    /// and a process that starts under the same member id takes the heartbeat at once instead
    /// of waiting for the old lease to run out. Call it after [`drain`](Self::drain), just
    /// before the process exits: dropping the `Fleet` resigns them too, but in the background,
    /// and an exit right after can cut that short. The roles are not touched (drain first);
    /// the member stays out of the fleet from here on. The first error of the two exits, if
    /// any, says what is left.
    pub async fn leave(&self) -> Result<(), Error> {
        let mut result = Ok(());
        for candidacy in self.take_for_leaving() {
            if let Err(e) = candidacy.resign().await {
                result = result.and(Err(e));
            }
        }
        result
    }

    /// [`leave`](Self::leave), blocking the calling thread.
    pub fn leave_blocking(&self) -> Result<(), Error> {
        let mut result = Ok(());
        for candidacy in self.take_for_leaving() {
            if let Err(e) = candidacy.resign_blocking() {
                result = result.and(Err(e));
            }
        }
        result
    }

    fn take_for_leaving(&self) -> Vec<Candidacy> {
        let mut st = lock(&self.inner.state);
        st.left = true;
        let beat = st.heartbeat.take();
        let announcement = st.announcing.take().map(|(_, c)| c);
        beat.into_iter().chain(announcement).collect()
    }
}

impl FleetRole {
    /// The role's name.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// What the role's current candidacy last reported (`None` after a drain).
    pub fn snapshot(&self) -> Option<Snapshot> {
        let st = lock(&self.inner.state);
        let shared = st.roles.get(&self.role)?.shared.clone()?;
        drop(st);
        let snapshot = shared.lock().snapshot.clone();
        Some(snapshot)
    }

    /// Takes the role's candidacy to wait for its election, or `None` with a listener to wait
    /// for the next one; `Err` once the member drained.
    fn take(&self) -> Result<Option<Candidacy>, Error> {
        let mut st = lock(&self.inner.state);
        let draining = st.draining;
        let Some(slot) = st.roles.get_mut(&self.role) else {
            return Err(Error::Cancelled);
        };
        if let Some(c) = slot.pending.take() {
            return Ok(Some(c));
        }
        if draining && slot.shared.is_none() {
            return Err(Error::Cancelled);
        }
        Ok(None)
    }

    /// Blocks until this member is elected for the role and returns the term, as
    /// `Candidacy::elected_blocking` does. The fleet may end the term at any time by resigning
    /// it (a hand-over): watch [`Leadership::is_done`] as for any term. Call it again for the
    /// next term. Returns [`Error::Cancelled`] once the member drained, and the candidacy's
    /// error when it failed (the fleet starts a new one: call again).
    pub fn next_term_blocking(&self) -> Result<Leadership, Error> {
        loop {
            let listener = self.inner.changed.listen();
            match self.take()? {
                Some(candidacy) => match candidacy.elected_blocking() {
                    Ok(l) if !l.is_done() => return Ok(l),
                    Ok(_) | Err(Error::Cancelled) => continue,
                    Err(e) => return Err(e),
                },
                None => listener.wait(),
            }
        }
    }

    /// [`next_term_blocking`](Self::next_term_blocking) for async code.
    pub async fn next_term(&self) -> Result<Leadership, Error> {
        loop {
            let listener = self.inner.changed.listen();
            match self.take()? {
                Some(candidacy) => match candidacy.elected().await {
                    Ok(l) if !l.is_done() => return Ok(l),
                    Ok(_) | Err(Error::Cancelled) => continue,
                    Err(e) => return Err(e),
                },
                None => listener.await,
            }
        }
    }
}

fn is_leading(shared: &Shared) -> bool {
    let s = shared.lock();
    s.snapshot.status == Status::Leading && s.outcome.is_none() && !s.cancel
}

/// What the loop needs of a role's candidacy, read once per pass.
struct Seen {
    leading: bool,
    ended: bool,
    join: Option<i64>,
    roster: Vec<(String, i64)>,
}

fn see(shared: &Shared) -> Seen {
    let s = shared.lock();
    Seen {
        leading: s.snapshot.status == Status::Leading && s.outcome.is_none() && !s.cancel,
        ended: s.outcome.is_some(),
        join: s.snapshot.join_offset,
        roster: s
            .roster
            .iter()
            .map(|(m, o)| (m.as_str().to_owned(), *o))
            .collect(),
    }
}

impl Inner {
    fn poke(&self) {
        self.wake.notify(usize::MAX);
        if let Some(manual) = self.clock.as_manual() {
            manual.ring();
        }
    }

    fn start_slot(&self, role: &str) -> Result<Slot, Error> {
        let candidacy = self.host.start(role, &self.me, self.options.clone())?;
        Ok(Slot {
            shared: Some(candidacy.shared().clone()),
            pending: Some(candidacy),
            moving: None,
            started: self.clock.now(),
            failed_start: None,
        })
    }

    fn announcement(&self, st: &St) -> Announcement {
        Announcement {
            member: self.me.clone(),
            weight: self.weight,
            version: self.version.clone(),
            ready: st.ready && !st.draining,
            draining: st.draining,
            policy: self.policy,
            roles: st.roles_digest,
            timing: Some((
                u64::try_from(self.options.timing.lease_duration.as_millis()).unwrap_or(u64::MAX),
                u64::try_from(self.options.timing.renew_interval.as_millis()).unwrap_or(u64::MAX),
            )),
        }
    }

    /// Keeps the heartbeat running (started again if it ended), and the announcement current:
    /// started again, once the old one's exit is done, when what it says changed. The digest
    /// of the hosted roles is announced once the role set has not changed for a settle time
    /// (a member starting its roles one by one announces once).
    fn ensure_heartbeat(&self, st: &mut St) -> Result<(), FleetError> {
        if st.left {
            return Ok(());
        }
        let ended = |c: &Candidacy| c.shared().lock().outcome.is_some();
        // What ended a candidacy with an error is kept for `heartbeat_error` before the
        // candidacy is started again (a refused ACL ends every attempt the same way).
        let failure = |c: &Candidacy| match &c.shared().lock().outcome {
            Some(Err(e)) => Some(e.to_string()),
            _ => None,
        };
        if let Some(e) = st.heartbeat.as_ref().and_then(failure) {
            st.heartbeat_error = Some(format!("the heartbeat ended: {e}"));
        }
        if let Some(e) = st.announcing.as_ref().and_then(|(_, c)| failure(c)) {
            st.heartbeat_error = Some(format!("the announcement ended: {e}"));
        }
        if st.heartbeat.as_ref().is_none_or(ended) {
            let role = heartbeat_role(&self.fleet, &self.me);
            st.heartbeat = Some((self.start_heartbeat)(
                &role,
                &self.me,
                self.options.clone(),
            )?);
        }
        let now = self.clock.now();
        let quiet = st
            .roles_changed_at
            .is_none_or(|at| now.since(at) >= self.options.timing.renew_interval);
        if quiet {
            let digest = super::announce::roles_digest(st.roles.keys().map(String::as_str));
            st.roles_digest = Some((digest, st.roles.len()));
        }
        let id = self.announcement(st).encode();
        match &st.announcing {
            Some((announced, c)) if announced == &id && !ended(c) => return Ok(()),
            Some((_, c)) if !ended(c) => {
                c.shared().request_cancel();
                return Ok(());
            }
            _ => {}
        }
        let role = announce_role(&self.fleet, &self.me);
        let candidacy = (self.start_heartbeat)(&role, &id, self.options.clone())?;
        st.announcing = Some((id, candidacy));
        Ok(())
    }

    /// Reads what is new in the fleet topic into the trackers.
    fn read_heartbeats(&self, st: &mut St) {
        let mut bad = 0;
        for partition in 0..self.partitions {
            let index = usize::try_from(partition).unwrap_or(0);
            loop {
                let from = st.beats.next[index];
                let batch = match (self.read)(partition, from) {
                    Ok(batch) => batch,
                    Err(e) => {
                        st.read_error = Some(e);
                        return;
                    }
                };
                let mut sink = Vec::new();
                for r in &batch.records {
                    let Ok(key) = kafka_coordination_core::record::KeyRef::decode(&r.key) else {
                        continue;
                    };
                    let name = key.role();
                    if name == st.drain_requests.state().role().as_str() {
                        st.drain_requests.apply(r, &mut sink);
                        let asked = sink.iter().any(|e| {
                            matches!(e, WatchEvent::Leading(l) if l.granted_at >= self.joined_at)
                        });
                        sink.clear();
                        if asked && !st.draining {
                            st.draining = true;
                            st.drain_requested = true;
                        }
                        continue;
                    }
                    // Heartbeats and announcements, named as `observe::fleet_role` reads them.
                    let Some((member, is_announcement)) =
                        super::observe::fleet_role(&self.fleet, name)
                    else {
                        continue;
                    };
                    let announced_by = is_announcement.then(|| member.to_owned());
                    if !st.beats.trackers.contains_key(name) {
                        let Ok(role) = Role::new(name) else { continue };
                        // Only the roles of this topic's partition rule land here.
                        if role_partition(&role, self.partitions).ok() != Some(partition) {
                            continue;
                        }
                        st.beats
                            .trackers
                            .insert(name.to_owned(), LeaseTracker::new(role));
                    }
                    if let Some(t) = st.beats.trackers.get_mut(name) {
                        t.apply(r, &mut sink);
                        if let Some(member) = announced_by {
                            for e in &sink {
                                let WatchEvent::Leading(l) = e else { continue };
                                match Announcement::decode(l.member.as_str()) {
                                    Ok(a) if a.member == member => {
                                        st.announced.insert(member.clone(), a);
                                    }
                                    _ => bad += 1,
                                }
                            }
                        }
                        sink.clear();
                    }
                }
                let read_any = !batch.records.is_empty();
                let next = batch
                    .records
                    .last()
                    .map_or(from, |r| r.offset.saturating_add(1))
                    .max(batch.end_offset);
                st.beats.next[index] = next;
                for t in st.beats.trackers.values_mut() {
                    if role_partition(t.state().role(), self.partitions).ok() == Some(partition) {
                        t.advance_to(next);
                    }
                }
                if !read_any || next >= batch.end_offset {
                    break;
                }
            }
        }
        st.read_error = None;
        st.stats.bad_announcements += bad;
    }

    /// The live members, by the clock: a heartbeat lease that runs, led by the member it is
    /// named after, and an announcement read.
    fn live_members(&self, st: &mut St, now: UnixMillis) {
        let mut live: BTreeMap<String, FleetMember> = BTreeMap::new();
        for (name, t) in &st.beats.trackers {
            let Some((member, false)) = super::observe::fleet_role(&self.fleet, name) else {
                continue;
            };
            let Some(holder) = t.lease_holder() else {
                continue;
            };
            if !super::observe::heartbeat_is_live(member, &holder, &self.options.timing, now) {
                continue;
            }
            let Some(a) = st.announced.get(member) else {
                continue;
            };
            live.insert(
                member.to_owned(),
                FleetMember {
                    announcement: a.clone(),
                    live_until: holder.deadline,
                },
            );
        }
        for name in live.keys() {
            st.live_since.entry(name.clone()).or_insert(now);
        }
        st.live_since.retain(|name, _| live.contains_key(name));
        if live.contains_key(&self.me) {
            st.heartbeat_error = None;
        }
        st.live = live.into_values().collect();
    }

    /// One pass: heartbeats, ended candidacies, moves.
    fn pass(&self) {
        let now = self.clock.now();
        let mut st = lock(&self.state);
        let st = &mut *st;
        let mut changed = false;
        if let Err(e) = self.ensure_heartbeat(st) {
            st.read_error = Some(format!("the heartbeat could not start: {e}"));
        }
        self.read_heartbeats(st);
        self.live_members(st, now);

        // Candidacies that ended: registered again, unless the member drains.
        let draining = st.draining;
        let mut in_motion = 0;
        let mut requeues = 0;
        for (role, slot) in st.roles.iter_mut() {
            let ended = slot
                .shared
                .as_ref()
                .is_none_or(|s| s.lock().outcome.is_some());
            if ended && (slot.shared.is_some() || slot.failed_start.is_some()) {
                if draining && slot.moving == Some(Move::Handover) {
                    st.drain.handed_over += 1;
                }
                slot.moving = None;
                if draining {
                    slot.shared = None;
                    slot.pending = None;
                    slot.failed_start = None;
                } else {
                    match self.host.start(role, &self.me, self.options.clone()) {
                        Ok(c) => {
                            slot.shared = Some(c.shared().clone());
                            slot.pending = Some(c);
                            slot.started = now;
                            slot.failed_start = None;
                        }
                        Err(e) => {
                            slot.shared = None;
                            slot.pending = None;
                            slot.failed_start = Some(e);
                        }
                    }
                }
                changed = true;
            }
            match slot.moving {
                Some(Move::Handover) => in_motion += 1,
                Some(Move::Requeue | Move::Leave) => requeues += 1,
                None => {}
            }
        }

        let mut leading = 0;
        let mut preferred_count = 0;
        let live_names: HashMap<&str, &FleetMember> = st
            .live
            .iter()
            .map(|m| (m.announcement.member.as_str(), m))
            .collect();
        let me_live = live_names.contains_key(self.me.as_str());
        // A draining member is preferred for nothing, so its policy does not hold the others
        // back: in a rolling upgrade to a new policy, the old member that drains would
        // otherwise keep the new ones from sharing what it hands them.
        let conflict = st
            .live
            .iter()
            .any(|m| !m.announcement.draining && m.announcement.policy != self.policy);
        if conflict {
            st.stats.policy_conflicts += 1;
        }
        let eligible: Vec<Candidate<'_>> = st
            .live
            .iter()
            .filter(|m| m.announcement.ready && !m.announcement.draining)
            .map(|m| Candidate {
                member: m.announcement.member.as_str(),
                weight: m.announcement.weight,
                version: m.announcement.version.as_ref(),
            })
            .collect();
        let kept = preference::kept(self.policy, &eligible);
        // Members that host the same roles (the same digest) share them with bounded loads;
        // otherwise each role goes by rendezvous alone, which needs no agreement on the set.
        let mine = st.roles_digest;
        let bounded = mine.is_some()
            && !kept.is_empty()
            && kept.iter().all(|c| {
                st.live
                    .iter()
                    .find(|m| m.announcement.member == c.member)
                    .is_some_and(|m| m.announcement.roles == mine)
            });
        let role_names: Vec<String> = st.roles.keys().cloned().collect();
        let assignment: HashMap<&str, &str> = if bounded {
            let names: Vec<&str> = role_names.iter().map(String::as_str).collect();
            preference::assign(&names, &kept, preference::BALANCE_SLACK)
        } else {
            HashMap::new()
        };
        st.stats.bounded = bounded;
        // A member counts once it has been live for half a renew interval (it is not flickering)
        // and a role once its candidacy is that old.
        let settle = self.options.timing.renew_interval / 2;
        let requeue_limit = self.max_in_motion.saturating_mul(8).max(64);
        let live_since = &st.live_since;
        let settled_for = |member: &str, d: Duration| {
            live_since
                .get(member)
                .is_some_and(|since| now.since(*since) >= d)
        };
        // Draining: a role is handed over only while another live member that does not
        // drain is there to take it (every member of a fleet hosts the same roles).
        let has_taker = st
            .live
            .iter()
            .any(|m| m.announcement.member != self.me && !m.announcement.draining);
        let mut handovers = 0u64;
        let mut requeued = 0u64;
        let mut withdrawn = 0usize;
        for (role, slot) in st.roles.iter_mut() {
            let Some(shared) = slot.shared.clone() else {
                continue;
            };
            let seen = see(&shared);
            if seen.ended {
                continue;
            }
            if seen.leading {
                leading += 1;
            }
            // A leader does not read its partition, so its roster stops at its election: it
            // ranks every kept member (every member of a fleet hosts the same roles). A standby
            // reads on, and ranks the kept members registered for the role.
            let pref = match assignment.get(role.as_str()) {
                Some(owner) => Some((*owner).to_owned()),
                None => preference::ranking(role, &kept)
                    .first()
                    .map(|c| c.member.to_owned()),
            };
            if pref.as_deref() == Some(self.me.as_str()) {
                preferred_count += 1;
            }
            if slot.moving.is_some() {
                continue;
            }
            if draining {
                if !seen.leading {
                    shared.request_cancel();
                    slot.moving = Some(Move::Leave);
                    withdrawn += 1;
                    changed = true;
                } else if in_motion < self.max_in_motion && has_taker {
                    shared.hand_over();
                    slot.moving = Some(Move::Handover);
                    in_motion += 1;
                    changed = true;
                }
                continue;
            }
            if conflict || !me_live || now.since(slot.started) < settle {
                continue;
            }
            let Some(my_join) = seen.join else { continue };
            if seen.leading {
                let Some(p) = pref.filter(|p| *p != self.me) else {
                    continue;
                };
                // Two settle times: the standbys ahead of the preferred member move behind it
                // after one, so that the hand-over lands on it.
                if in_motion < self.max_in_motion && settled_for(&p, settle * 2) {
                    shared.hand_over();
                    slot.moving = Some(Move::Handover);
                    in_motion += 1;
                    handovers += 1;
                    changed = true;
                }
            } else if requeues < requeue_limit {
                // A standby moves behind a member registered after it that ranks above it for
                // the role (or behind any kept member, when the policy does not keep it).
                let registered: Vec<&str> = seen.roster.iter().map(|(m, _)| m.as_str()).collect();
                let role_kept: Vec<&Candidate<'_>> = kept
                    .iter()
                    .copied()
                    .filter(|c| registered.contains(&c.member))
                    .collect();
                let mut ranking = preference::ranking(role, &role_kept);
                // The owner the bounds gave the role stands first.
                if let Some(owner) = assignment.get(role.as_str()) {
                    if let Some(at) = ranking.iter().position(|c| c.member == *owner) {
                        let first = ranking.remove(at);
                        ranking.insert(0, first);
                    }
                }
                let my_place = ranking.iter().position(|c| c.member == self.me);
                let behind_me_better = seen.roster.iter().any(|(m, joined)| {
                    *joined > my_join
                        && m != &self.me
                        && settled_for(m, settle)
                        && ranking
                            .iter()
                            .position(|c| c.member == m.as_str())
                            .is_some_and(|theirs| my_place.is_none_or(|mine| theirs < mine))
                });
                if behind_me_better {
                    shared.request_cancel();
                    slot.moving = Some(Move::Requeue);
                    requeues += 1;
                    requeued += 1;
                    changed = true;
                }
            }
        }
        st.drain.withdrawn += withdrawn;
        st.stats.leading = leading;
        st.stats.preferred = preferred_count;
        st.stats.in_motion = in_motion;
        st.stats.requeues_in_motion = requeues;
        st.stats.live_members = st.live.len();
        st.stats.handovers += handovers;
        st.stats.requeues += requeued;
        #[cfg(feature = "metrics")]
        crate::metrics::record_fleet(
            &self.fleet,
            &self.me,
            [
                st.stats.leading,
                st.stats.preferred,
                st.stats.in_motion,
                st.stats.live_members,
            ],
            handovers,
        );
        st.stats.draining = draining;
        st.stats.drain_requested = st.drain_requested;
        st.stats.roles = st.roles.len();
        if changed {
            self.changed.notify(usize::MAX);
        }
    }

    /// Whether a move is under way.
    fn moving(&self) -> bool {
        lock(&self.state)
            .roles
            .values()
            .any(|slot| slot.moving.is_some())
    }

    /// Whether a pass has work the clock will not announce: a moving candidacy, the heartbeat
    /// or an announcement being replaced has ended (an end is no clock change).
    fn ended_unseen(&self) -> bool {
        let st = lock(&self.state);
        let ended = |shared: &Shared| shared.lock().outcome.is_some();
        st.roles
            .values()
            .any(|slot| slot.shared.as_deref().is_some_and(ended))
            || st.heartbeat.as_ref().is_some_and(|c| ended(c.shared()))
            || st
                .announcing
                .as_ref()
                .is_some_and(|(_, c)| ended(c.shared()))
    }
}

/// The loop: a pass after every change of a manual clock (and after a candidacy it moves
/// ended, which is no change: looked for every millisecond of real time), else every quarter
/// of a renew interval (at least 20 ms, at most a second) or when poked.
fn run(weak: Weak<Inner>, idle: Arc<Idle>, clock: Arc<dyn Clock>) {
    let interval = {
        let Some(inner) = weak.upgrade() else {
            idle.ended.store(true, Ordering::SeqCst);
            return;
        };
        (inner.options.timing.renew_interval / 4)
            .clamp(Duration::from_millis(20), Duration::from_secs(1))
    };
    'outer: loop {
        let manual = clock.as_manual();
        let seen = manual.map(|m| m.changes());
        let wake = {
            let Some(inner) = weak.upgrade() else { break };
            if inner.closed.load(Ordering::SeqCst) {
                break;
            }
            let wake = inner.wake.listen();
            inner.pass();
            let moving = inner.moving();
            (wake, moving)
        };
        let (wake, moving) = wake;
        match (manual, seen) {
            (Some(m), Some(seen)) => {
                drop(wake);
                *lock(&idle.seen) = Some(seen);
                m.note_progress();
                loop {
                    std::thread::sleep(Duration::from_millis(1));
                    let Some(inner) = weak.upgrade() else {
                        break 'outer;
                    };
                    if inner.closed.load(Ordering::SeqCst) {
                        break 'outer;
                    }
                    if m.changes() != seen || inner.ended_unseen() {
                        break;
                    }
                }
                *lock(&idle.seen) = None;
            }
            _ => {
                // While moves are under way, look every 20 ms: a hand-over's end lets the next
                // one start.
                let wait = if moving {
                    interval.min(Duration::from_millis(20))
                } else {
                    interval
                };
                let _ = wake.wait_timeout(wait);
            }
        }
    }
    idle.ended.store(true, Ordering::SeqCst);
    if let Some(m) = clock.as_manual() {
        m.note_progress();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // The candidacies and the heartbeat are dropped with the state: each cancels (a
        // leader resigns). Wake the loop so that it sees the handles gone.
        self.wake.notify(usize::MAX);
        if let Some(manual) = self.clock.as_manual() {
            manual.ring();
        }
    }
}

/// The role in the fleet topic through which [`request_drain`] asks `member` of `fleet` to
/// drain: `<fleet>//drain/<member>` (no heartbeat can have this name: a member name holds no
/// `/`).
pub fn drain_role(fleet: &str, member: &str) -> String {
    format!("{fleet}//drain/{member}")
}

/// Asks `member` of `fleet` to drain, from any process (the `kafka-coordination fleet drain`
/// command does this): leads the member's drain-request role in the fleet topic for a moment,
/// as `requester`, and resigns. The member, if it is live, starts draining when it reads the
/// lease (a request from before it joined is ignored); [`FleetStats::drain_requested`] shows
/// it. Returns once the request is written; it does not wait for the drain.
pub fn request_drain<T: Transport + Send + Sync + ?Sized + 'static>(
    fleet_transport: Arc<T>,
    fleet: &str,
    member: &str,
    requester: &str,
    options: Options,
) -> Result<(), FleetError> {
    check_name("name", fleet)?;
    check_name("member", member)?;
    let candidacy = crate::blocking::start_shared(
        fleet_transport,
        &drain_role(fleet, member),
        requester,
        options,
    )?;
    let leadership = candidacy.elected_blocking()?;
    leadership.resign_blocking()?;
    Ok(())
}
