//! What went wrong in one attempt of a call, and whether another may help.

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use crate::classify::{self, code, Class};
use kafka_coordination_transport::error::{ErrorKind, TransportError};

/// What went wrong in one attempt, and whether another may help.
pub(crate) enum Attempt {
    /// Try again after a pause; `relookup` forgets the cached coordinator or leader first.
    /// `code` is the Kafka error code the broker answered, if one.
    Again {
        relookup: bool,
        why: String,
        code: Option<i16>,
    },
    /// The connection broke (or answered out of step): it is dropped; try again after a
    /// pause, looking the broker up again.
    Broken(String),
    /// The broker is silent (see `connections::Pool`): the call was turned away, or it waited out a
    /// whole request timeout. Look the broker up again; if the lookup names a silent broker
    /// again, the call gives up at once (see `Cluster::retry`).
    Silent(String),
    /// Give up with this error.
    Stop(TransportError),
}

impl Attempt {
    /// What the attempt says went wrong, whatever its verdict (for tests).
    #[cfg(test)]
    pub(crate) fn why(&self) -> String {
        match self {
            Attempt::Again { why, .. } | Attempt::Broken(why) | Attempt::Silent(why) => why.clone(),
            Attempt::Stop(e) => e.to_string(),
        }
    }

    pub(crate) fn again(why: impl Into<String>) -> Attempt {
        Attempt::Again {
            relookup: false,
            why: why.into(),
            code: None,
        }
    }
    pub(crate) fn relookup(why: impl Into<String>) -> Attempt {
        Attempt::Again {
            relookup: true,
            why: why.into(),
            code: None,
        }
    }

    /// What to do about Kafka error `code` (see [`classify`]): try again, after looking the
    /// leader or coordinator up again when the class says so, or stop with an error of the
    /// class's kind, whose message adds what to fix ([`classify::remedy`]). `why` describes
    /// the failure; the error carries the code.
    pub(crate) fn from_code(code: i16, why: impl Into<String>) -> Attempt {
        let why = why.into();
        match classify::class(i32::from(code)) {
            Class::Retry => Attempt::Again {
                relookup: false,
                why,
                code: Some(code),
            },
            Class::Refresh | Class::Confirm => Attempt::Again {
                relookup: true,
                why,
                code: Some(code),
            },
            class => {
                let why = match classify::remedy(i32::from(code)) {
                    Some(fix) if !why.contains(fix) => format!("{why}: {fix}"),
                    _ => why,
                };
                Attempt::Stop(TransportError::new(class.kind(), why).with_kafka_code(code))
            }
        }
    }
}

/// Maps a per-request error code on a transactional call of `role` (pair `token`) to an
/// attempt (by the table in [`classify`](crate::classify), with the ACL to grant for an
/// authorization error).
pub(crate) fn txn_error(
    role: &Role,
    token: FencingToken,
    what: &str,
    addr: &str,
    error: i16,
) -> Attempt {
    let why = match code::error(error) {
        Some(
            code::E::ProducerFenced
            | code::E::InvalidProducerEpoch
            | code::E::InvalidProducerIdMapping,
        ) => {
            format!(
                "{what} of role '{role}' with pair {token} was fenced: a newer leader holds the \
                 role ({})",
                code::name(error)
            )
        }
        Some(code::E::TransactionalIdAuthorizationFailed) => format!(
            "{what} of role '{role}': the principal needs the WRITE ACL on TransactionalId \
             '{role}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
        ),
        Some(code::E::TopicAuthorizationFailed) => format!(
            "{what} of role '{role}': the principal needs the WRITE ACL on the topic \
             (TOPIC_AUTHORIZATION_FAILED)"
        ),
        Some(code::E::ClusterAuthorizationFailed) => format!(
            "{what} of role '{role}': the principal needs the IDEMPOTENT_WRITE ACL on the \
             Cluster (CLUSTER_AUTHORIZATION_FAILED)"
        ),
        _ => format!(
            "{what} of role '{role}' at {addr}: error {error} ({})",
            code::name(error)
        ),
    };
    Attempt::from_code(error, why)
}

/// Whether a failed write may mean that the coordinator superseded the pair without the write
/// meeting a fencing code: a fatal failure, or a commit that found no transaction open
/// (INVALID_TXN_STATE, by its code: the message is for people).
pub(crate) fn may_be_superseded(e: &TransportError) -> bool {
    e.kind() == ErrorKind::Fatal || e.kafka_code() == Some(code::E::InvalidTxnState.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_may_be_superseded_by_its_code_not_by_its_message() {
        let no_txn = TransportError::retriable("EndTxn (commit): nothing open")
            .with_kafka_code(code::E::InvalidTxnState.code());
        assert!(may_be_superseded(&no_txn));
        assert!(may_be_superseded(&TransportError::fatal("unusable")));
        // A message that merely mentions the name decides nothing.
        assert!(!may_be_superseded(&TransportError::retriable(
            "a broker log line quoting INVALID_TXN_STATE"
        )));
        let timeout = TransportError::retriable("timed out").with_kafka_code(7);
        assert!(!may_be_superseded(&timeout));
    }
}
