//! Leadership metrics through the [`metrics`](https://docs.rs/metrics) facade (feature
//! `metrics`), so any exporter can serve them: Prometheus, StatsD, OpenTelemetry, ...
//!
//! Every driver (blocking, tokio, smol, async-std) records them, for every candidacy, into
//! whatever recorder the process installed (`metrics::set_global_recorder`, or an exporter's
//! `install`). Without a recorder the calls go nowhere; without the feature they are not
//! compiled in at all (the driver's meter is then a zero-sized type with empty inline methods).
//!
//! # The metrics
//!
//! Every series carries the labels `role` and `member` (the names given to `start`).
//!
//! | name | kind | unit | what |
//! |---|---|---|---|
//! | `kafka_coordination_is_leader` | gauge | 0 or 1 | 1 from this member's election until its term is over (fenced, resigned or failed: when [`Leadership::is_done`](crate::leadership::Leadership::is_done) turns true); 0 otherwise. Set to 0 when the candidacy starts, so every member has a series. |
//! | `kafka_coordination_elections_total` | counter | terms | terms won: the first lease write committed after the epoch was minted |
//! | `kafka_coordination_fenced_total` | counter | terms | terms ended by the broker's fence: a renewal or a guarded write was refused because a newer leader minted its epoch |
//! | `kafka_coordination_resigns_total` | counter | terms | terms given up by a resign (or by dropping the [`Leadership`](crate::leadership::Leadership)); a standby that cancels is not counted |
//! | `kafka_coordination_renew_failures_total` | counter | calls | lease renewals that failed with a transport error (each retry counts; a fence is not a failure, see `fenced_total`) |
//! | `kafka_coordination_renew_seconds` | histogram | seconds | how long each successful renewal took: the transactional lease write |
//! | `kafka_coordination_acquire_seconds` | histogram | seconds | from the start of the winning challenge (the epoch mint, which fences the old leader) to its first lease write committed; retries in between included |
//! | `kafka_coordination_candidacy_ends_total` | counter | candidacies | candidacies that ended, with a third label `reason`: `resigned` (resigned or cancelled), `fenced`, `unavailable` (the transport kept failing longer than the give-up time while not leading), `failed` (a failure that will not pass) |
//!
//! A [`Fleet`](crate::fleet::Fleet) member (feature `blocking`) also records, with the labels
//! `fleet` and `member`:
//!
//! | name | kind | what |
//! |---|---|---|
//! | `kafka_coordination_fleet_leading` | gauge | roles it leads |
//! | `kafka_coordination_fleet_preferred` | gauge | roles for which it is the preferred owner; `leading - preferred` summed over the fleet is what is still to move |
//! | `kafka_coordination_fleet_in_motion` | gauge | roles it is handing over now |
//! | `kafka_coordination_fleet_live_members` | gauge | live members as it sees them |
//! | `kafka_coordination_fleet_handovers_total` | counter | hand-overs it started |
//!
//! Every counter series of a member, one per `reason` for `candidacy_ends_total`, is there at 0
//! from the moment its candidacy starts, as `is_leader` is: `increase()` counts a member's first
//! election, failure or end as a rise from 0.
//!
//! Durations are measured on the monotonic clock, except on a
//! [`ManualClock`](crate::ManualClock), where they are the manual clock's time, so that tests
//! see exact values.
//!
//! Alert rules and a Grafana dashboard on these series are in the repository's `ops/`. Not
//! exported: the number of standbys (ask [`describe_role_state`](crate::describe::describe_role_state)).
//! Series of members that ended stay at their last values. With `metrics-exporter-prometheus`,
//! set buckets for the `_seconds` histograms, as the `prometheus` example does. [`describe`]
//! registers the HELP texts; every driver calls it when a candidacy starts.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

#[cfg(feature = "metrics")]
pub use recording::describe;
#[cfg(all(feature = "metrics", feature = "blocking"))]
pub(crate) use recording::record_fleet;
#[cfg(feature = "metrics")]
pub(crate) use recording::Meter;

#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::Meter;

/// Gauge `kafka_coordination_is_leader{role, member}`: 1 while leading, 0 otherwise.
pub const IS_LEADER: &str = "kafka_coordination_is_leader";
/// Counter `kafka_coordination_elections_total{role, member}`: terms won.
pub const ELECTIONS: &str = "kafka_coordination_elections_total";
/// Counter `kafka_coordination_fenced_total{role, member}`: terms ended by the broker's fence.
pub const FENCED: &str = "kafka_coordination_fenced_total";
/// Counter `kafka_coordination_resigns_total{role, member}`: terms given up by a resign.
pub const RESIGNS: &str = "kafka_coordination_resigns_total";
/// Counter `kafka_coordination_renew_failures_total{role, member}`: renewals that failed with a
/// transport error.
pub const RENEW_FAILURES: &str = "kafka_coordination_renew_failures_total";
/// Histogram `kafka_coordination_renew_seconds{role, member}`: successful renewals' durations.
pub const RENEW_SECONDS: &str = "kafka_coordination_renew_seconds";
/// Histogram `kafka_coordination_acquire_seconds{role, member}`: from the winning challenge's
/// epoch mint to its first lease write committed.
pub const ACQUIRE_SECONDS: &str = "kafka_coordination_acquire_seconds";
/// Counter `kafka_coordination_candidacy_ends_total{role, member, reason}`: candidacies ended.
pub const CANDIDACY_ENDS: &str = "kafka_coordination_candidacy_ends_total";

/// The label naming the role.
pub const ROLE_LABEL: &str = "role";
/// The label naming the member.
pub const MEMBER_LABEL: &str = "member";
/// The label of [`CANDIDACY_ENDS`] naming why the candidacy ended.
pub const REASON_LABEL: &str = "reason";
/// Gauge `kafka_coordination_fleet_leading{fleet, member}`: roles a fleet member leads.
pub const FLEET_LEADING: &str = "kafka_coordination_fleet_leading";
/// Gauge `kafka_coordination_fleet_preferred{fleet, member}`: roles for which it is the
/// preferred owner.
pub const FLEET_PREFERRED: &str = "kafka_coordination_fleet_preferred";
/// Gauge `kafka_coordination_fleet_in_motion{fleet, member}`: roles it is handing over now.
pub const FLEET_IN_MOTION: &str = "kafka_coordination_fleet_in_motion";
/// Gauge `kafka_coordination_fleet_live_members{fleet, member}`: live members as it sees them.
pub const FLEET_LIVE_MEMBERS: &str = "kafka_coordination_fleet_live_members";
/// Counter `kafka_coordination_fleet_handovers_total{fleet, member}`: hand-overs it started.
pub const FLEET_HANDOVERS: &str = "kafka_coordination_fleet_handovers_total";
/// The fleet's label on the `fleet_*` series.
pub const FLEET_LABEL: &str = "fleet";

/// The values of [`REASON_LABEL`] on [`CANDIDACY_ENDS`]: `resigned`, `fenced`, `unavailable`,
/// `failed`.
pub const END_REASONS: [&str; 4] = ["resigned", "fenced", "unavailable", "failed"];

#[cfg(feature = "metrics")]
mod recording {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use kafka_coordination_core::machine::{Candidate, Command, EndReason, Event, Status};
    use kafka_coordination_core::record::{MemberId, Role};
    use kafka_coordination_core::time::UnixMillis;
    use metrics::{Label, SharedString, Unit};

    use super::*;
    use crate::clock::Clock;
    use crate::error::TransportError;

    /// Registers the units and HELP texts of every series with the installed recorder. The
    /// drivers call it whenever a candidacy starts; call it yourself to have the descriptions
    /// before the first candidacy.
    pub fn describe() {
        let counters = [
            (
                ELECTIONS,
                "Terms this member won (its first lease write committed).",
            ),
            (
                FENCED,
                "Terms ended by the broker's fence: a newer leader minted its epoch.",
            ),
            (RESIGNS, "Terms this member gave up by resigning."),
            (
                RENEW_FAILURES,
                "Lease renewals that failed with a transport error (each retry counts).",
            ),
            (
                CANDIDACY_ENDS,
                "Candidacies that ended, by reason: resigned, fenced, unavailable, failed.",
            ),
        ];
        for (name, help) in counters {
            metrics::describe_counter!(name, Unit::Count, help);
        }
        metrics::describe_counter!(
            FLEET_HANDOVERS,
            Unit::Count,
            "Roles this fleet member handed over to their preferred owner."
        );
        for (name, help) in [
            (FLEET_LEADING, "Roles this fleet member leads."),
            (
                FLEET_PREFERRED,
                "Roles for which this fleet member is the preferred owner.",
            ),
            (
                FLEET_IN_MOTION,
                "Roles this fleet member is handing over now.",
            ),
            (
                FLEET_LIVE_MEMBERS,
                "Live members of the fleet, as this member sees them.",
            ),
        ] {
            metrics::describe_gauge!(name, help);
        }
        metrics::describe_gauge!(
            IS_LEADER,
            "1 while this member leads the role (from its election until the term is over), else 0."
        );
        metrics::describe_histogram!(
            RENEW_SECONDS,
            Unit::Seconds,
            "How long each successful lease renewal took."
        );
        metrics::describe_histogram!(
            ACQUIRE_SECONDS,
            Unit::Seconds,
            "From the winning challenge's epoch mint to its first lease write committed."
        );
    }

    /// A fleet member's figures after a pass: roles led, preferred, in hand-over, live
    /// members, and hand-overs started in the pass.
    #[cfg(feature = "blocking")]
    pub(crate) fn record_fleet(fleet: &str, member: &str, figures: [usize; 4], new_handovers: u64) {
        let labels = [
            Label::new(FLEET_LABEL, fleet.to_owned()),
            Label::new(MEMBER_LABEL, member.to_owned()),
        ];
        let [leading, preferred, in_motion, live] = figures;
        for (name, v) in [
            (FLEET_LEADING, leading),
            (FLEET_PREFERRED, preferred),
            (FLEET_IN_MOTION, in_motion),
            (FLEET_LIVE_MEMBERS, live),
        ] {
            metrics::gauge!(name, labels.iter()).set(v as f64);
        }
        metrics::counter!(FLEET_HANDOVERS, labels.iter()).increment(new_handovers);
    }

    /// When something started, on both clocks (see [`Meter::since`]).
    #[derive(Clone, Copy)]
    struct Started {
        at: UnixMillis,
        real: Instant,
    }

    /// One candidacy's metrics: the driver tells it what it issued, what completed and what it
    /// reported; it keeps the few facts the metrics need (when a challenge or a renewal began,
    /// whether a term is on).
    pub(crate) struct Meter {
        labels: Vec<Label>,
        clock: Arc<dyn Clock>,
        /// The start of the current challenge (an epoch mint while challenging).
        challenge: Option<Started>,
        /// The start of the outstanding renewal.
        renewal: Option<Started>,
        /// Whether a term is on (elected, and not yet deposed or ended).
        leading: bool,
    }

    impl Meter {
        /// A candidacy of `member` for `role` starts: registers the descriptions and the
        /// member's `is_leader` series at 0.
        pub(crate) fn new(role: &Role, member: &MemberId, clock: &Arc<dyn Clock>) -> Meter {
            describe();
            let shared = |s: &str| SharedString::from(Arc::<str>::from(s));
            let labels = vec![
                Label::new(ROLE_LABEL, shared(role.as_str())),
                Label::new(MEMBER_LABEL, shared(member.as_str())),
            ];
            metrics::gauge!(IS_LEADER, labels.iter()).set(0.0);
            // Every counter of the member's series exists from the start, at 0 (an increment of
            // 0 registers it and leaves a value already there as it is), so that `increase()`
            // sees the first event as a rise from 0 rather than a series that starts at 1.
            for name in [ELECTIONS, FENCED, RESIGNS, RENEW_FAILURES] {
                metrics::counter!(name, labels.iter()).increment(0);
            }
            for reason in END_REASONS {
                let mut with_reason = labels.clone();
                with_reason.push(Label::new(REASON_LABEL, reason));
                metrics::counter!(CANDIDACY_ENDS, with_reason).increment(0);
            }
            Meter {
                labels,
                clock: Arc::clone(clock),
                challenge: None,
                renewal: None,
                leading: false,
            }
        }

        fn now(&self) -> Started {
            Started {
                at: self.clock.now(),
                real: Instant::now(),
            }
        }

        /// The time since `start`: the manual clock's on a manual clock, else monotonic.
        fn since(&self, start: Started) -> Duration {
            match self.clock.as_manual() {
                Some(manual) => manual.now().since(start.at),
                None => start.real.elapsed(),
            }
        }

        fn count(&self, name: &'static str) {
            metrics::counter!(name, self.labels.iter()).increment(1);
        }

        fn set_leader(&mut self, leading: bool) {
            self.leading = leading;
            let value = if leading { 1.0 } else { 0.0 };
            metrics::gauge!(IS_LEADER, self.labels.iter()).set(value);
        }

        /// The driver is about to execute `command`, which `candidate` just emitted.
        pub(crate) fn issued(&mut self, command: &Command, candidate: &Candidate) {
            match (command, candidate.status()) {
                (Command::AcquireEpoch { .. }, Status::Challenging) => {
                    self.challenge = Some(self.now());
                }
                (Command::WriteLease { value: Some(_), .. }, Status::Leading) => {
                    self.renewal = Some(self.now());
                }
                _ => {}
            }
        }

        /// The outstanding command completed with `outcome`.
        pub(crate) fn completed(&mut self, outcome: &Result<Event, TransportError>) {
            let Some(started) = self.renewal.take() else {
                return;
            };
            match outcome {
                Ok(Event::LeaseWritten { .. }) => {
                    let took = self.since(started);
                    metrics::histogram!(RENEW_SECONDS, self.labels.iter())
                        .record(took.as_secs_f64());
                }
                Ok(_) => {}
                Err(_) => self.count(RENEW_FAILURES),
            }
        }

        /// The candidate reported its election.
        pub(crate) fn elected(&mut self) {
            self.count(ELECTIONS);
            self.set_leader(true);
            if let Some(started) = self.challenge.take() {
                let took = self.since(started);
                metrics::histogram!(ACQUIRE_SECONDS, self.labels.iter()).record(took.as_secs_f64());
            }
        }

        /// The candidate reported that the broker fenced its term.
        pub(crate) fn deposed(&mut self) {
            if self.leading {
                self.count(FENCED);
                self.set_leader(false);
            }
        }

        /// The candidate ended.
        pub(crate) fn ended(&mut self, reason: EndReason) {
            if self.leading {
                match reason {
                    EndReason::Resigned => self.count(RESIGNS),
                    // A term is fenced through `deposed` first; count it here only if not.
                    EndReason::Fenced { .. } => self.count(FENCED),
                    EndReason::Unavailable | EndReason::Failed => {}
                }
                self.set_leader(false);
            }
            let reason = match reason {
                EndReason::Resigned => END_REASONS[0],
                EndReason::Fenced { .. } => END_REASONS[1],
                EndReason::Unavailable => END_REASONS[2],
                EndReason::Failed => END_REASONS[3],
            };
            let mut labels = self.labels.clone();
            labels.push(Label::new(REASON_LABEL, reason));
            metrics::counter!(CANDIDACY_ENDS, labels).increment(1);
        }
    }

    impl Drop for Meter {
        /// A driver that stops without its candidate ending (a driver error, a runtime that
        /// dropped its task) leads no more.
        fn drop(&mut self) {
            if self.leading {
                self.set_leader(false);
            }
        }
    }
}

#[cfg(not(feature = "metrics"))]
mod disabled {
    use std::sync::Arc;

    use kafka_coordination_core::machine::{Candidate, Command, EndReason, Event};
    use kafka_coordination_core::record::{MemberId, Role};

    use crate::clock::Clock;
    use crate::error::TransportError;

    /// Without the `metrics` feature: nothing, at no cost.
    pub(crate) struct Meter;

    #[allow(clippy::unused_self)]
    impl Meter {
        #[inline(always)]
        pub(crate) fn new(_: &Role, _: &MemberId, _: &Arc<dyn Clock>) -> Meter {
            Meter
        }
        #[inline(always)]
        pub(crate) fn issued(&mut self, _: &Command, _: &Candidate) {}
        #[inline(always)]
        pub(crate) fn completed(&mut self, _: &Result<Event, TransportError>) {}
        #[inline(always)]
        pub(crate) fn elected(&mut self) {}
        #[inline(always)]
        pub(crate) fn deposed(&mut self) {}
        #[inline(always)]
        pub(crate) fn ended(&mut self, _: EndReason) {}
    }
}

#[cfg(all(test, not(feature = "metrics")))]
mod tests {
    #[test]
    fn without_the_feature_the_meter_is_zero_sized() {
        assert_eq!(std::mem::size_of::<super::Meter>(), 0);
    }
}
