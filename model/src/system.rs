//! The model's state: the members around their real machines, the broker (coordinator and
//! partition), the ghost variables the properties read, the fault budget, and the actions.

use kafka_coordination_core::machine::{Candidate, Command, Event};
use kafka_coordination_core::{FencingToken, Record};

/// The producer id of every minted pair.
pub(crate) const PRODUCER_ID: i64 = 1;

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
    /// The log's end when the member last restarted or rejoined.
    pub restarted_at: Option<i64>,
}

impl Member {
    pub(crate) fn live(&self) -> bool {
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

    pub(crate) fn lso(&self) -> i64 {
        self.log
            .iter()
            .position(|e| e.txn == Txn::Open)
            .unwrap_or(self.log.len()) as i64
    }

    pub(crate) fn readable_from(&self, from: i64, past_lso: bool) -> Vec<Record> {
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

    pub(crate) fn abort_open(&mut self) {
        for e in &mut self.log {
            if e.txn == Txn::Open {
                e.txn = Txn::Aborted;
            }
        }
    }

    pub(crate) fn mint(&mut self, now: i64, bumps: i16) -> FencingToken {
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
    /// A member registered anew while no other member was up, unpaused and still in the
    /// race: the role's next election starts from it, as the first one does.
    Rejoin,
    /// Anything else: a crash of a member that was not leading (perhaps a challenger after
    /// its acquire), a challenger's withdraw, a pause or resume, a lost or delayed answer, a
    /// coordinator's abort.
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
    /// Withdraws left.
    pub withdraws: u8,
    /// Rejoins left.
    pub rejoins: u8,
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
    /// Member `i`, which does not lead, is asked to stop competing (a cancelled candidacy).
    Withdraw(usize),
    /// Member `i`, whose candidacy ended, starts a new one under the same id: it registers
    /// anew, at the back of the join order.
    Rejoin(usize),
    /// The coordinator aborts a transaction open for longer than its timeout.
    TimeoutAbort,
}
