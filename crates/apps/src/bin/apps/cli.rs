//! The command line, declared once (clap derive): every command with its
//! `--help`, numbers parsed and range-checked as they are read, so that a
//! bad value is refused in one line naming its flag.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use gpu_core::GpuCount;

/// How counts are written, for every `--help`.
const NUMBERS: &str = "Counts are whole numbers: 1000000, 1_000_000 or 1e6 \
(an integer mantissa and exponent; 2.5e3 and 1e-3 are refused).";

/// Run kiln's workloads: a vector add, a batch of structure statistics, the
/// anneal of embeddings (and the decode of its index), the benchmark suite,
/// the devices.
#[derive(Debug, Parser)]
#[command(
    name = "apps",
    version,
    arg_required_else_help = true,
    after_help = NUMBERS
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// c = a + b on f32, checked against the CPU reference, then timed.
    #[command(after_help = NUMBERS)]
    Vadd(VaddArgs),
    /// Temperature-annealed anchor compression of embeddings (synthetic, or
    /// read from .npy files); --out keeps the index.
    #[command(after_help = ANNEAL_HELP)]
    Anneal(AnnealArgs),
    /// Read an index written by `anneal --out` back, check it, and report
    /// what it kept: the reconstruction error against the original points.
    #[command(after_help = DECODE_HELP)]
    Decode(DecodeArgs),
    /// Assign points to an index written by `anneal --out` (train on a
    /// sample, then encode everything), streamed in chunks from disk.
    #[command(after_help = ENCODE_HELP)]
    Encode(EncodeArgs),
    /// Per-structure centroid and radius of gyration over a random batch.
    #[command(after_help = NUMBERS)]
    Batch(BatchArgs),
    /// The benchmark suite (JSON for `cargo xtask bench` with --json).
    #[command(after_help = NUMBERS)]
    Bench(BenchArgs),
    /// The driver, the GPUs and their figures.
    Devices,
    /// Start one process per rank on this host, as torchrun would, each
    /// running the apps command after `--` (`anneal ...`).
    #[command(after_help = LAUNCH_HELP)]
    Launch(LaunchArgs),
}

const LAUNCH_HELP: &str = "Each process gets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR (127.0.0.1) and MASTER_PORT, the variables torchrun sets; `apps anneal` run with them is one rank of a multi-process run (under torchrun, srun or mpirun set them yourself, MASTER_ADDR being rank 0's host). With --gpus, rank r runs on GPU r of this host (CUDA_VISIBLE_DEVICES \
still applies); with --nprocs, where the command's --backend says. Output comes back line by line behind [rank N]. When a process fails, the others are killed and launch fails naming it.

The command must be `anneal` (the one command that runs as ranks); any other is refused.

Example: apps launch --nprocs 2 -- anneal --backend cpu --n 1e6 --d 128 --m 1024 --out idx";

/// `apps launch`.
#[derive(Debug, Args)]
pub(crate) struct LaunchArgs {
    /// Processes to start (1 to 1024), on the CPU unless the command says
    /// otherwise
    #[arg(long, value_parser = count::<1, 1024>, allow_negative_numbers = true, required_unless_present = "gpus", conflicts_with = "gpus")]
    pub(crate) nprocs: Option<u64>,
    /// One process per GPU of this host (N, or all), each on GPU LOCAL_RANK
    #[arg(long, value_name = "N|all")]
    pub(crate) gpus: Option<GpuCount>,
    /// Port of rank 0's rendezvous on 127.0.0.1 [default: a free one]
    #[arg(long)]
    pub(crate) port: Option<u16>,
    /// The apps command each process runs, after `--`
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

const ANNEAL_HELP: &str = "Counts are whole numbers: 1000000, 1_000_000 or 1e6 \
(an integer mantissa and exponent; 2.5e3 and 1e-3 are refused).\n\n\
Coordinates must be finite and within ±sqrt(f32::MAX / (16 d)) (about 4.1e17 at d = 128), \
so that squared distances summed over d dimensions stay finite in f32; a coordinate beyond \
is refused, naming its row and column (the data is never rescaled behind your back). \
The memory a run needs is compared with what the machine has before anything is allocated.\n\n\
--npy takes one or more .npy files (shards), read as one matrix: their rows concatenated in \
the order given. Each is an (n_i, d) float32, float16 or bfloat16 matrix in C order (bfloat16 \
as numpy.save writes an ml_dtypes.bfloat16 array, descr '<V2', or with descr 'bfloat16'); all \
must have the same d and dtype. Regular files are memory-mapped, not copied.\n\n\
--out DIR keeps the index: DIR/anchors.npy (m x d float32), DIR/assignments.npy (n uint32, \
each point's anchor) and DIR/index.json (shapes, the energy of each iteration and of the \
index as stored, the parameters, seed, backend, device, kiln version, and an xxh3-128 hash \
of the input). DIR must be new, empty or an earlier index (checked before the run; a \
folder of anything else is refused, nothing touched); an earlier index is replaced only \
with --force, which removes only the files kiln wrote there. The index is made beside DIR \
and swapped into place, so DIR holds the old index or the new one, whole. Read it back \
with `apps decode DIR --npy ...`.";

const DECODE_HELP: &str = "Checks the index: the shapes of anchors.npy and \
assignments.npy against index.json, every assignment below m, the schema version.\n\n\
The reconstruction error needs the original points: give the same --npy files, in the same \
order, as to `apps anneal` (their hash must match index.json's; they may be split into other shards), \
and it reports the mean squared error (the energy recomputed from the index, which must \
equal index.json's energy within 1e-9 relative), the largest squared error and its point, \
and per anchor the member counts and the members' mean squared distance (min / median / \
max). Without --npy it reports the index alone.";

const ENCODE_HELP: &str = "Each point goes to its nearest anchor in squared L2 distance, \
ties to the lowest anchor: the anneal's own assignment (the CPU engine's, or the GPU's kernels), \
the same bits whatever --chunk is. The points are read from disk a chunk at a time, the next \
chunk read while the current one is assigned, so memory is bounded by the chunk, not the input. \
On CUDA a regular file is read by several threads straight into page-locked buffers, which the \
GPU copies from while the next chunks are read; progress shows the input rate, and the last line \
where the time went (reading, or waiting for the device).\n\n\
--out FILE gets a 1-D uint32 .npy (as the index's assignments.npy), written to a hidden \
temporary file beside it and renamed into place at the end: FILE is the old file or the \
whole new one, never a part. An existing FILE is replaced only with --force (never an input, \
a folder or a symlink, nor a file inside the index), keeping its mode and group.\n\n\
Counts are whole numbers: 1000000, 1_000_000 or 1e6.";

/// Which backend runs a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum BackendChoice {
    /// CUDA when it can run kiln's kernels, else (for `apps anneal`, in a
    /// build with the `wgpu` feature) a hardware GPU through wgpu, else the
    /// CPU (KILN_BACKEND, when set, decides).
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA, or an error saying why not.
    Cuda,
    /// A GPU through wgpu (Vulkan, Metal, DX12; a software adapter when
    /// there is no GPU): `apps anneal` only, in a build with the `wgpu`
    /// feature.
    Wgpu,
}

/// `--backend`, shared by the commands that run on one backend.
#[derive(Debug, Clone, Args)]
pub(crate) struct BackendArg {
    /// Where to run [default: auto, or KILN_BACKEND when set]
    #[arg(long, value_enum)]
    pub(crate) backend: Option<BackendChoice>,
}

/// `apps vadd`.
#[derive(Debug, Args)]
pub(crate) struct VaddArgs {
    /// Elements per vector (1 to 2^32 - 1)
    #[arg(long, default_value = "16777216", value_parser = count::<1, { u32::MAX as u64 }>, allow_negative_numbers = true)]
    pub(crate) n: u64,
    /// Timed runs (1 to 100000)
    #[arg(long, default_value = "20", value_parser = count::<1, 100_000>, allow_negative_numbers = true)]
    pub(crate) reps: u64,
    #[command(flatten)]
    pub(crate) backend: BackendArg,
}

/// `apps anneal`.
#[derive(Debug, Args)]
pub(crate) struct AnnealArgs {
    /// 1000 points x 64 dims, 32 anchors (the default shape)
    #[arg(long, conflicts_with = "large")]
    pub(crate) small: bool,
    /// 10000 points x 128 dims, 256 anchors
    #[arg(long)]
    pub(crate) large: bool,
    /// Points (overrides the shape; 1 to 2^32 - 1)
    #[arg(long, value_parser = count::<1, { u32::MAX as u64 }>, allow_negative_numbers = true, conflicts_with = "npy")]
    pub(crate) n: Option<u64>,
    /// Dimensions (overrides the shape; 1 to 2^32 - 1)
    #[arg(long, value_parser = count::<1, { u32::MAX as u64 }>, allow_negative_numbers = true, conflicts_with = "npy")]
    pub(crate) d: Option<u64>,
    /// Initial anchors (overrides the shape; 1 to n)
    #[arg(long, value_parser = count::<1, { u32::MAX as u64 }>, allow_negative_numbers = true)]
    pub(crate) m: Option<u64>,
    /// Iterations at most (1 to 1000000)
    #[arg(long, default_value = "30", value_parser = count::<1, 1_000_000>, allow_negative_numbers = true)]
    pub(crate) iters: u64,
    /// Stop when the relative energy change is below this (finite, >= 0)
    #[arg(long, default_value = "1e-4", value_parser = tolerance, allow_negative_numbers = true)]
    pub(crate) tol: f64,
    /// Seed of the synthetic points and the initial anchors (0 to 2^64 - 1)
    #[arg(long, default_value = "42", value_parser = count::<0, { u64::MAX }>, allow_negative_numbers = true)]
    pub(crate) seed: u64,
    /// Read the points from these .npy files, rows concatenated in order:
    /// (n_i, d) float32, float16 or bfloat16 in C order (pipes and FIFOs
    /// work, e.g. /dev/stdin)
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub(crate) npy: Vec<PathBuf>,
    /// Write the index (anchors, assignments, index.json) to this new or
    /// empty directory
    #[arg(long, value_name = "DIR", conflicts_with = "compare")]
    pub(crate) out: Option<PathBuf>,
    /// With --out: replace DIR if it holds an earlier index (removing only
    /// the files kiln wrote there)
    #[arg(long, requires = "out")]
    pub(crate) force: bool,
    /// Run on the CPU and on the GPU and compare
    #[arg(long)]
    pub(crate) compare: bool,
    /// Shard the points over N GPUs of this host, or all of them
    #[arg(long, value_name = "N|all", value_parser = gpu_count)]
    pub(crate) gpus: Option<GpuCount>,
    #[command(flatten)]
    pub(crate) backend: BackendArg,
}

/// `apps decode`.
#[derive(Debug, Args)]
pub(crate) struct DecodeArgs {
    /// The index directory (written by `apps anneal --out DIR`)
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// The original points, the same .npy files as given to the anneal;
    /// needed for the reconstruction error
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub(crate) npy: Vec<PathBuf>,
    /// Print the report as JSON
    #[arg(long)]
    pub(crate) json: bool,
}

/// `apps encode`.
#[derive(Debug, Args)]
pub(crate) struct EncodeArgs {
    /// The index directory (written by `apps anneal --out DIR`)
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// The points: .npy files of the index's d, rows concatenated in order
    #[arg(long, value_name = "FILE", num_args = 1.., required = true)]
    pub(crate) npy: Vec<PathBuf>,
    /// Write each point's anchor (uint32 .npy) to this file
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// Replace FILE if it exists
    #[arg(long)]
    pub(crate) force: bool,
    /// Points per chunk (1 to 2^32 - 1) [default: 32 MiB of input on CUDA,
    /// within 2 GiB of host memory and the GPU's free memory]
    #[arg(long, value_name = "N", value_parser = count::<1, { u32::MAX as u64 }>, allow_negative_numbers = true)]
    pub(crate) chunk: Option<u64>,
    #[command(flatten)]
    pub(crate) backend: BackendArg,
}

/// `apps batch`.
#[derive(Debug, Args)]
pub(crate) struct BatchArgs {
    /// Structures in the batch (1 to 1000000: atom indices are 32-bit)
    #[arg(long, default_value = "10000", value_parser = count::<1, 1_000_000>, allow_negative_numbers = true)]
    pub(crate) structures: u64,
    /// Seed of the batch (0 to 2^64 - 1)
    #[arg(long, default_value = "42", value_parser = count::<0, { u64::MAX }>, allow_negative_numbers = true)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) backend: BackendArg,
}

/// `apps bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Write the report here as JSON (checked before the run, written
    /// atomically after it)
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Small shapes: a smoke test
    #[arg(long)]
    pub(crate) quick: bool,
    /// The multi-GPU suite on N GPUs (or all): one shape on one GPU and on N
    #[arg(long, value_name = "N|all", value_parser = gpu_count)]
    pub(crate) gpus: Option<GpuCount>,
    /// The multi-GPU suite's shape, points x dims x anchors
    #[arg(long, value_name = "NxDxM", value_parser = shape, requires = "gpus")]
    pub(crate) shape: Option<(u64, u64, u64)>,
    #[command(flatten)]
    pub(crate) backend: BackendArg,
}

/// A whole number in `LO..=HI`: decimal digits with optional `_`
/// separators, or an integer mantissa with an exponent (`1e6`, `25e4`).
pub(crate) fn count<const LO: u64, const HI: u64>(text: &str) -> Result<u64, String> {
    let value = whole_number(text)?;
    if (LO..=HI).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is out of range ({LO} to {HI})"))
    }
}

fn whole_number(text: &str) -> Result<u64, String> {
    let not_whole = || "not a whole number (write e.g. 1000000, 1_000_000 or 1e6)".to_string();
    let digits = |part: &str| -> Result<u64, String> {
        let clean: String = part.chars().filter(|&c| c != '_').collect();
        if clean.is_empty() || !clean.bytes().all(|b| b.is_ascii_digit()) {
            return Err(not_whole());
        }
        // Digits only: parse fails only on overflow.
        clean.parse().map_err(|_| "over 2^64 - 1".to_string())
    };
    match text.trim().split_once(['e', 'E']) {
        None => digits(text.trim()),
        Some((mantissa, exponent)) => {
            let mantissa = digits(mantissa)?;
            let exponent = u32::try_from(digits(exponent)?).map_err(|_| "over 2^64 - 1")?;
            10u64
                .checked_pow(exponent)
                .and_then(|p| mantissa.checked_mul(p))
                .ok_or_else(|| "over 2^64 - 1".to_string())
        }
    }
}

/// `--tol`: a finite value >= 0.
fn tolerance(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a finite value >= 0")),
        Err(_) => Err("not a number".into()),
    }
}

/// `--gpus N|all`.
fn gpu_count(text: &str) -> Result<GpuCount, String> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(GpuCount::All);
    }
    let n = count::<1, 1024>(text).map_err(|e| format!("{e}; or `all`"))?;
    Ok(GpuCount::Exactly(n as usize))
}

/// `--shape NxDxM`.
fn shape(text: &str) -> Result<(u64, u64, u64), String> {
    let bad = || "not NxDxM (points x dims x anchors, e.g. 4000000x128x2048)".to_string();
    let parts: Vec<&str> = text.split('x').collect();
    let [n, d, m] = parts.as_slice() else {
        return Err(bad());
    };
    let part = |p: &str| count::<1, { u32::MAX as u64 }>(p).map_err(|e| format!("{e} in {text}"));
    Ok((part(n)?, part(d)?, part(m)?))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn counts_take_separators_and_exponents_and_nothing_else() {
        assert_eq!(count::<0, { u64::MAX }>("1_000_000"), Ok(1_000_000));
        assert_eq!(count::<0, { u64::MAX }>("1e11"), Ok(100_000_000_000));
        assert_eq!(count::<0, { u64::MAX }>("25E4"), Ok(250_000));
        assert_eq!(
            count::<0, { u64::MAX }>("18446744073709551615"),
            Ok(u64::MAX)
        );
        for bad in [
            "", "-1", "2.5e3", "1e-3", "0x10", "1e", "e5", "ten", "1 000",
        ] {
            assert!(count::<0, { u64::MAX }>(bad).is_err(), "{bad}");
        }
        assert!(count::<0, { u64::MAX }>("18446744073709551616")
            .unwrap_err()
            .contains("over 2^64"));
        assert!(count::<0, { u64::MAX }>("1e20")
            .unwrap_err()
            .contains("over 2^64"));
        assert_eq!(
            count::<1, 10>("11").unwrap_err(),
            "11 is out of range (1 to 10)"
        );
    }

    #[test]
    fn shapes_and_gpu_counts() {
        assert_eq!(shape("4000000x128x2048"), Ok((4_000_000, 128, 2048)));
        assert!(shape("4x4").is_err());
        assert!(shape("0x1x1").is_err());
        assert!(matches!(gpu_count("all"), Ok(GpuCount::All)));
        assert!(gpu_count("0").is_err());
        assert!(gpu_count("two").is_err());
    }

    proptest! {
        #[test]
        fn any_number_text_is_a_value_or_one_line(text in "\\PC{0,30}") {
            for result in [count::<1, 1_000_000>(&text).map(|_| ()), tolerance(&text).map(|_| ()),
                           shape(&text).map(|_| ()), gpu_count(&text).map(|_| ())] {
                if let Err(e) = result {
                    prop_assert!(!e.contains('\n') && !e.is_empty());
                }
            }
        }

        #[test]
        fn numeric_flags_parse_or_fail_in_one_line(
            flag in prop::sample::select(vec!["--n", "--d", "--m", "--iters", "--tol", "--seed", "--gpus"]),
            value in "[-+0-9eE._x]{0,24}|all|inf|NaN",
        ) {
            let argv = ["apps", "anneal", flag, value.as_str()];
            match Cli::try_parse_from(argv) {
                Ok(_) => {}
                Err(e) => {
                    let line = crate::one_line_clap_error(&e);
                    prop_assert!(!line.contains('\n'), "{line}");
                    // A value starting with `-` reads as an unknown flag: named itself.
                    prop_assert!(line.contains(flag) || value.starts_with('-'), "{line}");
                }
            }
        }

        #[test]
        fn counts_round_trip(v in any::<u64>()) {
            prop_assert_eq!(count::<0, { u64::MAX }>(&v.to_string()), Ok(v));
        }
    }
}
