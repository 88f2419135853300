//! The errors: [`Error`], what a candidacy or a term ended with, and [`TransportError`], what a
//! transport call failed with (its [`ErrorKind`] is what the machine reacts to).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::machine::{Cleanup, MachineError};
use kafka_coordination_core::record::NameError;
use kafka_coordination_core::token::FencingToken;
use kafka_coordination_core::TimingError;

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

/// Why a candidacy or a term failed. `Display` says what happened, once; `source()` carries
/// the cause where there is one (so `{:#}` with anyhow prints each part once).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The role or member name is invalid; the message names which and why.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// The options are invalid; the message names the field and the values.
    #[error(transparent)]
    InvalidOptions(#[from] TimingError),
    /// The broker fenced this leader: another member holds a newer pair. Stop the role's work.
    #[error("fenced: the pair {token} was superseded by a newer leader")]
    Fenced {
        /// The superseded pair.
        token: FencingToken,
    },
    /// The candidacy was cancelled before it was elected; its registration was withdrawn.
    #[error("the candidacy was cancelled")]
    Cancelled,
    /// The transport kept failing for longer than the give-up time while not leading.
    #[error("the transport kept failing for {waited:?} while not leading")]
    Unavailable {
        /// How long it kept failing.
        waited: Duration,
        /// The last failure (also the error's `source()`).
        #[source]
        last: TransportError,
    },
    /// The transport failed in a way retrying cannot fix (configuration, authorization, a
    /// broken producer).
    #[error(transparent)]
    Transport(TransportError),
    /// The member left (resigned, or its candidacy was cancelled) but could not finish its exit;
    /// `cleanup` says which steps are missing and what that means for the role.
    #[error("the exit was incomplete: {cleanup}")]
    Incomplete {
        /// What the exit managed to do.
        cleanup: Cleanup,
        /// The last transport failure met on the way out (also the error's `source()`).
        #[source]
        last: Option<TransportError>,
    },
    /// The driver stopped before the candidate ended: the runtime that ran it shut down (say a
    /// tokio runtime dropped while the handle lived). The term, if any, is over. On the way
    /// out the driver resigned on the spot, as far as the transport let it: `cleanup` says what
    /// it did (`None`: nothing could be tried).
    #[error("the driver stopped with its runtime; {}", match cleanup {
        Some(c) if c.complete() => "the role was left clean".to_owned(),
        Some(c) => format!("the exit was incomplete: {c}"),
        None => "no exit was attempted".to_owned(),
    })]
    Stopped {
        /// What the exit managed to do.
        cleanup: Option<Cleanup>,
        /// The last transport failure met on the way out (also the error's `source()`).
        #[source]
        last: Option<TransportError>,
    },
    /// Another live process uses this member id for this role: it registered, or wrote a
    /// lease, after this member registered. Member ids must be unique per role (say the pod or
    /// host name); two processes with one id would withdraw each other's registration. This
    /// candidacy stopped without touching the role (the other's registration and term stay).
    #[error(
        "another live process uses member id `{member}` for role `{role}`: it wrote a record \
         at offset {offset}, after this member registered at offset {own_registration}; \
         member ids must be unique per role, so this candidacy stopped and left the role alone"
    )]
    DuplicateMember {
        /// The member id.
        member: String,
        /// The role.
        role: String,
        /// The other process's record.
        offset: i64,
        /// This member's registration.
        own_registration: i64,
    },
    /// A driver bug: the machine refused an event. Please report it.
    #[error("internal error: {0}")]
    Internal(#[from] MachineError),
}

impl Error {
    /// Whether this is [`Error::Fenced`].
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced { .. })
    }
}
