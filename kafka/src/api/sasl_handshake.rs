//! SaslHandshake (API key 17), v1: asks a SASL listener to authenticate the connection with
//! one mechanism; the authentication itself is SaslAuthenticate.

use kafka_coordination_transport::error::{section, TransportError};
use kafka_protocol::error::ResponseError as E;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Attempt, Exchange};

/// The mechanism to ask for, by its name on the wire (`sasl.mechanism`).
pub(crate) struct SaslHandshake {
    pub(crate) mechanism: &'static str,
}

/// A configuration error of the SASL setup, filed under the guide's SASL section.
fn setup(message: String) -> Attempt {
    Attempt::Stop(TransportError::config(message).in_section(section::SASL))
}

impl Exchange for SaslHandshake {
    type Request = SaslHandshakeRequest;
    type Output = ();
    const NAME: &'static str = "SaslHandshake";
    const MAX_VERSION: i16 = 1;
    const MIN_VERSION: i16 = 1;

    fn request(&self, _version: i16) -> SaslHandshakeRequest {
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(self.mechanism))
    }

    fn answer(
        &self,
        answer: SaslHandshakeResponse,
        _version: i16,
        at: &str,
    ) -> Result<(), Attempt> {
        let mechanism = self.mechanism;
        match E::try_from_code(answer.error_code) {
            None => Ok(()),
            Some(E::UnsupportedSaslMechanism) => {
                let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
                Err(setup(format!(
                    "the broker at {at} does not enable SASL mechanism {mechanism} \
                     (sasl.mechanism); it enables {}: set sasl.mechanism to one of them, or add \
                     {mechanism} to the listener's sasl.enabled.mechanisms",
                    if enabled.is_empty() {
                        "none".to_owned()
                    } else {
                        enabled.join(", ")
                    }
                )))
            }
            Some(E::IllegalSaslState) => Err(setup(format!(
                "the broker at {at} did not expect SASL (ILLEGAL_SASL_STATE): it is not a SASL \
                 listener; security.protocol must match the listener's"
            ))),
            Some(other) => Err(Attempt::Broken(format!(
                "SaslHandshake for {mechanism} at {at} failed with error {}",
                other.code()
            ))),
        }
    }

    fn unsupported(&self, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} does not offer SaslHandshake: it is not a SASL listener? \
             security.protocol must match the listener's"
        )))
    }

    fn too_old(&self, _offered: i16, at: &str) -> Attempt {
        Attempt::Stop(TransportError::config(format!(
            "the broker at {at} offers SaslHandshake v0 only; SASL needs Kafka 1.0 or newer \
             (SaslHandshake v1 and SaslAuthenticate)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_transport::error::ErrorKind;

    fn stopped(a: Result<(), Attempt>) -> TransportError {
        match a {
            Err(Attempt::Stop(e)) => e,
            _ => panic!("expected a stop"),
        }
    }

    #[test]
    fn the_handshake_names_the_mechanism_and_reads_each_refusal() {
        let x = SaslHandshake {
            mechanism: "SCRAM-SHA-512",
        };
        assert_eq!(x.request(1).mechanism.as_str(), "SCRAM-SHA-512");
        assert!(x
            .answer(SaslHandshakeResponse::default(), 1, "b:9093")
            .is_ok());
        let unsupported = SaslHandshakeResponse::default()
            .with_error_code(E::UnsupportedSaslMechanism.code())
            .with_mechanisms(vec![StrBytes::from_static_str("PLAIN")]);
        let e = stopped(x.answer(unsupported, 1, "b:9093"));
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.to_string().contains("it enables PLAIN"), "{e}");
        let none =
            SaslHandshakeResponse::default().with_error_code(E::UnsupportedSaslMechanism.code());
        assert!(stopped(x.answer(none, 1, "b:9093"))
            .to_string()
            .contains("it enables none"));
        let illegal = SaslHandshakeResponse::default().with_error_code(E::IllegalSaslState.code());
        assert!(stopped(x.answer(illegal, 1, "b:9093"))
            .to_string()
            .contains("ILLEGAL_SASL_STATE"));
        let other = SaslHandshakeResponse::default().with_error_code(-1);
        assert!(matches!(
            x.answer(other, 1, "b:9093"),
            Err(Attempt::Broken(_))
        ));
        assert!(x.too_old(0, "b:9093").why().contains("v0 only"));
        assert!(x
            .unsupported("b:9093")
            .why()
            .contains("not a SASL listener"));
    }
}
