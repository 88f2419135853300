//! When each of many candidacies was elected, as the benchmarks measure it: a task per
//! candidacy, woken by its election, stamps the wall clock; and the deadlines they were
//! elected after, read from the lease records.
//!
//! Polling thousands of snapshots every few milliseconds instead would take a core of a small
//! machine away from the broker and the drivers it measures, and make their figures worse than
//! what a user sees; a waiting task costs nothing until it is woken.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::core::record::{KeyKind, KeyRef, LeaseRef};
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::transport::Record;
use kafka_coordination::{Clock, SystemClock};

/// Calls `f(role, granted_at, deadline)` for each lease record from `member` among `records`,
/// in their order. Records that are not leases, or do not decode, are skipped.
fn each_lease(
    records: impl IntoIterator<Item = Record>,
    member: &str,
    mut f: impl FnMut(&str, i64, i64),
) {
    for r in records {
        let Ok(key) = KeyRef::decode(&r.key) else {
            continue;
        };
        if key.kind() != KeyKind::Lease {
            continue;
        }
        let lease = r.value.as_deref().and_then(|v| LeaseRef::decode(v).ok());
        if let Some(l) = lease.filter(|l| l.member() == member) {
            f(key.role(), l.granted_at().0, l.deadline().0);
        }
    }
}

/// Adds to `deadlines` the deadline that each role's last lease record from `member` carries,
/// among `records` (one partition's, in offset order): the instant a standby of the role
/// takes over from once `member` is gone. Records that are not leases, or do not decode, are
/// skipped.
pub fn lease_deadlines(
    records: impl IntoIterator<Item = Record>,
    member: &str,
    deadlines: &mut HashMap<String, i64>,
) {
    each_lease(records, member, |role, _, deadline| {
        deadlines.insert(role.to_owned(), deadline);
    });
}

/// Every lease `member` wrote, by role: `(granted_at, deadline)` in offset order (what the
/// topic still holds: compaction may have removed older ones). The last of each role's is
/// what [`lease_deadlines`] keeps.
pub fn lease_history(
    records: impl IntoIterator<Item = Record>,
    member: &str,
    history: &mut HashMap<String, Vec<(i64, i64)>>,
) {
    each_lease(records, member, |role, granted, deadline| {
        history
            .entry(role.to_owned())
            .or_default()
            .push((granted, deadline));
    });
}

/// The elections being waited for (see [`watch`]).
pub struct Elections {
    at: Arc<Vec<AtomicI64>>,
    settled: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<Option<Leadership>>>,
}

/// Waits on `runtime` for each candidacy's election, for at most `limit` each. A candidacy
/// not elected by then is dropped, which cancels it.
pub fn watch(
    runtime: &tokio::runtime::Runtime,
    candidacies: Vec<Candidacy>,
    limit: Duration,
) -> Elections {
    let at: Arc<Vec<AtomicI64>> =
        Arc::new((0..candidacies.len()).map(|_| AtomicI64::new(0)).collect());
    let settled = Arc::new(AtomicUsize::new(0));
    let tasks = candidacies
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let (at, settled) = (at.clone(), settled.clone());
            runtime.spawn(async move {
                let won = tokio::time::timeout(limit, c.elected()).await;
                let leadership = match won {
                    Ok(Ok(leadership)) => {
                        at[i].store(SystemClock.now().0, Ordering::Relaxed);
                        Some(leadership)
                    }
                    Ok(Err(e)) => {
                        eprintln!("elections: candidacy {i} ended without leading: {e}");
                        None
                    }
                    Err(_) => None,
                };
                settled.fetch_add(1, Ordering::Relaxed);
                leadership
            })
        })
        .collect();
    Elections { at, settled, tasks }
}

impl Elections {
    /// How many candidacies were elected, ended or ran out of time so far.
    pub fn settled(&self) -> usize {
        self.settled.load(Ordering::Relaxed)
    }

    /// How many candidacies are watched.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether no candidacy is watched.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Waits until every candidacy settled; returns when each was elected (Unix milliseconds;
    /// `None` if it was not) and the leaderships won, which the caller keeps alive.
    pub fn finish(self, runtime: &tokio::runtime::Runtime) -> (Vec<Option<i64>>, Vec<Leadership>) {
        let leaderships = self
            .tasks
            .into_iter()
            .filter_map(|t| runtime.block_on(t).ok().flatten())
            .collect();
        let at = self
            .at
            .iter()
            .map(|t| Some(t.load(Ordering::Relaxed)).filter(|&t| t != 0))
            .collect();
        (at, leaderships)
    }
}
