//! A `KernelDecl` marker as Rust text: the unit struct, its impl (symbol,
//! declaring file, parameter names, layouts and types), and the width checks
//! of its `usize`/`isize` parameters. Written for the headers' kernels
//! ([`assemble`](super::assemble)) and the sources' ([`source_decls`](super::source_decls)) alike.

use std::collections::HashSet;
use std::fmt::Write as _;

/// Rust's primitive types: a marker of one of these names would stand for
/// it in every parameter list of `kernels`.
const PRIMITIVES: [&str; 17] = [
    "bool", "char", "str", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64",
    "i128", "isize", "f32", "f64",
];

/// The Rust name of a marker for a kernel whose name made an identifier is
/// `name`: `name` itself unless it is a keyword, a primitive type, `ALL`
/// (the list of kernels) or one of `taken` (the types `kernels` imports, the
/// first segment of the ABI path), then with `_` added until it is none.
pub(super) fn marker_name(name: &str, taken: &HashSet<String>) -> String {
    let mut rust = name.to_string();
    while rust == "ALL"
        || rust == "UNDECLARED"
        || rust == "ABSENT_AT"
        || PRIMITIVES.contains(&rust.as_str())
        || taken.contains(&rust)
        || syn::parse_str::<syn::Ident>(&rust).is_err()
    {
        rust.push('_');
    }
    rust
}

/// What a marker is called and says: its Rust name, the kernel's symbol,
/// the kernel as its docs name it, and the header (or source) that declares
/// it.
pub(super) struct Decl<'a> {
    pub(super) rust: &'a str,
    pub(super) name: &'a str,
    pub(super) shown: &'a str,
    pub(super) origin: &'a str,
}

/// A `KernelDecl` marker with its layout and the width checks of its
/// `usize`/`isize` parameters.
pub(super) fn kernel_decl(
    decl: &Decl<'_>,
    names: &[String],
    types: &[String],
    clang_sizes: &[Option<u64>],
    abi: &str,
) -> String {
    let Decl {
        rust,
        name,
        shown,
        origin: header,
    } = *decl;
    let params = match types.len() {
        1 => format!("({},)", types[0]),
        _ => format!("({})", types.join(", ")),
    };
    let layout: Vec<String> = types
        .iter()
        .map(|t| format!("(::core::mem::size_of::<{t}>(), ::core::mem::align_of::<{t}>())"))
        .collect();
    // usize/isize are the only parameter types whose width follows the Rust
    // target, and bool the only one whose C width is the compiler's choice;
    // every other one is fixed or checked with its type.
    let mut width_checks = String::new();
    for ((param, ty), size) in names.iter().zip(types).zip(clang_sizes) {
        if let (Some(size), "bool") = (size, ty.as_str()) {
            let _ = writeln!(
                width_checks,
                "const _: () = assert!(::core::mem::size_of::<bool>() == {size}, {:?});",
                format!("kernel `{shown}` takes `{param}` as a {size}-byte bool, and Rust's bool is 1 byte")
            );
        }
        if let (Some(size), "usize" | "isize") = (size, ty.as_str()) {
            let _ = writeln!(
                width_checks,
                "const _: () = assert!(::core::mem::size_of::<{ty}>() == {size}, {:?});",
                format!(
                    "kernel `{shown}` takes `{param}` as {size} bytes (size_t/ptrdiff_t on the GPU): build for a {}-bit target",
                    size * 8
                )
            );
        }
    }
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!(
        "#[doc = {:?}]\n#[derive(Debug, Clone, Copy)]\npub struct {rust};\n\
         unsafe impl {abi}::KernelDecl for {rust} {{\n\
         const NAME: &'static str = {name:?};\n\
         const HEADER: &'static str = {header:?};\n\
         const PARAM_NAMES: &'static [&'static str] = &[{}];\n\
         const PARAM_LAYOUT: &'static [(usize, usize)] = &[{}];\n\
         type Params = {params};\n}}\n{width_checks}",
        format!(" `{shown}` from `{header}`."),
        quoted.join(", "),
        layout.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_never_shadows_a_name_in_scope() {
        let taken: HashSet<String> = ["fixture_window", "gpu_core"].map(String::from).into();
        for (name, rust) in [
            ("ALL", "ALL_"),
            ("UNDECLARED", "UNDECLARED_"),
            ("f32", "f32_"),
            ("str", "str_"),
            ("match", "match_"),
            ("self", "self_"),
            ("fixture_window", "fixture_window_"),
            ("gpu_core", "gpu_core_"),
            ("affine_f32", "affine_f32"),
        ] {
            assert_eq!(marker_name(name, &taken), rust, "{name}");
        }
        let taken: HashSet<String> = ["f32_".to_string()].into();
        assert_eq!(marker_name("f32", &taken), "f32__");
    }
}
