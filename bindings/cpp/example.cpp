// The C++ example: kernel logistic regression on covtype (1,000-row sample, or a synthetic set
// when ../shared/datasets is absent) through the RAII wrapper joker.hpp. Checks accuracy,
// probabilities, a save/load round trip, full KRR by Nystrom-PCG, exceptions with their
// statuses, and an exception thrown by the progress callback. Run by bindings/run-tests.sh (under valgrind).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "joker.hpp"

static int failures = 0;
static void expect(bool ok, const std::string &what) {
    if (!ok) {
        std::cerr << "FAIL " << what << "\n";
        failures++;
    }
}

// Reads "label, f1, f2, ..." lines into x (row-major) and y; returns the width (0 on failure).
static std::size_t read_csv(const std::string &path, std::vector<double> &x,
                            std::vector<double> &y) {
    std::ifstream in(path.c_str());
    std::string line;
    std::size_t d = 0;
    while (std::getline(in, line)) {
        std::vector<double> row;
        std::stringstream ss(line);
        std::string cell;
        while (std::getline(ss, cell, ',')) row.push_back(std::strtod(cell.c_str(), nullptr));
        if (row.size() < 2) continue;
        if (d == 0) d = row.size() - 1;
        if (row.size() - 1 != d) return 0;
        y.push_back(row[0]);
        x.insert(x.end(), row.begin() + 1, row.end());
    }
    return d;
}

static std::size_t synthetic(std::size_t n, unsigned long s, std::vector<double> &x,
                             std::vector<double> &y) {
    for (std::size_t i = 0; i < n; i++) {
        double r[4];
        for (double &v : r) {
            s = s * 6364136223846793005UL + 1442695040888963407UL;
            v = 4.0 * double(s >> 11) / 9007199254740992.0 - 2.0;
        }
        x.insert(x.end(), r, r + 4);
        y.push_back(r[0] * r[0] + r[1] - 1.0 > 0.0 ? 1.0 : -1.0);
    }
    return 4;
}

int main(int argc, char **argv) {
    const char *env = std::getenv("JOKER_DATA_DIR");
    std::string dir = argc > 1 ? argv[1] : env ? env : "../shared/datasets";
    std::vector<double> x, y, xt, yt;
    std::size_t d = read_csv(dir + "/covtype_small/covtype.1000.train.csv", x, y);
    double want = 0.70;
    if (d == 0 || read_csv(dir + "/covtype_small/covtype.1000.test.csv", xt, yt) != d) {
        std::cout << "data: synthetic (covtype not found under " << dir << ")\n";
        x.clear(), y.clear(), xt.clear(), yt.clear();
        d = synthetic(800, 1, x, y);
        synthetic(400, 2, xt, yt);
        want = 0.90;
    }
    std::cout << "joker " << joker::version() << ", " << y.size() << " training rows\n";
    try {
        joker::Params params;
        params.loss(JOKER_LOSS_KLR).c(4.0).n_components(256).block_size(128).max_iter(40);
        joker::Data train = joker::Data::dense(x, d, y), test = joker::Data::dense(xt, d, yt);
        int checks = 0;
        joker::Model model = joker::fit(params, train, {}, &test, [&](const JokerProgress &p) {
            checks++;
            std::cout << "  iter " << p.iter << ": gap " << p.gap << ", validation "
                      << p.validation << "\n";
            return true;
        });
        double acc = model.score(test);
        std::vector<double> proba = model.predict_proba(test), pred = model.predict(test);
        std::cout << "KLR test accuracy " << acc << ", P(class " << model.classes()[1]
                  << " | row 0) = " << proba[1] << "\n";
        expect(acc >= want, "accuracy");
        expect(checks > 0, "progress callback");
        bool sums = proba.size() == 2 * yt.size();
        for (std::size_t i = 0; sums && i < yt.size(); i++)
            sums = std::fabs(proba[2 * i] + proba[2 * i + 1] - 1.0) < 1e-12 &&
                   (proba[2 * i + 1] > 0.5) == (pred[i] == model.classes()[1]);
        expect(sums, "probabilities sum to 1 and agree with the labels");

        model.save("klr.joker.json");
        joker::Model back = joker::Model::load("klr.joker.json");
        expect(back.decision_function(test) == model.decision_function(test), "save/load");
        std::remove("klr.joker.json");

        // full KRR by Nystrom-PCG on a smooth target of the first 300 rows: converges to a
        // relative residual of 1e-9, which the progress callback sees
        std::size_t nr = 300;
        std::vector<double> xr(x.begin(), x.begin() + nr * d), yr(nr);
        for (std::size_t i = 0; i < nr; i++) yr[i] = std::sin(xr[i * d]) + 0.5 * xr[i * d + 1];
        joker::Params krr;
        krr.loss(JOKER_LOSS_KRR).exact().lambda(0.1).precision(JOKER_PRECISION_F64)
            .full_krr(JOKER_KRR_METHOD_PCG, 10, 50, 200, 1e-9);
        double residual = NAN;
        joker::Model full = joker::fit(krr, joker::Data::dense(xr, d, yr), {}, nullptr,
                                       [&](const JokerProgress &p) {
                                           residual = p.rel_residual;
                                           return true;
                                       });
        std::cout << "full KRR (PCG): stopped " << full.stop_reason() << ", residual "
                  << residual << "\n";
        expect(full.stop_reason() == "converged" && residual <= 1e-9, "full KRR converges");

        // errors become joker::Error with the C status
        try {
            double bad[2] = {1.0, NAN};
            joker::Data::dense(bad, 1, 2);
            expect(false, "NaN accepted");
        } catch (const joker::Error &e) {
            std::cout << "  ok: " << e.what() << "\n";
            expect(e.status() == JOKER_STATUS_NON_FINITE, "NaN status");
        }
        try {
            params.n_components(0);
            expect(false, "M = 0 accepted");
        } catch (const joker::Error &e) {
            std::cout << "  ok: " << e.what() << "\n";
            expect(e.status() == JOKER_STATUS_INVALID_ARGUMENT, "M = 0 status");
        }
        // an exception in the callback stops the fit and is rethrown here
        try {
            joker::fit(params, train, {}, nullptr, [](const JokerProgress &) -> bool {
                throw std::runtime_error("stop from the callback");
            });
            expect(false, "callback exception lost");
        } catch (const std::runtime_error &e) {
            std::cout << "  ok: rethrown: " << e.what() << "\n";
            expect(std::string(e.what()) == "stop from the callback", "callback exception");
        }
    } catch (const joker::Error &e) {
        std::cerr << "unexpected error: " << e.what() << "\n";
        return 1;
    }
    if (failures) return 1;
    std::cout << "all checks passed\n";
    return 0;
}
