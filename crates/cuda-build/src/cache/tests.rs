//! The cache's own tests: keys, eviction, and every kind of damaged entry
//! read as a miss.

use super::*;
use crate::toolkit::ToolkitVersion;

/// Takes any output.
pub(super) fn any(_: &[u8]) -> bool {
    true
}

pub(super) fn toolkit(patch: u32) -> Toolkit {
    Toolkit {
        root: "/cuda".into(),
        nvcc: "/cuda/bin/nvcc".into(),
        version: ToolkitVersion {
            major: 13,
            minor: 0,
            patch,
        },
        found_by: "test".into(),
    }
}

/// A cache in `store` for a crate at `/crate`, with toolkit 13.0.`patch`.
fn cache_in(store: &Path, patch: u32, out: &Path) -> Cache {
    Cache::new(
        store.to_path_buf(),
        DEFAULT_MAX,
        &toolkit(patch),
        out,
        Path::new("/crate"),
    )
}

fn args(out: &Path) -> Vec<OsString> {
    vec![
        "-fatbin".into(),
        "-o".into(),
        out.join("a.fatbin").into_os_string(),
        "/src/a.cu".into(),
    ]
}

/// A compile stored from one out dir is found from another (the other
/// profile), with the same toolkit only, and only while its inputs are
/// unchanged; a link step is keyed by its objects' content.
#[test]
fn keys_follow_content_toolkit_and_not_the_out_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, dev, release) = (
        tmp.path().join("store"),
        tmp.path().join("dev"),
        tmp.path().join("release"),
    );
    for dir in [&dev, &release] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let header = tmp.path().join("h.h");
    std::fs::write(&header, "one").unwrap();
    std::fs::write(dev.join("a.fatbin"), "image").unwrap();
    let deps = vec![
        header.clone(),
        PathBuf::from("/cuda/include/cuda_runtime.h"),
    ];
    let source = Path::new("/src/a.cu");

    let cache = cache_in(&store, 88, &dev);
    assert!(cache.lookup_compile(&args(&dev), source, any).is_none());
    cache.store_compile(&args(&dev), source, &deps, b"image", "ptxas info");

    let other_profile = cache_in(&store, 88, &release);
    let hit = other_profile
        .lookup_compile(&args(&release), source, any)
        .expect("a hit");
    assert_eq!(
        (hit.output.as_slice(), hit.log.as_str()),
        (&b"image"[..], "ptxas info")
    );
    assert_eq!(hit.deps, deps);
    assert_eq!(other_profile.report().hits, 1);

    let other_toolkit = cache_in(&store, 89, &release);
    assert!(other_toolkit
        .lookup_compile(&args(&release), source, any)
        .is_none());

    std::fs::write(&header, "two").unwrap();
    assert!(other_profile
        .lookup_compile(&args(&release), source, any)
        .is_none());
    std::fs::write(&header, "one").unwrap();
    assert!(other_profile
        .lookup_compile(&args(&release), source, any)
        .is_some());

    let link = vec![OsString::from("-lib")];
    let objects = vec![header.clone()];
    cache.store_link(&link, &objects, b"image", "");
    assert!(cache.lookup_link(&link, &objects, any).is_some());
    std::fs::write(&header, "three").unwrap();
    assert!(cache.lookup_link(&link, &objects, any).is_none());
}

#[test]
fn eviction_removes_the_least_recently_used_first() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let cache = Cache::new(
        tmp.path().join("store"),
        300,
        &toolkit(88),
        &out,
        Path::new("/crate"),
    );
    let mut keys = Vec::new();
    for (i, when) in [(0u8, 30u64), (1, 10), (2, 20)] {
        let object = out.join(format!("o{i}"));
        std::fs::write(&object, vec![i; 100]).unwrap();
        let args = vec![OsString::from(format!("-lib{i}"))];
        cache.store_link(&args, std::slice::from_ref(&object), &[i; 100], "");
        let key = cache
            .inputs_key(&cache.base_key("link", &args, Path::new("")), &[object])
            .unwrap();
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(when);
        std::fs::File::options()
            .append(true)
            .open(cache.entry_path(&key))
            .unwrap()
            .set_modified(at)
            .unwrap();
        keys.push(key);
    }
    cache.evict();
    let kept: Vec<bool> = keys.iter().map(|k| cache.entry_path(k).exists()).collect();
    assert_eq!(kept, [true, false, true], "the entry used longest ago went");
}

#[test]
fn sizes_parse_as_documented() {
    assert_eq!(parse_size::parse_size("2G").unwrap(), 2_000_000_000);
    assert_eq!(parse_size::parse_size("2GiB").unwrap(), 2 << 30);
    assert_eq!(parse_size::parse_size("500M").unwrap(), 500_000_000);
}

/// A store with two compiles in it (`a.cu` and `b.cu`): the cache, the
/// first one's key and entry path, the second one's entry path.
struct Stored {
    _tmp: tempfile::TempDir,
    cache: Cache,
    out: PathBuf,
    deps: Vec<PathBuf>,
    entry: PathBuf,
    other: PathBuf,
}

impl Stored {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        let header = tmp.path().join("h.h");
        std::fs::write(&header, "one").unwrap();
        let cache = cache_in(&tmp.path().join("store"), 88, &out);
        let deps = vec![header];
        let mut paths = Vec::new();
        for (source, image) in [("/src/a.cu", "image of a"), ("/src/b.cu", "image of b")] {
            let args = args_for(&out, source);
            cache.store_compile(&args, Path::new(source), &deps, image.as_bytes(), "log");
            let base = cache.base_key("compile", &args, Path::new(source));
            paths.push(cache.entry_path(&cache.inputs_key(&base, &deps).unwrap()));
        }
        let other = paths.pop().unwrap();
        let entry = paths.pop().unwrap();
        Self {
            _tmp: tmp,
            cache,
            out,
            deps,
            entry,
            other,
        }
    }

    fn lookup(&self) -> Option<Hit> {
        self.cache.lookup_compile(
            &args_for(&self.out, "/src/a.cu"),
            Path::new("/src/a.cu"),
            any,
        )
    }

    fn store_again(&self) {
        let args = args_for(&self.out, "/src/a.cu");
        let source = Path::new("/src/a.cu");
        self.cache
            .store_compile(&args, source, &self.deps, b"image of a", "log");
    }

    fn index(&self) -> PathBuf {
        let base = self.cache.base_key(
            "compile",
            &args_for(&self.out, "/src/a.cu"),
            Path::new("/src/a.cu"),
        );
        self.cache.index_path(&base)
    }
}

fn args_for(out: &Path, source: &str) -> Vec<OsString> {
    vec![
        "-fatbin".into(),
        "-o".into(),
        out.join("x.fatbin").into_os_string(),
        source.into(),
    ]
}

#[cfg(unix)]
use crate::regular::mkfifo;

/// Every damaged entry is a miss, and the next store replaces it: each
/// prefix (truncated, 0 bytes included), each byte flipped, another key's
/// entry copied or linked in its place, a FIFO, a dir, an entry over the
/// bound.
#[test]
fn damaged_entries_are_misses_and_are_replaced() {
    let stored = Stored::new();
    let hit = stored.lookup().expect("an intact entry is a hit");
    assert_eq!(hit.output, b"image of a");
    let good = std::fs::read(&stored.entry).unwrap();
    let mut cases = 0;
    let mut check = |what: &str, damage: &dyn Fn(&Path)| {
        let _ = std::fs::remove_file(&stored.entry);
        let _ = std::fs::remove_dir(&stored.entry);
        damage(&stored.entry);
        assert!(stored.lookup().is_none(), "{what} is a miss");
        stored.store_again();
        assert_eq!(
            stored.lookup().map(|h| h.output),
            Some(b"image of a".to_vec()),
            "{what} is replaced by the next store"
        );
        cases += 1;
    };
    for len in 0..good.len() {
        check(&format!("{len} of {} bytes", good.len()), &|p| {
            std::fs::write(p, &good[..len]).unwrap();
        });
    }
    for at in 0..good.len() {
        check(&format!("byte {at} flipped"), &|p| {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            std::fs::write(p, bad).unwrap();
        });
    }
    let other = stored.other.clone();
    check("another key's entry copied in", &|p| {
        std::fs::copy(&other, p).unwrap();
    });
    #[cfg(unix)]
    {
        check("a symlink to another key's entry", &|p| {
            std::os::unix::fs::symlink(&other, p).unwrap();
        });
        let same = stored.other.with_extension("same");
        std::fs::write(&same, &good).unwrap();
        check("a symlink to a copy of the right entry", &|p| {
            std::os::unix::fs::symlink(&same, p).unwrap();
        });
        check("a FIFO", &|p| mkfifo(p));
    }
    // A dir is not kiln's to remove: it stays a miss, and the store's
    // failure to replace it is no build failure.
    let _ = std::fs::remove_file(&stored.entry);
    std::fs::create_dir(&stored.entry).unwrap();
    assert!(stored.lookup().is_none(), "a dir is a miss");
    stored.store_again();
    assert!(stored.lookup().is_none(), "a dir stays a miss");
    assert!(stored.entry.is_dir());
    let small = Cache::new(
        stored.cache.root.parent().unwrap().to_path_buf(),
        good.len() as u64 - 1,
        &toolkit(88),
        &stored.out,
        Path::new("/crate"),
    );
    assert!(
        small
            .lookup_compile(
                &args_for(&stored.out, "/src/a.cu"),
                Path::new("/src/a.cu"),
                any
            )
            .is_none(),
        "an entry over the bound is a miss"
    );
    assert!(cases > 2 * good.len());
}

/// A hit whose output the caller refuses (not the module's archs) is a miss.
#[test]
fn a_refused_output_is_a_miss() {
    let stored = Stored::new();
    let refused = stored.cache.lookup_compile(
        &args_for(&stored.out, "/src/a.cu"),
        Path::new("/src/a.cu"),
        |_| false,
    );
    assert!(refused.is_none());
    assert_eq!(stored.cache.report().hits, 0);
}

/// A FIFO as the index, or named by it as an input, never blocks a lookup;
/// nor does a dir, a symlink or garbage as the index.
#[cfg(unix)]
#[test]
fn a_fifo_in_the_index_never_blocks() {
    let stored = Stored::new();
    let index = stored.index();
    let text = std::fs::read_to_string(&index).unwrap();
    std::fs::remove_file(&index).unwrap();
    mkfifo(&index);
    assert!(stored.lookup().is_none(), "a FIFO as the index");
    std::fs::remove_file(&index).unwrap();
    std::fs::create_dir(&index).unwrap();
    assert!(stored.lookup().is_none(), "a dir as the index");
    std::fs::remove_dir(&index).unwrap();
    let elsewhere = stored.entry.with_extension("index");
    std::fs::write(&elsewhere, &text).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &index).unwrap();
    assert!(stored.lookup().is_none(), "a symlink as the index");
    std::fs::remove_file(&index).unwrap();
    let fifo = stored.out.join("fifo.h");
    mkfifo(&fifo);
    std::fs::write(&index, format!("{}\n", fifo.display())).unwrap();
    assert!(stored.lookup().is_none(), "a FIFO named as an input");
    std::fs::write(&index, [0xff, 0xfe, b'\n']).unwrap();
    assert!(stored.lookup().is_none(), "an index that is not UTF-8");
    std::fs::write(&index, text).unwrap();
    assert!(stored.lookup().is_some(), "the index restored");
}

/// A temp dir holding an out dir and a folder of the builder's own files.
fn builder_folders() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let own = tmp.path().join("builder-files");
    for dir in [&out, &own] {
        std::fs::create_dir_all(dir).unwrap();
    }
    (tmp, out, own)
}

/// Issue 41: eviction in a shared store never follows a symlink (a shard
/// that is a link to a folder, a link to a folder or a file inside a
/// shard) and removes only files of the cache's own naming: what a link
/// leads to, and a file of another name, stay byte-identical.
#[cfg(unix)]
#[test]
fn eviction_never_follows_a_link_nor_removes_what_it_did_not_write() {
    use std::os::unix::fs::symlink;
    let (tmp, out, own) = builder_folders();
    let victims = [own.join("main.rs"), own.join("notes.txt")];
    for (i, victim) in victims.iter().enumerate() {
        std::fs::write(victim, format!("the builder's own file {i}")).unwrap();
    }
    let digest = |path: &Path| std::fs::read(path).ok().map(Sha256::digest);
    let before: Vec<_> = victims.iter().map(|v| digest(v)).collect();

    // Bound 1: everything the cache wrote goes.
    let cache = Cache::new(
        tmp.path().join("store"),
        1,
        &toolkit(88),
        &out,
        Path::new("/crate"),
    );
    let object = out.join("o");
    std::fs::write(&object, "object").unwrap();
    let args = vec![OsString::from("-lib")];
    cache.store_link(&args, std::slice::from_ref(&object), b"image", "");
    let key = cache
        .inputs_key(&cache.base_key("link", &args, Path::new("")), &[object])
        .unwrap();
    let entry = cache.entry_path(&key);
    let shard = entry.parent().unwrap().to_path_buf();
    let entries = shard.parent().unwrap().to_path_buf();

    // A shard that is a link to the builder's folder, named as a shard and
    // as an entry would be.
    let linked_shard = entries.join(if &key[..2] == "ab" { "cd" } else { "ab" });
    symlink(&own, &linked_shard).unwrap();
    // Inside a real shard: links to the folder and to a file, named as
    // entries are, and a user's file of another name, large and sparse.
    let link_to_dir = shard.join(format!("{}{}", &key[..2], "0".repeat(62)));
    let link_to_file = shard.join(format!("{}{}", &key[..2], "1".repeat(62)));
    symlink(&own, &link_to_dir).unwrap();
    symlink(&victims[0], &link_to_file).unwrap();
    let stranger = shard.join("stranger.bin");
    std::fs::File::create(&stranger)
        .unwrap()
        .set_len(1 << 33)
        .unwrap();
    // A user's file in the builder's folder named as an entry of that
    // (linked) shard.
    let named_like_entry = own.join(format!(
        "{}{}",
        &linked_shard.file_name().unwrap().to_str().unwrap(),
        "2".repeat(62)
    ));
    std::fs::write(&named_like_entry, "user data").unwrap();
    let like_before = digest(&named_like_entry);

    cache.evict();

    assert!(!entry.exists(), "the cache's own entry is evicted");
    let after: Vec<_> = victims.iter().map(|v| digest(v)).collect();
    assert_eq!(after, before, "files behind links are untouched");
    assert_eq!(digest(&named_like_entry), like_before);
    assert!(stranger.exists(), "a file of another name is left");
    for link in [&linked_shard, &link_to_dir, &link_to_file] {
        if let Ok(meta) = std::fs::symlink_metadata(link) {
            assert!(
                meta.file_type().is_symlink(),
                "{} left as a link",
                link.display()
            );
        }
    }
}

/// Issue 41: a shard of a shared store planted as a link to a folder of
/// the builder's is never written through: the store misses, and the
/// folder it leads to stays as it was.
#[cfg(unix)]
#[test]
fn a_store_never_writes_through_a_linked_folder() {
    use std::os::unix::fs::symlink;
    let (tmp, out, own) = builder_folders();
    let cache = cache_in(&tmp.path().join("store"), 88, &out);
    let object = out.join("o");
    std::fs::write(&object, "object").unwrap();
    let args = vec![OsString::from("-lib")];
    let key = cache
        .inputs_key(
            &cache.base_key("link", &args, Path::new("")),
            std::slice::from_ref(&object),
        )
        .unwrap();
    let shard = cache.entry_path(&key).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(shard.parent().unwrap()).unwrap();
    symlink(&own, &shard).unwrap();
    cache.store_link(&args, std::slice::from_ref(&object), b"image", "");
    assert_eq!(
        std::fs::read_dir(&own).unwrap().count(),
        0,
        "nothing written through the link"
    );
    assert!(cache.lookup_link(&args, &[object], any).is_none());
}
