//! Logging through `tracing` when the feature is on; nothing otherwise. The library never prints.

macro_rules! log_info {
    ($($t:tt)*) => {{
        #[cfg(feature = "tracing")]
        { ::tracing::info!($($t)*); }
    }};
}

macro_rules! log_warn {
    ($($t:tt)*) => {{
        #[cfg(feature = "tracing")]
        { ::tracing::warn!($($t)*); }
    }};
}

macro_rules! log_debug {
    ($($t:tt)*) => {{
        #[cfg(feature = "tracing")]
        { ::tracing::debug!($($t)*); }
    }};
}

#[allow(unused_imports)]
pub(crate) use {log_debug, log_info, log_warn};
