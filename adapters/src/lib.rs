//! **kafka-coordination**: leader election, leases and fencing tokens on Apache Kafka.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub use kafka_coordination_core as core;

pub mod clock;
pub mod error;
pub mod transport;

#[cfg(feature = "memory")]
pub mod memory;

#[cfg(feature = "kafka")]
pub mod kafka;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{ErrorKind, TransportError};
pub use transport::{Coordinator, LeaseWriter, ReadBatch, Record, Registrar, StateReader, Transport};
