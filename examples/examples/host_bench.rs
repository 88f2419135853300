//! Many roles led by one process on the in-memory broker (no Kafka cost at all): the
//! drivers that run one task or thread per candidacy against a [`Host`] that runs them all on
//! one loop, in the same run. Prints figures; asserts nothing.
//!
//! ```text
//! cargo run --release -p kafka-coordination-examples --example host_bench -- --roles 10000
//! ```
//!
//! Options: `--roles N` (10000), `--seconds S` of steady state after the last election (60),
//! `--lease-ms` (10000), `--renew-ms` (3000), `--stagger-ms` (500), `--partitions` (64),
//! `--drivers LIST` (comma-separated, in order: `tokio` = a tokio task per candidacy, `blocking`
//! = a thread per candidacy, `host` = one blocking host, `host-tokio` = one tokio task;
//! default `host,tokio`), `--burst` (then a failover burst between two hosts: each leads half
//! of the roles and stands by for the other half; one dies with its link cut), `--mixed` (two
//! hosts, each leading half of the roles and standing by for the other half, for `--seconds`:
//! the memory of processes that both lead and stand by, printed every 10 s), `--csv PATH`
//! (append the figures to a data file as well, one value a row: `stats::CSV_HEADER`; the
//! burst writes each role's lateness; `scripts/plots.sh` renders them).
//!
//! Renewal lag is read from the broker's audit log of committed lease writes: for each role,
//! the gap between two consecutive renewals less the renew interval.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_coordination::core::UnixMillis;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::host::{Host, HostOptions};
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::{Options, SystemClock};
use kafka_coordination_examples::elections;
use kafka_coordination_examples::procfs::{cpu_seconds, own_resources};
use kafka_coordination_examples::stats::{quantile, Csv, Row};

struct Args {
    roles: usize,
    seconds: u64,
    lease: Duration,
    renew: Duration,
    stagger: Duration,
    partitions: i32,
    drivers: Vec<String>,
    burst: bool,
    /// `--mixed`: two hosts, each leading half of the roles and standing by for the other
    /// half, for `--seconds`: the memory of a process that both leads and stands by.
    mixed: bool,
    /// `--csv PATH`: the data file the figures are appended to.
    csv: Option<Csv>,
    /// The raw arguments, for the child processes.
    raw: Vec<String>,
}

fn fail(message: String) -> ! {
    eprintln!("host_bench: {message}");
    std::process::exit(1);
}

fn parse_args() -> Args {
    let mut a = Args {
        roles: 10_000,
        seconds: 60,
        lease: Duration::from_secs(10),
        renew: Duration::from_secs(3),
        stagger: Duration::from_millis(500),
        partitions: 64,
        drivers: vec!["host".to_owned(), "tokio".to_owned()],
        burst: false,
        mixed: false,
        csv: None,
        raw: std::env::args().skip(1).collect(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--burst" {
            a.burst = true;
            continue;
        }
        if flag == "--mixed" {
            a.mixed = true;
            continue;
        }
        let value = it
            .next()
            .unwrap_or_else(|| fail(format!("{flag} needs a value")));
        let n = || -> u64 {
            value
                .parse()
                .unwrap_or_else(|_| fail(format!("{flag}: not a number: {value}")))
        };
        match flag.as_str() {
            "--roles" => a.roles = n() as usize,
            "--seconds" => a.seconds = n(),
            "--lease-ms" => a.lease = Duration::from_millis(n()),
            "--renew-ms" => a.renew = Duration::from_millis(n()),
            "--stagger-ms" => a.stagger = Duration::from_millis(n()),
            "--partitions" => a.partitions = n() as i32,
            "--csv" => {
                a.csv =
                    Some(Csv::open(&value).unwrap_or_else(|e| fail(format!("--csv {value}: {e}"))))
            }
            "--drivers" => {
                a.drivers = value
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
            other => fail(format!("unknown argument {other}")),
        }
    }
    a
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn options(a: &Args) -> Options {
    Options::new()
        .lease_duration(a.lease)
        .renew_interval(a.renew)
        .challenge_stagger(a.stagger)
}

/// Starts one candidacy per role on `driver`; returns the candidacies and what keeps the
/// driver alive (a host, a runtime).
fn start_all(
    driver: &str,
    a: &Args,
    transport: Arc<MemoryTransport>,
    roles: &[String],
    member: &str,
) -> (Vec<Candidacy>, Box<dyn std::any::Any>) {
    match driver {
        "host" => {
            let host = kafka_coordination::blocking::host(transport, HostOptions::new())
                .unwrap_or_else(|e| fail(e.to_string()));
            let c = start_on_host(&host, a, roles, member);
            (c, Box::new(host))
        }
        "host-tokio" => {
            let rt = runtime();
            let host = {
                let _g = rt.enter();
                kafka_coordination::tokio_driver::host(transport, HostOptions::new())
                    .unwrap_or_else(|e| fail(e.to_string()))
            };
            let c = start_on_host(&host, a, roles, member);
            (c, Box::new((host, rt)))
        }
        "tokio" => {
            let rt = runtime();
            let c = {
                let _g = rt.enter();
                roles
                    .iter()
                    .map(|r| {
                        kafka_coordination::tokio_driver::start(
                            transport.clone(),
                            r,
                            member,
                            options(a),
                        )
                        .unwrap_or_else(|e| fail(e.to_string()))
                    })
                    .collect()
            };
            (c, Box::new(rt))
        }
        "blocking" => {
            let c = roles
                .iter()
                .map(|r| {
                    kafka_coordination::blocking::start_shared(
                        transport.clone(),
                        r,
                        member,
                        options(a),
                    )
                    .unwrap_or_else(|e| fail(e.to_string()))
                })
                .collect();
            (c, Box::new(()))
        }
        other => fail(format!(
            "unknown driver {other} (host, host-tokio, tokio, blocking)"
        )),
    }
}

fn start_on_host(host: &Host, a: &Args, roles: &[String], member: &str) -> Vec<Candidacy> {
    roles
        .iter()
        .map(|r| {
            host.start(r, member, options(a))
                .unwrap_or_else(|e| fail(e.to_string()))
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("tokio runtime: {e}")))
}

/// Waits until every candidacy is elected; returns the leaderships.
fn elect(candidacies: Vec<Candidacy>) -> Vec<Leadership> {
    candidacies
        .into_iter()
        .map(|c| match c.elected_blocking() {
            Ok(l) => l,
            Err(e) => fail(format!("a role was not elected: {e}")),
        })
        .collect()
}

fn run_driver(driver: &str, a: &Args, run: usize) {
    let broker = MemoryBroker::new(a.partitions, Arc::new(SystemClock));
    let transport = Arc::new(broker.transport("solo"));
    let roles: Vec<String> = (0..a.roles).map(|i| format!("r{run}-{i}")).collect();
    let (threads0, rss0, _) = own_resources();
    let cpu0 = cpu_seconds("self");
    let started = Instant::now();
    let (candidacies, keep) = start_all(driver, a, transport, &roles, "solo");
    let leaderships = elect(candidacies);
    let elected_in = started.elapsed();
    let cpu_elect = cpu_seconds("self") - cpu0;
    let (threads1, rss1, _) = own_resources();
    let audit_from = broker.accepted_lease_writes().len();
    let (t0, c0) = (Instant::now(), cpu_seconds("self"));
    let (mut max_threads, mut max_rss) = (threads1, rss1);
    let steady = Duration::from_secs(a.seconds);
    while t0.elapsed() < steady {
        std::thread::sleep(Duration::from_millis(500).min(steady.saturating_sub(t0.elapsed())));
        let (t, r, _) = own_resources();
        max_threads = max_threads.max(t);
        max_rss = max_rss.max(r);
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = (cpu_seconds("self") - c0) / secs * 100.0;
    let lost = leaderships.iter().filter(|l| l.is_done()).count();
    // Renewal lag from the audit log: consecutive committed writes of each role.
    let writes = broker.accepted_lease_writes_since(audit_from);
    let mut last: std::collections::HashMap<String, UnixMillis> = Default::default();
    let mut lags = Vec::with_capacity(writes.len());
    let renew = a.renew.as_millis() as i64;
    for w in &writes {
        if let Some(prev) = last.insert(w.role.as_str().to_owned(), w.at) {
            lags.push((w.at.0 - prev.0 - renew).max(0));
        }
    }
    lags.sort_unstable();
    let on_time = lags.iter().filter(|&&l| l <= 100).count();
    println!(
        "{driver:>10}, {n} roles: all lead in {el:.2} s (CPU {ce:.1} s); steady {secs:.0} s: \
         {max_threads} threads max (before {threads0}), RSS {rss} MiB max (before {rss_b} MiB), \
         CPU {cpu:.1} % of one core; {renewals} renewals, lag p50 {p50} ms, p99 {p99} ms, max \
         {max} ms, {pct:.2} % within 100 ms; roles lost {lost}",
        n = a.roles,
        el = elected_in.as_secs_f64(),
        ce = cpu_elect,
        rss = max_rss / 1024,
        rss_b = rss0 / 1024,
        renewals = lags.len(),
        p50 = quantile(&lags, 0.5),
        p99 = quantile(&lags, 0.99),
        max = lags.last().copied().unwrap_or(0),
        pct = if lags.is_empty() {
            0.0
        } else {
            on_time as f64 * 100.0 / lags.len() as f64
        },
    );
    let row = |metric, value| Row {
        bench: "host_bench",
        driver,
        roles: a.roles,
        lease_ms: a.lease.as_millis(),
        renew_ms: a.renew.as_millis(),
        metric,
        value,
    };
    write_rows(
        a,
        [
            row("elected_s", elected_in.as_secs_f64()),
            row("lag_p50_ms", quantile(&lags, 0.5) as f64),
            row("lag_p99_ms", quantile(&lags, 0.99) as f64),
            row("lag_max_ms", lags.last().copied().unwrap_or(0) as f64),
            row("threads_max", max_threads as f64),
            row("rss_max_mib", (max_rss / 1024) as f64),
            row("cpu_pct_of_one_core", cpu),
            row("roles_lost", lost as f64),
        ],
    );
    // Leave without resigning 10,000 roles one by one: the broker goes with the run.
    std::mem::forget(leaderships);
    drop(keep);
}

/// Appends `rows` to the `--csv` file, if one was given.
fn write_rows<'a>(a: &Args, rows: impl IntoIterator<Item = Row<'a>>) {
    if let Some(csv) = &a.csv {
        csv.append(rows)
            .unwrap_or_else(|e| fail(format!("writing the --csv file: {e}")));
    }
}

/// Two blocking hosts on a new broker on the system clock, as two processes' clients: `a`
/// through a link the caller can cut.
fn two_hosts(a: &Args) -> (Link<MemoryTransport>, Host, Host) {
    let broker = MemoryBroker::new(a.partitions, Arc::new(SystemClock));
    let link_a = Link::new(broker.transport("a"));
    let host = |transport: Arc<dyn kafka_coordination::transport::Transport + Send + Sync>| {
        kafka_coordination::blocking::host(transport, HostOptions::new())
            .unwrap_or_else(|e| fail(e.to_string()))
    };
    let host_a = host(Arc::new(link_a.clone()));
    let host_b = host(Arc::new(broker.transport("b")));
    (link_a, host_a, host_b)
}

/// Two hosts (two processes' clients on one broker): each leads half of the roles and stands
/// by for the other half. Host `a` dies (its link cut: it cannot resign); each of its roles
/// must move to `b` by its lease deadline + rank x stagger + 250 ms (rank 0 here).
fn burst(a: &Args) {
    let (link_a, host_a, host_b) = two_hosts(a);
    let broker = link_a.inner().broker();
    let roles: Vec<String> = (0..a.roles).map(|i| format!("burst-{i}")).collect();
    let (first, second) = roles.split_at(roles.len() / 2);
    let a_leads = elect(start_on_host(&host_a, a, first, "a"));
    let b_leads = elect(start_on_host(&host_b, a, second, "b"));
    let b_waits = start_on_host(&host_b, a, first, "b");
    let a_waits = start_on_host(&host_a, a, second, "a");
    while b_waits.iter().any(|c| c.snapshot().rank.is_none()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let a renew once more, so every deadline is a full lease ahead.
    std::thread::sleep(a.renew + Duration::from_millis(200));
    link_a.cut();
    let cut_at = wall_ms();
    // Each role's deadline: the one its last lease record from `a` carries, as the partition
    // holds it.
    let mut deadline: std::collections::HashMap<String, i64> = Default::default();
    for partition in 0..a.partitions {
        let records = broker
            .committed_records(partition)
            .unwrap_or_else(|e| fail(e.to_string()));
        elections::lease_deadlines(records, "a", &mut deadline);
    }
    // Each election is stamped by a task it wakes (see `elections`): polling the snapshots
    // of thousands of candidacies would take CPU from the hosts under measure.
    let observer = runtime();
    let elections = elections::watch(&observer, b_waits, a.lease * 3);
    while elections.settled() < elections.len() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (elected_at, held) = elections.finish(&observer);
    let mut late: Vec<i64> = Vec::new();
    let mut missing = 0;
    for (i, r) in first.iter().enumerate() {
        match (elected_at[i], deadline.get(r)) {
            (Some(at), Some(d)) => late.push(at - d),
            _ => missing += 1,
        }
    }
    late.sort_unstable();
    let within = late.iter().filter(|&&l| l <= 250).count();
    let early = late.iter().filter(|&&l| l < 0).count();
    println!(
        "burst: {} roles, host a (leading {}) died at +0 ms; b elected {} of them: after the \
         deadline by p50 {} ms, p99 {} ms, max {} ms; {:.2} % within deadline + 250 ms (target \
         >= 99 %); {early} before the deadline; {missing} not elected within 3 leases; last \
         election {} ms after the cut; b's own {} roles lost {}",
        roles.len(),
        first.len(),
        late.len(),
        quantile(&late, 0.5),
        quantile(&late, 0.99),
        late.last().copied().unwrap_or(0),
        if first.is_empty() {
            0.0
        } else {
            within as f64 * 100.0 / first.len() as f64
        },
        elected_at.iter().flatten().max().map_or(0, |m| m - cut_at),
        b_leads.len(),
        b_leads.iter().filter(|l| l.is_done()).count(),
    );
    write_rows(
        a,
        late.iter().map(|&l| Row {
            bench: "host_bench_burst",
            driver: "host",
            roles: a.roles,
            lease_ms: a.lease.as_millis(),
            renew_ms: a.renew.as_millis(),
            metric: "late_after_deadline_ms",
            value: l as f64,
        }),
    );
    std::mem::forget((a_leads, b_leads, held, a_waits));
    drop((host_a, host_b));
}

/// Two hosts on one broker, each leading half of the roles and standing by for the other
/// half, for `--seconds`: the process's memory over time (both hosts and the broker are in it),
/// and that no role moved.
fn mixed(a: &Args) {
    let (_, host_a, host_b) = two_hosts(a);
    let roles: Vec<String> = (0..a.roles).map(|i| format!("mixed-{i}")).collect();
    let (first, second) = roles.split_at(roles.len() / 2);
    let started = Instant::now();
    let a_leads = elect(start_on_host(&host_a, a, first, "a"));
    let b_leads = elect(start_on_host(&host_b, a, second, "b"));
    let b_waits = start_on_host(&host_b, a, first, "b");
    let a_waits = start_on_host(&host_a, a, second, "a");
    while b_waits
        .iter()
        .chain(&a_waits)
        .any(|c| c.snapshot().rank.is_none())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, rss0, _) = own_resources();
    println!(
        "mixed: {} roles, each host leads {} and stands by for the other {}; ready in {:.1} s, \
         {} MiB RSS",
        a.roles,
        first.len(),
        second.len(),
        started.elapsed().as_secs_f64(),
        rss0 / 1024
    );
    let t0 = Instant::now();
    let cpu0 = cpu_seconds("self");
    let steady = Duration::from_secs(a.seconds);
    while t0.elapsed() < steady {
        std::thread::sleep(Duration::from_secs(10).min(steady - t0.elapsed()));
        let (threads, rss, _) = own_resources();
        println!(
            "  +{:>4.0} s: {} MiB RSS ({:+} MiB), {threads} threads, CPU {:.0} % of one core",
            t0.elapsed().as_secs_f64(),
            rss / 1024,
            (rss as i64 - rss0 as i64) / 1024,
            (cpu_seconds("self") - cpu0) / t0.elapsed().as_secs_f64() * 100.0
        );
    }
    let lost = a_leads
        .iter()
        .chain(&b_leads)
        .filter(|l| l.is_done())
        .count();
    let (_, rss, _) = own_resources();
    println!(
        "mixed: after {} s: {} MiB RSS, {:+} MiB since ready; roles lost {lost}; standbys \
         elected {}",
        a.seconds,
        rss / 1024,
        (rss as i64 - rss0 as i64) / 1024,
        b_waits
            .iter()
            .chain(&a_waits)
            .filter(|c| c.snapshot().token.is_some())
            .count()
    );
    std::mem::forget((a_leads, b_leads, a_waits, b_waits));
    drop((host_a, host_b));
}

fn main() {
    let a = parse_args();
    if a.mixed {
        mixed(&a);
        return;
    }
    if a.drivers.len() + usize::from(a.burst) != 1 || a.raw.is_empty() {
        println!(
            "host_bench: {} roles, lease {:?}, renew {:?}, {} partitions, MemoryBroker on the \
             system clock; {} cores; each run in a process of its own",
            a.roles,
            a.lease,
            a.renew,
            a.partitions,
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
    }
    // One driver per run, each in a process of its own, so that no run's threads, memory or
    // leftover work counts in another's figures.
    let mut runs: Vec<Vec<String>> = a.drivers.iter().map(|d| vec![d.clone()]).collect();
    if a.burst {
        runs.push(vec!["burst".to_owned()]);
    }
    if runs.len() == 1 {
        match runs[0][0].as_str() {
            "burst" => burst(&a),
            driver => run_driver(driver, &a, 0),
        }
        return;
    }
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(format!("own path: {e}")));
    let mut passed: Vec<String> = Vec::new();
    let mut it = a.raw.iter();
    while let Some(flag) = it.next() {
        if flag == "--burst" {
            continue;
        }
        let value = it.next().cloned().unwrap_or_default();
        if flag != "--drivers" {
            passed.push(flag.clone());
            passed.push(value);
        }
    }
    for run in runs {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(&passed);
        match run[0].as_str() {
            "burst" => cmd.args(["--drivers", "", "--burst"]),
            driver => cmd.args(["--drivers", driver]),
        };
        let status = cmd
            .status()
            .unwrap_or_else(|e| fail(format!("running {}: {e}", run[0])));
        if !status.success() {
            fail(format!("the {} run failed: {status}", run[0]));
        }
    }
}
