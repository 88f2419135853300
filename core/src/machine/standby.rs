//! A standby's side of a [`Candidate`]: reading the role's partition, waiting for its turn,
//! checking with the coordinator and challenging (see the type's "Before a challenge" and
//! "Stalled reads").

use alloc::collections::VecDeque;
use core::time::Duration;

use super::{Candidate, Io, Seen, RECHECK};
use crate::evaluate::{evaluate, Standing, Step};
use crate::leadership_status::{LeadershipStatus, TransactionState};
use crate::record::MemberId;
use crate::state::{Applied, Record};
use crate::time::UnixMillis;
use crate::token::FencingToken;

impl Candidate {
    /// A read's answer (see [`Event::RecordsRead`](super::Event::RecordsRead)); `long_poll` says
    /// whether the read could wait for the partition to move.
    pub(super) fn on_read(
        &mut self,
        now: UnixMillis,
        records: &[Record],
        end_offset: i64,
        stalled: bool,
        high_watermark: Option<i64>,
        long_poll: bool,
    ) {
        let unseen_before = self.registration_unseen();
        let mut lease_moved = false;
        let was_held_back = self.held_back;
        let was_stalled = self.stalled;
        let rank_before = self.rank;
        // Whether this read ends with a live lease cleared: its holder left (a resign).
        let mut left = false;
        for r in records {
            let live = self.lease_deadline().is_some_and(|deadline| deadline > now);
            match self.state.apply(r) {
                applied @ (Applied::Leased | Applied::LeaseCleared) => {
                    left = live && matches!(applied, Applied::LeaseCleared);
                    self.lease_read = self.state.lease().map(|e| (e.offset, now));
                    lease_moved = true;
                    // The lease moved on: whatever challenge this member waited for is decided.
                    self.contested_until = None;
                    self.deferred_to = None;
                    self.holding_since = None;
                    self.waited = false;
                    self.released_at = None;
                    self.blind = Duration::ZERO;
                    self.outage_until = None;
                    self.stall_horizon = None;
                }
                Applied::Deregistered if self.announces_a_challenge(r) => {
                    // Another member's challenge is on its way to the coordinator: wait for
                    // its first lease as for a challenge seen at the coordinator.
                    let until = now + self.timing.lease_duration;
                    self.contested_until =
                        Some(self.contested_until.map_or(until, |c| c.max(until)));
                    self.holding_since = None;
                    self.waited = false;
                }
                _ => {}
            }
        }
        self.state.advance_to(end_offset);
        self.served_again(now);
        self.held_back = self.registration_unseen();
        if unseen_before && !self.registration_unseen() && self.contested_until.is_some() {
            // A wait for another member's challenge begun before our reads reached our own
            // registration was timed by a rank we did not know. Judge that challenge again,
            // with a fresh check, now that the roster is read.
            self.contested_until = None;
            self.deferred_to = None;
        }
        self.stalled = stalled;
        self.high_watermark = high_watermark;
        self.read_issued_at = self.issued_at;
        // A check answers only the read that directly follows it, and only while the lease it
        // was compared with stands: once the lease moved (a renewal, a new holder, a resign's
        // tombstone), what the check saw is judged again by a new one.
        let check = self.check.take().filter(|_| !lease_moved);
        if self.resigning {
            self.issue(Io::Deregister);
            return;
        }
        if self.state.lease().is_some() {
            self.unleased_since = None;
        } else if self.unleased_since.is_none() {
            self.unleased_since = Some(now);
        }
        let Some(join_offset) = self.join_offset else {
            self.issue(Io::Register);
            return;
        };
        let standing = self.standing(join_offset, now);
        match evaluate(&self.state, &self.member, &standing, now, &self.timing) {
            Step::NotRegistered | Step::PassedOver => {
                self.rank = None;
                self.issue(Io::Register);
            }
            Step::Challenge { rank } => {
                self.rank = Some(rank);
                if was_held_back && !self.registration_unseen() {
                    // Our reads were held back short of our own registration (an open
                    // transaction stalls every standby's reads alike) and this one is the
                    // first past it. If our turn came after we registered, it went by while
                    // we could not see it, and the other ranks learn theirs at this moment
                    // too. Count as released, so that the ranks stagger again from now.
                    let then = self.registered_at;
                    let held = evaluate(&self.state, &self.member, &standing, then, &self.timing);
                    self.waited |= matches!(held, Step::Wait { .. });
                }
                if was_stalled && !stalled && rank_before.is_some_and(|before| rank < before) {
                    // The read that ends a stall moved this member up, past its turn: a
                    // member ahead of it registered again (or left) behind the stall. Every
                    // member whose reads the stall held counted that member ahead, and one
                    // of them may be challenging right now on the rank it read before the
                    // stall ended, which can be this member's new one. Count as released,
                    // so that the ranks stagger again from now.
                    self.waited = true;
                }
                let stagger = self.timing.challenge_stagger;
                let turn = self.lease_deadline().map(|deadline| {
                    deadline.max(self.outage_until.unwrap_or(deadline))
                        + stagger.saturating_mul(u32::try_from(rank).unwrap_or(u32::MAX))
                });
                if turn.is_some_and(|turn| turn > self.read_issued_at) {
                    // The lease ran out only after this read was issued (a long poll, or an
                    // answer held up): its holder may have renewed since, under the same pair.
                    // A challenge rests on a read issued at or after the turn.
                    self.issue(Io::Read { wait_until: None });
                    return;
                }
                if left && rank == 0 && !stalled && check.is_none() && self.unchallenged() {
                    // The holder cleared its lease before its deadline, in this read: it left,
                    // its exit pair fenced what it held, and no other member's turn has come
                    // (theirs are staggers after they read the same tombstone). What a check
                    // would find is the exit pair, with nothing open: the first rank goes now.
                    self.challenge(now);
                    return;
                }
                match check {
                    Some(status) => self.decide(now, &status),
                    None => self.issue(Io::Describe),
                }
            }
            Step::Wait { until, rank } => {
                self.rank = Some(rank);
                if !records.is_empty() || !long_poll {
                    // The partition moved, or this read did not wait for it (a read at a turn,
                    // after a check or a lost race): keep tailing, and let a reader that can
                    // long-poll wait for the next record until the turn, so that the record
                    // that ends the wait (a new lease, a resign's tombstone) is read as it
                    // lands. A reader that answers at once returns nothing and the timer takes
                    // over: no busy loop.
                    self.tail_until(now, until);
                } else {
                    self.wait_until(now, until);
                }
            }
        }
    }

    /// A call of this standby failed: the cluster could not serve the role from `since` (the
    /// call's start; a long poll's failure, from when it failed).
    pub(super) fn went_blind(&mut self, since: UnixMillis) {
        self.blind_since.get_or_insert(since);
    }

    /// Whether `io`, answered at `now`, is a check that took longer than a challenge stagger:
    /// longer than the failover bound allows a call ("Bound"), so the cluster could not serve
    /// it for that while (a client that retried until a new coordinator answered). Only a
    /// check: a read may have been slow because this process was paused, which is no outage
    /// of the cluster's, and a check comes only at a turn.
    pub(super) fn slow(&self, now: UnixMillis, io: Io) -> bool {
        matches!(io, Io::Describe | Io::Probe)
            && now.since(self.issued_at) > self.timing.challenge_stagger
    }

    /// When this standby, waiting for its turn at `turn`, next asks the coordinator whether it
    /// answers: while the lease it read is another member's and that member is late to renew
    /// (no renewal for one and a half renew intervals since the lease was written), every half
    /// renew interval until the lease's deadline (as far as an outage moved it) or the turn,
    /// whichever comes first. Not while it waits for another member's challenge. A holder that
    /// is late because its coordinator died (or moved) cannot renew until a new one answers,
    /// and the standbys' reads of the partition do not show that: a probe that fails shows it,
    /// and the time until one is answered is counted as an outage (see "When the cluster
    /// cannot serve the role"). `None`: no probe before the turn.
    fn probe_at(&self, turn: UnixMillis) -> Option<UnixMillis> {
        let lease = &self.state.lease()?.lease;
        let contested = self.contested_until.is_some() || self.deferred_to.is_some();
        if lease.member == self.member || contested || !self.probe_late_holder {
            return None;
        }
        let deadline = self.lease_deadline()?;
        let renew = self.timing.renew_interval;
        let written = deadline.saturating_sub(self.timing.lease_duration);
        let late = written + renew.saturating_add(renew / 2);
        let every = (renew / 2).max(Duration::from_millis(1));
        let at = self.probed_at.map_or(late, |p| late.max(p + every));
        let end = turn.min(deadline.max(self.outage_until.unwrap_or(deadline)));
        (at < end).then_some(at)
    }

    /// Waits for the turn at `until` tailing the partition (the read returns when a record
    /// lands, or at `until`), or probes the coordinator first when the holder is late to renew
    /// (see [`probe_at`](Self::probe_at)): at once when a probe is due, else the wait ends at
    /// the next one.
    fn tail_until(&mut self, now: UnixMillis, until: UnixMillis) {
        match self.probe_at(until) {
            Some(at) if at <= now => self.issue(Io::Probe),
            probe => self.issue(Io::Read {
                wait_until: Some(probe.map_or(until, |at| at.min(until))),
            }),
        }
    }

    /// A call of this standby was answered. If calls failed before it, the cluster could not
    /// serve the role for that while, and neither could the holder renew: the lease read
    /// (if any) is taken to run that much longer, and at least as long again past now (up to a
    /// renew interval), so that a holder retrying its renewal gets it through before any
    /// standby's turn. Returns whether calls failed before.
    pub(super) fn served_again(&mut self, now: UnixMillis) -> bool {
        let Some(since) = self.blind_since.take() else {
            return false;
        };
        let Some(deadline) = self.lease_deadline() else {
            return true;
        };
        // A lease written after the calls began to fail (its deadline is a lease duration
        // after its write) shows that its holder could write then: it was not held up, and
        // its lease runs a whole duration from that write.
        let written = deadline.saturating_sub(self.timing.lease_duration);
        if written > since {
            return true;
        }
        let blind = now.since(since);
        self.blind = self.blind.saturating_add(blind);
        // The holder gets back the time it lost, and, once the cluster serves again, as long
        // as the outage lasted (up to a renew interval) to get a renewal through.
        let grace = blind.min(self.timing.renew_interval);
        let until = (deadline + self.blind).max(now + grace);
        self.outage_until = Some(self.outage_until.map_or(until, |u| u.max(until)));
        true
    }

    /// The deadline of the lease read, as far as this member trusts the holder's clock: at
    /// most a lease duration plus the skew allowance after this member first read the lease
    /// (see "Another member's clock" on [`Candidate`]).
    pub(super) fn lease_deadline(&self) -> Option<UnixMillis> {
        let entry = self.state.lease()?;
        let deadline = entry.lease.deadline;
        Some(match self.lease_read {
            Some((offset, read)) if offset == entry.offset => deadline.min(
                read + self
                    .timing
                    .lease_duration
                    .saturating_add(self.max_clock_skew),
            ),
            _ => deadline,
        })
    }

    /// Whether this standby knows of no challenge and no outage that it waits out.
    fn unchallenged(&self) -> bool {
        self.contested_until.is_none() && self.deferred_to.is_none() && self.outage_until.is_none()
    }

    /// Whether this member's reads have not reached its own registration yet.
    fn registration_unseen(&self) -> bool {
        self.join_offset
            .is_some_and(|join| self.state.next_offset() <= join)
    }

    /// Waits for this member's turn at `until` with nothing to long-poll on, then reads. While
    /// its reads have not reached its own registration (a partition whose reads stall behind
    /// another role's open transaction, common when a process claims thousands of roles at
    /// once), that turn is a whole lease after it registered: it reads again every
    /// [`RECHECK`] instead, so that it learns its real turn once the stall ends, not a lease
    /// later.
    ///
    /// A probe of the coordinator (see [`probe_at`](Self::probe_at)) goes out at once when it
    /// is due, and otherwise ends the wait when it comes first.
    fn wait_until(&mut self, now: UnixMillis, until: UnixMillis) {
        let probe = self.probe_at(until);
        if probe.is_some_and(|at| at <= now) {
            self.issue(Io::Probe);
            return;
        }
        let at = if self.registration_unseen() {
            until.min(now + self.recheck_interval())
        } else {
            until
        };
        let at = probe.map_or(at, |probe| at.min(probe));
        self.timer = Some((at, Io::Read { wait_until: None }));
    }

    /// Whether `record`, a registration tombstone just applied, announces another member's
    /// challenge: it names the holder of the lease (a holder deregisters itself only after its
    /// lease was cleared or overwritten), and it is not this member's own announcement.
    fn announces_a_challenge(&self, record: &Record) -> bool {
        let Some(holder) = self.state.lease().map(|e| &e.lease.member) else {
            return false;
        };
        let named = crate::record::KeyRef::decode(&record.key)
            .ok()
            .and_then(|k| k.member())
            .is_some_and(|m| m == holder.as_str());
        named && *holder != self.member && self.announced_at != Some(record.offset)
    }

    /// The pair of the lease this member read, if any.
    fn lease_pair(&self) -> Option<FencingToken> {
        self.state.lease().map(|e| e.lease.token)
    }

    /// Whether the read that led to a check settles the matter when the check finds the lease's
    /// own pair: the pair is unchanged, so no other member took the role, and the read (issued
    /// at or after this member's turn, see [`on_read`](Self::on_read)) found the lease already
    /// run out then: the holder had stopped renewing (a healthy holder keeps its deadline a
    /// lease minus a renew interval ahead), and a renewal it wrote later came too late. Not
    /// when the read stalled: the renewals may be behind the stall.
    fn read_settles(&self, status: &LeadershipStatus) -> bool {
        !self.stalled && self.lease_pair() == Some(status.token)
    }

    /// The coordinator answered the pre-challenge check. A challenge under way elsewhere is
    /// waited out at once, and the holder of the lease read (quiet, or writing past its
    /// deadline) is challenged at once when the read was not stalled; otherwise a fresh read
    /// follows (so that anything the coordinator finished is readable in it) and
    /// [`decide`](Self::decide) settles the matter.
    pub(super) fn on_described(&mut self, now: UnixMillis, status: LeadershipStatus) {
        if self.resigning {
            self.start_cleanup();
            return;
        }
        if self.served_again(now) {
            // The coordinator answers again after failing: the holder's renewals may have
            // failed the same way. Read again, and wait as long as the outage says.
            self.issue(Io::Read { wait_until: None });
            return;
        }
        match Seen::of(&status, self.lease_pair()) {
            Seen::Untaken => self.challenge(now),
            // The holder whose lease ran out still has the coordinator's pair, and the read
            // found the lease already expired when it was issued: that read stands.
            Seen::Quiet | Seen::HolderWriting if self.read_settles(&status) => self.challenge(now),
            Seen::Challenger { pair, minted_only } => {
                // A pair minted and unused right after our own acquire failed is most likely
                // ours (the reply was lost): carry the challenge on rather than wait it out.
                let ours = minted_only
                    && self
                        .acquire_failed_at
                        .is_some_and(|at| now < at + self.timing.challenge_stagger);
                if self.deferred_to == Some(pair) && !minted_only && self.registration_unseen() {
                    // Its challenger is gone, but the transaction it left open (a claim, or a
                    // resign's lease tombstone) holds this member's reads short of its own
                    // registration, and those of every member that registered behind it. None
                    // of them knows its rank: each counted its turn a lease after registering,
                    // met this pair there and gave it a lease, so they would all mint here
                    // together. Wait for the coordinator's abort of that transaction at its
                    // timeout (a lease after it began, so not long now): it releases every read
                    // at once, and the ranks stagger from then (`on_read`; `waited` makes the
                    // release count even when the turn came before the registration). Read
                    // again shortly until then, as a member that has read no lease does
                    // (`acquire`).
                    self.waited = true;
                    let at = now + self.recheck_interval();
                    self.timer = Some((at, Io::Read { wait_until: None }));
                } else if ours || self.deferred_to == Some(pair) {
                    // Ours, or a challenge that was given a whole lease to write its first
                    // lease and did not: its challenger is gone.
                    self.acquire();
                } else {
                    self.defer(now, pair, &status);
                }
            }
            Seen::Settling | Seen::HolderWriting | Seen::Quiet => {
                self.check = Some(status);
                self.issue(Io::Read { wait_until: None });
            }
        }
    }

    /// The read that followed a check still says it is this member's turn.
    fn decide(&mut self, now: UnixMillis, status: &LeadershipStatus) {
        match Seen::of(status, self.lease_pair()) {
            Seen::Untaken => self.challenge(now),
            Seen::Challenger { pair, .. } => self.defer(now, pair, status),
            Seen::Settling => {
                self.holding_since = None;
                self.recheck(now);
            }
            Seen::HolderWriting if self.stalled => {
                // The holder's transaction is open and reads stall. Either the holder died in
                // the middle of a write (the acquire will abort it) or another role stalls the
                // partition while a healthy holder renews: a renewal commits within moments,
                // so only a transaction open for half a renew interval is taken as dead. How
                // long it has been open: since the coordinator says it began, when it says so
                // (a holder killed mid-write is found at the turn, not half an interval
                // later, and frees the partition its transaction stalls); else since this
                // standby first saw it open.
                let seen = *self.holding_since.get_or_insert(now);
                let since = status.transaction_started.map_or(seen, |at| at.min(now));
                if now >= since + self.hold() {
                    // The lower ranks, if holding too, started later: this one goes first.
                    self.acquire();
                } else {
                    self.recheck(now);
                }
            }
            Seen::Quiet if self.stalled && !self.past_stall_horizon(status.token) => {
                // Nothing of this role is open, yet the read stops short: another role's open
                // transaction hides the partition's newer records, among them (perhaps) this
                // role's renewals. The lease read is not known to be expired: wait until the
                // reads get past what the stall hid at this member's turn (the stalling
                // transaction's timeout bounds it), even if other transactions keep the
                // partition stalled after that.
                self.holding_since = None;
                self.recheck(now);
            }
            Seen::HolderWriting | Seen::Quiet => self.challenge(now),
        }
    }

    /// Nothing stands in the way any more. A member that had to wait at its turn (a stall, a
    /// coordinator in the middle of an abort) is released together with every other rank that
    /// waited on the same thing: the ranks are staggered again from the release, so that rank
    /// `r` challenges `r` staggers after it (and rank 0 at once).
    fn challenge(&mut self, now: UnixMillis) {
        let rank = self.rank.unwrap_or(0);
        if self.waited && rank > 0 {
            self.waited = false;
            self.holding_since = None;
            self.released_at = Some(now);
            self.wait_for_turn(now);
            return;
        }
        self.acquire();
    }

    /// The challenge proper: announce it (when evicting, and a lease names another holder),
    /// then mint the epoch.
    ///
    /// Not while this member's reads have neither reached its own registration nor read any
    /// lease: the role's first claim is open (its challenger died in it), every member that
    /// registered since is held back alike, and none of them knows its rank, so they would
    /// challenge together. The coordinator's abort of that claim at its timeout (or a member
    /// that reads its registration) releases them; this member reads again every [`RECHECK`]
    /// until then. With a lease read, a member held back short of its registration still
    /// challenges at its turn (a lease after it registered): a holder that died in the middle
    /// of a renewal is aborted by the first standby that comes, not by the timeout. Not so
    /// another member's transaction it deferred to (see [`on_described`](Self::on_described)).
    fn acquire(&mut self) {
        if self.registration_unseen() && self.lease_pair().is_none() && !self.resigning {
            // Read again shortly (not only check: a check alone never reaches the
            // registration).
            let at = self.now + self.recheck_interval();
            self.timer = Some((at, Io::Read { wait_until: None }));
            return;
        }
        self.deferred_to = None;
        self.holding_since = None;
        self.stall_horizon = None;
        self.acquire_failed_at = None;
        self.waited = false;
        self.released_at = None;
        let announce = self.evict
            && self
                .state
                .lease()
                .is_some_and(|e| e.lease.member != self.member);
        self.issue(if announce { Io::Announce } else { Io::Acquire });
    }

    /// Another member's challenge under `pair` is under way: treat the role as leased to it for
    /// one lease duration from now (the lease it is about to write would run that long), and
    /// count this member's turn from then. If that challenge writes its first lease, the read
    /// of it ends the wait; if not, the next check finds the same pair and challenges (once
    /// its reads have reached its own registration, when that pair's transaction holds them).
    ///
    /// When its claim's transaction is open and the coordinator says since when, the wait ends
    /// no later than a lease after that start: a claim open that long belongs to a challenger
    /// that died in the middle of it (a live one commits its first lease within moments), and
    /// the coordinator aborts it about then. The members released by that abort then all count
    /// their turns from about the same instant, so their ranks keep them apart. Not while this
    /// member's reads have not reached its own registration: its rank is not known yet, and
    /// the abort that releases the reads shows it.
    fn defer(&mut self, now: UnixMillis, pair: FencingToken, status: &LeadershipStatus) {
        self.deferred_to = Some(pair);
        self.holding_since = None;
        self.waited = false;
        let open_since = status
            .transaction_started
            .filter(|_| status.state == Some(TransactionState::Ongoing))
            .filter(|_| !self.registration_unseen());
        let until = now + self.timing.lease_duration;
        let until = open_since.map_or(until, |at| until.min(at + self.timing.lease_duration));
        self.contested_until = Some(self.contested_until.map_or(until, |c| c.max(until)));
        self.wait_for_turn(now);
    }

    /// Whether the reads, stalled since a check found `pair` with nothing open, have got past
    /// everything the stall hid then: the high watermark of the first stalled read after a
    /// check that found `pair`, kept as the horizon. Whatever that pair committed before the
    /// check lies below it: when it is the pair of the lease read, a holder alive at its
    /// deadline renewed before this member's turn (which came before the check); when it is
    /// another pair, a leader elected since then wrote its first lease before the check.
    /// Reads that reach the horizon with the lease unchanged show that neither happened, even
    /// while other roles' transactions keep the partition stalled (a partition that thousands
    /// of roles renew on is seldom without one). Without a high watermark from the transport,
    /// only a read that is not stalled shows it.
    fn past_stall_horizon(&mut self, pair: FencingToken) -> bool {
        let read_to = self.state.next_offset();
        if self.stall_horizon.is_none_or(|(seen, _)| seen != pair) {
            // A high watermark at or below where a stalled read stopped says nothing.
            self.stall_horizon = self
                .high_watermark
                .filter(|&hw| hw > read_to)
                .map(|hw| (pair, hw));
        }
        self.stall_horizon
            .is_some_and(|(_, horizon)| read_to >= horizon)
    }

    /// Looks at the state again at `now + recheck` (a check, then a read).
    fn recheck(&mut self, now: UnixMillis) {
        self.waited = true;
        self.timer = Some((now + self.recheck_interval(), Io::Describe));
    }

    fn recheck_interval(&self) -> Duration {
        RECHECK
            .min(self.timing.renew_interval / 8)
            .max(Duration::from_millis(1))
    }

    /// How long the holder's transaction must be seen open during a stall before it is taken
    /// for a dead holder's: half a renew interval.
    fn hold(&self) -> Duration {
        (self.timing.renew_interval / 2).max(Duration::from_millis(1))
    }

    /// What this member, registered at `join_offset`, knows about itself at `now`, for
    /// [`evaluate`].
    fn standing(&self, join_offset: i64, now: UnixMillis) -> Standing {
        Standing {
            join_offset,
            registered_at: self.registered_at,
            unleased_since: self.unleased_since.unwrap_or(now),
            lease_deadline: self.lease_deadline(),
            contested_until: self
                .contested_until
                .max(self.released_at)
                .max(self.outage_until),
        }
    }

    /// Waits for this member's next turn as the state now stands.
    fn wait_for_turn(&mut self, now: UnixMillis) {
        let Some(join_offset) = self.join_offset else {
            self.issue(Io::Register);
            return;
        };
        let standing = self.standing(join_offset, now);
        match evaluate(&self.state, &self.member, &standing, now, &self.timing) {
            Step::NotRegistered | Step::PassedOver => self.issue(Io::Register),
            Step::Wait { until, rank } => {
                // Tail the partition until the turn rather than sleep: the record that ends
                // the wait (the lease of the challenger deferred to, or the tombstone of a
                // resign whose exit pair the check saw) is read as it lands. A reader that
                // answers at once brings nothing new, and the timer takes over.
                self.rank = Some(rank);
                self.tail_until(now, until);
            }
            // Not reachable with a contest window in the future; look again shortly.
            Step::Challenge { .. } => self.recheck(now),
        }
    }

    /// The members registered ahead of this new leader: each had its turn before this
    /// member's and did not take the role (it died, left without deregistering, or is too slow
    /// to lead), and the previous holder among them. Their registrations are tombstoned so
    /// that no later failover waits a stagger for them.
    pub(super) fn passed_over(&self) -> VecDeque<(MemberId, u32)> {
        let Some(join) = self.join_offset else {
            return VecDeque::new();
        };
        self.state
            .roster()
            .filter(|(m, o)| *o < join && **m != self.member)
            .map(|(m, _)| (m.clone(), 0))
            .collect()
    }
}
