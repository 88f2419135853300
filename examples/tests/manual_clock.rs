//! How to unit-test leader-only code: the library's test kit puts the nodes on a `MemoryBroker`
//! whose clock is a `ManualClock`. Time moves only when the test moves it, and every move
//! returns once every driver has acted on it, so leases of seconds cost no real time and every
//! run takes the same path, however loaded the machine.
//!
//! The code under test is `Scheduler` (in `examples/src/manual_clock.rs`): it runs jobs only
//! while its node's `Leadership` is live. A `Node` is a `TestMember` of the cluster whose
//! leadership is handed to its scheduler once elected.

use kafka_coordination::core::machine::Status;
use kafka_coordination::core::UnixMillis;
use kafka_coordination::leadership::Leadership;
use kafka_coordination::testkit::{TestCluster, RENEW, STAGGER};
use kafka_coordination::Error;
use kafka_coordination_examples::manual_clock::{run_jobs, Node, ROLE, TICK};

fn lease_deadline(w: &TestCluster) -> UnixMillis {
    w.role_state(ROLE).lease().expect("a lease").lease.deadline
}

#[test]
fn the_scheduler_runs_jobs_only_while_its_node_leads() {
    let w = TestCluster::new();

    // The first node is elected at once; the second waits with rank 0.
    let mut a = Node::join(&w, "node-a");
    let t1 = a.token().expect("node-a is elected");
    let mut b = Node::join(&w, "node-b");
    let s = b.member.snapshot();
    assert_eq!((s.status, s.rank), (Status::Standby, Some(0)));
    assert_eq!(run_jobs(&w, &mut [&mut a, &mut b], "report"), ["node-a"]);

    // Renewals: the leader keeps its token as long as it can reach the broker.
    for _ in 0..20 {
        w.advance(TICK);
        assert_eq!(run_jobs(&w, &mut [&mut a, &mut b], "tick"), ["node-a"]);
    }
    let deadline = lease_deadline(&w);
    assert_eq!(w.role_state(ROLE).lease().unwrap().lease.token, t1);
    assert!(deadline > w.now());

    // Cut the leader off. Nothing changes before its deadline...
    a.member.link().cut();
    w.advance_to(UnixMillis(deadline.0 - 1));
    assert_eq!(b.token(), None);
    // ...and at the deadline (rank 0: no stagger) node-b takes over with a new token.
    w.advance_to(deadline);
    let t2 = b.token().expect("node-b is elected at the deadline");
    assert_ne!(t2, t1);
    // The cut-off leader cannot know yet: its scheduler would still run, with the old token.
    assert_eq!(
        run_jobs(&w, &mut [&mut a, &mut b], "tick"),
        ["node-a", "node-b"]
    );

    // Its link returns: the next renewal is fenced and the scheduler stops for good.
    a.member.link().restore();
    w.advance(RENEW);
    assert!(!a.scheduler.is_leading());
    let err = a.scheduler.leadership().and_then(Leadership::err);
    assert!(
        matches!(err, Some(Error::Fenced { token }) if token == t1),
        "{err:?}"
    );
    assert_eq!(run_jobs(&w, &mut [&mut a, &mut b], "tick"), ["node-b"]);
    assert!(a.scheduler.runs().iter().all(|run| run.token == t1));

    // A resign hands over at once; with nobody left, no job runs.
    let resigned = b.scheduler.leadership().map(Leadership::resign_blocking);
    assert!(matches!(resigned, Some(Ok(()))), "{resigned:?}");
    assert!(run_jobs(&w, &mut [&mut a, &mut b], "tick").is_empty());
}

#[test]
fn a_rank_one_standby_waits_one_stagger_longer() {
    let w = TestCluster::new();
    let mut a = Node::join(&w, "node-a");
    let t1 = a.token().expect("node-a is elected");
    let mut b = Node::join(&w, "node-b");
    let mut c = Node::join(&w, "node-c");
    assert_eq!(c.member.rank(), Some(1));

    // The leader and the first standby go quiet together.
    a.member.link().cut();
    b.member.link().cut();
    let turn = lease_deadline(&w).saturating_add(STAGGER);
    w.advance_to(UnixMillis(turn.0 - 1));
    assert_eq!(c.token(), None);
    w.advance_to(turn);
    let t3 = c
        .token()
        .expect("node-c is elected one stagger after the deadline");
    assert_ne!(t3, t1);
    assert_eq!(
        run_jobs(&w, &mut [&mut a, &mut b, &mut c], "tick"),
        ["node-a", "node-c"],
        "node-b never led; node-a is not fenced yet"
    );
}
