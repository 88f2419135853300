//! Watching a role (`blocking::watch`, `tokio::watch`, ... and `leader`) on every flavour this
//! build has, on the MemoryBroker with a ManualClock through the test kit. The watch takes part
//! in `settle`, so after every move of the clock each event the records and the time caused is
//! queued: the tests take them with `try_next`/`drain` and never wait on real time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_coordination::core::UnixMillis;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::error::{ErrorKind, TransportError};
use kafka_coordination::testkit::{Flavour, TestCluster, TestMember, LEASE, RENEW};
use kafka_coordination::transport::ReadDone;
use kafka_coordination::transport::StateReader;
use kafka_coordination::watch::{leader_at, LeaseTracker};
use kafka_coordination::watch::{Leader, RoleLeader, VacancyReason, Watch};
use kafka_coordination::{Error, WatchEvent, WatchOptions};

const ROLE: &str = "scheduler";
const PARTITIONS: i32 = 16;

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

/// Starts a watch of `ROLE` on `flavour`.
fn watch_with<S: StateReader + Send + Sync + 'static>(
    flavour: Flavour,
    reader: S,
    options: WatchOptions,
) -> Result<Watch, Error> {
    match flavour {
        #[cfg(feature = "blocking")]
        Flavour::Blocking => kafka_coordination::blocking::watch(reader, ROLE, options),
        #[cfg(feature = "tokio")]
        Flavour::Tokio => {
            let _entered = tokio_runtime().enter();
            kafka_coordination::tokio_driver::watch(reader, ROLE, options)
        }
        #[cfg(feature = "smol")]
        Flavour::Smol => kafka_coordination::smol_driver::watch(reader, ROLE, options),
        #[cfg(feature = "async-std")]
        Flavour::AsyncStd => kafka_coordination::async_std_driver::watch(reader, ROLE, options),
        #[allow(unreachable_patterns)]
        other => panic!("no watch for {other:?}"),
    }
}

fn options(w: &TestCluster) -> WatchOptions {
    WatchOptions::new().clock(w.clock().clone())
}

/// A watch through a link the test can cut, started and settled.
fn watch(
    w: &TestCluster,
    opts: WatchOptions,
) -> (Watch, Link<kafka_coordination::memory::MemoryTransport>) {
    let link = Link::new(w.observer());
    let watch = watch_with(w.current_flavour(), link.clone(), opts).expect("the watch starts");
    w.settle();
    (watch, link)
}

/// Every queued event; an error fails the test.
fn events(watch: &Watch) -> Vec<WatchEvent> {
    watch
        .drain()
        .into_iter()
        .map(|e| e.unwrap_or_else(|e| panic!("the watch failed: {e}")))
        .collect()
}

fn term(m: &TestMember) -> i64 {
    m.with_leadership(|l| l.term()).expect("leading")
}

/// Checks that `e` is `Leading` by `m` with its pair and term, and returns the leader.
fn assert_leading(e: &WatchEvent, m: &TestMember) -> Leader {
    let WatchEvent::Leading(l) = e else {
        panic!("expected {} leading, got {e:?}", m.name());
    };
    assert_eq!(l.member.as_str(), m.name(), "{e:?}");
    assert_eq!(Some(l.token), m.token(), "{e:?}");
    assert_eq!(
        l.term,
        term(m),
        "the watch's term is the leader's own: {e:?}"
    );
    l.clone()
}

fn assert_vacant(e: &WatchEvent, reason: VacancyReason, previous: Option<&Leader>) {
    let WatchEvent::Vacant(v) = e else {
        panic!("expected a vacancy ({reason}), got {e:?}");
    };
    assert_eq!(v.reason, reason, "{e:?}");
    assert_eq!(
        v.previous.as_ref().map(|p| (&p.member, p.token, p.term)),
        previous.map(|p| (&p.member, p.token, p.term)),
        "{e:?}"
    );
}

fn deadline(w: &TestCluster) -> UnixMillis {
    w.role_state(ROLE).lease().expect("a lease").lease.deadline
}

// ---- scenarios ----------------------------------------------------------------------------

fn the_first_event_is_the_state_when_the_watch_caught_up(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let (empty, _) = watch(&w, options(&w));
    assert_vacant(&events(&empty)[0], VacancyReason::Unclaimed, None);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let first = assert_leading(&events(&empty)[0], &a);
    a.resign().expect("a clean exit");
    let later = events(&empty);
    assert_vacant(&later[0], VacancyReason::Resigned, Some(&first));
    assert_leading(&later[1], &b);

    // A watch started now reports only the state: b, with its exact term.
    let (now, _) = watch(&w, options(&w));
    let got = events(&now);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_leading(&got[0], &b);
    // With history, every change in the log first.
    let (history, _) = watch(&w, options(&w).history(true));
    let got = events(&history);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0].leader().map(|l| l.member.as_str()), Some("a"));
    assert!(matches!(&got[1], WatchEvent::Vacant(v) if v.reason == VacancyReason::Resigned));
    assert_leading(&got[2], &b);
}

fn a_term_that_falls_between_two_reads_is_still_reported(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(ROLE, "a");
    let (watch, link) = watch(&w, options(&w));
    let la = assert_leading(&events(&watch)[0], &a);
    // The watch cannot read while b's whole term passes, and c's begins: no clock move at all.
    link.cut();
    let b = w.join(ROLE, "b");
    let c = w.join(ROLE, "c");
    a.resign().expect("a clean exit");
    assert!(b.is_leader());
    let (b_token, b_term) = (b.token().expect("b leads"), term(&b));
    b.resign().expect("a clean exit");
    assert!(c.is_leader());
    assert!(events(&watch).is_empty());
    link.restore();
    w.advance(Duration::from_millis(1));
    let got = events(&watch);
    assert_eq!(got.len(), 4, "{got:#?}");
    assert_vacant(&got[0], VacancyReason::Resigned, Some(&la));
    let WatchEvent::Leading(lb) = &got[1] else {
        panic!("b's term was skipped: {got:#?}");
    };
    assert_eq!(
        (lb.member.as_str(), lb.token, lb.term),
        ("b", b_token, b_term)
    );
    assert_vacant(&got[2], VacancyReason::Resigned, Some(lb));
    let lc = assert_leading(&got[3], &c);
    assert!(la.term < lb.term && lb.term < lc.term);
}

fn an_expired_lease_is_vacant_at_its_deadline_and_a_late_renewal_leads_again(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(ROLE, "a");
    let (watch, _) = watch(&w, options(&w));
    let la = assert_leading(&events(&watch)[0], &a);
    // a freezes; nobody else is there to take over.
    a.link().cut();
    w.settle();
    let deadline = deadline(&w);
    w.advance_to(UnixMillis(deadline.0 - 1));
    assert!(events(&watch).is_empty(), "vacant before the deadline");
    w.advance_to(deadline);
    let got = events(&watch);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_vacant(&got[0], VacancyReason::Expired, Some(&la));
    // a's link comes back; no one acquired, so its next renewal is accepted: the same term.
    a.link().restore();
    w.advance(RENEW);
    let got = events(&watch);
    assert_eq!(got.len(), 1, "{got:?}");
    let again = assert_leading(&got[0], &a);
    assert_eq!((again.term, again.token), (la.term, la.token));
    assert!(again.deadline > deadline);
}

fn a_failover_reports_expiry_then_the_successor(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let (watch, _) = watch(&w, options(&w));
    let la = assert_leading(&events(&watch)[0], &a);
    a.link().cut();
    assert!(w.advance_until(LEASE * 2, || b.is_leader()));
    let got = events(&watch);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_vacant(&got[0], VacancyReason::Expired, Some(&la));
    assert_leading(&got[1], &b);
}

fn renewals_are_reported_only_when_asked(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(ROLE, "a");
    let (quiet, _) = watch(&w, options(&w));
    let (chatty, _) = watch(&w, options(&w).renewals(true));
    let la = assert_leading(&events(&quiet)[0], &a);
    assert_leading(&events(&chatty)[0], &a);
    w.advance(RENEW * 5);
    assert!(events(&quiet).is_empty());
    let got = events(&chatty);
    assert!((4..=6).contains(&got.len()), "{got:?}");
    let mut last = la.deadline;
    for e in &got {
        let WatchEvent::Renewed(l) = e else {
            panic!("not a renewal: {e:?}");
        };
        assert_eq!((l.term, l.token), (la.term, la.token));
        assert!(l.deadline > last, "{got:?}");
        last = l.deadline;
    }
}

/// A reader that records where each read started.
struct Recording<R> {
    inner: R,
    starts: Arc<Mutex<Vec<i64>>>,
}

impl<R: StateReader> StateReader for Recording<R> {
    fn partitions(&self) -> i32 {
        self.inner.partitions()
    }
    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: ReadDone,
    ) {
        self.starts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(from_offset);
        self.inner
            .start_read_partition(partition, from_offset, max_wait, priority, done)
    }
    fn can_long_poll(&self) -> bool {
        self.inner.can_long_poll()
    }
}

fn the_partition_is_read_once_then_tailed(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(ROLE, "a");
    let _b = w.join(ROLE, "b");
    w.advance(RENEW * 3);
    let starts = Arc::new(Mutex::new(Vec::new()));
    let reader = Recording {
        inner: w.observer(),
        starts: starts.clone(),
    };
    let watch = watch_with(flavour, reader, options(&w)).expect("starts");
    w.settle();
    assert_leading(&events(&watch)[0], &a);
    w.advance(RENEW * 5);
    let starts = starts.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(starts.iter().filter(|&&s| s == 0).count(), 1, "{starts:?}");
    assert!(starts.windows(2).all(|p| p[0] <= p[1]), "{starts:?}");
    assert!(starts.len() > 2, "{starts:?}");
}

fn stopping_ends_the_watch(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(ROLE, "a");
    let starts = Arc::new(Mutex::new(Vec::new()));
    let reader = Recording {
        inner: w.observer(),
        starts: starts.clone(),
    };
    let mut watch = watch_with(flavour, reader, options(&w)).expect("starts");
    w.settle();
    let stopper = watch.stop_handle();
    stopper.stop();
    w.settle();
    assert!(watch.is_ended());
    // The event reported before the stop is still there, then the end.
    assert_leading(
        &watch.next().expect("the queued event").expect("no error"),
        &a,
    );
    assert!(watch.next().is_none());
    // The loop reads no more, whatever happens to the role.
    let reads = starts.lock().unwrap_or_else(|e| e.into_inner()).len();
    let _b = w.join(ROLE, "b");
    w.advance(RENEW * 3);
    assert_eq!(
        starts.lock().unwrap_or_else(|e| e.into_inner()).len(),
        reads
    );
}

#[cfg(async_driver)]
fn the_stream_yields_the_same_events(flavour: Flavour) {
    use futures_lite::StreamExt;
    let w = TestCluster::new().flavour(flavour);
    let a = w.join(ROLE, "a");
    let b = w.join(ROLE, "b");
    let (mut watch, _) = watch(&w, options(&w));
    a.resign().expect("a clean exit");
    watch.stop();
    w.settle();
    let got: Vec<WatchEvent> = futures_lite::future::block_on(async {
        let mut got = Vec::new();
        while let Some(e) = StreamExt::next(&mut watch).await {
            got.push(e.expect("no error"));
        }
        got
    });
    assert_eq!(got.len(), 3, "{got:?}");
    let la = got[0].leader().expect("a").clone();
    assert_eq!(la.member.as_str(), "a");
    assert_vacant(&got[1], VacancyReason::Resigned, Some(&la));
    assert_leading(&got[2], &b);
}

fn reads_that_keep_failing_end_the_watch_with_an_error(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let _a = w.join(ROLE, "a");
    let (watch, link) = watch(&w, options(&w).give_up_after(Duration::from_secs(5)));
    assert_eq!(events(&watch).len(), 1);
    link.cut();
    w.advance(Duration::from_secs(4));
    assert!(!watch.is_ended(), "gave up early");
    w.advance(Duration::from_secs(2));
    assert!(watch.is_ended(), "did not give up");
    let got = watch.drain();
    assert!(
        matches!(got.as_slice(), [Err(Error::Unavailable { waited, .. })] if *waited >= Duration::from_secs(5)),
        "{got:?}"
    );
}

/// A reader whose every read fails with a configuration error.
struct Misconfigured;

impl StateReader for Misconfigured {
    fn partitions(&self) -> i32 {
        PARTITIONS
    }
    fn start_read_partition(&self, _: i32, _: i64, _: Duration, _: i64, done: ReadDone) {
        done(Err(TransportError::config(
            "topic __coordination_state does not exist",
        )))
    }
}

fn a_failure_that_will_not_pass_ends_the_watch_at_once(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let watch = watch_with(flavour, Misconfigured, options(&w)).expect("starts");
    w.settle();
    assert!(watch.is_ended());
    let got = watch.drain();
    assert!(
        matches!(got.as_slice(), [Err(Error::Transport(e))] if e.kind() == ErrorKind::Config && e.message().contains("does not exist")),
        "{got:?}"
    );
}

fn leader_names_the_member_pair_term_and_deadline(flavour: Flavour) {
    let w = TestCluster::new().flavour(flavour);
    let observer = w.observer();
    let now = || w.now();
    assert!(matches!(
        leader_at(&observer, ROLE, now()).expect("read"),
        RoleLeader::Vacant(v) if v.reason == VacancyReason::Unclaimed && v.previous.is_none()
    ));
    let a = w.join(ROLE, "a");
    let _b = w.join(ROLE, "b");
    let got = leader_at(&observer, ROLE, now()).expect("read");
    let l = got.leader().expect("a leads").clone();
    assert_eq!(
        (l.member.as_str(), Some(l.token), l.term),
        ("a", a.token(), term(&a))
    );
    assert_eq!(l.deadline, deadline(&w));
    assert!(l.is_live(now()));
    // Judged at the deadline: vacant by expiry.
    assert!(matches!(
        leader_at(&observer, ROLE, l.deadline).expect("read"),
        RoleLeader::Vacant(v) if v.reason == VacancyReason::Expired && v.previous.as_ref().map(|p| p.term) == Some(l.term)
    ));
    a.resign().expect("a clean exit");
    let got = leader_at(&observer, ROLE, now()).expect("read");
    assert_eq!(got.leader().map(|l| l.member.as_str()), Some("b"));
    assert!(got.leader().is_some_and(|b| b.term > l.term));
    assert!(matches!(
        leader_at(&TestCluster::with_partitions(0).observer(), ROLE, now()),
        Err(Error::InvalidOptions(_))
    ));
    assert!(matches!(
        leader_at(&observer, "", now()),
        Err(Error::InvalidName(_))
    ));
}

macro_rules! scenarios {
    ($flavour:ident, $value:expr) => {
        mod $flavour {
            use kafka_coordination::testkit::Flavour;
            const F: Flavour = $value;
            #[test]
            fn the_first_event_is_the_state_when_the_watch_caught_up() {
                super::the_first_event_is_the_state_when_the_watch_caught_up(F)
            }
            #[test]
            fn a_term_that_falls_between_two_reads_is_still_reported() {
                super::a_term_that_falls_between_two_reads_is_still_reported(F)
            }
            #[test]
            fn an_expired_lease_is_vacant_at_its_deadline_and_a_late_renewal_leads_again() {
                super::an_expired_lease_is_vacant_at_its_deadline_and_a_late_renewal_leads_again(F)
            }
            #[test]
            fn a_failover_reports_expiry_then_the_successor() {
                super::a_failover_reports_expiry_then_the_successor(F)
            }
            #[test]
            fn renewals_are_reported_only_when_asked() {
                super::renewals_are_reported_only_when_asked(F)
            }
            #[test]
            fn the_partition_is_read_once_then_tailed() {
                super::the_partition_is_read_once_then_tailed(F)
            }
            #[test]
            fn stopping_ends_the_watch() {
                super::stopping_ends_the_watch(F)
            }
            #[test]
            fn reads_that_keep_failing_end_the_watch_with_an_error() {
                super::reads_that_keep_failing_end_the_watch_with_an_error(F)
            }
            #[test]
            fn a_failure_that_will_not_pass_ends_the_watch_at_once() {
                super::a_failure_that_will_not_pass_ends_the_watch_at_once(F)
            }
            #[test]
            fn leader_names_the_member_pair_term_and_deadline() {
                super::leader_names_the_member_pair_term_and_deadline(F)
            }
        }
    };
}

#[cfg(feature = "blocking")]
scenarios!(blocking, Flavour::Blocking);
#[cfg(feature = "tokio")]
scenarios!(tokio_flavour, Flavour::Tokio);
#[cfg(feature = "smol")]
scenarios!(smol_flavour, Flavour::Smol);
#[cfg(feature = "async-std")]
scenarios!(async_std_flavour, Flavour::AsyncStd);

#[cfg(feature = "tokio")]
#[test]
fn tokio_stream_yields_the_same_events() {
    the_stream_yields_the_same_events(Flavour::Tokio)
}
#[cfg(feature = "smol")]
#[test]
fn smol_stream_yields_the_same_events() {
    the_stream_yields_the_same_events(Flavour::Smol)
}
#[cfg(feature = "async-std")]
#[test]
fn async_std_stream_yields_the_same_events() {
    the_stream_yields_the_same_events(Flavour::AsyncStd)
}

/// The tracker alone: a renewal after the lease was cleared cannot happen, but a record of
/// another role, a malformed record and a second tombstone change nothing.
#[test]
fn the_tracker_ignores_what_does_not_change_the_leader() {
    use kafka_coordination::core::record::{Key, Lease, MemberId, Role};
    use kafka_coordination::transport::Record;
    use kafka_coordination::FencingToken;
    let role = Role::new(ROLE).expect("role");
    let mut t = LeaseTracker::new(role.clone());
    let lease = |member: &str, id: i64, at: i64| Lease {
        member: MemberId::new(member).expect("member"),
        token: FencingToken::new(id, 0),
        granted_at: UnixMillis(at),
        deadline: UnixMillis(at + 3000),
    };
    let key = Key::lease(role).encode();
    let other = Key::lease(Role::new("other").expect("role")).encode();
    let mut ev = Vec::new();
    t.apply(&Record::new(0, other, lease("x", 9, 0).encode()), &mut ev);
    t.apply(&Record::new(1, key.clone(), b"\x00".to_vec()), &mut ev);
    t.apply(&Record::tombstone(2, key.clone()), &mut ev);
    assert!(ev.is_empty(), "{ev:?}");
    t.apply(
        &Record::new(3, key.clone(), lease("a", 1, 100).encode()),
        &mut ev,
    );
    // A new pair whose term began after the last deadline: expiry first, then the new term.
    t.apply(
        &Record::new(5, key.clone(), lease("a", 2, 5000).encode()),
        &mut ev,
    );
    t.apply(&Record::tombstone(7, key.clone()), &mut ev);
    t.apply(&Record::tombstone(8, key), &mut ev);
    let kinds: Vec<String> = ev
        .iter()
        .map(|e| match e {
            WatchEvent::Leading(l) => format!("leading {} {} term {}", l.member, l.token, l.term),
            WatchEvent::Renewed(l) => format!("renewed {}", l.member),
            WatchEvent::Vacant(v) => format!("vacant {}", v.reason),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "leading a 1/0 term 3",
            "vacant expired",
            "leading a 2/0 term 5",
            "vacant resigned"
        ]
    );
}
