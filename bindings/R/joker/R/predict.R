# Predictions and scores: new data laid out as the training data, outputs labelled.

# The library handle of a model, or an error saying why there is none.
.joker_handle <- function(object, arg = "object") {
  if (!inherits(object, "joker"))
    stop(sprintf("`%s` must be a joker model (from joker() or joker_load()), not %s", arg,
                 class(object)[1]), call. = FALSE)
  if (!.Call(C_R_joker_is_live, object$ptr))
    stop(sprintf("`%s` holds no library model: it was freed with joker_free(), or restored by readRDS() or load(), which cannot keep one (save models with joker_save())",
                 arg), call. = FALSE)
  object$ptr
}

# The feature matrix of new data: through the formula's terms for a formula model, else a
# numeric matrix whose columns are taken by name when it has all the training names.
.joker_newdata <- function(object, newdata, arg = "newdata") {
  if (!is.null(object$terms)) {
    if (!is.data.frame(newdata) && !is.list(newdata))
      stop(sprintf("`%s` must be a data frame with the predictors of the formula", arg),
           call. = FALSE)
    tt <- delete.response(object$terms)
    mf <- model.frame(tt, newdata, na.action = stats::na.pass, xlev = object$xlevels)
    x <- model.matrix(tt, mf, contrasts.arg = object$contrasts)
    storage.mode(x) <- "double"
    if (nrow(x) == 0) stop(sprintf("`%s` has no rows", arg), call. = FALSE)
    return(x)
  }
  x <- .joker_matrix(newdata, arg)
  if (!is.null(object$colnames) && !is.null(colnames(x)) &&
      all(object$colnames %in% colnames(x)))
    x <- x[, object$colnames, drop = FALSE]
  x
}

# Class values -> labels of a model with factor labels.
.joker_labels_of <- function(object, values)
  object$labels[match(values, object$classes)]

predict.joker <- function(object, newdata, type = c("response", "decision", "prob"), ...) {
  type <- match.arg(type)
  ptr <- .joker_handle(object)
  if (missing(newdata))
    stop("`newdata` is missing: a joker model keeps no training data, so give the rows to predict",
         call. = FALSE)
  x <- .joker_newdata(object, newdata)
  rows <- rownames(x)
  # Rows with missing values predict NA, as predict.lm() with na.pass; other non-finite
  # values are errors.
  ok <- complete.cases(x)
  .joker_finite(x[ok, , drop = FALSE], "newdata")
  kind <- match(type, c("response", "decision", "prob")) - 1L
  out <- if (any(ok)) .joker_call(C_R_joker_predict, ptr, x[ok, , drop = FALSE], kind) else NULL
  if (type == "response") {
    res <- rep(NA_real_, nrow(x))
    res[ok] <- out
    if (!is.null(object$levels))
      res <- factor(.joker_labels_of(object, res), levels = object$levels,
                    ordered = isTRUE(object$ordered))
    names(res) <- rows
    return(res)
  }
  k <- if (any(ok)) length(out) %/% sum(ok) else .joker_width(object, type)
  res <- matrix(NA_real_, nrow(x), k, dimnames = list(rows, NULL))
  if (any(ok)) res[ok, ] <- matrix(out, nrow = sum(ok), byrow = TRUE)
  labels <- if (is.null(object$levels)) format(object$classes, trim = TRUE)
            else .joker_labels_of(object, object$classes)
  ovo <- type == "decision" && length(labels) > 2 && joker_info(object)$multiclass == "ovo"
  if (ovo) {
    # a column per pair of classes, positive for the second
    pairs <- utils::combn(length(labels), 2)
    colnames(res) <- paste(labels[pairs[1, ]], labels[pairs[2, ]], sep = "/")
  } else if (type == "prob" || (length(labels) > 2 && k == length(labels))) {
    colnames(res) <- labels
  } else if (length(labels) == 2 && k == 1) {
    colnames(res) <- labels[2]  # positive decision values predict the second class
  }
  res
}

# Output columns when no row can be predicted: targets, or classes for probabilities.
.joker_width <- function(object, type) {
  info <- joker_info(object)
  if (type == "prob") {
    if (!isTRUE(info$probabilities))
      stop("JOKER_STATUS_UNSUPPORTED: probabilities need a kernel logistic regression model (loss = \"klr\") or a classifier trained with probability = TRUE",
           call. = FALSE)
    return(info$n_classes)
  }
  info$n_targets
}

joker_score <- function(object, x, y) {
  ptr <- .joker_handle(object)
  x <- .joker_newdata(object, x, "x")
  .joker_finite(x, "x")
  y <- .joker_response(y, nrow(x), "y")
  if (!is.null(object$levels)) {
    values <- object$classes[match(as.character(y), object$labels)]
    if (anyNA(values))
      stop(sprintf("`y` has labels the model does not know: %s",
                   paste(unique(as.character(y)[is.na(values)]), collapse = ", ")),
           call. = FALSE)
    y <- values
  } else if (is.factor(y)) {
    stop("`y` is a factor but the model has numeric labels", call. = FALSE)
  }
  .joker_call(C_R_joker_score, ptr, x, as.double(y))
}
