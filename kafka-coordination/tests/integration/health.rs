//! A leader's health (`Leadership::health`) and the ready-made [`HealthCheck`], on every
//! driver, on the test kit's manual clock: exact instants, no sleeps.

use std::time::Duration;

use kafka_coordination::testkit::{Flavour, TestCluster, LEASE};
use kafka_coordination::HealthCheck;

/// 50 ms steps, so that every retry instant of a leader (100, 200, 250, 250, ... ms apart with
/// the kit's 1 s renew interval) is reached exactly.
fn cluster(flavour: Flavour) -> TestCluster {
    TestCluster::new()
        .flavour(flavour)
        .step(Duration::from_millis(50))
}

/// The lease deadline, the last successful renewal, and how long renewals have been failing:
/// exactly the time since the first failed renewal, gone at the first success.
fn renewal_failures_are_timed_exactly(flavour: Flavour) {
    let w = cluster(flavour);
    let t0 = w.now();
    let ms = |n: u64| t0.saturating_add(Duration::from_millis(n));
    let a = w.join("health", "a");
    let health = || a.with_leadership(|l| l.health()).expect("a leads");
    let h = health();
    assert_eq!(
        (h.leading, h.last_renewal, h.lease_deadline, h.failing_for),
        (true, Some(t0), Some(t0.saturating_add(LEASE)), None)
    );
    assert_eq!(h.now, t0);

    a.link().cut();
    // The renewal due at +1 s fails; so do the retries at +1.1, +1.3 and +1.55 s.
    w.advance_to(ms(1750));
    let h = health();
    assert_eq!(h.failing_for, Some(Duration::from_millis(750)));
    assert_eq!(h.last_renewal, Some(t0), "the claim is the last success");
    assert_eq!(h.lease_deadline, Some(ms(3000)));
    assert!(h.leading, "a leader never fences itself");
    assert!(!h.is_healthy(Duration::from_millis(1700)));
    assert!(h.is_healthy(Duration::from_millis(1750)));

    // The next retry, at +1.8 s, succeeds.
    a.link().restore();
    w.advance_to(ms(1800));
    let h = health();
    assert_eq!(h.failing_for, None);
    assert_eq!(h.last_renewal, Some(ms(1800)));
    assert_eq!(h.lease_deadline, Some(ms(4800)));
    assert!(h.is_healthy(Duration::ZERO));
}

/// The check: healthy while leading nothing, healthy while renewing, unhealthy (naming the
/// term) once renewals stop for longer than the limit, healthy again once the term is over.
fn the_check_follows_the_terms_it_watches(flavour: Flavour) {
    let w = cluster(flavour);
    let max_age = Duration::from_millis(1500);
    let check = HealthCheck::new(max_age);
    assert_eq!(check.check(), Ok(()), "leads nothing");
    assert_eq!(check.watched(), 0);

    let a = w.join("jobs", "a");
    let b = w.join("jobs", "b");
    let c = w.join("billing", "c");
    let jobs = a.take_leadership().expect("a leads jobs");
    let billing = c.take_leadership().expect("c leads billing");
    check.watch(&jobs);
    check.watch(&jobs);
    check.watch(&billing);
    assert_eq!(check.watched(), 2, "the same term is watched once");
    w.advance(Duration::from_secs(2));
    assert_eq!(check.check(), Ok(()));

    // a's link is cut at +2 s; its last renewal was at +2 s.
    a.link().cut();
    w.advance(Duration::from_millis(1500));
    assert_eq!(
        check.check(),
        Ok(()),
        "exactly max_age old is still healthy"
    );
    w.advance(Duration::from_millis(50));
    let unhealthy = check.check().expect_err("a stopped renewing");
    assert_eq!(unhealthy.max_age, max_age);
    assert_eq!(unhealthy.stale.len(), 1, "billing is fine: {unhealthy}");
    let stale = &unhealthy.stale[0];
    assert_eq!((stale.role.as_str(), stale.member.as_str()), ("jobs", "a"));
    assert_eq!(stale.health.failing_for, Some(Duration::from_millis(550)));
    assert_eq!(
        unhealthy.to_string(),
        "unhealthy: no lease renewal within 1.500 s: role `jobs` (member `a`): \
         last lease renewal 1.550 s ago, renewals failing for 0.550 s, \
         lease runs out in 1.450 s"
    );

    // b takes over; a's link comes back and its next retry meets the fence: its term is over,
    // so the check forgets it and is healthy again.
    assert!(w.advance_until(LEASE, || b.is_leader()));
    assert!(check.check().is_err(), "a still believes it leads");
    a.link().restore();
    w.advance(Duration::from_secs(1));
    assert!(jobs.is_done());
    assert_eq!(check.check(), Ok(()));
    assert_eq!(check.watched(), 1, "only billing is left");

    // A resigned term is over too.
    assert!(billing.resign_blocking().is_ok());
    assert_eq!(check.watched(), 0);
    assert_eq!(check.check(), Ok(()));
}

#[test]
fn renewal_failures_are_timed_exactly_on_every_driver() {
    for flavour in Flavour::all() {
        renewal_failures_are_timed_exactly(flavour);
    }
}

#[test]
fn the_check_follows_the_terms_it_watches_on_every_driver() {
    for flavour in Flavour::all() {
        the_check_follows_the_terms_it_watches(flavour);
    }
}
