//! `cargo run --example blocking_worker`: a worker thread that works only while it leads.
//!
//! Two workers compete for one role on the embedded broker, each on its own thread with the
//! blocking API. The leader writes numbered work items to a downstream [`FencedStore`], passing
//! its fencing token with each write; the store remembers the newest token it has seen and
//! refuses older ones. Then:
//!
//! 1. `worker-a` leads and writes items; `worker-b` waits;
//! 2. `worker-a`'s link to the broker is cut (a network partition: the process lives on and
//!    still reaches the store). It cannot renew and does not know it has lost the role, so it
//!    keeps writing;
//! 3. the lease runs out and `worker-b` takes over with a newer token: from its first write on,
//!    the store refuses `worker-a`'s items;
//! 4. `worker-a`'s link returns: its renewal is fenced, `done` fires, and the worker stops;
//! 5. `worker-b` is told to stop and resigns.
//!
//! The shape of the worker ([`work_while_leading`]) is the one to copy: wait for the turn, do
//! the work while [`is_done`] is false, pass [`token`] to every write, and wait on
//! [`wait_done_timeout`] between items, so that the end of the term stops the work at once.
//!
//! [`is_done`]: kafka_coordination::Leadership::is_done
//! [`token`]: kafka_coordination::Leadership::token
//! [`wait_done_timeout`]: kafka_coordination::Leadership::wait_done_timeout

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use kafka_coordination::blocking;
use kafka_coordination::memory::MemoryBroker;
use kafka_coordination::{Candidacy, Error, FencingToken, Options, SystemClock};

use crate::args::{ensure, parse, Failure};
use crate::link::Link;
use crate::timeline::Timeline;

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example blocking_worker

Two workers, one role, the embedded broker; no options. Runs for about four seconds.";

const ROLE: &str = "invoice-batcher";
const LEASE: Duration = Duration::from_millis(1500);
const RENEW: Duration = Duration::from_millis(300);
const STAGGER: Duration = Duration::from_millis(200);
/// The pause between two work items.
const TICK: Duration = Duration::from_millis(200);
/// Real time allowed for any one step of the scenario.
const STEP: Duration = Duration::from_secs(10);

/// One unit of work, as the leader wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkItem {
    /// The worker that wrote it.
    pub worker: String,
    /// The worker's counter.
    pub seq: u64,
    /// The fencing token the write carried.
    pub token: FencingToken,
}

/// A downstream system guarded by fencing tokens (a database row, an object store, another
/// service): it keeps the newest token it has seen and refuses a write that carries an older
/// one. This is what makes a deposed leader harmless even before it learns it was deposed.
#[derive(Debug, Default)]
pub struct FencedStore {
    state: Mutex<StoreState>,
}

#[derive(Debug, Default)]
struct StoreState {
    newest: Option<FencingToken>,
    accepted: Vec<WorkItem>,
    refused: Vec<WorkItem>,
}

impl FencedStore {
    /// Stores `item` unless a newer token was seen before; `Err` carries that newer token.
    pub fn write(&self, item: WorkItem) -> Result<(), FencingToken> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match s.newest {
            Some(newest) if item.token < newest => {
                s.refused.push(item);
                Err(newest)
            }
            _ => {
                s.newest = Some(item.token);
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
    /// The worker leads with `token` and starts working.
    Elected {
        /// The worker.
        worker: String,
        /// Its token.
        token: FencingToken,
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
/// each carrying the term's token. Stops when the term ends (fenced: `done` fired) or when
/// `stop` is set (then it resigns, handing the role over at once).
pub fn work_while_leading(
    name: &str,
    candidacy: Candidacy,
    store: &FencedStore,
    stop: &AtomicBool,
    tick: Duration,
    out: &Timeline,
    reports: &Sender<Report>,
) {
    out.event(name, "registers and waits for its turn");
    let leadership = match candidacy.wait() {
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
    let token = leadership.token();
    out.event(name, format!("elected with token {token}: starts working"));
    let _ = reports.send(Report::Elected {
        worker: name.to_owned(),
        token,
    });
    let mut seq = 0;
    while !leadership.is_done() && !stop.load(Ordering::SeqCst) {
        seq += 1;
        let item = WorkItem {
            worker: name.to_owned(),
            seq,
            token,
        };
        match store.write(item) {
            Ok(()) => out.event(name, format!("work item {seq} written (token {token})")),
            Err(newer) => out.event(
                name,
                format!(
                    "work item {seq} REFUSED by the store: it has seen the newer token {newer}"
                ),
            ),
        }
        // Sleeps between items, but wakes the moment the term ends.
        if leadership.wait_done_timeout(tick) {
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
        let err = leadership.resign_blocking();
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
    if parse(args, &[], &[], USAGE)?.help() {
        out.note(USAGE);
        return Ok(());
    }
    let broker = MemoryBroker::new(16, Arc::new(SystemClock));
    let store = Arc::new(FencedStore::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (reports, inbox) = channel();
    let options = Options::new()
        .lease_duration(LEASE)
        .renew_interval(RENEW)
        .challenge_stagger(STAGGER);
    out.note(format!(
        "blocking_worker: two workers of role `{ROLE}`; lease {} ms, renewed every {} ms; \
         one work item every {} ms while leading",
        LEASE.as_millis(),
        RENEW.as_millis(),
        TICK.as_millis()
    ));

    let mut threads = Vec::new();
    let mut cancels = Vec::new();
    let mut links = Vec::new();
    let mut a_token = None;
    for name in ["worker-a", "worker-b"] {
        let link = Link::new(broker.transport(name));
        let candidacy = blocking::start(link.clone(), ROLE, name, options.clone())
            .map_err(|e| Failure::Failed(format!("{name} could not start: {e}")))?;
        cancels.push(candidacy.cancel_handle());
        links.push(link);
        let (store, stop, out, reports) =
            (store.clone(), stop.clone(), out.clone(), reports.clone());
        threads.push(thread::spawn(move || {
            work_while_leading(name, candidacy, &store, &stop, TICK, &out, &reports);
        }));
        if name == "worker-a" {
            // Let worker-a win the first election, so the story is the same on every run.
            a_token = Some(expect_elected(&inbox, "worker-a")?);
        }
    }
    let result = match a_token {
        Some(a_token) => scenario(&inbox, &links[0], a_token, &store, &stop, out),
        None => Err(Failure::Failed("worker-a was not elected".to_owned())),
    };
    // Whatever happened, let every thread finish.
    stop.store(true, Ordering::SeqCst);
    for c in &cancels {
        c.cancel();
    }
    for t in threads {
        let _ = t.join();
    }
    result
}

fn scenario(
    inbox: &Receiver<Report>,
    link_a: &Link<kafka_coordination::memory::MemoryTransport>,
    a_token: FencingToken,
    store: &FencedStore,
    stop: &AtomicBool,
    out: &Timeline,
) -> Result<(), Failure> {
    thread::sleep(Duration::from_millis(800));
    link_a.cut();
    out.event(
        "worker-a",
        "link to the broker CUT: it cannot renew, does not know it, and keeps working",
    );
    let b_token = expect_elected(inbox, "worker-b")?;
    ensure(b_token > a_token, || {
        format!("worker-b's token {b_token} is not newer than worker-a's {a_token}")
    })?;
    // Wait until the store has refused one of the zombie's items, then heal the partition.
    wait_until(|| store.refused().iter().any(|i| i.worker == "worker-a"))
        .map_err(|()| Failure::Failed("the store never refused worker-a's items".to_owned()))?;
    link_a.restore();
    out.event(
        "worker-a",
        "link restored: its next renewal reaches the broker",
    );
    match expect_report(inbox)? {
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
    thread::sleep(Duration::from_millis(400));
    out.event("main", "asks the workers to stop");
    stop.store(true, Ordering::SeqCst);
    match expect_report(inbox)? {
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

    // The store's view: tokens never went backwards, and nothing of worker-a's was accepted
    // once worker-b had written.
    let accepted = store.accepted();
    let refused = store.refused();
    ensure(
        accepted.windows(2).all(|w| w[0].token <= w[1].token),
        || format!("accepted tokens went backwards: {accepted:?}"),
    )?;
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
        "blocking_worker: OK. The store accepted {} of worker-a (token {a_token}) and {} of \
         worker-b (token {b_token}), and refused {} of the deposed worker-a",
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

fn expect_report(inbox: &Receiver<Report>) -> Result<Report, Failure> {
    inbox
        .recv_timeout(STEP)
        .map_err(|_| Failure::Failed(format!("no worker reported within {STEP:?}")))
}

fn expect_elected(inbox: &Receiver<Report>, who: &str) -> Result<FencingToken, Failure> {
    match expect_report(inbox)? {
        Report::Elected { worker, token } if worker == who => Ok(token),
        other => Err(Failure::Failed(format!(
            "expected {who} to be elected, got {other:?}"
        ))),
    }
}

/// Polls `ready` every 5 ms for at most [`STEP`].
fn wait_until(mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let deadline = std::time::Instant::now() + STEP;
    while !ready() {
        if std::time::Instant::now() >= deadline {
            return Err(());
        }
        thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_refuses_older_tokens() {
        let store = FencedStore::default();
        let item = |seq, epoch| WorkItem {
            worker: "w".to_owned(),
            seq,
            token: FencingToken::new(7, epoch),
        };
        assert!(store.write(item(1, 1)).is_ok());
        assert!(store.write(item(2, 2)).is_ok());
        assert_eq!(store.write(item(3, 1)), Err(FencingToken::new(7, 2)));
        assert_eq!(store.accepted().len(), 2);
        assert_eq!(store.refused().len(), 1);
    }
}
