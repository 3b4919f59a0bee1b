//! CPU references of every family, the GPU tests' oracles: the strided
//! layout walk the kernels' `strided.cuh` does, the ops computed in f64 and
//! rounded to the element type, the indexing ops and the launchers' work.

use half::{bf16, f16};

/// An element type of the families, as the kernels see it: passed by value
/// where a kernel takes a scalar of it (affine's `mul`, fill's `value`).
pub trait Elem:
    Copy
    + PartialEq
    + std::fmt::Debug
    + gpu_core::GpuRepr
    + gpu_core::AbiParam<Kind = gpu_core::param_kind::ByValue<Self>>
    + 'static
{
    /// The dtype's suffix in kernel names (`f32`, `bf16`, ...).
    const DTYPE: &'static str;
    /// Whether it is an integer (the ops wrap; no tolerance).
    const INTEGER: bool;
    /// The value as f64 (exact for every dtype's values the tests use).
    fn to_f64(self) -> f64;
    /// The f64 rounded (or wrapped, for integers) to this type.
    fn from_f64(v: f64) -> Self;
}

macro_rules! float_elem {
    ($t:ty, $d:literal, $to:expr, $from:expr) => {
        impl Elem for $t {
            const DTYPE: &'static str = $d;
            const INTEGER: bool = false;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
        }
    };
}

float_elem!(f32, "f32", f64::from, |v| v as f32);
float_elem!(f64, "f64", |v| v, |v| v);
float_elem!(f16, "f16", f16::to_f64, f16::from_f64);
float_elem!(bf16, "bf16", bf16::to_f64, bf16::from_f64);

macro_rules! int_elem {
    ($t:ty, $d:literal) => {
        impl Elem for $t {
            const DTYPE: &'static str = $d;
            const INTEGER: bool = true;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                // Wraps as the kernels' C conversions of the promoted value do
                // (the tests keep values where that is defined).
                (v as i128) as $t
            }
        }
    };
}

int_elem!(u8, "u8");
int_elem!(u32, "u32");
int_elem!(i64, "i64");

/// A strided view: sizes and, per operand, strides (elements).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The sizes, outermost first.
    pub dims: Vec<usize>,
    /// One stride list per operand, each as long as `dims`.
    pub strides: Vec<Vec<usize>>,
}

impl Layout {
    /// The `info` array the kernels take: dims, then each operand's strides.
    pub fn info(&self) -> Vec<usize> {
        let mut info = self.dims.clone();
        self.strides.iter().for_each(|s| info.extend(s));
        info
    }

    /// The element count.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The offset of the `i`-th element (row-major) of operand `operand`.
    pub fn offset(&self, mut i: usize, operand: usize) -> usize {
        let mut offset = 0;
        for (d, s) in self.dims.iter().zip(&self.strides[operand]).rev() {
            offset += (i % d) * s;
            i /= d;
        }
        offset
    }

    /// Whether operand `operand` is a dense row-major walk (size-1 dims
    /// may have any stride), as `strided.cuh`'s `is_contiguous` decides.
    pub fn is_contiguous(&self, operand: usize) -> bool {
        let mut expected = 1;
        for (d, s) in self.dims.iter().zip(&self.strides[operand]).rev() {
            if *d > 1 && *s != expected {
                return false;
            }
            expected *= d;
        }
        true
    }

    /// `x` read through operand `operand`'s strides, in row-major order.
    pub fn gather<T: Copy>(&self, x: &[T], operand: usize) -> Vec<T> {
        (0..self.numel())
            .map(|i| x[self.offset(i, operand)])
            .collect()
    }
}

/// The unary op `op` (a kernel name's prefix, `uexp`, ...) in f64.
pub fn unary(op: &str, x: f64) -> f64 {
    match op {
        "ucopy" => x,
        "uneg" => -x,
        "uexp" => x.exp(),
        "ulog" => x.ln(),
        "usqr" => x * x,
        "usqrt" => x.sqrt(),
        "uabs" => x.abs(),
        "urecip" => 1.0 / x,
        "urelu" => x.max(0.0),
        "ugelu" => {
            let inner = 0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        }
        other => panic!("no unary op {other}"),
    }
}

/// The binary op `op` (`badd`, ...) on elements of `T`, as its kernel does
/// it: halves in f32 then rounded, integers wrapping, the rest in `T`.
pub fn binary<T: Elem>(op: &str, x: T, y: T) -> T {
    let (a, b) = (x.to_f64(), y.to_f64());
    let v = match op {
        "badd" => a + b,
        "bsub" => a - b,
        "bmul" => a * b,
        "bdiv" if T::INTEGER => (a / b).trunc(),
        "bdiv" => a / b,
        "bminimum" => a.min(b),
        "bmaximum" => a.max(b),
        other => panic!("no binary op {other}"),
    };
    T::from_f64(v)
}

/// `ids[i] != 0 ? t[i] : f[i]` over the layout's three operands.
pub fn where_<I: Elem, T: Copy>(layout: &Layout, ids: &[I], t: &[T], f: &[T]) -> Vec<T> {
    (0..layout.numel())
        .map(|i| {
            if ids[layout.offset(i, 0)].to_f64() != 0.0 {
                t[layout.offset(i, 1)]
            } else {
                f[layout.offset(i, 2)]
            }
        })
        .collect()
}

/// `out[l, j, r] = x[l, ids[j], r]` for `x` of shape `(left, src_dim, right)`.
pub fn index_select<T: Copy>(x: &[T], ids: &[usize], left: usize, right: usize) -> Vec<T> {
    let src_dim = x.len() / (left * right);
    let mut out = Vec::with_capacity(left * ids.len() * right);
    for l in 0..left {
        for &j in ids {
            out.extend_from_slice(&x[(l * src_dim + j) * right..][..right]);
        }
    }
    out
}

/// `out[l, j, r] = x[l, ids[l, j, r], r]`, `ids` shaped `(left, ids_dim, right)`.
pub fn gather<T: Copy>(x: &[T], ids: &[usize], left: usize, right: usize) -> Vec<T> {
    let src_dim = x.len() / (left * right);
    let ids_dim = ids.len() / (left * right);
    (0..ids.len())
        .map(|i| {
            let (l, r) = (i / (ids_dim * right), i % right);
            x[(l * src_dim + ids[i]) * right + r]
        })
        .collect()
}

/// Each row of `x` (`ncols` wide) argsorted: ties keep no promised order.
pub fn argsort(x: &[f32], ncols: usize, ascending: bool) -> Vec<u32> {
    x.chunks(ncols)
        .flat_map(|row| {
            let mut idx: Vec<u32> = (0..row.len() as u32).collect();
            idx.sort_by(|&a, &b| {
                let order = row[a as usize].total_cmp(&row[b as usize]);
                if ascending {
                    order
                } else {
                    order.reverse()
                }
            });
            idx
        })
        .collect()
}

/// Per expert the tokens routed to it and its first slot; ids out of range
/// are dropped.
pub fn expert_offsets(ids: &[u32], num_experts: usize) -> (Vec<u32>, Vec<u32>) {
    let mut counts = vec![0u32; num_experts];
    for &e in ids {
        if let Some(c) = counts.get_mut(e as usize) {
            *c += 1;
        }
    }
    let offsets = counts
        .iter()
        .scan(0, |acc, &c| {
            let start = *acc;
            *acc += c;
            Some(start)
        })
        .collect();
    (counts, offsets)
}

/// Bytes of GGUF's q8_0 block: an f16 scale `d`, then 32 `i8` quants.
pub const Q8_0_BLOCK: usize = 34;

/// `dequantize_block_q8_0_f32`: `d * qs[j]` for each q8_0 block of
/// `blocks`.
pub fn dequantize_q8_0(blocks: &[u8]) -> Vec<f32> {
    blocks
        .chunks_exact(Q8_0_BLOCK)
        .flat_map(|b| {
            let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
            b[2..].iter().map(move |&q| d * f32::from(q as i8))
        })
        .collect()
}

/// `quantize_q8_0`: per 32 values, `d = amax / 127` (stored as f16) and
/// the quants `round(x / d)`, as the kernel computes them in f32.
pub fn quantize_q8_0(x: &[f32]) -> Vec<u8> {
    x.chunks_exact(32)
        .flat_map(|v| {
            let amax = v.iter().fold(0f32, |a, x| a.max(x.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            let mut block = half::f16::from_f32(d).to_le_bytes().to_vec();
            block.extend(v.iter().map(|x| (x * id).round() as i8 as u8));
            block
        })
        .collect()
}

/// `__nv_fp8_e4m3` as f32: a sign, 4 exponent bits (bias 7) and 3 mantissa
/// bits, subnormals below; `0x7f` and `0xff` are NaN (no infinities).
pub fn fp8_e4m3_to_f32(bits: u8) -> f32 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 3) & 0xf);
    let man = f32::from(bits & 7);
    if bits & 0x7f == 0x7f {
        return f32::NAN;
    }
    sign * if exp == 0 {
        man / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + man / 8.0) * 2f32.powi(exp - 7)
    }
}

/// The e4m3 code of `x` where `x` is exactly an e4m3 value (`+0` for 0).
pub fn fp8_e4m3_exact(x: f32) -> Option<u8> {
    (0..=255u8).find(|&b| fp8_e4m3_to_f32(b) == x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transposed_layout_walks_columns_and_is_not_contiguous() {
        let t = Layout {
            dims: vec![2, 3],
            strides: vec![vec![1, 2]],
        };
        assert!(!t.is_contiguous(0));
        assert_eq!(t.gather(&[0, 1, 2, 3, 4, 5], 0), [0, 2, 4, 1, 3, 5]);
        assert_eq!(t.info(), [2, 3, 1, 2]);
        // A size-1 dimension's stride does not matter; a broadcast (stride
        // 0) over a real dimension is not dense.
        let one = Layout {
            dims: vec![1, 4],
            strides: vec![vec![99, 1], vec![0, 1]],
        };
        assert!(one.is_contiguous(0) && one.is_contiguous(1));
        let broadcast = Layout {
            dims: vec![3, 2],
            strides: vec![vec![0, 1]],
        };
        assert!(!broadcast.is_contiguous(0));
        assert_eq!(broadcast.gather(&[7, 8], 0), [7, 8, 7, 8, 7, 8]);
    }

    #[test]
    fn an_empty_layout_has_one_element_and_no_offset() {
        let scalar = Layout {
            dims: vec![],
            strides: vec![vec![]],
        };
        assert_eq!(scalar.numel(), 1);
        assert_eq!(scalar.offset(0, 0), 0);
        assert!(scalar.is_contiguous(0));
    }

    #[test]
    fn integer_ops_wrap_and_divide_toward_zero() {
        assert_eq!(binary("bsub", 3u8, 5u8), 254);
        assert_eq!(binary("badd", u32::MAX, 2), 1);
        assert_eq!(binary("bdiv", -7i64, 2), -3);
        assert_eq!(binary("bminimum", 3i64, -4), -4);
    }

    #[test]
    fn routing_drops_out_of_range_experts_and_scans_exclusively() {
        let (counts, offsets) = expert_offsets(&[2, 0, 2, 9, 1, 2], 3);
        assert_eq!(counts, [1, 1, 3]);
        assert_eq!(offsets, [0, 1, 2]);
        assert_eq!(expert_offsets(&[], 2), (vec![0, 0], vec![0, 0]));
    }

    #[test]
    fn index_select_and_gather_pick_along_the_middle_dimension() {
        // x: (left 2, src_dim 3, right 2)
        let x: Vec<u32> = (0..12).collect();
        assert_eq!(index_select(&x, &[2, 0], 2, 2), [4, 5, 0, 1, 10, 11, 6, 7]);
        let ids = [1, 0, 2, 2];
        assert_eq!(gather(&x, &ids, 2, 2), [2, 1, 10, 11]);
    }
}
