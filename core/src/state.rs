//! The roster and lease of one role, built from its partition's records in offset order.
//!
//! A member's join sequence is the offset of its latest registration, so a member that
//! registers again moves to the tail of the roster (no failback). The latest lease record is the
//! lease; a lease tombstone clears it. Records of other roles are skipped; malformed records are
//! skipped and counted, never fatal: safety rests on the broker's fence, not on the log.
//!
//! A member registered ahead of a member that has held the lease had its turn first and did not
//! take it: it is *passed over* (see [`RoleState::passed_over`]). Ranks skip passed-over
//! members, so a member that died for good costs at most one failover one stagger, and nobody
//! deletes its registration.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use crate::record::{
    peek_key_role, FormatError, KeyRef, Lease, LeaseRef, MemberId, RegistrationRef, Role,
};

/// One record of `__coordination_state` as read from its partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The record's offset in its partition.
    pub offset: i64,
    /// The key bytes (an encoded [`Key`](crate::record::Key) for well-formed records).
    pub key: Vec<u8>,
    /// The value bytes; `None` or empty is a tombstone.
    pub value: Option<Vec<u8>>,
}

impl Record {
    /// A record with a value.
    pub fn new(offset: i64, key: Vec<u8>, value: Vec<u8>) -> Record {
        Record {
            offset,
            key,
            value: Some(value),
        }
    }

    /// A tombstone.
    pub fn tombstone(offset: i64, key: Vec<u8>) -> Record {
        Record {
            offset,
            key,
            value: None,
        }
    }

    fn value_bytes(&self) -> Option<&[u8]> {
        self.value.as_deref().filter(|v| !v.is_empty())
    }
}

/// The current lease of a role and the offset of the record that set it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseEntry {
    /// The lease.
    pub lease: Lease,
    /// The offset of its record.
    pub offset: i64,
}

/// What [`RoleState::apply`] did with a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// A member registered (or registered again and moved to the tail).
    Registered,
    /// A member's registration was tombstoned.
    Deregistered,
    /// The lease was set.
    Leased,
    /// The lease was cleared by a tombstone.
    LeaseCleared,
    /// The record belongs to another role of the same partition.
    OtherRole,
    /// The record's offset is not past the last one applied; it was already seen.
    AlreadySeen,
    /// The record is malformed and was counted in [`RoleState::malformed`].
    Malformed(Malformed),
}

/// Why a record was skipped as malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The key or value failed to decode.
    Format(FormatError),
    /// A registration value names another member than its key.
    MemberMismatch,
}

/// The roster and lease of one role.
///
/// Build it with [`RoleState::build`], or keep one and [`apply`](RoleState::apply) records as
/// they arrive: both give the same state, so a reader that tails the partition pays only for
/// new records.
#[derive(Clone)]
pub struct RoleState {
    role: Role,
    members: Members,
    lease: Option<LeaseEntry>,
    /// The largest join offset of a member read holding the lease: every other member
    /// registered before it was passed over.
    led_from: Option<i64>,
    next_offset: i64,
    /// Whether a record at offset `i64::MAX` was applied: `next_offset` cannot pass it, and
    /// every later record counts as seen (no offset follows the largest).
    at_last_offset: bool,
    malformed: u64,
}

impl RoleState {
    /// The state of a role before any record was read.
    pub fn new(role: Role) -> RoleState {
        RoleState {
            role,
            members: Members::default(),
            lease: None,
            led_from: None,
            next_offset: 0,
            at_last_offset: false,
            malformed: 0,
        }
    }

    /// The state after `records`, given in offset order.
    pub fn build<'a>(role: Role, records: impl IntoIterator<Item = &'a Record>) -> RoleState {
        let mut state = RoleState::new(role);
        for r in records {
            state.apply(r);
        }
        state
    }

    /// Applies one record. Records at or before the last applied offset are ignored, so reading
    /// a range again is harmless.
    pub fn apply(&mut self, record: &Record) -> Applied {
        if record.offset < self.next_offset || self.at_last_offset {
            return Applied::AlreadySeen;
        }
        match record.offset.checked_add(1) {
            Some(next) => self.next_offset = next,
            None => {
                self.next_offset = i64::MAX;
                self.at_last_offset = true;
            }
        }
        if let Some(role) = peek_key_role(&record.key) {
            if role != self.role.as_str().as_bytes() {
                return Applied::OtherRole;
            }
        }
        match self.apply_checked(record) {
            Ok(applied) => applied,
            Err(m) => {
                self.malformed += 1;
                Applied::Malformed(m)
            }
        }
    }

    /// Decodes through the borrowed records of [`record`](crate::record), so names are
    /// compared and looked up as `&str` and a name is allocated only when the state starts
    /// holding a new one: a member joins, or the lease passes to another holder. A name the
    /// state expects (its role, the key's member in the value, the holder's name in a renewal)
    /// is compared byte for byte instead of being validated as UTF-8 again.
    fn apply_checked(&mut self, record: &Record) -> Result<Applied, Malformed> {
        let key = KeyRef::decode_expecting(&record.key, Some(self.role.as_str()))
            .map_err(Malformed::Format)?;
        if !same_name(key.role(), self.role.as_str()) {
            return Ok(Applied::OtherRole);
        }
        match (key.member(), record.value_bytes()) {
            (Some(member), Some(value)) => {
                let reg = RegistrationRef::decode_expecting(value, Some(member))
                    .map_err(Malformed::Format)?;
                if !same_name(reg.member(), member) {
                    return Err(Malformed::MemberMismatch);
                }
                self.members.register(reg, record.offset);
                Ok(Applied::Registered)
            }
            (Some(member), None) => {
                self.members.deregister(member);
                Ok(Applied::Deregistered)
            }
            (None, Some(value)) => {
                let holder = self.lease.as_ref().map(|e| e.lease.member.as_str());
                let lease = LeaseRef::decode_expecting(value, holder).map_err(Malformed::Format)?;
                let renewal = holder.is_some_and(|h| same_name(h, lease.member()));
                // A renewal keeps the holder's name; a new holder's name is allocated.
                let fresh = (!renewal).then(|| lease.to_owned());
                let (token, granted_at, deadline) =
                    (lease.token(), lease.granted_at(), lease.deadline());
                match (fresh, self.lease.as_mut()) {
                    (Some(lease), _) => {
                        self.lease = Some(LeaseEntry {
                            lease,
                            offset: record.offset,
                        })
                    }
                    (None, Some(entry)) => {
                        entry.lease.token = token;
                        entry.lease.granted_at = granted_at;
                        entry.lease.deadline = deadline;
                        entry.offset = record.offset;
                    }
                    // A renewal has a holder.
                    (None, None) => {}
                }
                self.note_holder();
                Ok(Applied::Leased)
            }
            (None, None) => {
                self.lease = None;
                Ok(Applied::LeaseCleared)
            }
        }
    }

    /// Moves the passed-over mark to the holder's join offset, if it is registered and later.
    fn note_holder(&mut self) {
        let Some(entry) = self.lease.as_ref() else {
            return;
        };
        if let Some(join) = self.members.find(entry.lease.member.as_str()) {
            self.led_from = Some(self.led_from.map_or(join, |o| o.max(join)));
        }
    }

    /// Notes that a read covered the partition up to `end_offset` (exclusive), so the next
    /// read starts there even if the last records were compacted away or were control records.
    pub fn advance_to(&mut self, end_offset: i64) {
        self.next_offset = self.next_offset.max(end_offset);
    }

    /// The role.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The offset the next read should start at.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// How many records of this partition were malformed and skipped.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// The current lease, if any.
    pub fn lease(&self) -> Option<&LeaseEntry> {
        self.lease.as_ref()
    }

    /// The registered members in join order, with their join offsets.
    pub fn roster(&self) -> impl ExactSizeIterator<Item = (&MemberId, i64)> + '_ {
        self.members.iter()
    }

    /// How many members are registered.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether no member is registered.
    pub fn is_empty(&self) -> bool {
        self.members.len() == 0
    }

    /// The join offset of `member`, if registered.
    pub fn join_offset(&self, member: &MemberId) -> Option<i64> {
        self.members.find(member.as_str())
    }

    /// The rank of `member`: how many registered members other than the lease holder joined
    /// before it, not counting passed-over members. Rank 0 challenges first. `None` when
    /// `member` is not registered or was passed over (it must register again to be ranked).
    pub fn rank_of(&self, member: &MemberId) -> Option<usize> {
        let offset = self.join_offset(member)?;
        if self.passed_over(member) {
            return None;
        }
        Some(self.rank_at(member, offset))
    }

    /// Whether `member` was passed over: it is registered, does not hold the lease, and joined
    /// before a member that has held the lease since (as far as this state has read). That
    /// member's turn came after `member`'s, so `member` had its turn and did not take the role:
    /// it died, left without deregistering, or was too slow. Ranks skip it. Nobody deletes its
    /// registration; a live member that finds itself passed over registers again, at the tail.
    ///
    /// The mark is the largest join offset of any holder read, so it survives compaction as
    /// long as the current holder's lease and registration do, and it stays when a resign
    /// clears the lease.
    pub fn passed_over(&self, member: &MemberId) -> bool {
        let Some(join) = self.join_offset(member) else {
            return false;
        };
        let holds = self
            .lease
            .as_ref()
            .is_some_and(|e| e.lease.member == *member);
        !holds && self.led_from.is_some_and(|mark| join < mark)
    }

    /// The offset before which registrations (other than the holder's) are passed over: the
    /// largest join offset of a member read holding the lease. `None` while no holder was read
    /// registered.
    pub fn led_from(&self) -> Option<i64> {
        self.led_from
    }

    /// The rank a member registered at `join_offset` has (or will have once its registration
    /// is readable): members that joined before it, not counting the lease holder, `member`
    /// or passed-over members.
    ///
    /// The holder is skipped only through the registration it led from, one that precedes
    /// the lease record: a holder that registered again after its latest lease record (it
    /// restarted under the same name, or re-registered after its registration was deleted) is
    /// a new candidate at its new place and counts like any other member.
    pub fn rank_at(&self, member: &MemberId, join_offset: i64) -> usize {
        // A registered name sits at exactly its join offset, so skipping the holder's and
        // `member`'s join offsets skips them by name, without comparing names.
        let holder = self.lease.as_ref().and_then(|l| {
            self.members
                .find(l.lease.member.as_str())
                .filter(|&joined| joined < l.offset)
        });
        let own = self.members.find(member.as_str());
        let from = self.led_from.unwrap_or(i64::MIN);
        if from >= join_offset {
            return 0;
        }
        self.members
            .joined
            .range(from..join_offset)
            .filter(|(&o, _)| Some(o) != holder && Some(o) != own)
            .count()
    }
}

/// Two states are equal when they hold the same role, roster, lease and counters, however
/// their records were applied.
impl PartialEq for RoleState {
    fn eq(&self, other: &RoleState) -> bool {
        self.role == other.role
            && self.members.len() == other.members.len()
            && self.roster().eq(other.roster())
            && self.lease == other.lease
            && self.led_from == other.led_from
            && self.next_offset == other.next_offset
            && self.at_last_offset == other.at_last_offset
            && self.malformed == other.malformed
    }
}

impl Eq for RoleState {}

/// Hashes what [`PartialEq`] compares, so equal states hash alike.
impl core::hash::Hash for RoleState {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.role.hash(h);
        self.members.len().hash(h);
        for (member, offset) in self.roster() {
            member.hash(h);
            offset.hash(h);
        }
        self.lease.hash(h);
        self.led_from.hash(h);
        self.next_offset.hash(h);
        self.at_last_offset.hash(h);
        self.malformed.hash(h);
    }
}

impl fmt::Debug for RoleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// The roster as a map from join offset to member.
        struct JoinOrder<'a>(&'a Members);
        impl fmt::Debug for JoinOrder<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map()
                    .entries(self.0.iter().map(|(m, o)| (o, m)))
                    .finish()
            }
        }
        f.debug_struct("RoleState")
            .field("role", &self.role)
            .field("roster", &JoinOrder(&self.members))
            .field("lease", &self.lease)
            .field("led_from", &self.led_from)
            .field("next_offset", &self.next_offset)
            .field("malformed", &self.malformed)
            .finish()
    }
}

/// The registered members of a role: in join order, and by name. Two ordered maps from the
/// standard library; a roster is usually a handful of members.
#[derive(Clone, Default)]
struct Members {
    /// Join offset -> member. A member that joins again moves to its new (larger) offset.
    joined: BTreeMap<i64, MemberId>,
    /// Member -> join offset.
    by_name: BTreeMap<MemberId, i64>,
}

impl Members {
    /// The members in join order.
    fn iter(&self) -> impl ExactSizeIterator<Item = (&MemberId, i64)> + '_ {
        self.joined.iter().map(|(&offset, member)| (member, offset))
    }

    fn len(&self) -> usize {
        self.by_name.len()
    }

    /// The join offset of the member named `name`.
    fn find(&self, name: &str) -> Option<i64> {
        self.by_name.get(name).copied()
    }

    /// Moves a member to the tail at `offset` (past every offset held), or adds a new member
    /// there.
    fn register(&mut self, reg: RegistrationRef<'_>, offset: i64) {
        match self.by_name.get_mut(reg.member()) {
            Some(join) => {
                if let Some(member) = self.joined.remove(join) {
                    self.joined.insert(offset, member);
                }
                *join = offset;
            }
            None => {
                let member = reg.to_owned().member;
                self.by_name.insert(member.clone(), offset);
                self.joined.insert(offset, member);
            }
        }
    }

    /// Removes the member named `name`, if registered.
    fn deregister(&mut self, name: &str) {
        if let Some(join) = self.by_name.remove(name) {
            self.joined.remove(&join);
        }
    }
}

/// `a == b`, answered at once when they are the same slice (the decoder hands back the very
/// name it was told to expect when the bytes match it).
fn same_name(a: &str, b: &str) -> bool {
    core::ptr::eq(a, b) || a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Key, Registration};
    use crate::time::UnixMillis;
    use crate::token::FencingToken;

    fn role() -> Role {
        Role::new("orders").unwrap()
    }
    fn m(s: &str) -> MemberId {
        MemberId::new(s).unwrap()
    }
    fn reg(offset: i64, member: &str) -> Record {
        let key = Key::registration(role(), m(member)).encode();
        let value = Registration {
            member: m(member),
            registered_at: UnixMillis(offset),
        }
        .encode();
        Record::new(offset, key, value)
    }
    fn dereg(offset: i64, member: &str) -> Record {
        Record::tombstone(offset, Key::registration(role(), m(member)).encode())
    }
    fn lease(offset: i64, member: &str, deadline: i64) -> Record {
        let value = Lease {
            member: m(member),
            token: FencingToken::new(1, offset as i16),
            granted_at: UnixMillis(0),
            deadline: UnixMillis(deadline),
        }
        .encode();
        Record::new(offset, Key::lease(role()).encode(), value)
    }

    fn names(s: &RoleState) -> Vec<&str> {
        s.roster().map(|(m, _)| m.as_str()).collect()
    }

    #[test]
    fn join_order_is_offset_order_and_reregistration_moves_to_tail() {
        let records = [reg(0, "a"), reg(1, "b"), reg(2, "c"), reg(3, "a")];
        let s = RoleState::build(role(), &records);
        assert_eq!(names(&s), ["b", "c", "a"]);
        assert_eq!(s.rank_of(&m("b")), Some(0));
        assert_eq!(s.rank_of(&m("a")), Some(2));
        assert_eq!(s.next_offset(), 4);
    }

    /// The model checker's finding 2: the holder restarted under its name and registered again
    /// (after its lease record) before b registered. Its new registration ranks like anyone's,
    /// so b ranks behind it instead of both ranking 0.
    #[test]
    fn a_holder_registered_again_after_its_lease_counts_in_the_ranks() {
        let mut s = RoleState::build(role(), &[reg(0, "a"), lease(1, "a", 10), reg(2, "a")]);
        s.apply(&reg(3, "b"));
        assert_eq!(s.rank_of(&m("a")), Some(0));
        assert_eq!(s.rank_of(&m("b")), Some(1), "the restarted holder is ahead");
        // Leading from its registration (one before its lease record), it is skipped.
        s.apply(&lease(4, "a", 20));
        assert_eq!(s.rank_of(&m("b")), Some(0));
    }

    #[test]
    fn members_ahead_of_a_holder_are_passed_over_and_skipped_by_the_ranks() {
        let mut s = RoleState::build(
            role(),
            &[
                reg(0, "ghost"),
                reg(1, "a"),
                reg(2, "b"),
                reg(3, "c"),
                lease(4, "a", 10),
            ],
        );
        assert!(s.passed_over(&m("ghost")), "ahead of the holder");
        assert!(!s.passed_over(&m("a")), "the holder never is");
        assert!(!s.passed_over(&m("b")) && !s.passed_over(&m("c")));
        assert_eq!(s.rank_of(&m("ghost")), None);
        assert_eq!((s.rank_of(&m("b")), s.rank_of(&m("c"))), (Some(0), Some(1)));
        // c overtakes b (b was slow at its turn): b is passed over too.
        s.apply(&lease(5, "c", 20));
        assert!(s.passed_over(&m("b")) && s.passed_over(&m("a")));
        assert_eq!(s.led_from(), Some(3));
        // A resign clears the lease and deregisters c: the mark stays, so the next member
        // behind c is first, not the ghost or the slow b.
        s.apply(&Record::tombstone(6, Key::lease(role()).encode()));
        s.apply(&dereg(7, "c"));
        s.apply(&reg(8, "d"));
        assert!(s.passed_over(&m("b")));
        assert_eq!(s.rank_of(&m("d")), Some(0));
        // b registers again: at the tail, ranked again, behind d.
        s.apply(&reg(9, "b"));
        assert!(!s.passed_over(&m("b")));
        assert_eq!(s.rank_of(&m("b")), Some(1));
        assert_eq!(s.len(), 4, "ghost, a, d, b: nobody was deleted");
    }

    #[test]
    fn a_holder_that_never_registered_passes_nobody_over() {
        let s = RoleState::build(role(), &[reg(0, "a"), reg(1, "b"), lease(2, "x", 10)]);
        assert_eq!(s.led_from(), None);
        assert_eq!((s.rank_of(&m("a")), s.rank_of(&m("b"))), (Some(0), Some(1)));
    }

    #[test]
    fn tombstones_remove_members_and_clear_the_lease() {
        let records = [
            reg(0, "a"),
            reg(1, "b"),
            lease(2, "a", 100),
            dereg(3, "b"),
            Record::tombstone(4, Key::lease(role()).encode()),
        ];
        let s = RoleState::build(role(), &records[..3]);
        assert_eq!(s.lease().map(|l| l.offset), Some(2));
        assert_eq!(s.rank_of(&m("b")), Some(0), "the holder does not count");
        let s = RoleState::build(role(), &records);
        assert_eq!(names(&s), ["a"]);
        assert!(s.lease().is_none());
    }

    #[test]
    fn other_roles_and_malformed_records_are_skipped() {
        let other = Key::registration(Role::new("billing").unwrap(), m("x")).encode();
        let mismatch = Record::new(
            3,
            Key::registration(role(), m("a")).encode(),
            Registration {
                member: m("b"),
                registered_at: UnixMillis(0),
            }
            .encode(),
        );
        let records = [
            reg(0, "a"),
            Record::new(1, other, alloc::vec![1, 2, 3]),
            Record::new(2, alloc::vec![0, 0, 0, 9], alloc::vec![]),
            mismatch,
        ];
        let mut s = RoleState::build(role(), &records);
        assert_eq!(names(&s), ["a"]);
        assert_eq!(s.malformed(), 2);
        assert_eq!(s.apply(&reg(1, "z")), Applied::AlreadySeen);
    }

    /// Found by the fuzz harness: a second record at offset `i64::MAX` (where the next offset
    /// saturates) was applied again, so two members shared one join offset and the roster
    /// lost its order (lookups by offset then found the wrong member).
    #[test]
    fn nothing_is_applied_after_a_record_at_the_largest_offset() {
        let mut s = RoleState::new(role());
        assert_eq!(s.apply(&reg(5, "a")), Applied::Registered);
        assert_eq!(s.apply(&reg(i64::MAX, "b")), Applied::Registered);
        assert_eq!(s.apply(&reg(i64::MAX, "c")), Applied::AlreadySeen);
        assert_eq!(s.apply(&dereg(i64::MAX, "b")), Applied::AlreadySeen);
        assert_eq!(names(&s), ["a", "b"]);
        assert_eq!(s.join_offset(&m("b")), Some(i64::MAX));
        assert_eq!(s.rank_of(&m("b")), Some(1));
        assert_eq!(s.next_offset(), i64::MAX);
        // A read that covered up to the largest offset, but applied nothing there, still takes
        // a record at it.
        let mut t = RoleState::new(role());
        t.advance_to(i64::MAX);
        assert_eq!(t.apply(&reg(i64::MAX, "a")), Applied::Registered);
        assert_eq!(t.apply(&reg(i64::MAX, "a")), Applied::AlreadySeen);
    }

    #[test]
    fn re_registration_moves_a_member_to_the_tail() {
        let mut s = RoleState::new(role());
        for i in 0..40 {
            s.apply(&reg(i, "a"));
        }
        s.apply(&reg(40, "b"));
        assert_eq!(names(&s), ["a", "b"]);
        assert_eq!(s.join_offset(&m("a")), Some(39));
        assert_eq!(s.members.joined.len(), 2, "one entry per member");
        assert_eq!(s.len(), 2);
        let again = RoleState::build(role(), &[reg(39, "a"), reg(40, "b")]);
        assert_eq!(s, again, "the path to a state does not make it differ");
    }
}
