//! What every driver does: run a [`Candidate`] against a transport, execute its commands,
//! sleep until its timeout, and report to the handles. The blocking loop and the async loop
//! differ only in how they wait.

mod claims;
pub(crate) mod dispatch;
#[cfg(feature = "blocking")]
pub(crate) mod thread;

#[cfg(async_driver)]
pub(crate) mod task;

use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::machine::{Candidate, Cleanup, Command, EndReason, Event};
use kafka_coordination_core::record::{MemberId, Role};
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::timing::Timing;

use crate::clock::Clock;
use crate::error::TransportError;
use crate::leadership::{Candidacy, Doorbell, Error, Shared};
use crate::options::Options;
use crate::transport::{ReadBatch, Transport, Wait as _};
use dispatch::Call;
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::{log_debug, log_info, log_warn};

/// Executes one I/O command against the transport, waiting on this thread for its outcome
/// ([`Wait`]), and turns the outcome into the event the machine expects (see [`dispatch`]).
///
/// A read that may wait (`wait_until`) keeps long-polling, in slices of at most `long_poll`,
/// until records arrive, the wait instant comes, or a resign is asked for; with a transport
/// that cannot long-poll it answers at once and the machine's timer takes over.
pub(crate) fn execute<T: Transport + ?Sized>(
    transport: &T,
    command: Command,
    clock: &dyn Clock,
    long_poll: Duration,
    shared: &Shared,
) -> Result<Event, TransportError> {
    match Call::of(command)? {
        Call::Read {
            partition,
            from_offset,
            wait_until,
        } => {
            let until = long_poll_until(transport, wait_until, long_poll);
            let read = |max_wait| transport.read_partition(partition, from_offset, max_wait);
            let batch = match clock.as_manual() {
                Some(manual) => long_poll_manual(manual, read, until, shared)?,
                None => long_poll_real(clock, read, until, long_poll, shared)?,
            };
            Ok(dispatch::read(batch))
        }
        call => dispatch::run(transport, call),
    }
}

/// A standby's long poll on the real clock: reads that wait in the transport, in slices of at
/// most `long_poll`, until records arrive, `until` comes, or a cancel is asked for.
fn long_poll_real(
    clock: &dyn Clock,
    read: impl Fn(Duration) -> Result<ReadBatch, TransportError>,
    until: Option<UnixMillis>,
    long_poll: Duration,
    shared: &Shared,
) -> Result<ReadBatch, TransportError> {
    loop {
        let now = clock.now();
        let max_wait = slice_wait(until, now, long_poll);
        let listening = !max_wait.is_zero();
        if listening {
            shared.update(|s| s.snapshot.idle_at = Some(now));
        }
        let batch = read(max_wait);
        if listening {
            shared.update(|s| s.snapshot.idle_at = None);
        }
        let batch = batch?;
        if !listening || long_poll_over(until, clock.now(), !batch.records.is_empty(), shared) {
            return Ok(batch);
        }
    }
}

/// A standby's long poll on a [`ManualClock`](crate::clock::ManualClock): reads that answer at once,
/// and between them a wait for the clock's next change (a move, a cancel, or a transport that
/// [notified](crate::clock::ManualClock::notify_change) a new record). While it waits the driver is
/// idle at the change count it read before the read, so `settle` knows it has seen everything.
fn long_poll_manual(
    clock: &crate::clock::ManualClock,
    read: impl Fn(Duration) -> Result<ReadBatch, TransportError>,
    until: Option<UnixMillis>,
    shared: &Shared,
) -> Result<ReadBatch, TransportError> {
    use event_listener::Listener;
    loop {
        let listener = clock.listen();
        let seen = clock.changes();
        let batch = read(Duration::ZERO)?;
        let now = clock.now();
        if long_poll_over(until, now, !batch.records.is_empty(), shared) {
            return Ok(batch);
        }
        shared.set_idle(Some((now, seen)));
        listener.wait();
        shared.set_idle(None);
    }
}

/// Until when a read may wait (`wait_until`) as a long poll: `None` when the transport cannot
/// long-poll or long polls are off (`long_poll` zero), and the read answers at once.
pub(crate) fn long_poll_until<T: Transport + ?Sized>(
    transport: &T,
    wait_until: Option<UnixMillis>,
    long_poll: Duration,
) -> Option<UnixMillis> {
    wait_until.filter(|_| transport.can_long_poll() && !long_poll.is_zero())
}

/// How long the next slice of a long poll until `until` may wait in the transport at `now`:
/// at most `long_poll`; zero (answer at once) without a wait.
pub(crate) fn slice_wait(
    until: Option<UnixMillis>,
    now: UnixMillis,
    long_poll: Duration,
) -> Duration {
    until.map_or(Duration::ZERO, |u| u.since(now).min(long_poll))
}

/// Whether a long poll until `until` is over at `now`, after a slice that brought records
/// (`records_came`) or none: records came, the wait is over, or a resign was asked for.
pub(crate) fn long_poll_over(
    until: Option<UnixMillis>,
    now: UnixMillis,
    records_came: bool,
    shared: &Shared,
) -> bool {
    records_came || until.is_none_or(|u| now >= u) || shared.lock().cancel
}

/// An async driver's transport call: the command until it is started, then its result. A
/// driver dropped with its task (a runtime shutting down) collects the call from here: it runs
/// the command itself if it was never started (a read is left so), or waits for the answer of
/// the call under way.
#[cfg_attr(not(async_driver), allow(dead_code))]
pub(crate) struct InFlight {
    command: std::sync::Mutex<Option<Command>>,
    /// When the machine issued the command (the driver's clock).
    issued: UnixMillis,
    /// How much later than issued a lease write began, when its record's deadline was moved
    /// that much (see [`InFlight::start`]).
    delayed: std::sync::Mutex<Option<Duration>>,
    result: std::sync::Mutex<Option<Result<Event, TransportError>>>,
    done: event_listener::Event,
}

#[cfg_attr(not(async_driver), allow(dead_code))]
impl InFlight {
    /// A call that its caller started at `issued`: nothing left to start, the answer to come.
    pub(crate) fn started(issued: UnixMillis) -> InFlight {
        InFlight::of(None, issued)
    }

    /// A call of `command`, which the machine issued at `issued`.
    pub(crate) fn new(command: Command, issued: UnixMillis) -> InFlight {
        InFlight::of(Some(command), issued)
    }

    fn of(command: Option<Command>, issued: UnixMillis) -> InFlight {
        InFlight {
            command: std::sync::Mutex::new(command),
            issued,
            delayed: std::sync::Mutex::new(None),
            result: std::sync::Mutex::new(None),
            done: event_listener::Event::new(),
        }
    }

    /// Takes the command to run it at `now` (`None`: someone else took it). A lease write
    /// that waited since it was issued (in a host's queue) has
    /// its record's deadline moved as much later, so that it promises a lease duration from
    /// when the write begins, as a write made at once does; [`Driver::take_in_flight`] tells
    /// the machine.
    pub(crate) fn start(&self, now: UnixMillis) -> Option<Command> {
        let mut command = lock(&self.command).take()?;
        let waited = now.since(self.issued);
        if let Command::WriteLease {
            value: Some(value), ..
        } = &mut command
        {
            // Whole milliseconds only: the deadline is kept in milliseconds.
            if waited >= Duration::from_millis(1) {
                // The machine encoded it; a value that does not decode is sent as it is.
                if let Ok(moved) = kafka_coordination_core::record::Lease::delayed(value, waited) {
                    *value = moved;
                    *lock(&self.delayed) = Some(waited);
                }
            }
        }
        Some(command)
    }

    /// How much later than issued the lease write began, if its deadline was moved.
    fn delayed(&self) -> Option<Duration> {
        *lock(&self.delayed)
    }

    pub(crate) fn put(&self, result: Result<Event, TransportError>) {
        *lock(&self.result) = Some(result);
        self.done.notify(usize::MAX);
    }

    pub(crate) fn take(&self) -> Option<Result<Event, TransportError>> {
        lock(&self.result).take()
    }

    /// Waits (blocking) for the result until the real-time `deadline`.
    fn wait_until(&self, deadline: std::time::Instant) -> Option<Result<Event, TransportError>> {
        use event_listener::Listener;
        loop {
            let listener = self.done.listen();
            if let Some(r) = self.take() {
                return Some(r);
            }
            if listener.wait_deadline(deadline).is_none() {
                return self.take();
            }
        }
    }
}

/// What the driver does next.
pub(crate) enum Next {
    Io(Command),
    Wait(Option<UnixMillis>),
    Ended,
}

pub(crate) struct Driver<T: Transport + Send + Sync + ?Sized + 'static> {
    candidate: Candidate,
    pub(crate) transport: Arc<T>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) long_poll: Duration,
    resign_sent: bool,
    /// An async driver's transport call under way, whose result is not yet fed. A driver
    /// dropped meanwhile finishes it from here.
    pub(crate) in_flight: Option<Arc<InFlight>>,
    /// The candidacy's metrics (nothing without the `metrics` feature).
    meter: crate::metrics::Meter,
    /// Releases the role on the transport: run once, when the candidate ends or the driver is
    /// dropped (a runtime that went away). `None` while the driver waits for `gate`.
    release: Option<Box<dyn FnOnce() + Send>>,
    /// The claim of this process's previous candidacy of the role, whose exit this one waits
    /// for before it sends anything (see [`claims`]).
    gate: Option<Arc<claims::Claim>>,
    /// What a candidate is made of, to make it afresh when the gate opens.
    fresh: Fresh,
    /// The candidate's read position when the roster was last published (see
    /// [`State::roster`](crate::leadership::State)); -1 before the first.
    roster_at: i64,
}

/// The settings of a driver's candidate, kept to build it again once the driver may start.
struct Fresh {
    timing: Timing,
    give_up_after: Duration,
    evict: bool,
    max_clock_skew: Duration,
    spread: bool,
}

/// How often a driver that waits for a previous candidacy's exit looks again, in case no ring
/// reaches it (a host's bell).
const GATE_RECHECK: Duration = Duration::from_millis(20);

/// How long a driver dropped with its candidate still running (its runtime went away) may
/// spend on the spot resigning, in real time.
const EXIT_ON_DROP: Duration = Duration::from_secs(5);

/// How many threads exit the candidacies of a host whose loop went away, at most.
const EXIT_THREADS: usize = 16;

/// Exits every driver of `drivers` on the spot, in parallel, all within one deadline
/// ([`EXIT_ON_DROP`] from now): a host whose loop went away (its runtime shut down) with
/// thousands of roles, and a cluster that does not answer, returns within that deadline, not
/// a transport timeout per role. Returns once every exit is done or given up.
pub(crate) fn exit_together<T: Transport + Send + Sync + ?Sized + 'static>(
    drivers: Vec<Driver<T>>,
) {
    if drivers.is_empty() {
        return;
    }
    let deadline = std::time::Instant::now() + EXIT_ON_DROP;
    let threads = drivers.len().min(EXIT_THREADS);
    let queue = std::sync::Mutex::new(drivers);
    let exit_next = || loop {
        let Some(mut driver) = lock(&queue).pop() else {
            return;
        };
        if driver.shared.lock().outcome.is_none() {
            driver.exit_by(deadline);
        }
        drop(driver);
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            if std::thread::Builder::new()
                .name("kc-exit".into())
                .spawn_scoped(scope, exit_next)
                .is_err()
            {
                break;
            }
        }
        exit_next();
    });
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Drop for Driver<T> {
    fn drop(&mut self) {
        if self.shared.lock().outcome.is_none() {
            self.exit_now();
        }
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Driver<T> {
    /// Validates everything and builds the driver and its caller's handle; nothing runs yet.
    pub(crate) fn new(
        transport: Arc<T>,
        role: &str,
        member: &str,
        options: Options,
    ) -> Result<(Driver<T>, Candidacy), Error> {
        Driver::with_doorbell(transport, role, member, options, None)
    }

    /// [`Driver::new`] for a driver that a host runs: it rings `doorbell` (the host's) and is
    /// not a participant of a manual clock's settle (the host is, for all it runs).
    pub(crate) fn with_doorbell(
        transport: Arc<T>,
        role: &str,
        member: &str,
        options: Options,
        hosted: Option<Doorbell>,
    ) -> Result<(Driver<T>, Candidacy), Error> {
        let role = Role::new(role)?;
        let member = MemberId::new(member)?;
        let clock = options.clock.clone();
        let timing = Timing {
            partitions: transport.partitions(),
            ..options.timing
        };
        let fresh = Fresh {
            timing,
            give_up_after: options.give_up_after_or_default(),
            evict: options.evict_passed_over,
            max_clock_skew: options.max_clock_skew,
            spread: false,
        };
        let candidate = fresh.candidate(&role, &member, clock.now())?;
        // A role this process's previous candidacy still holds while its exit runs is handed
        // over once that exit is done; any other holder is a second live candidacy.
        let gate = match transport.claim_role(&role) {
            Ok(()) => None,
            Err(e) => match claims::ending(&(transport.claims_scope(), role.clone())) {
                Some(previous) => Some(previous),
                // An exit that let the role go between the two looks leaves it free.
                None => {
                    transport
                        .claim_role(&role)
                        .map_err(|_| Error::Transport(e))?;
                    None
                }
            },
        };
        let own_bell = hosted.is_none();
        let doorbell = match (hosted, clock.as_manual()) {
            (Some(bell), _) => bell,
            (None, Some(manual)) => Doorbell::Clock(manual.clone()),
            (None, None) => Doorbell::Own(event_listener::Event::new()),
        };
        let writer: Arc<crate::leadership::WriteFn> = {
            let transport = Arc::clone(&transport);
            Arc::new(move |token, records, offsets| match offsets {
                Some(offsets) => transport.guarded_write_with_offsets(token, records, offsets),
                None => transport.guarded_write(token, records),
            })
        };
        let start_writer: Arc<crate::leadership::StartWriteFn> = {
            let (transport, clock) = (Arc::clone(&transport), Arc::clone(&clock));
            // Queued as a call issued now would be (a host's calls queue by when they are due).
            Arc::new(move |token, write, done| {
                transport.start_guarded_write(token, write, clock.now().as_millis(), done)
            })
        };
        let meter = crate::metrics::Meter::new(&role, &member, &clock);
        let shared = Shared::new(role, member, doorbell, writer, start_writer, clock.clone());
        if let Some(manual) = clock.as_manual().filter(|_| own_bell) {
            let participant: Arc<dyn crate::clock::Participant> = shared.clone();
            manual.register(Arc::downgrade(&participant));
        }
        let mut driver = Driver {
            candidate,
            transport,
            clock,
            shared: shared.clone(),
            long_poll: options.long_poll,
            resign_sent: false,
            roster_at: -1,
            in_flight: None,
            meter,
            release: None,
            gate,
            fresh,
        };
        if driver.gate.is_none() {
            driver.hold();
        }
        Ok((driver, Candidacy::new(shared)))
    }

    /// Records this driver's claim on its role and how to let it go.
    fn hold(&mut self) {
        let key = (self.transport.claims_scope(), self.shared.role.clone());
        let claim = claims::hold(&key, &self.shared);
        let transport = Arc::clone(&self.transport);
        self.release = Some(Box::new(move || {
            transport.release_role(&key.1);
            claims::release(&key, &claim);
        }));
    }

    /// While the previous candidacy of the role in this process is still leaving: what to do
    /// instead of draining the machine. `None` once this driver may start (its candidate is
    /// then made afresh, so it registers as of now).
    fn admit(&mut self) -> Option<Next> {
        let previous = self.gate.clone()?;
        if self.shared.lock().cancel {
            // Cancelled before it sent anything: nothing to undo.
            self.gate = None;
            let nothing_left = Cleanup {
                superseded: true,
                lease_cleared: true,
                deregistered: true,
            };
            self.shared.finish_ended(EndReason::Resigned, nothing_left);
            return Some(Next::Ended);
        }
        if !previous.released() {
            previous.wake_on_release(&self.shared);
            if !previous.released() {
                return Some(Next::Wait(Some(self.clock.now() + GATE_RECHECK)));
            }
        }
        if let Err(e) = self.transport.claim_role(&self.shared.role) {
            // Still held: by another candidacy that is leaving (wait for it too), or by a
            // live one.
            match claims::ending(&(self.transport.claims_scope(), self.shared.role.clone())) {
                Some(next) => {
                    self.gate = Some(next);
                    return Some(Next::Wait(Some(self.clock.now())));
                }
                None => {
                    self.gate = None;
                    self.shared.finish(Error::Transport(e));
                    return Some(Next::Ended);
                }
            }
        }
        self.gate = None;
        self.hold();
        log_debug!(role = %self.shared.role, member = %self.shared.member, "the previous candidacy of the role in this process has left: starting");
        match self
            .fresh
            .candidate(&self.shared.role, &self.shared.member, self.clock.now())
        {
            Ok(c) => self.candidate = c,
            // The same settings were accepted when the driver was made.
            Err(e) => {
                self.shared.finish(e);
                return Some(Next::Ended);
            }
        }
        None
    }

    fn handle(&mut self, event: Event) -> Result<(), Error> {
        self.candidate
            .handle(self.clock.now(), event)
            .map_err(Error::Internal)
    }

    /// Takes the result of the call in flight, if it finished, and tells the machine how much
    /// later than issued a lease write began ([`InFlight::start`]), before the result is
    /// handed over with [`complete`](Self::complete).
    pub(crate) fn take_in_flight(&mut self) -> Option<Result<Event, TransportError>> {
        let call = self.in_flight.take()?;
        self.note_delay(&call);
        call.take()
    }

    /// Tells the machine how much later than issued `call`'s lease write began, if its
    /// deadline was moved ([`InFlight::start`]).
    fn note_delay(&mut self, call: &InFlight) {
        if let Some(waited) = call.delayed() {
            self.candidate.lease_write_delayed(waited);
        }
    }

    /// The deadline of the last lease this candidacy wrote, while it leads (the machine's own
    /// record, which the snapshot copies).
    pub(crate) fn lease_deadline(&self) -> Option<UnixMillis> {
        self.candidate.last_lease().map(|(_, deadline)| deadline)
    }

    /// See [`Candidate::spread_renewals`].
    pub(crate) fn spread_renewals(&mut self) {
        self.fresh.spread = true;
        self.candidate.spread_renewals();
    }

    /// The partition of the candidacy's role.
    pub(crate) fn partition(&self) -> i32 {
        self.candidate.partition()
    }

    /// Feeds a pending cancel or resign to the machine, once.
    pub(crate) fn check_cancel(&mut self) -> Result<(), Error> {
        let superseded = self.shared.lock().superseded_write.take();
        if let Some(token) = superseded {
            log_warn!(role = %self.shared.role, member = %self.shared.member, %token, "a guarded write was fenced: the term is over");
            self.handle(Event::Superseded { token })?;
        }
        if !self.resign_sent && self.shared.lock().cancel {
            self.resign_sent = true;
            log_info!(role = %self.shared.role, member = %self.shared.member, "resigning");
            self.handle(Event::Resign)?;
        }
        Ok(())
    }

    /// Whether a cancel (or an outside fence) is waiting to be fed.
    pub(crate) fn cancel_pending(&self) -> bool {
        let s = self.shared.lock();
        (!self.resign_sent && s.cancel) || s.superseded_write.is_some()
    }

    /// Drains the machine's commands: publishes notifications, returns the I/O to do.
    pub(crate) fn drain(&mut self) -> Next {
        if let Some(next) = self.admit() {
            return next;
        }
        let mut io = None;
        while let Some(cmd) = self.candidate.poll_command() {
            match cmd {
                Command::Elected { token, term } => {
                    log_info!(role = %self.shared.role, member = %self.shared.member, %token, term, "elected");
                    self.meter.elected();
                    self.shared.update(|s| {
                        s.snapshot.token = Some(token);
                        s.snapshot.term = Some(term);
                    });
                }
                Command::Deposed { token } => {
                    log_warn!(role = %self.shared.role, member = %self.shared.member, %token, "fenced: a newer leader holds the role");
                    self.meter.deposed();
                    self.shared.update(|s| {
                        s.deposed = Some(token);
                        s.snapshot.token = None;
                        s.snapshot.term = None;
                    });
                }
                Command::Ended { reason } => {
                    let cleanup = self.candidate.cleanup();
                    log_info!(role = %self.shared.role, member = %self.shared.member, %reason, %cleanup, "ended");
                    self.meter.ended(reason);
                    // Whatever pair the transport still holds for the role is over for it.
                    if let Some(release) = self.release.take() {
                        release();
                    }
                    self.shared.finish_ended(reason, cleanup);
                    return Next::Ended;
                }
                other => {
                    if let Command::DescribeRole { .. } = other {
                        log_debug!(role = %self.shared.role, member = %self.shared.member, rank = ?self.candidate.rank(), "its turn: checking that no challenge is under way");
                    }
                    if let Command::AcquireEpoch { .. } = other {
                        log_info!(role = %self.shared.role, member = %self.shared.member, rank = ?self.candidate.rank(), "challenging: minting the epoch");
                    }
                    self.meter.issued(&other, &self.candidate);
                    io = Some(other);
                }
            }
        }
        let (status, rank, join_offset) = (
            self.candidate.status(),
            self.candidate.rank(),
            self.candidate.join_offset(),
        );
        let last_lease = self.candidate.last_lease();
        let wake = self.candidate.poll_timeout();
        // The roster changes only with what the candidate read: rebuilt when its read moved.
        let read_to = self.candidate.state().next_offset();
        let roster = (read_to != self.roster_at).then(|| {
            self.roster_at = read_to;
            self.candidate
                .state()
                .roster()
                .map(|(member, joined)| (member.clone(), joined))
                .collect::<Vec<_>>()
        });
        self.shared.update(|s| {
            if let Some(roster) = roster {
                s.roster = roster;
            }
            if s.snapshot.join_offset.is_none() && join_offset.is_some() {
                log_info!(role = %self.shared.role, member = %self.shared.member, offset = ?join_offset, "registered");
            }
            if s.snapshot.rank != rank {
                log_debug!(role = %self.shared.role, member = %self.shared.member, ?rank, "rank");
            }
            s.snapshot.status = status;
            s.snapshot.rank = rank;
            s.snapshot.join_offset = join_offset;
            s.snapshot.wake_at = wake;
            s.snapshot.last_renewal = last_lease.map(|(at, _)| at);
            s.snapshot.lease_deadline = last_lease.map(|(_, deadline)| deadline);
        });
        match io {
            Some(c) => Next::Io(c),
            None => Next::Wait(wake),
        }
    }

    /// Another live process that uses this member id for this role shows in the records this
    /// member (not leading) just read, after its own registration: a registration of the id it
    /// did not write, or a lease of the id written by another process. Two processes with one
    /// member id share one registration key and would withdraw each other's registration; the
    /// one that sees the other stops, without any exit step (its exit would tombstone the
    /// other's registration or fence its term).
    fn duplicate_member(
        &self,
        records: &[kafka_coordination_core::state::Record],
    ) -> Option<Error> {
        use kafka_coordination_core::record::{KeyKind, KeyRef, LeaseRef};
        if self.candidate.token().is_some() {
            return None;
        }
        let join = self.candidate.join_offset()?;
        let (role, member) = (self.shared.role.as_str(), self.shared.member.as_str());
        records.iter().filter(|r| r.offset > join).find_map(|r| {
            let key = KeyRef::decode(&r.key).ok()?;
            let value = r.value.as_deref().filter(|v| !v.is_empty())?;
            if key.role() != role {
                return None;
            }
            let seen = match key.kind() {
                KeyKind::Registration => key.member() == Some(member),
                KeyKind::Lease => LeaseRef::decode(value).is_ok_and(|l| l.member() == member),
            };
            seen.then(|| Error::DuplicateMember {
                member: self.shared.member.to_string(),
                role: self.shared.role.to_string(),
                offset: r.offset,
                own_registration: join,
            })
        })
    }

    /// Feeds the outcome of an I/O command.
    pub(crate) fn complete(&mut self, outcome: Result<Event, TransportError>) -> Result<(), Error> {
        self.meter.completed(&outcome);
        if let Ok(Event::RecordsRead { records, .. }) = &outcome {
            if let Some(duplicate) = self.duplicate_member(records) {
                log_warn!(role = %self.shared.role, member = %self.shared.member, error = %duplicate, "stopping");
                return Err(duplicate);
            }
        }
        match outcome {
            Ok(event) => {
                self.shared.update(|s| {
                    s.failing_since = None;
                    s.last_failure = None;
                    s.snapshot.failing_since = None;
                    s.snapshot.last_error = None;
                });
                self.handle(event)
            }
            Err(e) if e.is_retriable() => {
                log_warn!(role = %self.shared.role, member = %self.shared.member, error = %e, status = ?self.candidate.status(), "transport call failed; retrying");
                let now = self.clock.now();
                self.shared.update(|s| {
                    let first = s.failing_since.map_or(now, |(first, _)| first);
                    s.failing_since = Some((first, now));
                    s.snapshot.failing_since = Some(first);
                    s.snapshot.last_error = Some(e.clone());
                    s.last_failure = Some(e);
                });
                self.handle(Event::Failed)
            }
            Err(e) => {
                log_warn!(role = %self.shared.role, member = %self.shared.member, error = %e, "transport failed for good; cleaning up and ending");
                self.shared.update(|s| {
                    s.snapshot.last_error = Some(e.clone());
                    s.fatal = Some(e);
                });
                self.handle(Event::Fatal)
            }
        }
    }

    /// The runtime that ran the driver went away while its candidate runs (a tokio runtime
    /// dropped with the handle alive, or shutting down; a panic). Resigns on the spot, on this
    /// thread, for at most [`EXIT_ON_DROP`], so the role is handed over instead of left to its
    /// lease, and every wait on the handles returns ([`Error::Stopped`]).
    pub(crate) fn exit_now(&mut self) {
        self.exit_by(std::time::Instant::now() + EXIT_ON_DROP);
    }

    /// [`exit_now`](Self::exit_now) within `deadline`, one deadline for many drivers (a host
    /// whose loop went away exits all its candidacies together, see [`exit_together`]). Every
    /// call of the exit runs on a thread of its own and is waited for until the deadline at
    /// most: a cluster that does not answer costs the exit the deadline, not the transport's
    /// own timeout per call.
    pub(crate) fn exit_by(&mut self, deadline: std::time::Instant) {
        if self.gate.is_some() {
            // It never started: nothing to undo.
            self.shared.request_cancel();
            self.admit();
            return;
        }
        log_warn!(role = %self.shared.role, member = %self.shared.member, "the driver's runtime went away: resigning on the spot");
        self.shared.update(|s| {
            s.stopping = true;
            s.cancel = true;
        });
        // Wakes a driver waiting for a call's answer, so that it notes the exit.
        self.shared.doorbell.ring();
        if self.check_cancel().is_ok() {
            if let Some(call) = self.in_flight.take() {
                // Never started: run it here. Under way: wait for it (within the bound), else
                // it counts as failed and a resigning member goes on with its exit.
                let outcome = match call.start(self.clock.now()) {
                    Some(cmd) => self.execute_by(cmd, deadline),
                    None => call.wait_until(deadline).unwrap_or_else(|| {
                        Err(TransportError::retriable(
                            "the call was abandoned: the driver's runtime went away",
                        ))
                    }),
                };
                self.note_delay(&call);
                let _ = self.complete(outcome);
            }
        }
        let ended = loop {
            if self.check_cancel().is_err() {
                break false;
            }
            match self.drain() {
                Next::Ended => break true,
                Next::Io(cmd) => {
                    let outcome = self.execute_by(cmd, deadline);
                    if self.complete(outcome).is_err() {
                        break false;
                    }
                }
                // A retry after a failure: waited out on a real clock while the bound allows;
                // a manual clock does not move here, so the exit stops.
                Next::Wait(wake) => match self.until_wake(wake) {
                    Wait::Due => {
                        if self.tick().is_err() {
                            break false;
                        }
                    }
                    Wait::For(_, d) if std::time::Instant::now() + d < deadline => {
                        std::thread::sleep(d);
                        if self.tick().is_err() {
                            break false;
                        }
                    }
                    _ => break false,
                },
            }
            if std::time::Instant::now() >= deadline {
                break false;
            }
        };
        if !ended {
            let cleanup = self.candidate.cleanup();
            let last = self.shared.lock().last_failure.clone();
            self.shared.update(|s| s.cleanup = Some(cleanup));
            self.shared.finish(Error::Stopped {
                cleanup: Some(cleanup),
                last,
            });
        }
    }

    /// Runs `cmd` of an exit on the spot (no long poll: an exit does not wait for records) on
    /// a thread of its own, and waits for its outcome until `deadline`; a call still under way
    /// then is abandoned and counts as failed (it may still complete on the broker, as any
    /// call whose answer was lost). Where no thread can be had, the call runs here.
    fn execute_by(
        &self,
        cmd: Command,
        deadline: std::time::Instant,
    ) -> Result<Event, TransportError> {
        let call = Arc::new(InFlight::new(cmd, self.clock.now()));
        let (transport, clock, shared) = (
            Arc::clone(&self.transport),
            Arc::clone(&self.clock),
            Arc::clone(&self.shared),
        );
        let running = Arc::clone(&call);
        let spawned = std::thread::Builder::new()
            .name("kc-exit-call".into())
            .spawn(move || {
                if let Some(cmd) = running.start(clock.now()) {
                    running.put(execute(&*transport, cmd, &*clock, Duration::ZERO, &shared));
                }
            });
        if spawned.is_err() {
            if let Some(cmd) = call.start(self.clock.now()) {
                return execute(
                    &*self.transport,
                    cmd,
                    &*self.clock,
                    Duration::ZERO,
                    &self.shared,
                );
            }
        }
        call.wait_until(deadline).unwrap_or_else(|| {
            Err(TransportError::retriable(
                "the call was abandoned at the exit's deadline: the cluster did not answer in time",
            ))
        })
    }

    /// Ticks the machine at the clock's time.
    pub(crate) fn tick(&mut self) -> Result<(), Error> {
        self.handle(Event::Tick)
    }

    /// Marks the driver idle at `now`, having acted on the manual clock's changes up to
    /// `seen` (see [`Driver::changes`]), or busy.
    pub(crate) fn set_idle(&self, idle: Option<(UnixMillis, u64)>) {
        self.shared.set_idle(idle);
    }

    /// The manual clock's change count (0 on a real clock). Read it after creating the
    /// doorbell listener and before deciding to wait, so a change in between wakes the wait.
    pub(crate) fn changes(&self) -> u64 {
        self.clock.as_manual().map_or(0, |c| c.changes())
    }

    /// Whether the wake instant has come, or the time until it on the real clock.
    pub(crate) fn until_wake(&self, wake: Option<UnixMillis>) -> Wait {
        let now = self.clock.now();
        match wake {
            Some(w) if now >= w => Wait::Due,
            _ if self.clock.as_manual().is_some() => Wait::ClockMoves(now),
            Some(w) => Wait::For(now, w.since(now)),
            None => Wait::ClockMoves(now),
        }
    }
}

pub(crate) enum Wait {
    Due,
    /// Wait for the doorbell only (a manual clock rings it when moved).
    ClockMoves(UnixMillis),
    /// Wait for the doorbell or this much real time.
    For(UnixMillis, Duration),
}

impl Fresh {
    fn candidate(
        &self,
        role: &Role,
        member: &MemberId,
        now: UnixMillis,
    ) -> Result<Candidate, Error> {
        let mut c = Candidate::new(role.clone(), member.clone(), self.timing, now)?;
        c.set_give_up_after(Some(self.give_up_after));
        c.set_evict_passed_over(self.evict);
        c.set_max_clock_skew(self.max_clock_skew);
        if self.spread {
            c.spread_renewals();
        }
        Ok(c)
    }
}
