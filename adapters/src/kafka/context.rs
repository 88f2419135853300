//! librdkafka client contexts: delivery reports and the last global error (for messages about
//! an unreachable cluster).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, ProducerContext};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

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
}

/// The context of every librdkafka client: the registration producer and the short-lived admin
/// clients of the topic check.
#[derive(Default)]
pub(crate) struct ClientCtx {
    last_error: Mutex<Option<String>>,
}

impl ClientCtx {
    /// The last global error librdkafka reported (for example a refused connection).
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }
}

impl ClientContext for ClientCtx {
    fn error(&self, error: KafkaError, reason: &str) {
        *lock(&self.last_error) = Some(format!("{error}: {reason}"));
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        log_librdkafka(level, fac, message);
    }
}

impl ProducerContext for ClientCtx {
    type DeliveryOpaque = Arc<DeliverySlot>;

    fn delivery(&self, result: &DeliveryResult<'_>, slot: Arc<DeliverySlot>) {
        match result {
            Ok(message) => slot.fill(Ok(message.offset())),
            Err((error, _)) => slot.fill(Err(error.clone())),
        }
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
