//! The orchestrator: starts member processes, injects seeded faults one at a time, waits after
//! each until the roles settle, and stops after `--failovers N` failovers. Every fault goes to
//! `faults.log` in the run directory with the pairs its target led, for the checker.
//!
//! Faults: SIGKILL of a leader (restarted afterwards, sometimes under the same member id,
//! sometimes under a new one), SIGSTOP of a leader until a successor leads (then SIGCONT: the
//! zombie must learn it was fenced), a resign asked of a leader, SIGKILL and SIGSTOP of a
//! standby, and with three brokers the SIGKILL (and restart) of the broker that leads a role's
//! state partition, its data partition, or that is its transaction coordinator. With
//! `--clock-faults N`, every other fault moves a member's wall clock (run/clock.rs).

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::partition::role_partition;
use kafka_coordination::core::record::Role;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{Clock, SystemClock};

use crate::format::{line, Pair};
use crate::kafka;

mod clock;
mod faults;
mod net;
mod procs;
mod proxy;

/// The orchestrator's settings (from its command line).
#[derive(Clone, Debug)]
pub struct RunArgs {
    pub bootstrap: String,
    pub brokers: usize,
    pub failovers: usize,
    /// With three brokers: every other fault is a broker kill until this many (0: broker
    /// faults are drawn like the others).
    pub broker_kills: usize,
    pub seed: u64,
    pub dir: PathBuf,
    pub members: usize,
    pub roles: usize,
    pub lease: Duration,
    pub renew: Duration,
    pub stagger: Duration,
    pub write_every: Duration,
    pub partitions: i32,
    /// Stop injecting faults after this long, whatever the count.
    pub max_seconds: Option<u64>,
    /// Where `stop-node.sh` and `start-node.sh` are.
    pub scripts: PathBuf,
    /// `--postgres URL`: members also write rows through the database fence.
    pub postgres: Option<String>,
    /// `--clock-faults N`: every other fault is a clock fault until N of them (run/clock.rs).
    pub clock_faults: usize,
    /// Network mode: inject this many network faults (brokers and members in namespaces).
    pub net_faults: usize,
}

/// What the run did, for the verdict.
pub struct RunOutcome {
    pub failovers: usize,
    pub broker_kills: usize,
    pub faults: u64,
    pub seconds: f64,
}

/// splitmix64: a small seeded generator, so a seed replays the same choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// One of `items`, drawn by its weight; `fallback` when the weights are all zero.
    fn weighted<T: Copy>(&mut self, items: &[(T, usize)], fallback: T) -> T {
        let total: usize = items.iter().map(|(_, w)| w).sum();
        let mut x = self.below(total);
        for &(item, w) in items {
            if x < w {
                return item;
            }
            x -= w;
        }
        fallback
    }
    fn millis(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (lo, hi) = (lo.as_millis() as u64, hi.as_millis() as u64);
        Duration::from_millis(lo + self.next() % (hi.saturating_sub(lo) + 1))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    Candidate,
    Standby,
    Leading { pair: Pair, term: i64 },
    Ended,
}

struct Proc {
    instance: u64,
    member: String,
    child: Child,
    stdin: Option<ChildStdin>,
    alive: bool,
    stopped: bool,
    views: HashMap<String, View>,
}

impl Proc {
    fn name(&self) -> String {
        format!("{}#{}", self.member, self.instance)
    }
}

struct Orchestrator {
    args: RunArgs,
    roles: Vec<String>,
    state_topic: String,
    data_topic: String,
    /// `--postgres`: the run's fence and rows tables.
    pg_tables: Option<crate::database::Tables>,
    procs: Vec<Proc>,
    next_instance: u64,
    next_member: u64,
    /// Member ids whose registration stays on the roster with no process behind it.
    ghosts: Vec<String>,
    events: Receiver<(u64, Option<String>)>,
    sender: Sender<(u64, Option<String>)>,
    log: File,
    rng: Rng,
    faults: u64,
    /// Broker faults injected so far.
    broker_kills: usize,
    /// ELECTED events: (when, by the member's clock, role, term).
    elected: Vec<(i64, String, i64)>,
    started: Instant,
    /// Asks the coordinator who holds each role (DescribeTransactions).
    observer: KafkaTransport,
    /// When the orchestrator last acted (a fault, a resume, a restart), by the wall clock.
    last_action: i64,
    /// The clock faults' library and outcomes.
    clocks: clock::Clocks,
    /// Network mode: the namespaces that hold a fault's drop rules until the heal.
    cut_ns: Vec<String>,
    /// Network mode: the proxy every member reaches the brokers through, and its port for
    /// each broker (`host:port`).
    proxy: proxy::Proxy,
    proxied: Vec<(String, u16)>,
    /// Network mode: the seeded order of the first faults' kinds (each kind once).
    net_order: Vec<usize>,
}

fn now_ms() -> i64 {
    SystemClock.now().0
}

/// Runs the chaos: set-up, faults until `failovers` failovers (or the time bound), the members'
/// exit. The checker runs afterwards, on the run directory.
pub fn run(args: RunArgs) -> Result<RunOutcome, String> {
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| format!("cannot create {}: {e}", args.dir.display()))?;
    let log_path = args.dir.join("faults.log");
    if log_path.exists() {
        return Err(format!(
            "{} exists: give each run a directory of its own",
            log_path.display()
        ));
    }
    let log = File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let run_id = format!("{}-{:x}", args.seed, nanos);
    let state_topic = format!("chaos-state-{run_id}");
    let data_topic = format!("chaos-data-{run_id}");
    let roles = pick_roles(&run_id, args.roles, args.partitions)?;
    create_topics(&args, &state_topic, &data_topic)?;
    let pg_tables = match &args.postgres {
        None => None,
        Some(url) => {
            let tables = crate::database::Tables::for_run(&run_id);
            crate::database::create(url, &tables, args.lease.as_millis() as u64)?;
            Some(tables)
        }
    };
    let clocks = clock::Clocks::new(args.clock_faults)?;
    let observer = connect_observer(&args, &state_topic)?;
    let (sender, events) = mpsc::channel();
    let mut o = Orchestrator {
        rng: Rng(args.seed),
        args,
        roles,
        state_topic,
        data_topic,
        pg_tables,
        procs: Vec::new(),
        next_instance: 1,
        next_member: 1,
        ghosts: Vec::new(),
        events,
        sender,
        log,
        faults: 0,
        broker_kills: 0,
        elected: Vec::new(),
        started: Instant::now(),
        observer,
        last_action: now_ms(),
        clocks,
        cut_ns: Vec::new(),
        proxy: proxy::Proxy::default(),
        proxied: Vec::new(),
        net_order: Vec::new(),
    };
    if o.args.net_faults > 0 {
        let brokers: Vec<String> = o.args.bootstrap.split(',').map(str::to_owned).collect();
        o.proxied = o.proxy.start(net::PROXY_IP, &brokers)?;
    }
    o.record_config()?;
    o.announce();
    for _ in 0..o.args.members {
        let id = o.new_member_id();
        o.spawn(id)?;
    }
    let result = o.chaos();
    o.heal_all();
    o.stop_members();
    let failovers = result?;
    Ok(RunOutcome {
        failovers,
        broker_kills: o.broker_kills,
        faults: o.faults,
        seconds: o.started.elapsed().as_secs_f64(),
    })
}

/// Creates the run's state topic (compacted, nothing compacted away during the run) and its
/// data topic.
fn create_topics(args: &RunArgs, state_topic: &str, data_topic: &str) -> Result<(), String> {
    let replication = args.brokers as i32;
    let min_isr = if args.brokers >= 3 { "2" } else { "1" };
    kafka::create_topic(
        &args.bootstrap,
        state_topic,
        args.partitions,
        replication,
        &[
            ("cleanup.policy", "compact"),
            ("min.insync.replicas", min_isr),
            // Nothing is compacted away during a run: the checker reads every lease record.
            ("min.compaction.lag.ms", "604800000"),
        ],
    )?;
    kafka::create_topic(
        &args.bootstrap,
        data_topic,
        args.roles as i32,
        replication,
        &[
            ("cleanup.policy", "delete"),
            ("min.insync.replicas", min_isr),
        ],
    )?;
    Ok(())
}

/// The third party that asks the coordinator who holds each role, once the library accepts
/// the state topic as its own.
fn connect_observer(args: &RunArgs, state_topic: &str) -> Result<KafkaTransport, String> {
    // The library must accept the state topic as its own.
    let config = KafkaConfig::new(args.bootstrap.clone(), args.partitions).with_topic(state_topic);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match KafkaTransport::connect(config.clone()) {
            Ok(t) => return Ok(t),
            Err(e) if Instant::now() < deadline => {
                eprintln!("chaos: waiting for {state_topic}: {e}");
                thread::sleep(Duration::from_millis(500));
            }
            Err(e) => return Err(format!("the library refuses {state_topic}: {e}")),
        }
    }
}

/// Role names of this run whose state partitions differ, so that one role's open lease
/// transaction never holds back another role's reads (a known source of churn the suite does
/// not set out to measure).
fn pick_roles(run_id: &str, count: usize, partitions: i32) -> Result<Vec<String>, String> {
    if count == 0 || count > partitions as usize {
        return Err(format!(
            "--roles must be between 1 and the state topic's partitions ({partitions})"
        ));
    }
    let mut roles: Vec<String> = Vec::new();
    let mut used = Vec::new();
    for i in 0..count {
        for k in 0.. {
            let name = format!("chaos-{run_id}-r{i}-{k}");
            let role = Role::new(name.clone()).map_err(|e| e.to_string())?;
            let p = role_partition(&role, partitions).map_err(|e| e.to_string())?;
            if !used.contains(&p) {
                used.push(p);
                roles.push(name);
                break;
            }
        }
    }
    Ok(roles)
}

impl Orchestrator {
    fn say(&self, text: &str) {
        println!("[{:>7.1}s] {text}", self.started.elapsed().as_secs_f64());
    }

    /// Writes a fault-log line; every line but the final END marks an action of the
    /// orchestrator, after which it waits for the roles to settle.
    fn record(&mut self, event: &str, fields: &[(&str, String)]) -> Result<(), String> {
        self.last_action = now_ms();
        let mut text = line(self.last_action, event, fields);
        text.push('\n');
        self.log
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot write the fault log: {e}"))
    }

    fn new_member_id(&mut self) -> String {
        let id = format!("m{}", self.next_member);
        self.next_member += 1;
        id
    }

    /// The run's settings, first in the fault log, for the checker.
    fn record_config(&mut self) -> Result<(), String> {
        let ms = |d: Duration| d.as_millis().to_string();
        let pg = self.pg_tables.as_ref().map_or_else(Vec::new, |t| {
            vec![("pg_fence", t.fence.clone()), ("pg_rows", t.rows.clone())]
        });
        self.record(
            "CONFIG",
            &[
                ("seed", self.args.seed.to_string()),
                ("brokers", self.args.brokers.to_string()),
                ("roles", self.roles.join(",")),
                ("state_topic", self.state_topic.clone()),
                ("data_topic", self.data_topic.clone()),
                ("partitions", self.args.partitions.to_string()),
                ("members", self.args.members.to_string()),
                ("lease_ms", ms(self.args.lease)),
                ("renew_ms", ms(self.args.renew)),
                ("stagger_ms", ms(self.args.stagger)),
                ("write_ms", ms(self.args.write_every)),
            ]
            .into_iter()
            .chain(pg)
            .collect::<Vec<_>>(),
        )
    }

    /// What the run is about to do.
    fn announce(&self) {
        self.say(&format!(
            "chaos: seed {}, {} broker(s), {} member processes, roles {} (data topic {}, state topic \
             {}); lease {:?}, renew {:?}, stagger {:?}; until {}; \
             journals in {}",
            self.args.seed,
            self.args.brokers,
            self.args.members,
            self.roles.join(", "),
            self.data_topic,
            self.state_topic,
            self.args.lease,
            self.args.renew,
            self.args.stagger,
            if self.args.net_faults > 0 {
                format!("{} network faults", self.args.net_faults)
            } else {
                format!(
                    "{} failovers and {} broker kills",
                    self.args.failovers, self.args.broker_kills
                )
            },
            self.args.dir.display()
        ));
    }
}
