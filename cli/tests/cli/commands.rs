//! The `kafka-coordination` command-line tool, run as a program: argument and
//! configuration errors without a broker, and on a real Apache Kafka broker (`KAFKA_BOOTSTRAP`,
//! see scripts/kafka-tests.sh) `topic create|check`, `describe`, `roles`, `watch`, two `run`
//! supervisors with a leader SIGKILLed, `deregister`, and how `describe` and `roles` show a
//! leader whose client commits with transaction version 2.
//!
//! Real time passes here; no test sleeps for a verdict: each waits for an event (a line on a
//! supervisor's stderr, a line in a file) with a generous bound.

use kafka_coordination_test_support as support;
use kafka_coordination_test_support::proxy;
use kafka_coordination_test_support::tv2;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::record::{Key, MemberId, Registration, Role};
use kafka_coordination::core::UnixMillis;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::kafka::KafkaConfig;
use kafka_coordination::transport::Wait;
use kafka_coordination::watch::VacancyReason;
use kafka_coordination::watch::WatchOptions;
use kafka_coordination::{blocking, Options, SystemClock, WatchEvent};
use serde_json::Value;
use support::{transport_with, unique, PARTITIONS};

const KC: &str = env!("CARGO_BIN_EXE_kafka-coordination");
/// A bound for what should happen promptly on a loaded machine.
const PROMPT: Duration = Duration::from_secs(60);

fn bootstrap() -> Option<String> {
    support::bootstrap(
        "command-line tests",
        "scripts/kafka-tests.sh (or scripts/kafka/with-broker.sh cargo test -p \
         kafka-coordination-cli -- commands::)",
    )
}

/// The tool with no KC_* variable inherited.
fn kc() -> Command {
    let mut c = Command::new(KC);
    for (k, _) in std::env::vars() {
        if k.starts_with("KC_") {
            c.env_remove(k);
        }
    }
    c
}

/// The tool on the test broker.
fn kc_on(bootstrap: &str) -> Command {
    let mut c = kc();
    c.env("KC_BOOTSTRAP_SERVERS", bootstrap);
    c
}

fn run(mut c: Command) -> Output {
    c.output().expect("the tool runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&o.stdout)))
}

/// `roles --json`'s entry of `role` (the command must succeed and list it).
fn listed_role(bootstrap: &str, role: &str) -> Value {
    let o = run({
        let mut c = kc_on(bootstrap);
        c.args(["--json", "--partitions", &PARTITIONS.to_string(), "roles"]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let all = json(&o);
    all.as_array()
        .expect("an array")
        .iter()
        .find(|r| r["role"] == role)
        .cloned()
        .unwrap_or_else(|| panic!("{role} not listed: {all}"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique("kc-cli-test"));
    std::fs::create_dir_all(&dir).expect("a scratch dir");
    dir.join(name)
}

fn write(path: &Path, content: &str) {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(content.as_bytes()))
        .expect("write the file");
}

// ---- without a broker -----------------------------------------------------------------------

#[test]
fn a_bad_flag_or_a_bad_file_is_a_clear_usage_error() {
    let o = run({
        let mut c = kc();
        c.args(["describe", "r", "--no-such-flag"]);
        c
    });
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        text(&o.stderr).contains("--no-such-flag"),
        "{}",
        text(&o.stderr)
    );

    let o = run({
        let mut c = kc();
        c.args([
            "run",
            "--role",
            "r",
            "--member",
            "m",
            "--lease-duration",
            "30sec",
            "--",
            "true",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        text(&o.stderr).contains("invalid duration '30sec'"),
        "{}",
        text(&o.stderr)
    );

    // An unknown field, named with the file and its place.
    let typo = scratch("typo.toml");
    write(&typo, "[kafka]\nbootstrap_server = \"127.0.0.1:9092\"\n");
    let o = run({
        let mut c = kc();
        c.arg("--config").arg(&typo).args(["describe", "r"]);
        c
    });
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = text(&o.stderr);
    assert!(
        err.contains("bootstrap_server")
            && err.contains("unknown field")
            && err.contains("typo.toml"),
        "{err}"
    );

    // Not TOML at all.
    let broken = scratch("broken.toml");
    write(&broken, "[kafka\nbootstrap_servers = 1\n");
    let o = run({
        let mut c = kc();
        c.arg("--config").arg(&broken).args(["roles"]);
        c
    });
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        text(&o.stderr).contains("is not valid"),
        "{}",
        text(&o.stderr)
    );

    // A value of the wrong shape: named by its key and line, the value itself not shown (it
    // might be a secret in the wrong place).
    let shape = scratch("shape.toml");
    write(&shape, "[timing]\nlease_duration = \"ten seconds\"\n");
    let o = run({
        let mut c = kc();
        c.arg("--config").arg(&shape).args(["roles"]);
        c
    });
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = text(&o.stderr);
    assert!(
        err.contains("line 2") && err.contains("timing.lease_duration"),
        "{err}"
    );
    assert!(!err.contains("ten seconds"), "{err}");

    // No cluster named anywhere: says where to name it; with --json, as JSON.
    let o = run({
        let mut c = kc();
        c.args(["--json", "describe", "r"]);
        c
    });
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err: Value = serde_json::from_slice(&o.stderr).expect("the error is JSON");
    let message = err["error"].as_str().expect("an error message");
    assert!(
        message.contains("--bootstrap-servers") && message.contains("KC_BOOTSTRAP_SERVERS"),
        "{message}"
    );
    assert_eq!(err["exit_code"], 2);
}

/// SASL PLAIN over SASL_PLAINTEXT: the tool warns that the password goes in clear, and neither
/// the warning nor the error (no broker listens) shows the password.
#[test]
fn plain_over_a_plaintext_connection_is_warned_about_without_the_password() {
    let o = run({
        let mut c = kc();
        c.env("KC_BOOTSTRAP_SERVERS", "127.0.0.1:1")
            .env("KC_SASL_PASSWORD", "pw-in-clear-93")
            .args(["--partitions", "1", "--request-timeout", "1s"])
            .args([
                "--security-protocol",
                "SASL_PLAINTEXT",
                "--sasl-mechanism",
                "PLAIN",
            ])
            .args(["--sasl-username", "alice", "describe", "r"]);
        c
    });
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("warning: sasl.mechanism=PLAIN over security.protocol=SASL_PLAINTEXT sends the password in clear"),
        "{err}"
    );
    assert!(!err.contains("pw-in-clear-93"), "{err}");
    assert!(!text(&o.stdout).contains("pw-in-clear-93"));
}

/// A failure of the library is followed by one hint line naming its section of the
/// troubleshooting page (with `--json`, a `troubleshooting` field of the error's line), and a
/// property the client does not read is warned about by name. Needs no broker: nothing
/// listens on 127.0.0.1:1.
#[test]
fn a_failure_names_its_troubleshooting_section_and_unread_properties_are_warned_about() {
    let unreachable = |json: bool| {
        run({
            let mut c = kc();
            c.env("KC_BOOTSTRAP_SERVERS", "127.0.0.1:1")
                .args(["--partitions", "1", "--request-timeout", "1s"])
                .args([
                    "-X",
                    "client.rack=eu-west-1a",
                    "-X",
                    "ssl.key.password=kp-58",
                ]);
            if json {
                c.arg("--json");
            }
            c.args(["describe", "r"]);
            c
        })
    };
    let o = unreachable(false);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let hints: Vec<&&str> = lines.iter().filter(|l| l.contains("hint:")).collect();
    assert_eq!(
        hints,
        [&"kafka-coordination: hint: see docs/guide/troubleshooting.md#unavailable"],
        "{err}"
    );
    let error_at = lines
        .iter()
        .position(|l| l.starts_with("kafka-coordination: error:"))
        .expect("an error line");
    assert!(
        lines[error_at + 1].contains("hint:"),
        "the hint follows the error: {err}"
    );
    assert!(
        err.contains(
            "kafka-coordination: warning: the native client does not read these properties \
             (with security.protocol=PLAINTEXT): client.rack, ssl.key.password"
        ),
        "{err}"
    );
    assert!(!err.contains("kp-58"), "{err}");

    let o = unreachable(true);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let lines: Vec<Value> = text(&o.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stderr line is JSON"))
        .collect();
    assert!(
        lines.iter().any(|l| l["warning"]
            .as_str()
            .is_some_and(|w| w.contains("client.rack"))),
        "{lines:?}"
    );
    let error = lines
        .iter()
        .find(|l| l.get("error").is_some())
        .expect("an error line");
    assert_eq!(
        error["troubleshooting"], "docs/guide/troubleshooting.md#unavailable",
        "{error}"
    );

    // A usage error of the tool names no section.
    let o = run({
        let mut c = kc();
        c.args(["describe", "r"]);
        c
    });
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("hint:"), "{err}");
}

// ---- topic ----------------------------------------------------------------------------------

/// Creates `topic` with `cleanup.policy=delete` through the admin API.
fn create_delete_policy_topic(bootstrap: &str, topic: &str, partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::ClientConfig;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("an admin client");
    let t = NewTopic::new(topic, partitions, TopicReplication::Fixed(1))
        .set("cleanup.policy", "delete");
    let results = futures_lite::future::block_on(
        admin.create_topics([&t], &AdminOptions::new().operation_timeout(Some(PROMPT))),
    )
    .expect("create_topics");
    for r in results {
        r.expect("the topic is created");
    }
}

#[test]
fn topic_create_and_check_report_a_correct_and_a_wrong_topic() {
    let Some(bootstrap) = bootstrap() else { return };
    let good = unique("kc-cli-good");
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args([
            "--json",
            "--topic",
            &good,
            "--partitions",
            "4",
            "topic",
            "create",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v = json(&o);
    assert_eq!(
        (
            &v["created"],
            &v["partitions"],
            &v["cleanup_policy"],
            &v["ok"]
        ),
        (
            &Value::Bool(true),
            &Value::from(4),
            &Value::from("compact"),
            &Value::Bool(true)
        ),
        "{v}"
    );
    // Checked without a partition count: the topic's own is the members' count.
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args(["--topic", &good, "topic", "check"]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = text(&o.stdout);
    assert!(
        out.contains("4 partitions") && out.contains("cleanup.policy=compact"),
        "{out}"
    );
    // Members configured with another count: an error that says what to set.
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args([
            "--json",
            "--topic",
            &good,
            "--partitions",
            "8",
            "topic",
            "check",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v = json(&o);
    assert_eq!(v["ok"], false);
    let findings = v["findings"].as_array().expect("findings");
    assert!(
        findings.iter().any(|f| f["severity"] == "error"
            && f["message"]
                .as_str()
                .is_some_and(|m| m.contains("partitions = 4"))),
        "{v}"
    );

    let wrong = unique("kc-cli-wrong");
    create_delete_policy_topic(&bootstrap, &wrong, 2);
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args(["--topic", &wrong, "topic", "check"]);
        c
    });
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let out = text(&o.stdout);
    assert!(
        out.contains("cleanup.policy=delete but it needs cleanup.policy=compact")
            && out.contains("kafka-configs.sh --bootstrap-server BOOTSTRAP --alter"),
        "{out}"
    );
    // A missing topic: the command that creates it.
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args(["--topic", &unique("kc-cli-missing"), "topic", "check"]);
        c
    });
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        text(&o.stdout).contains("kafka-coordination topic create"),
        "{o:?}"
    );
}

#[test]
fn the_toml_file_is_honoured_and_flags_win_over_it() {
    let Some(bootstrap) = bootstrap() else { return };
    let from_file = unique("kc-cli-file");
    let file = scratch("kc.toml");
    write(
        &file,
        &format!(
            "[kafka]\nbootstrap_servers = \"{bootstrap}\"\npartitions = 3\ntopic = \"{from_file}\"\n\
             request_timeout = \"20s\"\nclient_id = \"kc-cli-test\"\n\n[kafka.properties]\n\
             \"socket.keepalive.enable\" = \"true\"\n\n[timing]\nlease_duration = \"4s\"\n"
        ),
    );
    // Everything from the file: its topic is created with its partition count.
    let o = run({
        let mut c = kc();
        c.arg("--config")
            .arg(&file)
            .args(["--json", "topic", "create"]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v = json(&o);
    assert_eq!(
        (&v["topic"], &v["partitions"]),
        (&Value::from(from_file.as_str()), &Value::from(3)),
        "{v}"
    );
    // A flag (and an environment variable) wins over the file.
    let from_flag = unique("kc-cli-flag");
    let o = run({
        let mut c = kc();
        c.arg("--config")
            .arg(&file)
            .args(["--json", "--topic", &from_flag, "topic", "create"])
            .env("KC_PARTITIONS", "2");
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let v = json(&o);
    assert_eq!(
        (&v["topic"], &v["partitions"]),
        (&Value::from(from_flag.as_str()), &Value::from(2)),
        "{v}"
    );
}

// ---- describe, roles, watch, run, deregister --------------------------------------------------

/// A spawned process that is killed and reaped when the test lets go of it, also when an
/// assertion fails first: no supervisor, child or watch outlives its test.
struct Reaped(Child);

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process whose stdout or stderr lines arrive on a channel.
struct Lines {
    rx: Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn of(stream: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits for a JSON line for which `want` holds, and returns it.
    fn wait_for(&mut self, what: &str, mut want: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PROMPT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no {what} within {PROMPT:?}; lines so far: {:#?}",
                    self.seen
                )
            });
            self.seen.push(line.clone());
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if want(&v) {
                    return v;
                }
            }
        }
    }
}

/// A supervisor whose child appends `member term` lines to `file` every 20 ms.
fn supervisor(bootstrap: &str, role: &str, member: &str, file: &Path) -> (Reaped, Lines) {
    let mut c = kc_on(bootstrap);
    c.args([
        "--json",
        "--partitions",
        &PARTITIONS.to_string(),
        "run",
        "--role",
        role,
        "--member",
        member,
    ])
    .args([
        "--lease-duration",
        "2s",
        "--renew-interval",
        "500ms",
        "--challenge-stagger",
        "300ms",
    ])
    .args(["--grace", "5s", "--", "sh", "-c"])
    .arg("while :; do echo \"$KC_MEMBER $KC_TERM $KC_TOKEN\" >> \"$0\"; sleep 0.02; done")
    .arg(file)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut child = Reaped(c.spawn().expect("the supervisor starts"));
    let lines = Lines::of(child.stderr.take().expect("stderr"));
    (child, lines)
}

fn file_lines(path: &Path) -> Vec<(String, i64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            let member = parts.next()?.to_owned();
            let term = parts.next()?.parse().ok()?;
            Some((member, term))
        })
        .collect()
}

/// Waits until the file has a line of `member`.
fn wait_for_line_of(path: &Path, member: &str) {
    let deadline = Instant::now() + PROMPT;
    while !file_lines(path).iter().any(|(m, _)| m == member) {
        assert!(Instant::now() < deadline, "no line of {member} in {path:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.split(") ")
                .nth(1)
                .is_some_and(|rest| rest.starts_with('Z'))
        })
}

fn describe(bootstrap: &str, role: &str) -> Value {
    let o = run({
        let mut c = kc_on(bootstrap);
        c.args([
            "--json",
            "--partitions",
            &PARTITIONS.to_string(),
            "describe",
            role,
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    json(&o)
}

/// `describe` until `expected` holds (bounded), for a check right after a write: a lease
/// write shows a moment after it is acknowledged (its commit marker lands after the answer),
/// and the records written after it wait for that marker too.
fn describe_until(
    bootstrap: &str,
    role: &str,
    what: &str,
    expected: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + PROMPT;
    loop {
        let d = describe(bootstrap, role);
        if expected(&d) || Instant::now() >= deadline {
            return d;
        }
        eprintln!("not yet {what}: {d}");
        thread::sleep(Duration::from_millis(50));
    }
}

fn roster(v: &Value) -> BTreeMap<String, (Option<u64>, bool)> {
    v["roster"]
        .as_array()
        .expect("a roster")
        .iter()
        .map(|m| {
            (
                m["member"].as_str().unwrap_or_default().to_owned(),
                (m["rank"].as_u64(), m["leader"] == true),
            )
        })
        .collect()
}

#[test]
fn two_supervisors_fail_over_without_overlap_and_the_tool_reports_it() {
    let Some(bootstrap) = bootstrap() else { return };
    // The state topic, created as the other suites create it.
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    let role = unique("kc-cli-run");
    let file = scratch("work.log");

    let mut watch = {
        let mut c = kc_on(&bootstrap);
        c.args([
            "--json",
            "--partitions",
            &PARTITIONS.to_string(),
            "watch",
            &role,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        Reaped(c.spawn().expect("the watch starts"))
    };
    let mut watched = Lines::of(watch.stdout.take().expect("stdout"));
    watched.wait_for("the watch's first line", |v| {
        v["event"] == "vacant" && v["reason"] == "unclaimed"
    });

    let (mut a, mut a_events) = supervisor(&bootstrap, &role, "a", &file);
    let elected_a = a_events.wait_for("a elected", |v| v["event"] == "elected");
    let term_a = elected_a["term"].as_i64().expect("a term");
    let child_a = u32::try_from(elected_a["pid"].as_u64().expect("a pid")).expect("pid");
    let (mut b, mut b_events) = supervisor(&bootstrap, &role, "b", &file);
    b_events.wait_for("b standing by at rank 0", |v| {
        v["event"] == "standby" && v["rank"] == 0
    });
    wait_for_line_of(&file, "a");

    // describe: a leads with its term and pair, live, current at the coordinator; b is rank 0.
    let d = describe(&bootstrap, &role);
    assert_eq!(d["leader"]["member"], "a", "{d}");
    assert_eq!(d["leader"]["term"].as_i64(), Some(term_a), "{d}");
    assert_eq!(d["leader"]["token"], elected_a["token"], "{d}");
    assert_eq!(d["leader"]["live"], true, "{d}");
    assert_eq!(d["coordinator"]["lease_pair_is_current"], true, "{d}");
    assert_eq!(d["coordinator"]["token"], elected_a["token"], "{d}");
    // Null unless the check caught a renewal in flight: then the instant it began.
    let started = &d["coordinator"]["transaction_started_ms"];
    assert!(started.is_null() || started.is_i64(), "{d}");
    assert!(
        d["coordinator"].get("transaction_started_ms").is_some(),
        "{d}"
    );
    let r = roster(&d);
    assert_eq!(r.get("a"), Some(&(None, true)), "{d}");
    assert_eq!(r.get("b"), Some(&(Some(0), false)), "{d}");
    // roles lists it with its leader.
    let listed = listed_role(&bootstrap, &role);
    assert_eq!(
        (&listed["leader"]["member"], &listed["members"]),
        (&Value::from("a"), &Value::from(2))
    );

    // The leading supervisor dies without a word: its child dies with it (PDEATHSIG), and b's
    // child starts only after a's lease ran out.
    a.kill().expect("SIGKILL a's supervisor");
    let _ = a.wait();
    let elected_b = b_events.wait_for("b elected", |v| v["event"] == "elected");
    let term_b = elected_b["term"].as_i64().expect("b's term");
    assert!(term_b > term_a);
    let deadline = Instant::now() + PROMPT;
    while process_exists(child_a) {
        assert!(
            Instant::now() < deadline,
            "a's child {child_a} outlived its supervisor"
        );
        thread::sleep(Duration::from_millis(20));
    }
    wait_for_line_of(&file, "b");
    let lines = file_lines(&file);
    let first_b = lines
        .iter()
        .position(|(m, _)| m == "b")
        .expect("a line of b");
    assert!(
        lines[first_b..]
            .iter()
            .all(|(m, t)| m == "b" && *t == term_b),
        "a line of a after b's first: {lines:?}"
    );
    assert!(
        lines[..first_b]
            .iter()
            .all(|(m, t)| m == "a" && *t == term_a),
        "{lines:?}"
    );

    // The watch saw a's term, its expiry, and b's term, in that order.
    let leading_a = watched.wait_for("a leading", |v| v["event"] == "leading");
    assert_eq!(
        (leading_a["member"].as_str(), leading_a["term"].as_i64()),
        (Some("a"), Some(term_a))
    );
    let expired = watched.wait_for("a vacancy", |v| v["event"] == "vacant");
    assert_eq!(expired["reason"], "expired", "{expired}");
    assert_eq!(expired["previous"]["member"], "a", "{expired}");
    let leading_b = watched.wait_for("b leading", |v| v["event"] == "leading");
    assert_eq!(
        (leading_b["member"].as_str(), leading_b["term"].as_i64()),
        (Some("b"), Some(term_b))
    );

    // b took over without touching a's registration: the killed a stays on the roster,
    // passed over (no rank). The live leader is refused without --force, the ghost a is
    // removed, and a member that never registered is reported as not registered.
    let d = describe(&bootstrap, &role);
    assert_eq!(
        roster(&d),
        BTreeMap::from([
            ("a".to_owned(), (None, false)),
            ("b".to_owned(), (None, true))
        ]),
        "{d}"
    );
    let passed: Vec<bool> = d["roster"]
        .as_array()
        .expect("a roster")
        .iter()
        .map(|m| m["passed_over"] == true)
        .collect();
    assert_eq!(passed, [true, false], "{d}");
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args([
            "--partitions",
            &PARTITIONS.to_string(),
            "deregister",
            &role,
            "b",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(text(&o.stderr).contains("--force"), "{}", text(&o.stderr));
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args([
            "--partitions",
            &PARTITIONS.to_string(),
            "deregister",
            &role,
            "a",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        text(&o.stdout).contains("removed the registration of a"),
        "{}",
        text(&o.stdout)
    );
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args([
            "--partitions",
            &PARTITIONS.to_string(),
            "deregister",
            &role,
            "nobody",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        text(&o.stderr).contains("not registered"),
        "{}",
        text(&o.stderr)
    );

    // SIGTERM to b's supervisor: passed to its child, which dies of it; b resigns and exits
    // with the child's code (128 + 15); the watch reports the resign.
    // SAFETY: kill(2) on our own child process.
    unsafe {
        libc::kill(libc::pid_t::try_from(b.id()).expect("pid"), libc::SIGTERM);
    }
    let status = b.wait().expect("b exits");
    assert_eq!(status.code(), Some(143), "{:#?}", b_events.seen);
    b_events.wait_for("b resigned", |v| v["event"] == "resigned");
    let resigned = watched.wait_for("the resign", |v| v["event"] == "vacant");
    assert_eq!(
        (
            resigned["reason"].as_str(),
            resigned["previous"]["member"].as_str()
        ),
        (Some("resigned"), Some("b"))
    );
    // SAFETY: as above.
    unsafe {
        libc::kill(
            libc::pid_t::try_from(watch.id()).expect("pid"),
            libc::SIGTERM,
        );
    }
    assert_eq!(watch.wait().expect("the watch exits").code(), Some(0));
}

#[test]
fn a_supervisor_exits_with_its_childs_code_and_resigns() {
    let Some(bootstrap) = bootstrap() else { return };
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    let role = unique("kc-cli-exit");
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args(["--partitions", &PARTITIONS.to_string(), "run", "--role", &role, "--member", "m"])
            .args(["--lease-duration", "2s", "--renew-interval", "500ms", "--", "sh", "-c"])
            .arg("test -n \"$KC_TOKEN\" && test \"$KC_ROLE\" = \"$0\" && test \"$KC_MEMBER\" = m && exit 7")
            .arg(&role);
        c
    });
    assert_eq!(o.status.code(), Some(7), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("resigned term"),
        "{}",
        text(&o.stderr)
    );
    let d = describe_until(&bootstrap, &role, "resigned", |d| {
        d["vacancy"]["reason"] == "resigned" && roster(d).is_empty()
    });
    assert_eq!(d["leader"], Value::Null, "{d}");
    assert_eq!(d["vacancy"]["reason"], "resigned", "{d}");
    assert!(roster(&d).is_empty(), "{d}");
}

/// `run` hands its child no connection secret from its own environment unless
/// `--pass-secrets` asks for it.
#[test]
fn a_supervisors_child_gets_no_connection_secret_unless_asked() {
    let Some(bootstrap) = bootstrap() else { return };
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    let child_env = |pass_secrets: bool| {
        let role = unique("kc-cli-secrets");
        let o = run({
            let mut c = kc_on(&bootstrap);
            // Ignored on a PLAINTEXT listener, yet in the supervisor's environment.
            c.env("KC_SASL_PASSWORD", "pw-child-61")
                .env("KC_SASL_OAUTHBEARER_TOKEN", "tok-child-61")
                .args([
                    "--partitions",
                    &PARTITIONS.to_string(),
                    "run",
                    "--role",
                    &role,
                ])
                .args([
                    "--member",
                    "m",
                    "--lease-duration",
                    "2s",
                    "--renew-interval",
                    "500ms",
                ]);
            if pass_secrets {
                c.arg("--pass-secrets");
            }
            c.args(["--", "sh", "-c", "env"]);
            c
        });
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let env = child_env(false);
    assert!(env.contains("KC_ROLE=kc-cli-secrets"), "{env}");
    assert!(
        env.contains(&format!("KC_BOOTSTRAP_SERVERS={bootstrap}")),
        "{env}"
    );
    assert!(
        !env.contains("pw-child-61") && !env.contains("KC_SASL_PASSWORD"),
        "{env}"
    );
    assert!(!env.contains("tok-child-61"), "{env}");
    let env = child_env(true);
    assert!(env.contains("KC_SASL_PASSWORD=pw-child-61"), "{env}");
    assert!(
        env.contains("KC_SASL_OAUTHBEARER_TOKEN=tok-child-61"),
        "{env}"
    );
}

#[test]
fn deregistering_a_ghost_lets_the_standby_behind_it_challenge_one_stagger_earlier() {
    let Some(bootstrap) = bootstrap() else { return };
    const STAGGER: Duration = Duration::from_secs(8);
    let config = KafkaConfig::new(&bootstrap, PARTITIONS);
    let role = unique("kc-cli-ghost");
    let options = Options::new()
        .lease_duration(Duration::from_secs(2))
        .renew_interval(Duration::from_millis(500))
        .challenge_stagger(STAGGER)
        .clock(SystemClock);
    let leader_link = Link::new(transport_with(config.clone()));
    let leader =
        blocking::acquire_leadership(leader_link.clone(), &role, "leader", options.clone())
            .expect("the leader is elected");
    // A member that registered and died long ago: its registration stays.
    let writer = transport_with(config.clone());
    let r = Role::new(role.as_str()).expect("role");
    let ghost = MemberId::new("ghost").expect("member");
    let partition = writer.role_partition(&r).expect("partition");
    let registration = Registration {
        member: ghost.clone(),
        registered_at: UnixMillis(0),
    };
    writer
        .append(
            partition,
            &Key::registration(r, ghost).encode(),
            Some(&registration.encode()),
        )
        .expect("the ghost's registration");
    let standby = blocking::start(transport_with(config.clone()), &role, "standby", options)
        .expect("the standby starts");
    let wait_rank = |want: usize| {
        let deadline = Instant::now() + PROMPT;
        while standby.snapshot().rank != Some(want) {
            assert!(
                Instant::now() < deadline,
                "rank {:?}, not {want}",
                standby.snapshot().rank
            );
            thread::sleep(Duration::from_millis(20));
        }
    };
    wait_rank(1);
    let o = run({
        let mut c = kc_on(&bootstrap);
        c.args([
            "--partitions",
            &PARTITIONS.to_string(),
            "deregister",
            &role,
            "ghost",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        text(&o.stdout).contains("removed the registration of ghost"),
        "{o:?}"
    );
    wait_rank(0);

    // The leader freezes; the standby, rank 0 now, challenges at the deadline, not one stagger
    // after it.
    let watch = blocking::watch(transport_with(config), &role, WatchOptions::new())
        .expect("the watch starts");
    leader_link.cut();
    let mut expired_deadline = None;
    let successor = loop {
        let event = watch
            .next_timeout(PROMPT)
            .unwrap_or_else(|| panic!("the watch ended or stalled"))
            .expect("no error");
        match event {
            WatchEvent::Vacant(v) if v.reason == VacancyReason::Expired => {
                expired_deadline = v.previous.map(|p| p.deadline);
            }
            WatchEvent::Leading(l) if l.member.as_str() == "standby" => break l,
            _ => {}
        }
    };
    let deadline = expired_deadline.expect("the leader's lease expired first");
    let late = successor.granted_at.since(deadline);
    assert!(
        late < STAGGER,
        "elected {late:?} after the deadline: as rank 1 it would wait {STAGGER:?}"
    );
    drop(leader);
}

#[test]
fn with_again_a_supervisor_campaigns_again_after_each_term() {
    let Some(bootstrap) = bootstrap() else { return };
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    let role = unique("kc-cli-again");
    let file = scratch("terms.log");
    let mut sup = {
        let mut c = kc_on(&bootstrap);
        c.args([
            "--json",
            "--partitions",
            &PARTITIONS.to_string(),
            "run",
            "--again",
        ])
        .args(["--role", &role, "--member", "m", "--lease-duration", "2s"])
        .args(["--renew-interval", "500ms", "--", "sh", "-c"])
        .arg("echo \"$KC_MEMBER $KC_TERM\" >> \"$0\"")
        .arg(&file)
        .stderr(Stdio::piped());
        Reaped(c.spawn().expect("the supervisor starts"))
    };
    let mut events = Lines::of(sup.stderr.take().expect("stderr"));
    for _ in 0..3 {
        events.wait_for("a resign after the child exited", |v| {
            v["event"] == "resigned"
        });
    }
    // SAFETY: kill(2) on our own child process.
    unsafe {
        libc::kill(libc::pid_t::try_from(sup.id()).expect("pid"), libc::SIGTERM);
    }
    sup.wait().expect("the supervisor exits");
    let terms: Vec<i64> = file_lines(&file).into_iter().map(|(_, t)| t).collect();
    assert!(terms.len() >= 3, "{terms:?}");
    assert!(
        terms.windows(2).all(|p| p[0] < p[1]),
        "each term is a new, larger one: {terms:?}"
    );
}

/// With `--again`, a supervisor whose term is lost (another client mints the role's epoch,
/// fencing it) campaigns again at once on the same client, while its last term's exit may still
/// run, and is elected again: no configuration error ends it.
#[test]
fn with_again_a_fenced_supervisor_campaigns_again_at_once() {
    let Some(bootstrap) = bootstrap() else { return };
    let thief = transport_with(KafkaConfig::new(&bootstrap, PARTITIONS));
    let role = unique("kc-cli-again-fenced");
    let role_name = Role::new(role.as_str()).expect("role");
    let mut sup = {
        let mut c = kc_on(&bootstrap);
        c.args([
            "--json",
            "--partitions",
            &PARTITIONS.to_string(),
            "run",
            "--again",
        ])
        .args(["--role", &role, "--member", "m", "--lease-duration", "2s"])
        .args(["--renew-interval", "500ms", "--", "sleep", "600"])
        .stderr(Stdio::piped());
        Reaped(c.spawn().expect("the supervisor starts"))
    };
    let mut events = Lines::of(sup.stderr.take().expect("stderr"));
    let first = events.wait_for("the first term", |v| v["event"] == "elected");
    thief
        .acquire_epoch(&role_name, Duration::from_secs(2))
        .expect("another client mints the role's epoch");
    events.wait_for("the fence", |v| v["event"] == "term_over");
    let second = events.wait_for("a term after the fence", |v| v["event"] == "elected");
    assert!(
        second["term"].as_i64() > first["term"].as_i64(),
        "{first} then {second}"
    );
    assert!(
        sup.try_wait().expect("wait").is_none(),
        "the supervisor is still running"
    );
    // SAFETY: kill(2) on our own child process.
    unsafe {
        libc::kill(libc::pid_t::try_from(sup.id()).expect("pid"), libc::SIGTERM);
    }
    sup.wait().expect("the supervisor exits");
}

/// A leader whose client commits with transaction version 2 (a bare TV2 client: EndTxn v5) has
/// a lease pair three epochs behind its own producer's after three lease commits. `describe`
/// says so (text: the verdict and a note naming KIP-890; JSON: `commits_later`, behind by 3)
/// instead of a bare "superseded", and `roles` marks the pair `(+3 tv2)`.
#[test]
fn describe_and_roles_explain_a_transaction_version_2_leaders_pair() {
    use kafka_coordination::core::record::Lease;
    use kafka_coordination::core::token::FencingToken;
    use kafka_coordination::Clock;
    let Some(b) = bootstrap() else { return };
    if let Some(why) = tv2::lacking(&b) {
        support::loud(&format!(
            "describe_and_roles_explain_a_transaction_version_2_leaders_pair: {why}"
        ));
        return;
    }
    let t = transport_with(KafkaConfig::new(&b, PARTITIONS));
    let role = unique("tv2");
    let role_name = Role::new(role.as_str()).expect("role");
    let p = t.role_partition(&role_name).expect("partition");
    let topic = t.config().topic().to_owned();
    let mut client = tv2::Tv2Client::init(&b, &role, Duration::from_secs(60));
    let level = t
        .describe_epoch(&role_name)
        .expect("describe")
        .transaction_version;
    if level.is_none_or(|v| v < 2) {
        support::loud(&format!(
            "the test cluster's finalized transaction.version is {level:?}, not 2 or more: \
             describe_and_roles_explain_a_transaction_version_2_leaders_pair has nothing to show"
        ));
        return;
    }
    let minted: FencingToken = client.minted;
    let granted_at = SystemClock.now();
    let key = Key::lease(role_name.clone()).encode();
    for _ in 0..3 {
        let lease = Lease {
            member: MemberId::new("tv2-member").expect("member"),
            token: minted,
            granted_at,
            deadline: UnixMillis(SystemClock.now().0 + 120_000),
        };
        client.commit_one(&topic, p, &key, &lease.encode());
    }

    let d = describe_until(&b, &role, "the TV2 lease, committed", |d| {
        d["leader"]["member"] == "tv2-member" && d["coordinator"]["state"] == "CompleteCommit"
    });
    assert_eq!(d["leader"]["token"], minted.to_string(), "{d}");
    let c = &d["coordinator"];
    assert_eq!(c["token"], client.pair.to_string(), "{d}");
    assert_eq!(c["lease_pair_is_current"], false, "{d}");
    assert_eq!(c["lease_pair_relation"]["relation"], "commits_later", "{d}");
    assert_eq!(c["lease_pair_relation"]["behind_by"], 3, "{d}");
    assert!(
        c["transaction_version"].as_i64().is_some_and(|v| v >= 2),
        "{d}"
    );

    let o = run({
        let mut c = kc_on(&b);
        c.args(["--partitions", &PARTITIONS.to_string(), "describe", &role]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = text(&o.stdout);
    eprintln!("{out}");
    assert!(
        out.contains("3 epoch(s) behind the current one of the same producer"),
        "{out}"
    );
    assert!(out.contains("note ") && out.contains("KIP-890"), "{out}");
    assert!(!out.contains("superseded"), "{out}");

    let listed = listed_role(&b, &role);
    assert_eq!(
        listed["lease_pair_relation"]["relation"], "commits_later",
        "{listed}"
    );
    let o = run({
        let mut c = kc_on(&b);
        c.args(["--partitions", &PARTITIONS.to_string(), "roles"]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = text(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with(role.as_str()))
        .unwrap_or_else(|| panic!("{role} not listed: {out}"));
    assert!(line.contains("(+3 tv2)"), "{out}");
    assert!(out.contains("(+N tv2): "), "{out}");
}

// ---- `run`: every process of a term, exit codes, secrets ---------------------------------------

/// A start script as a service manager would run it: a wrapper shell that exits on SIGTERM,
/// and two workers that ignore SIGTERM, one in the wrapper's process group and one that left
/// it (`setsid`). Each worker appends `MEMBER MILLIS PID` to the file `$0` every 50 ms.
const STUBBORN_WORKERS: &str = r#"trap "exit 0" TERM
work='trap "" TERM; while :; do echo "$KC_MEMBER $(date +%s%3N) $$" >> "$0"; sleep 0.05; done'
bash -c "$work" "$0" &
setsid bash -c "$work" "$0" &
wait"#;

/// A supervisor of [`STUBBORN_WORKERS`] writing to `file`, with a 2 s grace period.
fn stubborn_supervisor(bootstrap: &str, role: &str, member: &str, file: &Path) -> (Reaped, Lines) {
    let mut c = kc_on(bootstrap);
    c.args(["--json", "--partitions", &PARTITIONS.to_string(), "run"])
        .args(["--role", role, "--member", member, "--lease-duration", "2s"])
        .args(["--renew-interval", "500ms", "--challenge-stagger", "300ms"])
        .args(["--grace", "2s", "--", "bash", "-c", STUBBORN_WORKERS])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = Reaped(c.spawn().expect("the supervisor starts"));
    let lines = Lines::of(child.stderr.take().expect("stderr"));
    (child, lines)
}

/// The `MEMBER MILLIS PID` lines of the workers.
fn work_lines(path: &Path) -> Vec<(String, i64, u32)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            let member = parts.next()?.to_owned();
            let at = parts.next()?.parse().ok()?;
            let pid = parts.next()?.parse().ok()?;
            Some((member, at, pid))
        })
        .collect()
}

/// SIGKILLs every worker named in the file when dropped: no worker outlives its test, also
/// when the supervisor under test leaves one behind.
struct KillWorkers(PathBuf);

impl Drop for KillWorkers {
    fn drop(&mut self) {
        let mut pids: Vec<u32> = work_lines(&self.0).into_iter().map(|l| l.2).collect();
        pids.sort_unstable();
        pids.dedup();
        for pid in pids {
            if let Ok(pid) = libc::pid_t::try_from(pid) {
                // SAFETY: kill(2) on a worker this test started (through its supervisor).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Polls `ready` every 20 ms until it holds; panics after [`PROMPT`].
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + PROMPT;
    while !ready() {
        assert!(Instant::now() < deadline, "not within {PROMPT:?}: {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to a leading supervisor whose workers ignore SIGTERM (one of them outside the
/// child's process group): the workers are SIGKILLed at the grace period, and the successor is
/// elected only after: not one unit of the old term's work carries a time after the
/// successor's election. The supervisor exits 128 + 15.
#[test]
fn no_worker_of_a_stopped_term_works_after_the_successors_election() {
    let Some(bootstrap) = bootstrap() else { return };
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    let role = unique("kc-cli-stubborn");
    let file = scratch("work.log");
    let _cleanup = KillWorkers(file.clone());
    let (mut a, mut a_events) = stubborn_supervisor(&bootstrap, &role, "a", &file);
    a_events.wait_for("a elected", |v| v["event"] == "elected");
    let (mut b, mut b_events) = stubborn_supervisor(&bootstrap, &role, "b", &file);
    b_events.wait_for("b standing by at rank 0", |v| {
        v["event"] == "standby" && v["rank"] == 0
    });
    let pids_of = |member: &str| {
        let mut pids: Vec<u32> = work_lines(&file)
            .into_iter()
            .filter(|l| l.0 == member)
            .map(|l| l.2)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    };
    wait_until("both workers of a at work", || pids_of("a").len() == 2);

    // SAFETY: kill(2) on our own child process.
    unsafe {
        libc::kill(libc::pid_t::try_from(a.id()).expect("pid"), libc::SIGTERM);
    }
    let elected_b = b_events.wait_for("b elected", |v| v["event"] == "elected");
    let elected_at = elected_b["at_ms"].as_i64().expect("at_ms");
    let a_exit = a.wait().expect("a exits");
    // A second of b's work: time enough for any worker of a left behind to show.
    wait_until("b at work for a second", || {
        work_lines(&file)
            .iter()
            .any(|(m, at, _)| m == "b" && *at >= elected_at + 1000)
    });
    let lines = work_lines(&file);
    let late: Vec<_> = lines
        .iter()
        .filter(|(m, at, _)| m == "a" && *at >= elected_at)
        .collect();
    assert!(
        late.is_empty(),
        "work of a's term after b's election at {elected_at}: {late:?}"
    );
    for pid in pids_of("a") {
        assert!(!process_exists(pid), "a's worker {pid} outlived its term");
    }
    assert_eq!(a_exit.code(), Some(143));
    a_events.wait_for("a's SIGKILL of its workers", |v| v["event"] == "killing");

    // b's workers are stopped the same way when b is stopped.
    // SAFETY: as above.
    unsafe {
        libc::kill(libc::pid_t::try_from(b.id()).expect("pid"), libc::SIGTERM);
    }
    assert_eq!(b.wait().expect("b exits").code(), Some(143));
    for pid in pids_of("b") {
        assert!(!process_exists(pid), "b's worker {pid} outlived its term");
    }
}

/// A fenced supervisor whose child exits 0 on SIGTERM exits 75 (term lost), not 0: a service
/// manager's `Restart=on-failure` restarts it.
#[test]
fn a_supervisor_that_lost_its_term_exits_75_though_its_child_exited_0() {
    let Some(bootstrap) = bootstrap() else { return };
    let thief = transport_with(KafkaConfig::new(&bootstrap, PARTITIONS));
    let role = unique("kc-cli-lost");
    let role_name = Role::new(role.as_str()).expect("role");
    let mut sup = {
        let mut c = kc_on(&bootstrap);
        c.args(["--json", "--partitions", &PARTITIONS.to_string(), "run"])
            .args(["--role", &role, "--member", "m", "--lease-duration", "2s"])
            .args(["--renew-interval", "500ms", "--", "sh", "-c"])
            .arg("trap 'exit 0' TERM; while :; do sleep 0.1; done")
            .stderr(Stdio::piped());
        Reaped(c.spawn().expect("the supervisor starts"))
    };
    let mut events = Lines::of(sup.stderr.take().expect("stderr"));
    events.wait_for("the term", |v| v["event"] == "elected");
    thief
        .acquire_epoch(&role_name, Duration::from_secs(2))
        .expect("another client mints the role's epoch");
    events.wait_for("the fence", |v| v["event"] == "term_over");
    let exited = events.wait_for("the child's exit", |v| v["event"] == "child_exited");
    assert_eq!(exited["code"], 0, "{exited}");
    assert_eq!(
        sup.wait().expect("exits").code(),
        Some(75),
        "{:#?}",
        events.seen
    );
}

/// A grace period too long for the clock is refused when the flags are read, naming the flag
/// and the limit (it used to overflow an `Instant` when the child had to be stopped).
#[test]
fn a_grace_period_beyond_a_day_is_a_usage_error() {
    let o = run({
        let mut c = kc();
        c.args(["run", "--role", "r", "--member", "m"]).args([
            "--grace",
            "18446744073709551615s",
            "--",
            "true",
        ]);
        c
    });
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = text(&o.stderr);
    assert!(err.contains("--grace") && err.contains("24h"), "{err}");
}

/// A configuration file with an error next to a secret: the message names the line, the
/// column and the key, and shows no value of the file.
#[test]
fn a_toml_error_shows_no_value_of_the_file() {
    for (content, line, key) in [
        (
            "[kafka]\nbootstrap_servers = \"k:9092\"\n[kafka.security]\nsasl_password = \"hunter2-77\" x\n",
            "line 4",
            "kafka.security.sasl_password",
        ),
        (
            "[kafka.security]\nsasl_password = hunter2-77\n",
            "line 2",
            "kafka.security.sasl_password",
        ),
        (
            "[kafka]\npartitions = \"hunter2-77\"\n",
            "line 2",
            "kafka.partitions",
        ),
    ] {
        let path = scratch("secret.toml");
        write(&path, content);
        let o = run({
            let mut c = kc();
            c.arg("--config").arg(&path).args(["describe", "r"]);
            c
        });
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let err = text(&o.stderr);
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains(line) && err.contains(key), "{err}");
    }
}

/// `--sasl-password` on the command line is warned about (every local user can read it in
/// the process list), and so is a secret `-X` property; the environment is not.
#[test]
fn a_secret_on_the_command_line_is_warned_about() {
    let warned = |args: &[&str], env: Option<&str>| {
        let o = run({
            let mut c = kc();
            c.args(args).args(["describe", "r"]);
            if let Some(pw) = env {
                c.env("KC_SASL_PASSWORD", pw);
            }
            c
        });
        let err = text(&o.stderr);
        assert!(!err.contains("pw-cl-5"), "{err}");
        err.contains("process list")
    };
    assert!(warned(&["--sasl-password", "pw-cl-5"], None));
    assert!(warned(&["-X", "sasl.password=pw-cl-5"], None));
    assert!(warned(&["-X", "ssl.key.pem=pw-cl-5"], None));
    assert!(!warned(&[], Some("pw-cl-5")));
    assert!(!warned(&["-X", "client.rack=a"], None));
}

/// With `--sasl-password-file` the password is in neither the supervisor's command line (the
/// process list) nor its child's environment, and no warning is about the command line.
#[test]
fn a_password_file_keeps_the_secret_out_of_the_process_list() {
    let Some(bootstrap) = bootstrap() else { return };
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    let role = unique("kc-cli-pwfile");
    let secret = scratch("password");
    write(&secret, "pw-file-93\n");
    let mut sup = {
        let mut c = kc_on(&bootstrap);
        c.args(["--json", "--partitions", &PARTITIONS.to_string(), "run"])
            .arg("--sasl-password-file")
            .arg(&secret)
            .args(["--role", &role, "--member", "m", "--lease-duration", "2s"])
            .args([
                "--renew-interval",
                "500ms",
                "--",
                "sh",
                "-c",
                "env; sleep 600",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Reaped(c.spawn().expect("the supervisor starts"))
    };
    let mut events = Lines::of(sup.stderr.take().expect("stderr"));
    let mut child_out = Lines::of(sup.stdout.take().expect("stdout"));
    events.wait_for("the term", |v| v["event"] == "elected");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", sup.id())).expect("cmdline");
    let cmdline = text(&cmdline);
    assert!(cmdline.contains("--sasl-password-file"), "{cmdline}");
    assert!(!cmdline.contains("pw-file-93"), "{cmdline}");
    // The child's `env` ends with KC_* lines; wait for the one the supervisor always sets.
    let deadline = Instant::now() + PROMPT;
    while !child_out.seen.iter().any(|l| l.starts_with("KC_TERM=")) {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = child_out
            .rx
            .recv_timeout(left)
            .expect("the child's environment");
        child_out.seen.push(line);
    }
    assert!(
        !child_out.seen.iter().any(|l| l.contains("pw-file-93")),
        "{:#?}",
        child_out.seen
    );
    // The one warning: the listener is PLAINTEXT, which reads no sasl.* key (named, never
    // its value); nothing about the command line.
    let warnings: Vec<&String> = events
        .seen
        .iter()
        .filter(|l| l.contains("warning"))
        .collect();
    assert!(
        warnings.len() == 1
            && warnings[0].contains("does not read this property")
            && warnings[0].contains("sasl.password")
            && !warnings[0].contains("pw-file-93"),
        "{warnings:#?}"
    );
}

/// The supervisor is not dumpable: its `/proc` files belong to root, so its child (the same
/// user) cannot read its environment. Run as an unprivileged user (as `nobody` through
/// `setpriv` when the test runs as root, where every file is readable).
#[test]
fn a_supervisors_child_cannot_read_its_environment() {
    let Some(bootstrap) = bootstrap() else { return };
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    // SAFETY: getuid has no effects.
    let root = unsafe { libc::getuid() } == 0;
    let role = unique("kc-cli-dumpable");
    let mut c = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", KC]);
        for (k, _) in std::env::vars() {
            if k.starts_with("KC_") {
                c.env_remove(k);
            }
        }
        c.env("KC_BOOTSTRAP_SERVERS", &bootstrap);
        c
    } else {
        kc_on(&bootstrap)
    };
    c.env("KC_SASL_PASSWORD", "pw-env-41")
        .args(["--json", "--partitions", &PARTITIONS.to_string(), "run"])
        .args(["--role", &role, "--member", "m", "--lease-duration", "2s"])
        .args(["--renew-interval", "500ms", "--", "sh", "-c"])
        .arg(
            "if cat /proc/$KC_SUPERVISOR_PID/environ >/dev/null 2>&1; then echo readable; \
             else echo unreadable; fi; sleep 600",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut sup = Reaped(c.spawn().expect("the supervisor starts"));
    let mut events = Lines::of(sup.stderr.take().expect("stderr"));
    let child_out = Lines::of(sup.stdout.take().expect("stdout"));
    let elected = events.wait_for("the term", |v| v["event"] == "elected");
    let supervisor_pid = sup.id();
    let verdict = child_out
        .rx
        .recv_timeout(PROMPT)
        .expect("the child's verdict");
    assert_eq!(verdict, "unreadable", "{elected}");
    use std::os::unix::fs::MetadataExt;
    let environ = std::fs::metadata(format!("/proc/{supervisor_pid}/environ")).expect("environ");
    assert_eq!(environ.uid(), 0, "owned by root when not dumpable");
}

/// Over SASL_SSL (the test broker's SCRAM listener): a password read from
/// `--sasl-password-file` authenticates, and a user without the ACLs `describe` needs gets
/// exit code 2 (a configuration or authorization error: restarting does not help) with the
/// missing ACL named.
#[test]
fn a_password_file_authenticates_and_a_missing_acl_exits_2() {
    let Some(bootstrap) = bootstrap() else { return };
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let (Some(sasl), Some(ca), Some(user), Some(password), Some(limited), Some(limited_pw)) = (
        var("KAFKA_SASL_SSL_BOOTSTRAP"),
        var("KAFKA_SSL_CA"),
        var("KAFKA_SCRAM_USER"),
        var("KAFKA_SCRAM_PASSWORD"),
        var("KAFKA_SCRAM_LIMITED_USER"),
        var("KAFKA_SCRAM_LIMITED_PASSWORD"),
    ) else {
        eprintln!("no SASL_SSL listener (KAFKA_SASL_SSL_BOOTSTRAP ...): skipped");
        return;
    };
    drop(transport_with(KafkaConfig::new(&bootstrap, PARTITIONS)));
    let role = unique("kc-cli-sasl");
    let over_sasl = |user: &str| {
        let mut c = kc();
        c.args([
            "--bootstrap-servers",
            &sasl,
            "--partitions",
            &PARTITIONS.to_string(),
        ])
        .args([
            "--security-protocol",
            "SASL_SSL",
            "--sasl-mechanism",
            "SCRAM-SHA-256",
        ])
        .args(["--sasl-username", user, "--ssl-ca-location", &ca]);
        c
    };
    let secret = scratch("scram-password");
    write(&secret, &format!("{password}\n"));
    let o = run({
        let mut c = over_sasl(&user);
        c.arg("--sasl-password-file")
            .arg(&secret)
            .args(["describe", &role]);
        c
    });
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run({
        let mut c = over_sasl(&limited);
        c.env("KC_SASL_PASSWORD", &limited_pw)
            .args(["describe", &role]);
        c
    });
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("ACL") && !err.contains(&limited_pw), "{err}");
    assert!(
        err.contains("kafka-coordination: hint: see docs/guide/troubleshooting.md#missing-acls"),
        "{err}"
    );
}

/// A proxy in front of the first broker, and a config file whose every connection goes
/// through it (short request timeout), for tests that cut a supervisor off the cluster.
fn through_a_proxy(bootstrap: &str) -> (proxy::Proxy, PathBuf) {
    drop(transport_with(KafkaConfig::new(bootstrap, PARTITIONS)));
    let broker = bootstrap
        .split(',')
        .next()
        .expect("a broker")
        .trim()
        .to_owned();
    let proxy = proxy::Proxy::start(&broker);
    let config = scratch("through-proxy.toml");
    write(
        &config,
        &format!(
            "[kafka]\nbootstrap_servers = \"{0}\"\nrequest_timeout = \"700ms\"\n\
             [kafka.address_overrides]\n\"{broker}\" = \"{0}\"\n",
            proxy.addr
        ),
    );
    (proxy, config)
}

/// `--stop-at-deadline`: a leader cut off from the cluster (every connection through a proxy
/// that stops answering) sees no fence, and stops its child once the lease it holds ran out
/// without a renewal; it then exits 75 (term lost).
#[test]
fn with_stop_at_deadline_a_leader_cut_off_stops_its_child_when_its_lease_runs_out() {
    let Some(bootstrap) = bootstrap() else { return };
    let (proxy, config) = through_a_proxy(&bootstrap);
    let role = unique("kc-cli-deadline");
    let mut sup = {
        let mut c = kc();
        c.arg("--config")
            .arg(&config)
            .args(["--json", "--partitions", &PARTITIONS.to_string(), "run"])
            .args(["--stop-at-deadline", "--role", &role, "--member", "m"])
            .args([
                "--lease-duration",
                "2s",
                "--renew-interval",
                "500ms",
                "--grace",
                "2s",
            ])
            .args([
                "--",
                "sh",
                "-c",
                "trap 'exit 0' TERM; while :; do sleep 0.1; done",
            ])
            .stderr(Stdio::piped());
        Reaped(c.spawn().expect("the supervisor starts"))
    };
    let mut events = Lines::of(sup.stderr.take().expect("stderr"));
    events.wait_for("the term", |v| v["event"] == "elected");
    proxy.freeze();
    let over = events.wait_for("the end of the term", |v| v["event"] == "term_over");
    assert!(
        over["reason"]
            .as_str()
            .is_some_and(|r| r.contains("lease ran out")),
        "{over}"
    );
    let exited = events.wait_for("the child's exit", |v| v["event"] == "child_exited");
    assert_eq!(exited["code"], 0, "{exited}");
    proxy.thaw();
    assert_eq!(
        sup.wait().expect("exits").code(),
        Some(75),
        "{:#?}",
        events.seen
    );
}

/// Without `--stop-at-deadline`, a leader cut off from the cluster (every connection through a
/// proxy that stops answering) keeps its child running past its lease, and past the election
/// of a successor; it stops the child once it reaches the cluster again and learns that it
/// was fenced. The verdict goes by the order of events: the successor's `elected`, then more
/// lines from the cut-off child, then the cut-off supervisor's `term_over`.
#[test]
fn without_stop_at_deadline_a_cut_off_leaders_child_runs_until_the_fence_is_seen() {
    let Some(bootstrap) = bootstrap() else { return };
    let (proxy, config) = through_a_proxy(&bootstrap);
    let role = unique("kc-cli-cut-off");
    let file = scratch("cut-off-child.log");
    let mut a = {
        let mut c = kc();
        c.arg("--config")
            .arg(&config)
            .args(["--json", "--partitions", &PARTITIONS.to_string(), "run"])
            .args(["--role", &role, "--member", "a"])
            .args([
                "--lease-duration",
                "2s",
                "--renew-interval",
                "500ms",
                // Nothing but the fence ends the term on a slow machine.
                "--give-up-after",
                "600s",
                "--grace",
                "2s",
                "--",
                "sh",
                "-c",
            ])
            .arg("trap 'exit 0' TERM; while :; do echo tick >> \"$0\"; sleep 0.05; done")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Reaped(c.spawn().expect("the supervisor starts"))
    };
    let mut a_events = Lines::of(a.stderr.take().expect("stderr"));
    a_events.wait_for("a's term", |v| v["event"] == "elected");
    proxy.freeze();
    let other = scratch("successor.log");
    let (_b, mut b_events) = supervisor(&bootstrap, &role, "b", &other);
    b_events.wait_for("the successor's term", |v| v["event"] == "elected");
    // After the successor's election, the cut-off child still writes.
    let ticks = || {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let at_election = ticks();
    let deadline = Instant::now() + PROMPT;
    while ticks() < at_election + 5 {
        assert!(
            Instant::now() < deadline,
            "the cut-off child wrote nothing after the successor's election"
        );
        thread::sleep(Duration::from_millis(50));
    }
    // ...and its supervisor has not ended the term.
    while let Ok(line) = a_events.rx.try_recv() {
        a_events.seen.push(line);
    }
    assert!(
        !a_events
            .seen
            .iter()
            .any(|l| l.contains("\"term_over\"") || l.contains("\"child_exited\"")),
        "{:#?}",
        a_events.seen
    );
    proxy.thaw();
    let over = a_events.wait_for("the end of a's term", |v| v["event"] == "term_over");
    eprintln!("the cut-off supervisor's term ended: {over}");
    a_events.wait_for("the child's exit", |v| v["event"] == "child_exited");
    assert_eq!(
        a.wait().expect("exits").code(),
        Some(75),
        "{:#?}",
        a_events.seen
    );
}
