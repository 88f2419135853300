//! FindCoordinator on one connection, and running a call on a connection that answered.

use std::time::Instant;

use kafka_protocol::messages::FindCoordinatorRequest;

use crate::api::find_coordinator::{self, FindCoordinator, Found};
use crate::api::{Attempt, Exchange};
use crate::net::{Conn, NetError};

/// One FindCoordinator for `transactional_id` (and, from v4, `others`) on `conn`, a
/// connection to the bootstrap server `server`. A broker whose versions all predate key types
/// cannot be asked.
pub(super) fn find_coordinator_on(
    conn: &mut Conn,
    server: &str,
    transactional_id: &str,
    others: &[String],
    deadline: Instant,
) -> Result<Found, Attempt> {
    let x = FindCoordinator::Transaction {
        transactional_id,
        others,
    };
    let Some(version) = conn
        .version_at_most::<FindCoordinatorRequest>(find_coordinator::MAX_VERSION)
        .filter(|v| *v >= find_coordinator::MIN_VERSION_TRANSACTION)
    else {
        return Err(x.unsupported(server));
    };
    let answer = conn.call(&x.request(version), version, deadline)?;
    x.answer(answer, version, server)
}

/// Runs `f` on a connection, noting that the cluster answered; a broken connection is
/// returned as `Io`, so that the pool drops it.
pub(super) fn answer_on<T>(
    answered: &std::sync::atomic::AtomicBool,
    conn: &mut Conn,
    f: impl FnOnce(&mut Conn) -> Result<T, Attempt>,
) -> Result<Result<T, Attempt>, NetError> {
    answered.store(true, std::sync::atomic::Ordering::Release);
    match f(conn) {
        Err(Attempt::Broken(why)) => Err(NetError::Io(why)),
        other => Ok(other),
    }
}
