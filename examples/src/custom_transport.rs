//! A transport of your own: an in-process broker over a `HashMap` that implements only what
//! the seam requires (six methods of the four traits, each in its one completion form; every
//! other method has a default), and an election run on it by the blocking driver, in virtual
//! time.
//!
//! The story: `a` is elected; `b` waits; `a` resigns; `b` is elected with a newer pair, and the
//! broker refuses a lease write that still carries `a`'s pair.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kafka_coordination::core::record::Role;
use kafka_coordination::core::state::Record;
use kafka_coordination::error::TransportError;
use kafka_coordination::transport::{AcquireDone, Append, DescribeDone, LeaseDone, ReadDone, Wait};
use kafka_coordination::transport::{Coordinator, LeaseWriter, ReadBatch, Registrar, StateReader};
use kafka_coordination::{blocking, FencingToken, LeadershipStatus, ManualClock, Options};

use crate::args::{ensure, Failure};
use crate::timeline::Timeline;

/// The broker's state: the current pair of each role, and each partition's records.
#[derive(Default)]
struct State {
    pairs: HashMap<Role, FencingToken>,
    producer_ids: i64,
    logs: HashMap<i32, Vec<Record>>,
}

/// A transport to the broker; clones share it.
#[derive(Clone, Default)]
pub struct HashMapTransport(Arc<Mutex<State>>);

impl HashMapTransport {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, partition: i32, key: Vec<u8>, value: Option<Vec<u8>>) -> i64 {
        let mut state = self.state();
        let log = state.logs.entry(partition).or_default();
        let offset = log.len() as i64;
        log.push(Record { offset, key, value });
        offset
    }
}

// Every call answers before it returns (a `HashMap` never waits), after the lock is let go: a
// `done` may call again. A networked transport calls `done` from the thread with the answer.
impl Coordinator for HashMapTransport {
    /// Bumps the role's epoch (a first acquire gets a fresh producer id): from now on the
    /// previous pair is fenced.
    fn start_acquire_epoch(&self, role: Role, _: Duration, _: i64, done: AcquireDone) {
        let mut state = self.state();
        state.producer_ids += 1;
        let next = match state.pairs.get(&role) {
            Some(pair) => FencingToken::new(pair.producer_id, pair.producer_epoch + 1),
            None => FencingToken::new(state.producer_ids, 0),
        };
        state.pairs.insert(role, next);
        drop(state);
        done(Ok(next));
    }

    fn start_describe_epochs(&self, roles: Vec<Role>, _: i64, done: DescribeDone) {
        let state = self.state();
        let status = |role| match state.pairs.get(role) {
            Some(&token) => LeadershipStatus {
                token,
                ..LeadershipStatus::NOT_FOUND
            },
            None => LeadershipStatus::NOT_FOUND,
        };
        let answers = roles.iter().map(|role| Ok(status(role))).collect();
        drop(state);
        done(answers);
    }
}

impl StateReader for HashMapTransport {
    /// The state topic's partition count.
    fn partitions(&self) -> i32 {
        4
    }

    /// Everything from `from`, at once (this transport does not long-poll).
    fn start_read_partition(&self, p: i32, from: i64, _: Duration, _: i64, done: ReadDone) {
        let state = self.state();
        let log = state.logs.get(&p).map_or(&[][..], Vec::as_slice);
        let records = log.iter().filter(|r| r.offset >= from).cloned().collect();
        let end_offset = log.len() as i64;
        drop(state);
        done(Ok(ReadBatch {
            records,
            end_offset,
            stalled: false,
            // Nothing here is transactional: the log's end is its high watermark.
            high_watermark: Some(end_offset),
        }));
    }
}

impl Registrar for HashMapTransport {
    fn append_all(&self, appends: Vec<Append>, _: i64) {
        for a in appends {
            (a.done)(Ok(self.push(a.partition, a.key, a.value)));
        }
    }
}

impl LeaseWriter for HashMapTransport {
    /// Writes only while `token` is its role's current pair (a producer id belongs to one
    /// role): the fence that makes a deposed leader harmless.
    fn start_write_lease(
        &self,
        p: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
        _: i64,
        done: LeaseDone,
    ) {
        let current = self.state().pairs.values().any(|pair| *pair == token);
        done(match current {
            true => Ok(self.push(p, key, value)),
            false => Err(TransportError::fenced("a superseded pair")),
        });
    }
}

/// Runs the story; `Err` says what did not happen.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    if !args.is_empty() {
        return Err(Failure::Usage(
            "usage: cargo run --example custom_transport".into(),
        ));
    }
    let failed = |e: kafka_coordination::Error| Failure::Failed(e.to_string());
    let clock = ManualClock::default();
    let settle = |d| clock.advance_and_settle(d).map_err(|e| e.to_string());
    let transport = HashMapTransport::default();
    let start = |member| {
        let options = Options::new().clock(clock.clone());
        blocking::start(transport.clone(), "orders", member, options).map_err(failed)
    };
    let a = start("a")?;
    settle(Duration::ZERO)?;
    let a = a.elected_blocking().map_err(failed)?;
    out.event("a", format!("elected with token {}", a.token()));
    let b = start("b")?;
    settle(Duration::ZERO)?;
    a.resign_blocking().map_err(failed)?;
    out.event("a", "resigned");
    for _ in 0..20 {
        if b.snapshot().token.is_some() {
            break;
        }
        settle(Duration::from_secs(5))?;
    }
    let b = b.elected_blocking().map_err(failed)?;
    out.event("b", format!("elected with token {}", b.token()));
    ensure(b.token() != a.token(), || "b got a's pair".into())?;
    let stale = transport.write_lease(0, b"k", Some(b"v"), a.token());
    ensure(stale.is_err_and(|e| e.is_fenced()), || "not fenced".into())?;
    out.event("a", "a lease write with the old pair is fenced");
    b.resign_blocking().map_err(failed)?;
    out.note("custom_transport: OK");
    Ok(())
}
