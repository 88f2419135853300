//! Exhaustive model checking of the real [`Candidate`](kafka_coordination_core::machine::Candidate) state machine (issue 36).
//!
//! Every member of the modelled role is the unmodified `kafka_coordination_core` [`Candidate`](kafka_coordination_core::machine::Candidate);
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
//!   whose [`Candidate::poll_timeout`](kafka_coordination_core::machine::Candidate::poll_timeout) has come gets [`Event::Tick`](kafka_coordination_core::machine::Event::Tick) before time moves on
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
//! * **Balancing moves**, each from a budget too ([`Config::withdraws`], [`Config::rejoins`];
//!   none by default). A fleet that spreads many roles over many processes hands a role over
//!   by having its leader resign and register anew, at the back of the join order, and moves
//!   a standby behind another member by having it withdraw and register anew. A member that
//!   does not lead (registering, standing by or challenging) may be asked to stop competing
//!   ([`Action::Withdraw`]: `Event::Resign`, which exits without leading: a challenger that
//!   already minted supersedes its pair on the way out). A member whose candidacy ended (its
//!   resign's or withdraw's exit completed, or a deposed leader's) may start a new `Candidate`
//!   under the same member id ([`Action::Rejoin`]), as a driver does when a process starts a
//!   new candidacy for a role: only once the previous one has left
//!   ([`Mutation::EarlyRejoin`] drops that wait). Together with [`Action::Resign`] these let a
//!   balancing member resign and rejoin, or withdraw and rejoin, at any point of the fault
//!   window. They are moves, not faults, for the bounded properties: a standby's withdraw, and
//!   a rejoin beside a member that can take the role, restart no bound (a role whose standby
//!   leaves, or gains one, must still be taken in time); a challenger's withdraw counts as its
//!   crash would; a rejoin into a role no other member is waiting for starts the count, as
//!   the first election does.
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
//! * Faults, withdraws and rejoins can be confined to a window ([`Config::faults_after`],
//!   [`Config::faults_before`]).
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
//! 5. Three members; the leader resigns and dies with its lease tombstone's transaction open
//!    (its exit pair minted, the tombstone not committed). Both standbys register behind the
//!    open record, so their reads stop short of their own registrations: each has read the
//!    leader's registration and lease but not the other's registration, so both rank 0, both
//!    count their turns a lease after registering, and both defer to the exit pair at those
//!    turns. With the tombstone still open when that deferral ran out, both took the exit
//!    pair's member for gone and minted. Fix: a member whose reads are held short of its
//!    registration does not mint on the pair it deferred to while that pair's transaction is
//!    open; it reads again until the coordinator's abort at the transaction timeout releases
//!    every read at once, and the ranks stagger from then, as in finding 1. Found with
//!    `MODEL_MEMBERS=3 MODEL_HORIZON=16 MODEL_FAULTS_BEFORE=2 MODEL_CRASHES=1 MODEL_RESIGNS=1
//!    scripts/model-check.sh`; the smallest configuration that shows it (a crash and a resign
//!    in the first millisecond) is `finding_resign_dying_in_its_tombstone_mints_one_pair`.
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
//! 4. **No failback** ([`NO_FAILBACK`]): a member that restarted or rejoined registers again:
//!    its join offset lies past every record written before its restart (or rejoin), and in
//!    the role state read from the log it ranks behind every ranked member registered before
//!    then. For a balancing member this is the point of its move: after a hand-over it stands
//!    behind the members it handed the role to.
//! 5. **A member leads** ([`LIVENESS`], bounded liveness): while some member is up, not
//!    paused and has not ended, and no delayed answer is outstanding, the role is never without
//!    a leader for longer than a lease, a stagger per other member, twice the skew and a few
//!    milliseconds of calls, counted from the later of the moment it lost its leader and the
//!    last fault; one lease more when that fault was not a leader's crash or resign or a
//!    rejoin (a challenger that dies, pauses or withdraws after its acquire costs those who
//!    deferred to it a lease, as the machine documents). With the balancing moves this is the
//!    bound on a vacancy: a role is never vacant longer while a live, unpaused member is
//!    registered (or registering) for it.
//! 6. **Resign hands over** ([`HANDOVER`]): after a leader resigns, with no fault since, a
//!    successor leads within a stagger per remaining member plus twice the skew and a few
//!    milliseconds: well before the resigned lease would have run out. A standby's withdraw or
//!    a member's rejoin in between is no fault: the resigned leader may rejoin at once, behind
//!    its successor.
//! 7. **Exactly one election** ([`ONE_ELECTION`]): in a path where no answer was lost or
//!    delayed and no member paused, the members mint at most one pair for their challenges
//!    between two elections (a crash or a challenger's withdraw starts the count again); with
//!    (5), exactly one.
//! 8. **A deposed leader steps down** ([`STEP_DOWN`]): a member that is not paused and waits on
//!    no delayed answer stops believing it leads within a renew interval and a few
//!    milliseconds after its pair was superseded (or after the last fault).
//! 9. **The machine accepts its answers** ([`NO_MACHINE_ERROR`]): `Candidate::handle` never
//!    returns an error and never has two I/O commands outstanding.

mod checker;
mod model;
mod properties;
mod scenario;
mod system;
mod trace;

pub use checker::{check, Figures, Search};
pub use model::CoordinationModel;
pub use properties::{
    FENCE, HANDOVER, LEASE_ORDER, LIVENESS, NO_FAILBACK, NO_MACHINE_ERROR, ONE_ELECTION,
    ONE_LEADER, PROPERTIES, STEP_DOWN,
};
pub use scenario::{Config, Mutation};
pub use system::{Action, Broker, Budget, Entry, Fault, Ghost, Io, Member, State, Txn, TxnState};
pub use trace::{summary, trace};
