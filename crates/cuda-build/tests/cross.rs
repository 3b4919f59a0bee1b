//! A cross build with the real nvcc: the modules fixture (static modules,
//! an `rdc` static library, fat binaries) built by
//! `cargo build --target aarch64-unknown-linux-gnu` on this x86 machine. The
//! static modules' host objects must be aarch64 ELF (read with `object`),
//! the fat binaries fat binaries, and the build must say what it built for.
//!
//! It needs the toolkit (skipped without one, a failure under
//! `KILN_REQUIRE_TOOLKIT=1`, as every real-toolkit test here) and the
//! cross pieces: `aarch64-linux-gnu-g++`, Rust's aarch64 standard library
//! and the target's runtime beside the toolkit (`cargo xtask toolkit install
//! --target aarch64-unknown-linux-gnu`). Without those it prints `not run:`
//! and what is missing; the CI cell that installs them (`cross-aarch64`)
//! sets `KILN_REQUIRE_CROSS=1`, where a missing piece is a failure.
#![cfg(unix)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{assert_fatbin, assert_success, installed_nvcc, Fixture, MODULE_SOURCES};

const TARGET: &str = "aarch64-unknown-linux-gnu";

/// What this machine lacks for a cross build, if anything.
fn missing_cross_pieces(nvcc: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| d.join("aarch64-linux-gnu-g++").is_file())
    });
    if !on_path {
        missing
            .push("aarch64-linux-gnu-g++ on PATH (apt-get install g++-aarch64-linux-gnu)".into());
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if !sysroot.is_some_and(|s| s.join("lib/rustlib").join(TARGET).is_dir()) {
        missing.push(format!("Rust's {TARGET} std (rustup target add {TARGET})"));
    }
    let install = nvcc.ancestors().nth(3).map(Path::to_path_buf);
    let runtime = install
        .map(|i| i.join("targets/sbsa-linux/lib/libcudart_static.a"))
        .filter(|r| r.is_file());
    if runtime.is_none() {
        missing.push(format!(
            "the {TARGET} runtime beside the toolkit (cargo xtask toolkit install --target {TARGET})"
        ));
    }
    missing
}

/// The CPU of every ELF object under `dir`.
fn object_cpus(dir: &Path) -> Vec<(String, object::Architecture)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "o") {
            let bytes = std::fs::read(&path).unwrap();
            let file = object::File::parse(&*bytes)
                .unwrap_or_else(|e| panic!("{} is not an object: {e}", path.display()));
            use object::Object as _;
            found.push((
                path.file_name().unwrap().to_string_lossy().into_owned(),
                file.architecture(),
            ));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

#[test]
fn static_modules_built_for_aarch64_are_aarch64_objects() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let missing = missing_cross_pieces(&nvcc);
    if !missing.is_empty() {
        assert!(
            std::env::var_os("KILN_REQUIRE_CROSS").is_none_or(|v| v != "1"),
            "KILN_REQUIRE_CROSS=1 but this machine lacks {}",
            missing.join(", ")
        );
        eprintln!("not run: the cross build needs {}", missing.join(", "));
        return;
    }
    let fixture = Fixture::with_real_nvcc("cross-aarch64", "crossfix", MODULE_SOURCES, &nvcc);
    let output = fixture.cargo_build_with(&["--target", TARGET], &[("FIXTURE_REQUIRE_CUDA", "1")]);
    assert_success(&output, "the cross build of the modules fixture");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("kernels for aarch64-unknown-linux-gnu (host x86_64"))
        .collect();
    assert_eq!(said.len(), 1, "one line says what was built for: {stderr}");
    assert!(said[0].contains("aarch64-linux-gnu-g++"), "{}", said[0]);
    assert!(said[0].contains("targets/sbsa-linux/lib"), "{}", said[0]);

    let build = fixture
        .root()
        .parent()
        .expect("fixtures share a parent")
        .join("rebuild-target")
        .join(TARGET)
        .join("debug/build");
    let out = std::fs::read_dir(&build)
        .unwrap_or_else(|e| panic!("{}: {e}", build.display()))
        .map(|e| e.unwrap().path())
        .find(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("crossfix-"))
                && d.join("out/fixture-manifest.toml").is_file()
        })
        .expect("the cross build's OUT_DIR")
        .join("out");
    // `host` (-c), `pairlib` (-dc and its device link): all host code.
    let host = object_cpus(&out.join("host.objs"));
    let pairlib = object_cpus(&out.join("pairlib.objs"));
    assert_eq!(host.len(), 1, "{host:?}");
    assert_eq!(pairlib.len(), 3, "a.o, b.o and dlink.o: {pairlib:?}");
    for (name, cpu) in host.iter().chain(&pairlib) {
        assert_eq!(*cpu, object::Architecture::Aarch64, "{name}");
    }
    for lib in ["libfixture_host.a", "libfixture_pairlib.a"] {
        assert!(out.join(lib).is_file(), "{lib}");
    }
    // Fat binaries: device code only, the same on any host.
    assert_fatbin(&out.join("single.fatbin"));
    assert_fatbin(&out.join("pair.fatbin"));
}
