//! The idempotent producer that appends registration records, natively, on the shared
//! connections of [`Cluster`]. A candidate holds no epoch, and every send of a transactional
//! producer is part of a transaction, so registrations need a producer of their own; it needs
//! no thread and no socket of its own either (see [`Appender`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_coordination_core::token::FencingToken;

use super::api::init_producer_id::InitProducerId;
use super::api::produce::{IdempotentProduce, Produced};
use super::cluster::Cluster;
use super::config::KafkaConfig;
use super::task_runtime::AsyncMutex;
use super::txn::encode_batch;
use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::{Append, AppendDone};

/// The most records one Produce of registrations carries.
pub(crate) const MAX_BATCH_RECORDS: usize = 500;
/// The most record bytes (keys and values) one Produce carries, well below the brokers'
/// default `message.max.bytes` (1 MiB).
const MAX_BATCH_BYTES: usize = 256 * 1024;
/// How many producer ids one batch may go through (after sequence errors) before it fails.
const PRODUCER_GENERATIONS: usize = 3;

/// The producer id and epoch the broker granted, and which grant it was (so that a caller
/// retires only the grant it saw fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Grant {
    producer: FencingToken,
    generation: u64,
}

/// One queued append: its record, by when it must be written, and who hears how it went.
struct Pending {
    key: Bytes,
    value: Option<Bytes>,
    deadline: Instant,
    done: AppendDone,
}

/// The appends of one partition.
#[derive(Default)]
struct Lane {
    state: Mutex<LaneState>,
}

#[derive(Default)]
struct LaneState {
    /// Appends not sent yet, in arrival order.
    queue: VecDeque<Pending>,
    /// Whether a caller is sending this partition's batches.
    sending: bool,
    /// The grant the next sequence belongs to, and that sequence.
    sequence: Option<(Grant, i32)>,
}

/// If a lane's sender ends without emptying the queue (it unwound, or its task was dropped):
/// clears the lane's `sending` mark, so that the next append sends, and drops the appends
/// queued behind it, so that none waits for an answer that would never come (a blocking
/// caller's channel closes; a host fails a dropped call).
struct Sending<'a> {
    lane: &'a Lane,
    /// The queue was emptied and the mark cleared: nothing to undo.
    finished: bool,
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut state = lock(&self.lane.state);
            state.sending = false;
            let queued = std::mem::take(&mut state.queue);
            drop(state);
            drop(queued);
        }
    }
}

/// What a lane's sender sends next: a batch (up to [`MAX_BATCH_RECORDS`] records and
/// [`MAX_BATCH_BYTES`]), the appends whose deadline passed, and the partition's next sequence.
struct Round {
    batch: Vec<Pending>,
    expired: Vec<Pending>,
    sequence: Option<(Grant, i32)>,
}

/// The next [`Round`] of `lane`'s queue; `None`, with the lane marked as having no sender,
/// when its queue is empty.
fn take_batch(lane: &Lane) -> Option<Round> {
    let mut state = lock(&lane.state);
    let now = Instant::now();
    let mut expired: Vec<Pending> = Vec::new();
    let mut batch: Vec<Pending> = Vec::new();
    let mut bytes = 0;
    while let Some(p) = state.queue.front() {
        if p.deadline <= now {
            expired.extend(state.queue.pop_front());
            continue;
        }
        let size = p.key.len() + p.value.as_ref().map_or(0, Bytes::len);
        if !batch.is_empty() && (batch.len() >= MAX_BATCH_RECORDS || bytes + size > MAX_BATCH_BYTES)
        {
            break;
        }
        bytes += size;
        batch.extend(state.queue.pop_front());
    }
    if batch.is_empty() && expired.is_empty() {
        state.sending = false;
        return None;
    }
    Some(Round {
        batch,
        expired,
        sequence: state.sequence,
    })
}

/// The registration producer of one client.
///
/// * **One producer id per client**, from an InitProducerId without a transactional id, asked
///   for at the first append and again after any answer the sequences cannot account for.
/// * **One batch in flight per partition.** Appends to one partition queue up; the caller that
///   finds nobody sending starts the sender, which sends every record queued (up to
///   [`MAX_BATCH_RECORDS`] per Produce, with the partition's next base sequence) until the
///   queue is empty, and hands each append its offset.
/// * **An append holds no thread.** [`Appender::append_all`] queues all its appends before
///   anything is sent, starts a sender task for each partition that had none, and returns;
///   the appends queued behind a batch in flight are that batch's sender's to send, and it
///   calls their completions. The sender's requests go to the connection threads (see
///   `task_runtime.rs`). The blocking [`Appender::append`] sends on its own thread when it finds
///   nobody sending, and waits for its own answer. A host hands its candidacies'
///   registrations over this way, so a host that registers thousands of roles at once holds
///   no thread for them and sends a few Produce requests per partition, not one per role.
/// * **A lost answer is resolved, never guessed.** The batch goes again with the same sequence
///   (to the partition's leader, looked up again): the broker answers a duplicate of its last
///   batches with the offset it wrote it at. A batch whose outcome stays unknown at its deadline
///   retires the producer id, so that no later batch can be taken for a duplicate of it; its
///   callers get a retriable error, and a registration appended twice only moves the member to
///   the later offset.
/// * **Requests are bounded** by the client's request timeout, and a broker that stops
///   answering is left alone like any other (see `net/pool.rs`), so a frozen broker does not hold a
///   caller's thread for longer than the operation timeout.
pub(crate) struct Appender {
    cluster: Arc<Cluster>,
    topic: String,
    /// The state topic's partition count, as configured.
    partitions: i32,
    operation_timeout: Duration,
    request_timeout: Duration,
    /// Held across the InitProducerId that asks for a grant: every partition's sender waits
    /// (as a task) for the same answer.
    grant: AsyncMutex<(Option<Grant>, u64)>,
    lanes: Mutex<HashMap<i32, Arc<Lane>>>,
}

impl Appender {
    pub(crate) fn new(cluster: Arc<Cluster>, config: &KafkaConfig) -> Appender {
        Appender {
            cluster,
            topic: config.topic().to_owned(),
            partitions: config.partitions(),
            request_timeout: config.request_timeout(),
            operation_timeout: config.operation_timeout(),
            grant: AsyncMutex::new((None, 0)),
            lanes: Mutex::new(HashMap::new()),
        }
    }

    /// Queues every append, then starts a sender (a task: it holds no thread) for each
    /// partition that had nobody sending, which sends its batches until its queue is empty. An
    /// append queued behind a batch in flight is left to that batch's sender, which calls its
    /// `done`. Returns at once.
    pub(crate) fn append_all(self: &Arc<Self>, appends: Vec<Append>) {
        for (partition, lane) in self.queue(appends) {
            let appender = Arc::clone(self);
            super::task_runtime::spawn(async move { appender.send_rounds(partition, &lane).await });
        }
    }

    /// Queues every append; returns the lanes that had nobody sending, which the caller now
    /// sends.
    fn queue(&self, appends: Vec<Append>) -> Vec<(i32, Arc<Lane>)> {
        let deadline = Instant::now() + self.operation_timeout;
        let mut to_send: Vec<(i32, Arc<Lane>)> = Vec::new();
        let mut lanes = lock(&self.lanes);
        for a in appends {
            let lane = lanes.entry(a.partition).or_default();
            let mut state = lock(&lane.state);
            state.queue.push_back(Pending {
                key: Bytes::from(a.key),
                value: a.value.map(Bytes::from),
                deadline,
                done: a.done,
            });
            if !state.sending {
                state.sending = true;
                to_send.push((a.partition, Arc::clone(lane)));
            }
        }
        drop(lanes);
        to_send
    }

    /// Sends the partition's queued appends, one batch at a time (those whose deadline has
    /// passed are answered with an error instead), and answers them, until the queue is empty.
    /// The answers are given outside the lane's lock: an answer may queue the next append.
    async fn send_rounds(&self, partition: i32, lane: &Lane) {
        let mut sending = Sending {
            lane,
            finished: false,
        };
        loop {
            let Some(Round {
                batch,
                expired,
                sequence,
            }) = take_batch(lane)
            else {
                sending.finished = true;
                return;
            };
            for p in expired {
                (p.done)(Err(TransportError::retriable(format!(
                    "appending a record to {}/{partition}: the partition's earlier appends took \
                     the whole operation timeout ({:?})",
                    self.topic, self.operation_timeout
                ))));
            }
            let Some(deadline) = batch.iter().map(|p| p.deadline).min() else {
                continue;
            };
            let records: Vec<(Bytes, Option<Bytes>)> = batch
                .iter()
                .map(|p| (p.key.clone(), p.value.clone()))
                .collect();
            let (result, next) = self
                .send_batch(partition, &records, sequence, deadline)
                .await;
            lock(&lane.state).sequence = next;
            // An unknown partition may mean a topic deleted or recreated with another count:
            // asked once for the whole batch.
            let result = match result {
                Ok(base) => Ok(base),
                Err(e) => {
                    let deadline = Instant::now() + self.request_timeout;
                    Err(self
                        .cluster
                        .confirm(e, &self.topic, partition, Some(self.partitions), deadline)
                        .await)
                }
            };
            for (n, p) in batch.into_iter().enumerate() {
                (p.done)(match &result {
                    // A bogus offset from the broker must not overflow.
                    Ok(base) => Ok(base.saturating_add(n as i64)),
                    Err(e) => Err(e.clone()),
                });
            }
        }
    }

    /// Sends one batch, through as many grants as sequence errors call for; returns the base
    /// offset and the partition's next sequence.
    async fn send_batch(
        &self,
        partition: i32,
        records: &[(Bytes, Option<Bytes>)],
        mut sequence: Option<(Grant, i32)>,
        deadline: Instant,
    ) -> (Result<i64, TransportError>, Option<(Grant, i32)>) {
        let count = records.len() as i32;
        let mut why = String::new();
        for _ in 0..PRODUCER_GENERATIONS {
            let grant = match self.grant(partition, deadline).await {
                Ok(g) => g,
                Err(e) => return (Err(e), sequence),
            };
            let base_sequence = match sequence {
                Some((g, s)) if g == grant => s,
                _ => 0,
            };
            match self
                .produce(partition, records, grant, base_sequence, deadline)
                .await
            {
                Ok(Produced::Written(base)) => {
                    return (Ok(base), Some((grant, base_sequence.wrapping_add(count))))
                }
                Ok(Produced::Resequence(reason)) => {
                    self.retire(grant).await;
                    sequence = None;
                    why = reason;
                }
                Err(e) => {
                    // The batch may or may not have been written: no later batch may reuse
                    // its sequence under this grant.
                    self.retire(grant).await;
                    return (Err(e), None);
                }
            }
        }
        (
            Err(TransportError::retriable(format!(
                "appending to {}/{partition}: refused under {PRODUCER_GENERATIONS} producer ids \
                 in a row: {why}",
                self.topic
            ))),
            None,
        )
    }

    /// The current grant, asking for one (at the leader of `partition`) when there is none.
    async fn grant(&self, partition: i32, deadline: Instant) -> Result<Grant, TransportError> {
        let mut g = self.grant.lock().await;
        if let Some(grant) = g.0 {
            return Ok(grant);
        }
        // Asked under the lock: callers of every partition wait for the same answer.
        let cluster = &self.cluster;
        let topic = self.topic.as_str();
        let producer = cluster
            .retry_async(
                "InitProducerId for the registration producer",
                deadline,
                || async move {
                    // Any broker grants an idempotent producer id; the leader of the partition
                    // appended to is the broker the append needs anyway.
                    let owned = topic.to_owned();
                    cluster
                        .at_leader_async(topic, partition, deadline, move |conn| {
                            conn.exchange(&InitProducerId::Idempotent { topic: &owned }, deadline)
                        })
                        .await
                },
            )
            .await?;
        g.1 += 1;
        let grant = Grant {
            producer,
            generation: g.1,
        };
        g.0 = Some(grant);
        Ok(grant)
    }

    /// Drops `grant` unless a newer one replaced it already.
    async fn retire(&self, grant: Grant) {
        let mut g = self.grant.lock().await;
        if g.0 == Some(grant) {
            g.0 = None;
        }
    }

    /// One Produce of `records` under `grant` from `base_sequence`, sent again (same sequence)
    /// until a definite answer or `deadline`.
    async fn produce(
        &self,
        partition: i32,
        records: &[(Bytes, Option<Bytes>)],
        grant: Grant,
        base_sequence: i32,
        deadline: Instant,
    ) -> Result<Produced, TransportError> {
        let encoded = encode_batch(
            grant.producer,
            false,
            base_sequence,
            records.iter().map(|(k, v)| (Some(k.clone()), v.clone())),
        )?;
        let cluster = &self.cluster;
        let topic = self.topic.as_str();
        let timeout_ms = i32::try_from(self.request_timeout.as_millis()).unwrap_or(i32::MAX);
        let what = format!(
            "appending {} record(s) to {topic}/{partition}",
            records.len()
        );
        cluster
            .retry_async(&what, deadline, || {
                let (owned, encoded, what) = (topic.to_owned(), encoded.clone(), what.clone());
                async move {
                    cluster
                        .at_leader_async(topic, partition, deadline, move |conn| {
                            let produce = IdempotentProduce {
                                producer: grant.producer,
                                topic: &owned,
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
}
