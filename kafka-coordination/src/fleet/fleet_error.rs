//! What a fleet refuses.

/// A fleet's settings or a member's announcement that cannot be used.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// A weight must be a finite number above 0.
    #[error("fleet weight {weight} is not a finite number above 0")]
    InvalidWeight {
        /// The weight given.
        weight: f64,
    },
    /// A version is dot-separated unsigned numbers (`2`, `1.4`, `10.0.3`).
    #[error("version '{version}' does not parse: use dot-separated numbers, such as 1.4.0")]
    InvalidVersion {
        /// The text given.
        version: String,
    },
    /// The policy names none of `balance`, `prefer-newest`, `prefer-oldest`.
    #[error("unknown fleet policy '{policy}': use balance, prefer-newest or prefer-oldest")]
    InvalidPolicy {
        /// The text given.
        policy: String,
    },
    /// A fleet or member name is empty or holds a `/` (the fleet's heartbeat roles are
    /// `<fleet>/<member>`).
    #[error("fleet {what} '{name}' is empty or holds a '/'")]
    InvalidName {
        /// `name` or `member`.
        what: &'static str,
        /// The text given.
        name: String,
    },
    /// `max_in_motion` must be at least 1.
    #[error("max_in_motion must be at least 1")]
    NoMotion,
    /// A heartbeat member id in the fleet topic that is not an announcement of this format.
    #[error("heartbeat member id '{id}' is not a fleet announcement: {why}")]
    BadAnnouncement {
        /// The member id read.
        id: String,
        /// What is wrong with it.
        why: String,
    },
    /// The member could not start a candidacy (its heartbeat, or a role's).
    #[error(transparent)]
    Start(#[from] crate::Error),
}
