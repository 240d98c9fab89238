# Tests of LibJoker, mirroring the low-level tests of the Python package
# (bindings/python/tests/test_joker.py): julia --project=bindings/julia/Joker -e 'using Pkg; Pkg.test()'
# with JOKER_LIB=/path/to/libjoker.so or the library built in the repository's target/.
# Not run in CI (Julia cannot be installed on the build machines).
using LibJoker
using Random
using Test

"A synthetic two-class problem: the sign of x1^2 + x2 - 1, on fresh uniform inputs."
function synthetic(n, seed)
    rng = MersenneTwister(seed)
    x = 4 .* rand(rng, n, 3) .- 2
    x, [x[i, 1]^2 + x[i, 2] - 1 > 0 ? 1.0 : -1.0 for i in 1:n]
end

@testset "LibJoker" begin
    X, y = synthetic(600, 1)
    Xt, yt = synthetic(300, 2)

    @testset "version and devices" begin
        @test occursin(r"^\d+\.\d+\.\d+", version())
        @test device_count() >= 0
        @test gpu_available() isa Bool
    end

    @testset "L2-SVC: fit, predict, save and load" begin
        model = fit(Joker("l2-svc"; c=4.0, n_components=256, block_size=64, max_iter=200), X, y)
        @test score(model, Xt, yt) > 0.9
        @test LibJoker.classes(model) == [-1.0, 1.0]
        @test LibJoker.n_components(model) == 256
        @test size(decision_function(model, Xt)) == (300,)
        path = joinpath(mktempdir(), "model.json")
        save(model, path)
        back = load(path)
        @test decision_function(back, Xt) == decision_function(model, Xt)
        @test decision_function(copy(model), Xt) == decision_function(model, Xt)
        @test LibJoker.stop_reason(model) in ("converged", "stalled", "max_iter")
    end

    @testset "KLR probabilities, weights and progress" begin
        seen = []
        model = fit(Joker("klr"; c=10.0, n_components=256, block_size=64, max_iter=150,
                check_every=10), X, y; sample_weight=ones(600), validation=(Xt, yt),
            progress=p -> (push!(seen, p); true))
        proba = predict_proba(model, Xt)
        @test size(proba) == (300, 2)
        @test all(abs.(sum(proba; dims=2) .- 1) .< 1e-12)
        @test length(seen) == 15
    end

    @testset "direct KRR start, trust-region norm and bias feature" begin
        target = y .+ 0.1 .* X[:, 1]
        for direct in (true, false)
            m = fit(Joker("krr"; n_components=256, block_size=64, max_iter=5000,
                    direct_krr=direct, device="cpu"), X, target)
            @test (LibJoker.iterations(m) == 0) == direct
        end
        for newton in (true, false)
            m = fit(Joker("l2-svc"; n_components=64, block_size=64, max_iter=5000,
                    newton_start=newton, device="cpu"), X, y)
            @test (LibJoker.iterations(m) == 0) == newton
        end
        @test_throws JokerError Joker("klr"; tr_norm="cholesky")
        @test score(fit(Joker("klr"; n_components=256, block_size=64, max_iter=300,
            tr_norm="diagonal"), X, y), Xt, yt) > 0.85
        @test_throws JokerError Joker("l2-svc"; bias=-1.0)
        @test_throws JokerError Joker("l2-svc"; bias=1.0, n_components=nothing)
        @test score(fit(Joker("l2-svc"; n_components=256, block_size=64, bias=1.0), X, y),
            Xt, yt) > 0.85
    end

    @testset "exact kernel, one-vs-rest" begin
        rng = MersenneTwister(4)
        x = 4 .* rand(rng, 450, 2) .- 2
        labels = [Float64(searchsortedfirst([-pi / 3, pi / 3], atan(x[i, 2], x[i, 1])) - 1) for i in 1:450]
        model = fit(Joker("l2-svc"; c=10.0, n_components=nothing, block_size=64, max_iter=200), x, labels)
        @test LibJoker.n_components(model) === nothing
        @test size(decision_function(model, x)) == (450, 3)
        @test score(model, x, labels) > 0.9
    end

    @testset "errors name the Julia arguments" begin
        model = fit(Joker("l2-svc"; n_components=64, max_iter=50), X, y)
        err = try
            predict(model, Xt[:, 1:2])
        catch e
            e
        end
        @test err isa JokerError && err.status == "JOKER_STATUS_SHAPE_MISMATCH"
        @test_throws JokerError Joker("l2-svc"; lambda_=-1.0)
        @test_throws JokerError Joker("nonsense")
        @test_throws JokerError fit(Joker("l2-svc"), X, y[1:10])
    end

    @testset "an Interrupt already set stops the fit at once" begin
        flag = Interrupt()
        set!(flag)
        model = fit(Joker("l2-svc"; n_components=64, max_iter=10^6, tol=0.0), X, y; interrupt=flag)
        @test LibJoker.stop_reason(model) == "cancelled"
        clear!(flag)
        @test !is_set(flag)
    end
end
