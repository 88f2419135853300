//! The `metrics` feature: every driver records the documented series, with exact values, on the
//! test kit's manual clock. A small recorder of this module's own (installed once as the
//! process's global recorder; no other module installs one) keeps every value. The other modules
//! of the test binary record into it too while they run beside these tests, so each scenario
//! here uses role names that no other test uses (`failover-`, `resign-`, `zero-`, `described`,
//! `metered-`), and reads only the series of its own roles.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kafka_coordination::core::machine::{backoff, BACKOFF_CAP};
use kafka_coordination::error::ErrorKind;
use kafka_coordination::metrics::{
    ACQUIRE_SECONDS, CANDIDACY_ENDS, ELECTIONS, END_REASONS, FENCED, IS_LEADER, RENEW_FAILURES,
    RENEW_SECONDS, RESIGNS,
};
use kafka_coordination::testkit::{Flavour, TestCluster, RENEW};
use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// Every value ever recorded, by key.
#[derive(Default)]
struct Store {
    counters: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    gauges: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<Key, Arc<Samples>>>,
    described: Mutex<HashMap<String, Option<Unit>>>,
}

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

struct Global(Arc<Store>);

impl Recorder for Global {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.0
            .described
            .lock()
            .unwrap()
            .insert(key.as_str().to_owned(), unit);
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.0
            .described
            .lock()
            .unwrap()
            .insert(key.as_str().to_owned(), unit);
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.0
            .described
            .lock()
            .unwrap()
            .insert(key.as_str().to_owned(), unit);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut map = self.0.counters.lock().unwrap();
        Counter::from_arc(map.entry(key.clone()).or_default().clone())
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut map = self.0.gauges.lock().unwrap();
        Gauge::from_arc(map.entry(key.clone()).or_default().clone())
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut map = self.0.histograms.lock().unwrap();
        Histogram::from_arc(map.entry(key.clone()).or_default().clone())
    }
}

fn store() -> &'static Store {
    static STORE: OnceLock<Arc<Store>> = OnceLock::new();
    STORE.get_or_init(|| {
        let store = Arc::new(Store::default());
        metrics::set_global_recorder(Global(store.clone()))
            .expect("no other recorder in this test binary");
        store
    })
}

/// Whether `key` is `name` with exactly these labels (in any order).
fn matches(key: &Key, name: &str, labels: &[(&str, &str)]) -> bool {
    key.name() == name
        && key.labels().count() == labels.len()
        && labels
            .iter()
            .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
}

/// The series of one member of one role.
struct Series<'a> {
    role: &'a str,
    member: &'a str,
}

impl Series<'_> {
    fn labels(&self) -> [(&str, &str); 2] {
        [("role", self.role), ("member", self.member)]
    }

    fn counter(&self, name: &str) -> u64 {
        self.counter_with(name, &self.labels())
    }

    fn ends(&self, reason: &str) -> u64 {
        let [r, m] = self.labels();
        self.counter_with(CANDIDACY_ENDS, &[r, m, ("reason", reason)])
    }

    /// Whether the counter series exists (registered), whatever its value.
    fn has_counter(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        let map = store().counters.lock().unwrap();
        map.keys().any(|k| matches(k, name, labels))
    }

    fn counter_with(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let map = store().counters.lock().unwrap();
        map.iter()
            .find(|(k, _)| matches(k, name, labels))
            .map_or(0, |(_, v)| v.load(Ordering::SeqCst))
    }

    /// `None` when the member never set the gauge.
    fn is_leader(&self) -> Option<f64> {
        let map = store().gauges.lock().unwrap();
        map.iter()
            .find(|(k, _)| matches(k, IS_LEADER, &self.labels()))
            .map(|(_, v)| f64::from_bits(v.load(Ordering::SeqCst)))
    }

    fn samples(&self, name: &str) -> Vec<f64> {
        let map = store().histograms.lock().unwrap();
        map.iter()
            .find(|(k, _)| matches(k, name, &self.labels()))
            .map_or_else(Vec::new, |(_, v)| v.0.lock().unwrap().clone())
    }
}

/// The instants of a cut leader's failed renewals, from its first failure at `first_ms`
/// (milliseconds since an origin) up to and including `until_ms`: the machine retries a leader
/// with `backoff(n, renew / 4)`.
fn failures_between(first_ms: u64, until_ms: u64) -> Vec<u64> {
    let cap = (RENEW / 4).min(BACKOFF_CAP);
    let mut at = vec![first_ms];
    let mut n = 1;
    loop {
        let next = at[at.len() - 1] + backoff(n, cap).as_millis() as u64;
        if next > until_ms {
            return at;
        }
        at.push(next);
        n += 1;
    }
}

/// A failover: election, renewals, a cut link (renew failures, health failing for exactly the
/// time since the first failure), the standby's takeover, the old leader's fence, a resign.
fn failover_is_counted_exactly(flavour: Flavour) {
    let role = format!("failover-{flavour:?}").to_lowercase();
    let (a_s, b_s) = (
        Series {
            role: &role,
            member: "a",
        },
        Series {
            role: &role,
            member: "b",
        },
    );
    store();
    // 50 ms steps: every retry instant below (multiples of 50 ms) is reached exactly.
    let w = TestCluster::new()
        .flavour(flavour)
        .step(Duration::from_millis(50));
    let t0 = w.now();
    let ms = |n: u64| t0.saturating_add(Duration::from_millis(n));
    let a = w.join(&role, "a");
    let b = w.join(&role, "b");
    assert!(a.is_leader() && !b.is_leader());
    assert_eq!(a_s.counter(ELECTIONS), 1);
    assert_eq!(a_s.is_leader(), Some(1.0));
    assert_eq!(b_s.is_leader(), Some(0.0), "a standby has a series at 0");
    assert_eq!(b_s.counter(ELECTIONS), 0);
    // Minted and claimed without the clock moving.
    assert_eq!(a_s.samples(ACQUIRE_SECONDS), vec![0.0]);

    // Renewals at +1 s and +2 s.
    w.advance(Duration::from_secs(2));
    assert_eq!(a_s.samples(RENEW_SECONDS), vec![0.0, 0.0]);
    assert_eq!(a_s.counter(RENEW_FAILURES), 0);

    // Cut at +2 s: the renewal due at +3 s fails, and so does every retry.
    a.link().cut();
    w.advance_to(ms(4000));
    let failed = failures_between(3000, 4000);
    assert_eq!(failed, vec![3000, 3100, 3300, 3550, 3800]);
    assert_eq!(a_s.counter(RENEW_FAILURES), failed.len() as u64);
    let health = a.with_leadership(|l| l.health()).expect("a leads");
    assert!(health.leading);
    assert_eq!(health.failing_for, Some(Duration::from_millis(1000)));
    assert_eq!(health.last_renewal, Some(ms(2000)));
    assert_eq!(health.lease_deadline, Some(ms(5000)));
    assert_eq!(a_s.is_leader(), Some(1.0), "a leader never fences itself");
    assert_eq!(a_s.samples(RENEW_SECONDS).len(), 2);

    // b (rank 0) takes over at a's deadline, +5 s.
    assert!(w.advance_until(Duration::from_secs(2), || b.is_leader()));
    assert_eq!(w.now(), ms(5000));
    assert_eq!(b_s.counter(ELECTIONS), 1);
    assert_eq!(b_s.is_leader(), Some(1.0));
    assert_eq!(b_s.samples(ACQUIRE_SECONDS), vec![0.0]);
    let failed = failures_between(3000, 5000);
    assert_eq!(a_s.counter(RENEW_FAILURES), failed.len() as u64);
    assert_eq!(
        (a_s.counter(FENCED), a_s.is_leader()),
        (0, Some(1.0)),
        "a does not know yet"
    );

    // a's link comes back: its next retry meets the fence.
    a.link().restore();
    w.advance(Duration::from_secs(1));
    assert!(a.error().is_some_and(|e| e.is_fenced()));
    assert_eq!(a_s.counter(FENCED), 1);
    assert_eq!(a_s.is_leader(), Some(0.0));
    assert_eq!(a_s.counter(RENEW_FAILURES), failed.len() as u64);
    assert_eq!(a_s.ends("fenced"), 1);
    assert_eq!(a_s.counter(RESIGNS), 0);
    assert_eq!(a_s.counter(ELECTIONS), 1);

    // b resigns.
    assert!(b.resign().is_ok());
    assert_eq!(b_s.counter(RESIGNS), 1);
    assert_eq!(b_s.is_leader(), Some(0.0));
    assert_eq!(b_s.ends("resigned"), 1);
    assert_eq!(b_s.counter(FENCED), 0);
    // b renewed at +6 s (one renew interval after its claim at +5 s).
    assert_eq!(b_s.samples(RENEW_SECONDS), vec![0.0]);
}

/// A standby that cancels ends as `resigned` but resigns no term; a leader that drops its
/// handle resigns; a claim that failed once takes its backoff in the acquire latency.
fn resigns_cancels_and_acquire_latency(flavour: Flavour) {
    let role = format!("resign-{flavour:?}").to_lowercase();
    let (a_s, b_s) = (
        Series {
            role: &role,
            member: "a",
        },
        Series {
            role: &role,
            member: "b",
        },
    );
    store();
    let w = TestCluster::new().flavour(flavour);
    // The first lease write (a's claim) fails once; a retries it after 100 ms.
    w.broker().fail_next_op(
        kafka_coordination::memory::BrokerOp::WriteLease,
        1,
        ErrorKind::Retriable,
    );
    let a = w.join(&role, "a");
    assert!(!a.is_leader());
    assert_eq!(a_s.is_leader(), Some(0.0));
    w.advance(Duration::from_millis(100));
    assert!(a.is_leader());
    assert_eq!(a_s.samples(ACQUIRE_SECONDS), vec![0.1]);
    // A claim's failure is not a renewal's.
    assert_eq!(a_s.counter(RENEW_FAILURES), 0);

    let b = w.join(&role, "b");
    assert!(b.resign().is_ok(), "the standby cancels");
    assert_eq!(b_s.ends("resigned"), 1);
    assert_eq!((b_s.counter(RESIGNS), b_s.counter(ELECTIONS)), (0, 0));

    // The code under test drops its leadership: a resign.
    let leadership = a.take_leadership().expect("a leads");
    drop(leadership);
    w.settle();
    assert!(a.is_done());
    assert_eq!(a_s.counter(RESIGNS), 1);
    assert_eq!(a_s.ends("resigned"), 1);
    assert_eq!(a_s.is_leader(), Some(0.0));
}

/// A standby that has done nothing but register already has every counter series, at 0, so
/// that `increase()` sees its first event as a rise.
fn every_counter_series_starts_at_0(flavour: Flavour) {
    let role = format!("zero-{flavour:?}").to_lowercase();
    let (a_s, b_s) = (
        Series {
            role: &role,
            member: "a",
        },
        Series {
            role: &role,
            member: "b",
        },
    );
    store();
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(&role, "a");
    assert!(a.is_leader());
    let b = w.join(&role, "b");
    w.settle();
    assert!(!b.is_leader());
    let [r, m] = b_s.labels();
    for name in [ELECTIONS, FENCED, RESIGNS, RENEW_FAILURES] {
        assert!(
            b_s.has_counter(name, &[r, m]),
            "{name} of the standby exists"
        );
        assert_eq!(b_s.counter(name), 0, "{name} of the standby");
    }
    for reason in END_REASONS {
        assert!(
            b_s.has_counter(CANDIDACY_ENDS, &[r, m, ("reason", reason)]),
            "{CANDIDACY_ENDS} with reason {reason} of the standby exists"
        );
        assert_eq!(b_s.ends(reason), 0);
    }
    assert_eq!(b_s.is_leader(), Some(0.0));
    // The leader's election counted from 0; its other series are there at 0.
    assert_eq!(a_s.counter(ELECTIONS), 1);
    assert!(a_s.has_counter(FENCED, &a_s.labels()));
    assert_eq!(a_s.counter(FENCED), 0);
    // An end leaves the other reasons at 0.
    assert!(b.resign().is_ok());
    assert_eq!((b_s.ends("resigned"), b_s.ends("fenced")), (1, 0));
}

#[test]
fn every_counter_series_starts_at_0_with_the_candidacy() {
    for flavour in Flavour::all() {
        every_counter_series_starts_at_0(flavour);
    }
}

/// Every series is described with its unit.
#[test]
fn every_series_is_described() {
    store();
    let w = TestCluster::new();
    let _a = w.join("described", "a");
    let described = store().described.lock().unwrap();
    for (name, unit) in [
        (ELECTIONS, Some(Unit::Count)),
        (FENCED, Some(Unit::Count)),
        (RESIGNS, Some(Unit::Count)),
        (RENEW_FAILURES, Some(Unit::Count)),
        (CANDIDACY_ENDS, Some(Unit::Count)),
        (IS_LEADER, None),
        (RENEW_SECONDS, Some(Unit::Seconds)),
        (ACQUIRE_SECONDS, Some(Unit::Seconds)),
    ] {
        assert_eq!(described.get(name), Some(&unit), "{name}");
    }
}

#[test]
fn failover_is_counted_exactly_on_every_driver() {
    for flavour in Flavour::all() {
        failover_is_counted_exactly(flavour);
    }
}

#[test]
fn resigns_cancels_and_acquire_latency_on_every_driver() {
    for flavour in Flavour::all() {
        resigns_cancels_and_acquire_latency(flavour);
    }
}

#[cfg(feature = "blocking")]
fn gauge(name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let map = store().gauges.lock().unwrap();
    map.iter()
        .find(|(k, _)| matches(k, name, labels))
        .map(|(_, v)| f64::from_bits(v.load(Ordering::SeqCst)))
}

/// A fleet member records its leading, preferred and in-motion counts, the live members and
/// its hand-overs.
#[cfg(feature = "blocking")]
#[test]
fn a_fleet_member_records_its_shares_and_hand_overs() {
    use kafka_coordination::fleet::{Fleet, FleetOptions};
    use kafka_coordination::host::HostOptions;
    use kafka_coordination::memory::MemoryBroker;
    use kafka_coordination::metrics::{
        FLEET_HANDOVERS, FLEET_IN_MOTION, FLEET_LEADING, FLEET_LIVE_MEMBERS, FLEET_PREFERRED,
    };
    use kafka_coordination::{blocking, ManualClock, Options};
    store();
    let clock = ManualClock::default();
    let state = MemoryBroker::new(4, Arc::new(clock.clone()));
    let beats = MemoryBroker::new(1, Arc::new(clock.clone()));
    let options = Options::new()
        .clock(clock.clone())
        .lease_duration(Duration::from_secs(2))
        .renew_interval(Duration::from_millis(500))
        .challenge_stagger(Duration::from_millis(300));
    let join = |name: &str| {
        let host = blocking::host(
            Arc::new(state.transport(name)),
            HostOptions::new().clock(clock.clone()),
        )
        .unwrap();
        let fleet = Fleet::join(
            &host,
            Arc::new(beats.transport(name)),
            FleetOptions::new("metered", name).options(options.clone()),
        )
        .unwrap();
        let roles: Vec<_> = (0..20)
            .map(|i| fleet.start(&format!("metered-{i}")).unwrap())
            .collect();
        (host, fleet, roles)
    };
    let a = join("fm-a");
    for _ in 0..10 {
        clock
            .advance_and_settle(Duration::from_millis(100))
            .unwrap();
    }
    let labels = [("fleet", "metered"), ("member", "fm-a")];
    assert_eq!(gauge(FLEET_LEADING, &labels), Some(20.0));
    assert_eq!(gauge(FLEET_LIVE_MEMBERS, &labels), Some(1.0));
    let b = join("fm-b");
    for _ in 0..100 {
        clock
            .advance_and_settle(Duration::from_millis(100))
            .unwrap();
    }
    let led_by_a = a.1.leading().len();
    assert!(led_by_a < 20, "a handed roles to b");
    assert_eq!(gauge(FLEET_LEADING, &labels), Some(led_by_a as f64));
    assert_eq!(gauge(FLEET_PREFERRED, &labels), Some(led_by_a as f64));
    assert_eq!(gauge(FLEET_IN_MOTION, &labels), Some(0.0));
    assert_eq!(gauge(FLEET_LIVE_MEMBERS, &labels), Some(2.0));
    let series = Series {
        role: "",
        member: "fm-a",
    };
    // The counter is the member's own count of hand-overs (`FleetStats::handovers`): at
    // least one per role that left it, and more when a role left twice (a hand-over lands on
    // whoever is next in rank for the role at that moment, which can be this member again).
    let handovers = series.counter_with(FLEET_HANDOVERS, &labels);
    assert_eq!(handovers, a.1.stats().handovers);
    assert!(handovers >= (20 - led_by_a) as u64, "{handovers}");
    drop(b);
}
