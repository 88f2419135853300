//! [`Time`]: how an example waits, on the system clock (the programs) or in virtual time (the
//! tests).
//!
//! The programs run on the [`SystemClock`] and wait for real, for people watching them. The
//! tests run the very same scenarios with `--virtual-time`: on a [`ManualClock`] that only the
//! scenario moves. Every wait of the scenario then becomes "move the clock in steps until the
//! condition holds, for at most so much *virtual* time", and after each step
//! [`ManualClock::settle`] returns once every driver has acted on it. A lease of seconds costs
//! no real time, and no verdict depends on how fast threads are scheduled: the only real-time
//! limits left are hang guards ([`GUARD`]).
//!
//! Threads of the example's own (the workers of `blocking_worker`) wait through a [`Pacer`].
//! On the system clock it is [`Candidacy::elected_blocking`] and [`Leadership::done_blocking_timeout`]. In
//! virtual time the thread parks instead, and after every settled step the scenario gives each
//! parked thread a turn, one at a time and in a fixed order, to look at the world and act
//! (settling the drivers after each turn): a small deterministic scheduler, so that the workers'
//! writes interleave the same way on every run.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kafka_coordination::core::UnixMillis;
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::{Clock, Error, ManualClock, Options, SystemClock};

use crate::args::Failure;
use crate::timeline::Timeline;

/// How long a scenario in virtual time waits, in real time, for drivers or worker threads that
/// do not settle before it gives up. A guard against a hung test, never a verdict.
pub const GUARD: Duration = Duration::from_secs(120);

/// How a scenario experiences time; cloning shares it. See the [module docs](self).
///
/// Only the scenario's own thread waits through it ([`sleep`](Self::sleep),
/// [`wait_for`](Self::wait_for), ...): in virtual time that thread is the one that moves the
/// clock. Other threads wait through a [`Pacer`].
#[derive(Clone, Debug)]
pub struct Time {
    mode: Mode,
}

#[derive(Clone, Debug)]
enum Mode {
    Real,
    Virtual(Arc<Virtual>),
}

/// The virtual side: the clock, the step, and the worker threads' turns.
struct Virtual {
    clock: ManualClock,
    step: Duration,
    seats: Mutex<Seats>,
    moved: Condvar,
}

impl fmt::Debug for Virtual {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Virtual")
            .field("clock", &self.clock)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// The worker threads that wait through a [`Pacer`].
#[derive(Debug, Default)]
struct Seats {
    next_id: u64,
    /// Every live pacer, in creation order: the order of turns.
    live: Vec<u64>,
    /// The pacers waiting for a turn.
    parked: BTreeSet<u64>,
    /// The pacer whose thread may run now.
    turn: Option<u64>,
    /// Whether a thread came out of its wait during the current round.
    acted: bool,
}

impl Time {
    /// The system clock; waits sleep for real.
    pub fn real() -> Time {
        Time { mode: Mode::Real }
    }

    /// A [`ManualClock`] at its default instant, moved in steps of at most `step` (at least
    /// 1 ms); choose a step that divides the scenario's timings, so that every renewal and
    /// challenge happens at its exact instant.
    pub fn virtual_time(step: Duration) -> Time {
        Time {
            mode: Mode::Virtual(Arc::new(Virtual {
                clock: ManualClock::default(),
                step: step.max(Duration::from_millis(1)),
                seats: Mutex::new(Seats::default()),
                moved: Condvar::new(),
            })),
        }
    }

    /// Whether this is virtual time.
    pub fn is_virtual(&self) -> bool {
        matches!(self.mode, Mode::Virtual(_))
    }

    /// The clock, for a [`MemoryBroker`](kafka_coordination::memory::MemoryBroker).
    pub fn clock(&self) -> Arc<dyn Clock> {
        match &self.mode {
            Mode::Real => Arc::new(SystemClock),
            Mode::Virtual(v) => Arc::new(v.clock.clone()),
        }
    }

    /// `options` on this time: with the manual clock in virtual time, unchanged otherwise.
    pub fn options(&self, options: Options) -> Options {
        match &self.mode {
            Mode::Real => options,
            Mode::Virtual(v) => options.clock(v.clock.clone()),
        }
    }

    /// A timeline on the same output as `out` whose stamps are this time's, from now: `out`
    /// itself on the system clock.
    pub fn timeline(&self, out: &Timeline) -> Timeline {
        match &self.mode {
            Mode::Real => out.clone(),
            Mode::Virtual(v) => out.on_clock(Arc::new(v.clock.clone())),
        }
    }

    /// The current time.
    pub fn now(&self) -> UnixMillis {
        match &self.mode {
            Mode::Real => SystemClock.now(),
            Mode::Virtual(v) => v.clock.now(),
        }
    }

    /// What the stamps of a timeline on this time are, for headers.
    pub fn stamps(&self) -> &'static str {
        match self.mode {
            Mode::Real => "[s] = seconds since start",
            Mode::Virtual(_) => "[s] = virtual seconds since start",
        }
    }

    /// Lets `d` pass: a real sleep, or moving the clock by `d` in steps.
    pub fn sleep(&self, d: Duration) -> Result<(), Failure> {
        match &self.mode {
            Mode::Real => {
                std::thread::sleep(d);
                Ok(())
            }
            Mode::Virtual(v) => {
                let end = v.clock.now().saturating_add(d);
                v.quiesce()?;
                while v.clock.now() < end {
                    v.clock.advance(end.since(v.clock.now()).min(v.step));
                    v.quiesce()?;
                }
                Ok(())
            }
        }
    }

    /// Waits until `ready` gives a value, for at most `within`: polling every 5 ms on the
    /// system clock, or moving the manual clock in steps (asking after each settled step).
    pub fn wait_for<R>(
        &self,
        what: &str,
        within: Duration,
        mut ready: impl FnMut() -> Result<Option<R>, Failure>,
    ) -> Result<R, Failure> {
        match &self.mode {
            Mode::Real => {
                let deadline = Instant::now() + within;
                loop {
                    if let Some(r) = ready()? {
                        return Ok(r);
                    }
                    if Instant::now() >= deadline {
                        return Err(Failure::Failed(format!(
                            "timed out after {within:?} waiting for {what}"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Mode::Virtual(v) => {
                let end = v.clock.now().saturating_add(within);
                loop {
                    v.quiesce()?;
                    if let Some(r) = ready()? {
                        return Ok(r);
                    }
                    if v.clock.now() >= end {
                        return Err(Failure::Failed(format!(
                            "{what} did not happen within {within:?} of virtual time"
                        )));
                    }
                    v.clock.advance(end.since(v.clock.now()).min(v.step));
                }
            }
        }
    }

    /// Waits until `candidacy` is elected (or fails), for at most `within`; hands the
    /// candidacy back, still running, when it was not.
    pub fn elected(
        &self,
        candidacy: Candidacy,
        within: Duration,
    ) -> Result<Result<Leadership, Error>, Candidacy> {
        if !self.is_virtual() {
            return candidacy.elected_blocking_timeout(within);
        }
        // Not elected in time is the caller's failure to report, with the candidacy's state.
        let _ = self.wait_for("the election", within, || {
            Ok(decided(&candidacy).then_some(()))
        });
        candidacy.elected_blocking_timeout(Duration::ZERO)
    }

    /// Waits until `leadership`'s term is over, for at most `within`; true when it is.
    pub fn wait_done(&self, leadership: &Leadership, within: Duration) -> bool {
        if !self.is_virtual() {
            return leadership.done_blocking_timeout(within);
        }
        let _ = self.wait_for("the end of the term", within, || {
            Ok(leadership.is_done().then_some(()))
        });
        leadership.is_done()
    }

    /// A pacer for a thread of the example's own. Create it before spawning the thread, and
    /// move it there: from then on, in virtual time, the scenario waits for that thread to park
    /// (in its first wait) before it moves the clock, and the thread runs only in its turns.
    pub fn pacer(&self) -> Pacer {
        let id = match &self.mode {
            Mode::Real => 0,
            Mode::Virtual(v) => {
                let mut s = v.seats();
                let id = s.next_id;
                s.next_id += 1;
                s.live.push(id);
                id
            }
        };
        Pacer {
            time: self.clone(),
            id,
        }
    }
}

/// Whether the candidacy was elected or has ended.
fn decided(candidacy: &Candidacy) -> bool {
    candidacy.snapshot().token.is_some() || candidacy.is_done()
}

impl Virtual {
    fn seats(&self) -> MutexGuard<'_, Seats> {
        self.seats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn settle(&self) -> Result<(), Failure> {
        self.clock
            .settle()
            .map_err(|e| Failure::Failed(format!("virtual time: {e}")))
    }

    /// Settles the drivers, then gives the worker threads rounds of turns until a round in
    /// which none of them acted.
    fn quiesce(&self) -> Result<(), Failure> {
        self.settle()?;
        for _ in 0..1000 {
            if !self.round()? {
                return Ok(());
            }
        }
        Err(Failure::Failed(
            "virtual time: the worker threads keep acting without the clock moving".to_owned(),
        ))
    }

    /// One turn for each parked thread, in order, settling after each; whether any acted.
    fn round(&self) -> Result<bool, Failure> {
        let mut s = self.wait_seats("every worker thread to park", |s| {
            s.live.iter().all(|id| s.parked.contains(id))
        })?;
        s.acted = false;
        let order = s.live.clone();
        drop(s);
        for id in order {
            let mut s = self.seats();
            if !s.parked.contains(&id) {
                continue;
            }
            s.turn = Some(id);
            drop(s);
            self.moved.notify_all();
            drop(self.wait_seats("a worker thread to finish its turn", |s| s.turn != Some(id))?);
            self.settle()?;
        }
        Ok(self.seats().acted)
    }

    /// Waits (at most [`GUARD`] of real time) until `done` holds for the seats.
    fn wait_seats(
        &self,
        what: &str,
        mut done: impl FnMut(&Seats) -> bool,
    ) -> Result<MutexGuard<'_, Seats>, Failure> {
        let deadline = Instant::now() + GUARD;
        let mut s = self.seats();
        while !done(&s) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::Failed(format!(
                    "virtual time: gave up after {GUARD:?} of real time waiting for {what}"
                )));
            }
            s = self
                .moved
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(s)
    }
}

/// How a thread of the example's own waits; see the [module docs](self). Made by
/// [`Time::pacer`]; dropping it (when the thread ends) takes the thread out of the turns.
#[derive(Debug)]
pub struct Pacer {
    time: Time,
    id: u64,
}

impl Pacer {
    /// Waits until `candidacy` is elected: [`Candidacy::elected_blocking`].
    pub fn wait_elected(&self, candidacy: Candidacy) -> Result<Leadership, Error> {
        if let Mode::Virtual(v) = &self.time.mode {
            self.park(v, || decided(&candidacy));
        }
        candidacy.elected_blocking()
    }

    /// Waits until the term is over or `timeout` has passed; true when over:
    /// [`Leadership::done_blocking_timeout`].
    pub fn done_blocking_timeout(&self, leadership: &Leadership, timeout: Duration) -> bool {
        match &self.time.mode {
            Mode::Real => leadership.done_blocking_timeout(timeout),
            Mode::Virtual(v) => {
                let until = v.clock.now().saturating_add(timeout);
                self.park(v, || leadership.is_done() || v.clock.now() >= until);
                leadership.is_done()
            }
        }
    }

    /// Parks until a turn in which `ready` holds; the thread keeps the turn until it parks
    /// again or ends.
    fn park(&self, v: &Virtual, mut ready: impl FnMut() -> bool) {
        let mut s = v.seats();
        loop {
            s.parked.insert(self.id);
            if s.turn == Some(self.id) {
                s.turn = None;
            }
            v.moved.notify_all();
            while s.turn != Some(self.id) {
                s = v.moved.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
            s.parked.remove(&self.id);
            if ready() {
                s.acted = true;
                return;
            }
        }
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        if let Mode::Virtual(v) = &self.time.mode {
            let mut s = v.seats();
            s.live.retain(|id| *id != self.id);
            s.parked.remove(&self.id);
            if s.turn == Some(self.id) {
                s.turn = None;
            }
            drop(s);
            v.moved.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_waits_are_bounded_in_virtual_time() {
        let time = Time::virtual_time(Duration::from_millis(100));
        let start = time.now();
        time.sleep(Duration::from_millis(250)).unwrap();
        assert_eq!(time.now().since(start), Duration::from_millis(250));
        let mut asked = 0;
        let r: Result<(), _> = time.wait_for("nothing", Duration::from_secs(5), || {
            asked += 1;
            Ok(None)
        });
        assert!(matches!(r, Err(Failure::Failed(m)) if m.contains("of virtual time")));
        // Asked once before the first step and after each of the 50 steps of 100 ms.
        assert_eq!(asked, 51);
        assert_eq!(time.now().since(start), Duration::from_millis(5250));
    }

    #[test]
    fn worker_threads_take_turns_in_order() {
        let time = Time::virtual_time(Duration::from_millis(100));
        let start = time.now();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for name in ["first", "second"] {
            let (pacer, log) = (time.pacer(), log.clone());
            threads.push(std::thread::spawn(move || {
                let Mode::Virtual(v) = &pacer.time.mode else {
                    unreachable!("virtual time")
                };
                // Three times: wait 200 ms of virtual time, then note the time.
                for _ in 0..3 {
                    let until = v.clock.now().saturating_add(Duration::from_millis(200));
                    pacer.park(v, || v.clock.now() >= until);
                    let at = v.clock.now().since(start).as_millis();
                    log.lock().unwrap().push(format!("{name}@{at}"));
                }
            }));
        }
        time.sleep(Duration::from_secs(1)).unwrap();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            log.lock().unwrap().join(" "),
            "first@200 second@200 first@400 second@400 first@600 second@600"
        );
    }
}
