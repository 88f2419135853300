//! The smol flavour: the driver is a task on smol's global executor that starts each transport
//! call in its completion form and awaits the answer (no thread waits for a call, `describe_*`
//! and the watch included). Await the futures on any executor (`smol::block_on`, ...).

use std::time::Duration;

use crate::runtime::{BoxFuture, Runtime};

struct Rt;

impl Runtime for Rt {
    fn sleep(d: Duration) -> BoxFuture<()> {
        Box::pin(async move {
            ::async_io::Timer::after(d).await;
        })
    }
    fn spawn(f: BoxFuture<()>) {
        ::smol::spawn(f).detach();
    }
}

crate::async_api::runtime_api!(Rt, " on a smol task");
crate::async_api::host_api!(Rt, " on one smol task");
