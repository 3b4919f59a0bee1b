//! The anchor script's JSON read strictly, and the table's arithmetic.

use super::*;

use crate::bench::points::ALL;

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
    assert_eq!(SHAPES.len(), 12);
    assert!(shapes(true).iter().all(|s| SHAPES.contains(s)));
    assert!(shapes(true).len() < SHAPES.len());
    assert_eq!(SMALL.arg(), "10000,128,256,10");
}

/// Issue 39's grid: narrow points by the million, a `d` no multiple of 16
/// (in `--quick` too), `k` above 10K; `--quick` stays small.
#[test]
fn the_grid_has_narrow_odd_and_many_anchor_shapes() {
    assert!(SHAPES.iter().any(|s| s.d == 64 && s.n >= 1_000_000));
    assert!(SHAPES.iter().any(|s| s.k > 10_000));
    assert!(shapes(true).iter().any(|s| s.d % 16 != 0));
    assert!(shapes(true)
        .iter()
        .all(|s| s.n * s.d <= 100_000 * 384 && s.k <= 1024));
    // Every shape once, each key its own.
    let mut keys: Vec<String> = SHAPES.iter().map(Shape::key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), SHAPES.len());
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
    let t = table(
        Kind::Normal,
        &[SMALL],
        &[Kiln::Runs(vec![12.0, 10.0, 11.0], None)],
        Ok(&a),
    );
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
    assert_eq!(r.kiln_list_share, None);
    let md = render_markdown(std::slice::from_ref(&t));
    assert!(
        md.contains(
            "| 10000x128x256_it10 | 11.00 | 5.00 | 4.00 | 3.00 | 2.00 | 5.00 | 0.18x (flash_f16) | 0.1% | 0.3% | - |"
        ),
        "{md}"
    );
    assert!(md.contains("cdist TF32 (weak)"), "{md}");
}

#[test]
fn missing_figures_give_no_ratio() {
    let t = table(
        Kind::Clustered,
        &[SMALL, WIDE],
        &[
            Kiln::Failed("apps anneal: exited with 1".into()),
            Kiln::Runs(vec![4.0], None),
        ],
        Err("kmeans_anchors.py: no such file"),
    );
    assert!(t.rows.iter().all(|r| r.kiln_speed_over_best.is_none()));
    assert_eq!(t.rows[0].kiln_fp16_peak, None);
    assert!(t.rows[1].kiln_fp16_peak.is_some());
    assert!(t.rows[1].anchors.iter().all(|c| c.ms.is_none()));
    let md = render_markdown(std::slice::from_ref(&t));
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

/// A table per kind, and above them kiln over the best anchor by kind.
#[test]
fn the_table_renders_per_kind() {
    let tables: Vec<KmeansTable> = [Kind::Normal, Kind::Offset, Kind::ScaledUp]
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let mut o = output(&[SMALL, WIDE], i != 1, 4.0);
            o.insert(format!("{}_gemm_f16_ms", WIDE.key()), 3.0.into());
            let a = parse_anchors(&text(&o), &[SMALL, WIDE]).unwrap();
            let kiln = [
                // The list share to two decimals: 0.45%, under the 1% bar.
                Kiln::Runs(vec![2.0 * (i + 1) as f64], Some(0.0045)),
                if kind == Kind::ScaledUp {
                    Kiln::Failed("`apps anneal` on 100000x384x1024_it10: exited with 1".into())
                } else {
                    Kiln::Runs(vec![2.5, 2.0, 3.0], None)
                },
            ];
            table(kind, &[SMALL, WIDE], &kiln, Ok(&a))
        })
        .collect();
    insta::assert_snapshot!(render_markdown(&tables));
    // One kind: no summary.
    let one = render_markdown(&tables[..1]);
    assert!(!one.contains("by kind"), "{one}");
    assert!(one.contains("## normal: standard normal"), "{one}");
}

/// The tables go through bench.json as a list with their kinds; a
/// bench.json from before kinds holds one table, read as normal.
#[test]
fn kinds_go_through_bench_json_and_old_files_read_as_normal() {
    #[derive(Deserialize)]
    struct File {
        #[serde(deserialize_with = "one_or_many")]
        kmeans: Vec<KmeansTable>,
    }
    let tables: Vec<KmeansTable> = ALL
        .into_iter()
        .map(|kind| table(kind, &[SMALL], &[Kiln::Runs(vec![1.0], None)], Err("none")))
        .collect();
    let json = serde_json::json!({ "kmeans": tables });
    assert_eq!(json["kmeans"][2]["kind"], "scaled-up");
    let back: File = serde_json::from_value(json).unwrap();
    assert_eq!(back.kmeans, tables);
    let mut old = serde_json::to_value(&tables[1]).unwrap();
    old.as_object_mut().unwrap().remove("kind");
    for row in old["rows"].as_array_mut().unwrap() {
        row.as_object_mut().unwrap().remove("kiln_list_share");
    }
    let back: File = serde_json::from_value(serde_json::json!({ "kmeans": old })).unwrap();
    assert_eq!(back.kmeans.len(), 1);
    assert_eq!(back.kmeans[0].kind, Kind::Normal);
    assert_eq!(back.kmeans[0].rows, tables[1].rows);
    // A bad table is refused with its field named, as a list or alone.
    let err =
        serde_json::from_value::<File>(serde_json::json!({ "kmeans": [{"kind": "gaussian"}] }))
            .err()
            .unwrap()
            .to_string();
    assert!(err.contains("gaussian"), "{err}");
    let err =
        serde_json::from_value::<File>(serde_json::json!({ "kmeans": {"rows": [], "bogus": 1} }))
            .err()
            .unwrap()
            .to_string();
    assert!(err.contains("bogus"), "{err}");
}
