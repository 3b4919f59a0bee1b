//! Which `[kernel.KEY]` tables of `kiln-audit.toml` govern a kernel: KEY is
//! one kernel's name, or a glob of names (`"affine_*"`) where it holds `*`,
//! `?` or `[` (no C identifier, mangled or not, does). A table whose KEY
//! names no kernel, and patterns that disagree about one, are reported.
//!
//! Precedence, per key: the kernel's own `[kernel.NAME]`, then the patterns
//! that match it (which must agree where several set the key, else a
//! violation), then `[default]`.

use std::collections::{BTreeMap, BTreeSet};

use super::budgets::{Budgets, Overrides};
use super::checks::{Check, Violation};
use super::keys::{is_pattern, shown_key};
use super::model::ModuleFacts;

impl Budgets {
    /// The tables that govern `kernel`, in precedence order: its own, then
    /// each pattern that matches it (in KEY order).
    pub(crate) fn tables_for<'a>(
        &'a self,
        kernel: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a Overrides)> + 'a {
        let own = self
            .kernel
            .get_key_value(kernel)
            .filter(|(k, _)| !is_pattern(k));
        let matching = self
            .patterns
            .iter()
            .filter(move |(_, p)| p.matches(kernel))
            .filter_map(|(k, _)| self.kernel.get_key_value(k));
        own.into_iter()
            .chain(matching)
            .map(|(k, o)| (k.as_str(), o))
    }
}

/// Every key a table may set, with its value as text (for comparing the
/// patterns that govern one kernel).
fn set_keys(o: &Overrides) -> [(&'static str, Option<String>); 6] {
    let text = |v: Option<u32>| v.map(|v| v.to_string());
    [
        ("max_registers", text(o.max_registers)),
        ("max_shared_bytes", text(o.max_shared_bytes)),
        ("max_spill_bytes", text(o.max_spill_bytes)),
        ("max_local_bytes", text(o.max_local_bytes)),
        ("allow_f64", o.allow_f64.map(|v| v.to_string())),
        ("by_name", o.by_name.map(|v| v.to_string())),
    ]
}

/// A key and the patterns that set it differently, with their values.
type Conflict<'a> = (&'a str, Vec<(&'a str, String)>);

/// `[kernel.KEY]` tables that name or match no kernel (stale budgets hide
/// nothing today but would silently apply to a future kernel), and
/// patterns that set one key differently for one kernel: one violation
/// each, a conflict once for all the kernels it concerns.
pub(crate) fn check_budget_names(budgets: &Budgets, modules: &[ModuleFacts]) -> Vec<Violation> {
    let kernels: BTreeSet<String> = modules.iter().flat_map(ModuleFacts::kernels).collect();
    let mut out: Vec<Violation> = budgets
        .kernel
        .keys()
        .filter(
            |key| match budgets.patterns.iter().find(|(k, _)| k == *key) {
                Some((_, p)) => !kernels.iter().any(|k| p.matches(k)),
                None => !kernels.contains(*key),
            },
        )
        .map(|key| {
            let (verb, fix) = if is_pattern(key) {
                ("matches", "remove or change the pattern")
            } else {
                ("names", "remove or rename the table")
            };
            Violation::new(Check::Budgets, "", Some(key), None).says(format!(
                "{} [kernel.{}] {verb} no kernel in the build; {fix}",
                budgets.origin,
                shown_key(key)
            ))
        })
        .collect();
    let mut conflicts: BTreeMap<Conflict<'_>, Vec<&str>> = BTreeMap::new();
    for kernel in &kernels {
        let tables: Vec<(&str, &Overrides)> = budgets.tables_for(kernel).collect();
        let own = tables.first().filter(|(k, _)| !is_pattern(k));
        for (i, (key, _)) in set_keys(&Overrides::default()).iter().enumerate() {
            if own.is_some_and(|(_, o)| set_keys(o)[i].1.is_some()) {
                continue;
            }
            let set: Vec<(&str, String)> = tables
                .iter()
                .filter(|(k, _)| is_pattern(k))
                .filter_map(|(k, o)| Some((*k, set_keys(o)[i].1.clone()?)))
                .collect();
            let values: BTreeSet<&String> = set.iter().map(|(_, v)| v).collect();
            if values.len() > 1 {
                conflicts.entry((key, set)).or_default().push(kernel);
            }
        }
    }
    for ((key, set), kernels) in conflicts {
        let tables: Vec<String> = set
            .iter()
            .map(|(k, v)| format!("[kernel.\"{k}\"] {key} = {v}"))
            .collect();
        let first = kernels[0];
        let more = match kernels.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        out.push(
            Violation::new(Check::Budgets, "", Some(first), None).says(format!(
                "{}: {} disagree for {first}{more}; add a [kernel.{first}] table or make the patterns disjoint",
                budgets.origin,
                tables.join(" and ")
            )),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::ptx::parse_ptx;

    const HEAD: &str = "[driver]\nmin_cuda = \"13.0\"\nmax_ptx_isa = \"9.0\"\n";

    fn budgets(tables: &str) -> Budgets {
        Budgets::parse(&format!("{HEAD}{tables}"), "b.toml").unwrap()
    }

    fn refusal(tables: &str) -> String {
        format!(
            "{:#}",
            Budgets::parse(&format!("{HEAD}{tables}"), "b.toml").unwrap_err()
        )
    }

    /// A fat binary with one empty kernel per name.
    fn module(kernels: &[&str]) -> ModuleFacts {
        let entries: String = kernels
            .iter()
            .map(|k| format!(".visible .entry {k}()\n{{\nret;\n}}\n"))
            .collect();
        let ptx = parse_ptx(&format!(".version 9.0\n.target sm_90\n{entries}")).unwrap();
        ModuleFacts {
            name: "m".into(),
            is_static: false,
            ptx: vec![("compute_90".into(), ptx)],
            sass: Vec::new(),
            ptx_members: [String::new()].into(),
            ptxas: Vec::new(),
            own_archs: None,
        }
    }

    fn names(b: &Budgets, kernels: &[&str]) -> Vec<String> {
        check_budget_names(b, &[module(kernels)])
            .into_iter()
            .map(|v| v.message)
            .collect()
    }

    #[test]
    fn a_pattern_governs_the_kernels_it_matches_and_a_name_wins() {
        let b = budgets(
            "[kernel.\"affine_*\"]\nby_name = true\nmax_registers = 32\n\
             [kernel.affine_f64]\nmax_registers = 96\n",
        );
        assert!(b.by_name("affine_f32").value);
        assert_eq!(
            b.by_name("affine_f32").source,
            "b.toml [kernel.\"affine_*\"] by_name"
        );
        assert!(!b.by_name("cast_f32").value);
        // The kernel's own table wins for the keys it sets, the pattern
        // still governs the others.
        let regs = b.max_registers("affine_f64");
        assert_eq!(
            (regs.value, regs.source.as_str()),
            (96, "b.toml [kernel.affine_f64] max_registers")
        );
        assert!(b.by_name("affine_f64").value);
        assert_eq!(
            names(&b, &["affine_f32", "affine_f64"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_crate_wide_default_by_name_covers_every_kernel() {
        let b = budgets("[default]\nby_name = true\n[kernel.k]\nby_name = false\n");
        assert!(b.by_name("anything").value);
        assert_eq!(b.by_name("anything").source, "b.toml [default] by_name");
        assert!(!b.by_name("k").value);
    }

    #[test]
    fn a_pattern_matching_everything_acts_as_the_default_for_its_keys() {
        let b = budgets("[kernel.\"*\"]\nby_name = true\n");
        assert!(b.by_name("x").value && b.by_name("_Z5scaleIfEvPKT_PS0_fj").value);
        assert_eq!(names(&b, &["x"]), Vec::<String>::new());
        // With no kernel in the build it matches none, and says so.
        assert_eq!(
            names(&b, &[]),
            ["b.toml [kernel.\"*\"] matches no kernel in the build; remove or change the pattern"]
        );
    }

    #[test]
    fn tables_naming_or_matching_no_kernel_are_one_violation_each() {
        let b = budgets(
            "[kernel.roomy]\nmax_registers = 128\n[kernel.\"gone_*\"]\nby_name = true\n\
             [kernel.\"k?\"]\nby_name = true\n",
        );
        assert_eq!(
            names(&b, &["k1", "k2"]),
            [
                "b.toml [kernel.\"gone_*\"] matches no kernel in the build; remove or change the pattern",
                "b.toml [kernel.roomy] names no kernel in the build; remove or rename the table",
            ]
        );
    }

    /// Found on examples/candle-patterns, a tree launched by name with no
    /// generated bindings: the audit read no declarations and skipped this
    /// check, so a stale glob and a misspelt kernel table passed.
    #[test]
    fn stale_tables_are_reported_when_no_declarations_are_read() {
        let b =
            budgets("[kernel.\"gone_*\"]\nallow_f64 = true\n[kernel.roomy]\nmax_registers = 9\n");
        let report = crate::audit::report::audit(
            &crate::audit::model::Requested {
                spec: "compute_90".into(),
                origin: "test".into(),
                sass: vec![],
                ptx: vec!["compute_90".into()],
            },
            None,
            &[module(&["k1"])],
            &b,
            crate::audit::Abi::NotRead("no bindings"),
        );
        let messages: Vec<&str> = report
            .violations
            .iter()
            .map(|v| v.message.as_str())
            .collect();
        assert_eq!(
            messages,
            [
                "b.toml [kernel.\"gone_*\"] matches no kernel in the build; remove or change the pattern",
                "b.toml [kernel.roomy] names no kernel in the build; remove or rename the table",
            ],
            "{}",
            report.render()
        );
    }

    #[test]
    fn overlapping_patterns_that_disagree_are_one_violation() {
        let b = budgets(
            "[kernel.\"affine_*\"]\nby_name = true\n[kernel.\"*_f32\"]\nby_name = false\n\
             [kernel.\"*\"]\nallow_f64 = false\n[kernel.\"a*\"]\nallow_f64 = false\n",
        );
        let kernels = ["affine_f32", "affine_f64", "affine_x_f32", "cast_f32"];
        assert_eq!(
            names(&b, &kernels),
            ["b.toml: [kernel.\"*_f32\"] by_name = false and [kernel.\"affine_*\"] by_name = true \
              disagree for affine_f32 and 1 more; add a [kernel.affine_f32] table or make the patterns disjoint"]
        );
        // The kernel's own table settles it.
        let settled = budgets(
            "[kernel.\"affine_*\"]\nby_name = true\n[kernel.\"*_f32\"]\nby_name = false\n\
             [kernel.affine_f32]\nby_name = true\n[kernel.affine_x_f32]\nby_name = true\n",
        );
        assert_eq!(names(&settled, &kernels), Vec::<String>::new());
    }

    #[test]
    fn an_empty_or_broken_pattern_is_refused_naming_the_table() {
        let empty = refusal("[kernel.\"\"]\nby_name = true\n");
        assert!(
            empty.starts_with("fix b.toml: [kernel.\"\"] names no kernel"),
            "{empty}"
        );
        let broken = refusal("[kernel.\"affine_[\"]\nby_name = true\n");
        assert!(
            broken.starts_with("fix b.toml: [kernel.\"affine_[\"] is not a glob"),
            "{broken}"
        );
        let misspelt = refusal("[kernel.\"a*\"]\nby_nme = true\n");
        assert!(misspelt.contains("by_nme"), "{misspelt}");
    }
}
