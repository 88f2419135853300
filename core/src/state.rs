//! The roster and lease of one role, built from its partition's records in offset order.
//!
//! A member's join sequence is the offset of its latest registration, so a member that
//! registers again moves to the tail of the roster (no failback). The latest lease record is the
//! lease; a lease tombstone clears it. Records of other roles are skipped; malformed records are
//! skipped and counted, never fatal: safety rests on the broker's fence, not on the log.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleState {
    role: Role,
    join_offsets: BTreeMap<MemberId, i64>,
    roster: BTreeMap<i64, MemberId>,
    lease: Option<LeaseEntry>,
    next_offset: i64,
    malformed: u64,
}

impl RoleState {
    /// The state of a role before any record was read.
    pub fn new(role: Role) -> RoleState {
        RoleState {
            role,
            join_offsets: BTreeMap::new(),
            roster: BTreeMap::new(),
            lease: None,
            next_offset: 0,
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
        if record.offset < self.next_offset {
            return Applied::AlreadySeen;
        }
        self.next_offset = record.offset.saturating_add(1);
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

    /// Decodes through the borrowed records of [`record`](crate::record): names are compared and
    /// looked up as `&str`, and a member's name is allocated only when the state starts holding
    /// a new one (a member joins, or the lease passes to another holder).
    fn apply_checked(&mut self, record: &Record) -> Result<Applied, Malformed> {
        let key = KeyRef::decode(&record.key).map_err(Malformed::Format)?;
        if key.role() != self.role.as_str() {
            return Ok(Applied::OtherRole);
        }
        match (key.member(), record.value_bytes()) {
            (Some(member), Some(value)) => {
                let reg = RegistrationRef::decode(value).map_err(Malformed::Format)?;
                if reg.member() != member {
                    return Err(Malformed::MemberMismatch);
                }
                self.register(reg, record.offset);
                Ok(Applied::Registered)
            }
            (Some(member), None) => {
                if let Some(old) = self.join_offsets.remove(member) {
                    self.roster.remove(&old);
                }
                Ok(Applied::Deregistered)
            }
            (None, Some(value)) => {
                let lease = LeaseRef::decode(value).map_err(Malformed::Format)?;
                match &mut self.lease {
                    // A renewal by the holder: keep its name, update the rest.
                    Some(entry) if entry.lease.member.as_str() == lease.member() => {
                        entry.lease.token = lease.token();
                        entry.lease.granted_at = lease.granted_at();
                        entry.lease.deadline = lease.deadline();
                        entry.offset = record.offset;
                    }
                    slot => {
                        *slot = Some(LeaseEntry {
                            lease: lease.to_owned(),
                            offset: record.offset,
                        })
                    }
                }
                Ok(Applied::Leased)
            }
            (None, None) => {
                self.lease = None;
                Ok(Applied::LeaseCleared)
            }
        }
    }

    /// Moves a registered member to the tail at `offset`, or adds a new one there.
    fn register(&mut self, reg: RegistrationRef<'_>, offset: i64) {
        match self.join_offsets.get_mut(reg.member()) {
            Some(join) => {
                let old = core::mem::replace(join, offset);
                // The roster holds every member of `join_offsets` at its join offset; its name
                // moves along without a new allocation.
                let member = self
                    .roster
                    .remove(&old)
                    .unwrap_or_else(|| reg.to_owned().member);
                self.roster.insert(offset, member);
            }
            None => {
                let member = reg.to_owned().member;
                self.join_offsets.insert(member.clone(), offset);
                self.roster.insert(offset, member);
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
        self.roster.iter().map(|(o, m)| (m, *o))
    }

    /// How many members are registered.
    pub fn len(&self) -> usize {
        self.roster.len()
    }

    /// Whether no member is registered.
    pub fn is_empty(&self) -> bool {
        self.roster.is_empty()
    }

    /// The join offset of `member`, if registered.
    pub fn join_offset(&self, member: &MemberId) -> Option<i64> {
        self.join_offsets.get(member).copied()
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
        let holder = self.lease.as_ref().map(|l| &l.lease.member);
        self.roster
            .range(..join_offset)
            .filter(|(_, m)| Some(*m) != holder && *m != member)
            .count()
    }
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
}
