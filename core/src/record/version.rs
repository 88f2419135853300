//! The record format's version, written first in every key and value.

/// The only format version this crate reads and writes, in keys and values alike.
pub const FORMAT_VERSION: i16 = 0;
