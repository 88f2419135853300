//! Mixed scenarios on a real Apache Kafka broker (`KAFKA_BOOTSTRAP`): this library (in process,
//! or the `kafka-coordination` CLI as a process of its own) and a second, independent member
//! of the spec, interop/java (Apache Kafka's own Java client, built by scripts/interop.sh),
//! share roles.
//!
//! Real time passes here; no test sleeps for a verdict: each waits for an event (a line of the
//! Java member, an event of the CLI, a record in the role's partition) with a generous bound.
//! With `KAFKA_BOOTSTRAP` set and the Java member not built, every test fails and says to run
//! scripts/interop.sh.

use kafka_coordination_test_support as support;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::partition::role_partition;
use kafka_coordination::core::record::Role;
use kafka_coordination::core::RoleState;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::describe::describe_role_state;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::{blocking, Options, SystemClock};
use serde_json::Value;
use support::{transport_with, unique, PARTITIONS};

const KC: &str = env!("CARGO_BIN_EXE_kafka-coordination");
/// A bound for what should happen promptly on a loaded machine.
const PROMPT: Duration = Duration::from_secs(60);
/// Short leases, as in the other real-broker tests; both kinds of member use the same.
const LEASE_MS: u64 = 2_000;
const RENEW_MS: u64 = 500;
const STAGGER_MS: u64 = 500;

fn bootstrap() -> Option<String> {
    support::bootstrap(
        "interop tests (Java member against this library)",
        "scripts/interop.sh && scripts/kafka/with-broker.sh cargo test -p kafka-coordination-cli \
         -- interop::",
    )
}

fn options() -> Options {
    Options::new()
        .lease_duration(Duration::from_millis(LEASE_MS))
        .renew_interval(Duration::from_millis(RENEW_MS))
        .challenge_stagger(Duration::from_millis(STAGGER_MS))
        .clock(SystemClock)
}

fn transport(bootstrap: &str) -> KafkaTransport {
    transport_with(KafkaConfig::new(bootstrap, PARTITIONS))
}

/// The Java member's classpath, written by scripts/interop.sh. Missing: the test fails and
/// says how to build it (it never passes without having met the Java member).
fn java_classpath() -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/java/target/java-member.classpath");
    match std::fs::read_to_string(&file) {
        Ok(cp) if !cp.trim().is_empty() => cp.trim().to_owned(),
        _ => panic!(
            "the Java member is not built ({} is missing): run scripts/interop.sh first \
             (scripts/test.sh does)",
            file.display()
        ),
    }
}

// ---- processes --------------------------------------------------------------------------------

/// A spawned process that is killed (after a SIGCONT, in case it is stopped) and reaped when the
/// test lets go of it, also when an assertion fails first.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        signal(&self.0, libc::SIGCONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(child: &Child, sig: i32) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: kill(2) on our own child process.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Lines of a process's stdout or stderr, arriving on a channel.
struct Lines {
    who: String,
    rx: Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn of(who: &str, stream: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        let name = who.to_owned();
        thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                eprintln!("[{name}] {line}");
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Lines {
            who: who.to_owned(),
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits (bounded) for a line for which `want` holds, and returns it.
    fn wait_for(&mut self, what: &str, mut want: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + PROMPT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "{}: no {what} within {PROMPT:?} (or the process ended); lines so far: {:#?}",
                    self.who, self.seen
                )
            });
            self.seen.push(line.clone());
            if want(&line) {
                return line;
            }
        }
    }

    /// The lines that arrived so far without waiting, added to `seen`.
    fn drain(&mut self) -> &[String] {
        while let Ok(line) = self.rx.try_recv() {
            self.seen.push(line);
        }
        &self.seen
    }
}

/// `key=value` of a Java member's event line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// The Java member, one process.
struct Java {
    process: Reaped,
    stdin: Option<ChildStdin>,
    out: Lines,
    member: String,
}

impl Java {
    fn start(bootstrap: &str, role: &str, member: &str, extra: &[&str]) -> Java {
        let mut c = Command::new("java");
        c.arg("-cp")
            .arg(java_classpath())
            .arg("interop.Member")
            .args(["--bootstrap", bootstrap, "--role", role, "--member", member])
            .args(["--partitions", &PARTITIONS.to_string()])
            .args(["--lease-ms", &LEASE_MS.to_string()])
            .args(["--renew-ms", &RENEW_MS.to_string()])
            .args(["--stagger-ms", &STAGGER_MS.to_string()])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("java starts (is a JDK 17+ installed?)");
        let stdin = child.stdin.take();
        let out = Lines::of(
            &format!("java {member}"),
            child.stdout.take().expect("stdout"),
        );
        drop(Lines::of(
            &format!("java {member} stderr"),
            child.stderr.take().expect("stderr"),
        ));
        Java {
            process: Reaped(child),
            stdin,
            out,
            member: member.to_owned(),
        }
    }

    fn wait_for(&mut self, what: &str, want: impl FnMut(&str) -> bool) -> String {
        self.out.wait_for(what, want)
    }

    /// Waits for its election and returns the pair it wrote into its lease, as "id/epoch".
    fn elected(&mut self) -> String {
        let line = self.wait_for("ELECTED", |l| l.starts_with("ELECTED"));
        format!(
            "{}/{}",
            field(&line, "producerId").expect("producerId"),
            field(&line, "epoch").expect("epoch")
        )
    }

    fn standby_behind(&mut self, holder: &str, rank: usize) {
        let want_rank = rank.to_string();
        self.wait_for(&format!("STANDBY rank={rank} holder={holder}"), |l| {
            l.starts_with("STANDBY")
                && field(l, "rank") == Some(want_rank.as_str())
                && field(l, "holder") == Some(holder)
        });
    }

    fn signal(&self, sig: i32) {
        signal(&self.process.0, sig);
    }

    fn resign(&mut self) -> Option<i32> {
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin
            .write_all(b"resign\n")
            .and_then(|()| stdin.flush())
            .expect("write to the Java member's stdin");
        self.out.wait_for("RESIGNED", |l| l.starts_with("RESIGNED"));
        self.exit_code()
    }

    /// Waits (bounded) for the process to exit, and returns its code.
    fn exit_code(&mut self) -> Option<i32> {
        let deadline = Instant::now() + PROMPT;
        loop {
            if let Some(status) = self.process.0.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the Java member {} did not exit",
                self.member
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The tool with no KC_* variable inherited, on the test broker.
fn kc_on(bootstrap: &str) -> Command {
    let mut c = Command::new(KC);
    for (k, _) in std::env::vars() {
        if k.starts_with("KC_") {
            c.env_remove(k);
        }
    }
    c.env("KC_BOOTSTRAP_SERVERS", bootstrap);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&o.stdout)))
}

/// `kafka-coordination describe`, which must exit 0.
fn describe(bootstrap: &str, role: &str) -> Value {
    let o = kc_on(bootstrap)
        .args([
            "--json",
            "--partitions",
            &PARTITIONS.to_string(),
            "describe",
            role,
        ])
        .output()
        .expect("the tool runs");
    assert_eq!(o.status.code(), Some(0), "describe {role}: {o:?}");
    json(&o)
}

/// `describe` until `expected` holds (bounded): a lease shows a moment after its commit.
fn describe_until(
    bootstrap: &str,
    role: &str,
    what: &str,
    expected: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + PROMPT;
    loop {
        let d = describe(bootstrap, role);
        if expected(&d) {
            return d;
        }
        assert!(Instant::now() < deadline, "never {what}: {d}");
        thread::sleep(Duration::from_millis(50));
    }
}

fn roster_members(d: &Value) -> Vec<String> {
    d["roster"]
        .as_array()
        .expect("a roster")
        .iter()
        .map(|m| m["member"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A `kafka-coordination run` supervisor whose child sleeps; its JSON events come on stderr.
fn supervisor(bootstrap: &str, role: &str, member: &str) -> (Reaped, Lines) {
    let mut c = kc_on(bootstrap);
    c.args(["--json", "--partitions", &PARTITIONS.to_string(), "run"])
        .args(["--role", role, "--member", member])
        .args(["--lease-duration", &format!("{LEASE_MS}ms")])
        .args(["--renew-interval", &format!("{RENEW_MS}ms")])
        .args(["--challenge-stagger", &format!("{STAGGER_MS}ms")])
        .args(["--grace", "2s", "--", "sleep", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("the supervisor starts");
    let lines = Lines::of(
        &format!("kc {member}"),
        child.stderr.take().expect("stderr"),
    );
    (Reaped(child), lines)
}

fn event_is(line: &str, event: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| v["event"] == event)
}

/// The role's state as this library reads it, until `expected` holds (bounded).
fn state_until(
    t: &KafkaTransport,
    role: &str,
    what: &str,
    expected: impl Fn(&RoleState) -> bool,
) -> RoleState {
    let deadline = Instant::now() + PROMPT;
    loop {
        let s = describe_role_state(t, role).expect("describe_role_state");
        if expected(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "never {what}: {s:?}");
        thread::sleep(Duration::from_millis(50));
    }
}

fn holder(s: &RoleState) -> Option<String> {
    s.lease().map(|l| l.lease.member.as_str().to_owned())
}

fn on_roster(s: &RoleState, member: &str) -> bool {
    s.roster().any(|(m, _)| m.as_str() == member)
}

/// Waits (bounded) until the candidacy's rank is `rank`, and hands it back.
fn at_rank(mut c: Candidacy, rank: usize) -> Candidacy {
    let deadline = Instant::now() + PROMPT;
    while c.snapshot().rank != Some(rank) {
        assert!(
            Instant::now() < deadline,
            "rank {:?}, not {rank}",
            c.snapshot().rank
        );
        match c.elected_blocking_timeout(Duration::from_millis(20)) {
            Ok(r) => panic!(
                "elected while waiting for rank {rank}: {:?}",
                r.map(|l| l.token())
            ),
            Err(back) => c = back,
        }
    }
    c
}

fn elected(c: Candidacy, who: &str) -> Leadership {
    match c.elected_blocking_timeout(PROMPT) {
        Ok(r) => r.unwrap_or_else(|e| panic!("{who}'s candidacy failed: {e}")),
        Err(_) => panic!("{who} was not elected within {PROMPT:?}"),
    }
}

// ---- the scenarios --------------------------------------------------------------------------

/// (a) The Java member leads and is SIGKILLed; this library's standby takes over.
#[test]
fn a_java_leader_killed_a_rust_standby_takes_over() {
    let Some(bootstrap) = bootstrap() else { return };
    let _ = java_classpath();
    let role = unique("interop-a");
    let mut java = Java::start(&bootstrap, &role, "java", &[]);
    let java_pair = java.elected();
    let standby = blocking::start(transport(&bootstrap), &role, "rust", options())
        .expect("the standby starts");
    let standby = at_rank(standby, 0);
    // The Java leader renews over the standby's turn: the library waits for a live lease.
    java.wait_for("a renewal after the standby stood by", |l| {
        l.starts_with("RENEWED")
    });
    assert!(
        !java.out.drain().iter().any(|l| l.starts_with("FENCED")),
        "the standby challenged a live leader: {:?}",
        java.out.seen
    );
    java.signal(libc::SIGKILL);
    let leader = elected(standby, "the rust standby");
    assert_ne!(leader.token().to_string(), java_pair);
    let t = transport(&bootstrap);
    let s = state_until(&t, &role, "the rust lease", |s| {
        holder(s).as_deref() == Some("rust")
    });
    assert_eq!(s.lease().expect("a lease").lease.token, leader.token());
    leader.resign_blocking().expect("resign");
}

/// (b) This library's leader resigns; the Java standby takes over.
#[test]
fn b_a_rust_leader_resigns_the_java_standby_takes_over() {
    let Some(bootstrap) = bootstrap() else { return };
    let _ = java_classpath();
    let role = unique("interop-b");
    // A hand-over, not a takeover: the Rust leader's lease is long enough that no renewal
    // delayed by a loaded machine lets it lapse before the resign (which would end the term
    // and make the resign an error); the Java member takes over when it resigns, whatever the
    // lease's length.
    let long_lease = options().lease_duration(Duration::from_millis(6 * LEASE_MS));
    let leader = blocking::acquire_leadership(transport(&bootstrap), &role, "rust", long_lease)
        .expect("the rust member is elected");
    let mut java = Java::start(&bootstrap, &role, "java", &[]);
    java.standby_behind("rust", 0);
    leader.resign_blocking().expect("resign");
    let pair = java.elected();
    let d = describe_until(&bootstrap, &role, "the Java member leading", |d| {
        d["leader"]["member"] == "java"
    });
    assert_eq!(d["leader"]["token"], pair.as_str(), "{d}");
    assert_eq!(java.resign(), Some(0));
    let d = describe_until(&bootstrap, &role, "the resign", |d| {
        d["vacancy"]["reason"] == "resigned" && roster_members(d).is_empty()
    });
    assert_eq!(d["leader"], Value::Null, "{d}");
}

/// (c) The Java member, a standby whose turn comes, is paused (SIGSTOP) across its slot; a Rust
/// standby behind it takes over; after SIGCONT the Java member is still on the roster (the
/// new leader does not delete the registrations of the members it passed over).
#[test]
fn c_a_java_standby_paused_across_its_slot_stays_on_the_roster() {
    let Some(bootstrap) = bootstrap() else { return };
    let _ = java_classpath();
    let role = unique("interop-c");
    let leader_link = Link::new(transport(&bootstrap));
    let leader = blocking::acquire_leadership(leader_link.clone(), &role, "first", options())
        .expect("the first rust member is elected");
    let mut java = Java::start(&bootstrap, &role, "java", &[]);
    java.standby_behind("first", 0);
    let standby = blocking::start(transport(&bootstrap), &role, "second", options())
        .expect("the second rust member starts");
    let standby = at_rank(standby, 1);

    java.signal(libc::SIGSTOP);
    // The first leader falls silent (its link cut): its lease runs out; the Java member's slot
    // (the deadline) passes while it is stopped, and the second rust member's comes a stagger
    // later.
    leader_link.cut();
    let second = elected(standby, "the second rust member");
    let t = transport(&bootstrap);
    let first_lease = state_until(&t, &role, "the second's lease", |s| {
        holder(s).as_deref() == Some("second")
    });
    let d0 = first_lease.lease().expect("a lease").lease.deadline.0;
    java.signal(libc::SIGCONT);
    // The Java member reads the new state: standing by behind the new leader, or off the roster.
    let line = java.wait_for("its first look after the pause", |l| {
        (l.starts_with("STANDBY") && field(l, "holder") == Some("second"))
            || l.starts_with("NOT_ON_ROSTER")
    });
    // Two renewals later the new leader has done whatever it does after an election.
    let s = state_until(&t, &role, "two renewals of the second", |s| {
        s.lease()
            .is_some_and(|l| l.lease.deadline.0 >= d0 + 2 * RENEW_MS as i64)
    });
    assert!(
        on_roster(&s, "java"),
        "the Java member was removed from the roster while it was paused (the new leader \
         deleted the registration of a member it passed over; the Java member, as the spec \
         says, does not register again): its line {line:?}; roster {:?}",
        s.roster().map(|(m, o)| (m.as_str(), o)).collect::<Vec<_>>()
    );
    assert!(line.starts_with("STANDBY"), "{line}");
    assert_eq!(java.resign(), Some(0));
    second.resign_blocking().expect("resign");
    drop(leader);
}

/// (d) `describe` and `roles` of the CLI on a role the Java member leads.
#[test]
fn d_describe_and_roles_name_a_java_leader() {
    let Some(bootstrap) = bootstrap() else { return };
    let _ = java_classpath();
    drop(transport(&bootstrap));
    let role = unique("interop-d");
    let mut java = Java::start(&bootstrap, &role, "java", &[]);
    let pair = java.elected();
    // A few renewals, so that on transaction version 2 the coordinator's epoch has moved.
    for _ in 0..3 {
        java.wait_for("a renewal", |l| l.starts_with("RENEWED"));
    }
    let d = describe_until(&bootstrap, &role, "the Java member leading", |d| {
        d["leader"]["member"] == "java"
    });
    eprintln!(
        "describe of a Java leader: lease pair {}, coordinator pair {} ({}), lease_pair_is_current {}",
        d["leader"]["token"], d["coordinator"]["token"], d["coordinator"]["state"],
        d["coordinator"]["lease_pair_is_current"]
    );
    assert_eq!(d["leader"]["token"], pair.as_str(), "{d}");
    assert_eq!(d["leader"]["live"], true, "{d}");
    assert_eq!(roster_members(&d), ["java"], "{d}");
    // The coordinator's pair has the lease's producer id (on TV2 a newer epoch of it).
    let id = pair.split('/').next().expect("an id");
    let coordinator = d["coordinator"]["token"].as_str().expect("a pair");
    assert_eq!(coordinator.split('/').next(), Some(id), "{d}");
    // The Java client commits with transaction version 2 when the cluster has it: its epoch
    // moves at every commit, and describe says so instead of calling a live leader superseded.
    let relation = &d["coordinator"]["lease_pair_relation"]["relation"];
    if coordinator == pair {
        assert_eq!(relation, "current", "{d}");
    } else {
        assert!(
            d["coordinator"]["transaction_version"].as_i64() >= Some(2),
            "the pair moved without transaction version 2: {d}"
        );
        assert_eq!(relation, "commits_later", "{d}");
    }

    let o = kc_on(&bootstrap)
        .args(["--json", "--partitions", &PARTITIONS.to_string(), "roles"])
        .output()
        .expect("the tool runs");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let all = json(&o);
    let listed = all
        .as_array()
        .expect("an array")
        .iter()
        .find(|r| r["role"] == role.as_str())
        .unwrap_or_else(|| panic!("{role} not listed: {all}"));
    assert_eq!(listed["leader"]["member"], "java", "{listed}");
    assert_eq!(listed["members"], 1, "{listed}");
    assert_eq!(java.resign(), Some(0));
}

/// A role name other than `role` whose partition is the same.
fn partition_mate(role: &str) -> String {
    let p = role_partition(&Role::new(role).expect("role"), PARTITIONS).expect("partition");
    (0..)
        .map(|i| format!("{role}-mate-{i}"))
        .find(|r| role_partition(&Role::new(r.as_str()).expect("role"), PARTITIONS) == Ok(p))
        .expect("a name on the same partition")
}

/// The state topic of the compression scenarios: a topic of their own (compacted, the same
/// partition count), so that a reader that cannot decode a compressed batch fails there and
/// not in the other scenarios whose roles happen to share a partition with them.
const COMPRESSED_TOPIC: &str = "__coordination_state_interop_compressed";

/// `kafka-coordination describe` of a role on `topic`, which must exit 0.
fn describe_on(bootstrap: &str, topic: &str, role: &str) -> Value {
    let o = kc_on(bootstrap)
        .args([
            "--json",
            "--topic",
            topic,
            "--partitions",
            &PARTITIONS.to_string(),
        ])
        .args(["describe", role])
        .output()
        .expect("the tool runs");
    assert_eq!(o.status.code(), Some(0), "describe {role}: {o:?}");
    json(&o)
}

/// (e) The Java member writes compressed batches (registration, lease) for role X; a Rust
/// candidacy for another role on the same partition reads past them, is elected, and
/// `describe` of X works.
fn compressed_batches_on_a_shared_partition(codec: &str) {
    let Some(bootstrap) = bootstrap() else { return };
    let _ = java_classpath();
    let config = KafkaConfig::new(&bootstrap, PARTITIONS).with_topic(COMPRESSED_TOPIC);
    drop(transport_with(config.clone()));
    let x = unique(&format!("interop-e-{codec}"));
    let y = partition_mate(&x);
    let mut java = Java::start(
        &bootstrap,
        &x,
        "java",
        &["--compression", codec, "--topic", COMPRESSED_TOPIC],
    );
    java.wait_for("REGISTERED", |l| l.starts_with("REGISTERED"));
    java.elected();
    java.wait_for("a renewal", |l| l.starts_with("RENEWED"));
    let candidacy = blocking::start(transport_with(config), &y, "rust", options())
        .expect("the candidacy starts");
    let leader = elected(
        candidacy,
        &format!("the rust member of {y} (beside {codec} batches)"),
    );
    let deadline = Instant::now() + PROMPT;
    let d = loop {
        let d = describe_on(&bootstrap, COMPRESSED_TOPIC, &x);
        if d["leader"]["member"] == "java" {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "never the Java member leading: {d}"
        );
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(roster_members(&d), ["java"], "{d}");
    assert_eq!(d["malformed_records"], 0, "{d}");
    leader.resign_blocking().expect("resign");
    assert_eq!(java.resign(), Some(0));
}

#[test]
fn e_gzip_batches_of_a_java_member_on_a_shared_partition() {
    compressed_batches_on_a_shared_partition("gzip");
}

#[test]
fn e_snappy_batches_of_a_java_member_on_a_shared_partition() {
    compressed_batches_on_a_shared_partition("snappy");
}

#[test]
fn e_lz4_batches_of_a_java_member_on_a_shared_partition() {
    compressed_batches_on_a_shared_partition("lz4");
}

#[test]
fn e_zstd_batches_of_a_java_member_on_a_shared_partition() {
    compressed_batches_on_a_shared_partition("zstd");
}

/// (f1) A Java leader stopped past its lease; a Rust standby takes over; the Java member,
/// resumed, has its next commit refused: it prints FENCED and exits 3.
#[test]
fn f_a_java_leader_paused_past_its_lease_is_fenced_by_a_rust_successor() {
    let Some(bootstrap) = bootstrap() else { return };
    let _ = java_classpath();
    let role = unique("interop-f-java");
    let mut java = Java::start(&bootstrap, &role, "java", &[]);
    java.elected();
    let standby = blocking::start(transport(&bootstrap), &role, "rust", options())
        .expect("the standby starts");
    let standby = at_rank(standby, 0);
    java.signal(libc::SIGSTOP);
    let leader = elected(standby, "the rust standby");
    java.signal(libc::SIGCONT);
    let fenced = java.wait_for("FENCED", |l| l.starts_with("FENCED"));
    assert_eq!(java.exit_code(), Some(3), "{fenced}");
    assert!(
        !leader.is_done(),
        "the rust leader lost its term: {:?}",
        leader.err()
    );
    let t = transport(&bootstrap);
    let s = state_until(&t, &role, "the rust lease", |s| {
        holder(s).as_deref() == Some("rust")
    });
    assert_eq!(s.lease().expect("a lease").lease.token, leader.token());
    leader.resign_blocking().expect("resign");
}

/// (f2) A Rust leader (the CLI's supervisor) stopped past its lease; the Java standby takes
/// over; the Rust leader, resumed, finds its term ended by the fence.
#[test]
fn f_a_rust_leader_paused_past_its_lease_is_fenced_by_a_java_successor() {
    let Some(bootstrap) = bootstrap() else { return };
    let _ = java_classpath();
    drop(transport(&bootstrap));
    let role = unique("interop-f-rust");
    let (sup, mut events) = supervisor(&bootstrap, &role, "rust");
    events.wait_for("the rust leader elected", |l| event_is(l, "elected"));
    let mut java = Java::start(&bootstrap, &role, "java", &[]);
    java.standby_behind("rust", 0);
    signal(&sup.0, libc::SIGSTOP);
    let pair = java.elected();
    signal(&sup.0, libc::SIGCONT);
    let over = events.wait_for("the rust term's end", |l| event_is(l, "term_over"));
    let reason = serde_json::from_str::<Value>(&over).expect("json")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        reason.contains("fenc"),
        "the term ended, but not fenced: {over}"
    );
    // The Java member leads on, unfenced.
    java.wait_for("a renewal after the fence", |l| l.starts_with("RENEWED"));
    assert!(
        !java.out.drain().iter().any(|l| l.starts_with("FENCED")),
        "{:?}",
        java.out.seen
    );
    let d = describe_until(&bootstrap, &role, "the Java member leading", |d| {
        d["leader"]["member"] == "java"
    });
    assert_eq!(d["leader"]["token"], pair.as_str(), "{d}");
    assert_eq!(java.resign(), Some(0));
    drop(sup);
}
