// test_exact.cpp: runs the kernels of cuda/exact.cu under the host emulator (emu.h) and compares
// with a direct f64 computation (differences of the f64-converted inputs, summed in f64, the
// kernel of src/kernel.rs in f64):
//   exact_tile (dense)      |K - K_ref| <= 4e-6 (f32 chunk sums of direct differences; the bound
//                           is ~34 f32 ulps of the distance times max_u u e^-u = 1/e);
//   exact_tile_csr          |K - K_ref| <= 1e-12 (f64 throughout);
//   exact_matvec_csr        |out - ref| <= 1e-12 sum_j |v_j| (f64 throughout), X_B a view of
//                           consecutive rows of a larger CSR matrix;
//   exact_matvec            |out - ref| <= 4e-6 * sum_j |v_j| + 1e-12 |ref|, plus the initial out;
// on fresh random inputs, sizes that are not multiples of the 64-row tiles or the 32-dim
// chunks, every kernel id (Matern nu 0.5, 1.5, 2.5), outputs poisoned with NaN (tiles) or with
// a poisoned padding that must stay untouched (ldo > rows), and one case of near points far
// from the origin (|x| ~ 300, |x - y| ~ 1e-2) where the expansion ||x||^2 + ||y||^2 - 2 x.y in
// f32 loses every digit.
// Build and run: scripts/emu-cuda.sh   (add --tsan for ThreadSanitizer)
#include "emu.h"
#include "../exact.cu"
#include <cstdio>
#include <random>
static int failures = 0;
#define CHECK(c, ...) do { if (!(c)) { ++failures; std::printf("FAIL: " __VA_ARGS__); std::printf("\n"); } } while (0)

static double ref_kernel(int kernel, double gamma, double nu, const double* a, const double* b, int d) {
    double s = 0;
    for (int k = 0; k < d; ++k) s += kernel == 1 ? std::fabs(a[k] - b[k]) : (a[k] - b[k]) * (a[k] - b[k]);
    if (kernel == 0 || kernel == 1) return std::exp(-gamma * s);
    double r = gamma * std::sqrt(s);
    if (nu == 1.5) { double t = std::sqrt(3.0) * r; return (1 + t) * std::exp(-t); }
    if (nu == 2.5) { double t = std::sqrt(5.0) * r; return (1 + t + t * t / 3) * std::exp(-t); }
    return std::exp(-r);
}

static const char* kname(int kernel, double nu) {
    if (kernel == 0) return "gaussian";
    if (kernel == 1) return "laplacian";
    return nu == 0.5 ? "matern0.5" : nu == 1.5 ? "matern1.5" : "matern2.5";
}

static double worst_tile = 0, worst_csr = 0, worst_mv = 0;

void dense_case(int ni, int nj, int d, int tcols, int kernel, double nu, double offset, double spread, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> N01;
    std::vector<float> xi((size_t)ni * d), xj((size_t)nj * d);
    std::vector<double> center(d);
    for (auto& c : center) c = offset * N01(rng);
    for (int i = 0; i < ni; ++i) for (int k = 0; k < d; ++k) xi[(size_t)i * d + k] = (float)(center[k] + spread * N01(rng));
    for (int j = 0; j < nj; ++j) for (int k = 0; k < d; ++k) xj[(size_t)j * d + k] = (float)(center[k] + spread * N01(rng));
    if (ni > 3 && nj > 3) for (int k = 0; k < d; ++k) xj[(size_t)2 * d + k] = xi[(size_t)3 * d + k];  // a zero distance
    // gamma so that kernel values span (0, 1]: typical distance^2 ~ 2 d spread^2
    double gamma = kernel == 0 ? 1.0 / (2.0 * d * spread * spread) : kernel == 1 ? 1.0 / (1.2 * d * spread) : 1.0 / (std::sqrt(2.0 * d) * spread);
    std::vector<double> xid(xi.begin(), xi.end()), xjd(xj.begin(), xj.end());
    std::vector<double> kref((size_t)ni * nj);
    for (int i = 0; i < ni; ++i) for (int j = 0; j < nj; ++j) kref[(size_t)i * nj + j] = ref_kernel(kernel, gamma, nu, &xid[(size_t)i * d], &xjd[(size_t)j * d], d);

    // exact_tile into a poisoned out with ldo = nj + 3 (padding must stay NaN)
    const int ldo = nj + 3;
    std::vector<double> out((size_t)ni * ldo, NAN);
    dim3 grid{(unsigned)((nj + 63) / 64), (unsigned)((ni + 63) / 64), 1};
    launch([&] { exact_tile(xi.data(), ni, xj.data(), nj, d, kernel, gamma, nu, out.data(), ldo); }, grid, {256, 1, 1});
    double err = 0; bool pad_ok = true;
    for (int i = 0; i < ni; ++i) {
        for (int j = 0; j < nj; ++j) { double e = std::fabs(out[(size_t)i * ldo + j] - kref[(size_t)i * nj + j]); err = std::isnan(e) ? INFINITY : std::max(err, e); }
        for (int j = nj; j < ldo; ++j) pad_ok &= std::isnan(out[(size_t)i * ldo + j]);
    }
    CHECK(err <= 4e-6, "exact_tile %s max err %.3g", kname(kernel, nu), err);
    CHECK(pad_ok, "exact_tile wrote outside the tile");
    worst_tile = std::max(worst_tile, err);

    // K_BB symmetry: exact_tile(X, X) must be exactly symmetric with a unit diagonal
    std::vector<double> kb((size_t)ni * ni, NAN);
    launch([&] { exact_tile(xi.data(), ni, xi.data(), ni, d, kernel, gamma, nu, kb.data(), ni); }, {(unsigned)((ni + 63) / 64), (unsigned)((ni + 63) / 64), 1}, {256, 1, 1});
    bool sym = true;
    for (int i = 0; i < ni; ++i) { sym &= kb[(size_t)i * ni + i] == 1.0; for (int j = 0; j < i; ++j) sym &= kb[(size_t)i * ni + j] == kb[(size_t)j * ni + i]; }
    CHECK(sym, "exact_tile(X, X) not exactly symmetric with unit diagonal (%s)", kname(kernel, nu));

    // exact_matvec: out0 random, padding rows n..ldo poisoned; X = xi (n rows), X_B = xj
    const int ldv = nj + 2, ldm = ni + 5;
    std::vector<double> v((size_t)ldv * tcols, NAN);
    for (int t = 0; t < tcols; ++t) for (int j = 0; j < nj; ++j) v[(size_t)t * ldv + j] = N01(rng);
    std::vector<double> mv((size_t)ldm * std::max(tcols, 1), NAN), mv0;
    for (int t = 0; t < tcols; ++t) for (int i = 0; i < ni; ++i) mv[(size_t)t * ldm + i] = N01(rng);
    mv0 = mv;
    launch([&] { exact_matvec(xi.data(), ni, xj.data(), nj, d, kernel, gamma, nu, v.data(), ldv, tcols, mv.data(), ldm); }, {(unsigned)((ni + 63) / 64), 1, 1}, {256, 1, 1});
    double merr = 0; pad_ok = true;
    for (int t = 0; t < tcols; ++t) {
        double vabs = 0; for (int j = 0; j < nj; ++j) vabs += std::fabs(v[(size_t)t * ldv + j]);
        for (int i = 0; i < ni; ++i) {
            double s = mv0[(size_t)t * ldm + i];
            for (int j = 0; j < nj; ++j) s += kref[(size_t)i * nj + j] * v[(size_t)t * ldv + j];
            double e = std::fabs(mv[(size_t)t * ldm + i] - s) / (vabs + 1e-300);
            merr = std::isnan(e) ? INFINITY : std::max(merr, e);
            CHECK(std::fabs(mv[(size_t)t * ldm + i] - s) <= 4e-6 * vabs + 1e-12 * std::fabs(s), "exact_matvec %s t=%d i=%d: %.17g vs %.17g", kname(kernel, nu), t, i, mv[(size_t)t * ldm + i], s);
        }
        for (int i = ni; i < ldm; ++i) pad_ok &= std::isnan(mv[(size_t)t * ldm + i]);
    }
    CHECK(pad_ok, "exact_matvec wrote outside its rows");
    worst_mv = std::max(worst_mv, merr);
    std::printf("  dense ni=%d nj=%d d=%d T=%d %-9s |x|~%g: tile err %.2e, matvec err/sum|v| %.2e\n", ni, nj, d, tcols, kname(kernel, nu), offset, err, merr);
}

struct Csr { std::vector<long long> ip; std::vector<int> ix; std::vector<float> v; std::vector<double> dense; };
Csr random_csr(int n, int d, double density, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> U(0, 1);
    std::normal_distribution<double> N01;
    Csr c; c.ip.push_back(0); c.dense.assign((size_t)n * d, 0.0);
    for (int i = 0; i < n; ++i) {
        if (i % 7 != 3)  // every 7th row is empty
            for (int k = 0; k < d; ++k)
                if (U(rng) < density) { float x = (float)N01(rng); c.ix.push_back(k); c.v.push_back(x); c.dense[(size_t)i * d + k] = x; }
        c.ip.push_back((long long)c.ix.size());
    }
    return c;
}

void csr_case(int ni, int nj, int d, double density, int kernel, double nu, unsigned seed) {
    std::mt19937_64 rng(seed);
    Csr a = random_csr(ni, d, density, rng), b = random_csr(nj, d, density, rng);
    double gamma = kernel == 0 ? 1.0 / (2.0 * d * density) : kernel == 1 ? 1.0 / (1.2 * d * density) : 1.0 / std::sqrt(2.0 * d * density);
    const int ldo = nj + 1;
    std::vector<double> out((size_t)ni * ldo, NAN);
    launch([&] { exact_tile_csr(a.ip.data(), a.ix.data(), a.v.data(), ni, b.ip.data(), b.ix.data(), b.v.data(), nj, kernel, gamma, nu, out.data(), ldo); },
           {(unsigned)((nj + 31) / 32), (unsigned)((ni + 7) / 8), 1}, {256, 1, 1});
    double err = 0; bool pad_ok = true;
    for (int i = 0; i < ni; ++i) {
        for (int j = 0; j < nj; ++j) {
            double want = ref_kernel(kernel, gamma, nu, &a.dense[(size_t)i * d], &b.dense[(size_t)j * d], d);
            double e = std::fabs(out[(size_t)i * ldo + j] - want);
            err = std::isnan(e) ? INFINITY : std::max(err, e);
        }
        pad_ok &= std::isnan(out[(size_t)i * ldo + nj]);
    }
    CHECK(err <= 1e-12, "exact_tile_csr %s max err %.3g", kname(kernel, nu), err);
    CHECK(pad_ok, "exact_tile_csr wrote outside the tile");
    worst_csr = std::max(worst_csr, err);

    // exact_matvec_csr: X = a (ni rows), X_B = rows s0 .. nj of b passed as a view (ipb = ip + s0,
    // absolute offsets), T = 2, out poisoned past ni, random initial out
    const int s0 = 5, nbv = nj - s0, tcols = 2, ldv = nbv + 1, ldm = ni + 3;
    std::normal_distribution<double> N01;
    std::vector<double> v((size_t)ldv * tcols, NAN), mv((size_t)ldm * tcols, NAN);
    for (int t = 0; t < tcols; ++t) {
        for (int j = 0; j < nbv; ++j) v[(size_t)t * ldv + j] = N01(rng);
        for (int i = 0; i < ni; ++i) mv[(size_t)t * ldm + i] = N01(rng);
    }
    std::vector<double> mv0 = mv;
    launch([&] { exact_matvec_csr(a.ip.data(), a.ix.data(), a.v.data(), ni, b.ip.data() + s0, b.ix.data(), b.v.data(), nbv, kernel, gamma, nu,
                                  v.data(), ldv, tcols, mv.data(), ldm); },
           {(unsigned)((ni + 63) / 64), 1, 1}, {256, 1, 1});
    double merr = 0;
    for (int t = 0; t < tcols; ++t) {
        double vabs = 0;
        for (int j = 0; j < nbv; ++j) vabs += std::fabs(v[(size_t)t * ldv + j]);
        for (int i = 0; i < ni; ++i) {
            double want = mv0[(size_t)t * ldm + i];
            for (int j = 0; j < nbv; ++j)
                want += ref_kernel(kernel, gamma, nu, &a.dense[(size_t)i * d], &b.dense[(size_t)(s0 + j) * d], d) * v[(size_t)t * ldv + j];
            double e = std::fabs(mv[(size_t)t * ldm + i] - want) / (vabs + 1e-300);
            merr = std::isnan(e) ? INFINITY : std::max(merr, e);
        }
        for (int i = ni; i < ldm; ++i) pad_ok &= std::isnan(mv[(size_t)t * ldm + i]);
    }
    CHECK(merr <= 1e-12, "exact_matvec_csr %s err/sum|v| %.3g", kname(kernel, nu), merr);
    CHECK(pad_ok, "exact_matvec_csr wrote outside its rows");
    worst_mv = std::max(worst_mv, merr);
    std::printf("  csr   ni=%d nj=%d d=%d density=%.2f %-9s: tile err %.2e, matvec (block view of %d rows) err/sum|v| %.2e\n", ni, nj, d,
                density, kname(kernel, nu), err, nbv, merr);
}

int main(int argc, char** argv) {
    // --quick (used with ThreadSanitizer, where every emulated thread is expensive): one
    // kernel id per shape; the barrier structure does not depend on the kernel id.
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    int passed = 0, failed = 0;
    auto tally = [&](int before) { (failures == before ? passed : failed) += 1; };
    struct K { int kernel; double nu; } kinds[] = {{0, 0}, {1, 0}, {2, 0.5}, {2, 1.5}, {2, 2.5}};
    unsigned seed = 11;
    if (quick) {
        int before = failures;
        dense_case(100, 70, 37, 2, 0, 0, 1.0, 1.0, seed++);
        dense_case(13, 130, 3, 1, 1, 0, 0.0, 1.0, seed++);
        csr_case(37, 45, 50, 0.2, 2, 1.5, seed++);
        dense_case(65, 33, 20, 1, 2, 2.5, 300.0, 1e-2, seed++);
        tally(before);
    } else {
        for (auto k : kinds) {
            int before = failures;
            dense_case(100, 70, 37, 2, k.kernel, k.nu, 1.0, 1.0, seed++);   // partial tiles, two d-chunks
            dense_case(13, 130, 3, 1, k.kernel, k.nu, 0.0, 1.0, seed++);    // tiny d, 3 column tiles
            csr_case(37, 45, 50, 0.2, k.kernel, k.nu, seed++);             // empty rows, partial tiles
            csr_case(130, 150, 20, 0.3, k.kernel, k.nu, seed++);           // several row blocks and column chunks
            tally(before);
        }
        // near points far from the origin: the f32 expansion would give 0 or garbage here
        for (auto k : kinds) { int before = failures; dense_case(65, 33, 20, 1, k.kernel, k.nu, 300.0, 1e-2, seed++); tally(before); }
    }
    { int before = failures; dense_case(5, 1, 1, 0, 0, 0, 0.0, 1.0, seed++); tally(before); }  // T = 0, 1 x 1 problem
    std::printf("exact: worst tile err %.2e, csr err %.2e, matvec err/sum|v| %.2e\n", worst_tile, worst_csr, worst_mv);
    std::printf("exact host emulation: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
