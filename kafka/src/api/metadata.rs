//! Metadata (API key 3): the cluster's brokers, the broker it names as controller, and one
//! topic's partitions with their leaders and replica counts. Asking never creates the topic
//! (auto-creation is off). The topic's own error code is read here too, for each use of the
//! answer: the leaders, the topic's state, its layout.

use std::collections::HashMap;

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends.
pub(crate) const MAX_VERSION: i16 = 12;

/// The metadata of `topic`, asked of the bootstrap server `server`.
pub(crate) struct Metadata<'a> {
    pub(crate) topic: &'a str,
    /// The bootstrap server asked, as configured: messages name it (the connection may go to
    /// another address that overrides it).
    pub(crate) server: &'a str,
}

/// A topic's entry in a Metadata answer, and the cluster's brokers.
pub(crate) struct TopicMetadata {
    /// The topic asked for.
    topic: String,
    /// The server that answered.
    server: String,
    error_code: i16,
    /// (node id, address) of every broker, by node id.
    brokers: Vec<(i32, String)>,
    /// The address of the broker the answer names as controller.
    controller: Option<String>,
    /// The replica count of each partition.
    replicas: Vec<usize>,
    /// (partition, its leader's address when the partition has one).
    partitions: Vec<(i32, Option<String>)>,
}

/// The cluster's brokers and a topic's layout ([`TopicMetadata::layout`]).
pub(crate) struct Layout {
    /// (node id, address) of every broker, by node id.
    pub(crate) brokers: Vec<(i32, String)>,
    /// The broker to send controller requests (CreateTopics) to: the controller, or on a KRaft
    /// cluster a broker that forwards them to it.
    pub(crate) controller: Option<String>,
    /// The replica count of each of the topic's partitions; `None` when it does not exist.
    pub(crate) replicas: Option<Vec<usize>>,
}

/// What the brokers' metadata says of a topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TopicState {
    /// No broker knows it (UNKNOWN_TOPIC_OR_PARTITION).
    Missing,
    /// It has this many partitions.
    Partitions(usize),
}

impl Exchange for Metadata<'_> {
    type Request = MetadataRequest;
    type Output = TopicMetadata;
    const NAME: &'static str = "Metadata";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> MetadataRequest {
        MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(self.topic.to_owned())),
            ))]))
            .with_allow_auto_topic_creation(false)
    }

    /// The topic's entry, whatever its error code (read by [`TopicMetadata`]'s methods), except
    /// that an answer without the entry is asked again and TOPIC_AUTHORIZATION_FAILED stops.
    fn answer(
        &self,
        answer: MetadataResponse,
        _version: i16,
        _at: &str,
    ) -> Result<TopicMetadata, Attempt> {
        let topic = self.topic;
        let brokers: HashMap<i32, String> = answer
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        let controller = brokers.get(&answer.controller_id.0).cloned();
        let Some(t) = answer
            .topics
            .into_iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        else {
            return Err(Attempt::again(format!(
                "Metadata did not mention topic '{topic}'"
            )));
        };
        if t.error_code == code::E::TopicAuthorizationFailed.code() {
            return Err(Attempt::Stop(
                TransportError::unauthorized(format!(
                    "reading the metadata of topic '{topic}': the principal needs the DESCRIBE \
                     ACL on Topic '{topic}' (TOPIC_AUTHORIZATION_FAILED), which READ or WRITE \
                     implies: writing to the topic needs WRITE, reading it READ"
                ))
                .with_kafka_code(t.error_code),
            ));
        }
        let mut by_id: Vec<(i32, String)> = brokers.clone().into_iter().collect();
        by_id.sort_unstable();
        Ok(TopicMetadata {
            topic: topic.to_owned(),
            server: self.server.to_owned(),
            error_code: t.error_code,
            brokers: by_id,
            controller,
            replicas: t.partitions.iter().map(|p| p.replica_nodes.len()).collect(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let leader = (p.error_code == code::NONE)
                        .then(|| brokers.get(&p.leader_id.0).cloned())
                        .flatten();
                    (p.partition_index, leader)
                })
                .collect(),
        })
    }

    fn unsupported(&self, _at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {} supports no Metadata version this client knows",
            self.server
        )))
    }
}

impl TopicMetadata {
    /// Whether the topic exists: `false` when the broker does not know it
    /// (UNKNOWN_TOPIC_OR_PARTITION); any other error code is an attempt described by `what`.
    fn exists(&self, what: &str) -> Result<bool, Attempt> {
        match code::error(self.error_code) {
            None => Ok(true),
            Some(code::E::UnknownTopicOrPartition) => Ok(false),
            Some(e) => {
                let other = e.code();
                Err(Attempt::from_code(
                    other,
                    format!("{what}: error {other} ({})", code::name(other)),
                ))
            }
        }
    }

    /// (partition, leader's address) of each of the topic's partitions that has a leader. A
    /// topic the broker does not know is UNKNOWN_TOPIC_OR_PARTITION's attempt (looked up
    /// again: it may still be being created).
    pub(crate) fn leaders(self) -> Result<Vec<(i32, String)>, Attempt> {
        let topic = &self.topic;
        if !self.exists(&format!("Metadata for topic '{topic}'"))? {
            return Err(Attempt::from_code(
                self.error_code,
                format!(
                    "topic '{topic}' is unknown to the broker at {} \
                     (UNKNOWN_TOPIC_OR_PARTITION): it may still be being created",
                    self.server
                ),
            ));
        }
        Ok(self
            .partitions
            .into_iter()
            .filter_map(|(partition, leader)| Some((partition, leader?)))
            .collect())
    }

    /// The topic missing, or its partition count; another error code is an attempt described
    /// by `what`.
    pub(crate) fn state(&self, what: &str) -> Result<TopicState, Attempt> {
        Ok(if self.exists(what)? {
            TopicState::Partitions(self.partitions.len())
        } else {
            TopicState::Missing
        })
    }

    /// The brokers, the controller and the topic's replica counts (`None`: it does not exist);
    /// another error code is an attempt described by `what`.
    pub(crate) fn layout(self, what: &str) -> Result<Layout, Attempt> {
        let replicas = self.exists(what)?.then_some(self.replicas);
        Ok(Layout {
            brokers: self.brokers,
            controller: self.controller,
            replicas,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::BrokerId;

    const X: Metadata<'static> = Metadata {
        topic: "t",
        server: "boot:9092",
    };

    fn partition(
        index: i32,
        leader: i32,
        error: i16,
        replicas: usize,
    ) -> MetadataResponsePartition {
        MetadataResponsePartition::default()
            .with_partition_index(index)
            .with_leader_id(BrokerId(leader))
            .with_error_code(error)
            .with_replica_nodes(vec![BrokerId(leader); replicas])
    }

    fn answered(topic: &str, error: i16) -> MetadataResponse {
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(2))
                    .with_host(StrBytes::from_static_str("b2"))
                    .with_port(9092),
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("b1"))
                    .with_port(9093),
            ])
            .with_controller_id(BrokerId(2))
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(topic.to_owned()))))
                .with_error_code(error)
                .with_partitions(vec![
                    partition(0, 1, 0, 3),
                    // Between leaders: no leader is read.
                    partition(1, 2, code::E::LeaderNotAvailable.code(), 2),
                    // A leader no broker entry names.
                    partition(2, 9, 0, 1),
                ])])
    }

    fn read(topic: &str, error: i16) -> Result<TopicMetadata, Attempt> {
        X.answer(answered(topic, error), MAX_VERSION, "override:1")
    }

    #[test]
    fn the_request_names_the_topic_and_never_creates_it() {
        let req = X.request(MAX_VERSION);
        let topics = req.topics.expect("one topic named");
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].name.as_ref().unwrap().0.as_str(), "t");
        assert!(!req.allow_auto_topic_creation);
    }

    #[test]
    fn a_good_answer_reads_the_brokers_the_controller_the_leaders_and_the_replicas() {
        let m = read("t", 0).ok().expect("read");
        assert_eq!(m.state("w").ok(), Some(TopicState::Partitions(3)));
        let leaders = read("t", 0).ok().unwrap().leaders().ok().expect("leaders");
        assert_eq!(leaders, vec![(0, "b1:9093".to_owned())]);
        let layout = m.layout("w").ok().expect("layout");
        assert_eq!(
            layout.brokers,
            vec![(1, "b1:9093".to_owned()), (2, "b2:9092".to_owned())]
        );
        assert_eq!(layout.controller.as_deref(), Some("b2:9092"));
        assert_eq!(layout.replicas, Some(vec![3, 2, 1]));
    }

    #[test]
    fn an_answer_without_the_topic_is_asked_again_and_a_refusal_stops() {
        assert!(matches!(
            read("other", 0),
            Err(Attempt::Again {
                relookup: false,
                code: None,
                ..
            })
        ));
        match read("t", code::E::TopicAuthorizationFailed.code()) {
            Err(Attempt::Stop(e)) => {
                assert!(e.to_string().contains("DESCRIBE ACL on Topic 't'"), "{e}");
                assert_eq!(e.kafka_code(), Some(29));
            }
            _ => panic!("TOPIC_AUTHORIZATION_FAILED must stop"),
        }
        match X.unsupported("override:1") {
            Attempt::Stop(e) => assert!(e.to_string().contains("broker at boot:9092"), "{e}"),
            _ => panic!("no Metadata version is a setup error"),
        }
    }

    #[test]
    fn an_unknown_topic_is_missing_for_the_state_and_layout_and_looked_up_for_the_leaders() {
        let unknown = code::E::UnknownTopicOrPartition.code();
        let m = read("t", unknown).ok().expect("read");
        assert_eq!(m.state("w").ok(), Some(TopicState::Missing));
        assert_eq!(m.layout("w").ok().expect("layout").replicas, None);
        match read("t", unknown).ok().unwrap().leaders() {
            Err(Attempt::Again {
                relookup: true,
                code: Some(3),
                why,
            }) => assert!(why.contains("unknown to the broker at boot:9092"), "{why}"),
            _ => panic!("an unknown topic is looked up again"),
        }
    }

    #[test]
    fn another_topic_error_is_classified_and_described() {
        let busy = code::E::LeaderNotAvailable.code();
        match read("t", busy).ok().unwrap().leaders() {
            Err(Attempt::Again { why, code, .. }) => {
                assert_eq!(code, Some(busy));
                assert!(
                    why.starts_with("Metadata for topic 't': error 5 (LEADER_NOT_AVAILABLE"),
                    "{why}"
                );
            }
            _ => panic!("LEADER_NOT_AVAILABLE is tried again"),
        }
        let policy = code::E::PolicyViolation.code();
        match read("t", policy).ok().unwrap().state("reading t") {
            Err(Attempt::Stop(e)) => {
                assert!(e.message().starts_with("reading t: error 44"), "{e}");
                assert_eq!(e.kafka_code(), Some(policy));
            }
            _ => panic!("POLICY_VIOLATION stops"),
        }
        assert!(matches!(
            read("t", busy).ok().unwrap().layout("w"),
            Err(Attempt::Again { .. })
        ));
    }
}
