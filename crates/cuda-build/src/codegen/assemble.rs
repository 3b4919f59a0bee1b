//! Turns bindgen's output and the libclang walk into the three modules of the
//! generated file (`types`, `kernels`, `host`): sorts the prototypes by how
//! they were declared, writes a `KernelDecl` per kernel and a `GpuRepr` per
//! plain struct and enum, and maps the CUDA half types to the `half` crate.

use std::collections::HashSet;
use std::fmt::Write as _;

use quote::ToTokens;
use syn::visit_mut::VisitMut;

use super::decl::{kernel_decl, marker_name, Decl};
use super::scan::{Layout, Role, Scan};
use super::sources::Sources;
use super::{codegen_error, Cudarc, BYTE_FLOATS, HALF_TYPES, KERNEL_PREFIX};
use crate::error::Error;

/// Replaces the (blocklisted) CUDA half types with the `half` crate's, and
/// the 1-byte float types with the ABI's byte types.
pub(super) fn map_half_types(file: &mut syn::File, abi: &str) {
    HalfTypes { abi }.visit_file_mut(file);
}

struct HalfTypes<'a> {
    abi: &'a str,
}

impl VisitMut for HalfTypes<'_> {
    fn visit_type_mut(&mut self, ty: &mut syn::Type) {
        if let syn::Type::Path(path) = ty {
            let single = path.qself.is_none() && path.path.segments.len() == 1;
            let name = path.path.segments[0].ident.to_string();
            if let Some((_, rust)) = HALF_TYPES.iter().find(|(c, _)| single && *c == name) {
                *ty = syn::parse_str(rust).expect("HALF_TYPES holds Rust paths");
                return;
            }
            if let Some((_, rust)) = BYTE_FLOATS.iter().find(|(c, _)| single && *c == name) {
                if let Ok(mapped) = syn::parse_str(&format!("{}::{rust}", self.abi)) {
                    *ty = mapped;
                    return;
                }
            }
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }
}

/// A kernel parameter's Rust type as bindgen wrote it, with `void *` and
/// `const void *` (bindgen's `*mut c_void`, `*const c_void`) made the ABI's
/// untyped pointers, which a launch takes (host functions keep `c_void`).
fn kernel_param_type(ty: &syn::Type, abi: &str) -> String {
    if let syn::Type::Ptr(ptr) = ty {
        let void = matches!(&*ptr.elem, syn::Type::Path(p)
            if p.path.segments.last().is_some_and(|s| s.ident == "c_void"));
        if void {
            let name = if matches!(ptr.mutability, syn::PointerMutability::Const(_)) {
                "ConstVoidPtr"
            } else {
                "MutVoidPtr"
            };
            return format!("{abi}::{name}");
        }
    }
    ty.to_token_stream().to_string()
}

/// The file's body (before formatting) and the warnings.
pub(super) fn assemble(
    file: &syn::File,
    scan: &Scan,
    sources: Option<&Sources>,
    abi: &str,
    cudarc: &Cudarc,
) -> Result<(String, Vec<String>), Error> {
    let mut types = String::new();
    let mut kernels = String::new();
    // (symbol, marker) of each kernel.
    let mut kernel_names: Vec<(String, String)> = Vec::new();
    let mut host = String::new();
    let mut warnings = Vec::new();
    let mut structs: Vec<&syn::ItemStruct> = Vec::new();
    let reserved = reserved_names(file, abi);
    for item in &file.items {
        match item {
            syn::Item::ForeignMod(foreign) => {
                for f in &foreign.items {
                    let syn::ForeignItem::Fn(func) = f else {
                        host.push_str(&f.to_token_stream().to_string());
                        continue;
                    };
                    let name = func.sig.ident.to_string();
                    let prototype = scan.prototype(&name);
                    match (name.strip_prefix(KERNEL_PREFIX), prototype) {
                        (Some(kernel), Some(p)) if p.role == Role::Kernel => {
                            let (names, types) = foreign_params(func, abi);
                            let rust = marker_name(kernel, &reserved);
                            let decl = Decl { rust: &rust, name: kernel, shown: kernel, origin: &p.header };
                            kernels.push_str(&kernel_decl(&decl, &names, &types, &p.param_sizes, abi));
                            kernel_names.push((kernel.to_string(), rust));
                        }
                        (_, Some(p)) if p.role == Role::HostApi => {
                            let _ = writeln!(host, "extern \"C\" {{ {} }}", without_link_name(func));
                        }
                        (_, Some(p)) if p.role == Role::Device => {} // device code, by design
                        (_, Some(p)) if p.role == Role::Global => warnings.push(format!(
                            "{}:{}: `{name}` is declared __global__ without KILN_KERNEL, so it gets no typed launch; declare it with KILN_KERNEL({name}, params...)",
                            p.header, p.line
                        )),
                        (_, Some(p)) => warnings.push(format!(
                            "{}:{}: `{name}` is a plain prototype, neither a kernel (KILN_KERNEL) nor a host function (KILN_HOST_API), so it gets no binding; declare it with KILN_HOST_API if a static-library module defines it, or move it out of the include dir",
                            p.header, p.line
                        )),
                        (_, None) => {
                            return Err(codegen_error(format!(
                                "bindgen bound `{name}` but libclang found no such prototype in the include dir"
                            )))
                        }
                    }
                }
            }
            syn::Item::Struct(s) => {
                structs.push(s);
                types.push_str(&item.to_token_stream().to_string());
                types.push('\n');
            }
            other => {
                types.push_str(&other.to_token_stream().to_string());
                types.push('\n');
            }
        }
    }
    let enums: Vec<(&syn::ItemStruct, Layout)> = structs
        .iter()
        .filter_map(|s| scan.enums.get(&s.ident.to_string()).map(|l| (*s, *l)))
        .filter(|(s, _)| matches!(s.fields, syn::Fields::Unnamed(_)))
        .collect();
    let mut plain: HashSet<String> = enums.iter().map(|(s, _)| s.ident.to_string()).collect();
    // A struct is plain when every field is a number, an array of plain
    // values, an enum or a plain struct; settle the order by iterating.
    loop {
        let before = plain.len();
        for s in &structs {
            if is_plain_struct(s, &plain) {
                plain.insert(s.ident.to_string());
            }
        }
        if plain.len() == before {
            break;
        }
    }
    for (s, layout) in &enums {
        types.push_str(&enum_impls(&s.ident.to_string(), *layout, abi));
        types.push_str(&device_repr_impl(&s.ident.to_string(), cudarc));
    }
    for s in structs.iter().filter(|s| {
        matches!(s.fields, syn::Fields::Named(_)) && plain.contains(&s.ident.to_string())
    }) {
        types.push_str(&gpu_repr_impl(s, abi));
        types.push_str(&device_repr_impl(&s.ident.to_string(), cudarc));
    }
    let and_sources = if sources.is_some() {
        " and defined by the sources"
    } else {
        ""
    };
    if let Some(sources) = sources {
        let added =
            super::source_decls::source_decls(sources, &kernel_names, &plain, &reserved, abi)?;
        kernels.push_str(&added.text);
        kernel_names.extend(added.rust_names);
        warnings.extend(added.warnings);
        let refused: Vec<String> = added
            .refused
            .iter()
            .map(|(symbol, warning)| format!("({symbol:?}, {warning:?})"))
            .collect();
        let _ = writeln!(
            kernels,
            "/// The kernels the sources define that got no marker, each with the\n\
             /// warning codegen gave, as `(symbol, warning)`: `cargo kiln audit`\n\
             /// reports such a kernel of an image with that warning.\n\
             pub static UNDECLARED: &[(&str, &str)] = &[{}];",
            refused.join(", ")
        );
        let absent: Vec<String> = added
            .absent_at
            .iter()
            .map(|(symbol, archs)| format!("({symbol:?}, &[{}])", quoted(archs)))
            .collect();
        let _ = writeln!(
            kernels,
            "/// The kernels the device passes of some of their module's archs\n\
             /// leave out (`#if __CUDA_ARCH__ >= 890`), with those archs, as\n\
             /// `(symbol, archs)`: `cargo kiln audit` expects no code of them there.\n\
             pub static ABSENT_AT: &[(&str, &[&str])] = &[{}];",
            absent.join(", ")
        );
    }
    let infos: Vec<String> = kernel_names
        .iter()
        .map(|(_, k)| format!("{abi}::KernelInfo::of::<{k}>()"))
        .collect();
    let _ = write!(
        kernels,
        "/// Every kernel declared in the headers{and_sources}.\npub static ALL: &[{abi}::KernelInfo] = &[{}];",
        infos.join(", ")
    );
    let (per_source, from_source) = if sources.is_some() {
        (
            ",\n/// and per kernel a `.cu` source defines",
            ";\n/// or from the kernel's definition in the source (`HEADER` names it),\n\
             /// `NAME` its symbol in the image (C++ kernels' mangled name), which\n\
             /// the sources' fingerprint keeps in step with the source",
        )
    } else {
        ("", "")
    };
    let enum_safety = if enums.is_empty() {
        ""
    } else {
        "///\n\
         /// SAFETY of every `GpuRepr` impl of an enum: the type is bindgen's\n\
         /// `#[repr(transparent)]` newtype over the enum's underlying integer\n\
         /// type, its size and alignment are asserted against clang's below,\n\
         /// and every value of the integer is a valid value of the newtype.\n"
    };
    let device_repr_safety = if cudarc.device_repr {
        "///\n\
         /// SAFETY of every cudarc `DeviceRepr` impl here: its type also\n\
         /// implements `GpuRepr` (plain `#[repr(C)]` data, its layout asserted\n\
         /// against clang's), which is what cudarc asks of a value copied\n\
         /// into a kernel's parameter buffer.\n"
    } else {
        ""
    };
    let text = format!(
        "#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code, unreachable_pub, clippy::all, clippy::undocumented_unsafe_blocks)]\n\
         /// `#[repr(C)]` types and typedefs from the headers.\n\
         ///\n\
         /// SAFETY of every `GpuRepr` impl here: bindgen generated the type\n\
         /// `#[repr(C)]` from the header and asserts its size, alignment and\n\
         /// field offsets against clang's at compile time (the `const _` blocks);\n\
         /// an impl is generated only when every field is a plain number or an\n\
         /// array or struct of them, so every bit pattern is a valid value.\n\
         {enum_safety}\
         {device_repr_safety}\
         pub mod types {{ {types} }}\n\
         /// One marker type per kernel declared with `KILN_KERNEL`{per_source}.\n\
         ///\n\
         /// SAFETY of every `KernelDecl` impl here: `NAME` and `Params` come from\n\
         /// the `KILN_KERNEL` line in the header, which under nvcc is the kernel's\n\
         /// own `extern \"C\"` declaration, so its definition must match it{from_source}.\n\
         pub mod kernels {{ #[allow(unused_imports)] use super::types::*; {kernels} }}\n\
         /// Host functions of static-library modules.\n\
         pub mod host {{ #[allow(unused_imports)] use super::types::*; {host} }}\n"
    );
    Ok((text, warnings))
}

/// `"a", "b"`.
fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("{i:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A host function as declared, without the `link_name` bindgen adds for a
/// C++ name (a `KILN_HOST_API` function has C linkage, so it has none).
fn without_link_name(func: &syn::ForeignItemFn) -> String {
    let mut func = func.clone();
    func.attrs.retain(|a| !a.path().is_ident("link_name"));
    func.to_token_stream().to_string()
}

/// The parameter names and Rust types of a bindgen prototype.
fn foreign_params(func: &syn::ForeignItemFn, abi: &str) -> (Vec<String>, Vec<String>) {
    let mut names = Vec::new();
    let mut types = Vec::new();
    for input in &func.sig.inputs {
        let syn::FnArg::Typed(arg) = input else {
            continue;
        };
        names.push(arg.pat.to_token_stream().to_string());
        types.push(kernel_param_type(&arg.ty, abi));
    }
    (names, types)
}

fn is_plain_type(ty: &syn::Type, plain: &HashSet<String>) -> bool {
    match ty {
        syn::Type::Array(a) => is_plain_type(&a.elem, plain),
        syn::Type::Path(p) => {
            let name = p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            matches!(
                name.as_str(),
                "u8" | "i8"
                    | "u16"
                    | "i16"
                    | "u32"
                    | "i32"
                    | "u64"
                    | "i64"
                    | "usize"
                    | "isize"
                    | "f32"
                    | "f64"
                    | "f16"
                    | "bf16"
                    | "c_char"
                    | "c_schar"
                    | "c_uchar"
                    | "c_short"
                    | "c_ushort"
                    | "c_int"
                    | "c_uint"
                    | "c_long"
                    | "c_ulong"
                    | "c_longlong"
                    | "c_ulonglong"
                    | "c_float"
                    | "c_double"
            ) || BYTE_FLOATS.iter().any(|(_, rust)| *rust == name)
                || plain.contains(&name)
        }
        _ => false,
    }
}

fn is_plain_struct(s: &syn::ItemStruct, plain: &HashSet<String>) -> bool {
    let syn::Fields::Named(fields) = &s.fields else {
        return false;
    };
    !fields.named.is_empty()
        && fields.named.iter().all(|f| {
            let name = f
                .ident
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            !name.starts_with("_unused") && is_plain_type(&f.ty, plain)
        })
}

fn gpu_repr_impl(s: &syn::ItemStruct, abi: &str) -> String {
    let name = s.ident.to_string();
    let syn::Fields::Named(fields) = &s.fields else {
        return String::new();
    };
    let offsets: Vec<String> = fields
        .named
        .iter()
        .filter_map(|f| f.ident.as_ref())
        .filter(|f| !f.to_string().starts_with("__bindgen"))
        .map(|f| {
            format!(
                "({:?}, ::core::mem::offset_of!({name}, {f}))",
                f.to_string()
            )
        })
        .collect();
    format!(
        "unsafe impl {abi}::GpuRepr for {name} {{\n\
         const C_NAME: &'static str = {name:?};\n\
         const SIZE: usize = ::core::mem::size_of::<{name}>();\n\
         const ALIGN: usize = ::core::mem::align_of::<{name}>();\n\
         const FIELD_OFFSETS: &'static [(&'static str, usize)] = &[{}];\n}}\n\
         impl {abi}::AbiParam for {name} {{ type Kind = {abi}::param_kind::ByValue<{name}>; }}\n",
        offsets.join(", ")
    )
}

/// cudarc's `DeviceRepr` for a type that has `GpuRepr`, when asked for (and
/// under the crate's feature, when one is named).
pub(super) fn device_repr_impl(name: &str, cudarc: &Cudarc) -> String {
    if !cudarc.device_repr {
        return String::new();
    }
    let cfg = cudarc
        .feature
        .as_ref()
        .map(|f| format!("#[cfg(feature = {f:?})]\n"))
        .unwrap_or_default();
    format!("{cfg}unsafe impl ::cudarc::driver::DeviceRepr for {name} {{}}\n")
}

/// `GpuRepr` and `AbiParam` for an enum's newtype, and its size and alignment
/// asserted against clang's.
fn enum_impls(name: &str, layout: Layout, abi: &str) -> String {
    let Layout { size, align } = layout;
    format!(
        "const _: () = assert!(::core::mem::size_of::<{name}>() == {size} && ::core::mem::align_of::<{name}>() == {align}, {:?});\n\
         unsafe impl {abi}::GpuRepr for {name} {{\n\
         const C_NAME: &'static str = {name:?};\n\
         const SIZE: usize = ::core::mem::size_of::<{name}>();\n\
         const ALIGN: usize = ::core::mem::align_of::<{name}>();\n\
         const FIELD_OFFSETS: &'static [(&'static str, usize)] = &[];\n}}\n\
         impl {abi}::AbiParam for {name} {{ type Kind = {abi}::param_kind::ByValue<{name}>; }}\n",
        format!("enum `{name}` has size {size} and alignment {align} in C")
    )
}

/// The names a marker must not take besides the ones [`marker_name`]
/// knows: the types bindgen made (`kernels` imports them all) and the first
/// segment of a relative ABI path.
fn reserved_names(file: &syn::File, abi: &str) -> HashSet<String> {
    let mut names: HashSet<String> = file
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Struct(s) => Some(s.ident.to_string()),
            syn::Item::Enum(e) => Some(e.ident.to_string()),
            syn::Item::Union(u) => Some(u.ident.to_string()),
            syn::Item::Type(t) => Some(t.ident.to_string()),
            _ => None,
        })
        .collect();
    if let Some(first) = abi.split("::").next().filter(|s| !s.is_empty()) {
        names.insert(first.to_string());
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_void_pointers_become_the_abis_untyped_pointers() {
        let ty = |t: &str| syn::parse_str::<syn::Type>(t).unwrap();
        assert_eq!(
            kernel_param_type(&ty("*const ::core::ffi::c_void"), "::gpu_core"),
            "::gpu_core::ConstVoidPtr"
        );
        assert_eq!(
            kernel_param_type(&ty("*mut ::core::ffi::c_void"), "::kiln_abi"),
            "::kiln_abi::MutVoidPtr"
        );
        assert_eq!(
            kernel_param_type(&ty("*mut f32"), "::gpu_core"),
            "* mut f32"
        );
        let mut file: syn::File =
            syn::parse_str("struct S { a: __nv_fp8_e4m3, b: __half }").unwrap();
        map_half_types(&mut file, "::gpu_core");
        let text = file.to_token_stream().to_string();
        assert!(
            text.contains(":: gpu_core :: Fp8E4M3") && text.contains(":: half :: f16"),
            "{text}"
        );
    }

    #[test]
    fn device_repr_is_emitted_only_when_asked_and_under_the_named_feature() {
        let off = Cudarc::default();
        assert_eq!(device_repr_impl("P", &off), "");
        let on = Cudarc {
            device_repr: true,
            feature: None,
        };
        assert_eq!(
            device_repr_impl("P", &on),
            "unsafe impl ::cudarc::driver::DeviceRepr for P {}\n"
        );
        let gated = Cudarc {
            device_repr: true,
            feature: Some("gpu \"x\"".into()),
        };
        // A hostile feature name stays one string literal.
        assert_eq!(
            device_repr_impl("P", &gated),
            "#[cfg(feature = \"gpu \\\"x\\\"\")]\nunsafe impl ::cudarc::driver::DeviceRepr for P {}\n"
        );
    }
}
