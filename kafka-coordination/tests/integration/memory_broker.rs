//! The MemoryBroker's model of Kafka: epochs, fencing, read_committed, LSO, compaction, faults.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::leadership_status::{LeadershipStatus, TransactionState};
use kafka_coordination::core::record::{Key, Lease, MemberId, Registration, Role};
use kafka_coordination::core::state::RoleState;
use kafka_coordination::core::time::UnixMillis;
use kafka_coordination::core::token::FencingToken;
use kafka_coordination::error::ErrorKind;
use kafka_coordination::memory::{
    BrokerOp, MemoryBroker, MemoryTransport, EXHAUSTED_EPOCH, FIRST_PRODUCER_ID,
};
use kafka_coordination::transport::Record;
use kafka_coordination::transport::Wait;
use kafka_coordination::{Clock, ManualClock};

const TIMEOUT: Duration = Duration::from_secs(10);

fn role(name: &str) -> Role {
    Role::new(name).unwrap()
}

fn member(name: &str) -> MemberId {
    MemberId::new(name).unwrap()
}

fn setup() -> (MemoryBroker, ManualClock) {
    let clock = ManualClock::new(UnixMillis(1_000_000));
    (MemoryBroker::new(4, Arc::new(clock.clone())), clock)
}

fn register(t: &MemoryTransport, partition: i32, role: &Role, name: &str, at: i64) -> i64 {
    let key = Key::registration(role.clone(), member(name)).encode();
    let value = Registration {
        member: member(name),
        registered_at: UnixMillis(at),
    }
    .encode();
    t.append(partition, &key, Some(&value)).unwrap()
}

fn lease_value(name: &str, token: FencingToken, deadline: i64) -> Vec<u8> {
    Lease {
        member: member(name),
        token,
        granted_at: UnixMillis(0),
        deadline: UnixMillis(deadline),
    }
    .encode()
}

fn read_all(t: &MemoryTransport, partition: i32) -> Vec<Record> {
    t.read_partition(partition, 0, Duration::ZERO)
        .unwrap()
        .records
}

fn offsets(records: &[Record]) -> Vec<i64> {
    records.iter().map(|r| r.offset).collect()
}

#[test]
fn broker_and_transport_are_send_and_sync() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<MemoryBroker>();
    check::<MemoryTransport>();
}

#[test]
fn epoch_grows_by_one_per_acquire_and_describe_follows() {
    let (broker, _) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    assert_eq!(a.describe_epoch(&r).unwrap(), LeadershipStatus::NOT_FOUND);
    assert_eq!(broker.epoch_of(&r), None);

    let t0 = a.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(t0, FencingToken::new(FIRST_PRODUCER_ID, 0));
    assert_eq!(
        a.describe_epoch(&r).unwrap(),
        LeadershipStatus::described(t0.producer_id, 0, TransactionState::Empty)
    );
    for epoch in 1..=5 {
        let t = a.acquire_epoch(&r, TIMEOUT).unwrap();
        assert_eq!(t, FencingToken::new(t0.producer_id, epoch));
        assert_eq!(broker.epoch_of(&r), Some(t));
        assert_eq!(a.session(&r), Some(t));
    }
    let t = broker.epoch_of(&r).unwrap();
    a.write_lease(0, b"k", Some(b"v"), t).unwrap();
    let status = a.describe_epoch(&r).unwrap();
    assert_eq!(status.state, Some(TransactionState::CompleteCommit));
    assert!(status.authoritative(&t));

    // Another role gets another producer id.
    let other = a.acquire_epoch(&role("billing"), TIMEOUT).unwrap();
    assert_ne!(other.producer_id, t0.producer_id);
    assert_eq!(other.producer_epoch, 0);
}

#[test]
fn takeover_of_an_open_transaction_skips_an_epoch_and_hides_its_record() {
    let (broker, _) = setup();
    let r = role("orders");
    let (a, b) = (broker.transport("a"), broker.transport("b"));
    register(&a, 0, &r, "a", 1);
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    let open = a
        .begin_lease_write_and_crash(
            0,
            &Key::lease(r.clone()).encode(),
            Some(&lease_value("a", ta, 9)),
            ta,
        )
        .unwrap();
    assert_eq!(open, 1);
    assert_eq!(a.session(&r), None, "the crashed holder's session is gone");
    assert_eq!(
        a.describe_epoch(&r).unwrap().state,
        Some(TransactionState::Ongoing)
    );
    let reg_b = register(&b, 0, &r, "b", 2);
    assert_eq!(reg_b, 2);
    // The open transaction holds back the LSO: b's registration is not readable yet.
    let batch = b.read_partition(0, 0, Duration::ZERO).unwrap();
    assert_eq!(offsets(&batch.records), [0]);
    assert_eq!(batch.end_offset, 1);
    assert_eq!(broker.last_stable_offset(0).unwrap(), 1);

    let tb = b.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(
        tb,
        FencingToken::new(ta.producer_id, ta.producer_epoch + 2),
        "an epoch skipped"
    );
    assert_eq!(
        b.describe_epoch(&r).unwrap().state,
        Some(TransactionState::Empty)
    );
    // Aborted: the lease record stays invisible; the abort marker takes offset 3.
    let batch = b.read_partition(0, 0, Duration::ZERO).unwrap();
    assert_eq!(offsets(&batch.records), [0, 2]);
    assert_eq!(batch.end_offset, 4);
    assert_eq!(broker.log_end_offset(0).unwrap(), 4);
    assert!(broker.accepted_lease_writes().is_empty());
}

#[test]
fn an_open_transaction_is_described_with_the_instant_it_began() {
    let (broker, clock) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(a.describe_epoch(&r).unwrap().transaction_started, None);
    clock.advance(Duration::from_millis(250));
    let began = clock.now();
    a.begin_lease_write(1, b"lease", Some(b"a"), ta).unwrap();
    clock.advance(Duration::from_millis(700));
    // Later writes of the same transaction do not move its start.
    a.begin_lease_write(1, b"lease", Some(b"a2"), ta).unwrap();
    let open = a.describe_epoch(&r).unwrap();
    assert_eq!(open.state, Some(TransactionState::Ongoing));
    assert_eq!(open.transaction_started, Some(began));
    a.commit_lease_write(ta).unwrap();
    let done = a.describe_epoch(&r).unwrap();
    assert_eq!(done.state, Some(TransactionState::CompleteCommit));
    assert_eq!(done.transaction_started, None);
}

#[test]
fn a_paused_writer_is_fenced_at_commit_after_a_takeover() {
    let (broker, _) = setup();
    let r = role("orders");
    let (a, b) = (broker.transport("a"), broker.transport("b"));
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    let offset = a.begin_lease_write(1, b"lease", Some(b"a"), ta).unwrap();
    assert!(read_all(&a, 1).is_empty());
    a.commit_lease_write(ta).unwrap();
    assert_eq!(offsets(&read_all(&a, 1)), [offset]);
    assert_eq!(
        a.describe_epoch(&r).unwrap().state,
        Some(TransactionState::CompleteCommit)
    );

    a.begin_lease_write(1, b"lease", Some(b"a2"), ta).unwrap();
    let tb = b.acquire_epoch(&r, TIMEOUT).unwrap();
    let err = a.commit_lease_write(ta).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced);
    assert!(err.message().contains(&ta.to_string()) && err.message().contains(&tb.to_string()));
    assert_eq!(
        offsets(&read_all(&b, 1)),
        [offset],
        "the second write was aborted"
    );
    let audit = broker.accepted_lease_writes();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].offset, audit[0].token, audit[0].current),
        (offset, ta, ta)
    );
    assert_eq!(audit[0].member, "a");
}

#[test]
fn exhaustion_gives_a_fresh_producer_id_with_epoch_zero() {
    let (broker, _) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    let t0 = a.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(
        broker.force_epoch(&r, EXHAUSTED_EPOCH - 1),
        FencingToken::new(t0.producer_id, 32765)
    );
    let t = a.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(t, FencingToken::new(t0.producer_id, 32766));
    let fresh = a.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(fresh.producer_epoch, 0);
    assert!(fresh.producer_id > t0.producer_id);
    assert_eq!(
        fresh.spec_compare(&t),
        std::cmp::Ordering::Greater,
        "the spec's Compare reads the producer id first"
    );
    // The old pair is fenced; the fresh one writes.
    assert!(a
        .write_lease(0, b"k", Some(b"v"), t)
        .unwrap_err()
        .is_fenced());
    a.write_lease(0, b"k", Some(b"v"), fresh).unwrap();

    // A takeover of an open transaction at the exhausted epoch: fence bump, then fresh id.
    let t = a.acquire_epoch(&r, TIMEOUT).unwrap();
    broker.force_epoch(&r, EXHAUSTED_EPOCH);
    let t = FencingToken::new(t.producer_id, EXHAUSTED_EPOCH);
    assert_eq!(broker.epoch_of(&r), Some(t));
    broker.open_transaction(&r, 0, b"k", Some(b"x")).unwrap();
    let b = broker.transport("b");
    let next = b.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(next.producer_epoch, 0);
    assert_ne!(next.producer_id, t.producer_id);
}

#[test]
fn smaller_producer_id_knob() {
    let (broker, _) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    let t0 = a.acquire_epoch(&r, TIMEOUT).unwrap();
    let next = broker.next_producer_id_smaller();
    assert!(next < t0.producer_id);
    broker.force_epoch(&r, EXHAUSTED_EPOCH);
    let fresh = a.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(fresh, FencingToken::new(next, 0));
    assert_eq!(
        fresh.spec_compare(&t0),
        std::cmp::Ordering::Less,
        "across a producer-id change the newer pair compares less: no order to fence by"
    );
    // Equality still decides: the fresh pair is the authoritative one.
    let status = a.describe_epoch(&r).unwrap();
    assert!(status.authoritative(&fresh));
    assert!(!status.authoritative(&t0));

    broker.set_next_producer_id(7);
    assert_eq!(
        a.acquire_epoch(&role("billing"), TIMEOUT).unwrap(),
        FencingToken::new(7, 0)
    );
    broker.set_next_producer_id(7);
    assert_eq!(
        a.acquire_epoch(&role("shipping"), TIMEOUT).unwrap(),
        FencingToken::new(8, 0),
        "ids are never reused"
    );
}

#[test]
fn a_stale_pair_is_fenced_and_the_message_names_both_pairs() {
    let (broker, _) = setup();
    let r = role("orders");
    let (a, b) = (broker.transport("a"), broker.transport("b"));
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    a.write_lease(2, b"k", Some(b"a"), ta).unwrap();
    let tb = b.acquire_epoch(&r, TIMEOUT).unwrap();
    let err = a.write_lease(2, b"k", Some(b"a"), ta).unwrap_err();
    assert!(err.is_fenced());
    assert!(err.message().contains(&ta.to_string()), "{err}");
    assert!(err.message().contains(&tb.to_string()), "{err}");
    // A token that is not the session's own pair is fenced too.
    let err = a.write_lease(2, b"k", Some(b"a"), tb).unwrap_err();
    assert!(err.is_fenced(), "{err}");
    // A member without a session cannot write: fenced, as Kafka refuses a producer that
    // holds no epoch.
    let c = broker.transport("c");
    assert_eq!(
        c.write_lease(2, b"k", Some(b"c"), tb).unwrap_err().kind(),
        ErrorKind::Fenced
    );
    b.write_lease(2, b"k", Some(b"b"), tb).unwrap();
    let values: Vec<_> = read_all(&b, 2).into_iter().map(|r| r.value).collect();
    assert_eq!(values, [Some(b"a".to_vec()), Some(b"b".to_vec())]);
    // The audit log: every accepted write carried the then-current pair.
    let audit = broker.accepted_lease_writes();
    assert_eq!(audit.len(), 2);
    assert!(audit.iter().all(|w| w.token == w.current));
    assert_eq!(audit.iter().map(|w| w.token).collect::<Vec<_>>(), [ta, tb]);
    assert_eq!(audit[1].role, r);
    assert_eq!(audit[1].partition, 2);

    // A crashed member acquires again and leads again with a new pair.
    b.crash();
    assert_eq!(
        b.write_lease(2, b"k", None, tb).unwrap_err().kind(),
        ErrorKind::Fenced
    );
    let tb2 = b.acquire_epoch(&r, TIMEOUT).unwrap();
    b.write_lease(2, b"k", None, tb2).unwrap();
    assert_eq!(
        read_all(&b, 2).last().unwrap().value,
        None,
        "tombstones are returned"
    );
}

#[test]
fn lso_is_released_when_the_transaction_times_out() {
    let (broker, clock) = setup();
    let r = role("orders");
    let (a, b) = (broker.transport("a"), broker.transport("b"));
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    a.begin_lease_write_and_crash(0, b"lease", Some(b"a"), ta)
        .unwrap();
    let reg = register(&b, 0, &r, "b", 5);
    assert!(read_all(&b, 0).is_empty());

    clock.advance(TIMEOUT);
    assert!(
        read_all(&b, 0).is_empty(),
        "open exactly as long as the timeout: not expired yet"
    );
    assert_eq!(broker.epoch_of(&r), Some(ta));
    clock.advance(Duration::from_millis(1));
    let batch = b.read_partition(0, 0, Duration::ZERO).unwrap();
    assert_eq!(offsets(&batch.records), [reg]);
    assert_eq!(batch.end_offset, 3, "record, registration, abort marker");
    let status = b.describe_epoch(&r).unwrap();
    let bumped = FencingToken::new(ta.producer_id, ta.producer_epoch + 1);
    assert_eq!(
        status,
        LeadershipStatus::described(
            bumped.producer_id,
            bumped.producer_epoch,
            TransactionState::CompleteAbort
        )
    );
    let tb = b.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(tb.producer_epoch, ta.producer_epoch + 2);
}

#[test]
fn timeout_of_a_paused_writer_fences_its_commit() {
    let (broker, clock) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    let ta = a.acquire_epoch(&r, Duration::from_secs(1)).unwrap();
    a.begin_lease_write(0, b"lease", Some(b"a"), ta).unwrap();
    clock.advance(Duration::from_millis(1001));
    broker.expire_transactions();
    assert_eq!(broker.last_stable_offset(0).unwrap(), 2);
    assert!(a.commit_lease_write(ta).unwrap_err().is_fenced());
    assert!(broker.committed_records(0).unwrap().is_empty());
}

#[test]
fn transaction_timeout_is_validated() {
    let (broker, _) = setup();
    let a = broker.transport("a");
    let r = role("orders");
    let err = a.acquire_epoch(&r, Duration::from_secs(901)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(
        err.message().contains("901000") && err.message().contains("900000"),
        "{err}"
    );
    assert_eq!(
        a.acquire_epoch(&r, Duration::ZERO).unwrap_err().kind(),
        ErrorKind::Config
    );
    broker.set_max_transaction_timeout(Duration::from_secs(3600));
    a.acquire_epoch(&r, Duration::from_secs(901)).unwrap();
}

/// A role's life on one partition: registrations, leases, renewals, a resign, re-registration.
fn busy_partition(broker: &MemoryBroker) -> Role {
    let r = role("orders");
    let (a, b, c) = (
        broker.transport("a"),
        broker.transport("b"),
        broker.transport("c"),
    );
    let other = role("billing");
    register(&a, 0, &r, "a", 1);
    register(&b, 0, &r, "b", 2);
    register(&c, 0, &other, "c", 3);
    register(&c, 0, &r, "c", 3);
    register(&c, 0, &r, "e", 4); // deregisters for good below
    let lease = Key::lease(r.clone()).encode();
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    for deadline in [10, 20, 30] {
        a.write_lease(0, &lease, Some(&lease_value("a", ta, deadline)), ta)
            .unwrap();
    }
    a.write_lease(0, &lease, None, ta).unwrap(); // resign
    register(&a, 0, &r, "a", 40); // back at the tail
    b.append(0, &Key::registration(r.clone(), member("b")).encode(), None)
        .unwrap();
    c.append(0, &Key::registration(r.clone(), member("e")).encode(), None)
        .unwrap();
    let tc = c.acquire_epoch(&r, TIMEOUT).unwrap();
    c.write_lease(0, &lease, Some(&lease_value("c", tc, 50)), tc)
        .unwrap();
    c.write_lease(0, &lease, Some(&lease_value("c", tc, 60)), tc)
        .unwrap();
    // A crashed writer's transaction is aborted by the next acquire.
    let tc = c.acquire_epoch(&r, TIMEOUT).unwrap();
    c.begin_lease_write_and_crash(0, &lease, Some(&lease_value("c", tc, 70)), tc)
        .unwrap();
    broker.transport("d").acquire_epoch(&r, TIMEOUT).unwrap();
    register(&b, 0, &r, "b", 80);
    r
}

fn role_state(r: &Role, t: &MemoryTransport) -> RoleState {
    let batch = t.read_partition(0, 0, Duration::ZERO).unwrap();
    let mut state = RoleState::build(r.clone(), &batch.records);
    state.advance_to(batch.end_offset);
    state
}

#[test]
fn compaction_keeps_offsets_and_tombstones_and_the_role_state() {
    let (broker, _) = setup();
    let r = busy_partition(&broker);
    let reader = broker.transport("reader");
    let before = read_all(&reader, 0);
    let state = role_state(&r, &reader);
    assert_eq!(state.lease().unwrap().lease.member, member("c"));
    let roster: Vec<_> = state.roster().map(|(m, _)| m.as_str().to_owned()).collect();
    assert_eq!(roster, ["c", "a", "b"]);

    let end = broker.log_end_offset(0).unwrap();
    let removed = broker.compact(0).unwrap();
    assert!(removed > 0);
    let after = read_all(&reader, 0);
    assert!(after.len() < before.len());
    assert!(
        after.iter().all(|r| before.contains(r)),
        "offsets and contents unchanged"
    );
    assert!(
        after.iter().any(|r| r.value.is_none()),
        "tombstones are kept"
    );
    assert_eq!(role_state(&r, &reader), state);
    assert_eq!(broker.log_end_offset(0).unwrap(), end);
    // Latest per key: no key appears twice.
    let mut keys: Vec<_> = after.iter().map(|r| r.key.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), after.len());

    assert_eq!(broker.compact(0).unwrap(), 0, "compaction is idempotent");
    broker.compact_with(0, Some(end)).unwrap();
    let dropped = read_all(&reader, 0);
    assert!(
        dropped.iter().all(|r| r.value.is_some()),
        "old tombstones dropped"
    );
    assert_eq!(role_state(&r, &reader), state);
    assert_eq!(
        reader
            .read_partition(0, 0, Duration::ZERO)
            .unwrap()
            .end_offset,
        end
    );
}

#[test]
fn compaction_stops_at_the_lso() {
    let (broker, _) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    a.append(3, b"k", Some(b"1")).unwrap();
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    a.begin_lease_write(3, b"k", Some(b"2"), ta).unwrap();
    a.append(3, b"k", Some(b"3")).unwrap();
    a.append(3, b"k", Some(b"4")).unwrap();
    assert_eq!(
        broker.compact(3).unwrap(),
        0,
        "nothing below the LSO is superseded"
    );
    a.commit_lease_write(ta).unwrap();
    assert_eq!(
        broker.compact(3).unwrap(),
        4,
        "0, 1, 2 superseded; the marker dropped"
    );
    assert_eq!(offsets(&read_all(&a, 3)), [3]);
    assert_eq!(broker.compact(7).unwrap_err().kind(), ErrorKind::Config);
}

#[test]
fn reads_follow_offsets_and_refuse_offsets_past_the_end() {
    let (broker, _) = setup();
    let a = broker.transport("a");
    for i in 0..5u8 {
        a.append(1, &[i], Some(&[i])).unwrap();
    }
    let batch = a.read_partition(1, 3, Duration::ZERO).unwrap();
    assert_eq!(offsets(&batch.records), [3, 4]);
    assert_eq!(batch.end_offset, 5);
    assert_eq!(
        a.read_partition(1, -1, Duration::ZERO)
            .unwrap()
            .records
            .len(),
        5
    );
    let batch = a.read_partition(1, 5, Duration::ZERO).unwrap();
    assert!(batch.records.is_empty());
    assert_eq!(batch.end_offset, 5);
    assert_eq!(
        a.read_partition(1, 6, Duration::ZERO).unwrap_err().kind(),
        ErrorKind::Fatal
    );
    assert!(read_all(&a, 2).is_empty(), "partitions are independent");
}

#[test]
fn partition_out_of_range_is_a_config_error_naming_it() {
    let (broker, _) = setup();
    let a = broker.transport("a");
    let r = role("orders");
    let t = a.acquire_epoch(&r, TIMEOUT).unwrap();
    for err in [
        a.append(4, b"k", None).unwrap_err(),
        a.read_partition(-1, 0, Duration::ZERO).unwrap_err(),
        a.write_lease(9, b"k", None, t).unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.message().contains("has 4 partitions"), "{err}");
    }
    assert!(a
        .append(4, b"k", None)
        .unwrap_err()
        .message()
        .contains("partition 4"));
    let empty = MemoryBroker::new(0, Arc::new(ManualClock::default()));
    assert_eq!(
        empty
            .transport("x")
            .append(0, b"k", None)
            .unwrap_err()
            .kind(),
        ErrorKind::Config
    );
}

#[test]
fn injected_failures_have_no_effect() {
    let (broker, _) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    broker.fail_next(2, ErrorKind::Retriable);
    assert!(a.acquire_epoch(&r, TIMEOUT).unwrap_err().is_retriable());
    assert!(a.append(0, b"k", None).unwrap_err().is_retriable());
    assert_eq!(
        broker.epoch_of(&r),
        None,
        "the failed acquire minted nothing"
    );
    assert_eq!(broker.log_end_offset(0).unwrap(), 0);
    let t = a.acquire_epoch(&r, TIMEOUT).unwrap();

    broker.fail_next_op(BrokerOp::Read, 1, ErrorKind::Fatal);
    broker.fail_next_op(BrokerOp::WriteLease, 1, ErrorKind::Fenced);
    a.append(0, b"k", None).unwrap();
    a.describe_epoch(&r).unwrap();
    assert_eq!(
        a.read_partition(0, 0, Duration::ZERO).unwrap_err().kind(),
        ErrorKind::Fatal
    );
    assert!(a
        .write_lease(0, b"l", Some(b"v"), t)
        .unwrap_err()
        .is_fenced());
    a.write_lease(0, b"l", Some(b"v"), t).unwrap();
    assert_eq!(broker.accepted_lease_writes().len(), 1);

    broker.fail_next(5, ErrorKind::Unauthorized);
    broker.clear_faults();
    a.describe_epoch(&r).unwrap();
}

#[test]
fn lost_replies_take_effect() {
    let (broker, _) = setup();
    let r = role("orders");
    let (a, b) = (broker.transport("a"), broker.transport("b"));
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    broker.lose_next_reply_op(BrokerOp::Acquire, 1);
    assert!(b.acquire_epoch(&r, TIMEOUT).unwrap_err().is_retriable());
    assert_eq!(b.session(&r), None, "the caller never learned the pair");
    assert_eq!(
        broker.epoch_of(&r).unwrap().producer_epoch,
        ta.producer_epoch + 1
    );
    assert!(
        a.write_lease(0, b"l", Some(b"a"), ta)
            .unwrap_err()
            .is_fenced(),
        "a was fenced"
    );
    let tb = b.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(tb.producer_epoch, ta.producer_epoch + 2);

    broker.lose_next_reply(2);
    assert!(b
        .write_lease(0, b"l", Some(b"b"), tb)
        .unwrap_err()
        .is_retriable());
    assert!(b.append(0, b"r", Some(b"b")).unwrap_err().is_retriable());
    assert_eq!(offsets(&read_all(&b, 0)), [0, 2], "both took effect");
    assert_eq!(broker.accepted_lease_writes().len(), 1);
}

#[test]
fn unavailable_partitions_fail_retriably() {
    let (broker, _) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    let t = a.acquire_epoch(&r, TIMEOUT).unwrap();
    broker.set_partition_unavailable(1, true);
    assert!(a.append(1, b"k", None).unwrap_err().is_retriable());
    assert!(a
        .read_partition(1, 0, Duration::from_secs(5))
        .unwrap_err()
        .is_retriable());
    assert!(a.write_lease(1, b"k", None, t).unwrap_err().is_retriable());
    a.append(0, b"k", None).unwrap();
    a.describe_epoch(&r).unwrap();
    broker.set_partition_unavailable(1, false);
    a.write_lease(1, b"k", None, t).unwrap();
    assert_eq!(broker.log_end_offset(1).unwrap(), 2);
}

#[test]
fn calls_are_counted_and_hooked_and_delayed() {
    let (broker, _) = setup();
    let r = role("orders");
    let a = broker.transport("a");
    let seen = Arc::new(AtomicUsize::new(0));
    let hook_seen = Arc::clone(&seen);
    let hook_broker = broker.clone();
    broker.on_call(move |op| {
        // The hook may use the broker (no lock is held).
        let _ = hook_broker.call_counts();
        if op == BrokerOp::Acquire {
            hook_seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    broker.fail_next_op(BrokerOp::Acquire, 1, ErrorKind::Retriable);
    let _ = a.acquire_epoch(&r, TIMEOUT);
    let t = a.acquire_epoch(&r, TIMEOUT).unwrap();
    a.describe_epoch(&r).unwrap();
    a.append(0, b"k", None).unwrap();
    read_all(&a, 0);
    broker.delay_next_op(BrokerOp::WriteLease, 1, Duration::from_millis(1));
    a.write_lease(0, b"k", None, t).unwrap();
    let counts = broker.call_counts();
    assert_eq!(
        (
            counts.acquire,
            counts.describe,
            counts.read,
            counts.append,
            counts.write_lease
        ),
        (2, 1, 1, 1, 1)
    );
    assert_eq!(counts.total(), 6);
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    broker.clear_call_hook();
    a.acquire_epoch(&r, TIMEOUT).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

#[test]
fn concurrent_acquires_leave_exactly_one_current_pair() {
    let (broker, _) = setup();
    let r = role("orders");
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let t = broker.transport(format!("m{i}"));
            let r = r.clone();
            thread::spawn(move || {
                let token = t.acquire_epoch(&r, TIMEOUT).unwrap();
                (t, token)
            })
        })
        .collect();
    let members: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut epochs: Vec<_> = members.iter().map(|(_, t)| t.producer_epoch).collect();
    epochs.sort();
    assert_eq!(epochs, (0..8).collect::<Vec<_>>());
    let accepted = members
        .iter()
        .filter(|(t, token)| t.write_lease(0, b"l", Some(b"v"), *token).is_ok())
        .count();
    assert_eq!(accepted, 1);
}

#[test]
fn zero_max_wait_answers_at_once() {
    let (broker, _) = setup();
    let a = broker.transport("a");
    let batch = a.read_partition(0, 0, Duration::ZERO).unwrap();
    assert_eq!(
        batch,
        kafka_coordination::transport::ReadBatch {
            records: vec![],
            end_offset: 0,
            stalled: false,
            high_watermark: Some(0),
        }
    );
}

#[test]
fn long_poll_returns_early_when_a_record_is_appended() {
    // The only test that uses real time; it never waits for the timeout to elapse.
    let broker = MemoryBroker::new(2, Arc::new(kafka_coordination::SystemClock));
    let (reader, writer) = (broker.transport("reader"), broker.transport("writer"));
    writer.append(0, b"old", Some(b"1")).unwrap();
    let max_wait = Duration::from_secs(5);
    let appender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        writer.append(1, b"elsewhere", Some(b"x")).unwrap(); // another partition: no wake-up
        writer.append(0, b"new", Some(b"2")).unwrap()
    });
    let started = Instant::now();
    let batch = reader.read_partition(0, 1, max_wait).unwrap();
    let elapsed = started.elapsed();
    let offset = appender.join().unwrap();
    assert_eq!(offsets(&batch.records), [offset]);
    assert_eq!(batch.end_offset, 2);
    assert!(
        elapsed < Duration::from_secs(4),
        "answered after {elapsed:?}"
    );
}

#[test]
fn long_poll_answers_when_the_manual_clock_moves_and_sees_the_timeout_abort() {
    let (broker, clock) = setup();
    let r = role("orders");
    let (a, b) = (broker.transport("a"), broker.transport("b"));
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    let open = a
        .begin_lease_write_and_crash(0, b"lease", Some(b"a"), ta)
        .unwrap();
    let reg = register(&b, 0, &r, "b", 1);
    let mover = {
        let clock = clock.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            clock.advance(TIMEOUT + Duration::from_millis(1));
        })
    };
    let started = Instant::now();
    let batch = b.read_partition(0, open, Duration::from_secs(5)).unwrap();
    let elapsed = started.elapsed();
    mover.join().unwrap();
    assert_eq!(
        offsets(&batch.records),
        [reg],
        "the move timed the transaction out"
    );
    assert!(
        elapsed < Duration::from_secs(4),
        "answered after {elapsed:?}"
    );
    assert!(clock.now() > UnixMillis(1_000_000));
}

#[test]
fn long_poll_keeps_waiting_while_new_records_sit_behind_an_open_transaction() {
    let (broker, _) = setup();
    let r = role("orders");
    let (a, b, c) = (
        broker.transport("a"),
        broker.transport("b"),
        broker.transport("c"),
    );
    let ta = a.acquire_epoch(&r, TIMEOUT).unwrap();
    let open = a
        .begin_lease_write_and_crash(0, b"lease", Some(b"a"), ta)
        .unwrap();
    let helper = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        // Wakes the reader, but the record is behind the open transaction: it waits on.
        let reg = register(&b, 0, &r, "b", 1);
        thread::sleep(Duration::from_millis(20));
        // The takeover aborts the transaction: the registration becomes readable.
        c.acquire_epoch(&r, TIMEOUT).unwrap();
        reg
    });
    let started = Instant::now();
    let batch = broker
        .transport("reader")
        .read_partition(0, open, Duration::from_secs(5))
        .unwrap();
    let elapsed = started.elapsed();
    let reg = helper.join().unwrap();
    assert_eq!(offsets(&batch.records), [reg]);
    assert_eq!(batch.end_offset, 3);
    assert!(
        elapsed < Duration::from_secs(4),
        "answered after {elapsed:?}"
    );
}

#[test]
fn a_stalled_partition_hides_later_records_until_the_stalling_write_times_out() {
    use kafka_coordination::core::partition::role_partition;
    let (broker, clock) = setup();
    for bad in [-1, 4] {
        let err = broker.stall_partition(bad, TIMEOUT).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(
            err.to_string().contains(&format!("partition {bad}")),
            "{err}"
        );
    }
    let other = broker.stall_partition(2, TIMEOUT).unwrap();
    assert_eq!(role_partition(&other, 4).unwrap(), 2);
    let t = broker.transport("a");
    let reg = register(&t, 2, &role("orders"), "a", 1);
    let read = || t.read_partition(2, 0, Duration::ZERO).unwrap();
    let stalled = read();
    assert!(stalled.stalled, "the open write stalls the partition");
    assert!(stalled.records.is_empty(), "nothing past it is readable");
    assert_eq!(
        (stalled.end_offset, stalled.high_watermark),
        (0, Some(reg + 1)),
        "the read stops at the open write; the high watermark is past the registration"
    );
    clock.advance(TIMEOUT - Duration::from_millis(1));
    assert!(
        read().stalled,
        "still open a millisecond before its timeout"
    );
    clock.advance(Duration::from_millis(2));
    let batch = read();
    assert!(!batch.stalled, "aborted once open longer than its timeout");
    assert_eq!(
        offsets(&batch.records),
        [reg],
        "the aborted write stays unreadable"
    );
}
