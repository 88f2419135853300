//! The public API of each async flavour (`tokio_driver`, `smol_driver`, `async_std_driver`),
//! written once over a [`Runtime`]: the flavour modules instantiate these macros. This is the
//! top of the runners' layer: it starts drivers, hosts and watches on a runtime, and nothing
//! below imports it.

use std::sync::Arc;

use crate::leadership::Error;
use crate::runtime::Runtime;
use crate::transport::Transport;

/// Starts a host whose loop is one task of runtime `R`.
pub(crate) fn host_on<R: Runtime, T: Transport + Send + Sync + ?Sized + 'static>(
    transport: Arc<T>,
    options: crate::host::HostOptions,
) -> Result<crate::host::Host, Error> {
    let (host, core) = crate::host::build(transport, options)?;
    R::spawn(Box::pin(crate::host::run_as_task::<R, T>(core)));
    Ok(host)
}

/// Defines a flavour's public API (`start`, `acquire_leadership`, `describe_leadership`,
/// `describe_role_state`) over runtime type `$rt`.
macro_rules! runtime_api {
    ($rt:ty, $where:literal) => {
        /// Starts competing for `role` as `member`
        #[doc = $where]
        /// and returns at once with the [`Candidacy`](crate::leadership::Candidacy).
        pub fn start<T: $crate::transport::Transport + Send + Sync + 'static>(
            transport: T,
            role: &str,
            member: &str,
            options: $crate::Options,
        ) -> Result<$crate::leadership::Candidacy, $crate::Error> {
            $crate::driver::task::start_on::<$rt, T>(transport, role, member, options)
        }

        /// Registers, waits for this member's turn, mints the epoch, writes the first lease
        /// and returns the [`Leadership`](crate::leadership::Leadership); the lease is then renewed in the
        /// background. Dropping the future before it completes cancels the candidacy (it
        /// deregisters).
        pub async fn acquire_leadership<T: $crate::transport::Transport + Send + Sync + 'static>(
            transport: T,
            role: &str,
            member: &str,
            options: $crate::Options,
        ) -> Result<$crate::leadership::Leadership, $crate::Error> {
            start(transport, role, member, options)?.elected().await
        }

        /// [`describe_leadership`](crate::describe::describe_leadership), awaited: the check
        /// starts in its completion form and its answer wakes the task, so no thread waits.
        /// Takes the transport by reference, as the blocking one does.
        pub async fn describe_leadership<
            C: $crate::transport::Coordinator + Clone + Send + Sync + 'static,
        >(
            coordinator: &C,
            role: &str,
        ) -> Result<$crate::LeadershipStatus, $crate::Error> {
            $crate::describe::describe_leadership_async(coordinator, role).await
        }

        /// Watches `role`'s leadership from any process, member or not: a
        /// [`Watch`](crate::watch::Watch) whose loop is a task of this runtime (call it in the
        /// runtime's context), each read awaited on the task; poll it as a
        /// [`Stream`](futures_lite::Stream). See [`watch`](crate::watch) for what it reports.
        pub fn watch<S: $crate::transport::StateReader + Send + Sync + 'static>(
            reader: S,
            role: &str,
            options: $crate::watch::WatchOptions,
        ) -> Result<$crate::watch::Watch, $crate::Error> {
            $crate::watch::watch_on::<$rt>(std::sync::Arc::new(reader), role, options)
        }

        /// [`leader`](crate::describe::leader), awaited (each read's answer wakes the task).
        pub async fn leader<S: $crate::transport::StateReader + Clone + Send + Sync + 'static>(
            reader: &S,
            role: &str,
        ) -> Result<$crate::watch::RoleLeader, $crate::Error> {
            $crate::watch::leader_at_async(reader, role, $crate::Clock::now(&$crate::SystemClock))
                .await
        }

        /// [`describe_role_state`](crate::describe::describe_role_state), awaited (each read's
        /// answer wakes the task).
        pub async fn describe_role_state<
            S: $crate::transport::StateReader + Clone + Send + Sync + 'static,
        >(
            reader: &S,
            role: &str,
        ) -> Result<$crate::core::RoleState, $crate::Error> {
            $crate::describe::describe_role_state_async(reader, role).await
        }
    };
}
pub(crate) use runtime_api;

/// Defines a flavour's `host` over runtime type `$rt`.
macro_rules! host_api {
    ($rt:ty, $where:literal) => {
        /// Starts a [`Host`](crate::host::Host): many candidacies on one loop,
        #[doc = $where]
        /// with at most [`HostOptions::max_in_flight`](crate::host::HostOptions::max_in_flight)
        /// transport calls in flight. Call it in the
        /// runtime's context. Start candidacies with [`Host::start`](crate::host::Host::start).
        pub fn host<T: $crate::transport::Transport + Send + Sync + ?Sized + 'static>(
            transport: std::sync::Arc<T>,
            options: $crate::host::HostOptions,
        ) -> Result<$crate::host::Host, $crate::Error> {
            $crate::async_api::host_on::<$rt, T>(transport, options)
        }
    };
}
pub(crate) use host_api;
