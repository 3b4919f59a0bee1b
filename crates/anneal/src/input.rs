//! The one validation of an anneal run's input, at the boundary: sizes
//! (before anything is allocated), parameters, and coordinates (finite and
//! small enough that squared distances stay finite in f32). Its result,
//! [`Problem`], is what the engines and the driver take.

use crate::bindings::types::KILN_ANNEAL_WGMMA_LIST_WORDS;
use crate::{
    error::{AnnealError, PartProblem},
    vocab::{Dtype, Params, Points},
};

/// A checked anneal input: `n × d` points, `m` initial anchors, parameters
/// with `max_anchors` resolved. Made only by [`validate`].
#[derive(Debug, Clone)]
pub struct Problem<'a> {
    points: Points<'a>,
    n: usize,
    d: usize,
    m: usize,
    params: Params,
    max_anchors: usize,
    /// The rows of the whole input that `points` holds (`0..n`, except in
    /// one process of several: [`validate_rows`]).
    rows: std::ops::Range<usize>,
}

impl<'a> Problem<'a> {
    /// The points, row-major: rows [`Problem::rows`] of the input.
    pub fn points(&self) -> Points<'a> {
        self.points
    }
    /// The rows of the input [`Problem::points`] holds: all of them
    /// (`0..n`) but in one process of a multi-process run.
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.rows.clone()
    }
    /// Points (of the whole input).
    pub fn n(&self) -> usize {
        self.n
    }
    /// Dimensions.
    pub fn d(&self) -> usize {
        self.d
    }
    /// Initial anchors.
    pub fn m(&self) -> usize {
        self.m
    }
    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }
    /// Anchors at most (`params.max_anchors`, or `2 m` for 0).
    pub fn max_anchors(&self) -> usize {
        self.max_anchors
    }
}

/// The largest coordinate magnitude accepted at dimension `d`:
/// `sqrt(f32::MAX / (16 d))`. The engines compute a squared distance as
/// `|x|² + |c|² - 2 x·c` in f32, over `d` dimensions; anchors are means of
/// points, so with every coordinate within `B` each term is at most `d B²`
/// and the sum at most `4 d B²`. The bound keeps that 4 times below
/// `f32::MAX`.
pub fn coordinate_bound(d: usize) -> f32 {
    (f64::from(f32::MAX) / (16.0 * d.max(1) as f64)).sqrt() as f32
}

/// Checks the sizes and the parameters, without the points (so that a
/// caller can refuse before it allocates them); returns `max_anchors`
/// resolved.
pub fn check_sizes(n: usize, d: usize, m: usize, params: &Params) -> Result<usize, AnnealError> {
    if n == 0 {
        return Err(AnnealError::NoPoints);
    }
    if d == 0 {
        return Err(AnnealError::NoDimensions);
    }
    if m == 0 {
        return Err(AnnealError::NoAnchors);
    }
    if m > n {
        return Err(AnnealError::MoreAnchorsThanPoints { m, n });
    }
    for (what, value) in [("n", n), ("d", d)] {
        if u32::try_from(value).is_err() {
            return Err(AnnealError::OverU32 { what, value });
        }
    }
    if n.checked_mul(d)
        .and_then(|v| v.checked_mul(4))
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(AnnealError::OverAddressSpace { n, d });
    }
    check_params(params)?;
    let max_anchors = if params.max_anchors == 0 {
        2 * m
    } else {
        params.max_anchors
    };
    if max_anchors < m {
        return Err(AnnealError::MaxAnchorsBelowM { max_anchors, m });
    }
    if u32::try_from(max_anchors).is_err() {
        return Err(AnnealError::OverU32 {
            what: "max_anchors",
            value: max_anchors,
        });
    }
    Ok(max_anchors)
}

fn check_params(params: &Params) -> Result<(), AnnealError> {
    let bad = |name, value: &dyn std::fmt::Display, expected| {
        Err(AnnealError::BadParam {
            name,
            value: value.to_string(),
            expected,
        })
    };
    if params.max_iters == 0 {
        return Err(AnnealError::NoIterations);
    }
    if !(params.cooling > 0.0 && params.cooling <= 1.0) {
        return bad("cooling", &params.cooling, "in (0, 1]");
    }
    if !(params.t0 >= 0.0 && params.t0.is_finite()) {
        return bad("t0", &params.t0, "a finite temperature >= 0");
    }
    if !(params.tol >= 0.0 && params.tol.is_finite()) {
        return bad("tol", &params.tol, "a finite value >= 0");
    }
    for (name, value) in [
        ("merge_frac", params.merge_frac),
        ("split_load", params.split_load),
        ("split_var", params.split_var),
    ] {
        if !(value >= 0.0 && value.is_finite()) {
            return bad(name, &value, "a finite value >= 0");
        }
    }
    Ok(())
}

/// Checks the input and the parameters: the only way to a [`Problem`].
pub fn validate<'a>(
    points: Points<'a>,
    n: usize,
    d: usize,
    m: usize,
    params: &Params,
) -> Result<Problem<'a>, AnnealError> {
    let max_anchors = check_sizes(n, d, m, params)?;
    check_parts(points, d)?;
    if n.checked_mul(d) != Some(points.len()) {
        return Err(AnnealError::ValueCount {
            values: points.len(),
            n,
            d,
        });
    }
    check_coordinates(points, d)?;
    Ok(Problem {
        points,
        n,
        d,
        m,
        params: params.clone(),
        max_anchors,
        rows: 0..n,
    })
}

/// [`validate`] for one process of several: `points` are rows `rows` of an
/// `n × d` input (the sizes and parameters are checked against the whole,
/// the coordinates of these rows only, and a bad one is named by its row in
/// the whole input). At least one row.
pub fn validate_rows<'a>(
    points: Points<'a>,
    rows: std::ops::Range<usize>,
    n: usize,
    d: usize,
    m: usize,
    params: &Params,
) -> Result<Problem<'a>, AnnealError> {
    let max_anchors = check_sizes(n, d, m, params)?;
    if rows.is_empty() || rows.end > n {
        return Err(AnnealError::BadRows { rows, n });
    }
    check_parts(points, d)?;
    if rows.len().checked_mul(d) != Some(points.len()) {
        return Err(AnnealError::RowValueCount {
            values: points.len(),
            rows,
            d,
        });
    }
    check_coordinates(points, d).map_err(|e| e.numbered_from(rows.start))?;
    Ok(Problem {
        points,
        n,
        d,
        m,
        params: params.clone(),
        max_anchors,
        rows,
    })
}

/// Refuses [`Points::Parts`] that nest, mix element types or split a row.
fn check_parts(points: Points<'_>, d: usize) -> Result<(), AnnealError> {
    let Points::Parts(parts) = points else {
        return Ok(());
    };
    let dtype = points.dtype();
    for (i, part) in parts.iter().enumerate() {
        let problem = if matches!(part, Points::Parts(_)) {
            PartProblem::Nested
        } else if part.dtype() != dtype {
            PartProblem::MixedTypes
        } else if part.len() % d != 0 {
            PartProblem::PartialRows
        } else {
            continue;
        };
        return Err(AnnealError::BadPart { part: i, problem });
    }
    Ok(())
}

/// Refuses the first coordinate that is NaN, infinite or over
/// [`coordinate_bound`] (in parallel: inputs run to billions of values).
fn check_coordinates(points: Points<'_>, d: usize) -> Result<(), AnnealError> {
    let bound = coordinate_bound(d);
    let mut offset = 0;
    let mut bad = None;
    for piece in points.pieces(0..points.len()) {
        let found = match piece {
            Points::F32(v) => first_out(bytemuck::cast_slice::<f32, u32>(v), f32_limit(bound)),
            Points::F16(v) => first_out(v, half_limit(bound, F16_BITS)),
            Points::BF16(v) => first_out(v, half_limit(bound, BF16_BITS)),
            Points::Parts(_) => unreachable!("pieces are flat"),
        };
        if let Some(i) = found {
            bad = Some(offset + i);
            break;
        }
        offset += piece.len();
    }
    let Some(i) = bad else {
        return Ok(());
    };
    let (point, dim, value) = (i / d, i % d, points.get(i));
    Err(if value.is_finite() {
        AnnealError::OutOfRange {
            point,
            dim,
            value,
            bound,
        }
    } else {
        AnnealError::NonFinite { point, dim }
    })
}

/// The coordinate rule (`!x.is_finite() || |x| > bound`) on the bits: a
/// float's magnitude orders as its bits with the sign cleared, and NaN and
/// infinity lie above every finite value, so a value is out exactly when
/// its magnitude bits exceed those of the largest value within the bound.
/// An integer compare, which the compiler vectorises.
trait MagnitudeBits: Copy + Send + Sync {
    /// The bits with the sign cleared.
    fn magnitude(self) -> Self;
}

impl MagnitudeBits for u32 {
    fn magnitude(self) -> Self {
        self & 0x7fff_ffff
    }
}

impl MagnitudeBits for u16 {
    fn magnitude(self) -> Self {
        self & 0x7fff
    }
}

/// The magnitude bits of the largest f32 within `bound` (a finite f32 >= 0).
fn f32_limit(bound: f32) -> u32 {
    bound.to_bits()
}

/// A 16-bit float type's conversions: from f32 to its bits (to nearest),
/// and from its bits to f32 (exact).
type HalfBits = (fn(f32) -> u16, fn(u16) -> f32);

const F16_BITS: HalfBits = (
    |x| half::f16::from_f32(x).to_bits(),
    |b| half::f16::from_bits(b).to_f32(),
);

const BF16_BITS: HalfBits = (
    |x| half::bf16::from_f32(x).to_bits(),
    |b| half::bf16::from_bits(b).to_f32(),
);

/// The magnitude bits of the largest finite value of a 16-bit float type
/// within `bound` (a finite f32 >= 0): the nearest, stepped down a value
/// when it rounded up or past the type's range.
fn half_limit(bound: f32, (to_bits, to_f32): HalfBits) -> u16 {
    let infinity = to_bits(f32::INFINITY);
    let nearest = to_bits(bound).min(infinity);
    if nearest == infinity || to_f32(nearest) > bound {
        nearest - 1
    } else {
        nearest
    }
}

/// Whether every value in `bytes` (values of `dtype` in the host's byte
/// order, aligned for it) is within [`validate`]'s rule for dimension `d`:
/// the check of a piece of a chunk as it is read. `false` for misaligned
/// bytes, which the caller then checks as points.
pub(crate) fn coordinates_clean(bytes: &[u8], dtype: Dtype, d: usize) -> bool {
    let bound = coordinate_bound(d);
    fn clean<T: MagnitudeBits + PartialOrd + bytemuck::Pod>(bytes: &[u8], limit: T) -> bool {
        bytemuck::try_cast_slice::<u8, T>(bytes).is_ok_and(|values| {
            !values
                .iter()
                .fold(false, |any, b| any | (b.magnitude() > limit))
        })
    }
    match dtype {
        Dtype::F32 => clean(bytes, f32_limit(bound)),
        Dtype::F16 => clean(bytes, half_limit(bound, F16_BITS)),
        Dtype::BF16 => clean(bytes, half_limit(bound, BF16_BITS)),
    }
}

/// The index of the first value whose magnitude bits exceed `limit`.
fn first_out<T: MagnitudeBits + PartialOrd>(values: &[T], limit: T) -> Option<usize> {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    let out = |b: &T| b.magnitude() > limit;
    values
        .par_chunks(CHUNK)
        .enumerate()
        .find_map_first(|(c, chunk)| {
            // Vectorised: a chunk is searched only when it holds one.
            let any = chunk.iter().fold(false, |any, b| any | out(b));
            any.then(|| chunk.iter().position(out).map(|i| c * CHUNK + i))
                .flatten()
        })
}

/// Checks `m × d` anchors given from outside a run (an index read from
/// disk or made in memory) as [`validate`] checks the points: every value
/// finite and within [`coordinate_bound`] of `d`, so that the distances to
/// points within the same bound stay finite in f32 (the bound's
/// derivation holds for any anchor within it, not only for means).
pub fn check_anchors(anchors: &[f32], m: usize, d: usize) -> Result<(), AnnealError> {
    let values = crate::vocab::anchor_values(anchors, m, d)?;
    if m == 0 {
        return Err(AnnealError::NoAnchors);
    }
    if d == 0 {
        return Err(AnnealError::NoDimensions);
    }
    let bound = coordinate_bound(d);
    // The points' rule on the bits, as every other check of coordinates.
    let Some(i) = first_out(bytemuck::cast_slice::<f32, u32>(values), f32_limit(bound)) else {
        return Ok(());
    };
    let (anchor, dim, value) = (i / d, i % d, values[i]);
    Err(if value.is_finite() {
        AnnealError::AnchorOutOfRange {
            anchor,
            dim,
            value,
            bound,
        }
    } else {
        AnnealError::AnchorNonFinite { anchor, dim, value }
    })
}

/// Bytes of host memory a run holds at its peak: `held`, the bytes of the
/// points the caller holds in memory (0 for memory-mapped input, whose
/// pages the kernel can drop and read again), and for the CPU engine their
/// f32 copy, its packed copy and per-point state. `None` when the figure
/// overflows.
pub fn host_bytes(n: usize, d: usize, max_anchors: usize, held: u64, cpu: bool) -> Option<u64> {
    let (n, d, a) = (n as u64, d as u64, max_anchors as u64);
    let values = n.checked_mul(d)?;
    let engine = if cpu {
        // f32 copy + packed copy, assignment/distance/member arrays, anchors.
        values
            .checked_mul(8)?
            .checked_add(n.checked_mul(12)?)?
            .checked_add(a.checked_mul(d)?.checked_mul(16)?)?
    } else {
        a.checked_mul(d)?.checked_mul(8)?
    };
    held.checked_add(engine)
}

/// Elements of the staging buffer through which bf16 points go to the GPU
/// (converted there to f32): 32 MiB of bits at a time.
pub const BF16_STAGING: usize = 1 << 24;

/// Bytes of one point's candidate list where the wgmma kernels run
/// (`KILN_ANNEAL_WGMMA_LIST_WORDS` words, anneal_wgmma.h): the device-memory
/// figures count them for every point.
pub(crate) const LIST_BYTES: u64 = 4 * KILN_ANNEAL_WGMMA_LIST_WORDS as u64;

/// Bytes of device memory the GPU engine allocates over all its GPUs: the
/// points (f16 as they are, f32 and bf16 as f32, bf16 through a bounded
/// staging buffer) and their f16 copy (the tensor-core assignment's, `d`
/// rounded up to 32), per-point state (norm, two centred norms, assignment, distance, the
/// sort's keys, values and order, the unresolved list and the list kernel's
/// packed best, about 8 bytes of the sort's scratch, and the wgmma kernel's
/// candidate list of `KILN_ANNEAL_WGMMA_LIST_WORDS` words), the f64 sums of the
/// pieces of 256 members (`n / 256 + m` of them) and per-anchor buffers on
/// each (the anchors twice: maintenance writes the new ones beside the old).
pub fn device_bytes(
    n: usize,
    d: usize,
    max_anchors: usize,
    dtype: Dtype,
    gpus: usize,
) -> Option<u64> {
    let (n, d, a) = (n as u64, d as u64, max_anchors as u64);
    let values = n.checked_mul(d)?;
    let points = match dtype {
        Dtype::F16 => values.checked_mul(2)?,
        Dtype::F32 => values.checked_mul(4)?,
        Dtype::BF16 => values
            .checked_mul(4)?
            .checked_add(values.min(BF16_STAGING as u64) * 2)?,
    };
    let copy = n.checked_mul(d.div_ceil(32).max(1) * 32)?.checked_mul(2)?;
    let pieces = (n.div_ceil(256).checked_add(a)?).checked_mul(d.checked_add(1)?)?;
    let points = points
        .checked_add(copy)?
        .checked_add(pieces.checked_mul(8)?)?;
    let per_point = n.checked_mul(56 + LIST_BYTES)?;
    let per_anchor = a.checked_mul(d.checked_add(8)?)?.checked_mul(20)?;
    points
        .checked_add(per_point)?
        .checked_add(per_anchor.checked_mul(gpus.max(1) as u64)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device-memory figure counts each point's wgmma candidate list
    /// (`KILN_ANNEAL_WGMMA_LIST_WORDS` words) beside its other state.
    #[test]
    fn the_device_figure_counts_each_points_candidate_list() {
        use crate::bindings::types::KILN_ANNEAL_WGMMA_LIST_WORDS;
        let (n, d, m) = (1000, 64, 10);
        let list_bytes = n as u64 * 4 * u64::from(KILN_ANNEAL_WGMMA_LIST_WORDS);
        let with = device_bytes(n, d, m, Dtype::F32, 1).unwrap();
        let values = (n * d * 4) as u64 + (n * d * 2) as u64;
        let pieces = ((n.div_ceil(256) + m) * (d + 1) * 8) as u64;
        let anchors = (m * (d + 8) * 20) as u64;
        assert_eq!(with, values + pieces + n as u64 * 56 + list_bytes + anchors);
    }

    /// The rule on the bits refuses exactly what the rule on the values
    /// does: every f16 and bf16, and f32s around the bound and special ones,
    /// for bounds inside and past each type's range.
    #[test]
    fn the_bit_rule_is_the_value_rule_for_every_16_bit_value_and_f32_edges() {
        let out = |x: f32, bound: f32| !x.is_finite() || x.abs() > bound;
        let bounds = [
            0.0,
            1.0,
            1.5,
            1000.3,
            65504.0,
            65520.0,
            1e9,
            3.0e38,
            f32::MAX,
        ];
        for bound in bounds {
            for (bits, name) in [(F16_BITS, "f16"), (BF16_BITS, "bf16")] {
                let limit = half_limit(bound, bits);
                for b in 0..=u16::MAX {
                    assert_eq!(
                        b.magnitude() > limit,
                        out(bits.1(b), bound),
                        "{name} bits {b:#06x} against bound {bound}"
                    );
                }
            }
            let limit = f32_limit(bound);
            let up = f32::from_bits(bound.to_bits().saturating_add(1));
            for x in [
                0.0,
                -0.0,
                bound,
                -bound,
                up,
                -up,
                f32::INFINITY,
                f32::NAN,
                -f32::NAN,
            ]
            .into_iter()
            .chain([f32::MIN_POSITIVE, 1e-40, f32::MAX, f32::NEG_INFINITY])
            {
                assert_eq!(
                    x.to_bits().magnitude() > limit,
                    out(x, bound),
                    "f32 {x} against bound {bound}"
                );
            }
        }
    }

    /// The first value out is found wherever it lies, past the first
    /// search chunk too, and a clean input has none.
    #[test]
    fn the_first_value_out_is_found_in_any_chunk() {
        let n = (1 << 16) * 3 + 17;
        let mut values = vec![1.0f32.to_bits(); n];
        assert_eq!(first_out(&values, f32_limit(2.0)), None);
        for at in [n - 1, 1 << 16, 5, 0] {
            values[at] = f32::NAN.to_bits();
            assert_eq!(first_out(&values, f32_limit(2.0)), Some(at));
        }
    }

    /// An index's anchors go through the points' rule: each kind of bad
    /// value is named with its anchor and dimension, values at the bound
    /// pass, and a short slice is refused before any value is read.
    #[test]
    fn anchors_are_checked_by_the_points_rule() {
        let (m, d) = (3, 4);
        let bound = coordinate_bound(d);
        let mut anchors = vec![0.5f32; m * d];
        anchors[1] = bound;
        anchors[2] = -bound;
        anchors[3] = -0.0;
        assert!(check_anchors(&anchors, m, d).is_ok());
        let up = f32::from_bits(bound.to_bits() + 1);
        for (value, out_of_range) in [
            (up, true),
            (-up, true),
            (f32::MAX, true),
            (f32::NAN, false),
            (-f32::NAN, false),
            (f32::INFINITY, false),
            (f32::NEG_INFINITY, false),
        ] {
            let mut bad = anchors.clone();
            bad[2 * d + 1] = value;
            match check_anchors(&bad, m, d) {
                Err(AnnealError::AnchorOutOfRange {
                    anchor: 2, dim: 1, ..
                }) => assert!(out_of_range, "{value}"),
                Err(AnnealError::AnchorNonFinite {
                    anchor: 2, dim: 1, ..
                }) => assert!(!out_of_range, "{value}"),
                other => panic!("{value}: {other:?}"),
            }
        }
        assert!(matches!(
            check_anchors(&anchors[..m * d - 1], m, d),
            Err(AnnealError::AnchorValues { .. })
        ));
        assert!(matches!(
            check_anchors(&[], 0, d),
            Err(AnnealError::NoAnchors)
        ));
    }
}
