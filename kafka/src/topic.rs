//! The state topic's check and creation, its description, and broker settings, over the
//! native connections of [`Cluster`]: Metadata (partitions, replicas, brokers), DescribeConfigs
//! (the topic's `cleanup.policy`, `min.insync.replicas`, `compression.type`; a broker's
//! settings) and CreateTopics, each built and read in its file of [`crate::api`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;

use super::api::create_topics::{new_topic, CreateTopics};
use super::api::describe_configs::{Denied, DescribeConfigs, Resource};
use super::api::metadata::Layout;
use super::api::Attempt;
use super::classify::code;
use super::cluster::Cluster;
use super::config::{millis, KafkaConfig};
use super::task_runtime::block_on;
use kafka_coordination_transport::error::TransportError;

/// The value `cleanup.policy` must have.
const COMPACT: &str = "compact";

/// The brokers and the topic's layout.
fn layout(config: &KafkaConfig, cluster: &Cluster) -> Result<Layout, TransportError> {
    let deadline = Instant::now() + config.request_timeout();
    block_on(cluster.layout(config.topic(), deadline))
}

/// The values of the state topic's configuration entries `keys` (DescribeConfigs at the leader
/// of partition 0: any broker answers for a topic), or `None` while the broker does not know
/// the topic yet. `denied` names who asks, for the error when the principal may not describe
/// them.
fn topic_configs(
    config: &KafkaConfig,
    cluster: &Cluster,
    keys: &[&str],
    denied: Denied,
) -> Result<Option<Vec<Option<String>>>, TransportError> {
    let topic = config.topic();
    let what = format!("describing the configuration of topic {topic}");
    let deadline = Instant::now() + config.request_timeout();
    let x = DescribeConfigs {
        what: &what,
        of: Resource::Topic {
            name: topic,
            denied,
        },
        keys,
    };
    cluster.retry(&what, deadline, |cluster| {
        cluster.at_leader(topic, 0, deadline, |conn| conn.exchange(&x, deadline))
    })
}

/// The topic's `cleanup.policy`, or `None` while the broker does not know the topic yet.
fn cleanup_policy(
    config: &KafkaConfig,
    cluster: &Cluster,
) -> Result<Option<String>, TransportError> {
    let values = topic_configs(config, cluster, &["cleanup.policy"], Denied::Check)?;
    Ok(values.and_then(|v| v.into_iter().next().flatten()))
}

fn create_hint(config: &KafkaConfig) -> String {
    format!(
        "create it with `kafka-coordination topic create --bootstrap-servers HOST:PORT --topic {topic} \
         --partitions {partitions}` (the kafka-coordination-cli crate's tool; replication 3 and \
         min.insync.replicas 2 where the cluster has the brokers), with \
         KafkaTransport::create_topic, or with kafka-topics.sh --create --topic {topic} \
         --partitions {partitions} --replication-factor 3 --config cleanup.policy=compact \
         --config min.insync.replicas=2",
        topic = config.topic(),
        partitions = config.partitions()
    )
}

/// Why the check failed: the topic is missing, or its configuration shows no
/// `cleanup.policy` yet (both may pass right after a creation, while the new topic reaches
/// every broker), or anything else.
enum CheckError {
    Missing(TransportError),
    Other(TransportError),
}

impl From<TransportError> for CheckError {
    fn from(e: TransportError) -> Self {
        CheckError::Other(e)
    }
}

impl CheckError {
    fn into_error(self) -> TransportError {
        match self {
            CheckError::Missing(e) | CheckError::Other(e) => e,
        }
    }
}

/// Checks that the state topic exists, is compacted and has exactly the configured partition
/// count. A topic that looks missing is looked at again after a pause before that is reported:
/// a broker whose metadata lags (a topic created a moment ago, a broker under load) does not
/// know it yet.
pub(crate) fn ensure(config: &KafkaConfig, cluster: &Cluster) -> Result<(), TransportError> {
    match check(config, cluster) {
        Err(CheckError::Missing(_)) => {
            thread::sleep(super::cluster::CONFIRM_PAUSE);
            check(config, cluster).map_err(CheckError::into_error)
        }
        other => other.map_err(CheckError::into_error),
    }
}

/// Where the troubleshooting page explains the check's refusals.
const STATE_TOPIC_SECTION: &str = kafka_coordination_transport::error::section::STATE_TOPIC;

fn check(config: &KafkaConfig, cluster: &Cluster) -> Result<(), CheckError> {
    let topic = config.topic();
    let Some(count) = layout(config, cluster)?.replicas.map(|r| r.len()) else {
        return Err(CheckError::Missing(
            TransportError::config(format!(
                "topic {topic} does not exist; {}",
                create_hint(config)
            ))
            .in_section(STATE_TOPIC_SECTION),
        ));
    };
    if i64::try_from(count).ok() != Some(i64::from(config.partitions())) {
        return Err(CheckError::Other(
            TransportError::config(format!(
                "topic {topic} has {count} partitions but this member is configured with {}; \
                 every member must pass the topic's real partition count (set partitions = \
                 {count}), or the roles' records land in different partitions and their order \
                 breaks",
                config.partitions()
            ))
            .in_section(STATE_TOPIC_SECTION),
        ));
    }
    let policy = cleanup_policy(config, cluster)?;
    if policy.as_deref().map(str::trim) == Some(COMPACT) {
        return Ok(());
    }
    let error = TransportError::config(format!(
        "topic {topic} has cleanup.policy={} but it needs cleanup.policy=compact (without \
         delete, which would drop registrations and leases by age); fix it with: \
         kafka-configs.sh --bootstrap-server BOOTSTRAP --alter --entity-type topics \
         --entity-name {topic} --add-config cleanup.policy=compact",
        policy.as_deref().unwrap_or("<unknown>")
    ))
    .in_section(STATE_TOPIC_SECTION);
    match policy {
        // A broker that has not loaded a new topic yet describes it without its configuration.
        None => Err(CheckError::Missing(error)),
        Some(_) => Err(CheckError::Other(error)),
    }
}

/// How long the broker may take over a CreateTopics sent with `left` before the client's
/// deadline: half of it. A broker that waits its whole timeout for a slow controller (ZooKeeper
/// mode, a loaded machine) then still answers REQUEST_TIMED_OUT before the client gives up on
/// the connection, and the creation is tried again within the other half.
fn broker_timeout(left: Duration) -> Duration {
    (left / 2).max(Duration::from_millis(1))
}

/// One attempt's answer, once an earlier attempt may have timed out at the broker
/// (`timed_out`, set here when this one did): the controller goes on creating a topic after
/// the broker answered REQUEST_TIMED_OUT, so TOPIC_ALREADY_EXISTS after such an answer means
/// that this call created it.
fn after_attempt(answer: Result<bool, Attempt>, timed_out: &mut bool) -> Result<bool, Attempt> {
    match answer {
        Ok(created) => Ok(created || *timed_out),
        Err(Attempt::Again {
            code: Some(code), ..
        }) if code == code::E::RequestTimedOut.code() => {
            *timed_out = true;
            answer
        }
        other => other,
    }
}

/// Creates the state topic (compacted, the configured partition count) if it does not exist,
/// then checks it. Returns whether this call created it.
pub(crate) fn create(
    config: &KafkaConfig,
    cluster: &Cluster,
    replication_factor: i32,
    min_insync_replicas: Option<i32>,
) -> Result<bool, TransportError> {
    let topic = config.topic();
    let what = format!("creating topic {topic}");
    let mut settings = vec![("cleanup.policy", COMPACT.to_owned())];
    if let Some(m) = min_insync_replicas {
        settings.push(("min.insync.replicas", m.to_string()));
    }
    let new_topic = new_topic(
        &what,
        topic,
        config.partitions(),
        replication_factor,
        &settings,
    )?;
    let created = send_create(config, cluster, &what, &new_topic)?;
    // Metadata reaches every broker shortly after a creation (ours, or a concurrent one that
    // answered TOPIC_ALREADY_EXISTS).
    let deadline = Instant::now() + config.request_timeout();
    loop {
        match check(config, cluster) {
            Ok(()) => return Ok(created),
            Err(CheckError::Missing(_)) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into_error()),
        }
    }
}

/// Sends the CreateTopics of `new_topic` to the controller, retried until the request timeout:
/// whether this call created it (`false`: it existed).
fn send_create(
    config: &KafkaConfig,
    cluster: &Cluster,
    what: &str,
    new_topic: &CreatableTopic,
) -> Result<bool, TransportError> {
    let topic = new_topic.name.0.as_str();
    let deadline = Instant::now() + config.request_timeout();
    let mut timed_out = false;
    cluster.retry(what, deadline, |cluster| {
        // The controller (on a KRaft cluster any broker forwards to it); NOT_CONTROLLER
        // looks it up again.
        let layout = block_on(cluster.layout(topic, deadline)).map_err(Attempt::Stop)?;
        let Some(addr) = layout
            .controller
            .or_else(|| layout.brokers.first().map(|(_, a)| a.clone()))
        else {
            return Err(Attempt::again("the metadata names no broker"));
        };
        let timeout = broker_timeout(deadline.saturating_duration_since(Instant::now()));
        let x = CreateTopics {
            what,
            topic: new_topic,
            timeout_ms: i32::try_from(millis(timeout)).unwrap_or(i32::MAX),
        };
        let answer = cluster.on(&addr, deadline, |conn| conn.exchange(&x, deadline));
        after_attempt(answer, &mut timed_out)
    })
}

/// Creates a plain topic of the application's (`cleanup.policy` the broker's default) unless
/// it exists, and waits until the metadata shows it. Returns whether this call created it and
/// the topic's partition count.
pub(crate) fn create_plain(
    config: &KafkaConfig,
    cluster: &Cluster,
    name: &str,
    partitions: i32,
    replication_factor: i32,
    min_insync_replicas: Option<i32>,
) -> Result<(bool, i32), TransportError> {
    let what = format!("creating topic {name}");
    let settings: Vec<_> = min_insync_replicas
        .map(|m| ("min.insync.replicas", m.to_string()))
        .into_iter()
        .collect();
    let new_topic = new_topic(&what, name, partitions, replication_factor, &settings)?;
    let created = send_create(config, cluster, &what, &new_topic)?;
    let deadline = Instant::now() + config.request_timeout();
    loop {
        let layout = block_on(cluster.layout(name, deadline))?;
        if let Some(count) = layout.replicas.map(|r| r.len()) {
            return Ok((created, i32::try_from(count).unwrap_or(i32::MAX)));
        }
        if Instant::now() >= deadline {
            return Err(TransportError::retriable(format!(
                "{what}: the metadata does not show the topic yet"
            )));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// How bad a [`Finding`] about the state topic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// The library refuses the topic, or writes to it cannot succeed.
    Error,
    /// It works, but not as safely as it should (durability).
    Warning,
    /// Worth knowing; nothing to fix for this library.
    Info,
}

/// One thing wrong with the state topic, and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// What is wrong and the command that fixes it.
    pub message: String,
}

/// The state topic as the cluster describes it
/// ([`KafkaTransport::describe_topic`](super::KafkaTransport::describe_topic)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicReport {
    /// The topic's name.
    pub topic: String,
    /// How many brokers the cluster has.
    pub brokers: usize,
    /// Whether it exists; the other fields are `None` when it does not.
    pub exists: bool,
    /// Its partition count.
    pub partitions: Option<i32>,
    /// The smallest replica count of its partitions.
    pub replication_factor: Option<i32>,
    /// Its `cleanup.policy`.
    pub cleanup_policy: Option<String>,
    /// Its `min.insync.replicas`.
    pub min_insync_replicas: Option<i32>,
    /// Its `compression.type` (`producer`, Kafka's default, keeps what each producer sent).
    pub compression_type: Option<String>,
    /// Why the transaction coordinator did not answer a DescribeTransactions for a probe
    /// transactional id (`None`: it answered, or the principal may not describe the probe, so
    /// nothing is known). Standbys and `describe` need the answer (Kafka 3.0 and newer).
    pub describe_transactions_failed: Option<String>,
}

impl TopicReport {
    /// What is wrong with the topic for members configured with `partitions`: errors for what
    /// the library refuses or what makes every write fail, warnings for weak durability, and
    /// an [`Info`](Severity::Info) line naming a `compression.type` that recompresses every
    /// batch. Empty when all is well.
    pub fn findings(&self, partitions: i32) -> Vec<Finding> {
        let topic = &self.topic;
        let mut out = Vec::new();
        let mut error = |message: String| {
            out.push(Finding {
                severity: Severity::Error,
                message,
            })
        };
        if !self.exists {
            error(format!(
                "topic {topic} does not exist; create it with `kafka-coordination topic create \
                 --partitions {partitions} --replication-factor 3 --min-insync-replicas 2`"
            ));
            return out;
        }
        if let Some(why) = &self.describe_transactions_failed {
            error(format!(
                "the transaction coordinator does not answer DescribeTransactions ({why}): \
                 standbys and `describe` need it (Apache Kafka 3.0 and newer, or a compatible \
                 broker that implements KIP-664)"
            ));
        }
        if let Some(p) = self.partitions.filter(|&p| p != partitions) {
            error(format!(
                "topic {topic} has {p} partitions but members are configured with {partitions}: \
                 every member must use the topic's real count (partitions = {p}); the count of \
                 an existing topic must never change, or roles' records land in other partitions"
            ));
        }
        let policy = self.cleanup_policy.as_deref().map(str::trim);
        if policy != Some(COMPACT) {
            error(format!(
                "topic {topic} has cleanup.policy={} but it needs cleanup.policy=compact \
                 (delete drops registrations and leases by age); fix it with: kafka-configs.sh \
                 --bootstrap-server BOOTSTRAP --alter --entity-type topics --entity-name {topic} \
                 --add-config cleanup.policy=compact",
                policy.unwrap_or("<unknown>")
            ));
        }
        if let (Some(min), Some(rf)) = (self.min_insync_replicas, self.replication_factor) {
            if min > rf {
                error(format!(
                    "topic {topic} has min.insync.replicas={min} above its replication factor \
                     {rf}: every write fails with NOT_ENOUGH_REPLICAS; lower it with \
                     kafka-configs.sh --bootstrap-server BOOTSTRAP --alter --entity-type topics \
                     --entity-name {topic} --add-config min.insync.replicas={rf}"
                ));
            }
        }
        let mut warn = |message: String| {
            out.push(Finding {
                severity: Severity::Warning,
                message,
            })
        };
        if let Some(rf) = self.replication_factor.filter(|&rf| rf < 3) {
            warn(format!(
                "topic {topic} has replication factor {rf} (the cluster has {} broker(s)): a \
                 partition's registrations and leases are lost with its {rf} replica(s); use 3 \
                 on a production cluster (kafka-reassign-partitions.sh)",
                self.brokers
            ));
        }
        if let Some(min) = self.min_insync_replicas.filter(|&m| m < 2) {
            if self.replication_factor.is_some_and(|rf| rf >= 2) {
                warn(format!(
                    "topic {topic} has min.insync.replicas={min}: a write acknowledged by one \
                     replica can be lost with it; set it to 2 with kafka-configs.sh \
                     --bootstrap-server BOOTSTRAP --alter --entity-type topics --entity-name \
                     {topic} --add-config min.insync.replicas=2"
                ));
            }
        }
        let compression = self.compression_type.as_deref().map(str::trim);
        if let Some(codec) = compression.filter(|c| !matches!(*c, "producer" | "uncompressed")) {
            out.push(Finding {
                severity: Severity::Info,
                message: format!(
                    "topic {topic} has compression.type={codec}: the broker stores every batch                      written to it compressed with {codec}. This library reads gzip, snappy, lz4                      and zstd batches, but members on older versions of it, or other clients,                      may not; compression.type=producer (Kafka's default) keeps what each                      producer sent"
                ),
            });
        }
        out
    }
}

/// The state topic as the cluster describes it.
pub(crate) fn describe(
    config: &KafkaConfig,
    cluster: &Cluster,
) -> Result<TopicReport, TransportError> {
    let layout = layout(config, cluster)?;
    let mut report = TopicReport {
        topic: config.topic().to_owned(),
        brokers: layout.brokers.len(),
        exists: layout.replicas.is_some(),
        partitions: None,
        replication_factor: None,
        cleanup_policy: None,
        min_insync_replicas: None,
        compression_type: None,
        describe_transactions_failed: None,
    };
    if let Some(replicas) = layout.replicas {
        report.partitions = i32::try_from(replicas.len()).ok();
        report.replication_factor = i32::try_from(replicas.iter().copied().min().unwrap_or(0)).ok();
        let settings = topic_configs(
            config,
            cluster,
            &["cleanup.policy", "min.insync.replicas", "compression.type"],
            Denied::Describe,
        )?
        .unwrap_or_default();
        let mut settings = settings.into_iter();
        report.cleanup_policy = settings.next().flatten();
        report.min_insync_replicas = settings
            .next()
            .flatten()
            .and_then(|v| v.trim().parse().ok());
        report.compression_type = settings.next().flatten();
    }
    Ok(report)
}

/// A broker setting (DescribeConfigs of the broker with the lowest node id, on its own
/// connection), if it can be learned.
pub(crate) fn broker_setting(
    config: &KafkaConfig,
    cluster: &Cluster,
    name: &str,
) -> Option<String> {
    let (id, addr) = layout(config, cluster).ok()?.brokers.into_iter().next()?;
    let what = format!("describing the configuration of broker {id}");
    let deadline = Instant::now() + config.request_timeout();
    let id = id.to_string();
    let x = DescribeConfigs {
        what: &what,
        of: Resource::Broker { id: &id },
        keys: &[name],
    };
    let described = cluster.retry(&what, deadline, |cluster| {
        cluster.on(&addr, deadline, |conn| conn.exchange(&x, deadline))
    });
    described.ok()??.into_iter().next().flatten()
}

/// The state topic's check (see [`KafkaTransport::ensure_topic`](super::KafkaTransport::ensure_topic)), done once.
pub(super) struct Check {
    pub(super) config: Arc<KafkaConfig>,
    pub(super) cluster: Arc<Cluster>,
    pub(super) checked: Arc<AtomicBool>,
}

impl Check {
    /// Checks the topic unless that was done.
    pub(super) fn run(&self) -> Result<(), TransportError> {
        if self.checked.load(Ordering::Acquire) {
            return Ok(());
        }
        self.cluster
            .reach(Instant::now() + self.config.request_timeout())?;
        ensure(&self.config, &self.cluster)?;
        self.checked.store(true, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy(compression_type: Option<&str>) -> TopicReport {
        TopicReport {
            topic: "t".into(),
            brokers: 3,
            exists: true,
            partitions: Some(16),
            replication_factor: Some(3),
            cleanup_policy: Some("compact".into()),
            min_insync_replicas: Some(2),
            compression_type: compression_type.map(str::to_owned),
            describe_transactions_failed: None,
        }
    }

    /// The broker gets half of the time left, so its REQUEST_TIMED_OUT arrives before the
    /// client's deadline; that answer is tried again, and TOPIC_ALREADY_EXISTS after it counts
    /// as created by this call (the controller finished the first request).
    #[test]
    fn a_create_topics_that_times_out_at_the_broker_is_tried_again_and_counts_as_created() {
        use crate::net::conn::Replay;
        use crate::net::Conn;
        use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
        use kafka_protocol::messages::{CreateTopicsResponse, TopicName};
        use kafka_protocol::protocol::{Encodable, StrBytes};

        assert_eq!(
            broker_timeout(Duration::from_secs(10)),
            Duration::from_secs(5)
        );
        assert_eq!(broker_timeout(Duration::ZERO), Duration::from_millis(1));

        let answer = |error_code: i16, correlation: i32| {
            let resp =
                CreateTopicsResponse::default().with_topics(vec![CreatableTopicResult::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_error_code(error_code)]);
            let mut b = bytes::BytesMut::new();
            resp.encode(&mut b, 5).expect("encode");
            // Response header v1 (CreateTopics v5 is flexible): correlation id, no tags.
            let mut f = ((b.len() + 5) as i32).to_be_bytes().to_vec();
            f.extend(correlation.to_be_bytes());
            f.push(0);
            f.extend(&b[..]);
            f
        };
        let mut frames = answer(code::E::RequestTimedOut.code(), 1);
        frames.extend(answer(code::E::TopicAlreadyExists.code(), 2));
        let mut conn =
            Conn::over("broker:9092", Box::new(Replay::new(frames))).with_versions(&[(19, 5)]);
        let topic = new_topic("creating t", "t", 1, 1, &[]).expect("in range");
        let x = CreateTopics {
            what: "creating t",
            topic: &topic,
            timeout_ms: 1_000,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut timed_out = false;
        let first = conn.exchange(&x, deadline);
        match after_attempt(first, &mut timed_out) {
            Err(Attempt::Again { code, why, .. }) => {
                assert_eq!(code, Some(7), "{why}");
            }
            Err(_) => panic!("REQUEST_TIMED_OUT is tried again"),
            Ok(created) => panic!("REQUEST_TIMED_OUT is no answer (created: {created})"),
        }
        assert!(timed_out);
        let second = conn.exchange(&x, deadline);
        assert!(
            matches!(after_attempt(second, &mut timed_out), Ok(true)),
            "TOPIC_ALREADY_EXISTS after a timeout: created by this call"
        );
        let mut fresh = false;
        assert!(matches!(after_attempt(Ok(false), &mut fresh), Ok(false)));
    }

    #[test]
    fn a_recompressing_compression_type_is_reported_as_information_only() {
        for quiet in [None, Some("producer"), Some("uncompressed")] {
            assert_eq!(healthy(quiet).findings(16), vec![], "{quiet:?}");
        }
        for codec in ["zstd", "lz4", "snappy", "gzip"] {
            let findings = healthy(Some(codec)).findings(16);
            assert_eq!(findings.len(), 1, "{codec}");
            assert_eq!(findings[0].severity, Severity::Info);
            assert!(
                findings[0]
                    .message
                    .contains(&format!("compression.type={codec}")),
                "{}",
                findings[0].message
            );
        }
        // No finding suggests a value the broker refuses (`none`).
        let mut broken = healthy(Some("gzip"));
        broken.cleanup_policy = Some("delete".into());
        broken.min_insync_replicas = Some(1);
        broken.replication_factor = Some(1);
        for f in broken.findings(8) {
            assert!(!f.message.contains("=none"), "{}", f.message);
        }
        // A coordinator that does not answer DescribeTransactions is an error naming it.
        let mut mute = healthy(None);
        mute.describe_transactions_failed = Some("error 35 UNSUPPORTED_VERSION".into());
        let findings = mute.findings(16);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].severity, Severity::Error);
        assert!(
            findings[0]
                .message
                .contains("does not answer DescribeTransactions")
                && findings[0].message.contains("UNSUPPORTED_VERSION"),
            "{}",
            findings[0].message
        );
    }
}
