//! Tests of the audit's checks: planted PTX and ptxas facts against
//! budgets, one violation each.

use super::*;
use crate::audit::ptx::parse_ptx;
use crate::audit::ptx::PtxModule;
use crate::audit::rows::rows;
use crate::audit::sass::SassFunction;
use cuda_build::resources::KernelResources;

const BUDGETS: &str = r#"
[driver]
min_cuda = "13.0"
max_ptx_isa = "9.0"
[default]
max_registers = 64
max_shared_bytes = 4096
[kernel.roomy]
max_registers = 128
max_spill_bytes = 8
"#;

fn budgets() -> Budgets {
    Budgets::parse(BUDGETS, "ci/budgets.toml").unwrap()
}

fn ptx(version: &str, entries: &str) -> PtxModule {
    parse_ptx(&format!(".version {version}\n.target sm_90\n{entries}")).unwrap()
}

const VECTOR_ADD: &str = "
.visible .entry vector_add(
.param .u64 vector_add_param_0,
.param .u64 vector_add_param_1,
.param .u64 vector_add_param_2,
.param .u32 vector_add_param_3
)
{
ret;
}
";

fn elf(arch: &str, function: &str, registers: u32, stack: u32) -> SassFunction {
    SassFunction {
        arch: arch.into(),
        member: String::new(),
        function: function.into(),
        registers,
        stack_bytes: stack,
        local_bytes: 0,
        shared_bytes: 0,
    }
}

fn ptxas(arch: &str, kernel: &str, spill: u32) -> KernelResources {
    KernelResources {
        kernel: kernel.into(),
        arch: arch.into(),
        registers: 0,
        stack_bytes: 0,
        spill_store_bytes: spill,
        spill_load_bytes: spill,
        shared_bytes: 0,
        barriers: 0,
    }
}

fn module(ptx: Vec<(&str, PtxModule)>, sass: Vec<SassFunction>) -> ModuleFacts {
    ModuleFacts {
        name: "vector_add".into(),
        is_static: false,
        ptx_members: ptx.iter().map(|_| String::new()).collect(),
        ptx: ptx.into_iter().map(|(a, m)| (a.to_string(), m)).collect(),
        sass,
        ptxas: Vec::new(),
        own_archs: None,
    }
}

fn requested() -> Requested {
    Requested {
        spec: "sm_80,sm_90".into(),
        origin: "--arch".into(),
        sass: vec!["sm_80".into(), "sm_90".into()],
        ptx: vec!["compute_90".into()],
    }
}

/// The whole audit of one module, as the CLI runs it.
fn report_of(m: &ModuleFacts) -> crate::audit::Report {
    crate::audit::report::audit(
        &requested(),
        None,
        std::slice::from_ref(m),
        &budgets(),
        crate::audit::Abi::NotRead("test"),
    )
}

fn messages(v: Vec<Violation>) -> Vec<String> {
    v.into_iter().map(|v| v.message).collect()
}

fn vector_add_decl(layout: &[(usize, usize)]) -> Declaration {
    Declaration::new("vector_add", "vector_add.h", &["a", "b", "c", "n"], layout)
}

const VECTOR_ADD_LAYOUT: &[(usize, usize)] = &[(8, 8), (8, 8), (8, 8), (4, 4)];

#[test]
fn coverage_names_each_missing_arch() {
    let m = module(
        vec![("compute_80", ptx("9.0", VECTOR_ADD))],
        vec![elf("sm_80", "vector_add", 16, 0)],
    );
    assert_eq!(
        messages(check_coverage(&requested(), &m, &|_, _| false)),
        [
            "vector_add sm_90: no SASS in the fat binary (arch spec `sm_80,sm_90` from --arch)",
            "vector_add compute_90: no PTX in the fat binary (arch spec `sm_80,sm_90` from --arch)",
        ]
    );
    // Issue 42: codegen found the sm_90 pass leaves it out (`#if
    // __CUDA_ARCH__ < 900`): only the PTX is missing then.
    assert_eq!(
        messages(check_coverage(&requested(), &m, &|k, a| k == "vector_add" && a == 90)),
        Vec::<String>::new()
    );
    let sm_80_only = module(vec![], vec![elf("sm_90", "vector_add", 16, 0)]);
    assert_eq!(
        messages(check_coverage(&requested(), &sm_80_only, &|_, a| a == 80)),
        ["vector_add compute_90: no PTX in the fat binary (arch spec `sm_80,sm_90` from --arch)"]
    );
}

/// A module built for its own archs (`archs = "sm_90a"`, or `rdc`'s
/// SASS only) is held to those, not to the build's spec: found on
/// examples/kernel-trees, whose hopper and rdc modules failed coverage.
#[test]
fn a_module_with_its_own_archs_is_held_to_them() {
    let mut m = module(vec![], vec![elf("sm_90a", "vector_add", 16, 0)]);
    m.own_archs = Some(Requested {
        spec: "sm_90a".into(),
        origin: "module vector_add (its own archs in kiln.toml)".into(),
        sass: vec!["sm_90a".into()],
        ptx: vec![],
    });
    let report = report_of(&m);
    assert_eq!(
        report
            .violations
            .iter()
            .filter(|v| v.check == Check::Coverage)
            .count(),
        0,
        "{}",
        report.render()
    );
    m.sass = vec![elf("sm_80", "vector_add", 16, 0)];
    assert_eq!(
        messages(check_coverage(m.requested(&requested()), &m, &|_, _| false)),
        ["vector_add sm_90a: no SASS in the fat binary (arch spec `sm_90a` from module vector_add (its own archs in kiln.toml))"]
    );
}

#[test]
fn resources_name_the_budget_line() {
    let mut m = module(
        vec![],
        vec![
            elf("sm_90", "vector_add", 72, 16),
            elf("sm_90", "roomy", 72, 0),
        ],
    );
    m.ptxas = vec![ptxas("sm_90", "vector_add", 4), ptxas("sm_90", "roomy", 8)];
    assert_eq!(
        messages(check_resources(&budgets(), &m)),
        [
            "vector_add sm_90: 72 registers > 64 allowed (ci/budgets.toml [default] max_registers)",
            "vector_add sm_90: 4 bytes spill stores > 0 allowed (ci/budgets.toml [default] max_spill_bytes)",
            "vector_add sm_90: 4 bytes spill loads > 0 allowed (ci/budgets.toml [default] max_spill_bytes)",
            "vector_add sm_90: 16 bytes local memory > 0 allowed (ci/budgets.toml [default] max_local_bytes)",
        ]
    );
}

#[test]
fn driver_floor() {
    let m = module(vec![("compute_90", ptx("9.1", VECTOR_ADD))], vec![]);
    assert_eq!(
        messages(check_driver_floor(&budgets(), &m)),
        ["vector_add compute_90: PTX ISA 9.1 > 9.0, which CUDA 13.0 drivers cannot JIT (ci/budgets.toml [driver] max_ptx_isa)"]
    );
    let ok = module(vec![("compute_90", ptx("8.7", VECTOR_ADD))], vec![]);
    assert!(check_driver_floor(&budgets(), &ok).is_empty());
}

/// Issue 43: PTX above the floor is the toolkit's doing; the failure
/// line says so instead of only "fix the kernels, or the budgets".
#[test]
fn the_failure_names_the_toolkit_fixes_for_ptx_above_the_floor() {
    let audit = |isa: &str| {
        let m = module(vec![("compute_90", ptx(isa, VECTOR_ADD))], vec![]);
        crate::audit::failure(&report_of(&m), "kiln-audit.toml").to_string()
    };
    let newer = audit("9.5");
    assert!(
        newer.contains(
            "the 1 PTX ISA one(s) come from the toolkit: build with the pinned one \
             (`cargo kiln toolkit install`), SASS only for every target GPU (each arch \
             `-real`), or raise the floor in kiln-audit.toml [driver]"
        ),
        "{newer}"
    );
    assert!(!audit("9.0").contains("come from the toolkit"));
}

#[test]
fn f64_in_entries_called_funcs_and_stray_funcs() {
    let text = "
.func (.param .b64 r) twice(.param .b64 x)
{
add.f64 %fd1, %fd1, %fd1;
ret;
}
.func stray()
{
sqrt.rn.f64 %fd1, %fd1;
ret;
}
.visible .entry roomy()
{
call.uni (r), twice, (p);
ret;
}
.visible .entry half(.param .u64 p)
{
cvt.f64.f32 %fd1, %f1;
mul.f64 %fd2, %fd1, 0d3FE0000000000000;
call.uni (r), twice, (p);
ret;
}
";
    let mut b = budgets();
    b.kernel.get_mut("roomy").unwrap().allow_f64 = Some(true);
    let m = module(vec![("compute_90", ptx("9.0", text))], vec![]);
    assert_eq!(
        messages(check_f64(&b, &m)),
        [
            "half compute_90: f64 instructions (cvt.f64.f32 mul.f64), in .func twice (add.f64); allow_f64 is false (ci/budgets.toml [default] allow_f64)",
            "vector_add compute_90: f64 instructions in .func stray (sqrt.rn.f64), which no kernel calls directly; make it f32 or allow_f64 the kernels that reach it",
        ]
    );
}

#[test]
fn abi_mismatches_name_param_and_header() {
    let m = module(vec![("compute_90", ptx("9.0", VECTOR_ADD))], vec![]);
    assert!(check_abi(
        std::slice::from_ref(&m),
        &[vector_add_decl(VECTOR_ADD_LAYOUT)],
        &[],
        &|_| false
    )
    .is_empty());
    let narrow = vector_add_decl(&[(8, 8), (8, 8), (8, 8), (8, 8)]);
    let short = vector_add_decl(&[(8, 8), (8, 8), (8, 8)]);
    let unbuilt = Declaration::new("gone", "gone.h", &["a", "b", "c", "n"], VECTOR_ADD_LAYOUT);
    let desc = parse_ptx(
        ".visible .entry vector_add(.param .u64 a, .param .u64 b, .param .align 16 .b8 c[32], .param .u32 n)\n{\nret;\n}",
    )
    .unwrap();
    let misaligned = vector_add_decl(&[(8, 8), (8, 8), (32, 8), (4, 4)]);
    assert_eq!(
        abi_mismatches(m.ptx[0].1.entry("vector_add").unwrap(), &narrow),
        ["vector_add: param 3 (n) is 4 bytes in PTX but 8 bytes in Rust (vector_add.h)"]
    );
    assert_eq!(
        abi_mismatches(m.ptx[0].1.entry("vector_add").unwrap(), &short),
        ["vector_add: 4 params in PTX but 3 in Rust (vector_add.h)"]
    );
    assert_eq!(
        abi_mismatches(desc.entry("vector_add").unwrap(), &misaligned),
        ["vector_add: param 2 (c) is 16-byte aligned in PTX but 8-byte aligned in Rust (vector_add.h)"]
    );
    assert_eq!(
        messages(check_abi(std::slice::from_ref(&m), std::slice::from_ref(&unbuilt), &[], &|_| false)),
        [
            "vector_add: kernel in the vector_add fat binary has no Rust declaration (declare it with KILN_KERNEL in a header, or read it from its source with `cargo kiln codegen --sources`, then regenerate the bindings)",
            "gone: declared in gone.h but no fat binary has the kernel (define it in a .cu file of the kernels dir or remove the declaration)",
        ]
    );
    // `[kernel.vector_add] by_name = true`: launched by name, undeclared on purpose.
    assert_eq!(
        messages(check_abi(std::slice::from_ref(&m), std::slice::from_ref(&unbuilt), &[], &|k| k == "vector_add")),
        ["gone: declared in gone.h but no fat binary has the kernel (define it in a .cu file of the kernels dir or remove the declaration)"]
    );
    // Issue 42: a kernel codegen warned about is reported with codegen's
    // warning, once, not looped back to `cargo kiln codegen --sources`.
    let refused = [(
        "vector_add".to_string(),
        "k.cu:3: kernel `vector_add` gets no typed launch: parameter `m` has type `const bool *`, which has no Rust mapping (a struct or enum maps when a header of the include dir declares it); launch it by name".to_string(),
    )];
    assert_eq!(
        messages(check_abi(std::slice::from_ref(&m), &[], &refused, &|_| false)),
        ["vector_add: kernel in the vector_add fat binary has no Rust declaration, as codegen warned: k.cu:3: kernel `vector_add` gets no typed launch: parameter `m` has type `const bool *`, which has no Rust mapping (a struct or enum maps when a header of the include dir declares it); launch it by name; launched by name, mark it `by_name = true` in its [kernel.NAME] table of kiln-audit.toml"]
    );
    assert!(check_abi(&[m], &[], &refused, &|k| k == "vector_add").is_empty());
}

#[test]
fn rows_carry_their_failures() {
    let m = module(
        vec![("compute_90", ptx("9.0", VECTOR_ADD))],
        vec![elf("sm_80", "vector_add", 16, 0)],
    );
    let v = check_coverage(&requested(), &m, &|_, _| false);
    let rows = rows(&requested(), &m, &v);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].arch.as_str(), rows[0].failed.as_slice()),
        ("sm_80", &[][..])
    );
    assert_eq!(rows[0].resources.unwrap().registers, 16);
    assert_eq!(rows[1].arch, "sm_90");
    assert_eq!(rows[1].failed, [Check::Coverage]);
    assert_eq!(rows[1].ptx_isa.unwrap().to_string(), "9.0");
    assert!(rows[1].resources.is_none());
}
