//! The errors: [`Error`], what a candidacy or a term ended with, and [`TransportError`], what a
//! transport call failed with (its [`ErrorKind`] is what the machine reacts to).
//!
//! Every error has a section on the guide's troubleshooting page ([`TROUBLESHOOTING_PAGE`],
//! `docs/guide/troubleshooting.md` in the repository) that says what causes it and what to do:
//! [`Error::troubleshooting_anchor`] and [`TransportError::troubleshooting_anchor`] name it.

use std::time::Duration;

use kafka_coordination_core::machine::{Cleanup, MachineError};
use kafka_coordination_core::record::NameError;
use kafka_coordination_core::token::FencingToken;
use kafka_coordination_core::TimingError;

pub(crate) use kafka_coordination_transport::error::section;
#[doc(inline)]
pub use kafka_coordination_transport::error::{ErrorKind, TransportError, TROUBLESHOOTING_PAGE};

/// Why a candidacy or a term failed. `Display` says what happened, once; `source()` carries
/// the cause where there is one (so `{:#}` with anyhow prints each part once).
///
/// The guide's troubleshooting page (`docs/guide/troubleshooting.md`, [`TROUBLESHOOTING_PAGE`])
/// has a section for each variant: its cause, what the message looks like, and what to do;
/// [`troubleshooting_anchor`](Self::troubleshooting_anchor) names the section of an error.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The role or member name is invalid; the message names which and why.
    ///
    /// What to do: `docs/guide/troubleshooting.md#invalidname`.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// The options are invalid; the message names the field and the values.
    ///
    /// What to do: `docs/guide/troubleshooting.md#invalidoptions`.
    #[error(transparent)]
    InvalidOptions(#[from] TimingError),
    /// The broker fenced this leader: another member holds a newer pair. Stop the role's work.
    ///
    /// What to do: `docs/guide/troubleshooting.md#fenced`.
    #[error("fenced: the pair {token} was superseded by a newer leader")]
    Fenced {
        /// The superseded pair.
        token: FencingToken,
    },
    /// The candidacy was cancelled before it was elected; its registration was withdrawn.
    ///
    /// What to do: `docs/guide/troubleshooting.md#cancelled`.
    #[error("the candidacy was cancelled")]
    Cancelled,
    /// The transport kept failing for longer than the give-up time while not leading.
    ///
    /// What to do: `docs/guide/troubleshooting.md#unavailable`.
    #[error("the transport kept failing for {waited:?} while not leading")]
    Unavailable {
        /// How long it kept failing.
        waited: Duration,
        /// The last failure (also the error's `source()`).
        #[source]
        last: TransportError,
    },
    /// The transport failed in a way retrying cannot fix (configuration, authorization, a
    /// broken producer).
    ///
    /// What to do: `docs/guide/troubleshooting.md#transport`.
    #[error(transparent)]
    Transport(TransportError),
    /// The member left (resigned, or its candidacy was cancelled) but could not finish its exit;
    /// `cleanup` says which steps are missing and what that means for the role.
    ///
    /// What to do: `docs/guide/troubleshooting.md#incomplete`.
    #[error("the exit was incomplete: {cleanup}")]
    Incomplete {
        /// What the exit managed to do.
        cleanup: Cleanup,
        /// The last transport failure met on the way out (also the error's `source()`).
        #[source]
        last: Option<TransportError>,
    },
    /// The driver stopped before the candidate ended: the runtime that ran it shut down (say a
    /// tokio runtime dropped while the handle lived). The term, if any, is over. On the way
    /// out the driver resigned on the spot, as far as the transport let it: `cleanup` says what
    /// it did (`None`: nothing could be tried).
    ///
    /// What to do: `docs/guide/troubleshooting.md#stopped`.
    #[error("the driver stopped with its runtime; {}", match cleanup {
        Some(c) if c.complete() => "the role was left clean".to_owned(),
        Some(c) => format!("the exit was incomplete: {c}"),
        None => "no exit was attempted".to_owned(),
    })]
    Stopped {
        /// What the exit managed to do.
        cleanup: Option<Cleanup>,
        /// The last transport failure met on the way out (also the error's `source()`).
        #[source]
        last: Option<TransportError>,
    },
    /// Another live process uses this member id for this role: it registered, or wrote a
    /// lease, after this member registered. Member ids must be unique per role (say the pod or
    /// host name); two processes with one id would withdraw each other's registration. This
    /// candidacy stopped without touching the role (the other's registration and term stay).
    ///
    /// What to do: `docs/guide/troubleshooting.md#duplicatemember`.
    #[error(
        "another live process uses member id `{member}` for role `{role}`: it wrote a record \
         at offset {offset}, after this member registered at offset {own_registration}; \
         member ids must be unique per role, so this candidacy stopped and left the role alone"
    )]
    DuplicateMember {
        /// The member id.
        member: String,
        /// The role.
        role: String,
        /// The other process's record.
        offset: i64,
        /// This member's registration.
        own_registration: i64,
    },
    /// A driver bug: the machine refused an event. Please report it.
    ///
    /// What to do: `docs/guide/troubleshooting.md#internal`.
    #[error("internal error: {0}")]
    Internal(#[from] MachineError),
}

impl Error {
    /// Whether this is [`Error::Fenced`].
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced { .. })
    }

    /// The anchor of the section of the guide's troubleshooting page
    /// ([`TROUBLESHOOTING_PAGE`]) that explains this error: the variant's name in lower case
    /// (`"duplicatemember"`), or for [`Error::Transport`] the transport error's own section
    /// ([`TransportError::troubleshooting_anchor`]). The command-line tool prints it under a
    /// failure.
    ///
    /// ```
    /// use kafka_coordination::error::{Error, TransportError, TROUBLESHOOTING_PAGE};
    ///
    /// let e = Error::Transport(TransportError::unauthorized("the principal needs the WRITE ACL"));
    /// assert_eq!(
    ///     format!("{TROUBLESHOOTING_PAGE}#{}", e.troubleshooting_anchor()),
    ///     "docs/guide/troubleshooting.md#missing-acls"
    /// );
    /// ```
    pub fn troubleshooting_anchor(&self) -> &'static str {
        match self {
            Error::InvalidName(_) => section::INVALID_NAME,
            Error::InvalidOptions(_) => section::INVALID_OPTIONS,
            Error::Fenced { .. } => section::FENCED,
            Error::Cancelled => section::CANCELLED,
            Error::Unavailable { .. } => section::UNAVAILABLE,
            Error::Transport(t) => t.troubleshooting_anchor(),
            Error::Incomplete { .. } => section::INCOMPLETE,
            Error::Stopped { .. } => section::STOPPED,
            Error::DuplicateMember { .. } => section::DUPLICATE_MEMBER,
            Error::Internal(_) => section::INTERNAL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The troubleshooting page, read from the repository.
    fn page() -> String {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/guide/troubleshooting.md"
        );
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// A heading's anchor as `scripts/docs-check.py` computes it (GitHub's, for headings
    /// without links or underscores).
    fn slug(heading: &str) -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| !matches!(c, '`' | '*' | '_'))
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    }

    /// The anchors of the page's headings (outside code blocks).
    fn anchors(page: &str) -> BTreeSet<String> {
        let mut in_code = false;
        let mut out = BTreeSet::new();
        for line in page.lines() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            let hashes = line.len() - line.trim_start_matches('#').len();
            if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
                out.insert(slug(&line[hashes..]));
            }
        }
        out
    }

    /// The variants of [`Error`] as this file declares them, each with its doc comment.
    fn declared_variants() -> Vec<(String, String)> {
        let source = include_str!("error.rs");
        let start = source.find("pub enum Error {").expect("the enum");
        let body = &source[start..];
        let body = &body[..body.find("\n}\n").expect("its end")];
        let mut out = Vec::new();
        let mut doc = String::new();
        for line in body.lines().skip(1) {
            if let Some(text) = line.strip_prefix("    ///") {
                doc.push_str(text);
                doc.push('\n');
            } else if let Some(rest) = line.strip_prefix("    ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                    out.push((name, std::mem::take(&mut doc)));
                }
            }
        }
        out
    }

    /// One error of each variant (the match in `troubleshooting_anchor` is exhaustive, and
    /// the test below checks that this list names every declared variant).
    fn one_of_each() -> Vec<Error> {
        let token = FencingToken::new(7, 1);
        let cleanup = Cleanup {
            superseded: true,
            lease_cleared: false,
            deregistered: true,
        };
        vec![
            Error::InvalidName(NameError::Empty { what: "role" }),
            Error::InvalidOptions(TimingError::RenewZero {
                renew: Duration::ZERO,
            }),
            Error::Fenced { token },
            Error::Cancelled,
            Error::Unavailable {
                waited: Duration::from_secs(20),
                last: TransportError::retriable("the broker at b:9092 is not answering"),
            },
            Error::Transport(TransportError::config("bootstrap servers are empty")),
            Error::Incomplete {
                cleanup,
                last: None,
            },
            Error::Stopped {
                cleanup: Some(cleanup),
                last: None,
            },
            Error::DuplicateMember {
                member: "m".into(),
                role: "r".into(),
                offset: 9,
                own_registration: 4,
            },
            Error::Internal(MachineError::Ended { event: "Elected" }),
        ]
    }

    fn variant_name(e: &Error) -> String {
        format!("{e:?}")
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect()
    }

    /// Every variant of `Error` has a section on the troubleshooting page, under its own name,
    /// and its rustdoc points to it: a variant added without a section fails here.
    #[test]
    fn every_error_variant_has_a_section_on_the_troubleshooting_page() {
        let anchors = anchors(&page());
        let declared = declared_variants();
        assert!(declared.len() >= 10, "{declared:?}");
        for (name, doc) in &declared {
            let anchor = name.to_lowercase();
            assert!(
                anchors.contains(&anchor),
                "{TROUBLESHOOTING_PAGE} has no section `{name}` (#{anchor}); its headings: \
                 {anchors:?}"
            );
            assert!(
                doc.contains(&format!("troubleshooting.md#{anchor}")),
                "the rustdoc of Error::{name} does not point to its section: {doc}"
            );
        }
        let built: BTreeSet<String> = one_of_each().iter().map(variant_name).collect();
        let declared: BTreeSet<String> = declared.into_iter().map(|(n, _)| n).collect();
        assert_eq!(built, declared, "one_of_each builds every variant");
        for e in one_of_each() {
            match e {
                Error::Transport(_) => {}
                ref e => assert_eq!(e.troubleshooting_anchor(), variant_name(e).to_lowercase()),
            }
        }
    }

    /// Every section an error can name is a heading of the page.
    #[test]
    fn every_section_an_error_names_is_on_the_page() {
        let anchors = anchors(&page());
        for section in section::ALL {
            assert!(
                anchors.contains(section),
                "{TROUBLESHOOTING_PAGE} has no heading for #{section}; its headings: {anchors:?}"
            );
        }
    }
}
