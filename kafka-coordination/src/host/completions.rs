//! The completions of the calls a host hands to its transport: each gives the loop its
//! outcome, or a retriable error when the transport drops it unanswered.

use std::sync::Arc;

use kafka_coordination_core::machine::Event as MachineEvent;

use crate::driver::InFlight;
use crate::error::TransportError;
use crate::transport::Transport;

use super::inbox::{Done, Inbox};
use super::window::{Due, Permit};

/// The completion of a call started in the [`Window`]: gives the loop the outcome (or an
/// error if the transport drops it unanswered), then gives back the place.
pub(super) struct Started<T: Transport + Send + Sync + ?Sized + 'static> {
    pub(super) inbox: Arc<Inbox<T>>,
    pub(super) call: Arc<InFlight>,
    pub(super) slot: usize,
    pub(super) gen: u64,
    pub(super) permit: Option<Permit>,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Started<T> {
    pub(super) fn give(mut self, outcome: Result<MachineEvent, TransportError>) {
        self.call.put(outcome);
        self.finish();
    }

    /// Counts the call finished with no outcome: its driver took the command to run it.
    pub(super) fn skip(mut self) {
        self.finish();
    }

    pub(super) fn finish(&mut self) {
        self.inbox.finished(vec![Done::Call {
            slot: self.slot,
            gen: self.gen,
        }]);
        self.permit = None;
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Drop for Started<T> {
    fn drop(&mut self) {
        if self.permit.is_some() {
            self.call.put(Err(TransportError::retriable(
                "the transport dropped a call without answering it",
            )));
            self.finish();
        }
    }
}

/// A call a candidacy issued in this turn.
pub(super) struct Outgoing {
    pub(super) slot: usize,
    pub(super) gen: u64,
    pub(super) call: Arc<InFlight>,
    pub(super) describe: bool,
    /// A registration: the partition it appends to.
    pub(super) append: Option<i32>,
    pub(super) due: Due,
}

/// The completion of a call handed to the transport with a callback
/// ([`Registrar::append_all`](crate::transport::Registrar::append_all)): gives the loop the outcome, or
/// an error if the transport drops it without an answer.
pub(super) struct Answer<T: Transport + Send + Sync + ?Sized + 'static> {
    pub(super) inbox: Arc<Inbox<T>>,
    pub(super) call: Arc<InFlight>,
    pub(super) slot: usize,
    pub(super) gen: u64,
    pub(super) answered: bool,
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Answer<T> {
    pub(super) fn give(mut self, outcome: Result<MachineEvent, TransportError>) {
        self.answered = true;
        self.call.put(outcome);
        self.finished();
    }

    /// Counts the call finished with no outcome: its driver took the command to run it.
    pub(super) fn skip(mut self) {
        self.answered = true;
        self.finished();
    }

    pub(super) fn finished(&self) {
        self.inbox.finished(vec![Done::Call {
            slot: self.slot,
            gen: self.gen,
        }]);
    }
}

impl<T: Transport + Send + Sync + ?Sized + 'static> Drop for Answer<T> {
    fn drop(&mut self) {
        if !self.answered {
            self.call.put(Err(TransportError::retriable(
                "the transport dropped a registration without answering it",
            )));
            self.finished();
        }
    }
}

/// The most checks one `start_describe_epochs` call carries.
pub const DESCRIBE_BATCH: usize = 256;
