// test_trsolve.cpp: runs tr_solve (cuda/trsolve.cu) under the host emulator (emu.h) on the
// block problems of cuda/hostemu/tr_vectors.txt and compares with the Rust solver's results
// stored there (tests/suite/tr_vectors.rs writes the file from src/solver/trust_region.rs and checks
// that it is current). Every loss, both radius rules, b = 37, 64 and 270 (> 256 threads),
// without and with the Nystrom metric (the factors the Rust solver used are in the file).
//
// tr_solve_f32 (K_BB stored in f32) runs on the first problem of the rank-8 matrix, whose K_BB
// entries are f32 numbers, and must reproduce tr_solve bit for bit.
// The first problem of each matrix runs as 2 identical columns (one thread block each), the
// others as one; workspace and stats are poisoned beforehand; the columns must agree bit for
// bit. Against the Rust solver (the rule of tr_solve_matches_the_host_solver in tests/suite/gpu.rs):
//   all problems: the objective decrease dJ = s.gbar0 + s K s / 2 + sum_i [f_i(a0_i + s_i) - f_i(a0_i)]
//     (s = alpha - alpha0, in f64 from loss.cuh) agrees: |dJ - dJ_rust| <= 1e-8 |dJ_rust| + cJ
//     (and dJ < 0), and gbar_out = gbar0 + K s to 1e-10 (1 + max |gbar|) (the bookkeeping);
//   well-conditioned problems (mu = lambda_min(K_BB) >= shift > 0):
//     tr_iters and accepted within 1 of the Rust solver's, CG iterations within 1 per
//     trust-region iteration, and the iterates either
//       (a) equal up to rounding: |x - x_rust| <= 1e-9 (1 + max |x_rust|) over alpha and gbar, or
//       (b) when both solves converged (every |v_i| < kkt_tol), certified:
//           ||alpha - alpha_rust||_2 <= (||v||_2 + ||v_rust||_2) / mu + 1e-9 (1 + max |alpha_rust|),
//     with cJ = max(||v||_2^2, ||v_rust||_2^2) / (2 mu) (0 for the others).
// v is the KKT residual of a result: v_i = g_i on the coordinates the solver leaves free (g the
// gradient with SVR's orthant term; 0 where a coordinate at a bound has its gradient pointing
// out), i.e. the smallest element of the subdifferential of the block objective J (box
// included) at that point. J is mu-strongly convex, so any point a with residual v lies within
// ||v||_2 / mu of the unique minimiser and J(a) - J* <= ||v||_2^2 / (2 mu): two results that both
// have small residuals are close whatever path they took. Why (b) is needed: summation orders
// alone (block reductions vs the CPU's 8-lane dots) keep the two solvers on one path (largest
// deviation 1.5e-14; (a)'s 1e-9 leaves room for CG to amplify rounding along one path), but a
// rounding tie can flip one discrete decision. With FMA contraction (nvcc's arithmetic, the
// second build of scripts/emu-cuda.sh) a coordinate that stops CG at its bound,
// clamp(s + tau d) with tau = (bound - s) / d, can land one ulp inside the bound instead of on
// it; it stays active and CG takes one more box exit in that trust-region iteration (case 11,
// the last iteration). One decision in one trust-region iteration moves the counts by at most
// one (one CG iteration per trust-region iteration), and the iterates by up to the residual of
// the solve: case 11 ends 1.9e-8 (of 1 + max) apart, ||alpha - alpha_rust||_2 = 2.6e-8 against
// a certified 1.2e-6 (largest |v_i| 7e-8), with the same counts and dJ equal to 6e-16.
// Build and run: scripts/emu-cuda.sh   (add --tsan for ThreadSanitizer)
#include "emu.h"
#include "../trsolve.cu"
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
// scripts/emu-cuda.sh builds this file twice: plain, and with FMA contraction as nvcc compiles
// (-mfma -ffp-contract=fast -DEMU_FP_CONTRACT on x86-64); the label goes into the summary line.
#ifdef EMU_FP_CONTRACT
#define FP_CONTRACTION "FMA contraction"
#else
#define FP_CONTRACTION "no contraction"
#endif
static int failures = 0;
#define CHECK(c, ...) do { if (!(c)) { ++failures; std::printf("FAIL: " __VA_ARGS__); std::printf("\n"); } } while (0)

struct Reader {
    std::ifstream in;
    explicit Reader(const char* path) : in(path) {}
    std::string word() {
        std::string w;
        while (in >> w) {
            if (w[0] == '#') { std::string rest; std::getline(in, rest); continue; }
            return w;
        }
        std::printf("FAIL: unexpected end of the vector file\n");
        std::exit(2);
    }
    void expect(const char* w) {
        std::string got = word();
        if (got != w) { std::printf("FAIL: vector file: expected '%s', got '%s'\n", w, got.c_str()); std::exit(2); }
    }
    double num() { return std::strtod(word().c_str(), nullptr); }
    long long integer() { return std::strtoll(word().c_str(), nullptr, 10); }
    std::vector<double> vec(const char* name, int n) {
        expect(name);
        std::vector<double> v(n);
        for (auto& x : v) x = num();
        return v;
    }
};

// K_BB = A A^T / denom + shift I; mu: a lower bound on its smallest eigenvalue (shift less the
// rounding of the divisions, |error| <= b max |K| 2^-53 per row by Gershgorin).
struct Mat { int b; std::vector<double> k; double mu; };

// The KKT residual v of a result (see the header): the solver's own gradient, orthant and
// frozen tests (trsolve.cu, solve_column) evaluated in f64 at (a, gbar); returns ||v||_2 and
// sets vmax = max |v_i|.
static double kkt_residual(double& vmax, int loss, double param, int b, const std::vector<double>& y, const std::vector<double>& lam,
                           const std::vector<double>& eps, const std::vector<double>& a, const std::vector<double>& gbar) {
    const double l1 = joker::loss_l1_weight(loss, param);
    double sq = 0;
    vmax = 0;
    for (int i = 0; i < b; ++i) {
        const joker::Coord c = {y[i], lam[i], eps[i]};
        double lo, hi;
        joker::loss_bounds(loss, param, c, lo, hi);
        const double gs = gbar[i] + joker::loss_grad(loss, param, a[i], c);
        double lo_s = lo - a[i], hi_s = hi - a[i], gi = gs;
        if (l1 > 0.0) {
            const double sigma = a[i] > 0.0 ? 1.0 : a[i] < 0.0 ? -1.0 : gs < -l1 ? 1.0 : gs > l1 ? -1.0 : 0.0;
            gi = gs + l1 * sigma;
            if (sigma > 0.0) lo_s = std::max(lo_s, -a[i]);
            else if (sigma < 0.0) hi_s = std::min(hi_s, -a[i]);
            else { lo_s = 0.0; hi_s = 0.0; }
        }
        const double tol = 1e-13 * (1.0 + std::fabs(a[i]));
        const bool frozen = (lo_s >= -tol && gi > 0.0) || (hi_s <= tol && gi < 0.0) || (lo_s >= -tol && hi_s <= tol);
        if (!frozen) { sq += gi * gi; vmax = std::max(vmax, std::fabs(gi)); }
    }
    return std::sqrt(sq);
}

static double dJ(int loss, double param, const std::vector<double>& k, int b, const std::vector<double>& y,
                 const std::vector<double>& lam, const std::vector<double>& eps, const std::vector<double>& a0,
                 const std::vector<double>& g0, const std::vector<double>& a1) {
    std::vector<double> s(b);
    for (int i = 0; i < b; ++i) s[i] = a1[i] - a0[i];
    double sum = 0, sks = 0;
    for (int i = 0; i < b; ++i) {
        joker::Coord c = {y[i], lam[i], eps[i]};
        sum += s[i] * g0[i] + joker::loss_dual_change(loss, param, a0[i], s[i], c);
        double ks = 0;
        for (int j = 0; j < b; ++j) ks += k[(size_t)i * b + j] * s[j];
        sks += s[i] * ks;
    }
    return sum + 0.5 * sks;
}

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    // usage: test_trsolve [vector file] [case indices to run (default: all)]
    const char* path = argc > 1 ? argv[1] : "cuda/hostemu/tr_vectors.txt";
    std::vector<int> only;
    for (int a = 2; a < argc; ++a) only.push_back(std::atoi(argv[a]));
    Reader rd(path);
    if (!rd.in) { std::printf("FAIL: cannot open %s\n", path); return 2; }
    rd.expect("matrices");
    int nm = (int)rd.integer();
    std::vector<Mat> mats;
    for (int q = 0; q < nm; ++q) {
        rd.expect("matrix");
        int b = (int)rd.integer(), m = (int)rd.integer();
        double denom = rd.num(), shift = rd.num();
        std::vector<long long> a((size_t)b * m);
        for (auto& x : a) x = rd.integer();
        Mat M{b, std::vector<double>((size_t)b * b), 0.0};
        for (int i = 0; i < b; ++i)
            for (int j = 0; j < b; ++j) {
                long long dot = 0;
                for (int c = 0; c < m; ++c) dot += a[(size_t)i * m + c] * a[(size_t)j * m + c];
                M.k[(size_t)i * b + j] = (double)dot / denom;
                if (i == j) M.k[(size_t)i * b + j] += shift;
            }
        double kmax = 0;
        for (double x : M.k) kmax = std::max(kmax, std::fabs(x));
        M.mu = shift - b * kmax * 0x1p-53;
        mats.push_back(std::move(M));
    }
    rd.expect("cases");
    int ncases = (int)rd.integer(), passed = 0, failed = 0;
    double worst_alpha = 0, worst_same = 0, worst_dj = 0, worst_cert = 0;
    int same_steps = 0, wc_cases = 0, certified = 0;
    for (int ci = 0; ci < ncases; ++ci) {
        const int before = failures;
        rd.expect("case");
        rd.integer();
        std::string name = rd.word();
        int loss = (int)rd.integer();
        double param = rd.num();
        int mi = (int)rd.integer();
        bool wc = rd.integer() != 0;
        rd.expect("params");
        double delta_max = rd.num(), eta = rd.num();
        int max_iter = (int)rd.integer(), max_cg = (int)rd.integer();
        double rtol = rd.num(), kkt_tol = rd.num(), kkt_rtol = rd.num();
        int rule = (int)rd.integer();
        const Mat& M = mats[mi];
        const int b = M.b;
        auto y = rd.vec("y", b), lam = rd.vec("lam", b), eps = rd.vec("eps", b);
        auto a0 = rd.vec("alpha0", b), g0 = rd.vec("gbar0", b);
        rd.expect("nystrom");
        const int rank = (int)rd.integer();
        std::vector<double> nyu(1, NAN), nylam(1, NAN);  // never read when rank = 0
        if (rank > 0) {
            nyu = rd.vec("nyu", b * rank);
            nylam = rd.vec("nylam", rank);
        }
        rd.expect("diagonal");
        const double shift = rd.num();
        auto ar = rd.vec("alpha", b), gr = rd.vec("gbar", b);
        rd.expect("stats");
        int st_r[3];
        for (int& x : st_r) x = (int)rd.integer();

        if (!only.empty() && std::find(only.begin(), only.end(), ci) == only.end()) continue;
        // the first case of each matrix runs as two identical columns, the others as one
        const int T = (ci % 8 == 0) ? 2 : 1;
        std::vector<double> Y, L, E, A, G;
        for (int t = 0; t < T; ++t) {
            Y.insert(Y.end(), y.begin(), y.end()); L.insert(L.end(), lam.begin(), lam.end());
            E.insert(E.end(), eps.begin(), eps.end()); A.insert(A.end(), a0.begin(), a0.end());
            G.insert(G.end(), g0.begin(), g0.end());
        }
        std::vector<double> work((size_t)T * tr_work_stride(b, rank), NAN);
        std::vector<int> iwork((size_t)T * 2 * b, -7), stats(3 * T, -1);
        launch([&] { tr_solve(M.k.data(), b, loss, param, Y.data(), L.data(), E.data(), A.data(), G.data(), delta_max, eta,
                              max_iter, max_cg, rtol, kkt_tol, kkt_rtol, rule, nyu.data(), nylam.data(), rank, shift, work.data(), iwork.data(), stats.data()); },
               {(unsigned)T, 1, 1}, {TR_THREADS, 1, 1});
        bool cols_equal = T == 1 || (std::memcmp(A.data(), A.data() + b, b * 8) == 0 && std::memcmp(G.data(), G.data() + b, b * 8) == 0 &&
                                     stats[0] == stats[3] && stats[1] == stats[4] && stats[2] == stats[5]);
        CHECK(cols_equal, "case %d %s: the two identical columns differ", ci, name.c_str());
        std::vector<double> ad(A.begin(), A.begin() + b), gd(G.begin(), G.begin() + b);
        // tr_solve_f32 on a K_BB whose entries are f32 numbers must match tr_solve bit for bit
        bool f32_exact = true;
        for (double x : M.k) f32_exact &= (double)(float)x == x;
        if (f32_exact && ci % 8 == 0) {
            std::vector<float> kf(M.k.begin(), M.k.end());
            std::vector<double> A1(a0), G1(g0);
            std::vector<double> w1(tr_work_stride(b, rank), NAN);
            std::vector<int> iw1((size_t)2 * b, -7), st1(3, -1);
            launch([&] { tr_solve_f32(kf.data(), b, loss, param, y.data(), lam.data(), eps.data(), A1.data(), G1.data(), delta_max, eta,
                                      max_iter, max_cg, rtol, kkt_tol, kkt_rtol, rule, nyu.data(), nylam.data(), rank, shift, w1.data(), iw1.data(), st1.data()); },
                   {1, 1, 1}, {TR_THREADS, 1, 1});
            bool same32 = std::memcmp(A1.data(), ad.data(), b * 8) == 0 && std::memcmp(G1.data(), gd.data(), b * 8) == 0 &&
                          st1[0] == stats[0] && st1[1] == stats[1] && st1[2] == stats[2];
            CHECK(same32, "case %d %s: tr_solve_f32 differs from tr_solve on an f32-exact K_BB", ci, name.c_str());
            std::printf("  case %2d: tr_solve_f32 on the f32-exact K_BB: %s\n", ci, same32 ? "bit-identical to tr_solve" : "DIFFERENT");
        }

        double amax = 0, gmax = 0, xerr = 0, kerr = 0, dist2 = 0;
        for (int i = 0; i < b; ++i) {
            amax = std::max(amax, std::fabs(ar[i])); gmax = std::max(gmax, std::fabs(gr[i]));
            xerr = std::max(xerr, std::max(std::fabs(ad[i] - ar[i]), std::fabs(gd[i] - gr[i])));
            dist2 += (ad[i] - ar[i]) * (ad[i] - ar[i]);
            double ks = g0[i];
            for (int j = 0; j < b; ++j) ks += M.k[(size_t)i * b + j] * (ad[j] - a0[j]);
            kerr = std::max(kerr, std::fabs(ks - gd[i]));
            if (std::isnan(ad[i]) || std::isnan(gd[i])) xerr = kerr = dist2 = INFINITY;
        }
        const double xscale = 1 + std::max(amax, gmax);
        xerr /= xscale;
        CHECK(kerr <= 1e-10 * (1 + gmax), "case %d %s: gbar out of sync with K alpha: %.3g", ci, name.c_str(), kerr);
        // the KKT residuals and what they certify (well-conditioned problems only)
        double vd_max, vr_max;
        const double vd = kkt_residual(vd_max, loss, param, b, y, lam, eps, ad, gd);
        const double vr = kkt_residual(vr_max, loss, param, b, y, lam, eps, ar, gr);
        const double mu = wc ? M.mu : 0.0;
        const double cert_x = wc ? (vd + vr) / mu + 1e-9 * (1 + amax) : 0.0;
        const double cert_j = wc ? std::max(vd * vd, vr * vr) / (2 * mu) : 0.0;
        double dj_d = dJ(loss, param, M.k, b, y, lam, eps, a0, g0, ad);
        double dj_r = dJ(loss, param, M.k, b, y, lam, eps, a0, g0, ar);
        double djerr = std::fabs(dj_d - dj_r) / std::fabs(dj_r);
        CHECK(dj_d < 0 && std::fabs(dj_d - dj_r) <= 1e-8 * std::fabs(dj_r) + cert_j, "case %d %s: objective decrease %.17g vs Rust %.17g (certified %.3g)",
              ci, name.c_str(), dj_d, dj_r, cert_j);
        bool same = stats[0] == st_r[0] && stats[1] == st_r[1];
        const char* path = "";
        if (wc) {
            ++wc_cases;
            same_steps += same;
            CHECK(std::abs(stats[0] - st_r[0]) <= 1 && std::abs(stats[1] - st_r[1]) <= 1, "case %d %s: tr_iters/accepted %d/%d vs Rust %d/%d", ci,
                  name.c_str(), stats[0], stats[1], st_r[0], st_r[1]);
            CHECK(std::abs(stats[2] - st_r[2]) <= std::max(stats[0], st_r[0]), "case %d %s: cg_iters %d vs Rust %d", ci, name.c_str(), stats[2], st_r[2]);
            const double dist = std::sqrt(dist2);
            if (xerr <= 1e-9) {
                path = ", same path";
                worst_same = std::max(worst_same, xerr);
            } else {
                path = ", certified";
                ++certified;
                worst_cert = std::max(worst_cert, dist / cert_x);
                std::printf("  case %2d: iterates differ by %.2e of 1 + max; ||alpha - alpha_rust||_2 = %.2e, certified bound %.2e"
                            " = (||v|| %.2e + ||v_rust|| %.2e) / mu %.3g + 1e-9 (1 + max |alpha|); largest |v_i| %.2e, Rust %.2e\n",
                            ci, xerr, dist, cert_x, vd, vr, mu, vd_max, vr_max);
                CHECK(vd_max < kkt_tol && vr_max < kkt_tol, "case %d %s: iterates %.3g apart (of 1 + max) and a solve has not converged", ci,
                      name.c_str(), xerr);
                CHECK(dist <= cert_x, "case %d %s: iterates %.3g apart, more than the KKT residuals certify (%.3g)", ci, name.c_str(), dist, cert_x);
            }
            worst_alpha = std::max(worst_alpha, xerr);
        }
        worst_dj = std::max(worst_dj, djerr);
        if (rank > 0) std::printf("  (Nystrom metric, rank %d)\n", rank);
        if (shift > 0.0) std::printf("  (diagonal norm)\n");
        std::printf("  case %2d %-6s b=%3d %s: tr/acc/cg %2d/%2d/%3d (Rust %2d/%2d/%3d), alpha/gbar err %.1e, kkt ||v|| %.1e, dJ %.6e rel err %.1e%s\n",
                    ci, name.c_str(), b, wc ? "wc " : "ill", stats[0], stats[1], stats[2], st_r[0], st_r[1], st_r[2], xerr, vd, dj_r, djerr, path);
        (failures == before ? passed : failed) += 1;
    }
    std::printf("trsolve (TR_THREADS = %d, %s): well-conditioned cases: same tr/accepted counts on %d of %d; iterates equal up to rounding"
                " on %d (worst alpha/gbar err %.2e), certified by the KKT residuals on %d (worst distance / bound %.2e); largest alpha/gbar"
                " deviation %.2e; worst dJ rel err %.2e (all cases)\n",
                TR_THREADS, FP_CONTRACTION, same_steps, wc_cases, wc_cases - certified, worst_same, certified, worst_cert, worst_alpha, worst_dj);
    std::printf("trsolve host emulation: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
