//! SASL, after version negotiation: SaslHandshake v1, then SaslAuthenticate (KIP-152).
//! SCRAM follows RFC 5802 and RFC 7677 and checks the broker's server signature, so a broker
//! that does not know the user's credentials is not accepted either; OAUTHBEARER follows
//! RFC 7628 (see `oauth.rs`). When the broker limits a session (`connections.max.reauth.ms`,
//! or a token's expiry: KIP-368), a connection authenticates again before its next request
//! once 85% of the session has passed, and one left idle past 95% is replaced (see
//! `net/conn.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::messages::SaslAuthenticateRequest;
use ring::rand::{SecureRandom, SystemRandom};

use super::mechanism::Mechanism;
use super::props::{config_err, prop};
use super::scram::{Scram, ScramError};
use crate::api::sasl_authenticate::{refused, SaslAuthenticate, MAX_VERSION};
use crate::api::sasl_handshake::SaslHandshake;
use crate::api::Exchange;
use crate::config::KafkaConfig;
use crate::net::conn::{Conn, NetError};
use crate::oauth::TokenCache;
use kafka_coordination_transport::error::TransportError;

/// A password, never printed.
#[derive(Clone)]
pub(super) struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Clone, Debug)]
pub(super) struct Sasl {
    mechanism: Mechanism,
    credentials: Credentials,
}

/// What a SASL mechanism authenticates with.
#[derive(Clone, Debug)]
pub(super) enum Credentials {
    /// PLAIN and SCRAM.
    Password { username: String, password: Secret },
    /// OAUTHBEARER: the client's token, shared by its connections.
    Token(Arc<TokenCache>),
}

impl Sasl {
    pub(super) fn from_config(
        config: &KafkaConfig,
        protocol: &str,
    ) -> Result<Sasl, TransportError> {
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
    pub(super) fn authenticate(&self, conn: &mut Conn, deadline: Instant) -> Result<(), NetError> {
        let started = Instant::now();
        let addr = conn.addr().to_owned();
        let mechanism = self.mechanism;
        conn.exchange(
            &SaslHandshake {
                mechanism: mechanism.name(),
            },
            deadline,
        )?;
        let Some(version) = conn.version_at_most::<SaslAuthenticateRequest>(MAX_VERSION) else {
            return Err(self.round(Bytes::new()).unsupported(&addr).into());
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
        // The acknowledgement the mechanism asks for; the broker fails the exchange after it.
        let ack = self.round(Bytes::from_static(b"\x01")).request(version);
        let broker_says = match conn.call(&ack, version, deadline) {
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
        Err(NetError::Stop(filed(TransportError::unauthorized(
            format!(
            "SASL authentication with mechanism OAUTHBEARER failed at {}: the broker refused {} \
             ({expiry}): {status}{broker_says}; check what the token provider returns (issuer, \
             audience, scope, expiry and the principal claim) against the listener's OAUTHBEARER \
             validation settings",
            conn.addr(),
            token.who(),
        ),
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
        let round = self.round(Bytes::from(bytes));
        let answer = conn.call(&round.request(version), version, deadline)?;
        Ok(round.answer(answer, version, conn.addr())?)
    }

    /// A SaslAuthenticate round of this mechanism and user, carrying `bytes`.
    fn round(&self, bytes: Bytes) -> SaslAuthenticate<'_> {
        SaslAuthenticate {
            mechanism: self.mechanism.name(),
            user: match &self.credentials {
                Credentials::Password { username, .. } => Some(username),
                Credentials::Token(_) => None,
            },
            bytes,
        }
    }

    fn failed(&self, addr: &str, why: &str) -> TransportError {
        let round = self.round(Bytes::new());
        refused(round.mechanism, round.user, addr, why)
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
            ScramError::BadServerSignature => filed(TransportError::unauthorized(format!(
                "SASL {} as user '{}' at {addr}: the broker's SCRAM server signature is wrong, \
                 so it does not know this user's credentials: it is not the cluster that was \
                 configured, or the credentials changed",
                self.mechanism,
                self.username()
            ))),
        })
    }
}

/// `e`, filed under the troubleshooting page's section on SASL failures.
fn filed(e: TransportError) -> TransportError {
    e.in_section(kafka_coordination_transport::error::section::SASL)
}

/// A broker's text for a message: printable ASCII kept, anything else escaped (no terminal
/// escapes reach a log), at most 300 characters.
pub(super) fn shown(bytes: &[u8]) -> String {
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
pub(super) fn nonce() -> Result<String, NetError> {
    let mut bytes = [0u8; 24];
    SystemRandom::new().fill(&mut bytes).map_err(|_| {
        NetError::Stop(TransportError::fatal(
            "the system's random number generator failed (SCRAM nonce)",
        ))
    })?;
    Ok(BASE64.encode(bytes))
}
