//! Many candidacies on one loop (`host`), on every flavour this build has, on the MemoryBroker
//! with a ManualClock: time moves only when a test moves it, and each move returns once the
//! hosts have acted on it (the host is one participant of the clock's settle), so no verdict
//! depends on thread scheduling.

use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::core::record::Role;
use kafka_coordination::core::UnixMillis;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::error::ErrorKind;
use kafka_coordination::host::{Host, HostOptions};
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::memory::{BrokerOp, MemoryBroker};
use kafka_coordination::testkit::Flavour;
use kafka_coordination::transport::Transport;
use kafka_coordination::transport::Wait;
use kafka_coordination::{Error, GuardedRecord, ManualClock, Options};

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(1);
const STAGGER: Duration = Duration::from_millis(500);

/// The flavours of the test kit: every driver this build has.
fn flavours() -> Vec<Flavour> {
    Flavour::all()
}

#[cfg(feature = "tokio")]
fn tokio_runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

fn start_host<T: Transport + Send + Sync + 'static>(
    flavour: Flavour,
    transport: Arc<T>,
    options: HostOptions,
) -> Host {
    match flavour {
        #[cfg(feature = "blocking")]
        Flavour::Blocking => kafka_coordination::blocking::host(transport, options),
        #[cfg(feature = "tokio")]
        Flavour::Tokio => {
            let _guard = tokio_runtime().enter();
            kafka_coordination::tokio_driver::host(transport, options)
        }
        #[cfg(feature = "smol")]
        Flavour::Smol => kafka_coordination::smol_driver::host(transport, options),
        #[cfg(feature = "async-std")]
        Flavour::AsyncStd => kafka_coordination::async_std_driver::host(transport, options),
        other => panic!("no host for the flavour {other:?}"),
    }
    .expect("the host starts")
}

struct World {
    clock: ManualClock,
    broker: MemoryBroker,
}

impl World {
    fn new() -> World {
        let clock = ManualClock::default();
        let broker = MemoryBroker::new(4, Arc::new(clock.clone()));
        World { clock, broker }
    }

    fn options(&self) -> Options {
        Options::new()
            .clock(self.clock.clone())
            .lease_duration(LEASE)
            .renew_interval(RENEW)
            .challenge_stagger(STAGGER)
    }

    fn host_options(&self, max_in_flight: usize) -> HostOptions {
        HostOptions::new()
            .clock(self.clock.clone())
            .max_in_flight(max_in_flight)
    }

    fn settle(&self) {
        self.clock.settle().unwrap_or_else(|e| panic!("{e}"));
    }

    fn advance(&self, d: Duration) {
        // In steps of 100 ms, so every timer fires at its instant, give or take a step.
        let step = Duration::from_millis(100);
        let mut left = d;
        while !left.is_zero() {
            let s = left.min(step);
            self.clock.advance(s);
            self.settle();
            left -= s;
        }
    }

    fn now(&self) -> UnixMillis {
        kafka_coordination::Clock::now(&self.clock)
    }
}

fn roles(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("shard-{i}")).collect()
}

/// Resigns each of `leaderships` in turn (the resign waits on a thread while the clock
/// settles), each cleanly.
fn resign_each(w: &World, leaderships: Vec<Leadership>) {
    for l in leaderships {
        let role = l.role().to_owned();
        let done = std::thread::spawn(move || l.resign_blocking());
        w.settle();
        done.join()
            .expect("resign thread")
            .unwrap_or_else(|e| panic!("{role}: not a clean resign: {e}"));
    }
}

fn elect_all(w: &World, candidacies: Vec<Candidacy>) -> Vec<Leadership> {
    w.settle();
    candidacies
        .into_iter()
        .map(|c| match c.elected_blocking_timeout(Duration::ZERO) {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => panic!("not elected: {e}"),
            Err(c) => panic!(
                "not elected after settle at {:?}: {:?}",
                w.now(),
                c.snapshot()
            ),
        })
        .collect()
}

fn one_host_elects_and_renews_every_role(flavour: Flavour, max_in_flight: usize) {
    let w = World::new();
    let host = start_host(
        flavour,
        Arc::new(w.broker.transport("a")),
        w.host_options(max_in_flight),
    );
    let names = roles(200);
    let candidacies: Vec<Candidacy> = names
        .iter()
        .map(|r| host.start(r, "a", w.options()).expect("starts"))
        .collect();
    w.settle();
    assert_eq!(host.len(), 200);
    let leaderships = elect_all(&w, candidacies);
    // Settled: every leader waits for its next renewal, none is in a call or a read.
    let stats = host.stats();
    assert_eq!(stats.candidacies, 200, "{stats:?}");
    assert_eq!(stats.waiting, 200, "{stats:?}");
    assert_eq!(
        (stats.calling, stats.reading, stats.parked),
        (0, 0, 0),
        "{stats:?}"
    );
    for (l, r) in leaderships.iter().zip(&names) {
        assert_eq!(
            w.broker.epoch_of(&Role::new(r.as_str()).unwrap()),
            Some(l.token())
        );
    }
    // Ten renew intervals: every role renews each second and none is lost.
    let writes = w.broker.accepted_lease_writes().len();
    w.advance(RENEW * 10);
    assert!(leaderships.iter().all(|l| !l.is_done()));
    let renewals = w.broker.accepted_lease_writes().len() - writes;
    assert!(
        (200 * 9..=200 * 11).contains(&renewals),
        "{renewals} renewals for 200 roles over 10 renew intervals"
    );
    for l in &leaderships {
        let health = l.health();
        assert!(health.leading, "{health:?}");
    }
    // A clean resign of every role; the host then runs nothing.
    resign_each(&w, leaderships);
    w.settle();
    assert_eq!(host.len(), 0);
}

#[test]
fn one_host_elects_and_renews_every_role_on_every_flavour() {
    for flavour in flavours() {
        one_host_elects_and_renews_every_role(flavour, 0);
        one_host_elects_and_renews_every_role(flavour, 3);
    }
}

/// A dead host (its link cut: it cannot resign) hands every role it led to the standby host,
/// each by its lease deadline plus its rank's stagger, and never two leaders at once.
fn a_dead_host_hands_all_its_roles_over(flavour: Flavour) {
    let w = World::new();
    let a_link = Link::new(w.broker.transport("a"));
    let a = start_host(flavour, Arc::new(a_link.clone()), w.host_options(2));
    let b = start_host(
        flavour,
        Arc::new(w.broker.transport("b")),
        w.host_options(2),
    );
    let names = roles(60);
    let a_leads: Vec<Candidacy> = names
        .iter()
        .map(|r| a.start(r, "a", w.options()).expect("a starts"))
        .collect();
    w.settle();
    let a_leads = elect_all(&w, a_leads);
    let b_waits: Vec<Candidacy> = names
        .iter()
        .map(|r| b.start(r, "b", w.options()).expect("b starts"))
        .collect();
    w.settle();
    assert!(b_waits.iter().all(|c| c.snapshot().rank == Some(0)));
    // Host a dies.
    a_link.cut();
    let observer = w.broker.transport("observer");
    let deadlines: Vec<UnixMillis> = names
        .iter()
        .map(|r| {
            let s = kafka_coordination::describe::describe_role_state(&observer, r).expect("state");
            s.lease().expect("a lease").lease.deadline
        })
        .collect();
    let last = *deadlines.iter().max().expect("leases");
    let mut elected_at: Vec<Option<UnixMillis>> = vec![None; names.len()];
    let step = Duration::from_millis(100);
    while w.now() < last.saturating_add(step * 4) {
        w.advance(step);
        for (i, c) in b_waits.iter().enumerate() {
            if elected_at[i].is_none() && c.snapshot().token.is_some() {
                elected_at[i] = Some(w.now());
            }
        }
    }
    for (i, r) in names.iter().enumerate() {
        let at = elected_at[i].unwrap_or_else(|| panic!("{r}: b was not elected"));
        // Rank 0: at the deadline, within the step the clock moves by and one more.
        assert!(at >= deadlines[i], "{r}: b challenged a live lease");
        assert!(
            at <= deadlines[i].saturating_add(step * 2),
            "{r}: b elected at {at:?}, deadline {:?}",
            deadlines[i]
        );
    }
    let b_leads = elect_all(&w, b_waits);
    for (l, r) in b_leads.iter().zip(&names) {
        assert_eq!(
            w.broker.epoch_of(&Role::new(r.as_str()).unwrap()),
            Some(l.token()),
            "{r}"
        );
    }
    // The dead host's link comes back: each of its terms meets the fence.
    a_link.restore();
    w.advance(RENEW * 2);
    for l in &a_leads {
        assert!(l.is_done(), "{} still believes it leads", l.role());
        assert!(
            matches!(l.err(), Some(Error::Fenced { .. })),
            "{:?}",
            l.err()
        );
    }
    assert!(b_leads.iter().all(|l| !l.is_done()));
}

#[test]
fn a_dead_host_hands_all_its_roles_over_on_every_flavour() {
    for flavour in flavours() {
        a_dead_host_hands_all_its_roles_over(flavour);
    }
}

/// A resign reaches the standby host's parked read at the next change of the clock: the
/// standby is elected without the clock moving at all.
fn a_resign_is_seen_by_the_standby_host_at_once(flavour: Flavour) {
    let w = World::new();
    let a = start_host(
        flavour,
        Arc::new(w.broker.transport("a")),
        w.host_options(1),
    );
    let b = start_host(
        flavour,
        Arc::new(w.broker.transport("b")),
        w.host_options(0),
    );
    let names = roles(20);
    let a_leads: Vec<Candidacy> = names
        .iter()
        .map(|r| a.start(r, "a", w.options()).expect("a starts"))
        .collect();
    w.settle();
    let a_leads = elect_all(&w, a_leads);
    let b_waits: Vec<Candidacy> = names
        .iter()
        .map(|r| b.start(r, "b", w.options()).expect("b starts"))
        .collect();
    w.settle();
    resign_all_and_elect(&w, a_leads, b_waits);
}

/// Resigns every leadership of `leads`, one at a time, and checks that `waits` are all elected
/// without the clock moving at all.
fn resign_all_and_elect(w: &World, leads: Vec<Leadership>, waits: Vec<Candidacy>) {
    let before = w.now();
    let n = waits.len();
    resign_each(w, leads);
    w.settle();
    assert_eq!(w.now(), before, "the clock did not move");
    assert_eq!(elect_all(w, waits).len(), n);
}

#[test]
fn a_resign_is_seen_by_the_standby_host_at_once_on_every_flavour() {
    for flavour in flavours() {
        a_resign_is_seen_by_the_standby_host_at_once(flavour);
    }
}

/// A process that claims many roles at once, as a host does at its start: a role's
/// registration can land behind another role's open write on the same partition (here a write
/// its dead holder never ended), so the candidacy's first read stops short of its own
/// registration. Until it reads it, it must assume a lease may hide behind the stall, but it
/// keeps reading: it is elected as soon as the coordinator aborts that write at its timeout,
/// not a lease after it registered. On a transport that tails and on one that does not.
fn a_registration_behind_another_roles_open_write_is_read_once_it_ends(
    flavour: Flavour,
    tailing: bool,
) {
    use kafka_coordination::core::partition::role_partition;
    let w = World::new();
    let role = Role::new("shard-0").unwrap();
    let partition = role_partition(&role, w.broker.partitions()).unwrap();
    // Another role's holder dies in the middle of a lease write; the write stays open until
    // its transaction timeout, half a lease from now.
    let abort_at = w.now().saturating_add(LEASE / 2);
    w.broker
        .stall_partition(partition, LEASE / 2)
        .expect("stall the partition");
    let host = start_host(
        flavour,
        Arc::new(w.broker.transport("a").tailing(tailing)),
        w.host_options(0),
    );
    let registered = w.now();
    let c = host.start(role.as_str(), "a", w.options()).expect("starts");
    w.settle();
    assert!(c.snapshot().join_offset.is_some(), "{:?}", c.snapshot());
    w.advance(LEASE / 2 - Duration::from_millis(200));
    assert_eq!(
        c.snapshot().token,
        None,
        "elected while its registration was unreadable"
    );
    let mut elected = None;
    while w.now().since(registered) < LEASE * 2 {
        w.advance(Duration::from_millis(100));
        if c.snapshot().token.is_some() {
            elected = Some(w.now());
            break;
        }
    }
    let elected = elected.unwrap_or_else(|| panic!("never elected: {:?}", c.snapshot()));
    assert!(
        elected.since(abort_at) <= Duration::from_millis(100),
        "{flavour:?}, tailing {tailing}: elected {:?} after registering, {:?} after the stall \
         ended: it waited for a lease after registering ({LEASE:?}) instead of reading again",
        elected.since(registered),
        elected.since(abort_at)
    );
}

#[test]
fn a_registration_behind_another_roles_open_write_is_read_once_it_ends_on_every_flavour() {
    for flavour in flavours() {
        for tailing in [true, false] {
            a_registration_behind_another_roles_open_write_is_read_once_it_ends(flavour, tailing);
        }
    }
}

/// On a transport that tails its partitions (the memory broker's `tailing`, as the Kafka
/// transport does), the reads of a standby host that only long polls wait on are served from
/// the tail on the loop: no broker read, no I/O thread. A candidacy's first read still goes to
/// the broker, and a resign reaches the standbys through the tail. With `tail_reads(false)`
/// every read is a broker read.
#[test]
fn parked_long_polls_are_served_from_the_transports_tail() {
    for tail in [true, false] {
        let w = World::new();
        let a = start_host(
            flavours()[0],
            Arc::new(w.broker.transport("a")),
            w.host_options(0),
        );
        let names = roles(20);
        let a_leads = elect_all(
            &w,
            names
                .iter()
                .map(|r| a.start(r, "a", w.options()).expect("a starts"))
                .collect(),
        );
        let b = start_host(
            flavours()[0],
            Arc::new(w.broker.transport("b").tailing(true)),
            w.host_options(2).tail_reads(tail),
        );
        let broker_reads = || w.broker.call_counts().get(BrokerOp::Read);
        let before = broker_reads();
        let b_waits: Vec<Candidacy> = names
            .iter()
            .map(|r| b.start(r, "b", w.options()).expect("b starts"))
            .collect();
        w.settle();
        assert_eq!(b.stats().parked, 20, "{:?}", b.stats());
        // A candidacy's first read must cover what was committed before it (its own
        // registration): never from the tail.
        assert!(
            broker_reads() > before,
            "the first reads came from the tail"
        );
        assert_eq!(broker_reads() - before, b.stats().reads);
        // a renews for a while: every renewal answers a standby's long poll, whose next long
        // poll waits again; every move of the clock refreshes b's parked partitions.
        let (before, stats) = (broker_reads(), b.stats());
        w.advance(RENEW * 2);
        let reads = broker_reads() - before;
        let (host_reads, tailed) = (
            b.stats().reads - stats.reads,
            b.stats().tailed_reads - stats.tailed_reads,
        );
        assert_eq!(reads, host_reads, "only b reads the broker here");
        if tail {
            assert_eq!(
                reads, 0,
                "a read that only long polls wait on went to the broker"
            );
            assert!(tailed >= 20, "{tailed} reads from the tail");
        } else {
            assert_eq!(tailed, 0);
            assert!(reads >= 20, "{reads} reads");
        }
        // a resigns every role: b's standbys hear of it through the tail (or the reads) and
        // are elected with no move of the clock.
        resign_all_and_elect(&w, a_leads, b_waits);
    }
}

/// Candidacies of roles on one partition share its reads: a renewal round of 200 roles on 4
/// partitions reads each partition a few times, where 200 candidacies on drivers of their own
/// read it 200 times.
/// A transport that holds every registration until the test lets them through: an append is
/// queued and answered at [`HeldAppends::release`]. A held lease write keeps only its
/// completion, answered by the thread that releases it.
struct HeldAppends<T> {
    inner: T,
    held: std::sync::Mutex<HeldState>,
    moved: std::sync::Condvar,
}

#[derive(Default)]
struct HeldState {
    queued: Vec<kafka_coordination::transport::Append>,
    released: bool,
    /// Whether the next lease write (a record, not a tombstone) is to be held.
    hold_lease: bool,
    /// The key of the lease write held, once one began.
    held_lease: Option<Vec<u8>>,
    /// A lease write held without a thread: what to write, and who hears of it.
    held_write: Option<HeldWrite>,
    /// The threads lease writes were started on.
    started_on: Vec<String>,
}

type HeldWrite = (
    i32,
    Vec<u8>,
    Option<Vec<u8>>,
    kafka_coordination::FencingToken,
    kafka_coordination::transport::LeaseDone,
);

impl<T: Transport> HeldAppends<T> {
    fn new(inner: T) -> HeldAppends<T> {
        HeldAppends {
            inner,
            held: Default::default(),
            moved: Default::default(),
        }
    }

    /// Holds the next lease write until [`release_lease`](Self::release_lease).
    fn hold_next_lease(&self) {
        self.held.lock().unwrap().hold_lease = true;
    }

    /// Waits (at most a minute of real time) until a lease write is held; its key.
    fn wait_lease_held(&self) -> Option<Vec<u8>> {
        let guard = std::time::Instant::now() + Duration::from_secs(60);
        let mut st = self.held.lock().unwrap();
        while st.held_lease.is_none() && std::time::Instant::now() < guard {
            st = self
                .moved
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        st.held_lease.clone()
    }

    /// Lets the held lease write through (one held without a thread is written and answered
    /// on this thread).
    fn release_lease(&self) {
        let write = {
            let mut st = self.held.lock().unwrap();
            st.hold_lease = false;
            st.held_write.take()
        };
        self.moved.notify_all();
        if let Some((partition, key, value, token, done)) = write {
            done(
                self.inner
                    .write_lease(partition, &key, value.as_deref(), token),
            );
        }
    }

    /// Lets every append through: the queued ones are written and answered now.
    fn release(&self) {
        let queued = {
            let mut st = self.held.lock().unwrap();
            st.released = true;
            std::mem::take(&mut st.queued)
        };
        self.moved.notify_all();
        for a in queued {
            (a.done)(self.inner.append(a.partition, &a.key, a.value.as_deref()));
        }
    }
}

impl<T: Transport> kafka_coordination::transport::Coordinator for HeldAppends<T> {
    fn start_acquire_epoch(
        &self,
        role: Role,
        timeout: Duration,
        priority: i64,
        done: kafka_coordination::transport::AcquireDone,
    ) {
        self.inner
            .start_acquire_epoch(role, timeout, priority, done)
    }
    fn start_describe_epochs(
        &self,
        roles: Vec<Role>,
        priority: i64,
        done: kafka_coordination::transport::DescribeDone,
    ) {
        self.inner.start_describe_epochs(roles, priority, done)
    }
    fn claim_role(&self, role: &Role) -> Result<(), kafka_coordination::error::TransportError> {
        self.inner.claim_role(role)
    }
    fn release_role(&self, role: &Role) {
        self.inner.release_role(role)
    }
}

impl<T: Transport> kafka_coordination::transport::StateReader for HeldAppends<T> {
    fn partitions(&self) -> i32 {
        self.inner.partitions()
    }
    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: kafka_coordination::transport::ReadDone,
    ) {
        self.inner
            .start_read_partition(partition, from_offset, max_wait, priority, done)
    }
}

impl<T: Transport> kafka_coordination::transport::Registrar for HeldAppends<T> {
    fn append_all(&self, appends: Vec<kafka_coordination::transport::Append>, _priority: i64) {
        let mut st = self.held.lock().unwrap();
        if st.released {
            drop(st);
            for a in appends {
                (a.done)(self.inner.append(a.partition, &a.key, a.value.as_deref()));
            }
            return;
        }
        st.queued.extend(appends);
    }
}

impl<T: Transport> kafka_coordination::transport::LeaseWriter for HeldAppends<T> {
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: kafka_coordination::FencingToken,
        _priority: i64,
        done: kafka_coordination::transport::LeaseDone,
    ) {
        let mut st = self.held.lock().unwrap();
        let name = std::thread::current()
            .name()
            .unwrap_or("(unnamed)")
            .to_owned();
        st.started_on.push(name);
        if st.hold_lease && st.held_lease.is_none() && value.is_some() {
            st.held_lease = Some(key.clone());
            st.held_write = Some((partition, key, value, token, done));
            self.moved.notify_all();
            return;
        }
        drop(st);
        done(
            self.inner
                .write_lease(partition, &key, value.as_deref(), token),
        );
    }
}

/// A renewal that waits in the host's queue for a place among the calls in flight writes its
/// lease's deadline from when the write begins, not from when it was due: the wait is not
/// taken out of the lease. One call in flight at most; one role's renewal is held in flight
/// (its completion kept, no thread held) while the manual clock moves 700 ms, so the other
/// role's renewal, due at the same instant, waits behind it.
fn a_renewal_that_waited_for_a_place_keeps_its_whole_lease(flavour: Flavour) {
    const WAIT: Duration = Duration::from_millis(700);
    let w = World::new();
    let held = Arc::new(HeldAppends::new(w.broker.transport("a")));
    held.release();
    let host = start_host(
        flavour,
        held.clone(),
        w.host_options(1).spread_renewals(false),
    );
    let names = roles(2);
    let leaderships = elect_all(
        &w,
        names
            .iter()
            .map(|r| host.start(r, "a", w.options()).expect("starts"))
            .collect(),
    );
    let due = w.now() + RENEW;
    held.hold_next_lease();
    // Both renewals come due together; one takes the only place and is held there.
    w.clock.advance(RENEW);
    let key = held
        .wait_lease_held()
        .unwrap_or_else(|| panic!("{flavour:?}: no renewal began"));
    let first = kafka_coordination::core::record::Key::decode(&key).expect("a lease key");
    let first = first.role().as_str().to_owned();
    let queued_by = std::time::Instant::now() + Duration::from_secs(60);
    while host.stats().queued == 0 {
        assert!(
            std::time::Instant::now() < queued_by,
            "{flavour:?}: the second renewal is not queued: {:?}",
            host.stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    w.clock.advance(WAIT);
    held.release_lease();
    w.settle();
    let observer = w.broker.transport("observer");
    for (name, l) in names.iter().zip(&leaderships) {
        let lease = kafka_coordination::describe::describe_role_state(&observer, name)
            .expect("state")
            .lease()
            .expect("a lease")
            .lease
            .clone();
        let began = if *name == first { due } else { due + WAIT };
        assert_eq!(
            lease.deadline,
            began + LEASE,
            "{flavour:?}: {name}'s renewal (the held one: {first}) began at {began:?}"
        );
        assert_eq!(
            l.health().lease_deadline,
            Some(lease.deadline),
            "{flavour:?}: {name}: the leader's account names the record's deadline"
        );
    }
    resign_each(&w, leaderships);
    let started_on = held.held.lock().unwrap().started_on.clone();
    assert!(
        !started_on.is_empty(),
        "{flavour:?}: no lease write started"
    );
}

#[test]
fn a_renewal_that_waited_for_a_place_keeps_its_whole_lease_on_every_flavour() {
    for flavour in flavours() {
        a_renewal_that_waited_for_a_place_keeps_its_whole_lease(flavour);
    }
}

#[test]
fn roles_on_one_partition_share_its_reads() {
    let w = World::new();
    let flavour = flavours()[0];
    let host = start_host(
        flavour,
        Arc::new(w.broker.transport("a")),
        w.host_options(0),
    );
    let leaderships = elect_all(
        &w,
        roles(200)
            .iter()
            .map(|r| host.start(r, "a", w.options()).expect("starts"))
            .collect(),
    );
    let reads = w.broker.call_counts().get(BrokerOp::Read);
    let writes = w.broker.accepted_lease_writes().len();
    w.advance(LEASE * 2);
    let reads = w.broker.call_counts().get(BrokerOp::Read) - reads;
    let renewals = w.broker.accepted_lease_writes().len() - writes;
    assert!(renewals >= 200 * 5, "{renewals} renewals");
    // At most one read per partition per 100 ms step of the clock: 60 steps, 4 partitions.
    assert!(
        reads <= 60 * 4,
        "{reads} reads for {renewals} renewals: reads are not shared"
    );
    drop(leaderships);
    w.settle();
}

/// Roles won together renew at phases spread over the renew interval (a host's default), so
/// their leases do not all run out at the same instant; without the spread they do.
#[test]
fn a_host_spreads_the_renewals_of_roles_it_won_together() {
    for spread in [true, false] {
        let w = World::new();
        let host = start_host(
            flavours()[0],
            Arc::new(w.broker.transport("a")),
            w.host_options(0).spread_renewals(spread),
        );
        let names = roles(200);
        let leaderships = elect_all(
            &w,
            names
                .iter()
                .map(|r| host.start(r, "a", w.options()).expect("starts"))
                .collect(),
        );
        let claimed = w.now();
        // Past the first renewal of every role, in steps of 10 ms.
        for _ in 0..((RENEW.as_millis() + 50) / 10) {
            w.clock.advance(Duration::from_millis(10));
            w.settle();
        }
        let observer = w.broker.transport("observer");
        let mut deadlines: Vec<i64> = names
            .iter()
            .map(|r| {
                let s =
                    kafka_coordination::describe::describe_role_state(&observer, r).expect("state");
                s.lease().expect("a lease").lease.deadline.0 - claimed.0
            })
            .collect();
        deadlines.sort_unstable();
        let lease = LEASE.as_millis() as i64;
        let renew = RENEW.as_millis() as i64;
        if spread {
            // Each tenth of the renew interval holds some of the 200 renewals.
            for tenth in 0..10 {
                let (from, to) = (lease + renew * tenth / 10, lease + renew * (tenth + 1) / 10);
                let n = deadlines.iter().filter(|&&d| d >= from && d <= to).count();
                assert!(
                    n >= 5,
                    "{n} leases run out {from}..{to} ms after the claims"
                );
            }
        } else {
            assert_eq!(
                (deadlines[0], deadlines[199]),
                (lease + renew, lease + renew),
                "without the spread every role renews a renew interval after its claim"
            );
        }
        drop(leaderships);
        w.settle();
    }
}

/// A hosted leadership makes guarded writes like any other, and a hosted candidacy dropped
/// before it is elected withdraws its registration.
#[test]
fn hosted_leaderships_write_guarded_and_hosted_candidacies_cancel() {
    for flavour in flavours() {
        let w = World::new();
        let host = start_host(
            flavour,
            Arc::new(w.broker.transport("a")),
            w.host_options(2),
        );
        let l = elect_all(&w, vec![host.start("jobs", "a", w.options()).unwrap()]).remove(0);
        let record = GuardedRecord {
            topic: "work",
            partition: 0,
            key: None,
            value: Some(b"run #1"),
            headers: &[],
        };
        let written = std::thread::scope(|s| {
            let write = s.spawn(|| l.guarded_write_blocking(&[record]));
            w.settle();
            write.join().expect("write thread")
        });
        assert!(written.is_ok(), "{written:?}");
        assert_eq!(w.broker.topic_records("work", 0).len(), 1);
        // With a consumer group's offsets, in the same transaction.
        let consumed = [kafka_coordination::transport::ConsumedOffset {
            topic: "input",
            partition: 2,
            next_offset: 10,
            metadata: None,
        }];
        let offsets = kafka_coordination::transport::GroupOffsets {
            group: "workers",
            offsets: &consumed,
        };
        let written = std::thread::scope(|s| {
            let write = s.spawn(|| l.guarded_write_with_offsets_blocking(&[record], offsets));
            w.settle();
            write.join().expect("write thread")
        });
        assert!(written.is_ok(), "{written:?}");
        assert_eq!(w.broker.topic_records("work", 0).len(), 2);
        assert_eq!(
            w.broker.committed_offsets("workers", &[("input", 2)]),
            [Some(10)]
        );
        // A standby of another role's holder, dropped while it waits.
        let other = start_host(
            flavour,
            Arc::new(w.broker.transport("b")),
            w.host_options(2),
        );
        let standby = other.start("jobs", "b", w.options()).unwrap();
        w.settle();
        assert_eq!(standby.snapshot().rank, Some(0));
        drop(standby);
        w.settle();
        assert_eq!(other.len(), 0);
        let observer = w.broker.transport("observer");
        let state = kafka_coordination::describe::describe_role_state(&observer, "jobs").unwrap();
        assert_eq!(state.roster().count(), 1, "{state:?}");
        drop(l);
        w.settle();
    }
}

/// A host and its candidacies run on one clock; another manual clock, or a manual clock on a
/// host of the system clock, is refused with an error that says so.
#[test]
fn a_candidacy_on_another_clock_is_refused() {
    let w = World::new();
    let host = start_host(
        flavours()[0],
        Arc::new(w.broker.transport("a")),
        w.host_options(0),
    );
    let other = Options::new().clock(ManualClock::default());
    let e = host.start("jobs", "a", other).expect_err("another clock");
    assert!(
        matches!(&e, Error::Transport(t) if t.kind() == ErrorKind::Config),
        "{e}"
    );
    assert!(e.to_string().contains("another manual clock"), "{e}");
    let system = start_host(
        flavours()[0],
        Arc::new(w.broker.transport("b")),
        HostOptions::new(),
    );
    let e = system
        .start("jobs", "b", w.options())
        .expect_err("manual on system");
    assert!(e.to_string().contains("system clock"), "{e}");
}

/// A transport that notes on which thread each batch of checks was started.
struct ChecksSeen<T> {
    inner: T,
    started_on: std::sync::Mutex<Vec<String>>,
}

impl<T: Transport> kafka_coordination::transport::Coordinator for ChecksSeen<T> {
    fn start_acquire_epoch(
        &self,
        role: Role,
        timeout: Duration,
        priority: i64,
        done: kafka_coordination::transport::AcquireDone,
    ) {
        self.inner
            .start_acquire_epoch(role, timeout, priority, done)
    }
    fn start_describe_epochs(
        &self,
        roles: Vec<Role>,
        priority: i64,
        done: kafka_coordination::transport::DescribeDone,
    ) {
        let name = std::thread::current()
            .name()
            .unwrap_or("(unnamed)")
            .to_owned();
        self.started_on.lock().unwrap().push(name);
        self.inner.start_describe_epochs(roles, priority, done)
    }
    fn claim_role(&self, role: &Role) -> Result<(), kafka_coordination::error::TransportError> {
        self.inner.claim_role(role)
    }
    fn release_role(&self, role: &Role) {
        self.inner.release_role(role)
    }
}

impl<T: Transport> kafka_coordination::transport::StateReader for ChecksSeen<T> {
    fn partitions(&self) -> i32 {
        self.inner.partitions()
    }
    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: kafka_coordination::transport::ReadDone,
    ) {
        self.inner
            .start_read_partition(partition, from_offset, max_wait, priority, done)
    }
}

impl<T: Transport> kafka_coordination::transport::Registrar for ChecksSeen<T> {
    fn append_all(&self, appends: Vec<kafka_coordination::transport::Append>, priority: i64) {
        self.inner.append_all(appends, priority)
    }
}

impl<T: Transport> kafka_coordination::transport::LeaseWriter for ChecksSeen<T> {
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: kafka_coordination::FencingToken,
        priority: i64,
        done: kafka_coordination::transport::LeaseDone,
    ) {
        self.inner
            .start_write_lease(partition, key, value, token, priority, done)
    }
}

/// A host starts its standbys' checks on its loop (the blocking flavour's loop is its
/// `kc-host` thread): the checks are answered and every role moves to the standby host when
/// the leading one dies.
fn checks_start_on_the_loop(flavour: Flavour) {
    let w = World::new();
    let a_link = Link::new(w.broker.transport("a"));
    let a = start_host(flavour, Arc::new(a_link.clone()), w.host_options(2));
    let seen = Arc::new(ChecksSeen {
        inner: w.broker.transport("b"),
        started_on: Default::default(),
    });
    let b = start_host(flavour, seen.clone(), w.host_options(2));
    let names = roles(6);
    let a_leads = elect_all(
        &w,
        names
            .iter()
            .map(|r| a.start(r, "a", w.options()).expect("a starts"))
            .collect(),
    );
    let b_waits: Vec<Candidacy> = names
        .iter()
        .map(|r| b.start(r, "b", w.options()).expect("b starts"))
        .collect();
    w.settle();
    a_link.cut();
    w.advance(LEASE + STAGGER * 2);
    let b_leads = elect_all(&w, b_waits);
    let started_on = seen.started_on.lock().unwrap().clone();
    assert!(
        !started_on.is_empty(),
        "{flavour:?}: the standby host checked nothing before taking over"
    );
    #[cfg(feature = "blocking")]
    if matches!(flavour, Flavour::Blocking) {
        for name in &started_on {
            assert_eq!(
                name, "kc-host",
                "a batch of checks started on thread {name:?}"
            );
        }
    }
    drop(a_leads);
    resign_each(&w, b_leads);
}

#[test]
fn checks_start_on_the_loop_on_every_flavour() {
    for flavour in flavours() {
        checks_start_on_the_loop(flavour);
    }
}

/// A host whose runtime shuts down while the cluster does not answer: its candidacies exit
/// together, each call of every exit under way at the same time, and the runtime's drop
/// returns within one exit deadline for all of them (calls that never answer are abandoned),
/// not a transport timeout per role, one role after another.
#[cfg(feature = "tokio")]
#[test]
fn a_host_whose_runtime_goes_away_exits_every_role_together_within_one_deadline() {
    use std::sync::{Condvar, Mutex};

    const ROLES: usize = 4;
    let w = World::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let host = {
        let _guard = rt.enter();
        kafka_coordination::tokio_driver::host(Arc::new(w.broker.transport("a")), w.host_options(8))
            .expect("the host starts")
    };
    let candidacies = roles(ROLES)
        .iter()
        .map(|r| host.start(r, "a", w.options()).expect("start"))
        .collect();
    let leaderships = elect_all(&w, candidacies);
    // From now on every call blocks, until the test lets them go: a cluster that never answers.
    // `blocked` counts the calls waiting at once.
    let gate = Arc::new((Mutex::new((0usize, false)), Condvar::new()));
    let hook_gate = gate.clone();
    w.broker.on_call(move |_| {
        let (state, changed) = &*hook_gate;
        let mut s = state.lock().unwrap();
        s.0 += 1;
        changed.notify_all();
        while !s.1 {
            s = changed.wait(s).unwrap();
        }
        s.0 -= 1;
    });
    let dropped = std::thread::spawn(move || drop(rt));
    let (state, changed) = &*gate;
    let (s, waited) = changed
        .wait_timeout_while(state.lock().unwrap(), Duration::from_secs(120), |s| {
            s.0 < ROLES
        })
        .unwrap();
    let together = s.0;
    drop(s);
    assert!(
        !waited.timed_out() && together == ROLES,
        "{together} of {ROLES} exits had a call under way at once: they ran one after another"
    );
    // Every call still blocks; the drop returns anyway, once the exits' deadline passed.
    dropped.join().expect("the runtime's drop");
    for l in &leaderships {
        assert!(l.is_done(), "{}: the term is over", l.role());
        assert!(
            matches!(l.err(), Some(Error::Stopped { .. })),
            "{}: {:?}",
            l.role(),
            l.err()
        );
    }
    let mut s = state.lock().unwrap();
    s.1 = true;
    changed.notify_all();
    drop(s);
    drop(host);
    w.broker.clear_call_hook();
}
