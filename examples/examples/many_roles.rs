//! One process leads many roles through one shared Kafka client: how long until every role
//! is elected, whether any is lost, and what the process costs (threads, sockets, memory, CPU),
//! with the broker's CPU beside it.
//!
//! ```text
//! eval "$(scripts/kafka/start.sh)"
//! cargo run --release -p kafka-coordination-examples --features kafka --example many_roles -- \
//!     --roles 1000 --seconds 300
//! ```
//!
//! Options: `--roles N` (1000), `--seconds S` of steady state after the last election (300),
//! `--lease-ms` (30000) and `--renew-ms` (10000) (the library's defaults), `--blocking-threads
//! N` (16: the tokio runtime's blocking pool, where transport calls run), `--partitions N`
//! (16), `--broker-pid PID` (default: read from the test broker's pid file, if any), `--driver
//! host|tokio` (default `host`: one [`Host`](kafka_coordination::host::Host) task runs every
//! candidacy, its calls on `--io-threads N` (8) threads; `tokio`: a tokio task per candidacy,
//! its calls on the runtime's blocking pool).
//!
//! The runtime is tokio's, with two worker threads. Figures are read from `/proc`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination::host::HostOptions;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{Leadership, Options};

struct Args {
    bootstrap: String,
    roles: usize,
    seconds: u64,
    lease: Duration,
    renew: Duration,
    blocking_threads: usize,
    partitions: i32,
    broker_pid: Option<u32>,
    driver: String,
    io_threads: usize,
}

fn fail(message: String) -> ! {
    eprintln!("many_roles: {message}");
    std::process::exit(1);
}

fn parse_args() -> Args {
    let mut a = Args {
        bootstrap: std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default(),
        roles: 1000,
        seconds: 300,
        lease: Duration::from_secs(30),
        renew: Duration::from_secs(10),
        blocking_threads: 16,
        partitions: 16,
        broker_pid: None,
        driver: "host".to_owned(),
        io_threads: 8,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| fail(format!("{flag} needs a value")));
        let n = || -> u64 {
            value
                .parse()
                .unwrap_or_else(|_| fail(format!("{flag}: not a number: {value}")))
        };
        match flag.as_str() {
            "--bootstrap" => a.bootstrap = value.clone(),
            "--roles" => a.roles = n() as usize,
            "--seconds" => a.seconds = n(),
            "--lease-ms" => a.lease = Duration::from_millis(n()),
            "--renew-ms" => a.renew = Duration::from_millis(n()),
            "--blocking-threads" => a.blocking_threads = n() as usize,
            "--partitions" => a.partitions = n() as i32,
            "--broker-pid" => a.broker_pid = Some(n() as u32),
            "--driver" if value == "host" || value == "tokio" => a.driver = value.clone(),
            "--driver" => fail(format!("--driver: host or tokio, not {value}")),
            "--io-threads" => a.io_threads = n() as usize,
            other => fail(format!("unknown argument {other}")),
        }
    }
    if a.bootstrap.is_empty() {
        fail("--bootstrap HOST:PORT (or KAFKA_BOOTSTRAP) is required".to_owned());
    }
    if a.broker_pid.is_none() {
        a.broker_pid = broker_pid_from_run_dir();
    }
    a
}

/// The test broker's pid, from scripts/kafka/start.sh's run dir.
fn broker_pid_from_run_dir() -> Option<u32> {
    let dir = std::env::var("KAFKA_RUN_DIR").unwrap_or_else(|_| ".kafka/run".to_owned());
    let entries = std::fs::read_dir(&dir).ok()?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".pid") {
            if let Ok(text) = std::fs::read_to_string(e.path()) {
                if let Ok(pid) = text.trim().parse() {
                    return Some(pid);
                }
            }
        }
    }
    None
}

/// Threads, RSS (KiB) and open sockets of this process, from /proc.
fn own_resources() -> (usize, u64, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let sockets = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .map(|t| t.to_string_lossy().starts_with("socket:"))
                        .unwrap_or(false)
                })
                .count()
        })
        .unwrap_or(0);
    (field("Threads:") as usize, field("VmRSS:"), sockets)
}

/// CPU seconds (user + system) used so far by `pid` ("self" for this process).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces): utime is the 14th field.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // `after` starts at field 3 (state); utime = field 14, stime = field 15.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let args = parse_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(args.blocking_threads)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("tokio runtime: {e}")));
    let config = KafkaConfig::new(args.bootstrap.clone(), args.partitions);
    let client = Arc::new(KafkaTransport::new(config).unwrap_or_else(|e| fail(e.to_string())));
    client
        .create_topic(1, None)
        .unwrap_or_else(|e| fail(e.to_string()));
    let options = Options::new()
        .lease_duration(args.lease)
        .renew_interval(args.renew);
    let (threads0, rss0, sockets0) = own_resources();
    println!(
        "many_roles: {} roles, lease {:?}, renew {:?}, one client, driver {} (tokio: 2 workers, \
         blocking pool <= {}; host: {} I/O threads); before: {threads0} threads, {} MiB RSS, \
         {sockets0} sockets",
        args.roles,
        args.lease,
        args.renew,
        args.driver,
        args.blocking_threads,
        args.io_threads,
        rss0 / 1024
    );
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let started = Instant::now();
    let host = (args.driver == "host").then(|| {
        let _guard = runtime.enter();
        kafka_coordination::tokio_driver::host(
            client.clone(),
            HostOptions::new().io_threads(args.io_threads),
        )
        .unwrap_or_else(|e| fail(e.to_string()))
    });
    let leaderships: Vec<Leadership> = runtime.block_on(async {
        if let Some(host) = &host {
            let candidacies: Vec<_> = (0..args.roles)
                .map(|i| {
                    host.start(&format!("many-{stamp:x}-{i}"), "solo", options.clone())
                        .unwrap_or_else(|e| fail(e.to_string()))
                })
                .collect();
            let mut out = Vec::with_capacity(candidacies.len());
            for c in candidacies {
                match c.elected().await {
                    Ok(l) => out.push(l),
                    Err(e) => fail(format!("a role was not elected: {e}")),
                }
            }
            return out;
        }
        let mut tasks = Vec::with_capacity(args.roles);
        for i in 0..args.roles {
            let (client, options) = (client.clone(), options.clone());
            let role = format!("many-{stamp:x}-{i}");
            tasks.push(tokio::spawn(async move {
                kafka_coordination::tokio_driver::acquire_leadership(client, &role, "solo", options)
                    .await
            }));
        }
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            match t.await {
                Ok(Ok(l)) => out.push(l),
                Ok(Err(e)) => fail(format!("a role was not elected: {e}")),
                Err(e) => fail(format!("a task failed: {e}")),
            }
        }
        out
    });
    let elected_in = started.elapsed();
    let (threads1, rss1, sockets1) = own_resources();
    println!(
        "all {} roles elected in {:.1} s; now {threads1} threads, {} MiB RSS, {sockets1} sockets",
        leaderships.len(),
        elected_in.as_secs_f64(),
        rss1 / 1024
    );
    let broker = args.broker_pid.map(|p| p.to_string());
    let (cpu0, broker0, t0) = (
        cpu_seconds("self"),
        broker.as_deref().map(cpu_seconds),
        Instant::now(),
    );
    let mut max_threads = threads1;
    let mut max_rss = rss1;
    let mut lost = 0;
    let steady = Duration::from_secs(args.seconds);
    // Renewal lag: each role's consecutive renewal instants, sampled every 250 ms (a renew
    // interval of seconds leaves at most one renewal between samples), less the interval.
    let mut last_renewal: Vec<Option<kafka_coordination::UnixMillis>> = leaderships
        .iter()
        .map(|l| l.health().last_renewal)
        .collect();
    let mut lags: Vec<i64> = Vec::new();
    let renew_ms = args.renew.as_millis() as i64;
    let mut next_print = Instant::now() + Duration::from_secs(5);
    while t0.elapsed() < steady {
        std::thread::sleep(Duration::from_millis(250).min(steady.saturating_sub(t0.elapsed())));
        for (l, last) in leaderships.iter().zip(last_renewal.iter_mut()) {
            let now = l.health().last_renewal;
            if let (Some(prev), Some(new)) = (*last, now) {
                if new > prev {
                    lags.push((new.0 - prev.0 - renew_ms).max(0));
                }
            }
            *last = now;
        }
        if Instant::now() < next_print && t0.elapsed() < steady {
            continue;
        }
        next_print = Instant::now() + Duration::from_secs(5);
        let (threads, rss, sockets) = own_resources();
        max_threads = max_threads.max(threads);
        max_rss = max_rss.max(rss);
        lost = leaderships.iter().filter(|l| l.is_done()).count();
        let secs = t0.elapsed().as_secs_f64();
        let cpu = (cpu_seconds("self") - cpu0) / secs * 100.0;
        let bcpu = broker
            .as_deref()
            .zip(broker0)
            .map(|(p, b0)| format!("{:.0} %", (cpu_seconds(p) - b0) / secs * 100.0))
            .unwrap_or_else(|| "n/a".to_owned());
        println!(
            "  +{secs:>5.0} s: {threads} threads, {} MiB RSS, {sockets} sockets, CPU {cpu:.1} % \
             of one core (broker {bcpu}), roles lost {lost}",
            rss / 1024
        );
        if lost > 0 {
            for l in leaderships.iter().filter(|l| l.is_done()).take(3) {
                println!("    lost {}: {:?}", l.role(), l.err());
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64().max(0.001);
    let cpu = (cpu_seconds("self") - cpu0) / secs * 100.0;
    let bcpu = broker
        .as_deref()
        .zip(broker0)
        .map(|(p, b0)| (cpu_seconds(p) - b0) / secs * 100.0);
    lags.sort_unstable();
    let q = |p: f64| -> i64 {
        if lags.is_empty() {
            return 0;
        }
        lags[((lags.len() - 1) as f64 * p).round() as usize]
    };
    println!(
        "renewals: {} seen; lag p50 {} ms, p99 {} ms (target <= 100 ms), max {} ms",
        lags.len(),
        q(0.5),
        q(0.99),
        lags.last().copied().unwrap_or(0)
    );
    let per_role_threads = (threads1 as f64 - threads0 as f64) / args.roles as f64;
    let per_role_sockets = (sockets1 as f64 - sockets0 as f64) / args.roles as f64;
    let per_role_kib = (rss1 as f64 - rss0 as f64) / args.roles as f64;
    println!(
        "\nmany_roles: {} roles; elected in {:.1} s (target <= 60 s); lost {lost} (target 0); \
         threads max {max_threads} (target <= 64); RSS max {} MiB (target <= 512); CPU {cpu:.1} % \
         of one core in steady state (target <= 50 %); broker CPU {}",
        args.roles,
        elected_in.as_secs_f64(),
        max_rss / 1024,
        bcpu.map_or("n/a".to_owned(), |b| format!("{b:.1} % of one core"))
    );
    println!(
        "per additional role: {per_role_threads:.3} threads, {per_role_sockets:.3} sockets, \
         {per_role_kib:.1} KiB RSS; the client's native connections: {}",
        client.open_connections()
    );
    runtime.block_on(async {
        for l in &leaderships {
            let _ = l.resign().await;
        }
    });
}
