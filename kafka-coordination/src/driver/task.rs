//! The async loop, shared by the tokio, smol and async-std drivers.

use std::sync::Arc;

use super::{execute, Driver, InFlight, Next, Wait};
use crate::error::TransportError;
use crate::leadership::{Candidacy, Error};
use crate::options::Options;
use crate::runtime::Runtime;
use crate::transport::Transport;

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

/// The async loop: the same steps as the blocking one, waiting with the runtime's timer and
/// running transport calls on its blocking pool.
pub(crate) async fn run_async<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    mut d: Driver<T>,
) {
    match async_loop::<R, T>(&mut d).await {
        Ok(Flow::Ended) => {}
        // The rest of the exit runs here, on this thread: the runtime takes no more work.
        Ok(Flow::RuntimeGone) => d.exit_now(),
        Err(e) => d.shared.finish(e),
    }
}

/// How the async loop stopped.
enum Flow {
    Ended,
    RuntimeGone,
}

async fn async_loop<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
) -> Result<Flow, Error> {
    use futures_lite::future::or;
    loop {
        d.check_cancel()?;
        match d.drain() {
            Next::Ended => return Ok(Flow::Ended),
            Next::Io(cmd) => {
                let (transport, clock, shared) =
                    (d.transport.clone(), d.clock.clone(), d.shared.clone());
                let long_poll = d.long_poll;
                let call = Arc::new(InFlight::new(cmd, d.clock.now()));
                d.in_flight = Some(call.clone());
                let mut io = R::unblock(move || {
                    if let Some(cmd) = call.start(clock.now()) {
                        call.put(execute(&*transport, cmd, &*clock, long_poll, &shared));
                    }
                });
                let outcome = loop {
                    let listener = d.shared.doorbell.listen();
                    // A resign during I/O is noted now and acted on when the I/O completes.
                    d.check_cancel()?;
                    let finished = or(async { Some((&mut io).await) }, async {
                        listener.await;
                        None
                    })
                    .await;
                    match finished {
                        // The pool ran it.
                        Some(Some(())) => {
                            let result = d.take_in_flight();
                            break result.unwrap_or_else(|| {
                                Err(TransportError::fatal("a transport call left no result"))
                            });
                        }
                        // The runtime refused or dropped the call: it is shutting down.
                        Some(None) => return Ok(Flow::RuntimeGone),
                        None => {}
                    }
                };
                d.in_flight = None;
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
