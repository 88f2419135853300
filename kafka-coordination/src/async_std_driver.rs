//! The async-std flavour: the driver is an async-std task that starts each transport call in its
//! completion form and awaits the answer (no thread waits for a call, `describe_*` and the
//! watch included).
//!
//! async-std is discontinued upstream: its authors recommend [smol](https://docs.rs/smol)
//! instead (this crate's `smol_driver`, feature `smol`, has the same API). The feature is kept
//! working for services that still run async-std: this flavour shares the driver loop of the
//! smol one (only the runtime glue above differs) and is tested under async-std's own executor.
//! New code should choose `smol_driver`.

use std::time::Duration;

use crate::runtime::{BoxFuture, Runtime};

struct Rt;

impl Runtime for Rt {
    fn sleep(d: Duration) -> BoxFuture<()> {
        Box::pin(::async_std::task::sleep(d))
    }
    fn spawn(f: BoxFuture<()>) {
        drop(::async_std::task::spawn(f));
    }
}

crate::async_api::runtime_api!(Rt, " on an async-std task");
crate::async_api::host_api!(Rt, " on one async-std task");
