//! The smol flavour: the driver is a task on smol's global executor and transport calls run on
//! the `blocking` thread pool. Await the futures on any executor (`smol::block_on`, ...).

use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::describe::LeadershipStatus;
use kafka_coordination_core::state::RoleState;

use crate::driver::{describe_leadership_on, describe_role_state_on, start_on, BoxFuture, Runtime};
use crate::leadership::{Candidacy, Error, Leadership};
use crate::options::Options;
use crate::transport::{Coordinator, StateReader, Transport};

struct Rt;

impl Runtime for Rt {
    fn unblock<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> BoxFuture<Option<R>> {
        Box::pin(async move { Some(::blocking::unblock(f).await) })
    }
    fn sleep(d: Duration) -> BoxFuture<()> {
        Box::pin(async move {
            ::async_io::Timer::after(d).await;
        })
    }
    fn spawn(f: BoxFuture<()>) {
        ::smol::spawn(f).detach();
    }
}

/// Starts competing for `role` as `member` on a smol task and returns at once.
pub fn start<T: Transport + Send + Sync + 'static>(
    transport: T,
    role: &str,
    member: &str,
    options: Options,
) -> Result<Candidacy, Error> {
    start_on::<Rt, T>(transport, role, member, options)
}

/// Registers, waits for this member's turn, mints the epoch, writes the first lease and
/// returns the [`Leadership`]; the lease is then renewed in the background. Dropping the
/// future before it completes cancels the candidacy (it deregisters).
pub async fn acquire_leadership<T: Transport + Send + Sync + 'static>(
    transport: T,
    role: &str,
    member: &str,
    options: Options,
) -> Result<Leadership, Error> {
    start(transport, role, member, options)?.elected().await
}

/// [`describe_leadership`](crate::describe_leadership), off the async threads.
pub async fn describe_leadership<C: Coordinator + Send + Sync + ?Sized + 'static>(
    coordinator: Arc<C>,
    role: &str,
) -> Result<LeadershipStatus, Error> {
    describe_leadership_on::<Rt, C>(coordinator, role).await
}

/// [`describe_role_state`](crate::describe_role_state), off the async threads.
pub async fn describe_role_state<S: StateReader + Send + Sync + ?Sized + 'static>(
    reader: Arc<S>,
    role: &str,
    partitions: i32,
) -> Result<RoleState, Error> {
    describe_role_state_on::<Rt, S>(reader, role, partitions).await
}
