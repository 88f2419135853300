//! Mutations of valid encodings, aimed at where decoders go wrong: bit flips, truncation,
//! splices with other inputs, and length or count fields set to huge, negative or off-by-one
//! values (fixed-width big-endian and varints alike).

use crate::rng::Rng;

/// Inputs are capped at this many bytes (a few times the largest sample).
pub const MAX_INPUT: usize = 64 * 1024;

/// Applies one to four mutations to `bytes`; `donors` are other inputs to splice from.
pub fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>, donors: &[&[u8]]) {
    let n = 1 + rng.below(4);
    for _ in 0..n {
        mutate_once(rng, bytes, donors);
    }
    bytes.truncate(MAX_INPUT);
}

fn mutate_once(rng: &mut Rng, bytes: &mut Vec<u8>, donors: &[&[u8]]) {
    let len = bytes.len();
    match rng.below(12) {
        // Flip one bit.
        0 if len > 0 => {
            let at = rng.below(len);
            bytes[at] ^= 1 << rng.below(8);
        }
        // Set one byte to an edge value.
        1 if len > 0 => {
            let at = rng.below(len);
            bytes[at] = *rng.pick(&[0, 1, 0x7f, 0x80, 0xff, 0xfe]);
        }
        // Overwrite a big-endian integer of 2, 4 or 8 bytes: a length, count, offset or code.
        2 | 3 if len > 0 => {
            let width = *rng.pick(&[2usize, 4, 8]);
            let at = rng.below(len);
            let value = match rng.below(3) {
                // Off by a little from the bytes that follow.
                0 => (len - at) as i64 + rng.range(0, 4) as i64 - 2,
                _ => rng.interesting(),
            };
            let be = value.to_be_bytes();
            let field = &be[8 - width..];
            for (i, b) in field.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + i) {
                    *slot = *b;
                }
            }
        }
        // Insert or overwrite an unsigned varint (compact lengths, counts, tags).
        4 => {
            let value = match rng.below(3) {
                0 => u64::from(u32::MAX),
                1 => rng.interesting() as u64,
                _ => rng.below(300) as u64,
            };
            let mut v = Vec::new();
            let mut x = value;
            while x >= 0x80 && v.len() < 9 {
                v.push((x as u8) | 0x80);
                x >>= 7;
            }
            v.push(x as u8);
            let at = rng.below(len + 1);
            if rng.chance(1, 2) {
                bytes.splice(at..at, v);
            } else {
                let end = (at + v.len()).min(len);
                bytes.splice(at..end, v);
            }
        }
        // Cut the tail.
        5 if len > 0 => bytes.truncate(rng.below(len)),
        // Remove a range.
        6 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(16)).min(len);
            bytes.drain(at..end);
        }
        // Insert random bytes.
        7 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(8);
            let junk = rng.bytes(n);
            bytes.splice(at..at, junk);
        }
        // Repeat a range (a record or element twice).
        8 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(64)).min(len);
            let chunk = bytes[at..end].to_vec();
            let to = rng.below(len + 1);
            bytes.splice(to..to, chunk);
        }
        // Splice: our head, another input's tail.
        9 if !donors.is_empty() => {
            let donor = *rng.pick(donors);
            let at = rng.below(len + 1);
            let from = rng.below(donor.len() + 1);
            bytes.truncate(at);
            bytes.extend_from_slice(&donor[from..]);
        }
        // Append junk.
        10 => {
            let n = 1 + rng.below(32);
            let junk = rng.bytes(n);
            bytes.extend(junk);
        }
        // Swap two bytes.
        _ if len > 1 => {
            let (a, b) = (rng.below(len), rng.below(len));
            bytes.swap(a, b);
        }
        _ => {}
    }
}

/// Random bytes of a random length (mostly short).
pub fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    let n = match rng.below(8) {
        0 => rng.below(4096),
        _ => rng.below(96),
    };
    rng.bytes(n)
}
