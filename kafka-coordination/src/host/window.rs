//! The order of the I/O queue ([`Due`]) and the window of calls to the transport: at most a
//! limit in flight, the others waiting in order of urgency.

use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_coordination_core::machine::Command;
use kafka_coordination_core::time::UnixMillis;

use kafka_coordination_transport::lock::lock;

/// When a queued job should run, in the host clock's milliseconds: the smaller, the sooner.
///
/// * A read of a partition is due at once (`i64::MIN`): one read answers every candidacy of
///   the partition that waits, standbys whose turn has come among them.
/// * Any other call is due when its candidacy's current stretch of work began (it left a
///   timer or a long poll), but at most [`HEAD_START`] before it is issued: the steps of a
///   standby's takeover (check, announcement, acquire, first lease write) keep the place of
///   the first, so takeovers under way finish before new ones start, the oldest first.
/// * A leader's renewal is due [`HEAD_START`] before the point halfway between its issue and
///   the deadline of its current lease: only calls issued before that point pass it, so it
///   waits behind takeovers no longer than it can afford.
pub(super) type Due = i64;

/// A call queued in the [`Window`], in the order of its [`Due`], then of queueing.
pub(super) struct Queued<J> {
    pub(super) due: Due,
    pub(super) seq: u64,
    pub(super) job: J,
}

impl<J> PartialEq for Queued<J> {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl<J> Eq for Queued<J> {}
impl<J> PartialOrd for Queued<J> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<J> Ord for Queued<J> {
    /// Reversed, so that the `BinaryHeap` (a max-heap) pops the earliest due first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// The host's calls to the transport: at most `limit` are in flight at once
/// ([`HostOptions::max_in_flight`](super::HostOptions::max_in_flight)), and the others wait
/// in the order of their [`Due`] instants, holding nothing. When one finishes, the thread
/// that finished it starts the next. A lease write's deadline counts from when it starts
/// here.
pub(super) struct Window {
    pub(super) state: Mutex<WindowState>,
    pub(super) limit: usize,
}

pub(super) struct WindowState {
    pub(super) queue: BinaryHeap<Queued<Start>>,
    pub(super) seq: u64,
    pub(super) in_flight: usize,
    /// A thread is starting queued calls now: the others leave it to that thread.
    pub(super) starting: bool,
}

/// A call to start once the window has room; it holds the [`Permit`] until it finishes.
pub(super) type Start = Box<dyn FnOnce(Permit) + Send>;

/// A place in the [`Window`]: given back when dropped, which starts the next queued call.
pub(super) struct Permit(Arc<Window>);

impl Drop for Permit {
    fn drop(&mut self) {
        lock(&self.0.state).in_flight -= 1;
        self.0.pump();
    }
}

impl Window {
    pub(super) fn new(limit: usize) -> Arc<Window> {
        Arc::new(Window {
            state: Mutex::new(WindowState {
                queue: BinaryHeap::new(),
                seq: 0,
                in_flight: 0,
                starting: false,
            }),
            limit: limit.max(1),
        })
    }

    pub(super) fn submit(self: &Arc<Self>, due: Due, job: Start) {
        let mut st = lock(&self.state);
        st.seq += 1;
        let seq = st.seq;
        st.queue.push(Queued { due, seq, job });
        drop(st);
        self.pump();
    }

    /// Starts queued calls, the earliest due first, while there is room. One thread at a time
    /// does it; a call that finishes while it starts others only gives back its place, and
    /// that thread starts the next.
    pub(super) fn pump(self: &Arc<Self>) {
        let mut st = lock(&self.state);
        if st.starting {
            return;
        }
        st.starting = true;
        while st.in_flight < self.limit {
            let Some(next) = st.queue.pop() else {
                break;
            };
            st.in_flight += 1;
            drop(st);
            (next.job)(Permit(Arc::clone(self)));
            st = lock(&self.state);
        }
        st.starting = false;
    }

    /// Calls waiting for room.
    pub(super) fn queued(&self) -> usize {
        lock(&self.state).queue.len()
    }
}

/// The most a call's place in the I/O queue moves ahead of the instant it is issued (see
/// [`Due`]): the steps of a takeover under way pass newer work, but work that has gone on for
/// long (thousands of candidacies starting at once) queues about as issued, and holds a
/// renewal back only so long.
pub(super) const HEAD_START: Duration = Duration::from_secs(1);

pub(super) fn head_start() -> i64 {
    i64::try_from(HEAD_START.as_millis()).unwrap_or(i64::MAX)
}

/// When a call issued `now` should start (see [`Due`]). `since` is when the
/// candidacy's current stretch of work began; `lease_deadline` the deadline of the leader's
/// last lease (`None` for a candidacy that does not lead).
pub(super) fn due(
    cmd: &Command,
    lease_deadline: Option<UnixMillis>,
    since: UnixMillis,
    now: UnixMillis,
) -> Due {
    match (cmd, lease_deadline) {
        // A renewal (a resign's tombstone is not one: it goes as the exit's other steps).
        (Command::WriteLease { value: Some(_), .. }, Some(deadline)) if deadline > now => {
            // Less the head start, so that only calls issued before the halfway point pass it.
            now.0 + (deadline.0 - now.0) / 2 - head_start()
        }
        _ => since.0.max(now.0.saturating_sub(head_start())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_core::token::FencingToken;

    fn write_lease(value: Option<Vec<u8>>) -> Command {
        Command::WriteLease {
            partition: 0,
            key: b"k".to_vec(),
            value,
            token: FencingToken::new(1, 0),
        }
    }

    #[test]
    fn a_renewal_is_passed_by_calls_issued_before_halfway_to_its_deadline() {
        let now = UnixMillis(10_000);
        let since = UnixMillis(9_500);
        // A leader renewing 7 s before its lease runs out: calls issued in the next 3.5 s
        // (due at most a head start before their issue) pass it.
        let renewal = write_lease(Some(b"lease".to_vec()));
        assert_eq!(due(&renewal, Some(UnixMillis(17_000)), since, now), 12_500);
        // A renewal retried with its lease about to run out passes what was issued in the last
        // second; one already past it, and a claim (not leading yet), go as any other call.
        assert_eq!(due(&renewal, Some(UnixMillis(10_001)), since, now), 9_000);
        assert_eq!(due(&renewal, Some(UnixMillis(9_900)), since, now), 9_500);
        assert_eq!(due(&renewal, None, since, now), 9_500);
        // Any other call: when its stretch of work began, so that a takeover keeps the place
        // of its first step...
        let tombstone = write_lease(None);
        assert_eq!(due(&tombstone, Some(UnixMillis(17_000)), since, now), 9_500);
        let acquire = Command::AcquireEpoch {
            transactional_id: kafka_coordination_core::record::Role::new("r").unwrap(),
            transaction_timeout: Duration::from_secs(10),
        };
        assert_eq!(due(&acquire, None, since, now), 9_500);
        // ... but never more than HEAD_START before it is issued.
        assert_eq!(due(&acquire, None, UnixMillis(2_000), now), 9_000);
    }
}
