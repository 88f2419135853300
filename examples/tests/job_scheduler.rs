//! The database fence end to end, on a real Kafka broker and a real PostgreSQL: a scheduler
//! that leads is paused (SIGSTOP) past its lease, a standby takes over and runs a job through
//! the fence, the old leader resumes (SIGCONT) and runs a job: PostgreSQL refuses its
//! transaction and rolls it back, and the newer leader's rows are intact.
//!
//! The schedulers are this test binary itself, run with `JOB_SCHEDULER_MEMBER` set (see
//! [`member_process`]): the example's own `scheduler` function, in step mode, so the test says
//! when each one runs a job, and every step waits for the event it needs (an election, a
//! job's row), never for a time.
//!
//! `scripts/kafka/with-broker.sh scripts/postgres/with-postgres.sh cargo test -p
//! kafka-coordination-examples --features postgres --test job_scheduler`. Without
//! `KAFKA_BOOTSTRAP` and `KC_POSTGRES_URL` it says so loudly and passes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_coordination_examples::job_scheduler::{scheduler, Settings};

const MEMBER_ENV: &str = "JOB_SCHEDULER_MEMBER";

/// Not a test of its own: the entry point of a scheduler process (the parent sets the variable
/// to its arguments).
#[test]
fn member_process() {
    let Ok(spec) = std::env::var(MEMBER_ENV) else {
        return;
    };
    let args: Vec<String> = spec.split('\u{1f}').map(str::to_owned).collect();
    let settings = Settings::parse(&args).expect("settings");
    // A refused job ends the process with an error: the test reads what it printed.
    if let Err(e) = scheduler(&settings) {
        eprintln!("scheduler {}: {e}", settings.member);
        std::process::exit(3);
    }
}

/// A scheduler process: its stdin (commands) and its stdout lines.
struct Scheduler {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Scheduler {
    fn spawn(name: &'static str, args: &[String]) -> Scheduler {
        let mut spec = args.to_vec();
        spec.extend(["--member".to_owned(), name.to_owned()]);
        let mut child = Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "member_process",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(MEMBER_ENV, spec.join("\u{1f}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("a scheduler process");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                eprintln!("  {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Scheduler {
            name,
            child,
            stdin,
            lines,
        }
    }

    /// The next line that starts with `event` (other lines skipped); fails after two minutes
    /// (a bound on a broken run, not a verdict) or when the process's output ends.
    fn expect(&self, event: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(event) => return line,
                Ok(_) => {}
                Err(e) => panic!("{}: no {event} line ({e})", self.name),
            }
        }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").expect("a command to the scheduler");
        self.stdin.flush().expect("flush");
    }

    fn signal(&self, which: &str) {
        let ok = Command::new("kill")
            .args([which, &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {which} {}", self.name);
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of `name=` in an event line.
fn field(line: &str, name: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in `{line}`"))
        .to_owned()
}

#[test]
fn a_paused_leader_that_resumes_is_refused_by_the_database_and_its_successors_rows_stay() {
    if std::env::var(MEMBER_ENV).is_ok() {
        return;
    }
    let (Ok(bootstrap), Ok(url)) = (
        std::env::var("KAFKA_BOOTSTRAP"),
        std::env::var("KC_POSTGRES_URL"),
    ) else {
        eprintln!(
            "\n*** SKIPPED: KAFKA_BOOTSTRAP and KC_POSTGRES_URL are not both set; run \
             scripts/kafka/with-broker.sh scripts/postgres/with-postgres.sh cargo test -p \
             kafka-coordination-examples --features postgres --test job_scheduler ***\n"
        );
        return;
    };
    let tag = format!(
        "{}_{:x}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let (fence_table, runs_table) = (format!("fence_{tag}"), format!("runs_{tag}"));
    let args: Vec<String> = [
        ("--bootstrap", bootstrap.as_str()),
        ("--postgres", url.as_str()),
        ("--role", "job-scheduler"),
        ("--state-topic", &format!("state-{tag}")),
        ("--partitions", "1"),
        ("--topic", &format!("jobs-{tag}")),
        ("--fence-table", &fence_table),
        ("--runs-table", &runs_table),
        ("--lease-ms", "2000"),
        ("--renew-ms", "500"),
        ("--stagger-ms", "300"),
    ]
    .iter()
    .flat_map(|(k, v)| [k.to_string(), v.to_string()])
    .chain(["--step".to_owned(), "--create-topics".to_owned()])
    .collect();

    let mut a = Scheduler::spawn("a", &args);
    let term_a: i64 = field(&a.expect("ELECTED"), "term").parse().unwrap();
    a.send("run a1");
    a.expect("RAN");

    // Paused between two jobs, past its lease: a standby takes over.
    a.signal("-STOP");
    let mut b = Scheduler::spawn("b", &args);
    let term_b: i64 = field(&b.expect("ELECTED"), "term").parse().unwrap();
    assert!(term_b > term_a, "terms grow: {term_a} then {term_b}");
    b.send("run b1");
    b.expect("RAN");

    // The old leader wakes up and runs a job at once, before it looks at its term.
    a.signal("-CONT");
    a.send("run a2");
    let refused = a.expect("REFUSED");
    assert_eq!(field(&refused, "by"), "postgres", "{refused}");
    assert!(refused.contains(&format!("term {term_b}")), "{refused}");
    let status = a.child.wait().expect("a exits");
    assert_eq!(status.code(), Some(3), "a stops its work when refused");

    // The newer leader goes on.
    b.send("run b2");
    b.expect("RAN");
    b.send("exit");
    b.expect("RESIGNED");

    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let runs: Vec<(String, i64, String)> = db
        .query(
            &format!("SELECT job, term, member FROM {runs_table} ORDER BY id"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        runs,
        [
            ("a1".to_owned(), term_a, "a".to_owned()),
            ("b1".to_owned(), term_b, "b".to_owned()),
            ("b2".to_owned(), term_b, "b".to_owned()),
        ]
    );
    let (term, member): (i64, String) = {
        let r = db
            .query_one(
                &format!("SELECT term, member FROM {fence_table} WHERE role = 'job-scheduler'"),
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((term, member.as_str()), (term_b, "b"));
}
