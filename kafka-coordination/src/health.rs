//! [`HealthCheck`]: a ready-made liveness check for a process that leads now and then, in the
//! spirit of client-go's `HealthzAdaptor`, and free of any HTTP framework.
//!
//! A leader that cannot renew its lease (a partition, a stuck broker connection, a process that
//! froze for a while) keeps believing it leads until the broker fences it; its standbys take
//! over once its lease runs out. A liveness probe that fails as soon as renewals stop
//! succeeding lets the orchestrator restart such a process before, or while, that happens.
//! A process that leads nothing is healthy as far as this check goes: waiting is its job.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::leadership::{Health, Leadership, Shared};

/// Healthy while every term it watches renewed its lease within `max_age`; terms that are over
/// (fenced, resigned, failed) are forgotten, and with none left it is healthy. Cloning shares
/// the watched terms, so one clone can sit in the HTTP handler while the code that wins
/// elections [`watch`](Self::watch)es each new term.
///
/// Pick `max_age` as a few renew intervals, well below the lease duration: the check then fails
/// while the lease still holds, before the standbys take over.
///
/// ```
/// # #[cfg(all(feature = "memory", feature = "blocking"))] {
/// use std::time::Duration;
/// use kafka_coordination::testkit::TestCluster;
/// use kafka_coordination::HealthCheck;
///
/// let cluster = TestCluster::new();             // lease 3 s, renew 1 s
/// let check = HealthCheck::new(Duration::from_millis(1500));
/// assert!(check.check().is_ok());               // leads nothing: healthy
///
/// let a = cluster.join("scheduler", "node-a");
/// let leadership = a.take_leadership().unwrap();
/// check.watch(&leadership);
/// cluster.advance(Duration::from_secs(2));
/// assert!(check.check().is_ok());               // renewing
///
/// a.link().cut();                               // renewals fail from now on
/// cluster.advance(Duration::from_secs(2));
/// let unhealthy = check.check().unwrap_err();
/// assert!(unhealthy.to_string().contains("scheduler"));
/// # }
/// ```
#[derive(Clone)]
pub struct HealthCheck {
    max_age: Duration,
    terms: Arc<Mutex<Vec<Arc<Shared>>>>,
}

impl fmt::Debug for HealthCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthCheck")
            .field("max_age", &self.max_age)
            .field("terms", &self.lock().len())
            .finish()
    }
}

impl HealthCheck {
    /// A check that allows renewals to be at most `max_age` old, watching no term yet.
    pub fn new(max_age: Duration) -> HealthCheck {
        HealthCheck {
            max_age,
            terms: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The oldest renewal it accepts.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Shared>>> {
        kafka_coordination_transport::lock::lock(&self.terms)
    }

    /// Watches `leadership`'s term until it is over. The check does not keep the term alive:
    /// dropping the [`Leadership`] still resigns. Watching the same term twice changes nothing.
    pub fn watch(&self, leadership: &Leadership) {
        let shared = leadership.shared();
        let mut terms = self.lock();
        if !terms.iter().any(|t| Arc::ptr_eq(t, shared)) {
            terms.push(Arc::clone(shared));
        }
    }

    /// How many terms it watches that are not over.
    pub fn watched(&self) -> usize {
        let mut terms = self.lock();
        terms.retain(|t| t.health().leading);
        terms.len()
    }

    /// The verdict now: `Ok` when it leads nothing or every term it leads renewed within
    /// [`max_age`](Self::max_age); otherwise each stale term, with its [`Health`].
    pub fn check(&self) -> Result<(), Unhealthy> {
        let mut stale = Vec::new();
        let mut terms = self.lock();
        terms.retain(|term| {
            let health = term.health();
            if !health.leading {
                return false;
            }
            if !health.is_healthy(self.max_age) {
                stale.push(StaleTerm {
                    role: term.role.to_string(),
                    member: term.member.to_string(),
                    health,
                });
            }
            true
        });
        if stale.is_empty() {
            Ok(())
        } else {
            Err(Unhealthy {
                max_age: self.max_age,
                stale,
            })
        }
    }
}

/// Why a [`HealthCheck`] failed: the terms whose last renewal is older than the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unhealthy {
    /// The check's limit.
    pub max_age: Duration,
    /// Every stale term, in the order they were watched.
    pub stale: Vec<StaleTerm>,
}

/// One term that has not renewed within the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StaleTerm {
    /// The role.
    pub role: String,
    /// The member leading it.
    pub member: String,
    /// Its health when checked.
    pub health: Health,
}

impl fmt::Display for StaleTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.health;
        write!(f, "role `{}` (member `{}`): ", self.role, self.member)?;
        match h.last_renewal {
            Some(at) => write!(
                f,
                "last lease renewal {:.3} s ago",
                h.now.since(at).as_secs_f64()
            )?,
            None => f.write_str("no lease renewal recorded")?,
        }
        if let Some(failing) = h.failing_for {
            write!(f, ", renewals failing for {:.3} s", failing.as_secs_f64())?;
        }
        if let Some(deadline) = h.lease_deadline {
            if h.now < deadline {
                write!(
                    f,
                    ", lease runs out in {:.3} s",
                    deadline.since(h.now).as_secs_f64()
                )?;
            } else {
                write!(
                    f,
                    ", lease ran out {:.3} s ago",
                    h.now.since(deadline).as_secs_f64()
                )?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unhealthy: no lease renewal within {:.3} s: ",
            self.max_age.as_secs_f64()
        )?;
        for (i, term) in self.stale.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{term}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Unhealthy {}
