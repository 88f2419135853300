//! The loop: every hosted candidacy, its timers and its partition views, turned by a thread
//! or a runtime task until every handle and every candidacy is gone.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use event_listener::EventListener;
use kafka_coordination_core::machine::{Command, Event as MachineEvent};
use kafka_coordination_core::time::UnixMillis;

use crate::clock::Clock;
use crate::driver::{Driver, InFlight, Next};
use crate::error::TransportError;
use crate::leadership::Error;
use crate::transport::Transport;
use kafka_coordination_transport::lock::lock;

use super::completions::Outgoing;
use super::handle::{Host, HostHandle};
use super::host_options::{HostOptions, HostStats, DEFAULT_MAX_IN_FLIGHT};
use super::inbox::{Bell, Done, Inbox};
use super::shared_reads::{Req, Views};
use super::window::{due, Window};

/// Where a hosted candidacy is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum At {
    Ready,
    Waiting,
    Calling,
    Reading,
}

pub(super) struct Slot<T: Transport + Send + Sync + ?Sized + 'static> {
    pub(super) driver: Driver<T>,
    pub(super) role: Arc<str>,
    pub(super) partition: i32,
    pub(super) at: At,
    /// Counts the slot's waits and requests, so that a stale timer or answer is ignored.
    pub(super) gen: u64,
    /// When its current stretch of work began (it left a timer or a long poll); `None` while it
    /// waits. Its calls keep that place in the I/O queue (see [`Due`]).
    pub(super) since: Option<UnixMillis>,
}

/// The loop's state: every hosted candidacy, the timers, the partition views.
pub(crate) struct Core<T: Transport + Send + Sync + ?Sized + 'static> {
    pub(super) inbox: Arc<Inbox<T>>,
    pub(super) slots: Vec<Option<Slot<T>>>,
    pub(super) free: Vec<usize>,
    pub(super) ready: VecDeque<usize>,
    /// Calls issued in this turn, handed to the transport at its end.
    pub(super) outgoing: Vec<Outgoing>,
    pub(super) timers: BinaryHeap<Reverse<(UnixMillis, usize, u64)>>,
    pub(super) views: Views,
    /// The calls in flight, and those waiting for a place.
    pub(super) window: Arc<Window>,
    /// Calls and reads handed to the transport whose completion was not taken yet.
    pub(super) in_flight: usize,
    pub(super) turns: u64,
    pub(super) published: Option<std::time::Instant>,
    /// Kept while the loop runs when the transport tails partitions (it holds it weakly).
    pub(super) tail_hook: Option<Arc<crate::transport::TailHook>>,
    pub(super) reads: u64,
    pub(super) tailed_reads: u64,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Drop for Core<T> {
    fn drop(&mut self) {
        self.inbox.closed.store(true, Ordering::SeqCst);
        // Every candidacy still running, and those that never reached the loop, exit on the
        // spot as a driver whose runtime went away does: all of them together within one
        // deadline (see `exit_together`), not one after another.
        let mut drivers = std::mem::take(&mut *lock(&self.inbox.pending));
        drivers.extend(self.slots.drain(..).flatten().map(|slot| slot.driver));
        crate::driver::exit_together(drivers);
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
) -> Result<(Host, Core<T>), Error> {
    let inbox = Arc::new(Inbox {
        transport,
        clock: options.clock.clone(),
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
        window: Window::new(match options.max_in_flight {
            0 => DEFAULT_MAX_IN_FLIGHT,
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

    pub(super) fn changes(&self) -> Option<u64> {
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
            // Calls a transport answered before it returned have finished already: act on
            // them in this turn.
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
    pub(super) fn publish(&mut self) {
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
        st.queued = self.window.queued();
        *lock(&self.inbox.stats) = st;
    }

    pub(super) fn take_new(&mut self) {
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

    pub(super) fn take_done(&mut self) {
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
    pub(super) fn feed(&mut self, i: usize, outcome: Result<MachineEvent, TransportError>) {
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
    pub(super) fn look_at_cancels(&mut self, now: UnixMillis) {
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

    pub(super) fn fire_timers(&mut self, now: UnixMillis) {
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

    /// Runs one candidacy until it waits: a call handed to the transport, a read queued, a timer.
    pub(super) fn step(&mut self, i: usize, now: UnixMillis) {
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
                    let due = due(&cmd, s.driver.lease_deadline(), s.since.unwrap_or(now), now);
                    // Issued at or before this instant (the turn's `now` can be earlier than
                    // the machine's own): a lease write's deadline moves by no more than the
                    // wait for a place.
                    let call = Arc::new(InFlight::new(cmd, s.driver.clock.now()));
                    s.driver.in_flight = Some(call.clone());
                    self.outgoing.push(Outgoing {
                        slot: i,
                        gen: s.gen,
                        call,
                        describe,
                        append,
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
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Core<T> {
    /// The slot's driver stopped with an error of its own.
    pub(super) fn finish(&mut self, i: usize, e: Error) {
        if let Some(s) = self.slots.get(i).and_then(Option::as_ref) {
            s.driver.shared.finish(e);
        }
        self.remove(i);
    }

    pub(super) fn remove(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i).and_then(Option::take) {
            self.views.remove_user(s.partition, &s.role, i);
            self.free.push(i);
            self.inbox.hosted.fetch_sub(1, Ordering::SeqCst);
            drop(s);
        }
    }
}

/// Whether the candidacy in slot `i` has a cancel (or an outside fence) waiting to be fed.
pub(super) fn cancel_pending<T: Transport + Send + Sync + ?Sized + 'static>(
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
#[cfg(async_driver)]
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
