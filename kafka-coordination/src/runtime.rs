//! What an async runner (a driver task, a host task, a watch task) needs from its runtime: the
//! one trait each async flavour (tokio, smol, async-std) implements.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed future that can move between threads.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What an async driver needs from its runtime.
pub(crate) trait Runtime: 'static {
    /// Completes after `d` of real time.
    fn sleep(d: Duration) -> BoxFuture<()>;
    /// Runs `f` as a detached task.
    fn spawn(f: BoxFuture<()>);
}
