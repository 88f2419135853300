//! The handles a caller holds: [`Candidacy`] while waiting for its turn, [`Leadership`] while
//! leading. Both are runtime-neutral: they offer blocking waits and futures that work on any
//! executor.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use event_listener::{Event, EventListener, Listener};
use kafka_coordination_core::machine::{Cleanup, EndReason, Status};
use kafka_coordination_core::record::{MemberId, Role};
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::token::FencingToken;

pub(crate) use crate::error::Error;
use crate::error::TransportError;
use crate::transport::{GroupOffsets, GuardedDone, GuardedRecord, GuardedWrite};

/// Executes a guarded write (with a group's offsets, if any) through the candidacy's transport.
pub(crate) type WriteFn = dyn Fn(
        FencingToken,
        &[GuardedRecord<'_>],
        Option<GroupOffsets<'_>>,
    ) -> Result<Vec<i64>, TransportError>
    + Send
    + Sync;

/// Starts a guarded write through the candidacy's transport
/// ([`LeaseWriter::start_guarded_write`](crate::transport::LeaseWriter::start_guarded_write)):
/// returns at once, and the outcome goes to the `done` it is given.
pub(crate) type StartWriteFn = dyn Fn(FencingToken, GuardedWrite, GuardedDone) + Send + Sync;

/// What a driver last reported about its candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// Where the candidate is in its life.
    pub status: Status,
    /// Its rank at the last evaluation (0 challenges first).
    pub rank: Option<usize>,
    /// The offset of its registration.
    pub join_offset: Option<i64>,
    /// The pair it leads with.
    pub token: Option<FencingToken>,
    /// The term number it leads with: the offset of its term's first lease record. Strictly
    /// greater than every earlier term's of the role.
    pub term: Option<i64>,
    /// When the driver last went to sleep with nothing outstanding, by its clock; `None` while
    /// it is busy. Tests use it to let drivers settle after moving a manual clock.
    pub idle_at: Option<UnixMillis>,
    /// The instant it will wake at, when idle.
    pub wake_at: Option<UnixMillis>,
    /// While leading: the deadline of its last lease record.
    pub lease_deadline: Option<UnixMillis>,
    /// While leading: when its last successful lease write (claim or renewal) was issued.
    pub last_renewal: Option<UnixMillis>,
    /// While transport calls keep failing (and are retried): when the first of them failed.
    /// `None` after a success. Progress is visible here without any log subscriber.
    pub failing_since: Option<UnixMillis>,
    /// The last failure of that run (say a refused connection), as soon as it happened.
    pub last_error: Option<TransportError>,
}

/// A leader's health, for a liveness or readiness probe (see [`Leadership::health`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Whether the term is still on (`done` has not fired).
    pub leading: bool,
    /// The deadline of the last lease record this leader wrote.
    pub lease_deadline: Option<UnixMillis>,
    /// When the last successful renewal (or the claim) was issued.
    pub last_renewal: Option<UnixMillis>,
    /// How long transport calls have been failing without a success, if they are.
    pub failing_for: Option<Duration>,
    /// The driver clock's time when this was read.
    pub now: UnixMillis,
}

impl Health {
    /// Healthy when leading and the last renewal is younger than `max_age` (pick a few renew
    /// intervals, well below the lease): a leader that cannot renew turns unhealthy before its
    /// standbys take over. The spirit of client-go's `HealthzAdaptor`.
    pub fn is_healthy(&self, max_age: Duration) -> bool {
        self.leading
            && self
                .last_renewal
                .is_some_and(|at| self.now.since(at) <= max_age)
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) snapshot: Snapshot,
    pub(crate) deposed: Option<FencingToken>,
    pub(crate) outcome: Option<Result<(), Error>>,
    pub(crate) cancel: bool,
    /// The clock readings of the first and the latest failure of the current run of failures.
    pub(crate) failing_since: Option<(UnixMillis, UnixMillis)>,
    pub(crate) last_failure: Option<TransportError>,
    /// The failure that will not pass, which ended (or is ending) the candidacy.
    pub(crate) fatal: Option<TransportError>,
    /// A guarded write with this pair was fenced; the driver tells the machine.
    pub(crate) superseded_write: Option<FencingToken>,
    /// While idle on a manual clock: the clock's change count the driver had acted on.
    pub(crate) idle_seen: Option<u64>,
    /// What the exit did, once the candidate ended.
    pub(crate) cleanup: Option<Cleanup>,
    /// The driver is being dropped with the candidate still running (its runtime went away):
    /// it exits on the spot, and the end is reported as [`Error::Stopped`].
    pub(crate) stopping: bool,
    /// The registered members in join order, with their join offsets, as the candidate last
    /// read them (the fleet's balancer reads it).
    pub(crate) roster: Vec<(MemberId, i64)>,
    /// A fleet is handing the term over: it is over for the application from that moment,
    /// before the resign's first step, so that the work stops before a successor can start.
    pub(crate) handed_over: bool,
}

/// State shared by a driver and the handles.
pub(crate) struct Shared {
    pub(crate) role: Role,
    pub(crate) member: MemberId,
    state: Mutex<State>,
    /// Rung on every change of `state`.
    pub(crate) changed: Event,
    /// Wakes the driver (cancel, resign). For a manual clock this is the clock's own event.
    pub(crate) doorbell: Doorbell,
    /// Guarded writes through the candidacy's transport, blocking the caller.
    pub(crate) writer: Arc<WriteFn>,
    /// Guarded writes through the candidacy's transport, completed later (the async handles').
    pub(crate) start_writer: Arc<StartWriteFn>,
    /// The driver's clock (for health checks).
    pub(crate) clock: Arc<dyn crate::clock::Clock>,
}

/// How a handle wakes whoever runs its candidacy (to act on a cancel or a resign), and how that
/// runner waits for it. The handles know their runner only through this.
#[derive(Debug)]
pub(crate) enum Doorbell {
    /// A runner of one candidacy (a driver) owns the event.
    Own(Event),
    /// On a manual clock, the clock's own event (so that `settle` sees the wake-up).
    Clock(crate::clock::ManualClock),
    /// A runner of many candidacies (a host) is woken through its own bell.
    #[cfg_attr(not(any_driver), allow(dead_code))]
    Runner(Arc<dyn Wake>),
}

/// The bell of a runner of many candidacies: what a hosted candidacy's [`Doorbell`] rings.
pub(crate) trait Wake: std::fmt::Debug + Send + Sync {
    /// A listener that fires at the next [`ring`](Wake::ring).
    fn listen(&self) -> EventListener;
    /// Wakes the runner because one of its candidacies was cancelled or asked to resign.
    fn ring(&self);
}

impl Doorbell {
    #[cfg_attr(not(any_driver), allow(dead_code))]
    pub(crate) fn listen(&self) -> EventListener {
        match self {
            Doorbell::Own(e) => e.listen(),
            Doorbell::Clock(c) => c.listen(),
            Doorbell::Runner(b) => b.listen(),
        }
    }
    pub(crate) fn ring(&self) {
        match self {
            Doorbell::Own(e) => {
                e.notify(usize::MAX);
            }
            Doorbell::Clock(c) => c.ring(),
            Doorbell::Runner(b) => b.ring(),
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Candidacy")
            .field("role", &self.role.as_str())
            .field("member", &self.member.as_str())
            .field("status", &s.snapshot.status)
            .field("token", &s.snapshot.token)
            .field("term", &s.snapshot.term)
            .field("rank", &s.snapshot.rank)
            .finish()
    }
}

impl Shared {
    pub(crate) fn new(
        role: Role,
        member: MemberId,
        doorbell: Doorbell,
        writer: Arc<WriteFn>,
        start_writer: Arc<StartWriteFn>,
        clock: Arc<dyn crate::clock::Clock>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            writer,
            start_writer,
            clock,
            role,
            member,
            state: Mutex::new(State {
                snapshot: Snapshot {
                    status: Status::Registering,
                    rank: None,
                    join_offset: None,
                    token: None,
                    term: None,
                    idle_at: None,
                    wake_at: None,
                    lease_deadline: None,
                    last_renewal: None,
                    failing_since: None,
                    last_error: None,
                },
                deposed: None,
                outcome: None,
                cancel: false,
                failing_since: None,
                last_failure: None,
                fatal: None,
                superseded_write: None,
                idle_seen: None,
                cleanup: None,
                stopping: false,
                roster: Vec::new(),
                handed_over: false,
            }),
            changed: Event::new(),
            doorbell,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave it inconsistent (plain field writes).
        kafka_coordination_transport::lock::lock(&self.state)
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.changed.notify(usize::MAX);
        if let Doorbell::Clock(clock) = &self.doorbell {
            clock.note_progress();
        }
    }

    /// Marks the driver idle since `at` having acted on the clock's changes up to `seen`, or
    /// busy (`None`).
    pub(crate) fn set_idle(&self, idle: Option<(UnixMillis, u64)>) {
        self.update(|s| {
            s.snapshot.idle_at = idle.map(|(at, _)| at);
            s.idle_seen = idle.map(|(_, seen)| seen);
        });
    }

    /// Whether the candidacy's term is over or ending: fenced, asked to resign, or ended.
    pub(crate) fn term_is_over(&self) -> bool {
        let s = self.lock();
        s.deposed.is_some() || s.outcome.is_some() || s.cancel
    }

    pub(crate) fn request_cancel(&self) {
        self.update(|s| s.cancel = true);
        self.doorbell.ring();
    }

    /// Ends the term for the application at once (`done` fires, `is_done` turns true), then
    /// resigns as [`request_cancel`](Self::request_cancel) does: a fleet's hand-over.
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(crate) fn hand_over(&self) {
        self.update(|s| {
            s.handed_over = s.snapshot.token.is_some();
            s.cancel = true;
        });
        self.doorbell.ring();
    }

    /// The driver stopped with an error of its own (it ran no cleanup).
    #[cfg_attr(not(any_driver), allow(dead_code))]
    pub(crate) fn finish(&self, error: Error) {
        self.finish_with(Err(error), None);
    }

    /// The candidate ended for `reason` after an exit that did `cleanup`.
    pub(crate) fn finish_ended(&self, reason: EndReason, cleanup: Cleanup) {
        self.finish_with(Ok(reason), Some(cleanup));
    }

    fn finish_with(&self, reason: Result<EndReason, Error>, cleanup: Option<Cleanup>) {
        self.update(|s| {
            if s.outcome.is_some() {
                return;
            }
            s.snapshot.status = Status::Ended;
            s.snapshot.token = None;
            s.snapshot.term = None;
            if cleanup.is_some() {
                s.cleanup = cleanup;
            }
            let incomplete = cleanup.filter(|c| !c.complete());
            if s.stopping && reason.is_ok() {
                s.outcome = Some(Err(Error::Stopped {
                    cleanup,
                    last: s.last_failure.clone(),
                }));
                return;
            }
            s.outcome = Some(match reason {
                Ok(EndReason::Resigned) => match incomplete {
                    None => Ok(()),
                    Some(cleanup) => Err(Error::Incomplete {
                        cleanup,
                        last: s.last_failure.clone(),
                    }),
                },
                Ok(EndReason::Failed) => {
                    let e = s.fatal.clone().unwrap_or_else(|| {
                        TransportError::fatal("a transport call failed for good")
                    });
                    Err(Error::Transport(match incomplete {
                        None => e,
                        Some(cleanup) => TransportError::new(
                            e.kind(),
                            format!("{}; on the way out: {cleanup}", e.message()),
                        ),
                    }))
                }
                Ok(EndReason::Fenced { token }) => Err(Error::Fenced { token }),
                Ok(EndReason::Unavailable) => Err(Error::Unavailable {
                    waited: s
                        .failing_since
                        .map_or(Duration::ZERO, |(first, last)| last.since(first)),
                    last: s
                        .last_failure
                        .clone()
                        .unwrap_or_else(|| TransportError::retriable("no error recorded")),
                }),
                Err(e) => Err(e),
            });
        });
    }

    /// Waits (blocking) until `ready` gives a value.
    fn wait_blocking<T>(&self, mut ready: impl FnMut(&State) -> Option<T>) -> T {
        loop {
            let listener = self.changed.listen();
            if let Some(v) = ready(&self.lock()) {
                return v;
            }
            listener.wait();
        }
    }

    /// Waits (blocking) until `ready` gives a value or the real-time `deadline` passes; then
    /// `ready` is asked one last time.
    /// `deadline = None` (a timeout too long to represent) waits without one.
    fn wait_blocking_until<T>(
        &self,
        deadline: Option<Instant>,
        mut ready: impl FnMut(&State) -> Option<T>,
    ) -> Option<T> {
        let Some(deadline) = deadline else {
            return Some(self.wait_blocking(ready));
        };
        loop {
            let listener = self.changed.listen();
            if let Some(v) = ready(&self.lock()) {
                return Some(v);
            }
            if listener.wait_deadline(deadline).is_none() && Instant::now() >= deadline {
                return ready(&self.lock());
            }
        }
    }

    /// The term's health now (see [`Leadership::health`]).
    pub(crate) fn health(&self) -> Health {
        let now = self.clock.now();
        let s = self.lock();
        Health {
            leading: term_over(&s).is_none(),
            lease_deadline: s.snapshot.lease_deadline,
            last_renewal: s.snapshot.last_renewal,
            failing_for: s.failing_since.map(|(first, _)| now.since(first)),
            now,
        }
    }

    async fn wait_async<T>(&self, mut ready: impl FnMut(&State) -> Option<T>) -> T {
        loop {
            let listener = self.changed.listen();
            if let Some(v) = ready(&self.lock()) {
                return v;
            }
            listener.await;
        }
    }
}

impl crate::clock::Participant for Shared {
    fn unsettled(&self, changes: u64) -> Option<String> {
        let s = self.lock();
        if s.outcome.is_some() || s.idle_seen == Some(changes) {
            return None;
        }
        let doing = match s.idle_seen {
            Some(seen) => format!("idle at change {seen}, about to wake"),
            None => "busy (in a transport call or acting on a change)".to_owned(),
        };
        Some(format!(
            "`{}` of role `{}` ({:?}): {doing}",
            self.member, self.role, s.snapshot.status
        ))
    }
}

/// `Some` once the term is over: fenced, resigned or failed.
fn term_over(s: &State) -> Option<()> {
    (s.deposed.is_some() || s.outcome.is_some() || s.handed_over).then_some(())
}

/// `Some` once the driver ended: `Ok` when its exit left nothing behind, else what is left.
pub(crate) fn exit_outcome(s: &State) -> Option<Result<(), Error>> {
    let outcome = s.outcome.as_ref()?;
    Some(match (&s.cleanup, outcome) {
        (Some(cleanup), _) if cleanup.complete() => Ok(()),
        (_, Ok(())) => Ok(()),
        (_, Err(e)) => Err(e.clone()),
    })
}

fn elected_or_ended(s: &State) -> Option<Result<(FencingToken, i64), Error>> {
    if let (Some(token), Some(term)) = (s.snapshot.token, s.snapshot.term) {
        return Some(Ok((token, term)));
    }
    match &s.outcome {
        Some(Err(e)) => Some(Err(e.clone())),
        Some(Ok(())) => Some(Err(Error::Cancelled)),
        None => None,
    }
}

#[must_use = "dropping a Candidacy cancels it at once (it deregisters)"]
/// A member waiting for its turn. Returned by each driver's `start`; turns into a
/// [`Leadership`] once elected. Dropping it cancels the candidacy: the driver withdraws the
/// registration and stops. [`resign`](Self::resign) does the same and waits for it.
///
/// Not to be confused with [`Candidate`](crate::core::machine::Candidate), the core's sans-IO
/// machine: a `Candidacy` is the application's handle, and its driver runs a `Candidate` for
/// it.
///
/// The handle is `#[must_use]`: `start(..)?;` would withdraw at once, so the compiler warns:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # #[cfg(all(feature = "memory", feature = "blocking"))]
/// # fn main() -> Result<(), kafka_coordination::Error> {
/// # let broker = kafka_coordination::memory::MemoryBroker::new(
/// #     16, std::sync::Arc::new(kafka_coordination::ManualClock::default()));
/// kafka_coordination::blocking::start(
///     broker.transport("a"), "jobs", "a", kafka_coordination::Options::new())?;
/// # Ok(())
/// # }
/// # #[cfg(not(all(feature = "memory", feature = "blocking")))]
/// # fn main() { compile_error!("needs memory and blocking"); }
/// ```
#[derive(Debug)]
pub struct Candidacy {
    shared: Arc<Shared>,
    armed: bool,
}

/// Cancels a candidacy from another thread or task (for example a shutdown signal while
/// [`Candidacy::elected_blocking`] blocks).
#[derive(Clone, Debug)]
pub struct CancelHandle {
    shared: Arc<Shared>,
}

impl CancelHandle {
    /// Asks the driver to stop competing: it deregisters and ends. A wait on the candidacy then
    /// returns [`Error::Cancelled`]. Has no effect once elected; resign the [`Leadership`] then.
    pub fn cancel(&self) {
        if self.shared.lock().snapshot.token.is_none() {
            self.shared.request_cancel();
        }
    }
}

impl Candidacy {
    pub(crate) fn new(shared: Arc<Shared>) -> Candidacy {
        Candidacy {
            shared,
            armed: true,
        }
    }

    #[allow(dead_code)] // Used by the test kit (features `memory` and a driver).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A handle that cancels this candidacy.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            shared: self.shared.clone(),
        }
    }

    /// What the driver last reported.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.lock().snapshot.clone()
    }

    /// Whether the candidate has finished (resigned, failed, or elected and then ended). Does
    /// not block.
    pub fn is_done(&self) -> bool {
        self.shared.lock().outcome.is_some()
    }

    /// [`elected`](Self::elected), blocking the calling thread.
    pub fn elected_blocking(mut self) -> Result<Leadership, Error> {
        let r = self.shared.wait_blocking(elected_or_ended);
        self.take_leadership(r)
    }

    /// [`elected_blocking`](Self::elected_blocking), for at most `timeout` of *real* time; on a
    /// timeout the candidacy is handed back, still running.
    pub fn elected_blocking_timeout(
        mut self,
        timeout: Duration,
    ) -> Result<Result<Leadership, Error>, Candidacy> {
        let ready = self
            .shared
            .wait_blocking_until(Instant::now().checked_add(timeout), elected_or_ended);
        match ready {
            Some(r) => Ok(self.take_leadership(r)),
            None => Err(self),
        }
    }

    /// Waits until this member is elected, and returns its leadership. Dropping the future
    /// before it completes cancels the candidacy.
    pub async fn elected(mut self) -> Result<Leadership, Error> {
        let r = self.shared.wait_async(elected_or_ended).await;
        self.take_leadership(r)
    }

    fn take_leadership(
        &mut self,
        r: Result<(FencingToken, i64), Error>,
    ) -> Result<Leadership, Error> {
        self.armed = false;
        r.map(|(token, term)| Leadership {
            shared: self.shared.clone(),
            token,
            term,
        })
    }

    /// Stops competing and waits until the exit is done: the registration is withdrawn (and,
    /// had the member been elected in the meantime, the term is handed over as
    /// [`Leadership::resign`] does). `Ok` when the member left the role clean; otherwise the
    /// error says what is left (say [`Error::Incomplete`] when the broker was unreachable
    /// throughout). Returns within the give-up time ([`Options::give_up_after`]).
    ///
    /// [`Options::give_up_after`]: crate::Options::give_up_after
    pub async fn resign(mut self) -> Result<(), Error> {
        self.armed = false;
        self.shared.request_cancel();
        self.shared.wait_async(exit_outcome).await
    }

    /// [`resign`](Self::resign), blocking the calling thread.
    pub fn resign_blocking(mut self) -> Result<(), Error> {
        self.armed = false;
        self.shared.request_cancel();
        self.shared.wait_blocking(exit_outcome)
    }
}

impl Drop for Candidacy {
    fn drop(&mut self) {
        if self.armed {
            self.shared.request_cancel();
        }
    }
}

#[must_use = "dropping a Leadership resigns at once; keep it for the whole term"]
/// The role, held. Pass [`token`](Leadership::token) to every guarded write; stop the role's
/// work when [`done`](Leadership::done) fires.
///
/// The driver keeps renewing the lease in the background. Dropping the handle resigns in the
/// background; call [`resign`](Leadership::resign) to wait for the hand-over.
///
/// The handle is `#[must_use]`: discarding it, say with `acquire_leadership(..)?;`, would end
/// the term at once, so the compiler warns:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # #[cfg(all(feature = "memory", feature = "blocking"))]
/// # fn main() -> Result<(), kafka_coordination::Error> {
/// # let broker = kafka_coordination::memory::MemoryBroker::new(
/// #     16, std::sync::Arc::new(kafka_coordination::ManualClock::default()));
/// kafka_coordination::blocking::acquire_leadership(
///     broker.transport("a"), "jobs", "a", kafka_coordination::Options::new())?;
/// # Ok(())
/// # }
/// # #[cfg(not(all(feature = "memory", feature = "blocking")))]
/// # fn main() { compile_error!("needs memory and blocking"); }
/// ```
#[derive(Debug)]
pub struct Leadership {
    shared: Arc<Shared>,
    token: FencingToken,
    term: i64,
}

impl Leadership {
    /// The pair this term holds. The broker rejects writes that carry it once a newer leader
    /// minted its epoch.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The term number: the offset of this term's first lease record in the role's partition.
    /// It strictly grows per role across every hand-over, failover, producer-id change and
    /// epoch exhaustion, so a downstream store that keeps "the highest term seen" and refuses
    /// lower ones fences every earlier leader. (Compare terms, never tokens: producer ids are
    /// not ordered.) Negative only with a transport that could not report the offset.
    pub fn term(&self) -> i64 {
        self.term
    }

    /// The role.
    pub fn role(&self) -> &Role {
        &self.shared.role
    }

    /// This member.
    pub fn member(&self) -> &MemberId {
        &self.shared.member
    }

    /// Whether the term is over: fenced, resigned or failed, or handed over by a
    /// fleet (the `fleet` module; over from the moment the hand-over begins, before the resign's
    /// first step, so that the work stops before a successor can start). Does not block.
    pub fn is_done(&self) -> bool {
        term_over(&self.shared.lock()).is_some()
    }

    /// Completes when the term is over (fenced, resigned, or failed). Works on any executor.
    pub async fn done(&self) {
        self.shared.wait_async(term_over).await
    }

    /// [`done`](Self::done), blocking the calling thread.
    pub fn done_blocking(&self) {
        self.shared.wait_blocking(term_over)
    }

    /// [`done_blocking`](Self::done_blocking), for at most `timeout` of *real* time; true when
    /// the term is over.
    pub fn done_blocking_timeout(&self, timeout: Duration) -> bool {
        self.shared
            .wait_blocking_until(Instant::now().checked_add(timeout), term_over)
            .is_some()
    }

    /// Why the term ended: `None` while it runs and after a clean resign; [`Error::Fenced`]
    /// when the broker fenced it; another error when the transport failed for good.
    pub fn err(&self) -> Option<Error> {
        let s = self.shared.lock();
        if let Some(token) = s.deposed {
            return Some(Error::Fenced { token });
        }
        match &s.outcome {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// Gives up the role and waits until the exit is done: the member mints one more epoch for
    /// the role (so that, once this returns, its pair is not
    /// [`authoritative`](kafka_coordination_core::LeadershipStatus::authoritative) and the
    /// broker refuses every write that carries it), clears the lease through that new pair so
    /// that standbys take over at once instead of waiting for the deadline, and withdraws its
    /// registration. This is the way to end a service: `leadership.resign().await?` before
    /// `main` returns leaves nothing behind for the standbys to wait out.
    ///
    /// `Ok` when the member left the role clean, however the term ended (why it ended stays in
    /// [`err`](Self::err)). Otherwise the error says what is left: [`Error::Incomplete`] names
    /// the steps that could not be done (say the broker was unreachable throughout) and what
    /// that means for the role. Idempotent; returns within the give-up time
    /// ([`Options::give_up_after`](crate::Options::give_up_after)).
    pub async fn resign(&self) -> Result<(), Error> {
        self.shared.request_cancel();
        self.shared.wait_async(exit_outcome).await
    }

    /// [`resign`](Self::resign), blocking the calling thread.
    pub fn resign_blocking(&self) -> Result<(), Error> {
        self.shared.request_cancel();
        self.shared.wait_blocking(exit_outcome)
    }

    /// What the driver last reported.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.lock().snapshot.clone()
    }

    /// The leader's health now: its lease deadline, its last successful renewal, and how long
    /// renewals have been failing. [`Health::is_healthy`] is a ready-made check.
    pub fn health(&self) -> Health {
        self.shared.health()
    }

    /// The state shared with the driver (for [`HealthCheck`](crate::HealthCheck)).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// [`health`](Self::health)`().is_healthy(max_age)`.
    pub fn is_healthy(&self, max_age: Duration) -> bool {
        self.health().is_healthy(max_age)
    }

    /// Writes `records` (to any topics and partitions, each explicit) in **one transaction**
    /// of this term's producer, and returns each record's offset. The broker accepts it only
    /// while this term's pair is the role's current one: once a newer leader exists the whole
    /// write is refused ([`Error::Fenced`]), nothing of it ever becomes readable to
    /// read_committed readers, and the term ends at once (`done` fires now, not at the next
    /// renewal). After the term ended, writes are refused without contacting the broker.
    ///
    /// The write and the lease renewals take turns on the role's transactional producer
    /// (Kafka runs one transaction at a time per transactional id). On Kafka the write first
    /// waits, off the producer, until every partition it names has a leader, so a missing
    /// topic or partition (a [`Transport`](Error::Transport) error of kind
    /// [`Config`](crate::error::ErrorKind::Config)) never holds back a renewal.
    ///
    /// Starts the transport's completion form of the write
    /// ([`start_guarded_write`](crate::transport::LeaseWriter::start_guarded_write)) and awaits
    /// its answer, holding no thread meanwhile, so it can be awaited on tokio, smol and
    /// async-std alike.
    pub async fn guarded_write(&self, records: &[GuardedRecord<'_>]) -> Result<Vec<i64>, Error> {
        self.write_async(records, None).await
    }

    /// [`guarded_write`](Self::guarded_write), blocking the calling thread.
    pub fn guarded_write_blocking(&self, records: &[GuardedRecord<'_>]) -> Result<Vec<i64>, Error> {
        self.refuse_after_the_term()?;
        let result = (self.shared.writer)(self.token, records, None);
        self.after_write(result)
    }

    /// [`guarded_write`](Self::guarded_write) that also commits `offsets`, a consumer group's
    /// position in its input, **in the same transaction**: the records become readable and
    /// the group's committed offsets move together, or neither does. This is how a singleton
    /// consumer gets exactly-once output on Kafka: read input with `read_committed` from the
    /// group's committed offsets (read back with `KafkaTransport::committed_offsets`), and
    /// write each result with the input's next offset here.
    ///
    /// What it guarantees: once a newer leader holds the role, the broker refuses the whole
    /// transaction ([`Error::Fenced`]), records and offsets alike, so a deposed leader (paused,
    /// cut off) can neither publish output nor move the group's position after its successor
    /// read it; the successor resumes exactly where the last committed transaction ended.
    ///
    /// What it does not: effects outside Kafka (a database row, an e-mail, an HTTP call) are
    /// not in the transaction; a store that takes them must check the
    /// [`token`](Self::token) or [`term`](Self::term) itself. Nor does it stop a consumer that
    /// commits the same group outside these writes (use the group only here). On a transport
    /// that cannot commit offsets transactionally it is refused with a
    /// [`Config`](crate::error::ErrorKind::Config) error, never done halfway.
    pub async fn guarded_write_with_offsets(
        &self,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, Error> {
        self.write_async(records, Some(offsets)).await
    }

    /// [`guarded_write_with_offsets`](Self::guarded_write_with_offsets), blocking the calling
    /// thread.
    pub fn guarded_write_with_offsets_blocking(
        &self,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, Error> {
        self.refuse_after_the_term()?;
        let result = (self.shared.writer)(self.token, records, Some(offsets));
        self.after_write(result)
    }

    /// A guarded write started through the transport's completion form, awaited.
    async fn write_async(
        &self,
        records: &[GuardedRecord<'_>],
        offsets: Option<GroupOffsets<'_>>,
    ) -> Result<Vec<i64>, Error> {
        self.refuse_after_the_term()?;
        let write = GuardedWrite::new(records, offsets);
        let slot: Arc<WriteSlot> = Arc::new((Mutex::new(None), Event::new()));
        let done = Unanswered(Some(slot.clone()));
        let listener = slot.1.listen();
        (self.shared.start_writer)(
            self.token,
            write,
            Box::new(move |result| done.answer(result)),
        );
        let mut listener = listener;
        loop {
            if let Some(result) = slot.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return self.after_write(result);
            }
            listener.await;
            listener = slot.1.listen();
        }
    }

    fn refuse_after_the_term(&self) -> Result<(), Error> {
        if self.is_done() {
            return Err(self.err().unwrap_or(Error::Fenced { token: self.token }));
        }
        Ok(())
    }

    fn after_write(&self, result: Result<Vec<i64>, TransportError>) -> Result<Vec<i64>, Error> {
        match result {
            Ok(offsets) => Ok(offsets),
            Err(e) if e.is_fenced() => {
                let token = self.token;
                self.shared.update(|s| {
                    if s.deposed.is_none() {
                        s.deposed = Some(token);
                    }
                    s.superseded_write = Some(token);
                });
                self.shared.doorbell.ring();
                Err(Error::Fenced { token })
            }
            Err(e) => Err(Error::Transport(e)),
        }
    }
}

/// Where a started guarded write leaves its result, and the event that says so.
type WriteSlot = (Mutex<Option<Result<Vec<i64>, TransportError>>>, Event);

/// A guarded write's slot as its `done` holds it: answered by the transport, or, when the
/// transport drops the `done` without calling it, answered on drop with an error, so that the
/// awaiting caller never waits forever.
struct Unanswered(Option<Arc<WriteSlot>>);

impl Unanswered {
    fn answer(mut self, result: Result<Vec<i64>, TransportError>) {
        if let Some(slot) = self.0.take() {
            *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            slot.1.notify(usize::MAX);
        }
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(TransportError::retriable(
                "the transport dropped the guarded write without answering it (it may be shutting \
                 down); whether it was written is not known",
            )));
            slot.1.notify(usize::MAX);
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.shared.request_cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport that drops a guarded write's `done` without calling it (one shutting
    /// down): the awaiting write is answered with an error that says so, instead of never.
    #[test]
    fn an_async_write_whose_done_is_dropped_is_answered() {
        let writer: Arc<WriteFn> = Arc::new(|_, records, _| Ok(vec![0; records.len()]));
        let start_writer: Arc<StartWriteFn> = Arc::new(|_, _, done| drop(done));
        let shared = Shared::new(
            Role::new("jobs").unwrap(),
            MemberId::new("a").unwrap(),
            Doorbell::Own(Event::new()),
            writer,
            start_writer,
            Arc::new(crate::clock::SystemClock),
        );
        let leadership = Leadership {
            shared,
            token: FencingToken::new(1, 0),
            term: 3,
        };
        let record = [GuardedRecord::new("out", 0, None, Some(b"x"))];
        // The transport dropped the `done` before the write's first wait: one poll answers it.
        let written = futures_lite::future::block_on(futures_lite::future::poll_once(
            leadership.guarded_write(&record),
        ));
        let Some(Err(Error::Transport(e))) = written else {
            panic!("{written:?}")
        };
        assert!(e.to_string().contains("without answering"), "{e}");
        assert!(e.is_retriable(), "{e:?}");
    }
}
