//! Many candidacies on one loop: a [`Host`] runs every candidacy started on it on one thread
//! (blocking flavour) or one task (tokio, smol, async-std), for services that hold one role per
//! shard, tenant or partition.
//!
//! A host shares one timer heap, one read per partition of `__coordination_state` (each
//! candidacy sees only its role's records), the transport's tail for standbys' long polls
//! ([`HostOptions::tail_reads`]), and at most [`HostOptions::io_threads`] transport calls in
//! flight. Queued calls go out in order of urgency: reads, then takeovers under way, then
//! renewals that can still afford the wait. The first renewal of each term comes a fraction of
//! the renew interval early ([`HostOptions::spread_renewals`]), which only lengthens a lease.
//! Otherwise each candidacy behaves as one started alone, with the same [`Candidacy`] and
//! [`Leadership`](crate::Leadership) handles. Why and with what effect: the guide's
//! `docs/guide/many-roles.md`.
//!
//! ```
//! # #[cfg(all(feature = "memory", feature = "blocking"))] {
//! use std::sync::Arc;
//! use kafka_coordination::host::HostOptions;
//! use kafka_coordination::memory::MemoryBroker;
//! use kafka_coordination::{blocking, ManualClock, Options};
//!
//! let clock = ManualClock::default();
//! let broker = MemoryBroker::new(16, Arc::new(clock.clone()));
//! let host = blocking::host(
//!     Arc::new(broker.transport("node-a")),
//!     HostOptions::new().clock(clock.clone()).io_threads(0),
//! )?;
//! let shards: Vec<_> = (0..100)
//!     .map(|i| host.start(&format!("shard-{i}"), "node-a", Options::new().clock(clock.clone())))
//!     .collect::<Result<_, _>>()?;
//! clock.settle().unwrap();
//! assert!(shards.iter().all(|c| c.snapshot().token.is_some()));
//! # }
//! # Ok::<(), kafka_coordination::Error>(())
//! ```

mod view;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use event_listener::{Event, EventListener};
use kafka_coordination_core::machine::{Command, Event as MachineEvent};
use kafka_coordination_core::time::UnixMillis;

use crate::clock::{Clock, ManualClock, SystemClock};
use crate::driver::{execute, start_execute, Driver, InFlight, Next};
use crate::error::TransportError;
use crate::leadership::{Candidacy, Doorbell, Error, Spawner, Wake};
use crate::options::Options;
use crate::pool::Pool;
use crate::sync::lock;
use crate::transport::{with_priority, ReadBatch, Transport};

use view::{Req, Views};

/// The default number of I/O threads of a host.
pub const DEFAULT_IO_THREADS: usize = 8;
/// The default interval at which a host reads again a partition that has parked long polls.
pub const DEFAULT_REFRESH: Duration = Duration::from_millis(50);

/// How a [`Host`] runs.
#[derive(Clone)]
pub struct HostOptions {
    io_threads: usize,
    refresh: Duration,
    clock: Arc<dyn Clock>,
    spread_renewals: bool,
    tail_reads: bool,
}

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostOptions")
            .field("io_threads", &self.io_threads)
            .field("refresh", &self.refresh)
            .field("manual_clock", &self.clock.as_manual().is_some())
            .field("spread_renewals", &self.spread_renewals)
            .field("tail_reads", &self.tail_reads)
            .finish()
    }
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            io_threads: DEFAULT_IO_THREADS,
            refresh: DEFAULT_REFRESH,
            clock: Arc::new(SystemClock),
            spread_renewals: true,
            tail_reads: true,
        }
    }
}

impl HostOptions {
    /// The defaults: [`DEFAULT_IO_THREADS`] I/O threads, a [`DEFAULT_REFRESH`] refresh, the
    /// system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many threads run the blocking transport calls (default [`DEFAULT_IO_THREADS`]),
    /// and how many calls that hold no thread may be in flight at once (see the
    /// [module docs](self); [`DEFAULT_IO_THREADS`] with `0`). `0` runs the blocking
    /// calls on the loop itself: only for a transport whose calls return at once. Threads
    /// start as calls come and end after 30 s without one. Calls queued for a thread or a
    /// place are taken earliest due first, and [`HostStats::queued`] counts them.
    pub fn io_threads(mut self, n: usize) -> Self {
        self.io_threads = n;
        self
    }

    /// How often a partition on which standbys wait for records (a long poll) is read again
    /// (default [`DEFAULT_REFRESH`]): what a resign may wait on top of the read itself before
    /// the next member sees it. On a manual clock the partition is read at every change of
    /// the clock instead.
    pub fn refresh(mut self, d: Duration) -> Self {
        self.refresh = d;
        self
    }

    /// The clock of every candidacy on the host (default: the system clock). A candidacy
    /// whose [`Options`] name another manual clock is refused.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Whether the host spreads the renewals of the roles it leads over the renew interval
    /// (default `true`). Each hosted candidacy's first renewal of a term comes a fraction of
    /// the renew interval early, the fraction taken from a hash of the role's name, and the
    /// renewals after it every renew interval (see
    /// [`Candidate::spread_renewals`](kafka_coordination_core::machine::Candidate::spread_renewals)
    /// and [`renewal_phase`](kafka_coordination_core::machine::renewal_phase); a custom event
    /// loop that runs many candidates gets the same spread from the same call).
    ///
    /// Without it, roles won together (say, at the start of the process) renew together for
    /// as long as they are held: the broker gets their renewals in bursts, and if the process
    /// dies their leases run out at the same moment, so that every standby challenges at once.
    /// Turn it off to have hosted candidacies renew exactly as candidacies started alone do
    /// (a renew interval after the claim).
    pub fn spread_renewals(mut self, on: bool) -> Self {
        self.spread_renewals = on;
        self
    }

    /// Whether standbys' long polls are served from the transport's tail of their partition
    /// when it has one (default: on). A transport that tails ([`StateReader::on_tailed`], such
    /// as the Kafka transport with its long-polling Fetch per broker) then costs the host no
    /// request and no I/O thread for them: a read that only long polls wait on reads the
    /// transport's copy on the loop, and the tail wakes the loop as soon as a partition moves,
    /// so a standby hears of a resign without waiting for the next refresh. Reads that must see
    /// what was committed before they began (a candidacy's first read, a standby's read at its
    /// turn) always go to [`read_partition`](crate::StateReader::read_partition). Off: every
    /// read goes there, each refresh included (for comparisons).
    ///
    /// [`StateReader::on_tailed`]: crate::StateReader::on_tailed
    pub fn tail_reads(mut self, on: bool) -> Self {
        self.tail_reads = on;
        self
    }
}

/// What a host's loop is doing, as of a recent turn ([`Host::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostStats {
    /// Candidacies the loop runs.
    pub candidacies: usize,
    /// Of them, waiting for a timer.
    pub waiting: usize,
    /// Of them, in a transport call (on the I/O threads, or queued for one).
    pub calling: usize,
    /// Of them, waiting for a read of their partition (issued or to be issued).
    pub reading: usize,
    /// Of them, in a parked long poll.
    pub parked: usize,
    /// Partitions being read now.
    pub partitions_reading: usize,
    /// Transport calls and reads queued for an I/O thread, or for a place among the calls that
    /// hold no thread (not yet started). A queue that stays
    /// long means the host asks for more than its threads and the cluster answer; takeovers and
    /// reads pass renewals in it (see [`HostOptions::io_threads`]).
    pub queued: usize,
    /// Turns of the loop so far.
    pub turns: u64,
    /// Partition reads sent to the transport so far ([`read_partition`]), each on an I/O
    /// thread (or inline with `io_threads(0)`).
    ///
    /// [`read_partition`]: crate::StateReader::read_partition
    pub reads: u64,
    /// Partition reads served so far from the transport's tail of the partition
    /// ([`read_tailed`](crate::StateReader::read_tailed)) on the loop itself, with no request
    /// and no I/O thread: reads that only long polls wait on, when the transport tails.
    pub tailed_reads: u64,
}

/// The host's doorbell: rung by the I/O pool when a call finished, by [`Host::start`], and by
/// a hosted candidacy's cancel or resign (which also marks that some candidacy wants
/// attention, so the loop looks at all of them only then).
#[derive(Debug, Default)]
pub(crate) struct Bell {
    event: Event,
    cancels: AtomicBool,
}

impl Bell {
    pub(crate) fn listen(&self) -> EventListener {
        self.event.listen()
    }
    fn ring(&self) {
        self.event.notify(usize::MAX);
    }
    pub(crate) fn ring_for_cancel(&self) {
        self.cancels.store(true, Ordering::SeqCst);
        self.ring();
    }
    fn take_cancels(&self) -> bool {
        self.cancels.swap(false, Ordering::SeqCst)
    }
}

impl Wake for Bell {
    fn listen(&self) -> EventListener {
        Bell::listen(self)
    }
    fn ring(&self) {
        self.ring_for_cancel();
    }
}

/// A finished transport call.
enum Done {
    Call {
        slot: usize,
        gen: u64,
    },
    Read {
        partition: i32,
        outcome: Result<ReadBatch, TransportError>,
    },
}

/// What the handles and the I/O pool share with the loop.
struct Inbox<T: Transport + Send + Sync + ?Sized + 'static> {
    transport: Arc<T>,
    clock: Arc<dyn Clock>,
    spawner: Arc<Spawner>,
    spread_renewals: bool,
    bell: Arc<Bell>,
    pending: Mutex<Vec<Driver<T>>>,
    done: Mutex<Vec<Done>>,
    /// Candidacies started and not yet ended.
    hosted: AtomicUsize,
    /// Some handle on the host lives.
    open: AtomicBool,
    /// The loop has stopped; nothing new is taken.
    closed: AtomicBool,
    /// On a manual clock: the change count the loop had acted on when it went idle.
    idle_seen: Mutex<Option<u64>>,
    /// Published at the end of every turn.
    stats: Mutex<HostStats>,
    /// Partitions whose tail moved since the loop last looked ([`StateReader::on_tailed`]).
    ///
    /// [`StateReader::on_tailed`]: crate::StateReader::on_tailed
    tail_news: Mutex<Vec<i32>>,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Inbox<T> {
    fn manual(&self) -> Option<&ManualClock> {
        self.clock.as_manual()
    }

    /// Wakes the loop. On a manual clock a change the loop acts on is counted (a new
    /// candidacy); a finished call is not a change (the loop is busy until it takes it).
    fn wake(&self, counted: bool) {
        match self.manual() {
            Some(c) if counted => c.ring(),
            Some(c) => c.wake_waiters(),
            None => self.bell.ring(),
        }
    }

    fn listen(&self) -> EventListener {
        match self.manual() {
            Some(c) => c.listen(),
            None => self.bell.listen(),
        }
    }

    fn finished(&self, done: Vec<Done>) {
        lock(&self.done).extend(done);
        self.wake(false);
    }

    fn set_idle(&self, seen: Option<u64>) {
        let mut idle = lock(&self.idle_seen);
        if *idle != seen {
            *idle = seen;
            drop(idle);
            if let Some(c) = self.manual() {
                c.note_progress();
            }
        }
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> crate::clock::Participant for Inbox<T> {
    fn unsettled(&self, changes: u64) -> Option<String> {
        if self.closed.load(Ordering::SeqCst) || *lock(&self.idle_seen) == Some(changes) {
            return None;
        }
        Some(format!(
            "a host of {} candidacies: busy (transport calls under way or acting on a change)",
            self.hosted.load(Ordering::SeqCst)
        ))
    }
}

/// What a [`Host`] handle can do, whatever the transport's type.
trait Hosting: Send + Sync {
    fn start(&self, role: &str, member: &str, options: Options) -> Result<Candidacy, Error>;
    fn hosted(&self) -> usize;
    fn stats(&self) -> HostStats;
    fn close(&self);
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Hosting for Inbox<T> {
    fn start(&self, role: &str, member: &str, options: Options) -> Result<Candidacy, Error> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Transport(TransportError::config(
                "this host has stopped (its runtime went away); start the candidacy on a new host",
            )));
        }
        match (options.clock.as_manual(), self.manual()) {
            (Some(a), Some(b)) if !a.same_as(b) => {
                return Err(Error::Transport(TransportError::config(
                    "the options name another manual clock than the host's: give the host \
                     (HostOptions::clock) and its candidacies the same clock",
                )))
            }
            (Some(_), None) => {
                return Err(Error::Transport(TransportError::config(
                    "the options name a manual clock but the host runs on the system clock: \
                     give it the same clock with HostOptions::clock",
                )))
            }
            _ => {}
        }
        let options = Options {
            clock: self.clock.clone(),
            ..options
        };
        let doorbell = match self.manual() {
            Some(c) => Doorbell::Clock(c.clone()),
            None => Doorbell::Runner(self.bell.clone()),
        };
        let (mut driver, candidacy) = Driver::with_doorbell(
            self.transport.clone(),
            role,
            member,
            options,
            self.spawner.clone(),
            Some(doorbell),
        )?;
        if self.spread_renewals {
            driver.spread_renewals();
        }
        self.hosted.fetch_add(1, Ordering::SeqCst);
        lock(&self.pending).push(driver);
        self.wake(true);
        Ok(candidacy)
    }

    fn hosted(&self) -> usize {
        self.hosted.load(Ordering::SeqCst)
    }

    fn stats(&self) -> HostStats {
        *lock(&self.stats)
    }

    fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
        self.wake(true);
    }
}

/// A handle on a host: starts candidacies on its loop. Clone it freely; the loop runs while a
/// handle lives or a candidacy it runs has not ended, then stops (and its I/O threads with it).
///
/// Made by `blocking::host`, `tokio_driver::host`, `smol_driver::host` or
/// `async_std_driver::host`.
#[derive(Clone)]
pub struct Host {
    handle: Arc<HostHandle>,
}

struct HostHandle {
    inner: Arc<dyn Hosting>,
}

impl Drop for HostHandle {
    fn drop(&mut self) {
        self.inner.close();
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("hosted", &self.handle.inner.hosted())
            .finish()
    }
}

impl Host {
    /// Starts competing for `role` as `member` on this host's loop and returns at once, as
    /// `blocking::start` or `tokio_driver::start` do; the [`Candidacy`] and the
    /// [`Leadership`](crate::Leadership) it yields behave exactly as theirs. The host's clock
    /// drives the candidacy (a manual clock in `options` must be the host's), and its
    /// [`Options::long_poll`] is replaced by the host's shared refresh.
    ///
    /// Fails as `start` does (invalid names or options, a role this transport already
    /// contests), and with a configuration error once the host's loop has stopped.
    pub fn start(&self, role: &str, member: &str, options: Options) -> Result<Candidacy, Error> {
        self.handle.inner.start(role, member, options)
    }

    /// How many candidacies the host runs now (started and not yet ended).
    pub fn len(&self) -> usize {
        self.handle.inner.hosted()
    }

    /// What the loop is doing, as of a recent turn (published at most every 100 ms; on a manual
    /// clock at every turn, so exact once settled): how many candidacies wait for a timer, a
    /// call or a read. For dashboards and for finding where a slow host spends its time.
    pub fn stats(&self) -> HostStats {
        self.handle.inner.stats()
    }

    /// Whether the host runs no candidacy now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

type Job = crate::pool::Job;

/// When a queued job should run, in the host clock's milliseconds: the smaller, the sooner.
///
/// * A read of a partition is due at once (`i64::MIN`): one read answers every candidacy of
///   the partition that waits, standbys whose turn has come among them.
/// * Any other call is due when its candidacy's current stretch of work began (it left a
///   timer or a long poll), but at most [`HEAD_START`] before it is issued: the steps of a
///   standby's takeover (check, announcement, acquire, first lease write) keep the place of
///   the first, so takeovers under way finish before new ones start, the oldest first.
/// * A leader's renewal is due [`HEAD_START`] before the point halfway between its issue and
///   the deadline of its current lease: only calls issued before that point pass it, so it
///   waits behind takeovers no longer than it can afford.
type Due = i64;

/// A call queued in the [`Window`], in the order of its [`Due`], then of queueing.
struct Queued<J> {
    due: Due,
    seq: u64,
    job: J,
}

impl<J> PartialEq for Queued<J> {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl<J> Eq for Queued<J> {}
impl<J> PartialOrd for Queued<J> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<J> Ord for Queued<J> {
    /// Reversed, so that the `BinaryHeap` (a max-heap) pops the earliest due first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// A completion for the transport that still ends its call when the transport drops it
/// unanswered: `answer` is then called with what `dropped` makes (an error saying so).
fn answered_or<T: 'static>(
    dropped: impl FnOnce() -> T + Send + 'static,
    answer: impl FnOnce(T) + Send + 'static,
) -> Box<dyn FnOnce(T) + Send> {
    /// Calls `answer` once: with the outcome, or on drop with `dropped`'s.
    struct Once<T, D: FnOnce() -> T, A: FnOnce(T)> {
        dropped: Option<D>,
        answer: Option<A>,
    }
    impl<T, D: FnOnce() -> T, A: FnOnce(T)> Drop for Once<T, D, A> {
        fn drop(&mut self) {
            if let (Some(dropped), Some(answer)) = (self.dropped.take(), self.answer.take()) {
                answer(dropped());
            }
        }
    }
    let mut once = Once {
        dropped: Some(dropped),
        answer: Some(answer),
    };
    Box::new(move |outcome| {
        once.dropped = None;
        if let Some(answer) = once.answer.take() {
            answer(outcome);
        }
    })
}

/// The calls the transport runs without holding a thread (those of a transport that says so,
/// see [`LeaseWriter::writes_without_a_thread`] and the others): at most `limit` are in
/// flight at once, as with the I/O threads, and the others wait in the same order (see
/// [`Due`]) holding nothing. When one finishes, the thread that finished it starts the next.
/// A lease write's deadline counts from when it starts here, as from when a thread takes it.
///
/// [`LeaseWriter::writes_without_a_thread`]: crate::LeaseWriter::writes_without_a_thread
struct Window {
    state: Mutex<WindowState>,
    limit: usize,
}

struct WindowState {
    queue: BinaryHeap<Queued<Start>>,
    seq: u64,
    in_flight: usize,
    /// A thread is starting queued calls now: the others leave it to that thread.
    starting: bool,
}

/// A call to start once the window has room; it holds the [`Permit`] until it finishes.
type Start = Box<dyn FnOnce(Permit) + Send>;

/// Checks, registrations or a read that hold a place in the [`Window`] until their completion
/// runs, or run on a thread of the pool (`None`).
type Held = Box<dyn FnOnce(Option<Permit>) + Send>;

/// A place in the [`Window`]: given back when dropped, which starts the next queued call.
struct Permit(Arc<Window>);

impl Drop for Permit {
    fn drop(&mut self) {
        lock(&self.0.state).in_flight -= 1;
        self.0.pump();
    }
}

impl Window {
    fn new(limit: usize) -> Arc<Window> {
        Arc::new(Window {
            state: Mutex::new(WindowState {
                queue: BinaryHeap::new(),
                seq: 0,
                in_flight: 0,
                starting: false,
            }),
            limit: limit.max(1),
        })
    }

    fn submit(self: &Arc<Self>, due: Due, job: Start) {
        let mut st = lock(&self.state);
        st.seq += 1;
        let seq = st.seq;
        st.queue.push(Queued { due, seq, job });
        drop(st);
        self.pump();
    }

    /// Starts queued calls, the earliest due first, while there is room. One thread at a time
    /// does it; a call that finishes while it starts others only gives back its place, and
    /// that thread starts the next.
    fn pump(self: &Arc<Self>) {
        let mut st = lock(&self.state);
        if st.starting {
            return;
        }
        st.starting = true;
        while st.in_flight < self.limit {
            let Some(next) = st.queue.pop() else {
                break;
            };
            st.in_flight += 1;
            drop(st);
            (next.job)(Permit(Arc::clone(self)));
            st = lock(&self.state);
        }
        st.starting = false;
    }

    /// Calls waiting for room.
    fn queued(&self) -> usize {
        lock(&self.state).queue.len()
    }
}

/// The completion of a call started in the [`Window`]: gives the loop the outcome (or an
/// error if the transport drops it unanswered), then gives back the place.
struct Started<T: Transport + Send + Sync + ?Sized + 'static> {
    inbox: Arc<Inbox<T>>,
    call: Arc<InFlight>,
    slot: usize,
    gen: u64,
    permit: Option<Permit>,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Started<T> {
    fn give(mut self, outcome: Result<MachineEvent, TransportError>) {
        self.call.put(outcome);
        self.finish();
    }

    /// Counts the call finished with no outcome: its driver took the command to run it.
    fn skip(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.inbox.finished(vec![Done::Call {
            slot: self.slot,
            gen: self.gen,
        }]);
        self.permit = None;
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Drop for Started<T> {
    fn drop(&mut self) {
        if self.permit.is_some() {
            self.call.put(Err(TransportError::retriable(
                "the transport dropped a call without answering it",
            )));
            self.finish();
        }
    }
}

/// A call a candidacy issued in this turn.
struct Outgoing {
    slot: usize,
    gen: u64,
    call: Arc<InFlight>,
    shared: Arc<crate::leadership::Shared>,
    describe: bool,
    /// A registration: the partition it appends to.
    append: Option<i32>,
    /// The transport runs it without holding a thread: it goes to the [`Window`].
    on_its_own: bool,
    due: Due,
}

/// The completion of a call handed to the transport with a callback
/// ([`Registrar::append_all`](crate::Registrar::append_all)): gives the loop the outcome, or
/// an error if the transport drops it without an answer.
struct Answer<T: Transport + Send + Sync + ?Sized + 'static> {
    inbox: Arc<Inbox<T>>,
    call: Arc<InFlight>,
    slot: usize,
    gen: u64,
    answered: bool,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Answer<T> {
    fn give(mut self, outcome: Result<MachineEvent, TransportError>) {
        self.answered = true;
        self.call.put(outcome);
        self.finished();
    }

    /// Counts the call finished with no outcome: its driver took the command to run it.
    fn skip(mut self) {
        self.answered = true;
        self.finished();
    }

    fn finished(&self) {
        self.inbox.finished(vec![Done::Call {
            slot: self.slot,
            gen: self.gen,
        }]);
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Drop for Answer<T> {
    fn drop(&mut self) {
        if !self.answered {
            self.call.put(Err(TransportError::retriable(
                "the transport dropped a registration without answering it",
            )));
            self.finished();
        }
    }
}

/// The most checks one `start_describe_epochs` call carries.
pub const DESCRIBE_BATCH: usize = 256;

/// Where a hosted candidacy is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Ready,
    Waiting,
    Calling,
    Reading,
}

struct Slot<T: Transport + Send + Sync + ?Sized + 'static> {
    driver: Driver<T>,
    role: Arc<str>,
    partition: i32,
    at: At,
    /// Counts the slot's waits and requests, so that a stale timer or answer is ignored.
    gen: u64,
    /// When its current stretch of work began (it left a timer or a long poll); `None` while it
    /// waits. Its calls keep that place in the I/O queue (see [`Due`]).
    since: Option<UnixMillis>,
}

/// The loop's state: every hosted candidacy, the timers, the partition views.
pub(crate) struct Core<T: Transport + Send + Sync + ?Sized + 'static> {
    inbox: Arc<Inbox<T>>,
    slots: Vec<Option<Slot<T>>>,
    free: Vec<usize>,
    ready: VecDeque<usize>,
    /// Calls issued in this turn, handed to the pool at its end.
    outgoing: Vec<Outgoing>,
    timers: BinaryHeap<Reverse<(UnixMillis, usize, u64)>>,
    views: Views,
    pool: Option<Pool>,
    /// The calls that hold no thread.
    window: Arc<Window>,
    /// Calls and reads handed to the pool (or run inline) whose completion was not taken yet.
    in_flight: usize,
    turns: u64,
    published: Option<std::time::Instant>,
    /// Kept while the loop runs when the transport tails partitions (it holds it weakly).
    tail_hook: Option<Arc<crate::transport::TailHook>>,
    reads: u64,
    tailed_reads: u64,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Drop for Core<T> {
    fn drop(&mut self) {
        self.inbox.closed.store(true, Ordering::SeqCst);
        // Candidacies that never reached the loop end here too (each resigns on the spot as a
        // driver whose runtime went away does).
        let pending = std::mem::take(&mut *lock(&self.inbox.pending));
        drop(pending);
        if let Some(c) = self.inbox.manual() {
            c.note_progress();
        }
    }
}

/// How long the loop may wait before its next turn.
pub(crate) enum Sleep {
    /// Until the doorbell rings (a manual clock: until it changes).
    Bell,
    /// Until the doorbell rings or this much real time passed.
    For(Duration),
    /// Work is waiting: turn again now.
    No,
    /// Every handle is gone and every candidacy ended: stop.
    Stop,
}

/// Builds a host: its handle, and the loop to run on a thread or a task.
pub(crate) fn build<T: Transport + Send + Sync + ?Sized + 'static>(
    transport: Arc<T>,
    options: HostOptions,
    spawner: Arc<Spawner>,
) -> Result<(Host, Core<T>), Error> {
    let pool = match options.io_threads {
        0 => None,
        n => Some(Pool::new("kc-host-io", n).numbered()),
    };
    let inbox = Arc::new(Inbox {
        transport,
        clock: options.clock.clone(),
        spawner,
        spread_renewals: options.spread_renewals,
        bell: Arc::new(Bell::default()),
        pending: Mutex::new(Vec::new()),
        done: Mutex::new(Vec::new()),
        hosted: AtomicUsize::new(0),
        open: AtomicBool::new(true),
        closed: AtomicBool::new(false),
        idle_seen: Mutex::new(None),
        stats: Mutex::new(HostStats::default()),
        tail_news: Mutex::new(Vec::new()),
    });
    // The transport's tail wakes the loop when a partition moves: parked long polls of that
    // partition are served at once, not at the next refresh. The hook holds the inbox weakly
    // (the transport keeps the hook, the inbox keeps the transport).
    let tail_hook = options.tail_reads.then(|| {
        let weak = Arc::downgrade(&inbox);
        let hook: Arc<crate::transport::TailHook> = Arc::new(move |partition| {
            if let Some(inbox) = weak.upgrade() {
                let mut news = lock(&inbox.tail_news);
                if !news.contains(&partition) {
                    news.push(partition);
                }
                drop(news);
                // Counted on a manual clock: settling waits for the loop to act on it.
                inbox.wake(true);
            }
        });
        hook
    });
    let tails = tail_hook
        .as_ref()
        .is_some_and(|hook| inbox.transport.on_tailed(Arc::downgrade(hook)));
    if let Some(manual) = inbox.manual() {
        let participant: Arc<dyn crate::clock::Participant> = inbox.clone();
        manual.register(Arc::downgrade(&participant));
    }
    let host = Host {
        handle: Arc::new(HostHandle {
            inner: inbox.clone(),
        }),
    };
    let core = Core {
        inbox,
        slots: Vec::new(),
        free: Vec::new(),
        ready: VecDeque::new(),
        outgoing: Vec::new(),
        timers: BinaryHeap::new(),
        views: Views::new(options.refresh),
        pool,
        window: Window::new(match options.io_threads {
            0 => DEFAULT_IO_THREADS,
            n => n,
        }),
        in_flight: 0,
        turns: 0,
        published: None,
        tail_hook: tails.then_some(tail_hook).flatten(),
        reads: 0,
        tailed_reads: 0,
    };
    Ok((host, core))
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Core<T> {
    /// A listener for the next ring; create it before [`Core::turn`].
    pub(crate) fn listen(&self) -> EventListener {
        self.inbox.listen()
    }

    fn changes(&self) -> Option<u64> {
        self.inbox.manual().map(|c| c.changes())
    }

    /// Does everything that is due and says how long the loop may sleep. On a manual clock,
    /// `seen` is the change count read before the turn (after [`Core::listen`]): the loop is
    /// idle at it when the turn leaves nothing to do.
    pub(crate) fn turn(&mut self) -> Sleep {
        let seen = self.changes();
        self.inbox.set_idle(None);
        self.take_new();
        self.take_done();
        self.take_tail_news();
        let now = self.inbox.clock.now();
        self.look_at_cancels(now);
        self.fire_timers(now);
        loop {
            while let Some(i) = self.ready.pop_front() {
                self.step(i, now);
            }
            self.flush_calls();
            self.issue_reads(now);
            // Calls run inline have finished already: act on them in this turn.
            if self.pool.is_some() {
                break;
            }
            self.take_done();
            if self.ready.is_empty() {
                break;
            }
        }
        self.publish();
        let work = !self.ready.is_empty() || !lock(&self.inbox.done).is_empty();
        if work {
            return Sleep::No;
        }
        let live = self.slots.len() - self.free.len();
        if live == 0
            && !self.inbox.open.load(Ordering::SeqCst)
            && lock(&self.inbox.pending).is_empty()
        {
            return Sleep::Stop;
        }
        if !lock(&self.inbox.pending).is_empty() {
            return Sleep::No;
        }
        let busy = self.in_flight > 0 || self.views.busy();
        if let (Some(seen), false) = (seen, busy) {
            self.inbox.set_idle(Some(seen));
        }
        if self.inbox.manual().is_some() {
            // Timers fire when the clock is moved, and every move rings.
            return Sleep::Bell;
        }
        let next = [
            self.timers.peek().map(|Reverse((at, _, _))| *at),
            self.views.next_wake(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            None => Sleep::Bell,
            Some(at) if at <= now => Sleep::No,
            Some(at) => Sleep::For(at.since(now).max(Duration::from_millis(1))),
        }
    }

    /// Publishes [`HostStats`], at most every 100 ms of real time (it counts every slot).
    fn publish(&mut self) {
        self.turns += 1;
        let now = std::time::Instant::now();
        // On a manual clock (tests) at every turn, so a settled host's stats are exact.
        if self.inbox.manual().is_none()
            && self
                .published
                .is_some_and(|at| now.duration_since(at) < Duration::from_millis(100))
        {
            return;
        }
        self.published = Some(now);
        let mut st = HostStats {
            turns: self.turns,
            reads: self.reads,
            tailed_reads: self.tailed_reads,
            ..HostStats::default()
        };
        for s in self.slots.iter().flatten() {
            st.candidacies += 1;
            match s.at {
                At::Waiting => st.waiting += 1,
                At::Calling => st.calling += 1,
                At::Reading => st.reading += 1,
                At::Ready => {}
            }
        }
        let (_, partitions_reading, parked) = self.views.counts();
        st.parked = parked;
        st.partitions_reading = partitions_reading;
        st.queued = self.pool.as_ref().map_or(0, Pool::queued) + self.window.queued();
        *lock(&self.inbox.stats) = st;
    }

    fn take_new(&mut self) {
        let new = std::mem::take(&mut *lock(&self.inbox.pending));
        for driver in new {
            let role: Arc<str> = Arc::from(driver.shared.role.as_str());
            let partition = driver.partition();
            self.views.add_user(partition, &role);
            let slot = Slot {
                driver,
                role,
                partition,
                at: At::Ready,
                gen: 0,
                since: None,
            };
            let i = match self.free.pop() {
                Some(i) => {
                    self.slots[i] = Some(slot);
                    i
                }
                None => {
                    self.slots.push(Some(slot));
                    self.slots.len() - 1
                }
            };
            self.ready.push_back(i);
        }
    }

    fn take_done(&mut self) {
        let done = std::mem::take(&mut *lock(&self.inbox.done));
        let now = self.inbox.clock.now();
        for d in done {
            self.in_flight = self.in_flight.saturating_sub(1);
            match d {
                Done::Call { slot, gen } => {
                    let Some(s) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                        continue;
                    };
                    if s.gen != gen || s.at != At::Calling {
                        continue;
                    }
                    let outcome = s.driver.take_in_flight().unwrap_or_else(|| {
                        Err(TransportError::fatal("a transport call left no result"))
                    });
                    self.feed(slot, outcome);
                }
                Done::Read { partition, outcome } => {
                    let slots = &self.slots;
                    let cancelled = |i: usize| cancel_pending(slots, i);
                    let answers = self.views.read_done(partition, outcome, now, &cancelled);
                    for (slot, gen, outcome) in answers {
                        let current = self
                            .slots
                            .get(slot)
                            .and_then(Option::as_ref)
                            .is_some_and(|s| s.gen == gen && s.at == At::Reading);
                        if current {
                            self.feed(slot, outcome);
                        }
                    }
                }
            }
        }
    }

    /// Feeds a call's or a read's outcome to a slot's machine.
    fn feed(&mut self, i: usize, outcome: Result<MachineEvent, TransportError>) {
        let Some(s) = self.slots.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        s.driver.shared.update(|st| st.snapshot.idle_at = None);
        match s.driver.complete(outcome) {
            Ok(()) => {
                s.at = At::Ready;
                self.ready.push_back(i);
            }
            Err(e) => self.finish(i, e),
        }
    }

    /// Candidacies with a cancel or a fenced guarded write waiting: waiting ones wake, parked
    /// reads are answered by the next read.
    fn look_at_cancels(&mut self, now: UnixMillis) {
        let scan = self.inbox.manual().is_some() || self.inbox.bell.take_cancels();
        if !scan {
            return;
        }
        for i in 0..self.slots.len() {
            let Some(s) = self.slots[i].as_mut() else {
                continue;
            };
            if s.at == At::Waiting && s.driver.cancel_pending() {
                s.at = At::Ready;
                s.gen += 1;
                self.ready.push_back(i);
            }
        }
        let slots = &self.slots;
        self.views
            .unpark(now, true, &|i: usize| cancel_pending(slots, i));
    }

    fn fire_timers(&mut self, now: UnixMillis) {
        while let Some(Reverse((at, i, gen))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(s) = self.slots.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if s.gen != gen || s.at != At::Waiting {
                continue;
            }
            s.driver.shared.update(|st| st.snapshot.idle_at = None);
            match s.driver.tick() {
                Ok(()) => {
                    s.at = At::Ready;
                    self.ready.push_back(i);
                }
                Err(e) => self.finish(i, e),
            }
        }
        // Long polls whose wait is over are answered by the next read.
        self.views.unpark(now, false, &|_| false);
    }

    /// Runs one candidacy until it waits: a call handed to the pool, a read queued, a timer.
    fn step(&mut self, i: usize, now: UnixMillis) {
        let Some(s) = self.slots.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        if let Err(e) = s.driver.check_cancel() {
            self.finish(i, e);
            return;
        }
        s.since.get_or_insert(now);
        loop {
            let Some(s) = self.slots.get_mut(i).and_then(Option::as_mut) else {
                return;
            };
            match s.driver.drain() {
                Next::Ended => {
                    self.remove(i);
                    return;
                }
                Next::Io(Command::ReadPartition {
                    partition,
                    from_offset,
                    wait_until,
                }) => {
                    s.gen += 1;
                    s.at = At::Reading;
                    if wait_until.is_some_and(|u| u > now) {
                        // A long poll: the candidacy is idle until it is answered.
                        s.since = None;
                    }
                    let req = Req {
                        slot: i,
                        gen: s.gen,
                        role: s.role.clone(),
                        from: from_offset,
                        until: wait_until.filter(|u| *u > now),
                    };
                    self.views.request(partition, req);
                    return;
                }
                Next::Io(cmd) => {
                    s.gen += 1;
                    s.at = At::Calling;
                    let describe = matches!(cmd, Command::DescribeRole { .. });
                    let append = match &cmd {
                        Command::Append { partition, .. } => Some(*partition),
                        _ => None,
                    };
                    let transport = &self.inbox.transport;
                    let on_its_own = match &cmd {
                        Command::AcquireEpoch { .. } => transport.acquires_without_a_thread(),
                        Command::WriteLease { .. } => transport.writes_without_a_thread(),
                        _ => false,
                    };
                    let due = due(&cmd, s.driver.lease_deadline(), s.since.unwrap_or(now), now);
                    // Issued at or before this instant (the turn's `now` can be earlier than
                    // the machine's own): a lease write's deadline moves by no more than the
                    // wait for a thread.
                    let call = Arc::new(InFlight::new(cmd, s.driver.clock.now()));
                    s.driver.in_flight = Some(call.clone());
                    self.outgoing.push(Outgoing {
                        slot: i,
                        gen: s.gen,
                        call,
                        shared: s.driver.shared.clone(),
                        describe,
                        append,
                        on_its_own,
                        due,
                    });
                    return;
                }
                Next::Wait(Some(w)) if w <= now => {
                    if let Err(e) = s.driver.tick() {
                        self.finish(i, e);
                        return;
                    }
                }
                Next::Wait(wake) => {
                    s.gen += 1;
                    s.at = At::Waiting;
                    s.since = None;
                    if let Some(w) = wake {
                        self.timers.push(Reverse((w, i, s.gen)));
                    }
                    s.driver.shared.update(|st| st.snapshot.idle_at = Some(now));
                    return;
                }
            }
        }
    }

    /// The registrations of this turn as jobs of [`append_all`](crate::Registrar::append_all),
    /// each partition's in one job, the partitions dealt over as many jobs as the pool has
    /// threads (one job when the transport's appends hold no thread): the appends of one
    /// partition are queued together before its first batch is sent, and the partitions'
    /// batches go out on several threads at once.
    fn append_jobs(&self, appends: Vec<Outgoing>, threads: usize) -> Vec<(Due, Held)> {
        if appends.is_empty() {
            return Vec::new();
        }
        let mut partitions: Vec<i32> = appends.iter().filter_map(|c| c.append).collect();
        partitions.sort_unstable();
        partitions.dedup();
        let threads = threads.max(1);
        let jobs = partitions.len().min(threads);
        let mut chunks: Vec<Vec<Outgoing>> = (0..jobs).map(|_| Vec::new()).collect();
        for c in appends {
            let p = c.append.unwrap_or_default();
            let at = partitions.binary_search(&p).unwrap_or_default();
            chunks[at % jobs].push(c);
        }
        chunks
            .into_iter()
            .map(|chunk| {
                let inbox = self.inbox.clone();
                let due = chunk.iter().map(|c| c.due).min().unwrap_or(Due::MIN);
                let job: Held = Box::new(move |place| {
                    // The place is given back once every append of the job is answered.
                    let place = Arc::new(place);
                    let mut appends = Vec::with_capacity(chunk.len());
                    for c in chunk {
                        let place = Arc::clone(&place);
                        let answer = Answer {
                            inbox: inbox.clone(),
                            call: c.call.clone(),
                            slot: c.slot,
                            gen: c.gen,
                            answered: false,
                        };
                        match c.call.start(inbox.clock.now()) {
                            Some(Command::Append {
                                partition,
                                key,
                                value,
                            }) => appends.push(crate::transport::Append {
                                partition,
                                key,
                                value,
                                done: Box::new(move |outcome| {
                                    answer.give(
                                        outcome.map(|offset| MachineEvent::Appended { offset }),
                                    );
                                    drop(place);
                                }),
                            }),
                            Some(_) => answer
                                .give(Err(TransportError::fatal("driver bug: not a registration"))),
                            // Taken by a driver exiting on the spot: it runs it itself.
                            None => answer.skip(),
                        }
                    }
                    with_priority(due, || inbox.transport.append_all(appends));
                });
                (due, job)
            })
            .collect()
    }

    /// Hands the calls of this turn over: the checks (DescribeRole) of up to
    /// [`DESCRIBE_BATCH`] candidacies in one call of
    /// [`start_describe_epochs`](crate::Coordinator::start_describe_epochs), the registrations
    /// in a few calls of [`append_all`](crate::Registrar::append_all) (see
    /// [`Core::append_jobs`]), every other call alone. Those the transport runs without a
    /// thread are started here (acquires and lease writes through the [`Window`]); the
    /// others go to the pool.
    fn flush_calls(&mut self) {
        let calls = std::mem::take(&mut self.outgoing);
        // One completion per call, whether alone or in a batch.
        self.in_flight += calls.len();
        let (describes, singles): (Vec<Outgoing>, Vec<Outgoing>) =
            calls.into_iter().partition(|c| c.describe);
        let mut jobs: Vec<(Due, Job)> = Vec::new();
        let (appends, singles): (Vec<Outgoing>, Vec<Outgoing>) =
            singles.into_iter().partition(|c| c.append.is_some());
        if self.inbox.transport.appends_without_a_thread() {
            // Started from the window: the transport sends them holding no thread.
            for (due, job) in self.append_jobs(appends, 1) {
                self.window
                    .submit(due, Box::new(move |place| job(Some(place))));
            }
        } else {
            let threads = self.pool.as_ref().map_or(1, Pool::threads);
            for (due, job) in self.append_jobs(appends, threads) {
                jobs.push((due, Box::new(move || job(None))));
            }
        }
        let (started, singles): (Vec<Outgoing>, Vec<Outgoing>) =
            singles.into_iter().partition(|c| c.on_its_own);
        for c in started {
            let inbox = self.inbox.clone();
            self.window.submit(
                c.due,
                Box::new(move |permit| {
                    let started = Started {
                        inbox: inbox.clone(),
                        call: Arc::clone(&c.call),
                        slot: c.slot,
                        gen: c.gen,
                        permit: Some(permit),
                    };
                    match c.call.start(inbox.clock.now()) {
                        Some(cmd) => with_priority(c.due, || {
                            start_execute(
                                &*inbox.transport,
                                cmd,
                                Box::new(move |outcome| started.give(outcome)),
                            )
                        }),
                        // Taken by a driver exiting on the spot: it runs it itself.
                        None => started.skip(),
                    }
                }),
            );
        }
        for c in singles {
            let inbox = self.inbox.clone();
            jobs.push((
                c.due,
                Box::new(move || {
                    if let Some(cmd) = c.call.start(inbox.clock.now()) {
                        c.call.put(execute(
                            &*inbox.transport,
                            cmd,
                            &*inbox.clock,
                            Duration::ZERO,
                            &c.shared,
                        ));
                    }
                    inbox.finished(vec![Done::Call {
                        slot: c.slot,
                        gen: c.gen,
                    }]);
                }),
            ));
        }
        let mut describes = describes.into_iter().peekable();
        // A transport whose checks hold no thread gets them from the loop itself.
        let on_loop = self.inbox.transport.describes_without_a_thread();
        while describes.peek().is_some() {
            let batch: Vec<Outgoing> = describes.by_ref().take(DESCRIBE_BATCH).collect();
            let due = batch.iter().map(|c| c.due).min().unwrap_or(Due::MIN);
            let check = self.check_job(batch, due);
            if on_loop {
                self.window
                    .submit(due, Box::new(move |place| check(Some(place))));
            } else {
                jobs.push((due, Box::new(move || check(None))));
            }
        }
        for (due, job) in jobs {
            match &self.pool {
                Some(pool) => {
                    pool.submit(due, job);
                }
                None => job(),
            }
        }
    }

    /// The checks (DescribeRole) of `batch`, in one
    /// [`start_describe_epochs`](crate::Coordinator::start_describe_epochs): the answers are
    /// handed to each call, and the loop is told, from whichever thread has them.
    fn check_job(&self, batch: Vec<Outgoing>, due: Due) -> Held {
        let inbox = self.inbox.clone();
        Box::new(move |place| {
            let mut roles = Vec::with_capacity(batch.len());
            let mut asked = Vec::with_capacity(batch.len());
            for c in &batch {
                match c.call.start(inbox.clock.now()) {
                    Some(Command::DescribeRole { transactional_id }) => {
                        roles.push(transactional_id);
                        asked.push(Arc::clone(&c.call));
                    }
                    Some(_) => c
                        .call
                        .put(Err(TransportError::fatal("driver bug: not a check"))),
                    // Taken by a driver exiting on the spot.
                    None => {}
                }
            }
            let finished: Vec<Done> = batch
                .iter()
                .map(|c| Done::Call {
                    slot: c.slot,
                    gen: c.gen,
                })
                .collect();
            drop(batch);
            let transport = Arc::clone(&inbox.transport);
            let n = roles.len();
            with_priority(due, || {
                transport.start_describe_epochs(
                    roles,
                    answered_or(
                        move || {
                            (0..n)
                                .map(|_| {
                                    Err(TransportError::retriable(
                                        "the transport dropped a check without answering it",
                                    ))
                                })
                                .collect()
                        },
                        move |answers: Vec<Result<_, TransportError>>| {
                            let mut answers = answers.into_iter();
                            for call in asked {
                                let answer = answers.next().unwrap_or_else(|| {
                                    Err(TransportError::fatal(
                                    "describe_epochs answered fewer roles than it was asked for",
                                ))
                                });
                                call.put(answer.map(|status| MachineEvent::Described { status }));
                            }
                            inbox.finished(finished);
                            drop(place);
                        },
                    ),
                )
            });
        })
    }

    /// Partitions the transport's tail moved: their parked long polls are refreshed now.
    fn take_tail_news(&mut self) {
        let news = std::mem::take(&mut *lock(&self.inbox.tail_news));
        for partition in news {
            self.views.refresh_now(partition);
        }
    }

    fn issue_reads(&mut self, now: UnixMillis) {
        for fetch in self.views.fetches(now, self.changes()) {
            let inbox = self.inbox.clone();
            self.in_flight += 1;
            // Only long polls wait on it (no request needs a fresh read): from the
            // transport's tail if it has one, here, with no request and no thread.
            if fetch.may_lag && self.tail_hook.is_some() {
                if let Some(batch) = inbox.transport.read_tailed(fetch.partition, fetch.from) {
                    self.tailed_reads += 1;
                    inbox.finished(vec![Done::Read {
                        partition: fetch.partition,
                        outcome: Ok(batch),
                    }]);
                    continue;
                }
            }
            self.reads += 1;
            let on_loop = inbox.transport.reads_without_a_thread();
            let job: Held = Box::new(move |place| {
                let transport = Arc::clone(&inbox.transport);
                // A read answers every candidacy of the partition that waits: first.
                with_priority(Due::MIN, || {
                    transport.start_read_partition(
                        fetch.partition,
                        fetch.from,
                        answered_or(
                            || {
                                Err(TransportError::retriable(
                                    "the transport dropped a read without answering it",
                                ))
                            },
                            move |outcome| {
                                inbox.finished(vec![Done::Read {
                                    partition: fetch.partition,
                                    outcome,
                                }]);
                                drop(place);
                            },
                        ),
                    )
                });
            });
            // A read answers every candidacy of the partition that waits: first.
            match &self.pool {
                // The transport reads holding no thread: a place in the window.
                _ if on_loop => self
                    .window
                    .submit(Due::MIN, Box::new(move |place| job(Some(place)))),
                Some(pool) => {
                    pool.submit(Due::MIN, Box::new(move || job(None)));
                }
                None => job(None),
            }
        }
    }

    /// The slot's driver stopped with an error of its own.
    fn finish(&mut self, i: usize, e: Error) {
        if let Some(s) = self.slots.get(i).and_then(Option::as_ref) {
            s.driver.shared.finish(e);
        }
        self.remove(i);
    }

    fn remove(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i).and_then(Option::take) {
            self.views.remove_user(s.partition, &s.role, i);
            self.free.push(i);
            self.inbox.hosted.fetch_sub(1, Ordering::SeqCst);
            drop(s);
        }
    }
}

/// The most a call's place in the I/O queue moves ahead of the instant it is issued (see
/// [`Due`]): the steps of a takeover under way pass newer work, but work that has gone on for
/// long (thousands of candidacies starting at once) queues about as issued, and holds a
/// renewal back only so long.
const HEAD_START: Duration = Duration::from_secs(1);

fn head_start() -> i64 {
    i64::try_from(HEAD_START.as_millis()).unwrap_or(i64::MAX)
}

/// When a call issued `now` should run in the I/O pool (see [`Due`]). `since` is when the
/// candidacy's current stretch of work began; `lease_deadline` the deadline of the leader's
/// last lease (`None` for a candidacy that does not lead).
fn due(
    cmd: &Command,
    lease_deadline: Option<UnixMillis>,
    since: UnixMillis,
    now: UnixMillis,
) -> Due {
    match (cmd, lease_deadline) {
        // A renewal (a resign's tombstone is not one: it goes as the exit's other steps).
        (Command::WriteLease { value: Some(_), .. }, Some(deadline)) if deadline > now => {
            // Less the head start, so that only calls issued before the halfway point pass it.
            now.0 + (deadline.0 - now.0) / 2 - head_start()
        }
        _ => since.0.max(now.0.saturating_sub(head_start())),
    }
}

/// Whether the candidacy in slot `i` has a cancel (or an outside fence) waiting to be fed.
fn cancel_pending<T: Transport + Send + Sync + ?Sized + 'static>(
    slots: &[Option<Slot<T>>],
    i: usize,
) -> bool {
    slots
        .get(i)
        .and_then(Option::as_ref)
        .is_some_and(|s| s.driver.cancel_pending())
}

/// The blocking flavour's loop: turns until the host stops.
#[cfg(feature = "blocking")]
pub(crate) fn run_on_thread<T: Transport + Send + Sync + ?Sized + 'static>(mut core: Core<T>) {
    use event_listener::Listener;
    loop {
        let listener = core.listen();
        match core.turn() {
            Sleep::Stop => return,
            Sleep::No => {}
            Sleep::Bell => listener.wait(),
            Sleep::For(d) => {
                listener.wait_timeout(d);
            }
        }
    }
}

/// The async flavours' loop: turns until the host stops, sleeping with runtime `R`'s timer.
#[cfg(any(feature = "tokio", feature = "smol", feature = "async-std"))]
pub(crate) async fn run_as_task<R: crate::runtime::Runtime, T>(mut core: Core<T>)
where
    T: Transport + Send + Sync + ?Sized + 'static,
{
    use futures_lite::future::or;
    loop {
        let listener = core.listen();
        match core.turn() {
            Sleep::Stop => return,
            // Let the runtime's other tasks run between busy turns.
            Sleep::No => futures_lite::future::yield_now().await,
            Sleep::Bell => listener.await,
            Sleep::For(d) => or(listener, R::sleep(d)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_core::token::FencingToken;

    fn write_lease(value: Option<Vec<u8>>) -> Command {
        Command::WriteLease {
            partition: 0,
            key: b"k".to_vec(),
            value,
            token: FencingToken::new(1, 0),
        }
    }

    #[test]
    fn a_renewal_is_passed_by_calls_issued_before_halfway_to_its_deadline() {
        let now = UnixMillis(10_000);
        let since = UnixMillis(9_500);
        // A leader renewing 7 s before its lease runs out: calls issued in the next 3.5 s
        // (due at most a head start before their issue) pass it.
        let renewal = write_lease(Some(b"lease".to_vec()));
        assert_eq!(due(&renewal, Some(UnixMillis(17_000)), since, now), 12_500);
        // A renewal retried with its lease about to run out passes what was issued in the last
        // second; one already past it, and a claim (not leading yet), go as any other call.
        assert_eq!(due(&renewal, Some(UnixMillis(10_001)), since, now), 9_000);
        assert_eq!(due(&renewal, Some(UnixMillis(9_900)), since, now), 9_500);
        assert_eq!(due(&renewal, None, since, now), 9_500);
        // Any other call: when its stretch of work began, so that a takeover keeps the place
        // of its first step...
        let tombstone = write_lease(None);
        assert_eq!(due(&tombstone, Some(UnixMillis(17_000)), since, now), 9_500);
        let acquire = Command::AcquireEpoch {
            transactional_id: kafka_coordination_core::record::Role::new("r").unwrap(),
            transaction_timeout: Duration::from_secs(10),
        };
        assert_eq!(due(&acquire, None, since, now), 9_500);
        // ... but never more than HEAD_START before it is issued.
        assert_eq!(due(&acquire, None, UnixMillis(2_000), now), 9_000);
    }
}
