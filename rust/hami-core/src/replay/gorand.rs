//! Go `math/rand` (the Go 1 seeded source) re-implemented bit for bit, so that a replay with
//! seed S shuffles, samples and permutes exactly as the published simulator does with
//! `rand.Seed(S)`. Only the calls the simulator makes are provided.

use super::gocooked::RNG_COOKED;

const RNG_LEN: usize = 607;
const RNG_TAP: usize = 273;
const INT32_MAX: i64 = (1 << 31) - 1;
const RNG_MASK: u64 = (1 << 63) - 1;

/// The additive lagged Fibonacci source behind Go's `rand.NewSource`.
#[derive(Clone)]
pub struct GoRand {
    tap: usize,
    feed: usize,
    vec: [i64; RNG_LEN],
}

fn seedrand(x: i32) -> i32 {
    const A: i32 = 48271;
    const Q: i32 = 44488;
    const R: i32 = 3399;
    let hi = x / Q;
    let lo = x % Q;
    let mut x = A.wrapping_mul(lo).wrapping_sub(R.wrapping_mul(hi));
    if x < 0 {
        x = x.wrapping_add(INT32_MAX as i32);
    }
    x
}

impl GoRand {
    /// `rand.New(rand.NewSource(seed))`, equivalently `rand.Seed(seed)` on the global source.
    pub fn new(seed: i64) -> Self {
        let mut seed = seed % INT32_MAX;
        if seed < 0 {
            seed += INT32_MAX;
        }
        if seed == 0 {
            seed = 89_482_311;
        }
        let mut rng = Self { tap: 0, feed: RNG_LEN - RNG_TAP, vec: [0; RNG_LEN] };
        let mut x = seed as i32;
        for i in -20i32..RNG_LEN as i32 {
            x = seedrand(x);
            if i >= 0 {
                let mut u = i64::from(x) << 40;
                x = seedrand(x);
                u ^= i64::from(x) << 20;
                x = seedrand(x);
                u ^= i64::from(x);
                u ^= RNG_COOKED[i as usize];
                rng.vec[i as usize] = u;
            }
        }
        rng
    }

    pub fn uint64(&mut self) -> u64 {
        self.tap = if self.tap == 0 { RNG_LEN - 1 } else { self.tap - 1 };
        self.feed = if self.feed == 0 { RNG_LEN - 1 } else { self.feed - 1 };
        let x = self.vec[self.feed].wrapping_add(self.vec[self.tap]);
        self.vec[self.feed] = x;
        x as u64
    }

    pub fn int63(&mut self) -> i64 {
        (self.uint64() & RNG_MASK) as i64
    }

    pub fn uint32(&mut self) -> u32 {
        (self.int63() >> 31) as u32
    }

    pub fn int31(&mut self) -> i32 {
        (self.int63() >> 32) as i32
    }

    /// `rand.Int()` on a 64-bit platform.
    pub fn int(&mut self) -> i64 {
        self.int63()
    }

    pub fn int63n(&mut self, n: i64) -> i64 {
        assert!(n > 0, "int63n: n must be positive");
        if n & (n - 1) == 0 {
            return self.int63() & (n - 1);
        }
        let max = ((1u64 << 63) - 1 - (1u64 << 63) % n as u64) as i64;
        let mut v = self.int63();
        while v > max {
            v = self.int63();
        }
        v % n
    }

    pub fn int31n(&mut self, n: i32) -> i32 {
        assert!(n > 0, "int31n: n must be positive");
        if n & (n - 1) == 0 {
            return self.int31() & (n - 1);
        }
        let max = ((1u32 << 31) - 1 - (1u32 << 31) % n as u32) as i32;
        let mut v = self.int31();
        while v > max {
            v = self.int31();
        }
        v % n
    }

    /// Go's internal `int31n` (Lemire's method), used by `Shuffle`.
    fn int31n_fast(&mut self, n: i32) -> i32 {
        let mut v = self.uint32();
        let mut prod = u64::from(v) * n as u64;
        let mut low = prod as u32;
        if low < n as u32 {
            let thresh = (n as u32).wrapping_neg() % n as u32;
            while low < thresh {
                v = self.uint32();
                prod = u64::from(v) * n as u64;
                low = prod as u32;
            }
        }
        (prod >> 32) as i32
    }

    pub fn intn(&mut self, n: usize) -> usize {
        if n <= i32::MAX as usize {
            self.int31n(n as i32) as usize
        } else {
            self.int63n(n as i64) as usize
        }
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        let n = items.len();
        if n < 2 {
            return;
        }
        let mut i = n - 1;
        while i > (1usize << 31) - 2 {
            let j = self.int63n(i as i64 + 1) as usize;
            items.swap(i, j);
            i -= 1;
        }
        while i > 0 {
            let j = self.int31n_fast(i as i32 + 1) as usize;
            items.swap(i, j);
            i -= 1;
        }
    }

    pub fn perm(&mut self, n: usize) -> Vec<usize> {
        let mut m = vec![0usize; n];
        for i in 0..n {
            let j = self.intn(i + 1);
            m[i] = m[j];
            m[j] = i;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values printed by Go 1.26 `math/rand` with `rand.New(rand.NewSource(seed))`.
    #[test]
    fn matches_go_math_rand() {
        let mut r = GoRand::new(42);
        let ints: Vec<i64> = (0..3).map(|_| r.int()).collect();
        assert_eq!(ints, GO_SEED42_INT);
        let mut r = GoRand::new(42);
        let mut v: Vec<usize> = (0..10).collect();
        r.shuffle(&mut v);
        assert_eq!(v, GO_SEED42_SHUFFLE10);
        let intn: Vec<usize> = (0..5).map(|_| r.intn(1000)).collect();
        assert_eq!(intn, GO_SEED42_INTN_AFTER);
        assert_eq!(r.perm(8), GO_SEED42_PERM8_AFTER);
        let mut r = GoRand::new(-7);
        assert_eq!(r.intn(3), GO_SEEDM7_INTN3);
        let mut r = GoRand::new(0);
        assert_eq!(r.int(), GO_SEED0_INT);
    }

    include!("gorand_vectors.rs");
}
