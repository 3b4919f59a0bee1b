//! The comparison with `apps` and the anchor script played by shell
//! scripts (`sh` as the interpreter), on tiny shapes: the arguments they
//! get, the same points for both, and every way they can fail.

use super::*;

use std::os::unix::fs::PermissionsExt as _;

const TINY: Shape = Shape::new(4, 3, 2, 10);

fn executable(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// An `apps` that checks its arguments and the points, then prints `line`.
fn fake_apps(dir: &Path, line: &str) -> PathBuf {
    let apps = dir.join("apps");
    executable(
        &apps,
        &format!(
            "[ \"$1 $2\" = \"anneal --npy\" ] && [ -f \"$3\" ] || exit 9\n\
             [ \"$4 $5 $6 $7 $8 $9 ${{10}} ${{11}}\" = \"--m 2 --iters 10 --tol 0 --backend cuda\" ] || exit 8\n\
             {line}\n"
        ),
    );
    apps
}

/// An anchor script printing every figure of [`TINY`] when its points
/// file exists; Flash's only when PYTHONPATH names flash-kmeans.
const GOOD_SCRIPT: &str = r#"[ "$1 $2" = "4,3,2,10 --npy" ] && [ -f "$3/x_4_3.npy" ] || exit 7
case "$PYTHONPATH" in *flash-kmeans*) f=true;; *) f=false;; esac
echo "{\"flash_kmeans\": $f, \"torch\": \"2.9\", \"mm_out_dtype_f32\": true, \"device\": \"fake\","
echo " \"4x3x2_it10_cdist_tf32_ms\": 8.0, \"4x3x2_it10_gemm_tf32_ms\": 6.0,"
echo " \"4x3x2_it10_gemm_f16_ms\": \"error: RuntimeError: boom\""
if [ $f = true ]; then echo ", \"4x3x2_it10_flash_f16_ms\": 3.0, \"4x3x2_it10_flash_f32_ms\": 4.0"; fi
echo "}"
"#;

fn plan<'a>(apps: &'a Path, script: &'a Path) -> Plan<'a> {
    let mut plan = Plan::new(apps, script, true);
    plan.python = "sh".into();
    plan.shapes = vec![TINY];
    plan.reps = 3;
    plan
}

const RUN_LINE: &str = "echo 'whole run 9.0 ms (setup 1.0 ms, iterations 7.5 ms)'";

#[test]
fn run_times_are_read_from_the_whole_run_line() {
    let ms = run_ms("cuda ...\nwhole run 12.5 ms (setup 3.0 ms, iterations 9.25 ms)\n").unwrap();
    assert_eq!(ms, 9.25);
    for bad in [
        "",
        "whole run",
        "whole run 1 ms (setup 1 ms, iterations x ms)",
        "whole run 1 ms (setup 1 ms, iterations -3 ms)",
        "whole run 1 ms (setup 1 ms, iterations NaN ms)",
    ] {
        assert!(run_ms(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn points_are_seeded_standard_normal_and_written_once_per_n_d() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let shapes = [TINY, Shape::new(4, 3, 5, 30), Shape::new(2000, 8, 2, 10)];
    write_points(a.path(), &shapes).unwrap();
    write_points(b.path(), &shapes).unwrap();
    assert_eq!(std::fs::read_dir(a.path()).unwrap().count(), 2);
    let read = |dir: &Path| {
        let npy =
            npyz::NpyFile::new(std::fs::File::open(dir.join("x_2000_8.npy")).unwrap()).unwrap();
        assert_eq!(npy.shape(), [2000, 8]);
        npy.into_vec::<f32>().unwrap()
    };
    let v = read(a.path());
    assert_eq!(v, read(b.path()), "the same seed gives the same points");
    let mean = v.iter().map(|x| f64::from(*x)).sum::<f64>() / v.len() as f64;
    let var = v
        .iter()
        .map(|x| (f64::from(*x) - mean).powi(2))
        .sum::<f64>()
        / v.len() as f64;
    assert!(
        mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
        "{mean} {var}"
    );
    // An unwritable folder is an error, not a panic.
    assert!(write_points(Path::new("/nonexistent-dir"), &shapes).is_err());
}

#[test]
fn a_run_compares_kiln_with_the_script_on_the_same_points() {
    let tmp = tempfile::tempdir().unwrap();
    let apps = fake_apps(tmp.path(), RUN_LINE);
    let script = tmp.path().join("kmeans_anchors.py");
    std::fs::write(&script, GOOD_SCRIPT).unwrap();
    std::fs::create_dir(tmp.path().join("flash-kmeans")).unwrap();
    let t = run(&plan(&apps, &script)).unwrap();
    assert_eq!(t.anchors_skipped, None);
    assert_eq!(t.anchor_device.as_deref(), Some("fake"));
    let r = &t.rows[0];
    assert_eq!((r.kiln_ms, r.kiln_runs_ms.len()), (Some(7.5), 3));
    let ms: Vec<Option<f64>> = r.anchors.iter().map(|c| c.ms).collect();
    assert_eq!(ms, [Some(8.0), Some(6.0), None, Some(3.0), Some(4.0)]);
    assert!(r.anchors[2].note.as_deref().unwrap().contains("boom"));
    assert_eq!(r.best_anchor.as_deref(), Some("flash_f16"));
    assert_eq!(r.kiln_speed_over_best, Some(3.0 / 7.5));
}

#[test]
fn without_flash_kmeans_its_modes_say_not_run() {
    let tmp = tempfile::tempdir().unwrap();
    let apps = fake_apps(tmp.path(), RUN_LINE);
    let script = tmp.path().join("kmeans_anchors.py");
    std::fs::write(&script, GOOD_SCRIPT).unwrap();
    let t = run(&plan(&apps, &script)).unwrap();
    let r = &t.rows[0];
    assert_eq!(r.anchors[0].ms, Some(8.0));
    for c in &r.anchors[3..] {
        assert!(c.note.as_deref().unwrap().starts_with("not run"), "{c:?}");
    }
    assert_eq!(r.best_anchor.as_deref(), Some("gemm_tf32"));
}

/// Each hostile script ends as one line in the table; kiln's figures stay.
#[test]
fn a_hostile_script_is_one_line_and_kiln_stays() {
    let cases = [
        ("echo 'Traceback: no torch'", "printed no valid anchor JSON"),
        ("echo '{}'; exit 3", "exited with"),
        ("exec sleep 1000", "killed after"),
        ("echo '{\"flash_kmeans\": false}'", "missing field `torch`"),
    ];
    for (body, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let apps = fake_apps(tmp.path(), RUN_LINE);
        let script = tmp.path().join("kmeans_anchors.py");
        std::fs::write(&script, body).unwrap();
        let mut plan = plan(&apps, &script);
        plan.script_limit = Duration::from_millis(300);
        let t = run(&plan).unwrap();
        let why = t.anchors_skipped.unwrap_or_default();
        assert!(why.contains(want), "{body}: {why}");
        assert_eq!(t.rows[0].kiln_ms, Some(7.5), "{body}");
    }
    // No script at all, no interpreter at all.
    let tmp = tempfile::tempdir().unwrap();
    let apps = fake_apps(tmp.path(), RUN_LINE);
    let missing = tmp.path().join("kmeans_anchors.py");
    let t = run(&plan(&apps, &missing)).unwrap();
    assert!(t.anchors_skipped.unwrap().contains("no such file"));
    std::fs::write(&missing, GOOD_SCRIPT).unwrap();
    let mut p = plan(&apps, &missing);
    p.python = "/nonexistent/python3".into();
    let t = run(&p).unwrap();
    assert!(t.anchors_skipped.unwrap().contains("/nonexistent/python3"));
}

/// A failing, lying or hanging `apps` is a note on its shape.
#[test]
fn a_hostile_apps_is_a_note_on_its_shape() {
    let cases = [
        ("exit 1", "exited with"),
        ("echo 'whole run soon'", "cannot read the run's time"),
        ("echo nothing", "no `whole run"),
        ("exec sleep 1000", "killed after"),
    ];
    for (line, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let apps = fake_apps(tmp.path(), line);
        let script = tmp.path().join("kmeans_anchors.py");
        std::fs::write(&script, GOOD_SCRIPT).unwrap();
        let mut plan = plan(&apps, &script);
        plan.kiln_limit = Duration::from_millis(300);
        let t = run(&plan).unwrap();
        let r = &t.rows[0];
        assert_eq!(r.kiln_ms, None, "{line}");
        assert!(
            r.kiln_note.as_deref().unwrap().contains(want),
            "{line}: {r:?}"
        );
        assert_eq!(r.anchors[0].ms, Some(8.0), "the anchors still ran: {line}");
    }
}

/// Two comparisons at once each use their own points folder.
#[test]
fn concurrent_runs_do_not_share_points() {
    let tmp = tempfile::tempdir().unwrap();
    let apps = fake_apps(tmp.path(), RUN_LINE);
    let script = tmp.path().join("kmeans_anchors.py");
    std::fs::write(&script, GOOD_SCRIPT).unwrap();
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| run(&plan(&apps, &script)).unwrap()))
            .collect();
        for r in runs {
            let t = r.join().unwrap();
            assert_eq!(t.rows[0].kiln_ms, Some(7.5));
            assert_eq!(t.anchors_skipped, None);
        }
    });
}
