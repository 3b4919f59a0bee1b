//! The multi-process anneal's parts on loopback, in one test process (a
//! thread per rank): the launcher variables, the row split, the rendezvous
//! (the id handed out, a different problem refused naming the rank, a rank
//! that never arrives timed out naming it), the TCP collectives, a dead
//! peer named (as `DistError::PeerGone`, inside a run's error too), and ranks that together match the one-process CPU run.

use std::collections::HashMap;
use std::thread;
use std::time::Duration;

use kiln_anneal::distributed::{
    gather_assignments, rendezvous, rows_of, Communicator, DistError, JobSecret, RankEngine,
    RankEnv, SecretSource, TcpComm, Watchdog, NCCL_ID_BYTES,
};
mod rank_support;

use rank_support::{env, free_port, one_process, rank_problem};

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| map.get(name).cloned()
}

/// `Ok(rank)` or the error's text.
fn check_env(vars: &[(&str, &str)], expected: Result<Option<usize>, &str>) {
    let got = RankEnv::from_lookup(lookup(vars));
    match (got, expected) {
        (Ok(env), Ok(rank)) => assert_eq!(env.map(|e| e.rank), rank, "{vars:?}"),
        (Err(e), Err(needle)) => {
            let text = e.to_string();
            assert!(text.contains(needle), "{vars:?}: {text}");
            assert!(!text.contains('\n'));
        }
        (got, expected) => panic!("{vars:?}: got {got:?}, expected {expected:?}"),
    }
}

const GOOD: [(&str, &str); 5] = [
    ("RANK", "1"),
    ("WORLD_SIZE", "2"),
    ("LOCAL_RANK", "1"),
    ("MASTER_ADDR", "127.0.0.1"),
    ("MASTER_PORT", "29500"),
];

fn with(changes: &[(&'static str, Option<&'static str>)]) -> Vec<(&'static str, &'static str)> {
    let mut vars: Vec<(&str, &str)> = GOOD.to_vec();
    for (name, value) in changes {
        vars.retain(|(k, _)| k != name);
        if let Some(v) = value {
            vars.push((name, v));
        }
    }
    vars
}

#[test]
fn launcher_variables_parse_or_are_refused_naming_the_variable() {
    check_env(&GOOD, Ok(Some(1)));
    check_env(&[], Ok(None));
    check_env(&with(&[("LOCAL_RANK", None)]), Ok(Some(1)));
    check_env(
        &with(&[("RANK", None)]),
        Err("WORLD_SIZE is set but not RANK"),
    );
    check_env(
        &with(&[("MASTER_ADDR", None)]),
        Err("MASTER_ADDR is not set"),
    );
    check_env(
        &with(&[("MASTER_PORT", None)]),
        Err("MASTER_PORT is not set"),
    );
    check_env(
        &with(&[("RANK", Some("x"))]),
        Err("RANK=\"x\": not a whole number"),
    );
    check_env(
        &with(&[("RANK", Some("2"))]),
        Err("RANK=\"2\": ranks are 0..2"),
    );
    check_env(&with(&[("WORLD_SIZE", Some("0"))]), Err("WORLD_SIZE=\"0\""));
    check_env(
        &with(&[("WORLD_SIZE", Some("-1"))]),
        Err("WORLD_SIZE=\"-1\""),
    );
    check_env(&with(&[("LOCAL_RANK", Some("3"))]), Err("LOCAL_RANK"));
    check_env(
        &with(&[("MASTER_PORT", Some("0"))]),
        Err("MASTER_PORT=\"0\""),
    );
    check_env(&with(&[("MASTER_PORT", Some("70000"))]), Err("MASTER_PORT"));
    check_env(&with(&[("MASTER_ADDR", Some(" "))]), Err("MASTER_ADDR"));
    check_env(
        &with(&[("KILN_RANK_TIMEOUT", Some("soon"))]),
        Err("KILN_RANK_TIMEOUT"),
    );
    check_env(
        &with(&[("KILN_MASTER_PORT", Some("x"))]),
        Err("KILN_MASTER_PORT=\"x\""),
    );
    let moved = RankEnv::from_lookup(lookup(&with(&[("KILN_MASTER_PORT", Some("29600"))])));
    assert_eq!(moved.unwrap().unwrap().master_port, 29600);
    let env = RankEnv::from_lookup(lookup(&with(&[("KILN_RANK_TIMEOUT", Some("7"))])))
        .unwrap()
        .unwrap();
    assert_eq!(env.timeout, Duration::from_secs(7));
    check_env(
        &with(&[("KILN_HANDSHAKE_TIMEOUT", Some("0"))]),
        Err("KILN_HANDSHAKE_TIMEOUT=\"0\": not a whole number of seconds from 1 to"),
    );
    check_env(
        &with(&[("KILN_JOB_SECRET", Some(" "))]),
        Err("KILN_JOB_SECRET=\"\": empty"),
    );
    let env = RankEnv::from_lookup(lookup(&with(&[("KILN_HANDSHAKE_TIMEOUT", Some("3"))])))
        .unwrap()
        .unwrap();
    assert_eq!(env.handshake_timeout, Duration::from_secs(3));
}

/// The job's secret: the variable wins over the launchers' job ids, which
/// stand in for it; torchrun's default run id is no id; nothing at all is
/// the shared unset secret. Its Debug never shows it.
#[test]
fn the_job_secret_comes_from_the_variable_then_the_launchers_job_id() {
    let secret = |vars: &[(&str, &str)]| {
        RankEnv::from_lookup(lookup(&[&GOOD[..], vars].concat()))
            .unwrap()
            .unwrap()
            .secret
    };
    let cases: [(&[(&str, &str)], SecretSource); 7] = [
        (&[], SecretSource::Unset),
        (&[("KILN_JOB_SECRET", "s3cret")], SecretSource::Variable),
        (
            &[
                ("KILN_JOB_SECRET", "s3cret"),
                ("TORCHELASTIC_RUN_ID", "r1"),
                ("SLURM_JOB_ID", "7"),
            ],
            SecretSource::Variable,
        ),
        (&[("TORCHELASTIC_RUN_ID", "r1")], SecretSource::Torchrun),
        (&[("TORCHELASTIC_RUN_ID", "none")], SecretSource::Unset),
        (
            &[("TORCHELASTIC_RUN_ID", "none"), ("SLURM_JOB_ID", "7")],
            SecretSource::Slurm,
        ),
        (&[("SLURM_JOB_ID", " ")], SecretSource::Unset),
    ];
    for (vars, source) in cases {
        let got = secret(vars);
        assert_eq!(got.source(), source, "{vars:?}");
        assert!(!format!("{got:?}").contains("s3cret"), "{got:?}");
    }
    assert_eq!(
        secret(&[("KILN_JOB_SECRET", "a")]),
        JobSecret::new("a"),
        "the variable is the secret"
    );
    assert_ne!(
        secret(&[("KILN_JOB_SECRET", "a")]),
        secret(&[("KILN_JOB_SECRET", "b")])
    );
    // Another step of one Slurm job is another job.
    assert_ne!(
        secret(&[("SLURM_JOB_ID", "7"), ("SLURM_STEP_ID", "0")]),
        secret(&[("SLURM_JOB_ID", "7"), ("SLURM_STEP_ID", "1")])
    );
    // A secret that spells a job id is not that job's.
    assert_ne!(
        secret(&[("KILN_JOB_SECRET", "r1")]),
        secret(&[("TORCHELASTIC_RUN_ID", "r1")])
    );
    let (a, b) = (
        JobSecret::generate().unwrap(),
        JobSecret::generate().unwrap(),
    );
    assert_eq!(a.len(), 64);
    assert_ne!(a, b, "a fresh secret per job");
}

#[test]
fn rows_split_balanced_contiguous_and_refuse_idle_ranks() {
    for (n, world) in [(10, 3), (7, 7), (1000, 4), (5, 1)] {
        let mut next = 0;
        for rank in 0..world {
            let rows = rows_of(rank, world, n).unwrap();
            assert_eq!(rows.start, next, "n {n} world {world}");
            assert!(rows.len() == n / world || rows.len() == n / world + 1);
            next = rows.end;
        }
        assert_eq!(next, n);
    }
    assert_eq!(rows_of(0, 4, 3), None);
    assert_eq!(rows_of(2, 2, 10), None);
    // rank × n past usize (it overflowed): the split is still exact.
    let (n, world) = (usize::MAX, 1 << 40);
    let last = rows_of(world - 1, world, n).unwrap();
    assert_eq!(last.end, n);
    assert!(last.len() == n / world || last.len() == n / world + 1);
    let second = rows_of(1, world, n).unwrap();
    assert_eq!(second.start, rows_of(0, world, n).unwrap().end);
}

/// Runs `body(rank, comm)` on `world` ranks (threads) after a rendezvous on
/// loopback; returns each rank's result in rank order.
fn on_ranks<T: Send + 'static>(
    world: usize,
    body: impl Fn(usize, TcpComm) -> T + Send + Sync + Clone + 'static,
) -> Vec<T> {
    let port = free_port();
    let handles: Vec<_> = (0..world)
        .map(|rank| {
            let body = body.clone();
            thread::spawn(move || {
                let (link, id) = rendezvous(
                    &env(rank, world, port, 30),
                    "p",
                    || Ok([7; NCCL_ID_BYTES]),
                    |r| panic!("{r}"),
                )
                .unwrap();
                assert_eq!(id, [7; NCCL_ID_BYTES], "rank {rank} got rank 0's id");
                body(rank, TcpComm::new(rank, world, link))
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn collectives_sum_in_rank_order_broadcast_and_gather() {
    let results = on_ranks(3, |rank, mut comm| {
        assert_eq!((comm.rank(), comm.world_size()), (rank, 3));
        // 1e16 + 1 + 1 in rank order loses both ones; any other order
        // keeps one of them: the order is part of the contract.
        let mut sum = [[1e16, 1.0, 1.0][rank], rank as f64];
        comm.all_reduce_sum(&mut sum, "test").unwrap();
        let mut bytes = vec![rank as u8; rank + 1];
        comm.broadcast(&mut bytes, "test").unwrap();
        let gathered = comm.gather(&[rank as u8 * 10], "test").unwrap();
        // Parts of different lengths, rank 2's in two frames, straight
        // into rank 0's slots.
        let mut into = vec![0u8; 5];
        if rank == 0 {
            let (one, two) = into.split_at_mut(2);
            comm.recv_parts(&mut [one, two], "test").unwrap();
        } else {
            let part = vec![rank as u8; rank + 1];
            for frame in part.chunks(2) {
                comm.send_part(frame, "test").unwrap();
            }
        }
        // A frame longer than its slot has room for is refused, naming the rank.
        let mut small = [0u8; 2];
        let (one, two) = small.split_at_mut(1);
        let refused = if rank == 0 {
            comm.recv_parts(&mut [one, two], "test")
                .err()
                .map(|e| e.to_string())
        } else {
            comm.send_part(&vec![7; rank], "test").unwrap();
            None
        };
        (sum, bytes, gathered, into, refused)
    });
    for (rank, (sum, bytes, gathered, into, refused)) in results.iter().enumerate() {
        assert_eq!(sum[0].to_bits(), ((1e16 + 1.0) + 1.0f64).to_bits());
        assert_eq!(sum[1], 3.0);
        assert_eq!(bytes, &vec![0u8], "rank {rank} got rank 0's bytes");
        if rank == 0 {
            assert_eq!(gathered, &vec![vec![0], vec![10], vec![20]]);
            assert_eq!(into, &vec![1, 1, 2, 2, 2]);
            let refused = refused.as_deref().unwrap_or_default();
            assert!(
                refused.starts_with("rank 2 sent 2 bytes where 1 at most"),
                "{refused}"
            );
        } else {
            assert!(gathered.is_empty());
            assert_eq!(into, &vec![0; 5]);
        }
    }
}

/// Assignments over 3 ranks, each rank's more than one piece of the
/// gather: rank 0 gets every row's in row order, the others nothing, and
/// each rank read exactly its own rows.
#[test]
fn assignments_gather_in_row_order_in_pieces() {
    let n = (3 << 20) + 7;
    let results = on_ranks(3, move |rank, mut comm| {
        let rows = rows_of(rank, 3, n).unwrap();
        let mut read = 0;
        let all = gather_assignments(&mut comm, n, |offset, out| {
            for (i, v) in out.iter_mut().enumerate() {
                *v = (rows.start + offset + i) as u32;
            }
            read += out.len();
            Ok(())
        })
        .unwrap();
        (all, read, rows.len())
    });
    for (rank, (all, read, rows)) in results.iter().enumerate() {
        assert_eq!(read, rows, "rank {rank} read its rows once");
        if rank == 0 {
            assert_eq!(all.len(), n);
            assert!(all.iter().enumerate().all(|(i, &v)| v == i as u32));
        } else {
            assert!(all.is_empty());
        }
    }
}

#[test]
fn a_rank_with_another_problem_is_refused_naming_it() {
    let port = free_port();
    let leaves: Vec<_> = [(1, "p"), (2, "q")]
        .into_iter()
        .map(|(rank, problem)| {
            thread::spawn(move || {
                rendezvous(&env(rank, 3, port, 3), problem, || unreachable!(), |_| {})
            })
        })
        .collect();
    let root = rendezvous(&env(0, 3, port, 30), "p", || Ok([0; NCCL_ID_BYTES]), |_| {});
    match root {
        Err(DistError::Mismatch { rank: 2, what }) => assert!(what.contains("`q`"), "{what}"),
        other => panic!("rank 0: {other:?}"),
    }
    let mut leaves = leaves.into_iter().map(|h| h.join().unwrap());
    // Rank 1 is told the run is off, or (when rank 2 came first) finds rank
    // 0 gone or no longer listening; it never hangs.
    match leaves.next().unwrap() {
        Err(DistError::Refused(why)) => assert!(why.contains("rank 2"), "{why}"),
        Err(DistError::PeerGone { rank: 0, .. } | DistError::Timeout { rank: 0, .. }) => {}
        other => panic!("rank 1: {other:?}"),
    }
    match leaves.next().unwrap() {
        Err(DistError::Refused(why)) => assert!(why.contains("`q` where rank 0 runs `p`"), "{why}"),
        other => panic!("rank 2: {other:?}"),
    }
}

#[test]
fn a_rank_that_never_arrives_times_out_naming_it() {
    let port = free_port();
    let leaf =
        thread::spawn(move || rendezvous(&env(1, 3, port, 30), "p", || unreachable!(), |_| {}));
    let root = rendezvous(&env(0, 3, port, 1), "p", || Ok([0; NCCL_ID_BYTES]), |_| {});
    match root {
        Err(e @ DistError::Timeout { rank: 2, .. }) => {
            assert!(e.to_string().contains("rank 2"), "{e}")
        }
        other => panic!("rank 0: {other:?}"),
    }
    // Rank 0 went away: rank 1 hears it, it does not hang.
    assert!(matches!(
        leaf.join().unwrap(),
        Err(DistError::PeerGone { rank: 0, .. })
    ));
    // No rank 0 at all: connecting gives up after the timeout.
    let alone = rendezvous(&env(1, 2, free_port(), 1), "p", || unreachable!(), |_| {});
    assert!(
        matches!(alone, Err(DistError::Timeout { rank: 0, .. })),
        "{alone:?}"
    );
}

#[test]
fn a_rank_that_dies_is_named_by_the_others() {
    let results = on_ranks(2, |rank, mut comm| {
        if rank == 1 {
            drop(comm);
            return None;
        }
        Some(comm.all_reduce_sum(&mut [1.0], "a step's statistics"))
    });
    match &results[0] {
        Some(Err(e @ DistError::PeerGone { rank: 1, addr, .. })) => {
            // Named with its end of the connection: its host.
            let at = addr.expect("the connection knows its peer");
            assert!(at.ip().is_loopback(), "{at}");
            let text = e.to_string();
            assert!(
                text.starts_with(&format!(
                    "rank 1 (at {at}) closed its connection during a step's"
                )),
                "{text}"
            );
        }
        other => panic!("rank 0: {other:?}"),
    }
}

/// A rank that dies mid-run fails the others' runs with
/// `AnnealError::Dist(DistError::PeerGone)` naming the rank each saw go
/// (the variant, not a message to search): rank 0 names the dead rank 2,
/// and rank 1, whose sum rank 0 then never sends, names rank 0.
#[test]
fn a_dead_rank_fails_the_run_as_peer_gone_with_its_rank() {
    use kiln_anneal::AnnealError;
    let results = on_ranks(3, |rank, comm| {
        if rank == 2 {
            drop(comm);
            return None;
        }
        let problem = rank_problem(rank, 3);
        let mut engine = RankEngine::new(&problem, comm);
        Some(kiln_anneal::run_with(&mut engine, &problem, &mut |_, _, _| {}).unwrap_err())
    });
    for (rank, dead) in [(0, 2), (1, 0)] {
        match &results[rank] {
            Some(e @ AnnealError::Dist(DistError::PeerGone { rank: gone, .. })) => {
                assert_eq!(*gone, dead, "rank {rank}: {e}");
                assert_eq!(e.dead_rank(), Some(dead));
                assert!(
                    e.to_string()
                        .starts_with(&format!("rank {dead} (at 127.0.0.1:")),
                    "{e}"
                );
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

#[test]
fn the_watchdog_aborts_when_a_peer_goes_and_not_after_the_run() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let aborts = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&aborts);
    let results = on_ranks(3, move |rank, mut comm| {
        let aborts = Arc::clone(&seen);
        let watchdog = Watchdog::start(&comm, move |_| {
            aborts.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        if rank > 0 {
            // These ranks are done before they leave: rank 0 leaving after
            // them is no failure of theirs (no abort).
            watchdog.finish();
        }
        comm.all_reduce_sum(&mut [1.0], "a step").unwrap();
        if rank > 0 {
            return None;
        }
        // Ranks 1 and 2 closed their connections: the watchdog names the
        // first and aborts once, without this thread reading anything.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while watchdog.gone().is_none() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        Some(watchdog.gone())
    });
    assert!(matches!(results[0], Some(Some(1 | 2))), "{:?}", results[0]);
    assert_eq!(aborts.load(Ordering::SeqCst), 1, "one abort, rank 0's");
}

#[test]
fn ranks_together_match_one_process() {
    let one = one_process();
    assert!(!one.maintenance.is_empty(), "no maintenance in {one:?}");
    for world in [2, 3] {
        let outs = on_ranks(world, move |rank, comm| {
            let problem = rank_problem(rank, world);
            let mut engine = RankEngine::new(&problem, comm);
            kiln_anneal::run_with(&mut engine, &problem, &mut |_, _, _| {}).unwrap()
        });
        for (rank, out) in outs.iter().enumerate() {
            assert_eq!(out.iterations, one.iterations, "world {world} rank {rank}");
            assert_eq!(
                out.maintenance, one.maintenance,
                "world {world} rank {rank}"
            );
            assert_eq!(out.m, one.m);
            let rel = (out.energy - one.energy).abs() / one.energy;
            assert!(rel <= 1e-6, "world {world} rank {rank}: {rel:e}");
            assert_eq!(out.anchors, one.anchors, "world {world} rank {rank}");
        }
        assert_eq!(
            outs[0].assignments, one.assignments,
            "world {world}: rank 0 has all"
        );
        assert!(outs[1..].iter().all(|o| o.assignments.is_empty()));
    }
}
