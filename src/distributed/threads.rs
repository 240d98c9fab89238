//! `K` ranks as threads of one process.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::Collective;
use crate::error::{JokerError, Result};

/// One rank of a group of threads that act as the ranks of a distributed fit. Build the
/// group with [`Threads::group`] and move one member into each thread. Sums are taken in rank
/// order, so every rank gets the same bits and a run is reproducible.
pub struct Threads {
    rank: usize,
    shared: Arc<Shared>,
}

/// What the members share: one slot per rank, and a generation-counted rendezvous.
struct Shared {
    size: usize,
    state: Mutex<Rendezvous>,
    turn: Condvar,
}

struct Rendezvous {
    /// Each rank's contribution to the current operation.
    slots: Vec<Vec<f64>>,
    /// Each rank's parts for the others, in an exchange.
    parts: Vec<Vec<Vec<f64>>>,
    /// Ranks arrived at the current phase.
    arrived: usize,
    /// Phases completed (each operation is two: contribute, then read).
    generation: u64,
    /// Why a rank failed, once one has.
    failed: Option<String>,
}

impl Threads {
    /// A group of `size` ranks (`size >= 1`), in rank order.
    pub fn group(size: usize) -> Vec<Threads> {
        let size = size.max(1);
        let shared = Arc::new(Shared {
            size,
            state: Mutex::new(Rendezvous {
                slots: vec![Vec::new(); size],
                parts: vec![Vec::new(); size],
                arrived: 0,
                generation: 0,
                failed: None,
            }),
            turn: Condvar::new(),
        });
        (0..size)
            .map(|rank| Threads {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Rendezvous> {
        // A poisoned lock means a rank panicked while holding it; the state is still sound
        // (the panicking rank is gone and `fail` below records it).
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until every rank has reached this phase; fails if a rank failed.
    fn wait_all<'g>(
        &self,
        mut g: MutexGuard<'g, Rendezvous>,
    ) -> Result<MutexGuard<'g, Rendezvous>> {
        if let Some(why) = &g.failed {
            return Err(JokerError::Distributed(why.clone()));
        }
        let generation = g.generation;
        g.arrived += 1;
        if g.arrived == self.shared.size {
            g.arrived = 0;
            g.generation += 1;
            self.shared.turn.notify_all();
        } else {
            while g.generation == generation && g.failed.is_none() {
                g = self.shared.turn.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            if let Some(why) = &g.failed {
                return Err(JokerError::Distributed(why.clone()));
            }
        }
        Ok(g)
    }

    /// Puts `local` in this rank's slot, waits for all, and returns `read(slots)`, then waits
    /// again so that no slot is overwritten before every rank has read.
    fn meet<R>(&self, local: &[f64], read: impl FnOnce(&[Vec<f64>]) -> R) -> Result<R> {
        let mut g = self.lock();
        g.slots[self.rank].clear();
        g.slots[self.rank].extend_from_slice(local);
        let g = self.wait_all(g)?;
        let out = read(&g.slots);
        drop(self.wait_all(g)?);
        Ok(out)
    }

    fn combine(&self, buf: &mut [f64], op: fn(f64, f64) -> f64) -> Result<()> {
        let n = buf.len();
        let out = self.meet(buf, |slots| {
            if slots.iter().any(|s| s.len() != n) {
                return Err(JokerError::Distributed(
                    "ranks reduced buffers of different lengths".into(),
                ));
            }
            let mut acc = slots[0].clone();
            for s in &slots[1..] {
                for (a, v) in acc.iter_mut().zip(s) {
                    *a = op(*a, *v);
                }
            }
            Ok(acc)
        })??;
        buf.copy_from_slice(&out);
        Ok(())
    }
}

impl Collective for Threads {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn sum(&self, buf: &mut [f64]) -> Result<()> {
        self.combine(buf, |a, b| a + b)
    }
    fn max(&self, buf: &mut [f64]) -> Result<()> {
        self.combine(buf, f64::max)
    }
    fn broadcast(&self, root: usize, buf: &mut [f64]) -> Result<()> {
        let n = buf.len();
        let out = self.meet(buf, |slots| slots.get(root).cloned())?;
        match out {
            Some(v) if v.len() == n => {
                buf.copy_from_slice(&v);
                Ok(())
            }
            _ => Err(JokerError::Distributed(format!(
                "broadcast from rank {root} of {} with buffers of different lengths",
                self.size()
            ))),
        }
    }
    fn gather(&self, local: &[f64]) -> Result<Vec<Vec<f64>>> {
        self.meet(local, |slots| slots.to_vec())
    }
    fn exchange(&self, parts: &[Vec<f64>]) -> Result<Vec<Vec<f64>>> {
        let size = self.size();
        let mut g = self.lock();
        g.parts[self.rank] = parts.to_vec();
        let g = self.wait_all(g)?;
        let ok = g.parts.iter().all(|p| p.len() == size);
        let mine: Vec<Vec<f64>> = g
            .parts
            .iter()
            .filter_map(|p| p.get(self.rank).cloned())
            .collect();
        drop(self.wait_all(g)?);
        if !ok {
            return Err(JokerError::Distributed(format!(
                "an exchange among {size} ranks needs one part per rank"
            )));
        }
        Ok(mine)
    }
    fn fail(&self, why: &str) {
        let mut g = self.lock();
        if g.failed.is_none() {
            g.failed = Some(format!("rank {} failed: {why}", self.rank));
        }
        self.shared.turn.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_maxima_broadcasts_and_gathers_agree_on_every_rank() {
        let group = Threads::group(4);
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(move || {
                        let r = c.rank() as f64;
                        let mut a = vec![r, 2.0 * r + 0.5];
                        c.sum(&mut a).unwrap();
                        let mut m = vec![-r, r];
                        c.max(&mut m).unwrap();
                        let mut b = vec![r + 10.0];
                        c.broadcast(2, &mut b).unwrap();
                        let g = c.gather(&vec![r; c.rank()]).unwrap();
                        (a, m, b, g)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (a, m, b, g) in out {
            assert_eq!(a, vec![6.0, 14.0]);
            assert_eq!(m, vec![0.0, 3.0]);
            assert_eq!(b, vec![12.0]);
            assert_eq!(g.len(), 4);
            for (r, v) in g.iter().enumerate() {
                assert_eq!(v, &vec![r as f64; r]);
            }
        }
    }

    #[test]
    fn an_exchange_delivers_each_part_to_its_rank() {
        let group = Threads::group(3);
        let out: Vec<Vec<Vec<f64>>> = std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(move || {
                        // rank r sends q copies of 10 r + q to rank q
                        let parts: Vec<Vec<f64>> = (0..3)
                            .map(|q| vec![(10 * c.rank() + q) as f64; q])
                            .collect();
                        c.exchange(&parts).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (q, got) in out.iter().enumerate() {
            for (r, part) in got.iter().enumerate() {
                assert_eq!(part, &vec![(10 * r + q) as f64; q]);
            }
        }
    }

    #[test]
    fn a_failed_rank_fails_the_others_instead_of_hanging() {
        let group = Threads::group(3);
        let out: Vec<Result<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(move || {
                        if c.rank() == 1 {
                            c.fail("bad input");
                            return Err(JokerError::Distributed("stopped".into()));
                        }
                        let mut a = vec![1.0];
                        c.sum(&mut a)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (r, o) in out.iter().enumerate() {
            let e = o.as_ref().expect_err("every rank must fail").to_string();
            if r != 1 {
                assert!(e.contains("rank 1 failed: bad input"), "{e}");
            }
        }
    }

    #[test]
    fn different_lengths_are_an_error() {
        let group = Threads::group(2);
        let out: Vec<Result<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = group
                .iter()
                .map(|c| {
                    s.spawn(move || {
                        let mut a = vec![1.0; 1 + c.rank()];
                        c.sum(&mut a)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(out.iter().all(|o| o.is_err()));
    }
}
