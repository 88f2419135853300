//! AddPartitionsToTxn (API key 24): the partitions a role's transaction is about to write join
//! it at the role's transaction coordinator.

use std::collections::{BTreeMap, BTreeSet};

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::produce::topic_unauthorized;
use super::{txn_error, Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (below transaction version 2, in the shape of v3 and
/// below).
pub(crate) const MAX_VERSION: i16 = 3;

/// The partitions (topic, partition) that join the open transaction of `role`, pair `token`.
pub(crate) struct AddPartitionsToTxn<'a> {
    pub(crate) role: &'a Role,
    pub(crate) token: FencingToken,
    pub(crate) partitions: &'a BTreeSet<(String, i32)>,
}

impl Exchange for AddPartitionsToTxn<'_> {
    type Request = AddPartitionsToTxnRequest;
    type Output = ();
    const NAME: &'static str = "AddPartitionsToTxn";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> AddPartitionsToTxnRequest {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in self.partitions {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        let topics: Vec<AddPartitionsToTxnTopic> = by_topic
            .into_iter()
            .map(|(t, ps)| {
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                    .with_partitions(ps)
            })
            .collect();
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(
                self.role.as_str().to_owned(),
            )))
            .with_v3_and_below_producer_id(ProducerId(self.token.producer_id))
            .with_v3_and_below_producer_epoch(self.token.producer_epoch)
            .with_v3_and_below_topics(topics)
    }

    fn answer(
        &self,
        answer: AddPartitionsToTxnResponse,
        _version: i16,
        at: &str,
    ) -> Result<(), Attempt> {
        // Every partition answers the same code, or OPERATION_NOT_ATTEMPTED (55) beside the
        // one that failed.
        let worst = answer
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
                    self.role,
                    "WRITE",
                    topic,
                )))
            }
            Some((_, err)) => Err(txn_error(
                self.role,
                self.token,
                "AddPartitionsToTxn",
                at,
                err,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };

    use super::*;

    fn role() -> Role {
        Role::new("orders").unwrap()
    }

    fn partitions() -> BTreeSet<(String, i32)> {
        [("a", 2), ("b", 0), ("a", 0)]
            .into_iter()
            .map(|(t, p)| (t.to_owned(), p))
            .collect()
    }

    /// An answer with `codes` as (topic, partition, error code).
    fn answered(codes: &[(&str, i32, i16)]) -> AddPartitionsToTxnResponse {
        let topics = codes
            .iter()
            .map(|(t, p, c)| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(StrBytes::from_string((*t).to_owned())))
                    .with_results_by_partition(vec![AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(*c)])
            })
            .collect();
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topics)
    }

    #[test]
    fn the_request_names_the_role_its_pair_and_the_partitions_by_topic() {
        let (role, partitions) = (role(), partitions());
        let req = AddPartitionsToTxn {
            role: &role,
            token: FencingToken::new(7, 3),
            partitions: &partitions,
        }
        .request(MAX_VERSION);
        assert_eq!(req.v3_and_below_transactional_id.0.as_str(), "orders");
        assert_eq!(
            (
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch
            ),
            (7, 3)
        );
        let topics: Vec<(&str, &[i32])> = req
            .v3_and_below_topics
            .iter()
            .map(|t| (t.name.0.as_str(), t.partitions.as_slice()))
            .collect();
        assert_eq!(topics, vec![("a", &[0, 2][..]), ("b", &[0][..])]);
    }

    #[test]
    fn every_answer_is_read() {
        let (role, partitions) = (role(), partitions());
        let x = AddPartitionsToTxn {
            role: &role,
            token: FencingToken::new(7, 3),
            partitions: &partitions,
        };
        assert!(x
            .answer(answered(&[("a", 0, 0), ("b", 0, 0)]), 3, "b:9092")
            .is_ok());
        // TOPIC_AUTHORIZATION_FAILED names the topic refused, not the one not attempted.
        match x.answer(answered(&[("a", 0, 55), ("b", 0, 29)]), 3, "b:9092") {
            Err(Attempt::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unauthorized);
                assert!(e.to_string().contains("WRITE ACL on Topic 'b'"), "{e}");
            }
            _ => panic!("TOPIC_AUTHORIZATION_FAILED must stop the call"),
        }
        // PRODUCER_FENCED: the role's pair was fenced.
        match x.answer(answered(&[("a", 0, 90)]), 3, "b:9092") {
            Err(Attempt::Stop(e)) => {
                assert!(e.is_fenced(), "{e}");
                assert!(e
                    .to_string()
                    .contains("AddPartitionsToTxn of role 'orders'"));
            }
            _ => panic!("PRODUCER_FENCED must stop the call"),
        }
        // CONCURRENT_TRANSACTIONS: asked again.
        assert!(matches!(
            x.answer(answered(&[("a", 0, 51)]), 3, "b:9092"),
            Err(Attempt::Again { .. })
        ));
    }
}
