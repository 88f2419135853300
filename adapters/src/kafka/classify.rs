//! Kafka's error codes and what the transport does about each: one table, on [`class`],
//! decides it, and a test asserts every row of it against the code.

use crate::error::ErrorKind;

/// What the transport does about an error code, and the [`ErrorKind`] each gives when the
/// call gives up:
/// - **fenced**: a newer (producer id, epoch) holds the role; the term is over
///   ([`ErrorKind::Fenced`]).
/// - **retry**: transient; the call is tried again after a pause until its deadline
///   ([`ErrorKind::Retriable`]).
/// - **refresh**: transient, and the client's view of the cluster is stale: the partition
///   leader or transaction coordinator is looked up again before the next try
///   ([`ErrorKind::Retriable`]).
/// - **confirm**: the broker does not know the topic or partition. Kafka calls this retriable
///   (a topic created a moment ago, a broker whose metadata lags under load), so it is refreshed
///   and retried; it is reported as [`ErrorKind::Config`] only when a metadata check confirms
///   it (the topic really is missing, or its partition count really differs), else as
///   [`ErrorKind::Retriable`].
/// - **config**: the setup is wrong and retrying cannot help ([`ErrorKind::Config`]).
/// - **unauthorized**: the principal lacks an ACL or its credentials are wrong
///   ([`ErrorKind::Unauthorized`]).
/// - **fatal**: the client sent something the broker cannot read ([`ErrorKind::Fatal`]).
///
/// "Kafka" is the Java client's view: retriable when the code's exception is a
/// `RetriableException` (`InvalidMetadataException` ones ask for a metadata refresh, as
/// librdkafka's `rd_kafka_err_action` does). Where the table on [`class`] differs, the row
/// says why.
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

/// The class of a Kafka protocol error code:
///
/// | code | name | class | Kafka |
/// |---:|---|---|---|
/// | -1 | UNKNOWN_SERVER_ERROR | retry | not retriable; here a broker failure is retried until the deadline |
/// | 1 | OFFSET_OUT_OF_RANGE | retry | not retriable; the reader restarts at the log start |
/// | 2 | CORRUPT_MESSAGE | retry | retriable |
/// | 3 | UNKNOWN_TOPIC_OR_PARTITION | confirm | retriable, refresh |
/// | 5 | LEADER_NOT_AVAILABLE | refresh | retriable, refresh |
/// | 6 | NOT_LEADER_OR_FOLLOWER | refresh | retriable, refresh |
/// | 7 | REQUEST_TIMED_OUT | retry | retriable |
/// | 8 | BROKER_NOT_AVAILABLE | refresh | not retriable; librdkafka refreshes |
/// | 9 | REPLICA_NOT_AVAILABLE | refresh | retriable, refresh |
/// | 10 | MESSAGE_TOO_LARGE | config | not retriable |
/// | 13 | NETWORK_EXCEPTION | refresh | retriable, refresh |
/// | 14 | COORDINATOR_LOAD_IN_PROGRESS | retry | retriable |
/// | 15 | COORDINATOR_NOT_AVAILABLE | refresh | retriable |
/// | 16 | NOT_COORDINATOR | refresh | retriable |
/// | 17 | INVALID_TOPIC_EXCEPTION | config | not retriable |
/// | 18 | RECORD_LIST_TOO_LARGE | config | not retriable |
/// | 19 | NOT_ENOUGH_REPLICAS | retry | retriable |
/// | 20 | NOT_ENOUGH_REPLICAS_AFTER_APPEND | retry | retriable |
/// | 21 | INVALID_REQUIRED_ACKS | config | not retriable |
/// | 29 | TOPIC_AUTHORIZATION_FAILED | unauthorized | not retriable |
/// | 30 | GROUP_AUTHORIZATION_FAILED | unauthorized | not retriable |
/// | 31 | CLUSTER_AUTHORIZATION_FAILED | unauthorized | not retriable |
/// | 33 | UNSUPPORTED_SASL_MECHANISM | config | not retriable |
/// | 34 | ILLEGAL_SASL_STATE | config | not retriable |
/// | 35 | UNSUPPORTED_VERSION | config | not retriable |
/// | 37 | INVALID_PARTITIONS | config | not retriable |
/// | 38 | INVALID_REPLICATION_FACTOR | config | not retriable |
/// | 40 | INVALID_CONFIG | config | not retriable |
/// | 41 | NOT_CONTROLLER | refresh | retriable |
/// | 42 | INVALID_REQUEST | fatal | not retriable |
/// | 43 | UNSUPPORTED_FOR_MESSAGE_FORMAT | config | not retriable |
/// | 44 | POLICY_VIOLATION | config | not retriable |
/// | 45 | OUT_OF_ORDER_SEQUENCE_NUMBER | retry | not retriable; here the transaction is aborted and the sequence learned again |
/// | 46 | DUPLICATE_SEQUENCE_NUMBER | retry | not retriable; a produce takes it as written |
/// | 47 | INVALID_PRODUCER_EPOCH | fenced | not retriable (fenced) |
/// | 48 | INVALID_TXN_STATE | retry | not retriable; here the coordinator is asked whether the term is over |
/// | 49 | INVALID_PRODUCER_ID_MAPPING | fenced | not retriable |
/// | 50 | INVALID_TRANSACTION_TIMEOUT | config | not retriable |
/// | 51 | CONCURRENT_TRANSACTIONS | retry | retriable |
/// | 52 | TRANSACTION_COORDINATOR_FENCED | refresh | not retriable; the coordinator moved |
/// | 53 | TRANSACTIONAL_ID_AUTHORIZATION_FAILED | unauthorized | not retriable |
/// | 56 | KAFKA_STORAGE_ERROR | refresh | retriable, refresh |
/// | 58 | SASL_AUTHENTICATION_FAILED | unauthorized | not retriable |
/// | 59 | UNKNOWN_PRODUCER_ID | retry | not retriable; the next transaction starts its sequences again |
/// | 72 | LISTENER_NOT_FOUND | refresh | retriable, refresh |
/// | 74 | FENCED_LEADER_EPOCH | refresh | retriable, refresh |
/// | 75 | UNKNOWN_LEADER_EPOCH | refresh | retriable |
/// | 76 | UNSUPPORTED_COMPRESSION_TYPE | config | not retriable |
/// | 78 | OFFSET_NOT_AVAILABLE | refresh | retriable |
/// | 87 | INVALID_RECORD | config | not retriable |
/// | 89 | THROTTLING_QUOTA_EXCEEDED | retry | retriable |
/// | 90 | PRODUCER_FENCED | fenced | not retriable (fenced) |
/// | 100 | UNKNOWN_TOPIC_ID | confirm | retriable, refresh |
/// | 103 | INCONSISTENT_TOPIC_ID | refresh | retriable, refresh |
/// | 105 | TRANSACTIONAL_ID_NOT_FOUND | retry | not retriable; DescribeTransactions reads it as "no member ever took the role" |
/// | 120 | TRANSACTION_ABORTABLE | retry | not retriable; the transaction is aborted and the write tried again |
///
/// Every other code is **retry**.
pub(crate) fn class(code: i32) -> Class {
    use Class::*;
    match code {
        47 | 49 | 90 => Fenced,
        3 | 100 => Confirm,
        5 | 6 | 8 | 9 | 13 | 15 | 16 | 41 | 52 | 56 | 72 | 74 | 75 | 78 | 103 => Refresh,
        10 | 17 | 18 | 21 | 33 | 34 | 35 | 37 | 38 | 40 | 43 | 44 | 50 | 76 | 87 => Config,
        29 | 30 | 31 | 53 | 58 => Unauthorized,
        42 => Fatal,
        _ => Retry,
    }
}

/// Kafka's error codes, as kafka-protocol names them ([`E`]): none is declared here.
pub(crate) mod code {
    pub(crate) use kafka_protocol::error::ResponseError as E;

    /// No error.
    pub(crate) const NONE: i16 = 0;

    /// The error `code` names: `None` for [`NONE`].
    pub(crate) fn error(code: i16) -> Option<E> {
        E::try_from_code(code)
    }

    /// The name Kafka gives `code` (`UNKNOWN_TOPIC_OR_PARTITION`), for messages.
    pub(crate) fn name(code: i16) -> String {
        match error(code) {
            None => "NONE".to_owned(),
            Some(E::Unknown(_)) => "an error code this client does not name".to_owned(),
            Some(e) => {
                // kafka-protocol names it in camel case (`UnknownTopicOrPartition`).
                let mut name = String::new();
                for (i, c) in format!("{e}").chars().enumerate() {
                    if c.is_ascii_uppercase() && i > 0 {
                        name.push('_');
                    }
                    name.push(c.to_ascii_uppercase());
                }
                name
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of the table in the docs of [`class`]: (code, name, class).
    fn rows() -> Vec<(i32, String, String)> {
        include_str!("classify.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("/// | "))
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
        assert!(rows.len() >= 50, "{} rows", rows.len());
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
}
