//! Why a prebuilt folder was refused: one variant per kind of damage or
//! staleness, each displayed as one line that names the file and says what
//! to do. Text read from the folder is shown escaped (see [`shown`]), so a
//! hostile name cannot add a line to a build script's output.

use std::path::{Path, PathBuf};

/// What the author of a damaged folder does about it.
const WRITE_AGAIN: &str =
    "write the folder again from a build with a CUDA toolkit (cuda_build::prebuilt::export)";

/// Why a prebuilt folder is not used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrebuiltError {
    /// A file of the folder could not be read.
    #[error("cannot read {}: {source}; {WRITE_AGAIN}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A file the manifest names is not in the folder.
    #[error("{} is missing; {WRITE_AGAIN}", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A symlink, FIFO, device or dir where a regular file belongs: never
    /// followed or opened for reading.
    #[error("{} is {kind}, not a regular file; {WRITE_AGAIN}", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// `a symlink`, `a FIFO`, ...
        kind: &'static str,
    },
    /// A file over the size bound.
    #[error("{} is larger than {limit} bytes, more than a prebuilt file may be; {WRITE_AGAIN}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        limit: u64,
    },
    /// `prebuilt.toml` is not a prebuilt manifest of this format.
    #[error("{} is damaged ({problem}); {WRITE_AGAIN}", path.display())]
    Damaged {
        /// The manifest.
        path: PathBuf,
        /// What is wrong, one line.
        problem: String,
    },
    /// A path in the manifest that leaves its folder (`..`, absolute, a
    /// dir, or a symlink out).
    #[error("{} names {what} `{name}`, which is not a file inside {inside}; {WRITE_AGAIN}", path.display())]
    Outside {
        /// The manifest.
        path: PathBuf,
        /// `the output of module \`saxpy\``, `the input`.
        what: String,
        /// The path as written (escaped).
        name: String,
        /// The folder it must stay in.
        inside: String,
    },
    /// An entry of an arch list that is not an arch this crate knows, in
    /// nvcc's spelling (`sm_90`, `compute_90`).
    #[error("{} lists `{entry}` in {list}, which is not a {kind} CUDA arch (`{example}`); {WRITE_AGAIN}", path.display())]
    Arch {
        /// The manifest.
        path: PathBuf,
        /// Which list (`sass`, `modules.saxpy.ptx`).
        list: String,
        /// The entry (escaped).
        entry: String,
        /// `real` or `virtual`.
        kind: &'static str,
        /// How one is written.
        example: &'static str,
    },
    /// A file whose bytes are not those the manifest records.
    #[error("{} does not hold the bytes prebuilt.toml records for it ({problem}); {WRITE_AGAIN}", path.display())]
    Changed {
        /// The file.
        path: PathBuf,
        /// `SHA-256 differs`, `12 bytes, not 12096`.
        problem: String,
    },
    /// An image that is not what its module declares: not a fat binary of
    /// the archs the generated code lists, or not an archive.
    #[error("{} is not what prebuilt.toml declares for {what}: {problem}; {WRITE_AGAIN}", path.display())]
    WrongImage {
        /// The file.
        path: PathBuf,
        /// `module \`saxpy\``, `the static CUDA runtime`.
        what: String,
        /// What is wrong, one line.
        problem: String,
    },
    /// A manifest with a value TOML cannot hold.
    #[error("cannot write prebuilt.toml: {problem}")]
    Unwritable {
        /// What the TOML writer said, one line.
        problem: String,
    },
    /// An input that changed since the folder was written.
    #[error("{name} changed since they were built")]
    InputChanged {
        /// The input, as the manifest names it.
        name: String,
    },
    /// An input that is gone.
    #[error("{name} is missing")]
    InputMissing {
        /// The input, as the manifest names it.
        name: String,
    },
    /// An input that resolves outside the package (or its include dir)
    /// through a symlink.
    #[error(
        "input {name} leads outside {} through a symlink; the prebuilt kernels are \
         checked against files inside it only", root.display()
    )]
    InputOutside {
        /// The input, as the manifest names it.
        name: String,
        /// The package root or include dir it must stay in.
        root: PathBuf,
    },
    /// A module of the sources the folder lacks.
    #[error("{first} (module `{module}`) is not among them")]
    ModuleAdded {
        /// Its first source.
        first: String,
        /// The module.
        module: String,
    },
    /// A module whose sources are not those the folder was built from.
    #[error("module `{module}` has other sources now")]
    ModuleSources {
        /// The module.
        module: String,
    },
    /// A module of the folder that the sources no longer have.
    #[error("module `{module}` is gone from the sources")]
    ModuleGone {
        /// The module (escaped).
        module: String,
    },
    /// An image named otherwise than this build names its module's output.
    #[error("{} names `{found}` as module `{module}`'s image, not `{expected}`; {WRITE_AGAIN}", path.display())]
    OutputName {
        /// The manifest.
        path: PathBuf,
        /// The module.
        module: String,
        /// The name written (escaped).
        found: String,
        /// The name a build of this crate gives it.
        expected: String,
    },
    /// A cross build: a static library of the folder is host code of the
    /// machine that wrote it, which the folder does not record.
    #[error(
        "module `{module}` is a prebuilt static library (host code) and this is a cross build \
         for {target}; build it with a CUDA toolkit and the target's runtime \
         (`cargo kiln toolkit install --target {target}`)"
    )]
    CrossHostCode {
        /// The static module.
        module: String,
        /// Cargo's `TARGET`.
        target: String,
    },
}

impl PrebuiltError {
    pub(crate) fn damaged(path: &Path, problem: impl std::fmt::Display) -> Self {
        Self::Damaged {
            path: path.to_path_buf(),
            problem: one_line(&problem.to_string()),
        }
    }
}

/// Text from the folder as it may appear in a message: control characters
/// (a newline would start a new `cargo::` directive) escaped, and cut short.
pub(crate) fn shown(text: &str) -> String {
    const MAX: usize = 200;
    let mut escaped = String::new();
    for c in text.chars() {
        if c.is_control() {
            escaped.extend(c.escape_debug());
        } else {
            escaped.push(c);
        }
    }
    if escaped.len() > MAX {
        let cut = (0..=MAX).rev().find(|i| escaped.is_char_boundary(*i));
        escaped.truncate(cut.unwrap_or(0));
        escaped.push_str("...");
    }
    escaped
}

/// A parser's message on one line (toml's span the manifest path replaces).
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    shown(&joined)
}
