//! NCCL across processes (`RankCollective`), with one thread per rank
//! standing in for the processes: the unique id shared, the sum and the
//! broadcast checked against the host, sends and receives alone and in a
//! group with reductions of two types, and `AbortHandle::abort` ending an
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

/// `body(rank, stream, comm)` on one thread per rank of two, each with its
/// communicator; the results in rank order.
fn on_two_ranks<R: Send>(
    streams: &[Stream],
    body: impl Fn(usize, &Stream, RankCollective) -> R + Sync,
) -> Vec<R> {
    let id = gpu_core::nccl_unique_id().unwrap();
    let body = &body;
    std::thread::scope(|scope| {
        let handles: Vec<_> = streams
            .iter()
            .enumerate()
            .map(|(rank, stream)| {
                scope.spawn(move || {
                    body(
                        rank,
                        stream,
                        RankCollective::new(stream, &id, rank, 2).unwrap(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
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
    let results = on_two_ranks(&streams, |rank, stream, comm| {
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
    });
    for (sums, words) in results {
        assert_eq!(sums, vec![3.0, 10.0, 1.0]);
        assert_eq!(words, vec![8, 99], "rank 1's words everywhere");
    }
}

#[test]
fn two_ranks_send_receive_and_group_reductions_of_two_types() {
    let Some(streams) = two_ranks_or_skip() else {
        return;
    };
    let results = on_two_ranks(&streams, |rank, stream, comm| {
        let peer = 1 - rank;
        let upload = |values: &[u32]| {
            let mut buf = stream.alloc_zeros::<u32>(values.len()).unwrap();
            stream.copy_to_device(values, &mut buf.view_mut()).unwrap();
            buf
        };
        // One direction, one call each: rank 1 to rank 0.
        let one_way = if rank == 1 {
            let own = upload(&[11, 12, 13]);
            comm.send(&own.view(), 0).unwrap();
            None
        } else {
            let mut into = stream.alloc_zeros::<u32>(3).unwrap();
            comm.recv(&mut into.view_mut(), 1).unwrap();
            Some(stream.to_host(&into.view()).unwrap())
        };
        // Both directions at once, which only a group allows,
        // with two reductions of different types beside them.
        let own = upload(&[100 * rank as u32, 7]);
        let mut theirs = stream.alloc_zeros::<u32>(2).unwrap();
        let mut sums = stream.alloc_zeros::<f64>(2).unwrap();
        let f = [0.25 + rank as f64, -2.0];
        stream.copy_to_device(&f, &mut sums.view_mut()).unwrap();
        let mut counts = upload(&[rank as u32 + 1, 40]);
        let (own_view, mut theirs_view) = (own.view(), theirs.view_mut());
        let (mut sums_view, mut counts_view) = (sums.view_mut(), counts.view_mut());
        comm.group()
            .send(&own_view, peer)
            .unwrap()
            .recv(&mut theirs_view, peer)
            .unwrap()
            .all_reduce_sum(&mut sums_view)
            .unwrap()
            .all_reduce_sum(&mut counts_view)
            .unwrap()
            .enqueue()
            .unwrap();
        // A peer outside the ranks is refused before NCCL.
        let refused = comm.send(&own.view(), 2).unwrap_err();
        assert!(matches!(refused, Error::InvalidCollective(_)), "{refused}");
        comm.check().unwrap();
        (
            one_way,
            stream.to_host(&theirs.view()).unwrap(),
            stream.to_host(&sums.view()).unwrap(),
            stream.to_host(&counts.view()).unwrap(),
        )
    });
    assert_eq!(results[0].0, Some(vec![11, 12, 13]), "rank 1's send");
    assert_eq!(results[1].0, None);
    assert_eq!(results[0].1, vec![100, 7], "rank 1's buffer on rank 0");
    assert_eq!(results[1].1, vec![0, 7], "rank 0's buffer on rank 1");
    for (_, _, sums, counts) in &results {
        assert_eq!(sums, &vec![1.5, -4.0]);
        assert_eq!(counts, &vec![3, 80]);
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
