//! The Kafka transport on secured listeners of a real broker: SASL_SSL with PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512, mutual TLS, authentication and authorization failures, and
//! an election whose every connection (librdkafka's and the native client's) is secured.
//!
//! `scripts/kafka/start.sh` starts a broker with these listeners and exports their addresses,
//! the CA and the users (`KAFKA_SASL_SSL_BOOTSTRAP`, `KAFKA_SSL_BOOTSTRAP`, `KAFKA_SSL_CA`,
//! `KAFKA_SSL_CLIENT_CERT`, `KAFKA_SSL_CLIENT_KEY`, `KAFKA_SCRAM_USER`, `KAFKA_SCRAM_PASSWORD`,
//! `KAFKA_SCRAM_LIMITED_USER`, `KAFKA_SCRAM_LIMITED_PASSWORD`); `scripts/kafka/with-broker.sh`
//! passes them on. Without them every test says so loudly and returns.
#![cfg(all(feature = "kafka", feature = "blocking"))]

mod support;

use support::{loud, transport_with, unique, PARTITIONS};

use std::time::Duration;

use kafka_coordination::blocking;
use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
use kafka_coordination::{
    describe_leadership, Error, ErrorKind, LeadershipStatus, Options, SystemClock,
};

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
                 scripts/kafka/with-broker.sh cargo test -p kafka-coordination --features kafka \
                 --test kafka_security",
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

fn transport_error(r: Result<impl std::fmt::Debug, Error>) -> kafka_coordination::TransportError {
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
