//! The async-std flavour: the driver is an async-std task and transport calls run on async-std's
//! blocking pool. async-std is deprecated upstream; this flavour shares its loop with the smol
//! one and is tested under async-std's own executor.

use std::time::Duration;

use crate::driver::{BoxFuture, Runtime};

struct Rt;

impl Runtime for Rt {
    fn unblock<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> BoxFuture<Option<R>> {
        Box::pin(async move { Some(::async_std::task::spawn_blocking(f).await) })
    }
    fn sleep(d: Duration) -> BoxFuture<()> {
        Box::pin(::async_std::task::sleep(d))
    }
    fn spawn(f: BoxFuture<()>) {
        drop(::async_std::task::spawn(f));
    }
    fn spawner() -> std::sync::Arc<crate::leadership::Spawner> {
        std::sync::Arc::new(|job| drop(::async_std::task::spawn_blocking(job)))
    }
}

crate::driver::runtime_api!(Rt, " on an async-std task");

/// Watches `role`'s leadership from any process, member or not: a [`Watch`](crate::watch::Watch)
/// whose loop is an async-std task, reading on the blocking pool; poll it as a
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
