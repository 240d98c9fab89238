//! Fits across processes: every rank holds a share of the rows, and parallel block
//! minimization ([`crate::solver::dbcd::pbm`]) trains one model on all of them.

use std::any::TypeId;

use super::{FitOptions, Joker, Model, same_precision};
use crate::data::Dataset;
use crate::distributed::Collective;
use crate::distributed::partition::{Partition, place};
use crate::error::{JokerError, Result, invalid};
use crate::scalar::Scalar;
use crate::solver::dbcd::pbm::PbmConfig;

/// A distributed fit's communicator and outer-loop settings.
pub(super) struct Dist<'a> {
    pub(super) comm: &'a dyn Collective,
    pub(super) pbm: &'a PbmConfig,
}

impl Joker {
    /// Trains one model on the rows of every rank of `comm`, by parallel block minimization
    /// with DBCD-TR on each rank's rows ([`crate::solver::dbcd::pbm`]). Every rank calls it,
    /// with the same parameters, `shard` holding its own rows (at least one; the columns
    /// agree across ranks). Every rank gets the same model; only rank 0 runs the progress
    /// callback and scores the validation set, so only rank 0 needs to pass them.
    ///
    /// The classes, the standardisation, the target scaling and the class weights are taken
    /// over all rows, as a single process would; a bandwidth heuristic looks at rank 0's rows.
    /// On one rank the model is that of [`fit_with`](Joker::fit_with), iterate for iterate.
    /// With the exact kernel every rank receives a copy of every rank's rows (to form
    /// `K(X, X_r)`), and the model's support rows are all of them.
    /// Each rank fits on the device the parameters resolve to, as [`fit_with`](Joker::fit_with)
    /// does (ranks that share a machine share its GPU unless each is given its own
    /// [`Device::Cuda`](crate::Device::Cuda)); a device that fails mid-fit is an error, not a
    /// fall back to the CPU.
    ///
    /// # Errors
    /// [`JokerError::Unsupported`] for full KRR, the doubly stochastic solvers, probabilities,
    /// the bias feature and warm starts; the errors of [`fit_with`](Joker::fit_with); and
    /// [`JokerError::Distributed`] when another rank failed. A rank that fails tells the others
    /// ([`Collective::fail`]: over MPI that aborts the job), so that none waits for it.
    pub fn fit_distributed<U: Scalar>(
        &self,
        shard: &Dataset<U>,
        comm: &dyn Collective,
        pbm: &PbmConfig,
        opts: FitOptions<'_, U>,
    ) -> Result<Model> {
        // compiled here once per precision, as `fit_with` (`Scalar` is sealed: f32 or f64)
        if TypeId::of::<U>() == TypeId::of::<f32>() {
            // SAFETY: `U` is `f32` (equal type ids).
            let (shard, opts) = unsafe { same_precision::<U, f32>(shard, opts) };
            self.fit_distributed_single(shard, comm, pbm, opts)
        } else {
            // SAFETY: `U` is `f64`: the only other `Scalar`.
            let (shard, opts) = unsafe { same_precision::<U, f64>(shard, opts) };
            self.fit_distributed_double(shard, comm, pbm, opts)
        }
    }

    /// [`fit_distributed`](Joker::fit_distributed) in f32, compiled here.
    #[inline(never)]
    fn fit_distributed_single(
        &self,
        shard: &Dataset<f32>,
        comm: &dyn Collective,
        pbm: &PbmConfig,
        opts: FitOptions<'_, f32>,
    ) -> Result<Model> {
        self.fit_distributed_any(shard, comm, pbm, opts)
    }

    /// [`fit_distributed`](Joker::fit_distributed) in f64, compiled here.
    #[inline(never)]
    fn fit_distributed_double(
        &self,
        shard: &Dataset<f64>,
        comm: &dyn Collective,
        pbm: &PbmConfig,
        opts: FitOptions<'_, f64>,
    ) -> Result<Model> {
        self.fit_distributed_any(shard, comm, pbm, opts)
    }

    /// [`fit_distributed`](Joker::fit_distributed) in either precision.
    fn fit_distributed_any<U: Scalar>(
        &self,
        shard: &Dataset<U>,
        comm: &dyn Collective,
        pbm: &PbmConfig,
        mut opts: FitOptions<'_, U>,
    ) -> Result<Model> {
        // the same parameters fail alike on every rank: no rank waits for another
        self.check_distributable(&opts, pbm)?;
        if comm.rank() != 0 {
            opts.validation = None;
            opts.progress = None;
        }
        let out = self.placed(shard, comm, pbm).and_then(|placed| {
            let rows = placed.as_ref().unwrap_or(shard);
            self.fit_on(rows, opts, Some(Dist { comm, pbm }))
        });
        if let Err(e) = &out
            && !matches!(e, JokerError::Distributed(_))
        {
            comm.fail(&e.to_string());
        }
        out
    }

    /// This rank's rows under `pbm.partition` (`None`: the shard as it is).
    fn placed<U: Scalar>(
        &self,
        shard: &Dataset<U>,
        comm: &dyn Collective,
        pbm: &PbmConfig,
    ) -> Result<Option<Dataset<U>>> {
        if pbm.partition == Partition::File {
            return Ok(None);
        }
        let counts = comm.gather(&[shard.len() as f64])?;
        let first_row = counts[..comm.rank()].iter().map(|c| c[0] as usize).sum();
        place(shard, pbm.partition, self.solver.seed, first_row, comm).map(Some)
    }

    /// What a distributed fit cannot do yet, refused before any communication.
    fn check_distributable<U>(&self, opts: &FitOptions<'_, U>, pbm: &PbmConfig) -> Result<()> {
        let refuse = |what: &str| {
            Err(JokerError::Unsupported(format!(
                "distributed fits do not support {what} yet"
            )))
        };
        if self.full_krr.is_some() {
            return refuse("full KRR");
        }
        if self.dsg.is_some() {
            return refuse("the doubly stochastic solvers");
        }
        if self.probability {
            return refuse("calibrated probabilities (Platt scaling)");
        }
        if self.bias > 0.0 {
            return refuse("the bias feature");
        }
        if opts.warm_start.is_some() {
            return refuse("warm starts");
        }
        if pbm.partition != Partition::File
            && (opts.sample_weight.is_some() || pbm.checkpoint.is_some() || pbm.resume.is_some())
        {
            return refuse(
                "sample weights, checkpoints or resuming with rows moved between the ranks (use the file partition)",
            );
        }
        if let Some(c) = &pbm.checkpoint {
            c.validate()?;
        }
        if pbm.max_outer == 0 {
            return Err(invalid("max_outer", "must be at least 1"));
        }
        Ok(())
    }
}
