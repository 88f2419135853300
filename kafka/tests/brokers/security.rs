//! The Kafka transport on secured listeners of a real broker: SASL_SSL with PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512, mutual TLS, authentication and authorization failures, and
//! an election whose every connection (librdkafka's and the native client's) is secured;
//! OAUTHBEARER with a token provider, and KIP-368 re-authentication (OAUTHBEARER, SCRAM, PLAIN)
//! on the listener at `KAFKA_OAUTH_BOOTSTRAP`, whose sessions last `KAFKA_OAUTH_REAUTH_MS`.
//!
//! `scripts/kafka/start.sh` starts a broker with these listeners and exports their addresses,
//! the CA and the users (`KAFKA_SASL_SSL_BOOTSTRAP`, `KAFKA_SSL_BOOTSTRAP`, `KAFKA_SSL_CA`,
//! `KAFKA_SSL_CLIENT_CERT`, `KAFKA_SSL_CLIENT_KEY`, `KAFKA_SCRAM_USER`, `KAFKA_SCRAM_PASSWORD`,
//! `KAFKA_SCRAM_LIMITED_USER`, `KAFKA_SCRAM_LIMITED_PASSWORD`); `scripts/kafka/with-broker.sh`
//! passes them on. Without them every test says so loudly and returns.

use kafka_coordination_test_support as support;

use support::{loud, transport_with, unique, PARTITIONS};

use std::time::Duration;

use kafka_coordination::blocking;
use kafka_coordination::describe::describe_leadership;
use kafka_coordination::error::ErrorKind;
use kafka_coordination::{Error, LeadershipStatus, Options, SystemClock};
use kafka_coordination_kafka::{KafkaConfig, KafkaTransport};

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(500);
const PROMPT: Duration = Duration::from_secs(20);

/// The secured listeners and the material to reach them.
struct Secured {
    sasl_ssl: String,
    ssl: String,
    ca: String,
    client_cert: String,
    client_key: String,
    user: String,
    password: String,
    limited_user: String,
    limited_password: String,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn secured() -> Option<Secured> {
    let found = (|| {
        Some(Secured {
            sasl_ssl: var("KAFKA_SASL_SSL_BOOTSTRAP")?,
            ssl: var("KAFKA_SSL_BOOTSTRAP")?,
            ca: var("KAFKA_SSL_CA")?,
            client_cert: var("KAFKA_SSL_CLIENT_CERT")?,
            client_key: var("KAFKA_SSL_CLIENT_KEY")?,
            user: var("KAFKA_SCRAM_USER")?,
            password: var("KAFKA_SCRAM_PASSWORD")?,
            limited_user: var("KAFKA_SCRAM_LIMITED_USER")?,
            limited_password: var("KAFKA_SCRAM_LIMITED_PASSWORD")?,
        })
    })();
    if found.is_none() {
        static LOUD: std::sync::Once = std::sync::Once::new();
        LOUD.call_once(|| {
            loud(
                "KAFKA_SASL_SSL_BOOTSTRAP (or another KAFKA_SSL_* / KAFKA_SCRAM_* variable) is \
                 not set, so the Kafka security tests ran against nothing. Run: \
                 scripts/kafka/with-broker.sh cargo test -p kafka-coordination-kafka --test brokers \
                 security::",
            )
        });
    }
    found
}

impl Secured {
    /// SASL_SSL as `user` with `mechanism`, trusting the test CA.
    fn sasl(&self, mechanism: &str, user: &str, password: &str) -> KafkaConfig {
        KafkaConfig::new(self.sasl_ssl.clone(), PARTITIONS)
            .with_property("security.protocol", "SASL_SSL")
            .with_property("sasl.mechanism", mechanism)
            .with_property("sasl.username", user)
            .with_property("sasl.password", password)
            .with_property("ssl.ca.location", self.ca.clone())
            .with_request_timeout(Duration::from_secs(10))
    }

    /// The super user (admin) with SCRAM-SHA-512.
    fn admin(&self) -> KafkaConfig {
        self.sasl("SCRAM-SHA-512", &self.user, &self.password)
    }

    /// Mutual TLS with the test client certificate.
    fn mtls(&self) -> KafkaConfig {
        KafkaConfig::new(self.ssl.clone(), PARTITIONS)
            .with_property("security.protocol", "SSL")
            .with_property("ssl.ca.location", self.ca.clone())
            .with_property("ssl.certificate.location", self.client_cert.clone())
            .with_property("ssl.key.location", self.client_key.clone())
    }
}

fn transport_error(
    r: Result<impl std::fmt::Debug, Error>,
) -> kafka_coordination::error::TransportError {
    match r {
        Err(Error::Transport(e)) => e,
        other => panic!("expected a transport error, got {other:?}"),
    }
}

// ---- (a) every mechanism ------------------------------------------------------------------------

#[test]
fn describe_works_over_sasl_ssl_with_every_mechanism() {
    let Some(s) = secured() else { return };
    let role = unique("sec-describe");
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"] {
        let t = KafkaTransport::new(s.sasl(mechanism, &s.user, &s.password)).expect("transport");
        let status = describe_leadership(&t, &role)
            .unwrap_or_else(|e| panic!("describe over SASL_SSL with {mechanism}: {e}"));
        assert_eq!(
            status,
            LeadershipStatus::NOT_FOUND,
            "{mechanism}: nobody ever took role {role}"
        );
    }
}

#[test]
fn describe_works_over_mutual_tls() {
    let Some(s) = secured() else { return };
    let t = KafkaTransport::new(s.mtls()).expect("transport");
    describe_leadership(&t, &unique("sec-mtls")).expect("describe over mutual TLS");
}

// ---- (b) authentication ---------------------------------------------------------------------

#[test]
fn a_wrong_password_is_unauthorized_and_names_the_user_and_mechanism() {
    let Some(s) = secured() else { return };
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"] {
        let wrong = format!("{}-wrong", s.password);
        let t = KafkaTransport::new(s.sasl(mechanism, &s.user, &wrong)).expect("transport");
        let e = transport_error(describe_leadership(&t, "sec-any-role"));
        eprintln!("{e}");
        assert_eq!(e.kind(), ErrorKind::Unauthorized, "{mechanism}: {e}");
        assert_eq!(e.troubleshooting_anchor(), "sasl-authentication-failures");
        let m = e.message();
        assert!(
            m.contains(mechanism) && m.contains(&format!("'{}'", s.user)),
            "{mechanism}: {m}"
        );
        assert!(!m.contains(&wrong), "the password must never be shown: {m}");
    }
}

// ---- (c) TLS configuration ------------------------------------------------------------------

#[test]
fn a_bad_ca_file_is_a_config_error_when_the_transport_is_built() {
    let Some(s) = secured() else { return };
    let missing = s
        .admin()
        .with_property("ssl.ca.location", "/nonexistent/ca.pem");
    let e = KafkaTransport::new(missing).expect_err("refused");
    eprintln!("{e}");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(
        e.message().contains("ssl.ca.location=/nonexistent/ca.pem"),
        "{e}"
    );

    // The client key is a PEM file, but not a certificate.
    let not_a_certificate = s
        .admin()
        .with_property("ssl.ca.location", s.client_key.clone());
    let e = KafkaTransport::new(not_a_certificate).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.message().contains("holds no PEM certificate"), "{e}");

    let half_identity = s.mtls().with_property("ssl.key.location", "");
    let e = KafkaTransport::new(half_identity).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.message().contains("ssl.key.location"), "{e}");

    let no_user = s.admin().with_property("sasl.username", "");
    let e = KafkaTransport::new(no_user).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.message().contains("sasl.username"), "{e}");
}

#[test]
fn a_broker_certificate_from_another_ca_is_a_config_error_naming_the_ca_and_host() {
    let Some(s) = secured() else { return };
    // The client certificate's CA is the test CA; a self-made CA file is another one.
    let dir = std::env::temp_dir().join(unique("kc-other-ca"));
    std::fs::create_dir_all(&dir).expect("dir");
    let other_ca = dir.join("other-ca.pem");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=another CA", "-keyout"])
        .arg(dir.join("other-ca.key"))
        .arg("-out")
        .arg(&other_ca)
        .output()
        .expect("openssl runs");
    assert!(made.status.success(), "{made:?}");
    let other = other_ca.to_str().expect("utf-8 path").to_owned();
    let t = KafkaTransport::new(s.admin().with_property("ssl.ca.location", other.clone()))
        .expect("a valid CA file");
    let e = transport_error(describe_leadership(&t, "sec-any-role"));
    eprintln!("{e}");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    let m = e.message();
    assert!(m.contains(&other) && m.contains("'127.0.0.1'"), "{m}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- (d) authorization ----------------------------------------------------------------------

#[test]
fn a_user_without_acls_is_told_which_acl_describe_needs() {
    let Some(s) = secured() else { return };
    let role = unique("sec-acl");
    let config = s.sasl("SCRAM-SHA-256", &s.limited_user, &s.limited_password);
    let t = KafkaTransport::new(config).expect("transport");
    let e = transport_error(describe_leadership(&t, &role));
    eprintln!("{e}");
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert!(
        e.message().contains("DESCRIBE ACL on TransactionalId")
            && e.message().contains(role.as_str()),
        "{e}"
    );
}

// ---- (e) an election ------------------------------------------------------------------------

fn options() -> Options {
    Options::new()
        .lease_duration(LEASE)
        .renew_interval(RENEW)
        .challenge_stagger(Duration::from_millis(300))
        .clock(SystemClock)
}

#[test]
fn an_election_and_a_hand_over_with_every_connection_secured() {
    let Some(s) = secured() else { return };
    let role = unique("sec-election");
    let a = blocking::start(transport_with(s.admin()), &role, "a", options()).expect("start");
    let a = match a.elected_blocking_timeout(PROMPT) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => panic!("the candidacy over SASL_SSL failed: {e}"),
        Err(c) => panic!("not elected within {PROMPT:?}: {:?}", c.snapshot()),
    };
    // A third party on another mechanism (and one on mutual TLS) sees the leader's pair.
    let observer =
        KafkaTransport::new(s.sasl("SCRAM-SHA-256", &s.user, &s.password)).expect("observer");
    let status = describe_leadership(&observer, &role).expect("describe");
    assert!(
        status.authoritative(&a.token()),
        "{status:?} vs {}",
        a.token()
    );
    let status = describe_leadership(&KafkaTransport::new(s.mtls()).expect("mtls"), &role)
        .expect("describe over mutual TLS");
    assert!(status.authoritative(&a.token()), "{status:?}");
    // A guarded write from the handle, over SASL_SSL, to a data topic.
    let data_topic = "kafka-coordination-secure-data";
    drop(transport_with(s.admin().with_topic(data_topic)));
    let record = |v: &'static [u8]| kafka_coordination::GuardedRecord {
        topic: data_topic,
        partition: 0,
        key: Some(b"k"),
        value: Some(v),
        headers: &[],
    };
    let offsets = a
        .guarded_write_blocking(&[record(b"from a")])
        .expect("the leader's guarded write over SASL_SSL");
    assert_eq!(offsets.len(), 1);

    // A standby on PLAIN takes over when the leader resigns.
    let b = blocking::start(
        transport_with(s.sasl("PLAIN", &s.user, &s.password)),
        &role,
        "b",
        options(),
    )
    .expect("start");
    assert!(a.resign_blocking().is_ok(), "a clean resign");
    let b = match b.elected_blocking_timeout(PROMPT) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => panic!("the standby over SASL_SSL failed: {e}"),
        Err(c) => panic!("b not elected within {PROMPT:?}: {:?}", c.snapshot()),
    };
    assert_ne!(b.token(), a.token());
    assert!(b.term() > a.term());
    let status = describe_leadership(&observer, &role).expect("describe");
    assert!(status.authoritative(&b.token()), "{status:?}");
    // The resigned leader's pair is fenced; the new one writes.
    assert!(!status.authoritative(&a.token()));
    match a.guarded_write_blocking(&[record(b"from the resigned a")]) {
        Err(Error::Fenced { token }) => assert_eq!(token, a.token()),
        other => panic!("expected Fenced, got {other:?}"),
    }
    b.guarded_write_blocking(&[record(b"from b")])
        .expect("the new leader's guarded write over SASL_SSL");
    assert!(b.resign_blocking().is_ok());
}

#[test]
fn a_candidate_without_acls_ends_with_an_authorization_error() {
    let Some(s) = secured() else { return };
    let role = unique("sec-denied");
    // The topic exists (made by the admin); the limited user may not touch it.
    drop(transport_with(s.admin()));
    let config = s.sasl("SCRAM-SHA-512", &s.limited_user, &s.limited_password);
    let t = KafkaTransport::new(config).expect("transport");
    let candidacy = blocking::start(t, &role, "m", options()).expect("start");
    match candidacy.elected_blocking_timeout(PROMPT) {
        Ok(Err(Error::Transport(e))) => {
            eprintln!("{e}");
            assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
            assert!(
                e.message().contains("ACL"),
                "the message names the ACL: {e}"
            );
        }
        Ok(Err(other)) => panic!("expected an authorization error, got {other}"),
        Ok(Ok(_)) => panic!("elected without any ACL"),
        Err(c) => panic!(
            "the candidacy neither ended nor was elected in {PROMPT:?}: {:?}",
            c.snapshot()
        ),
    }
}

// ---- (f) OAUTHBEARER ------------------------------------------------------------------------

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine as _;
use kafka_coordination_kafka::OAuthToken;

/// The OAUTHBEARER listener (Kafka's unsecured JWT validator) and its session limit.
struct OAuth {
    bootstrap: String,
    reauth: Duration,
    /// The super user the tokens name.
    principal: String,
}

fn oauth() -> Option<OAuth> {
    let found = (|| {
        Some(OAuth {
            bootstrap: var("KAFKA_OAUTH_BOOTSTRAP")?,
            reauth: Duration::from_millis(var("KAFKA_OAUTH_REAUTH_MS")?.parse().ok()?),
            principal: var("KAFKA_SCRAM_USER")?,
        })
    })();
    if found.is_none() {
        static LOUD: std::sync::Once = std::sync::Once::new();
        LOUD.call_once(|| {
            loud(
                "KAFKA_OAUTH_BOOTSTRAP (or KAFKA_OAUTH_REAUTH_MS, KAFKA_SCRAM_USER) is not set, \
                 so the OAUTHBEARER tests ran against nothing. Run: scripts/kafka/with-broker.sh \
                 cargo test -p kafka-coordination-kafka --test brokers security::oauth",
            )
        });
    }
    found
}

/// An unsecured JWT (RFC 7519 section 6: `alg` none, empty signature) for `sub`, issued now,
/// expiring at `exp`: what Kafka's default OAUTHBEARER validator accepts.
fn unsecured_jwt(sub: &str, exp: SystemTime) -> String {
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
    };
    let header = BASE64URL.encode(br#"{"alg":"none"}"#);
    let claims = BASE64URL.encode(format!(
        r#"{{"sub":"{sub}","iat":{},"exp":{}}}"#,
        secs(SystemTime::now()),
        secs(exp)
    ));
    format!("{header}.{claims}.")
}

impl OAuth {
    /// OAUTHBEARER over SASL_PLAINTEXT with `provider`. librdkafka's admin client (the topic
    /// check, until it runs on the native connections) does not take the provider: it signs
    /// its own unsecured JWT for the same principal (properties the native client ignores).
    fn config(
        &self,
        provider: impl kafka_coordination_kafka::TokenProvider + 'static,
    ) -> KafkaConfig {
        KafkaConfig::new(self.bootstrap.clone(), PARTITIONS)
            .with_property("security.protocol", "SASL_PLAINTEXT")
            .with_property("sasl.mechanism", "OAUTHBEARER")
            .with_property("enable.sasl.oauthbearer.unsecure.jwt", "true")
            .with_property(
                "sasl.oauthbearer.config",
                format!("principal={}", self.principal),
            )
            .with_request_timeout(Duration::from_secs(10))
            .with_token_provider(provider)
    }

    /// A provider of tokens for the super user that live `lifetime`, counting what it issued.
    fn issuer(
        &self,
        lifetime: Duration,
    ) -> (
        Arc<AtomicU32>,
        impl kafka_coordination_kafka::TokenProvider + 'static,
    ) {
        let issued = Arc::new(AtomicU32::new(0));
        let count = Arc::clone(&issued);
        let sub = self.principal.clone();
        let provider = move || {
            count.fetch_add(1, Ordering::SeqCst);
            let exp = SystemTime::now() + lifetime;
            Ok(OAuthToken::new(unsecured_jwt(&sub, exp), exp).with_principal(sub.clone()))
        };
        (issued, provider)
    }
}

#[test]
fn oauthbearer_describe_works_with_a_token_from_the_provider() {
    let Some(o) = oauth() else { return };
    let (issued, provider) = o.issuer(Duration::from_secs(300));
    let t = KafkaTransport::new(o.config(provider)).expect("transport");
    let role = unique("oauth-describe");
    let status = describe_leadership(&t, &role).expect("describe over OAUTHBEARER");
    assert_eq!(status, LeadershipStatus::NOT_FOUND);
    assert_eq!(
        issued.load(Ordering::SeqCst),
        1,
        "one token serves every connection"
    );
    // Idle past its session's end, the connection is not used again (the broker would close
    // it at the next request): a new one serves the next describe.
    std::thread::sleep(o.reauth);
    let status = describe_leadership(&t, &role).expect("describe after the session ended");
    assert_eq!(status, LeadershipStatus::NOT_FOUND);
    let (renewed, replaced) = t.sasl_reauthentications();
    assert_eq!((renewed, replaced), (0, 1), "re-authenticated, replaced");
}

#[test]
fn oauthbearer_an_expired_or_invalid_token_is_refused_with_a_clear_error() {
    let Some(o) = oauth() else { return };
    let role = unique("oauth-refused");
    // The JWT expired an hour ago although the provider claims otherwise: the broker refuses.
    let sub = o.principal.clone();
    let stale = move || {
        let jwt = unsecured_jwt(&sub, SystemTime::now() - Duration::from_secs(3600));
        Ok(OAuthToken::new(
            jwt,
            SystemTime::now() + Duration::from_secs(60),
        ))
    };
    let stale_jwt = unsecured_jwt(&o.principal, SystemTime::now() - Duration::from_secs(3600));
    let t = KafkaTransport::new(o.config(stale)).expect("transport");
    let e = transport_error(describe_leadership(&t, &role));
    eprintln!("{e}");
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    let m = e.message();
    assert!(
        m.contains("OAUTHBEARER") && m.contains("invalid_token"),
        "names the mechanism and the broker's status: {m}"
    );
    let claims = stale_jwt.split('.').nth(1).expect("claims");
    assert!(!m.contains(claims), "the token is never shown: {m}");

    // A signed token (alg HS256) is not an unsecured JWT: refused too.
    let sub = o.principal.clone();
    let signed = move || {
        let exp = SystemTime::now() + Duration::from_secs(60);
        let jwt = unsecured_jwt(&sub, exp);
        let (_, rest) = jwt.split_once('.').expect("header");
        let header = BASE64URL.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let token = format!("{header}.{}{}", rest, BASE64URL.encode(b"not-a-signature"));
        Ok(OAuthToken::new(token, exp))
    };
    let t = KafkaTransport::new(o.config(signed)).expect("transport");
    let e = transport_error(describe_leadership(&t, &role));
    eprintln!("{e}");
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert!(e.message().contains("OAUTHBEARER"), "{e}");

    // A token the provider itself says has expired never leaves the client.
    let expired = || {
        Ok(OAuthToken::new(
            "eyJhbGciOiJub25lIn0.e30.",
            SystemTime::now() - Duration::from_secs(1),
        ))
    };
    let t = KafkaTransport::new(o.config(expired)).expect("transport");
    let e = transport_error(describe_leadership(&t, &role));
    eprintln!("{e}");
    assert_eq!(e.kind(), ErrorKind::Retriable, "{e}");
    assert!(
        e.message().contains("OAUTHBEARER") && e.message().contains("expired already"),
        "{e}"
    );

    // A provider that fails: its error reaches the caller.
    let failing = || Err("the identity provider answered 503".to_owned());
    let t = KafkaTransport::new(o.config(failing)).expect("transport");
    let e = transport_error(describe_leadership(&t, &role));
    assert_eq!(e.kind(), ErrorKind::Retriable, "{e}");
    assert!(e.message().contains("answered 503"), "{e}");
}

/// How many connections `t` opened (each starts with ApiVersions).
fn opened(t: &KafkaTransport) -> u64 {
    t.requests_by_api()
        .into_iter()
        .find(|(api, _)| api == "ApiVersions")
        .map_or(0, |(_, n)| n)
}

/// KIP-368: the listener ends SASL sessions after `connections.max.reauth.ms` (and at the
/// token's expiry if sooner). A leader that renews on its connections for well over two
/// session lifetimes keeps its term: its connections authenticate again, with a fresh token
/// once the old one is past 80% of its life.
#[test]
fn oauthbearer_a_leader_keeps_its_connections_past_the_session_lifetime() {
    let Some(o) = oauth() else { return };
    let role = unique("oauth-reauth");
    // Tokens that live 1.5 session lifetimes: sessions end at the limit or at the token's
    // expiry, and the provider is asked again during the run.
    let (issued, provider) = o.issuer(o.reauth * 3 / 2);
    // One connection per broker, so that every connection opened during the run is one that
    // replaced another at the end of its session, or one the broker closed.
    let t = Arc::new(transport_with(
        o.config(provider).with_connections_per_broker(1),
    ));
    let candidacy = blocking::start_shared(Arc::clone(&t), &role, "a", options()).expect("start");
    let leader = match candidacy.elected_blocking_timeout(PROMPT) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => panic!("the candidacy over OAUTHBEARER failed: {e}"),
        Err(c) => panic!("not elected within {PROMPT:?}: {:?}", c.snapshot()),
    };
    let token = leader.token();
    let observer =
        KafkaTransport::new(o.config(o.issuer(Duration::from_secs(300)).1)).expect("observer");
    let connections_before = opened(&t);
    let replaced_before = t.sasl_reauthentications().1;
    let run = o.reauth * 5 / 2;
    let until = std::time::Instant::now() + run;
    let mut failures = Vec::new();
    while std::time::Instant::now() < until {
        std::thread::sleep(RENEW);
        assert!(
            !leader.is_done(),
            "the term ended after {:?}: {:?}",
            run - until.saturating_duration_since(std::time::Instant::now()),
            leader.err()
        );
        if let Some(e) = leader.snapshot().last_error {
            failures.push(e.to_string());
        }
    }
    let status = describe_leadership(&observer, &role).expect("describe");
    assert!(status.authoritative(&token), "{status:?} vs {token}");
    assert_eq!(leader.token(), token, "the pair stays for the whole term");
    let (renewed, replaced) = t.sasl_reauthentications();
    let tokens = issued.load(Ordering::SeqCst);
    let connections = opened(&t) - connections_before;
    eprintln!(
        "over {run:?} with sessions of at most {:?}: {renewed} re-authentications, {replaced} \
         connections replaced at the end of their session, {connections} connections opened, \
         {tokens} tokens issued, errors seen: {failures:?}",
        o.reauth
    );
    assert_eq!(
        connections,
        replaced - replaced_before,
        "the leader's connections stay open but for those replaced at the end of a session \
         (a session that ended would make the broker close its connection)"
    );
    assert!(renewed >= 2, "re-authenticated {renewed} times");
    assert!(tokens >= 2, "the provider issued {tokens} tokens");
    assert!(failures.is_empty(), "{failures:?}");
    let data_topic = "kafka-coordination-oauth-data";
    drop(transport_with(
        o.config(o.issuer(Duration::from_secs(300)).1)
            .with_topic(data_topic),
    ));
    let offsets = leader
        .guarded_write_blocking(&[kafka_coordination::GuardedRecord {
            topic: data_topic,
            partition: 0,
            key: Some(b"k"),
            value: Some(b"after the run"),
            headers: &[],
        }])
        .unwrap_or_else(|e| panic!("a guarded write after the run: {e}"));
    assert_eq!(offsets.len(), 1);
    assert!(leader.resign_blocking().is_ok());
}

/// KIP-368 for the password mechanisms too: the same listener limits SCRAM-SHA-512 and PLAIN
/// sessions. Connections used about every 300 ms for 2.2 session lifetimes authenticate again with
/// the configured password, and every call succeeds.
#[test]
fn sasl_sessions_of_scram_and_plain_are_renewed_too() {
    let (Some(o), Some(password)) = (oauth(), var("KAFKA_SCRAM_PASSWORD")) else {
        return;
    };
    let role = unique("reauth-password");
    let transports: Vec<(&str, KafkaTransport)> = ["SCRAM-SHA-512", "PLAIN"]
        .into_iter()
        .map(|mechanism| {
            let config = KafkaConfig::new(o.bootstrap.clone(), PARTITIONS)
                .with_property("security.protocol", "SASL_PLAINTEXT")
                .with_property("sasl.mechanism", mechanism)
                .with_property("sasl.username", o.principal.clone())
                .with_property("sasl.password", password.clone())
                .with_connections_per_broker(1);
            (mechanism, KafkaTransport::new(config).expect("transport"))
        })
        .collect();
    let until = std::time::Instant::now() + o.reauth * 11 / 5;
    while std::time::Instant::now() < until {
        for (mechanism, t) in &transports {
            describe_leadership(t, &role)
                .unwrap_or_else(|e| panic!("describe over {mechanism}: {e}"));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    for (mechanism, t) in &transports {
        let (renewed, replaced) = t.sasl_reauthentications();
        let connections = opened(t);
        eprintln!(
            "{mechanism}: {renewed} re-authentications, {replaced} connections replaced, \
             {connections} opened"
        );
        assert!(
            renewed >= 2,
            "{mechanism}: re-authenticated {renewed} times"
        );
        assert_eq!(
            connections,
            1 + replaced,
            "{mechanism}: one connection, but for those replaced at the end of a session"
        );
    }
}
