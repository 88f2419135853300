//! Native Kafka connections (crate `kafka-protocol`): framing, correlation ids, version
//! negotiation (ApiVersions) and the broker floor. Security (TLS and SASL) is
//! [`crate::security`], on top of a connection; the connections per broker address are
//! [`crate::connections`], on top of both.
//!
//! A connection serves one request at a time; connections work in parallel. A connection that
//! fails mid-request is dropped and opened again on the next call, so a stream is never used
//! out of step.

pub(super) mod conn;
pub(crate) mod floor;
pub(super) mod refusal;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use conn::Replay;
pub(crate) use conn::{Conn, NetError};
