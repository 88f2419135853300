//! Native transactional sessions: one per role held by this process, on the shared
//! connections of [`Cluster`]. No librdkafka producer, no statistics, no thread per session.
//! A write is one transaction; an outcome left unknown is resolved before the next write,
//! never guessed (see [`Sessions`]).

mod produce;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;

use super::api::add_partitions_to_txn::AddPartitionsToTxn;
use super::api::describe_producers::DescribeProducers;
use super::api::end_txn::EndTxn;
use super::api::init_producer_id::InitProducerId;
use super::api::produce::{refused_for_good, TxnProduce};
use super::classify::code;
use super::cluster::Cluster;
use super::config::KafkaConfig;
use super::offsets::{Groups, OwnedGroupOffsets};
use super::task_runtime::AsyncMutex;
use kafka_coordination_transport::error::{ErrorKind, TransportError};
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::{GroupOffsets, GuardedRecord};

pub(crate) use produce::encode_batch;
use produce::{encode_batch_with_headers, headers_of};

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
    /// Partitions whose last produce did not succeed, and what is known of it.
    sequences: BTreeMap<TopicPartition, InDoubt>,
}

/// A partition's last produce, which did not succeed.
#[derive(Clone, Debug)]
enum InDoubt {
    /// It got no definite answer: it may still be appended, even after its write gave up (it
    /// can wait in the queue of a broker that is recovering). It is sent again, the same bytes
    /// with the same sequence, before anything else is produced to the partition.
    Unanswered(Batch),
    /// The broker refused it for good (its sequence, or its records): the partition's next
    /// sequence is learned from its leader (DescribeProducers).
    Refused,
}

/// An encoded transactional batch, as sent.
#[derive(Clone, Debug)]
struct Batch {
    base_sequence: i32,
    count: i32,
    encoded: bytes::Bytes,
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
///
/// * **Acquire** is InitProducerId for `transactional.id = role` with the lease duration as the
///   transaction timeout; the granted pair comes from the response. Nothing else in this
///   process ever sends InitProducerId for the role, so its epoch moves only when the library
///   asks (a challenge, a resign's supersede) or another member does.
/// * **A write** is one transaction: AddPartitionsToTxn for the partitions it touches,
///   Produce of one transactional record batch per partition (the pair, and a base sequence
///   per partition that starts at 0 for the pair and grows by the record count), then
///   EndTxn(commit).
/// * **Offsets**: a write may also commit a consumer group's offsets in its transaction
///   (AddOffsetsToTxn and TxnOffsetCommit before EndTxn, see `offsets.rs`).
/// * **Versions** are pinned below transaction version 2 (KIP-890 part 2): EndTxn <= v3,
///   AddPartitionsToTxn <= v3, Produce <= v9, InitProducerId <= v4. With them the coordinator
///   never bumps the epoch at a commit, so a term's pair stays constant across renewals.
/// * **Unknown outcomes are resolved, never guessed.** A produce whose answer was lost is sent
///   again with the same sequence (the broker de-duplicates). A commit whose answer was lost
///   is sent again (the coordinator answers NONE once the transaction is `CompleteCommit`, and
///   CONCURRENT_TRANSACTIONS while it is `PrepareCommit`); it is never turned into an abort,
///   which the coordinator refuses for a committed transaction. When a deadline passes with an
///   outcome still unknown, the session remembers it and resolves it before its next write.
/// * **A produce left without an answer is settled by sending it again.** When a write gives
///   up, its batch may still be appended later (a broker that is recovering answers its queue
///   late). Before the session produces anything else, it opens a transaction of its own for
///   such batches, sends each again with its sequence, and aborts it: the broker appends the
///   batch or answers that it has it, and either way the batch ends aborted and the next
///   sequence is known. Learning the sequence from the partition instead (DescribeProducers)
///   would race the late batch: the next write would reuse its sequence, and the broker would
///   answer that write as a duplicate, with the late batch's offset.
/// * **Fencing**: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and INVALID_PRODUCER_ID_MAPPING
///   anywhere end the session ([`ErrorKind::Fenced`](kafka_coordination_transport::error::ErrorKind::Fenced)).
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

    /// Drops the session of `role` (the term is over for this process) and returns at once.
    /// An open transaction that was not committing is aborted, best effort, so that it does
    /// not hold back readers until its timeout: by a task on the client's executor (see
    /// [`spawn`](super::task_runtime::spawn)), which waits for a write still in flight to let go
    /// of the session, never on the caller's thread (an async runtime's, or a host's loop).
    pub(crate) fn release(self: &Arc<Self>, role: &Role) {
        let Some(held) = lock(&self.roles).remove(role) else {
            return;
        };
        let sessions = Arc::clone(self);
        super::task_runtime::spawn(async move {
            let mut s = held.session.lock().await;
            if s.unfinished.open && !s.unfinished.committing && !held.fenced.load(Ordering::Acquire)
            {
                let deadline =
                    Instant::now() + sessions.request_timeout.min(Duration::from_secs(2));
                let _ = sessions.end_txn(&mut s, false, deadline).await;
            }
        });
    }

    /// InitProducerId for `role`: fences every earlier holder of the role and returns the new
    /// pair, which this process's session for the role now holds; holds no thread while it
    /// waits.
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
                            conn.exchange(
                                &InitProducerId::Role {
                                    role: &role,
                                    timeout_ms,
                                },
                                deadline,
                            )
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
    /// unless run with [`block_on`](super::task_runtime::block_on).
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
            } else if e.kind() == ErrorKind::Unauthorized
                && s.unfinished.open
                && !s.unfinished.committing
            {
                // A refusal is definite: the transaction it left open is aborted now, not by
                // the next write. Left open, it would hold back the partitions it touched and,
                // if the next write came later than its timeout (the lease), the coordinator's
                // abort would bump the epoch and end the term.
                let by = Instant::now() + self.request_timeout.min(Duration::from_secs(2));
                if self.end_txn(&mut s, false, by).await.is_ok() {
                    s.unfinished.open = false;
                }
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
        self.settle_unanswered(s, deadline).await?;
        let partitions: BTreeSet<TopicPartition> = records
            .iter()
            .map(|r| (r.topic.to_owned(), r.partition))
            .collect();
        for tp in &partitions {
            if matches!(s.unfinished.sequences.get(tp), Some(InDoubt::Refused)) {
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

    /// Sends every batch left without an answer again, in a transaction that is then aborted
    /// (see [`Sessions`]). A batch answered at last gives its partition's next sequence; one the
    /// broker refuses now leaves the sequence to be learned.
    async fn settle_unanswered(
        &self,
        s: &mut Session,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let unanswered: Vec<(TopicPartition, Batch)> = s
            .unfinished
            .sequences
            .iter()
            .filter_map(|(tp, d)| match d {
                InDoubt::Unanswered(batch) => Some((tp.clone(), batch.clone())),
                InDoubt::Refused => None,
            })
            .collect();
        if unanswered.is_empty() {
            return Ok(());
        }
        let partitions: BTreeSet<TopicPartition> =
            unanswered.iter().map(|(tp, _)| tp.clone()).collect();
        s.unfinished.open = true;
        if let Err(e) = self.add_partitions(s, &partitions, deadline).await {
            if e.is_fenced() || !refused_for_good(&e) {
                return Err(e);
            }
            // Refused for good (the topic is gone, or writing to it is no longer allowed): a
            // late batch would be refused alike, and this write may be to other partitions.
            for (tp, _) in unanswered {
                s.unfinished.sequences.insert(tp, InDoubt::Refused);
            }
            return self.end_txn(s, false, deadline).await;
        }
        for (tp, batch) in unanswered {
            match self.send_batch(s, &tp, &batch, deadline).await {
                Ok(_) => {
                    s.unfinished.sequences.remove(&tp);
                    s.sequences
                        .insert(tp, batch.base_sequence.wrapping_add(batch.count));
                }
                Err(e) if e.is_fenced() || !refused_for_good(&e) => return Err(e),
                Err(_) => {
                    s.unfinished.sequences.insert(tp, InDoubt::Refused);
                }
            }
        }
        self.end_txn(s, false, deadline).await
    }

    async fn add_partitions(
        &self,
        s: &Session,
        partitions: &BTreeSet<TopicPartition>,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let what = format!("AddPartitionsToTxn for role '{}'", s.role);
        let cluster = &self.cluster;
        let (role, token) = (&s.role, s.token);
        cluster
            .retry_async(&what, deadline, || {
                let (role, partitions) = (role.clone(), partitions.clone());
                async move {
                    let id = role.as_str().to_owned();
                    cluster
                        .at_coordinator_async(&id, deadline, move |conn| {
                            let add = AddPartitionsToTxn {
                                role: &role,
                                token,
                                partitions: &partitions,
                            };
                            conn.exchange(&add, deadline)
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
                            conn.exchange(
                                &crate::api::add_offsets_to_txn::AddOffsetsToTxn {
                                    role: &role,
                                    token,
                                    group: &group,
                                },
                                deadline,
                            )
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
        let batch = Batch {
            base_sequence,
            count,
            encoded,
        };
        // From the first send on, the outcome is unknown until a definite answer arrives.
        s.unfinished
            .sequences
            .insert(tp.clone(), InDoubt::Unanswered(batch.clone()));
        match self.send_batch(s, tp, &batch, deadline).await {
            Ok(base) => {
                s.unfinished.sequences.remove(tp);
                s.sequences
                    .insert(tp.clone(), base_sequence.wrapping_add(count));
                Ok(base)
            }
            Err(e) => {
                // A refusal is definite (an earlier send of the same batch, if it is still on
                // its way, is refused alike); anything else may still be appended.
                if refused_for_good(&e) {
                    s.unfinished.sequences.insert(tp.clone(), InDoubt::Refused);
                }
                Err(e)
            }
        }
    }

    /// Sends `batch` to the leader of `tp` until a definite answer or `deadline`; returns its
    /// base offset (where the broker wrote it, also when it answers that it has it already).
    async fn send_batch(
        &self,
        s: &Session,
        tp: &TopicPartition,
        batch: &Batch,
        deadline: Instant,
    ) -> Result<i64, TransportError> {
        let timeout_ms = i32::try_from(self.request_timeout.as_millis()).unwrap_or(i32::MAX);
        let cluster = &self.cluster;
        let (role, token) = (&s.role, s.token);
        let what = format!("Produce to {}/{} for role '{role}'", tp.0, tp.1);
        cluster
            .retry_async(&what, deadline, || {
                let (role, topic) = (role.clone(), tp.0.clone());
                let (encoded, what) = (batch.encoded.clone(), what.clone());
                let (partition, base_sequence) = (tp.1, batch.base_sequence);
                async move {
                    cluster
                        .at_leader_async(&tp.0, partition, deadline, move |conn| {
                            let produce = TxnProduce {
                                role: &role,
                                token,
                                topic: &topic,
                                partition,
                                base_sequence,
                                timeout_ms,
                                batch: &encoded,
                                what: &what,
                            };
                            conn.exchange(&produce, deadline)
                        })
                        .await
                }
            })
            .await
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
                            let describe = DescribeProducers {
                                role: &role,
                                token,
                                topic: &topic,
                                partition,
                                what: &what,
                            };
                            conn.exchange(&describe, deadline)
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
                            let end = EndTxn {
                                role: &role,
                                token,
                                commit,
                            };
                            conn.exchange(&end, deadline)
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
