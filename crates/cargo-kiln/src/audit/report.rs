//! The audit's result: rows, violations and what was not audited; runs every
//! check over the facts, and renders the table (deterministic: no paths, no
//! timings, so that it can be snapshotted) and the JSON.

use serde::Serialize;

use super::bindings::Declarations;
use super::budgets::Budgets;
use super::checks::{self, Violation};
use super::model::{ModuleFacts, Requested, Resources};
use super::rows::{rows, Row};
use super::tables;

/// Where the ABI check's Rust declarations come from.
#[derive(Debug, Clone, Copy)]
pub enum Abi<'a> {
    /// Read from the crate's generated bindings (or given by the caller).
    Declared(&'a Declarations),
    /// None read; the reason is reported as not audited.
    NotRead(&'a str),
}

/// Everything the audit found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub(crate) requested: Requested,
    /// `13.0.88`, when known.
    pub(crate) toolkit: Option<String>,
    pub(crate) min_cuda: String,
    pub(crate) max_ptx_isa: String,
    pub(crate) rows: Vec<Row>,
    pub(crate) violations: Vec<Violation>,
    /// What the audit could not check, one line each.
    pub(crate) not_audited: Vec<String>,
}

/// Runs the five checks (and the stale-budget check) over every module.
pub(crate) fn audit(
    requested: &Requested,
    toolkit: Option<String>,
    modules: &[ModuleFacts],
    budgets: &Budgets,
    declared: Abi<'_>,
) -> Report {
    // The `toolkit."MAJOR.MINOR"` tables of the toolkit that built them.
    let budgets = &budgets.for_toolkit(toolkit.as_deref());
    let mut violations = Vec::new();
    let mut not_audited = Vec::new();
    let absent = |kernel: &str, arch: u32| match &declared {
        Abi::Declared(d) => d.absent_at(kernel, arch),
        Abi::NotRead(_) => false,
    };
    for module in modules {
        violations.extend(checks::check_coverage(
            module.requested(requested),
            module,
            &absent,
        ));
        violations.extend(checks::check_resources(budgets, module));
        violations.extend(checks::check_driver_floor(budgets, module));
        violations.extend(checks::check_f64(budgets, module));
        if module.ptx.is_empty() {
            // Parameters and f64 are read from PTX; SASS alone carries neither
            // in a form this audit reads.
            not_audited.push(format!(
                "{}: no PTX in the binary, so its ABI and f64 were not checked \
                 (audit a spec with a virtual arch, e.g. sm_80,sm_90)",
                module.name
            ));
        }
        if module.is_static {
            not_audited.push(format!(
                "{}: static library; ABI not audited (its kernels are launched from its host code, \
                 with no Rust declaration); spills not audited and smem read from the ELF (its nvcc \
                 build keeps no ptxas report; on sm_90 the ELF adds the 1 KiB system reserve)",
                module.name
            ));
        }
    }
    match declared {
        Abi::Declared(declared) => {
            let undeclared_ok = |kernel: &str| budgets.by_name(kernel).value;
            violations.extend(checks::check_abi(
                modules,
                &declared.kernels,
                &declared.refused,
                &undeclared_ok,
            ));
            not_audited.extend(declared.unreadable.iter().cloned());
        }
        Abi::NotRead(why) => not_audited.push(format!("ABI not audited: {why}")),
    }
    // The tables govern budgets and f64 too, not the ABI alone: a stale or
    // conflicting table is reported whether or not declarations were read
    // (a tree launched by name has none, and its globs were unchecked).
    violations.extend(tables::check_budget_names(budgets, modules));
    // A static library's members each carry their own PTX, so a check over
    // PTX (driver floor, an uncalled f64 `.func` from a shared header) can
    // find one defect once per member: the same line is reported once.
    let mut seen = std::collections::BTreeSet::new();
    violations.retain(|v| seen.insert((v.module.clone(), v.message.clone())));
    let rows = modules
        .iter()
        .flat_map(|m| rows(m.requested(requested), m, &violations))
        .collect();
    Report {
        requested: requested.clone(),
        toolkit,
        min_cuda: budgets.driver.min_cuda.clone(),
        max_ptx_isa: budgets.driver.max_ptx_isa.to_string(),
        rows,
        violations,
        not_audited,
    }
}

impl Report {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many violations there are.
    pub fn violation_count(&self) -> usize {
        self.violations.len()
    }

    /// Rewrites how the archs were asked for (snapshots and comparisons of
    /// builds asked for the same archs in different ways).
    pub fn relabel_request(&mut self, spec: &str, origin: &str) {
        self.requested.spec = spec.to_string();
        self.requested.origin = origin.to_string();
    }

    /// The table, then the violations and what was not audited.
    pub fn render(&self) -> String {
        let r = &self.requested;
        let mut text = format!(
            "ptx-audit: arch spec `{}` from {} (SASS {}; PTX {}); {}driver floor CUDA {} (PTX ISA <= {})\n",
            r.spec,
            r.origin,
            list_or_none(&r.sass),
            list_or_none(&r.ptx),
            self.toolkit
                .as_ref()
                .map_or(String::new(), |v| format!("CUDA {v}; ")),
            self.min_cuda,
            self.max_ptx_isa,
        );
        let header = [
            "module",
            "kernel",
            "arch",
            "regs",
            "spill st/ld",
            "smem",
            "lmem",
            "PTX",
            "verdict",
        ];
        let mut lines: Vec<[String; 9]> = vec![header.map(str::to_string)];
        lines.extend(self.table_rows());
        let widths: Vec<usize> = (0..9)
            .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
            .collect();
        for line in &lines {
            let mut out = String::new();
            for (c, cell) in line.iter().enumerate() {
                // Names left-aligned, numbers right-aligned.
                let cell = if (3..7).contains(&c) {
                    format!("{cell:>w$}", w = widths[c])
                } else {
                    format!("{cell:<w$}", w = widths[c])
                };
                out.push_str(&cell);
                out.push_str("  ");
            }
            text.push_str(out.trim_end());
            text.push('\n');
        }
        for note in &self.not_audited {
            text.push_str(&format!("not audited: {note}\n"));
        }
        if self.passed() {
            text.push_str("ptx-audit: every check passed\n");
        } else {
            for v in &self.violations {
                text.push_str(&format!("violation: {}\n", v.message));
            }
        }
        text
    }

    /// One line per row; a static library's kernels (CUB's, with long
    /// mangled names) are folded into one line per arch with their maxima.
    fn table_rows(&self) -> Vec<[String; 9]> {
        let mut out = Vec::new();
        let mut folded: Vec<(&str, &str)> = Vec::new();
        for row in &self.rows {
            if !row.is_static {
                out.push(cells(row, &row.kernel, std::slice::from_ref(row)));
                continue;
            }
            if folded.contains(&(&row.module, &row.arch)) {
                continue;
            }
            folded.push((&row.module, &row.arch));
            let same: Vec<Row> = self
                .rows
                .iter()
                .filter(|r| r.module == row.module && r.arch == row.arch)
                .cloned()
                .collect();
            let label = format!("({} kernels, max)", same.len());
            out.push(cells(row, &label, &same));
        }
        out
    }
}

fn cells(first: &Row, kernel: &str, rows: &[Row]) -> [String; 9] {
    let res: Vec<_> = rows.iter().filter_map(|r| r.resources).collect();
    let max = |f: &dyn Fn(&Resources) -> u32| res.iter().map(f).max();
    let num = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    let spill = |f: &dyn Fn(&Resources) -> Option<u32>| {
        res.iter()
            .map(f)
            .collect::<Option<Vec<u32>>>()
            .and_then(|v| v.into_iter().max())
    };
    let spills = if res.is_empty() {
        "-".to_string()
    } else {
        format!(
            "{}/{}",
            num(spill(&|r| r.spill_store_bytes)),
            num(spill(&|r| r.spill_load_bytes))
        )
    };
    let mut failed: Vec<_> = rows.iter().flat_map(|r| r.failed.iter().copied()).collect();
    failed.sort();
    failed.dedup();
    let verdict = if failed.is_empty() {
        "ok".to_string()
    } else {
        format!(
            "FAIL {}",
            failed
                .iter()
                .map(|c| c.word())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    [
        first.module.clone(),
        kernel.to_string(),
        first.arch.clone(),
        num(max(&|r| r.registers)),
        spills,
        num(max(&|r| r.shared_bytes)),
        num(max(&|r| r.local_bytes)),
        rows.iter()
            .find_map(|r| r.ptx_isa)
            .map_or("-".to_string(), |v| v.to_string()),
        verdict,
    ]
}

fn list_or_none(list: &[String]) -> String {
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(",")
    }
}
