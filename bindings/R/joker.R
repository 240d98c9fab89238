# joker.R: large-scale kernel machines from R (base R only), over libjoker's C ABI through the
# .Call shim src/joker_r.c (built with R CMD SHLIB; see bindings/README.md).
#
#   source("bindings/R/joker.R")       # loads the shim from $JOKER_R_SHIM or beside this file
#   model <- joker_fit(x, y, loss = "l2-svc", C = 4, n_components = 1024)
#   labels <- predict(model, x_test)
#
# Every library error is an R error whose message starts with the C status name
# ("JOKER_STATUS_SHAPE_MISMATCH: ..."). Models are freed by the garbage collector, or at once
# with joker_free(model) (a freed model then gives JOKER_STATUS_NULL_POINTER). Ctrl-C during
# joker_fit stops the fit within an iteration and raises R's interrupt (no model is returned).

local({
  shim <- Sys.getenv("JOKER_R_SHIM")
  if (!nzchar(shim)) {
    here <- tryCatch(dirname(sys.frame(1)$ofile), error = function(e) ".")
    shim <- file.path(here, paste0("joker_r", .Platform$dynlib.ext))
  }
  if (!("joker_r" %in% names(getLoadedDLLs()))) dyn.load(shim)
})

.joker_codes <- list(
  loss = c("krr" = 0, "huber" = 1, "svr" = 2, "l1" = 3, "lp" = 4, "l1-svc" = 5, "l2-svc" = 6,
           "klr" = 7),
  kernel = c("gaussian" = 0, "laplacian" = 1, "matern12" = 2, "matern32" = 3, "matern52" = 4),
  bandwidth = c("median" = 0, "msd" = 1, "scale" = 2),
  precision = c("f32" = 0, "f64" = 1),
  task = c("auto" = 0, "classification" = 1, "regression" = 2),
  full_krr = c("none" = 0, "askotch" = 1, "skotch" = 2, "pcg" = 3),
  tr_model = c("gram" = 0, "kernel" = 1, "auto" = 2),
  features = c("rff" = 0, "nystrom" = 1),
  centers = c("uniform" = 0, "kmeans" = 1, "leverage" = 2),
  working_set = c("auto" = 0, "random" = 1, "shrinking" = 2, "greedy" = 3)
)

.joker_code <- function(table, key) {
  codes <- .joker_codes[[table]]
  if (!(key %in% names(codes)))
    stop(sprintf("JOKER_STATUS_INVALID_ARGUMENT: unknown %s '%s'; one of %s", table, key,
                 paste(names(codes), collapse = ", ")), call. = FALSE)
  codes[[key]]
}

# The library's message in R's words: a C setter becomes the joker_params argument
# ("(set with joker_params_set_max_memory)" -> "(set with max_memory =)"), joker_data_from_*
# the call to joker_fit, the Rust builder's .exact() n_components = NULL.
.joker_words <- function(msg) {
  special <- c(c = "C =", class_weights = "class_weight =", exact = "n_components = NULL")
  m <- gregexpr("joker_params_set_[a-z0-9_]+", msg)
  regmatches(msg, m) <- lapply(regmatches(msg, m), function(s) vapply(s, function(setter) {
    name <- sub("^joker_params_set_", "", setter)
    if (name %in% names(special)) special[[name]] else paste(name, "=")
  }, ""))
  msg <- gsub("joker_data_from_*", "joker_fit(x, y)", msg, fixed = TRUE)
  gsub("(.exact())", "(n_components = NULL)", msg, fixed = TRUE)
}

# .Call into the shim, with library errors in R's words (interrupts pass through).
.joker_call <- function(...)
  tryCatch(.Call(..., PACKAGE = "joker_r"),
           error = function(e) stop(.joker_words(conditionMessage(e)), call. = FALSE))

.joker_matrix <- function(x) {
  x <- as.matrix(x)
  storage.mode(x) <- "double"
  x
}

#' Version and capabilities: list(version, gpu_available, device_count).
joker_version <- function() .Call("R_joker_version", PACKAGE = "joker_r")

# The C ABI's code for a device choice: -1 "auto", -2 "cpu", N for "cuda:N" (or "cuda" = 0).
.joker_device_code <- function(device) {
  if (is.numeric(device) && length(device) == 1 && !is.na(device) && device >= 0 &&
      device == round(device)) return(device)
  if (is.character(device) && length(device) == 1) {
    d <- tolower(trimws(device))
    if (d == "auto") return(-1)
    if (d == "cpu") return(-2)
    if (d == "cuda") return(0)
    if (grepl("^cuda:[0-9]+$", d)) return(as.numeric(sub("^cuda:", "", d)))
  }
  stop(sprintf("JOKER_STATUS_INVALID_ARGUMENT: device %s: use \"auto\", \"cpu\", \"cuda\", \"cuda:N\" or N >= 0",
               deparse(device)), call. = FALSE)
}

#' Validated training parameters (each value is checked by the library at once). device:
#' "auto" (a usable GPU for f32 random-feature models, else the CPU; joker_info(model)$device
#' says which and why), "cpu", or "cuda" / "cuda:N" / N (fitting fails when it cannot be used).
#' nystrom_rank: a rank-r Nystrom preconditioner for the block solver's CG (0: none).
#' tr_model: the trust region's model curvature with random features, "gram" (the block Gram),
#' "kernel" (the exact kernel block, with the exact ratio test) or "auto" (the default: the
#' kernel model where it is predicted to be cheaper);
#' joker_info(model)$tr_model says which was used.
#' full_krr: "askotch", "skotch" or "pcg" solves exact kernel ridge regression with that method
#' instead of DBCD-TR (needs loss = "krr" and n_components = NULL), with krr_blocks blocks,
#' Nystrom rank krr_rank, stopping at relative residual krr_tol or after max_iter iterations;
#' krr_store_preconditioners keeps the block preconditioners instead of a fresh sketch per step.
#' block_size is capped at the number of samples by the library. max_memory: NULL (the default)
#' refuses a fit whose estimated memory exceeds 80% of the memory available when it starts
#' (JOKER_STATUS_MEMORY), 0 sets no limit, any other value is a limit in bytes. kernel_cache:
#' bytes the exact kernel matrix may take when it is formed once and kept (0: evaluated block
#' by block). features: "rff" (random Fourier features) or "nystrom" (a Nystrom map over
#' n_components centres chosen by centers: "leverage", "kmeans" or "uniform"; the model
#' predicts as an exact-kernel model over them). working_set: "auto" (shrinking where the
#' exact kernel is cached, random otherwise), "shrinking", "greedy" or "random". auto_exact:
#' the exact kernel instead of n_components random features where its matrix fits kernel_cache.
#' stall: also stop ("stalled") once the relative gap is within 10 tol and the dual objective
#' rose by less than tol / 10 of its size per pass over the last three passes (FALSE: run until
#' the gap reaches tol).
joker_params <- function(loss = "krr", loss_param = 0, kernel = "gaussian", gamma = NULL,
                         bandwidth = "median", C = NULL, lambda = NULL, n_components = 2048,
                         precision = "f32", task = "auto", standardize = TRUE,
                         normalize_target = TRUE, class_weight = NULL, block_size = 512,
                         max_iter = 10000, tol = 1e-3, time_limit = 0, check_every = 0,
                         seed = 42, max_memory = NULL, device = "auto", nystrom_rank = 0,
                         tr_model = "auto", full_krr = "none", krr_blocks = 10, krr_rank = 100, krr_tol = 1e-6,
                         krr_store_preconditioners = FALSE, kernel_cache = 2^31,
                         features = "rff", centers = "leverage", working_set = "auto",
                         auto_exact = FALSE, stall = TRUE) {
  p <- .Call("R_joker_params_new", PACKAGE = "joker_r")
  set <- function(name, value, param = 0)
    .joker_call("R_joker_params_set", p, name, as.double(value), as.double(param))
  set("loss", .joker_code("loss", loss), loss_param)
  set("kernel", .joker_code("kernel", kernel))
  if (!is.null(gamma)) set("gamma", gamma) else set("bandwidth", .joker_code("bandwidth", bandwidth))
  if (!is.null(C) && !is.null(lambda)) stop("give C or lambda, not both", call. = FALSE)
  if (!is.null(C)) set("C", C)
  if (!is.null(lambda)) set("lambda", lambda)
  if (is.null(n_components)) set("exact", 0) else set("n_components", n_components)
  set("precision", .joker_code("precision", precision))
  set("task", .joker_code("task", task))
  set("standardize", standardize)
  set("normalize_target", normalize_target)
  if (identical(class_weight, "balanced")) {
    set("class_weight", 1)
  } else if (!is.null(class_weight)) {
    .joker_call("R_joker_class_weights", p, as.double(names(class_weight)),
                as.double(unlist(class_weight)))
  }
  set("block_size", block_size)
  set("max_iter", max_iter)
  set("tol", tol)
  set("time_limit", time_limit)
  set("check_every", check_every)
  set("seed", seed)
  if (!is.null(max_memory)) set("max_memory", max_memory)  # NULL: the library's default limit
  set("device", .joker_device_code(device))
  set("nystrom_rank", nystrom_rank)
  set("kernel_cache", kernel_cache)
  set("tr_model", .joker_code("tr_model", tr_model))
  set("feature_map", .joker_code("features", features), .joker_code("centers", centers))
  set("working_set", .joker_code("working_set", working_set))
  set("auto_exact", as.logical(auto_exact))
  set("stall", as.logical(stall))
  .joker_call("R_joker_full_krr", p, as.double(.joker_code("full_krr", full_krr)),
              as.double(krr_blocks), as.double(krr_rank), as.double(max_iter), as.double(krr_tol),
              as.logical(krr_store_preconditioners))
  structure(list(ptr = p), class = "joker_params")
}

#' Trains a model on the rows of matrix x with labels y. Parameters are given as arguments
#' (see joker_params) or as params = joker_params(...). validation = list(x = , y = ) is scored
#' at every check (x with the columns of the training x, one label per row); progress is a
#' function of a named numeric vector (iter, epoch, seconds, gap, validation, residual: NaN
#' unless full KRR) that returns FALSE to stop. Ctrl-C stops the fit within an iteration and
#' raises R's interrupt condition.
joker_fit <- function(x, y, ..., params = NULL, sample_weight = NULL, validation = NULL,
                      progress = NULL) {
  if (is.null(params)) params <- joker_params(...)
  x <- .joker_matrix(x)
  vx <- vy <- NULL
  if (!is.null(validation)) {
    if (is.null(validation$x) || is.null(validation$y))
      stop("JOKER_STATUS_INVALID_ARGUMENT: validation must be list(x = , y = ) with labels",
           call. = FALSE)
    vx <- .joker_matrix(validation$x)
    vy <- as.double(validation$y)
    if (ncol(vx) != ncol(x))
      stop(sprintf("JOKER_STATUS_SHAPE_MISMATCH: validation: x has %d columns, the training x has %d",
                   ncol(vx), ncol(x)), call. = FALSE)
    if (length(vy) != nrow(vx))
      stop(sprintf("JOKER_STATUS_SHAPE_MISMATCH: validation: x has %d rows but y has %d values",
                   nrow(vx), length(vy)), call. = FALSE)
  }
  w <- if (is.null(sample_weight)) NULL else as.double(sample_weight)
  ptr <- .joker_call("R_joker_fit", params$ptr, x, as.double(y), w, vx, vy, progress,
                     environment())
  structure(list(ptr = ptr), class = "joker_model")
}

#' Predictions: type "response" (labels or values), "decision" (n x targets) or "prob"
#' (n x classes, KLR only).
predict.joker_model <- function(object, newdata, type = c("response", "decision", "prob"), ...) {
  type <- match.arg(type)
  x <- .joker_matrix(newdata)
  kind <- match(type, c("response", "decision", "prob")) - 1L
  out <- .joker_call("R_joker_predict", object$ptr, x, kind)
  if (type == "response") out else matrix(out, nrow = nrow(x), byrow = TRUE)
}

#' Accuracy (classifiers) or R^2 (regression) on labelled data.
joker_score <- function(model, x, y)
  .joker_call("R_joker_score", model$ptr, .joker_matrix(x), as.double(y))

joker_save <- function(model, path) invisible(.Call("R_joker_save", model$ptr, path, PACKAGE = "joker_r"))

joker_load <- function(path)
  structure(list(ptr = .Call("R_joker_load", path, PACKAGE = "joker_r")), class = "joker_model")

#' Model introspection: n_features, n_targets, n_classes, classes, n_components (0: exact
#' kernel), task, loss, kernel (as names), gamma, lambda, iterations, gap, stop_reason.
joker_info <- function(model) {
  i <- .Call("R_joker_info", model$ptr, PACKAGE = "joker_r")
  i$task <- names(.joker_codes$task)[i$task + 1]
  i$loss <- names(.joker_codes$loss)[i$loss + 1]
  i$kernel <- names(.joker_codes$kernel)[i$kernel + 1]
  i
}

#' Frees a model or parameters now.
joker_free <- function(x) invisible(.Call("R_joker_free", x$ptr, PACKAGE = "joker_r"))

print.joker_model <- function(x, ...) {
  i <- joker_info(x)
  cat(sprintf("joker model: %s, %s kernel, %d features, %s\n", i$loss, i$kernel,
              as.integer(i$n_features),
              if (i$n_components > 0) sprintf("M = %d", as.integer(i$n_components)) else "exact"))
  invisible(x)
}
