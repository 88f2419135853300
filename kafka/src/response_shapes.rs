//! The shapes of the broker answers this client reads, and a check of an answer's bytes against
//! its shape before `kafka-protocol` decodes them.
//!
//! `kafka-protocol` sizes every array it decodes by the element count on the wire
//! (`Vec::with_capacity(count)`) before it reads a single element. A count is an `i32` (or an
//! unsigned varint), so a few corrupt or hostile bytes could ask for hundreds of gigabytes, and
//! an allocation that fails aborts the process. [`check`] walks the bytes field by field as
//! that decoder will, without allocating, and refuses an answer in which any array claims more
//! elements than there are bytes left (every element takes at least one byte), a length runs
//! past the end, a varint runs past five bytes, a known tagged field's size disagrees with its
//! content, or bytes are left over. An answer that passes decodes with allocations bounded by a
//! small multiple of its size (the connection accepts answers up to
//! [`MAX_RESPONSE`](super::net::conn::MAX_RESPONSE) bytes).
//!
//! The shapes mirror Kafka's message definitions (`clients/src/main/resources/common/message/`)
//! for the versions this client sends; the tests encode answers of every such version with
//! `kafka-protocol` and check that each passes and is consumed exactly.

/// The type of one field.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ty {
    I16,
    I32,
    I64,
    Uuid,
    Bool,
    /// A string: `i16` length (`-1` null), or in flexible versions an unsigned varint of the
    /// length plus one (`0` null).
    Str,
    /// Bytes (and record sets): `i32` length (`-1` null), or in flexible versions an unsigned
    /// varint of the length plus one.
    Bytes,
    /// An array of `i32`.
    Ints,
    /// An array of strings.
    Strs,
    /// An array of structures.
    Array(&'static Struct),
    /// A structure (here only as the content of a tagged field).
    Struct(&'static Struct),
}

/// A field present in versions `since..=until`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    since: i16,
    until: i16,
    ty: Ty,
}

/// A tagged field that `kafka-protocol` decodes (rather than keeping its bytes), from version
/// `since`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tagged {
    tag: u32,
    since: i16,
    ty: Ty,
}

/// A structure: its fields in wire order, and its known tagged fields.
#[derive(Debug)]
pub(crate) struct Struct {
    fields: &'static [Field],
    tags: &'static [Tagged],
}

/// The response of one API.
#[derive(Debug)]
pub(crate) struct Shape {
    /// The API key.
    pub(crate) api_key: i16,
    /// The request's name, for messages.
    pub(crate) name: &'static str,
    /// The versions whose shape is described here (the ones this client sends).
    pub(crate) versions: (i16, i16),
    /// The first flexible version (compact strings and arrays, tagged fields).
    flexible_since: i16,
    body: Struct,
}

const ALL: i16 = i16::MAX;
/// A version that no answer has: a shape that is never flexible.
const NEVER: i16 = i16::MAX;

const fn f(ty: Ty) -> Field {
    Field {
        since: 0,
        until: ALL,
        ty,
    }
}
const fn since(since: i16, ty: Ty) -> Field {
    Field {
        since,
        until: ALL,
        ty,
    }
}
const fn until(until: i16, ty: Ty) -> Field {
    Field {
        since: 0,
        until,
        ty,
    }
}
const fn between(since: i16, until: i16, ty: Ty) -> Field {
    Field { since, until, ty }
}
const fn plain(fields: &'static [Field]) -> Struct {
    Struct { fields, tags: &[] }
}

use Ty::{Bool, Bytes, Ints, Str, Strs, Uuid, I16, I32, I64};

// ---- ApiVersions (18) ------------------------------------------------------------------------

static API_VERSION: Struct = plain(&[f(I16), f(I16), f(I16)]);
static FEATURE_KEY: Struct = plain(&[f(Str), f(I16), f(I16)]);

// ---- DescribeConfigs (32) --------------------------------------------------------------------

// An INT8 is one byte, as a boolean is.
static CONFIG_SYNONYM: Struct = plain(&[f(Str), f(Str), f(Bool)]);
static CONFIG_ENTRY: Struct = plain(&[
    f(Str),
    f(Str),
    f(Bool),
    until(0, Bool),
    since(1, Bool),
    f(Bool),
    since(1, Ty::Array(&CONFIG_SYNONYM)),
    since(3, Bool),
    since(3, Str),
]);
static CONFIG_RESULT: Struct =
    plain(&[f(I16), f(Str), f(Bool), f(Str), f(Ty::Array(&CONFIG_ENTRY))]);

// ---- CreateTopics (19) -----------------------------------------------------------------------

// The configs (with their source, an INT8) are answered from v5 on.
static CREATED_CONFIG: Struct = plain(&[f(Str), f(Str), f(Bool), f(Bool), f(Bool)]);
static CREATED_TOPIC: Struct = Struct {
    fields: &[
        f(Str),
        since(7, Uuid),
        f(I16),
        f(Str),
        since(5, I32),
        since(5, I16),
        since(5, Ty::Array(&CREATED_CONFIG)),
    ],
    tags: &[Tagged {
        tag: 0,
        since: 5,
        ty: I16,
    }],
};

// ---- FindCoordinator (10) --------------------------------------------------------------------

static COORDINATOR: Struct = plain(&[f(Str), f(I32), f(Str), f(I32), f(I16), f(Str)]);

// ---- Metadata (3) ----------------------------------------------------------------------------

static METADATA_BROKER: Struct = plain(&[f(I32), f(Str), f(I32), since(1, Str)]);
static METADATA_PARTITION: Struct = plain(&[
    f(I16),
    f(I32),
    f(I32),
    since(7, I32),
    f(Ints),
    f(Ints),
    since(5, Ints),
]);
static METADATA_TOPIC: Struct = plain(&[
    f(I16),
    f(Str),
    since(10, Uuid),
    since(1, Bool),
    f(Ty::Array(&METADATA_PARTITION)),
    since(8, I32),
]);

// ---- AddPartitionsToTxn (24) -----------------------------------------------------------------

static ADD_PARTITION_RESULT: Struct = plain(&[f(I32), f(I16)]);
static ADD_TOPIC_RESULT: Struct = plain(&[f(Str), f(Ty::Array(&ADD_PARTITION_RESULT))]);
static ADD_TXN_RESULT: Struct = plain(&[f(Str), f(Ty::Array(&ADD_TOPIC_RESULT))]);

// ---- TxnOffsetCommit (28) and OffsetFetch (9) ------------------------------------------------

static TXN_OFFSET_PARTITION: Struct = plain(&[f(I32), f(I16)]);
static TXN_OFFSET_TOPIC: Struct = plain(&[f(Str), f(Ty::Array(&TXN_OFFSET_PARTITION))]);
static OFFSET_FETCH_PARTITION: Struct = plain(&[f(I32), f(I64), since(5, I32), f(Str), f(I16)]);
static OFFSET_FETCH_TOPIC: Struct = plain(&[f(Str), f(Ty::Array(&OFFSET_FETCH_PARTITION))]);

// ---- Produce (0) -----------------------------------------------------------------------------

static BATCH_INDEX_ERROR: Struct = plain(&[f(I32), f(Str)]);
static PRODUCE_LEADER: Struct = plain(&[f(I32), f(I32)]);
static NODE_ENDPOINT: Struct = plain(&[f(I32), f(Str), f(I32), f(Str)]);
static PRODUCE_PARTITION: Struct = Struct {
    fields: &[
        f(I32),
        f(I16),
        f(I64),
        f(I64),
        since(5, I64),
        since(8, Ty::Array(&BATCH_INDEX_ERROR)),
        since(8, Str),
    ],
    tags: &[Tagged {
        tag: 0,
        since: 10,
        ty: Ty::Struct(&PRODUCE_LEADER),
    }],
};
static PRODUCE_TOPIC: Struct = plain(&[
    until(12, Str),
    since(13, Uuid),
    f(Ty::Array(&PRODUCE_PARTITION)),
]);

// ---- DescribeTransactions (65) and DescribeProducers (61) ------------------------------------

static TXN_TOPIC: Struct = plain(&[f(Str), f(Ints)]);
static TXN_STATE: Struct = plain(&[
    f(I16),
    f(Str),
    f(Str),
    f(I32),
    f(I64),
    f(I64),
    f(I16),
    f(Ty::Array(&TXN_TOPIC)),
]);
static PRODUCER_STATE: Struct = plain(&[f(I64), f(I32), f(I32), f(I64), f(I32), f(I64)]);
static PRODUCERS_PARTITION: Struct =
    plain(&[f(I32), f(I16), f(Str), f(Ty::Array(&PRODUCER_STATE))]);
static PRODUCERS_TOPIC: Struct = plain(&[f(Str), f(Ty::Array(&PRODUCERS_PARTITION))]);

// ---- Fetch (1) -------------------------------------------------------------------------------

static ABORTED_TXN: Struct = plain(&[f(I64), f(I64)]);
static EPOCH_END_OFFSET: Struct = plain(&[f(I32), f(I64)]);
static FETCH_LEADER: Struct = plain(&[f(I32), f(I32)]);
static SNAPSHOT_ID: Struct = plain(&[f(I64), f(I32)]);
static FETCH_PARTITION: Struct = Struct {
    fields: &[
        f(I32),
        f(I16),
        f(I64),
        f(I64),
        since(5, I64),
        f(Ty::Array(&ABORTED_TXN)),
        since(11, I32),
        f(Bytes),
    ],
    tags: &[
        Tagged {
            tag: 0,
            since: 12,
            ty: Ty::Struct(&EPOCH_END_OFFSET),
        },
        Tagged {
            tag: 1,
            since: 12,
            ty: Ty::Struct(&FETCH_LEADER),
        },
        Tagged {
            tag: 2,
            since: 12,
            ty: Ty::Struct(&SNAPSHOT_ID),
        },
    ],
};
static FETCH_TOPIC: Struct = plain(&[
    until(12, Str),
    since(13, Uuid),
    f(Ty::Array(&FETCH_PARTITION)),
]);

// ---- ListOffsets (2) -------------------------------------------------------------------------

static LIST_OFFSETS_PARTITION: Struct = plain(&[f(I32), f(I16), f(I64), f(I64), since(4, I32)]);
static LIST_OFFSETS_TOPIC: Struct = plain(&[f(Str), f(Ty::Array(&LIST_OFFSETS_PARTITION))]);

/// Every response this client reads, at the versions it sends.
pub(crate) static SHAPES: &[Shape] = &[
    Shape {
        api_key: 18,
        name: "ApiVersions",
        versions: (3, 3),
        flexible_since: 3,
        body: Struct {
            fields: &[f(I16), f(Ty::Array(&API_VERSION)), since(1, I32)],
            tags: &[
                Tagged {
                    tag: 0,
                    since: 3,
                    ty: Ty::Array(&FEATURE_KEY),
                },
                Tagged {
                    tag: 1,
                    since: 3,
                    ty: I64,
                },
                Tagged {
                    tag: 2,
                    since: 3,
                    ty: Ty::Array(&FEATURE_KEY),
                },
                Tagged {
                    tag: 3,
                    since: 3,
                    ty: Bool,
                },
            ],
        },
    },
    Shape {
        api_key: 17,
        name: "SaslHandshake",
        versions: (0, 1),
        flexible_since: NEVER,
        body: plain(&[f(I16), f(Strs)]),
    },
    Shape {
        api_key: 36,
        name: "SaslAuthenticate",
        versions: (0, 2),
        flexible_since: 2,
        body: plain(&[f(I16), f(Str), f(Bytes), since(1, I64)]),
    },
    Shape {
        api_key: 10,
        name: "FindCoordinator",
        versions: (0, 6),
        flexible_since: 3,
        body: plain(&[
            since(1, I32),
            until(3, I16),
            between(1, 3, Str),
            until(3, I32),
            until(3, Str),
            until(3, I32),
            since(4, Ty::Array(&COORDINATOR)),
        ]),
    },
    Shape {
        api_key: 3,
        name: "Metadata",
        versions: (0, 12),
        flexible_since: 9,
        body: plain(&[
            since(3, I32),
            f(Ty::Array(&METADATA_BROKER)),
            since(2, Str),
            since(1, I32),
            f(Ty::Array(&METADATA_TOPIC)),
            between(8, 10, I32),
        ]),
    },
    Shape {
        api_key: 22,
        name: "InitProducerId",
        versions: (0, 4),
        flexible_since: 2,
        body: plain(&[f(I32), f(I16), f(I64), f(I16)]),
    },
    Shape {
        api_key: 24,
        name: "AddPartitionsToTxn",
        versions: (0, 3),
        flexible_since: 3,
        body: plain(&[
            f(I32),
            since(4, I16),
            since(4, Ty::Array(&ADD_TXN_RESULT)),
            until(3, Ty::Array(&ADD_TOPIC_RESULT)),
        ]),
    },
    Shape {
        api_key: 0,
        name: "Produce",
        versions: (3, 9),
        flexible_since: 9,
        body: Struct {
            fields: &[f(Ty::Array(&PRODUCE_TOPIC)), f(I32)],
            tags: &[Tagged {
                tag: 0,
                since: 10,
                ty: Ty::Array(&NODE_ENDPOINT),
            }],
        },
    },
    Shape {
        api_key: 26,
        name: "EndTxn",
        versions: (0, 3),
        flexible_since: 3,
        body: plain(&[f(I32), f(I16)]),
    },
    Shape {
        api_key: 25,
        name: "AddOffsetsToTxn",
        versions: (0, 3),
        flexible_since: 3,
        body: plain(&[f(I32), f(I16)]),
    },
    Shape {
        api_key: 28,
        name: "TxnOffsetCommit",
        versions: (0, 3),
        flexible_since: 3,
        body: plain(&[f(I32), f(Ty::Array(&TXN_OFFSET_TOPIC))]),
    },
    Shape {
        api_key: 9,
        name: "OffsetFetch",
        versions: (7, 7),
        flexible_since: 6,
        body: plain(&[f(I32), f(Ty::Array(&OFFSET_FETCH_TOPIC)), f(I16)]),
    },
    Shape {
        api_key: 65,
        name: "DescribeTransactions",
        versions: (0, 0),
        flexible_since: 0,
        body: plain(&[f(I32), f(Ty::Array(&TXN_STATE))]),
    },
    Shape {
        api_key: 61,
        name: "DescribeProducers",
        versions: (0, 0),
        flexible_since: 0,
        body: plain(&[f(I32), f(Ty::Array(&PRODUCERS_TOPIC))]),
    },
    Shape {
        api_key: 1,
        name: "Fetch",
        versions: (4, 12),
        flexible_since: 12,
        body: Struct {
            fields: &[
                f(I32),
                since(7, I16),
                since(7, I32),
                f(Ty::Array(&FETCH_TOPIC)),
            ],
            tags: &[Tagged {
                tag: 0,
                since: 16,
                ty: Ty::Array(&NODE_ENDPOINT),
            }],
        },
    },
    Shape {
        api_key: 32,
        name: "DescribeConfigs",
        versions: (1, 4),
        flexible_since: 4,
        body: plain(&[f(I32), f(Ty::Array(&CONFIG_RESULT))]),
    },
    Shape {
        api_key: 19,
        name: "CreateTopics",
        versions: (2, 7),
        flexible_since: 5,
        body: plain(&[f(I32), f(Ty::Array(&CREATED_TOPIC))]),
    },
    Shape {
        api_key: 2,
        name: "ListOffsets",
        versions: (1, 7),
        flexible_since: 6,
        body: plain(&[since(2, I32), f(Ty::Array(&LIST_OFFSETS_TOPIC))]),
    },
];

/// The shape of API `api_key`'s response, if this client reads it.
pub(crate) fn shape(api_key: i16) -> Option<&'static Shape> {
    SHAPES.iter().find(|s| s.api_key == api_key)
}

/// Checks a response body of API `api_key` at `version` (after its header): see the
/// [module docs](self). The error says what is wrong and where.
pub(crate) fn check(api_key: i16, version: i16, body: &[u8]) -> Result<(), String> {
    let shape =
        shape(api_key).ok_or_else(|| format!("API key {api_key} has no known response shape"))?;
    if version < shape.versions.0 || version > shape.versions.1 {
        return Err(format!(
            "{} v{version} has no known response shape (v{} to v{} have)",
            shape.name, shape.versions.0, shape.versions.1
        ));
    }
    let mut walk = Walk {
        bytes: body,
        at: 0,
        version,
        flexible: version >= shape.flexible_since,
    };
    walk.structure(&shape.body)?;
    if walk.at != body.len() {
        return Err(format!(
            "{} bytes follow the end of the {} v{version} answer at byte {}",
            body.len() - walk.at,
            shape.name,
            walk.at
        ));
    }
    Ok(())
}

/// A cursor over an answer's bytes.
struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
    version: i16,
    flexible: bool,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        if n > self.left() {
            return Err(format!(
                "{what} needs {n} bytes at byte {} but {} remain",
                self.at,
                self.left()
            ));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn int<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// An unsigned varint of at most five bytes (Kafka refuses longer ones).
    fn uvarint(&mut self, what: &str) -> Result<u32, String> {
        let (value, len) = read_uvarint(&self.bytes[self.at..])
            .ok_or_else(|| format!("{what}: no valid unsigned varint at byte {}", self.at))?;
        self.at += len;
        Ok(value)
    }

    /// A length or count: `Some(n)`, or `None` for null.
    fn length(&mut self, wide: bool, what: &str) -> Result<Option<usize>, String> {
        let at = self.at;
        if self.flexible {
            let n = self.uvarint(what)?;
            return Ok(n.checked_sub(1).map(|n| n as usize));
        }
        let n = if wide {
            i64::from(i32::from_be_bytes(self.int::<4>(what)?))
        } else {
            i64::from(i16::from_be_bytes(self.int::<2>(what)?))
        };
        match n {
            -1 => Ok(None),
            n if n < 0 => Err(format!("{what} has a negative length {n} at byte {at}")),
            n => Ok(Some(n as usize)),
        }
    }

    /// An array's element count, refused when it cannot fit in the bytes left.
    fn count(&mut self, what: &str) -> Result<usize, String> {
        let at = self.at;
        let n = self.length(true, what)?.unwrap_or(0);
        if n > self.left() {
            return Err(format!(
                "{what} at byte {at} claims {n} elements but only {} bytes remain",
                self.left()
            ));
        }
        Ok(n)
    }

    fn field(&mut self, ty: Ty) -> Result<(), String> {
        match ty {
            Ty::Bool => self.take(1, "a boolean").map(drop),
            Ty::I16 => self.take(2, "an i16").map(drop),
            Ty::I32 => self.take(4, "an i32").map(drop),
            Ty::I64 => self.take(8, "an i64").map(drop),
            Ty::Uuid => self.take(16, "a UUID").map(drop),
            Ty::Str => {
                if let Some(n) = self.length(false, "a string")? {
                    self.take(n, "a string")?;
                }
                Ok(())
            }
            Ty::Bytes => {
                if let Some(n) = self.length(true, "a byte field")? {
                    self.take(n, "a byte field")?;
                }
                Ok(())
            }
            Ty::Ints => {
                let n = self.count("an array of i32")?;
                self.take(n.saturating_mul(4), "an array of i32").map(drop)
            }
            Ty::Strs => {
                let n = self.count("an array of strings")?;
                (0..n).try_for_each(|_| self.field(Ty::Str))
            }
            Ty::Array(s) => {
                let n = self.count("an array")?;
                (0..n).try_for_each(|_| self.structure(s))
            }
            Ty::Struct(s) => self.structure(s),
        }
    }

    fn structure(&mut self, s: &Struct) -> Result<(), String> {
        for field in s.fields {
            if field.since <= self.version && self.version <= field.until {
                self.field(field.ty)?;
            }
        }
        if self.flexible {
            self.tagged(s.tags)?;
        }
        Ok(())
    }

    /// A tagged-field section. A known tag's content is read by its type (as the decoder
    /// does, whatever the size says) and must fill exactly its size; others are skipped.
    fn tagged(&mut self, known: &[Tagged]) -> Result<(), String> {
        let n = self.uvarint("a tagged-field count")?;
        for _ in 0..n {
            let tag = self.uvarint("a tag")?;
            let size = self.uvarint("a tagged field's size")? as usize;
            let start = self.at;
            match known
                .iter()
                .find(|t| t.tag == tag && t.since <= self.version)
            {
                Some(t) => {
                    self.field(t.ty)?;
                    if self.at - start != size {
                        return Err(format!(
                            "tagged field {tag} at byte {start} claims {size} bytes but holds {}",
                            self.at - start
                        ));
                    }
                }
                None => {
                    self.take(size, "a tagged field")?;
                }
            }
        }
        Ok(())
    }
}

/// An unsigned varint at the start of `bytes`, and its length; `None` when the bytes end
/// inside it or it runs past five bytes.
pub(crate) fn read_uvarint(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    for (i, &b) in bytes.iter().take(5).enumerate() {
        value |= u32::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Decodable;

    /// Decodes `body` as the response of `api_key` at `version` with `kafka-protocol`.
    fn decodes(api_key: i16, version: i16, body: &[u8]) -> bool {
        let mut b = bytes::Bytes::copy_from_slice(body);
        match api_key {
            18 => ApiVersionsResponse::decode(&mut b, version).is_ok(),
            17 => SaslHandshakeResponse::decode(&mut b, version).is_ok(),
            36 => SaslAuthenticateResponse::decode(&mut b, version).is_ok(),
            10 => FindCoordinatorResponse::decode(&mut b, version).is_ok(),
            3 => MetadataResponse::decode(&mut b, version).is_ok(),
            22 => InitProducerIdResponse::decode(&mut b, version).is_ok(),
            24 => AddPartitionsToTxnResponse::decode(&mut b, version).is_ok(),
            0 => ProduceResponse::decode(&mut b, version).is_ok(),
            26 => EndTxnResponse::decode(&mut b, version).is_ok(),
            25 => AddOffsetsToTxnResponse::decode(&mut b, version).is_ok(),
            28 => TxnOffsetCommitResponse::decode(&mut b, version).is_ok(),
            9 => OffsetFetchResponse::decode(&mut b, version).is_ok(),
            65 => DescribeTransactionsResponse::decode(&mut b, version).is_ok(),
            61 => DescribeProducersResponse::decode(&mut b, version).is_ok(),
            1 => FetchResponse::decode(&mut b, version).is_ok(),
            2 => ListOffsetsResponse::decode(&mut b, version).is_ok(),
            32 => DescribeConfigsResponse::decode(&mut b, version).is_ok(),
            19 => CreateTopicsResponse::decode(&mut b, version).is_ok(),
            _ => false,
        }
    }

    /// Every version of every answer the client reads, encoded by `kafka-protocol` with its
    /// arrays and known tagged fields filled, passes and is consumed exactly; and each one cut
    /// short anywhere is refused.
    #[test]
    fn the_shapes_accept_what_kafka_protocol_encodes() {
        let samples = super::super::sample_responses::samples();
        assert_eq!(
            samples.len(),
            SHAPES
                .iter()
                .map(|s| (s.versions.1 - s.versions.0 + 1) as usize)
                .sum::<usize>()
        );
        for (api_key, version, body) in samples {
            let name = shape(api_key).map_or("?", |s| s.name);
            assert!(!body.is_empty(), "{name} v{version} did not encode");
            assert_eq!(check(api_key, version, &body), Ok(()), "{name} v{version}");
            assert!(decodes(api_key, version, &body), "{name} v{version}");
            for cut in 0..body.len() {
                assert!(
                    check(api_key, version, &body[..cut]).is_err(),
                    "{name} v{version} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn varints_follow_kafka() {
        assert_eq!(read_uvarint(&[0]), Some((0, 1)));
        assert_eq!(read_uvarint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(
            read_uvarint(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Some((u32::MAX, 5))
        );
        assert_eq!(read_uvarint(&[0x80]), None, "ends inside");
        assert_eq!(read_uvarint(&[0x80; 6]), None, "longer than five bytes");
    }

    /// The DescribeTransactions answer that once asked for a 64 MiB (and could ask for far
    /// more) allocation: a transaction-state array claiming 2^26 elements in a few bytes.
    #[test]
    fn an_array_longer_than_the_answer_is_refused_before_decoding() {
        // throttle, then a compact array of 2^26 states (varint of 2^26 + 1), then nothing.
        let mut body = vec![0, 0, 0, 0];
        let mut n = (1u32 << 26) + 1;
        while n >= 0x80 {
            body.push((n as u8) | 0x80);
            n >>= 7;
        }
        body.push(n as u8);
        let err = check(65, 0, &body).expect_err("refused");
        assert!(err.contains("claims 67108864 elements"), "{err}");
        // A non-flexible array (Metadata v1 brokers) claiming i32::MAX elements.
        let mut body = i32::MAX.to_be_bytes().to_vec();
        body.extend([0; 8]);
        let err = check(3, 1, &body).expect_err("refused");
        assert!(err.contains("claims 2147483647 elements"), "{err}");
    }

    /// Found by the fuzz harness with this check switched off: a ListOffsets v2 answer whose
    /// topic array claims 802,950,809 elements made `kafka-protocol` ask for 64 GB, and the
    /// failed allocation aborted the process.
    #[test]
    fn the_list_offsets_answer_that_aborted_the_process_is_refused() {
        let hex = "794d886e2fdc0e99ad97a442aac3c3674573f8f7f8eee8866f8b1941369fbc0ff7ef699c92\
                   3a44c1f2981424248923c9ef7e6b";
        let body: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        let err = check(2, 2, &body).expect_err("refused");
        assert!(err.contains("claims 802950809 elements"), "{err}");
    }

    #[test]
    fn trailing_bytes_unknown_versions_and_bad_tags_are_refused() {
        // EndTxn v0: throttle and error code, then one byte too many.
        assert!(check(26, 0, &[0, 0, 0, 0, 0, 0]).is_ok());
        let err = check(26, 0, &[0, 0, 0, 0, 0, 0, 9]).expect_err("trailing");
        assert!(err.contains("1 bytes follow"), "{err}");
        assert!(check(26, 4, &[0, 0, 0, 0, 0, 0]).is_err(), "EndTxn v4");
        assert!(
            check(99, 0, &[]).is_err(),
            "an API this client does not call"
        );
        // EndTxn v3 (flexible): an unknown tag is skipped by its size; the size must fit.
        assert!(check(26, 3, &[0, 0, 0, 0, 0, 0, 1, 7, 2, 1, 2]).is_ok());
        assert!(check(26, 3, &[0, 0, 0, 0, 0, 0, 1, 7, 9, 1, 2]).is_err());
        // ApiVersions v3: tag 3 (a boolean) must say size 1.
        let api = |size: u8| vec![0, 0, 1, 0, 0, 0, 0, 1, 3, size, 1];
        assert!(check(18, 3, &api(1)).is_ok());
        let err = check(18, 3, &api(2)).expect_err("size disagrees");
        assert!(err.contains("claims 2 bytes but holds 1"), "{err}");
    }
}
