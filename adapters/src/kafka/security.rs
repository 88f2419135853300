//! Security of the native connections, from the same librdkafka-style properties that drive
//! rdkafka (`security.protocol`, `sasl.*`, `ssl.*`).

use std::net::TcpStream;
use std::time::Instant;

use super::config::KafkaConfig;
use super::net::{Conn, NetError, Stream};
use crate::error::TransportError;

/// `security.protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

/// How native connections are secured.
#[derive(Clone, Debug)]
pub(crate) struct Security {
    protocol: Protocol,
}

impl Security {
    /// Reads and checks the security settings of `config`.
    pub(crate) fn from_config(config: &KafkaConfig) -> Result<Security, TransportError> {
        let raw = config.security_protocol();
        let protocol = match raw.as_str() {
            "plaintext" => Protocol::Plaintext,
            "ssl" => Protocol::Ssl,
            "sasl_plaintext" => Protocol::SaslPlaintext,
            "sasl_ssl" => Protocol::SaslSsl,
            other => {
                return Err(TransportError::config(format!(
                    "security.protocol={other} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
                )))
            }
        };
        if protocol != Protocol::Plaintext {
            return Err(TransportError::config(format!(
                "security.protocol={raw} is not supported by the native client yet"
            )));
        }
        Ok(Security { protocol })
    }

    /// Plain connections, for tests.
    pub(crate) fn plaintext() -> Security {
        Security {
            protocol: Protocol::Plaintext,
        }
    }

    /// The protocol.
    pub(crate) fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Wraps a fresh TCP connection to `addr` (TLS for `SSL` and `SASL_SSL`).
    pub(crate) fn wrap(
        &self,
        _addr: &str,
        tcp: TcpStream,
        _deadline: Instant,
    ) -> Result<Box<dyn Stream>, NetError> {
        Ok(Box::new(tcp))
    }

    /// Authenticates a negotiated connection (SASL for `SASL_*`).
    pub(crate) fn authenticate(&self, _conn: &mut Conn, _deadline: Instant) -> Result<(), NetError> {
        Ok(())
    }
}
