//! The benchmark report kiln's benchmark suite writes (as JSON) and its
//! comparisons read: one serde type that both crates depend on, so the two
//! sides cannot drift. Each figure says what it measured as data ([`Workload`]); its
//! display name is derived from that and is never parsed back.
//!
//! Reading is strict: an unknown field or workload is an error, never
//! silently dropped, so a report from another version of the suite is
//! refused instead of half read.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The whole suite's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// The device's name, `cpu` when the suite ran on the CPU backend.
    pub device: String,
    /// CPU threads of the CPU path.
    pub cpu_threads: usize,
    /// The figures, in the order they were measured.
    pub figures: Vec<Figure>,
    /// The typed launch against raw cudarc's (absent from the multi-GPU
    /// suite, which does not measure it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_overhead: Option<LaunchOverhead>,
}

/// One measured figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// What was measured.
    pub kind: Workload,
    /// Median milliseconds.
    pub ms: f64,
    /// Runs behind the median.
    pub runs: usize,
    /// A rate where one applies (GB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gb_per_s: Option<f64>,
    /// Anything else worth keeping (iterations, energy, anchors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For an anneal: the distance flops (`2·n·d·m` per iteration) per
    /// second of the whole run, in TFLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
}

impl Figure {
    /// The display name (`anneal 10000x128x256 gpu`): for people, never
    /// read back.
    pub fn name(&self) -> String {
        self.kind.to_string()
    }
}

/// What a figure measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// A device-to-device copy of `n` f32: the bandwidth ceiling.
    DeviceCopy {
        /// Elements.
        n: u64,
    },
    /// The vector add of `n` f32.
    Vadd {
        /// Elements.
        n: u64,
    },
    /// The batched structure kernel over `structures` structures.
    Batch {
        /// Structures.
        structures: u64,
    },
    /// A whole anneal run.
    Anneal {
        /// Points, dimension, initial anchors.
        shape: Shape,
        /// What it ran on.
        engine: Engine,
        /// Iterations (`tol = 0`: all of them run).
        iterations: u32,
        /// The points' type.
        dtype: Dtype,
        /// What the points are.
        data: Data,
    },
    /// The multi-GPU suite's speedup of `gpus` GPUs over one on `shape`
    /// (`ms` is the run on all of them; the ratio is in the note).
    Speedup {
        /// Points, dimension, initial anchors.
        shape: Shape,
        /// GPUs of the sharded run.
        gpus: u32,
    },
}

impl Workload {
    /// The seed shapes' case of the suite: 30 iterations of clustered f32
    /// points, the runs PyTorch's `torch_kmeans30_*` figures match.
    pub const SEED_ITERATIONS: u32 = 30;
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::DeviceCopy { n } => write!(f, "device copy {n} f32"),
            Self::Vadd { n } => write!(f, "vadd {n} f32"),
            Self::Batch { structures } => write!(f, "batch {structures} structures"),
            Self::Anneal {
                shape,
                engine,
                iterations,
                dtype,
                data,
            } => {
                write!(f, "anneal {shape} {engine}")?;
                let seed = iterations == Self::SEED_ITERATIONS
                    && dtype == Dtype::F32
                    && data == Data::Clustered;
                match (seed, data) {
                    (true, _) => Ok(()),
                    (false, Data::Clustered) => write!(f, " {iterations}it {dtype} clustered"),
                    (false, Data::Gaussian) => write!(f, " {iterations}it {dtype}"),
                }
            }
            Self::Speedup { shape, gpus } => write!(f, "anneal {shape} speedup x{gpus} over x1"),
        }
    }
}

/// An anneal's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Points.
    pub n: u64,
    /// Dimension.
    pub d: u64,
    /// Initial anchors.
    pub m: u64,
}

impl fmt::Display for Shape {
    /// `NxDxM`, as PyTorch's figure keys name a shape.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.n, self.d, self.m)
    }
}

/// The engine an anneal ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Engine {
    /// The CPU engine.
    Cpu,
    /// The CUDA engine, sharded over `gpus` GPUs (1: no NCCL).
    Cuda {
        /// GPUs.
        gpus: u32,
    },
    /// The wgpu engine.
    Wgpu,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda { gpus: 1 } => f.write_str("gpu"),
            Self::Cuda { gpus } => write!(f, "gpu x{gpus}"),
            Self::Wgpu => f.write_str("wgpu"),
        }
    }
}

/// The type of an anneal's input points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    /// 32-bit floats.
    F32,
    /// Half floats.
    F16,
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
        })
    }
}

/// What an anneal's points are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Data {
    /// `m / 2` Gaussian clusters of spread 0.25 (the seed shapes).
    Clustered,
    /// Standard normal values, as PyTorch's anchor script draws them (the
    /// embedding grid).
    Gaussian,
}

/// The cost of gpu-core's typed launch over a raw cudarc launch of the same
/// kernel. On the CPU backend there is no launch to time: the figures are
/// absent and `not_measured` says why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchOverhead {
    /// Microseconds per launch through gpu-core's typed `Stream::launch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln_us: Option<f64>,
    /// Microseconds per launch of the same kernel through raw cudarc.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_cudarc_us: Option<f64>,
    /// Microseconds per launch through gpu-core's typed launch on a stream
    /// of its own with stream-local buffers (`DeviceBuffer::into_local`: no
    /// CUDA event per pointer argument, where a context with more than one
    /// stream makes cudarc wait on and record one per argument).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln_local_us: Option<f64>,
    /// `kiln_us - raw_cudarc_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_us: Option<f64>,
    /// Launches per timed batch (the median of 5 batches after a warm-up).
    pub launches: u32,
    /// Why nothing was measured, where nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

impl LaunchOverhead {
    /// One line for the terminal.
    pub fn summary(&self) -> String {
        let local = self
            .kiln_local_us
            .map(|l| format!("; stream-local buffers {l:.3} µs"))
            .unwrap_or_default();
        match (self.kiln_us, self.raw_cudarc_us, &self.not_measured) {
            (Some(k), Some(r), _) => format!(
                "launch overhead: gpu-core {k:.3} µs, raw cudarc {r:.3} µs per launch, {:+.3} µs{local}",
                k - r
            ),
            (_, _, Some(why)) => format!("launch overhead: not measured ({why})"),
            _ => "launch overhead: not measured".to_string(),
        }
    }
}
