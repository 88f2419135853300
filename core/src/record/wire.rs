//! The wire primitives: Kafka's big-endian integers and `i16`-length strings, and a
//! bounds-checked reader that names the part and field of every failure.

use super::format_error::{Field, FormatError, FormatErrorKind, Part};
use super::version::FORMAT_VERSION;
use bytes::BufMut;

pub(crate) fn put_str(buf: &mut impl BufMut, s: &str) {
    // `Role` and `MemberId` are at most i16::MAX bytes, so the cast is exact.
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

/// A bounds-checked big-endian reader that names the part and field on every failure.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    part: Part,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], part: Part) -> Self {
        Reader { bytes, part }
    }

    pub(crate) fn fail(&self, kind: FormatErrorKind) -> FormatError {
        FormatError {
            part: self.part,
            kind,
        }
    }

    pub(crate) fn take<const N: usize>(&mut self, field: Field) -> Result<[u8; N], FormatError> {
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

    pub(crate) fn i16(&mut self, field: Field) -> Result<i16, FormatError> {
        self.take::<2>(field).map(i16::from_be_bytes)
    }

    pub(crate) fn i64(&mut self, field: Field) -> Result<i64, FormatError> {
        self.take::<8>(field).map(i64::from_be_bytes)
    }

    pub(crate) fn version(&mut self) -> Result<(), FormatError> {
        let version = self.i16(Field::Version)?;
        if version != FORMAT_VERSION {
            return Err(self.fail(FormatErrorKind::UnknownVersion { version }));
        }
        Ok(())
    }

    /// The bytes of a string: its length prefix is read and checked, its text is not.
    pub(crate) fn str_bytes(&mut self, field: Field) -> Result<&'a [u8], FormatError> {
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
    pub(crate) fn utf8(&self, field: Field, s: &'a [u8]) -> Result<&'a str, FormatError> {
        if s.is_empty() {
            // A lease key's member: nothing to validate.
            return Ok("");
        }
        core::str::from_utf8(s).map_err(|_| self.fail(FormatErrorKind::InvalidUtf8 { field }))
    }

    /// A string that may be empty.
    pub(crate) fn str(&mut self, field: Field) -> Result<&'a str, FormatError> {
        let s = self.str_bytes(field)?;
        self.utf8(field, s)
    }

    /// A name, then a string that may be empty: a key's role and member. The result and any
    /// error are those of [`name_expecting`](Self::name_expecting) followed by
    /// [`str`](Self::str); without an expected name, this validates both strings in a single
    /// UTF-8 pass when it can.
    pub(crate) fn name_and_str(
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
    pub(crate) fn name_and_str_in_one_pass(&mut self) -> Option<(&'a str, &'a str)> {
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
    pub(crate) fn non_empty(&self, field: Field, s: &str) -> Result<(), FormatError> {
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
    pub(crate) fn name_expecting(
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

    pub(crate) fn finish(&self) -> Result<(), FormatError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(self.fail(FormatErrorKind::TrailingBytes {
                count: self.bytes.len(),
            }))
        }
    }
}
