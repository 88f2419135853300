//! The cluster as the native client sees it: the bootstrap servers, the connection pool, the
//! transaction coordinator of each transactional id (FindCoordinator, cached), and the leader
//! of each partition (Metadata, cached). Every call goes through [`Cluster::retry`], which
//! retries what Kafka calls retriable until a deadline and stops on everything else.

use std::collections::HashMap;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{FindCoordinatorRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::config::KafkaConfig;
use super::context::lock;
use super::net::{Conn, NetError, Pool};
use super::security::Security;
use crate::error::TransportError;

/// Kafka error codes the native client acts on.
pub(crate) mod code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const NETWORK_EXCEPTION: i16 = 13;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const NOT_ENOUGH_REPLICAS: i16 = 19;
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    pub const PRODUCER_FENCED: i16 = 90;
    pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
    pub const TRANSACTION_ABORTABLE: i16 = 120;

    /// The name of a code, for messages.
    pub fn name(code: i16) -> &'static str {
        match code {
            NONE => "NONE",
            UNKNOWN_SERVER_ERROR => "UNKNOWN_SERVER_ERROR",
            CORRUPT_MESSAGE => "CORRUPT_MESSAGE",
            UNKNOWN_TOPIC_OR_PARTITION => "UNKNOWN_TOPIC_OR_PARTITION",
            LEADER_NOT_AVAILABLE => "LEADER_NOT_AVAILABLE",
            NOT_LEADER_OR_FOLLOWER => "NOT_LEADER_OR_FOLLOWER",
            REQUEST_TIMED_OUT => "REQUEST_TIMED_OUT",
            NETWORK_EXCEPTION => "NETWORK_EXCEPTION",
            COORDINATOR_LOAD_IN_PROGRESS => "COORDINATOR_LOAD_IN_PROGRESS",
            COORDINATOR_NOT_AVAILABLE => "COORDINATOR_NOT_AVAILABLE",
            NOT_COORDINATOR => "NOT_COORDINATOR",
            NOT_ENOUGH_REPLICAS => "NOT_ENOUGH_REPLICAS",
            NOT_ENOUGH_REPLICAS_AFTER_APPEND => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            TOPIC_AUTHORIZATION_FAILED => "TOPIC_AUTHORIZATION_FAILED",
            CLUSTER_AUTHORIZATION_FAILED => "CLUSTER_AUTHORIZATION_FAILED",
            UNSUPPORTED_VERSION => "UNSUPPORTED_VERSION",
            OUT_OF_ORDER_SEQUENCE_NUMBER => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            DUPLICATE_SEQUENCE_NUMBER => "DUPLICATE_SEQUENCE_NUMBER",
            INVALID_PRODUCER_EPOCH => "INVALID_PRODUCER_EPOCH",
            INVALID_TXN_STATE => "INVALID_TXN_STATE",
            INVALID_PRODUCER_ID_MAPPING => "INVALID_PRODUCER_ID_MAPPING",
            INVALID_TRANSACTION_TIMEOUT => "INVALID_TRANSACTION_TIMEOUT",
            CONCURRENT_TRANSACTIONS => "CONCURRENT_TRANSACTIONS",
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            KAFKA_STORAGE_ERROR => "KAFKA_STORAGE_ERROR",
            UNKNOWN_PRODUCER_ID => "UNKNOWN_PRODUCER_ID",
            FENCED_LEADER_EPOCH => "FENCED_LEADER_EPOCH",
            UNKNOWN_LEADER_EPOCH => "UNKNOWN_LEADER_EPOCH",
            PRODUCER_FENCED => "PRODUCER_FENCED",
            TRANSACTIONAL_ID_NOT_FOUND => "TRANSACTIONAL_ID_NOT_FOUND",
            TRANSACTION_ABORTABLE => "TRANSACTION_ABORTABLE",
            _ => "an error code this client does not name",
        }
    }

    /// Whether Kafka documents the code as retriable for produce-side requests (the partition's
    /// leader moved, replicas are catching up, the request timed out on the broker).
    pub fn partition_retriable(code: i16) -> bool {
        matches!(
            code,
            UNKNOWN_TOPIC_OR_PARTITION
                | LEADER_NOT_AVAILABLE
                | NOT_LEADER_OR_FOLLOWER
                | REQUEST_TIMED_OUT
                | NETWORK_EXCEPTION
                | NOT_ENOUGH_REPLICAS
                | NOT_ENOUGH_REPLICAS_AFTER_APPEND
                | KAFKA_STORAGE_ERROR
                | FENCED_LEADER_EPOCH
                | UNKNOWN_LEADER_EPOCH
                | CORRUPT_MESSAGE
        )
    }
}

/// FindCoordinator's key type for a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// What went wrong in one attempt, and whether another may help.
pub(crate) enum Attempt {
    /// Try again after a pause; `relookup` forgets the cached coordinator or leader first.
    Again { relookup: bool, why: String },
    /// The connection broke (or answered out of step): it is dropped; try again after a
    /// pause, looking the broker up again.
    Broken(String),
    /// Give up with this error.
    Stop(TransportError),
}

impl From<NetError> for Attempt {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Io(why) => Attempt::Broken(why),
            NetError::Stop(e) => Attempt::Stop(e),
        }
    }
}

impl Attempt {
    pub(crate) fn again(why: impl Into<String>) -> Attempt {
        Attempt::Again {
            relookup: false,
            why: why.into(),
        }
    }
    pub(crate) fn relookup(why: impl Into<String>) -> Attempt {
        Attempt::Again {
            relookup: true,
            why: why.into(),
        }
    }
}

/// The native client's view of the cluster.
pub(crate) struct Cluster {
    bootstrap: Vec<String>,
    /// advertised address -> the address to connect to.
    overrides: HashMap<String, String>,
    pool: Pool,
    /// transactional id -> the coordinator's address.
    coordinators: Mutex<HashMap<String, String>>,
    /// (topic, partition) -> the leader's address.
    leaders: Mutex<HashMap<(String, i32), String>>,
}

impl Cluster {
    /// Checks `config` (bootstrap syntax, security settings) and builds the cluster view.
    /// Nothing is contacted yet.
    pub(crate) fn new(config: &KafkaConfig, client_id: &str) -> Result<Cluster, TransportError> {
        let security = Security::from_config(config)?;
        let bootstrap = parse_bootstrap(config.bootstrap_servers())?;
        Ok(Cluster {
            bootstrap,
            // A later override of the same address wins.
            overrides: config.address_overrides().iter().cloned().collect(),
            pool: Pool::new(security, client_id),
            coordinators: Mutex::new(HashMap::new()),
            leaders: Mutex::new(HashMap::new()),
        })
    }

    /// The bootstrap servers, comma-separated, for messages.
    pub(crate) fn bootstrap(&self) -> String {
        self.bootstrap.join(",")
    }

    /// How many broker connections are open.
    pub(crate) fn open_connections(&self) -> usize {
        self.pool.open_connections()
    }

    /// Runs `attempt` until it succeeds, stops, or `deadline` passes (then a retriable error
    /// describing `what` and the last reason). Pauses grow from 20 ms to at most 400 ms.
    pub(crate) fn retry<T>(
        &self,
        what: &str,
        deadline: Instant,
        mut attempt: impl FnMut(&Cluster) -> Result<T, Attempt>,
    ) -> Result<T, TransportError> {
        let mut tries: u32 = 0;
        loop {
            let why = match attempt(self) {
                Ok(v) => return Ok(v),
                Err(Attempt::Stop(e)) => return Err(e),
                Err(Attempt::Again { why, .. } | Attempt::Broken(why)) => why,
            };
            tries += 1;
            let pause = Duration::from_millis(20u64 << tries.min(4));
            if Instant::now() + pause >= deadline {
                return Err(TransportError::retriable(format!(
                    "{what}: no usable answer from the Kafka cluster at {} in time ({tries} \
                     attempts): {why}",
                    self.bootstrap()
                )));
            }
            thread::sleep(pause);
        }
    }

    /// Runs `f` on a connection to the transaction coordinator of `transactional_id` (found
    /// with FindCoordinator when not cached). An `Again { relookup: true }` forgets the cached
    /// coordinator.
    pub(crate) fn at_coordinator<T>(
        &self,
        transactional_id: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt>,
    ) -> Result<T, Attempt> {
        let cached = lock(&self.coordinators).get(transactional_id).cloned();
        let addr = match cached {
            Some(addr) => addr,
            None => {
                let addr = self.find_coordinator(transactional_id, deadline)?;
                lock(&self.coordinators).insert(transactional_id.to_owned(), addr.clone());
                addr
            }
        };
        let result = self.on(&addr, deadline, f);
        if let Err(Attempt::Again { relookup: true, .. }) = &result {
            lock(&self.coordinators).remove(transactional_id);
        }
        result
    }

    /// Runs `f` on a connection to the leader of `topic`/`partition` (found with Metadata when
    /// not cached).
    pub(crate) fn at_leader<T>(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt>,
    ) -> Result<T, Attempt> {
        let key = (topic.to_owned(), partition);
        let cached = lock(&self.leaders).get(&key).cloned();
        let addr = match cached {
            Some(addr) => addr,
            None => {
                self.refresh_leaders(topic, deadline)?;
                lock(&self.leaders).get(&key).cloned().ok_or_else(|| {
                    Attempt::relookup(format!(
                        "no leader known for partition {partition} of topic '{topic}'"
                    ))
                })?
            }
        };
        let result = self.on(&addr, deadline, f);
        if let Err(Attempt::Again { relookup: true, .. }) = &result {
            lock(&self.leaders).remove(&key);
        }
        result
    }

    /// Runs `f` on the connection to `addr`.
    pub(crate) fn on<T>(
        &self,
        addr: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt>,
    ) -> Result<T, Attempt> {
        let mut outcome: Option<Result<T, Attempt>> = None;
        let addr = self.overrides.get(addr).map_or(addr, String::as_str);
        let net = self.pool.with(addr, deadline, |conn| match f(conn) {
            // Returned as `Io`, so that the pool drops the connection.
            Err(Attempt::Broken(why)) => Err(NetError::Io(why)),
            other => {
                outcome = Some(other);
                Ok(())
            }
        });
        match (net, outcome) {
            (_, Some(r)) => r,
            (Err(NetError::Io(why)), None) => Err(Attempt::relookup(why)),
            (Err(NetError::Stop(e)), None) => Err(Attempt::Stop(e)),
            (Ok(()), None) => Err(Attempt::relookup(format!("no answer from {addr}"))),
        }
    }

    /// Asks each bootstrap server in turn for the coordinator of `transactional_id`.
    fn find_coordinator(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        let mut last = String::from("no bootstrap server configured");
        for server in &self.bootstrap {
            let outcome = self.on(server, deadline, |conn| {
                let Some(version) = conn.version::<FindCoordinatorRequest>().filter(|v| *v >= 1)
                else {
                    return Err(Attempt::Stop(TransportError::config(format!(
                        "the broker at {server} does not support FindCoordinator for \
                         transactional ids (Kafka 0.11 or newer is needed)"
                    ))));
                };
                let id = StrBytes::from_string(transactional_id.to_owned());
                let mut req = FindCoordinatorRequest::default().with_key_type(KEY_TYPE_TRANSACTION);
                req = if version >= 4 {
                    req.with_coordinator_keys(vec![id])
                } else {
                    req.with_key(id)
                };
                let resp = conn.call(&req, version, deadline)?;
                let (error, message, host, port) = if version >= 4 {
                    match resp.coordinators.into_iter().next() {
                        Some(c) => (c.error_code, c.error_message, c.host, c.port),
                        None => {
                            return Err(Attempt::relookup("FindCoordinator named no coordinator"))
                        }
                    }
                } else {
                    (resp.error_code, resp.error_message, resp.host, resp.port)
                };
                match error {
                    code::NONE => Ok(format!("{host}:{port}")),
                    code::COORDINATOR_LOAD_IN_PROGRESS
                    | code::COORDINATOR_NOT_AVAILABLE
                    | code::NOT_COORDINATOR => Err(Attempt::relookup(format!(
                        "FindCoordinator: {}",
                        message.as_deref().unwrap_or(code::name(error))
                    ))),
                    code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => {
                        Err(Attempt::Stop(TransportError::unauthorized(format!(
                            "FindCoordinator for transactional id '{transactional_id}': the \
                             principal needs the DESCRIBE ACL on TransactionalId \
                             '{transactional_id}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a \
                             member needs WRITE on it, which implies DESCRIBE"
                        ))))
                    }
                    other => Err(Attempt::relookup(format!(
                        "FindCoordinator for '{transactional_id}' failed with error {other} ({})",
                        message.as_deref().unwrap_or(code::name(other))
                    ))),
                }
            });
            match outcome {
                Ok(addr) => return Ok(addr),
                Err(Attempt::Again { why, .. } | Attempt::Broken(why)) => {
                    last = format!("{server}: {why}")
                }
                Err(stop) => return Err(stop),
            }
        }
        Err(Attempt::relookup(last))
    }

    /// Asks a bootstrap server (then the known brokers) for the leaders of `topic`.
    fn refresh_leaders(&self, topic: &str, deadline: Instant) -> Result<(), Attempt> {
        let mut last = String::from("no bootstrap server configured");
        for server in &self.bootstrap {
            let outcome = self.on(server, deadline, |conn| {
                let Some(version) = conn.version_at_most::<MetadataRequest>(12) else {
                    return Err(Attempt::Stop(TransportError::config(format!(
                        "the broker at {server} supports no Metadata version this client knows"
                    ))));
                };
                let req = MetadataRequest::default()
                    .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                        TopicName(StrBytes::from_string(topic.to_owned())),
                    ))]))
                    .with_allow_auto_topic_creation(false);
                let resp = conn.call(&req, version, deadline)?;
                let brokers: HashMap<i32, String> = resp
                    .brokers
                    .iter()
                    .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
                    .collect();
                let Some(t) = resp
                    .topics
                    .iter()
                    .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
                else {
                    return Err(Attempt::again(format!(
                        "Metadata did not mention topic '{topic}'"
                    )));
                };
                match t.error_code {
                    code::NONE => {}
                    code::TOPIC_AUTHORIZATION_FAILED => {
                        return Err(Attempt::Stop(TransportError::unauthorized(format!(
                            "reading the metadata of topic '{topic}': the principal needs the \
                             DESCRIBE ACL on Topic '{topic}' (TOPIC_AUTHORIZATION_FAILED), which \
                             READ or WRITE implies: writing to the topic needs WRITE, reading it \
                             READ"
                        ))))
                    }
                    code::UNKNOWN_TOPIC_OR_PARTITION => {
                        return Err(Attempt::again(format!(
                            "topic '{topic}' is unknown to the broker at {server} \
                             (UNKNOWN_TOPIC_OR_PARTITION): it may still be being created"
                        )))
                    }
                    other => {
                        return Err(Attempt::again(format!(
                            "Metadata for topic '{topic}': error {other} ({})",
                            code::name(other)
                        )))
                    }
                }
                let mut leaders = lock(&self.leaders);
                for p in &t.partitions {
                    if p.error_code == code::NONE {
                        if let Some(addr) = brokers.get(&p.leader_id.0) {
                            leaders.insert((topic.to_owned(), p.partition_index), addr.clone());
                        }
                    }
                }
                Ok(())
            });
            match outcome {
                Ok(()) => return Ok(()),
                Err(Attempt::Again { why, .. } | Attempt::Broken(why)) => {
                    last = format!("{server}: {why}")
                }
                Err(stop) => return Err(stop),
            }
        }
        Err(Attempt::again(last))
    }
}

/// Splits and checks `bootstrap.servers`: each entry `host:port` with a port in 1..=65535.
pub(crate) fn parse_bootstrap(raw: &str) -> Result<Vec<String>, TransportError> {
    let entries: Vec<String> = raw
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(TransportError::config(format!(
            "bootstrap servers '{raw}' name no broker: give host:port[,host:port...]"
        )));
    }
    for e in &entries {
        let bad = |why: &str| {
            TransportError::config(format!(
                "bootstrap server '{e}' in '{raw}' is not host:port ({why})"
            ))
        };
        if e.contains("://") {
            return Err(bad("no scheme: write 127.0.0.1:9092, not a URL"));
        }
        let Some((host, port)) = e.rsplit_once(':') else {
            return Err(bad("no port"));
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(bad("the port must be a number from 1 to 65535")),
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_syntax_is_checked() {
        assert_eq!(
            parse_bootstrap("a:1, b:2").unwrap(),
            ["a:1".to_owned(), "b:2".to_owned()]
        );
        assert!(parse_bootstrap("[::1]:9092").is_ok());
        for bad in [
            "",
            ",,,",
            "localhost:notaport",
            "http://127.0.0.1:9092",
            "host",
            ":9092",
            "h:0",
        ] {
            let e = parse_bootstrap(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{bad}: {e}");
        }
    }
}
