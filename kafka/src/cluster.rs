//! The cluster as the native client sees it: the bootstrap servers, the connection pool, the
//! transaction coordinator of each transactional id (FindCoordinator, cached), and the leader
//! of each partition (Metadata, cached). Every call goes through [`Cluster::retry`], which
//! retries what Kafka calls retriable until a deadline and stops on everything else.

mod layout;
mod lookup;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::classify::{self, Class};
use super::config::KafkaConfig;
use super::connections::Pool;
use super::net::{Conn, NetError};
use super::security::Security;
use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::lock::lock;

pub(crate) use super::classify::code;
pub(crate) use crate::api::metadata::{Layout, TopicState};
use crate::api::metadata::{Metadata, TopicMetadata};
use crate::api::Attempt;
pub(crate) use layout::{verdict, CONFIRM_PAUSE};
use lookup::{answer_on, find_coordinator_on};

/// The most other transactional ids one FindCoordinator asks for (see
/// [`Cluster::want_coordinator`]).
pub(crate) const LOOKUP_BATCH: usize = 255;

/// The native client's view of the cluster.
pub(crate) struct Cluster {
    bootstrap: Vec<String>,
    /// advertised address -> the address to connect to.
    overrides: HashMap<String, String>,
    pool: Arc<Pool>,
    /// transactional id -> the coordinator's address.
    coordinators: Mutex<HashMap<String, String>>,
    /// Transactional ids whose coordinator this process will need (the roles it has a
    /// candidacy for): a lookup of one asks for others not known yet in the same request.
    wanted: Mutex<std::collections::BTreeSet<String>>,
    /// (topic, partition) -> the leader's address.
    leaders: Mutex<HashMap<(String, i32), String>>,
    /// Whether any broker of the cluster ever answered this client (a connection was made).
    answered: Arc<std::sync::atomic::AtomicBool>,
}

/// While no broker of the cluster has ever answered (nothing listens at the bootstrap address,
/// the address is wrong, a firewall drops it), a call gives up after this many attempts instead
/// of retrying until its deadline: the caller (a driver, which retries with its own backoff and
/// shows the failure in its snapshot; a describe) learns of it within a second, not after the
/// request timeout. Once the cluster answered, failures are retried until the deadline.
const ATTEMPTS_BEFORE_FIRST_ANSWER: u32 = 3;

/// What [`Cluster::retry`] remembers between attempts.
#[derive(Default)]
struct Retries {
    tries: u32,
    silent_before: bool,
}

impl Retries {
    /// After a failed attempt: how long to pause before the next, or the error to give up
    /// with (see [`Cluster::retry`]).
    fn pause(
        &mut self,
        cluster: &Cluster,
        what: &str,
        deadline: Instant,
        failed: Attempt,
    ) -> Result<Duration, TransportError> {
        let (why, code, silent) = match failed {
            Attempt::Stop(e) => return Err(e),
            Attempt::Again { why, code, .. } => (why, code, false),
            Attempt::Broken(why) => (why, None, false),
            Attempt::Silent(why) => (why, None, true),
        };
        self.tries += 1;
        let tries = self.tries;
        let pause = Duration::from_millis(20u64 << tries.min(4));
        let never_answered = !cluster.answered.load(std::sync::atomic::Ordering::Acquire);
        if never_answered && tries >= ATTEMPTS_BEFORE_FIRST_ANSWER {
            return Err(TransportError::retriable(format!(
                "{what}: no broker of the Kafka cluster at {} could be reached yet ({tries} \
                 attempts; is the address right and the cluster up?): {why}",
                cluster.bootstrap()
            )));
        }
        if silent && self.silent_before && !never_answered {
            // Looked up again, and still a silent broker: the leader or coordinator has not
            // moved yet. Waiting for it here would hold the caller's thread (a host's I/O
            // thread) for as long as the cluster takes to move it; the caller retries on its
            // own schedule instead.
            return Err(TransportError::retriable(format!(
                "{what}: the broker for it is not answering, and no other broker has taken \
                 over yet: {why}"
            )));
        }
        self.silent_before = silent;
        if Instant::now() + pause >= deadline {
            let e = TransportError::retriable(format!(
                "{what}: no usable answer from the Kafka cluster at {} in time ({tries} \
                 attempts): {why}",
                cluster.bootstrap()
            ));
            return Err(match code {
                Some(c) => e.with_kafka_code(c),
                None => e,
            });
        }
        Ok(pause)
    }
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
            pool: Arc::new(Pool::new(
                security,
                client_id,
                config.connections_per_broker(),
                config.request_timeout(),
            )),
            coordinators: Mutex::new(HashMap::new()),
            wanted: Mutex::new(std::collections::BTreeSet::new()),
            answered: Arc::new(std::sync::atomic::AtomicBool::new(false)),
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

    /// How many requests this cluster view sent.
    pub(crate) fn requests(&self) -> u64 {
        self.pool.requests()
    }

    /// How many requests this cluster view gave up on when their broker went silent.
    pub(crate) fn requests_abandoned(&self) -> u64 {
        self.pool.requests_abandoned()
    }

    /// How many requests of each API this cluster view sent.
    pub(crate) fn requests_by_api(&self) -> Vec<(i16, u64)> {
        self.pool.requests_by_api()
    }

    /// SASL sessions renewed on their connections, and connections replaced at the end of
    /// theirs (KIP-368).
    pub(crate) fn reauthentications(&self) -> (u64, u64) {
        self.pool.reauthentications()
    }

    /// Runs `attempt` until it succeeds, stops, or `deadline` passes (then a retriable error
    /// describing `what` and the last reason, with the last Kafka error code the broker
    /// answered). Pauses grow from 20 ms to at most 400 ms.
    pub(crate) fn retry<T>(
        &self,
        what: &str,
        deadline: Instant,
        mut attempt: impl FnMut(&Cluster) -> Result<T, Attempt>,
    ) -> Result<T, TransportError> {
        let mut retries = Retries::default();
        loop {
            match attempt(self) {
                Ok(v) => return Ok(v),
                Err(failed) => thread::sleep(retries.pause(self, what, deadline, failed)?),
            }
        }
    }

    /// [`retry`](Self::retry) for an attempt that holds no thread: the pauses are the timer's.
    pub(crate) async fn retry_async<T, F>(
        &self,
        what: &str,
        deadline: Instant,
        mut attempt: impl FnMut() -> F,
    ) -> Result<T, TransportError>
    where
        F: std::future::Future<Output = Result<T, Attempt>>,
    {
        let mut retries = Retries::default();
        loop {
            match attempt().await {
                Ok(v) => return Ok(v),
                Err(failed) => {
                    let pause = retries.pause(self, what, deadline, failed)?;
                    super::task_runtime::sleep_until(Instant::now() + pause).await;
                }
            }
        }
    }

    /// Notes that this process will need the coordinator of `transactional_id` (a role it has
    /// a candidacy for): the next lookup of any id (FindCoordinator v4 or newer) asks for it
    /// too. A standby whose turn comes in a burst of failovers then finds its coordinator
    /// known, instead of sending a FindCoordinator of its own then.
    pub(crate) fn want_coordinator(&self, transactional_id: &str) {
        lock(&self.wanted).insert(transactional_id.to_owned());
    }

    /// Undoes [`want_coordinator`](Self::want_coordinator) and forgets the coordinator.
    pub(crate) fn unwant_coordinator(&self, transactional_id: &str) {
        lock(&self.wanted).remove(transactional_id);
        lock(&self.coordinators).remove(transactional_id);
    }

    /// Up to `n` wanted ids not in `except` whose coordinator is not known.
    fn wanted_unknown(&self, except: &[&str], n: usize) -> Vec<String> {
        if n == 0 {
            return Vec::new();
        }
        let wanted = lock(&self.wanted);
        let known = lock(&self.coordinators);
        wanted
            .iter()
            .filter(|id| !except.contains(&id.as_str()) && !known.contains_key(id.as_str()))
            .take(n)
            .cloned()
            .collect()
    }

    /// The coordinator of `transactional_id` found last, if any.
    pub(crate) fn cached_coordinator(&self, transactional_id: &str) -> Option<String> {
        lock(&self.coordinators).get(transactional_id).cloned()
    }

    /// Runs `f` on a connection to the transaction coordinator of `transactional_id` (found
    /// with FindCoordinator when not cached), holding no thread. An `Again { relookup: true }`
    /// forgets the cached coordinator.
    pub(crate) async fn at_coordinator_async<T: Send + 'static>(
        &self,
        transactional_id: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt> + Send + 'static,
    ) -> Result<T, Attempt> {
        let addr = match self.cached_coordinator(transactional_id) {
            Some(addr) => addr,
            None => self.look_up_coordinator(transactional_id, deadline).await?,
        };
        let result = self.on_async(&addr, deadline, f).await;
        self.forget_coordinator_after(transactional_id, &result);
        result
    }

    /// Finds the coordinator of `transactional_id` (with up to [`LOOKUP_BATCH`] wanted ids
    /// not known yet) and caches it.
    async fn look_up_coordinator(
        &self,
        transactional_id: &str,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        let others = self.wanted_unknown(&[transactional_id], LOOKUP_BATCH);
        let addr = self
            .find_coordinator(transactional_id, &others, deadline)
            .await?;
        lock(&self.coordinators).insert(transactional_id.to_owned(), addr.clone());
        Ok(addr)
    }

    /// Forgets the coordinator of `transactional_id` after a `result` that says it may have
    /// moved.
    fn forget_coordinator_after<T>(&self, transactional_id: &str, result: &Result<T, Attempt>) {
        if let Err(Attempt::Again { relookup: true, .. } | Attempt::Silent(_)) = result {
            lock(&self.coordinators).remove(transactional_id);
        }
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
        let addr = match self.cached_leader(topic, partition) {
            Some(addr) => addr,
            None => super::task_runtime::block_on(self.look_up_leader(topic, partition, deadline))?,
        };
        let result = self.on(&addr, deadline, f);
        self.forget_leader_after(topic, partition, &result);
        result
    }

    /// [`at_leader`](Self::at_leader) holding no thread.
    pub(crate) async fn at_leader_async<T: Send + 'static>(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt> + Send + 'static,
    ) -> Result<T, Attempt> {
        let addr = match self.cached_leader(topic, partition) {
            Some(addr) => addr,
            None => self.look_up_leader(topic, partition, deadline).await?,
        };
        let result = self.on_async(&addr, deadline, f).await;
        self.forget_leader_after(topic, partition, &result);
        result
    }

    fn cached_leader(&self, topic: &str, partition: i32) -> Option<String> {
        lock(&self.leaders)
            .get(&(topic.to_owned(), partition))
            .cloned()
    }

    /// Reads the leaders of `topic` and returns that of `partition`.
    async fn look_up_leader(
        &self,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<String, Attempt> {
        self.refresh_leaders(topic, deadline).await?;
        self.cached_leader(topic, partition).ok_or_else(|| {
            Attempt::relookup(format!(
                "no leader known for partition {partition} of topic '{topic}'"
            ))
        })
    }

    /// Forgets the leader of `topic`/`partition` after a `result` that says it may have moved.
    fn forget_leader_after<T>(&self, topic: &str, partition: i32, result: &Result<T, Attempt>) {
        if let Err(Attempt::Again { relookup: true, .. } | Attempt::Silent(_)) = result {
            lock(&self.leaders).remove(&(topic.to_owned(), partition));
        }
    }

    /// Runs `f` on the connection to `addr`.
    pub(crate) fn on<T>(
        &self,
        addr: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt>,
    ) -> Result<T, Attempt> {
        let addr = self.overrides.get(addr).map_or(addr, String::as_str);
        let answered = &self.answered;
        let net = self
            .pool
            .with(addr, deadline, |conn| answer_on(answered, conn, f));
        self.settle(addr, net)
    }

    /// [`on`](Self::on) holding no thread: `f` runs on a connection thread of `addr`'s (see
    /// [`Pool::request`]).
    pub(crate) async fn on_async<T: Send + 'static>(
        &self,
        addr: &str,
        deadline: Instant,
        f: impl FnOnce(&mut Conn) -> Result<T, Attempt> + Send + 'static,
    ) -> Result<T, Attempt> {
        let addr = self.overrides.get(addr).map_or(addr, String::as_str);
        let answered = Arc::clone(&self.answered);
        let net = self
            .pool
            .request(addr, deadline, move |conn| answer_on(&answered, conn, f))
            .await
            .unwrap_or_else(|_| {
                Err(NetError::Io(format!(
                    "no answer from {addr}: its connection thread dropped the request"
                )))
            });
        self.settle(addr, net)
    }

    /// What a call to `addr` came to: `f`'s own outcome, or what the connection's failure
    /// means (a silent broker, or one to look up again).
    fn settle<T>(
        &self,
        addr: &str,
        net: Result<Result<T, Attempt>, NetError>,
    ) -> Result<T, Attempt> {
        match net {
            Ok(outcome) => outcome,
            Err(NetError::Io(why)) if self.pool.is_silent(addr) => Err(Attempt::Silent(why)),
            Err(NetError::Io(why)) => Err(Attempt::relookup(why)),
            Err(NetError::Stop(e)) => Err(Attempt::Stop(e)),
        }
    }

    /// Connects to a bootstrap server (or finds a connection open): a cheap check that the
    /// cluster answers at all, made before the topic check and creation, which would otherwise
    /// wait their whole timeout on a cluster that was never reachable.
    pub(crate) fn reach(&self, deadline: Instant) -> Result<(), TransportError> {
        self.retry("connecting to the cluster", deadline, |cluster| {
            let mut last = Attempt::again("no bootstrap server configured");
            for server in &cluster.bootstrap {
                match cluster.on(server, deadline, |_| Ok(())) {
                    Ok(()) => return Ok(()),
                    Err(e) => last = e,
                }
            }
            Err(last)
        })
    }

    /// Looks up the coordinators of those of `transactional_ids` not known yet, in one
    /// FindCoordinator request per 256 where the broker supports v4, and caches every one
    /// answered. A request with room left also asks for wanted ids (see
    /// [`want_coordinator`](Self::want_coordinator)). Best effort: an id left unknown is
    /// looked up alone when it is used.
    pub(crate) async fn find_coordinators(&self, transactional_ids: &[&str], deadline: Instant) {
        let mut unknown: Vec<String> = {
            let known = lock(&self.coordinators);
            transactional_ids
                .iter()
                .filter(|id| !known.contains_key(**id))
                .map(|id| (*id).to_owned())
                .collect()
        };
        if unknown.is_empty() {
            return;
        }
        let room = (LOOKUP_BATCH + 1 - unknown.len() % (LOOKUP_BATCH + 1)) % (LOOKUP_BATCH + 1);
        unknown.extend(self.wanted_unknown(&[], room));
        unknown.sort_unstable();
        unknown.dedup();
        for chunk in unknown.chunks(LOOKUP_BATCH + 1) {
            if let Some((first, others)) = chunk.split_first() {
                if let Ok(addr) = self.find_coordinator(first, others, deadline).await {
                    lock(&self.coordinators).insert(first.clone(), addr);
                }
            }
        }
    }

    /// Asks each bootstrap server in turn for the coordinator of `transactional_id`. From
    /// FindCoordinator v4 on, the request also names `others` (each a wanted id whose
    /// coordinator is unknown, see [`want_coordinator`](Self::want_coordinator)); every one of
    /// them answered without an error is cached, the others are left for their own lookup.
    async fn find_coordinator(
        &self,
        transactional_id: &str,
        others: &[String],
        deadline: Instant,
    ) -> Result<String, Attempt> {
        let mut last = String::from("no bootstrap server configured");
        let mut all_silent = true;
        for server in &self.bootstrap {
            let (id, others, at) = (transactional_id.to_owned(), others.to_vec(), server.clone());
            let outcome = self
                .on_async(server, deadline, move |conn| {
                    find_coordinator_on(conn, &at, &id, &others, deadline)
                })
                .await
                .and_then(|found| {
                    let mut cache = lock(&self.coordinators);
                    for (id, addr) in found.others {
                        cache.insert(id, addr);
                    }
                    found.ours
                });
            match outcome {
                Ok(addr) => return Ok(addr),
                Err(Attempt::Silent(why)) => last = format!("{server}: {why}"),
                Err(Attempt::Again { why, .. } | Attempt::Broken(why)) => {
                    all_silent = false;
                    last = format!("{server}: {why}")
                }
                Err(stop) => return Err(stop),
            }
        }
        if all_silent && !self.bootstrap.is_empty() {
            return Err(Attempt::Silent(last));
        }
        Err(Attempt::relookup(last))
    }

    /// Asks the bootstrap servers in turn for the metadata of `topic`: the brokers' addresses
    /// by node id, and the topic's entry. A topic the broker does not know is an entry with
    /// UNKNOWN_TOPIC_OR_PARTITION.
    async fn metadata(&self, topic: &str, deadline: Instant) -> Result<TopicMetadata, Attempt> {
        let mut last = String::from("no bootstrap server configured");
        let mut last_code = None;
        let mut all_silent = true;
        for server in &self.bootstrap {
            let (topic, server) = (topic.to_owned(), server.clone());
            let at = server.clone();
            let outcome = self
                .on_async(&at, deadline, move |conn| {
                    let x = Metadata {
                        topic: &topic,
                        server: &server,
                    };
                    conn.exchange(&x, deadline)
                })
                .await;
            match outcome {
                Ok(m) => return Ok(m),
                Err(Attempt::Again { why, code, .. }) => {
                    all_silent = false;
                    last = format!("{at}: {why}");
                    last_code = code;
                }
                Err(Attempt::Broken(why)) => {
                    all_silent = false;
                    last = format!("{at}: {why}")
                }
                Err(Attempt::Silent(why)) => last = format!("{at}: {why}"),
                Err(stop) => return Err(stop),
            }
        }
        if all_silent && !self.bootstrap.is_empty() {
            // Every server is silent: nothing to wait for here (see `retry`).
            return Err(Attempt::Silent(last));
        }
        Err(Attempt::Again {
            relookup: false,
            why: last,
            code: last_code,
        })
    }

    /// Asks a bootstrap server for the leaders of `topic`.
    async fn refresh_leaders(&self, topic: &str, deadline: Instant) -> Result<(), Attempt> {
        let found = self.metadata(topic, deadline).await?.leaders()?;
        let mut leaders = lock(&self.leaders);
        for (partition, addr) in found {
            leaders.insert((topic.to_owned(), partition), addr);
        }
        Ok(())
    }

    /// What the brokers' metadata says of `topic` now: missing, or its partition count.
    pub(crate) async fn topic_state(
        &self,
        topic: &str,
        deadline: Instant,
    ) -> Result<TopicState, TransportError> {
        let what = format!("reading the metadata of topic '{topic}'");
        let what = what.as_str();
        self.retry_async(what, deadline, || async move {
            self.metadata(topic, deadline).await?.state(what)
        })
        .await
    }

    /// The cluster's brokers and the layout of `topic`, from one Metadata answer (retried
    /// until `deadline` as [`topic_state`](Self::topic_state) is).
    pub(crate) async fn layout(
        &self,
        topic: &str,
        deadline: Instant,
    ) -> Result<Layout, TransportError> {
        let what = format!("reading the metadata of topic {topic}");
        let what = what.as_str();
        self.retry_async(what, deadline, || async move {
            self.metadata(topic, deadline).await?.layout(what)
        })
        .await
    }

    /// Returns once `partition` of `topic` has a leader this client knows (cached, or from a
    /// Metadata answer), retrying until `deadline` while the partition has none. A topic that
    /// is missing, a partition out of its range, or (with `expected`) another partition count
    /// is a configuration error as soon as two metadata answers agree on it
    /// ([`confirm`](Self::confirm)).
    ///
    /// A guarded write calls this before it takes its role's session, which a transaction
    /// holds across its round trips: a write to a partition that does not exist, or that is
    /// between leaders, then waits here, and the role's lease renewals go on meanwhile.
    pub(crate) async fn leader_ready(
        &self,
        topic: &str,
        partition: i32,
        expected: Option<i32>,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        if self.cached_leader(topic, partition).is_some() {
            return Ok(());
        }
        let what = format!("finding the leader of partition {partition} of topic '{topic}'");
        self.retry_async(&what, deadline, || async move {
            let why = match self.refresh_leaders(topic, deadline).await {
                Ok(()) if self.cached_leader(topic, partition).is_some() => return Ok(()),
                Ok(()) => format!(
                    "the metadata of topic '{topic}' names no leader for partition {partition}"
                ),
                Err(Attempt::Again {
                    why, code: Some(c), ..
                }) if code::error(c) == Some(code::E::UnknownTopicOrPartition) => why,
                Err(other) => return Err(other),
            };
            // Missing, out of range, or only between leaders: two answers decide.
            let unknown = TransportError::retriable(why.clone())
                .with_kafka_code(code::E::UnknownTopicOrPartition.code());
            let decided = self
                .confirm(unknown, topic, partition, expected, deadline)
                .await;
            if decided.kind() == kafka_coordination_transport::error::ErrorKind::Config {
                return Err(Attempt::Stop(decided));
            }
            Err(Attempt::Again {
                relookup: false,
                why,
                code: Some(code::E::LeaderNotAvailable.code()),
            })
        })
        .await
    }

    /// Decides an UNKNOWN_TOPIC_OR_PARTITION (or UNKNOWN_TOPIC_ID) that `err` carries, met
    /// while using `partition` of `topic` (whose partition count must be `expected`, when
    /// given): a configuration error when two metadata answers, [`CONFIRM_PAUSE`] apart,
    /// both say the topic is missing, has another partition count, or lacks the partition;
    /// otherwise `err` as it is (retriable: the broker had not caught up). Any other error is
    /// returned unchanged.
    pub(crate) async fn confirm(
        &self,
        err: TransportError,
        topic: &str,
        partition: i32,
        expected: Option<i32>,
        deadline: Instant,
    ) -> TransportError {
        let unknown = err
            .kafka_code()
            .is_some_and(|c| classify::class(i32::from(c)) == Class::Confirm);
        if !unknown {
            return err;
        }
        let Ok(first) = self.topic_state(topic, deadline).await else {
            return err;
        };
        let Some(_) = verdict(topic, partition, expected, first) else {
            return err;
        };
        super::task_runtime::sleep_until(Instant::now() + CONFIRM_PAUSE).await;
        let Ok(second) = self
            .topic_state(topic, deadline.max(Instant::now() + CONFIRM_PAUSE))
            .await
        else {
            return err;
        };
        match verdict(topic, partition, expected, second) {
            Some(why) => TransportError::config(why)
                .with_kafka_code(code::E::UnknownTopicOrPartition.code())
                .with_source(err),
            None => err,
        }
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
    fn only_a_missing_topic_a_wrong_count_or_a_missing_partition_is_a_config_error() {
        let missing = verdict("t", 0, Some(4), TopicState::Missing).expect("config");
        assert!(missing.contains("topic t does not exist"), "{missing}");
        let count = verdict("t", 1, Some(8), TopicState::Partitions(4)).expect("config");
        assert!(
            count.contains("topic t has 4 partitions") && count.contains("configured with 8"),
            "{count}"
        );
        let partition = verdict("data", 5, None, TopicState::Partitions(3)).expect("config");
        assert!(
            partition.contains("partition 5 of topic data does not exist")
                && partition.contains("has 3 partitions"),
            "{partition}"
        );
        // The topic exists with the partition: the UNKNOWN_TOPIC_OR_PARTITION was transient.
        assert_eq!(verdict("t", 3, Some(4), TopicState::Partitions(4)), None);
        assert_eq!(verdict("data", 2, None, TopicState::Partitions(3)), None);
    }

    #[test]
    fn codes_choose_retry_refresh_or_stop() {
        let again = |a: Attempt| match a {
            Attempt::Again { relookup, code, .. } => Some((relookup, code)),
            _ => None,
        };
        assert_eq!(
            again(Attempt::from_code(
                code::E::UnknownTopicOrPartition.code(),
                "x"
            )),
            Some((true, Some(3)))
        );
        assert_eq!(
            again(Attempt::from_code(code::E::NotLeaderOrFollower.code(), "x")),
            Some((true, Some(6)))
        );
        assert_eq!(
            again(Attempt::from_code(
                code::E::CoordinatorLoadInProgress.code(),
                "x"
            )),
            Some((false, Some(14)))
        );
        match Attempt::from_code(code::E::ProducerFenced.code(), "x") {
            Attempt::Stop(e) => assert_eq!((e.is_fenced(), e.kafka_code()), (true, Some(90))),
            _ => panic!("PRODUCER_FENCED stops"),
        }
        match Attempt::from_code(10, "too large") {
            Attempt::Stop(e) => assert_eq!(
                e.kind(),
                kafka_coordination_transport::error::ErrorKind::Config
            ),
            _ => panic!("MESSAGE_TOO_LARGE stops"),
        }
    }

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
            assert_eq!(
                e.kind(),
                kafka_coordination_transport::error::ErrorKind::Config,
                "{bad}: {e}"
            );
        }
    }
}
