//! Native Kafka connections (crate `kafka-protocol`): a few per broker address
//! (`KafkaConfig::with_connections_per_broker`, 4 by default), shared by every role and every
//! request of the process's client; framing, correlation ids, version negotiation
//! (ApiVersions), and security (TLS and SASL, in [`super::security`]).
//!
//! A connection serves one request at a time; connections work in parallel. A connection that
//! fails mid-request is dropped and opened again on the next call, so a stream is never used
//! out of step.

pub(super) mod conn;
pub(crate) mod floor;
mod pool;
pub(super) mod refusal;

#[cfg(feature = "fuzzing")]
pub(crate) use conn::Replay;
pub(crate) use conn::{Conn, NetError};
pub(crate) use pool::Pool;
