//! The Rust type of a kernel parameter read from a `.cu` definition, as the
//! header path maps it through bindgen: pointers to pointers of the mapped
//! type (`const` pointee: `*const`), `size_t`/`ptrdiff_t` as `usize`/`isize`
//! (by the typedef's name, before it becomes `unsigned long`), the CUDA half
//! types as the `half` crate's, the 1-byte float types (`__nv_fp8_e4m3`, ...)
//! as the ABI's byte newtypes, `bool` by value as `bool`, `void *` and
//! `const void *` as the ABI's untyped pointers, fixed-width numbers, and
//! structs and enums by name (mapped only where the headers bind them, which
//! the assembler decides). Anything else (a pointer to `bool` or to `void *`,
//! references, classes of the source) has no mapping, and its kernel gets no
//! marker.

// clang-sys's constants keep C's names, matched as patterns here.
#![allow(non_upper_case_globals)]

use clang_sys::*;

use super::scan::{spelling, take_string};
use super::{BYTE_FLOATS, HALF_TYPES};

/// A parameter type, mapped or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CType {
    /// A Rust path: `f32`, `usize`, `::half::f16`.
    Rust(&'static str),
    /// A type of the ABI crate, by its name there (`Fp8E4M3`).
    Abi(&'static str),
    /// C's `void`: a parameter only as a pointer's pointee.
    Void,
    /// C++'s `bool`: a parameter only by value.
    Bool,
    /// A pointer.
    Ptr { konst: bool, to: Box<CType> },
    /// A struct or enum, by its C name: mapped if the headers bind it.
    Named(String),
    /// No mapping: the C type as written.
    Unmapped(String),
}

impl CType {
    /// The Rust type, with `bound` saying which named types the headers bind
    /// and `abi` the path of the ABI crate; `Err` with the C spelling of the
    /// part that has no mapping.
    pub(super) fn rust(&self, bound: &dyn Fn(&str) -> bool, abi: &str) -> Result<String, String> {
        match self {
            CType::Rust(path) => Ok((*path).to_string()),
            CType::Abi(name) => Ok(format!("{abi}::{name}")),
            CType::Bool => Ok("bool".into()),
            CType::Void => Err("void".into()),
            CType::Ptr { konst, to } => {
                let qualifier = if *konst { "const" } else { "mut" };
                match &**to {
                    CType::Void if *konst => return Ok(format!("{abi}::ConstVoidPtr")),
                    CType::Void => return Ok(format!("{abi}::MutVoidPtr")),
                    // Device memory read back as `bool` could hold any byte;
                    // a `void **` has no Rust type for its pointee.
                    CType::Bool | CType::Ptr { .. } if to.points_to_void_or_bool() => {
                        return Err(self.c_spelling());
                    }
                    _ => {}
                }
                let inner = to.rust(bound, abi)?;
                Ok(format!("*{qualifier} {inner}"))
            }
            CType::Named(name) if bound(name) => Ok(name.clone()),
            CType::Named(name) => Err(name.clone()),
            CType::Unmapped(c) => Err(c.clone()),
        }
    }

    /// Whether this is `bool`, or pointers that end at `void` or `bool`.
    fn points_to_void_or_bool(&self) -> bool {
        match self {
            CType::Void | CType::Bool => true,
            CType::Ptr { to, .. } => to.points_to_void_or_bool(),
            _ => false,
        }
    }

    /// The C spelling, for a warning (`const bool *`, `void **`).
    fn c_spelling(&self) -> String {
        match self {
            CType::Void => "void".into(),
            CType::Bool => "bool".into(),
            CType::Ptr { konst, to } => {
                let base = to.c_spelling();
                let base = if *konst && !base.ends_with('*') {
                    format!("const {base}")
                } else if *konst {
                    format!("{base} const")
                } else {
                    base
                };
                if base.ends_with('*') {
                    format!("{base}*")
                } else {
                    format!("{base} *")
                }
            }
            CType::Rust(r) => (*r).to_string(),
            CType::Abi(a) => (*a).to_string(),
            CType::Named(n) | CType::Unmapped(n) => n.clone(),
        }
    }
}

/// The mapping of a libclang type.
pub(super) fn map_type(ty: CXType) -> CType {
    let mut ty = ty;
    loop {
        match ty.kind {
            // SAFETY: types of the live unit, here and below.
            CXType_Elaborated => ty = unsafe { clang_Type_getNamedType(ty) },
            CXType_Typedef => {
                // SAFETY: as above.
                let name = take_string(unsafe { clang_getTypedefName(ty) });
                match name.as_str() {
                    "size_t" => return CType::Rust("usize"),
                    "ptrdiff_t" => return CType::Rust("isize"),
                    _ => {}
                }
                if let Some((_, rust)) = HALF_TYPES.iter().find(|(c, _)| *c == name) {
                    return CType::Rust(rust);
                }
                // SAFETY: as above.
                ty = unsafe { clang_getTypedefDeclUnderlyingType(clang_getTypeDeclaration(ty)) };
            }
            CXType_Pointer => {
                // SAFETY: as above.
                let pointee = unsafe { clang_getPointeeType(ty) };
                // SAFETY: as above.
                let konst = unsafe { clang_isConstQualifiedType(pointee) } != 0;
                return CType::Ptr {
                    konst,
                    to: Box::new(map_type(pointee)),
                };
            }
            _ => break,
        }
    }
    // SAFETY: as above.
    let canonical = unsafe { clang_getCanonicalType(ty) };
    if canonical.kind == CXType_Pointer {
        // A template parameter standing for a pointer type.
        return map_type(canonical);
    }
    match canonical.kind {
        CXType_Void => return CType::Void,
        // SAFETY: as above. Any other width is no `bool` Rust can pass.
        CXType_Bool if unsafe { clang_Type_getSizeOf(canonical) } == 1 => return CType::Bool,
        _ => {}
    }
    let scalar = match canonical.kind {
        CXType_Char_S | CXType_SChar => Some("i8"),
        CXType_Char_U | CXType_UChar => Some("u8"),
        CXType_Short => Some("i16"),
        CXType_UShort => Some("u16"),
        CXType_Int => Some("i32"),
        CXType_UInt => Some("u32"),
        CXType_Long | CXType_LongLong => Some("i64"),
        CXType_ULong | CXType_ULongLong => Some("u64"),
        CXType_Float => Some("f32"),
        CXType_Double => Some("f64"),
        _ => None,
    };
    if let Some(rust) = scalar {
        return CType::Rust(rust);
    }
    if canonical.kind == CXType_Record || canonical.kind == CXType_Enum {
        // SAFETY: as above.
        let name = spelling(unsafe { clang_getTypeDeclaration(canonical) });
        if let Some((_, rust)) = HALF_TYPES.iter().find(|(c, _)| *c == name) {
            return CType::Rust(rust);
        }
        if let Some((_, rust)) = BYTE_FLOATS.iter().find(|(c, _)| *c == name) {
            // SAFETY: as above.
            if unsafe { clang_Type_getSizeOf(canonical) } == 1 {
                return CType::Abi(rust);
            }
        }
        // SAFETY: as above.
        let qualified = take_string(unsafe { clang_getTypeSpelling(canonical) });
        let plain = !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
        // A type in a namespace or a template is not one bindgen binds by
        // its bare name.
        if plain && qualified.trim_start_matches("const ") == name {
            return CType::Named(name);
        }
    }
    // SAFETY: as above.
    CType::Unmapped(take_string(unsafe { clang_getTypeSpelling(ty) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_maps_only_when_its_pointee_does() {
        let bound = |name: &str| name == "Params";
        let ptr = |konst, to| CType::Ptr {
            konst,
            to: Box::new(to),
        };
        let abi = "::gpu_core";
        assert_eq!(
            ptr(true, CType::Rust("usize")).rust(&bound, abi),
            Ok("*const usize".into())
        );
        assert_eq!(
            ptr(false, ptr(true, CType::Named("Params".into()))).rust(&bound, abi),
            Ok("*mut *const Params".into())
        );
        assert_eq!(
            ptr(false, CType::Named("Span".into())).rust(&bound, abi),
            Err("Span".into()),
            "a struct the headers do not bind"
        );
        assert_eq!(
            CType::Unmapped("char16_t".into()).rust(&bound, abi),
            Err("char16_t".into())
        );
    }

    /// The regression of issue 42: `void *` became `*mut c_void`, which no
    /// launch takes, and `bool` and fp8 parameters left their kernels
    /// without a marker.
    #[test]
    fn void_pointers_bools_and_byte_floats_map_to_launchable_types() {
        let bound = |_: &str| false;
        let ptr = |konst, to| CType::Ptr {
            konst,
            to: Box::new(to),
        };
        let abi = "::gpu_core";
        assert_eq!(
            ptr(true, CType::Void).rust(&bound, abi),
            Ok("::gpu_core::ConstVoidPtr".into())
        );
        assert_eq!(
            ptr(false, CType::Void).rust(&bound, abi),
            Ok("::gpu_core::MutVoidPtr".into())
        );
        assert_eq!(CType::Bool.rust(&bound, abi), Ok("bool".into()));
        assert_eq!(
            ptr(true, CType::Abi("Fp8E4M3")).rust(&bound, abi),
            Ok("*const ::gpu_core::Fp8E4M3".into())
        );
        assert_eq!(
            ptr(true, CType::Bool).rust(&bound, abi),
            Err("const bool *".into())
        );
        assert_eq!(
            ptr(false, ptr(true, CType::Void)).rust(&bound, abi),
            Err("const void **".into())
        );
        assert_eq!(CType::Void.rust(&bound, abi), Err("void".into()));
    }
}
