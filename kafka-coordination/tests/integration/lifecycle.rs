//! Lifecycles that cannot strand a role: a driver whose runtime goes away ends the term and
//! hands the role over on the spot; every wait returns; `resign` is the way to end a service
//! and returns a `Result`. On the MemoryBroker with a ManualClock: no verdict depends on real
//! time or on thread scheduling.

use event_listener::Listener;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::describe::describe_role_state;
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::memory::MemoryBroker;
use kafka_coordination::{blocking, tokio_driver};
use kafka_coordination::{Error, ManualClock, Options};

const ROLE: &str = "scheduler";

struct World {
    clock: ManualClock,
    broker: MemoryBroker,
}

impl World {
    fn new() -> World {
        let clock = ManualClock::default();
        let broker = MemoryBroker::new(16, Arc::new(clock.clone()));
        World { clock, broker }
    }

    fn options(&self) -> Options {
        Options::new()
            .clock(self.clock.clone())
            .lease_duration(Duration::from_secs(3))
            .renew_interval(Duration::from_secs(1))
            .challenge_stagger(Duration::from_millis(500))
    }

    fn settle(&self) {
        self.clock.settle().expect("the drivers settle");
    }

    /// The role's roster and whether a lease record is in place.
    fn role(&self) -> (Vec<String>, bool) {
        let state = describe_role_state(&self.broker.transport("observer"), ROLE).expect("state");
        let roster = state.roster().map(|(m, _)| m.to_string()).collect();
        (roster, state.lease().is_some())
    }

    /// A standby on the blocking driver (it outlives every runtime of the test).
    fn standby(&self, member: &str) -> Candidacy {
        let c = blocking::start(self.broker.transport(member), ROLE, member, self.options())
            .expect("start");
        self.settle();
        assert_eq!(c.snapshot().rank, Some(0), "{member} stands by first");
        c
    }
}

/// A runtime whose workers run the drivers while the test thread settles the clock.
fn multi_thread(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Both kinds of tokio runtime. (A current-thread runtime runs its tasks only inside
/// `block_on`, so the tests that settle between calls use [`multi_thread`].)
fn runtimes() -> Vec<(&'static str, tokio::runtime::Runtime)> {
    vec![
        (
            "multi-thread",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime"),
        ),
        (
            "current-thread",
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
        ),
    ]
}

/// Elected on its own at once (nobody else is registered), so no time has to pass.
fn lead_on(w: &World, rt: &tokio::runtime::Runtime, member: &str) -> Leadership {
    rt.block_on(tokio_driver::acquire_leadership(
        w.broker.transport(member),
        ROLE,
        member,
        w.options(),
    ))
    .expect("elected")
}

fn elected_now(w: &World, c: Candidacy) -> Leadership {
    w.settle();
    match c.elected_blocking_timeout(Duration::ZERO) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => panic!("the standby failed: {e}"),
        Err(c) => panic!("the standby was not elected: {:?}", c.snapshot()),
    }
}

#[test]
fn dropping_the_runtime_ends_the_term_and_hands_the_role_over_at_once() {
    for (kind, rt) in [
        ("1 worker", multi_thread(1)),
        ("2 workers", multi_thread(2)),
    ] {
        let w = World::new();
        let a = lead_on(&w, &rt, "a");
        let b = w.standby("b");
        let now = kafka_coordination::Clock::now(&w.clock);

        drop(rt);

        // The term is over, and says why; no wait hangs.
        assert!(a.is_done(), "{kind}: is_done after the runtime went away");
        match a.err() {
            Some(Error::Stopped {
                cleanup: Some(c), ..
            }) => assert!(c.complete(), "{kind}: {c}"),
            other => panic!("{kind}: expected Error::Stopped, got {other:?}"),
        }
        assert!(a.done_blocking_timeout(Duration::ZERO), "{kind}");
        assert!(
            a.resign_blocking().is_ok(),
            "{kind}: the role was left clean"
        );
        assert!(
            a.err().unwrap().to_string().contains("left clean"),
            "{kind}: {}",
            a.err().unwrap()
        );

        // The standby takes over without waiting out the lease: no time passed.
        let b = elected_now(&w, b);
        assert_eq!(
            kafka_coordination::Clock::now(&w.clock),
            now,
            "{kind}: no time passed"
        );
        assert_ne!(b.token(), a.token(), "{kind}");
        assert!(b.term() > a.term(), "{kind}");
        assert!(b.resign_blocking().is_ok(), "{kind}");
    }
}

#[test]
fn a_leadership_dropped_as_main_returns_leaves_nothing_behind() {
    // The shape of `#[tokio::main] async fn main() { let l = acquire(..).await?; ..; }`: the
    // handle drops at the end of the block and the runtime right after it.
    for (kind, rt) in runtimes() {
        let w = World::new();
        let (transport, options) = (w.broker.transport("a"), w.options());
        rt.block_on(async move {
            let _leader = tokio_driver::acquire_leadership(transport, ROLE, "a", options)
                .await
                .expect("elected");
            // ... the service's work; `_leader` drops here, which asks for a resign that the
            // driver task has no chance to run before the runtime goes.
        });
        drop(rt);
        assert_eq!(
            w.role(),
            (vec![], false),
            "{kind}: the lease and the registration are gone"
        );
    }
}

#[test]
fn a_standby_whose_runtime_goes_away_withdraws_its_registration() {
    for (kind, rt) in [
        ("1 worker", multi_thread(1)),
        ("2 workers", multi_thread(2)),
    ] {
        let w = World::new();
        let a = blocking::acquire_leadership(w.broker.transport("a"), ROLE, "a", w.options())
            .expect("a leads");
        let b = {
            let _enter = rt.enter();
            tokio_driver::start(w.broker.transport("b"), ROLE, "b", w.options()).expect("start")
        };
        w.settle();
        assert_eq!(b.snapshot().rank, Some(0), "{kind}: b stands by");
        assert_eq!(
            w.role(),
            (vec!["a".to_owned(), "b".to_owned()], true),
            "{kind}"
        );

        // b's driver task is in its long poll (awaiting the clock's next change) when its
        // runtime goes.
        drop(rt);

        assert!(b.is_done(), "{kind}: the candidacy ended");
        if let Err(e) = b.resign_blocking() {
            panic!("{kind}: the standby's exit: {e}");
        }
        w.settle();
        assert_eq!(w.role(), (vec!["a".to_owned()], true), "{kind}: b withdrew");
        assert!(!a.is_done(), "{kind}: the leader is untouched");
        assert!(a.resign_blocking().is_ok(), "{kind}");
    }
}

#[test]
fn resign_returns_a_result_so_question_mark_works() {
    fn serve(w: &World) -> Result<(), Error> {
        let leader = blocking::acquire_leadership(w.broker.transport("a"), ROLE, "a", w.options())?;
        leader.resign_blocking()?;
        let standby = blocking::start(w.broker.transport("b"), ROLE, "b", w.options())?;
        standby.resign_blocking()?;
        Ok(())
    }
    let w = World::new();
    serve(&w).expect("a service that ends with resign");
    w.settle();
    assert_eq!(w.role(), (vec![], false));

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let result: Result<(), Error> = rt.block_on(async {
        let leader =
            tokio_driver::acquire_leadership(w.broker.transport("a"), ROLE, "a", w.options())
                .await?;
        leader.resign().await?;
        let standby = tokio_driver::start(w.broker.transport("b"), ROLE, "b", w.options())?;
        standby.resign().await?;
        Ok(())
    });
    result.expect("the async service ends with resign");
    assert_eq!(w.role(), (vec![], false));
}

#[test]
fn resign_reports_an_exit_that_could_not_be_finished() {
    let w = World::new();
    let link = kafka_coordination::cuttable_link::Link::new(w.broker.transport("a"));
    let leader =
        Arc::new(blocking::acquire_leadership(link.clone(), ROLE, "a", w.options()).expect("lead"));
    link.cut();
    w.settle();
    // The resign must be asked for before the clock moves: moved first, the lease would run
    // out and the term end on its own (Unavailable), which is another test. Asking rings the
    // clock, so wait for that ring (an event, not a sleep; nothing else changes the clock of
    // a settled world).
    let before = w.clock.changes();
    let resign = std::thread::spawn({
        let leader = leader.clone();
        move || leader.resign_blocking()
    });
    loop {
        let rung = w.clock.listen();
        if w.clock.changes() > before {
            break;
        }
        rung.wait();
    }
    // The exit retries with backoff on the manual clock; move it until the retries run out (a
    // bounded number of attempts per step, each at most a quarter renew interval apart) and the
    // driver reports `Ended`. Its outcome is recorded in the same update as that status, so the
    // resign returns without another move; joining it cannot wait for the clock. The bound
    // counts moves of the clock, which the driver follows exactly, not real time.
    for _ in 0..4000 {
        if leader.snapshot().status == kafka_coordination::core::machine::Status::Ended {
            break;
        }
        w.clock
            .advance_and_settle(Duration::from_millis(100))
            .expect("settle");
    }
    assert_eq!(
        leader.snapshot().status,
        kafka_coordination::core::machine::Status::Ended,
        "the exit has not ended after 400 s on the manual clock: {:?}",
        leader.snapshot()
    );
    match resign.join().expect("no panic") {
        Err(Error::Incomplete { cleanup, .. }) => {
            assert!(!cleanup.complete(), "{cleanup}");
            assert!(cleanup.to_string().contains("not"), "{cleanup}");
        }
        other => panic!("expected Error::Incomplete, got {other:?}"),
    }
}
