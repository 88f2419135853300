//! What was wrong with malformed bytes, named by record part, field and kind.

use super::version::FORMAT_VERSION;
use core::fmt;

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
