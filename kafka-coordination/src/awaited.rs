//! Transport calls awaited on a task: each starts in its completion form and its answer wakes
//! the awaiting task, so no thread (not a runtime's blocking pool, not a waiting thread) is
//! held while the broker answers. The async `describe_*`, `leader` and watch loops use these;
//! the blocking ones use the seam's `Wait` forms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use event_listener::Event;
use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::record::Role;

use crate::driver::dispatch::answered_or;
use crate::error::TransportError;
use crate::transport::{priority_now, Coordinator, ReadBatch, StateReader};
use kafka_coordination_transport::lock::lock;

/// Starts a call with `start`, handing it a completion, and awaits the answer. A completion
/// the transport drops unanswered answers `dropped()`.
pub(crate) async fn answer<T: Send + 'static>(
    start: impl FnOnce(Box<dyn FnOnce(T) + Send>),
    dropped: impl FnOnce() -> T + Send + 'static,
) -> T {
    struct Slot<T> {
        value: Mutex<Option<T>>,
        done: Event,
    }
    let slot = Arc::new(Slot {
        value: Mutex::new(None),
        done: Event::new(),
    });
    let put = Arc::clone(&slot);
    start(answered_or(dropped, move |value| {
        *lock(&put.value) = Some(value);
        put.done.notify(usize::MAX);
    }));
    loop {
        let listener = slot.done.listen();
        if let Some(value) = lock(&slot.value).take() {
            return value;
        }
        listener.await;
    }
}

/// One read of `partition` from `from_offset`, waiting up to `max_wait` in the transport.
pub(crate) async fn read<S: StateReader + ?Sized>(
    reader: &S,
    partition: i32,
    from_offset: i64,
    max_wait: Duration,
) -> Result<ReadBatch, TransportError> {
    answer(
        |done| reader.start_read_partition(partition, from_offset, max_wait, priority_now(), done),
        || {
            Err(TransportError::retriable(
                "the transport dropped a read without answering it",
            ))
        },
    )
    .await
}

/// The coordinator's current pair for `role`.
pub(crate) async fn describe_one<C: Coordinator + ?Sized>(
    coordinator: &C,
    role: Role,
) -> Result<LeadershipStatus, TransportError> {
    let dropped = || {
        vec![Err(TransportError::retriable(
            "the transport dropped a check without answering it",
        ))]
    };
    answer(
        |done| coordinator.start_describe_epochs(vec![role], priority_now(), done),
        dropped,
    )
    .await
    .pop()
    .unwrap_or_else(|| {
        Err(TransportError::fatal(
            "describe_epochs answered fewer roles than it was asked for",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;

    #[test]
    fn an_answer_given_on_the_spot_later_or_never_ends_the_wait() {
        // Answered before `start` returns (as the in-memory broker does).
        assert_eq!(block_on(answer(|done| done(7), || 0)), 7);
        // Answered from another thread while the task waits.
        let later = block_on(answer(
            |done| {
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    done(8)
                });
            },
            || 0,
        ));
        assert_eq!(later, 8);
        // Dropped unanswered by the transport: the wait ends with what `dropped` makes.
        assert_eq!(block_on(answer(drop, || -1)), -1);
    }
}
