/*
 * joker.c: the .Call interface between the R package (R/*.R) and libjoker's C ABI.
 *
 * Handles are R external pointers with finalizers; R matrices (column-major) are copied into
 * row-major buffers allocated with R_alloc (reclaimed by R even when an error is raised).
 * Every library failure becomes an R error "JOKER_STATUS_...: message", raised only after
 * the handles made by the call are freed, so no R longjmp ever crosses the library.
 *
 * Ctrl-C during a fit: R's SIGINT handler only sets R_interrupts_pending while C code runs.
 * The fit gets that very variable as its interrupt flag (joker_params_set_interrupt), so it
 * stops within an iteration; the shim then frees what it made and lets R raise the interrupt.
 */
#include <string.h>

#include <R.h>
#include <R_ext/Rdynload.h>
#include <Rinternals.h>
/* after Rinternals.h: declares R_interrupts_pending and R_interrupts_suspended */
#include <R_ext/GraphicsEngine.h>

#include "joker.h"

/* Raises the R error for a failed call (the message is copied first). */
static void fail(JokerStatus st) {
    char msg[8192];
    strncpy(msg, joker_last_error(), sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    Rf_error("%s: %s", joker_status_name(st), msg);
}

static void check(JokerStatus st) {
    if (st != JOKER_STATUS_OK) fail(st);
}

/* ---- handles as external pointers ---- */

static void params_finalizer(SEXP p) {
    joker_params_free((JokerParams *)R_ExternalPtrAddr(p));
    R_ClearExternalPtr(p);
}

static void model_finalizer(SEXP p) {
    joker_model_free((JokerModel *)R_ExternalPtrAddr(p));
    R_ClearExternalPtr(p);
}

static SEXP wrap(void *h, SEXP tag, R_CFinalizer_t fin) {
    SEXP p = PROTECT(R_MakeExternalPtr(h, tag, R_NilValue));
    R_RegisterCFinalizerEx(p, fin, TRUE);
    UNPROTECT(1);
    return p;
}

/* The handle inside an external pointer; NULL after joker_free() (the library rejects it). */
static void *addr(SEXP p, const char *what) {
    if (TYPEOF(p) != EXTPTRSXP) Rf_error("%s is not a joker handle", what);
    return R_ExternalPtrAddr(p);
}

/* ---- data: an R matrix (n x d, column-major) copied row-major ---- */

/* Raises an R error for a malformed argument: called before any handle exists. */
static void check_matrix(SEXP x, SEXP y) {
    if (!Rf_isMatrix(x) || TYPEOF(x) != REALSXP) Rf_error("x must be a numeric (double) matrix");
    R_xlen_t n = INTEGER(Rf_getAttrib(x, R_DimSymbol))[0];
    if (y != R_NilValue && (TYPEOF(y) != REALSXP || XLENGTH(y) != n))
        Rf_error("JOKER_STATUS_SHAPE_MISMATCH: x has %ld rows but y has %ld values", (long)n,
                 (long)XLENGTH(y));
}

/* A data handle from a checked matrix (and labels, or R_NilValue). */
static JokerStatus make_data(SEXP x, SEXP y, JokerData **out) {
    SEXP dim = Rf_getAttrib(x, R_DimSymbol);
    size_t n = (size_t)INTEGER(dim)[0], d = (size_t)INTEGER(dim)[1];
    double *rows = n > 0 && d > 0 ? (double *)R_alloc(n * d, sizeof(double)) : NULL;
    const double *col = REAL(x);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) rows[i * d + j] = col[j * n + i];
    return joker_data_from_dense_f64(rows, n, d, y == R_NilValue ? NULL : REAL(y), out);
}

/* The library's message, copied (the buffer changes with the next call). */
static void copy_error(char *msg, size_t len) {
    strncpy(msg, joker_last_error(), len - 1);
    msg[len - 1] = '\0';
}

/* ---- parameters ---- */

SEXP R_joker_params_new(void) {
    JokerParams *p = NULL;
    check(joker_params_new(&p));
    return wrap(p, Rf_install("JokerParams"), params_finalizer);
}

/* One setter by name: value is a double (or integer code), param the loss parameter (or the
 * Nystrom centre rule of feature_map). */
SEXP R_joker_params_set(SEXP params, SEXP name, SEXP value, SEXP param) {
    JokerParams *p = (JokerParams *)addr(params, "params");
    const char *k = CHAR(STRING_ELT(name, 0));
    double v = Rf_asReal(value);
    JokerStatus st;
    if (!strcmp(k, "loss")) st = joker_params_set_loss(p, (int32_t)v, Rf_asReal(param));
    else if (!strcmp(k, "kernel")) st = joker_params_set_kernel(p, (int32_t)v);
    else if (!strcmp(k, "gamma")) st = joker_params_set_gamma(p, v);
    else if (!strcmp(k, "bandwidth")) st = joker_params_set_bandwidth(p, (int32_t)v);
    else if (!strcmp(k, "C")) st = joker_params_set_c(p, v);
    else if (!strcmp(k, "lambda")) st = joker_params_set_lambda(p, v);
    else if (!strcmp(k, "n_components")) {
        if (!(v >= 0)) Rf_error("JOKER_STATUS_INVALID_ARGUMENT: `n_components` must be >= 1");
        st = joker_params_set_n_components(p, (size_t)v);
    } else if (!strcmp(k, "exact")) st = joker_params_set_exact(p);
    else if (!strcmp(k, "precision")) st = joker_params_set_precision(p, (int32_t)v);
    else if (!strcmp(k, "task")) st = joker_params_set_task(p, (int32_t)v);
    else if (!strcmp(k, "standardize")) st = joker_params_set_standardize(p, v != 0);
    else if (!strcmp(k, "normalize_target")) st = joker_params_set_normalize_target(p, v != 0);
    else if (!strcmp(k, "class_weight")) st = joker_params_set_class_weight(p, (int32_t)v);
    else if (!strcmp(k, "block_size") || !strcmp(k, "max_iter") || !strcmp(k, "check_every") ||
             !strcmp(k, "seed") || !strcmp(k, "max_memory") || !strcmp(k, "nystrom_rank") ||
             !strcmp(k, "kernel_cache")) {
        if (!(v >= 0)) Rf_error("JOKER_STATUS_INVALID_ARGUMENT: `%s` must be >= 0", k);
        if (!strcmp(k, "block_size")) st = joker_params_set_block_size(p, (size_t)v);
        else if (!strcmp(k, "max_iter")) st = joker_params_set_max_iter(p, (size_t)v);
        else if (!strcmp(k, "check_every")) st = joker_params_set_check_every(p, (size_t)v);
        else if (!strcmp(k, "seed")) st = joker_params_set_seed(p, (uint64_t)v);
        else if (!strcmp(k, "nystrom_rank")) st = joker_params_set_nystrom_rank(p, (size_t)v);
        else if (!strcmp(k, "kernel_cache")) st = joker_params_set_kernel_cache(p, (size_t)v);
        else st = joker_params_set_max_memory(p, (size_t)v);
    } else if (!strcmp(k, "tol")) st = joker_params_set_tol(p, v);
    else if (!strcmp(k, "time_limit")) st = joker_params_set_time_limit(p, v);
    else if (!strcmp(k, "device")) st = joker_params_set_device(p, (int32_t)v);
    else if (!strcmp(k, "tr_model")) st = joker_params_set_tr_model(p, (int32_t)v);
    else if (!strcmp(k, "working_set")) st = joker_params_set_working_set(p, (int32_t)v);
    else if (!strcmp(k, "auto_exact")) st = joker_params_set_auto_exact(p, v != 0);
    else if (!strcmp(k, "stall")) st = joker_params_set_stall(p, v != 0);
    else if (!strcmp(k, "direct_krr")) st = joker_params_set_direct_krr(p, v != 0);
    else if (!strcmp(k, "newton_start")) st = joker_params_set_newton_start(p, v != 0);
    else if (!strcmp(k, "tr_norm")) st = joker_params_set_tr_norm(p, (int32_t)v);
    else if (!strcmp(k, "bias")) st = joker_params_set_bias(p, v);
    else if (!strcmp(k, "intercept")) st = joker_params_set_intercept(p, (int32_t)v);
    else if (!strcmp(k, "auto_loss")) st = joker_params_set_auto_loss(p, v != 0);
    else if (!strcmp(k, "probability")) st = joker_params_set_probability(p, v != 0);
    else if (!strcmp(k, "multiclass")) st = joker_params_set_multiclass(p, (int32_t)v);
    else if (!strcmp(k, "feature_map"))
        st = joker_params_set_feature_map(p, (int32_t)v, (int32_t)Rf_asReal(param));
    else Rf_error("unknown joker parameter `%s`", k);
    check(st);
    return R_NilValue;
}

/* Full KRR: method code, blocks, rank, iteration budget, residual tolerance, store flag. */
SEXP R_joker_full_krr(SEXP params, SEXP method, SEXP blocks, SEXP rank, SEXP max_iter, SEXP tol,
                      SEXP store) {
    JokerParams *p = (JokerParams *)addr(params, "params");
    double b = Rf_asReal(blocks), r = Rf_asReal(rank), m = Rf_asReal(max_iter);
    if (!(b >= 0) || !(r >= 0) || !(m >= 0))
        Rf_error("JOKER_STATUS_INVALID_ARGUMENT: `krr_blocks`, `krr_rank` and `max_iter` must be >= 0");
    int s = Rf_asLogical(store);
    if (s == NA_LOGICAL) Rf_error("JOKER_STATUS_INVALID_ARGUMENT: `krr_store_preconditioners` must be TRUE or FALSE");
    check(joker_params_set_full_krr(p, (int32_t)Rf_asReal(method), (size_t)b, (size_t)r, (size_t)m,
                                    Rf_asReal(tol), s));
    return R_NilValue;
}

/* The solver: DBCD-TR or a doubly stochastic one; 0 and NaN take the solver's defaults. */
SEXP R_joker_solver(SEXP params, SEXP solver, SEXP batch, SEXP block, SEXP theta, SEXP t0) {
    JokerParams *p = (JokerParams *)addr(params, "params");
    double b = Rf_asReal(batch), f = Rf_asReal(block);
    if (!(b >= 0) || !(f >= 0))
        Rf_error("JOKER_STATUS_INVALID_ARGUMENT: `batch_size` and `feature_block` must be >= 0");
    check(joker_params_set_solver(p, (int32_t)Rf_asReal(solver), (size_t)b, (size_t)f,
                                  Rf_asReal(theta), Rf_asReal(t0)));
    return R_NilValue;
}

SEXP R_joker_class_weights(SEXP params, SEXP labels, SEXP weights) {
    JokerParams *p = (JokerParams *)addr(params, "params");
    if (XLENGTH(labels) != XLENGTH(weights)) Rf_error("labels and weights differ in length");
    check(joker_params_set_class_weights(p, REAL(labels), REAL(weights), (size_t)XLENGTH(labels)));
    return R_NilValue;
}

/* ---- fit, with an R progress function ---- */

typedef struct {
    SEXP fn, env;
    const JokerProgress *p;
    int stop, failed;
} Progress;

/* Calls the R progress function; run under R_ToplevelExec so that no R error or longjmp can
 * leave it (and cross the library's frames). */
static void call_progress(void *data) {
    Progress *pr = data;
    const JokerProgress *p = pr->p;
    const char *nm[] = {"iter", "epoch", "seconds", "gap", "validation", "residual"};
    double val[] = {(double)p->iter, p->epoch, p->seconds, p->gap, p->validation, p->rel_residual};
    SEXP v = PROTECT(Rf_allocVector(REALSXP, 6));
    SEXP names = PROTECT(Rf_allocVector(STRSXP, 6));
    for (int i = 0; i < 6; i++) {
        REAL(v)[i] = val[i];
        SET_STRING_ELT(names, i, Rf_mkChar(nm[i]));
    }
    Rf_setAttrib(v, R_NamesSymbol, names);
    SEXP call = PROTECT(Rf_lang2(pr->fn, v));
    SEXP r = Rf_eval(call, pr->env);
    pr->stop = TYPEOF(r) == LGLSXP && XLENGTH(r) == 1 && LOGICAL(r)[0] == FALSE;
    UNPROTECT(3);
}

static int32_t on_progress(const JokerProgress *p, void *user) {
    Progress *pr = user;
    pr->p = p;
    pr->stop = 0;
    if (!R_ToplevelExec(call_progress, pr)) pr->failed = 1; /* an R error: stop the fit */
    return pr->stop || pr->failed;
}

SEXP R_joker_fit(SEXP params, SEXP x, SEXP y, SEXP weights, SEXP vx, SEXP vy, SEXP progress,
                 SEXP env) {
    JokerParams *p = (JokerParams *)addr(params, "params");
    if (weights != R_NilValue && TYPEOF(weights) != REALSXP)
        Rf_error("sample_weight must be numeric");
    check_matrix(x, y);
    if (vx != R_NilValue) check_matrix(vx, vy);
    JokerData *train = NULL, *val = NULL;
    JokerModel *model = NULL;
    char msg[8192];
    JokerStatus st = make_data(x, y, &train);
    if (st == JOKER_STATUS_OK && vx != R_NilValue) st = make_data(vx, vy, &val);
    Progress pr = {progress, env, NULL, 0, 0};
    /* Ctrl-C (R_interrupts_pending: an int R's handler sets) stops the fit; the flag is
     * removed before anything can longjmp. */
    if (st == JOKER_STATUS_OK) st = joker_params_set_interrupt(p, &R_interrupts_pending);
    if (st == JOKER_STATUS_OK) {
        st = joker_fit(p, train, weights == R_NilValue ? NULL : REAL(weights),
                       weights == R_NilValue ? 0 : (size_t)XLENGTH(weights), val,
                       progress == R_NilValue ? NULL : on_progress, &pr, &model);
        copy_error(msg, sizeof msg);
        joker_params_set_interrupt(p, NULL);
    } else {
        copy_error(msg, sizeof msg);
    }
    joker_data_free(train);
    joker_data_free(val);
    if (R_interrupts_pending && !R_interrupts_suspended) { /* Ctrl-C: R raises the interrupt */
        joker_model_free(model);
        R_CheckUserInterrupt();
        Rf_error("the fit was interrupted"); /* not reached */
    }
    if (st != JOKER_STATUS_OK) Rf_error("%s: %s", joker_status_name(st), msg);
    if (pr.failed) {
        joker_model_free(model);
        Rf_error("the progress function raised an error; the fit was stopped");
    }
    return wrap(model, Rf_install("JokerModel"), model_finalizer);
}

/* ---- model ---- */

SEXP R_joker_free(SEXP h) {
    if (TYPEOF(h) != EXTPTRSXP) Rf_error("not a joker handle");
    void *a = R_ExternalPtrAddr(h);
    if (R_ExternalPtrTag(h) == Rf_install("JokerModel")) check(joker_model_free(a));
    else check(joker_params_free(a));
    R_ClearExternalPtr(h);
    return R_NilValue;
}

/* kind: 0 predict, 1 decision values, 2 probabilities (JOKER_OUTPUT_*) */
SEXP R_joker_predict(SEXP model, SEXP x, SEXP kind) {
    JokerModel *m = (JokerModel *)addr(model, "model");
    int k = Rf_asInteger(kind);
    check_matrix(x, R_NilValue);
    JokerData *d = NULL;
    check(make_data(x, R_NilValue, &d));
    size_t need = 0;
    char msg[8192];
    JokerStatus st = joker_model_output_size(m, d, k, &need);
    if (st != JOKER_STATUS_OK) {
        copy_error(msg, sizeof msg);
        joker_data_free(d);
        Rf_error("%s: %s", joker_status_name(st), msg);
    }
    /* on an allocation error R jumps out here and `d` leaks: the only leak path */
    SEXP out = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)need));
    if (k == JOKER_OUTPUT_PREDICT) st = joker_model_predict(m, d, REAL(out), need);
    else if (k == JOKER_OUTPUT_DECISION) st = joker_model_decision_function(m, d, REAL(out), need);
    else st = joker_model_predict_proba(m, d, REAL(out), need);
    copy_error(msg, sizeof msg);
    joker_data_free(d);
    if (st != JOKER_STATUS_OK) Rf_error("%s: %s", joker_status_name(st), msg);
    UNPROTECT(1);
    return out;
}

SEXP R_joker_score(SEXP model, SEXP x, SEXP y) {
    JokerModel *m = (JokerModel *)addr(model, "model");
    check_matrix(x, y);
    JokerData *d = NULL;
    check(make_data(x, y, &d));
    double s = 0;
    char msg[8192];
    JokerStatus st = joker_model_score(m, d, &s);
    copy_error(msg, sizeof msg);
    joker_data_free(d);
    if (st != JOKER_STATUS_OK) Rf_error("%s: %s", joker_status_name(st), msg);
    return Rf_ScalarReal(s);
}

SEXP R_joker_save(SEXP model, SEXP path) {
    check(joker_model_save((JokerModel *)addr(model, "model"),
                           R_ExpandFileName(Rf_translateChar(STRING_ELT(path, 0)))));
    return R_NilValue;
}

SEXP R_joker_load(SEXP path) {
    JokerModel *m = NULL;
    check(joker_model_load(R_ExpandFileName(Rf_translateChar(STRING_ELT(path, 0))), &m));
    return wrap(m, Rf_install("JokerModel"), model_finalizer);
}

SEXP R_joker_info(SEXP model) {
    JokerModel *m = (JokerModel *)addr(model, "model");
    size_t nf = 0, nt = 0, nc = 0, mm = 0, it = 0;
    int32_t task = 0, loss = 0, kernel = 0, multiclass = 0, proba = 0;
    double gamma = 0, lambda = 0, gap = 0;
    const char *stop = NULL, *device = NULL, *tr_model = NULL;
    check(joker_model_n_features(m, &nf));
    check(joker_model_n_targets(m, &nt));
    check(joker_model_n_classes(m, &nc));
    check(joker_model_n_components(m, &mm));
    check(joker_model_iterations(m, &it));
    check(joker_model_task(m, &task));
    check(joker_model_loss(m, &loss));
    check(joker_model_kernel(m, &kernel));
    check(joker_model_gamma(m, &gamma));
    check(joker_model_lambda(m, &lambda));
    check(joker_model_gap(m, &gap));
    check(joker_model_stop_reason(m, &stop));
    check(joker_model_device(m, &device));
    check(joker_model_tr_model(m, &tr_model));
    check(joker_model_multiclass(m, &multiclass));
    check(joker_model_has_probabilities(m, &proba));
    SEXP classes = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)nc));
    check(joker_model_classes(m, REAL(classes), nc));
    const char *names[] = {"n_features", "n_targets", "n_classes", "n_components", "iterations",
                           "task",       "loss",      "kernel",    "gamma",        "lambda",
                           "gap",        "stop_reason", "classes",   "device",       "tr_model",
                           "multiclass", "probabilities"};
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 17));
    SEXP nm = PROTECT(Rf_allocVector(STRSXP, 17));
    SET_VECTOR_ELT(out, 0, Rf_ScalarReal((double)nf));
    SET_VECTOR_ELT(out, 1, Rf_ScalarReal((double)nt));
    SET_VECTOR_ELT(out, 2, Rf_ScalarReal((double)nc));
    SET_VECTOR_ELT(out, 3, Rf_ScalarReal((double)mm));
    SET_VECTOR_ELT(out, 4, Rf_ScalarReal((double)it));
    SET_VECTOR_ELT(out, 5, Rf_ScalarInteger(task));
    SET_VECTOR_ELT(out, 6, Rf_ScalarInteger(loss));
    SET_VECTOR_ELT(out, 7, Rf_ScalarInteger(kernel));
    SET_VECTOR_ELT(out, 8, Rf_ScalarReal(gamma));
    SET_VECTOR_ELT(out, 9, Rf_ScalarReal(lambda));
    SET_VECTOR_ELT(out, 10, Rf_ScalarReal(gap));
    SET_VECTOR_ELT(out, 11, Rf_mkString(stop));
    SET_VECTOR_ELT(out, 12, classes);
    SET_VECTOR_ELT(out, 13, Rf_mkString(device));
    SET_VECTOR_ELT(out, 14, Rf_mkString(tr_model));
    SET_VECTOR_ELT(out, 15, Rf_ScalarInteger(multiclass));
    SET_VECTOR_ELT(out, 16, Rf_ScalarLogical(proba != 0));
    for (int i = 0; i < 17; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
    Rf_setAttrib(out, R_NamesSymbol, nm);
    UNPROTECT(3);
    return out;
}

/* TRUE for an external pointer that still holds a handle: FALSE after joker_free() and for
 * one restored by readRDS() or load() (R does not serialize the address). */
SEXP R_joker_is_live(SEXP h) {
    return Rf_ScalarLogical(TYPEOF(h) == EXTPTRSXP && R_ExternalPtrAddr(h) != NULL);
}

SEXP R_joker_version(void) {
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 5));
    SET_VECTOR_ELT(out, 0, Rf_mkString(joker_version()));
    SET_VECTOR_ELT(out, 1, Rf_ScalarInteger((int)joker_abi_version()));
    SET_VECTOR_ELT(out, 2, Rf_ScalarInteger(JOKER_ABI_VERSION));
    SET_VECTOR_ELT(out, 3, Rf_ScalarLogical(joker_gpu_available() != 0));
    SET_VECTOR_ELT(out, 4, Rf_ScalarInteger(joker_device_count()));
    SEXP nm = PROTECT(Rf_allocVector(STRSXP, 5));
    SET_STRING_ELT(nm, 0, Rf_mkChar("version"));
    SET_STRING_ELT(nm, 1, Rf_mkChar("abi_version"));
    SET_STRING_ELT(nm, 2, Rf_mkChar("header_abi_version"));
    SET_STRING_ELT(nm, 3, Rf_mkChar("gpu_available"));
    SET_STRING_ELT(nm, 4, Rf_mkChar("device_count"));
    Rf_setAttrib(out, R_NamesSymbol, nm);
    UNPROTECT(2);
    return out;
}

static const R_CallMethodDef calls[] = {
    {"R_joker_params_new", (DL_FUNC)&R_joker_params_new, 0},
    {"R_joker_params_set", (DL_FUNC)&R_joker_params_set, 4},
    {"R_joker_class_weights", (DL_FUNC)&R_joker_class_weights, 3},
    {"R_joker_full_krr", (DL_FUNC)&R_joker_full_krr, 7},
    {"R_joker_solver", (DL_FUNC)&R_joker_solver, 6},
    {"R_joker_fit", (DL_FUNC)&R_joker_fit, 8},
    {"R_joker_free", (DL_FUNC)&R_joker_free, 1},
    {"R_joker_predict", (DL_FUNC)&R_joker_predict, 3},
    {"R_joker_score", (DL_FUNC)&R_joker_score, 3},
    {"R_joker_save", (DL_FUNC)&R_joker_save, 2},
    {"R_joker_load", (DL_FUNC)&R_joker_load, 1},
    {"R_joker_info", (DL_FUNC)&R_joker_info, 1},
    {"R_joker_version", (DL_FUNC)&R_joker_version, 0},
    {"R_joker_is_live", (DL_FUNC)&R_joker_is_live, 1},
    {NULL, NULL, 0}};

void R_init_joker(DllInfo *dll) {
    R_registerRoutines(dll, NULL, calls, NULL, NULL);
    R_useDynamicSymbols(dll, FALSE);
}
