//! The collectives over MPI (cargo feature `mpi`).
//!
//! The library never initialises or finalises MPI on its own account: a program calls
//! [`init`] once and keeps the returned [`Universe`] alive for as long as it uses MPI (its
//! drop finalises), or a host that initialised MPI itself hands a communicator to
//! [`Mpi::from_raw`]. Every [`Mpi`] works on a duplicate of its communicator, so that its
//! messages never meet the host's.

use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::Collective;
use crate::error::{JokerError, Result};

/// Exit code of a job aborted because a rank failed or panicked.
pub const ABORT_CODE: i32 = 101;

/// Initialises MPI for a program that uses it from its main thread only (other threads,
/// such as the solver's, never call MPI). `None` if MPI was initialised already.
pub fn init() -> Option<Universe> {
    mpi::initialize_with_threading(mpi::Threading::Funneled).map(|(u, _)| u)
}

/// Makes a panic on any rank abort the whole job (with [`ABORT_CODE`]) instead of leaving the
/// other ranks waiting in a collective forever: unwinding would finalise MPI on the panicking
/// rank while the others wait for it. For programs (the command line), not for libraries
/// loaded into a host, which return errors instead.
pub fn abort_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        if mpi::is_initialized() && !mpi::is_finalized() {
            SimpleCommunicator::world().abort(ABORT_CODE);
        }
    }));
}

/// A distributed fit's communicator: a duplicate of an MPI communicator.
pub struct Mpi {
    comm: SimpleCommunicator,
}

impl Mpi {
    /// All the processes of the job (a duplicate of `MPI_COMM_WORLD`).
    pub fn world(universe: &Universe) -> Self {
        Mpi {
            comm: universe.world().duplicate(),
        }
    }

    /// This rank's place among the ranks that share its machine (`MPI_Comm_split_type` with
    /// `MPI_COMM_TYPE_SHARED`, ordered by rank): what spreads them over the machine's GPUs
    /// ([`crate::device::spread_auto`]).
    pub fn local_rank(&self) -> usize {
        self.comm.split_shared(self.comm.rank()).rank() as usize
    }

    /// A duplicate of the host's communicator `raw` (for the C ABI).
    ///
    /// # Safety
    /// `raw` must be a valid communicator of an MPI that is initialised and not finalised,
    /// the same MPI implementation this library was built against.
    pub unsafe fn from_raw(raw: mpi::ffi::MPI_Comm) -> Result<Self> {
        let mut dup = std::mem::MaybeUninit::<mpi::ffi::MPI_Comm>::uninit();
        // SAFETY: `raw` is a valid communicator (the caller's promise); MPI_Comm_dup writes
        // a new handle into `dup` on success, which is then owned by the wrapper (freed on
        // drop).
        let rc = unsafe { mpi::ffi::MPI_Comm_dup(raw, dup.as_mut_ptr()) };
        if rc != 0 {
            return Err(JokerError::Distributed(format!(
                "MPI_Comm_dup failed with code {rc}"
            )));
        }
        // SAFETY: MPI_Comm_dup succeeded, so `dup` is initialised and a valid communicator.
        let comm = unsafe { SimpleCommunicator::from_raw(dup.assume_init()) };
        Ok(Mpi { comm })
    }
}

impl Collective for Mpi {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }
    fn size(&self) -> usize {
        self.comm.size() as usize
    }
    fn sum(&self, buf: &mut [f64]) -> Result<()> {
        // MPI_IN_PLACE is not available through these bindings: reduce from a copy.
        let send = buf.to_vec();
        self.comm
            .all_reduce_into(&send[..], buf, SystemOperation::sum());
        Ok(())
    }
    fn max(&self, buf: &mut [f64]) -> Result<()> {
        let send = buf.to_vec();
        self.comm
            .all_reduce_into(&send[..], buf, SystemOperation::max());
        Ok(())
    }
    fn broadcast(&self, root: usize, buf: &mut [f64]) -> Result<()> {
        self.comm.process_at_rank(root as i32).broadcast_into(buf);
        Ok(())
    }
    fn gather(&self, local: &[f64]) -> Result<Vec<Vec<f64>>> {
        let size = self.size();
        let n = i32::try_from(local.len()).map_err(|_| {
            JokerError::Distributed(format!("{} values are too many to gather", local.len()))
        })?;
        let mut counts = vec![0i32; size];
        self.comm.all_gather_into(&n, &mut counts[..]);
        let displs: Vec<i32> = counts
            .iter()
            .scan(0i32, |acc, &c| {
                let d = *acc;
                *acc = acc.saturating_add(c);
                Some(d)
            })
            .collect();
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let mut all = vec![0.0f64; total];
        {
            let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            self.comm.all_gather_varcount_into(local, &mut part);
        }
        let mut out = Vec::with_capacity(size);
        let mut at = 0;
        for &c in &counts {
            out.push(all[at..at + c as usize].to_vec());
            at += c as usize;
        }
        Ok(out)
    }
    fn exchange(&self, parts: &[Vec<f64>]) -> Result<Vec<Vec<f64>>> {
        let size = self.size();
        if parts.len() != size {
            return Err(JokerError::Distributed(format!(
                "an exchange among {size} ranks needs one part per rank, got {}",
                parts.len()
            )));
        }
        let count = |n: usize| {
            i32::try_from(n).map_err(|_| {
                JokerError::Distributed(format!("{n} values are too many to send at once"))
            })
        };
        let send_counts: Vec<i32> = parts
            .iter()
            .map(|p| count(p.len()))
            .collect::<Result<_>>()?;
        let mut recv_counts = vec![0i32; size];
        self.comm
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let offsets = |c: &[i32]| -> Vec<i32> {
            c.iter()
                .scan(0i32, |acc, &v| {
                    let d = *acc;
                    *acc = acc.saturating_add(v);
                    Some(d)
                })
                .collect()
        };
        let (send_displs, recv_displs) = (offsets(&send_counts), offsets(&recv_counts));
        let send: Vec<f64> = parts.concat();
        count(send.len())?;
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        count(total)?;
        let mut recv = vec![0.0f64; total];
        {
            let out = mpi::datatype::Partition::new(&send[..], &send_counts[..], &send_displs[..]);
            let mut into = PartitionMut::new(&mut recv[..], &recv_counts[..], &recv_displs[..]);
            self.comm.all_to_all_varcount_into(&out, &mut into);
        }
        let mut res = Vec::with_capacity(size);
        let mut at = 0;
        for &c in &recv_counts {
            res.push(recv[at..at + c as usize].to_vec());
            at += c as usize;
        }
        Ok(res)
    }
    /// Aborts the job with [`ABORT_CODE`], after one line on standard error: the process
    /// ends here, and no caller could report `why` any more.
    fn fail(&self, why: &str) {
        eprintln!(
            "joker: rank {} of {} failed: {why}",
            self.rank(),
            self.size()
        );
        self.comm.abort(ABORT_CODE);
    }
}
