//! The one thread pool for blocking work: a host's I/O calls and a Kafka broker's connection
//! threads.
//!
//! Up to `threads` threads, started as jobs come (a job never waits while fewer run) and ended
//! after [`IDLE`] without one, so a pool with nothing to do holds no thread. A free thread
//! takes the queued job with the smallest priority, those of equal priority in the order they
//! were queued. A job that panics costs its own answer, not its thread. Dropping the pool lets
//! its threads finish what is queued, then end.

use std::cell::RefCell;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::lock::lock;

/// Work for a thread of the pool.
pub type Job = Box<dyn FnOnce() + Send>;

/// How long a thread with nothing to do waits for a job before it ends.
pub const IDLE: Duration = Duration::from_secs(30);

/// A bounded, priority-ordered pool of threads (see the module's docs).
pub struct Pool {
    shared: Arc<Shared>,
    threads: usize,
}

struct Shared {
    /// Its threads' name (`{name}-{n}` when numbered).
    name: String,
    numbered: bool,
    state: Mutex<State>,
    /// Signalled when a job is queued or the pool closes.
    queued: Condvar,
}

#[derive(Default)]
struct State {
    jobs: BinaryHeap<Queued>,
    seq: u64,
    closed: bool,
    /// Threads running, and how many of them wait for a job.
    running: usize,
    idle: usize,
    /// Threads started so far, for their names.
    named: usize,
}

struct Queued {
    priority: i64,
    seq: u64,
    job: Job,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.priority, self.seq) == (other.priority, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    /// Reversed: the `BinaryHeap` (a max-heap) pops the smallest priority first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.priority, other.seq).cmp(&(self.priority, self.seq))
    }
}

/// Where a job was put by [`Pool::submit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// A free thread, or one started for it, takes it now.
    Started,
    /// Every thread is busy: it waits in the queue.
    Waits,
}

thread_local! {
    /// On a pool's thread: its pool, and the one job a job it runs kept for it to run next
    /// (see [`Pool::follow_up`]).
    static FOLLOW_UP: RefCell<Option<(usize, Option<Job>)>> = const { RefCell::new(None) };
}

impl Pool {
    /// A pool of up to `threads` threads (at least one), each named `name`.
    pub fn new(name: impl Into<String>, threads: usize) -> Pool {
        Pool {
            shared: Arc::new(Shared {
                name: name.into(),
                numbered: false,
                state: Mutex::new(State::default()),
                queued: Condvar::new(),
            }),
            threads: threads.max(1),
        }
    }

    /// Names its threads `{name}-{n}`, `n` counting the threads started.
    pub fn numbered(mut self) -> Pool {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.numbered = true;
        }
        self
    }

    /// The most threads it runs.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Queues `job` at `priority`, and wakes a waiting thread for it or starts one. If no
    /// thread can be started and none runs, the queued jobs run here rather than never.
    pub fn submit(&self, priority: i64, job: Job) -> Placed {
        let mut st = lock(&self.shared.state);
        st.seq += 1;
        let seq = st.seq;
        st.jobs.push(Queued { priority, seq, job });
        // Each waiting thread takes one queued job when it wakes; one woken for an earlier job
        // counts as waiting until it runs, and takes that job, not this one.
        if st.jobs.len() <= st.idle {
            drop(st);
            self.shared.queued.notify_one();
            return Placed::Started;
        }
        if st.running >= self.threads {
            return Placed::Waits;
        }
        st.running += 1;
        st.named += 1;
        let name = if self.shared.numbered {
            format!("{}-{}", self.shared.name, st.named - 1)
        } else {
            self.shared.name.clone()
        };
        drop(st);
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name(name)
            .spawn(move || shared.run());
        if spawned.is_err() {
            let mut st = lock(&self.shared.state);
            st.running -= 1;
            if st.running == 0 {
                let jobs = std::mem::take(&mut st.jobs);
                drop(st);
                for queued in jobs.into_sorted_vec().into_iter().rev() {
                    (queued.job)();
                }
            }
        }
        Placed::Started
    }

    /// Keeps `job` for this thread to run right after the job it runs now, if this is one of
    /// the pool's threads and has kept none yet: the next step of the work its job just
    /// finished, with no other thread to wake. One at most, so that what one thread's jobs
    /// start does not pile up on it while the others wait. Gives it back otherwise.
    pub fn follow_up(&self, job: Job) -> Option<Job> {
        let me = self.shared.id();
        FOLLOW_UP.with(|f| match f.borrow_mut().as_mut() {
            Some((id, slot @ None)) if *id == me => {
                *slot = Some(job);
                None
            }
            _ => Some(job),
        })
    }

    /// Jobs waiting for a thread.
    pub fn queued(&self) -> usize {
        lock(&self.shared.state).jobs.len()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.queued.notify_all();
    }
}

impl Shared {
    fn id(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// A thread of the pool: runs the queued job with the smallest priority, one at a time,
    /// until the pool closes with nothing queued or no job came for [`IDLE`].
    fn run(&self) {
        FOLLOW_UP.with(|f| *f.borrow_mut() = Some((self.id(), None)));
        while let Some(job) = self.next() {
            let mut next = Some(job);
            while let Some(job) = next {
                // A panic in a job (a caller's completion) must not cost the pool this
                // thread: what the job owed is dropped with it, and its receiver hears of that.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                next = FOLLOW_UP.with(|f| f.borrow_mut().as_mut().and_then(|(_, s)| s.take()));
            }
        }
    }

    /// The next job, or `None` when the thread should end.
    fn next(&self) -> Option<Job> {
        let mut st = lock(&self.state);
        loop {
            if let Some(queued) = st.jobs.pop() {
                return Some(queued.job);
            }
            if st.closed {
                st.running -= 1;
                return None;
            }
            st.idle += 1;
            let (next, waited) = self
                .queued
                .wait_timeout(st, IDLE)
                .unwrap_or_else(PoisonError::into_inner);
            st = next;
            st.idle -= 1;
            if waited.timed_out() && st.jobs.is_empty() {
                st.running -= 1;
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn queued_jobs_run_smallest_priority_first_then_in_order() {
        let pool = Pool::new("test-pool", 1);
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (order_tx, order_rx) = mpsc::channel();
        // The one thread waits on `hold` until everything else is queued.
        pool.submit(
            i64::MIN,
            Box::new(move || {
                started_tx.send(()).expect("sent");
                let _ = hold_rx.recv();
            }),
        );
        started_rx.recv().expect("the first job runs");
        for (i, priority) in [(0u32, 30i64), (1, 10), (2, 20), (3, 10)] {
            let tx = order_tx.clone();
            assert_eq!(
                pool.submit(priority, Box::new(move || tx.send(i).expect("sent"))),
                Placed::Waits
            );
        }
        assert_eq!(pool.queued(), 4);
        hold_tx.send(()).expect("released");
        let order: Vec<u32> = (0..4).map(|_| order_rx.recv().expect("ran")).collect();
        assert_eq!(order, vec![1, 3, 2, 0]);
        assert_eq!(pool.queued(), 0);
    }

    #[test]
    fn a_job_queued_while_the_waiting_thread_is_woken_for_another_waits() {
        let pool = Pool::new("test-pool", 1);
        let (ran_tx, ran_rx) = mpsc::channel::<()>();
        pool.submit(0, Box::new(move || ran_tx.send(()).expect("sent")));
        ran_rx.recv().expect("the first job ran");
        // The one thread waits for a job.
        while lock(&pool.shared.state).idle == 0 {
            std::thread::yield_now();
        }
        let (hold_tx, hold_rx) = mpsc::channel::<()>();
        assert_eq!(
            pool.submit(
                0,
                Box::new(move || {
                    let _ = hold_rx.recv();
                })
            ),
            Placed::Started
        );
        // Whether or not the woken thread has taken the first job yet, it is busy with that
        // one: the second waits.
        assert_eq!(pool.submit(0, Box::new(|| ())), Placed::Waits);
        hold_tx.send(()).expect("released");
    }

    #[test]
    fn a_panicking_job_keeps_its_thread() {
        let pool = Pool::new("test-pool", 1).numbered();
        let (tx, rx) = mpsc::channel();
        pool.submit(0, Box::new(|| panic!("a job panics")));
        pool.submit(
            0,
            Box::new(move || {
                tx.send(std::thread::current().name().map(str::to_owned))
                    .expect("sent")
            }),
        );
        assert_eq!(
            rx.recv().expect("the next job ran").as_deref(),
            Some("test-pool-0")
        );
    }

    #[test]
    fn a_follow_up_runs_next_on_the_same_thread() {
        let pool = Arc::new(Pool::new("test-pool", 2));
        let (tx, rx) = mpsc::channel();
        let inner = Arc::clone(&pool);
        pool.submit(
            0,
            Box::new(move || {
                let here = std::thread::current().id();
                let tx2 = tx.clone();
                let kept = inner.follow_up(Box::new(move || {
                    tx2.send(std::thread::current().id() == here).expect("sent");
                }));
                assert!(kept.is_none(), "kept for this thread");
                // A second one is given back.
                assert!(inner.follow_up(Box::new(|| ())).is_some());
            }),
        );
        assert!(rx.recv().expect("the follow-up ran"));
        // Off the pool's threads nothing is kept.
        assert!(pool.follow_up(Box::new(|| ())).is_some());
    }
}
