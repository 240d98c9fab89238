//! Counter-based random numbers: Philox-4x32-10 (Salmon et al., SC'11).
//!
//! Every random quantity in joker (the random-feature frequencies `W`, the phases `b`, the
//! block partition) is a pure function of `(seed, counter)`. Any entry can be regenerated on
//! any device in any order, so a model stores a seed instead of `W`, and the CUDA kernels
//! regenerate bit-identical inputs to the CPU's. The CUDA twin lives in `cuda/philox.cuh`.
//!
//! Conventions shared with the CUDA code (change both or neither):
//! - key = `(seed as u32, (seed >> 32) as u32)`;
//! - a uniform in (0, 1) takes the top 52 bits of two 32-bit words `(hi, lo)` as a fraction,
//!   offset by half a unit; `bits + 0.5` is then exact, so neither 0 nor 1 can occur;
//! - a standard normal is Box-Muller `sqrt(-2 ln u1) cos(2 pi u2)` from the four words of one
//!   Philox block.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = (a as u64) * (b as u64);
    ((p >> 32) as u32, p as u32)
}

/// Philox-4x32 with 10 rounds: maps a 128-bit counter and a 64-bit key to 128 random bits.
#[inline]
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The Philox key of a 64-bit seed.
#[inline]
pub fn key_of(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// A uniform double in the open interval (0, 1) from two random words.
#[inline]
pub fn uniform_open(hi: u32, lo: u32) -> f64 {
    let bits = (((hi as u64) << 32) | lo as u64) >> 12; // 52 bits: bits + 0.5 is exact
    (bits as f64 + 0.5) * (1.0 / (1u64 << 52) as f64)
}

/// A standard normal from one Philox block (Box-Muller on its four words).
#[inline]
pub fn normal_from(block: [u32; 4]) -> f64 {
    let u1 = uniform_open(block[0], block[1]);
    let u2 = uniform_open(block[2], block[3]);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A small sequential generator over the Philox stream `(stream, *, *, *)`, for host-side
/// randomness that need not be regenerated elsewhere (shuffles, block choice, subsamples).
#[derive(Clone, Debug)]
pub struct Stream {
    key: [u32; 2],
    stream: u32,
    counter: u64,
    buf: [u32; 4],
    used: usize,
}

/// The stream ids of the library, one per purpose, so that two uses of one seed never draw
/// the same numbers (and changing one use leaves the others' draws as they were).
pub mod streams {
    /// The random partition of the samples into blocks (DBCD-TR, Skotch/ASkotch).
    pub const BLOCK_PARTITION: u32 = 0xB10C;
    /// The block chosen at each iteration.
    pub const BLOCK_CHOICE: u32 = 0xC401;
    /// The Gaussian test matrix of a randomized Nystrom approximation.
    pub const NYSTROM_SKETCH: u32 = 0x4E59;
    /// The centres of a Nystrom feature map (uniform draw, k-means++ seeding, leverage keys).
    pub const NYSTROM_CENTERS: u32 = 0xCE47;
    /// The candidate rows the k-means and leverage rules of a Nystrom map look at.
    pub const NYSTROM_CANDIDATES: u32 = 0xCA4D;
    /// The start vector of the power iteration for the preconditioned smoothness.
    pub const POWER_ITERATION: u32 = 0x5A0F;
    /// The subsample of the median-distance bandwidth heuristic.
    pub const BANDWIDTH_SUBSAMPLE: u32 = 0xB4D;
    /// The mini-batches and revisited feature blocks of the doubly stochastic solvers.
    pub const DSG_BATCH: u32 = 0xD5B;
    /// The demo's synthetic data.
    pub const DEMO_DATA: u32 = 0xDE70;
    /// The row sample and the starting centres of a k-means partition of a distributed fit.
    pub const PARTITION: u32 = 0x9A27;
    /// The row sample a finite Newton start of L2-SVC finds its first active set on.
    pub const NEWTON_SAMPLE: u32 = 0x4E57;
    /// The groups of the median heuristic's subsample whose pairs it takes.
    pub const MEDIAN_GROUPS: u32 = 0x3ED6;
    /// The folds of a model search's cross-validation.
    pub const SEARCH_FOLDS: u32 = 0x5EA4;
    /// The folds of the cross-validation that calibrates class probabilities (Platt).
    pub const CALIBRATION_FOLDS: u32 = 0xCA1B;
}

impl Stream {
    /// A generator for `seed` on the given stream id.
    pub fn new(seed: u64, stream: u32) -> Self {
        Stream {
            key: key_of(seed),
            stream,
            counter: 0,
            buf: [0; 4],
            used: 4,
        }
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            let c = self.counter;
            self.buf = philox4x32_10([c as u32, (c >> 32) as u32, self.stream, 0x5EED], self.key);
            self.counter += 1;
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }

    /// A uniform double in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        let hi = self.next_u32();
        uniform_open(hi, self.next_u32())
    }

    /// A uniform integer in `0..n` (`n > 0`), without modulo bias worth noticing (64-bit draw).
    pub fn below(&mut self, n: usize) -> usize {
        let x = ((self.next_u32() as u64) << 32) | self.next_u32() as u64;
        ((x as u128 * n as u128) >> 64) as usize
    }

    /// Shuffles a slice in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors from the Random123 distribution (kat_vectors, philox4x32_10).
    #[test]
    fn philox_known_answers() {
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_extremes_stay_inside() {
        assert!(uniform_open(u32::MAX, u32::MAX) < 1.0);
        assert!(uniform_open(0, 0) > 0.0);
    }

    #[test]
    fn uniforms_are_open_and_normals_have_unit_variance() {
        let key = key_of(7);
        let n = 200_000u32;
        let (mut s, mut s2) = (0.0, 0.0);
        for i in 0..n {
            let b = philox4x32_10([i, 0, 0, 0], key);
            let u = uniform_open(b[0], b[1]);
            assert!(u > 0.0 && u < 1.0);
            let z = normal_from(b);
            s += z;
            s2 += z * z;
        }
        let mean = s / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.01, "var {var}");
    }
}
