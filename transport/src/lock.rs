//! The crate's one way to take a `std::sync::Mutex`: a lock that a panicking thread left
//! poisoned is taken all the same. Every value the crate keeps under such a lock stays
//! consistent at each point where a panic could leave it (counters, queues, slots), so the
//! poison carries no information worth failing on.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the guard also when a thread panicked while holding it.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
