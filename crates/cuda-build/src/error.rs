//! The errors of `cuda-build`. A build script prints the first line of one
//! with `cargo::error=` and fails; each first line says what went wrong and,
//! where it can, what to do. Later lines (nvcc's whole output, the command)
//! are detail for stderr.

use std::path::PathBuf;

use crate::arch::ArchError;
use crate::fatbin::FatbinError;

/// Everything that can go wrong while building kernels.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An arch spec was refused.
    #[error(transparent)]
    Arch(#[from] ArchError),
    /// A required CUDA toolkit was not found (`<PREFIX>_REQUIRE_CUDA=1`).
    #[error(
        "{var}=1 but no CUDA toolkit was found (looked at {looked_at}); \
         {hint}, or unset {var} for a CPU-only build"
    )]
    ToolkitRequired {
        /// The variable that asked for it.
        var: String,
        /// Where discovery looked.
        looked_at: String,
        /// What to do about it ([`KernelBuild::toolkit_hint`](crate::KernelBuild::toolkit_hint)).
        hint: String,
    },
    /// `<PREFIX>_REQUIRE_CUDA=1` and a toolkit the user named (`NVCC`,
    /// `CUDA_PATH`, `CUDA_HOME`, `CUDA_ROOT`) cannot compile: the build
    /// takes no other in its place.
    #[error(
        "{var}=1 but {probe} cannot compile CUDA: point it at a toolkit with bin/nvcc and \
         include/cuda_runtime.h, or unset it"
    )]
    ToolkitUnusable {
        /// The variable that asked for CUDA.
        var: String,
        /// The place and what it held (`CUDA_PATH=/x (no bin/nvcc)`).
        probe: String,
    },
    /// `<PREFIX>_REQUIRE_CUDA=1` and the toolkit writes PTX that the oldest
    /// driver the kernels serve cannot JIT.
    #[error("{var}=1 but {detail}")]
    PtxAboveFloor {
        /// The variable that asked for CUDA.
        var: String,
        /// The toolkit, its PTX ISA, the floor and the three fixes.
        detail: String,
    },
    /// An environment variable names something unusable (a launcher or host
    /// compiler that does not exist).
    #[error("{var}={value}: {problem}; {fix}")]
    Setting {
        /// The variable (`CUDAHOSTCXX`, `KILN_NVCC_LAUNCHER`, ...).
        var: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// A file could not be read or written.
    #[error("cannot access {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A file kiln reads or writes is not a regular file.
    #[error(
        "{} is {kind}, not a regular file; kiln reads and writes only regular files there: remove it and rerun",
        path.display()
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What is there: "a symlink", "a dir", "a FIFO", "a socket", "a
        /// device" or "a special file".
        kind: &'static str,
    },
    /// A program could not be started.
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A tool ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    ToolFailed {
        /// The command line, for copying into a shell.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The toolkit's nvcc lists no archs it compiles for: the toolkit is
    /// damaged or its nvcc is not NVIDIA's.
    #[error(
        "`{command}` listed no archs (the toolkit found by {found_by}); repair that toolkit \
         or point CUDA_PATH or NVCC at another"
    )]
    NoArchs {
        /// The command line.
        command: String,
        /// Which place of the search order found the toolkit.
        found_by: String,
    },
    /// nvcc failed on a module. The first line carries nvcc's first
    /// diagnostic; the whole output and the command follow.
    #[error("nvcc failed on module `{module}`: {first_diagnostic}\n{output}\ncommand: {command}")]
    Compile {
        /// The module.
        module: String,
        /// nvcc's first diagnostic, as `file:line: error: message`.
        first_diagnostic: String,
        /// The command line, for copying into a shell.
        command: String,
        /// Everything nvcc printed.
        output: String,
    },
    /// An nvcc step exited 0 but did not write a file it was asked to (a
    /// launcher that runs nothing, a flag such as `--version`).
    #[error(
        "nvcc exited 0 on module `{module}` but wrote no {}; check the launcher and the \
         module's flags: `{command}`",
        file.display()
    )]
    NoOutput {
        /// The module.
        module: String,
        /// The file it should have written.
        file: PathBuf,
        /// The command line.
        command: String,
    },
    /// An image nvcc wrote is not a fat binary of the archs the generated
    /// module declares.
    #[error(
        "nvcc wrote {} for module `{module}` but it is not a fat binary of the module's archs: \
         {source}; check the module's flags",
        file.display()
    )]
    Image {
        /// The module.
        module: String,
        /// The image.
        file: PathBuf,
        /// What is wrong with it.
        source: FatbinError,
    },
    /// nvcc refused the host compiler.
    #[error(
        "nvcc refuses the host compiler {compiler} ({origin}) for module `{module}`: \
         {message}; set CUDAHOSTCXX to a compiler this CUDA supports, or add \
         -allow-unsupported-compiler to the module's flags\ncommand: {command}"
    )]
    HostCompiler {
        /// The module being compiled.
        module: String,
        /// The host compiler (`-ccbin`), or `c++` for nvcc's default.
        compiler: String,
        /// Where it came from (`CUDAHOSTCXX`, `NVCC_CCBIN`, `nvcc's default`).
        origin: String,
        /// nvcc's complaint, one line.
        message: String,
        /// The command line.
        command: String,
    },
    /// A cross build's C++ compiler for the target is missing or wrong.
    #[error("cross build for {target}: host compiler {compiler} ({origin}) {problem}")]
    CrossCompiler {
        /// Cargo's `TARGET`.
        target: String,
        /// The compiler as named (or the names tried).
        compiler: String,
        /// The variable that named it, or how it was derived.
        origin: String,
        /// What is wrong with it, then what to do (one field, so that
        /// [`Error`] stays as small as it was).
        problem: String,
    },
    /// A cross build with static modules for a target nvcc writes no host
    /// code for.
    #[error(
        "cross build for {target}: nvcc builds host code for x86_64 and aarch64 Linux (glibc) \
         only; build the static modules on the target, or keep to fat-binary modules there"
    )]
    NoTargetDir {
        /// Cargo's `TARGET`.
        target: String,
    },
    /// A cross build with static modules and no static CUDA runtime of the
    /// target beside the toolkit.
    #[error(
        "cross build for {target}: no libcudart_static.a for it (looked in {looked_in}); \
         install the target's CUDA runtime beside the toolkit \
         (`cargo kiln toolkit install --target {target}`)"
    )]
    NoTargetRuntime {
        /// Cargo's `TARGET`.
        target: String,
        /// The folders looked in.
        looked_in: String,
    },
    /// The kernels' config file, or what it names, is wrong.
    #[error("{}: {message}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do, one line.
        message: String,
    },
    /// `OUT_DIR` is not set and no output dir was given.
    #[error("OUT_DIR is not set: run from a build script or give KernelBuild::out_dir")]
    NoOutDir,
    /// Committed bindings were generated from other headers than these
    /// ([`KernelBuild::check_bindings`](crate::KernelBuild::check_bindings)).
    #[error("{message}")]
    StaleBindings {
        /// Which file, which headers, and the command that regenerates.
        message: String,
    },
    /// Codegen could not load libclang (bindgen and the walk need it).
    #[error("codegen: cannot load libclang ({reason}); set LIBCLANG_PATH to the directory holding libclang.so")]
    Libclang {
        /// Why loading failed.
        reason: String,
    },
    /// Generating bindings failed.
    #[error("codegen: {message}")]
    Codegen {
        /// What went wrong.
        message: String,
    },
}

/// `fs` calls with the path in the error.
pub(crate) fn io<T>(path: &std::path::Path, result: std::io::Result<T>) -> Result<T, Error> {
    result.map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}
