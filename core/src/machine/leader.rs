//! A leader's side of a [`Candidate`]: when its renewals fall due, how a term starts, and the
//! evictions a new leader makes when it is set to.

use super::{Candidate, Io};
use crate::time::{duration_millis, UnixMillis};
use crate::token::FencingToken;

impl Candidate {
    /// When the renewal after the lease write issued at `issued_at` and finished at `now` is
    /// due. Never later than a renew interval after the write's start, so no lease is held to
    /// a thinner margin than without a schedule.
    ///
    /// Keeping the schedule matters to a process that leads many roles. A write that finished
    /// late (a loop that fell behind, a claim that waited behind thousands of others, a retry)
    /// would otherwise move every later renewal of its role to when the write happened to
    /// finish. A process whose loop was slow once (typically while it claimed its roles)
    /// would keep the renewals, and so the lease deadlines, of all the roles delayed together
    /// bunched for as long as it held them; if it died, their standbys would all have to take
    /// over in the same second.
    ///
    /// - **A term with a phase** (a host's spread): the term's one point in (`issued_at`,
    ///   `issued_at` + renew interval], at once if the write finished after it. A role that
    ///   missed its point is back on its points after one or a few early renewals (while
    ///   writes take less than a renew interval). The rule before, below, kept every role
    ///   whose writes finished later than its phase allowed on its claim's plain schedule for
    ///   as long as its host's queue stayed that far behind, in step with every role claimed
    ///   in the same second.
    /// - **A term without one** (its points are a renew interval after the claim's start and
    ///   every renew interval after that): the next point after `now`, capped at a renew
    ///   interval after the write's start. A write issued on its point that finished before
    ///   the next one keeps the schedule; one that finished later is followed a renew interval
    ///   after its start, never back to back with it unless it took a whole renew interval.
    pub(super) fn next_renewal(&self, now: UnixMillis) -> UnixMillis {
        let interval = duration_millis(self.timing.renew_interval).max(1);
        let grid = self.renew_grid.as_millis();
        // The first point after `after` (the grid's points are `grid + k * interval`).
        let point_after = |after: i64| {
            if after < grid {
                grid
            } else {
                let passed = (after - grid) / interval + 1;
                grid.saturating_add(passed.saturating_mul(interval))
            }
        };
        let next = if self.renew_phased {
            point_after(self.issued_at.as_millis())
        } else {
            point_after(now.as_millis())
        };
        UnixMillis(next).min(self.issued_at + self.timing.renew_interval)
    }

    /// A leader between lease writes: tombstone the next passed-over registration, or wait
    /// for the renewal.
    pub(super) fn lead_on(&mut self, token: FencingToken) {
        if !self.evictions.is_empty() && self.now < self.renew_at {
            self.issue(Io::Evict);
        } else {
            self.timer = Some((self.renew_at, Io::Renew(token)));
        }
    }

    /// An eviction append finished (`ok`) or failed.
    pub(super) fn after_evict(&mut self, ok: bool) {
        if self.resigning {
            self.start_cleanup();
            return;
        }
        let Some(token) = self.term.filter(|t| t.elected).map(|t| t.token) else {
            self.deregister_or_finish();
            return;
        };
        if ok && self.superseded_pending.is_none() {
            self.lead_on(token);
        } else {
            // After a failure (or with a fence to act on), the renewal comes first; the
            // evictions left resume after it.
            self.timer = Some((self.renew_at, Io::Renew(token)));
        }
    }
}
