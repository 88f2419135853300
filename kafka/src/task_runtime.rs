//! What the transport's calls that hold no thread run on: tasks (`async-task`) polled by
//! whichever thread wakes them, `block_on` (`futures-lite`) for the blocking API, one-shot
//! answers (`futures-channel`), and two pieces written here: an async lock and one timer
//! thread per process.
//!
//! A call started with [`spawn`] is polled once on the caller's thread, up to its first
//! request. The request goes to its broker's connection thread (see `net/pool.rs`); when the answer
//! arrives, that thread wakes the task and polls it on the spot, up to the next request, and
//! so on. Between two requests (and during a retry's pause, which the timer thread ends) the
//! call is only memory: it holds no thread. A task keeps the priority it was started with
//! ([`with_priority`]) whichever thread polls it.
//!
//! Rules for code that runs in such a task: see [`spawn`]; why the lock and the timer are
//! written here: see [`AsyncMutex`].

use std::cell::{Cell, RefCell};
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use async_task::{Runnable, ScheduleInfo, WithInfo};

use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::lock::lock;

/// A one-shot answer: one value from one thread to one waiting task; the receiver hears of a
/// sender dropped unsent (`Err(Canceled)`).
pub(crate) use futures_channel::oneshot;

thread_local! {
    /// Set while [`block_on`] polls on this thread: requests run here, on the caller's thread,
    /// as the blocking API always has, instead of on a connection thread.
    static INLINE: Cell<bool> = const { Cell::new(false) };
    /// A task woken while this thread polled it, to poll again once that poll returns.
    static AGAIN: RefCell<Option<Runnable>> = const { RefCell::new(None) };
}

thread_local! {
    /// The priority of the requests started on this thread now (see [`with_priority`]).
    static PRIORITY: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Runs `f` with `priority` as the priority of the requests it starts: the carrier of the
/// `priority` the transport's `start_*` methods are given, from the call to the requests its
/// tasks queue for the connection threads.
pub(crate) fn with_priority<R>(priority: i64, f: impl FnOnce() -> R) -> R {
    with_local(&PRIORITY, Some(priority), f)
}

/// The priority given with [`with_priority`] to the calls started on this thread now.
pub(crate) fn priority() -> Option<i64> {
    PRIORITY.with(Cell::get)
}

/// Runs `f` with the thread-local `key` set to `value`, and restores what it held before,
/// also when `f` panics.
pub(crate) fn with_local<T: Copy + 'static, R>(
    key: &'static std::thread::LocalKey<Cell<T>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    /// Puts the value before back on drop.
    struct Restore<T: Copy + 'static>(&'static std::thread::LocalKey<Cell<T>>, T);
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.with(|c| c.set(self.1));
        }
    }
    let _restore = Restore(key, key.with(|c| c.replace(value)));
    f()
}

/// Whether the future being polled on this thread belongs to a [`block_on`] (whose thread is
/// blocked anyway, so its requests run on it), not to a spawned task.
pub(crate) fn inline() -> bool {
    INLINE.with(Cell::get)
}

/// Runs `f` with [`inline`] set to `on`, then restores it.
fn with_inline<R>(on: bool, f: impl FnOnce() -> R) -> R {
    with_local(&INLINE, on, f)
}

/// Runs `future` to its end without a thread of its own: polled here until its first wait,
/// then by the threads that end its waits.
///
/// Rules for code that runs in such a task: never block (no `block_on`, no sleep, no blocking
/// call of the cluster), since it runs on a connection thread that others wait for.
///
pub(crate) fn spawn(future: impl Future<Output = ()> + Send + 'static) {
    let priority = priority();
    let schedule = move |runnable: Runnable, info: ScheduleInfo| {
        if info.woken_while_running {
            // Woken during its own poll (by itself, or by another thread meanwhile): this
            // thread's `run` below polls it again as soon as that poll returns.
            AGAIN.with(|again| *again.borrow_mut() = Some(runnable));
        } else {
            run(runnable, priority);
        }
    };
    let (runnable, task) = async_task::spawn(future, WithInfo(schedule));
    task.detach();
    run(runnable, priority);
}

/// Polls `runnable` here, with its task's priority, again for as long as it is woken while
/// being polled.
fn run(runnable: Runnable, priority: Option<i64>) {
    with_inline(false, || {
        let poll = || {
            let mut next = Some(runnable);
            while let Some(runnable) = next {
                runnable.run();
                next = AGAIN.with(|again| again.borrow_mut().take());
            }
        };
        match priority {
            Some(p) => with_priority(p, poll),
            None => poll(),
        }
    });
}

/// Runs `future` on this thread, parking it while the future waits. Its requests run on this
/// thread too (see [`inline`]). For the blocking API; never inside a spawned task.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    with_inline(true, || futures_lite::future::block_on(future))
}

type Alarm = Box<dyn FnOnce() + Send>;

/// The process's timer: one thread, started on first use, that runs alarms when they are due.
struct Timer {
    state: Mutex<Alarms>,
    changed: Condvar,
}

#[derive(Default)]
struct Alarms {
    due: BinaryHeap<std::cmp::Reverse<(Instant, u64)>>,
    alarms: HashMap<u64, Alarm>,
}

static NEXT_ALARM: AtomicU64 = AtomicU64::new(0);

fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::new(Timer {
            state: Mutex::new(Alarms::default()),
            changed: Condvar::new(),
        }));
        // Without the thread no alarm would ever run; failing to start one is as fatal as
        // failing to allocate.
        std::thread::Builder::new()
            .name("kc-timer".into())
            .spawn(move || timer.run())
            .expect("starting the Kafka transport's timer thread");
        timer
    })
}

impl Timer {
    fn run(&self) {
        let mut state = lock(&self.state);
        loop {
            let now = Instant::now();
            let next = state.due.peek().map(|std::cmp::Reverse((at, _))| *at);
            match next {
                Some(at) if at <= now => {
                    let Some(std::cmp::Reverse((_, id))) = state.due.pop() else {
                        continue;
                    };
                    if let Some(alarm) = state.alarms.remove(&id) {
                        drop(state);
                        alarm();
                        state = lock(&self.state);
                    }
                }
                Some(at) => {
                    state = self
                        .changed
                        .wait_timeout(state, at - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                None => {
                    state = self
                        .changed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }
}

/// Runs `alarm` on the timer thread at `at` (at once if that has passed). An alarm must not
/// block.
pub(crate) fn at(when: Instant, alarm: impl FnOnce() + Send + 'static) {
    let timer = timer();
    let id = NEXT_ALARM.fetch_add(1, Ordering::Relaxed);
    let mut state = lock(&timer.state);
    state.due.push(std::cmp::Reverse((when, id)));
    state.alarms.insert(id, Box::new(alarm));
    drop(state);
    timer.changed.notify_one();
}

/// A future that is ready at `when`.
pub(crate) fn sleep_until(when: Instant) -> Sleep {
    Sleep { when, armed: None }
}

pub(crate) struct Sleep {
    when: Instant,
    /// Where the alarm looks for the waker to wake, once armed.
    armed: Option<Arc<Mutex<Option<Waker>>>>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.when {
            return Poll::Ready(());
        }
        match &self.armed {
            Some(waker) => *lock(waker) = Some(cx.waker().clone()),
            None => {
                let waker = Arc::new(Mutex::new(Some(cx.waker().clone())));
                let theirs = Arc::clone(&waker);
                at(self.when, move || {
                    let waker = lock(&theirs).take();
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                });
                self.armed = Some(waker);
            }
        }
        Poll::Pending
    }
}

/// A lock whose waiters wait as tasks, not threads: a role's session, which a transaction
/// holds across its round trips. Taken in the order asked.
///
/// Whatever wakes a task must hold no lock that the task's poll could take: the task is polled
/// inside that `wake`. That is why the async lock is written here: `async-lock` wakes its next
/// waiter from inside `event-listener`'s list lock, which the woken waiter then takes again
/// (the waiters-in-order test below hung with it); [`AsyncMutex`] wakes after letting go of
/// its own. The timer is written here because the crates that offer one either bring an I/O
/// reactor (`async-io`: polling, rustix and more, for one thread that only waits) or are the
/// same design in a crate of the discontinued async-std family (`futures-timer`).
pub(crate) struct AsyncMutex<T> {
    state: Mutex<LockState<T>>,
}

struct LockState<T> {
    /// The value while nobody holds it.
    value: Option<T>,
    /// The value was handed to a waiter that has not taken it yet.
    reserved: bool,
    /// Who waits for it, in order: each waiter's turn flag and waker.
    waiters: std::collections::VecDeque<Arc<Turn>>,
}

/// A waiter's place in an [`AsyncMutex`]'s queue.
struct Turn {
    /// Set when the value was handed to this waiter.
    given: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl<T> AsyncMutex<T> {
    pub(crate) fn new(value: T) -> AsyncMutex<T> {
        AsyncMutex {
            state: Mutex::new(LockState {
                value: Some(value),
                reserved: false,
                waiters: std::collections::VecDeque::new(),
            }),
        }
    }

    /// Waits for the value (as a task: no thread is held) and holds it until the guard drops.
    pub(crate) async fn lock(&self) -> AsyncGuard<'_, T> {
        let turn = {
            let mut state = lock(&self.state);
            if state.waiters.is_empty() && !state.reserved {
                if let Some(value) = state.value.take() {
                    return AsyncGuard {
                        owner: self,
                        value: Some(value),
                    };
                }
            }
            let turn = Arc::new(Turn {
                given: AtomicBool::new(false),
                waker: Mutex::new(None),
            });
            state.waiters.push_back(Arc::clone(&turn));
            turn
        };
        let waiting = Waiting {
            owner: self,
            turn,
            done: false,
        };
        waiting.await
    }

    /// Gives the value back: to the first waiter if there is one.
    fn give_back(&self, value: T) {
        let mut state = lock(&self.state);
        state.value = Some(value);
        state.reserved = false;
        if let Some(next) = state.waiters.pop_front() {
            state.reserved = true;
            next.given.store(true, Ordering::SeqCst);
            let waker = lock(&next.waker).take();
            drop(state);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

/// Waits for an [`AsyncMutex`]'s value to be handed over.
struct Waiting<'a, T> {
    owner: &'a AsyncMutex<T>,
    turn: Arc<Turn>,
    done: bool,
}

impl<'a, T> Future for Waiting<'a, T> {
    type Output = AsyncGuard<'a, T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<AsyncGuard<'a, T>> {
        *lock(&self.turn.waker) = Some(cx.waker().clone());
        if !self.turn.given.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        let value = {
            let mut state = lock(&self.owner.state);
            state.reserved = false;
            state.value.take()
        };
        self.done = true;
        Poll::Ready(AsyncGuard {
            owner: self.owner,
            value,
        })
    }
}

impl<T> Drop for Waiting<'_, T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Given up on: leave the queue, or pass on a turn that came meanwhile.
        let mut state = lock(&self.owner.state);
        state.waiters.retain(|w| !Arc::ptr_eq(w, &self.turn));
        if self.turn.given.load(Ordering::SeqCst) {
            if let Some(value) = state.value.take() {
                drop(state);
                self.owner.give_back(value);
            }
        }
    }
}

/// Holds an [`AsyncMutex`]'s value.
pub(crate) struct AsyncGuard<'a, T> {
    owner: &'a AsyncMutex<T>,
    value: Option<T>,
}

impl<T> std::ops::Deref for AsyncGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // Present from creation until drop.
        self.value.as_ref().expect("an AsyncGuard holds its value")
    }
}

impl<T> std::ops::DerefMut for AsyncGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_mut().expect("an AsyncGuard holds its value")
    }
}

impl<T> Drop for AsyncGuard<'_, T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            self.owner.give_back(value);
        }
    }
}

/// One completion callback as two that share it: the first to run calls it (the call's
/// outcome, or the error of the step before it), the other then does nothing.
#[allow(clippy::type_complexity)]
pub(crate) fn split<T: Send + 'static>(
    done: Box<dyn FnOnce(Result<T, TransportError>) + Send>,
) -> (
    Box<dyn FnOnce(Result<T, TransportError>) + Send>,
    impl FnOnce(TransportError) + Send + 'static,
) {
    let one = Arc::new(std::sync::Mutex::new(Some(done)));
    let other = Arc::clone(&one);
    (
        Box::new(move |outcome| {
            if let Some(done) = lock(&one).take() {
                done(outcome);
            }
        }),
        move |e| {
            if let Some(done) = lock(&other).take() {
                done(Err(e));
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_spawned_task_runs_on_the_thread_that_answers_it() {
        let (tx, rx) = oneshot::channel::<u32>();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        spawn(async move {
            let got = rx.await;
            let _ = done_tx.send((got, std::thread::current().id()));
        });
        // Pending: nothing answered yet, and spawn returned.
        assert!(done_rx.try_recv().is_err());
        let answerer = std::thread::spawn(move || {
            tx.send(7).expect("received");
            std::thread::current().id()
        });
        let answerer = answerer.join().expect("answerer");
        let (got, ran_on) = done_rx.recv().expect("the task finished");
        assert_eq!(got, Ok(7));
        assert_eq!(ran_on, answerer, "polled by the thread that woke it");
    }

    #[test]
    fn a_dropped_sender_ends_the_wait_with_an_error() {
        let (tx, rx) = oneshot::channel::<u32>();
        drop(tx);
        assert!(block_on(rx).is_err());
    }

    #[test]
    fn block_on_waits_for_an_answer_from_another_thread() {
        let (tx, rx) = oneshot::channel::<&'static str>();
        let t = std::thread::spawn(move || tx.send("answer"));
        assert_eq!(block_on(rx), Ok("answer"));
        t.join().expect("sender").expect("received");
    }

    #[test]
    fn sleeps_end_in_the_order_of_their_instants() {
        let start = Instant::now();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = oneshot::channel::<()>();
        let tx = Arc::new(Mutex::new(Some(tx)));
        for (i, ms) in [(0u32, 30u64), (1, 10), (2, 20)] {
            let order = Arc::clone(&order);
            let tx = Arc::clone(&tx);
            spawn(async move {
                sleep_until(start + Duration::from_millis(ms)).await;
                let mut order = lock(&order);
                order.push(i);
                if order.len() == 3 {
                    if let Some(tx) = lock(&tx).take() {
                        let _ = tx.send(());
                    }
                }
            });
        }
        block_on(rx).expect("all three slept");
        assert_eq!(*lock(&order), vec![1, 2, 0]);
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_wake_during_a_poll_polls_again_instead_of_being_lost() {
        // A future that wakes itself while being polled, twice, then finishes.
        struct SelfWaking(u32);
        impl Future for SelfWaking {
            type Output = ();
            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                if self.0 == 0 {
                    return Poll::Ready(());
                }
                self.0 -= 1;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
        let (tx, rx) = oneshot::channel::<()>();
        spawn(async move {
            SelfWaking(2).await;
            let _ = tx.send(());
        });
        assert_eq!(block_on(rx), Ok(()));
    }

    #[test]
    fn an_async_lock_is_handed_to_its_waiters_in_order() {
        let m = Arc::new(AsyncMutex::new(Vec::<u32>::new()));
        let first = block_on(m.lock());
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..3 {
            let m = Arc::clone(&m);
            let tx = tx.clone();
            spawn(async move {
                let mut v = m.lock().await;
                v.push(i);
                let _ = tx.send(i);
            });
        }
        // All three wait as tasks; nothing ran while the first guard is held.
        assert!(rx.try_recv().is_err());
        drop(first);
        let order: Vec<u32> = (0..3).map(|_| rx.recv().expect("ran")).collect();
        assert_eq!(order, vec![0, 1, 2]);
        assert_eq!(*block_on(m.lock()), vec![0, 1, 2]);
    }
}
