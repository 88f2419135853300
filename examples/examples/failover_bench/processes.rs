//! `--mode kill`: members are processes (this binary with `--member NAME`), and a leader's
//! death is a SIGKILL. Every figure comes from the role's lease records in the log, written by
//! the members with their own clocks (one machine, so one clock):
//!
//! * **failover overhead**: the instant the successor learned it leads (its `elected` call
//!   returned, after its first lease committed; it prints the instant) minus the killed
//!   leader's last deadline (the successor has rank 0);
//! * **hand-over after resign**: the same instant minus the instant the leader began to
//!   resign (it prints it before calling `resign`).
//!
//! Each round also prints when the successor's first lease write began (its `deadline -
//! lease`), so that what the claim's transaction took can be told apart.
//!
//! Rounds alternate: a kill, then a resign, each followed by a fresh member process joining
//! as the next standby (a restarted process lands at the tail).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::blocking;
use kafka_coordination::describe::describe_role_state;
use kafka_coordination::host::HostOptions;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{Clock, Options, SystemClock};

/// One member process.
pub struct Member {
    pub name: String,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Member {
    /// Starts `--member name` of this binary with the same cluster and timing arguments.
    pub fn spawn(name: &str, role: &str, forwarded: &[String]) -> Member {
        let exe = std::env::current_exe().expect("the benchmark's own path");
        let mut child = Command::new(exe)
            .arg("--member")
            .arg(name)
            .arg("--role")
            .arg(role)
            .args(forwarded)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting a member process");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take().expect("piped stdin");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Member {
            name: name.to_owned(),
            child,
            stdin,
            lines,
        }
    }

    /// Waits for a line starting with `prefix`; returns the rest.
    pub fn expect(&self, prefix: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => {
                    return line[prefix.len()..].trim().to_owned()
                }
                Ok(_) => {}
                Err(_) => super::fail(format!("{}: no `{prefix}` within {within:?}", self.name)),
            }
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the member to resign (it prints `RESIGN <ms>` first).
    pub fn resign(&mut self) {
        let _ = writeln!(self.stdin, "resign");
        let _ = self.stdin.flush();
    }

    pub fn wait(&mut self) {
        let _ = self.child.wait();
    }
}

/// What may run a member's candidacy (`--driver`).
pub const DRIVERS: [&str; 5] = ["blocking", "tokio", "smol", "async-std", "host"];

/// The member side: campaign once, report, renew until told to resign or fenced.
pub fn member_main(name: &str, role: &str, config: KafkaConfig, options: Options, driver: &str) {
    let client = KafkaTransport::new(config).unwrap_or_else(|e| super::fail(e.to_string()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| super::fail(e.to_string()));
    let _in_runtime = runtime.enter();
    // The host (with `--driver host`) lives as long as the member.
    let mut host = None;
    let started = match driver {
        "tokio" => kafka_coordination::tokio_driver::start(client, role, name, options),
        "smol" => kafka_coordination::smol_driver::start(client, role, name, options),
        "async-std" => kafka_coordination::async_std_driver::start(client, role, name, options),
        "host" => blocking::host(std::sync::Arc::new(client), HostOptions::new()).and_then(|h| {
            let started = h.start(role, name, options);
            host = Some(h);
            started
        }),
        _ => blocking::start(client, role, name, options),
    };
    let candidacy = started.unwrap_or_else(|e| super::fail(e.to_string()));
    let _host = host;
    println!("REGISTERING");
    let leadership = candidacy
        .elected_blocking()
        .unwrap_or_else(|e| super::fail(format!("{name}: {e}")));
    println!(
        "ELECTED {} {} {}",
        SystemClock.now().0,
        leadership.token(),
        leadership.term()
    );
    let (tx, rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            if line.trim() == "resign" {
                let _ = tx.send(());
                return;
            }
            line.clear();
        }
    });
    loop {
        if rx.recv_timeout(Duration::from_millis(50)).is_ok() {
            println!("RESIGN {}", SystemClock.now().0);
            let err = leadership.resign_blocking();
            println!("RESIGNED {} {err:?}", SystemClock.now().0);
            return;
        }
        if leadership.is_done() {
            println!("ENDED {:?}", leadership.err());
            return;
        }
    }
}

/// The lease record of `role` now: (member, deadline).
fn current_lease(reader: &KafkaTransport, role: &str) -> Option<(String, i64)> {
    let state = describe_role_state(reader, role).ok()?;
    state
        .lease()
        .map(|l| (l.lease.member.to_string(), l.lease.deadline.0))
}

fn roster(reader: &KafkaTransport, role: &str) -> Vec<String> {
    describe_role_state(reader, role)
        .map(|s| s.roster().map(|(m, _)| m.to_string()).collect())
        .unwrap_or_default()
}

/// Waits until `member`'s lease is the current one and returns its first write instant
/// (`deadline - lease` of the first lease record naming it).
fn first_lease_of(
    reader: &KafkaTransport,
    role: &str,
    partitions: i32,
    member: &str,
    lease_ms: i64,
) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((m, d)) = current_lease(reader, role) {
            if m == member {
                // The state keeps only the latest lease; the first one is at most one renewal
                // earlier. Read the partition's lease records for the exact first one.
                return deadlines_of(reader, role, partitions, member)
                    .first()
                    .copied()
                    .unwrap_or(d)
                    - lease_ms;
            }
        }
        if Instant::now() > deadline {
            super::fail(format!("{member} never wrote a lease"));
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// The deadlines of every lease record `member` wrote for `role`, in offset order.
fn deadlines_of(reader: &KafkaTransport, role: &str, partitions: i32, member: &str) -> Vec<i64> {
    use kafka_coordination::core::partition::role_partition;
    use kafka_coordination::core::record::{Key, Lease, Role};
    use kafka_coordination::transport::Wait;
    let Ok(r) = Role::new(role) else {
        return Vec::new();
    };
    let Ok(p) = role_partition(&r, partitions) else {
        return Vec::new();
    };
    let Ok(batch) = reader.read_partition(p, 0, Duration::ZERO) else {
        return Vec::new();
    };
    batch
        .records
        .iter()
        .filter(|rec| Key::decode(&rec.key).ok() == Some(Key::lease(r.clone())))
        .filter_map(|rec| rec.value.as_deref().and_then(|v| Lease::decode(v).ok()))
        .filter(|l| l.member.as_str() == member)
        .map(|l| l.deadline.0)
        .collect()
}

/// Runs the process-death benchmark; returns (failover overheads, hand-over times) in ms.
#[allow(clippy::too_many_arguments)]
pub fn run(
    role: &str,
    config: &KafkaConfig,
    partitions: i32,
    lease: Duration,
    stagger: Duration,
    failovers: usize,
    forwarded: &[String],
) -> (Vec<f64>, Vec<f64>) {
    let stagger_ms = i64::try_from(stagger.as_millis()).unwrap_or(i64::MAX);
    let reader = KafkaTransport::new(config.clone()).unwrap_or_else(|e| super::fail(e.to_string()));
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut next = 0usize;
    let spawn = |next: &mut usize| {
        let name = format!("p{next}");
        *next += 1;
        Member::spawn(&name, role, forwarded)
    };
    let mut leader = spawn(&mut next);
    leader.expect("ELECTED", Duration::from_secs(60));
    let mut overheads = Vec::new();
    let mut handovers = Vec::new();
    for round in 0..failovers {
        let standby = spawn(&mut next);
        // The standby must be registered and have read the lease before the leader goes.
        let joined = Instant::now();
        while !roster(&reader, role).contains(&standby.name) {
            if joined.elapsed() > Duration::from_secs(30) {
                super::fail(format!("{} never registered", standby.name));
            }
            thread::sleep(Duration::from_millis(10));
        }
        thread::sleep(Duration::from_millis(300));
        // The standby's rank: its place among the registered members other than the leader
        // (killed members stay registered: each one ahead of it costs a stagger).
        let rank = roster(&reader, role)
            .iter()
            .filter(|m| **m != leader.name)
            .position(|m| *m == standby.name)
            .unwrap_or(0) as i64;
        let turn_delay = rank * stagger_ms;
        let kill = round % 2 == 0;
        if kill {
            let (holder, old_deadline) =
                current_lease(&reader, role).unwrap_or_else(|| super::fail("no lease".into()));
            if holder != leader.name {
                super::fail(format!("the lease names {holder}, not {}", leader.name));
            }
            leader.kill();
            let killed_at = SystemClock.now().0;
            let elected = elected_at(&standby, lease * 3);
            let first = first_lease_of(&reader, role, partitions, &standby.name, lease_ms);
            // The killed leader may have renewed between the read and the kill: take the
            // deadline of its last record.
            let last_deadline = deadlines_of(&reader, role, partitions, &leader.name)
                .last()
                .copied()
                .unwrap_or(old_deadline);
            let overhead = (elected - last_deadline - turn_delay) as f64;
            println!(
                "round {round:>3} kill:   {} SIGKILLed at {killed_at}, its lease ended at \
                 {last_deadline}; {} (rank {rank}) first wrote at {first}, elected at {elected}: \
                 overhead {overhead:.0} ms past deadline + {rank} x stagger",
                leader.name, standby.name
            );
            overheads.push(overhead);
            // A killed process stays registered; it would rank ahead of every later standby
            // and cost each a stagger. Remove it as an operator would, so that every round
            // measures a rank-0 successor.
            deregister(&reader, role, partitions, &leader.name);
        } else {
            leader.resign();
            let began: i64 = leader
                .expect("RESIGN", Duration::from_secs(30))
                .parse()
                .unwrap_or_else(|_| super::fail("a bad RESIGN line".into()));
            let elected = elected_at(&standby, lease * 3);
            let first = first_lease_of(&reader, role, partitions, &standby.name, lease_ms);
            let took = (elected - began - turn_delay) as f64;
            leader.expect("RESIGNED", Duration::from_secs(30));
            leader.wait();
            println!(
                "round {round:>3} resign: {} began to resign at {began}; {} (rank {rank}) first \
                 wrote at {first}, elected at {elected}: hand-over {took:.0} ms past {rank} x \
                 stagger",
                leader.name, standby.name
            );
            handovers.push(took);
        }
        leader = standby;
    }
    leader.resign();
    leader.expect("RESIGNED", Duration::from_secs(30));
    leader.wait();
    (overheads, handovers)
}

/// The instant `member` printed with `ELECTED` (its `elected` call returned).
fn elected_at(member: &Member, within: Duration) -> i64 {
    let line = member.expect("ELECTED", within);
    line.split_whitespace()
        .next()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| super::fail(format!("{}: a bad ELECTED line: {line}", member.name)))
}

fn deregister(reader: &KafkaTransport, role: &str, partitions: i32, member: &str) {
    use kafka_coordination::core::partition::role_partition;
    use kafka_coordination::core::record::{Key, MemberId, Role};
    use kafka_coordination::transport::Wait;
    let (Ok(r), Ok(m)) = (Role::new(role), MemberId::new(member)) else {
        return;
    };
    let Ok(p) = role_partition(&r, partitions) else {
        return;
    };
    if let Err(e) = reader.append(p, &Key::registration(r, m).encode(), None) {
        super::fail(format!("removing the ghost {member}: {e}"));
    }
}
