//! Connection, security and timing settings: command-line flags over environment variables
//! (clap reads both) over a TOML file (`--config`), over the library's defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use kafka_coordination::kafka::{
    is_secret_property, KafkaConfig, KafkaSettings, KafkaTransport, SecuritySettings, TokenFile,
};
use kafka_coordination::options::{parse_duration, TimingSettings};

use super::failure::Failure;

/// The settings every subcommand takes. Its `Debug` shows no secret (see
/// [`is_secret_property`]).
#[derive(Args, Clone)]
pub struct Connection {
    /// A TOML file with a `[kafka]` table (bootstrap_servers, partitions, topic, client_id,
    /// request_timeout, operation_timeout, [kafka.security] (protocol, sasl_mechanism,
    /// sasl_username, sasl_password, sasl_oauthbearer_token_file, ssl_*), [kafka.properties],
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
    /// The state topic (default __coordination_state). It makes no namespace: role names are
    /// transactional ids, shared by the whole cluster whatever the topic.
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
    /// sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (with
    /// --sasl-oauthbearer-token-file).
    #[arg(long, env = "KC_SASL_MECHANISM", global = true)]
    pub sasl_mechanism: Option<String>,
    /// sasl.username.
    #[arg(long, env = "KC_SASL_USERNAME", global = true)]
    pub sasl_username: Option<String>,
    /// sasl.password. On the command line any local user can read it in the process list
    /// (the tool warns): prefer --sasl-password-file, the environment variable or the file.
    #[arg(long, env = "KC_SASL_PASSWORD", global = true, hide_env_values = true)]
    pub sasl_password: Option<String>,
    /// A file whose content (less a trailing newline) is sasl.password.
    #[arg(
        long,
        env = "KC_SASL_PASSWORD_FILE",
        global = true,
        value_name = "FILE",
        conflicts_with = "sasl_password"
    )]
    pub sasl_password_file: Option<PathBuf>,
    /// OAUTHBEARER: a file holding the JWT, read again whenever the client needs a fresh token
    /// (a sidecar keeps it fresh); its expiry is the JWT's exp claim. The token is never
    /// printed; `run` does not hand this variable to its child.
    #[arg(
        long,
        env = "KC_SASL_OAUTHBEARER_TOKEN_FILE",
        global = true,
        value_name = "FILE"
    )]
    pub sasl_oauthbearer_token_file: Option<PathBuf>,
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
    /// Any other client property, as KEY=VALUE (repeatable): the librdkafka names of the
    /// security settings the native client reads (`security.protocol`, `sasl.*`, `ssl.*`); the
    /// tool warns about any key it does not read.
    #[arg(long = "property", short = 'X', global = true, value_parser = parse_property, value_name = "KEY=VALUE")]
    pub properties: Vec<(String, String)>,
    /// A file of client properties, one KEY=VALUE a line (`#` starts a comment line): the way
    /// to pass a secret property (ssl.key.pem, sasl.password, ...) without putting it in the
    /// process list. -X wins over it.
    #[arg(long, env = "KC_PROPERTIES_FILE", global = true, value_name = "FILE")]
    pub properties_file: Option<PathBuf>,
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
            .field("sasl_password_file", &self.sasl_password_file)
            .field(
                "sasl_oauthbearer_token_file",
                &self.sasl_oauthbearer_token_file,
            )
            .field("properties", &properties)
            .field("properties_file", &self.properties_file)
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

/// The warnings about these settings: a password sent in clear, properties the client does
/// not read.
fn warn_about(config: &KafkaConfig, json: bool) {
    let warnings = [
        config.cleartext_password_warning().map(str::to_owned),
        config.unused_properties_warning(),
    ];
    for warning in warnings.into_iter().flatten() {
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
            toml_error_without_secrets(&text, &e)
        ))
    })
}

/// A TOML error for people, with no value of the file in it: the parser's own `Display`
/// quotes the offending line, which may hold a password. This names the line and column, the
/// key path (the table and the key written on that line: names, never values), and the
/// parser's message with every quoted string replaced by `<redacted>`.
pub(super) fn toml_error_without_secrets(text: &str, e: &toml::de::Error) -> String {
    let message = redact_quoted(e.message().trim_end());
    let Some(span) = e.span() else {
        return message;
    };
    let start = span.start.min(text.len());
    let before = text.get(..start).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    let table = before
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix('[')
                .and_then(|r| r.split(']').next())
                .map(|t| t.trim_start_matches('[').trim().to_owned())
        })
        .next_back();
    let this_line = text
        .get(line_start..)
        .and_then(|s| s.lines().next())
        .unwrap_or("");
    let key = this_line
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        });
    let path = match (table, key) {
        (Some(t), Some(k)) => format!(", key {t}.{k}"),
        (None, Some(k)) => format!(", key {k}"),
        (Some(t), None) => format!(", in table [{t}]"),
        (None, None) => String::new(),
    };
    format!("line {line}, column {column}{path}: {message}")
}

/// `text` with the content of every `"..."` and `'...'` replaced by `<redacted>` (serde's
/// messages quote values that way, say `invalid type: string "..."`; names are in backticks).
fn redact_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut open: Option<char> = None;
    for c in text.chars() {
        match open {
            Some(q) if c == q => {
                out.push_str("<redacted>");
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if c == '"' || c == '\'' {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        out.push_str("<redacted>");
    }
    out
}

/// The content of a secret's file, less one trailing newline; the error names the file and the
/// flag, never the content.
fn read_secret_file(path: &Path, what: &str) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read the {what} file {}: {e}",
            path.display()
        ))
    })?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    Ok(text.to_owned())
}

/// The KEY=VALUE lines of a properties file; an error names the line's number, never its text.
fn read_properties_file(path: &Path) -> Result<Vec<(String, String)>, Failure> {
    let text = read_secret_file(path, "--properties-file")?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let property = parse_property(line).map_err(|_| {
            Failure::usage(format!(
                "the properties file {} is not valid: line {} is not KEY=VALUE",
                path.display(),
                i + 1
            ))
        })?;
        out.push(property);
    }
    Ok(out)
}

impl Connection {
    /// The flags that put a secret on the command line, where every local user can read it in
    /// the process list: `--sasl-password` given as a flag (`from_command_line`, as clap
    /// reports its source) and every `-X` of a secret property.
    pub fn secrets_on_command_line(&self, from_command_line: bool) -> Vec<String> {
        let mut out = Vec::new();
        if from_command_line && self.sasl_password.is_some() {
            out.push("--sasl-password".to_owned());
        }
        for (k, _) in &self.properties {
            if is_secret_property(k) {
                out.push(format!("-X {k}"));
            }
        }
        out
    }

    /// Warns (on stderr) about `secrets`, the flags of
    /// [`secrets_on_command_line`](Self::secrets_on_command_line).
    pub fn warn_about_command_line(&self, secrets: &[String]) {
        if secrets.is_empty() {
            return;
        }
        let warning = format!(
            "a secret is on the command line ({}), where every local user can read it in the \
             process list: use --sasl-password-file, --properties-file or the environment \
             (KC_SASL_PASSWORD) instead",
            secrets.join(", ")
        );
        if self.json {
            eprintln!("{}", serde_json::json!({ "warning": warning }));
        } else {
            eprintln!("kafka-coordination: warning: {warning}");
        }
    }

    fn flag_settings(&self) -> Result<KafkaSettings, Failure> {
        let sasl_password = match &self.sasl_password_file {
            Some(path) => Some(read_secret_file(path, "--sasl-password-file")?),
            None => self.sasl_password.clone(),
        };
        let mut properties = match &self.properties_file {
            Some(path) => read_properties_file(path)?,
            None => Vec::new(),
        };
        properties.extend(self.properties.iter().cloned());
        Ok(KafkaSettings {
            bootstrap_servers: self.bootstrap_servers.clone(),
            partitions: self.partitions,
            topic: self.topic.clone(),
            client_id: self.client_id.clone(),
            request_timeout: self.request_timeout,
            security: SecuritySettings {
                protocol: self.security_protocol.clone(),
                sasl_mechanism: self.sasl_mechanism.clone(),
                sasl_username: self.sasl_username.clone(),
                sasl_password,
                ssl_ca_location: self.ssl_ca_location.clone(),
                ssl_certificate_location: self.ssl_certificate_location.clone(),
                ssl_key_location: self.ssl_key_location.clone(),
                sasl_oauthbearer_token_file: self.sasl_oauthbearer_token_file.clone(),
                ..SecuritySettings::default()
            },
            properties: properties.into_iter().collect(),
            ..KafkaSettings::default()
        })
    }

    /// The file's settings (if any) with the flags' and environment's on top. An OAUTHBEARER
    /// token file is read once here, so that a missing or malformed one is a configuration
    /// error at the start rather than a failed connection later.
    pub fn settings(&self) -> Result<(KafkaSettings, TimingSettings), Failure> {
        let file = match &self.config {
            Some(p) => read_file(p)?,
            None => FileSettings::default(),
        };
        let settings = file.kafka.merge(self.flag_settings()?);
        if let Some(path) = &settings.security.sasl_oauthbearer_token_file {
            TokenFile::new(path).read().map_err(Failure::usage)?;
        }
        Ok((settings, file.timing))
    }

    /// The Kafka configuration. Without a partition count anywhere, the state topic's real
    /// count is read from the cluster (the topic must then exist).
    pub fn kafka_config(&self) -> Result<KafkaConfig, Failure> {
        let (settings, _) = self.settings()?;
        let create = "kafka-coordination topic create --partitions N";
        self.config_with_count(settings, create, true, true)
    }

    /// The Kafka configuration on `topic` (a fleet's topic) instead of the state topic, with
    /// that topic's own partition count read from the cluster (`--partitions` and the file's
    /// count are the state topic's). The topic must exist. `warn`: print the warnings about
    /// the settings (once per command: they are the state topic's too).
    pub fn kafka_config_on(&self, topic: &str, warn: bool) -> Result<KafkaConfig, Failure> {
        let (mut settings, _) = self.settings()?;
        settings.topic = Some(topic.to_owned());
        settings.partitions = None;
        let create = format!("kafka-coordination topic create --topic {topic} --partitions 1");
        self.config_with_count(settings, &create, false, warn)
    }

    /// `settings` as a configuration; without a partition count, the topic's own, read from
    /// the cluster (`create` says how to create a missing topic; `or_flag`: the message also
    /// offers --partitions; `warn`: print the warnings about the settings).
    fn config_with_count(
        &self,
        settings: KafkaSettings,
        create: &str,
        or_flag: bool,
        warn: bool,
    ) -> Result<KafkaConfig, Failure> {
        if settings.bootstrap_servers.is_none() {
            return Err(Failure::usage(
                "no bootstrap servers: pass --bootstrap-servers HOST:PORT, set \
                 KC_BOOTSTRAP_SERVERS, or set bootstrap_servers in the [kafka] table of the \
                 --config file",
            ));
        }
        if settings.partitions.is_some() {
            let config = settings.into_config().map_err(Failure::config)?;
            if warn {
                warn_about(&config, self.json);
            }
            return Ok(config);
        }
        let probe = settings
            .clone()
            .into_config_with(Some(1))
            .map_err(Failure::config)?;
        if warn {
            warn_about(&probe, self.json);
        }
        let report = KafkaTransport::new(probe)
            .and_then(|t| t.describe_topic())
            .map_err(Failure::transport)?;
        match report.partitions {
            Some(p) if report.exists => settings.into_config_with(Some(p)).map_err(Failure::config),
            _ => Err(Failure::usage(format!(
                "topic {} does not exist, so its partition count cannot be read; create it \
                 with `{create}`{}",
                report.topic,
                if or_flag {
                    ", or pass --partitions"
                } else {
                    ""
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &[&str]) -> Connection {
        let command = <Connection as clap::Args>::augment_args(clap::Command::new("kc"));
        let matches = command
            .try_get_matches_from(std::iter::once("kc").chain(args.iter().copied()))
            .expect("valid flags");
        <Connection as clap::FromArgMatches>::from_arg_matches(&matches).expect("parsed")
    }

    fn scratch_file(name: &str, content: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kc-settings-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(name);
        std::fs::write(&path, content).expect("write");
        path
    }

    #[test]
    fn secrets_come_from_their_files_and_flags_win_over_the_properties_file() {
        let pw = scratch_file("pw", "file-pw-12\n");
        let props = scratch_file(
            "props",
            "# comment\n\nssl.key.pem=pem-12\nssl.crl.location = from-file\n",
        );
        let c = parsed(&[
            "--sasl-password-file",
            pw.to_str().expect("utf-8"),
            "--properties-file",
            props.to_str().expect("utf-8"),
            "-X",
            "ssl.crl.location=from-flag",
        ]);
        let (settings, _) = c.settings().ok().expect("settings");
        assert_eq!(
            settings.security.sasl_password.as_deref(),
            Some("file-pw-12")
        );
        assert_eq!(
            settings.properties.get("ssl.key.pem").map(String::as_str),
            Some("pem-12")
        );
        assert_eq!(
            settings
                .properties
                .get("ssl.crl.location")
                .map(String::as_str),
            Some("from-flag")
        );
        assert!(c.secrets_on_command_line(false).is_empty());
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("file-pw-12") && !shown.contains("pem-12"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_secret_file_is_named_without_its_content() {
        let props = scratch_file("bad-props", "ssl.key.pem=ok\nsecret-without-equals-12\n");
        let c = parsed(&["--properties-file", props.to_str().expect("utf-8")]);
        let Err(f) = c.settings() else {
            panic!("a bad line is an error")
        };
        assert!(f.message.contains("line 2"), "{}", f.message);
        assert!(!f.message.contains("secret-without"), "{}", f.message);
        let c = parsed(&["--sasl-password-file", "/nonexistent/kc-pw"]);
        let Err(f) = c.settings() else {
            panic!("a missing file is an error")
        };
        assert!(f.message.contains("--sasl-password-file"), "{}", f.message);
        assert_eq!(f.code, super::super::failure::EXIT_CONFIG);
    }

    #[test]
    fn a_bad_oauthbearer_token_file_is_a_configuration_error_naming_it() {
        let empty = scratch_file("empty-token", "\n");
        for (args, says) in [
            (
                "/nonexistent/kc-token".to_owned(),
                "cannot read the OAUTHBEARER token file /nonexistent/kc-token",
            ),
            (empty.to_str().expect("utf-8").to_owned(), "is empty"),
        ] {
            let Err(f) = parsed(&["--sasl-oauthbearer-token-file", &args]).settings() else {
                panic!("{args} is an error")
            };
            assert!(f.message.contains(says), "{}", f.message);
            assert_eq!(f.code, super::super::failure::EXIT_CONFIG);
        }
        let toml = scratch_file(
            "oauth.toml",
            "[kafka.security]\nsasl_mechanism = \"OAUTHBEARER\"\n\
             sasl_oauthbearer_token_file = \"/nonexistent/kc-token-2\"\n",
        );
        let Err(f) = parsed(&["--config", toml.to_str().expect("utf-8")]).settings() else {
            panic!("the file's token file is read too")
        };
        assert!(
            f.message.contains("/nonexistent/kc-token-2"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_toml_error_names_line_column_and_key_but_no_value() {
        let text = "[kafka]\ntopic = \"t\"\n\n[kafka.security]\nsasl_password = \"pw-tom-3\" x\n";
        let e = toml::from_str::<FileSettings>(text).expect_err("invalid");
        let shown = toml_error_without_secrets(text, &e);
        assert!(!shown.contains("pw-tom-3"), "{shown}");
        assert!(
            shown.starts_with("line 5, column ") && shown.contains("kafka.security.sasl_password"),
            "{shown}"
        );
        assert_eq!(
            redact_quoted(r#"a "b" c 'd' `e`"#),
            r#"a "<redacted>" c '<redacted>' `e`"#
        );
        assert_eq!(redact_quoted(r#"open "abc"#), r#"open "<redacted>"#);
    }
}
