//! Logging through `tracing`, for the crates of the workspace. Not a public API.
//!
//! Each macro expands, in the crate that calls it, to a `tracing` event under that crate's own
//! `tracing` feature (and its own `tracing` dependency), and to nothing without it: a crate
//! logs when its feature is on, and never prints.

/// An info event under the calling crate's `tracing` feature.
#[doc(hidden)]
#[macro_export]
macro_rules! log_info {
    ($($t:tt)*) => {{
        #[cfg(feature = "tracing")]
        { ::tracing::info!($($t)*); }
    }};
}

/// A warning under the calling crate's `tracing` feature.
#[doc(hidden)]
#[macro_export]
macro_rules! log_warn {
    ($($t:tt)*) => {{
        #[cfg(feature = "tracing")]
        { ::tracing::warn!($($t)*); }
    }};
}

/// A debug event under the calling crate's `tracing` feature.
#[doc(hidden)]
#[macro_export]
macro_rules! log_debug {
    ($($t:tt)*) => {{
        #[cfg(feature = "tracing")]
        { ::tracing::debug!($($t)*); }
    }};
}
