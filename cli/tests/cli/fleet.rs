//! `kafka-coordination fleet status` and `fleet drain`, run as a program: bad names and timing
//! are usage errors without a broker; on a real broker (`KAFKA_BOOTSTRAP`), two fleet members
//! run in this process (a 2 s lease renewed every 500 ms), `fleet status` shows them sharing
//! the roles, and after `fleet drain` one of them leads nothing and announces that it drains.
//!
//! Real time passes here; no test sleeps for a verdict: each polls the tool's output for the
//! state it waits for, with a generous bound.

use kafka_coordination_test_support as support;

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination::fleet::{Fleet, FleetOptions, FleetRole};
use kafka_coordination::host::{Host, HostOptions};
use kafka_coordination::kafka::KafkaConfig;
use kafka_coordination::{blocking, Options};
use serde_json::Value;
use support::{transport_with, unique, PARTITIONS};

const KC: &str = env!("CARGO_BIN_EXE_kafka-coordination");
/// A bound for what should happen promptly on a loaded machine.
const PROMPT: Duration = Duration::from_secs(60);
const FLEET_TOPIC: &str = "__coordination_fleet";
const ROLES: usize = 8;

/// The tool with no KC_* variable inherited.
fn kc(args: &[&str]) -> Output {
    let mut c = Command::new(KC);
    for (k, _) in std::env::vars() {
        if k.starts_with("KC_") {
            c.env_remove(k);
        }
    }
    c.args(args).output().expect("the tool runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn bad_names_and_timing_are_usage_errors() {
    // Port 1: nothing listens there; none of these gets as far as a request.
    for (args, says) in [
        (
            &["fleet", "drain", "--fleet", "svc", "--member", "a/b"][..],
            "the member 'a/b' is empty or holds a '/'",
        ),
        (
            &["fleet", "drain", "--fleet", "", "--member", "a"],
            "the fleet name '' is empty",
        ),
        (&["fleet", "drain", "--fleet", "svc"], "--member"),
        (
            &["fleet", "status", "--fleet", "a/b"],
            "the fleet name 'a/b' is empty or holds a '/'",
        ),
        (&["fleet", "status"], "--fleet"),
        (
            &["roles", "--fleet", "a/b"],
            "the fleet name 'a/b' is empty or holds a '/'",
        ),
        (&["roles", "--lease-duration", "2s"], "--fleet"),
        (
            &[
                "fleet",
                "status",
                "--fleet",
                "svc",
                "--lease-duration",
                "2s",
                "--renew-interval",
                "3s",
            ],
            "renew",
        ),
    ] {
        let mut all = vec!["--bootstrap-servers", "127.0.0.1:1"];
        all.extend_from_slice(args);
        let o = kc(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(
            text(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

struct Member {
    _host: Host,
    fleet: Fleet,
    _roles: Vec<FleetRole>,
}

fn member(bootstrap: &str, fleet: &str, name: &str) -> Member {
    let options = Options::new()
        .lease_duration(Duration::from_secs(4))
        .renew_interval(Duration::from_millis(1000))
        .challenge_stagger(Duration::from_millis(300));
    let state = transport_with(KafkaConfig::new(bootstrap, PARTITIONS));
    let beats = transport_with(KafkaConfig::new(bootstrap, 1).with_topic(FLEET_TOPIC));
    let host = blocking::host(Arc::new(state), HostOptions::new()).expect("a host");
    let f = Fleet::join(
        &host,
        Arc::new(beats),
        FleetOptions::new(fleet, name).options(options),
    )
    .expect("joined");
    let roles = (0..ROLES)
        .map(|i| f.start(&format!("{fleet}-shard-{i}")).expect("a role"))
        .collect();
    Member {
        _host: host,
        fleet: f,
        _roles: roles,
    }
}

/// `fleet status --json` of `fleet`, with the members' timing.
fn status(bootstrap: &str, fleet: &str) -> Value {
    let o = kc(&[
        "--bootstrap-servers",
        bootstrap,
        "--json",
        "fleet",
        "status",
        "--fleet",
        fleet,
        "--roles",
        "--lease-duration",
        "2s",
        "--renew-interval",
        "500ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&o.stdout)))
}

/// `roles --fleet --json`: the fleet's roles (by name) as listed, with the members' timing.
fn roles_of_fleet(bootstrap: &str, fleet: &str) -> Vec<Value> {
    let o = kc(&[
        "--bootstrap-servers",
        bootstrap,
        "--json",
        "roles",
        "--fleet",
        fleet,
        "--lease-duration",
        "2s",
        "--renew-interval",
        "500ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let all: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&o.stdout)));
    let prefix = format!("{fleet}-shard-");
    all.as_array()
        .expect("an array")
        .iter()
        .filter(|r| r["role"].as_str().is_some_and(|n| n.starts_with(&prefix)))
        .cloned()
        .collect()
}

/// Polls `roles --fleet` until every role of the fleet is led by its preferred owner and
/// `fits` holds of that owner; returns the roles.
fn roles_settled(bootstrap: &str, fleet: &str, fits: impl Fn(&str) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + PROMPT;
    loop {
        let roles = roles_of_fleet(bootstrap, fleet);
        let settled = roles.len() == ROLES
            && roles.iter().all(|r| {
                r["in_motion"] == false
                    && r["preferred"].as_str().is_some_and(&fits)
                    && r["preferred"] == r["leader"]["member"]
            });
        if settled {
            return roles;
        }
        assert!(
            Instant::now() < deadline,
            "roles --fleet not settled after {PROMPT:?}: {roles:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn member_of<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["members"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["member"] == name))
        .unwrap_or_else(|| panic!("{name} is not listed: {v}"))
}

/// Polls `fleet status` until `done` holds, at most [`PROMPT`].
fn status_until(bootstrap: &str, fleet: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PROMPT;
    loop {
        let v = status(bootstrap, fleet);
        if done(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "not {what} after {PROMPT:?}: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn status_shows_the_members_sharing_the_roles_and_drain_moves_every_role_away() {
    let Some(bootstrap) = support::bootstrap(
        "fleet command-line tests",
        "scripts/kafka/with-broker.sh cargo test -p kafka-coordination-cli -- fleet::",
    ) else {
        return;
    };
    let fleet = unique("kcf");
    let (a_name, b_name) = (format!("{fleet}-a"), format!("{fleet}-b"));
    let a = member(&bootstrap, &fleet, &a_name);
    let b = member(&bootstrap, &fleet, &b_name);

    let v = status_until(&bootstrap, &fleet, "balanced", |v| {
        v["live_members"] == 2 && v["led"] == ROLES && v["in_motion"] == 0 && v["bounded"] == true
    });
    assert_eq!(v["roles"], ROLES, "{v}");
    assert_eq!(v["vacant"], 0, "{v}");
    assert_eq!(v["policy"], "balance", "{v}");
    assert_eq!(v["members"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["roles_in_motion"], serde_json::json!([]), "{v}");
    let mut total = 0;
    for name in [&a_name, &b_name] {
        let m = member_of(&v, name);
        assert_eq!(m["live"], true, "{m}");
        assert_eq!(m["state"], "live", "{m}");
        assert_eq!(m["weight"], 1.0, "{m}");
        assert_eq!(
            (&m["ready"], &m["draining"]),
            (&Value::Bool(true), &Value::Bool(false))
        );
        assert_eq!(m["leads"], m["preferred"], "{m}");
        total += m["leads"].as_u64().expect("a count");
    }
    assert_eq!(total, ROLES as u64, "{v}");

    // `roles --fleet` shows each role's preferred owner beside its leader: here every role is
    // led by the member the fleet prefers, and both members are preferred for some.
    let roles = roles_settled(&bootstrap, &fleet, |m| m == a_name || m == b_name);
    for name in [&a_name, &b_name] {
        assert!(
            roles.iter().any(|r| r["preferred"] == name.as_str()),
            "{name} is preferred for no role: {roles:#?}"
        );
    }
    let o = kc(&[
        "--bootstrap-servers",
        &bootstrap,
        "roles",
        "--fleet",
        &fleet,
        "--lease-duration",
        "2s",
        "--renew-interval",
        "500ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = text(&o.stdout);
    assert!(out.contains("PREFERRED"), "{out}");
    assert!(
        out.contains(&format!("fleet {fleet}: {ROLES} role(s)")),
        "{out}"
    );
    // Without --fleet, no such column.
    let o = kc(&["--bootstrap-servers", &bootstrap, "roles"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(!text(&o.stdout).contains("PREFERRED"));

    // As text: the table and the summary line (polled too: on a loaded machine a heartbeat
    // renewal may come late, and the member then shows stale for a moment).
    let want = [
        "2 of 2 member(s) live; policy balance, bounded loads".to_owned(),
        "MEMBER".to_owned(),
        "PREFERRED".to_owned(),
        format!("roles {ROLES}, led {ROLES}, in motion 0, vacant 0"),
        "no role in motion".to_owned(),
    ];
    let deadline = Instant::now() + PROMPT;
    loop {
        let o = kc(&[
            "--bootstrap-servers",
            &bootstrap,
            "fleet",
            "status",
            "--fleet",
            &fleet,
            "--lease-duration",
            "2s",
            "--renew-interval",
            "500ms",
            "--roles",
        ]);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let out = text(&o.stdout);
        if want.iter().all(|w| out.contains(w.as_str())) {
            break;
        }
        assert!(Instant::now() < deadline, "{want:?} not shown: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Without timing flags (the defaults: a 30 s lease renewed every 10 s), the members' own
    // announced timing judges their heartbeats: both are live.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = kc(&[
            "--bootstrap-servers",
            &bootstrap,
            "fleet",
            "status",
            "--fleet",
            &fleet,
        ]);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let out = text(&o.stdout);
        if out.contains("2 of 2 member(s) live") {
            break;
        }
        assert!(Instant::now() < deadline, "not both live: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // A member that is not there cannot be drained: it would ignore the request.
    let nobody = format!("{fleet}-nobody");
    let o = kc(&[
        "--bootstrap-servers",
        &bootstrap,
        "fleet",
        "drain",
        "--fleet",
        &fleet,
        "--member",
        &nobody,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = text(&o.stderr);
    assert!(
        err.contains("has no running heartbeat") && err.contains(&a_name),
        "{err}"
    );

    // b drains.
    let o = kc(&[
        "--bootstrap-servers",
        &bootstrap,
        "--json",
        "fleet",
        "drain",
        "--fleet",
        &fleet,
        "--member",
        &b_name,
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let done: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(done["requested"], true, "{done}");
    assert_eq!(done["was_draining"], false, "{done}");
    assert!(
        done["requester"]
            .as_str()
            .is_some_and(|r| r.starts_with("kafka-coordination-")),
        "{done}"
    );
    let v = status_until(&bootstrap, &fleet, "drained", |v| {
        let m = member_of(v, &b_name);
        m["live"] == true
            && m["draining"] == true
            && m["leads"] == 0
            && v["led"] == ROLES
            && v["in_motion"] == 0
    });
    let bm = member_of(&v, &b_name);
    assert_eq!(
        (&bm["live"], &bm["preferred"]),
        (&Value::Bool(true), &Value::from(0)),
        "{bm}"
    );
    assert_eq!(member_of(&v, &a_name)["leads"], ROLES, "{v}");
    // The drained member is preferred for no role.
    roles_settled(&bootstrap, &fleet, |m| m == a_name);
    let stats = b.fleet.stats();
    assert!(stats.drain_requested && stats.draining, "{stats:?}");
    assert!(!a.fleet.stats().draining);
}
