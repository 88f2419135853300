//! Every place the Kafka transport parses broker bytes, for the fuzz harness in `fuzz/`
//! (feature `fuzzing`). Not a public API: it may change in any release.
//!
//! Each function runs the same code the transport runs on the same bytes and reports the
//! outcome as `Ok` or an `Err` with the transport's message; bad input must give an `Err`,
//! never a panic, and must not allocate more than a small multiple of its size.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, CreateTopicsRequest, DescribeConfigsRequest,
    DescribeProducersRequest, DescribeTransactionsRequest, EndTxnRequest, FetchRequest,
    FindCoordinatorRequest, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
    OffsetFetchRequest, ProduceRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{HeaderVersion, Request};

use super::batch;
use super::fetch::View;
use super::net::{Conn, NetError, Replay};
use super::response_shapes;
use super::security::{Mechanism, Scram};

/// The bound of [`fetched`] on the decompressed records of one batch.
pub const DECOMPRESSED_LIMIT: usize = 128 * 1024;

/// The nonce [`scram`]'s client sends; a server-first message must extend it.
pub const SCRAM_NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";

/// Every response the client reads: API key, request name, first and last version.
pub fn apis() -> Vec<(i16, &'static str, i16, i16)> {
    response_shapes::SHAPES
        .iter()
        .map(|s| (s.api_key, s.name, s.versions.0, s.versions.1))
        .collect()
}

/// Well-formed response bodies `(api key, version, body)`, one per API and version.
pub fn samples() -> Vec<(i16, i16, Vec<u8>)> {
    super::sample_responses::samples()
}

/// Record batches as a Fetch of the state topic returns them: two records of a transaction
/// (offsets 40 and 41) and its commit marker (42).
pub fn sample_batches() -> Vec<u8> {
    super::sample_responses::record_batches().to_vec()
}

/// [`sample_batches`] with the records of its data batch compressed, once per way a member
/// may compress them: `(codec, bytes)` for gzip, raw snappy, xerial-framed snappy, an LZ4
/// frame and zstd. Each reads as the uncompressed sample does (two records); a mutation of the
/// compressed bytes followed by [`seal_batches`] reaches the decompressors.
pub fn compressed_sample_batches() -> Vec<(i16, Vec<u8>)> {
    let sample = sample_batches();
    let compressors: [(i16, Compressor); 5] = [
        (1, gzip),
        (2, |d| {
            snap::raw::Encoder::new()
                .compress_vec(d)
                .unwrap_or_default()
        }),
        (2, xerial),
        (3, lz4_frame),
        (4, |d| {
            ruzstd::encoding::compress_to_vec(d, ruzstd::encoding::CompressionLevel::Fastest)
        }),
    ];
    compressors
        .iter()
        .map(|&(codec, compress)| (codec, compress_data_batches(&sample, codec, compress)))
        .collect()
}

/// A compressor of a batch's records section.
type Compressor = fn(&[u8]) -> Vec<u8>;

/// `records` with the records section of every whole non-control batch compressed, its codec
/// set and its length and CRC-32C fixed.
fn compress_data_batches(records: &[u8], codec: i16, compress: Compressor) -> Vec<u8> {
    const HEADER: usize = 61;
    let mut out = Vec::new();
    let mut rest = records;
    while rest.len() >= HEADER {
        let len = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        let size = usize::try_from(len).map_or(0, |l| l + 12);
        if size < HEADER || size > rest.len() {
            break;
        }
        let (batch, tail) = rest.split_at(size);
        rest = tail;
        let attributes = i16::from_be_bytes([batch[21], batch[22]]);
        if attributes & 0x20 != 0 {
            out.extend_from_slice(batch);
            continue;
        }
        let mut b = batch[..HEADER].to_vec();
        b.extend(compress(&batch[HEADER..]));
        let len = i32::try_from(b.len() - 12).unwrap_or(i32::MAX);
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[21..23].copy_from_slice(&((attributes & !0x07) | codec).to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        out.extend(b);
    }
    out.extend_from_slice(rest);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

/// snappy-java's framing: magic, version 1, compatible version 1, then length-prefixed raw
/// blocks (here of 16 bytes of input each, so that there are several).
fn xerial(data: &[u8]) -> Vec<u8> {
    let mut out = vec![
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    for part in data.chunks(16) {
        let block = snap::raw::Encoder::new()
            .compress_vec(part)
            .unwrap_or_default();
        out.extend(i32::try_from(block.len()).unwrap_or(0).to_be_bytes());
        out.extend(block);
    }
    out
}

/// One LZ4 frame of independent 64 KiB blocks, one block per 32 bytes of input, with block
/// checksums' space and a content size (neither is verified by the reader).
fn lz4_frame(data: &[u8]) -> Vec<u8> {
    let mut out = 0x184D_2204u32.to_le_bytes().to_vec();
    out.extend([0x60 | 0x10 | 0x08, 0x40]);
    out.extend((data.len() as u64).to_le_bytes());
    out.push(0);
    for part in data.chunks(32) {
        let block = lz4_flex::block::compress(part);
        out.extend(u32::try_from(block.len()).unwrap_or(0).to_le_bytes());
        out.extend(block);
        out.extend([0u8; 4]);
    }
    out.extend([0u8; 4]);
    out
}

/// The response header version of API `api_key` at `version` (0: a correlation id; 1: and
/// tagged fields); `None` for an API the client does not call.
pub fn header_version(api_key: i16, version: i16) -> Option<i16> {
    fn of<R: Request>(version: i16) -> i16 {
        <R::Response as HeaderVersion>::header_version(version)
    }
    Some(match api_key {
        18 => 0,
        17 => of::<SaslHandshakeRequest>(version),
        36 => of::<SaslAuthenticateRequest>(version),
        10 => of::<FindCoordinatorRequest>(version),
        3 => of::<MetadataRequest>(version),
        22 => of::<InitProducerIdRequest>(version),
        24 => of::<AddPartitionsToTxnRequest>(version),
        0 => of::<ProduceRequest>(version),
        26 => of::<EndTxnRequest>(version),
        25 => of::<AddOffsetsToTxnRequest>(version),
        28 => of::<TxnOffsetCommitRequest>(version),
        9 => of::<OffsetFetchRequest>(version),
        65 => of::<DescribeTransactionsRequest>(version),
        61 => of::<DescribeProducersRequest>(version),
        1 => of::<FetchRequest>(version),
        2 => of::<ListOffsetsRequest>(version),
        32 => of::<DescribeConfigsRequest>(version),
        19 => of::<CreateTopicsRequest>(version),
        _ => return None,
    })
}

fn show(e: NetError) -> String {
    match e {
        NetError::Io(why) => why,
        NetError::Stop(e) => e.to_string(),
    }
}

/// One request on a connection whose broker answers with `answers` (size-prefixed frames as
/// they arrive on the socket): the frame is read, its header checked (the request's
/// correlation id is 1), the body's shape checked and the body decoded, as for every call the
/// transport makes. API key 18 runs the version negotiation of a new connection.
pub fn exchange(api_key: i16, version: i16, answers: &[u8]) -> Result<(), String> {
    let mut conn = Conn::over("fuzz:9092", Box::new(Replay::new(answers.to_vec())));
    let deadline = Instant::now() + Duration::from_secs(60);
    fn call<R: Request + Default>(
        conn: &mut Conn,
        version: i16,
        deadline: Instant,
    ) -> Result<(), String> {
        conn.call(&R::default(), version, deadline)
            .map(drop)
            .map_err(show)
    }
    match api_key {
        18 => conn.negotiate_versions(deadline).map_err(show),
        17 => call::<SaslHandshakeRequest>(&mut conn, version, deadline),
        36 => call::<SaslAuthenticateRequest>(&mut conn, version, deadline),
        10 => call::<FindCoordinatorRequest>(&mut conn, version, deadline),
        3 => call::<MetadataRequest>(&mut conn, version, deadline),
        22 => call::<InitProducerIdRequest>(&mut conn, version, deadline),
        24 => call::<AddPartitionsToTxnRequest>(&mut conn, version, deadline),
        0 => call::<ProduceRequest>(&mut conn, version, deadline),
        26 => call::<EndTxnRequest>(&mut conn, version, deadline),
        25 => call::<AddOffsetsToTxnRequest>(&mut conn, version, deadline),
        28 => call::<TxnOffsetCommitRequest>(&mut conn, version, deadline),
        9 => call::<OffsetFetchRequest>(&mut conn, version, deadline),
        65 => call::<DescribeTransactionsRequest>(&mut conn, version, deadline),
        61 => call::<DescribeProducersRequest>(&mut conn, version, deadline),
        1 => call::<FetchRequest>(&mut conn, version, deadline),
        2 => call::<ListOffsetsRequest>(&mut conn, version, deadline),
        32 => call::<DescribeConfigsRequest>(&mut conn, version, deadline),
        19 => call::<CreateTopicsRequest>(&mut conn, version, deadline),
        _ => Err(format!("API key {api_key} is not one the client calls")),
    }
}

/// The records of one partition's fetched bytes (`records` of a Fetch answer) as the reader
/// keeps them: parsed, filtered as read_committed, and added to a view that covers the
/// partition from `from`. Returns how many records the view then serves.
///
/// Each batch decompresses to at most [`DECOMPRESSED_LIMIT`] bytes (the transport allows
/// 64 MiB), so that the harness's allocation bound holds; a batch past it is skipped, as the
/// transport skips one past its bound. The second number is how many batches were skipped.
pub fn fetched(
    records: &[u8],
    from: i64,
    aborted: &[(i64, i64)],
) -> Result<(usize, usize), String> {
    let decoded = batch::decode_batches_within(
        &Bytes::copy_from_slice(records),
        from,
        aborted,
        DECOMPRESSED_LIMIT,
    )
    .map_err(|e| format!("{e:?}"))?;
    let skipped = decoded.skipped.len();
    let mut view = View::starting_at(from);
    view.append(decoded);
    Ok((view.since(from).len(), skipped))
}

/// A SCRAM exchange (SHA-512 when `sha512`, else SHA-256) as user `user` with the client nonce
/// [`SCRAM_NONCE`]: the client's answer to `server_first`, then the check of `server_final`.
pub fn scram(sha512: bool, server_first: &[u8], server_final: &[u8]) -> Result<(), String> {
    let mechanism = if sha512 {
        Mechanism::ScramSha512
    } else {
        Mechanism::ScramSha256
    };
    let scram = Scram::new(mechanism, "user", SCRAM_NONCE);
    let (_, proof) = scram
        .client_final("pencil", server_first)
        .map_err(|e| format!("{e:?}"))?;
    proof.verify(server_final).map_err(|e| format!("{e:?}"))
}

/// Recomputes the CRC-32C of every whole batch in `records` (walking their length fields), so
/// that a mutated batch reaches the record parser instead of stopping at its checksum.
pub fn seal_batches(records: &mut [u8]) {
    const HEADER: usize = 61;
    let mut pos = 0usize;
    while records.len() - pos >= HEADER {
        let len = i32::from_be_bytes([
            records[pos + 8],
            records[pos + 9],
            records[pos + 10],
            records[pos + 11],
        ]);
        let Ok(len) = usize::try_from(len) else {
            break;
        };
        let size = 12 + len;
        if size < HEADER || records.len() - pos < size {
            break;
        }
        let crc = crc32c::crc32c(&records[pos + 21..pos + size]);
        records[pos + 17..pos + 21].copy_from_slice(&crc.to_be_bytes());
        pos += size;
    }
}
