//! The names kiln gives the folders beside an output folder NAME: a run's
//! staging folder `.NAME.kiln-new-*` and an old output moved aside
//! `.NAME.kiln-old-*`, with NAME shortened where the whole would pass the
//! longest name a folder may have.

use std::ffi::OsStr;

/// The prefix of a new output's staging folder beside `name`.
pub(crate) fn new_prefix(name: &OsStr) -> String {
    format!(".{}.kiln-new-", stem(name))
}

/// The prefix of an old output moved aside from `name`.
pub(crate) fn old_prefix(name: &OsStr) -> String {
    format!(".{}.kiln-old-", stem(name))
}

/// The longest stem that leaves room in a file name (255 bytes) for the
/// dot and the longest suffix (`.kiln-old-` and 12 hex digits).
const STEM_MAX: usize = 255 - 1 - 22;

/// `name` as the names beside it carry it: whole where they fit, else its
/// start and a hash of all of it (`~` and 16 hex digits), so that an
/// output named as long as a folder may be still has its own.
fn stem(name: &OsStr) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let whole = name.to_string_lossy();
    if whole.len() <= STEM_MAX {
        return whole.into_owned();
    }
    let mut hasher = std::hash::DefaultHasher::new();
    name.hash(&mut hasher);
    let mut end = STEM_MAX - 17;
    while !whole.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}~{:016x}", &whole[..end], hasher.finish())
}
