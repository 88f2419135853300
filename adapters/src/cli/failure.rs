//! Why the tool failed, and the exit code that says so.

use std::fmt;

use kafka_coordination::error::TransportError;

/// Why the tool failed, with its exit code.
pub struct Failure {
    pub(super) code: u8,
    pub(super) message: String,
}

impl Failure {
    pub fn usage(message: impl fmt::Display) -> Failure {
        Failure {
            code: 2,
            message: message.to_string(),
        }
    }
    pub fn config(message: impl fmt::Display) -> Failure {
        Failure::usage(message)
    }
    pub fn transport(e: TransportError) -> Failure {
        let code = if e.kind() == kafka_coordination::error::ErrorKind::Config {
            2
        } else {
            1
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
    pub fn failed(message: impl fmt::Display) -> Failure {
        Failure {
            code: 1,
            message: message.to_string(),
        }
    }
    pub(super) fn from_error(e: kafka_coordination::Error) -> Failure {
        match e {
            kafka_coordination::Error::Transport(t) => Failure::transport(t),
            kafka_coordination::Error::InvalidName(_)
            | kafka_coordination::Error::InvalidOptions(_) => Failure::usage(e),
            other => Failure::failed(other),
        }
    }
}
