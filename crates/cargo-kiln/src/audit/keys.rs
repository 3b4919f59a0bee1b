//! The KEYs of `kiln-audit.toml`'s `[kernel.KEY]` tables: one kernel's
//! name, or a glob of names where KEY holds `*`, `?` or `[` (no C
//! identifier, mangled or not, does). A leaf: the budgets that read the
//! tables and the resolution that applies them (`tables.rs`) both use it.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

/// Whether a table's KEY is a glob rather than one kernel's name.
pub(crate) fn is_pattern(key: &str) -> bool {
    key.contains(['*', '?', '['])
}

/// The KEY as the file spells it: a glob needs TOML's quotes.
pub(crate) fn shown_key(key: &str) -> String {
    if is_pattern(key) {
        format!("\"{key}\"")
    } else {
        key.to_string()
    }
}

/// The tables' globs, compiled; an empty KEY or a glob that does not
/// compile is refused, naming the table.
pub(crate) fn compile<V>(
    tables: &BTreeMap<String, V>,
    origin: &str,
) -> Result<Vec<(String, glob::Pattern)>> {
    let mut out = Vec::new();
    for key in tables.keys() {
        if key.is_empty() {
            bail!(
                "fix {origin}: [kernel.\"\"] names no kernel; give a kernel's name or a glob such as [kernel.\"affine_*\"]"
            );
        }
        if is_pattern(key) {
            match glob::Pattern::new(key) {
                Ok(p) => out.push((key.clone(), p)),
                Err(e) => bail!("fix {origin}: [kernel.\"{key}\"] is not a glob: {e}"),
            }
        }
    }
    Ok(out)
}
