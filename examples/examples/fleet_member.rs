//! One member of a fleet as a process: hosts `--roles N` roles (`<prefix>-0` .. `<prefix>-N-1`)
//! on a Kafka cluster and leads its share of them, so that anyone can start a fleet from a
//! shell and watch it with `kafka-coordination roles` or `kafka-coordination fleet status`.
//!
//! ```sh
//! kafka-coordination topic create --bootstrap-servers $B --topic __coordination_fleet --partitions 1
//! cargo run --release --example fleet_member --features kafka-client -- \
//!     --bootstrap $B --member host-a --roles 300 --prefix shard
//! ```
//!
//! It prints one line per event on stdout (flushed), for people and for `fleet_bench`:
//! `READY <member> <unix_ms>`, `LEAD <role> <unix_ms> <term>`,
//! `END <role> <unix_ms> <handover|fenced|other>`, `DRAINED <member> <unix_ms>` and, every
//! second, `STATS <unix_ms> leading=<n> preferred=<n> in_motion=<n> requests=<n>`. SIGTERM
//! drains it (every role handed to another member), prints DRAINED and exits 0; SIGUSR1 drains
//! it and it stays. A SIGTERM drain gives up when no other live member that does not drain
//! has been seen for a lease, or after four leases: the member then resigns what it still
//! leads (`END <role> <unix_ms> resigned`, printed before the resign starts) and exits 0
//! without DRAINED.
//!
//! Flags: `--bootstrap HOST:PORT,...` (or `KAFKA_BOOTSTRAP`), `--member M`, `--roles N`,
//! `--prefix P`, `--weight W`, `--version V`, `--policy balance|prefer-newest|prefer-oldest`,
//! `--max-in-motion K`, `--max-in-flight N` (its host's transport calls in flight at once,
//! `HostOptions::max_in_flight`, default 8), `--lease MS`, `--renew MS`, `--stagger MS`,
//! `--state-topic T` (default `__coordination_state`), `--partitions N` (of the state topic, default 16),
//! `--fleet-topic T` (default `__coordination_fleet`), `--fleet NAME` (default `fleet`).
//! With `FLEET_DEBUG` set in its environment it also prints, every second on stderr, the
//! time, its `FleetStats`, its host's `HostStats` and its requests by Kafka API so far.
//! When its stdout is a pipe that nobody reads any more it exits (its host resigns the roles).
use std::error::Error;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_coordination::fleet::{Fleet, FleetOptions, Policy};
use kafka_coordination::host::HostOptions;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{tokio_driver, Options};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinSet;

struct Args {
    bootstrap: String,
    member: String,
    roles: usize,
    prefix: String,
    weight: f64,
    version: Option<String>,
    policy: Policy,
    max_in_motion: usize,
    max_in_flight: usize,
    lease: u64,
    renew: u64,
    stagger: u64,
    state_topic: String,
    partitions: i32,
    fleet_topic: String,
    fleet: String,
}

fn parse() -> Result<Args, Box<dyn Error>> {
    let mut a = Args {
        bootstrap: std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into()),
        member: String::new(),
        roles: 100,
        prefix: "shard".into(),
        weight: 1.0,
        version: None,
        policy: Policy::Balance,
        max_in_motion: 8,
        max_in_flight: kafka_coordination::host::DEFAULT_MAX_IN_FLIGHT,
        lease: 30_000,
        renew: 10_000,
        stagger: 5_000,
        state_topic: "__coordination_state".into(),
        partitions: 16,
        fleet_topic: "__coordination_fleet".into(),
        fleet: "fleet".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--bootstrap" => a.bootstrap = value()?,
            "--member" => a.member = value()?,
            "--roles" => a.roles = value()?.parse().map_err(|e| format!("--roles: {e}"))?,
            "--prefix" => a.prefix = value()?,
            "--weight" => a.weight = value()?.parse().map_err(|e| format!("--weight: {e}"))?,
            "--version" => a.version = Some(value()?),
            "--policy" => a.policy = value()?.parse()?,
            "--max-in-motion" => {
                a.max_in_motion = value()?
                    .parse()
                    .map_err(|e| format!("--max-in-motion: {e}"))?
            }
            "--max-in-flight" => {
                a.max_in_flight = value()?
                    .parse()
                    .map_err(|e| format!("--max-in-flight: {e}"))?
            }
            "--lease" => a.lease = value()?.parse().map_err(|e| format!("--lease: {e}"))?,
            "--renew" => a.renew = value()?.parse().map_err(|e| format!("--renew: {e}"))?,
            "--stagger" => a.stagger = value()?.parse().map_err(|e| format!("--stagger: {e}"))?,
            "--state-topic" => a.state_topic = value()?,
            "--partitions" => {
                a.partitions = value()?.parse().map_err(|e| format!("--partitions: {e}"))?
            }
            "--fleet-topic" => a.fleet_topic = value()?,
            "--fleet" => a.fleet = value()?,
            other => return Err(format!("unknown flag {other} (see the file's docs)").into()),
        }
    }
    if a.member.is_empty() {
        return Err("--member is required".into());
    }
    Ok(a)
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn now_since(at: tokio::time::Instant) -> Duration {
    tokio::time::Instant::now() - at
}

/// Prints one event line; false when nobody reads the output any more (a closed pipe).
fn say(line: String) -> bool {
    let mut out = std::io::stdout().lock();
    let written = writeln!(out, "{line}").and_then(|()| out.flush());
    !matches!(written, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("fleet_member: error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn Error>> {
    let a = parse()?;
    let options = Options::new()
        .lease_duration(Duration::from_millis(a.lease))
        .renew_interval(Duration::from_millis(a.renew))
        .challenge_stagger(Duration::from_millis(a.stagger));
    let state = Arc::new(KafkaTransport::connect(
        KafkaConfig::new(a.bootstrap.clone(), a.partitions).with_topic(&a.state_topic),
    )?);
    let beats = Arc::new(KafkaTransport::connect(
        KafkaConfig::new(a.bootstrap.clone(), 1).with_topic(&a.fleet_topic),
    )?);
    let host = tokio_driver::host(
        state.clone(),
        HostOptions::new().max_in_flight(a.max_in_flight),
    )?;
    let mut fleet_options = FleetOptions::new(&a.fleet, &a.member)
        .weight(a.weight)
        .policy(a.policy)
        .max_in_motion(a.max_in_motion)
        .options(options);
    if let Some(v) = &a.version {
        fleet_options = fleet_options.version(v);
    }
    let fleet = Fleet::join(&host, beats, fleet_options)?;
    // Set at the end: every role task stops waiting for terms and resigns the term it holds.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for i in 0..a.roles {
        let role = fleet.start(&format!("{}-{i}", a.prefix))?;
        let mut stop = stop_rx.clone();
        tasks.spawn(async move {
            loop {
                let next = tokio::select! {
                    next = role.next_term() => next,
                    _ = stop.wait_for(|s| *s) => return,
                };
                match next {
                    Ok(term) => {
                        say(format!("LEAD {} {} {}", role.role(), now_ms(), term.term()));
                        let stopped = tokio::select! {
                            _ = term.done() => false,
                            r = stop.wait_for(|s| *s) => r.is_ok(),
                        };
                        if stopped && !term.is_done() {
                            // The application stops acting as the leader, then resigns.
                            say(format!("END {} {} resigned", role.role(), now_ms()));
                            if let Err(e) = term.resign().await {
                                eprintln!("fleet_member: {}: resign: {e}", role.role());
                            }
                            return;
                        }
                        let reason = match term.err() {
                            None => "handover",
                            Some(kafka_coordination::Error::Fenced { .. }) => "fenced",
                            Some(_) => "other",
                        };
                        say(format!("END {} {} {reason}", role.role(), now_ms()));
                    }
                    Err(kafka_coordination::Error::Cancelled) => return,
                    Err(e) => {
                        eprintln!("fleet_member: {}: {e}", role.role());
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
    }
    say(format!("READY {} {}", a.member, now_ms()));
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigusr1 = signal(SignalKind::user_defined1())?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut drained = false;
    loop {
        tokio::select! {
            _ = sigterm.recv() => {
                // Roles nobody else can take are kept while a member that could take them may
                // still come: the drain gives up after a lease without such a member, or after
                // four leases. What is still led then is resigned, each role with its END.
                let lease = Duration::from_millis(a.lease);
                let started = tokio::time::Instant::now();
                let mut taker_seen = started;
                let drain = fleet.drain();
                tokio::pin!(drain);
                let mut poll = tokio::time::interval(Duration::from_millis(200));
                let drained = loop {
                    tokio::select! {
                        _ = &mut drain => break true,
                        _ = poll.tick() => {
                            let taker = fleet.members().iter().any(|m| {
                                m.announcement.member != a.member && !m.announcement.draining
                            });
                            let now = tokio::time::Instant::now();
                            if taker {
                                taker_seen = now;
                            }
                            if now - taker_seen >= lease || now - started >= lease * 4 {
                                break false;
                            }
                        }
                    }
                };
                if drained {
                    say(format!("DRAINED {} {}", a.member, now_ms()));
                } else {
                    eprintln!(
                        "fleet_member: the drain gave up after {:?} ({}): {} role(s) kept; \
                         resigning them",
                        started.elapsed(),
                        if now_since(taker_seen) >= lease { "no member to take them" } else { "four leases" },
                        fleet.drain_report().kept.len()
                    );
                }
                let _ = stop_tx.send(true);
                let wait = Duration::from_millis(a.lease.saturating_mul(2));
                if tokio::time::timeout(wait, async { while tasks.join_next().await.is_some() {} })
                    .await
                    .is_err()
                {
                    eprintln!("fleet_member: resigning took longer than {wait:?}; exiting");
                }
                // Out of the fleet before the exit: the heartbeat and announcement resigned, so
                // that a process started next under this member id is seen at once.
                match tokio::time::timeout(wait, fleet.leave()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => eprintln!("fleet_member: leaving the fleet: {e}"),
                    Err(_) => eprintln!("fleet_member: leaving took longer than {wait:?}; exiting"),
                }
                return Ok(());
            }
            _ = sigusr1.recv(), if !drained => {
                drained = true;
                let fleet = fleet.clone();
                let member = a.member.clone();
                tokio::spawn(async move {
                    fleet.drain().await;
                    say(format!("DRAINED {member} {}", now_ms()));
                });
            }
            _ = tick.tick() => {
                let s = fleet.stats();
                let read = say(format!(
                    "STATS {} leading={} preferred={} in_motion={} requests={}",
                    now_ms(), s.leading, s.preferred, s.in_motion, state.requests_sent()
                ));
                if !read {
                    // Whoever started it (fleet_bench, a pipe) is gone: the roles exit with
                    // the runtime (the host resigns what it leads) and the process ends.
                    eprintln!("fleet_member: stdout is closed; exiting");
                    return Ok(());
                }
                if std::env::var_os("FLEET_DEBUG").is_some() {
                    eprintln!(
                        "{} {s:?} {:?} {:?}",
                        now_ms(),
                        host.stats(),
                        state.requests_by_api()
                    );
                }
            }
        }
    }
}
