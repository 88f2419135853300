//! [`MemoryBroker`]: an in-process model of Kafka's transaction coordinator and of the compacted
//! topic `__coordination_state`, with Kafka's semantics. It is the embedded default of the
//! examples, the broker of the driver tests, and the ground of the deterministic simulation.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use kafka_coordination::memory::MemoryBroker;
//! use kafka_coordination::transport::Wait;
//! use kafka_coordination::ManualClock;
//! use kafka_coordination::core::record::Role;
//!
//! let broker = MemoryBroker::new(4, Arc::new(ManualClock::default()));
//! let (a, b) = (broker.transport("a"), broker.transport("b"));
//! let role = Role::new("orders").unwrap();
//! let ta = a.acquire_epoch(&role, Duration::from_secs(30)).unwrap();
//! let tb = b.acquire_epoch(&role, Duration::from_secs(30)).unwrap();
//! assert_eq!(tb.producer_epoch, ta.producer_epoch + 1);
//! // `a` was fenced by `b`'s acquire: the broker refuses its writes.
//! assert!(a.write_lease(0, b"k", Some(b"v"), ta).unwrap_err().is_fenced());
//! b.write_lease(0, b"k", Some(b"v"), tb).unwrap();
//! assert_eq!(b.read_partition(0, 0, Duration::ZERO).unwrap().records.len(), 1);
//! ```
//!
//! The semantics it models, and the fault switches: [`MemoryBroker`].

mod broker;
mod broker_state;
mod coordinator;
mod faults;
mod log;
mod memory_transport;

pub use broker::{MemoryBroker, LONG_POLL_THREADS};
pub use broker_state::{
    AcceptedLeaseWrite, DEFAULT_MAX_TRANSACTION_TIMEOUT, EXHAUSTED_EPOCH, FIRST_PRODUCER_ID,
};
pub use faults::{BrokerOp, CallCounts};
pub use memory_transport::MemoryTransport;
