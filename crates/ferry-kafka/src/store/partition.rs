//! The partition Kafka's Java client picks for a keyed record.
//!
//! Kafka Connect writes offsets with the Java producer, whose default partitioner sends a keyed record
//! to `(murmur2(key) & 0x7fffffff) % partitions`. On a compacted topic every writer must put a key on
//! the same partition, or compaction keeps one copy per partition and readers cannot tell which is
//! newest. The store's producer uses librdkafka's `murmur2_random` partitioner, which computes the same
//! thing; this function states the contract so tests can check it independently of librdkafka.

/// Kafka's `Utils.murmur2`: MurmurHash2, 32-bit, seed `0x9747b28c`, little-endian 4-byte blocks.
pub fn java_murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    // Java's int length, as the reference does; offset keys are far below 2 GiB.
    let mut h: u32 = SEED ^ (data.len() as u32);
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(&first) = tail.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition (of `partitions`) Kafka's Java default partitioner picks for a record with key
/// `key`: `toPositive(murmur2(key)) % partitions`. `partitions` must be at least 1.
pub fn java_partition(key: &[u8], partitions: i32) -> i32 {
    (java_murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own vectors (`UtilsTest.testMurmur2` in the Java client).
    #[test]
    fn murmur2_matches_kafkas_test_vectors() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (data, expected) in cases {
            assert_eq!(
                java_murmur2(data),
                *expected,
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn partition_is_non_negative_and_in_range() {
        for n in [1, 3, 25] {
            for key in [
                &b"21"[..],
                b"foobar",
                b"",
                br#"["file-src",{"filename":"/tmp/test.txt"}]"#,
            ] {
                let p = java_partition(key, n);
                assert!((0..n).contains(&p), "{p} of {n}");
            }
        }
        // -973932308 & 0x7fffffff = 1173551340; % 25 = 15.
        assert_eq!(java_partition(b"21", 25), 15);
    }
}
