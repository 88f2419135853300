//! A cluster that never answered (nothing listens on the address): no broker needed.

use std::sync::Arc;

use kafka_coordination::error::ErrorKind;
use kafka_coordination_kafka::{KafkaConfig, KafkaTransport};

/// Nothing listens on port 1: a cluster that never answered is reported after a few quick
/// attempts (a retriable error that says so), not after the request timeout, and a
/// candidacy shows it in its snapshot at its first failure, with no log subscriber.
#[test]
fn a_cluster_that_never_answered_is_reported_at_once() {
    let t = Arc::new(KafkaTransport::new(KafkaConfig::new("127.0.0.1:1", 16)).expect("transport"));
    let started = std::time::Instant::now();
    let err = kafka_coordination::describe::describe_leadership(&*t, "role")
        .expect_err("nothing listens");
    let took = started.elapsed();
    eprintln!("describe_leadership on a refused address failed after {took:?}: {err}");
    match err {
        kafka_coordination::Error::Transport(e) => {
            assert_eq!(e.kind(), ErrorKind::Retriable, "{e}");
            assert!(e.message().contains("could be reached yet"), "{e}");
            assert!(e.message().contains("Connection refused"), "{e}");
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    {
        let started = std::time::Instant::now();
        let c =
            kafka_coordination::blocking::start(t, "role", "m", kafka_coordination::Options::new())
                .expect("start");
        let limit = std::time::Duration::from_secs(60);
        let error = loop {
            if let Some(e) = c.snapshot().last_error {
                break e;
            }
            assert!(started.elapsed() < limit, "no failure shown in {limit:?}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        eprintln!(
            "the snapshot showed it after {:?}: {error}",
            started.elapsed()
        );
        assert!(error.message().contains("could be reached yet"), "{error}");
        assert!(c.snapshot().failing_since.is_some());
        let _ = c.resign_blocking();
    }
}
