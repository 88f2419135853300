//! `kafka-coordination topic create-data`: the program's own topic (the README's first run
//! creates `jobs` with it). Bad names and counts are usage errors without a broker; on a real
//! broker (`KAFKA_BOOTSTRAP`) the topic is created once, with the broker's default cleanup
//! policy, and a second call with another partition count fails, naming both counts.

use kafka_coordination_test_support as support;

use std::process::{Command, Output};

use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use support::unique;

const KC: &str = env!("CARGO_BIN_EXE_kafka-coordination");

/// The tool with no KC_* variable inherited, on `bootstrap`.
fn kc(bootstrap: &str, args: &[&str]) -> Output {
    let mut c = Command::new(KC);
    for (k, _) in std::env::vars() {
        if k.starts_with("KC_") {
            c.env_remove(k);
        }
    }
    c.args(["--bootstrap-servers", bootstrap]).args(args);
    c.output().expect("the tool runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_bad_name_or_count_and_the_state_topic_are_usage_errors() {
    // Port 1: nothing listens there; none of these gets as far as a request.
    for (args, says) in [
        (
            &["topic", "create-data", "my jobs", "--partitions", "1"][..],
            "the character ' '",
        ),
        (
            &["topic", "create-data", "..", "--partitions", "1"],
            "not a topic name",
        ),
        (
            &["topic", "create-data", "jobs", "--partitions", "0"],
            "0 is not in 1..",
        ),
        (&["topic", "create-data", "jobs"], "--partitions"),
        (
            &[
                "topic",
                "create-data",
                "__coordination_state",
                "--partitions",
                "16",
            ],
            "is the state topic; create it with `kafka-coordination topic create`",
        ),
    ] {
        let o = kc("127.0.0.1:1", args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(
            text(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn create_data_makes_a_plain_topic_once_and_refuses_another_count() {
    let Some(bootstrap) = support::bootstrap(
        "topic create-data tests",
        "scripts/kafka/with-broker.sh cargo test -p kafka-coordination-cli -- data_topic::",
    ) else {
        return;
    };
    let topic = unique("kc-data");
    let o = kc(
        &bootstrap,
        &["topic", "create-data", &topic, "--partitions", "3"],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        text(&o.stdout).contains(&format!("topic {topic}: created, 3 partition(s)")),
        "{}",
        text(&o.stdout)
    );
    // Not compacted: the broker's default policy, so records without a key are accepted.
    let client =
        KafkaTransport::new(KafkaConfig::new(&bootstrap, 3).with_topic(&topic)).expect("a client");
    let report = client.describe_topic().expect("described");
    assert_eq!(report.partitions, Some(3), "{report:?}");
    assert_eq!(
        report.cleanup_policy.as_deref(),
        Some("delete"),
        "{report:?}"
    );

    let o = kc(
        &bootstrap,
        &["topic", "create-data", &topic, "--partitions", "3"],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        text(&o.stdout).contains("already exists, 3 partition(s)"),
        "{o:?}"
    );

    let o = kc(
        &bootstrap,
        &[
            "--json",
            "topic",
            "create-data",
            &topic,
            "--partitions",
            "2",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["created"], false, "{v}");
    assert_eq!(v["partitions"], 3, "{v}");
    assert!(
        text(&o.stderr).contains("exists with 3 partition(s), not 2"),
        "{}",
        text(&o.stderr)
    );
}
