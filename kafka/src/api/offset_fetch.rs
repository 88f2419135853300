//! OffsetFetch (API key 9): a consumer group's committed offsets, read back with
//! `require_stable`. The group coordinator answers UNSTABLE_OFFSET_COMMIT while a transaction
//! with offsets of the partition is pending (tried again), so the answer is the position of the
//! last committed transaction.

use std::collections::BTreeMap;

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::find_coordinator::group_unauthorized;
use super::{Attempt, Exchange};
use crate::classify::code;

/// The one version this client sends: v7 is the first with `require_stable`, and the last
/// with one group per request.
pub(crate) const VERSION: i16 = 7;

/// The committed offsets of group `group` for `partitions`.
pub(crate) struct OffsetFetch<'a> {
    pub(crate) group: &'a str,
    /// `(topic, partition)`, in the order the answer gives their offsets.
    pub(crate) partitions: &'a [(String, i32)],
    /// The call as messages name it.
    pub(crate) what: &'a str,
}

impl Exchange for OffsetFetch<'_> {
    type Request = OffsetFetchRequest;
    /// Each partition's committed offset, in order; `None` where the group has none.
    type Output = Vec<Option<i64>>;
    const NAME: &'static str = "OffsetFetch";
    const MAX_VERSION: i16 = VERSION;
    const MIN_VERSION: i16 = VERSION;

    fn request(&self, _version: i16) -> OffsetFetchRequest {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in self.partitions {
            by_topic.entry(t).or_default().push(*p);
        }
        let topics = by_topic
            .into_iter()
            .map(|(t, ps)| {
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                    .with_partition_indexes(ps)
            })
            .collect();
        OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.to_owned())))
            .with_topics(Some(topics))
            .with_require_stable(true)
    }

    fn answer(
        &self,
        answer: OffsetFetchResponse,
        _version: i16,
        _at: &str,
    ) -> Result<Vec<Option<i64>>, Attempt> {
        let what = self.what;
        let fail = |error: i16| {
            if code::error(error) == Some(code::E::GroupAuthorizationFailed) {
                return Attempt::Stop(group_unauthorized(self.group));
            }
            Attempt::from_code(
                error,
                format!("{what}: error {error} ({})", code::name(error)),
            )
        };
        if answer.error_code != code::NONE {
            return Err(fail(answer.error_code));
        }
        let mut offsets = Vec::with_capacity(self.partitions.len());
        for (t, p) in self.partitions {
            let found = answer
                .topics
                .iter()
                .filter(|x| x.name.0.as_str() == t)
                .flat_map(|x| x.partitions.iter())
                .find(|x| x.partition_index == *p);
            let Some(found) = found else {
                return Err(Attempt::again(format!("{what}: no answer for {t}/{p}")));
            };
            if found.error_code != code::NONE {
                return Err(fail(found.error_code));
            }
            offsets.push((found.committed_offset >= 0).then_some(found.committed_offset));
        }
        Ok(offsets)
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} does not support OffsetFetch v{VERSION} (require_stable, Kafka \
             2.5 or newer)"
        )))
    }

    fn too_old(&self, _offered: i16, at: &str) -> Attempt {
        self.unsupported(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponsePartition, OffsetFetchResponseTopic,
    };

    const AT: &str = "b:9092";
    const WHAT: &str = "OffsetFetch of group 'g'";

    fn partitions() -> Vec<(String, i32)> {
        vec![
            ("b".to_owned(), 1),
            ("a".to_owned(), 0),
            ("b".to_owned(), 0),
        ]
    }

    /// An answer with `b/1` at `offset` (and `error`), `a/0` with none committed, and `b/0`
    /// at 5.
    fn answered(offset: i64, error: i16) -> OffsetFetchResponse {
        let partition = |index: i32, offset: i64, error: i16| {
            OffsetFetchResponsePartition::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                .with_error_code(error)
        };
        let topic = |name: &str, partitions| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                .with_partitions(partitions)
        };
        OffsetFetchResponse::default().with_topics(vec![
            topic("a", vec![partition(0, -1, 0)]),
            topic("b", vec![partition(0, 5, 0), partition(1, offset, error)]),
        ])
    }

    fn read(answer: OffsetFetchResponse) -> Result<Vec<Option<i64>>, Attempt> {
        let partitions = partitions();
        OffsetFetch {
            group: "g",
            partitions: &partitions,
            what: WHAT,
        }
        .answer(answer, VERSION, AT)
    }

    #[test]
    fn the_request_asks_for_stable_offsets_of_each_topic_once() {
        let partitions = partitions();
        let req = OffsetFetch {
            group: "g",
            partitions: &partitions,
            what: WHAT,
        }
        .request(VERSION);
        assert_eq!(req.group_id.0.as_str(), "g");
        assert!(req.require_stable);
        let topics: Vec<(&str, Vec<i32>)> = req
            .topics
            .as_ref()
            .expect("topics named")
            .iter()
            .map(|t| (t.name.0.as_str(), t.partition_indexes.clone()))
            .collect();
        assert_eq!(topics, [("a", vec![0]), ("b", vec![1, 0])]);
    }

    #[test]
    fn the_offsets_come_in_the_order_asked() {
        assert_eq!(
            read(answered(12, 0)).ok(),
            Some(vec![Some(12), None, Some(5)])
        );
    }

    #[test]
    fn every_error_is_read() {
        // UNSTABLE_OFFSET_COMMIT on a partition: a transaction is pending, asked again.
        match read(answered(12, 88)) {
            Err(Attempt::Again {
                relookup: false,
                why,
                code: Some(88),
            }) => assert!(
                why.starts_with("OffsetFetch of group 'g': error 88"),
                "{why}"
            ),
            _ => panic!("UNSTABLE_OFFSET_COMMIT must be tried again"),
        }
        // The group's error: the coordinator moved.
        assert!(matches!(
            read(answered(12, 0).with_error_code(16)),
            Err(Attempt::Again { relookup: true, .. })
        ));
        // GROUP_AUTHORIZATION_FAILED, on the group or a partition, names the group's ACL.
        for answer in [answered(12, 30), answered(12, 0).with_error_code(30)] {
            match read(answer) {
                Err(Attempt::Stop(e)) => {
                    assert_eq!(e.kind(), ErrorKind::Unauthorized);
                    assert!(e.message().contains("READ ACL on Group 'g'"), "{e}");
                }
                _ => panic!("GROUP_AUTHORIZATION_FAILED must stop the call"),
            }
        }
        // A partition left out of the answer: asked again.
        let partial = OffsetFetchResponse::default();
        match read(partial) {
            Err(Attempt::Again {
                relookup: false,
                why,
                code: None,
            }) => assert_eq!(why, "OffsetFetch of group 'g': no answer for b/1"),
            _ => panic!("a partition without an answer must be asked again"),
        }
    }

    #[test]
    fn a_broker_that_speaks_only_versions_before_7_is_named_and_not_asked() {
        use crate::net::{Conn, Replay};
        let partitions = partitions();
        let x = OffsetFetch {
            group: "g",
            partitions: &partitions,
            what: WHAT,
        };
        // OffsetFetch (key 9) negotiated at v6: no request goes out (the replay holds no
        // answer, so a request sent would end as a broken connection, not as this
        // configuration error).
        let mut conn = Conn::over(AT, Box::new(Replay::new(Vec::new()))).with_versions(&[(9, 6)]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        match conn.exchange(&x, deadline) {
            Err(Attempt::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Config);
                assert!(
                    e.message().contains("OffsetFetch v7 (require_stable"),
                    "{e}"
                );
            }
            other => panic!(
                "expected a configuration error, got {:?}",
                other.map_err(|a| a.why())
            ),
        }
    }

    #[test]
    fn a_broker_before_kafka_2_5_is_named() {
        let partitions = partitions();
        let x = OffsetFetch {
            group: "g",
            partitions: &partitions,
            what: WHAT,
        };
        match x.unsupported(AT) {
            Attempt::Stop(e) => {
                assert_eq!(e.kind(), ErrorKind::Config);
                assert!(
                    e.message().contains("OffsetFetch v7 (require_stable"),
                    "{e}"
                );
            }
            _ => panic!("a broker without v7 must stop the call"),
        }
    }
}
