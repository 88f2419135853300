//! The Kafka APIs this client speaks, one file each: the request it builds and what every
//! answer of the broker means for the call, with no I/O. An error code is classified in the
//! file of the API that answered it (by the table in [`crate::classify`]), once; the layers
//! above (the connections, the cluster's retries, the sessions, the reader, the registrar)
//! send what these files build and act on the [`Attempt`] they return.
//!
//! Each API is an [`Exchange`]: a value that holds what the request needs, builds the request
//! at the version both sides speak, and reads the answer. [`Conn::exchange`](crate::net::Conn)
//! is the one place that picks the version, sends and decodes.
//!
//! Nothing here imports the network, the pools or the sessions: the arrows run from them to
//! here, never back.

use kafka_coordination_transport::error::TransportError;
use kafka_protocol::protocol::Request;

pub(crate) mod add_offsets_to_txn;
pub(crate) mod add_partitions_to_txn;
pub(crate) mod api_versions;
mod attempt;
pub(crate) mod create_topics;
pub(crate) mod describe_configs;
pub(crate) mod describe_producers;
pub(crate) mod describe_transactions;
pub(crate) mod end_txn;
pub(crate) mod fetch;
pub(crate) mod find_coordinator;
pub(crate) mod init_producer_id;
pub(crate) mod list_offsets;
pub(crate) mod metadata;
pub(crate) mod offset_fetch;
pub(crate) mod produce;
pub(crate) mod sasl_authenticate;
pub(crate) mod sasl_handshake;
pub(crate) mod txn_offset_commit;

pub(crate) use attempt::{may_be_superseded, txn_error, Attempt};

/// One request of a Kafka API and the reading of its answer, as a value.
pub(crate) trait Exchange {
    /// The request as kafka-protocol encodes it.
    type Request: Request;
    /// What a good answer gives the caller.
    type Output;
    /// The API's name, for messages.
    const NAME: &'static str;
    /// The highest version this client sends.
    const MAX_VERSION: i16;
    /// The lowest version this client sends: a broker that speaks only older ones gets
    /// [`too_old`](Self::too_old).
    const MIN_VERSION: i16 = 0;

    /// The request, to be sent at `version` (the highest both sides speak, at most
    /// [`MAX_VERSION`](Self::MAX_VERSION)).
    fn request(&self, version: i16) -> Self::Request;

    /// What `answer`, from the broker at `at` to a request of `version`, means.
    fn answer(
        &self,
        answer: <Self::Request as Request>::Response,
        version: i16,
        at: &str,
    ) -> Result<Self::Output, Attempt>;

    /// The error when the broker at `at` speaks no version of the API up to
    /// [`MAX_VERSION`](Self::MAX_VERSION): a setup no retry can mend.
    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} supports no {} version up to v{}",
            Self::NAME,
            Self::MAX_VERSION
        )))
    }

    /// The error when the broker at `at` speaks the API only below
    /// [`MIN_VERSION`](Self::MIN_VERSION) (up to `offered`).
    fn too_old(&self, offered: i16, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} speaks {} up to v{offered} only; this client needs v{}",
            Self::NAME,
            Self::MIN_VERSION
        )))
    }
}
