//! The key of every record: format version, kind, role, member.

use super::format_error::{Field, FormatError, FormatErrorKind, Part};
use super::names::{MemberId, Role};
use super::version::FORMAT_VERSION;
use super::wire::{put_str, Reader};
use alloc::{string::String, vec::Vec};
use bytes::BufMut;

/// The record kind, the second field of every key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// `0`: a member's registration; its offset is the member's join sequence.
    Registration,
    /// `1`: the role's lease.
    Lease,
}

impl KeyKind {
    /// The value written in the key.
    pub const fn code(self) -> i16 {
        match self {
            KeyKind::Registration => 0,
            KeyKind::Lease => 1,
        }
    }
}

/// The key of a record in `__coordination_state`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// The registration key of `member` in `role`.
    Registration {
        /// The role.
        role: Role,
        /// The registered member.
        member: MemberId,
    },
    /// The lease key of `role`; its member field is the empty string on the wire.
    Lease {
        /// The role.
        role: Role,
    },
}

impl Key {
    /// The registration key of `member` in `role`.
    pub fn registration(role: Role, member: MemberId) -> Key {
        Key::Registration { role, member }
    }

    /// The lease key of `role`.
    pub fn lease(role: Role) -> Key {
        Key::Lease { role }
    }

    /// The kind of record this key names.
    pub fn kind(&self) -> KeyKind {
        match self {
            Key::Registration { .. } => KeyKind::Registration,
            Key::Lease { .. } => KeyKind::Lease,
        }
    }

    /// The role.
    pub fn role(&self) -> &Role {
        match self {
            Key::Registration { role, .. } | Key::Lease { role } => role,
        }
    }

    /// The member of a registration key; `None` for a lease key.
    pub fn member(&self) -> Option<&MemberId> {
        match self {
            Key::Registration { member, .. } => Some(member),
            Key::Lease { .. } => None,
        }
    }

    /// The encoded length in bytes.
    pub fn encoded_len(&self) -> usize {
        6 + self.role().as_str().len() + 2 + self.member().map_or(0, |m| m.as_str().len())
    }

    /// Appends the encoding to `buf`.
    pub fn encode_into(&self, buf: &mut impl BufMut) {
        buf.put_i16(FORMAT_VERSION);
        buf.put_i16(self.kind().code());
        put_str(buf, self.role().as_str());
        put_str(buf, self.member().map_or("", |m| m.as_str()));
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut v);
        v
    }

    /// Decodes a key. The same parser as [`KeyRef::decode`], whose result it copies into owned
    /// names.
    pub fn decode(bytes: &[u8]) -> Result<Key, FormatError> {
        KeyRef::decode(bytes).map(KeyRef::to_owned)
    }
}

/// A decoded key whose names borrow from the bytes it was decoded from: decoding it allocates
/// nothing. Get one from [`KeyRef::decode`] (or [`Key::as_borrowed`]); [`KeyRef::to_owned`]
/// gives the [`Key`].
///
/// Its names passed every check a [`Role`] or [`MemberId`] is built with, so it can only hold a
/// valid key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyRef<'a> {
    kind: KeyKind,
    role: &'a str,
    /// `""` for a lease key.
    member: &'a str,
}

impl<'a> KeyRef<'a> {
    /// Decodes a key without allocating. It fails exactly where, and with exactly the error,
    /// [`Key::decode`] fails: that function is this one followed by [`KeyRef::to_owned`].
    pub fn decode(bytes: &'a [u8]) -> Result<KeyRef<'a>, FormatError> {
        KeyRef::decode_expecting(bytes, None)
    }

    /// [`decode`](Self::decode) for a reader that expects the role `expected` (its own): when
    /// the role's bytes are exactly `expected`, `expected` is the role and the bytes are not
    /// validated again. The result and errors are those of `decode`.
    pub(crate) fn decode_expecting(
        bytes: &'a [u8],
        expected: Option<&'a str>,
    ) -> Result<KeyRef<'a>, FormatError> {
        let mut r = Reader::new(bytes, Part::Key);
        r.version()?;
        let kind = r.i16(Field::Kind)?;
        if !(0..=1).contains(&kind) {
            return Err(r.fail(FormatErrorKind::UnknownKind { kind }));
        }
        let is_lease = kind == 1;
        let kind = if is_lease {
            KeyKind::Lease
        } else {
            KeyKind::Registration
        };
        let (role, member) = r.name_and_str(Field::Role, Field::Member, expected)?;
        if is_lease != member.is_empty() {
            return Err(r.fail(if is_lease {
                FormatErrorKind::LeaseKeyWithMember { len: member.len() }
            } else {
                FormatErrorKind::EmptyName {
                    field: Field::Member,
                }
            }));
        }
        r.finish()?;
        Ok(KeyRef { kind, role, member })
    }

    /// The kind of record this key names.
    pub fn kind(self) -> KeyKind {
        self.kind
    }

    /// The role: a valid [`Role`] name.
    pub fn role(self) -> &'a str {
        self.role
    }

    /// The member of a registration key, a valid [`MemberId`] name; `None` for a lease key.
    pub fn member(self) -> Option<&'a str> {
        match self.kind {
            KeyKind::Registration => Some(self.member),
            KeyKind::Lease => None,
        }
    }

    /// The owned key, which allocates the names.
    pub fn to_owned(self) -> Key {
        let role = Role(String::from(self.role));
        match self.kind {
            KeyKind::Registration => Key::Registration {
                role,
                member: MemberId(String::from(self.member)),
            },
            KeyKind::Lease => Key::Lease { role },
        }
    }
}

impl Key {
    /// The key as a [`KeyRef`] borrowing its names.
    pub fn as_borrowed(&self) -> KeyRef<'_> {
        KeyRef {
            kind: self.kind(),
            role: self.role().as_str(),
            member: self.member().map_or("", MemberId::as_str),
        }
    }
}

/// Peeks at the role of an encoded key without allocating, for skipping other roles' records
/// cheaply. `None` when the bytes are too short to hold a role.
pub(crate) fn peek_key_role(key: &[u8]) -> Option<&[u8]> {
    let len = i16::from_be_bytes([*key.get(4)?, *key.get(5)?]);
    if len < 0 {
        return None;
    }
    key.get(6..6 + len as usize)
}
