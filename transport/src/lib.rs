//! **kafka-coordination-transport**: the seam between the leader-election machine and a broker.
//!
//! Every call to the broker has **one form**: it returns at once and hands its outcome to a
//! `done` callback, exactly once, now or later on a thread of the transport's, with a
//! `priority` (smaller first) that a transport queueing requests serves in order. **Required**:
//! [`Coordinator::start_acquire_epoch`], [`Coordinator::start_describe_epochs`],
//! [`StateReader::partitions`], [`StateReader::start_read_partition`],
//! [`Registrar::append_all`], [`LeaseWriter::start_write_lease`]; the rest has defaults. A
//! client whose calls block implements [`BlockingTransport`] and is wrapped in [`OnPool`];
//! [`Wait`] makes one call and waits for it. What a call fails with is a
//! [`TransportError`](error::TransportError), whose [`ErrorKind`](error::ErrorKind) is what
//! the machine reacts to.
//!
//! Every transport (the in-memory broker, the native Kafka client of
//! `kafka-coordination-kafka`, a user's own) and every driver depends on this crate; users
//! reach it through the `kafka-coordination` crate, as `kafka_coordination::transport` and
//! `kafka_coordination::error`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod calls;
pub mod duration;
pub mod error;
mod logging;
mod on_pool;
#[doc(hidden)]
pub mod wait;

// Shared by the crates of the workspace, not a public API.
#[doc(hidden)]
pub mod lock;
#[doc(hidden)]
pub mod thread_pool;

#[doc(hidden)]
pub use calls::TailHooks;
pub use calls::{
    AcquireDone, Append, AppendDone, ConsumedOffset, Coordinator, DescribeDone, GroupOffsets,
    GuardedDone, GuardedRecord, GuardedWrite, HeaderRefs, LeaseDone, LeaseWriter, ReadBatch,
    ReadDone, Record, Registrar, StateReader, TailHook, Transport,
};
pub use on_pool::{BlockingTransport, OnPool};
pub use wait::Wait;
