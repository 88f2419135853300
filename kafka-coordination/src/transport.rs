//! The transport seam: four small traits the machine's commands are executed against.
//!
//! Every call to the broker has **one form**: it returns at once and hands its outcome to a
//! `done` callback, exactly once, now or later on a thread of the transport's, with a
//! `priority` (smaller first) that a transport queueing requests serves in order. **Required**:
//! [`Coordinator::start_acquire_epoch`], [`Coordinator::start_describe_epochs`],
//! [`StateReader::partitions`], [`StateReader::start_read_partition`],
//! [`Registrar::append_all`], [`LeaseWriter::start_write_lease`]; the rest has defaults
//! (`examples/src/custom_transport.rs` implements just the six). A client whose calls block
//! implements [`BlockingTransport`] and is wrapped in [`OnPool`]; [`Wait`] makes one call and
//! waits for it. A transport value belongs to one member (or is shared by the candidacies of
//! one process, one per role).
//!
//! The guarded write, the leader's own write fenced by its pair, has both forms:
//! [`LeaseWriter::guarded_write`] blocks the caller (for blocking callers), and
//! [`LeaseWriter::start_guarded_write`] completes as the others do (the async handles await
//! it); its default runs the blocking form on the caller's thread.

#[doc(inline)]
pub use kafka_coordination_transport::wait::priority_now;
pub(crate) use kafka_coordination_transport::wait::{describe_one, read};
#[cfg(feature = "memory")]
pub(crate) use kafka_coordination_transport::TailHooks;
#[doc(inline)]
pub use kafka_coordination_transport::{
    AcquireDone, Append, AppendDone, BlockingTransport, ConsumedOffset, Coordinator, DescribeDone,
    GroupOffsets, GuardedDone, GuardedRecord, GuardedWrite, HeaderRefs, LeaseDone, LeaseWriter,
    OnPool, ReadBatch, ReadDone, Record, Registrar, StateReader, TailHook, Transport, Wait,
};
