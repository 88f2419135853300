//! `cargo run --example manual_clock`: unit-testing leader-only code without waiting for leases.
//!
//! The code under test is a tiny [`Scheduler`] that runs jobs only while its node's
//! [`Leadership`] is live. The test harness, [`World`], puts two nodes on a
//! [`MemoryBroker`] whose clock is a [`ManualClock`]: the test moves time by hand
//! ([`World::advance`]) and waits until every driver has reacted ([`World::settle`]), so a
//! 3-second lease costs no real time and every run is the same.
//!
//! The story, asserted step by step:
//! 1. `node-a` is elected; only its scheduler runs jobs; `node-b` waits;
//! 2. ten seconds of virtual time pass: `node-a` renews ten times with the same token;
//! 3. `node-a` is cut off from the broker; at its lease deadline `node-b` takes over with a
//!    newer token. Until the broker fences it, `node-a`'s scheduler still believes it leads:
//!    that is why every job's writes must carry the token;
//! 4. `node-a`'s link returns: its renewal is fenced, and its scheduler stops for good;
//! 5. `node-b` resigns.
//!
//! `examples/tests/manual_clock.rs` is the same pattern as a plain `#[test]`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination::blocking;
use kafka_coordination::core::machine::Status;
use kafka_coordination::core::state::LeaseEntry;
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::{
    describe_role_state, Candidacy, Clock, Error, FencingToken, Leadership, ManualClock, Options,
    Snapshot, UnixMillis,
};

use crate::args::{ensure, parse, Failure};
use crate::link::Link;
use crate::timeline::Timeline;

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example manual_clock

Two nodes, one role, a manual clock; no options. Runs in well under a second.";

/// The role the nodes compete for.
pub const ROLE: &str = "nightly-jobs";
/// The partition count of the test broker.
pub const PARTITIONS: i32 = 16;
/// The lease of the test.
pub const LEASE: Duration = Duration::from_secs(3);
/// The renew interval of the test.
pub const RENEW: Duration = Duration::from_secs(1);
/// The challenge stagger of the test.
pub const STAGGER: Duration = Duration::from_millis(500);
/// The largest single move of the clock in [`World::advance`]: a quarter of the renew interval,
/// so that leaders renew (and retry) as often as they would in real time.
pub const STEP: Duration = Duration::from_millis(250);
/// Real time allowed for the drivers to react to one move of the clock.
pub const REACT: Duration = Duration::from_secs(10);

/// One run of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRun {
    /// The job.
    pub job: String,
    /// The fencing token the run carried (pass it to every write the job makes).
    pub token: FencingToken,
    /// When it ran, by the node's clock.
    pub at: UnixMillis,
}

/// The leader-only code under test: runs jobs only while its node's term is live.
#[derive(Debug)]
pub struct Scheduler {
    leadership: Option<Leadership>,
    runs: Vec<JobRun>,
}

impl Scheduler {
    /// A scheduler of a node that does not lead (yet).
    pub fn new() -> Scheduler {
        Scheduler {
            leadership: None,
            runs: Vec::new(),
        }
    }

    /// Hands the scheduler its node's leadership: it runs jobs until the term ends.
    pub fn lead(&mut self, leadership: Leadership) {
        self.leadership = Some(leadership);
    }

    /// The node's leadership, once elected (kept after the term ends, to read `err()`).
    pub fn leadership(&self) -> Option<&Leadership> {
        self.leadership.as_ref()
    }

    /// Whether the scheduler believes it leads: elected, and `done` has not fired.
    pub fn is_leading(&self) -> bool {
        self.leadership.as_ref().is_some_and(|l| !l.is_done())
    }

    /// Runs `job` at `now` if (and only if) this node leads; returns the token the run carries.
    pub fn run_due(&mut self, job: &str, now: UnixMillis) -> Option<FencingToken> {
        let leadership = self.leadership.as_ref().filter(|l| !l.is_done())?;
        let token = leadership.token();
        self.runs.push(JobRun {
            job: job.to_owned(),
            token,
            at: now,
        });
        Some(token)
    }

    /// Every run so far.
    pub fn runs(&self) -> &[JobRun] {
        &self.runs
    }
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler::new()
    }
}

/// One node of the test: its link to the broker (to cut it), its candidacy until it is
/// elected, and its scheduler.
#[derive(Debug)]
pub struct Node {
    /// The member name.
    pub name: String,
    /// The node's link; [`Link::cut`] plays a partition or a frozen process.
    pub link: Link<MemoryTransport>,
    /// The leader-only code.
    pub scheduler: Scheduler,
    candidacy: Option<Candidacy>,
    failed: Option<(Error, Snapshot)>,
}

impl Node {
    /// Hands the leadership to the scheduler once the node is elected (does not wait).
    pub fn poll(&mut self) {
        if let Some(c) = self.candidacy.take() {
            let snapshot = c.snapshot();
            match c.wait_timeout(Duration::ZERO) {
                Ok(Ok(leadership)) => self.scheduler.lead(leadership),
                Ok(Err(e)) => self.failed = Some((e, snapshot)),
                Err(c) => self.candidacy = Some(c),
            }
        }
    }

    /// What the node's driver last reported.
    pub fn snapshot(&self) -> Snapshot {
        if let Some(c) = &self.candidacy {
            return c.snapshot();
        }
        if let Some(l) = self.scheduler.leadership() {
            return l.snapshot();
        }
        match &self.failed {
            Some((_, s)) => Snapshot {
                status: Status::Ended,
                ..s.clone()
            },
            None => Snapshot {
                status: Status::Ended,
                rank: None,
                join_offset: None,
                token: None,
                idle_at: None,
                wake_at: None,
            },
        }
    }

    /// Why the candidacy failed before the node was elected, if it did.
    pub fn failure(&self) -> Option<&Error> {
        self.failed.as_ref().map(|(e, _)| e)
    }
}

/// The test harness: a manual clock, a broker on it, and the nodes.
#[derive(Debug)]
pub struct World {
    /// The clock every driver and the broker read.
    pub clock: ManualClock,
    /// The broker.
    pub broker: MemoryBroker,
    /// The nodes, in join order.
    pub nodes: Vec<Node>,
}

impl World {
    /// An empty world at the manual clock's default instant.
    pub fn new() -> World {
        let clock = ManualClock::default();
        let broker = MemoryBroker::new(PARTITIONS, Arc::new(clock.clone()));
        World {
            clock,
            broker,
            nodes: Vec::new(),
        }
    }

    /// The options every node uses: the test timing and the manual clock.
    pub fn options(&self) -> Options {
        Options::new()
            .partitions(PARTITIONS)
            .lease_duration(LEASE)
            .renew_interval(RENEW)
            .challenge_stagger(STAGGER)
            .clock(self.clock.clone())
    }

    /// Starts a node (its driver runs on its own thread) and waits until it has settled.
    pub fn join(&mut self, name: &str) -> Result<&mut Node, String> {
        let link = Link::new(self.broker.transport(name));
        let candidacy = blocking::start(link.clone(), ROLE, name, self.options())
            .map_err(|e| format!("{name} could not start: {e}"))?;
        self.nodes.push(Node {
            name: name.to_owned(),
            link,
            scheduler: Scheduler::new(),
            candidacy: Some(candidacy),
            failed: None,
        });
        self.settle()?;
        let index = self.nodes.len() - 1;
        Ok(&mut self.nodes[index])
    }

    /// The node named `name`.
    ///
    /// # Panics
    /// When there is no such node (a bug in the test).
    pub fn node(&mut self, name: &str) -> &mut Node {
        match self.nodes.iter_mut().find(|n| n.name == name) {
            Some(n) => n,
            None => panic!("no node named {name}"),
        }
    }

    /// The manual clock's time.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    /// Waits (real time, at most [`REACT`]) until every driver has acted on the current time:
    /// each is idle at `now` or has ended. Elected nodes get their leadership on the way.
    pub fn settle(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + REACT;
        loop {
            let now = self.now();
            let mut busy = Vec::new();
            for n in &mut self.nodes {
                n.poll();
                let s = n.snapshot();
                if s.status != Status::Ended && s.idle_at != Some(now) {
                    busy.push(n.name.clone());
                }
            }
            if busy.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("{busy:?} did not settle at {now} within {REACT:?}"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Moves the clock forward by `by`, in steps of at most [`STEP`], settling after each.
    pub fn advance(&mut self, by: Duration) -> Result<(), String> {
        self.advance_to(self.now().saturating_add(by))
    }

    /// Moves the clock forward to `t`, in steps of at most [`STEP`], settling after each.
    pub fn advance_to(&mut self, t: UnixMillis) -> Result<(), String> {
        while self.now() < t {
            let step = t.since(self.now()).min(STEP);
            self.clock.advance(step);
            self.settle()?;
        }
        Ok(())
    }

    /// Lets every node's scheduler try `job` now; returns the names of those that ran it.
    pub fn run_jobs(&mut self, job: &str) -> Vec<String> {
        let now = self.now();
        let mut ran = Vec::new();
        for n in &mut self.nodes {
            if n.scheduler.run_due(job, now).is_some() {
                ran.push(n.name.clone());
            }
        }
        ran
    }

    /// The role's current lease, as a third party reads it.
    pub fn lease(&self) -> Result<Option<LeaseEntry>, String> {
        let state = describe_role_state(&self.broker.transport("observer"), ROLE, PARTITIONS)
            .map_err(|e| e.to_string())?;
        Ok(state.lease().cloned())
    }

    /// How many lease writes of `member` the broker accepted.
    pub fn lease_writes_of(&self, member: &str) -> usize {
        self.broker
            .accepted_lease_writes()
            .iter()
            .filter(|w| w.member == member)
            .count()
    }
}

impl Default for World {
    fn default() -> Self {
        World::new()
    }
}

/// Runs the example with command-line `args`, printing to `out`.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    if parse(args, &[], &[], USAGE)?.help() {
        out.note(USAGE);
        return Ok(());
    }
    let mut w = World::new();
    let start = w.now();
    let say = |w: &World, who: &str, what: String| {
        let ms = u64::try_from(w.now().0 - start.0).unwrap_or(0);
        out.event_at(Duration::from_millis(ms), who, what);
    };
    out.note(format!(
        "manual_clock: a Scheduler that runs jobs only while leading, tested on a ManualClock \
         (lease {} s, renew {} s); [s] = virtual seconds",
        LEASE.as_secs(),
        RENEW.as_secs()
    ));

    // 1. node-a is elected; node-b waits.
    w.join("node-a")?;
    let t1 = w
        .node("node-a")
        .scheduler
        .leadership()
        .map(Leadership::token)
        .ok_or("node-a was not elected")?;
    say(&w, "node-a", format!("elected with token {t1}"));
    w.join("node-b")?;
    let b = w.node("node-b").snapshot();
    ensure(b.status == Status::Standby && b.rank == Some(0), || {
        format!(
            "node-b should wait with rank 0, it is {:?} rank {:?}",
            b.status, b.rank
        )
    })?;
    say(&w, "node-b", "registered: standby, rank 0".to_owned());
    let ran = w.run_jobs("report");
    ensure(ran == ["node-a"], || format!("the job ran on {ran:?}"))?;
    say(&w, "jobs", "`report` ran on node-a only".to_owned());

    // 2. Ten seconds of virtual time, a job every 250 ms: renewals keep the token.
    let writes = w.lease_writes_of("node-a");
    for _ in 0..40 {
        w.advance(STEP)?;
        let ran = w.run_jobs("tick");
        ensure(ran == ["node-a"], || format!("`tick` ran on {ran:?}"))?;
    }
    let renewals = w.lease_writes_of("node-a") - writes;
    let lease = w.lease()?.ok_or("no lease after ten seconds")?;
    ensure(renewals >= 9 && lease.lease.token == t1, || {
        format!("{renewals} renewals, lease {:?}", lease.lease)
    })?;
    ensure(w.node("node-b").scheduler.runs().is_empty(), || {
        "node-b ran a job while standing by".to_owned()
    })?;
    say(
        &w,
        "node-a",
        format!(
            "10 s later: renewed {renewals} times with the same token {t1}; ran `tick` 40 times, \
             node-b none"
        ),
    );

    // 3. node-a is cut off; node-b takes over at the deadline.
    w.node("node-a").link.cut();
    let deadline = lease.lease.deadline;
    say(
        &w,
        "node-a",
        format!(
            "link CUT: it cannot renew; its lease runs out in {} ms",
            deadline.0 - w.now().0
        ),
    );
    w.advance_to(UnixMillis(deadline.0 - 1))?;
    ensure(!w.node("node-b").scheduler.is_leading(), || {
        "node-b took over before the deadline".to_owned()
    })?;
    w.advance_to(deadline)?;
    let t2 = w
        .node("node-b")
        .scheduler
        .leadership()
        .map(Leadership::token)
        .ok_or("node-b was not elected at the deadline")?;
    ensure(t2 > t1, || format!("{t2} is not newer than {t1}"))?;
    say(
        &w,
        "node-b",
        format!("elected at node-a's deadline with token {t2}"),
    );
    let ran = w.run_jobs("tick");
    ensure(ran == ["node-a", "node-b"], || {
        format!("`tick` ran on {ran:?}")
    })?;
    say(
        &w,
        "jobs",
        format!(
            "`tick` ran on both: node-a cannot know it lost the role until the broker fences it, \
             so its writes must carry {t1}, which every guarded write now refuses"
        ),
    );

    // 4. node-a's link returns: fenced at its next renewal, its scheduler stops.
    w.node("node-a").link.restore();
    w.advance(RENEW)?;
    let a = w.node("node-a");
    let err = a.scheduler.leadership().and_then(Leadership::err);
    ensure(
        !a.scheduler.is_leading() && matches!(err, Some(Error::Fenced { token }) if token == t1),
        || format!("node-a should be fenced, its err() is {err:?}"),
    )?;
    say(
        &w,
        "node-a",
        format!(
            "link restored: fenced at its next renewal ({})",
            err.map_or(String::new(), |e| e.to_string())
        ),
    );
    let ran = w.run_jobs("tick");
    ensure(ran == ["node-b"], || format!("`tick` ran on {ran:?}"))?;
    say(
        &w,
        "jobs",
        "`tick` runs on node-b only; node-a's scheduler stopped".to_owned(),
    );

    // 5. node-b resigns.
    let resigned = w
        .node("node-b")
        .scheduler
        .leadership()
        .and_then(Leadership::resign_blocking);
    ensure(resigned.is_none(), || {
        format!("node-b's resign: {resigned:?}")
    })?;
    ensure(w.run_jobs("tick").is_empty(), || {
        "a job ran after everyone left".to_owned()
    })?;
    say(
        &w,
        "node-b",
        "resigned: no scheduler runs jobs any more".to_owned(),
    );
    let a_runs = w.node("node-a").scheduler.runs().len();
    let b_runs = w.node("node-b").scheduler.runs().len();
    out.note(format!(
        "manual_clock: OK. node-a ran {a_runs} jobs with {t1}, node-b {b_runs} with {t2}; \
         {:.1} s of virtual time",
        w.now().since(start).as_secs_f64()
    ));
    Ok(())
}
