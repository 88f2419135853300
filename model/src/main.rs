//! `model-check`: one exhaustive run of the coordination model, configured from the
//! environment (see `scripts/model-check.sh`), printing its figures and any counterexample.

use kafka_coordination_model::{check, Config, Mutation, Search};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let members = env("MODEL_MEMBERS", 2usize);
    let mut cfg = Config::new(members, env("MODEL_HORIZON", 24i64));
    cfg.lease_ms = env("MODEL_LEASE", cfg.lease_ms);
    cfg.renew_ms = env("MODEL_RENEW", cfg.renew_ms);
    cfg.stagger_ms = env("MODEL_STAGGER", cfg.stagger_ms);
    cfg.skew = env("MODEL_SKEW", cfg.skew);
    cfg.crashes = env("MODEL_CRASHES", cfg.crashes);
    cfg.restarts = env("MODEL_RESTARTS", cfg.restarts);
    cfg.pauses = env("MODEL_PAUSES", cfg.pauses);
    cfg.losses = env("MODEL_LOSSES", cfg.losses);
    cfg.delays = env("MODEL_DELAYS", cfg.delays);
    cfg.resigns = env("MODEL_RESIGNS", cfg.resigns);
    cfg.withdraws = env("MODEL_WITHDRAWS", cfg.withdraws);
    cfg.rejoins = env("MODEL_REJOINS", cfg.rejoins);
    cfg.slack = env("MODEL_SLACK", cfg.slack);
    cfg.pause_ms = env("MODEL_PAUSE", cfg.pause_ms);
    cfg.evict = env("MODEL_EVICT", 0u8) != 0;
    let faults_before = env("MODEL_FAULTS_BEFORE", -1i64);
    cfg.faults_before = (faults_before >= 0).then_some(faults_before);
    cfg.faults_after = env("MODEL_FAULTS_AFTER", 0i64);
    cfg.mutation = match std::env::var("MODEL_MUTATION").as_deref() {
        Ok("early-challenge") => Some(Mutation::EarlyChallenge),
        Ok("ignore-fence") => Some(Mutation::IgnoreFence),
        Ok("read-past-lso") => Some(Mutation::ReadPastLso),
        Ok("no-fence") => Some(Mutation::NoFence),
        Ok("shared-pair") => Some(Mutation::SharedPair),
        Ok("failback") => Some(Mutation::Failback),
        Ok("resign-keeps-lease") => Some(Mutation::ResignKeepsLease),
        Ok("never-challenge") => Some(Mutation::NeverChallenge),
        Ok("double-answer") => Some(Mutation::DoubleAnswer),
        Ok("early-rejoin") => Some(Mutation::EarlyRejoin),
        _ => None,
    };
    let threads = env("MODEL_THREADS", 2usize);
    println!("{cfg:?}");
    // MODEL_FIND=<property name>: a breadth-first search for the shortest counterexample of
    // that property (see the names in the crate docs) instead of the exhaustive run.
    let find = std::env::var("MODEL_FIND").ok();
    let search = match find.as_deref() {
        Some(name) => match kafka_coordination_model::PROPERTIES
            .iter()
            .find(|p| p.contains(name))
        {
            Some(p) => Search::FirstFailure(p),
            None => {
                eprintln!("MODEL_FIND: no property matches {name:?}");
                std::process::exit(2);
            }
        },
        None => Search::Exhaustive,
    };
    let figures = check(cfg, threads, search);
    println!("{figures}");
    for (name, trace) in &figures.failures {
        println!("\n=== counterexample: {name}\n{trace}");
    }
    if !figures.failures.is_empty() {
        std::process::exit(1);
    }
}
