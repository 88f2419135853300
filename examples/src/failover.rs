//! `cargo run --example failover`: the whole life of one role, printed as a timeline.
//!
//! Three members (`--members N`) of one role, each on the blocking driver (its own thread),
//! with the real system clock and short timings. By default they share the embedded
//! [`MemoryBroker`](kafka_coordination::memory::MemoryBroker); built with `--features kafka`
//! and given `--bootstrap HOST:PORT`, each member talks to a real Kafka cluster through its own
//! `KafkaTransport` instead.
//!
//! With `--virtual-time` (the embedded broker only) the same timeline runs on a
//! [`ManualClock`](kafka_coordination::ManualClock) that the scenario moves in steps (see
//! [`Time`]): it takes no real time, and every wait is bounded in virtual time, so its verdict
//! does not depend on how fast threads are scheduled. The tests run it that way.
//!
//! The timeline:
//! 1. the members register; the first is elected, the others wait with their ranks;
//! 2. the leader renews its lease with the same token;
//! 3. the leader is **killed**: its [`Link`] fails every call, and it does not resign;
//! 4. the first standby takes over after the old lease deadline (plus its rank's stagger), with a
//!    new token, while the old leader still believes it leads;
//! 5. a third party asks the coordinator who is authoritative: the old token is not, the new one
//!    is, `NO_EPOCH` never is; and a write of the old leader with its old token through
//!    `Wait::write_lease` is refused by the broker, although the old leader does not know yet
//!    that it was deposed;
//! 6. the old leader's link comes back: its renewal is fenced by the broker and `done` fires
//!    with [`Error::Fenced`];
//! 7. the new leader resigns: the next member takes over at once, well before the deadline;
//! 8. everyone leaves; the roster is empty and the lease cleared.
//!
//! Every step is checked: [`run`] returns an error (and the program exits non-zero) when
//! anything does not happen as expected, so the example doubles as a smoke test.

use std::time::Duration;

use kafka_coordination::blocking;
use kafka_coordination::core::machine::Status;
use kafka_coordination::core::partition::role_partition;
use kafka_coordination::core::record::{Key, Lease, MemberId, Role};
use kafka_coordination::core::state::LeaseEntry;
use kafka_coordination::core::{RoleState, UnixMillis};
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::describe::{describe_leadership, describe_role_state};
use kafka_coordination::leadership::{Candidacy, Leadership, Snapshot};
use kafka_coordination::transport::Transport;
use kafka_coordination::transport::Wait;
use kafka_coordination::{Error, FencingToken, LeadershipStatus, Options};

use crate::args::{ensure, parse, Failure};
use crate::time::Time;
use crate::timeline::{offset, Timeline};

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example failover [--features kafka] -- [options]

  --members N        members of the role (at least 3; default 3)
  --lease-ms MS      lease duration (default 2000)
  --renew-ms MS      renew interval, shorter than the lease (default 500)
  --stagger-ms MS    challenge stagger between ranks (default 300)
  --partitions N     partitions of __coordination_state (default 16; with Kafka, the topic's real count)
  --bootstrap H:P    run against a Kafka cluster instead of the embedded MemoryBroker
                     (needs the `kafka` feature; the topic is created if missing)
  --replication N    replication factor when the topic is created on Kafka (default 1)
  --virtual-time     run on a manual clock moved in steps instead of the system clock: the same
                     timeline in no real time (embedded broker only; what the tests run)
  -h, --help         this text";

/// What the example runs with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// How many members compete for the role (at least 3: one dies, one resigns, one is left).
    pub members: usize,
    /// The lease duration.
    pub lease: Duration,
    /// The renew interval.
    pub renew: Duration,
    /// The challenge stagger.
    pub stagger: Duration,
    /// The partition count of `__coordination_state`.
    pub partitions: i32,
    /// A Kafka cluster to run against instead of the embedded broker.
    pub bootstrap: Option<String>,
    /// The replication factor used when the example creates the state topic on Kafka.
    pub replication: i32,
    /// Run on a manual clock moved in steps (virtual time) instead of the system clock.
    pub virtual_time: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            members: 3,
            lease: Duration::from_millis(2000),
            renew: Duration::from_millis(500),
            stagger: Duration::from_millis(300),
            partitions: 16,
            bootstrap: None,
            replication: 1,
            virtual_time: false,
        }
    }
}

impl Config {
    /// Parses the command line (without the program name). `Ok(None)` means `--help`.
    pub fn from_args(args: &[String]) -> Result<Option<Config>, Failure> {
        let p = parse(
            args,
            &[
                "--members",
                "--lease-ms",
                "--renew-ms",
                "--stagger-ms",
                "--partitions",
                "--bootstrap",
                "--replication",
            ],
            &["--virtual-time"],
            USAGE,
        )?;
        if p.help() {
            return Ok(None);
        }
        let d = Config::default();
        let ms = |name: &str, default: Duration| -> Result<Duration, Failure> {
            let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
            p.positive(name, default).map(Duration::from_millis)
        };
        let small = |name: &str, default: u64| -> Result<i32, Failure> {
            let n = p.positive(name, default)?;
            i32::try_from(n).map_err(|_| Failure::Usage(format!("{name} is too large: {n}")))
        };
        let members = p.positive("--members", 3)?;
        let config = Config {
            members: usize::try_from(members).unwrap_or(usize::MAX),
            lease: ms("--lease-ms", d.lease)?,
            renew: ms("--renew-ms", d.renew)?,
            stagger: ms("--stagger-ms", d.stagger)?,
            partitions: small("--partitions", 16)?,
            bootstrap: p.value("--bootstrap").map(str::to_owned),
            replication: small("--replication", 1)?,
            virtual_time: p.switch("--virtual-time"),
        };
        if !(3..=20).contains(&config.members) {
            return Err(Failure::Usage(format!(
                "--members must be between 3 and 20 (one dies, one resigns, one takes over), got {members}"
            )));
        }
        if config.renew >= config.lease {
            return Err(Failure::Usage(format!(
                "--renew-ms ({}) must be shorter than --lease-ms ({})",
                config.renew.as_millis(),
                config.lease.as_millis()
            )));
        }
        if config
            .bootstrap
            .as_deref()
            .is_some_and(|b| b.trim().is_empty())
        {
            return Err(Failure::Usage("--bootstrap needs HOST:PORT".to_owned()));
        }
        if config.virtual_time && config.bootstrap.is_some() {
            return Err(Failure::Usage(
                "--virtual-time runs on the embedded broker only: a Kafka cluster keeps real time"
                    .to_owned(),
            ));
        }
        Ok(Some(config))
    }

    fn options(&self) -> Options {
        Options::new()
            .lease_duration(self.lease)
            .renew_interval(self.renew)
            .challenge_stagger(self.stagger)
    }

    /// The time the scenario runs in: the system clock, or with `--virtual-time` a manual clock
    /// moved in steps that divide the lease, the renew interval and the stagger (at most
    /// 100 ms), so every renewal and challenge happens at its exact instant.
    pub fn time(&self) -> Time {
        if !self.virtual_time {
            return Time::real();
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let step = [ms(self.renew), ms(self.stagger)]
            .into_iter()
            .fold(ms(self.lease), gcd)
            .clamp(1, 100);
        Time::virtual_time(Duration::from_millis(step))
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Runs the example with command-line `args`, printing to `out`.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    let Some(config) = Config::from_args(args)? else {
        out.note(USAGE);
        return Ok(());
    };
    run_with(&config, out)
}

/// Runs the example with `config`, printing to `out`.
pub fn run_with(config: &Config, out: &Timeline) -> Result<(), Failure> {
    match &config.bootstrap {
        None => run_memory(config, out),
        Some(bootstrap) => run_kafka(config, bootstrap, out),
    }
}

fn run_memory(config: &Config, out: &Timeline) -> Result<(), Failure> {
    use kafka_coordination::memory::MemoryBroker;
    let time = config.time();
    let broker = MemoryBroker::new(config.partitions, time.clock());
    let backend = format!(
        "the embedded MemoryBroker ({} partitions)",
        config.partitions
    );
    scenario(
        config,
        &time,
        &time.timeline(out),
        "orders",
        &backend,
        broker.transport("observer"),
        |name| Ok(broker.transport(name)),
    )
}

#[cfg(feature = "kafka")]
fn run_kafka(config: &Config, bootstrap: &str, out: &Timeline) -> Result<(), Failure> {
    use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
    let kafka = |client: &str| -> Result<KafkaTransport, Failure> {
        let c = KafkaConfig::new(bootstrap, config.partitions)
            .with_client_id(format!("failover-example-{client}"));
        KafkaTransport::new(c).map_err(|e| Failure::Failed(format!("Kafka transport: {e}")))
    };
    let observer = kafka("observer")?;
    let min_isr = (config.replication > 1).then_some(2);
    let created = observer
        .create_topic(config.replication, min_isr)
        .map_err(|e| Failure::Failed(format!("the state topic on {bootstrap}: {e}")))?;
    let topic = observer.config().topic().to_owned();
    let backend = format!(
        "Kafka at {bootstrap} (topic {topic}, {} partitions, {})",
        config.partitions,
        if created { "created now" } else { "existing" }
    );
    // A role name no earlier run used, so every run starts from an empty roster.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let role = format!("failover-example-{}-{nanos:x}", std::process::id());
    scenario(config, &Time::real(), out, &role, &backend, observer, kafka)
}

#[cfg(not(feature = "kafka"))]
fn run_kafka(_config: &Config, bootstrap: &str, _out: &Timeline) -> Result<(), Failure> {
    Err(Failure::Usage(format!(
        "--bootstrap {bootstrap} needs the Kafka transport, which this build does not include.\n\
         Build with the `kafka` feature:\n  \
         cargo run --example failover --features kafka -- --bootstrap {bootstrap}"
    )))
}

/// One member: its link (to kill it) and its handle.
struct Member<T> {
    name: String,
    link: Link<T>,
    candidacy: Option<Candidacy>,
    leadership: Option<Leadership>,
}

impl<T> Member<T> {
    /// What the member's driver last reported; `None` once the member holds no handle.
    fn snapshot(&self) -> Option<Snapshot> {
        match (&self.candidacy, &self.leadership) {
            (Some(c), _) => Some(c.snapshot()),
            (None, Some(l)) => Some(l.snapshot()),
            (None, None) => None,
        }
    }

    /// Its status; a member without a handle counts as ended.
    fn status(&self) -> Status {
        self.snapshot().map_or(Status::Ended, |s| s.status)
    }

    /// Its rank among the standbys.
    fn rank(&self) -> Option<usize> {
        self.snapshot().and_then(|s| s.rank)
    }

    fn leadership(&self) -> Result<&Leadership, Failure> {
        self.leadership
            .as_ref()
            .ok_or_else(|| Failure::Failed(format!("{} holds no leadership", self.name)))
    }

    /// Waits (bounded) until this member is elected; returns its token and when.
    fn elected(
        &mut self,
        time: &Time,
        within: Duration,
    ) -> Result<(FencingToken, UnixMillis), Failure> {
        let Some(candidacy) = self.candidacy.take() else {
            return Err(Failure::Failed(format!("{} is not a candidate", self.name)));
        };
        match time.elected(candidacy, within) {
            Ok(Ok(leadership)) => {
                let at = time.now();
                let token = leadership.token();
                self.leadership = Some(leadership);
                Ok((token, at))
            }
            Ok(Err(e)) => Err(Failure::Failed(format!(
                "{}'s candidacy failed: {e}",
                self.name
            ))),
            Err(candidacy) => {
                let s = candidacy.snapshot();
                self.candidacy = Some(candidacy);
                Err(Failure::Failed(format!(
                    "{} was not elected within {within:?} (status {:?}, rank {:?})",
                    self.name, s.status, s.rank
                )))
            }
        }
    }
}

/// The scenario, on any transport: `observer` is the third party's transport, `connect` makes
/// each member's own.
fn scenario<T, F>(
    config: &Config,
    time: &Time,
    out: &Timeline,
    role: &str,
    backend: &str,
    observer: T,
    connect: F,
) -> Result<(), Failure>
where
    T: Transport + Send + Sync + 'static,
    F: Fn(&str) -> Result<T, Failure>,
{
    let scene = Scene::new(config, time, out, role, observer)?;
    scene.announce(backend);
    let mut members = scene.register(&connect)?;
    let (first, lease) = scene.check_roster(&members)?;
    scene.check_renewal(first, &lease)?;
    let (deadline, successor_rank) = scene.kill_leader(&members, first)?;
    let second = scene.take_over(&mut members, first, deadline, successor_rank)?;
    scene.ask_the_coordinator(first, second)?;
    scene.refuse_the_zombie(&members, first, second)?;
    scene.fence_the_zombie(&members, first)?;
    scene.hand_over(&mut members, first, second)?;
    scene.leave(&mut members)?;
    scene.finish();
    Ok(())
}

/// A duration in whole milliseconds, for the timeline.
fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// What every step of the scenario shares: the settings, the clock, the timeline, the role,
/// the third party's transport and the bounds of the waits.
struct Scene<'a, T> {
    config: &'a Config,
    time: &'a Time,
    out: &'a Timeline,
    role: &'a str,
    role_id: Role,
    partition: i32,
    observer: T,
    /// The clock instant the timeline started at: instants print as offsets from it.
    start: i64,
    /// Slack on every wait, for slow machines (virtual time needs none, but the same bounds do
    /// no harm there).
    slack: Duration,
    /// The longest a member may wait for its turn: a lease, every rank's stagger, and slack.
    turn_bound: Duration,
}

impl<'a, T> Scene<'a, T>
where
    T: Transport + Send + Sync + 'static,
{
    fn new(
        config: &'a Config,
        time: &'a Time,
        out: &'a Timeline,
        role: &'a str,
        observer: T,
    ) -> Result<Self, Failure> {
        // Clock instants print as offsets from the timeline's start.
        let start = time.now().0 - i64::try_from(out.elapsed().as_millis()).unwrap_or(0);
        let role_id =
            Role::new(role).map_err(|e| Failure::Failed(format!("role `{role}`: {e}")))?;
        let partition = role_partition(&role_id, config.partitions)
            .map_err(|e| Failure::Failed(format!("partition of `{role}`: {e}")))?;
        // Generous bounds on every wait: a lease, every rank's stagger, and slack for slow
        // machines (virtual time needs none, but the same bounds do no harm there).
        let slack = Duration::from_secs(5);
        let turn_bound = config.lease + config.stagger * (config.members as u32) + slack;
        Ok(Scene {
            config,
            time,
            out,
            role,
            role_id,
            partition,
            observer,
            start,
            slack,
            turn_bound,
        })
    }

    /// A clock instant as an offset from the timeline's start.
    fn at(&self, t: UnixMillis) -> String {
        offset(t.0 - self.start)
    }

    /// The role's state as a third party reads it.
    fn state(&self) -> Result<RoleState, Failure> {
        describe_role_state(&self.observer, self.role)
            .map_err(|e| Failure::Failed(format!("describe_role_state: {e}")))
    }

    /// The coordinator's answer for the role.
    fn leadership_status(&self) -> Result<LeadershipStatus, Failure> {
        describe_leadership(&self.observer, self.role)
            .map_err(|e| Failure::Failed(format!("describe_leadership: {e}")))
    }

    fn announce(&self, backend: &str) {
        let (config, role) = (self.config, self.role);
        self.out.note(format!(
            "failover: {} members of role `{role}` on {backend}\n          \
             lease {} ms, renewed every {} ms, ranks {} ms apart; {}",
            config.members,
            ms(config.lease),
            ms(config.renew),
            ms(config.stagger),
            self.time.stamps()
        ));
    }

    /// Step 1: Registers the members one after the other, so the join order is the order of the
    /// names: the first is elected at once, the others stand by with their ranks.
    fn register<F>(&self, connect: &F) -> Result<Vec<Member<T>>, Failure>
    where
        F: Fn(&str) -> Result<T, Failure>,
    {
        let mut members: Vec<Member<T>> = Vec::new();
        for i in 1..=self.config.members {
            let name = format!("node-{i}");
            let link = Link::new(connect(&name)?);
            let options = self.time.options(self.config.options());
            let candidacy = blocking::start(link.clone(), self.role, &name, options)
                .map_err(|e| Failure::Failed(format!("{name} could not start: {e}")))?;
            let mut m = Member {
                name,
                link,
                candidacy: Some(candidacy),
                leadership: None,
            };
            if i == 1 {
                self.first_elected(&mut m)?;
            } else {
                self.standing_by(&m)?;
            }
            members.push(m);
        }
        Ok(members)
    }

    /// The first member: rank 0 and no lease yet, so it is elected at once.
    fn first_elected(&self, m: &mut Member<T>) -> Result<(), Failure> {
        let (token, _) = m.elected(self.time, self.turn_bound)?;
        let s = m.leadership()?.snapshot();
        let offset = s.join_offset.map_or("?".to_owned(), |o| o.to_string());
        self.out.event(
            &m.name,
            format!(
                "registered at offset {offset}: rank 0 and no lease yet, so it challenges at once"
            ),
        );
        // A reader sees the first lease once it is committed and readable (on Kafka, a
        // moment after the election returns).
        let lease =
            self.time
                .wait_for("node-1's first lease to be readable", self.slack, || {
                    Ok(self
                        .state()?
                        .lease()
                        .filter(|l| l.lease.token == token)
                        .cloned())
                })?;
        self.out.event(
            &m.name,
            format!(
                "elected: leads with token {token}, term {}, lease until {}",
                m.leadership()?.term(),
                self.at(lease.lease.deadline)
            ),
        );
        Ok(())
    }

    /// A later member: registered, a standby with a rank.
    fn standing_by(&self, m: &Member<T>) -> Result<(), Failure> {
        let s = self
            .time
            .wait_for(&format!("{} to register", m.name), self.turn_bound, || {
                Ok(m.snapshot().filter(|s| {
                    s.status == Status::Standby && s.rank.is_some() && s.join_offset.is_some()
                }))
            })?;
        let rank = s.rank.unwrap_or(0);
        self.out.event(
            &m.name,
            format!(
                "registered at offset {}: standby, rank {rank} (challenges at the deadline + {rank} x {} ms)",
                s.join_offset.unwrap_or(-1),
                ms(self.config.stagger)
            ),
        );
        Ok(())
    }

    /// The third party's view: the roster in join order (once the last registration is
    /// readable) and the lease. Returns the leader's token and its lease.
    fn check_roster(&self, members: &[Member<T>]) -> Result<(FencingToken, LeaseEntry), Failure> {
        let slack = self.slack;
        let expected: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        let roster_of = |s: &RoleState| -> Vec<String> {
            s.roster().map(|(m, _)| m.as_str().to_owned()).collect()
        };
        let s = self
            .time
            .wait_for("the roster to list every member", slack, || {
                let s = self.state()?;
                Ok((roster_of(&s) == expected).then_some(s))
            })
            .map_err(|_| {
                let seen = self.state().map(|s| roster_of(&s)).unwrap_or_default();
                Failure::Failed(format!(
                    "after {slack:?} the roster is {seen:?}, expected the join order {expected:?}"
                ))
            })?;
        let roster: Vec<String> = s.roster().map(|(m, o)| format!("{m}@{o}")).collect();
        let first = members[0].leadership()?.token();
        let lease = s.lease().cloned().ok_or_else(|| {
            Failure::Failed("the role has no lease after the election".to_owned())
        })?;
        ensure(
            lease.lease.member.as_str() == "node-1" && lease.lease.token == first,
            || {
                format!(
                    "the lease is {:?}, expected node-1 with {first}",
                    lease.lease
                )
            },
        )?;
        self.out.event(
            "observer",
            format!(
                "describe_role_state: roster {}; lease: {} with {} until {}",
                roster.join(", "),
                lease.lease.member,
                lease.lease.token,
                self.at(lease.lease.deadline)
            ),
        );
        Ok((first, lease))
    }

    /// Step 2: A renewal: same token, a later deadline.
    fn check_renewal(&self, first: FencingToken, lease: &LeaseEntry) -> Result<(), Failure> {
        let renewed = self.time.wait_for(
            "node-1 to renew its lease",
            self.config.renew * 2 + self.slack,
            || {
                Ok(self
                    .state()?
                    .lease()
                    .filter(|l| l.lease.deadline > lease.lease.deadline)
                    .cloned())
            },
        )?;
        ensure(
            renewed.lease.token == first && renewed.lease.member.as_str() == "node-1",
            || {
                format!(
                    "expected node-1 to renew with {first}, but the lease moved to {} with {}",
                    renewed.lease.member, renewed.lease.token
                )
            },
        )?;
        self.out.event(
            "node-1",
            format!(
                "renewed its lease with the same token {first}: deadline {} -> {}",
                self.at(lease.lease.deadline),
                self.at(renewed.lease.deadline)
            ),
        );
        Ok(())
    }

    /// Step 3: Kills the leader: every call on its link fails from now on. It does not resign.
    /// Returns the deadline of its last lease and its successor's rank.
    fn kill_leader(
        &self,
        members: &[Member<T>],
        first: FencingToken,
    ) -> Result<(UnixMillis, usize), Failure> {
        members[0].link.cut();
        // Let a renewal that was already in flight land before reading the last deadline.
        self.time.sleep(Duration::from_millis(100))?;
        let last = self
            .state()?
            .lease()
            .cloned()
            .ok_or_else(|| Failure::Failed("the lease vanished when node-1 died".to_owned()))?;
        ensure(last.lease.token == first, || {
            format!("the lease changed hands too early: {:?}", last.lease)
        })?;
        let deadline = last.lease.deadline;
        let successor_rank = members[1].rank().unwrap_or(0);
        self.out.event(
            "node-1",
            format!(
                "KILLED: every call on its link now fails; it does not resign. Its lease runs until {}",
                self.at(deadline)
            ),
        );
        Ok((deadline, successor_rank))
    }

    /// Step 4: The first standby takes over after the deadline (+ its rank's stagger), while the
    /// old leader still believes it leads. Returns the new leader's token.
    fn take_over(
        &self,
        members: &mut [Member<T>],
        first: FencingToken,
        deadline: UnixMillis,
        successor_rank: usize,
    ) -> Result<FencingToken, Failure> {
        let (time, stagger) = (self.time, self.config.stagger);
        let turn = deadline.saturating_add(stagger * successor_rank as u32);
        let (second, elected_at) =
            members[1].elected(time, turn.since(time.now()) + self.turn_bound)?;
        let late = elected_at.0 - turn.0;
        self.out.event(
            "node-2",
            format!(
                "elected: leads with token {second}, term {}, {} ms after node-1's deadline \
                 (rank {successor_rank}: turn = deadline + {successor_rank} x {} ms)",
                members[1].leadership()?.term(),
                elected_at.0 - deadline.0,
                ms(stagger)
            ),
        );
        ensure(late >= 0, || {
            format!("node-2 took over {} ms before its turn", -late)
        })?;
        ensure(second != first, || {
            format!("the successor leads with the old leader's token {first}")
        })?;
        for m in &members[2..] {
            let status = m.status();
            ensure(m.leadership.is_none() && status == Status::Standby, || {
                format!("{} is {status:?}, expected a standby", m.name)
            })?;
        }
        let zombie = members[0].leadership()?;
        ensure(!zombie.is_done(), || {
            "node-1 noticed its end without reaching the broker: a leader must not fence itself on time"
                .to_owned()
        })?;
        self.out.event(
            "node-1",
            "still believes it leads (is_done() = false): a leader never fences itself on time",
        );
        Ok(second)
    }

    /// Step 5: A third party asks the coordinator who is authoritative.
    fn ask_the_coordinator(
        &self,
        first: FencingToken,
        second: FencingToken,
    ) -> Result<(), Failure> {
        let status = self.leadership_status()?;
        let state_name = status
            .state
            .as_ref()
            .map_or("unknown".to_owned(), |s| s.to_string());
        self.out.event(
            "observer",
            format!(
                "describe_leadership: the coordinator's pair is {} ({state_name})",
                status.token
            ),
        );
        let checks = [
            (first, "node-1's old token", false),
            (second, "node-2's token", true),
            (FencingToken::NO_EPOCH, "NO_EPOCH", false),
        ];
        for (token, what, expected) in checks {
            let answer = status.authoritative(&token);
            self.out.event(
                "observer",
                format!(
                    "  {:<24} = {answer:<5}  ({what})",
                    format!("authoritative({token})")
                ),
            );
            ensure(answer == expected, || {
                format!("authoritative({token}) ({what}) answered {answer}, expected {expected}")
            })?;
        }
        Ok(())
    }

    /// The zombie's writes with its old token are refused by the broker, though it does not
    /// know yet that it was deposed: a write through its own producer (bypassing the cut link).
    fn refuse_the_zombie(
        &self,
        members: &[Member<T>],
        first: FencingToken,
        second: FencingToken,
    ) -> Result<(), Failure> {
        let now = self.time.now();
        let member = MemberId::new("node-1").map_err(|e| Failure::Failed(e.to_string()))?;
        let claim = Lease {
            member,
            token: first,
            granted_at: now,
            deadline: now.saturating_add(self.config.lease),
        };
        let key = Key::lease(self.role_id.clone()).encode();
        match members[0]
            .link
            .inner()
            .write_lease(self.partition, &key, Some(&claim.encode()), first)
        {
            Err(e) if e.is_fenced() => self.out.event(
                "node-1",
                format!(
                    "(still a zombie) write_lease with the old token {first}: REJECTED by the broker, {e}"
                ),
            ),
            Err(e) => {
                return Err(Failure::Failed(format!(
                    "the old token's write failed, but not as fenced: {e}"
                )))
            }
            Ok(_) => {
                return Err(Failure::Failed(format!(
                    "the broker ACCEPTED a lease write with the superseded token {first}"
                )))
            }
        }
        let current = self.state()?.lease().cloned();
        ensure(
            current
                .as_ref()
                .is_some_and(|l| l.lease.member.as_str() == "node-2" && l.lease.token == second),
            || format!("after the refused write the lease is {current:?}, expected node-2's"),
        )?;
        self.out.event(
            "observer",
            format!(
                "the lease still names node-2 with {second}: the deposed writer changed nothing"
            ),
        );
        Ok(())
    }

    /// Step 6: The dead leader's link comes back: the broker fences its next renewal.
    fn fence_the_zombie(&self, members: &[Member<T>], first: FencingToken) -> Result<(), Failure> {
        members[0].link.restore();
        self.out.event(
            "node-1",
            "link restored: its next renewal goes to the broker",
        );
        let zombie = members[0].leadership()?;
        ensure(
            self.time.wait_done(zombie, self.config.renew + self.slack),
            || "node-1's done did not fire after its link came back".to_owned(),
        )?;
        let err = zombie.err();
        ensure(
            matches!(err, Some(Error::Fenced { token }) if token == first),
            || format!("node-1 ended with {err:?}, expected Error::Fenced for {first}"),
        )?;
        self.out.event(
            "node-1",
            format!(
                "done fired: err() = Error::Fenced: {}",
                err.map_or(String::new(), |e| e.to_string())
            ),
        );
        Ok(())
    }

    /// Step 7: A clean hand-over: node-2 resigns, node-3 takes over without waiting for a deadline.
    fn hand_over(
        &self,
        members: &mut [Member<T>],
        first: FencingToken,
        second: FencingToken,
    ) -> Result<(), Failure> {
        let time = self.time;
        time.wait_for("node-1 to withdraw its registration", self.slack, || {
            let ended = members[0].status() == Status::Ended;
            Ok(ended.then_some(()))
        })?;
        time.wait_for("node-3 to move to rank 0", self.slack, || {
            Ok((members[2].rank() == Some(0)).then_some(()))
        })?;
        let lease2 = self
            .state()?
            .lease()
            .cloned()
            .ok_or_else(|| Failure::Failed("node-2 holds no lease".to_owned()))?;
        let resign_at = time.now();
        self.out.event(
            "node-2",
            format!(
                "resigns (its lease would run until {})",
                self.at(lease2.lease.deadline)
            ),
        );
        let resigned = members[1].leadership()?.resign_blocking();
        ensure(resigned.is_ok(), || {
            format!("node-2's resign ended with an error: {resigned:?}")
        })?;
        let after = self.leadership_status()?;
        ensure(!after.authoritative(&second), || {
            format!("node-2's pair {second} is still authoritative after its resign: {after:?}")
        })?;
        self.out.event(
            "node-2",
            format!(
                "resigned in {} ms: its pair {second} superseded on the way out (authoritative = \
                 false), lease cleared, registration withdrawn",
                time.now().0 - resign_at.0
            ),
        );
        let (third, third_at) = members[2].elected(time, self.turn_bound)?;
        self.out.event(
            "node-3",
            format!(
                "elected: leads with token {third}, term {}, {} ms after the resign began, {} ms \
                 before node-2's lease would have run out",
                members[2].leadership()?.term(),
                third_at.0 - resign_at.0,
                lease2.lease.deadline.0 - third_at.0
            ),
        );
        ensure(third_at < lease2.lease.deadline, || {
            "the hand-over waited for the lease deadline instead of the resign".to_owned()
        })?;
        ensure(third != second && third != first, || {
            format!("node-3 leads with an earlier leader's token {third}")
        })
    }

    /// Step 8: Everyone leaves: the roster is empty and the lease cleared, once readable.
    fn leave(&self, members: &mut [Member<T>]) -> Result<(), Failure> {
        for m in members.iter_mut().skip(3) {
            if let Some(c) = m.candidacy.take() {
                c.resign_blocking()
                    .map_err(|e| Failure::Failed(format!("withdrawing a standby: {e}")))?;
            }
        }
        let resigned = members[2].leadership()?.resign_blocking();
        ensure(resigned.is_ok(), || {
            format!("node-3's resign ended with an error: {resigned:?}")
        })?;
        // Every member left: the roster is empty and the lease cleared, once readable.
        let emptied = self.time.wait_for("the role to be empty", self.slack, || {
            let s = self.state()?;
            Ok((s.is_empty() && s.lease().is_none()).then_some(()))
        });
        if emptied.is_err() {
            let s = self.state()?;
            return Err(Failure::Failed(format!(
                "after everyone left the roster has {} members and the lease is {:?}",
                s.len(),
                s.lease()
            )));
        }
        self.out.event(
            "node-3",
            if self.config.members > 3 {
                "resigned, the other standbys cancelled: the roster is empty and the lease cleared"
            } else {
                "resigned: the roster is empty and the lease cleared"
            },
        );
        Ok(())
    }

    fn finish(&self) {
        self.out.note(format!(
            "failover: OK, every step happened as expected ({:.1} s{})",
            self.out.elapsed().as_secs_f64(),
            if self.time.is_virtual() {
                " of virtual time"
            } else {
                ""
            }
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn flags_are_parsed_and_checked() {
        let c = Config::from_args(&args(&["--lease-ms", "1500", "--members=4"]))
            .unwrap()
            .unwrap();
        assert_eq!(c.lease, Duration::from_millis(1500));
        assert_eq!(c.members, 4);
        assert_eq!(Config::from_args(&args(&["-h"])).unwrap(), None);
        assert!(Config::from_args(&args(&["--members", "2"])).is_err());
        assert!(Config::from_args(&args(&["--renew-ms", "2000"])).is_err());
        assert!(!c.virtual_time && !c.time().is_virtual());
        let v = Config::from_args(&args(&["--virtual-time"]))
            .unwrap()
            .unwrap();
        assert!(v.virtual_time && v.time().is_virtual());
        assert!(Config::from_args(&args(&["--virtual-time", "--bootstrap", "k:9092"])).is_err());
    }

    #[cfg(not(feature = "kafka"))]
    #[test]
    fn bootstrap_without_the_feature_says_how_to_build() {
        let out = Timeline::buffer();
        match run(&args(&["--bootstrap", "127.0.0.1:9092"]), &out) {
            Err(Failure::Usage(m)) => assert!(m.contains("--features kafka"), "{m}"),
            other => panic!("expected a usage error, got {other:?}"),
        }
    }
}
