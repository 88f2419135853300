//! The deterministic simulation (DESIGN.md, "Tests, in layers", item 3): members with skewed
//! clocks against the `MemoryBroker` in virtual time, under seeded crashes, restarts (some under
//! a new name, leaving ghosts), pauses longer than the lease, resigns, broker failures and
//! delays, a coordinator slower than the stagger, stalls by another role's open transaction,
//! and epoch exhaustion. The model and the exact invariants are documented in `sim.rs`.
//!
//! Multi-role processes: with `SIM_ROLES=<n>` (n >= 2) every member is a process hosting a
//! candidate of each of n roles on one shared transport (some roles on the same partition), and
//! a crash, restart or pause of a process hits all its roles at once; every invariant is
//! checked for every role after every step (see "Multi-role processes" in `sim/world.rs`).
//!
//! `SIM_LENIENT=1` counts L1 misses, L4 violations and G1/G2 failures in the figures instead of
//! failing (to measure a machine that does not meet them).
//!
//! * `simulate_10k_seeds`: seeds 0..10_000, one role, one virtual minute each (default suite).
//! * `simulate_multi_role_seeds`: seeds 0..1_000, three roles over 2..5 processes, one virtual
//!   minute each (default suite).
//! * `replay_seed`: `SIM_SEED=<n>` replays one seed and prints its whole trace; without it, a
//!   fixed seed runs quietly. `SIM_ROLES=<n>` replays it with n roles (default 1).
//! * `soak` (ignored): `SIM_SEEDS` seeds (default 1,000,000) from `SIM_SEED_START` (default
//!   10,000, past the default suites), on `SIM_THREADS` threads (default 1), with `SIM_ROLES`
//!   roles (default 1):
//!   `cargo test --release -p kafka-coordination --features memory --test integration -- --ignored simulation::soak --nocapture`
//!   (`SIM_ROLES=3 ...` soaks multi-role runs).

mod sim;

use std::time::Instant;

use sim::{run_seed_roles, with_eviction, Failure, Stats, RUN_MS};

fn env_u64(name: &str) -> Option<u64> {
    let raw = std::env::var(name).ok()?;
    let value = raw.trim().replace('_', "");
    Some(
        value
            .parse()
            .unwrap_or_else(|e| panic!("{name}={raw:?} is not a number: {e}")),
    )
}

/// `SIM_ROLES`: roles per run (default 1, the single-role simulation).
fn env_roles() -> usize {
    env_u64("SIM_ROLES").map_or(1, |r| usize::try_from(r).expect("SIM_ROLES fits").max(1))
}

/// Runs `seeds` with `roles` roles each, stopping after `max_failures` failures; returns the
/// totals and the failures.
fn run_range(
    seeds: std::ops::Range<u64>,
    roles: usize,
    max_failures: usize,
) -> (Stats, Vec<Failure>) {
    let mut totals = Stats::default();
    let mut failures = Vec::new();
    for seed in seeds {
        match run_seed_roles(seed, roles, RUN_MS, false) {
            Ok(stats) => totals.add(&stats),
            Err(f) => {
                eprintln!("{f}\n");
                failures.push(*f);
                if failures.len() >= max_failures {
                    break;
                }
            }
        }
    }
    (totals, failures)
}

fn report(seeds: u64, roles: usize, totals: &Stats, elapsed: std::time::Duration) {
    println!(
        "{seeds} seeds x {roles} role(s) x {} s virtual in {:.1} s ({:.0} seeds/s): {:#?}",
        RUN_MS / 1000,
        elapsed.as_secs_f64(),
        seeds as f64 / elapsed.as_secs_f64(),
        totals
    );
}

fn fail_with(failures: &[Failure]) -> ! {
    let seeds: Vec<String> = failures
        .iter()
        .map(|f| format!("{} [{}]", f.seed, f.invariant))
        .collect();
    panic!(
        "{} failing seed(s): {}\n\nfirst failure:\n{}",
        failures.len(),
        seeds.join(", "),
        failures[0]
    );
}

#[test]
fn simulate_10k_seeds() {
    let started = Instant::now();
    let (totals, failures) = run_range(0..10_000, 1, 5);
    if !failures.is_empty() {
        fail_with(&failures);
    }
    report(10_000, 1, &totals, started.elapsed());
    // The schedule must actually exercise what the invariants are about.
    assert!(totals.leader_crashes > 5_000, "{totals:?}");
    assert!(totals.leader_pauses > 3_000, "{totals:?}");
    assert!(totals.open_writes > 1_000, "{totals:?}");
    assert!(totals.restarts > 10_000, "{totals:?}");
    assert!(totals.resigns > 2_000, "{totals:?}");
    assert!(totals.balancing_moves > 1_000, "{totals:?}");
    assert!(totals.exhaustions > 1_000, "{totals:?}");
    assert!(totals.fresh_producer_ids > 1_000, "{totals:?}");
    assert!(totals.ghosts > 50, "{totals:?}");
    assert!(totals.depositions > 2_000, "{totals:?}");
    // L1 is checked at every death of the leader, calm or not.
    assert!(totals.l1_checked > 20_000, "{totals:?}");
    assert!(totals.l1_calm > 10_000, "{totals:?}");
    assert_eq!(totals.overhead.count(), totals.l1_calm, "{totals:?}");
    assert!(totals.l1_skipped * 100 < totals.l1_checked, "{totals:?}");
    // Challenge churn: a coordinator slower than the stagger in a third of the runs. With the
    // check, at least 98 % of the failovers elect exactly one member when calls keep their
    // normal latency, and at least 94 % overall. (The quarter of the runs that evict also
    // announce their challenges, which a check cannot see on the wire: alone they reach 98 %
    // overall, the others 93-94 %; `SIM_EVICT=1` or `0` runs every seed one way.)
    assert!(totals.slow_acquires > 3_000, "{totals:?}");
    assert!(totals.announcements > 5_000, "{totals:?}");
    assert!(
        totals.fast_failovers_one_election * 100 >= totals.fast_failovers * 98,
        "{totals:?}"
    );
    assert!(
        totals.failovers_one_election * 100 >= totals.failovers * 94,
        "{totals:?}"
    );
    // Stalls of another role, and ghosts.
    assert!(totals.foreign_stalls > 1_000, "{totals:?}");
    assert!(totals.l4_checked > 20_000, "{totals:?}");
    assert!(totals.renamed > 2_000, "{totals:?}");
    // Without eviction (most runs) live members passed over register again (G2); with it
    // (a quarter) ghosts and live members are evicted.
    assert!(totals.live_passed_over > 2_000, "{totals:?}");
    assert!(totals.ghost_evictions > 200, "{totals:?}");
    assert!(totals.live_evictions > 1_000, "{totals:?}");
    assert!(totals.g2_rejoined > 1_000, "{totals:?}");
    assert!(totals.g1_checked > 10_000, "{totals:?}");
    assert!(totals.l2_rank_checks > 10_000, "{totals:?}");
    assert!(totals.l2_challenge_checks > 1_000, "{totals:?}");
    assert!(totals.r1_checked > 1_000, "{totals:?}");
    assert!(totals.terms_checked > 10_000, "{totals:?}");
}

/// Multi-role processes: three roles (two on one partition) hosted by the same 2..5
/// processes, whose crashes, restarts and pauses hit every role at once.
#[test]
fn simulate_multi_role_seeds() {
    const SEEDS: u64 = MULTI_ROLE_SEEDS;
    let started = Instant::now();
    let (totals, failures) = run_range(0..SEEDS, 3, 5);
    if !failures.is_empty() {
        fail_with(&failures);
    }
    report(SEEDS, 3, &totals, started.elapsed());
    assert_eq!(totals.roles, 3 * SEEDS, "{totals:?}");
    // The scenario happened: crashes of a process that led several roles at once, each of
    // those roles failing over within its own L1 bound (a miss fails the run).
    assert!(totals.multi_role_crashes * 10 > SEEDS, "{totals:?}");
    assert!(
        totals.multi_role_moves >= 2 * totals.multi_role_crashes,
        "{totals:?}"
    );
    assert!(
        totals.multi_role_l1_checked * 10 >= totals.multi_role_moves * 8,
        "{totals:?}"
    );
    assert_eq!(
        totals.multi_role_l1_met, totals.multi_role_l1_checked,
        "{totals:?}"
    );
    assert!(totals.multi_role_pauses > 0, "{totals:?}");
    assert!(totals.cross_role_stalls > 0, "{totals:?}");
    assert!(totals.process_restarts > SEEDS, "{totals:?}");
    // Every invariant kept being exercised, per role.
    assert!(
        totals.l1_checked > totals.multi_role_l1_checked,
        "{totals:?}"
    );
    assert!(totals.l1_calm > 0, "{totals:?}");
    assert!(totals.l4_checked > 0, "{totals:?}");
    assert!(totals.g1_checked > 0, "{totals:?}");
    assert!(totals.r1_checked > 0, "{totals:?}");
    assert!(totals.terms_checked > 0, "{totals:?}");
    assert!(totals.l2_rank_checks > 0, "{totals:?}");
}

/// Seeds of `simulate_multi_role_seeds`.
const MULTI_ROLE_SEEDS: u64 = 1_000;

/// A soak found seed 8813125194 failing L4 when members evict: the leader m4 was asked to
/// resign while the broker refused its exit's InitProducerId calls, so it stopped renewing; its
/// exit then cleared the lease with its old pair, and m0 challenged right after reading that
/// tombstone. The machine was right and the invariant wrong: L4 took the lease tombstone for a
/// renewal on schedule and called the resigning m4 healthy. A resigning leader is not healthy.
#[test]
fn a_resigning_leader_is_not_healthy_seed_8813125194() {
    let outcome = with_eviction(true, || run_seed_roles(8_813_125_194, 1, RUN_MS, false));
    if let Err(f) = outcome {
        panic!("{f}");
    }
}

#[test]
fn replay_seed() {
    let (seed, print) = match env_u64("SIM_SEED") {
        Some(seed) => (seed, true),
        None => (20_240_601, false),
    };
    let roles = env_roles();
    match run_seed_roles(seed, roles, RUN_MS, print) {
        Ok(stats) => println!("seed {seed} ({roles} role(s)) passed: {stats:#?}"),
        Err(f) => panic!("{f}"),
    }
}

#[test]
#[ignore = "soak: a million seeds; run on demand"]
fn soak() {
    let count = env_u64("SIM_SEEDS").unwrap_or(1_000_000);
    let start = env_u64("SIM_SEED_START").unwrap_or(10_000);
    let threads = env_u64("SIM_THREADS").unwrap_or(1).max(1);
    let roles = env_roles();
    let started = Instant::now();
    let chunk = 10_000;
    let next = std::sync::atomic::AtomicU64::new(start);
    let end = start + count;
    let results = std::sync::Mutex::new((Stats::default(), Vec::<Failure>::new(), 0u64));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let from = next.fetch_add(chunk, std::sync::atomic::Ordering::SeqCst);
                if from >= end {
                    break;
                }
                let to = (from + chunk).min(end);
                let (stats, failures) = run_range(from..to, roles, 5);
                let mut r = results.lock().unwrap();
                r.0.add(&stats);
                r.1.extend(failures);
                r.2 += to - from;
                let done = r.2;
                if done % 100_000 == 0 || done == count {
                    let secs = started.elapsed().as_secs_f64();
                    println!(
                        "soak: {done} seeds in {secs:.0} s ({:.0} seeds/s)",
                        done as f64 / secs
                    );
                }
                if r.1.len() >= 5 {
                    break;
                }
            });
        }
    });
    let (totals, failures, done) = results.into_inner().unwrap();
    if !failures.is_empty() {
        fail_with(&failures);
    }
    report(done, roles, &totals, started.elapsed());
}
