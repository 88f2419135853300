//! Watching a role's leadership from any process, member or not: who leads, with which pair and
//! term, until when, or that the role is vacant.
//!
//! * [`leader`](crate::describe::leader) (blocking, at the crate root) and `leader` in each async flavour
//!   module: one read of the role's partition, the member that leads now.
//! * [`blocking::watch`](crate::blocking::watch) and `watch` in each async flavour module: a
//!   [`Watch`], which is both a blocking [`Iterator`] and an async
//!   [`Stream`](futures_lite::Stream) of [`WatchEvent`]s, one per change, in log order.
//!
//! What a watch reports, and its limits: [`WatchEvent`].

mod tracker;
mod watcher;

#[cfg(async_driver)]
pub(crate) use tracker::leader_at_async;
pub(crate) use tracker::partition_of;
pub use tracker::{
    leader_at, roles, Leader, LeaseTracker, RoleLeader, Vacancy, VacancyReason, WatchEvent,
    WatchOptions,
};
#[cfg(async_driver)]
pub(crate) use watcher::watch_on;
#[cfg(feature = "blocking")]
pub(crate) use watcher::watch_on_thread;
pub use watcher::{StopHandle, Watch};
