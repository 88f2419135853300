//! The roster and lease of one role, built from its partition's records in offset order.
//!
//! A member's join sequence is the offset of its latest registration, so a member that
//! registers again moves to the tail of the roster (no failback). The latest lease record is the
//! lease; a lease tombstone clears it. Records of other roles are skipped; malformed records are
//! skipped and counted, never fatal: safety rests on the broker's fence, not on the log.

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
                Ok(Applied::Leased)
            }
            (None, None) => {
                self.lease = None;
                Ok(Applied::LeaseCleared)
            }
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
        self.members.count
    }

    /// Whether no member is registered.
    pub fn is_empty(&self) -> bool {
        self.members.count == 0
    }

    /// The join offset of `member`, if registered.
    pub fn join_offset(&self, member: &MemberId) -> Option<i64> {
        self.members.find(member.as_str())
    }

    /// The rank of `member`: how many registered members other than the lease holder joined
    /// before it. Rank 0 challenges first. `None` when `member` is not registered.
    pub fn rank_of(&self, member: &MemberId) -> Option<usize> {
        let offset = self.join_offset(member)?;
        Some(self.rank_at(member, offset))
    }

    /// The rank a member registered at `join_offset` has (or will have once its registration
    /// is readable): members that joined before it, not counting the lease holder or `member`.
    pub fn rank_at(&self, member: &MemberId, join_offset: i64) -> usize {
        let joined = &self.members.joined;
        let before = &joined[..joined.partition_point(|&(o, _)| o < join_offset)];
        if before.is_empty() {
            return 0;
        }
        // A registered name sits at exactly its join offset, so skipping the holder's and
        // `member`'s join offsets skips them by name, without comparing names.
        let holder = self
            .lease
            .as_ref()
            .and_then(|l| self.members.find(l.lease.member.as_str()));
        let own = self.members.find(member.as_str());
        before
            .iter()
            .filter(|(o, m)| m.is_some() && Some(*o) != holder && Some(*o) != own)
            .count()
    }
}

/// Two states are equal when they hold the same role, roster, lease and counters, however
/// their records were applied.
impl PartialEq for RoleState {
    fn eq(&self, other: &RoleState) -> bool {
        self.role == other.role
            && self.members.count == other.members.count
            && self.roster().eq(other.roster())
            && self.lease == other.lease
            && self.next_offset == other.next_offset
            && self.at_last_offset == other.at_last_offset
            && self.malformed == other.malformed
    }
}

impl Eq for RoleState {}

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
            .field("next_offset", &self.next_offset)
            .field("malformed", &self.malformed)
            .finish()
    }
}

/// The registered members of a role: in join order, and by name.
#[derive(Clone, Default)]
struct Members {
    /// The members in join order, with their join offsets. Offsets only grow, so a member that
    /// joins (or joins again) is pushed at the end. A member that leaves or joins again leaves a
    /// hole (`None`) at its old place; holes are swept out once they outnumber the members,
    /// which keeps the vector within about twice the roster's size.
    joined: Vec<(i64, Option<MemberId>)>,
    /// How many entries of `joined` are members rather than holes.
    count: usize,
    /// The join offset of every member, by the hash of its name.
    by_name: ByName,
}

/// Holes are swept once there are more of them than this and than members.
const MIN_HOLES_TO_SWEEP: usize = 16;

impl Members {
    /// The members in join order.
    fn iter(&self) -> Roster<'_> {
        Roster {
            entries: self.joined.iter(),
            left: self.count,
        }
    }

    /// The slot in `by_name` of the member named `name`, and where it is in `joined`.
    fn slot_of(&self, name: &str, hash: u64) -> Option<(usize, usize)> {
        self.by_name
            .probe(hash)
            .find_map(|(slot, join)| Some((slot, locate(&self.joined, join, name)?)))
    }

    /// The join offset of the member named `name`.
    fn find(&self, name: &str) -> Option<i64> {
        let (_, at) = self.slot_of(name, name_hash(name))?;
        self.joined.get(at).map(|&(join, _)| join)
    }

    /// Moves a member to the tail at `offset` (past every offset held), or adds a new member
    /// there.
    fn register(&mut self, reg: RegistrationRef<'_>, offset: i64) {
        let name = reg.member();
        let hash = name_hash(name);
        let member = match self.slot_of(name, hash) {
            // Registered already: its name moves to the tail without a new allocation.
            Some((slot, at)) => {
                self.by_name.set(slot, offset);
                self.joined[at]
                    .1
                    .take()
                    .unwrap_or_else(|| reg.to_owned().member)
            }
            None => {
                self.by_name.insert(hash, offset);
                self.count += 1;
                reg.to_owned().member
            }
        };
        self.joined.push((offset, Some(member)));
        self.sweep();
    }

    /// Removes the member named `name`, if registered.
    fn deregister(&mut self, name: &str) {
        if let Some((slot, at)) = self.slot_of(name, name_hash(name)) {
            self.by_name.remove(slot);
            self.joined[at].1 = None;
            self.count -= 1;
            self.sweep();
        }
    }

    /// Drops the holes once they outnumber the members: each hole is swept once, so sweeping
    /// costs O(1) per record, amortised.
    fn sweep(&mut self) {
        let holes = self.joined.len() - self.count;
        if holes > self.count.max(MIN_HOLES_TO_SWEEP) {
            self.joined.retain(|(_, m)| m.is_some());
        }
    }
}

/// A hash table from the [`name_hash`] of each member to its join offset, with open addressing
/// and linear probing. Members whose names share a hash take a slot each; their names, in
/// [`Members::joined`] at their offsets, tell them apart.
#[derive(Clone, Default)]
struct ByName {
    /// A power of two many slots (or none), at most half of them used.
    slots: Vec<Slot>,
    used: usize,
}

#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    /// The join offset; [`Slot::FREE`] for a free slot. Applied offsets are never negative.
    join: i64,
}

impl Slot {
    const FREE: Slot = Slot { hash: 0, join: -1 };

    fn is_free(self) -> bool {
        self.join < 0
    }
}

impl ByName {
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// The slots (and their join offsets) holding `hash`, in probe order.
    fn probe(&self, hash: u64) -> impl Iterator<Item = (usize, i64)> + '_ {
        let mask = self.mask();
        let home = hash as usize & mask;
        (0..self.slots.len())
            .map(move |i| (home + i) & mask)
            .map(|i| (i, self.slots[i]))
            .take_while(|(_, s)| !s.is_free())
            .filter(move |(_, s)| s.hash == hash)
            .map(|(i, s)| (i, s.join))
    }

    fn set(&mut self, slot: usize, join: i64) {
        self.slots[slot].join = join;
    }

    fn insert(&mut self, hash: u64, join: i64) {
        if (self.used + 1) * 2 > self.slots.len() {
            self.grow();
        }
        self.place(Slot { hash, join });
        self.used += 1;
    }

    /// Puts `slot` in the first free slot of its probe sequence; there is one.
    fn place(&mut self, slot: Slot) {
        let mask = self.mask();
        let mut i = slot.hash as usize & mask;
        while !self.slots[i].is_free() {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    fn grow(&mut self) {
        let len = (self.slots.len() * 2).max(16);
        let old = core::mem::replace(&mut self.slots, alloc::vec![Slot::FREE; len]);
        for slot in old.into_iter().filter(|s| !s.is_free()) {
            self.place(slot);
        }
    }

    /// Frees `slot`, shifting back the slots after it that would no longer be found
    /// (backward-shift deletion, so no tombstones are needed).
    fn remove(&mut self, mut slot: usize) {
        let mask = self.mask();
        let mut next = slot;
        loop {
            next = (next + 1) & mask;
            let s = self.slots[next];
            if s.is_free() {
                break;
            }
            let home = s.hash as usize & mask;
            // `s` may move back to `slot` unless its home lies after `slot` (cyclically).
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(slot) & mask {
                self.slots[slot] = s;
                slot = next;
            }
        }
        self.slots[slot] = Slot::FREE;
        self.used -= 1;
    }
}

/// The members of a roster with holes, in join order.
struct Roster<'a> {
    entries: core::slice::Iter<'a, (i64, Option<MemberId>)>,
    left: usize,
}

impl<'a> Iterator for Roster<'a> {
    type Item = (&'a MemberId, i64);

    fn next(&mut self) -> Option<Self::Item> {
        for (o, m) in self.entries.by_ref() {
            if let Some(m) = m {
                self.left -= 1;
                return Some((m, *o));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Roster<'_> {}

impl core::iter::FusedIterator for Roster<'_> {}

/// Where in `joined` the member named `name` is, given its join offset `join`; `None` when
/// another member (or nobody) is there.
fn locate(joined: &[(i64, Option<MemberId>)], join: i64, name: &str) -> Option<usize> {
    let at = joined.binary_search_by_key(&join, |&(o, _)| o).ok()?;
    let (_, member) = joined.get(at)?;
    (member.as_ref()?.as_str() == name).then_some(at)
}

/// `a == b`, answered at once when they are the same slice (the decoder hands back the very
/// name it was told to expect when the bytes match it).
fn same_name(a: &str, b: &str) -> bool {
    core::ptr::eq(a, b) || a == b
}

/// A fixed (unseeded: every process builds the same index) 64-bit hash of a name, eight bytes
/// at a time. It only spreads names over the index; equal hashes are told apart by name.
fn name_hash(name: &str) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let mut rest = name.as_bytes();
    let mut h = rest.len() as u64;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        h = mix(h, u64::from_le_bytes(*word));
        rest = tail;
    }
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(word));
    }
    // Spread the high bits, which the multiplications mixed best, down to the low bits that
    // pick a slot.
    h ^= h >> 32;
    h = h.wrapping_mul(K);
    h ^ (h >> 29)
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

    /// The join offsets of `hash` in the table, in probe order.
    fn probed(t: &ByName, hash: u64) -> Vec<i64> {
        t.probe(hash).map(|(_, join)| join).collect()
    }

    #[test]
    fn by_name_probes_past_collisions_and_shifts_back_on_remove() {
        let mut t = ByName::default();
        assert_eq!(probed(&t, 3), []);
        // Six entries whose home is the last of 16 slots, so their run wraps around; hash 15
        // twice (names that collide), and one more entry whose home is slot 0, inside the run.
        for (hash, join) in [(15, 0), (31, 1), (15, 2), (47, 3), (16, 4), (63, 5)] {
            t.insert(hash, join);
        }
        assert_eq!(t.slots.len(), 16);
        assert_eq!(probed(&t, 15), [0, 2]);
        assert_eq!(probed(&t, 16), [4]);
        let slot = |t: &ByName, join: i64| t.slots.iter().position(|s| s.join == join).unwrap();
        // Removing from the head of the run moves the later entries back, across the wrap.
        t.remove(slot(&t, 0));
        assert_eq!(probed(&t, 15), [2]);
        assert_eq!(probed(&t, 31), [1]);
        assert_eq!(probed(&t, 47), [3]);
        assert_eq!(probed(&t, 16), [4]);
        assert_eq!(probed(&t, 63), [5]);
        t.remove(slot(&t, 3));
        t.set(slot(&t, 4), 40);
        assert_eq!(probed(&t, 16), [40]);
        assert_eq!(
            (probed(&t, 15), probed(&t, 31), probed(&t, 63)),
            (alloc::vec![2], alloc::vec![1], alloc::vec![5])
        );
        assert_eq!(t.used, 4);
        // Growing keeps every entry findable.
        for join in 100..120 {
            t.insert(join as u64 * 7, join);
        }
        assert_eq!(t.slots.len(), 64);
        assert_eq!(probed(&t, 15), [2]);
        assert!((100..120).all(|j| probed(&t, j as u64 * 7).contains(&j)));
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
    fn re_registration_leaves_a_hole_that_is_swept() {
        let mut s = RoleState::new(role());
        for i in 0..40 {
            s.apply(&reg(i, "a"));
        }
        s.apply(&reg(40, "b"));
        assert_eq!(names(&s), ["a", "b"]);
        assert_eq!(s.join_offset(&m("a")), Some(39));
        assert!(s.members.joined.len() <= 2 + MIN_HOLES_TO_SWEEP + 1);
        assert_eq!(s.len(), 2);
        let again = RoleState::build(role(), &[reg(39, "a"), reg(40, "b")]);
        assert_eq!(s, again, "holes do not make states differ");
    }
}
