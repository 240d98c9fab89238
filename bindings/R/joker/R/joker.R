# Fitting: the joker() generic with a matrix (default) and a formula method, as e1071::svm and
# randomForest have, over one internal fit.

joker <- function(x, ...) UseMethod("joker")

joker.default <- function(x, y, ..., params = NULL, sample_weight = NULL, validation = NULL,
                          progress = NULL) {
  if (missing(y)) stop("`y` is missing: joker(x, y, ...) or joker(y ~ ., data, ...)", call. = FALSE)
  x <- .joker_matrix(x, "x")
  vx <- vy <- NULL
  if (!is.null(validation)) {
    if (!is.list(validation) || is.data.frame(validation) || is.null(validation$x) ||
        is.null(validation$y))
      stop("`validation` must be list(x = , y = ), with the columns of `x` and one label per row",
           call. = FALSE)
    vx <- .joker_matrix(validation$x, "validation$x")
    vy <- validation$y
  }
  call <- match.call()
  call[[1L]] <- as.name("joker")  # as the user would write it, not joker.default
  .joker_fit(x, y, list(...), params, sample_weight, vx, vy, progress, call)
}

joker.formula <- function(formula, data, ..., subset, na.action = stats::na.omit,
                          params = NULL, sample_weight = NULL, validation = NULL,
                          progress = NULL) {
  call <- match.call()
  call[[1L]] <- as.name("joker")
  # The model frame as lm() builds it: subset, na.action and the weights evaluated in `data`.
  mf <- match.call(expand.dots = FALSE)
  mf <- mf[c(1L, match(c("formula", "data", "subset", "na.action", "sample_weight"),
                       names(mf), 0L))]
  names(mf)[names(mf) == "sample_weight"] <- "weights"
  mf$drop.unused.levels <- TRUE
  mf[[1L]] <- quote(stats::model.frame)
  mf <- eval(mf, parent.frame())
  tt <- attr(mf, "terms")
  if (attr(tt, "response") == 0)
    stop("`formula` has no response: write it as y ~ x1 + x2 (or y ~ .)", call. = FALSE)
  # No intercept column: a kernel model has no use for a constant feature, and every level
  # of the first factor gets its own indicator.
  attr(tt, "intercept") <- 0L
  x <- model.matrix(tt, mf)
  if (ncol(x) == 0) stop("`formula` has no predictors", call. = FALSE)
  meta <- list(terms = tt, xlevels = .getXlevels(tt, mf), contrasts = attr(x, "contrasts"),
               na.action = attr(mf, "na.action"))
  attr(x, "assign") <- attr(x, "contrasts") <- NULL
  vx <- vy <- NULL
  if (!is.null(validation)) {
    if (!is.data.frame(validation))
      stop("`validation` must be a data frame with the variables of `formula`", call. = FALSE)
    vf <- model.frame(tt, validation, xlev = meta$xlevels, na.action = stats::na.fail)
    vx <- model.matrix(tt, vf, contrasts.arg = meta$contrasts)
    vy <- model.response(vf)
  }
  fit <- .joker_fit(x, model.response(mf), list(...), params, model.weights(mf), vx, vy,
                    progress, call)
  fit[names(meta)] <- meta
  fit
}

# A numeric matrix (doubles) from a matrix, data frame or vector; `arg` names it in errors.
.joker_matrix <- function(x, arg) {
  if (is.data.frame(x)) {
    bad <- !vapply(x, function(col) is.numeric(col) || is.logical(col), NA)
    if (any(bad))
      stop(sprintf("`%s` has non-numeric columns (%s): use the formula interface, joker(y ~ ., data), for factors",
                   arg, paste(names(x)[bad], collapse = ", ")), call. = FALSE)
    x <- as.matrix(x)
  } else if (is.null(dim(x)) && (is.numeric(x) || is.logical(x))) {
    x <- matrix(x, ncol = 1)  # a vector is one feature
  }
  if (!is.matrix(x) || !(is.numeric(x) || is.logical(x)))
    stop(sprintf("`%s` must be a numeric matrix or data frame, not %s", arg, class(x)[1]),
         call. = FALSE)
  if (nrow(x) == 0 || ncol(x) == 0)
    stop(sprintf("`%s` has %d rows and %d columns: it needs at least one of each", arg,
                 nrow(x), ncol(x)), call. = FALSE)
  storage.mode(x) <- "double"
  x
}

# Stops at the first missing or infinite entry, with its 1-based position.
.joker_finite <- function(x, arg) {
  if (!all(is.finite(x))) {
    at <- which(!is.finite(x), arr.ind = TRUE)
    at <- if (is.matrix(at)) at[1, ] else c(at[1], 1)
    v <- x[at[1], at[2]]
    stop(sprintf("`%s` has %s at row %d, column %d", arg,
                 if (is.na(v)) "a missing value (NA)" else "an infinite value", at[1], at[2]),
         call. = FALSE)
  }
  invisible(x)
}

# Labels as doubles for the library: a factor (or character or logical vector) becomes its
# level codes 1..K, numbers pass as they are.
.joker_response <- function(y, n, arg) {
  if (is.character(y) || is.logical(y)) y <- factor(y)
  if (!is.null(dim(y)) && !(is.matrix(y) && ncol(y) == 1))
    stop(sprintf("`%s` must be a vector with one label per row", arg), call. = FALSE)
  if (!(is.factor(y) || is.numeric(y)))
    stop(sprintf("`%s` must be a factor or numeric vector, not %s", arg, class(y)[1]),
         call. = FALSE)
  if (length(y) != n)
    stop(sprintf("`%s` has %d values, but there are %d rows", arg, length(y), n), call. = FALSE)
  if (anyNA(y)) stop(sprintf("`%s` has missing values (NA at %d)", arg, which(is.na(y))[1]),
                     call. = FALSE)
  y
}

.joker_fit <- function(x, y, dots, params, sample_weight, vx, vy, progress, call) {
  .joker_finite(x, "x")
  y <- .joker_response(y, nrow(x), "y")
  if (length(dots) && (is.null(names(dots)) || any(!nzchar(names(dots)))))
    stop("parameters must be named, e.g. joker(x, y, loss = \"klr\", C = 4)", call. = FALSE)
  unknown <- setdiff(names(dots), names(formals(joker_params)))
  if (length(unknown))
    stop(sprintf("unknown argument%s %s: the parameters are those of ?joker_params",
                 if (length(unknown) > 1) "s" else "", paste(unknown, collapse = ", ")),
         call. = FALSE)
  if (!is.null(params)) {
    if (!inherits(params, "joker_params"))
      stop("`params` must come from joker_params()", call. = FALSE)
    if (length(dots))
      stop("give parameters as arguments or as `params`, not both", call. = FALSE)
    args <- params$args
  } else {
    args <- dots
  }
  levels <- NULL
  if (is.factor(y)) {
    if (!is.null(args$task) && !identical(args$task, "auto") &&
        !identical(args$task, "classification"))
      stop("`y` is a factor but task is not \"classification\": give numeric labels for regression",
           call. = FALSE)
    if (nlevels(droplevels(y)) < 2)
      stop(sprintf("`y` has a single class (%s): classification needs two or more",
                   as.character(y[1])), call. = FALSE)
    args$task <- "classification"
    levels <- levels(y)
    # Class weights are named by level; the library knows the level codes.
    cw <- args$class_weight
    if (!is.null(cw) && !identical(cw, "balanced")) {
      codes <- match(names(cw), levels)
      if (is.null(names(cw)) || anyNA(codes))
        stop(sprintf("`class_weight` must be named by levels of `y` (%s)",
                     paste(levels, collapse = ", ")), call. = FALSE)
      names(cw) <- codes
      args$class_weight <- cw
    }
    ordered <- is.ordered(y)
    counts <- table(y, dnn = NULL)
    y <- as.integer(y)
  } else {
    counts <- NULL
    ordered <- FALSE
    if (!all(is.finite(y))) stop("`y` has an infinite value", call. = FALSE)
  }
  params <- do.call(joker_params, args)
  on.exit(joker_free(params))
  w <- NULL
  if (!is.null(sample_weight)) {
    if (!is.numeric(sample_weight) || length(sample_weight) != nrow(x) ||
        !all(is.finite(sample_weight)))
      stop(sprintf("`sample_weight` must be %d finite numbers, one per row", nrow(x)),
           call. = FALSE)
    w <- as.double(sample_weight)
  }
  if (!is.null(vx)) {
    if (ncol(vx) != ncol(x))
      stop(sprintf("`validation`: x has %d columns, the training x has %d", ncol(vx), ncol(x)),
           call. = FALSE)
    .joker_finite(vx, "validation x")
    vy <- .joker_response(vy, nrow(vx), "validation y")
    if (!is.null(levels)) {
      codes <- match(as.character(vy), levels)
      if (anyNA(codes))
        stop(sprintf("`validation` y has labels that `y` does not have: %s",
                     paste(unique(as.character(vy)[is.na(codes)]), collapse = ", ")),
             call. = FALSE)
      vy <- codes
    } else if (is.factor(vy)) {
      stop("`validation` y is a factor but `y` is numeric", call. = FALSE)
    }
    vy <- as.double(vy)
  }
  if (!is.null(progress) && !is.function(progress))
    stop("`progress` must be a function of the progress vector (or NULL)", call. = FALSE)
  ptr <- .joker_call(C_R_joker_fit, params$ptr, x, as.double(y), w, vx, vy, progress,
                     environment())
  model <- structure(list(ptr = ptr, call = call, levels = levels, ordered = ordered,
                          classes = NULL, labels = NULL, counts = counts, colnames = colnames(x),
                          nobs = nrow(x), params = params$args),
                     class = "joker")
  model$classes <- joker_info(model)$classes
  if (!is.null(levels)) model$labels <- levels[model$classes]
  model
}
