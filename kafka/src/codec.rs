//! The codecs of compressed record batches (the codec is bits 0-2 of a batch's attributes):
//! gzip (1), snappy (2, raw or in snappy-java's "xerial" framing), lz4 (3, the standard LZ4
//! frame) and zstd (4), all pure Rust.
//!
//! Every decompression is bounded: it stops with [`Failure::OverBound`] once the output would
//! pass `limit` bytes, and nothing is allocated from a size on the wire beyond that limit (a
//! snappy block's claimed length, an LZ4 block size and a zstd window are checked against it,
//! and against the most the compressed bytes could hold, before any buffer is sized).

use std::io::Read;

/// Why a batch's records could not be decompressed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The output would pass the bound (of this many bytes).
    OverBound(usize),
    /// The codec number is none this reader knows (5-7).
    UnknownCodec(i16),
    /// The compressed bytes are not valid for their codec.
    Invalid(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::OverBound(limit) => write!(
                f,
                "its records decompress past the bound of {limit} bytes per batch"
            ),
            Failure::UnknownCodec(codec) => write!(
                f,
                "compression codec {codec} is unknown (1 gzip, 2 snappy, 3 lz4, 4 zstd)"
            ),
            Failure::Invalid(why) => f.write_str(why),
        }
    }
}

/// The name of codec `codec` (for messages).
pub(crate) fn name(codec: i16) -> &'static str {
    match codec {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

/// The decompressed bytes of `data`, compressed with codec `codec` (1-4), at most `limit`.
pub(crate) fn decompress(codec: i16, data: &[u8], limit: usize) -> Result<Vec<u8>, Failure> {
    match codec {
        1 => gunzip(data, limit),
        2 => unsnappy(data, limit),
        3 => unlz4(data, limit),
        4 => unzstd(data, limit),
        other => Err(Failure::UnknownCodec(other)),
    }
}

fn invalid(codec: &str, why: impl std::fmt::Display) -> Failure {
    Failure::Invalid(format!("its {codec} data is invalid: {why}"))
}

/// Reads `r` to its end into `out`, failing once `out` would pass `limit`.
fn read_bounded(r: impl Read, out: &mut Vec<u8>, limit: usize, codec: &str) -> Result<(), Failure> {
    let room = limit.saturating_sub(out.len()) as u64;
    r.take(room.saturating_add(1))
        .read_to_end(out)
        .map_err(|e| invalid(codec, e))?;
    if out.len() > limit {
        return Err(Failure::OverBound(limit));
    }
    Ok(())
}

// ---- gzip ------------------------------------------------------------------------------------

/// One or more gzip members (Java's GZIPInputStream reads concatenated members too).
fn gunzip(data: &[u8], limit: usize) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    read_bounded(
        flate2::read::MultiGzDecoder::new(data),
        &mut out,
        limit,
        "gzip",
    )?;
    Ok(out)
}

// ---- snappy ----------------------------------------------------------------------------------

/// snappy-java's stream header: its magic, then version and compatible version (i32 each).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER: usize = 16;
/// A snappy block expands at most about 21 times (a 3-byte copy of 64 bytes): a block that
/// claims more than this many bytes per byte is invalid, and nothing is sized from its claim.
const SNAPPY_MAX_RATIO: usize = 24;

/// A raw snappy block (franz-go, librdkafka), or the xerial framing that Kafka's Java client
/// writes: the header, then blocks each prefixed with its length (i32, big-endian).
fn unsnappy(data: &[u8], limit: usize) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    if !data.starts_with(&XERIAL_MAGIC) {
        snappy_block(data, &mut out, limit)?;
        return Ok(out);
    }
    let mut rest = data
        .get(XERIAL_HEADER..)
        .ok_or_else(|| invalid("snappy", "its xerial header ends early"))?;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| invalid("snappy", "a xerial block length ends early"))?;
        let len = usize::try_from(i32::from_be_bytes(*len))
            .ok()
            .filter(|&n| n <= tail.len())
            .ok_or_else(|| {
                invalid(
                    "snappy",
                    format!(
                        "a xerial block claims more than the {} bytes left",
                        tail.len()
                    ),
                )
            })?;
        let (block, tail) = tail.split_at(len);
        snappy_block(block, &mut out, limit)?;
        rest = tail;
    }
    Ok(out)
}

/// Appends the raw snappy block `block` to `out`.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), Failure> {
    let n = snap::raw::decompress_len(block).map_err(|e| invalid("snappy", e))?;
    if n > block.len().saturating_mul(SNAPPY_MAX_RATIO) {
        return Err(invalid(
            "snappy",
            format!("a block of {} bytes claims {n}", block.len()),
        ));
    }
    let at = out.len();
    if n > limit - at {
        return Err(Failure::OverBound(limit));
    }
    out.resize(at + n, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[at..])
        .map_err(|e| invalid("snappy", e))?;
    out.truncate(at + written);
    Ok(())
}

// ---- lz4 -------------------------------------------------------------------------------------

const LZ4_MAGIC: u32 = 0x184D_2204;
/// Skippable frames: magic 0x184D2A50 to 0x184D2A5F.
const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
const SKIPPABLE: u32 = 0x184D_2A50;
/// How far back a linked LZ4 block may refer.
const LZ4_WINDOW: usize = 64 * 1024;
/// An LZ4 block expands at most 255 times (each length byte adds at most 255).
const LZ4_MAX_RATIO: usize = 256;

/// The LZ4 frames (Kafka's magic v2 writes one standard frame) of `data`, read block by block
/// into one buffer: a linked block's dictionary is the output before it. The frame's checksums
/// are not verified (the batch's CRC-32C covers the bytes); a frame with a dictionary id is
/// refused (no dictionary is known).
fn unlz4(data: &[u8], limit: usize) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        rest = lz4_frame(rest, &mut out, limit)?;
    }
    Ok(out)
}

fn take<'a>(rest: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], Failure> {
    if rest.len() < n {
        return Err(invalid("lz4", format!("{what} ends early")));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads one frame from the start of `data` into `out`; returns what follows it.
fn lz4_frame<'a>(data: &'a [u8], out: &mut Vec<u8>, limit: usize) -> Result<&'a [u8], Failure> {
    let mut rest = data;
    let magic = le_u32(take(&mut rest, 4, "a frame's magic")?);
    if magic & SKIPPABLE_MASK == SKIPPABLE {
        let len = le_u32(take(&mut rest, 4, "a skippable frame")?) as usize;
        take(&mut rest, len, "a skippable frame")?;
        return Ok(rest);
    }
    if magic != LZ4_MAGIC {
        return Err(invalid("lz4", format!("frame magic {magic:#010x}")));
    }
    let descriptor = take(&mut rest, 2, "the frame descriptor")?;
    let (flags, bd) = (descriptor[0], descriptor[1]);
    if flags >> 6 != 1 {
        return Err(invalid("lz4", format!("frame version {}", flags >> 6)));
    }
    let independent = flags & 0x20 != 0;
    let block_checksums = flags & 0x10 != 0;
    let content_size = flags & 0x08 != 0;
    let content_checksum = flags & 0x04 != 0;
    if flags & 0x01 != 0 {
        return Err(invalid("lz4", "the frame needs a dictionary"));
    }
    let max_block = match (bd >> 4) & 0x07 {
        4 => 64 * 1024,
        5 => 256 * 1024,
        6 => 1024 * 1024,
        7 => 4 * 1024 * 1024,
        other => return Err(invalid("lz4", format!("block size code {other}"))),
    };
    if content_size {
        take(&mut rest, 8, "the frame's content size")?;
    }
    take(&mut rest, 1, "the frame's header checksum")?;
    loop {
        let word = le_u32(take(&mut rest, 4, "a block size")?);
        if word == 0 {
            break;
        }
        let stored = word & 0x8000_0000 != 0;
        let len = (word & 0x7FFF_FFFF) as usize;
        if len > max_block {
            return Err(invalid(
                "lz4",
                format!("a block of {len} bytes in a frame of {max_block}-byte blocks"),
            ));
        }
        let block = take(&mut rest, len, "a block")?;
        if block_checksums {
            take(&mut rest, 4, "a block checksum")?;
        }
        let at = out.len();
        if stored {
            if len > limit - at {
                return Err(Failure::OverBound(limit));
            }
            out.extend_from_slice(block);
            continue;
        }
        let most = max_block.min(len.saturating_mul(LZ4_MAX_RATIO));
        let room = most.min(limit - at);
        out.resize(at + room, 0);
        let (before, after) = out.split_at_mut(at);
        let dict = if independent {
            &[][..]
        } else {
            &before[at.saturating_sub(LZ4_WINDOW)..]
        };
        match lz4_flex::block::decompress_into_with_dict(block, after, dict) {
            Ok(n) => out.truncate(at + n),
            Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) if room < most => {
                return Err(Failure::OverBound(limit))
            }
            Err(e) => return Err(invalid("lz4", e)),
        }
    }
    if content_checksum {
        take(&mut rest, 4, "the content checksum")?;
    }
    Ok(rest)
}

// ---- zstd ------------------------------------------------------------------------------------

const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// The zstd frames of `data` (frames may lack a content size). A frame whose window is larger
/// than `limit` is refused before it is decoded: the decoder sizes its buffer by the window.
fn unzstd(data: &[u8], limit: usize) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let magic = rest.get(..4).map(le_u32).unwrap_or(0);
        if magic & SKIPPABLE_MASK == SKIPPABLE {
            let len = rest
                .get(4..8)
                .map(le_u32)
                .ok_or_else(|| invalid("zstd", "a skippable frame ends early"))?
                as usize;
            rest = rest
                .get(8..)
                .and_then(|r| r.get(len..))
                .ok_or_else(|| invalid("zstd", "a skippable frame ends early"))?;
            continue;
        }
        let window = zstd_window(rest)?;
        if window > limit as u64 {
            return Err(Failure::Invalid(format!(
                "its zstd frame needs a window of {window} bytes, past the bound of {limit} \
                 bytes per batch"
            )));
        }
        let decoder =
            ruzstd::decoding::StreamingDecoder::new(&mut rest).map_err(|e| invalid("zstd", e))?;
        read_bounded(decoder, &mut out, limit, "zstd")?;
    }
    Ok(out)
}

/// The window size a zstd frame header declares (RFC 8878, 3.1.1.1): from its window
/// descriptor, or its content size for a single-segment frame.
fn zstd_window(frame: &[u8]) -> Result<u64, Failure> {
    let short = || invalid("zstd", "a frame header ends early");
    let magic = frame.get(..4).map(le_u32).ok_or_else(short)?;
    if magic != ZSTD_MAGIC {
        return Err(invalid("zstd", format!("frame magic {magic:#010x}")));
    }
    let descriptor = *frame.get(4).ok_or_else(short)?;
    if descriptor & 0x20 == 0 {
        let w = *frame.get(5).ok_or_else(short)?;
        let base = 1u64 << (10 + u32::from(w >> 3));
        return Ok(base + (base / 8) * u64::from(w & 0x07));
    }
    let dict_len = [0usize, 1, 2, 4][usize::from(descriptor & 0x03)];
    let size_len = [1usize, 2, 4, 8][usize::from(descriptor >> 6)];
    let at = 5 + dict_len;
    let field = frame.get(at..at + size_len).ok_or_else(short)?;
    let size = field
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    Ok(if size_len == 2 { size + 256 } else { size })
}
