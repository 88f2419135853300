//! A deterministic test kit for code that runs only while it leads.
//!
//! [`TestCluster`] puts any number of members, on any driver, on one
//! [`MemoryBroker`] whose clock is a [`ManualClock`]. Time moves only when the test moves it
//! ([`TestCluster::advance`]), and every move returns only once every driver has acted on it
//! ([`ManualClock::settle`]: exact, no sleeps, no polling), so a 30-second lease costs no real
//! time and a run takes the same path on an idle laptop and on a loaded CI machine.
//!
//! See [`TestCluster`] for an example, the fault switches and the threads it blocks.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::state::RoleState;
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::token::FencingToken;

use crate::clock::{Clock, ManualClock};
use crate::cuttable_link::Link;
use crate::leadership::{Candidacy, Error, Leadership, Shared, Snapshot};
use crate::memory::{MemoryBroker, MemoryTransport};
use crate::options::Options;

/// The transport of a test member: the member's own session on the broker, behind a link the
/// test can cut.
pub type TestTransport = Link<MemoryTransport>;

/// Which driver runs the members of a [`TestCluster`]. Each variant exists with its feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Flavour {
    /// [`crate::blocking`]: a thread per member.
    #[cfg(feature = "blocking")]
    Blocking,
    /// `kafka_coordination::tokio_driver`: a task per member on a runtime the cluster owns.
    #[cfg(feature = "tokio")]
    Tokio,
    /// `kafka_coordination::smol_driver`: a task per member on smol's global executor.
    #[cfg(feature = "smol")]
    Smol,
    /// `kafka_coordination::async_std_driver`: a task per member on async-std's executor.
    #[cfg(feature = "async-std")]
    AsyncStd,
}

impl Flavour {
    /// Every flavour this build has, blocking first.
    #[allow(clippy::vec_init_then_push)] // one push per enabled driver feature
    pub fn all() -> Vec<Flavour> {
        #[allow(unused_mut)]
        let mut all = Vec::new();
        #[cfg(feature = "blocking")]
        all.push(Flavour::Blocking);
        #[cfg(feature = "tokio")]
        all.push(Flavour::Tokio);
        #[cfg(feature = "smol")]
        all.push(Flavour::Smol);
        #[cfg(feature = "async-std")]
        all.push(Flavour::AsyncStd);
        all
    }

    /// The first of [`Flavour::all`].
    fn first() -> Flavour {
        #[cfg(feature = "blocking")]
        return Flavour::Blocking;
        #[cfg(all(not(feature = "blocking"), feature = "tokio"))]
        return Flavour::Tokio;
        #[cfg(all(not(feature = "blocking"), not(feature = "tokio"), feature = "smol"))]
        return Flavour::Smol;
        #[cfg(all(
            not(feature = "blocking"),
            not(feature = "tokio"),
            not(feature = "smol"),
            feature = "async-std"
        ))]
        return Flavour::AsyncStd;
    }
}

/// Members on one [`MemoryBroker`] and one [`ManualClock`].
///
/// ```
/// use std::time::Duration;
/// use kafka_coordination::testkit::TestCluster;
///
/// let cluster = TestCluster::new();             // blocking driver, lease 3 s, renew 1 s
/// let a = cluster.join("scheduler", "node-a");  // registers, elected at once
/// let b = cluster.join("scheduler", "node-b");  // standby, rank 0
/// assert!(a.is_leader() && !b.is_leader());
/// let old = a.token().unwrap();
/// a.link().cut();                               // node-a freezes: it cannot renew
/// cluster.advance(Duration::from_secs(4));      // past its lease: node-b takes over
/// assert!(b.is_leader() && b.token().unwrap() != old);
/// a.link().restore();                           // node-a's next renewal meets the fence
/// cluster.advance(Duration::from_secs(1));
/// assert!(a.error().is_some_and(|e| e.is_fenced()));
/// ```
///
/// The fault switches are the ones the library has: [`Link::cut`] on a member's link (a frozen,
/// dead or partitioned process that does not resign), and the broker's fault injection
/// ([`MemoryBroker::fail_next`], [`MemoryBroker::lose_next_reply`],
/// [`MemoryBroker::set_partition_unavailable`], ...) through [`TestCluster::broker`].
///
/// The kit's methods block the calling thread while drivers settle: call them from a plain
/// `#[test]` (or from `spawn_blocking`), not from inside an async task. Each method that waits
/// for drivers panics with the names of the drivers that did not settle when
/// [`SETTLE_GUARD`](crate::clock::SETTLE_GUARD) of real time passes: a hang guard, never a
/// verdict.
pub struct TestCluster {
    clock: ManualClock,
    broker: MemoryBroker,
    flavour: Flavour,
    options: Options,
    step: Duration,
    #[cfg(feature = "tokio")]
    runtime: std::sync::OnceLock<::tokio::runtime::Runtime>,
}

impl fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCluster")
            .field("now", &self.clock.now())
            .field("flavour", &self.flavour)
            .field("options", &self.options)
            .field("step", &self.step)
            .finish()
    }
}

impl Default for TestCluster {
    fn default() -> Self {
        TestCluster::new()
    }
}

/// The kit's default lease.
pub const LEASE: Duration = Duration::from_secs(3);
/// The kit's default renew interval.
pub const RENEW: Duration = Duration::from_secs(1);
/// The kit's default challenge stagger.
pub const STAGGER: Duration = Duration::from_millis(500);
/// The kit's default largest single move of the clock in [`TestCluster::advance`].
pub const STEP: Duration = Duration::from_millis(100);

impl TestCluster {
    /// 16 partitions, the first flavour of this build (blocking by default), a lease of 3 s
    /// renewed every 1 s, ranks 500 ms apart, clock steps of at most 100 ms.
    pub fn new() -> TestCluster {
        TestCluster::with_partitions(16)
    }

    /// [`new`](Self::new) with a topic of `partitions` partitions.
    pub fn with_partitions(partitions: i32) -> TestCluster {
        let clock = ManualClock::default();
        let broker = MemoryBroker::new(partitions, Arc::new(clock.clone()));
        let options = Options::new()
            .lease_duration(LEASE)
            .renew_interval(RENEW)
            .challenge_stagger(STAGGER)
            .clock(clock.clone());
        TestCluster {
            clock,
            broker,
            flavour: Flavour::first(),
            options,
            step: STEP,
            #[cfg(feature = "tokio")]
            runtime: std::sync::OnceLock::new(),
        }
    }

    /// Runs later members on `flavour`.
    pub fn flavour(mut self, flavour: Flavour) -> TestCluster {
        self.flavour = flavour;
        self
    }

    /// The lease, renew interval and stagger of later members.
    pub fn timing(mut self, lease: Duration, renew: Duration, stagger: Duration) -> TestCluster {
        self.options = self
            .options
            .lease_duration(lease)
            .renew_interval(renew)
            .challenge_stagger(stagger);
        self
    }

    /// Changes the options of later members (the clock stays the cluster's).
    pub fn options_with(mut self, f: impl FnOnce(Options) -> Options) -> TestCluster {
        self.options = f(self.options).clock(self.clock.clone());
        self
    }

    /// The largest single move of the clock in [`advance`](Self::advance) (at least 1 ms).
    /// Moving in steps lets leaders renew and retry as often as they would in real time.
    pub fn step(mut self, step: Duration) -> TestCluster {
        self.step = step.max(Duration::from_millis(1));
        self
    }

    /// The clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The broker, for fault injection and audits.
    pub fn broker(&self) -> &MemoryBroker {
        &self.broker
    }

    /// The options members get (with the cluster's clock).
    pub fn options(&self) -> Options {
        self.options.clone()
    }

    /// The driver flavour of later members.
    pub fn current_flavour(&self) -> Flavour {
        self.flavour
    }

    /// The clock's time.
    pub fn now(&self) -> UnixMillis {
        self.clock.now()
    }

    /// Starts `member` of `role` with the cluster's options and waits until every driver has
    /// settled (registered, and elected if it is its turn).
    ///
    /// # Panics
    /// When the name is invalid, the driver cannot start, or drivers do not settle.
    pub fn join(&self, role: &str, member: &str) -> TestMember {
        self.join_with(role, member, self.options())
    }

    /// [`join`](Self::join) with other options (their clock is replaced by the cluster's).
    ///
    /// # Panics
    /// As [`join`](Self::join).
    pub fn join_with(&self, role: &str, member: &str, options: Options) -> TestMember {
        let member = self
            .try_join_with(role, member, options)
            .unwrap_or_else(|e| panic!("{member} could not join {role}: {e}"));
        self.settle();
        member
    }

    /// Starts a member without settling; `Err` when the driver refuses the name or options.
    pub fn try_join_with(
        &self,
        role: &str,
        member: &str,
        options: Options,
    ) -> Result<TestMember, Error> {
        let link = Link::new(self.broker.transport(member));
        self.try_join_on(link, role, member, options)
    }

    /// Starts a member on a given transport (shared by several roles, say) without settling.
    pub fn try_join_on(
        &self,
        link: TestTransport,
        role: &str,
        member: &str,
        options: Options,
    ) -> Result<TestMember, Error> {
        let options = options.clock(self.clock.clone());
        let candidacy = self.start(link.clone(), role, member, options)?;
        Ok(TestMember {
            name: member.to_owned(),
            role: role.to_owned(),
            link,
            clock: self.clock.clone(),
            shared: candidacy.shared().clone(),
            slot: Mutex::new(Slot::Waiting(candidacy)),
        })
    }

    fn start(
        &self,
        link: TestTransport,
        role: &str,
        member: &str,
        options: Options,
    ) -> Result<Candidacy, Error> {
        match self.flavour {
            #[cfg(feature = "blocking")]
            Flavour::Blocking => crate::blocking::start(link, role, member, options),
            #[cfg(feature = "tokio")]
            Flavour::Tokio => {
                let runtime = self.runtime.get_or_init(|| {
                    ::tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .unwrap_or_else(|e| panic!("the test kit's tokio runtime: {e}"))
                });
                let _entered = runtime.enter();
                crate::tokio_driver::start(link, role, member, options)
            }
            #[cfg(feature = "smol")]
            Flavour::Smol => crate::smol_driver::start(link, role, member, options),
            #[cfg(feature = "async-std")]
            Flavour::AsyncStd => crate::async_std_driver::start(link, role, member, options),
        }
    }

    /// Waits until every driver on the clock has acted on every change so far.
    ///
    /// # Panics
    /// When drivers do not settle within [`SETTLE_GUARD`](crate::clock::SETTLE_GUARD).
    pub fn settle(&self) {
        if let Err(e) = self.clock.settle() {
            panic!("{e}");
        }
    }

    /// Moves the clock forward by `by` in steps of at most [`step`](Self::step), settling after
    /// each.
    ///
    /// # Panics
    /// As [`settle`](Self::settle).
    pub fn advance(&self, by: Duration) {
        self.advance_to(self.now().saturating_add(by));
    }

    /// Moves the clock forward to `t` in steps, settling after each. Does nothing when `t` is
    /// not in the future.
    ///
    /// # Panics
    /// As [`settle`](Self::settle).
    pub fn advance_to(&self, t: UnixMillis) {
        self.settle();
        while self.now() < t {
            let step = t.since(self.now()).min(self.step);
            self.clock.advance(step);
            self.settle();
        }
    }

    /// Moves the clock in steps until `done` holds, at most `limit` of virtual time; returns
    /// whether it held. `done` is asked after every settled step (and once before moving).
    ///
    /// # Panics
    /// As [`settle`](Self::settle).
    pub fn advance_until(&self, limit: Duration, mut done: impl FnMut() -> bool) -> bool {
        self.settle();
        let end = self.now().saturating_add(limit);
        loop {
            if done() {
                return true;
            }
            if self.now() >= end {
                return false;
            }
            let step = end.since(self.now()).min(self.step);
            self.clock.advance(step);
            self.settle();
        }
    }

    /// A transport of the broker for third-party checks (not a member).
    pub fn observer(&self) -> MemoryTransport {
        self.broker.transport("observer")
    }

    /// The roster and lease of `role`, as a third party reads them.
    ///
    /// # Panics
    /// When the role name is invalid or the read fails (an injected fault).
    pub fn role_state(&self, role: &str) -> RoleState {
        crate::describe::describe_role_state(&self.observer(), role)
            .unwrap_or_else(|e| panic!("reading the state of {role}: {e}"))
    }

    /// The members on `role`'s roster, in join order.
    pub fn roster(&self, role: &str) -> Vec<String> {
        self.role_state(role)
            .roster()
            .map(|(m, _)| m.to_string())
            .collect()
    }

    /// The coordinator's current pair for `role` (one DescribeTransactions).
    ///
    /// # Panics
    /// When the role name is invalid or the call fails (an injected fault).
    pub fn leadership_status(&self, role: &str) -> LeadershipStatus {
        crate::describe::describe_leadership(&self.observer(), role)
            .unwrap_or_else(|e| panic!("describing {role}: {e}"))
    }
}

enum Slot {
    Waiting(Candidacy),
    Leading(Leadership),
    /// The leadership was handed to the code under test.
    Handed(FencingToken),
    Failed(Error),
    Cancelled,
}

/// One member of a [`TestCluster`]. Every method takes `&self`; the member turns its candidacy
/// into a [`Leadership`] by itself once elected. Dropping it cancels or resigns, as dropping
/// the handle it holds would.
pub struct TestMember {
    name: String,
    role: String,
    link: TestTransport,
    clock: ManualClock,
    shared: Arc<Shared>,
    slot: Mutex<Slot>,
}

impl fmt::Debug for TestMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestMember")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("snapshot", &self.snapshot())
            .field("link_cut", &self.link.is_cut())
            .finish()
    }
}

impl TestMember {
    /// The member's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The role it competes for.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// Its link to the broker: [`Link::cut`] plays a frozen, dead or partitioned process.
    pub fn link(&self) -> &TestTransport {
        &self.link
    }

    /// Its session on the broker (bypassing the link), for writes with a token.
    pub fn transport(&self) -> &MemoryTransport {
        self.link.inner()
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        let mut slot = kafka_coordination_transport::lock::lock(&self.slot);
        let taken = std::mem::replace(&mut *slot, Slot::Cancelled);
        *slot = match taken {
            Slot::Waiting(c) => match c.elected_blocking_timeout(Duration::ZERO) {
                Ok(Ok(l)) => Slot::Leading(l),
                Ok(Err(e)) => Slot::Failed(e),
                Err(c) => Slot::Waiting(c),
            },
            other => other,
        };
        slot
    }

    /// What its driver last reported.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.lock().snapshot.clone()
    }

    /// Its rank among the standbys (0 challenges first), `None` while leading or unregistered.
    pub fn rank(&self) -> Option<usize> {
        self.snapshot().rank
    }

    /// Whether it was elected and its term is not over (`done` has not fired).
    pub fn is_leader(&self) -> bool {
        match &*self.slot() {
            Slot::Leading(l) => !l.is_done(),
            Slot::Handed(_) => self.snapshot().token.is_some(),
            _ => false,
        }
    }

    /// The token of its term, once elected (also after the term ended).
    pub fn token(&self) -> Option<FencingToken> {
        match &*self.slot() {
            Slot::Leading(l) => Some(l.token()),
            Slot::Handed(t) => Some(*t),
            _ => None,
        }
    }

    /// Runs `f` with its leadership, once elected and while the kit holds it.
    pub fn with_leadership<R>(&self, f: impl FnOnce(&Leadership) -> R) -> Option<R> {
        match &*self.slot() {
            Slot::Leading(l) => Some(f(l)),
            _ => None,
        }
    }

    /// Hands its leadership to the code under test, once elected. The member keeps reporting
    /// [`snapshot`](Self::snapshot), [`token`](Self::token) and [`is_leader`](Self::is_leader).
    pub fn take_leadership(&self) -> Option<Leadership> {
        let mut slot = self.slot();
        match std::mem::replace(&mut *slot, Slot::Cancelled) {
            Slot::Leading(l) => {
                *slot = Slot::Handed(l.token());
                Some(l)
            }
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Why it stopped: the candidacy's failure before election, or the term's error
    /// ([`Error::Fenced`] once deposed). `None` while it runs and after a clean resign.
    pub fn error(&self) -> Option<Error> {
        match &*self.slot() {
            Slot::Failed(e) => Some(e.clone()),
            Slot::Leading(l) => l.err(),
            _ => {
                let s = self.shared.lock();
                s.deposed
                    .map(|token| Error::Fenced { token })
                    .or_else(|| s.outcome.as_ref().and_then(|o| o.clone().err()))
            }
        }
    }

    /// Whether its driver has stopped.
    pub fn is_done(&self) -> bool {
        self.shared.lock().outcome.is_some()
    }

    /// Resigns (when leading) or withdraws (when waiting), then settles every driver. Returns
    /// what [`Leadership::resign`](crate::leadership::Leadership::resign) returns: `Ok` when the member
    /// left the role clean, else what is left.
    ///
    /// # Panics
    /// When drivers do not settle, or the exit waits for a retry (the clock has to move).
    pub fn resign(&self) -> Result<(), Error> {
        {
            let mut slot = self.slot();
            if let Slot::Waiting(_) = &*slot {
                *slot = Slot::Cancelled;
            }
            // Cancels a candidacy, resigns a term (also one handed to the code under test).
            self.shared.request_cancel();
        }
        if let Err(e) = self.clock.settle() {
            panic!("{e}");
        }
        let state = self.shared.lock();
        crate::leadership::exit_outcome(&state).unwrap_or_else(|| {
            panic!(
                "the exit of `{}` waits for a retry (its calls failed): move the clock with \
                 `advance` until `is_done`, then read `error`",
                self.shared.member
            )
        })
    }
}
