//! The roster and lease of one role, built from its partition's records in offset order.

use alloc::vec::Vec;

/// One record of `__coordination_state` as read from its partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The record's offset in its partition.
    pub offset: i64,
    /// The key bytes (an encoded [`Key`](crate::record::Key) for well-formed records).
    pub key: Vec<u8>,
    /// The value bytes; `None` or empty is a tombstone.
    pub value: Option<Vec<u8>>,
}
