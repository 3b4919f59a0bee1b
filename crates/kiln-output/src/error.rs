//! Why an output folder was refused or not written: one line each, the
//! path first, then what to do.

use std::io;
use std::path::PathBuf;

/// Why an output folder was refused or not written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The folder would hold a path that must not be replaced: the current
    /// folder, a crate, an input.
    #[error(
        "{}: contains {}{}; give an output folder of its own",
        dir.display(),
        if *current { "the current folder " } else { "" },
        inside.display()
    )]
    Contains {
        /// The output folder.
        dir: PathBuf,
        /// What it contains.
        inside: PathBuf,
        /// Whether that is the current folder.
        current: bool,
    },
    /// The path is a file or a symlink, not a folder.
    #[error("{}: is {what}, not a folder; give the path of a folder", dir.display())]
    NotAFolder {
        /// The path.
        dir: PathBuf,
        /// `"a file"`, `"a symlink"`.
        what: &'static str,
    },
    /// The folder is a mount point: an output is put in place by renaming
    /// folders, which cannot move one.
    #[error(
        "{}: is a mount point, which kiln cannot put an output in place of (it \
         renames folders); give a folder inside it",
        dir.display()
    )]
    MountPoint {
        /// The folder.
        dir: PathBuf,
    },
    /// The folder holds something kiln did not write, and no marker.
    #[error(
        "{}: holds {shown}, which kiln did not write; give a new or empty folder \
         (kiln writes only into folders it made)",
        dir.display()
    )]
    Foreign {
        /// The folder.
        dir: PathBuf,
        /// Its first entries, quoted.
        shown: String,
    },
    /// The folder is kiln's, but holds an entry its marker does not list.
    #[error(
        "{}: holds `{entry}`, which kiln did not write; move it out of the folder \
         or give another one (kiln replaces only its own files)",
        dir.display()
    )]
    Unlisted {
        /// The folder.
        dir: PathBuf,
        /// The entry, relative to it.
        entry: String,
    },
    /// The folder holds another kind of kiln output.
    #[error(
        "{}: holds the output of `{tool}` ({kind}), not a {wanted}; give another folder",
        dir.display()
    )]
    OtherKind {
        /// The folder.
        dir: PathBuf,
        /// The tool its marker names.
        tool: String,
        /// The kind its marker names.
        kind: String,
        /// The kind this run writes.
        wanted: &'static str,
    },
    /// The folder holds an earlier output of this kind, and replacing it
    /// was not asked for.
    #[error("{}: holds an earlier {kind}; allow replacing it, or give another folder", dir.display())]
    Exists {
        /// The folder.
        dir: PathBuf,
        /// The kind.
        kind: &'static str,
    },
    /// The marker is not one kiln reads.
    #[error("{}: {message}; remove the folder yourself or give another one", path.display())]
    BadMarker {
        /// The marker file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The folder that would hold the output does not exist.
    #[error("{}: folder does not exist; create it first", .0.display())]
    NoParent(PathBuf),
    /// A folder kiln must write in (the parent, or an old output it would
    /// remove files from) does not take changes.
    #[error("{}: cannot write in it ({error}); make it writable or give another folder", dir.display())]
    Unwritable {
        /// The folder.
        dir: PathBuf,
        /// Why (in the message, so no `source`: a report of the chain
        /// would repeat it).
        error: io::Error,
    },
    /// The folder changed while the output was being made (another
    /// program wrote it); nothing was replaced.
    #[error(
        "{}: changed while the output was being made ({error}); nothing was replaced, run again",
        dir.display()
    )]
    Raced {
        /// The folder.
        dir: PathBuf,
        /// What the last step found.
        error: io::Error,
    },
    /// The two-rename swap failed between its renames and could not be
    /// undone: both outputs are kept whole beside DIR.
    #[error(
        "{}: the swap failed halfway ({error}); the new output is complete at {} and the old \
         one at {}: run again to put the new one in place",
        dir.display(),
        new.display(),
        old.display()
    )]
    Halfway {
        /// The output folder.
        dir: PathBuf,
        /// Where the new output is.
        new: PathBuf,
        /// Where the old output is.
        old: PathBuf,
        /// What the last rename found (in the message).
        error: io::Error,
    },
    /// Settling an interrupted run's leftovers changed the folder, and the
    /// folder as it is now is refused.
    #[error("{notes}; then: {refusal}")]
    AfterLeftovers {
        /// What was done with the leftovers.
        notes: String,
        /// The refusal (in the message, as for `Unwritable`).
        refusal: Box<Error>,
    },
    /// A filesystem call failed.
    #[error("{}: {what}: {error}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error (in the message, as for `Unwritable`).
        error: io::Error,
    },
}

/// An [`Error::Io`] maker for `map_err`.
pub(crate) fn io_error(
    what: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(io::Error) -> Error {
    let path = path.to_path_buf();
    move |error| Error::Io { what, path, error }
}
