//! `apps launch` and `apps anneal` as ranks of a multi-process run, on the
//! CPU backend over loopback: two processes give the index one process
//! gives (input split across `.npy` shards on another boundary than the
//! ranks'), a rank that dies mid-run ends the run with an error naming it
//! in bounded time, a rank alone times out naming the missing one, and bad
//! launcher variables or command lines are refused in one line.

use std::path::Path;
use std::time::{Duration, Instant};

use kiln_anneal::index::Index;

mod cli_support;

use cli_support::{apps, npy, refused};

/// A port free on loopback when this returns.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    listener.local_addr().unwrap().port()
}

/// The points of the runs: 3000 x 16, in two shards of 1200 and 1800 rows
/// (rank 0 of 2 holds rows 0..1500: all of the first shard and part of the
/// second).
fn write_shards(dir: &Path) -> [String; 2] {
    let (n, d) = (3000, 16);
    let points = kiln_anneal::synthetic_points(n, d, 12, 0.25, 5);
    let bytes: Vec<u8> = points.iter().flat_map(|v| v.to_le_bytes()).collect();
    let split = 1200 * d * 4;
    let a = dir.join("a.npy");
    let b = dir.join("b.npy");
    std::fs::write(&a, npy("<f4", 1200, d, &bytes[..split])).unwrap();
    std::fs::write(&b, npy("<f4", 1800, d, &bytes[split..])).unwrap();
    [a.display().to_string(), b.display().to_string()]
}

fn anneal_args<'a>(files: &'a [String; 2], out: &'a str) -> Vec<&'a str> {
    let mut args = vec!["anneal", "--backend", "cpu", "--npy"];
    args.extend(files.iter().map(String::as_str));
    args.extend([
        "--m", "24", "--iters", "12", "--tol", "0", "--seed", "5", "--out", out,
    ]);
    args
}

#[test]
fn two_processes_give_the_index_one_process_gives() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_shards(dir.path());
    let one_dir = dir.path().join("one").display().to_string();
    let two_dir = dir.path().join("two").display().to_string();
    apps()
        .args(anneal_args(&files, &one_dir))
        .assert()
        .success();
    let out = apps()
        .args(["launch", "--nprocs", "2", "--"])
        .args(anneal_args(&files, &two_dir))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("[rank 0] rank 0 of 2: rows 0..1500 of 3000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[rank 1] rank 1 of 2: rows 1500..3000 of 3000"),
        "{stdout}"
    );
    // Each rank says where its setup went, and rank 0 the whole run.
    for rank in 0..2 {
        let setup = format!("[rank {rank}] rank {rank}: setup ");
        let line = stdout.lines().find(|l| l.starts_with(&setup));
        let line = line.unwrap_or_else(|| panic!("no `{setup}` line: {stdout}"));
        for part in [
            "points",
            "rows checked",
            "rendezvous",
            "barrier",
            "cpu engine",
        ] {
            assert!(line.contains(part), "{line}");
        }
    }
    assert!(stdout.contains("[rank 0] rank 0: whole run "), "{stdout}");
    let (one, two) = (
        Index::read(Path::new(&one_dir)).unwrap(),
        Index::read(Path::new(&two_dir)).unwrap(),
    );
    assert!(
        !one.meta.maintenance.is_empty(),
        "the run exercises maintenance"
    );
    assert_eq!(two.meta.iterations, one.meta.iterations);
    assert_eq!(two.meta.maintenance, one.meta.maintenance);
    assert_eq!(two.meta.m, one.meta.m);
    let rel = (two.meta.energy - one.meta.energy).abs() / one.meta.energy;
    assert!(rel <= 1e-6, "energy differs by {rel:e}");
    for (a, b) in one.meta.energy_history.iter().zip(&two.meta.energy_history) {
        assert!((a - b).abs() <= 1e-6 * a, "{a} vs {b}");
    }
    assert_eq!(two.anchors, one.anchors);
    assert_eq!(two.assignments, one.assignments);
    assert_eq!(two.meta.input.hash, one.meta.input.hash);
    assert_eq!((one.meta.world_size, two.meta.world_size), (1, 2));
}

/// The reported mix-up: two `apps launch --nprocs 2 --port P` started at
/// once from two folders, the same command line (`p.npy`, `idx`) over
/// different points. In every trial each job writes the index one process
/// writes from its own points, or fails (its rank 0 could not listen, or
/// its rank 1 met the other job's rank 0) writing nothing; one of them
/// always runs.
#[test]
fn two_launches_on_one_port_each_write_their_own_index_or_one_fails() {
    let root = tempfile::tempdir().unwrap();
    let (n, d) = (600, 8);
    let args = [
        "anneal",
        "--backend",
        "cpu",
        "--npy",
        "p.npy",
        "--m",
        "8",
        "--iters",
        "6",
        "--tol",
        "0",
        "--out",
        "idx",
    ];
    let jobs: Vec<_> = [3, 4]
        .into_iter()
        .map(|seed| {
            let job = root.path().join(format!("job{seed}"));
            std::fs::create_dir(&job).unwrap();
            let points = kiln_anneal::synthetic_points(n, d, 6, 0.25, seed);
            let bytes: Vec<u8> = points.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(job.join("p.npy"), npy("<f4", n, d, &bytes)).unwrap();
            apps().current_dir(&job).args(args).assert().success();
            let alone = Index::read(&job.join("idx")).unwrap();
            std::fs::remove_dir_all(job.join("idx")).unwrap();
            (job, alone)
        })
        .collect();
    for trial in 0..4 {
        let port = free_port().to_string();
        let started: Vec<_> = jobs
            .iter()
            .map(|(job, _)| {
                std::process::Command::new(assert_cmd::cargo::cargo_bin("apps"))
                    .current_dir(job)
                    .env_remove("KILN_BACKEND")
                    .args(["launch", "--nprocs", "2", "--port", &port, "--"])
                    .args(args)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut ran = 0;
        for ((job, alone), child) in jobs.iter().zip(started) {
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let idx = job.join("idx");
            if out.status.success() {
                let index = Index::read(&idx).unwrap();
                assert_eq!(index.anchors, alone.anchors, "trial {trial}: {stderr}");
                assert_eq!(index.assignments, alone.assignments, "trial {trial}");
                assert_eq!(index.meta.input.hash, alone.meta.input.hash);
                std::fs::remove_dir_all(&idx).unwrap();
                ran += 1;
                continue;
            }
            assert!(!stderr.contains("panicked"), "{stderr}");
            assert!(!idx.exists(), "trial {trial}: a failed job wrote {stderr}");
            // Its rank 0 could not listen, or (as tests/rendezvous.rs
            // allows) its rank 1 met the other job's rank 0 first, while
            // that one was still gathering: either names the port.
            let port_taken = stderr.contains("[rank 0] error: rank 0: listening on 127.0.0.1:")
                && stderr.contains("the port is taken");
            let other_job = stderr.contains(&format!(
                "[rank 1] error: the rank 0 at 127.0.0.1:{port} is not of this job"
            ));
            assert!(port_taken || other_job, "trial {trial}: {stderr}");
            let last = stderr.trim_end().lines().last().unwrap_or_default();
            assert!(
                last.starts_with("error: launch: rank 0 exited with status 1")
                    || last.starts_with("error: launch: rank 1 exited with status 1"),
                "{last}"
            );
        }
        assert!(ran >= 1, "trial {trial}: neither job ran");
    }
}

#[test]
fn a_rank_that_dies_mid_run_ends_the_run_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_shards(dir.path());
    let out_dir = dir.path().join("idx").display().to_string();
    let started = Instant::now();
    let out = apps()
        .env("KILN_FAULT_EXIT_RANK", "1:3")
        .args(["launch", "--nprocs", "3", "--"])
        .args(anneal_args(&files, &out_dir))
        .output()
        .unwrap();
    // The bound the issue sets; it takes well under a second here.
    assert!(started.elapsed() < Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("rank 1 exited with status 3"), "{stderr}");
    // Named with its address: its host, when the ranks span several.
    let named = stderr.lines().any(|l| {
        l.starts_with("[rank 0] error: rank 1 (at 127.0.0.1:")
            && l.contains(") closed its connection")
    });
    assert!(named, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !Path::new(&out_dir).exists(),
        "nothing half-done is written"
    );
}

#[test]
fn a_rank_alone_times_out_naming_the_missing_rank() {
    let port = free_port().to_string();
    let out = apps()
        .envs([
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", port.as_str()),
            ("KILN_RANK_TIMEOUT", "1"),
        ])
        .args(["anneal", "--backend", "cpu"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no word from rank 1 for 1 s"), "{stderr}");
}

#[test]
fn bad_launches_and_rank_variables_are_refused_in_one_line() {
    refused(&["launch", "--nprocs", "2"], 2, "COMMAND");
    refused(&["launch", "--nprocs", "0", "--", "anneal"], 2, "--nprocs");
    let out = apps()
        .envs([("WORLD_SIZE", "2"), ("RANK", "x")])
        .args(["anneal", "--backend", "cpu"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("RANK=\"x\": not a whole number"),
        "{stderr}"
    );
    refused(&["launch", "--gpus", "0", "--", "anneal"], 2, "--gpus");
    // A timeout past a deadline's range (it panicked in both ranks).
    let out = apps()
        .envs([
            ("WORLD_SIZE", "2"),
            ("RANK", "1"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("KILN_JOB_SECRET", "s3cret-of-this-test"),
            ("KILN_RANK_TIMEOUT", "18446744073709551615"),
        ])
        .args([
            "anneal",
            "--backend",
            "cpu",
            "--n",
            "100",
            "--d",
            "4",
            "--m",
            "2",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr
            .contains("KILN_RANK_TIMEOUT=\"18446744073709551615\": not a whole number of seconds"),
        "{stderr}"
    );
    // Only a rank command runs as ranks: a launch in a launch would start
    // nprocs² processes, and a vadd nprocs copies of one.
    for command in [
        &["launch", "--nprocs", "2", "--", "anneal"][..],
        &["vadd"],
        &["encode", "idx", "--out", "x.npy", "--npy", "p.npy"],
        &["--version"],
        &["Anneal"],
    ] {
        let args: Vec<&str> = ["launch", "--nprocs", "2", "--"]
            .into_iter()
            .chain(command.iter().copied())
            .collect();
        refused(&args, 1, "runs only `apps anneal`");
    }
    refused(
        &["launch", "--gpus", "1", "--nprocs", "2", "--", "anneal"],
        2,
        "--nprocs",
    );
}
