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
//! N` (16: the tokio runtime's blocking pool), `--partitions N`
//! (16), `--broker-pid PID[,PID...]` (the brokers whose CPU is measured, summed; default: every
//! node of the test cluster's run dir), `--driver
//! host|tokio` (default `host`: one [`Host`](kafka_coordination::host::Host) task runs every
//! candidacy, at most `--max-in-flight N` (8) of its calls in flight; `tokio`: a tokio task per candidacy,
//! each call started in its completion form and awaited), `--connections N` (4: the client's native
//! connections per broker, `KafkaConfig::with_connections_per_broker`), `--no-spread` (the
//! host renews each role a renew interval after its claim, without a phase:
//! `HostOptions::spread_renewals(false)`), `--no-tail` (every read of the host's standbys goes
//! to the broker, the refreshes of their long polls included: `HostOptions::tail_reads(false)`).
//! Every 5 s of the steady state it prints the host's queue (`HostStats::queued`), with
//! `--verbose` also the requests of those 5 s by kind; at the end, the renewal lag by window
//! after the last election (the first 30 s, the next 30 s, then each minute).
//!
//! `--burst` runs a failover burst instead: a child process (this program) leads half of the
//! roles, this process leads the other half and stands by for the first; the child is
//! SIGKILLed and each of its roles must move by its lease deadline + 250 ms (with
//! `--stagger-ms`, 5000 by default). This process then resigns every role it holds, so that
//! no write cut by its exit stalls a partition for the next run. With `--steady`, the renew
//! interval before the kill starts only once this process's host has had no call waiting for
//! a thread for a whole renew interval (at most 5 minutes): a burst in the steady state rather
//! than in the backlog that the two processes' starts leave on a slow machine.
//!
//! `--kill-pid PID --kill-at S` SIGKILLs a process (a broker of a three-broker cluster, say) S
//! seconds (60) into the steady state, and prints each partition's worst renewal lag after it
//! and its roles lost: the partitions the dead broker led wait for a new leader, and the others
//! show whether their renewals waited too. `--kill-signal STOP` freezes the process instead
//! (SIGSTOP; it stays frozen). `--replication N` (1) is the state topic's
//! replication factor when the run creates it (with `min.insync.replicas` 2 above 1). `--join
//! N` starts N more roles on the host 2 s after the kill (a deploy that meets the dead broker:
//! their registrations go to its partitions too) and prints when they were elected.
//!
//! `--handover N` times 2 N resigns to standby hosts in this process instead, N to a host that
//! serves long polls from the transport's tail and N to one that does not, alternating.
//!
//! `--csv PATH` appends the figures to a data file as well (`stats::CSV_HEADER`, one value a
//! row): the steady state's election time and renewal lag, or each hand-over's time by
//! standby host; `scripts/plots.sh` renders them.
//!
//! The runtime is tokio's, with two worker threads. Figures are read from `/proc`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination::host::HostOptions;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::Leadership;
use kafka_coordination::Options;
use kafka_coordination_examples::elections;
use kafka_coordination_examples::procfs::{
    cpu_seconds, cpu_seconds_sum, own_resources, MachineCpu,
};
use kafka_coordination_examples::stats::{quantile, Csv, Row};

struct Args {
    bootstrap: String,
    roles: usize,
    seconds: u64,
    lease: Duration,
    renew: Duration,
    stagger: Duration,
    blocking_threads: usize,
    partitions: i32,
    /// The brokers' pids, comma-separated (`--broker-pid`, or every node of the run dir).
    broker_pids: Option<String>,
    driver: String,
    max_in_flight: usize,
    connections: usize,
    /// The failover burst (`--burst`), or the child process it kills (`--burst-child PREFIX`).
    burst: bool,
    burst_child: Option<String>,
    /// `--no-spread`: `HostOptions::spread_renewals(false)`.
    no_spread: bool,
    /// `--no-tail`: `HostOptions::tail_reads(false)`.
    no_tail: bool,
    /// Print the requests by kind of every 5 s of the steady state.
    verbose: bool,
    /// `--steady`: the burst's kill waits until this process's host has kept up.
    steady: bool,
    /// `--handover N`: N resigns to a standby host with the tail, N to one without.
    handover: Option<usize>,
    /// `--kill-pid PID --kill-at S`: SIGKILL a process (a broker of the cluster) S seconds into
    /// the steady state, and report the renewals after it by partition.
    kill_pid: Option<u32>,
    kill_at: u64,
    /// `--kill-signal KILL|STOP` (KILL): STOP freezes the broker instead of killing it.
    kill_signal: String,
    /// `--replication N`: the state topic's replication factor when this run creates it (1).
    replication: i32,
    /// `--join N`: N more roles start on the host 2 s after the kill.
    join: usize,
    /// `--csv PATH`: the data file the figures are appended to.
    csv: Option<Csv>,
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
        stagger: Duration::from_secs(5),
        blocking_threads: 16,
        partitions: 16,
        broker_pids: None,
        driver: "host".to_owned(),
        max_in_flight: 8,
        connections: kafka_coordination::kafka::DEFAULT_CONNECTIONS_PER_BROKER,
        burst: false,
        burst_child: None,
        no_spread: false,
        no_tail: false,
        verbose: false,
        steady: false,
        handover: None,
        kill_pid: None,
        kill_at: 60,
        kill_signal: "KILL".to_owned(),
        replication: 1,
        join: 0,
        csv: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--no-spread" {
            a.no_spread = true;
            continue;
        }
        if flag == "--no-tail" {
            a.no_tail = true;
            continue;
        }
        if flag == "--verbose" {
            a.verbose = true;
            continue;
        }
        if flag == "--steady" {
            a.steady = true;
            continue;
        }
        if flag == "--burst" {
            a.burst = true;
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
            "--bootstrap" => a.bootstrap = value.clone(),
            "--roles" => a.roles = n() as usize,
            "--seconds" => a.seconds = n(),
            "--lease-ms" => a.lease = Duration::from_millis(n()),
            "--renew-ms" => a.renew = Duration::from_millis(n()),
            "--blocking-threads" => a.blocking_threads = n() as usize,
            "--partitions" => a.partitions = n() as i32,
            "--broker-pid" => {
                if value.split(',').any(|p| p.trim().parse::<u32>().is_err()) {
                    fail(format!(
                        "--broker-pid: pids separated by commas, not {value}"
                    ));
                }
                a.broker_pids = Some(value.clone())
            }
            "--driver" if value == "host" || value == "tokio" => a.driver = value.clone(),
            "--driver" => fail(format!("--driver: host or tokio, not {value}")),
            "--max-in-flight" => a.max_in_flight = n() as usize,
            "--connections" => a.connections = n() as usize,
            "--burst-child" => a.burst_child = Some(value.clone()),
            "--stagger-ms" => a.stagger = Duration::from_millis(n()),
            "--handover" => a.handover = Some(n() as usize),
            "--kill-pid" => a.kill_pid = Some(n() as u32),
            "--kill-at" => a.kill_at = n(),
            "--kill-signal" if value == "KILL" || value == "STOP" => a.kill_signal = value.clone(),
            "--kill-signal" => fail(format!("--kill-signal: KILL or STOP, not {value}")),
            "--replication" => a.replication = n() as i32,
            "--join" => a.join = n() as usize,
            "--csv" => {
                a.csv =
                    Some(Csv::open(&value).unwrap_or_else(|e| fail(format!("--csv {value}: {e}"))))
            }
            other => fail(format!("unknown argument {other}")),
        }
    }
    if a.bootstrap.is_empty() {
        fail("--bootstrap HOST:PORT (or KAFKA_BOOTSTRAP) is required".to_owned());
    }
    if a.broker_pids.is_none() {
        a.broker_pids = broker_pids_from_run_dir();
    }
    a
}

/// The test brokers' pids (every `node-*.pid` of scripts/kafka/start.sh's run dir), comma-separated.
fn broker_pids_from_run_dir() -> Option<String> {
    let dir = std::env::var("KAFKA_RUN_DIR").unwrap_or_else(|_| ".kafka/run".to_owned());
    let mut pids: Vec<u32> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.starts_with("node-") && name.ends_with(".pid")
        })
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .collect();
    pids.sort_unstable();
    (!pids.is_empty()).then(|| {
        pids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn host_on(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    client: &Arc<KafkaTransport>,
) -> kafka_coordination::host::Host {
    let _guard = runtime.enter();
    kafka_coordination::tokio_driver::host(
        client.clone(),
        HostOptions::new()
            .max_in_flight(args.max_in_flight)
            .spread_renewals(!args.no_spread)
            .tail_reads(!args.no_tail),
    )
    .unwrap_or_else(|e| fail(e.to_string()))
}

/// The process the burst kills: leads the first half of the roles named `PREFIX-i`, says
/// `READY`, and then only renews until it is killed.
fn burst_child(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    client: Arc<KafkaTransport>,
    options: Options,
    prefix: &str,
) -> ! {
    let host = host_on(args, runtime, &client);
    let leaderships: Vec<Leadership> = runtime.block_on(async {
        let candidacies: Vec<_> = (0..args.roles / 2)
            .map(|i| {
                host.start(&format!("{prefix}-{i}"), "a", options.clone())
                    .unwrap_or_else(|e| fail(e.to_string()))
            })
            .collect();
        let mut out = Vec::new();
        for c in candidacies {
            out.push(c.elected().await.unwrap_or_else(|e| fail(e.to_string())));
        }
        out
    });
    println!("READY");
    // Renews (on the host's task) until the parent kills this process.
    let _keep = (host, leaderships);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A burst of failovers as the user lives it: a child process leads half of the roles (the
/// first half), this process leads the other half and stands by for the first; the child is
/// SIGKILLed, and each of its roles must move here by its lease deadline (rank 0) + 250 ms.
fn burst(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    client: Arc<KafkaTransport>,
    options: Options,
) {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let prefix = format!("burst-{stamp:x}");
    let half = args.roles / 2;
    let mut child = spawn_burst_child(args, &prefix, half);
    let host = host_on(args, runtime, &client);
    let (own, standbys) = lead_and_stand_by(args, runtime, &host, &prefix, &options);
    if args.steady {
        wait_until_steady(args, &host);
    }
    stand_by_one_renew_interval(args, &client, &host);
    let _ = child.kill();
    let kill = AtKill::now(args, &client, &host);
    let _ = child.wait();
    let deadlines = read_deadlines(args, &client, &prefix, half, kill.at);
    // Each standby's election is stamped by a task it wakes (see `elections`), not by polling
    // thousands of snapshots, which would take CPU from the broker and the host.
    let elections = elections::watch(runtime, standbys, args.lease * 3);
    let mut next_stats = Instant::now();
    while elections.settled() < elections.len() {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() >= next_stats {
            next_stats += Duration::from_secs(2);
            println!(
                "burst: +{:.1} s: {:?}",
                (now_ms() - kill.at) as f64 / 1000.0,
                host.stats()
            );
        }
    }
    // The new leaderships live until the figures are printed.
    let (elected_at, held) = elections.finish(runtime);
    kill.print_costs(&client, &host);
    print_late_by_partition(args, &prefix, &elected_at, &deadlines);
    print_burst_verdict(half, &elected_at, &deadlines, kill.at, &own);
    // Leave every role clean before exiting: a renewal cut by the exit would stay open until
    // its transaction timeout (a lease) and stall its partition for the next run's process.
    let count = own.len() + held.len();
    let (clean, took) = resign_all(runtime, own.into_iter().chain(held).collect());
    println!(
        "burst: this process resigned its {count} roles in {:.1} s ({clean} clean)",
        took.as_secs_f64()
    );
    std::process::exit(0);
}

/// Starts the child process the burst kills, and waits until it leads its `half` of the roles.
fn spawn_burst_child(args: &Args, prefix: &str, half: usize) -> std::process::Child {
    use std::io::BufRead;
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(format!("own path: {e}")));
    let mut command = std::process::Command::new(exe);
    if args.no_spread {
        command.arg("--no-spread");
    }
    let mut child = command
        .args([
            "--bootstrap",
            &args.bootstrap,
            "--roles",
            &args.roles.to_string(),
            "--partitions",
            &args.partitions.to_string(),
            "--lease-ms",
            &args.lease.as_millis().to_string(),
            "--renew-ms",
            &args.renew.as_millis().to_string(),
            "--stagger-ms",
            &args.stagger.as_millis().to_string(),
            "--max-in-flight",
            &args.max_in_flight.to_string(),
            "--connections",
            &args.connections.to_string(),
            "--burst-child",
            prefix,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(format!("starting the child: {e}")));
    let started = Instant::now();
    let stdout = child
        .stdout
        .take()
        .unwrap_or_else(|| fail("no child stdout".into()));
    let ready = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l == "READY");
    if !ready {
        fail("the child ended before it led its roles".to_owned());
    }
    println!(
        "burst: the child leads {half} roles after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    child
}

/// Leads the second half of the roles on `host` and stands by for the first half, until every
/// standby has rank 0.
fn lead_and_stand_by(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    host: &kafka_coordination::host::Host,
    prefix: &str,
    options: &Options,
) -> (
    Vec<Leadership>,
    Vec<kafka_coordination::leadership::Candidacy>,
) {
    let half = args.roles / 2;
    let (own, standbys) = runtime.block_on(async {
        let own: Vec<_> = (half..args.roles)
            .map(|i| {
                host.start(&format!("{prefix}-{i}"), "b", options.clone())
                    .unwrap_or_else(|e| fail(e.to_string()))
            })
            .collect();
        let mut leading = Vec::new();
        for c in own {
            leading.push(c.elected().await.unwrap_or_else(|e| fail(e.to_string())));
        }
        let standbys: Vec<_> = (0..half)
            .map(|i| {
                host.start(&format!("{prefix}-{i}"), "b", options.clone())
                    .unwrap_or_else(|e| fail(e.to_string()))
            })
            .collect();
        (leading, standbys)
    });
    while standbys.iter().any(|c| c.snapshot().rank != Some(0)) {
        if standbys.iter().any(|c| c.is_done()) {
            fail("a standby ended".to_owned());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "burst: this process leads {} roles and stands by at rank 0 for {half}; killing the \
         child (SIGKILL) after one more renew interval",
        own.len()
    );
    (own, standbys)
}

/// `--steady`: starts the stand-by interval only once this process's host has kept up (no call
/// waiting for a thread) for a whole renew interval: a burst in the steady state, not in the
/// backlog that both processes' starts leave on a slow machine.
fn wait_until_steady(args: &Args, host: &kafka_coordination::host::Host) {
    let (began, limit) = (Instant::now(), Duration::from_secs(300));
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < args.renew && began.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(250));
        if host.stats().queued > 0 {
            quiet_since = Instant::now();
        }
    }
    println!(
        "burst: --steady: the host's queue {} a renew interval after {:.1} s",
        if quiet_since.elapsed() >= args.renew {
            "was empty for"
        } else {
            "was still not empty for"
        },
        began.elapsed().as_secs_f64()
    );
}

/// Stands by for one renew interval (and a half second) before the kill, and prints what this
/// process sent meanwhile.
fn stand_by_one_renew_interval(
    args: &Args,
    client: &KafkaTransport,
    host: &kafka_coordination::host::Host,
) {
    let (sent0, stats0, t0) = (client.requests_sent(), host.stats(), Instant::now());
    let (by_api0, machine0) = (client.requests_by_api(), MachineCpu::now());
    std::thread::sleep(args.renew + Duration::from_millis(500));
    let (sent1, stats1) = (client.requests_sent(), host.stats());
    println!(
        "burst: standing by, requests by kind: {}; the host's queue {}; the machine {}",
        requests_since(client, &by_api0),
        stats1.queued,
        MachineCpu::now().since(&machine0),
    );
    println!(
        "burst: standing by for one renew interval: {:.0} requests/s to the broker from this \
         process; its host read partitions {} times, {} times from the tail (tail reads {})",
        (sent1 - sent0) as f64 / t0.elapsed().as_secs_f64(),
        stats1.reads - stats0.reads,
        stats1.tailed_reads - stats0.tailed_reads,
        if args.no_tail { "off" } else { "on" },
    );
}

/// What this process, the broker and the machine had done when the child was killed.
struct AtKill {
    at: i64,
    sent: u64,
    stats: kafka_coordination::host::HostStats,
    broker: Option<String>,
    cpu_self: f64,
    cpu_broker: Option<f64>,
    since: Instant,
    by_api: Vec<(String, u64)>,
    machine: MachineCpu,
}

impl AtKill {
    fn now(args: &Args, client: &KafkaTransport, host: &kafka_coordination::host::Host) -> AtKill {
        let at = now_ms();
        let (sent, stats) = (client.requests_sent(), host.stats());
        let broker = args.broker_pids.clone();
        let (cpu_self, cpu_broker, since) = (
            cpu_seconds("self"),
            broker.as_deref().map(cpu_seconds_sum),
            Instant::now(),
        );
        let (by_api, machine) = (client.requests_by_api(), MachineCpu::now());
        AtKill {
            at,
            sent,
            stats,
            broker,
            cpu_self,
            cpu_broker,
            since,
            by_api,
            machine,
        }
    }

    /// Prints what the takeovers cost from the kill to the last election.
    fn print_costs(&self, client: &KafkaTransport, host: &kafka_coordination::host::Host) {
        let (sent, stats) = (client.requests_sent(), host.stats());
        println!(
            "burst: from the kill to the last election: {} requests to the broker from this process; \
             its host read partitions {} times, {} times from the tail",
            sent - self.sent,
            stats.reads - self.stats.reads,
            stats.tailed_reads - self.stats.tailed_reads,
        );
        println!(
            "burst: from the kill to the last election, requests by kind: {}",
            requests_since(client, &self.by_api)
        );
        let secs = self.since.elapsed().as_secs_f64();
        println!(
            "burst: from the kill to the last election: this process {:.0} % of one core, the \
             broker {}, the machine {}",
            (cpu_seconds("self") - self.cpu_self) / secs * 100.0,
            match (self.broker.as_deref(), self.cpu_broker) {
                (Some(pid), Some(before)) =>
                    format!("{:.0} %", (cpu_seconds_sum(pid) - before) / secs * 100.0),
                _ => "unknown (--broker-pid)".to_owned(),
            },
            MachineCpu::now().since(&self.machine),
        );
    }
}

/// Each killed role's deadline: the last lease the child committed, as the topic holds it; one
/// read of each partition, done well before the first deadline. Prints when they fall and how
/// they bunch.
fn read_deadlines(
    args: &Args,
    client: &KafkaTransport,
    prefix: &str,
    half: usize,
    killed_at: i64,
) -> Vec<Option<i64>> {
    let mut history: std::collections::HashMap<String, Vec<(i64, i64)>> = Default::default();
    for partition in 0..args.partitions {
        use kafka_coordination::transport::Wait;
        let batch = client
            .read_partition(partition, 0, Duration::ZERO)
            .unwrap_or_else(|e| fail(e.to_string()));
        elections::lease_history(batch.records, "a", &mut history);
    }
    let deadline_of: std::collections::HashMap<String, i64> = history
        .iter()
        .filter_map(|(role, leases)| Some((role.clone(), leases.last()?.1)))
        .collect();
    let deadlines: Vec<Option<i64>> = (0..half)
        .map(|i| deadline_of.get(&format!("{prefix}-{i}")).copied())
        .collect();
    let known: Vec<i64> = deadlines.iter().flatten().copied().collect();
    println!(
        "burst: deadlines read {:.1} s after the kill; they fall {:.1} s to {:.1} s after it",
        (now_ms() - killed_at) as f64 / 1000.0,
        known.iter().min().map_or(0, |d| d - killed_at) as f64 / 1000.0,
        known.iter().max().map_or(0, |d| d - killed_at) as f64 / 1000.0,
    );
    print_bunches(
        args,
        prefix,
        half,
        killed_at,
        &known,
        &history,
        &deadline_of,
    );
    deadlines
}

/// How many takeovers the busiest second asks for: a child whose renewals fell behind (it too
/// runs on this machine) bunches its deadlines, and no queue order keeps a bunch on time that
/// the broker cannot answer in time. Prints where that second's roles got there.
fn print_bunches(
    args: &Args,
    prefix: &str,
    half: usize,
    killed_at: i64,
    known: &[i64],
    history: &std::collections::HashMap<String, Vec<(i64, i64)>>,
    deadline_of: &std::collections::HashMap<String, i64>,
) {
    let mut sorted = known.to_vec();
    sorted.sort_unstable();
    let (mut busiest, mut busiest_at, mut first) = (0usize, 0i64, 0usize);
    for (last, d) in sorted.iter().enumerate() {
        while *d - sorted[first] >= 1000 {
            first += 1;
        }
        if last + 1 - first > busiest {
            (busiest, busiest_at) = (last + 1 - first, sorted[first]);
        }
    }
    let describe = |roles: Vec<&Vec<(i64, i64)>>| describe_terms(args, killed_at, roles);
    let (bunch, rest): (Vec<_>, Vec<_>) = (0..half)
        .filter_map(|i| {
            let role = format!("{prefix}-{i}");
            Some((*deadline_of.get(&role)?, history.get(&role)?))
        })
        .partition(|(d, _)| (busiest_at..busiest_at + 1000).contains(d));
    println!(
        "burst: the busiest second's {}",
        describe(bunch.into_iter().map(|(_, h)| h).collect())
    );
    println!(
        "burst: the other {}",
        describe(rest.into_iter().map(|(_, h)| h).collect())
    );
    println!(
        "burst: the busiest second of deadlines holds {busiest} (from {:.1} s after the kill; \
         {:.0} per second on average over the spread)",
        (busiest_at - killed_at) as f64 / 1000.0,
        known.len() as f64
            / ((sorted.last().copied().unwrap_or(0) - sorted.first().copied().unwrap_or(0)) as f64
                / 1000.0)
                .max(1.0),
    );
}

/// Where roles got to their deadlines: when their terms were granted (InitProducerId; each
/// claim's lease write may finish long after), and the gaps between the starts of their lease
/// writes (a renew interval each, on schedule).
fn describe_terms(args: &Args, killed_at: i64, roles: Vec<&Vec<(i64, i64)>>) -> String {
    let lease_ms = args.lease.as_millis() as i64;
    let renew_ms = args.renew.as_millis() as i64;
    let n = roles.len().max(1);
    let granted: Vec<i64> = roles
        .iter()
        .filter_map(|h| h.first())
        .map(|l| l.0)
        .collect();
    let (mut early, mut on, mut late) = (0, 0, 0);
    let mut first_late: Option<i64> = None;
    for h in &roles {
        for w in h.windows(2) {
            // A lease's deadline is its write's start plus the lease duration.
            let gap = w[1].1 - w[0].1;
            if gap < renew_ms - 500 {
                early += 1;
            } else if gap <= renew_ms + 500 {
                on += 1;
            } else {
                late += 1;
                let at = w[1].1 - lease_ms - killed_at;
                first_late = Some(first_late.map_or(at, |f: i64| f.min(at)));
            }
        }
    }
    format!(
        "{n} roles granted their terms {:.1} s to {:.1} s before the kill; gaps between their lease \
         writes: {early} shorter than the renew interval, {on} within 0.5 s of it, {late} \
         longer{}",
        granted.iter().max().map_or(0, |g| killed_at - g) as f64 / 1000.0,
        granted.iter().min().map_or(0, |g| killed_at - g) as f64 / 1000.0,
        first_late.map_or(String::new(), |f| format!(
            " (the first {:.1} s before the kill)",
            -f as f64 / 1000.0
        )),
    )
}

/// Lateness by partition: a partition whose reads stall (an open transaction of the dead
/// process holds its last stable offset back) delays every role on it.
fn print_late_by_partition(
    args: &Args,
    prefix: &str,
    elected_at: &[Option<i64>],
    deadlines: &[Option<i64>],
) {
    let mut by_partition: std::collections::BTreeMap<i32, (usize, usize, i64)> = Default::default();
    for (i, (at, d)) in elected_at.iter().zip(deadlines).enumerate() {
        let role = format!("{prefix}-{i}");
        let p = kafka_coordination::core::partition::partition_of_bytes(
            role.as_bytes(),
            args.partitions,
        )
        .unwrap_or(-1);
        let e = by_partition.entry(p).or_default();
        e.0 += 1;
        if let (Some(at), Some(d)) = (at, d) {
            if at - d > 250 {
                e.1 += 1;
                e.2 = e.2.max(at - d);
            }
        }
    }
    let late_parts: Vec<String> = by_partition
        .iter()
        .filter(|(_, e)| e.1 > 0)
        .map(|(p, e)| format!("{p}: {} of {} late, max {} ms", e.1, e.0, e.2))
        .collect();
    println!(
        "burst: late roles by partition: {}",
        if late_parts.is_empty() {
            "none".to_owned()
        } else {
            late_parts.join("; ")
        }
    );
}

/// The burst's headline: how late after their deadlines the killed process's roles were
/// elected here, and whether this process lost any of its own.
fn print_burst_verdict(
    half: usize,
    elected_at: &[Option<i64>],
    deadlines: &[Option<i64>],
    killed_at: i64,
    own: &[Leadership],
) {
    let mut late: Vec<i64> = elected_at
        .iter()
        .zip(deadlines)
        .filter_map(|(at, d)| Some(at.as_ref()? - d.as_ref()?))
        .collect();
    late.sort_unstable();
    let unknown = deadlines.iter().filter(|d| d.is_none()).count();
    let missing = elected_at.iter().filter(|e| e.is_none()).count();
    let q = |p: f64| quantile(&late, p);
    let within = late.iter().filter(|&&l| l <= 250).count();
    println!(
        "burst: {half} roles of the killed process: elected here after their deadline by p50 {} \
         ms, p99 {} ms, max {} ms; {:.2} % within deadline + 250 ms (target >= 99 %); {} before \
         the deadline; {missing} not elected within 3 leases; {unknown} deadlines not read; last \
         election {:.1} s after the kill; this process's own {} roles lost {}",
        q(0.5),
        q(0.99),
        late.last().copied().unwrap_or(0),
        within as f64 * 100.0 / half.max(1) as f64,
        late.iter().filter(|&&l| l < 0).count(),
        elected_at
            .iter()
            .flatten()
            .max()
            .map_or(0, |m| m - killed_at) as f64
            / 1000.0,
        own.len(),
        own.iter().filter(|l| l.is_done()).count(),
    );
}

/// Hand-overs after a resign to a standby host, with the transport's tail and without, in the
/// same run: a second client in this process leads `2 n` roles on a host of its own; two
/// standby hosts on the main client stand by (rank 0) for half of them each, one with
/// `tail_reads` on, one with it off. The leader resigns the roles one at a time, alternating
/// between the halves; each hand-over is timed from the start of the resign to the standby's
/// election.
fn handover(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    client: Arc<KafkaTransport>,
    options: Options,
    n: usize,
) {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let config = KafkaConfig::new(args.bootstrap.clone(), args.partitions)
        .with_connections_per_broker(args.connections);
    let leader_client =
        Arc::new(KafkaTransport::new(config).unwrap_or_else(|e| fail(e.to_string())));
    let leader_host = host_on(args, runtime, &leader_client);
    let _guard = runtime.enter();
    let standby_host = |tail: bool| {
        kafka_coordination::tokio_driver::host(
            client.clone(),
            HostOptions::new()
                .max_in_flight(args.max_in_flight)
                .tail_reads(tail),
        )
        .unwrap_or_else(|e| fail(e.to_string()))
    };
    let hosts = [standby_host(true), standby_host(false)];
    let role = |i: usize| format!("handover-{stamp:x}-{i}");
    let leaders: Vec<Leadership> = runtime.block_on(async {
        let started: Vec<_> = (0..2 * n)
            .map(|i| {
                leader_host
                    .start(&role(i), "a", options.clone())
                    .unwrap_or_else(|e| fail(e.to_string()))
            })
            .collect();
        let mut out = Vec::new();
        for c in started {
            out.push(c.elected().await.unwrap_or_else(|e| fail(e.to_string())));
        }
        out
    });
    // Role i stands by on host i % 2: even roles with the tail, odd ones without.
    let standbys: Vec<_> = (0..2 * n)
        .map(|i| {
            hosts[i % 2]
                .start(&role(i), "b", options.clone())
                .unwrap_or_else(|e| fail(e.to_string()))
        })
        .collect();
    while standbys.iter().any(|c| c.snapshot().rank != Some(0)) {
        if standbys.iter().any(|c| c.is_done()) {
            fail("a standby ended".to_owned());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut kept = Vec::new();
    runtime.block_on(async {
        for (i, (leader, standby)) in leaders.into_iter().zip(standbys).enumerate() {
            // Quiet partitions between two hand-overs: each one starts from parked standbys.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let t0 = Instant::now();
            leader
                .resign()
                .await
                .unwrap_or_else(|e| fail(e.to_string()));
            let l = standby
                .elected()
                .await
                .unwrap_or_else(|e| fail(e.to_string()));
            times[i % 2].push(t0.elapsed().as_secs_f64() * 1000.0);
            kept.push(l);
        }
    });
    for (driver, t) in ["host_tail_on", "host_tail_off"].iter().zip(&times) {
        write_rows(
            args,
            t.iter().map(|&value| Row {
                bench: "many_roles_handover",
                driver,
                roles: 2 * n,
                lease_ms: args.lease.as_millis(),
                renew_ms: args.renew.as_millis(),
                metric: "handover_ms",
                value,
            }),
        );
    }
    let stats: Vec<_> = hosts.iter().map(|h| h.stats()).collect();
    for (name, (t, st)) in ["on", "off"].iter().zip(times.iter_mut().zip(&stats)) {
        t.sort_by(f64::total_cmp);
        let q = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
        println!(
            "handover, tail reads {name}: {} resigns, resign start to the standby's election: \
             median {:.1} ms, p90 {:.1} ms, max {:.1} ms; the standby host read partitions {} \
             times, {} times from the tail",
            t.len(),
            q(0.5),
            q(0.9),
            t.last().copied().unwrap_or(0.0),
            st.reads,
            st.tailed_reads
        );
    }
    runtime.block_on(async {
        for l in kept {
            let _ = l.resign().await;
        }
    });
}

/// Appends `rows` to the `--csv` file, if one was given.
fn write_rows<'a>(args: &Args, rows: impl IntoIterator<Item = Row<'a>>) {
    if let Some(csv) = &args.csv {
        csv.append(rows)
            .unwrap_or_else(|e| fail(format!("writing the --csv file: {e}")));
    }
}

fn now_ms() -> i64 {
    kafka_coordination::Clock::now(&kafka_coordination::SystemClock).0
}

fn main() {
    let args = parse_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(args.blocking_threads)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("tokio runtime: {e}")));
    let config = KafkaConfig::new(args.bootstrap.clone(), args.partitions)
        .with_connections_per_broker(args.connections);
    let client = Arc::new(KafkaTransport::new(config).unwrap_or_else(|e| fail(e.to_string())));
    client
        .create_topic(args.replication, (args.replication > 1).then_some(2))
        .unwrap_or_else(|e| fail(e.to_string()));
    let options = Options::new()
        .lease_duration(args.lease)
        .renew_interval(args.renew)
        .challenge_stagger(args.stagger);
    if let Some(prefix) = &args.burst_child {
        burst_child(&args, &runtime, client, options, prefix);
    }
    if let Some(n) = args.handover {
        handover(&args, &runtime, client, options, n);
        return;
    }
    if args.burst {
        burst(&args, &runtime, client, options);
        return;
    }
    steady_state(&args, &runtime, &client, options);
}

/// The default run: elects every role, holds them for `--seconds` of steady state while it
/// samples their renewals, and prints what it cost.
fn steady_state(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    client: &Arc<KafkaTransport>,
    options: Options,
) {
    let before = own_resources();
    let (threads0, rss0, sockets0) = before;
    println!(
        "many_roles: {} roles, lease {:?}, renew {:?}, one client, driver {} (tokio: 2 workers, \
         blocking pool <= {}; host: {} I/O threads); before: {threads0} threads, {} MiB RSS, \
         {sockets0} sockets",
        args.roles,
        args.lease,
        args.renew,
        args.driver,
        args.blocking_threads,
        args.max_in_flight,
        rss0 / 1024
    );
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let started = Instant::now();
    let by_api_before = client.requests_by_api();
    let host = (args.driver == "host").then(|| host_on(args, runtime, client));
    let leaderships = elect_all(args, runtime, client, host.as_ref(), &options, stamp);
    let elected_in = started.elapsed();
    let after = own_resources();
    let (threads1, rss1, sockets1) = after;
    println!(
        "all {} roles elected in {:.1} s; now {threads1} threads, {} MiB RSS, {sockets1} sockets",
        leaderships.len(),
        elected_in.as_secs_f64(),
        rss1 / 1024
    );
    println!(
        "  requests by kind to elect them: {}",
        requests_since(client, &by_api_before)
    );
    let mut run = Steady::new(args, client, &leaderships, after);
    let steady = Duration::from_secs(args.seconds);
    while run.t0.elapsed() < steady {
        std::thread::sleep(Duration::from_millis(250).min(steady.saturating_sub(run.t0.elapsed())));
        run.kill_when_due(args);
        run.join_when_due(args, host.as_ref(), &options, stamp);
        run.sample_renewals(&leaderships);
        if Instant::now() < run.next_print && run.t0.elapsed() < steady {
            continue;
        }
        run.print_progress(args, client, host.as_ref(), &leaderships);
    }
    let (secs, cpu, bcpu) = run.cpu();
    run.print_renewals(args, elected_in, cpu);
    run.print_lease_gaps(&leaderships);
    println!(
        "requests given up on when their broker went silent: {}",
        client.requests_abandoned()
    );
    run.print_joined();
    if run.killed_at.is_some() {
        run.print_after_kill(args, client, &leaderships);
    }
    run.print_summary(args, client, before, after, elected_in, (secs, cpu, bcpu));
    // Every role resigns at once: how long a process with this many roles takes to leave.
    let count = leaderships.len();
    let (clean, took) = resign_all(runtime, leaderships);
    println!(
        "all {count} roles resigned at once in {:.1} s ({clean} left the role clean)",
        took.as_secs_f64()
    );
}

/// Starts every role (on the host, or a tokio task each) and waits until all are elected.
fn elect_all(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    client: &Arc<KafkaTransport>,
    host: Option<&kafka_coordination::host::Host>,
    options: &Options,
    stamp: u128,
) -> Vec<Leadership> {
    runtime.block_on(async {
        if let Some(host) = host {
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
    })
}

/// What the steady state samples and accumulates.
struct Steady {
    broker: Option<String>,
    cpu0: f64,
    broker0: Option<f64>,
    t0: Instant,
    requests0: u64,
    machine0: MachineCpu,
    max_threads: usize,
    max_rss: u64,
    lost: usize,
    renew_ms: i64,
    /// Renewal lag: each role's consecutive renewal instants, sampled every 250 ms (a renew
    /// interval of seconds leaves at most one renewal between samples), less the interval.
    last_renewal: Vec<Option<kafka_coordination::core::UnixMillis>>,
    lags: Vec<i64>,
    /// The same lags by when they were seen (seconds after the last election), for the windows.
    lags_seen: Vec<(u64, i64)>,
    /// Leases that ran out before the renewal after them was seen committed: each role's lease
    /// deadline as last seen, and the gaps (the sample that saw the renewal, less that
    /// deadline). A renewal issued on time that commits late shows here, not in the lag above.
    deadlines: Vec<Option<kafka_coordination::core::UnixMillis>>,
    gaps: Vec<i64>,
    gapped_roles: std::collections::BTreeSet<usize>,
    /// How much of the lease was left when the renewal after it was seen committed (negative:
    /// it had run out): how close the leases came to running out.
    margins: Vec<i64>,
    next_print: Instant,
    by_api_last: Vec<(String, u64)>,
    /// `--kill-pid`: when the process was killed, and each role's worst lag after it.
    killed_at: Option<kafka_coordination::core::UnixMillis>,
    lag_after_kill: Vec<i64>,
    /// `--join N`: the candidacies started after the kill, when, and when all were elected.
    joined: Vec<kafka_coordination::leadership::Candidacy>,
    joined_at: Option<Instant>,
    all_joined: bool,
}

impl Steady {
    fn new(
        args: &Args,
        client: &KafkaTransport,
        leaderships: &[Leadership],
        (threads1, rss1, _): (usize, u64, usize),
    ) -> Steady {
        let broker = args.broker_pids.clone();
        let (cpu0, broker0, t0, requests0, machine0) = (
            cpu_seconds("self"),
            broker.as_deref().map(cpu_seconds_sum),
            Instant::now(),
            client.requests_sent(),
            MachineCpu::now(),
        );
        let last_renewal = leaderships
            .iter()
            .map(|l| l.health().last_renewal)
            .collect();
        let deadlines = leaderships
            .iter()
            .map(|l| l.health().lease_deadline)
            .collect();
        let next_print = Instant::now() + Duration::from_secs(5);
        let by_api_last = client.requests_by_api();
        Steady {
            broker,
            cpu0,
            broker0,
            t0,
            requests0,
            machine0,
            max_threads: threads1,
            max_rss: rss1,
            lost: 0,
            renew_ms: args.renew.as_millis() as i64,
            last_renewal,
            lags: Vec::new(),
            lags_seen: Vec::new(),
            deadlines,
            gaps: Vec::new(),
            gapped_roles: std::collections::BTreeSet::new(),
            margins: Vec::new(),
            next_print,
            by_api_last,
            killed_at: None,
            lag_after_kill: vec![0; leaderships.len()],
            joined: Vec::new(),
            joined_at: None,
            all_joined: false,
        }
    }

    /// `--kill-pid PID --kill-at S`: signals the process once S seconds have passed.
    fn kill_when_due(&mut self, args: &Args) {
        if let (Some(pid), None) = (args.kill_pid, self.killed_at) {
            if self.t0.elapsed() >= Duration::from_secs(args.kill_at) {
                let status = std::process::Command::new("kill")
                    .args([format!("-{}", args.kill_signal), pid.to_string()])
                    .status();
                self.killed_at = Some(kafka_coordination::Clock::now(
                    &kafka_coordination::SystemClock,
                ));
                println!(
                    "  sent SIG{} to process {pid}: {status:?}",
                    args.kill_signal
                );
            }
        }
    }

    /// `--join N`: starts N more roles 2 s after the kill, and notes when all are elected.
    fn join_when_due(
        &mut self,
        args: &Args,
        host: Option<&kafka_coordination::host::Host>,
        options: &Options,
        stamp: u128,
    ) {
        if let (Some(k), Some(host)) = (self.killed_at, host) {
            let now = kafka_coordination::Clock::now(&kafka_coordination::SystemClock);
            if args.join > 0 && self.joined.is_empty() && now.0 - k.0 >= 2_000 {
                self.joined = (0..args.join)
                    .map(|i| {
                        host.start(&format!("join-{stamp:x}-{i}"), "solo", options.clone())
                            .unwrap_or_else(|e| fail(e.to_string()))
                    })
                    .collect();
                self.joined_at = Some(Instant::now());
                println!("  started {} more roles", args.join);
            }
        }
        if let (Some(at), false) = (self.joined_at, self.all_joined) {
            if self.joined.iter().all(|c| c.snapshot().token.is_some()) {
                self.all_joined = true;
                println!(
                    "  the {} roles started after the kill were all elected in {:.1} s",
                    self.joined.len(),
                    at.elapsed().as_secs_f64()
                );
            }
        }
    }

    /// Notes every renewal seen since the last sample: its lag, and how much of the lease was
    /// left.
    fn sample_renewals(&mut self, leaderships: &[Leadership]) {
        for (i, (l, last)) in leaderships
            .iter()
            .zip(self.last_renewal.iter_mut())
            .enumerate()
        {
            let health = l.health();
            let now = health.last_renewal;
            if let (Some(prev), Some(new)) = (*last, now) {
                if new > prev {
                    if let Some(deadline) = self.deadlines[i] {
                        let left = deadline.0 - health.now.0;
                        self.margins.push(left);
                        if left < 0 {
                            self.gaps.push(-left);
                            self.gapped_roles.insert(i);
                        }
                    }
                    self.deadlines[i] = health.lease_deadline;
                    let lag = (new.0 - prev.0 - self.renew_ms).max(0);
                    self.lags.push(lag);
                    self.lags_seen.push((self.t0.elapsed().as_secs(), lag));
                    if self.killed_at.is_some_and(|k| new > k) {
                        self.lag_after_kill[i] = self.lag_after_kill[i].max(lag);
                    }
                }
            }
            *last = now;
        }
    }

    /// Every 5 s: the process's threads, memory, sockets and CPU, and the roles lost.
    fn print_progress(
        &mut self,
        args: &Args,
        client: &KafkaTransport,
        host: Option<&kafka_coordination::host::Host>,
        leaderships: &[Leadership],
    ) {
        self.next_print = Instant::now() + Duration::from_secs(5);
        let (threads, rss, sockets) = own_resources();
        self.max_threads = self.max_threads.max(threads);
        self.max_rss = self.max_rss.max(rss);
        let lost = leaderships.iter().filter(|l| l.is_done()).count();
        self.lost = lost;
        let secs = self.t0.elapsed().as_secs_f64();
        let cpu = (cpu_seconds("self") - self.cpu0) / secs * 100.0;
        let bcpu = self
            .broker
            .as_deref()
            .zip(self.broker0)
            .map(|(p, b0)| format!("{:.0} %", (cpu_seconds_sum(p) - b0) / secs * 100.0))
            .unwrap_or_else(|| "n/a".to_owned());
        println!(
            "  +{secs:>5.0} s: {threads} threads, {} MiB RSS, {sockets} sockets, CPU {cpu:.1} % \
             of one core (broker {bcpu}), roles lost {lost}{}",
            rss / 1024,
            host.map(|h| format!(", host queue {}", h.stats().queued))
                .unwrap_or_default()
        );
        if args.verbose {
            println!(
                "      requests in the last 5 s: {}",
                requests_since(client, &self.by_api_last)
            );
            self.by_api_last = client.requests_by_api();
        }
        if lost > 0 {
            for l in leaderships.iter().filter(|l| l.is_done()).take(3) {
                println!("    lost {}: {:?}", l.role(), l.err());
            }
        }
    }

    /// The steady state's length, this process's CPU and the broker's, as % of one core.
    fn cpu(&self) -> (f64, f64, Option<f64>) {
        let secs = self.t0.elapsed().as_secs_f64().max(0.001);
        let cpu = (cpu_seconds("self") - self.cpu0) / secs * 100.0;
        let bcpu = self
            .broker
            .as_deref()
            .zip(self.broker0)
            .map(|(p, b0)| (cpu_seconds_sum(p) - b0) / secs * 100.0);
        (secs, cpu, bcpu)
    }

    /// The renewal lags, overall and by window, and the data file's rows.
    fn print_renewals(&mut self, args: &Args, elected_in: Duration, cpu: f64) {
        self.lags.sort_unstable();
        let lags = &self.lags;
        let q = |p: f64| quantile(lags, p);
        println!(
            "renewals: {} seen; lag p50 {} ms, p99 {} ms (target <= 100 ms), max {} ms",
            lags.len(),
            q(0.5),
            q(0.99),
            lags.last().copied().unwrap_or(0)
        );
        print_lag_windows(&self.lags_seen);
        let row = |metric, value| Row {
            bench: "many_roles",
            driver: &args.driver,
            roles: args.roles,
            lease_ms: args.lease.as_millis(),
            renew_ms: args.renew.as_millis(),
            metric,
            value,
        };
        write_rows(
            args,
            [
                row("elected_s", elected_in.as_secs_f64()),
                row("lag_p50_ms", q(0.5) as f64),
                row("lag_p99_ms", q(0.99) as f64),
                row("lag_max_ms", lags.last().copied().unwrap_or(0) as f64),
                row("cpu_pct_of_one_core", cpu),
            ],
        );
    }

    /// The leases that ran out before the next renewal was seen, and the lease left at each.
    fn print_lease_gaps(&mut self, leaderships: &[Leadership]) {
        // Roles whose last lease has run out with no renewal seen since count too.
        let end = kafka_coordination::Clock::now(&kafka_coordination::SystemClock);
        for (i, l) in leaderships.iter().enumerate() {
            if let Some(d) = self.deadlines[i].filter(|d| end > *d && !l.is_done()) {
                self.gaps.push(end.0 - d.0);
                self.gapped_roles.insert(i);
            }
        }
        println!(
            "leases that ran out before the next renewal was seen committed (sampled every 250 ms): \
             {} in {} roles, longest gap {} ms",
            self.gaps.len(),
            self.gapped_roles.len(),
            self.gaps.iter().max().copied().unwrap_or(0)
        );
        self.margins.sort_unstable();
        let margins = &self.margins;
        println!(
            "lease left when the next renewal was seen committed: min {} ms, p1 {} ms, p50 {} ms \
             ({} renewals)",
            margins.first().copied().unwrap_or(0),
            quantile(margins, 0.01),
            quantile(margins, 0.5),
            margins.len()
        );
    }

    /// `--join N`, when not all the joined roles were elected by the end.
    fn print_joined(&self) {
        if let (Some(at), false) = (self.joined_at, self.all_joined) {
            let elected = self
                .joined
                .iter()
                .filter(|c| c.snapshot().token.is_some())
                .count();
            println!(
                "the {} roles started after the kill: {elected} elected in {:.1} s",
                self.joined.len(),
                at.elapsed().as_secs_f64()
            );
        }
    }

    /// `--kill-pid`: the roles that went a lease without a renewal after the kill, and the
    /// worst lag and the roles lost by partition.
    fn print_after_kill(
        &mut self,
        args: &Args,
        client: &KafkaTransport,
        leaderships: &[Leadership],
    ) {
        let renew_ms = self.renew_ms;
        // A role that has not renewed since lags too: the gap from its last renewal to now.
        let now = kafka_coordination::Clock::now(&kafka_coordination::SystemClock);
        for (l, lag) in leaderships.iter().zip(self.lag_after_kill.iter_mut()) {
            if let Some(last) = l.health().last_renewal {
                *lag = (*lag).max(now.0 - last.0 - renew_ms);
            }
        }
        // By partition: the worst renewal lag after the kill, and the roles lost. Partitions
        // the killed broker led wait for a new leader; the others show what else waited.
        let mut by_partition: std::collections::BTreeMap<i32, (Vec<i64>, usize)> =
            std::collections::BTreeMap::new();
        for (l, lag) in leaderships.iter().zip(&self.lag_after_kill) {
            let p = client.role_partition(l.role()).unwrap_or(-1);
            let (lags, lost) = by_partition.entry(p).or_default();
            lags.push(*lag);
            *lost += usize::from(l.is_done());
        }
        let lease_ms = args.lease.as_millis() as i64;
        let ran_out = self
            .lag_after_kill
            .iter()
            .filter(|lag| **lag + renew_ms > lease_ms)
            .count();
        println!(
            "after the kill: {ran_out} of {} roles went longer than a lease without a renewal \
             (standbys would have taken them over)",
            self.lag_after_kill.len()
        );
        println!("after the kill, by partition: roles, renewal lag p50 / max, lost");
        for (p, (mut lags, lost)) in by_partition {
            lags.sort_unstable();
            println!(
                "  partition {p:>2}: {:>5} roles, lag p50 {:>6} ms, max {:>6} ms, lost {lost}",
                lags.len(),
                lags[lags.len() / 2],
                lags[lags.len() - 1]
            );
        }
    }

    /// The headline: election time, roles lost, threads, memory, CPU and requests, and the
    /// cost of one more role.
    fn print_summary(
        &self,
        args: &Args,
        client: &KafkaTransport,
        (threads0, rss0, sockets0): (usize, u64, usize),
        (threads1, rss1, sockets1): (usize, u64, usize),
        elected_in: Duration,
        (secs, cpu, bcpu): (f64, f64, Option<f64>),
    ) {
        let (lost, max_threads) = (self.lost, self.max_threads);
        let per_role_threads = (threads1 as f64 - threads0 as f64) / args.roles as f64;
        let per_role_sockets = (sockets1 as f64 - sockets0 as f64) / args.roles as f64;
        let per_role_kib = (rss1 as f64 - rss0 as f64) / args.roles as f64;
        println!(
            "\nmany_roles: {} roles; elected in {:.1} s (target <= 60 s); lost {lost} (target 0); \
             threads max {max_threads} (target <= 32); RSS max {} MiB (target <= 1 GiB); CPU {cpu:.1} \
             % of one core in steady state; broker CPU {}; the machine {}; requests to the broker \
             {:.0}/s (native connections, registrations included)",
            args.roles,
            elected_in.as_secs_f64(),
            self.max_rss / 1024,
            bcpu.map_or("n/a".to_owned(), |b| format!("{b:.1} % of one core")),
            MachineCpu::now().since(&self.machine0),
            (client.requests_sent() - self.requests0) as f64 / secs
        );
        println!(
            "per additional role: {per_role_threads:.3} threads, {per_role_sockets:.3} sockets, \
             {per_role_kib:.1} KiB RSS; the client's native connections: {}",
            client.open_connections()
        ); // The steady state's cost, for scripts/capacity.sh (see `capacity`).
        if let (Some(pids), Some(b)) = (self.broker.as_deref(), bcpu) {
            let sample = kafka_coordination_examples::capacity::Sample {
                roles: args.roles as u64,
                renew_ms: args.renew.as_millis() as u64,
                seconds: secs,
                renewals: self.lags.len() as u64,
                broker_cpu_s: b / 100.0 * secs,
                requests: client.requests_sent() - self.requests0,
                brokers: pids.split(',').count() as u32,
                replication: args.replication.max(1) as u32,
            };
            println!("{}", sample.line());
        }
    }
}

/// Resigns every one of `leaderships` at once; returns how many left their role clean and how
/// long that took.
fn resign_all(
    runtime: &tokio::runtime::Runtime,
    leaderships: Vec<Leadership>,
) -> (usize, Duration) {
    let leaving = Instant::now();
    let clean = runtime.block_on(async {
        let resigns: Vec<_> = leaderships
            .into_iter()
            .map(|l| tokio::spawn(async move { l.resign().await }))
            .collect();
        let mut clean = 0;
        for r in resigns {
            if matches!(r.await, Ok(Ok(()))) {
                clean += 1;
            }
        }
        clean
    });
    (clean, leaving.elapsed())
}

/// The requests of each kind `client` sent since `before` (its earlier
/// `requests_by_api`), most first.
fn requests_since(client: &KafkaTransport, before: &[(String, u64)]) -> String {
    let mut now: Vec<(String, u64)> = client
        .requests_by_api()
        .into_iter()
        .map(|(api, n)| {
            let was = before.iter().find(|(b, _)| *b == api).map_or(0, |b| b.1);
            (api, n - was)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    now.sort_by_key(|e| std::cmp::Reverse(e.1));
    now.iter()
        .map(|(api, n)| format!("{api} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The renewal lag by window of the steady state: the first 30 s after the last election,
/// the next 30 s, then each further minute. Renewals that waited behind the election show in
/// the first.
fn print_lag_windows(seen: &[(u64, i64)]) {
    let mut windows: Vec<(u64, u64, Vec<i64>)> = vec![(0, 30, Vec::new()), (30, 60, Vec::new())];
    for (at, lag) in seen {
        while *at >= windows[windows.len() - 1].1 {
            let from = windows[windows.len() - 1].1;
            windows.push((from, from + 60, Vec::new()));
        }
        if let Some(w) = windows.iter_mut().find(|w| *at >= w.0 && *at < w.1) {
            w.2.push(*lag);
        }
    }
    let parts: Vec<String> = windows
        .into_iter()
        .filter(|w| !w.2.is_empty())
        .map(|(from, to, mut lags)| {
            lags.sort_unstable();
            let p99 = quantile(&lags, 0.99);
            format!(
                "{from}-{to} s: {} renewals, p99 {p99} ms, max {} ms",
                lags.len(),
                lags[lags.len() - 1]
            )
        })
        .collect();
    println!(
        "  renewal lag by window after the last election: {}",
        parts.join("; ")
    );
}
