//! The registration value: a member joined the role.

use super::format_error::{Field, FormatError, Part};
use super::names::MemberId;
use super::version::FORMAT_VERSION;
use super::wire::{put_str, Reader};
use crate::time::UnixMillis;
use alloc::{string::String, vec::Vec};
use bytes::BufMut;

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
    /// [`FormatErrorKind::Truncated`](super::FormatErrorKind::Truncated).
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
    /// value: it fails with [`FormatErrorKind::Truncated`](super::FormatErrorKind::Truncated).
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
