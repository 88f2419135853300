//! The role's transactional producer: it mints the epoch (InitProducerId) and every lease or
//! guarded write goes through it, so the broker fences the writes of a superseded pair.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_coordination_core::record::Role;
use kafka_coordination_core::token::FencingToken;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use super::classify::{self, is_fencing};
use super::config::{millis, KafkaConfig};
use super::context::{lock, DeliverySlot, EosSnapshot, ProducerCtx};
use crate::error::{ErrorKind, TransportError};

/// librdkafka's smallest `transaction.timeout.ms`.
pub(crate) const MIN_TRANSACTION_TIMEOUT: Duration = Duration::from_millis(1000);

/// How often librdkafka reports statistics, which carry the producer's (id, epoch).
const STATS_INTERVAL_MS: &str = "100";

/// How long to wait for a statistics report that shows the pair.
const STATS_WAIT: Duration = Duration::from_secs(5);

/// One record of a guarded write.
#[derive(Clone, Copy, Debug)]
pub struct GuardedRecord<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition, always explicit: the transport applies no partitioner. For Java-compatible
    /// key partitioning use
    /// [`partition_of_bytes`](kafka_coordination_core::partition::partition_of_bytes).
    pub partition: i32,
    /// The key, if any.
    pub key: Option<&'a [u8]>,
    /// The value; `None` writes a tombstone.
    pub value: Option<&'a [u8]>,
}

/// Why `acquire` failed.
pub(crate) enum AcquireError {
    /// The broker refused the transaction timeout (INVALID_TRANSACTION_TIMEOUT).
    InvalidTimeout {
        requested_ms: i64,
        detail: String,
    },
    Other(TransportError),
}

impl From<TransportError> for AcquireError {
    fn from(e: TransportError) -> Self {
        AcquireError::Other(e)
    }
}

/// The producer bound to the pair that InitProducerId granted.
struct Bound {
    role: Role,
    token: FencingToken,
    producer: ThreadedProducer<ProducerCtx>,
    /// A transaction is open after a failed commit or abort; abort it before the next one.
    needs_abort: bool,
    /// Consecutive aborts that failed without a fatal error.
    failed_aborts: u32,
}

/// After this many consecutive failed aborts the producer is given up.
const MAX_FAILED_ABORTS: u32 = 3;

/// A failure, and whether the producer is unusable (and so dropped: the term is over).
struct Failure {
    error: TransportError,
    drop_producer: bool,
}

impl Failure {
    fn keep(error: TransportError) -> Self {
        Failure {
            error,
            drop_producer: false,
        }
    }

    fn drop(error: TransportError) -> Self {
        Failure {
            error,
            drop_producer: true,
        }
    }
}

/// The slot for the role's transactional producer. One per transport (one member).
#[derive(Default)]
pub(crate) struct EpochHolder {
    bound: Mutex<Option<Bound>>,
    /// The role and pair of the last successful acquire; kept after the producer is dropped.
    granted: Mutex<Option<(Role, FencingToken)>>,
}

impl EpochHolder {
    /// InitProducerId for `transactional.id = role`; keeps the producer and returns the pair.
    /// Any producer bound before is dropped first.
    pub fn acquire(
        &self,
        config: &KafkaConfig,
        role: &Role,
        transaction_timeout: Duration,
    ) -> Result<FencingToken, AcquireError> {
        if transaction_timeout < MIN_TRANSACTION_TIMEOUT {
            return Err(TransportError::config(format!(
                "transaction timeout {transaction_timeout:?} for role '{role}' is below librdkafka's \
                 minimum transaction.timeout.ms of {} ms; use a lease duration of at least 1 s",
                MIN_TRANSACTION_TIMEOUT.as_millis()
            ))
            .into());
        }
        let timeout_ms = millis(transaction_timeout);
        let bootstrap = config.bootstrap_servers();

        let mut bound = lock(&self.bound);
        // A new acquire ends whatever term this transport held.
        *bound = None;

        // Connect to every broker at once: with sparse connections librdkafka drops the
        // bootstrap connection after the first metadata and finds no usable broker for the
        // coordinator lookup of init_transactions until its 500 ms retry timer fires, which
        // would add half a second to every failover.
        let mut cc =
            config.client_config(&[("linger.ms", "0"), ("enable.sparse.connections", "false")]);
        cc.set("transactional.id", role.as_str())
            .set("transaction.timeout.ms", timeout_ms.to_string())
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("statistics.interval.ms", STATS_INTERVAL_MS);
        let producer: ThreadedProducer<ProducerCtx> = cc
            .create_with_context(ProducerCtx::default())
            .map_err(|e| {
                classify::from_kafka("creating the transactional producer", &e, bootstrap)
            })?;

        if let Err(e) = producer.init_transactions(config.operation_timeout()) {
            let code = e.rdkafka_error_code();
            if code == Some(RDKafkaErrorCode::InvalidTransactionTimeout) {
                return Err(AcquireError::InvalidTimeout {
                    requested_ms: timeout_ms,
                    detail: e.to_string(),
                });
            }
            let what = format!("InitProducerId for role '{role}'");
            let mut err = match code {
                Some(RDKafkaErrorCode::TransactionalIdAuthorizationFailed) => {
                    TransportError::unauthorized(format!(
                        "{what}: {e} ({})",
                        classify::acl_hint(
                            RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
                            "",
                            Some(role.as_str())
                        )
                    ))
                }
                Some(c) if classify::is_unreachable(c) => TransportError::retriable(format!(
                    "{what}: no answer from the Kafka cluster at {bootstrap} within {:?}: {e}{}",
                    config.operation_timeout(),
                    last_error_suffix(producer.context().last_error())
                )),
                _ => classify::from_kafka(&what, &e, bootstrap),
            };
            err = err.with_source(e);
            return Err(err.into());
        }

        // The pair arrives with the next statistics report after init.
        let Some(snapshot) = producer
            .context()
            .wait_eos(0, STATS_WAIT, |s| s.assigned_pair().is_some())
        else {
            return Err(TransportError::fatal(format!(
                "InitProducerId for role '{role}' succeeded but librdkafka reported no producer id \
                 and epoch within {STATS_WAIT:?} (statistics.interval.ms must stay enabled)"
            ))
            .into());
        };
        let token = token_of(&snapshot).ok_or_else(|| {
            TransportError::fatal(format!(
                "librdkafka reported an epoch out of range for role '{role}': {snapshot:?}"
            ))
        })?;
        *bound = Some(Bound {
            role: role.clone(),
            token,
            producer,
            needs_abort: false,
            failed_aborts: 0,
        });
        *lock(&self.granted) = Some((role.clone(), token));
        Ok(token)
    }

    /// Drops the bound producer, if any (the term is over for this transport).
    pub fn release(&self) {
        *lock(&self.bound) = None;
    }

    /// The role and pair of the last successful acquire, also after the producer was dropped.
    pub fn granted(&self) -> Option<(Role, FencingToken)> {
        lock(&self.granted).clone()
    }

    /// The pair this transport holds, if any.
    pub fn token(&self) -> Option<FencingToken> {
        lock(&self.bound).as_ref().map(|b| b.token)
    }

    /// Writes `records` in one transaction of the bound producer, which must hold `token`.
    /// Returns the records' offsets.
    pub fn write(
        &self,
        config: &KafkaConfig,
        token: FencingToken,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, TransportError> {
        let mut guard = lock(&self.bound);
        let Some(bound) = guard.as_mut() else {
            return Err(TransportError::fenced(format!(
                "this transport holds no epoch (token {token}): acquire_epoch was not called, or \
                 the term ended"
            )));
        };
        if bound.token != token {
            return Err(TransportError::fenced(format!(
                "token {token} is not the pair {} this transport holds for role '{}'",
                bound.token, bound.role
            )));
        }
        match bound.transact(config, records) {
            Ok(offsets) => Ok(offsets),
            Err(Failure {
                error,
                drop_producer,
            }) => {
                if drop_producer {
                    *guard = None;
                }
                Err(error)
            }
        }
    }
}

fn token_of(s: &EosSnapshot) -> Option<FencingToken> {
    let (pid, epoch) = s.pair()?;
    Some(FencingToken::new(pid, i16::try_from(epoch).ok()?))
}

fn last_error_suffix(e: Option<String>) -> String {
    e.map(|e| format!(" (last client error: {e})"))
        .unwrap_or_default()
}

impl Bound {
    /// Checks, before a transaction, that the producer is still usable and still holds the pair.
    fn check_alive(&self) -> Result<(), Failure> {
        if let Some((code, reason)) = self.producer.client().fatal_error() {
            let kind = if is_fencing(code) {
                ErrorKind::Fenced
            } else {
                ErrorKind::Fatal
            };
            return Err(Failure::drop(TransportError::new(
                kind,
                format!(
                    "the transactional producer of role '{}' hit a fatal error: {code:?}: {reason}",
                    self.role
                ),
            )));
        }
        let held = (self.token.producer_id, i64::from(self.token.producer_epoch));
        if let Some((pid, epoch)) = self.producer.context().other_pair(held) {
            return Err(Failure::drop(self.epoch_moved(pid, epoch)));
        }
        let (_, latest) = self.producer.context().eos();
        if let Some(s) = latest {
            if s.txn_state == "FatalError" || s.idemp_state == "FatalError" {
                return Err(Failure::drop(TransportError::fatal(format!(
                    "the transactional producer of role '{}' is in a fatal state ({s:?})",
                    self.role
                ))));
            }
        }
        Ok(())
    }

    fn epoch_moved(&self, producer_id: i64, producer_epoch: i64) -> TransportError {
        TransportError::fenced(format!(
            "the producer of role '{}' moved from {} to {producer_id}/{producer_epoch} without a \
             new acquire (librdkafka bumped its epoch); the term is over",
            self.role, self.token
        ))
    }

    fn transact(
        &mut self,
        config: &KafkaConfig,
        records: &[GuardedRecord<'_>],
    ) -> Result<Vec<i64>, Failure> {
        self.check_alive()?;
        if self.needs_abort {
            self.abort(config)?;
        }
        let role = self.role.clone();
        if let Err(e) = self.producer.begin_transaction() {
            return Err(self.fail(
                config,
                &format!("beginning a transaction for role '{role}'"),
                &e,
                &[],
            ));
        }
        let mut slots = Vec::with_capacity(records.len());
        for r in records {
            let slot = Arc::new(DeliverySlot::default());
            let mut record: BaseRecord<'_, [u8], [u8], Arc<DeliverySlot>> =
                BaseRecord::with_opaque_to(r.topic, Arc::clone(&slot)).partition(r.partition);
            if let Some(k) = r.key {
                record = record.key(k);
            }
            if let Some(v) = r.value {
                record = record.payload(v);
            }
            if let Err((e, _)) = self.producer.send(record) {
                let what = format!(
                    "sending a record to {}/{} in a transaction of role '{role}'",
                    r.topic, r.partition
                );
                return Err(self.fail(config, &what, &e, &slots));
            }
            slots.push(slot);
        }
        self.await_deliveries(config, &slots);
        let mut committed = self.producer.commit_transaction(config.operation_timeout());
        if let Err(KafkaError::Transaction(e)) = &committed {
            // librdkafka: a retriable commit failure (a timeout) is resumed by calling commit
            // again; the transaction may already be committing.
            if e.is_retriable() && !e.is_fatal() && !e.txn_requires_abort() {
                committed = self.producer.commit_transaction(config.operation_timeout());
            }
        }
        if let Err(e) = committed {
            return Err(self.fail(
                config,
                &format!("committing a transaction of role '{role}'"),
                &e,
                &slots,
            ));
        }
        // Committed: every record was delivered. The reports reach the slots through the
        // producer's polling thread, normally already done.
        let mut offsets = Vec::with_capacity(slots.len());
        for slot in &slots {
            match slot.wait(Duration::from_secs(5)) {
                Some(Ok(offset)) => offsets.push(offset),
                // Committed but without a report (or an odd report): the write stands.
                _ => offsets.push(-1),
            }
        }
        Ok(offsets)
    }

    /// Waits (at most the operation timeout) until every record of the transaction has its
    /// delivery report and nothing is left in flight. rdkafka's `commit_transaction` flushes
    /// first, and its flush polls in slices of 100 ms while this producer's own thread serves
    /// the delivery reports, so a commit with a record still in flight waits ~100 ms for
    /// nothing. A record that is not reported in time is left to the commit, which fails.
    fn await_deliveries(&self, config: &KafkaConfig, slots: &[Arc<DeliverySlot>]) {
        let deadline = Instant::now() + config.operation_timeout();
        let remaining = || deadline.saturating_duration_since(Instant::now());
        if !slots.iter().all(|s| s.wait(remaining()).is_some()) {
            return;
        }
        // The report is handed over just before librdkafka counts the message as done.
        while self.producer.in_flight_count() > 0 && !remaining().is_zero() {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Turns a failed transactional call into a failure, aborting the transaction if needed.
    fn fail(
        &mut self,
        config: &KafkaConfig,
        what: &str,
        error: &KafkaError,
        slots: &[Arc<DeliverySlot>],
    ) -> Failure {
        let bootstrap = config.bootstrap_servers();
        // A fencing code anywhere (the call, a record's delivery, the fatal error) ends the term.
        let fatal = self.producer.client().fatal_error();
        let delivery_fence = slots.iter().find_map(|s| match s.peek() {
            Some(Err(e)) if e.rdkafka_error_code().is_some_and(is_fencing) => Some(e),
            _ => None,
        });
        let code = error.rdkafka_error_code();
        if let Some(e) = delivery_fence {
            return Failure::drop(
                TransportError::fenced(format!("{what}: a record was fenced: {e}")).with_source(e),
            );
        }
        if code.is_some_and(is_fencing) || fatal.as_ref().is_some_and(|(c, _)| is_fencing(*c)) {
            return Failure::drop(
                TransportError::fenced(format!(
                    "{what}: the broker fenced the producer (a newer epoch exists for role '{}'): \
                     {error}",
                    self.role
                ))
                .with_source(error.clone()),
            );
        }
        let (is_fatal, requires_abort) = match error {
            KafkaError::Transaction(e) => (e.is_fatal(), e.txn_requires_abort()),
            _ => (false, true),
        };
        if is_fatal || fatal.is_some() {
            let detail = fatal
                .map(|(c, r)| format!(" (fatal error {c:?}: {r})"))
                .unwrap_or_default();
            return Failure::drop(
                TransportError::fatal(format!("{what}: {error}{detail}"))
                    .with_source(error.clone()),
            );
        }
        let mut err = classify::from_kafka(what, error, bootstrap);
        if err.kind() == ErrorKind::Fenced {
            return Failure::drop(err);
        }
        // Abortable errors and anything that left a transaction open: abort it, so the next
        // write starts clean. A timed-out commit leaves the transaction open as well.
        let state_error = code == Some(RDKafkaErrorCode::State);
        if requires_abort || state_error || err.kind() == ErrorKind::Retriable {
            if let Err(f) = self.abort(config) {
                if f.drop_producer || f.error.kind() == ErrorKind::Fenced {
                    return f;
                }
                // The abort failed but the producer may live: the next write aborts first.
                self.needs_abort = true;
            }
            if err.kind() != ErrorKind::Config && err.kind() != ErrorKind::Unauthorized {
                err = TransportError::retriable(format!(
                    "{} (the transaction was aborted)",
                    err.message()
                ))
                .with_source(error.clone());
            }
        }
        Failure::keep(err)
    }

    /// Aborts the open transaction, then checks that librdkafka did not bump the epoch on the
    /// way (KIP-360): a pair this producer no longer holds must never be handed out.
    fn abort(&mut self, config: &KafkaConfig) -> Result<(), Failure> {
        let (seq, _) = self.producer.context().eos();
        if let Err(e) = self.producer.abort_transaction(config.operation_timeout()) {
            let code = e.rdkafka_error_code();
            let fatal = self.producer.client().fatal_error();
            if code.is_some_and(is_fencing) || fatal.as_ref().is_some_and(|(c, _)| is_fencing(*c)) {
                return Err(Failure::drop(
                    TransportError::fenced(format!(
                        "aborting a transaction of role '{}': the producer was fenced: {e}",
                        self.role
                    ))
                    .with_source(e),
                ));
            }
            if matches!(&e, KafkaError::Transaction(t) if t.is_fatal()) || fatal.is_some() {
                return Err(Failure::drop(
                    TransportError::fatal(format!(
                        "aborting a transaction of role '{}': {e}",
                        self.role
                    ))
                    .with_source(e),
                ));
            }
            self.needs_abort = true;
            self.failed_aborts += 1;
            if self.failed_aborts >= MAX_FAILED_ABORTS {
                // The producer cannot get out of its transaction: it is of no further use.
                return Err(Failure::drop(
                    TransportError::fatal(format!(
                        "aborting a transaction of role '{}' failed {} times in a row: {e}",
                        self.role, self.failed_aborts
                    ))
                    .with_source(e),
                ));
            }
            return Err(Failure::keep(
                TransportError::retriable(format!(
                    "aborting a transaction of role '{}': {e}",
                    self.role
                ))
                .with_source(e),
            ));
        }
        self.needs_abort = false;
        self.failed_aborts = 0;
        match self
            .producer
            .context()
            .wait_eos(seq, STATS_WAIT, |s| s.assigned_pair().is_some())
        {
            Some(s) if token_of(&s) == Some(self.token) => self.check_alive(),
            Some(s) => Err(Failure::drop(
                self.epoch_moved(s.producer_id, s.producer_epoch),
            )),
            None => Err(Failure::drop(TransportError::fatal(format!(
                "after aborting a transaction of role '{}' librdkafka reported no producer id and \
                 epoch within {STATS_WAIT:?}; the pair cannot be verified",
                self.role
            )))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::client::ClientContext;

    fn role(name: &str) -> Role {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Role::new(format!("{name}-{}-{nanos:x}", std::process::id())).expect("role")
    }

    #[test]
    fn a_transaction_timeout_below_librdkafkas_minimum_is_a_config_error() {
        let holder = EpochHolder::default();
        let config = KafkaConfig::new("127.0.0.1:1", 1);
        match holder.acquire(&config, &role("short"), Duration::from_millis(999)) {
            Err(AcquireError::Other(e)) => assert_eq!(e.kind(), ErrorKind::Config, "{e}"),
            _ => panic!("expected a configuration error"),
        }
    }

    #[test]
    fn writing_without_an_epoch_is_fenced() {
        let holder = EpochHolder::default();
        let config = KafkaConfig::new("127.0.0.1:1", 1);
        let record = GuardedRecord {
            topic: "t",
            partition: 0,
            key: None,
            value: Some(b"v"),
        };
        let err = holder
            .write(&config, FencingToken::new(1, 0), &[record])
            .expect_err("no epoch held");
        assert!(err.is_fenced());
    }

    /// Needs a broker (`KAFKA_BOOTSTRAP`): librdkafka's own epoch bump (KIP-360) ends the term.
    #[test]
    fn an_epoch_moved_by_librdkafka_ends_the_term() {
        let Ok(bootstrap) = std::env::var("KAFKA_BOOTSTRAP") else {
            // Straight to stderr: libtest captures eprintln! of passing tests.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"\n*** SKIPPED an_epoch_moved_by_librdkafka_ends_the_term: KAFKA_BOOTSTRAP is not set ***\n",
            );
            return;
        };
        let config = KafkaConfig::new(bootstrap, 16);
        let holder = EpochHolder::default();
        let token = match holder.acquire(&config, &role("bumped"), Duration::from_secs(30)) {
            Ok(t) => t,
            Err(AcquireError::Other(e)) => panic!("acquire: {e}"),
            Err(AcquireError::InvalidTimeout { detail, .. }) => panic!("acquire: {detail}"),
        };
        {
            let guard = lock(&holder.bound);
            let bound = guard.as_ref().expect("bound");
            // What librdkafka reports after bumping its epoch by itself.
            let stats = format!(
                r#"{{"eos":{{"idemp_state":"Assigned","txn_state":"Ready","producer_id":{},"producer_epoch":{}}}}}"#,
                token.producer_id,
                i64::from(token.producer_epoch) + 1
            );
            bound.producer.context().stats_raw(stats.as_bytes());
        }
        let record = GuardedRecord {
            topic: super::super::STATE_TOPIC,
            partition: 0,
            key: None,
            value: Some(b"v"),
        };
        let err = holder
            .write(&config, token, &[record])
            .expect_err("a moved epoch ends the term");
        assert!(err.is_fenced(), "{err}");
        assert!(err.message().contains("bumped"), "{err}");
        assert_eq!(holder.token(), None, "the producer is dropped");
    }
}
