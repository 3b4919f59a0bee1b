//! Planted-defect tests: small kernels (`fixtures/planted_*.cu`) compiled with
//! the real nvcc and read back with the real cuobjdump, each failing exactly
//! one check with its own message, also as the second member of a static
//! library. Skipped, saying so, when no toolkit is found (kiln's CI installs
//! one: `cargo kiln toolkit install`); under `KILN_REQUIRE_TOOLKIT=1` a
//! missing toolkit fails them instead.

use std::ffi::{OsStr, OsString};
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
use cuda_build::toolkit::Toolkit;

const SKIP: &str = "skipped: no CUDA toolkit (run cargo kiln toolkit install)";

/// The fixtures, compiled once per test run (one nvcc invocation) for sm_80
/// SASS plus compute_80 PTX, and read back with cuobjdump.
struct Planted {
    modules: Vec<ModuleFacts>,
    /// Static libraries of two members, by name (see [`compile_static`]).
    statics: Vec<ModuleFacts>,
}

fn planted() -> Option<&'static Planted> {
    static PLANTED: OnceLock<Option<Planted>> = OnceLock::new();
    PLANTED.get_or_init(compile_fixtures).as_ref()
}

const FIXTURES: [&str; 3] = ["planted_clean", "planted_spill", "planted_double"];

/// SASS plus PTX for sm_80, and SASS alone (a member missing its PTX).
const FULL: &str = "arch=compute_80,code=[sm_80,compute_80]";
const SASS_ONLY: &str = "arch=compute_80,code=sm_80";

/// nvcc with `args` in `dir`; its output (the `--resource-usage` report).
fn nvcc(toolkit: &Toolkit, dir: &Path, args: &[&OsStr]) -> String {
    let out = Command::new(toolkit.tool("nvcc"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("nvcc runs");
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "nvcc failed:\n{log}");
    log
}

fn compile_fixtures() -> Option<Planted> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The toolkit kiln's workspace installs, two levels up.
    let Some(toolkit) = discovery_with_local(&here.join("../../target/cuda-toolkit")).toolkit
    else {
        assert!(
            std::env::var_os("KILN_REQUIRE_TOOLKIT").is_none_or(|v| v != "1"),
            "KILN_REQUIRE_TOOLKIT=1 but no CUDA toolkit was found (run cargo kiln toolkit install)"
        );
        return None;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fixtures = here.join("src/audit/fixtures");
    let source = |name: &str| fixtures.join(format!("{name}.cu")).into_os_string();
    // With several inputs and no -o, nvcc writes NAME.fatbin for each into
    // the working directory.
    let mut args: Vec<OsString> = ["-fatbin", "--resource-usage", "-O3", "-gencode", FULL]
        .map(OsString::from)
        .into();
    args.extend(FIXTURES.map(source));
    let log = nvcc(
        &toolkit,
        dir,
        &args.iter().map(OsString::as_os_str).collect::<Vec<_>>(),
    );
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
    let statics = STATICS
        .iter()
        .map(|(name, second)| compile_static(&toolkit, dir, &source, name, second))
        .collect();
    Some(Planted { modules, statics })
}

/// Static libraries of two members, `planted_clean.o` (SASS and PTX) then
/// `planted_double.o` built with the gencode given: as `[modules]` with
/// `link = "static"` builds one from several sources.
const STATICS: [(&str, &str); 2] = [("two_members", FULL), ("second_sass_only", SASS_ONLY)];

fn compile_static(
    toolkit: &Toolkit,
    dir: &Path,
    source: &dyn Fn(&str) -> OsString,
    name: &str,
    second: &str,
) -> ModuleFacts {
    let objects = [("planted_clean", FULL), ("planted_double", second)].map(|(cu, gencode)| {
        let object = format!("{name}_{cu}.o");
        let source = source(cu);
        let args = [
            "-c".as_ref(),
            "-O3".as_ref(),
            "-gencode".as_ref(),
            gencode.as_ref(),
            source.as_os_str(),
            "-o".as_ref(),
            object.as_ref(),
        ];
        nvcc(toolkit, dir, &args);
        object
    });
    let lib = format!("lib{name}.a");
    let args = [
        "-lib".as_ref(),
        objects[0].as_ref(),
        objects[1].as_ref(),
        "-o".as_ref(),
        lib.as_ref(),
    ];
    nvcc(toolkit, dir, &args);
    // A static build keeps no ptxas report, as the real one.
    facts::read_module(
        &toolkit.tool("cuobjdump"),
        name,
        true,
        &dir.join(lib),
        Vec::new(),
    )
    .unwrap()
}

impl Planted {
    fn module(&self, name: &str) -> ModuleFacts {
        self.modules
            .iter()
            .chain(&self.statics)
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
        refused: Vec::new(),
        absent_at: Vec::new(),
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

/// Both members' kernels for a requested spec, with no declarations wanted
/// (a static library's ABI is not audited).
fn run_static(module: &ModuleFacts) -> Report {
    audit(
        &sm_80(),
        None,
        std::slice::from_ref(module),
        &budgets("9.0", ""),
        Abi::NotRead("static"),
    )
}

#[test]
fn every_member_of_a_static_library_is_audited() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    let module = p.module("two_members");
    assert_eq!(module.kernels(), ["planted_clean", "planted_double"]);
    // The second member's PTX is read as well as the first's: its kernel has
    // PTX (no false `no PTX`), and the f64 planted in it is found.
    assert_eq!(
        messages(&run_static(&module)),
        ["planted_double compute_80: f64 instructions (cvt.f64.f32 mul.f64 cvt.rn.f32.f64); allow_f64 is false (planted.toml [default] allow_f64)"]
    );
    // Both members' PTX is above a floor of 8.0: one line, not one per member.
    let low_floor = audit(
        &sm_80(),
        None,
        std::slice::from_ref(&module),
        &budgets("8.0", "[kernel.planted_double]\nallow_f64 = true\n"),
        Abi::NotRead("static"),
    );
    let isa = module.ptx[0].1.version.unwrap();
    assert_eq!(
        messages(&low_floor),
        [format!("two_members compute_80: PTX ISA {isa} > 8.0, which CUDA 13.0 drivers cannot JIT (planted.toml [driver] max_ptx_isa)")]
    );
}

#[test]
fn a_static_librarys_second_member_without_ptx_fails_coverage() {
    let Some(p) = planted() else {
        return eprintln!("{SKIP}");
    };
    let report = run_static(&p.module("second_sass_only"));
    assert_eq!(
        messages(&report),
        ["planted_double compute_80: no PTX in the fat binary (arch spec `sm_80` from the test)"]
    );
    let failed: Vec<(&str, &[Check])> = report
        .rows
        .iter()
        .map(|r| (r.kernel.as_str(), r.failed.as_slice()))
        .collect();
    assert_eq!(
        failed,
        [
            ("planted_clean", &[][..]),
            ("planted_double", &[Check::Coverage][..])
        ]
    );
}
