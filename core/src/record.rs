//! The frozen record format of `__coordination_state`.
//!
//! Two record kinds share the topic; the key tells them apart.
//!
//! ```text
//! key                      registration value        lease value
//!   version  i16 = 0         version       i16 = 0     version        i16 = 0
//!   kind     i16 (0 | 1)     member        string      member         string
//!   role     string          registeredAt  i64         producerId     i64
//!   member   string                                    producerEpoch  i16
//!            ("" for kind 1)                           grantedAt      i64
//!                                                      deadline       i64
//! ```
//!
//! Integers are big-endian and signed; a string is an `i16` byte length followed by that many
//! bytes of UTF-8 (Kafka's native string). An empty (or absent) value is a tombstone. The layout
//! is shared byte for byte with ports in other languages through the vectors in `golden/`.
//!
//! Decoding never panics: malformed bytes give a [`FormatError`] whose [`Part`] names the record
//! part and whose [`FormatErrorKind`] says what was wrong. Encoding cannot fail, because [`Role`]
//! and [`MemberId`] are checked when they are built.

mod format_error;
mod key;
mod lease;
mod names;
mod registration;
mod version;
mod wire;

pub use format_error::{Field, FormatError, FormatErrorKind, Part};
pub(crate) use key::peek_key_role;
pub use key::{Key, KeyKind, KeyRef};
pub use lease::{Lease, LeaseRef};
pub use names::{MemberId, NameError, Role, MAX_NAME_BYTES};
pub use registration::{Registration, RegistrationRef};
pub use version::FORMAT_VERSION;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::UnixMillis;
    use crate::token::FencingToken;
    use alloc::vec::Vec;

    fn role(s: &str) -> Role {
        Role::new(s).unwrap()
    }
    fn member(s: &str) -> MemberId {
        MemberId::new(s).unwrap()
    }

    #[test]
    fn key_layout_is_the_spec_layout() {
        let k = Key::registration(role("ab"), member("c"));
        assert_eq!(k.encode(), [0, 0, 0, 0, 0, 2, b'a', b'b', 0, 1, b'c']);
        let k = Key::lease(role("ab"));
        assert_eq!(k.encode(), [0, 0, 0, 1, 0, 2, b'a', b'b', 0, 0]);
        assert_eq!(k.encode().len(), k.encoded_len());
    }

    #[test]
    fn lease_key_with_member_is_refused() {
        let bytes = [0, 0, 0, 1, 0, 1, b'r', 0, 1, b'm'];
        let err = Key::decode(&bytes).unwrap_err();
        assert_eq!(err.part, Part::Key);
        assert_eq!(err.kind, FormatErrorKind::LeaseKeyWithMember { len: 1 });
    }

    #[test]
    fn errors_name_the_part_and_field() {
        let lease = Lease {
            member: member("m"),
            token: FencingToken::new(1, 2),
            granted_at: UnixMillis(3),
            deadline: UnixMillis(4),
        };
        let bytes = lease.encode();
        let err = Lease::decode(&bytes[..bytes.len() - 3]).unwrap_err();
        assert_eq!(
            err.kind,
            FormatErrorKind::Truncated {
                field: Field::Deadline,
                needed: 8,
                available: 5
            }
        );
        assert_eq!(
            alloc::format!("{err}"),
            "malformed lease value: field `deadline` is truncated: it needs 8 bytes and 5 remain"
        );
        let err = Registration::decode(&bytes).unwrap_err();
        assert_eq!(err.part, Part::RegistrationValue);
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(Role::new(""), Err(NameError::Empty { what: "role" }));
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(matches!(
            MemberId::new(long),
            Err(NameError::TooLong { len: 32768, .. })
        ));
        assert!(MemberId::new("x".repeat(MAX_NAME_BYTES)).is_ok());
    }

    #[test]
    fn peek_finds_the_role() {
        let k = Key::registration(role("orders"), member("a")).encode();
        assert_eq!(peek_key_role(&k), Some(&b"orders"[..]));
        assert_eq!(peek_key_role(&[0, 0, 0]), None);
    }

    /// A key from its raw fields, which need not be valid.
    fn raw_key(kind: i16, role: &[u8], member: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(0i16.to_be_bytes());
        v.extend(kind.to_be_bytes());
        v.extend((role.len() as i16).to_be_bytes());
        v.extend(role);
        v.extend((member.len() as i16).to_be_bytes());
        v.extend(member);
        v
    }

    #[test]
    fn keys_decode_alike_in_one_utf8_pass_or_field_by_field() {
        let err = |field| {
            Err(FormatError {
                part: Part::Key,
                kind: FormatErrorKind::InvalidUtf8 { field },
            })
        };
        let long = "\u{e9}".repeat(100); // 200 bytes: a length whose low byte is not ASCII
        let cases: [(i16, &[u8], &[u8]); 4] = [
            (0, b"r", b"m"),
            (0, b"r", long.as_bytes()),
            (0, long.as_bytes(), b"m"),
            (1, long.as_bytes(), b""),
        ];
        for (kind, r, m) in cases {
            let bytes = raw_key(kind, r, m);
            let k = KeyRef::decode(&bytes).unwrap();
            assert_eq!(
                (k.role().as_bytes(), k.member().unwrap_or("").as_bytes()),
                (r, m)
            );
        }
        // The first invalid string is named, whether or not the one-pass path was tried (it is
        // not when the member's length has a non-ASCII low byte).
        let mut long_bad = long.clone().into_bytes();
        long_bad[150] = 0xff;
        for member in [&b"m"[..], long.as_bytes(), &long_bad] {
            assert_eq!(
                KeyRef::decode(&raw_key(0, b"r\xff", member)),
                err(Field::Role)
            );
        }
        for member in [&b"\xffm"[..], &long_bad] {
            assert_eq!(
                KeyRef::decode(&raw_key(0, b"r", member)),
                err(Field::Member)
            );
        }
        // A multi-byte character split by the member's length prefix is no character.
        assert_eq!(
            KeyRef::decode(&raw_key(0, b"r\xc3", b"\xa9")),
            err(Field::Role)
        );
        // An empty role is refused before the member is read, even when it is invalid.
        assert_eq!(
            KeyRef::decode(&raw_key(0, b"", b"\xff")).unwrap_err().kind,
            FormatErrorKind::EmptyName { field: Field::Role }
        );
        assert_eq!(
            KeyRef::decode(&raw_key(0, b"r", b"")).unwrap_err().kind,
            FormatErrorKind::EmptyName {
                field: Field::Member
            }
        );
        let mut overlong = raw_key(0, b"r", b"mm");
        overlong.pop();
        assert_eq!(
            KeyRef::decode(&overlong).unwrap_err().kind,
            FormatErrorKind::Overlong {
                field: Field::Member,
                len: 2,
                available: 1
            }
        );
    }

    #[test]
    fn decoding_with_an_expected_name_gives_what_decoding_gives() {
        let long = "n".repeat(300);
        let names = [
            "orders",
            "m",
            "\u{1f980}",
            "order",
            "orders2",
            long.as_str(),
        ];
        let mut inputs = Vec::new();
        for a in names {
            for b in names {
                inputs.push(Key::registration(role(a), member(b)).encode());
                inputs.push(
                    Registration {
                        member: member(a),
                        registered_at: UnixMillis(1),
                    }
                    .encode(),
                );
            }
            inputs.push(Key::lease(role(a)).encode());
            inputs.push(
                Lease {
                    member: member(a),
                    token: FencingToken::new(1, 2),
                    granted_at: UnixMillis(3),
                    deadline: UnixMillis(4),
                }
                .encode(),
            );
        }
        // Every single-byte corruption of each input, too.
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..inputs.len() {
            for _ in 0..40 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let mut bytes = inputs[i].clone();
                let at = (state >> 8) as usize % bytes.len();
                bytes[at] ^= (state as u8) | 1;
                inputs.push(bytes);
            }
        }
        for bytes in &inputs {
            let key = KeyRef::decode(bytes);
            let reg = RegistrationRef::decode(bytes);
            let lease = LeaseRef::decode(bytes);
            for expected in names.iter().copied().chain(["", "x"]) {
                let e = Some(expected);
                assert_eq!(KeyRef::decode_expecting(bytes, e), key, "{bytes:?} {e:?}");
                assert_eq!(RegistrationRef::decode_expecting(bytes, e), reg);
                assert_eq!(LeaseRef::decode_expecting(bytes, e), lease);
            }
        }
    }
}
