//! CreateTopics (API key 19): one topic created by the controller (on a KRaft cluster, any
//! broker forwards the request to it).

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (Kafka 4.x answers v2 to v7).
pub(crate) const MAX_VERSION: i16 = 7;

/// The topic `name` to create, with `partitions`, `replication_factor` replicas and the
/// configuration entries `settings`; `what` describes the creation in the error when the
/// replication factor does not fit the request.
pub(crate) fn new_topic(
    what: &str,
    name: &str,
    partitions: i32,
    replication_factor: i32,
    settings: &[(&'static str, String)],
) -> Result<CreatableTopic, TransportError> {
    let Ok(replicas) = i16::try_from(replication_factor) else {
        return Err(TransportError::config(format!(
            "{what}: replication factor {replication_factor} is out of range"
        )));
    };
    Ok(CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_owned())))
        .with_num_partitions(partitions)
        .with_replication_factor(replicas)
        .with_configs(
            settings
                .iter()
                .map(|&(key, ref value)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_static_str(key))
                        .with_value(Some(StrBytes::from_string(value.clone())))
                })
                .collect(),
        ))
}

/// One CreateTopics of `topic` (see [`new_topic`]), giving the broker `timeout_ms` to create
/// it; `what` describes the creation in messages.
pub(crate) struct CreateTopics<'a> {
    pub(crate) what: &'a str,
    pub(crate) topic: &'a CreatableTopic,
    pub(crate) timeout_ms: i32,
}

impl Exchange for CreateTopics<'_> {
    type Request = CreateTopicsRequest;
    /// Whether the topic was created (`false`: it existed).
    type Output = bool;
    const NAME: &'static str = "CreateTopics";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> CreateTopicsRequest {
        CreateTopicsRequest::default()
            .with_topics(vec![self.topic.clone()])
            .with_timeout_ms(self.timeout_ms)
    }

    fn answer(
        &self,
        answer: CreateTopicsResponse,
        _version: i16,
        at: &str,
    ) -> Result<bool, Attempt> {
        let what = self.what;
        let Some(result) = answer.topics.into_iter().next() else {
            return Err(Attempt::again(format!(
                "{what}: the broker at {at} answered with no result"
            )));
        };
        let name = self.topic.name.0.as_str();
        match code::error(result.error_code) {
            None => Ok(true),
            Some(code::E::TopicAlreadyExists) => Ok(false),
            Some(c @ (code::E::TopicAuthorizationFailed | code::E::ClusterAuthorizationFailed)) => {
                Err(Attempt::Stop(
                    TransportError::unauthorized(format!(
                        "{what}: {} (the principal needs the CREATE ACL on Topic '{name}' or on \
                         the Cluster)",
                        code::name(c.code())
                    ))
                    .with_kafka_code(c.code()),
                ))
            }
            Some(e) => {
                let other = e.code();
                let known = Some(e.to_string());
                Err(Attempt::from_code(
                    other,
                    format!(
                        "{what}: error {other} ({}) at {at}",
                        result
                            .error_message
                            .as_ref()
                            .map(|m| m.as_str().to_owned())
                            .or(known)
                            .unwrap_or_default(),
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;

    fn topic() -> CreatableTopic {
        new_topic(
            "creating t",
            "t",
            16,
            3,
            &[("cleanup.policy", "compact".to_owned())],
        )
        .expect("in range")
    }

    fn answered(error: i16, message: Option<&'static str>) -> CreateTopicsResponse {
        CreateTopicsResponse::default().with_topics(vec![CreatableTopicResult::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_error_code(error)
            .with_error_message(message.map(StrBytes::from_static_str))])
    }

    fn read(answer: CreateTopicsResponse) -> Result<bool, Attempt> {
        let topic = topic();
        CreateTopics {
            what: "creating t",
            topic: &topic,
            timeout_ms: 5_000,
        }
        .answer(answer, MAX_VERSION, "b:9092")
    }

    #[test]
    fn the_request_carries_the_topic_its_settings_and_the_brokers_timeout() {
        let topic = topic();
        let req = CreateTopics {
            what: "creating t",
            topic: &topic,
            timeout_ms: 2_500,
        }
        .request(MAX_VERSION);
        assert_eq!(req.timeout_ms, 2_500);
        assert_eq!(req.topics.len(), 1);
        let t = &req.topics[0];
        assert_eq!(t.name.0.as_str(), "t");
        assert_eq!((t.num_partitions, t.replication_factor), (16, 3));
        assert_eq!(t.configs.len(), 1);
        assert_eq!(t.configs[0].name.as_str(), "cleanup.policy");
        assert_eq!(t.configs[0].value.as_ref().unwrap().as_str(), "compact");
    }

    #[test]
    fn a_replication_factor_beyond_the_request_is_a_config_error() {
        let e = new_topic("creating t", "t", 1, 40_000, &[]).expect_err("out of range");
        assert_eq!(
            e.kind(),
            kafka_coordination_transport::error::ErrorKind::Config
        );
        assert!(e.to_string().contains("replication factor 40000"), "{e}");
    }

    #[test]
    fn created_existing_refused_or_classified() {
        assert!(matches!(read(answered(0, None)), Ok(true)));
        assert!(matches!(read(answered(36, None)), Ok(false)));
        for refused in [29, 31] {
            match read(answered(refused, None)) {
                Err(Attempt::Stop(e)) => {
                    assert!(e.to_string().contains("CREATE ACL on Topic 't'"), "{e}");
                    assert_eq!(e.kafka_code(), Some(refused));
                }
                _ => panic!("an authorization error stops"),
            }
        }
        match read(answered(7, Some("timed out at the controller"))) {
            Err(Attempt::Again { why, code, .. }) => {
                assert_eq!(code, Some(7));
                assert_eq!(
                    why,
                    "creating t: error 7 (timed out at the controller) at b:9092"
                );
            }
            _ => panic!("REQUEST_TIMED_OUT is tried again"),
        }
        match read(answered(37, None)) {
            Err(Attempt::Stop(e)) => assert_eq!(e.kafka_code(), Some(37)),
            _ => panic!("INVALID_PARTITIONS stops"),
        }
        assert!(matches!(
            read(CreateTopicsResponse::default()),
            Err(Attempt::Again { code: None, .. })
        ));
    }
}
