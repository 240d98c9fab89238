//! Test vectors for the device trust-region solver (`cuda/trsolve.cu`): block problems for
//! every loss and the Rust solver's results on them, in `cuda/hostemu/tr_vectors.txt`, which
//! the host-emulator test `cuda/hostemu/test_trsolve.cpp` reads (`scripts/emu-cuda.sh`).
//!
//! This test regenerates the problems and solves them with
//! [`joker::solver::trust_region::solve_column`]; it fails if the committed file's problems
//! differ in any bit or its results differ beyond rounding (so a change to the Rust solver
//! that changes its steps forces the vectors, and hence the CUDA twin's test, to follow).
//! Rewrite the file with `JOKER_UPDATE_TR_VECTORS=1 cargo test --test suite -- tr_vectors::`.
//!
//! `K_BB = A A^T / denom + shift I` with small integer `A`, so both languages build it
//! bit-identically from the integers (integer sums are exact in `f64`, then one division).

use std::fmt::Write as _;
use std::path::Path;

use joker::loss::{Coord, Loss};
use joker::rng::Stream;
use joker::solver::trust_region::{
    BlockProblem, BlockStats, block_nystrom, diagonal_shift, solve_column,
};
use joker::{RadiusRule, Scalar, TrNorm, TrustRegion};

/// A `b x m` integer matrix with entries in `-8..=8`.
struct IntMat {
    b: usize,
    m: usize,
    a: Vec<i64>,
    denom: f64,
    shift: f64,
}

impl IntMat {
    fn new(b: usize, m: usize, shift: f64, seed: u64) -> IntMat {
        let mut s = Stream::new(seed, 7);
        let a = (0..b * m).map(|_| s.below(17) as i64 - 8).collect();
        IntMat {
            b,
            m,
            a,
            denom: (16 * m) as f64,
            shift,
        }
    }

    fn kbb(&self) -> Vec<f64> {
        let (b, m) = (self.b, self.m);
        let mut k = vec![0.0; b * b];
        for i in 0..b {
            for j in 0..b {
                let dot: i64 = (0..m).map(|c| self.a[i * m + c] * self.a[j * m + c]).sum();
                k[i * b + j] = dot as f64 / self.denom;
                if i == j {
                    k[i * b + j] += self.shift;
                }
            }
        }
        k
    }
}

/// Loss id as in `cuda/loss.cuh` and its parameter.
fn loss_id(loss: Loss) -> (u32, f64) {
    let (id, param) = loss.device_id();
    (id as u32, param)
}

const LOSSES: [Loss; 8] = [
    Loss::SquaredError,
    Loss::Huber { delta: 0.5 },
    Loss::EpsilonInsensitive { epsilon: 0.25 },
    Loss::Absolute,
    Loss::Lp { p: 1.5 },
    Loss::Hinge,
    Loss::SquaredHinge,
    Loss::Logistic,
];

/// One problem kind: matrix, solver parameters, and whether it is well conditioned (the
/// device must then take exactly the same trust-region and accepted steps).
struct Kind {
    mat: usize,
    delta_max: f64,
    p: TrustRegion,
    well_conditioned: bool,
}

fn kinds() -> Vec<Kind> {
    vec![
        // small block, Reference rule, the default (loose) solver settings
        Kind {
            mat: 0,
            delta_max: 4.0,
            p: TrustRegion::default(),
            well_conditioned: true,
        },
        // b > 256 threads, Paper rule, small radius (boundary steps), more iterations
        Kind {
            mat: 1,
            delta_max: 1.0,
            p: TrustRegion {
                max_iter: 30,
                max_cg_iter: 50,
                cg_rtol: 1e-6,
                rule: RadiusRule::Paper,
                ..TrustRegion::default()
            },
            well_conditioned: true,
        },
        // rank-deficient K (rank 8 of 64, no shift): only the objective decrease is compared
        Kind {
            mat: 2,
            delta_max: 16.0,
            p: TrustRegion {
                max_iter: 50,
                max_cg_iter: 30,
                kkt_tol: 1e-9,
                ..TrustRegion::default()
            },
            well_conditioned: false,
        },
        // the Nystrom metric (rank 6 of 37): preconditioned CG, radius in the M-norm
        Kind {
            mat: 0,
            delta_max: 4.0,
            p: TrustRegion {
                nystrom_rank: 6,
                ..TrustRegion::default()
            },
            well_conditioned: true,
        },
        // the Nystrom metric with boundary steps on b > 256 (rank 16 of 270), Paper rule
        Kind {
            mat: 1,
            delta_max: 1.0,
            p: TrustRegion {
                max_iter: 30,
                max_cg_iter: 50,
                cg_rtol: 1e-6,
                rule: RadiusRule::Paper,
                nystrom_rank: 16,
                ..TrustRegion::default()
            },
            well_conditioned: true,
        },
        // the diagonal norm for every loss (Jacobi-preconditioned CG, the radius in the
        // D-norm) on b > 256, Paper rule; KLR and Lp take it by default in the kinds above
        Kind {
            mat: 1,
            delta_max: 1.0,
            p: TrustRegion {
                max_iter: 30,
                max_cg_iter: 50,
                cg_rtol: 1e-6,
                rule: RadiusRule::Paper,
                norm: TrNorm::Diagonal,
                ..TrustRegion::default()
            },
            well_conditioned: true,
        },
    ]
}

fn mats() -> Vec<IntMat> {
    vec![
        IntMat::new(37, 64, 0.1, 1),
        IntMat::new(270, 24, 0.5, 2),
        IntMat::new(64, 8, 0.0, 3),
    ]
}

/// A multiple of 1/1024 in `[0, 1]` (short decimal representation).
fn nice(s: &mut Stream) -> f64 {
    s.below(1025) as f64 / 1024.0
}

struct Case {
    text: String,
    /// (alpha, gbar, stats) from the Rust solver, for the tolerant comparison.
    result: (Vec<f64>, Vec<f64>, BlockStats),
}

fn case(ci: usize, loss: Loss, kind: &Kind, mat: &IntMat) -> Case {
    let b = mat.b;
    let k = mat.kbb();
    let mut s = Stream::new(100 + ci as u64, 11);
    let base_lam = [0.125, 0.5, 1.0][ci % 3];
    let coords: Vec<Coord> = (0..b)
        .map(|_| {
            let y = if loss.is_classifier() {
                if s.uniform() < 0.5 { 1.0 } else { -1.0 }
            } else {
                3.0 * nice(&mut s) - 1.5
            };
            let w = [1.0, 2.0, 0.5][s.below(3)];
            let lam = base_lam / w;
            let eps = if loss == Loss::Logistic {
                <f32 as Scalar>::gap_below(1.0 / lam)
            } else {
                0.0
            };
            Coord { y, lam, eps }
        })
        .collect();
    // A feasible start, with coordinates exactly at bounds (and at 0 for SVR) to exercise the
    // freezing and orthant rules.
    let alpha0: Vec<f64> = coords
        .iter()
        .map(|kc| {
            let (lo, hi) = loss.bounds(kc);
            let u = s.uniform();
            if loss == Loss::Logistic {
                if u < 0.3 {
                    loss.start(kc, b)
                } else {
                    kc.y * (0.01 + 0.98 * nice(&mut s)) * kc.c()
                }
            } else if lo.is_finite() && hi.is_finite() {
                if u < 0.2 {
                    lo
                } else if u < 0.4 {
                    hi
                } else if u < 0.55 {
                    0.0
                } else {
                    lo + (hi - lo) * nice(&mut s)
                }
            } else if lo.is_finite() || hi.is_finite() {
                // squared hinge: [0, inf) or (-inf, 0]
                if u < 0.3 {
                    0.0
                } else {
                    kc.y * 2.0 * nice(&mut s)
                }
            } else {
                2.0 * nice(&mut s) - 1.0
            }
        })
        .collect();
    let gbar0: Vec<f64> = (0..b)
        .map(|i| {
            let ka: f64 = (0..b).map(|j| k[i * b + j] * alpha0[j]).sum();
            ka + nice(&mut s) - 0.5
        })
        .collect();
    let prob = BlockProblem {
        kbb: &k,
        loss,
        coords: &coords,
        exact: None,
    };
    let (mut alpha, mut gbar) = (alpha0.clone(), gbar0.clone());
    let st = solve_column(&prob, &mut alpha, &mut gbar, kind.delta_max, &kind.p);

    let (id, param) = loss_id(loss);
    let p = &kind.p;
    let rule = match p.rule {
        RadiusRule::Reference => 0,
        RadiusRule::Paper => 1,
    };
    let mut t = String::new();
    let vec = |t: &mut String, name: &str, v: &[f64]| {
        write!(t, "{name}").unwrap();
        for x in v {
            write!(t, " {x:?}").unwrap();
        }
        t.push('\n');
    };
    writeln!(
        t,
        "case {} {} {id} {param:?} {} {}",
        ci,
        loss.name(),
        kind.mat,
        u8::from(kind.well_conditioned)
    )
    .unwrap();
    writeln!(
        t,
        "params {:?} {:?} {} {} {:?} {:?} {:?} {rule}",
        kind.delta_max, p.eta, p.max_iter, p.max_cg_iter, p.cg_rtol, p.kkt_tol, p.kkt_rtol
    )
    .unwrap();
    vec(&mut t, "y", &coords.iter().map(|c| c.y).collect::<Vec<_>>());
    vec(
        &mut t,
        "lam",
        &coords.iter().map(|c| c.lam).collect::<Vec<_>>(),
    );
    vec(
        &mut t,
        "eps",
        &coords.iter().map(|c| c.eps).collect::<Vec<_>>(),
    );
    vec(&mut t, "alpha0", &alpha0);
    vec(&mut t, "gbar0", &gbar0);
    // the solver's Nystrom factors (derived from K_BB, so listed with the results: their last
    // bits may depend on the machine's matrix product)
    let trace: f64 = (0..b).map(|i| k[i * b + i]).sum();
    let ny = {
        let kbb = faer::MatRef::from_row_major_slice(&k, b, b);
        block_nystrom(b, p.nystrom_rank, trace, |om| kbb * om)
    };
    match &ny {
        Some(ny) => {
            let r = ny.eigenvalues().len();
            writeln!(t, "nystrom {r}").unwrap();
            let u = ny.u();
            let flat: Vec<f64> = (0..b)
                .flat_map(|i| (0..r).map(move |c| u[(i, c)]))
                .collect();
            vec(&mut t, "nyu", &flat);
            vec(&mut t, "nylam", ny.eigenvalues());
        }
        None => writeln!(t, "nystrom 0").unwrap(),
    }
    // rho of the diagonal norm (0: the Euclidean norm; never with Nystrom factors)
    let shift = if ny.is_none() && p.norm.is_diagonal(loss) {
        diagonal_shift(trace, b)
    } else {
        0.0
    };
    writeln!(t, "diagonal {shift:?}").unwrap();
    vec(&mut t, "alpha", &alpha);
    vec(&mut t, "gbar", &gbar);
    writeln!(t, "stats {} {} {}", st.tr_iters, st.accepted, st.cg_iters).unwrap();
    Case {
        text: t,
        result: (alpha, gbar, st),
    }
}

fn generate() -> (String, Vec<Case>) {
    let mats = mats();
    let kinds = kinds();
    let mut t = String::new();
    t.push_str(
        "# Test vectors for cuda/trsolve.cu, written by tests/suite/tr_vectors.rs (do not edit):\n\
         # JOKER_UPDATE_TR_VECTORS=1 cargo test --test suite -- tr_vectors::\n\
         # K_BB of matrix q = A A^T / denom + shift I (A: b x m integers, row-major).\n\
         # case <index> <loss name> <loss id> <loss param> <matrix> <well conditioned>\n\
         # params <delta_max> <eta> <max_iter> <max_cg_iter> <cg_rtol> <kkt_tol> <kkt_rtol> <rule 0 Reference|1 Paper>\n\
         # then y, lam, eps, alpha0, gbar0 (inputs); nystrom <rank> and, if rank > 0, the solver's Nystrom factors\n\
         # nyu (b x rank, row-major) and nylam (rank); diagonal <rho of the diagonal norm, 0: Euclidean>;\n\
         # alpha, gbar, stats (tr_iters accepted cg_iters) of the Rust solver.\n",
    );
    writeln!(t, "matrices {}", mats.len()).unwrap();
    for m in &mats {
        write!(t, "matrix {} {} {:?} {:?}", m.b, m.m, m.denom, m.shift).unwrap();
        for v in &m.a {
            write!(t, " {v}").unwrap();
        }
        t.push('\n');
    }
    let mut cases = Vec::new();
    for kind in &kinds {
        for &loss in &LOSSES {
            cases.push(case(cases.len(), loss, kind, &mats[kind.mat]));
        }
    }
    writeln!(t, "cases {}", cases.len()).unwrap();
    for c in &cases {
        t.push_str(&c.text);
    }
    (t, cases)
}

/// Parses the vectors `alpha`, `gbar` and `stats` of each case from a committed file.
fn parse_results(text: &str) -> Vec<(Vec<f64>, Vec<f64>, [usize; 3])> {
    let mut out = Vec::new();
    let (mut alpha, mut gbar) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let mut it = line.split_whitespace();
        match it.next() {
            Some("alpha") => alpha = it.map(|x| x.parse().unwrap()).collect(),
            Some("gbar") => gbar = it.map(|x| x.parse().unwrap()).collect(),
            Some("stats") => {
                let v: Vec<usize> = it.map(|x| x.parse().unwrap()).collect();
                out.push((
                    std::mem::take(&mut alpha),
                    std::mem::take(&mut gbar),
                    [v[0], v[1], v[2]],
                ));
            }
            _ => {}
        }
    }
    out
}

/// Every line but the results (`alpha`, `gbar`, `stats`) and the Nystrom factors.
fn inputs_only(text: &str) -> String {
    text.lines()
        .filter(|l| {
            !["alpha ", "gbar ", "stats ", "nyu ", "nylam "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn committed_tr_vectors_are_current() {
    let (text, cases) = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/hostemu/tr_vectors.txt");
    if std::env::var_os("JOKER_UPDATE_TR_VECTORS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let regenerate = "regenerate with\n    JOKER_UPDATE_TR_VECTORS=1 cargo test --test suite -- tr_vectors::\nand commit cuda/hostemu/tr_vectors.txt";
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    // The problems must be bit-identical; the results may differ by rounding only (another
    // CPU's FMA use or libm), with the same iteration counts.
    assert!(
        inputs_only(&committed) == inputs_only(&text),
        "cuda/hostemu/tr_vectors.txt: the problems are stale; {regenerate}"
    );
    let old = parse_results(&committed);
    assert_eq!(old.len(), cases.len(), "case count differs; {regenerate}");
    for (ci, (c, o)) in cases.iter().zip(&old).enumerate() {
        let (alpha, gbar, st) = &c.result;
        assert_eq!(
            [st.tr_iters, st.accepted, st.cg_iters],
            o.2,
            "case {ci}: iteration counts differ; {regenerate}"
        );
        let scale = 1.0 + alpha.iter().chain(gbar).fold(0.0f64, |m, v| m.max(v.abs()));
        for (x, y) in alpha.iter().chain(gbar).zip(o.0.iter().chain(&o.1)) {
            assert!(
                (x - y).abs() <= 1e-9 * scale,
                "case {ci}: results differ ({x} vs {y}); {regenerate}"
            );
        }
    }
}

/// The vectors exercise what they claim: every case accepts at least one step and ends finite.
#[test]
fn tr_vectors_are_meaningful() {
    let (_, cases) = generate();
    for (ci, c) in cases.iter().enumerate() {
        let (alpha, gbar, st) = &c.result;
        assert!(st.accepted > 0, "case {ci}: no accepted step");
        assert!(alpha.iter().chain(gbar).all(|v| v.is_finite()), "case {ci}");
    }
}
