//! Produce (API key 0): one record batch (`acks=all`) to one partition's leader, by either
//! producer of this client: a role's transactional producer ([`TxnProduce`], a guarded
//! write) or the registrations' idempotent producer ([`IdempotentProduce`]). The batch comes
//! encoded (see `txn/produce.rs`); what the partition's answer means differs between the two.

use bytes::Bytes;
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::{txn_error, Attempt, Exchange};
use crate::classify::{self, code};

/// The highest version this client sends (below transaction version 2).
pub(crate) const MAX_VERSION: i16 = 9;

/// A transactional Produce of one batch of role `role` (pair `token`), as part of its open
/// transaction.
pub(crate) struct TxnProduce<'a> {
    pub(crate) role: &'a Role,
    pub(crate) token: FencingToken,
    pub(crate) topic: &'a str,
    pub(crate) partition: i32,
    /// The batch's first sequence (for errors: the batch carries it).
    pub(crate) base_sequence: i32,
    pub(crate) timeout_ms: i32,
    pub(crate) batch: &'a Bytes,
    /// What it is, for errors.
    pub(crate) what: &'a str,
}

/// An idempotent Produce of one batch of registrations by `producer` (no transaction).
pub(crate) struct IdempotentProduce<'a> {
    pub(crate) producer: FencingToken,
    pub(crate) topic: &'a str,
    pub(crate) partition: i32,
    /// The batch's first sequence (for errors: the batch carries it).
    pub(crate) base_sequence: i32,
    pub(crate) timeout_ms: i32,
    pub(crate) batch: &'a Bytes,
    /// What it is, for errors.
    pub(crate) what: &'a str,
}

/// What an idempotent Produce came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Produced {
    /// Written: the base offset.
    Written(i64),
    /// Refused for a reason the sequences explain (a producer id the broker no longer knows, a
    /// sequence it did not expect): the batch was not written; another producer id may write
    /// it.
    Resequence(String),
}

impl Exchange for TxnProduce<'_> {
    type Request = ProduceRequest;
    /// The batch's base offset (where the broker wrote it, also when it answers that it has it
    /// already).
    type Output = i64;
    const NAME: &'static str = "Produce";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> ProduceRequest {
        produce_request(
            Some(self.role.as_str()),
            self.topic,
            self.partition,
            self.timeout_ms,
            self.batch.clone(),
        )
    }

    fn answer(&self, answer: ProduceResponse, _version: i16, at: &str) -> Result<i64, Attempt> {
        let what = self.what;
        let p = partition_answer(answer, self.topic, self.partition, at)?;
        match code::error(p.error_code) {
            // A duplicate: an earlier send of this very batch was written.
            None | Some(code::E::DuplicateSequenceNumber) => Ok(p.base_offset),
            Some(code::E::OutOfOrderSequenceNumber) => Err(Attempt::Stop(
                TransportError::retriable(format!(
                    "{what}: the broker expected another sequence than {} \
                     (OUT_OF_ORDER_SEQUENCE_NUMBER); the transaction is aborted and the \
                     sequence learned again",
                    self.base_sequence
                ))
                .with_kafka_code(code::E::OutOfOrderSequenceNumber.code()),
            )),
            Some(code::E::TopicAuthorizationFailed) => Err(Attempt::Stop(topic_unauthorized(
                "Produce", self.role, "WRITE", self.topic,
            ))),
            // Sent again, the batch carries the same timestamps: it is refused until the
            // clock of this member or the broker moves, so the write ends at once (a lease
            // write that looped here would hold the session past the lease).
            Some(code::E::InvalidTimestamp) => Err(Attempt::Stop(
                TransportError::config(format!(
                    "{what}: {at} refused the records' timestamp (INVALID_TIMESTAMP: {}; this \
                     member's clock read {} ms since the epoch when they were stamped): {}",
                    p.record_errors
                        .iter()
                        .find_map(|r| r.batch_index_error_message.as_ref())
                        .or(p.error_message.as_ref())
                        .map_or("no reason given", |m| m.as_str()),
                    stamped_at(self.batch).unwrap_or(-1),
                    classify::remedy(i32::from(code::E::InvalidTimestamp.code()))
                        .unwrap_or("clock skew")
                ))
                .with_kafka_code(code::E::InvalidTimestamp.code()),
            )),
            Some(code::E::InvalidRecord) => Err(Attempt::Stop(
                TransportError::config(format!(
                    "{what}: {at} refused the records (INVALID_RECORD: {}); a compacted topic \
                     takes only records with a key",
                    p.error_message
                        .as_ref()
                        .map_or("no reason given", |m| m.as_str())
                ))
                .with_kafka_code(code::E::InvalidRecord.code()),
            )),
            Some(e) => Err(txn_error(self.role, self.token, "Produce", at, e.code())),
        }
    }
}

impl Exchange for IdempotentProduce<'_> {
    type Request = ProduceRequest;
    type Output = Produced;
    const NAME: &'static str = "Produce";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> ProduceRequest {
        produce_request(
            None,
            self.topic,
            self.partition,
            self.timeout_ms,
            self.batch.clone(),
        )
    }

    fn answer(
        &self,
        answer: ProduceResponse,
        _version: i16,
        at: &str,
    ) -> Result<Produced, Attempt> {
        let (what, topic) = (self.what, self.topic);
        let p = partition_answer(answer, topic, self.partition, at)?;
        let reason = || {
            p.error_message
                .as_ref()
                .map_or("no reason given".to_owned(), |m| m.to_string())
        };
        match code::error(p.error_code) {
            // An earlier send of this batch was written: the broker names its offset.
            None | Some(code::E::DuplicateSequenceNumber) if p.base_offset >= 0 => {
                Ok(Produced::Written(p.base_offset))
            }
            None | Some(code::E::DuplicateSequenceNumber) => {
                Err(Attempt::Stop(TransportError::retriable(format!(
                    "{what}: {at} took the batch for one it already wrote but named no offset \
                     ({})",
                    code::name(p.error_code)
                ))))
            }
            Some(
                code::E::OutOfOrderSequenceNumber
                | code::E::UnknownProducerId
                | code::E::InvalidProducerEpoch
                | code::E::ProducerFenced,
            ) => Ok(Produced::Resequence(format!(
                "{at} refused producer {} epoch {} at sequence {} ({})",
                self.producer.producer_id,
                self.producer.producer_epoch,
                self.base_sequence,
                code::name(p.error_code)
            ))),
            Some(code::E::TopicAuthorizationFailed) => Err(Attempt::Stop(
                TransportError::unauthorized(format!(
                    "{what}: the principal needs the WRITE ACL on Topic '{topic}' \
                     (TOPIC_AUTHORIZATION_FAILED)"
                ))
                .with_kafka_code(code::E::TopicAuthorizationFailed.code()),
            )),
            Some(c @ (code::E::InvalidRecord | code::E::MessageTooLarge)) => Err(Attempt::Stop(
                TransportError::config(format!(
                    "{what}: {at} refused the records ({}: {})",
                    code::name(c.code()),
                    reason()
                ))
                .with_kafka_code(c.code()),
            )),
            Some(e) => {
                let other = e.code();
                Err(Attempt::from_code(
                    other,
                    format!(
                        "{what} at {at}: error {other} ({}): {}",
                        code::name(other),
                        reason()
                    ),
                ))
            }
        }
    }
}

/// A Produce (`acks=all`) of one batch to `topic`/`partition`, transactional when
/// `transactional_id` is given.
fn produce_request(
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

/// The answer of a Produce for `partition`; an answer from `at` that does not mention it is
/// asked again.
fn partition_answer(
    answer: ProduceResponse,
    topic: &str,
    partition: i32,
    at: &str,
) -> Result<PartitionProduceResponse, Attempt> {
    answer
        .responses
        .into_iter()
        .flat_map(|t| t.partition_responses)
        .find(|p| p.index == partition)
        .ok_or_else(|| {
            Attempt::again(format!(
                "the Produce answer from {at} did not mention {topic}/{partition}"
            ))
        })
}

/// The first timestamp of the record batch `encoded` (its `baseTimestamp`, bytes 27..35 of a
/// magic v2 batch), for messages.
fn stamped_at(encoded: &[u8]) -> Option<i64> {
    let bytes: [u8; 8] = encoded.get(27..35)?.try_into().ok()?;
    Some(i64::from_be_bytes(bytes))
}

/// TOPIC_AUTHORIZATION_FAILED on `topic` in `request` for `role`: the ACL the principal lacks.
pub(crate) fn topic_unauthorized(
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

/// Whether `e` says a batch will never be appended, wherever its sends are: a refusal that
/// retrying cannot change (its records, the ACLs, a fence), or the broker refusing its sequence
/// (OUT_OF_ORDER_SEQUENCE_NUMBER, retriable for the write but definite for the batch).
pub(crate) fn refused_for_good(e: &TransportError) -> bool {
    !e.is_retriable() || e.kafka_code() == Some(code::E::OutOfOrderSequenceNumber.code())
}

#[cfg(test)]
mod tests {
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::produce_response::{
        BatchIndexAndErrorMessage, TopicProduceResponse,
    };

    use super::*;

    #[test]
    fn a_batch_is_refused_for_good_by_a_final_error_or_its_sequence() {
        assert!(refused_for_good(&TransportError::config("no key")));
        assert!(refused_for_good(&TransportError::fenced("newer pair")));
        let sequence = TransportError::retriable("out of order")
            .with_kafka_code(code::E::OutOfOrderSequenceNumber.code());
        assert!(refused_for_good(&sequence));
        let timeout = TransportError::retriable("timed out").with_kafka_code(7);
        assert!(!refused_for_good(&timeout));
    }

    fn role() -> Role {
        Role::new("orders").unwrap()
    }

    /// 35 bytes whose bytes 27..35 hold the timestamp 1234 (a batch's header up to its
    /// `baseTimestamp`).
    fn batch() -> Bytes {
        let mut b = vec![0u8; 27];
        b.extend_from_slice(&1234i64.to_be_bytes());
        Bytes::from(b)
    }

    fn txn<'a>(role: &'a Role, batch: &'a Bytes) -> TxnProduce<'a> {
        TxnProduce {
            role,
            token: FencingToken::new(7, 3),
            topic: "t",
            partition: 2,
            base_sequence: 40,
            timeout_ms: 5_000,
            batch,
            what: "Produce to t/2 for role 'orders'",
        }
    }

    fn idempotent(batch: &Bytes) -> IdempotentProduce<'_> {
        IdempotentProduce {
            producer: FencingToken::new(9, 1),
            topic: "t",
            partition: 2,
            base_sequence: 40,
            timeout_ms: 5_000,
            batch,
            what: "appending 3 record(s) to t/2",
        }
    }

    /// An answer for partition `index`.
    fn answered(index: i32, error: i16, base_offset: i64) -> ProduceResponse {
        answered_with(
            PartitionProduceResponse::default()
                .with_index(index)
                .with_error_code(error)
                .with_base_offset(base_offset),
        )
    }

    fn answered_with(p: PartitionProduceResponse) -> ProduceResponse {
        ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_responses(vec![p])])
    }

    fn stopped<T>(r: Result<T, Attempt>) -> TransportError {
        match r {
            Err(Attempt::Stop(e)) => e,
            _ => panic!("the call must stop"),
        }
    }

    #[test]
    fn both_requests_carry_the_batch_with_acks_all() {
        let (role, batch) = (role(), batch());
        let t = txn(&role, &batch).request(MAX_VERSION);
        assert_eq!(t.transactional_id.as_ref().unwrap().0.as_str(), "orders");
        let i = idempotent(&batch).request(MAX_VERSION);
        assert!(i.transactional_id.is_none());
        for req in [&t, &i] {
            assert_eq!((req.acks, req.timeout_ms), (-1, 5_000));
            assert_eq!(req.topic_data.len(), 1);
            assert_eq!(req.topic_data[0].name.0.as_str(), "t");
            let p = &req.topic_data[0].partition_data;
            assert_eq!(p.len(), 1);
            assert_eq!(p[0].index, 2);
            assert_eq!(p[0].records.as_ref(), Some(&batch));
        }
    }

    #[test]
    fn an_answer_without_the_partition_is_asked_again() {
        let (role, batch) = (role(), batch());
        match txn(&role, &batch).answer(answered(3, 0, 5), 9, "b:9092") {
            Err(Attempt::Again { why, .. }) => {
                assert!(why.contains("did not mention t/2"), "{why}")
            }
            _ => panic!("an answer without the partition must be asked again"),
        }
        assert!(matches!(
            idempotent(&batch).answer(answered(3, 0, 5), 9, "b:9092"),
            Err(Attempt::Again { .. })
        ));
    }

    #[test]
    fn every_answer_to_a_transactional_produce_is_read() {
        let (role, batch) = (role(), batch());
        let x = txn(&role, &batch);
        assert_eq!(x.answer(answered(2, 0, 100), 9, "b:9092").ok(), Some(100));
        // DUPLICATE_SEQUENCE_NUMBER: written by an earlier send.
        assert_eq!(x.answer(answered(2, 46, 100), 9, "b:9092").ok(), Some(100));
        // OUT_OF_ORDER_SEQUENCE_NUMBER: retriable for the write, with its code.
        let e = stopped(x.answer(answered(2, 45, -1), 9, "b:9092"));
        assert!(e.is_retriable(), "{e}");
        assert_eq!(e.kafka_code(), Some(45));
        assert!(e.to_string().contains("another sequence than 40"), "{e}");
        // TOPIC_AUTHORIZATION_FAILED names the topic.
        let e = stopped(x.answer(answered(2, 29, -1), 9, "b:9092"));
        assert_eq!(e.kind(), ErrorKind::Unauthorized);
        assert!(
            e.to_string().contains(
                "Produce for role 'orders': the principal needs the WRITE ACL on Topic 't'"
            ),
            "{e}"
        );
        // INVALID_TIMESTAMP: the batch's reason and its stamp.
        let refused = answered_with(
            PartitionProduceResponse::default()
                .with_index(2)
                .with_error_code(32)
                .with_record_errors(vec![BatchIndexAndErrorMessage::default()
                    .with_batch_index_error_message(Some(StrBytes::from_static_str("too old")))]),
        );
        let e = stopped(x.answer(refused, 9, "b:9092"));
        assert_eq!((e.kind(), e.kafka_code()), (ErrorKind::Config, Some(32)));
        assert!(e.to_string().contains("INVALID_TIMESTAMP: too old"), "{e}");
        assert!(e.to_string().contains("read 1234 ms"), "{e}");
        // INVALID_RECORD: the broker's reason.
        let refused = answered_with(
            PartitionProduceResponse::default()
                .with_index(2)
                .with_error_code(87)
                .with_error_message(Some(StrBytes::from_static_str("no key"))),
        );
        let e = stopped(x.answer(refused, 9, "b:9092"));
        assert_eq!((e.kind(), e.kafka_code()), (ErrorKind::Config, Some(87)));
        assert!(e.to_string().contains("INVALID_RECORD: no key"), "{e}");
        // PRODUCER_FENCED: the role's pair is fenced.
        assert!(stopped(x.answer(answered(2, 90, -1), 9, "b:9092")).is_fenced());
        // NOT_LEADER_OR_FOLLOWER: the leader is looked up again.
        assert!(matches!(
            x.answer(answered(2, 6, -1), 9, "b:9092"),
            Err(Attempt::Again { relookup: true, .. })
        ));
    }

    #[test]
    fn every_answer_to_an_idempotent_produce_is_read() {
        let batch = batch();
        let x = idempotent(&batch);
        assert_eq!(
            x.answer(answered(2, 0, 100), 9, "b:9092").ok(),
            Some(Produced::Written(100))
        );
        assert_eq!(
            x.answer(answered(2, 46, 100), 9, "b:9092").ok(),
            Some(Produced::Written(100))
        );
        // A duplicate without an offset.
        let e = stopped(x.answer(answered(2, 46, -1), 9, "b:9092"));
        assert!(e.is_retriable(), "{e}");
        assert!(e.to_string().contains("named no offset"), "{e}");
        // A sequence error: another producer id may write the batch.
        for code in [45, 59, 47, 90] {
            match x.answer(answered(2, code, -1), 9, "b:9092").ok() {
                Some(Produced::Resequence(why)) => {
                    assert!(why.contains("producer 9 epoch 1 at sequence 40"), "{why}")
                }
                _ => panic!("error {code} must ask for another producer id"),
            }
        }
        let e = stopped(x.answer(answered(2, 29, -1), 9, "b:9092"));
        assert_eq!(
            (e.kind(), e.kafka_code()),
            (ErrorKind::Unauthorized, Some(29))
        );
        assert!(e.to_string().contains("WRITE ACL on Topic 't'"), "{e}");
        for code in [87, 10] {
            let e = stopped(x.answer(answered(2, code, -1), 9, "b:9092"));
            assert_eq!((e.kind(), e.kafka_code()), (ErrorKind::Config, Some(code)));
            assert!(e.to_string().contains("refused the records"), "{e}");
        }
        // NOT_LEADER_OR_FOLLOWER: the leader is looked up again.
        match x.answer(answered(2, 6, -1), 9, "b:9092") {
            Err(Attempt::Again { relookup, why, .. }) => {
                assert!(relookup);
                assert!(why.contains("at b:9092: error 6"), "{why}");
            }
            _ => panic!("NOT_LEADER_OR_FOLLOWER must be asked again"),
        }
    }
}
