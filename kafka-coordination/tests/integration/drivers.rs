//! The same scenarios on every driver this build has (blocking, tokio, smol, async-std), on the
//! MemoryBroker with a ManualClock, through the public test kit. Time moves only when a test
//! moves it, and every move returns once every driver has acted on it (exact quiescence): no
//! verdict here depends on how fast threads are scheduled.

use std::time::Duration;

use kafka_coordination::core::machine::Status;
use kafka_coordination::core::record::{MemberId, Role};
use kafka_coordination::core::UnixMillis;
use kafka_coordination::testkit::{Flavour, TestCluster, LEASE, RENEW, STAGGER, STEP};
use kafka_coordination::transport::Wait;
use kafka_coordination::Error;

const ROLE: &str = "scheduler";

fn cluster(flavour: Flavour) -> TestCluster {
    TestCluster::new().flavour(flavour)
}

fn lease_deadline(w: &TestCluster) -> UnixMillis {
    w.role_state(ROLE).lease().expect("a lease").lease.deadline
}

fn single_member_is_elected(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let token = a.token().expect("elected");
    assert_eq!(w.broker().epoch_of(&Role::new(ROLE).unwrap()), Some(token));
    assert!(w.leadership_status(ROLE).authoritative(&token));
    // The leader renews with the same token as the clock moves: ten leases of virtual time.
    let writes = w.broker().accepted_lease_writes().len();
    w.advance(LEASE * 10);
    assert!(a.is_leader());
    assert_eq!(a.token(), Some(token));
    assert!(lease_deadline(&w) > w.now());
    // Renewed every second: 30 s of virtual time give 30 renewals, give or take the edges.
    let renewals = w.broker().accepted_lease_writes().len() - writes;
    assert!((29..=31).contains(&renewals), "{renewals} renewals");
}

fn standby_takes_over_at_deadline_plus_rank_stagger_and_old_leader_is_fenced(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let old = a.token().expect("a is elected");
    let b = w.join(ROLE, "b");
    let c = w.join(ROLE, "c");
    assert_eq!(b.rank(), Some(0));
    assert_eq!(c.rank(), Some(1));
    // The leader and the first standby go quiet; c (rank 1) must wait deadline + 1 stagger.
    a.link().cut();
    b.link().cut();
    let deadline = lease_deadline(&w);
    w.advance_to(UnixMillis(deadline.saturating_add(STAGGER).0 - 1));
    assert!(!c.is_leader(), "c challenged before deadline + 1 x stagger");
    assert!(
        a.is_leader(),
        "the quiet leader does not fence itself on time"
    );
    w.advance_to(deadline.saturating_add(STAGGER));
    assert!(c.is_leader(), "c was not elected at deadline + 1 x stagger");
    let new = c.token().unwrap();
    assert_ne!(new, old);
    // The old leader's link comes back: its next renewal is fenced and `done` fires.
    a.link().restore();
    w.advance(Duration::from_secs(1));
    assert!(!a.is_leader(), "the deposed leader's done did not fire");
    let err = a.error().expect("an error after a fence");
    assert!(
        matches!(err, Error::Fenced { token } if token == old),
        "{err}"
    );
    let status = w.leadership_status(ROLE);
    assert!(status.authoritative(&new) && !status.authoritative(&old));
}

fn resign_hands_over_without_waiting_for_the_deadline(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let old = a.token().unwrap();
    let b = w.join(ROLE, "b");
    let before = w.now();
    assert!(a.resign().is_ok());
    // The clock did not move: b heard of the tombstone and took over at once.
    assert_eq!(w.now(), before);
    assert!(b.is_leader());
    assert_ne!(b.token().unwrap(), old);
    assert_eq!(w.roster(ROLE), ["b"]);
    assert!(!a.is_leader() && a.is_done());
}

fn a_restarted_member_lands_at_the_tail(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let c = w.join(ROLE, "c");
    assert_eq!(w.roster(ROLE), ["a", "b", "c"]);
    b.resign().expect("a clean exit");
    let b = w.join(ROLE, "b");
    assert_eq!(w.roster(ROLE), ["a", "c", "b"]);
    assert_eq!(c.rank(), Some(0));
    assert_eq!(b.rank(), Some(1));
    // And it does not preempt the live leader.
    w.advance(LEASE * 3);
    assert!(a.is_leader() && !b.is_leader() && !c.is_leader());
}

fn cancelling_an_acquisition_leaves_no_registration(flavour: Flavour) {
    let w = cluster(flavour);
    let _a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    assert_eq!(w.roster(ROLE), ["a", "b"]);
    assert!(b.resign().is_ok());
    assert!(b.is_done() && b.token().is_none());
    assert_eq!(b.snapshot().status, Status::Ended);
    assert_eq!(w.roster(ROLE), ["a"]);
}

fn a_failing_transport_surfaces_an_error_after_the_give_up_time(flavour: Flavour) {
    let w = cluster(flavour);
    let b = w.join(ROLE, "b");
    // b was elected at once; a second member whose link is cut before its driver starts fails.
    let link = kafka_coordination::cuttable_link::Link::new(w.broker().transport("c"));
    link.cut();
    let c = w.try_join_on(link, ROLE, "c", w.options()).expect("starts");
    let t0 = w.now();
    // The default give-up time is two lease durations.
    assert!(
        w.advance_until(LEASE * 4, || c.is_done()),
        "c did not give up within four leases"
    );
    let waited = w.now().since(t0);
    assert!(
        (LEASE * 2..LEASE * 2 + Duration::from_secs(2)).contains(&waited),
        "gave up after {waited:?}"
    );
    match c.error() {
        Some(Error::Unavailable { last, .. }) => {
            assert!(
                last.to_string().contains("link to the broker is cut"),
                "{last}"
            )
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(b.is_leader());
}

fn dropping_a_candidacy_deregisters(flavour: Flavour) {
    let w = cluster(flavour);
    let _a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    assert_eq!(w.roster(ROLE), ["a", "b"]);
    drop(b);
    w.settle();
    assert_eq!(w.roster(ROLE), ["a"]);
}

fn dropping_a_leadership_resigns(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let leadership = a.take_leadership().expect("a leads");
    drop(leadership);
    w.settle();
    assert!(b.is_leader(), "b took over without the clock moving");
    assert_eq!(w.roster(ROLE), ["b"]);
}

/// A resign fences even with no successor: once `resign` returns, the coordinator no longer
/// holds the leader's pair, and the broker refuses a write that carries it.
fn a_resign_supersedes_the_pair_even_without_a_successor(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let old = a.token().unwrap();
    assert!(w.leadership_status(ROLE).authoritative(&old));
    assert!(a.resign().is_ok(), "{:?}", a.error());
    let status = w.leadership_status(ROLE);
    assert!(!status.authoritative(&old), "{status:?}");
    assert!(
        w.role_state(ROLE).lease().is_none(),
        "the lease was cleared"
    );
    assert!(w.roster(ROLE).is_empty());
    // A guarded write with the resigned pair, through the member's own session and through
    // a fresh one, is refused.
    let key = kafka_coordination::core::record::Key::lease(Role::new(ROLE).unwrap()).encode();
    let partition = w.role_state(ROLE).role().clone();
    let partition = kafka_coordination::core::partition::role_partition(&partition, 16).unwrap();

    let err = a
        .transport()
        .write_lease(partition, &key, Some(b"zombie"), old)
        .unwrap_err();
    assert!(
        err.is_fenced() || err.kind() == kafka_coordination::error::ErrorKind::Fatal,
        "{err}"
    );
    assert!(w
        .broker()
        .accepted_lease_writes()
        .iter()
        .all(|write| write.token != old || write.offset < w.role_state(ROLE).next_offset()));
    // The next member is elected at once.
    let b = w.join(ROLE, "b");
    assert!(b.is_leader());
}

/// Terms grow with every new leader: hand-over, failover, producer-id change, exhaustion.
fn terms_strictly_grow_across_every_kind_of_change(flavour: Flavour) {
    let w = cluster(flavour);
    let role = Role::new(ROLE).unwrap();
    let term_of = |m: &kafka_coordination::testkit::TestMember| {
        m.with_leadership(|l| l.term()).expect("leads")
    };
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let c = w.join(ROLE, "c");
    let mut terms = vec![term_of(&a)];
    // Hand-over.
    a.resign().expect("a clean exit");
    assert!(b.is_leader());
    terms.push(term_of(&b));
    // Failover after a death, with the next producer id made smaller (a coordinator move)
    // and the epoch at exhaustion: the successor's pair has a smaller producer id.
    w.broker().next_producer_id_smaller();
    w.broker()
        .force_epoch(&role, kafka_coordination::memory::EXHAUSTED_EPOCH);
    b.link().cut();
    assert!(w.advance_until(LEASE * 3, || c.is_leader()), "c took over");
    let (old, new) = (b.token().unwrap(), c.token().unwrap());
    assert_eq!(
        new.spec_compare(&old),
        std::cmp::Ordering::Less,
        "the new pair {new} compares below the old {old}: tokens cannot order terms"
    );
    terms.push(term_of(&c));
    // c passed b over (b is cut off): b stays registered, and no rank counts it.
    assert_eq!(w.roster(ROLE), ["b", "c"]);
    assert!(w.role_state(ROLE).passed_over(&MemberId::new("b").unwrap()));
    let d = w.join(ROLE, "d");
    c.resign().expect("a clean exit");
    let resigned_at = w.now();
    assert!(
        w.advance_until(STAGGER * 2, || d.is_leader()),
        "d took over"
    );
    assert_eq!(w.now(), resigned_at, "no ghost ranks ahead of d: at once");
    terms.push(term_of(&d));
    assert!(terms.windows(2).all(|p| p[0] < p[1]), "terms {terms:?}");
}

/// A leader whose transport fails for good (an ACL revoked) still supersedes its pair, clears
/// its lease and deregisters on the way out: the standby takes over at once, no ghost stays.
fn a_leader_stopped_by_a_fatal_error_cleans_up(flavour: Flavour) {
    use kafka_coordination::error::ErrorKind;
    use kafka_coordination::memory::BrokerOp;
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let old = a.token().unwrap();
    w.broker()
        .fail_next_op(BrokerOp::WriteLease, 1, ErrorKind::Unauthorized);
    // The next renewal meets the error; a moment later b leads, long before the deadline.
    let deadline = lease_deadline(&w);
    w.advance(Duration::from_secs(1));
    assert!(b.is_leader(), "b did not take over at once");
    assert!(w.now() < deadline);
    assert!(!w.leadership_status(ROLE).authoritative(&old));
    assert_eq!(w.roster(ROLE), ["b"], "no ghost");
    match a.error() {
        Some(Error::Transport(e)) => assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}"),
        other => panic!("expected the transport error, got {other:?}"),
    }
}

/// When the way out fails too, the error says what could not be cleaned up.
fn a_fatal_error_with_a_dead_link_says_what_was_left_behind(flavour: Flavour) {
    use kafka_coordination::error::ErrorKind;
    use kafka_coordination::memory::BrokerOp;
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    w.broker()
        .fail_next_op(BrokerOp::WriteLease, 1, ErrorKind::Unauthorized);
    w.broker()
        .fail_next_op(BrokerOp::Acquire, 100, ErrorKind::Retriable);
    w.broker()
        .fail_next_op(BrokerOp::WriteLease, 100, ErrorKind::Retriable);
    assert!(w.advance_until(LEASE * 2, || a.is_done()), "a ended");
    let msg = a.error().expect("an error").to_string();
    assert!(msg.contains("on the way out"), "{msg}");
    assert!(msg.contains("not superseded"), "{msg}");
    assert!(msg.contains("lease was not cleared"), "{msg}");
}

/// Guarded writes from the handle: blocking, and (for the async flavours) as a future.
fn guarded_writes_from_the_handle_land_and_a_fenced_one_ends_the_term_at_once(flavour: Flavour) {
    use kafka_coordination::GuardedRecord;
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let rec = |v: &'static [u8]| GuardedRecord {
        topic: "jobs",
        partition: 0,
        key: Some(b"k"),
        value: Some(v),
        headers: &[],
    };
    let offsets = a
        .with_leadership(|l| l.guarded_write_blocking(&[rec(b"one"), rec(b"two")]))
        .expect("a leads")
        .expect("written");
    assert_eq!(offsets, [0, 1]);
    let written = w.broker().topic_records("jobs", 0);
    assert_eq!(written.len(), 2);
    // a freezes; b takes over; a comes back and its next guarded write is fenced: the term
    // ends at once, before any renewal, with the clock not moving.
    let old = a.token().unwrap();
    a.link().cut();
    assert!(w.advance_until(LEASE * 2, || b.is_leader()), "b took over");
    a.link().restore();
    let renewals_before = w.broker().accepted_lease_writes().len();
    let now = w.now();
    let err = a
        .with_leadership(|l| l.guarded_write_blocking(&[rec(b"zombie")]))
        .expect("a still holds its handle")
        .expect_err("fenced");
    assert!(
        matches!(err, Error::Fenced { token } if token == old),
        "{err}"
    );
    assert!(!a.is_leader(), "done fired at once");
    w.settle();
    assert_eq!(w.now(), now);
    assert!(
        a.is_done(),
        "the driver deregistered without waiting for a renewal"
    );
    assert_eq!(w.roster(ROLE), ["b"]);
    assert_eq!(w.broker().accepted_lease_writes().len(), renewals_before);
    assert_eq!(
        w.broker().topic_records("jobs", 0).len(),
        2,
        "the zombie wrote nothing"
    );
    // Later writes are refused without a broker call.
    let again = a.with_leadership(|l| l.guarded_write_blocking(&[rec(b"x")]));
    assert!(matches!(again, Some(Err(Error::Fenced { .. }))));
}

/// A guarded write with a group's offsets: records and offsets land together; a deposed
/// leader's write with offsets is refused as a whole, so the group's position stays where the
/// current leader put it; headers travel with the records.
fn offsets_commit_with_the_guarded_write_and_a_deposed_leaders_are_refused(flavour: Flavour) {
    use kafka_coordination::transport::{ConsumedOffset, GroupOffsets};
    use kafka_coordination::GuardedRecord;
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let headers: &[(&str, Option<&[u8]>)] = &[("source", Some(b"in/0@41"))];
    let out = |v: &'static [u8]| GuardedRecord::new("out", 0, None, Some(v)).with_headers(headers);
    let at = |next| {
        [ConsumedOffset {
            topic: "in",
            partition: 0,
            next_offset: next,
            metadata: None,
        }]
    };
    let position = |w: &TestCluster| w.broker().committed_offsets("g", &[("in", 0), ("in", 1)]);
    assert_eq!(position(&w), [None, None]);
    let first = at(42);
    let written = a
        .with_leadership(|l| {
            l.guarded_write_with_offsets_blocking(
                &[out(b"r41")],
                GroupOffsets {
                    group: "g",
                    offsets: &first,
                },
            )
        })
        .expect("a leads")
        .expect("written");
    assert_eq!(written, [0]);
    assert_eq!(position(&w), [Some(42), None]);
    // a freezes; b takes over, reads the position and goes on.
    a.link().cut();
    assert!(w.advance_until(LEASE * 2, || b.is_leader()), "b took over");
    a.link().restore();
    let second = at(43);
    b.with_leadership(|l| {
        l.guarded_write_with_offsets_blocking(
            &[out(b"r42")],
            GroupOffsets {
                group: "g",
                offsets: &second,
            },
        )
    })
    .expect("b leads")
    .expect("written");
    // a, back, tries to commit its own view of the position with a result: all refused.
    let stale = at(44);
    let err = a
        .with_leadership(|l| {
            l.guarded_write_with_offsets_blocking(
                &[out(b"zombie")],
                GroupOffsets {
                    group: "g",
                    offsets: &stale,
                },
            )
        })
        .expect("a still holds its handle")
        .expect_err("fenced");
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    assert!(!a.is_leader(), "the term ended at once");
    assert_eq!(
        position(&w),
        [Some(43), None],
        "the zombie's offset is not visible"
    );
    let values: Vec<_> = w
        .broker()
        .topic_records("out", 0)
        .into_iter()
        .map(|r| r.value.unwrap_or_default())
        .collect();
    assert_eq!(values, [b"r41".to_vec(), b"r42".to_vec()]);
}

/// One transport (one client) serves several roles; a second candidacy for a role it already
/// holds or contests is refused.
fn one_transport_serves_many_roles_and_refuses_a_second_candidacy_for_one(flavour: Flavour) {
    let w = cluster(flavour);
    let shared = kafka_coordination::cuttable_link::Link::new(w.broker().transport("process-1"));
    let start = |role: &str| w.try_join_on(shared.clone(), role, "process-1", w.options());
    let a = start("billing").expect("billing");
    let b = start("shipping").expect("shipping");
    w.settle();
    assert!(a.is_leader() && b.is_leader());
    assert_ne!(a.token(), b.token());
    match start("billing") {
        Err(Error::Transport(e)) => {
            assert_eq!(
                e.kind(),
                kafka_coordination::error::ErrorKind::Config,
                "{e}"
            );
            assert!(e.to_string().contains("already has a candidacy"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Both renew through the one transport.
    w.advance(LEASE * 2);
    assert!(a.is_leader() && b.is_leader());
    // Once a candidacy ends, its role can be taken again on the same transport.
    a.resign().expect("a clean exit");
    let again = start("billing").expect("billing again");
    w.settle();
    assert!(again.is_leader());
}

/// Health: the last renewal and lease deadline advance while the leader renews; when its link
/// is cut the check turns unhealthy (before the lease runs out) and `failing_for` grows; back
/// to healthy once renewals succeed again.
fn a_leaders_health_follows_its_renewals(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let max_age = Duration::from_millis(1500); // 1.5 renew intervals
    let health = || a.with_leadership(|l| l.health()).expect("a leads");
    let h = health();
    assert!(h.is_healthy(max_age), "{h:?}");
    assert_eq!(
        h.lease_deadline,
        h.last_renewal.map(|t| t.saturating_add(LEASE))
    );
    let first = h.last_renewal.expect("the claim counts");
    w.advance(Duration::from_secs(2));
    let h = health();
    assert!(h.last_renewal.expect("renewed") > first, "{h:?}");
    assert!(h.is_healthy(max_age) && h.failing_for.is_none(), "{h:?}");
    a.link().cut();
    w.advance(Duration::from_secs(2));
    let h = health();
    assert!(!h.is_healthy(max_age), "{h:?}");
    assert!(h.leading, "still the leader: it never fences itself");
    assert!(
        h.failing_for
            .is_some_and(|d| d >= Duration::from_millis(900)),
        "{h:?}"
    );
    assert!(
        w.now() < h.lease_deadline.expect("a deadline"),
        "unhealthy before the lease ends"
    );
    a.link().restore();
    w.advance(Duration::from_secs(1));
    let h = health();
    assert!(h.is_healthy(max_age) && h.failing_for.is_none(), "{h:?}");
}

fn a_second_live_process_with_the_same_member_id_is_detected(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let token = a.token().expect("a leads");
    let b = w.join(ROLE, "b");
    // Another process joins as "b": the first "b", a standby, reads that registration and
    // stops without touching the role (no tombstone: the key is shared with the newcomer).
    let b2 = w.join(ROLE, "b");
    match b.error() {
        Some(Error::DuplicateMember {
            member,
            offset,
            own_registration,
            ..
        }) => {
            assert_eq!(member, "b");
            assert!(offset > own_registration);
        }
        other => panic!("expected DuplicateMember, got {other:?}"),
    }
    assert!(b.is_done());
    assert_eq!(w.roster(ROLE), ["a", "b"], "the newer registration stands");
    assert_eq!(b2.rank(), Some(0));
    // A process that joins as the leader's id sees the leader's next renewal and stops; the
    // leader's term is untouched (nothing was fenced).
    let a2 = w.join(ROLE, "a");
    w.advance(LEASE);
    assert!(
        matches!(a2.error(), Some(Error::DuplicateMember { .. })),
        "{:?}",
        a2.error()
    );
    assert!(a.is_leader() && a.token() == Some(token));
    assert!(w.leadership_status(ROLE).authoritative(&token));
    // The error says what to fix.
    let message = a2.error().expect("an error").to_string();
    assert!(
        message.contains("member ids must be unique per role"),
        "{message}"
    );
    // The survivors go on: the leader resigns and the remaining "b" takes over.
    a.resign().expect("a clean exit");
    assert!(b2.is_leader());
}

/// Issue 11, "challenge churn": a standby whose turn comes while another member's challenge is
/// under way (its pair minted, its first lease not written yet) does not challenge too; when
/// that challenger never writes (it died right after its acquire), the standby takes over a
/// lease duration after it saw the challenge.
fn a_challenge_under_way_is_not_challenged_again(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    a.link().cut();
    let deadline = lease_deadline(&w);
    w.advance_to(UnixMillis(deadline.0 - 100));
    // Another process mints the role's next epoch and dies before its first lease.
    let role = Role::new(ROLE).unwrap();
    let intruder = w.broker().transport("intruder");
    let theirs = intruder.acquire_epoch(&role, LEASE).expect("acquire");
    drop(intruder);
    let acquires = w.broker().call_counts().acquire;
    w.advance_to(deadline);
    w.advance(LEASE - Duration::from_millis(100));
    assert!(!b.is_leader(), "b challenged a challenge under way");
    assert_eq!(
        w.broker().call_counts().acquire,
        acquires,
        "b sent no acquire while the challenge was under way"
    );
    assert_eq!(b.snapshot().status, Status::Standby);
    assert!(
        w.advance_until(LEASE, || b.is_leader()),
        "b took over once the challenger had had a lease's time"
    );
    let waited = w.now().since(deadline);
    assert!(
        waited >= LEASE && waited <= LEASE + Duration::from_millis(100),
        "elected {waited:?} after the deadline"
    );
    assert_ne!(b.token(), Some(theirs));
}

/// Issue 11, "stalled reads across roles": another role's holder dies in the middle of a write
/// to the same partition; the standby reads nothing past it (its read stalls) but does not take
/// the healthy leader's lease for expired. Once the stall ends, a real death is still noticed.
fn a_stalled_partition_does_not_depose_a_healthy_leader(flavour: Flavour) {
    use kafka_coordination::core::partition::role_partition;

    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let token = a.token().unwrap();
    let partition = role_partition(&Role::new(ROLE).unwrap(), 16).unwrap();
    w.broker()
        .stall_partition(partition, LEASE * 4)
        .expect("stall the partition");
    let stalled = || {
        w.observer()
            .read_partition(partition, 0, Duration::ZERO)
            .expect("read")
            .stalled
    };
    assert!(stalled(), "the open transaction stalls reads");
    w.advance(LEASE * 3);
    assert!(
        a.is_leader() && !b.is_leader(),
        "three leases of stalled reads deposed the healthy leader"
    );
    assert_eq!(a.token(), Some(token));
    assert!(w.leadership_status(ROLE).authoritative(&token));
    // The coordinator aborts the stalled transaction at its timeout: reads go on, and b finds
    // every renewal a wrote meanwhile.
    w.advance(LEASE * 2);
    assert!(!stalled());
    assert!(a.is_leader() && !b.is_leader());
    assert!(lease_deadline(&w) > w.now());
    // A real death is still noticed.
    a.link().cut();
    let deadline = lease_deadline(&w);
    assert!(w.advance_until(LEASE * 2, || b.is_leader()), "b took over");
    assert!(w.now() >= deadline);
}

/// A holder killed in the middle of a renewal leaves that write open, and it stalls the
/// partition: the standby reads nothing past it. The coordinator reports when the write began,
/// so at its turn the standby of that role takes it for a dead holder's at once (the acquire
/// aborts it and frees the partition), instead of watching it for half a renew interval more.
fn a_holder_killed_in_the_middle_of_a_renewal_is_replaced_at_its_turn(flavour: Flavour) {
    use kafka_coordination::core::partition::role_partition;
    use kafka_coordination::core::record::{Key, Lease, MemberId};

    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let token = a.token().unwrap();
    let role = Role::new(ROLE).unwrap();
    let partition = role_partition(&role, 16).unwrap();
    // a renews (its lease then runs until one lease after the renewal) and, half a renew
    // interval later, dies with its next lease record written and never committed. That write
    // would stay open until its timeout (a lease from when it began), past the deadline.
    w.advance(RENEW + RENEW / 2);
    a.link().cut();
    let cut = Lease {
        member: MemberId::new("a").unwrap(),
        token,
        granted_at: w.now(),
        deadline: w.now().saturating_add(LEASE),
    };
    w.broker()
        .open_transaction(
            &role,
            partition,
            &Key::lease(role.clone()).encode(),
            Some(&cut.encode()),
        )
        .expect("open the cut renewal");
    let stalled = || {
        w.observer()
            .read_partition(partition, 0, Duration::ZERO)
            .expect("read")
            .stalled
    };
    assert!(stalled(), "the cut renewal stalls the partition");
    // The deadline b can read: a's last committed lease, half a renew interval or more away.
    let deadline = lease_deadline(&w);
    assert!(deadline.since(w.now()) >= RENEW / 2, "{deadline:?}");
    w.advance_to(UnixMillis(deadline.0 - 1));
    assert!(!b.is_leader(), "b challenged before a's lease ran out");
    assert!(w.advance_until(LEASE, || b.is_leader()), "b took over");
    let late = w.now().since(deadline);
    assert!(
        late <= STEP,
        "b was elected {late:?} after the deadline: it watched the cut write for half a renew \
         interval more"
    );
    assert_ne!(b.token(), Some(token));
    assert!(!stalled(), "b's acquire aborted the cut renewal");
}

/// A lease record that names a deadline an hour away (a holder whose clock ran an hour ahead,
/// or any principal allowed to write the topic) keeps the role vacant for at most a lease plus
/// the standby's skew allowance from when the standby read it, not for an hour.
fn a_deadline_an_hour_ahead_is_trusted_only_a_lease_plus_the_skew_allowance(flavour: Flavour) {
    use kafka_coordination::core::partition::role_partition;
    use kafka_coordination::core::record::{Key, Lease, MemberId};
    use kafka_coordination::transport::{Append, Registrar};

    let skew = Duration::from_secs(2);
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join_with(ROLE, "b", w.options().max_clock_skew(skew));
    let token = a.token().unwrap();
    let role = Role::new(ROLE).unwrap();
    a.link().cut();
    let forged = Lease {
        member: MemberId::new("a").unwrap(),
        token,
        granted_at: w.now(),
        deadline: w.now().saturating_add(Duration::from_secs(3600)),
    };
    let (sent, appended) = std::sync::mpsc::channel();
    w.observer().append_all(
        vec![Append::new(
            role_partition(&role, 16).unwrap(),
            Key::lease(role.clone()).encode(),
            Some(forged.encode()),
            move |offset| sent.send(offset).unwrap(),
        )],
        0,
    );
    appended
        .recv()
        .unwrap()
        .expect("the forged lease is appended");
    w.settle();
    let read = w.now();
    assert_eq!(lease_deadline(&w), forged.deadline);
    let bound = read.saturating_add(LEASE + skew);
    w.advance_to(UnixMillis(bound.0 - 1));
    assert!(!b.is_leader(), "b challenged before the bound");
    assert!(
        w.advance_until(LEASE, || b.is_leader()),
        "b took over within a lease of the bound, not an hour later"
    );
    assert!(
        w.now().since(bound) <= STEP,
        "{:?} after the bound",
        w.now().since(bound)
    );
    assert_ne!(b.token(), Some(token));
}

/// "Ghosts": a member that dies for good (its pod comes back under another name) costs the
/// next failover one stagger, once: once a member behind it leads, it is passed over and no
/// rank counts it, so the failover after that is at rank 0 again. Nobody deletes its
/// registration (with `evict` the new leader does, as before; the timing is the same).
fn a_member_that_never_returns_costs_one_stagger_once(flavour: Flavour) {
    a_member_that_never_returns_costs_one_stagger_once_when(flavour, false);
    a_member_that_never_returns_costs_one_stagger_once_when(flavour, true);
}

fn a_member_that_never_returns_costs_one_stagger_once_when(flavour: Flavour, evict: bool) {
    let w = cluster(flavour);
    let join = |name: &str| w.join_with(ROLE, name, w.options().evict_passed_over(evict));
    let a = join("a");
    let g = join("g");
    let b = join("b");
    assert_eq!(b.rank(), Some(1));
    g.link().cut();
    a.link().cut();
    let deadline = lease_deadline(&w);
    w.advance_to(UnixMillis(deadline.0 + STAGGER.as_millis() as i64 - 1));
    assert!(!b.is_leader(), "b challenged before its rank's turn");
    assert!(w.advance_until(STAGGER, || b.is_leader()), "b took over");
    w.settle();
    if evict {
        assert_eq!(
            w.roster(ROLE),
            ["b"],
            "the new leader tombstoned the registrations it passed over"
        );
    } else {
        assert_eq!(
            w.roster(ROLE),
            ["a", "g", "b"],
            "no member deleted another's registration"
        );
    }
    let c = join("c");
    assert_eq!(c.rank(), Some(0), "no ghost ranks ahead of c");
    b.link().cut();
    let deadline = lease_deadline(&w);
    assert!(w.advance_until(LEASE * 2, || c.is_leader()), "c took over");
    assert!(
        w.now().since(deadline) < STAGGER,
        "the second failover waited {:?} past the deadline: a stagger for the ghost again",
        w.now().since(deadline)
    );
}

/// A live member that was passed over (it stalled through its turn) finds itself passed over,
/// registers again at the tail and stays a standby like any other; the dead holder stays on
/// the roster, skipped.
fn a_live_member_passed_over_registers_again_at_the_tail(flavour: Flavour) {
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let s = w.join(ROLE, "s");
    let b = w.join(ROLE, "b");
    s.link().cut();
    a.link().cut();
    assert!(w.advance_until(LEASE * 2, || b.is_leader()), "b took over");
    assert_eq!(w.roster(ROLE), ["a", "s", "b"], "nobody was deleted");
    s.link().restore();
    assert!(
        w.advance_until(LEASE * 2, || w.roster(ROLE) == ["a", "b", "s"]),
        "s registered again: {:?}",
        w.roster(ROLE)
    );
    w.settle();
    assert!(!s.is_done());
    assert_eq!(s.rank(), Some(0));
    b.link().cut();
    assert!(w.advance_until(LEASE * 2, || s.is_leader()), "s took over");
}

/// A member that campaigns again on the same transport the moment its term ends gets no
/// configuration error: the new candidacy waits for the old one's exit (here a deregistration
/// that fails and is retried after backoffs), then registers, at the tail. Two live
/// candidacies of one role on one transport stay an error.
fn campaigning_again_at_once_waits_for_the_previous_exit(flavour: Flavour) {
    use kafka_coordination::error::ErrorKind;
    use kafka_coordination::memory::BrokerOp;
    let w = cluster(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let second = w.try_join_on(a.link().clone(), ROLE, "a2", w.options());
    let Err(refused) = second else {
        panic!("a second live candidacy of the role on a's transport was accepted")
    };
    let message = refused.to_string();
    assert!(message.contains("already has a candidacy"), "{message}");
    // a is cut off, b takes over, a comes back and is fenced at its next renewal. Its exit's
    // deregistration fails three times (retried after 100, 200 and 400 ms), so the exit is
    // still under way when a campaigns again.
    a.link().cut();
    assert!(w.advance_until(LEASE * 2, || b.is_leader()), "b took over");
    w.broker()
        .fail_next_op(BrokerOp::Append, 3, ErrorKind::Retriable);
    a.link().restore();
    assert!(
        w.advance_until(LEASE, || a.error().is_some()),
        "a learnt it was fenced"
    );
    assert!(
        matches!(a.error(), Some(Error::Fenced { .. })),
        "{:?}",
        a.error()
    );
    assert!(!a.is_done(), "its exit is still under way");
    assert_eq!(
        w.roster(ROLE),
        ["a", "b"],
        "a's exit has not withdrawn its registration yet"
    );
    let again = w
        .try_join_on(a.link().clone(), ROLE, "a", w.options())
        .expect("campaigning again right after a term is no error");
    w.settle();
    assert!(
        w.advance_until(LEASE, || again.rank() == Some(0)),
        "the new candidacy is a standby behind b: {:?}",
        again.snapshot()
    );
    assert_eq!(
        w.roster(ROLE),
        ["b", "a"],
        "the old exit's deregistration came first, the new registration after it"
    );
    assert!(a.is_done() && !again.is_done());
    b.link().cut();
    assert!(
        w.advance_until(LEASE * 2, || again.is_leader()),
        "a leads again"
    );
}

macro_rules! scenarios {
    ($flavour:ident, $value:expr) => {
        mod $flavour {
            use kafka_coordination::testkit::Flavour;
            const F: Flavour = $value;
            #[test]
            fn single_member_is_elected() {
                super::single_member_is_elected(F)
            }
            #[test]
            fn a_deadline_an_hour_ahead_is_trusted_only_a_lease_plus_the_skew_allowance() {
                super::a_deadline_an_hour_ahead_is_trusted_only_a_lease_plus_the_skew_allowance(F)
            }
            #[test]
            fn campaigning_again_at_once_waits_for_the_previous_exit() {
                super::campaigning_again_at_once_waits_for_the_previous_exit(F)
            }
            #[test]
            fn a_second_live_process_with_the_same_member_id_is_detected() {
                super::a_second_live_process_with_the_same_member_id_is_detected(F)
            }
            #[test]
            fn standby_takes_over_at_deadline_plus_rank_stagger_and_old_leader_is_fenced() {
                super::standby_takes_over_at_deadline_plus_rank_stagger_and_old_leader_is_fenced(F)
            }
            #[test]
            fn resign_hands_over_without_waiting_for_the_deadline() {
                super::resign_hands_over_without_waiting_for_the_deadline(F)
            }
            #[test]
            fn a_restarted_member_lands_at_the_tail() {
                super::a_restarted_member_lands_at_the_tail(F)
            }
            #[test]
            fn cancelling_an_acquisition_leaves_no_registration() {
                super::cancelling_an_acquisition_leaves_no_registration(F)
            }
            #[test]
            fn a_failing_transport_surfaces_an_error_after_the_give_up_time() {
                super::a_failing_transport_surfaces_an_error_after_the_give_up_time(F)
            }
            #[test]
            fn dropping_a_candidacy_deregisters() {
                super::dropping_a_candidacy_deregisters(F)
            }
            #[test]
            fn a_leaders_health_follows_its_renewals() {
                super::a_leaders_health_follows_its_renewals(F)
            }
            #[test]
            fn dropping_a_leadership_resigns() {
                super::dropping_a_leadership_resigns(F)
            }
            #[test]
            fn a_resign_supersedes_the_pair_even_without_a_successor() {
                super::a_resign_supersedes_the_pair_even_without_a_successor(F)
            }
            #[test]
            fn terms_strictly_grow_across_every_kind_of_change() {
                super::terms_strictly_grow_across_every_kind_of_change(F)
            }
            #[test]
            fn a_leader_stopped_by_a_fatal_error_cleans_up() {
                super::a_leader_stopped_by_a_fatal_error_cleans_up(F)
            }
            #[test]
            fn guarded_writes_from_the_handle_land_and_a_fenced_one_ends_the_term_at_once() {
                super::guarded_writes_from_the_handle_land_and_a_fenced_one_ends_the_term_at_once(F)
            }
            #[test]
            fn offsets_commit_with_the_guarded_write_and_a_deposed_leaders_are_refused() {
                super::offsets_commit_with_the_guarded_write_and_a_deposed_leaders_are_refused(F)
            }
            #[test]
            fn one_transport_serves_many_roles_and_refuses_a_second_candidacy_for_one() {
                super::one_transport_serves_many_roles_and_refuses_a_second_candidacy_for_one(F)
            }
            #[test]
            fn a_fatal_error_with_a_dead_link_says_what_was_left_behind() {
                super::a_fatal_error_with_a_dead_link_says_what_was_left_behind(F)
            }
            #[test]
            fn a_challenge_under_way_is_not_challenged_again() {
                super::a_challenge_under_way_is_not_challenged_again(F)
            }
            #[test]
            fn a_stalled_partition_does_not_depose_a_healthy_leader() {
                super::a_stalled_partition_does_not_depose_a_healthy_leader(F)
            }
            #[test]
            fn a_holder_killed_in_the_middle_of_a_renewal_is_replaced_at_its_turn() {
                super::a_holder_killed_in_the_middle_of_a_renewal_is_replaced_at_its_turn(F)
            }
            #[test]
            fn a_member_that_never_returns_costs_one_stagger_once() {
                super::a_member_that_never_returns_costs_one_stagger_once(F)
            }
            #[test]
            fn a_live_member_passed_over_registers_again_at_the_tail() {
                super::a_live_member_passed_over_registers_again_at_the_tail(F)
            }
        }
    };
}

#[cfg(feature = "blocking")]
scenarios!(blocking, Flavour::Blocking);
#[cfg(feature = "tokio")]
scenarios!(tokio_driver, Flavour::Tokio);
#[cfg(feature = "smol")]
scenarios!(smol_driver, Flavour::Smol);
#[cfg(feature = "async-std")]
scenarios!(async_std_driver, Flavour::AsyncStd);

/// The async API itself (acquire, done, resign) under each executor.
#[cfg(async_driver)]
async fn async_round_trip<F, Fut>(w: &TestCluster, acquire: F)
where
    F: Fn(kafka_coordination::testkit::TestTransport, &'static str) -> Fut,
    Fut: std::future::Future<Output = Result<kafka_coordination::leadership::Leadership, Error>>,
{
    let transport = kafka_coordination::cuttable_link::Link::new(w.broker().transport("a"));
    let a = acquire(transport, "a").await.expect("elected");
    assert!(!a.is_done());
    // A guarded write awaited on this executor.
    let offsets = a
        .guarded_write(&[kafka_coordination::GuardedRecord {
            topic: "audit",
            partition: 3,
            key: None,
            value: Some(b"from an async task"),
            headers: &[],
        }])
        .await
        .expect("written");
    assert_eq!(offsets, [0]);
    assert_eq!(w.broker().topic_records("audit", 3).len(), 1);
    // With a group's offsets, awaited on this executor.
    let consumed = [kafka_coordination::transport::ConsumedOffset {
        topic: "input",
        partition: 1,
        next_offset: 7,
        metadata: Some("from an async task"),
    }];
    let offsets = a
        .guarded_write_with_offsets(
            &[kafka_coordination::GuardedRecord::new(
                "audit",
                3,
                None,
                Some(b"result"),
            )],
            kafka_coordination::transport::GroupOffsets {
                group: "async-group",
                offsets: &consumed,
            },
        )
        .await
        .expect("written");
    assert_eq!(offsets, [1]);
    assert_eq!(
        w.broker().committed_offsets("async-group", &[("input", 1)]),
        [Some(7)]
    );
    assert!(a.resign().await.is_ok());
    a.done().await;
    assert!(a.err().is_none());
    assert!(w.roster(ROLE).is_empty());
}

#[cfg(feature = "tokio")]
#[test]
fn tokio_async_api() {
    let w = TestCluster::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async_round_trip(&w, |t, m| {
        kafka_coordination::tokio_driver::acquire_leadership(t, ROLE, m, w.options())
    }));
}

#[cfg(feature = "smol")]
#[test]
fn smol_async_api() {
    let w = TestCluster::new();
    smol::block_on(async_round_trip(&w, |t, m| {
        kafka_coordination::smol_driver::acquire_leadership(t, ROLE, m, w.options())
    }));
}

#[cfg(feature = "async-std")]
#[test]
fn async_std_async_api() {
    let w = TestCluster::new();
    async_std::task::block_on(async_round_trip(&w, |t, m| {
        kafka_coordination::async_std_driver::acquire_leadership(t, ROLE, m, w.options())
    }));
}

/// Dropping the future of an acquisition that is still waiting withdraws the registration.
#[cfg(feature = "tokio")]
#[test]
fn dropping_the_acquire_future_deregisters() {
    let w = TestCluster::new().flavour(Flavour::Tokio);
    let _a = w.join(ROLE, "a");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fut = kafka_coordination::tokio_driver::acquire_leadership(
            kafka_coordination::cuttable_link::Link::new(w.broker().transport("b")),
            ROLE,
            "b",
            w.options(),
        );
        let mut fut = Box::pin(fut);
        // The first poll starts the driver; b registers and stands by.
        assert!(futures_lite::future::poll_once(&mut fut).await.is_none());
        let clock = w.clock().clone();
        tokio::task::spawn_blocking(move || clock.settle())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(w.roster(ROLE), ["a", "b"]);
        drop(fut);
    });
    w.settle();
    assert_eq!(w.roster(ROLE), ["a"]);
}

#[test]
fn invalid_options_and_names_are_refused_at_once() {
    let w = TestCluster::new();
    let bad_renew = w.options().renew_interval(LEASE);
    match w.try_join_with(ROLE, "x", bad_renew) {
        Err(Error::InvalidOptions(e)) => assert!(e.to_string().contains("renew_interval"), "{e}"),
        other => panic!("expected InvalidOptions, got {other:?}"),
    }
    // The partition count comes from the transport: a topic without partitions is refused.
    let no_partitions = TestCluster::with_partitions(0);
    match no_partitions.try_join_with(ROLE, "x", no_partitions.options()) {
        Err(Error::InvalidOptions(e)) => assert!(e.to_string().contains("partitions"), "{e}"),
        other => panic!("expected InvalidOptions, got {other:?}"),
    }
    match w.try_join_with("", "x", w.options()) {
        Err(Error::InvalidName(e)) => assert!(e.to_string().contains("role"), "{e}"),
        other => panic!("expected InvalidName, got {other:?}"),
    }
    assert!(w.clock().live_drivers() == 0, "no driver was started");
    assert!(w.roster(ROLE).is_empty(), "nothing was registered");
}

/// Settling is exact: right after a member joins, every other driver has already acted on its
/// registration (no sleep, no polling), however loaded the machine is.
#[test]
fn settle_is_exact_after_every_join() {
    for flavour in Flavour::all() {
        let w = cluster(flavour);
        let mut members = Vec::new();
        for i in 0..6 {
            members.push(w.join(ROLE, &format!("m{i}")));
            for (rank, standby) in members.iter().skip(1).enumerate() {
                assert_eq!(
                    standby.rank(),
                    Some(rank),
                    "{flavour:?} after {} joins",
                    i + 1
                );
            }
        }
    }
}

/// Odd but valid input does not panic: a role name with a NUL (the blocking driver names its
/// thread after the role), and waits of `Duration::MAX`.
#[test]
fn odd_names_and_endless_timeouts_do_not_panic() {
    let w = TestCluster::new();
    let a = w.join("nul\0role", "a");
    assert!(a.is_leader());
    let l = a.take_leadership().expect("leads");
    // An endless wait for a term that is over returns at once.
    assert!(l.resign_blocking().is_ok());
    assert!(l.done_blocking_timeout(Duration::MAX));
    #[cfg(feature = "blocking")]
    {
        let c =
            kafka_coordination::blocking::start(w.broker().transport("c"), ROLE, "c", w.options())
                .expect("start");
        w.settle();
        match c.elected_blocking_timeout(Duration::MAX) {
            Ok(Ok(l)) => assert!(!l.is_done()),
            other => panic!(
                "expected an election, got {:?}",
                other.map(|r| r.map(|l| l.token()))
            ),
        }
    }
}

/// Each error's `Display` says what happened once; the cause is `source()`, so printing the
/// chain (anyhow's `{:#}`) repeats nothing.
#[test]
fn errors_say_things_once_and_chain_their_causes() {
    use std::error::Error as _;
    fn chain(e: &dyn std::error::Error) -> Vec<String> {
        let mut out = vec![e.to_string()];
        let mut next = e.source();
        while let Some(s) = next {
            out.push(s.to_string());
            next = s.source();
        }
        out
    }
    let w = TestCluster::new();
    let e = w.try_join_with("", "x", w.options()).unwrap_err();
    let parts = chain(&e);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert!(parts[0].contains("role"), "{parts:?}");
    // A candidacy that gives up: the last transport error is the source, not repeated. A
    // leader is there first, and c's link is cut before its driver starts: deterministic.
    let _a = w.join(ROLE, "a");
    let link = kafka_coordination::cuttable_link::Link::new(w.broker().transport("c"));
    link.cut();
    let c = w.try_join_on(link, ROLE, "c", w.options()).expect("starts");
    assert!(w.advance_until(LEASE * 4, || c.is_done()));
    let e = c.error().expect("an error");
    assert!(matches!(e, Error::Unavailable { .. }), "{e}");
    let parts = chain(&e);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert!(parts[1].contains("link to the broker is cut"), "{parts:?}");
    assert!(!parts[0].contains("link to the broker is cut"), "{parts:?}");
    assert!(e.source().is_some());
}
