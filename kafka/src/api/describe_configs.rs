//! DescribeConfigs (API key 32): the values of some configuration entries of one resource, a
//! topic (any broker answers for it) or a broker (named by its node id).

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (Kafka 4.x answers v1 to v4).
pub(crate) const MAX_VERSION: i16 = 4;

/// The resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

/// The resource type of a broker.
const RESOURCE_BROKER: i8 = 4;

/// The entries `keys` of the resource `of`; `what` describes the call in messages.
pub(crate) struct DescribeConfigs<'a> {
    pub(crate) what: &'a str,
    pub(crate) of: Resource<'a>,
    pub(crate) keys: &'a [&'a str],
}

/// The resource described.
pub(crate) enum Resource<'a> {
    /// A topic; `denied` chooses the message when the principal may not describe it.
    Topic { name: &'a str, denied: Denied },
    /// A broker, by its node id.
    Broker { id: &'a str },
}

/// Who asks for a topic's entries, which the refusal names.
#[derive(Clone, Copy)]
pub(crate) enum Denied {
    /// The state topic's check, which reads its `cleanup.policy`.
    Check,
    /// The topic's description.
    Describe,
}

impl Exchange for DescribeConfigs<'_> {
    type Request = DescribeConfigsRequest;
    /// The value of each key asked for, in order (`None` when the broker did not list it or
    /// it has no value). The whole is `None` for a topic the broker does not know yet, and for
    /// a broker that answered an error of any kind (a broker's setting is best effort).
    type Output = Option<Vec<Option<String>>>;
    const NAME: &'static str = "DescribeConfigs";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> DescribeConfigsRequest {
        let (resource_type, name) = match self.of {
            Resource::Topic { name, .. } => (RESOURCE_TOPIC, name),
            Resource::Broker { id } => (RESOURCE_BROKER, id),
        };
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(Some(
                self.keys
                    .iter()
                    .map(|k| StrBytes::from_string((*k).to_owned()))
                    .collect(),
            ))])
    }

    fn answer(
        &self,
        answer: DescribeConfigsResponse,
        _version: i16,
        at: &str,
    ) -> Result<Option<Vec<Option<String>>>, Attempt> {
        let what = self.what;
        let Some(result) = answer.results.into_iter().next() else {
            return Err(Attempt::again(format!(
                "{what}: the broker at {at} answered with no resource"
            )));
        };
        let error = result.error_code;
        if error != code::NONE {
            let Resource::Topic { name, denied } = self.of else {
                return Ok(None);
            };
            return match code::error(error) {
                Some(code::E::UnknownTopicOrPartition) => Ok(None),
                Some(code::E::TopicAuthorizationFailed) => {
                    let why = match denied {
                        Denied::Check => format!(
                            "{what}: the principal needs the DESCRIBE_CONFIGS ACL on Topic \
                             '{name}' (TOPIC_AUTHORIZATION_FAILED): the topic check reads its \
                             cleanup.policy"
                        ),
                        Denied::Describe => format!(
                            "{what}: not authorized (the principal needs the DESCRIBE_CONFIGS \
                             ACL on topic '{name}')"
                        ),
                    };
                    Err(Attempt::Stop(
                        TransportError::unauthorized(why).with_kafka_code(error),
                    ))
                }
                _ => {
                    let message = result
                        .error_message
                        .as_ref()
                        .map_or_else(|| code::name(error), |m| m.as_str().to_owned());
                    Err(Attempt::from_code(
                        error,
                        format!("{what} at {at}: error {error} ({message})"),
                    ))
                }
            };
        }
        Ok(Some(
            self.keys
                .iter()
                .map(|k| {
                    result
                        .configs
                        .iter()
                        .find(|c| c.name.as_str() == *k)
                        .and_then(|c| c.value.as_ref().map(|v| v.as_str().to_owned()))
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };

    const KEYS: &[&str] = &["cleanup.policy", "min.insync.replicas", "compression.type"];

    fn topic(denied: Denied) -> DescribeConfigs<'static> {
        DescribeConfigs {
            what: "describing t",
            of: Resource::Topic { name: "t", denied },
            keys: KEYS,
        }
    }

    fn answered(error: i16, message: Option<&'static str>) -> DescribeConfigsResponse {
        let entry = |name: &'static str, value: Option<&'static str>| {
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_static_str(name))
                .with_value(value.map(StrBytes::from_static_str))
        };
        DescribeConfigsResponse::default().with_results(vec![DescribeConfigsResult::default()
            .with_error_code(error)
            .with_error_message(message.map(StrBytes::from_static_str))
            .with_configs(vec![
                entry("compression.type", Some("zstd")),
                entry("cleanup.policy", Some("compact")),
                entry("min.insync.replicas", None),
            ])])
    }

    fn read(
        x: &DescribeConfigs<'_>,
        answer: DescribeConfigsResponse,
    ) -> Result<Option<Vec<Option<String>>>, Attempt> {
        x.answer(answer, MAX_VERSION, "b:9092")
    }

    #[test]
    fn the_request_names_the_resource_and_the_keys() {
        let req = topic(Denied::Check).request(MAX_VERSION);
        assert_eq!(req.resources.len(), 1);
        let r = &req.resources[0];
        assert_eq!((r.resource_type, r.resource_name.as_str()), (2, "t"));
        let keys: Vec<&str> = r
            .configuration_keys
            .as_ref()
            .unwrap()
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys, KEYS);
        let broker = DescribeConfigs {
            what: "describing broker 1",
            of: Resource::Broker { id: "1" },
            keys: &["log.retention.ms"],
        }
        .request(MAX_VERSION);
        let r = &broker.resources[0];
        assert_eq!((r.resource_type, r.resource_name.as_str()), (4, "1"));
    }

    #[test]
    fn the_values_come_in_the_order_of_the_keys() {
        let values = read(&topic(Denied::Check), answered(0, None))
            .ok()
            .flatten();
        assert_eq!(
            values,
            Some(vec![
                Some("compact".to_owned()),
                None,
                Some("zstd".to_owned())
            ])
        );
        assert!(matches!(
            read(&topic(Denied::Check), DescribeConfigsResponse::default()),
            Err(Attempt::Again { code: None, .. })
        ));
    }

    #[test]
    fn a_topic_unknown_is_none_and_a_refusal_names_who_asked() {
        assert!(matches!(
            read(&topic(Denied::Check), answered(3, None)),
            Ok(None)
        ));
        for (denied, says) in [
            (Denied::Check, "the topic check reads its cleanup.policy"),
            (Denied::Describe, "not authorized"),
        ] {
            match read(&topic(denied), answered(29, None)) {
                Err(Attempt::Stop(e)) => {
                    assert!(e.to_string().contains(says), "{e}");
                    assert_eq!(e.kafka_code(), Some(29));
                }
                _ => panic!("TOPIC_AUTHORIZATION_FAILED stops"),
            }
        }
    }

    #[test]
    fn another_topic_error_is_classified_with_the_brokers_message() {
        match read(&topic(Denied::Describe), answered(14, Some("loading"))) {
            Err(Attempt::Again { why, code, .. }) => {
                assert_eq!(code, Some(14));
                assert_eq!(why, "describing t at b:9092: error 14 (loading)");
            }
            _ => panic!("COORDINATOR_LOAD_IN_PROGRESS is tried again"),
        }
        match read(&topic(Denied::Describe), answered(42, None)) {
            Err(Attempt::Stop(e)) => {
                assert!(e.to_string().contains("error 42 (INVALID_REQUEST)"), "{e}")
            }
            _ => panic!("INVALID_REQUEST stops"),
        }
    }

    #[test]
    fn a_broker_that_answers_an_error_gives_no_setting() {
        let broker = DescribeConfigs {
            what: "describing broker 1",
            of: Resource::Broker { id: "1" },
            keys: &["cleanup.policy"],
        };
        assert!(matches!(read(&broker, answered(29, None)), Ok(None)));
        assert_eq!(
            read(&broker, answered(0, None)).ok().flatten(),
            Some(vec![Some("compact".to_owned())])
        );
    }
}
