//! The Rust blocks of docs/guide/deploying.md, one module per block: the module's body is the
//! block's text (`the_pages_rust_blocks_are_these_modules` compares them), so the functions the
//! tests call are the page's own.

pub mod scram {
    use kafka_coordination::kafka::KafkaConfig;

    /// SASL_SSL with SCRAM-SHA-512: `bootstrap` as "kafka-0.example.com:9093,kafka-1.example.com:9093",
    /// `ca` the PEM file of the CA that signed the brokers' certificates.
    pub fn scram_sha_512(bootstrap: &str, ca: &str, user: &str, password: &str) -> KafkaConfig {
        KafkaConfig::new(bootstrap, 16)
            .with_property("security.protocol", "SASL_SSL")
            .with_property("sasl.mechanism", "SCRAM-SHA-512")
            .with_property("sasl.username", user)
            .with_property("sasl.password", password)
            .with_property("ssl.ca.location", ca)
    }
}

pub mod mtls {
    use kafka_coordination::kafka::KafkaConfig;

    /// Mutual TLS: the client's certificate and its unencrypted PEM key (PKCS#8, PKCS#1 or SEC1).
    /// The broker's principal is the certificate's subject.
    pub fn mutual_tls(bootstrap: &str, ca: &str, certificate: &str, key: &str) -> KafkaConfig {
        KafkaConfig::new(bootstrap, 16)
            .with_property("security.protocol", "SSL")
            .with_property("ssl.ca.location", ca)
            .with_property("ssl.certificate.location", certificate)
            .with_property("ssl.key.location", key)
    }
}

pub mod oauth {
    use kafka_coordination::kafka::{KafkaConfig, TokenFile};

    /// OAUTHBEARER over TLS with the JWT a sidecar keeps in `token_file`.
    pub fn oauthbearer(bootstrap: &str, ca: &str, token_file: &str) -> KafkaConfig {
        KafkaConfig::new(bootstrap, 16)
            .with_property("security.protocol", "SASL_SSL")
            .with_property("sasl.mechanism", "OAUTHBEARER")
            .with_property("ssl.ca.location", ca)
            .with_token_provider(TokenFile::new(token_file))
    }
}
