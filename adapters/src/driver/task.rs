//! The async loop, shared by the tokio, smol and async-std drivers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::describe::LeadershipStatus;
use kafka_coordination_core::state::RoleState;

use super::{execute, Driver, InFlight, Next, Wait};
use crate::error::TransportError;
use crate::leadership::{Candidacy, Error};
use crate::options::Options;
use crate::transport::{Coordinator, StateReader, Transport};

/// A boxed future that can move between threads.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What an async driver needs from its runtime.
pub(crate) trait Runtime: 'static {
    /// Runs `f` on the runtime's blocking pool; `None` when the runtime dropped the task.
    fn unblock<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> BoxFuture<Option<R>>;
    /// Completes after `d` of real time.
    fn sleep(d: Duration) -> BoxFuture<()>;
    /// Runs `f` as a detached task.
    fn spawn(f: BoxFuture<()>);
    /// Where the handle's async guarded writes run: the runtime's blocking pool. Called when a
    /// candidacy starts (in the runtime's context, for tokio).
    fn spawner() -> std::sync::Arc<crate::leadership::Spawner>;
}

/// Starts a candidacy whose driver is a task of runtime `R`.
pub(crate) fn start_on<R: Runtime, T: Transport + Send + Sync + 'static>(
    transport: T,
    role: &str,
    member: &str,
    options: Options,
) -> Result<Candidacy, Error> {
    let (driver, candidacy) =
        Driver::new(Arc::new(transport), role, member, options, R::spawner())?;
    R::spawn(Box::pin(run_async::<R, T>(driver)));
    Ok(candidacy)
}

/// Starts a host whose loop is one task of runtime `R`.
pub(crate) fn host_on<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    transport: Arc<T>,
    options: crate::host::HostOptions,
) -> Result<crate::host::Host, Error> {
    let (host, core) = crate::host::build(transport, options, R::spawner())?;
    R::spawn(Box::pin(crate::host::run_as_task::<R, T>(core)));
    Ok(host)
}

/// [`describe_leadership`](crate::describe_leadership) on runtime `R`'s blocking pool.
pub(crate) async fn describe_leadership_on<
    R: Runtime,
    C: Coordinator + Clone + Send + Sync + 'static,
>(
    coordinator: &C,
    role: &str,
) -> Result<LeadershipStatus, Error> {
    let (coordinator, role) = (coordinator.clone(), role.to_owned());
    R::unblock(move || crate::describe::describe_leadership(&coordinator, &role))
        .await
        .unwrap_or(Err(Error::Cancelled))
}

/// [`describe_role_state`](crate::describe_role_state) on runtime `R`'s blocking pool.
pub(crate) async fn describe_role_state_on<
    R: Runtime,
    S: StateReader + Clone + Send + Sync + 'static,
>(
    reader: &S,
    role: &str,
) -> Result<RoleState, Error> {
    let (reader, role) = (reader.clone(), role.to_owned());
    R::unblock(move || crate::describe::describe_role_state(&reader, &role))
        .await
        .unwrap_or(Err(Error::Cancelled))
}

/// The async loop: the same steps as the blocking one, waiting with the runtime's timer and
/// running transport calls on its blocking pool.
pub(crate) async fn run_async<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    mut d: Driver<T>,
) {
    match async_loop::<R, T>(&mut d).await {
        Ok(Flow::Ended) => {}
        // The rest of the exit runs here, on this thread: the runtime takes no more work.
        Ok(Flow::RuntimeGone) => d.exit_now(),
        Err(e) => d.shared.finish(e),
    }
}

/// How the async loop stopped.
enum Flow {
    Ended,
    RuntimeGone,
}

async fn async_loop<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    d: &mut Driver<T>,
) -> Result<Flow, Error> {
    use futures_lite::future::or;
    loop {
        d.check_cancel()?;
        match d.drain() {
            Next::Ended => return Ok(Flow::Ended),
            Next::Io(cmd) => {
                let (transport, clock, shared) =
                    (d.transport.clone(), d.clock.clone(), d.shared.clone());
                let long_poll = d.long_poll;
                let call = Arc::new(InFlight::new(cmd, d.clock.now()));
                d.in_flight = Some(call.clone());
                let mut io = R::unblock(move || {
                    if let Some(cmd) = call.start(clock.now()) {
                        call.put(execute(&*transport, cmd, &*clock, long_poll, &shared));
                    }
                });
                let outcome = loop {
                    let listener = d.shared.doorbell.listen();
                    // A resign during I/O is noted now and acted on when the I/O completes.
                    d.check_cancel()?;
                    let finished = or(async { Some((&mut io).await) }, async {
                        listener.await;
                        None
                    })
                    .await;
                    match finished {
                        // The pool ran it.
                        Some(Some(())) => {
                            let result = d.take_in_flight();
                            break result.unwrap_or_else(|| {
                                Err(TransportError::fatal("a transport call left no result"))
                            });
                        }
                        // The runtime refused or dropped the call: it is shutting down.
                        Some(None) => return Ok(Flow::RuntimeGone),
                        None => {}
                    }
                };
                d.in_flight = None;
                d.complete(outcome)?;
            }
            Next::Wait(wake) => {
                let listener = d.shared.doorbell.listen();
                let seen = d.changes();
                if d.cancel_pending() {
                    continue;
                }
                match d.until_wake(wake) {
                    Wait::Due => {}
                    Wait::ClockMoves(now) => {
                        d.set_idle(Some((now, seen)));
                        listener.await;
                    }
                    Wait::For(now, dur) => {
                        d.set_idle(Some((now, seen)));
                        or(listener, R::sleep(dur)).await;
                    }
                }
                d.set_idle(None);
                d.tick()?;
            }
        }
    }
}

/// Defines a flavour's public API (`start`, `acquire_leadership`, `describe_leadership`,
/// `describe_role_state`) over runtime type `$rt`.
macro_rules! runtime_api {
    ($rt:ty, $where:literal) => {
        /// Starts competing for `role` as `member`
        #[doc = $where]
        /// and returns at once with the [`Candidacy`](crate::Candidacy).
        pub fn start<T: $crate::Transport + Send + Sync + 'static>(
            transport: T,
            role: &str,
            member: &str,
            options: $crate::Options,
        ) -> Result<$crate::Candidacy, $crate::Error> {
            $crate::driver::start_on::<$rt, T>(transport, role, member, options)
        }

        /// Registers, waits for this member's turn, mints the epoch, writes the first lease
        /// and returns the [`Leadership`](crate::Leadership); the lease is then renewed in the
        /// background. Dropping the future before it completes cancels the candidacy (it
        /// deregisters).
        pub async fn acquire_leadership<T: $crate::Transport + Send + Sync + 'static>(
            transport: T,
            role: &str,
            member: &str,
            options: $crate::Options,
        ) -> Result<$crate::Leadership, $crate::Error> {
            start(transport, role, member, options)?.elected().await
        }

        /// [`describe_leadership`](crate::describe_leadership), off the async threads. Takes
        /// the transport by reference, as the blocking one does (it is cloned into the
        /// blocking pool: `KafkaTransport`, `MemoryTransport` and `Arc<_>` clone cheaply).
        pub async fn describe_leadership<C: $crate::Coordinator + Clone + Send + Sync + 'static>(
            coordinator: &C,
            role: &str,
        ) -> Result<$crate::LeadershipStatus, $crate::Error> {
            $crate::driver::describe_leadership_on::<$rt, C>(coordinator, role).await
        }

        /// Watches `role`'s leadership from any process, member or not: a
        /// [`Watch`](crate::watch::Watch) whose loop is a task of this runtime (call it in the
        /// runtime's context), reading on its blocking pool; poll it as a
        /// [`Stream`](futures_lite::Stream). See [`watch`](crate::watch) for what it reports.
        pub fn watch<S: $crate::StateReader + Send + Sync + 'static>(
            reader: S,
            role: &str,
            options: $crate::watch::WatchOptions,
        ) -> Result<$crate::watch::Watch, $crate::Error> {
            $crate::watch::watch_on::<$rt>(std::sync::Arc::new(reader), role, options)
        }

        /// [`leader`](crate::leader), off the async threads.
        pub async fn leader<S: $crate::StateReader + Clone + Send + Sync + 'static>(
            reader: &S,
            role: &str,
        ) -> Result<$crate::watch::RoleLeader, $crate::Error> {
            $crate::watch::leader_on::<$rt, S>(reader, role).await
        }

        /// [`describe_role_state`](crate::describe_role_state), off the async threads.
        pub async fn describe_role_state<S: $crate::StateReader + Clone + Send + Sync + 'static>(
            reader: &S,
            role: &str,
        ) -> Result<$crate::RoleState, $crate::Error> {
            $crate::driver::describe_role_state_on::<$rt, S>(reader, role).await
        }
    };
}
pub(crate) use runtime_api;

/// Defines a flavour's `host` over runtime type `$rt`.
macro_rules! host_api {
    ($rt:ty, $where:literal) => {
        /// Starts a [`Host`](crate::host::Host): many candidacies on one loop,
        #[doc = $where]
        /// with transport calls on the host's own bounded pool of I/O threads
        /// ([`HostOptions::io_threads`](crate::host::HostOptions::io_threads)). Call it in the
        /// runtime's context. Start candidacies with [`Host::start`](crate::host::Host::start).
        pub fn host<T: $crate::Transport + Send + Sync + ?Sized + 'static>(
            transport: std::sync::Arc<T>,
            options: $crate::host::HostOptions,
        ) -> Result<$crate::host::Host, $crate::Error> {
            $crate::driver::host_on::<$rt, T>(transport, options)
        }
    };
}
pub(crate) use host_api;
