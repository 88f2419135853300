//! The plain idempotent producer that appends registration records. A candidate holds no
//! epoch, and every send of a transactional producer is part of a transaction, so
//! registrations need a producer of their own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use super::classify;
use super::config::{millis, KafkaConfig};
use super::context::{lock, ClientCtx, DeliverySlot};
use crate::error::{ErrorKind, TransportError};

/// The registration producer, created on first use and replaced after a fatal error.
#[derive(Default)]
pub(crate) struct Appender {
    producer: Mutex<Option<Arc<ThreadedProducer<ClientCtx>>>>,
}

impl Appender {
    fn producer(
        &self,
        config: &KafkaConfig,
    ) -> Result<Arc<ThreadedProducer<ClientCtx>>, TransportError> {
        let mut guard = lock(&self.producer);
        if let Some(p) = guard.as_ref() {
            if p.client().fatal_error().is_none() {
                return Ok(Arc::clone(p));
            }
        }
        let timeout = millis(config.operation_timeout()).to_string();
        let mut cc = config.client_config(&[("linger.ms", "0")]);
        cc.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.timeout.ms", &timeout);
        let p: ThreadedProducer<ClientCtx> =
            cc.create_with_context(ClientCtx::default()).map_err(|e| {
                classify::from_kafka(
                    "creating the registration producer",
                    &e,
                    config.bootstrap_servers(),
                )
            })?;
        let p = Arc::new(p);
        *guard = Some(Arc::clone(&p));
        Ok(p)
    }

    /// Appends one record to `topic`/`partition` and returns its offset.
    pub fn append(
        &self,
        config: &KafkaConfig,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<i64, TransportError> {
        let topic = config.topic();
        let bootstrap = config.bootstrap_servers();
        let what = format!("appending a record to {topic}/{partition}");
        let producer = self.producer(config)?;
        let slot = Arc::new(DeliverySlot::default());
        let mut record: BaseRecord<'_, [u8], [u8], Arc<DeliverySlot>> =
            BaseRecord::with_opaque_to(topic, Arc::clone(&slot))
                .partition(partition)
                .key(key);
        if let Some(v) = value {
            record = record.payload(v);
        }
        if let Err((e, _)) = producer.send(record) {
            return Err(classify::from_kafka(&what, &e, bootstrap));
        }
        // message.timeout.ms bounds the delivery; the margin covers the report's way back.
        let wait = config.operation_timeout() + Duration::from_secs(5);
        let outcome = slot.wait(wait);
        match outcome {
            Some(Ok(offset)) => Ok(offset),
            Some(Err(e)) => {
                let mut err = classify::from_kafka(&what, &e, bootstrap);
                // The broker refused the producer id (its fatal error says why) or the write.
                let refusal = producer
                    .client()
                    .fatal_error()
                    .filter(|(code, _)| classify::kind_of(*code) == ErrorKind::Unauthorized)
                    .map(|(code, reason)| (code, format!("{e}: {reason}")))
                    .or_else(|| {
                        e.rdkafka_error_code()
                            .filter(|code| classify::kind_of(*code) == ErrorKind::Unauthorized)
                            .map(|code| (code, e.to_string()))
                    });
                if let Some((code, detail)) = refusal {
                    err = classify::registration_unauthorized(&what, code, &detail, topic)
                        .with_source(e.clone());
                }
                if classify::is_unreachable(
                    e.rdkafka_error_code()
                        .unwrap_or(rdkafka::error::RDKafkaErrorCode::Unknown),
                ) {
                    err = TransportError::retriable(format!(
                        "{what}: not delivered to the Kafka cluster at {bootstrap} within {:?}: {e}{}",
                        config.operation_timeout(),
                        producer
                            .context()
                            .last_error()
                            .map(|l| format!(" (last client error: {l})"))
                            .unwrap_or_default()
                    ))
                    .with_source(e);
                }
                if producer.client().fatal_error().is_some() {
                    // The idempotent producer is unusable; the next append makes a new one, so
                    // the call can be retried (a registration appended twice only moves the
                    // member to the later offset).
                    *lock(&self.producer) = None;
                    if err.kind() == ErrorKind::Fatal {
                        err = TransportError::retriable(err.message().to_owned());
                    }
                }
                Err(err)
            }
            None => Err(TransportError::retriable(format!(
                "{what}: no delivery report within {wait:?} from the Kafka cluster at {bootstrap}"
            ))),
        }
    }
}
