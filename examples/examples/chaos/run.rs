//! The orchestrator: starts member processes, injects seeded faults one at a time, waits after
//! each until the roles settle, and stops after `--failovers N` failovers. Every fault goes to
//! `faults.log` in the run directory with the pairs its target led, for the checker.
//!
//! Faults: SIGKILL of a leader (restarted afterwards, sometimes under the same member id,
//! sometimes under a new one), SIGSTOP of a leader until a successor leads (then SIGCONT: the
//! zombie must learn it was fenced), a resign asked of a leader, SIGKILL and SIGSTOP of a
//! standby, and with three brokers the SIGKILL (and restart) of the broker that leads a role's
//! state partition, its data partition, or that is its transaction coordinator.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use kafka_coordination::core::partition::role_partition;
use kafka_coordination::core::record::Role;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{describe_leadership, Clock, FencingToken, SystemClock};

use crate::format::{line, Line, Pair};
use crate::kafka;
use crate::liveness::FaultKind;

/// The orchestrator's settings (from its command line).
#[derive(Clone, Debug)]
pub struct RunArgs {
    pub bootstrap: String,
    pub brokers: usize,
    pub failovers: usize,
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
}

/// What the run did, for the verdict.
pub struct RunOutcome {
    pub failovers: usize,
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
    /// ELECTED events: (when, by the member's clock, role, term).
    elected: Vec<(i64, String, i64)>,
    started: Instant,
    /// Asks the coordinator who holds each role (DescribeTransactions).
    observer: KafkaTransport,
    /// When the orchestrator last acted (a fault, a resume, a restart), by the wall clock.
    last_action: i64,
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
    let replication = args.brokers as i32;
    let min_isr = if args.brokers >= 3 { "2" } else { "1" };
    kafka::create_topic(
        &args.bootstrap,
        &state_topic,
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
        &data_topic,
        args.roles as i32,
        replication,
        &[
            ("cleanup.policy", "delete"),
            ("min.insync.replicas", min_isr),
        ],
    )?;
    // The library must accept the state topic as its own.
    let config = KafkaConfig::new(args.bootstrap.clone(), args.partitions).with_topic(&state_topic);
    let deadline = Instant::now() + Duration::from_secs(60);
    let observer = loop {
        match KafkaTransport::connect(config.clone()) {
            Ok(t) => break t,
            Err(e) if Instant::now() < deadline => {
                eprintln!("chaos: waiting for {state_topic}: {e}");
                thread::sleep(Duration::from_millis(500));
            }
            Err(e) => return Err(format!("the library refuses {state_topic}: {e}")),
        }
    };
    let (sender, events) = mpsc::channel();
    let mut o = Orchestrator {
        rng: Rng(args.seed),
        args,
        roles,
        state_topic,
        data_topic,
        procs: Vec::new(),
        next_instance: 1,
        next_member: 1,
        ghosts: Vec::new(),
        events,
        sender,
        log,
        faults: 0,
        elected: Vec::new(),
        started: Instant::now(),
        observer,
        last_action: now_ms(),
    };
    let ms = |d: Duration| d.as_millis().to_string();
    o.record(
        "CONFIG",
        &[
            ("seed", o.args.seed.to_string()),
            ("brokers", o.args.brokers.to_string()),
            ("roles", o.roles.join(",")),
            ("state_topic", o.state_topic.clone()),
            ("data_topic", o.data_topic.clone()),
            ("partitions", o.args.partitions.to_string()),
            ("members", o.args.members.to_string()),
            ("lease_ms", ms(o.args.lease)),
            ("renew_ms", ms(o.args.renew)),
            ("stagger_ms", ms(o.args.stagger)),
            ("write_ms", ms(o.args.write_every)),
        ],
    )?;
    o.say(&format!(
        "chaos: seed {}, {} broker(s), {} member processes, roles {} (data topic {}, state topic \
         {}); lease {:?}, renew {:?}, stagger {:?}; until {} failovers; journals in {}",
        o.args.seed,
        o.args.brokers,
        o.args.members,
        o.roles.join(", "),
        o.data_topic,
        o.state_topic,
        o.args.lease,
        o.args.renew,
        o.args.stagger,
        o.args.failovers,
        o.args.dir.display()
    ));
    for _ in 0..o.args.members {
        let id = o.new_member_id();
        o.spawn(id)?;
    }
    let result = o.chaos();
    o.stop_members();
    let failovers = result?;
    Ok(RunOutcome {
        failovers,
        faults: o.faults,
        seconds: o.started.elapsed().as_secs_f64(),
    })
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

    fn spawn(&mut self, member: String) -> Result<(), String> {
        let instance = self.next_instance;
        self.next_instance += 1;
        let exe = std::env::current_exe().map_err(|e| format!("the suite's own path: {e}"))?;
        let stderr = File::create(self.args.dir.join(format!("member-{instance}.stderr")))
            .map_err(|e| format!("cannot create a member's stderr file: {e}"))?;
        let ms = |d: Duration| d.as_millis().to_string();
        let mut child = Command::new(exe)
            .arg("member")
            .args(["--member", &member])
            .args(["--instance", &instance.to_string()])
            .args(["--roles", &self.roles.join(",")])
            .args(["--bootstrap", &self.args.bootstrap])
            .args(["--state-topic", &self.state_topic])
            .args(["--data-topic", &self.data_topic])
            .args(["--partitions", &self.args.partitions.to_string()])
            .args(["--lease-ms", &ms(self.args.lease)])
            .args(["--renew-ms", &ms(self.args.renew)])
            .args(["--stagger-ms", &ms(self.args.stagger)])
            .args(["--write-ms", &ms(self.args.write_every)])
            .arg("--journal")
            .arg(self.args.dir.join(format!("journal-{instance}.log")))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start a member process: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or("the member's stdout is not piped")?;
        let tx = self.sender.clone();
        thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send((instance, Some(l))).is_err() {
                    return;
                }
            }
            let _ = tx.send((instance, None));
        });
        let stdin = child.stdin.take();
        self.record(
            "SPAWN",
            &[
                ("instance", instance.to_string()),
                ("member", member.clone()),
                ("pid", child.id().to_string()),
            ],
        )?;
        self.procs.push(Proc {
            instance,
            member,
            child,
            stdin,
            alive: true,
            stopped: false,
            views: HashMap::new(),
        });
        Ok(())
    }

    /// Takes in the members' reports until `until`.
    fn pump(&mut self, until: Instant) {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok((instance, text)) => self.take(instance, text),
                Err(_) => return,
            }
            if Instant::now() >= until {
                // Drain what is already there without waiting.
                while let Ok((instance, text)) = self.events.try_recv() {
                    self.take(instance, text);
                }
                return;
            }
        }
    }

    fn take(&mut self, instance: u64, text: Option<String>) {
        let Some(p) = self.procs.iter_mut().find(|p| p.instance == instance) else {
            return;
        };
        let Some(text) = text else {
            p.alive = false;
            return;
        };
        let Ok(l) = Line::parse(&text) else {
            return;
        };
        let Some(role) = l.fields.get("role").map(str::to_owned) else {
            return;
        };
        let view = match l.event.as_str() {
            "CANDIDATE" | "CANDIDACY_FAILED" => View::Candidate,
            "STANDBY" => View::Standby,
            "ELECTED" => match (l.fields.pair("pair"), l.fields.number::<i64>("term")) {
                (Ok(pair), Ok(term)) => {
                    self.elected.push((l.at, role.clone(), term));
                    View::Leading { pair, term }
                }
                _ => return,
            },
            "ENDED" | "RESIGNED" => View::Ended,
            _ => return,
        };
        p.views.insert(role, view);
    }

    /// The live member that leads `role` with the largest term: (index, pair, term).
    fn leader_of(&self, role: &str) -> Option<(usize, Pair, i64)> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.alive)
            .filter_map(|(i, p)| match p.views.get(role) {
                Some(View::Leading { pair, term }) => Some((i, *pair, *term)),
                _ => None,
            })
            .max_by_key(|(_, _, term)| *term)
    }

    /// Every role has a running leader whose pair is the coordinator's current one, and every
    /// running member is its leader or a standby.
    fn unready(&self) -> Option<String> {
        for role in &self.roles {
            let Some((i, pair, term)) = self.leader_of(role) else {
                return Some(format!("role {role} has no leader"));
            };
            if self.procs[i].stopped {
                return Some(format!("the leader of {role} is stopped"));
            }
            for p in self.procs.iter().filter(|p| p.alive && !p.stopped) {
                match p.views.get(role) {
                    Some(View::Standby) => {}
                    Some(View::Leading { term: t, .. }) if *t == term => {}
                    other => {
                        return Some(format!("{} is {other:?} for {role}", p.name()));
                    }
                }
            }
            let token = FencingToken::new(pair.producer_id, pair.epoch);
            match describe_leadership(&self.observer, role) {
                Ok(status) if status.authoritative(&token) => {}
                Ok(status) => {
                    return Some(format!(
                        "{} believes it leads {role} with {pair}, but the coordinator's pair is \
                         {}",
                        self.procs[i].name(),
                        status.token
                    ))
                }
                Err(e) => return Some(format!("describing {role}: {e}")),
            }
        }
        None
    }

    /// Takes in reports until `done` holds (true) or `within` passes (false).
    fn wait_for(&mut self, within: Duration, mut done: impl FnMut(&Orchestrator) -> bool) -> bool {
        let deadline = Instant::now() + within;
        loop {
            // Decide on everything the members have reported so far.
            self.pump(Instant::now());
            if done(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.pump((Instant::now() + Duration::from_millis(50)).min(deadline));
        }
    }

    /// Waits until neither an election nor an action of the orchestrator (a resume, a
    /// restart) has happened for a lease plus a stagger (at most 60 s), so that an extra short
    /// term after a failover, or the doings of a resumed member, happen before the next fault.
    fn quiet(&mut self) {
        let quiet = (self.args.lease + self.args.stagger).as_millis() as i64;
        let settled = self.wait_for(Duration::from_secs(60), |o| {
            let last = o
                .elected
                .last()
                .map_or(o.last_action, |(at, _, _)| (*at).max(o.last_action));
            now_ms() - last >= quiet
        });
        if !settled {
            self.say("      elections went on for 60 s; moving on");
        }
    }

    fn pause(&mut self, d: Duration) {
        self.pump(Instant::now() + d);
    }

    fn signal(&self, index: usize, signal: &str) -> Result<(), String> {
        let pid = self.procs[index].child.id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .map_err(|e| format!("kill -{signal} {pid}: {e}"))?;
        if !status.success() {
            return Err(format!("kill -{signal} {pid} failed: {status}"));
        }
        Ok(())
    }

    fn sigkill(&mut self, index: usize) {
        let p = &mut self.procs[index];
        let _ = p.child.kill();
        let _ = p.child.wait();
        p.alive = false;
        p.stdin = None;
    }

    /// How long a failover may take at most before the run calls it stuck.
    fn failover_bound(&self) -> Duration {
        let ranks = (self.procs.len() + self.ghosts.len()) as u32;
        self.args.lease * 2 + self.args.stagger * ranks + Duration::from_secs(30)
    }

    /// Restarts a killed member: under its own id, a new id (at most two ghosts on the
    /// roster) or a ghost's id (which replaces that ghost's registration).
    fn restart(&mut self, killed: String) -> Result<(), String> {
        self.ghosts.push(killed.clone());
        let mut options = vec![killed.clone()];
        if self.ghosts.len() <= 2 {
            options.push(String::new());
        }
        options.extend(self.ghosts.iter().filter(|g| **g != killed).cloned());
        let pick = options.swap_remove(self.rng.below(options.len()));
        let id = if pick.is_empty() {
            self.new_member_id()
        } else {
            self.ghosts.retain(|g| *g != pick);
            pick
        };
        self.spawn(id)
    }

    fn fault_line(
        &mut self,
        kind: FaultKind,
        target: Option<usize>,
        led: &[(String, Pair)],
        extra: &[(&str, String)],
    ) -> Result<(), String> {
        self.faults += 1;
        let mut fields = vec![
            ("n", self.faults.to_string()),
            ("kind", kind.name().to_owned()),
        ];
        if let Some(i) = target {
            fields.push(("instance", self.procs[i].instance.to_string()));
            fields.push(("member", self.procs[i].member.clone()));
        }
        let led_text = led
            .iter()
            .map(|(r, p)| format!("{r}:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        fields.push((
            "led",
            if led_text.is_empty() {
                "-".to_owned()
            } else {
                led_text
            },
        ));
        fields.extend(extra.iter().cloned());
        self.record("FAULT", &fields)
    }

    fn short(&self, role: &str) -> String {
        self.roles
            .iter()
            .position(|r| r == role)
            .map_or_else(|| role.to_owned(), |i| format!("r{i}"))
    }

    /// Waits until each (role, old term) has a leader with a larger term; returns how many do.
    fn await_successors(&mut self, old: &[(String, i64)]) -> usize {
        let bound = self.failover_bound();
        let started = Instant::now();
        self.wait_for(bound, |o| {
            old.iter()
                .all(|(r, t)| o.leader_of(r).is_some_and(|(_, _, term)| term > *t))
        });
        let mut moved = 0;
        for (role, t) in old {
            match self.leader_of(role) {
                Some((i, pair, term)) if term > *t => {
                    moved += 1;
                    self.say(&format!(
                        "      {}: {} leads with {pair}, term {term} ({:.1} s after the fault)",
                        self.short(role),
                        self.procs[i].name(),
                        started.elapsed().as_secs_f64()
                    ));
                }
                _ => self.say(&format!(
                    "      {}: NO successor within {bound:?}",
                    self.short(role)
                )),
            }
        }
        moved
    }

    fn pick_kind(&mut self) -> FaultKind {
        let mut weights = vec![
            (FaultKind::KillLeader, 3),
            (FaultKind::StopLeader, 2),
            (FaultKind::ResignLeader, 2),
            (FaultKind::KillStandby, 1),
            (FaultKind::StopStandby, 1),
        ];
        if self.args.brokers >= 3 {
            weights.extend([
                (FaultKind::KillStateLeaderBroker, 1),
                (FaultKind::KillDataLeaderBroker, 1),
                (FaultKind::KillCoordinatorBroker, 1),
            ]);
        }
        let total: usize = weights.iter().map(|(_, w)| w).sum();
        let mut x = self.rng.below(total);
        for (k, w) in weights {
            if x < w {
                return k;
            }
            x -= w;
        }
        FaultKind::KillLeader
    }

    /// Injects faults until enough failovers happened; returns their count.
    fn chaos(&mut self) -> Result<usize, String> {
        let mut failovers = 0;
        while failovers < self.args.failovers {
            if let Some(max) = self.args.max_seconds {
                if self.started.elapsed() >= Duration::from_secs(max) {
                    self.say(&format!(
                        "time bound of {max} s reached after {failovers} failovers"
                    ));
                    break;
                }
            }
            if !self.wait_for(Duration::from_secs(120), |o| o.unready().is_none()) {
                let why = self.unready().unwrap_or_default();
                self.say(&format!(
                    "not settled after 120 s ({why}); injecting anyway"
                ));
                self.record("STALL", &[("error", why)])?;
            }
            let kind = self.pick_kind();
            failovers += match kind {
                k if k.at_leader() => self.leader_fault(k)?,
                k if k.at_broker() => self.broker_fault(k)?,
                k => self.standby_fault(k)?,
            };
        }
        Ok(failovers)
    }

    fn leader_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let role = self.roles[self.rng.below(self.roles.len())].clone();
        let Some((target, pair, term)) = self.leader_of(&role) else {
            return Ok(0);
        };
        // A kill or a stop ends every term the process holds; a resign only the one asked for.
        let led: Vec<(String, Pair, i64)> = if kind == FaultKind::ResignLeader {
            vec![(role.clone(), pair, term)]
        } else {
            self.roles
                .iter()
                .filter_map(|r| match self.leader_of(r) {
                    Some((i, p, t)) if i == target => Some((r.clone(), p, t)),
                    _ => None,
                })
                .collect()
        };
        let pairs: Vec<(String, Pair)> = led.iter().map(|(r, p, _)| (r.clone(), *p)).collect();
        let old: Vec<(String, i64)> = led.iter().map(|(r, _, t)| (r.clone(), *t)).collect();
        let what = led
            .iter()
            .map(|(r, p, _)| format!("{} {p}", self.short(r)))
            .collect::<Vec<_>>()
            .join(", ");
        self.fault_line(kind, Some(target), &pairs, &[])?;
        self.say(&format!(
            "#{} {} {} (leads {what})",
            self.faults,
            kind.name(),
            self.procs[target].name()
        ));
        match kind {
            FaultKind::KillLeader => {
                self.sigkill(target);
                let moved = self.await_successors(&old);
                // Restarted at once, as a supervisor would; the quiet covers its start too.
                let killed = self.procs[target].member.clone();
                self.restart(killed)?;
                self.quiet();
                Ok(moved)
            }
            FaultKind::StopLeader => {
                self.signal(target, "STOP")?;
                self.procs[target].stopped = true;
                let moved = self.await_successors(&old);
                self.quiet();
                self.signal(target, "CONT")?;
                self.procs[target].stopped = false;
                self.record(
                    "CONT",
                    &[("instance", self.procs[target].instance.to_string())],
                )?;
                // The zombie learns it was fenced; what its other candidacies do comes before
                // the next fault.
                self.quiet();
                Ok(moved)
            }
            _ => {
                if let Some(stdin) = self.procs[target].stdin.as_mut() {
                    writeln!(stdin, "resign {role} {pair}")
                        .and_then(|_| stdin.flush())
                        .map_err(|e| {
                            format!("asking {} to resign: {e}", self.procs[target].name())
                        })?;
                }
                let moved = self.await_successors(&old);
                self.quiet();
                Ok(moved)
            }
        }
    }

    fn standby_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let standbys: Vec<usize> = (0..self.procs.len())
            .filter(|&i| {
                let p = &self.procs[i];
                p.alive
                    && !p.stopped
                    && self
                        .roles
                        .iter()
                        .all(|r| self.leader_of(r).is_none_or(|(l, _, _)| l != i))
            })
            .collect();
        if standbys.is_empty() {
            return self.leader_fault(FaultKind::KillLeader);
        }
        let target = standbys[self.rng.below(standbys.len())];
        self.fault_line(kind, Some(target), &[], &[])?;
        self.say(&format!(
            "#{} {} {}",
            self.faults,
            kind.name(),
            self.procs[target].name()
        ));
        let before = self.elected.len();
        if kind == FaultKind::KillStandby {
            self.sigkill(target);
            let delay = self.rng.millis(Duration::ZERO, self.args.lease);
            self.pause(delay);
            let killed = self.procs[target].member.clone();
            self.restart(killed)?;
        } else {
            self.signal(target, "STOP")?;
            self.procs[target].stopped = true;
            let hold = self.rng.millis(self.args.lease / 2, self.args.lease * 2);
            self.pause(hold);
            self.signal(target, "CONT")?;
            self.procs[target].stopped = false;
            self.record(
                "CONT",
                &[("instance", self.procs[target].instance.to_string())],
            )?;
        }
        self.quiet();
        if self.elected.len() > before {
            self.say(&format!(
                "      {} election(s) although no leader was hit",
                self.elected.len() - before
            ));
        }
        Ok(0)
    }

    fn broker_fault(&mut self, kind: FaultKind) -> Result<usize, String> {
        let index = self.rng.below(self.roles.len());
        let role = self.roles[index].clone();
        let md = kafka::metadata(&self.args.bootstrap)?;
        let node = match kind {
            FaultKind::KillStateLeaderBroker => {
                let r = Role::new(role.clone()).map_err(|e| e.to_string())?;
                let p = role_partition(&r, self.args.partitions).map_err(|e| e.to_string())?;
                kafka::partition_leader(&md, &self.state_topic, p)
            }
            FaultKind::KillDataLeaderBroker => {
                kafka::partition_leader(&md, &self.data_topic, index as i32)
            }
            _ => kafka::coordinator_of(&md, &role),
        };
        let Some(node) = node else {
            self.say(&format!(
                "{}: no broker found for {}; skipped",
                kind.name(),
                self.short(&role)
            ));
            return Ok(0);
        };
        let terms: Vec<(String, i64)> = self
            .roles
            .iter()
            .map(|r| (r.clone(), self.leader_of(r).map_or(-1, |(_, _, t)| t)))
            .collect();
        self.fault_line(
            kind,
            None,
            &[],
            &[("broker", node.to_string()), ("role", role.clone())],
        )?;
        self.say(&format!(
            "#{} {} (role {}): broker {node}",
            self.faults,
            kind.name(),
            self.short(&role)
        ));
        self.node_script("stop-node.sh", &["--kill", &node.to_string()])?;
        let down = self.rng.millis(
            Duration::from_secs(1),
            self.args.lease * 2 + Duration::from_secs(2),
        );
        self.pause(down);
        self.node_script("start-node.sh", &[&node.to_string()])?;
        self.record("BROKER_STARTED", &[("broker", node.to_string())])?;
        let topics = [
            self.state_topic.clone(),
            self.data_topic.clone(),
            "__transaction_state".to_owned(),
        ];
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let md = kafka::metadata(&self.args.bootstrap);
            let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            if md.is_ok_and(|md| kafka::fully_replicated(&md, &refs, self.args.brokers)) {
                break;
            }
            if Instant::now() >= deadline {
                self.say(
                    "the restarted broker did not rejoin every in-sync replica set within 180 s",
                );
                break;
            }
            self.pause(Duration::from_millis(500));
        }
        self.quiet();
        let moved = terms
            .iter()
            .filter(|(r, t)| self.leader_of(r).is_some_and(|(_, _, term)| term > *t))
            .count();
        if moved > 0 {
            self.say(&format!("      {moved} role(s) changed leader"));
        }
        Ok(moved)
    }

    fn node_script(&self, script: &str, args: &[&str]) -> Result<(), String> {
        let path = self.args.scripts.join(script);
        let status = Command::new(&path)
            .args(args)
            .status()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if !status.success() {
            return Err(format!(
                "{} {} failed: {status}",
                path.display(),
                args.join(" ")
            ));
        }
        Ok(())
    }

    /// Asks every member to exit (resigning what it leads), and kills those that do not.
    fn stop_members(&mut self) {
        let _ = self.record("END", &[("faults", self.faults.to_string())]);
        for i in 0..self.procs.len() {
            if !self.procs[i].alive {
                continue;
            }
            if self.procs[i].stopped {
                let _ = self.signal(i, "CONT");
                self.procs[i].stopped = false;
            }
            if let Some(mut stdin) = self.procs[i].stdin.take() {
                let _ = writeln!(stdin, "exit");
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for p in &mut self.procs {
            loop {
                match p.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        eprintln!("chaos: {} did not exit in time; killing it", p.name());
                        let _ = p.child.kill();
                        let _ = p.child.wait();
                        break;
                    }
                    Ok(None) => thread::sleep(Duration::from_millis(50)),
                }
            }
            p.alive = false;
        }
    }
}
