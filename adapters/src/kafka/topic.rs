//! The state topic's checks and creation, and broker settings, through librdkafka's admin API;
//! the topic's `cleanup.policy` through a native DescribeConfigs (librdkafka's admin API drops
//! a resource's error code, so a missing DESCRIBE_CONFIGS ACL would look like a topic without
//! a policy).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::types::RDKafkaRespErr;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;

use super::classify;
use super::cluster::{code, Attempt, Cluster};
use super::config::KafkaConfig;
use super::context::ClientCtx;
use crate::error::TransportError;

/// The value `cleanup.policy` must have.
const COMPACT: &str = "compact";

/// DescribeConfigs' resource type for a topic.
const RESOURCE_TOPIC: i8 = 2;

/// The highest DescribeConfigs version sent (Kafka 4.x answers v1 to v4).
const MAX_DESCRIBE_CONFIGS: i16 = 4;

/// Runs `future` on this thread until it completes or `timeout` passes. The admin client
/// completes its futures from its own polling thread, so no runtime is needed.
fn block_on<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let deadline = Instant::now() + timeout;
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::park_timeout(deadline - now);
    }
}

struct Admin<'a> {
    client: AdminClient<ClientCtx>,
    config: &'a KafkaConfig,
}

impl<'a> Admin<'a> {
    fn new(config: &'a KafkaConfig) -> Result<Self, TransportError> {
        let client = config
            .client_config(&[])
            .create_with_context(ClientCtx::default())
            .map_err(|e| {
                classify::from_kafka("creating an admin client", &e, config.bootstrap_servers())
            })?;
        Ok(Admin { client, config })
    }

    fn options(&self) -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(self.config.request_timeout()))
            .operation_timeout(Some(self.config.request_timeout()))
    }

    fn wait<F: Future>(&self, what: &str, future: F) -> Result<F::Output, TransportError> {
        let limit = self.config.request_timeout() + Duration::from_secs(2);
        block_on(future, limit).ok_or_else(|| self.unreachable(what, limit, None))
    }

    fn unreachable(&self, what: &str, waited: Duration, detail: Option<String>) -> TransportError {
        TransportError::retriable(format!(
            "{what}: no answer from the Kafka cluster at {} within {waited:?}{}{}",
            self.config.bootstrap_servers(),
            detail.map(|d| format!(": {d}")).unwrap_or_default(),
            self.client
                .inner()
                .context()
                .last_error()
                .map(|l| format!(" (last client error: {l})"))
                .unwrap_or_default()
        ))
    }

    /// The topic's partition count, or `None` when it does not exist.
    fn partition_count(&self) -> Result<Option<usize>, TransportError> {
        let topic = self.config.topic();
        let what = format!("reading the metadata of topic {topic}");
        let md = self
            .client
            .inner()
            .fetch_metadata(Some(topic), self.config.request_timeout())
            .map_err(|e| match e.rdkafka_error_code() {
                Some(c) if classify::is_unreachable(c) => {
                    self.unreachable(&what, self.config.request_timeout(), Some(e.to_string()))
                }
                _ => classify::from_kafka(&what, &e, self.config.bootstrap_servers()),
            })?;
        let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
            return Ok(None);
        };
        match t.error() {
            None => Ok(Some(t.partitions().len())),
            Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => Ok(None),
            Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) => {
                Err(TransportError::unauthorized(format!(
                    "{what}: not authorized (the principal needs the DESCRIBE ACL on Topic \
                     '{topic}', which READ or WRITE implies: a member needs READ and WRITE on \
                     it, an observer READ)"
                )))
            }
            Some(err) => {
                let code = RDKafkaErrorCode::from(err);
                Err(classify::from_code(
                    &what,
                    code,
                    &code.to_string(),
                    self.config.bootstrap_servers(),
                ))
            }
        }
    }

    /// The brokers' count, and the topic's partition count and smallest replica count, or
    /// `None` when it does not exist.
    fn layout(&self) -> Result<(usize, Option<(usize, usize)>), TransportError> {
        let topic = self.config.topic();
        let what = format!("reading the metadata of topic {topic}");
        let md = self
            .client
            .inner()
            .fetch_metadata(Some(topic), self.config.request_timeout())
            .map_err(|e| classify::from_kafka(&what, &e, self.config.bootstrap_servers()))?;
        let brokers = md.brokers().len();
        let layout = md
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| {
                let replicas = t.partitions().iter().map(|p| p.replicas().len()).min();
                (t.partitions().len(), replicas.unwrap_or(0))
            });
        Ok((brokers, layout))
    }

    /// The topic's configuration entries named in `names`.
    fn topic_settings(&self, names: &[&str]) -> Result<Vec<Option<String>>, TransportError> {
        let topic = self.config.topic();
        let what = format!("describing the configuration of topic {topic}");
        let spec = ResourceSpecifier::Topic(topic);
        let results = self
            .wait(
                &what,
                self.client.describe_configs([&spec], &self.options()),
            )?
            .map_err(|e| classify::from_kafka(&what, &e, self.config.bootstrap_servers()))?;
        let resource = results.into_iter().next().ok_or_else(|| {
            TransportError::fatal(format!("{what}: the broker answered with no resource"))
        })?;
        match resource {
            Ok(r) => Ok(names
                .iter()
                .map(|n| r.get(n).and_then(|e| e.value.clone()))
                .collect()),
            Err(RDKafkaErrorCode::TopicAuthorizationFailed) => Err(TransportError::unauthorized(format!(
                "{what}: not authorized (the principal needs the DESCRIBE_CONFIGS ACL on topic '{topic}')"
            ))),
            Err(code) => Err(classify::from_code(&what, code, &code.to_string(), self.config.bootstrap_servers())),
        }
    }

    /// The topic's `cleanup.policy` (DescribeConfigs on `cluster`, the transport's native
    /// connections), or `None` while the broker does not know the topic yet.
    fn cleanup_policy(&self, cluster: &Cluster) -> Result<Option<String>, TransportError> {
        let topic = self.config.topic();
        let what = format!("describing the configuration of topic {topic}");
        let deadline = Instant::now() + self.config.request_timeout();
        cluster.retry(&what, deadline, |cluster| {
            // Any broker answers for a topic: the leader of partition 0 is one.
            cluster.at_leader(topic, 0, deadline, |conn| {
                let Some(version) =
                    conn.version_at_most::<DescribeConfigsRequest>(MAX_DESCRIBE_CONFIGS)
                else {
                    return Err(Attempt::Stop(TransportError::config(format!(
                        "the broker at {} supports no DescribeConfigs version up to \
                         v{MAX_DESCRIBE_CONFIGS}",
                        conn.addr()
                    ))));
                };
                let req = DescribeConfigsRequest::default().with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(RESOURCE_TOPIC)
                        .with_resource_name(StrBytes::from_string(topic.to_owned()))
                        .with_configuration_keys(Some(vec![StrBytes::from_static_str(
                            "cleanup.policy",
                        )])),
                ]);
                let resp = conn.call(&req, version, deadline)?;
                let Some(result) = resp.results.into_iter().next() else {
                    return Err(Attempt::again(format!(
                        "{what}: the broker at {} answered with no resource",
                        conn.addr()
                    )));
                };
                match result.error_code {
                    code::NONE => Ok(result
                        .configs
                        .into_iter()
                        .find(|c| c.name.as_str() == "cleanup.policy")
                        .and_then(|c| c.value.map(|v| v.as_str().to_owned()))),
                    code::UNKNOWN_TOPIC_OR_PARTITION => Ok(None),
                    code::TOPIC_AUTHORIZATION_FAILED => {
                        Err(Attempt::Stop(TransportError::unauthorized(format!(
                            "{what}: the principal needs the DESCRIBE_CONFIGS ACL on Topic \
                             '{topic}' (TOPIC_AUTHORIZATION_FAILED): the topic check reads its \
                             cleanup.policy"
                        ))))
                    }
                    other => Err(Attempt::again(format!(
                        "{what} at {}: error {other} ({})",
                        conn.addr(),
                        result
                            .error_message
                            .as_ref()
                            .map_or(code::name(other), |m| m.as_str())
                    ))),
                }
            })
        })
    }

    fn broker_setting(&self, name: &str) -> Option<String> {
        let md = self
            .client
            .inner()
            .fetch_metadata(None, self.config.request_timeout())
            .ok()?;
        let broker = md.brokers().first()?.id();
        let spec = ResourceSpecifier::Broker(broker);
        let results = block_on(
            self.client.describe_configs([&spec], &self.options()),
            self.config.request_timeout() + Duration::from_secs(2),
        )?
        .ok()?;
        let resource = results.into_iter().next()?.ok()?;
        resource.get(name).and_then(|e| e.value.clone())
    }
}

fn create_hint(config: &KafkaConfig) -> String {
    format!(
        "create it with KafkaTransport::create_topic, or: kafka-topics.sh --create --topic {} \
         --partitions {} --replication-factor 3 --config cleanup.policy=compact \
         --config min.insync.replicas=2",
        config.topic(),
        config.partitions()
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
/// count. DescribeConfigs goes through `cluster`. A topic that looks missing is looked at again
/// after a pause before that is reported: a broker whose metadata lags (a topic created a moment
/// ago, a broker under load) does not know it yet.
pub(crate) fn ensure(config: &KafkaConfig, cluster: &Cluster) -> Result<(), TransportError> {
    let admin = Admin::new(config)?;
    match check(&admin, cluster) {
        Err(CheckError::Missing(_)) => {
            thread::sleep(super::cluster::CONFIRM_PAUSE);
            check(&admin, cluster).map_err(CheckError::into_error)
        }
        other => other.map_err(CheckError::into_error),
    }
}

fn check(admin: &Admin<'_>, cluster: &Cluster) -> Result<(), CheckError> {
    let config = admin.config;
    let topic = config.topic();
    let Some(count) = admin.partition_count()? else {
        return Err(CheckError::Missing(TransportError::config(format!(
            "topic {topic} does not exist; {}",
            create_hint(config)
        ))));
    };
    if i64::try_from(count).ok() != Some(i64::from(config.partitions())) {
        return Err(CheckError::Other(TransportError::config(format!(
            "topic {topic} has {count} partitions but this member is configured with {}; every \
             member must pass the topic's real partition count (set partitions = {count}), or \
             the roles' records land in different partitions and their order breaks",
            config.partitions()
        ))));
    }
    let policy = admin.cleanup_policy(cluster)?;
    if policy.as_deref().map(str::trim) == Some(COMPACT) {
        return Ok(());
    }
    let error = TransportError::config(format!(
        "topic {topic} has cleanup.policy={} but it needs cleanup.policy=compact (without \
         delete, which would drop registrations and leases by age); fix it with: \
         kafka-configs.sh --alter --entity-type topics --entity-name {topic} \
         --add-config cleanup.policy=compact",
        policy.as_deref().unwrap_or("<unknown>")
    ));
    match policy {
        // A broker that has not loaded a new topic yet describes it without its configuration.
        None => Err(CheckError::Missing(error)),
        Some(_) => Err(CheckError::Other(error)),
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
    let admin = Admin::new(config)?;
    let topic = config.topic();
    let what = format!("creating topic {topic}");
    let min_isr = min_insync_replicas.map(|m| m.to_string());
    let mut new_topic = NewTopic::new(
        topic,
        config.partitions(),
        TopicReplication::Fixed(replication_factor),
    )
    .set("cleanup.policy", COMPACT);
    if let Some(m) = min_isr.as_deref() {
        new_topic = new_topic.set("min.insync.replicas", m);
    }
    let results = admin
        .wait(
            &what,
            admin.client.create_topics([&new_topic], &admin.options()),
        )?
        .map_err(|e| classify::from_kafka(&what, &e, config.bootstrap_servers()))?;
    let created = match results.into_iter().next() {
        Some(Ok(_)) => true,
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => false,
        Some(Err((
            _,
            code @ (RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed),
        ))) => {
            return Err(TransportError::unauthorized(format!(
                "{what}: {code} (the principal needs the CREATE ACL on Topic '{topic}' or on the \
                 Cluster)"
            )));
        }
        Some(Err((_, code))) => {
            return Err(classify::from_code(
                &what,
                code,
                &code.to_string(),
                config.bootstrap_servers(),
            ));
        }
        None => {
            return Err(TransportError::fatal(format!(
                "{what}: the broker answered with no result"
            )))
        }
    };
    // Metadata reaches every broker shortly after a creation (ours, or a concurrent one that
    // answered TOPIC_ALREADY_EXISTS).
    let deadline = Instant::now() + config.request_timeout();
    loop {
        match check(&admin, cluster) {
            Ok(()) => return Ok(created),
            Err(CheckError::Missing(_)) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into_error()),
        }
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
                 --alter --entity-type topics --entity-name {topic} --add-config \
                 cleanup.policy=compact",
                policy.unwrap_or("<unknown>")
            ));
        }
        if let (Some(min), Some(rf)) = (self.min_insync_replicas, self.replication_factor) {
            if min > rf {
                error(format!(
                    "topic {topic} has min.insync.replicas={min} above its replication factor \
                     {rf}: every write fails with NOT_ENOUGH_REPLICAS; lower it with \
                     kafka-configs.sh --alter --entity-type topics --entity-name {topic} \
                     --add-config min.insync.replicas={rf}"
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
                     replica can be lost with it; set it to 2 with kafka-configs.sh --alter \
                     --entity-type topics --entity-name {topic} --add-config min.insync.replicas=2"
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
pub(crate) fn describe(config: &KafkaConfig) -> Result<TopicReport, TransportError> {
    let admin = Admin::new(config)?;
    let (brokers, layout) = admin.layout()?;
    let mut report = TopicReport {
        topic: config.topic().to_owned(),
        brokers,
        exists: layout.is_some(),
        partitions: None,
        replication_factor: None,
        cleanup_policy: None,
        min_insync_replicas: None,
        compression_type: None,
    };
    if let Some((partitions, replicas)) = layout {
        report.partitions = i32::try_from(partitions).ok();
        report.replication_factor = i32::try_from(replicas).ok();
        let settings =
            admin.topic_settings(&["cleanup.policy", "min.insync.replicas", "compression.type"])?;
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

/// A broker setting (from any one broker), if it can be learned.
pub(crate) fn broker_setting(config: &KafkaConfig, name: &str) -> Option<String> {
    Admin::new(config).ok()?.broker_setting(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_runs_a_ready_future_and_times_out_a_pending_one() {
        assert_eq!(block_on(async { 7 }, Duration::from_millis(10)), Some(7));
        assert_eq!(
            block_on(std::future::pending::<()>(), Duration::from_millis(10)),
            None
        );
    }

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
        }
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
    }
}
