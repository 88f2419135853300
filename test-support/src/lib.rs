//! What the real-broker test files share: finding the broker (or skipping loudly), unique
//! names, and transports on a state topic they create when missing.
#![allow(dead_code)]

pub mod acls;
pub mod proxy;
pub mod tv2;

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::transport::Wait;

/// The partition count of `__coordination_state` in the test cluster.
pub const PARTITIONS: i32 = 16;

/// Prints a SKIPPED banner straight to stderr (libtest captures `eprintln!` of passing tests).
pub fn loud(message: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {message} ***\n");
}

/// The broker's address from `KAFKA_BOOTSTRAP` (set by scripts/kafka/with-broker.sh). When it is
/// unset, says once, loudly, that `suite` ran against nothing and how to run it, and returns
/// `None` so the caller returns early.
pub fn bootstrap(suite: &str, how_to_run: &str) -> Option<String> {
    match std::env::var("KAFKA_BOOTSTRAP") {
        Ok(b) if !b.trim().is_empty() => Some(b),
        _ => {
            static LOUD: std::sync::Once = std::sync::Once::new();
            LOUD.call_once(|| {
                loud(&format!(
                    "KAFKA_BOOTSTRAP is not set, so the {suite} ran against nothing. Run: {how_to_run}"
                ))
            });
            None
        }
    }
}

/// How many brokers the cluster has (`KAFKA_BROKERS`, exported by scripts/kafka/with-broker.sh).
pub fn brokers() -> i32 {
    std::env::var("KAFKA_BROKERS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1)
}

/// The replication factor of the topics the tests create: `KAFKA_TEST_REPLICATION`, else 3 on a
/// cluster of three or more, else 1.
pub fn replication() -> i32 {
    std::env::var("KAFKA_TEST_REPLICATION")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| brokers().clamp(1, 3))
}

/// A name no other test (or earlier run) uses.
pub fn unique(prefix: &str) -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos:x}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A transport of its own (one per member) on `config`'s state topic, created if missing.
/// Before the first transport on a topic is handed out, every partition of the topic has
/// answered a read: right after a topic is created (perhaps by a parallel test) its partitions
/// may have no leader yet, and a read then fails as retriable (NotLeaderForPartition).
pub fn transport_with(config: KafkaConfig) -> KafkaTransport {
    static READY: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let t = KafkaTransport::new(config).expect("transport");
    let min_isr = (replication() > 1).then_some(2);
    // Creating a topic can take longer than a request's timeout on a loaded machine (ZooKeeper
    // mode on 3.x, for one): a retriable failure is asked again, for a minute at most.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match t.create_topic(replication(), min_isr) {
            Ok(_) => break,
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200))
            }
            Err(e) => panic!("the state topic exists or was created: {e}"),
        }
    }
    let topic = t.config().topic().to_owned();
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    if !ready.contains(&topic) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for p in 0..t.config().partitions() {
            loop {
                match t.read_partition(p, 0, Duration::ZERO) {
                    Ok(_) => break,
                    Err(e) if e.is_retriable() && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    Err(e) => panic!("partition {p} of {topic} is not readable: {e}"),
                }
            }
        }
        ready.push(topic);
    }
    t
}
