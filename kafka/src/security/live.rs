//! Against the secured listeners of the test broker (scripts/kafka/start.sh exports their
//! addresses and credentials); skipped, loudly, without them.

use std::io::Write as _;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::config::KafkaConfig;
use crate::net::conn::{Conn, NetError};
use kafka_coordination_transport::error::ErrorKind;
use kafka_coordination_transport::error::TransportError;

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
            ssl: env("KAFKA_SSL_BOOTSTRAP").and_then(|b| b.split(',').next().map(str::to_owned)),
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
    let Some(plain) = env("KAFKA_BOOTSTRAP").and_then(|p| p.split(',').next().map(str::to_owned))
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
