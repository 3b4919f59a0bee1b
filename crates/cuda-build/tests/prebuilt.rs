//! Prebuilt kernels end to end: the modules fixture (every module shape,
//! static libraries too) is built with the fake nvcc, its images exported
//! with `cuda_build::prebuilt::export` into `kernels-prebuilt/`, and then
//! built where no toolkit is found: a matching folder is embedded with one
//! line and `cfg(cuda_enabled)`; a stale one (a header edited, a module
//! added) is refused with one warning naming the file, and the build is
//! CPU-only; a missing one changes nothing; `FIXTURE_CUDA=off` ignores it.
//!
//! Then the hostile folder (`hostile`): every kind of damage and every way
//! out of the folder, each refused in one line, CPU-only or failing under
//! `FIXTURE_REQUIRE_CUDA=1`, with nothing written outside OUT_DIR; with the
//! fake nvcc and with images the real nvcc built (`target/cuda-toolkit`).
//! `reader` holds the property tests of `prebuilt.toml`'s reader.
#![cfg(unix)]

mod support;

#[path = "prebuilt/hostile.rs"]
mod hostile;
#[path = "prebuilt/reader.rs"]
mod reader;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::{
    assert_failure, assert_success, build_script_errors, build_script_warnings, compiles, Fixture,
    COMMON_CUH, MODULE_SOURCES,
};

/// No toolkit by any route: `NVCC` and `CUDA_PATH` unset (the fixture's
/// builds take `CUDA_HOME`, `CUDA_ROOT` and nvcc's `PATH` dirs away), and
/// the system dirs skipped with `FIXTURE_CUDA=off` where this machine has
/// one, which the test then cannot run.
fn no_toolkit(fixture: &Fixture) -> Option<Vec<(&'static str, &'static str)>> {
    let unset = [("NVCC", ""), ("CUDA_PATH", "")];
    let env: Vec<(String, String)> = fixture.discovery_env(&unset);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (&**k, &**v)).collect();
    if cuda_build::discover(&env[..], &[]).toolkit.is_some() {
        eprintln!("skipped: this machine has a CUDA toolkit in a system dir");
        return None;
    }
    Some(unset.to_vec())
}

fn build(fixture: &Fixture, env: &[(&str, &str)], what: &str) -> Output {
    let output = fixture.cargo_build(env);
    assert_success(&output, what);
    assert_eq!(fixture.nvcc_calls(), compiles(&[]), "{what}: no nvcc");
    output
}

/// A fixture built with its toolkit, its kernels exported into
/// `kernels-prebuilt/` and kept beside the crate (`pristine/`), to put back
/// before each hostile case.
pub(crate) struct Exported {
    pub(crate) fixture: Fixture,
    pub(crate) dir: PathBuf,
    pristine: PathBuf,
}

impl Exported {
    pub(crate) fn new(fixture: Fixture) -> Self {
        let output = fixture.cargo_build(&[]);
        assert_success(&output, "the toolkit build");
        fixture.nvcc_calls();
        let manifest_path = fixture
            .out_dir()
            .join(cuda_build::manifest::file_name("FIXTURE"));
        let dir = fixture.path("kernels-prebuilt");
        cuda_build::prebuilt::export(&manifest_path, &dir).unwrap_or_else(|e| panic!("{e}"));
        let pristine = fixture.root_path("pristine");
        copy_dir(&dir, &pristine);
        Self {
            fixture,
            dir,
            pristine,
        }
    }

    /// Puts the exported folder back as it was written.
    pub(crate) fn restore(&self) {
        if self.dir.symlink_metadata().is_ok() {
            std::fs::remove_dir_all(&self.dir).expect("removing the prebuilt folder");
        }
        copy_dir(&self.pristine, &self.dir);
    }

    /// A file of the folder.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creating a copy of the folder");
    for entry in std::fs::read_dir(from).expect("listing the folder") {
        let entry = entry.expect("a dir entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copying a file");
    }
}

#[test]
fn prebuilt_kernels_are_embedded_only_while_they_match_the_sources() {
    let fixture = Fixture::with_sources("prebuilt", "prebuilt", MODULE_SOURCES);
    let exported = Exported::new(fixture);
    let (fixture, dir) = (&exported.fixture, &exported.dir);
    let prebuilt = cuda_build::prebuilt::read(dir).unwrap();
    assert_eq!(prebuilt.summary(), "CUDA 13.0, sm_80 sm_90 + compute_90");
    let names: Vec<String> = prebuilt
        .inputs
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert!(
        names.contains(&"kernels/kiln.toml".to_string())
            && names.contains(&COMMON_CUH.to_string())
            && names.contains(&"kernels/pair/caller.cu".to_string()),
        "inputs by package-relative name: {names:?}"
    );
    let mut files: Vec<String> = prebuilt
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "libcudart_static.a",
            "libfixture_host.a",
            "libfixture_pairlib.a",
            "only90.fatbin",
            "pair.fatbin",
            "single.fatbin"
        ],
        "every file of the folder has its hash"
    );
    for file in &files {
        assert!(dir.join(file).is_file(), "{file} in the folder");
    }
    // An existing folder is never removed (issue 26): a second export
    // into it is refused and leaves it as it was.
    let manifest_path = fixture
        .out_dir()
        .join(cuda_build::manifest::file_name("FIXTURE"));
    let again = cuda_build::prebuilt::export(&manifest_path, dir)
        .unwrap_err()
        .to_string();
    assert!(again.contains("already exists and is not empty"), "{again}");
    assert_eq!(cuda_build::prebuilt::read(dir).unwrap(), prebuilt);

    let Some(env) = no_toolkit(fixture) else {
        return;
    };
    let mut required = env.clone();
    required.push(("FIXTURE_REQUIRE_CUDA", "1"));
    let output = build(
        fixture,
        &required,
        "matching, no toolkit, GPU code required",
    );
    assert_eq!(
        build_script_warnings(&output),
        ["prebuilt kernels: CUDA 13.0, sm_80 sm_90 + compute_90 (from kernels-prebuilt; no CUDA toolkit found)"]
    );
    let directives = fixture.build_script_output();
    assert!(
        directives.contains("cargo::rustc-cfg=cuda_enabled\n"),
        "{directives}"
    );
    assert!(
        directives.contains("cargo::rustc-cfg=cuda_ge_13_0\n"),
        "{directives}"
    );
    assert!(directives.contains("cargo::rustc-link-lib=static=fixture_host\n"));
    let generated = fixture.generated_modules();
    let pair = fixture.out_dir().join("pair.fatbin");
    assert!(
        generated.contains(&format!("include_bytes!({:?})", pair.display().to_string())),
        "{generated}"
    );
    assert_eq!(
        std::fs::read(&pair).unwrap(),
        std::fs::read(dir.join("pair.fatbin")).unwrap(),
        "the checked bytes are embedded"
    );
    assert!(
        generated.contains("kernels: &[\"pair_kernel\"]"),
        "{generated}"
    );
    assert!(
        generated.contains(
            "IMAGES_FROM: &str = \"prebuilt kernels-prebuilt: CUDA 13.0, sm_80 sm_90 + compute_90\""
        ),
        "{generated}"
    );
    let manifest = fixture.manifest();
    assert!(manifest.cuda_enabled && manifest.toolkit.is_none());

    let mut off = env.clone();
    off.push(("FIXTURE_CUDA", "off"));
    build(fixture, &off, "FIXTURE_CUDA=off");
    assert!(fixture
        .build_script_output()
        .contains("cargo::rustc-cfg=cpu_only\n"));

    fixture.write(COMMON_CUH, &format!("{}// edited\n", MODULE_SOURCES[1].1));
    let output = build(fixture, &env, "a header edited since");
    let warnings = build_script_warnings(&output);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(&format!(
            "prebuilt kernels refused ({COMMON_CUH} changed since they were built) and no CUDA toolkit found"
        )) && warnings[0].contains("building CPU-only"),
        "{}",
        warnings[0]
    );
    assert!(fixture
        .build_script_output()
        .contains("cargo::rustc-cfg=cpu_only\n"));
    assert!(!fixture.generated_modules().contains("include_bytes!"));

    let output = fixture.cargo_build(&required);
    assert_failure(&output, "stale, GPU code required");
    let errors = build_script_errors(&output);
    assert!(
        errors.len() == 1 && errors[0].contains(&format!("were refused: {COMMON_CUH} changed")),
        "{errors:#?}"
    );
    fixture.nvcc_calls();

    fixture.restore_kernels();
    fixture.write(
        "kernels/extra.cu",
        "extern \"C\" __global__ void extra(float *x) {}\n",
    );
    let output = build(fixture, &env, "a module added since");
    assert!(
        build_script_warnings(&output)[0].starts_with(
            "prebuilt kernels refused (kernels/extra.cu (module `extra`) is not among them)"
        ),
        "{:#?}",
        build_script_warnings(&output)
    );

    fixture.remove("kernels/extra.cu");
    std::fs::remove_dir_all(dir).unwrap();
    fixture.touch("kernels");
    let output = build(fixture, &env, "no prebuilt folder");
    let warnings = build_script_warnings(&output);
    assert!(
        warnings.len() == 1 && warnings[0].starts_with("no CUDA toolkit found"),
        "{warnings:#?}"
    );
}

/// A toolkit build, then one that embeds the prebuilt kernels over its
/// outputs, then the toolkit build again: the outputs are compiled again,
/// never the prebuilt bytes kept under the first build's stamps (which
/// embedded CUDA 13.0's images in a build whose manifest said 13.5).
#[test]
fn a_toolkit_build_after_the_prebuilt_kernels_compiles_again() {
    let fixture = Fixture::with_sources("prebuilt-back", "prebuiltback", MODULE_SOURCES);
    let exported = Exported::new(fixture);
    let (fixture, dir) = (&exported.fixture, &exported.dir);
    let Some(none) = no_toolkit(fixture) else {
        return;
    };
    let newer = [
        ("FAKE_NVCC_RELEASE", "13.5"),
        ("FAKE_NVCC_VERSION", "13.5.37"),
    ];
    let built = |what: &str| {
        let output = fixture.cargo_build(&newer);
        assert_success(&output, what);
        fixture.nvcc_calls();
        let pair = std::fs::read(fixture.out_dir().join("pair.fatbin")).unwrap();
        assert!(
            String::from_utf8_lossy(&pair).contains("(release 13.5)"),
            "{what}: pair.fatbin is not the CUDA 13.5 build's"
        );
    };
    // The fake's version is no variable the build script watches.
    fixture.touch("kernels");
    built("CUDA 13.5");
    build(fixture, &none, "the prebuilt kernels over it");
    let embedded = std::fs::read(fixture.out_dir().join("pair.fatbin")).unwrap();
    assert_eq!(embedded, std::fs::read(dir.join("pair.fatbin")).unwrap());
    built("CUDA 13.5 again");
}

#[test]
fn exporting_a_build_without_a_toolkit_is_refused() {
    let fixture = Fixture::with_sources("prebuilt-cpu", "prebuiltcpu", MODULE_SOURCES);
    let output = fixture.cargo_build(&[("FIXTURE_CUDA", "off")]);
    assert_success(&output, "CPU-only build");
    let manifest_path = fixture
        .out_dir()
        .join(cuda_build::manifest::file_name("FIXTURE"));
    let error = cuda_build::prebuilt::export(&manifest_path, &fixture.path("kernels-prebuilt"))
        .unwrap_err()
        .to_string();
    assert!(
        error.ends_with(
            "this build used no CUDA toolkit; build with one (set CUDA_PATH) to write prebuilt kernels"
        ),
        "{error}"
    );
    assert!(!fixture.path("kernels-prebuilt").exists());
}

/// A folder rewritten file by file while it is read (another export of the
/// same crate, for other archs, copied over it and back): every read is one
/// whole state of the folder or a one-line refusal, never a mix of the two.
#[test]
fn a_folder_rewritten_while_it_is_read_is_read_whole_or_refused() {
    let fixture = Fixture::with_sources("prebuilt-race", "prebuiltrace", MODULE_SOURCES);
    let e = Exported::new(fixture);
    let first = cuda_build::prebuilt::read(&e.dir).unwrap();
    let output = e
        .fixture
        .cargo_build(&[("FIXTURE_CUDA_ARCHS", "sm_86-real,compute_86")]);
    assert_success(&output, "the build for sm_86");
    e.fixture.nvcc_calls();
    let manifest_path = e
        .fixture
        .out_dir()
        .join(cuda_build::manifest::file_name("FIXTURE"));
    let other = e.fixture.root_path("other");
    let second = cuda_build::prebuilt::export(&manifest_path, &other).unwrap();
    assert_ne!(first, second);
    let states = [e.pristine.clone(), other];
    let done = std::sync::atomic::AtomicBool::new(false);
    let (mut whole, mut refused) = (0, 0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 0..60 {
                let from = &states[round % 2];
                for entry in std::fs::read_dir(from).unwrap() {
                    let entry = entry.unwrap();
                    std::fs::copy(entry.path(), e.dir.join(entry.file_name())).unwrap();
                }
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            match cuda_build::prebuilt::read(&e.dir) {
                Ok(read) => {
                    assert!(read == first || read == second, "a mix: {read:#?}");
                    whole += 1;
                }
                Err(error) => {
                    assert!(!error.to_string().contains('\n'), "{error}");
                    refused += 1;
                }
            }
        }
    });
    eprintln!("{whole} reads of a whole folder, {refused} refused mid-copy");
    assert!(whole + refused > 0, "the folder was read while it changed");
}
