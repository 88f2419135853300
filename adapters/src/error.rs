//! Errors of transports and of the Leadership API.

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

/// A transport call's failure: a kind the machine acts on and a message for people.
/// Cloning is cheap (the source is shared).
#[derive(Clone, Debug)]
pub struct TransportError {
    kind: ErrorKind,
    message: String,
    kafka_code: Option<i16>,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl TransportError {
    /// A failure of `kind` described by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        TransportError {
            kind,
            message: message.into(),
            kafka_code: None,
            source: None,
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
