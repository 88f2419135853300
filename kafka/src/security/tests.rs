use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use kafka_protocol::error::ResponseError as E;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use rustls::AlertDescription;

use super::mechanism::Mechanism;
use super::sasl::nonce;
use super::scram::{Scram, ScramError};
use super::*;
use crate::config::KafkaConfig;
use crate::net::conn::{Conn, NetError, SessionDue, Stream};
use crate::OAuthToken;
use kafka_coordination_transport::error::ErrorKind;

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

/// What `f` logs on this thread, one `LEVEL field=value ...` line per event.
#[cfg(feature = "tracing")]
fn logged_while(f: impl FnOnce()) -> Vec<String> {
    use std::sync::Mutex;
    use tracing::span::{Attributes, Id, Record};

    /// A subscriber that keeps each event as `LEVEL field=value ...`.
    struct Capture(Arc<Mutex<Vec<String>>>);
    struct Line<'a>(&'a mut String);
    impl tracing::field::Visit for Line<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
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
    let lines = Arc::new(Mutex::new(Vec::new()));
    tracing::subscriber::with_default(Capture(Arc::clone(&lines)), f);
    let lines = lines.lock().expect("not poisoned").clone();
    lines
}

/// What building the security settings of `config` logs.
#[cfg(feature = "tracing")]
fn logged_building(config: &KafkaConfig) -> Vec<String> {
    logged_while(|| {
        Security::from_config(config).expect("valid settings");
    })
}

/// Properties the client does not read are logged as one warning that names them (never their
/// values) when the transport is built; settings it reads log no warning.
#[cfg(feature = "tracing")]
#[test]
fn properties_the_client_does_not_read_are_warned_about_by_name() {
    let warned = |config: KafkaConfig| -> Vec<String> {
        logged_while(|| drop(crate::KafkaTransport::new(config).expect("transport")))
            .into_iter()
            .filter(|l| l.starts_with("WARN"))
            .collect()
    };
    let lines = warned(config(&[
        ("client.rack", "eu-west-1a"),
        ("ssl.key.password", "kp-77"),
    ]));
    assert_eq!(lines.len(), 1, "one warning per transport: {lines:?}");
    assert!(
        lines[0].starts_with("WARN")
            && lines[0].contains("does not read these properties")
            && lines[0].contains("client.rack, ssl.key.password"),
        "{lines:?}"
    );
    assert!(!lines[0].contains("kp-77"), "{lines:?}");
    let read = warned(config(&[
        ("security.protocol", "SSL"),
        ("ssl.ca.pem", TEST_CA),
        ("ssl.endpoint.identification.algorithm", "none"),
    ]));
    assert!(read.is_empty(), "{read:?}");
}

/// SASL PLAIN over a plaintext connection is warned about (the password goes in clear),
/// without the password; SCRAM, or PLAIN inside TLS, is not.
#[cfg(feature = "tracing")]
#[test]
fn plain_over_a_plaintext_connection_is_warned_about() {
    let logged = |props: &[(&str, &str)]| {
        let config = config(props);
        (
            logged_building(&config),
            config.cleartext_password_warning(),
        )
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
    let mut conn = Conn::over("broker:9093", Box::new(stream)).with_versions(&[(17, 1), (36, 2)]);
    let s = Security::from_config(&oauth_config().with_token_provider(move || Ok(token.clone())))
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
            assert!(e.message().contains("OAUTHBEARER") && e.message().contains("invalid token"));
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
        (
            "ssl.key.pem",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        ),
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
