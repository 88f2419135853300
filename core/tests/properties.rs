//! Properties of the record format that hold for every input, not only the golden vectors:
//! decoding never panics, the encoding round-trips, the format is canonical (bytes that
//! decode are exactly the encoding of what they decode to), and the borrowed decoders
//! (`KeyRef`, `RegistrationRef`, `LeaseRef`) give exactly what the owned ones give, errors
//! included.
//!
//! Last, `RoleState` is run against a reference model: the straightforward reading of the
//! records (owned decoding, ordered maps by name and by offset) must give the same outcome for
//! every record and the same roster, lease, offsets and ranks after it.

use std::collections::BTreeMap;

use kafka_coordination_core::record::{
    FormatError, FormatErrorKind, Key, KeyRef, Lease, LeaseRef, MemberId, Part, Registration,
    RegistrationRef, Role, MAX_NAME_BYTES,
};
use kafka_coordination_core::state::{Applied, LeaseEntry, Malformed, Record, RoleState};
use kafka_coordination_core::{FencingToken, UnixMillis};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

/// Any valid name: arbitrary Unicode (NUL, combining marks, supplementary planes) up to a few
/// hundred bytes, a plain ASCII one, and now and then one at or near the `i16::MAX` byte limit.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => vec(any::<char>(), 1..48).prop_map(String::from_iter),
        3 => vec(any::<char>(), 48..200).prop_map(String::from_iter),
        3 => "[a-z0-9._-]{1,40}",
        1 => (MAX_NAME_BYTES - 100..=MAX_NAME_BYTES).prop_map(|n| "x".repeat(n)),
        // 10922 three-byte characters are 32766 bytes; one ASCII byte more is the limit.
        1 => (10_800usize..=10_922, any::<bool>()).prop_map(|(n, tail)| {
            let mut s = "€".repeat(n);
            if tail {
                s.push('x');
            }
            s
        }),
    ]
}

fn role() -> impl Strategy<Value = Role> {
    name().prop_map(|s| Role::new(s).expect("the strategy makes valid names"))
}

fn member() -> impl Strategy<Value = MemberId> {
    name().prop_map(|s| MemberId::new(s).expect("the strategy makes valid names"))
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        (role(), member()).prop_map(|(r, m)| Key::registration(r, m)),
        role().prop_map(Key::lease),
    ]
}

fn registration() -> impl Strategy<Value = Registration> {
    (member(), any::<i64>()).prop_map(|(member, at)| Registration {
        member,
        registered_at: UnixMillis(at),
    })
}

fn lease() -> impl Strategy<Value = Lease> {
    (
        member(),
        any::<i64>(),
        any::<i16>(),
        any::<i64>(),
        any::<i64>(),
    )
        .prop_map(
            |(member, producer_id, producer_epoch, granted_at, deadline)| Lease {
                member,
                token: FencingToken::new(producer_id, producer_epoch),
                granted_at: UnixMillis(granted_at),
                deadline: UnixMillis(deadline),
            },
        )
}

/// One valid encoding of any part.
fn valid_encoding() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        key().prop_map(|k| k.encode()),
        registration().prop_map(|r| r.encode()),
        lease().prop_map(|l| l.encode()),
    ]
}

/// A change to a valid encoding, aimed at the places a decoder can go wrong.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR one byte with a non-zero mask.
    Flip(Index, u8),
    /// Keep only a prefix.
    Truncate(Index),
    /// Insert one byte.
    Insert(Index, u8),
    /// Drop one byte.
    Remove(Index),
    /// Overwrite two bytes with a big-endian i16, e.g. a version, kind or length prefix.
    PutI16(Index, i16),
    /// Append bytes.
    Append(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 1..=255u8).prop_map(|(i, m)| Mutation::Flip(i, m)),
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Remove),
        (
            any::<Index>(),
            prop_oneof![
                Just(-1i16),
                Just(0),
                Just(1),
                Just(2),
                Just(i16::MAX),
                Just(i16::MIN),
                any::<i16>()
            ]
        )
            .prop_map(|(i, v)| Mutation::PutI16(i, v)),
        vec(any::<u8>(), 1..8).prop_map(Mutation::Append),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match m {
        Mutation::Flip(i, mask) if len > 0 => bytes[i.index(len)] ^= mask,
        Mutation::Truncate(i) if len > 0 => bytes.truncate(i.index(len)),
        Mutation::Insert(i, b) => bytes.insert(i.index(len + 1), *b),
        Mutation::Remove(i) if len > 0 => {
            bytes.remove(i.index(len));
        }
        Mutation::PutI16(i, v) if len >= 2 => {
            let at = i.index(len - 1);
            bytes[at..at + 2].copy_from_slice(&v.to_be_bytes());
        }
        Mutation::Append(tail) => bytes.extend_from_slice(tail),
        _ => {}
    }
}

/// Decodes `bytes` as every part. Whatever comes back must be consistent: an error names the
/// part that was decoded, and a success re-encodes to exactly `bytes`.
fn decode_all_parts(bytes: &[u8]) -> Result<(), TestCaseError> {
    fn check<T>(
        bytes: &[u8],
        part: Part,
        result: Result<T, FormatError>,
        encode: impl Fn(&T) -> Vec<u8>,
    ) -> Result<(), TestCaseError> {
        match result {
            Ok(v) => prop_assert_eq!(encode(&v), bytes, "{} decoded but is not canonical", part),
            Err(e) => prop_assert_eq!(e.part, part),
        }
        Ok(())
    }
    check(bytes, Part::Key, Key::decode(bytes), Key::encode)?;
    check(
        bytes,
        Part::RegistrationValue,
        Registration::decode(bytes),
        Registration::encode,
    )?;
    check(bytes, Part::LeaseValue, Lease::decode(bytes), Lease::encode)?;
    borrowed_decode_is_owned_decode(bytes)
}

/// Decodes `bytes` as every part with both decoders: the borrowed one must succeed exactly
/// when the owned one does, with the same fields, and fail with the same error otherwise.
fn borrowed_decode_is_owned_decode(bytes: &[u8]) -> Result<(), TestCaseError> {
    let owned = Key::decode(bytes);
    let borrowed = KeyRef::decode(bytes);
    prop_assert_eq!(
        borrowed,
        owned.as_ref().map(Key::as_borrowed).map_err(|e| *e)
    );
    prop_assert_eq!(borrowed.map(KeyRef::to_owned), owned);

    let owned = Registration::decode(bytes);
    let borrowed = RegistrationRef::decode(bytes);
    prop_assert_eq!(
        borrowed,
        owned
            .as_ref()
            .map(Registration::as_borrowed)
            .map_err(|e| *e)
    );
    prop_assert_eq!(borrowed.map(RegistrationRef::to_owned), owned);

    let owned = Lease::decode(bytes);
    let borrowed = LeaseRef::decode(bytes);
    prop_assert_eq!(
        borrowed,
        owned.as_ref().map(Lease::as_borrowed).map_err(|e| *e)
    );
    prop_assert_eq!(borrowed.map(LeaseRef::to_owned), owned);
    Ok(())
}

proptest! {
    #[test]
    fn key_round_trips(k in key()) {
        let bytes = k.encode();
        prop_assert_eq!(bytes.len(), k.encoded_len());
        prop_assert_eq!(Key::decode(&bytes), Ok(k));
    }

    #[test]
    fn registration_round_trips(r in registration()) {
        let bytes = r.encode();
        prop_assert_eq!(bytes.len(), r.encoded_len());
        prop_assert_eq!(Registration::decode(&bytes), Ok(r));
    }

    #[test]
    fn lease_round_trips(l in lease()) {
        let bytes = l.encode();
        prop_assert_eq!(bytes.len(), l.encoded_len());
        prop_assert_eq!(Lease::decode(&bytes), Ok(l));
    }

    #[test]
    fn encode_into_appends_exactly_the_encoding(prefix in vec(any::<u8>(), 0..16), l in lease(), k in key()) {
        let mut buf = prefix.clone();
        k.encode_into(&mut buf);
        l.encode_into(&mut buf);
        let mut want = prefix;
        want.extend(k.encode());
        want.extend(l.encode());
        prop_assert_eq!(buf, want);
    }

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..512)) {
        decode_all_parts(&bytes)?;
    }

    #[test]
    fn borrowed_decode_equals_owned_decode_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..512)) {
        borrowed_decode_is_owned_decode(&bytes)?;
    }

    #[test]
    fn borrowed_decode_equals_owned_decode_on_valid_and_mutated_encodings(
        mut bytes in valid_encoding(),
        mutations in vec(mutation(), 0..3),
    ) {
        borrowed_decode_is_owned_decode(&bytes)?;
        for m in &mutations {
            apply(&mut bytes, m);
            borrowed_decode_is_owned_decode(&bytes)?;
        }
    }

    #[test]
    fn borrowed_round_trips(k in key(), r in registration(), l in lease()) {
        let bytes = k.encode();
        prop_assert_eq!(KeyRef::decode(&bytes), Ok(k.as_borrowed()));
        let bytes = r.encode();
        prop_assert_eq!(RegistrationRef::decode(&bytes), Ok(r.as_borrowed()));
        let bytes = l.encode();
        prop_assert_eq!(LeaseRef::decode(&bytes), Ok(l.as_borrowed()));
    }

    #[test]
    fn decode_never_panics_on_small_headers(
        version in prop_oneof![Just(0i16), any::<i16>()],
        kind in prop_oneof![Just(0i16), Just(1), any::<i16>()],
        tail in vec(any::<u8>(), 0..64),
    ) {
        // Arbitrary bytes rarely start with a valid version and kind; these always do often.
        let mut bytes = version.to_be_bytes().to_vec();
        bytes.extend(kind.to_be_bytes());
        bytes.extend(tail);
        decode_all_parts(&bytes)?;
    }

    #[test]
    fn decode_never_panics_on_mutated_encodings(
        mut bytes in valid_encoding(),
        mutations in vec(mutation(), 1..4),
    ) {
        for m in &mutations {
            apply(&mut bytes, m);
        }
        decode_all_parts(&bytes)?;
    }

    #[test]
    fn every_proper_prefix_fails(l in lease(), k in key(), cut in any::<Index>()) {
        let bytes = k.encode();
        let n = cut.index(bytes.len());
        let err = Key::decode(&bytes[..n]).expect_err("a proper prefix of a key");
        prop_assert!(matches!(err.kind, FormatErrorKind::Truncated { .. } | FormatErrorKind::Overlong { .. }), "{}", err);

        let bytes = l.encode();
        let n = cut.index(bytes.len());
        let err = Lease::decode(&bytes[..n]).expect_err("a proper prefix of a lease value");
        prop_assert!(matches!(err.kind, FormatErrorKind::Truncated { .. } | FormatErrorKind::Overlong { .. }), "{}", err);
    }

    #[test]
    fn bytes_after_a_record_are_trailing(r in registration(), k in key(), tail in vec(any::<u8>(), 1..8)) {
        let mut bytes = r.encode();
        bytes.extend(&tail);
        let err = Registration::decode(&bytes).expect_err("a registration with trailing bytes");
        prop_assert_eq!(err.kind, FormatErrorKind::TrailingBytes { count: tail.len() });

        let mut bytes = k.encode();
        bytes.extend(&tail);
        let err = Key::decode(&bytes).expect_err("a key with trailing bytes");
        prop_assert_eq!(err.kind, FormatErrorKind::TrailingBytes { count: tail.len() });
    }
}

// ---------------------------------------------------------------------------------------------
// RoleState against a reference model.
// ---------------------------------------------------------------------------------------------

/// The roster and lease of one role as the record format defines them, read the plain way:
/// owned decoding, members by name and by join offset in ordered maps.
#[derive(Debug)]
struct Model {
    role: Role,
    join_offsets: BTreeMap<MemberId, i64>,
    roster: BTreeMap<i64, MemberId>,
    lease: Option<LeaseEntry>,
    /// Every join offset a member had while a lease record named it.
    holders_joined: Vec<i64>,
    next_offset: i64,
    malformed: u64,
}

impl Model {
    fn new(role: Role) -> Model {
        Model {
            role,
            join_offsets: BTreeMap::new(),
            roster: BTreeMap::new(),
            lease: None,
            holders_joined: Vec::new(),
            next_offset: 0,
            malformed: 0,
        }
    }

    /// The role of an encoded key, read without decoding the rest.
    fn peek_role(key: &[u8]) -> Option<&[u8]> {
        let len = i16::from_be_bytes([*key.get(4)?, *key.get(5)?]);
        key.get(6..6 + usize::try_from(len).ok()?)
    }

    fn apply(&mut self, record: &Record) -> Applied {
        if record.offset < self.next_offset {
            return Applied::AlreadySeen;
        }
        self.next_offset = record.offset.saturating_add(1);
        if Model::peek_role(&record.key).is_some_and(|r| r != self.role.as_str().as_bytes()) {
            return Applied::OtherRole;
        }
        match self.apply_checked(record) {
            Ok(applied) => applied,
            Err(m) => {
                self.malformed += 1;
                Applied::Malformed(m)
            }
        }
    }

    fn apply_checked(&mut self, record: &Record) -> Result<Applied, Malformed> {
        let key = Key::decode(&record.key).map_err(Malformed::Format)?;
        if *key.role() != self.role {
            return Ok(Applied::OtherRole);
        }
        let value = record.value.as_deref().filter(|v| !v.is_empty());
        match (key, value) {
            (Key::Registration { member, .. }, Some(value)) => {
                let reg = Registration::decode(value).map_err(Malformed::Format)?;
                if reg.member != member {
                    return Err(Malformed::MemberMismatch);
                }
                if let Some(old) = self.join_offsets.insert(member.clone(), record.offset) {
                    self.roster.remove(&old);
                }
                self.roster.insert(record.offset, member);
                Ok(Applied::Registered)
            }
            (Key::Registration { member, .. }, None) => {
                if let Some(old) = self.join_offsets.remove(&member) {
                    self.roster.remove(&old);
                }
                Ok(Applied::Deregistered)
            }
            (Key::Lease { .. }, Some(value)) => {
                let lease = Lease::decode(value).map_err(Malformed::Format)?;
                if let Some(&joined) = self.join_offsets.get(&lease.member) {
                    self.holders_joined.push(joined);
                }
                self.lease = Some(LeaseEntry {
                    lease,
                    offset: record.offset,
                });
                Ok(Applied::Leased)
            }
            (Key::Lease { .. }, None) => {
                self.lease = None;
                Ok(Applied::LeaseCleared)
            }
        }
    }

    /// Registered, not the holder, and joined before some member that held a lease since.
    fn passed_over(&self, member: &MemberId) -> bool {
        let holder = self.lease.as_ref().map(|l| &l.lease.member);
        self.join_offsets.get(member).is_some_and(|&joined| {
            Some(member) != holder && self.holders_joined.iter().any(|&h| joined < h)
        })
    }

    /// The holder is not counted when it registered before its lease record (it leads from
    /// that registration); a holder registered again since is a candidate like any other.
    fn rank_at(&self, member: &MemberId, join_offset: i64) -> usize {
        let leading = |m: &MemberId, joined: i64| {
            self.lease
                .as_ref()
                .is_some_and(|l| l.lease.member == *m && joined < l.offset)
        };
        self.roster
            .range(..join_offset)
            .filter(|(&o, m)| !leading(m, o) && *m != member && !self.passed_over(m))
            .count()
    }

    fn rank_of(&self, member: &MemberId) -> Option<usize> {
        let joined = *self.join_offsets.get(member)?;
        (!self.passed_over(member)).then(|| self.rank_at(member, joined))
    }
}

/// One step of a partition's history.
#[derive(Clone, Debug)]
enum Step {
    /// A registration of member `.0`; with `.1`, its value names that member instead.
    Register(usize, Option<usize>),
    /// A tombstone of member `.0`'s registration; an empty value when `.1`.
    Deregister(usize, bool),
    /// A lease held by member `.0`.
    Lease(usize, i16, i64),
    /// A lease tombstone.
    ClearLease,
    /// A registration or lease of another role.
    OtherRole(usize, bool),
    /// Our role's key with bytes that do not decode as a value.
    BadValue(bool, Vec<u8>),
    /// Arbitrary key bytes.
    BadKey(Vec<u8>),
}

/// The members of the histories: short and long names, shared prefixes, equal lengths,
/// non-ASCII; enough of them to grow the state's tables and leave holes to sweep.
fn pool() -> Vec<MemberId> {
    let mut names: Vec<String> = (0..40).map(|i| format!("node-{i:02}")).collect();
    names.extend(["a", "b", "ab", "ba", "n\u{e9}ud", "\u{1f980}", "node-00 "].map(String::from));
    names.push("x".repeat(200));
    names.push(format!("{}y", "x".repeat(199)));
    names
        .into_iter()
        .map(|n| MemberId::new(n).expect("valid member"))
        .collect()
}

fn step(members: usize) -> impl Strategy<Value = Step> {
    // Most steps touch a few members, so that they register again, leave and come back.
    let who = prop_oneof![3 => 0..6usize, 1 => 0..members];
    prop_oneof![
        8 => (who.clone(), prop::option::weighted(0.05, 0..members))
            .prop_map(|(m, other)| Step::Register(m, other)),
        3 => (who.clone(), any::<bool>()).prop_map(|(m, empty)| Step::Deregister(m, empty)),
        4 => (who, any::<i16>(), any::<i64>()).prop_map(|(m, e, d)| Step::Lease(m, e, d)),
        1 => Just(Step::ClearLease),
        2 => (0..members, any::<bool>()).prop_map(|(m, lease)| Step::OtherRole(m, lease)),
        1 => (any::<bool>(), vec(any::<u8>(), 1..24)).prop_map(|(l, v)| Step::BadValue(l, v)),
        1 => vec(any::<u8>(), 0..24).prop_map(Step::BadKey),
    ]
}

fn record(step: &Step, offset: i64, role: &Role, other: &Role, pool: &[MemberId]) -> Record {
    let reg = |r: &Role, m: &MemberId| Key::registration(r.clone(), m.clone()).encode();
    let lease = |m: &MemberId, epoch: i16, deadline: i64| Lease {
        member: m.clone(),
        token: FencingToken::new(7, epoch),
        granted_at: UnixMillis(offset),
        deadline: UnixMillis(deadline),
    };
    match step {
        Step::Register(m, named) => {
            let value = Registration {
                member: pool[named.unwrap_or(*m)].clone(),
                registered_at: UnixMillis(offset),
            };
            Record::new(offset, reg(role, &pool[*m]), value.encode())
        }
        Step::Deregister(m, true) => Record::new(offset, reg(role, &pool[*m]), Vec::new()),
        Step::Deregister(m, false) => Record::tombstone(offset, reg(role, &pool[*m])),
        Step::Lease(m, epoch, deadline) => Record::new(
            offset,
            Key::lease(role.clone()).encode(),
            lease(&pool[*m], *epoch, *deadline).encode(),
        ),
        Step::ClearLease => Record::tombstone(offset, Key::lease(role.clone()).encode()),
        Step::OtherRole(m, false) => Record::tombstone(offset, reg(other, &pool[*m])),
        Step::OtherRole(m, true) => Record::new(
            offset,
            Key::lease(other.clone()).encode(),
            lease(&pool[*m], 1, 2).encode(),
        ),
        Step::BadValue(false, v) => Record::new(offset, reg(role, &pool[0]), v.clone()),
        Step::BadValue(true, v) => {
            Record::new(offset, Key::lease(role.clone()).encode(), v.clone())
        }
        Step::BadKey(k) => Record::new(offset, k.clone(), vec![0, 0]),
    }
}

/// Asserts that the state shows what the model holds.
fn same_as_model(s: &RoleState, m: &Model, pool: &[MemberId]) -> Result<(), TestCaseError> {
    let roster: Vec<(&MemberId, i64)> = s.roster().collect();
    let want: Vec<(&MemberId, i64)> = m.roster.iter().map(|(o, m)| (m, *o)).collect();
    prop_assert_eq!(&roster, &want);
    prop_assert_eq!(s.roster().len(), want.len());
    prop_assert_eq!(s.len(), want.len());
    prop_assert_eq!(s.is_empty(), want.is_empty());
    prop_assert_eq!(s.lease(), m.lease.as_ref());
    prop_assert_eq!(s.next_offset(), m.next_offset);
    prop_assert_eq!(s.malformed(), m.malformed);
    let probes = [0, m.next_offset / 2, m.next_offset, i64::MAX];
    for member in pool {
        let joined = m.join_offsets.get(member).copied();
        prop_assert_eq!(s.join_offset(member), joined, "join offset of {}", member);
        prop_assert_eq!(s.rank_of(member), m.rank_of(member), "rank of {}", member);
        prop_assert_eq!(
            s.passed_over(member),
            m.passed_over(member),
            "{} passed over",
            member
        );
        for at in probes {
            prop_assert_eq!(
                s.rank_at(member, at),
                m.rank_at(member, at),
                "rank of {} at {}",
                member,
                at
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn role_state_matches_the_reference_model(
        steps in vec((step(pool().len()), 0..4u8), 1..400),
    ) {
        let pool = pool();
        let role = Role::new("orders").expect("valid role");
        let other = Role::new("orders-eu").expect("valid role");
        let mut state = RoleState::new(role.clone());
        let mut model = Model::new(role.clone());
        let mut records = Vec::new();
        let mut offset = 0i64;
        for (i, (step, gap)) in steps.iter().enumerate() {
            // Mostly the next offset, sometimes a gap, now and then one already read.
            offset = match gap {
                0 => offset.saturating_sub(2),
                1 => offset + 3,
                _ => offset + 1,
            };
            let r = record(step, offset, &role, &other, &pool);
            let applied = state.apply(&r);
            prop_assert_eq!(&applied, &model.apply(&r), "step {}: {:?}", i, step);
            same_as_model(&state, &model, &pool)?;
            records.push(r);
        }
        let built = RoleState::build(role, &records);
        prop_assert_eq!(&built, &state);
        prop_assert_eq!(&state.clone(), &state);
    }
}
