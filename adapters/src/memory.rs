//! MemoryBroker (in progress).
