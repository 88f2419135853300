//! The same scenarios on every driver (blocking, tokio, smol, async-std), on the MemoryBroker
//! with a ManualClock. Lease timing is driven by moving the manual clock; real time is only
//! spent waiting (with a bound) for driver threads to act on a move.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination::core::machine::Status;
use kafka_coordination::core::record::Role;
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::{
    describe_leadership, describe_role_state, Candidacy, Error, Leadership, Link, ManualClock,
    Options, Snapshot, UnixMillis,
};

const ROLE: &str = "scheduler";
const LEASE_MS: i64 = 3000;
const STAGGER_MS: i64 = 500;
/// Real time allowed for driver threads to react to one move of the manual clock.
const REACT: Duration = Duration::from_secs(10);

/// A member's transport: its link to the broker can be cut (calls then fail as retriable), as
/// when a process is partitioned away or frozen without dying.
type Cuttable = Link<MemoryTransport>;

type Start = fn(Cuttable, &str, &str, Options) -> Result<Candidacy, Error>;

struct World {
    clock: ManualClock,
    broker: MemoryBroker,
    start: Start,
}

struct Member {
    link: Cuttable,
    candidacy: Option<Candidacy>,
    leadership: Option<Leadership>,
    failed: Option<(Error, Snapshot)>,
}

impl Member {
    fn snapshot(&self) -> Snapshot {
        match (&self.candidacy, &self.leadership, &self.failed) {
            (Some(c), _, _) => c.snapshot(),
            (None, Some(l), _) => l.snapshot(),
            (None, None, Some((_, s))) => s.clone(),
            (None, None, None) => panic!("member has no handle"),
        }
    }
    fn is_leader(&self) -> bool {
        self.leadership.as_ref().is_some_and(|l| !l.is_done())
    }
    /// Turns the candidacy into a leadership if it was elected (without waiting).
    fn poll(&mut self) {
        if let Some(c) = self.candidacy.take() {
            let snapshot = c.snapshot();
            match c.wait_timeout(Duration::ZERO) {
                Ok(Ok(l)) => self.leadership = Some(l),
                Ok(Err(e)) => self.failed = Some((e, snapshot)),
                Err(c) => self.candidacy = Some(c),
            }
        }
    }
    fn elected(&mut self) -> &Leadership {
        if let Some(c) = self.candidacy.take() {
            match c.wait_timeout(REACT) {
                Ok(Ok(l)) => self.leadership = Some(l),
                Ok(Err(e)) => panic!("candidacy failed: {e}"),
                Err(_) => panic!("not elected within {REACT:?} of real time"),
            }
        }
        self.leadership.as_ref().expect("elected")
    }
}

impl World {
    fn new(start: Start) -> World {
        let clock = ManualClock::new(UnixMillis(1_700_000_000_000));
        let broker = MemoryBroker::new(16, Arc::new(clock.clone()));
        World {
            clock,
            broker,
            start,
        }
    }
    fn options(&self) -> Options {
        Options::new()
            .partitions(16)
            .lease_duration(Duration::from_millis(LEASE_MS as u64))
            .renew_interval(Duration::from_millis(1000))
            .challenge_stagger(Duration::from_millis(STAGGER_MS as u64))
            .clock(self.clock.clone())
    }
    fn join(&self, name: &str) -> Member {
        let link = Link::new(self.broker.transport(name));
        let candidacy = (self.start)(link.clone(), ROLE, name, self.options()).expect("start");
        Member {
            link,
            candidacy: Some(candidacy),
            leadership: None,
            failed: None,
        }
    }
    fn now(&self) -> i64 {
        use kafka_coordination::Clock;
        self.clock.now().0
    }
    /// Waits (real time, bounded) until every live member is idle at the current manual time.
    fn settle(&self, members: &mut [&mut Member]) {
        let deadline = Instant::now() + REACT;
        loop {
            let now = self.now();
            let settled = members.iter_mut().all(|m| {
                m.poll();
                let s = m.snapshot();
                s.status == Status::Ended || s.idle_at == Some(UnixMillis(now))
            });
            if settled {
                return;
            }
            assert!(Instant::now() < deadline, "drivers did not settle at {now}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    fn advance_to(&self, t: i64, members: &mut [&mut Member]) {
        // Move in steps no longer than the renew interval so leaders renew as they would.
        while self.now() < t {
            let step = (t - self.now()).min(200);
            self.clock.advance(Duration::from_millis(step as u64));
            self.settle(members);
        }
    }
    fn lease_deadline(&self) -> i64 {
        let state = describe_role_state(&self.broker.transport("observer"), ROLE, 16).unwrap();
        state.lease().expect("a lease").lease.deadline.0
    }
    fn roster(&self) -> Vec<String> {
        let state = describe_role_state(&self.broker.transport("observer"), ROLE, 16).unwrap();
        state.roster().map(|(m, _)| m.to_string()).collect()
    }
}

fn single_member_is_elected(start: Start) {
    let w = World::new(start);
    let mut a = w.join("a");
    let token = a.elected().token();
    assert_eq!(w.broker.epoch_of(&Role::new(ROLE).unwrap()), Some(token));
    let status = describe_leadership(&w.broker.transport("observer"), ROLE).unwrap();
    assert!(status.authoritative(&token));
    // The leader renews with the same token as the clock moves.
    w.advance_to(w.now() + 10 * LEASE_MS, &mut [&mut a]);
    assert!(a.is_leader());
    assert_eq!(a.elected().token(), token);
    assert!(w.lease_deadline() > w.now());
}

fn standby_takes_over_at_deadline_plus_rank_stagger_and_old_leader_is_fenced(start: Start) {
    let w = World::new(start);
    let mut a = w.join("a");
    let old = a.elected().token();
    let mut b = w.join("b");
    w.settle(&mut [&mut a, &mut b]);
    let mut c = w.join("c");
    w.settle(&mut [&mut a, &mut b, &mut c]);
    assert_eq!(b.snapshot().rank, Some(0));
    assert_eq!(c.snapshot().rank, Some(1));
    // The leader and the first standby go quiet; c (rank 1) must wait deadline + 1 stagger.
    a.link.cut();
    b.link.cut();
    let deadline = w.lease_deadline();
    w.advance_to(deadline + STAGGER_MS - 1, &mut [&mut a, &mut b, &mut c]);
    assert!(!c.is_leader(), "c challenged before deadline + 1 x stagger");
    assert!(
        a.is_leader(),
        "the quiet leader does not fence itself on time"
    );
    w.advance_to(deadline + STAGGER_MS, &mut [&mut a, &mut b, &mut c]);
    let new = c.elected().token();
    assert!(new > old);
    // The old leader's link comes back: its next renewal is fenced and `done` fires.
    a.link.restore();
    w.advance_to(w.now() + 1000, &mut [&mut a, &mut b, &mut c]);
    let la = a.leadership.as_ref().unwrap();
    assert!(
        la.wait_done_timeout(REACT),
        "the deposed leader's done did not fire"
    );
    let err = la.err().expect("an error after a fence");
    assert!(
        matches!(err, Error::Fenced { token } if token == old),
        "{err}"
    );
    let status = describe_leadership(&w.broker.transport("observer"), ROLE).unwrap();
    assert!(status.authoritative(&new) && !status.authoritative(&old));
}

fn resign_hands_over_without_waiting_for_the_deadline(start: Start) {
    let w = World::new(start);
    let mut a = w.join("a");
    let old = a.elected().token();
    let mut b = w.join("b");
    w.settle(&mut [&mut a, &mut b]);
    let before = w.now();
    assert!(a.leadership.as_ref().unwrap().resign_blocking().is_none());
    // The clock does not move: b hears of the tombstone and takes over at once.
    let new = b.elected().token();
    assert_eq!(w.now(), before);
    assert!(new > old);
    assert_eq!(w.roster(), ["b"]);
    assert!(a.leadership.as_ref().unwrap().is_done());
}

fn a_restarted_member_lands_at_the_tail(start: Start) {
    let w = World::new(start);
    let mut a = w.join("a");
    a.elected();
    let mut b = w.join("b");
    w.settle(&mut [&mut a, &mut b]);
    let mut c = w.join("c");
    w.settle(&mut [&mut a, &mut b, &mut c]);
    assert_eq!(w.roster(), ["a", "b", "c"]);
    b.candidacy.take().unwrap().cancel();
    let mut b = w.join("b");
    w.settle(&mut [&mut a, &mut b, &mut c]);
    assert_eq!(w.roster(), ["a", "c", "b"]);
    assert_eq!(c.snapshot().rank, Some(0));
    assert_eq!(b.snapshot().rank, Some(1));
    // And it does not preempt the live leader.
    w.advance_to(w.now() + 3 * LEASE_MS, &mut [&mut a, &mut b, &mut c]);
    assert!(a.is_leader() && !b.is_leader() && !c.is_leader());
}

fn cancelling_an_acquisition_leaves_no_registration(start: Start) {
    let w = World::new(start);
    let mut a = w.join("a");
    a.elected();
    let mut b = w.join("b");
    w.settle(&mut [&mut a, &mut b]);
    assert_eq!(w.roster(), ["a", "b"]);
    let cancel = b.candidacy.as_ref().unwrap().cancel_handle();
    cancel.cancel();
    match b.candidacy.take().unwrap().wait_timeout(REACT) {
        Ok(Err(Error::Cancelled)) => {}
        Ok(Ok(_)) => panic!("a cancelled candidacy was elected"),
        Ok(Err(e)) => panic!("unexpected error {e}"),
        Err(_) => panic!("cancellation did not finish"),
    }
    assert_eq!(w.roster(), ["a"]);
}

fn a_failing_transport_surfaces_an_error_after_the_give_up_time(start: Start) {
    let w = World::new(start);
    let mut b = w.join("b");
    b.link.cut();
    let t0 = w.now();
    // The default give-up time is two lease durations.
    let deadline = Instant::now() + REACT;
    while b.failed.is_none() {
        assert!(Instant::now() < deadline);
        w.clock.advance(Duration::from_millis(100));
        w.settle(&mut [&mut b]);
    }
    let waited = w.now() - t0;
    assert!(
        (2 * LEASE_MS..2 * LEASE_MS + 6000).contains(&waited),
        "gave up after {waited} ms"
    );
    match &b.failed {
        Some((Error::Unavailable { last, .. }, _)) => {
            assert!(last.to_string().contains("link to the broker is cut"))
        }
        other => panic!(
            "expected Unavailable, got {:?}",
            other.as_ref().map(|(e, _)| e.to_string())
        ),
    }
}

macro_rules! scenarios {
    ($flavour:ident, $start:expr) => {
        mod $flavour {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn single_member_is_elected() {
                super::single_member_is_elected($start)
            }
            #[test]
            fn standby_takes_over_at_deadline_plus_rank_stagger_and_old_leader_is_fenced() {
                super::standby_takes_over_at_deadline_plus_rank_stagger_and_old_leader_is_fenced(
                    $start,
                )
            }
            #[test]
            fn resign_hands_over_without_waiting_for_the_deadline() {
                super::resign_hands_over_without_waiting_for_the_deadline($start)
            }
            #[test]
            fn a_restarted_member_lands_at_the_tail() {
                super::a_restarted_member_lands_at_the_tail($start)
            }
            #[test]
            fn cancelling_an_acquisition_leaves_no_registration() {
                super::cancelling_an_acquisition_leaves_no_registration($start)
            }
            #[test]
            fn a_failing_transport_surfaces_an_error_after_the_give_up_time() {
                super::a_failing_transport_surfaces_an_error_after_the_give_up_time($start)
            }
        }
    };
}

scenarios!(blocking, kafka_coordination::blocking::start);

#[cfg(feature = "tokio")]
fn tokio_runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

#[cfg(feature = "tokio")]
scenarios!(tokio_driver, |t, r, m, o| {
    let _guard = tokio_runtime().enter();
    kafka_coordination::tokio::start(t, r, m, o)
});

#[cfg(feature = "smol")]
scenarios!(smol_driver, kafka_coordination::smol::start);

#[cfg(feature = "async-std")]
scenarios!(async_std_driver, kafka_coordination::async_std::start);

/// The async API itself (acquire, done, resign) under each executor.
#[cfg(any(feature = "tokio", feature = "smol", feature = "async-std"))]
async fn async_round_trip<F, Fut>(acquire: F)
where
    F: Fn(MemoryTransport, &'static str, Options) -> Fut,
    Fut: std::future::Future<Output = Result<Leadership, Error>>,
{
    let w = World::new(kafka_coordination::blocking::start);
    let a = acquire(w.broker.transport("a"), "a", w.options())
        .await
        .expect("elected");
    assert!(!a.is_done());
    assert!(a.resign().await.is_none());
    a.done().await;
    assert!(a.err().is_none());
    assert!(w.roster().is_empty());
}

#[cfg(feature = "tokio")]
#[test]
fn tokio_async_api() {
    tokio_runtime().block_on(async_round_trip(|t, m, o| {
        kafka_coordination::tokio::acquire_leadership(t, ROLE, m, o)
    }));
}

#[cfg(feature = "smol")]
#[test]
fn smol_async_api() {
    smol::block_on(async_round_trip(|t, m, o| {
        kafka_coordination::smol::acquire_leadership(t, ROLE, m, o)
    }));
}

#[cfg(feature = "async-std")]
#[test]
fn async_std_async_api() {
    async_std::task::block_on(async_round_trip(|t, m, o| {
        kafka_coordination::async_std::acquire_leadership(t, ROLE, m, o)
    }));
}

#[cfg(feature = "tokio")]
#[test]
fn dropping_the_acquire_future_deregisters() {
    let w = World::new(kafka_coordination::blocking::start);
    let mut a = w.join("a");
    a.elected();
    tokio_runtime().block_on(async {
        let fut = kafka_coordination::tokio::acquire_leadership(
            w.broker.transport("b"),
            ROLE,
            "b",
            w.options(),
        );
        // Poll until b is registered, then drop the future.
        let mut fut = Box::pin(fut);
        let deadline = Instant::now() + REACT;
        while !w.roster().contains(&"b".to_string()) {
            assert!(futures_lite::future::poll_once(&mut fut).await.is_none());
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        drop(fut);
    });
    let deadline = Instant::now() + REACT;
    while w.roster() != ["a"] {
        assert!(
            Instant::now() < deadline,
            "b was not deregistered: {:?}",
            w.roster()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn invalid_options_and_names_are_refused_at_once() {
    let w = World::new(kafka_coordination::blocking::start);
    let t = || w.broker.transport("x");
    let bad_renew = w
        .options()
        .renew_interval(Duration::from_millis(LEASE_MS as u64));
    match kafka_coordination::blocking::start(t(), ROLE, "x", bad_renew) {
        Err(Error::InvalidOptions(e)) => assert!(e.to_string().contains("renew_interval"), "{e}"),
        other => panic!(
            "expected InvalidOptions, got {:?}",
            other.map(|c| c.snapshot())
        ),
    }
    match kafka_coordination::blocking::start(t(), ROLE, "x", w.options().partitions(0)) {
        Err(Error::InvalidOptions(e)) => assert!(e.to_string().contains("partitions"), "{e}"),
        other => panic!(
            "expected InvalidOptions, got {:?}",
            other.map(|c| c.snapshot())
        ),
    }
    match kafka_coordination::blocking::start(t(), "", "x", w.options()) {
        Err(Error::InvalidName(e)) => assert!(e.to_string().contains("role"), "{e}"),
        other => panic!(
            "expected InvalidName, got {:?}",
            other.map(|c| c.snapshot())
        ),
    }
    assert!(w.roster().is_empty(), "nothing was registered");
}
