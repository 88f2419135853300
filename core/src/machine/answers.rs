//! How a [`Candidate`] takes the answer to its outstanding call, and how it issues the next
//! one: the leader's renewals and the resign's steps, the standby's reads and checks, and the
//! retries after a failure.

use core::time::Duration;

use super::{backoff, Candidate, Command, EndReason, Event, Io, MachineError, Term};
use super::{BACKOFF_CAP, CLEANUP_ATTEMPTS};
use crate::record::{Key, Lease, Registration};
use crate::time::UnixMillis;

impl Candidate {
    pub(super) fn on_io(&mut self, now: UnixMillis, event: Event) -> Result<(), MachineError> {
        let Some(io) = self.io else {
            return Err(MachineError::Unexpected {
                event: event.name(),
                expected: "no I/O is outstanding",
            });
        };
        let fits = matches!(
            (io, &event),
            (_, Event::Failed)
                | (
                    Io::Register | Io::Deregister | Io::Evict | Io::Announce,
                    Event::Appended { .. }
                )
                | (Io::Read { .. }, Event::RecordsRead { .. })
                | (Io::Describe | Io::Probe, Event::Described { .. })
                | (Io::Acquire | Io::Supersede(_), Event::EpochGranted { .. })
                | (
                    Io::Claim(_) | Io::Renew(_) | Io::ClearLease(_),
                    Event::LeaseWritten { .. }
                )
                | (
                    Io::Claim(_) | Io::Renew(_) | Io::ClearLease(_),
                    Event::Fenced
                )
        );
        if !fits {
            return Err(MachineError::Unexpected {
                event: event.name(),
                expected: io.expects(),
            });
        }
        self.io = None;
        if !matches!(event, Event::Failed) {
            self.failures = 0;
            self.failing_since = None;
            if self.slow(now, io) {
                // A call the transport kept retrying until the cluster served it again (a
                // coordinator or partition leader that moved): as blind as a failed one.
                self.went_blind(self.issued_at);
            }
        }
        match (io, event) {
            (Io::Register, Event::Appended { offset }) => {
                self.served_again(now);
                self.join_offset = Some(offset);
                self.registered_at = self.issued_at;
                if self.resigning {
                    self.issue(Io::Deregister);
                } else {
                    self.issue(Io::Read { wait_until: None });
                }
            }
            (Io::Deregister, Event::Appended { .. }) => {
                self.deregistered = true;
                self.finish(self.pending_end.unwrap_or(EndReason::Resigned));
            }
            (Io::Evict, Event::Appended { .. }) => {
                self.evictions.pop_front();
                self.after_evict(true);
            }
            (Io::Announce, Event::Appended { offset }) => {
                self.announced_at = Some(offset);
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.issue(Io::Acquire);
                }
            }
            (
                Io::Read { wait_until },
                Event::RecordsRead {
                    records,
                    end_offset,
                    stalled,
                    high_watermark,
                },
            ) => {
                let long_poll = wait_until.is_some();
                self.on_read(
                    now,
                    &records,
                    end_offset,
                    stalled,
                    high_watermark,
                    long_poll,
                );
            }
            (Io::Describe, Event::Described { status }) => self.on_described(now, status),
            (Io::Probe, Event::Described { .. }) => {
                // Calls that failed before it (the coordinator was gone) are an outage the
                // holder waited through too; then back to the reads.
                self.served_again(now);
                self.issue(Io::Read { wait_until: None });
            }
            (Io::Acquire, Event::EpochGranted { token }) => {
                self.blind_since = None;
                self.term = Some(Term {
                    token,
                    granted_at: now,
                    elected: false,
                    number: -1,
                });
                self.superseded = false;
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.issue(Io::Claim(token));
                }
            }
            (Io::Supersede(_), Event::EpochGranted { token }) => {
                // The pair this member held is superseded; clear the lease through the new one,
                // which nobody else will ever be handed.
                self.superseded = true;
                self.issue(Io::ClearLease(token));
            }
            (Io::Claim(token), Event::LeaseWritten { offset }) => {
                self.last_lease = Some((self.issued_at, self.written_deadline()));
                if let Some(t) = self.term.as_mut() {
                    t.elected = true;
                    t.number = offset;
                }
                self.lease_written = true;
                self.contested_until = None;
                self.outage_until = None;
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.commands.push_back(Command::Elected {
                        token,
                        term: offset,
                    });
                    if self.evict {
                        self.evictions = self.passed_over();
                    }
                    // The evictions come before the first renewal (they run only while it is
                    // not due): a term with members to evict renews on the plain schedule.
                    let phase = if self.evictions.is_empty() {
                        self.renewal_phase
                    } else {
                        Duration::ZERO
                    };
                    self.renew_grid = self.issued_at + (self.timing.renew_interval - phase);
                    self.renew_phased = !phase.is_zero();
                    self.renew_at = self.next_renewal(now);
                    self.lead_on(token);
                }
            }
            (Io::Renew(token), Event::LeaseWritten { .. }) => {
                self.last_lease = Some((self.issued_at, self.written_deadline()));
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.renew_at = self.next_renewal(now);
                    self.lead_on(token);
                }
            }
            (Io::ClearLease(_), Event::LeaseWritten { .. }) => {
                self.lease_written = false;
                self.deregister_or_finish();
            }
            (Io::Claim(_), Event::Fenced) => {
                // Lost the race: another member minted a newer pair after ours. Wait for the
                // winner's first lease instead of challenging again at once.
                self.term = None;
                self.superseded = true;
                if self.resigning {
                    self.deregister_or_finish();
                } else {
                    self.contested_until = Some(now + self.timing.lease_duration);
                    self.issue(Io::Read { wait_until: None });
                }
            }
            (Io::Renew(token), Event::Fenced) => {
                self.term = None;
                self.superseded = true;
                // The lease names a superseded pair: the new leader overwrites it.
                self.lease_written = false;
                self.commands.push_back(Command::Deposed { token });
                self.pending_end = Some(EndReason::Fenced { token });
                self.deregister_or_finish();
            }
            (Io::ClearLease(_), Event::Fenced) => {
                // Someone took over while we resigned: the hand-over happened anyway.
                self.superseded = true;
                self.lease_written = false;
                self.deregister_or_finish();
            }
            (io, Event::Failed) => self.on_failure(now, io),
            // `fits` admitted only the pairs above.
            (io, event) => {
                self.io = Some(io);
                return Err(MachineError::Unexpected {
                    event: event.name(),
                    expected: io.expects(),
                });
            }
        }
        Ok(())
    }

    fn on_failure(&mut self, now: UnixMillis, io: Io) {
        self.failures = self.failures.saturating_add(1);
        let since = *self.failing_since.get_or_insert(now);
        let leader_cap = (self.timing.renew_interval / 4).min(BACKOFF_CAP);
        let standby_cap = BACKOFF_CAP.min(self.timing.lease_duration);
        match io {
            Io::Announce => {
                // Best effort: the check was made; challenge without the sign.
                if self.resigning {
                    self.start_cleanup();
                } else {
                    self.issue(Io::Acquire);
                }
            }
            Io::Evict => {
                if let Some(front) = self.evictions.front_mut() {
                    front.1 += 1;
                    if front.1 >= CLEANUP_ATTEMPTS {
                        self.evictions.pop_front();
                    }
                }
                self.failures = 0;
                self.after_evict(false);
            }
            Io::Renew(_) => {
                if self.resigning {
                    self.start_cleanup();
                } else {
                    let at = now + backoff(self.failures, leader_cap);
                    self.timer = Some((at, io));
                }
            }
            Io::Supersede(_) | Io::ClearLease(_) | Io::Deregister => {
                if self.failures >= CLEANUP_ATTEMPTS {
                    self.failures = 0;
                    match io {
                        // Best effort: clear the lease through the old pair.
                        Io::Supersede(old) => self.issue(Io::ClearLease(old)),
                        Io::ClearLease(_) => self.deregister_or_finish(),
                        _ => self.finish(self.pending_end.unwrap_or(EndReason::Resigned)),
                    }
                } else {
                    self.timer = Some((now + backoff(self.failures, leader_cap), io));
                }
            }
            Io::Register
            | Io::Read { .. }
            | Io::Describe
            | Io::Probe
            | Io::Acquire
            | Io::Claim(_) => {
                match io {
                    // A long poll may have waited long before the cluster failed it.
                    Io::Read {
                        wait_until: Some(_),
                    } => self.went_blind(now),
                    // An acquire's failure is no sign of an outage of its own: its answer may
                    // be lost after it minted (see `acquire_failed_at`); the read and the check
                    // that follow it show whether the cluster serves the role.
                    Io::Acquire | Io::Claim(_) => {}
                    _ => self.went_blind(self.issued_at),
                }
                if io == Io::Acquire {
                    // It may have minted a pair whose answer was lost.
                    self.acquire_failed_at = Some(now);
                }
                if self.resigning {
                    self.start_cleanup();
                    return;
                }
                if let Some(limit) = self.give_up_after {
                    if now.since(since) >= limit {
                        // Best effort on the way out: supersede a pair it was granted, deregister.
                        self.pending_end = Some(EndReason::Unavailable);
                        self.resigning = true;
                        self.start_cleanup();
                        return;
                    }
                }
                // After a failed acquire, look at the state again before another challenge.
                let retry = match io {
                    Io::Acquire | Io::Read { .. } => Io::Read { wait_until: None },
                    other => other,
                };
                // Reads and checks retry at least every renew interval, so that the end of an
                // outage is seen within one (see "When the cluster cannot serve the role").
                let cap = match retry {
                    Io::Read { .. } | Io::Describe | Io::Probe => {
                        standby_cap.min(self.timing.renew_interval)
                    }
                    _ => standby_cap,
                };
                self.timer = Some((now + backoff(self.failures, cap), retry));
            }
        }
    }

    pub(super) fn finish(&mut self, reason: EndReason) {
        self.io = None;
        self.timer = None;
        self.ended = Some(reason);
        self.commands.push_back(Command::Ended { reason });
    }

    pub(super) fn issue(&mut self, io: Io) {
        let now = self.now;
        self.io = Some(io);
        self.issued_at = now;
        self.lease_delay = Duration::ZERO;
        let cmd = match io {
            Io::Register => Command::Append {
                partition: self.partition,
                key: self.registration_key.clone(),
                value: Some(
                    Registration {
                        member: self.member.clone(),
                        registered_at: now,
                    }
                    .encode(),
                ),
            },
            Io::Deregister => Command::Append {
                partition: self.partition,
                key: self.registration_key.clone(),
                value: None,
            },
            Io::Read { wait_until } => Command::ReadPartition {
                partition: self.partition,
                from_offset: self.state.next_offset(),
                wait_until,
            },
            Io::Describe | Io::Probe => {
                if io == Io::Probe {
                    self.probed_at = Some(now);
                }
                Command::DescribeRole {
                    transactional_id: self.role.clone(),
                }
            }
            Io::Announce => {
                let holder = match self.state.lease() {
                    Some(e) => e.lease.member.clone(),
                    // `acquire` announces only with a lease read; never stall a challenge.
                    None => {
                        self.io = None;
                        self.issue(Io::Acquire);
                        return;
                    }
                };
                Command::Append {
                    partition: self.partition,
                    key: Key::registration(self.role.clone(), holder).encode(),
                    value: None,
                }
            }
            Io::Evict => {
                let Some((member, _)) = self.evictions.front() else {
                    // `lead_on` issues an eviction only with one queued; never stall a leader.
                    self.io = None;
                    if let Some(t) = self.term {
                        self.timer = Some((self.renew_at, Io::Renew(t.token)));
                    }
                    return;
                };
                Command::Append {
                    partition: self.partition,
                    key: Key::registration(self.role.clone(), member.clone()).encode(),
                    value: None,
                }
            }
            Io::Acquire | Io::Supersede(_) => Command::AcquireEpoch {
                transactional_id: self.role.clone(),
                transaction_timeout: self.timing.lease_duration,
            },
            Io::Claim(token) | Io::Renew(token) => {
                let granted_at = self.term.map_or(now, |t| t.granted_at);
                let lease = Lease {
                    member: self.member.clone(),
                    token,
                    granted_at,
                    deadline: now + self.timing.lease_duration,
                };
                Command::WriteLease {
                    partition: self.partition,
                    key: self.lease_key.clone(),
                    value: Some(lease.encode()),
                    token,
                }
            }
            Io::ClearLease(token) => Command::WriteLease {
                partition: self.partition,
                key: self.lease_key.clone(),
                value: None,
                token,
            },
        };
        self.commands.push_back(cmd);
    }
}
