//! The librdkafka client context of the topic checks: the last global error (for messages about
//! an unreachable cluster).

use std::sync::{Mutex, MutexGuard, PoisonError};

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The context of the short-lived librdkafka admin clients of the topic check.
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
