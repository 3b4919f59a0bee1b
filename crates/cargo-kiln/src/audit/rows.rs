//! The report's table rows: one per kernel per arch, with its resources,
//! its PTX ISA and the checks it failed.

use serde::Serialize;

use super::checks::{Check, Violation};
use super::model::{arch_number, resources, ModuleFacts, Requested, Resources};
use super::ptx::PtxIsa;

/// One row of the table: a kernel on one arch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Row {
    pub(crate) module: String,
    pub(crate) is_static: bool,
    pub(crate) kernel: String,
    /// `sm_90`.
    pub(crate) arch: String,
    /// SASS resources; `None` when there is no SASS for the arch.
    pub(crate) resources: Option<Resources>,
    /// The ISA of the PTX for the same arch number, if any is embedded.
    pub(crate) ptx_isa: Option<PtxIsa>,
    /// Checks that failed for this row, in [`Check`] order.
    pub(crate) failed: Vec<Check>,
}

/// Rows for every kernel on every arch the module has or was asked for.
pub(crate) fn rows(
    requested: &Requested,
    module: &ModuleFacts,
    violations: &[Violation],
) -> Vec<Row> {
    let mut numbers = module.arch_numbers();
    numbers.extend(
        requested
            .sass
            .iter()
            .chain(&requested.ptx)
            .filter_map(|a| arch_number(a)),
    );
    let mut out = Vec::new();
    for kernel in module.kernels() {
        for &n in &numbers {
            let sass_arch = module
                .sass
                .iter()
                .map(|f| f.arch.as_str())
                .find(|a| arch_number(a) == Some(n))
                .map_or_else(|| format!("sm_{n}"), str::to_string);
            let ptx_isa = module
                .ptx
                .iter()
                .find(|(a, m)| arch_number(a) == Some(n) && m.entry(&kernel).is_some())
                .and_then(|(_, m)| m.version);
            let mut failed: Vec<Check> = violations
                .iter()
                .filter(|v| v.concerns(&module.name, &kernel, n))
                .map(|v| v.check)
                .collect();
            failed.sort();
            failed.dedup();
            out.push(Row {
                module: module.name.clone(),
                is_static: module.is_static,
                kernel: kernel.clone(),
                resources: resources(module, &kernel, &sass_arch),
                arch: sass_arch,
                ptx_isa,
                failed,
            });
        }
    }
    out
}
