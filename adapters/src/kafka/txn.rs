//! Native transactional sessions: one per role held by this process, on the shared
//! connections of [`Cluster`]. No librdkafka producer, no statistics, no thread per session.
//!
//! * **Acquire** is InitProducerId for `transactional.id = role` with the lease duration as the
//!   transaction timeout; the granted pair comes from the response. Nothing else in this
//!   process ever sends InitProducerId for the role, so its epoch moves only when the library
//!   asks (a challenge, a resign's supersede) or another member does.
//! * **A write** is one transaction: AddPartitionsToTxn for the partitions it touches,
//!   Produce of one transactional record batch per partition (the pair, and a base sequence
//!   per partition that starts at 0 for the pair and grows by the record count), then
//!   EndTxn(commit).
//! * **Offsets**: a write may also commit a consumer group's offsets in its transaction
//!   (AddOffsetsToTxn and TxnOffsetCommit before EndTxn, see `offsets.rs`).
//! * **Versions** are pinned below transaction version 2 (KIP-890 part 2): EndTxn <= v3,
//!   AddPartitionsToTxn <= v3, Produce <= v9, InitProducerId <= v4. With them the coordinator
//!   never bumps the epoch at a commit, so a term's pair stays constant across renewals.
//! * **Unknown outcomes are resolved, never guessed.** A produce whose answer was lost is sent
//!   again with the same sequence (the broker de-duplicates). A commit whose answer was lost
//!   is sent again (the coordinator answers NONE once the transaction is `CompleteCommit`, and
//!   CONCURRENT_TRANSACTIONS while it is `PrepareCommit`); it is never turned into an abort,
//!   which the coordinator refuses for a committed transaction. When a deadline passes with an
//!   outcome still unknown, the session remembers it and resolves it before its next write.
//! * **Fencing**: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and INVALID_PRODUCER_ID_MAPPING
//!   anywhere end the session ([`ErrorKind::Fenced`](crate::ErrorKind::Fenced)).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, DescribeProducersRequest, EndTxnRequest, InitProducerIdRequest,
    ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::classify::code;
use super::cluster::{Attempt, Cluster};
use super::config::KafkaConfig;
use super::exec::AsyncMutex;
use super::net::Conn;
use super::offsets::{add_offsets_on, Groups, OwnedGroupOffsets};
use crate::error::TransportError;
use crate::sync::lock;
use crate::transport::{GroupOffsets, GuardedRecord};

/// The highest request versions this client sends (all below transaction version 2).
pub(crate) const MAX_INIT_PRODUCER_ID: i16 = 4;
const MAX_ADD_PARTITIONS: i16 = 3;
const MAX_PRODUCE: i16 = 9;
const MAX_END_TXN: i16 = 3;

/// The shortest transaction timeout accepted (the coordinator checks for expired
/// transactions on a timer; a shorter timeout only churns).
pub(crate) const MIN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(1);

type TopicPartition = (String, i32);

/// What a session left unfinished when a deadline passed.
#[derive(Clone, Debug, Default)]
struct Unfinished {
    /// A transaction is open (partitions were added): it must end before the next begins.
    open: bool,
    /// The commit was sent and its outcome is unknown: it must be committed again, never
    /// aborted.
    committing: bool,
    /// Partitions whose last produce outcome is unknown: their next sequence must be learned
    /// from the partition leader (DescribeProducers).
    sequences: BTreeSet<TopicPartition>,
}

/// The transactional session of one role.
struct Session {
    role: Role,
    token: FencingToken,
    /// The next base sequence per partition, for this pair.
    sequences: HashMap<TopicPartition, i32>,
    unfinished: Unfinished,
}

/// A role's entry in the registry. The pair is fixed for the entry's life, so finding the
/// session of a token never waits for the session's lock, which a transaction holds across
/// its round trips.
struct Held {
    role: Role,
    token: FencingToken,
    /// Set once the broker fenced the pair: every later write is refused at once.
    fenced: AtomicBool,
    session: AsyncMutex<Session>,
}

/// The sessions of every role this process holds, on one cluster.
pub(crate) struct Sessions {
    cluster: Arc<Cluster>,
    /// The group coordinators, for offsets committed in a transaction.
    groups: Arc<Groups>,
    request_timeout: Duration,
    operation_timeout: Duration,
    roles: Mutex<Registry>,
}

/// The sessions by role, and by pair for the writes (which name only the pair): a process
/// leading thousands of roles finds a session without a scan.
#[derive(Default)]
struct Registry {
    by_role: BTreeMap<Role, Arc<Held>>,
    by_token: HashMap<FencingToken, Arc<Held>>,
}

impl Registry {
    fn insert(&mut self, held: Arc<Held>) {
        if let Some(old) = self.by_role.insert(held.role.clone(), Arc::clone(&held)) {
            self.by_token.remove(&old.token);
        }
        self.by_token.insert(held.token, held);
    }

    fn remove(&mut self, role: &Role) -> Option<Arc<Held>> {
        let held = self.by_role.remove(role)?;
        if self
            .by_token
            .get(&held.token)
            .is_some_and(|h| Arc::ptr_eq(h, &held))
        {
            self.by_token.remove(&held.token);
        }
        Some(held)
    }
}

impl Sessions {
    pub(crate) fn new(cluster: Arc<Cluster>, config: &KafkaConfig) -> Sessions {
        Sessions {
            groups: Arc::new(Groups::new(Arc::clone(&cluster))),
            cluster,
            request_timeout: config.request_timeout(),
            operation_timeout: config.operation_timeout(),
            roles: Mutex::new(Registry::default()),
        }
    }

    /// The group coordinators this client knows.
    pub(crate) fn groups(&self) -> &Arc<Groups> {
        &self.groups
    }

    /// How many roles hold a session.
    pub(crate) fn len(&self) -> usize {
        lock(&self.roles).by_role.len()
    }

    /// A pair held by some role whose session was not fenced (for single-role callers).
    pub(crate) fn any_token(&self) -> Option<FencingToken> {
        lock(&self.roles)
            .by_role
            .values()
            .find(|h| !h.fenced.load(Ordering::Acquire))
            .map(|h| h.token)
    }

    /// The role whose session holds (or held, until released) `token`.
    pub(crate) fn role_of(&self, token: FencingToken) -> Option<Role> {
        lock(&self.roles)
            .by_token
            .get(&token)
            .map(|h| h.role.clone())
    }

    /// Drops the session of `role` (the term is over for this process). An open transaction
    /// that was not committing is aborted, best effort, so that it does not hold back readers
    /// until its timeout.
    pub(crate) fn release(&self, role: &Role) {
        let Some(held) = lock(&self.roles).remove(role) else {
            return;
        };
        super::exec::block_on(async {
            let mut s = held.session.lock().await;
            if s.unfinished.open && !s.unfinished.committing && !held.fenced.load(Ordering::Acquire)
            {
                let deadline = Instant::now() + self.request_timeout.min(Duration::from_secs(2));
                let _ = self.end_txn(&mut s, false, deadline).await;
            }
        });
    }

    /// InitProducerId for `role`: fences every earlier holder of the role and returns the new
    /// pair, which this process's session for the role now holds.
    pub(crate) fn acquire(
        &self,
        role: &Role,
        transaction_timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        super::exec::block_on(self.acquire_async(role, transaction_timeout))
    }

    /// [`acquire`](Self::acquire) holding no thread while it waits.
    pub(crate) async fn acquire_async(
        &self,
        role: &Role,
        transaction_timeout: Duration,
    ) -> Result<FencingToken, TransportError> {
        if transaction_timeout < MIN_TRANSACTION_TIMEOUT {
            return Err(TransportError::config(format!(
                "transaction timeout {transaction_timeout:?} for role '{role}' is below {:?}; \
                 use a lease duration of at least 1 s",
                MIN_TRANSACTION_TIMEOUT
            )));
        }
        let timeout_ms = i32::try_from(transaction_timeout.as_millis()).map_err(|_| {
            TransportError::config(format!(
                "transaction timeout {transaction_timeout:?} for role '{role}' does not fit \
                 Kafka's i32 milliseconds"
            ))
        })?;
        // The old session (if any) ends now: whatever it held is about to be superseded.
        lock(&self.roles).remove(role);
        let deadline = Instant::now() + self.operation_timeout;
        let what = format!("InitProducerId for role '{role}'");
        let cluster = &self.cluster;
        let token = cluster
            .retry_async(&what, deadline, || {
                let role = role.clone();
                async move {
                    let id = role.as_str().to_owned();
                    cluster
                        .at_coordinator_async(&id, deadline, move |conn| {
                            init_producer_id_on(conn, &role, timeout_ms, deadline)
                        })
                        .await
                }
            })
            .await?;
        let session = Session {
            role: role.clone(),
            token,
            sequences: HashMap::new(),
            unfinished: Unfinished::default(),
        };
        let held = Held {
            role: role.clone(),
            token,
            fenced: AtomicBool::new(false),
            session: AsyncMutex::new(session),
        };
        lock(&self.roles).insert(Arc::new(held));
        Ok(token)
    }

    /// Writes `records` in one transaction of the session holding `token`; returns each
    /// record's offset. Holds no thread while it waits (for the session, or for an answer)
    /// unless run with [`block_on`](super::exec::block_on).
    pub(crate) async fn write_async(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        self.write_with_offsets_async(token, records, None).await
    }

    /// [`write_async`](Self::write_async) that also commits `offsets` in the transaction.
    pub(crate) async fn write_with_offsets_async(
        &self,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
        offsets: Option<GroupOffsets<'_>>,
    ) -> Result<Vec<i64>, TransportError> {
        let offsets = offsets
            .map(OwnedGroupOffsets::from)
            .transpose()?
            .filter(|o| !o.is_empty());
        if records.is_empty() && offsets.is_none() {
            return Ok(Vec::new());
        }
        let (role, held) = self.held_by(token)?;
        let mut s = held.session.lock().await;
        if held.fenced.load(Ordering::Acquire) {
            return Err(TransportError::fenced(format!(
                "the pair {token} of role '{role}' was fenced by a newer leader"
            )));
        }
        let deadline = Instant::now() + self.operation_timeout;
        let result = self
            .transact(&mut s, records, offsets.as_ref(), deadline)
            .await;
        if let Err(e) = &result {
            if e.is_fenced() {
                held.fenced.store(true, Ordering::Release);
            }
        }
        result
    }

    /// The session that holds `token`, or why there is none.
    fn held_by(&self, token: FencingToken) -> Result<(Role, Arc<Held>), TransportError> {
        let roles = lock(&self.roles);
        if let Some(h) = roles.by_token.get(&token) {
            return Ok((h.role.clone(), Arc::clone(h)));
        }
        if roles.by_role.is_empty() {
            return Err(TransportError::fenced(format!(
                "this client holds no epoch (token {token}): acquire_epoch was not called, or \
                 the term ended"
            )));
        }
        // A process may hold thousands of roles: name a few.
        const NAMED: usize = 4;
        let mut held: Vec<String> = roles
            .by_role
            .iter()
            .take(NAMED)
            .map(|(role, h)| format!("{} for role '{role}'", h.token))
            .collect();
        if roles.by_role.len() > NAMED {
            held.push(format!("{} more", roles.by_role.len() - NAMED));
        }
        Err(TransportError::fenced(format!(
            "token {token} is not a pair this client holds ({})",
            held.join(", ")
        )))
    }

    async fn transact(
        &self,
        s: &mut Session,
        records: &[GuardedRecord<'_>],
        consumed: Option<&OwnedGroupOffsets>,
        deadline: Instant,
    ) -> Result<Vec<i64>, TransportError> {
        self.finish_unfinished(s, deadline).await?;
        let partitions: BTreeSet<TopicPartition> = records
            .iter()
            .map(|r| (r.topic.to_owned(), r.partition))
            .collect();
        for tp in &partitions {
            if s.unfinished.sequences.contains(tp) {
                self.learn_sequence(s, tp, deadline).await?;
            }
        }
        s.unfinished.open = true;
        if !partitions.is_empty() {
            self.add_partitions(s, &partitions, deadline).await?;
        }
        let mut offsets = vec![-1i64; records.len()];
        for tp in &partitions {
            let indexes: Vec<usize> = records
                .iter()
                .enumerate()
                .filter(|(_, r)| r.topic == tp.0 && r.partition == tp.1)
                .map(|(i, _)| i)
                .collect();
            let batch: Vec<&GuardedRecord<'_>> = indexes.iter().map(|&i| &records[i]).collect();
            let base = self.produce(s, tp, &batch, deadline).await?;
            for (n, &i) in indexes.iter().enumerate() {
                offsets[i] = base.saturating_add(n as i64);
            }
        }
        if let Some(group) = consumed {
            self.add_offsets(s, &group.group, deadline).await?;
            self.groups
                .txn_offset_commit(&s.role, s.token, group, deadline)
                .await?;
        }
        s.unfinished.committing = true;
        self.end_txn(s, true, deadline).await?;
        s.unfinished = Unfinished::default();
        Ok(offsets)
    }

    /// Ends what an earlier write left open: a commit in doubt is committed again; any other
    /// open transaction is aborted.
    async fn finish_unfinished(
        &self,
        s: &mut Session,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        if !s.unfinished.open {
            return Ok(());
        }
        let commit = s.unfinished.committing;
        self.end_txn(s, commit, deadline).await?;
        s.unfinished.open = false;
        s.unfinished.committing = false;
        Ok(())
    }

    async fn add_partitions(
        &self,
        s: &Session,
        partitions: &BTreeSet<TopicPartition>,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        let topics: Vec<AddPartitionsToTxnTopic> = by_topic
            .into_iter()
            .map(|(t, ps)| {
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                    .with_partitions(ps)
            })
            .collect();
        let what = format!("AddPartitionsToTxn for role '{}'", s.role);
        let cluster = &self.cluster;
        let (role, token) = (&s.role, s.token);
        cluster
            .retry_async(&what, deadline, || {
                let (role, topics) = (role.clone(), topics.clone());
                async move {
                    let id = role.as_str().to_owned();
                    cluster
                        .at_coordinator_async(&id, deadline, move |conn| {
                            add_partitions_on(conn, &role, token, topics, deadline)
                        })
                        .await
                }
            })
            .await
    }

    /// AddOffsetsToTxn: `group`'s offsets join the open transaction.
    async fn add_offsets(
        &self,
        s: &Session,
        group: &str,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let what = format!("AddOffsetsToTxn of group '{group}' for role '{}'", s.role);
        let cluster = &self.cluster;
        let (role, token) = (&s.role, s.token);
        cluster
            .retry_async(&what, deadline, || {
                let (role, group) = (role.clone(), group.to_owned());
                async move {
                    let id = role.as_str().to_owned();
                    cluster
                        .at_coordinator_async(&id, deadline, move |conn| {
                            add_offsets_on(conn, &role, token, &group, deadline)
                        })
                        .await
                }
            })
            .await
    }

    /// Produces one transactional batch to `tp`; returns its base offset.
    async fn produce(
        &self,
        s: &mut Session,
        tp: &TopicPartition,
        records: &[&GuardedRecord<'_>],
        deadline: Instant,
    ) -> Result<i64, TransportError> {
        let base_sequence = *s.sequences.get(tp).unwrap_or(&0);
        let count = i32::try_from(records.len())
            .map_err(|_| TransportError::config("too many records in one guarded write"))?;
        let encoded = encode_batch_with_headers(
            s.token,
            true,
            base_sequence,
            records
                .iter()
                .map(|r| {
                    Ok((
                        r.key.map(bytes::Bytes::copy_from_slice),
                        r.value.map(bytes::Bytes::copy_from_slice),
                        headers_of(r)?,
                    ))
                })
                .collect::<Result<Vec<_>, TransportError>>()?
                .into_iter(),
        )?;
        let timeout_ms = i32::try_from(self.request_timeout.as_millis()).unwrap_or(i32::MAX);
        // From the first send on, the outcome is unknown until a definite answer arrives.
        s.unfinished.sequences.insert(tp.clone());
        let cluster = &self.cluster;
        let (role, token) = (&s.role, s.token);
        let what = format!("Produce to {}/{} for role '{role}'", tp.0, tp.1);
        let base = cluster
            .retry_async(&what, deadline, || {
                let produce = TxnProduce {
                    role: role.clone(),
                    token,
                    topic: tp.0.clone(),
                    partition: tp.1,
                    base_sequence,
                    timeout_ms,
                    encoded: encoded.clone(),
                    what: what.clone(),
                };
                async move {
                    cluster
                        .at_leader_async(&tp.0, tp.1, deadline, move |conn| {
                            produce.on(conn, deadline)
                        })
                        .await
                }
            })
            .await?;
        s.unfinished.sequences.remove(tp);
        s.sequences
            .insert(tp.clone(), base_sequence.wrapping_add(count));
        Ok(base)
    }

    /// Learns the next sequence of `tp` for this pair from the partition leader.
    async fn learn_sequence(
        &self,
        s: &mut Session,
        tp: &TopicPartition,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let token = s.token;
        let what = format!("DescribeProducers of {}/{}", tp.0, tp.1);
        let cluster = &self.cluster;
        let role = &s.role;
        let last = cluster
            .retry_async(&what, deadline, || {
                let (role, topic, what) = (role.clone(), tp.0.clone(), what.clone());
                let partition = tp.1;
                async move {
                    cluster
                        .at_leader_async(&tp.0, partition, deadline, move |conn| {
                            last_sequence_on(conn, &role, token, &topic, partition, &what, deadline)
                        })
                        .await
                }
            })
            .await?;
        let next = last.map_or(0, |l| l.wrapping_add(1));
        s.sequences.insert(tp.clone(), next);
        s.unfinished.sequences.remove(tp);
        Ok(())
    }

    /// EndTxn: commit (retried until definite) or abort.
    async fn end_txn(
        &self,
        s: &mut Session,
        commit: bool,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let verb = if commit { "commit" } else { "abort" };
        let what = format!("EndTxn ({verb}) for role '{}'", s.role);
        let cluster = &self.cluster;
        let (role, token) = (&s.role, s.token);
        let ended = cluster
            .retry_async(&what, deadline, || {
                let role = role.clone();
                async move {
                    let id = role.as_str().to_owned();
                    cluster
                        .at_coordinator_async(&id, deadline, move |conn| {
                            end_txn_on(conn, &role, token, commit, deadline)
                        })
                        .await
                }
            })
            .await?;
        // Either way nothing of this session is open any more.
        s.unfinished.open = false;
        s.unfinished.committing = false;
        if !ended && commit {
            // The transaction ended otherwise: the coordinator aborted it after its timeout
            // (with an epoch bump, a fence the caller checks for), or it never began.
            return Err(TransportError::retriable(format!(
                "{what}: the coordinator has no transaction of pair {} open (INVALID_TXN_STATE)",
                s.token
            ))
            .with_kafka_code(code::E::InvalidTxnState.code()));
        }
        Ok(())
    }
}

/// One InitProducerId for `role` on `conn`, a connection to its coordinator.
fn init_producer_id_on(
    conn: &mut Conn,
    role: &Role,
    timeout_ms: i32,
    deadline: Instant,
) -> Result<FencingToken, Attempt> {
    let Some(version) = conn.version_at_most::<InitProducerIdRequest>(MAX_INIT_PRODUCER_ID) else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} does not support transactional InitProducerId",
            conn.addr()
        ))));
    };
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
            role.as_str().to_owned(),
        ))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let resp = conn.call(&req, version, deadline)?;
    match code::error(resp.error_code) {
        None => Ok(FencingToken::new(resp.producer_id.0, resp.producer_epoch)),
        // The coordinator is aborting the previous holder's open transaction (with a fencing
        // bump) or completing a transition: ask again.
        Some(code::E::ConcurrentTransactions) => Err(Attempt::from_code(
            resp.error_code,
            format!(
                "{}: the coordinator is ending the previous holder's transaction \
                 (CONCURRENT_TRANSACTIONS)",
                conn.addr()
            ),
        )),
        Some(code::E::InvalidTransactionTimeout) => Err(Attempt::Stop(
            TransportError::config(format!(
                "the transaction timeout of role '{role}' ({timeout_ms} ms, the lease duration) \
                 exceeds the brokers' transaction.max.timeout.ms (MAX); use a shorter lease or \
                 raise transaction.max.timeout.ms on the brokers (INVALID_TRANSACTION_TIMEOUT)"
            ))
            .with_kafka_code(code::E::InvalidTransactionTimeout.code()),
        )),
        Some(code::E::TransactionalIdAuthorizationFailed) => {
            Err(Attempt::Stop(TransportError::unauthorized(format!(
                "InitProducerId for role '{role}': the principal needs the WRITE ACL on \
                 TransactionalId '{role}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
            ))))
        }
        Some(code::E::ClusterAuthorizationFailed) => {
            Err(Attempt::Stop(TransportError::unauthorized(format!(
                "InitProducerId for role '{role}': the principal needs the IDEMPOTENT_WRITE ACL \
                 on the Cluster (CLUSTER_AUTHORIZATION_FAILED)"
            ))))
        }
        Some(e) => {
            let other = e.code();
            Err(Attempt::from_code(
                other,
                format!(
                    "InitProducerId for role '{role}' at {} failed with error {other} ({})",
                    conn.addr(),
                    code::name(other)
                ),
            ))
        }
    }
}

/// Maps a per-request error code on a transactional call of `role` (pair `token`) to an
/// attempt (by the table in [`classify`](super::classify), with the ACL to grant for an
/// authorization error).
pub(crate) fn txn_error(
    role: &Role,
    token: FencingToken,
    what: &str,
    addr: &str,
    error: i16,
) -> Attempt {
    let why = match code::error(error) {
        Some(
            code::E::ProducerFenced
            | code::E::InvalidProducerEpoch
            | code::E::InvalidProducerIdMapping,
        ) => {
            format!(
                "{what} of role '{role}' with pair {token} was fenced: a newer leader holds the \
                 role ({})",
                code::name(error)
            )
        }
        Some(code::E::TransactionalIdAuthorizationFailed) => format!(
            "{what} of role '{role}': the principal needs the WRITE ACL on TransactionalId \
             '{role}' (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)"
        ),
        Some(code::E::TopicAuthorizationFailed) => format!(
            "{what} of role '{role}': the principal needs the WRITE ACL on the topic \
             (TOPIC_AUTHORIZATION_FAILED)"
        ),
        Some(code::E::ClusterAuthorizationFailed) => format!(
            "{what} of role '{role}': the principal needs the IDEMPOTENT_WRITE ACL on the \
             Cluster (CLUSTER_AUTHORIZATION_FAILED)"
        ),
        _ => format!(
            "{what} of role '{role}' at {addr}: error {error} ({})",
            code::name(error)
        ),
    };
    Attempt::from_code(error, why)
}

/// One AddPartitionsToTxn of `topics` for `role` (pair `token`) on `conn`, a connection to
/// its coordinator.
fn add_partitions_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    topics: Vec<AddPartitionsToTxnTopic>,
    deadline: Instant,
) -> Result<(), Attempt> {
    let Some(version) = conn.version_at_most::<AddPartitionsToTxnRequest>(MAX_ADD_PARTITIONS)
    else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} supports no AddPartitionsToTxn version up to v{MAX_ADD_PARTITIONS}",
            conn.addr()
        ))));
    };
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_string(
            role.as_str().to_owned(),
        )))
        .with_v3_and_below_producer_id(ProducerId(token.producer_id))
        .with_v3_and_below_producer_epoch(token.producer_epoch)
        .with_v3_and_below_topics(topics);
    let resp = conn.call(&req, version, deadline)?;
    let addr = conn.addr().to_owned();
    // Every partition answers the same code, or OPERATION_NOT_ATTEMPTED (55) beside the one
    // that failed.
    let worst = resp
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(move |p| (t.name.0.as_str(), p.partition_error_code))
        })
        .find(|(_, c)| *c != code::NONE && *c != code::E::OperationNotAttempted.code());
    match worst {
        None => Ok(()),
        Some((topic, c)) if code::error(c) == Some(code::E::TopicAuthorizationFailed) => {
            Err(Attempt::Stop(topic_unauthorized(
                "AddPartitionsToTxn",
                role,
                "WRITE",
                topic,
            )))
        }
        Some((_, err)) => Err(txn_error(role, token, "AddPartitionsToTxn", &addr, err)),
    }
}

/// A transactional Produce of one encoded batch, as sent (and sent again) to the partition's
/// leader.
struct TxnProduce {
    role: Role,
    token: FencingToken,
    topic: String,
    partition: i32,
    base_sequence: i32,
    timeout_ms: i32,
    encoded: Bytes,
    /// What it is, for errors.
    what: String,
}

impl TxnProduce {
    /// Sends it on `conn`, a connection to the partition's leader; returns the base offset.
    fn on(self, conn: &mut Conn, deadline: Instant) -> Result<i64, Attempt> {
        let TxnProduce {
            role,
            token,
            topic,
            partition,
            base_sequence,
            timeout_ms,
            encoded,
            what,
        } = self;
        let version = produce_version(conn)?;
        let req = produce_request(Some(role.as_str()), &topic, partition, timeout_ms, encoded);
        let resp = conn.call(&req, version, deadline)?;
        let addr = conn.addr().to_owned();
        let Some(p) = partition_answer(&resp, partition) else {
            return Err(Attempt::again(format!(
                "the Produce answer from {addr} did not mention {topic}/{partition}"
            )));
        };
        match code::error(p.error_code) {
            // A duplicate: an earlier send of this very batch was written.
            None | Some(code::E::DuplicateSequenceNumber) => Ok(p.base_offset),
            Some(code::E::OutOfOrderSequenceNumber) => {
                Err(Attempt::Stop(TransportError::retriable(format!(
                    "{what}: the broker expected another sequence than {base_sequence} \
                     (OUT_OF_ORDER_SEQUENCE_NUMBER); the transaction is aborted and the \
                     sequence learned again"
                ))))
            }
            Some(code::E::TopicAuthorizationFailed) => Err(Attempt::Stop(topic_unauthorized(
                "Produce", &role, "WRITE", &topic,
            ))),
            Some(code::E::InvalidRecord) => Err(Attempt::Stop(
                TransportError::config(format!(
                    "{what}: {addr} refused the records (INVALID_RECORD: {}); a compacted topic \
                     takes only records with a key",
                    p.error_message
                        .as_ref()
                        .map_or("no reason given", |m| m.as_str())
                ))
                .with_kafka_code(code::E::InvalidRecord.code()),
            )),
            Some(e) => {
                let err = e.code();
                Err(txn_error(&role, token, "Produce", &addr, err))
            }
        }
    }
}

/// One DescribeProducers of `topic`/`partition` on `conn`, a connection to its leader: the
/// last sequence the partition has of pair `token`, if any.
fn last_sequence_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    topic: &str,
    partition: i32,
    what: &str,
    deadline: Instant,
) -> Result<Option<i32>, Attempt> {
    if conn.version::<DescribeProducersRequest>().is_none() {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} does not support DescribeProducers (Kafka 2.8 or newer)",
            conn.addr()
        ))));
    }
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
        .with_partition_indexes(vec![partition])]);
    let resp = conn.call(&req, 0, deadline)?;
    let Some(p) = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
    else {
        return Err(Attempt::again(format!(
            "{what}: no answer for the partition"
        )));
    };
    if p.error_code == code::E::TopicAuthorizationFailed.code() {
        return Err(Attempt::Stop(topic_unauthorized(
            "DescribeProducers (learning the partition's sequence after a produce that failed \
             or lost its answer)",
            role,
            "READ",
            topic,
        )));
    }
    if p.error_code != code::NONE {
        return Err(Attempt::from_code(
            p.error_code,
            format!(
                "{what}: error {} ({})",
                p.error_code,
                code::name(p.error_code)
            ),
        ));
    }
    Ok(p.active_producers
        .iter()
        .find(|a| {
            a.producer_id.0 == token.producer_id
                && a.producer_epoch == i32::from(token.producer_epoch)
        })
        .map(|a| a.last_sequence))
}

/// One EndTxn (`commit` or abort) for `role` (pair `token`) on `conn`, a connection to its
/// coordinator: `true` once ended as asked, `false` when nothing is open at the coordinator.
fn end_txn_on(
    conn: &mut Conn,
    role: &Role,
    token: FencingToken,
    commit: bool,
    deadline: Instant,
) -> Result<bool, Attempt> {
    let verb = if commit { "commit" } else { "abort" };
    let Some(version) = conn.version_at_most::<EndTxnRequest>(MAX_END_TXN) else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {} supports no EndTxn version up to v{MAX_END_TXN}",
            conn.addr()
        ))));
    };
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(
            role.as_str().to_owned(),
        )))
        .with_producer_id(ProducerId(token.producer_id))
        .with_producer_epoch(token.producer_epoch)
        .with_committed(commit);
    let resp = conn.call(&req, version, deadline)?;
    let addr = conn.addr().to_owned();
    match code::error(resp.error_code) {
        None => Ok(true),
        Some(code::E::InvalidTxnState) => Ok(false),
        Some(e) => {
            let err = e.code();
            Err(txn_error(
                role,
                token,
                &format!("EndTxn ({verb})"),
                &addr,
                err,
            ))
        }
    }
}

/// One record batch (magic v2, uncompressed) of `records` (key, value) by `producer` from
/// `base_sequence`, transactional or not.
pub(crate) fn encode_batch(
    producer: FencingToken,
    transactional: bool,
    base_sequence: i32,
    records: impl Iterator<Item = (Option<Bytes>, Option<Bytes>)>,
) -> Result<Bytes, TransportError> {
    encode_batch_with_headers(
        producer,
        transactional,
        base_sequence,
        records.map(|(k, v)| (k, v, Headers::default())),
    )
}

/// A record's headers as the batch encoder takes them.
type Headers = kafka_protocol::indexmap::IndexMap<StrBytes, Option<Bytes>>;

/// The headers of `r`; a name given twice is refused (the encoder keeps one value per name).
fn headers_of(r: &GuardedRecord<'_>) -> Result<Headers, TransportError> {
    let mut headers = Headers::with_capacity(r.headers.len());
    for (name, value) in r.headers {
        let value = value.map(Bytes::copy_from_slice);
        if headers
            .insert(StrBytes::from_string((*name).to_owned()), value)
            .is_some()
        {
            return Err(TransportError::config(format!(
                "header '{name}' is given twice in a record to {}/{}; give each name once",
                r.topic, r.partition
            )));
        }
    }
    Ok(headers)
}

/// [`encode_batch`] of records with headers.
pub(crate) fn encode_batch_with_headers(
    producer: FencingToken,
    transactional: bool,
    base_sequence: i32,
    records: impl Iterator<Item = (Option<Bytes>, Option<Bytes>, Headers)>,
) -> Result<Bytes, TransportError> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let batch: Vec<Record> = records
        .enumerate()
        .map(|(i, (key, value, headers))| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: base_sequence.wrapping_add(i as i32),
            timestamp: now_ms,
            key,
            value,
            headers,
        })
        .collect();
    let mut encoded = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut encoded,
        batch.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| TransportError::fatal(format!("encoding a record batch: {e}")))?;
    Ok(encoded.freeze())
}

/// The Produce version to send on `conn` (the highest both sides support, at most
/// `MAX_PRODUCE`, below transaction version 2).
pub(crate) fn produce_version(conn: &Conn) -> Result<i16, Attempt> {
    conn.version_at_most::<ProduceRequest>(MAX_PRODUCE)
        .ok_or_else(|| {
            Attempt::Stop(TransportError::config(format!(
                "the broker at {} supports no Produce version up to v{MAX_PRODUCE}",
                conn.addr()
            )))
        })
}

/// A Produce (`acks=all`) of one batch to `topic`/`partition`.
pub(crate) fn produce_request(
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    timeout_ms: i32,
    batch: Bytes,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))),
        )
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// The answer of a Produce for `partition`, if the broker gave one.
pub(crate) fn partition_answer(
    resp: &ProduceResponse,
    partition: i32,
) -> Option<&PartitionProduceResponse> {
    resp.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .find(|p| p.index == partition)
}

/// TOPIC_AUTHORIZATION_FAILED on `topic` in `request` for `role`: the ACL the principal lacks.
fn topic_unauthorized(request: &str, role: &Role, operation: &str, topic: &str) -> TransportError {
    TransportError::unauthorized(format!(
        "{request} for role '{role}': the principal needs the {operation} ACL on Topic '{topic}' \
         (TOPIC_AUTHORIZATION_FAILED)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(role: &str, token: FencingToken) -> Arc<Held> {
        let role = Role::new(role).expect("role");
        Arc::new(Held {
            role: role.clone(),
            token,
            fenced: AtomicBool::new(false),
            session: AsyncMutex::new(Session {
                role,
                token,
                sequences: HashMap::new(),
                unfinished: Unfinished::default(),
            }),
        })
    }

    #[test]
    fn the_registry_finds_a_session_by_its_current_pair_only() {
        let mut r = Registry::default();
        let (first, second) = (FencingToken::new(7, 0), FencingToken::new(7, 1));
        r.insert(held("jobs", first));
        r.insert(held("other", FencingToken::new(9, 0)));
        assert_eq!(r.by_token[&first].role.as_str(), "jobs");
        // A new term of the same role replaces the old pair.
        r.insert(held("jobs", second));
        assert!(!r.by_token.contains_key(&first));
        assert_eq!(r.by_token[&second].role.as_str(), "jobs");
        assert_eq!((r.by_role.len(), r.by_token.len()), (2, 2));
        let gone = r.remove(&Role::new("jobs").expect("role")).expect("held");
        assert_eq!(gone.token, second);
        assert!(!r.by_token.contains_key(&second));
        assert_eq!((r.by_role.len(), r.by_token.len()), (1, 1));
        assert!(r.remove(&Role::new("jobs").expect("role")).is_none());
    }
}
