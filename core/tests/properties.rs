//! Properties of the record format that hold for every input, not only the golden vectors:
//! decoding never panics, the encoding round-trips, and the format is canonical (bytes that
//! decode are exactly the encoding of what they decode to).

use kafka_coordination_core::record::{
    FormatError, FormatErrorKind, Key, Lease, MemberId, Part, Registration, Role, MAX_NAME_BYTES,
};
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
