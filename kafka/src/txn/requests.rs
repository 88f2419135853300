//! The transactional requests of a session, one attempt each on a connection: InitProducerId,
//! AddPartitionsToTxn, a transactional Produce, DescribeProducers and EndTxn, and what their
//! error codes mean for the role.

use std::time::Instant;

use bytes::Bytes;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, DescribeProducersRequest, EndTxnRequest, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::produce::{partition_answer, produce_request, produce_version};
use crate::api::{txn_error, Attempt};
use crate::classify::code;
use crate::net::Conn;
use kafka_coordination_transport::error::TransportError;

/// The highest request versions this client sends (all below transaction version 2).
pub(super) const MAX_ADD_PARTITIONS: i16 = 3;
pub(super) const MAX_END_TXN: i16 = 3;

/// One AddPartitionsToTxn of `topics` for `role` (pair `token`) on `conn`, a connection to
/// its coordinator.
pub(super) fn add_partitions_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    topics: Vec<AddPartitionsToTxnTopic>,
    deadline: Instant,
) -> Result<(), Attempt> {
    let Some(version) = conn.version_at_most::<AddPartitionsToTxnRequest>(MAX_ADD_PARTITIONS)
    else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} supports no AddPartitionsToTxn version up to v{MAX_ADD_PARTITIONS}",
            conn.addr()
        ))));
    };
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(
            role.as_str().to_owned(),
        )))
        .with_v3_and_below_producer_id(ProducerId(token.producer_id))
        .with_v3_and_below_producer_epoch(token.producer_epoch)
        .with_v3_and_below_topics(topics);
    let resp = conn.call(&req, version, deadline)?;
    let addr = conn.addr().to_owned();
    // Every partition answers the same code, or OPERATION_NOT_ATTEMPTED (55) beside the one
    // that failed.
    let worst = resp
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(move |p| (t.name.0.as_str(), p.partition_error_code))
        })
        .find(|(_, c)| *c != code::NONE && *c != code::E::OperationNotAttempted.code());
    match worst {
        None => Ok(()),
        Some((topic, c)) if code::error(c) == Some(code::E::TopicAuthorizationFailed) => {
            Err(Attempt::Stop(topic_unauthorized(
                "AddPartitionsToTxn",
                role,
                "WRITE",
                topic,
            )))
        }
        Some((_, err)) => Err(txn_error(role, token, "AddPartitionsToTxn", &addr, err)),
    }
}

/// A transactional Produce of one encoded batch, as sent (and sent again) to the partition's
/// leader.
pub(super) struct TxnProduce {
    pub(super) role: Role,
    pub(super) token: FencingToken,
    pub(super) topic: String,
    pub(super) partition: i32,
    pub(super) base_sequence: i32,
    pub(super) timeout_ms: i32,
    pub(super) encoded: Bytes,
    /// What it is, for errors.
    pub(super) what: String,
}

impl TxnProduce {
    /// Sends it on `conn`, a connection to the partition's leader; returns the base offset.
    pub(super) fn on(self, conn: &mut Conn, deadline: Instant) -> Result<i64, Attempt> {
        let TxnProduce {
            role,
            token,
            topic,
            partition,
            base_sequence,
            timeout_ms,
            encoded,
            what,
        } = self;
        let version = produce_version(conn)?;
        let req = produce_request(
            Some(role.as_str()),
            &topic,
            partition,
            timeout_ms,
            encoded.clone(),
        );
        let resp = conn.call(&req, version, deadline)?;
        let addr = conn.addr().to_owned();
        let Some(p) = partition_answer(&resp, partition) else {
            return Err(Attempt::again(format!(
                "the Produce answer from {addr} did not mention {topic}/{partition}"
            )));
        };
        match code::error(p.error_code) {
            // A duplicate: an earlier send of this very batch was written.
            None | Some(code::E::DuplicateSequenceNumber) => Ok(p.base_offset),
            Some(code::E::OutOfOrderSequenceNumber) => Err(Attempt::Stop(
                TransportError::retriable(format!(
                    "{what}: the broker expected another sequence than {base_sequence} \
                     (OUT_OF_ORDER_SEQUENCE_NUMBER); the transaction is aborted and the \
                     sequence learned again"
                ))
                .with_kafka_code(code::E::OutOfOrderSequenceNumber.code()),
            )),
            Some(code::E::TopicAuthorizationFailed) => Err(Attempt::Stop(topic_unauthorized(
                "Produce", &role, "WRITE", &topic,
            ))),
            // Sent again, the batch carries the same timestamps: it is refused until the
            // clock of this member or the broker moves, so the write ends at once (a lease
            // write that looped here would hold the session past the lease).
            Some(code::E::InvalidTimestamp) => Err(Attempt::Stop(
                TransportError::config(format!(
                    "{what}: {addr} refused the records' timestamp (INVALID_TIMESTAMP: {}; this \
                     member's clock read {} ms since the epoch when they were stamped): {}",
                    p.record_errors
                        .iter()
                        .find_map(|r| r.batch_index_error_message.as_ref())
                        .or(p.error_message.as_ref())
                        .map_or("no reason given", |m| m.as_str()),
                    super::produce::stamped_at(&encoded).unwrap_or(-1),
                    crate::classify::remedy(i32::from(code::E::InvalidTimestamp.code()))
                        .unwrap_or("clock skew")
                ))
                .with_kafka_code(code::E::InvalidTimestamp.code()),
            )),
            Some(code::E::InvalidRecord) => Err(Attempt::Stop(
                TransportError::config(format!(
                    "{what}: {addr} refused the records (INVALID_RECORD: {}); a compacted topic \
                     takes only records with a key",
                    p.error_message
                        .as_ref()
                        .map_or("no reason given", |m| m.as_str())
                ))
                .with_kafka_code(code::E::InvalidRecord.code()),
            )),
            Some(e) => {
                let err = e.code();
                Err(txn_error(&role, token, "Produce", &addr, err))
            }
        }
    }
}

/// One DescribeProducers of `topic`/`partition` on `conn`, a connection to its leader: the
/// last sequence the partition has of pair `token`, if any.
pub(super) fn last_sequence_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    topic: &str,
    partition: i32,
    what: &str,
    deadline: Instant,
) -> Result<Option<i32>, Attempt> {
    if conn.version::<DescribeProducersRequest>().is_none() {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} does not support DescribeProducers (Kafka 2.8 or newer)",
            conn.addr()
        ))));
    }
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
        .with_partition_indexes(vec![partition])]);
    let resp = conn.call(&req, 0, deadline)?;
    let Some(p) = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
    else {
        return Err(Attempt::again(format!(
            "{what}: no answer for the partition"
        )));
    };
    if p.error_code == code::E::TopicAuthorizationFailed.code() {
        return Err(Attempt::Stop(topic_unauthorized(
            "DescribeProducers (learning the partition's sequence after a produce that failed \
             or lost its answer)",
            role,
            "READ",
            topic,
        )));
    }
    if p.error_code != code::NONE {
        return Err(Attempt::from_code(
            p.error_code,
            format!(
                "{what}: error {} ({})",
                p.error_code,
                code::name(p.error_code)
            ),
        ));
    }
    Ok(p.active_producers
        .iter()
        .find(|a| {
            a.producer_id.0 == token.producer_id
                && a.producer_epoch == i32::from(token.producer_epoch)
        })
        .map(|a| a.last_sequence))
}

/// One EndTxn (`commit` or abort) for `role` (pair `token`) on `conn`, a connection to its
/// coordinator: `true` once ended as asked, `false` when nothing is open at the coordinator.
pub(super) fn end_txn_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    commit: bool,
    deadline: Instant,
) -> Result<bool, Attempt> {
    let verb = if commit { "commit" } else { "abort" };
    let Some(version) = conn.version_at_most::<EndTxnRequest>(MAX_END_TXN) else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} supports no EndTxn version up to v{MAX_END_TXN}",
            conn.addr()
        ))));
    };
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            role.as_str().to_owned(),
        )))
        .with_producer_id(ProducerId(token.producer_id))
        .with_producer_epoch(token.producer_epoch)
        .with_committed(commit);
    let resp = conn.call(&req, version, deadline)?;
    let addr = conn.addr().to_owned();
    match code::error(resp.error_code) {
        None => Ok(true),
        Some(code::E::InvalidTxnState) => Ok(false),
        Some(e) => {
            let err = e.code();
            Err(txn_error(
                role,
                token,
                &format!("EndTxn ({verb})"),
                &addr,
                err,
            ))
        }
    }
}

/// TOPIC_AUTHORIZATION_FAILED on `topic` in `request` for `role`: the ACL the principal lacks.
pub(super) fn topic_unauthorized(
    request: &str,
    role: &Role,
    operation: &str,
    topic: &str,
) -> TransportError {
    TransportError::unauthorized(format!(
        "{request} for role '{role}': the principal needs the {operation} ACL on Topic '{topic}' \
         (TOPIC_AUTHORIZATION_FAILED)"
    ))
}
