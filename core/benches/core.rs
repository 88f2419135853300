//! Benchmarks of the hot paths of a reader of `__coordination_state`: decoding records and
//! hashing role names.
//!
//! ```text
//! cargo bench -p kafka-coordination-core --bench core -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! `decode/records_100k` reports throughput in elements: one element is one record (key and
//! value), so criterion's "elem/s" inverts to the time per record.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_coordination_core::partition::murmur2;
use kafka_coordination_core::record::{Key, Lease, MemberId, Registration, Role};
use kafka_coordination_core::{FencingToken, UnixMillis};

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

/// Decodes a key and the value its kind names; returns 1 for a decoded record.
fn decode_record(key: &[u8], value: &[u8]) -> usize {
    match black_box(Key::decode(key)) {
        Ok(Key::Registration { .. }) => black_box(Registration::decode(value)).is_ok() as usize,
        Ok(Key::Lease { .. }) => black_box(Lease::decode(value)).is_ok() as usize,
        Err(_) => 0,
    }
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");

    let one = lease("node-3.cluster.internal:9092".to_string(), 12).encode();
    group.bench_function("lease_value", |b| b.iter(|| Lease::decode(black_box(&one))));

    let batch = batch();
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function("records_100k", |b| {
        b.iter(|| {
            let decoded: usize = batch.records().map(|(k, v)| decode_record(k, v)).sum();
            assert_eq!(decoded, RECORDS);
            decoded
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

criterion_group!(benches, decode, hash);
criterion_main!(benches);
