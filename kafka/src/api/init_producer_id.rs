//! InitProducerId (API key 22): a producer id and epoch from the broker. With a transactional
//! id (the role) the transaction coordinator mints the role's next epoch, fencing every
//! earlier holder: that pair is the fencing token. Without one, any broker hands out a fresh id
//! for an idempotent producer (the registrar's).

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_coordination_transport::error::TransportError;
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::{Attempt, Exchange};
use crate::classify::code;

/// The highest version this client sends (below transaction version 2's v6).
pub(crate) const MAX_VERSION: i16 = 4;

/// Whom the producer id is for.
pub(crate) enum InitProducerId<'a> {
    /// The role's transactional producer: its next epoch, with the role's transactions timing
    /// out after `timeout_ms` (the lease duration).
    Role { role: &'a Role, timeout_ms: i32 },
    /// An idempotent producer writing to `topic` (named in the ACL an error asks for).
    Idempotent { topic: &'a str },
}

impl Exchange for InitProducerId<'_> {
    type Request = InitProducerIdRequest;
    type Output = FencingToken;
    const NAME: &'static str = "InitProducerId";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> InitProducerIdRequest {
        let (id, timeout_ms) = match self {
            InitProducerId::Role { role, timeout_ms } => (
                Some(TransactionalId(StrBytes::from_string(
                    role.as_str().to_owned(),
                ))),
                *timeout_ms,
            ),
            InitProducerId::Idempotent { .. } => (None, i32::MAX),
        };
        InitProducerIdRequest::default()
            .with_transactional_id(id)
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    }

    fn answer(
        &self,
        answer: InitProducerIdResponse,
        _version: i16,
        at: &str,
    ) -> Result<FencingToken, Attempt> {
        let error = answer.error_code;
        let Some(e) = code::error(error) else {
            return Ok(FencingToken::new(
                answer.producer_id.0,
                answer.producer_epoch,
            ));
        };
        match self {
            InitProducerId::Role { role, timeout_ms } => Err(match e {
                // The coordinator is aborting the previous holder's open transaction (with a
                // fencing bump) or completing a transition: ask again.
                code::E::ConcurrentTransactions => Attempt::from_code(
                    error,
                    format!(
                        "{at}: the coordinator is ending the previous holder's transaction \
                         (CONCURRENT_TRANSACTIONS)"
                    ),
                ),
                code::E::InvalidTransactionTimeout => Attempt::Stop(
                    TransportError::config(format!(
                        "the transaction timeout of role '{role}' ({timeout_ms} ms, the lease \
                         duration) exceeds the brokers' transaction.max.timeout.ms (MAX); use a \
                         shorter lease or raise transaction.max.timeout.ms on the brokers \
                         (INVALID_TRANSACTION_TIMEOUT)"
                    ))
                    .with_kafka_code(error),
                ),
                code::E::TransactionalIdAuthorizationFailed => {
                    Attempt::Stop(TransportError::unauthorized(format!(
                        "InitProducerId for role '{role}': the principal needs the WRITE ACL on \
                         TransactionalId '{role}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
                    )))
                }
                code::E::ClusterAuthorizationFailed => {
                    Attempt::Stop(TransportError::unauthorized(format!(
                        "InitProducerId for role '{role}': the principal needs the \
                         IDEMPOTENT_WRITE ACL on the Cluster (CLUSTER_AUTHORIZATION_FAILED)"
                    )))
                }
                _ => Attempt::from_code(
                    error,
                    format!(
                        "InitProducerId for role '{role}' at {at} failed with error {error} ({})",
                        code::name(error)
                    ),
                ),
            }),
            InitProducerId::Idempotent { topic } => Err(match e {
                code::E::ClusterAuthorizationFailed => Attempt::Stop(
                    TransportError::unauthorized(format!(
                        "InitProducerId for the registration producer: the principal needs the \
                         WRITE ACL on Topic '{topic}' (an idempotent producer's id needs WRITE \
                         on a topic, or IDEMPOTENT_WRITE on the Cluster before Kafka 2.8) \
                         (CLUSTER_AUTHORIZATION_FAILED)"
                    ))
                    .with_kafka_code(error),
                ),
                _ => Attempt::from_code(
                    error,
                    format!(
                        "InitProducerId for the registration producer at {at} failed with error \
                         {error} ({})",
                        code::name(error)
                    ),
                ),
            }),
        }
    }

    fn unsupported(&self, at: &str) -> Attempt {
        let what = match self {
            InitProducerId::Role { .. } => "transactional InitProducerId",
            InitProducerId::Idempotent { .. } => "InitProducerId",
        };
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} does not support {what}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role() -> Role {
        Role::new("orders").unwrap()
    }

    fn answered(error: i16) -> InitProducerIdResponse {
        InitProducerIdResponse::default()
            .with_error_code(error)
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(3)
    }

    #[test]
    fn a_role_asks_with_its_transactional_id_and_lease_as_timeout() {
        let role = role();
        let req = InitProducerId::Role {
            role: &role,
            timeout_ms: 10_000,
        }
        .request(MAX_VERSION);
        assert_eq!(req.transactional_id.unwrap().0.as_str(), "orders");
        assert_eq!(req.transaction_timeout_ms, 10_000);
        assert_eq!((req.producer_id.0, req.producer_epoch), (-1, -1));
        let idem = InitProducerId::Idempotent { topic: "t" }.request(MAX_VERSION);
        assert!(idem.transactional_id.is_none());
    }

    #[test]
    fn a_good_answer_is_the_pair_and_every_error_is_read_for_the_role() {
        let role = role();
        let x = InitProducerId::Role {
            role: &role,
            timeout_ms: 10_000,
        };
        assert_eq!(
            x.answer(answered(0), MAX_VERSION, "b:9092").ok(),
            Some(FencingToken::new(7, 3))
        );
        // CONCURRENT_TRANSACTIONS: asked again.
        assert!(matches!(
            x.answer(answered(51), MAX_VERSION, "b:9092"),
            Err(Attempt::Again { .. })
        ));
        // INVALID_TRANSACTION_TIMEOUT names the lease and the broker setting.
        match x.answer(answered(50), MAX_VERSION, "b:9092") {
            Err(Attempt::Stop(e)) => {
                assert!(e.to_string().contains("transaction.max.timeout.ms"), "{e}");
                assert_eq!(e.kafka_code(), Some(50));
            }
            _ => panic!("INVALID_TRANSACTION_TIMEOUT must stop the call"),
        }
        // TRANSACTIONAL_ID_AUTHORIZATION_FAILED names the ACL to grant.
        match x.answer(answered(53), MAX_VERSION, "b:9092") {
            Err(Attempt::Stop(e)) => assert!(e.to_string().contains("TransactionalId 'orders'")),
            _ => panic!("an authorization error must stop the call"),
        }
        // COORDINATOR_NOT_AVAILABLE: looked up again.
        assert!(matches!(
            x.answer(answered(15), MAX_VERSION, "b:9092"),
            Err(Attempt::Again { relookup: true, .. })
        ));
    }

    #[test]
    fn an_idempotent_producer_refused_names_the_topic_acl() {
        let x = InitProducerId::Idempotent {
            topic: "__coordination_state",
        };
        match x.answer(answered(31), MAX_VERSION, "b:9092") {
            Err(Attempt::Stop(e)) => {
                assert!(
                    e.to_string().contains("Topic '__coordination_state'"),
                    "{e}"
                )
            }
            _ => panic!("CLUSTER_AUTHORIZATION_FAILED must stop the call"),
        }
    }
}
