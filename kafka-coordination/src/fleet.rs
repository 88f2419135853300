//! A fleet shares its roles: every process of a service hosts the same roles, and each leads
//! its share of them, moved with fenced hand-overs as members come, go, upgrade or drain.
//!
//! Ranks follow join order and a role never fails back, so without a fleet the first process
//! to start leads every role it hosts. A [`Fleet`] runs beside a [`Host`](crate::host::Host)
//! and adds three things:
//!
//! * **Who is there.** Every member leads a heartbeat role of its own,
//!   `<fleet>/<member>`, in a topic of the fleet's own (not `__coordination_state`, so members
//!   of other implementations never see it). Its lease is the member's liveness: a member is
//!   live while its heartbeat lease is, and dead once it runs out (a member paused for longer
//!   than a lease counts as dead until it renews again). The heartbeat's member id carries the
//!   member's announcement: its weight, version, readiness, whether it drains, and its policy.
//! * **Who should lead.** For each role, the preferred owner is chosen among the live, ready,
//!   not draining members registered for the role that the [`Policy`] keeps (all of them, or
//!   those of the newest or oldest version), by weighted rendezvous hashing
//!   ([`preference::ranking`]): a member joining or leaving moves only the roles it gains or
//!   held, and shares follow the weights.
//! * **Moves.** A leader whose role another member prefers resigns it (the broker fences its
//!   pair at once, and the next member in rank takes over at once) and registers again at the
//!   back; at most [`FleetOptions::max_in_motion`] of its roles are in hand-over at any moment.
//!   It hands over only when the preferred member is the next in rank, so a role moves once. A
//!   standby registered ahead of a member that ranks above it for the role withdraws and
//!   registers again behind it, so that the standbys stand in order of preference and a
//!   failover lands on the member that should have the role.
//!
//! Balancing never touches what the spec defines: records, ranks, epochs and fencing are those
//! of any candidacy; only when a member resigns and where it registers change. Liveness never
//! depends on it: a dead leader's roles are taken by the next standby in rank at the lease
//! deadline, as always, and moved afterwards if another member should have them. When the live
//! members announce different policies, nobody moves a role for preference until they agree
//! (counted in [`FleetStats::policy_conflicts`]).
//!
//! [`Fleet::drain_blocking`] (or `drain`) hands every role of the member away, a few at a time,
//! each to a live member registered behind it, and withdraws from the others, so that a rolling
//! deploy never leaves a role without a leader for longer than one hand-over. The guide's
//! `docs/guide/fleet.md` has the rules, what is measured, and the limits.
//!
//! ```
//! # #[cfg(all(feature = "memory", feature = "blocking"))] {
//! use std::sync::Arc;
//! use kafka_coordination::fleet::{Fleet, FleetOptions};
//! use kafka_coordination::host::HostOptions;
//! use kafka_coordination::memory::MemoryBroker;
//! use kafka_coordination::{blocking, ManualClock, Options};
//!
//! let clock = ManualClock::default();
//! let state = MemoryBroker::new(16, Arc::new(clock.clone()));
//! let fleet_topic = MemoryBroker::new(1, Arc::new(clock.clone()));
//! let host = blocking::host(Arc::new(state.transport("a")), HostOptions::new().clock(clock.clone()))?;
//! let fleet = Fleet::join(
//!     &host,
//!     Arc::new(fleet_topic.transport("a")),
//!     FleetOptions::new("payments", "a").options(Options::new().clock(clock.clone())),
//! )?;
//! let shards: Vec<_> = (0..10).map(|i| fleet.start(&format!("shard-{i}"))).collect::<Result<_, _>>()?;
//! clock.settle().unwrap();
//! assert_eq!(fleet.stats().leading, 10); // alone, it leads them all
//! # drop(shards);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod announce;
mod fleet_error;
mod membership;
mod observe;
pub mod preference;

pub use announce::{roles_digest, Announcement};
pub use fleet_error::FleetError;
pub use membership::{
    drain_role, request_drain, DrainReport, Fleet, FleetMember, FleetOptions, FleetRole, FleetStats,
};
pub use observe::{
    heartbeat_is_live, members, status, FleetStatus, MemberStatus, ObservedMember, RoleStatus,
};
pub use preference::{Policy, Version};
