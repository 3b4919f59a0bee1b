//! kiln's output folders: every `--out DIR` a kiln command writes goes
//! through [`Output`]. kiln writes only into what it owns: DIR absent,
//! empty, or holding kiln's marker [`MARKER`] (the tool, the kind of output
//! and every file kiln wrote there) with nothing else in it; anything else
//! is refused in one line before the run, nothing touched. The new output
//! is made beside DIR in a hidden folder (`.<DIR>.kiln-new-*`, which proves
//! the parent writable before a long run; made with DIR's mode and group,
//! or the umask and a setgid parent's group where DIR is new, and what is
//! written in it fitted to that at commit) and swapped into place by one
//! `renameat2(RENAME_EXCHANGE)` (two renames where the filesystem lacks
//! it), so DIR holds the whole old output or the whole new one at every
//! instant; the old one is then removed file by file from its marker's
//! list, never through a symlink. A run killed between the steps leaves a
//! hidden folder that the next run into DIR finds, settles and reports.
//! Concurrent runs into one DIR serialize their swaps on a lock of the
//! parent folder: the last one's output is the one in place, never a mix.

mod error;
mod fsops;
mod inspect;
mod leftovers;
mod marker;
mod modes;
mod names;
#[cfg(feature = "testing")]
pub mod testing;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

pub use error::Error;
pub use marker::MARKER;
#[cfg(test)]
use marker::STAGING;

use error::io_error;
use inspect::State;

/// What writes an output folder, recorded in its marker.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The command, as a user types it (`cargo kiln bundle`).
    pub tool: &'static str,
    /// The kind of output (`kiln-bundle`): a folder is replaced only by a
    /// run writing the same kind.
    pub kind: &'static str,
    /// Whether an earlier output of this kind may be replaced (`--force`
    /// where the command asks for it).
    pub replace: bool,
    /// For outputs kiln wrote before it wrote markers: given a folder with
    /// no marker, the files it would list, where the folder is such an
    /// output and holds nothing else.
    pub legacy: Option<Adopt>,
}

/// A recognizer of an output written before markers: the files it would
/// list, or `None` where the folder is not such an output.
pub type Adopt = fn(&Path) -> Option<Vec<String>>;

/// An output being made: checked, with its staging folder created, to be
/// filled at [`Output::path`] and put in place by [`Output::commit`].
/// Dropped uncommitted, the staging folder is removed and DIR is as it was.
#[derive(Debug)]
pub struct Output {
    dir: PathBuf,
    parent: PathBuf,
    name: OsString,
    spec: Spec,
    staging: Option<PathBuf>,
    // The staging folder's lock, held while this run lives, so that another
    // run does not take the folder for a leftover.
    _lock: fs::File,
    notes: Vec<String>,
    #[cfg(test)]
    stop: Option<Step>,
    // Tests take the two-rename path by turning this off.
    #[cfg(test)]
    exchange: bool,
}

/// The steps of [`Output::commit`] after which a test stops, as a kill would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The new output is complete, with its marker, beside DIR.
    Marked,
    /// Exchanged: the new output at DIR, the old one at the staging name.
    Exchanged,
    /// Two renames: the old output moved aside, DIR absent.
    MovedAside,
    /// The old output moved to its `kiln-old` name, not yet removed.
    OldAside,
}

impl Output {
    /// Checks that `dir` may be written by `spec` (refusing a folder that
    /// is not kiln's, holds a file kiln did not write, or contains one of
    /// `protect` or the current folder), settles earlier interrupted runs'
    /// leftovers, and creates the staging folder beside it.
    pub fn prepare(dir: &Path, spec: Spec, protect: &[&Path]) -> Result<Self, Error> {
        let (parent, name) = locate(dir)?;
        let dir = parent.join(&name);
        let cwd = std::env::current_dir().ok();
        let protected = protect.iter().map(|p| (*p, false));
        for (inside, current) in protected.chain(cwd.as_deref().map(|c| (c, true))) {
            if fs::canonicalize(inside).is_ok_and(|p| p.starts_with(&dir)) {
                return Err(Error::Contains {
                    dir,
                    inside: inside.to_path_buf(),
                    current,
                });
            }
        }
        let parent_lock = lock_parent(&parent)?;
        let before = checked_state(&dir, &spec)?;
        let notes = leftovers::recover(&parent, &name, &dir, &spec)?;
        let state = if notes.is_empty() {
            before
        } else {
            checked_state(&dir, &spec).map_err(|source| Error::AfterLeftovers {
                notes: notes.join("; "),
                refusal: Box::new(source),
            })?
        };
        if let State::Owned(files) = &state {
            inspect::check_removable(&dir, files)?;
        }
        let staging = tempfile::Builder::new()
            .prefix(&names::new_prefix(&name))
            .permissions(modes::new_folder())
            .tempdir_in(&parent)
            .map_err(|error| Error::Unwritable {
                dir: parent.clone(),
                error,
            })?
            .keep();
        let lock = fs::File::open(&staging)
            .and_then(|f| {
                f.try_lock().map_err(std::io::Error::from)?;
                Ok(f)
            })
            .map_err(io_error("locking the staging folder", &staging));
        let lock = match lock {
            Ok(lock) => lock,
            Err(e) => {
                let _ = fs::remove_dir(&staging);
                return Err(e);
            }
        };
        // Made as mkdir makes a folder (the umask, a setgid parent's
        // group); where DIR exists, as DIR is. Marked as kiln's first, so a
        // later run removes it only if it carries the mark.
        let existing = fs::symlink_metadata(&dir).ok().filter(fs::Metadata::is_dir);
        let made = existing
            .map_or(Ok(()), |existing| modes::take_folder(&staging, &existing))
            .and_then(|()| marker::write_staging(&staging));
        if let Err(e) = made {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
        drop(parent_lock);
        Ok(Self {
            dir,
            parent,
            name,
            spec,
            staging: Some(staging),
            _lock: lock,
            notes,
            #[cfg(test)]
            stop: None,
            #[cfg(test)]
            exchange: true,
        })
    }

    /// The staging folder left as a kill while it is filled leaves it: its
    /// lock released, never removed.
    #[cfg(test)]
    pub(crate) fn killed(mut self) -> PathBuf {
        self.staging.take().expect("present until committed")
    }

    /// The folder to fill: the new output, beside DIR until committed.
    pub fn path(&self) -> &Path {
        self.staging.as_deref().expect("present until committed")
    }

    /// The output folder (absolute, its parent resolved).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One line for each leftover of an interrupted run that
    /// [`Output::prepare`] found, saying where it went.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Lists and flushes what was written at [`Output::path`], writes the
    /// marker, and swaps the new output into place; the old output's
    /// listed files are then removed. Returns one line for anything of
    /// note (an old output kept because it holds a file kiln did not
    /// write). On an error the new output is removed and DIR is as it was.
    pub fn commit(mut self) -> Result<Vec<String>, Error> {
        let staging = self.staging.take().expect("present until committed");
        match self.swap(&staging) {
            Ok(Some(notes)) => Ok(notes),
            // Stopped by a test: left as a kill would leave it.
            Ok(None) => Ok(Vec::new()),
            // Every error but a swap failed halfway comes before the swap:
            // the staging folder holds this run's new output, and only that.
            Err(e) => {
                if !matches!(e, Error::Halfway { .. }) {
                    let _ = fs::remove_dir_all(&staging);
                }
                Err(e)
            }
        }
    }

    /// Whether a test asked to stop after `step`.
    #[cfg(test)]
    fn stops(&self, step: Step) -> bool {
        self.stop == Some(step)
    }

    /// Whether a test asked to stop after `step`: never, outside tests.
    #[cfg(not(test))]
    #[allow(clippy::unused_self)]
    fn stops(&self, _step: Step) -> bool {
        false
    }

    /// Swaps the staging folder and DIR in one step where the filesystem
    /// can (and a test did not turn it off).
    fn exchange(&self, staging: &Path) -> std::io::Result<bool> {
        #[cfg(test)]
        if !self.exchange {
            return Ok(false);
        }
        fsops::exchange(staging, &self.dir)
    }

    /// The commit's steps; `None` where a test stopped them.
    fn swap(&self, staging: &Path) -> Result<Option<Vec<String>>, Error> {
        let dir = &self.dir;
        // From here the marker, once written, proves the folder kiln's; a
        // kill before it leaves a folder that is kept, never removed.
        marker::remove_staging(staging)?;
        let files = fsops::list_and_sync(staging)?;
        // The old output (if any) is at DIR until the swap.
        modes::fit(staging, &files, Some(dir.as_path()))?;
        let marker = marker::Marker::new(self.spec.tool, self.spec.kind, files);
        marker::write(staging, &marker)?;
        modes::fit(staging, &[MARKER.to_string()], None)?;
        fsops::sync_dir(staging)?;
        if self.stops(Step::Marked) {
            return Ok(None);
        }
        let _parent = lock_parent(&self.parent)?;
        let raced = |error| Error::Raced {
            dir: dir.clone(),
            error,
        };
        let old = match checked_state(dir, &self.spec)? {
            State::Absent => {
                fsops::rename_noreplace(staging, dir).map_err(raced)?;
                None
            }
            // A folder renamed onto an empty one replaces it; onto one that
            // filled meanwhile, the rename fails.
            State::Empty => {
                fs::rename(staging, dir).map_err(raced)?;
                None
            }
            State::Owned(old) => Some(old),
        };
        let Some(old_files) = old else {
            fsops::sync_dir(&self.parent)?;
            return Ok(Some(Vec::new()));
        };
        let aside = fsops::old_name(&self.parent, &self.name);
        let old_at = if self.exchange(staging).map_err(raced)? {
            let _ = fsops::sync_dir(&self.parent);
            if self.stops(Step::Exchanged) {
                return Ok(None);
            }
            // The old output sits at the staging name: moved to a name that
            // says what it is, or removed where it is.
            match fs::rename(staging, &aside) {
                Ok(()) => aside,
                Err(_) => staging.to_path_buf(),
            }
        } else {
            fs::rename(dir, &aside).map_err(raced)?;
            if self.stops(Step::MovedAside) {
                return Ok(None);
            }
            if let Err(error) = fsops::rename_noreplace(staging, dir) {
                if fs::rename(&aside, dir).is_err() {
                    // Both kept whole for the next run, which puts the
                    // new one in place.
                    return Err(Error::Halfway {
                        dir: dir.clone(),
                        new: staging.to_path_buf(),
                        old: aside,
                        error,
                    });
                }
                return Err(raced(error));
            }
            aside
        };
        let _ = fsops::sync_dir(&self.parent);
        if self.stops(Step::OldAside) {
            return Ok(None);
        }
        // The new output is in place: nothing after this fails the run.
        let kept = match fsops::remove_listed(&old_at, &old_files) {
            Ok(None) => return Ok(Some(Vec::new())),
            Ok(Some(entry)) => format!("it holds `{entry}`, which kiln did not write"),
            Err(e) => format!("removing it failed ({e})"),
        };
        Ok(Some(vec![format!(
            "the old output of {} is kept at {}: {kept}",
            dir.display(),
            old_at.display()
        )]))
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Uncommitted: the staging folder is this run's own, made fresh.
        if let Some(staging) = self.staging.take() {
            let _ = fs::remove_dir_all(staging);
        }
    }
}

/// What `dir` holds, refused unless the spec may write it.
fn checked_state(dir: &Path, spec: &Spec) -> Result<State, Error> {
    let state = inspect::state(dir, spec)?;
    if matches!(state, State::Owned(_)) && !spec.replace {
        return Err(Error::Exists {
            dir: dir.to_path_buf(),
            kind: spec.kind,
        });
    }
    Ok(state)
}

/// `(parent, name)` of `dir`: the parent resolved (symlinks and `..`), the
/// name as given; `.` and `..` at the end are resolved first.
fn locate(dir: &Path) -> Result<(PathBuf, OsString), Error> {
    let abs = std::path::absolute(dir).map_err(io_error("resolving the output folder", dir))?;
    let abs = match abs.components().next_back() {
        Some(std::path::Component::Normal(_)) => abs,
        _ => fs::canonicalize(&abs).map_err(io_error("resolving the output folder", dir))?,
    };
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return Err(Error::NotAFolder {
            dir: abs,
            what: "the root folder",
        });
    };
    let parent = match fs::canonicalize(parent) {
        Ok(p) if p.is_dir() => p,
        _ => return Err(Error::NoParent(parent.to_path_buf())),
    };
    Ok((parent, name.to_os_string()))
}

/// Takes the parent folder's lock, which orders concurrent runs' swaps
/// and leftover checks beside one DIR. A filesystem without locks (some
/// network mounts) gets none.
fn lock_parent(parent: &Path) -> Result<Option<fs::File>, Error> {
    let file = fs::File::open(parent).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => {
            Error::NoParent(parent.to_path_buf())
        }
        _ => Error::Unwritable {
            dir: parent.to_path_buf(),
            error,
        },
    })?;
    Ok(file.lock().ok().map(|()| file))
}

#[cfg(test)]
mod tests;
