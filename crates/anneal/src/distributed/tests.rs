//! The CPU rank engine and the gather against a scripted communicator,
//! which hands a rank what the test says rank 0 sent: a broken rank 0's
//! anchors, too few anchors on rank 0 and more ranks than points are
//! refused as variants, never a panic.

use super::{gather_assignments, rows_of, Communicator, DistError, RankEngine};
use crate::{
    engine::Engine,
    error::AnnealError,
    vocab::{Params, Points},
};

/// One rank of `world` whose broadcasts bring `from_root` (on a rank
/// other than 0) and whose other collectives do nothing.
#[derive(Debug)]
struct Scripted {
    rank: usize,
    world: usize,
    from_root: Vec<u8>,
    broadcasts: usize,
}

impl Scripted {
    fn new(rank: usize, world: usize, from_root: Vec<u8>) -> Self {
        Self {
            rank,
            world,
            from_root,
            broadcasts: 0,
        }
    }
}

impl Communicator for Scripted {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }
    fn all_reduce_sum(&mut self, _: &mut [f64], _: &str) -> Result<(), DistError> {
        Ok(())
    }
    fn broadcast(&mut self, bytes: &mut Vec<u8>, _: &str) -> Result<(), DistError> {
        self.broadcasts += 1;
        if self.rank != 0 {
            bytes.clone_from(&self.from_root);
        }
        Ok(())
    }
    fn gather(&mut self, bytes: &[u8], _: &str) -> Result<Vec<Vec<u8>>, DistError> {
        Ok(vec![bytes.to_vec()])
    }
    fn send_part(&mut self, _: &[u8], _: &str) -> Result<(), DistError> {
        Ok(())
    }
    fn recv_parts(&mut self, _: &mut [&mut [u8]], _: &str) -> Result<(), DistError> {
        Ok(())
    }
}

const N: usize = 40;
const D: usize = 4;

/// Rank `rank` of 2's engine over a small problem, on `comm`.
fn engine(rank: usize, points: &[f32], comm: Scripted) -> RankEngine<Scripted> {
    let rows = rows_of(rank, 2, N).unwrap();
    let mine = Points::F32(&points[rows.start * D..rows.end * D]);
    let problem = crate::input::validate_rows(mine, rows, N, D, 3, &Params::default()).unwrap();
    RankEngine::new(&problem, comm)
}

#[test]
fn a_broken_rank_0s_anchors_are_a_protocol_error_naming_it() {
    let points = crate::synthetic::synthetic_points(N, D, 3, 0.1, 1);
    let count = |m: u64| m.to_le_bytes().to_vec();
    let anchors = |m: u64, values: usize| [count(m), vec![0; values * 4]].concat();
    let garbage = [
        ("nothing", Vec::new()),
        ("half a count", vec![1, 0, 0]),
        ("u64::MAX anchors and no values", count(u64::MAX)),
        ("2 anchors of 4 with 7 values", anchors(2, 7)),
        ("2 anchors of 4 with 9 values", anchors(2, 9)),
        ("0 anchors with 4 values", anchors(0, 4)),
    ];
    for (what, from_root) in garbage {
        let mut rank_1 = engine(1, &points, Scripted::new(1, 2, from_root));
        // Rank 1's own anchors and count are not read.
        match rank_1.set_anchors(&[], 5) {
            Err(AnnealError::Dist(DistError::Protocol { rank: 0, .. })) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    // The control: a well-formed message is taken.
    let mut rank_1 = engine(1, &points, Scripted::new(1, 2, anchors(2, 8)));
    rank_1.set_anchors(&[], 5).unwrap();
    assert_eq!(rank_1.anchors().unwrap(), vec![0.0; 8]);
}

#[test]
fn too_few_anchors_on_rank_0_are_refused_before_anything_is_sent() {
    let points = crate::synthetic::synthetic_points(N, D, 3, 0.1, 1);
    let mut rank_0 = engine(0, &points, Scripted::new(0, 2, Vec::new()));
    for (values, m) in [(5, 2), (0, 1), (8, usize::MAX)] {
        match rank_0.set_anchors(&vec![0.0; values], m) {
            Err(AnnealError::AnchorValues {
                values: v,
                m: k,
                d: D,
            }) if (v, k) == (values, m) => {}
            other => panic!("{values} values for {m} anchors: {other:?}"),
        }
    }
    assert_eq!(rank_0.comm().broadcasts, 0);
    rank_0.set_anchors(&[1.0; 8], 2).unwrap();
    assert_eq!(rank_0.comm().broadcasts, 1);
}

#[test]
fn a_gather_over_more_ranks_than_points_is_refused() {
    for rank in 0..3 {
        let mut comm = Scripted::new(rank, 3, Vec::new());
        let err = gather_assignments(&mut comm, 2, |_, _| Ok(())).unwrap_err();
        assert!(
            matches!(err, AnnealError::MoreRanksThanPoints { world: 3, n: 2 }),
            "rank {rank}: {err}"
        );
    }
}

/// A `RankEnv` made in code may hold any `Duration`: a deadline past what
/// `Instant` holds is none (it panicked adding), and never passes.
#[test]
fn a_timeout_past_instants_range_is_no_deadline_not_a_panic() {
    use super::rendezvous::{deadline, passed};
    use std::time::Duration;
    assert!(deadline(Duration::MAX).is_none());
    assert!(!passed(deadline(Duration::MAX)));
    assert!(passed(deadline(Duration::ZERO)));
}
