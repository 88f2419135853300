//! Record batches and Produce requests, shared by the transactional writes and the
//! registrations' idempotent producer.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::api::Attempt;
use crate::net::Conn;
use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::GuardedRecord;

/// The highest Produce version this client sends (below transaction version 2).
pub(super) const MAX_PRODUCE: i16 = 9;

/// One record batch (magic v2, uncompressed) of `records` (key, value) by `producer` from
/// `base_sequence`, transactional or not.
pub(crate) fn encode_batch(
    producer: FencingToken,
    transactional: bool,
    base_sequence: i32,
    records: impl Iterator<Item = (Option<Bytes>, Option<Bytes>)>,
) -> Result<Bytes, TransportError> {
    encode_batch_with_headers(
        producer,
        transactional,
        base_sequence,
        records.map(|(k, v)| (k, v, Headers::default())),
    )
}

/// A record's headers as the batch encoder takes them.
pub(super) type Headers = kafka_protocol::indexmap::IndexMap<StrBytes, Option<Bytes>>;

/// The headers of `r`; a name given twice is refused (the encoder keeps one value per name).
pub(super) fn headers_of(r: &GuardedRecord<'_>) -> Result<Headers, TransportError> {
    let mut headers = Headers::with_capacity(r.headers.len());
    for (name, value) in r.headers {
        let value = value.map(Bytes::copy_from_slice);
        if headers
            .insert(StrBytes::from_string((*name).to_owned()), value)
            .is_some()
        {
            return Err(TransportError::config(format!(
                "header '{name}' is given twice in a record to {}/{}; give each name once",
                r.topic, r.partition
            )));
        }
    }
    Ok(headers)
}

/// [`encode_batch`] of records with headers.
pub(crate) fn encode_batch_with_headers(
    producer: FencingToken,
    transactional: bool,
    base_sequence: i32,
    records: impl Iterator<Item = (Option<Bytes>, Option<Bytes>, Headers)>,
) -> Result<Bytes, TransportError> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let batch: Vec<Record> = records
        .enumerate()
        .map(|(i, (key, value, headers))| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp: now_ms,
            key,
            value,
            headers,
        })
        .collect();
    let mut encoded = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut encoded,
        batch.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| TransportError::fatal(format!("encoding a record batch: {e}")))?;
    Ok(encoded.freeze())
}

/// The first timestamp of the record batch `encoded` (its `baseTimestamp`, bytes 27..35 of a
/// magic v2 batch), for messages.
pub(super) fn stamped_at(encoded: &[u8]) -> Option<i64> {
    let bytes: [u8; 8] = encoded.get(27..35)?.try_into().ok()?;
    Some(i64::from_be_bytes(bytes))
}

/// The Produce version to send on `conn` (the highest both sides support, at most
/// `MAX_PRODUCE`, below transaction version 2).
pub(crate) fn produce_version(conn: &Conn) -> Result<i16, Attempt> {
    conn.version_at_most::<ProduceRequest>(MAX_PRODUCE)
        .ok_or_else(|| {
            Attempt::Stop(TransportError::config(format!(
                "the broker at {} supports no Produce version up to v{MAX_PRODUCE}",
                conn.addr()
            )))
        })
}

/// A Produce (`acks=all`) of one batch to `topic`/`partition`.
pub(crate) fn produce_request(
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    timeout_ms: i32,
    batch: Bytes,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// The answer of a Produce for `partition`, if the broker gave one.
pub(crate) fn partition_answer(
    resp: &ProduceResponse,
    partition: i32,
) -> Option<&PartitionProduceResponse> {
    resp.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .find(|p| p.index == partition)
}
