//! Failover benchmark on a real Kafka cluster: how long after a holder's lease runs out does
//! its successor hold the role, and how long does a third party's check take.
//!
//! ```text
//! scripts/kafka/start.sh            # prints: export KAFKA_BOOTSTRAP=127.0.0.1:PORT
//! cargo run --release -p kafka-coordination-examples --features kafka --example failover_bench \
//!     -- --bootstrap 127.0.0.1:PORT
//! ```
//!
//! `--mode kill` (the default): members are separate processes, and each round the leader is
//! SIGKILLed (even rounds) or resigns (odd rounds); see `processes.rs`. It prints the failover
//! overhead and the hand-over time after a resign. `--driver blocking|tokio|smol|async-std|host`
//! (default `blocking`) says what runs each member's candidacy: a thread of its own, a task of
//! that runtime, or a host of one candidacy.
//!
//! `--mode cut`: two members in this process take turns. Each round the holder "dies": its
//! link to the cluster is severed, so it stops renewing (nothing is resigned). The successor is elected once the last lease ends,
//! at `deadline + rank x stagger`. The figure of merit is the **overhead**: the instant the
//! successor's first lease committed, minus `deadline + rank x stagger`, both on the
//! successor's clock. It is broken down into the successor's wake-up (from its turn to the
//! start of its InitProducerId), the InitProducerId, and the first lease's transaction. Then
//! the dead holder's link comes back, it learns it was fenced, and it joins again as the
//! standby for the next round.
//!
//! Options: `--bootstrap HOST:PORT` (or `KAFKA_BOOTSTRAP`), `--failovers N` (20), `--lease-ms`
//! (3000), `--renew-ms` (1000), `--stagger-ms` (500), `--describe-calls N` (200),
//! `--partitions N` (16, the state topic's real count), `--replication N` (1; used only if the
//! state topic must be created), `--csv PATH` (append every sample to a data file as well:
//! `stats::CSV_HEADER`, one value a row; `scripts/plots.sh` renders it).

mod processes;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_coordination::blocking;
use kafka_coordination::core::machine::Status;
use kafka_coordination::core::record::{Lease, Role};
use kafka_coordination::describe::describe_leadership;
use kafka_coordination::error::TransportError;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::leadership::{Candidacy, Leadership};
use kafka_coordination::transport::{BlockingTransport, OnPool, Wait};
use kafka_coordination::transport::{Coordinator, ReadBatch, StateReader};
use kafka_coordination::{Clock, FencingToken, LeadershipStatus, Options, SystemClock};
use kafka_coordination_examples::stats::{Csv, Row};

struct Args {
    mode: String,
    member: Option<String>,
    role: Option<String>,
    bootstrap: String,
    failovers: usize,
    lease: Duration,
    renew: Duration,
    stagger: Duration,
    describe_calls: usize,
    partitions: i32,
    replication: i32,
    csv: Option<String>,
    driver: String,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        mode: "kill".to_owned(),
        member: None,
        role: None,
        bootstrap: std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default(),
        failovers: 20,
        lease: Duration::from_millis(3000),
        renew: Duration::from_millis(1000),
        stagger: Duration::from_millis(500),
        describe_calls: 200,
        partitions: 16,
        replication: 1,
        csv: None,
        driver: "blocking".to_owned(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--bootstrap" => a.bootstrap = value()?,
            "--mode" => a.mode = value()?,
            "--member" => a.member = Some(value()?),
            "--role" => a.role = Some(value()?),
            "--failovers" => a.failovers = number(value()?)? as usize,
            "--lease-ms" => a.lease = Duration::from_millis(number(value()?)?),
            "--renew-ms" => a.renew = Duration::from_millis(number(value()?)?),
            "--stagger-ms" => a.stagger = Duration::from_millis(number(value()?)?),
            "--describe-calls" => a.describe_calls = number(value()?)? as usize,
            "--partitions" => a.partitions = number(value()?)? as i32,
            "--replication" => a.replication = number(value()?)? as i32,
            "--csv" => a.csv = Some(value()?),
            "--driver" => a.driver = value()?,
            "-h" | "--help" => return Err(
                "usage: failover_bench --bootstrap HOST:PORT [--mode kill|cut] [--failovers N] \
                            [--lease-ms MS] [--renew-ms MS] [--stagger-ms MS] \
                            [--describe-calls N] [--partitions N] [--replication N] [--csv PATH] \
                            [--driver blocking|tokio|smol|async-std|host]"
                    .to_owned(),
            ),
            other => return Err(format!("unknown argument {other} (try --help)")),
        }
    }
    if a.bootstrap.is_empty() {
        return Err("--bootstrap HOST:PORT (or KAFKA_BOOTSTRAP) is required".to_owned());
    }
    if a.mode != "kill" && a.mode != "cut" {
        return Err(format!("--mode is kill or cut, not {}", a.mode));
    }
    if !processes::DRIVERS.contains(&a.driver.as_str()) {
        return Err(format!(
            "--driver is one of {}, not {}",
            processes::DRIVERS.join(", "),
            a.driver
        ));
    }
    if a.failovers == 0 || a.describe_calls == 0 {
        return Err("--failovers and --describe-calls must be positive".to_owned());
    }
    Ok(a)
}

fn now_ms() -> i64 {
    SystemClock.now().0
}

/// What one member's link saw, on its own clock.
#[derive(Default)]
struct Seen {
    /// The last lease this member committed.
    last_lease: Option<Lease>,
    /// The start and end of its last InitProducerId.
    acquire: Option<(i64, i64)>,
    /// When the first lease after that acquire started and committed.
    claim: Option<(i64, i64)>,
}

/// A member's transport whose link can be severed (the process "dies": calls fail as
/// retriable, nothing is resigned), and that notes when its lease writes commit.
#[derive(Clone)]
struct Link {
    kafka: Arc<KafkaTransport>,
    severed: Arc<AtomicBool>,
    in_call: Arc<Mutex<()>>,
    seen: Arc<Mutex<Seen>>,
}

impl Link {
    fn new(kafka: KafkaTransport) -> Link {
        Link {
            kafka: Arc::new(kafka),
            severed: Arc::new(AtomicBool::new(false)),
            in_call: Arc::new(Mutex::new(())),
            seen: Arc::new(Mutex::new(Seen::default())),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cuts the link; when this returns no call is in flight and none gets through.
    fn sever(&self) {
        self.severed.store(true, Ordering::SeqCst);
        drop(self.in_call.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn restore(&self) {
        self.severed.store(false, Ordering::SeqCst);
    }

    fn pass<R>(
        &self,
        call: impl FnOnce(&KafkaTransport) -> Result<R, TransportError>,
    ) -> Result<R, TransportError> {
        let _one_at_a_time = self.in_call.lock().unwrap_or_else(|e| e.into_inner());
        if self.severed.load(Ordering::SeqCst) {
            return Err(TransportError::retriable("link severed by the benchmark"));
        }
        call(&self.kafka)
    }
}

/// The link is a blocking transport (each call holds `in_call` until the broker answered, so
/// that [`Link::sever`] can wait for the call in flight), run on a pool by [`OnPool`].
impl BlockingTransport for Link {
    fn partitions(&self) -> i32 {
        self.kafka.partitions()
    }
    fn acquire_epoch(
        &self,
        role: &Role,
        timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        let started = now_ms();
        let r = self.pass(|k| k.acquire_epoch(role, timeout));
        if r.is_ok() {
            let mut seen = self.seen();
            seen.acquire = Some((started, now_ms()));
            seen.claim = None;
        }
        r
    }
    fn describe_epoch(&self, role: &Role) -> Result<LeadershipStatus, TransportError> {
        self.pass(|k| k.describe_epoch(role))
    }
    fn read_partition(
        &self,
        partition: i32,
        from: i64,
        max_wait: Duration,
    ) -> Result<ReadBatch, TransportError> {
        self.pass(|k| k.read_partition(partition, from, max_wait))
    }
    fn append(&self, p: i32, key: &[u8], value: Option<&[u8]>) -> Result<i64, TransportError> {
        self.pass(|k| k.append(p, key, value))
    }
    fn write_lease(
        &self,
        p: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        let started = now_ms();
        let r = self.pass(|k| k.write_lease(p, key, value, token));
        if r.is_ok() {
            let mut seen = self.seen();
            seen.last_lease = value.and_then(|v| Lease::decode(v).ok());
            if seen.claim.is_none() {
                seen.claim = Some((started, now_ms()));
            }
        }
        r
    }
    fn can_long_poll(&self) -> bool {
        self.kafka.can_long_poll()
    }
    fn release_role(&self, role: &Role) {
        self.kafka.release_role(role)
    }
    fn claims_scope(&self) -> Option<usize> {
        self.kafka.claims_scope()
    }
}

impl Link {
    /// The link as a transport for a driver, which makes one call at a time: its calls on a
    /// pool of one thread.
    fn transport(&self) -> OnPool<Link> {
        OnPool::new(self.clone(), 1)
    }
}

fn fail(message: String) -> ! {
    eprintln!("failover_bench: {message}");
    std::process::exit(1);
}

fn wait_standby(c: &Candidacy, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let s = c.snapshot();
        if s.status == Status::Standby {
            if let Some(rank) = s.rank {
                return rank;
            }
        }
        if c.is_done() || Instant::now() >= deadline {
            fail(format!("the standby is not waiting: {s:?}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn elected(c: Candidacy, within: Duration) -> Leadership {
    match c.elected_blocking_timeout(within) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => fail(format!("the candidacy failed: {e}")),
        Err(c) => fail(format!("not elected within {within:?}: {:?}", c.snapshot())),
    }
}

/// Appends the samples of `series` (metric name, values in ms) to the `--csv` file, if any.
fn write_csv(args: &Args, series: &[(&str, &[f64])]) {
    let Some(path) = &args.csv else { return };
    let csv = Csv::open(path).unwrap_or_else(|e| fail(format!("--csv {path}: {e}")));
    let rows = series.iter().flat_map(|(metric, values)| {
        values.iter().map(move |&value| Row {
            bench: "failover_bench",
            driver: &args.mode,
            roles: 1,
            lease_ms: args.lease.as_millis(),
            renew_ms: args.renew.as_millis(),
            metric,
            value,
        })
    });
    csv.append(rows)
        .unwrap_or_else(|e| fail(format!("writing {path}: {e}")));
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(name: &str, values: &[f64], unit: &str) -> (f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let (median, p90) = (percentile(&v, 0.5), percentile(&v, 0.9));
    println!(
        "{name:<28} median {median:>8.2} {unit}   p90 {p90:>8.2} {unit}   min {:>8.2}   max {:>8.2}   (n={})",
        v[0],
        v[v.len() - 1],
        v.len()
    );
    (median, p90)
}

/// `--mode kill`: member processes; the failover and hand-over figures, then the describe
/// figure.
fn run_processes(args: &Args, role: &str, config: &KafkaConfig) {
    let t = KafkaTransport::new(config.clone()).unwrap_or_else(|e| fail(e.to_string()));
    let min_isr = (args.replication > 1).then_some(2);
    t.create_topic(args.replication, min_isr)
        .unwrap_or_else(|e| fail(e.to_string()));
    let ms = |d: Duration| d.as_millis().to_string();
    let forwarded: Vec<String> = vec![
        "--bootstrap".into(),
        args.bootstrap.clone(),
        "--partitions".into(),
        args.partitions.to_string(),
        "--lease-ms".into(),
        ms(args.lease),
        "--renew-ms".into(),
        ms(args.renew),
        "--stagger-ms".into(),
        ms(args.stagger),
        "--driver".into(),
        args.driver.clone(),
    ];
    println!(
        "failover_bench --mode kill: role {role} on {} ({} partitions); lease {:?}, renew {:?}, \
         stagger {:?}; {} rounds (kills and resigns alternate), member processes on the {} driver",
        args.bootstrap,
        args.partitions,
        args.lease,
        args.renew,
        args.stagger,
        args.failovers,
        args.driver
    );
    let (overheads, handovers) = processes::run(
        role,
        config,
        args.partitions,
        args.lease,
        args.stagger,
        args.failovers,
        &forwarded,
    );
    println!();
    let (om, op) = summary("failover overhead (ms)", &overheads, "ms");
    let (hm, hp) = summary("hand-over after resign (ms)", &handovers, "ms");
    // The third-party check, against a role some member holds now.
    let holder = KafkaTransport::new(config.clone()).unwrap_or_else(|e| fail(e.to_string()));
    let leader = blocking::acquire_leadership(
        KafkaTransport::new(config.clone()).unwrap_or_else(|e| fail(e.to_string())),
        role,
        "describe-target",
        Options::new()
            .lease_duration(args.lease)
            .renew_interval(args.renew)
            .challenge_stagger(args.stagger),
    )
    .unwrap_or_else(|e| fail(e.to_string()));
    let token = leader.token();
    let mut latencies = Vec::with_capacity(args.describe_calls);
    for _ in 0..args.describe_calls {
        let started = Instant::now();
        let status = describe_leadership(&holder, role).unwrap_or_else(|e| fail(e.to_string()));
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        if !status.authoritative(&token) {
            fail(format!(
                "describe: {token} is not authoritative: {status:?}"
            ));
        }
    }
    let (dm, dp) = summary("describe_leadership (ms)", &latencies, "ms");
    write_csv(
        args,
        &[
            ("failover_overhead_ms", &overheads),
            ("handover_ms", &handovers),
            ("describe_ms", &latencies),
        ],
    );
    if let Err(e) = leader.resign_blocking() {
        fail(format!("resign: {e}"));
    }
    println!(
        "\nfailover overhead (SIGKILL): median {om:.0} ms, p90 {op:.0} ms (target: median <= 30, p90 <= 60) {}",
        if om <= 30.0 && op <= 60.0 { "OK" } else { "ABOVE TARGET" }
    );
    println!(
        "hand-over after resign: median {hm:.0} ms, p90 {hp:.0} ms (target: median <= 50) {}",
        if hm <= 50.0 { "OK" } else { "ABOVE TARGET" }
    );
    println!(
        "describe_leadership: median {dm:.2} ms, p90 {dp:.2} ms (target: median <= 1 ms) {}",
        if dm <= 1.0 { "OK" } else { "ABOVE TARGET" }
    );
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| fail(e));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let role = args
        .role
        .clone()
        .unwrap_or_else(|| format!("failover-bench-{nanos:x}"));
    let config = KafkaConfig::new(args.bootstrap.clone(), args.partitions);
    let options = Options::new()
        .lease_duration(args.lease)
        .renew_interval(args.renew)
        .challenge_stagger(args.stagger)
        .give_up_after(args.lease * 10);
    if let Some(name) = &args.member {
        processes::member_main(name, &role, config, options, &args.driver);
        return;
    }
    if args.mode == "kill" {
        run_processes(&args, &role, &config);
        return;
    }
    let member = |name: &str| -> Link {
        let t = KafkaTransport::new(config.clone()).unwrap_or_else(|e| fail(e.to_string()));
        let min_isr = (args.replication > 1).then_some(2);
        t.create_topic(args.replication, min_isr)
            .unwrap_or_else(|e| fail(format!("{name}: {e}")));
        Link::new(t)
    };
    println!(
        "failover_bench: role {role} on {} ({} partitions); lease {:?}, renew {:?}, stagger {:?}; \
         {} failovers",
        args.bootstrap, args.partitions, args.lease, args.renew, args.stagger, args.failovers
    );

    let names = ["m0", "m1"];
    let links = [member(names[0]), member(names[1])];
    let first = blocking::start(links[0].transport(), &role, names[0], options.clone())
        .unwrap_or_else(|e| fail(e.to_string()));
    let mut holder = (0usize, elected(first, Duration::from_secs(30)));
    let mut standby = blocking::start(links[1].transport(), &role, names[1], options.clone())
        .unwrap_or_else(|e| fail(e.to_string()));

    println!(
        "\n{:>3} {:>6}  {:>9} {:>9} {:>10}  {:>8} {:>8} {:>8}",
        "#", "rank", "death->", "lease", "overhead", "wake", "acquire", "claim"
    );
    println!(
        "{:>3} {:>6}  {:>9} {:>9} {:>10}  {:>8} {:>8} {:>8}",
        "", "", "elected", "left", "", "", "", ""
    );
    let stagger_ms = args.stagger.as_millis() as i64;
    let mut overheads = Vec::new();
    let mut death_to_elected = Vec::new();
    let mut parts: [Vec<f64>; 3] = Default::default();
    for round in 1..=args.failovers {
        let (h, leader) = holder;
        let s = 1 - h;
        let rank = wait_standby(&standby, Duration::from_secs(30));
        // Let the standby see at least one renewal of this term before the death.
        let seen_lease = links[h].seen().last_lease.clone();
        let wait_renewal = Instant::now() + args.renew * 3;
        while links[h].seen().last_lease == seen_lease && Instant::now() < wait_renewal {
            std::thread::sleep(Duration::from_millis(5));
        }

        // The holder dies.
        links[h].sever();
        let death = now_ms();
        let Some(lease) = links[h].seen().last_lease.clone() else {
            fail("the holder never committed a lease".to_owned())
        };
        let turn = lease.deadline.0 + rank as i64 * stagger_ms;
        let successor = elected(standby, args.lease * 2 + Duration::from_secs(10));
        let (acquire, claim) = {
            let seen = links[s].seen();
            (seen.acquire.unwrap_or((0, 0)), seen.claim.unwrap_or((0, 0)))
        };
        let committed = claim.1;
        let overhead = committed - turn;
        println!(
            "{round:>3} {rank:>6}  {:>7} ms {:>6} ms {:>7} ms  {:>5} ms {:>5} ms {:>5} ms",
            committed - death,
            lease.deadline.0 - death,
            overhead,
            acquire.0 - turn,
            acquire.1 - acquire.0,
            claim.1 - claim.0
        );
        overheads.push(overhead as f64);
        death_to_elected.push((committed - death) as f64);
        parts[0].push((acquire.0 - turn) as f64);
        parts[1].push((acquire.1 - acquire.0) as f64);
        parts[2].push((claim.1 - claim.0) as f64);

        // The dead holder comes back, learns it was fenced, and joins as the next standby.
        links[h].restore();
        if !leader.done_blocking_timeout(Duration::from_secs(30)) {
            fail(format!(
                "round {round}: the deposed holder never learned it was fenced"
            ));
        }
        if !leader.err().is_some_and(|e| e.is_fenced()) {
            fail(format!(
                "round {round}: the deposed holder ended with {:?}, not fenced",
                leader.err()
            ));
        }
        drop(leader);
        standby = blocking::start(links[h].transport(), &role, names[h], options.clone())
            .unwrap_or_else(|e| fail(e.to_string()));
        holder = (s, successor);
    }

    println!();
    let (median, p90) = summary("overhead (ms)", &overheads, "ms");
    summary("  wake (turn -> acquire)", &parts[0], "ms");
    summary("  acquire (InitProducerId)", &parts[1], "ms");
    summary("  claim (first lease txn)", &parts[2], "ms");
    summary("death -> elected (ms)", &death_to_elected, "ms");

    // A third party's check: one DescribeTransactions round trip, on a connection kept open.
    let third = KafkaTransport::new(config.clone()).unwrap_or_else(|e| fail(e.to_string()));
    let token = holder.1.token();
    let mut latencies = Vec::with_capacity(args.describe_calls);
    for _ in 0..args.describe_calls {
        let started = Instant::now();
        let status = describe_leadership(&third, &role).unwrap_or_else(|e| fail(e.to_string()));
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        if !status.authoritative(&token) {
            fail(format!(
                "describe: {token} is not authoritative: {status:?}"
            ));
        }
    }
    let (describe_median, describe_p90) = summary("describe_leadership (ms)", &latencies, "ms");
    write_csv(
        &args,
        &[
            ("failover_overhead_ms", &overheads),
            ("death_to_elected_ms", &death_to_elected),
            ("describe_ms", &latencies),
        ],
    );

    println!(
        "\nfailover overhead: median {median:.0} ms, p90 {p90:.0} ms (target: median < 150 ms) {}",
        if median < 150.0 { "OK" } else { "ABOVE TARGET" }
    );
    println!(
        "describe_leadership: median {describe_median:.2} ms, p90 {describe_p90:.2} ms (target: median < 5 ms) {}",
        if describe_median < 5.0 { "OK" } else { "ABOVE TARGET" }
    );
    if let Err(e) = holder.1.resign_blocking() {
        fail(format!("resign: {e}"));
    }
    if let Err(e) = standby.resign_blocking() {
        fail(format!("withdrawing the standby: {e}"));
    }
}
