//! The idempotent producer that appends registration records, natively, on the shared
//! connections of [`Cluster`]. A candidate holds no epoch, and every send of a transactional
//! producer is part of a transaction, so registrations need a producer of their own; it needs
//! no thread and no socket of its own either.
//!
//! * **One producer id per client**, from an InitProducerId without a transactional id, asked
//!   for at the first append and again after any answer the sequences cannot account for.
//! * **One batch in flight per partition.** Appends to one partition queue up; the caller that
//!   finds nobody sending becomes the sender and sends every record queued (up to
//!   [`MAX_BATCH_RECORDS`]) in one Produce, with the partition's next base sequence, and hands
//!   each waiting caller its offset. A host that registers thousands of roles at once sends a
//!   few Produce requests per partition, not one per role.
//! * **A lost answer is resolved, never guessed.** The batch goes again with the same sequence
//!   (to the partition's leader, looked up again): the broker answers a duplicate of its last
//!   batches with the offset it wrote it at. A batch whose outcome stays unknown at its deadline
//!   retires the producer id, so that no later batch can be taken for a duplicate of it; its
//!   callers get a retriable error, and a registration appended twice only moves the member to
//!   the later offset.
//! * **Requests are bounded** by the client's request timeout, and a broker that stops
//!   answering is left alone like any other (see `net.rs`), so a frozen broker does not hold a
//!   caller's thread for longer than the operation timeout.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_coordination_core::token::FencingToken;
use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};

use super::cluster::{code, Attempt, Cluster};
use super::config::KafkaConfig;
use super::context::lock;
use super::txn::{
    encode_batch, partition_answer, produce_request, produce_version, MAX_INIT_PRODUCER_ID,
};
use crate::error::TransportError;

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

/// One queued append.
struct Pending {
    key: Bytes,
    value: Option<Bytes>,
    deadline: Instant,
    outcome: Option<Result<i64, TransportError>>,
}

/// The appends of one partition.
#[derive(Default)]
struct Lane {
    state: Mutex<LaneState>,
    done: Condvar,
}

#[derive(Default)]
struct LaneState {
    /// Appends by ticket, in arrival order; an entry leaves when its caller takes its outcome.
    pending: VecDeque<(u64, Pending)>,
    next_ticket: u64,
    /// Whether a caller is sending this partition's batches.
    sending: bool,
    /// The grant the next sequence belongs to, and that sequence.
    sequence: Option<(Grant, i32)>,
}

/// What a batch came to.
enum Sent {
    /// Written: the base offset.
    Written(i64),
    /// Refused for a reason the sequences explain (a producer id the broker no longer knows, a
    /// sequence it did not expect): the batch was not written; another grant may write it.
    Resequence(String),
}

/// The registration producer of one client.
pub(crate) struct Appender {
    cluster: Arc<Cluster>,
    topic: String,
    request_timeout: Duration,
    operation_timeout: Duration,
    grant: Mutex<(Option<Grant>, u64)>,
    lanes: Mutex<HashMap<i32, Arc<Lane>>>,
}

impl Appender {
    pub(crate) fn new(cluster: Arc<Cluster>, config: &KafkaConfig) -> Appender {
        Appender {
            cluster,
            topic: config.topic().to_owned(),
            request_timeout: config.request_timeout(),
            operation_timeout: config.operation_timeout(),
            grant: Mutex::new((None, 0)),
            lanes: Mutex::new(HashMap::new()),
        }
    }

    /// Appends one record to `partition` of the state topic and returns its offset.
    pub(crate) fn append(
        &self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<i64, TransportError> {
        let lane = Arc::clone(lock(&self.lanes).entry(partition).or_default());
        let deadline = Instant::now() + self.operation_timeout;
        let mut state = lock(&lane.state);
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.pending.push_back((
            ticket,
            Pending {
                key: Bytes::copy_from_slice(key),
                value: value.map(Bytes::copy_from_slice),
                deadline,
                outcome: None,
            },
        ));
        loop {
            let done = state
                .pending
                .iter()
                .position(|(t, p)| *t == ticket && p.outcome.is_some());
            if let Some((
                _,
                Pending {
                    outcome: Some(outcome),
                    ..
                },
            )) = done.and_then(|i| state.pending.remove(i))
            {
                return outcome;
            }
            if !state.sending {
                // Nobody is sending: this caller sends the next batch (its own record is in it
                // unless a full batch is queued ahead of it), then hands over.
                state.sending = true;
                drop(state);
                self.send_round(partition, &lane);
                state = lock(&lane.state);
                state.sending = false;
                lane.done.notify_all();
                continue;
            }
            // The sender answers its batch by the batch's deadline; the wait is bounded anyway.
            state = lane
                .done
                .wait_timeout(state, self.request_timeout)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Sends one batch of the partition's queued appends (those whose deadline has passed are
    /// answered with an error instead) and answers its callers.
    fn send_round(&self, partition: i32, lane: &Lane) {
        let mut state = lock(&lane.state);
        let now = Instant::now();
        let mut batch: Vec<u64> = Vec::new();
        let mut records: Vec<(Bytes, Option<Bytes>)> = Vec::new();
        let mut bytes = 0;
        let mut deadline: Option<Instant> = None;
        for (ticket, p) in state.pending.iter_mut() {
            if p.outcome.is_some() {
                continue;
            }
            if p.deadline <= now {
                p.outcome = Some(Err(TransportError::retriable(format!(
                    "appending a record to {}/{partition}: the partition's earlier appends took \
                     the whole operation timeout ({:?})",
                    self.topic, self.operation_timeout
                ))));
                continue;
            }
            let size = p.key.len() + p.value.as_ref().map_or(0, Bytes::len);
            if !batch.is_empty()
                && (batch.len() >= MAX_BATCH_RECORDS || bytes + size > MAX_BATCH_BYTES)
            {
                break;
            }
            bytes += size;
            batch.push(*ticket);
            records.push((p.key.clone(), p.value.clone()));
            deadline = Some(deadline.map_or(p.deadline, |d| d.min(p.deadline)));
        }
        let Some(deadline) = deadline else {
            return;
        };
        let sequence = state.sequence;
        drop(state);
        let (result, next) = self.send_batch(partition, &records, sequence, deadline);
        let mut state = lock(&lane.state);
        state.sequence = next;
        for (n, ticket) in batch.iter().enumerate() {
            if let Some((_, p)) = state.pending.iter_mut().find(|(t, _)| t == ticket) {
                p.outcome = Some(match &result {
                    // A bogus offset from the broker must not overflow.
                    Ok(base) => Ok(base.saturating_add(n as i64)),
                    Err(e) => Err(e.clone()),
                });
            }
        }
    }

    /// Sends one batch, through as many grants as sequence errors call for; returns the base
    /// offset and the partition's next sequence.
    fn send_batch(
        &self,
        partition: i32,
        records: &[(Bytes, Option<Bytes>)],
        mut sequence: Option<(Grant, i32)>,
        deadline: Instant,
    ) -> (Result<i64, TransportError>, Option<(Grant, i32)>) {
        let count = records.len() as i32;
        let mut why = String::new();
        for _ in 0..PRODUCER_GENERATIONS {
            let grant = match self.grant(partition, deadline) {
                Ok(g) => g,
                Err(e) => return (Err(e), sequence),
            };
            let base_sequence = match sequence {
                Some((g, s)) if g == grant => s,
                _ => 0,
            };
            match self.produce(partition, records, grant, base_sequence, deadline) {
                Ok(Sent::Written(base)) => {
                    return (Ok(base), Some((grant, base_sequence.wrapping_add(count))))
                }
                Ok(Sent::Resequence(reason)) => {
                    self.retire(grant);
                    sequence = None;
                    why = reason;
                }
                Err(e) => {
                    // The batch may or may not have been written: no later batch may reuse
                    // its sequence under this grant.
                    self.retire(grant);
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
    fn grant(&self, partition: i32, deadline: Instant) -> Result<Grant, TransportError> {
        let mut g = lock(&self.grant);
        if let Some(grant) = g.0 {
            return Ok(grant);
        }
        // Asked under the lock: callers of every partition wait for the same answer.
        let topic = self.topic.as_str();
        let producer = self.cluster.retry(
            "InitProducerId for the registration producer",
            deadline,
            |cluster| {
                // Any broker grants an idempotent producer id; the leader of the partition
                // appended to is the broker the append needs anyway.
                cluster.at_leader(topic, partition, deadline, |conn| {
                    let Some(version) =
                        conn.version_at_most::<InitProducerIdRequest>(MAX_INIT_PRODUCER_ID)
                    else {
                        return Err(Attempt::Stop(TransportError::config(format!(
                            "the broker at {} does not support InitProducerId",
                            conn.addr()
                        ))));
                    };
                    let req = InitProducerIdRequest::default()
                        .with_transactional_id(None)
                        .with_transaction_timeout_ms(i32::MAX)
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1);
                    let resp = conn.call(&req, version, deadline)?;
                    match resp.error_code {
                        code::NONE => {
                            Ok(FencingToken::new(resp.producer_id.0, resp.producer_epoch))
                        }
                        code::CLUSTER_AUTHORIZATION_FAILED => Err(Attempt::Stop(
                            TransportError::unauthorized(format!(
                                "InitProducerId for the registration producer: the principal \
                                 needs the WRITE ACL on Topic '{topic}' (an idempotent \
                                 producer's id needs WRITE on a topic, or IDEMPOTENT_WRITE on \
                                 the Cluster before Kafka 2.8) (CLUSTER_AUTHORIZATION_FAILED)"
                            ))
                            .with_kafka_code(code::CLUSTER_AUTHORIZATION_FAILED),
                        )),
                        other => Err(Attempt::from_code(
                            other,
                            format!(
                                "InitProducerId for the registration producer at {} failed \
                                 with error {other} ({})",
                                conn.addr(),
                                code::name(other)
                            ),
                        )),
                    }
                })
            },
        )?;
        g.1 += 1;
        let grant = Grant {
            producer,
            generation: g.1,
        };
        g.0 = Some(grant);
        Ok(grant)
    }

    /// Drops `grant` unless a newer one replaced it already.
    fn retire(&self, grant: Grant) {
        let mut g = lock(&self.grant);
        if g.0 == Some(grant) {
            g.0 = None;
        }
    }

    /// One Produce of `records` under `grant` from `base_sequence`, sent again (same sequence)
    /// until a definite answer or `deadline`.
    fn produce(
        &self,
        partition: i32,
        records: &[(Bytes, Option<Bytes>)],
        grant: Grant,
        base_sequence: i32,
        deadline: Instant,
    ) -> Result<Sent, TransportError> {
        let encoded = encode_batch(
            grant.producer,
            false,
            base_sequence,
            records.iter().map(|(k, v)| (Some(k.clone()), v.clone())),
        )?;
        let topic = self.topic.as_str();
        let timeout_ms = i32::try_from(self.request_timeout.as_millis()).unwrap_or(i32::MAX);
        let what = format!(
            "appending {} record(s) to {topic}/{partition}",
            records.len()
        );
        self.cluster.retry(&what, deadline, |cluster| {
            cluster.at_leader(topic, partition, deadline, |conn| {
                let version = produce_version(conn)?;
                let req = produce_request(None, topic, partition, timeout_ms, encoded.clone());
                let resp = conn.call(&req, version, deadline)?;
                let addr = conn.addr().to_owned();
                let Some(p) = partition_answer(&resp, partition) else {
                    return Err(Attempt::again(format!(
                        "the Produce answer from {addr} did not mention {topic}/{partition}"
                    )));
                };
                let reason = || {
                    p.error_message
                        .as_ref()
                        .map_or("no reason given".to_owned(), |m| m.to_string())
                };
                match p.error_code {
                    // An earlier send of this batch was written: the broker names its offset.
                    code::NONE | code::DUPLICATE_SEQUENCE_NUMBER if p.base_offset >= 0 => {
                        Ok(Sent::Written(p.base_offset))
                    }
                    code::NONE | code::DUPLICATE_SEQUENCE_NUMBER => {
                        Err(Attempt::Stop(TransportError::retriable(format!(
                            "{what}: {addr} took the batch for one it already wrote but named no \
                             offset ({})",
                            code::name(p.error_code)
                        ))))
                    }
                    code::OUT_OF_ORDER_SEQUENCE_NUMBER
                    | code::UNKNOWN_PRODUCER_ID
                    | code::INVALID_PRODUCER_EPOCH
                    | code::PRODUCER_FENCED => Ok(Sent::Resequence(format!(
                        "{addr} refused producer {} epoch {} at sequence {base_sequence} ({})",
                        grant.producer.producer_id,
                        grant.producer.producer_epoch,
                        code::name(p.error_code)
                    ))),
                    code::TOPIC_AUTHORIZATION_FAILED => Err(Attempt::Stop(
                        TransportError::unauthorized(format!(
                            "{what}: the principal needs the WRITE ACL on Topic '{topic}' \
                             (TOPIC_AUTHORIZATION_FAILED)"
                        ))
                        .with_kafka_code(code::TOPIC_AUTHORIZATION_FAILED),
                    )),
                    c @ (code::INVALID_RECORD | code::MESSAGE_TOO_LARGE) => Err(Attempt::Stop(
                        TransportError::config(format!(
                            "{what}: {addr} refused the records ({}: {})",
                            code::name(c),
                            reason()
                        ))
                        .with_kafka_code(c),
                    )),
                    other => Err(Attempt::from_code(
                        other,
                        format!(
                            "{what} at {addr}: error {other} ({}): {}",
                            code::name(other),
                            reason()
                        ),
                    )),
                }
            })
        })
    }
}
