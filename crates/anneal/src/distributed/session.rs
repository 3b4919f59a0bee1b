//! One rank's session from its arrival to its run: the rendezvous (on a
//! thread, so that it waits for the slowest rank while this one checks and
//! uploads its rows), the TCP collectives over its connections, on a GPU
//! the watchdog and NCCL's join, and the barrier that starts every rank's
//! run together. [`meet`] starts it, [`Meeting::join`] finishes the setup
//! and gives the [`RankSession`], whose [`RankSession::run`] runs the
//! anneal on this rank's engine (the CPU's or one GPU's).
//!
//! What the caller keeps: reading the launcher's variables ([`RankEnv`]),
//! which rows are this rank's ([`rows_of`](super::rows_of)), its
//! [`Problem`] over them (`crate::validate_rows`), the backend, and what
//! it prints.

use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use gpu_core::{AbortHandle, BackendKind};

use super::DistError;
use super::{
    rendezvous, Communicator, GpuRankEngine, Link, RankEngine, RankEnv, Refusal, TcpComm, Watchdog,
    NCCL_ID_BYTES,
};
use crate::{
    driver::{Phases, Progress},
    error::AnnealError,
    input::Problem,
    target::Target,
    vocab::Output,
};

/// Seconds of each part of a session's setup ([`RankSession::times`]); 0
/// where the part did not run. The rendezvous runs beside the caller's own
/// work between [`meet`] and [`Meeting::join`] and beside the upload, so
/// the parts can add up to more than the setup.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SessionTimes {
    /// This rank's rows uploaded to its GPU.
    pub upload: f64,
    /// From [`meet`] until every rank had arrived.
    pub rendezvous: f64,
    /// `ncclCommInitRank`.
    pub nccl_init: f64,
    /// NCCL's first call of each collective and first sends, and the GPU
    /// engine's host side.
    pub warmup: f64,
    /// Waiting for the other ranks to end their setup.
    pub barrier: f64,
    /// The CPU engine's own copy of the rows.
    pub engine: f64,
}

/// What the rendezvous thread returns: the link and rank 0's NCCL id, and
/// the seconds it waited.
type Met = (Result<(Link, [u8; NCCL_ID_BYTES]), DistError>, f64);

/// A rendezvous under way ([`meet`]). Dropped without [`Meeting::join`]
/// (or when `join` fails before the rendezvous ended: an upload that
/// failed), its thread goes on until the rendezvous ends (every rank
/// arrived, or [`RankEnv::timeout`] passed), holding rank 0's port until
/// then.
#[derive(Debug)]
pub struct Meeting<'a> {
    env: RankEnv,
    thread: JoinHandle<Met>,
    target: Target<'a>,
}

/// Starts this rank's rendezvous at `env`'s rank 0 on a thread and returns
/// at once. `target` is what this rank runs on: the CPU, or one CUDA GPU
/// ([`Target::of`] its backend); several GPUs, none, or wgpu are refused
/// here, before anything starts. Every rank must give the same `problem` (a
/// text naming the run) and the same kind of target: a rank with another is
/// refused at the rendezvous, naming it. On GPUs rank 0 makes the NCCL id
/// the others get. Rank 0 calls `on_refused` for each connection it turns
/// away (another job's rank, a wrong secret).
pub fn meet<'a>(
    env: &RankEnv,
    problem: &str,
    target: Target<'a>,
    on_refused: impl FnMut(&Refusal) + Send + 'static,
) -> Result<Meeting<'a>, AnnealError> {
    let gpu = match target {
        Target::Cpu => false,
        Target::Gpus([backend]) if backend.kind() == BackendKind::Cuda => true,
        Target::Gpus([_]) => return Err(AnnealError::NeedsCuda),
        other => {
            return Err(AnnealError::RankTarget {
                target: other.describe(),
            })
        }
    };
    let id = match (gpu, env.rank) {
        (true, 0) => gpu_core::nccl_unique_id()?,
        _ => [0; NCCL_ID_BYTES],
    };
    // A CPU rank and a GPU rank of one job would wait for each other in
    // different collectives: the kind of target is part of the problem.
    let problem = format!("{problem} rank-target={}", if gpu { "cuda" } else { "cpu" });
    let thread_env = env.clone();
    let thread = std::thread::Builder::new()
        .name(format!("rank {} rendezvous", env.rank))
        .spawn(move || {
            let started = Instant::now();
            let met = rendezvous(&thread_env, &problem, || Ok(id), on_refused);
            (met, started.elapsed().as_secs_f64())
        })
        .map_err(|source| {
            AnnealError::Dist(DistError::Io {
                rank: env.rank,
                what: "starting the rendezvous's thread".into(),
                source,
            })
        })?;
    Ok(Meeting {
        env: env.clone(),
        thread,
        target,
    })
}

impl Meeting<'_> {
    /// Finishes the setup on the meeting's target: uploads `problem`
    /// (this rank's rows) to the GPU while the rendezvous still waits;
    /// then the TCP collectives over the rendezvous's connections,
    /// on a GPU the watchdog and NCCL's join (which waits for every rank),
    /// and a barrier, so that every rank's run starts together.
    ///
    /// A peer that dies while NCCL sets up cannot be waited out: NCCL's
    /// setup cannot be interrupted, so the watchdog ends this process with
    /// status 1 after naming the peer on stderr. Later, a dead peer aborts
    /// NCCL and the run fails with [`DistError::PeerGone`].
    pub fn join(self, problem: &Problem<'_>) -> Result<RankSession, AnnealError> {
        let mut times = SessionTimes::default();
        // `meet` took only the CPU or one CUDA GPU.
        let uploaded = match self.target {
            Target::Gpus([backend]) => {
                let uploaded = GpuRankEngine::upload(backend, problem)?;
                times.upload = uploaded.seconds();
                Some((backend, uploaded))
            }
            _ => None,
        };
        let (met, seconds) = self
            .thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        times.rendezvous = seconds;
        let (link, id) = met?;
        let (rank, world) = (self.env.rank, self.env.world_size);
        let mut comm = TcpComm::new(rank, world, link);
        let engine = match uploaded {
            Some((backend, uploaded)) => {
                // Watched from before NCCL's setup, which waits for every
                // rank (see above).
                let slot: Arc<OnceLock<AbortHandle>> = Arc::new(OnceLock::new());
                let abort = Arc::clone(&slot);
                let watchdog = Watchdog::start(&comm, move |gone| match abort.get() {
                    Some(handle) => handle.abort(),
                    None => {
                        eprintln!(
                            "error: rank {gone} closed its connection during nccl's setup: \
                             that process exited or was killed; see its output"
                        );
                        std::process::exit(1);
                    }
                })?;
                let (engine, join) = uploaded.join(problem, &id, rank, world)?;
                (times.nccl_init, times.warmup) = (join.nccl_init, join.warmup);
                let _ = slot.set(engine.abort_handle());
                backend.synchronize()?;
                times.barrier = barrier(&mut comm)?;
                // `comm` stays open to the end of the session: the watchdog
                // watches its connections, and closing them tells the peers
                // this rank left.
                Ranked::Gpu {
                    engine: Box::new(engine.watched_by(watchdog)),
                    _comm: comm,
                }
            }
            None => {
                times.barrier = barrier(&mut comm)?;
                let started = Instant::now();
                let engine = RankEngine::new(problem, comm);
                times.engine = started.elapsed().as_secs_f64();
                Ranked::Cpu(Box::new(engine))
            }
        };
        Ok(RankSession {
            engine,
            times,
            rank,
            world,
            ran: false,
        })
    }
}

/// Waits until every rank has finished its setup; returns the seconds.
fn barrier(comm: &mut TcpComm) -> Result<f64, AnnealError> {
    let started = Instant::now();
    comm.all_reduce_sum(&mut [0.0], "the end of the setup")?;
    Ok(started.elapsed().as_secs_f64())
}

/// This rank's engine: the CPU's, or one GPU's with the connections its
/// watchdog watches.
#[derive(Debug)]
enum Ranked {
    Cpu(Box<RankEngine<TcpComm>>),
    Gpu {
        engine: Box<GpuRankEngine>,
        _comm: TcpComm,
    },
}

/// One rank, set up ([`Meeting::join`]) and ready to run. Dropping it
/// closes its connections, which tells the other ranks it left.
///
/// ```no_run
/// use kiln_anneal::distributed::{self, RankEnv};
/// use kiln_anneal::{Params, Points};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the launcher.
/// let env = RankEnv::from_env()?.ok_or("not started by a launcher")?;
/// let (n, d, m) = (100_000, 64, 256);
/// let points = kiln_anneal::synthetic_points(n, d, 32, 0.2, 7);
/// let rows = distributed::rows_of(env.rank, env.world_size, n).ok_or("more ranks than points")?;
/// // The rendezvous waits for the slowest rank while this one checks its rows.
/// let cpu = kiln_anneal::Target::Cpu;
/// let meeting = distributed::meet(&env, "my run", cpu, |refused| eprintln!("{refused}"))?;
/// let mine = Points::F32(&points[rows.start * d..rows.end * d]);
/// let problem = kiln_anneal::validate_rows(mine, rows, n, d, m, &Params::default())?;
/// let mut session = meeting.join(&problem)?;
/// let (out, _phases) = session.run(&problem, &mut |it, energy, _| {
///     if env.rank == 0 {
///         println!("iteration {it}: energy {energy}");
///     }
/// })?;
/// // Rank 0 holds every point's assignment; the others none.
/// assert!(env.rank != 0 || out.assignments.len() == n);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RankSession {
    engine: Ranked,
    times: SessionTimes,
    rank: usize,
    world: usize,
    /// A session runs once: its watchdog ends with the first run.
    ran: bool,
}

impl RankSession {
    /// Where the setup's time went.
    pub fn times(&self) -> SessionTimes {
        self.times
    }

    /// Whether this rank runs on a GPU.
    pub fn is_gpu(&self) -> bool {
        matches!(self.engine, Ranked::Gpu { .. })
    }

    /// This rank and the number of ranks.
    pub fn rank(&self) -> (usize, usize) {
        (self.rank, self.world)
    }

    /// Runs the anneal on this rank's rows, `problem` the one given to
    /// [`Meeting::join`] (`progress` is called on every rank). The output's
    /// anchors and energies are every rank's; its assignments are every
    /// point's on rank 0 and empty elsewhere. A session runs once (its
    /// watchdog ends with the run): a second call is refused.
    pub fn run(
        &mut self,
        problem: &Problem<'_>,
        progress: Progress<'_>,
    ) -> Result<(Output, Phases), AnnealError> {
        if std::mem::replace(&mut self.ran, true) {
            return Err(AnnealError::SessionRan);
        }
        match &mut self.engine {
            Ranked::Cpu(engine) => crate::driver::run_timed(engine.as_mut(), problem, progress),
            Ranked::Gpu { engine, .. } => {
                let run = crate::driver::run_timed(engine.as_mut(), problem, progress);
                // Peers that exit from now on are no failure.
                engine.finish();
                run
            }
        }
    }
}
