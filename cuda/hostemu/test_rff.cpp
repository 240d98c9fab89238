// test_rff.cpp: runs every kernel of cuda/rff.cu under the host emulator (emu.h) and compares
// with a direct CPU computation that builds Phi explicitly from the same generator functions:
//   rff_weights, rff_features: bit-exact;  K_BB: |err| <= 1e-5 max|K| and exactly symmetric;
//   g, theta update, predict: f64, |err| <= 1e-12 * (length of the sum).
// Sizes are chosen to hit partial row tiles, partial feature chunks, d > 32 (two d-chunks),
// S > number of chunks (empty M-slices), T = 0, and all three kernels (Matern nu = 0.5, 2.5).
// Build and run: scripts/emu-cuda.sh   (add --tsan for ThreadSanitizer)
#include "emu.h"
#include "../rff.cu"
#include <cstdio>
#include <random>
static int failures = 0;
#define CHECK(c, ...) do { if (!(c)) { ++failures; std::printf("FAIL: " __VA_ARGS__); std::printf("\n"); } } while (0)

struct Ref { std::vector<float> W, bv, Phi; };
Ref reference(const std::vector<float>& X, int n, int d, int m, unsigned long long seed, int kernel, double gamma, double nu) {
    Ref r; r.W.resize((size_t)m * d); r.bv.resize(m); r.Phi.resize((size_t)n * m);
    uint32_t k0, k1; key_of(seed, k0, k1);
    double ws = rff_wscale(kernel, gamma);
    for (int j = 0; j < m; ++j) {
        double rf = rff_row_factor(kernel, j, nu, k0, k1);
        r.bv[j] = rff_phase(j, k0, k1);
        for (int k = 0; k < d; ++k) r.W[(size_t)j * d + k] = rff_weight(kernel, j, k, ws, rf, k0, k1);
    }
    float fs = rff_feature_scale(m);
    for (int i = 0; i < n; ++i) for (int j = 0; j < m; ++j) {
        float z = r.bv[j];
        for (int k = 0; k < d; ++k) z = std::fma(r.W[(size_t)j * d + k], X[(size_t)i * d + k], z);
        r.Phi[(size_t)i * m + j] = fs * cosf(z);
    }
    return r;
}

void run_case(int b, int d, int m, int T, int S, int kernel, double nu) {
    std::printf("case b=%d d=%d m=%d T=%d S=%d kernel=%d nu=%.1f\n", b, d, m, T, S, kernel, nu);
    std::mt19937_64 rng(b * 1000003ull + d * 101 + m + kernel);
    std::normal_distribution<double> N01;
    unsigned long long seed = 0x9E3779B97F4A7C15ull ^ (unsigned long long)(m * 7 + kernel);
    double gamma = 1.0 / (2.0 * d);
    std::vector<float> X((size_t)b * d); for (auto& v : X) v = (float)N01(rng);
    std::vector<double> theta((size_t)m * T); for (auto& v : theta) v = N01(rng);
    std::vector<double> delta((size_t)b * T); for (auto& v : delta) v = N01(rng);
    Ref R = reference(X, b, d, m, seed, kernel, gamma, nu);

    // weights / features: bit-exact against the reference
    std::vector<float> W((size_t)m * d), bv(m);
    launch([&] { rff_weights(m, d, seed, kernel, gamma, nu, W.data(), bv.data()); }, {3, 1, 1}, {256, 1, 1});
    CHECK(std::memcmp(W.data(), R.W.data(), W.size() * 4) == 0 && std::memcmp(bv.data(), R.bv.data(), bv.size() * 4) == 0, "rff_weights");
    int nf = std::min(b, 5);
    std::vector<float> phi((size_t)nf * m);
    launch([&] { rff_features(X.data(), nf, d, m, seed, kernel, gamma, nu, phi.data()); }, {2, 1, 1}, {256, 1, 1});
    CHECK(std::memcmp(phi.data(), R.Phi.data(), phi.size() * 4) == 0, "rff_features");

    // block gram + reduce
    int nt = (b + 127) / 128, ntiles = nt * (nt + 1) / 2;
    std::vector<float> kpart((size_t)S * ntiles * 16384, NAN);
    std::vector<double> gpart((size_t)S * T * b, NAN);
    launch([&] { rff_block_gram(X.data(), theta.data(), b, d, m, T, seed, kernel, gamma, nu, kpart.data(), gpart.data()); }, {(unsigned)ntiles, (unsigned)S, 1}, {256, 1, 1});
    std::vector<float> K((size_t)b * b, NAN); std::vector<double> g((size_t)b * T, NAN);
    launch([&] { rff_block_gram_reduce(kpart.data(), gpart.data(), b, T, S, K.data(), g.data()); }, {7, 1, 1}, {256, 1, 1});
    double kerr = 0, kmax = 0; bool sym = true;
    for (int i = 0; i < b; ++i) for (int j = 0; j < b; ++j) {
        double s = 0; for (int q = 0; q < m; ++q) s += (double)R.Phi[(size_t)i * m + q] * R.Phi[(size_t)j * m + q];
        kerr = std::max(kerr, std::fabs(s - K[(size_t)i * b + j])); kmax = std::max(kmax, std::fabs(s));
        if (K[(size_t)i * b + j] != K[(size_t)j * b + i]) sym = false;
    }
    CHECK(kerr <= 1e-5 * std::max(1.0, kmax) && !std::isnan(kerr), "K_BB max err %.3g (max |K| %.3g)", kerr, kmax);
    CHECK(sym, "K_BB not exactly symmetric");
    double gerr = 0;
    for (int t = 0; t < T; ++t) for (int i = 0; i < b; ++i) {
        double s = 0; for (int q = 0; q < m; ++q) s += (double)R.Phi[(size_t)i * m + q] * theta[(size_t)t * m + q];
        gerr = std::max(gerr, std::fabs(s - g[(size_t)t * b + i]));
    }
    CHECK(gerr <= 1e-12 * m && !std::isnan(gerr), "g max err %.3g", gerr);
    std::printf("  K err %.2e (|K|max %.2f), g err %.2e\n", kerr, kmax, gerr);

    // update theta
    std::vector<double> th2 = theta;
    launch([&] { rff_update_theta(X.data(), delta.data(), b, d, m, T, seed, kernel, gamma, nu, th2.data()); }, {(unsigned)((m + 31) / 32), 1, 1}, {256, 1, 1});
    double terr = 0;
    for (int t = 0; t < T; ++t) for (int j = 0; j < m; ++j) {
        double s = theta[(size_t)t * m + j]; for (int i = 0; i < b; ++i) s += (double)R.Phi[(size_t)i * m + j] * delta[(size_t)t * b + i];
        terr = std::max(terr, std::fabs(s - th2[(size_t)t * m + j]));
    }
    CHECK(terr <= 1e-12 * b && !std::isnan(terr), "theta update max err %.3g", terr);

    // predict (on X_B itself)
    std::vector<double> out((size_t)b * T, NAN);
    launch([&] { rff_predict(X.data(), theta.data(), b, d, m, T, seed, kernel, gamma, nu, out.data()); }, {(unsigned)((b + 255) / 256), 1, 1}, {256, 1, 1});
    double perr = 0;
    for (int t = 0; t < T; ++t) for (int i = 0; i < b; ++i) perr = std::max(perr, std::fabs(g[(size_t)t * b + i] - out[(size_t)t * b + i]));
    CHECK(perr <= 1e-12 * m && !std::isnan(perr), "predict vs g max err %.3g", perr);
    std::printf("  theta err %.2e, predict err %.2e\n", terr, perr);
}

int main() {
    int passed = 0, failed = 0;
    auto run = [&](int b, int d, int m, int T, int S, int kernel, double nu) {
        const int before = failures;
        run_case(b, d, m, T, S, kernel, nu);
        (failures == before ? passed : failed) += 1;
    };
    run(300, 7, 100, 2, 2, 0, 0);    // partial tiles, partial chunk, tiny d
    run(130, 40, 70, 3, 3, 1, 0);    // d > 32 (two d-chunks), Laplacian
    run(257, 28, 64, 1, 1, 2, 2.5);  // Matern 2.5, S = 1
    run(128, 33, 40, 1, 5, 2, 0.5);  // S > number of chunks (empty splits), Matern 0.5
    run(5, 3, 33, 0, 2, 0, 0);       // T = 0, tiny b
    std::printf("rff host emulation: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
