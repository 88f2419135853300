//! The crate-private decoders, for the fuzz harness in `fuzz/` (feature `fuzzing`). Not a
//! public API: it may change in any release.

use crate::record::{self, FormatError, KeyRef, LeaseRef, RegistrationRef};

/// [`KeyRef::decode`] for a reader that expects the role `expected`.
pub fn key_expecting<'a>(
    bytes: &'a [u8],
    expected: Option<&'a str>,
) -> Result<KeyRef<'a>, FormatError> {
    KeyRef::decode_expecting(bytes, expected)
}

/// [`RegistrationRef::decode`] for a reader that expects the member `expected`.
pub fn registration_expecting<'a>(
    bytes: &'a [u8],
    expected: Option<&'a str>,
) -> Result<RegistrationRef<'a>, FormatError> {
    RegistrationRef::decode_expecting(bytes, expected)
}

/// [`LeaseRef::decode`] for a reader that expects the holder `expected`.
pub fn lease_expecting<'a>(
    bytes: &'a [u8],
    expected: Option<&'a str>,
) -> Result<LeaseRef<'a>, FormatError> {
    LeaseRef::decode_expecting(bytes, expected)
}

/// The role bytes of an encoded key, as the state's fast path peeks at them.
pub fn peek_key_role(key: &[u8]) -> Option<&[u8]> {
    record::peek_key_role(key)
}
