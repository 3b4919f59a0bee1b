//! `apps encode DIR --npy FILE... --out FILE` (issue 27): an index's own
//! training points give its assignments file back; chunks of a tenth give
//! the bits of one piece; and the refusals (wrong d, a damaged index, a
//! missing or empty shard, an output over a user's file, in a missing
//! folder, over an input) in one line, leaving nothing; encodes racing to
//! one file. On the CPU, and on CUDA too where a GPU is usable.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::cargo_bin;

mod cli_support;

use cli_support::{apps, npy, refused};

/// Runs `apps args`; returns stdout and stderr, panicking on failure.
#[track_caller]
fn ok(args: &[String]) -> (String, String) {
    let out = apps().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

fn words(args: &[&str], files: &[PathBuf]) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let at = all
        .iter()
        .position(|a| a == "--npy")
        .map_or(all.len(), |i| i + 1);
    for (k, f) in files.iter().enumerate() {
        all.insert(at + k, f.display().to_string());
    }
    all
}

/// `values` (`n × d`, f32) written as `parts` files `name0.npy`, ...
fn write_npy(dir: &Path, name: &str, values: &[f32], d: usize, parts: usize) -> Vec<PathBuf> {
    let n = values.len() / d;
    (0..parts)
        .map(|p| {
            let part = &values[p * n / parts * d..(p + 1) * n / parts * d];
            let bytes: Vec<u8> = part.iter().flat_map(|v| v.to_le_bytes()).collect();
            let path = dir.join(format!("{name}{p}.npy"));
            fs::write(&path, npy("<f4", part.len() / d, d, &bytes)).unwrap();
            path
        })
        .collect()
}

/// The backends to run on: the CPU, and CUDA where a GPU is usable.
fn backends() -> Vec<&'static str> {
    let mut backends = vec!["cpu"];
    if gpu_core::testing::cuda_backend(kiln_anneal::modules::ALL).is_some() {
        backends.push("cuda");
    }
    backends
}

/// An index in `dir/idx-BACKEND` trained on `files` on `backend`
/// (`extra`: more flags).
fn trained_with(dir: &Path, backend: &str, files: &[PathBuf], m: usize, extra: &[&str]) -> PathBuf {
    let idx = dir.join(format!("idx-{backend}"));
    let idx_text = idx.display().to_string();
    let m = m.to_string();
    let mut args = vec![
        "anneal",
        "--backend",
        backend,
        "--m",
        &m,
        "--out",
        &idx_text,
    ];
    args.extend(extra);
    args.push("--npy");
    ok(&words(&args, files));
    idx
}

fn trained(dir: &Path, backend: &str, files: &[PathBuf], m: usize) -> PathBuf {
    trained_with(dir, backend, files, m, &[])
}

/// Asserts two files hold the same bytes, saying how many differ.
#[track_caller]
fn same_bytes(a: &Path, b: &Path, what: &str) {
    let (a, b) = (fs::read(a).unwrap(), fs::read(b).unwrap());
    let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    assert!(
        a == b,
        "{what}: lengths {} / {}, {differ} bytes differ",
        a.len(),
        b.len()
    );
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn the_training_points_give_the_index_assignments_back() {
    for backend in backends() {
        let dir = tempfile::tempdir().unwrap();
        let d = 16;
        // The index's assignments are the last step's, against the anchors
        // before its update; the stored anchors are after it. On blobs far
        // apart, run until the temperature is 0 (a step of 1: Lloyd's) and
        // the assignment no longer changes, the last update moves no point
        // across a boundary, so the stored anchors assign as that step did.
        let values = kiln_anneal::synthetic_points(3000, d, 12, 0.01, 3);
        let files = write_npy(dir.path(), "train", &values, d, 2);
        let idx = trained_with(
            dir.path(),
            backend,
            &files,
            12,
            &["--iters", "300", "--tol", "0"],
        );
        let out = dir.path().join("codes.npy");
        let (stdout, stderr) = ok(&words(
            &[
                "encode",
                &s(&idx),
                "--backend",
                backend,
                "--chunk",
                "300",
                "--out",
                &s(&out),
                "--npy",
            ],
            &files,
        ));
        assert!(stdout.contains("3000 points in 10 chunks"), "{stdout}");
        assert!(stderr.contains("encode: 3000 of 3000 points"), "{stderr}");
        same_bytes(&out, &idx.join("assignments.npy"), backend);
    }
}

#[test]
fn chunks_of_a_tenth_give_the_bits_of_one_piece() {
    for backend in backends() {
        let dir = tempfile::tempdir().unwrap();
        let d = 24;
        let train = write_npy(
            dir.path(),
            "train",
            &kiln_anneal::synthetic_points(800, d, 8, 0.4, 1),
            d,
            1,
        );
        let idx = trained(dir.path(), backend, &train, 20);
        // New points, wider than the training blobs: many near a boundary.
        let new = write_npy(
            dir.path(),
            "new",
            &kiln_anneal::synthetic_points(5000, d, 5, 1.0, 2),
            d,
            3,
        );
        let (one, tenth) = (dir.path().join("one.npy"), dir.path().join("tenth.npy"));
        ok(&words(
            &[
                "encode",
                &s(&idx),
                "--backend",
                backend,
                "--out",
                &s(&one),
                "--npy",
            ],
            &new,
        ));
        ok(&words(
            &[
                "encode",
                &s(&idx),
                "--backend",
                backend,
                "--chunk",
                "500",
                "--out",
                &s(&tenth),
                "--npy",
            ],
            &new,
        ));
        same_bytes(&one, &tenth, backend);
        let codes = kiln_anneal::npy::read_u32_vector(&one).unwrap();
        assert_eq!(codes.len(), 5000);
    }
}

#[test]
fn hostile_inputs_and_outputs_are_refused_in_one_line_leaving_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let d = 6;
    let train = write_npy(
        p,
        "train",
        &kiln_anneal::synthetic_points(300, d, 4, 0.3, 1),
        d,
        1,
    );
    let idx = trained(p, "cpu", &train, 8);
    let wide = write_npy(
        p,
        "wide",
        &kiln_anneal::synthetic_points(10, d + 2, 2, 0.3, 1),
        d + 2,
        1,
    );
    let empty = p.join("empty.npy");
    fs::write(&empty, b"").unwrap();
    let short = p.join("short.npy");
    let whole = fs::read(&train[0]).unwrap();
    fs::write(&short, &whole[..whole.len() - 5]).unwrap();
    let users = p.join("users.npy");
    fs::write(&users, b"mine").unwrap();
    let damaged = p.join("damaged");
    fs::create_dir(&damaged).unwrap();
    for f in ["anchors.npy", "index.json"] {
        fs::copy(idx.join(f), damaged.join(f)).unwrap();
    }
    let bytes = fs::read(idx.join("assignments.npy")).unwrap();
    fs::write(damaged.join("assignments.npy"), &bytes[..bytes.len() - 4]).unwrap();
    let out = s(&p.join("out.npy"));
    let (idx_s, train_s) = (s(&idx), s(&train[0]));
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            words(&["encode", &idx_s, "--out", &out, "--npy"], &wide),
            "--npy: the points have d = 8 but the index has d = 6",
        ),
        (
            words(&["encode", &s(&damaged), "--out", &out, "--npy"], &train),
            "assignments.npy: the input is truncated",
        ),
        (
            words(
                &[
                    "encode",
                    &idx_s,
                    "--out",
                    &out,
                    "--npy",
                    &s(&p.join("missing.npy")),
                ],
                &train,
            ),
            "--npy ",
        ),
        (
            words(
                &["encode", &idx_s, "--out", &out, "--npy", &s(&empty)],
                &train,
            ),
            "empty.npy: not an npy file: it is empty",
        ),
        (
            words(&["encode", &idx_s, "--out", &out, "--npy", &s(&short)], &[]),
            "short.npy: the input is truncated",
        ),
        (
            words(&["encode", &idx_s, "--out", &s(&users), "--npy"], &train),
            "already exists; pass --force",
        ),
        (
            words(
                &[
                    "encode",
                    &idx_s,
                    "--out",
                    &s(&p.join("no/such/out.npy")),
                    "--npy",
                ],
                &train,
            ),
            "directory does not exist",
        ),
        (
            words(
                &["encode", &idx_s, "--force", "--out", &train_s, "--npy"],
                &train,
            ),
            "is one of the input files",
        ),
        (
            words(
                &["encode", &idx_s, "--out", &s(&idx.join("x.npy")), "--npy"],
                &train,
            ),
            "is inside the index",
        ),
        (
            words(
                &[
                    "encode",
                    &idx_s,
                    "--backend",
                    "wgpu",
                    "--out",
                    &out,
                    "--npy",
                ],
                &train,
            ),
            "runs only `apps anneal`",
        ),
        (
            words(
                &["encode", &idx_s, "--chunk", "0", "--out", &out, "--npy"],
                &train,
            ),
            "--chunk",
        ),
    ];
    let train_bytes = fs::read(&train[0]).unwrap();
    let before: Vec<_> = fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    for (args, says) in &cases {
        let code = if args.iter().any(|a| a == "0") { 2 } else { 1 };
        refused(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            code,
            says,
        );
    }
    let after: Vec<_> = fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before.len(), after.len(), "{after:?}");
    assert_eq!(fs::read(&users).unwrap(), b"mine");
    assert_eq!(
        fs::read(&train[0]).unwrap(),
        train_bytes,
        "an input was touched"
    );
    // --force replaces the user's file, whole.
    ok(&words(
        &["encode", &idx_s, "--force", "--out", &s(&users), "--npy"],
        &train,
    ));
    assert_eq!(
        kiln_anneal::npy::read_u32_vector(&users).unwrap().len(),
        300
    );
}

#[test]
fn encodes_racing_to_one_file_leave_one_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let d = 8;
    let train = write_npy(
        p,
        "train",
        &kiln_anneal::synthetic_points(400, d, 4, 0.3, 1),
        d,
        1,
    );
    let idx = trained(p, "cpu", &train, 8);
    let new = write_npy(
        p,
        "new",
        &kiln_anneal::synthetic_points(20_000, d, 4, 0.6, 2),
        d,
        2,
    );
    let expected = p.join("expected.npy");
    ok(&words(
        &["encode", &s(&idx), "--out", &s(&expected), "--npy"],
        &new,
    ));
    let out = p.join("race.npy");
    let runs: Vec<_> = (0..3)
        .map(|_| {
            Command::new(cargo_bin("apps"))
                .env_remove("KILN_BACKEND")
                .args(words(
                    &[
                        "encode",
                        &s(&idx),
                        "--chunk",
                        "1000",
                        "--out",
                        &s(&out),
                        "--npy",
                    ],
                    &new,
                ))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = runs
        .into_iter()
        .map(|r| r.wait_with_output().unwrap())
        .collect();
    let won = outputs.iter().filter(|o| o.status.success()).count();
    assert_eq!(won, 1, "one encode wins the file");
    for o in outputs.iter().filter(|o| !o.status.success()) {
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("already exists"), "{stderr}");
    }
    same_bytes(&out, &expected, "the race's winner");
    let temps = fs::read_dir(p)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp")
        })
        .count();
    assert_eq!(temps, 0, "a temporary file was left");
}

/// `n` points of dimension `d` in `p/train0.npy`, and an index of `m`
/// anchors trained on them on the CPU.
fn small_index(p: &Path, n: usize, d: usize, m: usize) -> (Vec<PathBuf>, PathBuf) {
    let points = kiln_anneal::synthetic_points(n, d, 4, 0.3, 1);
    let train = write_npy(p, "train", &points, d, 1);
    let idx = trained(p, "cpu", &train, m);
    (train, idx)
}

/// An index whose files are FIFOs (the encode waited on them forever) or
/// whose anchors are finite but huge (points landed on them) is refused in
/// one line, and nothing is written.
#[test]
fn an_index_of_fifos_or_huge_anchors_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let d = 4;
    let (train, idx) = small_index(p, 200, d, 8);
    let copy = |name: &str| {
        let to = p.join(name);
        fs::create_dir(&to).unwrap();
        for f in ["anchors.npy", "assignments.npy", "index.json"] {
            fs::copy(idx.join(f), to.join(f)).unwrap();
        }
        to
    };
    let mut cases = Vec::new();
    for f in ["index.json", "anchors.npy"] {
        let to = copy(&format!("fifo-{f}"));
        fs::remove_file(to.join(f)).unwrap();
        let made = Command::new("mkfifo").arg(to.join(f)).status().unwrap();
        assert!(
            made.success(),
            "mkfifo failed: a FIFO is what this test reads"
        );
        cases.push((to, format!("{f}: is a FIFO, not a regular file")));
    }
    let huge = copy("huge");
    let index = kiln_anneal::index::Index::read(&idx).unwrap();
    let mut anchors = index.anchors.clone();
    anchors[1] = 3e38;
    let mut w = fs::File::create(huge.join("anchors.npy")).unwrap();
    let m = index.meta.m as usize;
    kiln_anneal::npy::write_f32_matrix(&mut w, m, d, &anchors).unwrap();
    let bound = kiln_anneal::coordinate_bound(d);
    cases.push((
        huge,
        format!("anchor 0 has coordinate 3e38 at dimension 1, beyond ±{bound:.3e}"),
    ));
    let out = p.join("out.npy");
    for (index_dir, says) in &cases {
        refused(
            &[
                "encode",
                &s(index_dir),
                "--out",
                &s(&out),
                "--npy",
                &s(&train[0]),
            ],
            1,
            says,
        );
        assert!(!out.exists(), "{says}: an output was written");
    }
}

/// An output file that is a mount point (a file bind-mounted over it) is
/// refused before the run: the rename at its end cannot replace it. Runs
/// `apps` in a user and mount namespace of its own (`unshare -rm`).
#[test]
#[ignore = "needs unprivileged user and mount namespaces (unshare -rm): \
            cargo test -p apps --test encode -- --ignored"]
fn an_output_that_is_a_mount_point_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let (train, idx) = small_index(p, 100, 4, 4);
    let (out, other) = (p.join("out.npy"), p.join("other"));
    fs::write(&out, b"mine").unwrap();
    fs::write(&other, b"mounted").unwrap();
    let script = format!(
        "mount --bind '{}' '{}' && exec '{}' encode '{}' --force --out '{}' --npy '{}'",
        s(&other),
        s(&out),
        s(&cargo_bin("apps")),
        s(&idx),
        s(&out),
        s(&train[0])
    );
    let run = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .env_remove("KILN_BACKEND")
        .output()
        .expect("unshare: this test needs util-linux's unshare");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert_eq!(run.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is a mount point"), "{stderr}");
    assert!(!stdout.contains("encode:"), "the run started: {stdout}");
    assert_eq!(fs::read(&out).unwrap(), b"mine");
    assert_eq!(fs::read(&other).unwrap(), b"mounted");
}
