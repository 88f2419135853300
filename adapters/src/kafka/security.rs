//! Security of the native connections, from librdkafka-style properties (`security.protocol`,
//! `sasl.*`, `ssl.*`), so that a [`KafkaConfig`] reads as a user's rdkafka configuration does.
//!
//! | property | values | native client |
//! | --- | --- | --- |
//! | `security.protocol` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` | all four |
//! | `sasl.mechanism` (alias `sasl.mechanisms`) | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` | required with `SASL_*` (librdkafka's default, `GSSAPI`, is refused: no Kerberos) |
//! | `sasl.username`, `sasl.password` | | required with `SASL_*` but for `OAUTHBEARER` |
//! | [`KafkaConfig::with_token_provider`] | a [`TokenProvider`](super::TokenProvider) | required with `OAUTHBEARER` (`sasl.oauthbearer.method=oidc` is refused: the application fetches the tokens) |
//! | `ssl.ca.location` | a PEM file, a directory of PEM files, or `probe` | trust anchors; unset or `probe`: the system's roots (found as OpenSSL finds them, `SSL_CERT_FILE`/`SSL_CERT_DIR` honoured) |
//! | `ssl.ca.pem` | PEM text | trust anchors (before `ssl.ca.location`) |
//! | `ssl.certificate.location` + `ssl.key.location` (or `ssl.certificate.pem` + `ssl.key.pem`) | PEM | client certificate (mutual TLS), optional; the key unencrypted (PKCS#8, PKCS#1 or SEC1) |
//! | `ssl.crl.location` | PEM CRLs | revocation of the brokers' certificates |
//! | `ssl.endpoint.identification.algorithm` | `https` (default), `none` | `https`: the broker's certificate must name the host of its address; `none`: the host is not checked, the chain still is |
//!
//! Refused with a configuration error that says what to do instead: `ssl.keystore.location`
//! (PKCS#12), an encrypted key (`ssl.key.password`), `enable.ssl.certificate.verification=false`.
//! OpenSSL-only tuning (`ssl.cipher.suites`, `ssl.curves.list`, `ssl.sigalgs.list`) does not
//! apply: rustls uses its own safe defaults (TLS 1.2 and 1.3). The `SSL*` properties are ignored
//! with `PLAINTEXT` and `SASL_PLAINTEXT`, the `sasl.*` ones with `PLAINTEXT` and `SSL`, as
//! librdkafka does. `PLAIN` over `SASL_PLAINTEXT` works but sends the password in clear: the
//! transport logs a warning when it is built (see [`KafkaConfig::cleartext_password_warning`]).
//!
//! SASL runs after version negotiation: SaslHandshake v1, then SaslAuthenticate (KIP-152).
//! SCRAM follows RFC 5802 and RFC 7677 (client-first, server-first, client-final,
//! server-final) and checks the broker's server signature, so a broker that does not know the
//! user's credentials is not accepted either. OAUTHBEARER follows RFC 7628 (see `oauth.rs`).
//! When the broker limits a session (`connections.max.reauth.ms`, or a token's expiry: KIP-368),
//! a connection authenticates again before its next request once 85% of the session has
//! passed, and one left idle past 95% is replaced (see `net.rs`).

use std::fmt;
use std::io;
use std::net::TcpStream;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::error::ResponseError as E;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{
    CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName, UnixTime,
};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore,
    SignatureScheme, StreamOwned,
};

use super::config::KafkaConfig;
use super::net::conn::{ApiCounts, Conn, NetError, Stream};
use super::net::refusal::{refusal, rustls_error};
use super::oauth::TokenCache;
use crate::error::TransportError;
use crate::log::log_warn;

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

/// `sasl.mechanism`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl Mechanism {
    /// The name on the wire (and in `sasl.enabled.mechanisms` on the broker).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How native connections are secured: TLS for `SSL` and `SASL_SSL`, SASL for `SASL_*`.
#[derive(Clone, Debug)]
pub(crate) struct Security {
    tls: Option<Tls>,
    sasl: Option<Sasl>,
}

/// A password, never printed.
#[derive(Clone)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Clone, Debug)]
struct Sasl {
    mechanism: Mechanism,
    credentials: Credentials,
}

/// What a SASL mechanism authenticates with.
#[derive(Clone, Debug)]
enum Credentials {
    /// PLAIN and SCRAM.
    Password { username: String, password: Secret },
    /// OAUTHBEARER: the client's token, shared by its connections.
    Token(Arc<TokenCache>),
}

#[derive(Clone)]
struct Tls {
    config: Arc<ClientConfig>,
    /// Where the trust anchors come from, for messages.
    trust: String,
    verify_host: bool,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("trust", &self.trust)
            .field("verify_host", &self.verify_host)
            .field(
                "client_certificate",
                &self.config.client_auth_cert_resolver.has_certs(),
            )
            .finish()
    }
}

impl Security {
    /// Reads and checks the security settings of `config`: every file is read and parsed
    /// now, so a wrong setting fails when the client is built, not at the first connection.
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
// ---- TLS ------------------------------------------------------------------------------------

impl Stream for StreamOwned<ClientConnection, TcpStream> {
    fn set_timeouts(&mut self, timeout: Duration) -> io::Result<()> {
        self.sock.set_timeouts(timeout)
    }
}

/// The host part of `host:port` (`[v6]:port` too).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn config_err(message: String) -> TransportError {
    TransportError::config(message)
}

/// A property's value, with empty values treated as unset.
fn prop<'a>(config: &'a KafkaConfig, key: &str) -> Option<&'a str> {
    config
        .property(key)
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// Reads a PEM file, or says which property names it and why it cannot be read.
fn read_pem(property: &str, path: &str) -> Result<Vec<u8>, TransportError> {
    std::fs::read(path).map_err(|e| {
        config_err(format!(
            "{property}={path} cannot be read: {e}; set {property} to a readable PEM file"
        ))
    })
}

impl Tls {
    fn from_config(config: &KafkaConfig) -> Result<Tls, TransportError> {
        if let Some(v) = prop(config, "enable.ssl.certificate.verification") {
            if v.eq_ignore_ascii_case("false") {
                return Err(config_err(
                    "enable.ssl.certificate.verification=false: the native client always \
                     verifies the brokers' certificates; remove the property and set \
                     ssl.ca.location to the CA that signed them"
                        .to_owned(),
                ));
            }
        }
        if let Some(ks) = prop(config, "ssl.keystore.location") {
            return Err(config_err(format!(
                "ssl.keystore.location={ks}: PKCS#12 keystores are not supported by the native \
                 client; convert it to PEM (openssl pkcs12 -in {ks} -nokeys -out cert.pem; \
                 openssl pkcs12 -in {ks} -nocerts -nodes -out key.pem) and set \
                 ssl.certificate.location and ssl.key.location instead"
            )));
        }
        let verify_host = match prop(config, "ssl.endpoint.identification.algorithm") {
            None => true,
            Some(v) if v.eq_ignore_ascii_case("https") => true,
            Some(v) if v.eq_ignore_ascii_case("none") => false,
            Some(v) => {
                return Err(config_err(format!(
                    "ssl.endpoint.identification.algorithm={v} is not one of https (check the \
                     broker's host name, the default) or none (check the certificate chain only)"
                )))
            }
        };
        let (roots, trust) = load_roots(config)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let crls = load_crls(config)?;
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .with_crls(crls)
            .build()
            .map_err(|e| {
                config_err(format!(
                    "the TLS trust settings ({trust}) are unusable: {e}"
                ))
            })?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TransportError::fatal(format!("TLS setup: {e}")))?;
        let builder = if verify_host {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
        };
        let tls_config = match load_client_identity(config)? {
            None => builder.with_no_client_auth(),
            Some((certs, key, what)) => builder.with_client_auth_cert(certs, key).map_err(|e| {
                config_err(format!(
                    "the client certificate and key ({what}) do not make a usable TLS identity: \
                     {e}; the key must be the certificate's (unencrypted PEM: PKCS#8, PKCS#1 or \
                     SEC1, RSA, ECDSA or Ed25519)"
                ))
            })?,
        };
        Ok(Tls {
            config: Arc::new(tls_config),
            trust,
            verify_host,
        })
    }

    fn connect(
        &self,
        addr: &str,
        tcp: TcpStream,
        deadline: Instant,
    ) -> Result<StreamOwned<ClientConnection, TcpStream>, NetError> {
        let host = host_of(addr);
        let name = ServerName::try_from(host.to_owned()).map_err(|e| {
            NetError::Stop(config_err(format!(
                "'{host}' (of broker address {addr}) is not a host name TLS can check: {e}"
            )))
        })?;
        let conn = ClientConnection::new(Arc::clone(&self.config), name).map_err(|e| {
            NetError::Stop(TransportError::fatal(format!(
                "starting TLS with {addr}: {e}"
            )))
        })?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(NetError::Io(format!(
                    "the TLS handshake with {addr} timed out"
                )));
            }
            stream
                .sock
                .set_timeouts(remaining)
                .map_err(|e| NetError::Io(format!("setting timeouts for {addr}: {e}")))?;
            let StreamOwned { conn, sock } = &mut stream;
            if let Err(e) = conn.complete_io(sock) {
                return Err(self.handshake_error(addr, host, &e));
            }
        }
        Ok(stream)
    }

    fn handshake_error(&self, addr: &str, host: &str, e: &io::Error) -> NetError {
        if let Some(err) = rustls_error(e) {
            return self.classify(addr, host, err, e);
        }
        let hint = if e.kind() == io::ErrorKind::UnexpectedEof
            || e.kind() == io::ErrorKind::ConnectionReset
        {
            " (the broker closed the connection: is it a TLS listener? security.protocol must \
             match the listener's)"
        } else {
            ""
        };
        NetError::Io(format!("the TLS handshake with {addr} failed: {e}{hint}"))
    }

    /// A TLS failure: certificate problems and refusals are configuration errors that name
    /// the trust anchors and the host; anything else is `Io`.
    fn classify(&self, addr: &str, host: &str, err: &rustls::Error, e: &io::Error) -> NetError {
        let message = match err {
            rustls::Error::InvalidCertificate(cert) => self.certificate_message(addr, host, cert),
            other => match refusal(addr, other) {
                Some(message) => message,
                None => {
                    return NetError::Io(format!(
                        "TLS with {addr} failed: {e} (trusted CAs: {})",
                        self.trust
                    ))
                }
            },
        };
        NetError::Stop(config_err(message))
    }

    fn certificate_message(&self, addr: &str, host: &str, cert: &CertificateError) -> String {
        let trust = &self.trust;
        match cert {
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "the TLS certificate of the broker at {addr} is not valid for host '{host}' \
                     ({cert:?}): its subjectAltName must name the host of the broker's address \
                     (bootstrap.servers and the advertised listeners), or set \
                     ssl.endpoint.identification.algorithm=none to skip the host-name check (the \
                     chain to {trust} is still verified)"
                )
            }
            CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                "the TLS certificate of the broker at {addr} (host '{host}') is not signed by a \
                 trusted CA ({cert:?}; trusted: {trust}): set ssl.ca.location to the PEM file of \
                 the CA that signed the brokers' certificates"
            ),
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => format!(
                "the TLS certificate of the broker at {addr} (host '{host}') is outside its \
                 validity period ({cert:?}): renew it, or check this machine's clock"
            ),
            CertificateError::Revoked => format!(
                "the TLS certificate of the broker at {addr} (host '{host}') is revoked by a CRL \
                 in ssl.crl.location"
            ),
            other => format!(
                "the TLS certificate of the broker at {addr} (host '{host}') was rejected: \
                 {other:?} (trusted: {trust}; check ssl.ca.location)"
            ),
        }
    }
}

/// The trust anchors: `ssl.ca.pem`, else `ssl.ca.location` (a file, a directory, or `probe`),
/// else the system's roots. Returns them with a description for messages.
fn load_roots(config: &KafkaConfig) -> Result<(RootCertStore, String), TransportError> {
    let mut roots = RootCertStore::empty();
    if let Some(pem) = prop(config, "ssl.ca.pem") {
        add_roots(&mut roots, "ssl.ca.pem", pem.as_bytes())?;
        return Ok((roots, "the CA certificates in ssl.ca.pem".to_owned()));
    }
    match prop(config, "ssl.ca.location") {
        None => system_roots("ssl.ca.location is unset"),
        Some(v) if v.eq_ignore_ascii_case("probe") => system_roots("ssl.ca.location=probe"),
        Some(path) if Path::new(path).is_dir() => {
            let entries = std::fs::read_dir(path).map_err(|e| {
                config_err(format!(
                    "ssl.ca.location={path} cannot be read: {e}; set ssl.ca.location to a \
                     readable PEM file (or directory of PEM files)"
                ))
            })?;
            let mut files: Vec<_> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            for file in files {
                let Ok(bytes) = std::fs::read(&file) else {
                    continue;
                };
                for cert in CertificateDer::pem_slice_iter(&bytes).flatten() {
                    // A directory may hold other files (hash links, CRLs): skip what is no CA.
                    let _ = roots.add(cert);
                }
            }
            if roots.is_empty() {
                return Err(config_err(format!(
                    "ssl.ca.location={path} is a directory without a usable PEM CA certificate; \
                     set ssl.ca.location to the PEM file of the CA that signed the brokers' \
                     certificates"
                )));
            }
            Ok((
                roots,
                format!("the CA certificates in ssl.ca.location={path}"),
            ))
        }
        Some(path) => {
            let bytes = read_pem("ssl.ca.location", path)?;
            add_roots(&mut roots, &format!("ssl.ca.location={path}"), &bytes)?;
            Ok((
                roots,
                format!("the CA certificates in ssl.ca.location={path}"),
            ))
        }
    }
}

/// Adds every certificate of `pem` as a trust anchor; at least one must be there.
fn add_roots(roots: &mut RootCertStore, what: &str, pem: &[u8]) -> Result<(), TransportError> {
    let mut n = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| {
            config_err(format!(
                "{what} is not valid PEM ({e}); it must hold the CA certificate(s) that signed \
                 the brokers' certificates (-----BEGIN CERTIFICATE-----)"
            ))
        })?;
        n += 1;
        roots.add(cert).map_err(|e| {
            config_err(format!(
                "certificate {n} in {what} is not a usable CA certificate: {e}"
            ))
        })?;
    }
    if n == 0 {
        return Err(config_err(format!(
            "{what} holds no PEM certificate (-----BEGIN CERTIFICATE-----); it must hold the CA \
             certificate(s) that signed the brokers' certificates"
        )));
    }
    Ok(())
}

fn system_roots(why: &str) -> Result<(RootCertStore, String), TransportError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(config_err(format!(
            "{why}, so the system's root certificates are the trusted CAs, but none were found{}; \
             set ssl.ca.location to the PEM file of the CA that signed the brokers' certificates \
             (or install the system's CA certificates)",
            if errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", errors.join("; "))
            }
        )));
    }
    Ok((
        roots,
        format!("the system's {added} root certificates ({why})"),
    ))
}

fn load_crls(
    config: &KafkaConfig,
) -> Result<Vec<CertificateRevocationListDer<'static>>, TransportError> {
    let Some(path) = prop(config, "ssl.crl.location") else {
        return Ok(Vec::new());
    };
    let bytes = read_pem("ssl.crl.location", path)?;
    let crls = CertificateRevocationListDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| config_err(format!("ssl.crl.location={path} is not valid PEM: {e}")))?;
    if crls.is_empty() {
        return Err(config_err(format!(
            "ssl.crl.location={path} holds no PEM CRL (-----BEGIN X509 CRL-----)"
        )));
    }
    Ok(crls)
}

type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String);

/// The client certificate chain and key for mutual TLS, if configured (both or neither).
fn load_client_identity(config: &KafkaConfig) -> Result<Option<Identity>, TransportError> {
    let cert = match (
        prop(config, "ssl.certificate.pem"),
        prop(config, "ssl.certificate.location"),
    ) {
        (Some(pem), _) => Some(("ssl.certificate.pem".to_owned(), pem.as_bytes().to_vec())),
        (None, Some(path)) => Some((
            format!("ssl.certificate.location={path}"),
            read_pem("ssl.certificate.location", path)?,
        )),
        (None, None) => None,
    };
    let key = match (
        prop(config, "ssl.key.pem"),
        prop(config, "ssl.key.location"),
    ) {
        (Some(pem), _) => Some(("ssl.key.pem".to_owned(), pem.as_bytes().to_vec())),
        (None, Some(path)) => Some((
            format!("ssl.key.location={path}"),
            read_pem("ssl.key.location", path)?,
        )),
        (None, None) => None,
    };
    let ((cert_what, cert_pem), (key_what, key_pem)) = match (cert, key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        (Some((what, _)), None) => {
            return Err(config_err(format!(
                "{what} is set but ssl.key.location is not: a client certificate needs its \
                 private key; set ssl.key.location (PEM) too, or neither"
            )))
        }
        (None, Some((what, _))) => {
            return Err(config_err(format!(
                "{what} is set but ssl.certificate.location is not: a client key needs its \
                 certificate; set ssl.certificate.location (PEM) too, or neither"
            )))
        }
    };
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| config_err(format!("{cert_what} is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(config_err(format!(
            "{cert_what} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        let text = String::from_utf8_lossy(&key_pem);
        if text.contains("ENCRYPTED") {
            config_err(format!(
                "{key_what} is an encrypted private key, which the native client cannot use; \
                 decrypt it (openssl pkey -in encrypted.pem -out key.pem) and drop \
                 ssl.key.password"
            ))
        } else {
            config_err(format!(
                "{key_what} holds no usable PEM private key ({e}); it must be unencrypted \
                 PKCS#8 (-----BEGIN PRIVATE KEY-----), PKCS#1 or SEC1"
            ))
        }
    })?;
    Ok(Some((certs, key, format!("{cert_what}, {key_what}"))))
}

/// Verifies the chain and ignores the host name (`ssl.endpoint.identification.algorithm=none`).
/// WebPKI verifies the chain (and revocation) before the name, so a name error means that
/// everything else passed.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

// ---- SASL -----------------------------------------------------------------------------------

impl Sasl {
    fn from_config(config: &KafkaConfig, protocol: &str) -> Result<Sasl, TransportError> {
        let protocol = protocol.to_ascii_uppercase();
        let mechanism = match config.property_among(&["sasl.mechanism", "sasl.mechanisms"]) {
            None => {
                return Err(config_err(format!(
                    "security.protocol={protocol} needs sasl.mechanism: set it to PLAIN, \
                     SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (librdkafka's default, GSSAPI, \
                     is not supported)"
                )))
            }
            Some((key, raw)) => match raw.trim().to_ascii_uppercase().as_str() {
                "PLAIN" => Mechanism::Plain,
                "SCRAM-SHA-256" => Mechanism::ScramSha256,
                "SCRAM-SHA-512" => Mechanism::ScramSha512,
                "OAUTHBEARER" => Mechanism::OAuthBearer,
                "GSSAPI" => {
                    return Err(config_err(format!(
                        "{key}={raw} (Kerberos) is not supported: the native client has no \
                         Kerberos implementation (no GSS-API library, no keytab or ticket cache \
                         handling); use SCRAM-SHA-512, SCRAM-SHA-256, OAUTHBEARER or PLAIN, or \
                         mutual TLS (security.protocol=SSL with a client certificate)"
                    )))
                }
                _ => {
                    return Err(config_err(format!(
                        "{key}={raw} is not a SASL mechanism this library knows; use PLAIN, \
                         SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
                    )))
                }
            },
        };
        if mechanism == Mechanism::OAuthBearer {
            return Self::oauth_from_config(config, &protocol);
        }
        let username = config.property("sasl.username").unwrap_or("");
        if username.is_empty() {
            return Err(config_err(format!(
                "security.protocol={protocol} with sasl.mechanism={mechanism} needs \
                 sasl.username: set it to the user to authenticate as"
            )));
        }
        let Some(password) = config.property("sasl.password").filter(|p| !p.is_empty()) else {
            return Err(config_err(format!(
                "security.protocol={protocol} with sasl.mechanism={mechanism} needs \
                 sasl.password: set it to the password of user '{username}'"
            )));
        };
        if mechanism == Mechanism::Plain && (username.contains('\0') || password.contains('\0')) {
            return Err(config_err(
                "sasl.username and sasl.password cannot contain a NUL character with PLAIN"
                    .to_owned(),
            ));
        }
        Ok(Sasl {
            mechanism,
            credentials: Credentials::Password {
                username: username.to_owned(),
                password: Secret(password.to_owned()),
            },
        })
    }

    /// OAUTHBEARER: the tokens come from the configuration's provider; librdkafka's own ways
    /// of getting one (`sasl.oauthbearer.method=oidc`) are not the native client's.
    fn oauth_from_config(config: &KafkaConfig, protocol: &str) -> Result<Sasl, TransportError> {
        if let Some(method) = prop(config, "sasl.oauthbearer.method") {
            if !method.eq_ignore_ascii_case("default") {
                return Err(config_err(format!(
                    "sasl.oauthbearer.method={method}: the native client does not fetch OAuth \
                     tokens itself; fetch them in the application and hand them over with \
                     KafkaConfig::with_token_provider (a TokenProvider, or a closure returning \
                     an OAuthToken and its expiry), and drop sasl.oauthbearer.method"
                )));
            }
        }
        let Some(tokens) = config.token_cache() else {
            return Err(config_err(format!(
                "security.protocol={protocol} with sasl.mechanism=OAUTHBEARER needs a token \
                 provider: the native client does not fetch OAuth tokens itself; supply one with \
                 KafkaConfig::with_token_provider (a TokenProvider, or a closure returning an \
                 OAuthToken and its expiry)"
            )));
        };
        Ok(Sasl {
            mechanism: Mechanism::OAuthBearer,
            credentials: Credentials::Token(Arc::clone(tokens)),
        })
    }

    /// Authenticates `conn` (SaslHandshake, then SaslAuthenticate), or authenticates it again
    /// (KIP-368: the same requests on an authenticated connection, with fresh credentials).
    /// Notes the session lifetime the broker answered on the connection.
    fn authenticate(&self, conn: &mut Conn, deadline: Instant) -> Result<(), NetError> {
        let started = Instant::now();
        let addr = conn.addr().to_owned();
        let mechanism = self.mechanism;
        let Some(handshake_version) = conn.version_at_most::<SaslHandshakeRequest>(1) else {
            return Err(NetError::Stop(config_err(format!(
                "the broker at {addr} does not offer SaslHandshake: it is not a SASL listener? \
                 security.protocol must match the listener's"
            ))));
        };
        if handshake_version < 1 {
            return Err(NetError::Stop(config_err(format!(
                "the broker at {addr} offers SaslHandshake v0 only; SASL needs Kafka 1.0 or newer \
                 (SaslHandshake v1 and SaslAuthenticate)"
            ))));
        }
        let req = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(mechanism.name()));
        let resp = conn.call(&req, handshake_version, deadline)?;
        match E::try_from_code(resp.error_code) {
            None => {}
            Some(E::UnsupportedSaslMechanism) => {
                let enabled: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
                return Err(NetError::Stop(config_err(format!(
                    "the broker at {addr} does not enable SASL mechanism {mechanism} \
                     (sasl.mechanism); it enables {}: set sasl.mechanism to one of them, or add \
                     {mechanism} to the listener's sasl.enabled.mechanisms",
                    if enabled.is_empty() {
                        "none".to_owned()
                    } else {
                        enabled.join(", ")
                    }
                ))));
            }
            Some(E::IllegalSaslState) => {
                return Err(NetError::Stop(config_err(format!(
                    "the broker at {addr} did not expect SASL (ILLEGAL_SASL_STATE): it is not a \
                     SASL listener; security.protocol must match the listener's"
                ))))
            }
            Some(other) => {
                return Err(NetError::Io(format!(
                    "SaslHandshake for {mechanism} at {addr} failed with error {}",
                    other.code()
                )))
            }
        }
        let Some(version) = conn.version_at_most::<SaslAuthenticateRequest>(2) else {
            return Err(NetError::Stop(config_err(format!(
                "the broker at {addr} does not offer SaslAuthenticate; SASL needs Kafka 1.0 or \
                 newer"
            ))));
        };
        let lifetime_ms = match &self.credentials {
            Credentials::Password { username, password } => match mechanism {
                Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                    let scram = Scram::new(mechanism, username, &nonce()?);
                    let (server_first, _) =
                        self.exchange(conn, version, scram.client_first().into_bytes(), deadline)?;
                    let (client_final, server) = scram
                        .client_final(&password.0, &server_first)
                        .map_err(|e| self.scram_error(&addr, e))?;
                    let (server_final, lifetime_ms) =
                        self.exchange(conn, version, client_final.into_bytes(), deadline)?;
                    server
                        .verify(&server_final)
                        .map_err(|e| self.scram_error(&addr, e))?;
                    lifetime_ms
                }
                Mechanism::Plain | Mechanism::OAuthBearer => {
                    let mut msg = Vec::with_capacity(username.len() + password.0.len() + 2);
                    msg.push(0);
                    msg.extend_from_slice(username.as_bytes());
                    msg.push(0);
                    msg.extend_from_slice(password.0.as_bytes());
                    self.exchange(conn, version, msg, deadline)?.1
                }
            },
            Credentials::Token(tokens) => self.bearer(conn, tokens, version, deadline)?,
        };
        conn.set_session(started, lifetime_ms);
        Ok(())
    }

    /// OAUTHBEARER's exchange (RFC 7628 section 3.2): the initial response with the token;
    /// the broker answers nothing on success, or an error (JSON) that the client acknowledges
    /// with a single `%x01` before the broker fails the exchange. Returns the session lifetime.
    fn bearer(
        &self,
        conn: &mut Conn,
        tokens: &TokenCache,
        version: i16,
        deadline: Instant,
    ) -> Result<i64, NetError> {
        let now = SystemTime::now();
        let token = tokens.token(now).map_err(|why| {
            NetError::Stop(TransportError::retriable(format!(
                "SASL OAUTHBEARER at {}: no valid token: {why}",
                conn.addr()
            )))
        })?;
        let (answer, lifetime_ms) =
            self.exchange(conn, version, token.initial_response(), deadline)?;
        if answer.is_empty() {
            return Ok(lifetime_ms);
        }
        let status = token.redact(shown(&answer));
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\x01"));
        let broker_says = match conn.call(&req, version, deadline) {
            Ok(resp) => resp
                .error_message
                .map(|m| token.redact(shown(m.as_bytes())))
                .filter(|m| *m != status)
                .map(|m| format!("; the broker: {m}"))
                .unwrap_or_default(),
            // The broker may close the connection instead of answering: the refusal stands.
            Err(_) => String::new(),
        };
        let whole = |d: Duration| Duration::from_secs(d.as_secs());
        let expiry = match token.expires_at().duration_since(now) {
            Ok(left) => format!("expiring in {:?}", whole(left)),
            Err(e) => format!("expired {:?} ago", whole(e.duration())),
        };
        Err(NetError::Stop(TransportError::unauthorized(format!(
            "SASL authentication with mechanism OAUTHBEARER failed at {}: the broker refused {} \
             ({expiry}): {status}{broker_says}; check what the token provider returns (issuer, \
             audience, scope, expiry and the principal claim) against the listener's OAUTHBEARER \
             validation settings",
            conn.addr(),
            token.who(),
        ))))
    }

    /// One SaslAuthenticate round trip: sends `bytes`, returns the broker's bytes and the
    /// session lifetime it announced (0: none).
    fn exchange(
        &self,
        conn: &mut Conn,
        version: i16,
        bytes: Vec<u8>,
        deadline: Instant,
    ) -> Result<(Bytes, i64), NetError> {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let resp = conn.call(&req, version, deadline)?;
        match E::try_from_code(resp.error_code) {
            None => Ok((resp.auth_bytes, resp.session_lifetime_ms)),
            Some(E::SaslAuthenticationFailed) => Err(NetError::Stop(
                self.failed(
                    conn.addr(),
                    resp.error_message
                        .as_deref()
                        .unwrap_or("SASL_AUTHENTICATION_FAILED"),
                ),
            )),
            Some(other) => Err(NetError::Io(format!(
                "SaslAuthenticate ({}) at {} failed with error {}{}",
                self.mechanism,
                conn.addr(),
                other.code(),
                resp.error_message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))),
        }
    }

    fn failed(&self, addr: &str, why: &str) -> TransportError {
        let mechanism = self.mechanism;
        TransportError::unauthorized(match &self.credentials {
            Credentials::Password { username, .. } => format!(
                "SASL authentication with mechanism {mechanism} as user '{username}' failed at \
                 {addr}: {why}; check sasl.username and sasl.password, and that the user has \
                 {mechanism} credentials on the cluster"
            ),
            Credentials::Token(_) => format!(
                "SASL authentication with mechanism {mechanism} failed at {addr}: {why}; check \
                 what the token provider returns against the listener's OAUTHBEARER validation \
                 settings"
            ),
        })
    }

    /// The user name, for messages.
    fn username(&self) -> &str {
        match &self.credentials {
            Credentials::Password { username, .. } => username,
            Credentials::Token(_) => "<token>",
        }
    }

    fn scram_error(&self, addr: &str, e: ScramError) -> NetError {
        NetError::Stop(match e {
            ScramError::Malformed(why) => TransportError::fatal(format!(
                "SASL {} as user '{}' at {addr}: the broker's SCRAM message is unusable: {why}",
                self.mechanism,
                self.username()
            )),
            ScramError::Rejected(why) => self.failed(addr, &why),
            ScramError::BadServerSignature => TransportError::unauthorized(format!(
                "SASL {} as user '{}' at {addr}: the broker's SCRAM server signature is wrong, \
                 so it does not know this user's credentials: it is not the cluster that was \
                 configured, or the credentials changed",
                self.mechanism,
                self.username()
            )),
        })
    }
}

/// A broker's text for a message: printable ASCII kept, anything else escaped (no terminal
/// escapes reach a log), at most 300 characters.
fn shown(bytes: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(bytes)
        .chars()
        .flat_map(|c| {
            let keep = c == ' ' || c.is_ascii_graphic();
            let kept = keep.then_some(c).into_iter();
            let escaped = (!keep).then(|| c.escape_default()).into_iter().flatten();
            kept.chain(escaped)
        })
        .collect();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// A fresh client nonce: 24 random bytes, base64 (printable, no comma).
fn nonce() -> Result<String, NetError> {
    let mut bytes = [0u8; 24];
    SystemRandom::new().fill(&mut bytes).map_err(|_| {
        NetError::Stop(TransportError::fatal(
            "the system's random number generator failed (SCRAM nonce)",
        ))
    })?;
    Ok(BASE64.encode(bytes))
}

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
const MIN_ITERATIONS: u32 = 4096;
/// Kafka's maximum iteration count (`ScramMechanism`): a broker never asks for more, and a
/// larger count from a broken or hostile broker would hold the connecting thread in PBKDF2
/// for minutes or hours (the count is a `u32`).
const MAX_ITERATIONS: u32 = 16384;

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

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
    use rustls::AlertDescription;

    use super::super::net::conn::SessionDue;
    use super::super::OAuthToken;
    use super::*;
    use crate::ErrorKind;

    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

    /// RFC 7677, section 3.
    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let scram = Scram::new(Mechanism::ScramSha256, "user", NONCE);
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let (client_final, server) = scram
            .client_final("pencil", SERVER_FIRST.as_bytes())
            .expect("client-final");
        assert_eq!(
            client_final,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        server
            .verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .expect("the RFC's server signature verifies");
        assert_eq!(
            server.verify(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(ScramError::BadServerSignature)
        );
        assert_eq!(
            server.verify(b"e=invalid-proof"),
            Err(ScramError::Rejected("invalid-proof".to_owned()))
        );
        assert!(matches!(
            server.verify(b"x=1"),
            Err(ScramError::Malformed(_))
        ));
    }

    /// The RFC 7677 exchange with SHA-512 (no RFC vector exists; computed independently with
    /// Python's hashlib.pbkdf2_hmac and hmac, whose SHA-256 output matches RFC 7677).
    #[test]
    fn scram_sha_512_matches_an_independent_computation() {
        let scram = Scram::new(Mechanism::ScramSha512, "user", NONCE);
        let (client_final, server) = scram
            .client_final("pencil", SERVER_FIRST.as_bytes())
            .expect("client-final");
        assert_eq!(
            client_final,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ=="
        );
        server
            .verify(
                b"v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
            )
            .expect("server signature");
    }

    #[test]
    fn scram_escapes_the_user_name_and_hashes_utf8_passwords() {
        let scram = Scram::new(Mechanism::ScramSha256, "a=b,c", "fyko+d2lbbFgONRv9qkxdawL");
        assert_eq!(
            scram.client_first(),
            "n,,n=a=3Db=2Cc,r=fyko+d2lbbFgONRv9qkxdawL"
        );
        let (client_final, server) = scram
            .client_final(
                "pässwörd",
                b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=8192",
            )
            .expect("client-final");
        assert_eq!(
            client_final,
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,\
             p=5OqjZ+kW3nG59CeESqK70X6KCBcRHlFaUqBMdA1g5bg="
        );
        server
            .verify(b"v=Q0S/p3HeGkNuexmiLdJm897YXCMWSsXz/3Ov0gkZRHA=")
            .expect("server signature");
    }

    #[test]
    fn scram_refuses_a_bad_server_first_message() {
        let scram = Scram::new(Mechanism::ScramSha256, "user", NONCE);
        let cases: [(&str, &str); 8] = [
            ("r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
            (
                "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "nonce",
            ),
            ("r=rOprNGfwEbeRWgbNEkqOx,i=4096", "salt"),
            ("r=rOprNGfwEbeRWgbNEkqOx,s=!!!,i=4096", "salt"),
            (
                "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==",
                "iteration",
            ),
            (
                "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024",
                "minimum",
            ),
            (
                "m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "extension",
            ),
            // Four billion PBKDF2 rounds would hold the thread for hours: refused at once.
            (
                "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4294967295",
                "maximum",
            ),
        ];
        for (server_first, what) in cases {
            match scram.client_final("pencil", server_first.as_bytes()) {
                Err(ScramError::Malformed(why)) => {
                    assert!(why.contains(what), "{server_first}: {why}")
                }
                Err(e) => panic!("{server_first}: {e:?}"),
                Ok(_) => panic!("{server_first}: accepted"),
            }
        }
        assert!(matches!(
            scram.client_final("pencil", b"e=unknown-user"),
            Err(ScramError::Rejected(e)) if e == "unknown-user"
        ));
    }

    #[test]
    fn a_refused_client_certificate_is_a_config_error_wherever_it_is_read() {
        let refused = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(AlertDescription::CertificateRequired),
        );
        match super::super::net::conn::io_error("127.0.0.1:9093", "reading from", &refused) {
            NetError::Stop(e) => {
                assert_eq!(e.kind(), ErrorKind::Config, "{e}");
                assert!(e.message().contains("ssl.certificate.location"), "{e}");
            }
            NetError::Io(why) => panic!("{why}"),
        }
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        match super::super::net::conn::io_error("127.0.0.1:9093", "reading from", &reset) {
            NetError::Io(why) => assert!(why.starts_with("reading from 127.0.0.1:9093"), "{why}"),
            NetError::Stop(e) => panic!("{e}"),
        }
    }

    #[test]
    fn nonces_are_fresh_and_printable() {
        let a = nonce().expect("nonce");
        let b = nonce().expect("nonce");
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes().all(|c| (0x21..=0x7e).contains(&c) && c != b','),
            "{a}"
        );
    }

    fn config(props: &[(&str, &str)]) -> KafkaConfig {
        props
            .iter()
            .fold(KafkaConfig::new("127.0.0.1:9093", 1), |c, (k, v)| {
                c.with_property(*k, *v)
            })
    }

    fn config_error(props: &[(&str, &str)]) -> String {
        let e = Security::from_config(&config(props)).expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        e.message().to_owned()
    }

    /// SASL PLAIN over a plaintext connection is warned about (the password goes in clear),
    /// without the password; SCRAM, or PLAIN inside TLS, is not.
    #[cfg(feature = "tracing")]
    #[test]
    fn plain_over_a_plaintext_connection_is_warned_about() {
        use std::sync::Mutex;
        use tracing::span::{Attributes, Id, Record};

        /// A subscriber that keeps each event as `LEVEL field=value ...`.
        struct Capture(Arc<Mutex<Vec<String>>>);
        struct Line<'a>(&'a mut String);
        impl tracing::field::Visit for Line<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        impl tracing::Subscriber for Capture {
            fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &Attributes<'_>) -> Id {
                Id::from_u64(1)
            }
            fn record(&self, _: &Id, _: &Record<'_>) {}
            fn record_follows_from(&self, _: &Id, _: &Id) {}
            fn event(&self, event: &tracing::Event<'_>) {
                let mut line = format!("{} ", event.metadata().level());
                event.record(&mut Line(&mut line));
                self.0.lock().expect("not poisoned").push(line);
            }
            fn enter(&self, _: &Id) {}
            fn exit(&self, _: &Id) {}
        }
        let logged = |props: &[(&str, &str)]| {
            let lines = Arc::new(Mutex::new(Vec::new()));
            let config = config(props);
            tracing::subscriber::with_default(Capture(Arc::clone(&lines)), || {
                Security::from_config(&config).expect("valid settings");
            });
            let lines = lines.lock().expect("not poisoned").clone();
            (lines, config.cleartext_password_warning())
        };
        let user = ("sasl.username", "alice");
        let password = ("sasl.password", "pw-in-clear-51");
        let (lines, warning) = logged(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "plain"),
            user,
            password,
        ]);
        assert!(warning.is_some_and(|w| w.contains("in clear")));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("WARN") && lines[0].contains("sends the password in clear"),
            "{lines:?}"
        );
        assert!(!lines[0].contains("pw-in-clear-51"), "{lines:?}");
        for quiet in [
            vec![
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "SCRAM-SHA-256"),
                user,
                password,
            ],
            vec![
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "PLAIN"),
                ("ssl.ca.pem", TEST_CA),
                user,
                password,
            ],
        ] {
            let (lines, warning) = logged(&quiet);
            assert!(
                lines.is_empty() && warning.is_none(),
                "{quiet:?}: {lines:?}"
            );
        }
    }

    /// An empty scratch directory of this test process.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("kc-security-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn plaintext_needs_nothing_and_ignores_other_settings() {
        let s = Security::from_config(&config(&[("sasl.mechanism", "GSSAPI")])).expect("plain");
        assert_eq!(s.protocol(), Protocol::Plaintext);
        assert_eq!(Security::plaintext().protocol(), Protocol::Plaintext);
        let s = Security::from_config(&config(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
            ("ssl.ca.location", "/nonexistent"),
        ]))
        .expect("SSL settings are ignored without TLS");
        assert_eq!(s.protocol(), Protocol::SaslPlaintext);
        let m = config_error(&[("security.protocol", "TLS")]);
        assert!(m.contains("security.protocol=tls"), "{m}");
    }

    #[test]
    fn sasl_settings_are_checked_when_the_client_is_built() {
        let sasl = ("security.protocol", "sasl_plaintext");
        let m = config_error(&[sasl]);
        assert!(
            m.contains("needs sasl.mechanism") && m.contains("GSSAPI"),
            "{m}"
        );
        let m = config_error(&[sasl, ("sasl.mechanism", "GSSAPI")]);
        assert!(
            m.contains("sasl.mechanism=GSSAPI (Kerberos) is not supported")
                && m.contains("no Kerberos implementation"),
            "{m}"
        );
        let m = config_error(&[sasl, ("sasl.mechanisms", "SCRAM-SHA-1")]);
        assert!(m.contains("sasl.mechanisms=SCRAM-SHA-1"), "{m}");
        let m = config_error(&[sasl, ("sasl.mechanism", "PLAIN")]);
        assert!(m.contains("needs sasl.username"), "{m}");
        let m = config_error(&[
            sasl,
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
        ]);
        assert!(
            m.contains("needs sasl.password") && m.contains("'alice'"),
            "{m}"
        );
        // The alias set last wins, as in librdkafka.
        let s = Security::from_config(&config(&[
            sasl,
            ("sasl.mechanism", "GSSAPI"),
            ("sasl.mechanisms", "scram-sha-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "secret-pw"),
        ]))
        .expect("valid");
        let shown = format!("{s:?}");
        assert!(
            shown.contains("ScramSha512") && shown.contains("alice"),
            "{shown}"
        );
        assert!(
            !shown.contains("secret-pw"),
            "the password is never shown: {shown}"
        );
    }

    const JWT: &str = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.";

    fn in_a_minute() -> SystemTime {
        SystemTime::now() + Duration::from_secs(60)
    }

    fn oauth_config() -> KafkaConfig {
        config(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "oauthbearer"),
            ("ssl.ca.pem", TEST_CA),
        ])
    }

    #[test]
    fn oauthbearer_needs_a_token_provider_and_nothing_else() {
        let m = config_error(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "OAUTHBEARER"),
        ]);
        assert!(
            m.contains("needs a token provider") && m.contains("KafkaConfig::with_token_provider"),
            "{m}"
        );
        let e = Security::from_config(
            &oauth_config()
                .with_property("sasl.oauthbearer.method", "oidc")
                .with_token_provider(|| Ok(OAuthToken::new(JWT, in_a_minute()))),
        )
        .expect_err("oidc");
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(
            e.message().contains("sasl.oauthbearer.method=oidc")
                && e.message().contains("with_token_provider"),
            "{e}"
        );
        // No user name or password: the token is the credential. The provider is not called
        // before a connection needs a token.
        let called = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::clone(&called);
        let s = Security::from_config(&oauth_config().with_token_provider(move || {
            seen.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(OAuthToken::new(JWT, in_a_minute()))
        }))
        .expect("valid");
        assert_eq!(s.protocol(), Protocol::SaslSsl);
        assert!(!called.load(std::sync::atomic::Ordering::SeqCst));
        let shown = format!("{s:?}");
        assert!(
            shown.contains("OAuthBearer") && !shown.contains("eyJ"),
            "{shown}"
        );
    }

    /// A broker in memory that replays `answers` and keeps what the client wrote.
    struct Scripted {
        answers: io::Cursor<Vec<u8>>,
        written: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl io::Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.answers.read(buf)
        }
    }

    impl io::Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.lock().expect("written").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Stream for Scripted {
        fn set_timeouts(&mut self, _: Duration) -> io::Result<()> {
            Ok(())
        }
    }

    /// The frame of response `resp` to request `R` at `version` with correlation id `id`.
    fn answer<R: kafka_protocol::protocol::Request>(
        resp: &R::Response,
        version: i16,
        id: i32,
    ) -> Vec<u8> {
        use kafka_protocol::messages::ResponseHeader;
        use kafka_protocol::protocol::{Encodable, HeaderVersion};
        let mut b = bytes::BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(id)
            .encode(
                &mut b,
                <R::Response as HeaderVersion>::header_version(version),
            )
            .expect("header");
        resp.encode(&mut b, version).expect("body");
        let mut frame = (b.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&b);
        frame
    }

    /// The SaslAuthenticate requests (v2) the client wrote: their auth bytes.
    fn auth_bytes_sent(written: &[u8]) -> Vec<Vec<u8>> {
        use kafka_protocol::messages::RequestHeader;
        use kafka_protocol::protocol::{Decodable, HeaderVersion};
        let mut out = Vec::new();
        let mut rest = written;
        while rest.len() >= 4 {
            let len = i32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
            let mut frame = Bytes::copy_from_slice(&rest[4..4 + len]);
            rest = &rest[4 + len..];
            let key = i16::from_be_bytes([frame[0], frame[1]]);
            if key != 36 {
                continue;
            }
            RequestHeader::decode(&mut frame, SaslAuthenticateRequest::header_version(2))
                .expect("header");
            let req = SaslAuthenticateRequest::decode(&mut frame, 2).expect("request");
            out.push(req.auth_bytes.to_vec());
        }
        out
    }

    /// OAUTHBEARER over a scripted broker: the handshake's answer, then `auth` (the answers to
    /// the SaslAuthenticate requests). Returns the outcome, the auth bytes sent, and the
    /// connection.
    fn bearer_exchange(
        token: OAuthToken,
        auth: &[SaslAuthenticateResponse],
    ) -> (Result<(), NetError>, Vec<Vec<u8>>, Conn) {
        let mut answers = answer::<SaslHandshakeRequest>(
            &SaslHandshakeResponse::default()
                .with_mechanisms(vec![StrBytes::from_static_str("OAUTHBEARER")]),
            1,
            1,
        );
        for (i, resp) in auth.iter().enumerate() {
            answers.extend(answer::<SaslAuthenticateRequest>(resp, 2, i as i32 + 2));
        }
        let written = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stream = Scripted {
            answers: io::Cursor::new(answers),
            written: Arc::clone(&written),
        };
        let mut conn =
            Conn::over("broker:9093", Box::new(stream)).with_versions(&[(17, 1), (36, 2)]);
        let s =
            Security::from_config(&oauth_config().with_token_provider(move || Ok(token.clone())))
                .expect("valid");
        let deadline = Instant::now() + Duration::from_secs(5);
        let result = s.authenticate(&mut conn, deadline);
        let sent = auth_bytes_sent(&written.lock().expect("written"));
        (result, sent, conn)
    }

    #[test]
    fn oauthbearer_sends_the_token_and_keeps_the_session_lifetime() {
        let token = OAuthToken::new(JWT, in_a_minute()).with_extension("logicalCluster", "lkc-9");
        let ok = SaslAuthenticateResponse::default().with_session_lifetime_ms(10_000);
        let (result, sent, conn) = bearer_exchange(token, &[ok]);
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(
            sent,
            [format!("n,,\x01auth=Bearer {JWT}\x01logicalCluster=lkc-9\x01\x01").into_bytes()]
        );
        let now = Instant::now();
        assert_eq!(conn.session_due(now), SessionDue::No);
        assert_eq!(
            conn.session_due(now + Duration::from_millis(8_600)),
            SessionDue::Reauthenticate
        );
        assert_eq!(
            conn.session_due(now + Duration::from_millis(9_600)),
            SessionDue::Reopen
        );
        // No lifetime announced: no session limit.
        let (result, _, conn) = bearer_exchange(
            OAuthToken::new(JWT, in_a_minute()),
            &[SaslAuthenticateResponse::default()],
        );
        assert!(result.is_ok());
        assert_eq!(
            conn.session_due(now + Duration::from_secs(3600)),
            SessionDue::No
        );
    }

    /// RFC 7628 section 3.2.2: the broker's error (JSON) is acknowledged with a single %x01;
    /// the error names the mechanism, the broker's status and message, never the token.
    #[test]
    fn a_refused_token_is_acknowledged_and_reported_without_the_token() {
        let token = OAuthToken::new(JWT, in_a_minute()).with_principal("svc-leader");
        let challenge = SaslAuthenticateResponse::default()
            .with_auth_bytes(Bytes::from_static(br#"{"status":"invalid_token"}"#));
        let refusal = SaslAuthenticateResponse::default()
            .with_error_code(E::SaslAuthenticationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Authentication failed during authentication due to invalid credentials with                  SASL mechanism OAUTHBEARER",
            )));
        let (result, sent, _) = bearer_exchange(token, &[challenge, refusal]);
        assert_eq!(
            sent.len(),
            2,
            "the initial response, then the acknowledgement"
        );
        assert_eq!(sent[1], b"\x01");
        let e = match result {
            Err(NetError::Stop(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
        let m = e.message();
        assert!(
            m.contains("mechanism OAUTHBEARER")
                && m.contains("broker:9093")
                && m.contains("invalid_token")
                && m.contains("principal 'svc-leader'")
                && m.contains("due to invalid credentials"),
            "{m}"
        );
        assert!(!m.contains("eyJ"), "the token is never shown: {m}");

        // A broker that refuses at once (no error JSON) is reported the same way.
        let refusal = SaslAuthenticateResponse::default()
            .with_error_code(E::SaslAuthenticationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str("invalid token")));
        let (result, sent, _) = bearer_exchange(OAuthToken::new(JWT, in_a_minute()), &[refusal]);
        assert_eq!(sent.len(), 1);
        match result {
            Err(NetError::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unauthorized);
                assert!(
                    e.message().contains("OAUTHBEARER") && e.message().contains("invalid token")
                );
                assert!(!e.message().contains("eyJ"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_token_provider_that_fails_is_a_retriable_error_of_the_connection() {
        let s = Security::from_config(
            &oauth_config().with_token_provider(|| Err("the identity provider is down".into())),
        )
        .expect("valid");
        let mut conn = Conn::over(
            "broker:9093",
            Box::new(Scripted {
                answers: io::Cursor::new(answer::<SaslHandshakeRequest>(
                    &SaslHandshakeResponse::default(),
                    1,
                    1,
                )),
                written: Arc::default(),
            }),
        )
        .with_versions(&[(17, 1), (36, 2)]);
        let deadline = Instant::now() + Duration::from_secs(5);
        match s.authenticate(&mut conn, deadline) {
            Err(NetError::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Retriable, "{e}");
                assert!(
                    e.message().contains("OAUTHBEARER")
                        && e.message().contains("the identity provider is down"),
                    "{e}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tls_files_are_read_when_the_client_is_built() {
        let ssl = ("security.protocol", "SSL");
        let m = config_error(&[ssl, ("ssl.ca.location", "/nonexistent/ca.pem")]);
        assert!(
            m.contains("ssl.ca.location=/nonexistent/ca.pem cannot be read"),
            "{m}"
        );
        let dir = scratch("tls");
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello").expect("write");
        let not_pem = not_pem.to_str().expect("utf-8 path");
        let m = config_error(&[ssl, ("ssl.ca.location", not_pem)]);
        assert!(m.contains("holds no PEM certificate"), "{m}");
        let bad_pem = dir.join("bad.pem");
        std::fs::write(
            &bad_pem,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let bad_pem = bad_pem.to_str().expect("utf-8 path");
        let m = config_error(&[ssl, ("ssl.ca.location", bad_pem)]);
        assert!(
            m.contains("ssl.ca.location=") && m.contains("not valid PEM"),
            "{m}"
        );
        let m = config_error(&[ssl, ("ssl.endpoint.identification.algorithm", "dns")]);
        assert!(
            m.contains("ssl.endpoint.identification.algorithm=dns"),
            "{m}"
        );
        let m = config_error(&[ssl, ("enable.ssl.certificate.verification", "false")]);
        assert!(m.contains("always verifies"), "{m}");
        let m = config_error(&[ssl, ("ssl.keystore.location", "/x/ks.p12")]);
        assert!(
            m.contains("PKCS#12") && m.contains("ssl.certificate.location"),
            "{m}"
        );
        let m = config_error(&[ssl, ("ssl.ca.pem", "junk")]);
        assert!(m.contains("ssl.ca.pem holds no PEM certificate"), "{m}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_client_certificate_needs_its_key() {
        let ssl = ("security.protocol", "SSL");
        // Checked before the CA would be (an unreadable certificate is named).
        let m = config_error(&[
            ssl,
            ("ssl.ca.pem", TEST_CA),
            ("ssl.certificate.location", "/nonexistent/client.pem"),
        ]);
        assert!(
            m.contains("ssl.certificate.location=/nonexistent/client.pem"),
            "{m}"
        );
        let m = config_error(&[
            ssl,
            ("ssl.ca.pem", TEST_CA),
            ("ssl.certificate.pem", TEST_CA),
        ]);
        assert!(m.contains("ssl.key.location is not"), "{m}");
        let m = config_error(&[
            ssl,
            ("ssl.ca.pem", TEST_CA),
            ("ssl.certificate.pem", TEST_CA),
            ("ssl.key.pem", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"),
        ]);
        assert!(m.contains("encrypted private key"), "{m}");
        let s = Security::from_config(&config(&[ssl, ("ssl.ca.pem", TEST_CA)])).expect("valid CA");
        assert_eq!(s.protocol(), Protocol::Ssl);
    }

    /// A self-signed CA certificate (openssl req -x509 -newkey ec -pkeyopt
    /// ec_paramgen_curve:P-256 -subj /CN=test-ca -days 36500 -nodes); its key is not kept.
    pub(super) const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBezCCASGgAwIBAgIUP+mV95dERZht0iX2x98H986mzZIwCgYIKoZIzj0EAwIw
EjEQMA4GA1UEAwwHdGVzdC1jYTAgFw0yNjEyMDEwMzE1NDJaGA8yMTI2MTEwNzAz
MTU0MlowEjEQMA4GA1UEAwwHdGVzdC1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABO2MbwEsywFrbe4Q71MoSO8v2UJy35p5CDpNRhop4VUKXlPRe4CyR6B2bhlJ
J1Nchi3/Uf5cPeJnYV9IxeK/NFSjUzBRMB0GA1UdDgQWBBTK50F8h6lsDrmrHywD
reT75StWtzAfBgNVHSMEGDAWgBTK50F8h6lsDrmrHywDreT75StWtzAPBgNVHRMB
Af8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIQDa3YKQ9pDMOxN9fK5oKNU3aK7a
bBbV+Fh/CNSlZFMUhQIgSPNyPr/kzsww6upAdL3TGxaNQxDuqWfRHjHRutqM0vA=
-----END CERTIFICATE-----
";
}

/// Against the secured listeners of the test broker (scripts/kafka/start.sh exports their
/// addresses and credentials); skipped, loudly, without them.
#[cfg(test)]
mod live {
    use std::io::Write as _;

    use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest};

    use super::*;
    use crate::ErrorKind;

    fn env(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    /// The SASL_SSL listener's first address, the CA, and a user's credentials.
    struct Broker {
        sasl_ssl: String,
        ssl: Option<String>,
        ca: String,
        user: String,
        password: String,
        limited_user: String,
        limited_password: String,
    }

    fn broker() -> Option<Broker> {
        let found = (|| {
            Some(Broker {
                sasl_ssl: env("KAFKA_SASL_SSL_BOOTSTRAP")?
                    .split(',')
                    .next()?
                    .to_owned(),
                ssl: env("KAFKA_SSL_BOOTSTRAP")
                    .and_then(|b| b.split(',').next().map(str::to_owned)),
                ca: env("KAFKA_SSL_CA")?,
                user: env("KAFKA_SCRAM_USER")?,
                password: env("KAFKA_SCRAM_PASSWORD")?,
                limited_user: env("KAFKA_SCRAM_LIMITED_USER")?,
                limited_password: env("KAFKA_SCRAM_LIMITED_PASSWORD")?,
            })
        })();
        if found.is_none() {
            static LOUD: std::sync::Once = std::sync::Once::new();
            LOUD.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "\n*** SKIPPED: KAFKA_SASL_SSL_BOOTSTRAP (and the KAFKA_SSL_CA, KAFKA_SCRAM_* \
                     variables) are not set, so the security module's live tests ran against \
                     nothing. Run: scripts/kafka/with-broker.sh cargo test -p kafka-coordination \
                     --features kafka --lib kafka::security ***\n"
                );
            });
        }
        found
    }

    fn sasl_ssl(b: &Broker, mechanism: &str, user: &str, password: &str) -> KafkaConfig {
        KafkaConfig::new(b.sasl_ssl.clone(), 1)
            .with_property("security.protocol", "SASL_SSL")
            .with_property("sasl.mechanism", mechanism)
            .with_property("sasl.username", user)
            .with_property("sasl.password", password)
            .with_property("ssl.ca.location", b.ca.clone())
    }

    fn open(config: &KafkaConfig, addr: &str) -> Result<Conn, NetError> {
        let security = Security::from_config(config).expect("valid settings");
        let deadline = Instant::now() + Duration::from_secs(20);
        security.open(
            addr,
            &StrBytes::from_static_str("kc-security-test"),
            Arc::default(),
            deadline,
            |_| Ok(()),
        )
    }

    /// A Metadata request on an open connection: the authenticated channel carries requests.
    fn metadata_brokers(conn: &mut Conn) -> Vec<String> {
        let version = conn
            .version_at_most::<MetadataRequest>(12)
            .expect("Metadata");
        let req = MetadataRequest::default().with_topics(Some(Vec::new()));
        let deadline = Instant::now() + Duration::from_secs(20);
        let resp = conn.call(&req, version, deadline).expect("metadata");
        resp.brokers
            .iter()
            .map(|b| format!("{}:{}", b.host, b.port))
            .collect()
    }

    fn show(e: NetError) -> String {
        match e {
            NetError::Io(why) => format!("I/O: {why}"),
            NetError::Stop(e) => e.to_string(),
        }
    }

    fn stop_error(r: Result<Conn, NetError>) -> TransportError {
        match r {
            Ok(_) => panic!("the connection was accepted"),
            Err(NetError::Stop(e)) => e,
            Err(NetError::Io(why)) => panic!("a retriable failure instead of a clear error: {why}"),
        }
    }

    #[test]
    fn every_mechanism_authenticates_over_tls() {
        let Some(b) = broker() else { return };
        for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"] {
            let config = sasl_ssl(&b, mechanism, &b.user, &b.password);
            let mut conn =
                open(&config, &b.sasl_ssl).unwrap_or_else(|e| panic!("{mechanism}: {}", show(e)));
            let brokers = metadata_brokers(&mut conn);
            assert!(brokers.contains(&b.sasl_ssl), "{mechanism}: {brokers:?}");
        }
    }

    #[test]
    fn a_wrong_password_is_unauthorized_and_names_user_and_mechanism() {
        let Some(b) = broker() else { return };
        for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"] {
            let wrong = format!("{}-wrong", b.password);
            let config = sasl_ssl(&b, mechanism, &b.user, &wrong);
            let e = stop_error(open(&config, &b.sasl_ssl));
            assert_eq!(e.kind(), ErrorKind::Unauthorized, "{mechanism}: {e}");
            let m = e.message();
            assert!(
                m.contains(mechanism) && m.contains(&format!("'{}'", b.user)),
                "{m}"
            );
            assert!(!m.contains(&wrong), "the password must not be shown: {m}");
        }
        // An unknown user too.
        let config = sasl_ssl(&b, "SCRAM-SHA-256", "nobody", "x");
        let e = stop_error(open(&config, &b.sasl_ssl));
        assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
        assert!(e.message().contains("'nobody'"), "{e}");
    }

    #[test]
    fn a_broker_signed_by_another_ca_is_a_config_error_naming_the_ca() {
        let Some(b) = broker() else { return };
        for algorithm in ["https", "none"] {
            let config = sasl_ssl(&b, "SCRAM-SHA-256", &b.user, &b.password)
                .with_property("ssl.ca.location", "")
                .with_property("ssl.ca.pem", super::tests::TEST_CA)
                .with_property("ssl.endpoint.identification.algorithm", algorithm);
            let e = stop_error(open(&config, &b.sasl_ssl));
            assert_eq!(e.kind(), ErrorKind::Config, "{e}");
            let m = e.message();
            assert!(
                m.contains("ssl.ca") && m.contains("not signed by a trusted CA"),
                "{m}"
            );
            assert!(m.contains("'127.0.0.1'"), "{m}");
        }
    }

    #[test]
    fn the_host_name_is_checked_unless_disabled() {
        let Some(b) = broker() else { return };
        // The broker's certificate names 127.0.0.1 and localhost, not broker.example: the TCP
        // connection goes to the broker, TLS is told to expect broker.example.
        let port = b.sasl_ssl.rsplit_once(':').map(|(_, p)| p).expect("port");
        let elsewhere = format!("broker.example:{port}");
        let handshake = |algorithm: &str| {
            let config = sasl_ssl(&b, "SCRAM-SHA-256", &b.user, &b.password)
                .with_property("ssl.endpoint.identification.algorithm", algorithm);
            let tls = Tls::from_config(&config).expect("tls");
            let tcp = TcpStream::connect(&b.sasl_ssl).expect("tcp");
            let deadline = Instant::now() + Duration::from_secs(20);
            tls.connect(&elsewhere, tcp, deadline).map(|_| ())
        };
        let e = match handshake("https") {
            Ok(()) => panic!("a certificate for another host was accepted"),
            Err(NetError::Stop(e)) => e,
            Err(NetError::Io(why)) => panic!("{why}"),
        };
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert!(
            e.message().contains("not valid for host 'broker.example'")
                && e.message()
                    .contains("ssl.endpoint.identification.algorithm=none"),
            "{e}"
        );
        handshake("none").unwrap_or_else(|e| panic!("the chain is valid: {}", show(e)));
        handshake("NONE").unwrap_or_else(|e| panic!("case-insensitive: {}", show(e)));
    }

    #[test]
    fn tls_to_a_plaintext_listener_says_so() {
        let Some(b) = broker() else { return };
        let Some(plain) =
            env("KAFKA_BOOTSTRAP").and_then(|p| p.split(',').next().map(str::to_owned))
        else {
            return;
        };
        let config = sasl_ssl(&b, "SCRAM-SHA-256", &b.user, &b.password);
        match open(&config, &plain) {
            Ok(_) => panic!("TLS to a plaintext listener succeeded"),
            Err(NetError::Io(why)) => assert!(why.contains("is it a TLS listener"), "{why}"),
            Err(NetError::Stop(e)) => {
                assert!(e.message().contains("does not speak TLS"), "{e}")
            }
        }
    }

    #[test]
    fn mutual_tls_with_a_client_certificate() {
        let Some(b) = broker() else { return };
        let (Some(ssl), Some(cert), Some(key)) = (
            b.ssl.clone(),
            env("KAFKA_SSL_CLIENT_CERT"),
            env("KAFKA_SSL_CLIENT_KEY"),
        ) else {
            let _ = writeln!(std::io::stderr(), "*** SKIPPED: no KAFKA_SSL_BOOTSTRAP ***");
            return;
        };
        let config = KafkaConfig::new(ssl.clone(), 1)
            .with_property("security.protocol", "SSL")
            .with_property("ssl.ca.location", b.ca.clone())
            .with_property("ssl.certificate.location", cert)
            .with_property("ssl.key.location", key);
        let mut conn = open(&config, &ssl).unwrap_or_else(|e| panic!("{}", show(e)));
        assert!(metadata_brokers(&mut conn).contains(&ssl));
        // Without the certificate the broker refuses the connection: never a success.
        let config = KafkaConfig::new(ssl.clone(), 1)
            .with_property("security.protocol", "SSL")
            .with_property("ssl.ca.location", b.ca.clone());
        match open(&config, &ssl) {
            Ok(_) => panic!("accepted without a client certificate"),
            Err(NetError::Stop(e)) => {
                assert_eq!(e.kind(), ErrorKind::Config, "{e}");
                assert!(e.message().contains("ssl.certificate.location"), "{e}");
            }
            // TLS 1.3: the refusal arrives with the first answer, read by net.rs.
            Err(NetError::Io(why)) => {
                let _ = writeln!(std::io::stderr(), "without a client certificate: {why}");
            }
        }
    }

    #[test]
    fn a_user_without_acls_cannot_find_a_transaction_coordinator() {
        let Some(b) = broker() else { return };
        let config = sasl_ssl(&b, "SCRAM-SHA-512", &b.limited_user, &b.limited_password);
        let mut conn = open(&config, &b.sasl_ssl).unwrap_or_else(|e| panic!("{}", show(e)));
        let version = conn
            .version::<FindCoordinatorRequest>()
            .expect("FindCoordinator");
        assert!(version >= 4, "Kafka 4.x speaks FindCoordinator v4+");
        let req = FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![StrBytes::from_static_str("kc-security-role")]);
        let deadline = Instant::now() + Duration::from_secs(20);
        let resp = conn.call(&req, version, deadline).expect("answer");
        let codes: Vec<i16> = resp.coordinators.iter().map(|c| c.error_code).collect();
        assert_eq!(codes, [53], "TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
    }
}
