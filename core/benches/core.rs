//! Benchmarks of the hot paths of a reader of `__coordination_state`: decoding records,
//! applying them to a role's state, deciding a member's next step, and hashing role names.
//!
//! ```text
//! cargo bench -p kafka-coordination-core --bench core -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! * `decode/records_100k`: key and value of 100k records of mixed kinds through the borrowed
//!   types (`KeyRef`, `RegistrationRef`, `LeaseRef`), which allocate nothing;
//!   `decode/records_100k_owned` the same through the owned types (`Key`, ...). Target: under
//!   60 ns per record for the borrowed path.
//! * `state/apply_100k`: 100k records applied one by one to a `RoleState`. Target: under 100 ns
//!   per record.
//! * `evaluate/roster_1000_*`: one `evaluate` with 1,000 registered members. Target: under
//!   20 µs.
//!
//! The 100k benchmarks report throughput in elements, one element per record, so criterion's
//! "elem/s" inverts to the time per record.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_coordination_core::partition::murmur2;
use kafka_coordination_core::record::{
    Key, KeyKind, KeyRef, Lease, LeaseRef, MemberId, Registration, RegistrationRef, Role,
};
use kafka_coordination_core::state::{Applied, Record, RoleState};
use kafka_coordination_core::{evaluate, FencingToken, Standing, Step, Timing, UnixMillis};

const RECORDS: usize = 100_000;

fn role(s: &str) -> Role {
    Role::new(s).expect("valid role")
}

fn member(s: String) -> MemberId {
    MemberId::new(s).expect("valid member")
}

fn lease(member_name: String, seq: i64) -> Lease {
    Lease {
        member: member(member_name),
        token: FencingToken::new(7042 + seq % 3, (seq % 32_000) as i16),
        granted_at: UnixMillis(1_700_000_000_000 + seq),
        deadline: UnixMillis(1_700_000_010_000 + seq),
    }
}

/// 100k encoded records of a few roles, registrations and lease renewals in a shuffled mix
/// (about half each) with names of realistic length, laid out back to back in one buffer the way
/// a fetched record batch holds them.
struct Batch {
    bytes: Vec<u8>,
    /// (key start, key end, value end) of each record; the value starts where the key ends.
    spans: Vec<(usize, usize, usize)>,
}

impl Batch {
    fn records(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans
            .iter()
            .map(|&(k, v, end)| (&self.bytes[k..v], &self.bytes[v..end]))
    }
}

fn batch() -> Batch {
    let roles = [
        "orders-processor",
        "payments-settlement-writer-eu-01",
        "billing.invoice-writer",
        "inventory-compactor",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut bytes = Vec::new();
    let mut spans = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        // xorshift64: a fixed, dependency-free sequence.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let r = role(roles[(state % roles.len() as u64) as usize]);
        let m = format!("node-{}.cluster.internal:9092", (state >> 8) % 7);
        let seq = i as i64;
        let start = bytes.len();
        if (state >> 16) & 1 == 0 {
            Key::registration(r, member(m.clone())).encode_into(&mut bytes);
            let value_start = bytes.len();
            Registration {
                member: member(m),
                registered_at: UnixMillis(1_700_000_000_000 + seq),
            }
            .encode_into(&mut bytes);
            spans.push((start, value_start, bytes.len()));
        } else {
            Key::lease(r).encode_into(&mut bytes);
            let value_start = bytes.len();
            lease(m, seq).encode_into(&mut bytes);
            spans.push((start, value_start, bytes.len()));
        }
    }
    Batch { bytes, spans }
}

/// Decodes a key and the value its kind names through the borrowed, allocation-free types;
/// returns 1 for a decoded record.
fn decode_record(key: &[u8], value: &[u8]) -> usize {
    match black_box(KeyRef::decode(key)) {
        Ok(k) => match k.kind() {
            KeyKind::Registration => black_box(RegistrationRef::decode(value)).is_ok() as usize,
            KeyKind::Lease => black_box(LeaseRef::decode(value)).is_ok() as usize,
        },
        Err(_) => 0,
    }
}

/// The same through the owned types, which allocate every name.
fn decode_record_owned(key: &[u8], value: &[u8]) -> usize {
    match black_box(Key::decode(key)) {
        Ok(Key::Registration { .. }) => black_box(Registration::decode(value)).is_ok() as usize,
        Ok(Key::Lease { .. }) => black_box(Lease::decode(value)).is_ok() as usize,
        Err(_) => 0,
    }
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");

    let one = lease("node-3.cluster.internal:9092".to_string(), 12).encode();
    group.bench_function("lease_value", |b| {
        b.iter(|| LeaseRef::decode(black_box(&one)))
    });
    group.bench_function("lease_value_owned", |b| {
        b.iter(|| Lease::decode(black_box(&one)))
    });

    let batch = batch();
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function("records_100k", |b| {
        b.iter(|| {
            let decoded: usize = batch.records().map(|(k, v)| decode_record(k, v)).sum();
            assert_eq!(decoded, RECORDS);
            decoded
        })
    });
    group.bench_function("records_100k_owned", |b| {
        b.iter(|| {
            let decoded: usize = batch
                .records()
                .map(|(k, v)| decode_record_owned(k, v))
                .sum();
            assert_eq!(decoded, RECORDS);
            decoded
        })
    });
    group.finish();
}

/// The role the `apply` and `evaluate` benchmarks read.
const OURS: &str = "payments-settlement-writer-eu-01";

/// 100k `Record`s of one partition in offset order, as a tailing reader applies them: about 35%
/// registrations of a pool of 256 members (new ones and re-registrations), 10% deregistrations
/// (tombstones), 35% leases (renewals, with the holder changing now and then) and 20% records of
/// other roles sharing the partition.
fn partition_records() -> Vec<Record> {
    let others = [role("orders-processor"), role("billing.invoice-writer")];
    let ours = role(OURS);
    let pool: Vec<String> = (0..256)
        .map(|i| format!("node-{i:03}.cluster.internal:9092"))
        .collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut holder = 0usize;
    let mut records = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let offset = i as i64;
        let pick = (state >> 8) as usize % pool.len();
        let m = &pool[pick];
        let record = match state % 100 {
            0..=34 => Record::new(
                offset,
                Key::registration(ours.clone(), member(m.clone())).encode(),
                Registration {
                    member: member(m.clone()),
                    registered_at: UnixMillis(1_700_000_000_000 + offset),
                }
                .encode(),
            ),
            35..=44 => Record::tombstone(
                offset,
                Key::registration(ours.clone(), member(m.clone())).encode(),
            ),
            45..=79 => {
                if (state >> 20).is_multiple_of(500) {
                    holder = pick;
                }
                Record::new(
                    offset,
                    Key::lease(ours.clone()).encode(),
                    lease(pool[holder].clone(), offset).encode(),
                )
            }
            other => {
                let r = others[other as usize % others.len()].clone();
                if other % 2 == 0 {
                    Record::new(
                        offset,
                        Key::registration(r, member(m.clone())).encode(),
                        Registration {
                            member: member(m.clone()),
                            registered_at: UnixMillis(offset),
                        }
                        .encode(),
                    )
                } else {
                    Record::new(
                        offset,
                        Key::lease(r).encode(),
                        lease(m.clone(), offset).encode(),
                    )
                }
            }
        };
        records.push(record);
    }
    records
}

/// How many records `apply` turned into each outcome (registered, deregistered, leased, other
/// role, anything else).
fn tally(state: &mut RoleState, records: &[Record]) -> [usize; 5] {
    let mut counts = [0usize; 5];
    for r in records {
        let slot = match state.apply(r) {
            Applied::Registered => 0,
            Applied::Deregistered => 1,
            Applied::Leased => 2,
            Applied::OtherRole => 3,
            _ => 4,
        };
        counts[slot] += 1;
    }
    counts
}

fn apply(c: &mut Criterion) {
    let records = partition_records();
    let expected = tally(&mut RoleState::new(role(OURS)), &records);
    assert_eq!(expected[4], 0, "every record applies");
    assert!(expected[..4].iter().all(|&n| n > 0), "{expected:?}");
    let mut group = c.benchmark_group("state");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function("apply_100k", |b| {
        b.iter_batched_ref(
            || RoleState::new(role(OURS)),
            |state| {
                let counts = tally(state, black_box(&records));
                assert_eq!(counts, expected);
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// A role with `n` registered members (offsets `0..n`) and a lease held by the middle one.
fn roster(n: usize) -> (RoleState, Vec<MemberId>) {
    let ours = role(OURS);
    let members: Vec<MemberId> = (0..n)
        .map(|i| member(format!("node-{i:04}.cluster.internal:9092")))
        .collect();
    let mut records: Vec<Record> = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            Record::new(
                i as i64,
                Key::registration(ours.clone(), m.clone()).encode(),
                Registration {
                    member: m.clone(),
                    registered_at: UnixMillis(i as i64),
                }
                .encode(),
            )
        })
        .collect();
    records.push(Record::new(
        n as i64,
        Key::lease(ours.clone()).encode(),
        lease(members[n / 2].as_str().to_string(), 1).encode(),
    ));
    (RoleState::build(ours, &records), members)
}

fn evaluate_roster(c: &mut Criterion) {
    const MEMBERS: usize = 1_000;
    let (state, members) = roster(MEMBERS);
    assert_eq!(state.len(), MEMBERS);
    let timing = Timing::default();
    let now = UnixMillis(1_700_000_000_000);
    let mut group = c.benchmark_group("evaluate");
    // The last member to join: its rank counts every other member but the holder.
    let last = &members[MEMBERS - 1];
    let standing = Standing {
        join_offset: (MEMBERS - 1) as i64,
        registered_at: now,
        unleased_since: now,
        lease_deadline: None,
        contested_until: None,
    };
    assert!(matches!(
        evaluate(&state, last, &standing, now, &timing),
        Step::Wait { rank, .. } if rank == MEMBERS - 2
    ));
    group.bench_function("roster_1000_last_member", |b| {
        b.iter(|| {
            evaluate(
                &state,
                black_box(last),
                black_box(&standing),
                black_box(now),
                &timing,
            )
        })
    });
    // The first member to join: rank 0, the cheapest standby.
    let first = &members[0];
    let standing_first = Standing {
        join_offset: 0,
        ..standing
    };
    assert!(matches!(
        evaluate(&state, first, &standing_first, now, &timing),
        Step::Wait { rank: 0, .. }
    ));
    group.bench_function("roster_1000_first_member", |b| {
        b.iter(|| {
            evaluate(
                &state,
                black_box(first),
                black_box(&standing_first),
                black_box(now),
                &timing,
            )
        })
    });
    group.finish();
}

fn hash(c: &mut Criterion) {
    let name = "payments-settlement-writer-eu-01";
    assert_eq!(name.len(), 32);
    c.bench_function("murmur2/role_32_bytes", |b| {
        b.iter(|| murmur2(black_box(name.as_bytes())))
    });
}

criterion_group!(benches, decode, apply, evaluate_roster, hash);
criterion_main!(benches);
