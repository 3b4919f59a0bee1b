//! The distance sweep in AVX-512: a register tile of one group of 12 rows ×
//! 2 anchor blocks (24 zmm accumulators), each row's coordinate broadcast
//! from memory straight into its FMAs, and an epilogue of masked compares
//! and moves.

// The AVX-512 intrinsics and the `avx512f` target feature are stable since
// Rust 1.89, the workspace's `rust-version`.

use std::arch::x86_64::*;

use super::{Packed, Sweep, AB, GROUP};

/// Anchor blocks per sweep: 12 rows × 2 zmm accumulators leave 8 of the 32
/// zmm registers for the anchor vectors and the broadcasts.
pub(super) const BLOCKS: usize = 2;

/// Folds blocks `b..b + take` (`take` is 1 or 2) into `sweep`'s minima.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn sweep(sweep: &mut Sweep<'_>, anchors: &Packed, b: usize, take: usize) {
    match take {
        2 => blocks::<2>(sweep, anchors, b),
        _ => blocks::<1>(sweep, anchors, b),
    }
}

#[target_feature(enable = "avx512f")]
fn blocks<const V: usize>(sweep: &mut Sweep<'_>, anchors: &Packed, b: usize) {
    let mut at = [&[][..]; V];
    let mut anchor_norms = [_mm512_setzero_ps(); V];
    for (v, (at, anchor_norms)) in at.iter_mut().zip(&mut anchor_norms).enumerate() {
        let (values, norms) = anchors.block(b + v);
        assert_eq!(values.len(), sweep.d * AB);
        *at = values;
        // SAFETY: `norms` is 16 f32, one unaligned zmm load.
        *anchor_norms = unsafe { _mm512_loadu_ps(norms.as_ptr()) };
    }
    let tile = Tile {
        at,
        anchor_norms,
        first_anchor: (b * AB) as u32,
    };
    for g in 0..sweep.groups() {
        tile.fold(sweep, g);
    }
}

/// `V` anchor blocks, ready for groups of rows.
struct Tile<'a, const V: usize> {
    /// Each `d × 16`, transposed.
    at: [&'a [f32]; V],
    anchor_norms: [__m512; V],
    first_anchor: u32,
}

impl<const V: usize> Tile<'_, V> {
    /// Group `g`'s rows against the blocks: dot products in registers, then
    /// distances folded into the running minima.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn fold(&self, sweep: &mut Sweep<'_>, g: usize) {
        let mut acc = [[_mm512_setzero_ps(); V]; GROUP];
        for (k, x) in sweep.group(g).chunks_exact(GROUP).enumerate() {
            let mut c = [_mm512_setzero_ps(); V];
            for (c, at) in c.iter_mut().zip(self.at) {
                // SAFETY: `at` is `d × 16` (asserted by `blocks`), `k < d`.
                *c = unsafe { _mm512_loadu_ps(at.as_ptr().add(k * AB)) };
            }
            for (acc, x) in acc.iter_mut().zip(x) {
                let x = _mm512_set1_ps(*x);
                for (acc, c) in acc.iter_mut().zip(c) {
                    *acc = _mm512_fmadd_ps(x, c, *acc);
                }
            }
        }
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let (zero, two, inf) = (
            _mm512_setzero_ps(),
            _mm512_set1_ps(2.0),
            _mm512_set1_ps(f32::INFINITY),
        );
        for (p, acc) in acc.iter().enumerate() {
            let row = g * GROUP + p;
            let point_norm = _mm512_set1_ps(sweep.norms[row]);
            let own = _mm512_set1_epi32(sweep.own(row) as i32);
            let (best_d, best_i) = (&mut sweep.best_d[row], &mut sweep.best_i[row]);
            // SAFETY: `best_d` and `best_i` are 16 lanes each.
            let (mut bd, mut bi) = unsafe {
                (
                    _mm512_loadu_ps(best_d.as_ptr()),
                    _mm512_loadu_si512(best_i.as_ptr().cast()),
                )
            };
            for (v, (acc, anchor_norms)) in acc.iter().zip(self.anchor_norms).enumerate() {
                let a = self.first_anchor + (v * AB) as u32;
                let index = _mm512_add_epi32(_mm512_set1_epi32(a as i32), lanes);
                // max(|x|² + |c|² - 2 x·c, 0), as the baseline computes it
                // (vmaxps returns its second operand, 0, for a NaN).
                let dd = _mm512_sub_ps(
                    _mm512_add_ps(point_norm, anchor_norms),
                    _mm512_mul_ps(two, *acc),
                );
                let dd = _mm512_max_ps(dd, zero);
                let dd = _mm512_mask_mov_ps(dd, _mm512_cmpeq_epi32_mask(index, own), inf);
                let better = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(dd, bd);
                bd = _mm512_mask_mov_ps(bd, better, dd);
                bi = _mm512_mask_mov_epi32(bi, better, index);
            }
            // SAFETY: as for the loads.
            unsafe {
                _mm512_storeu_ps(best_d.as_mut_ptr(), bd);
                _mm512_storeu_si512(best_i.as_mut_ptr().cast(), bi);
            }
        }
    }
}
