//! The lease value: a member leads the role with a pair until a deadline.

use super::format_error::{Field, FormatError, Part};
use super::names::MemberId;
use super::version::FORMAT_VERSION;
use super::wire::{put_str, Reader};
use crate::{time::UnixMillis, token::FencingToken};
use alloc::{string::String, vec::Vec};
use bytes::BufMut;

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
    /// [`FormatErrorKind::Truncated`](super::FormatErrorKind::Truncated).
    ///
    /// The same parser as [`LeaseRef::decode`], whose result it copies into an owned member.
    pub fn decode(bytes: &[u8]) -> Result<Lease, FormatError> {
        LeaseRef::decode(bytes).map(LeaseRef::to_owned)
    }

    /// The encoded lease `value` with its deadline `by` later (saturating), everything else
    /// unchanged: what a driver that queued a lease write sends when the write begins `by`
    /// after it was issued (see
    /// [`Candidate::lease_write_delayed`](crate::machine::Candidate::lease_write_delayed)).
    /// Fails as [`decode`](Self::decode) fails.
    pub fn delayed(value: &[u8], by: core::time::Duration) -> Result<Vec<u8>, FormatError> {
        let mut lease = Lease::decode(value)?;
        lease.deadline = lease.deadline + by;
        Ok(lease.encode())
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
    /// [`FormatErrorKind::Truncated`](super::FormatErrorKind::Truncated).
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
