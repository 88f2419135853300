//! The Candidate's life, asserted as exact command lists.

use core::time::Duration;

use kafka_coordination_core::machine::{
    backoff, Candidate, Command, EndReason, Event, MachineError, Status, CLEANUP_ATTEMPTS,
};
use kafka_coordination_core::record::{Key, Lease, MemberId, Registration, Role};
use kafka_coordination_core::state::Record;
use kafka_coordination_core::{role_partition, FencingToken, Timing, UnixMillis};

const T0: i64 = 1_000_000;

fn role() -> Role {
    Role::new("scheduler").unwrap()
}
fn m(s: &str) -> MemberId {
    MemberId::new(s).unwrap()
}
fn timing() -> Timing {
    Timing {
        partitions: 16,
        lease_duration: Duration::from_millis(3000),
        renew_interval: Duration::from_millis(1000),
        challenge_stagger: Duration::from_millis(500),
    }
}
fn part() -> i32 {
    role_partition(&role(), 16).unwrap()
}
fn reg_record(offset: i64, member: &str) -> Record {
    Record::new(
        offset,
        Key::registration(role(), m(member)).encode(),
        Registration {
            member: m(member),
            registered_at: UnixMillis(0),
        }
        .encode(),
    )
}
fn lease_record(offset: i64, member: &str, token: FencingToken, deadline: i64) -> Record {
    Record::new(
        offset,
        Key::lease(role()).encode(),
        Lease {
            member: m(member),
            token,
            granted_at: UnixMillis(0),
            deadline: UnixMillis(deadline),
        }
        .encode(),
    )
}
fn drain(c: &mut Candidate) -> Vec<Command> {
    std::iter::from_fn(|| c.poll_command()).collect()
}
fn lease_write(member: &str, token: FencingToken, granted: i64, deadline: i64) -> Command {
    Command::WriteLease {
        partition: part(),
        key: Key::lease(role()).encode(),
        value: Some(
            Lease {
                member: m(member),
                token,
                granted_at: UnixMillis(granted),
                deadline: UnixMillis(deadline),
            }
            .encode(),
        ),
        token,
    }
}
fn read(from: i64, wait_until: Option<i64>) -> Command {
    Command::ReadPartition {
        partition: part(),
        from_offset: from,
        wait_until: wait_until.map(UnixMillis),
    }
}
fn deregister(member: &str) -> Command {
    Command::Append {
        partition: part(),
        key: Key::registration(role(), m(member)).encode(),
        value: None,
    }
}

/// Drives a lone member to leadership with token 7/0 at T0.
fn elected(member: &str) -> Candidate {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m(member), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 0 }).unwrap();
    drain(&mut c);
    c.handle(
        now,
        Event::RecordsRead {
            records: vec![reg_record(0, member)],
            end_offset: 1,
        },
    )
    .unwrap();
    drain(&mut c);
    c.handle(
        now,
        Event::EpochGranted {
            token: FencingToken::new(7, 0),
        },
    )
    .unwrap();
    drain(&mut c);
    c.handle(now, Event::LeaseWritten { offset: 1 }).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::Elected {
            token: FencingToken::new(7, 0),
            term: 1
        }]
    );
    c
}

#[test]
fn a_lone_member_registers_reads_challenges_and_leads() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("a"), timing(), now).unwrap();
    assert_eq!(c.status(), Status::Registering);
    assert_eq!(
        drain(&mut c),
        [Command::Append {
            partition: part(),
            key: Key::registration(role(), m("a")).encode(),
            value: Some(
                Registration {
                    member: m("a"),
                    registered_at: now
                }
                .encode()
            ),
        }]
    );
    assert_eq!(
        c.poll_timeout(),
        None,
        "nothing to wake for while I/O is outstanding"
    );
    c.handle(now, Event::Appended { offset: 0 }).unwrap();
    assert_eq!(drain(&mut c), [read(0, None)]);
    c.handle(
        now,
        Event::RecordsRead {
            records: vec![reg_record(0, "a")],
            end_offset: 1,
        },
    )
    .unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::AcquireEpoch {
            transactional_id: role(),
            transaction_timeout: Duration::from_millis(3000)
        }]
    );
    assert_eq!(c.status(), Status::Challenging);
    let token = FencingToken::new(7, 0);
    c.handle(now, Event::EpochGranted { token }).unwrap();
    assert_eq!(drain(&mut c), [lease_write("a", token, T0, T0 + 3000)]);
    assert!(
        !c.is_leader(),
        "not a leader before the first lease commits"
    );
    c.handle(now, Event::LeaseWritten { offset: 4 }).unwrap();
    assert_eq!(drain(&mut c), [Command::Elected { token, term: 4 }]);
    assert!(c.is_leader());
    assert_eq!(c.token(), Some(token));
    assert_eq!(
        c.term(),
        Some(4),
        "the term is the first lease record's offset"
    );
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 1000)));
}

#[test]
fn poll_timeout_is_exactly_when_a_tick_acts() {
    let mut c = elected("a");
    let wake = c.poll_timeout().unwrap();
    c.handle(UnixMillis(wake.0 - 1), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(
        c.poll_timeout(),
        Some(wake),
        "an early tick changes nothing"
    );
    c.handle(wake, Event::Tick).unwrap();
    let token = FencingToken::new(7, 0);
    assert_eq!(drain(&mut c), [lease_write("a", token, T0, wake.0 + 3000)]);
    assert_eq!(
        c.poll_timeout(),
        None,
        "the acted-on instant is not returned again"
    );
    c.handle(wake, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [], "an extra tick is a no-op");
    c.handle(UnixMillis(wake.0 + 50), Event::LeaseWritten { offset: 2 })
        .unwrap();
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(wake.0 + 1000)),
        "the next renewal counts from the write's start"
    );
}

#[test]
fn a_fenced_renewal_deposes_the_leader_deregisters_and_ends() {
    let mut c = elected("a");
    let token = FencingToken::new(7, 0);
    c.handle(UnixMillis(T0 + 1000), Event::Tick).unwrap();
    drain(&mut c);
    c.handle(UnixMillis(T0 + 1001), Event::Fenced).unwrap();
    assert_eq!(drain(&mut c), [Command::Deposed { token }, deregister("a")]);
    assert!(!c.is_leader());
    assert_eq!(c.status(), Status::Leaving);
    c.handle(UnixMillis(T0 + 1002), Event::Appended { offset: 9 })
        .unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::Ended {
            reason: EndReason::Fenced { token }
        }]
    );
    assert!(c.deregistered());
    assert_eq!(
        c.handle(UnixMillis(T0 + 1003), Event::LeaseWritten { offset: 2 }),
        Err(MachineError::Ended {
            event: "LeaseWritten"
        })
    );
    assert_eq!(c.handle(UnixMillis(T0 + 1003), Event::Tick), Ok(()));
    assert_eq!(c.handle(UnixMillis(T0 + 1003), Event::Resign), Ok(()));
}

#[test]
fn losing_the_first_lease_write_returns_to_waiting_for_the_winner() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("b"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 1 }).unwrap();
    drain(&mut c);
    let old = FencingToken::new(7, 0);
    let records = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        lease_record(2, "a", old, T0 - 10),
    ];
    c.handle(
        now,
        Event::RecordsRead {
            records,
            end_offset: 3,
        },
    )
    .unwrap();
    assert!(matches!(drain(&mut c)[..], [Command::AcquireEpoch { .. }]));
    c.handle(
        now,
        Event::EpochGranted {
            token: FencingToken::new(7, 1),
        },
    )
    .unwrap();
    drain(&mut c);
    c.handle(now, Event::Fenced).unwrap();
    assert_eq!(drain(&mut c), [read(3, None)], "back to reading, not ended");
    assert!(!c.is_done());
    // The winner's lease is not readable yet: the loser waits a lease duration for it.
    c.handle(
        now,
        Event::RecordsRead {
            records: vec![],
            end_offset: 3,
        },
    )
    .unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 3000)));
    assert_eq!(c.status(), Status::Standby);
}

#[test]
fn standbys_wait_for_deadline_plus_rank_times_stagger_and_re_read_before_challenging() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("c"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    drain(&mut c);
    let token = FencingToken::new(7, 0);
    let records = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        reg_record(2, "c"),
        lease_record(3, "a", token, T0 + 2000),
    ];
    c.handle(
        now,
        Event::RecordsRead {
            records,
            end_offset: 4,
        },
    )
    .unwrap();
    // Records arrived: one more read that may long-poll until our turn (rank 1).
    assert_eq!(drain(&mut c), [read(4, Some(T0 + 2500))]);
    assert_eq!(c.rank(), Some(1));
    c.handle(
        now,
        Event::RecordsRead {
            records: vec![],
            end_offset: 4,
        },
    )
    .unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 2500)));
    c.handle(UnixMillis(T0 + 2500), Event::Tick).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(4, None)],
        "a fresh read comes before any challenge"
    );
    // The leader renewed meanwhile: wait again.
    let renewed = vec![lease_record(4, "a", token, T0 + 4500)];
    c.handle(
        UnixMillis(T0 + 2500),
        Event::RecordsRead {
            records: renewed,
            end_offset: 5,
        },
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(5, Some(T0 + 5000))]);
}

#[test]
fn a_resigning_leader_supersedes_its_pair_clears_the_lease_then_deregisters() {
    let mut c = elected("a");
    let now = UnixMillis(T0 + 10);
    c.handle(now, Event::Resign).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::AcquireEpoch {
            transactional_id: role(),
            transaction_timeout: Duration::from_millis(3000)
        }],
        "first one more epoch, so that the leader's pair is neither authoritative nor writable"
    );
    c.handle(now, Event::Resign).unwrap();
    assert_eq!(drain(&mut c), [], "resign is idempotent");
    let after = FencingToken::new(7, 1);
    c.handle(now, Event::EpochGranted { token: after }).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::WriteLease {
            partition: part(),
            key: Key::lease(role()).encode(),
            value: None,
            token: after
        }],
        "the tombstone goes through the new pair"
    );
    c.handle(now, Event::LeaseWritten { offset: 9 }).unwrap();
    assert_eq!(drain(&mut c), [deregister("a")]);
    c.handle(now, Event::Appended { offset: 10 }).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::Ended {
            reason: EndReason::Resigned
        }]
    );
    assert!(c.cleanup().complete(), "{}", c.cleanup());
}

#[test]
fn a_resign_whose_supersede_keeps_failing_clears_the_lease_with_the_old_pair() {
    let mut c = elected("a");
    let old = FencingToken::new(7, 0);
    let mut now = UnixMillis(T0 + 10);
    c.handle(now, Event::Resign).unwrap();
    for _ in 0..CLEANUP_ATTEMPTS {
        assert!(matches!(drain(&mut c)[..], [Command::AcquireEpoch { .. }]));
        c.handle(now, Event::Failed).unwrap();
        if let Some(wake) = c.poll_timeout() {
            now = wake;
            c.handle(now, Event::Tick).unwrap();
        }
    }
    assert_eq!(
        drain(&mut c),
        [Command::WriteLease {
            partition: part(),
            key: Key::lease(role()).encode(),
            value: None,
            token: old
        }]
    );
    c.handle(now, Event::LeaseWritten { offset: 9 }).unwrap();
    assert_eq!(drain(&mut c), [deregister("a")]);
    c.handle(now, Event::Appended { offset: 10 }).unwrap();
    assert!(c.is_done());
    let cleanup = c.cleanup();
    assert!(!cleanup.superseded && cleanup.lease_cleared && cleanup.deregistered);
    assert!(cleanup.to_string().contains("not superseded"), "{cleanup}");
}

#[test]
fn a_leader_whose_transport_fails_for_good_cleans_up_and_ends_failed() {
    let mut c = elected("a");
    let mut now = UnixMillis(T0);
    // Renew until the renewal fails for good (say an ACL was revoked).
    let wake = c.poll_timeout().unwrap();
    now = now.max(wake);
    c.handle(now, Event::Tick).unwrap();
    assert!(matches!(drain(&mut c)[..], [Command::WriteLease { .. }]));
    c.handle(now, Event::Fatal).unwrap();
    assert!(
        matches!(drain(&mut c)[..], [Command::AcquireEpoch { .. }]),
        "it supersedes its pair before it goes"
    );
    c.handle(
        now,
        Event::EpochGranted {
            token: FencingToken::new(7, 1),
        },
    )
    .unwrap();
    assert!(matches!(
        drain(&mut c)[..],
        [Command::WriteLease { value: None, .. }]
    ));
    c.handle(now, Event::Fatal).unwrap();
    assert_eq!(
        drain(&mut c),
        [deregister("a")],
        "a step that fails for good is skipped"
    );
    c.handle(now, Event::Appended { offset: 12 }).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::Ended {
            reason: EndReason::Failed
        }]
    );
    let cleanup = c.cleanup();
    assert!(cleanup.superseded && !cleanup.lease_cleared && cleanup.deregistered);
}

#[test]
fn a_fatal_error_before_registering_ends_at_once() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("a"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Fatal).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::Ended {
            reason: EndReason::Failed
        }]
    );
    assert!(c.cleanup().complete());
}

#[test]
fn resign_during_outstanding_io_waits_for_the_answer() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("a"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 0 }).unwrap();
    drain(&mut c);
    c.handle(
        now,
        Event::RecordsRead {
            records: vec![reg_record(0, "a")],
            end_offset: 1,
        },
    )
    .unwrap();
    drain(&mut c);
    c.handle(now, Event::Resign).unwrap();
    assert_eq!(drain(&mut c), [], "the AcquireEpoch is still outstanding");
    c.handle(
        now,
        Event::EpochGranted {
            token: FencingToken::new(7, 0),
        },
    )
    .unwrap();
    assert!(
        matches!(drain(&mut c)[..], [Command::AcquireEpoch { .. }]),
        "the granted pair is superseded at once: no lease is written after a resign"
    );
    c.handle(
        now,
        Event::EpochGranted {
            token: FencingToken::new(7, 1),
        },
    )
    .unwrap();
    assert!(matches!(
        drain(&mut c)[..],
        [Command::WriteLease { value: None, .. }]
    ));
    c.handle(now, Event::LeaseWritten { offset: 1 }).unwrap();
    assert_eq!(drain(&mut c), [deregister("a")]);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::Ended {
            reason: EndReason::Resigned
        }]
    );
}

#[test]
fn events_that_do_not_fit_are_errors_and_change_nothing() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("a"), timing(), now).unwrap();
    drain(&mut c);
    let err = c
        .handle(now, Event::LeaseWritten { offset: 0 })
        .unwrap_err();
    assert!(matches!(
        err,
        MachineError::Unexpected {
            event: "LeaseWritten",
            ..
        }
    ));
    assert!(
        err.to_string().contains("an Append is outstanding"),
        "{err}"
    );
    // The Append is still outstanding and its answer still works.
    c.handle(now, Event::Appended { offset: 0 }).unwrap();
    assert_eq!(drain(&mut c), [read(0, None)]);
    let mut idle = elected("a");
    assert!(matches!(
        idle.handle(now, Event::Fenced),
        Err(MachineError::Unexpected {
            expected: "no I/O is outstanding",
            ..
        })
    ));
    assert_eq!(idle.poll_timeout(), Some(UnixMillis(T0 + 1000)));
}

#[test]
fn a_leader_keeps_renewing_through_failures_and_never_fences_itself() {
    let mut c = elected("a");
    let mut now = c.poll_timeout().unwrap();
    c.handle(now, Event::Tick).unwrap();
    drain(&mut c);
    // Fail every renewal for ten lease durations.
    let mut attempt = 0;
    while now.0 < T0 + 30_000 {
        attempt += 1;
        c.handle(now, Event::Failed).unwrap();
        assert_eq!(drain(&mut c), []);
        let wake = c.poll_timeout().unwrap();
        assert_eq!(
            wake.0 - now.0,
            backoff(attempt, Duration::from_millis(250)).as_millis() as i64
        );
        assert!(
            wake.0 - now.0 <= 250,
            "retries stay below the renew interval"
        );
        now = wake;
        c.handle(now, Event::Tick).unwrap();
        assert!(matches!(drain(&mut c)[..], [Command::WriteLease { .. }]));
        assert!(c.is_leader());
    }
    c.handle(now, Event::LeaseWritten { offset: 3 }).unwrap();
    assert!(c.is_leader());
    assert_eq!(c.term(), Some(1), "renewals do not change the term");
}

#[test]
fn a_standby_gives_up_after_the_configured_time_of_failures() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("a"), timing(), now).unwrap();
    c.set_give_up_after(Some(Duration::from_secs(10)));
    drain(&mut c);
    let mut t = now;
    for _ in 0..100 {
        c.handle(t, Event::Failed).unwrap();
        if c.is_done() {
            break;
        }
        let cmds = drain(&mut c);
        assert!(cmds.is_empty());
        t = c.poll_timeout().unwrap();
        c.handle(t, Event::Tick).unwrap();
        assert!(
            matches!(drain(&mut c)[..], [Command::Append { .. }]),
            "the registration is retried"
        );
    }
    assert_eq!(c.end_reason(), Some(EndReason::Unavailable));
    assert!(
        t.0 - T0 >= 10_000 && t.0 - T0 < 16_000,
        "gave up at {}",
        t.0 - T0
    );
}

#[test]
fn time_that_goes_backwards_is_clamped() {
    let mut c = elected("a");
    let wake = c.poll_timeout().unwrap();
    c.handle(UnixMillis(T0 + 900), Event::Tick).unwrap();
    c.handle(UnixMillis(0), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(c.poll_timeout(), Some(wake));
}

#[test]
fn invalid_timing_is_refused() {
    let bad = Timing {
        renew_interval: Duration::from_secs(5),
        lease_duration: Duration::from_secs(5),
        ..timing()
    };
    assert!(Candidate::new(role(), m("a"), bad, UnixMillis(0)).is_err());
}

mod random {
    use super::*;
    use proptest::prelude::*;

    fn event() -> impl Strategy<Value = (u16, Event)> {
        let ev = prop_oneof![
            (0i64..50).prop_map(|o| Event::Appended { offset: o }),
            (0i64..8, prop::bool::ANY).prop_map(|(n, lease)| {
                let mut records: Vec<Record> = (0..n)
                    .map(|i| reg_record(i, if i % 2 == 0 { "a" } else { "b" }))
                    .collect();
                if lease {
                    records.push(lease_record(n, "b", FencingToken::new(1, 1), T0 + 500));
                }
                Event::RecordsRead {
                    records,
                    end_offset: n + 1,
                }
            }),
            (0i16..5).prop_map(|e| Event::EpochGranted {
                token: FencingToken::new(3, e)
            }),
            (0i64..20).prop_map(|offset| Event::LeaseWritten { offset }),
            Just(Event::Fenced),
            Just(Event::Failed),
            Just(Event::Fatal),
            Just(Event::Tick),
            Just(Event::Tick),
            Just(Event::Resign),
        ];
        (0u16..3000, ev)
    }

    proptest! {
        #[test]
        fn random_events_never_panic_and_keep_one_io_outstanding(events in prop::collection::vec(event(), 1..80)) {
            let mut now = T0;
            let mut c = Candidate::new(role(), m("a"), timing(), UnixMillis(now)).unwrap();
            let mut outstanding = drain(&mut c).len();
            prop_assert_eq!(outstanding, 1);
            for (dt, ev) in events {
                now += i64::from(dt);
                let answers_io = !matches!(ev, Event::Tick | Event::Resign);
                let tick = matches!(ev, Event::Tick);
                let ok = c.handle(UnixMillis(now), ev).is_ok();
                if ok && answers_io { outstanding -= 1; }
                for cmd in drain(&mut c) {
                    if matches!(cmd, Command::Append { .. } | Command::ReadPartition { .. } | Command::AcquireEpoch { .. } | Command::WriteLease { .. }) {
                        outstanding += 1;
                    }
                }
                prop_assert!(outstanding <= 1, "more than one I/O command outstanding");
                if let Some(w) = c.poll_timeout() {
                    prop_assert_eq!(outstanding, 0, "a timer while I/O is outstanding");
                    if tick {
                        prop_assert!(w.0 > now, "a tick left a due timer behind: busy loop");
                    }
                }
                if c.is_done() { prop_assert_eq!(c.poll_timeout(), None); }
            }
        }
    }
}

#[test]
fn an_outside_fence_deposes_the_leader_at_once() {
    let mut c = elected("a");
    let token = FencingToken::new(7, 0);
    let now = UnixMillis(T0 + 10);
    // Another pair is ignored.
    c.handle(
        now,
        Event::Superseded {
            token: FencingToken::new(7, 9),
        },
    )
    .unwrap();
    assert_eq!(drain(&mut c), []);
    assert!(c.is_leader());
    c.handle(now, Event::Superseded { token }).unwrap();
    assert_eq!(drain(&mut c), [Command::Deposed { token }, deregister("a")]);
    assert!(!c.is_leader());
    c.handle(now, Event::Appended { offset: 9 }).unwrap();
    assert_eq!(
        drain(&mut c),
        [Command::Ended {
            reason: EndReason::Fenced { token }
        }]
    );
}

#[test]
fn an_outside_fence_during_a_renewal_waits_for_its_answer() {
    let mut c = elected("a");
    let token = FencingToken::new(7, 0);
    let wake = c.poll_timeout().unwrap();
    c.handle(wake, Event::Tick).unwrap();
    assert!(matches!(drain(&mut c)[..], [Command::WriteLease { .. }]));
    c.handle(wake, Event::Superseded { token }).unwrap();
    assert_eq!(drain(&mut c), [], "one I/O outstanding at a time");
    // The renewal commits (it raced the fence); the fence is acted on right after.
    c.handle(wake, Event::LeaseWritten { offset: 5 }).unwrap();
    assert_eq!(drain(&mut c), [Command::Deposed { token }, deregister("a")]);
}
