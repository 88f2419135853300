//! What a run explores: the configuration and the deliberate defects (mutations).

use std::time::Duration;

use kafka_coordination_core::Timing;

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
    /// A member asked to register anew starts its new candidacy at once, abandoning the old
    /// one's exit mid-way (the driver does not wait for the previous candidacy of the role to
    /// leave): a resigning leader may rejoin before its lease tombstone lands.
    EarlyRejoin,
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
    /// Withdrawals of a member that does not lead (registering, standing by or challenging):
    /// it is asked to stop competing, and exits.
    pub withdraws: u8,
    /// Rejoins: a member whose candidacy ended starts a new one under the same member id.
    pub rejoins: u8,
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
    /// stagger 3 ms, skew 1 ms), one fault of each kind, no withdraw or rejoin, and no
    /// mutation.
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
            withdraws: 0,
            rejoins: 0,
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

    pub(crate) fn is(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }
}
