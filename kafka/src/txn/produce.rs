//! The record batches of both producers (the transactional writes and the registrations'
//! idempotent producer), encoded here, stamped with this member's clock, and sent by the
//! Produce of `api/produce.rs`.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::GuardedRecord;

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
