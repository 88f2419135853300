//! The fleet rows of docs/guide/deploying.md's ACL tables, on the SASL_SSL listener of the test
//! broker, whose authorizer enforces them (scripts/kafka/start.sh): each principal is a fresh
//! SCRAM user that holds exactly the rows the page gives for what it does.
//!
//! - Two fleet members (the library's `Fleet`, in this process) share six roles: one holds the
//!   literal TransactionalId rows `<fleet>/<member>` and `<fleet>//a/<member>`, the other the
//!   PREFIXED `<fleet>/` that covers both.
//! - `fleet status` follows them with the rows of its line; without the state topic's rows it
//!   is refused (exit 2, naming the topic).
//! - `fleet drain` is refused (exit 2, naming what is missing) without Write on the fleet topic
//!   and without its TransactionalId row, and drains a member with all its rows.
//! - A member without the announcement's TransactionalId row renews its heartbeat but is not
//!   announced (`fleet status` shows it not live) while its heartbeat runs on for two leases,
//!   and says why (`Fleet::heartbeat_error` names the TransactionalId);
//!   one without Read on the fleet topic reports a read error naming the ACL and the topic
//!   (`Fleet::read_error`). Each, granted the missing row, becomes live.
//! - On a ZooKeeper-mode broker (`KAFKA_MODE=zookeeper`, Kafka 3.x) no ACL can name a resource
//!   that holds a '/': the broker refuses the literal row `<fleet>/<member>`, so every fleet
//!   row there is the one PREFIXED `<fleet>` the deploying guide gives for such clusters, and
//!   the member without only its announcement's row cannot be set up (said loudly).
//!
//! Needs `KAFKA_BOOTSTRAP`, `KAFKA_SASL_SSL_BOOTSTRAP` and `KAFKA_SSL_CA` (exported by
//! scripts/kafka/start.sh, passed on by scripts/kafka/with-broker.sh); without them the test
//! says so loudly and returns. Real time passes (a 4 s lease renewed every second); nothing
//! sleeps for a verdict: every wait polls the tool's output or the member's state, with a bound.

use kafka_coordination_test_support as support;

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination::fleet::{Fleet, FleetOptions, FleetRole};
use kafka_coordination::host::{Host, HostOptions};
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{blocking, Options};
use serde_json::Value;
use support::acls::{Acl, Admin, Op};
use support::{loud, transport_with, unique, PARTITIONS};

const KC: &str = env!("CARGO_BIN_EXE_kafka-coordination");
/// A bound for what should happen promptly on a loaded machine.
const PROMPT: Duration = Duration::from_secs(60);
/// The fleet topic's default name, as the page's rows name it.
const FLEET_TOPIC: &str = "__coordination_fleet";
/// Six roles: with bounded loads (1 % of slack) each of two members leads 2 to 4 of them.
/// The members' timing: a 4 s lease renewed every second (`fleet status` counts a member live
/// while its heartbeat was renewed within 1.5 s, which a loaded machine still keeps).
const LEASE: Duration = Duration::from_secs(4);
const RENEW: Duration = Duration::from_secs(1);
const ROLES: usize = 6;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The named variables, or `None` after saying loudly which one is missing.
fn vars<const N: usize>(test: &str, names: [&str; N]) -> Option<[String; N]> {
    let mut out = Vec::new();
    for name in names {
        match std::env::var(name).ok().filter(|v| !v.trim().is_empty()) {
            Some(v) => out.push(v),
            None => {
                loud(&format!(
                    "{name} is not set, so {test} ran against nothing. Run: \
                     scripts/kafka/with-broker.sh cargo test -p kafka-coordination-cli --test \
                     cli -- fleet_acls::"
                ));
                return None;
            }
        }
    }
    out.try_into().ok()
}

/// The broker's SASL_SSL listener, as SCRAM user `user`.
struct Sasl {
    bootstrap: String,
    ca: String,
}

/// A SCRAM user that holds exactly `acls`.
struct User {
    name: String,
    password: String,
}

impl Sasl {
    fn config(&self, user: &User, partitions: i32) -> KafkaConfig {
        KafkaConfig::new(self.bootstrap.clone(), partitions)
            .with_property("security.protocol", "SASL_SSL")
            .with_property("sasl.mechanism", "SCRAM-SHA-512")
            .with_property("sasl.username", &user.name)
            .with_property("sasl.password", &user.password)
            .with_property("ssl.ca.location", &self.ca)
    }

    /// The tool as `user`, on state topic `state`, with no `KC_*` variable inherited.
    fn tool(&self, user: &User, state: &str, args: &[&str]) -> Output {
        let mut c = Command::new(KC);
        for (k, _) in std::env::vars() {
            if k.starts_with("KC_") {
                c.env_remove(k);
            }
        }
        c.args(["-b", &self.bootstrap, "--topic", state])
            .args(["--security-protocol", "SASL_SSL"])
            .args(["--sasl-mechanism", "SCRAM-SHA-512"])
            .args(["--sasl-username", &user.name])
            .args(["--ssl-ca-location", &self.ca])
            .env("KC_SASL_PASSWORD", &user.password)
            .args(args)
            .output()
            .expect("the tool runs")
    }
}

fn user(admin: &mut Admin, prefix: &str, acls: &[Acl]) -> User {
    let name = unique(prefix);
    let password = format!("{name}-secret");
    admin.create_user(&name, &password);
    admin.grant(&name, acls);
    User { name, password }
}

fn fleet_topic(op: Op) -> Acl {
    Acl::topic(FLEET_TOPIC, op)
}

/// A member's rows for its roles (the state topic, and a PREFIXED TransactionalId for the
/// roles' names) and the fleet topic's rows; the caller adds the TransactionalId rows of the
/// heartbeat and the announcement.
fn member_rows(state: &str, roles_prefix: &str) -> Vec<Acl> {
    vec![
        Acl::topic(state, Op::Read),
        Acl::topic(state, Op::Write),
        Acl::topic(state, Op::DescribeConfigs),
        Acl::transactional_id(roles_prefix, Op::Write).prefixed(),
        fleet_topic(Op::Read),
        fleet_topic(Op::Write),
        fleet_topic(Op::DescribeConfigs),
    ]
}

struct Member {
    _host: Host,
    fleet: Fleet,
    _roles: Vec<FleetRole>,
}

/// Member `name` of `fleet` as `user`, hosting `roles`.
fn member(
    sasl: &Sasl,
    user: &User,
    state: &str,
    fleet: &str,
    name: &str,
    roles: &[String],
) -> Member {
    let options = Options::new()
        .lease_duration(LEASE)
        .renew_interval(RENEW)
        .challenge_stagger(Duration::from_millis(500));
    let on_state = KafkaTransport::connect(sasl.config(user, PARTITIONS).with_topic(state))
        .unwrap_or_else(|e| panic!("{name}: the state topic: {e}"));
    let on_fleet = KafkaTransport::connect(sasl.config(user, 1).with_topic(FLEET_TOPIC))
        .unwrap_or_else(|e| panic!("{name}: the fleet topic: {e}"));
    let host = blocking::host(Arc::new(on_state), HostOptions::new()).expect("a host");
    let f = Fleet::join(
        &host,
        Arc::new(on_fleet),
        FleetOptions::new(fleet, name).options(options),
    )
    .unwrap_or_else(|e| panic!("{name} joins: {e}"));
    let roles = roles
        .iter()
        .map(|r| {
            f.start(r)
                .unwrap_or_else(|e| panic!("{name} hosts {r}: {e}"))
        })
        .collect();
    Member {
        _host: host,
        fleet: f,
        _roles: roles,
    }
}

fn member_of<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["members"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["member"] == name))
}

/// `fleet status --json` of `fleet` as `user`, polled until `done` holds, at most [`PROMPT`].
fn status_until(
    sasl: &Sasl,
    user: &User,
    state: &str,
    fleet: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + PROMPT;
    loop {
        let o = sasl.tool(
            user,
            state,
            &[
                "--json",
                "fleet",
                "status",
                "--fleet",
                fleet,
                "--lease-duration",
                "4s",
                "--renew-interval",
                "1s",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "fleet status: {o:?}");
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&o.stdout)));
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

/// What `check` gives once it is `Ok`, asked every 100 ms; a failure naming its last `Err`
/// after [`PROMPT`].
fn within_prompt<T>(mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + PROMPT;
    loop {
        match check() {
            Ok(v) => return v,
            Err(state) => assert!(Instant::now() < deadline, "{state} after {PROMPT:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `o` failed as an authorization error (exit 2) whose message names the missing ACL:
/// `names`, and the troubleshooting page's section on missing ACLs.
fn refused(what: &str, o: &Output, names: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{what}: {o:?}");
    assert!(err.contains("not authorized"), "{what}: {err}");
    assert!(err.contains(names), "{what}: no {names:?} in: {err}");
    assert!(
        err.contains("troubleshooting.md#missing-acls"),
        "{what}: {err}"
    );
}

#[test]
fn a_fleet_needs_the_documented_acls() {
    let test = "a_fleet_needs_the_documented_acls";
    let Some([plaintext, sasl_ssl, ca]) = vars(
        test,
        [
            "KAFKA_BOOTSTRAP",
            "KAFKA_SASL_SSL_BOOTSTRAP",
            "KAFKA_SSL_CA",
        ],
    ) else {
        return;
    };
    let sasl = Sasl {
        bootstrap: sasl_ssl,
        ca,
    };
    // The topics, made by the PLAINTEXT super user.
    let state = unique("fleet-acls-state");
    transport_with(KafkaConfig::new(plaintext.clone(), PARTITIONS).with_topic(&state));
    transport_with(KafkaConfig::new(plaintext.clone(), 1).with_topic(FLEET_TOPIC));
    let mut admin = Admin::connect(&plaintext);

    // ZooKeeper mode keeps each ACL in a znode named after its resource, so a '/' in the name
    // is refused (KAFKA-13983): the fleet's rows are then one PREFIXED `<fleet>` row each.
    let zookeeper = std::env::var("KAFKA_MODE").is_ok_and(|m| m == "zookeeper");
    let fleet_row = |fleet: &str| Acl::transactional_id(fleet, Op::Write).prefixed();
    let fleet = unique("kcfa");
    let roles_prefix = format!("{fleet}-shard-");
    let roles: Vec<String> = (0..ROLES).map(|i| format!("{roles_prefix}{i}")).collect();
    let (a_name, b_name) = (format!("{fleet}-a"), format!("{fleet}-b"));

    // a: the literal rows of its heartbeat and announcement; b: the PREFIXED `<fleet>/`.
    let mut a_rows = member_rows(&state, &roles_prefix);
    let literal = Acl::transactional_id(&format!("{fleet}/{a_name}"), Op::Write);
    let mut b_rows = member_rows(&state, &roles_prefix);
    let a_user = if zookeeper {
        // Refused by the broker, as the guide says; the PREFIXED `<fleet>` row instead.
        let a_user = user(&mut admin, "kc-fleet-a", &a_rows);
        let refusal = admin.try_grant(&a_user.name, &[literal]).expect_err(
            "a ZooKeeper-mode broker created an ACL whose resource name holds a '/': \
             the deploying guide's ZooKeeper note is wrong",
        );
        eprintln!("ZooKeeper mode: {refusal}; the fleet's rows are PREFIXED `{fleet}`");
        admin.grant(&a_user.name, &[fleet_row(&fleet)]);
        b_rows.push(fleet_row(&fleet));
        a_user
    } else {
        a_rows.push(literal);
        a_rows.push(Acl::transactional_id(
            &format!("{fleet}//a/{a_name}"),
            Op::Write,
        ));
        b_rows.push(Acl::transactional_id(&format!("{fleet}/"), Op::Write).prefixed());
        user(&mut admin, "kc-fleet-a", &a_rows)
    };
    let b_user = user(&mut admin, "kc-fleet-b", &b_rows);

    let status_rows = [
        fleet_topic(Op::Read),
        fleet_topic(Op::DescribeConfigs),
        Acl::topic(&state, Op::Read),
        Acl::topic(&state, Op::DescribeConfigs),
    ];
    let observer = user(&mut admin, "kc-fleet-status", &status_rows);

    let a = member(&sasl, &a_user, &state, &fleet, &a_name, &roles);
    let b = member(&sasl, &b_user, &state, &fleet, &b_name, &roles);

    // Both live, every role led, each member leading its share (the roles it is preferred
    // for, at least two).
    let v = status_until(&sasl, &observer, &state, &fleet, "shared", |v| {
        let shares = |name: &str| {
            member_of(v, name).is_some_and(|m| {
                m["leads"] == m["preferred"] && m["leads"].as_u64().is_some_and(|n| n >= 2)
            })
        };
        v["live_members"] == 2
            && v["led"] == ROLES
            && v["in_motion"] == 0
            && shares(&a_name)
            && shares(&b_name)
    });
    assert_eq!(v["vacant"], 0, "{v}");
    for m in [&a, &b] {
        assert_eq!(m.fleet.read_error(), None);
        assert_eq!(m.fleet.stats().live_members, 2, "{:?}", m.fleet.stats());
    }

    // `roles --fleet` with the same rows: every role of the fleet shows a preferred owner.
    let o = sasl.tool(
        &observer,
        &state,
        &[
            "--json",
            "roles",
            "--fleet",
            &fleet,
            "--lease-duration",
            "4s",
            "--renew-interval",
            "1s",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "roles --fleet: {o:?}");
    let listed: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&o.stdout)));
    let preferred = listed
        .as_array()
        .expect("an array")
        .iter()
        .filter(|r| r["preferred"].is_string())
        .count();
    assert_eq!(preferred, ROLES, "{listed:#}");

    // `fleet status` without the state topic's rows: refused, naming the state topic.
    let fleet_only = user(
        &mut admin,
        "kc-fleet-status-no-state",
        &[fleet_topic(Op::Read), fleet_topic(Op::DescribeConfigs)],
    );
    refused(
        "fleet status without the state topic's rows",
        &sasl.tool(&fleet_only, &state, &["fleet", "status", "--fleet", &fleet]),
        &format!("ACL on Topic '{state}'"),
    );

    // `fleet drain`: one row short, refused naming it; with all of its rows, b drains.
    let drain_txn = if zookeeper {
        fleet_row(&fleet)
    } else {
        Acl::transactional_id(&format!("{fleet}//drain/{b_name}"), Op::Write)
    };
    let drain = |user: &User| {
        sasl.tool(
            user,
            &state,
            &["fleet", "drain", "--fleet", &fleet, "--member", &b_name],
        )
    };
    let no_write = user(
        &mut admin,
        "kc-fleet-drain-no-write",
        &[
            fleet_topic(Op::Read),
            fleet_topic(Op::DescribeConfigs),
            drain_txn.clone(),
        ],
    );
    refused(
        "fleet drain without Write on the fleet topic",
        &drain(&no_write),
        &format!("the WRITE ACL on Topic '{FLEET_TOPIC}'"),
    );
    let no_txn = user(
        &mut admin,
        "kc-fleet-drain-no-txn",
        &[
            fleet_topic(Op::Read),
            fleet_topic(Op::Write),
            fleet_topic(Op::DescribeConfigs),
        ],
    );
    refused(
        "fleet drain without its TransactionalId row",
        &drain(&no_txn),
        &format!("ACL on TransactionalId '{fleet}//drain/{b_name}'"),
    );
    assert!(!b.fleet.stats().drain_requested, "{:?}", b.fleet.stats());
    let drainer = user(
        &mut admin,
        "kc-fleet-drain",
        &[
            fleet_topic(Op::Read),
            fleet_topic(Op::Write),
            fleet_topic(Op::DescribeConfigs),
            drain_txn,
        ],
    );
    let o = drain(&drainer);
    assert_eq!(o.status.code(), Some(0), "fleet drain: {o:?}");
    status_until(&sasl, &observer, &state, &fleet, "drained", |v| {
        let Some(bm) = member_of(v, &b_name) else {
            return false;
        };
        bm["live"] == true
            && bm["draining"] == true
            && bm["leads"] == 0
            && member_of(v, &a_name).is_some_and(|am| am["leads"] == ROLES)
            && v["led"] == ROLES
    });
    assert!(b.fleet.stats().drain_requested, "{:?}", b.fleet.stats());

    let lone = unique("kcfa-lone");
    if zookeeper {
        loud(&format!(
            "{test}: ZooKeeper mode, where a member's heartbeat row cannot be granted without \
             its announcement's (one PREFIXED `<fleet>` row covers both): the member without \
             its announcement's row is not run"
        ));
    } else {
        a_member_without_its_announcement_is_not_live(&sasl, &mut admin, &observer, &state, &lone);
    }

    // A member without Read on the fleet topic: its reads fail, naming the topic.
    let d_name = format!("{lone}-d");
    let mut d_rows: Vec<Acl> = member_rows(&state, &format!("{lone}-shard-"))
        .into_iter()
        .filter(|acl| *acl != fleet_topic(Op::Read))
        .collect();
    d_rows.push(if zookeeper {
        fleet_row(&lone)
    } else {
        Acl::transactional_id(&format!("{lone}/"), Op::Write).prefixed()
    });
    let d_user = user(&mut admin, "kc-fleet-d", &d_rows);
    let d = member(&sasl, &d_user, &state, &lone, &d_name, &[]);
    let error = within_prompt(|| {
        d.fleet
            .read_error()
            .ok_or_else(|| "no read error without Read on the fleet topic".to_owned())
    });
    assert!(
        error.contains(&format!("the READ ACL on Topic '{FLEET_TOPIC}'")),
        "{error}"
    );
    // Read granted, its reads work again.
    admin.grant(&d_user.name, &[fleet_topic(Op::Read)]);
    within_prompt(|| match d.fleet.read_error() {
        None => Ok(()),
        Some(e) => Err(format!(
            "still a read error with Read on the fleet topic: {e}"
        )),
    });
    status_until(&sasl, &observer, &state, &lone, "d live", |v| {
        member_of(v, &d_name).is_some_and(|m| m["live"] == true)
    });
}

/// A member of fleet `lone` without its announcement's row: its heartbeat runs, it is never
/// announced, and it says why; granted the row, it is live.
fn a_member_without_its_announcement_is_not_live(
    sasl: &Sasl,
    admin: &mut Admin,
    observer: &User,
    state: &str,
    lone: &str,
) {
    let c_name = format!("{lone}-c");
    let mut c_rows = member_rows(state, &format!("{lone}-shard-"));
    c_rows.push(Acl::transactional_id(
        &format!("{lone}/{c_name}"),
        Op::Write,
    ));
    let c_user = user(admin, "kc-fleet-c", &c_rows);
    let c = member(sasl, &c_user, state, lone, &c_name, &[]);
    // Seen while its heartbeat is renewed over two leases (a member that may announce does so
    // on its first pass, right after its heartbeat starts).
    let heartbeat_until = |v: &Value| {
        member_of(v, &c_name)
            .and_then(|m| m["heartbeat_until_ms"].as_i64())
            .unwrap_or(0)
    };
    let first = heartbeat_until(&status_until(
        sasl,
        observer,
        state,
        lone,
        "heartbeating",
        |v| heartbeat_until(v) > 0,
    ));
    let v = status_until(sasl, observer, state, lone, "renewed", |v| {
        let m = member_of(v, &c_name).expect("c is listed");
        assert_eq!(
            (&m["announced"], &m["live"]),
            (&Value::Bool(false), &Value::Bool(false)),
            "{v}"
        );
        heartbeat_until(v) >= first + 2 * LEASE.as_millis() as i64
    });
    assert_eq!(v["live_members"], 0, "{v}");
    assert!(c.fleet.members().is_empty(), "{:?}", c.fleet.members());
    // The member itself says what holds it back: the announcement's TransactionalId.
    let error = within_prompt(|| {
        c.fleet
            .heartbeat_error()
            .ok_or_else(|| "no heartbeat error without the announcement's row".to_owned())
    });
    assert!(
        error.starts_with("the announcement ended")
            && error.contains(&format!("TransactionalId '{lone}//a/{c_name}'")),
        "{error}"
    );
    // The row granted, it is announced and live.
    admin.grant(
        &c_user.name,
        &[Acl::transactional_id(
            &format!("{lone}//a/{c_name}"),
            Op::Write,
        )],
    );
    status_until(sasl, observer, state, lone, "announced", |v| {
        member_of(v, &c_name).is_some_and(|m| m["live"] == true && m["state"] == "live")
    });
    within_prompt(|| match c.fleet.heartbeat_error() {
        None => Ok(()),
        Some(e) => Err(format!("still a heartbeat error once live: {e}")),
    });
}
