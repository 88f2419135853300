//! The record batches of a read_committed Fetch answer: parsed by hand (magic v2, no
//! compression) and filtered as Kafka's consumer filters them.
//!
//! The parser trusts no length, count or offset in the bytes: every length is checked against
//! the bytes that remain before it is used, nothing is allocated from a count on the wire (a
//! batch's records are collected as they parse), offsets are added with overflow checks, and
//! a batch's CRC-32C is verified before any of its records is read. Bytes that are no valid
//! batch give a [`DecodeError`], never a panic.

use std::collections::HashSet;

use bytes::Bytes;

use crate::transport::Record;

/// The size of a record batch's header (magic v2), from its base offset to its record count.
const BATCH_HEADER: usize = 61;
/// The bytes before a batch's length field counts from: base offset (8) and length (4).
const LOG_OVERHEAD: usize = 12;
/// Where the CRC-covered part of a batch starts (its attributes).
const CRC_FROM: usize = 21;

/// The records of one partition's fetched bytes that a read_committed consumer returns.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// Records at offsets `>= from`, in offset order.
    pub(crate) records: Vec<Record>,
    /// The offset after the last complete batch (at least `from`): where the next Fetch starts.
    pub(crate) next: i64,
}

/// Why fetched bytes could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// A batch this reader cannot read (an old message format, compression).
    Unsupported(String),
    /// Bytes that are no record batch.
    Corrupt(String),
}

/// One record of a batch: its offset, key and value (slices of the fetched bytes).
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

fn corrupt(base: i64, why: impl std::fmt::Display) -> DecodeError {
    DecodeError::Corrupt(format!("the batch at offset {base}: {why}"))
}

/// Reads the header of the batch that `batch` holds exactly (`LOG_OVERHEAD + length` bytes).
fn header(batch: &[u8]) -> Result<Header, DecodeError> {
    let base = be_i64(batch, 0);
    if batch.len() < 17 {
        return Err(corrupt(base, "shorter than its header"));
    }
    let magic = batch[16] as i8;
    if magic != 2 {
        return Err(DecodeError::Unsupported(format!(
            "a record batch at offset {base} has message format v{magic}; only v2 (Kafka 0.11 \
             and later) is read"
        )));
    }
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
/// from its first offset until that producer's ABORT marker.
pub(crate) fn decode_batches(
    raw: &Bytes,
    from: i64,
    aborted: &[(i64, i64)],
) -> Result<Decoded, DecodeError> {
    let mut pending: Vec<(i64, i64)> = aborted.iter().map(|&(pid, first)| (first, pid)).collect();
    pending.sort_unstable();
    let mut pending = pending.into_iter().peekable();
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut out = Decoded {
        records: Vec::new(),
        next: from,
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
        let h = header(&batch)?;
        pos += size;
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
        if h.producer_id >= 0 {
            while let Some(&(first, pid)) = pending.peek() {
                if first > h.last_offset {
                    break;
                }
                aborting.insert(pid);
                pending.next();
            }
            if h.control {
                if is_abort_marker(&batch, h)? {
                    aborting.remove(&h.producer_id);
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
        if h.compression != 0 {
            return Err(DecodeError::Unsupported(format!(
                "the record batch at offset {} is compressed (codec {}); this reader reads \
                 uncompressed batches only: write the state topic without compression \
                 (compression.type=none or producer, and no compression.codec on the clients)",
                h.base, h.compression
            )));
        }
        for r in records(&batch)? {
            if r.offset >= from {
                out.records.push(Record {
                    offset: r.offset,
                    key: r.key.map(|k| k.to_vec()).unwrap_or_default(),
                    value: r.value.map(|v| v.to_vec()),
                });
            }
        }
    }
    Ok(out)
}

/// Whether a control batch holds an ABORT marker (its first record's key is version i16 and
/// type i16: 0 abort, 1 commit).
fn is_abort_marker(batch: &Bytes, h: Header) -> Result<bool, DecodeError> {
    if h.compression != 0 {
        return Err(corrupt(h.base, "a compressed control batch"));
    }
    let records = records(batch)?;
    Ok(records
        .first()
        .and_then(|r| r.key.as_ref())
        .is_some_and(|k| k.len() >= 4 && be_i16(k, 0) >= 0 && be_i16(k, 2) == 0))
}

/// The records of one uncompressed batch (`batch` holds exactly the batch), after its CRC is
/// checked.
pub(crate) fn records(batch: &Bytes) -> Result<Vec<RawRecord>, DecodeError> {
    let h = header(batch)?;
    let stored = be_i32(batch, 17) as u32;
    let actual = crc32c::crc32c(&batch[CRC_FROM..]);
    if stored != actual {
        return Err(corrupt(
            h.base,
            format!("its CRC-32C is {actual:#010x}, it claims {stored:#010x}"),
        ));
    }
    let count = be_i32(batch, 57);
    let count =
        u32::try_from(count).map_err(|_| corrupt(h.base, "its record count is negative"))?;
    let mut r = Cursor {
        bytes: batch,
        at: BATCH_HEADER,
        base: h.base,
    };
    // Collected as they parse: a count on the wire sizes nothing.
    let mut out = Vec::new();
    for _ in 0..count {
        out.push(r.record()?);
    }
    if r.at != batch.len() {
        return Err(corrupt(
            h.base,
            format!("{} bytes follow its {count} records", batch.len() - r.at),
        ));
    }
    Ok(out)
}

/// A cursor over a batch's records.
struct Cursor<'a> {
    bytes: &'a Bytes,
    at: usize,
    base: i64,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| corrupt(self.base, "a record ends early"))?;
        self.at += 1;
        Ok(b)
    }

    /// A zigzag varint of at most ten bytes.
    fn varlong(&mut self) -> Result<i64, DecodeError> {
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.byte()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(corrupt(self.base, "a varint runs past ten bytes"))
    }

    /// A zigzag varint that must fit an `i32`, as Kafka's records require.
    fn varint(&mut self) -> Result<i32, DecodeError> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| corrupt(self.base, format!("varint {v} does not fit 32 bits")))
    }

    /// `len` bytes (`-1`: none).
    fn bytes_of(&mut self, len: i32, what: &str) -> Result<Option<Bytes>, DecodeError> {
        if len == -1 {
            return Ok(None);
        }
        let n = usize::try_from(len)
            .ok()
            .filter(|&n| n <= self.left())
            .ok_or_else(|| {
                corrupt(
                    self.base,
                    format!("a {what} of {len} bytes where {} remain", self.left()),
                )
            })?;
        let s = self.bytes.slice(self.at..self.at + n);
        self.at += n;
        Ok(Some(s))
    }

    fn record(&mut self) -> Result<RawRecord, DecodeError> {
        let length = self.varint()?;
        let start = self.at;
        let length = usize::try_from(length)
            .ok()
            .filter(|&n| n <= self.left())
            .ok_or_else(|| {
                corrupt(
                    self.base,
                    format!("a record of {length} bytes where {} remain", self.left()),
                )
            })?;
        let _attributes = self.byte()?;
        let _timestamp_delta = self.varlong()?;
        let delta = self.varint()?;
        let offset = self
            .base
            .checked_add(i64::from(delta))
            .filter(|_| delta >= 0)
            .ok_or_else(|| corrupt(self.base, format!("a record's offset delta {delta}")))?;
        let key_len = self.varint()?;
        let key = self.bytes_of(key_len, "key")?;
        let value_len = self.varint()?;
        let value = self.bytes_of(value_len, "value")?;
        let headers = self.varint()?;
        if headers < 0 {
            return Err(corrupt(self.base, format!("{headers} record headers")));
        }
        for _ in 0..headers {
            let len = self.varint()?;
            if len < 0 {
                return Err(corrupt(self.base, "a header key of negative length"));
            }
            self.bytes_of(len, "header key")?;
            let len = self.varint()?;
            self.bytes_of(len, "header value")?;
        }
        if self.at - start != length {
            return Err(corrupt(
                self.base,
                format!(
                    "a record claims {length} bytes but holds {}",
                    self.at - start
                ),
            ));
        }
        Ok(RawRecord { offset, key, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// A record to encode: offset, key, value.
    type Rec<'a> = (i64, &'a [u8], Option<&'a [u8]>);

    /// One batch of `records` (the offsets as given: gaps are a compacted batch).
    fn batch(
        buf: &mut BytesMut,
        producer_id: i64,
        transactional: bool,
        control: bool,
        records: &[Rec<'_>],
    ) {
        let first = records.first().map_or(0, |r| r.0);
        let records: Vec<kafka_protocol::records::Record> = records
            .iter()
            .map(|(offset, key, value)| kafka_protocol::records::Record {
                transactional,
                control,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id,
                producer_epoch: if producer_id >= 0 { 0 } else { -1 },
                timestamp_type: TimestampType::Creation,
                offset: *offset,
                // One batch: the encoder splits where offset - sequence changes.
                sequence: i32::try_from(offset - first).expect("small"),
                timestamp: 1_000,
                key: Some(Bytes::copy_from_slice(key)),
                value: value.map(Bytes::copy_from_slice),
                headers: Default::default(),
            })
            .collect();
        RecordBatchEncoder::encode(
            buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .expect("encode");
    }

    /// A transaction marker of `producer_id` at `offset`: key version 0, type 0 (abort) or 1.
    fn marker(buf: &mut BytesMut, producer_id: i64, offset: i64, commit: bool) {
        let key: [u8; 4] = [0, 0, 0, u8::from(commit)];
        // The value (version, coordinator epoch) is not read.
        let value = [0u8, 0, 0, 0, 0, 5];
        batch(
            buf,
            producer_id,
            true,
            true,
            &[(offset, &key, Some(&value))],
        );
    }

    fn offsets_and_values(d: &Decoded) -> Vec<(i64, Option<Vec<u8>>)> {
        d.records
            .iter()
            .map(|r| (r.offset, r.value.clone()))
            .collect()
    }

    /// Two producers interleaved: 7 commits (offsets 0, 2 and its marker 5), 9 aborts (1, 3
    /// and its marker 4); a plain record at 6.
    fn interleaved() -> Bytes {
        let mut b = BytesMut::new();
        batch(&mut b, 7, true, false, &[(0, b"k", Some(b"c0"))]);
        batch(&mut b, 9, true, false, &[(1, b"k", Some(b"a1"))]);
        batch(&mut b, 7, true, false, &[(2, b"k", Some(b"c2"))]);
        batch(&mut b, 9, true, false, &[(3, b"j", None)]);
        marker(&mut b, 9, 4, false);
        marker(&mut b, 7, 5, true);
        batch(&mut b, -1, false, false, &[(6, b"p", Some(b"plain"))]);
        b.freeze()
    }

    #[test]
    fn aborted_transactions_and_markers_are_removed() {
        let d = decode_batches(&interleaved(), 0, &[(9, 1)]).expect("decode");
        assert_eq!(
            offsets_and_values(&d),
            vec![
                (0, Some(b"c0".to_vec())),
                (2, Some(b"c2".to_vec())),
                (6, Some(b"plain".to_vec()))
            ]
        );
        assert_eq!(d.next, 7);
        assert_eq!(d.records[2].key, b"p");
    }

    #[test]
    fn without_the_aborted_list_every_data_record_is_read() {
        // The list is what says a transaction aborted; markers alone do not.
        let d = decode_batches(&interleaved(), 0, &[]).expect("decode");
        assert_eq!(
            d.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 6]
        );
        assert_eq!(d.records[3].value, None, "a tombstone stays a tombstone");
    }

    #[test]
    fn an_aborted_producer_reads_again_after_its_abort_marker() {
        let mut b = BytesMut::new();
        batch(
            &mut b,
            9,
            true,
            false,
            &[(10, b"k", Some(b"a10")), (11, b"k", Some(b"a11"))],
        );
        marker(&mut b, 9, 12, false);
        // The same producer's next transaction commits.
        batch(&mut b, 9, true, false, &[(13, b"k", Some(b"c13"))]);
        marker(&mut b, 9, 14, true);
        // And the one after aborts again: a second entry in the list.
        batch(&mut b, 9, true, false, &[(15, b"k", Some(b"a15"))]);
        marker(&mut b, 9, 16, false);
        let d = decode_batches(&b.freeze(), 10, &[(9, 15), (9, 10)]).expect("decode");
        assert_eq!(offsets_and_values(&d), vec![(13, Some(b"c13".to_vec()))]);
        assert_eq!(d.next, 17);
    }

    #[test]
    fn a_transaction_begun_before_the_fetch_offset_is_still_aborted() {
        let mut b = BytesMut::new();
        // The fetch starts at 21, inside a batch of an aborted transaction that began at 20.
        batch(
            &mut b,
            4,
            true,
            false,
            &[(20, b"k", Some(b"a20")), (21, b"k", Some(b"a21"))],
        );
        batch(&mut b, 5, true, false, &[(22, b"k", Some(b"c22"))]);
        marker(&mut b, 4, 23, false);
        marker(&mut b, 5, 24, true);
        let d = decode_batches(&b.freeze(), 21, &[(4, 20)]).expect("decode");
        assert_eq!(offsets_and_values(&d), vec![(22, Some(b"c22".to_vec()))]);
        assert_eq!(d.next, 25);
    }

    #[test]
    fn offsets_are_exact_and_records_before_the_fetch_offset_are_skipped() {
        let mut b = BytesMut::new();
        // A compacted batch: offsets 100, 103, 104 remain of 100..=104.
        batch(
            &mut b,
            -1,
            false,
            false,
            &[
                (100, b"a", Some(b"1")),
                (103, b"b", Some(b"2")),
                (104, b"c", Some(b"3")),
            ],
        );
        let d = decode_batches(&b.freeze(), 101, &[]).expect("decode");
        assert_eq!(
            d.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![103, 104]
        );
        assert_eq!(d.next, 105);
    }

    #[test]
    fn a_truncated_last_batch_is_left_for_the_next_fetch() {
        let mut b = BytesMut::new();
        batch(&mut b, -1, false, false, &[(0, b"a", Some(b"1"))]);
        let whole = b.len();
        batch(
            &mut b,
            -1,
            false,
            false,
            &[(1, b"b", Some(b"2")), (2, b"c", Some(b"3"))],
        );
        let raw = b.freeze();
        for cut in [whole + 5, whole + 20, raw.len() - 1] {
            let d = decode_batches(&raw.slice(..cut), 0, &[]).expect("decode");
            assert_eq!(d.records.len(), 1, "cut at {cut}");
            assert_eq!(d.next, 1);
        }
        let d = decode_batches(&raw, 0, &[]).expect("decode");
        assert_eq!(d.records.len(), 3);
        assert_eq!(d.next, 3);
        let empty = decode_batches(&Bytes::new(), 42, &[]).expect("decode");
        assert_eq!(
            empty,
            Decoded {
                records: vec![],
                next: 42
            }
        );
    }

    #[test]
    fn a_corrupt_batch_is_an_error() {
        let mut b = BytesMut::new();
        batch(&mut b, -1, false, false, &[(0, b"a", Some(b"1"))]);
        let mut bad = b.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let err = decode_batches(&Bytes::from(bad), 0, &[]).expect_err("crc");
        assert!(
            matches!(&err, DecodeError::Corrupt(m) if m.contains("CRC")),
            "{err:?}"
        );
        let mut old = b.to_vec();
        old[16] = 1;
        let err = decode_batches(&Bytes::from(old), 0, &[]).expect_err("magic");
        assert!(matches!(err, DecodeError::Unsupported(_)), "{err:?}");
    }

    /// A batch whose header and records are set byte by byte, with a correct CRC: what a
    /// hostile or broken broker could send.
    fn forged(base: i64, last_delta: i32, count: i32, records: &[u8]) -> Bytes {
        let mut b = Vec::new();
        b.extend(base.to_be_bytes());
        b.extend(((BATCH_HEADER - LOG_OVERHEAD + records.len()) as i32).to_be_bytes());
        b.extend(0i32.to_be_bytes()); // partition leader epoch
        b.push(2); // magic
        b.extend(0u32.to_be_bytes()); // CRC, set below
        b.extend(0i16.to_be_bytes()); // attributes
        b.extend(last_delta.to_be_bytes());
        b.extend(0i64.to_be_bytes()); // base timestamp
        b.extend(0i64.to_be_bytes()); // max timestamp
        b.extend((-1i64).to_be_bytes()); // producer id
        b.extend((-1i16).to_be_bytes()); // producer epoch
        b.extend((-1i32).to_be_bytes()); // base sequence
        b.extend(count.to_be_bytes());
        b.extend(records);
        let crc = crc32c::crc32c(&b[CRC_FROM..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        Bytes::from(b)
    }

    /// Bounds that kafka-protocol's record decoder did not check, each a panic (overflow) or
    /// an allocation sized by the wire (2^31 records, 2^31 headers): each is now a
    /// `Corrupt` error, with nothing allocated from the count.
    #[test]
    fn counts_lengths_and_offsets_from_the_wire_are_checked() {
        let corrupt = |raw: Bytes, from: i64| match decode_batches(&raw, from, &[]) {
            Err(DecodeError::Corrupt(why)) => why,
            other => panic!("expected Corrupt, got {other:?}"),
        };
        // i32::MAX records in an empty batch.
        let why = corrupt(forged(0, 0, i32::MAX, &[]), 0);
        assert!(why.contains("ends early"), "{why}");
        // A record (length 6: attributes, timestamp 0, offset delta 0, key -1, value -1)
        // followed by i32::MAX headers (zigzag 0xfffffffe).
        let record = [12, 0, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0];
        let why = corrupt(forged(0, 0, 1, &record), 0);
        assert!(
            why.contains("ends early") || why.contains("header"),
            "{why}"
        );
        // A base offset at i64::MAX with a last offset delta that overflows.
        let why = corrupt(forged(i64::MAX, 5, 0, &[]), 0);
        assert!(why.contains("overflows"), "{why}");
        // A record whose offset delta takes the offset past i64::MAX: zigzag of 2 is 4.
        let record = [12, 0, 0, 4, 1, 1, 0];
        let why = corrupt(forged(i64::MAX - 1, 0, 1, &record), 0);
        assert!(why.contains("offset delta"), "{why}");
        // A last offset at i64::MAX leaves no next offset.
        let why = corrupt(forged(i64::MAX, 0, 0, &[]), 0);
        assert!(why.contains("largest offset"), "{why}");
        // A varint longer than ten bytes.
        let why = corrupt(forged(0, 0, 1, &[0xff; 11]), 0);
        assert!(why.contains("ten bytes"), "{why}");
        // A record that claims more bytes than it holds.
        let record = [14, 0, 0, 0, 1, 1, 0];
        let why = corrupt(forged(0, 0, 1, &record), 0);
        assert!(
            why.contains("record of 7 bytes") || why.contains("claims"),
            "{why}"
        );
        // A well-formed forged batch reads.
        let record = [14, 0, 0, 0, 2, b'k', 1, 0];
        let d = decode_batches(&forged(5, 0, 1, &record), 0, &[]).expect("valid");
        assert_eq!(d.records.len(), 1);
        assert_eq!(
            (d.records[0].offset, d.records[0].key.as_slice()),
            (5, &b"k"[..])
        );
        assert_eq!(d.records[0].value, None);
        assert_eq!(d.next, 6);
    }
}
