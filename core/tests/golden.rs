//! Runs every golden vector file in `golden/` against this crate, in both directions.
//! Decoding is checked twice: through the owned types (`Key`, `Registration`, `Lease`) and
//! through the borrowed, allocation-free ones (`KeyRef`, `RegistrationRef`, `LeaseRef`), which
//! must give the same fields and the same errors.
//!
//! The files are language-neutral (their schema is `golden/README.md`) and shared with the ports
//! of the format; no vector is written in this file. Each check loads its file, refuses a missing
//! or empty one, and counts what it asserted.

use std::cmp::Ordering;
use std::path::PathBuf;

use kafka_coordination_core::partition::{
    murmur2, partition_of_bytes, role_partition, to_positive,
};
use kafka_coordination_core::record::{
    FormatError, FormatErrorKind, Key, KeyRef, Lease, LeaseRef, MemberId, Part, Registration,
    RegistrationRef, Role,
};
use kafka_coordination_core::{FencingToken, UnixMillis};
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// Every vector file; `golden_dir_holds_exactly_these_files` keeps this list honest.
const FILES: [&str; 6] = [
    "keys.json",
    "registrations.json",
    "leases.json",
    "malformed.json",
    "partitions.json",
    "tokens.json",
];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("golden")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VectorFile<V> {
    schema_version: u32,
    description: String,
    vectors: Vec<V>,
}

/// Loads one file; panics when it is missing, unparsable, of another schema, or empty.
fn load<V: DeserializeOwned>(name: &str) -> Vec<V> {
    let path = golden_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("golden file {} cannot be read: {e}", path.display()));
    let file: VectorFile<V> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("golden file {} does not parse: {e}", path.display()));
    assert_eq!(file.schema_version, 1, "{name}: unknown schema_version");
    assert!(!file.description.is_empty(), "{name}: empty description");
    assert!(!file.vectors.is_empty(), "{name}: no vectors");
    file.vectors
}

/// Asserts that a file's check ran over all of its vectors and that there were some.
fn counted(name: &str, checked: usize, total: usize) {
    assert!(checked > 0, "{name}: no vector was checked");
    assert_eq!(
        checked, total,
        "{name}: {checked} of {total} vectors were checked"
    );
    println!("{name}: {checked} vectors");
}

// ---------------------------------------------------------------------------------------------
// Compact values (README "Text and hex values").
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Repeat {
    repeat: String,
    count: usize,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Piece {
    Literal(String),
    Repeat(Repeat),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Compact {
    One(Piece),
    Pieces(Vec<Piece>),
}

impl Piece {
    fn push_to(&self, out: &mut String) {
        match self {
            Piece::Literal(s) => out.push_str(s),
            Piece::Repeat(r) => out.push_str(&r.repeat.repeat(r.count)),
        }
    }
}

impl Compact {
    /// The text value, expanded.
    fn text(&self) -> String {
        let mut out = String::new();
        match self {
            Compact::One(p) => p.push_to(&mut out),
            Compact::Pieces(ps) => ps.iter().for_each(|p| p.push_to(&mut out)),
        }
        out
    }

    /// The hex value, expanded and decoded.
    fn bytes(&self) -> Vec<u8> {
        let hex = self.text();
        assert!(
            hex.len().is_multiple_of(2),
            "hex of odd length {}",
            hex.len()
        );
        hex.as_bytes()
            .chunks_exact(2)
            .map(|pair| (nibble(pair[0]) << 4) | nibble(pair[1]))
            .collect()
    }
}

fn nibble(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => panic!("{:?} is not a lowercase hex digit", c as char),
    }
}

/// Compares bytes without printing tens of kilobytes on a failure.
fn assert_bytes(name: &str, what: &str, got: &[u8], want: &[u8]) {
    if got == want {
        return;
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .unwrap_or(got.len().min(want.len()));
    let window = |b: &[u8]| b[at..b.len().min(at + 16)].to_vec();
    panic!(
        "{name}: {what}: {} bytes, expected {}; first difference at offset {at}: {:02x?} vs {:02x?}",
        got.len(),
        want.len(),
        window(got),
        window(want)
    );
}

fn role(name: &str, s: String) -> Role {
    Role::new(s).unwrap_or_else(|e| panic!("{name}: role: {e}"))
}

fn member(name: &str, s: String) -> MemberId {
    MemberId::new(s).unwrap_or_else(|e| panic!("{name}: member: {e}"))
}

// ---------------------------------------------------------------------------------------------
// The files.
// ---------------------------------------------------------------------------------------------

#[test]
fn golden_dir_holds_exactly_these_files() {
    let mut found: Vec<String> = std::fs::read_dir(golden_dir())
        .expect("golden/ exists")
        .map(|e| {
            e.expect("readable entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".json"))
        .collect();
    found.sort();
    let mut want: Vec<String> = FILES.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(
        found, want,
        "every golden file must be asserted by this test"
    );
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyVector {
    name: String,
    kind: String,
    role: Compact,
    member: Compact,
    hex: Compact,
}

#[test]
fn keys() {
    let vectors: Vec<KeyVector> = load("keys.json");
    let (mut checked, mut registrations, mut leases) = (0, 0, 0);
    for v in &vectors {
        let name = v.name.as_str();
        let bytes = v.hex.bytes();
        let r = role(name, v.role.text());
        let m = v.member.text();
        let key = match v.kind.as_str() {
            "registration" => {
                registrations += 1;
                Key::registration(r, member(name, m))
            }
            "lease" => {
                leases += 1;
                assert_eq!(m, "", "{name}: a lease key's member is the empty string");
                Key::lease(r)
            }
            other => panic!("{name}: unknown kind {other:?}"),
        };
        assert_bytes(name, "encode", &key.encode(), &bytes);
        assert_eq!(key.encoded_len(), bytes.len(), "{name}: encoded_len");
        let decoded = Key::decode(&bytes).unwrap_or_else(|e| panic!("{name}: decode: {e}"));
        assert!(decoded == key, "{name}: decode gave other fields");
        let borrowed =
            KeyRef::decode(&bytes).unwrap_or_else(|e| panic!("{name}: borrowed decode: {e}"));
        assert_eq!(borrowed.kind(), key.kind(), "{name}: borrowed kind");
        assert!(
            borrowed.role() == key.role().as_str(),
            "{name}: borrowed decode gave another role"
        );
        assert!(
            borrowed.member() == key.member().map(MemberId::as_str),
            "{name}: borrowed decode gave another member"
        );
        assert!(
            borrowed == key.as_borrowed() && borrowed.to_owned() == key,
            "{name}: borrowed decode gave other fields"
        );
        checked += 1;
    }
    assert!(
        registrations > 0 && leases > 0,
        "keys.json must hold both kinds"
    );
    counted("keys.json", checked, vectors.len());
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistrationVector {
    name: String,
    member: Compact,
    registered_at: i64,
    hex: Compact,
}

#[test]
fn registrations() {
    let vectors: Vec<RegistrationVector> = load("registrations.json");
    let mut checked = 0;
    for v in &vectors {
        let name = v.name.as_str();
        let bytes = v.hex.bytes();
        let value = Registration {
            member: member(name, v.member.text()),
            registered_at: UnixMillis(v.registered_at),
        };
        assert_bytes(name, "encode", &value.encode(), &bytes);
        assert_eq!(value.encoded_len(), bytes.len(), "{name}: encoded_len");
        let decoded =
            Registration::decode(&bytes).unwrap_or_else(|e| panic!("{name}: decode: {e}"));
        assert!(decoded == value, "{name}: decode gave other fields");
        let borrowed = RegistrationRef::decode(&bytes)
            .unwrap_or_else(|e| panic!("{name}: borrowed decode: {e}"));
        assert!(
            borrowed.member() == value.member.as_str(),
            "{name}: borrowed decode gave another member"
        );
        assert_eq!(
            borrowed.registered_at(),
            value.registered_at,
            "{name}: borrowed registered_at"
        );
        assert!(
            borrowed == value.as_borrowed() && borrowed.to_owned() == value,
            "{name}: borrowed decode gave other fields"
        );
        checked += 1;
    }
    counted("registrations.json", checked, vectors.len());
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseVector {
    name: String,
    member: Compact,
    producer_id: i64,
    producer_epoch: i16,
    granted_at: i64,
    deadline: i64,
    hex: Compact,
}

#[test]
fn leases() {
    let vectors: Vec<LeaseVector> = load("leases.json");
    let mut checked = 0;
    for v in &vectors {
        let name = v.name.as_str();
        let bytes = v.hex.bytes();
        let value = Lease {
            member: member(name, v.member.text()),
            token: FencingToken::new(v.producer_id, v.producer_epoch),
            granted_at: UnixMillis(v.granted_at),
            deadline: UnixMillis(v.deadline),
        };
        assert_bytes(name, "encode", &value.encode(), &bytes);
        assert_eq!(value.encoded_len(), bytes.len(), "{name}: encoded_len");
        let decoded = Lease::decode(&bytes).unwrap_or_else(|e| panic!("{name}: decode: {e}"));
        assert!(decoded == value, "{name}: decode gave other fields");
        let borrowed =
            LeaseRef::decode(&bytes).unwrap_or_else(|e| panic!("{name}: borrowed decode: {e}"));
        assert!(
            borrowed.member() == value.member.as_str(),
            "{name}: borrowed decode gave another member"
        );
        assert_eq!(borrowed.token(), value.token, "{name}: borrowed token");
        assert_eq!(
            borrowed.granted_at(),
            value.granted_at,
            "{name}: borrowed granted_at"
        );
        assert_eq!(
            borrowed.deadline(),
            value.deadline,
            "{name}: borrowed deadline"
        );
        assert!(
            borrowed == value.as_borrowed() && borrowed.to_owned() == value,
            "{name}: borrowed decode gave other fields"
        );
        checked += 1;
    }
    counted("leases.json", checked, vectors.len());
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MalformedVector {
    name: String,
    part: String,
    hex: Compact,
    kind: String,
    field: Option<String>,
}

/// The snake_case part names of the golden files.
fn part_name(part: Part) -> &'static str {
    match part {
        Part::Key => "key",
        Part::RegistrationValue => "registration_value",
        Part::LeaseValue => "lease_value",
    }
}

/// The layout field at which decoding stopped, as the golden files name it.
fn field_name(kind: &FormatErrorKind) -> Option<&'static str> {
    match kind {
        FormatErrorKind::Truncated { field, .. }
        | FormatErrorKind::NegativeLength { field, .. }
        | FormatErrorKind::Overlong { field, .. }
        | FormatErrorKind::InvalidUtf8 { field }
        | FormatErrorKind::EmptyName { field } => Some(field.name()),
        FormatErrorKind::UnknownVersion { .. } => Some("version"),
        FormatErrorKind::UnknownKind { .. } => Some("kind"),
        FormatErrorKind::LeaseKeyWithMember { .. } => Some("member"),
        FormatErrorKind::TrailingBytes { .. } => None,
    }
}

#[test]
fn malformed() {
    let vectors: Vec<MalformedVector> = load("malformed.json");
    let mut checked = 0;
    let mut per_part = [0usize; 3];
    for v in &vectors {
        let name = v.name.as_str();
        let bytes = v.hex.bytes();
        // The owned and the borrowed decoder of the part.
        let (result, borrowed): (Result<(), FormatError>, Result<(), FormatError>) =
            match v.part.as_str() {
                "key" => {
                    per_part[0] += 1;
                    (
                        Key::decode(&bytes).map(drop),
                        KeyRef::decode(&bytes).map(drop),
                    )
                }
                "registration_value" => {
                    per_part[1] += 1;
                    (
                        Registration::decode(&bytes).map(drop),
                        RegistrationRef::decode(&bytes).map(drop),
                    )
                }
                "lease_value" => {
                    per_part[2] += 1;
                    (
                        Lease::decode(&bytes).map(drop),
                        LeaseRef::decode(&bytes).map(drop),
                    )
                }
                other => panic!("{name}: unknown part {other:?}"),
            };
        let err = result.expect_err(name);
        assert_eq!(
            borrowed,
            Err(err),
            "{name}: the borrowed decoder must fail as the owned one does"
        );
        assert_eq!(part_name(err.part), v.part, "{name}: part ({err})");
        assert_eq!(err.kind.name(), v.kind, "{name}: kind ({err})");
        assert_eq!(
            field_name(&err.kind),
            v.field.as_deref(),
            "{name}: field ({err})"
        );
        checked += 1;
    }
    assert!(
        per_part.iter().all(|&n| n > 0),
        "malformed.json must cover every part"
    );
    counted("malformed.json", checked, vectors.len());
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionVector {
    name: String,
    role: Compact,
    murmur2: i32,
    to_positive: i32,
    partitions: Vec<PartitionRow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionRow {
    count: i32,
    partition: i32,
}

#[test]
fn partitions() {
    let vectors: Vec<PartitionVector> = load("partitions.json");
    let (mut checked, mut rows, mut negative) = (0, 0, 0);
    for v in &vectors {
        let name = v.name.as_str();
        let text = v.role.text();
        let bytes = text.as_bytes();
        assert_eq!(murmur2(bytes), v.murmur2, "{name}: murmur2");
        assert_eq!(to_positive(v.murmur2), v.to_positive, "{name}: to_positive");
        if v.murmur2 < 0 {
            negative += 1;
        }
        // The empty string hashes, but it is not a role.
        let as_role = Role::new(text.clone()).ok();
        assert_eq!(
            as_role.is_none(),
            text.is_empty(),
            "{name}: only the empty name is no role"
        );
        assert!(!v.partitions.is_empty(), "{name}: no partition rows");
        for row in &v.partitions {
            let want = Ok(row.partition);
            assert_eq!(
                partition_of_bytes(bytes, row.count),
                want,
                "{name}: {} partitions",
                row.count
            );
            if let Some(r) = &as_role {
                assert_eq!(
                    role_partition(r, row.count),
                    want,
                    "{name}: {} partitions",
                    row.count
                );
            }
            rows += 1;
        }
        checked += 1;
    }
    assert!(
        negative > 0,
        "partitions.json must hold roles whose murmur2 is negative"
    );
    println!("partitions.json: {rows} partition rows");
    counted("partitions.json", checked, vectors.len());
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenVector {
    name: String,
    a: TokenFields,
    b: TokenFields,
    order: i8,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFields {
    producer_id: i64,
    producer_epoch: i16,
}

impl TokenFields {
    fn token(&self) -> FencingToken {
        FencingToken::new(self.producer_id, self.producer_epoch)
    }
}

#[test]
fn tokens() {
    let vectors: Vec<TokenVector> = load("tokens.json");
    let mut checked = 0;
    for v in &vectors {
        let name = v.name.as_str();
        let (a, b) = (v.a.token(), v.b.token());
        let want = match v.order {
            -1 => Ordering::Less,
            0 => Ordering::Equal,
            1 => Ordering::Greater,
            other => panic!("{name}: order {other} is not -1, 0 or 1"),
        };
        assert_eq!(a.spec_compare(&b), want, "{name}: compare(a, b)");
        assert_eq!(b.spec_compare(&a), want.reverse(), "{name}: compare(b, a)");
        assert_eq!(a == b, want == Ordering::Equal, "{name}: equality");
        checked += 1;
    }
    counted("tokens.json", checked, vectors.len());
}
