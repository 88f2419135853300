//! The running watch: its handle ([`Watch`], [`StopHandle`]) and its loop, on a thread or a
//! runtime task.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use event_listener::{Event, EventListener, Listener};
use kafka_coordination_core::record::Role;
use kafka_coordination_core::time::UnixMillis;

use super::tracker::{partition_of, LeaseTracker, WatchEvent, WatchOptions};
use crate::clock::Clock;
use crate::error::TransportError;
use crate::leadership::Error;
use crate::transport::{ReadBatch, StateReader};

type Item = Result<WatchEvent, Error>;

struct Inner {
    queue: VecDeque<Item>,
    stop: bool,
    ended: bool,
    /// While idle on a manual clock: the change count the loop had acted on.
    idle_seen: Option<u64>,
}

/// What the watch loop and its handle share.
struct Shared {
    role: Role,
    inner: Mutex<Inner>,
    /// Rung on every new item and at the end (consumers wait on it).
    changed: Event,
    /// Rung by a stop (the loop waits on it on the real clock; a manual clock rings itself).
    bell: Event,
    clock: Arc<dyn Clock>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        kafka_coordination_transport::lock::lock(&self.inner)
    }

    fn push(&self, items: impl IntoIterator<Item = Item>) {
        let mut any = false;
        {
            let mut inner = self.lock();
            for item in items {
                inner.queue.push_back(item);
                any = true;
            }
        }
        if any {
            self.changed.notify(usize::MAX);
        }
    }

    fn stopped(&self) -> bool {
        self.lock().stop
    }

    fn set_idle(&self, seen: Option<u64>) {
        self.lock().idle_seen = seen;
        if let Some(m) = self.clock.as_manual() {
            m.note_progress();
        }
    }

    fn end(&self) {
        self.lock().ended = true;
        self.changed.notify(usize::MAX);
        if let Some(m) = self.clock.as_manual() {
            m.note_progress();
        }
    }

    /// The next queued event (`Some(Some(item))`), the end once the queue is empty
    /// (`Some(None)`), or `None` while the caller has to wait for a change.
    fn take(&self) -> Option<Option<Item>> {
        let mut inner = self.lock();
        match inner.queue.pop_front() {
            Some(item) => Some(Some(item)),
            None if inner.ended => Some(None),
            None => None,
        }
    }

    fn request_stop(&self) {
        self.lock().stop = true;
        self.bell.notify(usize::MAX);
        if let Some(m) = self.clock.as_manual() {
            m.ring();
        }
    }
}

impl crate::clock::Participant for Shared {
    fn unsettled(&self, changes: u64) -> Option<String> {
        let inner = self.lock();
        if inner.ended || inner.idle_seen == Some(changes) {
            return None;
        }
        Some(format!(
            "the watch of role `{}`: {}",
            self.role,
            match inner.idle_seen {
                Some(seen) => format!("idle at change {seen}, about to wake"),
                None => "busy (reading)".to_owned(),
            }
        ))
    }
}

/// Stops a [`Watch`] from another thread or task (a signal handler's thread, say).
#[derive(Clone)]
pub struct StopHandle {
    shared: Arc<Shared>,
}

impl fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopHandle")
            .field("role", &self.shared.role)
            .finish()
    }
}

impl StopHandle {
    /// Stops the watch: its iterator and stream end once the events already reported are
    /// taken.
    pub fn stop(&self) {
        self.shared.request_stop();
    }
}

/// A running watch of one role: a blocking [`Iterator`] and an async
/// [`Stream`](futures_lite::Stream) of `Result<WatchEvent, Error>`. Made by
/// [`blocking::watch`](crate::blocking::watch) or `watch` of an async flavour module; see the
/// [module docs](crate::watch) for what it reports.
///
/// The watch runs in the background (a thread, or a task of the flavour's runtime) and queues
/// its events here; it ends after an `Err` item (a failure that will not pass, or reads failing
/// for longer than [`WatchOptions::give_up_after`]) or after [`stop`](Self::stop). Dropping the
/// `Watch` stops it.
///
/// ```
/// # #[cfg(all(feature = "memory", feature = "blocking"))] {
/// use std::sync::Arc;
/// use kafka_coordination::memory::MemoryBroker;
/// use kafka_coordination::watch::{WatchEvent, WatchOptions};
/// use kafka_coordination::{blocking, ManualClock, Options};
///
/// let clock = ManualClock::default();
/// let broker = MemoryBroker::new(16, Arc::new(clock.clone()));
/// let watch = blocking::watch(broker.transport("observer"), "jobs",
///     WatchOptions::new().clock(clock.clone()))?;
/// clock.settle().unwrap();                              // the watch has caught up
/// let leader = blocking::acquire_leadership(broker.transport("a"), "jobs", "node-a",
///     Options::new().clock(clock.clone()))?;
/// clock.settle().unwrap();                              // the watch has read everything
/// assert!(matches!(watch.try_next(), Some(Ok(WatchEvent::Vacant(_)))));  // when it started
/// let Some(Ok(WatchEvent::Leading(l))) = watch.try_next() else { panic!() };
/// assert_eq!((l.member.as_str(), l.term), ("node-a", leader.term()));
/// # }
/// # Ok::<(), kafka_coordination::Error>(())
/// ```
pub struct Watch {
    shared: Arc<Shared>,
    listener: Option<EventListener>,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.shared.lock();
        f.debug_struct("Watch")
            .field("role", &self.shared.role)
            .field("queued", &inner.queue.len())
            .field("ended", &inner.ended)
            .finish()
    }
}

impl Watch {
    /// The role watched.
    pub fn role(&self) -> &Role {
        &self.shared.role
    }

    /// The next event if one is queued, without waiting. After
    /// [`ManualClock::settle`](crate::ManualClock::settle) every event caused by the records
    /// and clock moves so far is queued.
    pub fn try_next(&self) -> Option<Item> {
        self.shared.lock().queue.pop_front()
    }

    /// Every queued event, without waiting.
    pub fn drain(&self) -> Vec<Item> {
        self.shared.lock().queue.drain(..).collect()
    }

    /// The next event, waiting for it; `None` once the watch has ended and its events are
    /// taken.
    pub fn next_blocking(&self) -> Option<Item> {
        self.next_until(None)
    }

    /// [`next_blocking`](Self::next_blocking), waiting at most `timeout`; `None` on timeout as
    /// well (see [`is_ended`](Self::is_ended)).
    pub fn next_timeout(&self, timeout: Duration) -> Option<Item> {
        self.next_until(std::time::Instant::now().checked_add(timeout))
    }

    /// The next event, waiting for it until `deadline` (for ever when `None`).
    fn next_until(&self, deadline: Option<std::time::Instant>) -> Option<Item> {
        loop {
            // Listen before looking: an item pushed in between rings this listener.
            let listener = self.shared.changed.listen();
            if let Some(next) = self.shared.take() {
                return next;
            }
            match deadline {
                Some(d) => {
                    listener.wait_deadline(d)?;
                }
                None => listener.wait(),
            }
        }
    }

    /// Whether the watch has ended (stopped or failed); queued events may remain.
    pub fn is_ended(&self) -> bool {
        self.shared.lock().ended
    }

    /// Stops the watch (see [`StopHandle::stop`]).
    pub fn stop(&self) {
        self.shared.request_stop();
    }

    /// A handle that stops the watch from elsewhere.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.request_stop();
    }
}

impl Iterator for Watch {
    type Item = Item;
    /// Blocks until the next event ([`next_blocking`](Watch::next_blocking)).
    fn next(&mut self) -> Option<Item> {
        self.next_blocking()
    }
}

impl futures_lite::Stream for Watch {
    type Item = Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        use std::future::Future;
        loop {
            if let Some(next) = self.shared.take() {
                self.listener = None;
                return Poll::Ready(next);
            }
            match self.listener.as_mut() {
                // Listen, then look again: an item pushed in between rings this listener.
                None => self.listener = Some(self.shared.changed.listen()),
                Some(l) => match Pin::new(l).poll(cx) {
                    Poll::Ready(()) => self.listener = None,
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }
}

/// The watch loop's state, shared by the blocking and async loops.
struct WatchLoop {
    shared: Arc<Shared>,
    reader: Arc<dyn StateReader + Send + Sync>,
    partition: i32,
    options: WatchOptions,
    tracker: LeaseTracker,
    caught_up: bool,
    /// Whether any event was queued yet.
    reported: bool,
    /// Reads have been failing since (by the watch's clock), and how many times in a row.
    failing: Option<(UnixMillis, u32)>,
}

/// A manual clock's listener and the change count read after it was made.
type Ticket = (EventListener, u64);

/// What the loop does next.
enum Step {
    /// Read from `from`, waiting up to `max_wait` for records. On a manual clock, `ticket`
    /// is the clock's listener and change count taken before the read: a wait after it
    /// starts from there, so a change during the read is never missed.
    Read {
        from: i64,
        max_wait: Duration,
        ticket: Option<Ticket>,
    },
    /// Wait for the manual clock's next change (having acted on `seen`) or a stop.
    ClockMoves { seen: u64, listener: EventListener },
    /// Wait this much real time, or until a stop.
    Sleep {
        duration: Duration,
        listener: EventListener,
    },
    /// The watch is over.
    Done,
}

impl WatchLoop {
    fn new(
        reader: Arc<dyn StateReader + Send + Sync>,
        role: &str,
        options: WatchOptions,
    ) -> Result<WatchLoop, Error> {
        let role = Role::new(role)?;
        let partition = partition_of(&role, reader.partitions())?;
        let shared = Arc::new(Shared {
            role: role.clone(),
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                stop: false,
                ended: false,
                idle_seen: None,
            }),
            changed: Event::new(),
            bell: Event::new(),
            clock: options.clock.clone(),
        });
        if let Some(manual) = options.clock.as_manual() {
            let participant: Arc<dyn crate::clock::Participant> = shared.clone();
            manual.register(Arc::downgrade(&participant));
        }
        Ok(WatchLoop {
            shared,
            reader,
            partition,
            options,
            tracker: LeaseTracker::new(role),
            caught_up: false,
            reported: false,
            failing: None,
        })
    }

    fn handle(&self) -> Watch {
        Watch {
            shared: self.shared.clone(),
            listener: None,
        }
    }

    /// How long the next read may wait for records at `now`.
    fn max_wait(&self, now: UnixMillis) -> Duration {
        if !self.caught_up
            || self.options.clock.as_manual().is_some()
            || !self.reader.can_long_poll()
        {
            return Duration::ZERO;
        }
        match self.tracker.expires_at() {
            Some(deadline) => deadline.since(now).min(self.options.long_poll),
            None => self.options.long_poll,
        }
    }

    /// The next step after a read (or at the start): read again, or wait. `ticket` is the
    /// one the last read was issued with.
    fn plan(&self, read_again: bool, ticket: Option<Ticket>) -> Step {
        if self.shared.stopped() {
            return Step::Done;
        }
        let clock = &self.options.clock;
        let start = !self.caught_up && self.failing.is_none();
        if let Some(manual) = clock.as_manual() {
            let (listener, seen) = ticket.unwrap_or_else(|| {
                let listener = manual.listen();
                (listener, manual.changes())
            });
            if self.shared.stopped() {
                return Step::Done;
            }
            let due = self.tracker.expires_at().is_some_and(|d| clock.now() >= d);
            if read_again || start || (due && self.failing.is_none()) {
                return self.read_step();
            }
            // Idle until the clock moves or a record is written (the broker on this clock
            // counts each as a change); a failed read is tried again then.
            return Step::ClockMoves { seen, listener };
        }
        if read_again || start {
            return self.read_step();
        }
        let listener = self.shared.bell.listen();
        if let Some((_, attempts)) = self.failing {
            let backoff = Duration::from_millis(100)
                .saturating_mul(1 << attempts.min(5))
                .min(Duration::from_secs(2));
            return Step::Sleep {
                duration: backoff,
                listener,
            };
        }
        if self.reader.can_long_poll() {
            return self.read_step();
        }
        // A transport that answers at once: read at the poll interval, or at the deadline.
        let now = clock.now();
        let duration = match self.tracker.expires_at() {
            Some(d) if now >= d => return self.read_step(),
            Some(d) => d.since(now).min(self.options.poll_interval),
            None => self.options.poll_interval,
        };
        Step::Sleep { duration, listener }
    }

    fn read_step(&self) -> Step {
        let ticket = self.options.clock.as_manual().map(|manual| {
            let listener = manual.listen();
            (listener, manual.changes())
        });
        Step::Read {
            from: self.tracker.next_offset(),
            max_wait: self.max_wait(self.options.clock.now()),
            ticket,
        }
    }

    /// Acts on a read that began at `started`; returns whether to read again at once.
    fn on_read(&mut self, started: UnixMillis, outcome: Result<ReadBatch, TransportError>) -> bool {
        let batch = match outcome {
            Ok(b) => b,
            Err(e) => {
                self.on_error(e);
                return false;
            }
        };
        self.failing = None;
        let mut events = Vec::new();
        for r in &batch.records {
            self.tracker.apply(r, &mut events);
        }
        let report = self.caught_up || self.options.history;
        if !report {
            events.clear();
        }
        let read_any = !batch.records.is_empty();
        self.tracker.advance_to(batch.end_offset);
        if !self.caught_up && (!read_any || self.tracker.next_offset() >= batch.end_offset) {
            self.caught_up = true;
            // The state found on catching up, unless the history already told it.
            let told = self.reported || events.iter().any(|e| !matches!(e, WatchEvent::Renewed(_)));
            if !self.options.history || !told {
                events.push(self.tracker.current(started).into());
            }
        }
        if self.caught_up {
            events.extend(self.tracker.expire(started));
        }
        if !self.options.renewals {
            events.retain(|e| !matches!(e, WatchEvent::Renewed(_)));
        }
        self.reported |= !events.is_empty();
        self.shared.push(events.into_iter().map(Ok));
        read_any || !self.caught_up
    }

    fn on_error(&mut self, e: TransportError) {
        if !e.is_retriable() {
            self.fail(Error::Transport(e));
            return;
        }
        let now = self.options.clock.now();
        let (since, attempts) = self.failing.unwrap_or((now, 0));
        self.failing = Some((since, attempts.saturating_add(1)));
        let waited = now.since(since);
        if waited >= self.options.give_up_after {
            self.fail(Error::Unavailable { waited, last: e });
        }
    }

    fn fail(&mut self, e: Error) {
        self.shared.push([Err(e)]);
        self.shared.lock().stop = true;
    }
}

impl Drop for WatchLoop {
    fn drop(&mut self) {
        self.shared.end();
    }
}

/// Runs the watch loop on this thread until it is stopped or fails.
#[cfg(feature = "blocking")]
fn run_blocking(mut w: WatchLoop) {
    let (mut read_again, mut ticket) = (false, None);
    loop {
        match w.plan(read_again, ticket.take()) {
            Step::Done => return,
            Step::Read {
                from,
                max_wait,
                ticket: issued,
            } => {
                let started = w.options.clock.now();
                let outcome = crate::transport::read(&*w.reader, w.partition, from, max_wait);
                read_again = w.on_read(started, outcome);
                ticket = issued;
            }
            Step::ClockMoves { seen, listener } => {
                w.shared.set_idle(Some(seen));
                listener.wait();
                w.shared.set_idle(None);
                read_again = true;
            }
            Step::Sleep { duration, listener } => {
                listener.wait_timeout(duration);
                read_again = true;
            }
        }
    }
}

/// Starts a watch whose loop runs on a thread of its own.
#[cfg(feature = "blocking")]
pub(crate) fn watch_on_thread(
    reader: Arc<dyn StateReader + Send + Sync>,
    role: &str,
    options: WatchOptions,
) -> Result<Watch, Error> {
    let w = WatchLoop::new(reader, role, options)?;
    let handle = w.handle();
    std::thread::Builder::new()
        .name(format!("kc-watch-{}", role.replace('\0', "?")))
        .spawn(move || run_blocking(w))
        .map_err(|e| {
            Error::Transport(TransportError::fatal(format!(
                "could not start the watch thread: {e}"
            )))
        })?;
    Ok(handle)
}

#[cfg(async_driver)]
mod on_runtime {
    use super::*;
    use crate::runtime::Runtime;

    /// Starts a watch whose loop is a task of runtime `R` (each read awaited on the task).
    pub(crate) fn watch_on<R: Runtime>(
        reader: Arc<dyn StateReader + Send + Sync>,
        role: &str,
        options: WatchOptions,
    ) -> Result<Watch, Error> {
        let w = WatchLoop::new(reader, role, options)?;
        let handle = w.handle();
        R::spawn(Box::pin(run_async::<R>(w)));
        Ok(handle)
    }

    async fn run_async<R: Runtime>(mut w: WatchLoop) {
        use futures_lite::future::or;
        let (mut read_again, mut ticket) = (false, None);
        loop {
            match w.plan(read_again, ticket.take()) {
                Step::Done => return,
                Step::Read {
                    from,
                    max_wait,
                    ticket: issued,
                } => {
                    ticket = issued;
                    let started = w.options.clock.now();
                    let outcome =
                        crate::awaited::read(&*w.reader, w.partition, from, max_wait).await;
                    read_again = w.on_read(started, outcome);
                }
                Step::ClockMoves { seen, listener } => {
                    w.shared.set_idle(Some(seen));
                    listener.await;
                    w.shared.set_idle(None);
                    read_again = true;
                }
                Step::Sleep { duration, listener } => {
                    or(listener, R::sleep(duration)).await;
                    read_again = true;
                }
            }
        }
    }
}
#[cfg(async_driver)]
pub(crate) use on_runtime::watch_on;
