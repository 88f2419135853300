//! A small deterministic generator (SplitMix64): the same seed gives the same input on every
//! machine, so a failing input is replayed from its seed alone.

/// SplitMix64.
#[derive(Clone, Debug)]
pub struct Rng(u64);

/// A well-mixed combination of two words (SplitMix64's finaliser), for per-input seeds.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0, 0)
    }

    /// A number in `0..n` (`0` when `n` is `0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True `num` times in `den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }

    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An integer from the values decoders get wrong: zero, one, minus one, the extremes of
    /// every width, powers of two and their neighbours; or any value.
    pub fn interesting(&mut self) -> i64 {
        const VALUES: [i64; 16] = [
            0,
            1,
            -1,
            2,
            i8::MAX as i64,
            i8::MIN as i64,
            0xff,
            i16::MAX as i64,
            i16::MIN as i64,
            0xffff,
            i32::MAX as i64,
            i32::MIN as i64,
            0xffff_ffff,
            i64::MAX,
            i64::MIN,
            i64::MAX - 1,
        ];
        match self.below(4) {
            0 | 1 => *self.pick(&VALUES),
            2 => {
                let p = 1i64 << self.below(63);
                p + self.range(0, 2) as i64 - 1
            }
            _ => self.next_u64() as i64,
        }
    }
}
