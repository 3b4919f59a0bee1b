//! The kernels each module's families stamp out, by name: what the images
//! must hold (tests/image.rs checks the sets are equal, not merely
//! included) and what the GPU tests launch. The names follow the macros in
//! `kernels/`: `<op>_<dtype>`, `cast_<from>_<to>`, `where_<index>_<dtype>`,
//! `is_`/`gather_<index>_<dtype>`, and the reduce templates' mangled names.

use gpu_core::FatbinImage;

use crate::modules;

/// The float dtypes, as the kernels' names spell them.
pub const FLOATS: &[&str] = &["f32", "f64", "f16", "bf16"];
/// Every dtype of the binary, affine and fill families.
pub const DTYPES: &[&str] = &["f32", "f64", "f16", "bf16", "u8", "u32", "i64"];
/// The unary ops of the float families (`ucopy` also for u8, u32, i64).
pub const UNARY_OPS: &[&str] = &[
    "ucopy", "uneg", "uexp", "ulog", "usqr", "usqrt", "uabs", "urecip", "urelu", "ugelu",
];
/// The binary ops, over every dtype.
pub const BINARY_OPS: &[&str] = &["badd", "bsub", "bmul", "bdiv", "bminimum", "bmaximum"];
/// The casts, `(from, to)`.
pub const CASTS: &[(&str, &str)] = &[
    ("f32", "f16"),
    ("f16", "f32"),
    ("f32", "bf16"),
    ("bf16", "f32"),
    ("f16", "bf16"),
    ("f32", "f64"),
    ("f64", "f32"),
    ("u8", "f32"),
    ("u32", "f32"),
    ("i64", "f32"),
    ("f32", "u8"),
];
/// The index dtypes of `where_*`.
pub const WHERE_INDEX: &[&str] = &["u8", "u32", "i64"];
/// The `(index, dtype)` pairs of `is_*` and `gather_*`.
pub const INDEXING: &[(&str, &str)] = &[
    ("u32", "f32"),
    ("u32", "f16"),
    ("u32", "u32"),
    ("i64", "f32"),
    ("i64", "f16"),
    ("i64", "u32"),
];

/// quantized.cu's kernels: q8_0 blocks behind `void *`, a `bool` flag,
/// fp8, and `affine_fp8e4m3`, which only the sm_89+ device passes define
/// (the module's image holds it in its sm_90 SASS and compute_90 PTX).
pub const QUANTIZED: &[&str] = &[
    "dequantize_block_q8_0_f32",
    "quantize_q8_0",
    "fill_flag_f32",
    "cast_fp8e4m3_f32",
    "affine_fp8e4m3",
];

/// `fast_sum<T>`'s mangled name for the dtype (`f32`, `f64`, `f16`, `bf16`).
pub fn fast_sum(dtype: &str) -> String {
    reduce_name("fast_sum", dtype)
}

/// `fast_max<T>`'s mangled name for the dtype (`f32`, `f16`).
pub fn fast_max(dtype: &str) -> String {
    reduce_name("fast_max", dtype)
}

/// The Itanium mangling of `NAME<T>(size_t, size_t, size_t, const size_t *,
/// const T *, T *)`: a builtin `T` is one letter and its later uses
/// substitution 2; a class name (`6__half`) adds one substitution.
fn reduce_name(name: &str, dtype: &str) -> String {
    let (t, tail) = match dtype {
        "f32" => ("f", "PKT_PS2_"),
        "f64" => ("d", "PKT_PS2_"),
        "f16" => ("6__half", "PKT_PS3_"),
        "bf16" => ("13__nv_bfloat16", "PKT_PS3_"),
        other => panic!("no reduce instantiation for {other}"),
    };
    format!("_Z8{name}I{t}EvmmmPKm{tail}")
}

/// Every module's image with the kernels it must hold, exactly.
pub fn expected() -> Vec<(&'static FatbinImage, Vec<String>)> {
    let mut unary: Vec<String> = UNARY_OPS
        .iter()
        .flat_map(|op| FLOATS.iter().map(move |d| format!("{op}_{d}")))
        .collect();
    unary.extend(["u8", "u32", "i64"].map(|d| format!("ucopy_{d}")));
    let binary = BINARY_OPS
        .iter()
        .flat_map(|op| DTYPES.iter().map(move |d| format!("{op}_{d}")))
        .collect();
    let affine = DTYPES.iter().map(|d| format!("affine_{d}")).collect();
    let fill = ["fill", "copy2d"]
        .iter()
        .flat_map(|op| DTYPES.iter().map(move |d| format!("{op}_{d}")))
        .collect();
    let cast = CASTS.iter().map(|(a, b)| format!("cast_{a}_{b}")).collect();
    let ternary = WHERE_INDEX
        .iter()
        .flat_map(|i| FLOATS.iter().map(move |d| format!("where_{i}_{d}")))
        .collect();
    let indexing = ["is", "gather"]
        .iter()
        .flat_map(|op| INDEXING.iter().map(move |(i, d)| format!("{op}_{i}_{d}")))
        .collect();
    let mut reduce: Vec<String> = FLOATS.iter().map(|d| fast_sum(d)).collect();
    reduce.extend(["f32", "f16"].map(fast_max));
    let quantized = QUANTIZED.iter().map(|k| k.to_string()).collect();
    vec![
        (&modules::UNARY, unary),
        (&modules::BINARY, binary),
        (&modules::AFFINE, affine),
        (&modules::FILL, fill),
        (&modules::CAST, cast),
        (&modules::TERNARY, ternary),
        (&modules::INDEXING, indexing),
        (&modules::REDUCE, reduce),
        (&modules::QUANTIZED, quantized),
    ]
}
