//! The anchor script's JSON read strictly, and the table's arithmetic.

use super::*;

const SMALL: Shape = Shape::new(10_000, 128, 256, 10);
const WIDE: Shape = Shape::new(100_000, 384, 1024, 10);

/// The script's output for `shapes`, every mode timed at `ms`.
fn output(shapes: &[Shape], flash: bool, ms: f64) -> serde_json::Map<String, serde_json::Value> {
    let mut o = serde_json::Map::new();
    o.insert("flash_kmeans".into(), flash.into());
    o.insert("torch".into(), "2.9.0".into());
    o.insert("mm_out_dtype_f32".into(), true.into());
    o.insert("device".into(), "NVIDIA H200".into());
    for s in shapes {
        for mode in MODES {
            if flash || !mode.starts_with("flash") {
                o.insert(format!("{}_{mode}_ms", s.key()), ms.into());
            }
        }
    }
    o
}

fn text(o: &serde_json::Map<String, serde_json::Value>) -> String {
    serde_json::to_string_pretty(o).unwrap()
}

#[test]
fn shapes_are_the_issues_and_quick_is_a_subset() {
    let keys: Vec<String> = SHAPES.iter().map(Shape::key).collect();
    assert!(keys.contains(&"1000000x768x4096_it10".to_string()));
    assert!(keys.contains(&"10000x128x256_it30".to_string()));
    assert_eq!(SHAPES.len(), 9);
    assert!(shapes(true).iter().all(|s| SHAPES.contains(s)));
    assert!(shapes(true).len() < SHAPES.len());
    assert_eq!(SMALL.arg(), "10000,128,256,10");
}

#[test]
fn a_whole_output_is_read() {
    let a = parse_anchors(&text(&output(&[SMALL, WIDE], true, 2.5)), &[SMALL, WIDE]).unwrap();
    assert_eq!(a.device, "NVIDIA H200");
    assert!(a.flash_kmeans);
    assert_eq!(a.figures.len(), 10);
    assert!(a.figures.values().all(|f| *f == Figure::Ms(2.5)));
}

#[test]
fn a_missing_key_is_named() {
    let mut o = output(&[SMALL], true, 1.0);
    o.remove("10000x128x256_it10_gemm_f16_ms");
    let err = parse_anchors(&text(&o), &[SMALL]).unwrap_err().to_string();
    assert!(err.contains("`10000x128x256_it10_gemm_f16_ms`"), "{err}");
    let mut o = output(&[SMALL], true, 1.0);
    o.remove("device");
    let err = parse_anchors(&text(&o), &[SMALL]).unwrap_err().to_string();
    assert!(err.contains("`device`"), "{err}");
    // Flash's figures may be absent only when the script says it has none.
    let mut o = output(&[SMALL], true, 1.0);
    o.remove("10000x128x256_it10_flash_f32_ms");
    let err = parse_anchors(&text(&o), &[SMALL]).unwrap_err().to_string();
    assert!(err.contains("flash_f32"), "{err}");
}

#[test]
fn error_strings_and_flash_not_run_are_cells_not_failures() {
    let mut o = output(&[SMALL], false, 1.0);
    o.insert(
        "10000x128x256_it10_gemm_tf32_ms".into(),
        "error: OutOfMemoryError: CUDA out of memory".into(),
    );
    let a = parse_anchors(&text(&o), &[SMALL]).unwrap();
    let get = |m| a.figures[&(SMALL.key(), m)].clone();
    assert_eq!(get("cdist_tf32"), Figure::Ms(1.0));
    assert!(matches!(get("gemm_tf32"), Figure::Missing(s) if s.contains("OutOfMemory")));
    assert!(matches!(get("flash_f16"), Figure::Missing(s) if s.starts_with("not run")));
}

#[test]
fn hostile_outputs_are_refused_with_the_key() {
    let bad: [(&str, serde_json::Value); 4] = [
        ("10000x128x256_it10_cdist_tf32_ms", (-1.0).into()),
        ("10000x128x256_it10_cdist_tf32_ms", "fast".into()),
        ("10000x128x256_it10_cdist_tf32_ms", serde_json::Value::Null),
        ("10000x128x256_it10_warp_ms", 1.0.into()),
    ];
    for (key, value) in bad {
        let mut o = output(&[SMALL], true, 1.0);
        o.insert(key.into(), value);
        let err = parse_anchors(&text(&o), &[SMALL]).unwrap_err().to_string();
        assert!(err.contains(&format!("`{key}`")), "{err}");
    }
    for garbage in [
        "",
        "Traceback (most recent call last):",
        "[1, 2]",
        "{\"flash_kmeans\": 1}",
    ] {
        assert!(parse_anchors(garbage, &[SMALL]).is_err(), "{garbage:?}");
    }
    // A figure of a shape this bench did not ask for is not silently kept.
    let o = output(&[SMALL, WIDE], true, 1.0);
    let err = parse_anchors(&text(&o), &[SMALL]).unwrap_err().to_string();
    assert!(err.contains("unknown key"), "{err}");
    let err = parse_script_output("nope", &[SMALL], "k.py").unwrap_err();
    assert!(
        format!("{err:#}").starts_with("k.py printed no valid anchor JSON"),
        "{err:#}"
    );
}

#[test]
fn ratios_and_peak_fractions() {
    let mut o = output(&[SMALL], true, 5.0);
    for (mode, ms) in [("gemm_tf32", 4.0), ("gemm_f16", 3.0), ("flash_f16", 2.0)] {
        o.insert(format!("{}_{mode}_ms", SMALL.key()), ms.into());
    }
    let a = parse_anchors(&text(&o), &[SMALL]).unwrap();
    let t = table(&[SMALL], &[Kiln::Runs(vec![12.0, 10.0, 11.0])], Ok(&a));
    let r = &t.rows[0];
    assert_eq!(r.kiln_ms, Some(11.0));
    assert_eq!(r.best_anchor.as_deref(), Some("flash_f16"));
    assert!((r.kiln_speed_over_best.unwrap() - 2.0 / 11.0).abs() < 1e-12);
    // 2·n·d·k·iters over the time, of 989 TFLOP/s.
    let flops = 2.0 * 10_000.0 * 128.0 * 256.0 * 10.0;
    let kiln = flops / 11e-3 / 989e12;
    assert!((r.kiln_fp16_peak.unwrap() - kiln).abs() < 1e-15);
    assert!((r.flash_f16_fp16_peak.unwrap() - flops / 2e-3 / 989e12).abs() < 1e-15);
    assert_eq!(t.anchor_device.as_deref(), Some("NVIDIA H200"));
    let md = render_markdown(&t);
    assert!(
        md.contains(
            "| 10000x128x256_it10 | 11.00 | 5.00 | 4.00 | 3.00 | 2.00 | 5.00 | 0.18x (flash_f16) |"
        ),
        "{md}"
    );
    assert!(md.contains("cdist TF32 (weak)"), "{md}");
}

#[test]
fn missing_figures_give_no_ratio() {
    let t = table(
        &[SMALL, WIDE],
        &[
            Kiln::Failed("apps anneal: exited with 1".into()),
            Kiln::Runs(vec![4.0]),
        ],
        Err("kmeans_anchors.py: no such file"),
    );
    assert!(t.rows.iter().all(|r| r.kiln_speed_over_best.is_none()));
    assert_eq!(t.rows[0].kiln_fp16_peak, None);
    assert!(t.rows[1].kiln_fp16_peak.is_some());
    assert!(t.rows[1].anchors.iter().all(|c| c.ms.is_none()));
    let md = render_markdown(&t);
    assert!(
        md.contains("anchors not run: kmeans_anchors.py: no such file"),
        "{md}"
    );
    assert!(
        md.contains("10000x128x256_it10 kiln: apps anneal: exited with 1"),
        "{md}"
    );
    assert!(
        md.contains("| 100000x384x1024_it10 | 4.00 | not run |"),
        "{md}"
    );
    // The table goes through bench.json and back whole.
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(serde_json::from_str::<KmeansTable>(&json).unwrap(), t);
}
