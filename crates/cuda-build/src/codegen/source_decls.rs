//! The `KernelDecl` markers of the kernels the sources define, beside the
//! headers' ones: a kernel a header also declares keeps the header's marker;
//! the marker's Rust name is the kernel's name as the source spells it made
//! an identifier (`scale<float>` -> `scale_float`, `ns::f` -> `ns_f`), and two
//! kernels that would share one are an error naming both; a kernel with a
//! parameter type that has no Rust mapping gets no marker and one warning.

use std::collections::{BTreeMap, HashSet};

use super::codegen_error;
use super::decl::{kernel_decl, marker_name, Decl};
use super::sources::Sources;
use crate::error::Error;

/// The markers, their Rust names and the warnings.
pub(super) struct Added {
    pub(super) text: String,
    /// (symbol, marker) of each.
    pub(super) rust_names: Vec<(String, String)>,
    pub(super) warnings: Vec<String>,
    /// `(symbol, warning)` of each kernel left without a marker.
    pub(super) refused: Vec<(String, String)>,
    /// `(symbol, archs)` of each marker's kernel that those archs' device
    /// passes leave out.
    pub(super) absent_at: Vec<(String, Vec<String>)>,
}

/// Markers for `sources`' kernels; `header_kernels` are the headers'
/// (symbol, marker) pairs, `bound` the struct and enum names the headers
/// bind as plain data, `reserved` the names a marker must not take
/// ([`marker_name`]).
pub(super) fn source_decls(
    sources: &Sources,
    header_kernels: &[(String, String)],
    bound: &HashSet<String>,
    reserved: &HashSet<String>,
    abi: &str,
) -> Result<Added, Error> {
    let mut added = Added {
        text: String::new(),
        rust_names: Vec::new(),
        // The walk's own (internal linkage, unresolved instantiations) first.
        warnings: sources.warnings.clone(),
        refused: sources.refused.clone(),
        absent_at: Vec::new(),
    };
    // Rust name -> where it came from, for the collision error.
    let mut taken: BTreeMap<String, String> = header_kernels
        .iter()
        .map(|(k, rust)| (rust.clone(), format!("`{k}` (a header's KILN_KERNEL)")))
        .collect();
    for kernel in &sources.kernels {
        let d = &kernel.defined;
        if header_kernels.iter().any(|(symbol, _)| *symbol == d.symbol) {
            continue; // declared by a header: that marker is the one
        }
        let site = format!("{}:{}", kernel.shown, d.line);
        let mut types = Vec::new();
        let mut unmapped = None;
        for (name, ty) in &d.params {
            match ty.rust(&|n| bound.contains(n), abi) {
                Ok(rust) => types.push(rust),
                Err(c) => {
                    unmapped = Some((name, c));
                    break;
                }
            }
        }
        if let Some((param, c)) = unmapped {
            let warning = format!(
                "{site}: kernel `{}` gets no typed launch: parameter `{param}` has type `{c}`, which has no Rust mapping (a struct or enum maps when a header of the include dir declares it); launch it by name",
                d.source_name
            );
            added.warnings.push(warning.clone());
            added.refused.push((d.symbol.clone(), warning));
            continue;
        }
        let rust = marker_name(&rust_name(&d.source_name), reserved);
        let this = format!("`{}` ({site})", d.source_name);
        if let Some(other) = taken.get(&rust) {
            return Err(codegen_error(format!(
                "kernels {other} and {this} would both be the marker `{rust}`; rename one, or leave it out of the modules codegen reads"
            )));
        }
        taken.insert(rust.clone(), this);
        let names: Vec<String> = d.params.iter().map(|(n, _)| n.clone()).collect();
        let decl = Decl {
            rust: &rust,
            name: &d.symbol,
            shown: &d.source_name,
            origin: &kernel.shown,
        };
        added
            .text
            .push_str(&kernel_decl(&decl, &names, &types, &d.sizes, abi));
        added.rust_names.push((d.symbol.clone(), rust));
        if let Some((symbol, archs)) = sources.absent_at.iter().find(|(s, _)| *s == d.symbol) {
            added.absent_at.push((symbol.clone(), archs.clone()));
        }
    }
    Ok(added)
}

/// `scale<float>` -> `scale_float`: runs of anything but letters, digits
/// and `_` become one `_`; a name that is not then a Rust identifier (a
/// keyword, a leading digit) gets a trailing or leading `_`.
fn rust_name(source_name: &str) -> String {
    let mut out = String::new();
    for c in source_name.chars() {
        if c == '_' || c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = if source_name.ends_with(|c: char| c == '_' || c.is_ascii_alphanumeric()) {
        out
    } else {
        out.trim_end_matches('_').to_string()
    };
    let name = if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{trimmed}")
    } else {
        trimmed
    };
    if syn::parse_str::<syn::Ident>(&name).is_ok() {
        name
    } else {
        format!("{name}_")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_names_are_identifiers_made_from_the_source_names() {
        assert_eq!(rust_name("scale<float>"), "scale_float");
        assert_eq!(
            rust_name("ns::scale<unsigned int,4>"),
            "ns_scale_unsigned_int_4"
        );
        assert_eq!(rust_name("scale<Pair<int,int>>"), "scale_Pair_int_int");
        assert_eq!(rust_name("uneg_f32"), "uneg_f32");
        assert_eq!(rust_name("kernel__"), "kernel__", "a C name stays as it is");
        assert_eq!(rust_name("type"), "type_", "a keyword");
        assert_eq!(rust_name("ns::8bit"), "ns_8bit");
    }
}
