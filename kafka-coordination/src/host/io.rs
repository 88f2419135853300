//! How the loop hands the calls of a turn to the transport: registrations in batches, checks
//! of several roles at once, lease writes and acquires, and one read per partition.

use std::sync::Arc;
use std::time::Duration;

use kafka_coordination_core::time::UnixMillis;

use crate::clock::Clock;
use crate::driver::dispatch::{self, answered_or, start_execute, ExecuteDone};
use crate::error::TransportError;
use crate::transport::Transport;
use kafka_coordination_transport::lock::lock;

use super::completions::{Answer, Outgoing, Started, DESCRIBE_BATCH};
use super::event_loop::Core;
use super::inbox::Done;
use super::window::{Due, Start};

impl<T: Transport + Send + Sync + ?Sized + 'static> Core<T> {
    /// The registrations of this turn as one job of
    /// [`append_all`](crate::transport::Registrar::append_all): the appends of one partition are queued
    /// together before its first batch is sent.
    pub(super) fn append_jobs(&self, appends: Vec<Outgoing>) -> Vec<(Due, Start)> {
        if appends.is_empty() {
            return Vec::new();
        }
        let chunks = vec![appends];
        chunks
            .into_iter()
            .map(|chunk| {
                let inbox = self.inbox.clone();
                let due = chunk.iter().map(|c| c.due).min().unwrap_or(Due::MIN);
                let job: Start = Box::new(move |place| {
                    // The place is given back once every append of the job is answered.
                    let place = Arc::new(place);
                    let mut appends = Vec::with_capacity(chunk.len());
                    for c in chunk {
                        let place = Arc::clone(&place);
                        let answer = Answer {
                            inbox: inbox.clone(),
                            call: c.call.clone(),
                            slot: c.slot,
                            gen: c.gen,
                            answered: false,
                        };
                        match c.call.start(inbox.clock.now()) {
                            Some(command) => {
                                let done: ExecuteDone = Box::new(move |outcome| {
                                    answer.give(outcome);
                                    drop(place);
                                });
                                appends.extend(dispatch::append(command, done));
                            }
                            // Taken by a driver exiting on the spot: it runs it itself.
                            None => answer.skip(),
                        }
                    }
                    inbox.transport.append_all(appends, due);
                });
                (due, job)
            })
            .collect()
    }

    /// Hands the calls of this turn over, each holding a place in the [`Window`](super::window::Window)
    /// until it is answered: the checks (DescribeRole) of up to [`DESCRIBE_BATCH`]
    /// candidacies in one call of
    /// [`start_describe_epochs`](crate::transport::Coordinator::start_describe_epochs), the registrations
    /// in one call of [`append_all`](crate::transport::Registrar::append_all) (see
    /// [`Core::append_jobs`]), every other call alone.
    pub(super) fn flush_calls(&mut self) {
        let calls = std::mem::take(&mut self.outgoing);
        // One completion per call, whether alone or in a batch.
        self.in_flight += calls.len();
        let (describes, singles): (Vec<Outgoing>, Vec<Outgoing>) =
            calls.into_iter().partition(|c| c.describe);
        let (appends, singles): (Vec<Outgoing>, Vec<Outgoing>) =
            singles.into_iter().partition(|c| c.append.is_some());
        for (due, job) in self.append_jobs(appends) {
            self.window.submit(due, job);
        }
        for c in singles {
            let inbox = self.inbox.clone();
            self.window.submit(
                c.due,
                Box::new(move |permit| {
                    let started = Started {
                        inbox: inbox.clone(),
                        call: Arc::clone(&c.call),
                        slot: c.slot,
                        gen: c.gen,
                        permit: Some(permit),
                    };
                    match c.call.start(inbox.clock.now()) {
                        Some(cmd) => start_execute(
                            &*inbox.transport,
                            cmd,
                            c.due,
                            Box::new(move |outcome| started.give(outcome)),
                        ),
                        // Taken by a driver exiting on the spot: it runs it itself.
                        None => started.skip(),
                    }
                }),
            );
        }
        let mut describes = describes.into_iter().peekable();
        while describes.peek().is_some() {
            let batch: Vec<Outgoing> = describes.by_ref().take(DESCRIBE_BATCH).collect();
            let due = batch.iter().map(|c| c.due).min().unwrap_or(Due::MIN);
            let check = self.check_job(batch, due);
            self.window.submit(due, check);
        }
    }

    /// The checks (DescribeRole) of `batch`, in one
    /// [`start_describe_epochs`](crate::transport::Coordinator::start_describe_epochs): the answers are
    /// handed to each call, and the loop is told, from whichever thread has them.
    pub(super) fn check_job(&self, batch: Vec<Outgoing>, due: Due) -> Start {
        let inbox = self.inbox.clone();
        Box::new(move |place| {
            let mut roles = Vec::with_capacity(batch.len());
            let mut asked = Vec::with_capacity(batch.len());
            for c in &batch {
                // A call taken by a driver exiting on the spot is skipped: it runs it itself.
                if let Some(command) = c.call.start(inbox.clock.now()) {
                    match dispatch::check(command) {
                        Ok(role) => {
                            roles.push(role);
                            asked.push(Arc::clone(&c.call));
                        }
                        Err(e) => c.call.put(Err(e)),
                    }
                }
            }
            let finished: Vec<Done> = batch
                .iter()
                .map(|c| Done::Call {
                    slot: c.slot,
                    gen: c.gen,
                })
                .collect();
            drop(batch);
            let transport = Arc::clone(&inbox.transport);
            let n = roles.len();
            transport.start_describe_epochs(
                roles,
                due,
                answered_or(
                    move || {
                        (0..n)
                            .map(|_| {
                                Err(TransportError::retriable(
                                    "the transport dropped a check without answering it",
                                ))
                            })
                            .collect()
                    },
                    move |answers: Vec<Result<_, TransportError>>| {
                        let events = dispatch::checks(answers, asked.len());
                        for (call, event) in asked.into_iter().zip(events) {
                            call.put(event);
                        }
                        inbox.finished(finished);
                        drop(place);
                    },
                ),
            );
        })
    }

    /// Partitions the transport's tail moved: their parked long polls are refreshed now.
    pub(super) fn take_tail_news(&mut self) {
        let news = std::mem::take(&mut *lock(&self.inbox.tail_news));
        for partition in news {
            self.views.refresh_now(partition);
        }
    }

    pub(super) fn issue_reads(&mut self, now: UnixMillis) {
        for fetch in self.views.fetches(now, self.changes()) {
            let inbox = self.inbox.clone();
            self.in_flight += 1;
            // Only long polls wait on it (no request needs a fresh read): from the
            // transport's tail if it has one, here, with no request and no thread.
            if fetch.may_lag && self.tail_hook.is_some() {
                if let Some(batch) = inbox.transport.read_tailed(fetch.partition, fetch.from) {
                    self.tailed_reads += 1;
                    inbox.finished(vec![Done::Read {
                        partition: fetch.partition,
                        outcome: Ok(batch),
                    }]);
                    continue;
                }
            }
            self.reads += 1;
            let job: Start = Box::new(move |place| {
                let transport = Arc::clone(&inbox.transport);
                // A read answers every candidacy of the partition that waits: first.
                transport.start_read_partition(
                    fetch.partition,
                    fetch.from,
                    Duration::ZERO,
                    Due::MIN,
                    answered_or(
                        || {
                            Err(TransportError::retriable(
                                "the transport dropped a read without answering it",
                            ))
                        },
                        move |outcome| {
                            inbox.finished(vec![Done::Read {
                                partition: fetch.partition,
                                outcome,
                            }]);
                            drop(place);
                        },
                    ),
                );
            });
            // A read answers every candidacy of the partition that waits: first.
            self.window.submit(Due::MIN, job);
        }
    }
}
