//! The device side of the self-check ([`crate::backend::selfcheck`]), run once per device
//! and process before a fit trusts the GPU.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::context::Cuda;
use crate::backend::selfcheck::{Answers, Problem, ROWS, compare};
use crate::error::Result;

impl Cuda {
    /// The fixed problem's answers computed on this device: the fused Gram and projection,
    /// the trust-region solve on the CPU's `K_BB` (`k32`, from [`Problem::cpu`]), the
    /// prediction.
    pub fn self_check_answers(&self, p: &Problem, k32: &[f32]) -> Result<Answers> {
        let (kbb, g) = self.block_gram(&p.map, &p.x, ROWS, &p.theta, 1)?;
        let (mut alpha, mut gbar) = p.start(k32);
        self.tr_solve(
            k32,
            ROWS,
            p.loss,
            &p.coords,
            &mut alpha,
            &mut gbar,
            4.0,
            &p.trust_region,
        )?;
        let pred = self.predict(&p.map, &p.x, ROWS, &p.theta, 1)?;
        Ok(Answers {
            kbb: kbb.iter().map(|&v| v as f64).collect(),
            g,
            alpha,
            pred,
        })
    }

    /// Whether this device passed the self-check (run on the first call for each device in
    /// the process, remembered after): `Err` says what failed or disagreed with the CPU.
    pub fn trusted(&self) -> std::result::Result<(), String> {
        static VERDICTS: OnceLock<Mutex<HashMap<usize, std::result::Result<(), String>>>> =
            OnceLock::new();
        let index = self.info().index;
        let verdicts = VERDICTS.get_or_init(|| Mutex::new(HashMap::new()));
        let mut v = verdicts.lock().unwrap_or_else(|e| e.into_inner());
        v.entry(index)
            .or_insert_with(|| {
                let p = Problem::new();
                let (cpu, k32) = p.cpu();
                let device = self
                    .self_check_answers(&p, &k32)
                    .map_err(|e| format!("a self-check launch failed: {e}"))?;
                compare(&device, &cpu).map_err(|e| format!("self-check: {e}"))
            })
            .clone()
    }
}
