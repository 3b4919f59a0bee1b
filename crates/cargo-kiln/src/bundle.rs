//! `cargo kiln bundle`: a crate's release test binaries (its kernels
//! compiled in, `<PREFIX>_REQUIRE_CUDA=1`), a memcheck positive control and a
//! `run.sh`, in one folder that a GPU host without Rust runs with
//! `bash run.sh`: every test binary with the GPU required (a test that
//! prints `skipped:` fails), then each under compute-sanitizer (memcheck with
//! leak check, racecheck, initcheck, synccheck), then the positive control,
//! a kernel that writes out of bounds, which memcheck must flag or `run.sh`
//! fails: proof that the sanitizer really ran.
//!
//! The pieces (finding test executables in cargo's messages, copying them,
//! staging and packing the folder, the script's prelude) are shared with
//! kiln's own `cargo xtask gpu-bundle`, which adds its workspace's crates,
//! benchmarks and multi-GPU steps.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use cargo_metadata::{Message, TargetKind};
use cuda_build::toolkit::Toolkit;

use crate::project::Project;

mod staging;

pub use staging::{unmarked, Staging, KIND, SPEC};

/// The bundle's folder in the crate's target dir.
pub const DEFAULT_DIR: &str = "kiln-bundle";

/// The positive control's source: one thread writes one element past the
/// end of a `cudaMalloc`ed buffer.
const CONTROL_SOURCE: &str = include_str!("bundle/memcheck_control.cu");

/// The positive control's name in `bin/`.
pub const CONTROL: &str = "kiln-memcheck-control";

/// The head of every `run.sh`: strict mode, `KILN_REQUIRE_GPU` from
/// `nvidia-smi` (no more than `CUDA_VISIBLE_DEVICES` leaves visible),
/// `step` (runs a command, counts pass and fail), `gpu_test` (a test binary
/// that prints `skipped:` fails) and `$SAN` (compute-sanitizer).
pub const PRELUDE: &str = r#"set -uo pipefail
cd "$(dirname "$0")"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
# nvidia-smi lists every GPU; CUDA_VISIBLE_DEVICES may leave fewer to CUDA.
if [[ -n ${CUDA_VISIBLE_DEVICES+x} ]]; then
  visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c '[^[:space:]]')
  (( visible < gpus )) && gpus=$visible
fi
export KILN_REQUIRE_GPU="${KILN_REQUIRE_GPU:-$(( gpus > 0 ? gpus : 1 ))}"
echo "KILN_REQUIRE_GPU=$KILN_REQUIRE_GPU"
what="${1:-all}"
passed=0; failed=0
step() { local name="$1"; shift; echo "==> $name: $*"; if "$@"; then passed=$((passed+1)); echo "<== $name: pass"; else failed=$((failed+1)); echo "<== $name: FAIL"; fi; }
# Runs a test binary; fails when it fails or when any of its tests skipped.
gpu_test() {
  local log rc; log=$(mktemp)
  "$@" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  if grep -q 'skipped:' "$log"; then echo "a test printed skipped: (above); on the GPU host that is a failure"; rc=1; fi
  rm -f "$log"; return "$rc"
}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader || true
"#;

/// What [`make`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// Test binaries bundled.
    pub tests: usize,
    /// Bytes in `bin/`.
    pub bytes: u64,
}

/// Builds the bundle of `project` into `out` (new, empty, or an earlier
/// bundle, whose files alone are replaced; a failed run leaves the old
/// one), without the test targets named in `exclude`.
pub fn make(project: &Project, arch: Option<&str>, out: &Path, exclude: &[&str]) -> Result<Made> {
    let parent = out
        .parent()
        .context("the bundle folder needs a parent folder")?;
    crate::output::check_dir(parent, "--out's parent")?;
    // Checked before the build, which takes minutes.
    let protect = [project.dir.as_path(), project.manifest_path.as_path()];
    let staging = Staging::new(out, SPEC, &protect, "--out")?;
    let Some(toolkit) = project.discovery().toolkit else {
        bail!("a bundle needs a CUDA toolkit to compile the kernels; run `cargo kiln toolkit install` or set CUDA_PATH");
    };
    // From an earlier build or the build script's source, as `build` reads
    // it; only a prefix the source does not spell out costs a build.
    let prefix = match project.known_env_prefix() {
        Some(p) => p,
        None => {
            eprintln!(
                "cargo kiln: building {} once to learn its build script's env prefix",
                project.name
            );
            project.build(None, true)?.env_prefix
        }
    };
    eprintln!(
        "[1/3] building {}'s release test binaries ({prefix}_REQUIRE_CUDA=1)",
        project.name
    );
    let mut cargo = project.cargo("test");
    cargo.env(format!("{prefix}_REQUIRE_CUDA"), "1").args([
        "--release",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    if let Some(spec) = arch {
        cargo.env(format!("{prefix}_CUDA_ARCHS"), spec);
    }
    let skip: Vec<String> = exclude
        .iter()
        .map(|t| format!("{}__{t}", project.name))
        .collect();
    let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
    let mut tests = executables(cargo, true, &[project.name.as_str()], &skip)?;
    // cargo reports them as they finish; the script lists them by name.
    tests.sort();
    if tests.is_empty() {
        bail!(
            "{} has no test binaries to bundle; add tests under tests/ or src/",
            project.name
        );
    }
    eprintln!(
        "[2/3] compiling the memcheck positive control with {}",
        toolkit.nvcc.display()
    );
    compile_control(&toolkit, arch, &staging.path().join("bin").join(CONTROL))?;
    eprintln!("[3/3] copying {} test binaries", tests.len());
    let bytes = copy_binaries(&tests, &staging.path().join("bin"))?;
    let names: Vec<&str> = tests.iter().map(|(n, _)| n.as_str()).collect();
    write_script(
        &staging.path().join("run.sh"),
        &crate_script(&project.name, &names),
    )?;
    staging.commit()?;
    Ok(Made {
        tests: tests.len(),
        bytes,
    })
}

/// `run.sh` for one crate's test binaries (`crate__target` names).
pub fn crate_script(krate: &str, tests: &[&str]) -> String {
    format!(
        r#"#!/usr/bin/env bash
# Generated by `cargo kiln bundle` for {krate}. Runs its test binaries with the
# GPU required (KILN_REQUIRE_GPU=<the GPUs nvidia-smi lists, at least 1>; a
# test binary that prints `skipped:` fails even when it exits 0), then each
# under compute-sanitizer (memcheck with leak check, racecheck, initcheck,
# synccheck), then memcheck's positive control: a kernel that writes out of
# bounds, which memcheck must flag, or this script fails.
# Usage: bash run.sh [tests|sanitize|all]   (default: all)
{PRELUDE}
if [[ $what == all || $what == tests ]]; then
  for t in {tests}; do step "$t" gpu_test ./bin/$t --test-threads=1 --nocapture; done
fi
if [[ $what == all || $what == sanitize ]]; then
  if [[ -x $SAN ]]; then
    # A test binary that never calls CUDA is no failure, where this
    # compute-sanitizer has the option to say so.
    nocuda=(); if "$SAN" --help 2>/dev/null | grep -q -- --require-cuda-init; then nocuda=(--require-cuda-init no); fi
    for t in {tests}; do
      step "memcheck $t" "$SAN" --tool memcheck ${{nocuda[@]+"${{nocuda[@]}}"}} --leak-check full --error-exitcode 99 ./bin/$t --test-threads=1
      for tool in racecheck initcheck synccheck; do
        step "$tool $t" "$SAN" --tool $tool ${{nocuda[@]+"${{nocuda[@]}}"}} --error-exitcode 99 ./bin/$t --test-threads=1
      done
    done
{tail}"#,
        tests = tests.join(" "),
        tail = sanitize_tail(&format!("./bin/{CONTROL}"), "kiln-bundle"),
    )
}

/// The end of a `run.sh` sanitize section (inside `if [[ -x $SAN ]]`) and
/// of the script: memcheck's positive control (`control`, a command line
/// that must make memcheck exit 99), the step that fails without
/// compute-sanitizer, and the `NAME: N passed, N failed` summary.
pub fn sanitize_tail(control: &str, name: &str) -> String {
    format!(
        r#"    # Positive control: memcheck must flag the planted out-of-bounds write.
    control() {{ "$SAN" --tool memcheck --error-exitcode 99 {control}; [[ $? == 99 ]]; }}
    step "memcheck positive control is flagged" control
  else
    echo "compute-sanitizer not found: sanitizer steps not run"; failed=$((failed+1))
  fi
fi
echo "{name}: $passed passed, $failed failed"
[[ $failed == 0 ]]
"#
    )
}

/// Compiles the positive control into a standalone executable (the CUDA
/// runtime linked statically: the GPU host needs only the driver).
fn compile_control(toolkit: &Toolkit, arch: Option<&str>, dest: &Path) -> Result<()> {
    let nvcc = &toolkit.nvcc;
    let dir = tempfile::tempdir()?;
    let source = dir.path().join("memcheck_control.cu");
    std::fs::write(&source, CONTROL_SOURCE)?;
    let mut cmd = Command::new(nvcc);
    cmd.args(["-O2", "-lineinfo", "-cudart=static", "-cudadevrt=none"]);
    // A pip-installed toolkit keeps libcudart_static.a in lib/, where nvcc's
    // own profile does not look.
    for lib in ["lib", "lib64"]
        .map(|d| toolkit.root.join(d))
        .iter()
        .filter(|d| d.is_dir())
    {
        cmd.arg(format!("-L{}", lib.display()));
    }
    for gencode in control_gencodes(arch) {
        cmd.arg(gencode);
    }
    let out = cmd
        .arg("-o")
        .arg(dest)
        .arg(&source)
        .output()
        .with_context(|| format!("cannot run {}", nvcc.display()))?;
    if !out.status.success() {
        bail!(
            "nvcc could not compile the memcheck positive control: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// `-gencode` flags: SASS for each `sm_XY` of the spec plus PTX of the
/// newest, so the control loads on the bundle's GPUs; without a spec,
/// sm_80 and sm_90 SASS plus compute_90 PTX.
fn control_gencodes(arch: Option<&str>) -> Vec<String> {
    let mut numbers: Vec<u32> = arch
        .unwrap_or("sm_80,sm_90")
        .split([',', ';'])
        .filter_map(|a| {
            let digits: String = a.trim().chars().filter(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect();
    if numbers.is_empty() {
        numbers = vec![80, 90];
    }
    numbers.sort_unstable();
    numbers.dedup();
    let mut out: Vec<String> = numbers
        .iter()
        .map(|n| format!("-gencode=arch=compute_{n},code=sm_{n}"))
        .collect();
    if let Some(n) = numbers.last() {
        out.push(format!("-gencode=arch=compute_{n},code=compute_{n}"));
    }
    out
}

/// Writes `run.sh`, executable.
pub fn write_script(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(())
}

/// Copies each binary into `bin` under its bundle name, without debug info
/// but with line tables (backtraces); returns the bytes copied.
pub fn copy_binaries(binaries: &[(String, PathBuf)], bin: &Path) -> Result<u64> {
    let mut total = 0u64;
    for (name, path) in binaries {
        let dest = bin.join(name);
        std::fs::copy(path, &dest).with_context(|| format!("cannot copy {}", path.display()))?;
        let _ = Command::new("strip")
            .arg("--strip-debug")
            .arg(&dest)
            .status();
        total += std::fs::metadata(&dest)?.len();
    }
    Ok(total)
}

/// `(bundle name, path)` of each executable a cargo build reports (its
/// stdout is piped here): test binaries (`crate__target`, `crate` one of
/// `crates`) or, with `tests` false, binaries (`target`); names in `skip`
/// are left out.
pub fn executables(
    mut cargo: Command,
    tests: bool,
    crates: &[&str],
    skip: &[&str],
) -> Result<Vec<(String, PathBuf)>> {
    let output = cargo
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run cargo")?
        .wait_with_output()?;
    if !output.status.success() {
        bail!(
            "cargo failed ({}); its errors are above (a GPU bundle needs a CUDA toolkit: `cargo kiln toolkit install`)",
            output.status
        );
    }
    let mut found = Vec::new();
    for msg in Message::parse_stream(output.stdout.as_slice()) {
        let Message::CompilerArtifact(artifact) = msg.context("cannot read cargo's output")? else {
            continue;
        };
        let Some(path) = artifact.executable else {
            continue;
        };
        if artifact.profile.test != tests {
            continue;
        }
        let target = &artifact.target.name;
        let Some(krate) = package_name(&artifact.package_id.repr, crates) else {
            continue;
        };
        let is_bin = artifact.target.kind.first() == Some(&TargetKind::Bin);
        let name = if tests && is_bin {
            format!("{krate}__bin_{target}")
        } else if tests {
            format!("{krate}__{target}")
        } else {
            target.clone()
        };
        if !skip.contains(&name.as_str()) {
            found.push((name, path.into_std_path_buf()));
        }
    }
    Ok(found)
}

/// Which of `crates` a cargo package id names: `path+file:///…/gpu-core#0.1.0`
/// (the folder's name) or `…#apps@0.1.0` (a name that differs from it).
pub fn package_name<'a>(id: &str, crates: &[&'a str]) -> Option<&'a str> {
    crates
        .iter()
        .find(|c| id.contains(&format!("/{c}#")) || id.contains(&format!("#{c}@")))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn executable(path: &Path, body: &str) {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn crate_script_is_valid_bash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.sh");
        std::fs::write(&path, crate_script("mykernels", &["mykernels__saxpy"])).unwrap();
        let out = Command::new("bash").arg("-n").arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// run.sh run for real on fake binaries and a fake compute-sanitizer:
    /// a skip fails, the control must be flagged (exit 99) or run.sh fails.
    fn run_fake(control_exit: u32, test_body: &str) -> (bool, String, String) {
        run_fake_with_help(control_exit, test_body, "")
    }

    fn run_fake_with_help(
        control_exit: u32,
        test_body: &str,
        help: &str,
    ) -> (bool, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let (bin, tools) = (dir.path().join("bin"), dir.path().join("tools"));
        std::fs::create_dir(&bin).unwrap();
        std::fs::create_dir(&tools).unwrap();
        let log = dir.path().join("san.log");
        executable(
            &tools.join("compute-sanitizer"),
            &format!(
                "echo \"$*\" >> {}; [ \"$1\" = --help ] && echo '{help}'; case \"$*\" in *{CONTROL}*) exit {control_exit};; esac; exit 0",
                log.display()
            ),
        );
        executable(&bin.join("k__t"), test_body);
        executable(&bin.join(CONTROL), "exit 0");
        std::fs::write(dir.path().join("run.sh"), crate_script("k", &["k__t"])).unwrap();
        let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap());
        let out = Command::new("bash")
            .arg("run.sh")
            .current_dir(dir.path())
            .env("PATH", path)
            .env_remove("KILN_REQUIRE_GPU")
            .output()
            .unwrap();
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            log,
        )
    }

    #[test]
    fn run_sh_passes_when_memcheck_flags_the_control() {
        let (ok, stdout, log) = run_fake(99, "[ \"$KILN_REQUIRE_GPU\" = 1 ] || exit 7");
        assert!(ok, "{stdout}");
        assert_eq!(
            stdout.lines().last(),
            Some("kiln-bundle: 6 passed, 0 failed")
        );
        let tools: Vec<&str> = log
            .lines()
            .filter(|l| *l != "--help")
            .map(|l| l.split_whitespace().nth(1).unwrap())
            .collect();
        assert_eq!(
            tools,
            [
                "memcheck",
                "racecheck",
                "initcheck",
                "synccheck",
                "memcheck"
            ]
        );
        assert!(log.lines().last().unwrap().ends_with(CONTROL), "{log}");
        // This fake's --help names no --require-cuda-init: not passed.
        assert!(!log.contains("require-cuda-init"), "{log}");
    }

    #[test]
    fn binaries_without_cuda_pass_where_the_sanitizer_allows_it() {
        let (ok, stdout, log) = run_fake_with_help(99, "exit 0", "  --require-cuda-init arg");
        assert!(ok, "{stdout}");
        let marked = log
            .lines()
            .filter(|l| l.contains("--require-cuda-init no"))
            .count();
        assert_eq!(marked, 4, "the test binary's four tools: {log}");
    }

    #[test]
    fn run_sh_fails_when_memcheck_misses_the_control() {
        let (ok, stdout, _) = run_fake(0, "exit 0");
        assert!(!ok, "{stdout}");
        assert!(
            stdout.contains("<== memcheck positive control is flagged: FAIL"),
            "{stdout}"
        );
    }

    #[test]
    fn run_sh_counts_a_skip_as_a_failure() {
        let (ok, stdout, _) = run_fake(99, "echo 'skipped: no CUDA device'; exit 0");
        assert!(!ok, "{stdout}");
        assert!(stdout.contains("<== k__t: FAIL"), "{stdout}");
    }

    #[test]
    fn control_gencodes_follow_the_spec() {
        assert_eq!(
            control_gencodes(Some("sm_90")),
            [
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90"
            ]
        );
        assert_eq!(control_gencodes(None).len(), 3);
    }

    #[test]
    fn package_ids_name_their_crate() {
        let crates = &["gpu-core", "apps"];
        let id = "path+file:///w/kiln/crates/gpu-core#0.1.0";
        assert_eq!(package_name(id, crates), Some("gpu-core"));
        let id = "path+file:///w/kiln/crates/workloads#apps@0.1.0";
        assert_eq!(package_name(id, crates), Some("apps"));
        let id = "path+file:///w/kiln/crates/gpu-core-extra#0.1.0";
        assert_eq!(package_name(id, crates), None);
    }

    /// `KILN_REQUIRE_GPU` counts the GPUs CUDA will see: nvidia-smi lists
    /// all of a host's, `CUDA_VISIBLE_DEVICES` may leave fewer (the 4-GPU
    /// host's 2-GPU figures ran with it set and were labelled 4).
    #[test]
    fn the_prelude_counts_only_visible_gpus() {
        let dir = tempfile::tempdir().unwrap();
        let smi = dir.path().join("nvidia-smi");
        executable(
            &smi,
            "for i in 0 1 2 3; do echo \"GPU $i: H200 (UUID: x)\"; done",
        );
        let script = dir.path().join("p.sh");
        std::fs::write(&script, format!("{PRELUDE}\necho gpus=$gpus\n")).unwrap();
        let path = format!(
            "{}:{}",
            dir.path().display(),
            std::env::var("PATH").unwrap()
        );
        let run = |visible: Option<&str>| {
            let mut cmd = std::process::Command::new("bash");
            cmd.arg(&script)
                .env("PATH", &path)
                .env_remove("KILN_REQUIRE_GPU");
            match visible {
                Some(v) => cmd.env("CUDA_VISIBLE_DEVICES", v),
                None => cmd.env_remove("CUDA_VISIBLE_DEVICES"),
            };
            let out = String::from_utf8(cmd.output().unwrap().stdout).unwrap();
            out.lines()
                .find_map(|l| l.strip_prefix("KILN_REQUIRE_GPU="))
                .unwrap()
                .to_string()
        };
        assert_eq!(run(None), "4");
        assert_eq!(run(Some("0,1")), "2");
        assert_eq!(run(Some("2")), "1");
        assert_eq!(run(Some("0,1,2,3,4,5")), "4");
        // None visible: still at least 1, as with no GPU listed.
        assert_eq!(run(Some("")), "1");
    }
}
