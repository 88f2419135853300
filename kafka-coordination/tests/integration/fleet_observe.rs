//! A fleet seen from outside (`fleet::members`, `fleet::status`) on the in-memory broker with a
//! manual clock: the observer agrees with the members' own counts, sees a member that stops
//! renewing as not live before its lease runs out, sees a drained member lead nothing, and shows
//! no preferred owner while members disagree on the policy.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::core::time::UnixMillis;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::fleet::{
    self, preference, Fleet, FleetOptions, FleetRole, FleetStatus, ObservedMember, Policy,
};
use kafka_coordination::host::{Host, HostOptions};
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::watch::roles;
use kafka_coordination::{blocking, Clock, ManualClock, Options};

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(500);
const STAGGER: Duration = Duration::from_millis(300);
const STEP: Duration = Duration::from_millis(100);

struct World {
    clock: ManualClock,
    state: MemoryBroker,
    beats: MemoryBroker,
}

struct Member {
    state_link: Link<MemoryTransport>,
    beat_link: Link<MemoryTransport>,
    _host: Host,
    fleet: Fleet,
    _roles: Vec<FleetRole>,
}

impl Member {
    fn cut(&self) {
        self.state_link.cut();
        self.beat_link.cut();
    }
}

impl World {
    fn new() -> World {
        let clock = ManualClock::default();
        World {
            state: MemoryBroker::new(8, Arc::new(clock.clone())),
            beats: MemoryBroker::new(1, Arc::new(clock.clone())),
            clock,
        }
    }

    fn options(&self) -> Options {
        Options::new()
            .clock(self.clock.clone())
            .lease_duration(LEASE)
            .renew_interval(RENEW)
            .challenge_stagger(STAGGER)
    }

    /// Member `name` of fleet `svc`, hosting `roles` (named `shard-<i>`).
    fn member(
        &self,
        name: &str,
        roles: usize,
        tweak: impl FnOnce(FleetOptions) -> FleetOptions,
    ) -> Member {
        let state_link = Link::new(self.state.transport(name));
        let beat_link = Link::new(self.beats.transport(name));
        let host = blocking::host(
            Arc::new(state_link.clone()),
            HostOptions::new().clock(self.clock.clone()),
        )
        .unwrap();
        let fleet = Fleet::join(
            &host,
            Arc::new(beat_link.clone()),
            tweak(FleetOptions::new("svc", name).options(self.options())),
        )
        .unwrap();
        let roles = (0..roles)
            .map(|i| fleet.start(&format!("shard-{i}")).unwrap())
            .collect();
        Member {
            state_link,
            beat_link,
            _host: host,
            fleet,
            _roles: roles,
        }
    }

    fn run_for(&self, d: Duration) {
        let mut left = d;
        while !left.is_zero() {
            let step = left.min(STEP);
            self.clock.advance_and_settle(step).unwrap();
            left -= step;
        }
    }

    fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    fn members(&self, fleet_name: &str) -> Vec<ObservedMember> {
        fleet::members(
            &self.beats.transport("observer"),
            fleet_name,
            &self.options().timing_value(),
            self.now(),
        )
        .unwrap()
    }

    fn status(&self) -> FleetStatus {
        let members = self.members("svc");
        let roles = roles(&self.state.transport("observer")).unwrap();
        fleet::status(&members, &roles, self.now())
    }

    /// Runs until the observer sees `live` live members and no role in motion, at most `limit`.
    fn settle(&self, live: usize, limit: Duration) -> FleetStatus {
        self.run_until(limit, "no role in motion", |s| {
            s.live() == live && s.in_motion() == 0 && !s.roles.is_empty()
        })
    }

    /// Runs until what the observer sees passes `done`, at most `limit` (of the manual clock).
    fn run_until(
        &self,
        limit: Duration,
        what: &str,
        done: impl Fn(&FleetStatus) -> bool,
    ) -> FleetStatus {
        let mut waited = Duration::ZERO;
        loop {
            let s = self.status();
            if done(&s) {
                return s;
            }
            assert!(
                waited < limit,
                "after {waited:?}, not yet {what}: {} live member(s), {} role(s) in motion, \
                 {} vacant",
                s.live(),
                s.in_motion(),
                s.vacant()
            );
            self.run_for(Duration::from_millis(500));
            waited += Duration::from_millis(500);
        }
    }
}

fn by_member(s: &FleetStatus) -> BTreeMap<&str, (bool, usize, usize)> {
    s.members
        .iter()
        .map(|m| {
            (
                m.member.member.as_str(),
                (m.member.live, m.leads, m.preferred),
            )
        })
        .collect()
}

#[test]
fn the_observer_agrees_with_the_members_and_sees_a_silent_one_before_its_lease_ends() {
    let w = World::new();
    let a = w.member("a", 60, |o| o);
    w.run_for(Duration::from_secs(1));
    let b = w.member("b", 60, |o| o.weight(2.0));
    let c = w.member("c", 60, |o| o.version("1.2"));
    let s = w.run_until(
        Duration::from_secs(30),
        "balanced with bounded loads",
        |s| s.live() == 3 && s.in_motion() == 0 && s.bounded,
    );
    // Another fleet in the same topic sees none of these members.
    assert!(w.members("other").is_empty());

    assert_eq!(s.roles.len(), 60);
    assert_eq!(
        (s.led(), s.vacant(), s.in_motion(), s.live()),
        (60, 0, 0, 3)
    );
    assert_eq!(s.policy, Some(Policy::Balance));
    assert!(!s.policy_conflict);
    // Every member hosts the same 60 roles: bounded loads, as the members themselves use.
    assert!(s.bounded);
    for m in [&a, &b, &c] {
        assert!(m.fleet.stats().bounded);
    }
    let seen = by_member(&s);
    for (name, m) in [("a", &a), ("b", &b), ("c", &c)] {
        let (live, leads, preferred) = seen[name];
        assert!(live, "{name}");
        assert_eq!(leads, m.fleet.leading().len(), "{name}");
        assert_eq!(preferred, m.fleet.stats().preferred, "{name}");
        assert_eq!(leads, preferred, "{name}");
    }
    // The shares are those of bounded loads over the weights.
    let cands = [("a", 1.0), ("b", 2.0), ("c", 1.0)].map(|(m, w)| preference::Candidate {
        member: m,
        weight: w,
        version: None,
    });
    let refs: Vec<_> = cands.iter().collect();
    let names: Vec<String> = (0..60).map(|i| format!("shard-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let want = preference::assign(&names, &refs, preference::BALANCE_SLACK);
    for r in &s.roles {
        assert_eq!(
            r.preferred.as_deref(),
            Some(want[r.role.as_str()]),
            "{}",
            r.role
        );
        assert_eq!(r.leader, r.preferred, "{}", r.role);
    }
    let announced = |name: &str| {
        s.members
            .iter()
            .find(|m| m.member.member == name)
            .and_then(|m| m.member.announcement.clone())
            .unwrap()
    };
    assert_eq!(announced("b").weight, 2.0);
    assert_eq!(announced("c").version.unwrap().as_str(), "1.2");

    // c stops renewing: after one and a half renew intervals it is no longer live, though its
    // leases still run; the roles it leads are then in motion, for a and b.
    let c_leads = seen["c"].1;
    assert!(c_leads > 0);
    c.cut();
    w.run_for(Duration::from_millis(1000));
    let s = w.status();
    let c_seen = s.members.iter().find(|m| m.member.member == "c").unwrap();
    assert!(
        !c_seen.member.live && c_seen.member.lease_running(w.now()),
        "{c_seen:?}"
    );
    assert_eq!(c_seen.leads, c_leads);
    assert_eq!(c_seen.preferred, 0);
    // (The bounds over a and b alone may push a few of their own roles along too.)
    assert!(s.in_motion() >= c_leads, "{} < {c_leads}", s.in_motion());
    assert_eq!(s.live(), 2);
    for r in s.roles.iter().filter(|r| r.leader.as_deref() == Some("c")) {
        assert!(r.in_motion && r.preferred.is_some(), "{r:?}");
    }
    // Once its leases ran out, a and b lead everything, by their preference.
    let s = w.settle(2, Duration::from_secs(30));
    assert_eq!(s.led(), 60);
    let seen = by_member(&s);
    assert_eq!(seen["c"], (false, 0, 0));
    assert_eq!(seen["a"].1 + seen["b"].1, 60);
    drop((a, b, c));
}

#[test]
fn a_drained_member_leads_nothing_and_announces_that_it_drains() {
    let w = World::new();
    let a = w.member("a", 30, |o| o);
    w.run_for(Duration::from_secs(1));
    let b = w.member("b", 30, |o| o);
    let s = w.settle(2, Duration::from_secs(30));
    assert!(by_member(&s)["b"].1 > 0);
    fleet::request_drain(
        Arc::new(w.beats.transport("ops")),
        "svc",
        "b",
        "ops-1",
        w.options(),
    )
    .unwrap();
    let s = w.run_until(Duration::from_secs(30), "drained", |s| {
        let seen = s.members.iter().find(|m| m.member.member == "b");
        // Every role of the fleet listed too: the moves end at different instants, and the
        // figures below are those of the state they end in.
        s.in_motion() == 0
            && s.roles.len() == 30
            && seen.is_some_and(|m| m.member.draining() && m.leads == 0)
            && b.fleet.drain_report().is_complete()
    });
    let b_seen = s.members.iter().find(|m| m.member.member == "b").unwrap();
    assert!(b_seen.member.live && b_seen.member.draining(), "{b_seen:?}");
    assert_eq!((b_seen.leads, b_seen.preferred), (0, 0));
    // b withdrew its registrations: the fleet's roles are still the 30 (a's).
    assert_eq!((s.roles.len(), s.led()), (30, 30));
    assert_eq!(by_member(&s)["a"], (true, 30, 30));
    assert!(b.fleet.stats().drain_requested);
    drop(a);
}

#[test]
fn members_that_disagree_on_the_policy_have_no_preferred_owner() {
    let w = World::new();
    let x = w.member("x", 20, |o| o.policy(Policy::Balance));
    w.run_for(Duration::from_secs(1));
    let y = w.member("y", 20, |o| o.policy(Policy::PreferOldest));
    w.run_for(Duration::from_secs(5));
    let s = w.status();
    assert!(s.policy_conflict && s.policy.is_none(), "{s:?}");
    assert!(s.roles.iter().all(|r| r.preferred.is_none()));
    // Nothing moves, and a role that has its leader is not in motion.
    assert_eq!((s.led(), s.in_motion()), (20, 0));
    assert_eq!(by_member(&s)["x"], (true, 20, 0));
    drop((x, y));
}

#[test]
fn members_that_host_different_roles_go_by_rendezvous_and_a_not_ready_one_is_preferred_for_none() {
    let w = World::new();
    let a = w.member("a", 20, |o| o);
    w.run_for(Duration::from_secs(1));
    // b hosts one role more: the digests differ, so nobody balances with bounded loads.
    let b = w.member("b", 21, |o| o);
    let warming = w.member("warming", 20, |o| o.ready(false));
    w.run_for(Duration::from_secs(10));
    let s = w.status();
    assert_eq!(s.roles.len(), 21);
    assert!(!s.bounded && !a.fleet.stats().bounded && !b.fleet.stats().bounded);
    let cands = [("a", 1.0), ("b", 1.0)].map(|(m, w)| preference::Candidate {
        member: m,
        weight: w,
        version: None,
    });
    let refs: Vec<_> = cands.iter().collect();
    for r in &s.roles {
        let first = preference::ranking(&r.role, &refs)[0].member;
        assert_eq!(r.preferred.as_deref(), Some(first), "{}", r.role);
    }
    let seen = by_member(&s);
    assert_eq!(seen["warming"], (true, 0, 0));
    assert_eq!(seen["a"].2 + seen["b"].2, 21);
    drop((a, b, warming));
}
