//! The comparison with `apps` and the anchor script played by shell
//! scripts (`sh` as the interpreter), on tiny shapes: the arguments they
//! get, the same points for both on every kind, and every way they can
//! fail.

use super::*;

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

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
    let mut plan = Plan::new(apps, script, true, vec![Kind::Normal]);
    plan.python = "sh".into();
    plan.shapes = vec![TINY];
    plan.reps = 3;
    plan
}

/// The one table of a plan of one kind.
fn one(mut tables: Vec<KmeansTable>) -> KmeansTable {
    assert_eq!(tables.len(), 1);
    tables.pop().unwrap()
}

const RUN_LINE: &str = "echo 'whole run 9.0 ms (setup 1.0 ms, iterations 7.5 ms)'";

#[test]
fn run_times_are_read_from_the_whole_run_line() {
    let ms = run_ms("cuda ...\nwhole run 12.5 ms (setup 3.0 ms, iterations 9.25 ms)\n").unwrap();
    assert_eq!(ms, 9.25);
    // A CUDA run's line, with the setup's parts.
    let cuda = "whole run 1346.9 ms (setup 129.0 ms, iterations 192.1 ms; upload 109.3 ms, \
                buffers 0.3 ms, prepare 4.1 ms of the setup)";
    assert_eq!(run_ms(cuda).unwrap(), 192.1);
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
fn the_list_share_is_the_largest_after_the_first_assignment() {
    let line = |c: u64, n: u64| {
        format!(
            "tc: {c} of {n} points ({:.2}%) left to the list kernel\n",
            100.0 * c as f64 / n as f64
        )
    };
    // The first assignment's 100% is not counted; the largest after it is.
    let text = [line(4, 4), line(1, 4), line(2, 4), line(0, 4)].concat();
    assert_eq!(list_share(&text), Some(0.5));
    // Other lines between them are skipped.
    let mixed = format!("cuda: ...\n{}warning: x\n{}", line(3, 8), line(1, 8));
    assert_eq!(list_share(&mixed), Some(0.125));
    // One assignment, none, or only lines that are not the count: no share.
    for text in [
        line(1, 4),
        String::new(),
        "tc: off\nwhole run 1 ms\n".into(),
    ] {
        assert_eq!(list_share(&text), None, "{text:?}");
    }
    // A damaged line (no number, count past n, n of 0, another ending) is
    // not read.
    let damaged = [
        line(9, 9),
        "tc: x of 4 points (0%) left to the list kernel\n".into(),
        "tc: 5 of 4 points (125%) left to the list kernel\n".into(),
        "tc: 0 of 0 points (0%) left to the list kernel\n".into(),
        "tc: 1 of 4 points (25%) left to the list\n".into(),
        line(1, 9),
    ]
    .concat();
    assert_eq!(list_share(&damaged), Some(1.0 / 9.0));
}

/// The list share comes from one more run under KILN_ANNEAL_TC_STATS=1,
/// whose stderr it reads; a failing one leaves the times and no share.
#[test]
fn the_list_share_comes_from_one_more_run_with_the_stats_on() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("kmeans_anchors.py");
    std::fs::write(&script, GOOD_SCRIPT).unwrap();
    let stats = "if [ \"$KILN_ANNEAL_TC_STATS\" = 1 ]; then\n\
                 echo 'tc: 4 of 4 points (100.00%) left to the list kernel' >&2\n\
                 echo 'tc: 2 of 4 points (50.00%) left to the list kernel' >&2\n\
                 echo 'tc: 1 of 4 points (25.00%) left to the list kernel' >&2\n\
                 STATS_EXIT\nfi\n";
    for (exit, share) in [("exit 0", Some(0.5)), ("exit 4", None)] {
        let apps = fake_apps(
            tmp.path(),
            &format!("{}{RUN_LINE}", stats.replace("STATS_EXIT", exit)),
        );
        let t = one(run(&plan(&apps, &script)).unwrap());
        let r = &t.rows[0];
        assert_eq!((r.kiln_ms, r.kiln_runs_ms.len()), (Some(7.5), 3), "{exit}");
        assert_eq!(r.kiln_list_share, share, "{exit}");
    }
    // Without the stats lines (a run with no tensor cores): no share.
    let apps = fake_apps(tmp.path(), RUN_LINE);
    let t = one(run(&plan(&apps, &script)).unwrap());
    assert_eq!(t.rows[0].kiln_list_share, None);
}

#[test]
fn a_run_compares_kiln_with_the_script_on_the_same_points() {
    let tmp = tempfile::tempdir().unwrap();
    let apps = fake_apps(tmp.path(), RUN_LINE);
    let script = tmp.path().join("kmeans_anchors.py");
    std::fs::write(&script, GOOD_SCRIPT).unwrap();
    std::fs::create_dir(tmp.path().join("flash-kmeans")).unwrap();
    let t = one(run(&plan(&apps, &script)).unwrap());
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
    let t = one(run(&plan(&apps, &script)).unwrap());
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
        let t = one(run(&plan).unwrap());
        let why = t.anchors_skipped.unwrap_or_default();
        assert!(why.contains(want), "{body}: {why}");
        assert_eq!(t.rows[0].kiln_ms, Some(7.5), "{body}");
    }
    // No script at all, no interpreter at all.
    let tmp = tempfile::tempdir().unwrap();
    let apps = fake_apps(tmp.path(), RUN_LINE);
    let missing = tmp.path().join("kmeans_anchors.py");
    let t = one(run(&plan(&apps, &missing)).unwrap());
    assert!(t.anchors_skipped.unwrap().contains("no such file"));
    std::fs::write(&missing, GOOD_SCRIPT).unwrap();
    let mut p = plan(&apps, &missing);
    p.python = "/nonexistent/python3".into();
    let t = one(run(&p).unwrap());
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
        let t = one(run(&plan).unwrap());
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
            .map(|_| s.spawn(|| one(run(&plan(&apps, &script)).unwrap())))
            .collect();
        for r in runs {
            let t = r.join().unwrap();
            assert_eq!(t.rows[0].kiln_ms, Some(7.5));
            assert_eq!(t.anchors_skipped, None);
        }
    });
}

/// Each kind is its own folder, `--npy DIR/KIND` for the script and
/// `DIR/KIND/x_N_D.npy` for kiln, the same file for both; a kind's points
/// are gone before the next kind's are written.
#[test]
fn every_kind_runs_kiln_and_the_script_on_its_own_points() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");
    let apps = fake_apps(
        tmp.path(),
        &format!(
            "echo \"$([ -n \"$KILN_ANNEAL_TC_STATS\" ] && echo stats || echo kiln) $3 $(cksum < \"$3\")\" >> {}\n{RUN_LINE}",
            log.display()
        ),
    );
    let script = tmp.path().join("kmeans_anchors.py");
    std::fs::write(
        &script,
        format!(
            "echo \"script $3/x_4_3.npy $(cksum < \"$3/x_4_3.npy\") $(ls \"$3/..\" | tr '\\n' ' ')\" >> {}\n{GOOD_SCRIPT}",
            log.display()
        ),
    )
    .unwrap();
    let mut plan = plan(&apps, &script);
    plan.kinds = vec![Kind::Clustered, Kind::Normal, Kind::Offset];
    plan.reps = 1;
    let tables = run(&plan).unwrap();
    let kinds: Vec<Kind> = tables.iter().map(|t| t.kind).collect();
    assert_eq!(kinds, plan.kinds);
    assert!(tables.iter().all(|t| t.rows[0].kiln_ms == Some(7.5)));
    assert!(tables.iter().all(|t| t.anchors_skipped.is_none()));
    let log = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 9, "{log}");
    let mut sums = Vec::new();
    for (three, kind) in lines.chunks(3).zip(&plan.kinds) {
        let (kiln, stats, script) = (&three[0], &three[1], &three[2]);
        let names = (kiln[0], stats[0], script[0]);
        assert_eq!(names, ("kiln", "stats", "script"), "{log}");
        let want = format!("/{}/x_4_3.npy", kind.name());
        assert!(kiln[1].ends_with(&want), "{log}");
        // The same file, the same bytes, for kiln's runs and the script.
        assert_eq!(kiln[1..4], stats[1..4], "{log}");
        assert_eq!(kiln[1..4], script[1..4], "{log}");
        // Only this kind's folder is there.
        assert_eq!(script[4..], [kind.name(), ""], "{log}");
        sums.push(kiln[2]);
    }
    sums.sort_unstable();
    sums.dedup();
    assert_eq!(sums.len(), 3, "each kind its own points: {log}");
}
