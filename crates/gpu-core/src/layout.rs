//! Struct layout checks: [`gpu_repr!`](crate::gpu_repr) for user-written
//! `#[repr(C)]` types (asserted at compile time against the C values), and
//! [`check_layout`] to compare a type against a table nvcc produced at run time.

use crate::error::LayoutMismatch;
use crate::GpuRepr;

/// Implements [`GpuRepr`] and [`AbiParam`](crate::AbiParam) (passed by value) for a
/// `#[repr(C)]` type, asserting at compile time that its size, alignment and
/// field offsets equal the C values given.
///
/// ```
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct Pair { a: u32, b: f32 }
/// gpu_core::gpu_repr!(Pair = "Pair" { size: 8, align: 4, fields: { a: 0, b: 4 } });
/// ```
///
/// Every field must be valid for every bit pattern (integers, floats, arrays
/// of them, other `GpuRepr` structs): that is the `unsafe` promise this macro
/// makes on the caller's behalf, so use it only for such types.
#[macro_export]
macro_rules! gpu_repr {
    ($t:ident = $c_name:literal { size: $size:literal, align: $align:literal, fields: { $($field:ident : $offset:literal),* $(,)? } }) => {
        const _: () = {
            ::core::assert!(::core::mem::size_of::<$t>() == $size, "size differs from C");
            ::core::assert!(::core::mem::align_of::<$t>() == $align, "alignment differs from C");
            $(::core::assert!(::core::mem::offset_of!($t, $field) == $offset, "field offset differs from C");)*
            // Every field of the type must be listed: a field left out would
            // have no offset check and no validity promise.
            let _ = |v: $t| {
                let $t { $($field: _),* } = v;
            };
        };
        // SAFETY: size, alignment and offsets are asserted above against the C
        // values; the caller of `gpu_repr!` promises every field is valid for
        // every bit pattern.
        unsafe impl $crate::GpuRepr for $t {
            const C_NAME: &'static str = $c_name;
            const SIZE: usize = $size;
            const ALIGN: usize = $align;
            const FIELD_OFFSETS: &'static [(&'static str, usize)] = &[$((::core::stringify!($field), $offset)),*];
        }
        impl $crate::AbiParam for $t {
            type Kind = $crate::param_kind::ByValue<$t>;
        }
    };
}

/// Compares `T`'s layout with what the C compiler reported: `fields` as
/// `(name, offset)`, `size` and `align`. Fields may come in any order.
pub fn check_layout<T: GpuRepr>(
    fields: &[(&str, usize)],
    size: usize,
    align: usize,
) -> Result<(), LayoutMismatch> {
    let type_name = T::C_NAME;
    if T::SIZE != size || std::mem::size_of::<T>() != size {
        return Err(LayoutMismatch::Size {
            type_name,
            rust: std::mem::size_of::<T>(),
            c: size,
        });
    }
    if T::ALIGN != align || std::mem::align_of::<T>() != align {
        return Err(LayoutMismatch::Align {
            type_name,
            rust: std::mem::align_of::<T>(),
            c: align,
        });
    }
    for &(field, rust) in T::FIELD_OFFSETS {
        match fields.iter().find(|(name, _)| *name == field) {
            None => {
                return Err(LayoutMismatch::MissingField {
                    type_name,
                    field: field.to_owned(),
                    in_rust: true,
                })
            }
            Some(&(_, c)) if c != rust => {
                return Err(LayoutMismatch::FieldOffset {
                    type_name,
                    field: field.to_owned(),
                    rust,
                    c,
                })
            }
            Some(_) => {}
        }
    }
    if let Some((field, _)) = fields
        .iter()
        .find(|(name, _)| !T::FIELD_OFFSETS.iter().any(|(f, _)| f == name))
    {
        return Err(LayoutMismatch::MissingField {
            type_name,
            field: (*field).to_owned(),
            in_rust: false,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_sys::types::BatchStructureDesc;

    const C_TABLE: &[(&str, usize)] = &[
        ("atom_offset", 0),
        ("ca_offset", 4),
        ("n_atoms", 8),
        ("n_residues", 12),
        ("lineage_hash", 16),
        ("country_id", 20),
        ("_pad", 21),
    ];

    #[test]
    fn matching_layout_passes() {
        check_layout::<BatchStructureDesc>(C_TABLE, 32, 16).unwrap();
    }

    #[test]
    fn size_24_instead_of_32_is_reported() {
        // The classic mistake the header warns about: forgetting align(16).
        let err = check_layout::<BatchStructureDesc>(C_TABLE, 24, 16).unwrap_err();
        assert_eq!(
            err,
            LayoutMismatch::Size {
                type_name: "BatchStructureDesc",
                rust: 32,
                c: 24
            }
        );
        assert!(err.to_string().contains("is 32 bytes in rust but 24 in c"));
    }

    #[test]
    fn moved_field_is_reported() {
        let mut table = C_TABLE.to_vec();
        table[5].1 = 24;
        let err = check_layout::<BatchStructureDesc>(&table, 32, 16).unwrap_err();
        assert_eq!(
            err,
            LayoutMismatch::FieldOffset {
                type_name: "BatchStructureDesc",
                field: "country_id".into(),
                rust: 20,
                c: 24
            }
        );
    }

    #[test]
    fn extra_c_field_is_reported() {
        let mut table = C_TABLE.to_vec();
        table.push(("flags", 24));
        let err = check_layout::<BatchStructureDesc>(&table, 32, 16).unwrap_err();
        assert!(matches!(
            err,
            LayoutMismatch::MissingField { in_rust: false, .. }
        ));
    }
}
