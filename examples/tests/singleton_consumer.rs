//! Exactly-once output of the singleton consumer on a real broker: 2,000 input records over 2
//! partitions, three member processes, the consuming leader SIGKILLed three times and
//! SIGSTOPped twice (each once it made progress) while standbys take over; an independent
//! read_committed consumer then finds every input's result exactly once, in order, and the
//! group's committed offsets equal to the output's progress.
//!
//! The member processes are this test binary itself, run with `SINGLETON_CONSUMER_MEMBER` set
//! (see [`member_process`]): the same `member` function the example runs.
//!
//! `scripts/kafka/with-broker.sh cargo test -p kafka-coordination-examples --features kafka
//! --test singleton_consumer`. Without `KAFKA_BOOTSTRAP` it says so loudly and passes.

use std::process::Command;

use kafka_coordination_examples::singleton_consumer::{exactly_once, member, Settings};

const MEMBER_ENV: &str = "SINGLETON_CONSUMER_MEMBER";

/// Not a test of its own: the entry point of a member process (the parent sets the variable to
/// the member's name and the arguments).
#[test]
fn member_process() {
    let Ok(spec) = std::env::var(MEMBER_ENV) else {
        return;
    };
    let words: Vec<String> = spec.split('\u{1f}').map(str::to_owned).collect();
    let (name, args) = words.split_first().expect("a member name");
    let settings = Settings::parse(args, Settings::fresh("unused", "unused")).expect("settings");
    if let Err(e) = member(&settings, name) {
        panic!("member {name}: {e}");
    }
}

#[test]
fn every_input_is_output_exactly_once_while_leaders_are_killed_and_paused() {
    let Ok(bootstrap) = std::env::var("KAFKA_BOOTSTRAP") else {
        eprintln!(
            "SKIPPED: KAFKA_BOOTSTRAP is not set; run scripts/kafka/with-broker.sh cargo test \
             -p kafka-coordination-examples --features kafka --test singleton_consumer"
        );
        return;
    };
    if std::env::var(MEMBER_ENV).is_ok() {
        return;
    }
    let settings = Settings::fresh(&bootstrap, "exactly-once");
    let exe = std::env::current_exe().expect("the test binary");
    let spawn = |name: &str| {
        let mut spec = vec![name.to_owned()];
        spec.extend(settings.to_args());
        let mut c = Command::new(&exe);
        c.args([
            "member_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MEMBER_ENV, spec.join("\u{1f}"));
        c
    };
    let report = exactly_once(&settings, 2_000, 3, 3, 2, &spawn).expect("the run");
    eprintln!("{report}");
    assert_eq!((report.kills, report.stops), (3, 2), "{report}");
    assert_eq!(report.duplicates, 0, "{report}");
    assert_eq!(report.gaps, 0, "{report}");
    assert_eq!(report.out_of_order, 0, "{report}");
    assert_eq!(report.results, [1_000, 1_000], "{report}");
    assert_eq!(report.committed, [Some(1_000), Some(1_000)], "{report}");
    assert!(
        report.elections >= 6,
        "a new leader after every failover: {report}"
    );
}
