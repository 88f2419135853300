//! Connection, security and timing settings: command-line flags over environment variables
//! (clap reads both) over a TOML file (`--config`), over the library's defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use kafka_coordination::kafka::{
    is_secret_property, KafkaConfig, KafkaSettings, KafkaTransport, SecuritySettings,
};
use kafka_coordination::options::{parse_duration, TimingSettings};

use super::failure::Failure;

/// The settings every subcommand takes. Its `Debug` shows no secret (see
/// [`is_secret_property`]).
#[derive(Args, Clone)]
pub struct Connection {
    /// A TOML file with a `[kafka]` table (bootstrap_servers, partitions, topic, client_id,
    /// request_timeout, operation_timeout, [kafka.security], [kafka.properties],
    /// [kafka.address_overrides]) and a `[timing]` table (lease_duration, renew_interval,
    /// challenge_stagger, give_up_after, long_poll). Flags and environment variables win
    /// over it.
    #[arg(long, env = "KC_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The cluster's bootstrap servers (host:port,...).
    #[arg(
        long,
        short = 'b',
        env = "KC_BOOTSTRAP_SERVERS",
        global = true,
        value_name = "HOST:PORT,..."
    )]
    pub bootstrap_servers: Option<String>,
    /// The partition count of the state topic (default: read from the topic).
    #[arg(long, env = "KC_PARTITIONS", global = true)]
    pub partitions: Option<i32>,
    /// The state topic (default __coordination_state).
    #[arg(long, env = "KC_TOPIC", global = true)]
    pub topic: Option<String>,
    /// The client.id sent to the brokers.
    #[arg(long, env = "KC_CLIENT_ID", global = true)]
    pub client_id: Option<String>,
    /// How long one broker round trip may take (e.g. 10s).
    #[arg(long, env = "KC_REQUEST_TIMEOUT", global = true, value_parser = parse_duration, value_name = "DURATION")]
    pub request_timeout: Option<Duration>,
    /// security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    #[arg(long, env = "KC_SECURITY_PROTOCOL", global = true)]
    pub security_protocol: Option<String>,
    /// sasl.mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, env = "KC_SASL_MECHANISM", global = true)]
    pub sasl_mechanism: Option<String>,
    /// sasl.username.
    #[arg(long, env = "KC_SASL_USERNAME", global = true)]
    pub sasl_username: Option<String>,
    /// sasl.password (prefer the environment variable or the file to the flag).
    #[arg(long, env = "KC_SASL_PASSWORD", global = true, hide_env_values = true)]
    pub sasl_password: Option<String>,
    /// ssl.ca.location: the CA's PEM file or directory.
    #[arg(long, env = "KC_SSL_CA_LOCATION", global = true, value_name = "PATH")]
    pub ssl_ca_location: Option<String>,
    /// ssl.certificate.location: the client's PEM certificate (mutual TLS).
    #[arg(
        long,
        env = "KC_SSL_CERTIFICATE_LOCATION",
        global = true,
        value_name = "PATH"
    )]
    pub ssl_certificate_location: Option<String>,
    /// ssl.key.location: the client's PEM key (mutual TLS).
    #[arg(long, env = "KC_SSL_KEY_LOCATION", global = true, value_name = "PATH")]
    pub ssl_key_location: Option<String>,
    /// Any other client property, as KEY=VALUE (repeatable): librdkafka-style names that the
    /// native client reads (`security.protocol`, `sasl.*`, `ssl.*`, `client.rack`); it reads no
    /// other key.
    #[arg(long = "property", short = 'X', global = true, value_parser = parse_property, value_name = "KEY=VALUE")]
    pub properties: Vec<(String, String)>,
    /// Print JSON (one object per line) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `value`, or `<redacted>` when `key` names a secret.
fn shown<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret_property(key) {
        "<redacted>"
    } else {
        value
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let properties: Vec<(&str, &str)> = self
            .properties
            .iter()
            .map(|(k, v)| (k.as_str(), shown(k, v)))
            .collect();
        f.debug_struct("Connection")
            .field("config", &self.config)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("partitions", &self.partitions)
            .field("topic", &self.topic)
            .field("client_id", &self.client_id)
            .field("request_timeout", &self.request_timeout)
            .field("security_protocol", &self.security_protocol)
            .field("sasl_mechanism", &self.sasl_mechanism)
            .field("sasl_username", &self.sasl_username)
            .field(
                "sasl_password",
                &self
                    .sasl_password
                    .as_deref()
                    .map(|v| shown("sasl.password", v)),
            )
            .field("ssl_ca_location", &self.ssl_ca_location)
            .field("ssl_certificate_location", &self.ssl_certificate_location)
            .field("ssl_key_location", &self.ssl_key_location)
            .field("properties", &properties)
            .field("json", &self.json)
            .finish()
    }
}

/// Whether the supervisor's environment variable `name` carries a connection secret
/// (`KC_SASL_PASSWORD`, and any other `KC_*` variable that [`is_secret_property`] names): `run`
/// does not hand it to its child unless asked to (`--pass-secrets`).
pub fn is_secret_variable(name: &str) -> bool {
    name.starts_with("KC_") && is_secret_property(name)
}

/// The warning for settings that send a password in clear, if they do.
fn warn_about(config: &KafkaConfig, json: bool) {
    if let Some(warning) = config.cleartext_password_warning() {
        if json {
            eprintln!("{}", serde_json::json!({ "warning": warning }));
        } else {
            eprintln!("kafka-coordination: warning: {warning}");
        }
    }
}

fn parse_property(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

/// The configuration file: a `[kafka]` and a `[timing]` table.
#[derive(serde::Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    #[serde(default)]
    pub kafka: KafkaSettings,
    #[serde(default)]
    pub timing: TimingSettings,
}

pub fn read_file(path: &Path) -> Result<FileSettings, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read the configuration file {}: {e}",
            path.display()
        ))
    })?;
    toml::from_str(&text).map_err(|e| {
        Failure::usage(format!(
            "the configuration file {} is not valid: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    })
}

impl Connection {
    fn flag_settings(&self) -> KafkaSettings {
        KafkaSettings {
            bootstrap_servers: self.bootstrap_servers.clone(),
            partitions: self.partitions,
            topic: self.topic.clone(),
            client_id: self.client_id.clone(),
            request_timeout: self.request_timeout,
            security: SecuritySettings {
                protocol: self.security_protocol.clone(),
                sasl_mechanism: self.sasl_mechanism.clone(),
                sasl_username: self.sasl_username.clone(),
                sasl_password: self.sasl_password.clone(),
                ssl_ca_location: self.ssl_ca_location.clone(),
                ssl_certificate_location: self.ssl_certificate_location.clone(),
                ssl_key_location: self.ssl_key_location.clone(),
                ..SecuritySettings::default()
            },
            properties: self.properties.iter().cloned().collect(),
            ..KafkaSettings::default()
        }
    }

    /// The file's settings (if any) with the flags' and environment's on top.
    pub fn settings(&self) -> Result<(KafkaSettings, TimingSettings), Failure> {
        let file = match &self.config {
            Some(p) => read_file(p)?,
            None => FileSettings::default(),
        };
        Ok((file.kafka.merge(self.flag_settings()), file.timing))
    }

    /// The Kafka configuration. Without a partition count anywhere, the state topic's real
    /// count is read from the cluster (the topic must then exist).
    pub fn kafka_config(&self) -> Result<KafkaConfig, Failure> {
        let (settings, _) = self.settings()?;
        if settings.bootstrap_servers.is_none() {
            return Err(Failure::usage(
                "no bootstrap servers: pass --bootstrap-servers HOST:PORT, set \
                 KC_BOOTSTRAP_SERVERS, or set bootstrap_servers in the [kafka] table of the \
                 --config file",
            ));
        }
        if settings.partitions.is_some() {
            let config = settings.into_config().map_err(Failure::config)?;
            warn_about(&config, self.json);
            return Ok(config);
        }
        let probe = settings
            .clone()
            .into_config_with(Some(1))
            .map_err(Failure::config)?;
        warn_about(&probe, self.json);
        let report = KafkaTransport::new(probe)
            .and_then(|t| t.describe_topic())
            .map_err(Failure::transport)?;
        match report.partitions {
            Some(p) if report.exists => settings.into_config_with(Some(p)).map_err(Failure::config),
            _ => Err(Failure::config(format!(
                "topic {} does not exist, so its partition count cannot be read; create it \
                 with `kafka-coordination topic create --partitions N`, or pass --partitions",
                report.topic
            ))),
        }
    }

    /// [`kafka_config`](Self::kafka_config) for `topic`: without a partition count anywhere,
    /// `default_partitions`, and the topic need not exist.
    pub fn topic_config(&self, default_partitions: i32) -> Result<KafkaConfig, Failure> {
        let (settings, _) = self.settings()?;
        if settings.bootstrap_servers.is_none() {
            return self.kafka_config(); // says what is missing
        }
        let config = settings
            .into_config_with(Some(default_partitions))
            .map_err(Failure::config)?;
        warn_about(&config, self.json);
        Ok(config)
    }

    /// A client on the configuration, with the state topic checked.
    pub fn connect(&self) -> Result<KafkaTransport, Failure> {
        let config = self.kafka_config()?;
        KafkaTransport::connect(config).map_err(Failure::transport)
    }
}
