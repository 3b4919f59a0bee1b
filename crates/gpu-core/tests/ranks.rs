//! NCCL across processes (`RankCollective`), with one thread per rank
//! standing in for the processes: the unique id shared, the sum and the
//! broadcast checked against the host, and `AbortHandle::abort` ending an
//! all-reduce whose peer never comes (what a dead process leaves behind),
//! in bounded time. They need two GPUs and libnccl (`gpu_core::testing`
//! prints `skipped:` otherwise); the refusals run everywhere.

use std::sync::mpsc;
use std::time::Duration;

use gpu_core::error::CollectiveMismatch;
use gpu_core::{Backend, Error, RankCollective, Stream};

/// Two streams on two GPUs, when there are two and libnccl loads.
fn two_ranks_or_skip() -> Option<Vec<Stream>> {
    let devices = gpu_core::testing::devices(&[], 2)?;
    let streams = devices.new_streams().unwrap()[..2].to_vec();
    // The one-process collective's constructor is the gate that skips (or,
    // under KILN_REQUIRE_NCCL, fails) without libnccl.
    drop(gpu_core::testing::collective(&streams)?);
    Some(streams)
}

#[test]
fn a_cpu_stream_is_refused_before_nccl_is_touched() {
    let stream = Backend::cpu().default_stream();
    let err = RankCollective::new(&stream, &[0; gpu_core::NCCL_ID_BYTES], 0, 2).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidCollective(CollectiveMismatch::CpuStream { rank: 0 })
        ),
        "{err}"
    );
}

#[test]
fn two_ranks_sum_and_broadcast() {
    let Some(streams) = two_ranks_or_skip() else {
        return;
    };
    let id = gpu_core::nccl_unique_id().unwrap();
    let results: Vec<(Vec<f64>, Vec<u32>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = streams
            .iter()
            .enumerate()
            .map(|(rank, stream)| {
                scope.spawn(move || {
                    let comm = RankCollective::new(stream, &id, rank, 2).unwrap();
                    assert_eq!((comm.rank(), comm.world_size()), (rank, 2));
                    let mut sums = stream.alloc_zeros::<f64>(3).unwrap();
                    let mine = [1.0 + rank as f64, 10.0 * rank as f64, 0.5];
                    stream.copy_to_device(&mine, &mut sums.view_mut()).unwrap();
                    comm.all_reduce_sum(&mut sums.view_mut()).unwrap();
                    let mut words = stream.alloc_zeros::<u32>(2).unwrap();
                    let own = [rank as u32 + 7, 99];
                    stream.copy_to_device(&own, &mut words.view_mut()).unwrap();
                    comm.broadcast(&mut words.view_mut(), 1).unwrap();
                    comm.check().unwrap();
                    (
                        stream.to_host(&sums.view()).unwrap(),
                        stream.to_host(&words.view()).unwrap(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (sums, words) in results {
        assert_eq!(sums, vec![3.0, 10.0, 1.0]);
        assert_eq!(words, vec![8, 99], "rank 1's words everywhere");
    }
}

#[test]
fn abort_ends_an_all_reduce_whose_peer_never_comes() {
    let Some(streams) = two_ranks_or_skip() else {
        return;
    };
    let id = gpu_core::nccl_unique_id().unwrap();
    let (done, finished) = mpsc::channel();
    let (ready, comms) = mpsc::channel();
    // Rank 1 keeps its communicator (an abort handle does not) until the
    // test ends and drops `hold`.
    let (hold, held) = mpsc::channel::<()>();
    let mut held = Some(held);
    // Threads that are not joined on failure: a hang fails the test below
    // instead of stalling the suite.
    for (rank, stream) in streams.into_iter().enumerate() {
        let (ready, done) = (ready.clone(), done.clone());
        let held = if rank == 0 { None } else { held.take() };
        std::thread::spawn(move || {
            let comm = RankCollective::new(&stream, &id, rank, 2).unwrap();
            ready.send((rank, comm.abort_handle())).unwrap();
            if let Some(held) = held {
                let _ = held.recv();
            }
            if rank == 0 {
                // Rank 1 "died": this all-reduce waits for it forever
                // unless aborted.
                let mut buf = stream.alloc_zeros::<f32>(1 << 20).unwrap();
                let enqueued = comm.all_reduce_sum(&mut buf.view_mut()).is_ok();
                let _ = stream.synchronize();
                done.send((enqueued, comm.check().is_err())).unwrap();
            }
        });
    }
    let mut handles: Vec<_> = (0..2).map(|_| comms.recv().unwrap()).collect();
    handles.sort_by_key(|(rank, _)| *rank);
    std::thread::sleep(Duration::from_secs(1));
    for (_, handle) in &handles {
        handle.abort();
    }
    // The bound for a dead rank.
    let (enqueued, reported) = finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the aborted all-reduce returned within 60 s");
    assert!(enqueued, "the all-reduce was enqueued before the abort");
    assert!(reported, "an aborted communicator reports it");
    drop(hold);
}
