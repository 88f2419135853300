//! The state topic's checks and creation, and broker settings, through librdkafka's admin API.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::types::RDKafkaRespErr;

use super::classify;
use super::config::KafkaConfig;
use super::context::AdminCtx;
use crate::error::TransportError;

/// The value `cleanup.policy` must have.
const COMPACT: &str = "compact";

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
    client: AdminClient<AdminCtx>,
    config: &'a KafkaConfig,
}

impl<'a> Admin<'a> {
    fn new(config: &'a KafkaConfig) -> Result<Self, TransportError> {
        let client = config
            .client_config(&[])
            .create_with_context(AdminCtx::default())
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
                    "{what}: not authorized (the principal needs the DESCRIBE ACL on topic '{topic}')"
                )))
            }
            Some(err) => {
                let code = RDKafkaErrorCode::from(err);
                Err(classify::from_code(&what, code, &code.to_string(), self.config.bootstrap_servers()))
            }
        }
    }

    /// The topic's `cleanup.policy`.
    fn cleanup_policy(&self) -> Result<Option<String>, TransportError> {
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
            Ok(r) => Ok(r.get("cleanup.policy").and_then(|e| e.value.clone())),
            Err(RDKafkaErrorCode::TopicAuthorizationFailed) => Err(TransportError::unauthorized(format!(
                "{what}: not authorized (the principal needs the DESCRIBE_CONFIGS ACL on topic '{topic}')"
            ))),
            Err(code) => Err(classify::from_code(&what, code, &code.to_string(), self.config.bootstrap_servers())),
        }
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
/// count. A topic that looks missing is looked at again after a pause before that is reported:
/// a broker whose metadata lags (a topic created a moment ago, a broker under load) does not
/// know it yet.
pub(crate) fn ensure(config: &KafkaConfig) -> Result<(), TransportError> {
    let admin = Admin::new(config)?;
    match check(&admin) {
        Err(CheckError::Missing(_)) => {
            thread::sleep(super::cluster::CONFIRM_PAUSE);
            check(&admin).map_err(CheckError::into_error)
        }
        other => other.map_err(CheckError::into_error),
    }
}

fn check(admin: &Admin<'_>) -> Result<(), CheckError> {
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
    let policy = admin.cleanup_policy()?;
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
                "{what}: {code} (the principal needs the CREATE ACL on topic '{topic}' or on the \
                 cluster)"
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
        match check(&admin) {
            Ok(()) => return Ok(created),
            Err(CheckError::Missing(_)) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into_error()),
        }
    }
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
}
