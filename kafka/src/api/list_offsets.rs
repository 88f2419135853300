//! ListOffsets (API key 2): the log start offset of one partition (timestamp EARLIEST), where a
//! read whose offset fell outside the log starts again.

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName};

use super::fetch::READ_COMMITTED;
use super::{Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (v10 adds a timeout this reader does not need).
pub(crate) const MAX_VERSION: i16 = 7;
/// The timestamp that asks for the log start offset.
const EARLIEST: i64 = -2;

/// The log start offset of `partition` of `topic`.
pub(crate) struct ListOffsets<'a> {
    pub(crate) topic: &'a TopicName,
    pub(crate) partition: i32,
}

impl Exchange for ListOffsets<'_> {
    type Request = ListOffsetsRequest;
    type Output = i64;
    const NAME: &'static str = "ListOffsets";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> ListOffsetsRequest {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(READ_COMMITTED)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(self.topic.clone())
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(self.partition)
                    .with_timestamp(EARLIEST)])])
    }

    fn answer(
        &self,
        answer: ListOffsetsResponse,
        _version: i16,
        _at: &str,
    ) -> Result<i64, Attempt> {
        let (topic, partition) = (self.topic.0.as_str(), self.partition);
        let p = answer
            .topics
            .into_iter()
            .filter(|t| t.name == *self.topic)
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| Attempt::again("ListOffsets did not mention the partition"))?;
        match code::error(p.error_code) {
            None => Ok(p.offset),
            Some(code::E::TopicAuthorizationFailed) => {
                Err(Attempt::Stop(TransportError::unauthorized(format!(
                    "listing the offsets of {topic}/{partition}: the principal needs the \
                     DESCRIBE ACL on Topic '{topic}' (TOPIC_AUTHORIZATION_FAILED)"
                ))))
            }
            Some(e) => {
                let other = e.code();
                Err(Attempt::relookup(format!(
                    "ListOffsets of {topic}/{partition}: error {other} ({})",
                    code::name(other)
                )))
            }
        }
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} supports no ListOffsets version this client knows"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::protocol::StrBytes;

    const AT: &str = "b:9092";

    fn topic() -> TopicName {
        TopicName(StrBytes::from_static_str("state"))
    }

    fn answered(topic: &TopicName, partition: i32, error: i16) -> ListOffsetsResponse {
        ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
            .with_name(topic.clone())
            .with_partitions(vec![ListOffsetsPartitionResponse::default()
                .with_partition_index(partition)
                .with_error_code(error)
                .with_offset(42)])])
    }

    #[test]
    fn the_request_asks_for_the_log_start_of_the_partition_read_committed() {
        let topic = topic();
        let req = ListOffsets {
            topic: &topic,
            partition: 3,
        }
        .request(MAX_VERSION);
        assert_eq!(req.replica_id, BrokerId(-1));
        assert_eq!(req.isolation_level, READ_COMMITTED);
        assert_eq!(req.topics.len(), 1);
        assert_eq!(req.topics[0].name, topic);
        let parts: Vec<(i32, i64)> = req.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.timestamp))
            .collect();
        assert_eq!(parts, vec![(3, EARLIEST)]);
    }

    #[test]
    fn every_answer_is_read_for_the_partition() {
        let topic = topic();
        let x = ListOffsets {
            topic: &topic,
            partition: 3,
        };
        assert_eq!(
            x.answer(answered(&topic, 3, 0), MAX_VERSION, AT).ok(),
            Some(42)
        );
        // Another partition, or the same partition of another topic: asked again.
        let other = TopicName(StrBytes::from_static_str("other"));
        for resp in [answered(&topic, 4, 0), answered(&other, 3, 0)] {
            match x.answer(resp, MAX_VERSION, AT) {
                Err(Attempt::Again { relookup, why, .. }) => {
                    assert!(!relookup);
                    assert_eq!(why, "ListOffsets did not mention the partition");
                }
                _ => panic!("an answer without the partition is asked again"),
            }
        }
        // TOPIC_AUTHORIZATION_FAILED names the ACL to grant.
        match x.answer(answered(&topic, 3, 29), MAX_VERSION, AT) {
            Err(Attempt::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unauthorized);
                assert!(
                    e.to_string()
                        .contains("the principal needs the DESCRIBE ACL on Topic 'state'"),
                    "{e}"
                );
            }
            _ => panic!("an authorization error stops the call"),
        }
        // Any other error: the leader is looked up again, whatever its class.
        for error in [6, 87] {
            match x.answer(answered(&topic, 3, error), MAX_VERSION, AT) {
                Err(Attempt::Again { relookup, why, .. }) => {
                    assert!(relookup);
                    assert!(why.starts_with("ListOffsets of state/3: error "), "{why}");
                }
                _ => panic!("error {error} looks the leader up again"),
            }
        }
        match x.unsupported(AT) {
            Attempt::Stop(e) => assert_eq!(e.kind(), ErrorKind::Config),
            _ => panic!("no version in common stops the call"),
        }
    }
}
