//! How to unit-test leader-only code: a `ManualClock`, the in-process `MemoryBroker`, and the
//! blocking drivers. Time moves only when the test moves it, so leases of seconds cost no real
//! time and every run takes the same path.
//!
//! The code under test is `Scheduler` (in `examples/src/manual_clock.rs`): it runs jobs only
//! while its node's `Leadership` is live. `World` is the small harness: it starts nodes, moves
//! the clock (`advance`) and waits until every driver has reacted (`settle`).

use kafka_coordination::core::machine::Status;
use kafka_coordination::{Error, Leadership};
use kafka_coordination_examples::manual_clock::{World, RENEW, STAGGER, STEP};

fn token_of(w: &mut World, name: &str) -> Option<kafka_coordination::FencingToken> {
    w.node(name).scheduler.leadership().map(Leadership::token)
}

#[test]
fn the_scheduler_runs_jobs_only_while_its_node_leads() {
    let mut w = World::new();

    // The first node is elected at once; the second waits with rank 0.
    w.join("node-a").unwrap();
    let t1 = token_of(&mut w, "node-a").expect("node-a is elected");
    w.join("node-b").unwrap();
    let b = w.node("node-b").snapshot();
    assert_eq!((b.status, b.rank), (Status::Standby, Some(0)));
    assert_eq!(w.run_jobs("report"), ["node-a"]);

    // Renewals: the leader keeps its token as long as it can reach the broker.
    for _ in 0..20 {
        w.advance(STEP).unwrap();
        assert_eq!(w.run_jobs("tick"), ["node-a"]);
    }
    let lease = w.lease().unwrap().expect("a lease");
    assert_eq!(lease.lease.token, t1);
    assert!(lease.lease.deadline > w.now());

    // Cut the leader off. Nothing changes before its deadline...
    w.node("node-a").link.cut();
    let deadline = lease.lease.deadline;
    w.advance_to(kafka_coordination::UnixMillis(deadline.0 - 1))
        .unwrap();
    assert!(!w.node("node-b").scheduler.is_leading());
    // ...and at the deadline (rank 0: no stagger) node-b takes over with a newer token.
    w.advance_to(deadline).unwrap();
    let t2 = token_of(&mut w, "node-b").expect("node-b is elected at the deadline");
    assert!(t2 > t1);
    // The cut-off leader cannot know yet: its scheduler would still run, with the old token.
    assert_eq!(w.run_jobs("tick"), ["node-a", "node-b"]);

    // Its link returns: the next renewal is fenced and the scheduler stops for good.
    w.node("node-a").link.restore();
    w.advance(RENEW).unwrap();
    let a = w.node("node-a");
    assert!(!a.scheduler.is_leading());
    let err = a.scheduler.leadership().and_then(Leadership::err);
    assert!(
        matches!(err, Some(Error::Fenced { token }) if token == t1),
        "{err:?}"
    );
    assert_eq!(w.run_jobs("tick"), ["node-b"]);
    assert!(w
        .node("node-a")
        .scheduler
        .runs()
        .iter()
        .all(|run| run.token == t1));

    // A resign hands over at once; with nobody left, no job runs.
    let resigned = w
        .node("node-b")
        .scheduler
        .leadership()
        .and_then(Leadership::resign_blocking);
    assert!(resigned.is_none(), "{resigned:?}");
    assert!(w.run_jobs("tick").is_empty());
}

#[test]
fn a_rank_one_standby_waits_one_stagger_longer() {
    let mut w = World::new();
    w.join("node-a").unwrap();
    let t1 = token_of(&mut w, "node-a").expect("node-a is elected");
    w.join("node-b").unwrap();
    w.join("node-c").unwrap();
    assert_eq!(w.node("node-c").snapshot().rank, Some(1));

    // The leader and the first standby go quiet together.
    w.node("node-a").link.cut();
    w.node("node-b").link.cut();
    let deadline = w.lease().unwrap().expect("a lease").lease.deadline;
    let turn = deadline.saturating_add(STAGGER);
    w.advance_to(kafka_coordination::UnixMillis(turn.0 - 1))
        .unwrap();
    assert!(!w.node("node-c").scheduler.is_leading());
    w.advance_to(turn).unwrap();
    let t3 = token_of(&mut w, "node-c").expect("node-c is elected one stagger after the deadline");
    assert!(t3 > t1);
    assert_eq!(
        w.run_jobs("tick"),
        ["node-a", "node-c"],
        "node-b never led; node-a is not fenced yet"
    );
}
