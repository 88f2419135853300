//! Fleet balancing on the in-memory broker with a manual clock: shares follow the preferred
//! owners, a dead member's roles are taken and spread, a member that comes back gets its share
//! back, a drained member leads nothing, and no pair of a role writes after a newer one did.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::core::time::UnixMillis;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::fleet::{preference, Fleet, FleetOptions, FleetRole, Policy, Version};
use kafka_coordination::host::{Host, HostOptions};
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::watch::leader_at;
use kafka_coordination::{blocking, ManualClock, Options};

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(500);
const STAGGER: Duration = Duration::from_millis(300);
const STEP: Duration = Duration::from_millis(100);

struct World {
    clock: ManualClock,
    state: MemoryBroker,
    beats: MemoryBroker,
    roles: Vec<String>,
}

struct Member {
    name: String,
    state_link: Link<MemoryTransport>,
    beat_link: Link<MemoryTransport>,
    _host: Host,
    fleet: Fleet,
    _roles: Vec<FleetRole>,
}

impl World {
    fn new(roles: usize) -> World {
        let clock = ManualClock::default();
        World {
            state: MemoryBroker::new(8, Arc::new(clock.clone())),
            beats: MemoryBroker::new(1, Arc::new(clock.clone())),
            roles: (0..roles).map(|i| format!("shard-{i}")).collect(),
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

    fn member(&self, name: &str, tweak: impl FnOnce(FleetOptions) -> FleetOptions) -> Member {
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
        let roles = self.roles.iter().map(|r| fleet.start(r).unwrap()).collect();
        Member {
            name: name.to_owned(),
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
        use kafka_coordination::Clock;
        self.clock.now()
    }

    /// Who leads each role now, as its lease records say (a vacant role is absent).
    fn leaders(&self) -> BTreeMap<String, String> {
        let reader = self.state.transport("observer");
        let now = self.now();
        let mut out = BTreeMap::new();
        for role in &self.roles {
            if let Some(l) = leader_at(&reader, role, now).unwrap().leader() {
                out.insert(role.clone(), l.member.as_str().to_owned());
            }
        }
        out
    }

    /// The owner of each role among `members` (equal weights, no versions), as every member
    /// computes it: the members host the same roles, so with bounded loads.
    fn preferred(&self, members: &[&str]) -> BTreeMap<String, String> {
        self.preferred_weighted(&members.iter().map(|m| (*m, 1.0)).collect::<Vec<_>>())
    }

    fn preferred_weighted(&self, members: &[(&str, f64)]) -> BTreeMap<String, String> {
        let cands: Vec<_> = members
            .iter()
            .map(|(m, w)| preference::Candidate {
                member: m,
                weight: *w,
                version: None,
            })
            .collect();
        let refs: Vec<_> = cands.iter().collect();
        let roles: Vec<&str> = self.roles.iter().map(String::as_str).collect();
        preference::assign(&roles, &refs, preference::BALANCE_SLACK)
            .into_iter()
            .map(|(r, m)| (r.to_owned(), m.to_owned()))
            .collect()
    }

    /// Runs until every role is led by its preferred owner among `members`, at most `limit`.
    fn settle_on(&self, members: &[&str], limit: Duration) -> Duration {
        let want = self.preferred(members);
        let mut waited = Duration::ZERO;
        loop {
            if self.leaders() == want {
                return waited;
            }
            assert!(
                waited < limit,
                "after {waited:?} the roles are not led by their preferred owners: {} of {} differ",
                self.leaders()
                    .iter()
                    .filter(|(r, m)| want.get(*r) != Some(*m))
                    .count()
                    + want.len().saturating_sub(self.leaders().len()),
                want.len()
            );
            self.run_for(Duration::from_millis(500));
            waited += Duration::from_millis(500);
        }
    }

    /// No pair of a role wrote a lease after a newer pair of it did.
    fn check_fencing(&self) {
        let mut last: HashMap<String, (i64, i16)> = HashMap::new();
        for w in self.state.accepted_lease_writes() {
            let pair = (w.token.producer_id, w.token.producer_epoch);
            let role = w.role.as_str().to_owned();
            if let Some(before) = last.get(&role) {
                assert!(
                    pair >= *before,
                    "role {role}: pair {pair:?} wrote after {before:?} (by {})",
                    w.member
                );
            }
            last.insert(role, pair);
        }
    }
}

fn shares(leaders: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for m in leaders.values() {
        *out.entry(m.clone()).or_default() += 1;
    }
    out
}

impl Member {
    fn cut(&self) {
        self.state_link.cut();
        self.beat_link.cut();
    }
    fn restore(&self) {
        self.state_link.restore();
        self.beat_link.restore();
    }
}

#[test]
fn three_members_share_the_roles_a_dead_ones_spread_and_come_back_and_a_drained_one_leads_none() {
    let w = World::new(120);
    let a = w.member("a", |o| o);
    w.run_for(Duration::from_secs(1));
    // Alone, a leads everything.
    assert_eq!(w.leaders().len(), 120);
    assert_eq!(a.fleet.stats().leading, 120);
    let b = w.member("b", |o| o);
    let c = w.member("c", |o| o);
    let took = w.settle_on(&["a", "b", "c"], Duration::from_secs(30));
    let s = shares(&w.leaders());
    let moves: u64 = [&a, &b, &c].iter().map(|m| m.fleet.stats().handovers).sum();
    let requeues: u64 = [&a, &b, &c].iter().map(|m| m.fleet.stats().requeues).sum();
    eprintln!("settled in {took:?}: {s:?}; hand-overs {moves}, standby moves {requeues}");
    // Each role a left moved once: the standbys stood in order before the hand-over.
    let moved = (120 - s["a"]) as u64;
    assert_eq!(
        moves, moved,
        "{moves} hand-overs for {moved} roles that moved"
    );
    assert_eq!(a.fleet.stats().live_members, 3);
    // Each member's own count agrees with the records.
    for m in [&a, &b, &c] {
        assert_eq!(m.fleet.leading().len(), s[&m.name], "{}", m.name);
    }
    w.check_fencing();

    // c dies (its links cut): its roles are taken at their deadlines and spread over a and b.
    let before = w.leaders();
    c.cut();
    w.run_for(LEASE + STAGGER + Duration::from_millis(500));
    let after = w.leaders();
    for (role, m) in &before {
        if m == "c" {
            assert!(after.contains_key(role), "{role} is vacant after c died");
        }
    }
    // The standbys stood in order of preference: each of c's roles went straight to the
    // member that should have it once c is gone, without a hand-over after the failover.
    let handovers = |ms: &[&Member]| -> u64 { ms.iter().map(|m| m.fleet.stats().handovers).sum() };
    let before_moves = handovers(&[&a, &b]);
    assert_eq!(after, w.preferred(&["a", "b"]));
    w.settle_on(&["a", "b"], Duration::from_secs(30));
    assert_eq!(handovers(&[&a, &b]), before_moves);
    w.check_fencing();

    // c comes back: it gets its share back.
    c.restore();
    w.settle_on(&["a", "b", "c"], Duration::from_secs(30));
    w.check_fencing();

    // b drains: it leads and hosts nothing, and a and c lead everything.
    b.fleet.start_drain();
    w.run_for(Duration::from_secs(2));
    w.settle_on(&["a", "c"], Duration::from_secs(30));
    w.run_for(RENEW);
    let report = b.fleet.drain_report();
    assert!(report.is_complete(), "{report:?}");
    assert!(b.fleet.leading().is_empty());
    assert!(report.handed_over > 0 && report.withdrawn > 0, "{report:?}");
    assert!(!w.leaders().values().any(|m| m == "b"));
    w.check_fencing();
}

#[test]
fn prefer_newest_moves_every_role_to_the_new_version_and_not_ready_members_lead_nothing() {
    let w = World::new(60);
    let old = w.member("old", |o| o.version("1.0").policy(Policy::PreferNewest));
    w.run_for(Duration::from_secs(1));
    assert_eq!(old.fleet.leading().len(), 60);
    // A new version that is not ready yet takes nothing.
    let new = w.member("new", |o| {
        o.version("2.0").policy(Policy::PreferNewest).ready(false)
    });
    w.run_for(Duration::from_secs(5));
    assert_eq!(old.fleet.leading().len(), 60);
    // Ready: every role moves to it.
    new.fleet.set_ready(true);
    w.settle_on(&["new"], Duration::from_secs(30));
    assert!(old.fleet.leading().is_empty());
    w.check_fencing();
}

#[test]
fn weights_set_the_shares_and_members_that_disagree_on_the_policy_move_nothing() {
    let w = World::new(200);
    let big = w.member("big", |o| o.weight(3.0));
    let small = w.member("small", |o| o);
    w.run_for(Duration::from_secs(20));
    let s = shares(&w.leaders());
    assert_eq!(s.values().sum::<usize>(), 200);
    let want = w.preferred_weighted(&[("big", 3.0), ("small", 1.0)]);
    assert_eq!(w.leaders(), want);
    let want_big = want.values().filter(|m| *m == "big").count();
    assert_eq!(s["big"], want_big, "{s:?}");
    assert!(
        (148..=152).contains(&want_big),
        "weight 3 of 4 gets three quarters: {want_big}"
    );
    assert!(big.fleet.stats().bounded);
    drop((big, small));

    // Two members with different policies: no move for preference, and no vacant role.
    let w = World::new(40);
    let x = w.member("x", |o| o.policy(Policy::Balance));
    w.run_for(Duration::from_secs(1));
    let y = w.member("y", |o| o.policy(Policy::PreferOldest));
    w.run_for(Duration::from_secs(10));
    assert_eq!(x.fleet.leading().len(), 40);
    assert!(y.fleet.leading().is_empty());
    assert!(x.fleet.stats().policy_conflicts > 0);
    assert_eq!(w.leaders().len(), 40);
}

#[test]
fn a_draining_member_of_another_policy_does_not_hold_the_others_back() {
    // A rolling upgrade that also changes the policy: the old member leads everything, the two
    // new ones disagree with it and take nothing; once it drains, they share what it hands
    // them, though it is still live (draining) with its old policy.
    let w = World::new(60);
    let old = w.member("old", |o| o.version("1.0").policy(Policy::Balance));
    w.run_for(Duration::from_secs(1));
    let n1 = w.member("n1", |o| o.version("2.0").policy(Policy::PreferNewest));
    let n2 = w.member("n2", |o| o.version("2.0").policy(Policy::PreferNewest));
    w.run_for(Duration::from_secs(5));
    assert_eq!(old.fleet.leading().len(), 60);
    assert!(n1.fleet.stats().policy_conflicts > 0);
    old.fleet.start_drain();
    w.settle_on(&["n1", "n2"], Duration::from_secs(30));
    let s = shares(&w.leaders());
    // Bounded loads: at most floor(30 x 1.01) = 30 each, so 30 and 30.
    assert_eq!((s["n1"], s["n2"]), (30, 30), "{s:?}");
    assert!(old.fleet.drain_report().is_complete());
    assert!(old.fleet.leading().is_empty());
    assert_eq!(n1.fleet.leading().len() + n2.fleet.leading().len(), 60);
    w.check_fencing();
}

#[test]
fn a_member_that_leaves_after_its_drain_is_back_at_once_under_the_same_name() {
    // A rolling deploy: b drains, leaves and exits; its next process, under the same member
    // id, takes the heartbeat at once (not a lease later) and gets its share back.
    let w = World::new(30);
    let a = w.member("a", |o| o);
    w.run_for(Duration::from_secs(1));
    let b = w.member("b", |o| o);
    w.settle_on(&["a", "b"], Duration::from_secs(30));
    b.fleet.start_drain();
    w.settle_on(&["a"], Duration::from_secs(30));
    b.fleet.leave_blocking().unwrap();
    drop(b);
    w.run_for(STEP);
    assert!(
        a.fleet
            .members()
            .iter()
            .all(|m| m.announcement.member != "b"),
        "b is still seen live after it left"
    );
    let b = w.member("b", |o| o);
    // Well within a lease: the old heartbeat lease was resigned, not left to run out.
    w.settle_on(&["a", "b"], LEASE);
    assert!(!b.fleet.leading().is_empty());
    w.check_fencing();
}

#[test]
fn bad_settings_are_refused_with_what_was_wrong() {
    let w = World::new(0);
    let host = blocking::host(
        Arc::new(w.state.transport("h")),
        HostOptions::new().clock(w.clock.clone()),
    )
    .unwrap();
    let join = |o: FleetOptions| {
        Fleet::join(
            &host,
            Arc::new(w.beats.transport("h")),
            o.options(w.options()),
        )
        .unwrap_err()
        .to_string()
    };
    assert!(join(FleetOptions::new("svc", "h").weight(0.0)).contains("weight 0"));
    assert!(join(FleetOptions::new("svc", "h").weight(-2.0)).contains("weight -2"));
    assert!(join(FleetOptions::new("svc", "h").weight(f64::NAN)).contains("weight NaN"));
    assert!(join(FleetOptions::new("svc", "h").version("2.x")).contains("'2.x'"));
    assert!(join(FleetOptions::new("svc", "")).contains("member ''"));
    assert!(join(FleetOptions::new("a/b", "h")).contains("name 'a/b'"));
    assert!(join(FleetOptions::new("svc", "h").max_in_motion(0)).contains("max_in_motion"));
    assert!("fastest"
        .parse::<Policy>()
        .unwrap_err()
        .to_string()
        .contains("'fastest'"));
    assert!(Version::parse("1..2").is_err());
}

#[test]
fn a_fleet_of_one_leads_everything_and_drains_to_nothing_when_alone() {
    let w = World::new(10);
    let solo = w.member("solo", |o| o);
    w.run_for(Duration::from_secs(1));
    assert_eq!(solo.fleet.leading().len(), 10);
    // Alone, a drain hands nothing over: nobody is registered behind it, so no role is left
    // without a leader; it withdraws what it does not lead (nothing here).
    solo.fleet.start_drain();
    w.run_for(Duration::from_secs(3));
    let report = solo.fleet.drain_report();
    assert_eq!(report.kept.len(), 10, "{report:?}");
    assert_eq!(w.leaders().len(), 10);
    // A second member joins: the drain goes on to it.
    let other = w.member("other", |o| o);
    w.settle_on(&["other"], Duration::from_secs(30));
    assert!(solo.fleet.drain_report().is_complete());
    drop(other);
}

#[test]
fn a_drain_asked_for_from_another_process_moves_every_role_away() {
    let w = World::new(30);
    let a = w.member("a", |o| o);
    w.run_for(Duration::from_secs(1));
    let b = w.member("b", |o| o);
    w.settle_on(&["a", "b"], Duration::from_secs(30));
    assert!(!b.fleet.leading().is_empty());
    // An operator's process asks b to drain through the fleet topic.
    kafka_coordination::fleet::request_drain(
        Arc::new(w.beats.transport("ops")),
        "svc",
        "b",
        "ops-1",
        w.options(),
    )
    .unwrap();
    w.settle_on(&["a"], Duration::from_secs(30));
    let stats = b.fleet.stats();
    assert!(stats.drain_requested && stats.draining, "{stats:?}");
    // A standby parked in a long poll leaves at the partition's next change (on a real clock,
    // the host's next refresh): one more renewal of a's.
    w.run_for(RENEW);
    let report = b.fleet.drain_report();
    assert!(report.is_complete(), "{report:?}");
    // a was not asked: it did not drain.
    assert!(!a.fleet.stats().draining);
    w.check_fencing();
}
