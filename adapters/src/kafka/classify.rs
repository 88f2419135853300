//! Kafka's error codes (from the native connections, and librdkafka's) and what the transport
//! does about each: the table below is the one place that decides it.
//!
//! The classes, and the [`ErrorKind`] each gives when the call gives up:
//! - **fenced**: a newer (producer id, epoch) holds the role; the term is over
//!   ([`ErrorKind::Fenced`]).
//! - **retry**: transient; the call is tried again after a pause until its deadline
//!   ([`ErrorKind::Retriable`]).
//! - **refresh**: transient, and the client's view of the cluster is stale: the partition
//!   leader or transaction coordinator is looked up again before the next try
//!   ([`ErrorKind::Retriable`]).
//! - **confirm**: the broker does not know the topic or partition. Kafka calls this retriable
//!   (a topic created a moment ago, a broker whose metadata lags under load), so it is refreshed
//!   and retried; it is reported as [`ErrorKind::Config`] only when a metadata check confirms
//!   it (the topic really is missing, or its partition count really differs), else as
//!   [`ErrorKind::Retriable`].
//! - **config**: the setup is wrong and retrying cannot help ([`ErrorKind::Config`]).
//! - **unauthorized**: the principal lacks an ACL or its credentials are wrong
//!   ([`ErrorKind::Unauthorized`]).
//! - **fatal**: the client sent something the broker cannot read, or librdkafka's state is
//!   unusable ([`ErrorKind::Fatal`]).
//!
//! "Kafka" is the Java client's view: retriable when the code's exception is a
//! `RetriableException` (`InvalidMetadataException` ones ask for a metadata refresh, as
//! librdkafka's `rd_kafka_err_action` does). Where this table differs, the row says why.
//!
//! | code | name | class | Kafka |
//! |---:|---|---|---|
//! | -1 | UNKNOWN_SERVER_ERROR | retry | not retriable; here a broker failure is retried until the deadline |
//! | 1 | OFFSET_OUT_OF_RANGE | retry | not retriable; the reader restarts at the log start |
//! | 2 | CORRUPT_MESSAGE | retry | retriable |
//! | 3 | UNKNOWN_TOPIC_OR_PARTITION | confirm | retriable, refresh |
//! | 5 | LEADER_NOT_AVAILABLE | refresh | retriable, refresh |
//! | 6 | NOT_LEADER_OR_FOLLOWER | refresh | retriable, refresh |
//! | 7 | REQUEST_TIMED_OUT | retry | retriable |
//! | 8 | BROKER_NOT_AVAILABLE | refresh | not retriable; librdkafka refreshes |
//! | 9 | REPLICA_NOT_AVAILABLE | refresh | retriable, refresh |
//! | 10 | MESSAGE_TOO_LARGE | config | not retriable |
//! | 13 | NETWORK_EXCEPTION | refresh | retriable, refresh |
//! | 14 | COORDINATOR_LOAD_IN_PROGRESS | retry | retriable |
//! | 15 | COORDINATOR_NOT_AVAILABLE | refresh | retriable |
//! | 16 | NOT_COORDINATOR | refresh | retriable |
//! | 17 | INVALID_TOPIC_EXCEPTION | config | not retriable |
//! | 18 | RECORD_LIST_TOO_LARGE | config | not retriable |
//! | 19 | NOT_ENOUGH_REPLICAS | retry | retriable |
//! | 20 | NOT_ENOUGH_REPLICAS_AFTER_APPEND | retry | retriable |
//! | 21 | INVALID_REQUIRED_ACKS | config | not retriable |
//! | 29 | TOPIC_AUTHORIZATION_FAILED | unauthorized | not retriable |
//! | 30 | GROUP_AUTHORIZATION_FAILED | unauthorized | not retriable |
//! | 31 | CLUSTER_AUTHORIZATION_FAILED | unauthorized | not retriable |
//! | 33 | UNSUPPORTED_SASL_MECHANISM | config | not retriable |
//! | 34 | ILLEGAL_SASL_STATE | config | not retriable |
//! | 35 | UNSUPPORTED_VERSION | config | not retriable |
//! | 37 | INVALID_PARTITIONS | config | not retriable |
//! | 38 | INVALID_REPLICATION_FACTOR | config | not retriable |
//! | 40 | INVALID_CONFIG | config | not retriable |
//! | 41 | NOT_CONTROLLER | refresh | retriable |
//! | 42 | INVALID_REQUEST | fatal | not retriable |
//! | 43 | UNSUPPORTED_FOR_MESSAGE_FORMAT | config | not retriable |
//! | 44 | POLICY_VIOLATION | config | not retriable |
//! | 45 | OUT_OF_ORDER_SEQUENCE_NUMBER | retry | not retriable; here the transaction is aborted and the sequence learned again |
//! | 46 | DUPLICATE_SEQUENCE_NUMBER | retry | not retriable; a produce takes it as written |
//! | 47 | INVALID_PRODUCER_EPOCH | fenced | not retriable (fenced) |
//! | 48 | INVALID_TXN_STATE | retry | not retriable; here the coordinator is asked whether the term is over |
//! | 49 | INVALID_PRODUCER_ID_MAPPING | fenced | not retriable |
//! | 50 | INVALID_TRANSACTION_TIMEOUT | config | not retriable |
//! | 51 | CONCURRENT_TRANSACTIONS | retry | retriable |
//! | 52 | TRANSACTION_COORDINATOR_FENCED | refresh | not retriable; the coordinator moved |
//! | 53 | TRANSACTIONAL_ID_AUTHORIZATION_FAILED | unauthorized | not retriable |
//! | 56 | KAFKA_STORAGE_ERROR | refresh | retriable, refresh |
//! | 58 | SASL_AUTHENTICATION_FAILED | unauthorized | not retriable |
//! | 59 | UNKNOWN_PRODUCER_ID | retry | not retriable; the next transaction starts its sequences again |
//! | 72 | LISTENER_NOT_FOUND | refresh | retriable, refresh |
//! | 74 | FENCED_LEADER_EPOCH | refresh | retriable, refresh |
//! | 75 | UNKNOWN_LEADER_EPOCH | refresh | retriable |
//! | 76 | UNSUPPORTED_COMPRESSION_TYPE | config | not retriable |
//! | 78 | OFFSET_NOT_AVAILABLE | refresh | retriable |
//! | 87 | INVALID_RECORD | config | not retriable |
//! | 89 | THROTTLING_QUOTA_EXCEEDED | retry | retriable |
//! | 90 | PRODUCER_FENCED | fenced | not retriable (fenced) |
//! | 100 | UNKNOWN_TOPIC_ID | confirm | retriable, refresh |
//! | 103 | INCONSISTENT_TOPIC_ID | refresh | retriable, refresh |
//! | 105 | TRANSACTIONAL_ID_NOT_FOUND | retry | not retriable; DescribeTransactions reads it as "no member ever took the role" |
//! | 120 | TRANSACTION_ABORTABLE | retry | not retriable; the transaction is aborted and the write tried again |
//! | -144 | librdkafka _FENCED | fenced | librdkafka: fatal (fenced) |
//! | -150 | librdkafka _FATAL | fatal | librdkafka: fatal |
//! | -169 | librdkafka _AUTHENTICATION | unauthorized | librdkafka: authentication failed |
//! | -186 | librdkafka _INVALID_ARG | config | librdkafka: an invalid argument |
//! | -188 | librdkafka _UNKNOWN_TOPIC | confirm | librdkafka: the topic is not in its metadata |
//! | -190 | librdkafka _UNKNOWN_PARTITION | confirm | librdkafka: the partition is not in its metadata |
//! | -199 | librdkafka _BAD_MSG | fatal | librdkafka: permanent |
//!
//! Every other code, of the broker or of librdkafka (timeouts, a broken connection, a full
//! queue), is **retry**.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::cluster::code;
use super::config::shown_value;
use crate::error::{ErrorKind, TransportError};

/// What the transport does about an error code: see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Fenced,
    Retry,
    Refresh,
    Confirm,
    Config,
    Unauthorized,
    Fatal,
}

impl Class {
    /// The kind an error of this class has when the call gives up on it (a `Confirm` error
    /// that no check confirmed is retriable).
    pub(crate) fn kind(self) -> ErrorKind {
        match self {
            Class::Fenced => ErrorKind::Fenced,
            Class::Retry | Class::Refresh | Class::Confirm => ErrorKind::Retriable,
            Class::Config => ErrorKind::Config,
            Class::Unauthorized => ErrorKind::Unauthorized,
            Class::Fatal => ErrorKind::Fatal,
        }
    }
}

/// The class of a Kafka protocol error code (or of a librdkafka code, negative below -100).
pub(crate) fn class(code: i32) -> Class {
    use Class::*;
    match code {
        47 | 49 | 90 | -144 => Fenced,
        3 | 100 | -188 | -190 => Confirm,
        5 | 6 | 8 | 9 | 13 | 15 | 16 | 41 | 52 | 56 | 72 | 74 | 75 | 78 | 103 => Refresh,
        10 | 17 | 18 | 21 | 33 | 34 | 35 | 37 | 38 | 40 | 43 | 44 | 50 | 76 | 87 | -186 => Config,
        29 | 30 | 31 | 53 | 58 | -169 => Unauthorized,
        42 | -150 | -199 => Fatal,
        _ => Retry,
    }
}

/// The Kafka protocol code an error of librdkafka's stands for: the broker's own code, or
/// UNKNOWN_TOPIC_OR_PARTITION for librdkafka's unknown topic and unknown partition; `None`
/// for its other local codes.
pub(crate) fn kafka_code(code: RDKafkaErrorCode) -> Option<i16> {
    match code as i32 {
        -188 | -190 => Some(code::UNKNOWN_TOPIC_OR_PARTITION),
        c if c >= -1 => i16::try_from(c).ok(),
        _ => None,
    }
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

/// The kind of a librdkafka error code when the call gives up on it.
pub(crate) fn kind_of(code: RDKafkaErrorCode) -> ErrorKind {
    class(code as i32).kind()
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

/// A [`TransportError`] for `error`, met while doing `what`.
pub(crate) fn from_kafka(what: &str, error: &KafkaError, bootstrap: &str) -> TransportError {
    match error {
        // A secret's value is not repeated (see `is_secret_property`); the error is not kept
        // as the source either, since its own `Display` shows the value.
        KafkaError::ClientConfig(_, desc, key, value) => TransportError::config(format!(
            "{what}: librdkafka refused property {key}={}: {desc}",
            shown_value(key, value)
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

/// A [`TransportError`] for a bare code, with its Kafka code when it has one.
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
    let error = TransportError::new(kind, message);
    match kafka_code(code) {
        Some(c) => error.with_kafka_code(c),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of the table in the module docs: (code, name, class).
    fn rows() -> Vec<(i32, String, String)> {
        include_str!("classify.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//! | "))
            .filter_map(|row| {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                let code = cells.first()?.parse().ok()?;
                Some((code, cells.get(1)?.to_string(), cells.get(2)?.to_string()))
            })
            .collect()
    }

    fn named(class: Class) -> &'static str {
        match class {
            Class::Fenced => "fenced",
            Class::Retry => "retry",
            Class::Refresh => "refresh",
            Class::Confirm => "confirm",
            Class::Config => "config",
            Class::Unauthorized => "unauthorized",
            Class::Fatal => "fatal",
        }
    }

    /// Every row of the documented table is what the code does, one assertion per row (the
    /// message names the row), and the table has every code the code singles out.
    #[test]
    fn every_row_of_the_table_holds() {
        let rows = rows();
        assert!(rows.len() >= 60, "{} rows", rows.len());
        for (code, name, documented) in &rows {
            assert_eq!(
                named(class(*code)),
                documented,
                "row {code} {name}: documented as {documented}"
            );
        }
        // A code classified otherwise than `retry` has a row.
        for code in -200..=130 {
            if class(code) != Class::Retry {
                assert!(
                    rows.iter().any(|(c, _, _)| *c == code),
                    "code {code} ({}) has no row",
                    named(class(code))
                );
            }
        }
    }

    /// The codes whose exceptions are `RetriableException`s in Kafka's Java client (Kafka 4.x,
    /// `org.apache.kafka.common.errors`) and that a client of these APIs can meet: none of them
    /// is ever a configuration, authorization or fatal error here.
    #[test]
    fn what_kafka_retries_is_never_final_here() {
        let kafka_retriable = [
            2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83,
            84, 88, 89, 100, 103, 106, 122, 123,
        ];
        for code in kafka_retriable {
            assert!(
                matches!(class(code), Class::Retry | Class::Refresh | Class::Confirm),
                "Kafka retries code {code}, here it is {:?}",
                class(code)
            );
            assert_eq!(class(code).kind(), ErrorKind::Retriable);
        }
    }

    #[test]
    fn librdkafka_codes_map_to_kafka_codes_and_kinds() {
        for code in [
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::ProducerFenced,
            RDKafkaErrorCode::InvalidProducerEpoch,
        ] {
            assert_eq!(kind_of(code), ErrorKind::Fenced);
        }
        assert_eq!(
            kind_of(RDKafkaErrorCode::TransactionCoordinatorFenced),
            ErrorKind::Retriable
        );
        // The codes of the overload incident: retriable, with UNKNOWN_TOPIC_OR_PARTITION as
        // their Kafka code, so that a metadata check decides.
        for code in [
            RDKafkaErrorCode::UnknownTopicOrPartition,
            RDKafkaErrorCode::UnknownTopic,
            RDKafkaErrorCode::UnknownPartition,
        ] {
            assert_eq!(kind_of(code), ErrorKind::Retriable, "{code:?}");
            assert_eq!(kafka_code(code), Some(3), "{code:?}");
            let e = from_code("reading", code, "unknown", "h:1");
            assert_eq!((e.kind(), e.kafka_code()), (ErrorKind::Retriable, Some(3)));
        }
        assert_eq!(kafka_code(RDKafkaErrorCode::OperationTimedOut), None);
        assert_eq!(
            kafka_code(RDKafkaErrorCode::InvalidTransactionalState),
            Some(48)
        );
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

#[cfg(test)]
mod redaction_tests {
    use rdkafka::types::RDKafkaConfRes;

    use super::*;

    /// librdkafka refuses a property it does not know (`sasl.jaas.config` is Java's): the
    /// message names the key, never a secret's value.
    #[test]
    fn a_refused_secret_property_is_named_without_its_value() {
        let refused = |key: &str, value: &str| {
            let e = KafkaError::ClientConfig(
                RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN,
                "No such configuration property".to_owned(),
                key.to_owned(),
                value.to_owned(),
            );
            let t = from_kafka("creating a client", &e, "127.0.0.1:9092");
            (t.to_string(), format!("{t:?}"))
        };
        let jaas = "PlainLoginModule required username=\"u\" password=\"s3cret-jaas\";";
        for (shown, debug) in [
            refused("sasl.jaas.config", jaas),
            refused("ssl.key.pem", "s3cret-jaas"),
        ] {
            assert!(shown.contains("<redacted>"), "{shown}");
            assert!(!shown.contains("s3cret-jaas"), "{shown}");
            assert!(!debug.contains("s3cret-jaas"), "{debug}");
        }
        let (shown, _) = refused("client.rack", "eu-west-1a");
        assert!(shown.contains("client.rack=eu-west-1a"), "{shown}");
    }
}
