//! The smol flavour: the driver is a task on smol's global executor and transport calls run on
//! the `blocking` thread pool. Await the futures on any executor (`smol::block_on`, ...).

use std::time::Duration;

use crate::driver::{BoxFuture, Runtime};

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
    fn spawner() -> std::sync::Arc<crate::leadership::Spawner> {
        std::sync::Arc::new(|job| ::blocking::unblock(job).detach())
    }
}

crate::driver::runtime_api!(Rt, " on a smol task");

/// Watches `role`'s leadership from any process, member or not: a [`Watch`](crate::watch::Watch)
/// whose loop is a task on smol's global executor, reading on the blocking pool; poll it as a
/// [`Stream`](futures_lite::Stream). See [`watch`](crate::watch) for what it reports.
pub fn watch<S: crate::StateReader + Send + Sync + 'static>(
    reader: S,
    role: &str,
    options: crate::watch::WatchOptions,
) -> Result<crate::watch::Watch, crate::Error> {
    crate::watch::watch_on::<Rt>(std::sync::Arc::new(reader), role, options)
}

/// [`leader`](crate::leader), off the async threads.
pub async fn leader<S: crate::StateReader + Send + Sync + ?Sized + 'static>(
    reader: std::sync::Arc<S>,
    role: &str,
    partitions: i32,
) -> Result<crate::watch::RoleLeader, crate::Error> {
    crate::watch::leader_on::<Rt, S>(reader, role, partitions).await
}
