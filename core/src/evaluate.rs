//! One decision of a standby from a role's state: wait, challenge, or register again.
//!
//! A standby of rank `n` challenges at the lease deadline plus `n` challenge staggers. The rank
//! counts registered members other than the lease holder that joined earlier, skipping members
//! that were passed over ([`RoleState::passed_over`]). With no lease
//! (never taken, or cleared by a resign) the member counts from the moment it first saw the
//! role without one. The stagger only saves epoch churn: InitProducerId is atomic at the
//! coordinator, so even simultaneous challenges leave exactly one newest epoch.

use crate::record::MemberId;
use crate::state::RoleState;
use crate::time::{duration_millis, UnixMillis};
use crate::timing::Timing;

/// What a member knows about itself beyond the shared state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Standing {
    /// The offset of this member's latest registration.
    pub join_offset: i64,
    /// When this member wrote that registration, by its own clock.
    pub registered_at: UnixMillis,
    /// When this member first saw the role without a lease (ignored while a lease exists).
    pub unleased_since: UnixMillis,
    /// The lease's deadline as far as this member trusts the holder's clock (see "Another
    /// member's clock" on [`Candidate`](crate::machine::Candidate)): an earlier instant than
    /// the one the lease names takes its place. `None`: the lease's own deadline.
    pub lease_deadline: Option<UnixMillis>,
    /// After losing a challenge race, the member treats the role as leased until this instant
    /// unless a lease record appears: the winner is writing its first lease.
    pub contested_until: Option<UnixMillis>,
}

/// The outcome of [`evaluate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not this member's turn before `until`; look at the state again then.
    Wait {
        /// The instant this member may challenge, given the state as read.
        until: UnixMillis,
        /// This member's rank.
        rank: usize,
    },
    /// The lease lapsed and this member's turn has come: mint an epoch now.
    Challenge {
        /// This member's rank.
        rank: usize,
    },
    /// The state was read past this member's registration and the member is not on the
    /// roster (its registration was tombstoned): it must register again.
    NotRegistered,
    /// A member that joined after this one has held the lease since this member registered:
    /// this member's turn went by. It registers again, at the tail of the roster, to be
    /// ranked again (no failback).
    PassedOver,
}

/// Decides the next step of `member` from `state` at `now`.
pub fn evaluate(
    state: &RoleState,
    member: &MemberId,
    standing: &Standing,
    now: UnixMillis,
    timing: &Timing,
) -> Step {
    let lease = state.lease();
    // Until the read reaches its own registration, the member counts itself at that offset.
    let unseen = state.next_offset() <= standing.join_offset;
    let registered = unseen
        || state
            .join_offset(member)
            .is_some_and(|o| o >= standing.join_offset);
    if !registered {
        return Step::NotRegistered;
    }
    if !unseen && state.passed_over(member) {
        return Step::PassedOver;
    }
    let rank = state.rank_at(member, standing.join_offset);
    let deadline = lease.map(|entry| {
        standing
            .lease_deadline
            .map_or(entry.lease.deadline, |d| d.min(entry.lease.deadline))
    });
    let base = match (deadline, standing.contested_until) {
        (Some(deadline), Some(c)) => deadline.max(c),
        (Some(deadline), None) => deadline,
        (None, Some(c)) => c,
        (None, None) => standing.unleased_since,
    };
    // Records before our own registration may not be readable yet (a lease whose commit is
    // still settling, or a read held back by an open transaction): until we can read our own
    // registration, assume a lease may exist for one lease duration after we registered.
    let base = if unseen {
        base.max(standing.registered_at + timing.lease_duration)
    } else {
        base
    };
    let rank_ms = i64::try_from(rank).unwrap_or(i64::MAX);
    let delay = duration_millis(timing.challenge_stagger).saturating_mul(rank_ms);
    let turn = UnixMillis(base.0.saturating_add(delay));
    if now >= turn {
        Step::Challenge { rank }
    } else {
        Step::Wait { until: turn, rank }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Key, Lease, Registration, Role};
    use crate::state::Record;
    use crate::token::FencingToken;
    use core::time::Duration;

    fn role() -> Role {
        Role::new("r").unwrap()
    }
    fn m(s: &str) -> MemberId {
        MemberId::new(s).unwrap()
    }
    fn reg(offset: i64, member: &str) -> Record {
        Record::new(
            offset,
            Key::registration(role(), m(member)).encode(),
            Registration {
                member: m(member),
                registered_at: UnixMillis(0),
            }
            .encode(),
        )
    }
    fn lease(offset: i64, member: &str, token: FencingToken, deadline: i64) -> Record {
        Record::new(
            offset,
            Key::lease(role()).encode(),
            Lease {
                member: m(member),
                token,
                granted_at: UnixMillis(0),
                deadline: UnixMillis(deadline),
            }
            .encode(),
        )
    }
    fn timing() -> Timing {
        Timing {
            partitions: 1,
            lease_duration: Duration::from_millis(3000),
            renew_interval: Duration::from_millis(1000),
            challenge_stagger: Duration::from_millis(500),
        }
    }
    fn standing(join_offset: i64) -> Standing {
        Standing {
            join_offset,
            registered_at: UnixMillis(100),
            unleased_since: UnixMillis(100),
            lease_deadline: None,
            contested_until: None,
        }
    }

    #[test]
    fn ranks_challenge_at_deadline_plus_stagger() {
        let t = FencingToken::new(1, 0);
        let records = [
            reg(0, "a"),
            reg(1, "b"),
            reg(2, "c"),
            lease(3, "a", t, 10_000),
        ];
        let s = RoleState::build(role(), &records);
        let at = |who: &str, off: i64, now: i64| {
            evaluate(&s, &m(who), &standing(off), UnixMillis(now), &timing())
        };
        assert_eq!(
            at("b", 1, 0),
            Step::Wait {
                until: UnixMillis(10_000),
                rank: 0
            }
        );
        assert_eq!(
            at("c", 2, 0),
            Step::Wait {
                until: UnixMillis(10_500),
                rank: 1
            }
        );
        assert_eq!(at("b", 1, 10_000), Step::Challenge { rank: 0 });
        assert_eq!(
            at("c", 2, 10_499),
            Step::Wait {
                until: UnixMillis(10_500),
                rank: 1
            }
        );
        // The holder restarted: its old lease binds it like any standby.
        assert_eq!(
            at("a", 4, 0),
            Step::Wait {
                until: UnixMillis(11_000),
                rank: 2
            }
        );
    }

    #[test]
    fn without_a_lease_members_count_from_first_sight() {
        let s = RoleState::build(role(), &[reg(0, "a"), reg(1, "b")]);
        let e =
            |who: &str, off: i64| evaluate(&s, &m(who), &standing(off), UnixMillis(100), &timing());
        assert_eq!(e("a", 0), Step::Challenge { rank: 0 });
        assert_eq!(
            e("b", 1),
            Step::Wait {
                until: UnixMillis(600),
                rank: 1
            }
        );
    }

    #[test]
    fn unreadable_own_registration_counts_at_the_tail_and_lost_registration_is_reported() {
        let s = RoleState::build(role(), &[reg(0, "a")]);
        // b registered at offset 5 at t=100, not yet readable: rank 1 behind a, and a lease
        // it cannot read yet may exist, so it waits one lease duration before its turn.
        assert_eq!(
            evaluate(&s, &m("b"), &standing(5), UnixMillis(100), &timing()),
            Step::Wait {
                until: UnixMillis(100 + 3000 + 500),
                rank: 1
            }
        );
        // Once its registration is readable, the member counts from its first sight.
        let mut seen = s.clone();
        seen.apply(&reg(5, "b"));
        assert_eq!(
            evaluate(&seen, &m("b"), &standing(5), UnixMillis(100), &timing()),
            Step::Wait {
                until: UnixMillis(600),
                rank: 1
            }
        );
        let mut s2 = s.clone();
        s2.advance_to(6);
        assert_eq!(
            evaluate(&s2, &m("b"), &standing(5), UnixMillis(100), &timing()),
            Step::NotRegistered
        );
    }

    #[test]
    fn a_lost_race_waits_for_the_winner() {
        let s = RoleState::build(role(), &[reg(0, "a"), reg(1, "b")]);
        let st = Standing {
            contested_until: Some(UnixMillis(3100)),
            ..standing(0)
        };
        assert_eq!(
            evaluate(&s, &m("a"), &st, UnixMillis(200), &timing()),
            Step::Wait {
                until: UnixMillis(3100),
                rank: 0
            }
        );
    }
}
