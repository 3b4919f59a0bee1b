//! The kernel cache shared: by checkouts of one crate at other paths (the
//! crate's files named relative to its root) and by concurrent writers of
//! one key, threads and processes, as builds sharing a store on one machine
//! or an NFS folder are.

use super::tests::{any, toolkit};
use super::*;

/// A crate with `kernels/a.cu` and `kernels/include/h.h` under `root`, and
/// the compile of `a.cu` as `compile.rs` writes it (nvcc in the root, the
/// crate's files relative to it): its args, source and depfile's files.
fn crate_at(root: &Path, out: &Path, header: &str) -> (Vec<OsString>, PathBuf, Vec<PathBuf>) {
    std::fs::create_dir_all(root.join("kernels/include")).unwrap();
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(root.join("kernels/a.cu"), "#include \"h.h\"\n").unwrap();
    std::fs::write(root.join("kernels/include/h.h"), header).unwrap();
    let args = vec![
        "-fatbin".into(),
        "-Ikernels/include".into(),
        "-o".into(),
        out.join("a.fatbin").into_os_string(),
        "kernels/a.cu".into(),
    ];
    let source = root.join("kernels/a.cu");
    let deps = vec![
        source.clone(),
        root.join("kernels/include/h.h"),
        PathBuf::from("/cuda/include/cuda_runtime.h"),
    ];
    (args, source, deps)
}

/// The regression of issue 42: the same tree at another path (another
/// checkout, a CI runner's temp dir) hit nothing, its sources' absolute
/// paths being in every key. Now it hits, and the hit's files are the new
/// checkout's, so its stamp and `rerun-if-changed` lines watch its own
/// headers; a header whose content differs there still misses.
#[test]
fn the_same_tree_at_another_path_hits_and_names_its_own_files() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (one, two) = (tmp.path().join("one"), tmp.path().join("elsewhere/two"));
    let (out_one, out_two) = (tmp.path().join("out-one"), tmp.path().join("out-two"));
    let (args, source, deps) = crate_at(&one, &out_one, "one");
    let first = Cache::new(store.clone(), DEFAULT_MAX, &toolkit(88), &out_one, &one);
    first.store_compile(&args, &source, &deps, b"image", "log");

    let (args, source, deps) = crate_at(&two, &out_two, "one");
    let second = Cache::new(store.clone(), DEFAULT_MAX, &toolkit(88), &out_two, &two);
    let hit = second
        .lookup_compile(&args, &source, any)
        .expect("the tree at another path hits");
    assert_eq!(hit.output, b"image");
    assert_eq!(hit.deps, deps, "the hit names the second checkout's files");

    let index = std::fs::read_dir(second.root.join("index"))
        .unwrap()
        .flatten()
        .flat_map(|shard| std::fs::read_dir(shard.path()).unwrap().flatten())
        .map(|file| std::fs::read_to_string(file.path()).unwrap())
        .collect::<String>();
    assert_eq!(
        index, "kernels/a.cu\nkernels/include/h.h\n/cuda/include/cuda_runtime.h\n",
        "the index names the crate's files relative to it"
    );

    std::fs::write(two.join("kernels/include/h.h"), "two").unwrap();
    assert!(
        second.lookup_compile(&args, &source, any).is_none(),
        "a header that differs there misses"
    );
}

/// An index line no store writes (a relative name climbing out of the crate
/// with `..`, one not in the store's normal form such as `./x`) is damage:
/// a miss, never a file outside the crate hashed in the crate's place.
#[test]
fn an_index_naming_a_file_outside_the_crate_by_a_relative_name_is_a_miss() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, out) = (tmp.path().join("crate"), tmp.path().join("out"));
    let (args, source, deps) = crate_at(&root, &out, "one");
    let cache = Cache::new(
        tmp.path().join("store"),
        DEFAULT_MAX,
        &toolkit(88),
        &out,
        &root,
    );
    cache.store_compile(&args, &source, &deps, b"image", "log");
    assert!(cache.lookup_compile(&args, &source, any).is_some());
    let base = cache.base_key("compile", &args, &source);
    let index = cache.index_path(&base);
    for damaged in [
        "kernels/a.cu\n../crate/kernels/include/h.h\n/cuda/include/cuda_runtime.h\n",
        "kernels/a.cu\n./kernels/include/h.h\n/cuda/include/cuda_runtime.h\n",
    ] {
        std::fs::write(&index, damaged).unwrap();
        assert!(
            cache.lookup_compile(&args, &source, any).is_none(),
            "{damaged}"
        );
    }
}

/// Stores and reads of one writer: each stores the same key, from its own
/// checkout, this many times.
const ROUNDS: usize = 25;

/// What writer `i` stores: differing per writer (line tables record their
/// paths and mtimes), large enough that a torn write would show.
fn image_of(i: usize) -> Vec<u8> {
    let mut bytes = format!("image of checkout {i} ").into_bytes();
    bytes.resize(64 << 10, b'0' + (i % 10) as u8);
    bytes
}

/// Writer `i` of a store under `tmp` (its checkout `tmp/checkout-i`):
/// stores the key, then reads it, [`ROUNDS`] times; every read is a miss or
/// one writer's whole entry, its log and output together, its files named
/// in this writer's checkout.
fn write_and_read(tmp: &Path, i: usize) {
    let root = tmp.join(format!("checkout-{i}"));
    let out = tmp.join(format!("out-{i}"));
    let (args, source, deps) = crate_at(&root, &out, "shared");
    let cache = Cache::new(tmp.join("store"), DEFAULT_MAX, &toolkit(88), &out, &root);
    let output = image_of(i);
    for _ in 0..ROUNDS {
        cache.store_compile(&args, &source, &deps, &output, &format!("log {i}"));
        if let Some(hit) = cache.lookup_compile(&args, &source, any) {
            let writer: usize = hit.log.strip_prefix("log ").unwrap().parse().unwrap();
            assert_eq!(hit.output, image_of(writer), "one writer's whole entry");
            assert_eq!(hit.deps, deps, "named in the reader's checkout");
        }
    }
}

/// After the writers of a store under `tmp`: writer 0's key hits, no temp
/// file is left, and every file is readable by whoever may read a plain
/// file there (a team's shared store), not 0600 as a temp file is made.
fn assert_whole_store(tmp: &Path) {
    let (root, out) = (tmp.join("checkout-0"), tmp.join("out-0"));
    let (args, source, _) = crate_at(&root, &out, "shared");
    let cache = Cache::new(tmp.join("store"), DEFAULT_MAX, &toolkit(88), &out, &root);
    assert!(cache.lookup_compile(&args, &source, any).is_some());
    let files = walk(&tmp.join("store"));
    let leftovers: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.file_name().unwrap().len() != 64)
        .collect();
    assert_eq!(leftovers, Vec::<&PathBuf>::new(), "no temp file is left");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let plain = tmp.join("plain");
        std::fs::write(&plain, "").unwrap();
        for file in &files {
            assert_eq!(mode(file), mode(&plain) & 0o644, "{}", file.display());
        }
    }
}

/// Checkouts sharing one store on one machine store the same key at once,
/// with outputs that differ: each writer publishes a whole entry by
/// renaming its own temp file, and every read meanwhile is a miss or one
/// writer's whole entry (see [`write_and_read`], [`assert_whole_store`]).
#[test]
fn concurrent_writers_of_one_key_publish_whole_entries() {
    let tmp = tempfile::tempdir().unwrap();
    std::thread::scope(|scope| {
        for i in 0..8 {
            let tmp = tmp.path();
            scope.spawn(move || write_and_read(tmp, i));
        }
    });
    assert_whole_store(tmp.path());
}

/// Names the store's dir for [`writer_process`], set only in the processes
/// [`concurrent_writer_processes_of_one_key_publish_whole_entries`] starts.
const WRITER_DIR: &str = "CUDA_BUILD_CACHE_TEST_WRITER_DIR";
/// Which writer such a process is.
const WRITER_INDEX: &str = "CUDA_BUILD_CACHE_TEST_WRITER_INDEX";

/// The body of one writer process of the test below; nothing on its own.
#[test]
fn writer_process() {
    let (Some(dir), Some(i)) = (std::env::var_os(WRITER_DIR), std::env::var_os(WRITER_INDEX))
    else {
        return;
    };
    write_and_read(Path::new(&dir), i.to_str().unwrap().parse().unwrap());
}

/// The same with processes, as builds of several checkouts (or hosts on an
/// NFS folder) are: this test binary run again as each writer.
#[test]
fn concurrent_writer_processes_of_one_key_publish_whole_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // The harness names a test by its path without the crate's name.
    let (_, module) = module_path!().split_once("::").unwrap();
    let writer_test = format!("{module}::writer_process");
    let writers: Vec<std::process::Child> = (0..6)
        .map(|i| {
            std::process::Command::new(&exe)
                .args(["--exact", writer_test.as_str(), "--test-threads=1"])
                .env(WRITER_DIR, tmp.path())
                .env(WRITER_INDEX, i.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, writer) in writers.into_iter().enumerate() {
        let output = writer.wait_with_output().unwrap();
        assert!(
            output.status.success() && String::from_utf8_lossy(&output.stdout).contains("1 passed"),
            "writer {i}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_whole_store(tmp.path());
}

/// Every regular file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// A flag naming the crate's files by absolute path (a build script's
/// `-I/abs/crate/vendor`) is the same key in every checkout; one naming
/// another checkout's files is not, even with the same contents: nvcc
/// would read that checkout's files, not this one's.
#[test]
fn an_absolute_flag_into_the_crate_is_named_relative_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    let out = tmp.path().join("out");
    let flag = |root: &Path| {
        let mut flag = OsString::from("-I");
        flag.push(root.join("vendor"));
        flag
    };
    let (mut args, source, deps) = crate_at(&one, &out, "one");
    args.insert(1, flag(&one));
    Cache::new(store.clone(), DEFAULT_MAX, &toolkit(88), &out, &one)
        .store_compile(&args, &source, &deps, b"image", "log");

    let (args, source, _) = crate_at(&two, &out, "one");
    let second = Cache::new(store.clone(), DEFAULT_MAX, &toolkit(88), &out, &two);
    let with = |dir: &Path| {
        let mut args = args.clone();
        args.insert(1, flag(dir));
        args
    };
    assert!(second.lookup_compile(&with(&two), &source, any).is_some());
    assert!(second.lookup_compile(&with(&one), &source, any).is_none());
    let sibling = tmp.path().join("two-vendor");
    assert!(second
        .lookup_compile(&with(&sibling), &source, any)
        .is_none());
}
