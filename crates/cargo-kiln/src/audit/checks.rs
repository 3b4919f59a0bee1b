//! The five checks (coverage, resources, driver floor, f64, ABI) as pure
//! functions over what was read from the fat binaries, the budgets and the
//! Rust declarations, each returning its violations.

use std::collections::BTreeSet;

use serde::Serialize;

use super::bindings::Declaration;
use super::budgets::{Budgets, Limit};
use super::model::{arch_number, resources, ModuleFacts, Requested};
use super::ptx::PtxFunction;

/// Which check a violation comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Check {
    Coverage,
    Resources,
    DriverFloor,
    F64,
    Abi,
    Budgets,
}

impl Check {
    /// The word the table's verdict column uses.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Check::Coverage => "missing",
            Check::Resources => "budget",
            Check::DriverFloor => "ptx-isa",
            Check::F64 => "f64",
            Check::Abi => "abi",
            Check::Budgets => "budgets",
        }
    }
}

/// One failed check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Violation {
    pub(crate) check: Check,
    pub(crate) module: String,
    /// `None`: the whole module (or no module's kernel).
    pub(crate) kernel: Option<String>,
    /// `None`: every arch.
    pub(crate) arch: Option<String>,
    /// One line naming the kernel, the arch, the numbers and the governing
    /// budget line or header.
    pub(crate) message: String,
}

impl Violation {
    pub(crate) fn new(
        check: Check,
        module: &str,
        kernel: Option<&str>,
        arch: Option<&str>,
    ) -> Self {
        Self {
            check,
            module: module.to_string(),
            kernel: kernel.map(str::to_string),
            arch: arch.map(str::to_string),
            message: String::new(),
        }
    }

    pub(crate) fn says(mut self, message: String) -> Self {
        self.message = message;
        self
    }

    /// Whether this violation concerns the row (module, kernel, arch number).
    pub(crate) fn concerns(&self, module: &str, kernel: &str, arch: u32) -> bool {
        self.module == module
            && self.kernel.as_deref().is_none_or(|k| k == kernel)
            && self
                .arch
                .as_deref()
                .is_none_or(|a| arch_number(a) == Some(arch))
    }
}

/// 1. Every kernel has SASS for every requested real arch and PTX for every
///    requested virtual arch, but where `absent(kernel, arch number)` says
///    codegen found the arch's device pass leaves it out (`#if
///    __CUDA_ARCH__ >= 890`).
pub(crate) fn check_coverage(
    requested: &Requested,
    module: &ModuleFacts,
    absent: &dyn Fn(&str, u32) -> bool,
) -> Vec<Violation> {
    let why = format!("arch spec `{}` from {}", requested.spec, requested.origin);
    let mut out = Vec::new();
    let left_out = |kernel: &str, arch: &str| arch_number(arch).is_some_and(|n| absent(kernel, n));
    for kernel in module.kernels() {
        for arch in &requested.sass {
            if module.sass_of(&kernel, arch).is_none() && !left_out(&kernel, arch) {
                out.push(
                    Violation::new(Check::Coverage, &module.name, Some(&kernel), Some(arch)).says(
                        format!("{kernel} {arch}: no SASS in the fat binary ({why})"),
                    ),
                );
            }
        }
        for arch in &requested.ptx {
            if module.ptx_entry(&kernel, arch).is_none() && !left_out(&kernel, arch) {
                out.push(
                    Violation::new(Check::Coverage, &module.name, Some(&kernel), Some(arch))
                        .says(format!("{kernel} {arch}: no PTX in the fat binary ({why})")),
                );
            }
        }
    }
    out
}

/// 2. Registers, spills, local and static shared memory within budget.
pub(crate) fn check_resources(budgets: &Budgets, module: &ModuleFacts) -> Vec<Violation> {
    let mut out = Vec::new();
    for kernel in module.kernels() {
        let mut archs: Vec<&str> = module.sass.iter().map(|f| f.arch.as_str()).collect();
        archs.sort();
        archs.dedup();
        for arch in archs {
            let Some(r) = resources(module, &kernel, arch) else {
                continue;
            };
            let mut over = |what: &str, value: Option<u32>, limit: Limit<u32>| {
                if let Some(value) = value.filter(|v| *v > limit.value) {
                    out.push(
                        Violation::new(Check::Resources, &module.name, Some(&kernel), Some(arch))
                            .says(format!(
                                "{kernel} {arch}: {value} {what} > {} allowed ({})",
                                limit.value, limit.source
                            )),
                    );
                }
            };
            over(
                "registers",
                Some(r.registers),
                budgets.max_registers(&kernel),
            );
            over(
                "bytes spill stores",
                r.spill_store_bytes,
                budgets.max_spill_bytes(&kernel),
            );
            over(
                "bytes spill loads",
                r.spill_load_bytes,
                budgets.max_spill_bytes(&kernel),
            );
            over(
                "bytes local memory",
                Some(r.local_bytes),
                budgets.max_local_bytes(&kernel),
            );
            over(
                "bytes static shared memory",
                Some(r.shared_bytes),
                budgets.max_shared_bytes(&kernel),
            );
        }
    }
    out
}

/// 3. No PTX newer than the oldest supported driver can JIT.
pub(crate) fn check_driver_floor(budgets: &Budgets, module: &ModuleFacts) -> Vec<Violation> {
    let floor = budgets.driver.max_ptx_isa;
    let mut out = Vec::new();
    for (arch, ptx) in &module.ptx {
        let v = Violation::new(Check::DriverFloor, &module.name, None, Some(arch));
        match ptx.version {
            Some(isa) if isa > floor => out.push(v.says(format!(
                "{} {arch}: PTX ISA {isa} > {floor}, which CUDA {} drivers cannot JIT ({})",
                module.name,
                budgets.driver.min_cuda,
                budgets.ptx_isa_source()
            ))),
            Some(_) => {}
            None => out.push(v.says(format!(
                "{} {arch}: PTX without a .version directive (cuobjdump --dump-ptx shows it)",
                module.name
            ))),
        }
    }
    out
}

/// 4. No f64 instruction in a kernel (or a `.func` it calls) unless the
///    kernel is allowed doubles; and none in a `.func` no kernel calls.
pub(crate) fn check_f64(budgets: &Budgets, module: &ModuleFacts) -> Vec<Violation> {
    let mut out = Vec::new();
    for (arch, ptx) in &module.ptx {
        let mut reached: BTreeSet<&str> = BTreeSet::new();
        for entry in ptx
            .functions
            .iter()
            .filter(|f| f.kind == super::ptx::FunctionKind::Entry)
        {
            let callees = ptx.callees(entry);
            reached.extend(callees.iter().map(|f| f.name.as_str()));
            let allow = budgets.allow_f64(&entry.name);
            if allow.value {
                continue;
            }
            let mut places = Vec::new();
            if !entry.f64_opcodes.is_empty() {
                places.push(f64_place(entry, None));
            }
            for func in callees.iter().filter(|f| !f.f64_opcodes.is_empty()) {
                places.push(f64_place(func, Some(&entry.name)));
            }
            if !places.is_empty() {
                out.push(
                    Violation::new(Check::F64, &module.name, Some(&entry.name), Some(arch)).says(
                        format!(
                            "{} {arch}: f64 instructions {}; allow_f64 is false ({})",
                            entry.name,
                            places.join(", "),
                            allow.source
                        ),
                    ),
                );
            }
        }
        for func in ptx.functions.iter().filter(|f| {
            f.kind == super::ptx::FunctionKind::Func
                && !f.f64_opcodes.is_empty()
                && !reached.contains(f.name.as_str())
        }) {
            out.push(
                Violation::new(Check::F64, &module.name, None, Some(arch)).says(format!(
                    "{} {arch}: f64 instructions in .func {} ({}), which no kernel calls directly; \
                     make it f32 or allow_f64 the kernels that reach it",
                    module.name,
                    func.name,
                    func.f64_opcodes.join(" ")
                )),
            );
        }
    }
    out
}

fn f64_place(function: &PtxFunction, called_from: Option<&str>) -> String {
    let opcodes = function.f64_opcodes.join(" ");
    match called_from {
        None => format!("({opcodes})"),
        Some(_) => format!("in .func {} ({opcodes})", function.name),
    }
}

/// 5. Each fat-binary kernel's PTX parameters match its Rust declaration, and
///    every declaration has a kernel.
///
/// A kernel for which `by_name` answers true (`[kernel.NAME] by_name =
/// true`) may have no declaration; one that codegen left without a marker
/// (`refused`: symbol and codegen's warning) is reported with that warning,
/// not with advice to run codegen again.
pub(crate) fn check_abi(
    modules: &[ModuleFacts],
    declared: &[Declaration],
    refused: &[(String, String)],
    by_name: &dyn Fn(&str) -> bool,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut found: BTreeSet<&str> = BTreeSet::new();
    for module in modules.iter().filter(|m| !m.is_static) {
        for kernel in module.kernels() {
            let Some(decl) = declared.iter().find(|d| d.name == kernel) else {
                if by_name(&kernel) {
                    continue;
                }
                if let Some((_, warning)) = refused.iter().find(|(symbol, _)| *symbol == kernel) {
                    out.push(
                        Violation::new(Check::Abi, &module.name, Some(&kernel), None).says(format!(
                            "{kernel}: kernel in the {} fat binary has no Rust declaration, as codegen warned: {warning}; \
                             launched by name, mark it `by_name = true` in its [kernel.NAME] table of kiln-audit.toml",
                            module.name
                        )),
                    );
                    continue;
                }
                out.push(
                    Violation::new(Check::Abi, &module.name, Some(&kernel), None).says(format!(
                        "{kernel}: kernel in the {} fat binary has no Rust declaration \
                         (declare it with KILN_KERNEL in a header, or read it from its source with `cargo kiln codegen --sources`, then regenerate the bindings)",
                        module.name
                    )),
                );
                continue;
            };
            found.insert(&decl.name);
            // Every arch's PTX is checked; one message per distinct mismatch.
            let mut messages: Vec<String> = Vec::new();
            for (_, ptx) in &module.ptx {
                if let Some(entry) = ptx.entry(&kernel) {
                    for m in abi_mismatches(entry, decl) {
                        if !messages.contains(&m) {
                            messages.push(m);
                        }
                    }
                }
            }
            out.extend(
                messages
                    .into_iter()
                    .map(|m| Violation::new(Check::Abi, &module.name, Some(&kernel), None).says(m)),
            );
        }
    }
    for decl in declared.iter().filter(|d| !found.contains(d.name.as_str())) {
        out.push(
            Violation::new(Check::Abi, "", Some(&decl.name), None).says(format!(
                "{}: declared in {} but no fat binary has the kernel \
                 (define it in a .cu file of the kernels dir or remove the declaration)",
                decl.name, decl.header
            )),
        );
    }
    out
}

/// Differences between one PTX entry's `.param`s and a declaration.
pub(crate) fn abi_mismatches(entry: &PtxFunction, decl: &Declaration) -> Vec<String> {
    let header = &decl.header;
    let name = &entry.name;
    if entry.params.len() != decl.param_layout.len() {
        return vec![format!(
            "{name}: {} params in PTX but {} in Rust ({header})",
            entry.params.len(),
            decl.param_layout.len()
        )];
    }
    let mut out = Vec::new();
    for (i, (ptx, &(size, align))) in entry.params.iter().zip(&decl.param_layout).enumerate() {
        let param = match decl.param_names.get(i) {
            Some(n) => format!("param {i} ({n})"),
            None => format!("param {i}"),
        };
        if ptx.size != size {
            out.push(format!(
                "{name}: {param} is {} bytes in PTX but {size} bytes in Rust ({header})",
                ptx.size
            ));
        } else if ptx.align != align {
            out.push(format!(
                "{name}: {param} is {}-byte aligned in PTX but {align}-byte aligned in Rust ({header})",
                ptx.align
            ));
        }
    }
    out
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
