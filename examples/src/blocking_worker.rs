//! `cargo run --example blocking_worker`: a worker thread that works only while it leads.
//!
//! Two workers compete for one role on the embedded broker, each on its own thread with the
//! blocking API. The leader writes numbered work items to a downstream [`FencedStore`], passing
//! its term number (and token) with each write; the store remembers the newest term it has seen
//! and refuses older ones. Then:
//!
//! 1. `worker-a` leads and writes items; `worker-b` waits;
//! 2. `worker-a`'s link to the broker is cut (a network partition: the process lives on and
//!    still reaches the store). It cannot renew and does not know it has lost the role, so it
//!    keeps writing;
//! 3. the lease runs out and `worker-b` takes over with a new token and a later term: from its
//!    first write on, the store refuses `worker-a`'s items;
//! 4. `worker-a`'s link returns: its renewal is fenced, `done` fires, and the worker stops;
//! 5. `worker-b` is told to stop and resigns.
//!
//! The shape of the worker ([`work_while_leading`]) is the one to copy: wait for the turn, do
//! the work while [`is_done`] is false, pass [`term`] (or [`token`]) to every write, and wait on
//! [`done_blocking_timeout`] between items, so that the end of the term stops the work at once.
//! (The worker makes its two waits through a [`Pacer`]: on the system clock they are exactly
//! [`Candidacy::elected_blocking`] and [`done_blocking_timeout`].)
//!
//! With `--virtual-time` the same story runs on a
//! [`ManualClock`](kafka_coordination::ManualClock) that the scenario moves in steps, and the
//! workers take turns after every step (see [`Time`]): no real time passes, and the run is the
//! same on every machine. The tests run it that way.
//!
//! [`is_done`]: kafka_coordination::leadership::Leadership::is_done
//! [`term`]: kafka_coordination::leadership::Leadership::term
//! [`token`]: kafka_coordination::leadership::Leadership::token
//! [`done_blocking_timeout`]: kafka_coordination::leadership::Leadership::done_blocking_timeout

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use kafka_coordination::blocking;
use kafka_coordination::cuttable_link::Link;
use kafka_coordination::leadership::Candidacy;
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::{Error, FencingToken, Options};

use crate::args::{ensure, parse, Failure};
use crate::time::{Pacer, Time};
use crate::timeline::Timeline;

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example blocking_worker [-- --virtual-time]

Two workers, one role, the embedded broker. Runs for about four seconds.

  --virtual-time   run on a manual clock moved in steps instead of the system clock: the same
                   story in no real time (what the tests run)
  -h, --help       this text";

const ROLE: &str = "invoice-batcher";
const LEASE: Duration = Duration::from_millis(1500);
const RENEW: Duration = Duration::from_millis(300);
const STAGGER: Duration = Duration::from_millis(200);
/// The pause between two work items.
const TICK: Duration = Duration::from_millis(200);
/// The time allowed for any one step of the scenario (real or virtual).
const WITHIN: Duration = Duration::from_secs(10);
/// The clock's step in virtual time: it divides every timing above.
const VIRTUAL_STEP: Duration = Duration::from_millis(100);

/// One unit of work, as the leader wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkItem {
    /// The worker that wrote it.
    pub worker: String,
    /// The worker's counter.
    pub seq: u64,
    /// The term number of the writer's leadership
    /// ([`Leadership::term`](kafka_coordination::leadership::Leadership::term)).
    pub term: i64,
    /// The fencing token of the writer's leadership.
    pub token: FencingToken,
}

/// A downstream system guarded as docs/guide/guarantees.md recommends (a database row, an
/// object store, another service). Two checks, each with its own job:
///
/// * **the term**: it keeps the newest term it has seen and refuses a write that carries an
///   older one. Term numbers, not tokens, are what it compares: a term is the offset of the
///   term's first lease record and strictly grows per role, while tokens have no order (Kafka's
///   producer ids do not grow cluster-wide);
/// * **the current pair** (optional, [`FencedStore::checking`]): one DescribeTransactions per
///   write asks the coordinator whether the writer's token is still `authoritative`. This
///   refuses a deposed leader at once, even before its successor has written to the store.
///
/// Either makes a deposed leader harmless before it learns it was deposed.
#[derive(Default)]
pub struct FencedStore {
    state: Mutex<StoreState>,
    current: Option<CurrentCheck>,
}

/// Asks whether a token is the role's current pair.
type CurrentCheck = Box<dyn Fn(FencingToken) -> bool + Send + Sync>;

impl std::fmt::Debug for FencedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedStore")
            .field("checks_current_pair", &self.current.is_some())
            .finish_non_exhaustive()
    }
}

/// Why the store refused a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// A newer term wrote before (the term carried).
    OlderTerm(i64),
    /// The coordinator's current pair is not the writer's token.
    NotCurrent(FencingToken),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::OlderTerm(newer) => write!(f, "it has seen the newer term {newer}"),
            Refused::NotCurrent(token) => {
                write!(
                    f,
                    "{token} is not the role's current pair (authoritative = false)"
                )
            }
        }
    }
}

#[derive(Debug, Default)]
struct StoreState {
    newest: Option<i64>,
    accepted: Vec<WorkItem>,
    refused: Vec<WorkItem>,
}

impl FencedStore {
    /// A store that also asks, for every write, whether the writer's token is the role's
    /// current pair (`describe_leadership(..).authoritative(&token)` in `is_current`).
    pub fn checking(is_current: impl Fn(FencingToken) -> bool + Send + Sync + 'static) -> Self {
        FencedStore {
            state: Mutex::default(),
            current: Some(Box::new(is_current)),
        }
    }

    /// Stores `item` unless a newer term was seen before, or (when checking) its token is not
    /// the role's current pair.
    pub fn write(&self, item: WorkItem) -> Result<(), Refused> {
        let current = self.current.as_ref().is_none_or(|c| c(item.token));
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let refused = match s.newest {
            Some(newest) if item.term < newest => Some(Refused::OlderTerm(newest)),
            _ if !current => Some(Refused::NotCurrent(item.token)),
            _ => None,
        };
        match refused {
            Some(why) => {
                s.refused.push(item);
                Err(why)
            }
            None => {
                s.newest = Some(item.term);
                s.accepted.push(item);
                Ok(())
            }
        }
    }

    /// The items stored, in write order.
    pub fn accepted(&self) -> Vec<WorkItem> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .accepted
            .clone()
    }

    /// The items refused, in write order.
    pub fn refused(&self) -> Vec<WorkItem> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refused
            .clone()
    }
}

/// What a worker tells the scenario.
#[derive(Clone, Debug)]
pub enum Report {
    /// The worker leads with `token` in term `term` and starts working.
    Elected {
        /// The worker.
        worker: String,
        /// Its token.
        token: FencingToken,
        /// Its term number.
        term: i64,
    },
    /// The worker stopped working.
    Stopped {
        /// The worker.
        worker: String,
        /// How many items it wrote (accepted or not).
        items: u64,
        /// Why its term ended: `None` for a clean resign.
        ended: Option<Error>,
    },
}

/// The worker: waits for its turn, then writes one work item every `tick` while its term lasts,
/// each carrying the term's number and token. Stops when the term ends (fenced: `done` fired)
/// or when `stop` is set (then it resigns, handing the role over at once). It makes its waits
/// through `pacer`.
#[allow(clippy::too_many_arguments)]
pub fn work_while_leading(
    name: &str,
    candidacy: Candidacy,
    store: &FencedStore,
    stop: &AtomicBool,
    tick: Duration,
    pacer: &Pacer,
    out: &Timeline,
    reports: &Sender<Report>,
) {
    out.event(name, "registers and waits for its turn");
    let leadership = match pacer.wait_elected(candidacy) {
        Ok(leadership) => leadership,
        Err(e) => {
            out.event(name, format!("stopped before it ever led: {e}"));
            let _ = reports.send(Report::Stopped {
                worker: name.to_owned(),
                items: 0,
                ended: Some(e),
            });
            return;
        }
    };
    let (token, term) = (leadership.token(), leadership.term());
    out.event(
        name,
        format!("elected with token {token}, term {term}: starts working"),
    );
    let _ = reports.send(Report::Elected {
        worker: name.to_owned(),
        token,
        term,
    });
    let mut seq = 0;
    while !leadership.is_done() && !stop.load(Ordering::SeqCst) {
        seq += 1;
        let item = WorkItem {
            worker: name.to_owned(),
            seq,
            term,
            token,
        };
        match store.write(item) {
            Ok(()) => out.event(name, format!("work item {seq} written (term {term})")),
            Err(why) => out.event(name, format!("work item {seq} REFUSED by the store: {why}")),
        }
        // Sleeps between items, but wakes the moment the term ends.
        if pacer.done_blocking_timeout(&leadership, tick) {
            break;
        }
    }
    let ended = if leadership.is_done() {
        let err = leadership.err();
        let why = err
            .as_ref()
            .map_or("the term ended".to_owned(), |e| e.to_string());
        out.event(name, format!("done fired ({why}): stops after {seq} items"));
        err
    } else {
        let err = leadership.resign_blocking().err();
        out.event(name, format!("told to stop: resigned after {seq} items"));
        err
    };
    let _ = reports.send(Report::Stopped {
        worker: name.to_owned(),
        items: seq,
        ended,
    });
}

/// Runs the example with command-line `args`, printing to `out`.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    let p = parse(args, &[], &["--virtual-time"], USAGE)?;
    if p.help() {
        out.note(USAGE);
        return Ok(());
    }
    let time = if p.switch("--virtual-time") {
        Time::virtual_time(VIRTUAL_STEP)
    } else {
        Time::real()
    };
    run_on(&time, &time.timeline(out))
}

fn run_on(time: &Time, out: &Timeline) -> Result<(), Failure> {
    let broker = MemoryBroker::new(16, time.clock());
    // The store asks the coordinator (through its own connection) whether each writer is the
    // current one, besides comparing terms.
    let observer = broker.transport("store");
    let store = Arc::new(FencedStore::checking(move |token| {
        kafka_coordination::describe::describe_leadership(&observer, ROLE)
            .is_ok_and(|status| status.authoritative(&token))
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let (reports, inbox) = channel();
    let options = time.options(
        Options::new()
            .lease_duration(LEASE)
            .renew_interval(RENEW)
            .challenge_stagger(STAGGER),
    );
    out.note(format!(
        "blocking_worker: two workers of role `{ROLE}`; lease {} ms, renewed every {} ms; \
         one work item every {} ms while leading; {}",
        LEASE.as_millis(),
        RENEW.as_millis(),
        TICK.as_millis(),
        time.stamps()
    ));

    let mut threads = Vec::new();
    let finished = Arc::new(AtomicUsize::new(0));
    let mut cancels = Vec::new();
    let mut links = Vec::new();
    let mut a_term = None;
    for name in ["worker-a", "worker-b"] {
        let link = Link::new(broker.transport(name));
        let candidacy = blocking::start(link.clone(), ROLE, name, options.clone())
            .map_err(|e| Failure::Failed(format!("{name} could not start: {e}")))?;
        cancels.push(candidacy.cancel_handle());
        links.push(link);
        let pacer = time.pacer();
        let (store, stop, out, reports, finished) = (
            store.clone(),
            stop.clone(),
            out.clone(),
            reports.clone(),
            finished.clone(),
        );
        threads.push(thread::spawn(move || {
            work_while_leading(name, candidacy, &store, &stop, TICK, &pacer, &out, &reports);
            // Counted while the pacer lives: in virtual time, within the thread's last turn.
            finished.fetch_add(1, Ordering::SeqCst);
            drop(pacer);
        }));
        if name == "worker-a" {
            // Let worker-a win the first election, so the story is the same on every run.
            a_term = Some(expect_elected(time, &inbox, "worker-a")?);
        }
    }
    let result = match a_term {
        Some(a) => scenario(time, &inbox, &links[0], a, &store, &stop, out),
        None => Err(Failure::Failed("worker-a was not elected".to_owned())),
    };
    // Whatever happened, let every thread finish.
    stop.store(true, Ordering::SeqCst);
    for c in &cancels {
        c.cancel();
    }
    for l in &links {
        l.restore();
    }
    let all = threads.len();
    let ended = time.wait_for("the workers to finish", WITHIN, || {
        Ok((finished.load(Ordering::SeqCst) == all).then_some(()))
    });
    if ended.is_ok() {
        for t in threads {
            let _ = t.join();
        }
    }
    result.and(ended)
}

fn scenario(
    time: &Time,
    inbox: &Receiver<Report>,
    link_a: &Link<MemoryTransport>,
    (a_token, a_term): (FencingToken, i64),
    store: &FencedStore,
    stop: &AtomicBool,
    out: &Timeline,
) -> Result<(), Failure> {
    time.sleep(Duration::from_millis(800))?;
    link_a.cut();
    out.event(
        "worker-a",
        "link to the broker CUT: it cannot renew, does not know it, and keeps working",
    );
    let (b_token, b_term) = expect_elected(time, inbox, "worker-b")?;
    ensure(b_token != a_token && b_term > a_term, || {
        format!(
            "worker-b leads with {b_token} in term {b_term}, worker-a with {a_token} in term {a_term}"
        )
    })?;
    // Wait until the store has refused one of the zombie's items, then heal the partition.
    time.wait_for("the store to refuse an item of worker-a", WITHIN, || {
        let refused = store.refused().iter().any(|i| i.worker == "worker-a");
        Ok(refused.then_some(()))
    })?;
    link_a.restore();
    out.event(
        "worker-a",
        "link restored: its next renewal reaches the broker",
    );
    match expect_report(time, inbox)? {
        Report::Stopped {
            worker,
            ended: Some(Error::Fenced { token }),
            ..
        } if worker == "worker-a" && token == a_token => {}
        other => {
            return Err(Failure::Failed(format!(
                "expected worker-a to stop fenced, got {other:?}"
            )))
        }
    }
    time.sleep(Duration::from_millis(400))?;
    out.event("main", "asks the workers to stop");
    stop.store(true, Ordering::SeqCst);
    match expect_report(time, inbox)? {
        Report::Stopped {
            worker,
            ended: None,
            ..
        } if worker == "worker-b" => {}
        other => {
            return Err(Failure::Failed(format!(
                "expected worker-b to resign cleanly, got {other:?}"
            )))
        }
    }

    // The store's view: terms never went backwards, and nothing of worker-a's was accepted
    // once worker-b had written.
    let accepted = store.accepted();
    let refused = store.refused();
    ensure(accepted.windows(2).all(|w| w[0].term <= w[1].term), || {
        format!("accepted terms went backwards: {accepted:?}")
    })?;
    let first_b = accepted.iter().position(|i| i.worker == "worker-b");
    ensure(first_b.is_some(), || "worker-b wrote nothing".to_owned())?;
    let late_a = accepted
        .iter()
        .skip(first_b.unwrap_or(0))
        .any(|i| i.worker == "worker-a");
    ensure(!late_a, || {
        "an item of worker-a was accepted after worker-b took over".to_owned()
    })?;
    let count = |w: &str| accepted.iter().filter(|i| i.worker == w).count();
    out.note(format!(
        "blocking_worker: OK. The store accepted {} of worker-a (term {a_term}) and {} of \
         worker-b (term {b_term}), and refused {} of the deposed worker-a",
        items(count("worker-a")),
        items(count("worker-b")),
        items(refused.len())
    ));
    Ok(())
}

/// `1 item`, `2 items`.
fn items(n: usize) -> String {
    format!("{n} item{}", if n == 1 { "" } else { "s" })
}

/// The next report of a worker, waiting at most [`WITHIN`].
fn expect_report(time: &Time, inbox: &Receiver<Report>) -> Result<Report, Failure> {
    time.wait_for("a report of a worker", WITHIN, || Ok(inbox.try_recv().ok()))
}

/// Waits for `who`'s report that it was elected; returns its token and term.
fn expect_elected(
    time: &Time,
    inbox: &Receiver<Report>,
    who: &str,
) -> Result<(FencingToken, i64), Failure> {
    match expect_report(time, inbox)? {
        Report::Elected {
            worker,
            token,
            term,
        } if worker == who => Ok((token, term)),
        other => Err(Failure::Failed(format!(
            "expected {who} to be elected, got {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_refuses_older_terms() {
        let store = FencedStore::default();
        let item = |seq, term| WorkItem {
            worker: "w".to_owned(),
            seq,
            term,
            token: FencingToken::new(7, 0),
        };
        assert!(store.write(item(1, 3)).is_ok());
        assert!(store.write(item(2, 9)).is_ok());
        assert_eq!(store.write(item(3, 3)), Err(Refused::OlderTerm(9)));
        assert_eq!(store.accepted().len(), 2);
        assert_eq!(store.refused().len(), 1);
    }

    #[test]
    fn a_checking_store_refuses_a_writer_that_is_not_current() {
        let current = FencingToken::new(7, 1);
        let store = FencedStore::checking(move |t| t == current);
        let item = |term, token| WorkItem {
            worker: "w".to_owned(),
            seq: 1,
            term,
            token,
        };
        assert!(store.write(item(3, current)).is_ok());
        // Same term as the newest (so the term check alone would pass), but superseded.
        let stale = FencingToken::new(7, 0);
        assert_eq!(store.write(item(3, stale)), Err(Refused::NotCurrent(stale)));
    }
}
