//! The fuzz targets: for each, a generator of inputs (random, and mutations of valid
//! encodings) and a run that feeds one input to the library's code and checks what it must
//! hold for every input. A decoder refusing bad input is the expected outcome; a panic, an
//! allocation past the bound, or a broken property is a failure.

use std::collections::BTreeMap;

use kafka_coordination_core::fuzzing as core_fuzz;
use kafka_coordination_core::record::{
    FormatError, Key, KeyRef, Lease, LeaseRef, MemberId, Part, Registration, RegistrationRef, Role,
};
use kafka_coordination_core::state::{Applied, Malformed, Record, RoleState};
use kafka_coordination_core::{FencingToken, UnixMillis};
use kafka_coordination_kafka::fuzzing as kafka;

use crate::mutate::{mutate, random_bytes};
use crate::rng::Rng;

/// One input: its bytes, a second byte string for targets that read two (SCRAM's two
/// messages), and integer parameters (an API key and version, a fetch offset, ...).
#[derive(Clone, Debug, Default)]
pub struct Input {
    pub bytes: Vec<u8>,
    pub extra: Vec<u8>,
    pub params: Vec<i64>,
}

impl Input {
    pub fn len(&self) -> usize {
        self.bytes.len() + self.extra.len()
    }
}

/// What a run made of an input.
pub enum Outcome {
    /// The code took the input (it decoded, or was applied).
    Accepted,
    /// The code refused the input with an error, as it should refuse bad input.
    Refused,
    /// A property every input must keep was broken: a failure, with what broke.
    Violation(String),
}

/// A target: a generator and a run.
pub struct Target {
    pub name: &'static str,
    /// Its share of the inputs.
    pub weight: u64,
    pub gen: fn(&mut Rng, &Seeds) -> Input,
    pub run: fn(&Input, &Seeds) -> Outcome,
    /// Bytes it may allocate beyond the bound every target has: the batch decoder's
    /// decompression (up to `DECOMPRESSED_LIMIT` of output per batch, and a zstd window of at
    /// most as much), whatever the input's size.
    pub allowance: usize,
}

/// Valid encodings to mutate, built once.
pub struct Seeds {
    keys: Vec<Vec<u8>>,
    registrations: Vec<Vec<u8>>,
    leases: Vec<Vec<u8>>,
    /// (api key, version, body).
    responses: Vec<(i16, i16, Vec<u8>)>,
    batches: Vec<u8>,
    /// The sample batches compressed with each codec (and each snappy framing).
    compressed: Vec<Vec<u8>>,
}

/// Names of every kind a decoder meets: ASCII, multi-byte UTF-8, NUL, and long ones.
fn names() -> Vec<String> {
    vec![
        "orders".into(),
        "a".into(),
        "b".into(),
        "\u{e9}t\u{e9}".into(),
        "\u{1f980}".into(),
        "nul\0name".into(),
        "x".repeat(300),
        "\u{20ac}".repeat(70),
    ]
}

fn role(name: &str) -> Role {
    Role::new(name).expect("the seed names are valid")
}

fn member(name: &str) -> MemberId {
    MemberId::new(name).expect("the seed names are valid")
}

fn lease_value(holder: &str, epoch: i16, deadline: i64) -> Lease {
    Lease {
        member: member(holder),
        token: FencingToken::new(1000 + i64::from(epoch), epoch),
        granted_at: UnixMillis(deadline.wrapping_sub(30_000)),
        deadline: UnixMillis(deadline),
    }
}

impl Seeds {
    pub fn new() -> Seeds {
        let names = names();
        let mut keys = Vec::new();
        let mut registrations = Vec::new();
        let mut leases = Vec::new();
        for (i, a) in names.iter().enumerate() {
            keys.push(Key::lease(role(a)).encode());
            registrations.push(
                Registration {
                    member: member(a),
                    registered_at: UnixMillis(1_700_000_000_000 + i as i64),
                }
                .encode(),
            );
            leases.push(lease_value(a, i as i16, 1_700_000_030_000).encode());
            for b in &names {
                keys.push(Key::registration(role(a), member(b)).encode());
            }
        }
        Seeds {
            keys,
            registrations,
            leases,
            responses: kafka::samples(),
            batches: kafka::sample_batches(),
            compressed: kafka::compressed_sample_batches()
                .into_iter()
                .map(|(_, b)| b)
                .collect(),
        }
    }
}

/// The targets, in the order they run.
pub fn all() -> Vec<Target> {
    vec![
        Target {
            name: "record.key",
            weight: 150,
            gen: |rng, s| record_input(rng, &s.keys),
            run: |i, _| run_key(&i.bytes),
            allowance: 0,
        },
        Target {
            name: "record.registration",
            weight: 100,
            gen: |rng, s| record_input(rng, &s.registrations),
            run: |i, _| run_registration(&i.bytes),
            allowance: 0,
        },
        Target {
            name: "record.lease",
            weight: 100,
            gen: |rng, s| record_input(rng, &s.leases),
            run: |i, _| run_lease(&i.bytes),
            allowance: 0,
        },
        Target {
            name: "state.apply",
            weight: 100,
            gen: state_input,
            run: |i, _| run_state(i),
            allowance: 0,
        },
        Target {
            name: "kafka.response",
            weight: 250,
            gen: |rng, s| response_input(rng, s, false),
            run: |i, _| run_exchange(i),
            allowance: 0,
        },
        Target {
            name: "kafka.frame",
            weight: 100,
            gen: |rng, s| response_input(rng, s, true),
            run: |i, _| run_exchange(i),
            allowance: 0,
        },
        Target {
            name: "kafka.batches",
            weight: 200,
            gen: batches_input,
            run: |i, _| run_batches(i),
            allowance: 8 * kafka::DECOMPRESSED_LIMIT,
        },
        Target {
            name: "kafka.scram",
            weight: 1,
            gen: scram_input,
            run: |i, _| run_scram(i),
            allowance: 0,
        },
    ]
}

// ---- records ---------------------------------------------------------------------------------

/// A valid encoding, mutated most of the time; or random bytes.
fn record_input(rng: &mut Rng, pool: &[Vec<u8>]) -> Input {
    let bytes = if rng.chance(1, 10) {
        random_bytes(rng)
    } else {
        let mut b = rng.pick(pool).clone();
        if !rng.chance(1, 10) {
            let donors: Vec<&[u8]> = (0..2).map(|_| rng.pick(pool).as_slice()).collect();
            mutate(rng, &mut b, &donors);
        }
        b
    };
    Input {
        bytes,
        ..Input::default()
    }
}

/// What every decode of one part must agree on: the owned and borrowed decoders give the same
/// value or the same error, an error names the part, a value re-encodes to exactly the bytes
/// (the format is canonical), and decoding with an expected name changes nothing.
fn check_part<O: PartialEq + std::fmt::Debug, B: Copy>(
    part: Part,
    owned: Result<O, FormatError>,
    borrowed: Result<B, FormatError>,
    to_owned: impl Fn(B) -> O,
    encode: impl Fn(&O) -> Vec<u8>,
    bytes: &[u8],
) -> Outcome {
    let borrowed_owned = borrowed.map(&to_owned);
    if owned != borrowed_owned {
        return Outcome::Violation(format!(
            "the owned and borrowed {part} decoders disagree: {owned:?} vs {borrowed_owned:?}"
        ));
    }
    match owned {
        Ok(v) => {
            let again = encode(&v);
            if again != bytes {
                return Outcome::Violation(format!(
                    "the {part} decoded to {v:?}, which encodes to other bytes"
                ));
            }
            Outcome::Accepted
        }
        Err(e) if e.part != part => {
            Outcome::Violation(format!("a {part} error names another part: {e}"))
        }
        Err(_) => Outcome::Refused,
    }
}

fn expected_names(found: Option<&str>) -> Vec<Option<String>> {
    let mut out = vec![
        None,
        Some("orders".into()),
        Some(String::new()),
        Some("a".into()),
    ];
    out.push(found.map(str::to_owned));
    out
}

fn run_key(bytes: &[u8]) -> Outcome {
    let borrowed = KeyRef::decode(bytes);
    for e in expected_names(borrowed.as_ref().ok().map(|k| k.role())) {
        let with = core_fuzz::key_expecting(bytes, e.as_deref());
        if with != borrowed {
            return Outcome::Violation(format!(
                "decoding the key expecting {e:?} gave {with:?}, without {borrowed:?}"
            ));
        }
    }
    if let Ok(k) = borrowed {
        let peeked = core_fuzz::peek_key_role(bytes);
        if peeked != Some(k.role().as_bytes()) {
            return Outcome::Violation(format!(
                "peek found role {peeked:?} in a key of role {:?}",
                k.role()
            ));
        }
    }
    check_part(
        Part::Key,
        Key::decode(bytes),
        borrowed,
        KeyRef::to_owned,
        Key::encode,
        bytes,
    )
}

fn run_registration(bytes: &[u8]) -> Outcome {
    let borrowed = RegistrationRef::decode(bytes);
    for e in expected_names(borrowed.as_ref().ok().map(|r| r.member())) {
        let with = core_fuzz::registration_expecting(bytes, e.as_deref());
        if with != borrowed {
            return Outcome::Violation(format!(
                "decoding the registration expecting {e:?} gave {with:?}, without {borrowed:?}"
            ));
        }
    }
    check_part(
        Part::RegistrationValue,
        Registration::decode(bytes),
        borrowed,
        RegistrationRef::to_owned,
        Registration::encode,
        bytes,
    )
}

fn run_lease(bytes: &[u8]) -> Outcome {
    let borrowed = LeaseRef::decode(bytes);
    for e in expected_names(borrowed.as_ref().ok().map(|l| l.member())) {
        let with = core_fuzz::lease_expecting(bytes, e.as_deref());
        if with != borrowed {
            return Outcome::Violation(format!(
                "decoding the lease expecting {e:?} gave {with:?}, without {borrowed:?}"
            ));
        }
    }
    check_part(
        Part::LeaseValue,
        Lease::decode(bytes),
        borrowed,
        LeaseRef::to_owned,
        Lease::encode,
        bytes,
    )
}

// ---- RoleState -------------------------------------------------------------------------------

/// The roles a state is built for (parameter 0 picks one).
const STATE_ROLES: [&str; 3] = ["orders", "\u{1f980}", "billing"];
const STATE_MEMBERS: [&str; 5] = ["a", "b", "c", "\u{e9}", "nul\0"];

/// A log of up to 48 records of the state's role and another role: registrations,
/// deregistrations, leases and tombstones, some mutated, at offsets that mostly grow but also
/// repeat, go back, jump, and reach `i64::MAX`. Serialised into the input's bytes as
/// (offset i64, key length u32, key, value flag u8, value length u32, value) per record.
fn state_input(rng: &mut Rng, seeds: &Seeds) -> Input {
    let role_at = rng.below(STATE_ROLES.len());
    let ours = STATE_ROLES[role_at];
    let n = rng.range(1, 48);
    let mut offset: i64 = rng.pick(&[0i64, 0, 5, i64::MAX - 40]).to_owned();
    let mut bytes = Vec::new();
    for _ in 0..n {
        offset = match rng.below(20) {
            0 => offset,
            1 => offset.saturating_sub(rng.range(1, 5) as i64),
            2 => rng.interesting(),
            3 => i64::MAX - rng.below(3) as i64,
            _ => offset.saturating_add(rng.range(1, 3) as i64),
        };
        let record_role = if rng.chance(1, 6) { "billing" } else { ours };
        let who = *rng.pick(&STATE_MEMBERS);
        let (mut key, mut value) = match rng.below(6) {
            0..=2 => {
                // A registration; now and then of another member than the key's.
                let named = if rng.chance(1, 10) {
                    *rng.pick(&STATE_MEMBERS)
                } else {
                    who
                };
                let v = Registration {
                    member: member(named),
                    registered_at: UnixMillis(offset),
                };
                (
                    Key::registration(role(record_role), member(who)).encode(),
                    Some(v.encode()),
                )
            }
            3 => (
                Key::registration(role(record_role), member(who)).encode(),
                if rng.chance(1, 2) {
                    None
                } else {
                    Some(Vec::new())
                },
            ),
            4 => (
                Key::lease(role(record_role)).encode(),
                Some(lease_value(who, rng.below(100) as i16, offset).encode()),
            ),
            _ => (Key::lease(role(record_role)).encode(), None),
        };
        if rng.chance(1, 8) {
            let donors: Vec<&[u8]> = vec![rng.pick(&seeds.keys).as_slice()];
            mutate(rng, &mut key, &donors);
        }
        if let Some(v) = value.as_mut() {
            if rng.chance(1, 8) {
                let donors: Vec<&[u8]> = vec![rng.pick(&seeds.leases).as_slice()];
                mutate(rng, v, &donors);
            }
        }
        bytes.extend(offset.to_be_bytes());
        bytes.extend((key.len() as u32).to_be_bytes());
        bytes.extend(&key);
        match value {
            Some(v) => {
                bytes.push(1);
                bytes.extend((v.len() as u32).to_be_bytes());
                bytes.extend(v);
            }
            None => bytes.push(0),
        }
    }
    Input {
        bytes,
        params: vec![role_at as i64],
        ..Input::default()
    }
}

/// The records of a serialised log (a short tail is ignored).
fn parse_log(mut b: &[u8]) -> Vec<Record> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = b.split_at_checked(n)?;
        *b = tail;
        Some(head)
    }
    fn u32_at(b: &mut &[u8]) -> Option<usize> {
        Some(u32::from_be_bytes(take(b, 4)?.try_into().ok()?) as usize)
    }
    let mut out = Vec::new();
    while let Some(offset) = take(&mut b, 8) {
        let offset = i64::from_be_bytes(offset.try_into().unwrap_or([0; 8]));
        let Some(klen) = u32_at(&mut b) else { break };
        let Some(key) = take(&mut b, klen) else { break };
        let Some(flag) = take(&mut b, 1) else { break };
        let value = if flag[0] == 1 {
            let Some(vlen) = u32_at(&mut b) else { break };
            let Some(v) = take(&mut b, vlen) else { break };
            Some(v.to_vec())
        } else {
            None
        };
        out.push(Record {
            offset,
            key: key.to_vec(),
            value,
        });
    }
    out
}

/// The reference reading of the records: owned decoding and ordered maps, one record at a
/// time, with the same outcome names as [`Applied`].
#[derive(Default)]
struct Model {
    members: BTreeMap<String, i64>,
    lease: Option<(Lease, i64)>,
    /// The largest join offset a member had when a lease record named it: members joined
    /// before it (other than the holder) were passed over.
    led_from: Option<i64>,
    next: i64,
    /// A record at `i64::MAX` was applied: no later offset exists.
    ended: bool,
    malformed: u64,
}

impl Model {
    fn apply(&mut self, role: &Role, r: &Record) -> &'static str {
        if r.offset < self.next || self.ended {
            return "already seen";
        }
        self.ended = r.offset == i64::MAX;
        self.next = r.offset.saturating_add(1);
        if let Some(found) = core_fuzz::peek_key_role(&r.key) {
            if found != role.as_str().as_bytes() {
                return "other role";
            }
        }
        let key = match Key::decode(&r.key) {
            Ok(k) => k,
            Err(_) => {
                self.malformed += 1;
                return "malformed";
            }
        };
        if key.role() != role {
            return "other role";
        }
        let value = r.value.as_deref().filter(|v| !v.is_empty());
        match (key.member(), value) {
            (Some(m), Some(v)) => match Registration::decode(v) {
                Ok(reg) if &reg.member == m => {
                    self.members.insert(m.as_str().to_owned(), r.offset);
                    "registered"
                }
                _ => {
                    self.malformed += 1;
                    "malformed"
                }
            },
            (Some(m), None) => {
                self.members.remove(m.as_str());
                "deregistered"
            }
            (None, Some(v)) => match Lease::decode(v) {
                Ok(l) => {
                    if let Some(&joined) = self.members.get(l.member.as_str()) {
                        self.led_from = Some(self.led_from.map_or(joined, |o| o.max(joined)));
                    }
                    self.lease = Some((l, r.offset));
                    "leased"
                }
                Err(_) => {
                    self.malformed += 1;
                    "malformed"
                }
            },
            (None, None) => {
                self.lease = None;
                "lease cleared"
            }
        }
    }
}

fn applied_name(a: &Applied) -> &'static str {
    match a {
        Applied::Registered => "registered",
        Applied::Deregistered => "deregistered",
        Applied::Leased => "leased",
        Applied::LeaseCleared => "lease cleared",
        Applied::OtherRole => "other role",
        Applied::AlreadySeen => "already seen",
        Applied::Malformed(Malformed::Format(_) | Malformed::MemberMismatch) => "malformed",
    }
}

/// Applies the log one record at a time to a `RoleState` and to the reference model: every
/// outcome, and after every record the roster (in join order), the lease, the next offset and
/// the malformed count must agree, and the state's own views (ranks, join offsets) must be
/// consistent. Applying the log again changes nothing.
fn run_state(input: &Input) -> Outcome {
    let role = role(STATE_ROLES[input.params[0] as usize % STATE_ROLES.len()]);
    let records = parse_log(&input.bytes);
    let mut state = RoleState::new(role.clone());
    let mut model = Model::default();
    for (i, r) in records.iter().enumerate() {
        let got = applied_name(&state.apply(r));
        let want = model.apply(&role, r);
        if got != want {
            return Outcome::Violation(format!(
                "record {i} (offset {}): the state says {got}, the reference {want}",
                r.offset
            ));
        }
        if let Some(why) = disagreement(&state, &model) {
            return Outcome::Violation(format!("after record {i} (offset {}): {why}", r.offset));
        }
    }
    let before = state.clone();
    for r in &records {
        state.apply(r);
    }
    if state != before {
        return Outcome::Violation("applying the log again changed the state".into());
    }
    if state.malformed() > 0 {
        Outcome::Refused
    } else {
        Outcome::Accepted
    }
}

fn disagreement(state: &RoleState, model: &Model) -> Option<String> {
    let holder_name = model
        .lease
        .as_ref()
        .map(|(l, _)| l.member.as_str().to_owned());
    let passed_over = |name: &str, offset: i64| {
        holder_name.as_deref() != Some(name) && model.led_from.is_some_and(|mark| offset < mark)
    };
    let roster: Vec<(String, i64)> = state
        .roster()
        .map(|(m, o)| (m.as_str().to_owned(), o))
        .collect();
    let mut expected: Vec<(String, i64)> =
        model.members.iter().map(|(m, o)| (m.clone(), *o)).collect();
    expected.sort_by_key(|(_, o)| *o);
    if roster != expected {
        return Some(format!("roster {roster:?}, reference {expected:?}"));
    }
    if state.len() != roster.len() || state.roster().len() != roster.len() {
        return Some(format!(
            "len() is {} and the roster iterator says {}, for {} members",
            state.len(),
            state.roster().len(),
            roster.len()
        ));
    }
    if !roster.windows(2).all(|w| w[0].1 < w[1].1) {
        return Some(format!("join offsets are not increasing: {roster:?}"));
    }
    // The holder is not counted from the registration it leads from (one before its lease
    // record); registered again after it, it counts like any other member.
    let leading_from = state
        .lease()
        .and_then(|l| state.join_offset(&l.lease.member).filter(|&o| o < l.offset));
    let mut rank = 0;
    for (name, offset) in &roster {
        let m = member(name);
        if state.join_offset(&m) != Some(*offset) {
            return Some(format!(
                "join_offset({name:?}) is {:?}, the roster says {offset}",
                state.join_offset(&m)
            ));
        }
        let skipped = passed_over(name, *offset);
        if state.passed_over(&m) != skipped {
            return Some(format!(
                "passed_over({name:?}) is {}, the reference says {skipped}",
                state.passed_over(&m)
            ));
        }
        let expected = (!skipped).then_some(rank);
        if state.rank_of(&m) != expected {
            return Some(format!(
                "rank_of({name:?}) is {:?}, expected {expected:?}",
                state.rank_of(&m)
            ));
        }
        if leading_from != Some(*offset) && !skipped {
            rank += 1;
        }
    }
    let lease = state.lease().map(|e| (e.lease.clone(), e.offset));
    if lease != model.lease {
        return Some(format!("lease {lease:?}, reference {:?}", model.lease));
    }
    if state.next_offset() != model.next || state.malformed() != model.malformed {
        return Some(format!(
            "next offset {} and {} malformed, reference {} and {}",
            state.next_offset(),
            state.malformed(),
            model.next,
            model.malformed
        ));
    }
    None
}

// ---- Kafka answers ---------------------------------------------------------------------------

/// A frame on the socket: size, header (correlation id 1; tagged fields in header v1), body.
fn frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let header_v1 = kafka::header_version(api_key, version) == Some(1);
    let header_len = if header_v1 { 5 } else { 4 };
    let mut f = ((body.len() + header_len) as i32).to_be_bytes().to_vec();
    f.extend(1i32.to_be_bytes());
    if header_v1 {
        f.push(0);
    }
    f.extend(body);
    f
}

/// A well-formed answer of some API and version, its body mutated (or replaced by random
/// bytes) inside a correct frame; with `whole_frame`, the frame (size and header) is mutated
/// too. Parameters: API key, version, whether anything was changed.
fn response_input(rng: &mut Rng, seeds: &Seeds, whole_frame: bool) -> Input {
    let (api_key, version, body) = rng.pick(&seeds.responses).clone();
    let pristine = rng.chance(1, 20);
    let mut body = body;
    if !pristine {
        if rng.chance(1, 10) {
            body = random_bytes(rng);
        } else {
            let donors: Vec<&[u8]> = (0..2)
                .map(|_| rng.pick(&seeds.responses).2.as_slice())
                .collect();
            mutate(rng, &mut body, &donors);
        }
    }
    let mut bytes = frame(api_key, version, &body);
    if whole_frame && !pristine {
        let other = frame(api_key, version, &rng.pick(&seeds.responses).2);
        mutate(rng, &mut bytes, &[&other]);
    }
    Input {
        bytes,
        params: vec![i64::from(api_key), i64::from(version), i64::from(!pristine)],
        ..Input::default()
    }
}

/// The exchange of the input's API and version against the input's bytes. A well-formed
/// answer that was not changed must be accepted: the shapes must never refuse what
/// `kafka-protocol` encodes.
fn run_exchange(input: &Input) -> Outcome {
    let (api_key, version, changed) = (
        input.params[0] as i16,
        input.params[1] as i16,
        input.params[2],
    );
    match kafka::exchange(api_key, version, &input.bytes) {
        Ok(()) => Outcome::Accepted,
        Err(why) if changed == 0 => Outcome::Violation(format!(
            "a well-formed answer of API {api_key} v{version} was refused: {why}"
        )),
        Err(_) => Outcome::Refused,
    }
}

// ---- record batches --------------------------------------------------------------------------

/// The sample batches (two records and a commit marker at offsets 40-42), uncompressed or
/// with the records compressed by one codec, mutated most of the time, with their CRCs recomputed most of the time so that the mutation reaches the record
/// parser. Parameters: whether anything was changed, the fetch offset, then (producer id,
/// first offset) pairs of the aborted list.
fn batches_input(rng: &mut Rng, seeds: &Seeds) -> Input {
    // Half of the inputs start from a compressed sample (each codec alike), so that the
    // mutations (their CRCs recomputed) reach the decompressors.
    let seed = if rng.chance(1, 2) {
        rng.pick(&seeds.compressed)
    } else {
        &seeds.batches
    };
    let mut bytes = seed.clone();
    let pristine = rng.chance(1, 20);
    if !pristine {
        if rng.chance(1, 20) {
            bytes = random_bytes(rng);
        } else {
            let donors: Vec<&[u8]> = std::iter::once(seeds.batches.as_slice())
                .chain(seeds.compressed.iter().map(Vec::as_slice))
                .collect();
            mutate(rng, &mut bytes, &donors);
        }
        if rng.chance(3, 4) {
            kafka::seal_batches(&mut bytes);
        }
    }
    let from = if pristine {
        0
    } else {
        match rng.below(4) {
            0 => 0,
            1 => 40 + rng.below(4) as i64,
            2 => rng.interesting(),
            _ => rng.below(100) as i64,
        }
    };
    let mut params = vec![i64::from(!pristine), from];
    if !pristine {
        for _ in 0..rng.below(4) {
            params.push(if rng.chance(1, 2) {
                7
            } else {
                rng.interesting()
            });
            params.push(if rng.chance(1, 2) {
                38 + rng.below(6) as i64
            } else {
                rng.interesting()
            });
        }
    }
    Input {
        bytes,
        params,
        ..Input::default()
    }
}

/// The reader's parse, filter and view of the bytes. The unchanged sample must give its two
/// committed records.
fn run_batches(input: &Input) -> Outcome {
    let (changed, from) = (input.params[0], input.params[1]);
    let aborted: Vec<(i64, i64)> = input.params[2..]
        .chunks_exact(2)
        .map(|p| (p[0], p[1]))
        .collect();
    match kafka::fetched(&input.bytes, from, &aborted) {
        Ok((n, skipped)) if changed == 0 && (n != 2 || skipped != 0) => Outcome::Violation(
            format!("the sample batches gave {n} records, not 2, and skipped {skipped} batches"),
        ),
        Ok(_) => Outcome::Accepted,
        Err(why) if changed == 0 => {
            Outcome::Violation(format!("the sample batches were refused: {why}"))
        }
        Err(_) => Outcome::Refused,
    }
}

// ---- SCRAM -----------------------------------------------------------------------------------

/// A server-first message that extends the client's nonce (mostly with 4096 iterations, also
/// with counts out of range or not numbers), and a server-final message; either mutated.
/// Parameter: 1 for SHA-512.
fn scram_input(rng: &mut Rng, _: &Seeds) -> Input {
    let salt = *rng.pick(&[
        "W22ZaJ0SNY7soEsUEjb6gQ==",
        "c2FsdA==",
        "QSXCR+Q6sek8bf92",
        "",
    ]);
    let iterations = if rng.chance(3, 4) {
        "4096"
    } else {
        *rng.pick(&[
            "16384",
            "16385",
            "4095",
            "0",
            "-1",
            "4294967295",
            "4294967296",
            "99999999999999999999",
            "4096x",
            "",
        ])
    };
    let nonce = if rng.chance(9, 10) {
        format!("{}%hvYDpWUa2RaTCAfuxFIlj", kafka::SCRAM_NONCE)
    } else {
        "someone-else".to_owned()
    };
    let mut first = match rng.below(8) {
        0 => format!("e=invalid-proof,r={nonce}"),
        1 => format!("m=ext,r={nonce},s={salt},i={iterations}"),
        _ => format!("r={nonce},s={salt},i={iterations}"),
    }
    .into_bytes();
    let mut last = match rng.below(3) {
        0 => b"e=other-error".to_vec(),
        1 => b"v=bm90IHRoZSBzaWduYXR1cmU=".to_vec(),
        _ => b"v=dGhpcyBpcyBub3QgaXQgZWl0aGVyIGJ1dCBsb25nZXI=,x=1".to_vec(),
    };
    if rng.chance(1, 2) {
        mutate(rng, &mut first, &[b"r=,s=,i=,e=,m="]);
    }
    if rng.chance(1, 2) {
        mutate(rng, &mut last, &[b"v=,e="]);
    }
    Input {
        bytes: first,
        extra: last,
        params: vec![i64::from(rng.chance(1, 2))],
    }
}

fn run_scram(input: &Input) -> Outcome {
    match kafka::scram(input.params[0] == 1, &input.bytes, &input.extra) {
        Ok(()) => Outcome::Accepted,
        Err(_) => Outcome::Refused,
    }
}
