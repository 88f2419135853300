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

use alloc::string::String;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::fmt;

use bytes::BufMut;

use crate::time::UnixMillis;
use crate::token::FencingToken;

/// The only format version this crate reads and writes, in keys and values alike.
pub const FORMAT_VERSION: i16 = 0;

/// The longest name a [`Role`] or [`MemberId`] may have, in UTF-8 bytes (`i16::MAX`).
pub const MAX_NAME_BYTES: usize = i16::MAX as usize;

/// A name that cannot be a role or member id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is the empty string.
    #[error("{what} must not be empty")]
    Empty {
        /// `"role"` or `"member id"`.
        what: &'static str,
    },
    /// The name is longer than [`MAX_NAME_BYTES`].
    #[error("{what} is {len} UTF-8 bytes long; at most {MAX_NAME_BYTES} fit a Kafka string")]
    TooLong {
        /// `"role"` or `"member id"`.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
}

fn check_name(what: &'static str, s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        Err(NameError::Empty { what })
    } else if s.len() > MAX_NAME_BYTES {
        Err(NameError::TooLong { what, len: s.len() })
    } else {
        Ok(())
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Checks the name: non-empty and at most [`MAX_NAME_BYTES`] UTF-8 bytes.
            pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
                let name = name.into();
                check_name($what, &name)?;
                Ok($name(name))
            }

            /// The name.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The name, consuming `self`.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// Sound for maps and sets keyed by this type: `Eq`, `Ord` and `Hash` are derived from
        /// the inner `String`, so they agree with `str`'s, and a lookup by `&str` finds the same
        /// entry a lookup by the name would.
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = NameError;
            fn try_from(s: &str) -> Result<Self, NameError> {
                $name::new(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(s: String) -> Result<Self, NameError> {
                $name::new(s)
            }
        }
    };
}

name_type!(
    /// The name of a role: one leader at a time per role. It is also the `transactional.id`
    /// whose producer epoch is the leadership epoch.
    Role,
    "role"
);
name_type!(
    /// The id of one member (a process) competing for a role.
    MemberId,
    "member id"
);

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

/// The value of a registration record: a member joined the role at `registered_at`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Registration {
    /// The member that registered; the same as the key's member.
    pub member: MemberId,
    /// When the member registered, by its own clock.
    pub registered_at: UnixMillis,
}

impl Registration {
    /// The encoded length in bytes.
    pub fn encoded_len(&self) -> usize {
        2 + 2 + self.member.as_str().len() + 8
    }

    /// Appends the encoding to `buf`.
    pub fn encode_into(&self, buf: &mut impl BufMut) {
        buf.put_i16(FORMAT_VERSION);
        put_str(buf, self.member.as_str());
        buf.put_i64(self.registered_at.0);
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut v);
        v
    }

    /// Decodes a registration value. An empty slice is a tombstone, not a value: it fails with
    /// [`FormatErrorKind::Truncated`].
    ///
    /// The same parser as [`RegistrationRef::decode`], whose result it copies into an owned
    /// member.
    pub fn decode(bytes: &[u8]) -> Result<Registration, FormatError> {
        RegistrationRef::decode(bytes).map(RegistrationRef::to_owned)
    }

    /// The value as a [`RegistrationRef`] borrowing its member.
    pub fn as_borrowed(&self) -> RegistrationRef<'_> {
        RegistrationRef {
            member: self.member.as_str(),
            registered_at: self.registered_at,
        }
    }
}

/// A decoded registration value whose member borrows from the bytes: decoding it allocates
/// nothing. [`RegistrationRef::to_owned`] gives the [`Registration`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegistrationRef<'a> {
    member: &'a str,
    registered_at: UnixMillis,
}

impl<'a> RegistrationRef<'a> {
    /// Decodes a registration value without allocating. It fails exactly where, and with
    /// exactly the error, [`Registration::decode`] fails. An empty slice is a tombstone, not a
    /// value: it fails with [`FormatErrorKind::Truncated`].
    pub fn decode(bytes: &'a [u8]) -> Result<RegistrationRef<'a>, FormatError> {
        RegistrationRef::decode_expecting(bytes, None)
    }

    /// [`decode`](Self::decode) for a reader that expects the member `expected` (the member of
    /// the key): when the member's bytes are exactly `expected`, `expected` is the member and
    /// the bytes are not validated again. The result and errors are those of `decode`.
    pub(crate) fn decode_expecting(
        bytes: &'a [u8],
        expected: Option<&'a str>,
    ) -> Result<RegistrationRef<'a>, FormatError> {
        let mut r = Reader::new(bytes, Part::RegistrationValue);
        r.version()?;
        let member = r.name_expecting(Field::Member, expected)?;
        let registered_at = UnixMillis(r.i64(Field::RegisteredAt)?);
        r.finish()?;
        Ok(RegistrationRef {
            member,
            registered_at,
        })
    }

    /// The member that registered: a valid [`MemberId`] name.
    pub fn member(self) -> &'a str {
        self.member
    }

    /// When the member registered, by its own clock.
    pub fn registered_at(self) -> UnixMillis {
        self.registered_at
    }

    /// The owned value, which allocates the member.
    pub fn to_owned(self) -> Registration {
        Registration {
            member: MemberId(String::from(self.member)),
            registered_at: self.registered_at,
        }
    }
}

/// The value of a lease record: `member` leads the role with `token` until `deadline`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The member holding the lease.
    pub member: MemberId,
    /// The pair the holder was granted; the record was written through the producer that holds
    /// it, so the broker accepted it only while the pair was current.
    pub token: FencingToken,
    /// When the holder's term began (the epoch was granted), by the holder's clock.
    pub granted_at: UnixMillis,
    /// The instant after which standbys may challenge, by the holder's clock.
    pub deadline: UnixMillis,
}

impl Lease {
    /// The encoded length in bytes.
    pub fn encoded_len(&self) -> usize {
        2 + 2 + self.member.as_str().len() + 8 + 2 + 8 + 8
    }

    /// Appends the encoding to `buf`.
    pub fn encode_into(&self, buf: &mut impl BufMut) {
        buf.put_i16(FORMAT_VERSION);
        put_str(buf, self.member.as_str());
        buf.put_i64(self.token.producer_id);
        buf.put_i16(self.token.producer_epoch);
        buf.put_i64(self.granted_at.0);
        buf.put_i64(self.deadline.0);
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut v);
        v
    }

    /// Decodes a lease value. An empty slice is a tombstone, not a value: it fails with
    /// [`FormatErrorKind::Truncated`].
    ///
    /// The same parser as [`LeaseRef::decode`], whose result it copies into an owned member.
    pub fn decode(bytes: &[u8]) -> Result<Lease, FormatError> {
        LeaseRef::decode(bytes).map(LeaseRef::to_owned)
    }

    /// The value as a [`LeaseRef`] borrowing its member.
    pub fn as_borrowed(&self) -> LeaseRef<'_> {
        LeaseRef {
            member: self.member.as_str(),
            token: self.token,
            granted_at: self.granted_at,
            deadline: self.deadline,
        }
    }
}

/// A decoded lease value whose member borrows from the bytes: decoding it allocates nothing.
/// [`LeaseRef::to_owned`] gives the [`Lease`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseRef<'a> {
    member: &'a str,
    token: FencingToken,
    granted_at: UnixMillis,
    deadline: UnixMillis,
}

impl<'a> LeaseRef<'a> {
    /// Decodes a lease value without allocating. It fails exactly where, and with exactly the
    /// error, [`Lease::decode`] fails. An empty slice is a tombstone, not a value: it fails with
    /// [`FormatErrorKind::Truncated`].
    pub fn decode(bytes: &'a [u8]) -> Result<LeaseRef<'a>, FormatError> {
        LeaseRef::decode_expecting(bytes, None)
    }

    /// [`decode`](Self::decode) for a reader that expects the member `expected` (the holder of
    /// the current lease, which renews it): when the member's bytes are exactly `expected`,
    /// `expected` is the member and the bytes are not validated again. The result and errors
    /// are those of `decode`.
    pub(crate) fn decode_expecting(
        bytes: &'a [u8],
        expected: Option<&'a str>,
    ) -> Result<LeaseRef<'a>, FormatError> {
        let mut r = Reader::new(bytes, Part::LeaseValue);
        r.version()?;
        let member = r.name_expecting(Field::Member, expected)?;
        let producer_id = r.i64(Field::ProducerId)?;
        let producer_epoch = r.i16(Field::ProducerEpoch)?;
        let granted_at = r.i64(Field::GrantedAt)?;
        let deadline = r.i64(Field::Deadline)?;
        r.finish()?;
        Ok(LeaseRef {
            member,
            token: FencingToken {
                producer_id,
                producer_epoch,
            },
            granted_at: UnixMillis(granted_at),
            deadline: UnixMillis(deadline),
        })
    }

    /// The member holding the lease: a valid [`MemberId`] name.
    pub fn member(self) -> &'a str {
        self.member
    }

    /// The pair the holder was granted.
    pub fn token(self) -> FencingToken {
        self.token
    }

    /// When the holder's term began, by the holder's clock.
    pub fn granted_at(self) -> UnixMillis {
        self.granted_at
    }

    /// The instant after which standbys may challenge, by the holder's clock.
    pub fn deadline(self) -> UnixMillis {
        self.deadline
    }

    /// The owned value, which allocates the member.
    pub fn to_owned(self) -> Lease {
        Lease {
            member: MemberId(String::from(self.member)),
            token: self.token,
            granted_at: self.granted_at,
            deadline: self.deadline,
        }
    }
}

/// The record part that failed to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The key.
    Key,
    /// A registration value.
    RegistrationValue,
    /// A lease value.
    LeaseValue,
}

impl Part {
    /// `"key"`, `"registration value"` or `"lease value"`.
    pub const fn name(self) -> &'static str {
        match self {
            Part::Key => "key",
            Part::RegistrationValue => "registration value",
            Part::LeaseValue => "lease value",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field of the record format, named in errors as the spec names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `version`.
    Version,
    /// `kind` (key).
    Kind,
    /// `role` (key).
    Role,
    /// `member`.
    Member,
    /// `registeredAt` (registration value).
    RegisteredAt,
    /// `producerID` (lease value).
    ProducerId,
    /// `producerEpoch` (lease value).
    ProducerEpoch,
    /// `grantedAt` (lease value).
    GrantedAt,
    /// `deadline` (lease value).
    Deadline,
}

impl Field {
    /// The field's name in the layout.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Version => "version",
            Field::Kind => "kind",
            Field::Role => "role",
            Field::Member => "member",
            Field::RegisteredAt => "registeredAt",
            Field::ProducerId => "producerID",
            Field::ProducerEpoch => "producerEpoch",
            Field::GrantedAt => "grantedAt",
            Field::Deadline => "deadline",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What was wrong with malformed bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FormatErrorKind {
    /// The bytes end inside a fixed-width field.
    Truncated {
        /// The field being read.
        field: Field,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// A string's length prefix is negative (Kafka's null string is not allowed here).
    NegativeLength {
        /// The string field.
        field: Field,
        /// The prefix that was read.
        len: i16,
    },
    /// A string's length prefix is longer than the bytes that follow it.
    Overlong {
        /// The string field.
        field: Field,
        /// The prefix that was read.
        len: i16,
        /// Bytes that were left after the prefix.
        available: usize,
    },
    /// A string is not valid UTF-8.
    InvalidUtf8 {
        /// The string field.
        field: Field,
    },
    /// A role or member string is empty where a name is required.
    EmptyName {
        /// The string field.
        field: Field,
    },
    /// The version is not [`FORMAT_VERSION`].
    UnknownVersion {
        /// The version that was read.
        version: i16,
    },
    /// The key's kind is neither 0 (registration) nor 1 (lease).
    UnknownKind {
        /// The kind that was read.
        kind: i16,
    },
    /// A lease key carries a member; it must carry the empty string.
    LeaseKeyWithMember {
        /// The member's length in bytes.
        len: usize,
    },
    /// Bytes follow the last field.
    TrailingBytes {
        /// How many.
        count: usize,
    },
}

impl FormatErrorKind {
    /// A stable snake_case name of the kind, as used by the golden vectors.
    pub const fn name(&self) -> &'static str {
        match self {
            FormatErrorKind::Truncated { .. } => "truncated",
            FormatErrorKind::NegativeLength { .. } => "negative_length",
            FormatErrorKind::Overlong { .. } => "overlong",
            FormatErrorKind::InvalidUtf8 { .. } => "invalid_utf8",
            FormatErrorKind::EmptyName { .. } => "empty_name",
            FormatErrorKind::UnknownVersion { .. } => "unknown_version",
            FormatErrorKind::UnknownKind { .. } => "unknown_kind",
            FormatErrorKind::LeaseKeyWithMember { .. } => "lease_key_with_member",
            FormatErrorKind::TrailingBytes { .. } => "trailing_bytes",
        }
    }
}

impl fmt::Display for FormatErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FormatErrorKind::Truncated {
                field,
                needed,
                available,
            } => write!(
                f,
                "field `{field}` is truncated: it needs {needed} bytes and {available} remain"
            ),
            FormatErrorKind::NegativeLength { field, len } => {
                write!(f, "string `{field}` has a negative length {len}")
            }
            FormatErrorKind::Overlong {
                field,
                len,
                available,
            } => write!(
                f,
                "string `{field}` claims {len} bytes but only {available} remain"
            ),
            FormatErrorKind::InvalidUtf8 { field } => {
                write!(f, "string `{field}` is not valid UTF-8")
            }
            FormatErrorKind::EmptyName { field } => write!(f, "string `{field}` is empty"),
            FormatErrorKind::UnknownVersion { version } => write!(
                f,
                "version {version} is unknown (this library reads version {FORMAT_VERSION})"
            ),
            FormatErrorKind::UnknownKind { kind } => {
                write!(f, "kind {kind} is unknown (0 = registration, 1 = lease)")
            }
            FormatErrorKind::LeaseKeyWithMember { len } => write!(
                f,
                "a lease key must carry an empty member, this one carries {len} bytes"
            ),
            FormatErrorKind::TrailingBytes { count } => {
                write!(f, "{count} unexpected bytes follow the last field")
            }
        }
    }
}

/// Bytes that are not a valid record part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("malformed {part}: {kind}")]
pub struct FormatError {
    /// The part that failed: key, registration value or lease value.
    pub part: Part,
    /// What was wrong.
    pub kind: FormatErrorKind,
}

fn put_str(buf: &mut impl BufMut, s: &str) {
    // `Role` and `MemberId` are at most i16::MAX bytes, so the cast is exact.
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

/// A bounds-checked big-endian reader that names the part and field on every failure.
struct Reader<'a> {
    bytes: &'a [u8],
    part: Part,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], part: Part) -> Self {
        Reader { bytes, part }
    }

    fn fail(&self, kind: FormatErrorKind) -> FormatError {
        FormatError {
            part: self.part,
            kind,
        }
    }

    fn take<const N: usize>(&mut self, field: Field) -> Result<[u8; N], FormatError> {
        match self.bytes.split_first_chunk::<N>() {
            Some((head, rest)) => {
                self.bytes = rest;
                Ok(*head)
            }
            None => Err(self.fail(FormatErrorKind::Truncated {
                field,
                needed: N,
                available: self.bytes.len(),
            })),
        }
    }

    fn i16(&mut self, field: Field) -> Result<i16, FormatError> {
        self.take::<2>(field).map(i16::from_be_bytes)
    }

    fn i64(&mut self, field: Field) -> Result<i64, FormatError> {
        self.take::<8>(field).map(i64::from_be_bytes)
    }

    fn version(&mut self) -> Result<(), FormatError> {
        let version = self.i16(Field::Version)?;
        if version != FORMAT_VERSION {
            return Err(self.fail(FormatErrorKind::UnknownVersion { version }));
        }
        Ok(())
    }

    /// The bytes of a string: its length prefix is read and checked, its text is not.
    fn str_bytes(&mut self, field: Field) -> Result<&'a [u8], FormatError> {
        let len = self.i16(field)?;
        if len < 0 {
            return Err(self.fail(FormatErrorKind::NegativeLength { field, len }));
        }
        let n = len as usize;
        if n > self.bytes.len() {
            return Err(self.fail(FormatErrorKind::Overlong {
                field,
                len,
                available: self.bytes.len(),
            }));
        }
        let (s, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(s)
    }

    /// A string's bytes as text.
    fn utf8(&self, field: Field, s: &'a [u8]) -> Result<&'a str, FormatError> {
        if s.is_empty() {
            // A lease key's member: nothing to validate.
            return Ok("");
        }
        core::str::from_utf8(s).map_err(|_| self.fail(FormatErrorKind::InvalidUtf8 { field }))
    }

    /// A string that may be empty.
    fn str(&mut self, field: Field) -> Result<&'a str, FormatError> {
        let s = self.str_bytes(field)?;
        self.utf8(field, s)
    }

    /// A name, then a string that may be empty: a key's role and member. The result and any
    /// error are those of [`name_expecting`](Self::name_expecting) followed by
    /// [`str`](Self::str); without an expected name, this validates both strings in a single
    /// UTF-8 pass when it can.
    fn name_and_str(
        &mut self,
        first: Field,
        second: Field,
        expected: Option<&'a str>,
    ) -> Result<(&'a str, &'a str), FormatError> {
        if expected.is_none() {
            if let Some(pair) = self.name_and_str_in_one_pass() {
                return Ok(pair);
            }
        }
        let a = self.name_expecting(first, expected)?;
        let b = self.str(second)?;
        Ok((a, b))
    }

    /// The fast path of [`name_and_str`](Self::name_and_str). When the first string is non-empty,
    /// the second string's length prefix is two ASCII bytes (a length below 32768 whose low byte
    /// is below 128), and both strings are in bounds, the span from the first string to the end
    /// of the second is valid UTF-8 exactly when both strings are: ASCII bytes are never part of
    /// a multi-byte sequence, so they split the span at character boundaries. One `from_utf8`
    /// call over the span then replaces two, which saves a call and its unaligned head and tail,
    /// the bulk of the cost for short names. `None` leaves the reader untouched, for the
    /// field-by-field path to find (and name) whatever is wrong.
    fn name_and_str_in_one_pass(&mut self) -> Option<(&'a str, &'a str)> {
        let (&first_len, rest) = self.bytes.split_first_chunk::<2>()?;
        let n1 = usize::try_from(i16::from_be_bytes(first_len))
            .ok()
            .filter(|&n| n > 0)?;
        let (&second_len, _) = rest.get(n1..)?.split_first_chunk::<2>()?;
        if !second_len.is_ascii() {
            return None;
        }
        let n2 = usize::from(u16::from_be_bytes(second_len));
        let (span, after) = rest.split_at_checked(n1 + 2 + n2)?;
        let text = core::str::from_utf8(span).ok()?;
        let (a, sep_and_b) = text.split_at_checked(n1)?;
        let b = sep_and_b.get(2..)?;
        self.bytes = after;
        Some((a, b))
    }

    /// Refuses an empty string where a name is required.
    fn non_empty(&self, field: Field, s: &str) -> Result<(), FormatError> {
        if s.is_empty() {
            Err(self.fail(FormatErrorKind::EmptyName { field }))
        } else {
            Ok(())
        }
    }

    /// A non-empty string, borrowed. At most `i16::MAX` bytes by construction, so it is a valid
    /// [`Role`] or [`MemberId`] name.
    ///
    /// When the bytes are exactly `expected` (a name the caller holds, so valid and non-empty),
    /// `expected` is returned without validating them again; the result and errors are the same
    /// as without it.
    fn name_expecting(
        &mut self,
        field: Field,
        expected: Option<&'a str>,
    ) -> Result<&'a str, FormatError> {
        let s = self.str_bytes(field)?;
        if let Some(e) = expected.filter(|e| !e.is_empty() && e.as_bytes() == s) {
            return Ok(e);
        }
        let s = self.utf8(field, s)?;
        self.non_empty(field, s)?;
        Ok(s)
    }

    fn finish(&self) -> Result<(), FormatError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(self.fail(FormatErrorKind::TrailingBytes {
                count: self.bytes.len(),
            }))
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

#[cfg(test)]
mod tests {
    use super::*;

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
