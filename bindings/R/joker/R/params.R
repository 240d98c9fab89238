# Training parameters, and the translation of library codes and messages into R's terms.

.joker_codes <- list(
  loss = c("krr" = 0, "huber" = 1, "svr" = 2, "l1" = 3, "lp" = 4, "l1-svc" = 5, "l2-svc" = 6,
           "klr" = 7),
  kernel = c("gaussian" = 0, "laplacian" = 1, "matern12" = 2, "matern32" = 3, "matern52" = 4),
  bandwidth = c("median" = 0, "msd" = 1, "scale" = 2, "auto" = 3),
  precision = c("f32" = 0, "f64" = 1),
  task = c("auto" = 0, "classification" = 1, "regression" = 2),
  full_krr = c("none" = 0, "askotch" = 1, "skotch" = 2, "pcg" = 3),
  tr_model = c("gram" = 0, "kernel" = 1, "auto" = 2),
  tr_norm = c("euclidean" = 0, "diagonal" = 1, "auto" = 2),
  features = c("rff" = 0, "nystrom" = 1),
  centers = c("uniform" = 0, "kmeans" = 1, "leverage" = 2),
  working_set = c("auto" = 0, "random" = 1, "shrinking" = 2, "greedy" = 3),
  multiclass = c("auto" = 0, "ovr" = 1, "ovo" = 2),
  solver = c("dbcd" = 0, "dsg" = 1, "udsg" = 2, "cdsg" = 3)
)

.joker_code <- function(table, key) {
  codes <- .joker_codes[[table]]
  if (!is.character(key) || length(key) != 1 || !(key %in% names(codes)))
    stop(sprintf("JOKER_STATUS_INVALID_ARGUMENT: unknown %s %s; one of %s", table,
                 paste(deparse(key), collapse = " "), paste(names(codes), collapse = ", ")),
         call. = FALSE)
  codes[[key]]
}

# The library's message in R's words: a C setter becomes the joker_params argument
# ("(set with joker_params_set_max_memory)" -> "(set with max_memory =)"), joker_data_from_*
# the call to joker(), the Rust builder's .exact() n_components = NULL.
.joker_words <- function(msg) {
  special <- c(c = "C =", class_weights = "class_weight =", exact = "n_components = NULL")
  m <- gregexpr("joker_params_set_[a-z0-9_]+", msg)
  regmatches(msg, m) <- lapply(regmatches(msg, m), function(s) vapply(s, function(setter) {
    name <- sub("^joker_params_set_", "", setter)
    if (name %in% names(special)) special[[name]] else paste(name, "=")
  }, ""))
  msg <- gsub("joker_data_from_*", "joker(x, y)", msg, fixed = TRUE)
  gsub("(.exact())", "(n_components = NULL)", msg, fixed = TRUE)
}

# .Call with library errors in R's words (interrupts pass through untouched).
.joker_call <- function(fn, ...)
  tryCatch(.Call(fn, ...),
           error = function(e) stop(.joker_words(conditionMessage(e)), call. = FALSE))

# The C ABI's code for a device choice: -1 "auto", -2 "cpu", N for "cuda:N" (or "cuda" = 0).
.joker_device_code <- function(device) {
  if (is.numeric(device) && length(device) == 1 && !is.na(device) && device >= 0 &&
      device == round(device)) return(device)
  if (is.character(device) && length(device) == 1 && !is.na(device)) {
    d <- tolower(trimws(device))
    if (d == "auto") return(-1)
    if (d == "cpu") return(-2)
    if (d == "cuda") return(0)
    if (grepl("^cuda:[0-9]+$", d)) return(as.numeric(sub("^cuda:", "", d)))
  }
  stop(sprintf("JOKER_STATUS_INVALID_ARGUMENT: device %s: use \"auto\", \"cpu\", \"cuda\", \"cuda:N\" or N >= 0",
               paste(deparse(device), collapse = " ")), call. = FALSE)
}

# A single number or flag, checked here so that NA, vectors and strings never reach C.
.joker_scalar <- function(value, name, logical = FALSE) {
  ok <- length(value) == 1 && !is.na(value) &&
    (if (logical) is.logical(value) else is.numeric(value) || is.logical(value))
  if (!ok)
    stop(sprintf("`%s` must be %s, not %s", name,
                 if (logical) "TRUE or FALSE" else "a single number",
                 paste(deparse(value), collapse = " ")), call. = FALSE)
  as.double(value)
}

joker_params <- function(loss = "krr", loss_param = 0, kernel = "gaussian", gamma = NULL,
                         bandwidth = "auto", C = NULL, lambda = NULL, n_components = "auto",
                         precision = "f32", task = "auto", standardize = TRUE,
                         normalize_target = TRUE, class_weight = NULL, block_size = NULL,
                         max_iter = 10000, tol = 1e-3, time_limit = 0, check_every = 0,
                         seed = 42, max_memory = NULL, device = "auto", nystrom_rank = 0,
                         tr_model = "auto", full_krr = "none", krr_blocks = 10,
                         krr_rank = 100, krr_tol = 1e-6, krr_store_preconditioners = FALSE,
                         kernel_cache = 2^31, features = "rff", centers = "leverage",
                         working_set = "auto", auto_exact = NULL, stall = TRUE,
                         multiclass = "auto", solver = "dbcd", batch_size = NULL,
                         feature_block = NULL, step_theta = NULL, step_t0 = NULL,
                         direct_krr = TRUE, tr_norm = "auto", bias = 0,
                         newton_start = TRUE, intercept = NULL, auto_loss = FALSE,
                         probability = FALSE) {
  args <- mget(names(formals()), environment())
  p <- .Call(C_R_joker_params_new)
  set <- function(name, value, param = 0, logical = FALSE)
    .joker_call(C_R_joker_params_set, p, name, .joker_scalar(value, name, logical),
                .joker_scalar(param, "loss_param"))
  set("loss", .joker_code("loss", loss), loss_param)
  set("kernel", .joker_code("kernel", kernel))
  if (!is.null(gamma)) set("gamma", gamma) else set("bandwidth", .joker_code("bandwidth", bandwidth))
  if (!is.null(C) && !is.null(lambda)) stop("give `C` or `lambda`, not both", call. = FALSE)
  if (!is.null(C)) set("C", C)
  if (!is.null(lambda)) set("lambda", lambda)
  # "auto", as `joker train` with nothing set: the exact kernel where its matrix fits the
  # kernel cache, else 2,048 features; a number: those features; NULL: the exact kernel
  if (identical(n_components, "auto")) {
    set("n_components", 2048)
    if (is.null(auto_exact)) auto_exact <- TRUE
  } else if (is.null(n_components)) {
    set("exact", 0)
  } else {
    set("n_components", n_components)
  }
  if (is.null(auto_exact)) auto_exact <- FALSE
  set("precision", .joker_code("precision", precision))
  set("task", .joker_code("task", task))
  set("standardize", standardize, logical = TRUE)
  set("normalize_target", normalize_target, logical = TRUE)
  if (identical(class_weight, "balanced")) {
    set("class_weight", 1)
  } else if (!is.null(class_weight)) {
    w <- unlist(class_weight)
    if (!is.numeric(w) || is.null(names(w)) || anyNA(suppressWarnings(as.double(names(w)))))
      stop("`class_weight` must be \"balanced\" or weights named by numeric class labels, e.g. c(\"-1\" = 1, \"1\" = 5)",
           call. = FALSE)
    .joker_call(C_R_joker_class_weights, p, as.double(names(w)), as.double(w))
  }
  if (!is.null(block_size)) set("block_size", block_size)
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
  set("auto_exact", auto_exact, logical = TRUE)
  set("stall", stall, logical = TRUE)
  set("direct_krr", direct_krr, logical = TRUE)
  set("newton_start", newton_start, logical = TRUE)
  set("tr_norm", .joker_code("tr_norm", tr_norm))
  set("multiclass", .joker_code("multiclass", multiclass))
  # NULL: the solver's default (0 and NaN in the C call)
  or <- function(v, name, default) if (is.null(v)) default else .joker_scalar(v, name)
  .joker_call(C_R_joker_solver, p, as.double(.joker_code("solver", solver)),
              or(batch_size, "batch_size", 0), or(feature_block, "feature_block", 0),
              or(step_theta, "step_theta", NaN), or(step_t0, "step_t0", NaN))
  .joker_call(C_R_joker_full_krr, p, as.double(.joker_code("full_krr", full_krr)),
              .joker_scalar(krr_blocks, "krr_blocks"), .joker_scalar(krr_rank, "krr_rank"),
              .joker_scalar(max_iter, "max_iter"), .joker_scalar(krr_tol, "krr_tol"),
              .joker_scalar(krr_store_preconditioners, "krr_store_preconditioners", TRUE) == 1)
  # last: the bias feature is checked against the map, the exact kernel and the solver, the
  # intercept against the loss and the solver (NULL: the library's choice, JOKER_INTERCEPT_AUTO)
  set("bias", bias)
  if (!is.null(intercept) && !(is.logical(intercept) && length(intercept) == 1 && !is.na(intercept)))
    stop("`intercept` must be TRUE, FALSE or NULL", call. = FALSE)
  set("intercept", if (is.null(intercept)) 2 else as.numeric(intercept))
  # the automatic loss against the task
  set("auto_loss", auto_loss, logical = TRUE)
  set("probability", probability, logical = TRUE)
  # args: the arguments as given, so that joker() can rebuild them (a factor response sets
  # task = "classification") and summary() can show them.
  structure(list(ptr = p, args = args), class = "joker_params")
}

print.joker_params <- function(x, ...) {
  shown <- vapply(x$args, function(v) if (is.null(v)) "NULL" else paste(format(v), collapse = ", "), "")
  cat("joker parameters:\n")
  print(noquote(shown), ...)
  invisible(x)
}
