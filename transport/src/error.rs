//! What a transport call failed with: [`TransportError`], whose [`ErrorKind`] is what the
//! machine reacts to.
//!
//! Every failure has a section on the guide's troubleshooting page ([`TROUBLESHOOTING_PAGE`],
//! `docs/guide/troubleshooting.md` in the repository) that says what causes it and what to do:
//! [`TransportError::troubleshooting_anchor`] names it.

use std::fmt;
use std::sync::Arc;

/// What kind of failure a transport call met; the machine reacts to the kind only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The broker rejected a write because a newer (producer id, epoch) exists for the role:
    /// `PRODUCER_FENCED` (90), `INVALID_PRODUCER_EPOCH` (47) or librdkafka's fatal `Fenced`.
    /// The leader's term is over.
    Fenced,
    /// A failure that may pass: broker unreachable, timeout, leader moved, coordinator loading,
    /// an aborted transaction, a topic or partition a broker does not know yet. The call can be
    /// tried again.
    Retriable,
    /// The setup is wrong and retrying will not help: topic missing or misconfigured, partition
    /// count mismatch, transaction timeout above the broker's maximum, unsupported security.
    /// The Kafka transport reports a missing topic or a wrong partition count only when the
    /// brokers' metadata confirms it, never on one error answer.
    Config,
    /// The principal lacks an ACL; the message names which.
    Unauthorized,
    /// The broker or the library answered in a way that cannot be used (malformed response, a
    /// producer that became unusable). Not retriable on the same transport instance.
    Fatal,
}

/// The guide page that explains every error, relative to the repository's root; the
/// `troubleshooting_anchor` methods name a section of it.
pub const TROUBLESHOOTING_PAGE: &str = "docs/guide/troubleshooting.md";

/// The sections of [`TROUBLESHOOTING_PAGE`], by their anchors (a test checks that the page has
/// a heading for each).
#[doc(hidden)]
pub mod section {
    pub const FENCED: &str = "fenced";
    pub const UNAVAILABLE: &str = "unavailable";
    pub const INCOMPLETE: &str = "incomplete";
    pub const STOPPED: &str = "stopped";
    pub const DUPLICATE_MEMBER: &str = "duplicatemember";
    pub const CANCELLED: &str = "cancelled";
    pub const INVALID_NAME: &str = "invalidname";
    pub const INVALID_OPTIONS: &str = "invalidoptions";
    pub const INTERNAL: &str = "internal";
    pub const CONFIGURATION: &str = "configuration-errors";
    pub const STATE_TOPIC: &str =
        "the-state-topic-is-missing-not-compacted-or-has-another-partition-count";
    pub const TRANSACTION_TIMEOUT: &str = "a-lease-longer-than-the-brokers-allow";
    pub const ACLS: &str = "missing-acls";
    pub const SASL: &str = "sasl-authentication-failures";
    pub const CLOCK_SKEW: &str = "clock-skew";
    pub const OLD_BROKER: &str = "a-broker-older-than-kafka-30";
    pub const UNSUPPORTED_VERSION: &str = "unsupported-versions-and-transaction-version-2";
    pub const FATAL: &str = "fatal-errors";
    pub const PROPERTIES: &str = "properties-the-client-does-not-read";

    /// Every section the library names.
    pub const ALL: [&str; 19] = [
        FENCED,
        UNAVAILABLE,
        INCOMPLETE,
        STOPPED,
        DUPLICATE_MEMBER,
        CANCELLED,
        INVALID_NAME,
        INVALID_OPTIONS,
        INTERNAL,
        CONFIGURATION,
        STATE_TOPIC,
        TRANSACTION_TIMEOUT,
        ACLS,
        SASL,
        CLOCK_SKEW,
        OLD_BROKER,
        UNSUPPORTED_VERSION,
        FATAL,
        PROPERTIES,
    ];
}

/// A transport call's failure: a kind the machine acts on and a message for people.
/// Cloning is cheap (the source is shared). What to do about one:
/// [`troubleshooting_anchor`](Self::troubleshooting_anchor) names its section of the guide's
/// troubleshooting page (`docs/guide/troubleshooting.md`).
#[derive(Clone, Debug)]
pub struct TransportError {
    kind: ErrorKind,
    message: String,
    kafka_code: Option<i16>,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    /// The troubleshooting section, where the code and the kind do not say it.
    section: Option<&'static str>,
}

/// Equal when the kind and the message are (the source is not compared).
impl PartialEq for TransportError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for TransportError {}

impl TransportError {
    /// A failure of `kind` described by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        TransportError {
            kind,
            message: message.into(),
            kafka_code: None,
            source: None,
            section: None,
        }
    }

    /// Records the Kafka protocol error code that caused the failure (`3` for
    /// UNKNOWN_TOPIC_OR_PARTITION, `48` for INVALID_TXN_STATE, ...: Kafka's `Errors`).
    pub fn with_kafka_code(mut self, code: i16) -> Self {
        self.kafka_code = Some(code);
        self
    }

    /// The Kafka protocol error code the broker answered, when one caused this failure; `None`
    /// for failures without one (a timeout, a refused connection, a local check). librdkafka's
    /// own codes for an unknown topic or partition count as `3` (UNKNOWN_TOPIC_OR_PARTITION).
    pub fn kafka_code(&self) -> Option<i16> {
        self.kafka_code
    }

    /// Attaches the underlying error.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// [`ErrorKind::Fenced`].
    pub fn fenced(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Fenced, message)
    }

    /// [`ErrorKind::Retriable`].
    pub fn retriable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Retriable, message)
    }

    /// [`ErrorKind::Config`].
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }

    /// [`ErrorKind::Unauthorized`].
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, message)
    }

    /// [`ErrorKind::Fatal`].
    pub fn fatal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Fatal, message)
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the broker fenced the write.
    pub fn is_fenced(&self) -> bool {
        self.kind == ErrorKind::Fenced
    }

    /// Whether the same call may succeed later.
    pub fn is_retriable(&self) -> bool {
        self.kind == ErrorKind::Retriable
    }

    /// Files the error under `section` of the troubleshooting page, for a failure whose kind
    /// and code do not say which (a missing state topic, an old broker, a SASL refusal).
    #[doc(hidden)]
    pub fn in_section(mut self, section: &'static str) -> Self {
        self.section = Some(section);
        self
    }

    /// The anchor of the section of the guide's troubleshooting page
    /// ([`TROUBLESHOOTING_PAGE`]) that explains this failure, such as `"missing-acls"`: by the
    /// Kafka error code where it has one (INVALID_TRANSACTION_TIMEOUT, INVALID_TIMESTAMP,
    /// UNSUPPORTED_VERSION, the authorization failures), else by what the client found (the
    /// state topic, the broker's version, SASL), else by the [`ErrorKind`].
    ///
    /// ```
    /// use kafka_coordination_transport::error::{TransportError, TROUBLESHOOTING_PAGE};
    ///
    /// let e = TransportError::retriable("the broker at kafka-0:9092 is not answering");
    /// assert_eq!(
    ///     format!("{TROUBLESHOOTING_PAGE}#{}", e.troubleshooting_anchor()),
    ///     "docs/guide/troubleshooting.md#unavailable"
    /// );
    /// ```
    pub fn troubleshooting_anchor(&self) -> &'static str {
        let by_code = match self.kafka_code {
            Some(50) => Some(section::TRANSACTION_TIMEOUT),
            Some(32) => Some(section::CLOCK_SKEW),
            Some(35) => Some(section::UNSUPPORTED_VERSION),
            Some(29 | 30 | 31 | 53) => Some(section::ACLS),
            Some(33 | 34 | 58) => Some(section::SASL),
            _ => None,
        };
        by_code.or(self.section).unwrap_or(match self.kind {
            ErrorKind::Fenced => section::FENCED,
            ErrorKind::Retriable => section::UNAVAILABLE,
            ErrorKind::Config => section::CONFIGURATION,
            ErrorKind::Unauthorized => section::ACLS,
            ErrorKind::Fatal => section::FATAL,
        })
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ErrorKind::Fenced => "fenced",
            ErrorKind::Retriable => "transient failure",
            ErrorKind::Config => "configuration error",
            ErrorKind::Unauthorized => "not authorized",
            ErrorKind::Fatal => "fatal error",
        };
        write!(f, "{kind}: {}", self.message)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport error's section: by the Kafka code first, then by what the client filed it
    /// under, then by its kind.
    #[test]
    fn a_transport_error_is_filed_by_code_then_section_then_kind() {
        let at = |e: TransportError| e.troubleshooting_anchor();
        assert_eq!(
            at(TransportError::config("too long").with_kafka_code(50)),
            "a-lease-longer-than-the-brokers-allow"
        );
        assert_eq!(
            at(TransportError::config("skew").with_kafka_code(32)),
            "clock-skew"
        );
        for code in [29, 30, 31, 53] {
            assert_eq!(
                at(TransportError::unauthorized("acl").with_kafka_code(code)),
                "missing-acls"
            );
        }
        assert_eq!(
            at(TransportError::unauthorized("sasl").in_section(section::SASL)),
            "sasl-authentication-failures"
        );
        assert_eq!(
            at(TransportError::config("x").with_kafka_code(35)),
            "unsupported-versions-and-transaction-version-2"
        );
        assert_eq!(
            at(TransportError::config("old").in_section(section::OLD_BROKER)),
            "a-broker-older-than-kafka-30"
        );
        assert_eq!(at(TransportError::config("bad")), "configuration-errors");
        assert_eq!(at(TransportError::unauthorized("acl")), "missing-acls");
        assert_eq!(at(TransportError::retriable("down")), "unavailable");
        assert_eq!(at(TransportError::fenced("90")), "fenced");
        assert_eq!(at(TransportError::fatal("bytes")), "fatal-errors");
    }
}
