//! From librdkafka's errors to the kinds the machine acts on.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::error::{ErrorKind, TransportError};

/// The codes that mean a newer (producer id, epoch) exists for the transactional id:
/// librdkafka's fatal `Fenced` (-144), `PRODUCER_FENCED` (90), `INVALID_PRODUCER_EPOCH` (47).
pub(crate) fn is_fencing(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

/// Codes that say the cluster could not be reached or did not answer in time.
pub(crate) fn is_unreachable(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::MessageTimedOut
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::AllBrokersDown
            | RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::Resolve
            | RDKafkaErrorCode::TimedOutQueue
            | RDKafkaErrorCode::NetworkException
    )
}

/// The kind of an error that is neither fencing nor a transaction-state question.
pub(crate) fn kind_of(code: RDKafkaErrorCode) -> ErrorKind {
    use RDKafkaErrorCode as C;
    if is_fencing(code) {
        return ErrorKind::Fenced;
    }
    match code {
        C::TopicAuthorizationFailed
        | C::GroupAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::TransactionalIdAuthorizationFailed
        | C::SaslAuthenticationFailed
        | C::Authentication => ErrorKind::Unauthorized,
        C::UnknownTopicOrPartition
        | C::UnknownTopic
        | C::UnknownPartition
        | C::InvalidTransactionTimeout
        | C::InvalidConfig
        | C::InvalidArgument
        | C::InvalidReplicationFactor
        | C::InvalidPartitions
        | C::PolicyViolation
        | C::UnsupportedFeature
        | C::UnsupportedVersion
        | C::UnsupportedCompressionType
        | C::MessageSizeTooLarge
        | C::InvalidRecord => ErrorKind::Config,
        C::Fatal | C::InvalidMessage | C::BadMessage => ErrorKind::Fatal,
        _ => ErrorKind::Retriable,
    }
}

/// What to do about an ACL error, for messages.
pub(crate) fn acl_hint(
    code: RDKafkaErrorCode,
    topic: &str,
    transactional_id: Option<&str>,
) -> String {
    use RDKafkaErrorCode as C;
    match (code, transactional_id) {
        (C::TransactionalIdAuthorizationFailed, Some(id)) => {
            format!("the principal needs the WRITE and DESCRIBE ACLs on TransactionalId '{id}'")
        }
        (C::TopicAuthorizationFailed, _) => {
            format!("the principal needs the READ, WRITE and DESCRIBE ACLs on topic '{topic}'")
        }
        (C::ClusterAuthorizationFailed, _) => {
            "the principal needs the IDEMPOTENT_WRITE ACL on the cluster (or CREATE for topic creation)"
                .to_owned()
        }
        (C::GroupAuthorizationFailed, _) => {
            "the principal needs the READ ACL on the reader's consumer group (group.id)".to_owned()
        }
        _ => "check the principal's ACLs and credentials".to_owned(),
    }
}

/// An authorization failure of the registration producer (`code`) on `topic`, the state topic:
/// it writes there, and its producer id (the producer is idempotent) needs WRITE on some topic
/// (Kafka 2.8 and newer) or IDEMPOTENT_WRITE on the cluster.
pub(crate) fn registration_unauthorized(
    what: &str,
    code: RDKafkaErrorCode,
    detail: &str,
    topic: &str,
) -> TransportError {
    let why = match code {
        RDKafkaErrorCode::ClusterAuthorizationFailed => {
            " (the idempotent producer's producer id needs WRITE on a topic, or IDEMPOTENT_WRITE \
             on the Cluster before Kafka 2.8)"
        }
        _ => "",
    };
    TransportError::unauthorized(format!(
        "{what}: {detail}: the principal needs the WRITE ACL on Topic '{topic}'{why}"
    ))
}

/// A [`TransportError`] for `error`, met while doing `what`.
pub(crate) fn from_kafka(what: &str, error: &KafkaError, bootstrap: &str) -> TransportError {
    match error {
        KafkaError::ClientConfig(_, desc, key, value) => TransportError::config(format!(
            "{what}: librdkafka refused property {key}={value}: {desc}"
        )),
        KafkaError::ClientCreation(msg) => TransportError::config(format!(
            "{what}: could not create the librdkafka client: {msg}"
        )),
        KafkaError::MessageConsumptionFatal(_) => {
            TransportError::fatal(format!("{what}: {error}")).with_source(error.clone())
        }
        _ => match error.rdkafka_error_code() {
            Some(code) => {
                from_code(what, code, &error.to_string(), bootstrap).with_source(error.clone())
            }
            None => {
                TransportError::retriable(format!("{what}: {error}")).with_source(error.clone())
            }
        },
    }
}

/// A [`TransportError`] for a bare code.
pub(crate) fn from_code(
    what: &str,
    code: RDKafkaErrorCode,
    detail: &str,
    bootstrap: &str,
) -> TransportError {
    let kind = kind_of(code);
    let message = match kind {
        ErrorKind::Unauthorized => format!("{what}: {detail} ({})", acl_hint(code, "", None)),
        _ if is_unreachable(code) => {
            format!("{what}: no answer from the Kafka cluster at {bootstrap}: {detail}")
        }
        _ => format!("{what}: {detail}"),
    };
    TransportError::new(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_fencing_codes_are_fenced() {
        for code in [
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::ProducerFenced,
            RDKafkaErrorCode::InvalidProducerEpoch,
        ] {
            assert!(is_fencing(code));
            assert_eq!(kind_of(code), ErrorKind::Fenced);
        }
        assert!(!is_fencing(RDKafkaErrorCode::TransactionCoordinatorFenced));
        assert_eq!(
            kind_of(RDKafkaErrorCode::NotCoordinator),
            ErrorKind::Retriable
        );
        assert_eq!(
            kind_of(RDKafkaErrorCode::InvalidTransactionTimeout),
            ErrorKind::Config
        );
        assert_eq!(
            kind_of(RDKafkaErrorCode::TransactionalIdAuthorizationFailed),
            ErrorKind::Unauthorized
        );
    }

    #[test]
    fn a_timeout_names_the_cluster() {
        let e = from_code(
            "reading",
            RDKafkaErrorCode::OperationTimedOut,
            "timed out",
            "h:1",
        );
        assert!(e.is_retriable());
        assert!(e.message().contains("h:1"), "{}", e.message());
    }
}
