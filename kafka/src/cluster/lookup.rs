//! FindCoordinator on one connection, and running a call on a connection that answered.

use std::time::Instant;

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;

use crate::api::Attempt;
use crate::classify::code;
use crate::net::{Conn, NetError};
use kafka_coordination_transport::error::TransportError;

/// FindCoordinator's key type for a transactional id.
pub(super) const KEY_TYPE_TRANSACTION: i8 = 1;

/// What one FindCoordinator answered: the coordinator asked for (or why not), and the
/// others' it named without an error.
pub(super) struct Found {
    pub(super) ours: Result<String, Attempt>,
    pub(super) others: Vec<(String, String)>,
}

/// One FindCoordinator for `transactional_id` (and, from v4, `others`) on `conn`, a
/// connection to the bootstrap server `server`.
pub(super) fn find_coordinator_on(
    conn: &mut Conn,
    server: &str,
    transactional_id: &str,
    others: &[String],
    deadline: Instant,
) -> Result<Found, Attempt> {
    let Some(version) = conn.version::<FindCoordinatorRequest>().filter(|v| *v >= 1) else {
        return Err(Attempt::Stop(TransportError::config(format!(
            "the broker at {server} does not support FindCoordinator for transactional ids \
             (Kafka 0.11 or newer is needed)"
        ))));
    };
    let id = StrBytes::from_string(transactional_id.to_owned());
    let mut req = FindCoordinatorRequest::default().with_key_type(KEY_TYPE_TRANSACTION);
    req = if version >= 4 {
        let keys = std::iter::once(id)
            .chain(others.iter().map(|o| StrBytes::from_string(o.clone())))
            .collect();
        req.with_coordinator_keys(keys)
    } else {
        req.with_key(id)
    };
    let resp = conn.call(&req, version, deadline)?;
    let mut found = Vec::new();
    let (error, message, host, port) = if version >= 4 {
        let mut ours = None;
        for c in resp.coordinators {
            if c.key.as_str() == transactional_id {
                ours = Some((c.error_code, c.error_message, c.host, c.port));
            } else if c.error_code == code::NONE && c.port > 0 {
                found.push((c.key.to_string(), format!("{}:{}", c.host, c.port)));
            }
        }
        match ours {
            Some(answer) => answer,
            None => {
                return Ok(Found {
                    ours: Err(Attempt::relookup(format!(
                        "FindCoordinator did not answer for '{transactional_id}'"
                    ))),
                    others: found,
                })
            }
        }
    } else {
        (resp.error_code, resp.error_message, resp.host, resp.port)
    };
    let ours = match code::error(error) {
        None => Ok(format!("{host}:{port}")),
        Some(
            code::E::CoordinatorLoadInProgress
            | code::E::CoordinatorNotAvailable
            | code::E::NotCoordinator,
        ) => Err(Attempt::Again {
            relookup: true,
            why: format!(
                "FindCoordinator: {}",
                message
                    .as_deref()
                    .map_or_else(|| code::name(error), str::to_owned)
            ),
            code: Some(error),
        }),
        Some(code::E::TransactionalIdAuthorizationFailed) => {
            Err(Attempt::Stop(TransportError::unauthorized(format!(
                "FindCoordinator for transactional id '{transactional_id}': the principal needs \
                 the DESCRIBE ACL on TransactionalId '{transactional_id}' \
                 (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a member needs WRITE on it, which \
                 implies DESCRIBE"
            ))))
        }
        Some(e) => {
            let other = e.code();
            Err(Attempt::from_code(
                other,
                format!(
                    "FindCoordinator for '{transactional_id}' failed with error {other} ({})",
                    message
                        .as_deref()
                        .map_or_else(|| code::name(other), str::to_owned)
                ),
            ))
        }
    };
    Ok(Found {
        ours,
        others: found,
    })
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
