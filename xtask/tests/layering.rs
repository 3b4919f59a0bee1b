//! The crate-level invariants ARCHITECTURE.md states, read from the manifests
//! and lock files: kiln-abi stands alone, cuda-sys declares and links only,
//! and no crate outside the workspace compiles kiln's kernels or bindings.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lies in the workspace root")
        .to_path_buf()
}

fn manifest(path: &str) -> toml::Table {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    text.parse().unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The names in a manifest's table (`[dependencies]`, ...), sorted.
fn names(manifest: &toml::Table, table: &str) -> Vec<String> {
    let mut names: Vec<String> = manifest
        .get(table)
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// The packages a lock file resolved.
fn locked(path: &str) -> Vec<String> {
    let lock = manifest(path);
    lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn kiln_abi_has_no_build_script_no_links_and_depends_on_half_alone() {
    let abi = manifest("crates/kiln-abi/Cargo.toml");
    let package = abi["package"].as_table().unwrap();
    assert!(!package.contains_key("links"), "kiln-abi has a links key");
    assert!(
        !package.contains_key("build"),
        "kiln-abi names a build script"
    );
    assert!(!root().join("crates/kiln-abi/build.rs").exists());
    assert_eq!(names(&abi, "dependencies"), ["half"]);
    assert!(names(&abi, "build-dependencies").is_empty());
}

#[test]
fn cuda_sys_reaches_no_driver_and_no_safe_layer() {
    let sys = manifest("crates/cuda-sys/Cargo.toml");
    assert_eq!(names(&sys, "dependencies"), ["kiln-abi"]);
}

/// Every `Cargo.lock` under `dir` (relative to the root), skipping build
/// outputs (`target/`) and VCS folders, sorted.
fn lock_files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let name = entry.file_name();
        if entry.file_type().unwrap().is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                lock_files(&path, out);
            }
        } else if name == "Cargo.lock" {
            let rel = path.strip_prefix(root()).unwrap();
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    out.sort();
}

/// The lock files that resolve cuda-sys, of those given, other than the
/// workspace's own.
fn resolving_cuda_sys(locks: &[String]) -> Vec<String> {
    locks
        .iter()
        .filter(|lock| *lock != "Cargo.lock")
        .filter(|lock| locked(lock).iter().any(|p| p == "cuda-sys"))
        .cloned()
        .collect()
}

/// Every lock file in the repository but the workspace's (the examples',
/// any template's): none resolves cuda-sys, so a user's crate, one that
/// uses the anneal included, compiles none of kiln's kernels or bindings.
#[test]
fn crates_outside_the_workspace_compile_none_of_kilns_kernels() {
    let mut locks = Vec::new();
    lock_files(&root(), &mut locks);
    for expected in [
        "examples/anneal-user/Cargo.lock",
        "examples/downstream/Cargo.lock",
        "examples/kernel-trees/Cargo.lock",
    ] {
        assert!(
            locks.iter().any(|l| l == expected),
            "{expected} not found in {locks:?}"
        );
    }
    for lock in locks.iter().filter(|l| *l != "Cargo.lock") {
        assert!(
            locked(lock).iter().any(|p| p == "kiln-gpu-core"),
            "{lock} is no crate of kiln's users"
        );
    }
    assert_eq!(
        resolving_cuda_sys(&locks),
        Vec::<String>::new(),
        "these lock files resolve cuda-sys: a user's crate would build kiln's kernels"
    );
    // The rule fails on a planted lock file that resolves cuda-sys (an
    // absolute path: `root().join` keeps it as it is).
    let planted = tempfile::tempdir().unwrap();
    let lock = planted.path().join("Cargo.lock");
    std::fs::write(
        &lock,
        "version = 4\n[[package]]\nname = \"cuda-sys\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let lock = lock.to_string_lossy().into_owned();
    assert_eq!(resolving_cuda_sys(std::slice::from_ref(&lock)), [lock]);
}

#[test]
fn xtask_builds_without_compiling_kilns_kernels() {
    let root = manifest("Cargo.toml");
    let entry = &root["workspace"]["dependencies"]["cuda-sys"];
    assert_eq!(
        entry.get("default-features").and_then(toml::Value::as_bool),
        Some(false),
        "the workspace's cuda-sys entry turns the kernels on by default"
    );
    let xtask = manifest("xtask/Cargo.toml");
    let dep = &xtask["dependencies"]["cuda-sys"];
    assert!(
        dep.get("features").is_none(),
        "xtask asks for cuda-sys's features: {dep}"
    );
}

#[test]
fn gpu_core_depends_on_no_kernels_crate() {
    let core = manifest("crates/gpu-core/Cargo.toml");
    assert!(
        !names(&core, "dependencies").contains(&"cuda-sys".to_string()),
        "gpu-core depends on cuda-sys"
    );
}

/// What a user depends on is publishable under a name of its own on the
/// registry, and cuda-sys (kiln's kernels, outside its package; apps, which
/// depends on it, cannot be published either) is not: gpu-core's test-only
/// use of it names no version, so `cargo package` drops it.
#[test]
fn only_the_user_crates_are_published() {
    for (path, package, published) in [
        ("crates/kiln-abi/Cargo.toml", "kiln-abi", true),
        ("crates/cuda-build/Cargo.toml", "kiln-cuda-build", true),
        ("crates/gpu-core/Cargo.toml", "kiln-gpu-core", true),
        ("crates/cuda-sys/Cargo.toml", "cuda-sys", false),
    ] {
        let toml = manifest(path);
        let fields = toml["package"].as_table().unwrap();
        assert_eq!(fields["name"].as_str(), Some(package), "{path}");
        let publish = fields.get("publish").and_then(toml::Value::as_bool);
        assert_eq!(publish.unwrap_or(true), published, "{path}: publish");
    }
    let core = manifest("crates/gpu-core/Cargo.toml");
    let sys = &core["dev-dependencies"]["cuda-sys"];
    assert!(
        sys.get("version").is_none() && sys.get("workspace").is_none(),
        "gpu-core's dev-dependency on cuda-sys must be by path alone: {sys}"
    );
}

/// kiln-anneal builds its own kernels as a user's crate does (cuda-build at
/// build time, no cuda-sys), and its package carries them.
#[test]
fn kiln_anneal_builds_its_own_kernels_and_packages_them() {
    let anneal = manifest("crates/anneal/Cargo.toml");
    for table in ["dependencies", "build-dependencies", "dev-dependencies"] {
        assert!(
            !names(&anneal, table).contains(&"cuda-sys".to_string()),
            "kiln-anneal's [{table}] names cuda-sys"
        );
    }
    assert!(names(&anneal, "build-dependencies").contains(&"cuda-build".to_string()));
    let package = anneal["package"].as_table().unwrap();
    assert_ne!(
        package.get("publish").and_then(toml::Value::as_bool),
        Some(false),
        "kiln-anneal is publish = false"
    );
    let include: Vec<&str> = package["include"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    for needed in ["/kernels", "/build.rs", "/src", "/kiln-audit.toml"] {
        assert!(
            include.contains(&needed),
            "kiln-anneal's package lacks {needed}: {include:?}"
        );
    }
    assert!(root().join("crates/anneal/kernels/kiln.toml").is_file());
    let kernels = std::fs::read_dir(root().join("kernels")).unwrap();
    let anneal_left: Vec<String> = kernels
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("anneal"))
        .collect();
    assert!(
        anneal_left.is_empty(),
        "kernels/ still holds {anneal_left:?}"
    );
}

/// What only cargo-kiln does: running cuobjdump, reading PTX and resource
/// tables, provisioning the toolkit with pip into a venv, reading budgets.
const CARGO_KILN_WORK: &[&str] = &[
    "--dump-ptx",
    "--dump-resource-usage",
    "--list-elf",
    "--list-ptx",
    "\"pip\"",
    "venv",
    "max_registers",
];

/// xtask's modules for the commands cargo-kiln also has, each of which must
/// call cargo-kiln's library.
const SHARED_COMMANDS: &[&str] = &["build.rs", "audit.rs", "toolkit.rs", "bundle.rs"];

/// Violations of "xtask implements no subcommand that cargo-kiln has" in
/// `(path under xtask/src, text)` pairs.
fn reimplemented(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in files {
        for word in CARGO_KILN_WORK.iter().filter(|w| text.contains(**w)) {
            out.push(format!("{path} does cargo-kiln's work ({word})"));
        }
    }
    for module in SHARED_COMMANDS {
        match files.iter().find(|(p, _)| p == module) {
            Some((_, text)) if text.contains("cargo_kiln::") => {}
            Some(_) => out.push(format!("{module} does not call cargo_kiln")),
            None => out.push(format!("{module} is missing")),
        }
    }
    out
}

fn xtask_sources(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            xtask_sources(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

#[test]
fn xtask_implements_no_subcommand_that_cargo_kiln_has() {
    let src = root().join("xtask/src");
    let mut files = Vec::new();
    xtask_sources(&src, &src, &mut files);
    assert_eq!(reimplemented(&files), Vec::<String>::new());
    // The rule fails on a planted copy of the audit's cuobjdump call and on
    // a build command that does its own work.
    let mut planted = files.clone();
    planted.push((
        "audit/facts.rs".into(),
        "cuobjdump(tool, \"--dump-ptx\", file)".into(),
    ));
    planted.retain(|(p, _)| p != "build.rs");
    planted.push(("build.rs".into(), "fn run() {}".into()));
    assert_eq!(
        reimplemented(&planted),
        [
            "audit/facts.rs does cargo-kiln's work (--dump-ptx)",
            "build.rs does not call cargo_kiln",
        ]
    );
}

/// The packages `cargo tree` resolves for `package`'s normal dependencies
/// (build and dev dependencies apart), with `features` on, by name.
fn normal_tree(package: &str, features: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .current_dir(root())
        .args(["tree", "--locked", "-p", package, "-e", "normal"])
        .args([
            "--features",
            features,
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Crates of a command line, which a library others build on must not
/// pull in: argument parsing, anyhow's catch-all errors, progress bars,
/// and the CLI crate itself.
const CLI_CRATES: &[&str] = &["apps", "clap", "anyhow", "assert_cmd", "indicatif"];

#[test]
fn kiln_anneal_is_a_library_below_apps() {
    let anneal = normal_tree("kiln-anneal", "wgpu");
    assert!(anneal.iter().any(|p| p == "kiln-gpu-core"), "{anneal:?}");
    let pulled: Vec<&&str> = CLI_CRATES
        .iter()
        .filter(|c| anneal.iter().any(|p| p == *c))
        .collect();
    assert!(pulled.is_empty(), "kiln-anneal depends on {pulled:?}");
    let apps = manifest("crates/apps/Cargo.toml");
    assert!(names(&apps, "dependencies").contains(&"kiln-anneal".to_string()));
    let lib = manifest("crates/anneal/Cargo.toml");
    assert!(!names(&lib, "dependencies").contains(&"apps".to_string()));
}
