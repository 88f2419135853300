//! SaslAuthenticate (API key 36): one round of a SASL mechanism's exchange, after
//! SaslHandshake. The broker answers the mechanism's bytes and, when it limits the session
//! (KIP-368), the session's lifetime.

use bytes::Bytes;
use kafka_coordination_transport::error::{section, TransportError};
use kafka_protocol::error::ResponseError as E;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};

use super::{Attempt, Exchange};

/// The highest version this client sends (v1 added the session lifetime).
pub(crate) const MAX_VERSION: i16 = 2;

/// One round: the mechanism's `bytes`, sent for `user` (`None`: a token's bearer).
pub(crate) struct SaslAuthenticate<'a> {
    pub(crate) mechanism: &'static str,
    pub(crate) user: Option<&'a str>,
    pub(crate) bytes: Bytes,
}

/// The error for a refused authentication at `at` (`why`: the broker's words, or what the
/// client found wrong), with what to check.
pub(crate) fn refused(mechanism: &str, user: Option<&str>, at: &str, why: &str) -> TransportError {
    TransportError::unauthorized(match user {
        Some(username) => format!(
            "SASL authentication with mechanism {mechanism} as user '{username}' failed at \
             {at}: {why}; check sasl.username and sasl.password, and that the user has \
             {mechanism} credentials on the cluster"
        ),
        None => format!(
            "SASL authentication with mechanism {mechanism} failed at {at}: {why}; check what \
             the token provider returns against the listener's OAUTHBEARER validation settings"
        ),
    })
    .in_section(section::SASL)
}

impl Exchange for SaslAuthenticate<'_> {
    type Request = SaslAuthenticateRequest;
    /// The broker's bytes, and the session lifetime it announced in ms (0: none).
    type Output = (Bytes, i64);
    const NAME: &'static str = "SaslAuthenticate";
    const MAX_VERSION: i16 = MAX_VERSION;

    fn request(&self, _version: i16) -> SaslAuthenticateRequest {
        SaslAuthenticateRequest::default().with_auth_bytes(self.bytes.clone())
    }

    fn answer(
        &self,
        answer: SaslAuthenticateResponse,
        _version: i16,
        at: &str,
    ) -> Result<(Bytes, i64), Attempt> {
        match E::try_from_code(answer.error_code) {
            None => Ok((answer.auth_bytes, answer.session_lifetime_ms)),
            Some(E::SaslAuthenticationFailed) => Err(Attempt::Stop(refused(
                self.mechanism,
                self.user,
                at,
                answer
                    .error_message
                    .as_deref()
                    .filter(|m| !m.is_empty())
                    .unwrap_or("SASL_AUTHENTICATION_FAILED"),
            ))),
            Some(other) => Err(Attempt::Broken(format!(
                "SaslAuthenticate ({}) at {at} failed with error {}{}",
                self.mechanism,
                other.code(),
                answer
                    .error_message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))),
        }
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} does not offer SaslAuthenticate; SASL needs Kafka 1.0 or newer"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_transport::error::ErrorKind;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn a_round_carries_the_bytes_and_reads_the_answer() {
        let x = SaslAuthenticate {
            mechanism: "PLAIN",
            user: Some("alice"),
            bytes: Bytes::from_static(b"\0alice\0pw"),
        };
        assert_eq!(&x.request(MAX_VERSION).auth_bytes[..], b"\0alice\0pw");
        let ok = SaslAuthenticateResponse::default()
            .with_auth_bytes(Bytes::from_static(b"r=1"))
            .with_session_lifetime_ms(60_000);
        let (bytes, lifetime) = x.answer(ok, MAX_VERSION, "b:9093").ok().unwrap();
        assert_eq!((&bytes[..], lifetime), (&b"r=1"[..], 60_000));

        let failed = SaslAuthenticateResponse::default()
            .with_error_code(E::SaslAuthenticationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str("bad password")));
        match x.answer(failed, MAX_VERSION, "b:9093") {
            Err(Attempt::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unauthorized);
                let text = e.to_string();
                assert!(
                    text.contains("as user 'alice'") && text.contains("bad password"),
                    "{text}"
                );
            }
            _ => panic!("a refused authentication must stop"),
        }
        let silent_refusal =
            SaslAuthenticateResponse::default().with_error_code(E::SaslAuthenticationFailed.code());
        assert!(x
            .answer(silent_refusal, MAX_VERSION, "b:9093")
            .err()
            .unwrap()
            .why()
            .contains("SASL_AUTHENTICATION_FAILED"));
        let other = SaslAuthenticateResponse::default()
            .with_error_code(E::IllegalSaslState.code())
            .with_error_message(Some(StrBytes::from_static_str("again")));
        match x.answer(other, MAX_VERSION, "b:9093") {
            Err(Attempt::Broken(why)) => assert!(why.ends_with(": again"), "{why}"),
            _ => panic!("another error drops the connection"),
        }
    }

    #[test]
    fn a_bearer_refused_is_told_to_check_its_token() {
        let e = refused("OAUTHBEARER", None, "b:9093", "invalid_token");
        assert!(e.to_string().contains("token provider"), "{e}");
        assert!(!e.to_string().contains("as user"), "{e}");
    }
}
