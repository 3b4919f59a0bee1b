//! What an interrupted run left beside an output folder, found by the next
//! run into it: `.<name>.kiln-new-*` (a run's new output; complete once it
//! holds a marker) and `.<name>.kiln-old-*` (an old output being removed).
//! A folder whose lock another live run holds is that run's and is left
//! alone. Where the output folder is missing, the newest complete new
//! output is moved into place; complete leftovers are otherwise removed
//! through their markers, a staging folder without one (its run died
//! before it was complete) whole where it carries kiln's staging mark
//! (never by its name alone), else kept; each is reported.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{io_error, Error};
use crate::fsops;
use crate::inspect;
use crate::marker;
use crate::names::{new_prefix, old_prefix};
use crate::Spec;

/// What a leftover holds.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// A whole output (its marker): may be put in place.
    Whole(Vec<String>),
    /// An output being removed (the removing marker): only removed.
    Removing(Vec<String>),
    /// No marker of this kind.
    Unmarked,
}

/// A leftover found, with its lock held.
struct Leftover {
    path: PathBuf,
    new: bool,
    held: Held,
    age: std::time::SystemTime,
    _lock: fs::File,
}

/// What the leftover at `path` holds, for `kind`.
fn held(path: &Path, kind: &str) -> Held {
    let of_kind = |m: Result<Option<marker::Marker>, Error>| match m {
        Ok(Some(m)) if m.kind == kind => Some(m.files),
        _ => None,
    };
    if let Some(files) = of_kind(marker::read(path)) {
        Held::Whole(files)
    } else if let Some(files) = of_kind(marker::read_named(path, marker::REMOVING)) {
        Held::Removing(files)
    } else {
        Held::Unmarked
    }
}

/// Finds and settles the leftovers of earlier runs beside `dir`; returns
/// one line for each, saying where it went.
pub(crate) fn recover(
    parent: &Path,
    name: &OsStr,
    dir: &Path,
    spec: &Spec,
) -> Result<Vec<String>, Error> {
    let (new, old) = (new_prefix(name), old_prefix(name));
    let mut found = Vec::new();
    for entry in fs::read_dir(parent).map_err(io_error("listing", parent))? {
        let entry = entry.map_err(io_error("listing", parent))?;
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let is_new = file.starts_with(&new);
        if !(is_new || file.starts_with(&old)) {
            continue;
        }
        let path = entry.path();
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        // A live run holds its staging folder's lock: not a leftover.
        let Ok(lock) = fs::File::open(&path) else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue;
        }
        let age = fs::symlink_metadata(path.join(marker::MARKER))
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        found.push(Leftover {
            held: held(&path, spec.kind),
            path,
            new: is_new,
            age,
            _lock: lock,
        });
    }
    // The one to put back where DIR is missing comes first: the newest
    // whole new output, else the newest whole old one.
    found.sort_by_key(|l| {
        let whole = matches!(l.held, Held::Whole(_));
        (!whole, !l.new, std::cmp::Reverse(l.age))
    });
    let mut notes = Vec::new();
    let mut missing = fs::symlink_metadata(dir).is_err();
    for leftover in found {
        let shown = leftover.path.display();
        let files = match &leftover.held {
            Held::Whole(files) if missing => {
                fsops::rename_noreplace(&leftover.path, dir)
                    .map_err(io_error("restoring the output", dir))?;
                missing = false;
                notes.push(format!(
                    "{} was missing after an interrupted run: moved the complete output it left at {shown} back into place",
                    dir.display()
                ));
                continue;
            }
            Held::Whole(files) | Held::Removing(files) => files,
            // A staging folder no live run holds, carrying the mark kiln
            // writes first: made by kiln and filled by that run alone
            // (removing it follows no symlink). The name alone proves
            // nothing: a user's folder may be named so.
            Held::Unmarked if leftover.new && marker::has_staging(&leftover.path) => {
                fs::remove_dir_all(&leftover.path).map_err(io_error("removing", &leftover.path))?;
                notes.push(format!(
                    "removed {shown}, a partial output of {} that an interrupted run left beside it",
                    dir.display()
                ));
                continue;
            }
            Held::Unmarked => {
                notes.push(format!(
                    "{shown}: left beside {} by an interrupted run, with no list of kiln's files; kept, remove it yourself",
                    dir.display()
                ));
                continue;
            }
        };
        let kept = match inspect::first_unlisted(&leftover.path, files)? {
            Some(entry) => Some(entry),
            None => fsops::remove_listed(&leftover.path, files)?,
        };
        notes.push(match kept {
            None => format!(
                "removed {shown}, an earlier output of {} that an interrupted run left beside it",
                dir.display()
            ),
            Some(entry) => format!(
                "{shown}: an earlier output of {} left by an interrupted run, kept: it holds `{entry}`, which kiln did not write",
                dir.display()
            ),
        });
    }
    Ok(notes)
}
