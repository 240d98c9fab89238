// philox.cuh: Philox-4x32-10 and the random-feature generator, the CUDA twin of src/rng.rs.
//
// Every random quantity of a random-feature model is a pure function of (seed, counter), so the
// GPU regenerates W and b instead of storing them. This header must stay in step with
// src/rng.rs (change both or neither):
//   - philox4x32_10(ctr, key): 10 rounds, multipliers 0xD2511F53 / 0xCD9E8D57, Weyl key bumps
//     0x9E3779B9 / 0xBB67AE85 applied before rounds 1..9 (exactly the Rust loop);
//   - key_of(seed) = (seed as u32, (seed >> 32) as u32);
//   - uniform_open(hi, lo) = (((hi << 32) | lo) >> 12 + 0.5) * 2^-52 in double (never 0 or 1);
//   - normal_from(blk) = sqrt(-2 ln u1) * cos(2 pi u2), u1 = uniform_open(blk[0], blk[1]),
//     u2 = uniform_open(blk[2], blk[3]), in double.
//
// Exactness. The Philox words and the uniforms are bit-identical to the CPU's: only integer
// operations and correctly rounded double add/mul are involved, and the double operations are
// written with __dadd_rn / __dmul_rn so that nvcc cannot contract them into FMAs (Rust never
// contracts). The normals (log, cos), the Cauchy draws (tan) and hence W are NOT guaranteed to be
// bit-identical: CUDA's double log/cos/tan are accurate to 1-2 ulp and so is the CPU's libm, so
// the double values can differ in the last bits. After rounding W to f32 the two sides agree
// except when the double lies within a few double ulps of an f32 rounding boundary (about 1 entry
// in 10^8), where they differ by one f32 ulp. Tests must compare W with a tolerance of 1 f32 ulp.
//
// The feature map (the spec shared with the CPU twin, src/features.rs when it exists):
//   psi_j(x) = s * cos(z_j),  s = (float)sqrt(2.0 / M),
//   z_j = fma-chain over k = 0..d-1 in f32, starting from b_j:  z = b_j; z = fmaf(W[j,k], x_k, z)
//   W[j,k] (f32) = (float)(w) with w in double:
//     kernel 0 (Gaussian, exp(-gamma ||x-x'||^2)):  w = sqrt(2.0 * gamma) * normal_from(philox([j,k,0,0]))
//     kernel 1 (Laplacian, exp(-gamma ||x-x'||_1)): w = gamma * tan(PI * (u - 0.5)),
//                                                   u = uniform_open(blk[0], blk[1]), blk = philox([j,k,0,0])
//     kernel 2 (Matern nu, length scale 1/gamma):   w = (gamma * normal_from(philox([j,k,0,0]))) * sqrt((2.0 * nu) / chi2_j),
//                                                   chi2_j = sum_{i=0}^{2nu-1} normal_from(philox([j,i,1,0]))^2
//                                                   (summed in order i = 0, 1, ..., each square rounded, no FMA)
//   b_j (f32) = (float)(TAU * uniform_open(blk[0], blk[1])), blk = philox([j,0,2,0])
//   with PI = 3.141592653589793 and TAU = 6.283185307179586 (the f64 constants).
// The cos is cosf (accurate range reduction, max 2 ulp), never __cosf.
#pragma once

#include <stdint.h>

#ifdef __CUDACC__
#define JK_HD __host__ __device__ __forceinline__
#else
#define JK_HD inline
#endif

namespace joker {

struct u32x4 {
    uint32_t v[4];
};

static constexpr uint32_t PHILOX_M0 = 0xD2511F53u;
static constexpr uint32_t PHILOX_M1 = 0xCD9E8D57u;
static constexpr uint32_t PHILOX_W0 = 0x9E3779B9u;
static constexpr uint32_t PHILOX_W1 = 0xBB67AE85u;

static constexpr double JK_PI = 3.141592653589793;
static constexpr double JK_TAU = 6.283185307179586;
static constexpr double JK_2POW_M52 = 1.0 / 4503599627370496.0;  // 2^-52, exact

// Kernel ids shared with the Rust side.
static constexpr int RFF_GAUSSIAN = 0;
static constexpr int RFF_LAPLACIAN = 1;
static constexpr int RFF_MATERN = 2;

JK_HD uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return (uint32_t)(((uint64_t)a * (uint64_t)b) >> 32);
#endif
}

// Round-to-nearest double add / mul that the compiler may not fuse. On the host (the
// emulator, scripts/emu-cuda.sh) the result goes through a volatile so that a build with FMA
// contraction (-ffp-contract=fast) cannot fuse dadd(x, dmul(y, z)) either, as on the GPU.
JK_HD double dadd(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    volatile double r = a + b;
    return r;
#endif
}
JK_HD double dmul(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    volatile double r = a * b;
    return r;
#endif
}

// Philox-4x32 with 10 rounds (Salmon et al., SC'11), as src/rng.rs::philox4x32_10.
JK_HD u32x4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                          uint32_t k1) {
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        const uint32_t hi0 = mulhi32(PHILOX_M0, c0), lo0 = PHILOX_M0 * c0;
        const uint32_t hi1 = mulhi32(PHILOX_M1, c2), lo1 = PHILOX_M1 * c2;
        const uint32_t n0 = hi1 ^ c1 ^ k0;
        const uint32_t n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    u32x4 r;
    r.v[0] = c0;
    r.v[1] = c1;
    r.v[2] = c2;
    r.v[3] = c3;
    return r;
}

// The Philox key of a 64-bit seed: (low word, high word).
JK_HD void key_of(unsigned long long seed, uint32_t& k0, uint32_t& k1) {
    k0 = (uint32_t)seed;
    k1 = (uint32_t)(seed >> 32);
}

// A uniform double in (0, 1) from two words, 53 bits from (hi, lo), offset by half a unit.
// (For bits = 2^53 - 1 the sum rounds to 2^53 and the result is 1.0, on the CPU too.)
JK_HD double uniform_open(uint32_t hi, uint32_t lo) {
    const uint64_t bits = (((uint64_t)hi << 32) | (uint64_t)lo) >> 12;  // 52 bits
    return dmul(dadd((double)bits, 0.5), JK_2POW_M52);
}

// A standard normal from one Philox block: Box-Muller, cosine branch, in double.
JK_HD double normal_from(const u32x4& b) {
    const double u1 = uniform_open(b.v[0], b.v[1]);
    const double u2 = uniform_open(b.v[2], b.v[3]);
    return dmul(sqrt(dmul(-2.0, log(u1))), cos(dmul(JK_TAU, u2)));
}

// The phase b_j in f32.
JK_HD float rff_phase(uint32_t j, uint32_t k0, uint32_t k1) {
    const u32x4 blk = philox4x32_10(j, 0u, 2u, 0u, k0, k1);
    return (float)dmul(JK_TAU, uniform_open(blk.v[0], blk.v[1]));
}

// The per-row factor of the Matern sampler: sqrt(2 nu / chi2_j), chi2_j over dof = 2 nu normals.
// Returns 1.0 for the other kernels (unused there).
JK_HD double rff_row_factor(int kernel, uint32_t j, double nu, uint32_t k0, uint32_t k1) {
    if (kernel != RFF_MATERN) return 1.0;
    const int dof = (int)(2.0 * nu + 0.5);
    double chi2 = 0.0;
    for (int i = 0; i < dof; ++i) {
        const double z = normal_from(philox4x32_10(j, (uint32_t)i, 1u, 0u, k0, k1));
        chi2 = dadd(chi2, dmul(z, z));
    }
    return sqrt(dmul(2.0, nu) / chi2);
}

// W[j,k] in f32. `wscale` is sqrt(2 gamma) for the Gaussian and gamma otherwise (the caller
// computes it once, exactly as written here); `row_factor` is rff_row_factor(kernel, j, ..).
JK_HD float rff_weight(int kernel, uint32_t j, uint32_t k, double wscale, double row_factor,
                       uint32_t k0, uint32_t k1) {
    const u32x4 blk = philox4x32_10(j, k, 0u, 0u, k0, k1);
    double w;
    if (kernel == RFF_LAPLACIAN) {
        const double u = uniform_open(blk.v[0], blk.v[1]);
        w = dmul(wscale, tan(dmul(JK_PI, dadd(u, -0.5))));
    } else if (kernel == RFF_MATERN) {
        w = dmul(dmul(wscale, normal_from(blk)), row_factor);
    } else {
        w = dmul(wscale, normal_from(blk));
    }
    return (float)w;
}

// The scale in front of W: sqrt(2 gamma) (Gaussian) or gamma (Laplacian, Matern).
JK_HD double rff_wscale(int kernel, double gamma) {
    return kernel == RFF_GAUSSIAN ? sqrt(dmul(2.0, gamma)) : gamma;
}

// The feature scale sqrt(2/M) in f32.
JK_HD float rff_feature_scale(int m) { return (float)sqrt(2.0 / (double)m); }

}  // namespace joker
