//! The one place where a machine's [`Command`] becomes a transport call and the call's answer
//! becomes the [`Event`] the machine expects. The single-candidacy drivers ([`execute`],
//! [`start_execute`]) and the host's loop (its batched registrations and checks) all go
//! through here, so the rules of the translation are written once:
//!
//! - a fence on a lease write is [`Event::Fenced`], not an error;
//! - a check answered with fewer roles than it asked for is a fatal error;
//! - a notification (`Elected`, `Deposed`, `Ended`) handed to the transport is a driver bug.
//!
//! [`execute`]: super::execute

use std::time::Duration;

use kafka_coordination_core::leadership_status::LeadershipStatus;
use kafka_coordination_core::machine::{Command, Event};
use kafka_coordination_core::record::Role;
use kafka_coordination_core::time::UnixMillis;
use kafka_coordination_core::token::FencingToken;

use crate::error::TransportError;
use crate::transport::{Append, ReadBatch, Transport, Wait as _};

/// What a call started with [`start_execute`] hands its outcome to.
pub(crate) type ExecuteDone = Box<dyn FnOnce(Result<Event, TransportError>) + Send>;

/// The transport call a command becomes.
pub(crate) enum Call {
    /// A registration: [`Registrar::append_all`](crate::transport::Registrar::append_all).
    Append {
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    /// A read of the state partition, which may wait until `wait_until`:
    /// [`StateReader::start_read_partition`](crate::transport::StateReader::start_read_partition).
    Read {
        partition: i32,
        from_offset: i64,
        wait_until: Option<UnixMillis>,
    },
    /// A check of the role's epoch:
    /// [`Coordinator::start_describe_epochs`](crate::transport::Coordinator::start_describe_epochs).
    Check(Role),
    /// A new epoch:
    /// [`Coordinator::start_acquire_epoch`](crate::transport::Coordinator::start_acquire_epoch).
    Acquire {
        role: Role,
        transaction_timeout: Duration,
    },
    /// A lease record:
    /// [`LeaseWriter::start_write_lease`](crate::transport::LeaseWriter::start_write_lease).
    WriteLease {
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        token: FencingToken,
    },
}

impl Call {
    /// The call `command` asks for; a notification is a driver bug.
    pub(crate) fn of(command: Command) -> Result<Call, TransportError> {
        Ok(match command {
            Command::Append {
                partition,
                key,
                value,
            } => Call::Append {
                partition,
                key,
                value,
            },
            Command::ReadPartition {
                partition,
                from_offset,
                wait_until,
            } => Call::Read {
                partition,
                from_offset,
                wait_until,
            },
            Command::DescribeRole { transactional_id } => Call::Check(transactional_id),
            Command::AcquireEpoch {
                transactional_id,
                transaction_timeout,
            } => Call::Acquire {
                role: transactional_id,
                transaction_timeout,
            },
            Command::WriteLease {
                partition,
                key,
                value,
                token,
            } => Call::WriteLease {
                partition,
                key,
                value,
                token,
            },
            Command::Elected { .. } | Command::Deposed { .. } | Command::Ended { .. } => {
                return Err(TransportError::fatal(
                    "driver bug: a notification was sent to the transport",
                ))
            }
        })
    }
}

/// What a registration's outcome is to the machine.
pub(crate) fn appended(outcome: Result<i64, TransportError>) -> Result<Event, TransportError> {
    outcome.map(|offset| Event::Appended { offset })
}

/// What a read's batch is to the machine.
pub(crate) fn read(batch: ReadBatch) -> Event {
    Event::RecordsRead {
        records: batch.records,
        end_offset: batch.end_offset,
        stalled: batch.stalled,
        high_watermark: batch.high_watermark,
    }
}

/// What a check's answer for one role is to the machine.
pub(crate) fn checked(
    answer: Result<LeadershipStatus, TransportError>,
) -> Result<Event, TransportError> {
    answer.map(|status| Event::Described { status })
}

/// What the answers of a check of several roles are to the machine: one event per role
/// asked, in order; a role the transport did not answer gets a fatal error.
pub(crate) fn checks(
    answers: Vec<Result<LeadershipStatus, TransportError>>,
    asked: usize,
) -> impl Iterator<Item = Result<Event, TransportError>> {
    let mut answers = answers.into_iter();
    (0..asked).map(move |_| match answers.next() {
        Some(answer) => checked(answer),
        None => Err(TransportError::fatal(
            "describe_epochs answered fewer roles than it was asked for",
        )),
    })
}

/// What an acquire's outcome is to the machine.
pub(crate) fn granted(
    outcome: Result<FencingToken, TransportError>,
) -> Result<Event, TransportError> {
    outcome.map(|token| Event::EpochGranted { token })
}

/// What a lease write's outcome is to the machine: a fence is an event, not an error.
pub(crate) fn lease_written(written: Result<i64, TransportError>) -> Result<Event, TransportError> {
    match written {
        Ok(offset) => Ok(Event::LeaseWritten { offset }),
        Err(e) if e.is_fenced() => Ok(Event::Fenced),
        Err(e) => Err(e),
    }
}

/// The registration `command` asks for, as one [`Append`] whose outcome goes to `done` as the
/// machine's event; any other command is a driver bug, answered through `done` (`None`).
pub(crate) fn append(command: Command, done: ExecuteDone) -> Option<Append> {
    match Call::of(command) {
        Ok(Call::Append {
            partition,
            key,
            value,
        }) => Some(Append::new(partition, key, value, move |outcome| {
            done(appended(outcome))
        })),
        Ok(_) => {
            done(Err(TransportError::fatal("driver bug: not a registration")));
            None
        }
        Err(e) => {
            done(Err(e));
            None
        }
    }
}

/// The role `command` checks; any other command is a driver bug, returned as an error.
pub(crate) fn check(command: Command) -> Result<Role, TransportError> {
    match Call::of(command)? {
        Call::Check(role) => Ok(role),
        _ => Err(TransportError::fatal("driver bug: not a check")),
    }
}

/// Runs `call` on this thread, waiting for its answer, and turns the answer into the
/// machine's event. A read does not wait for records here (see [`execute`](super::execute)
/// for a read that may).
pub(crate) fn run<T: Transport + ?Sized>(
    transport: &T,
    call: Call,
) -> Result<Event, TransportError> {
    match call {
        Call::Append {
            partition,
            key,
            value,
        } => appended(transport.append(partition, &key, value.as_deref())),
        Call::Read {
            partition,
            from_offset,
            ..
        } => transport
            .read_partition(partition, from_offset, Duration::ZERO)
            .map(read),
        Call::Check(role) => checked(transport.describe_epoch(&role)),
        Call::Acquire {
            role,
            transaction_timeout,
        } => granted(transport.acquire_epoch(&role, transaction_timeout)),
        Call::WriteLease {
            partition,
            key,
            value,
            token,
        } => lease_written(transport.write_lease(partition, &key, value.as_deref(), token)),
    }
}

/// Starts `command`'s call without holding the caller's thread, for an acquire, a lease write,
/// a check or a registration: the transport's `start_*` method (or `append_all` of one record)
/// with `priority` (see
/// [`Coordinator::start_acquire_epoch`](crate::transport::Coordinator::start_acquire_epoch));
/// `done` gets the machine's event, now or later on a thread of the transport's. A read is
/// started by its caller (it may wait, in slices); here it is a driver bug, answered as such.
pub(crate) fn start_execute<T: Transport + ?Sized>(
    transport: &T,
    command: Command,
    priority: i64,
    done: ExecuteDone,
) {
    let call = match Call::of(command) {
        Ok(call) => call,
        Err(e) => return done(Err(e)),
    };
    match call {
        Call::Acquire {
            role,
            transaction_timeout,
        } => transport.start_acquire_epoch(
            role,
            transaction_timeout,
            priority,
            Box::new(move |outcome| done(granted(outcome))),
        ),
        Call::WriteLease {
            partition,
            key,
            value,
            token,
        } => transport.start_write_lease(
            partition,
            key,
            value,
            token,
            priority,
            Box::new(move |written| done(lease_written(written))),
        ),
        Call::Check(role) => transport.start_describe_epochs(
            vec![role],
            priority,
            Box::new(move |answers| {
                let mut events = checks(answers, 1);
                done(events.next().unwrap_or_else(|| {
                    Err(TransportError::fatal(
                        "describe_epochs answered fewer roles than it was asked for",
                    ))
                }))
            }),
        ),
        Call::Append {
            partition,
            key,
            value,
        } => transport.append_all(
            vec![Append::new(partition, key, value, move |outcome| {
                done(appended(outcome))
            })],
            priority,
        ),
        Call::Read { .. } => done(Err(TransportError::fatal(
            "driver bug: a read cannot be started without a thread",
        ))),
    }
}

/// A completion for the transport that still ends its call when the transport drops it
/// unanswered: `answer` is then called with what `dropped` makes (an error saying so).
pub(crate) fn answered_or<T: 'static>(
    dropped: impl FnOnce() -> T + Send + 'static,
    answer: impl FnOnce(T) + Send + 'static,
) -> Box<dyn FnOnce(T) + Send> {
    /// Calls `answer` once: with the outcome, or on drop with `dropped`'s.
    struct Once<T, D: FnOnce() -> T, A: FnOnce(T)> {
        dropped: Option<D>,
        answer: Option<A>,
    }
    impl<T, D: FnOnce() -> T, A: FnOnce(T)> Drop for Once<T, D, A> {
        fn drop(&mut self) {
            if let (Some(dropped), Some(answer)) = (self.dropped.take(), self.answer.take()) {
                answer(dropped());
            }
        }
    }
    let mut once = Once {
        dropped: Some(dropped),
        answer: Some(answer),
    };
    Box::new(move |outcome| {
        once.dropped = None;
        if let Some(answer) = once.answer.take() {
            answer(outcome);
        }
    })
}
