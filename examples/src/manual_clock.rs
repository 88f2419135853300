//! `cargo run --example manual_clock`: unit-testing leader-only code without waiting for leases.
//!
//! The code under test is a tiny [`Scheduler`] that runs jobs only while its node's
//! [`Leadership`] is live. The harness is the library's test kit: a [`TestCluster`] puts the
//! nodes on a `MemoryBroker` whose clock is a `ManualClock`. The test moves time by hand
//! ([`TestCluster::advance`]), and each move returns once every driver has acted on it (exact
//! quiescence: no sleeps, no polling), so a 3-second lease costs no real time and every run
//! takes the same path, on a laptop or on a loaded CI machine. Each [`Node`] is a
//! [`TestMember`] whose leadership, once elected, is handed to its scheduler
//! ([`TestMember::take_leadership`]), as the application would do.
//!
//! The story, asserted step by step:
//! 1. `node-a` is elected; only its scheduler runs jobs; `node-b` waits;
//! 2. ten seconds of virtual time pass: `node-a` renews ten times with the same token;
//! 3. `node-a` is cut off from the broker; at its lease deadline `node-b` takes over with a
//!    new token. Until the broker fences it, `node-a`'s scheduler still believes it leads:
//!    that is why every job's writes must carry the token;
//! 4. `node-a`'s link returns: its renewal is fenced, and its scheduler stops for good;
//! 5. `node-b` resigns.
//!
//! `examples/tests/manual_clock.rs` is the same pattern as plain `#[test]`s.

use std::time::Duration;

use kafka_coordination::core::machine::Status;
use kafka_coordination::core::UnixMillis;
use kafka_coordination::leadership::Leadership;
use kafka_coordination::testkit::{TestCluster, TestMember, LEASE, RENEW};
use kafka_coordination::{Error, FencingToken};

use crate::args::{ensure, parse, Failure};
use crate::timeline::Timeline;

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example manual_clock

Two nodes, one role, a manual clock; no options. Runs in well under a second.";

/// The role the nodes compete for.
pub const ROLE: &str = "nightly-jobs";
/// How often the story runs a job: a quarter of the kit's renew interval (1 s).
pub const TICK: Duration = Duration::from_millis(250);

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
#[derive(Debug, Default)]
pub struct Scheduler {
    leadership: Option<Leadership>,
    runs: Vec<JobRun>,
}

impl Scheduler {
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

/// One node of the test: a member of the cluster, and the code under test.
#[derive(Debug)]
pub struct Node {
    /// The member: its [`link`](TestMember::link) plays partitions, its
    /// [`snapshot`](TestMember::snapshot) shows its status and rank.
    pub member: TestMember,
    /// The leader-only code.
    pub scheduler: Scheduler,
}

impl Node {
    /// Starts `name` on `cluster` (the kit waits until every driver has settled).
    pub fn join(cluster: &TestCluster, name: &str) -> Node {
        let mut node = Node {
            member: cluster.join(ROLE, name),
            scheduler: Scheduler::default(),
        };
        node.poll();
        node
    }

    /// What the application does once its node is elected: hands the leadership to the
    /// scheduler.
    pub fn poll(&mut self) {
        if let Some(leadership) = self.member.take_leadership() {
            self.scheduler.lead(leadership);
        }
    }

    /// The token the scheduler leads with, once elected.
    pub fn token(&mut self) -> Option<FencingToken> {
        self.poll();
        self.scheduler.leadership().map(Leadership::token)
    }
}

/// Lets every node's scheduler try `job` now; returns the names of those that ran it.
pub fn run_jobs(cluster: &TestCluster, nodes: &mut [&mut Node], job: &str) -> Vec<String> {
    let mut ran = Vec::new();
    for n in nodes {
        n.poll();
        if n.scheduler.run_due(job, cluster.now()).is_some() {
            ran.push(n.member.name().to_owned());
        }
    }
    ran
}

/// Runs the example with command-line `args`, printing to `out`.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    if parse(args, &[], &[], USAGE)?.help() {
        out.note(USAGE);
        return Ok(());
    }
    let w = TestCluster::new();
    let start = w.now();
    let say = |who: &str, what: String| out.event_at(w.now().since(start), who, what);
    out.note(format!(
        "manual_clock: a Scheduler that runs jobs only while leading, tested on a ManualClock \
         (lease {} s, renew {} s); [s] = virtual seconds",
        LEASE.as_secs(),
        RENEW.as_secs()
    ));

    // 1. node-a is elected; node-b waits.
    let mut a = Node::join(&w, "node-a");
    let t1 = a.token().ok_or("node-a was not elected")?;
    say("node-a", format!("elected with token {t1}"));
    let mut b = Node::join(&w, "node-b");
    let s = b.member.snapshot();
    ensure(s.status == Status::Standby && s.rank == Some(0), || {
        format!(
            "node-b should wait with rank 0, it is {:?} rank {:?}",
            s.status, s.rank
        )
    })?;
    say("node-b", "registered: standby, rank 0".to_owned());
    let ran = run_jobs(&w, &mut [&mut a, &mut b], "report");
    ensure(ran == ["node-a"], || format!("the job ran on {ran:?}"))?;
    say("jobs", "`report` ran on node-a only".to_owned());

    // 2. Ten seconds of virtual time, a job every 250 ms: renewals keep the token.
    let writes_of_a = || {
        let writes = w.broker().accepted_lease_writes();
        writes.iter().filter(|x| x.member == "node-a").count()
    };
    let writes = writes_of_a();
    for _ in 0..40 {
        w.advance(TICK);
        let ran = run_jobs(&w, &mut [&mut a, &mut b], "tick");
        ensure(ran == ["node-a"], || format!("`tick` ran on {ran:?}"))?;
    }
    let renewals = writes_of_a() - writes;
    let lease = w
        .role_state(ROLE)
        .lease()
        .cloned()
        .ok_or("no lease after ten seconds")?;
    ensure(renewals == 10 && lease.lease.token == t1, || {
        format!("{renewals} renewals, lease {:?}", lease.lease)
    })?;
    say(
        "node-a",
        format!(
            "10 s later: renewed {renewals} times with the same token {t1}; ran `tick` 40 times, \
             node-b none"
        ),
    );

    // 3. node-a is cut off; node-b takes over at the deadline.
    a.member.link().cut();
    let deadline = lease.lease.deadline;
    say(
        "node-a",
        format!(
            "link CUT: it cannot renew; its lease runs out in {} ms",
            deadline.since(w.now()).as_millis()
        ),
    );
    w.advance_to(UnixMillis(deadline.0 - 1));
    ensure(b.token().is_none(), || {
        "node-b took over before the deadline".to_owned()
    })?;
    w.advance_to(deadline);
    let t2 = b.token().ok_or("node-b was not elected at the deadline")?;
    ensure(t2 != t1, || {
        format!("node-b leads with node-a's token {t1}")
    })?;
    say(
        "node-b",
        format!("elected at node-a's deadline with token {t2}"),
    );
    let ran = run_jobs(&w, &mut [&mut a, &mut b], "tick");
    ensure(ran == ["node-a", "node-b"], || {
        format!("`tick` ran on {ran:?}")
    })?;
    say(
        "jobs",
        format!(
            "`tick` ran on both: node-a cannot know it lost the role until the broker fences it, \
             so its writes must carry {t1}, which every guarded write now refuses"
        ),
    );

    // 4. node-a's link returns: fenced at its next renewal, its scheduler stops.
    a.member.link().restore();
    w.advance(RENEW);
    let err = a.scheduler.leadership().and_then(Leadership::err);
    ensure(
        !a.scheduler.is_leading() && matches!(err, Some(Error::Fenced { token }) if token == t1),
        || format!("node-a should be fenced, its err() is {err:?}"),
    )?;
    say(
        "node-a",
        format!(
            "link restored: fenced at its next renewal ({})",
            err.map_or(String::new(), |e| e.to_string())
        ),
    );
    let ran = run_jobs(&w, &mut [&mut a, &mut b], "tick");
    ensure(ran == ["node-b"], || format!("`tick` ran on {ran:?}"))?;
    say(
        "jobs",
        "`tick` runs on node-b only; node-a's scheduler stopped".to_owned(),
    );

    // 5. node-b resigns.
    let resigned = b.scheduler.leadership().map(Leadership::resign_blocking);
    ensure(matches!(resigned, Some(Ok(()))), || {
        format!("node-b's resign: {resigned:?}")
    })?;
    let ran = run_jobs(&w, &mut [&mut a, &mut b], "tick");
    ensure(ran.is_empty(), || {
        format!("`tick` ran on {ran:?} after everyone left")
    })?;
    say(
        "node-b",
        "resigned: no scheduler runs jobs any more".to_owned(),
    );
    out.note(format!(
        "manual_clock: OK. node-a ran {} jobs with {t1}, node-b {} with {t2}; \
         {:.1} s of virtual time",
        a.scheduler.runs().len(),
        b.scheduler.runs().len(),
        w.now().since(start).as_secs_f64()
    ));
    Ok(())
}
