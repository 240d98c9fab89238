//! The check a GPU passes before a fit trusts it: a small fixed problem (a feature block with
//! its Gram and projection, a trust-region block solve, a prediction) computed by the device
//! and by its CPU twins, compared entry by entry.
//!
//! It is a guard against a device that runs but computes wrong numbers (a driver that
//! miscompiles the kernels, a broken GPU), not a validation: the GPU tests compare every
//! kernel with tight, derived tolerances. The bounds here are loose on purpose (1e-4 of the
//! quantity's scale; float rounding is below 1e-5 for this problem) so that a correct device
//! never fails, and any gross error is caught.

use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::features::{FeatureSpec, RandomMap};
use crate::kernel::{Kernel, KernelKind};
use crate::loss::{Coord, Loss};
use crate::rng::Stream;
use crate::solver::trust_region::{BlockProblem, TrustRegion, solve_column};

/// Rows of the block.
pub const ROWS: usize = 64;
/// Input dimension.
pub const DIM: usize = 5;
/// Random features.
pub const FEATURES: usize = 257;

/// The fixed problem.
pub struct Problem {
    /// A Gaussian feature map (`FEATURES` features of `DIM` inputs).
    pub map: RandomMap<f32>,
    /// `ROWS x DIM` rows, row-major.
    pub x: Vec<f32>,
    /// `FEATURES` weights of one target column.
    pub theta: Vec<f64>,
    /// The solve's loss (squared hinge: a unique block optimum).
    pub loss: Loss,
    /// The solve's coordinates (labels +-1, `lam = 0.5`).
    pub coords: Vec<Coord>,
    /// The solve's parameters: tight enough that both sides reach the block optimum.
    pub trust_region: TrustRegion,
}

/// One side's results.
#[derive(Clone, Debug)]
pub struct Answers {
    /// `K_BB = Phi_B Phi_B^T` (`ROWS x ROWS`).
    pub kbb: Vec<f64>,
    /// `g = Phi_B theta` (`ROWS`).
    pub g: Vec<f64>,
    /// The block optimum of the trust-region solve on the CPU's `K_BB` (`ROWS`).
    pub alpha: Vec<f64>,
    /// Decision values `Phi theta` of the rows (`ROWS`).
    pub pred: Vec<f64>,
}

impl Problem {
    /// The problem (the same in every process).
    pub fn new() -> Problem {
        let map = RandomMap::new(FeatureSpec {
            kernel: Kernel {
                kind: KernelKind::Gaussian,
                gamma: 0.5 / DIM as f64,
            },
            n_components: FEATURES,
            dim: DIM,
            seed: 2718,
        })
        .expect("a valid fixed feature map");
        let mut s = Stream::new(31, 4);
        let x = (0..ROWS * DIM)
            .map(|_| (4.0 * s.uniform() - 2.0) as f32)
            .collect();
        let theta = (0..FEATURES).map(|_| 2.0 * s.uniform() - 1.0).collect();
        let coords = (0..ROWS)
            .map(|i| Coord {
                y: if (i * 7) % 3 == 0 { -1.0 } else { 1.0 },
                lam: 0.5,
                eps: 0.0,
            })
            .collect();
        Problem {
            map,
            x,
            theta,
            loss: Loss::SquaredHinge,
            coords,
            trust_region: TrustRegion {
                kkt_tol: 1e-10,
                kkt_rtol: 0.0,
                max_iter: 200,
                ..TrustRegion::default()
            },
        }
    }

    /// The starting point of the solve and its `gbar = K alpha0`, on `kbb` (f32 entries).
    pub fn start(&self, kbb: &[f32]) -> (Vec<f64>, Vec<f64>) {
        let alpha: Vec<f64> = self
            .coords
            .iter()
            .map(|k| self.loss.start(k, ROWS))
            .collect();
        let gbar = (0..ROWS)
            .map(|i| (0..ROWS).map(|j| kbb[i * ROWS + j] as f64 * alpha[j]).sum())
            .collect();
        (alpha, gbar)
    }

    /// The CPU twins' answers, and the f32 `K_BB` that both solves use.
    pub fn cpu(&self) -> (Answers, Vec<f32>) {
        let mut phi = vec![0.0f32; ROWS * FEATURES];
        crate::backend::cpu::random_features(&self.map, &self.x, ROWS, &mut phi);
        let mut kbb = vec![0.0; ROWS * ROWS];
        Cpu.gram(&phi, ROWS, FEATURES, &mut kbb);
        let mut g = vec![0.0; ROWS];
        Cpu.project(&phi, ROWS, FEATURES, &self.theta, 1, &mut g);
        let k32: Vec<f32> = kbb.iter().map(|&v| v as f32).collect();
        let (mut alpha, mut gbar) = self.start(&k32);
        let k64: Vec<f64> = k32.iter().map(|&v| v as f64).collect();
        let prob = BlockProblem {
            kbb: &k64,
            loss: self.loss,
            coords: &self.coords,
            exact: None,
        };
        solve_column(&prob, &mut alpha, &mut gbar, 4.0, &self.trust_region);
        let pred = g.clone();
        (
            Answers {
                kbb,
                g,
                alpha,
                pred,
            },
            k32,
        )
    }
}

impl Default for Problem {
    fn default() -> Self {
        Problem::new()
    }
}

/// The largest `|device - cpu|` over `1 + max |cpu|`, or an error naming the first entry that
/// is not finite.
fn deviation(what: &str, device: &[f64], cpu: &[f64]) -> Result<f64, String> {
    if device.len() != cpu.len() {
        return Err(format!(
            "{what}: {} values from the device, {} from the CPU",
            device.len(),
            cpu.len()
        ));
    }
    let scale = 1.0 + cpu.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst = 0.0f64;
    for (i, (a, b)) in device.iter().zip(cpu).enumerate() {
        if !a.is_finite() {
            return Err(format!("{what}[{i}] is {a} on the device"));
        }
        worst = worst.max((a - b).abs() / scale);
    }
    Ok(worst)
}

/// The verdict: `Ok` when every device answer is within `1e-4` of the CPU's (relative to
/// `1 + max |cpu|`), otherwise what disagreed and by how much.
pub fn compare(device: &Answers, cpu: &Answers) -> Result<(), String> {
    const TOL: f64 = 1e-4;
    let checks = [
        ("the block Gram K_BB", &device.kbb, &cpu.kbb),
        ("the projection Phi_B theta", &device.g, &cpu.g),
        ("the trust-region block solve", &device.alpha, &cpu.alpha),
        ("the prediction", &device.pred, &cpu.pred),
    ];
    for (what, d, c) in checks {
        let dev = deviation(what, d, c)?;
        if dev > TOL {
            return Err(format!(
                "{what} differs from the CPU's by {dev:.2e} of its scale (allowed {TOL:.0e})"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU twin passes against itself; each answer perturbed by 1e-3 of its scale (or
    /// made NaN) fails, naming what disagreed.
    #[test]
    fn the_verdict_catches_a_perturbed_device() {
        let p = Problem::new();
        let (cpu, _) = p.cpu();
        assert!(cpu.alpha.iter().any(|&a| a > 0.0), "a trivial solve");
        assert_eq!(compare(&cpu, &cpu), Ok(()));
        let names = ["K_BB", "Phi_B theta", "trust-region", "prediction"];
        for (which, name) in names.iter().enumerate() {
            for nan in [false, true] {
                let mut dev = cpu.clone();
                let v = match which {
                    0 => &mut dev.kbb,
                    1 => &mut dev.g,
                    2 => &mut dev.alpha,
                    _ => &mut dev.pred,
                };
                let scale = 1.0 + v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                let i = v.len() / 2;
                v[i] = if nan { f64::NAN } else { v[i] + 1e-3 * scale };
                let err = compare(&dev, &cpu).unwrap_err();
                assert!(err.contains(name), "{err}");
            }
        }
        // Rounding-sized differences pass.
        let mut dev = cpu.clone();
        for v in dev.kbb.iter_mut().chain(dev.alpha.iter_mut()) {
            *v *= 1.0 + 1e-7;
        }
        assert_eq!(compare(&dev, &cpu), Ok(()));
    }
}
