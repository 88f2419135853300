//! `cargo run --example custom_event_loop`: the sans-IO [`Candidate`] driven by hand.
//!
//! No driver, no thread: one loop owns two candidates (`a` and `b`) of one role and does all
//! their I/O itself, calling the transport traits of a [`MemoryTransport`] directly. This is the
//! contract every driver of the library follows, and what an application with its own event
//! loop (an actor system, a simulation, an embedded runtime) implements:
//!
//! 1. **Drain** [`Candidate::poll_command`] until `None`. Execute I/O commands (at most one is
//!    outstanding per candidate) and feed the outcome back with [`Candidate::handle`]; act on the
//!    notifications `Elected`, `Deposed` and `Ended`.
//! 2. A `ReadPartition` with `wait_until` may be held back until records arrive or that instant
//!    comes (a long poll). This loop keeps such reads **parked** and answers them when the other
//!    candidate writes, which is how a standby hears of a resign at once.
//! 3. When nothing is left to do, **sleep** until the earliest [`Candidate::poll_timeout`] (or
//!    parked read), then feed [`Event::Tick`]. An early or extra tick is harmless.
//!
//! The story: both register; `a` is elected and renews; at +2.5 s it resigns (it feeds
//! [`Event::Resign`]): its lease is cleared and its registration withdrawn, `b`'s parked read
//! returns those records, and `b` takes over at once instead of waiting for `a`'s lease deadline.
//! Then `b` resigns too and both candidates end.
//!
//! By default time is virtual: the loop "sleeps" by moving a [`ManualClock`], so the whole
//! story takes milliseconds. `--real-time` runs the same loop on the system clock with real
//! sleeps (about four seconds).

use std::sync::Arc;
use std::time::Duration;

use kafka_coordination::core::machine::{Candidate, Command, EndReason, Event};
use kafka_coordination::core::record::{Lease, MemberId, Role};
use kafka_coordination::core::UnixMillis;
use kafka_coordination::error::TransportError;
use kafka_coordination::memory::{MemoryBroker, MemoryTransport};
use kafka_coordination::transport::Wait;
use kafka_coordination::{Clock, FencingToken, ManualClock, SystemClock, Timing};

use crate::args::{ensure, parse, Failure};
use crate::timeline::{offset, Timeline};

/// The command-line help.
pub const USAGE: &str = "\
usage: cargo run --example custom_event_loop [-- --real-time]

  --real-time   sleep for real on the system clock instead of moving a manual clock
  -h, --help    this text";

const ROLE: &str = "ledger-compactor";
const LEASE: Duration = Duration::from_millis(3000);
const RENEW: Duration = Duration::from_millis(1000);
const STAGGER: Duration = Duration::from_millis(500);
/// When `a` resigns, from the start.
const A_RESIGNS_AT: i64 = 2500;
/// How long `b` leads before it resigns.
const B_LEADS_FOR: i64 = 1500;

/// The loop's sense of time: a manual clock it moves, or the system clock and real sleeps.
enum Time {
    Virtual(ManualClock),
    Real(SystemClock),
}

impl Time {
    fn clock(&self) -> Arc<dyn Clock> {
        match self {
            Time::Virtual(c) => Arc::new(c.clone()),
            Time::Real(c) => Arc::new(*c),
        }
    }

    fn now(&self) -> UnixMillis {
        match self {
            Time::Virtual(c) => c.now(),
            Time::Real(c) => c.now(),
        }
    }

    fn sleep_until(&self, t: UnixMillis) {
        let now = self.now();
        if t <= now {
            return;
        }
        match self {
            Time::Virtual(c) => c.set(t),
            Time::Real(_) => std::thread::sleep(t.since(now)),
        }
    }
}

/// A read the candidate allowed to wait: the loop answers it when records arrive or at `until`.
#[derive(Clone, Copy, Debug)]
struct Parked {
    partition: i32,
    from_offset: i64,
    until: UnixMillis,
}

/// One candidate with its own transport (its own producer session, as a real member has).
struct Node {
    name: &'static str,
    transport: MemoryTransport,
    candidate: Candidate,
    parked: Option<Parked>,
    /// Its token, term number and when it was elected.
    elected: Option<(FencingToken, i64, UnixMillis)>,
    last_deadline: Option<UnixMillis>,
    resigned: bool,
}

/// Prints events with the time since the start.
struct Printer<'a> {
    out: &'a Timeline,
    start: UnixMillis,
}

impl Printer<'_> {
    fn at(&self, t: UnixMillis) -> String {
        offset(t.0 - self.start.0)
    }

    fn event(&self, now: UnixMillis, who: &str, what: impl std::fmt::Display) {
        let ms = u64::try_from(now.0 - self.start.0).unwrap_or(0);
        self.out.event_at(Duration::from_millis(ms), who, what);
    }
}

/// Runs the example with command-line `args`, printing to `out`.
pub fn run(args: &[String], out: &Timeline) -> Result<(), Failure> {
    let p = parse(args, &[], &["--real-time"], USAGE)?;
    if p.help() {
        out.note(USAGE);
        return Ok(());
    }
    let time = if p.switch("--real-time") {
        Time::Real(SystemClock)
    } else {
        Time::Virtual(ManualClock::default())
    };
    run_on(time, out)
}

fn run_on(time: Time, out: &Timeline) -> Result<(), Failure> {
    let broker = MemoryBroker::new(16, time.clock());
    let timing = Timing {
        partitions: 16,
        lease_duration: LEASE,
        renew_interval: RENEW,
        challenge_stagger: STAGGER,
    };
    let start = time.now();
    let p = Printer { out, start };
    out.note(format!(
        "custom_event_loop: two hand-driven Candidates of role `{ROLE}` on one loop, {} time; \
         lease {} ms, renew {} ms, stagger {} ms",
        match time {
            Time::Virtual(_) => "virtual",
            Time::Real(_) => "real",
        },
        LEASE.as_millis(),
        RENEW.as_millis(),
        STAGGER.as_millis()
    ));
    let role = Role::new(ROLE).map_err(|e| Failure::Failed(e.to_string()))?;
    let mut nodes = Vec::new();
    for name in ["a", "b"] {
        let member = MemberId::new(name).map_err(|e| Failure::Failed(e.to_string()))?;
        let candidate = Candidate::new(role.clone(), member, timing, start)
            .map_err(|e| Failure::Failed(format!("invalid timing: {e}")))?;
        nodes.push(Node {
            name,
            transport: broker.transport(name),
            candidate,
            parked: None,
            elected: None,
            last_deadline: None,
            resigned: false,
        });
    }

    let mut rounds = 0u32;
    loop {
        let now = time.now();
        // The application's own decisions: when to give the role up.
        for n in &mut nodes {
            if let Some(at) = resign_instant(n, start) {
                if now >= at {
                    n.resigned = true;
                    p.event(
                        now,
                        n.name,
                        "⇐ Event::Resign (the application gives the role up)",
                    );
                    n.candidate
                        .handle(now, Event::Resign)
                        .map_err(|e| Failure::Failed(format!("{}: {e}", n.name)))?;
                }
            }
        }
        // Round robin, one I/O command per candidate per turn, until nothing moves.
        loop {
            let mut busy = false;
            for n in &mut nodes {
                busy |= step(n, now, &p)?;
            }
            rounds += 1;
            ensure(rounds < 10_000, || "the loop does not settle".to_owned())?;
            if !busy {
                break;
            }
        }
        if nodes.iter().all(|n| n.candidate.is_done()) {
            break;
        }
        // Sleep until the earliest instant at which anything is due.
        let mut due: Vec<(UnixMillis, String)> = Vec::new();
        for n in &nodes {
            if let Some(t) = n.candidate.poll_timeout() {
                due.push((t, format!("{}'s poll_timeout", n.name)));
            }
            if let Some(pk) = n.parked {
                due.push((pk.until, format!("{}'s parked read", n.name)));
            }
            if let Some(t) = resign_instant(n, start) {
                due.push((t, format!("{}'s planned resign", n.name)));
            }
        }
        let Some(wake) = due.iter().map(|(t, _)| *t).min() else {
            return Err(Failure::Failed(
                "nothing to wait for, yet the candidates have not ended".to_owned(),
            ));
        };
        ensure(wake.0 - start.0 < 60_000, || {
            "the story did not end within a minute".to_owned()
        })?;
        let why: Vec<&str> = due
            .iter()
            .filter(|(t, _)| *t == wake)
            .map(|(_, w)| w.as_str())
            .collect();
        p.event(
            now,
            "loop",
            format!("idle: sleeps until {} ({})", p.at(wake), why.join(", ")),
        );
        time.sleep_until(wake);
        let now = time.now();
        for n in &mut nodes {
            n.candidate
                .handle(now, Event::Tick)
                .map_err(|e| Failure::Failed(format!("{}: {e}", n.name)))?;
        }
    }

    // The checks.
    let (a, b) = (&nodes[0], &nodes[1]);
    let (ta, term_a, a_at) = a
        .elected
        .ok_or_else(|| Failure::Failed("a was never elected".to_owned()))?;
    let (tb, term_b, b_at) = b
        .elected
        .ok_or_else(|| Failure::Failed("b was never elected".to_owned()))?;
    ensure(a_at < b_at && ta != tb && term_a < term_b, || {
        format!(
            "expected a then b: a {ta} (term {term_a}) at {a_at}, b {tb} (term {term_b}) at {b_at}"
        )
    })?;
    let a_deadline = a.last_deadline.unwrap_or(UnixMillis(i64::MAX));
    ensure(b_at < a_deadline, || {
        format!(
            "b took over at {} instead of at once after a's resign (a's lease ran until {})",
            p.at(b_at),
            p.at(a_deadline)
        )
    })?;
    for n in &nodes {
        ensure(
            n.candidate.end_reason() == Some(EndReason::Resigned) && n.candidate.deregistered(),
            || format!("{} ended with {:?}", n.name, n.candidate.end_reason()),
        )?;
    }
    out.note(format!(
        "custom_event_loop: OK. a led with {ta} from {}; b took over with {tb} at {}, {} ms \
         before a's lease would have run out; {rounds} loop turns",
        p.at(a_at),
        p.at(b_at),
        a_deadline.0 - b_at.0
    ));
    Ok(())
}

/// When the application makes `n` resign: `a` at a fixed instant, `b` some time after its
/// election.
fn resign_instant(n: &Node, start: UnixMillis) -> Option<UnixMillis> {
    if n.resigned || !n.candidate.is_leader() {
        return None;
    }
    match n.name {
        "a" => Some(UnixMillis(start.0 + A_RESIGNS_AT)),
        _ => n.elected.map(|(_, _, at)| UnixMillis(at.0 + B_LEADS_FOR)),
    }
}

/// One turn of one candidate: answer its parked read if it is ready, or drain its commands up
/// to and including one I/O command, which is executed and answered. Returns whether anything
/// happened.
fn step(n: &mut Node, now: UnixMillis, p: &Printer<'_>) -> Result<bool, Failure> {
    if let Some(pk) = n.parked {
        let answer = n
            .transport
            .read_partition(pk.partition, pk.from_offset, Duration::ZERO);
        let ready = match &answer {
            Ok(batch) => !batch.records.is_empty() || now >= pk.until,
            Err(_) => true,
        };
        if !ready {
            return Ok(false);
        }
        n.parked = None;
        let event = match answer {
            Ok(batch) => Event::RecordsRead {
                records: batch.records,
                end_offset: batch.end_offset,
                stalled: batch.stalled,
                high_watermark: batch.high_watermark,
            },
            Err(e) => failed(&e)?,
        };
        p.event(
            now,
            n.name,
            format!("  parked read answered  ← {}", describe(&event)),
        );
        feed(n, now, event)?;
        return Ok(true);
    }
    let mut did = false;
    while let Some(cmd) = n.candidate.poll_command() {
        did = true;
        let (what, answer) = match cmd {
            Command::Elected { token, term } => {
                n.elected = Some((token, term, now));
                p.event(
                    now,
                    n.name,
                    format!("⇒ Elected with {token}, term {term}: start the role's work"),
                );
                continue;
            }
            Command::Deposed { token } => {
                p.event(
                    now,
                    n.name,
                    format!("⇒ Deposed: {token} was fenced, stop the work"),
                );
                continue;
            }
            Command::Ended { reason } => {
                p.event(now, n.name, format!("⇒ Ended: {reason}"));
                continue;
            }
            Command::Append {
                partition,
                key,
                value,
            } => {
                let what = if value.is_some() {
                    "Append registration"
                } else {
                    "Append registration tombstone (deregister)"
                };
                let answer = n
                    .transport
                    .append(partition, &key, value.as_deref())
                    .map(|offset| Event::Appended { offset });
                (what.to_owned(), answer)
            }
            Command::ReadPartition {
                partition,
                from_offset,
                wait_until,
            } => {
                let answer = n
                    .transport
                    .read_partition(partition, from_offset, Duration::ZERO);
                let what = format!("ReadPartition from offset {from_offset}");
                match (&answer, wait_until) {
                    (Ok(batch), Some(until)) if batch.records.is_empty() && until > now => {
                        n.parked = Some(Parked {
                            partition,
                            from_offset,
                            until,
                        });
                        p.event(
                            now,
                            n.name,
                            format!(
                                "→ {what}: nothing new yet, parked until {} (a long poll)",
                                p.at(until)
                            ),
                        );
                        return Ok(true);
                    }
                    _ => (
                        what,
                        answer.map(|batch| Event::RecordsRead {
                            records: batch.records,
                            end_offset: batch.end_offset,
                            stalled: batch.stalled,
                            high_watermark: batch.high_watermark,
                        }),
                    ),
                }
            }
            Command::DescribeRole { transactional_id } => (
                "DescribeRole (DescribeTransactions: is a challenge under way?)".to_owned(),
                n.transport
                    .describe_epoch(&transactional_id)
                    .map(|status| Event::Described { status }),
            ),
            Command::AcquireEpoch {
                transactional_id,
                transaction_timeout,
            } => (
                format!(
                    "AcquireEpoch (InitProducerId, timeout {} ms)",
                    transaction_timeout.as_millis()
                ),
                n.transport
                    .acquire_epoch(&transactional_id, transaction_timeout)
                    .map(|token| Event::EpochGranted { token }),
            ),
            Command::WriteLease {
                partition,
                key,
                value,
                token,
            } => {
                let what = match value.as_deref().map(Lease::decode) {
                    Some(Ok(lease)) => {
                        n.last_deadline = Some(lease.deadline);
                        format!("WriteLease until {} with {token}", p.at(lease.deadline))
                    }
                    Some(Err(e)) => format!("WriteLease (undecodable: {e})"),
                    None => format!("WriteLease tombstone (clear the lease) with {token}"),
                };
                let answer = match n
                    .transport
                    .write_lease(partition, &key, value.as_deref(), token)
                {
                    Ok(offset) => Ok(Event::LeaseWritten { offset }),
                    Err(e) if e.is_fenced() => Ok(Event::Fenced),
                    Err(e) => Err(e),
                };
                (what, answer)
            }
        };
        let event = match answer {
            Ok(event) => event,
            Err(e) => failed(&e)?,
        };
        p.event(now, n.name, format!("→ {what}  ← {}", describe(&event)));
        feed(n, now, event)?;
        return Ok(true);
    }
    Ok(did)
}

fn feed(n: &mut Node, now: UnixMillis, event: Event) -> Result<(), Failure> {
    n.candidate
        .handle(now, event)
        .map_err(|e| Failure::Failed(format!("{}: the machine refused an event: {e}", n.name)))
}

/// A retriable failure becomes [`Event::Failed`] (the machine retries with backoff); any other
/// stops the loop.
fn failed(e: &TransportError) -> Result<Event, Failure> {
    if e.is_retriable() {
        Ok(Event::Failed)
    } else {
        Err(Failure::Failed(format!("transport: {e}")))
    }
}

fn describe(event: &Event) -> String {
    match event {
        Event::Appended { offset } => format!("Appended at offset {offset}"),
        Event::RecordsRead {
            records,
            end_offset,
            ..
        } => format!(
            "RecordsRead: {} record{}, up to offset {end_offset}",
            records.len(),
            if records.len() == 1 { "" } else { "s" }
        ),
        Event::EpochGranted { token } => format!("EpochGranted {token}"),
        Event::Described { status } => format!(
            "Described: {} {}",
            status.token,
            status
                .state
                .as_ref()
                .map_or("(never taken)", |s| s.as_str())
        ),
        Event::LeaseWritten { offset } => format!("LeaseWritten at offset {offset}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_story_completes() {
        let out = Timeline::buffer();
        run_on(Time::Virtual(ManualClock::default()), &out).unwrap();
        let text = out.contents();
        assert!(text.contains("⇒ Elected"), "{text}");
        assert!(text.contains("custom_event_loop: OK"), "{text}");
    }
}
