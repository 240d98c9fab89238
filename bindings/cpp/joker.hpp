// joker.hpp: a header-only C++11 RAII wrapper over the C ABI of libjoker (include/joker.h).
//
// Handles are owned by move-only objects (Params, Data, Model) that free them in their
// destructors; every failing call throws joker::Error carrying the status and the library's
// message; outputs are std::vector<double>. A progress callback is any
// std::function<bool(const JokerProgress&)> (return false to stop); an exception thrown by it
// stops the fit and is rethrown by joker::fit (it never crosses the C boundary).
#ifndef JOKER_HPP
#define JOKER_HPP

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "joker.h"

namespace joker {

/// A failed call: the C status and the library's message.
class Error : public std::runtime_error {
  public:
    Error(JokerStatus status, const std::string &message)
        : std::runtime_error(std::string(joker_status_name(status)) + ": " + message),
          status_(status), message_(message) {}
    JokerStatus status() const noexcept { return status_; }
    const char *status_name() const noexcept { return joker_status_name(status_); }
    const std::string &message() const noexcept { return message_; }

  private:
    JokerStatus status_;
    std::string message_;
};

/// Throws joker::Error unless `status` is JOKER_STATUS_OK.
inline void check(JokerStatus status) {
    if (status != JOKER_STATUS_OK) throw Error(status, joker_last_error());
}

inline std::string version() { return joker_version(); }
inline bool gpu_available() { return joker_gpu_available() != 0; }

namespace detail {
template <class T, JokerStatus (*Free)(T *)> struct Deleter {
    void operator()(T *p) const noexcept { Free(p); }
};
}  // namespace detail

/// Training parameters (each setter validates at once and returns *this for chaining).
class Params {
  public:
    Params() {
        JokerParams *p = nullptr;
        check(joker_params_new(&p));
        h_.reset(p);
    }
    Params &loss(JokerLoss loss, double param = 0.0) {
        check(joker_params_set_loss(get(), loss, param));
        return *this;
    }
    Params &kernel(JokerKernel k) {
        check(joker_params_set_kernel(get(), k));
        return *this;
    }
    Params &gamma(double g) {
        check(joker_params_set_gamma(get(), g));
        return *this;
    }
    Params &bandwidth(JokerBandwidth b) {
        check(joker_params_set_bandwidth(get(), b));
        return *this;
    }
    Params &c(double c) {
        check(joker_params_set_c(get(), c));
        return *this;
    }
    Params &lambda(double l) {
        check(joker_params_set_lambda(get(), l));
        return *this;
    }
    Params &n_components(std::size_t m) {
        check(joker_params_set_n_components(get(), m));
        return *this;
    }
    Params &exact() {
        check(joker_params_set_exact(get()));
        return *this;
    }
    Params &precision(JokerPrecision p) {
        check(joker_params_set_precision(get(), p));
        return *this;
    }
    Params &task(JokerTask t) {
        check(joker_params_set_task(get(), t));
        return *this;
    }
    Params &standardize(bool yes) {
        check(joker_params_set_standardize(get(), yes ? 1 : 0));
        return *this;
    }
    Params &normalize_target(bool yes) {
        check(joker_params_set_normalize_target(get(), yes ? 1 : 0));
        return *this;
    }
    Params &block_size(std::size_t b) {
        check(joker_params_set_block_size(get(), b));
        return *this;
    }
    Params &max_iter(std::size_t n) {
        check(joker_params_set_max_iter(get(), n));
        return *this;
    }
    Params &tol(double t) {
        check(joker_params_set_tol(get(), t));
        return *this;
    }
    Params &check_every(std::size_t k) {
        check(joker_params_set_check_every(get(), k));
        return *this;
    }
    Params &seed(std::uint64_t s) {
        check(joker_params_set_seed(get(), s));
        return *this;
    }
    /// Rank of the Nystrom preconditioner of the block solver's CG (0: none).
    Params &nystrom_rank(std::size_t r) {
        check(joker_params_set_nystrom_rank(get(), r));
        return *this;
    }
    /// Full KRR by ASkotch, Skotch or PCG (needs the squared loss and `exact()` first).
    Params &full_krr(JokerKrrMethod method, std::size_t blocks = 10, std::size_t rank = 100,
                     std::size_t max_iter = 1000, double tol = 1e-6,
                     bool store_preconditioners = false) {
        check(joker_params_set_full_krr(get(), method, blocks, rank, max_iter, tol,
                                        store_preconditioners ? 1 : 0));
        return *this;
    }
    JokerParams *get() const noexcept { return h_.get(); }

  private:
    std::unique_ptr<JokerParams, detail::Deleter<JokerParams, joker_params_free>> h_;
};

/// Features (copied by the library) with optional labels.
class Data {
  public:
    /// Row-major n x d doubles; `y` may be null (no labels).
    static Data dense(const double *x, std::size_t n, std::size_t d, const double *y = nullptr) {
        JokerData *h = nullptr;
        check(joker_data_from_dense_f64(x, n, d, y, &h));
        return Data(h);
    }
    /// Row-major n x d floats.
    static Data dense(const float *x, std::size_t n, std::size_t d, const double *y = nullptr) {
        JokerData *h = nullptr;
        check(joker_data_from_dense_f32(x, n, d, y, &h));
        return Data(h);
    }
    /// `x` holds n x d values (n = x.size() / d); `y` is empty or holds n labels.
    static Data dense(const std::vector<double> &x, std::size_t d,
                      const std::vector<double> &y = std::vector<double>()) {
        std::size_t n = d ? x.size() / d : 0;
        if (d == 0 || n * d != x.size())
            throw Error(JOKER_STATUS_SHAPE_MISMATCH, "x.size() is not a multiple of d");
        if (!y.empty() && y.size() != n)
            throw Error(JOKER_STATUS_SHAPE_MISMATCH, "y.size() is not the number of rows");
        return dense(x.data(), n, d, y.empty() ? nullptr : y.data());
    }
    /// CSR: indptr has n + 1 entries; indices and values indptr[n] each.
    static Data csr(std::size_t n, std::size_t d, const std::size_t *indptr,
                    const std::uint32_t *indices, const double *values,
                    const double *y = nullptr) {
        JokerData *h = nullptr;
        check(joker_data_from_csr_f64(n, d, indptr, indices, values, y, &h));
        return Data(h);
    }
    std::size_t rows() const {
        std::size_t n = 0;
        check(joker_data_n_rows(get(), &n));
        return n;
    }
    std::size_t cols() const {
        std::size_t d = 0;
        check(joker_data_n_cols(get(), &d));
        return d;
    }
    JokerData *get() const noexcept { return h_.get(); }

  private:
    explicit Data(JokerData *h) : h_(h) {}
    std::unique_ptr<JokerData, detail::Deleter<JokerData, joker_data_free>> h_;
};

/// A trained model.
class Model {
  public:
    explicit Model(JokerModel *h) : h_(h) {}
    static Model load(const std::string &path) {
        JokerModel *h = nullptr;
        check(joker_model_load(path.c_str(), &h));
        return Model(h);
    }
    void save(const std::string &path) const { check(joker_model_save(get(), path.c_str())); }
    std::vector<double> predict(const Data &x) const {
        return output(JOKER_OUTPUT_PREDICT, x, joker_model_predict);
    }
    std::vector<double> decision_function(const Data &x) const {
        return output(JOKER_OUTPUT_DECISION, x, joker_model_decision_function);
    }
    std::vector<double> predict_proba(const Data &x) const {
        return output(JOKER_OUTPUT_PROBA, x, joker_model_predict_proba);
    }
    double score(const Data &labelled) const {
        double s = 0;
        check(joker_model_score(get(), labelled.get(), &s));
        return s;
    }
    std::size_t n_features() const { return size(joker_model_n_features); }
    std::size_t n_targets() const { return size(joker_model_n_targets); }
    std::size_t n_classes() const { return size(joker_model_n_classes); }
    std::size_t n_components() const { return size(joker_model_n_components); }
    std::vector<double> classes() const {
        std::vector<double> c(n_classes());
        check(joker_model_classes(get(), c.data(), c.size()));
        return c;
    }
    std::string stop_reason() const {
        const char *s = nullptr;
        check(joker_model_stop_reason(get(), &s));
        return s;
    }
    JokerModel *get() const noexcept { return h_.get(); }

  private:
    typedef JokerStatus (*OutputFn)(const JokerModel *, const JokerData *, double *, std::size_t);
    std::vector<double> output(JokerOutput kind, const Data &x, OutputFn fn) const {
        std::size_t need = 0;
        check(joker_model_output_size(get(), x.get(), kind, &need));
        std::vector<double> out(need);
        check(fn(get(), x.get(), out.data(), out.size()));
        return out;
    }
    std::size_t size(JokerStatus (*fn)(const JokerModel *, std::size_t *)) const {
        std::size_t v = 0;
        check(fn(get(), &v));
        return v;
    }
    std::unique_ptr<JokerModel, detail::Deleter<JokerModel, joker_model_free>> h_;
};

typedef std::function<bool(const JokerProgress &)> ProgressFn;

namespace detail {
struct Callback {
    const ProgressFn *fn;
    std::exception_ptr error;
};
inline int32_t progress_trampoline(const JokerProgress *p, void *user) {
    Callback *cb = static_cast<Callback *>(user);
    try {
        return (*cb->fn)(*p) ? 0 : 1;
    } catch (...) {  // an exception must not unwind into the library: stop and rethrow later
        cb->error = std::current_exception();
        return 1;
    }
}
}  // namespace detail

/// Trains a model. `sample_weight` is empty or holds one weight per training row;
/// `validation` may be null; `progress` may be empty.
inline Model fit(const Params &params, const Data &train,
                 const std::vector<double> &sample_weight = std::vector<double>(),
                 const Data *validation = nullptr, const ProgressFn &progress = ProgressFn()) {
    detail::Callback cb = {&progress, nullptr};
    JokerModel *h = nullptr;
    check(joker_fit(params.get(), train.get(), sample_weight.empty() ? nullptr : sample_weight.data(),
                    sample_weight.size(), validation ? validation->get() : nullptr,
                    progress ? detail::progress_trampoline : nullptr, &cb, &h));
    Model m(h);
    if (cb.error) std::rethrow_exception(cb.error);
    return m;
}

}  // namespace joker

#endif  // JOKER_HPP
