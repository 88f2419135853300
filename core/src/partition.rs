//! The partition of a role: Kafka's own key partitioning applied to the role name.
//!
//! Every record of a role (registrations and the lease) must land on one partition so that the
//! records of the role are totally ordered. The registration key and the lease key differ, so a
//! key-hashing partitioner would split them; both writers pin the partition computed here.

use crate::record::Role;

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit. It is **not** an absolute value; the two
/// differ for every negative input (`to_positive(-1) == i32::MAX`, `abs(-1) == 1`).
pub const fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// A partition count that is zero or negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("partition count must be positive, got {partitions}")]
pub struct PartitionCountError {
    /// The count that was given.
    pub partitions: i32,
}

/// The partition of `__coordination_state` that holds every record of `role`, for a topic of
/// `partitions` partitions: `to_positive(murmur2(role)) % partitions`.
///
/// Every member of a role must pass the topic's real partition count; two counts put one role
/// on two partitions and the join order is lost.
pub fn role_partition(role: &Role, partitions: i32) -> Result<i32, PartitionCountError> {
    partition_of_bytes(role.as_str().as_bytes(), partitions)
}

/// [`role_partition`] for raw bytes (the UTF-8 of a role name).
pub fn partition_of_bytes(name: &[u8], partitions: i32) -> Result<i32, PartitionCountError> {
    if partitions <= 0 {
        return Err(PartitionCountError { partitions });
    }
    Ok(to_positive(murmur2(name)) % partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_is_not_abs() {
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(5), 5);
    }

    #[test]
    fn zero_or_negative_count_is_refused() {
        assert_eq!(
            partition_of_bytes(b"x", 0),
            Err(PartitionCountError { partitions: 0 })
        );
        assert_eq!(
            partition_of_bytes(b"x", -3),
            Err(PartitionCountError { partitions: -3 })
        );
    }
}
