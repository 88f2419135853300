//! The Kafka transport against a real Apache Kafka broker (KRaft).
//!
//! Start one with `scripts/kafka/start.sh` and export the address it prints, or run
//! `scripts/kafka/with-broker.sh cargo test -p kafka-coordination-kafka --test brokers transport::`.
//! Without `KAFKA_BOOTSTRAP` every test says so loudly and returns.

use kafka_coordination_test_support as support;
use kafka_coordination_test_support::proxy;
use kafka_coordination_test_support::tv2;

use support::{transport_with, unique, PARTITIONS};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::leadership_status::{
    LeadershipStatus, PairRelation, TransactionState,
};
use kafka_coordination::core::record::Role;
use kafka_coordination::core::token::FencingToken;
use kafka_coordination::error::ErrorKind;
use kafka_coordination::transport::Wait;
use kafka_coordination::transport::{Append, Coordinator, LeaseWriter, Registrar, StateReader};
use kafka_coordination_kafka::{KafkaConfig, KafkaTransport};

const LEASE: Duration = Duration::from_secs(30);

fn bootstrap() -> Option<String> {
    support::bootstrap(
        "Kafka transport tests",
        "scripts/kafka/with-broker.sh cargo test -p kafka-coordination-kafka --test brokers \
         transport::",
    )
}

fn role(prefix: &str) -> Role {
    Role::new(unique(prefix)).expect("a valid role")
}

/// A transport on the shared state topic (created if missing).
fn transport(bootstrap: &str) -> KafkaTransport {
    transport_with(KafkaConfig::new(bootstrap, PARTITIONS))
}

/// A transport on a state topic of its own, for a test that leaves a transaction open (that
/// holds back the last stable offset of its partition, which would stall the reads of every
/// other test on the partition) or that reads back every record of a key (the client's view
/// of a partition keeps only the latest record of a key once enough records of the partition
/// were superseded, as compaction would, and other tests' traffic on the shared topic gets it
/// there).
fn isolated_transport(bootstrap: &str) -> KafkaTransport {
    transport_with(KafkaConfig::new(bootstrap, PARTITIONS).with_topic(unique("coordination-open")))
}

/// Reads `p` from `from` until `done` holds (bounded). A commit is acknowledged a moment
/// before its transaction marker makes it readable, and another test's transaction in flight
/// on the same partition holds the last stable offset back, so a read right after a write may
/// not reach it yet.
fn read_until(
    t: &KafkaTransport,
    p: i32,
    from: i64,
    done: impl Fn(&kafka_coordination::transport::ReadBatch) -> bool,
) -> kafka_coordination::transport::ReadBatch {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let batch = t.read_partition(p, from, Duration::ZERO).expect("read");
        if done(&batch) || Instant::now() >= deadline {
            return batch;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn renewals_keep_the_token_and_describe_agrees() {
    let Some(b) = bootstrap() else { return };
    let t = isolated_transport(&b);
    let role = role("renew");
    let p = t.role_partition(&role).expect("partition");
    let start = t
        .read_partition(p, 0, Duration::ZERO)
        .expect("read")
        .end_offset;

    let token = t.acquire_epoch(&role, LEASE).expect("acquire");
    assert!(!token.is_no_epoch());
    assert_eq!(t.held_token(), Some(token));
    for i in 0..25u32 {
        t.write_lease(p, role.as_str().as_bytes(), Some(&i.to_be_bytes()), token)
            .unwrap_or_else(|e| panic!("renewal {i}: {e}"));
        assert_eq!(
            t.held_token(),
            Some(token),
            "the token moved at renewal {i}"
        );
    }
    let status = t.describe_epoch(&role).expect("describe");
    eprintln!(
        "the cluster's finalized transaction.version: {:?} (2 or more: a client on EndTxn v5+ \
         would get a new epoch at every commit)",
        status.transaction_version
    );
    assert_eq!(
        status.token, token,
        "the native client (EndTxn <= v3, Produce <= v9) must keep the epoch constant for a \
         term, also on a cluster at transaction.version {:?}",
        status.transaction_version
    );
    assert!(status.authoritative(&token));
    assert_eq!(status.relation(&token, true), PairRelation::Current);

    let key = role.as_str().as_bytes();
    let batch = read_until(&t, p, start, |b| {
        b.records.iter().filter(|r| r.key == key).count() >= 25
    });
    let ours: Vec<_> = batch
        .records
        .iter()
        .filter(|r| r.key == role.as_str().as_bytes())
        .collect();
    assert_eq!(ours.len(), 25, "every committed lease write is readable");
    assert_eq!(
        ours.last().and_then(|r| r.value.clone()),
        Some(24u32.to_be_bytes().to_vec())
    );
    assert!(batch.end_offset > start);
}

/// Acquires, lease writes and reads started with `start_acquire_epoch`, `start_write_lease`
/// and `start_read_partition` hold no thread: each call returns with its requests queued, and
/// its outcome arrives on one of the client's connection threads; on the caller's thread only
/// while the call has not returned yet (the seam allows it: an answer that raced in while the
/// call was still queuing it), never later. Ten
/// roles are acquired and written from one thread that waits for none of them; the pairs are
/// the coordinator's, the records are read back, and a superseded pair is fenced as with the
/// blocking calls.
#[test]
fn acquires_and_lease_writes_started_on_the_client_hold_no_thread() {
    let Some(b) = bootstrap() else { return };
    let t = transport(&b);
    t.ensure_topic().expect("the state topic");
    let caller = thread::current().id();
    // `returned`: set once the start call that this answer belongs to returned.
    let on_a_connection_thread = move |what: &str, returned: &AtomicBool| {
        let on = thread::current();
        if on.id() == caller {
            assert!(
                !returned.load(Ordering::SeqCst),
                "{what} was answered on the caller's thread after its call returned"
            );
        } else {
            assert_eq!(on.name(), Some("kc-conn"), "{what} was answered elsewhere");
        }
    };
    let roles: Vec<Role> = (0..10).map(|i| role(&format!("started-{i}"))).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, r) in roles.iter().enumerate() {
        let tx = tx.clone();
        let returned = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&returned);
        t.start_acquire_epoch(
            r.clone(),
            LEASE,
            0,
            Box::new(move |granted| {
                on_a_connection_thread("an acquire", &seen);
                let _ = tx.send((i, granted));
            }),
        );
        returned.store(true, Ordering::SeqCst);
    }
    let mut tokens = vec![None; roles.len()];
    for _ in 0..roles.len() {
        let (i, granted) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every acquire is answered");
        tokens[i] = Some(granted.unwrap_or_else(|e| panic!("acquire {i}: {e}")));
    }
    let tokens: Vec<FencingToken> = tokens.into_iter().map(Option::unwrap).collect();
    for (r, token) in roles.iter().zip(&tokens) {
        assert_eq!(t.describe_epoch(r).expect("describe").token, *token, "{r}");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, (r, token)) in roles.iter().zip(&tokens).enumerate() {
        let tx = tx.clone();
        let p = t.role_partition(r).expect("partition");
        let returned = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&returned);
        t.start_write_lease(
            p,
            r.as_str().as_bytes().to_vec(),
            Some(format!("lease {i}").into_bytes()),
            *token,
            0,
            Box::new(move |written| {
                on_a_connection_thread("a lease write", &seen);
                let _ = tx.send((i, written));
            }),
        );
        returned.store(true, Ordering::SeqCst);
    }
    let mut offsets = vec![-1i64; roles.len()];
    for _ in 0..roles.len() {
        let (i, written) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every lease write is answered");
        offsets[i] = written.unwrap_or_else(|e| panic!("lease write {i}: {e}"));
    }
    for (i, r) in roles.iter().enumerate() {
        let p = t.role_partition(r).expect("partition");
        let key = r.as_str().as_bytes().to_vec();
        // Read with `start_read_partition`, again while the commit's marker has not landed
        // (ten commits at once on a loaded machine: their markers may take seconds).
        let until = Instant::now() + Duration::from_secs(30);
        let batch = loop {
            let (tx, rx) = std::sync::mpsc::channel();
            let returned = Arc::new(AtomicBool::new(false));
            let seen = Arc::clone(&returned);
            t.start_read_partition(
                p,
                offsets[i],
                Duration::ZERO,
                0,
                Box::new(move |read| {
                    on_a_connection_thread("a read", &seen);
                    let _ = tx.send(read);
                }),
            );
            returned.store(true, Ordering::SeqCst);
            let batch = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the read is answered")
                .expect("read");
            if batch.records.iter().any(|x| x.key == key) || Instant::now() >= until {
                break batch;
            }
            thread::sleep(Duration::from_millis(10));
        };
        let ours = batch
            .records
            .iter()
            .find(|x| x.key == key)
            .expect("readable");
        assert_eq!(ours.offset, offsets[i], "{r}");
        assert_eq!(ours.value.as_deref(), Some(format!("lease {i}").as_bytes()));
    }
    // A newer acquire fences the first pair: a write started with it is refused as fenced.
    let r = &roles[0];
    let newer = t.acquire_epoch(r, LEASE).expect("a second acquire");
    assert_ne!(newer, tokens[0]);
    let (tx, rx) = std::sync::mpsc::channel();
    t.start_write_lease(
        t.role_partition(r).expect("partition"),
        r.as_str().as_bytes().to_vec(),
        Some(b"stale".to_vec()),
        tokens[0],
        0,
        Box::new(move |written| {
            let _ = tx.send(written);
        }),
    );
    let stale = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("answered")
        .expect_err("a superseded pair");
    assert_eq!(stale.kind(), ErrorKind::Fenced, "{stale}");
    for r in &roles {
        t.release_role(r);
    }
}

/// A lease write is readable a moment after its commit is answered, not at once: the
/// coordinator answers EndTxn once it has logged the commit and writes the marker to the
/// partition after that, and read_committed reads stop at the last stable offset until the
/// marker lands. docs/guide/guarantees.md ("What it does not guarantee") explains it. The
/// verdict is only that every write becomes readable, promptly; how many a read sent at once
/// misses depends on timing, so it is printed, not asserted.
#[test]
fn a_committed_lease_becomes_readable_once_its_marker_lands() {
    let Some(b) = bootstrap() else { return };
    let writer = transport(&b);
    let reader = transport(&b);
    const WRITES: usize = 200;
    let mut missed = 0;
    for i in 0..WRITES {
        let role = role(&format!("marker-{i}"));
        let p = writer.role_partition(&role).expect("partition");
        // The reader already follows the partition, so its read right after the commit is
        // one quick Fetch.
        reader.read_partition(p, 0, Duration::ZERO).expect("read");
        let token = writer.acquire_epoch(&role, LEASE).expect("acquire");
        let offset = writer
            .write_lease(p, role.as_str().as_bytes(), Some(b"lease"), token)
            .expect("write");
        assert!(offset >= 0, "the commit's offset is known");
        let at_once = reader
            .read_partition(p, offset, Duration::ZERO)
            .expect("read");
        if at_once.end_offset <= offset {
            missed += 1;
        }
        let later = read_until(&reader, p, offset, |b| b.end_offset > offset);
        assert!(
            later.end_offset > offset && later.records.first().is_some_and(|r| r.offset == offset),
            "write {i}: the lease at {offset} did not become readable within 10 s (read to {})",
            later.end_offset
        );
        writer.release_role(&role);
    }
    println!(
        "a read sent the instant the commit was answered missed the lease {missed} times in \
         {WRITES}"
    );
}

#[test]
fn a_second_acquire_fences_the_first_holder() {
    let Some(b) = bootstrap() else { return };
    let first = transport(&b);
    let second = transport(&b);
    let third = transport(&b);
    let role = role("fence");
    let p = first.role_partition(&role).expect("partition");
    let start = first
        .read_partition(p, 0, Duration::ZERO)
        .expect("read")
        .end_offset;

    let t1 = first.acquire_epoch(&role, LEASE).expect("first acquire");
    first
        .write_lease(p, b"k", Some(b"first"), t1)
        .expect("first holder writes");
    let t2 = second.acquire_epoch(&role, LEASE).expect("second acquire");
    eprintln!("first term {t1}, second term {t2}");
    assert_ne!(t1, t2);
    assert!(
        t2.producer_id == t1.producer_id && t2.producer_epoch > t1.producer_epoch,
        "{t2} should bump the epoch of {t1} under one producer id"
    );

    // The deposed holder still has its producer: the broker rejects its guarded write.
    let err = first
        .guarded_send(t1, "__coordination_state", p, Some(b"g"), Some(b"stale"))
        .expect_err("a guarded write of the deposed holder is rejected");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    eprintln!("deposed guarded write: {err}");
    assert_eq!(
        first.held_token(),
        None,
        "a fenced transport drops its producer"
    );
    let err = first
        .write_lease(p, b"k", Some(b"stale"), t1)
        .expect_err("and its lease writes stay fenced");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");

    second
        .write_lease(p, b"k", Some(b"second"), t2)
        .expect("the new holder writes");
    second
        .guarded_send(t2, "__coordination_state", p, Some(b"g"), Some(b"second"))
        .expect("the new holder's guarded write");

    // The broker rejects a deposed holder's lease write too.
    let t3 = third.acquire_epoch(&role, LEASE).expect("third acquire");
    let err = second
        .write_lease(p, b"k", Some(b"stale"), t2)
        .expect_err("the deposed holder is fenced");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    eprintln!("deposed lease write: {err}");
    third
        .write_lease(p, b"k", Some(b"third"), t3)
        .expect("the newest holder writes");

    let status = first.describe_epoch(&role).expect("describe from anyone");
    assert_eq!(status.token, t3);
    assert!(status.authoritative(&t3));
    assert!(!status.authoritative(&t2));
    assert!(!status.authoritative(&t1));
    assert!(!status.authoritative(&FencingToken::NO_EPOCH));

    let values: Vec<_> = read_until(&first, p, start, |b| {
        b.records
            .iter()
            .any(|r| r.value.as_deref() == Some(b"third"))
    })
    .records
    .into_iter()
    .filter(|r| r.key == b"k" || r.key == b"g")
    .filter_map(|r| r.value)
    .collect();
    assert!(
        !values.iter().any(|v| v == b"stale"),
        "no write of a deposed holder is readable"
    );
    for v in [&b"first"[..], b"second", b"third"] {
        assert!(values.iter().any(|x| x == v));
    }
}

#[test]
fn guarded_write_with_a_foreign_token_is_fenced_locally() {
    let Some(b) = bootstrap() else { return };
    let t = transport(&b);
    let role = role("foreign");
    let p = t.role_partition(&role).expect("partition");
    let err = t
        .guarded_send(
            FencingToken::new(1, 1),
            "__coordination_state",
            p,
            None,
            Some(b"x"),
        )
        .expect_err("no epoch held");
    assert_eq!(err.kind(), ErrorKind::Fenced);
    let token = t.acquire_epoch(&role, LEASE).expect("acquire");
    let other = FencingToken::new(token.producer_id, token.producer_epoch.wrapping_sub(1));
    let err = t
        .write_lease(p, b"k", Some(b"v"), other)
        .expect_err("a token that is not the held pair");
    assert_eq!(err.kind(), ErrorKind::Fenced);
    t.write_lease(p, b"k", Some(b"v"), token)
        .expect("the held pair still writes");
}

#[test]
fn an_unknown_role_is_not_found() {
    let Some(b) = bootstrap() else { return };
    let t = KafkaTransport::new(KafkaConfig::new(b, PARTITIONS)).expect("transport");
    let status = t.describe_epoch(&role("never-taken")).expect("describe");
    assert_eq!(status, LeadershipStatus::NOT_FOUND);
    assert!(!status.authoritative(&FencingToken::NO_EPOCH));
}

#[test]
fn appends_return_increasing_offsets_on_the_pinned_partition() {
    let Some(b) = bootstrap() else { return };
    let t = isolated_transport(&b);
    let role = role("append");
    let p = t.role_partition(&role).expect("partition");
    let mut offsets = Vec::new();
    for i in 0..5u8 {
        offsets.push(
            t.append(p, role.as_str().as_bytes(), Some(&[i]))
                .expect("append"),
        );
    }
    let tombstone = t
        .append(p, role.as_str().as_bytes(), None)
        .expect("tombstone");
    offsets.push(tombstone);
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets must increase: {offsets:?}"
    );

    let batch = read_until(&t, p, offsets[0], |b| b.end_offset > tombstone);
    assert!(batch.end_offset > tombstone);
    let ours: Vec<_> = batch
        .records
        .iter()
        .filter(|r| r.key == role.as_str().as_bytes())
        .collect();
    assert_eq!(
        ours.iter().map(|r| r.offset).collect::<Vec<_>>(),
        offsets,
        "records come back at their offsets, in order"
    );
    assert_eq!(ours[4].value.as_deref(), Some(&[4u8][..]));
    assert_eq!(ours[5].value, None, "a tombstone is kept, with no value");
    assert!(batch.records.windows(2).all(|w| w[0].offset < w[1].offset));

    // Tailing: a read from where the last one stopped sees only what is new.
    let again = t
        .read_partition(p, batch.end_offset, Duration::ZERO)
        .expect("read");
    assert!(again.records.iter().all(|r| r.offset >= batch.end_offset));
    // A read from an earlier offset seeks back.
    let back = t
        .read_partition(p, offsets[2], Duration::ZERO)
        .expect("read");
    assert_eq!(back.records.first().map(|r| r.offset), Some(offsets[2]));
}

#[test]
fn concurrent_appends_to_one_partition_each_get_their_own_record() {
    // Appends to one partition travel together (one batch in flight per partition): every
    // caller must still get the offset of its own record.
    let Some(b) = bootstrap() else { return };
    let t = Arc::new(transport(&b));
    let role = role("append-together");
    let p = t.role_partition(&role).expect("partition");
    let produces_before = sent(&t, "Produce");
    let callers: Vec<_> = (0..64u32)
        .map(|i| {
            let t = Arc::clone(&t);
            let key = role.as_str().as_bytes().to_vec();
            thread::spawn(move || {
                let value = format!("caller-{i}").into_bytes();
                (
                    value.clone(),
                    t.append(p, &key, Some(&value)).expect("append"),
                )
            })
        })
        .collect();
    let written: Vec<(Vec<u8>, i64)> = callers
        .into_iter()
        .map(|h| h.join().expect("caller"))
        .collect();
    let produces = sent(&t, "Produce") - produces_before;
    eprintln!("64 appends to one partition: {produces} Produce requests");
    let mut offsets: Vec<i64> = written.iter().map(|(_, o)| *o).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len(), 64, "every append has an offset of its own");
    read_back(&t, p, role.as_str().as_bytes(), &written);
    assert!(produces <= 64, "{produces} Produce requests for 64 appends");
}

type Answers = Arc<
    Mutex<
        Vec<(
            Vec<u8>,
            Result<i64, kafka_coordination::error::TransportError>,
        )>,
    >,
>;

/// Waits (at most a minute of real time) until `answers` holds `n` outcomes: appends handed
/// over with `append_all` are answered by the task that sends them, after it returned.
fn answered(answers: &Answers, n: usize) {
    let until = Instant::now() + Duration::from_secs(60);
    while answers.lock().unwrap().len() < n && Instant::now() < until {
        thread::sleep(Duration::from_millis(5));
    }
}

/// An append of `value` under `key` whose outcome `answers` collects.
fn collected(partition: i32, key: &[u8], value: Vec<u8>, answers: &Answers) -> Append {
    let answers = Arc::clone(answers);
    Append::new(partition, key, Some(value.clone()), move |outcome| {
        answers.lock().unwrap().push((value, outcome))
    })
}

/// Checks that every answer is an offset of its own, that the offsets come in a few runs
/// (batches), and that each record reads back at its offset; returns the offsets.
fn written_in_order(
    t: &KafkaTransport,
    partition: i32,
    key: &[u8],
    answers: &Answers,
    n: usize,
) -> Vec<i64> {
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    assert_eq!(answers.len(), n, "every append answered");
    let mut written: Vec<(Vec<u8>, i64)> = answers
        .into_iter()
        .map(|(v, o)| (v, o.expect("append")))
        .collect();
    written.sort_by_key(|(_, o)| *o);
    let offsets: Vec<i64> = written.iter().map(|(_, o)| *o).collect();
    // One offset each. A batch's records follow each other; between two batches another
    // test's records or transaction markers on the same partition may come.
    assert!(
        offsets.windows(2).all(|w| w[1] > w[0]),
        "every record has an offset of its own: {offsets:?}"
    );
    let gaps = offsets.windows(2).filter(|w| w[1] != w[0] + 1).count();
    assert!(
        gaps < 5,
        "{gaps} gaps: the records did not travel in a few batches: {offsets:?}"
    );
    read_back(t, partition, key, &written);
    offsets
}

/// Checks that each `(value, offset)` of `written` reads back at its offset under `key`.
fn read_back(t: &KafkaTransport, partition: i32, key: &[u8], written: &[(Vec<u8>, i64)]) {
    let first = written.iter().map(|(_, o)| *o).min().expect("records");
    let last = written.iter().map(|(_, o)| *o).max().expect("records");
    let batch = read_until(t, partition, first, |b| b.end_offset > last);
    for (value, offset) in written {
        let record = batch
            .records
            .iter()
            .find(|r| r.offset == *offset)
            .unwrap_or_else(|| panic!("no record at offset {offset}"));
        assert_eq!(record.key, key, "offset {offset}");
        assert_eq!(record.value.as_deref(), Some(&value[..]), "offset {offset}");
    }
}

#[test]
fn appends_handed_over_together_travel_together_and_hold_no_thread_behind_a_batch() {
    let Some(b) = bootstrap() else { return };
    let t = Arc::new(transport(&b));
    let role = role("append-all");
    let p = t.role_partition(&role).expect("partition");
    let key = role.as_str().as_bytes().to_vec();
    t.append(p, &key, Some(b"warm-up")).expect("warm-up append");

    // 1,000 appends handed over at once are queued before the first batch goes: 500 to a
    // Produce. append_all returns at once; a task sends them and answers each.
    let answers = Answers::default();
    let before = sent(&t, "Produce");
    t.append_all(
        (0..1000)
            .map(|i| collected(p, &key, format!("together-{i}").into_bytes(), &answers))
            .collect(),
        0,
    );
    answered(&answers, 1000);
    let produces = sent(&t, "Produce") - before;
    eprintln!("1,000 appends handed over together: {produces} Produce requests");
    written_in_order(&t, p, &key, &answers, 1000);
    // Two, more only on retries (a broker slow to answer, a leader moving): one each went
    // 1,000.
    assert!(
        (2..=4).contains(&produces),
        "{produces} Produce requests for 1,000 appends (2 expected)"
    );

    // Appends queued behind a batch in flight return at once: the first append's answer runs
    // on its sender while the partition's batch is still its to send, and hands over 999 more
    // one at a time from there. None of them is answered before the answer returns (nobody
    // else sends), and the sender sends them all, 500 to a Produce, after it.
    let queued_unanswered = Arc::new(Mutex::new(None::<usize>));
    let before = sent(&t, "Produce");
    let first = {
        let (t, key, answers, queued) = (
            Arc::clone(&t),
            key.clone(),
            Arc::clone(&answers),
            Arc::clone(&queued_unanswered),
        );
        Append::new(p, key.clone(), Some(b"first".to_vec()), move |outcome| {
            answers.lock().unwrap().push((b"first".to_vec(), outcome));
            for i in 1..1000 {
                let value = format!("queued-{i}").into_bytes();
                t.append_all(vec![collected(p, &key, value, &answers)], 0);
            }
            *queued.lock().unwrap() = Some(answers.lock().unwrap().len());
        })
    };
    t.append_all(vec![first], 0);
    answered(&answers, 1000);
    let produces = sent(&t, "Produce") - before;
    eprintln!("1,000 appends queued behind one in flight: {produces} Produce requests");
    assert_eq!(
        *queued_unanswered.lock().unwrap(),
        Some(1),
        "999 appends queued behind the batch in flight returned before any was answered"
    );
    written_in_order(&t, p, &key, &answers, 1000);
    // The first batch carried the first append alone; the queue went in two more.
    assert!(
        (3..=5).contains(&produces),
        "{produces} Produce requests for 1,000 appends (3 expected, more only on retries)"
    );

    // The checks come before the queue: an append to a partition outside the topic is
    // answered at once, on the caller, and the others of its call are written.
    let bad = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&bad);
    t.append_all(
        vec![
            Append::new(PARTITIONS + 3, key.clone(), Some(b"x".to_vec()), move |o| {
                *seen.lock().unwrap() = Some(o)
            }),
            collected(p, &key, b"beside a bad one".to_vec(), &answers),
        ],
        0,
    );
    answered(&answers, 1);
    let err = bad
        .lock()
        .unwrap()
        .take()
        .expect("answered before returning");
    let err = err.expect_err("a partition outside the topic");
    assert!(err.message().contains("outside the"), "{err}");
    written_in_order(&t, p, &key, &answers, 1);
}

/// A transport whose every connection goes through a proxy in front of `broker`, with a
/// 700 ms request timeout and `operation_timeout`.
fn behind_a_proxy(broker: &str, operation_timeout: Duration) -> (proxy::Proxy, KafkaTransport) {
    proxied(broker, |c| {
        c.with_request_timeout(Duration::from_millis(700))
            .with_operation_timeout(operation_timeout)
    })
}

/// [`behind_a_proxy`] on a state topic of its own, for a test that reads back every record of
/// its role: the client's view of a partition keeps only the latest record of a key once
/// other tests' traffic on the shared topic has superseded enough records (as compaction
/// would), which would hide an earlier record of the role, or a duplicate of it.
fn behind_a_proxy_alone(
    broker: &str,
    operation_timeout: Duration,
) -> (proxy::Proxy, KafkaTransport) {
    let topic = unique("coordination-alone");
    proxied(broker, |c| {
        c.with_request_timeout(Duration::from_millis(700))
            .with_operation_timeout(operation_timeout)
            .with_topic(topic.clone())
    })
}

/// A transport whose every connection goes through a proxy in front of `broker`, on the
/// configuration `settings` makes of the default one (its state topic created first).
fn proxied(
    broker: &str,
    settings: impl Fn(KafkaConfig) -> KafkaConfig,
) -> (proxy::Proxy, KafkaTransport) {
    // The topic exists before the proxy stands in front of the broker.
    let direct = transport_with(settings(KafkaConfig::new(broker, PARTITIONS)));
    let topic = direct.config().topic().to_owned();
    drop(direct);
    let proxy = proxy::Proxy::start(broker);
    let config = settings(KafkaConfig::new(proxy.addr.clone(), PARTITIONS))
        .with_topic(topic)
        .with_address_override(broker.to_owned(), proxy.addr.clone());
    let t = KafkaTransport::connect(config).expect("transport");
    (proxy, t)
}

/// A member whose clock runs two hours ahead of the broker's writes a lease: the topic takes
/// records stamped at most a minute ahead, so the broker refuses it (INVALID_TIMESTAMP). Sent
/// again, the batch carries the same timestamps, so the write ends at once, after one
/// produce, as a configuration error that says clock skew and names the topic's settings,
/// instead of holding the role's session for the operation timeout. It is no fence: once the
/// clocks agree, the same pair renews.
#[test]
fn a_lease_stamped_outside_the_topics_window_fails_at_once_as_clock_skew() {
    let Some(broker) = bootstrap() else { return };
    let topic = unique("coordination-skew");
    // Kafka 3.6 split message.timestamp.difference.max.ms into a window before and after the
    // broker's clock (KIP-937); an older broker refuses the new names, and gets the old one.
    if let Err(why) = try_create_state_topic(
        &broker,
        &topic,
        &[
            ("message.timestamp.after.max.ms", "60000"),
            ("message.timestamp.before.max.ms", "60000"),
        ],
    ) {
        eprintln!("the broker refused the window settings of 3.6 ({why}); using the old one");
        create_state_topic(
            &broker,
            &topic,
            &[("message.timestamp.difference.max.ms", "60000")],
        );
    }
    let (proxy, t) = proxied(&broker, |c| {
        c.with_topic(topic.clone())
            .with_request_timeout(Duration::from_secs(5))
            .with_operation_timeout(Duration::from_secs(30))
    });
    let (role, token, first) = leading(&t, "skew");
    let p = t.role_partition(&role).expect("partition");
    let key = role.as_str().as_bytes();
    proxy.skew_produce_timestamps(2 * 3600 * 1000);
    let sent = proxy.forwarded(proxy::PRODUCE);
    let err = t
        .write_lease(p, key, Some(b"two hours ahead"), token)
        .expect_err("stamped outside the window");
    eprintln!("{err}");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert_eq!(err.kafka_code(), Some(32), "{err}");
    assert_eq!(err.troubleshooting_anchor(), "clock-skew");
    for words in [
        "clock skew",
        "INVALID_TIMESTAMP",
        "message.timestamp.after.max.ms",
        "this member's clock",
    ] {
        assert!(err.message().contains(words), "{words:?} in {err}");
    }
    assert_eq!(
        proxy.forwarded(proxy::PRODUCE) - sent,
        1,
        "the refused produce was not sent again"
    );
    proxy.skew_produce_timestamps(0);
    let offset = t
        .write_lease(p, key, Some(b"lease 2"), token)
        .expect("the same pair renews once the clocks agree");
    assert!(offset > first, "{offset} after {first}");
}

/// Offsets committed with metadata above the brokers' offset.metadata.max.bytes (4096 by
/// default): the group coordinator refuses them (OFFSET_METADATA_TOO_LARGE) and would refuse
/// them again, so the write ends after one TxnOffsetCommit with a configuration error that
/// names the setting.
#[test]
fn offsets_with_metadata_above_the_brokers_limit_fail_at_once_naming_it() {
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = proxied(&broker, |c| {
        c.with_topic(unique("coordination-open"))
            .with_operation_timeout(Duration::from_secs(30))
    });
    let (_, token, _) = leading(&t, "metadata");
    let topic = t.config().topic().to_owned();
    let group = unique("group-metadata");
    let commit = |metadata: &str| {
        let consumed = [kafka_coordination_kafka::ConsumedOffset {
            topic: &topic,
            partition: 0,
            next_offset: 1,
            metadata: Some(metadata),
        }];
        t.guarded_write_with_offsets(
            token,
            &[],
            kafka_coordination_kafka::GroupOffsets {
                group: &group,
                offsets: &consumed,
            },
        )
    };
    // The group's coordinator is found and loaded (it may ask for a retry while it loads).
    commit("small").expect("offsets with small metadata");
    let sent = proxy.forwarded(proxy::TXN_OFFSET_COMMIT);
    let err = commit(&"m".repeat(4097)).expect_err("metadata too large");
    eprintln!("{err}");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert_eq!(err.kafka_code(), Some(12), "{err}");
    assert!(err.message().contains("offset.metadata.max.bytes"), "{err}");
    assert_eq!(
        proxy.forwarded(proxy::TXN_OFFSET_COMMIT) - sent,
        1,
        "the refused commit was not sent again"
    );
}

/// The end of a term does not wait for the role's write in flight: `release_role` returns
/// while the write's produce answer is still kept at the proxy (the write holds the role's
/// session, and can end only when the answer comes: its request timeout is longer than the
/// test), and the write completes once the answer passes.
#[test]
fn releasing_a_role_returns_while_its_write_is_in_flight() {
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = proxied(&broker, |c| {
        c.with_topic(unique("coordination-open"))
            .with_request_timeout(Duration::from_secs(30))
            .with_operation_timeout(Duration::from_secs(60))
    });
    let t = Arc::new(t);
    let (role, token, first) = leading(&t, "release-in-flight");
    let p = t.role_partition(&role).expect("partition");
    proxy.close_gate(proxy::PRODUCE);
    let writer = {
        let (t, key) = (Arc::clone(&t), role.as_str().as_bytes().to_vec());
        thread::spawn(move || t.write_lease(p, &key, Some(b"in flight"), token))
    };
    // The produce reached the broker; its answer waits at the proxy, the write holds the
    // session.
    proxy.wait_at_gate(1);
    t.release_role(&role);
    let in_flight = !writer.is_finished();
    proxy.open_gate();
    let written = writer.join().expect("the writer");
    eprintln!(
        "release_role returned with the write in flight: {in_flight}; the write: {written:?}"
    );
    assert!(
        in_flight,
        "release_role waited for the write in flight to end"
    );
    let offset = written.expect("the write in flight completes after the release");
    assert!(offset > first, "{offset} after {first}");
}

#[test]
fn an_append_whose_answer_is_lost_is_written_once() {
    // The broker writes the batch but the connection breaks before its answer arrives: the
    // append sends it again with the same producer id and sequence, and the broker, taking it
    // for the duplicate it is, answers with the offset it wrote it at. (An answer that does not
    // come within the request timeout makes the broker silent instead, and the append fails
    // at once when no other broker took over: see
    // `a_frozen_broker_costs_a_call_one_request_timeout_not_the_operation_timeout`.)
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = behind_a_proxy_alone(&broker, Duration::from_secs(15));
    let role = role("append-lost");
    let p = t.role_partition(&role).expect("partition");
    // A first append, so that the producer id is granted before the answers are held.
    let first = t
        .append(p, role.as_str().as_bytes(), Some(b"first"))
        .expect("first append");
    let produces_before = proxy.forwarded(proxy::PRODUCE);
    // Held for no time, then the connection is cut: the answer is lost.
    proxy.hold_next(proxy::PRODUCE, 1, Duration::ZERO);
    let offset = t
        .append(p, role.as_str().as_bytes(), Some(b"answer lost"))
        .expect("the append whose first answer was lost");
    assert_eq!(proxy.held(), 1, "the first answer was lost");
    assert!(
        proxy.forwarded(proxy::PRODUCE) - produces_before >= 2,
        "the batch was sent again"
    );
    let batch = read_until(&t, p, first, |b| b.end_offset > offset);
    let ours: Vec<(i64, Option<Vec<u8>>)> = batch
        .records
        .iter()
        .filter(|r| r.key == role.as_str().as_bytes())
        .map(|r| (r.offset, r.value.clone()))
        .collect();
    assert_eq!(
        ours,
        vec![
            (first, Some(b"first".to_vec())),
            (offset, Some(b"answer lost".to_vec()))
        ],
        "the record whose answer was lost is in the log once, at the offset the append returned"
    );
}

/// When a produce held at the proxy, after the write that sent it gave up, reaches the broker.
#[derive(Clone, Copy, Debug)]
enum HeldProduce {
    /// During the next write: just before the broker's first AddPartitionsToTxn answer of that
    /// write reaches the client, so that it lands in a transaction the next write opened.
    DuringTheNextWrite,
    /// Before the next write begins, while the transaction of the write that gave up is
    /// still open.
    BeforeTheNextWrite,
    /// Never.
    Never,
}

/// A leader's write gives up while its produce is held on the way to the broker (a produce
/// queued at a broker that is recovering); the held produce reaches the broker at `release`.
/// The leader's next write must be acknowledged at the offset of its own record, and the
/// record of the write that gave up must not become visible: the broker takes a batch it has
/// seen for a duplicate by its sequence alone, so a next write that reused the sequence of
/// the unanswered batch would be acknowledged at that batch's offset without being written.
fn the_write_after_an_unanswered_produce(name: &str, release: HeldProduce) {
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = behind_a_proxy_alone(&broker, Duration::from_secs(15));
    let (role, token, first) = leading(&t, name);
    let p = t.role_partition(&role).expect("partition");
    let key = role.as_str().as_bytes();

    proxy.hold_requests(proxy::PRODUCE);
    let gave_up = t
        .write_lease(p, key, Some(b"gave up"), token)
        .expect_err("its produce is held");
    assert_eq!(gave_up.kind(), ErrorKind::Retriable, "{gave_up}");
    assert!(proxy.requests_held() >= 1, "the produce was held");
    match release {
        HeldProduce::DuringTheNextWrite => {
            proxy.release_held_requests_before_answer_to(proxy::ADD_PARTITIONS_TO_TXN)
        }
        HeldProduce::BeforeTheNextWrite => proxy.release_held_requests_now(),
        HeldProduce::Never => proxy.drop_held_requests(),
    }

    // Turned away while the connection pool takes the broker for silent, then written.
    let offset = write_lease_once_admitted(&t, p, key, b"next", token, "the next write");
    let answers = proxy.released_answers();
    eprintln!(
        "{release:?}: {} produce(s) held, answered when released with (error code, offset) \
         {answers:?}; the next write was acknowledged at {offset}",
        proxy.requests_held()
    );
    match release {
        HeldProduce::Never => assert!(answers.is_empty()),
        _ => assert!(
            answers
                .iter()
                .any(|a| matches!(a, Some((0, o)) if *o > first)),
            "the held produce reached the broker and was appended: {answers:?}"
        ),
    }
    let batch = read_until(&t, p, first, |b| b.end_offset > offset);
    let ours: Vec<(i64, String)> = batch
        .records
        .iter()
        .filter(|r| r.key == key)
        .map(|r| {
            let value = r.value.as_deref().unwrap_or(b"(none)");
            (r.offset, String::from_utf8_lossy(value).into_owned())
        })
        .collect();
    assert_eq!(
        ours,
        vec![(first, "lease 1".to_owned()), (offset, "next".to_owned())],
        "the next write's record is at the offset it was acknowledged at, and the record of \
         the write that gave up is not visible"
    );
}

#[test]
fn a_produce_that_lands_during_the_next_write_does_not_take_its_place() {
    the_write_after_an_unanswered_produce("held-during", HeldProduce::DuringTheNextWrite);
}

#[test]
fn a_produce_that_lands_before_the_next_write_is_aborted() {
    the_write_after_an_unanswered_produce("held-before", HeldProduce::BeforeTheNextWrite);
}

#[test]
fn a_produce_that_never_lands_leaves_the_next_write_its_sequence() {
    the_write_after_an_unanswered_produce("held-never", HeldProduce::Never);
}

/// Writes a lease record `value` of `key` to `p` with `token` (`what`, for the panic): calls
/// turned away while the connection pool takes the broker for silent (a second) are retriable
/// errors, and the write is tried again every 25 ms, up to 400 times.
fn write_lease_once_admitted(
    t: &KafkaTransport,
    p: i32,
    key: &[u8],
    value: &[u8],
    token: FencingToken,
    what: &str,
) -> i64 {
    let mut turned_away = 0;
    loop {
        match t.write_lease(p, key, Some(value), token) {
            Ok(offset) => return offset,
            Err(e) if e.kind() == ErrorKind::Retriable && turned_away < 400 => {
                turned_away += 1;
                thread::sleep(Duration::from_millis(25));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// A new role named after `name`, led through `t`: its pair and the offset of its first lease.
fn leading(t: &KafkaTransport, name: &str) -> (Role, FencingToken, i64) {
    let role = role(name);
    let p = t.role_partition(&role).expect("partition");
    let token = t.acquire_epoch(&role, LEASE).expect("acquire");
    let first = t
        .write_lease(p, role.as_str().as_bytes(), Some(b"lease 1"), token)
        .expect("a lease before the freeze");
    (role, token, first)
}

/// After a freeze: the leader holding `token` for `role` writes its next lease with the same
/// pair, past `first`, and nobody took the role. Calls are turned away for the pool's quiet
/// period (a second), then one probes the broker, which answers.
fn the_leader_writes_on_after_the_thaw(
    t: &KafkaTransport,
    role: &Role,
    token: FencingToken,
    first: i64,
) {
    let p = t.role_partition(role).expect("partition");
    let key = role.as_str().as_bytes();
    let offset =
        write_lease_once_admitted(t, p, key, b"lease 3", token, "the write after the thaw");
    assert!(
        offset > first,
        "the same pair writes on: {offset} after {first}"
    );
    assert_eq!(
        t.describe_epoch(role).expect("describe").token,
        token,
        "nobody took the role meanwhile"
    );
}

#[test]
fn a_frozen_broker_costs_a_call_one_request_timeout_not_the_operation_timeout() {
    // A broker that stops answering (a SIGSTOP) and that no other broker replaces: a call
    // waits out one request timeout, finds the broker silent, looks it up again, finds the
    // same broker, and fails at once with a retriable error that says so, instead of holding
    // its thread (a host's I/O thread) until the operation timeout. The leader it failed for
    // is still the leader once the broker answers again.
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = behind_a_proxy(&broker, Duration::from_secs(120));
    let (role, token, first) = leading(&t, "frozen");
    let p = t.role_partition(&role).expect("partition");
    let key = role.as_str().as_bytes();

    proxy.freeze();
    type Call<'a> = &'a dyn Fn() -> Result<(), kafka_coordination::error::TransportError>;
    let calls: [(&str, Call<'_>); 3] = [
        ("a lease write", &|| {
            t.write_lease(p, key, Some(b"lease 2"), token).map(drop)
        }),
        ("a registration", &|| {
            t.append(p, key, Some(b"member")).map(drop)
        }),
        ("a check", &|| t.describe_epoch(&role).map(drop)),
    ];
    for (call, run) in calls {
        let started = Instant::now();
        let e = run().expect_err("the broker is frozen");
        eprintln!(
            "{call} while the broker is frozen failed after {:?}: {e}",
            started.elapsed()
        );
        assert_eq!(e.kind(), ErrorKind::Retriable, "{call}: {e}");
        assert!(
            e.message().contains("not answering"),
            "{call} should say the broker is not answering: {e}"
        );
    }

    proxy.thaw();
    the_leader_writes_on_after_the_thaw(&t, &role, token, first);
}

#[test]
fn a_broker_that_answers_late_but_is_alive_is_not_taken_for_silent() {
    // A coordinator whose append waits for a replica that died (the replica stays in the ISR
    // until the controller fences its broker) leaves AddPartitionsToTxn unanswered for longer
    // than the request timeout (700 ms here), yet opens a new connection at once. The lease
    // write tries again at once and goes through: the broker is busy, not silent. Taken for
    // silent, it would turn the write away (and a leader's renewals with it) for a quiet
    // period, and the write would fail, as the frozen broker's do.
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = behind_a_proxy(&broker, Duration::from_secs(15));
    let (role, token, first) = leading(&t, "busy-coordinator");
    let p = t.role_partition(&role).expect("partition");
    let key = role.as_str().as_bytes();

    proxy.hold_next(proxy::ADD_PARTITIONS_TO_TXN, 1, Duration::from_secs(3));
    let started = Instant::now();
    let offset = t
        .write_lease(p, key, Some(b"lease 2"), token)
        .expect("the write goes on once the broker is found busy, not silent");
    eprintln!(
        "a lease write whose AddPartitionsToTxn answer was held for 3 s (request timeout \
         700 ms) went through after {:?}",
        started.elapsed()
    );
    assert_eq!(proxy.held(), 1, "the answer was held");
    assert!(
        offset > first,
        "written after the first lease: {offset} > {first}"
    );
    assert_eq!(
        t.describe_epoch(&role).expect("describe").token,
        token,
        "nobody took the role meanwhile"
    );
}

/// A transport behind a proxy to `broker` with two connections per broker, a request timeout
/// of 20 s (so a pile-up time of 5 s) and an operation timeout of 120 s.
fn on_two_connections_behind_a_proxy(broker: &str) -> (proxy::Proxy, KafkaTransport) {
    drop(transport(broker));
    let proxy = proxy::Proxy::start(broker);
    let config = KafkaConfig::new(proxy.addr.clone(), PARTITIONS)
        .with_address_override(broker.to_owned(), proxy.addr.clone())
        .with_connections_per_broker(2)
        .with_request_timeout(Duration::from_secs(20))
        .with_operation_timeout(Duration::from_secs(120));
    let t = KafkaTransport::connect(config).expect("transport");
    (proxy, t)
}

/// Four roles named after `role`, their coordinator known: each check of one is a request of
/// its own.
fn four_other_roles(t: &KafkaTransport, role: &Role) -> Vec<Role> {
    let others: Vec<Role> = (0..4)
        .map(|i| Role::new(format!("{role}-{i}")).expect("role"))
        .collect();
    for other in &others {
        t.describe_epoch(other).expect("describe");
    }
    others
}

#[test]
fn requests_a_frozen_broker_leaves_unanswered_are_given_up_before_the_request_timeout() {
    // A broker freezes with requests in flight on both of the transport's connections to it,
    // and more requests (checks of other roles, each a request of its own) wait for those
    // connections. Once they have waited a quarter of the request timeout (5 s of 20 s here)
    // behind requests that got no answer, the broker is taken for silent, and the transport
    // gives up on the requests in flight: it closes their connections, so that the calls
    // waiting for their answers fail then, as retriable errors, instead of waiting until the
    // request timeout. Nothing is lost: the leader is still the leader once the broker answers
    // again.
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = on_two_connections_behind_a_proxy(&broker);
    let (role, token, first) = leading(&t, "frozen-in-flight");
    let p = t.role_partition(&role).expect("partition");
    let key = role.as_str().as_bytes();
    assert_eq!(t.requests_abandoned(), 0);
    let others = four_other_roles(&t, &role);

    proxy.freeze();
    let started = Instant::now();
    let errors: Vec<kafka_coordination::error::TransportError> = thread::scope(|scope| {
        let calls: Vec<_> = (0..6)
            .map(|i| {
                let (t, others) = (&t, &others);
                scope.spawn(move || match i {
                    0..=3 => t.describe_epoch(&others[i]).map(drop),
                    4 => t.write_lease(p, key, Some(b"lease 2"), token).map(drop),
                    _ => t.append(p, key, Some(b"member")).map(drop),
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().expect("call").expect_err("the broker is frozen"))
            .collect()
    });
    eprintln!(
        "6 calls on a frozen broker with a 20 s request timeout all failed after {:?}; \
         requests given up on: {}",
        started.elapsed(),
        t.requests_abandoned()
    );
    for e in &errors {
        assert_eq!(e.kind(), ErrorKind::Retriable, "{e}");
        assert!(e.message().contains("not answering"), "{e}");
        assert!(
            !e.message().contains("nothing within"),
            "no call waited out a request timeout: {e}"
        );
    }
    assert!(
        t.requests_abandoned() >= 2,
        "the requests in flight on both connections were given up on: {}",
        t.requests_abandoned()
    );

    proxy.thaw();
    the_leader_writes_on_after_the_thaw(&t, &role, token, first);
}

#[test]
fn calls_queued_behind_a_busy_broker_wait_for_it_instead_of_giving_up() {
    // Both of the transport's connections to the broker carry a check whose answer does not
    // come for 7 s (the proxy holds it, then breaks the connection), and two more checks wait
    // for a connection. After a quarter of the request timeout (5 s of 20 s) the broker opens
    // a new connection at once: it is busy, not silent. Nothing is given up on, and the checks
    // that waited get their answers once the connections are free. (A frozen broker does not
    // open one: see the test above.)
    let Some(broker) = bootstrap() else { return };
    let (proxy, t) = on_two_connections_behind_a_proxy(&broker);
    let (role, token, _) = leading(&t, "busy-queue");
    let others = four_other_roles(&t, &role);

    proxy.hold_next(proxy::DESCRIBE_TRANSACTIONS, 2, Duration::from_secs(7));
    let started = Instant::now();
    let results: Vec<_> = thread::scope(|scope| {
        let calls: Vec<_> = others
            .iter()
            .map(|other| {
                let t = &t;
                scope.spawn(move || t.describe_epoch(other).map(drop))
            })
            .collect();
        calls.into_iter().map(|c| c.join().expect("call")).collect()
    });
    eprintln!(
        "4 checks, 2 of them held for 7 s, on 2 connections with a 20 s request timeout, \
         ended after {:?}: {results:?}",
        started.elapsed()
    );
    assert_eq!(proxy.held(), 2, "two answers were held");
    assert_eq!(t.requests_abandoned(), 0, "nothing was given up on");
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            !e.message().contains("silent"),
            "the broker was not taken for silent: {e}"
        );
    }
    let answered = results.iter().filter(|r| r.is_ok()).count();
    assert!(
        answered >= 2,
        "the two checks that waited were answered: {results:?}"
    );
    assert_eq!(
        t.describe_epoch(&role).expect("describe").token,
        token,
        "the leader is untouched"
    );
}

#[test]
fn a_long_poll_returns_when_a_record_arrives() {
    let Some(b) = bootstrap() else { return };
    // A topic of its own: another test's write to a shared partition would end the first long
    // poll early.
    let config = KafkaConfig::new(b.clone(), PARTITIONS).with_topic(unique("longpoll-topic"));
    let reader = transport_with(config.clone());
    let writer = transport_with(config);
    let role = role("longpoll");
    let p = reader.role_partition(&role).expect("partition");
    let end = reader
        .read_partition(p, 0, Duration::ZERO)
        .expect("read")
        .end_offset;

    let started = Instant::now();
    let empty = reader
        .read_partition(p, end, Duration::from_millis(300))
        .expect("read");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "max_wait is honoured: {waited:?}"
    );
    // Other tests may write to the same partition; none of ours is there.
    assert!(empty
        .records
        .iter()
        .all(|r| r.key != role.as_str().as_bytes()));

    let handle = thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        writer
            .append(p, role.as_str().as_bytes(), Some(b"late"))
            .expect("append")
    });
    let started = Instant::now();
    let mut from = empty.end_offset;
    let mut seen = false;
    while !seen && started.elapsed() < Duration::from_secs(20) {
        let batch = reader
            .read_partition(p, from, Duration::from_secs(20))
            .expect("read");
        seen = batch
            .records
            .iter()
            .any(|r| r.value.as_deref() == Some(b"late"));
        from = batch.end_offset;
    }
    let offset = handle.join().expect("writer thread");
    assert!(seen, "the appended record at {offset} was read");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the long poll answered soon after the record arrived, not at max_wait: {:?}",
        started.elapsed()
    );
}

#[test]
fn an_open_transaction_is_invisible_until_a_takeover_aborts_it() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let Some(b) = bootstrap() else { return };
    let t = isolated_transport(&b);
    let role = role("open-txn");
    let p = t.role_partition(&role).expect("partition");

    // A holder that crashes mid-write: begin, send, flush, never commit.
    let crashed: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", role.as_str())
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("raw producer");
    crashed
        .init_transactions(Duration::from_secs(30))
        .expect("init");
    crashed.begin_transaction().expect("begin");
    crashed
        .send(
            BaseRecord::to(t.config().topic())
                .partition(p)
                .key(role.as_str())
                .payload("uncommitted"),
        )
        .map_err(|(e, _)| e)
        .expect("send");
    crashed.flush(Duration::from_secs(10)).expect("flush");
    let open = t.describe_epoch(&role).expect("describe");
    assert_eq!(
        open.state.as_ref().map(|s| s.as_str()),
        Some("Ongoing"),
        "{open:?}"
    );

    // A plain record after it: committed, but behind the open transaction's LSO.
    let after = t
        .append(p, role.as_str().as_bytes(), Some(b"after"))
        .expect("append");
    let started = Instant::now();
    let batch = t.read_partition(p, 0, Duration::ZERO).expect("read");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a read stops at the LSO instead of waiting for the high watermark: {:?}",
        started.elapsed()
    );
    assert!(
        batch.end_offset <= after,
        "the LSO is held back by the open transaction"
    );
    assert!(batch
        .records
        .iter()
        .all(|r| r.value.as_deref() != Some(b"uncommitted") && r.offset != after));

    // A takeover fences the crashed holder and aborts its transaction.
    let token = t.acquire_epoch(&role, LEASE).expect("takeover");
    eprintln!("takeover of an open transaction: {open:?} -> {token}");
    let status = t.describe_epoch(&role).expect("describe");
    assert_eq!(status.token, token);
    assert!(status.authoritative(&token));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut batch = t
        .read_partition(p, batch.end_offset, Duration::ZERO)
        .expect("read");
    while !batch.records.iter().any(|r| r.offset == after) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
        batch = t.read_partition(p, 0, Duration::ZERO).expect("read");
    }
    assert!(
        batch.records.iter().any(|r| r.offset == after),
        "after the abort the LSO moves past it"
    );
    assert!(
        batch
            .records
            .iter()
            .all(|r| r.value.as_deref() != Some(b"uncommitted")),
        "the aborted record is never readable"
    );
    drop(crashed);
}

#[test]
fn a_topic_with_another_partition_count_is_refused() {
    let Some(b) = bootstrap() else { return };
    let topic = unique("coordination-test");
    let three = KafkaTransport::new(KafkaConfig::new(b.clone(), 3).with_topic(topic.clone()))
        .expect("transport");
    assert!(three.create_topic(1, None).expect("create"));
    three.ensure_topic().expect("the right count passes");

    let five = KafkaTransport::new(KafkaConfig::new(b.clone(), 5).with_topic(topic.clone()))
        .expect("transport");
    let err = five.ensure_topic().expect_err("a wrong count is refused");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    eprintln!("wrong count: {err}");
    assert!(
        err.message().contains("has 3 partitions"),
        "{}",
        err.message()
    );
    assert_eq!(err.troubleshooting_anchor(), STATE_TOPIC_SECTION);
    let err = five
        .append(0, b"k", Some(b"v"))
        .expect_err("operations check the topic first");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");

    let missing = KafkaTransport::new(KafkaConfig::new(b, 3).with_topic(unique("missing")))
        .expect("transport");
    let err = missing
        .ensure_topic()
        .expect_err("a missing topic is refused");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(
        err.message().contains("does not exist"),
        "{}",
        err.message()
    );
    assert_eq!(err.troubleshooting_anchor(), STATE_TOPIC_SECTION);
}

/// The troubleshooting page's section on the state topic check.
const STATE_TOPIC_SECTION: &str =
    "the-state-topic-is-missing-not-compacted-or-has-another-partition-count";

#[test]
fn a_transaction_timeout_above_the_broker_max_is_a_config_error() {
    let Some(b) = bootstrap() else { return };
    let t = KafkaTransport::new(KafkaConfig::new(b, PARTITIONS)).expect("transport");
    let err = t
        .acquire_epoch(&role("too-long"), Duration::from_millis(900_001))
        .expect_err("above transaction.max.timeout.ms");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    eprintln!("too long: {err}");
    assert!(err.message().contains("900001"), "{}", err.message());
    assert_eq!(
        err.troubleshooting_anchor(),
        "a-lease-longer-than-the-brokers-allow"
    );
    assert!(
        err.message()
            .contains("transaction.max.timeout.ms (900000 ms)"),
        "{}",
        err.message()
    );
    assert_eq!(t.held_token(), None);
}

#[test]
fn an_unreachable_cluster_is_a_retriable_error_naming_it() {
    // Needs no broker: port 1 on loopback refuses connections.
    let config = KafkaConfig::new("127.0.0.1:1", PARTITIONS)
        .with_request_timeout(Duration::from_secs(1))
        .with_operation_timeout(Duration::from_secs(2));
    let t = KafkaTransport::new(config).expect("transport");
    let err = t
        .acquire_epoch(&role("unreachable"), LEASE)
        .expect_err("nothing listens");
    assert_eq!(err.kind(), ErrorKind::Retriable, "{err}");
    assert!(err.message().contains("127.0.0.1:1"), "{}", err.message());
    assert_eq!(err.troubleshooting_anchor(), "unavailable");
    eprintln!("unreachable acquire: {err}");
    let err = t
        .read_partition(0, 0, Duration::ZERO)
        .expect_err("nothing listens");
    eprintln!("unreachable read: {err}");
    assert_eq!(err.kind(), ErrorKind::Retriable, "{err}");
    assert!(err.message().contains("127.0.0.1:1"), "{}", err.message());
}

#[test]
fn the_coordinator_aborts_an_open_transaction_after_its_timeout() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let Some(b) = bootstrap() else { return };
    let t = isolated_transport(&b);
    let role = role("expired-txn");
    let p = t.role_partition(&role).expect("partition");

    // A holder that stalls inside a transaction longer than its timeout (2 s).
    let stalled: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", role.as_str())
        .set("transaction.timeout.ms", "2000")
        .create()
        .expect("raw producer");
    stalled
        .init_transactions(Duration::from_secs(30))
        .expect("init");
    stalled.begin_transaction().expect("begin");
    stalled
        .send(
            BaseRecord::to(t.config().topic())
                .partition(p)
                .key(role.as_str())
                .payload("stalled"),
        )
        .map_err(|(e, _)| e)
        .expect("send");
    stalled.flush(Duration::from_secs(10)).expect("flush");
    let before = t.describe_epoch(&role).expect("describe");
    let after = t
        .append(p, role.as_str().as_bytes(), Some(b"after"))
        .expect("append");

    // The coordinator aborts it (with an epoch bump) without any other member acting.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut status = t.describe_epoch(&role).expect("describe");
    while status.state.as_ref().map(|s| s.as_str()) != Some("CompleteAbort")
        && Instant::now() < deadline
    {
        thread::sleep(Duration::from_millis(200));
        status = t.describe_epoch(&role).expect("describe");
    }
    assert_eq!(
        status.state.as_ref().map(|s| s.as_str()),
        Some("CompleteAbort"),
        "{status:?}"
    );
    assert!(
        status.token.producer_id == before.token.producer_id
            && status.token.producer_epoch > before.token.producer_epoch,
        "the abort bumps the epoch: {before:?} -> {status:?}"
    );
    assert!(!status.authoritative(&before.token));

    let batch = t.read_partition(p, 0, Duration::ZERO).expect("read");
    assert!(batch.records.iter().any(|r| r.offset == after));
    assert!(batch
        .records
        .iter()
        .all(|r| r.value.as_deref() != Some(b"stalled")));
    drop(stalled);
}

#[test]
fn timeouts_out_of_range_are_refused_when_the_transport_is_built() {
    for (name, config) in [
        (
            "request",
            KafkaConfig::new("127.0.0.1:9092", 4).with_request_timeout(Duration::MAX),
        ),
        (
            "operation",
            KafkaConfig::new("127.0.0.1:9092", 4).with_operation_timeout(Duration::ZERO),
        ),
    ] {
        let err = KafkaTransport::new(config).expect_err(name);
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
        assert!(err.message().contains(name), "{err}");
    }
    for bad in ["localhost:notaport", "http://127.0.0.1:9092", ",,,"] {
        let err = KafkaTransport::new(KafkaConfig::new(bad, 4)).expect_err(bad);
        assert_eq!(err.kind(), ErrorKind::Config, "{bad}: {err}");
    }
}

/// Deletes `topic` through librdkafka's admin client.
fn delete_topic(bootstrap: &str, topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::config::ClientConfig;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("an admin client");
    let results = futures_lite::future::block_on(admin.delete_topics(
        &[topic],
        &AdminOptions::new().operation_timeout(Some(LEASE)),
    ))
    .expect("delete_topics");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("deleting {t}: {e}"));
    }
}

/// Under load (or right after a topic is created) a broker can answer
/// UNKNOWN_TOPIC_OR_PARTITION for a partition that exists. Such answers are retried; when they
/// last a whole read the read fails as retriable, never as a configuration error, because the
/// metadata shows the topic with its configured partition count. A configuration error is
/// reported only when the metadata confirms it: the topic is gone (a read of a deleted topic),
/// or it has another partition count (both counts named).
#[test]
fn unknown_topic_or_partition_is_a_configuration_error_only_when_confirmed() {
    let Some(b) = bootstrap() else { return };
    drop(transport(&b)); // the state topic exists and every partition has a leader
    let broker = b.split(',').next().expect("a broker").trim().to_owned();
    let proxy = proxy::Proxy::start(&broker);
    let via_proxy = KafkaConfig::new(proxy.addr.clone(), PARTITIONS)
        .with_address_override(broker.clone(), proxy.addr.clone())
        .with_request_timeout(Duration::from_secs(2));
    let t = KafkaTransport::new(via_proxy).expect("transport");
    let p = 3;

    // The first read's first three Fetch answers say UNKNOWN_TOPIC_OR_PARTITION (no fetch
    // thread runs yet: it starts after the first answer with records): retried, and read.
    proxy.fail_fetches(3, 3);
    t.read_partition(p, 0, Duration::ZERO)
        .expect("the read retries past three UNKNOWN_TOPIC_OR_PARTITION answers");
    assert_eq!(proxy.failed(), 3, "the read met the three answers");

    // Every answer, for longer than a read may take: the read fails, as retriable, with the
    // code; the metadata shows the topic with its 16 partitions, so nothing is confirmed.
    proxy.fail_fetches(usize::MAX, 3);
    let started = Instant::now();
    let err = t
        .read_partition(p, 0, Duration::ZERO)
        .expect_err("no Fetch answer but errors");
    eprintln!(
        "lasting UNKNOWN_TOPIC_OR_PARTITION: {err} (after {:?})",
        started.elapsed()
    );
    assert_eq!(err.kind(), ErrorKind::Retriable, "{err}");
    assert_eq!(err.kafka_code(), Some(3), "{err}");
    assert!(
        err.message().contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{err}"
    );
    proxy.stop_failing();
    t.read_partition(p, 0, Duration::ZERO)
        .expect("the same read succeeds once the broker answers");

    // A topic deleted under a reader: confirmed missing, a configuration error naming it.
    let gone = unique("coordination-deleted");
    let g = transport_with(
        KafkaConfig::new(b.clone(), 3)
            .with_topic(gone.clone())
            .with_request_timeout(Duration::from_secs(3)),
    );
    delete_topic(&b, &gone);
    let err = t_read_until_final(&g, 1);
    eprintln!("deleted topic: {err}");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(
        err.message()
            .contains(&format!("topic {gone} does not exist")),
        "{err}"
    );

    // A missing topic, and a wrong partition count: configuration errors that name the topic
    // (and both counts).
    let missing = unique("coordination-missing");
    let m = KafkaTransport::new(KafkaConfig::new(b.clone(), 3).with_topic(missing.clone()))
        .expect("transport");
    let err = m.read_partition(0, 0, Duration::ZERO).expect_err("missing");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(
        err.message()
            .contains(&format!("topic {missing} does not exist")),
        "{err}"
    );
    let counted = unique("coordination-count");
    drop(transport_with(
        KafkaConfig::new(b.clone(), 3).with_topic(counted.clone()),
    ));
    let five =
        KafkaTransport::new(KafkaConfig::new(b, 5).with_topic(counted.clone())).expect("transport");
    let err = five
        .read_partition(4, 0, Duration::ZERO)
        .expect_err("wrong count");
    eprintln!("wrong count: {err}");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    for part in [
        format!("topic {counted} has 3 partitions"),
        "configured with 5".to_owned(),
    ] {
        assert!(err.message().contains(&part), "{part:?} in {err}");
    }
}

/// Reads `p` until the read fails with a non-retriable error (a deleted topic's partition may
/// answer a read or two before the brokers' metadata drops it), within a minute.
fn t_read_until_final(t: &KafkaTransport, p: i32) -> kafka_coordination::error::TransportError {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match t.read_partition(p, 0, Duration::ZERO) {
            Err(e) if !e.is_retriable() || Instant::now() >= deadline => return e,
            _ => thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// A read that may wait `Duration::MAX` (once an overflow of `Instant + Duration`) waits
/// without panicking and returns when a record arrives.
#[test]
fn a_long_poll_of_duration_max_returns_when_a_record_arrives() {
    let Some(b) = bootstrap() else { return };
    let config = KafkaConfig::new(b.clone(), PARTITIONS).with_topic(unique("longpoll-max"));
    let reader = transport_with(config.clone());
    let writer = transport_with(config);
    let p = 5;
    let end = reader
        .read_partition(p, 0, Duration::ZERO)
        .expect("read")
        .end_offset;
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(reader.read_partition(p, end, Duration::MAX));
    });
    let offset = writer.append(p, b"k", Some(b"v")).expect("append");
    let batch = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the read returned within a minute of the append")
        .expect("read");
    assert!(
        batch.records.iter().any(|r| r.offset == offset),
        "{batch:?}"
    );
}

fn sent(t: &KafkaTransport, api: &str) -> u64 {
    t.requests_by_api()
        .into_iter()
        .find(|(name, _)| name == api)
        .map_or(0, |(_, n)| n)
}

#[test]
fn coordinators_are_looked_up_together() {
    let Some(b) = bootstrap() else { return };
    let t = transport(&b);
    // Claimed roles (candidacies of this process): the first lookup names up to 255 others.
    let claimed: Vec<Role> = (0..300).map(|_| role("lookup")).collect();
    for r in &claimed {
        t.claim_role(r).expect("a candidacy");
    }
    assert_eq!(sent(&t, "FindCoordinator"), 0, "nothing looked up yet");
    for r in &claimed {
        t.acquire_epoch(r, LEASE).expect("acquire");
    }
    // One each, more only on retries (a coordinator still loading, moved, or slow to answer
    // on a broker busy with earlier runs).
    let inits = sent(&t, "InitProducerId");
    assert!(
        (300..=310).contains(&inits),
        "300 acquires took {inits} InitProducerId requests: {:?}",
        t.requests_by_api()
    );
    let lookups = sent(&t, "FindCoordinator");
    assert!(
        (2..=4).contains(&lookups),
        "300 claimed roles took {lookups} FindCoordinator requests (2 expected, more only on \
         retries): {:?}",
        t.requests_by_api()
    );
    // Roles this process has no candidacy for, described together (a third party's check of
    // many roles): their coordinators in one lookup per 256, then one DescribeTransactions
    // per coordinator and 256 roles.
    let others: Vec<Role> = (0..300).map(|_| role("lookup-other")).collect();
    let answers = t.describe_epochs(&others);
    assert_eq!(answers.len(), others.len());
    for (r, a) in others.iter().zip(&answers) {
        let status = a.as_ref().unwrap_or_else(|e| panic!("{r}: {e}"));
        assert_eq!(*status, LeadershipStatus::NOT_FOUND, "{r}");
    }
    let more = sent(&t, "FindCoordinator") - lookups;
    let describes = sent(&t, "DescribeTransactions");
    assert!(
        (2..=4).contains(&more) && (2..=4).contains(&describes),
        "300 roles took {more} FindCoordinator and {describes} DescribeTransactions requests \
         (2 each expected, more only on retries): {:?}",
        t.requests_by_api()
    );
    let answers = t.describe_epochs(&claimed);
    for (r, a) in claimed.iter().zip(&answers) {
        let status = a.as_ref().unwrap_or_else(|e| panic!("{r}: {e}"));
        assert_ne!(status.token, FencingToken::NO_EPOCH, "{r}: {status:?}");
    }
    assert_eq!(sent(&t, "FindCoordinator"), lookups + more, "all known");
    for r in &claimed {
        t.release_role(r);
    }
}

/// The tail paces its long polls: while a partition is written without pause (eight writers
/// appending back to back, so every long poll could answer at once) the fetch thread starts
/// at most one Fetch per 10 ms. The bound holds however the threads are scheduled (the pause
/// only ever delays a Fetch). With the pace undone the tail sent 253 and 365 Fetches in the
/// window (3,306 and 4,152 appends), on a machine busy with another build; paced, 126 and 130.
#[test]
fn a_tail_written_without_pause_fetches_at_most_once_per_pace() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    let Some(b) = bootstrap() else { return };
    const PACE: Duration = Duration::from_millis(10);
    const WINDOW: Duration = Duration::from_secs(2);
    let reader = transport(&b);
    let p = reader.role_partition(&role("paced")).expect("partition");
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..8)
        .map(|_| {
            let (b, stop, writes) = (b.clone(), Arc::clone(&stop), Arc::clone(&writes));
            thread::spawn(move || {
                // A client each, so that no two appends share a Produce.
                let w = transport(&b);
                while !stop.load(Relaxed) {
                    w.append(p, b"paced", Some(b"busy")).expect("append");
                    writes.fetch_add(1, Relaxed);
                }
            })
        })
        .collect();
    // A read that may wait hands the partition to the reader's fetch thread; the tail is live
    // once it answers from its own copy.
    let end = reader
        .read_partition(p, 0, Duration::from_millis(100))
        .expect("read")
        .end_offset;
    let tailing = Instant::now() + Duration::from_secs(30);
    while reader.read_tailed(p, end).is_none() {
        assert!(Instant::now() < tailing, "the partition is not tailed");
        thread::sleep(Duration::from_millis(10));
    }
    // Writers going: a window in which nothing but the tail reads.
    let (fetches, wrote, started) = (sent(&reader, "Fetch"), writes.load(Relaxed), Instant::now());
    thread::sleep(WINDOW);
    let (fetched, written, took) = (
        sent(&reader, "Fetch") - fetches,
        writes.load(Relaxed) - wrote,
        started.elapsed(),
    );
    stop.store(true, Relaxed);
    for w in writers {
        w.join().expect("a writer");
    }
    let bound = (took.as_millis() / PACE.as_millis()) as u64 + 2;
    println!("{written} appends and {fetched} Fetches of the tail in {took:?} (bound {bound})");
    assert!(written > 0, "the writers wrote nothing in the window");
    assert!(
        fetched <= bound,
        "the tail sent {fetched} Fetches in {took:?} while {written} records were appended: \
         more than one per {PACE:?}"
    );
}

/// A member whose client commits with transaction version 2 (KIP-890: EndTxn v5, as franz-go's
/// defaults and the Java client 4.x do) gets a new epoch at every commit, so the pair it wrote
/// in its lease at InitProducerId is behind the coordinator's after its next commits, with no
/// rival anywhere. Three lease commits by such a client: the coordinator's pair is three epochs
/// ahead of the lease's, and the library reads that as the holder's own commits
/// (`CommitsLater { by: 3 }`), not as superseded; the lease's pair no longer fences, the
/// client's current one does.
#[test]
fn a_tv2_clients_lease_pair_reads_as_its_own_commits_not_as_superseded() {
    use kafka_coordination::core::record::{Key, Lease, MemberId};
    use kafka_coordination::core::UnixMillis;
    use kafka_coordination::describe::{describe_leadership, describe_role_state};
    let Some(b) = bootstrap() else { return };
    if let Some(why) = tv2::lacking(&b) {
        support::loud(&format!(
            "a_tv2_clients_lease_pair_reads_as_its_own_commits_not_as_superseded: {why}"
        ));
        return;
    }
    let t = transport(&b);
    let role = role("tv2");
    let p = t.role_partition(&role).expect("partition");
    let topic = t.config().topic().to_owned();
    let mut client = tv2::Tv2Client::init(&b, role.as_str(), LEASE);
    let minted = client.minted;
    let before = t.describe_epoch(&role).expect("describe");
    assert_eq!(before.token, minted);
    match before.transaction_version {
        Some(v) if v >= 2 => {}
        other => {
            support::loud(&format!(
                "the test cluster's finalized transaction.version is {other:?}, not 2 or more: \
                 a_tv2_clients_lease_pair_reads_as_its_own_commits_not_as_superseded has \
                 nothing to show"
            ));
            return;
        }
    }

    let now = || {
        UnixMillis(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("time")
                .as_millis() as i64,
        )
    };
    let granted_at = now();
    let key = Key::lease(role.clone()).encode();
    let mut pairs = vec![minted];
    for _ in 0..3 {
        // The lease names the pair InitProducerId granted, as a member that records its
        // term's pair does; each commit renews it.
        let lease = Lease {
            member: MemberId::new("tv2-member").expect("member"),
            token: minted,
            granted_at,
            deadline: UnixMillis(now().0 + LEASE.as_millis() as i64),
        };
        pairs.push(client.commit_one(&topic, p, &key, &lease.encode()));
    }
    eprintln!("pairs: minted, then after each commit: {pairs:?}");
    for (i, w) in pairs.windows(2).enumerate() {
        assert_eq!(
            (w[1].producer_id, w[1].producer_epoch),
            (w[0].producer_id, w[0].producer_epoch + 1),
            "commit {i} under transaction version 2 bumps the epoch by one, same producer id"
        );
    }

    // A lease becomes readable once its commit marker lands (any of the three will do: each
    // names the minted pair and a live deadline).
    let deadline = Instant::now() + Duration::from_secs(10);
    let state = loop {
        let state = describe_role_state(&t, role.as_str()).expect("role state");
        if state.lease().is_some() || Instant::now() >= deadline {
            break state;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let lease = &state.lease().expect("the lease is readable").lease;
    assert_eq!(lease.token, minted);

    // Right after the last EndTxn the coordinator may still be writing its markers
    // (PrepareCommit, with the new epoch already): the same reading, until CompleteCommit.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = describe_leadership(&t, role.as_str()).expect("describe");
        assert_eq!(
            status.token, client.pair,
            "the coordinator has the client's pair"
        );
        assert!(status.transaction_version_2());
        assert_eq!(
            status.relation_to_lease(lease, now()),
            PairRelation::CommitsLater { by: 3 },
            "{status:?}"
        );
        if status.state == Some(TransactionState::CompleteCommit) {
            break status;
        }
        assert_eq!(
            status.state,
            Some(TransactionState::PrepareCommit),
            "{status:?}"
        );
        assert!(Instant::now() < deadline, "the commit never completed");
        thread::sleep(Duration::from_millis(20));
    };
    let relation = status.relation_to_lease(lease, now());
    eprintln!("relation: {relation:?}: {relation}");
    assert_eq!(relation, PairRelation::CommitsLater { by: 3 });
    assert!(
        !status.authoritative(&lease.token),
        "the lease's pair does not fence"
    );
    assert!(
        status.authoritative(&client.pair),
        "the client's current pair does"
    );
    // Judged expired, the same evidence is no longer read as the holder's own commits.
    assert_eq!(
        status.relation_to_lease(lease, lease.deadline),
        PairRelation::Superseded
    );
}

// ---- compressed batches ----------------------------------------------------------------------

/// Creates `topic` (compacted, [`PARTITIONS`] partitions) with `compression.type` = `codec`.
fn create_compressed_topic(bootstrap: &str, topic: &str, codec: &str) {
    create_state_topic(bootstrap, topic, &[("compression.type", codec)]);
}

/// Creates `topic` as a state topic (compacted, [`PARTITIONS`] partitions) with `settings`.
fn create_state_topic(bootstrap: &str, topic: &str, settings: &[(&str, &str)]) {
    try_create_state_topic(bootstrap, topic, settings).expect("topic created");
}

/// [`create_state_topic`], or why the broker refused it.
fn try_create_state_topic(
    bootstrap: &str,
    topic: &str,
    settings: &[(&str, &str)],
) -> Result<(), String> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::config::ClientConfig;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let replication = support::replication();
    let min_isr = if replication > 1 { "2" } else { "1" };
    let mut new = NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(replication))
        .set("cleanup.policy", "compact")
        .set("min.insync.replicas", min_isr);
    for (name, value) in settings {
        new = new.set(name, value);
    }
    let created = futures_lite::future::block_on(admin.create_topics([&new], &AdminOptions::new()))
        .expect("create topics");
    for r in created {
        r.map_err(|(t, e)| format!("{t}: {e}"))?;
    }
    Ok(())
}

/// A role name whose partition is `p` (of [`PARTITIONS`]).
fn role_on(t: &KafkaTransport, prefix: &str, p: i32) -> Role {
    loop {
        let r = role(prefix);
        if t.role_partition(&r).expect("partition") == p {
            return r;
        }
    }
}

/// Issue 32: registrations of another member of the spec arrive compressed (franz-go writes
/// snappy by default; a topic's compression.type recompresses everything). For each codec,
/// role A's foreign registration sits compressed on the partition of role B: B still gets
/// elected, and A's roster shows the foreign member. snappy and lz4 are the producer's codec
/// (librdkafka here is built without zlib and zstd); gzip and zstd are the topic's
/// `compression.type`, so the broker recompresses every batch, our own included.
#[test]
fn compressed_registrations_of_a_foreign_member_are_read_with_every_codec() {
    use kafka_coordination::core::record::{Key, MemberId, Registration};
    use kafka_coordination::describe::describe_role_state;
    use kafka_coordination::{blocking, Options};
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let Some(b) = bootstrap() else { return };
    for (codec, by_topic) in [
        ("snappy", false),
        ("lz4", false),
        ("gzip", true),
        ("zstd", true),
    ] {
        let topic = unique(&format!("coordination-{codec}"));
        create_compressed_topic(&b, &topic, if by_topic { codec } else { "producer" });
        let client = Arc::new(transport_with(
            KafkaConfig::new(&b, PARTITIONS).with_topic(topic.clone()),
        ));
        let role_b = role(&format!("codec-b-{codec}"));
        let p = client.role_partition(&role_b).expect("partition");
        let role_a = role_on(&client, &format!("codec-a-{codec}"), p);
        // A long, repetitive member id: compression pays, so librdkafka does not fall back to
        // an uncompressed batch.
        let foreign =
            MemberId::new(format!("foreign-{codec}-{}", "abcdefgh".repeat(64))).expect("member");
        let key = Key::registration(role_a.clone(), foreign.clone()).encode();
        let value = Registration {
            member: foreign.clone(),
            registered_at: kafka_coordination::core::UnixMillis(1_700_000_000_000),
        }
        .encode();
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &b)
            .set("compression.codec", if by_topic { "none" } else { codec })
            .set("linger.ms", "0")
            .create()
            .expect("producer");
        producer
            .send(
                BaseRecord::to(&topic)
                    .partition(p)
                    .key(&key[..])
                    .payload(&value[..]),
            )
            .map_err(|(e, _)| e)
            .expect("send");
        producer.flush(Duration::from_secs(10)).expect("flush");

        let leader =
            blocking::acquire_leadership(Arc::clone(&client), role_b.as_str(), "b", Options::new())
                .unwrap_or_else(|e| panic!("{codec}: role B elected: {e}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        let roster = loop {
            let state = describe_role_state(&*client, role_a.as_str()).expect("describe A");
            let roster: Vec<String> = state.roster().map(|(m, _)| m.to_string()).collect();
            if !roster.is_empty() || Instant::now() >= deadline {
                break roster;
            }
            thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(roster, vec![foreign.to_string()], "{codec}");
        assert_eq!(client.batches_skipped(), 0, "{codec}");
        if by_topic {
            let findings = client
                .describe_topic()
                .expect("describe")
                .findings(PARTITIONS);
            assert!(
                findings
                    .iter()
                    .any(|f| f.message.contains(&format!("compression.type={codec}"))),
                "{codec}: {findings:?}"
            );
        }
        assert!(leader.resign_blocking().is_ok(), "{codec}");
    }
}

/// A state topic created with `compression.type=zstd`: every batch is stored zstd-compressed
/// (our registrations and lease writes too). Elections, a takeover and reads work as on an
/// uncompressed topic, and no batch is skipped.
#[test]
fn a_state_topic_with_compression_type_zstd_works_as_an_uncompressed_one() {
    use kafka_coordination::describe::{describe_leadership, describe_role_state};
    use kafka_coordination::{blocking, Options};

    let Some(b) = bootstrap() else { return };
    let topic = unique("coordination-zstd");
    create_compressed_topic(&b, &topic, "zstd");
    let config = KafkaConfig::new(&b, PARTITIONS).with_topic(topic);
    let one = Arc::new(transport_with(config.clone()));
    let two = Arc::new(transport_with(config));
    let role = role("zstd");
    let first =
        blocking::acquire_leadership(Arc::clone(&one), role.as_str(), "one", Options::new())
            .expect("one elected");
    let standby = blocking::start(Arc::clone(&two), role.as_str(), "two", Options::new())
        .expect("two stands by");
    let status = describe_leadership(&*two, role.as_str()).expect("describe");
    assert!(status.authoritative(&first.token()));
    assert!(first.resign_blocking().is_ok());
    let second = standby
        .elected_blocking()
        .expect("two elected after the resign");
    assert!(second.token() != first.token());
    let state = describe_role_state(&*one, role.as_str()).expect("describe");
    let roster: Vec<String> = state.roster().map(|(m, _)| m.to_string()).collect();
    assert!(roster.contains(&"two".to_owned()), "{roster:?}");
    assert_eq!(one.batches_skipped() + two.batches_skipped(), 0);
    assert!(second.resign_blocking().is_ok());
}

// ---- an independent reader -------------------------------------------------------------------

/// Everything on `partition` of `topic` that rdkafka's read_committed consumer sees, from the
/// beginning to the high watermark, as the core's records; and that watermark.
fn read_with_rdkafka(
    bootstrap: &str,
    topic: &str,
    partition: i32,
) -> (Vec<kafka_coordination::core::state::Record>, i64) {
    use kafka_coordination::core::state::Record;
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::{Offset, TopicPartitionList};

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("kc-rdkafka-reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("an rdkafka consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Beginning)
        .expect("the partition");
    consumer.assign(&assignment).expect("assign");
    let (_, high) = consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(10))
        .expect("watermarks");
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // The position passes the last record and the transaction markers after it.
        let position = consumer
            .position()
            .expect("position")
            .find_partition(topic, partition)
            .and_then(|e| match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            });
        if position.is_some_and(|p| p >= high) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "rdkafka did not read {topic}/{partition} up to {high} (at {position:?})"
        );
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => records.push(Record {
                offset: m.offset(),
                key: m.key().unwrap_or_default().to_vec(),
                value: m.payload().map(<[u8]>::to_vec),
            }),
            Some(Err(e)) => panic!("rdkafka read {topic}/{partition}: {e}"),
            None => {}
        }
    }
    (records, high)
}

/// rdkafka's consumer (read_committed, from the beginning of the role's partition) reads what
/// the native client wrote: the registrations and lease records of an elected leader, its
/// resign's tombstones, the successor's lease, and the successor's resign; the records decode
/// to the same role state as the library's own `describe_role_state`.
#[test]
fn rdkafka_reads_the_native_writes_as_describe_role_state_does() {
    use kafka_coordination::core::record::{Key, KeyKind, Lease};
    use kafka_coordination::core::state::RoleState;
    use kafka_coordination::describe::describe_role_state;
    use kafka_coordination::{blocking, Options};

    let Some(b) = bootstrap() else { return };
    // A topic of its own (made by the native CreateTopics): the partition holds only this
    // test's records.
    let topic = unique("coordination-rdkafka");
    let config = KafkaConfig::new(&b, PARTITIONS).with_topic(topic.clone());
    let one = Arc::new(transport_with(config.clone()));
    let two = Arc::new(transport_with(config));
    let role = role("rdkafka-read");
    let p = one.role_partition(&role).expect("partition");

    let first = blocking::acquire_leadership(Arc::clone(&one), role.as_str(), "a", Options::new())
        .expect("a elected");
    let standby =
        blocking::start(Arc::clone(&two), role.as_str(), "b", Options::new()).expect("b stands by");
    let a_token = first.token();
    assert!(first.resign_blocking().is_ok());
    let second = standby
        .elected_blocking()
        .expect("b elected after a's resign");
    let b_token = second.token();

    let agree = |when: &str| {
        let (records, high) = read_with_rdkafka(&b, &topic, p);
        let mut ours = RoleState::build(role.clone(), &records);
        ours.advance_to(high);
        let library = describe_role_state(&*one, role.as_str()).expect("describe_role_state");
        assert_eq!(
            ours, library,
            "{when}: rdkafka's records decode to another state"
        );
        assert_eq!(ours.malformed(), 0, "{when}");
        records
    };

    let records = agree("b leads");
    let leases: Vec<Lease> = records
        .iter()
        .filter(|r| Key::decode(&r.key).is_ok_and(|k| k.kind() == KeyKind::Lease))
        .filter_map(|r| {
            r.value
                .as_deref()
                .map(|v| Lease::decode(v).expect("a lease"))
        })
        .collect();
    assert!(
        leases
            .iter()
            .any(|l| l.member.as_str() == "a" && l.token == a_token),
        "a's lease with its token: {leases:?}"
    );
    assert_eq!(
        leases
            .last()
            .map(|l| (l.member.as_str().to_owned(), l.token)),
        Some(("b".to_owned(), b_token)),
        "b's lease is the last: {leases:?}"
    );
    assert!(
        has_tombstone(&records, KeyKind::Lease, None),
        "a's resign tombstones the lease"
    );
    assert!(
        has_tombstone(&records, KeyKind::Registration, Some("a")),
        "a's resign tombstones its registration"
    );
    let registered = |member: &str| {
        records.iter().any(|r| {
            r.value.is_some()
                && Key::decode(&r.key).is_ok_and(|k| {
                    k.kind() == KeyKind::Registration
                        && k.member().map(|m| m.as_str()) == Some(member)
                })
        })
    };
    assert!(registered("a") && registered("b"), "both registrations");

    assert!(second.resign_blocking().is_ok());
    let records = agree("after b's resign");
    assert!(
        has_tombstone(&records, KeyKind::Registration, Some("b")),
        "b's resign tombstones its registration"
    );
    let state = describe_role_state(&*one, role.as_str()).expect("describe");
    assert!(state.lease().is_none() && state.is_empty(), "{state:?}");
}

/// Whether `records` hold a tombstone of a key of `kind` (and of `member`'s, for a
/// registration).
fn has_tombstone(
    records: &[kafka_coordination::core::state::Record],
    kind: kafka_coordination::core::record::KeyKind,
    member: Option<&str>,
) -> bool {
    use kafka_coordination::core::record::Key;
    records.iter().any(|r| {
        r.value.as_deref().is_none_or(<[u8]>::is_empty)
            && Key::decode(&r.key)
                .is_ok_and(|k| k.kind() == kind && k.member().map(|m| m.as_str()) == member)
    })
}
