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
//! second, `STATS <unix_ms> leading=<n> preferred=<n> in_motion=<n>`. SIGTERM drains it (every
//! role handed to another member), prints DRAINED and exits 0; SIGUSR1 drains it and it stays.
//!
//! Flags: `--bootstrap HOST:PORT,...` (or `KAFKA_BOOTSTRAP`), `--member M`, `--roles N`,
//! `--prefix P`, `--weight W`, `--version V`, `--policy balance|prefer-newest|prefer-oldest`,
//! `--max-in-motion K`, `--max-in-flight N` (the host's calls in flight), `--lease MS`, `--renew MS`, `--stagger MS`, `--state-topic T`
//! (default `__coordination_state`), `--partitions N` (of the state topic, default 16),
//! `--fleet-topic T` (default `__coordination_fleet`), `--fleet NAME` (default `fleet`).
use std::error::Error;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_coordination::fleet::{Fleet, FleetOptions, Policy};
use kafka_coordination::host::HostOptions;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{tokio_driver, Options};
use tokio::signal::unix::{signal, SignalKind};

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

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
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
    for i in 0..a.roles {
        let role = fleet.start(&format!("{}-{i}", a.prefix))?;
        tokio::spawn(async move {
            loop {
                match role.next_term().await {
                    Ok(term) => {
                        say(format!("LEAD {} {} {}", role.role(), now_ms(), term.term()));
                        term.done().await;
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
                // Roles nobody else can take yet are kept; after four leases the process
                // exits anyway, resigning what it still leads.
                let wait = Duration::from_millis(a.lease.saturating_mul(4));
                match tokio::time::timeout(wait, fleet.drain()).await {
                    Ok(_) => say(format!("DRAINED {} {}", a.member, now_ms())),
                    Err(_) => eprintln!(
                        "fleet_member: the drain did not finish in {wait:?}: {} role(s) kept",
                        fleet.drain_report().kept.len()
                    ),
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
                say(format!(
                    "STATS {} leading={} preferred={} in_motion={} requests={}",
                    now_ms(), s.leading, s.preferred, s.in_motion, state.requests_sent()
                ));
                if std::env::var_os("FLEET_DEBUG").is_some() {
                    eprintln!("{s:?} {:?}", host.stats());
                }
            }
        }
    }
}
