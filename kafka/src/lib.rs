//! **kafka-coordination-kafka**: the Kafka transport of kafka-coordination. [`KafkaTransport`]
//! is a native client (crate `kafka-protocol`, no librdkafka), one per process, shared by every
//! role, member and driver. It implements the transport seam (crate
//! `kafka-coordination-transport`) and knows nothing of the drivers; applications reach it
//! through the `kafka-coordination` crate's feature `kafka`, as `kafka_coordination::kafka`.
//!
//! It speaks the transactional protocol itself (FindCoordinator, InitProducerId,
//! AddPartitionsToTxn, Produce, EndTxn, DescribeTransactions) on a few connections per broker
//! ([`KafkaConfig::with_connections_per_broker`]), appends registrations through one idempotent
//! producer, tails the state topic's partitions with one read_committed Fetch loop per broker,
//! and checks or creates the topic ([`KafkaTransport::ensure_topic`],
//! [`KafkaTransport::create_topic`]). TLS and SASL come from librdkafka-style properties
//! ([`KafkaConfig::with_property`]; the guide's `docs/guide/operating.md` lists them).
//!
//! Invariants:
//! - A role's token is the pair InitProducerId answered, and only this library asks for one:
//!   nothing else bumps the epoch, so a paused leader that resumes never fences the current one.
//! - Request versions stay below transaction version 2, so the pair is constant for a term.
//! - `PRODUCER_FENCED`, `INVALID_PRODUCER_EPOCH` and `INVALID_PRODUCER_ID_MAPPING` are
//!   [`Fenced`](kafka_coordination_transport::error::ErrorKind::Fenced) wherever they appear; a commit whose answer was lost
//!   is committed again, never aborted.
//! - Reads show only committed records, up to the last stable offset; a batch that cannot be
//!   read is skipped and counted ([`KafkaTransport::batches_skipped`]).
//!
//! How the client behaves with many roles and with silent brokers: the guide's
//! `docs/guide/many-roles.md`; what it reads and sends: `docs/compatibility.md`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kafka_coordination::kafka::{KafkaConfig, KafkaTransport};
//! use kafka_coordination::describe::describe_leadership;
//! use kafka_coordination::{blocking, GuardedRecord, Options};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Arc::new(KafkaTransport::connect(KafkaConfig::new("127.0.0.1:9092", 16))?);
//! let leadership = blocking::acquire_leadership(client.clone(), "scheduler", "node-a", Options::new())?;
//! leadership.guarded_write_blocking(&[GuardedRecord::new("jobs", 0, None, Some(b"run #1"))])?;
//! let still_in_charge = describe_leadership(&*client, "scheduler")?.authoritative(&leadership.token());
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod api;
mod batch;
mod classify;
mod cluster;
mod codec;
mod config;
mod connections;
mod describe_transactions;
mod fetch;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod net;
mod oauth;
mod offsets;
mod registrar;
mod response_shapes;
#[cfg(any(test, feature = "fuzzing"))]
mod sample_responses;
mod security;
mod task_runtime;
mod topic;
mod txn;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_coordination_core::partition::{partition_of_bytes, role_partition};
use kafka_coordination_core::record::{KeyRef, Role};
use kafka_coordination_core::token::FencingToken;

pub use self::config::{
    is_secret_property, KafkaConfig, DEFAULT_CONNECTIONS_PER_BROKER, MAX_CONNECTIONS_PER_BROKER,
    PROPERTIES_READ, STATE_TOPIC,
};
#[cfg(feature = "serde")]
pub use self::config::{KafkaSettings, SecuritySettings};
pub use self::oauth::{OAuthToken, TokenFile, TokenProvider};
pub use self::topic::{Finding, Severity, TopicReport};
pub use kafka_coordination_transport::{ConsumedOffset, GroupOffsets, GuardedRecord};

use self::cluster::Cluster;
use self::describe_transactions::DescribeClient;
use self::fetch::SharedReader;
use self::registrar::Appender;
use self::txn::Sessions;
use kafka_coordination_transport::error::{ErrorKind, TransportError};
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::{Coordinator, LeaseWriter, ReadBatch, Registrar, StateReader};

// The transport is shared between a driver's threads.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<KafkaTransport>();
};

/// The Kafka transport of one member. See the [module docs](self).
pub struct KafkaTransport {
    config: Arc<KafkaConfig>,
    topic_checked: Arc<AtomicBool>,
    cluster: Arc<Cluster>,
    sessions: Arc<Sessions>,
    claims: std::sync::Mutex<std::collections::BTreeSet<Role>>,
    appender: Arc<Appender>,
    reader: Arc<SharedReader>,
    describe: DescribeClient,
    /// The threads that calls which must wait wait on: a call that comes before the state
    /// topic was checked (the check waits on its requests).
    waiting: Arc<kafka_coordination_transport::thread_pool::Pool>,
}

/// How many of a [`KafkaTransport`]'s calls may wait on a thread at once (the calls that come
/// before the state topic was checked); more queue.
pub const WAITING_THREADS: usize = 256;

impl std::fmt::Debug for KafkaTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaTransport")
            .field("bootstrap_servers", &self.config.bootstrap_servers())
            .field("topic", &self.config.topic())
            .field("partitions", &self.config.partitions())
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

impl KafkaTransport {
    /// A transport for `config`. Nothing is contacted yet: the state topic is checked by the
    /// first call that touches it (or by [`connect`](Self::connect)).
    pub fn new(config: KafkaConfig) -> Result<Self, TransportError> {
        config.validate()?;
        if let Some(warning) = config.unused_properties_warning() {
            // Logged only with the `tracing` feature.
            let _ = &warning;
            kafka_coordination_transport::log_warn!(bootstrap_servers = %config.bootstrap_servers(), "{warning}");
        }
        let cluster = Arc::new(Cluster::new(&config, config.client_id())?);
        Ok(KafkaTransport {
            describe: DescribeClient::on(Arc::clone(&cluster), &config),
            sessions: Arc::new(Sessions::new(Arc::clone(&cluster), &config)),
            reader: Arc::new(SharedReader::new(&config, Arc::clone(&cluster))?),
            waiting: Arc::new(kafka_coordination_transport::thread_pool::Pool::new(
                "kc-wait",
                WAITING_THREADS,
            )),
            claims: Default::default(),
            appender: Arc::new(Appender::new(Arc::clone(&cluster), &config)),
            cluster,
            config: Arc::new(config),
            topic_checked: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A transport for `config` whose state topic has been checked
    /// ([`ensure_topic`](Self::ensure_topic)).
    pub fn connect(config: KafkaConfig) -> Result<Self, TransportError> {
        let t = Self::new(config)?;
        t.ensure_topic()?;
        Ok(t)
    }

    /// The configuration.
    pub fn config(&self) -> &KafkaConfig {
        &self.config
    }

    /// The partition of `role` in the state topic (Kafka's murmur2 key partitioning of the role
    /// name over the configured partition count).
    pub fn role_partition(&self, role: &Role) -> Result<i32, TransportError> {
        role_partition(role, self.config.partitions())
            .map_err(|e| TransportError::config(e.to_string()))
    }

    /// Checks that the state topic exists with `cleanup.policy=compact` and exactly the
    /// configured partition count; a [`Config`](kafka_coordination_transport::error::ErrorKind::Config) error says what to
    /// fix otherwise.
    pub fn ensure_topic(&self) -> Result<(), TransportError> {
        self.topic_check().run()
    }

    /// The state topic's check, to run on another thread.
    fn topic_check(&self) -> topic::Check {
        topic::Check {
            config: Arc::clone(&self.config),
            cluster: Arc::clone(&self.cluster),
            checked: Arc::clone(&self.topic_checked),
        }
    }

    /// Runs `then` with `priority` (see [`task_runtime::with_priority`]) now if the state topic was
    /// checked; otherwise on a thread of [`WAITING_THREADS`] once the check passed, or hands
    /// the check's error to `failed`.
    fn after_topic_check(
        &self,
        priority: i64,
        then: impl FnOnce() + Send + 'static,
        failed: impl FnOnce(TransportError) + Send + 'static,
    ) {
        if self.topic_checked.load(Ordering::Acquire) {
            return task_runtime::with_priority(priority, then);
        }
        let check = self.topic_check();
        let _ = self.waiting.submit(
            priority,
            Box::new(move || match check.run() {
                Ok(()) => task_runtime::with_priority(priority, then),
                Err(e) => failed(e),
            }),
        );
    }

    /// Creates the state topic with the configured partition count, `cleanup.policy=compact`,
    /// `replication_factor` and (if given) `min.insync.replicas`, unless it exists; then checks
    /// it as [`ensure_topic`](Self::ensure_topic) does. Returns whether this call created it.
    /// Operators should use `min_insync_replicas >= 2`: writes use `acks=all`, and durability
    /// rests on the topic's configuration.
    pub fn create_topic(
        &self,
        replication_factor: i32,
        min_insync_replicas: Option<i32>,
    ) -> Result<bool, TransportError> {
        self.cluster
            .reach(Instant::now() + self.config.request_timeout())?;
        let created = topic::create(
            &self.config,
            &self.cluster,
            replication_factor,
            min_insync_replicas,
        )?;
        self.topic_checked.store(true, Ordering::Release);
        Ok(created)
    }

    /// Creates a topic of the application's own (the one its guarded writes go to):
    /// `partitions`, `replication_factor`, `min.insync.replicas` if given, and the broker's
    /// default `cleanup.policy`, unless a topic of that name exists. Returns whether this call
    /// created it and the topic's partition count (an existing topic keeps its own). Not for
    /// the state topic: [`create_topic`](Self::create_topic) makes that one compacted.
    pub fn create_data_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i32,
        min_insync_replicas: Option<i32>,
    ) -> Result<(bool, i32), TransportError> {
        if name == self.config.topic() {
            return Err(TransportError::config(format!(
                "{name} is the state topic; create it with create_topic (compacted)"
            )));
        }
        self.cluster
            .reach(Instant::now() + self.config.request_timeout())?;
        topic::create_plain(
            &self.config,
            &self.cluster,
            name,
            partitions,
            replication_factor,
            min_insync_replicas,
        )
    }

    /// What the state topic looks like: whether it exists, its partition count, replication,
    /// `cleanup.policy` and `min.insync.replicas`, and whether the transaction coordinator
    /// answers DescribeTransactions (asked for a probe transactional id that names no role:
    /// `<topic>.describe-check`). [`TopicReport::findings`] says what is wrong with it and how
    /// to fix it.
    pub fn describe_topic(&self) -> Result<TopicReport, TransportError> {
        let mut report = topic::describe(&self.config, &self.cluster)?;
        let probe = Role::new(format!("{}.describe-check", self.config.topic()))
            .map_err(|e| TransportError::config(e.to_string()))?;
        report.describe_transactions_failed =
            match task_runtime::block_on(self.describe.describe_async(&probe)) {
                // Refused as unsupported or answered in a way this client cannot use; an
                // authorization failure or a passing error says nothing about the API.
                Err(e) if matches!(e.kind(), ErrorKind::Config | ErrorKind::Fatal) => {
                    Some(e.to_string())
                }
                _ => None,
            };
        Ok(report)
    }

    /// The pair this transport holds (from its last successful acquire), if its term is not
    /// known to be over.
    pub fn held_token(&self) -> Option<FencingToken> {
        self.sessions.any_token()
    }

    /// How many native broker connections this transport has open (shared by every role).
    pub fn open_connections(&self) -> usize {
        self.cluster.open_connections()
    }

    /// How many requests this transport sent on its native connections so far: transactional
    /// calls, registrations, checks, lookups, and the shared reader's Fetch long polls. For
    /// request rates in benchmarks.
    pub fn requests_sent(&self) -> u64 {
        self.cluster.requests() + self.reader.requests()
    }

    /// How many requests this transport gave up on because their broker went silent (a
    /// frozen or cut-off broker that left every connection's request unanswered for a
    /// quarter of the request timeout, or one request for the whole of it): their
    /// connections were closed so that the calls waiting for them failed then, as retriable
    /// errors, instead of at the request timeout. Their outcome is unknown, as after a
    /// timeout. A figure to watch next to [`requests_sent`](Self::requests_sent).
    pub fn requests_abandoned(&self) -> u64 {
        self.cluster.requests_abandoned() + self.reader.requests_abandoned()
    }

    /// How many record batches of the state topic the reader passed because their records
    /// could not be read: a well-formed batch (its CRC holds) with an unknown compression
    /// codec, compressed data its codec refuses, records that decompress past 64 MiB, malformed
    /// records, or an old message format (v0/v1). Each is logged as a warning (feature
    /// `tracing`) naming the topic-partition, the batch's offsets and the reason; the records
    /// after it are read. Anything above 0 means some member writes batches this reader cannot
    /// read, so its registrations or leases may be missing from every view.
    pub fn batches_skipped(&self) -> u64 {
        self.reader.batches_skipped()
    }

    /// How many times the transport's connections authenticated again on the same
    /// connection because the broker limits SASL sessions (KIP-368: `connections.max.reauth.ms`,
    /// or an OAUTHBEARER token's lifetime), and how many it replaced because their session was
    /// about to end while they were idle. Both stay 0 without SASL or without a session limit.
    pub fn sasl_reauthentications(&self) -> (u64, u64) {
        let (a, b) = self.cluster.reauthentications();
        let (c, d) = self.reader.reauthentications();
        (a + c, b + d)
    }

    /// How many requests of each kind this transport sent on its native connections so far,
    /// by API name (`"Produce"`, `"EndTxn"`, ...), most first: for benchmarks that ask where
    /// the requests go. Unlike [`requests_sent`](Self::requests_sent), it also counts each new
    /// connection's ApiVersions and authentication requests.
    pub fn requests_by_api(&self) -> Vec<(String, u64)> {
        let mut sums: std::collections::BTreeMap<i16, u64> = std::collections::BTreeMap::new();
        let views = [
            self.cluster.requests_by_api(),
            self.reader.requests_by_api(),
        ];
        for (key, n) in views.into_iter().flatten() {
            *sums.entry(key).or_default() += n;
        }
        let mut all: Vec<(String, u64)> = sums
            .into_iter()
            .map(|(key, n)| {
                let name = kafka_protocol::messages::ApiKey::try_from(key)
                    .map_or_else(|()| format!("API key {key}"), |k| format!("{k:?}"));
                (name, n)
            })
            .collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all
    }

    /// Writes `records` (to any topics, each to an explicit partition) in **one transaction of
    /// the role's producer**, which must hold `token`. The broker fences the transaction if a
    /// newer epoch exists, so a deposed leader's writes never become visible to read_committed
    /// readers. Serialised with lease renewals (one transaction at a time per transactional
    /// id), but only once every partition it names has a leader: the wait for one (and the
    /// check that the topic and partition exist, a [`Config`](kafka_coordination_transport::error::ErrorKind::Config) error
    /// when two metadata answers agree they do not) happens before the role's session is
    /// taken, so the renewals go on meanwhile. Returns the records' offsets (`-1` where the
    /// delivery report did not arrive in time after a successful commit).
    ///
    /// Errors as for a lease write ([`LeaseWriter::start_write_lease`]): [`Fenced`](kafka_coordination_transport::error::ErrorKind::Fenced)
    /// ends the term.
    pub fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        self.write_guarded(token, records)
    }

    fn write_guarded(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        task_runtime::block_on(self.writing().guarded_write(token, records, None))
    }

    /// [`guarded_write`](Self::guarded_write) that also commits `offsets`, a consumer group's
    /// position in its input, in the same transaction (AddOffsetsToTxn, then TxnOffsetCommit
    /// to the group's coordinator as a producer outside the group, then EndTxn): the records
    /// and the offsets become visible together, or neither does, and once a newer pair holds
    /// the role the broker refuses both ([`Fenced`](kafka_coordination_transport::error::ErrorKind::Fenced)). Read the
    /// position back with [`committed_offsets`](Self::committed_offsets). The group must not
    /// be committed by anything else (a consumer's own commits would race these).
    ///
    /// Effects outside Kafka are not in the transaction: a store that takes them must check
    /// the token or the term itself.
    pub fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        task_runtime::block_on(self.writing().guarded_write(token, records, Some(offsets)))
    }

    /// The committed offsets of consumer group `group` for `partitions` (topic, partition), one
    /// answer per partition in order: the next offset to consume, or `None` where the group
    /// has committed none. OffsetFetch v7 with `require_stable`: while a transaction with
    /// offsets of a partition is still pending, the broker holds the answer back (and this
    /// call asks again until the operation timeout), so the answer is where the last
    /// **committed** transaction left the group. A new leader calls it once it is elected
    /// (its election aborted any transaction its predecessor left open), and resumes there.
    pub fn committed_offsets(
        &self,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> Result<Vec<Option<i64>>, TransportError> {
        if group.is_empty() {
            return Err(TransportError::config("the consumer group id is empty"));
        }
        let partitions: Vec<(String, i32)> = partitions
            .iter()
            .map(|(t, p)| ((*t).to_owned(), *p))
            .collect();
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + self.config.operation_timeout();
        task_runtime::block_on(
            self.sessions
                .groups()
                .committed(group, &partitions, deadline),
        )
    }

    /// What a transactional write needs, owned, for a write that runs as a task.
    fn writing(&self) -> Writing {
        Writing {
            config: Arc::clone(&self.config),
            cluster: Arc::clone(&self.cluster),
            sessions: Arc::clone(&self.sessions),
            describe: self.describe.clone(),
        }
    }

    /// [`guarded_write`](Self::guarded_write) of one record; returns its offset.
    pub fn guarded_send(
        &self,
        token: FencingToken,
        topic: &str,
        partition: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<i64, TransportError> {
        let offsets = self.guarded_write(
            token,
            &[GuardedRecord {
                topic,
                partition,
                key,
                value,
                headers: &[],
            }],
        )?;
        Ok(offsets.first().copied().unwrap_or(-1))
    }

    fn check_partition(&self, partition: i32) -> Result<(), TransportError> {
        if partition < 0 || partition >= self.config.partitions() {
            return Err(TransportError::config(format!(
                "partition {partition} is outside the {} partitions of {} (the count given to \
                 KafkaConfig::new, which every member must take from the transport)",
                self.config.partitions(),
                self.config.topic(),
            )));
        }
        Ok(())
    }

    /// Checks that a coordination record (a registration or lease key) goes to its role's
    /// partition for the topic's real count. A member whose options name another count than
    /// its transport's computes another partition for the role; it would compete in a
    /// partition no correctly configured member reads. (A count that happens to map the role
    /// to the same partition is harmless for that role and passes.) Keys that are not
    /// coordination keys are not checked.
    fn check_key_partition(&self, partition: i32, key: &[u8]) -> Result<(), TransportError> {
        let Ok(k) = KeyRef::decode(key) else {
            return Ok(());
        };
        let partitions = self.config.partitions();
        let expected = partition_of_bytes(k.role().as_bytes(), partitions)
            .map_err(|e| TransportError::config(e.to_string()))?;
        if expected != partition {
            return Err(TransportError::config(format!(
                "role '{}' belongs to partition {expected} of the {partitions} partitions of {}, \
                 but the caller computed partition {partition}: it used another count than the \
                 topic's; set Timing::partitions to {partitions}, the transport's \
                 StateReader::partitions (drivers do this themselves)",
                k.role(),
                self.config.topic()
            )));
        }
        Ok(())
    }
}

/// What a transactional write needs, owned: the transport's parts that a write running as a
/// task (holding no thread) uses after the caller returned.
#[derive(Clone)]
struct Writing {
    config: Arc<KafkaConfig>,
    cluster: Arc<Cluster>,
    sessions: Arc<Sessions>,
    describe: DescribeClient,
}

impl Writing {
    /// A guarded write (see [`KafkaTransport::guarded_write`]).
    async fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: Option<GroupOffsets<'_>>,
    ) -> Result<Vec<i64>, TransportError> {
        // Every partition written must have a leader before the role's session is taken: a
        // transaction holds the session across its round trips, and a write that waited in
        // there for a missing or leaderless partition would hold back the lease renewals.
        let deadline = std::time::Instant::now() + self.config.operation_timeout();
        let mut seen = std::collections::BTreeSet::new();
        for r in records {
            if seen.insert((r.topic, r.partition)) {
                let expected = self.expected_partitions(r.topic);
                self.cluster
                    .leader_ready(r.topic, r.partition, expected, deadline)
                    .await?;
            }
        }
        let written = self
            .sessions
            .write_with_offsets_async(token, records, offsets)
            .await;
        match self.fenced_if_superseded(token, written).await {
            Ok(offsets) => Ok(offsets),
            Err(e) => Err(self.confirm_records(e, records).await),
        }
    }

    /// A lease record's write: one transaction of the role's session, a fence told apart
    /// from a timed-out transaction, and a missing topic or partition confirmed.
    async fn write_lease(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        token: FencingToken,
    ) -> Result<i64, TransportError> {
        let topic = self.config.topic();
        let written = self
            .sessions
            .write_async(
                token,
                &[GuardedRecord {
                    topic,
                    partition,
                    key: Some(key),
                    value,
                    headers: &[],
                }],
            )
            .await;
        match self.fenced_if_superseded(token, written).await {
            Ok(offsets) => Ok(offsets.first().copied().unwrap_or(-1)),
            Err(e) => Err(self.confirm(e, topic, partition).await),
        }
    }

    /// Decides an UNKNOWN_TOPIC_OR_PARTITION that a write of `records` ended with: a
    /// configuration error if the metadata confirms that one of their topics is missing, lacks
    /// the partition, or (for the state topic) has another partition count than configured;
    /// else the error as it is (retriable). Any other error is returned unchanged.
    async fn confirm_records(
        &self,
        err: TransportError,
        records: &[GuardedRecord<'_>],
    ) -> TransportError {
        let mut err = err;
        let mut seen = std::collections::BTreeSet::new();
        for r in records {
            if !seen.insert((r.topic, r.partition)) {
                continue;
            }
            err = self.confirm(err, r.topic, r.partition).await;
            if err.kind() == ErrorKind::Config {
                break;
            }
        }
        err
    }

    /// The partition count `topic` must have: the configured one for the state topic; any
    /// for another topic.
    fn expected_partitions(&self, topic: &str) -> Option<i32> {
        (topic == self.config.topic()).then(|| self.config.partitions())
    }

    /// [`Cluster::confirm`] for `partition` of `topic`, with the configured partition count
    /// when `topic` is the state topic.
    async fn confirm(&self, err: TransportError, topic: &str, partition: i32) -> TransportError {
        let expected = self.expected_partitions(topic);
        let deadline = std::time::Instant::now() + self.config.request_timeout();
        self.cluster
            .confirm(err, topic, partition, expected, deadline)
            .await
    }

    /// A transactional write that failed without a fencing code may still mean that the term is
    /// over: the coordinator aborts a transaction that outlives its timeout (for example while
    /// a partition's leader is down) with an epoch bump, and the next commit then finds no
    /// transaction open (INVALID_TXN_STATE). The coordinator knows: if it no longer holds
    /// `token`, the write was fenced.
    async fn fenced_if_superseded<R>(
        &self,
        token: FencingToken,
        result: Result<R, TransportError>,
    ) -> Result<R, TransportError> {
        let err = match result {
            Err(e) if api::may_be_superseded(&e) => e,
            other => return other,
        };
        let Some(role) = self.sessions.role_of(token) else {
            return Err(err);
        };
        match self.describe.describe_async(&role).await {
            Ok(status) if status.token != token => Err(TransportError::fenced(format!(
                "{}; the coordinator now holds {} for role '{role}', not {token}: the term is over",
                err.message(),
                status.token
            ))
            .with_source(err)),
            _ => Err(err),
        }
    }
}

/// An INVALID_TRANSACTION_TIMEOUT from an acquire as a configuration error that names the
/// brokers' real `transaction.max.timeout.ms` when it can be read; any other error unchanged.
fn name_the_max_timeout(
    config: &KafkaConfig,
    cluster: &Cluster,
    e: TransportError,
) -> TransportError {
    if e.kafka_code() != Some(cluster::code::E::InvalidTransactionTimeout.code()) {
        return e;
    }
    let max = topic::broker_setting(config, cluster, "transaction.max.timeout.ms")
        .map_or_else(|| "default 900000 ms".to_owned(), |v| format!("{v} ms"));
    TransportError::config(e.message().replace("(MAX)", &format!("({max})")))
        .with_kafka_code(cluster::code::E::InvalidTransactionTimeout.code())
}

impl Coordinator for KafkaTransport {
    /// Queues the InitProducerId (and the coordinator's lookup) for the connection threads
    /// and returns: the acquire holds no thread while it waits, and `done` is called on the
    /// connection thread that received the answer.
    fn start_acquire_epoch(
        &self,
        role: Role,
        transaction_timeout: Duration,
        priority: i64,
        done: kafka_coordination_transport::AcquireDone,
    ) {
        task_runtime::with_priority(priority, || {
            let sessions = Arc::clone(&self.sessions);
            let config = Arc::clone(&self.config);
            let native = Arc::clone(&self.cluster);
            let waiting = Arc::clone(&self.waiting);
            task_runtime::spawn(async move {
                match sessions.acquire_async(&role, transaction_timeout).await {
                    Err(e)
                        if e.kafka_code()
                            == Some(cluster::code::E::InvalidTransactionTimeout.code()) =>
                    {
                        // Reading the brokers' maximum waits on a thread; a configuration error
                        // is rare enough to take one rather than a connection thread.
                        let _ = waiting.submit(
                            priority,
                            Box::new(move || done(Err(name_the_max_timeout(&config, &native, e)))),
                        );
                    }
                    other => done(other),
                }
            });
        })
    }

    /// Queues the checks' requests (lookups, then one DescribeTransactions per coordinator
    /// and 256 roles) for the connection threads and returns: the check holds no thread while
    /// it waits, and `done` is called on the connection thread that received the last answer.
    fn start_describe_epochs(
        &self,
        roles: Vec<Role>,
        priority: i64,
        done: kafka_coordination_transport::DescribeDone,
    ) {
        task_runtime::with_priority(priority, || {
            let client = self.describe.clone();
            task_runtime::spawn(async move {
                let answers = client.describe_many_async(&roles).await;
                done(answers);
            });
        })
    }

    fn claim_role(&self, role: &Role) -> Result<(), TransportError> {
        if !lock(&self.claims).insert(role.clone()) {
            return Err(TransportError::config(format!(
                "role '{role}' already has a candidacy on this Kafka client: one candidacy per \
                 role per client (two would fence each other)"
            )));
        }
        self.cluster.want_coordinator(role.as_str());
        Ok(())
    }

    fn claims_scope(&self) -> Option<usize> {
        Some(Arc::as_ptr(&self.sessions).cast::<u8>() as usize)
    }

    /// Drops the role's transactional producer: this transport stops writing for the role.
    /// The coordinator keeps the pair until another member acquires (a resigning driver
    /// supersedes its pair first). Returns at once: aborting a transaction left open waits
    /// (for a write still in flight, then for the coordinator) on the client's executor, not
    /// on the caller's thread.
    fn release_role(&self, role: &Role) {
        self.sessions.release(role);
        lock(&self.claims).remove(role);
        self.cluster.unwant_coordinator(role.as_str());
    }
}

impl StateReader for KafkaTransport {
    fn partitions(&self) -> i32 {
        self.config.partitions()
    }

    /// A read may wait for the reader's long-polling Fetch, so a standby hears of a resign as
    /// soon as its commit is readable.
    fn can_long_poll(&self) -> bool {
        true
    }

    /// The shared reader's view, when one of its fetch threads tails the partition.
    fn read_tailed(&self, partition: i32, from_offset: i64) -> Option<ReadBatch> {
        if partition < 0 || partition >= self.config.partitions() {
            return None;
        }
        self.reader.read_tailed(partition, from_offset)
    }

    fn on_tailed(&self, hook: std::sync::Weak<kafka_coordination_transport::TailHook>) -> bool {
        self.reader.on_tailed(hook);
        true
    }

    /// With no wait: positions the shared reader's view of the partition on the log (its
    /// Fetches queued for the connection threads, holding no thread) and hands `done` what is
    /// readable from `from_offset`, on the connection thread that received the last answer (on
    /// the caller's thread, before this returns, when that answer arrives while this call is
    /// still queuing the read, as the seam allows).
    /// A long poll (`max_wait > 0`) then waits for the view as a task that holds no thread: the
    /// fetch thread whose answer brings records at or past `from_offset` (or the timer, at
    /// `max_wait`) hands `done` the batch.
    fn start_read_partition(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        priority: i64,
        done: kafka_coordination_transport::ReadDone,
    ) {
        if let Err(e) = self.check_partition(partition) {
            return done(Err(e));
        }
        let reader = Arc::clone(&self.reader);
        let (done, failed) = task_runtime::split(done);
        self.after_topic_check(
            priority,
            move || reader.start_read(partition, from_offset, max_wait, done),
            failed,
        );
    }
}

impl Registrar for KafkaTransport {
    /// Queues every append before any is sent, so that the appends to one partition travel
    /// together; starts a sender (a task that holds no thread) for each partition nobody else
    /// is sending, and leaves the appends queued behind a batch in flight to that batch's
    /// sender (see [`Registrar::append_all`]). The first call waits for the state topic's
    /// check on a thread of [`WAITING_THREADS`].
    fn append_all(&self, appends: Vec<kafka_coordination_transport::Append>, priority: i64) {
        let mut queued = Vec::with_capacity(appends.len());
        for a in appends {
            let checked = self
                .check_partition(a.partition)
                .and_then(|()| self.check_key_partition(a.partition, &a.key));
            match checked {
                Ok(()) => queued.push(a),
                Err(e) => (a.done)(Err(e)),
            }
        }
        if queued.is_empty() {
            return;
        }
        let appender = Arc::clone(&self.appender);
        // The appends wait with the check; a failed check fails each of them.
        let queued = Arc::new(std::sync::Mutex::new(queued));
        let (sent, lost) = (Arc::clone(&queued), queued);
        self.after_topic_check(
            priority,
            move || appender.append_all(std::mem::take(&mut *lock(&sent))),
            move |e| {
                for a in std::mem::take(&mut *lock(&lost)) {
                    (a.done)(Err(e.clone()));
                }
            },
        );
    }
}

impl LeaseWriter for KafkaTransport {
    /// Queues the transaction's requests for the connection threads and returns: the write
    /// holds no thread while it waits (for the role's session, or for an answer), and `done`
    /// is called on the connection thread that received the last answer. The checks that
    /// need no request come first, on the caller's thread; a write that comes before the
    /// state topic was checked waits for the check on a thread of [`WAITING_THREADS`].
    fn start_write_lease(
        &self,
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
        priority: i64,
        done: kafka_coordination_transport::LeaseDone,
    ) {
        let checked = self
            .check_partition(partition)
            .and_then(|()| self.check_key_partition(partition, &key));
        if let Err(e) = checked {
            return done(Err(e));
        }
        let writing = self.writing();
        let (done, failed) = task_runtime::split(done);
        self.after_topic_check(
            priority,
            move || {
                task_runtime::spawn(async move {
                    let written = writing
                        .write_lease(partition, &key, value.as_deref(), token)
                        .await;
                    done(written);
                })
            },
            failed,
        );
    }

    fn guarded_write(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        self.write_guarded(token, records)
    }

    fn guarded_write_with_offsets(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: GroupOffsets<'_>,
    ) -> Result<Vec<i64>, TransportError> {
        KafkaTransport::guarded_write_with_offsets(self, token, records, offsets)
    }

    /// Starts the write as a task that holds no thread: the wait for the partitions' leaders
    /// and the transaction's requests go to the connection threads, and `done` is called on
    /// the connection thread that received the last answer (see
    /// [`guarded_write`](KafkaTransport::guarded_write) for what the write does).
    fn start_guarded_write(
        &self,
        token: FencingToken,
        write: kafka_coordination_transport::GuardedWrite,
        priority: i64,
        done: kafka_coordination_transport::GuardedDone,
    ) {
        let writing = self.writing();
        task_runtime::with_priority(priority, move || {
            task_runtime::spawn(async move {
                let headers = write.header_refs();
                let offsets = write.offset_refs();
                let (records, offsets) = write.borrow(&headers, &offsets);
                done(writing.guarded_write(token, &records, offsets).await);
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination_core::record::{Key, MemberId};
    use kafka_coordination_transport::Wait;

    /// A role whose partition differs between 16 and 8 partitions.
    fn moved_role() -> Role {
        (0..)
            .map(|i| Role::new(format!("role-{i}")).expect("role"))
            .find(|r| role_partition(r, 8).ok() != role_partition(r, 16).ok())
            .expect("some role moves")
    }

    #[test]
    fn connections_per_broker_outside_1_to_64_are_refused_by_name() {
        for bad in [0, MAX_CONNECTIONS_PER_BROKER + 1] {
            let config = KafkaConfig::new("127.0.0.1:1", 16).with_connections_per_broker(bad);
            let Err(err) = KafkaTransport::new(config) else {
                panic!("{bad} connections per broker were taken");
            };
            assert_eq!(
                err.kind(),
                kafka_coordination_transport::error::ErrorKind::Config,
                "{err}"
            );
            assert!(
                err.message().contains("connections per broker")
                    && err.message().contains(&bad.to_string()),
                "{err}"
            );
        }
        let config = KafkaConfig::new("127.0.0.1:1", 16);
        assert_eq!(
            config.connections_per_broker(),
            DEFAULT_CONNECTIONS_PER_BROKER
        );
        KafkaTransport::new(config.with_connections_per_broker(MAX_CONNECTIONS_PER_BROKER))
            .expect("the largest count is taken");
    }

    #[test]
    fn a_second_candidacy_for_a_role_the_client_holds_is_refused() {
        // No I/O: the claim is the client's own bookkeeping.
        let t = KafkaTransport::new(KafkaConfig::new("127.0.0.1:1", 16)).expect("transport");
        let role = Role::new("billing").expect("role");
        t.claim_role(&role).expect("the first candidacy");
        let err = t.claim_role(&role).expect_err("the second");
        assert_eq!(
            err.kind(),
            kafka_coordination_transport::error::ErrorKind::Config,
            "{err}"
        );
        assert!(err.message().contains("already has a candidacy"), "{err}");
        t.claim_role(&Role::new("shipping").expect("role"))
            .expect("another role");
        t.release_role(&role);
        t.claim_role(&role).expect("free again once released");
    }

    #[test]
    fn a_coordination_record_for_another_partition_count_is_refused_before_any_io() {
        // Nothing listens on port 1: the check comes before the cluster is contacted.
        let t = KafkaTransport::new(KafkaConfig::new("127.0.0.1:1", 16)).expect("transport");
        let role = moved_role();
        let wrong = role_partition(&role, 8).expect("partition");
        let member = MemberId::new("m").expect("member");
        let key = Key::registration(role.clone(), member).encode();
        let err = t.append(wrong, &key, Some(b"v")).expect_err("refused");
        assert_eq!(
            err.kind(),
            kafka_coordination_transport::error::ErrorKind::Config,
            "{err}"
        );
        assert!(
            err.message().contains("set Timing::partitions to 16"),
            "{err}"
        );
        let key = Key::lease(role).encode();
        let err = t
            .write_lease(wrong, &key, None, FencingToken::new(1, 0))
            .expect_err("refused");
        assert_eq!(
            err.kind(),
            kafka_coordination_transport::error::ErrorKind::Config,
            "{err}"
        );
        let err = t
            .read_partition(16, 0, Duration::ZERO)
            .expect_err("outside the topic");
        assert!(err.message().contains("outside the 16 partitions"), "{err}");
    }
}
