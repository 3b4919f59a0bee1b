//! The kernel cache: nvcc's outputs kept by content, outside any target dir,
//! so that `cargo clean`, a fresh clone (at any path: another checkout, a CI
//! runner's, a teammate's on a shared store), or the other profile (dev and
//! release share it) compiles nothing that was compiled before.
//!
//! # What a key covers
//! A compile's key is found in two steps, as ccache's direct mode does: a
//! base key of what is known before nvcc runs, then, for each set of files an
//! earlier compile with that base key read (its depfile, `nvcc -MD`), the
//! content of every one of those files as they are now.
//! - the base key: the command line (out dir written as `$OUT`, so that the
//!   dev and release profiles and a cleaned target dir share entries, and
//!   the crate's root as `$CRATE` where a flag names it absolutely; the
//!   launcher left out, it does not change the output), the source's name,
//!   `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS` (nvcc reads them), and the
//!   toolkit: its version with the build number (`13.0.88`, from
//!   `nvcc --version`: another release or patch level compiles differently)
//!   and its root (`-lineinfo` records the paths of the headers it inlines).
//!   The archs and flags are in the command line.
//! - the inputs: every file of the depfile (the source, the crate's headers,
//!   the host compiler's headers) by name and content, except those under
//!   the toolkit root, which its version covers. Hashing what the depfile
//!   lists rather than nvcc's preprocessed output needs no extra nvcc run
//!   per source.
//!
//! # Names, not places
//! A file of the crate (under its root, the build script's dir) is named
//! relative to the root, in the key and in the index: nvcc runs in the root
//! and is given the crate's sources and include dirs relative to it
//! (`compile.rs`), so its command line and depfile are the same wherever the
//! crate lies, and the same tree at another path hits. A file outside the
//! crate (the toolkit's headers, the system's, a shared include dir
//! elsewhere) keeps its absolute path. A hit's files are its index names
//! joined to this build's root, so its stamp and `rerun-if-changed` lines
//! name this checkout's files, never the one that stored it. The toolkit's
//! root stays in the key: checkouts share entries when they find the
//! toolkit at the same root (the user's toolkit store, one `CUDA_PATH`), not
//! across toolkits installed into each checkout.
//!
//! What differs in an image served to another checkout: `-lineinfo` (and
//! `-G`) make cicc record each source file with a line in the image by its
//! absolute path (the working dir joined to the name nvcc was given: no nvcc
//! option maps it; PTX `.file` directives, and the SASS line table's
//! include dirs), and the SASS line table records each file's size and
//! mtime. So such an image names the storing checkout's root and its files'
//! mtimes; the code, the kernels, their resources and the line numbers are
//! the same bytes (the source's content is in the key). The mtimes already
//! differed before names were relative (a fresh clone at the same path hits
//! too). Profilers and compute-sanitizer show that path: point their source
//! lookup at the crate.
//!
//! A link step's key (`-dlink`, `-lib`) is its command line and the content
//! of the objects it reads.
//!
//! # The store
//! `KILN_CACHE_DIR` (default: the user's cache dir, `$XDG_CACHE_HOME/kiln`
//! on Linux), bounded by `KILN_CACHE_MAX` (default 2G; least recently used
//! entries go first, and only the cache's own: regular files of its naming,
//! found without following a link, see `cache/evict.rs`), off with
//! `KILN_CACHE=off`. These names are the same for every crate built with
//! cuda-build, whatever its env prefix: the store is one per user. Every
//! file is written to a temp file beside it and renamed into place (never
//! through a link planted among the store's folders), so concurrent builds
//! read whole entries or none; a store that cannot be written only costs
//! the next build its hit.
//!
//! # What a read trusts
//! Nothing it did not check: every entry starts with the SHA-256 of its key
//! and its content (log and output), checked on every read, so a truncated
//! or altered entry, or another key's entry copied or linked in its place,
//! is a miss. Only regular files are read from the store, never through a
//! symlink (`O_NOFOLLOW`) and without waiting on a FIFO (`O_NONBLOCK`),
//! within a size bound; the files an index names are read the same way
//! (following symlinks: headers may be links). The caller checks what a hit
//! holds (a fat binary of the module's archs) before it takes it. A miss
//! recompiles and the new entry replaces the bad one; a cache failure is
//! never a build failure.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use sha2::{Digest as _, Sha256};

use crate::depfile;
use crate::driver::NVCC_OWN_VARS;
use crate::error::Error;
use crate::manifest::CacheReport;
use crate::regular::Links;
use crate::settings;
use crate::toolkit::Toolkit;

/// `KILN_CACHE=off` turns the cache off.
pub(crate) const SWITCH_VAR: &str = "KILN_CACHE";
/// Where the store lives.
pub(crate) const DIR_VAR: &str = "KILN_CACHE_DIR";
/// Its bound (`500M`, `2G`, `2GiB`, or bytes).
pub(crate) const MAX_VAR: &str = "KILN_CACHE_MAX";
/// The variables the cache reads.
pub(crate) const VARS: [&str; 3] = [SWITCH_VAR, DIR_VAR, MAX_VAR];

const DEFAULT_MAX: u64 = 2_000_000_000;
/// Bumped when the key or the entry format changes: old entries are ignored.
/// v2: entries carry their own hash. v3: the crate's files named relative to
/// its root.
const LAYOUT: &str = "v3";
/// An index (sets of paths) larger than this is damage.
const INDEX_MAX: u64 = 1 << 20;
/// A compile's input larger than this is not hashed: the compile misses.
const INPUT_MAX: u64 = 1 << 30;
/// Sets of inputs kept per base key (a header switched back and forth).
const CANDIDATES: usize = 4;

/// Where the store is and how big it may grow, from the environment; `None`
/// when it is off (or there is no cache dir to default to).
pub(crate) fn settings_from_env() -> Result<Option<(PathBuf, u64)>, Error> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if settings::switch(SWITCH_VAR)? == Some(false) {
        return Ok(None);
    }
    let max = match var(MAX_VAR) {
        None => DEFAULT_MAX,
        Some(text) => parse_size::parse_size(text.trim()).map_err(|e| Error::Setting {
            var: MAX_VAR.to_string(),
            value: text.clone(),
            problem: format!("is not a size ({e})"),
            fix: format!("write a size such as 500M or 2G, or unset {MAX_VAR}"),
        })?,
    };
    let dir = match var(DIR_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => match dirs::cache_dir() {
            Some(dir) => dir.join("kiln"),
            None => return Ok(None),
        },
    };
    Ok(Some((dir, max)))
}

/// One build's view of the store.
#[derive(Debug)]
pub(crate) struct Cache {
    root: PathBuf,
    max_bytes: u64,
    /// The toolkit and nvcc's own variables, in every key.
    identity: String,
    toolkit_root: PathBuf,
    out_dir: PathBuf,
    /// The crate's root: its files are named relative to it.
    crate_root: PathBuf,
    hits: AtomicUsize,
    misses: AtomicUsize,
    stored: AtomicUsize,
}

/// A compile served from the store.
#[derive(Debug)]
pub(crate) struct Hit {
    pub(crate) output: Vec<u8>,
    pub(crate) log: String,
    /// Every file the compile read (its depfile), the crate's under this
    /// build's root.
    pub(crate) deps: Vec<PathBuf>,
}

impl Cache {
    pub(crate) fn new(
        dir: PathBuf,
        max_bytes: u64,
        toolkit: &Toolkit,
        out_dir: &Path,
        crate_root: &Path,
    ) -> Self {
        let mut identity = format!("toolkit {} at {}", toolkit.version, toolkit.root.display());
        for var in NVCC_OWN_VARS {
            identity.push_str(&format!(
                "\n{var}={}",
                std::env::var(var).unwrap_or_default()
            ));
        }
        Self {
            root: dir.join(LAYOUT),
            max_bytes,
            identity,
            toolkit_root: depfile::normalize(&toolkit.root),
            out_dir: out_dir.to_path_buf(),
            crate_root: depfile::normalize(crate_root),
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
            stored: AtomicUsize::new(0),
        }
    }

    /// The counts so far.
    pub(crate) fn report(&self) -> CacheReport {
        CacheReport {
            dir: self.root.parent().unwrap_or(&self.root).to_path_buf(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// The compile of `source` by `args`, if an earlier one read files that
    /// are all still as they were and its output passes `accept`.
    pub(crate) fn lookup_compile(
        &self,
        args: &[OsString],
        source: &Path,
        accept: impl Fn(&[u8]) -> bool,
    ) -> Option<Hit> {
        let base = self.base_key("compile", args, source);
        let hit = self.candidates(&base).into_iter().find_map(|names| {
            let deps = names
                .iter()
                .map(|name| self.file_named(name))
                .collect::<Option<Vec<_>>>()?;
            let key = self.inputs_key(&base, &deps)?;
            let (log, output) = self.read_entry(&key)?;
            accept(&output).then_some(Hit { output, log, deps })
        });
        self.count(hit.is_some());
        hit
    }

    /// Stores a compile's output (what nvcc wrote in this build) under the
    /// files it read (`deps`, its whole depfile).
    pub(crate) fn store_compile(
        &self,
        args: &[OsString],
        source: &Path,
        deps: &[PathBuf],
        output: &[u8],
        log: &str,
    ) {
        let base = self.base_key("compile", args, source);
        let Some(key) = self.inputs_key(&base, deps) else {
            return;
        };
        if self.write_entry(&key, output, log).is_ok() {
            let names: Vec<PathBuf> = deps.iter().map(|d| self.index_name(d)).collect();
            let _ = self.add_candidate(&base, &names);
        }
    }

    /// A link step's output and log, when the same command linked objects of
    /// the same content before and the output passes `accept`.
    pub(crate) fn lookup_link(
        &self,
        args: &[OsString],
        inputs: &[PathBuf],
        accept: impl Fn(&[u8]) -> bool,
    ) -> Option<(Vec<u8>, String)> {
        let hit = self
            .inputs_key(&self.base_key("link", args, Path::new("")), inputs)
            .and_then(|key| self.read_entry(&key))
            .filter(|(_, output)| accept(output))
            .map(|(log, output)| (output, log));
        self.count(hit.is_some());
        hit
    }

    /// Stores a link step's output (what nvcc wrote in this build).
    pub(crate) fn store_link(
        &self,
        args: &[OsString],
        inputs: &[PathBuf],
        output: &[u8],
        log: &str,
    ) {
        let base = self.base_key("link", args, Path::new(""));
        if let Some(key) = self.inputs_key(&base, inputs) {
            let _ = self.write_entry(&key, output, log);
        }
    }

    fn count(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn base_key(&self, kind: &str, args: &[OsString], source: &Path) -> String {
        let mut hasher = Sha256::new();
        for field in [
            kind.as_bytes(),
            self.identity.as_bytes(),
            self.index_name(source).as_os_str().as_encoded_bytes(),
        ] {
            feed(&mut hasher, field);
        }
        for arg in args {
            feed(&mut hasher, &self.arg_in_key(arg.as_encoded_bytes()));
        }
        hex(&hasher.finalize())
    }

    /// `$OUT/...` for a path in the out dir (the profiles' differ).
    fn without_out_dir(&self, text: &[u8]) -> Vec<u8> {
        let out = self.out_dir.as_os_str().as_encoded_bytes();
        match text.windows(out.len().max(1)).position(|w| w == out) {
            Some(at) if !out.is_empty() => {
                let mut normalized = text[..at].to_vec();
                normalized.extend_from_slice(b"$OUT");
                normalized.extend_from_slice(&text[at + out.len()..]);
                normalized
            }
            _ => text.to_vec(),
        }
    }

    /// The key of `base` with these files as they are now; `None` when one
    /// cannot be read.
    fn inputs_key(&self, base: &str, files: &[PathBuf]) -> Option<String> {
        let mut hasher = Sha256::new();
        feed(&mut hasher, base.as_bytes());
        for file in files {
            let normalized = depfile::normalize(file);
            feed(&mut hasher, &self.key_name(&normalized));
            if !normalized.starts_with(&self.toolkit_root) {
                let (_, bytes) = read_regular(file, INPUT_MAX, Links::Follow)?;
                feed(&mut hasher, &Sha256::digest(bytes));
            }
        }
        Some(hex(&hasher.finalize()))
    }

    /// How the index names a file: relative to the crate's root when it
    /// lies under it (not in the out dir, which may lie there too), else by
    /// its absolute path.
    fn index_name(&self, file: &Path) -> PathBuf {
        let normalized = depfile::normalize(file);
        if normalized.starts_with(&self.out_dir) {
            return normalized;
        }
        depfile::relative_to(&normalized, &self.crate_root)
    }

    /// How a key holds an argument: the out dir as `$OUT`, then the crate's
    /// root as `$CRATE` where a flag names it absolutely (`-I/w/crate/vendor`
    /// from the build script): both checkouts' flags are the same key, and
    /// a flag naming another checkout's files (outside this crate) is not.
    fn arg_in_key(&self, arg: &[u8]) -> Vec<u8> {
        let text = self.without_out_dir(arg);
        let root = self.crate_root.as_os_str().as_encoded_bytes();
        let mut out = Vec::with_capacity(text.len());
        let mut rest = &text[..];
        while let Some(at) = rest.windows(root.len().max(1)).position(|w| w == root) {
            let end = at + root.len();
            // Only a whole component: `/w/crate2` is not inside `/w/crate`.
            let whole = !root.is_empty() && matches!(rest.get(end), None | Some(b'/'));
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(if whole { b"$CRATE" } else { &rest[at..end] });
            rest = &rest[end..];
        }
        out.extend_from_slice(rest);
        out
    }

    /// How a key names a file: its index name, with the out dir as `$OUT`.
    fn key_name(&self, file: &Path) -> Vec<u8> {
        self.without_out_dir(self.index_name(file).as_os_str().as_encoded_bytes())
    }

    /// The file an index line names in this build: a relative name under
    /// the crate's root. `None` for a name no store of this cache writes
    /// (empty, `./x`, or climbing out with `..`): the index is damaged.
    fn file_named(&self, name: &Path) -> Option<PathBuf> {
        if name.is_absolute() {
            return Some(name.to_path_buf());
        }
        let plain = name
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        (plain && !name.as_os_str().is_empty()).then(|| self.crate_root.join(name))
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.root.join("entries").join(&key[..2]).join(key)
    }

    fn index_path(&self, base: &str) -> PathBuf {
        self.root.join("index").join(&base[..2]).join(base)
    }

    /// An entry: the SHA-256 of the key and the rest (32 bytes), the log's
    /// length (8 bytes, little-endian), the log, the output (never empty).
    /// `None` for anything else. Reading it marks it used, for the eviction
    /// order.
    fn read_entry(&self, key: &str) -> Option<(String, Vec<u8>)> {
        let (file, bytes) = read_regular(&self.entry_path(key), self.max_bytes, Links::Refuse)?;
        let (digest, content) = bytes.split_first_chunk::<32>()?;
        if *digest != entry_digest(key, content) {
            return None;
        }
        let (len, rest) = content.split_first_chunk::<8>()?;
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        let log = String::from_utf8(rest.get(..len)?.to_vec()).ok()?;
        let output = rest.get(len..).filter(|o| !o.is_empty())?.to_vec();
        let _ = file.set_modified(SystemTime::now());
        Some((log, output))
    }

    fn write_entry(&self, key: &str, output: &[u8], log: &str) -> std::io::Result<()> {
        let mut content = Vec::with_capacity(8 + log.len() + output.len());
        content.extend_from_slice(&(log.len() as u64).to_le_bytes());
        content.extend_from_slice(log.as_bytes());
        content.extend_from_slice(output);
        let mut bytes = entry_digest(key, &content).to_vec();
        bytes.extend_from_slice(&content);
        self.store_file(&self.entry_path(key), &bytes)?;
        self.stored.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The sets of files earlier compiles with this base key read, newest
    /// first, by their index names (one a line, sets separated by an empty
    /// line).
    fn candidates(&self, base: &str) -> Vec<Vec<PathBuf>> {
        let text = read_regular(&self.index_path(base), INDEX_MAX, Links::Refuse)
            .and_then(|(_, bytes)| String::from_utf8(bytes).ok())
            .unwrap_or_default();
        text.split("\n\n")
            .map(|set| {
                set.lines()
                    .filter(|l| !l.is_empty())
                    .map(PathBuf::from)
                    .collect::<Vec<_>>()
            })
            .filter(|set| !set.is_empty())
            .collect()
    }

    /// Puts a set of index names first among `base`'s. Two builds adding a
    /// set at once may each write the index without the other's: the set
    /// left out is a miss for its next build, which adds it again.
    fn add_candidate(&self, base: &str, names: &[PathBuf]) -> std::io::Result<()> {
        let mut sets = self.candidates(base);
        sets.retain(|set| set != names);
        sets.insert(0, names.to_vec());
        sets.truncate(CANDIDATES);
        let text: Vec<String> = sets
            .iter()
            .map(|set| set.iter().map(|p| format!("{}\n", p.display())).collect())
            .collect();
        self.store_file(&self.index_path(base), text.join("\n").as_bytes())
    }

    /// Writes `bytes` at `path` in the store, only where every folder from
    /// the store's root down to it is a folder and not a link: a shared
    /// store may hold links planted by anyone who can write it, and a
    /// build never writes through one.
    fn store_file(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir)?;
        let below = dir
            .strip_prefix(&self.root)
            .map_err(std::io::Error::other)?;
        // The layout's folder and each below it; above it is the user's
        // setting (`KILN_CACHE_DIR` may be a link they made).
        let mut here = self.root.clone();
        let mut folders = vec![here.clone()];
        for part in below.components() {
            here.push(part);
            folders.push(here.clone());
        }
        if !folders
            .iter()
            .all(|f| std::fs::symlink_metadata(f).is_ok_and(|m| m.is_dir()))
        {
            return Err(std::io::Error::other(
                "a link or file in the store's folders",
            ));
        }
        write_atomically(path, bytes)
    }

    /// After a build that stored something: removes the least recently used
    /// entries until the store is within its bound. Only the cache's own
    /// entries count and go (see `cache/evict.rs`): a shared store
    /// may hold links and files planted by anyone who can write it.
    pub(crate) fn evict(&self) {
        if self.stored.load(Ordering::Relaxed) == 0 {
            return;
        }
        evict::to_bound(&self.root, self.max_bytes);
    }
}

/// What an entry's first 32 bytes must be: the hash of its key (so that
/// another key's entry in its place is a miss) and of its content.
fn entry_digest(key: &str, content: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    feed(&mut hasher, key.as_bytes());
    feed(&mut hasher, content);
    hasher.finalize().into()
}

/// The file at `path` and its bytes, when it is a regular file of at most
/// `bound` bytes; `None` for anything else (a FIFO, a device, a dir, a
/// symlink with [`Links::Refuse`]): for the cache, every refusal is a miss.
pub(crate) fn read_regular(path: &Path, bound: u64, links: Links) -> Option<(File, Vec<u8>)> {
    crate::regular::read(path, bound, links).ok()
}

fn feed(hasher: &mut Sha256, field: &[u8]) {
    hasher.update((field.len() as u64).to_le_bytes());
    hasher.update(field);
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to a temp file beside `path`, then renames it into place.
/// The temp file's name is unique (random, created with `O_EXCL`, which NFS
/// honours) and the rename within one folder is atomic there too, so
/// concurrent writers of one entry, on one machine or several sharing a
/// store, each publish a whole file and readers see one of them whole. Its
/// mode is a plain file's (0644 less the umask), not a temp file's 0600: a
/// store a team shares is read by all of them.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

mod evict;
#[cfg(test)]
mod sharing_tests;
#[cfg(test)]
mod tests;
