//! The tokio flavour: the driver is a tokio task and transport calls run on tokio's blocking
//! pool. Call these from within a tokio runtime (either flavour).

use std::time::Duration;

use crate::driver::{BoxFuture, Runtime};

struct Rt;

impl Runtime for Rt {
    fn unblock<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> BoxFuture<Option<R>> {
        Box::pin(async move { ::tokio::task::spawn_blocking(f).await.ok() })
    }
    fn sleep(d: Duration) -> BoxFuture<()> {
        Box::pin(::tokio::time::sleep(d))
    }
    fn spawn(f: BoxFuture<()>) {
        drop(::tokio::spawn(f));
    }
    fn spawner() -> std::sync::Arc<crate::leadership::Spawner> {
        let handle = ::tokio::runtime::Handle::current();
        std::sync::Arc::new(move |job| drop(handle.spawn_blocking(job)))
    }
}

crate::driver::runtime_api!(Rt, " on a tokio task");

/// Watches `role`'s leadership from any process, member or not: a [`Watch`](crate::watch::Watch)
/// whose loop is a tokio task (call it within a tokio runtime), reading on the blocking pool; poll it as a
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
