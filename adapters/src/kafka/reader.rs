//! read_committed consumers, one per partition in use, that tail their partition.
//!
//! A consumer stays assigned where its last read stopped, so a member that polls its role's
//! partition pays for new records only. A read from another offset re-assigns (seeks).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::classify;
use super::config::KafkaConfig;
use super::context::{lock, ReaderCtx};
use crate::error::{ErrorKind, TransportError};
use crate::transport::{ReadBatch, Record};

/// How long one `poll` waits while catching up to the last stable offset.
const CATCH_UP_POLL: Duration = Duration::from_millis(100);

static READER_SEQ: AtomicU64 = AtomicU64::new(0);

struct PartitionReader {
    consumer: BaseConsumer<ReaderCtx>,
    /// The offset the consumer delivers next.
    next: i64,
}

/// The transport's readers, by partition.
#[derive(Default)]
pub(crate) struct Readers {
    by_partition: Mutex<HashMap<i32, Arc<Mutex<Option<PartitionReader>>>>>,
}

impl Readers {
    /// Reads committed records of `partition` from `from_offset` to the last stable offset.
    pub fn read(
        &self,
        config: &KafkaConfig,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch, TransportError> {
        if partition < 0 || partition >= config.partitions() {
            return Err(TransportError::config(format!(
                "partition {partition} is outside the {} partitions of {}",
                config.partitions(),
                config.topic()
            )));
        }
        let from = from_offset.max(0);
        let slot = Arc::clone(lock(&self.by_partition).entry(partition).or_default());
        let mut guard = lock(&slot);
        if guard.is_none() {
            *guard = Some(PartitionReader::new(config, partition, from)?);
        }
        let Some(reader) = guard.as_mut() else {
            return Err(TransportError::fatal("reader vanished"));
        };
        let result = reader.read(config, partition, from, max_wait);
        if let Err(e) = &result {
            if e.kind() == ErrorKind::Fatal {
                *guard = None;
            }
        }
        result
    }
}

impl PartitionReader {
    fn new(config: &KafkaConfig, partition: i32, from: i64) -> Result<Self, TransportError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        // assign() needs a group id; the reader never joins the group nor commits to it.
        let group = format!(
            "kafka-coordination-reader-{}-{nanos:x}-{}",
            std::process::id(),
            READER_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut cc = config.client_config(&[("fetch.wait.max.ms", "100")]);
        cc.set("group.id", &group)
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false");
        let consumer: BaseConsumer<ReaderCtx> =
            cc.create_with_context(ReaderCtx::default()).map_err(|e| {
                classify::from_kafka("creating a reader", &e, config.bootstrap_servers())
            })?;
        let mut reader = PartitionReader {
            consumer,
            next: from,
        };
        reader.assign(config, partition, from)?;
        Ok(reader)
    }

    fn assign(
        &mut self,
        config: &KafkaConfig,
        partition: i32,
        from: i64,
    ) -> Result<(), TransportError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(config.topic(), partition, Offset::Offset(from))
            .and_then(|()| self.consumer.assign(&tpl))
            .map_err(|e| {
                classify::from_kafka(
                    &format!("assigning {}/{partition} at offset {from}", config.topic()),
                    &e,
                    config.bootstrap_servers(),
                )
            })?;
        self.next = from;
        Ok(())
    }

    /// The last stable offset (for a read_committed client, ListOffsets(latest) answers the
    /// LSO, not the high watermark).
    fn last_stable_offset(
        &self,
        config: &KafkaConfig,
        partition: i32,
    ) -> Result<i64, TransportError> {
        self.consumer
            .fetch_watermarks(config.topic(), partition, config.request_timeout())
            .map(|(_, high)| high)
            .map_err(|e| self.error(config, partition, "querying the last stable offset of", &e))
    }

    fn error(
        &self,
        config: &KafkaConfig,
        partition: i32,
        doing: &str,
        e: &KafkaError,
    ) -> TransportError {
        let topic = config.topic();
        let bootstrap = config.bootstrap_servers();
        let what = format!("{doing} {topic}/{partition}");
        match e.rdkafka_error_code() {
            Some(code) if classify::is_unreachable(code) => TransportError::retriable(format!(
                "{what}: no answer from the Kafka cluster at {bootstrap} within {:?}: {e}{}",
                config.request_timeout(),
                self.consumer
                    .context()
                    .last_error()
                    .map(|l| format!(" (last client error: {l})"))
                    .unwrap_or_default()
            ))
            .with_source(e.clone()),
            Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
                TransportError::config(format!(
                    "{what}: the topic or partition does not exist: create {topic} with {} \
                     partitions and cleanup.policy=compact",
                    config.partitions()
                ))
                .with_source(e.clone())
            }
            Some(RDKafkaErrorCode::TopicAuthorizationFailed) => {
                TransportError::unauthorized(format!(
                "{what}: {e} (the principal needs the READ and DESCRIBE ACLs on topic '{topic}')"
            ))
                .with_source(e.clone())
            }
            _ => classify::from_kafka(&what, e, bootstrap),
        }
    }

    /// Moves `next` past records the consumer skipped without delivering them (transaction
    /// markers and aborted records).
    fn catch_up_position(&mut self, config: &KafkaConfig, partition: i32) {
        if let Ok(tpl) = self.consumer.position() {
            if let Some(elem) = tpl.find_partition(config.topic(), partition) {
                if let Offset::Offset(pos) = elem.offset() {
                    if pos > self.next {
                        self.next = pos;
                    }
                }
            }
        }
    }

    /// One poll; `Ok(Some(record))` for a record at or past `next`.
    fn poll_once(
        &mut self,
        config: &KafkaConfig,
        partition: i32,
        timeout: Duration,
    ) -> Result<Option<Record>, TransportError> {
        match self.consumer.poll(timeout) {
            None => {
                self.catch_up_position(config, partition);
                Ok(None)
            }
            Some(Ok(m)) => {
                if m.partition() != partition || m.offset() < self.next {
                    return Ok(None);
                }
                self.next = m.offset() + 1;
                Ok(Some(Record {
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                    value: m.payload().map(<[u8]>::to_vec),
                }))
            }
            Some(Err(e)) => {
                let fatal = matches!(e, KafkaError::MessageConsumptionFatal(_));
                let code = e.rdkafka_error_code();
                let kind = code.map(classify::kind_of);
                if fatal {
                    Err(TransportError::fatal(format!(
                        "reading {}/{partition}: the consumer hit a fatal error: {e}",
                        config.topic()
                    ))
                    .with_source(e))
                } else if matches!(kind, Some(ErrorKind::Config | ErrorKind::Unauthorized)) {
                    Err(self.error(config, partition, "reading", &e))
                } else {
                    // Transient (a broker connection dropped, a leader moved): librdkafka
                    // retries by itself; the read goes on until its deadline.
                    Ok(None)
                }
            }
        }
    }

    fn read(
        &mut self,
        config: &KafkaConfig,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch, TransportError> {
        if self.next != from {
            self.assign(config, partition, from)?;
        }
        let start = Instant::now();
        let wait_until = start + max_wait;
        let mut read_until = start + config.request_timeout();
        let mut lso = self.last_stable_offset(config, partition)?;
        let mut records = Vec::new();
        loop {
            let now = Instant::now();
            if self.next >= lso {
                if !records.is_empty() || now >= wait_until {
                    break;
                }
                // Long poll: nothing new is readable yet; wait for the first record.
                let before = self.next;
                if let Some(record) = self.poll_once(config, partition, wait_until - now)? {
                    records.push(record);
                    // More may have become readable with it: read on to the new LSO.
                    lso = self.last_stable_offset(config, partition)?.max(self.next);
                    read_until = Instant::now() + config.request_timeout();
                } else if self.next > before {
                    lso = lso.max(self.next);
                }
            } else {
                if now >= read_until {
                    // Could not reach the LSO in time; what was read stands, and the next read
                    // continues from `next`.
                    break;
                }
                let timeout = (read_until - now).min(CATCH_UP_POLL);
                if let Some(record) = self.poll_once(config, partition, timeout)? {
                    records.push(record);
                }
            }
        }
        Ok(ReadBatch {
            records,
            end_offset: self.next.max(from),
        })
    }
}
