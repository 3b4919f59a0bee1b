//! `cargo xtask gpu-bundle [--arch SPEC]`: builds the release test binaries
//! of the crates that touch the GPU (and of `examples/downstream` and
//! `examples/kernel-trees`, `examples/candle-patterns` and
//! `examples/cudarc-interop`, crates outside the workspace; and, as
//! `downstream-prebuilt__*`, of `examples/downstream` packaged and built with
//! no toolkit from its prebuilt kernels), the `apps` CLI and xtask itself (for
//! `xtask bench --apps bin/apps`), and copies them with a `run.sh` into
//! `target/gpu-bundle/`, so that a GPU host with no Rust runs the whole GPU
//! suite, the benchmarks and the suite under compute-sanitizer with one
//! command: `bash target/gpu-bundle/run.sh`.
//!
//! Built on cargo-kiln's bundle pieces (test executables from cargo's
//! messages, copying, staging, the script's prelude); what is kiln's is
//! here: the crates, the benchmarks, the multi-GPU steps and the NCCL
//! sanitizer steps.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use cargo_kiln::bundle::{copy_binaries, sanitize_tail, write_script, Staging, PRELUDE};

use crate::build::validate_spec_or_exit;
use crate::cli::ArchArg;
use crate::kernel_crates;
use crate::output;

/// The bundle's size limit: what one device call can carry with room to spare.
const MAX_BYTES: u64 = 60 << 20;

/// Crates whose tests run on the GPU host, by folder (the bundle's names)
/// and package name (cargo's `-p`).
const GPU_CRATES: &[(&str, &str)] = &[
    ("gpu-core", "kiln-gpu-core"),
    ("cuda-sys", "cuda-sys"),
    ("anneal", "kiln-anneal"),
    ("apps", "apps"),
];

/// A crate outside the workspace whose tests are bundled too: its own
/// manifest, target dir and env prefix.
struct OutsideCrate {
    name: &'static str,
    manifest: &'static str,
    target_dir: &'static str,
    prefix: &'static str,
    /// Whether `--arch` applies: the kernel-tree fixtures pin their archs
    /// (an sm_90a-only module, a test of what each image carries), so they
    /// build with their own kiln.toml's.
    follows_arch: bool,
}

const OUTSIDE_CRATES: &[OutsideCrate] = &[
    OutsideCrate {
        name: "downstream",
        manifest: "examples/downstream/Cargo.toml",
        target_dir: "target/downstream",
        prefix: "DOWNSTREAM",
        follows_arch: true,
    },
    OutsideCrate {
        name: "kernel-trees",
        manifest: "examples/kernel-trees/Cargo.toml",
        target_dir: "target/kernel-trees",
        prefix: "KT",
        follows_arch: false,
    },
    // Kernels in candle's patterns, launched typed (markers generated from
    // the sources), by name, and through a static module's host launchers; its kiln.toml pins the archs its image test
    // checks.
    OutsideCrate {
        name: "candle-patterns",
        manifest: "examples/candle-patterns/Cargo.toml",
        target_dir: "target/candle-patterns",
        prefix: "CP",
        follows_arch: false,
    },
    // A crate using the anneal as a library: its backend from
    // kiln_anneal::modules::ALL, the anneal's kernels compiled by
    // kiln-anneal's own build (prefix KILN_ANNEAL), no cuda-sys.
    OutsideCrate {
        name: "anneal-user",
        manifest: "examples/anneal-user/Cargo.toml",
        target_dir: "target/anneal-user",
        prefix: "KILN_ANNEAL",
        follows_arch: true,
    },
    // Plain cudarc (CUDA 12.8 bindings) launching kiln-built kernels, beside
    // gpu-core built for the same version.
    OutsideCrate {
        name: "cudarc-interop",
        manifest: "examples/cudarc-interop/Cargo.toml",
        target_dir: "target/cudarc-interop",
        prefix: "CUDARC_INTEROP",
        follows_arch: true,
    },
];

/// Test binaries that do not belong on a GPU host: trybuild and gpu-core's
/// check of a build with no CUDA-version feature need cargo, the
/// bindings checks and gpu-core's scan for uninitialized allocations read
/// the source tree, candle-patterns' include-graph check reads its build
/// manifest, the CLI suite runs the `apps` binary
/// cargo built here (by its path on this machine), and the CLI's own unit
/// tests parse arguments only.
const NOT_BUNDLED: &[&str] = &[
    "gpu-core__compile_fail",
    "kernel-trees__compile_fail",
    "candle-patterns__compile_fail",
    "apps__cli",
    "apps__bin_apps",
    "cuda-sys__bindings",
    "anneal__bindings",
    "downstream__bindings",
    "kernel-trees__bindings",
    "candle-patterns__rebuild",
    "cudarc-interop__bindings",
    "gpu-core__version_feature",
    "apps__launch",
    "gpu-core__initialized_memory",
];

/// Test binaries run under the sanitizers: those that use the GPU (a binary
/// that never calls CUDA makes compute-sanitizer fail with "terminated before
/// first instrumented API call"). `gpu_fault` faults on purpose and the
/// positive control runs on its own. `gpu-core__multi_gpu` runs in the plain
/// suite only: its work is NCCL's kernels and transport, not kiln's code.
const SANITIZED: &[&str] = &[
    "gpu-core__gpu",
    "gpu-core__backends",
    "gpu-core__interop",
    "gpu-core__pinned",
    "gpu-core__local",
    "apps__gpu_agreement",
    "apps__batch",
    "anneal__anneal",
    "anneal__assign_tc",
    "anneal__encode_gpu",
    "downstream__saxpy",
    "downstream-prebuilt__saxpy",
    "kernel-trees__elementwise",
    "kernel-trees__host",
    "kernel-trees__rdc",
    "kernel-trees__hopper",
    "kernel-trees__byname",
    "candle-patterns__by_name",
    "candle-patterns__moe",
    "cudarc-interop__affine",
];

/// Tests whose GPU work includes NCCL's (`binary:test filter`), sanitized in
/// steps of their own and skipped in their binary's main steps. On the
/// 2-GPU host NCCL's own reports drowned kiln's: memcheck reported API
/// errors made inside libnccl (`cudaFuncGetAttributes` answering
/// `cudaErrorNoKernelImageForDevice` while NCCL probes its kernels,
/// `cudaGetLastError` clearing `cudaErrorPeerAccessAlreadyEnabled`), and
/// initcheck uninitialized reads in `ncclDevKernel_*` (NCCL's LL protocol
/// polls its own receive buffers, which it never initializes). Every tool
/// checks NCCL's kernels too; initcheck's reports of NCCL's memory are
/// suppressed by [`NCCL_SUPPRESSIONS`], scoped to NCCL's kernels, with the
/// reason beside each record (every buffer kiln hands NCCL is initialized:
/// gpu-core allocates only zeroed memory,
/// `crates/gpu-core/tests/initialized_memory.rs`). memcheck's API reports
/// are off in these steps (`--report-api-errors no`): suppressions scoped
/// to libnccl's calls did not hold in compute-sanitizer 2025.3.1 (the
/// suppressions file says what was tried); memory errors are still
/// reported, and kiln's own API calls are the single-GPU tests' calls,
/// which run under full memcheck.
const NCCL_TESTS: &[&str] = &["anneal__anneal:sharded_over_gpus"];

/// The suppressions of [`NCCL_TESTS`]' steps, `nccl-suppressions.xml` in
/// the bundle (each record's reason is written beside it).
const NCCL_SUPPRESSIONS: &str = include_str!("bundle/nccl-suppressions.xml");

/// `run.sh ranks`'s steps (sourced by run.sh), and the two-hosts run they
/// end with (CI's `two-hosts` cell, here with `--backend cuda`).
const RANKS_SCRIPTS: [(&str, &str); 2] = [
    ("ranks.sh", include_str!("bundle/ranks.sh")),
    ("two-hosts.sh", include_str!("../../ci/two-hosts.sh")),
];

/// Tests skipped under the sanitizers: the out-of-memory test and gpu-core's
/// registration of memory twice make a failing API call on purpose
/// (memcheck reports it).
const SANITIZER_SKIPS: &str =
    "--skip out_of_memory_is_an_error --skip registering_memory_twice_is_a_typed_error";

/// Binaries with launches by name (tests named `*by_name*`). Their
/// parameter tables are read from the images' cubins with no driver call
/// (gpu-core's `launch/param_table.rs`), so these tests run under memcheck
/// with its default options, API reports on: a failing driver call (the
/// old probe of `cuFuncGetParamInfo` past the last parameter) fails the
/// step. They keep a step of their own, named for them, and are skipped in
/// the binary's main memcheck step, which runs the binary's typed launches
/// (`typed_*` in candle-patterns, the source-declared kernels in
/// kernel-trees): every binary here has GPU tests beside its by-name ones,
/// so neither step runs empty (compute-sanitizer fails a binary that makes
/// no CUDA call as "terminated before first instrumented API call").
const BY_NAME: &[&str] = &[
    "gpu-core__gpu",
    "kernel-trees__byname",
    "candle-patterns__by_name",
];

/// `target/gpu-bundle` as kiln's output folder: replaced by a re-run, and
/// adopted when an older xtask wrote it without a marker.
const SPEC: kiln_output::Spec = kiln_output::Spec {
    tool: "cargo xtask gpu-bundle",
    kind: "gpu-bundle",
    replace: true,
    legacy: Some(unmarked_gpu_bundle),
};

/// A bundle an older `cargo xtask gpu-bundle` wrote (no marker).
fn unmarked_gpu_bundle(dir: &Path) -> Option<Vec<String>> {
    cargo_kiln::bundle::unmarked(
        dir,
        "# Generated by `cargo xtask gpu-bundle`.",
        &["nccl-suppressions.xml"],
    )
}

/// Runs the command.
pub(crate) fn run(root: &Path, args: &ArchArg) -> Result<()> {
    let arch = args.arch.clone();
    if let Some(spec) = &arch {
        validate_spec_or_exit(root, spec, "--arch");
    }
    let target = root.join("target");
    // Checked before the builds, which take minutes.
    output::check_dir(&target, "the bundle's folder")?;
    let bundle = target.join("gpu-bundle");
    // Removed on drop unless committed: a failed run leaves nothing.
    let staging = Staging::new(&bundle, SPEC, &[root], "target/gpu-bundle")?;

    println!("[1/3] building release test binaries, apps and xtask (KILN_REQUIRE_CUDA=1, KILN_ANNEAL_REQUIRE_CUDA=1)");
    let mut tests = cargo(root, arch.as_deref());
    tests.args([
        "test",
        "--release",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    for (_, package) in GPU_CRATES {
        tests.args(["-p", package]);
    }
    // The wgpu engine's agreement tests run on the GPU host's Vulkan driver.
    tests.args(["--features", "apps/wgpu"]);
    let folders: Vec<&str> = GPU_CRATES.iter().map(|(folder, _)| *folder).collect();
    let mut binaries = executables(tests, true, &folders)?;
    for outside in OUTSIDE_CRATES {
        binaries.extend(executables(
            outside_tests(root, outside, arch.as_deref()),
            true,
            &[outside.name],
        )?);
    }
    // The user's view: examples/downstream packaged, unpacked and built
    // where no toolkit is found, its GPU code from its kernels-prebuilt/.
    binaries.extend(crate::package::unpacked_downstream_tests(root, true)?);
    let mut apps = cargo(root, arch.as_deref());
    apps.args([
        "build",
        "--release",
        "-p",
        "apps",
        "--features",
        "apps/wgpu",
        "--message-format=json-render-diagnostics",
    ]);
    binaries.extend(executables(apps, false, &["apps"])?);
    // Apart from apps, as it was when cuda-sys had a `kernels` feature that
    // only apps turned on; cuda-sys now always embeds kiln's fat binaries.
    let mut xtask = cargo(root, arch.as_deref());
    xtask.args([
        "build",
        "--release",
        "-p",
        "xtask",
        "--message-format=json-render-diagnostics",
    ]);
    binaries.extend(executables(xtask, false, &["xtask"])?);

    println!("[2/3] copying {} binaries", binaries.len());
    let total = copy_binaries(&binaries, &staging.path().join("bin"))?;
    write_script(&staging.path().join("run.sh"), &run_script(&binaries))?;
    std::fs::write(
        staging.path().join("nccl-suppressions.xml"),
        NCCL_SUPPRESSIONS,
    )?;
    for (name, text) in RANKS_SCRIPTS {
        std::fs::write(staging.path().join(name), text)?;
    }
    staging.commit()?;
    let archive = pack(root)?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
    println!(
        "[3/3] {} ({:.1} MiB) and {} ({:.1} MiB): on the GPU host, `tar xJf gpu-bundle.tar.xz && bash gpu-bundle/run.sh`",
        bundle.display(),
        mib(total),
        archive.display(),
        mib(std::fs::metadata(&archive)?.len()),
    );
    Ok(())
}

/// `target/gpu-bundle.tar.xz`: what a device call carries. The test binaries
/// embed the same fat binaries many times over, which xz's window folds
/// into one copy; the size limit applies to the archive.
fn pack(root: &Path) -> Result<PathBuf> {
    let archive = root.join("target/gpu-bundle.tar.xz");
    let partial = root.join("target/.gpu-bundle.tar.xz.partial");
    let status = Command::new("tar")
        .current_dir(root.join("target"))
        .env("XZ_OPT", "-6 -T0")
        .args(["-cJf"])
        .arg(&partial)
        .arg("gpu-bundle")
        .status()
        .context("cannot run tar to pack the bundle")?;
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!("tar failed packing the bundle ({status})");
    }
    let bytes = std::fs::metadata(&partial)?.len();
    if bytes > MAX_BYTES {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "the packed bundle is {} MiB, over the {} MiB a device call carries; drop a crate from GPU_CRATES",
            bytes >> 20,
            MAX_BYTES >> 20
        );
    }
    std::fs::rename(&partial, &archive)
        .with_context(|| format!("cannot move the archive into {}", archive.display()))?;
    Ok(archive)
}

fn cargo(root: &Path, arch: Option<&str>) -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(root).stdout(Stdio::piped());
    // Every kernel crate's kernels compiled (cuda-sys's, kiln-anneal's).
    kernel_crates::set_for_all(&mut cargo, "REQUIRE_CUDA", "1");
    if let Some(spec) = arch {
        kernel_crates::set_for_all(&mut cargo, "CUDA_ARCHS", spec);
    }
    cargo
}

/// `cargo test --release --no-run` of a crate outside the workspace, which
/// must compile its kernels (`<PREFIX>_REQUIRE_CUDA=1`) with the toolkit the
/// workspace's build finds (handed over as `NVCC` unless a discovery
/// variable is already set: the crate looks only where any crate outside
/// kiln would), for the same archs where it follows `--arch`.
fn outside_tests(root: &Path, outside: &OutsideCrate, arch: Option<&str>) -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(root)
        .env("CARGO_TARGET_DIR", root.join(outside.target_dir))
        .env(format!("{}_REQUIRE_CUDA", outside.prefix), "1")
        .stdout(Stdio::piped())
        .args([
            "test",
            "--release",
            "--no-run",
            "--message-format=json-render-diagnostics",
            "--manifest-path",
            outside.manifest,
        ]);
    if let Some(spec) = arch.filter(|_| outside.follows_arch) {
        cargo.env(format!("{}_CUDA_ARCHS", outside.prefix), spec);
    }
    let discovery_set = ["NVCC", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
        .iter()
        .any(|var| std::env::var_os(var).is_some());
    if !discovery_set {
        if let Some(found) = crate::discovery::toolkit_present() {
            cargo.env("NVCC", found.nvcc);
        }
    }
    cargo
}

/// `(bundle name, path)` of each executable cargo reports, less those
/// [`NOT_BUNDLED`].
fn executables(cargo: Command, tests: bool, crates: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    cargo_kiln::bundle::executables(cargo, tests, crates, NOT_BUNDLED)
}

/// The script the GPU host runs.
fn run_script(binaries: &[(String, PathBuf)]) -> String {
    let tests: Vec<&str> = binaries
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| n.contains("__"))
        .collect();
    let sanitized: Vec<&str> = tests
        .iter()
        .copied()
        .filter(|n| SANITIZED.contains(n))
        .collect();
    format!(
        r#"#!/usr/bin/env bash
# Generated by `cargo xtask gpu-bundle`. Runs kiln's GPU suite, the benchmarks
# (`xtask bench`: kiln's figures, PyTorch's cdist (the weak anchor) beside them
# when torch_anchor.py sits beside this script, and kiln's anneal against the
# five k-means anchors when kmeans_anchors.py (with flash-kmeans/) does: copy
# ../shared/anchors/* beside run.sh; bench.json, speedup.svg and kmeans.md in
# ${{OUT:-.}}/bench),
# and the suite under compute-sanitizer (memcheck with leak check, racecheck,
# initcheck, synccheck), with memcheck's positive control.
# This host has the GPUs, so a test that skips for want of one fails: the
# tests see KILN_REQUIRE_GPU=<the GPUs nvidia-smi lists, at least 1> (a test
# that needs more prints `not run:`, which is no failure), and a test binary
# that prints `skipped:` counts as a failure here even when it exits 0.
# The wgpu engine (apps built with `--features wgpu`) needs the host's Vulkan
# loader (libvulkan.so.1) and NVIDIA's Vulkan driver: without an adapter its
# tests fail here (KILN_REQUIRE_WGPU=1) rather than skip.
# `ranks` (ranks.sh, beside this script): one process per GPU against one
# GPU, launch to result and the iterations, and across two network
# namespaces over NCCL's sockets (two-hosts.sh; `two-hosts` runs that alone).
# Usage: bash run.sh [tests|bench|ranks|two-hosts|sanitize|all]   (default: all)
{PRELUDE}
export KILN_REQUIRE_WGPU="${{KILN_REQUIRE_WGPU:-1}}"
if [[ $what == all || $what == tests ]]; then
  for t in {tests}; do step "$t" gpu_test ./bin/$t --test-threads=1 --nocapture; done
  step "apps devices" ./bin/apps devices
fi
if [[ $what == all || $what == bench ]]; then
  torch=()
  if [[ -f torch_anchor.py ]]; then torch=(--torch-script torch_anchor.py); else echo "torch_anchor.py is not beside run.sh: no PyTorch comparison"; fi
  if [[ -f kmeans_anchors.py ]]; then
    torch+=(--kmeans-anchors kmeans_anchors.py)
    [[ -d flash-kmeans ]] || echo "flash-kmeans/ is not beside run.sh: the Flash-KMeans modes are not run"
  else echo "kmeans_anchors.py is not beside run.sh: no k-means anchor comparison"; fi
  step "bench" ./bin/xtask bench --apps bin/apps ${{torch[@]+"${{torch[@]}}"}} --out "${{OUT:-.}}/bench"
fi
if [[ $what == all || $what == ranks ]]; then
  source ./ranks.sh
fi
if [[ $what == two-hosts ]]; then
  step "two hosts (network namespaces, nccl sockets)" bash two-hosts.sh --apps bin/apps --backend cuda
fi
if [[ $what == all || $what == sanitize ]]; then
  if [[ -x $SAN ]]; then
    for t in {sanitized}; do
      by_name=""
      for b in {by_name}; do [[ $t == "$b" ]] && by_name="--skip by_name"; done
      nccl=""; skip_nccl=""
      for b in {nccl}; do [[ $t == "${{b%%:*}}" ]] && nccl="${{b#*:}}" && skip_nccl="--skip $nccl"; done
      step "memcheck $t" "$SAN" --tool memcheck --leak-check full --error-exitcode 99 ./bin/$t --test-threads=1 {skips} $by_name $skip_nccl
      if [[ -n $by_name ]]; then
        step "memcheck $t (launches by name)" "$SAN" --tool memcheck --leak-check full --error-exitcode 99 ./bin/$t --test-threads=1 by_name
      fi
      step "racecheck $t" "$SAN" --tool racecheck --error-exitcode 99 ./bin/$t --test-threads=1 {skips} $skip_nccl
      step "initcheck $t" "$SAN" --tool initcheck --error-exitcode 99 ./bin/$t --test-threads=1 {skips} $skip_nccl
      step "synccheck $t" "$SAN" --tool synccheck --error-exitcode 99 ./bin/$t --test-threads=1 {skips} $skip_nccl
      if [[ -n $nccl ]]; then
        # NCCL's own reports are suppressed: the reasons are in
        # nccl-suppressions.xml, beside this script, and NCCL_TESTS in
        # xtask/src/bundle.rs (memcheck's API reports are off here).
        supp=(--suppressions nccl-suppressions.xml)
        step "memcheck $t (nccl)" "$SAN" --tool memcheck --report-api-errors no "${{supp[@]}}" --leak-check full --error-exitcode 99 ./bin/$t --test-threads=1 $nccl
        for tool in racecheck initcheck synccheck; do
          step "$tool $t (nccl)" "$SAN" --tool $tool "${{supp[@]}}" --error-exitcode 99 ./bin/$t --test-threads=1 $nccl
        done
      fi
    done
{tail}"#,
        tests = tests.join(" "),
        tail = sanitize_tail(
            "./bin/gpu-core__memcheck_control --ignored --test-threads=1",
            "gpu-bundle"
        ),
        sanitized = sanitized.join(" "),
        skips = SANITIZER_SKIPS,
        by_name = BY_NAME.join(" "),
        nccl = NCCL_TESTS.join(" "),
    )
}

#[cfg(test)]
mod tests;
