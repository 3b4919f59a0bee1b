//! The unit tests of the tile choice, the settings, the bounds and the
//! CPU reference.

use super::*;

#[test]
fn tc_path_needs_sm_80_and_can_be_turned_off() {
    assert!(tc_wanted(80, None));
    assert!(tc_wanted(90, Some("1")));
    assert!(!tc_wanted(75, None));
    assert!(!tc_wanted(86, Some("0")));
    assert!(!tc_wanted(90, Some(" OFF ")));
    assert!(!tc_wanted(90, Some("false")));
}

#[test]
fn tile_is_slim_for_small_d_or_one_wave_unless_chosen() {
    let sms = 132;
    assert_eq!(pick_tile(Tile::Auto, 1_000_000, 0, sms), Tile::Slim);
    assert_eq!(pick_tile(Tile::Auto, 1_000_000, 128, sms), Tile::Slim);
    assert_eq!(
        pick_tile(Tile::Auto, 1_000_000, SLIM_MAX_D, sms),
        Tile::Slim
    );
    assert_eq!(
        pick_tile(Tile::Auto, 1_000_000, SLIM_MAX_D + 1, sms),
        Tile::Wide
    );
    // 50K points: 391 blocks of 128, one wave of three per SM on 132 SMs.
    assert_eq!(pick_tile(Tile::Auto, 50_000, 2048, sms), Tile::Slim);
    assert_eq!(pick_tile(Tile::Auto, 3 * 128 * 132, 4096, sms), Tile::Slim);
    assert_eq!(
        pick_tile(Tile::Auto, 3 * 128 * 132 + 1, 4096, sms),
        Tile::Wide
    );
    assert_eq!(pick_tile(Tile::Auto, 100_000, 768, sms), Tile::Wide);
    assert_eq!(pick_tile(Tile::Auto, u32::MAX, u32::MAX, 0), Tile::Wide);
    assert_eq!(pick_tile(Tile::Auto, 0, u32::MAX, 0), Tile::Slim);
    assert_eq!(pick_tile(Tile::Wide, 1, 1, sms), Tile::Wide);
    assert_eq!(pick_tile(Tile::Slim, u32::MAX, u32::MAX, sms), Tile::Slim);
}

#[test]
fn tile_env_takes_64_128_or_auto_and_names_what_it_takes_otherwise() {
    assert_eq!(tile_from_env(None).unwrap(), Tile::Auto);
    assert_eq!(tile_from_env(Some(" AUTO ")).unwrap(), Tile::Auto);
    assert_eq!(tile_from_env(Some("")).unwrap(), Tile::Auto);
    assert_eq!(tile_from_env(Some("128")).unwrap(), Tile::Wide);
    assert_eq!(tile_from_env(Some(" 64\n")).unwrap(), Tile::Slim);
    for bad in ["32", "256", "slim", "64x", "-64", "6.4e1", "\u{0}", "６４"] {
        let err = tile_from_env(Some(bad)).unwrap_err().to_string();
        assert!(
            err.contains("must be 64, 128, wgmma, wgmma-chunked or auto"),
            "{bad:?}: {err}"
        );
    }
    assert_eq!(tile_from_env(Some(" WGMMA ")).unwrap(), Tile::Wgmma);
    assert_eq!(
        tile_from_env(Some("Wgmma-Chunked")).unwrap(),
        Tile::WgmmaChunked
    );
    for bad in ["wgmma90", "wgmma chunked", "wgmma-chunked-", "chunked"] {
        assert!(tile_from_env(Some(bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn wgmma_is_taken_where_it_runs_and_mma_sync_elsewhere() {
    let sms = 132;
    for tile in [Tile::Auto, Tile::Wgmma, Tile::WgmmaChunked] {
        let wide = if tile == Tile::Wgmma {
            Tile::Wgmma
        } else {
            Tile::WgmmaChunked
        };
        let narrow = if tile == Tile::WgmmaChunked {
            Tile::WgmmaChunked
        } else {
            Tile::Wgmma
        };
        assert_eq!(resolve_tile(tile, true, 1, 1, sms), narrow);
        assert_eq!(resolve_tile(tile, true, 1, CHUNKED_MIN_D - 1, sms), narrow);
        assert_eq!(resolve_tile(tile, true, 1, CHUNKED_MIN_D, sms), wide);
        assert_eq!(resolve_tile(tile, true, u32::MAX, u32::MAX, 0), wide);
        assert_eq!(resolve_tile(tile, false, 100_000, 768, sms), Tile::Wide);
        assert_eq!(resolve_tile(tile, false, 1_000_000, 128, sms), Tile::Slim);
    }
    // A chosen mma.sync tile stays, with or without wgmma.
    for wgmma in [false, true] {
        assert_eq!(resolve_tile(Tile::Wide, wgmma, 1, 1, sms), Tile::Wide);
        assert_eq!(
            resolve_tile(Tile::Slim, wgmma, 1 << 20, 4096, sms),
            Tile::Slim
        );
    }
}

#[test]
fn wgmma_needs_compute_capability_9_0_and_its_built_module() {
    let image = |name, image: &'static [u8], sass: &'static [u32]| gpu_core::FatbinImage {
        name,
        image,
        sass,
        ptx: &[80],
        kernels: &[],
        toolkit: (13, 0),
    };
    let good = image(WGMMA_MODULE, b"fatbin", &[75, 80, 90]);
    assert!(wgmma_available((9, 0), &[&good]));
    for cc in [(8, 0), (8, 9), (9, 1), (10, 0), (12, 0), (0, 0)] {
        assert!(!wgmma_available(cc, &[&good]), "{cc:?}");
    }
    // Not built (CPU-only), no sm_90 SASS, another module's name, none.
    let empty = image(WGMMA_MODULE, b"", &[75, 80, 90]);
    let no_90 = image(WGMMA_MODULE, b"fatbin", &[75, 80]);
    let other = image("anneal_tc", b"fatbin", &[80, 90]);
    for modules in [&[&empty][..], &[&no_90], &[&other], &[]] {
        assert!(!wgmma_available((9, 0), modules));
    }
    assert!(wgmma_available((9, 0), &[&other, &no_90, &good]));
}

#[test]
fn exact_dist_is_the_distance_to_f32_rounding() {
    let mut rng = crate::rng::Rng::new(7);
    for d in [0usize, 1, 3, 31, 32, 33, 130, 257] {
        let (x, c) = (rng.f32s(d), rng.f32s(d));
        let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
        let (xn, cn) = (norm(&x), norm(&c));
        let exact: f64 = x
            .iter()
            .zip(&c)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
            .sum();
        let f = f64::from(exact_dist(&x, &c, xn, cn));
        let scale = f64::from(xn + cn) + exact;
        assert!((f - exact).abs() <= 1e-5 * scale.max(1e-30), "d = {d}");
    }
}

#[test]
fn reference_breaks_ties_low_and_can_exclude_self() {
    // Anchors 1 and 2 are the same point: equal distances go to 1.
    let anchors = [5.0f32, 0.0, 1.0, 1.0, 1.0, 1.0];
    let anchor_norms = [25.0f32, 2.0, 2.0];
    let x = [1.0f32, 1.0, 5.0, 0.0];
    let x_norms = [2.0f32, 25.0];
    let (assign, dist) = reference(&x, &x_norms, 2, &anchors, &anchor_norms, 0);
    assert_eq!(assign, [1, 0]);
    assert_eq!(dist, [0.0, 0.0]);
    // Point 0 may not take anchor 0; point 1 may not take anchor 1.
    let (assign, _) = reference(
        &anchors[..4],
        &anchor_norms[..2],
        2,
        &anchors[..4],
        &anchor_norms[..2],
        KILN_ANNEAL_EXCLUDE_SELF,
    );
    assert_eq!(assign, [1, 0]);
    let (assign, dist) = reference(&x[..2], &x_norms[..1], 2, &[], &[], 0);
    assert_eq!((assign[0], dist[0]), (u32::MAX, f32::INFINITY));
}

/// f16 with round-to-nearest-even, as `__float2half_rn`.
fn f16(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

/// The bound covers f16 input rounding plus the refinement's rounding,
/// with the accumulation done exactly (f64): the terms the hardware does
/// not decide. Inputs sit just off f16 midpoints (f16 keeps 10 of f32's
/// 23 fraction bits), where rounding is largest and all of one sign.
#[test]
fn bound_covers_f16_rounding_with_room() {
    let worst = worst_f16_rounding(eps, 0.0);
    println!("worst |A - F| / e = {worst:.3}");
    // Near half the bound: the input term is taken about twice.
    assert!(worst > 0.2 && worst <= 0.55, "worst |A - F| / e = {worst}");
}

#[test]
fn chunked_bound_covers_f16_rounding_with_less_room() {
    let worst = worst_f16_rounding(eps_chunked, 0.0);
    println!("worst |A - F| / e (chunked) = {worst:.3}");
    // The input term is taken 1.25 times: rounding made as bad as it
    // gets (every value just under the middle of two halves) comes
    // near 0.8 of the bound, and never over it.
    assert!(worst > 0.5 && worst < 1.0, "worst |A - F| / e = {worst}");
}

/// Far from the origin (every value offset by the same amount, as real
/// embeddings share one direction) the centred bound still holds against
/// the exact distance of the original inputs, and stays about as tight as
/// at the origin: the offset enters only through the exact distance's own
/// rounding, not through the f16 term.
#[test]
fn bound_holds_and_stays_tight_far_from_the_origin() {
    for offset in [10.0f32, 1e3, -37.5] {
        let worst = worst_f16_rounding(eps, offset);
        println!("offset {offset}: worst |A - F| / e = {worst:.3}");
        assert!(worst > 0.05 && worst <= 0.6, "offset {offset}: {worst}");
        let worst = worst_f16_rounding(eps_chunked, offset);
        assert!(
            worst > 0.05 && worst < 1.0,
            "offset {offset} chunked: {worst}"
        );
    }
    // The bound, at d = 768 and an offset of 10 in every dimension, is a
    // small fraction of what the uncentred f16 term would be.
    let d = 768u32;
    let (xn_c, cn_c) = (d as f32 / 3.0, d as f32 / 3.0);
    let xn = xn_c + 100.0 * d as f32;
    let centred = error_bound(
        eps(d),
        (xn_c, xn_c.sqrt()),
        (cn_c, cn_c.sqrt()),
        row_slack(d, xn, xn),
    );
    let uncentred = 2.0 * eps(d) * xn;
    assert!(centred * 20.0 < uncentred, "{centred} against {uncentred}");
}

#[test]
fn row_slack_grows_with_the_point_and_the_largest_anchor() {
    let base = row_slack(128, 4.0, 9.0);
    assert!(base > 0.0 && base < 1e-4, "{base}");
    assert!(row_slack(128, 400.0, 9.0) > 10.0 * base);
    assert!(row_slack(128, 4.0, 900.0) > 10.0 * base);
    assert!(row_slack(4096, 4.0, 9.0) > row_slack(128, 4.0, 9.0));
    assert!(row_slack(128, 4.0, f32::NAN).is_nan());
}

#[test]
fn chunked_eps_grows_with_the_chunk_not_with_d() {
    assert_eq!(eps_chunked(4096), eps_chunked(4096));
    // One chunk: the accumulation term is the plain one's.
    for d in [1, 16, 255, 256] {
        let plain_accumulation = eps(d) - 2f32.powi(-9);
        let chunked_accumulation = eps_chunked(d) - 2f32.powi(-10) - 2f32.powi(-12);
        let extra = 2f32.powi(-22);
        assert!(
            (chunked_accumulation - plain_accumulation - extra).abs() < 1e-9,
            "d = {d}"
        );
    }
    let (plain, chunked) = (eps(4096), eps_chunked(4096));
    assert!(
        chunked < plain / 3.0,
        "eps at d = 4096: {chunked} against {plain}"
    );
    // Past one chunk, only the chunks' additions grow with d.
    for d in [256u32, 4096, 1 << 20] {
        let chunks = d.div_ceil(256) as f32;
        let rest = eps_chunked(d) - chunks * 2f32.powi(-22);
        let fixed = 2f32.powi(-10) + 2f32.powi(-12) + 16.0 * 2f32.powi(-16);
        assert!(
            (rest - fixed).abs() < 1e-6,
            "d = {d}: {rest} against {fixed}"
        );
    }
    let mut last = 0f32;
    for d in (1..20_000).step_by(97) {
        let e = eps_chunked(d);
        assert!(e >= last && e.is_finite(), "d = {d}");
        last = e;
    }
}

/// The worst `|A - F| / e` over points and anchors whose every value lies
/// `offset` plus a value in [0, 1) (on odd trials) or in [3, 4) (even),
/// centred on the reference point `r = offset` as the kernels centre them
/// (`fl(x - r)`), the centred values rounding to f16 by almost half a step
/// where `offset` is 0; the centred norms made as `anneal_to_half_*` makes
/// them (in f64, with the stored f32 norm's rounding added), `e` from
/// `eps_of` and [`row_slack`].
fn worst_f16_rounding(eps_of: fn(u32) -> f32, offset: f32) -> f64 {
    let mut rng = crate::rng::Rng::new(11);
    let mut worst = 0f64;
    for d in [1usize, 8, 37, 128, 384, 1024] {
        for trial in 0..50 {
            let mid = |v: f32| f32::from_bits((v.to_bits() & !0x1fff) | 0x0fff);
            let shift = if trial % 2 == 0 { 3.0 } else { 0.0 };
            let mut values = |n| -> Vec<f32> {
                rng.f32s(n)
                    .iter()
                    .map(|v| mid(v.abs() + shift) + offset)
                    .collect()
            };
            let (x, c) = (values(d), values(d));
            // |v|^2 in the exact distance's order: against -v the dot product
            // is -|v|^2 bit for bit (rounding is symmetric in sign), and
            // fma(-2, -s, 0) / 2 = s exactly.
            let norm = |v: &[f32]| {
                let negated: Vec<f32> = v.iter().map(|a| -a).collect();
                exact_dist(v, &negated, 0.0, 0.0) / 2.0
            };
            let centre = |v: &[f32]| v.iter().map(|a| a - offset).collect::<Vec<f32>>();
            let (xc, cc) = (centre(&x), centre(&c));
            let norm64 = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>();
            let (xn, cn) = (norm(&x), norm(&c));
            let carried = |v: &[f32], vc: &[f32], stored: f32| {
                (norm64(vc) + (f64::from(stored) - norm64(v))) as f32
            };
            let (xn_c, cn_c) = (carried(&x, &xc, xn), carried(&c, &cc, cn));
            let (xq, cq) = (norm64(&xc).sqrt() as f32, norm64(&cc).sqrt() as f32);
            let dot_f16: f64 = xc
                .iter()
                .zip(&cc)
                .map(|(a, b)| f64::from(f16(*a)) * f64::from(f16(*b)))
                .sum();
            let approx = (-2f32).mul_add(dot_f16 as f32, xn_c + cn_c).max(0.0);
            let f = exact_dist(&x, &c, xn, cn);
            let gap = f64::from((approx - f).abs());
            let row = row_slack(d as u32, xn, cn);
            let e = f64::from(error_bound(eps_of(d as u32), (xn_c, xq), (cn_c, cq), row));
            assert!(gap <= e, "d = {d}: |A - F| = {gap:e} over e = {e:e}");
            worst = worst.max(gap / e);
        }
    }
    worst
}

/// A wgmma candidate list is a count, the final bound and `K` entries of
/// index and lower bound (anneal_wgmma.h), 4 bytes a word.
#[test]
fn a_candidate_list_is_two_words_and_two_per_entry() {
    use crate::bindings::types::{KILN_ANNEAL_TC_CANDIDATES, KILN_ANNEAL_WGMMA_LIST_WORDS};
    assert_eq!(
        KILN_ANNEAL_WGMMA_LIST_WORDS,
        2 + 2 * KILN_ANNEAL_TC_CANDIDATES
    );
    let bytes = crate::input::LIST_BYTES;
    assert_eq!(bytes, 4 * u64::from(KILN_ANNEAL_WGMMA_LIST_WORDS));
}
