//! The Candidate's life, asserted as exact command lists.

use core::time::Duration;

use kafka_coordination_core::machine::{
    backoff, renewal_phase, Candidate, Command, EndReason, Event, MachineError, Status,
    CLEANUP_ATTEMPTS,
};
use kafka_coordination_core::record::{Key, Lease, MemberId, Registration, Role};
use kafka_coordination_core::state::Record;
use kafka_coordination_core::{
    role_partition, FencingToken, LeadershipStatus, Timing, TransactionState, UnixMillis,
};

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
fn describe() -> Command {
    Command::DescribeRole {
        transactional_id: role(),
    }
}
fn acquire() -> Command {
    Command::AcquireEpoch {
        transactional_id: role(),
        transaction_timeout: Duration::from_millis(3000),
    }
}
fn status(token: FencingToken, state: TransactionState) -> Event {
    Event::Described {
        status: LeadershipStatus::described(token.producer_id, token.producer_epoch, state),
    }
}
fn records(records: Vec<Record>, end_offset: i64) -> Event {
    Event::RecordsRead {
        records,
        end_offset,
        stalled: false,
        high_watermark: Some(end_offset),
    }
}
fn stalled(end_offset: i64) -> Event {
    stalled_with(vec![], end_offset)
}
/// A read that stopped at `end_offset`, short of the log's end (two records further), with
/// `records` before it.
fn stalled_with(records: Vec<Record>, end_offset: i64) -> Event {
    stalled_below(records, end_offset, Some(end_offset + 2))
}
/// A read that stopped at `end_offset`, with `records` before it, short of `high_watermark`.
fn stalled_below(records: Vec<Record>, end_offset: i64, high_watermark: Option<i64>) -> Event {
    Event::RecordsRead {
        records,
        end_offset,
        stalled: true,
        high_watermark,
    }
}
/// `member`'s registration at `at`, as the machine appends it.
fn register(member: &str, at: UnixMillis) -> Command {
    Command::Append {
        partition: part(),
        key: Key::registration(role(), m(member)).encode(),
        value: Some(
            Registration {
                member: m(member),
                registered_at: at,
            }
            .encode(),
        ),
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
    elected_with_phase(member, Duration::ZERO)
}

/// [`elected`], with a renewal phase set before the claim.
fn elected_with_phase(member: &str, phase: Duration) -> Candidate {
    elected_after(member, |c| c.set_renewal_phase(phase))
}

/// Elected at `T0` with no other member, `setup` applied to the new machine first.
fn elected_after(member: &str, setup: impl FnOnce(&mut Candidate)) -> Candidate {
    elected_when(member, setup, UnixMillis(T0))
}

/// [`elected_after`], with the claim's lease write (issued at `T0`) finishing at `written`.
fn elected_when(
    member: &str,
    setup: impl FnOnce(&mut Candidate),
    written: UnixMillis,
) -> Candidate {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m(member), timing(), now).unwrap();
    setup(&mut c);
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 0 }).unwrap();
    drain(&mut c);
    c.handle(now, records(vec![reg_record(0, member)], 1))
        .unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        now,
        Event::Described {
            status: LeadershipStatus::NOT_FOUND,
        },
    )
    .unwrap();
    assert_eq!(drain(&mut c), [acquire()]);
    c.handle(
        now,
        Event::EpochGranted {
            token: FencingToken::new(7, 0),
        },
    )
    .unwrap();
    drain(&mut c);
    c.handle(written, Event::LeaseWritten { offset: 1 })
        .unwrap();
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
    c.handle(now, records(vec![reg_record(0, "a")], 1)).unwrap();
    assert_eq!(
        drain(&mut c),
        [describe()],
        "its turn has come: first a check that no challenge is under way"
    );
    assert_eq!(c.status(), Status::Standby);
    c.handle(
        now,
        Event::Described {
            status: LeadershipStatus::NOT_FOUND,
        },
    )
    .unwrap();
    assert_eq!(
        drain(&mut c),
        [acquire()],
        "nobody ever took the role: no lease can exist, challenge at once"
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
fn a_renewal_issued_late_keeps_the_next_one_on_schedule() {
    let token = FencingToken::new(7, 0);
    let mut c = elected("a");
    let wake = c.poll_timeout().unwrap();
    // The loop driving the machine fell behind: the tick comes 300 ms late.
    c.handle(UnixMillis(wake.0 + 300), Event::Tick).unwrap();
    assert_eq!(
        drain(&mut c),
        [lease_write("a", token, T0, wake.0 + 300 + 3000)],
        "the lease counts from the write's start, as always"
    );
    c.handle(UnixMillis(wake.0 + 350), Event::LeaseWritten { offset: 2 })
        .unwrap();
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(wake.0 + 1000)),
        "a renew interval after the late renewal was due, not after it was issued"
    );
    // Late again, and finished only after the next one was due: the next counts from this
    // one's start.
    c.handle(UnixMillis(wake.0 + 1300), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [lease_write("a", token, T0, wake.0 + 4300)]);
    c.handle(UnixMillis(wake.0 + 2100), Event::LeaseWritten { offset: 3 })
        .unwrap();
    assert_eq!(c.poll_timeout(), Some(UnixMillis(wake.0 + 2300)));
    // That one renewal was off the schedule, on time: the next is back on it (a renew
    // interval after its start would be wake + 3300).
    c.handle(UnixMillis(wake.0 + 2300), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [lease_write("a", token, T0, wake.0 + 5300)]);
    c.handle(UnixMillis(wake.0 + 2320), Event::LeaseWritten { offset: 4 })
        .unwrap();
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(wake.0 + 3000)),
        "the schedule outlives a renewal that missed its slot"
    );
}

#[test]
fn a_lease_write_that_began_late_is_accounted_with_the_deadline_its_record_carries() {
    let token = FencingToken::new(7, 0);
    let mut c = elected("a");
    assert_eq!(
        c.last_lease(),
        Some((UnixMillis(T0), UnixMillis(T0 + 3000))),
        "the claim began when it was issued"
    );
    let wake = c.poll_timeout().unwrap();
    c.handle(wake, Event::Tick).unwrap();
    let issued = lease_write("a", token, T0, wake.0 + 3000);
    assert_eq!(drain(&mut c), std::slice::from_ref(&issued));
    // The driver queued the write for 700 ms and moved its record's deadline as much.
    let Command::WriteLease {
        value: Some(value), ..
    } = &issued
    else {
        unreachable!()
    };
    let moved = Lease::decode(&Lease::delayed(value, Duration::from_millis(700)).unwrap()).unwrap();
    assert_eq!(moved.deadline, UnixMillis(wake.0 + 3700));
    assert_eq!(
        Lease {
            deadline: UnixMillis(wake.0 + 3000),
            ..moved.clone()
        },
        Lease::decode(value).unwrap(),
        "only the deadline moves"
    );
    c.lease_write_delayed(Duration::from_millis(700));
    c.handle(UnixMillis(wake.0 + 750), Event::LeaseWritten { offset: 2 })
        .unwrap();
    assert_eq!(
        c.last_lease(),
        Some((wake, moved.deadline)),
        "the machine names the deadline the record carries"
    );
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(wake.0 + 1000)),
        "the renewal schedule does not move"
    );
    // The next write starts from nothing: a delay reported earlier does not carry over, and
    // one reported with no lease write outstanding changes nothing.
    c.lease_write_delayed(Duration::from_millis(5000));
    c.handle(UnixMillis(wake.0 + 1000), Event::Tick).unwrap();
    drain(&mut c);
    c.handle(UnixMillis(wake.0 + 1010), Event::LeaseWritten { offset: 3 })
        .unwrap();
    assert_eq!(
        c.last_lease(),
        Some((UnixMillis(wake.0 + 1000), UnixMillis(wake.0 + 4000)))
    );
}

#[test]
fn a_role_whose_writes_keep_finishing_after_its_point_gets_back_on_its_schedule() {
    // A process whose calls wait in a queue: every lease write takes 700 ms. The role's phase
    // (600 ms) puts its renewals at T0 + 400, + 1400, + 2400, ...; the claim, issued at T0,
    // finishes after the first of them. A rule that waited a renew interval after each missed
    // write's start would renew at T0 + 1000, + 2000, + 3000, ... for as long as the writes
    // stay slow, in step with every role claimed at T0. Renewing at once after a write that
    // missed its point brings the role back to its own points.
    let token = FencingToken::new(7, 0);
    let took = 700;
    let mut c = elected_when(
        "a",
        |c| c.set_renewal_phase(Duration::from_millis(600)),
        UnixMillis(T0 + took),
    );
    let mut issued = vec![];
    let mut last_start = T0;
    for offset in 2..8 {
        let due = c.poll_timeout().unwrap().0;
        // The loop acts when it can: not before the write in flight finished.
        let at = due.max(last_start + took);
        assert!(
            at <= last_start + 1000,
            "a renewal {} ms after the last write's start: later than a renew interval",
            at - last_start
        );
        c.handle(UnixMillis(at), Event::Tick).unwrap();
        assert_eq!(drain(&mut c), [lease_write("a", token, T0, at + 3000)]);
        c.handle(UnixMillis(at + took), Event::LeaseWritten { offset })
            .unwrap();
        issued.push(at - T0);
        last_start = at;
    }
    assert_eq!(
        issued,
        [700, 1400, 2400, 3400, 4400, 5400],
        "two early renewals, then the role's own points"
    );
}

#[test]
fn a_member_whose_first_read_stops_short_of_its_registration_keeps_reading() {
    // A process that claims thousands of roles at once: the partition's reads stall behind
    // another role's open transaction, short of this member's registration (offset 5). Until
    // it reads its registration it must assume a lease may exist (its turn is a lease after it
    // registered, T0 + 3000), but it keeps reading and takes its real turn once the stall ends.
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("a"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 5 }).unwrap();
    assert_eq!(drain(&mut c), [read(0, None)]);
    // The first read stops short: a long poll follows at once, until the turn.
    c.handle(UnixMillis(T0 + 10), stalled(5)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(5, Some(T0 + 3000))],
        "long-poll for the registration, not sleep until a lease after registering"
    );
    // A reader that answers long polls at once: read again a RECHECK later, no busy loop.
    c.handle(UnixMillis(T0 + 20), stalled(5)).unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 120)));
    c.handle(UnixMillis(T0 + 120), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(5, None)]);
    // Still stalled: a long poll again, and a RECHECK after its empty answer.
    c.handle(UnixMillis(T0 + 130), stalled(5)).unwrap();
    assert_eq!(drain(&mut c), [read(5, Some(T0 + 3000))]);
    c.handle(UnixMillis(T0 + 140), stalled(5)).unwrap();
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 240)));
    // The stall ends: its registration shows an unleased role, and it checks at once.
    c.handle(UnixMillis(T0 + 240), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(5, None)]);
    c.handle(UnixMillis(T0 + 250), records(vec![reg_record(5, "a")], 6))
        .unwrap();
    assert_eq!(drain(&mut c), [describe()]);
}

#[test]
fn a_claim_that_finishes_late_keeps_the_phase_of_the_renewals_after_it() {
    // A process claiming thousands of roles at once finishes some claims seconds late. Their
    // renewals keep the role's phase (600 ms: due at T0 + 400, + 1400, + 2400, ...) instead
    // of falling in step with when the claims happened to finish.
    let token = FencingToken::new(7, 0);
    let phase = Duration::from_millis(600);
    // Finished 2.5 renew intervals after it was issued: renew at once (a renew interval after
    // the claim's start has passed), then back on the schedule.
    let mut c = elected_when("a", |c| c.set_renewal_phase(phase), UnixMillis(T0 + 2500));
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(T0 + 400)),
        "due since T0 + 400"
    );
    c.handle(UnixMillis(T0 + 2500), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [lease_write("a", token, T0, T0 + 5500)]);
    c.handle(UnixMillis(T0 + 2520), Event::LeaseWritten { offset: 2 })
        .unwrap();
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(T0 + 3400)),
        "the phase's slot, not a renew interval after the late renewal (T0 + 3500)"
    );
    // Finished after the phase's first slot but within a renew interval: the first renewal
    // is due at once (not a renew interval after the claim, T0 + 1000), and the second is on
    // the schedule again.
    let mut c = elected_when("a", |c| c.set_renewal_phase(phase), UnixMillis(T0 + 700));
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 400)));
    c.handle(UnixMillis(T0 + 700), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [lease_write("a", token, T0, T0 + 3700)]);
    c.handle(UnixMillis(T0 + 710), Event::LeaseWritten { offset: 2 })
        .unwrap();
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 1400)));
}

#[test]
fn a_renewal_phase_brings_only_the_first_renewal_of_a_term_earlier() {
    let token = FencingToken::new(7, 0);
    let mut c = elected_with_phase("a", Duration::from_millis(600));
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(T0 + 400)),
        "a renew interval (1 s) after the claim, less the phase"
    );
    c.handle(UnixMillis(T0 + 400), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [lease_write("a", token, T0, T0 + 3400)]);
    c.handle(UnixMillis(T0 + 420), Event::LeaseWritten { offset: 2 })
        .unwrap();
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(T0 + 1400)),
        "later renewals come every renew interval"
    );
    // A phase of a renew interval or more counts modulo the interval.
    let c = elected_with_phase("a", Duration::from_millis(2250));
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 750)));
    let c = elected_with_phase("a", Duration::from_millis(1000));
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 1000)));
}

#[test]
fn renewal_phases_spread_over_the_interval_even_for_names_alike() {
    let interval = Duration::from_secs(3);
    let mut tenths = [0usize; 10];
    for i in 0..1000 {
        let role = Role::new(format!("shard-{i}")).unwrap();
        let phase = renewal_phase(&role, interval);
        assert!(phase < interval, "{phase:?}");
        tenths[(phase.as_nanos() * 10 / interval.as_nanos()) as usize] += 1;
    }
    // 100 expected in each tenth; plain FNV-1a put 200 such names into 3 of 10.
    assert!(
        tenths.iter().all(|&n| (60..=140).contains(&n)),
        "{tenths:?}"
    );
    let role = Role::new("shard-7").unwrap();
    assert_eq!(
        renewal_phase(&role, interval),
        renewal_phase(&Role::new("shard-7").unwrap(), interval),
        "a role's phase is the same in every process"
    );
    assert_eq!(renewal_phase(&role, Duration::ZERO), Duration::ZERO);
    // A known value, computed apart from this crate (a few lines of Python over the same
    // FNV-1a and finalizer), so that a change of the hash, which would move every hosted
    // role's renewals, shows up here.
    const PHASE_OF_SHARD_7: u64 = 1_031_356_720;
    assert_eq!(
        renewal_phase(&role, Duration::from_nanos(1 << 32)),
        Duration::from_nanos(PHASE_OF_SHARD_7)
    );
}

#[test]
fn spread_renewals_sets_the_phase_of_the_role() {
    let phase = renewal_phase(&role(), timing().renew_interval);
    let spread = elected_after("a", Candidate::spread_renewals);
    assert_eq!(
        spread.poll_timeout(),
        Some(UnixMillis(
            T0 + i64::try_from((timing().renew_interval - phase).as_millis()).unwrap()
        )),
        "the first renewal comes the role's phase ({phase:?}) early"
    );
    assert_ne!(spread.poll_timeout(), elected("a").poll_timeout());
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
    c.handle(now, self::records(records, 3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    // The holder is quiet and still the coordinator's pair: the challenge.
    c.handle(now, status(old, TransactionState::CompleteCommit))
        .unwrap();
    announces_then_acquires(&mut c, now);
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
    // The winner's lease is not readable yet: the loser waits a lease duration for it,
    // tailing the partition (a resign's tombstone or the winner's lease ends the wait).
    c.handle(now, self::records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), [read(3, Some(T0 + 3000))]);
    // A reader that cannot long-poll answers at once: the timer takes over.
    c.handle(now, self::records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 3000)));
    assert_eq!(c.contested_until(), Some(UnixMillis(T0 + 3000)));
    assert_eq!(c.status(), Status::Standby);
}

#[test]
fn standbys_wait_for_deadline_plus_rank_times_stagger_and_re_read_before_challenging() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("c"), timing(), now).unwrap();
    // Every call up to the turn is scripted: no probes of the coordinator while `a` is late.
    c.set_probe_late_holder(false);
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
    c.handle(now, self::records(records, 4)).unwrap();
    // Records arrived: one more read that may long-poll until our turn (rank 1).
    assert_eq!(drain(&mut c), [read(4, Some(T0 + 2500))]);
    assert_eq!(c.rank(), Some(1));
    c.handle(now, self::records(vec![], 4)).unwrap();
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
    c.handle(UnixMillis(T0 + 2500), self::records(renewed, 5))
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
    c.handle(now, records(vec![reg_record(0, "a")], 1)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        now,
        Event::Described {
            status: LeadershipStatus::NOT_FOUND,
        },
    )
    .unwrap();
    assert_eq!(drain(&mut c), [acquire()]);
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
                    stalled: n % 3 == 0,
                    high_watermark: Some(n + 1 + if n % 3 == 0 { 2 } else { 0 }),
                }
            }),
            (0i16..3, 0usize..4).prop_map(|(e, s)| {
                let state = [
                    TransactionState::Empty,
                    TransactionState::Ongoing,
                    TransactionState::CompleteCommit,
                    TransactionState::PrepareCommit,
                ][s]
                    .clone();
                status(FencingToken::new(1, e), state)
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
                    if matches!(cmd, Command::Append { .. } | Command::ReadPartition { .. } | Command::DescribeRole { .. } | Command::AcquireEpoch { .. } | Command::WriteLease { .. }) {
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

// ---- before a challenge: the check, stalled reads, ghosts ------------------------------------

/// The challenge of a lease held by `a`: the acquire at once; a member that evicts first
/// announces it (a's registration tombstoned, readable by the other standbys before the
/// acquire reaches the coordinator).
fn announces_then_acquires(c: &mut Candidate, now: UnixMillis) {
    if !c.evicts_passed_over() {
        assert_eq!(
            drain(c),
            [acquire()],
            "no record of another member is touched"
        );
        assert_eq!(c.status(), Status::Challenging);
        return;
    }
    assert_eq!(
        drain(c),
        [deregister("a")],
        "the challenge is announced first"
    );
    assert_eq!(c.status(), Status::Challenging);
    c.handle(now, Event::Appended { offset: 99 }).unwrap();
    assert_eq!(drain(c), [acquire()]);
}

/// [`standby_at_its_turn`] whose check found another member's `pair` in `state` (a challenge
/// or a resign under way): it defers a lease, tailing the partition until then.
fn standby_deferring_to(pair: FencingToken, state: TransactionState) -> Candidate {
    let mut c = standby_at_its_turn();
    let turn = T0 + 2000;
    c.handle(UnixMillis(turn), status(pair, state)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(3, Some(turn + 3000))],
        "no second challenge: a long poll until the lease the other pair would write has run out"
    );
    assert_eq!(c.contested_until(), Some(UnixMillis(turn + 3000)));
    c
}

/// The pair of `a`, the holder whose lease runs out in these scenarios.
const K: FencingToken = FencingToken::new(7, 0);

/// A standby `b` (rank 0, registered at offset 1) behind `a`, whose lease (pair `K`) runs until
/// T0 + 2000. Returned at its turn, with its check (DescribeRole) outstanding.
fn standby_at_its_turn() -> Candidate {
    standby_at_its_turn_reading(false)
}

/// A standby `b` (rank 0, registered at offset 1) that has read `a`'s lease (pair `K`) with
/// `deadline`, and the commands that read left. It does not probe the coordinator while `a`
/// is late to renew (the scenarios built on it script every call up to the turn; the probes
/// have tests of their own).
fn behind_a_lease(deadline: i64) -> (Candidate, Vec<Command>) {
    behind_a_lease_probing(deadline, false)
}

/// [`behind_a_lease`], probing the coordinator while `a` is late to renew or not.
fn behind_a_lease_probing(deadline: i64, probe: bool) -> (Candidate, Vec<Command>) {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("b"), timing(), now).unwrap();
    c.set_probe_late_holder(probe);
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 1 }).unwrap();
    drain(&mut c);
    let state = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        lease_record(2, "a", K, deadline),
    ];
    c.handle(now, records(state, 3)).unwrap();
    let cmds = drain(&mut c);
    (c, cmds)
}

/// A standby `b` (rank 0) tailing the partition behind `a`'s lease (pair `K`, deadline
/// T0 + 2000), with its long poll outstanding.
fn standby_tailing() -> Candidate {
    let (c, cmds) = behind_a_lease(T0 + 2000);
    assert_eq!(cmds, [read(3, Some(T0 + 2000))]);
    c
}

/// [`standby_at_its_turn`], whose turn read was `stalled` or not.
fn standby_at_its_turn_reading(stalled: bool) -> Candidate {
    let now = UnixMillis(T0);
    let mut c = standby_tailing();
    c.handle(now, records(vec![], 3)).unwrap();
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 2000)));
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    let answer = if stalled {
        self::stalled(3)
    } else {
        records(vec![], 3)
    };
    c.handle(turn, answer).unwrap();
    assert_eq!(
        drain(&mut c),
        [describe()],
        "the lease ran out: check first"
    );
    assert_eq!(c.status(), Status::Standby);
    c
}

#[test]
fn a_quiet_holder_whose_lease_ran_out_is_challenged_once_the_check_agrees() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, status(K, TransactionState::CompleteCommit))
        .unwrap();
    announces_then_acquires(&mut c, turn);
    assert_eq!(c.status(), Status::Challenging);
}

/// A holder whose clock runs an hour ahead (or a forged record) names a deadline an hour
/// away. The standby trusts it only up to a lease duration plus the skew allowance after it
/// first read the record; a renewal read later starts a new bound of its own.
#[test]
fn a_deadline_far_ahead_is_trusted_only_a_lease_plus_the_skew_allowance() {
    let hour = 3_600_000;
    let lease = 3000;
    let skew: i64 = 1000;
    let mut c = Candidate::new(role(), m("b"), timing(), UnixMillis(T0)).unwrap();
    c.set_max_clock_skew(Duration::from_millis(skew.unsigned_abs()));
    c.set_probe_late_holder(false);
    drain(&mut c);
    c.handle(UnixMillis(T0), Event::Appended { offset: 1 })
        .unwrap();
    drain(&mut c);
    let state = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        lease_record(2, "a", K, T0 + hour),
    ];
    c.handle(UnixMillis(T0), records(state, 3)).unwrap();
    let bound = T0 + lease + skew;
    assert_eq!(drain(&mut c), [read(3, Some(bound))], "not an hour");
    // A renewal read 500 ms later (its deadline still an hour ahead) moves the bound by as much.
    let renewed = T0 + 500;
    c.handle(
        UnixMillis(renewed),
        records(vec![lease_record(3, "a", K, T0 + hour + 500)], 4),
    )
    .unwrap();
    let bound = renewed + lease + skew;
    assert_eq!(drain(&mut c), [read(4, Some(bound))]);
    // The holder died after that renewal: at the bound the standby reads, checks, and takes over.
    c.handle(UnixMillis(bound), records(vec![], 4)).unwrap();
    assert_eq!(drain(&mut c), [read(4, None)], "a read issued at the turn");
    c.handle(UnixMillis(bound), records(vec![], 4)).unwrap();
    assert_eq!(
        drain(&mut c),
        [describe()],
        "the lease ran out: check first"
    );
    c.handle(
        UnixMillis(bound),
        status(K, TransactionState::CompleteCommit),
    )
    .unwrap();
    announces_then_acquires(&mut c, UnixMillis(bound));
}

/// A deadline within the allowance is the lease's own: the bound never makes a standby wait
/// longer, and ordinary skew keeps its documented effect.
#[test]
fn a_deadline_within_the_skew_allowance_is_taken_as_written() {
    let (_, cmds) = behind_a_lease(T0 + 3000 + 10_000);
    assert_eq!(
        cmds,
        [read(3, Some(T0 + 3000 + 10_000))],
        "the default allowance, 10 s, covers it"
    );
    let (_, cmds) = behind_a_lease(T0 + 3000 + 10_001);
    assert_eq!(cmds, [read(3, Some(T0 + 3000 + 10_000))]);
}

#[test]
fn another_pair_with_nothing_open_is_confirmed_by_a_fresh_read() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    // The coordinator aborted a timed-out transaction with a bump (or the pair was exhausted):
    // another pair, nothing open. A read after the check, so that whatever the coordinator
    // finished is readable in it.
    c.handle(
        turn,
        status(FencingToken::new(7, 1), TransactionState::CompleteAbort),
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(turn, records(vec![], 3)).unwrap();
    announces_then_acquires(&mut c, turn);
}

#[test]
fn a_standby_waits_out_a_challenge_under_way_and_takes_over_if_it_never_completes() {
    let turn = T0 + 2000;
    let theirs = FencingToken::new(7, 1);
    // Another member minted a pair after the lease b read, and has not written with it yet.
    let mut c = standby_deferring_to(theirs, TransactionState::Empty);
    // It never wrote its lease: the same pair, still unused, a lease later. Its challenger is
    // gone; b challenges. The long poll that ends empty at the turn read the partition up to
    // it: the check follows at once.
    let later = UnixMillis(turn + 3000);
    c.handle(later, records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(later, status(theirs, TransactionState::Empty))
        .unwrap();
    announces_then_acquires(&mut c, later);
}

#[test]
fn a_challenge_under_way_that_writes_its_lease_ends_the_wait() {
    let turn = T0 + 2000;
    let theirs = FencingToken::new(7, 1);
    // Its first lease write is in flight.
    let mut c = standby_deferring_to(theirs, TransactionState::Ongoing);
    // The winner (a restarted `a` here) wrote its lease: the long poll brings it, and b waits
    // for that lease instead.
    let at = UnixMillis(turn + 40);
    c.handle(
        at,
        records(vec![lease_record(3, "a", theirs, turn + 5000)], 4),
    )
    .unwrap();
    assert_eq!(c.contested_until(), None);
    assert_eq!(drain(&mut c), [read(4, Some(turn + 5000))]);
}

/// The "standby challenged 11 ms after a new leader had been elected" of issue 11: the new
/// leader's lease committed after b's turn read; the check sees a pair b has read no lease of,
/// and the read after it brings the lease.
#[test]
fn a_lease_committed_just_before_the_check_is_read_before_any_challenge() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    let theirs = FencingToken::new(7, 1);
    c.handle(turn, status(theirs, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(
        turn,
        records(vec![lease_record(3, "a", theirs, T0 + 5000)], 4),
    )
    .unwrap();
    assert_eq!(
        drain(&mut c),
        [read(4, Some(T0 + 5000))],
        "no challenge: the new lease is live"
    );
}

#[test]
fn a_stalled_read_does_not_take_the_lease_for_expired() {
    let mut c = standby_at_its_turn_reading(true);
    let mut now = UnixMillis(T0 + 2000);
    // Another role's open transaction holds the partition back for five seconds; the holder
    // of this role is quiet at the coordinator (its renewals commit) but nothing is readable.
    for _ in 0..50 {
        c.handle(now, status(K, TransactionState::CompleteCommit))
            .unwrap();
        assert_eq!(drain(&mut c), [read(3, None)]);
        c.handle(now, stalled(3)).unwrap();
        assert_eq!(
            drain(&mut c),
            [],
            "the unreadable part may hold renewals: wait"
        );
        let wake = c.poll_timeout().unwrap();
        assert_eq!(wake.0 - now.0, 100, "looks again at the recheck interval");
        now = wake;
        c.handle(now, Event::Tick).unwrap();
        assert_eq!(drain(&mut c), [describe()]);
    }
    // The stall ends: the holder's renewals were there all along.
    c.handle(now, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    let renewal = lease_record(4, "a", K, now.0 + 2500);
    c.handle(now, records(vec![renewal], 6)).unwrap();
    assert_eq!(drain(&mut c), [read(6, Some(now.0 + 2500))]);
}

#[test]
fn a_stall_that_ends_with_nothing_new_leads_to_the_challenge() {
    let mut c = standby_at_its_turn_reading(true);
    let now = UnixMillis(T0 + 2000);
    c.handle(now, status(K, TransactionState::CompleteCommit))
        .unwrap();
    drain(&mut c);
    c.handle(now, stalled(3)).unwrap();
    let wake = c.poll_timeout().unwrap();
    c.handle(wake, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(wake, status(K, TransactionState::CompleteCommit))
        .unwrap();
    drain(&mut c);
    // The stalling transaction was aborted (its records and marker took offsets 3 and 4).
    c.handle(wake, records(vec![], 5)).unwrap();
    announces_then_acquires(&mut c, wake);
}

/// A standby at its turn behind `a`'s quiet, expired lease, whose reads stalled at offset 3
/// below `high_watermark`: after one check and one stalled read it waits, and at the next
/// recheck it has checked again (quiet) and its read is outstanding. Returns it and the
/// instant.
fn quiet_holder_behind_a_stall(high_watermark: Option<i64>) -> (Candidate, UnixMillis) {
    let now = UnixMillis(T0);
    let mut c = standby_tailing();
    c.handle(now, records(vec![], 3)).unwrap();
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(turn, stalled_below(vec![], 3, high_watermark))
        .unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(turn, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(turn, stalled_below(vec![], 3, high_watermark))
        .unwrap();
    assert_eq!(drain(&mut c), [], "the stall may hide renewals: wait");
    let wake = c.poll_timeout().unwrap();
    c.handle(wake, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(wake, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    (c, wake)
}

#[test]
fn reads_past_what_the_stall_hid_at_the_turn_lead_to_the_challenge_though_others_stall_them() {
    // The partition is never without an open transaction (thousands of roles renew on it):
    // every read stalls. The reads that get to the high watermark of the turn's read found
    // no renewal, and the coordinator finds the holder quiet: its lease ran out.
    let (mut c, now) = quiet_holder_behind_a_stall(Some(5));
    c.handle(now, stalled_below(vec![], 5, Some(9))).unwrap();
    announces_then_acquires(&mut c, now);
}

#[test]
fn a_renewal_below_the_turns_high_watermark_is_read_before_any_challenge() {
    let (mut c, now) = quiet_holder_behind_a_stall(Some(5));
    // The holder renewed before its deadline; the read that reaches it stalls again on
    // newer transactions.
    let renewal = lease_record(4, "a", K, now.0 + 2500);
    c.handle(now, stalled_below(vec![renewal], 5, Some(9)))
        .unwrap();
    assert_eq!(drain(&mut c), [read(5, Some(now.0 + 2500))]);
}

#[test]
fn a_leader_elected_behind_the_stall_is_not_challenged_on_the_turns_horizon() {
    let (mut c, now) = quiet_holder_behind_a_stall(Some(5));
    // The outstanding read (after a check that found `a` quiet) is answered: still stalled,
    // short of the turn's high watermark.
    c.handle(now, stalled_below(vec![], 4, Some(6))).unwrap();
    assert_eq!(drain(&mut c), []);
    let wake = c.poll_timeout().unwrap();
    c.handle(wake, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    // Meanwhile another standby took the role: its pair, committed, behind the stall.
    let p = FencingToken::new(K.producer_id, K.producer_epoch + 1);
    c.handle(wake, status(p, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(4, None)]);
    // The reads pass the turn's horizon (5), not the high watermark read after this check.
    c.handle(wake, stalled_below(vec![], 5, Some(8))).unwrap();
    assert_eq!(
        drain(&mut c),
        [],
        "the new leader's lease may lie below 8: wait"
    );
    let later = c.poll_timeout().unwrap();
    c.handle(later, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(later, status(p, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(5, None)]);
    let lease = lease_record(6, "c", p, later.0 + 3000);
    c.handle(later, stalled_below(vec![lease], 8, Some(11)))
        .unwrap();
    // Its lease is read: `b` waits behind it, one stagger after its deadline (`a`, no longer
    // the holder, ranks ahead of it).
    assert_eq!(drain(&mut c), [read(8, Some(later.0 + 3500))]);
}

#[test]
fn reads_still_short_of_the_turns_high_watermark_keep_waiting() {
    let (mut c, now) = quiet_holder_behind_a_stall(Some(5));
    c.handle(now, stalled_below(vec![], 4, Some(9))).unwrap();
    assert_eq!(drain(&mut c), [], "offset 4 may be the renewal: wait");
}

#[test]
fn without_a_high_watermark_only_a_read_that_is_not_stalled_ends_the_wait() {
    let (mut c, now) = quiet_holder_behind_a_stall(None);
    c.handle(now, stalled_below(vec![], 7, None)).unwrap();
    assert_eq!(
        drain(&mut c),
        [],
        "nothing says how far the stall reaches: wait"
    );
    let wake = c.poll_timeout().unwrap();
    c.handle(wake, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(wake, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(7, None)]);
    c.handle(wake, records(vec![], 9)).unwrap();
    announces_then_acquires(&mut c, wake);
}

#[test]
fn the_holders_open_write_is_waited_on_for_half_a_renew_interval_while_reads_stall() {
    let mut c = standby_at_its_turn_reading(true);
    let start = T0 + 2000;
    let mut now = UnixMillis(start);
    loop {
        c.handle(now, status(K, TransactionState::Ongoing)).unwrap();
        assert_eq!(drain(&mut c), [read(3, None)]);
        c.handle(now, stalled(3)).unwrap();
        let cmds = drain(&mut c);
        if now.0 < start + 500 {
            assert_eq!(cmds, [], "a renewal in flight commits within moments");
            now = c.poll_timeout().unwrap();
            c.handle(now, Event::Tick).unwrap();
            assert_eq!(drain(&mut c), [describe()]);
        } else {
            assert_eq!(
                cmds,
                [acquire()],
                "open for half a renew interval: its holder died mid-write; the acquire aborts it"
            );
            break;
        }
    }
    assert_eq!(now.0, start + 500);
}

#[test]
fn a_renewal_seen_in_flight_during_a_stall_restarts_the_hold() {
    let mut c = standby_at_its_turn_reading(true);
    let mut now = UnixMillis(T0 + 2000);
    let step = |c: &mut Candidate, now: &mut UnixMillis, state: TransactionState| {
        c.handle(*now, status(K, state)).unwrap();
        assert_eq!(drain(c), [read(3, None)]);
        c.handle(*now, stalled(3)).unwrap();
        let cmds = drain(c);
        *now = c.poll_timeout().unwrap_or(*now);
        if !cmds.is_empty() {
            return cmds;
        }
        c.handle(*now, Event::Tick).unwrap();
        assert_eq!(drain(c), [describe()]);
        vec![]
    };
    // A healthy holder renews while another role stalls the partition: its transaction is
    // seen open now and then, committed in between. Never for half a renew interval at once.
    for round in 0..40 {
        let state = if round % 4 == 0 {
            TransactionState::Ongoing
        } else {
            TransactionState::CompleteCommit
        };
        assert_eq!(step(&mut c, &mut now, state), [], "round {round}");
    }
}

/// The holder's open write, with the start the coordinator reports for it.
fn open_since(started: i64) -> Event {
    Event::Described {
        status: LeadershipStatus::described(
            K.producer_id,
            K.producer_epoch,
            TransactionState::Ongoing,
        )
        .with_transaction_started(UnixMillis(started)),
    }
}

#[test]
fn a_write_the_coordinator_says_began_half_an_interval_ago_is_aborted_at_the_turn() {
    // A holder killed in the middle of a renewal: its transaction began before its lease ran
    // out, and stalls the partition. The coordinator's start time says it is no renewal in
    // flight, so the standby does not watch it for another half interval.
    let mut c = standby_at_its_turn_reading(true);
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, open_since(T0 + 2000 - 500)).unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(turn, stalled(3)).unwrap();
    announces_then_acquires(&mut c, turn);
}

#[test]
fn a_write_the_coordinator_says_began_just_now_is_waited_on_until_half_an_interval_after_it() {
    let mut c = standby_at_its_turn_reading(true);
    let began = T0 + 2000 - 100;
    let mut now = UnixMillis(T0 + 2000);
    loop {
        c.handle(now, open_since(began)).unwrap();
        assert_eq!(drain(&mut c), [read(3, None)]);
        c.handle(now, stalled(3)).unwrap();
        let cmds = drain(&mut c);
        if now.0 < began + 500 {
            assert_eq!(cmds, [], "open for less than half an interval at {now:?}");
            now = c.poll_timeout().unwrap();
            c.handle(now, Event::Tick).unwrap();
            assert_eq!(drain(&mut c), [describe()]);
        } else {
            assert_eq!(cmds, [acquire()], "open half an interval: challenged");
            break;
        }
    }
    // Half an interval after the write began, not after the standby first saw it.
    assert_eq!(now.0, began + 500);
}

#[test]
fn a_new_write_the_coordinator_reports_is_not_taken_for_the_one_seen_before() {
    // Seen open at the turn, then open again at each check, but a newer transaction each time:
    // a healthy holder renewing while another role stalls the partition. Without start times
    // the checks would take it for one write open for half an interval.
    let mut c = standby_at_its_turn_reading(true);
    let mut now = UnixMillis(T0 + 2000);
    for round in 0..20 {
        c.handle(now, open_since(now.0 - 10)).unwrap();
        assert_eq!(drain(&mut c), [read(3, None)]);
        c.handle(now, stalled(3)).unwrap();
        assert_eq!(drain(&mut c), [], "round {round}: a renewal in flight");
        now = c.poll_timeout().unwrap();
        c.handle(now, Event::Tick).unwrap();
        assert_eq!(drain(&mut c), [describe()]);
    }
    assert!(
        now.0 >= T0 + 2000 + 1000,
        "checked for a whole renew interval"
    );
}

#[test]
fn the_holders_open_write_without_a_stall_is_challenged_at_once() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, status(K, TransactionState::Ongoing))
        .unwrap();
    // A write past its deadline, reads not stalled: the acquire aborts it.
    announces_then_acquires(&mut c, turn);
}

#[test]
fn a_coordinator_in_the_middle_of_an_abort_is_asked_again_shortly() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(
        turn,
        status(FencingToken::new(7, 1), TransactionState::PrepareAbort),
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(turn, records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 2100)));
    assert_eq!(
        c.contested_until(),
        None,
        "not a challenge to wait a lease for"
    );
}

#[test]
fn an_acquire_whose_answer_was_lost_carries_its_challenge_on() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, status(K, TransactionState::CompleteCommit))
        .unwrap();
    announces_then_acquires(&mut c, turn);
    c.handle(turn, Event::Failed).unwrap();
    let retry = c.poll_timeout().unwrap();
    assert_eq!(retry.0 - turn.0, 100);
    c.handle(retry, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(retry, records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    // A pair minted and unused, seen right after b's own acquire failed: most likely b's own
    // (the acquire took effect and its answer was lost). b carries on instead of waiting a
    // lease for itself.
    c.handle(
        retry,
        status(FencingToken::new(7, 1), TransactionState::Empty),
    )
    .unwrap();
    announces_then_acquires(&mut c, retry);
}

#[test]
fn an_unused_pair_seen_long_after_a_failed_acquire_is_waited_out() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, status(K, TransactionState::CompleteCommit))
        .unwrap();
    announces_then_acquires(&mut c, turn);
    c.handle(turn, Event::Failed).unwrap();
    // More than a stagger later (the answer was slow to fail): the pair may be the next
    // rank's. Wait it out.
    let late = UnixMillis(turn.0 + 600);
    c.handle(late, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(late, records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        late,
        status(FencingToken::new(7, 1), TransactionState::Empty),
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(3, Some(late.0 + 3000))]);
    assert_eq!(c.contested_until(), Some(UnixMillis(late.0 + 3000)));
}

/// `c`, registered at offset 3 behind `a` (the dead holder, 0) and `b` (1, a ghost that never
/// challenged), elected with pair 7/1, evicting or not; returned with what it issued once
/// elected.
fn elect_past_a_ghost(evict: bool) -> (Candidate, Vec<Command>) {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("c"), timing(), now).unwrap();
    c.set_evict_passed_over(evict);
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 3 }).unwrap();
    drain(&mut c);
    let state = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        lease_record(2, "a", K, T0 - 1000),
        reg_record(3, "c"),
    ];
    c.handle(now, records(state, 4)).unwrap();
    assert_eq!(
        c.rank(),
        Some(1),
        "b ranks ahead of c: it was never passed over"
    );
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(now, status(K, TransactionState::CompleteCommit))
        .unwrap();
    announces_then_acquires(&mut c, now);
    let token = FencingToken::new(7, 1);
    c.handle(now, Event::EpochGranted { token }).unwrap();
    drain(&mut c);
    c.handle(now, Event::LeaseWritten { offset: 5 }).unwrap();
    let issued = drain(&mut c);
    (c, issued)
}

/// [`elect_past_a_ghost`] while evicting; returned with the Elected and first eviction
/// drained.
fn elected_past_a_ghost() -> Candidate {
    let (c, issued) = elect_past_a_ghost(true);
    let token = FencingToken::new(7, 1);
    assert_eq!(
        issued,
        [Command::Elected { token, term: 5 }, deregister("a")],
        "elected, the new leader tombstones the registrations ranked ahead of it, the old \
         holder's first"
    );
    c
}

/// By default a new leader touches no other member's record: the dead holder and the ghost
/// ahead of it stay registered, passed over, and no rank counts them.
#[test]
fn a_new_leader_leaves_the_members_it_passed_over_registered() {
    let fresh = Candidate::new(role(), m("c"), timing(), UnixMillis(T0)).unwrap();
    assert!(!fresh.evicts_passed_over(), "eviction is opt-in");
    // Without eviction the challenge goes straight to the acquire (no announcement).
    let (c, issued) = elect_past_a_ghost(false);
    let token = FencingToken::new(7, 1);
    assert_eq!(issued, [Command::Elected { token, term: 5 }]);
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(T0 + 1000)),
        "nothing to do before the first renewal"
    );
    // Everyone who reads c's lease skips a and b.
    let mut state = c.state().clone();
    state.apply(&lease_record(5, "c", token, T0 + 3000));
    state.apply(&reg_record(6, "d"));
    assert!(state.passed_over(&m("a")) && state.passed_over(&m("b")));
    assert_eq!(state.rank_of(&m("d")), Some(0), "d ranks first behind c");
    assert_eq!(state.len(), 4, "every registration is still there");
}

/// A live standby that a later member overtook (it was slow at its turn) finds itself passed
/// over in the state and registers again, at the tail; nobody deleted its registration.
#[test]
fn a_standby_passed_over_registers_again_at_the_tail() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(
        turn,
        status(FencingToken::new(7, 1), TransactionState::CompleteCommit),
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(
        turn,
        records(
            vec![
                reg_record(3, "c"),
                lease_record(4, "c", FencingToken::new(7, 1), T0 + 5000),
            ],
            5,
        ),
    )
    .unwrap();
    assert!(c.state().passed_over(&m("b")));
    assert_eq!(c.rank(), None);
    assert_eq!(
        drain(&mut c),
        [register("b", turn)],
        "it registers again, at the tail"
    );
    c.handle(turn, Event::Appended { offset: 5 }).unwrap();
    assert_eq!(drain(&mut c), [read(5, None)]);
    c.handle(turn, records(vec![reg_record(5, "b")], 6))
        .unwrap();
    assert!(!c.state().passed_over(&m("b")));
    assert_eq!(c.rank(), Some(0), "ranked again, behind the holder");
}

#[test]
fn a_new_leader_tombstones_the_registrations_ranked_ahead_of_it() {
    let mut c = elected_past_a_ghost();
    let now = UnixMillis(T0 + 5);
    c.handle(now, Event::Appended { offset: 6 }).unwrap();
    assert_eq!(drain(&mut c), [deregister("b")], "then the ghost's");
    c.handle(now, Event::Appended { offset: 7 }).unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(T0 + 1000)),
        "the renewal is due a renew interval after the claim, as always"
    );
    assert!(c.is_leader());
    assert_eq!(c.status(), Status::Leading);
}

#[test]
fn a_failed_eviction_waits_for_the_renewal_and_is_tried_again_after_it() {
    let mut c = elected_past_a_ghost();
    let token = FencingToken::new(7, 1);
    c.handle(UnixMillis(T0 + 5), Event::Failed).unwrap();
    assert_eq!(drain(&mut c), []);
    assert_eq!(
        c.poll_timeout(),
        Some(UnixMillis(T0 + 1000)),
        "the renewal first"
    );
    let renew = UnixMillis(T0 + 1000);
    c.handle(renew, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [lease_write("c", token, T0, T0 + 4000)]);
    c.handle(renew, Event::LeaseWritten { offset: 8 }).unwrap();
    assert_eq!(drain(&mut c), [deregister("a")], "tried again");
    c.handle(renew, Event::Appended { offset: 9 }).unwrap();
    assert_eq!(drain(&mut c), [deregister("b")]);
    c.handle(renew, Event::Appended { offset: 10 }).unwrap();
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 2000)));
}

#[test]
fn a_resign_during_an_eviction_waits_for_it_and_then_leaves() {
    let mut c = elected_past_a_ghost();
    let now = UnixMillis(T0 + 5);
    c.handle(now, Event::Resign).unwrap();
    assert_eq!(drain(&mut c), [], "one I/O outstanding at a time");
    c.handle(now, Event::Appended { offset: 6 }).unwrap();
    assert_eq!(
        drain(&mut c),
        [acquire()],
        "the exit starts: no more evictions, the pair is superseded"
    );
}

#[test]
fn a_standby_whose_registration_was_tombstoned_registers_again_at_the_tail() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    // A leader elected meanwhile passed b over (b was slow) and tombstoned its registration.
    c.handle(
        turn,
        status(FencingToken::new(7, 1), TransactionState::CompleteCommit),
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    let tombstone = Record::tombstone(4, Key::registration(role(), m("b")).encode());
    c.handle(
        turn,
        records(
            vec![
                reg_record(3, "c"),
                tombstone,
                lease_record(5, "c", FencingToken::new(7, 1), T0 + 5000),
            ],
            6,
        ),
    )
    .unwrap();
    assert_eq!(
        drain(&mut c),
        [register("b", turn)],
        "it registers again, at the tail"
    );
}

/// A read issued before the lease ran out (a long poll that answered at the turn, or a reply
/// held up while the member was paused) may predate renewals under the same pair, which the
/// check cannot tell apart: a challenge rests on a read issued at or after the turn.
#[test]
fn a_read_issued_before_the_turn_is_followed_by_a_fresh_one() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("b"), timing(), now).unwrap();
    // Every call up to the turn is scripted: no probes of the coordinator while `a` is late.
    c.set_probe_late_holder(false);
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 1 }).unwrap();
    drain(&mut c);
    let state = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        lease_record(2, "a", K, T0 + 2000),
    ];
    c.handle(now, records(state, 3)).unwrap();
    assert_eq!(drain(&mut c), [read(3, Some(T0 + 2000))]);
    // The long poll answers (empty) long after the turn.
    let late = UnixMillis(T0 + 7000);
    c.handle(late, records(vec![], 3)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(3, None)],
        "the holder may have renewed since the read was issued"
    );
    // It did: a healthy leader keeps its role.
    c.handle(late, records(vec![lease_record(3, "a", K, T0 + 9000)], 4))
        .unwrap();
    assert_eq!(drain(&mut c), [read(4, Some(T0 + 9000))]);
    // Had it not, the fresh read (issued after the turn) leads to the check.
    let mut c = standby_at_its_turn();
    c.handle(
        UnixMillis(T0 + 2000),
        status(K, TransactionState::CompleteCommit),
    )
    .unwrap();
    announces_then_acquires(&mut c, UnixMillis(T0 + 2000));
}

#[test]
fn a_failed_check_is_retried_and_the_holder_gets_the_blind_time_back() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, Event::Failed).unwrap();
    assert_eq!(drain(&mut c), [], "no challenge without an answer");
    let retry = c.poll_timeout().unwrap();
    assert_eq!(retry.0 - turn.0, 100);
    c.handle(retry, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [describe()], "the check is asked again");
    // The coordinator answers again: the holder's renewals may have failed alike, so the
    // standby reads again and gives the holder the 100 ms back, and as long again from now.
    c.handle(retry, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    c.handle(retry, records(vec![], 3)).unwrap();
    let until = retry.0 + 100;
    assert_eq!(drain(&mut c), [read(3, Some(until))]);
    // Nothing came: the holder is gone after all, and the standby takes over.
    c.handle(UnixMillis(until), records(vec![], 3)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(3, None)],
        "a long poll's answer is read again"
    );
    c.handle(UnixMillis(until), records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        UnixMillis(until),
        status(K, TransactionState::CompleteCommit),
    )
    .unwrap();
    announces_then_acquires(&mut c, UnixMillis(until));
}

/// Answers every call of `c` with `Failed` from `from` on, retry after retry, until the
/// cluster is back at `back`; returns the first call issued at or after `back`, and when.
fn fail_until(c: &mut Candidate, from: UnixMillis, back: UnixMillis) -> (UnixMillis, Command) {
    let mut now = from;
    loop {
        c.handle(now, Event::Failed).unwrap();
        assert_eq!(drain(c), [], "nothing but a retry after a failure");
        let retry = c.poll_timeout().expect("a retry is scheduled");
        assert!(
            retry.0 - now.0 <= 1000,
            "retried within a renew interval, not {} ms later",
            retry.0 - now.0
        );
        c.handle(retry, Event::Tick).unwrap();
        let mut cmds = drain(c);
        assert_eq!(cmds.len(), 1, "one call: {cmds:?}");
        if retry >= back {
            return (retry, cmds.remove(0));
        }
        now = retry;
    }
}

/// A standby `b` (rank 0) behind `a`'s lease (pair `K`, deadline T0 + 2000, so written at
/// T0 - 1000), probing the coordinator or not while `a` is late to renew, driven until `to`:
/// every read answers with nothing new, every check with `check(now)`. The commands it gave.
fn late_holder(
    probe: bool,
    to: i64,
    check: impl Fn(UnixMillis) -> Event,
) -> (Candidate, Vec<Command>) {
    let (mut c, mut given) = behind_a_lease_probing(T0 + 2000, probe);
    let mut pending = given.clone();
    let mut now = UnixMillis(T0);
    while now.0 < to {
        match pending.pop() {
            Some(Command::ReadPartition { wait_until, .. }) => {
                // A long poll that nothing ends answers at its end.
                now = now.max(wait_until.unwrap_or(now));
                c.handle(now, records(vec![], 3)).unwrap();
            }
            Some(Command::DescribeRole { .. }) => c.handle(now, check(now)).unwrap(),
            Some(Command::AcquireEpoch { .. }) => break,
            Some(other) => panic!("unexpected {other:?}"),
            None => {
                now = c.poll_timeout().expect("a timer");
                c.handle(now, Event::Tick).unwrap();
            }
        }
        let cmds = drain(&mut c);
        given.extend(cmds.iter().cloned());
        pending = cmds;
    }
    (c, given)
}

#[test]
fn a_coordinator_that_dies_while_the_holder_is_late_counts_as_an_outage() {
    // The coordinator of `a`'s role dies at T0 and a new one answers from T0 + 1800, just
    // before the turn (T0 + 2000): `a` could not renew meanwhile, while the partition read on.
    let down = |now: UnixMillis| {
        if now.0 < T0 + 1800 {
            Event::Failed
        } else {
            status(K, TransactionState::CompleteCommit)
        }
    };
    // Without probes, the check at the turn finds the new coordinator: the challenge.
    let (_, given) = late_holder(false, T0 + 2600, down);
    assert_eq!(given.last(), Some(&acquire()), "{given:?}");
    assert_eq!(given.iter().filter(|c| **c == describe()).count(), 1);

    // With them: from T0 + 500 (a renew interval and a half after the lease was written) the
    // standby asks the coordinator every half interval; the first probe fails, and the time
    // until one is answered (T0 + 500 to about T0 + 1800) is added to the deadline, with a
    // renew interval after the answer at least.
    let (c, given) = late_holder(true, T0 + 2600, down);
    assert!(
        !given.contains(&acquire()),
        "no challenge by T0 + 2600: {given:?}"
    );
    assert_eq!(
        given[0],
        read(3, Some(T0 + 500)),
        "the long poll ends at the first probe"
    );
    let until = c.outage_until().expect("an outage").0;
    assert!(
        until >= T0 + 2000 + 1300,
        "the deadline moved by the blind time, to {}",
        until - T0
    );
    assert_eq!(c.status(), Status::Standby);
}

#[test]
fn a_late_holder_whose_coordinator_answers_is_challenged_at_the_turn() {
    // The probes are answered: a dead holder is taken over at the turn, as without them.
    let answers = |_| status(K, TransactionState::CompleteCommit);
    let (c, given) = late_holder(true, T0 + 2600, answers);
    assert_eq!(given.last(), Some(&acquire()), "{given:?}");
    let probes = given.iter().filter(|c| **c == describe()).count();
    // T0 + 500, + 1000, + 1500, then the turn's check.
    assert_eq!(probes, 4, "{given:?}");
    assert_eq!(c.outage_until(), None);
    assert_eq!(c.status(), Status::Challenging);
}

#[test]
fn a_holder_that_renews_once_its_partition_is_back_keeps_the_role() {
    // The broker that leads the partition dies at T0 + 500 and the cluster serves it again
    // 5.5 s later, long past the holder's deadline (T0 + 2000), which could not renew either.
    let mut c = standby_tailing();
    let (back, cmd) = fail_until(&mut c, UnixMillis(T0 + 500), UnixMillis(T0 + 6000));
    assert_eq!(cmd, read(3, None));
    c.handle(back, records(vec![], 3)).unwrap();
    // The lease runs on by the blind time: its deadline plus about 5.5 s, and at least a
    // renew interval from the first answer.
    let until = (T0 + 2000 + (back.0 - (T0 + 500))).max(back.0 + 1000);
    assert_eq!(drain(&mut c), [read(3, Some(until))], "no challenge yet");
    assert_eq!(c.status(), Status::Standby);
    // The holder's retry gets through: its renewal ends the wait, and the outage is forgotten.
    let renewal = vec![lease_record(3, "a", K, back.0 + 300 + 3000)];
    c.handle(UnixMillis(back.0 + 300), records(renewal, 4))
        .unwrap();
    assert_eq!(drain(&mut c), [read(4, Some(back.0 + 3300))]);
}

#[test]
fn a_holder_that_died_during_an_outage_is_taken_over_after_it() {
    let mut c = standby_tailing();
    let (back, _) = fail_until(&mut c, UnixMillis(T0 + 500), UnixMillis(T0 + 6000));
    c.handle(back, records(vec![], 3)).unwrap();
    let until = (T0 + 2000 + (back.0 - (T0 + 500))).max(back.0 + 1000);
    assert_eq!(drain(&mut c), [read(3, Some(until))]);
    let until = UnixMillis(until);
    c.handle(until, records(vec![], 3)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(3, None)],
        "a long poll's answer is read again"
    );
    c.handle(until, records(vec![], 3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(until, status(K, TransactionState::CompleteCommit))
        .unwrap();
    announces_then_acquires(&mut c, until);
}

#[test]
fn a_coordinator_that_fails_the_check_gives_the_holder_a_renew_interval_after_it_is_back() {
    // The coordinator died before the holder's deadline; the standby learns of it only at its
    // turn, when its check fails, and the new coordinator answers 9 s later.
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    let (back, cmd) = fail_until(&mut c, turn, UnixMillis(T0 + 11_000));
    assert_eq!(cmd, describe());
    c.handle(back, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(
        drain(&mut c),
        [read(3, None)],
        "read again before anything else"
    );
    c.handle(back, records(vec![], 3)).unwrap();
    let until = (T0 + 2000 + (back.0 - turn.0)).max(back.0 + 1000);
    assert_eq!(
        drain(&mut c),
        [read(3, Some(until))],
        "the holder may retry"
    );
    // Its renewal, sent to the new coordinator, lands within that interval.
    let renewal = vec![lease_record(3, "a", K, back.0 + 200 + 3000)];
    c.handle(UnixMillis(back.0 + 200), records(renewal, 4))
        .unwrap();
    assert_eq!(drain(&mut c), [read(4, Some(back.0 + 3200))]);
    assert_eq!(c.status(), Status::Standby);
}

#[test]
fn a_check_the_transport_answered_only_after_the_coordinator_moved_counts_as_an_outage() {
    // The transport kept retrying the check until the new coordinator answered, 7 s after
    // the turn: no failure reached the machine, but the cluster could not serve the role
    // meanwhile, and neither could the holder renew.
    let mut c = standby_at_its_turn();
    let back = UnixMillis(T0 + 9000);
    c.handle(back, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(
        drain(&mut c),
        [read(3, None)],
        "no challenge on a slow check"
    );
    c.handle(back, records(vec![], 3)).unwrap();
    let until = (T0 + 2000 + 7000).max(back.0 + 1000);
    assert_eq!(drain(&mut c), [read(3, Some(until))]);
}

#[test]
fn a_check_answered_within_a_stagger_is_no_outage() {
    let mut c = standby_at_its_turn();
    let answered = UnixMillis(T0 + 2000 + 500);
    c.handle(answered, status(K, TransactionState::CompleteCommit))
        .unwrap();
    announces_then_acquires(&mut c, answered);
}

#[test]
fn an_outage_behind_a_lease_with_an_extreme_deadline_is_no_panic() {
    for deadline in [i64::MIN, i64::MAX] {
        let (mut c, _) = behind_a_lease(deadline);
        let (back, cmd) = fail_until(&mut c, UnixMillis(T0 + 10), UnixMillis(T0 + 3000));
        let answer = if cmd == describe() {
            status(K, TransactionState::CompleteCommit)
        } else {
            records(vec![], 3)
        };
        c.handle(back, answer).unwrap();
        assert_eq!(drain(&mut c).len(), 1, "one call after the outage");
    }
}

#[test]
fn a_standby_retries_its_reads_at_least_every_renew_interval() {
    let mut c = standby_tailing();
    // fail_until asserts every retry comes within a renew interval (1 s), for a minute.
    let (_, cmd) = fail_until(&mut c, UnixMillis(T0 + 500), UnixMillis(T0 + 60_000));
    assert_eq!(cmd, read(3, None));
}

#[test]
fn a_resign_while_a_check_is_outstanding_deregisters() {
    let mut c = standby_at_its_turn();
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, Event::Resign).unwrap();
    assert_eq!(drain(&mut c), []);
    c.handle(turn, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(
        drain(&mut c),
        [deregister("b")],
        "no challenge after a resign"
    );
}

/// Every rank that waited on a stall is released by its end at about the same moment: the
/// ranks are staggered again from the release, so that they do not challenge together.
#[test]
fn ranks_released_from_a_stall_together_are_staggered_again() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("c"), timing(), now).unwrap();
    // Every call up to the turn is scripted: no probes of the coordinator while `a` is late.
    c.set_probe_late_holder(false);
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    drain(&mut c);
    let state = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        reg_record(2, "c"),
        lease_record(3, "a", K, T0 + 2000),
    ];
    c.handle(now, records(state, 4)).unwrap();
    drain(&mut c);
    c.handle(now, records(vec![], 4)).unwrap();
    let turn = UnixMillis(T0 + 2500);
    assert_eq!(c.poll_timeout(), Some(turn), "rank 1");
    c.handle(turn, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(4, None)]);
    c.handle(turn, stalled(4)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(turn, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(4, None)]);
    c.handle(turn, stalled(4)).unwrap();
    assert_eq!(drain(&mut c), [], "stalled: wait");
    // The stall ends at T0 + 4000; b (rank 0), waiting too, is released at the same moment.
    let end = UnixMillis(T0 + 4000);
    c.handle(end, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(end, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(4, None)]);
    c.handle(end, records(vec![], 6)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(6, Some(T0 + 4500))],
        "rank 1 leaves rank 0 one stagger, tailing the partition"
    );
    // A stagger later, b's challenge is under way: c waits for it.
    let later = UnixMillis(T0 + 4500);
    c.handle(later, records(vec![], 6)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        later,
        status(FencingToken::new(7, 1), TransactionState::Ongoing),
    )
    .unwrap();
    assert_eq!(
        drain(&mut c),
        [read(6, Some(T0 + 8000))],
        "rank 1 tails until a stagger past the lease the challenger would write"
    );
    assert_eq!(c.contested_until(), Some(UnixMillis(T0 + 7500)));
}

/// A challenger tombstones the registration of the holder whose lease ran out before its
/// acquire: the other standbys read that, and wait for its first lease, even while its acquire
/// is still on its way to a slow coordinator (which a check cannot see).
#[test]
fn an_announced_challenge_is_waited_for_before_its_acquire_reaches_the_coordinator() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("c"), timing(), now).unwrap();
    // Every call up to the turn is scripted: no probes of the coordinator while `a` is late.
    c.set_probe_late_holder(false);
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    drain(&mut c);
    let state = vec![
        reg_record(0, "a"),
        reg_record(1, "b"),
        reg_record(2, "c"),
        lease_record(3, "a", K, T0 + 2000),
    ];
    c.handle(now, records(state, 4)).unwrap();
    drain(&mut c);
    c.handle(now, records(vec![], 4)).unwrap();
    let turn = UnixMillis(T0 + 2500);
    assert_eq!(c.poll_timeout(), Some(turn), "rank 1");
    c.handle(turn, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(4, None)]);
    // b (rank 0) announced its challenge at its turn; its acquire is still on the wire.
    let announcement = Record::tombstone(4, Key::registration(role(), m("a")).encode());
    c.handle(turn, records(vec![announcement], 5)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(5, Some(T0 + 6000))],
        "no check, no challenge: it waits a lease (and its rank) for b's first lease"
    );
    assert_eq!(c.contested_until(), Some(UnixMillis(T0 + 5500)));
    // b's first lease ends the wait; c now waits for that lease.
    let claim = lease_record(6, "b", FencingToken::new(7, 1), T0 + 5600);
    c.handle(UnixMillis(T0 + 2600), records(vec![claim], 7))
        .unwrap();
    assert_eq!(c.contested_until(), None);
    assert_eq!(drain(&mut c), [read(7, Some(T0 + 5600))], "rank 0 now");
}

#[test]
fn a_member_does_not_wait_for_its_own_announcement() {
    let mut c = standby_at_its_turn();
    c.set_evict_passed_over(true);
    let turn = UnixMillis(T0 + 2000);
    c.handle(turn, status(K, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [deregister("a")]);
    c.handle(turn, Event::Appended { offset: 3 }).unwrap();
    assert_eq!(drain(&mut c), [acquire()]);
    c.handle(turn, Event::Failed).unwrap();
    let retry = c.poll_timeout().unwrap();
    c.handle(retry, Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    // The read brings back its own announcement: not a sign of another challenge.
    let own = Record::tombstone(3, Key::registration(role(), m("a")).encode());
    c.handle(retry, records(vec![own], 4)).unwrap();
    assert_eq!(c.contested_until(), None);
    assert_eq!(drain(&mut c), [describe()]);
}

// ---- the model checker's findings (model/tests/check.rs), one regression test each -----------

/// Finding 3: a standby whose check meets a resign's exit pair (another pair, nothing written
/// yet) defers to it, but tails the partition meanwhile: the resign's lease tombstone ends the
/// wait at once, and the standby takes over then, not a lease later.
#[test]
fn a_standby_deferring_to_a_resigns_exit_pair_takes_over_at_its_tombstone() {
    let turn = T0 + 2000;
    let exit = FencingToken::new(7, 1);
    let mut c = standby_deferring_to(exit, TransactionState::Empty);
    // The resign's lease tombstone and a's deregistration land 20 ms later: the long poll
    // returns them.
    let at = UnixMillis(turn + 20);
    let tombstone = Record::tombstone(3, Key::lease(role()).encode());
    let gone = Record::tombstone(4, Key::registration(role(), m("a")).encode());
    c.handle(at, records(vec![tombstone, gone], 5)).unwrap();
    assert_eq!(c.contested_until(), None, "the tombstone ends the wait");
    assert_eq!(drain(&mut c), [describe()], "rank 0 checks at once");
    c.handle(at, status(exit, TransactionState::CompleteCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(5, None)]);
    c.handle(at, records(vec![], 5)).unwrap();
    announces_then_acquires(&mut c, at);
}

/// A check answers the read after it only while the lease it was compared with stands: a
/// check that saw the holder's transaction settling, followed by a read that brings the
/// holder's resign (a renewal, then the lease tombstone), is not acted on: a new check is.
#[test]
fn a_check_is_judged_again_once_the_read_after_it_moved_the_lease() {
    let mut c = standby_at_its_turn();
    let turn = T0 + 2000;
    c.handle(UnixMillis(turn), status(K, TransactionState::PrepareCommit))
        .unwrap();
    assert_eq!(drain(&mut c), [read(3, None)]);
    let at = UnixMillis(turn + 5);
    let renewal = lease_record(3, "a", K, turn + 3000);
    let tombstone = Record::tombstone(4, Key::lease(role()).encode());
    let gone = Record::tombstone(5, Key::registration(role(), m("a")).encode());
    c.handle(at, records(vec![renewal, tombstone, gone], 6))
        .unwrap();
    assert_eq!(c.contested_until(), None, "no deferral on a stale check");
    assert_eq!(
        drain(&mut c),
        [acquire()],
        "the holder left before its deadline: rank 0 challenges at once, the stale check unused"
    );
}

/// A standby `member` whose reads found registrations of `members` (in order, from offset 0)
/// and `a`'s lease (pair `K`, deadline T0 + 2000), tailing the partition.
fn tailing_among(member: &str, members: &[&str]) -> Candidate {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m(member), timing(), now).unwrap();
    drain(&mut c);
    let own = members.iter().position(|x| *x == member).unwrap() as i64;
    c.handle(now, Event::Appended { offset: own }).unwrap();
    drain(&mut c);
    let mut state: Vec<Record> = (0i64..)
        .zip(members)
        .map(|(offset, name)| reg_record(offset, name))
        .collect();
    let next = state.len() as i64;
    state.push(lease_record(next, "a", K, T0 + 2000));
    c.handle(now, records(state, next + 1)).unwrap();
    drain(&mut c);
    c
}

/// The records of `a`'s resign from `offset` on: its lease tombstone, then its deregistration.
fn resign_of_a(offset: i64) -> Vec<Record> {
    vec![
        Record::tombstone(offset, Key::lease(role()).encode()),
        Record::tombstone(offset + 1, Key::registration(role(), m("a")).encode()),
    ]
}

#[test]
fn a_resigns_tombstone_lets_the_first_rank_challenge_without_a_check() {
    // The holder cleared its lease before its deadline: it resigned, its exit pair fenced
    // what it held, and every other rank's turn is staggers away. Rank 0 mints at once.
    let mut c = tailing_among("b", &["a", "b"]);
    let at = UnixMillis(T0 + 100);
    c.handle(at, records(resign_of_a(3), 5)).unwrap();
    assert_eq!(drain(&mut c), [acquire()]);
    // Rank 1 waits its stagger from the moment it read the resign, tailing the partition.
    let mut c = tailing_among("c", &["a", "b", "c"]);
    c.handle(at, records(resign_of_a(4), 6)).unwrap();
    assert_eq!(drain(&mut c), [read(6, Some(at.0 + 500))]);
}

#[test]
fn a_tombstone_read_stalled_or_after_the_deadline_is_checked_first() {
    // A stalled read may hide a newer lease behind another role's open transaction.
    let mut c = tailing_among("b", &["a", "b"]);
    let at = UnixMillis(T0 + 100);
    c.handle(at, stalled_with(resign_of_a(3), 5)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    // A lease cleared after its deadline: other ranks' turns may have come meanwhile.
    let mut c = tailing_among("b", &["a", "b"]);
    let late = UnixMillis(T0 + 2100);
    c.handle(late, records(resign_of_a(3), 5)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
}

/// Finding 1: b and c registered while a dead challenger's claim held the partition's last
/// stable offset back, so their reads stopped short of their own registrations and their turns
/// passed unseen. When the coordinator aborts the claim, every such read returns at once: c
/// (rank 1) staggers again from then instead of challenging together with b (rank 0).
#[test]
fn ranks_released_from_reads_held_short_of_their_registrations_stagger_again() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("c"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 3 }).unwrap();
    drain(&mut c);
    // a registered and opened its claim at offset 1; b registered at 2; all of it unread.
    c.handle(now, stalled_with(vec![reg_record(0, "a")], 1))
        .unwrap();
    let unseen_turn = T0 + 3000 + 500;
    assert_eq!(drain(&mut c), [read(1, Some(unseen_turn))]);
    // The claim is aborted at T0 + 3200: the long poll returns b's and c's registrations.
    let release = UnixMillis(T0 + 3200);
    let late = vec![reg_record(2, "b"), reg_record(3, "c")];
    c.handle(release, records(late, 4)).unwrap();
    assert_eq!(c.rank(), Some(2), "a and b rank ahead of c");
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        release,
        status(FencingToken::new(7, 1), TransactionState::CompleteAbort),
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(4, None)]);
    c.handle(release, records(vec![], 4)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(4, Some(release.0 + 2 * 500))],
        "released together with the ranks ahead of it: two staggers from the release"
    );
}

/// The same member whose first read after registering reaches its registration with its turn
/// just gone by (no stall held it back) challenges at once: only reads held back count.
#[test]
fn a_turn_that_passed_during_the_first_read_is_taken_at_once() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("b"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    drain(&mut c);
    let state = vec![
        reg_record(0, "a"),
        lease_record(1, "a", K, T0 - 10),
        reg_record(2, "b"),
    ];
    c.handle(UnixMillis(T0 + 20), records(state, 3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
}

/// A member never challenges while its reads have not reached its own registration (its
/// rank is not known): a check that would let it challenge makes it look again instead.
#[test]
fn no_challenge_before_the_member_reads_its_own_registration() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("b"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    drain(&mut c);
    c.handle(now, stalled_with(vec![reg_record(0, "a")], 1))
        .unwrap();
    assert_eq!(drain(&mut c), [read(1, Some(T0 + 3000 + 500))]);
    // The long poll ends at the unseen turn, still stalled; a's claim has been open since T0.
    let turn = UnixMillis(T0 + 3500);
    c.handle(turn, stalled(1)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    let open = LeadershipStatus::described(7, 0, TransactionState::Ongoing)
        .with_transaction_started(UnixMillis(T0));
    c.handle(
        turn,
        Event::Described {
            status: open.clone(),
        },
    )
    .unwrap();
    assert!(!drain(&mut c).contains(&acquire()), "a claim under way");
    // A lease (and a stagger) later the same claim is still open, the reads still stalled:
    // its challenger is gone, but this member's rank is not known yet.
    let later = UnixMillis(T0 + 7000);
    c.handle(later, stalled(1)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(later, Event::Described { status: open }).unwrap();
    assert!(
        !drain(&mut c).contains(&acquire()),
        "no acquire on a roster not read"
    );
    assert_eq!(c.status(), Status::Standby);
    assert_eq!(c.poll_timeout(), Some(UnixMillis(T0 + 7100)));
    c.handle(UnixMillis(T0 + 7100), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(1, None)], "it reads again");
}

/// The same for a role nobody ever took: the check that finds no pair does not loop on
/// itself, the member reads again until its registration is readable.
#[test]
fn a_member_that_has_not_read_its_registration_reads_again_before_taking_a_new_role() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("b"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    drain(&mut c);
    c.handle(now, stalled(0)).unwrap();
    assert_eq!(drain(&mut c), [read(0, Some(T0 + 3000))]);
    let turn = UnixMillis(T0 + 3000);
    c.handle(turn, stalled(0)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        turn,
        Event::Described {
            status: LeadershipStatus::NOT_FOUND,
        },
    )
    .unwrap();
    assert_eq!(drain(&mut c), []);
    c.handle(UnixMillis(T0 + 3100), Event::Tick).unwrap();
    assert_eq!(drain(&mut c), [read(0, None)]);
    // The stall ends: the registration (and a's ahead of it) is read; b ranks 1 behind a.
    let end = UnixMillis(T0 + 3100);
    c.handle(
        end,
        records(vec![reg_record(0, "a"), reg_record(2, "b")], 3),
    )
    .unwrap();
    assert_eq!(c.rank(), Some(1));
}

/// Finding 2: a (rank 0) opened the role's first claim and restarted inside it, registering
/// again behind the claim, where no read reaches until the coordinator aborts it. c still
/// counts a's first registration ahead, so its turn is a stagger late, the same as the turn
/// a member behind it would get on the true roster. When the abort ends the stall past c's
/// new turn, c does not challenge at once: another member may be challenging on the rank it
/// read before the stall ended. It staggers again from the release, by its new rank.
#[test]
fn a_stall_that_ends_moving_a_member_up_past_its_turn_staggers_the_ranks_again() {
    let now = UnixMillis(T0);
    let mut c = Candidate::new(role(), m("c"), timing(), now).unwrap();
    drain(&mut c);
    c.handle(now, Event::Appended { offset: 2 }).unwrap();
    drain(&mut c);
    // a at 0, b at 1, c at 2; a's claim opened at 3 holds the reads there.
    let roster = vec![reg_record(0, "a"), reg_record(1, "b"), reg_record(2, "c")];
    c.handle(now, stalled_with(roster, 3)).unwrap();
    assert_eq!(c.rank(), Some(2));
    assert_eq!(drain(&mut c), [read(3, Some(T0 + 2 * 500))]);
    // At its turn the check finds a's claim open since T0: c defers to it until a lease
    // after that start, then two staggers.
    let turn = UnixMillis(T0 + 1000);
    c.handle(turn, stalled(3)).unwrap();
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(turn, open_since(T0)).unwrap();
    assert_eq!(drain(&mut c), [read(3, Some(T0 + 3000 + 2 * 500))]);
    // The coordinator aborts the claim at T0 + 3600: the read brings a's new registration,
    // behind c. c's rank is now 1, its turn (T0 + 3500) gone by.
    let release = UnixMillis(T0 + 3600);
    c.handle(release, records(vec![reg_record(5, "a")], 6))
        .unwrap();
    assert_eq!(c.rank(), Some(1), "only b ahead now");
    assert_eq!(drain(&mut c), [describe()]);
    c.handle(
        release,
        status(FencingToken::new(7, 1), TransactionState::CompleteAbort),
    )
    .unwrap();
    assert_eq!(drain(&mut c), [read(6, None)]);
    c.handle(release, records(vec![], 6)).unwrap();
    assert_eq!(
        drain(&mut c),
        [read(6, Some(release.0 + 500))],
        "staggered again from the release, one stagger for b"
    );
}

/// Finding 5: a (the holder, pair `K`) resigned: its exit pair 7/1 opened the lease tombstone
/// at offset 2, and a died inside that transaction. b (offset 3) and c (offset 4) registered
/// behind it, so their reads stop at the open tombstone: each has read a's registration and
/// lease and neither has read the other, so both take rank 0, count their turns from their
/// registrations and defer to the exit pair for a lease from there. When that lease has run
/// out with the tombstone still open, neither mints: it reads again until the coordinator's
/// abort releases the reads, and then b (rank 0) mints at once while c (rank 1) waits a
/// stagger from the release.
#[test]
fn members_held_short_of_their_registrations_by_a_dead_resigns_tombstone_mint_one_pair() {
    let exit = FencingToken::new(7, 1);
    let release = UnixMillis(T0 + 6150);
    for (member, join, rank) in [("b", 3, 0), ("c", 4, 1)] {
        let now = UnixMillis(T0);
        let mut c = Candidate::new(role(), m(member), timing(), now).unwrap();
        c.set_probe_late_holder(false);
        drain(&mut c);
        c.handle(now, Event::Appended { offset: join }).unwrap();
        drain(&mut c);
        let read_so_far = vec![reg_record(0, "a"), lease_record(1, "a", K, T0 + 100)];
        c.handle(now, stalled_with(read_so_far, 2)).unwrap();
        assert_eq!(
            c.rank(),
            Some(0),
            "{member}: the other registration is unread"
        );
        let turn = T0 + 3000;
        assert_eq!(
            drain(&mut c),
            [read(2, Some(turn))],
            "{member}: a lease after registering"
        );
        // At the turn, a fresh read (still stalled), then the check: the exit pair's
        // transaction is open. The member defers to it for a lease.
        c.handle(UnixMillis(turn), stalled(2)).unwrap();
        assert_eq!(drain(&mut c), [read(2, None)]);
        c.handle(UnixMillis(turn), stalled(2)).unwrap();
        assert_eq!(drain(&mut c), [describe()]);
        let open = Event::Described {
            status: LeadershipStatus::described(
                exit.producer_id,
                exit.producer_epoch,
                TransactionState::Ongoing,
            )
            .with_transaction_started(now),
        };
        c.handle(UnixMillis(turn), open.clone()).unwrap();
        assert_eq!(drain(&mut c), [read(2, Some(turn + 3000))]);
        assert_eq!(c.contested_until(), Some(UnixMillis(turn + 3000)));
        // A lease later the tombstone is still open: the member it deferred to is gone, but
        // this member's rank is not known, and neither is the other's.
        let later = UnixMillis(turn + 3000);
        c.handle(later, stalled(2)).unwrap();
        assert_eq!(drain(&mut c), [describe()]);
        c.handle(later, open).unwrap();
        assert!(
            !drain(&mut c).contains(&acquire()),
            "{member}: no acquire on a roster not read"
        );
        assert_eq!(c.status(), Status::Standby);
        assert_eq!(c.poll_timeout(), Some(UnixMillis(later.0 + 100)));
        c.handle(UnixMillis(later.0 + 100), Event::Tick).unwrap();
        assert_eq!(drain(&mut c), [read(2, None)], "{member}: it reads again");
        // The coordinator aborts the tombstone's transaction (bumping the epoch): the read
        // skips the aborted record and brings both registrations.
        let both = vec![reg_record(3, "b"), reg_record(4, "c")];
        c.handle(release, records(both, 5)).unwrap();
        assert_eq!(c.rank(), Some(rank), "{member}: its true rank");
        assert_eq!(drain(&mut c), [describe()]);
        c.handle(
            release,
            status(FencingToken::new(7, 2), TransactionState::CompleteAbort),
        )
        .unwrap();
        assert_eq!(drain(&mut c), [read(5, None)]);
        c.handle(release, records(vec![], 5)).unwrap();
        let expected = if rank == 0 {
            vec![acquire()]
        } else {
            vec![read(5, Some(release.0 + 500))]
        };
        assert_eq!(
            drain(&mut c),
            expected,
            "{member}: rank 0 mints, rank 1 staggers from the release"
        );
    }
}
