//! The record batches of a read_committed Fetch answer: parsed by hand and filtered as Kafka's
//! consumer filters them. Bad bytes never panic (see [`decode_batches_within`]).
//!
//! Every batch Kafka can hold is read: magic v2, uncompressed or compressed with gzip, snappy
//! (raw or xerial-framed), lz4 or zstd (see `codec.rs`), up to [`MAX_DECOMPRESSED`] bytes of
//! records per batch. A well-framed batch whose CRC-32C holds but whose records cannot be read
//! (an unknown codec, bad compressed data, past the bound, malformed records, an old v0/v1
//! entry) is **skipped**: its offsets are passed and it is reported in [`Decoded::skipped`].
//! Bytes that are no batch at all, or fail their CRC, are a [`Corrupt`] error (transport damage:
//! the broker checked every CRC on produce), and the Fetch is tried again.

use std::collections::HashSet;

use bytes::Bytes;

use super::codec;
use kafka_coordination_transport::Record;

/// The size of a record batch's header (magic v2), from its base offset to its record count.
const BATCH_HEADER: usize = 61;
/// The bytes before a batch's length field counts from: base offset (8) and length (4).
const LOG_OVERHEAD: usize = 12;
/// Where the CRC-covered part of a batch starts (its attributes).
const CRC_FROM: usize = 21;
/// The most bytes the records of one compressed batch may take once decompressed: 64 MiB, 8
/// times the largest Fetch answer the reader asks for (a batch is at most the topic's
/// `max.message.bytes`, 1 MiB by default). A batch that inflates past it is skipped.
pub(crate) const MAX_DECOMPRESSED: usize = 64 * 1024 * 1024;

/// The records of one partition's fetched bytes that a read_committed consumer returns.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// Records at offsets `>= from`, in offset order.
    pub(crate) records: Vec<Record>,
    /// The offset after the last complete batch (at least `from`): where the next Fetch starts.
    pub(crate) next: i64,
    /// The batches passed because their records could not be read, in offset order.
    pub(crate) skipped: Vec<Skipped>,
}

/// A well-framed batch with a valid CRC whose records could not be read: passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// Its first offset (an old-format entry: the offset it carries).
    pub(crate) base: i64,
    /// Its last offset.
    pub(crate) last: i64,
    /// Why it could not be read.
    pub(crate) reason: String,
}

/// Fetched bytes that are no record batch, or a batch that fails its CRC.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Corrupt(pub(crate) String);

/// One record of a batch: its offset, key and value (slices of the batch's record bytes).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RawRecord {
    pub(crate) offset: i64,
    pub(crate) key: Option<Bytes>,
    pub(crate) value: Option<Bytes>,
}

/// The header fields of one batch this reader acts on.
#[derive(Debug, Clone, Copy)]
struct Header {
    base: i64,
    last_offset: i64,
    producer_id: i64,
    transactional: bool,
    control: bool,
    compression: i16,
}

/// What a batch's content is, once its framing is read.
enum Framed {
    /// A magic v2 batch.
    V2(Header),
    /// An old-format (v0/v1) entry carrying this offset, its CRC-32 checked.
    Old { offset: i64, magic: i8 },
}

/// Why a well-framed batch's records could not be read.
enum Unread {
    /// Bytes that are no batch, or a CRC mismatch: the whole decode fails.
    Corrupt(Corrupt),
    /// The batch is valid but unreadable: it is skipped, for this reason.
    Skip(String),
}

impl From<Corrupt> for Unread {
    fn from(c: Corrupt) -> Self {
        Unread::Corrupt(c)
    }
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(x)
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn corrupt(base: i64, why: impl std::fmt::Display) -> Corrupt {
    Corrupt(format!("the batch at offset {base}: {why}"))
}

/// Reads the framing of the batch that `batch` holds exactly (`LOG_OVERHEAD + length` bytes).
fn framing(batch: &[u8]) -> Result<Framed, Corrupt> {
    let base = be_i64(batch, 0);
    if batch.len() < 17 {
        return Err(corrupt(base, "shorter than its header"));
    }
    let magic = batch[16] as i8;
    match magic {
        2 => header(batch).map(Framed::V2),
        // offset (8), size (4), CRC-32 (4) of the rest, from the magic on.
        0 | 1 => {
            let stored = be_i32(batch, 12) as u32;
            let actual = crc32fast::hash(&batch[16..]);
            if stored != actual {
                return Err(corrupt(
                    base,
                    format!("its CRC-32 is {actual:#010x}, it claims {stored:#010x}"),
                ));
            }
            Ok(Framed::Old {
                offset: base,
                magic,
            })
        }
        other => Err(corrupt(base, format!("message format v{other} is unknown"))),
    }
}

/// Reads the header of the magic v2 batch that `batch` holds exactly.
fn header(batch: &[u8]) -> Result<Header, Corrupt> {
    let base = be_i64(batch, 0);
    if batch.len() < BATCH_HEADER {
        return Err(corrupt(base, "shorter than its header"));
    }
    let attributes = be_i16(batch, 21);
    let last_offset = base
        .checked_add(i64::from(be_i32(batch, 23)))
        .filter(|&last| last >= base)
        .ok_or_else(|| corrupt(base, "its last offset delta is negative or overflows"))?;
    Ok(Header {
        base,
        last_offset,
        producer_id: be_i64(batch, 43),
        transactional: attributes & 0x10 != 0,
        control: attributes & 0x20 != 0,
        compression: attributes & 0x07,
    })
}

/// Decodes the record batches of a read_committed Fetch from offset `from`, batch by batch
/// (a truncated last batch is left for the next Fetch), as Kafka's consumer does: control
/// batches are skipped, and so are the batches of aborted transactions. `aborted` is the
/// answer's (producer id, first offset) list: a producer's transactional batches are aborted
/// from its first offset until that producer's ABORT marker. A batch whose records cannot be
/// read is passed and listed in [`Decoded::skipped`] (see the [module docs](self)).
pub(crate) fn decode_batches(
    raw: &Bytes,
    from: i64,
    aborted: &[(i64, i64)],
) -> Result<Decoded, Corrupt> {
    decode_batches_within(raw, from, aborted, MAX_DECOMPRESSED)
}

/// [`decode_batches`] with `limit` bytes of decompressed records per batch.
///
/// The parser trusts no length, count or offset in the bytes: every length is checked against
/// the bytes that remain before it is used, nothing is allocated from a count on the wire (a
/// batch's records are collected as they parse), offsets are added with overflow checks, and
/// a batch's CRC-32C is verified before any of its records is read or decompressed. Bad bytes
/// never panic.
pub(crate) fn decode_batches_within(
    raw: &Bytes,
    from: i64,
    aborted: &[(i64, i64)],
    limit: usize,
) -> Result<Decoded, Corrupt> {
    let mut pending: Vec<(i64, i64)> = aborted.iter().map(|&(pid, first)| (first, pid)).collect();
    pending.sort_unstable();
    let mut pending = pending.into_iter().peekable();
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut out = Decoded {
        records: Vec::new(),
        next: from,
        skipped: Vec::new(),
    };
    let mut pos = 0usize;
    while raw.len() - pos >= LOG_OVERHEAD {
        let head = &raw[pos..];
        let base = be_i64(head, 0);
        let length = usize::try_from(be_i32(head, 8))
            .map_err(|_| corrupt(base, "its length is negative"))?;
        let size = LOG_OVERHEAD + length;
        if head.len() < size {
            break;
        }
        let batch = raw.slice(pos..pos + size);
        pos += size;
        let h = match framing(&batch)? {
            Framed::V2(h) => h,
            Framed::Old { offset, magic } => {
                let after = offset
                    .checked_add(1)
                    .ok_or_else(|| corrupt(offset, "its offset is the largest offset"))?;
                out.next = out.next.max(after);
                if offset >= from {
                    out.skipped.push(Skipped {
                        base: offset,
                        last: offset,
                        reason: format!(
                            "message format v{magic} (before Kafka 0.11) is not read; only v2"
                        ),
                    });
                }
                continue;
            }
        };
        // `last_offset >= base`, and base + an i32 fits when it did not overflow: `+ 1` is
        // checked all the same.
        let after = h
            .last_offset
            .checked_add(1)
            .ok_or_else(|| corrupt(h.base, "its last offset is the largest offset"))?;
        out.next = out.next.max(after);
        if h.last_offset < from {
            continue;
        }
        let skip = |reason: String| Skipped {
            base: h.base,
            last: h.last_offset,
            reason,
        };
        if h.producer_id >= 0 {
            while let Some(&(first, pid)) = pending.peek() {
                if first > h.last_offset {
                    break;
                }
                aborting.insert(pid);
                pending.next();
            }
            if h.control {
                match is_abort_marker(&batch, h, limit) {
                    Ok(true) => {
                        aborting.remove(&h.producer_id);
                    }
                    Ok(false) => {}
                    Err(Unread::Corrupt(c)) => return Err(c),
                    // A transaction in the aborted list ends with an ABORT marker: the next
                    // control batch of a producer that is aborting is that marker.
                    Err(Unread::Skip(why)) => {
                        aborting.remove(&h.producer_id);
                        out.skipped.push(skip(format!("a control batch: {why}")));
                    }
                }
                continue;
            }
            if h.transactional && aborting.contains(&h.producer_id) {
                continue;
            }
        }
        if h.control {
            continue;
        }
        match records_within(&batch, limit) {
            Ok(records) => {
                for r in records {
                    if r.offset >= from {
                        out.records.push(Record {
                            offset: r.offset,
                            key: r.key.map(|k| k.to_vec()).unwrap_or_default(),
                            value: r.value.map(|v| v.to_vec()),
                        });
                    }
                }
            }
            Err(Unread::Corrupt(c)) => return Err(c),
            Err(Unread::Skip(why)) => out.skipped.push(skip(why)),
        }
    }
    Ok(out)
}

/// Whether a control batch holds an ABORT marker (its first record's key is version i16 and
/// type i16: 0 abort, 1 commit).
fn is_abort_marker(batch: &Bytes, _h: Header, limit: usize) -> Result<bool, Unread> {
    let records = records_within(batch, limit)?;
    Ok(records
        .first()
        .and_then(|r| r.key.as_ref())
        .is_some_and(|k| k.len() >= 4 && be_i16(k, 0) >= 0 && be_i16(k, 2) == 0))
}

/// The records of one magic v2 batch (`batch` holds exactly the batch), after its CRC is
/// checked: decompressed first when the batch is compressed.
fn records_within(batch: &Bytes, limit: usize) -> Result<Vec<RawRecord>, Unread> {
    let h = header(batch)?;
    let stored = be_i32(batch, 17) as u32;
    let actual = crc32c::crc32c(&batch[CRC_FROM..]);
    if stored != actual {
        return Err(corrupt(
            h.base,
            format!("its CRC-32C is {actual:#010x}, it claims {stored:#010x}"),
        )
        .into());
    }
    let count = be_i32(batch, 57);
    let count = u32::try_from(count)
        .map_err(|_| Unread::Skip(format!("its record count {count} is negative")))?;
    let body = if h.compression == 0 {
        batch.slice(BATCH_HEADER..)
    } else {
        let plain =
            codec::decompress(h.compression, &batch[BATCH_HEADER..], limit).map_err(|f| {
                Unread::Skip(format!(
                    "{} batch (codec {}): {f}",
                    codec::name(h.compression),
                    h.compression
                ))
            })?;
        Bytes::from(plain)
    };
    let mut r = Cursor {
        bytes: &body,
        at: 0,
    };
    // Collected as they parse: a count on the wire sizes nothing.
    let mut out = Vec::new();
    for _ in 0..count {
        out.push(r.record(h.base).map_err(Unread::Skip)?);
    }
    if r.at != body.len() {
        return Err(Unread::Skip(format!(
            "{} bytes follow its {count} records",
            body.len() - r.at
        )));
    }
    Ok(out)
}

/// A cursor over a batch's records (decompressed, if they were compressed).
struct Cursor<'a> {
    bytes: &'a Bytes,
    at: usize,
}

/// Why a batch's records are malformed (the batch is named where it is skipped).
fn bad(why: impl std::fmt::Display) -> String {
    why.to_string()
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| bad("a record ends early"))?;
        self.at += 1;
        Ok(b)
    }

    /// A zigzag varint of at most ten bytes.
    fn varlong(&mut self) -> Result<i64, String> {
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.byte()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(bad("a varint runs past ten bytes"))
    }

    /// A zigzag varint that must fit an `i32`, as Kafka's records require.
    fn varint(&mut self) -> Result<i32, String> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| bad(format!("varint {v} does not fit 32 bits")))
    }

    /// `len` bytes (`-1`: none).
    fn bytes_of(&mut self, len: i32, what: &str) -> Result<Option<Bytes>, String> {
        if len == -1 {
            return Ok(None);
        }
        let n = usize::try_from(len)
            .ok()
            .filter(|&n| n <= self.left())
            .ok_or_else(|| {
                bad(format!(
                    "a {what} of {len} bytes where {} remain",
                    self.left()
                ))
            })?;
        let s = self.bytes.slice(self.at..self.at + n);
        self.at += n;
        Ok(Some(s))
    }

    fn record(&mut self, base: i64) -> Result<RawRecord, String> {
        let length = self.varint()?;
        let start = self.at;
        let length = usize::try_from(length)
            .ok()
            .filter(|&n| n <= self.left())
            .ok_or_else(|| {
                bad(format!(
                    "a record of {length} bytes where {} remain",
                    self.left()
                ))
            })?;
        let _attributes = self.byte()?;
        let _timestamp_delta = self.varlong()?;
        let delta = self.varint()?;
        let offset = base
            .checked_add(i64::from(delta))
            .filter(|_| delta >= 0)
            .ok_or_else(|| bad(format!("a record's offset delta {delta}")))?;
        let key_len = self.varint()?;
        let key = self.bytes_of(key_len, "key")?;
        let value_len = self.varint()?;
        let value = self.bytes_of(value_len, "value")?;
        let headers = self.varint()?;
        if headers < 0 {
            return Err(bad(format!("{headers} record headers")));
        }
        for _ in 0..headers {
            let len = self.varint()?;
            if len < 0 {
                return Err(bad("a header key of negative length"));
            }
            self.bytes_of(len, "header key")?;
            let len = self.varint()?;
            self.bytes_of(len, "header value")?;
        }
        if self.at - start != length {
            return Err(bad(format!(
                "a record claims {length} bytes but holds {}",
                self.at - start
            )));
        }
        Ok(RawRecord { offset, key, value })
    }
}

#[cfg(test)]
mod tests;
