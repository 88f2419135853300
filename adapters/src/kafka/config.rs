//! [`KafkaConfig`]: where the cluster is, how the state topic is laid out, how long to wait.

use std::time::Duration;

use rdkafka::config::ClientConfig;

use crate::error::TransportError;

/// The name of the compacted topic that holds every role's registrations and lease.
pub const STATE_TOPIC: &str = "__coordination_state";

/// The longest request or operation timeout accepted (an hour: longer is a unit mistake).
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// The configuration of one [`KafkaTransport`](super::KafkaTransport).
///
/// ```
/// use std::time::Duration;
/// use kafka_coordination::kafka::KafkaConfig;
///
/// let config = KafkaConfig::new("127.0.0.1:9092", 16)
///     .with_property("client.rack", "eu-west-1a")
///     .with_request_timeout(Duration::from_secs(5));
/// assert_eq!(config.partitions(), 16);
/// ```
#[derive(Clone, Debug)]
pub struct KafkaConfig {
    bootstrap_servers: String,
    partitions: i32,
    topic: String,
    properties: Vec<(String, String)>,
    request_timeout: Duration,
    operation_timeout: Duration,
    client_id: String,
    address_overrides: Vec<(String, String)>,
}

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
        }
    }

    /// Adds a librdkafka property (for example `security.protocol`, `sasl.mechanism`,
    /// `socket.keepalive.enable`) to every client the transport creates. The properties that
    /// carry the protocol's guarantees (`transactional.id`, `transaction.timeout.ms`,
    /// `enable.idempotence`, `acks`, `isolation.level`, `statistics.interval.ms`, ...) are set
    /// by the transport and cannot be overridden.
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((key.into(), value.into()));
        self
    }

    /// Uses another topic than [`STATE_TOPIC`] (tests, or several independent deployments on
    /// one cluster).
    pub fn with_topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = topic.into();
        self
    }

    /// How long one broker round trip may take: metadata, offsets, DescribeTransactions, topic
    /// checks; also how long a read may take to catch up to the last stable offset. Default 10 s.
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

    /// The extra librdkafka properties.
    pub fn properties(&self) -> &[(String, String)] {
        &self.properties
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

    /// A librdkafka configuration with the bootstrap servers, the client id, a few defaults
    /// that suit short coordination calls, the caller's `defaults`, and the user's properties
    /// on top. Callers set the properties that carry guarantees after this.
    pub(crate) fn client_config(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap_servers);
        c.set("client.id", &self.client_id);
        c.set(
            "socket.connection.setup.timeout.ms",
            // librdkafka's minimum is 1000 ms.
            millis(self.request_timeout).max(1000).to_string(),
        );
        c.set("log.connection.close", "false");
        for (k, v) in defaults {
            c.set(*k, *v);
        }
        for (k, v) in &self.properties {
            c.set(k, v);
        }
        c
    }
}

/// Whole milliseconds of `d`, saturated to `i32::MAX` (librdkafka's integer properties).
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis())
        .unwrap_or(i64::MAX)
        .min(i64::from(i32::MAX))
}
