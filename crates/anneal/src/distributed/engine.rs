//! The anneal engine of one process of several ([`RankEngine`]): the CPU
//! engine over this rank's rows, its sums combined with the other ranks'
//! each step through a [`Communicator`]. Every rank runs the same driver
//! (`crate::run_with`) on the same combined statistics; the anchors any
//! rank sets are rank 0's, broadcast, so rank 0's maintenance decides.

use crate::cpu::{CpuEngine, SumsLayout};
use crate::{engine::Engine, error::AnnealError, input::Problem, vocab::AnchorStats};

use super::{rows_of, Communicator, DistError};

/// One rank's engine: its rows on the CPU, the rest through `C`.
#[derive(Debug)]
pub struct RankEngine<C> {
    local: CpuEngine,
    comm: C,
    n: usize,
    d: usize,
    m: usize,
    stats: AnchorStats,
}

impl<C: Communicator> RankEngine<C> {
    /// The engine of `problem` (from `crate::validate_rows`: this rank's
    /// rows) over `comm`.
    pub fn new(problem: &Problem<'_>, comm: C) -> Self {
        Self {
            local: CpuEngine::for_rows(problem.points(), problem.rows().len(), problem.d()),
            comm,
            n: problem.n(),
            d: problem.d(),
            m: 0,
            stats: AnchorStats {
                counts: Vec::new(),
                sumsq: Vec::new(),
            },
        }
    }

    /// The communicator (to gather more after the run).
    pub fn comm(&mut self) -> &mut C {
        &mut self.comm
    }
}

impl<C: Communicator + Send> Engine for RankEngine<C> {
    fn initial_anchors(&mut self, problem: &Problem<'_>) -> Result<Vec<f32>, AnnealError> {
        initial_anchors(&mut self.comm, problem)
    }

    fn set_anchors(&mut self, anchors: &[f32], m: usize) -> Result<(), AnnealError> {
        let (anchors, m) = broadcast_anchors(&mut self.comm, anchors, m, self.d)?;
        self.m = m;
        self.local.set_anchors(&anchors, m)
    }

    fn step(&mut self, eta: f32) -> Result<f64, AnnealError> {
        let layout = SumsLayout {
            m: self.m,
            d: self.d,
        };
        let mut sums = self.local.local_sums()?;
        self.comm.all_reduce_sum(&mut sums, "a step's statistics")?;
        self.local.move_anchors(&sums, eta);
        self.stats = layout.stats(&sums);
        Ok(layout.distance_sum(&sums) / self.n as f64)
    }

    fn stats(&mut self) -> Result<AnchorStats, AnnealError> {
        Ok(self.stats.clone())
    }

    fn anchors(&mut self) -> Result<Vec<f32>, AnnealError> {
        self.local.anchors()
    }

    fn anchor_neighbors(&mut self) -> Result<(Vec<u32>, Vec<f32>), AnnealError> {
        self.local.anchor_neighbors()
    }

    /// Every point's anchor on rank 0, in row order; nothing on the others.
    fn assignments(&mut self) -> Result<Vec<u32>, AnnealError> {
        let local = self.local.assignments()?;
        gather_assignments(&mut self.comm, self.n, |offset, out| {
            out.copy_from_slice(&local[offset..offset + out.len()]);
            Ok(())
        })
    }
}

/// The initial anchors of `problem` (this rank's rows of it), assembled
/// over the ranks: each copies the anchors among its rows into an
/// otherwise zero `m × d` matrix ([`own_initial_anchors`]), and their sum
/// is the matrix (each anchor comes from one rank; a `-0.0` coordinate
/// comes out `+0.0`, which no distance tells apart).
pub(super) fn initial_anchors<C: Communicator>(
    comm: &mut C,
    problem: &Problem<'_>,
) -> Result<Vec<f32>, AnnealError> {
    let mut matrix: Vec<f64> = own_initial_anchors(problem)?
        .into_iter()
        .map(f64::from)
        .collect();
    comm.all_reduce_sum(&mut matrix, "the initial anchors")?;
    Ok(matrix.into_iter().map(|v| v as f32).collect())
}

/// This rank's part of the initial anchors: an `m × d` matrix holding the
/// initial anchors that are among its rows, zero elsewhere.
pub(super) fn own_initial_anchors(problem: &Problem<'_>) -> Result<Vec<f32>, AnnealError> {
    let (n, d, m, rows) = (problem.n(), problem.d(), problem.m(), problem.rows());
    let mut matrix = vec![0.0f32; m * d];
    let points = problem.points();
    for (j, row) in crate::engine::initial_rows(n, m, problem.params().seed)?
        .into_iter()
        .enumerate()
    {
        if rows.contains(&row) {
            let local = row - rows.start;
            matrix[j * d..(j + 1) * d]
                .copy_from_slice(&points.range_f32(local * d..(local + 1) * d));
        }
    }
    Ok(matrix)
}

/// Rank 0's `m` anchors (`m × d`) on every rank: the anchors every rank
/// sets are rank 0's, so rank 0's maintenance decides (the others'
/// `anchors` and `m` are not read).
pub(super) fn broadcast_anchors<C: Communicator>(
    comm: &mut C,
    anchors: &[f32],
    m: usize,
    d: usize,
) -> Result<(Vec<f32>, usize), AnnealError> {
    let mut bytes = Vec::new();
    if comm.rank() == 0 {
        let values = crate::vocab::anchor_values(anchors, m, d)?;
        bytes.extend((m as u64).to_le_bytes());
        bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    }
    comm.broadcast(&mut bytes, "setting the anchors")?;
    let protocol = |what: String| AnnealError::Dist(DistError::Protocol { rank: 0, what });
    let Some((head, values)) = bytes.split_first_chunk::<8>() else {
        return Err(protocol(format!(
            "{} bytes where the anchors' count (8 bytes) is due",
            bytes.len()
        )));
    };
    let m = usize::try_from(u64::from_le_bytes(*head)).unwrap_or(usize::MAX);
    // The count comes from the wire: checked, never trusted to multiply.
    if m.checked_mul(d).and_then(|v| v.checked_mul(4)) != Some(values.len()) {
        return Err(protocol(format!(
            "{} bytes of anchors for {m} anchors of dimension {d}",
            values.len()
        )));
    }
    let anchors = values
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("chunks of 4")))
        .collect();
    Ok((anchors, m))
}

/// Assignments a rank reads and sends at a time while gathering (4 MiB):
/// it sends each piece while it reads the next.
const GATHER_PIECE: usize = 1 << 20;

/// Every rank's assignments on rank 0, in row order (`n` in all, each
/// rank's rows as [`rows_of`] splits them); empty on the other ranks.
/// `read(offset, out)` writes this rank's assignments `offset..` into
/// `out`. Nothing is copied twice: rank 0 reads its own straight into
/// place while a thread receives the others' straight into theirs, and the
/// others read theirs in pieces of 4 MiB, a thread sending each
/// piece while the next is read.
pub fn gather_assignments<C: Communicator + Send>(
    comm: &mut C,
    n: usize,
    mut read: impl FnMut(usize, &mut [u32]) -> Result<(), AnnealError>,
) -> Result<Vec<u32>, AnnealError> {
    let (rank, world) = (comm.rank(), comm.world_size());
    let during = "gathering the assignments";
    let rows = |r| rows_of(r, world, n).ok_or(AnnealError::MoreRanksThanPoints { world, n });
    let mine = rows(rank)?;
    if rank != 0 {
        let mut values = vec![0u32; mine.len()];
        return std::thread::scope(|scope| {
            let (pieces, to_send) = std::sync::mpsc::channel::<&[u32]>();
            let sender = scope.spawn(move || {
                for piece in to_send {
                    comm.send_part(bytemuck::cast_slice(piece), during)?;
                }
                Ok::<(), DistError>(())
            });
            let mut read_all = Ok(());
            for (k, piece) in values.chunks_mut(GATHER_PIECE).enumerate() {
                if let Err(e) = read(k * GATHER_PIECE, piece) {
                    read_all = Err(e);
                    break;
                }
                // The wire is little-endian (a no-op on little-endian hosts).
                piece.iter_mut().for_each(|v| *v = v.to_le());
                let piece: &[u32] = piece;
                if pieces.send(piece).is_err() {
                    break; // The sender failed; its error follows.
                }
            }
            drop(pieces);
            let sent = sender
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            read_all?;
            sent?;
            Ok(Vec::new())
        });
    }
    let mut all = vec![0u32; n];
    let (head, mut rest) = all.split_at_mut(mine.end);
    let mut slots = Vec::with_capacity(world - 1);
    for r in 1..world {
        let (slot, tail) = rest.split_at_mut(rows(r)?.len());
        slots.push(bytemuck::cast_slice_mut::<u32, u8>(slot));
        rest = tail;
    }
    std::thread::scope(|scope| {
        let receiver = scope.spawn(move || comm.recv_parts(&mut slots, during));
        let read_own = read(0, head);
        let received = receiver
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        read_own?;
        Ok::<(), AnnealError>(received?)
    })?;
    all[mine.end..]
        .iter_mut()
        .for_each(|v| *v = u32::from_le(*v));
    Ok(all)
}
