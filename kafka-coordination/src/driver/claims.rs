//! Hand-over of a role's claim between two candidacies of this process on one transport.
//!
//! A transport refuses a second candidacy for a role it already holds ([`Transport::claim_role`]).
//! When a candidacy of this process for that role has a term that is over (fenced, resigning,
//! failed) but an exit still running, a new candidacy for the role is not a second live one: it
//! waits for that exit to release the role, then claims it again. Invariant: the new candidacy
//! sends nothing before it holds the transport's claim, so its registration never races the
//! previous one's deregistration and the two never share the role's producer session.
//!
//! The registry knows a candidacy by its role and its transport's claims
//! ([`Coordinator::claims_scope`]): a refused claim waits for the ending candidacies of the
//! role in that scope, then asks the transport again, and fails only when none is left.
//!
//! [`Coordinator::claims_scope`]: crate::transport::Coordinator::claims_scope
//!
//! [`Transport::claim_role`]: crate::transport::Coordinator::claim_role

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use kafka_coordination_core::record::Role;

use super::lock;
use crate::leadership::Shared;

/// A candidacy's hold on its role: released once, when its driver lets the role go.
pub(crate) struct Claim {
    holder: Weak<Shared>,
    released: AtomicBool,
    /// Candidacies waiting for the release (rung when it comes).
    waiters: Mutex<Vec<Weak<Shared>>>,
}

impl Claim {
    /// Whether the role was let go.
    pub(crate) fn released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// Asks for a ring of `waiter`'s doorbell when the role is let go (at once if it was).
    pub(crate) fn wake_on_release(&self, waiter: &Arc<Shared>) {
        let waiter_ref = Arc::downgrade(waiter);
        {
            let mut waiters = lock(&self.waiters);
            if !waiters.iter().any(|w| w.ptr_eq(&waiter_ref)) {
                waiters.push(waiter_ref);
            }
        }
        if self.released() {
            waiter.doorbell.ring();
        }
    }

    /// Whether the holder's term is over, so that what is left of it is its exit.
    fn ending(&self) -> bool {
        self.holder.upgrade().is_none_or(|s| s.term_is_over())
    }
}

/// A role in a transport's scope of claims.
pub(crate) type Key = (Option<usize>, Role);

type Registry = Mutex<HashMap<Key, Vec<Arc<Claim>>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// Records that `holder` now holds `role` on its transport; returns its claim.
pub(crate) fn hold(key: &Key, holder: &Arc<Shared>) -> Arc<Claim> {
    let claim = Arc::new(Claim {
        holder: Arc::downgrade(holder),
        released: AtomicBool::new(false),
        waiters: Mutex::new(Vec::new()),
    });
    lock(registry())
        .entry(key.clone())
        .or_default()
        .push(claim.clone());
    claim
}

/// A claim on `role` by a candidacy of this process whose term is over and whose exit has not
/// let the role go yet, if there is one.
pub(crate) fn ending(key: &Key) -> Option<Arc<Claim>> {
    lock(registry())
        .get(key)?
        .iter()
        .find(|c| c.ending() && !c.released())
        .cloned()
}

/// Lets `role` go: forgets the claim and wakes its waiters.
pub(crate) fn release(key: &Key, claim: &Arc<Claim>) {
    {
        let mut held = lock(registry());
        if let Some(claims) = held.get_mut(key) {
            claims.retain(|c| !Arc::ptr_eq(c, claim));
            if claims.is_empty() {
                held.remove(key);
            }
        }
    }
    claim.released.store(true, Ordering::Release);
    for waiter in lock(&claim.waiters).drain(..) {
        if let Some(w) = waiter.upgrade() {
            w.doorbell.ring();
        }
    }
}
