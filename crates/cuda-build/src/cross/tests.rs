//! The target's compiler and runtime, resolved from tables of variables and
//! fake compilers: every hostile setting ends in one line naming it.

use std::os::unix::fs::PermissionsExt as _;

use super::*;
use crate::nvcc::{CompileCommand, CompileMode};

const ARM: &str = "aarch64-unknown-linux-gnu";

fn cross() -> Platform {
    Platform {
        target: ARM.to_string(),
        host: "x86_64-unknown-linux-gnu".to_string(),
    }
}

/// An executable shell script that prints `machine` for `-dumpmachine`.
fn fake_cxx(path: &Path, machine: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("#!/bin/sh\n[ \"$1\" = -dumpmachine ] && echo {machine}\nexit 0\n"),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A kiln install at `dir` (record, `cuda` root) with the target's runtime
/// when `runtime`; returns the toolkit root.
fn install(dir: &Path, runtime: bool) -> PathBuf {
    std::fs::create_dir_all(dir.join("cuda/include")).unwrap();
    std::fs::write(dir.join(INSTALL_RECORD), "").unwrap();
    if runtime {
        let lib = dir.join("targets/sbsa-linux/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join(RUNTIME_LIB), "!<arch>\n").unwrap();
    }
    dir.join("cuda")
}

fn error(env: &[(&str, &str)], root: &Path) -> String {
    let e = resolve(env, &cross(), root).unwrap_err().to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

#[test]
fn nvcc_target_dirs_of_rust_triples() {
    assert_eq!(nvcc_target_dir(ARM), Some("sbsa-linux"));
    assert_eq!(
        nvcc_target_dir("x86_64-unknown-linux-gnu"),
        Some("x86_64-linux")
    );
    for none in [
        "aarch64-apple-darwin",
        "x86_64-pc-windows-msvc",
        "x86_64-unknown-linux-musl",
        "riscv64gc-unknown-linux-gnu",
        "aarch64-linux-android",
        "",
    ] {
        assert_eq!(nvcc_target_dir(none), None, "{none}");
    }
    assert_eq!(gnu_triple(ARM), "aarch64-linux-gnu");
}

#[test]
fn outside_a_build_script_nothing_is_cross() {
    let env: &[(&str, &str)] = &[];
    assert!(!Platform::from_env(env).is_cross());
    let env: &[(&str, &str)] = &[("TARGET", ARM)];
    assert!(!Platform::from_env(env).is_cross());
    let env: &[(&str, &str)] = &[("TARGET", ARM), ("HOST", "x86_64-unknown-linux-gnu")];
    assert_eq!(Platform::from_env(env), cross());
}

#[test]
fn the_target_variable_comes_first_then_the_cc_crates_then_the_linkers() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    let root = install(&tmp.path().join("tk"), true);
    for name in ["a-g++", "b-g++", "aarch64-linux-gnu-g++", "my-aarch64-g++"] {
        fake_cxx(&bin.join(name), "aarch64-linux-gnu");
    }
    let path = bin.to_str().unwrap();
    let linker = bin.join("my-aarch64-gcc");
    let linker = linker.to_str().unwrap();
    let taken = |env: &[(&str, &str)]| resolve(env, &cross(), &root).unwrap().compiler;
    let env = [
        ("PATH", path),
        ("CUDAHOSTCXX_aarch64_unknown_linux_gnu", "a-g++"),
        ("CXX_aarch64-unknown-linux-gnu", "b-g++"),
        ("CUDAHOSTCXX", "/nonexistent/host-g++"),
    ];
    assert_eq!(
        taken(&env),
        (
            bin.join("a-g++"),
            "CUDAHOSTCXX_aarch64_unknown_linux_gnu".into()
        )
    );
    assert_eq!(
        taken(
            &env[..1]
                .iter()
                .chain(&env[2..])
                .copied()
                .collect::<Vec<_>>()
        ),
        (bin.join("b-g++"), "CXX_aarch64-unknown-linux-gnu".into())
    );
    let env = [
        ("PATH", path),
        ("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", linker),
    ];
    assert_eq!(taken(&env).0, bin.join("my-aarch64-g++"));
    assert_eq!(taken(&env[..1]).0, bin.join("aarch64-linux-gnu-g++"));
    let found = resolve(&env[..1], &cross(), &root).unwrap();
    assert_eq!(
        found.runtime_dir,
        tmp.path().join("tk/targets/sbsa-linux/lib")
    );
    assert_eq!(found.target_dir, None, "the wheel layout has no targets/");
}

#[test]
fn a_compiler_variable_pointing_nowhere_is_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let root = install(tmp.path(), true);
    let var = "CUDAHOSTCXX_aarch64-unknown-linux-gnu";
    let e = error(&[("PATH", ""), (var, "/nonexistent/g++")], &root);
    assert_eq!(
        e,
        format!(
            "cross build for {ARM}: host compiler /nonexistent/g++ ({var}) does not exist; \
             set CUDAHOSTCXX_aarch64_unknown_linux_gnu to a C++ compiler for {ARM} \
             (a path, or a name on PATH), or unset {var}"
        )
    );
    let e = error(&[("PATH", ""), ("TARGET_CXX", "nowhere-g++")], &root);
    assert!(e.contains("(TARGET_CXX) not found on PATH;"), "{e}");
    let dir = tmp.path().to_str().unwrap();
    let e = error(&[("PATH", ""), ("TARGET_CXX", dir)], &root);
    assert!(e.contains("is not a file"), "{e}");
}

#[test]
fn an_empty_compiler_variable_is_refused_not_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let root = install(tmp.path(), true);
    for empty in ["", "  "] {
        let e = error(
            &[
                ("PATH", ""),
                ("CUDAHOSTCXX_aarch64_unknown_linux_gnu", empty),
            ],
            &root,
        );
        assert!(
            e.contains("(CUDAHOSTCXX_aarch64_unknown_linux_gnu) is set but empty;"),
            "{e}"
        );
    }
}

#[test]
fn no_compiler_for_the_target_names_what_was_tried_and_the_package() {
    let tmp = tempfile::tempdir().unwrap();
    let root = install(tmp.path(), true);
    let e = error(
        &[
            ("PATH", "/nonexistent"),
            (
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                "/opt/x/aarch64-linux-gnu-gcc-12",
            ),
        ],
        &root,
    );
    assert!(
        e.starts_with(&format!(
            "cross build for {ARM}: host compiler /opt/x/aarch64-linux-gnu-g++-12, \
             aarch64-linux-gnu-g++ (derived) not found; install a C++ cross compiler for {ARM} \
             (Debian: g++-aarch64-linux-gnu)"
        )),
        "{e}"
    );
}

#[test]
fn a_compiler_for_another_cpu_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = install(&tmp.path().join("tk"), true);
    let host = tmp.path().join("bin/g++");
    fake_cxx(&host, "x86_64-linux-gnu");
    let e = error(
        &[
            ("PATH", ""),
            ("CXX_aarch64_unknown_linux_gnu", host.to_str().unwrap()),
        ],
        &root,
    );
    assert!(
        e.contains(
            "(CXX_aarch64_unknown_linux_gnu) compiles for x86_64-linux-gnu (its -dumpmachine);"
        ),
        "{e}"
    );
}

/// Issue 41: `CXX_<target>=/bin/false` (a program that fails as a
/// compiler) is refused before the build, naming the variable, instead of
/// failing later in nvcc without it.
#[test]
fn a_compiler_that_fails_is_refused_naming_its_variable() {
    let tmp = tempfile::tempdir().unwrap();
    let root = install(&tmp.path().join("tk"), true);
    let e = error(
        &[
            ("PATH", ""),
            ("CXX_aarch64_unknown_linux_gnu", "/bin/false"),
        ],
        &root,
    );
    assert!(
        e.contains("host compiler /bin/false (CXX_aarch64_unknown_linux_gnu)")
            && e.contains("`/bin/false -dumpmachine` failed")
            && e.contains("set CXX_aarch64_unknown_linux_gnu to a C++ compiler for"),
        "{e}"
    );
}

#[test]
fn a_target_nvcc_has_no_dir_for_is_one_line() {
    let platform = Platform {
        target: "riscv64gc-unknown-linux-gnu".into(),
        host: "x86_64-unknown-linux-gnu".into(),
    };
    let env: &[(&str, &str)] = &[("PATH", "")];
    let e = resolve(env, &platform, Path::new("/nonexistent"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "cross build for riscv64gc-unknown-linux-gnu: nvcc builds host code for x86_64 and \
         aarch64 Linux (glibc) only; build the static modules on the target, or keep to \
         fat-binary modules there"
    );
}

#[test]
fn no_target_runtime_names_the_install_command() {
    let tmp = tempfile::tempdir().unwrap();
    let root = install(&tmp.path().join("tk"), false);
    let cxx = tmp.path().join("bin/aarch64-linux-gnu-g++");
    fake_cxx(&cxx, "aarch64-linux-gnu");
    let path = cxx.parent().unwrap().to_str().unwrap();
    let e = error(&[("PATH", path)], &root);
    assert!(
        e.ends_with(&format!(
            "targets/sbsa-linux/lib); install the target's CUDA runtime beside the toolkit \
             (`cargo kiln toolkit install --target {ARM}`)"
        )),
        "{e}"
    );
    // A damaged install: the folder is there, the library is a folder.
    let lib = tmp.path().join("tk/targets/sbsa-linux/lib");
    std::fs::create_dir_all(lib.join(RUNTIME_LIB)).unwrap();
    assert!(error(&[("PATH", path)], &root).contains("no libcudart_static.a"));
    // A system toolkit with NVIDIA's cross package: targets/ in the root.
    let sys = tmp.path().join("sys");
    std::fs::create_dir_all(sys.join("targets/sbsa-linux/lib64")).unwrap();
    std::fs::write(sys.join("targets/sbsa-linux/lib64").join(RUNTIME_LIB), "").unwrap();
    let found = resolve(&[("PATH", path)][..], &cross(), &sys).unwrap();
    assert_eq!(found.target_dir, Some("sbsa-linux"));
    assert_eq!(found.runtime_dir, sys.join("targets/sbsa-linux/lib64"));
}

#[test]
fn cxx_beside_the_linker() {
    let beside = |l: &str| cxx_beside(Path::new(l)).map(|p| p.display().to_string());
    assert_eq!(
        beside("/usr/bin/aarch64-linux-gnu-gcc").as_deref(),
        Some("/usr/bin/aarch64-linux-gnu-g++")
    );
    assert_eq!(beside("clang-18").as_deref(), Some("clang++-18"));
    assert_eq!(
        beside("aarch64-linux-gnu-cc").as_deref(),
        Some("aarch64-linux-gnu-c++")
    );
    assert_eq!(beside("rust-lld"), None);
    assert_eq!(beside("/"), None);
}

/// The stamps and the kernel cache key a compile by its command line: a
/// cross build's carries the target's compiler, so neither can hand a host
/// object to a cross build of the same sources, or the other way round.
#[test]
fn a_cross_compile_has_its_own_command_line() {
    let mut nvcc = Nvcc::plain("/cuda/bin/nvcc");
    let archs = crate::arch::ArchList::default();
    let args = |nvcc: &Nvcc| {
        CompileCommand {
            nvcc,
            mode: CompileMode::Object,
            source: Path::new("a.cu"),
            output: Path::new("a.o"),
            depfile: Path::new("a.d"),
            include_dirs: &[],
            archs: &archs,
            flags: &[],
            pic: true,
        }
        .args()
    };
    let native = args(&nvcc);
    nvcc.ccbin = Some(("/usr/bin/aarch64-linux-gnu-g++".into(), "derived".into()));
    nvcc.target_dir = Some("sbsa-linux");
    let crossed = args(&nvcc);
    assert_ne!(native, crossed);
    let text: Vec<_> = crossed.iter().map(|a| a.to_string_lossy()).collect();
    assert_eq!(
        text[1..5],
        [
            "-ccbin",
            "/usr/bin/aarch64-linux-gnu-g++",
            "-target-dir",
            "sbsa-linux"
        ]
    );
}
