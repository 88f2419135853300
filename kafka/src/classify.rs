//! Kafka's error codes and what the transport does about each: one table, on [`class`],
//! decides it, and a test asserts every row of it against the code.

use kafka_coordination_transport::error::ErrorKind;

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
/// - **fatal**: the client sent something the broker cannot read, or the broker answered a
///   code no request of this client can get ([`ErrorKind::Fatal`]).
///
/// A call that meets a code of the last four classes ends at once, with a message that says
/// what to fix ([`remedy`]); only the first four are tried again.
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

/// The class of a Kafka protocol error code: every code kafka-protocol names has a row (a
/// test checks it), with Kafka's own verdict. "Never sent" marks a code of an API this client
/// does not send, or of a request it sends otherwise (the committer is outside the group):
/// a broker answering one did not read the request as sent, and retrying cannot change that.
///
/// | code | name | class | Kafka |
/// |---:|---|---|---|
/// | -1 | UNKNOWN_SERVER_ERROR | retry | not retriable; here a broker failure is retried until the deadline |
/// | 1 | OFFSET_OUT_OF_RANGE | retry | not retriable; the reader restarts at the log start |
/// | 2 | CORRUPT_MESSAGE | retry | retriable (a batch damaged on the way) |
/// | 3 | UNKNOWN_TOPIC_OR_PARTITION | confirm | retriable, refresh |
/// | 4 | INVALID_FETCH_SIZE | fatal | not retriable; the client sends a positive fetch size, so the broker did not read the request as sent |
/// | 5 | LEADER_NOT_AVAILABLE | refresh | retriable, refresh |
/// | 6 | NOT_LEADER_OR_FOLLOWER | refresh | retriable, refresh |
/// | 7 | REQUEST_TIMED_OUT | retry | retriable |
/// | 8 | BROKER_NOT_AVAILABLE | refresh | not retriable; librdkafka refreshes |
/// | 9 | REPLICA_NOT_AVAILABLE | refresh | retriable, refresh |
/// | 10 | MESSAGE_TOO_LARGE | config | not retriable; the same batch is refused again |
/// | 11 | STALE_CONTROLLER_EPOCH | fatal | not retriable; answered between brokers only |
/// | 12 | OFFSET_METADATA_TOO_LARGE | config | not retriable; the same metadata is refused again |
/// | 13 | NETWORK_EXCEPTION | refresh | retriable, refresh |
/// | 14 | COORDINATOR_LOAD_IN_PROGRESS | retry | retriable |
/// | 15 | COORDINATOR_NOT_AVAILABLE | refresh | retriable |
/// | 16 | NOT_COORDINATOR | refresh | retriable |
/// | 17 | INVALID_TOPIC_EXCEPTION | config | not retriable |
/// | 18 | RECORD_LIST_TOO_LARGE | config | not retriable |
/// | 19 | NOT_ENOUGH_REPLICAS | retry | retriable |
/// | 20 | NOT_ENOUGH_REPLICAS_AFTER_APPEND | retry | retriable |
/// | 21 | INVALID_REQUIRED_ACKS | config | not retriable |
/// | 22 | ILLEGAL_GENERATION | fatal | not retriable; offsets are committed from outside the group (generation -1), which has no generation to be wrong |
/// | 23 | INCONSISTENT_GROUP_PROTOCOL | fatal | not retriable; JoinGroup only, never sent |
/// | 24 | INVALID_GROUP_ID | config | not retriable; the group id given is refused |
/// | 25 | UNKNOWN_MEMBER_ID | fatal | not retriable; offsets are committed with no member id, which has no member to be unknown |
/// | 26 | INVALID_SESSION_TIMEOUT | fatal | not retriable; JoinGroup only, never sent |
/// | 27 | REBALANCE_IN_PROGRESS | fatal | not retriable; a member's answer, and the committer is no member |
/// | 28 | INVALID_COMMIT_OFFSET_SIZE | config | not retriable; the same offsets are refused again |
/// | 29 | TOPIC_AUTHORIZATION_FAILED | unauthorized | not retriable |
/// | 30 | GROUP_AUTHORIZATION_FAILED | unauthorized | not retriable |
/// | 31 | CLUSTER_AUTHORIZATION_FAILED | unauthorized | not retriable |
/// | 32 | INVALID_TIMESTAMP | config | not retriable; a batch is sent again with the timestamps it was stamped with |
/// | 33 | UNSUPPORTED_SASL_MECHANISM | config | not retriable |
/// | 34 | ILLEGAL_SASL_STATE | config | not retriable |
/// | 35 | UNSUPPORTED_VERSION | config | not retriable |
/// | 36 | TOPIC_ALREADY_EXISTS | fatal | not retriable; CreateTopics takes it as success before this table, nothing else gets it |
/// | 37 | INVALID_PARTITIONS | config | not retriable |
/// | 38 | INVALID_REPLICATION_FACTOR | config | not retriable |
/// | 39 | INVALID_REPLICA_ASSIGNMENT | config | not retriable |
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
/// | 54 | SECURITY_DISABLED | config | not retriable; the brokers run without the security feature asked for |
/// | 55 | OPERATION_NOT_ATTEMPTED | retry | not retriable; it stands beside the partition that failed, whose code decides; alone, nothing was done |
/// | 56 | KAFKA_STORAGE_ERROR | refresh | retriable, refresh |
/// | 57 | LOG_DIR_NOT_FOUND | fatal | not retriable; log-directory admin APIs, never sent |
/// | 58 | SASL_AUTHENTICATION_FAILED | unauthorized | not retriable |
/// | 59 | UNKNOWN_PRODUCER_ID | retry | not retriable; the next transaction starts its sequences again |
/// | 60 | REASSIGNMENT_IN_PROGRESS | fatal | not retriable; reassignment admin APIs, never sent |
/// | 61 | DELEGATION_TOKEN_AUTH_DISABLED | fatal | not retriable; delegation-token APIs, never sent |
/// | 62 | DELEGATION_TOKEN_NOT_FOUND | fatal | not retriable; delegation-token APIs, never sent |
/// | 63 | DELEGATION_TOKEN_OWNER_MISMATCH | fatal | not retriable; delegation-token APIs, never sent |
/// | 64 | DELEGATION_TOKEN_REQUEST_NOT_ALLOWED | fatal | not retriable; delegation-token APIs, never sent |
/// | 65 | DELEGATION_TOKEN_AUTHORIZATION_FAILED | fatal | not retriable; delegation-token APIs, never sent |
/// | 66 | DELEGATION_TOKEN_EXPIRED | fatal | not retriable; delegation-token APIs, never sent |
/// | 67 | INVALID_PRINCIPAL_TYPE | fatal | not retriable; ACL admin APIs, never sent |
/// | 68 | NON_EMPTY_GROUP | fatal | not retriable; DeleteGroups only, never sent |
/// | 69 | GROUP_ID_NOT_FOUND | fatal | not retriable; group admin APIs, never sent |
/// | 70 | FETCH_SESSION_ID_NOT_FOUND | retry | retriable |
/// | 71 | INVALID_FETCH_SESSION_EPOCH | retry | retriable |
/// | 72 | LISTENER_NOT_FOUND | refresh | retriable, refresh |
/// | 73 | TOPIC_DELETION_DISABLED | fatal | not retriable; DeleteTopics, never sent by the library |
/// | 74 | FENCED_LEADER_EPOCH | refresh | retriable, refresh |
/// | 75 | UNKNOWN_LEADER_EPOCH | refresh | retriable |
/// | 76 | UNSUPPORTED_COMPRESSION_TYPE | config | not retriable |
/// | 77 | STALE_BROKER_EPOCH | fatal | not retriable; answered between brokers only |
/// | 78 | OFFSET_NOT_AVAILABLE | refresh | retriable |
/// | 79 | MEMBER_ID_REQUIRED | fatal | not retriable; JoinGroup only, never sent |
/// | 80 | PREFERRED_LEADER_NOT_AVAILABLE | retry | retriable |
/// | 81 | GROUP_MAX_SIZE_REACHED | fatal | not retriable; JoinGroup only, never sent |
/// | 82 | FENCED_INSTANCE_ID | fatal | not retriable; offsets are committed with no group instance id |
/// | 83 | ELIGIBLE_LEADERS_NOT_AVAILABLE | retry | retriable |
/// | 84 | ELECTION_NOT_NEEDED | retry | retriable |
/// | 85 | NO_REASSIGNMENT_IN_PROGRESS | fatal | not retriable; reassignment admin APIs, never sent |
/// | 86 | GROUP_SUBSCRIBED_TO_TOPIC | fatal | not retriable; OffsetDelete only, never sent |
/// | 87 | INVALID_RECORD | config | not retriable |
/// | 88 | UNSTABLE_OFFSET_COMMIT | retry | retriable |
/// | 89 | THROTTLING_QUOTA_EXCEEDED | retry | retriable |
/// | 90 | PRODUCER_FENCED | fenced | not retriable (fenced) |
/// | 91 | RESOURCE_NOT_FOUND | fatal | not retriable; config and quota admin APIs, never sent |
/// | 92 | DUPLICATE_RESOURCE | fatal | not retriable; config and quota admin APIs, never sent |
/// | 93 | UNACCEPTABLE_CREDENTIAL | fatal | not retriable; SCRAM credential admin APIs, never sent |
/// | 94 | INCONSISTENT_VOTER_SET | fatal | not retriable; answered between KRaft voters only |
/// | 95 | INVALID_UPDATE_VERSION | fatal | not retriable; UpdateFeatures only, never sent |
/// | 96 | FEATURE_UPDATE_FAILED | fatal | not retriable; UpdateFeatures only, never sent |
/// | 97 | PRINCIPAL_DESERIALIZATION_FAILURE | config | not retriable; the brokers' own security setup is broken |
/// | 98 | SNAPSHOT_NOT_FOUND | fatal | not retriable; answered between KRaft voters only |
/// | 99 | POSITION_OUT_OF_RANGE | fatal | not retriable; answered between KRaft voters only |
/// | 100 | UNKNOWN_TOPIC_ID | confirm | retriable, refresh |
/// | 101 | DUPLICATE_BROKER_REGISTRATION | fatal | not retriable; answered between brokers only |
/// | 102 | BROKER_ID_NOT_REGISTERED | fatal | not retriable; answered between brokers only |
/// | 103 | INCONSISTENT_TOPIC_ID | refresh | retriable, refresh |
/// | 104 | INCONSISTENT_CLUSTER_ID | fatal | not retriable; answered between brokers only |
/// | 105 | TRANSACTIONAL_ID_NOT_FOUND | retry | not retriable; DescribeTransactions reads it as "no member ever took the role" |
/// | 106 | FETCH_SESSION_TOPIC_ID_ERROR | retry | retriable |
/// | 107 | INELIGIBLE_REPLICA | fatal | not retriable; answered between brokers only |
/// | 108 | NEW_LEADER_ELECTED | fatal | not retriable; answered between brokers only |
/// | 109 | OFFSET_MOVED_TO_TIERED_STORAGE | fatal | not retriable; answered to followers only |
/// | 110 | FENCED_MEMBER_EPOCH | fatal | not retriable; consumer-group heartbeat APIs, never sent |
/// | 111 | UNRELEASED_INSTANCE_ID | fatal | not retriable; consumer-group heartbeat APIs, never sent |
/// | 112 | UNSUPPORTED_ASSIGNOR | fatal | not retriable; consumer-group heartbeat APIs, never sent |
/// | 113 | STALE_MEMBER_EPOCH | fatal | not retriable; consumer-group heartbeat APIs, never sent |
/// | 114 | MISMATCHED_ENDPOINT_TYPE | config | not retriable; the bootstrap address is a controller's listener, not a broker's |
/// | 115 | UNSUPPORTED_ENDPOINT_TYPE | config | not retriable; the bootstrap address is a controller's listener, not a broker's |
/// | 116 | UNKNOWN_CONTROLLER_ID | fatal | not retriable; answered between controllers only |
/// | 117 | UNKNOWN_SUBSCRIPTION_ID | fatal | not retriable; client telemetry APIs, never sent |
/// | 118 | TELEMETRY_TOO_LARGE | fatal | not retriable; client telemetry APIs, never sent |
/// | 119 | INVALID_REGISTRATION | fatal | not retriable; answered between brokers only |
/// | 120 | TRANSACTION_ABORTABLE | retry | not retriable; the transaction is aborted and the write tried again |
/// | 121 | INVALID_RECORD_STATE | fatal | not retriable; share-group APIs, never sent |
/// | 122 | SHARE_SESSION_NOT_FOUND | retry | retriable |
/// | 123 | INVALID_SHARE_SESSION_EPOCH | retry | retriable |
/// | 124 | FENCED_STATE_EPOCH | fatal | not retriable; share-group APIs, never sent |
/// | 125 | INVALID_VOTER_KEY | fatal | not retriable; answered between KRaft voters only |
/// | 126 | DUPLICATE_VOTER | fatal | not retriable; answered between KRaft voters only |
/// | 127 | VOTER_NOT_FOUND | fatal | not retriable; answered between KRaft voters only |
/// | 128 | INVALID_REGULAR_EXPRESSION | fatal | not retriable; consumer-group heartbeat APIs, never sent |
/// | 129 | REBOOTSTRAP_REQUIRED | refresh | not retriable; the Java client bootstraps again, here the broker is looked up again |
/// | 130 | STREAMS_INVALID_TOPOLOGY | fatal | not retriable; streams-group APIs, never sent |
/// | 131 | STREAMS_INVALID_TOPOLOGY_EPOCH | fatal | not retriable; streams-group APIs, never sent |
/// | 132 | STREAMS_TOPOLOGY_FENCED | fatal | not retriable; streams-group APIs, never sent |
/// | 133 | SHARE_SESSION_LIMIT_REACHED | retry | retriable |
///
/// A code kafka-protocol does not name (a broker newer than this client) is **fatal**, as the
/// Java client turns such a code into UNKNOWN_SERVER_ERROR and does not retry it. A broker
/// answers a new code only to request versions that know it (Kafka's compatibility rule) and
/// this client pins its versions, so such a code is a broker defect; retrying it would hold
/// the role's transactional session for the whole operation timeout, longer than a lease
/// lives, for an answer that will not change.
pub(crate) fn class(code: i32) -> Class {
    use Class::*;
    match code {
        47 | 49 | 90 => Fenced,
        3 | 100 => Confirm,
        5 | 6 | 8 | 9 | 13 | 15 | 16 | 41 | 52 | 56 | 72 | 74 | 75 | 78 | 103 | 129 => Refresh,
        -1 | 1 | 2 | 7 | 14 | 19 | 20 | 45 | 46 | 48 | 51 | 55 | 59 | 70 | 71 | 80 | 83 | 84
        | 88 | 89 | 105 | 106 | 120 | 122 | 123 | 133 => Retry,
        10 | 12 | 17 | 18 | 21 | 24 | 28 | 32 | 33 | 34 | 35 | 37 | 38 | 39 | 40 | 43 | 44 | 50
        | 54 | 76 | 87 | 97 | 114 | 115 => Config,
        29 | 30 | 31 | 53 | 58 => Unauthorized,
        _ => Fatal,
    }
}

/// What to fix when a call ends on `code`, for codes of the `config` class (a test checks
/// that each has one) and for `fatal` ones: said after the broker's answer in the message.
pub(crate) fn remedy(code: i32) -> Option<&'static str> {
    Some(match code {
        10 => {
            "a record batch is larger than the topic's max.message.bytes (the brokers' \
             message.max.bytes by default): write smaller records or raise it"
        }
        12 => {
            "offset metadata larger than the broker's offset.metadata.max.bytes (4096 bytes \
             by default): commit shorter metadata or raise offset.metadata.max.bytes on the \
             brokers"
        }
        17 => {
            "the topic name is not a valid Kafka topic name, or names an internal topic: \
             configure another topic"
        }
        18 => {
            "a record batch is larger than the topic's segment.bytes: write smaller records \
             or raise segment.bytes"
        }
        21 => {
            "the broker refused acks=all, which every write of this client uses: use a \
             broker of a supported version"
        }
        24 => "the consumer group id is not one the broker accepts: configure another group id",
        28 => {
            "the offsets committed in one write make a record larger than __consumer_offsets \
             accepts (its max.message.bytes): commit fewer partitions or shorter metadata in \
             one write"
        }
        32 => {
            "clock skew: a record's timestamp, from this member's clock, is outside the \
             window the topic accepts around the broker's clock \
             (message.timestamp.before.max.ms and message.timestamp.after.max.ms; before \
             Kafka 3.6, message.timestamp.difference.max.ms): synchronise this member's clock with the brokers' (NTP), or widen the window \
             on the topic"
        }
        33 => {
            "the brokers do not enable the SASL mechanism configured: configure one of the \
             listener's sasl.enabled.mechanisms"
        }
        34 => {
            "the SASL exchange went out of step: check that the client's security protocol \
             is the listener's"
        }
        35 => {
            "the broker does not support a request version this client needs: use a broker \
             of a supported version (see the README)"
        }
        37..=40 => {
            "the brokers refused the topic's settings: fix the topic settings \
             in the configuration (or create the topic yourself)"
        }
        43 => {
            "the topic's message format is older than transactions (0.11): raise the topic's \
             message.format.version"
        }
        44 => {
            "a policy of the brokers (create.topic.policy.class.name, \
             alter.config.policy.class.name) refused the request: create the topic with \
             settings the policy accepts"
        }
        50 => {
            "the transaction timeout (the lease duration) is above the brokers' \
             transaction.max.timeout.ms: use a shorter lease or raise it"
        }
        54 => {
            "the brokers run without the security feature this request needs: enable it on \
             the brokers"
        }
        76 => {
            "the topic's compression.type is one this client cannot use: set it to none, \
             gzip, snappy, lz4, zstd or producer"
        }
        87 => {
            "the broker refused the records (a compacted topic takes only records with a \
             key): check the records against the topic's settings"
        }
        97 => {
            "the brokers could not read a principal forwarded between them: check the \
             brokers' principal.builder.class"
        }
        114 | 115 => {
            "the bootstrap address is a KRaft controller's listener: give the address \
             of a broker's listener"
        }
        _ if class(code) == Class::Fatal => {
            "the broker's answer cannot be used by this client, and asking again cannot change \
             it: check that the brokers run a supported Kafka version"
        }
        _ => return None,
    })
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

    /// The codes whose exceptions are `RetriableException`s in Kafka's Java client (Kafka 4.1,
    /// `org.apache.kafka.common.errors`; kafka-protocol's own flags are older for some, such
    /// as CONCURRENT_TRANSACTIONS).
    const KAFKA_RETRIABLE: [i32; 32] = [
        2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 84,
        88, 89, 100, 103, 106, 122, 123, 133,
    ];

    /// A row of the table in the docs of [`class`].
    struct Row {
        code: i32,
        name: String,
        class: String,
        reason: String,
    }

    fn rows() -> Vec<Row> {
        include_str!("classify.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("/// | "))
            .filter_map(|row| {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                Some(Row {
                    code: cells.first()?.parse().ok()?,
                    name: cells.get(1)?.to_string(),
                    class: cells.get(2)?.to_string(),
                    reason: cells.get(3)?.to_string(),
                })
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

    /// Every code kafka-protocol names (all of Kafka's `Errors` up to its version) has one row
    /// of the table, under Kafka's name, with Kafka's verdict, and the row is what [`class`]
    /// does; no row names a code kafka-protocol does not know.
    #[test]
    fn every_code_kafka_protocol_names_has_a_row_that_holds() {
        let rows = rows();
        let mut known = 0;
        for c in i16::MIN..=i16::MAX {
            let Some(e) = code::error(c) else { continue };
            if matches!(e, code::E::Unknown(_)) {
                continue;
            }
            known += 1;
            let code = i32::from(c);
            let mine: Vec<&Row> = rows.iter().filter(|r| r.code == code).collect();
            assert_eq!(
                mine.len(),
                1,
                "code {code} ({}) needs one row",
                code::name(c)
            );
            let row = mine[0];
            assert_eq!(row.name, code::name(c), "row {code}");
            assert_eq!(
                named(class(code)),
                row.class,
                "row {code} {}: documented as {}",
                row.name,
                row.class
            );
            let verdict = if KAFKA_RETRIABLE.contains(&code) {
                "retriable"
            } else {
                "not retriable"
            };
            assert!(
                row.reason.starts_with(verdict),
                "row {code} {}: Kafka's verdict is {verdict}, the row says {:?}",
                row.name,
                row.reason
            );
        }
        assert_eq!(rows.len(), known, "one row per code kafka-protocol names");
        assert!(known >= 134, "{known} codes");
    }

    /// A code no request of this client can be answered with today (a newer broker's) ends the
    /// call at once, as the Java client's UNKNOWN_SERVER_ERROR does, and says so.
    #[test]
    fn a_code_this_client_does_not_name_is_final() {
        let unnamed: Vec<i16> = (i16::MIN..=i16::MAX)
            .filter(|c| matches!(code::error(*c), Some(code::E::Unknown(_))))
            .collect();
        assert!(unnamed.contains(&134) && unnamed.contains(&-2));
        for c in unnamed {
            assert_eq!(class(i32::from(c)), Class::Fatal, "code {c}");
            assert!(remedy(i32::from(c)).is_some(), "code {c}");
        }
    }

    /// Every code that ends a call as a configuration error, and every fatal one, says what to
    /// fix; the codes that are tried again need no such words.
    #[test]
    fn every_final_configuration_code_names_what_to_fix() {
        for row in rows() {
            let class = class(row.code);
            match class {
                Class::Config | Class::Fatal => assert!(
                    remedy(row.code).is_some_and(|fix| fix.len() > 20),
                    "row {} {} ends a call with nothing to fix",
                    row.code,
                    row.name
                ),
                Class::Retry | Class::Refresh | Class::Confirm | Class::Fenced => {
                    assert_eq!(remedy(row.code), None, "row {}", row.code)
                }
                Class::Unauthorized => {}
            }
        }
        let skew = remedy(32).expect("INVALID_TIMESTAMP");
        assert!(skew.starts_with("clock skew") && skew.contains("message.timestamp."));
        let metadata = remedy(12).expect("OFFSET_METADATA_TOO_LARGE");
        assert!(metadata.contains("offset.metadata.max.bytes"));
    }

    /// None of the codes Kafka retries is ever a configuration, authorization or fatal error
    /// here.
    #[test]
    fn what_kafka_retries_is_never_final_here() {
        for code in KAFKA_RETRIABLE {
            assert!(
                matches!(class(code), Class::Retry | Class::Refresh | Class::Confirm),
                "Kafka retries code {code}, here it is {:?}",
                class(code)
            );
            assert_eq!(class(code).kind(), ErrorKind::Retriable);
        }
    }
}
