//! The tokio flavour: the driver is a tokio task that starts each transport call in its
//! completion form and awaits the answer (no thread waits for a call, `describe_*` and the watch
//! included). Call these from within a tokio runtime (either flavour).

use std::time::Duration;

use crate::runtime::{BoxFuture, Runtime};

struct Rt;

impl Runtime for Rt {
    fn sleep(d: Duration) -> BoxFuture<()> {
        Box::pin(::tokio::time::sleep(d))
    }
    fn spawn(f: BoxFuture<()>) {
        drop(::tokio::spawn(f));
    }
}

crate::async_api::runtime_api!(Rt, " on a tokio task");
crate::async_api::host_api!(Rt, " on one tokio task");
