//! FindCoordinator (API key 10): the broker that coordinates a consumer group (key type 0) or
//! a transactional id (key type 1). From v4 one request names several keys; the client asks
//! for a group alone, and for a transactional id together with others it wants (see
//! `Cluster::want_coordinator`).

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::{Message, StrBytes};

use super::{Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends: every version kafka-protocol knows.
pub(crate) const MAX_VERSION: i16 = <FindCoordinatorRequest as Message>::VERSIONS.max;
/// The first version with a key type (v0 finds group coordinators only).
pub(crate) const MIN_VERSION_TRANSACTION: i16 = 1;
/// The first version that names its keys in a list.
const BATCHED: i16 = 4;
/// The key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;
/// The key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Whose coordinator is asked for.
pub(crate) enum FindCoordinator<'a> {
    /// The coordinator of consumer group `group`.
    Group { group: &'a str },
    /// The coordinator of `transactional_id`; from v4, also of `others` in the same request.
    Transaction {
        transactional_id: &'a str,
        others: &'a [String],
    },
}

/// What one FindCoordinator answered: the address of the coordinator asked for (or why not),
/// and the `(key, address)` of each other key answered without an error.
pub(crate) struct Found {
    pub(crate) ours: Result<String, Attempt>,
    pub(crate) others: Vec<(String, String)>,
}

/// The error when the principal may not READ consumer group `group`.
pub(crate) fn group_unauthorized(group: &str) -> TransportError {
    TransportError::unauthorized(format!(
        "consumer group '{group}': the principal needs the READ ACL on Group '{group}' \
         (GROUP_AUTHORIZATION_FAILED)"
    ))
}

impl Exchange for FindCoordinator<'_> {
    type Request = FindCoordinatorRequest;
    type Output = Found;
    const NAME: &'static str = "FindCoordinator";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, version: i16) -> FindCoordinatorRequest {
        let (key_type, key, others): (i8, &str, &[String]) = match self {
            FindCoordinator::Group { group } => (KEY_TYPE_GROUP, group, &[]),
            FindCoordinator::Transaction {
                transactional_id,
                others,
            } => (KEY_TYPE_TRANSACTION, transactional_id, others),
        };
        let key = StrBytes::from_string(key.to_owned());
        let req = FindCoordinatorRequest::default().with_key_type(key_type);
        if version >= BATCHED {
            let keys = std::iter::once(key)
                .chain(others.iter().map(|o| StrBytes::from_string(o.clone())))
                .collect();
            req.with_coordinator_keys(keys)
        } else {
            req.with_key(key)
        }
    }

    fn answer(
        &self,
        answer: FindCoordinatorResponse,
        version: i16,
        _at: &str,
    ) -> Result<Found, Attempt> {
        let mut others = Vec::new();
        let (error, message, host, port) = if version >= BATCHED {
            let ours = match self {
                // One key asked for: the one entry.
                FindCoordinator::Group { .. } => answer.coordinators.into_iter().next(),
                FindCoordinator::Transaction {
                    transactional_id, ..
                } => {
                    let mut ours = None;
                    for c in answer.coordinators {
                        if c.key.as_str() == *transactional_id {
                            ours = Some(c);
                        } else if c.error_code == code::NONE && c.port > 0 {
                            others.push((c.key.to_string(), format!("{}:{}", c.host, c.port)));
                        }
                    }
                    ours
                }
            };
            let Some(c) = ours else {
                let why = match self {
                    FindCoordinator::Group { group } => {
                        format!("FindCoordinator did not answer for group '{group}'")
                    }
                    FindCoordinator::Transaction {
                        transactional_id, ..
                    } => format!("FindCoordinator did not answer for '{transactional_id}'"),
                };
                return Ok(Found {
                    ours: Err(Attempt::relookup(why)),
                    others,
                });
            };
            (c.error_code, c.error_message, c.host, c.port)
        } else {
            (
                answer.error_code,
                answer.error_message,
                answer.host,
                answer.port,
            )
        };
        let ours = match code::error(error) {
            None => Ok(format!("{host}:{port}")),
            Some(e) => Err(self.refused(e, error, message.as_deref())),
        };
        Ok(Found { ours, others })
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(match self {
            FindCoordinator::Group { .. } => {
                format!("the broker at {at} does not support FindCoordinator")
            }
            FindCoordinator::Transaction { .. } => format!(
                "the broker at {at} does not support FindCoordinator for transactional ids \
                 (Kafka 0.11 or newer is needed)"
            ),
        }))
    }
}

impl FindCoordinator<'_> {
    /// What error `error` (`e`), with the broker's `message` if any, means for the key asked
    /// for.
    fn refused(&self, e: code::E, error: i16, message: Option<&str>) -> Attempt {
        match self {
            FindCoordinator::Group { group } => match e {
                code::E::GroupAuthorizationFailed => Attempt::Stop(group_unauthorized(group)),
                _ => Attempt::from_code(
                    error,
                    format!(
                        "FindCoordinator for group '{group}': error {error} ({})",
                        code::name(error)
                    ),
                ),
            },
            FindCoordinator::Transaction {
                transactional_id, ..
            } => {
                let said = || message.map_or_else(|| code::name(error), str::to_owned);
                match e {
                    code::E::CoordinatorLoadInProgress
                    | code::E::CoordinatorNotAvailable
                    | code::E::NotCoordinator => Attempt::Again {
                        relookup: true,
                        why: format!("FindCoordinator: {}", said()),
                        code: Some(error),
                    },
                    code::E::TransactionalIdAuthorizationFailed => {
                        Attempt::Stop(TransportError::unauthorized(format!(
                            "FindCoordinator for transactional id '{transactional_id}': the \
                             principal needs the DESCRIBE ACL on TransactionalId \
                             '{transactional_id}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a \
                             member needs WRITE on it, which implies DESCRIBE"
                        )))
                    }
                    _ => Attempt::from_code(
                        error,
                        format!(
                            "FindCoordinator for '{transactional_id}' failed with error {error} \
                             ({})",
                            said()
                        ),
                    ),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::messages::find_coordinator_response::Coordinator;

    const AT: &str = "b:9092";

    fn entry(key: &str, error: i16, port: i32) -> Coordinator {
        Coordinator::default()
            .with_key(StrBytes::from_string(key.to_owned()))
            .with_host(StrBytes::from_static_str("c"))
            .with_port(port)
            .with_error_code(error)
    }

    fn batched(entries: Vec<Coordinator>) -> FindCoordinatorResponse {
        FindCoordinatorResponse::default().with_coordinators(entries)
    }

    fn single(error: i16, message: Option<&'static str>) -> FindCoordinatorResponse {
        FindCoordinatorResponse::default()
            .with_error_code(error)
            .with_error_message(message.map(StrBytes::from_static_str))
            .with_host(StrBytes::from_static_str("c"))
            .with_port(9093)
    }

    fn ours(x: &FindCoordinator<'_>, answer: FindCoordinatorResponse, version: i16) -> Attempt {
        match x.answer(answer, version, AT) {
            Ok(Found { ours: Err(a), .. }) => a,
            Ok(Found { ours: Ok(addr), .. }) => panic!("taken for an answer: {addr}"),
            Err(_) => panic!("the answer itself was refused"),
        }
    }

    fn stopped(a: Attempt) -> TransportError {
        match a {
            Attempt::Stop(e) => e,
            _ => panic!("the lookup must stop"),
        }
    }

    #[test]
    fn the_key_type_and_keys_follow_the_key_and_the_version() {
        let others = vec!["b".to_owned(), "c".to_owned()];
        let txn = FindCoordinator::Transaction {
            transactional_id: "a",
            others: &others,
        };
        let req = txn.request(4);
        assert_eq!(req.key_type, 1);
        let keys: Vec<&str> = req.coordinator_keys.iter().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        let req = txn.request(3);
        assert_eq!((req.key_type, req.key.as_str()), (1, "a"));
        assert!(req.coordinator_keys.is_empty());

        let group = FindCoordinator::Group { group: "g" };
        let req = group.request(MAX_VERSION);
        assert_eq!(req.key_type, 0);
        let keys: Vec<&str> = req.coordinator_keys.iter().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["g"]);
        assert_eq!(group.request(0).key.as_str(), "g");
    }

    #[test]
    fn a_batched_answer_gives_ours_and_the_others_answered_well() {
        let others = vec!["b".to_owned(), "c".to_owned(), "d".to_owned()];
        let x = FindCoordinator::Transaction {
            transactional_id: "a",
            others: &others,
        };
        let answer = batched(vec![
            entry("b", 0, 9094),
            entry("a", 0, 9093),
            // Refused, or with no address: left for their own lookup.
            entry("c", 15, 9095),
            entry("d", 0, 0),
        ]);
        let found = x.answer(answer, 4, AT).ok().expect("an answer");
        assert_eq!(found.ours.ok().as_deref(), Some("c:9093"));
        assert_eq!(found.others, [("b".to_owned(), "c:9094".to_owned())]);

        // Ours missing: looked up again, the others kept.
        let found = x
            .answer(batched(vec![entry("b", 0, 9094)]), 4, AT)
            .ok()
            .expect("an answer");
        assert!(matches!(
            found.ours,
            Err(Attempt::Again { relookup: true, ref why, .. })
                if why == "FindCoordinator did not answer for 'a'"
        ));
        assert_eq!(found.others.len(), 1);
    }

    #[test]
    fn every_error_is_read_for_a_transactional_id() {
        let x = FindCoordinator::Transaction {
            transactional_id: "a",
            others: &[],
        };
        let found = x.answer(single(0, None), 3, AT).ok().expect("an answer");
        assert_eq!(found.ours.ok().as_deref(), Some("c:9093"));
        // A coordinator loading or moved: looked up again, the broker's message kept.
        match ours(&x, single(14, Some("loading")), 3) {
            Attempt::Again {
                relookup: true,
                why,
                code: Some(14),
            } => assert_eq!(why, "FindCoordinator: loading"),
            _ => panic!("COORDINATOR_LOAD_IN_PROGRESS must look up again"),
        }
        assert!(matches!(
            ours(&x, single(16, None), 3),
            Attempt::Again {
                relookup: true,
                code: Some(16),
                ..
            }
        ));
        let e = stopped(ours(&x, single(53, None), 3));
        assert_eq!(e.kind(), ErrorKind::Unauthorized);
        assert!(
            e.message().contains("DESCRIBE ACL on TransactionalId 'a'"),
            "{e}"
        );
        // Anything else by the table, named with the broker's message where it sent one.
        let e = stopped(ours(&x, single(35, Some("too old")), 3));
        assert!(
            e.message()
                .starts_with("FindCoordinator for 'a' failed with error 35 (too old)"),
            "{e}"
        );
    }

    #[test]
    fn every_error_is_read_for_a_group() {
        let x = FindCoordinator::Group { group: "g" };
        let found = x
            .answer(batched(vec![entry("g", 0, 9093)]), 4, AT)
            .ok()
            .expect("an answer");
        assert_eq!(found.ours.ok().as_deref(), Some("c:9093"));
        assert!(found.others.is_empty());
        assert!(matches!(
            ours(&x, batched(vec![]), 4),
            Attempt::Again { relookup: true, ref why, .. }
                if why == "FindCoordinator did not answer for group 'g'"
        ));
        let e = stopped(ours(&x, single(30, None), 3));
        assert_eq!(e.kind(), ErrorKind::Unauthorized);
        assert!(e.message().contains("READ ACL on Group 'g'"), "{e}");
        // The broker's message is not used for a group; the table decides.
        match ours(&x, single(15, Some("ignored")), 3) {
            Attempt::Again {
                relookup: true,
                why,
                ..
            } => assert_eq!(
                why,
                "FindCoordinator for group 'g': error 15 (COORDINATOR_NOT_AVAILABLE)"
            ),
            _ => panic!("COORDINATOR_NOT_AVAILABLE must look up again"),
        }
    }

    #[test]
    fn a_broker_too_old_is_named_for_the_key_type() {
        let txn = FindCoordinator::Transaction {
            transactional_id: "a",
            others: &[],
        };
        let e = stopped(txn.unsupported(AT));
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.message().contains("Kafka 0.11 or newer"), "{e}");
        let e = stopped(FindCoordinator::Group { group: "g" }.unsupported(AT));
        assert_eq!(
            e.message(),
            "the broker at b:9092 does not support FindCoordinator"
        );
    }
}
