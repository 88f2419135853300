//! What a run reports: the failure of an invariant, and the figures of the runs that pass.

use std::fmt::{self, Write as _};

use super::harness::Res;
use super::At;

/// Why a run failed: the invariant, the seed, the virtual time and the recent trace.
#[derive(Debug)]
pub struct Failure {
    /// The seed of the run.
    pub seed: u64,
    /// How many roles the run had (1: the single-role simulation).
    pub roles: usize,
    /// The invariant (S1..S4, L1, L2) or contract that failed.
    pub invariant: &'static str,
    /// The virtual instant.
    pub at: i64,
    /// What was seen.
    pub message: String,
    /// The members' state and the last trace lines.
    pub context: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation seed {} failed: [{}] at t={} (virtual): {}",
            self.seed,
            self.invariant,
            At(self.at),
            self.message
        )?;
        f.write_str(&self.context)?;
        let roles = if self.roles > 1 {
            format!("SIM_ROLES={} ", self.roles)
        } else {
            String::new()
        };
        write!(
            f,
            "replay: {roles}SIM_SEED={} cargo test -p kafka-coordination --features memory --test \
             simulation replay_seed -- --nocapture",
            self.seed
        )
    }
}

/// What one run exercised.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Events processed.
    pub steps: u64,
    /// `Elected` commands.
    pub elections: u64,
    /// `Deposed` commands.
    pub depositions: u64,
    /// Crashes (of which leaders).
    pub crashes: u64,
    /// Crashes of the real leader.
    pub leader_crashes: u64,
    /// Crashed leaders that left a lease write open.
    pub open_writes: u64,
    /// Requests that reached the broker after their member crashed.
    pub ghosts: u64,
    /// Pauses longer than the lease (of which leaders).
    pub pauses: u64,
    /// Pauses of the real leader.
    pub leader_pauses: u64,
    /// Restarts and rejoins (new incarnations after the first).
    pub restarts: u64,
    /// Resign requests.
    pub resigns: u64,
    /// Broker fault injections (failures, lost replies, unavailable and slow windows).
    pub broker_faults: u64,
    /// `force_epoch` near exhaustion.
    pub exhaustions: u64,
    /// Acquires that returned a fresh producer id after the first.
    pub fresh_producer_ids: u64,
    /// `Failed` events handed to candidates.
    pub failed_events: u64,
    /// `Fenced` events handed to candidates.
    pub fenced_events: u64,
    /// Leader deaths L1 watched: every death of the real leader whose lease could be found.
    pub l1_checked: u64,
    /// ... of which met within the calm bound `D + r x stagger + SLACK_MS` (no disturbance,
    /// slow call, stall or open write counted in the bound).
    pub l1_calm: u64,
    /// ... of which ended by the paused leader resuming with the role still its own.
    pub l1_leader_back: u64,
    /// Leader deaths L1 could not watch: the committed lease was not the dead leader's.
    pub l1_skipped: u64,
    /// Largest `elected_at - (D + r * STAGGER)` among calm L1 checks (how much of the slack
    /// was used).
    pub l1_worst_ms: i64,
    /// `elected_at - (D + r * STAGGER)` of calm failovers: the failover overhead (true time).
    pub overhead: Histogram,
    /// The same by the successor's own clock (without its skew against the dead leader's):
    /// what the protocol's calls add.
    pub overhead_own_clock: Histogram,
    /// Failovers (met L1 watches) whose new term was watched for one lease duration.
    pub failovers: u64,
    /// ... in which exactly one member was elected.
    pub failovers_one_election: u64,
    /// Elections beyond the first within those windows (extra short terms).
    pub extra_elections: u64,
    /// Failovers in runs whose coordinator answers every acquire within the normal latency.
    pub fast_failovers: u64,
    /// ... in which exactly one member was elected.
    pub fast_failovers_one_election: u64,
    /// Acquires that took longer than half the stagger to reach the coordinator.
    pub slow_acquires: u64,
    /// Challenges (non-exit acquires) L4 checked.
    pub l4_checked: u64,
    /// Open transactions of another role left on the role's partition (stalled reads).
    pub foreign_stalls: u64,
    /// Restarts under a new member name: the old registration stays behind as a ghost.
    pub renamed: u64,
    /// Challenges announced (the lease holder's registration tombstoned before an acquire).
    pub announcements: u64,
    /// Registrations of other members that a new leader tombstoned.
    pub evictions: u64,
    /// ... of which a ghost's (a name that never comes back).
    pub ghost_evictions: u64,
    /// ... of which a live member's (it registers again at the tail).
    pub live_evictions: u64,
    /// Live members registered again after their eviction (G2).
    pub g2_rejoined: u64,
    /// Resigns followed by a new registration within 300 ms: a balancing member's move (a
    /// fleet's hand-over, or a standby that withdraws to register again behind another).
    pub balancing_moves: u64,
    /// Live members passed over by an election without eviction (G2 then asks them to
    /// register again).
    pub live_passed_over: u64,
    /// First renewals after an election at which G1 checked the passed-over registrations.
    pub g1_checked: u64,
    /// Calm failovers whose successor had a ghost ranked ahead of it.
    pub ghost_ahead_failovers: u64,
    /// With `SIM_LENIENT` set: L1 misses and L4 violations counted instead of failing the run.
    pub l1_violations: u64,
    /// See `l1_violations`.
    pub l4_violations: u64,
    /// See `l1_violations` (G1 and G2).
    pub g_violations: u64,
    /// L2 rank checks of restarted incarnations.
    pub l2_rank_checks: u64,
    /// L2 challenge checks of restarted incarnations.
    pub l2_challenge_checks: u64,
    /// Accepted lease writes audited.
    pub audited_writes: u64,
    /// Completed resigns whose pairs R1 checked.
    pub r1_checked: u64,
    /// Elections whose term T1 checked.
    pub terms_checked: u64,
    /// Multi-role runs: roles, and processes hosting one member of each.
    pub roles: u64,
    /// ... processes.
    pub processes: u64,
    /// ... process crashes (each crashes the process's member in every role).
    pub process_crashes: u64,
    /// ... of which crashed the real leader of two roles or more at once.
    pub multi_role_crashes: u64,
    /// ... the roles those crashes left without their leader (each must fail over: L1 per role).
    pub multi_role_moves: u64,
    /// ... of which L1 watched (a lease of the dead pair committed).
    pub multi_role_l1_checked: u64,
    /// ... of which a new leader was elected within the role's L1 bound.
    pub multi_role_l1_met: u64,
    /// `elected_at - (D + r x stagger)` of those failovers, calm or not (as `overhead`).
    pub multi_role_overhead: Histogram,
    /// The smallest time left to the role's L1 bound at those elections (ms; `None`: none
    /// had a bound yet).
    pub multi_role_min_margin_ms: Option<i64>,
    /// Process pauses that paused the real leader of two roles or more at once.
    pub multi_role_pauses: u64,
    /// Process restarts (every role's member restarts together; under a new name for all).
    pub process_restarts: u64,
    /// Lease writes a crashed leader left open that stalled another simulated role's reads
    /// on the same partition.
    pub cross_role_stalls: u64,
}

impl Stats {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &Stats) {
        self.steps += o.steps;
        self.elections += o.elections;
        self.depositions += o.depositions;
        self.crashes += o.crashes;
        self.leader_crashes += o.leader_crashes;
        self.open_writes += o.open_writes;
        self.ghosts += o.ghosts;
        self.pauses += o.pauses;
        self.leader_pauses += o.leader_pauses;
        self.restarts += o.restarts;
        self.resigns += o.resigns;
        self.broker_faults += o.broker_faults;
        self.exhaustions += o.exhaustions;
        self.fresh_producer_ids += o.fresh_producer_ids;
        self.failed_events += o.failed_events;
        self.fenced_events += o.fenced_events;
        self.l1_checked += o.l1_checked;
        self.l1_calm += o.l1_calm;
        self.l1_leader_back += o.l1_leader_back;
        self.l1_skipped += o.l1_skipped;
        self.l1_worst_ms = self.l1_worst_ms.max(o.l1_worst_ms);
        self.overhead.add(&o.overhead);
        self.overhead_own_clock.add(&o.overhead_own_clock);
        self.failovers += o.failovers;
        self.failovers_one_election += o.failovers_one_election;
        self.extra_elections += o.extra_elections;
        self.fast_failovers += o.fast_failovers;
        self.fast_failovers_one_election += o.fast_failovers_one_election;
        self.slow_acquires += o.slow_acquires;
        self.l4_checked += o.l4_checked;
        self.foreign_stalls += o.foreign_stalls;
        self.renamed += o.renamed;
        self.announcements += o.announcements;
        self.evictions += o.evictions;
        self.ghost_evictions += o.ghost_evictions;
        self.live_evictions += o.live_evictions;
        self.g2_rejoined += o.g2_rejoined;
        self.balancing_moves += o.balancing_moves;
        self.live_passed_over += o.live_passed_over;
        self.g1_checked += o.g1_checked;
        self.ghost_ahead_failovers += o.ghost_ahead_failovers;
        self.l1_violations += o.l1_violations;
        self.l4_violations += o.l4_violations;
        self.g_violations += o.g_violations;
        self.l2_rank_checks += o.l2_rank_checks;
        self.l2_challenge_checks += o.l2_challenge_checks;
        self.r1_checked += o.r1_checked;
        self.terms_checked += o.terms_checked;
        self.audited_writes += o.audited_writes;
        self.roles += o.roles;
        self.processes += o.processes;
        self.process_crashes += o.process_crashes;
        self.multi_role_crashes += o.multi_role_crashes;
        self.multi_role_moves += o.multi_role_moves;
        self.multi_role_l1_checked += o.multi_role_l1_checked;
        self.multi_role_l1_met += o.multi_role_l1_met;
        self.multi_role_overhead.add(&o.multi_role_overhead);
        self.multi_role_min_margin_ms =
            match (self.multi_role_min_margin_ms, o.multi_role_min_margin_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        self.multi_role_pauses += o.multi_role_pauses;
        self.process_restarts += o.process_restarts;
        self.cross_role_stalls += o.cross_role_stalls;
    }
}

/// A histogram of milliseconds in 5 ms buckets (the last one open-ended).
#[derive(Clone, Default)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max: i64,
}

impl Histogram {
    const WIDTH: i64 = 5;
    const BUCKETS: usize = 600;

    /// Records one value.
    pub fn record(&mut self, ms: i64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; Self::BUCKETS];
        }
        let b = usize::try_from(ms.max(0) / Self::WIDTH)
            .unwrap_or(usize::MAX)
            .min(Self::BUCKETS - 1);
        self.buckets[b] += 1;
        self.count += 1;
        self.max = if self.count == 1 {
            ms
        } else {
            self.max.max(ms)
        };
    }

    /// Adds another histogram's values.
    pub fn add(&mut self, o: &Histogram) {
        if o.count == 0 {
            return;
        }
        if self.buckets.is_empty() {
            self.buckets = vec![0; Self::BUCKETS];
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.max = if self.count == 0 {
            o.max
        } else {
            self.max.max(o.max)
        };
        self.count += o.count;
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The upper edge of the bucket holding the `q`-quantile (0 < q <= 1).
    pub fn quantile(&self, q: f64) -> i64 {
        let want = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return (i as i64 + 1) * Self::WIDTH;
            }
        }
        self.max
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 0 {
            return f.write_str("(none)");
        }
        write!(
            f,
            "n {} median <= {} ms, p90 <= {} ms, p99 <= {} ms, max {} ms",
            self.count,
            self.quantile(0.5),
            self.quantile(0.9),
            self.quantile(0.99),
            self.max
        )
    }
}

/// The failure of a quiet run, checked against the detailed re-run of the same seed: the
/// re-run's failure (with its trace) when it fails the same way, else the first one, marked as
/// a sign that the simulation is not deterministic.
pub(super) fn confirmed(first: Failure, again: Res) -> Box<Failure> {
    match again {
        Err(f) if f.invariant == first.invariant && f.at == first.at => Box::new(f),
        other => {
            let mut first = first;
            let _ = write!(
                first.message,
                " (and the detailed re-run did not fail the same way: {}; the simulation is not \
                 deterministic)",
                match other {
                    Ok(()) => "it passed".to_string(),
                    Err(f) => format!("[{}] at {}", f.invariant, At(f.at)),
                }
            );
            Box::new(first)
        }
    }
}
