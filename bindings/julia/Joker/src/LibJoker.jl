# LibJoker: large-scale kernel machines from Julia, over the C ABI of libjoker (ccall).
#
# A line-by-line mirror of the tested low-level layer of the Python package
# (bindings/python/joker/core.py): the same entry points, argument names, defaults, checks and
# error messages. Julia cannot be installed on the project's build machines, so this package is
# NOT run in CI; keep it in step with the Python module when either changes.
#
# The package lives in bindings/julia/Joker; its module is LibJoker because it defines the
# function `Joker` (Python's `joker.Joker`), which a module named Joker could not.
#
#   using Pkg; Pkg.develop(path="bindings/julia/Joker"); using LibJoker
#   model = fit(Joker("l2-svc"; c=4.0, n_components=1024), X, y)   # Python: joker.Joker(...).fit(X, y)
#   labels = predict(model, X_test)                                # Python: model.predict(X_test)
#
# The library is found as by the Python module in a source checkout, when the package is
# loaded (not when it is precompiled): $JOKER_LIB, else target/release or target/debug of
# $CARGO_TARGET_DIR or of this repository, else "libjoker.so.0" on the system's library path.
# `ccall` names the library by its SONAME, libjoker.so.0: once the file found is loaded, the
# system's loader resolves that name to it. When it cannot be loaded, loading the package
# throws an error listing the places looked at.
#
# Differences from Python: Ctrl-C is not turned into a stop during `fit` (Julia delivers it
# when the call returns): stop a fit with `fit(...; interrupt=flag)` and `set!(flag)` from a
# task on another thread (julia -t 2). Models and parameters copy with `copy`/`deepcopy`
# (through the model file) but do not serialize.
module LibJoker

using Libdl

export Joker, JokerError, Params, Model, Interrupt, set!, clear!, is_set, fit, predict,
    decision_function, predict_proba, score, save, load, version, gpu_available, device_count

# The SONAME: what every ccall names; __init__ loads the file that answers to it.
const libjoker = "libjoker.so.0"

"The cargo target directories searched, in order (as the Python `_target_dirs`)."
function target_dirs()
    root = normpath(joinpath(@__DIR__, "..", "..", "..", ".."))
    targets = Tuple{String,String}[]
    haskey(ENV, "CARGO_TARGET_DIR") && push!(targets, ("\$CARGO_TARGET_DIR", ENV["CARGO_TARGET_DIR"]))
    push!(targets, ("the repository's target/", joinpath(root, "target")))
    targets
end

function find_library()
    haskey(ENV, "JOKER_LIB") && return ENV["JOKER_LIB"]
    for (_, t) in target_dirs(), profile in ("release", "debug")
        p = joinpath(t, profile, "libjoker.so")
        isfile(p) && return p
    end
    return libjoker
end

# The handle of the library loaded (kept open for the session).
const handle = Ref{Ptr{Cvoid}}(C_NULL)

function __init__()
    path = find_library()
    h = Libdl.dlopen(path; throw_error=false)
    if h === nothing
        lines = ["cannot load libjoker, the C library of LibJoker: $path",
            "Where it is looked for, in order (the first place set or found is loaded):",
            "  \$JOKER_LIB: " * (haskey(ENV, "JOKER_LIB") ? ENV["JOKER_LIB"] : "not set")]
        for (what, t) in target_dirs(), profile in ("release", "debug")
            p = joinpath(t, profile, "libjoker.so")
            push!(lines, "  $what $profile: $p: " * (isfile(p) ? "exists" : "not found"))
        end
        push!(lines, "  the system's loader (LD_LIBRARY_PATH, ld.so.conf): $libjoker",
            "To fix it: build the library in the repository with `cargo build --release`, or " *
            "set JOKER_LIB=/path/to/libjoker.so, or install it where the system's loader " *
            "finds libjoker.so.0 (bindings/install.sh PREFIX).")
        error(join(lines, "\n"))
    end
    handle[] = h
    nothing
end

struct JokerError <: Exception
    code::Int32
    status::String
    message::String
end
JokerError(code::Integer, message::AbstractString) = JokerError(
    code, unsafe_string(ccall((:joker_status_name, libjoker), Cstring, (Int32,), code)), message)
Base.showerror(io::IO, e::JokerError) = print(io, e.status, ": ", e.message)

const NULL_POINTER = 1
const INVALID_ARGUMENT = 3
const SHAPE_MISMATCH = 5
const INVALID_LABELS = 8

# The C setters' names in library messages, as the Joker arguments they stand for (as the
# Python `_SETTER_ARGS`).
const SETTER_ARGS = Dict("lambda" => "lambda_=", "class_weights" => "class_weight=",
    "exact" => "n_components=nothing", "loss" => "loss=", "bandwidth" => "bandwidth=",
    "interrupt" => "fit(interrupt=)")
# Names that mean one thing wherever the library says them; per call: what the library calls an
# argument (or a setter) there.
const GLOBAL_NAMES = Dict("lambda" => "`lambda_`")
const LOSS_NAMES = Dict("delta" => "`loss_param` (the huber delta)",
    "epsilon" => "`loss_param` (the svr epsilon)", "p" => "`loss_param` (the lp exponent p)",
    "joker_params_set_loss" => "loss_param=")
const FULL_KRR_NAMES = Dict("blocks" => "`krr_blocks`", "rank" => "`krr_rank`",
    "tol" => "`krr_tol`", "method" => "`full_krr`", "joker_params_set_tol" => "krr_tol=",
    "joker_params_set_full_krr" => "full_krr=, krr_blocks=, krr_rank= or krr_tol=")
const FIT_NAMES = Dict("train" => "`X`", "validation" => "`validation`")
const DATA_NAMES = Dict("data" => "`X`")

"The library's message in this module's words (as the Python `_python_words`)."
function julia_words(message::AbstractString, names=Dict{String,String}())
    for (c_name, name) in names
        startswith(c_name, "joker_") && (message = replace(message, c_name => name))
    end
    message = replace(message, r"joker_params_set_(\w+)" =>
        s -> get(SETTER_ARGS, s[18:end], s[18:end] * "="))
    message = replace(message, r"joker_data_from_\w*\*?" => "fit(X, y)")
    message = replace(message, "(.exact())" => "(n_components=nothing)")
    for (c_name, name) in merge(GLOBAL_NAMES, names)
        startswith(c_name, "joker_") || (message = replace(message, "`$c_name`" => name))
    end
    message
end

last_error(code::Integer, names=Dict{String,String}()) = JokerError(code,
    julia_words(unsafe_string(ccall((:joker_last_error, libjoker), Cstring, ())), names))

function check(code::Integer, names=Dict{String,String}())
    code != 0 && throw(last_error(code, names))
    nothing
end

const LOSSES = Dict("krr" => 0, "huber" => 1, "svr" => 2, "l1" => 3, "lp" => 4, "l1-svc" => 5,
    "l2-svc" => 6, "klr" => 7)
const KERNELS = Dict("gaussian" => 0, "laplacian" => 1, "matern12" => 2, "matern32" => 3,
    "matern52" => 4)
const BANDWIDTHS = Dict("median" => 0, "msd" => 1, "scale" => 2, "auto" => 3)
const PRECISIONS = Dict("f32" => 0, "f64" => 1)
const TASKS = Dict(nothing => 0, "classification" => 1, "regression" => 2)
const KRR_METHODS = Dict(nothing => 0, "askotch" => 1, "skotch" => 2, "pcg" => 3)
const TR_MODELS = Dict("gram" => 0, "kernel" => 1, "auto" => 2)
const TR_NORMS = Dict("euclidean" => 0, "diagonal" => 1, "auto" => 2)
const FEATURE_MAPS = Dict("rff" => 0, "nystrom" => 1)
const CENTERS = Dict("uniform" => 0, "kmeans" => 1, "leverage" => 2)
const WORKING_SETS = Dict("auto" => 0, "random" => 1, "shrinking" => 2, "greedy" => 3)
const MULTICLASS = Dict("auto" => 0, "ovr" => 1, "ovo" => 2)
const SOLVERS = Dict("dbcd" => 0, "dsg" => 1, "udsg" => 2, "cdsg" => 3)
const OUTPUT = Dict(:predict => 0, :decision_function => 1, :predict_proba => 2)

"The library version, for example \"0.1.0\"."
version() = unsafe_string(ccall((:joker_version, libjoker), Cstring, ()))
"Whether a GPU can be used (from the library's device probe; the CUDA path has not been run on a GPU yet)."
gpu_available() = ccall((:joker_gpu_available, libjoker), Int32, ()) != 0
"The number of usable CUDA devices (0 without a driver or a device)."
device_count() = Int(ccall((:joker_device_count, libjoker), Int32, ()))

# ---------------------------------------------------------------------------------------------
# data: a JokerData handle holding a copy of X (and y)

mutable struct Data
    handle::Ptr{Cvoid}
    n_rows::Int
    n_cols::Int
end

"""Copies a dense matrix (n x d, any real element type; Float32 stays Float32) and labels;
`names`: what the messages call X and y."""
function Data(X::AbstractMatrix, y=nothing; names=("X", "y"))
    n_rows = size(X, 1)
    yy = nothing
    if y !== nothing
        yy = Vector{Float64}(vec(y))
        length(yy) == n_rows || throw(JokerError(SHAPE_MISMATCH,
            "$(names[1]) has $n_rows rows but $(names[2]) has $(length(yy)) values"))
    end
    out = Ref{Ptr{Cvoid}}(C_NULL)
    ypt = yy === nothing ? Ptr{Float64}(C_NULL) : pointer(yy)
    if eltype(X) == Float32
        rows = Matrix{Float32}(permutedims(X))  # d x n column-major = n x d row-major
        GC.@preserve rows yy check(ccall((:joker_data_from_dense_f32, libjoker), Int32,
            (Ptr{Float32}, Csize_t, Csize_t, Ptr{Float64}, Ptr{Ptr{Cvoid}}),
            rows, size(X, 1), size(X, 2), ypt, out))
    else
        rows = Matrix{Float64}(permutedims(X))
        GC.@preserve rows yy check(ccall((:joker_data_from_dense_f64, libjoker), Int32,
            (Ptr{Float64}, Csize_t, Csize_t, Ptr{Float64}, Ptr{Ptr{Cvoid}}),
            rows, size(X, 1), size(X, 2), ypt, out))
    end
    d = Data(out[], n_rows, size(X, 2))
    finalizer(close, d)
end

Data(X::AbstractVector, y=nothing; names=("X", "y")) = throw(JokerError(SHAPE_MISMATCH,
    "$(names[1]) must be a 2-d array (rows x features), got 1-d"))

function Base.close(d::Data)
    if d.handle != C_NULL
        check(ccall((:joker_data_free, libjoker), Int32, (Ptr{Cvoid},), d.handle))
        d.handle = C_NULL
    end
    nothing
end

function with_data(f, X, y=nothing)
    d = Data(X, y)
    try
        return f(d)
    finally
        close(d)
    end
end

# The validation set of a fit, with the training set's column count (as the Python
# `_validation_data`; dense only here, so the counts must be equal).
function validation_data(validation, train::Data)
    (validation isa Union{Tuple,AbstractVector} && length(validation) == 2) ||
        throw(JokerError(INVALID_ARGUMENT, "validation must be a pair (X_val, y_val)"))
    X_val, y_val = validation
    y_val === nothing && throw(JokerError(INVALID_LABELS,
        "validation: y_val is nothing; a validation set needs labels"))
    val = Data(X_val, y_val; names=("validation: X_val", "y_val"))
    if val.n_cols != train.n_cols
        close(val)
        throw(JokerError(SHAPE_MISMATCH,
            "validation: X_val has $(val.n_cols) columns, the training X has $(train.n_cols)"))
    end
    val
end

# ---------------------------------------------------------------------------------------------
# estimator and model

"A snapshot passed to the `progress` callback of `fit` (the C struct JokerProgress)."
struct CProgress
    iter::Csize_t
    epoch::Float64
    seconds::Float64
    primal::Float64
    dual::Float64
    gap::Float64
    validation::Float64
    accepted::Csize_t
    rel_residual::Float64
end

struct Progress
    iter::Int
    epoch::Float64
    seconds::Float64
    primal::Float64
    dual::Float64
    gap::Float64
    validation::Union{Float64,Nothing}  # nothing: no validation set
    accepted::Int
    rel_residual::Union{Float64,Nothing}  # nothing: not a full-KRR fit
end
Progress(p::CProgress) = Progress(p.iter, p.epoch, p.seconds, p.primal, p.dual, p.gap,
    isnan(p.validation) ? nothing : p.validation, p.accepted,
    isnan(p.rel_residual) ? nothing : p.rel_residual)

mutable struct Params
    handle::Ptr{Cvoid}
    args::NamedTuple  # the arguments of Joker: copies and interruptible fits rebuild from them
end

"""
    Interrupt()

A flag that stops a running fit (as the Python `joker.Interrupt`): pass it as
`fit(...; interrupt=flag)` and call `set!(flag)` from a task on another thread. The library
reads it once per iteration (full KRR: at its checks) and the fit returns the model so far,
with `stop_reason(model) == "cancelled"`. A flag already set stops the next fit at its first
iteration; `clear!(flag)` re-arms it.
"""
struct Interrupt
    value::Base.RefValue{Int32}  # what the library reads: keep it alive during the fit
end
Interrupt() = Interrupt(Ref{Int32}(0))
set!(i::Interrupt) = (i.value[] = 1; nothing)
clear!(i::Interrupt) = (i.value[] = 0; nothing)
is_set(i::Interrupt) = i.value[] != 0

# ccall needs literal types: one small wrapper per setter
for (name, T) in [(:joker_params_set_kernel, Int32), (:joker_params_set_gamma, Float64),
    (:joker_params_set_bandwidth, Int32), (:joker_params_set_lambda, Float64),
    (:joker_params_set_c, Float64), (:joker_params_set_n_components, Csize_t),
    (:joker_params_set_precision, Int32), (:joker_params_set_task, Int32),
    (:joker_params_set_standardize, Int32), (:joker_params_set_normalize_target, Int32),
    (:joker_params_set_class_weight, Int32), (:joker_params_set_block_size, Csize_t),
    (:joker_params_set_max_iter, Csize_t), (:joker_params_set_tol, Float64),
    (:joker_params_set_time_limit, Float64), (:joker_params_set_check_every, Csize_t),
    (:joker_params_set_seed, UInt64), (:joker_params_set_max_memory, Csize_t),
    (:joker_params_set_device, Int32), (:joker_params_set_nystrom_rank, Csize_t),
    (:joker_params_set_kernel_cache, Csize_t),
    (:joker_params_set_tr_model, Int32), (:joker_params_set_working_set, Int32),
    (:joker_params_set_auto_exact, Int32), (:joker_params_set_stall, Int32),
    (:joker_params_set_multiclass, Int32), (:joker_params_set_direct_krr, Int32),
    (:joker_params_set_tr_norm, Int32), (:joker_params_set_bias, Float64),
    (:joker_params_set_newton_start, Int32), (:joker_params_set_intercept, Int32),
    (:joker_params_set_auto_loss, Int32), (:joker_params_set_probability, Int32)]
    @eval $name(h::Ptr{Cvoid}, v, names=Dict{String,String}()) =
        check(ccall(($(QuoteNode(name)), libjoker), Int32, (Ptr{Cvoid}, $T), h, v), names)
end

# A non-negative integer argument (as the Python `_count`).
function count_arg(name, v)
    v = Int(v)
    v >= 0 || throw(JokerError(INVALID_ARGUMENT, "`$name` must be >= 0, got $v"))
    v
end

# The C ABI's code for a device choice (as the Python `_device_code`): -1 auto, -2 cpu, N cuda:N.
function device_code(device)
    if device isa Integer && !(device isa Bool) && device >= 0
        return Int32(device)
    elseif device isa AbstractString
        d = lowercase(strip(device))
        d == "auto" && return Int32(-1)
        d == "cpu" && return Int32(-2)
        d == "cuda" && return Int32(0)
        if startswith(d, "cuda:") && !isempty(d[6:]) && all(isdigit, d[6:])
            return Int32(parse(Int, d[6:]))
        end
    end
    throw(JokerError(INVALID_ARGUMENT,
        "device $(repr(device)): use \"auto\", \"cpu\", \"cuda\", \"cuda:N\" or N >= 0"))
end

function pick(table, key, what)
    haskey(table, key) || throw(JokerError(INVALID_ARGUMENT,
        "unknown $what $(repr(key)); one of $(sort(map(string, collect(keys(table)))))"))
    table[key]
end

"""
    Joker(loss="krr"; loss_param=0.0, kernel="gaussian", gamma=nothing, bandwidth="auto",
          c=nothing, lambda_=nothing, n_components=2048, precision="f32", task=nothing,
          standardize=true, normalize_target=true, class_weight=nothing, block_size=nothing,
          max_iter=10000, tol=1e-3, time_limit=nothing, check_every=0, seed=42,
          max_memory=nothing, device="auto", nystrom_rank=0, tr_model="auto", full_krr=nothing, krr_blocks=10,
          krr_rank=100, krr_tol=1e-6, krr_store_preconditioners=false, kernel_cache=2 << 30,
          features="rff", centers="leverage", working_set="auto", auto_exact=false, stall=true,
          multiclass="auto", solver="dbcd", batch_size=nothing, feature_block=nothing,
          step_theta=nothing, step_t0=nothing, direct_krr=true, tr_norm="auto", bias=0.0,
          newton_start=true, intercept=nothing, auto_loss=false, probability=false)

Validated training parameters (as the Python `joker.Joker`); invalid values throw JokerError.
`tr_model`: the trust region's model curvature with random features, "gram", "kernel" or
"auto" (the default) (`tr_model(model)` says which was used).
`full_krr`: "askotch", "skotch" or "pcg" solves exact kernel ridge regression with that method
(needs `loss="krr"` and `n_components=nothing`). `block_size`: `nothing` (the default) takes
512, or 256 on a cached exact kernel (128 there for hinge, SVR and L1); it is capped at the number of samples by the library. `max_memory`: `nothing` (the default) refuses a fit whose estimated
memory exceeds 80% of the memory available when it starts (JOKER_STATUS_MEMORY), 0 sets no
limit, any other value is a limit in bytes. `kernel_cache`: bytes the exact kernel matrix (or a
Nystrom map's features) may take when formed once and kept (0: formed block by block). `features`: "rff" (random
Fourier features) or "nystrom" (a Nystrom map over `n_components` centres chosen by `centers`:
"leverage", "kmeans" or "uniform"; the model predicts as an exact-kernel model over them).
`working_set`: "auto" (shrinking where the exact kernel is cached, random otherwise),
"shrinking", "greedy" or "random". `auto_exact`: the exact kernel instead of `n_components`
random features where its matrix fits `kernel_cache`; beyond, a Nystrom map of `n_components`
centres where its features fit it (on the CPU). `stall`: also stop ("stalled") once the
relative gap is within `10 tol` and the dual objective rose by less than `tol / 10` of its size
per pass over the last three passes (`false`: run until the gap reaches `tol`).
`multiclass`: more than two classes "ovr" (one-vs-rest), "ovo" (one-vs-one: a column per pair
of classes on the pair's rows, votes decide) or "auto" (one-vs-one on the exact kernel,
one-vs-rest with features); `multiclass(model)` says which was taken. `solver`: "dbcd"
(DBCD-TR, the default) or a doubly stochastic gradient solver, "dsg", "udsg" or "cdsg" (random
features on the CPU, `max_iter` steps, no duality gap), with `batch_size` rows and
`feature_block` new features per step and the step size `step_theta / (t + step_t0)`
(`nothing`: the defaults 256, 64, 1000, 1000). `direct_krr`: KRR on a feature map of at most
4,096 features starts from its exact optimum, solved in the primal (the fit then usually ends
at its first check with 0 iterations; `false`: DBCD-TR from zero). `newton_start`: L2-SVC on
such a feature map starts from its optimum, found in the primal by a finite Newton method
(`false`: DBCD-TR from zero). `tr_norm`: the norm of the
block solves' trust-region steps, "euclidean", "diagonal" (Jacobi-preconditioned CG) or "auto"
(diagonal for KLR and Lp). `bias`: the value `B >= 0` of a constant feature appended to the
random features, an intercept as LIBLINEAR's `-B` (0: none; random features by DBCD-TR only).
`intercept`: an unregularised intercept `b` beside the kernel expansion, the model `f(x) + b` as
LIBSVM's SVR (`true`), none (`false`), or `nothing` (the default: one for "svr", "huber", "l1"
and "lp" trained by DBCD-TR, none for "krr"). `auto_loss`: for a regression, the loss follows the
representation the fit takes (`joker train`'s default when no loss is named): "svr" (epsilon
0.1, with its intercept) on the exact kernel, "krr" on a feature map; refused for a
classification. `probability`: a classifier with another loss than "klr" is calibrated after
the fit for `predict_proba` (Platt's sigmoid per decision column on decision values from 5
stratified cross-validation folds, as LIBSVM's `-b 1`: about 5 more fits on 4/5 of the rows).
"""
function Joker(loss="krr"; loss_param=0.0, kernel="gaussian", gamma=nothing,
    bandwidth="auto", c=nothing, lambda_=nothing, n_components=2048, precision="f32",
    task=nothing, standardize=true, normalize_target=true, class_weight=nothing,
    block_size=nothing, max_iter=10000, tol=1e-3, time_limit=nothing, check_every=0, seed=42,
    max_memory=nothing, device="auto", nystrom_rank=0, tr_model="auto", full_krr=nothing,
    krr_blocks=10, krr_rank=100, krr_tol=1e-6, krr_store_preconditioners=false,
    kernel_cache=2 << 30, features="rff", centers="leverage", working_set="auto",
    auto_exact=false, stall=true, multiclass="auto", solver="dbcd", batch_size=nothing,
    feature_block=nothing, step_theta=nothing, step_t0=nothing, direct_krr=true,
    tr_norm="auto", bias=0.0, newton_start=true, intercept=nothing, auto_loss=false,
    probability=false)
    args = deepcopy((; loss, loss_param, kernel, gamma, bandwidth, c, lambda_, n_components,
        precision, task, standardize, normalize_target, class_weight, block_size, max_iter, tol,
        time_limit, check_every, seed, max_memory, device, nystrom_rank, tr_model, full_krr, krr_blocks,
        krr_rank, krr_tol, krr_store_preconditioners, kernel_cache, features, centers, working_set,
        auto_exact, stall, multiclass, solver, batch_size, feature_block, step_theta, step_t0,
        direct_krr, tr_norm, bias, newton_start, intercept, auto_loss, probability))
    finalizer(close, Params(new_params(; args...), args))
end

"A new JokerParams handle from the arguments of Joker (as the Python `_new_params`)."
function new_params(; loss, loss_param, kernel, gamma, bandwidth, c, lambda_, n_components,
    precision, task, standardize, normalize_target, class_weight, block_size, max_iter, tol,
    time_limit, check_every, seed, max_memory, device, nystrom_rank, tr_model, full_krr, krr_blocks,
    krr_rank, krr_tol, krr_store_preconditioners, kernel_cache, features="rff", centers="leverage",
    working_set="auto", auto_exact=false, stall=true, multiclass="auto", solver="dbcd",
    batch_size=nothing, feature_block=nothing, step_theta=nothing, step_t0=nothing,
    direct_krr=true, tr_norm="auto", bias=0.0, newton_start=true, intercept=nothing,
    auto_loss=false, probability=false)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(ccall((:joker_params_new, libjoker), Int32, (Ptr{Ptr{Cvoid}},), out))
    h = out[]
    try
        check(ccall((:joker_params_set_loss, libjoker), Int32, (Ptr{Cvoid}, Int32, Float64), h,
            pick(LOSSES, loss, "loss"), Float64(loss_param)), LOSS_NAMES)
        joker_params_set_kernel(h, pick(KERNELS, kernel, "kernel"))
        if gamma !== nothing
            joker_params_set_gamma(h, Float64(gamma))
        else
            joker_params_set_bandwidth(h, pick(BANDWIDTHS, bandwidth, "bandwidth"))
        end
        c !== nothing && lambda_ !== nothing &&
            throw(JokerError(INVALID_ARGUMENT, "give c or lambda_, not both"))
        c !== nothing && joker_params_set_c(h, Float64(c))
        lambda_ !== nothing && joker_params_set_lambda(h, Float64(lambda_))
        if n_components === nothing
            check(ccall((:joker_params_set_exact, libjoker), Int32, (Ptr{Cvoid},), h))
        else
            joker_params_set_n_components(h, count_arg("n_components", n_components))
        end
        joker_params_set_precision(h, pick(PRECISIONS, precision, "precision"))
        joker_params_set_task(h, pick(TASKS, task, "task"))
        joker_params_set_standardize(h, Int32(standardize))
        joker_params_set_normalize_target(h, Int32(normalize_target))
        if class_weight == "balanced"
            joker_params_set_class_weight(h, 1)
        elseif class_weight !== nothing
            labels = Float64[k for k in keys(class_weight)]
            weights = Float64[class_weight[k] for k in keys(class_weight)]
            check(ccall((:joker_params_set_class_weights, libjoker), Int32,
                (Ptr{Cvoid}, Ptr{Float64}, Ptr{Float64}, Csize_t), h, labels, weights,
                length(labels)),
                Dict("labels" => "`class_weight` (a label)", "weights" => "`class_weight` (a weight)"))
        end
        block_size === nothing || joker_params_set_block_size(h, count_arg("block_size", block_size))
        joker_params_set_max_iter(h, count_arg("max_iter", max_iter))
        joker_params_set_tol(h, Float64(tol))
        joker_params_set_time_limit(h, Float64(something(time_limit, 0.0)),
            Dict("seconds" => "`time_limit`"))
        joker_params_set_check_every(h, count_arg("check_every", check_every))
        joker_params_set_seed(h, UInt64(count_arg("seed", seed)))
        # nothing: the library's default limit (80% of the available memory); 0: none
        max_memory === nothing || joker_params_set_max_memory(h, count_arg("max_memory", max_memory))
        joker_params_set_device(h, device_code(device))
        joker_params_set_nystrom_rank(h, count_arg("nystrom_rank", nystrom_rank))
        joker_params_set_kernel_cache(h, count_arg("kernel_cache", kernel_cache))
        joker_params_set_tr_model(h, Int32(pick(TR_MODELS, tr_model, "tr_model")))
        joker_params_set_working_set(h, Int32(pick(WORKING_SETS, working_set, "working_set")))
        joker_params_set_auto_exact(h, Int32(auto_exact ? 1 : 0))
        joker_params_set_stall(h, Int32(stall ? 1 : 0))
        joker_params_set_direct_krr(h, Int32(direct_krr ? 1 : 0))
        joker_params_set_newton_start(h, Int32(newton_start ? 1 : 0))
        joker_params_set_tr_norm(h, Int32(pick(TR_NORMS, tr_norm, "tr_norm")))
        joker_params_set_multiclass(h, Int32(pick(MULTICLASS, multiclass, "multiclass")))
        # nothing: the solver's default (0 and NaN in the C call)
        check(ccall((:joker_params_set_solver, libjoker), Int32,
            (Ptr{Cvoid}, Int32, Csize_t, Csize_t, Float64, Float64), h,
            pick(SOLVERS, solver, "solver"),
            batch_size === nothing ? 0 : count_arg("batch_size", batch_size),
            feature_block === nothing ? 0 : count_arg("feature_block", feature_block),
            step_theta === nothing ? NaN : Float64(step_theta),
            step_t0 === nothing ? NaN : Float64(step_t0)),
            Dict("theta" => "`step_theta`", "t0" => "`step_t0`"))
        check(ccall((:joker_params_set_feature_map, libjoker), Int32, (Ptr{Cvoid}, Int32, Int32), h,
            pick(FEATURE_MAPS, features, "features"), pick(CENTERS, centers, "centers")))
        check(ccall((:joker_params_set_full_krr, libjoker), Int32,
            (Ptr{Cvoid}, Int32, Csize_t, Csize_t, Csize_t, Float64, Int32), h,
            pick(KRR_METHODS, full_krr, "full_krr method"), count_arg("krr_blocks", krr_blocks),
            count_arg("krr_rank", krr_rank), count_arg("max_iter", max_iter), Float64(krr_tol),
            Int32(krr_store_preconditioners)),
            FULL_KRR_NAMES)
        # last: the bias feature is checked against the map, the exact kernel and the solver,
        # the intercept against the loss and the solver
        joker_params_set_bias(h, Float64(bias))
        joker_params_set_intercept(h, Int32(intercept === nothing ? 2 : intercept ? 1 : 0))
        # the automatic loss against the task
        joker_params_set_auto_loss(h, Int32(auto_loss ? 1 : 0))
        joker_params_set_probability(h, Int32(probability ? 1 : 0))
    catch
        ccall((:joker_params_free, libjoker), Int32, (Ptr{Cvoid},), h)
        rethrow()
    end
    h
end

"A copy with a handle of its own, rebuilt from the arguments."
Base.copy(p::Params) = finalizer(close, Params(new_params(; p.args...), p.args))
Base.deepcopy_internal(p::Params, ::IdDict) = copy(p)

function Base.close(p::Params)
    if p.handle != C_NULL
        check(ccall((:joker_params_free, libjoker), Int32, (Ptr{Cvoid},), p.handle))
        p.handle = C_NULL
    end
    nothing
end

mutable struct Model
    handle::Ptr{Cvoid}
end

mutable struct CallbackState
    f::Any
    error::Any
end

# The C callback: returns 0 to continue, 1 to stop. Exceptions never reach C: they stop the
# fit and are rethrown by `fit`.
function progress_trampoline(p::Ptr{CProgress}, user::Ptr{Cvoid})::Int32
    st = unsafe_pointer_to_objref(user)::CallbackState
    try
        return st.f(Progress(unsafe_load(p))) === false ? Int32(1) : Int32(0)
    catch e
        st.error = e
        return Int32(1)
    end
end

"""
    fit(params, X, y; sample_weight=nothing, validation=nothing, progress=nothing, interrupt=nothing) -> Model

Trains on the rows of `X` with labels `y`. `validation = (X_val, y_val)` is scored at every
check (`X_val` with the columns of `X`, one label per row); `progress(p::Progress)` is called
at every check, return `false` to stop early (an exception in it stops the fit and is
rethrown). `interrupt`: an `Interrupt` whose `set!` stops the fit within an iteration with the
model so far (stop reason "cancelled").
"""
function fit(params::Params, X, y; sample_weight=nothing, validation=nothing, progress=nothing,
    interrupt=nothing)
    params.handle == C_NULL &&
        throw(JokerError(NULL_POINTER, "`params` is NULL: these parameters were closed"))
    interrupt === nothing || interrupt isa Interrupt ||
        throw(JokerError(INVALID_ARGUMENT, "interrupt must be a LibJoker.Interrupt, got $(repr(interrupt))"))
    with_data(X, y) do train
        val = validation === nothing ? nothing : validation_data(validation, train)
        # With a flag: a handle of this fit's own, so that the flag reaches no concurrent fit
        # with these parameters and cannot outlive this call.
        h = interrupt === nothing ? params.handle : new_params(; params.args...)
        try
            w = sample_weight === nothing ? nothing : Vector{Float64}(vec(sample_weight))
            w === nothing || length(w) == train.n_rows || throw(JokerError(SHAPE_MISMATCH,
                "X has $(train.n_rows) rows but sample_weight has $(length(w)) values"))
            flag = interrupt === nothing ? nothing : interrupt.value
            flag === nothing || check(ccall((:joker_params_set_interrupt, libjoker), Int32,
                (Ptr{Cvoid}, Ptr{Int32}), h, flag))
            st = CallbackState(progress, nothing)
            cb = progress === nothing ? C_NULL :
                 @cfunction(progress_trampoline, Int32, (Ptr{CProgress}, Ptr{Cvoid}))
            out = Ref{Ptr{Cvoid}}(C_NULL)
            code = GC.@preserve st w flag ccall((:joker_fit, libjoker), Int32,
                (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Float64}, Csize_t, Ptr{Cvoid}, Ptr{Cvoid},
                    Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
                h, train.handle, w === nothing ? C_NULL : pointer(w),
                w === nothing ? 0 : length(w), val === nothing ? C_NULL : val.handle, cb,
                pointer_from_objref(st), out)
            err = code == 0 ? nothing : last_error(code, FIT_NAMES)
            model = finalizer(close, Model(out[]))
            if st.error !== nothing || err !== nothing
                close(model)
                throw(st.error !== nothing ? st.error : err)
            end
            return model
        finally
            if interrupt !== nothing
                ccall((:joker_params_set_interrupt, libjoker), Int32, (Ptr{Cvoid}, Ptr{Int32}),
                    h, C_NULL)
                ccall((:joker_params_free, libjoker), Int32, (Ptr{Cvoid},), h)
            end
            val === nothing || close(val)
        end
    end
end

"A copy through the model file, with a handle of its own (closing one leaves the other)."
function Base.copy(m::Model)
    mktempdir() do d
        path = joinpath(d, "model.json")
        save(m, path)
        load(path)
    end
end
Base.deepcopy_internal(m::Model, ::IdDict) = copy(m)

"Reads a model file written by `save` (or the joker program)."
function load(path::AbstractString)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(ccall((:joker_model_load, libjoker), Int32, (Cstring, Ptr{Ptr{Cvoid}}), path, out))
    finalizer(close, Model(out[]))
end

"Writes the model file (JSON)."
save(m::Model, path::AbstractString) =
    check(ccall((:joker_model_save, libjoker), Int32, (Ptr{Cvoid}, Cstring), m.handle, path))

function output(m::Model, kind::Symbol, X)
    with_data(X) do d
        need = Ref{Csize_t}(0)
        check(ccall((:joker_model_output_size, libjoker), Int32,
            (Ptr{Cvoid}, Ptr{Cvoid}, Int32, Ptr{Csize_t}), m.handle, d.handle, OUTPUT[kind], need))
        out = Vector{Float64}(undef, need[])
        fname = kind === :predict ? :joker_model_predict :
                kind === :decision_function ? :joker_model_decision_function :
                :joker_model_predict_proba
        if fname === :joker_model_predict
            check(ccall((:joker_model_predict, libjoker), Int32,
                (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Float64}, Csize_t), m.handle, d.handle, out,
                length(out)), DATA_NAMES)
        elseif fname === :joker_model_decision_function
            check(ccall((:joker_model_decision_function, libjoker), Int32,
                (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Float64}, Csize_t), m.handle, d.handle, out,
                length(out)), DATA_NAMES)
        else
            check(ccall((:joker_model_predict_proba, libjoker), Int32,
                (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Float64}, Csize_t), m.handle, d.handle, out,
                length(out)), DATA_NAMES)
        end
        return out, d.n_rows
    end
end

"Class labels (classifiers) or values (regression), one per row."
predict(m::Model, X) = output(m, :predict, X)[1]

"Decision values: a vector for one target, an (n, n_targets) matrix for one-vs-rest."
function decision_function(m::Model, X)
    out, n = output(m, :decision_function, X)
    n_targets(m) == 1 ? out : permutedims(reshape(out, :, n))
end

"Class probabilities, (n, n_classes) in the order of `classes` (KLR only)."
function predict_proba(m::Model, X)
    out, n = output(m, :predict_proba, X)
    permutedims(reshape(out, :, n))
end

"Accuracy (classifiers) or R^2 (regression)."
function score(m::Model, X, y)
    with_data(X, y) do d
        s = Ref{Float64}(0)
        check(ccall((:joker_model_score, libjoker), Int32, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Float64}),
            m.handle, d.handle, s), DATA_NAMES)
        s[]
    end
end

for (name, T) in [(:n_features, Csize_t), (:n_targets, Csize_t), (:n_classes, Csize_t),
    (:iterations, Csize_t), (:gamma, Float64), (:lambda, Float64), (:gap, Float64),
    (:task_code, Int32), (:loss_code, Int32), (:kernel_code, Int32), (:n_components_raw, Csize_t),
    (:multiclass_code, Int32)]
    cname = QuoteNode(Symbol("joker_model_", replace(String(name), "_code" => "", "_raw" => "")))
    jname = name === :lambda ? :lambda_ : name
    @eval function $jname(m::Model)
        v = Ref{$T}(0)
        check(ccall(($cname, libjoker), Int32, (Ptr{Cvoid}, Ptr{$T}), m.handle, v))
        $(T === Csize_t ? :(Int(v[])) : :(v[]))
    end
end

"Random features M, or nothing for an exact-kernel model."
n_components(m::Model) = (k = n_components_raw(m); k == 0 ? nothing : k)

"Sorted class labels (empty for regression)."
function classes(m::Model)
    out = Vector{Float64}(undef, n_classes(m))
    check(ccall((:joker_model_classes, libjoker), Int32, (Ptr{Cvoid}, Ptr{Float64}, Csize_t),
        m.handle, out, length(out)))
    out
end

task(m::Model) = Dict(1 => "classification", 2 => "regression")[task_code(m)]
loss(m::Model) = only(k for (k, v) in LOSSES if v == loss_code(m))
kernel(m::Model) = only(k for (k, v) in KERNELS if v == kernel_code(m))
"How the classes were split: \"ovo\" (a column per pair of classes) or \"ovr\"."
multiclass(m::Model) = only(k for (k, v) in MULTICLASS if v == multiclass_code(m))

"Why training stopped: converged, max_iter, time_limit or cancelled."
function stop_reason(m::Model)
    s = Ref{Cstring}(C_NULL)
    check(ccall((:joker_model_stop_reason, libjoker), Int32, (Ptr{Cvoid}, Ptr{Cstring}),
        m.handle, s))
    unsafe_string(s[])
end

"Where the model was trained and why there, e.g. \"cpu (auto: no CUDA driver found)\"."
function device(m::Model)
    s = Ref{Cstring}(C_NULL)
    check(ccall((:joker_model_device, libjoker), Int32, (Ptr{Cvoid}, Ptr{Cstring}),
        m.handle, s))
    unsafe_string(s[])
end

"The trust region's model curvature of the fit and why, e.g. \"gram\" or \"kernel\"."
function tr_model(m::Model)
    s = Ref{Cstring}(C_NULL)
    check(ccall((:joker_model_tr_model, libjoker), Int32, (Ptr{Cvoid}, Ptr{Cstring}),
        m.handle, s))
    unsafe_string(s[])
end

"Frees the model now (later calls throw JokerError: a NULL handle)."
function Base.close(m::Model)
    if m.handle != C_NULL
        check(ccall((:joker_model_free, libjoker), Int32, (Ptr{Cvoid},), m.handle))
        m.handle = C_NULL
    end
    nothing
end

end # module
