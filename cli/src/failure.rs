//! Why the tool failed, and the exit code that says so.
//!
//! Every exit code of the tool is one of the constants here (and `run`'s child's own code);
//! docs/guide/operating.md has the same table.

use std::fmt;

use kafka_coordination::error::{ErrorKind, TransportError, TROUBLESHOOTING_PAGE};

/// Success (and `run`: the child exited 0 by itself while its member led).
pub const EXIT_OK: u8 = 0;
/// A failure that may pass: an unreachable cluster, a refused operation, a topic check with
/// errors, a candidacy that failed. A service manager may restart.
pub const EXIT_FAILURE: u8 = 1;
/// A usage, configuration or authorization error (bad flag, bad TOML, a missing ACL, a wrong
/// topic): restarting does not help until someone changes the setup.
pub const EXIT_CONFIG: u8 = 2;
/// `run`: the term was lost (fenced by a newer leader, the lease ran out with
/// `--stop-at-deadline`, or the transport failed for good while leading), whatever code the
/// child then exited with. Campaigning again is the cure: restart.
pub const EXIT_TERM_LOST: u8 = 75;
/// `run`: stopped by a signal (SIGTERM, SIGINT) exits `EXIT_SIGNAL_BASE` + the signal's
/// number (143, 130), after the child's processes are gone.
pub const EXIT_SIGNAL_BASE: u8 = 128;

/// The exit code for "stopped by `signal`".
pub fn signal_code(signal: i32) -> u8 {
    u8::try_from(i32::from(EXIT_SIGNAL_BASE) + signal).unwrap_or(u8::MAX)
}

/// Why the tool failed, with its exit code.
pub struct Failure {
    pub(super) code: u8,
    pub(super) message: String,
    /// The section of the troubleshooting page about it, for a library error.
    pub(super) anchor: Option<&'static str>,
}

impl Failure {
    pub fn usage(message: impl fmt::Display) -> Failure {
        Failure {
            code: EXIT_CONFIG,
            message: message.to_string(),
            anchor: None,
        }
    }
    /// Settings the library refused (exit code 2 whatever the error's kind: the settings
    /// must change), with the error's troubleshooting section.
    pub fn config(e: TransportError) -> Failure {
        Failure {
            anchor: Some(e.troubleshooting_anchor()),
            ..Failure::usage(e)
        }
    }
    pub fn transport(e: TransportError) -> Failure {
        let code = match e.kind() {
            ErrorKind::Config | ErrorKind::Unauthorized => EXIT_CONFIG,
            _ => EXIT_FAILURE,
        };
        Failure {
            code,
            anchor: Some(e.troubleshooting_anchor()),
            message: e.to_string(),
        }
    }
    pub fn failed(message: impl fmt::Display) -> Failure {
        Failure {
            code: EXIT_FAILURE,
            message: message.to_string(),
            anchor: None,
        }
    }
    /// The same failure, its message after `what: `.
    pub(super) fn context(mut self, what: impl fmt::Display) -> Failure {
        self.message = format!("{what}: {}", self.message);
        self
    }
    pub(super) fn from_error(e: kafka_coordination::Error) -> Failure {
        let anchor = e.troubleshooting_anchor();
        let failure = match e {
            kafka_coordination::Error::Transport(t) => Failure::transport(t),
            kafka_coordination::Error::InvalidName(_)
            | kafka_coordination::Error::InvalidOptions(_) => Failure::usage(e),
            other => Failure::failed(other),
        };
        Failure {
            anchor: Some(anchor),
            ..failure
        }
    }

    /// Where the troubleshooting page explains this failure
    /// (`docs/guide/troubleshooting.md#unavailable`), for a failure of the library.
    pub(super) fn troubleshooting(&self) -> Option<String> {
        self.anchor
            .map(|anchor| format!("{TROUBLESHOOTING_PAGE}#{anchor}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_coordination::error::Error;

    /// A failure of the library names its section of the troubleshooting page; a usage error
    /// of the tool names none.
    #[test]
    fn a_library_failure_names_its_troubleshooting_section() {
        let acl = Failure::transport(
            TransportError::unauthorized("the principal needs the WRITE ACL").with_kafka_code(53),
        );
        assert_eq!(acl.code, EXIT_CONFIG);
        assert_eq!(
            acl.troubleshooting().as_deref(),
            Some("docs/guide/troubleshooting.md#missing-acls")
        );
        let down = Failure::from_error(Error::Unavailable {
            waited: std::time::Duration::from_secs(20),
            last: TransportError::retriable("no broker could be reached"),
        })
        .context("describe");
        assert_eq!(down.code, EXIT_FAILURE);
        assert_eq!(
            down.troubleshooting().as_deref(),
            Some("docs/guide/troubleshooting.md#unavailable")
        );
        assert_eq!(Failure::usage("bad flag").troubleshooting(), None);
        let settings = Failure::config(TransportError::config("bootstrap servers are empty"));
        assert_eq!(settings.code, EXIT_CONFIG);
        assert_eq!(
            settings.troubleshooting().as_deref(),
            Some("docs/guide/troubleshooting.md#configuration-errors")
        );
    }
}
