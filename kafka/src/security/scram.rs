//! The client side of a SCRAM exchange (RFC 5802, RFC 7677).

use std::num::NonZeroU32;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};

use super::mechanism::Mechanism;

/// Why a SCRAM exchange failed on the client's side.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScramError {
    /// The broker's message breaks RFC 5802.
    Malformed(String),
    /// The broker said no (`e=` in server-final).
    Rejected(String),
    /// The broker's server signature does not match.
    BadServerSignature,
}

/// The client side of one SCRAM exchange (RFC 5802, RFC 7677), without channel binding
/// (`n,,`), as Kafka speaks it.
pub(crate) struct Scram {
    hmac: hmac::Algorithm,
    pbkdf2: pbkdf2::Algorithm,
    digest: &'static digest::Algorithm,
    nonce: String,
    client_first_bare: String,
}

/// What the client expects in server-final.
pub(crate) struct ServerProof {
    key: hmac::Key,
    auth_message: String,
}

/// Kafka's (and RFC 7677's) minimum iteration count; fewer would let a man in the middle
/// weaken the stored credentials' protection.
pub(super) const MIN_ITERATIONS: u32 = 4096;
/// Kafka's maximum iteration count (`ScramMechanism`): a broker never asks for more, and a
/// larger count from a broken or hostile broker would hold the connecting thread in PBKDF2
/// for minutes or hours (the count is a `u32`).
pub(super) const MAX_ITERATIONS: u32 = 16384;

impl Scram {
    pub(crate) fn new(mechanism: Mechanism, username: &str, nonce: &str) -> Scram {
        let (hmac, pbkdf2, digest) = match mechanism {
            Mechanism::ScramSha512 => (
                hmac::HMAC_SHA512,
                pbkdf2::PBKDF2_HMAC_SHA512,
                &digest::SHA512,
            ),
            Mechanism::ScramSha256 | Mechanism::Plain | Mechanism::OAuthBearer => (
                hmac::HMAC_SHA256,
                pbkdf2::PBKDF2_HMAC_SHA256,
                &digest::SHA256,
            ),
        };
        // saslname: '=' and ',' escaped (RFC 5802 5.1).
        let name = username.replace('=', "=3D").replace(',', "=2C");
        Scram {
            hmac,
            pbkdf2,
            digest,
            nonce: nonce.to_owned(),
            client_first_bare: format!("n={name},r={nonce}"),
        }
    }

    /// client-first-message.
    pub(crate) fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// client-final-message for server-first-message `server_first`, and what server-final
    /// must prove.
    pub(crate) fn client_final(
        &self,
        password: &str,
        server_first: &[u8],
    ) -> Result<(String, ServerProof), ScramError> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| ScramError::Malformed("server-first-message is not UTF-8".to_owned()))?;
        if server_first.starts_with("m=") {
            return Err(ScramError::Malformed(
                "server-first-message requires an extension this client does not know".to_owned(),
            ));
        }
        let attr = |name: &str| {
            server_first
                .split(',')
                .find_map(|a| a.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        };
        let malformed = |why: &str| ScramError::Malformed(format!("{why} in '{server_first}'"));
        if let Some(e) = attr("e") {
            return Err(ScramError::Rejected(e.to_owned()));
        }
        let nonce = attr("r").ok_or_else(|| malformed("no nonce (r=)"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() <= self.nonce.len() {
            return Err(malformed("the nonce does not extend this client's nonce"));
        }
        let salt = attr("s")
            .and_then(|s| BASE64.decode(s).ok())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| malformed("no base64 salt (s=)"))?;
        let iterations: u32 = attr("i")
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| malformed("no iteration count (i=)"))?;
        if iterations < MIN_ITERATIONS {
            return Err(ScramError::Malformed(format!(
                "iteration count {iterations} is below the minimum {MIN_ITERATIONS}"
            )));
        }
        if iterations > MAX_ITERATIONS {
            return Err(ScramError::Malformed(format!(
                "iteration count {iterations} is above Kafka's maximum {MAX_ITERATIONS}"
            )));
        }
        let iterations = NonZeroU32::new(iterations).ok_or_else(|| malformed("zero iterations"))?;
        let len = self.digest.output_len();
        let mut salted = vec![0u8; len];
        pbkdf2::derive(
            self.pbkdf2,
            iterations,
            &salt,
            password.as_bytes(),
            &mut salted,
        );
        let salted = hmac::Key::new(self.hmac, &salted);
        let client_key = hmac::sign(&salted, b"Client Key");
        let stored_key = digest::digest(self.digest, client_key.as_ref());
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = hmac::sign(
            &hmac::Key::new(self.hmac, stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac::sign(&salted, b"Server Key");
        Ok((
            format!("{without_proof},p={}", BASE64.encode(proof)),
            ServerProof {
                key: hmac::Key::new(self.hmac, server_key.as_ref()),
                auth_message,
            },
        ))
    }
}

impl ServerProof {
    /// Checks server-final-message (`v=` the server signature, or `e=` an error).
    pub(crate) fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| ScramError::Malformed("server-final-message is not UTF-8".to_owned()))?;
        let first = text.split(',').next().unwrap_or("");
        if let Some(e) = first.strip_prefix("e=") {
            return Err(ScramError::Rejected(e.to_owned()));
        }
        let Some(v) = first.strip_prefix("v=") else {
            return Err(ScramError::Malformed(format!(
                "server-final-message '{text}' has no verifier (v=)"
            )));
        };
        let signature = BASE64.decode(v).map_err(|_| {
            ScramError::Malformed(format!("the server signature '{v}' is not base64"))
        })?;
        hmac::verify(&self.key, self.auth_message.as_bytes(), &signature)
            .map_err(|_| ScramError::BadServerSignature)
    }
}
