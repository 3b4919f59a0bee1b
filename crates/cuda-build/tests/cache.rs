//! The kernel cache end to end (`KILN_CACHE_DIR` in each fixture's own
//! dir): after `cargo clean` a build with a warm cache runs no nvcc step,
//! the release profile reuses what the dev profile compiled, a header whose
//! content changed misses exactly the sources that include it, and another
//! toolkit version misses everything. With the fake nvcc (every module
//! shape: `rdc` in both link modes, static libraries) and, when
//! `cargo xtask toolkit install` has put one in `target/cuda-toolkit`, with
//! the real nvcc behind a logging `NVCC` wrapper.
//!
//! The cache never changes what is built: a damaged entry (truncated, 0
//! bytes, a byte flipped, another module's or another arch's entry copied or
//! linked in its place, a FIFO) or a FIFO as the index is a miss that
//! recompiles and replaces the entry; a step that exits 0 without writing
//! its output fails and stores nothing.
#![cfg(unix)]

mod support;

use std::path::{Path, PathBuf};

use support::{
    assert_failure, assert_fatbin, assert_success, build_script_errors, compiles, installed_nvcc,
    stderr, write_script, Fixture, COMMON_CUH, KERNEL_SOURCES, MODULE_SOURCES, SHARED_H,
};

/// Every nvcc step of the modules fixture's first build.
const MODULE_STEPS: usize = 11;

/// The environment that turns the cache on, its store under the fixture.
fn cache_env(fixture: &Fixture) -> Vec<(&'static str, String)> {
    vec![
        ("KILN_CACHE", "on".to_string()),
        (
            "KILN_CACHE_DIR",
            fixture.root_path("cache").display().to_string(),
        ),
    ]
}

/// A build that must succeed: the nvcc steps it ran, and the cache's line
/// from the manifest (the last build script run's).
#[track_caller]
fn build(
    fixture: &Fixture,
    args: &[&str],
    env: &[(&'static str, String)],
    what: &str,
) -> (Vec<String>, Vec<String>) {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let output = fixture.cargo_build_with(args, &env);
    assert_success(&output, what);
    assert!(
        !stderr(&output).contains("kernel cache: "),
        "the cache's report is no warning: Cargo would replay it on every build"
    );
    let report = fixture.manifest().cache.map(|r| r.to_string());
    (fixture.nvcc_calls(), report.into_iter().collect())
}

/// The build script's error lines of a build that must fail.
#[track_caller]
fn failing_build(fixture: &Fixture, env: &[(&'static str, String)], what: &str) -> Vec<String> {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let output = fixture.cargo_build(&env);
    assert_failure(&output, what);
    build_script_errors(&output)
}

fn served(hits: usize, steps: usize, fixture: &Fixture) -> Vec<String> {
    vec![format!(
        "kernel cache: {hits} of {steps} nvcc steps served from {}",
        fixture.root_path("cache").display()
    )]
}

#[test]
fn a_warm_cache_serves_every_step_of_every_module_shape() {
    let fixture = Fixture::with_sources("cache-modules", "cachemods", MODULE_SOURCES);
    let env = cache_env(&fixture);

    let (calls, line) = build(&fixture, &[], &env, "cold build");
    assert_eq!(calls.len(), MODULE_STEPS, "{calls:#?}");
    assert_eq!(line, served(0, MODULE_STEPS, &fixture));

    fixture.clean();
    let (calls, line) = build(&fixture, &[], &env, "after cargo clean");
    assert_eq!(calls, compiles(&[]), "no nvcc step after cargo clean");
    assert_eq!(line, served(MODULE_STEPS, MODULE_STEPS, &fixture));
    let manifest = fixture.manifest();
    assert!(manifest
        .modules
        .iter()
        .all(|m| !m.compiled && m.size_bytes > 0));
    let host = fixture.out_dir().join("libfixture_host.a");
    assert!(host.is_file(), "the static library is restored");

    let (calls, _) = build(&fixture, &["--release"], &env, "release profile");
    assert_eq!(
        calls,
        compiles(&[]),
        "the release profile shares the entries"
    );

    let (calls, _) = build(&fixture, &[], &env, "no-op build");
    assert_eq!(calls, compiles(&[]));

    // The objects of caller.cu come out the same (the fake nvcc writes no
    // header text into them), so the device link is served from the cache.
    let edited = format!("{}// edited\n", MODULE_SOURCES[1].1);
    fixture.write(COMMON_CUH, &edited);
    let (calls, _) = build(&fixture, &[], &env, "after editing common.cuh");
    assert_eq!(
        calls,
        ["compile caller.cu", "compile single.cu"],
        "exactly common.cuh's includers"
    );

    fixture.clean();
    let mut other = env.clone();
    other.push(("FAKE_NVCC_VERSION", "13.0.99".to_string()));
    let (calls, line) = build(&fixture, &[], &other, "another toolkit version");
    assert_eq!(calls.len(), MODULE_STEPS, "every step misses: {calls:#?}");
    assert_eq!(line, served(0, MODULE_STEPS, &fixture));
}

/// Issue 42: the same crate at another path (another checkout, a CI
/// runner's, a teammate's sharing the store) runs no nvcc step, counted by
/// the fake nvcc's log: every module shape is served, and what the build
/// watches afterwards is the second checkout's files (a header edited there
/// recompiles exactly its includers), never the first's.
#[test]
fn a_second_checkout_at_another_path_builds_from_the_cache_with_no_nvcc_step() {
    let first = Fixture::with_sources("cache-checkout-one", "cachecheckout", MODULE_SOURCES);
    // Written before the first builds, so its files are older than the
    // first's outputs; and not cleaned: Cargo gives the copy the first's
    // OUT_DIR (the same package name, each its own workspace), whose stamps
    // name the first checkout's files. The copy must take the cache's
    // entries, not the first's outputs and stamps.
    let second = first.second_checkout("cache-checkout-two");
    let env = cache_env(&first);
    let (calls, _) = build(&first, &[], &env, "the first checkout");
    assert_eq!(calls.len(), MODULE_STEPS, "{calls:#?}");

    let (calls, line) = build(&second, &[], &env, "the second checkout");
    assert_eq!(calls, compiles(&[]), "0 nvcc steps at another path");
    assert_eq!(line, served(MODULE_STEPS, MODULE_STEPS, &first));
    assert_watches_only(&second, &first);

    let edited = format!("{}// edited\n", MODULE_SOURCES[1].1);
    second.write(COMMON_CUH, &edited);
    let (calls, _) = build(&second, &[], &env, "after editing common.cuh there");
    assert_eq!(calls, ["compile caller.cu", "compile single.cu"]);
}

/// The same with the real nvcc: a copy at another path compiles nothing.
#[test]
fn real_nvcc_second_checkout_at_another_path_compiles_nothing() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let first = Fixture::with_real_nvcc("cache-real-one", "cachereal2", KERNEL_SOURCES, &nvcc);
    let mut env = cache_env(&first);
    env.push(("FIXTURE_CUDA_ARCHS", "sm_80".to_string()));
    let (calls, _) = build(&first, &[], &env, "the first checkout");
    assert_eq!(calls, compiles(&["a", "b", "c"]));

    // A fresh target dir's place, as another runner's.
    let second = first.second_checkout("cache-real-two");
    second.clean();
    let (calls, line) = build(&second, &[], &env, "the second checkout");
    assert_eq!(calls, compiles(&[]), "0 nvcc compiles at another path");
    assert_eq!(line, served(3, 3, &first));
    for module in ["a", "b", "c"] {
        assert_fatbin(&second.out_dir().join(format!("{module}.fatbin")));
    }
    assert_watches_only(&second, &first);
}

/// The build of `second` names no file of `first`: its manifest's
/// dependencies and its build script's `rerun-if-changed` lines are its own.
#[track_caller]
fn assert_watches_only(second: &Fixture, first: &Fixture) {
    // The toolkit is the first's (both share it): only its crate is not.
    let first_crate = first.crate_dir().display().to_string();
    let manifest = second.manifest();
    let deps: Vec<&PathBuf> = manifest.modules.iter().flat_map(|m| &m.deps).collect();
    assert!(!deps.is_empty(), "the modules include headers");
    for dep in deps {
        assert!(dep.starts_with(second.crate_dir()), "{}", dep.display());
    }
    let output = second.build_script_output();
    assert!(
        !output.contains(&first_crate),
        "the second checkout's build names the first's files:\n{output}"
    );
}

#[test]
fn the_cache_off_compiles_as_before() {
    let fixture = Fixture::with_sources("cache-off", "cacheoff", KERNEL_SOURCES);
    let mut env = cache_env(&fixture);
    let (calls, _) = build(&fixture, &[], &env, "storing");
    assert_eq!(calls, compiles(&["a", "b", "c"]));
    fixture.clean();
    env[0].1 = "off".to_string();
    let (calls, line) = build(&fixture, &[], &env, "KILN_CACHE=off");
    assert_eq!(calls, compiles(&["a", "b", "c"]));
    assert_eq!(line, Vec::<String>::new(), "no cache report");
}

#[test]
fn real_nvcc_warm_cache_compiles_nothing_after_cargo_clean() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let fixture = Fixture::with_real_nvcc("cache-real", "cachereal", KERNEL_SOURCES, &nvcc);
    let mut env = cache_env(&fixture);
    env.push(("FIXTURE_CUDA_ARCHS", "sm_80".to_string()));

    let (calls, line) = build(&fixture, &[], &env, "cold build");
    assert_eq!(calls, compiles(&["a", "b", "c"]));
    assert_eq!(line, served(0, 3, &fixture));

    fixture.clean();
    let (calls, line) = build(&fixture, &[], &env, "after cargo clean");
    assert_eq!(calls, compiles(&[]), "0 nvcc compiles");
    assert_eq!(line, served(3, 3, &fixture));
    for module in ["a", "b", "c"] {
        assert_fatbin(&fixture.out_dir().join(format!("{module}.fatbin")));
    }

    let edited = format!("{}// edited\n", KERNEL_SOURCES[0].1);
    assert!(KERNEL_SOURCES[0].0 == SHARED_H);
    fixture.write(SHARED_H, &edited);
    let (calls, _) = build(&fixture, &[], &env, "after editing shared.h");
    assert_eq!(calls, compiles(&["a", "b"]), "exactly shared.h's includers");

    // The same nvcc reporting another version, as another toolkit would.
    let wrapper = fixture.root_path("elsewhere/other-version-nvcc");
    write_script(
        &wrapper,
        &format!(
            "#!/usr/bin/env bash\nif [ \"${{1-}}\" = --version ]; then {} --version | sed 's/V13\\.0\\.[0-9]*/V13.0.999/'; exit; fi\nexec {} \"$@\"\n",
            quote(fixture.nvcc()),
            quote(fixture.nvcc())
        ),
    );
    fixture.clean();
    let wrapper = wrapper.display().to_string();
    env.push(("NVCC", wrapper));
    let (calls, line) = build(&fixture, &[], &env, "another toolkit version");
    assert_eq!(calls, compiles(&["a", "b", "c"]), "every source misses");
    assert_eq!(line, served(0, 3, &fixture));
    assert_eq!(
        fixture.manifest().toolkit.map(|t| t.version),
        Some("13.0.999".to_string())
    );
}

fn quote(path: &Path) -> String {
    shlex::try_quote(&path.display().to_string())
        .expect("a quotable path")
        .into_owned()
}

/// The store's files under `kind` (`entries`, `index`) whose bytes contain
/// `needle`.
fn store_files(fixture: &Fixture, kind: &str, needle: &str) -> Vec<PathBuf> {
    let dir = fixture.root_path("cache/v3").join(kind);
    let mut found = Vec::new();
    for shard in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let bytes = std::fs::read(file.path()).unwrap_or_default();
            if needle.is_empty() || bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(file.path());
            }
        }
    }
    found
}

/// The one entry of the store whose bytes contain `needle`.
#[track_caller]
fn entry_with(fixture: &Fixture, needle: &str) -> PathBuf {
    let found = store_files(fixture, "entries", needle);
    assert_eq!(found.len(), 1, "one entry holds {needle:?}: {found:#?}");
    found.into_iter().next().unwrap_or_default()
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "mkfifo {}",
        path.display()
    );
}

/// Something put in place of an entry.
type Damage<'a> = Box<dyn Fn(&Path) + 'a>;

/// Puts `damage` in place of the file at `path`.
fn replace(path: &Path, damage: &dyn Fn(&Path)) {
    std::fs::remove_file(path).unwrap_or_else(|e| panic!("removing {}: {e}", path.display()));
    damage(path);
}

#[test]
fn damaged_entries_are_compiled_again_after_cargo_clean_never_embedded() {
    let fixture = Fixture::with_sources("cache-damaged", "cachedamaged", KERNEL_SOURCES);
    let env = cache_env(&fixture);
    build(&fixture, &[], &env, "cold build");
    let mut sm75 = env.clone();
    sm75.push(("FIXTURE_CUDA_ARCHS", "sm_75".to_string()));
    build(&fixture, &[], &sm75, "an sm_75 build, for its entries");
    let of_a = "fake output of a.cu for sm_80 sm_90";
    let entry = entry_with(&fixture, of_a);
    let good = std::fs::read(&entry).unwrap();
    let (b_entry, a_sm75) = (
        entry_with(&fixture, "fake output of b.cu for sm_80 sm_90"),
        entry_with(&fixture, "fake output of a.cu for sm_75"),
    );
    let damages: Vec<(&str, Damage<'_>)> = vec![
        (
            "truncated",
            Box::new(|p| std::fs::write(p, &good[..good.len() / 2]).unwrap()),
        ),
        ("0 bytes", Box::new(|p| std::fs::write(p, "").unwrap())),
        (
            "its last byte flipped",
            Box::new(|p| {
                let mut bad = good.clone();
                *bad.last_mut().unwrap() ^= 0x20;
                std::fs::write(p, bad).unwrap();
            }),
        ),
        (
            "b's entry copied in",
            Box::new(|p| {
                std::fs::copy(&b_entry, p).unwrap();
            }),
        ),
        (
            "a's sm_75 entry copied in",
            Box::new(|p| {
                std::fs::copy(&a_sm75, p).unwrap();
            }),
        ),
        (
            "a symlink to b's entry",
            Box::new(|p| std::os::unix::fs::symlink(&b_entry, p).unwrap()),
        ),
        ("a FIFO", Box::new(mkfifo)),
    ];
    for (what, damage) in &damages {
        replace(&entry, damage);
        fixture.clean();
        let (calls, line) = build(&fixture, &[], &env, what);
        assert_eq!(calls, compiles(&["a"]), "{what}: a.cu compiled again");
        assert_eq!(line, served(2, 3, &fixture), "{what}");
        let image = std::fs::read(fixture.out_dir().join("a.fatbin")).unwrap();
        assert!(
            image.windows(of_a.len()).any(|w| w == of_a.as_bytes()),
            "{what}"
        );
        assert_eq!(
            std::fs::read(&entry).unwrap(),
            good,
            "{what}: the entry is replaced"
        );
    }

    // The indexes of a.cu's compiles (sm_75, and sm_80 sm_90): a FIFO there
    // must not block the build.
    // The index names the crate's files relative to its root.
    let index = store_files(&fixture, "index", "kernels/a.cu\n");
    assert_eq!(index.len(), 2, "{index:#?}");
    for path in &index {
        replace(path, &mkfifo);
    }
    fixture.clean();
    let (calls, line) = build(&fixture, &[], &env, "a FIFO as a.cu's index");
    assert_eq!(calls, compiles(&["a"]));
    assert_eq!(line, served(2, 3, &fixture));
    let replaced = index.iter().filter(|p| p.is_file()).count();
    assert_eq!(replaced, 1, "this build's index is replaced");
}

#[test]
fn a_step_that_writes_nothing_fails_and_stores_nothing() {
    let fixture = Fixture::with_sources("cache-no-output", "cachenooutput", KERNEL_SOURCES);
    let env = cache_env(&fixture);
    build(&fixture, &[], &env, "cold build");
    let edited = format!("{}// edited\n", KERNEL_SOURCES[2].1);
    assert_eq!(KERNEL_SOURCES[2].0, "kernels/a.cu");
    fixture.write("kernels/a.cu", &edited);

    let mut launcher = env.clone();
    launcher.push(("FIXTURE_NVCC_LAUNCHER", "/bin/true".to_string()));
    let errors = failing_build(&fixture, &launcher, "FIXTURE_NVCC_LAUNCHER=/bin/true");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with(&format!(
            "nvcc exited 0 on module `a` but wrote no a.fatbin; check the launcher and the \
             module's flags: `/bin/true {} -fatbin",
            fixture.nvcc().display()
        )),
        "{errors:#?}"
    );

    // The edited a.cu is compiled, not served the image the launcher left.
    fixture.clean();
    let (calls, line) = build(&fixture, &[], &env, "without the launcher");
    assert_eq!(calls, compiles(&["a"]));
    assert_eq!(line, served(2, 3, &fixture));

    fixture.write(
        "kernels/kiln.toml",
        "[modules.b]\nflags = [\"--version\"]\n",
    );
    let errors = failing_build(&fixture, &env, "flags = [\"--version\"]");
    assert!(
        errors.len() == 1
            && errors[0].starts_with(
                "nvcc exited 0 on module `b` but wrote no b.fatbin; check the launcher and the \
                 module's flags: `"
            )
            && errors[0].contains("--version"),
        "{errors:#?}"
    );
    fixture.remove("kernels/kiln.toml");
    fixture.clean();
    let (calls, _) = build(&fixture, &[], &env, "after removing the flag");
    assert_eq!(calls, compiles(&[]), "b.cu's entry from before is intact");
}

/// With the real nvcc: a flipped byte in an entry and another arch's entry
/// compile again after `cargo clean`; `<P>_NVCC_LAUNCHER=/bin/true` fails.
#[test]
fn real_nvcc_damaged_entries_compile_again_and_an_empty_step_fails() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let fixture =
        Fixture::with_real_nvcc("cache-real-damaged", "cacherealdmg", KERNEL_SOURCES, &nvcc);
    let env = cache_env(&fixture);
    let arch = |spec: &str| {
        let mut env = env.clone();
        env.push(("FIXTURE_CUDA_ARCHS", spec.to_string()));
        env
    };
    build(&fixture, &[], &arch("sm_75"), "sm_75 build");
    let sm75: Vec<Vec<u8>> = ["a", "b", "c"]
        .iter()
        .map(|m| std::fs::read(fixture.out_dir().join(format!("{m}.fatbin"))).unwrap())
        .collect();
    fixture.clean();
    build(&fixture, &[], &arch("sm_80"), "sm_80 build");
    // Which entry is a's: the one whose output ends as a.fatbin does.
    let a80 = std::fs::read(fixture.out_dir().join("a.fatbin")).unwrap();
    let entries = store_files(&fixture, "entries", "");
    let ends_with = |image: &[u8]| -> PathBuf {
        let found: Vec<&PathBuf> = entries
            .iter()
            .filter(|p| std::fs::read(p).unwrap().ends_with(image))
            .collect();
        assert_eq!(found.len(), 1);
        found[0].clone()
    };
    let a_entry = ends_with(&a80);
    let a75_entry = ends_with(&sm75[0]);

    let good = std::fs::read(&a_entry).unwrap();
    let mut flipped = good.clone();
    let middle = good.len() - a80.len() / 2;
    flipped[middle] ^= 0x01;
    std::fs::write(&a_entry, flipped).unwrap();
    fixture.clean();
    let (calls, line) = build(&fixture, &[], &arch("sm_80"), "a flipped byte");
    assert_eq!(calls, compiles(&["a"]));
    assert_eq!(line, served(2, 3, &fixture));
    assert_eq!(
        std::fs::read(fixture.out_dir().join("a.fatbin")).unwrap(),
        a80
    );

    std::fs::copy(&a75_entry, &a_entry).unwrap();
    fixture.clean();
    let (calls, _) = build(&fixture, &[], &arch("sm_80"), "a's sm_75 entry in place");
    assert_eq!(calls, compiles(&["a"]));
    assert_eq!(
        std::fs::read(fixture.out_dir().join("a.fatbin")).unwrap(),
        a80
    );

    let edited = format!("{}// edited\n", KERNEL_SOURCES[2].1);
    fixture.write("kernels/a.cu", &edited);
    let mut launcher = arch("sm_80");
    launcher.push(("FIXTURE_NVCC_LAUNCHER", "/bin/true".to_string()));
    let errors = failing_build(&fixture, &launcher, "FIXTURE_NVCC_LAUNCHER=/bin/true");
    assert!(
        errors.len() == 1
            && errors[0].starts_with("nvcc exited 0 on module `a` but wrote no a.fatbin"),
        "{errors:#?}"
    );
    fixture.clean();
    let (calls, _) = build(&fixture, &[], &arch("sm_80"), "the edited a.cu");
    assert_eq!(
        calls,
        compiles(&["a"]),
        "compiled, not served a stale image"
    );
}
