//! `cargo kiln new NAME`: a crate with one kernel, its header, `build.rs`,
//! committed bindings, a CPU reference and a test, which builds CPU-only and
//! with a CUDA toolkit as written. The crate is written into a temp dir beside
//! its destination and renamed into place, so a failure leaves nothing behind.

mod graph;
mod name;
mod source;
pub mod template;

use std::path::{Path, PathBuf};

pub use name::{validate_name, NameError, MAX_NAME_LEN};
use template::{KilnSource, Vars};

/// The arguments of `cargo kiln new`.
#[derive(Debug, Clone, clap::Args)]
pub struct NewArgs {
    /// The crate's name: lowercase letters, digits, `-` and `_`, starting
    /// with a letter (also its env prefix: `my-kernels` reads
    /// `MY_KERNELS_CUDA_ARCHS`, ...)
    pub name: String,
    /// The folder to create [default: ./NAME]; it must not exist or be empty
    #[arg(long, value_name = "DIR")]
    pub path: Option<PathBuf>,
    /// Depend on kiln's crates by path in this kiln checkout (its root)
    /// [default: where this cargo-kiln was installed from: its git URL and
    /// commit, or its checkout]
    #[arg(long, value_name = "DIR", conflicts_with = "kiln_git")]
    pub kiln_path: Option<PathBuf>,
    /// Depend on kiln's crates from this git repository
    #[arg(long, value_name = "URL")]
    pub kiln_git: Option<String>,
    /// With --kiln-git: the commit, tag or branch to pin
    #[arg(long, value_name = "REV", requires = "kiln_git")]
    pub kiln_rev: Option<String>,
}

/// Why no crate was made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The name is not a crate name `cargo kiln new` accepts.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The destination holds files.
    #[error("{} already exists and is not empty; choose another name or --path", dest.display())]
    DestinationNotEmpty {
        /// The destination.
        dest: PathBuf,
    },
    /// The destination is a file.
    #[error("{} already exists and is not a folder; choose another name or --path", dest.display())]
    DestinationNotADir {
        /// The destination.
        dest: PathBuf,
    },
    /// `--kiln-path` is not a kiln checkout.
    #[error("{} is not a kiln checkout ({} is not the manifest of {package}); pass the folder that holds kiln's `crates/`", root.display(), missing.display())]
    NotAKilnCheckout {
        /// The folder given.
        root: PathBuf,
        /// The manifest that should be there.
        missing: PathBuf,
        /// The package it should name.
        package: String,
    },
    /// The name is a crate's in the new crate's dependency graph.
    #[error("the crate name `{name}` is taken by {by} in the new crate's dependency graph, so it would not build; choose another")]
    NameInGraph {
        /// The name given.
        name: String,
        /// The crate that takes it, and what brings it in.
        by: String,
    },
    /// `--kiln-git` or `--kiln-rev` holds what Cargo cannot take.
    #[error("{flag} {value:?} holds {found:?}; pass a URL (or rev) without whitespace or control characters")]
    BadGitValue {
        /// `--kiln-git` or `--kiln-rev`.
        flag: &'static str,
        /// The value given.
        value: String,
        /// The first character refused.
        found: char,
    },
    /// No flag names kiln's source and none could be learned.
    #[error(
        "cannot tell where kiln's crates come from (this cargo-kiln has no install record and its \
         checkout {} is gone); pass --kiln-path DIR (a kiln checkout) or --kiln-git URL",
        checkout.display()
    )]
    NoKilnSource {
        /// The checkout this program was built from.
        checkout: PathBuf,
    },
    /// `--kiln-git` is empty.
    #[error("--kiln-git is empty; pass the URL of kiln's git repository")]
    EmptyGitUrl,
    /// Reading or writing a file failed (the OS error is the source, shown
    /// once after the path).
    #[error("{}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The headers' fingerprint for the bindings could not be taken.
    #[error("fingerprinting the new crate's headers: {0}")]
    Fingerprint(#[from] cuda_build::Error),
}

fn io<T>(path: &Path, result: std::io::Result<T>) -> Result<T, Error> {
    result.map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// What [`run`] made.
#[derive(Debug, Clone)]
pub struct Created {
    /// The crate's folder.
    pub dir: PathBuf,
    /// The files written, relative to `dir`, `/`-separated.
    pub files: Vec<&'static str>,
}

/// Makes the crate `args` asks for: relative paths are against the current
/// dir.
pub fn run(args: &NewArgs) -> Result<Created, Error> {
    validate_name(&args.name)?;
    let source = kiln_source(args)?;
    let dest = args
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    create(&args.name, &source, &dest)
}

/// Where the new crate's kiln dependencies come from: the flags, else the
/// source this program was installed from, else the checkout it was built in.
fn kiln_source(args: &NewArgs) -> Result<KilnSource, Error> {
    if let Some(root) = &args.kiln_path {
        return Ok(KilnSource::Path(kiln_checkout(root)?));
    }
    if let Some(url) = &args.kiln_git {
        if url.trim().is_empty() {
            return Err(Error::EmptyGitUrl);
        }
        check_git_value("--kiln-git", url)?;
        if let Some(rev) = &args.kiln_rev {
            check_git_value("--kiln-rev", rev)?;
        }
        return Ok(KilnSource::Git {
            url: url.clone(),
            rev: args.kiln_rev.clone(),
        });
    }
    match source::installed() {
        Some(KilnSource::Path(root)) => Ok(KilnSource::Path(kiln_checkout(&root)?)),
        Some(git) => Ok(git),
        None => {
            let checkout = source::build_checkout();
            kiln_checkout(&checkout)
                .map(KilnSource::Path)
                .map_err(|_| Error::NoKilnSource { checkout })
        }
    }
}

/// A URL or rev Cargo.toml can hold and Cargo can fetch: no whitespace or
/// control characters (a newline would end the TOML string's line).
fn check_git_value(flag: &'static str, value: &str) -> Result<(), Error> {
    match value.chars().find(|c| c.is_whitespace() || c.is_control()) {
        Some(found) => Err(Error::BadGitValue {
            flag,
            value: value.to_owned(),
            found,
        }),
        None => Ok(()),
    }
}

/// Refuses `name` when a crate of the new crate's graph has it.
fn check_graph(name: &str, source: &KilnSource) -> Result<(), Error> {
    let checkout = match source {
        KilnSource::Path(root) => Some(root.clone()),
        // The checkout this program came from, when it is still there.
        KilnSource::Git { .. } => {
            Some(source::build_checkout()).filter(|root| graph::check_checkout(root).is_ok())
        }
    };
    let names = graph::names(source, checkout.as_deref());
    match names.get(&name.replace('-', "_")) {
        Some(by) => Err(Error::NameInGraph {
            name: name.to_owned(),
            by: by.clone(),
        }),
        None => Ok(()),
    }
}

/// The absolute root of the kiln checkout at `root`, checked to hold the
/// crates the new crate depends on.
fn kiln_checkout(root: &Path) -> Result<PathBuf, Error> {
    graph::check_checkout(root)?;
    io(root, std::path::absolute(root))
}

/// Writes crate `name` (validated) depending on kiln through `source` into
/// `dest`, which must not exist or be an empty folder.
pub fn create(name: &str, source: &KilnSource, dest: &Path) -> Result<Created, Error> {
    check_graph(name, source)?;
    check_destination(dest)?;
    let dest = io(dest, std::path::absolute(dest))?;
    let parent = dest.parent().unwrap_or(Path::new("/"));
    io(parent, std::fs::create_dir_all(parent))?;
    // Beside the destination, so that the rename stays on one file system.
    let staging = io(
        parent,
        tempfile::Builder::new()
            .prefix(".cargo-kiln-new-")
            .tempdir_in(parent),
    )?;
    // A folder made inside the temp dir gets the usual permissions (the temp
    // dir itself is private to the user).
    let staged = staging.path().join(name);
    io(&staged, std::fs::create_dir(&staged))?;
    let files = write_files(name, source, &staged)?;
    if let Ok(old) = std::fs::symlink_metadata(&dest) {
        // The empty folder given (checked above) keeps its mode and group.
        keep_mode_and_group(&old, &staged)?;
        // rename does not replace a folder everywhere.
        io(&dest, std::fs::remove_dir(&dest))?;
    }
    io(&dest, std::fs::rename(&staged, &dest))?;
    Ok(Created { dir: dest, files })
}

/// Gives `dir` the permissions and group of `old`: a group the user is not
/// in cannot be given, and then the new folder's own group stays.
fn keep_mode_and_group(old: &std::fs::Metadata, dir: &Path) -> Result<(), Error> {
    io(dir, std::fs::set_permissions(dir, old.permissions()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        match std::os::unix::fs::chown(dir, None, Some(old.gid())) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
            other => io(dir, other)?,
        }
    }
    Ok(())
}

fn check_destination(dest: &Path) -> Result<(), Error> {
    match std::fs::symlink_metadata(dest) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => io(dest, Err(e)),
        Ok(meta) if !meta.is_dir() => Err(Error::DestinationNotADir {
            dest: dest.to_owned(),
        }),
        Ok(_) => {
            let mut entries = io(dest, std::fs::read_dir(dest))?;
            match entries.next() {
                None => Ok(()),
                Some(_) => Err(Error::DestinationNotEmpty {
                    dest: dest.to_owned(),
                }),
            }
        }
    }
}

/// Renders every template file into `dir`; the bindings last, with the
/// fingerprint of the headers just written.
fn write_files(name: &str, source: &KilnSource, dir: &Path) -> Result<Vec<&'static str>, Error> {
    let vars = Vars::new(name, source);
    let mut written = Vec::new();
    for file in template::FILES {
        write(dir, file.path, &vars.render(file.text))?;
        written.push(file.path);
    }
    let fingerprint = cuda_build::bindings::header_fingerprint(&dir.join(template::INCLUDE_DIR))?;
    let bindings = template::BINDINGS;
    write(
        dir,
        bindings.path,
        &vars.with_fingerprint(&fingerprint).render(bindings.text),
    )?;
    written.push(bindings.path);
    Ok(written)
}

fn write(dir: &Path, relative: &str, text: &str) -> Result<(), Error> {
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        io(parent, std::fs::create_dir_all(parent))?;
    }
    io(&path, std::fs::write(&path, text))
}
