//! [`KafkaConfig`]: where the cluster is, how the state topic is laid out, how long to wait.

use std::sync::Arc;
use std::time::Duration;

use super::oauth::{ProviderRef, TokenCache, TokenProvider};
use kafka_coordination_transport::error::TransportError;

/// The name of the compacted topic that holds every role's registrations and lease.
pub const STATE_TOPIC: &str = "__coordination_state";

/// The longest request or operation timeout accepted (an hour: longer is a unit mistake).
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Every property key the native client reads ([`KafkaConfig::with_property`]); it reads no
/// other. The `ssl.*` and `enable.ssl.*` keys are read only when `security.protocol` is `SSL`
/// or `SASL_SSL`, the `sasl.*` keys only when it is `SASL_PLAINTEXT` or `SASL_SSL`.
/// `ssl.keystore.location`, `sasl.oauthbearer.method` other than `default`, and
/// `enable.ssl.certificate.verification=false` are read to be refused with an error that says
/// what to use instead. A test checks this list against the keys the code reads.
pub const PROPERTIES_READ: [&str; 16] = [
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.crl.location",
    "ssl.endpoint.identification.algorithm",
    "ssl.keystore.location",
    "enable.ssl.certificate.verification",
];

/// Which setting of `security.protocol` makes the client read a property.
enum Layer {
    Always,
    Tls,
    Sasl,
}

fn property_layer(key: &str) -> Layer {
    if key.starts_with("ssl.") || key.starts_with("enable.ssl.") {
        Layer::Tls
    } else if key.starts_with("sasl.") {
        Layer::Sasl
    } else {
        Layer::Always
    }
}

/// The configuration of one [`KafkaTransport`](super::KafkaTransport).
///
/// ```
/// use std::time::Duration;
/// use kafka_coordination_kafka::KafkaConfig;
///
/// let config = KafkaConfig::new("127.0.0.1:9092", 16)
///     .with_property("security.protocol", "SSL")
///     .with_request_timeout(Duration::from_secs(5));
/// assert_eq!(config.partitions(), 16);
/// ```
///
/// Its `Debug` shows every property's key but never a secret's value (see
/// [`is_secret_property`]).
#[derive(Clone)]
pub struct KafkaConfig {
    bootstrap_servers: String,
    partitions: i32,
    topic: String,
    properties: Vec<(String, String)>,
    request_timeout: Duration,
    operation_timeout: Duration,
    client_id: String,
    address_overrides: Vec<(String, String)>,
    connections_per_broker: usize,
    /// `sasl.mechanism=OAUTHBEARER`'s tokens (see `oauth.rs`).
    pub(super) token_provider: Option<ProviderRef>,
}

impl KafkaConfig {
    /// The source of tokens for `sasl.mechanism=OAUTHBEARER` (see [`TokenProvider`]); without
    /// it that mechanism is refused. Every connection of the clients built from this
    /// configuration and its clones (a [`KafkaTransport`](super::KafkaTransport) has a few:
    /// its transactions, its reader, its describes) uses the same token, refreshed as the
    /// `oauth` module says.
    pub fn with_token_provider(mut self, provider: impl TokenProvider + 'static) -> Self {
        self.token_provider = Some(ProviderRef::new(provider));
        self
    }

    /// The token of [`with_token_provider`](Self::with_token_provider)'s provider.
    pub(crate) fn token_cache(&self) -> Option<&Arc<TokenCache>> {
        self.token_provider.as_ref().map(ProviderRef::cache)
    }
}

/// Whether the value of property `key` is a secret: a key (compared case-insensitively) whose
/// last word is `password` or `pem` (after a `.`, `_` or `-`, so that `sasl.password`, the flag
/// `sasl_password` and the variable `KC_SASL_PASSWORD` all count), or that contains
/// `sasl.jaas.config`, `token` or `secret` (`ssl.key.password`, `ssl.key.pem`, `ssl.ca.pem`,
/// `sasl.oauthbearer.client.secret`, ...). The `Debug` of [`KafkaConfig`], of the settings
/// types and of the command-line tool's flags shows such a value as `"<redacted>"` (the key stays
/// visible, so that one can see it is set), and no error message of this crate repeats one.
///
/// Public PEM certificates (`ssl.ca.pem`) are redacted too: one rule that errs on the side of
/// hiding is easier to trust than a list.
///
/// ```
/// use kafka_coordination_kafka::{is_secret_property, KafkaConfig};
///
/// assert!(is_secret_property("sasl.password"));
/// assert!(is_secret_property("SSL.KEY.PEM"));
/// assert!(!is_secret_property("sasl.username"));
/// let config = KafkaConfig::new("127.0.0.1:9092", 1).with_property("sasl.password", "hunter2");
/// let shown = format!("{config:?}");
/// assert!(shown.contains("sasl.password") && !shown.contains("hunter2"));
/// ```
pub fn is_secret_property(key: &str) -> bool {
    let key = key.trim().to_ascii_lowercase();
    // The last word of the key: after a `.`, or a `_` or `-` (flag and variable names).
    let ends_with = |word: &str| {
        key.strip_suffix(word)
            .is_some_and(|rest| rest.is_empty() || rest.ends_with(['.', '_', '-']))
    };
    ends_with("password")
        || ends_with("pem")
        || key.contains("sasl.jaas.config")
        || key.contains("token")
        || key.contains("secret")
}

/// What `Debug` shows for a secret's value.
pub(crate) const REDACTED: &str = "<redacted>";

/// `value`, or [`REDACTED`] when `key` names a secret.
pub(crate) fn shown_value<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret_property(key) {
        REDACTED
    } else {
        value
    }
}

/// `(key, value)` pairs as a `Debug` map with every secret's value redacted.
pub(crate) struct ShownProperties<I>(pub(crate) I);

impl<'a, I> std::fmt::Debug for ShownProperties<I>
where
    I: Iterator<Item = (&'a str, &'a str)> + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.clone().map(|(k, v)| (k, shown_value(k, v))))
            .finish()
    }
}

impl std::fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let properties = self
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()));
        f.debug_struct("KafkaConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("partitions", &self.partitions)
            .field("topic", &self.topic)
            .field("properties", &ShownProperties(properties))
            .field("request_timeout", &self.request_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("client_id", &self.client_id)
            .field("address_overrides", &self.address_overrides)
            .field("connections_per_broker", &self.connections_per_broker)
            .field("token_provider", &self.token_provider)
            .finish()
    }
}

/// The native connections per broker a client may open by default. A process whose calls never
/// overlap (one role, or a few) opens one; the others open as calls overlap.
pub const DEFAULT_CONNECTIONS_PER_BROKER: usize = 4;

/// The most native connections per broker [`KafkaConfig::with_connections_per_broker`] takes.
pub const MAX_CONNECTIONS_PER_BROKER: usize = 64;

impl KafkaConfig {
    /// A configuration for the cluster at `bootstrap_servers` (`host:port[,host:port...]`)
    /// whose `__coordination_state` topic has `partitions` partitions. Every member of every
    /// role must pass the topic's real partition count: the partition of a role is derived from
    /// it, and two counts put one role's records in two partitions.
    pub fn new(bootstrap_servers: impl Into<String>, partitions: i32) -> Self {
        KafkaConfig {
            bootstrap_servers: bootstrap_servers.into(),
            partitions,
            topic: STATE_TOPIC.to_owned(),
            properties: Vec::new(),
            request_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(30),
            client_id: "kafka-coordination".to_owned(),
            address_overrides: Vec::new(),
            connections_per_broker: DEFAULT_CONNECTIONS_PER_BROKER,
            token_provider: None,
        }
    }

    /// How many native connections the client may open to each broker for transactional
    /// calls and checks (default [`DEFAULT_CONNECTIONS_PER_BROKER`], at most
    /// [`MAX_CONNECTIONS_PER_BROKER`]). A broker answers the requests of one connection one at
    /// a time, so a process that renews thousands of roles (a `kafka_coordination::host::Host` with
    /// several calls in flight) needs several to keep the broker's request threads busy; a
    /// connection is opened only when the others are all in use, and each role's own calls
    /// stay in order either way.
    pub fn with_connections_per_broker(mut self, n: usize) -> Self {
        self.connections_per_broker = n;
        self
    }

    /// See [`with_connections_per_broker`](Self::with_connections_per_broker).
    pub fn connections_per_broker(&self) -> usize {
        self.connections_per_broker
    }

    /// Sets a client property, under librdkafka's name, for every connection the transport
    /// opens. The native client reads only the keys of [`PROPERTIES_READ`]: the security
    /// settings (`security.protocol`, `sasl.*`, `ssl.*`; the table on the `kafka` module's
    /// security settings, and the guide's `docs/guide/operating.md`). Any other key is kept
    /// ([`property`](Self::property) returns it) but does nothing:
    /// [`unused_properties`](Self::unused_properties) names such keys, and the transport logs
    /// a warning naming them when it is built. The settings that carry the protocol's
    /// guarantees (the transactional id, the transaction timeout, idempotence, `acks=all`,
    /// read_committed) are the client's own and no property changes them.
    ///
    /// ```
    /// use kafka_coordination_kafka::KafkaConfig;
    ///
    /// let config = KafkaConfig::new("127.0.0.1:9092", 16)
    ///     .with_property("security.protocol", "SSL")
    ///     .with_property("ssl.ca.location", "/etc/kafka/ca.pem")
    ///     .with_property("client.rack", "eu-west-1a");
    /// assert_eq!(config.unused_properties(), ["client.rack"]);
    /// ```
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((key.into(), value.into()));
        self
    }

    /// Uses another topic than [`STATE_TOPIC`] for the registrations and leases (tests, or a
    /// cluster whose naming rules forbid the default name).
    ///
    /// The topic does not make a namespace: a role's transactional id is its bare name, shared
    /// by every client of the cluster whatever its state topic. Two deployments with a role of
    /// the same name (or any other application whose `transactional.id` equals a role name)
    /// fence each other; give each deployment's roles a prefix of their own
    /// (`prod-eu.billing.scheduler`).
    pub fn with_topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = topic.into();
        self
    }

    /// How long one broker round trip may take: metadata, offsets, DescribeTransactions, topic
    /// checks; also how long a read may take to catch up to the last stable offset. Default 10 s.
    /// A broker that leaves a request unanswered this long is taken for silent, and so is one
    /// that leaves every connection's request unanswered for a quarter of it while other calls
    /// wait for a connection, unless it opens a new connection within that quarter (then it
    /// is busy: an append waiting for a dead replica to leave the ISR). Calls to a silent
    /// broker fail at once for a second, then one at a time probes it; its requests unanswered
    /// for that quarter are given up on
    /// (see [`KafkaTransport::requests_abandoned`](super::KafkaTransport::requests_abandoned)).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long a producer operation may take: InitProducerId (which waits for the coordinator
    /// to abort a previous holder's open transaction), a commit, an append's delivery.
    /// Default 30 s.
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// The `client.id` the clients send (default `kafka-coordination`).
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = client_id.into();
        self
    }

    /// Connects to `actual` (`host:port`) wherever the cluster names `advertised` (a broker's
    /// advertised listener): for brokers reached through a port forward, a NAT or a proxy.
    /// Applies to the native connections (transactions, reads, DescribeTransactions).
    pub fn with_address_override(
        mut self,
        advertised: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        self.address_overrides
            .push((advertised.into(), actual.into()));
        self
    }

    pub(crate) fn address_overrides(&self) -> &[(String, String)] {
        &self.address_overrides
    }

    /// The `client.id` (see [`with_client_id`](Self::with_client_id)).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The bootstrap servers.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap_servers
    }

    /// The partition count of the state topic.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The state topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The properties set with [`with_property`](Self::with_property), in order.
    pub fn properties(&self) -> &[(String, String)] {
        &self.properties
    }

    /// The keys of the properties set that the native client will not read, each once, in the
    /// order they were first set: every key not in [`PROPERTIES_READ`] (compared exactly, as
    /// librdkafka does), a TLS key (`ssl.*`, `enable.ssl.*`) when `security.protocol` uses no
    /// TLS (`PLAINTEXT`, `SASL_PLAINTEXT`), and a `sasl.*` key when it uses no SASL
    /// (`PLAINTEXT`, `SSL`). Empty when every property set is read.
    ///
    /// ```
    /// use kafka_coordination_kafka::KafkaConfig;
    ///
    /// let config = KafkaConfig::new("127.0.0.1:9092", 1)
    ///     .with_property("ssl.ca.location", "/etc/kafka/ca.pem")
    ///     .with_property("acks", "1");
    /// // No security.protocol: PLAINTEXT, which reads no ssl.* key.
    /// assert_eq!(config.unused_properties(), ["ssl.ca.location", "acks"]);
    /// let config = config.with_property("security.protocol", "SSL");
    /// assert_eq!(config.unused_properties(), ["acks"]);
    /// ```
    pub fn unused_properties(&self) -> Vec<&str> {
        let protocol = self.security_protocol();
        let protocol = protocol.trim();
        let tls = matches!(protocol, "ssl" | "sasl_ssl");
        let sasl = matches!(protocol, "sasl_plaintext" | "sasl_ssl");
        let mut out: Vec<&str> = Vec::new();
        for (key, _) in &self.properties {
            let read = PROPERTIES_READ.contains(&key.as_str())
                && match property_layer(key) {
                    Layer::Tls => tls,
                    Layer::Sasl => sasl,
                    Layer::Always => true,
                };
            if !read && !out.contains(&key.as_str()) {
                out.push(key);
            }
        }
        out
    }

    /// A warning naming the [unused properties](Self::unused_properties), if any: the
    /// transport logs it (feature `tracing`) when it is built; the command-line tool prints it.
    pub fn unused_properties_warning(&self) -> Option<String> {
        let unused = self.unused_properties();
        if unused.is_empty() {
            return None;
        }
        Some(format!(
            "the native client does not read {} (with security.protocol={}): {}; it reads \
             security.protocol, and the sasl.* and ssl.* keys that the protocol uses (see \
             {}#{})",
            if unused.len() == 1 {
                "this property"
            } else {
                "these properties"
            },
            self.security_protocol().trim().to_ascii_uppercase(),
            unused.join(", "),
            kafka_coordination_transport::error::TROUBLESHOOTING_PAGE,
            kafka_coordination_transport::error::section::PROPERTIES,
        ))
    }

    /// See [`with_request_timeout`](Self::with_request_timeout).
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// See [`with_operation_timeout`](Self::with_operation_timeout).
    pub fn operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// The value of an extra property, if it was set (the last one wins).
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The setting made last among `keys`, as (key, value): librdkafka names some settings
    /// twice (`sasl.mechanisms` and its alias `sasl.mechanism`), and the last one set wins.
    pub(crate) fn property_among(&self, keys: &[&str]) -> Option<(&str, &str)> {
        self.properties
            .iter()
            .rev()
            .find(|(k, _)| keys.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub(crate) fn validate(&self) -> Result<(), TransportError> {
        if self.bootstrap_servers.trim().is_empty() {
            return Err(TransportError::config("bootstrap servers are empty"));
        }
        if self.partitions <= 0 {
            return Err(TransportError::config(format!(
                "the partition count must be positive, got {}",
                self.partitions
            )));
        }
        if self.topic.is_empty() {
            return Err(TransportError::config("the state topic name is empty"));
        }
        if !(1..=MAX_CONNECTIONS_PER_BROKER).contains(&self.connections_per_broker) {
            return Err(TransportError::config(format!(
                "the connections per broker must be between 1 and {MAX_CONNECTIONS_PER_BROKER}, \
                 got {}",
                self.connections_per_broker
            )));
        }
        for (name, t) in [
            ("request timeout", self.request_timeout),
            ("operation timeout", self.operation_timeout),
        ] {
            if t.is_zero() || t > MAX_TIMEOUT {
                return Err(TransportError::config(format!(
                    "the {name} must be between 1 ms and {MAX_TIMEOUT:?}, got {t:?}"
                )));
            }
        }
        Ok(())
    }

    /// The security protocol the clients use, lower-cased (`plaintext` when unset).
    pub(crate) fn security_protocol(&self) -> String {
        self.property("security.protocol")
            .unwrap_or("plaintext")
            .to_ascii_lowercase()
    }

    /// A warning when these settings send the password in clear: SASL PLAIN over
    /// `security.protocol=SASL_PLAINTEXT`, where anyone on the path reads it (SCRAM sends only
    /// a proof of it; `SASL_SSL` encrypts it). The transport logs it (feature `tracing`) when
    /// it is built; the command-line tool prints it.
    pub fn cleartext_password_warning(&self) -> Option<&'static str> {
        let plain = self
            .property_among(&["sasl.mechanism", "sasl.mechanisms"])
            .is_some_and(|(_, m)| m.trim().eq_ignore_ascii_case("PLAIN"));
        (plain && self.security_protocol().trim() == "sasl_plaintext").then_some(
            "sasl.mechanism=PLAIN over security.protocol=SASL_PLAINTEXT sends the password in \
             clear: use SASL_SSL, or SCRAM-SHA-256/512",
        )
    }
}

/// Whole milliseconds of `d`, saturated to `i32::MAX` (librdkafka's integer properties).
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis())
        .unwrap_or(i64::MAX)
        .min(i64::from(i32::MAX))
}

/// The security settings of a configuration file (feature `serde`): typed names for the
/// librdkafka-style properties that [`KafkaConfig::with_property`] takes (see the `kafka`
/// module for what each supports). Unset fields set nothing.
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecuritySettings {
    /// `security.protocol`: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub protocol: Option<String>,
    /// `sasl.mechanism`: `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` or `OAUTHBEARER` (with
    /// `sasl_oauthbearer_token_file`, or a token provider in code).
    pub sasl_mechanism: Option<String>,
    /// `sasl.username`.
    pub sasl_username: Option<String>,
    /// `sasl.password` (never printed by `Debug`).
    pub sasl_password: Option<String>,
    /// `ssl.ca.location`: a PEM file or directory.
    pub ssl_ca_location: Option<String>,
    /// `ssl.certificate.location`: the client's PEM certificate (mutual TLS).
    pub ssl_certificate_location: Option<String>,
    /// `ssl.key.location`: the client's PEM key (mutual TLS).
    pub ssl_key_location: Option<String>,
    /// `ssl.crl.location`: PEM CRLs.
    pub ssl_crl_location: Option<String>,
    /// `ssl.endpoint.identification.algorithm`: `https` (default) or `none`.
    pub ssl_endpoint_identification_algorithm: Option<String>,
    /// A file holding the JWT for `sasl.mechanism=OAUTHBEARER`, read again whenever the client
    /// needs a fresh token (a [`TokenFile`](super::TokenFile) given to
    /// [`KafkaConfig::with_token_provider`]).
    pub sasl_oauthbearer_token_file: Option<std::path::PathBuf>,
}

#[cfg(feature = "serde")]
impl std::fmt::Debug for SecuritySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecuritySettings")
            .field("protocol", &self.protocol)
            .field("sasl_mechanism", &self.sasl_mechanism)
            .field("sasl_username", &self.sasl_username)
            .field(
                "sasl_password",
                &self
                    .sasl_password
                    .as_deref()
                    .map(|v| shown_value("sasl.password", v)),
            )
            .field("ssl_ca_location", &self.ssl_ca_location)
            .field("ssl_certificate_location", &self.ssl_certificate_location)
            .field("ssl_key_location", &self.ssl_key_location)
            .field("ssl_crl_location", &self.ssl_crl_location)
            .field(
                "ssl_endpoint_identification_algorithm",
                &self.ssl_endpoint_identification_algorithm,
            )
            .field(
                "sasl_oauthbearer_token_file",
                &self.sasl_oauthbearer_token_file,
            )
            .finish()
    }
}

#[cfg(feature = "serde")]
impl SecuritySettings {
    /// The librdkafka property names and values of the fields that are set.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        [
            ("security.protocol", &self.protocol),
            ("sasl.mechanism", &self.sasl_mechanism),
            ("sasl.username", &self.sasl_username),
            ("sasl.password", &self.sasl_password),
            ("ssl.ca.location", &self.ssl_ca_location),
            ("ssl.certificate.location", &self.ssl_certificate_location),
            ("ssl.key.location", &self.ssl_key_location),
            ("ssl.crl.location", &self.ssl_crl_location),
            (
                "ssl.endpoint.identification.algorithm",
                &self.ssl_endpoint_identification_algorithm,
            ),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect()
    }

    /// `other`'s values where it has them, `self`'s elsewhere.
    pub fn merge(self, other: SecuritySettings) -> SecuritySettings {
        SecuritySettings {
            protocol: other.protocol.or(self.protocol),
            sasl_mechanism: other.sasl_mechanism.or(self.sasl_mechanism),
            sasl_username: other.sasl_username.or(self.sasl_username),
            sasl_password: other.sasl_password.or(self.sasl_password),
            ssl_ca_location: other.ssl_ca_location.or(self.ssl_ca_location),
            ssl_certificate_location: other
                .ssl_certificate_location
                .or(self.ssl_certificate_location),
            ssl_key_location: other.ssl_key_location.or(self.ssl_key_location),
            ssl_crl_location: other.ssl_crl_location.or(self.ssl_crl_location),
            ssl_endpoint_identification_algorithm: other
                .ssl_endpoint_identification_algorithm
                .or(self.ssl_endpoint_identification_algorithm),
            sasl_oauthbearer_token_file: other
                .sasl_oauthbearer_token_file
                .or(self.sasl_oauthbearer_token_file),
        }
    }
}

/// [`KafkaConfig`] as a configuration file states it (feature `serde`): every field optional,
/// so that layers (a file, the environment, command-line flags) can be
/// [merged](Self::merge) before [`into_config`](Self::into_config) checks that the required
/// ones are there. Unknown fields are refused, so a typo is an error that names it.
/// `KafkaConfig` itself deserialises from the same table.
///
/// ```toml
/// bootstrap_servers = "kafka-0:9092,kafka-1:9092"
/// partitions = 16                      # the topic's real count
/// topic = "__coordination_state"       # the default
/// client_id = "billing"
/// request_timeout = "10s"              # or whole milliseconds: 10000
/// operation_timeout = "30s"
///
/// [security]
/// protocol = "SASL_SSL"
/// sasl_mechanism = "SCRAM-SHA-512"
/// sasl_username = "billing"
/// sasl_password = "..."
/// ssl_ca_location = "/etc/kafka/ca.pem"
///
/// [properties]                         # any other key of PROPERTIES_READ
/// "ssl.crl.location" = "/etc/kafka/crl.pem"
///
/// [address_overrides]                  # advertised listener = address to connect to
/// "kafka-0.internal:9092" = "127.0.0.1:19092"
/// ```
///
/// ```
/// use kafka_coordination_kafka::{KafkaConfig, KafkaSettings};
/// let text = r#"
///     bootstrap_servers = "127.0.0.1:9092"
///     partitions = 8
///     request_timeout = "5s"
///     [security]
///     protocol = "SASL_SSL"
/// "#;
/// let config: KafkaConfig = toml::from_str(text).unwrap();
/// assert_eq!(config.partitions(), 8);
/// assert_eq!(config.property("security.protocol"), Some("SASL_SSL"));
/// let typo = toml::from_str::<KafkaSettings>("bootstrap_server = \"x\"").unwrap_err();
/// assert!(typo.to_string().contains("bootstrap_server"));
/// ```
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSettings {
    /// See [`KafkaConfig::new`].
    pub bootstrap_servers: Option<String>,
    /// See [`KafkaConfig::new`].
    pub partitions: Option<i32>,
    /// See [`KafkaConfig::with_topic`].
    pub topic: Option<String>,
    /// See [`KafkaConfig::with_client_id`].
    pub client_id: Option<String>,
    /// See [`KafkaConfig::with_request_timeout`].
    #[serde(
        default,
        deserialize_with = "kafka_coordination_transport::duration::serde_duration::option"
    )]
    pub request_timeout: Option<Duration>,
    /// See [`KafkaConfig::with_operation_timeout`].
    #[serde(
        default,
        deserialize_with = "kafka_coordination_transport::duration::serde_duration::option"
    )]
    pub operation_timeout: Option<Duration>,
    /// Typed security properties.
    #[serde(default)]
    pub security: SecuritySettings,
    /// Any other client properties (the keys of [`PROPERTIES_READ`]), applied after
    /// `security`; see [`KafkaConfig::unused_properties`] for the others.
    #[serde(default)]
    pub properties: std::collections::BTreeMap<String, String>,
    /// See [`KafkaConfig::with_address_override`].
    #[serde(default)]
    pub address_overrides: std::collections::BTreeMap<String, String>,
}

/// Secrets shown as `"<redacted>"` (see [`is_secret_property`]).
#[cfg(feature = "serde")]
impl std::fmt::Debug for KafkaSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let properties = self
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()));
        f.debug_struct("KafkaSettings")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("partitions", &self.partitions)
            .field("topic", &self.topic)
            .field("client_id", &self.client_id)
            .field("request_timeout", &self.request_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("security", &self.security)
            .field("properties", &ShownProperties(properties))
            .field("address_overrides", &self.address_overrides)
            .finish()
    }
}

#[cfg(feature = "serde")]
impl KafkaSettings {
    /// `other`'s values where it has them, `self`'s elsewhere; property maps are merged key by
    /// key (`other` wins).
    pub fn merge(mut self, other: KafkaSettings) -> KafkaSettings {
        self.properties.extend(other.properties);
        self.address_overrides.extend(other.address_overrides);
        KafkaSettings {
            bootstrap_servers: other.bootstrap_servers.or(self.bootstrap_servers),
            partitions: other.partitions.or(self.partitions),
            topic: other.topic.or(self.topic),
            client_id: other.client_id.or(self.client_id),
            request_timeout: other.request_timeout.or(self.request_timeout),
            operation_timeout: other.operation_timeout.or(self.operation_timeout),
            security: self.security.merge(other.security),
            properties: self.properties,
            address_overrides: self.address_overrides,
        }
    }

    /// The configuration, with `partitions` taken from `default_partitions` when unset;
    /// a [`Config`](kafka_coordination_transport::error::ErrorKind::Config) error names a missing or invalid setting.
    pub fn into_config_with(
        self,
        default_partitions: Option<i32>,
    ) -> Result<KafkaConfig, TransportError> {
        let bootstrap = self.bootstrap_servers.ok_or_else(|| {
            TransportError::config("bootstrap_servers is not set (the cluster's host:port list)")
        })?;
        let partitions = self.partitions.or(default_partitions).ok_or_else(|| {
            TransportError::config("partitions is not set (the partition count of the state topic)")
        })?;
        let mut config = KafkaConfig::new(bootstrap, partitions);
        if let Some(t) = self.topic {
            config = config.with_topic(t);
        }
        if let Some(c) = self.client_id {
            config = config.with_client_id(c);
        }
        if let Some(t) = self.request_timeout {
            config = config.with_request_timeout(t);
        }
        if let Some(t) = self.operation_timeout {
            config = config.with_operation_timeout(t);
        }
        for (k, v) in self.security.properties() {
            config = config.with_property(k, v);
        }
        if let Some(path) = self.security.sasl_oauthbearer_token_file {
            config = config.with_token_provider(super::TokenFile::new(path));
        }
        for (k, v) in self.properties {
            config = config.with_property(k, v);
        }
        for (advertised, actual) in self.address_overrides {
            config = config.with_address_override(advertised, actual);
        }
        config.validate()?;
        Ok(config)
    }

    /// [`into_config_with`](Self::into_config_with) with no default partition count.
    pub fn into_config(self) -> Result<KafkaConfig, TransportError> {
        self.into_config_with(None)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for KafkaConfig {
    /// A [`KafkaSettings`] table with `bootstrap_servers` and `partitions` set; the values are
    /// checked as the transport checks them.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        KafkaSettings::deserialize(d)?
            .into_config()
            .map_err(|e| serde::de::Error::custom(e.message()))
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;

    #[test]
    fn settings_map_security_and_properties_and_later_layers_win() {
        let file: KafkaSettings = toml::from_str(
            r#"
            bootstrap_servers = "file:9092"
            partitions = 8
            operation_timeout = "45s"
            [security]
            protocol = "SASL_SSL"
            sasl_mechanism = "SCRAM-SHA-256"
            sasl_password = "secret"
            [properties]
            "ssl.crl.location" = "a"
            [address_overrides]
            "kafka-0:9092" = "127.0.0.1:19092"
            "#,
        )
        .expect("valid");
        assert!(!format!("{file:?}").contains("secret"), "{file:?}");
        let flags = KafkaSettings {
            bootstrap_servers: Some("flag:9092".into()),
            security: SecuritySettings {
                sasl_mechanism: Some("SCRAM-SHA-512".into()),
                ..SecuritySettings::default()
            },
            properties: [("ssl.crl.location".to_owned(), "b".to_owned())].into(),
            ..KafkaSettings::default()
        };
        let config = file.merge(flags).into_config().expect("complete");
        assert_eq!(config.bootstrap_servers(), "flag:9092");
        assert_eq!(config.partitions(), 8);
        assert_eq!(config.operation_timeout(), Duration::from_secs(45));
        assert_eq!(config.property("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.property("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(config.property("sasl.password"), Some("secret"));
        assert_eq!(config.property("ssl.crl.location"), Some("b"));
        assert_eq!(
            config.address_overrides(),
            [("kafka-0:9092".to_owned(), "127.0.0.1:19092".to_owned())]
        );
    }

    #[test]
    fn a_missing_or_invalid_setting_is_named() {
        let e = KafkaSettings::default().into_config().expect_err("empty");
        assert!(e.message().contains("bootstrap_servers"), "{e}");
        let e = toml::from_str::<KafkaConfig>("bootstrap_servers = \"x:1\"").expect_err("no count");
        assert!(e.to_string().contains("partitions is not set"), "{e}");
        let e = toml::from_str::<KafkaConfig>("bootstrap_servers = \"x:1\"\npartitions = 0")
            .expect_err("zero");
        assert!(e.to_string().contains("must be positive"), "{e}");
        let e = toml::from_str::<KafkaConfig>(
            "bootstrap_servers = \"x:1\"\npartitions = 1\n[security]\nprotocl = \"SSL\"",
        )
        .expect_err("typo");
        assert!(e.to_string().contains("protocl"), "{e}");
        let with_default = KafkaSettings {
            bootstrap_servers: Some("x:1".into()),
            ..KafkaSettings::default()
        }
        .into_config_with(Some(12))
        .expect("a default count");
        assert_eq!(with_default.partitions(), 12);
    }
}

#[cfg(test)]
mod redaction_tests {
    use super::*;

    #[test]
    fn a_token_provider_is_shown_as_such_and_shared_by_clones() {
        use std::time::SystemTime;
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000);
        let config = KafkaConfig::new("b:9093", 1).with_token_provider(move || {
            Ok(super::super::OAuthToken::new(
                "eyJhbGciOiJub25lIn0.e30.",
                at,
            ))
        });
        let shown = format!("{config:?}");
        assert!(shown.contains("TokenProvider(..)"), "{shown}");
        assert!(!shown.contains("eyJ"), "{shown}");
        let clone = config.clone();
        let (a, b) = (
            config.token_cache().expect("set"),
            clone.token_cache().expect("set"),
        );
        assert!(Arc::ptr_eq(a, b), "clones share one token cache");
    }

    /// Secret values of every kind the predicate names, each unlike anything else printed.
    const SECRETS: [(&str, &str); 6] = [
        ("sasl.password", "pw-0d1e"),
        ("ssl.key.pem", "-----BEGIN PRIVATE KEY-----pem-7a3f"),
        ("ssl.key.password", "keypw-55c2"),
        (
            "sasl.jaas.config",
            "PlainLoginModule required password=\"jaas-9b41\";",
        ),
        ("sasl.oauthbearer.token", "tok-e6f0"),
        ("sasl.oauthbearer.client.secret", "sec-3c88"),
    ];

    fn assert_hidden(shown: &str) {
        for (key, value) in SECRETS {
            assert!(!shown.contains(value), "{key}'s value is shown: {shown}");
        }
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn the_predicate_names_passwords_pems_jaas_tokens_and_secrets() {
        for (key, _) in SECRETS {
            assert!(is_secret_property(key), "{key}");
        }
        for key in [
            "SASL.PASSWORD",
            " ssl.ca.pem ",
            "sasl_password",
            "KC_SASL_PASSWORD",
            "password",
        ] {
            assert!(is_secret_property(key), "{key}");
        }
        for key in [
            "sasl.username",
            "security.protocol",
            "ssl.key.location",
            "bootstrap.servers",
            "passwordless.mode",
            "client.rack",
        ] {
            assert!(!is_secret_property(key), "{key}");
        }
    }

    #[test]
    fn kafka_config_debug_keeps_keys_and_hides_secret_values() {
        let config = SECRETS
            .iter()
            .fold(KafkaConfig::new("127.0.0.1:9092", 3), |c, (k, v)| {
                c.with_property(*k, *v)
            })
            .with_property("ssl.crl.location", "crl-visible");
        for shown in [format!("{config:?}"), format!("{config:#?}")] {
            assert_hidden(&shown);
            for (key, _) in SECRETS {
                assert!(shown.contains(key), "the key {key} is shown: {shown}");
            }
            assert!(shown.contains("crl-visible"), "{shown}");
            assert!(shown.contains("127.0.0.1:9092"), "{shown}");
        }
    }

    /// A call that fails (here: a cluster that cannot be reached) never repeats a secret
    /// property's value in its error, whatever the error says about the configuration.
    #[test]
    fn a_failed_call_does_not_repeat_a_secret_property() {
        let jaas = SECRETS[3];
        let config = KafkaConfig::new("127.0.0.1:1", 1)
            .with_request_timeout(Duration::from_secs(1))
            .with_property(jaas.0, jaas.1);
        let e = super::super::KafkaTransport::new(config)
            .and_then(|t| t.describe_topic())
            .expect_err("nothing listens on 127.0.0.1:1");
        let (shown, debug) = (e.to_string(), format!("{e:?}"));
        assert!(!shown.contains("jaas-9b41"), "{shown}");
        assert!(!debug.contains("jaas-9b41"), "{debug}");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn settings_debug_hides_secret_values() {
        let mut properties = std::collections::BTreeMap::new();
        for (k, v) in SECRETS {
            properties.insert(k.to_owned(), v.to_owned());
        }
        let settings = KafkaSettings {
            bootstrap_servers: Some("127.0.0.1:9092".into()),
            security: SecuritySettings {
                sasl_username: Some("alice".into()),
                sasl_password: Some(SECRETS[0].1.into()),
                ..SecuritySettings::default()
            },
            properties,
            ..KafkaSettings::default()
        };
        for shown in [
            format!("{settings:?}"),
            format!("{settings:#?}"),
            format!("{:?}", settings.security),
            format!("{:#?}", settings.security),
        ] {
            assert_hidden(&shown);
            assert!(shown.contains("alice"), "{shown}");
        }
    }
}

#[cfg(test)]
mod property_tests {
    use super::*;

    fn config(props: &[(&str, &str)]) -> KafkaConfig {
        props
            .iter()
            .fold(KafkaConfig::new("127.0.0.1:9092", 1), |c, (k, v)| {
                c.with_property(*k, *v)
            })
    }

    /// Keys the client does not read are named, once each, in the order first set: unknown
    /// keys, librdkafka-only keys, keys in another case, and TLS or SASL keys that the
    /// security protocol does not use.
    #[test]
    fn unused_properties_name_what_the_client_will_not_read() {
        assert!(config(&[]).unused_properties().is_empty());
        assert_eq!(config(&[]).unused_properties_warning(), None);
        let all_read = config(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
            ("ssl.ca.location", "/ca.pem"),
        ]);
        assert!(all_read.unused_properties().is_empty());
        let c = config(&[
            ("client.rack", "eu-west-1a"),
            ("acks", "1"),
            ("Security.Protocol", "SSL"),
            ("client.rack", "eu-west-1b"),
            ("sasl.username", "u"),
            ("ssl.key.password", "kp-31"),
        ]);
        assert_eq!(
            c.unused_properties(),
            [
                "client.rack",
                "acks",
                "Security.Protocol",
                "sasl.username",
                "ssl.key.password"
            ]
        );
        let warning = c.unused_properties_warning().expect("a warning");
        assert!(
            warning
                .contains("client.rack, acks, Security.Protocol, sasl.username, ssl.key.password")
                && warning.contains("security.protocol=PLAINTEXT"),
            "{warning}"
        );
        assert!(!warning.contains("kp-31"), "no value is shown: {warning}");
        let tls = config(&[("security.protocol", "SSL"), ("ssl.ca.location", "/ca.pem")]);
        assert!(tls.unused_properties().is_empty());
        let tls_with_sasl = tls.with_property("sasl.mechanism", "PLAIN");
        assert_eq!(tls_with_sasl.unused_properties(), ["sasl.mechanism"]);
    }

    /// The source files that read properties, without their tests.
    const READERS: [(&str, &str); 4] = [
        ("config.rs", include_str!("config.rs")),
        ("security/tls.rs", include_str!("security/tls.rs")),
        ("security/sasl.rs", include_str!("security/sasl.rs")),
        ("security.rs", include_str!("security.rs")),
    ];

    /// The quoted keys read in `source` through `prop(config, "..")`, `.property("..")` and
    /// `.property_among(&["..", ..])`, outside its tests.
    fn keys_read(source: &str) -> Vec<String> {
        let code = source.split("\n#[cfg(test)]").next().unwrap_or(source);
        let code = code.split("\n#[cfg(all(test").next().unwrap_or(code);
        let mut out = Vec::new();
        for opener in ["prop(config, ", ".property(", ".property_among(&["] {
            for (at, _) in code.match_indices(opener) {
                let rest = &code[at + opener.len()..];
                let end = rest.find(')').unwrap_or(rest.len());
                for (i, part) in rest[..end].split('"').enumerate() {
                    if i % 2 == 1 {
                        out.push(part.to_owned());
                    }
                }
            }
        }
        out
    }

    /// PROPERTIES_READ is the one list of keys the client reads: every key the code reads is
    /// in it, and every key in it is read somewhere.
    #[test]
    fn the_list_of_keys_read_is_the_keys_the_code_reads() {
        let mut read = Vec::new();
        for (file, source) in READERS {
            for key in keys_read(source) {
                assert!(
                    PROPERTIES_READ.contains(&key.as_str()),
                    "{file} reads {key}, which PROPERTIES_READ does not list"
                );
                read.push(key);
            }
        }
        for key in PROPERTIES_READ {
            assert!(
                read.iter().any(|k| k == key),
                "PROPERTIES_READ lists {key}, which no code reads"
            );
        }
    }
}
