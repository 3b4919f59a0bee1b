//! Eviction: the store's own entries, least recently used first, removed
//! until the store is within its bound. A shared `KILN_CACHE_DIR` may hold
//! anything its writers planted, so the walk opens every folder below the
//! store's root with `O_NOFOLLOW` (a shard that is a link is not entered),
//! and removes with `unlinkat` in the shard it listed, only regular files
//! named as the cache names its entries (64 hex digits, starting with their
//! shard's two): never a link, a folder, a temp file or a stranger's file.

use std::path::Path;

/// One entry of the cache's own: its shard, its name, its size and when it
/// was last used (its mtime, set on every hit).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    used: (i128, i128),
    shard: String,
    name: String,
    len: u64,
}

/// Whether `name` is how the cache names a shard (two hex digits).
fn is_shard_name(name: &str) -> bool {
    name.len() == 2
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Whether `name` is how the cache names an entry of `shard` (a SHA-256 in
/// lower-case hex, its first two digits the shard's).
fn is_entry_name(shard: &str, name: &str) -> bool {
    name.len() == 64
        && name.starts_with(shard)
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Removes the least recently used of the store's own entries under `root`
/// (the layout's folder) until they total at most `max_bytes`. Every
/// failure leaves the store as it is: eviction is never a build failure.
#[cfg(unix)]
pub(super) fn to_bound(root: &Path, max_bytes: u64) {
    use rustix::fs::{AtFlags, Mode, OFlags, CWD};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // The root itself is the user's setting (it may be a link they made);
    // below it, nothing is followed.
    let Some(entries_dir) = root.parent().and_then(|store| {
        let store = rustix::fs::openat(CWD, store, flags - OFlags::NOFOLLOW, Mode::empty()).ok()?;
        let layout = rustix::fs::openat(&store, root.file_name()?, flags, Mode::empty()).ok()?;
        rustix::fs::openat(&layout, "entries", flags, Mode::empty()).ok()
    }) else {
        return;
    };
    let mut shards = Vec::new();
    let mut found = Vec::new();
    for name in names(&entries_dir).into_iter().filter(|n| is_shard_name(n)) {
        // O_NOFOLLOW | O_DIRECTORY: a link or a file named as a shard fails.
        let Ok(shard) = rustix::fs::openat(&entries_dir, name.as_str(), flags, Mode::empty())
        else {
            continue;
        };
        for entry in names(&shard)
            .into_iter()
            .filter(|n| is_entry_name(&name, n))
        {
            let Ok(stat) = rustix::fs::statat(&shard, entry.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                != rustix::fs::FileType::RegularFile
            {
                continue;
            }
            found.push(Entry {
                used: (stat.st_mtime.into(), stat.st_mtime_nsec.into()),
                shard: name.clone(),
                name: entry,
                len: u64::try_from(stat.st_size).unwrap_or(0),
            });
        }
        shards.push((name, shard));
    }
    let mut total: u64 = found.iter().map(|e| e.len).fold(0, u64::saturating_add);
    found.sort();
    for entry in found {
        if total <= max_bytes {
            break;
        }
        let Some((_, shard)) = shards.iter().find(|(name, _)| *name == entry.shard) else {
            continue;
        };
        // unlinkat never follows: were the file swapped for a link since it
        // was looked at, the link alone would go.
        if rustix::fs::unlinkat(shard, entry.name.as_str(), AtFlags::empty()).is_ok() {
            total = total.saturating_sub(entry.len);
        }
    }
}

/// The UTF-8 names in the folder `dir` (others are not the cache's).
#[cfg(unix)]
fn names(dir: &std::os::fd::OwnedFd) -> Vec<String> {
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
        return Vec::new();
    };
    listing
        .flatten()
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_string))
        .filter(|n| n != "." && n != "..")
        .collect()
}

/// Without `openat`: the same walk by `symlink_metadata`, racy against a
/// link swapped in between the look and the removal.
#[cfg(not(unix))]
pub(super) fn to_bound(root: &Path, max_bytes: u64) {
    use std::time::SystemTime;
    let mut found = Vec::new();
    let Ok(shards) = std::fs::read_dir(root.join("entries")) else {
        return;
    };
    for shard in shards.flatten() {
        let name = shard.file_name().to_string_lossy().into_owned();
        if !is_shard_name(&name) || !shard.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        for entry in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let entry_name = entry.file_name().to_string_lossy().into_owned();
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if is_entry_name(&name, &entry_name) && meta.file_type().is_file() {
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((used, meta.len(), entry.path()));
            }
        }
    }
    let mut total: u64 = found
        .iter()
        .map(|(_, len, _)| len)
        .fold(0, |a, b| a.saturating_add(*b));
    found.sort();
    for (_, len, path) in found {
        if total <= max_bytes {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(len);
        }
    }
}
