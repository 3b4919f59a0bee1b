//! Planted-defect tests: small kernels (`fixtures/planted_*.cu`) compiled with
//! the real nvcc and read back with the real cuobjdump, each failing exactly
//! one check with its own message; and kiln's own kernels passing, with a
//! snapshot of their table. Skipped, saying so, when no toolkit is found.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cuda_build::resources::parse_ptxas_output;
use cuda_build::Manifest;
use cuda_sys::KernelInfo;

use super::budgets::Budgets;
use super::checks::Check;
use super::model::{ModuleFacts, Requested};
use super::report::{audit, Report};
use super::{facts, BUDGETS_FILE};
use crate::discovery::kiln_discovery;

const SKIP: &str = "skipped: no CUDA toolkit (run cargo xtask toolkit install)";

/// The fixtures, compiled once per test run (one nvcc invocation) for sm_80
/// SASS plus compute_80 PTX, and read back with cuobjdump.
struct Planted {
    modules: Vec<ModuleFacts>,
}

fn planted() -> Option<&'static Planted> {
    static PLANTED: OnceLock<Option<Planted>> = OnceLock::new();
    PLANTED.get_or_init(compile_fixtures).as_ref()
}

const FIXTURES: [&str; 3] = ["planted_clean", "planted_spill", "planted_double"];

fn compile_fixtures() -> Option<Planted> {
    let root = crate::workspace::root();
    let toolkit = kiln_discovery(&root)?.toolkit?;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fixtures = root.join("xtask/src/audit/fixtures");
    // With several inputs and no -o, nvcc writes NAME.fatbin for each into
    // the working directory.
    let out = Command::new(toolkit.tool("nvcc"))
        .current_dir(dir)
        .args(["-fatbin", "--resource-usage", "-O3"])
        .args(["-gencode", "arch=compute_80,code=[sm_80,compute_80]"])
        .args(FIXTURES.map(|f| fixtures.join(format!("{f}.cu"))))
        .output()
        .expect("nvcc runs");
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "nvcc failed:\n{log}");
    let ptxas = parse_ptxas_output(&log);
    let modules = FIXTURES
        .iter()
        .map(|name| {
            let ptxas = ptxas
                .iter()
                .filter(|k| k.kernel == *name)
                .cloned()
                .collect();
            let file = dir.join(format!("{name}.fatbin"));
            facts::read_module(&toolkit.tool("cuobjdump"), name, false, &file, ptxas).unwrap()
        })
        .collect();
    Some(Planted { modules })
}

impl Planted {
    fn module(&self, name: &str) -> ModuleFacts {
        self.modules
            .iter()
            .find(|m| m.name == name)
            .unwrap()
            .clone()
    }
}

/// kiln's own defaults, with a configurable floor and extra tables.
fn budgets(max_ptx_isa: &str, extra: &str) -> Budgets {
    Budgets::parse(
        &format!(
            "[driver]\nmin_cuda = \"13.0\"\nmax_ptx_isa = \"{max_ptx_isa}\"\n\
             [default]\nmax_registers = 64\nmax_shared_bytes = 4096\n{extra}"
        ),
        "planted.toml",
    )
    .unwrap()
}

/// `(const float *in, float *out, uint32_t n)`, as bindgen lays it out.
fn declared(name: &'static str) -> KernelInfo {
    KernelInfo {
        name,
        header: "planted.h",
        param_names: &["in", "out", "n"],
        param_layout: &[(8, 8), (8, 8), (4, 4)],
    }
}

fn sm_80() -> Requested {
    Requested {
        spec: "sm_80".into(),
        origin: "the test".into(),
        sass: vec!["sm_80".into()],
        ptx: vec!["compute_80".into()],
    }
}

fn run(requested: &Requested, module: &ModuleFacts, budgets: &Budgets, decl: KernelInfo) -> Report {
    audit(
        requested,
        None,
        std::slice::from_ref(module),
        budgets,
        Some(&[decl]),
    )
}

fn messages(report: &Report) -> Vec<&str> {
    report
        .violations
        .iter()
        .map(|v| v.message.as_str())
        .collect()
}

#[test]
fn planted_clean_kernel_passes() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    let report = run(
        &sm_80(),
        &p.module("planted_clean"),
        &budgets("9.0", ""),
        declared("planted_clean"),
    );
    assert_eq!(messages(&report), Vec::<&str>::new());
}

#[test]
fn planted_missing_arch_fails_coverage() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    // Built for sm_80 only; audited as kiln's default spec resolves.
    let requested = Requested {
        spec: "sm_80,sm_90".into(),
        sass: vec!["sm_80".into(), "sm_90".into()],
        ptx: vec!["compute_90".into()],
        ..sm_80()
    };
    let report = run(
        &requested,
        &p.module("planted_clean"),
        &budgets("9.0", ""),
        declared("planted_clean"),
    );
    assert_eq!(
        messages(&report),
        [
            "planted_clean sm_90: no SASS in the fat binary (arch spec `sm_80,sm_90` from the test)",
            "planted_clean compute_90: no PTX in the fat binary (arch spec `sm_80,sm_90` from the test)",
        ]
    );
}

#[test]
fn planted_spill_fails_resources() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    let module = p.module("planted_spill");
    let spilled = module.ptxas.iter().find(|k| k.arch == "sm_80").unwrap();
    assert!(
        spilled.spill_store_bytes > 0 && spilled.spill_load_bytes > 0,
        "the fixture no longer spills: {spilled:?}"
    );
    let report = run(
        &sm_80(),
        &module,
        &budgets("9.0", ""),
        declared("planted_spill"),
    );
    let expected = [
        format!("planted_spill sm_80: {} bytes spill stores > 0 allowed (planted.toml [default] max_spill_bytes)", spilled.spill_store_bytes),
        format!("planted_spill sm_80: {} bytes spill loads > 0 allowed (planted.toml [default] max_spill_bytes)", spilled.spill_load_bytes),
        format!("planted_spill sm_80: {} bytes local memory > 0 allowed (planted.toml [default] max_local_bytes)", spilled.stack_bytes),
    ];
    assert_eq!(messages(&report), expected);
    // An override that admits it is named instead of the default.
    let roomy = budgets(
        "9.0",
        "[kernel.planted_spill]\nmax_spill_bytes = 100000\nmax_local_bytes = 100000\n",
    );
    assert!(run(&sm_80(), &module, &roomy, declared("planted_spill")).passed());
}

#[test]
fn planted_ptx_above_the_driver_floor_fails() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    let module = p.module("planted_clean");
    let isa = module.ptx[0].1.version.unwrap();
    assert!(isa.major >= 8, "CUDA 13 emits PTX ISA 9.x, got {isa}");
    let report = run(
        &sm_80(),
        &module,
        &budgets("8.0", ""),
        declared("planted_clean"),
    );
    assert_eq!(
        messages(&report),
        [format!("planted_clean compute_80: PTX ISA {isa} > 8.0, which CUDA 13.0 drivers cannot JIT (planted.toml [driver] max_ptx_isa)")]
    );
    assert_eq!(report.rows[0].failed, [Check::DriverFloor]);
}

#[test]
fn planted_double_literal_fails_f64() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    let module = p.module("planted_double");
    let report = run(
        &sm_80(),
        &module,
        &budgets("9.0", ""),
        declared("planted_double"),
    );
    assert_eq!(
        messages(&report),
        ["planted_double compute_80: f64 instructions (cvt.f64.f32 mul.f64 cvt.rn.f32.f64); allow_f64 is false (planted.toml [default] allow_f64)"]
    );
    let allowed = budgets("9.0", "[kernel.planted_double]\nallow_f64 = true\n");
    assert!(run(&sm_80(), &module, &allowed, declared("planted_double")).passed());
}

#[test]
fn planted_param_mismatch_fails_abi() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    // The Rust side says `n: u64`; the kernel takes uint32_t.
    let wide_n = KernelInfo {
        param_layout: &[(8, 8), (8, 8), (8, 8)],
        ..declared("planted_clean")
    };
    let report = run(
        &sm_80(),
        &p.module("planted_clean"),
        &budgets("9.0", ""),
        wide_n,
    );
    assert_eq!(
        messages(&report),
        ["planted_clean: param 2 (n) is 4 bytes in PTX but 8 bytes in Rust (kernels/include/planted.h)"]
    );
}

/// Builds kiln's kernels for `sm_80,sm_90` (cuda-sys) in a target dir of
/// this test's own: the `cargo test` running it holds the workspace's. Rebuilds only what changed since the last run.
fn build_kiln_kernels(root: &Path) -> Manifest {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("xtask-audit-test");
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target)
        .env("KILN_CUDA_ARCHS", "sm_80,sm_90")
        .env("KILN_REQUIRE_CUDA", "1")
        .args(["build", "-p", "cuda-sys"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "building kiln's kernels with the toolkit failed ({}); its errors are above",
        output.status
    );
    let out_dir = crate::build::cuda_sys_out_dir(&output.stdout)
        .expect("cargo reports cuda-sys's build script output");
    Manifest::read(&out_dir.join(cuda_build::manifest::file_name("KILN"))).unwrap()
}

/// Audits a fresh build, so a kernel change is audited by the next test
/// run: skipped only without a toolkit, and a failed build is a failure.
#[test]
fn kiln_kernels_pass_the_audit() {
    let root = crate::workspace::root();
    if kiln_discovery(&root).and_then(|d| d.toolkit).is_none() {
        return eprintln!("{SKIP}");
    }
    let manifest = build_kiln_kernels(&root);
    assert!(
        manifest.cuda_enabled
            && manifest.sass == ["sm_80", "sm_90"]
            && manifest.ptx == ["compute_90"],
        "the build is not the sm_80,sm_90 GPU build asked for: {manifest:?}"
    );
    let budgets = Budgets::read(&root.join(BUDGETS_FILE), BUDGETS_FILE).unwrap();
    let mut report = super::audit_build(&root, &manifest, &budgets).unwrap();
    // Deterministic whichever way the build was asked for sm_80,sm_90.
    report.requested.spec = "sm_80,sm_90".into();
    report.requested.origin = "the build".into();
    let text = report.render();
    assert!(report.passed(), "{text}");
    insta::assert_snapshot!(text);
}
