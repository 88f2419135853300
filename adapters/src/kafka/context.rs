//! librdkafka client contexts: the producer's view of its own (producer id, epoch) from the
//! statistics, delivery reports, and the last global error (for messages about an unreachable
//! cluster).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use serde::Deserialize;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `eos` section of librdkafka's statistics JSON.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub(crate) struct EosSnapshot {
    /// `Init`, `RequestPID`, `WaitPID`, `Assigned`, `DrainBump`, `FatalError`, ...
    pub idemp_state: String,
    /// `Init`, `Ready`, `InTransaction`, `CommittingTransaction`, `FatalError`, ...
    pub txn_state: String,
    /// -1 until assigned.
    pub producer_id: i64,
    /// -1 until assigned.
    pub producer_epoch: i64,
    /// How many producer ids or epochs this producer was assigned.
    pub epoch_cnt: i64,
}

impl EosSnapshot {
    /// The pair, when librdkafka reports one.
    pub fn pair(&self) -> Option<(i64, i64)> {
        (self.producer_id >= 0 && self.producer_epoch >= 0)
            .then_some((self.producer_id, self.producer_epoch))
    }

    /// The pair once the idempotent producer state is `Assigned`.
    pub fn assigned_pair(&self) -> Option<(i64, i64)> {
        if self.idemp_state == "Assigned" {
            self.pair()
        } else {
            None
        }
    }
}

#[derive(Deserialize)]
struct StatsEos {
    #[serde(default)]
    eos: Option<EosSnapshot>,
}

#[derive(Default)]
struct EosWatch {
    /// Incremented for every statistics report that carried an `eos` section.
    seq: u64,
    latest: Option<EosSnapshot>,
    /// Every distinct (producer id, epoch) reported, in order (a few at most: a fresh
    /// producer's first pair, then any pair librdkafka moved to by itself).
    pairs: Vec<(i64, i64)>,
}

/// More distinct pairs than this are not recorded (one is enough to end a term).
const MAX_PAIRS: usize = 8;

/// The outcome of one produced record: its offset, or why it failed.
#[derive(Default)]
pub(crate) struct DeliverySlot {
    outcome: Mutex<Option<Result<i64, KafkaError>>>,
    ready: Condvar,
}

impl DeliverySlot {
    fn fill(&self, outcome: Result<i64, KafkaError>) {
        *lock(&self.outcome) = Some(outcome);
        self.ready.notify_all();
    }

    /// Waits up to `timeout` for the delivery report.
    pub fn wait(&self, timeout: Duration) -> Option<Result<i64, KafkaError>> {
        let deadline = Instant::now() + timeout;
        let mut guard = lock(&self.outcome);
        loop {
            if let Some(outcome) = guard.as_ref() {
                return Some(outcome.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            guard = self
                .ready
                .wait_timeout(guard, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// The delivery report if it already arrived.
    pub fn peek(&self) -> Option<Result<i64, KafkaError>> {
        lock(&self.outcome).clone()
    }
}

/// The context of the transport's producers (transactional and plain).
#[derive(Default)]
pub(crate) struct ProducerCtx {
    eos: Mutex<EosWatch>,
    eos_changed: Condvar,
    last_error: Mutex<Option<String>>,
}

impl ProducerCtx {
    /// The number of statistics reports seen so far and the latest `eos` section.
    pub fn eos(&self) -> (u64, Option<EosSnapshot>) {
        let w = lock(&self.eos);
        (w.seq, w.latest.clone())
    }

    /// A pair other than `held` that this producer reported at any time, if any. Sticky: once
    /// librdkafka moved to another pair, the held one is gone for good.
    pub fn other_pair(&self, held: (i64, i64)) -> Option<(i64, i64)> {
        lock(&self.eos).pairs.iter().copied().find(|p| *p != held)
    }

    /// Waits up to `timeout` for a statistics report numbered above `after` whose snapshot
    /// satisfies `accept`, and returns that snapshot.
    pub fn wait_eos(
        &self,
        after: u64,
        timeout: Duration,
        accept: impl Fn(&EosSnapshot) -> bool,
    ) -> Option<EosSnapshot> {
        let deadline = Instant::now() + timeout;
        let mut w = lock(&self.eos);
        loop {
            if w.seq > after {
                if let Some(s) = w.latest.as_ref().filter(|s| accept(s)) {
                    return Some(s.clone());
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            w = self
                .eos_changed
                .wait_timeout(w, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// The last global error librdkafka reported (for example a refused connection).
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }
}

impl ClientContext for ProducerCtx {
    fn stats_raw(&self, statistics: &[u8]) {
        // Only the `eos` section matters; a report that does not parse is skipped.
        if let Ok(StatsEos { eos: Some(eos) }) = serde_json::from_slice::<StatsEos>(statistics) {
            let mut w = lock(&self.eos);
            w.seq += 1;
            if let Some(pair) = eos.pair() {
                if !w.pairs.contains(&pair) && w.pairs.len() < MAX_PAIRS {
                    w.pairs.push(pair);
                }
            }
            w.latest = Some(eos);
            drop(w);
            self.eos_changed.notify_all();
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        *lock(&self.last_error) = Some(format!("{error}: {reason}"));
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        log_librdkafka(level, fac, message);
    }
}

impl ProducerContext for ProducerCtx {
    type DeliveryOpaque = Arc<DeliverySlot>;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: Arc<DeliverySlot>) {
        match result {
            Ok(message) => slot.fill(Ok(message.offset())),
            Err((error, _)) => slot.fill(Err(error.clone())),
        }
    }
}

/// The context of the read_committed consumers.
#[derive(Default)]
pub(crate) struct ReaderCtx {
    last_error: Mutex<Option<String>>,
}

impl ReaderCtx {
    /// The last global error librdkafka reported.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }
}

impl ClientContext for ReaderCtx {
    fn stats_raw(&self, _statistics: &[u8]) {}

    fn error(&self, error: KafkaError, reason: &str) {
        *lock(&self.last_error) = Some(format!("{error}: {reason}"));
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        log_librdkafka(level, fac, message);
    }
}

impl ConsumerContext for ReaderCtx {}

/// The context of short-lived admin clients.
#[derive(Default)]
pub(crate) struct AdminCtx {
    last_error: Mutex<Option<String>>,
}

impl AdminCtx {
    /// The last global error librdkafka reported.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }
}

impl ClientContext for AdminCtx {
    fn stats_raw(&self, _statistics: &[u8]) {}

    fn error(&self, error: KafkaError, reason: &str) {
        *lock(&self.last_error) = Some(format!("{error}: {reason}"));
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        log_librdkafka(level, fac, message);
    }
}

/// librdkafka's log lines go to `tracing` when that feature is on; the library never prints.
#[allow(unused_variables)]
fn log_librdkafka(level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
    #[cfg(feature = "tracing")]
    {
        use rdkafka::config::RDKafkaLogLevel as L;
        match level {
            L::Emerg | L::Alert | L::Critical | L::Error => {
                tracing::error!(target: "librdkafka", "{fac} {message}")
            }
            L::Warning => tracing::warn!(target: "librdkafka", "{fac} {message}"),
            L::Notice | L::Info => tracing::info!(target: "librdkafka", "{fac} {message}"),
            L::Debug => tracing::debug!(target: "librdkafka", "{fac} {message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eos_section_is_read_from_statistics() {
        let ctx = ProducerCtx::default();
        ctx.stats_raw(br#"{"name":"p","eos":{"idemp_state":"Assigned","idemp_stateage":5,"txn_state":"Ready","txn_stateage":3,"txn_may_enq":false,"producer_id":7042,"producer_epoch":3,"epoch_cnt":1},"brokers":{}}"#);
        let (seq, eos) = ctx.eos();
        assert_eq!(seq, 1);
        assert_eq!(eos.and_then(|e| e.assigned_pair()), Some((7042, 3)));
        assert_eq!(ctx.other_pair((7042, 3)), None);
        ctx.stats_raw(
            br#"{"eos":{"idemp_state":"Assigned","producer_id":7042,"producer_epoch":4}}"#,
        );
        ctx.stats_raw(
            br#"{"eos":{"idemp_state":"Assigned","producer_id":7042,"producer_epoch":3}}"#,
        );
        assert_eq!(
            ctx.other_pair((7042, 3)),
            Some((7042, 4)),
            "a moved pair is remembered"
        );
    }

    #[test]
    fn statistics_without_eos_or_malformed_are_skipped() {
        let ctx = ProducerCtx::default();
        ctx.stats_raw(br#"{"name":"p"}"#);
        ctx.stats_raw(b"not json");
        assert_eq!(ctx.eos().0, 0);
        assert!(ctx
            .wait_eos(0, Duration::from_millis(1), |_| true)
            .is_none());
    }

    #[test]
    fn unassigned_state_has_no_pair() {
        let s = EosSnapshot {
            idemp_state: "WaitPID".into(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        };
        assert_eq!(s.assigned_pair(), None);
        assert_eq!(s.pair(), None);
    }
}
