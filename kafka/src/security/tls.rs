//! TLS over the native connections (rustls): trust anchors, CRLs, the client's identity,
//! and host name checks.

use std::fmt;
use std::io;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

use super::props::{config_err, prop, read_pem};
use crate::config::KafkaConfig;
use crate::net::conn::{NetError, Stream};
use crate::net::refusal::{refusal, rustls_error};
use kafka_coordination_transport::error::TransportError;

#[derive(Clone)]
pub(super) struct Tls {
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

impl Stream for StreamOwned<ClientConnection, TcpStream> {
    fn set_timeouts(&mut self, timeout: Duration) -> io::Result<()> {
        self.sock.set_timeouts(timeout)
    }
}

/// The host part of `host:port` (`[v6]:port` too).
pub(super) fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl Tls {
    pub(super) fn from_config(config: &KafkaConfig) -> Result<Tls, TransportError> {
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

    pub(super) fn connect(
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
pub(super) fn load_roots(config: &KafkaConfig) -> Result<(RootCertStore, String), TransportError> {
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
pub(super) fn add_roots(
    roots: &mut RootCertStore,
    what: &str,
    pem: &[u8],
) -> Result<(), TransportError> {
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

pub(super) fn system_roots(why: &str) -> Result<(RootCertStore, String), TransportError> {
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

pub(super) fn load_crls(
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

pub(super) type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String);

/// The client certificate chain and key for mutual TLS, if configured (both or neither).
pub(super) fn load_client_identity(
    config: &KafkaConfig,
) -> Result<Option<Identity>, TransportError> {
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
pub(super) struct ChainOnly(Arc<WebPkiServerVerifier>);

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
