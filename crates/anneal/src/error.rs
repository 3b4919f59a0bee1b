//! Why a run was refused or failed ([`AnnealError`]): one variant per
//! failure a caller could act on, with the sizes, rows or parameter in its
//! fields; wrapped errors (gpu-core's, the ranks') as its `source`; and one
//! variant, [`AnnealError::Internal`], for a broken invariant of this crate.

use std::ops::Range;

/// Why a run was refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnnealError {
    /// The input has no points.
    #[error("no points (n = 0)")]
    NoPoints,
    /// The points have no coordinates.
    #[error("points have no dimensions (d = 0)")]
    NoDimensions,
    /// No anchors were asked for.
    #[error("no anchors asked for (m = 0); pass m >= 1")]
    NoAnchors,
    /// More anchors than points were asked for.
    #[error("more anchors ({m}) than points ({n}); pass m <= n")]
    MoreAnchorsThanPoints {
        /// Anchors asked for.
        m: usize,
        /// Points.
        n: usize,
    },
    /// A size the kernels index with 32 bits is over `u32::MAX`.
    #[error("{what} = {value} is over u32::MAX")]
    OverU32 {
        /// Which size (`"n"`, `"d"`, `"max_anchors"`).
        what: &'static str,
        /// Its value.
        value: usize,
    },
    /// `n × d` values would not fit in memory addresses.
    #[error("n × d = {n} × {d} values do not fit in memory addresses")]
    OverAddressSpace {
        /// Points.
        n: usize,
        /// Dimension.
        d: usize,
    },
    /// [`crate::Params::max_iters`] is 0.
    #[error("max_iters must be at least 1")]
    NoIterations,
    /// A parameter of [`crate::Params`] is out of its range.
    #[error("{name} {value} is not {expected}")]
    BadParam {
        /// The parameter's field name.
        name: &'static str,
        /// Its value, as written.
        value: String,
        /// The values it takes.
        expected: &'static str,
    },
    /// [`crate::Params::max_anchors`] is below the initial anchors.
    #[error("max_anchors {max_anchors} is below m = {m}")]
    MaxAnchorsBelowM {
        /// The parameter.
        max_anchors: usize,
        /// The initial anchors.
        m: usize,
    },
    /// The points' buffer does not hold `n × d` values.
    #[error("{values} values do not make {n} points of dimension {d}")]
    ValueCount {
        /// Values given.
        values: usize,
        /// Points.
        n: usize,
        /// Dimension.
        d: usize,
    },
    /// The rows given to [`crate::validate_rows`] are not a non-empty part
    /// of the input.
    #[error(
        "rows {}..{} are not a non-empty part of {n} points",
        rows.start,
        rows.end
    )]
    BadRows {
        /// The rows.
        rows: Range<usize>,
        /// Points in the whole input.
        n: usize,
    },
    /// This process's points do not hold its rows.
    #[error(
        "{values} values do not make rows {}..{} of dimension {d}",
        rows.start,
        rows.end
    )]
    RowValueCount {
        /// Values given.
        values: usize,
        /// The rows.
        rows: Range<usize>,
        /// Dimension.
        d: usize,
    },
    /// A part of [`crate::Points::Parts`] cannot be joined to the others.
    #[error("part {part} of the points {problem}; give row-contiguous parts of one element type")]
    BadPart {
        /// The part's index.
        part: usize,
        /// What is wrong with it.
        problem: PartProblem,
    },
    /// A coordinate is NaN or infinite.
    #[error(
        "point {point} has a NaN or infinite coordinate (dimension {dim}); clean or drop it first"
    )]
    NonFinite {
        /// Point index.
        point: usize,
        /// Dimension.
        dim: usize,
    },
    /// A coordinate is so large that squared distances would overflow f32
    /// (see [`crate::coordinate_bound`]).
    #[error(
        "point {point} has coordinate {value:e} at dimension {dim}, beyond ±{bound:.3e}, \
         the largest whose squared distances stay finite in f32 at this dimension; \
         scale the data down"
    )]
    OutOfRange {
        /// Point index.
        point: usize,
        /// Dimension.
        dim: usize,
        /// The coordinate.
        value: f32,
        /// The largest magnitude accepted at this `d`.
        bound: f32,
    },
    /// An anchor given to [`crate::check_anchors`] (an index's) is NaN or
    /// infinite.
    #[error(
        "anchor {anchor} is {value} at dimension {dim}; an anchor must be finite, \
         write the index again from its points"
    )]
    AnchorNonFinite {
        /// Anchor index.
        anchor: usize,
        /// Dimension.
        dim: usize,
        /// The value.
        value: f32,
    },
    /// An anchor's coordinate is so large that its squared distances would
    /// overflow f32 (see [`crate::coordinate_bound`]).
    #[error(
        "anchor {anchor} has coordinate {value:e} at dimension {dim}, beyond ±{bound:.3e}, \
         the largest whose squared distances stay finite in f32 at this dimension; \
         write the index again from points scaled down"
    )]
    AnchorOutOfRange {
        /// Anchor index.
        anchor: usize,
        /// Dimension.
        dim: usize,
        /// The coordinate.
        value: f32,
        /// The largest magnitude accepted at this `d`.
        bound: f32,
    },
    /// A point's squared norm overflows f32 (an engine built without
    /// [`crate::validate`]'s bound).
    #[error("point {point}'s squared norm overflows f32; scale the data down")]
    NormOverflow {
        /// Point index.
        point: usize,
    },
    /// The energy came out NaN or infinite (an engine's distances overflowed).
    #[error(
        "the energy became {energy} at iteration {iteration}: distances overflowed f32; \
         scale the data down"
    )]
    NonFiniteEnergy {
        /// The iteration.
        iteration: u32,
        /// The energy.
        energy: f64,
    },
    /// [`crate::Engine::apply_maintenance`] got a plan that does not fit
    /// the anchors it would move (a plan not made by `maintenance::plan`
    /// for them).
    #[error("maintenance plan: {what}; make plans with maintenance::plan from the engine's own statistics")]
    BadPlan {
        /// What does not fit.
        what: &'static str,
    },
    /// [`crate::maintenance::plan`] got statistics and neighbours of
    /// different anchor counts.
    #[error(
        "maintenance input: {what} holds {len} values for {m} anchors (stats.counts); give the \
         statistics and neighbours of the same anchors"
    )]
    PlanInput {
        /// The field of `PlanInput` that does not fit.
        what: &'static str,
        /// Its length.
        len: usize,
        /// Anchors, as `stats.counts` has them.
        m: usize,
    },
    /// [`crate::Engine::set_anchors`] got more anchors than the engine was
    /// made for.
    #[error("{m} anchors is over the run's maximum of {max}")]
    TooManyAnchors {
        /// Anchors given.
        m: usize,
        /// The run's maximum (`Problem::max_anchors`).
        max: usize,
    },
    /// [`crate::Engine::set_anchors`] got fewer values than `m × d`.
    #[error("{values} anchor values for {m} anchors of dimension {d}")]
    AnchorValues {
        /// Values given.
        values: usize,
        /// Anchors.
        m: usize,
        /// Dimension.
        d: usize,
    },
    /// Rows asked of an engine that it does not hold.
    #[error("assignments {}..{} of an engine of {rows} rows", asked.start, asked.end)]
    RowsOutOfRange {
        /// The rows asked for.
        asked: Range<usize>,
        /// Rows the engine holds.
        rows: usize,
    },
    /// A run over more processes than points: every rank holds at least
    /// one row ([`crate::distributed::rows_of`]).
    #[error(
        "{world} ranks for {n} points: every rank needs at least one row; start at most {n} ranks"
    )]
    MoreRanksThanPoints {
        /// Ranks in the run.
        world: usize,
        /// Points.
        n: usize,
    },
    /// A buffer given to the tensor-core assignment is too small for the
    /// sizes it was made for or is asked to run.
    #[error("the tensor-core assignment needs {needed} values in {what}, got {len}")]
    ShortBuffer {
        /// Which buffer (or, for the points, `"its capacity"`).
        what: &'static str,
        /// Values it holds.
        len: usize,
        /// Values needed.
        needed: usize,
    },
    /// The tensor-core assignment was launched on points it was not
    /// prepared for.
    #[error(
        "the tensor-core assignment of {n} x {d} points needs their f16 copy: call \
         prepare_points with these points first"
    )]
    NotPrepared {
        /// Points launched.
        n: u32,
        /// Dimension.
        d: u32,
    },
    /// The tensor-core assignment got more points, or points of another
    /// dimension, than it was made for.
    #[error(
        "{n} x {d} points do not fit the {capacity} x {capacity_d} this TcAssign was made for"
    )]
    OverCapacity {
        /// Points given.
        n: usize,
        /// Their dimension.
        d: usize,
        /// Points it was made for.
        capacity: usize,
        /// The dimension it was made for.
        capacity_d: usize,
    },
    /// An environment variable has a value the engine does not take.
    #[error("{var} must be {expected}, not {value:?}")]
    BadSetting {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// The values it takes.
        expected: &'static str,
    },
    /// One rank of several was given a target it cannot run on (several
    /// GPUs, or wgpu).
    #[error("a rank runs on the CPU or on one CUDA GPU, not {target}; start one process per GPU")]
    RankTarget {
        /// What it was given.
        target: String,
    },
    /// A rank session was asked to run a second time.
    #[error(
        "this rank session has run: a session runs once; start another with distributed::meet"
    )]
    SessionRan,
    /// A GPU engine was given a backend other than CUDA.
    #[error("the GPU engine needs CUDA backends; pass backends from gpu_core::Backend::cuda")]
    NeedsCuda,
    /// This build has no GPU code.
    #[error("this build has no GPU code (no CUDA toolkit at build time); set CUDA_PATH to a toolkit and rebuild")]
    NoGpuCode,
    /// A multi-process run could not go on (a peer died, timed out or
    /// broke the protocol): [`DistError::PeerGone`] names the rank.
    #[error(transparent)]
    Dist(#[from] DistError),
    /// The GPU path failed; gpu-core's error is the `source` (a report of
    /// the chain, as `anyhow`'s `{:#}`, reads `gpu: <its message>`).
    #[error("gpu")]
    Gpu(#[from] gpu_core::Error),
    /// The wgpu engine failed; its error is the `source`, as for
    /// [`AnnealError::Gpu`].
    #[cfg(feature = "wgpu")]
    #[error("wgpu")]
    Wgpu(#[source] WgpuError),
    /// A CUDA runtime call of a static-library module returned an error.
    #[error("{call} returned cudaError_t {status}")]
    CudaRuntime {
        /// The function.
        call: &'static str,
        /// Its `cudaError_t`.
        status: i32,
    },
    /// An invariant of this crate does not hold: a bug in kiln-anneal, not
    /// in the caller's input.
    #[error("internal error in kiln-anneal: {what}; please report it")]
    Internal {
        /// The invariant that failed.
        what: String,
    },
}

/// What is wrong with one part of [`crate::Points::Parts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartProblem {
    /// The part is itself [`crate::Points::Parts`].
    #[error("is itself split into parts")]
    Nested,
    /// Its element type is not part 0's.
    #[error("has another element type than part 0")]
    MixedTypes,
    /// Its length is not a whole number of rows.
    #[error("does not hold whole rows")]
    PartialRows,
}

#[cfg(feature = "wgpu")]
impl From<WgpuError> for AnnealError {
    fn from(e: WgpuError) -> Self {
        AnnealError::Wgpu(e)
    }
}

impl AnnealError {
    /// [`AnnealError::Internal`] for the invariant `what`.
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        AnnealError::Internal { what: what.into() }
    }

    /// This error with the point it names numbered from row `first` of a
    /// larger input (a coordinate refused in a part of the rows).
    pub(crate) fn numbered_from(self, first: usize) -> Self {
        match self {
            AnnealError::NonFinite { point, dim } => AnnealError::NonFinite {
                point: point + first,
                dim,
            },
            AnnealError::OutOfRange {
                point,
                dim,
                value,
                bound,
            } => AnnealError::OutOfRange {
                point: point + first,
                dim,
                value,
                bound,
            },
            other => other,
        }
    }

    /// The rank that died, when this is a peer's death
    /// ([`DistError::PeerGone`]).
    pub fn dead_rank(&self) -> Option<usize> {
        match self {
            AnnealError::Dist(DistError::PeerGone { rank, .. }) => Some(*rank),
            _ => None,
        }
    }
}

/// Why a multi-process run could not start or went on no further.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// A launcher variable is missing.
    #[error("{var} is not set; start each process with a launcher (torchrun, srun, mpirun) or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT")]
    MissingVar {
        /// The variable.
        var: &'static str,
    },
    /// Some of one launcher's variables are set, not all it needs.
    #[error("{set} is set but not {missing}: {fix}")]
    Incomplete {
        /// A variable that is set.
        set: &'static str,
        /// The one missing beside it.
        missing: &'static str,
        /// How to complete or drop the set.
        fix: &'static str,
    },
    /// Two launchers' variables (torchrun's and Slurm's) say different
    /// things about this process.
    #[error("{a}={a_value:?} but {b}={b_value:?}: torchrun's and Slurm's variables disagree on this process's {what}; unset one family (RANK, WORLD_SIZE, LOCAL_RANK or SLURM_PROCID), or make them agree")]
    Conflict {
        /// torchrun's variable.
        a: &'static str,
        /// Its value.
        a_value: String,
        /// Slurm's variable.
        b: &'static str,
        /// Its value.
        b_value: String,
        /// What they describe ("rank", "number of processes", ...).
        what: &'static str,
    },
    /// A launcher variable has a value that cannot be used.
    #[error("{var}={value:?}: {why}")]
    BadVar {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A socket operation failed.
    #[error("rank {rank}: {what} failed: {source}")]
    Io {
        /// The rank at the other end (this process's own for a listen).
        rank: usize,
        /// What was being done.
        what: String,
        /// The socket's error.
        source: std::io::Error,
    },
    /// A peer's connection closed: the process exited or crashed.
    #[error("rank {rank}{} closed its connection during {during}: that process exited or was killed (or its host went away); see its output", at(.addr))]
    PeerGone {
        /// The rank that went away.
        rank: usize,
        /// Its end of the connection, where known: its host.
        addr: Option<std::net::SocketAddr>,
        /// What the run was doing.
        during: String,
    },
    /// A peer sent nothing for too long.
    #[error("no word from rank {rank} for {seconds} s during {during}: it hangs, has not started, or its host is unreachable (raise {var} if it is only slow)", var = "KILN_RANK_TIMEOUT")]
    Timeout {
        /// The silent rank.
        rank: usize,
        /// What the run was doing.
        during: String,
        /// The limit.
        seconds: u64,
    },
    /// A rank runs another problem than rank 0.
    #[error("rank {rank} runs another problem than rank 0: {what}; start every rank with the same arguments and input")]
    Mismatch {
        /// The rank that differs.
        rank: usize,
        /// What differs.
        what: String,
    },
    /// A peer sent something that is not the protocol.
    #[error("rank {rank} sent {what}; are both ends the same kiln version?")]
    Protocol {
        /// The rank.
        rank: usize,
        /// What was wrong.
        what: String,
    },
    /// Rank 0 refused this rank (it says why).
    #[error("rank 0 refused this rank: {0}")]
    Refused(String),
    /// What listens at the rendezvous's address is not this job's rank 0.
    #[error("the rank 0 at {addr} is not of this job (it does not hold this job's {var}): another job uses this port, or this job's ranks were given different secrets; give each job its own port (MASTER_PORT, {port}) and every rank of one job the same {var}", var = "KILN_JOB_SECRET", port = "KILN_MASTER_PORT")]
    OtherJob {
        /// The rendezvous's address.
        addr: String,
    },
    /// The OS's random generator failed (the rendezvous's nonces).
    #[error("the operating system's random generator failed: {0}")]
    Random(String),
}

/// ` (at ADDR)` for a peer whose address is known.
fn at(addr: &Option<std::net::SocketAddr>) -> String {
    addr.map(|a| format!(" (at {a})")).unwrap_or_default()
}

/// Why the wgpu engine could not start or run.
#[cfg(feature = "wgpu")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WgpuError {
    /// No adapter of the kind asked for.
    #[error("no {wanted} wgpu adapter ({found})")]
    NoAdapter {
        /// "hardware" or "usable".
        wanted: &'static str,
        /// The adapters there are, or why there are none.
        found: String,
    },
    /// The adapter refused a device with its own limits.
    #[error("{adapter}: could not open a device: {message}")]
    Device {
        /// The adapter.
        adapter: String,
        /// wgpu's message.
        message: String,
    },
    /// The problem does not fit the adapter's limits.
    #[error("{what} needs {needed} bytes in one buffer, over this adapter's limit of {limit}")]
    TooLarge {
        /// What would not fit.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// The adapter's limit.
        limit: u64,
    },
    /// A command failed on the device (out of memory, device lost, or a
    /// validation error).
    #[error("{0}")]
    Runtime(String),
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// The messages name the variables by their text (this module names no
    /// other of the crate's): they must be the variables the runtime reads.
    #[test]
    fn dist_messages_name_the_variables_the_runtime_reads() {
        use crate::distributed::{PORT_ENV, SECRET_ENV, TIMEOUT_ENV};
        let timeout = DistError::Timeout {
            rank: 1,
            during: "x".into(),
            seconds: 3,
        };
        assert!(timeout.to_string().contains(TIMEOUT_ENV), "{timeout}");
        let other = DistError::OtherJob { addr: "a:1".into() }.to_string();
        assert!(
            other.contains(SECRET_ENV) && other.contains(PORT_ENV),
            "{other}"
        );
    }

    #[test]
    fn a_gpu_core_error_is_the_source_and_not_repeated_in_the_message() {
        let inner = gpu_core::Backend::cpu().kernel_by_name("k").unwrap_err();
        let text = inner.to_string();
        let e = AnnealError::from(inner);
        let source = e.source().and_then(|s| s.downcast_ref::<gpu_core::Error>());
        assert!(
            matches!(source, Some(gpu_core::Error::ByNameNeedsCuda { .. })),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "gpu");
        assert!(!text.is_empty() && !e.to_string().contains(&text));
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn a_wgpu_error_is_the_source_too() {
        let e = AnnealError::from(WgpuError::Runtime("device lost".into()));
        let source = e.source().and_then(|s| s.downcast_ref::<WgpuError>());
        assert!(matches!(source, Some(WgpuError::Runtime(m)) if m == "device lost"));
        assert_eq!(e.to_string(), "wgpu");
    }

    #[test]
    fn a_dead_rank_converts_to_its_variant_with_its_message() {
        let dist = DistError::PeerGone {
            addr: None,
            rank: 3,
            during: "a step".into(),
        };
        let text = dist.to_string();
        let e = AnnealError::from(dist);
        assert!(matches!(
            e,
            AnnealError::Dist(DistError::PeerGone { rank: 3, .. })
        ));
        assert_eq!(e.dead_rank(), Some(3));
        assert_eq!(e.to_string(), text);
        assert_eq!(AnnealError::NoPoints.dead_rank(), None);
        let timeout = AnnealError::from(DistError::Timeout {
            rank: 1,
            during: "a step".into(),
            seconds: 5,
        });
        assert_eq!(timeout.dead_rank(), None, "a silent rank is not a dead one");
    }

    #[test]
    fn internal_errors_say_they_are_a_bug_in_one_line() {
        let e = AnnealError::internal("a shard's points mix element types");
        let text = e.to_string();
        assert!(
            text.starts_with("internal error in kiln-anneal: a shard's"),
            "{text}"
        );
        assert!(!text.contains('\n') && !text.ends_with('.'), "{text}");
    }
}
