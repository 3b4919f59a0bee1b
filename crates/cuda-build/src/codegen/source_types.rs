//! The Rust type of a kernel parameter read from a `.cu` definition, as the
//! header path maps it through bindgen: pointers to pointers of the mapped
//! type (`const` pointee: `*const`), `size_t`/`ptrdiff_t` as `usize`/`isize`
//! (by the typedef's name, before it becomes `unsigned long`), the CUDA half
//! types as the `half` crate's, fixed-width numbers, and structs and enums by
//! name (mapped only where the headers bind them, which the assembler
//! decides). Anything else (`bool`, references, classes of the source) has no
//! mapping, and its kernel gets no marker.

// clang-sys's constants keep C's names, matched as patterns here.
#![allow(non_upper_case_globals)]

use clang_sys::*;

use super::scan::{spelling, take_string};
use super::HALF_TYPES;

/// A parameter type, mapped or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CType {
    /// A Rust path: `f32`, `usize`, `::half::f16`, `::core::ffi::c_void`.
    Rust(&'static str),
    /// A pointer.
    Ptr { konst: bool, to: Box<CType> },
    /// A struct or enum, by its C name: mapped if the headers bind it.
    Named(String),
    /// No mapping: the C type as written.
    Unmapped(String),
}

impl CType {
    /// The Rust type, with `bound` saying which named types the headers bind;
    /// `Err` with the C spelling of the part that has no mapping.
    pub(super) fn rust(&self, bound: &dyn Fn(&str) -> bool) -> Result<String, String> {
        match self {
            CType::Rust(path) => Ok((*path).to_string()),
            CType::Ptr { konst, to } => {
                let inner = to.rust(bound)?;
                Ok(format!("*{} {inner}", if *konst { "const" } else { "mut" }))
            }
            CType::Named(name) if bound(name) => Ok(name.clone()),
            CType::Named(name) => Err(name.clone()),
            CType::Unmapped(c) => Err(c.clone()),
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
    let scalar = match canonical.kind {
        CXType_Void => Some("::core::ffi::c_void"),
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
        assert_eq!(
            ptr(true, CType::Rust("usize")).rust(&bound),
            Ok("*const usize".into())
        );
        assert_eq!(
            ptr(false, ptr(true, CType::Named("Params".into()))).rust(&bound),
            Ok("*mut *const Params".into())
        );
        assert_eq!(
            ptr(false, CType::Named("Span".into())).rust(&bound),
            Err("Span".into()),
            "a struct the headers do not bind"
        );
        assert_eq!(
            CType::Unmapped("bool".into()).rust(&bound),
            Err("bool".into())
        );
    }
}
