//! Planted-defect tests: small kernels (`fixtures/planted_*.cu`) compiled with
//! the real nvcc and read back with the real cuobjdump, each failing exactly
//! one check with its own message. Skipped, saying so, when no toolkit is
//! found (kiln's CI installs one: `cargo kiln toolkit install`).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use cuda_build::resources::parse_ptxas_output;

use super::bindings::{Declaration, Declarations};
use super::budgets::Budgets;
use super::checks::Check;
use super::facts;
use super::model::{ModuleFacts, Requested};
use super::report::{audit, Abi, Report};
use crate::project::discovery_with_local;

const SKIP: &str = "skipped: no CUDA toolkit (run cargo kiln toolkit install)";

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
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The toolkit kiln's workspace installs, two levels up.
    let toolkit = discovery_with_local(&here.join("../../target/cuda-toolkit")).toolkit?;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fixtures = here.join("src/audit/fixtures");
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
fn declared(name: &str) -> Declaration {
    with_layout(name, &[(8, 8), (8, 8), (4, 4)])
}

fn with_layout(name: &str, layout: &[(usize, usize)]) -> Declaration {
    Declaration::new(name, "planted.h", &["in", "out", "n"], layout)
}

fn sm_80() -> Requested {
    Requested {
        spec: "sm_80".into(),
        origin: "the test".into(),
        sass: vec!["sm_80".into()],
        ptx: vec!["compute_80".into()],
    }
}

fn run(
    requested: &Requested,
    module: &ModuleFacts,
    budgets: &Budgets,
    decl: Declaration,
) -> Report {
    let declared = Declarations {
        kernels: vec![decl],
        unreadable: Vec::new(),
    };
    audit(
        requested,
        None,
        std::slice::from_ref(module),
        budgets,
        Abi::Declared(&declared),
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
    let wide_n = with_layout("planted_clean", &[(8, 8), (8, 8), (8, 8)]);
    let report = run(
        &sm_80(),
        &p.module("planted_clean"),
        &budgets("9.0", ""),
        wide_n,
    );
    assert_eq!(
        messages(&report),
        ["planted_clean: param 2 (n) is 4 bytes in PTX but 8 bytes in Rust (planted.h)"]
    );
}
