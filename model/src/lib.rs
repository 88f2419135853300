//! Exhaustive model checking of the real [`Candidate`] state machine (issue 36).
//!
//! Every member of the modelled role is the unmodified `kafka_coordination_core` [`Candidate`];
//! the model supplies only an environment that does what Kafka guarantees and no more, and
//! [stateright](https://docs.rs/stateright)'s checker visits every interleaving of it up to a
//! time horizon: depth-first for the exhaustive runs, breadth-first (for the shortest trace)
//! when a mutation test looks for a counterexample.
//!
//! # The environment
//!
//! * **Time** is discrete: one model step is one millisecond of global time
//!   ([`Action::Advance`]), up to [`Config::horizon`]. Every member reads its own clock, global
//!   time plus a fixed offset in `0..=skew` (every combination is an initial state). A member
//!   whose [`Candidate::poll_timeout`] has come gets [`Event::Tick`] before time moves on
//!   (drivers wake on time), unless it is paused.
//! * **The coordinator** mints pairs (producer id 1, epochs 0, 1, 2, ...) atomically on
//!   `AcquireEpoch`; one minted while a transaction is open aborts it and skips an epoch (the
//!   fence bump plus the client's retry after CONCURRENT_TRANSACTIONS). It answers
//!   `DescribeRole` (DescribeTransactions) with the current pair, the transaction state and the
//!   start time of an open transaction. A transaction open for a lease duration may be aborted
//!   by the coordinator at any later step, with an epoch bump ([`Action::TimeoutAbort`]).
//! * **The partition** is one log in offset order. Registrations and tombstones (`Append`) are
//!   committed at once. A lease write (`WriteLease`) carrying a pair other than the current one
//!   is fenced; otherwise it opens a transaction and appends an open record, and a later step
//!   commits it ([`Action::Commit`]) and answers. Reads are read_committed: records up to the
//!   last stable offset (the first open record), aborted records left out, `stalled` when an
//!   open transaction holds the last stable offset below the log's end. A long poll
//!   (`wait_until`) is answered once a committed record past its start is readable, or when
//!   the reader's clock reaches `wait_until`.
//! * **Faults**, each from a budget in the state: a call's answer lost ([`Action::Lose`]: the
//!   request was dropped, or it took effect and the answer was; the member gets `Failed`), a
//!   call delayed ([`Action::Delay`]: served now, answered at any later step, or a transaction
//!   left open across steps, which stalls readers), a member paused for
//!   [`Config::pause_ms`] ([`Action::Pause`], with its request waiting, or
//!   [`Action::PauseServed`], with it served and the answer waiting; no ticks, no answers, its
//!   clock runs on), crashed for good ([`Action::Crash`]: its open transaction stays open) or
//!   restarted at once ([`Action::Restart`]: a new `Candidate` under the same member id), and
//!   a leader asked to resign ([`Action::Resign`]).
//!
//! # Reductions
//!
//! * A due tick is taken first and alone: it only issues its member's next command, which no
//!   other action and no property reads.
//! * A crash or pause strikes a member in the middle of a call: between its calls a member does
//!   nothing another could notice, so a crash there is the same to the others as one at its
//!   next call (the bounded properties then count from a later fault, a slightly weaker
//!   check).
//! * Members differ only in name, so one assignment of clock offsets per multiset is explored.
//! * Faults can be confined to a window ([`Config::faults_after`], [`Config::faults_before`]).
//!
//! # Findings in the real machine, fixed
//!
//! None broke safety; each broke property 7 (exactly one election) or 6 (resign hands over).
//! The core fixes them; `finding_*` in `tests/check.rs` and the exhaustive runs keep them
//! fixed, and `core/tests/machine.rs` has a unit test for each.
//!
//! 1. Three members; the first registers, mints, opens its claim and dies before the commit.
//!    The other two register behind the open claim, so their reads stop short of their own
//!    registrations and their turns pass unseen. The coordinator's abort released both reads
//!    at once and both minted. Fix: a read that is the first past the member's registration,
//!    after reads that were held short of it, counts as a release when the turn came after
//!    the member registered: the ranks stagger again from then.
//! 2. The lease holder restarts under the same member id and registers again before a standby
//!    registers. The standby skipped the holder by name (rank 0), as did the restarted holder.
//!    Fix: `RoleState::rank_at` skips the holder only through a registration older than its
//!    lease record. Exploring the fix found two more ways for it to go wrong, fixed too: a
//!    member that has read neither its registration nor any lease (the role's first claim
//!    open) no longer challenges (its rank is not known; it reads again until the stall
//!    ends), and a wait begun for another challenge
//!    before the member read its own registration is judged again once it has.
//! 3. (Property 6.) A standby that deferred to a resign's exit pair waited on a plain timer,
//!    missing the lease tombstone the resign wrote a moment later, so the hand-over took a
//!    lease. Fix: a deferring (or re-staggered, or beaten) standby tails the partition until
//!    its turn, and a check taken before the read that moved the lease is not acted on.
//!
//! 4. Three members; the role's first challenger restarts inside its open claim and
//!    registers again behind it, where no read reaches until the coordinator aborts the claim.
//!    A standby that had read the old registration counted it ahead, so its turn fell on the
//!    turn of the standby behind it on the true roster; it acted on its stale rank just as the
//!    abort ended the stall, and the other read its fresh one: both minted. Fix: a read that
//!    ends a stall and moves its member up past its turn counts as a release, so the ranks
//!    stagger again from then. Found with `MODEL_MEMBERS=3 MODEL_HORIZON=16
//!    MODEL_FAULTS_BEFORE=2 MODEL_DELAYS=0 MODEL_RESIGNS=0 MODEL_FIND="exactly one"
//!    scripts/model-check.sh` (34 million states breadth-first); the smallest configuration
//!    that shows it (a crash budget with a restart in the first millisecond) is
//!    `finding_restart_inside_an_open_claim_mints_one_pair`.
//!
//! Deferring to a claim whose transaction the coordinator reports open now ends a lease
//! after that transaction began (when the member's own registration is read), so that the
//! members released by a dead claim's abort count from about the same instant.
//!
//! A broker that serves reads past the last stable offset ([`Mutation::ReadPastLso`]) breaks
//! none of the properties in the configurations tried: read_committed protects the standbys'
//! timing (a lease read from a claim that is later aborted delays them or passes members over),
//! which the bounds above absorb, not safety.
//!
//! Not modelled: producer-id changes and epoch exhaustion, the coordinator's `Prepare*` states,
//! compaction, guarded writes of the role's work (`Event::Superseded`), transaction version 2,
//! clocks that drift during a run, and `Fatal` errors.
//!
//! # Properties
//!
//! Each is an `always` property of stateright, over the state and a few ghost variables the
//! environment keeps. Liveness is bounded: stateright's `eventually` is only checked on
//! terminal states of the BFS and can miss a counterexample at a DAG join (its own FIXME), so
//! "eventually" is stated as a bound on the time a condition may last.
//!
//! 1. **Fence** ([`FENCE`]): the broker never accepts a write of a pair older than one it has
//!    already accepted a write from after the newer pair was minted.
//! 2. **One current leader** ([`ONE_LEADER`]): at most one member believes it leads (it was
//!    told `Elected` and not `Deposed` or `Ended` since) with the pair the coordinator calls
//!    current (what an observer's DescribeTransactions returns).
//! 3. **Lease order** ([`LEASE_ORDER`]): in the committed log, a lease record (or lease
//!    tombstone) written with a superseded pair never follows one written with a newer pair.
//! 4. **No failback** ([`NO_FAILBACK`]): a member that restarted registers again: its join
//!    offset lies past every record written before its restart, and in the role state read
//!    from the log it ranks behind every ranked member registered before its restart.
//! 5. **A member leads** ([`LIVENESS`], bounded liveness): while some member is up, not
//!    paused and has not ended, and no delayed answer is outstanding, the role is never without
//!    a leader for longer than a lease, a stagger per other member, twice the skew and a few
//!    milliseconds of calls, counted from the later of the moment it lost its leader and the
//!    last fault; one lease more when that fault was not a leader's crash or resign (a
//!    challenger that dies or pauses after its acquire costs those who deferred to it a lease,
//!    as the machine documents).
//! 6. **Resign hands over** ([`HANDOVER`]): after a leader resigns, with no fault since, a
//!    successor leads within a stagger per remaining member plus twice the skew and a few
//!    milliseconds: well before the resigned lease would have run out.
//! 7. **Exactly one election** ([`ONE_ELECTION`]): in a path where no answer was lost or
//!    delayed and no member paused, the members mint at most one pair for their challenges
//!    between two elections (a crash starts the count again); with (5), exactly one.
//! 8. **A deposed leader steps down** ([`STEP_DOWN`]): a member that is not paused and waits on
//!    no delayed answer stops believing it leads within a renew interval and a few
//!    milliseconds after its pair was superseded (or after the last fault).
//! 9. **The machine accepts its answers** ([`NO_MACHINE_ERROR`]): `Candidate::handle` never
//!    returns an error and never has two I/O commands outstanding.

use std::fmt::{self, Write as _};
use std::time::Duration;

use kafka_coordination_core::machine::{Candidate, Command, Event, Status};
use kafka_coordination_core::{
    FencingToken, LeadershipStatus, MemberId, Record, Role, RoleState, Timing, TransactionState,
    UnixMillis,
};
use stateright::{Model, Property};

/// Property names, as the checker reports them.
pub const FENCE: &str = "fence: no write of a superseded pair is accepted";
/// See the crate docs, property 2.
pub const ONE_LEADER: &str = "at most one member leads with the current pair";
/// See the crate docs, property 3.
pub const LEASE_ORDER: &str = "no lease record of a superseded pair follows a newer one";
/// See the crate docs, property 4.
pub const NO_FAILBACK: &str = "no failback: a restarted member ranks behind earlier members";
/// See the crate docs, property 5.
pub const LIVENESS: &str = "a member leads within the failover bound";
/// See the crate docs, property 6.
pub const HANDOVER: &str = "a resign hands over without waiting for the lease";
/// See the crate docs, property 7.
pub const ONE_ELECTION: &str = "exactly one election: one pair minted per failover";
/// See the crate docs, property 8.
pub const STEP_DOWN: &str = "a deposed leader steps down within a renew interval";
/// See the crate docs, property 9.
pub const NO_MACHINE_ERROR: &str = "the machine accepts every answer";

/// Every property's name, in the order of the crate docs.
pub const PROPERTIES: [&str; 9] = [
    FENCE,
    ONE_LEADER,
    LEASE_ORDER,
    NO_FAILBACK,
    LIVENESS,
    HANDOVER,
    ONE_ELECTION,
    STEP_DOWN,
    NO_MACHINE_ERROR,
];

/// The producer id of every minted pair.
const PRODUCER_ID: i64 = 1;

/// A deliberate defect, to show that a property fails when the code it guards is broken.
/// Each is made in the environment or in the driver around the real machine, never in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The last member's clock runs a stagger ahead (beyond the skew bound): as rank 1 it
    /// challenges with rank 0, before its stagger.
    EarlyChallenge,
    /// The driver reads a fence on a leader's lease write as a transient failure: the leader
    /// keeps leading after a fenced renewal.
    IgnoreFence,
    /// The broker serves reads past the last stable offset: open records are readable, and
    /// reads never stall.
    ReadPastLso,
    /// The broker accepts lease writes of superseded pairs.
    NoFence,
    /// InitProducerId is not atomic: a pair minted and not yet used is handed out again.
    SharedPair,
    /// A restarted member resumes from the machine it had before the crash (a rank from a
    /// configuration file) instead of registering again.
    Failback,
    /// A resigning leader's lease tombstone never lands (the driver fails it).
    ResignKeepsLease,
    /// Standbys never mint: every challenge's AcquireEpoch fails.
    NeverChallenge,
    /// The driver hands a registration's answer to the machine twice.
    DoubleAnswer,
}

/// What a run explores.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many members compete for the role.
    pub members: usize,
    /// The last instant of global time explored, in milliseconds.
    pub horizon: i64,
    /// Lease duration in milliseconds.
    pub lease_ms: u64,
    /// Renew interval in milliseconds.
    pub renew_ms: u64,
    /// Challenge stagger in milliseconds.
    pub stagger_ms: u64,
    /// Every member's clock is ahead of global time by `0..=skew` milliseconds.
    pub skew: i64,
    /// Crashes the run may contain.
    pub crashes: u8,
    /// How many of those crashes may be restarts (the process comes back at once).
    pub restarts: u8,
    /// Pauses.
    pub pauses: u8,
    /// Lost answers.
    pub losses: u8,
    /// Delayed answers.
    pub delays: u8,
    /// Resigns of a leader.
    pub resigns: u8,
    /// Faults happen only before this instant (global time); `None`: any time.
    pub faults_before: Option<i64>,
    /// Faults happen only at or after this instant (global time).
    pub faults_after: i64,
    /// Whether members evict the members they pass over (`Candidate::set_evict_passed_over`).
    pub evict: bool,
    /// A deliberate defect, or `None` for the real thing.
    pub mutation: Option<Mutation>,
    /// Slack, in milliseconds, the bounded properties allow for calls and rechecks.
    pub slack: i64,
    /// How long a pause lasts, in milliseconds (default: a lease and one more).
    pub pause_ms: i64,
}

impl Config {
    /// A configuration with `members` members, the default timing (lease 8 ms, renew 3 ms,
    /// stagger 3 ms, skew 1 ms), one fault of each kind and no mutation.
    pub fn new(members: usize, horizon: i64) -> Config {
        Config {
            members,
            horizon,
            lease_ms: 8,
            renew_ms: 3,
            stagger_ms: 3,
            skew: 1,
            crashes: 1,
            restarts: 1,
            pauses: 1,
            losses: 1,
            delays: 1,
            resigns: 1,
            faults_before: None,
            faults_after: 0,
            evict: false,
            mutation: None,
            slack: 4,
            pause_ms: 9,
        }
    }

    /// The timing every member uses.
    pub fn timing(&self) -> Timing {
        Timing {
            partitions: 1,
            lease_duration: Duration::from_millis(self.lease_ms),
            renew_interval: Duration::from_millis(self.renew_ms),
            challenge_stagger: Duration::from_millis(self.stagger_ms),
        }
    }

    /// The longest the role may be without a leader after it lost one (property 5) when the
    /// last fault was a leader's crash or resign (or there was none); one lease more after any
    /// other fault (a challenger that died or paused after its acquire costs the members that
    /// deferred to it a lease, as the machine documents).
    pub fn failover_bound(&self) -> i64 {
        self.lease_ms as i64
            + (self.members as i64 - 1) * self.stagger_ms as i64
            + 2 * self.skew
            + self.slack
    }

    /// The longest a resign's hand-over may take (property 6).
    pub fn handover_bound(&self) -> i64 {
        (self.members as i64 - 2).max(0) * self.stagger_ms as i64 + 2 * self.skew + self.slack
    }

    /// The longest a deposed leader may go on believing it leads (property 8).
    pub fn step_down_bound(&self) -> i64 {
        self.renew_ms as i64 + self.slack
    }

    fn is(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }
}

/// The call a member has outstanding, as the environment sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Io {
    /// Nothing outstanding.
    Idle,
    /// Sent, not yet served.
    Request(Command),
    /// A lease write appended in an open transaction, not yet committed.
    InTxn {
        /// The open record's offset.
        offset: i64,
    },
    /// Served; the answer is on its way.
    Reply(Event),
}

/// One member: its machine and what the environment knows about it.
#[derive(Clone, Debug, Hash)]
pub struct Member {
    /// The machine; `None` while crashed.
    pub cand: Option<Candidate>,
    /// How far this member's clock is ahead of global time.
    pub clock: i64,
    /// Paused (no ticks, no answers) until this instant (global time).
    pub paused: bool,
    /// When the pause ends.
    pub paused_until: i64,
    /// The outstanding call.
    pub io: Io,
    /// Whether the outstanding call was delayed (it may stay outstanding while time passes).
    pub delayed: bool,
    /// The pair the driver was told it leads with.
    pub leads: Option<FencingToken>,
    /// The log's end when the member restarted.
    pub restarted_at: Option<i64>,
}

impl Member {
    fn live(&self) -> bool {
        self.cand.as_ref().is_some_and(|c| !c.is_done())
    }
}

/// How a log entry stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Txn {
    /// Readable.
    Committed,
    /// In an open transaction.
    Open,
    /// Aborted: never readable.
    Aborted,
}

/// One record of the role's partition.
#[derive(Clone, Debug, Hash)]
pub struct Entry {
    /// Key bytes.
    pub key: Vec<u8>,
    /// Value bytes; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// Committed, open or aborted.
    pub txn: Txn,
    /// The pair of a lease write.
    pub pair: Option<FencingToken>,
    /// The member that wrote it.
    pub by: usize,
}

/// The coordinator's transaction state for the role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// A pair was minted, no transaction since.
    Empty,
    /// A transaction is open since (global time).
    Ongoing(i64),
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction was aborted.
    CompleteAbort,
}

/// The broker: coordinator and partition.
#[derive(Clone, Debug, Hash)]
pub struct Broker {
    /// The partition.
    pub log: Vec<Entry>,
    /// The current epoch; `None` before the first mint.
    pub epoch: Option<i16>,
    /// The transaction state.
    pub txn: TxnState,
    /// When each epoch was minted (global time), indexed by epoch.
    pub minted_at: Vec<i64>,
    /// The newest pair of an accepted write.
    pub accepted_max: Option<FencingToken>,
}

impl Broker {
    /// The coordinator's current pair.
    pub fn pair(&self) -> Option<FencingToken> {
        self.epoch.map(|e| FencingToken::new(PRODUCER_ID, e))
    }

    fn lso(&self) -> i64 {
        self.log
            .iter()
            .position(|e| e.txn == Txn::Open)
            .unwrap_or(self.log.len()) as i64
    }

    fn readable_from(&self, from: i64, past_lso: bool) -> Vec<Record> {
        let end = if past_lso {
            self.log.len() as i64
        } else {
            self.lso()
        };
        (from.max(0)..end)
            .filter_map(|o| {
                let e = &self.log[o as usize];
                (e.txn == Txn::Committed || (past_lso && e.txn == Txn::Open)).then(|| Record {
                    offset: o,
                    key: e.key.clone(),
                    value: e.value.clone(),
                })
            })
            .collect()
    }

    fn abort_open(&mut self) {
        for e in &mut self.log {
            if e.txn == Txn::Open {
                e.txn = Txn::Aborted;
            }
        }
    }

    fn mint(&mut self, now: i64, bumps: i16) -> FencingToken {
        let next = self.epoch.map_or(0, |e| e + bumps);
        while self.minted_at.len() <= next as usize {
            self.minted_at.push(now);
        }
        self.epoch = Some(next);
        FencingToken::new(PRODUCER_ID, next)
    }
}

/// Variables the environment keeps for the properties.
#[derive(Clone, Debug, Default, Hash)]
pub struct Ghost {
    /// A write of a superseded pair was accepted.
    pub stale_write: bool,
    /// `Candidate::handle` failed, or a second I/O command was issued: what happened.
    pub machine_error: Option<String>,
    /// Since when no member believes it leads.
    pub leaderless_since: Option<i64>,
    /// The last fault (global time).
    pub disturbed_at: i64,
    /// What the last fault was.
    pub last_fault: Fault,
    /// No answer was lost or delayed and no member paused in this path.
    pub unclean: bool,
    /// Challenge mints since the last election or crash.
    pub mints: u8,
}

/// The kind of the last fault, which sets the liveness bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fault {
    /// None yet: the first election.
    #[default]
    None,
    /// A leader resigned.
    Resign,
    /// A leader crashed.
    LeaderCrash,
    /// Anything else: a crash of a member that was not leading (perhaps a challenger after
    /// its acquire), a pause or resume, a lost or delayed answer, a coordinator's abort.
    Other,
}

/// Fault budgets left.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Budget {
    /// Crashes left.
    pub crashes: u8,
    /// Restarts left.
    pub restarts: u8,
    /// Pauses left.
    pub pauses: u8,
    /// Lost answers left.
    pub losses: u8,
    /// Delays left.
    pub delays: u8,
    /// Resigns left.
    pub resigns: u8,
}

/// A state of the whole system.
// Hash is derived over every field; equality (below) compares the Debug text, which names the
// same fields, so equal states hash alike.
#[allow(clippy::derived_hash_with_manual_eq)]
#[derive(Clone, Debug, Hash)]
pub struct State {
    /// Global time (milliseconds).
    pub now: i64,
    /// The members.
    pub members: Vec<Member>,
    /// The broker.
    pub broker: Broker,
    /// Budgets left.
    pub budget: Budget,
    /// Ghost variables.
    pub ghost: Ghost,
}

// The checker identifies states by their hash; the machine has no `PartialEq`, so equality (which
// the checker uses only to rebuild paths) compares the Debug text, which names every field.
impl PartialEq for State {
    fn eq(&self, other: &State) -> bool {
        format!("{self:?}") == format!("{other:?}")
    }
}

/// A step of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Global time moves one millisecond.
    Advance,
    /// Member `i`'s timer fires.
    Tick(usize),
    /// Member `i`'s request is served and answered (a lease write: appended, open).
    Complete(usize),
    /// Member `i`'s open lease transaction commits and is answered.
    Commit(usize),
    /// A waiting answer reaches member `i`.
    Deliver(usize),
    /// Member `i`'s call fails: its request or its answer is lost.
    Lose(usize),
    /// Member `i`'s call is served now and answered later (or its transaction stays open).
    Delay(usize),
    /// Member `i` crashes for good.
    Crash(usize),
    /// Member `i` crashes and its process starts again at once (a new machine, same id).
    Restart(usize),
    /// Member `i` pauses for `Config::pause_ms`; its outstanding request waits with it.
    Pause(usize),
    /// Member `i` pauses for `Config::pause_ms` right after the broker served its outstanding
    /// request; the answer waits.
    PauseServed(usize),
    /// Member `i`'s pause ends.
    Resume(usize),
    /// Leader `i` is asked to resign.
    Resign(usize),
    /// The coordinator aborts a transaction open for longer than its timeout.
    TimeoutAbort,
}

/// The model: a configuration.
#[derive(Clone, Debug)]
pub struct CoordinationModel {
    /// What it explores.
    pub cfg: Config,
}

fn role() -> Role {
    Role::new("r").expect("valid role")
}

fn member_id(i: usize) -> MemberId {
    MemberId::new(format!("m{i}")).expect("valid member id")
}

impl CoordinationModel {
    /// A model of `cfg`.
    pub fn new(cfg: Config) -> CoordinationModel {
        CoordinationModel { cfg }
    }

    fn local(&self, s: &State, i: usize) -> UnixMillis {
        UnixMillis(s.now + s.members[i].clock)
    }

    fn candidate(&self, s: &State, i: usize) -> Candidate {
        let mut c = Candidate::new(role(), member_id(i), self.cfg.timing(), self.local(s, i))
            .expect("valid timing");
        c.set_evict_passed_over(self.cfg.evict);
        c
    }

    fn faults_allowed(&self, s: &State) -> bool {
        s.now >= self.cfg.faults_after && self.cfg.faults_before.is_none_or(|t| s.now < t)
    }

    /// Whether the broker would answer member `i`'s request now (a long poll waits for data).
    fn servable(&self, s: &State, i: usize) -> bool {
        let Io::Request(Command::ReadPartition {
            from_offset,
            wait_until: Some(until),
            ..
        }) = &s.members[i].io
        else {
            return matches!(s.members[i].io, Io::Request(_));
        };
        self.local(s, i) >= *until
            || !s
                .broker
                .readable_from(*from_offset, self.cfg.is(Mutation::ReadPastLso))
                .is_empty()
    }

    fn due(&self, s: &State, i: usize) -> bool {
        let m = &s.members[i];
        m.io == Io::Idle
            && m.cand
                .as_ref()
                .and_then(|c| c.poll_timeout())
                .is_some_and(|at| at <= self.local(s, i))
    }

    /// Whether member `i` has something that must happen before time moves on.
    fn urgent(&self, s: &State, i: usize) -> bool {
        let m = &s.members[i];
        if m.cand.is_some() && m.paused && s.now >= m.paused_until {
            return true;
        }
        if m.cand.is_none() || m.paused {
            return false;
        }
        if self.due(s, i) {
            return true;
        }
        !m.delayed
            && match &m.io {
                Io::Idle => false,
                Io::Request(_) => self.servable(s, i),
                Io::InTxn { .. } | Io::Reply(_) => true,
            }
    }

    /// Serves member `i`'s request at the broker: the answer, or `None` for a lease write left
    /// open in its transaction (then `m.io` is `InTxn`).
    fn serve(&self, s: &mut State, i: usize) -> Option<Event> {
        let Io::Request(cmd) = std::mem::replace(&mut s.members[i].io, Io::Idle) else {
            unreachable!("serve without a request");
        };
        let now = s.now;
        let leaving = s.members[i]
            .cand
            .as_ref()
            .is_some_and(|c| c.status() == Status::Leaving);
        let b = &mut s.broker;
        match cmd {
            Command::Append { key, value, .. } => {
                b.log.push(Entry {
                    key,
                    value,
                    txn: Txn::Committed,
                    pair: None,
                    by: i,
                });
                Some(Event::Appended {
                    offset: b.log.len() as i64 - 1,
                })
            }
            Command::ReadPartition { from_offset, .. } => {
                let past = self.cfg.is(Mutation::ReadPastLso);
                let records = b.readable_from(from_offset, past);
                let end_offset = if past { b.log.len() as i64 } else { b.lso() };
                Some(Event::RecordsRead {
                    records,
                    end_offset: end_offset.max(from_offset),
                    stalled: end_offset < b.log.len() as i64,
                })
            }
            Command::DescribeRole { .. } => {
                let status = match b.epoch {
                    None => LeadershipStatus::NOT_FOUND,
                    Some(e) => {
                        let (state, started) = match b.txn {
                            TxnState::Empty => (TransactionState::Empty, None),
                            TxnState::Ongoing(at) => (TransactionState::Ongoing, Some(at)),
                            TxnState::CompleteCommit => (TransactionState::CompleteCommit, None),
                            TxnState::CompleteAbort => (TransactionState::CompleteAbort, None),
                        };
                        let st = LeadershipStatus::described(PRODUCER_ID, e, state);
                        match started {
                            Some(at) => st.with_transaction_started(UnixMillis(at)),
                            None => st,
                        }
                    }
                };
                Some(Event::Described { status })
            }
            Command::AcquireEpoch { .. } => {
                if self.cfg.is(Mutation::NeverChallenge) && !leaving {
                    return Some(Event::Failed);
                }
                if !leaving {
                    s.ghost.mints = s.ghost.mints.saturating_add(1);
                }
                let b = &mut s.broker;
                if self.cfg.is(Mutation::SharedPair) && b.txn == TxnState::Empty {
                    if let Some(p) = b.pair() {
                        return Some(Event::EpochGranted { token: p });
                    }
                }
                let token = if let TxnState::Ongoing(_) = b.txn {
                    b.abort_open();
                    b.mint(now, 2)
                } else {
                    b.mint(now, 1)
                };
                b.txn = TxnState::Empty;
                Some(Event::EpochGranted { token })
            }
            Command::WriteLease {
                key, value, token, ..
            } => {
                if value.is_none() && self.cfg.is(Mutation::ResignKeepsLease) {
                    return Some(Event::Failed);
                }
                let current = b.pair() == Some(token);
                if !current && !self.cfg.is(Mutation::NoFence) {
                    return Some(Event::Fenced);
                }
                if b.accepted_max
                    .is_some_and(|m| token.producer_epoch < m.producer_epoch)
                {
                    s.ghost.stale_write = true;
                }
                let b = &mut s.broker;
                b.accepted_max = Some(match b.accepted_max {
                    Some(m) if m.producer_epoch > token.producer_epoch => m,
                    _ => token,
                });
                if !current {
                    // The defective broker commits a stale write on its own.
                    b.log.push(Entry {
                        key,
                        value,
                        txn: Txn::Committed,
                        pair: Some(token),
                        by: i,
                    });
                    return Some(Event::LeaseWritten {
                        offset: b.log.len() as i64 - 1,
                    });
                }
                if !matches!(b.txn, TxnState::Ongoing(_)) {
                    b.txn = TxnState::Ongoing(now);
                }
                b.log.push(Entry {
                    key,
                    value,
                    txn: Txn::Open,
                    pair: Some(token),
                    by: i,
                });
                s.members[i].io = Io::InTxn {
                    offset: b.log.len() as i64 - 1,
                };
                None
            }
            other => unreachable!("not an I/O command: {other:?}"),
        }
    }

    fn commit(&self, s: &mut State, i: usize) -> Event {
        let Io::InTxn { offset } = std::mem::replace(&mut s.members[i].io, Io::Idle) else {
            unreachable!("commit without a transaction");
        };
        let b = &mut s.broker;
        let e = &mut b.log[offset as usize];
        if e.txn == Txn::Open {
            e.txn = Txn::Committed;
            b.txn = TxnState::CompleteCommit;
            Event::LeaseWritten { offset }
        } else {
            // Aborted meanwhile (by a newer pair's InitProducerId or a timeout): EndTxn fails.
            Event::Fenced
        }
    }

    /// Feeds `event` to member `i` at its clock and collects its commands.
    fn deliver(&self, s: &mut State, i: usize, event: Event) {
        let event = match event {
            Event::Fenced if self.cfg.is(Mutation::IgnoreFence) && s.members[i].leads.is_some() => {
                Event::Failed
            }
            e => e,
        };
        let now = self.local(s, i);
        let m = &mut s.members[i];
        m.delayed = false;
        let Some(c) = m.cand.as_mut() else { return };
        if let Err(e) = c.handle(now, event.clone()) {
            s.ghost.machine_error = Some(format!("m{i}: {e} ({})", event.name()));
        }
        if self.cfg.is(Mutation::DoubleAnswer) && matches!(event, Event::Appended { .. }) {
            if let Err(e) = c.handle(now, event.clone()) {
                s.ghost.machine_error = Some(format!("m{i}: {e} ({}, again)", event.name()));
            }
        }
        self.drain(s, i);
    }

    fn drain(&self, s: &mut State, i: usize) {
        loop {
            let m = &mut s.members[i];
            let Some(cmd) = m.cand.as_mut().and_then(|c| c.poll_command()) else {
                break;
            };
            match cmd {
                Command::Elected { token, .. } => {
                    m.leads = Some(token);
                    s.ghost.mints = 0;
                    s.ghost.leaderless_since = None;
                }
                Command::Deposed { .. } | Command::Ended { .. } => m.leads = None,
                io => {
                    if m.io != Io::Idle {
                        s.ghost.machine_error = Some(format!("m{i}: a second I/O command {io:?}"));
                    }
                    m.io = Io::Request(io);
                    m.delayed = false;
                }
            }
        }
    }

    fn disturb(s: &mut State, fault: Fault) {
        s.ghost.disturbed_at = s.now;
        s.ghost.last_fault = fault;
    }

    fn after(&self, s: &mut State) {
        if s.members.iter().all(|m| m.leads.is_none()) {
            s.ghost.leaderless_since.get_or_insert(s.now);
        } else {
            s.ghost.leaderless_since = None;
        }
    }
}

impl Model for CoordinationModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let n = self.cfg.members;
        let options = (self.cfg.skew + 1) as usize;
        let mut out = Vec::new();
        for combo in 0..options.pow(n as u32) {
            let mut clocks = Vec::with_capacity(n);
            let mut c = combo;
            for _ in 0..n {
                clocks.push((c % options) as i64);
                c /= options;
            }
            // Members differ only in name: one assignment of offsets per multiset suffices.
            if clocks.windows(2).any(|w| w[0] > w[1]) {
                continue;
            }
            if self.cfg.is(Mutation::EarlyChallenge) {
                clocks[n - 1] += self.cfg.stagger_ms as i64;
            }
            let mut s = State {
                now: 0,
                members: clocks
                    .iter()
                    .map(|&clock| Member {
                        cand: None,
                        clock,
                        paused: false,
                        paused_until: 0,
                        io: Io::Idle,
                        delayed: false,
                        leads: None,
                        restarted_at: None,
                    })
                    .collect(),
                broker: Broker {
                    log: Vec::new(),
                    epoch: None,
                    txn: TxnState::Empty,
                    minted_at: Vec::new(),
                    accepted_max: None,
                },
                budget: Budget {
                    crashes: self.cfg.crashes,
                    restarts: self.cfg.restarts,
                    pauses: self.cfg.pauses,
                    losses: self.cfg.losses,
                    delays: self.cfg.delays,
                    resigns: self.cfg.resigns,
                },
                ghost: Ghost {
                    leaderless_since: Some(0),
                    ..Ghost::default()
                },
            };
            for i in 0..n {
                s.members[i].cand = Some(self.candidate(&s, i));
                self.drain(&mut s, i);
            }
            out.push(s);
        }
        out
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        if s.ghost.machine_error.is_some() {
            return;
        }
        // A tick only issues its member's next command: it changes nothing another action
        // reads, and no property reads it. The first due tick goes first, alone (a partial
        // order reduction; a fault at that instant then comes just after the tick).
        if let Some(i) = (0..s.members.len())
            .find(|&i| !s.members[i].paused && s.members[i].cand.is_some() && self.due(s, i))
        {
            out.push(Action::Tick(i));
            return;
        }
        let faults = self.faults_allowed(s);
        let mut urgent = false;
        for (i, m) in s.members.iter().enumerate() {
            urgent |= self.urgent(s, i);
            let Some(c) = &m.cand else {
                continue;
            };
            if m.paused {
                if s.now >= m.paused_until {
                    out.push(Action::Resume(i));
                }
            } else {
                match &m.io {
                    Io::Idle => {}
                    Io::Request(_) => {
                        if self.servable(s, i) {
                            out.push(Action::Complete(i));
                        }
                    }
                    Io::InTxn { .. } => out.push(Action::Commit(i)),
                    Io::Reply(_) => out.push(Action::Deliver(i)),
                }
                if faults && m.io != Io::Idle {
                    if s.budget.losses > 0 {
                        out.push(Action::Lose(i));
                    }
                    if s.budget.delays > 0
                        && !m.delayed
                        && matches!(m.io, Io::Request(_) | Io::InTxn { .. })
                        && (!matches!(m.io, Io::Request(_)) || self.servable(s, i))
                    {
                        out.push(Action::Delay(i));
                    }
                }
                if faults && m.io != Io::Idle && s.budget.pauses > 0 && !c.is_done() {
                    out.push(Action::Pause(i));
                    if matches!(m.io, Io::Request(_)) && self.servable(s, i) {
                        out.push(Action::PauseServed(i));
                    }
                }
                if faults && s.budget.resigns > 0 && m.leads.is_some() {
                    out.push(Action::Resign(i));
                }
            }
            // A process dies or stops in the middle of a call: between its calls it does
            // nothing another member could notice, so a crash or pause there is the same to
            // them as one at its next call (a reduction; the bounds then count from later).
            let in_call = m.io != Io::Idle && !m.paused;
            if faults && in_call && s.budget.crashes > 0 && !c.is_done() {
                out.push(Action::Crash(i));
                if s.budget.restarts > 0 {
                    out.push(Action::Restart(i));
                }
            }
        }
        if let TxnState::Ongoing(at) = s.broker.txn {
            if s.now >= at + self.cfg.lease_ms as i64 {
                out.push(Action::TimeoutAbort);
            }
        }
        if !urgent && s.now < self.cfg.horizon {
            out.push(Action::Advance);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Advance => s.now += 1,
            Action::Tick(i) => {
                let now = self.local(&s, i);
                if let Some(c) = s.members[i].cand.as_mut() {
                    if let Err(e) = c.handle(now, Event::Tick) {
                        s.ghost.machine_error = Some(format!("m{i}: {e} (Tick)"));
                    }
                }
                self.drain(&mut s, i);
            }
            Action::Complete(i) => {
                if let Some(ev) = self.serve(&mut s, i) {
                    self.deliver(&mut s, i, ev);
                }
            }
            Action::Commit(i) => {
                if s.members[i].delayed {
                    Self::disturb(&mut s, Fault::Other);
                }
                let ev = self.commit(&mut s, i);
                self.deliver(&mut s, i, ev);
            }
            Action::Deliver(i) => {
                let Io::Reply(ev) = std::mem::replace(&mut s.members[i].io, Io::Idle) else {
                    unreachable!("deliver without an answer");
                };
                if s.members[i].delayed {
                    Self::disturb(&mut s, Fault::Other);
                }
                self.deliver(&mut s, i, ev);
            }
            Action::Lose(i) => {
                s.budget.losses -= 1;
                s.ghost.unclean = true;
                Self::disturb(&mut s, Fault::Other);
                match s.members[i].io.clone() {
                    Io::InTxn { .. } => {
                        self.commit(&mut s, i);
                    }
                    Io::Request(_) | Io::Reply(_) => s.members[i].io = Io::Idle,
                    Io::Idle => unreachable!("lose without a call"),
                }
                s.members[i].io = Io::Idle;
                self.deliver(&mut s, i, Event::Failed);
            }
            Action::Delay(i) => {
                s.budget.delays -= 1;
                s.ghost.unclean = true;
                Self::disturb(&mut s, Fault::Other);
                if matches!(s.members[i].io, Io::Request(_)) {
                    if let Some(ev) = self.serve(&mut s, i) {
                        s.members[i].io = Io::Reply(ev);
                    }
                }
                s.members[i].delayed = true;
            }
            Action::Crash(i) | Action::Restart(i) => {
                let restart = matches!(action, Action::Restart(_));
                s.budget.crashes -= 1;
                if restart {
                    s.budget.restarts -= 1;
                }
                s.ghost.mints = 0;
                let leading = s.members[i]
                    .cand
                    .as_ref()
                    .is_some_and(|c| c.status() == Status::Leading);
                Self::disturb(
                    &mut s,
                    if leading {
                        Fault::LeaderCrash
                    } else {
                        Fault::Other
                    },
                );
                let m = &mut s.members[i];
                let old = m.cand.take();
                m.io = Io::Idle;
                m.delayed = false;
                m.paused = false;
                m.leads = None;
                if restart {
                    m.restarted_at = Some(s.broker.log.len() as i64);
                    match old.filter(|_| self.cfg.is(Mutation::Failback)) {
                        Some(mut old) => {
                            // The old machine, with its old registration; its outstanding
                            // call died with the process.
                            while old.poll_command().is_some() {}
                            let had_io = old.poll_timeout().is_none();
                            s.members[i].cand = Some(old);
                            if had_io {
                                self.deliver(&mut s, i, Event::Failed);
                            }
                        }
                        None => {
                            s.members[i].cand = Some(self.candidate(&s, i));
                            self.drain(&mut s, i);
                        }
                    }
                }
            }
            Action::Pause(i) | Action::PauseServed(i) => {
                s.budget.pauses -= 1;
                s.ghost.unclean = true;
                Self::disturb(&mut s, Fault::Other);
                if matches!(action, Action::PauseServed(_)) {
                    if let Some(ev) = self.serve(&mut s, i) {
                        s.members[i].io = Io::Reply(ev);
                    }
                }
                s.members[i].paused = true;
                s.members[i].paused_until = s.now + self.cfg.pause_ms;
            }
            Action::Resume(i) => {
                Self::disturb(&mut s, Fault::Other);
                s.members[i].paused = false;
            }
            Action::Resign(i) => {
                s.budget.resigns -= 1;
                Self::disturb(&mut s, Fault::Resign);
                let now = self.local(&s, i);
                if let Some(c) = s.members[i].cand.as_mut() {
                    let _ = c.handle(now, Event::Resign);
                }
                self.drain(&mut s, i);
            }
            Action::TimeoutAbort => {
                Self::disturb(&mut s, Fault::Other);
                s.broker.abort_open();
                s.broker.mint(s.now, 1);
                s.broker.txn = TxnState::CompleteAbort;
            }
        }
        self.after(&mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_MACHINE_ERROR, |_, s: &State| {
                s.ghost.machine_error.is_none()
            }),
            Property::always(FENCE, |_, s: &State| !s.ghost.stale_write),
            Property::always(ONE_LEADER, |_, s: &State| {
                let current = s.broker.pair();
                s.members
                    .iter()
                    .filter(|m| m.leads.is_some() && m.leads == current)
                    .count()
                    <= 1
            }),
            Property::always(LEASE_ORDER, |_, s: &State| {
                let pairs: Vec<FencingToken> = s
                    .broker
                    .log
                    .iter()
                    .filter(|e| e.txn == Txn::Committed)
                    .filter_map(|e| e.pair)
                    .collect();
                pairs
                    .windows(2)
                    .all(|w| w[0].producer_epoch <= w[1].producer_epoch)
            }),
            Property::always(NO_FAILBACK, no_failback),
            Property::always(LIVENESS, |model, s: &State| {
                let Some(since) = s.ghost.leaderless_since else {
                    return true;
                };
                if !waiting_is_fair(s) {
                    return true;
                }
                let bound = match s.ghost.last_fault {
                    Fault::Other => model.cfg.failover_bound() + model.cfg.lease_ms as i64,
                    _ => model.cfg.failover_bound(),
                };
                s.now - since.max(s.ghost.disturbed_at) <= bound
            }),
            Property::always(HANDOVER, |model, s: &State| {
                let Some(since) = s.ghost.leaderless_since else {
                    return true;
                };
                if s.ghost.last_fault != Fault::Resign || !waiting_is_fair(s) {
                    return true;
                }
                s.now - since.max(s.ghost.disturbed_at) <= model.cfg.handover_bound()
            }),
            Property::always(ONE_ELECTION, |_, s: &State| {
                s.ghost.unclean || s.ghost.mints <= 1
            }),
            Property::always(STEP_DOWN, |model, s: &State| {
                let current = s.broker.pair();
                s.members.iter().all(|m| {
                    let Some(t) = m.leads else { return true };
                    if Some(t) == current || m.paused || m.delayed {
                        return true;
                    }
                    let next = (t.producer_epoch as usize) + 1;
                    let superseded = s.broker.minted_at.get(next).copied().unwrap_or(s.now);
                    s.now - superseded.max(s.ghost.disturbed_at) <= model.cfg.step_down_bound()
                })
            }),
        ]
    }
}

/// A leader may be expected: some member is up, not paused and not ended, and no delayed
/// answer is outstanding.
fn waiting_is_fair(s: &State) -> bool {
    s.members.iter().any(|m| m.live() && !m.paused) && s.members.iter().all(|m| !m.delayed)
}

fn no_failback(_: &CoordinationModel, s: &State) -> bool {
    if s.members
        .iter()
        .all(|m| m.restarted_at.is_none() || m.cand.is_none())
    {
        return true;
    }
    let committed: Vec<Record> = s
        .broker
        .log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.txn == Txn::Committed)
        .map(|(o, e)| Record {
            offset: o as i64,
            key: e.key.clone(),
            value: e.value.clone(),
        })
        .collect();
    let state = RoleState::build(role(), &committed);
    s.members.iter().enumerate().all(|(i, m)| {
        let (Some(p), Some(c)) = (m.restarted_at, &m.cand) else {
            return true;
        };
        let Some(join) = c.join_offset() else {
            return true;
        };
        if join < p {
            return false;
        }
        let me = member_id(i);
        if state.join_offset(&me) != Some(join) {
            return true;
        }
        let Some(mine) = state.rank_of(&me) else {
            return true;
        };
        let holder = state.lease().map(|e| e.lease.member.clone());
        state
            .roster()
            .filter(|(other, o)| *o < p && **other != me && Some(*other) != holder.as_ref())
            .all(|(other, _)| state.rank_of(other).is_none_or(|r| r < mine))
    })
}

/// One line per member and one for the broker: a state as a trace prints it.
pub fn summary(s: &State) -> String {
    let mut out = format!("t={:>2}", s.now);
    for (i, m) in s.members.iter().enumerate() {
        let status = match &m.cand {
            None => "down".to_string(),
            Some(c) => format!("{:?}", c.status()),
        };
        let io = match &m.io {
            Io::Idle => "-".to_string(),
            Io::Request(c) => format!("req {}", command_name(c)),
            Io::InTxn { offset } => format!("txn@{offset}"),
            Io::Reply(e) => format!("reply {}", e.name()),
        };
        let _ = write!(
            out,
            " | m{i}{}: {status}{}{}{} io={io}",
            if m.clock != 0 {
                format!("(+{})", m.clock)
            } else {
                String::new()
            },
            m.leads
                .map(|t| format!(" leads e{}", t.producer_epoch))
                .unwrap_or_default(),
            if m.paused { " PAUSED" } else { "" },
            if m.delayed { " DELAYED" } else { "" },
        );
    }
    let b = &s.broker;
    let _ = write!(
        out,
        " | coord e{} {:?} | log:",
        b.epoch.map_or("-".to_string(), |e| e.to_string()),
        b.txn
    );
    for (o, e) in b.log.iter().enumerate() {
        let kind = match (&e.pair, &e.value) {
            (Some(p), Some(_)) => format!("L(m{},e{})", e.by, p.producer_epoch),
            (Some(p), None) => format!("L-(m{},e{})", e.by, p.producer_epoch),
            (None, Some(_)) => format!("R(m{})", e.by),
            (None, None) => format!("R-(by m{})", e.by),
        };
        let txn = match e.txn {
            Txn::Committed => "",
            Txn::Open => "?",
            Txn::Aborted => "x",
        };
        let _ = write!(out, " {o}:{kind}{txn}");
    }
    out
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Append { value: None, .. } => "Append(tombstone)",
        Command::Append { .. } => "Append",
        Command::ReadPartition {
            wait_until: Some(_),
            ..
        } => "ReadPartition(long poll)",
        Command::ReadPartition { .. } => "ReadPartition",
        Command::DescribeRole { .. } => "DescribeRole",
        Command::AcquireEpoch { .. } => "AcquireEpoch",
        Command::WriteLease { value: None, .. } => "WriteLease(tombstone)",
        Command::WriteLease { .. } => "WriteLease",
        Command::Elected { .. } => "Elected",
        Command::Deposed { .. } => "Deposed",
        Command::Ended { .. } => "Ended",
    }
}

/// A counterexample path, one line per step.
pub fn trace(path: stateright::Path<State, Action>) -> String {
    let mut out = String::new();
    for (state, action) in path.into_vec() {
        let _ = writeln!(out, "{}", summary(&state));
        if let Some(a) = action {
            let _ = writeln!(out, "    --> {a:?}");
        }
    }
    out
}

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct Figures {
    /// States generated.
    pub states: usize,
    /// Distinct states.
    pub unique: usize,
    /// The longest path explored.
    pub depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Property name and counterexample trace, for each property that failed.
    pub failures: Vec<(&'static str, String)>,
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} states ({} unique), depth {}, {:.1?}",
            self.states, self.unique, self.depth, self.elapsed
        )?;
        for (name, _) in &self.failures {
            write!(f, "; FAILED: {name}")?;
        }
        Ok(())
    }
}

/// How a run searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Depth-first over every state: little memory (the visited set holds fingerprints).
    Exhaustive,
    /// Breadth-first, stopping at the first counterexample of the named property: the shortest
    /// trace.
    FirstFailure(&'static str),
}

/// Runs the check of `cfg` on `threads` threads to completion (or, for
/// [`Search::FirstFailure`], until the property fails).
pub fn check(cfg: Config, threads: usize, search: Search) -> Figures {
    use stateright::{Checker, HasDiscoveries};
    let started = std::time::Instant::now();
    let model = CoordinationModel::new(cfg);
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let builder = model.checker().threads(threads);
    let (states, unique, depth, failures) = match search {
        Search::Exhaustive => {
            let c = builder.spawn_dfs().join();
            let failures = names
                .iter()
                .filter_map(|&n| c.discovery(n).map(|p| (n, trace(p))))
                .collect();
            (
                c.state_count(),
                c.unique_state_count(),
                c.max_depth(),
                failures,
            )
        }
        Search::FirstFailure(name) => {
            let c = builder
                .finish_when(HasDiscoveries::AnyOf([name].into_iter().collect()))
                .spawn_bfs()
                .join();
            let failures = names
                .iter()
                .filter_map(|&n| c.discovery(n).map(|p| (n, trace(p))))
                .collect();
            (
                c.state_count(),
                c.unique_state_count(),
                c.max_depth(),
                failures,
            )
        }
    };
    Figures {
        states,
        unique,
        depth,
        elapsed: started.elapsed(),
        failures,
    }
}
