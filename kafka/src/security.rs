//! Security of the native connections, from librdkafka-style properties (`security.protocol`,
//! `sasl.*`, `ssl.*`), so that a [`KafkaConfig`] reads as a user's rdkafka configuration does
//! (the properties: [`Security::from_config`]): TLS in `tls`, SASL in `sasl`.

mod mechanism;
mod props;
mod sasl;
mod scram;
mod tls;

use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::protocol::StrBytes;

#[cfg(feature = "fuzzing")]
pub(crate) use mechanism::Mechanism;
use sasl::Sasl;
#[cfg(feature = "fuzzing")]
pub(crate) use scram::Scram;
use tls::Tls;

use super::config::KafkaConfig;
use super::net::conn::{ApiCounts, Conn, NetError, Stream};
use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::log_warn;

/// `security.protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Protocol {
    fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

/// How native connections are secured: TLS for `SSL` and `SASL_SSL`, SASL for `SASL_*`.
#[derive(Clone, Debug)]
pub(crate) struct Security {
    tls: Option<Tls>,
    sasl: Option<Sasl>,
}

impl Security {
    /// Reads and checks the security settings of `config`: every file is read and parsed
    /// now, so a wrong setting fails when the client is built, not at the first connection.
    ///
    /// | property | values | native client |
    /// | --- | --- | --- |
    /// | `security.protocol` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` | all four |
    /// | `sasl.mechanism` (alias `sasl.mechanisms`) | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` | required with `SASL_*` (librdkafka's default, `GSSAPI`, is refused: no Kerberos) |
    /// | `sasl.username`, `sasl.password` | | required with `SASL_*` but for `OAUTHBEARER` |
    /// | [`KafkaConfig::with_token_provider`] | a [`TokenProvider`](super::TokenProvider) | required with `OAUTHBEARER` (`sasl.oauthbearer.method=oidc` is refused: the application fetches the tokens) |
    /// | `ssl.ca.location` | a PEM file, a directory of PEM files, or `probe` | trust anchors; unset or `probe`: the system's roots (found as OpenSSL finds them, `SSL_CERT_FILE`/`SSL_CERT_DIR` honoured) |
    /// | `ssl.ca.pem` | PEM text | trust anchors (before `ssl.ca.location`) |
    /// | `ssl.certificate.location` + `ssl.key.location` (or `ssl.certificate.pem` + `ssl.key.pem`) | PEM | client certificate (mutual TLS), optional; the key unencrypted (PKCS#8, PKCS#1 or SEC1) |
    /// | `ssl.crl.location` | PEM CRLs | revocation of the brokers' certificates |
    /// | `ssl.endpoint.identification.algorithm` | `https` (default), `none` | `https`: the broker's certificate must name the host of its address; `none`: the host is not checked, the chain still is |
    ///
    /// Refused with a configuration error that says what to do instead: `ssl.keystore.location`
    /// (PKCS#12), an encrypted key (`ssl.key.password`), `enable.ssl.certificate.verification=false`.
    /// OpenSSL-only tuning (`ssl.cipher.suites`, `ssl.curves.list`, `ssl.sigalgs.list`) does not
    /// apply: rustls uses its own safe defaults (TLS 1.2 and 1.3). The `SSL*` properties are ignored
    /// with `PLAINTEXT` and `SASL_PLAINTEXT`, the `sasl.*` ones with `PLAINTEXT` and `SSL`, as
    /// librdkafka does. `PLAIN` over `SASL_PLAINTEXT` works but sends the password in clear: the
    /// transport logs a warning when it is built (see [`KafkaConfig::cleartext_password_warning`]).
    /// Any other key, and a key of a layer the protocol does not use, is not read:
    /// [`KafkaTransport::new`](super::KafkaTransport::new) logs a warning naming it (see
    /// [`KafkaConfig::unused_properties`]).
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
        let tls = if protocol.tls() {
            Some(Tls::from_config(config)?)
        } else {
            None
        };
        let sasl = if protocol.sasl() {
            Some(Sasl::from_config(config, &raw)?)
        } else {
            None
        };
        if let Some(warning) = config.cleartext_password_warning() {
            // Logged only with the `tracing` feature.
            let _ = warning;
            log_warn!(bootstrap_servers = %config.bootstrap_servers(), "{warning}");
        }
        Ok(Security { tls, sasl })
    }

    /// Plain connections, for tests.
    #[cfg(test)]
    pub(crate) fn plaintext() -> Security {
        Security {
            tls: None,
            sasl: None,
        }
    }

    /// The protocol.
    #[cfg(test)]
    pub(crate) fn protocol(&self) -> Protocol {
        match (self.tls.is_some(), self.sasl.is_some()) {
            (false, false) => Protocol::Plaintext,
            (true, false) => Protocol::Ssl,
            (false, true) => Protocol::SaslPlaintext,
            (true, true) => Protocol::SaslSsl,
        }
    }

    /// Wraps a fresh TCP connection to `addr` (TLS for `SSL` and `SASL_SSL`; the handshake is
    /// done here, by `deadline`).
    pub(crate) fn wrap(
        &self,
        addr: &str,
        tcp: TcpStream,
        deadline: Instant,
    ) -> Result<Box<dyn Stream>, NetError> {
        match &self.tls {
            None => Ok(Box::new(tcp)),
            Some(tls) => Ok(Box::new(tls.connect(addr, tcp, deadline)?)),
        }
    }

    /// Opens a connection to `addr`, secured and authenticated as configured (see
    /// [`Conn::open`] for `on_socket`).
    pub(crate) fn open(
        &self,
        addr: &str,
        client_id: &StrBytes,
        counts: Arc<ApiCounts>,
        deadline: Instant,
        on_socket: impl FnOnce(&Arc<TcpStream>) -> Result<(), String>,
    ) -> Result<Conn, NetError> {
        let wrap = |tcp| self.wrap(addr, tcp, deadline);
        let mut conn = Conn::open(addr, wrap, client_id, counts, deadline, on_socket)?;
        self.authenticate(&mut conn, deadline)?;
        Ok(conn)
    }

    /// Authenticates a negotiated connection (SASL for `SASL_*`), or authenticates it again
    /// when its session is due (KIP-368, see [`Conn::session_due`]).
    pub(crate) fn authenticate(&self, conn: &mut Conn, deadline: Instant) -> Result<(), NetError> {
        match &self.sasl {
            None => Ok(()),
            Some(sasl) => sasl.authenticate(conn, deadline),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod live;
