//! Training across processes: the few collective operations a distributed fit needs, behind
//! one trait, so that the solver reads the same over MPI, over threads in one process and in
//! a single process.
//!
//! * [`Single`]: one rank; every collective is the identity (a distributed fit on one rank is
//!   the ordinary fit).
//! * [`Threads`]: `K` ranks as threads of one process, sharing memory. It runs the distributed
//!   algorithm without MPI (tests, and simulating many ranks on one machine), and its sums are
//!   taken in rank order, so its results do not depend on the scheduling.
//! * `Mpi` (cargo feature `mpi`): a duplicate of an MPI communicator.
//!
//! Decisions that every rank must take alike (a step size, whether to stop) are computed on
//! rank 0 and broadcast ([`Collective::decide`]), so that floating-point sums that an MPI
//! implementation might round differently on different ranks can never split the ranks.

pub mod checkpoint;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod partition;
mod threads;

pub use self::threads::Threads;

use crate::error::Result;

/// The collective operations of a distributed fit. Every rank calls the same operations in
/// the same order; an operation fails (rather than waits forever) when another rank has
/// failed, where the transport can tell.
pub trait Collective {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Element-wise sum over the ranks, in place; every rank gets the sums.
    fn sum(&self, buf: &mut [f64]) -> Result<()>;
    /// Element-wise maximum over the ranks, in place.
    fn max(&self, buf: &mut [f64]) -> Result<()>;
    /// Rank `root`'s values, copied into `buf` on every rank (all `buf` of the same length).
    fn broadcast(&self, root: usize, buf: &mut [f64]) -> Result<()>;
    /// Every rank's `local`, in rank order, on every rank (the lengths may differ).
    fn gather(&self, local: &[f64]) -> Result<Vec<Vec<f64>>>;
    /// All to all: `parts[q]` goes to rank `q` (`parts` has one entry per rank); returns what
    /// every rank sent to this one, in rank order.
    fn exchange(&self, parts: &[Vec<f64>]) -> Result<Vec<Vec<f64>>>;
    /// Tells the other ranks that this one failed, so that their next collective fails too
    /// instead of waiting; over MPI this aborts the job.
    fn fail(&self, why: &str);

    /// Rank 0's `values`, on every rank: the way to take a decision alike everywhere.
    fn decide(&self, values: &mut [f64]) -> Result<()> {
        self.broadcast(0, values)
    }
    /// Element-wise sum over the ranks, rank 0's sums on every rank: for sums that decide
    /// something (a reduction need not round alike on every rank).
    fn agreed_sum(&self, buf: &mut [f64]) -> Result<()> {
        self.sum(buf)?;
        if self.size() > 1 {
            self.decide(buf)?;
        }
        Ok(())
    }
    /// The sum of one number over the ranks.
    fn sum_one(&self, v: f64) -> Result<f64> {
        let mut b = [v];
        self.sum(&mut b)?;
        Ok(b[0])
    }
}

/// One rank: every collective is the identity.
#[derive(Clone, Copy, Debug, Default)]
pub struct Single;

impl Collective for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn sum(&self, _buf: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn max(&self, _buf: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _root: usize, _buf: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn gather(&self, local: &[f64]) -> Result<Vec<Vec<f64>>> {
        Ok(vec![local.to_vec()])
    }
    fn exchange(&self, parts: &[Vec<f64>]) -> Result<Vec<Vec<f64>>> {
        Ok(parts.to_vec())
    }
    fn fail(&self, _why: &str) {}
}

/// The union of every rank's sorted distinct values (class labels), sorted.
pub fn union_sorted(comm: &dyn Collective, local: &[f64]) -> Result<Vec<f64>> {
    let mut all: Vec<f64> = comm.gather(local)?.into_iter().flatten().collect();
    all.sort_by(f64::total_cmp);
    all.dedup();
    Ok(all)
}
