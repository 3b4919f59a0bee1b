//! The errors of `cuda-build`. A build script prints them as one line and
//! fails; each message says what went wrong and, where it can, what to do.

use std::fmt;
use std::path::PathBuf;

use crate::arch::ArchError;

/// Everything that can go wrong while building kernels.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An arch spec was refused.
    Arch(ArchError),
    /// A required CUDA toolkit was not found (`<PREFIX>_REQUIRE_CUDA=1`).
    ToolkitRequired {
        /// The variable that asked for it.
        var: String,
        /// Where discovery looked.
        looked_at: String,
        /// What to do about it ([`KernelBuild::toolkit_hint`](crate::KernelBuild::toolkit_hint)).
        hint: String,
    },
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A program could not be started.
    Spawn {
        /// The program.
        program: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A tool ran and failed.
    ToolFailed {
        /// The command line, for copying into a shell.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// nvcc failed on a module.
    Compile {
        /// The module (`.cu` stem).
        module: String,
        /// The command line, for copying into a shell.
        command: String,
        /// nvcc's diagnostics.
        stderr: String,
    },
    /// The kernels' config file is malformed.
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Generating bindings failed.
    Codegen {
        /// What went wrong.
        message: String,
    },
    /// The `cc` crate failed on a static-library module.
    StaticLibrary {
        /// The module.
        module: String,
        /// What `cc` said.
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Arch(e) => e.fmt(f),
            Error::ToolkitRequired {
                var,
                looked_at,
                hint,
            } => write!(
                f,
                "{var}=1 but no CUDA toolkit was found (looked at {looked_at}); \
                 {hint}, or unset {var} for a CPU-only build"
            ),
            Error::Io { path, source } => write!(f, "cannot access {}: {source}", path.display()),
            Error::Spawn { program, source } => {
                write!(f, "cannot run {}: {source}", program.display())
            }
            Error::ToolFailed {
                command,
                status,
                stderr,
            } => {
                write!(f, "`{command}` failed ({status}): {stderr}")
            }
            Error::Compile {
                module,
                command,
                stderr,
            } => write!(
                f,
                "nvcc failed on module `{module}`:\n{stderr}\ncommand: {command}"
            ),
            Error::Config { path, message } => {
                write!(f, "invalid kernel config {}: {message}", path.display())
            }
            Error::Codegen { message } => write!(f, "codegen: {message}"),
            Error::StaticLibrary { module, message } => {
                write!(
                    f,
                    "building static-library module `{module}` failed: {message}"
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Arch(e) => Some(e),
            Error::Io { source, .. } | Error::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ArchError> for Error {
    fn from(e: ArchError) -> Self {
        Error::Arch(e)
    }
}

/// `fs` calls with the path in the error.
pub(crate) fn io<T>(path: &std::path::Path, result: std::io::Result<T>) -> Result<T, Error> {
    result.map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}
