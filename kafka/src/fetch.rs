//! The process's reader of the state topic: [`SharedReader`] tails each partition someone reads
//! once, with native read_committed Fetch requests, and serves every candidate (and watcher) of
//! the transport from an in-memory view of it.
//!
//! See [`SharedReader`] for the views, the fetch threads and the reads.

mod view;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::api::fetch::{self as fetch_api, Answered, Fetch, Fetched};
use super::api::list_offsets::ListOffsets;
use super::api::Attempt;
use super::batch::Skipped;
use super::cluster::Cluster;
use super::config::KafkaConfig;
use super::net::Conn;
use kafka_coordination_transport::error::TransportError;
use kafka_coordination_transport::lock::lock;
use kafka_coordination_transport::log_warn;
use kafka_coordination_transport::{ReadBatch, TailHook, TailHooks};

pub(super) use view::View;

/// How long a fetch thread's Fetch waits at the broker for committed records.
const LONG_POLL: Duration = Duration::from_millis(500);
/// The least time between the starts of two Fetches of one fetch thread. While the partitions
/// are written without pause (thousands of renewals a second), every long poll comes back at
/// once, and an unpaced thread sent about 400 Fetches a second, more than a quarter of what a
/// process standing by for 5,000 roles asked of the broker; paced, at most 100. A long poll that
/// waits longer than this for its records is not delayed at all: news of a quiet partition (a
/// resign) arrives as before, and news of a busy one at most this much later.
const TAIL_PACE: Duration = Duration::from_millis(10);
/// A partition nobody read for this long is no longer fetched, and its view is dropped.
const IDLE: Duration = Duration::from_secs(30);
/// Byte limits of a fetch thread's Fetch (the connection accepts answers up to 16 MiB).
const FETCH_MAX_BYTES: i32 = 8 * 1024 * 1024;
/// Byte limit per partition, and of a read's catch-up Fetch.
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// How many failed Fetches in a row a fetch thread tries before it hands its partitions back
/// to the readers (who look their leaders up again).
const FETCH_ATTEMPTS: u32 = 3;

/// One reader per transport (per process).
///
/// - **Views.** Per partition, the committed records fetched so far (control batches and the
///   records of aborted transactions removed, as Kafka's consumer does), in offset order, and
///   `end`, how far the view covers (the last stable offset once caught up). Superseded records
///   (an older record of a key) are dropped from the view once they are `TAIL` (see `view.rs`) offsets behind
///   its end: an in-memory compaction that leaves the state a reader builds unchanged (records
///   are applied in offset order; tombstones are kept).
///   A read reports the view **stalled** when it reached a last stable offset below the
///   partition's high watermark (both from the last Fetch answer): an open transaction, of any
///   role on the partition, holds committed records back.
/// - **Fetch threads.** One thread per partition leader with partitions in use, on the reader's
///   own [`Cluster`] (so one connection per such broker): one long-polling Fetch (up to
///   [`LONG_POLL`]) with every such partition of that leader, applied to the views, waiters
///   notified, and again, at most one Fetch start per [`TAIL_PACE`]. A delayed read_committed
///   fetch completes as soon as committed bytes below the last stable offset arrive, so a
///   commit marker wakes it at once. A partition nobody read for [`IDLE`] is dropped (view
///   included); a thread with no partition left ends.
/// - **Reads.** A read that may not wait (and the first read of a partition, or one whose leader
///   was lost) catches up first: quick Fetches (no wait) through the transport's shared
///   cluster from the view's end until the view reaches the last stable offset that the first of
///   them reported, so a read always covers what was readable when it began (a member reads
///   its own registration; a transaction's records become readable only once the
///   coordinator's commit marker lands, a moment after the commit was answered). It also
///   looks the leader up and hands the partition to that leader's fetch thread. A read that may wait returns as soon as the view holds records at
///   or past `from`, or after `max_wait`.
/// - **Tailed reads.** [`SharedReader::read_tailed`] answers from a live view (tailed and caught
///   up once) with no request and no wait, and the fetch threads call the hooks given to
///   [`SharedReader::on_tailed`] with each partition an answer moved (records, or a new last
///   stable offset or high watermark): a `Host` serves its standbys' long polls that way.
pub(crate) struct SharedReader {
    inner: Arc<Inner>,
}

impl SharedReader {
    /// A reader of `config`'s state topic: Fetch long polls on a cluster view of its own
    /// (client id `<client id>-reader`); lookups and catch-up reads through `shared`. Nothing
    /// is contacted yet.
    pub(crate) fn new(config: &KafkaConfig, shared: Arc<Cluster>) -> Result<Self, TransportError> {
        let fetch = Cluster::new(config, &format!("{}-reader", config.client_id()))?;
        let topic = config.topic().to_owned();
        Ok(SharedReader {
            inner: Arc::new(Inner {
                topic_name: TopicName(StrBytes::from_string(topic.clone())),
                topic,
                partitions: config.partitions(),
                request_timeout: config.request_timeout(),
                shared,
                fetch,
                state: Mutex::new(State::default()),
                changed: Changes::default(),
                hooks: TailHooks::default(),
                skipped: AtomicU64::new(0),
            }),
        })
    }

    /// How many requests the Fetch loops sent.
    pub(crate) fn requests(&self) -> u64 {
        self.inner.fetch.requests()
    }

    /// How many requests of the Fetch loops were given up on when their broker went silent.
    pub(crate) fn requests_abandoned(&self) -> u64 {
        self.inner.fetch.requests_abandoned()
    }

    /// How many requests of each API the Fetch loops sent.
    pub(crate) fn requests_by_api(&self) -> Vec<(i16, u64)> {
        self.inner.fetch.requests_by_api()
    }

    /// How many record batches the reader passed because their records could not be read.
    pub(crate) fn batches_skipped(&self) -> u64 {
        self.inner.skipped.load(Ordering::Relaxed)
    }

    /// SASL sessions of the Fetch loops' connections renewed, and connections replaced
    /// (KIP-368).
    pub(crate) fn reauthentications(&self) -> (u64, u64) {
        self.inner.fetch.reauthentications()
    }

    /// Committed records of `partition` at offsets `>= from_offset`, in offset order, and how
    /// far the view reached (see [`StateReader`](kafka_coordination_transport::StateReader)), as
    /// a task that holds no thread: `done` gets the batch on the thread that ended its last
    /// wait (a connection thread, the fetch thread whose answer brought records, or the timer).
    ///
    /// With `max_wait` zero, or when no fetch thread tails the partition yet, it first catches
    /// the view up with the partition; with `max_wait` above zero it then waits, up to that
    /// long, for the view to hold records at or past `from_offset` (a long poll: the fetch
    /// thread's answer wakes it).
    pub(crate) fn start_read(
        &self,
        partition: i32,
        from_offset: i64,
        max_wait: Duration,
        done: kafka_coordination_transport::ReadDone,
    ) {
        let inner = Arc::clone(&self.inner);
        if partition < 0 || partition >= inner.partitions {
            return done(Err(TransportError::config(format!(
                "partition {partition} is outside the {} partitions of {}",
                inner.partitions, inner.topic
            ))));
        }
        super::task_runtime::spawn(async move {
            let from = from_offset.max(0);
            let started = Instant::now();
            let read = async {
                let _reading = Reading::begin(&inner, partition);
                if max_wait.is_zero() || !inner.is_live(partition) {
                    inner
                        .catch_up(partition, started + inner.request_timeout)
                        .await?;
                }
                if !max_wait.is_zero() {
                    // A huge max_wait (Duration::MAX) waits a day at most instead of overflowing.
                    let until = started
                        .checked_add(max_wait.min(Duration::from_secs(86_400)))
                        .unwrap_or(started);
                    inner.records_since(partition, from, until).await?;
                }
                Ok(inner.batch(partition, from))
            };
            done(read.await);
        });
    }

    /// The view of `partition` from `from_offset`, if a fetch thread tails the partition and
    /// the view caught up once; no request is sent. Counts as a read (the partition stays
    /// tailed).
    pub(crate) fn read_tailed(&self, partition: i32, from_offset: i64) -> Option<ReadBatch> {
        let inner = &self.inner;
        {
            let mut st = lock(&inner.state);
            let part = st.parts.get_mut(&partition)?;
            if part.leader.is_none() || !part.caught_up {
                return None;
            }
            part.last_read = Instant::now();
        }
        Some(inner.batch(partition, from_offset.max(0)))
    }

    /// Keeps `hook` (while it lives) to call with every partition a fetch thread's answer moves.
    pub(crate) fn on_tailed(&self, hook: Weak<TailHook>) {
        self.inner.hooks.add(hook);
    }
}

impl Drop for SharedReader {
    /// Fetch threads end after their Fetch in flight.
    fn drop(&mut self) {
        lock(&self.inner.state).closed = true;
        self.inner.changed.notify_all();
    }
}

struct Inner {
    topic: String,
    topic_name: TopicName,
    partitions: i32,
    request_timeout: Duration,
    /// The transport's cluster view: leader lookups, catch-up Fetches, ListOffsets.
    shared: Arc<Cluster>,
    /// The reader's own: the fetch threads' long polls, one connection per leader.
    fetch: Cluster,
    state: Mutex<State>,
    /// Notified on every change of a view or of a partition's leader (never while `state` is
    /// locked: a waiter woken is polled on the notifying thread, and locks it).
    changed: Changes,
    /// Called by the fetch threads with each partition whose view or limits an answer moved.
    hooks: TailHooks,
    /// Batches passed because their records could not be read (see [`Inner::passed`]).
    skipped: AtomicU64,
}

#[derive(Default)]
struct State {
    parts: HashMap<i32, Part>,
    /// Leaders with a running fetch thread.
    fetchers: HashSet<String>,
    closed: bool,
}

struct Part {
    view: View,
    /// The leader whose fetch thread tails the partition; `None` until a read looks it up, and
    /// again after the thread lost it.
    leader: Option<String>,
    /// Whether the view reached the last stable offset that a Fetch reported.
    caught_up: bool,
    /// The last stable offset and the high watermark of the last Fetch answer applied: a view
    /// that reached a last stable offset below the high watermark is stalled (an open
    /// transaction holds committed records back).
    limits: (i64, i64),
    /// Reads in progress.
    readers: usize,
    last_read: Instant,
}

impl Part {
    fn new() -> Part {
        Part {
            view: View::starting_at(0),
            leader: None,
            caught_up: false,
            limits: (0, 0),
            readers: 0,
            last_read: Instant::now(),
        }
    }
}

/// What wakes the reads that wait for a view to move, partition by partition: a count of
/// changes of each partition (plus one of changes of all, such as the reader closing), and the
/// wakers of the tasks waiting for the next one. A fetch answer that moves one partition wakes
/// only the reads of that partition. Wakers are woken after the lock is let go, since a task of
/// the client is polled by the thread that wakes it (and may wait again at once).
#[derive(Default)]
struct Changes {
    /// Changes of every partition at once.
    all: AtomicU64,
    partitions: Mutex<HashMap<i32, Waiting>>,
}

/// The changes of one partition and the tasks waiting for its next one.
#[derive(Default)]
struct Waiting {
    count: u64,
    wakers: Vec<std::task::Waker>,
}

impl Changes {
    /// The number of changes of `partition` so far (those of all partitions included).
    fn count(&self, partition: i32) -> u64 {
        let all = self.all.load(Ordering::Acquire);
        let own = lock(&self.partitions)
            .get(&partition)
            .map_or(0, |w| w.count);
        all.wrapping_add(own)
    }

    /// Counts a change of each of `partitions` and wakes the tasks waiting for one.
    fn notify(&self, partitions: &[i32]) {
        let mut woken = Vec::new();
        {
            let mut map = lock(&self.partitions);
            for p in partitions {
                let w = map.entry(*p).or_default();
                w.count = w.count.wrapping_add(1);
                woken.append(&mut w.wakers);
            }
        }
        for waker in woken {
            waker.wake();
        }
    }

    /// Counts a change of every partition and wakes every waiting task.
    fn notify_all(&self) {
        self.all.fetch_add(1, Ordering::AcqRel);
        let woken: Vec<_> = lock(&self.partitions)
            .values_mut()
            .flat_map(|w| std::mem::take(&mut w.wakers))
            .collect();
        for waker in woken {
            waker.wake();
        }
    }

    /// Ready once the count of `partition` has moved past `seen`. Dropped before that (its
    /// read timed out), it takes its waker back.
    fn since(&self, partition: i32, seen: u64) -> Since<'_> {
        Since {
            changes: self,
            partition,
            seen,
            registered: None,
        }
    }
}

/// The future of [`Changes::since`].
struct Since<'a> {
    changes: &'a Changes,
    partition: i32,
    seen: u64,
    /// The waker left with the partition, to take back on drop.
    registered: Option<std::task::Waker>,
}

impl std::future::Future for Since<'_> {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let (changes, partition, seen) = (self.changes, self.partition, self.seen);
        {
            let mut map = lock(&changes.partitions);
            let w = map.entry(partition).or_default();
            let all = changes.all.load(Ordering::Acquire);
            if all.wrapping_add(w.count) != seen {
                return std::task::Poll::Ready(());
            }
            if !w.wakers.iter().any(|k| k.will_wake(cx.waker())) {
                w.wakers.push(cx.waker().clone());
            }
        }
        self.registered = Some(cx.waker().clone());
        // A change of all partitions counted between the check and the push woke nobody:
        // look again.
        if changes.count(partition) != seen {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

impl Drop for Since<'_> {
    fn drop(&mut self) {
        if let Some(waker) = self.registered.take() {
            if let Some(w) = lock(&self.changes.partitions).get_mut(&self.partition) {
                w.wakers.retain(|k| !k.will_wake(&waker));
            }
        }
    }
}

/// A read in progress: keeps its partition in use.
struct Reading<'a> {
    inner: &'a Inner,
    partition: i32,
}

impl<'a> Reading<'a> {
    fn begin(inner: &'a Inner, partition: i32) -> Reading<'a> {
        let mut st = lock(&inner.state);
        let part = st.parts.entry(partition).or_insert_with(Part::new);
        part.readers += 1;
        part.last_read = Instant::now();
        Reading { inner, partition }
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.inner.state);
        if let Some(part) = st.parts.get_mut(&self.partition) {
            part.readers = part.readers.saturating_sub(1);
            part.last_read = Instant::now();
        }
    }
}

impl Inner {
    fn what(&self, partition: i32) -> String {
        format!("reading {}/{partition}", self.topic)
    }

    /// Logs and counts the batches of `partition` that a Fetch answer applied to its view
    /// passed: each is warned about once (the view moved past it).
    fn passed(&self, partition: i32, skipped: &[Skipped]) {
        for s in skipped {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            log_warn!(
                topic = %self.topic,
                partition,
                base_offset = s.base,
                last_offset = s.last,
                "skipped the record batch at offsets {}..={} of {}/{partition}: {}",
                s.base,
                s.last,
                self.topic,
                s.reason
            );
            #[cfg(not(feature = "tracing"))]
            let _ = (s, partition);
        }
    }

    /// Whether a fetch thread tails `partition` and its view has caught up once.
    fn is_live(&self, partition: i32) -> bool {
        lock(&self.state)
            .parts
            .get(&partition)
            .is_some_and(|p| p.leader.is_some() && p.caught_up)
    }

    fn batch(&self, partition: i32, from: i64) -> ReadBatch {
        let st = lock(&self.state);
        match st.parts.get(&partition) {
            Some(part) => {
                let (stable, high_watermark) = part.limits;
                ReadBatch {
                    records: part.view.since(from),
                    end_offset: part.view.end.max(from),
                    stalled: part.view.end >= stable && stable < high_watermark,
                    high_watermark: Some(high_watermark.max(part.view.end.max(from))),
                }
            }
            None => ReadBatch {
                records: Vec::new(),
                end_offset: from,
                stalled: false,
                high_watermark: None,
            },
        }
    }

    /// Waits until the view of `partition` holds records at or past `from`, or `until`; a
    /// partition that no fetch thread tails (its leader lost) is caught up again first.
    async fn records_since(
        self: &Arc<Self>,
        partition: i32,
        from: i64,
        until: Instant,
    ) -> Result<(), TransportError> {
        loop {
            let seen = self.changed.count(partition);
            let lost = {
                let st = lock(&self.state);
                if st.closed {
                    return Ok(());
                }
                match st.parts.get(&partition) {
                    Some(part) if part.view.has_since(from) => return Ok(()),
                    Some(part) => part.leader.is_none(),
                    None => true,
                }
            };
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            if lost {
                self.catch_up(partition, now + self.request_timeout).await?;
                continue;
            }
            futures_lite::future::or(
                self.changed.since(partition, seen),
                super::task_runtime::sleep_until(until),
            )
            .await;
        }
    }

    /// Fetches `partition` (no wait) from its view's end until the view reaches the last stable
    /// offset that the first answer reported, or `deadline` (what was read stands). Looks the
    /// leader up and hands the partition to its fetch thread.
    async fn catch_up(
        self: &Arc<Self>,
        partition: i32,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let what = self.what(partition);
        let mut target: Option<i64> = None;
        loop {
            let at = {
                let mut st = lock(&self.state);
                let part = st.parts.entry(partition).or_insert_with(Part::new);
                if target.is_some_and(|t| part.view.end >= t) {
                    return Ok(());
                }
                part.view.end
            };
            if Instant::now() >= deadline {
                // What was read stands; the next read goes on from the view's end.
                return match target {
                    Some(_) => Ok(()),
                    None => Err(TransportError::retriable(format!(
                        "{what}: could not position the read on the log of the Kafka cluster at \
                         {} in {:?}",
                        self.shared.bootstrap(),
                        self.request_timeout
                    ))),
                };
            }
            let answer = self
                .shared
                .retry_async(&what, deadline, || {
                    let inner = Arc::clone(self);
                    async move {
                        self.shared
                            .at_leader_async(&self.topic, partition, deadline, move |conn| {
                                inner
                                    .fetch_now(conn, partition, at, deadline)
                                    .map(|f| (conn.addr().to_owned(), f))
                            })
                            .await
                    }
                })
                .await;
            let (leader, fetched) = match answer {
                Ok(a) => a,
                // An UNKNOWN_TOPIC_OR_PARTITION that lasted the whole read is a configuration
                // error only if the metadata confirms it (the topic is gone, or has another
                // partition count); else it stays retriable.
                Err(e) => {
                    let confirm_by = Instant::now() + self.request_timeout;
                    return Err(self
                        .shared
                        .confirm(e, &self.topic, partition, Some(self.partitions), confirm_by)
                        .await);
                }
            };
            match fetched {
                Fetched::Data {
                    mut decoded,
                    stable,
                    high_watermark,
                } => {
                    target.get_or_insert(stable);
                    let mut st = lock(&self.state);
                    let part = st.parts.entry(partition).or_insert_with(Part::new);
                    if part.view.end == at {
                        self.passed(partition, &std::mem::take(&mut decoded.skipped));
                        part.view.append(decoded);
                        part.limits = (stable, high_watermark);
                        if part.view.end >= stable {
                            part.caught_up = true;
                        }
                    }
                    // A moved leader: its old thread drops the partition at its next Fetch.
                    part.leader = Some(leader.clone());
                    if let Err(e) = self.ensure_fetcher(&mut st, &leader) {
                        if let Some(part) = st.parts.get_mut(&partition) {
                            part.leader = None;
                        }
                        return Err(e);
                    }
                    drop(st);
                    self.changed.notify(&[partition]);
                }
                Fetched::OutOfRange => self.reset_to_log_start(partition, at, deadline).await?,
            }
        }
    }

    /// Starts the fetch thread of `leader` unless it runs.
    fn ensure_fetcher(
        self: &Arc<Self>,
        st: &mut State,
        leader: &str,
    ) -> Result<(), TransportError> {
        if st.closed || st.fetchers.contains(leader) {
            return Ok(());
        }
        let inner = Arc::clone(self);
        let addr = leader.to_owned();
        thread::Builder::new()
            .name(format!("kc-fetch {leader}"))
            .spawn(move || inner.run_fetcher(&addr))
            .map_err(|e| {
                TransportError::retriable(format!(
                    "cannot start a thread to fetch {} from {leader}: {e}",
                    self.topic
                ))
            })?;
        st.fetchers.insert(leader.to_owned());
        Ok(())
    }

    /// One Fetch (no wait) of `partition` from offset `at`, on `conn` (its leader).
    fn fetch_now(
        &self,
        conn: &mut Conn,
        partition: i32,
        at: i64,
        deadline: Instant,
    ) -> Result<Fetched, Attempt> {
        let parts = [(partition, at)];
        let x = Fetch {
            topic: &self.topic_name,
            parts: &parts,
            max_wait: Duration::ZERO,
            max_bytes: PARTITION_MAX_BYTES,
            partition_max_bytes: PARTITION_MAX_BYTES,
        };
        let answered = conn.exchange(&x, deadline)?;
        fetch_api::only(answered, partition, conn.addr())
    }

    /// After OFFSET_OUT_OF_RANGE at offset `at`: moves the view to the log start (ListOffsets
    /// earliest). A log start past the view keeps what was read; a view past the log's end
    /// (the log was truncated or the topic re-created) is read again from the start.
    async fn reset_to_log_start(
        self: &Arc<Self>,
        partition: i32,
        at: i64,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let what = format!("finding the log start of {}/{partition}", self.topic);
        let start = self
            .shared
            .retry_async(&what, deadline, || {
                let inner = Arc::clone(self);
                async move {
                    self.shared
                        .at_leader_async(&self.topic, partition, deadline, move |conn| {
                            inner.log_start(conn, partition, deadline)
                        })
                        .await
                }
            })
            .await?;
        {
            let mut st = lock(&self.state);
            if let Some(part) = st.parts.get_mut(&partition) {
                if part.view.end == at {
                    if start > at {
                        part.view.end = start;
                    } else {
                        part.view = View::starting_at(start);
                    }
                    part.caught_up = false;
                }
            }
        }
        self.changed.notify(&[partition]);
        Ok(())
    }

    fn log_start(
        &self,
        conn: &mut Conn,
        partition: i32,
        deadline: Instant,
    ) -> Result<i64, Attempt> {
        let x = ListOffsets {
            topic: &self.topic_name,
            partition,
        };
        conn.exchange(&x, deadline)
    }

    // ---- fetch threads ---------------------------------------------------------------------

    /// The loop of the fetch thread of `leader`.
    fn run_fetcher(self: Arc<Self>, leader: &str) {
        let mut failures: u32 = 0;
        let mut turn: usize = 0;
        let mut sent: Option<Instant> = None;
        loop {
            if let Some(at) = sent {
                let pause = pause_before_fetch(at, Instant::now());
                if !pause.is_zero() {
                    thread::sleep(pause);
                }
            }
            let Some(mut plan) = self.plan(leader) else {
                break;
            };
            sent = Some(Instant::now());
            // Rotate, so that a partition whose data the byte limit cut off comes first next.
            let k = turn % plan.len();
            plan.rotate_left(k);
            turn = turn.wrapping_add(1);
            let deadline = Instant::now() + LONG_POLL + self.request_timeout;
            let x = Fetch {
                topic: &self.topic_name,
                parts: &plan,
                max_wait: LONG_POLL,
                max_bytes: FETCH_MAX_BYTES,
                partition_max_bytes: PARTITION_MAX_BYTES,
            };
            let failed = match self
                .fetch
                .on(leader, deadline, |conn| conn.exchange(&x, deadline))
            {
                Ok(answered) => {
                    self.absorb(leader, answered);
                    failures = 0;
                    continue;
                }
                Err(e) => e,
            };
            failures += 1;
            // A pause before trying again, or before handing the partitions back (the readers
            // would look the same leader up at once).
            thread::sleep(Duration::from_millis(50u64 << failures.min(4)));
            if failures >= FETCH_ATTEMPTS || matches!(failed, Attempt::Stop(_)) {
                failures = 0;
                self.release(leader, plan.iter().map(|&(p, _)| p));
            }
        }
    }

    /// The partitions `leader`'s thread fetches next, with their views' ends; `None` when it
    /// has none left (the thread then ends). Drops partitions nobody read for [`IDLE`].
    fn plan(&self, leader: &str) -> Option<Vec<(i32, i64)>> {
        let mut st = lock(&self.state);
        if !st.closed {
            let now = Instant::now();
            st.parts
                .retain(|_, part| part.readers > 0 || now.duration_since(part.last_read) < IDLE);
            let mut plan: Vec<(i32, i64)> = st
                .parts
                .iter()
                .filter(|(_, part)| part.leader.as_deref() == Some(leader))
                .map(|(&p, part)| (p, part.view.end))
                .collect();
            if !plan.is_empty() {
                plan.sort_unstable();
                return Some(plan);
            }
        }
        st.fetchers.remove(leader);
        None
    }

    /// Hands `partitions` back: the next read of each looks its leader up again.
    fn release(&self, leader: &str, partitions: impl Iterator<Item = i32>) {
        let mut released = Vec::new();
        {
            let mut st = lock(&self.state);
            for p in partitions {
                if let Some(part) = st.parts.get_mut(&p) {
                    if part.leader.as_deref() == Some(leader) {
                        part.leader = None;
                        released.push(p);
                    }
                }
            }
        }
        self.changed.notify(&released);
    }

    /// Applies a fetch thread's answer, read.
    fn absorb(self: &Arc<Self>, leader: &str, answered: Vec<Answered>) {
        let mut lost = Vec::new();
        let mut out_of_range = Vec::new();
        let mut moved = Vec::new();
        let mut news = Vec::new();
        let mut passed = Vec::new();
        {
            let mut st = lock(&self.state);
            for Answered {
                partition,
                from: at,
                fetched: outcome,
            } in answered
            {
                let Some(part) = st.parts.get_mut(&partition) else {
                    continue;
                };
                if part.leader.as_deref() != Some(leader) || part.view.end != at {
                    // Another Fetch moved the view, or the partition moved on.
                    continue;
                }
                match outcome {
                    Ok(Fetched::Data {
                        mut decoded,
                        stable,
                        high_watermark,
                    }) => {
                        passed.push((partition, std::mem::take(&mut decoded.skipped)));
                        if decoded.next > at {
                            moved.push(partition);
                        }
                        if decoded.next > at || part.limits != (stable, high_watermark) {
                            news.push(partition);
                        }
                        part.view.append(decoded);
                        part.limits = (stable, high_watermark);
                        if part.view.end >= stable {
                            part.caught_up = true;
                        }
                    }
                    Ok(Fetched::OutOfRange) => out_of_range.push((partition, at)),
                    Err(_) => lost.push(partition),
                }
            }
        }
        for (partition, skipped) in passed {
            self.passed(partition, &skipped);
        }
        if !moved.is_empty() {
            self.changed.notify(&moved);
        }
        if !news.is_empty() {
            self.hooks.tell(&news);
        }
        for (partition, at) in out_of_range {
            let reset =
                self.reset_to_log_start(partition, at, Instant::now() + self.request_timeout);
            if super::task_runtime::block_on(reset).is_err() {
                lost.push(partition);
            }
        }
        if !lost.is_empty() {
            self.release(leader, lost.into_iter());
        }
    }
}

/// How long a fetch thread waits before its next Fetch, the last one having started at `sent`
/// (see [`TAIL_PACE`]).
fn pause_before_fetch(sent: Instant, now: Instant) -> Duration {
    (sent + TAIL_PACE).saturating_duration_since(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_waiting_for_a_change_is_woken_by_one_from_another_thread() {
        // The client's tasks are polled by the thread that wakes them: a waker woken under
        // the lock it takes again would hang here.
        let changes = Arc::new(Changes::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let waiting = Arc::clone(&changes);
        let seen = changes.count(3);
        super::super::task_runtime::spawn(async move {
            waiting.since(3, seen).await;
            // Waits again at once, as a read whose partition did not move does.
            let again = waiting.count(3);
            let _ = tx.send(again);
        });
        assert!(rx.try_recv().is_err(), "ready before any change");
        let notifier = Arc::clone(&changes);
        thread::spawn(move || notifier.notify(&[3]))
            .join()
            .expect("the notifier does not hang");
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(60)),
            Ok(seen + 1),
            "the waiting task ran after the change"
        );
    }

    /// A waker that counts its wakes.
    struct Counted(AtomicU64);

    impl std::task::Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_change_wakes_only_the_reads_of_its_partition_and_a_dropped_wait_leaves_nothing() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let changes = Changes::default();
        let (one, two) = (
            Arc::new(Counted(AtomicU64::new(0))),
            Arc::new(Counted(AtomicU64::new(0))),
        );
        let (waker_one, waker_two) = (Waker::from(Arc::clone(&one)), Waker::from(Arc::clone(&two)));
        let mut on_one = Box::pin(changes.since(1, changes.count(1)));
        let mut on_two = Box::pin(changes.since(2, changes.count(2)));
        assert_eq!(
            on_one.as_mut().poll(&mut Context::from_waker(&waker_one)),
            Poll::Pending
        );
        assert_eq!(
            on_two.as_mut().poll(&mut Context::from_waker(&waker_two)),
            Poll::Pending
        );

        changes.notify(&[2]);
        assert_eq!(
            one.0.load(Ordering::SeqCst),
            0,
            "partition 1's read slept on"
        );
        assert_eq!(two.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            on_two.as_mut().poll(&mut Context::from_waker(&waker_two)),
            Poll::Ready(())
        );
        assert_eq!(
            on_one.as_mut().poll(&mut Context::from_waker(&waker_one)),
            Poll::Pending
        );

        // A read that gives up (its wait timed out) takes its waker back.
        drop(on_one);
        assert!(lock(&changes.partitions)[&1].wakers.is_empty());

        // Closing wakes every waiting read, whatever its partition.
        let mut again = Box::pin(changes.since(1, changes.count(1)));
        assert_eq!(
            again.as_mut().poll(&mut Context::from_waker(&waker_one)),
            Poll::Pending
        );
        changes.notify_all();
        assert_eq!(one.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            again.as_mut().poll(&mut Context::from_waker(&waker_one)),
            Poll::Ready(())
        );
    }

    #[test]
    fn a_fetch_thread_paces_only_the_fetches_that_came_back_sooner_than_its_pace() {
        let sent = Instant::now();
        // A long poll answered at once (a partition written without pause): the next Fetch
        // waits out the rest of the pace.
        let at_once = sent + Duration::from_millis(3);
        assert_eq!(
            pause_before_fetch(sent, at_once),
            TAIL_PACE - Duration::from_millis(3)
        );
        assert_eq!(pause_before_fetch(sent, sent), TAIL_PACE);
        // One that waited for its records longer than the pace (a quiet partition, a resign
        // arriving) is followed at once.
        assert_eq!(pause_before_fetch(sent, sent + TAIL_PACE), Duration::ZERO);
        assert_eq!(pause_before_fetch(sent, sent + LONG_POLL), Duration::ZERO);
    }
}
