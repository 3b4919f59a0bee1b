//! The `apps` binary against hostile input (issue 13), on the CPU backend:
//! every case ends in one line on stderr with a non-zero exit and no panic,
//! or in a correct result; pipes in, closed pipes out.

use std::io::Write;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;
use predicates::prelude::*;

mod cli_support;

use cli_support::{apps, npy, refused, refused_line};

/// An `(n, d)` float32 .npy file.
fn npy_f32(n: usize, d: usize, values: &[f32]) -> Vec<u8> {
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy("<f4", n, d, &data)
}

#[test]
fn sizes_are_refused_before_anything_is_allocated() {
    // The last three are within the flags' ranges but need more memory
    // (or address space) than any host here has.
    for (args, code, says) in [
        ("anneal --n 100000000000", 2, "--n <N>"),
        ("anneal --n 1 --d 4294967296 --m 1", 2, "--d <D>"),
        ("vadd --n 18446744073709551615", 2, "--n <N>"),
        ("vadd --n 1e11", 2, "out of range"),
        ("batch --structures 1e11", 2, "--structures"),
        ("vadd --n -1", 2, "'-1'"),
        ("vadd --n 2.5e3", 2, "not a whole number"),
        ("vadd --reps 0", 2, "--reps <REPS>"),
        ("anneal --iters 0", 2, "--iters"),
        ("anneal --tol nan", 2, "--tol"),
        ("anneal --tol -1", 2, "--tol"),
        ("anneal --gpus 0", 2, "--gpus"),
        ("bench --shape 1x1", 2, "--shape"),
        (
            "anneal --m 2000 --backend cpu",
            1,
            "more anchors (2000) than points (1000)",
        ),
        (
            "anneal --backend cpu --n 4000000000 --d 4000000000 --m 1",
            1,
            "do not fit in memory addresses",
        ),
        (
            "anneal --backend cpu --n 4000000000 --d 1000 --m 1",
            1,
            "of host memory but",
        ),
        ("vadd --backend cpu --n 4294967295", 1, "of host memory but"),
    ] {
        refused_line(args, code, says);
    }
}

#[test]
fn bad_names_name_the_flag_or_variable_set() {
    refused_line("anneal --backend garbage", 2, "--backend");
    let out = apps()
        .args(["vadd", "--n", "1000"])
        .env("KILN_BACKEND", "garbage")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("KILN_BACKEND") && !stderr.contains("--backend"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(1));
    refused_line("vadd --bogus", 2, "--bogus");
    refused_line("frobnicate", 2, "frobnicate");
    refused_line("anneal --npy /", 1, "--npy /: is a directory");
    refused_line("anneal --npy /nonexistent.npy", 1, "--npy /nonexistent.npy");
}

#[test]
fn wgpu_is_refused_where_it_cannot_run() {
    refused_line("vadd --backend wgpu", 1, "runs only `apps anneal`");
    refused_line("batch --backend wgpu", 1, "runs only `apps anneal`");
    // Without the feature, by flag and by variable.
    if !cfg!(feature = "wgpu") {
        refused_line(
            "anneal --backend wgpu",
            1,
            "built without the `wgpu` feature",
        );
        let out = apps()
            .args(["anneal"])
            .env("KILN_BACKEND", "wgpu")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("KILN_BACKEND=wgpu") && stderr.contains("`wgpu` feature"),
            "{stderr}"
        );
    }
}

#[test]
fn every_command_has_help_and_the_usage_lists_them_all() {
    for cmd in ["vadd", "anneal", "decode", "batch", "bench", "devices"] {
        apps()
            .args([cmd, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Usage: apps"));
    }
    let out = apps().output().unwrap();
    let usage = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    for cmd in ["vadd", "anneal", "decode", "batch", "bench", "devices"] {
        assert!(usage.contains(cmd), "{usage}");
    }
    apps()
        .args(["anneal", "--help"])
        .assert()
        .stdout(predicate::str::contains("1e6"));
}

#[test]
fn coordinates_that_overflow_f32_distances_are_refused_by_row_and_column() {
    let dir = tempfile::tempdir().unwrap();
    for big in ["1e19", "-1e19", "1e20", "3e38"] {
        let mut values = vec![0.5f32; 8 * 4];
        values[4 * 3 + 2] = big.parse().unwrap();
        let path = dir.path().join("big.npy");
        std::fs::write(&path, npy_f32(8, 4, &values)).unwrap();
        let p = path.to_str().unwrap();
        refused(
            &["anneal", "--backend", "cpu", "--npy", p, "--m", "2"],
            1,
            "point 3 has coordinate",
        );
        refused(
            &["anneal", "--backend", "cpu", "--npy", p, "--m", "2"],
            1,
            "dimension 2, beyond ±2.306e18",
        );
    }
    let mut values = vec![0.5f32; 8 * 4];
    values[5] = f32::NAN;
    let path = dir.path().join("nan.npy");
    std::fs::write(&path, npy_f32(8, 4, &values)).unwrap();
    refused(
        &[
            "anneal",
            "--backend",
            "cpu",
            "--npy",
            path.to_str().unwrap(),
            "--m",
            "2",
        ],
        1,
        "point 1 has a NaN",
    );
}

#[test]
fn npy_input_from_a_pipe_gives_the_same_run_as_from_the_file() {
    let values: Vec<f32> = (0..40 * 3).map(|i| ((i * 37) % 11) as f32 * 0.1).collect();
    let bytes = npy_f32(40, 3, &values);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    std::fs::write(&path, &bytes).unwrap();
    let from_file = apps()
        .args([
            "anneal",
            "--backend",
            "cpu",
            "--m",
            "4",
            "--npy",
            path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        from_file.status.success(),
        "{}",
        String::from_utf8_lossy(&from_file.stderr)
    );
    let from_pipe = apps()
        .args([
            "anneal",
            "--backend",
            "cpu",
            "--m",
            "4",
            "--npy",
            "/dev/stdin",
        ])
        .write_stdin(bytes)
        .output()
        .unwrap();
    assert!(
        from_pipe.status.success(),
        "{}",
        String::from_utf8_lossy(&from_pipe.stderr)
    );
    let energy = |out: &[u8]| {
        let text = String::from_utf8_lossy(out).to_string();
        let line = text
            .lines()
            .find(|l| l.starts_with("cpu ("))
            .unwrap()
            .to_string();
        line.split_whitespace().nth(7).unwrap().to_string()
    };
    assert_eq!(energy(&from_file.stdout), energy(&from_pipe.stdout));
    // A header promising more than the pipe brings, and a pipe bringing more.
    let mut short = npy_f32(40, 3, &values);
    short.truncate(short.len() - 6);
    let out = apps()
        .args(["anneal", "--backend", "cpu", "--npy", "/dev/stdin"])
        .write_stdin(short)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("truncated"));
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    for args in [
        &["bench", "--quick", "--backend", "cpu"][..],
        &[
            "anneal",
            "--backend",
            "cpu",
            "--n",
            "200",
            "--d",
            "8",
            "--m",
            "4",
        ][..],
        &["batch", "--backend", "cpu", "--structures", "20"][..],
    ] {
        let mut child = Command::new(cargo_bin("apps"))
            .args(args)
            .env_remove("KILN_BACKEND")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Closing our end at once: the first line already meets a closed pipe.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
}

#[test]
fn bench_checks_its_output_path_first_and_writes_it_whole() {
    refused_line(
        "bench --quick --backend cpu --json /nonexistent/dir/out.json",
        1,
        "does not exist",
    );
    let dir = tempfile::tempdir().unwrap();
    refused(
        &[
            "bench",
            "--quick",
            "--backend",
            "cpu",
            "--json",
            dir.path().to_str().unwrap(),
        ],
        1,
        "is a directory",
    );
    let path = dir.path().join("out.json");
    apps()
        .args([
            "bench",
            "--quick",
            "--backend",
            "cpu",
            "--json",
            path.to_str().unwrap(),
        ])
        .assert()
        .success();
    let text = std::fs::read_to_string(&path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(json["figures"].as_array().is_some_and(|f| !f.is_empty()));
    // What xtask reads it with: the schema, strict about every field.
    let report: kiln_bench_schema::Report = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_value(&report).unwrap(), json);
    assert!(json["launch_overhead"]["not_measured"]
        .as_str()
        .is_some_and(|s| s.contains("cpu")));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no temp file is left behind");
    let mut f = std::fs::File::open(&path).unwrap();
    f.flush().unwrap();
}
