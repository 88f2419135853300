//! DescribeProducers (API key 61, Kafka 2.8 or newer): the producers a partition's leader
//! knows, read for the last sequence it has of one pair.

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::produce::topic_unauthorized;
use super::{Attempt, Exchange};
use crate::classify::code;

/// The only version there is.
pub(crate) const MAX_VERSION: i16 = 0;

/// The last sequence `topic`/`partition` has of pair `token` (role `role`'s).
pub(crate) struct DescribeProducers<'a> {
    pub(crate) role: &'a Role,
    pub(crate) token: FencingToken,
    pub(crate) topic: &'a str,
    pub(crate) partition: i32,
    /// What it is, for errors.
    pub(crate) what: &'a str,
}

impl Exchange for DescribeProducers<'_> {
    type Request = DescribeProducersRequest;
    /// The pair's last sequence, if the partition has one.
    type Output = Option<i32>;
    const NAME: &'static str = "DescribeProducers";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> DescribeProducersRequest {
        DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
            .with_name(TopicName(StrBytes::from_string(self.topic.to_owned())))
            .with_partition_indexes(vec![self.partition])])
    }

    fn answer(
        &self,
        answer: DescribeProducersResponse,
        _version: i16,
        _at: &str,
    ) -> Result<Option<i32>, Attempt> {
        let what = self.what;
        let Some(p) = answer
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == self.partition)
        else {
            return Err(Attempt::again(format!(
                "{what}: no answer for the partition"
            )));
        };
        if p.error_code == code::E::TopicAuthorizationFailed.code() {
            return Err(Attempt::Stop(topic_unauthorized(
                "DescribeProducers (learning the partition's sequence after a produce that \
                 failed or lost its answer)",
                self.role,
                "READ",
                self.topic,
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
                a.producer_id.0 == self.token.producer_id
                    && a.producer_epoch == i32::from(self.token.producer_epoch)
            })
            .map(|a| a.last_sequence))
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} does not support DescribeProducers (Kafka 2.8 or newer)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::describe_producers_response::{
        PartitionResponse, ProducerState, TopicResponse,
    };
    use kafka_protocol::messages::ProducerId;

    use super::*;

    fn role() -> Role {
        Role::new("orders").unwrap()
    }

    fn asking(role: &Role) -> DescribeProducers<'_> {
        DescribeProducers {
            role,
            token: FencingToken::new(7, 3),
            topic: "t",
            partition: 4,
            what: "DescribeProducers of t/4",
        }
    }

    /// An answer for partition `index` with error `error` and producers (id, epoch, last
    /// sequence).
    fn answered(
        index: i32,
        error: i16,
        producers: &[(i64, i32, i32)],
    ) -> DescribeProducersResponse {
        let producers = producers
            .iter()
            .map(|(id, epoch, last)| {
                ProducerState::default()
                    .with_producer_id(ProducerId(*id))
                    .with_producer_epoch(*epoch)
                    .with_last_sequence(*last)
            })
            .collect();
        DescribeProducersResponse::default().with_topics(vec![TopicResponse::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![PartitionResponse::default()
                .with_partition_index(index)
                .with_error_code(error)
                .with_active_producers(producers)])])
    }

    #[test]
    fn the_request_names_the_one_partition() {
        let role = role();
        let req = asking(&role).request(MAX_VERSION);
        assert_eq!(req.topics.len(), 1);
        assert_eq!(req.topics[0].name.0.as_str(), "t");
        assert_eq!(req.topics[0].partition_indexes, vec![4]);
    }

    #[test]
    fn every_answer_is_read() {
        let role = role();
        let x = asking(&role);
        // The pair's own entry, not another epoch's or another producer's.
        let known = answered(4, 0, &[(7, 2, 90), (8, 3, 80), (7, 3, 41)]);
        assert_eq!(x.answer(known, 0, "b:9092").ok(), Some(Some(41)));
        let unknown = answered(4, 0, &[(8, 3, 80)]);
        assert_eq!(x.answer(unknown, 0, "b:9092").ok(), Some(None));
        // Another partition's answer: asked again.
        match x.answer(answered(5, 0, &[]), 0, "b:9092") {
            Err(Attempt::Again { why, .. }) => assert!(why.contains("no answer"), "{why}"),
            _ => panic!("an answer without the partition must be asked again"),
        }
        // TOPIC_AUTHORIZATION_FAILED names the READ ACL.
        match x.answer(answered(4, 29, &[]), 0, "b:9092") {
            Err(Attempt::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unauthorized);
                assert!(e.to_string().contains("READ ACL on Topic 't'"), "{e}");
            }
            _ => panic!("TOPIC_AUTHORIZATION_FAILED must stop the call"),
        }
        // NOT_LEADER_OR_FOLLOWER: the leader is looked up again.
        assert!(matches!(
            x.answer(answered(4, 6, &[]), 0, "b:9092"),
            Err(Attempt::Again { relookup: true, .. })
        ));
        match x.unsupported("b:9092") {
            Attempt::Stop(e) => assert!(e.to_string().contains("Kafka 2.8"), "{e}"),
            _ => panic!("a broker without DescribeProducers must stop the call"),
        }
    }
}
