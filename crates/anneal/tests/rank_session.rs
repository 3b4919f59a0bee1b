//! The library's rank session (`distributed::meet`, `Meeting::join`,
//! `RankSession::run`) on ranks that are threads of this process: CPU ranks
//! against one process, a rank with another problem or the wrong target
//! refused, and two GPU ranks against one GPU.

use std::thread;

use kiln_anneal::distributed;
use kiln_anneal::Target;

mod rank_support;

use rank_support::{env, free_port, one_process, rank_problem, whole_problem};

/// The library's rank session (rendezvous on a thread while the rows are
/// checked, barrier, run) on CPU ranks: the same run as one process, each
/// rank's setup times filled in, and a rank with another problem refused
/// through `join`, naming it.
#[test]
fn rank_sessions_match_one_process_and_refuse_another_problem() {
    let one = one_process();
    let world = 3;
    let port = free_port();
    let ranks: Vec<_> = (0..world)
        .map(|rank| {
            thread::spawn(move || {
                let env = env(rank, world, port, 30);
                let meeting = distributed::meet(&env, "p", Target::Cpu, |r| panic!("{r}")).unwrap();
                let problem = rank_problem(rank, world);
                let mut session = meeting.join(&problem).unwrap();
                assert!(!session.is_gpu());
                assert_eq!(session.rank(), (rank, world));
                let times = session.times();
                assert_eq!(
                    (times.upload, times.nccl_init, times.warmup),
                    (0.0, 0.0, 0.0)
                );
                assert!(times.rendezvous > 0.0 && times.engine > 0.0, "{times:?}");
                let (out, _) = session.run(&problem, &mut |_, _, _| {}).unwrap();
                out
            })
        })
        .collect();
    let outs: Vec<_> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    for (rank, out) in outs.iter().enumerate() {
        assert_eq!(out.iterations, one.iterations, "rank {rank}");
        assert_eq!(out.maintenance, one.maintenance, "rank {rank}");
        assert_eq!(out.anchors, one.anchors, "rank {rank}");
    }
    assert_eq!(outs[0].assignments, one.assignments);
    assert!(outs[1..].iter().all(|o| o.assignments.is_empty()));

    // Rank 1 brings another problem: every rank's join fails, rank 0's
    // naming rank 1.
    let port = free_port();
    let other = thread::spawn(move || {
        let meeting = distributed::meet(&env(1, 2, port, 30), "q", Target::Cpu, |_| {}).unwrap();
        meeting.join(&whole_problem()).map(|_| ())
    });
    let meeting = distributed::meet(&env(0, 2, port, 30), "p", Target::Cpu, |_| {}).unwrap();
    let root = meeting.join(&whole_problem()).map(|_| ());
    let message = root.unwrap_err().to_string();
    assert!(message.contains("rank 1 runs another problem"), "{message}");
    assert!(other.join().unwrap().is_err());
}

/// A rank runs on the CPU or one CUDA GPU: no GPU, several, or a CPU
/// backend given as a GPU are refused by `meet`, before a thread starts,
/// in one line; and a session runs once.
#[test]
fn a_rank_on_a_wrong_target_is_refused_and_a_session_runs_once() {
    let env = env(0, 1, free_port(), 5);
    let err = distributed::meet(&env, "p", Target::Gpus(&[]), |_| {})
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "a rank runs on the CPU or on one CUDA GPU, not 0 CUDA GPUs; start one process per GPU"
    );
    let cpu = [gpu_core::Backend::cpu(), gpu_core::Backend::cpu()];
    let err = distributed::meet(&env, "p", Target::Gpus(&cpu), |_| {}).unwrap_err();
    assert!(err.to_string().contains("not 2 CUDA GPUs"), "{err}");
    let err = distributed::meet(&env, "p", Target::Gpus(&cpu[..1]), |_| {}).unwrap_err();
    assert!(matches!(err, kiln_anneal::AnnealError::NeedsCuda), "{err}");

    let problem = whole_problem();
    let meeting = distributed::meet(&env, "p", Target::Cpu, |_| {}).unwrap();
    let mut session = meeting.join(&problem).unwrap();
    let (out, _) = session.run(&problem, &mut |_, _, _| {}).unwrap();
    assert_eq!(out.assignments.len(), problem.n());
    let again = session.run(&problem, &mut |_, _, _| {}).unwrap_err();
    assert!(
        matches!(again, kiln_anneal::AnnealError::SessionRan),
        "{again}"
    );
}

/// Two GPU ranks (threads here, processes in a run), one GPU each, NCCL
/// between them and TCP for the rest, against one GPU alone: the same
/// iterations, maintenance and anchors count, the energy within 1e-6.
#[test]
fn two_gpu_ranks_match_one_gpu() {
    let Some(devices) = gpu_core::testing::devices(kiln_anneal::modules::ALL, 2) else {
        return;
    };
    let backends = devices.backends()[..2].to_vec();
    // The gate that skips (or fails under KILN_REQUIRE_NCCL) without libnccl.
    let streams: Vec<_> = backends.iter().map(|b| b.default_stream()).collect();
    let Some(gate) = gpu_core::testing::collective(&streams) else {
        return;
    };
    drop(gate);
    let whole = whole_problem();
    let one = kiln_anneal::run_sharded(&backends[..1], &whole, &mut |_, _, _| {}).unwrap();
    // The library's session: rank 0 makes the NCCL id, the rendezvous
    // hands it out, the rows upload while it waits, NCCL joins under the
    // watchdog.
    let port = free_port();
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            let backend = backends[rank].clone();
            thread::spawn(move || {
                let env = env(rank, 2, port, 30);
                let meeting =
                    distributed::meet(&env, "p", Target::of(&backend), |r| panic!("{r}")).unwrap();
                let problem = rank_problem(rank, 2);
                let mut session = meeting.join(&problem).unwrap();
                assert!(session.is_gpu());
                let times = session.times();
                assert!(times.upload > 0.0 && times.nccl_init > 0.0, "{times:?}");
                session.run(&problem, &mut |_, _, _| {}).unwrap().0
            })
        })
        .collect();
    let outs: Vec<_> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    for (rank, out) in outs.iter().enumerate() {
        assert_eq!(out.iterations, one.iterations, "rank {rank}");
        assert_eq!(out.maintenance, one.maintenance, "rank {rank}");
        assert_eq!(out.m, one.m, "rank {rank}");
        let rel = (out.energy - one.energy).abs() / one.energy;
        assert!(rel <= 1e-6, "rank {rank}: {rel:e}");
    }
    assert_eq!(outs[0].assignments.len(), whole.n());
    // NCCL's sums reach every rank with the same bits.
    assert_eq!(outs[0].anchors, outs[1].anchors);
    assert_eq!(outs[0].history, outs[1].history);
}
