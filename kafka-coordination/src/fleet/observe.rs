//! A fleet seen from outside, by any process that can read its topics: who its members are
//! ([`members`], from the fleet topic) and, for every role the fleet hosts, who leads it and
//! who should ([`status`], with the roles read from the state topic). The
//! `kafka-coordination fleet status` command prints this.
//!
//! An observer computes the preferred owners as the members do (the same policy, the same
//! ranking, bounded loads under the same condition), from what it reads; it cannot see what a
//! member has not written yet, so right after a change the two may differ for a pass.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use kafka_coordination_core::partition::role_partition;
use kafka_coordination_core::record::{KeyRef, Role};
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::{Timing, TimingError};

use super::announce::{roles_digest, Announcement};
use super::preference::{self, Candidate, Policy};
use crate::leadership::Error;
use crate::transport::StateReader;
use crate::watch::{Leader, LeaseTracker, WatchEvent};

/// A member of a fleet as an observer read it from the fleet topic.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ObservedMember {
    /// The member id (its role candidacies use the same).
    pub member: String,
    /// The last announcement it made that was read (`None`: none was, say because it only
    /// just joined, or compaction left only the tombstones of a member that left).
    pub announcement: Option<Announcement>,
    /// Its heartbeat's lease as last written, running or not; `None` once the member resigned
    /// it (it left) or when no lease record of it was read.
    pub heartbeat: Option<Leader>,
    /// Whether it is live by the members' own rule (see [`heartbeat_is_live`]) and announced.
    pub live: bool,
}

impl ObservedMember {
    /// Whether its heartbeat lease is still running at `now` (live or not by the members' rule:
    /// a member that misses renewals is not live while its lease runs out).
    pub fn lease_running(&self, now: UnixMillis) -> bool {
        self.heartbeat.as_ref().is_some_and(|h| h.is_live(now))
    }

    /// Whether it announced that it drains.
    pub fn draining(&self) -> bool {
        self.announcement.as_ref().is_some_and(|a| a.draining)
    }
}

/// Whether the heartbeat lease `holder` of `member`'s heartbeat role makes `member` live at
/// `now`, for members whose candidacies use `timing`: the lease runs, it names the member, and
/// it was renewed within one and a half renew intervals (a renewal's deadline is its write's
/// time plus the lease, so `deadline - now + 1.5 renew >= lease`). A member that misses
/// renewals is not handed roles, though its leases may still run.
///
/// The fleet's loop (`live_members` in `membership.rs`) applies the same rule to the members it reads.
pub fn heartbeat_is_live(member: &str, holder: &Leader, timing: &Timing, now: UnixMillis) -> bool {
    let fresh = holder.deadline.since(now) + timing.renew_interval * 3 / 2 >= timing.lease_duration;
    holder.deadline > now && fresh && holder.member.as_str() == member
}

/// What a role name of the fleet topic is to fleet `fleet`: `<fleet>/<member>` a heartbeat,
/// `<fleet>//a/<member>` an announcement (a member name is not empty and holds no `/`). The
/// fleet's loop (`read_heartbeats` in `membership.rs`) reads the names the same way.
pub(super) fn fleet_role<'a>(fleet: &str, name: &'a str) -> Option<(&'a str, bool)> {
    let rest = name.strip_prefix(fleet)?.strip_prefix('/')?;
    let member = |m: &'a str| (!m.is_empty() && !m.contains('/')).then_some(m);
    match rest.strip_prefix("/a/") {
        Some(m) => member(m).map(|m| (m, true)),
        None => member(rest).map(|m| (m, false)),
    }
}

/// Every member of fleet `fleet` that the fleet topic (`fleet_reader`, read once from the start
/// of each partition) holds a heartbeat or an announcement of, sorted by member id, with its
/// last announcement and whether it is live at `now` for members whose candidacies use
/// `timing` (their lease duration and renew interval: [`heartbeat_is_live`]), unless a member
/// announced its own, which then counts. A member that left
/// stays listed, not live, until compaction removes its records.
///
/// The fleet name is not checked: a name no member could join with (empty, or holding a `/`)
/// finds no member. Announcements that do not decode are skipped, as members skip them.
pub fn members<R: StateReader + ?Sized>(
    fleet_reader: &R,
    fleet: &str,
    timing: &Timing,
    now: UnixMillis,
) -> Result<Vec<ObservedMember>, Error> {
    let partitions = fleet_reader.partitions();
    if partitions <= 0 {
        return Err(Error::InvalidOptions(TimingError::Partitions {
            partitions,
        }));
    }
    let mut beats: BTreeMap<String, LeaseTracker> = BTreeMap::new();
    let mut announces: BTreeMap<String, LeaseTracker> = BTreeMap::new();
    let mut announced: HashMap<String, Announcement> = HashMap::new();
    let mut sink = Vec::new();
    for partition in 0..partitions {
        let mut next = 0;
        loop {
            let batch = crate::transport::read(fleet_reader, partition, next, Duration::ZERO)
                .map_err(Error::Transport)?;
            for r in &batch.records {
                let Ok(key) = KeyRef::decode(&r.key) else {
                    continue;
                };
                let Some((member, is_announcement)) = fleet_role(fleet, key.role()) else {
                    continue;
                };
                let trackers = if is_announcement {
                    &mut announces
                } else {
                    &mut beats
                };
                if !trackers.contains_key(member) {
                    let Ok(role) = Role::new(key.role()) else {
                        continue;
                    };
                    // Only the roles of this partition by the topic's rule, as members read.
                    if role_partition(&role, partitions).ok() != Some(partition) {
                        continue;
                    }
                    trackers.insert(member.to_owned(), LeaseTracker::new(role));
                }
                let Some(tracker) = trackers.get_mut(member) else {
                    continue;
                };
                tracker.apply(r, &mut sink);
                if is_announcement {
                    for e in &sink {
                        let WatchEvent::Leading(l) = e else { continue };
                        if let Ok(a) = Announcement::decode(l.member.as_str()) {
                            if a.member == member {
                                announced.insert(member.to_owned(), a);
                            }
                        }
                    }
                }
                sink.clear();
            }
            let read_any = !batch.records.is_empty();
            next = batch
                .records
                .last()
                .map_or(next, |r| r.offset.saturating_add(1))
                .max(batch.end_offset);
            if !read_any || next >= batch.end_offset {
                break;
            }
        }
    }
    let names: BTreeSet<&String> = beats.keys().chain(announces.keys()).collect();
    Ok(names
        .into_iter()
        .map(|name| {
            let heartbeat = beats.get(name).and_then(LeaseTracker::lease_holder);
            let announcement = announced.get(name).cloned();
            // The member's own timing when it announced it, else the caller's.
            let own = announcement
                .as_ref()
                .and_then(|a| a.timing)
                .map(|(lease, renew)| Timing {
                    lease_duration: Duration::from_millis(lease),
                    renew_interval: Duration::from_millis(renew),
                    ..*timing
                });
            let live = announcement.is_some()
                && heartbeat.as_ref().is_some_and(|h| {
                    heartbeat_is_live(name, h, own.as_ref().unwrap_or(timing), now)
                });
            ObservedMember {
                member: name.clone(),
                announcement,
                heartbeat,
                live,
            }
        })
        .collect())
}

/// A fleet member in a [`FleetStatus`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct MemberStatus {
    /// The member, as [`members`] read it.
    pub member: ObservedMember,
    /// How many of the fleet's roles it leads (a live lease names it).
    pub leads: usize,
    /// For how many of the fleet's roles it is the preferred owner.
    pub preferred: usize,
}

/// A role of the fleet in a [`FleetStatus`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoleStatus {
    /// The role.
    pub role: String,
    /// The member whose lease on it runs, if any.
    pub leader: Option<String>,
    /// The member that should lead it, if any member can (none when no live member is ready
    /// and not draining, or when the live members that do not drain announce different
    /// policies).
    pub preferred: Option<String>,
    /// Whether it is vacant, or led by another member than a preferred one: the fleet will
    /// move it (a role that no member is preferred for stays with its leader).
    pub in_motion: bool,
}

impl RoleStatus {
    /// Whether nobody leads it.
    pub fn is_vacant(&self) -> bool {
        self.leader.is_none()
    }
}

/// Who leads the roles of a fleet and who should: [`status`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct FleetStatus {
    /// Every member, sorted by member id, with what it leads and is preferred for.
    pub members: Vec<MemberStatus>,
    /// The fleet's roles (those whose roster holds a member of the fleet), sorted by name.
    pub roles: Vec<RoleStatus>,
    /// The policy the live members that do not drain announce, when they agree (none when no
    /// such member is live).
    pub policy: Option<Policy>,
    /// The live members that do not drain announce different policies: no role moves for
    /// preference, so none has a preferred owner here. A draining member's policy does not
    /// count (it is preferred for nothing).
    pub policy_conflict: bool,
    /// Whether the preferred owners come from bounded loads ([`preference::assign`]): every
    /// member the policy keeps announces the digest of the roles listed here. Otherwise each
    /// role goes by rendezvous alone ([`preference::ranking`]), as members then do.
    pub bounded: bool,
}

impl FleetStatus {
    /// How many of the fleet's roles have a leader.
    pub fn led(&self) -> usize {
        self.roles.iter().filter(|r| !r.is_vacant()).count()
    }

    /// How many roles are vacant.
    pub fn vacant(&self) -> usize {
        self.roles.iter().filter(|r| r.is_vacant()).count()
    }

    /// How many roles are in motion (vacant or not led by their preferred owner).
    pub fn in_motion(&self) -> usize {
        self.roles.iter().filter(|r| r.in_motion).count()
    }

    /// How many members are live.
    pub fn live(&self) -> usize {
        self.members.iter().filter(|m| m.member.live).count()
    }
}

/// Who leads each role of the fleet of `members` (read with [`members`]) and who should, at
/// `now`, from `roles`: the state topic's roles, as [`watch::roles`](crate::watch::roles) reads
/// them. The fleet's roles are those whose roster holds a member of the fleet (so a role that
/// a process of the fleet hosts outside the fleet, under the same member id, counts too).
///
/// The preferred owners follow the members' own rule: among the live members that are ready
/// and not draining, those the announced [`Policy`] keeps ([`preference::kept`]); then bounded
/// loads ([`preference::assign`]) when every kept member announces the digest of these roles,
/// else each role's first in [`preference::ranking`]. When the live members that do not drain
/// announce different policies, no role has a preferred owner (the members move none for
/// preference).
pub fn status(members: &[ObservedMember], roles: &[LeaseTracker], now: UnixMillis) -> FleetStatus {
    let names: BTreeSet<&str> = members.iter().map(|m| m.member.as_str()).collect();
    let fleet_roles: Vec<&LeaseTracker> = roles
        .iter()
        .filter(|t| t.state().roster().any(|(m, _)| names.contains(m.as_str())))
        .collect();
    let live: Vec<(&ObservedMember, &Announcement)> = members
        .iter()
        .filter(|m| m.live)
        .filter_map(|m| m.announcement.as_ref().map(|a| (m, a)))
        .collect();
    // A draining member's policy does not count: it is preferred for nothing.
    let staying = || live.iter().filter(|(_, a)| !a.draining);
    let policies: BTreeSet<&str> = staying().map(|(_, a)| a.policy.as_str()).collect();
    let policy_conflict = policies.len() > 1;
    let policy = match staying().next() {
        Some((_, a)) if !policy_conflict => Some(a.policy),
        _ => None,
    };
    let eligible: Vec<Candidate<'_>> = live
        .iter()
        .filter(|(_, a)| a.ready && !a.draining)
        .map(|(m, a)| Candidate {
            member: m.member.as_str(),
            weight: a.weight,
            version: a.version.as_ref(),
        })
        .collect();
    let kept = policy.map_or_else(Vec::new, |p| preference::kept(p, &eligible));
    let role_names: Vec<&str> = fleet_roles
        .iter()
        .map(|t| t.state().role().as_str())
        .collect();
    let digest = Some((roles_digest(role_names.iter().copied()), role_names.len()));
    let announced: HashMap<&str, &Announcement> =
        live.iter().map(|(m, a)| (m.member.as_str(), *a)).collect();
    let bounded = !kept.is_empty()
        && kept
            .iter()
            .all(|c| announced.get(c.member).is_some_and(|a| a.roles == digest));
    let assignment = if bounded {
        preference::assign(&role_names, &kept, preference::BALANCE_SLACK)
    } else {
        HashMap::new()
    };
    let mut leads: HashMap<&str, usize> = HashMap::new();
    let mut preferred_count: HashMap<&str, usize> = HashMap::new();
    let mut out_roles = Vec::with_capacity(fleet_roles.len());
    for (t, role) in fleet_roles.iter().zip(&role_names) {
        let leader = t
            .lease_holder()
            .filter(|l| l.is_live(now))
            .map(|l| l.member.as_str().to_owned());
        let preferred = match assignment.get(role) {
            Some(owner) => Some((*owner).to_owned()),
            None => preference::ranking(role, &kept)
                .first()
                .map(|c| c.member.to_owned()),
        };
        if let Some(l) = leader.as_deref().and_then(|l| names.get(l)) {
            *leads.entry(l).or_default() += 1;
        }
        if let Some(p) = preferred.as_deref().and_then(|p| names.get(p)) {
            *preferred_count.entry(p).or_default() += 1;
        }
        let in_motion =
            leader.is_none() || (preferred.is_some() && leader.as_deref() != preferred.as_deref());
        out_roles.push(RoleStatus {
            role: (*role).to_owned(),
            leader,
            preferred,
            in_motion,
        });
    }
    FleetStatus {
        members: members
            .iter()
            .map(|m| MemberStatus {
                member: m.clone(),
                leads: leads.get(m.member.as_str()).copied().unwrap_or(0),
                preferred: preferred_count.get(m.member.as_str()).copied().unwrap_or(0),
            })
            .collect(),
        roles: out_roles,
        policy,
        policy_conflict,
        bounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_core::record::MemberId;
    use kafka_coordination_core::token::FencingToken;

    #[test]
    fn fleet_role_names_are_read_as_the_members_write_them() {
        assert_eq!(fleet_role("svc", "svc/a"), Some(("a", false)));
        assert_eq!(fleet_role("svc", "svc//a/a"), Some(("a", true)));
        for other in [
            "svc//drain/a",
            "svc/",
            "svc//a/",
            "svc/a/b",
            "svcx/a",
            "other/a",
            "svc",
        ] {
            assert_eq!(fleet_role("svc", other), None, "{other}");
        }
    }

    #[test]
    fn a_draining_members_policy_is_no_conflict() {
        let member = |name: &str, policy: Policy, draining: bool| ObservedMember {
            member: name.to_owned(),
            announcement: Some(Announcement {
                member: name.to_owned(),
                weight: 1.0,
                version: None,
                ready: true,
                draining,
                policy,
                roles: None,
                timing: None,
            }),
            heartbeat: None,
            live: true,
        };
        let now = UnixMillis(0);
        let upgrading = [
            member("old", Policy::Balance, true),
            member("new-1", Policy::PreferNewest, false),
            member("new-2", Policy::PreferNewest, false),
        ];
        let s = status(&upgrading, &[], now);
        assert!(!s.policy_conflict);
        assert_eq!(s.policy, Some(Policy::PreferNewest));
        // The same old member, not draining: a conflict.
        let mixed = [
            member("old", Policy::Balance, false),
            member("new-1", Policy::PreferNewest, false),
        ];
        let s = status(&mixed, &[], now);
        assert!(s.policy_conflict);
        assert_eq!(s.policy, None);
    }

    #[test]
    fn a_heartbeat_is_live_while_renewed_within_one_and_a_half_renew_intervals() {
        let timing = Timing {
            lease_duration: Duration::from_secs(2),
            renew_interval: Duration::from_millis(500),
            ..Timing::default()
        };
        let holder = |deadline: i64| Leader {
            member: MemberId::new("a").unwrap(),
            token: FencingToken::new(1, 0),
            term: 0,
            granted_at: UnixMillis(0),
            deadline: UnixMillis(deadline),
            offset: 0,
        };
        // Written at 1000 (deadline 3000): fresh until 1750.
        assert!(heartbeat_is_live(
            "a",
            &holder(3000),
            &timing,
            UnixMillis(1750)
        ));
        assert!(!heartbeat_is_live(
            "a",
            &holder(3000),
            &timing,
            UnixMillis(1751)
        ));
        assert!(!heartbeat_is_live(
            "b",
            &holder(3000),
            &timing,
            UnixMillis(1000)
        ));
        assert!(!heartbeat_is_live(
            "a",
            &holder(3000),
            &timing,
            UnixMillis(3000)
        ));
    }
}
