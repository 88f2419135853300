//! TxnOffsetCommit (API key 28): a consumer group's offsets written in the role's open
//! transaction, sent to the group's coordinator once AddOffsetsToTxn has added the group. The
//! committer is a producer outside the group (generation -1, no member id), as Java's
//! `sendOffsetsToTransaction(offsets, groupId)`.

use std::collections::BTreeMap;

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    GroupId, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::find_coordinator::group_unauthorized;
use super::{txn_error, Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (below transaction version 2's v4).
pub(crate) const MAX_VERSION: i16 = 3;
/// The first version that names the committer's generation and member.
const MEMBER: i16 = 3;

/// Offsets by topic: each partition's next offset and metadata.
pub(crate) type Offsets = BTreeMap<String, Vec<(i32, i64, Option<String>)>>;

/// `offsets` of group `group`, committed in the open transaction of `role` (pair `token`).
pub(crate) struct TxnOffsetCommit<'a> {
    pub(crate) role: &'a Role,
    pub(crate) token: FencingToken,
    pub(crate) group: &'a str,
    pub(crate) offsets: &'a Offsets,
    /// The call as messages name it.
    pub(crate) what: &'a str,
}

impl Exchange for TxnOffsetCommit<'_> {
    type Request = TxnOffsetCommitRequest;
    type Output = ();
    const NAME: &'static str = "TxnOffsetCommit";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, version: i16) -> TxnOffsetCommitRequest {
        let topics = self
            .offsets
            .iter()
            .map(|(topic, partitions)| {
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|(p, offset, metadata)| {
                                TxnOffsetCommitRequestPartition::default()
                                    .with_partition_index(*p)
                                    .with_committed_offset(*offset)
                                    .with_committed_leader_epoch(-1)
                                    .with_committed_metadata(Some(StrBytes::from_string(
                                        metadata.clone().unwrap_or_default(),
                                    )))
                            })
                            .collect(),
                    )
            })
            .collect();
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                self.role.as_str().to_owned(),
            )))
            .with_group_id(GroupId(StrBytes::from_string(self.group.to_owned())))
            .with_producer_id(ProducerId(self.token.producer_id))
            .with_producer_epoch(self.token.producer_epoch)
            .with_topics(topics);
        if version >= MEMBER {
            // A producer outside the group: no generation, no member.
            req.with_generation_id(-1)
                .with_member_id(StrBytes::default())
                .with_group_instance_id(None)
        } else {
            req
        }
    }

    /// The first partition's error decides.
    fn answer(
        &self,
        answer: TxnOffsetCommitResponse,
        _version: i16,
        at: &str,
    ) -> Result<(), Attempt> {
        let worst = answer
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.0.as_str(), p.error_code))
            })
            .find(|(_, c)| *c != code::NONE);
        let group = self.group;
        match worst {
            None => Ok(()),
            Some((_, c)) if code::error(c) == Some(code::E::GroupAuthorizationFailed) => {
                Err(Attempt::Stop(group_unauthorized(group)))
            }
            // The coordinator checks READ on each topic whose offsets are committed (and READ
            // on the group), as for a consumer's OffsetCommit: not WRITE, whatever the
            // transaction.
            Some((topic, c)) if code::error(c) == Some(code::E::TopicAuthorizationFailed) => {
                Err(Attempt::Stop(
                    TransportError::unauthorized(format!(
                        "{}: the principal needs the READ ACL on Topic '{topic}' to commit its \
                         offsets (and READ on Group '{group}') (TOPIC_AUTHORIZATION_FAILED)",
                        self.what
                    ))
                    .with_kafka_code(c),
                ))
            }
            Some((_, error)) => Err(txn_error(
                self.role,
                self.token,
                &format!("TxnOffsetCommit of group '{group}'"),
                at,
                error,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };

    const WHAT: &str = "TxnOffsetCommit of group 'payments' for role 'billing'";

    fn role() -> Role {
        Role::new("billing").expect("role")
    }

    fn offsets() -> Offsets {
        let mut o = Offsets::new();
        o.insert(
            "orders".to_owned(),
            vec![(0, 10, Some("m".to_owned())), (2, 5, None)],
        );
        o
    }

    /// A TxnOffsetCommit answer with `error` on the second topic's partition.
    fn answer(error: i16) -> TxnOffsetCommitResponse {
        let topic = |name: &str, error_code: i16| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                .with_partitions(vec![TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(0)
                    .with_error_code(error_code)])
        };
        TxnOffsetCommitResponse::default()
            .with_topics(vec![topic("allowed", code::NONE), topic("orders", error)])
    }

    fn read(error: i16) -> Result<(), Attempt> {
        let (role, offsets) = (role(), offsets());
        TxnOffsetCommit {
            role: &role,
            token: FencingToken::new(7, 0),
            group: "payments",
            offsets: &offsets,
            what: WHAT,
        }
        .answer(answer(error), MAX_VERSION, "127.0.0.1:9092")
    }

    fn stopped(error: i16) -> TransportError {
        match read(error) {
            Err(Attempt::Stop(e)) => e,
            Ok(()) => panic!("code {error} was taken for success"),
            Err(_) => panic!("code {error} is tried again"),
        }
    }

    #[test]
    fn the_request_carries_every_offset_from_outside_the_group() {
        let (role, offsets) = (role(), offsets());
        let x = TxnOffsetCommit {
            role: &role,
            token: FencingToken::new(7, 2),
            group: "payments",
            offsets: &offsets,
            what: WHAT,
        };
        let req = x.request(MAX_VERSION);
        assert_eq!(req.transactional_id.0.as_str(), "billing");
        assert_eq!(req.group_id.0.as_str(), "payments");
        assert_eq!((req.producer_id.0, req.producer_epoch), (7, 2));
        assert_eq!((req.generation_id, req.member_id.as_str()), (-1, ""));
        assert_eq!(req.topics.len(), 1);
        assert_eq!(req.topics[0].name.0.as_str(), "orders");
        let parts: Vec<(i32, i64, i32, Option<&str>)> = req.topics[0]
            .partitions
            .iter()
            .map(|p| {
                (
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata.as_deref(),
                )
            })
            .collect();
        assert_eq!(parts, [(0, 10, -1, Some("m")), (2, 5, -1, Some(""))]);
    }

    #[test]
    fn offsets_taken_are_a_success_and_a_partition_tried_again_retries() {
        assert!(read(code::NONE).is_ok());
        assert!(matches!(
            read(code::E::ConcurrentTransactions.code()),
            Err(Attempt::Again { .. })
        ));
    }

    /// The group coordinator refuses the group: the error names the group's ACL.
    #[test]
    fn a_group_refused_asks_for_read_on_the_group() {
        let e = stopped(code::E::GroupAuthorizationFailed.code());
        assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
        assert!(e.message().contains("READ ACL on Group 'payments'"), "{e}");
    }

    /// The group coordinator refuses a topic the principal may not READ: the error names that
    /// topic, the READ ACL it needs, and the group (which needs READ too).
    #[test]
    fn a_topic_refused_to_an_offset_commit_asks_for_read_on_that_topic() {
        let e = stopped(code::E::TopicAuthorizationFailed.code());
        assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
        let m = e.message();
        assert!(m.starts_with(WHAT), "{m}");
        assert!(m.contains("READ ACL on Topic 'orders'"), "{m}");
        assert!(m.contains("READ on Group 'payments'"), "{m}");
        assert!(!m.contains("WRITE"), "{m}");
    }

    /// Offsets the coordinator refuses for good end the write at once with what to fix.
    #[test]
    fn offsets_refused_for_good_end_the_write_with_what_to_fix() {
        let e = stopped(code::E::OffsetMetadataTooLarge.code());
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(e.message().contains("offset.metadata.max.bytes"), "{e}");
        let e = stopped(code::E::InvalidCommitOffsetSize.code());
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(e.message().contains("max.message.bytes"), "{e}");
        let e = stopped(code::E::ProducerFenced.code());
        assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
        assert!(
            e.message()
                .starts_with("TxnOffsetCommit of group 'payments' of role 'billing'"),
            "{e}"
        );
    }
}
