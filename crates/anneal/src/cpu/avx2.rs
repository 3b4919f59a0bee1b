//! The distance sweep in AVX2 + FMA: a register tile of half a group (6
//! rows) × one anchor block of 16 (two ymm per row: 12 accumulators of the
//! 16 ymm registers), each row's coordinate broadcast into its FMAs, and an
//! epilogue of vector compares and blends.

use std::arch::x86_64::*;

use super::{Packed, Sweep, AB, GROUP};

/// Rows per tile.
const P: usize = GROUP / 2;
/// f32 lanes of a ymm register.
const L: usize = 8;

/// Folds blocks `b..b + take` into `sweep`'s minima, one block at a time.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn sweep(sweep: &mut Sweep<'_>, anchors: &Packed, b: usize, take: usize) {
    for b in b..b + take {
        let (at, norms) = anchors.block(b);
        assert_eq!(at.len(), sweep.d * AB);
        // SAFETY: `norms` is 16 f32, two unaligned ymm loads.
        let anchor_norms = unsafe {
            [
                _mm256_loadu_ps(norms.as_ptr()),
                _mm256_loadu_ps(norms.as_ptr().add(L)),
            ]
        };
        let tile = Tile {
            at,
            anchor_norms,
            first_anchor: (b * AB) as u32,
        };
        for g in 0..sweep.groups() {
            tile.fold(sweep, g, 0);
            tile.fold(sweep, g, P);
        }
    }
}

/// One anchor block, ready for tiles of rows.
struct Tile<'a> {
    /// `d × 16`, transposed.
    at: &'a [f32],
    anchor_norms: [__m256; 2],
    first_anchor: u32,
}

impl Tile<'_> {
    /// Rows `offset..offset + 6` of group `g` against the block: dot
    /// products in registers, then distances folded into the running minima.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn fold(&self, sweep: &mut Sweep<'_>, g: usize, offset: usize) {
        let mut acc = [[_mm256_setzero_ps(); 2]; P];
        for (k, x) in sweep.group(g).chunks_exact(GROUP).enumerate() {
            // SAFETY: `at` is `d × 16` (asserted by `sweep`) and `k < d`.
            let c = unsafe {
                let at = self.at.as_ptr().add(k * AB);
                [_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(L))]
            };
            for (acc, x) in acc.iter_mut().zip(&x[offset..offset + P]) {
                let x = _mm256_set1_ps(*x);
                for (acc, c) in acc.iter_mut().zip(c) {
                    *acc = _mm256_fmadd_ps(x, c, *acc);
                }
            }
        }
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let (zero, two, inf) = (
            _mm256_setzero_ps(),
            _mm256_set1_ps(2.0),
            _mm256_set1_ps(f32::INFINITY),
        );
        for (p, acc) in acc.iter().enumerate() {
            let row = g * GROUP + offset + p;
            let point_norm = _mm256_set1_ps(sweep.norms[row]);
            let own = _mm256_set1_epi32(sweep.own(row) as i32);
            let (best_d, best_i) = (&mut sweep.best_d[row], &mut sweep.best_i[row]);
            for (h, (acc, anchor_norms)) in acc.iter().zip(self.anchor_norms).enumerate() {
                let index = _mm256_add_epi32(
                    _mm256_set1_epi32((self.first_anchor + (h * L) as u32) as i32),
                    lanes,
                );
                // SAFETY: `best_d` and `best_i` are 16 lanes, `h * L + L <= 16`.
                let (bd, bi) = unsafe {
                    (
                        _mm256_loadu_ps(best_d.as_ptr().add(h * L)),
                        _mm256_loadu_si256(best_i.as_ptr().add(h * L).cast()),
                    )
                };
                // max(|x|² + |c|² - 2 x·c, 0), as the baseline computes it
                // (vmaxps returns its second operand, 0, for a NaN); the
                // row's own anchor, when excluded, is +inf.
                let dd = _mm256_max_ps(
                    _mm256_sub_ps(
                        _mm256_add_ps(point_norm, anchor_norms),
                        _mm256_mul_ps(two, *acc),
                    ),
                    zero,
                );
                let is_own = _mm256_castsi256_ps(_mm256_cmpeq_epi32(index, own));
                let dd = _mm256_blendv_ps(dd, inf, is_own);
                let better = _mm256_cmp_ps::<_CMP_LT_OQ>(dd, bd);
                let bi =
                    _mm256_blendv_ps(_mm256_castsi256_ps(bi), _mm256_castsi256_ps(index), better);
                // SAFETY: as for the loads.
                unsafe {
                    _mm256_storeu_ps(
                        best_d.as_mut_ptr().add(h * L),
                        _mm256_blendv_ps(bd, dd, better),
                    );
                    _mm256_storeu_si256(
                        best_i.as_mut_ptr().add(h * L).cast(),
                        _mm256_castps_si256(bi),
                    );
                }
            }
        }
    }
}
