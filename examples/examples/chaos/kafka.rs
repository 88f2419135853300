//! What the suite asks the cluster directly, through librdkafka and not through the library
//! under test: topic creation, partition leaders and in-sync replicas, and the checker's
//! read_committed reads.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::metadata::Metadata;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// One committed record: offset, key, value.
pub type Committed = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// Creates `name` with `partitions` and `replication` and the topic-level `config`, unless it
/// exists.
pub fn create_topic(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication: i32,
    config: &[(&str, &str)],
) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| format!("an admin client for {bootstrap}: {e}"))?;
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
    for (k, v) in config {
        topic = topic.set(k, v);
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| format!("a runtime for the admin client: {e}"))?;
    let results = runtime
        .block_on(admin.create_topics([&topic], &options))
        .map_err(|e| format!("creating topic {name}: {e}"))?;
    for r in results {
        match r {
            Ok(_) => {}
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, code)) => return Err(format!("creating topic {t}: {code}")),
        }
    }
    Ok(())
}

fn consumer(bootstrap: &str, isolation: &str) -> Result<BaseConsumer, String> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "kafka-coordination-chaos-checker")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation)
        .set("auto.offset.reset", "earliest")
        .create()
        .map_err(|e| format!("a consumer for {bootstrap}: {e}"))
}

/// The cluster's metadata (every topic).
pub fn metadata(bootstrap: &str) -> Result<Metadata, String> {
    consumer(bootstrap, "read_committed")?
        .fetch_metadata(None, Duration::from_secs(10))
        .map_err(|e| format!("metadata from {bootstrap}: {e}"))
}

/// The leader of `topic`/`partition`, if it has one.
pub fn partition_leader(md: &Metadata, topic: &str, partition: i32) -> Option<i32> {
    let t = md.topics().iter().find(|t| t.name() == topic)?;
    let p = t.partitions().iter().find(|p| p.id() == partition)?;
    (p.leader() >= 0).then_some(p.leader())
}

/// The broker that is the transaction coordinator of `transactional_id`: the leader of its
/// partition of `__transaction_state` (Java's `Utils.abs(id.hashCode()) % partitions`).
pub fn coordinator_of(md: &Metadata, transactional_id: &str) -> Option<i32> {
    let partitions = md
        .topics()
        .iter()
        .find(|t| t.name() == "__transaction_state")?
        .partitions()
        .len() as i32;
    if partitions == 0 {
        return None;
    }
    let hash = transactional_id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    partition_leader(md, "__transaction_state", abs % partitions)
}

/// Whether every partition of `topics` has a leader and `replicas` in-sync replicas.
pub fn fully_replicated(md: &Metadata, topics: &[&str], replicas: usize) -> bool {
    topics.iter().all(|name| {
        md.topics().iter().any(|t| {
            t.name() == *name
                && !t.partitions().is_empty()
                && t.partitions()
                    .iter()
                    .all(|p| p.leader() >= 0 && p.isr().len() >= replicas)
        })
    })
}

fn watermark(c: &BaseConsumer, topic: &str, partition: i32) -> Result<i64, String> {
    c.fetch_watermarks(topic, partition, Duration::from_secs(10))
        .map(|(_, high)| high)
        .map_err(|e| format!("the end offset of {topic}/{partition}: {e}"))
}

/// Every committed record of `topic`/`partition`, read with `isolation.level=read_committed`
/// from offset 0. Waits (up to `within`) until no transaction is open on the partition (its
/// last stable offset has reached its high watermark), so the read covers the whole partition.
pub fn read_committed(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    within: Duration,
) -> Result<Vec<Committed>, String> {
    let deadline = Instant::now() + within;
    let committed = consumer(bootstrap, "read_committed")?;
    let uncommitted = consumer(bootstrap, "read_uncommitted")?;
    let end = loop {
        let stable = watermark(&committed, topic, partition)?;
        let high = watermark(&uncommitted, topic, partition)?;
        if stable == high {
            break high;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{topic}/{partition} still has an open transaction after {within:?} (last \
                 stable offset {stable}, high watermark {high})"
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Beginning)
        .map_err(|e| format!("assigning {topic}/{partition}: {e}"))?;
    committed
        .assign(&assignment)
        .map_err(|e| format!("assigning {topic}/{partition}: {e}"))?;
    let mut records = Vec::new();
    if end == 0 {
        return Ok(records);
    }
    loop {
        if Instant::now() >= deadline {
            return Err(format!(
                "reading {topic}/{partition} did not reach its end ({end}) within {within:?}; \
                 read {} records",
                records.len()
            ));
        }
        match committed.poll(Duration::from_millis(500)) {
            None => {}
            Some(Ok(m)) => {
                records.push((
                    m.offset(),
                    m.key().map(<[u8]>::to_vec),
                    m.payload().map(<[u8]>::to_vec),
                ));
            }
            Some(Err(KafkaError::PartitionEOF(_))) => {
                // The end of a read_committed partition is its last stable offset, which
                // equalled the high watermark above; nothing is written any more.
                return Ok(records);
            }
            Some(Err(e)) => return Err(format!("reading {topic}/{partition}: {e}")),
        }
    }
}

/// The records of `topic`/`partition` from `from` to `to` (inclusive) as they are in the log,
/// committed, aborted or still open (`isolation.level=read_uncommitted`), with the control
/// records left out by the client: what the checker shows around a missing acknowledged write.
pub fn read_uncommitted(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    from: i64,
    to: i64,
) -> Result<Vec<Committed>, String> {
    let c = consumer(bootstrap, "read_uncommitted")?;
    let end = watermark(&c, topic, partition)?.min(to + 1);
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Offset(from.max(0)))
        .map_err(|e| format!("assigning {topic}/{partition}: {e}"))?;
    c.assign(&assignment)
        .map_err(|e| format!("assigning {topic}/{partition}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut records = Vec::new();
    while Instant::now() < deadline {
        match c.poll(Duration::from_millis(500)) {
            None => {}
            Some(Ok(m)) if m.offset() >= end => break,
            Some(Ok(m)) => records.push((
                m.offset(),
                m.key().map(<[u8]>::to_vec),
                m.payload().map(<[u8]>::to_vec),
            )),
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => return Err(format!("reading {topic}/{partition}: {e}")),
        }
    }
    Ok(records)
}

/// Writes one record with a plain (non-transactional) producer, outside every fence: what a
/// buggy writer that bypassed the library would do. For the checker's self-test only.
pub fn produce_plain(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    key: &[u8],
    value: &[u8],
) -> Result<(), String> {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .create()
        .map_err(|e| format!("a producer for {bootstrap}: {e}"))?;
    producer
        .send(
            BaseRecord::to(topic)
                .partition(partition)
                .key(key)
                .payload(value),
        )
        .map_err(|(e, _)| format!("producing to {topic}/{partition}: {e}"))?;
    producer
        .flush(Duration::from_secs(30))
        .map_err(|e| format!("flushing to {topic}/{partition}: {e}"))
}
