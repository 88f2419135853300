//! The async loop, shared by the tokio, smol and async-std drivers.

use std::sync::Arc;

use std::time::Duration;

use kafka_coordination_core::machine::{Command, Event};
use kafka_coordination_core::time::UnixMillis;

use super::{dispatch, long_poll_over, long_poll_until, slice_wait, Driver, InFlight, Next, Wait};
use crate::error::TransportError;
use crate::leadership::{Candidacy, Error};
use crate::options::Options;
use crate::runtime::Runtime;
use crate::transport::{priority_now, Transport};

/// Starts a candidacy whose driver is a task of runtime `R`.
pub(crate) fn start_on<R: Runtime, T: Transport + Send + Sync + 'static>(
    transport: T,
    role: &str,
    member: &str,
    options: Options,
) -> Result<Candidacy, Error> {
    let (driver, candidacy) = Driver::new(Arc::new(transport), role, member, options)?;
    R::spawn(Box::pin(run_async::<R, T>(driver)));
    Ok(candidacy)
}

/// The async loop: the same steps as the blocking one, waiting with the runtime's timer. Each
/// transport call is started in its completion form and awaited; no thread waits for it (a
/// runtime's blocking pool is not used).
pub(crate) async fn run_async<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    mut d: Driver<T>,
) {
    if let Err(e) = async_loop::<R, T>(&mut d).await {
        d.shared.finish(e);
    }
    // A runtime that shuts down drops this task with the driver: its `Drop` exits the
    // candidacy on the dropping thread (`Driver::exit_now`).
}

async fn async_loop<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
) -> Result<(), Error> {
    use futures_lite::future::or;
    loop {
        d.check_cancel()?;
        match d.drain() {
            Next::Ended => return Ok(()),
            Next::Io(cmd) => {
                let outcome = call::<R, T>(d, cmd).await?;
                d.complete(outcome)?;
            }
            Next::Wait(wake) => {
                let listener = d.shared.doorbell.listen();
                let seen = d.changes();
                if d.cancel_pending() {
                    continue;
                }
                match d.until_wake(wake) {
                    Wait::Due => {}
                    Wait::ClockMoves(now) => {
                        d.set_idle(Some((now, seen)));
                        listener.await;
                    }
                    Wait::For(now, dur) => {
                        d.set_idle(Some((now, seen)));
                        or(listener, R::sleep(dur)).await;
                    }
                }
                d.set_idle(None);
                d.tick()?;
            }
        }
    }
}

/// Runs the machine's I/O command `cmd` in the transport's completion form and awaits its
/// outcome. While it runs, `d.in_flight` holds it, so that a driver dropped with its task (a
/// runtime shutting down) finishes it in its exit: waits for the answer of a call under way,
/// or reads again at once for a read (which changes nothing on the broker).
async fn call<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
    cmd: Command,
) -> Result<Result<Event, TransportError>, Error> {
    if let Command::ReadPartition {
        partition,
        from_offset,
        wait_until,
    } = cmd
    {
        // Kept unstarted: an exit reads again on the spot instead of waiting out a long poll.
        d.in_flight = Some(Arc::new(InFlight::new(cmd, d.clock.now())));
        let outcome = read::<R, T>(d, partition, from_offset, wait_until).await;
        d.in_flight = None;
        return outcome;
    }
    // Started at once, as issued: a lease write's deadline stands as the machine wrote it.
    let call = Arc::new(InFlight::started(d.clock.now()));
    d.in_flight = Some(Arc::clone(&call));
    let answer = Arc::clone(&call);
    dispatch::start_execute(
        &*d.transport,
        cmd,
        priority_now(),
        dispatch::answered_or(
            || {
                Err(TransportError::retriable(
                    "the transport dropped a call without answering it",
                ))
            },
            move |outcome| answer.put(outcome),
        ),
    );
    let outcome = answer_of(d, &call).await;
    d.in_flight = None;
    outcome
}

/// A read of the state partition. One that may wait (`wait_until`, a transport that can long
/// poll) asks again, in slices of at most the driver's `long_poll`, until records arrive, the
/// wait instant comes, or a resign is asked for; on a manual clock each slice answers at once
/// and the wait between them is for the clock's next change.
async fn read<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
    partition: i32,
    from_offset: i64,
    wait_until: Option<UnixMillis>,
) -> Result<Result<Event, TransportError>, Error> {
    let until = long_poll_until(&*d.transport, wait_until, d.long_poll);
    let clock = Arc::clone(&d.clock);
    if let Some(manual) = clock.as_manual() {
        loop {
            let listener = manual.listen();
            let seen = manual.changes();
            let event = match slice(d, partition, from_offset, Duration::ZERO).await? {
                Ok(event) => event,
                Err(e) => return Ok(Err(e)),
            };
            let now = clock.now();
            if long_poll_over(until, now, records_came(&event), &d.shared) {
                return Ok(Ok(event));
            }
            d.set_idle(Some((now, seen)));
            listener.await;
            d.set_idle(None);
        }
    }
    loop {
        let now = clock.now();
        let max_wait = slice_wait(until, now, d.long_poll);
        let listening = !max_wait.is_zero();
        if listening {
            d.shared.update(|s| s.snapshot.idle_at = Some(now));
        }
        let outcome = slice(d, partition, from_offset, max_wait).await;
        if listening {
            d.shared.update(|s| s.snapshot.idle_at = None);
        }
        let event = match outcome? {
            Ok(event) => event,
            Err(e) => return Ok(Err(e)),
        };
        if !listening || long_poll_over(until, clock.now(), records_came(&event), &d.shared) {
            return Ok(Ok(event));
        }
    }
}

/// Whether a read's event is anything but a read of no records.
fn records_came(event: &Event) -> bool {
    !matches!(event, Event::RecordsRead { records, .. } if records.is_empty())
}

/// One read of the partition that may wait up to `max_wait` in the transport, awaited.
async fn slice<T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
    partition: i32,
    from_offset: i64,
    max_wait: Duration,
) -> Result<Result<Event, TransportError>, Error> {
    let answer = Arc::new(InFlight::started(d.clock.now()));
    let put = Arc::clone(&answer);
    d.transport.start_read_partition(
        partition,
        from_offset,
        max_wait,
        priority_now(),
        dispatch::answered_or(
            || {
                Err(TransportError::retriable(
                    "the transport dropped a read without answering it",
                ))
            },
            move |batch| put.put(batch.map(dispatch::read)),
        ),
    );
    answer_of(d, &answer).await
}

/// Awaits `call`'s answer. A resign asked for meanwhile is noted (`check_cancel`) and acted on
/// once the call is answered.
async fn answer_of<T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
    call: &InFlight,
) -> Result<Result<Event, TransportError>, Error> {
    use futures_lite::future::or;
    loop {
        let answered = call.done.listen();
        let doorbell = d.shared.doorbell.listen();
        if let Some(outcome) = call.take() {
            return Ok(outcome);
        }
        d.check_cancel()?;
        or(answered, doorbell).await;
    }
}
