//! Role and member names: checked once, when built, so encoding never fails.

use alloc::string::String;
use core::{borrow::Borrow, fmt};

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

pub(crate) fn check_name(what: &'static str, s: &str) -> Result<(), NameError> {
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
        pub struct $name(pub(crate) String);

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
