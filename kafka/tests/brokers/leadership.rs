//! The whole library (drivers, Leadership handle, describe) end to end on a real Apache Kafka
//! cluster (KRaft), on the system clock with short timings.
//!
//! Start a broker with `scripts/kafka/start.sh` and export the address it prints, or run
//! `scripts/kafka-tests.sh`, which runs these on one broker and then the three-broker test on
//! a three-node cluster. Without `KAFKA_BOOTSTRAP` every test says so loudly and returns.
//!
//! Real time passes here (leases of a few seconds), but no test sleeps to "wait for a lease":
//! each waits for the event (elected, done) with a bound, and timing bounds are loose.

use kafka_coordination_test_support as support;
use kafka_coordination_test_support::proxy;

use support::{brokers, loud, transport_with, unique, PARTITIONS};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::blocking;
use kafka_coordination::core::machine::Status;
use kafka_coordination::core::record::{Key, Lease, MemberId, Registration, Role};
use kafka_coordination::core::RoleState;
use kafka_coordination::describe::{describe_leadership, describe_role_state};
use kafka_coordination::error::{ErrorKind, TransportError};
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::transport::{BlockingTransport, OnPool, Wait};
use kafka_coordination::transport::{Coordinator, ReadBatch, StateReader};
use kafka_coordination::{
    Clock, Error, FencingToken, GuardedRecord, LeadershipStatus, Options, SystemClock,
};
use kafka_coordination_kafka::{KafkaConfig, KafkaTransport, STATE_TOPIC};

/// Short timings: the transport needs a transaction timeout (the lease) of at least 1 s.
const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(500);
const STAGGER: Duration = Duration::from_millis(300);
/// A bound for something that should happen promptly (an election with nobody in the way, a
/// fence noticed after the link is back, a configuration error).
const PROMPT: Duration = Duration::from_secs(15);
/// How late past its turn a successor may be elected: InitProducerId, the first lease's
/// transaction, and a busy machine.
const SLACK: Duration = Duration::from_secs(5);
/// How early before the deadline a successor may be elected: both members read one clock here,
/// so only the millisecond rounding of the lease record.
const SKEW_MS: i64 = 50;

// ---- the broker ---------------------------------------------------------------------------

fn bootstrap() -> Option<String> {
    support::bootstrap(
        "Kafka leadership tests",
        "scripts/kafka-tests.sh (or scripts/kafka/with-broker.sh cargo test -p \
         kafka-coordination-kafka --test brokers leadership::)",
    )
}

fn config(bootstrap: &str) -> KafkaConfig {
    KafkaConfig::new(bootstrap, PARTITIONS)
}

fn transport(bootstrap: &str) -> KafkaTransport {
    transport_with(config(bootstrap))
}

/// The topic the tests' guarded writes go to: one partition, so offsets order every write.
const DATA_TOPIC: &str = "kafka-coordination-test-data";

/// A transport on [`DATA_TOPIC`] (created if missing), to read back guarded writes.
fn data_reader(bootstrap: &str) -> KafkaTransport {
    transport_with(KafkaConfig::new(bootstrap, 1).with_topic(DATA_TOPIC))
}

fn options() -> Options {
    Options::new()
        .lease_duration(LEASE)
        .renew_interval(RENEW)
        .challenge_stagger(STAGGER)
        .clock(SystemClock)
}

fn now_ms() -> i64 {
    SystemClock.now().0
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).expect("a short duration")
}

/// Polls `ready` (every 10 ms) until it holds; panics after `within`.
fn wait_for(what: &str, within: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) for `candidacy` to be elected.
fn elected(candidacy: Candidacy, within: Duration) -> Leadership {
    match candidacy.elected_blocking_timeout(within) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => panic!("the candidacy failed: {e}"),
        Err(c) => panic!(
            "not elected within {within:?} (last snapshot: {:?})",
            c.snapshot()
        ),
    }
}

/// Waits until `candidacy` has registered, read the role and is waiting at `rank`.
fn standing_by(candidacy: &Candidacy, rank: usize) {
    let deadline = Instant::now() + PROMPT;
    loop {
        let s = candidacy.snapshot();
        assert!(!candidacy.is_done(), "the standby ended: {s:?}");
        if s.status == Status::Standby && s.rank == Some(rank) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no standby at rank {rank} within {PROMPT:?}: {s:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// The role's current lease as a third party reads it.
fn current_lease(reader: &KafkaTransport, role: &str) -> Option<Lease> {
    describe_role_state(reader, role)
        .expect("describe_role_state")
        .lease()
        .map(|e| e.lease.clone())
}

/// Reads the role's state (bounded) until `expected` holds, and returns it. A commit is
/// acknowledged before its transaction marker makes it readable (the last stable offset moves
/// a moment later), so a read right after a write may not show it yet.
fn eventually_state(
    reader: &KafkaTransport,
    role: &str,
    what: &str,
    expected: impl Fn(&RoleState) -> bool,
) -> RoleState {
    let deadline = Instant::now() + PROMPT;
    loop {
        let state = describe_role_state(reader, role).expect("describe_role_state");
        if expected(&state) {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "not within {PROMPT:?}: {what}; the state read: lease {:?}, roster {:?}",
            state.lease(),
            state.roster().collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) until the role's readable lease is `member`'s with `token`; returns it.
fn eventually_lease(
    reader: &KafkaTransport,
    role: &str,
    member: &str,
    token: FencingToken,
) -> Lease {
    let what = format!("the lease of {member} with {token} is readable");
    eventually_state(reader, role, &what, |s| {
        s.lease()
            .is_some_and(|e| e.lease.member.as_str() == member && e.lease.token == token)
    })
    .lease()
    .map(|e| e.lease.clone())
    .expect("a lease")
}

/// Waits (bounded) until the committed guarded writes of `role` are `expected`.
fn eventually_guarded_writes(data: &KafkaTransport, role: &str, expected: &[FencingToken]) {
    let expected: Vec<String> = expected.iter().map(ToString::to_string).collect();
    let deadline = Instant::now() + PROMPT;
    loop {
        let writes = guarded_writes(data, role);
        if writes == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not within {PROMPT:?}: the guarded writes {expected:?}; read: {writes:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// The role's lease records (a tombstone is `None`) at offsets `>= from`, in offset order.
fn lease_records(reader: &KafkaTransport, role: &str, from: i64) -> (Vec<Option<Lease>>, i64) {
    let role = Role::new(role).expect("role");
    let p = reader.role_partition(&role).expect("partition");
    let batch = reader
        .read_partition(p, from, Duration::ZERO)
        .expect("read");
    let leases = batch
        .records
        .iter()
        .filter(|r| Key::decode(&r.key).ok() == Some(Key::lease(role.clone())))
        .map(|r| {
            r.value
                .as_deref()
                .map(|v| Lease::decode(v).expect("a lease record decodes"))
        })
        .collect();
    (leases, batch.end_offset)
}

fn end_of_partition(reader: &KafkaTransport, role: &str) -> i64 {
    let role = Role::new(role).expect("role");
    let p = reader.role_partition(&role).expect("partition");
    reader
        .read_partition(p, 0, Duration::ZERO)
        .expect("read")
        .end_offset
}

/// The committed guarded writes of `role` in [`DATA_TOPIC`], in offset order, as the token
/// each carried.
fn guarded_writes(data: &KafkaTransport, role: &str) -> Vec<String> {
    let prefix = format!("{role}/");
    data.read_partition(0, 0, Duration::ZERO)
        .expect("read the data topic")
        .records
        .into_iter()
        .filter(|r| r.key.starts_with(prefix.as_bytes()))
        .map(|r| String::from_utf8(r.value.unwrap_or_default()).expect("utf-8"))
        .collect()
}

fn guarded_send(
    t: &KafkaTransport,
    role: &str,
    token: FencingToken,
    seq: u32,
) -> Result<i64, TransportError> {
    let key = format!("{role}/{seq}");
    let value = token.to_string();
    t.guarded_send(
        token,
        DATA_TOPIC,
        0,
        Some(key.as_bytes()),
        Some(value.as_bytes()),
    )
}

// ---- a link that can be severed -----------------------------------------------------------

/// A member's transport whose link to the cluster the test can sever: every call then fails as
/// retriable, as when the process died (it stops renewing) or froze. Unlike dropping the
/// [`Leadership`], nothing is resigned. Calls go one at a time through a lock, so once
/// [`sever`](Link::sever) returns no call is in flight and none reaches the cluster.
#[derive(Clone)]
struct Link {
    kafka: Arc<KafkaTransport>,
    severed: Arc<AtomicBool>,
    in_call: Arc<Mutex<()>>,
    /// The last lease this member committed (`None` also after a tombstone).
    last_lease: Arc<Mutex<Option<Lease>>>,
}

impl Link {
    fn new(kafka: KafkaTransport) -> Link {
        Link {
            kafka: Arc::new(kafka),
            severed: Arc::new(AtomicBool::new(false)),
            in_call: Arc::new(Mutex::new(())),
            last_lease: Arc::new(Mutex::new(None)),
        }
    }

    fn last_lease(&self) -> Option<Lease> {
        self.last_lease.lock().expect("last lease").clone()
    }

    /// The transport itself, for guarded writes (which the driver never makes).
    fn kafka(&self) -> &KafkaTransport {
        &self.kafka
    }

    fn sever(&self) {
        self.severed.store(true, Ordering::SeqCst);
        // Wait out a call in flight.
        drop(self.in_call.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn restore(&self) {
        self.severed.store(false, Ordering::SeqCst);
    }

    fn pass<R>(
        &self,
        call: impl FnOnce(&KafkaTransport) -> Result<R, TransportError>,
    ) -> Result<R, TransportError> {
        let _one_at_a_time = self.in_call.lock().unwrap_or_else(|e| e.into_inner());
        if self.severed.load(Ordering::SeqCst) {
            return Err(TransportError::retriable(
                "the test severed this member's link to the cluster",
            ));
        }
        call(&self.kafka)
    }
}

/// A blocking transport: each call holds `in_call` until answered, so that `sever` can wait
/// out the call in flight. Drivers get it through [`OnPool`].
impl BlockingTransport for Link {
    fn partitions(&self) -> i32 {
        self.kafka.partitions()
    }
    fn acquire_epoch(
        &self,
        role: &Role,
        timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        self.pass(|k| k.acquire_epoch(role, timeout))
    }
    fn describe_epoch(&self, role: &Role) -> Result<LeadershipStatus, TransportError> {
        self.pass(|k| k.describe_epoch(role))
    }
    fn read_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch, TransportError> {
        self.pass(|k| k.read_partition(partition, from, max_wait))
    }
    fn can_long_poll(&self) -> bool {
        self.kafka.can_long_poll()
    }
    fn append(&self, p: i32, key: &[u8], value: Option<&[u8]>) -> Result<i64, TransportError> {
        self.pass(|k| k.append(p, key, value))
    }
    fn write_lease(
        &self,
        p: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        let offset = self.pass(|k| k.write_lease(p, key, value, token))?;
        *self.last_lease.lock().expect("last lease") =
            value.map(|v| Lease::decode(v).expect("lease"));
        Ok(offset)
    }
}

// ---- 1. election and renewal ---------------------------------------------------------------

#[test]
fn a_leader_renews_many_times_with_one_token() {
    let Some(b) = bootstrap() else { return };
    let role = unique("renew");
    let observer = transport(&b);
    let from = end_of_partition(&observer, &role);
    // Renew often, so that 20 renewals take seconds.
    let renew = Duration::from_millis(100);
    let started = Instant::now();
    let leader =
        blocking::acquire_leadership(transport(&b), &role, "a", options().renew_interval(renew))
            .expect("elected");
    let token = leader.token();
    eprintln!("elected in {:?} with {token}", started.elapsed());
    assert!(!token.is_no_epoch());

    // Watch the lease records: the first one and then at least 20 renewals.
    let mut leases = Vec::new();
    let mut next = from;
    wait_for("21 lease records", PROMPT, || {
        let (mut more, end) = lease_records(&observer, &role, next);
        leases.append(&mut more);
        next = end;
        leases.len() >= 21
    });
    let leases: Vec<Lease> = leases
        .into_iter()
        .map(|l| l.expect("no tombstone while leading"))
        .collect();
    for (i, l) in leases.iter().enumerate() {
        assert_eq!(l.member.as_str(), "a", "lease {i}");
        assert_eq!(
            l.token, token,
            "lease {i}: the native client (EndTxn <= v3, Produce <= v9, below transaction \
             version 2) keeps the epoch of a term constant, also on a cluster at \
             transaction.version 2"
        );
        assert_eq!(l.granted_at, leases[0].granted_at, "lease {i}: one term");
    }
    assert!(
        leases.windows(2).all(|w| w[0].deadline < w[1].deadline),
        "every renewal moves the deadline forward"
    );
    let span = leases[20].deadline.0 - leases[0].deadline.0;
    let per_renewal = span / 20;
    eprintln!("20 renewals moved the deadline by {span} ms ({per_renewal} ms each)");
    assert!(
        per_renewal >= millis(renew) - 5 && per_renewal <= 5 * millis(renew),
        "a renewal about every {renew:?}, not {per_renewal} ms"
    );
    let first = &leases[0];
    assert_eq!(
        first.deadline.0 - first.granted_at.0,
        millis(LEASE),
        "the first lease lasts the lease duration from the grant"
    );

    // The leader, the log and the coordinator agree after all those renewals.
    assert_eq!(leader.token(), token);
    assert!(!leader.is_done());
    assert_eq!(leader.snapshot().status, Status::Leading);
    assert_eq!(leader.snapshot().token, Some(token));
    let lease = eventually_lease(&observer, &role, "a", token);
    assert!(lease.deadline.0 > now_ms(), "the lease is live");
    let status = describe_leadership(&observer, &role).expect("describe");
    assert_eq!(status.token, token);
    assert!(status.authoritative(&token));

    assert!(leader.resign_blocking().is_ok(), "a clean resign");
}

// ---- 2. failover after the holder dies ------------------------------------------------------

#[test]
fn a_standby_takes_over_after_the_holder_dies_and_the_holder_is_fenced() {
    let Some(b) = bootstrap() else { return };
    let role = unique("failover");
    let observer = transport(&b);
    let data = data_reader(&b);

    let a_link = Link::new(transport(&b));
    let a = blocking::acquire_leadership(OnPool::new(a_link.clone(), 1), &role, "a", options())
        .expect("elected");
    guarded_send(a_link.kafka(), &role, a.token(), 0).expect("the leader's guarded write");
    // The lease is readable before the standby joins, so that the standby counts its turn
    // from it (one that joined earlier would find a's pair at the coordinator and wait for the
    // lease, see `a_stalled_last_stable_offset_does_not_depose_a_healthy_leader`).
    eventually_lease(&observer, &role, "a", a.token());
    let b_link = Link::new(transport(&b));
    let b_candidacy =
        blocking::start(OnPool::new(b_link.clone(), 1), &role, "b", options()).expect("start");
    standing_by(&b_candidacy, 0);

    // The holder's process dies: it stops renewing, and nothing is resigned.
    a_link.sever();
    let severed_at = now_ms();
    // The standby goes by the last lease the holder committed.
    let lease = a_link.last_lease().expect("the holder's last lease");
    assert_eq!((lease.member.as_str(), lease.token), ("a", a.token()));
    let deadline = lease.deadline.0;
    let turn = deadline; // rank 0
    eprintln!(
        "severed at {severed_at}; the last lease ends at {deadline} (in {} ms)",
        deadline - severed_at
    );
    assert!(deadline > severed_at - 100 && deadline <= severed_at + millis(LEASE));

    let b = elected(
        b_candidacy,
        Duration::from_millis((turn - now_ms()).max(0) as u64) + SLACK,
    );
    let elected_at = now_ms();
    eprintln!(
        "b elected at {elected_at}: {} ms after the turn, {} ms after the death; {} -> {}",
        elected_at - turn,
        elected_at - severed_at,
        a.token(),
        b.token()
    );
    assert!(
        elected_at >= deadline - SKEW_MS,
        "elected {} ms before the holder's deadline",
        deadline - elected_at
    );
    assert!(
        elected_at <= turn + millis(SLACK),
        "elected {} ms after its turn",
        elected_at - turn
    );
    assert_ne!(b.token(), a.token());
    assert!(b.term() > a.term(), "terms {} then {}", a.term(), b.term());
    let status = describe_leadership(&observer, &role).expect("describe");
    assert!(status.authoritative(&b.token()));
    assert!(!status.authoritative(&a.token()));

    // The dead holder never fences itself on time: it still believes it leads...
    assert!(!a.is_done());
    // ...until its link is back: its next lease write is fenced by the broker.
    a_link.restore();
    assert!(
        a.done_blocking_timeout(PROMPT),
        "the deposed holder learns it within {PROMPT:?}: {:?}",
        a.snapshot()
    );
    match a.err() {
        Some(Error::Fenced { token }) => assert_eq!(token, a.token()),
        other => panic!("expected Fenced, got {other:?}"),
    }
    // And its guarded writes with the old token are refused.
    let err = guarded_send(a_link.kafka(), &role, a.token(), 1).expect_err("a deposed write");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert_eq!(a_link.kafka().held_token(), None);
    guarded_send(b_link.kafka(), &role, b.token(), 2).expect("the new leader's guarded write");
    // The paused, superseded holder resumed; it never mints an epoch of its own (the library
    // decides every InitProducerId), so the current leader is not fenced by it: b keeps its
    // pair over several more renewals.
    thread::sleep(RENEW * 4);
    assert!(!b.is_done(), "b lost its role: {:?}", b.err());
    let status = describe_leadership(&observer, &role).expect("describe");
    assert!(status.authoritative(&b.token()), "{status:?}");

    // Only the writes of each term's holder are readable.
    eventually_guarded_writes(&data, &role, &[a.token(), b.token()]);
    eventually_lease(&observer, &role, "b", b.token());
    assert!(b.resign_blocking().is_ok());
}

// ---- 3. resign hands over at once -----------------------------------------------------------

#[test]
fn a_resign_hands_over_before_the_lease_would_have_ended() {
    let Some(b) = bootstrap() else { return };
    let role = unique("resign");
    let observer = transport(&b);
    let a = blocking::acquire_leadership(transport(&b), &role, "a", options()).expect("elected");
    eventually_lease(&observer, &role, "a", a.token());
    let b_candidacy = blocking::start(transport(&b), &role, "b", options()).expect("start");
    standing_by(&b_candidacy, 0);

    let old_deadline = current_lease(&observer, &role)
        .expect("a's lease")
        .deadline
        .0;
    let started = Instant::now();
    let resigned_at = now_ms();
    assert!(a.resign_blocking().is_ok(), "a clean resign");
    let resign_took = started.elapsed();
    assert!(a.is_done());
    assert!(a.err().is_none());
    let b = elected(b_candidacy, PROMPT);
    let elapsed = started.elapsed();
    let elected_at = now_ms();
    eprintln!(
        "resign took {resign_took:?}; b elected {elapsed:?} after the resign began, {} ms \
         before a's lease would have ended",
        old_deadline - elected_at
    );
    assert!(
        elapsed < LEASE,
        "the hand-over took {elapsed:?}, no faster than waiting out a {LEASE:?} lease"
    );
    assert!(
        elected_at < old_deadline,
        "elected at {elected_at}, not before a's lease would have ended at {old_deadline} \
         (the resign began at {resigned_at})"
    );
    assert_ne!(b.token(), a.token());
    assert!(b.term() > a.term(), "terms {} then {}", a.term(), b.term());
    eventually_lease(&observer, &role, "b", b.token());
    eventually_state(&observer, &role, "the resigned member deregistered", |s| {
        s.roster().map(|(m, _)| m.as_str()).eq(["b"])
    });
    assert!(b.resign_blocking().is_ok());
}

/// A resign fences on the real broker too, with nobody to take over: once `resign` returns the
/// coordinator holds a newer pair (minted on the way out and released), so the resigned token
/// is not authoritative and no write with it is accepted; the lease is cleared, and the term
/// was the offset of the term's first lease record.
#[test]
fn a_resign_without_a_successor_leaves_the_old_pair_unauthoritative() {
    let Some(b) = bootstrap() else { return };
    let role = unique("resign-alone");
    let observer = transport(&b);
    let from = end_of_partition(&observer, &role);
    let a_kafka = Arc::new(transport(&b));
    let a = blocking::start_shared(a_kafka.clone(), &role, "a", options())
        .expect("start")
        .elected_blocking()
        .expect("elected");
    let old = a.token();
    assert!(describe_leadership(&observer, &role)
        .expect("describe")
        .authoritative(&old));
    // The term is the offset of the term's first lease record.
    let r = Role::new(role.clone()).expect("role");
    let p = observer.role_partition(&r).expect("partition");
    // The commit marker (and so the last stable offset) may land a moment after the election
    // returns: wait until the lease record is readable.
    let first_lease = || {
        observer
            .read_partition(p, from, Duration::ZERO)
            .expect("read")
            .records
            .into_iter()
            .find(|rec| {
                Key::decode(&rec.key).ok() == Some(Key::lease(r.clone()))
                    && rec
                        .value
                        .as_deref()
                        .is_some_and(|v| Lease::decode(v).is_ok_and(|l| l.token == old))
            })
    };
    wait_for(
        "the term's first lease record to be readable",
        PROMPT,
        || first_lease().is_some(),
    );
    let first_lease = first_lease().expect("the term's first lease record");
    assert_eq!(
        a.term(),
        first_lease.offset,
        "the term is that record's offset"
    );
    guarded_send(&a_kafka, &role, old, 0).expect("the leader's guarded write");

    assert!(a.resign_blocking().is_ok(), "a clean resign: {:?}", a.err());
    let status = describe_leadership(&observer, &role).expect("describe");
    eprintln!("after a resign with no successor: {status:?} (was {old})");
    assert!(!status.authoritative(&old), "{status:?}");
    assert_ne!(status.token, old);
    assert_eq!(a_kafka.held_token(), None, "the producer was released");
    let err = guarded_send(&a_kafka, &role, old, 1).expect_err("a resigned token");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    eventually_state(
        &observer,
        &role,
        "the lease cleared and the roster empty",
        |s| s.lease().is_none() && s.roster().next().is_none(),
    );
    // A new member is elected at once, with a larger term.
    let c = blocking::acquire_leadership(transport(&b), &role, "c", options()).expect("elected");
    assert!(c.term() > a.term(), "terms {} then {}", a.term(), c.term());
    assert!(c.resign_blocking().is_ok());
}

/// A lease commit whose answer is lost (the broker committed; the client's request timed out)
/// is committed again, never aborted: the leader keeps its role and its token. The broker's
/// answers to EndTxn are held by a proxy for longer than the client's request timeout.
#[test]
fn a_commit_that_times_out_on_the_client_does_not_cost_the_leader_its_role() {
    let Some(b) = bootstrap() else { return };
    let role = unique("commit-timeout");
    let observer = transport(&b);
    let broker = b.split(',').next().expect("a broker").trim().to_owned();
    let proxy = proxy::Proxy::start(&broker);
    // Every native connection of this member goes through the proxy; its requests time out
    // after 700 ms (the held answer comes after 1.5 s, on a connection the client gave up).
    let cfg = KafkaConfig::new(proxy.addr.clone(), PARTITIONS)
        .with_address_override(broker.clone(), proxy.addr.clone())
        .with_request_timeout(Duration::from_millis(700))
        .with_operation_timeout(Duration::from_secs(10));
    let member = transport_with(cfg);
    let leader = blocking::acquire_leadership(
        member,
        &role,
        "a",
        options()
            .lease_duration(Duration::from_secs(6))
            .renew_interval(Duration::from_millis(500)),
    )
    .expect("elected");
    let token = leader.token();
    let before = proxy.forwarded(proxy::END_TXN);
    assert!(before >= 1, "the first lease went through the proxy");
    // The next two lease commits: their answers are held past the request timeout.
    proxy.hold_next(proxy::END_TXN, 2, Duration::from_millis(1500));
    wait_for("two held commit answers", PROMPT, || proxy.held() >= 2);
    // The leader retried the commits (the coordinator answers NONE for a committed
    // transaction) and renews on: same token, role kept, no abort, no fence.
    wait_for("renewals after the held commits", PROMPT, || {
        proxy.forwarded(proxy::END_TXN) >= before + 5
    });
    assert!(
        !leader.is_done(),
        "the leader lost its role: {:?}",
        leader.err()
    );
    assert_eq!(leader.token(), token);
    let status = describe_leadership(&observer, &role).expect("describe");
    assert!(status.authoritative(&token), "{status:?}");
    eventually_lease(&observer, &role, "a", token);
    eprintln!(
        "held {} commit answers; {} EndTxn requests in all; the leader kept {token}",
        proxy.held(),
        proxy.forwarded(proxy::END_TXN) - before
    );
    assert!(leader.resign_blocking().is_ok());
}

/// A leader cut off from the cluster (every connection through a proxy that stops answering)
/// does not step down by itself, and its guarded writes never succeed once a successor exists:
/// during the cut they fail (the broker does not answer), and once the link is back the broker
/// refuses them as fenced. None of them is in the data topic; the successor's is.
#[test]
fn a_cut_off_leaders_guarded_writes_fail_once_a_successor_exists() {
    let Some(b) = bootstrap() else { return };
    let role = unique("cut-off");
    let observer = transport(&b);
    let data = data_reader(&b);
    let broker = b.split(',').next().expect("a broker").trim().to_owned();
    let proxy = proxy::Proxy::start(&broker);
    let cfg = KafkaConfig::new(proxy.addr.clone(), PARTITIONS)
        .with_address_override(broker.clone(), proxy.addr.clone())
        .with_request_timeout(Duration::from_millis(700))
        .with_operation_timeout(Duration::from_secs(3));
    let a_link = Link::new(transport_with(cfg));
    let a = blocking::acquire_leadership(OnPool::new(a_link.clone(), 1), &role, "a", options())
        .expect("elected");
    guarded_send(a_link.kafka(), &role, a.token(), 0).expect("the leader's guarded write");
    eventually_lease(&observer, &role, "a", a.token());
    let b_link = Link::new(transport(&b));
    let b_candidacy =
        blocking::start(OnPool::new(b_link.clone(), 1), &role, "b", options()).expect("start");
    standing_by(&b_candidacy, 0);

    proxy.freeze();
    // The successor takes over once the last lease the cut-off leader wrote ran out.
    let b = elected(b_candidacy, LEASE * 2 + SLACK);
    assert!(b.term() > a.term(), "terms {} then {}", a.term(), b.term());
    // The cut-off leader saw no fence: it still believes it leads, and its health says that
    // its lease ran out by its own clock, what an application that stops on time alone (as
    // `run --stop-at-deadline` does) goes by.
    assert!(!a.is_done(), "{:?}", a.snapshot());
    wait_for("the cut-off leader's lease to run out", PROMPT, || {
        let h = a.health();
        h.lease_deadline.is_some_and(|d| h.now >= d)
    });
    assert!(a.health().leading, "{:?}", a.health());
    // Its guarded write during the cut fails: the broker does not answer.
    let during = guarded_send(a_link.kafka(), &role, a.token(), 1)
        .expect_err("a guarded write through a frozen link");
    eprintln!("during the cut: {during}");

    proxy.thaw();
    // Once the link is back, the broker refuses its writes as fenced (the first attempts may
    // still fail as transient, while the client probes the broker it saw go silent; none
    // succeeds), and it learns it lost.
    let deadline = Instant::now() + PROMPT;
    let mut seq = 2;
    let after = loop {
        let err = guarded_send(a_link.kafka(), &role, a.token(), seq).expect_err("a deposed write");
        if err.kind() != ErrorKind::Retriable || Instant::now() >= deadline {
            break err;
        }
        seq += 1;
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(after.kind(), ErrorKind::Fenced, "{after}");
    assert!(
        a.done_blocking_timeout(PROMPT),
        "the deposed leader learns it within {PROMPT:?}: {:?}",
        a.snapshot()
    );
    match a.err() {
        Some(Error::Fenced { token }) => assert_eq!(token, a.token()),
        other => panic!("expected Fenced, got {other:?}"),
    }
    guarded_send(b_link.kafka(), &role, b.token(), 0).expect("the successor's guarded write");
    eventually_guarded_writes(&data, &role, &[a.token(), b.token()]);
    assert!(b.resign_blocking().is_ok());
}

// ---- 4. the third-party check ---------------------------------------------------------------

#[test]
fn a_third_party_sees_only_the_current_token_as_authoritative() {
    let Some(b) = bootstrap() else { return };
    let role = unique("third-party");
    // The third party is not a member: a transport of its own that never joins.
    let third = KafkaTransport::new(config(&b)).expect("transport");
    let data = data_reader(&b);

    let before = describe_leadership(&third, &role).expect("describe");
    assert_eq!(
        before,
        LeadershipStatus::NOT_FOUND,
        "no member ever took it"
    );
    assert!(!before.authoritative(&FencingToken::NO_EPOCH));

    let a_kafka = Arc::new(transport(&b));
    let a = blocking::start_shared(a_kafka.clone(), &role, "a", options())
        .expect("start")
        .elected_blocking()
        .expect("elected");
    let status = describe_leadership(&third, &role).expect("describe");
    eprintln!("while a leads: {status:?}");
    assert_eq!(status.token, a.token());
    assert!(status.authoritative(&a.token()));
    assert!(!status.authoritative(&FencingToken::NO_EPOCH));

    eventually_lease(&third, &role, "a", a.token());
    let b_kafka = Arc::new(transport(&b));
    let b_candidacy =
        blocking::start_shared(b_kafka.clone(), &role, "b", options()).expect("start");
    standing_by(&b_candidacy, 0);
    assert!(a.resign_blocking().is_ok());
    let b = elected(b_candidacy, PROMPT);

    let status = describe_leadership(&third, &role).expect("describe");
    eprintln!("after the hand-over: {status:?}");
    assert!(status.authoritative(&b.token()));
    assert!(!status.authoritative(&a.token()), "the deposed token");
    assert!(!status.authoritative(&FencingToken::NO_EPOCH));
    assert_ne!(b.token(), a.token());
    assert!(b.term() > a.term(), "terms {} then {}", a.term(), b.term());

    // a resigned: it superseded its own pair before it left and its transport released the
    // producer, so a guarded write with the deposed token is refused and never readable.
    assert_eq!(a_kafka.held_token(), None);
    let err = guarded_send(&a_kafka, &role, a.token(), 0).expect_err("the deposed token");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    eprintln!("deposed guarded write: {err}");
    guarded_send(&b_kafka, &role, b.token(), 1).expect("the current token");
    eventually_guarded_writes(&data, &role, &[b.token()]);
    assert!(b.resign_blocking().is_ok());
}

// ---- 5. an aborted lease write is invisible -------------------------------------------------

#[test]
fn a_lease_write_left_open_by_a_dead_leader_is_never_read() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let Some(b) = bootstrap() else { return };
    let role_name = unique("open-lease");
    let role = Role::new(role_name.clone()).expect("role");
    // A state topic of its own: the open transaction holds back the last stable offset of its
    // partition, which would stall every other test's role on that partition.
    let state = config(&b).with_topic(unique("coordination-open-lease"));
    let observer = transport_with(state.clone());
    let p = observer.role_partition(&role).expect("partition");
    let ghost_member = MemberId::new("ghost").expect("member");

    // A leader process, written with a raw producer so that it can die mid-transaction: it
    // registers, mints the epoch and commits a lease...
    observer
        .append(
            p,
            &Key::registration(role.clone(), ghost_member.clone()).encode(),
            Some(
                &Registration {
                    member: ghost_member.clone(),
                    registered_at: SystemClock.now(),
                }
                .encode(),
            ),
        )
        .expect("register the ghost");
    let ghost: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", role.as_str())
        // Long: the takeover, not the coordinator's timeout, must abort the open write.
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("raw producer");
    ghost.init_transactions(PROMPT).expect("init");
    let ghost_token = observer.describe_epoch(&role).expect("describe").token;
    let lease_key = Key::lease(role.clone()).encode();
    let now = SystemClock.now();
    let committed = Lease {
        member: ghost_member.clone(),
        token: ghost_token,
        granted_at: now,
        deadline: now.saturating_add(LEASE),
    };
    let write = |lease: &Lease| {
        ghost.begin_transaction().expect("begin");
        ghost
            .send(
                BaseRecord::to(state.topic())
                    .partition(p)
                    .key(&lease_key[..])
                    .payload(&lease.encode()[..]),
            )
            .map_err(|(e, _)| e)
            .expect("send");
        ghost.flush(PROMPT).expect("flush");
    };
    write(&committed);
    ghost.commit_transaction(PROMPT).expect("commit");
    // ...then dies in the middle of its next renewal, which would have held the role for an
    // hour: the transaction stays open.
    let open = Lease {
        deadline: now.saturating_add(Duration::from_secs(3600)),
        ..committed.clone()
    };
    write(&open);
    let status = observer.describe_epoch(&role).expect("describe");
    assert_eq!(status.state.as_ref().map(|s| s.as_str()), Some("Ongoing"));
    eventually_state(
        &observer,
        &role_name,
        "readers see the committed lease, not the open one",
        |s| s.lease().map(|e| &e.lease) == Some(&committed),
    );

    // A member joins. The open transaction holds back the last stable offset (even its own
    // registration is not readable yet), but the committed lease ends on time: it challenges,
    // which fences the dead leader and aborts its open write.
    let b_candidacy =
        blocking::start(transport_with(state.clone()), &role_name, "b", options()).expect("start");
    let turn = committed.deadline.0;
    let b = elected(
        b_candidacy,
        Duration::from_millis((turn - now_ms()).max(0) as u64) + SLACK,
    );
    let elected_at = now_ms();
    eprintln!(
        "b elected {} ms after the committed lease ended: {ghost_token} -> {}",
        elected_at - turn,
        b.token()
    );
    assert!(
        elected_at >= turn - SKEW_MS,
        "not before the committed lease ended"
    );

    let status = describe_leadership(&observer, &role_name).expect("describe");
    assert!(status.authoritative(&b.token()));
    assert!(!status.authoritative(&ghost_token));
    eventually_lease(&observer, &role_name, "b", b.token());
    let (leases, _) = lease_records(&observer, &role_name, 0);
    assert!(
        !leases.contains(&Some(open.clone())),
        "the aborted lease write is never readable: {leases:?}"
    );
    assert_eq!(leases.first(), Some(&Some(committed)));
    assert!(leases[1..]
        .iter()
        .all(|l| l.as_ref().is_some_and(|l| l.member.as_str() == "b")));
    // The dead leader's commit, had it come back, is fenced.
    assert!(ghost.commit_transaction(PROMPT).is_err());
    drop(ghost);
    assert!(b.resign_blocking().is_ok());
}

/// Issue 11, "stalled reads across roles": members read their role's partition only up to its
/// last stable offset, which **any** open transaction on that partition holds back, also one
/// of another role whose holder stalled or died mid-write (until the coordinator aborts it,
/// after that transaction's timeout plus up to
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms`, 10 s by default). The standby
/// sees none of its healthy leader's renewals meanwhile; its reads report the stall (the last
/// stable offset is below the high watermark) and its check finds the leader's pair quiet at
/// the coordinator, so it does not take the lease it read for expired, and the leader keeps
/// its role.
#[test]
fn a_stalled_last_stable_offset_does_not_depose_a_healthy_leader() {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let Some(b) = bootstrap() else { return };
    // One partition, so that the two roles share it.
    let state = KafkaConfig::new(b.clone(), 1).with_topic(unique("coordination-stalled"));
    let observer = transport_with(state.clone());
    let role = unique("healthy");
    let a = blocking::acquire_leadership(transport_with(state.clone()), &role, "a", options())
        .expect("elected");
    eventually_lease(&observer, &role, "a", a.token());
    let b_candidacy =
        blocking::start(transport_with(state.clone()), &role, "b", options()).expect("start");
    standing_by(&b_candidacy, 0);

    // The holder of another role stalls in the middle of a write to the same partition.
    let stalled: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", unique("stalled"))
        .set("transaction.timeout.ms", "20000")
        .create()
        .expect("raw producer");
    stalled.init_transactions(PROMPT).expect("init");
    stalled.begin_transaction().expect("begin");
    stalled
        .send(
            BaseRecord::to(state.topic())
                .partition(0)
                .key("x")
                .payload("stalled"),
        )
        .map_err(|(e, _)| e)
        .expect("send");
    stalled.flush(PROMPT).expect("flush");

    // The standby's reads stall: nothing past the open transaction is readable.
    let p = observer
        .role_partition(&Role::new(role.clone()).expect("role"))
        .expect("partition");
    wait_for("a stalled read", PROMPT, || {
        observer
            .read_partition(p, 0, Duration::ZERO)
            .is_ok_and(|batch| batch.stalled)
    });
    // a is healthy and renews every 500 ms, so it keeps the role.
    let deposed = a.done_blocking_timeout(LEASE * 3);
    eprintln!(
        "after {:?}: a deposed: {deposed} ({:?}); b: {:?}",
        LEASE * 3,
        a.err(),
        b_candidacy.snapshot()
    );
    assert!(!deposed, "a healthy leader was deposed: {:?}", a.err());
    assert!(describe_leadership(&observer, &role)
        .expect("describe")
        .authoritative(&a.token()));
    assert_eq!(b_candidacy.snapshot().status, Status::Standby);
    drop(stalled);
    assert!(a.resign_blocking().is_ok());
}

/// DescribeTransactions tells when an open transaction began, and the status carries it (one
/// role at a time and batched): a standby whose reads stall uses it to tell a holder killed in
/// the middle of a write from a renewal in flight. A committed transaction has no start.
#[test]
fn an_open_transaction_is_described_with_the_instant_it_began() {
    use kafka_coordination::core::leadership_status::TransactionState;
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let Some(b) = bootstrap() else { return };
    let state = KafkaConfig::new(b.clone(), 1).with_topic(unique("coordination-open"));
    let observer = transport_with(state.clone());
    let id = unique("open");
    let role = Role::new(id.clone()).expect("role");
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("transactional.id", &id)
        .set("transaction.timeout.ms", "20000")
        .create()
        .expect("raw producer");
    producer.init_transactions(PROMPT).expect("init");
    let before = SystemClock.now();
    producer.begin_transaction().expect("begin");
    producer
        .send(
            BaseRecord::to(state.topic())
                .partition(0)
                .key("x")
                .payload("open"),
        )
        .map_err(|(e, _)| e)
        .expect("send");
    producer.flush(PROMPT).expect("flush");
    let after = SystemClock.now();

    let one = observer.describe_epoch(&role).expect("describe");
    let batched = observer.describe_epochs(std::slice::from_ref(&role));
    assert_eq!(batched.len(), 1);
    assert_eq!(batched[0].as_ref().expect("batched describe"), &one);
    assert_eq!(one.state, Some(TransactionState::Ongoing), "{one:?}");
    let began = one
        .transaction_started
        .expect("an open transaction has a start");
    // The broker runs on this machine: its clock is this one's.
    assert!(
        began.0 >= before.0 - 1_000 && began.0 <= after.0 + 1_000,
        "began {began:?}, between {before:?} and {after:?} expected"
    );

    producer.commit_transaction(PROMPT).expect("commit");
    // The commit returns once PrepareCommit is logged; the coordinator completes it soon after.
    let mut done = observer.describe_epoch(&role).expect("describe");
    wait_for("the commit to complete", PROMPT, || {
        done = observer.describe_epoch(&role).expect("describe");
        done.state == Some(TransactionState::CompleteCommit)
    });
    assert_eq!(done.transaction_started, None, "{done:?}");
}

// ---- 6. a wrong partition count ------------------------------------------------------------

/// A role whose partition differs between `PARTITIONS` and `other` partitions.
fn role_moved_by(other: i32) -> String {
    use kafka_coordination::core::partition::role_partition;
    loop {
        let name = unique("partitions");
        let role = Role::new(name.clone()).expect("role");
        if role_partition(&role, other).ok() != role_partition(&role, PARTITIONS).ok() {
            return name;
        }
    }
}

fn refused_promptly(candidacy: Candidacy, wrong: i32) {
    let started = Instant::now();
    let err = match candidacy.elected_blocking_timeout(PROMPT) {
        Ok(Ok(l)) => panic!(
            "elected with a wrong partition count ({wrong}): {}",
            l.token()
        ),
        Ok(Err(e)) => e,
        Err(c) => panic!(
            "a wrong partition count ({wrong}) was not refused within {PROMPT:?}: {:?}",
            c.snapshot()
        ),
    };
    eprintln!(
        "partitions {wrong} refused in {:?}: {err}",
        started.elapsed()
    );
    match &err {
        Error::Transport(e) => assert_eq!(e.kind(), ErrorKind::Config, "{e}"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&format!("{PARTITIONS} partitions")),
        "the message names the real count: {message}"
    );
}

#[test]
fn a_member_configured_with_another_partition_count_is_refused() {
    let Some(b) = bootstrap() else { return };
    transport(&b); // the state topic exists with PARTITIONS partitions

    // The transport says 8 (the count is given once, to the transport; the options have no
    // count of their own to disagree with): the topic check refuses it, and nothing is written
    // where correctly configured members look.
    for wrong in [8, 32] {
        let role = role_moved_by(wrong);
        let t = KafkaTransport::new(KafkaConfig::new(b.clone(), wrong)).expect("transport");
        let c = blocking::start(t, &role, "a", options()).expect("start");
        refused_promptly(c, wrong);
        assert_eq!(
            describe_role_state(&transport(&b), &role)
                .expect("state")
                .len(),
            0,
            "nothing was written for the role"
        );
    }
}

/// A guarded write to a partition or a topic that does not exist is a configuration error
/// naming it, and it costs the leader nothing: the write waits for its partitions' leaders
/// before it takes the role's transactional session, so the lease renewals go on. Before, the
/// write held the session while it retried for the whole operation timeout (30 s), no renewal
/// got through, and the standby took the role from a healthy leader after one lease. A record
/// the broker refuses (no key, for a compacted topic) is a configuration error too, and the
/// next write ends the transaction it left open.
#[test]
fn a_guarded_write_to_a_partition_that_does_not_exist_leaves_the_leader_in_charge() {
    let Some(b) = bootstrap() else { return };
    let role = unique("missing-partition");
    drop(data_reader(&b)); // DATA_TOPIC exists, with 1 partition
    let missing_topic = unique("missing-data");
    // A lease far shorter than the 30 s the write used to hold the session.
    let options = || {
        options()
            .lease_duration(Duration::from_secs(6))
            .renew_interval(Duration::from_secs(1))
    };
    let observer = transport(&b);
    let kafka = Arc::new(transport(&b));
    let a = blocking::acquire_leadership(kafka.clone(), &role, "a", options()).expect("elected");
    let token = a.token();
    eventually_lease(&observer, &role, "a", token);
    let standby = blocking::start(transport(&b), &role, "b", options()).expect("start");
    standing_by(&standby, 0);

    for (topic, partition, named) in [
        (
            DATA_TOPIC,
            7,
            format!("partition 7 of topic {DATA_TOPIC} does not exist"),
        ),
        (
            missing_topic.as_str(),
            0,
            format!("topic {missing_topic} does not exist"),
        ),
        // The partition exists, but the compacted topic refuses a record without a key.
        (DATA_TOPIC, 0, "INVALID_RECORD".to_owned()),
    ] {
        let started = Instant::now();
        let err = a
            .guarded_write_blocking(&[GuardedRecord {
                topic,
                partition,
                key: None,
                value: Some(b"lost"),
                headers: &[],
            }])
            .expect_err("a partition that does not exist");
        eprintln!("{topic}/{partition}: {:?}: {err}", started.elapsed());
        match &err {
            Error::Transport(e) => assert_eq!(e.kind(), ErrorKind::Config, "{e}"),
            other => panic!("expected a configuration error, got {other:?}"),
        }
        assert!(err.to_string().contains(&named), "{err}");
        assert!(!a.is_done(), "the leader's term ended: {:?}", a.err());
    }

    // Still in charge: the coordinator holds a's pair, a's write with it goes through, and the
    // standby still stands by.
    let status = describe_leadership(&observer, &role).expect("describe");
    assert!(status.authoritative(&token), "{status:?}");
    a.guarded_write_blocking(&[GuardedRecord {
        topic: DATA_TOPIC,
        partition: 0,
        key: Some(format!("{role}/0").as_bytes()),
        value: Some(token.to_string().as_bytes()),
        headers: &[],
    }])
    .expect("the leader still writes");
    assert!(!a.is_done(), "{:?}", a.err());
    assert_eq!(standby.snapshot().status, Status::Standby);
    drop(standby);
    a.resign_blocking().expect("resign");
}

// ---- 7. every driver once -------------------------------------------------------------------

/// What every driver must show after its acquire: the log, the coordinator and the handle
/// agree; and after its resign: no lease, no registration.
fn check_elected(observer: &KafkaTransport, role: &str, leader: &Leadership) {
    assert!(!leader.is_done());
    eventually_lease(observer, role, "m", leader.token());
}

fn check_resigned(
    observer: &KafkaTransport,
    role: &str,
    leader: &Leadership,
    resigned: Result<(), Error>,
) {
    assert!(resigned.is_ok(), "a clean resign: {resigned:?}");
    assert!(leader.is_done());
    eventually_state(
        observer,
        role,
        "the lease was cleared and the registration withdrawn",
        |s| s.lease().is_none() && s.is_empty(),
    );
}

#[test]
fn the_blocking_driver_acquires_and_resigns() {
    let Some(b) = bootstrap() else { return };
    let role = unique("blocking");
    let observer = transport(&b);
    let c = blocking::start(transport(&b), &role, "m", options()).expect("start");
    let leader = elected(c, PROMPT);
    check_elected(&observer, &role, &leader);
    assert!(describe_leadership(&observer, &role)
        .expect("describe")
        .authoritative(&leader.token()));
    let err = leader.resign_blocking();
    check_resigned(&observer, &role, &leader, err);
}

/// The same round trip on an async driver: `$rt` is its module, `$sleep` its timer.
macro_rules! async_round_trip {
    ($rt:ident, $sleep:expr) => {
        async {
            use futures_lite::future::or;
            let Some(b) = bootstrap() else { return };
            let role = unique(stringify!($rt));
            let observer = Arc::new(transport(&b));
            let acquire =
                kafka_coordination::$rt::acquire_leadership(transport(&b), &role, "m", options());
            let leader = or(async { Some(acquire.await) }, async {
                $sleep(PROMPT).await;
                None
            })
            .await
            .unwrap_or_else(|| panic!("not elected within {PROMPT:?}"))
            .expect("elected");
            check_elected(&observer, &role, &leader);
            let status = kafka_coordination::$rt::describe_leadership(&observer, &role)
                .await
                .expect("describe");
            assert!(status.authoritative(&leader.token()));
            let state = kafka_coordination::$rt::describe_role_state(&observer, &role)
                .await
                .expect("state");
            assert_eq!(state.len(), 1);
            let err = or(async { Some(leader.resign().await) }, async {
                $sleep(PROMPT).await;
                None
            })
            .await
            .unwrap_or_else(|| panic!("not resigned within {PROMPT:?}"));
            check_resigned(&observer, &role, &leader, err);
        }
    };
}
#[test]
fn the_tokio_driver_acquires_and_resigns() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async_round_trip!(tokio_driver, tokio::time::sleep));
}
#[test]
fn the_smol_driver_acquires_and_resigns() {
    smol::block_on(async_round_trip!(smol_driver, |d| async move {
        smol::Timer::after(d).await;
    }));
}
#[test]
fn the_async_std_driver_acquires_and_resigns() {
    async_std::task::block_on(async_round_trip!(async_std_driver, async_std::task::sleep));
}

/// Many candidacies on one host against the real broker: 40 roles led by one host (one
/// client with two connections per broker, four I/O threads), a standby host for all of them,
/// then the leading client's transport dropped from under it (its link cut: it cannot resign):
/// every role moves to the standby host, each by its lease deadline plus slack, and the old
/// host's terms meet the fence when the link comes back.
#[test]
fn a_host_leads_many_roles_and_hands_them_all_over_when_it_dies() {
    use kafka_coordination::cuttable_link::Link;
    use kafka_coordination::host::HostOptions;
    let Some(b) = bootstrap() else { return };
    // Forty roles renew on one host: with the 2 s lease of the other tests, a loaded machine
    // (or a slower ZooKeeper-mode coordinator) delays a renewal past a lease's end and the
    // standby rightly takes the role; a longer lease keeps the verdict off the scheduler.
    let (lease, renew) = (Duration::from_secs(6), Duration::from_secs(1));
    let options = || options().lease_duration(lease).renew_interval(renew);
    let roles: Vec<String> = (0..40).map(|i| unique(&format!("host-{i}"))).collect();
    let observer = transport(&b);
    let client = |b: &str| transport_with(config(b).with_connections_per_broker(2));
    let link_a = Link::new(client(&b));
    let host_a = blocking::host(
        Arc::new(link_a.clone()),
        HostOptions::new().max_in_flight(4),
    )
    .expect("host a");
    let host_b =
        blocking::host(Arc::new(client(&b)), HostOptions::new().max_in_flight(4)).expect("host b");
    let a_leads: Vec<Leadership> = roles
        .iter()
        .map(|r| host_a.start(r, "a", options()).expect("a starts"))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|c| elected(c, PROMPT))
        .collect();
    for (l, r) in a_leads.iter().zip(&roles) {
        assert!(describe_leadership(&observer, r)
            .expect("describe")
            .authoritative(&l.token()));
    }
    let b_waits: Vec<Candidacy> = roles
        .iter()
        .map(|r| host_b.start(r, "b", options()).expect("b starts"))
        .collect();
    for c in &b_waits {
        standing_by(c, 0);
    }
    // Two renewals of every role on a's host, with one token each.
    let before = host_b.stats();
    let renewed = Instant::now() + renew * 3;
    wait_for("two renew intervals", renew * 4, || {
        Instant::now() >= renewed
    });
    let lost: Vec<_> = a_leads
        .iter()
        .filter(|l| l.is_done())
        .map(|l| (l.role().to_owned(), l.err()))
        .collect();
    assert!(lost.is_empty(), "a lost roles: {lost:?}");
    // b's standbys follow a's renewals through the transport's tail (its Fetch long polls),
    // not with reads of their own: a renewal answers their long polls, and the next long poll
    // is served from the tail too.
    let after = host_b.stats();
    let (reads, tailed) = (
        after.reads - before.reads,
        after.tailed_reads - before.tailed_reads,
    );
    assert!(
        tailed > 0 && reads < tailed,
        "b's standbys read {reads} times and {tailed} times from the tail in two renew intervals"
    );
    link_a.cut();
    let cut_at = now_ms();
    let b_leads: Vec<Leadership> = b_waits
        .into_iter()
        .map(|c| elected(c, lease + SLACK))
        .collect();
    let moved_in = now_ms() - cut_at;
    for (l, r) in b_leads.iter().zip(&roles) {
        // b's first lease is committed when b reports its election, but the coordinator
        // answers a commit before its marker reaches the partition: the observer's read may
        // end a moment before the lease (it once named a's lease right after the move).
        eventually_lease(&observer, r, "b", l.token());
        assert!(describe_leadership(&observer, r)
            .expect("describe")
            .authoritative(&l.token()));
    }
    assert!(
        moved_in <= millis(lease + SLACK),
        "the last role moved {moved_in} ms after the cut"
    );
    link_a.restore();
    for l in &a_leads {
        assert!(
            l.done_blocking_timeout(PROMPT),
            "{} still believes it leads",
            l.role()
        );
        assert!(
            matches!(l.err(), Some(Error::Fenced { .. })),
            "{:?}",
            l.err()
        );
    }
    for l in b_leads {
        l.resign_blocking().expect("a clean resign");
    }
}

/// A guarded write with a consumer group's offsets on the real broker: the offsets are
/// committed with the records (read back with OffsetFetch, require_stable), and once another
/// client took the role the old pair's write with offsets is refused as a whole: the group's
/// position does not move.
#[test]
fn offsets_commit_with_the_guarded_write_and_a_deposed_pairs_are_refused() {
    use kafka_coordination::transport::{ConsumedOffset, GroupOffsets};
    let Some(b) = bootstrap() else { return };
    let _ = data_reader(&b);
    let role = Role::new(unique("offsets")).unwrap();
    let group = unique("offsets-group");
    let (a, c) = (transport(&b), transport(&b));
    let position = |t: &KafkaTransport| t.committed_offsets(&group, &[(DATA_TOPIC, 0)]).unwrap();
    assert_eq!(position(&a), [None], "a new group has no offsets");
    let old = a.acquire_epoch(&role, LEASE).expect("acquire");
    let key = format!("{role}/result");
    let headers: &[(&str, Option<&[u8]>)] = &[("input-offset", Some(b"41")), ("none", None)];
    let record = |v: &'static [u8]| {
        GuardedRecord::new(DATA_TOPIC, 0, Some(key.as_bytes()), Some(v)).with_headers(headers)
    };
    let at = |next| {
        [ConsumedOffset {
            topic: DATA_TOPIC,
            partition: 0,
            next_offset: next,
            metadata: Some("by a"),
        }]
    };
    let first = at(42);
    let offsets = GroupOffsets {
        group: &group,
        offsets: &first,
    };
    a.guarded_write_with_offsets(old, &[record(b"r41")], offsets)
        .expect("written with offsets");
    assert_eq!(position(&c), [Some(42)], "committed with the transaction");
    // Only offsets, no records: allowed too.
    let second = at(43);
    let offsets = GroupOffsets {
        group: &group,
        offsets: &second,
    };
    a.guarded_write_with_offsets(old, &[], offsets)
        .expect("offsets alone");
    assert_eq!(position(&c), [Some(43)]);
    // Another client takes the role: a's pair is superseded, its next write refused whole.
    let new = c.acquire_epoch(&role, LEASE).expect("takeover");
    assert_ne!(new, old);
    let stale = at(99);
    let offsets = GroupOffsets {
        group: &group,
        offsets: &stale,
    };
    let err = a
        .guarded_write_with_offsets(old, &[record(b"zombie")], offsets)
        .expect_err("a deposed pair");
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    assert_eq!(
        position(&c),
        [Some(43)],
        "the deposed pair's offsets are not visible"
    );
    let third = at(44);
    let offsets = GroupOffsets {
        group: &group,
        offsets: &third,
    };
    c.guarded_write_with_offsets(new, &[record(b"r43")], offsets)
        .expect("the new pair writes");
    assert_eq!(position(&a), [Some(44)]);
}

/// Checks due together travel together: `describe_epochs` answers many roles with one request
/// per coordinator, and says the same as one `describe_epoch` per role (taken, never taken).
#[test]
fn describe_epochs_agrees_with_describe_epoch_role_by_role() {
    let Some(b) = bootstrap() else { return };
    let t = transport(&b);
    let taken: Vec<Role> = (0..5)
        .map(|i| Role::new(unique(&format!("batch-{i}"))).unwrap())
        .collect();
    for role in &taken {
        t.acquire_epoch(role, LEASE).expect("acquire");
    }
    let never = Role::new(unique("batch-never")).unwrap();
    let mut all = taken.clone();
    all.push(never);
    // Twice: the first call finds the coordinators, the second batches on them: one request
    // for all six roles (one broker, so one coordinator; this client reads nothing, so no
    // Fetch loop adds requests of its own).
    for round in 0..2 {
        let before = t.requests_sent();
        let batched = t.describe_epochs(&all);
        let sent = t.requests_sent() - before;
        if round == 1 {
            // One; two only on a retry (a coordinator slow to answer); one each would be six.
            assert!(
                (1..=2).contains(&sent),
                "{sent} requests for {} checks (1 expected)",
                all.len()
            );
        }
        assert_eq!(batched.len(), all.len());
        for (role, answer) in all.iter().zip(batched) {
            let alone = t.describe_epoch(role).expect("describe");
            assert_eq!(answer.expect("batched describe"), alone, "{role}");
        }
    }
    for role in &taken {
        t.release_role(role);
    }
}

/// Checks started with `start_describe_epochs` hold no thread: the call returns with its
/// requests queued, and the answers (the same as `describe_epochs`') arrive on one of the
/// client's connection threads. One thread starts 40 batches of checks without waiting for
/// any; with a blocking check each would have held it until answered.
#[test]
fn checks_started_on_the_client_hold_no_thread_and_answer_as_describe_epochs() {
    let Some(b) = bootstrap() else { return };
    let t = transport(&b);
    let taken: Vec<Role> = (0..3)
        .map(|i| Role::new(unique(&format!("started-{i}"))).unwrap())
        .collect();
    for role in &taken {
        t.acquire_epoch(role, LEASE).expect("acquire");
    }
    let mut all = taken.clone();
    all.push(Role::new(unique("started-never")).unwrap());
    let expected = t.describe_epochs(&all);
    let (tx, rx) = std::sync::mpsc::channel();
    let caller = std::thread::current().id();
    const BATCHES: usize = 40;
    for batch in 0..BATCHES {
        let tx = tx.clone();
        t.start_describe_epochs(
            all.clone(),
            0,
            Box::new(move |answers| {
                let on = std::thread::current();
                let _ = tx.send((batch, answers, on.id(), on.name().map(str::to_owned)));
            }),
        );
    }
    drop(tx);
    let mut seen = [false; BATCHES];
    let mut on_connections = 0;
    for _ in 0..BATCHES {
        let (batch, answers, on, name) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every batch of checks is answered");
        assert!(!seen[batch], "batch {batch} answered twice");
        seen[batch] = true;
        // A connection thread answers, unless the answer came back while the caller was still
        // starting the call (then the caller finishes it on the spot): either is correct.
        if on != caller {
            assert_eq!(
                name.as_deref(),
                Some("kc-conn"),
                "batch {batch} was answered elsewhere than on a connection thread"
            );
            on_connections += 1;
        }
        assert_eq!(answers.len(), all.len());
        for ((role, got), want) in all.iter().zip(answers).zip(&expected) {
            let want = want.as_ref().expect("describe_epochs");
            assert_eq!(&got.expect("started check"), want, "{role}");
        }
    }
    // A check that held its caller's thread would have answered all 40 there.
    assert!(
        on_connections > 0,
        "every batch was answered on the caller's thread: the checks held it"
    );
    for role in &taken {
        t.release_role(role);
    }
}

// ---- 8. three brokers: the role's partition leader crashes ----------------------------------

/// The run dir of the cluster (`KAFKA_RUN_DIR`, exported by scripts/kafka/with-broker.sh).
fn run_dir() -> PathBuf {
    std::env::var_os("KAFKA_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".kafka/run"))
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The leader of `topic`/`partition` as the cluster's metadata says.
fn partition_leader(bootstrap: &str, topic: &str, partition: i32) -> Option<i32> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("a metadata client");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .ok()?;
    let t = md.topics().iter().find(|t| t.name() == topic)?;
    let p = t.partitions().iter().find(|p| p.id() == partition)?;
    (p.leader() >= 0).then_some(p.leader())
}

/// The partition of `__transaction_state` that holds `transactional_id` (Java's
/// `Utils.abs(id.hashCode()) % partitions`): its leader is the role's transaction coordinator.
fn transaction_state_partition(transactional_id: &str, partitions: i32) -> i32 {
    let hash = transactional_id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

/// One member of the three-broker test: competes, and while it leads makes a guarded write
/// every 50 ms. Its leadership handle is shared with the test, which reads the token it
/// believes it leads with (until `done` fires).
struct Contender {
    name: &'static str,
    leadership: Arc<Mutex<Option<Arc<Leadership>>>>,
    outcome: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Contender {
    fn start(bootstrap: &str, role: &str, name: &'static str) -> Contender {
        let kafka = Arc::new(transport_with(
            config(bootstrap).with_operation_timeout(Duration::from_secs(10)),
        ));
        let leadership = Arc::new(Mutex::new(None));
        let outcome = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        // A crashed broker's partitions move after its session times out (9 s by default):
        // standbys must not give up before that.
        let options = options().give_up_after(Duration::from_secs(60));
        let candidacy = blocking::start_shared(kafka.clone(), role, name, options).expect("start");
        let (role, shared, o, s) = (
            role.to_owned(),
            leadership.clone(),
            outcome.clone(),
            stop.clone(),
        );
        let thread = thread::spawn(move || {
            let log = |m: String| o.lock().expect("log").push(m);
            let mut candidacy = candidacy;
            let leader = loop {
                if s.load(Ordering::SeqCst) {
                    let _ = candidacy.resign_blocking();
                    return;
                }
                match candidacy.elected_blocking_timeout(Duration::from_millis(50)) {
                    Ok(Ok(l)) => break Arc::new(l),
                    Ok(Err(e)) => {
                        log(format!("candidacy ended: {e}"));
                        return;
                    }
                    Err(c) => candidacy = c,
                }
            };
            let token = leader.token();
            *shared.lock().expect("leadership") = Some(leader.clone());
            log(format!("elected at {} with {token}", now_ms()));
            let mut seq = 0u32;
            while !leader.is_done() && !s.load(Ordering::SeqCst) {
                let started = Instant::now();
                match guarded_send(&kafka, &role, token, seq) {
                    Ok(_) => seq += 1,
                    Err(e) => log(format!("guarded write failed at {}: {e}", now_ms())),
                }
                if let Some(rest) = Duration::from_millis(50).checked_sub(started.elapsed()) {
                    leader.done_blocking_timeout(rest);
                }
            }
            if leader.is_done() {
                log(format!("term over at {}: {:?}", now_ms(), leader.err()));
            } else {
                log(format!(
                    "resigning after {seq} guarded writes: {:?}",
                    leader.resign_blocking()
                ));
            }
        });
        Contender {
            name,
            leadership,
            outcome,
            stop,
            thread: Some(thread),
        }
    }

    /// The token this member leads with, while its term is not over.
    fn believes(&self) -> Option<FencingToken> {
        let leadership = self.leadership.lock().expect("leadership");
        leadership
            .as_ref()
            .filter(|l| !l.is_done())
            .map(|l| l.token())
    }

    fn log(&self) -> Vec<String> {
        self.outcome.lock().expect("log").clone()
    }

    /// Asks the contender to stop: a standby cancels, a leader resigns.
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    fn finish(&mut self) -> Vec<String> {
        self.stop();
        if let Some(t) = self.thread.take() {
            t.join().expect("the contender's thread");
        }
        self.log()
    }
}

#[test]
fn three_broker_the_role_survives_its_partition_leader_crashing() {
    let Some(b) = bootstrap() else { return };
    if brokers() != 3 {
        loud(
            "three_broker_the_role_survives_its_partition_leader_crashing needs a three-broker \
             cluster (KAFKA_BROKERS=3). Run: scripts/kafka/with-broker.sh --brokers 3 cargo \
             test -p kafka-coordination-kafka --test brokers three_broker",
        );
        return;
    }
    let role = unique("three");
    let observer = transport_with(config(&b).with_request_timeout(Duration::from_secs(2)));
    let data = data_reader(&b);
    let p = observer
        .role_partition(&Role::new(role.clone()).expect("role"))
        .expect("partition");

    let a = Contender::start(&b, &role, "a");
    wait_for("a elected", PROMPT, || a.believes().is_some());
    let a_token = a.believes().expect("a leads");
    eventually_lease(&observer, &role, "a", a_token);
    let others = [
        Contender::start(&b, &role, "b"),
        Contender::start(&b, &role, "c"),
    ];
    wait_for("two standbys registered", PROMPT, || {
        describe_role_state(&observer, &role).is_ok_and(|s| s.len() == 3)
    });

    wait_for("a's first guarded write", PROMPT, || {
        !guarded_writes(&data, &role).is_empty()
    });

    let victim = partition_leader(&b, STATE_TOPIC, p).expect("the partition has a leader");
    let coordinator = partition_leader(
        &b,
        "__transaction_state",
        transaction_state_partition(&role, 3),
    );
    eprintln!(
        "{STATE_TOPIC}/{p} is led by broker {victim}; the role's transaction coordinator is \
         broker {coordinator:?}; killing broker {victim}"
    );
    let killed = std::process::Command::new(repo_root().join("scripts/kafka/stop-node.sh"))
        .arg("--kill")
        .arg(victim.to_string())
        .env("KAFKA_RUN_DIR", run_dir())
        .status()
        .expect("run scripts/kafka/stop-node.sh");
    assert!(killed.success(), "stop-node.sh {victim} failed");
    let killed_at = now_ms();

    // Watch until the role is settled: a kept it (a lease it wrote after the crash is
    // readable) or it moved (a is done, fenced, and another member leads); then a little more.
    let mut settled_at: Option<Instant> = None;
    let mut polls = 0u32;
    let mut describe_failures = 0u32;
    let mut max_believers = 0usize;
    let window = Instant::now() + Duration::from_secs(60);
    let all = || std::iter::once(&a).chain(others.iter());
    while settled_at.is_none_or(|t| t.elapsed() < Duration::from_secs(3)) {
        assert!(
            Instant::now() < window,
            "the role did not settle within 60 s of the crash: a: {:?}, b: {:?}, c: {:?}",
            a.log(),
            others[0].log(),
            others[1].log()
        );
        polls += 1;
        let believers: Vec<(&str, FencingToken)> = all()
            .filter_map(|c| c.believes().map(|t| (c.name, t)))
            .collect();
        max_believers = max_believers.max(believers.len());
        match describe_leadership(&observer, &role) {
            Ok(status) => {
                let authoritative: Vec<_> = believers
                    .iter()
                    .filter(|(_, t)| status.authoritative(t))
                    .collect();
                assert!(
                    authoritative.len() <= 1,
                    "two members authoritative at once: {authoritative:?} ({status:?})"
                );
            }
            Err(_) => describe_failures += 1,
        }
        let mut distinct: Vec<FencingToken> = believers.iter().map(|(_, t)| *t).collect();
        distinct.sort_by_key(|t| (t.producer_id, t.producer_epoch));
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            believers.len(),
            "two members with one token: {believers:?}"
        );
        if settled_at.is_none() {
            let kept = a.believes() == Some(a_token)
                && current_lease_opt(&observer, &role).is_some_and(|l| {
                    l.token == a_token && l.deadline.0 > killed_at + millis(LEASE)
                });
            let moved = a.believes().is_none() && others.iter().any(|c| c.believes().is_some());
            if kept || moved {
                eprintln!(
                    "settled {} ms after the crash: {}",
                    now_ms() - killed_at,
                    if kept {
                        "a kept the role"
                    } else {
                        "the role moved"
                    }
                );
                settled_at = Some(Instant::now());
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "{polls} polls, {describe_failures} describe failures, at most {max_believers} \
         member(s) believing they led at once"
    );

    // Standbys first, so that none takes over from a resigning leader.
    let mut everyone: Vec<Contender> = std::iter::once(a).chain(others).collect();
    everyone.sort_by_key(|c| c.believes().is_some());
    let mut logs: Vec<(&str, Vec<String>)> =
        everyone.iter_mut().map(|c| (c.name, c.finish())).collect();
    logs.sort();
    eprintln!("{logs:#?}");
    let a_log = logs[0].1.clone();
    if a_log.iter().any(|l| l.starts_with("term over")) {
        assert!(
            a_log.iter().any(|l| l.contains("Fenced")),
            "a lost the role cleanly (fenced), not by another error: {a_log:?}"
        );
    }
    // The guarded writes readable in the data topic come in runs of one token each, in the
    // order of the terms: no write of a deposed leader after its successor's.
    let writes = guarded_writes(&data, &role);
    let mut runs: Vec<&str> = Vec::new();
    for w in &writes {
        if runs.last() != Some(&w.as_str()) {
            assert!(
                !runs.contains(&w.as_str()),
                "a write of {w} after a newer leader's writes: {runs:?}"
            );
            runs.push(w);
        }
    }
    eprintln!("{} guarded writes in terms {runs:?}", writes.len());
    assert_eq!(runs.first().copied(), Some(a_token.to_string().as_str()));
}

/// [`current_lease`], `None` on a transient failure (a partition without a leader).
fn current_lease_opt(reader: &KafkaTransport, role: &str) -> Option<Lease> {
    describe_role_state(reader, role)
        .ok()?
        .lease()
        .map(|e| e.lease.clone())
}

// ---- campaigning again -----------------------------------------------------------------------

/// A service that campaigns again on the same client the moment its term ends gets no
/// configuration error: a `Leadership` dropped while leading resigns in the background (a new
/// epoch, the lease cleared, the registration withdrawn: several round trips), and a
/// candidacy started right after it waits for that exit, then registers and is elected.
#[test]
fn a_member_campaigns_again_on_its_client_while_its_last_exit_runs() {
    let Some(b) = bootstrap() else { return };
    let role = unique("campaign-again");
    let client = Arc::new(transport(&b));
    let reader = transport(&b);
    for round in 0..3 {
        let leadership = elected(
            blocking::start(Arc::clone(&client), &role, "a", options()).expect("start"),
            LEASE + SLACK,
        );
        let token = leadership.token();
        drop(leadership);
        let again = blocking::start(Arc::clone(&client), &role, "a", options())
            .unwrap_or_else(|e| panic!("round {round}: campaigning again failed: {e}"));
        let next = elected(again, LEASE + SLACK);
        assert_ne!(next.token(), token, "round {round}: a new term");
        let status = describe_leadership(&reader, &role).expect("describe");
        assert!(status.authoritative(&next.token()) && !status.authoritative(&token));
        let state = eventually_state(&reader, &role, "one registration of a", |s| {
            s.roster()
                .map(|(m, _)| m.as_str().to_owned())
                .collect::<Vec<_>>()
                == ["a"]
        });
        assert_eq!(state.len(), 1);
        next.resign_blocking().expect("resign");
    }
    // Two live candidacies of one role on one client are still refused.
    let first = blocking::start(Arc::clone(&client), &role, "a", options()).expect("start");
    let second = blocking::start(Arc::clone(&client), &role, "b", options());
    let Err(refused) = second else {
        panic!("a second live candidacy of the role on the client was accepted")
    };
    let message = refused.to_string();
    assert!(message.contains("already has a candidacy"), "{message}");
    drop(first);
}
