//! The Rust side of each kernel's ABI, read from a crate's generated
//! bindings (cuda-build's codegen output) as source, so that any crate can be
//! audited without compiling it into the auditor: each `KernelDecl` impl's
//! `NAME`, `HEADER`, `PARAM_NAMES` and `type Params`, whose layouts come from
//! the primitive types and the size/alignment asserts bindgen writes beside
//! every struct.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use syn::visit::Visit;

/// One kernel as the Rust side declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Declaration {
    /// The kernel's symbol.
    pub name: String,
    /// The header that declares it, relative to its include dir.
    pub header: String,
    /// Parameter names, in order.
    pub param_names: Vec<String>,
    /// `(size, align)` of each parameter as Rust passes it.
    pub param_layout: Vec<(usize, usize)>,
}

impl Declaration {
    /// A declaration from borrowed parts (tests, and callers that hold
    /// `kiln_abi::KernelInfo`).
    pub fn new(name: &str, header: &str, names: &[&str], layout: &[(usize, usize)]) -> Self {
        Self {
            name: name.to_string(),
            header: header.to_string(),
            param_names: names.iter().map(|n| n.to_string()).collect(),
            param_layout: layout.to_vec(),
        }
    }
}

/// What the bindings declare: the kernels whose layouts could be worked
/// out, and one line for each that could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declarations {
    pub kernels: Vec<Declaration>,
    /// `kernel: parameter type T has no layout this audit can read`.
    pub unreadable: Vec<String>,
    /// `(symbol, warning)` of each kernel codegen left without a marker
    /// (the bindings' `UNDECLARED`): reported with codegen's warning.
    pub refused: Vec<(String, String)>,
    /// `(symbol, archs)` of each kernel whose module's device passes at
    /// `archs` leave it out (the bindings' `ABSENT_AT`): no code of it is
    /// expected there.
    pub absent_at: Vec<(String, Vec<String>)>,
}

impl Declarations {
    /// Whether codegen found `kernel` left out of the device pass of the
    /// arch numbered `arch` (`80` for sm_80 and compute_80).
    pub fn absent_at(&self, kernel: &str, arch: u32) -> bool {
        self.absent_at.iter().any(|(k, archs)| {
            k == kernel
                && archs
                    .iter()
                    .any(|a| super::model::arch_number(a) == Some(arch))
        })
    }
}

/// The generated bindings of the crate in `crate_dir`: `configured` (the
/// config file's `bindings`) when given, else every `.rs` file under `src/`
/// that implements `KernelDecl`, sorted.
pub fn find_bindings(crate_dir: &Path, configured: Option<&Path>) -> Result<Vec<PathBuf>> {
    if let Some(path) = configured {
        let path = crate_dir.join(path);
        anyhow::ensure!(
            path.is_file(),
            "`bindings = \"{}\"` names no file; give the path of the generated bindings, relative to the crate",
            path.display()
        );
        return Ok(vec![path]);
    }
    let mut found = Vec::new();
    let mut dirs = vec![crate_dir.join("src")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && crate::config::read_file(&path).is_ok_and(|t| t.contains("KernelDecl for"))
            {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Reads the declarations of every file in `files`.
pub fn read_declarations(files: &[PathBuf]) -> Result<Declarations> {
    let mut collector = Collector::default();
    for file in files {
        let text = crate::config::read_file(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let parsed = syn::parse_file(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not Rust the audit can parse ({e}); regenerate the bindings",
                file.display()
            )
        })?;
        collector.visit_file(&parsed);
    }
    Ok(collector.finish())
}

/// Parses one file's text (tests).
pub fn parse_declarations(text: &str) -> Result<Declarations> {
    let parsed = syn::parse_file(text).context("not Rust the audit can parse")?;
    let mut collector = Collector::default();
    collector.visit_file(&parsed);
    Ok(collector.finish())
}

/// A kernel's impl as read, before its parameter types are laid out.
#[derive(Default)]
struct Impl {
    name: Option<String>,
    header: String,
    param_names: Vec<String>,
    params: Vec<Ty>,
}

/// A parameter type, as far as its layout needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ty {
    /// A raw pointer or reference: 8 bytes.
    Pointer,
    /// A path's last segment (`f32`, `SaxpyParams`, `f16`).
    Named(String),
    /// Anything else (arrays, tuples): not laid out here.
    Other,
}

impl Ty {
    fn of(ty: &syn::Type) -> Self {
        match ty {
            syn::Type::Ptr(_) | syn::Type::Reference(_) => Ty::Pointer,
            syn::Type::Paren(p) => Ty::of(&p.elem),
            syn::Type::Group(g) => Ty::of(&g.elem),
            syn::Type::Path(p) => p
                .path
                .segments
                .last()
                .map_or(Ty::Other, |s| Ty::Named(s.ident.to_string())),
            _ => Ty::Other,
        }
    }
}

#[derive(Default)]
struct Collector {
    impls: Vec<Impl>,
    refused: Vec<(String, String)>,
    absent_at: Vec<(String, Vec<String>)>,
    /// Struct name -> (size, align), from bindgen's asserts.
    sizes: BTreeMap<String, usize>,
    aligns: BTreeMap<String, usize>,
    /// `type A = B;` and `struct E(pub B);` (enums are transparent newtypes).
    aliases: BTreeMap<String, Ty>,
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let is_decl = item
            .trait_
            .as_ref()
            .and_then(|(path, _)| path.segments.last())
            .is_some_and(|s| s.ident == "KernelDecl");
        if is_decl {
            self.impls.push(read_impl(item));
        }
        syn::visit::visit_item_impl(self, item);
    }

    /// `pub static UNDECLARED: &[(&str, &str)] = &[("symbol", "warning"), ...];`
    /// and `pub static ABSENT_AT: &[(&str, &[&str])] = &[("symbol", &["sm_80"])];`
    fn visit_item_static(&mut self, item: &'ast syn::ItemStatic) {
        let list = item.ident == "UNDECLARED" || item.ident == "ABSENT_AT";
        let mut expr = &*item.expr;
        while let syn::Expr::Reference(r) = expr {
            expr = &r.expr;
        }
        let tuples = match expr {
            syn::Expr::Array(a) if list => a.elems.iter().collect(),
            _ => Vec::new(),
        };
        for tuple in tuples {
            let syn::Expr::Tuple(t) = tuple else { continue };
            let (Some(symbol), Some(second)) =
                (t.elems.first().and_then(string_lit), t.elems.get(1))
            else {
                continue;
            };
            if item.ident == "UNDECLARED" {
                if let Some(warning) = string_lit(second) {
                    self.refused.push((symbol, warning));
                }
            } else {
                self.absent_at.push((symbol, string_list(second)));
            }
        }
        syn::visit::visit_item_static(self, item);
    }

    fn visit_item_type(&mut self, item: &'ast syn::ItemType) {
        self.aliases
            .insert(item.ident.to_string(), Ty::of(&item.ty));
    }

    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        if let syn::Fields::Unnamed(fields) = &item.fields {
            if let Some(only) = fields.unnamed.first().filter(|_| fields.unnamed.len() == 1) {
                self.aliases
                    .insert(item.ident.to_string(), Ty::of(&only.ty));
            }
        }
    }

    /// `["Size of T"][::core::mem::size_of::<T>() - 8usize];`
    fn visit_expr_index(&mut self, e: &'ast syn::ExprIndex) {
        if let (Some(label), Some(value)) = (string_in_array(&e.expr), subtrahend(&e.index)) {
            if let Some(ty) = label.strip_prefix("Size of ") {
                self.sizes.insert(ty.to_string(), value);
            } else if let Some(ty) = label.strip_prefix("Alignment of ") {
                self.aligns.insert(ty.to_string(), value);
            }
        }
        syn::visit::visit_expr_index(self, e);
    }
}

impl Collector {
    fn finish(self) -> Declarations {
        let mut out = Declarations {
            refused: self.refused.clone(),
            absent_at: self.absent_at.clone(),
            ..Declarations::default()
        };
        for i in &self.impls {
            let Some(name) = i.name.clone() else { continue };
            let mut layout = Vec::new();
            for ty in &i.params {
                match self.layout(ty, 0) {
                    Some(l) => layout.push(l),
                    None => {
                        out.unreadable.push(format!(
                            "{name}: a parameter's type has no layout this audit can read from the bindings"
                        ));
                        break;
                    }
                }
            }
            if layout.len() == i.params.len() {
                out.kernels.push(Declaration {
                    name,
                    header: i.header.clone(),
                    param_names: i.param_names.clone(),
                    param_layout: layout,
                });
            }
        }
        out
    }

    /// `(size, align)` of a parameter type on a 64-bit target.
    fn layout(&self, ty: &Ty, depth: usize) -> Option<(usize, usize)> {
        match ty {
            Ty::Pointer => Some((8, 8)),
            Ty::Named(name) => {
                if let Some(l) = primitive(name) {
                    return Some(l);
                }
                if let (Some(&size), Some(&align)) = (self.sizes.get(name), self.aligns.get(name)) {
                    return Some((size, align));
                }
                // Aliases may chain; a cycle would be a broken file.
                let target = self.aliases.get(name).filter(|_| depth < 16)?;
                self.layout(target, depth + 1)
            }
            Ty::Other => None,
        }
    }
}

fn primitive(name: &str) -> Option<(usize, usize)> {
    Some(match name {
        "u8" | "i8" | "bool" | "c_char" | "c_uchar" | "c_schar" => (1, 1),
        // The ABI's 1-byte float types (`__nv_fp8_e4m3`, ...).
        "Fp8E4M3" | "Fp8E5M2" | "Fp8E8M0" | "Fp6E2M3" | "Fp6E3M2" | "Fp4E2M1" | "Fp4x2E2M1" => {
            (1, 1)
        }
        // The ABI's `const void *` and `void *`.
        "ConstVoidPtr" | "MutVoidPtr" => (8, 8),
        "u16" | "i16" | "f16" | "bf16" | "c_short" | "c_ushort" => (2, 2),
        "u32" | "i32" | "f32" | "char" | "c_int" | "c_uint" | "c_float" => (4, 4),
        "u64" | "i64" | "f64" | "usize" | "isize" | "c_long" | "c_ulong" | "c_longlong"
        | "c_ulonglong" | "c_double" => (8, 8),
        "u128" | "i128" => (16, 16),
        _ => return None,
    })
}

fn read_impl(item: &syn::ItemImpl) -> Impl {
    let mut out = Impl::default();
    for member in &item.items {
        match member {
            syn::ImplItem::Const(c) => match c.ident.to_string().as_str() {
                "NAME" => out.name = string_lit(&c.expr),
                "HEADER" => out.header = string_lit(&c.expr).unwrap_or_default(),
                "PARAM_NAMES" => out.param_names = string_list(&c.expr),
                _ => {}
            },
            syn::ImplItem::Type(t) if t.ident == "Params" => {
                out.params = match &t.ty {
                    syn::Type::Tuple(tuple) => tuple.elems.iter().map(Ty::of).collect(),
                    other => vec![Ty::of(other)],
                };
            }
            _ => {}
        }
    }
    out
}

fn string_lit(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s.value()),
        syn::Expr::Reference(r) => string_lit(&r.expr),
        syn::Expr::Group(g) => string_lit(&g.expr),
        _ => None,
    }
}

fn string_list(e: &syn::Expr) -> Vec<String> {
    match e {
        syn::Expr::Reference(r) => string_list(&r.expr),
        syn::Expr::Array(a) => a.elems.iter().filter_map(string_lit).collect(),
        _ => Vec::new(),
    }
}

/// `"label"` from `["label"]`.
fn string_in_array(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Array(a) if a.elems.len() == 1 => string_lit(&a.elems[0]),
        _ => None,
    }
}

/// `8` from `size_of::<T>() - 8usize`.
fn subtrahend(e: &syn::Expr) -> Option<usize> {
    match e {
        syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::Sub(_)) => match &*b.right {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BINDINGS: &str = r#"
pub mod types {
    pub struct Params { pub a: f32, pub n: u32 }
    const _: () = {
        ["Size of Params"][::core::mem::size_of::<Params>() - 8usize];
        ["Alignment of Params"][::core::mem::align_of::<Params>() - 4usize];
    };
    pub type index_t = u64;
    #[repr(transparent)]
    pub struct Mode(pub u32);
}
pub mod kernels {
    pub struct saxpy;
    unsafe impl ::gpu_core::KernelDecl for saxpy {
        const NAME: &'static str = "saxpy";
        const HEADER: &'static str = "saxpy.h";
        const PARAM_NAMES: &'static [&'static str] = &["p", "x", "i", "m", "h"];
        type Params = (Params, *const f32, index_t, Mode, half::f16);
    }
    pub struct opaque;
    unsafe impl ::gpu_core::KernelDecl for opaque {
        const NAME: &'static str = "opaque";
        const HEADER: &'static str = "o.h";
        const PARAM_NAMES: &'static [&'static str] = &["s"];
        type Params = (Unknown,);
    }
}
"#;

    #[test]
    fn layouts_come_from_primitives_asserts_and_aliases() {
        let d = parse_declarations(BINDINGS).unwrap();
        assert_eq!(
            d.kernels,
            [Declaration::new(
                "saxpy",
                "saxpy.h",
                &["p", "x", "i", "m", "h"],
                &[(8, 4), (8, 8), (8, 8), (4, 4), (2, 2)]
            )]
        );
        assert_eq!(
            d.unreadable,
            ["opaque: a parameter's type has no layout this audit can read from the bindings"]
        );
    }

    /// Issue 42: the untyped pointers, bool and the fp8 types lay out, and
    /// the kernels codegen refused are read with its warnings.
    #[test]
    fn untyped_pointers_byte_floats_and_refused_kernels_are_read() {
        let d = parse_declarations(
            r#"
pub mod kernels {
    pub struct dequantize;
    unsafe impl ::gpu_core::KernelDecl for dequantize {
        const NAME: &'static str = "dequantize";
        const HEADER: &'static str = "quantized.cu";
        const PARAM_NAMES: &'static [&'static str] = &["vx", "vy", "on", "mul"];
        type Params = (::gpu_core::ConstVoidPtr, ::gpu_core::MutVoidPtr, bool, ::gpu_core::Fp8E4M3);
    }
    pub static UNDECLARED: &[(&str, &str)] = &[("mask_fill", "q.cu:3: kernel `mask_fill` gets no typed launch")];
    pub static ABSENT_AT: &[(&str, &[&str])] = &[("dequantize", &["sm_80", "sm_86"])];
}
"#,
        )
        .unwrap();
        assert_eq!(d.kernels[0].param_layout, [(8, 8), (8, 8), (1, 1), (1, 1)]);
        assert_eq!(
            d.refused,
            [(
                "mask_fill".to_string(),
                "q.cu:3: kernel `mask_fill` gets no typed launch".to_string()
            )]
        );
        assert!(d.absent_at("dequantize", 80) && d.absent_at("dequantize", 86));
        assert!(!d.absent_at("dequantize", 90) && !d.absent_at("mask_fill", 80));
    }

    #[test]
    fn the_bindings_are_found_under_src_or_where_configured() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/a")).unwrap();
        std::fs::write(dir.path().join("src/a/gen.rs"), BINDINGS).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "mod a;").unwrap();
        assert_eq!(
            find_bindings(dir.path(), None).unwrap(),
            [dir.path().join("src/a/gen.rs")]
        );
        let err = find_bindings(dir.path(), Some(Path::new("nope.rs"))).unwrap_err();
        assert!(err.to_string().contains("names no file"), "{err}");
    }
}
