//! Runs every memory-backed example's scenario, as `cargo run --example NAME` does, and fails
//! if one of them does not complete or prints less than its story.
//!
//! Every scenario runs in virtual time (`--virtual-time`; `custom_event_loop` and
//! `manual_clock` by default): a manual clock that only the scenario moves, with exact
//! quiescence after each move, so the verdicts and even the printed stamps are the same on an
//! idle laptop and on a loaded CI machine. The programs themselves keep the system clock.

use kafka_coordination_examples::{
    blocking_worker, custom_event_loop, custom_transport, failover, manual_clock, Timeline,
};

type Run = fn(&[String], &Timeline) -> Result<(), kafka_coordination_examples::args::Failure>;

/// Runs `run` with `args` into a buffer; panics with the whole output on failure.
fn run_example(name: &str, run: Run, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let out = Timeline::buffer();
    let result = run(&args, &out);
    let text = out.contents();
    if let Err(e) = result {
        panic!("example {name} {args:?} failed: {e}\n--- output ---\n{text}");
    }
    text
}

fn assert_mentions(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
    }
}

#[test]
fn failover_runs_its_whole_timeline() {
    let text = run_example("failover", failover::run, &["--virtual-time"]);
    assert_mentions(
        &text,
        &[
            "[s] = virtual seconds since start",
            "[  0.000s] node-1    elected: leads with token",
            "node-2    registered at offset",
            "renewed its lease with the same token",
            "KILLED",
            // Killed after its renewal at +0.500s, node-1's lease runs until +2.500s: node-2
            // (rank 0) takes over at that very instant, in virtual time.
            "[  2.500s] node-2    elected: leads with token",
            "0 ms after node-1's deadline",
            "still believes it leads",
            "= false  (node-1's old token)",
            "= true   (node-2's token)",
            "= false  (NO_EPOCH)",
            "Error::Fenced",
            "REJECTED",
            "node-3    elected",
            "0 ms after the resign began",
            "failover: OK",
        ],
    );
}

#[test]
fn failover_with_four_members_and_other_timings() {
    let text = run_example(
        "failover",
        failover::run,
        &[
            "--virtual-time",
            "--members",
            "4",
            "--lease-ms",
            "1200",
            "--renew-ms",
            "300",
            "--stagger-ms",
            "200",
        ],
    );
    assert_mentions(
        &text,
        &[
            "node-4    registered",
            "rank 2 (challenges at the deadline + 2 x 200 ms)",
            "0 ms after node-1's deadline",
            "other standbys cancelled",
            "failover: OK",
        ],
    );
}

#[test]
fn failover_rejects_bad_arguments() {
    let out = Timeline::buffer();
    let bad = ["--members".to_owned(), "2".to_owned()];
    assert!(matches!(
        failover::run(&bad, &out),
        Err(kafka_coordination_examples::args::Failure::Usage(_))
    ));
    let text = run_example("failover", failover::run, &["--help"]);
    assert_mentions(&text, &["--bootstrap", "--virtual-time"]);
    let kafka_in_virtual_time = [
        "--virtual-time".to_owned(),
        "--bootstrap".to_owned(),
        "127.0.0.1:9092".to_owned(),
    ];
    assert!(matches!(
        failover::run(&kafka_in_virtual_time, &out),
        Err(kafka_coordination_examples::args::Failure::Usage(_))
    ));
}

#[test]
fn blocking_worker_stops_when_fenced() {
    let text = run_example("blocking_worker", blocking_worker::run, &["--virtual-time"]);
    assert_mentions(
        &text,
        &[
            "[s] = virtual seconds since start",
            "[  0.000s] worker-a  elected",
            "CUT",
            // worker-a's last renewal was at +0.600s: its lease of 1.5 s runs out at +2.100s.
            "[  2.100s] worker-b  elected",
            "REFUSED by the store",
            "worker-a  done fired (fenced",
            "worker-b  told to stop: resigned",
            "blocking_worker: OK",
        ],
    );
}

/// In virtual time a scenario takes the same path on every run, however the threads are
/// scheduled: the drivers settle after every move of the clock, and the workers of
/// `blocking_worker` take their turns in a fixed order. So the whole printed story repeats.
#[test]
fn virtual_time_runs_repeat_exactly() {
    for (name, run) in [
        ("failover", failover::run as Run),
        ("blocking_worker", blocking_worker::run),
    ] {
        let first = run_example(name, run, &["--virtual-time"]);
        let second = run_example(name, run, &["--virtual-time"]);
        assert_eq!(first, second, "{name} took another path the second time");
    }
}

#[test]
fn custom_event_loop_hands_over_on_resign() {
    let text = run_example("custom_event_loop", custom_event_loop::run, &[]);
    assert_mentions(
        &text,
        &[
            "a         ⇒ Elected",
            "parked until",
            "a         ⇐ Event::Resign",
            "b         ⇒ Elected",
            "custom_event_loop: OK",
        ],
    );
}

/// The same loop on the system clock with real sleeps: about four seconds of real leases, so
/// its verdict could depend on how the machine schedules the thread. Not part of the default
/// suite; run it with `cargo test -p kafka-coordination-examples -- --ignored`.
#[test]
#[ignore = "real time: runs real leases on the system clock"]
fn custom_event_loop_in_real_time() {
    let text = run_example(
        "custom_event_loop",
        custom_event_loop::run,
        &["--real-time"],
    );
    assert_mentions(&text, &["real time", "custom_event_loop: OK"]);
}

#[test]
fn custom_transport_elects_hands_over_and_fences() {
    let text = run_example("custom_transport", custom_transport::run, &[]);
    assert_mentions(
        &text,
        &[
            "a lease write with the old pair is fenced",
            "custom_transport: OK",
        ],
    );
}

#[test]
fn manual_clock_story_holds() {
    let text = run_example("manual_clock", manual_clock::run, &[]);
    assert_mentions(
        &text,
        &[
            "node-b    elected at node-a's deadline",
            "fenced at its next renewal",
            "manual_clock: OK",
        ],
    );
}

/// The failover timeline on a real cluster: set `KAFKA_BOOTSTRAP` (for example with
/// `scripts/kafka/with-broker.sh cargo test -p kafka-coordination-examples --features kafka`).
#[cfg(feature = "kafka")]
#[test]
fn failover_on_kafka() {
    let bootstrap = match std::env::var("KAFKA_BOOTSTRAP") {
        Ok(b) if !b.trim().is_empty() => b,
        _ => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED failover_on_kafka: KAFKA_BOOTSTRAP is not set ***\n"
            );
            return;
        }
    };
    let replication = std::env::var("KAFKA_BROKERS")
        .ok()
        .and_then(|n| n.parse::<i32>().ok())
        .map_or(1, |n| n.clamp(1, 3))
        .to_string();
    let text = run_example(
        "failover",
        failover::run,
        &["--bootstrap", &bootstrap, "--replication", &replication],
    );
    assert_mentions(&text, &["on Kafka at", "REJECTED", "failover: OK"]);
}

#[test]
fn tokio_service_works_hands_over_and_refuses_the_old_pair() {
    let text = run_example(
        "tokio_service",
        kafka_coordination_examples::tokio_service::run,
        &["--virtual-time"],
    );
    assert_mentions(
        &text,
        &[
            "svc-a     elected",
            "unit 3: guarded write",
            "resigned: pair superseded",
            "svc-b     elected at once",
            "REFUSED",
            "tokio_service: OK, 5 guarded writes",
        ],
    );
}
