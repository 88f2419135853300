//! The blocking loop: a thread per candidacy.

use event_listener::Listener;

use super::{execute, Driver, Next, Wait};
use crate::leadership::Error;
use crate::transport::Transport;

/// The blocking loop: runs on its own thread until the candidate ends.
pub(crate) fn run_blocking<T: Transport + Send + Sync + ?Sized + 'static>(mut d: Driver<T>) {
    if let Err(e) = blocking_loop(&mut d) {
        d.shared.finish(e);
    }
}

fn blocking_loop<T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
) -> Result<(), Error> {
    loop {
        d.check_cancel()?;
        match d.drain() {
            Next::Ended => return Ok(()),
            Next::Io(cmd) => {
                let outcome = execute(&*d.transport, cmd, &*d.clock, d.long_poll, &d.shared);
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
                        listener.wait();
                    }
                    Wait::For(now, dur) => {
                        d.set_idle(Some((now, seen)));
                        listener.wait_timeout(dur);
                    }
                }
                d.set_idle(None);
                d.tick()?;
            }
        }
    }
}
