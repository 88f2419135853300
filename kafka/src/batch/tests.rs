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
            next: 42,
            skipped: vec![],
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
    assert!(err.0.contains("CRC"), "{err:?}");
    let mut unknown = b.to_vec();
    unknown[16] = 3;
    let err = decode_batches(&Bytes::from(unknown), 0, &[]).expect_err("magic");
    assert!(err.0.contains("v3"), "{err:?}");
}

/// An old-format (v1) entry: offset, size, CRC-32, magic 1, attributes, timestamp, key,
/// value.
fn old_entry(offset: i64, value: &[u8]) -> Vec<u8> {
    let mut body = vec![1u8, 0];
    body.extend(0i64.to_be_bytes());
    body.extend((-1i32).to_be_bytes());
    body.extend((value.len() as i32).to_be_bytes());
    body.extend(value);
    let mut e = offset.to_be_bytes().to_vec();
    e.extend(((body.len() + 4) as i32).to_be_bytes());
    e.extend(crc32fast::hash(&body).to_be_bytes());
    e.extend(body);
    e
}

#[test]
fn an_old_format_entry_is_skipped_and_a_damaged_one_is_corrupt() {
    let mut raw = old_entry(3, b"old");
    let mut b = BytesMut::new();
    batch(&mut b, -1, false, false, &[(4, b"k", Some(b"new"))]);
    raw.extend_from_slice(&b);
    let d = decode_batches(&Bytes::from(raw.clone()), 0, &[]).expect("decode");
    assert_eq!(offsets_and_values(&d), vec![(4, Some(b"new".to_vec()))]);
    assert_eq!(d.skipped.len(), 1);
    assert_eq!((d.skipped[0].base, d.skipped[0].last), (3, 3));
    assert!(d.skipped[0].reason.contains("v1"), "{:?}", d.skipped);
    assert_eq!(d.next, 5);
    raw[30] ^= 1;
    let err = decode_batches(&Bytes::from(raw), 0, &[]).expect_err("crc");
    assert!(err.0.contains("CRC-32"), "{err:?}");
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
/// an allocation sized by the wire (2^31 records, 2^31 headers): a header that is no
/// batch is a `Corrupt` error; malformed records in a batch whose CRC holds skip it. Nothing
/// is allocated from the count.
#[test]
fn counts_lengths_and_offsets_from_the_wire_are_checked() {
    let corrupt = |raw: Bytes, from: i64| match decode_batches(&raw, from, &[]) {
        Err(Corrupt(why)) => why,
        Ok(d) if d.records.is_empty() && d.skipped.len() == 1 => d.skipped[0].reason.clone(),
        other => panic!("expected a refusal, got {other:?}"),
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

// ---- compressed batches ----------------------------------------------------------------

/// `plain` (one uncompressed batch, exactly) with its records section replaced by
/// `compress(records)`, codec `codec` in its attributes, and its length and CRC fixed.
fn compressed(plain: &[u8], codec: i16, compress: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut b = plain[..BATCH_HEADER].to_vec();
    b.extend(compress(&plain[BATCH_HEADER..]));
    let length = i32::try_from(b.len() - LOG_OVERHEAD).expect("small");
    b[8..12].copy_from_slice(&length.to_be_bytes());
    let attributes = (be_i16(&b, 21) & !0x07) | codec;
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&b[CRC_FROM..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

fn snappy_raw(data: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(data)
        .expect("snappy")
}

/// snappy-java's framing, in blocks of at most `chunk` bytes of input.
fn snappy_xerial(data: &[u8], chunk: usize) -> Vec<u8> {
    let mut out = XERIAL_TEST_MAGIC.to_vec();
    out.extend(1i32.to_be_bytes());
    out.extend(1i32.to_be_bytes());
    for part in data.chunks(chunk) {
        let block = snappy_raw(part);
        out.extend(i32::try_from(block.len()).expect("small").to_be_bytes());
        out.extend(block);
    }
    out
}

const XERIAL_TEST_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

fn lz4_with(info: lz4_flex::frame::FrameInfo) -> impl Fn(&[u8]) -> Vec<u8> {
    move |data| {
        use std::io::Write;
        let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info.clone(), Vec::new());
        e.write_all(data).expect("lz4");
        e.finish().expect("lz4")
    }
}

fn lz4(data: &[u8]) -> Vec<u8> {
    lz4_with(lz4_flex::frame::FrameInfo::new())(data)
}

fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

/// Several registration-like records at offsets `first..first + 5`.
fn plain_batch(first: i64, producer_id: i64, transactional: bool) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..5)
        .map(|i| format!("{{\"member\":\"node-{i}\",\"registered_at\":17000000{i}}}").into_bytes())
        .collect();
    let keys: Vec<Vec<u8>> = (0..5)
        .map(|i| format!("reg/role-a/node-{i}").into_bytes())
        .collect();
    let recs: Vec<Rec<'_>> = (0..5)
        .map(|i| {
            (
                first + i as i64,
                keys[i].as_slice(),
                Some(values[i].as_slice()),
            )
        })
        .collect();
    let mut b = BytesMut::new();
    batch(&mut b, producer_id, transactional, false, &recs);
    b.to_vec()
}

/// A compressor of a batch's records section.
type Compress = Box<dyn Fn(&[u8]) -> Vec<u8>>;

/// Each way a member may compress a batch: a name, the codec number, the compressor.
fn codecs() -> Vec<(&'static str, i16, Compress)> {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameInfo};
    vec![
        ("gzip", 1, Box::new(gzip)),
        ("snappy raw", 2, Box::new(snappy_raw)),
        (
            "snappy xerial",
            2,
            Box::new(|d: &[u8]| snappy_xerial(d, 32 * 1024)),
        ),
        (
            "snappy xerial, small blocks",
            2,
            Box::new(|d: &[u8]| snappy_xerial(d, 40)),
        ),
        ("lz4", 3, Box::new(lz4)),
        (
            "lz4 linked, checksummed",
            3,
            Box::new(lz4_with(
                FrameInfo::new()
                    .block_mode(BlockMode::Linked)
                    .block_size(BlockSize::Max64KB)
                    .block_checksums(true)
                    .content_checksum(true),
            )),
        ),
        ("zstd", 4, Box::new(zstd)),
    ]
}

#[test]
fn every_codec_reads_the_same_records_as_the_uncompressed_batch() {
    let plain = plain_batch(10, -1, false);
    let want = decode_batches(&Bytes::from(plain.clone()), 0, &[]).expect("plain");
    assert_eq!(want.records.len(), 5);
    for (name, codec, compress) in codecs() {
        let b = compressed(&plain, codec, compress.as_ref());
        assert_ne!(b, plain, "{name}");
        let d = decode_batches(&Bytes::from(b), 0, &[]).expect(name);
        assert_eq!(d, want, "{name}");
        assert!(d.skipped.is_empty(), "{name}");
    }
}

#[test]
fn linked_lz4_blocks_refer_back_across_block_boundaries() {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameInfo};
    // Over 64 KiB of repeated text: later blocks refer into earlier ones.
    let value = b"the same registration of a member, again and again; ".repeat(3000);
    let mut b = BytesMut::new();
    batch(
        &mut b,
        -1,
        false,
        false,
        &[(0, b"k", Some(&value)), (1, b"j", Some(&value))],
    );
    let linked = lz4_with(
        FrameInfo::new()
            .block_mode(BlockMode::Linked)
            .block_size(BlockSize::Max64KB),
    );
    let raw = compressed(&b, 3, linked);
    assert!(raw.len() < value.len() / 4, "compressed: {}", raw.len());
    let d = decode_batches(&Bytes::from(raw), 0, &[]).expect("decode");
    assert!(d.skipped.is_empty(), "{:?}", d.skipped);
    assert_eq!(d.records.len(), 2);
    assert!(d
        .records
        .iter()
        .all(|r| r.value.as_deref() == Some(&value[..])));
}

#[test]
fn a_compressed_batch_of_an_aborted_transaction_is_still_removed() {
    for (name, codec, compress) in codecs() {
        let mut raw = compressed(&plain_batch(0, 9, true), codec, compress.as_ref());
        raw.extend(compressed(
            &plain_batch(5, 7, true),
            codec,
            compress.as_ref(),
        ));
        let mut m = BytesMut::new();
        marker(&mut m, 9, 10, false);
        marker(&mut m, 7, 11, true);
        raw.extend_from_slice(&m);
        let d = decode_batches(&Bytes::from(raw), 0, &[(9, 0)]).expect(name);
        assert_eq!(
            d.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![5, 6, 7, 8, 9],
            "{name}"
        );
        assert!(d.skipped.is_empty(), "{name}");
        assert_eq!(d.next, 12, "{name}");
    }
}

#[test]
fn a_batch_that_inflates_past_the_bound_is_skipped_and_the_next_one_read() {
    // 1 MiB of one byte as a value: a few KiB compressed, 1 MiB + a little decompressed.
    let value = vec![b'a'; 1 << 20];
    let mut b = BytesMut::new();
    batch(&mut b, -1, false, false, &[(0, b"k", Some(&value))]);
    let limit = 256 * 1024;
    for (name, codec, compress) in codecs().into_iter().filter(|c| !c.0.contains("small")) {
        let mut raw = compressed(&b, codec, compress.as_ref());
        assert!(raw.len() < 64 * 1024, "{name}: {}", raw.len());
        raw.extend(compressed(
            &plain_batch(1, -1, false),
            codec,
            compress.as_ref(),
        ));
        let d = decode_batches_within(&Bytes::from(raw.clone()), 0, &[], limit).expect(name);
        assert_eq!(d.skipped.len(), 1, "{name}: {:?}", d.skipped);
        let s = &d.skipped[0];
        assert_eq!((s.base, s.last), (0, 0), "{name}");
        assert!(
            s.reason.contains(&limit.to_string()),
            "{name}: {}",
            s.reason
        );
        assert_eq!(
            d.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5],
            "{name}"
        );
        assert_eq!(d.next, 6, "{name}");
        // Within the transport's own bound it reads.
        let d = decode_batches(&Bytes::from(raw), 0, &[]).expect(name);
        assert!(d.skipped.is_empty(), "{name}: {:?}", d.skipped);
        assert_eq!(d.records[0].value.as_deref(), Some(&value[..]), "{name}");
    }
}

#[test]
fn an_unknown_codec_or_bad_compressed_data_skips_only_that_batch() {
    let plain = plain_batch(0, -1, false);
    let next = plain_batch(5, -1, false);
    let cases: Vec<(i16, Vec<u8>, &str)> = vec![
        (5, plain.clone(), "codec 5 is unknown"),
        (7, plain.clone(), "codec 7 is unknown"),
        (1, gzip(b"short").into_iter().take(12).collect(), "gzip"),
        (2, vec![0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2], "snappy"),
        (3, b"not an lz4 frame".to_vec(), "lz4"),
        (4, b"not a zstd frame".to_vec(), "zstd"),
        // A valid frame whose records are malformed: 5 records claimed, 1 byte given.
        (4, zstd(&[0x80]), "ends early"),
    ];
    for (codec, payload, why) in cases {
        let b = compressed(&plain, codec, |_| payload.clone());
        let mut raw = b.clone();
        raw.extend_from_slice(&next);
        let d = decode_batches(&Bytes::from(raw), 0, &[]).expect(why);
        assert_eq!(d.skipped.len(), 1, "{why}");
        assert_eq!((d.skipped[0].base, d.skipped[0].last), (0, 4), "{why}");
        assert!(
            d.skipped[0].reason.contains(why),
            "{why}: {}",
            d.skipped[0].reason
        );
        assert_eq!(
            d.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![5, 6, 7, 8, 9],
            "{why}"
        );
        assert_eq!(d.next, 10);
        // Its CRC damaged, the same batch is corrupt: the Fetch is tried again.
        let mut damaged = b.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 0x55;
        assert!(
            decode_batches(&Bytes::from(damaged), 0, &[]).is_err(),
            "{why}"
        );
    }
}

#[test]
fn a_skipped_batch_before_the_fetch_offset_is_not_reported() {
    let b = compressed(&plain_batch(0, -1, false), 6, |d| d.to_vec());
    let d = decode_batches(&Bytes::from(b), 5, &[]).expect("decode");
    assert!(d.skipped.is_empty());
    assert_eq!(d.next, 5);
}
