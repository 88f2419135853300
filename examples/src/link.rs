//! The library's [`Link`]: a transport whose connection can be cut, re-exported for the examples.

pub use kafka_coordination::link::Link;
