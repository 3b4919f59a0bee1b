//! What the rank suites share: a free loopback port, a rank's variables
//! for a rendezvous on it (one job's secret unless told), and a problem
//! with maintenance passes to run on ranks.
#![allow(dead_code)]

use std::time::Duration;

use kiln_anneal::distributed::{JobSecret, RankEnv};
use kiln_anneal::{Params, Points};

/// A port free on loopback when this returns.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Rank `rank` of `world` at `127.0.0.1:port`, waiting `timeout` seconds
/// for a peer, with the test job's secret.
pub(crate) fn env(rank: usize, world: usize, port: u16, timeout: u64) -> RankEnv {
    RankEnv {
        rank,
        world_size: world,
        local_rank: rank,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        timeout: Duration::from_secs(timeout),
        handshake_timeout: Duration::from_secs(5),
        secret: JobSecret::new("the test job"),
    }
}

/// [`env`] of the job whose secret is `secret`.
pub(crate) fn job_env(rank: usize, world: usize, port: u16, secret: &str) -> RankEnv {
    RankEnv {
        secret: JobSecret::new(secret),
        ..env(rank, world, port, 30)
    }
}

/// A shape with maintenance passes (merges and splits) in its 12 iterations.
pub(crate) fn problem_points() -> (Vec<f32>, usize, usize, usize, Params) {
    let (n, d, m) = (3000, 16, 24);
    let params = Params {
        max_iters: 12,
        tol: 0.0,
        seed: 5,
        ..Params::default()
    };
    (
        kiln_anneal::synthetic_points(n, d, 12, 0.25, 5),
        n,
        d,
        m,
        params,
    )
}

/// A problem over every row of [`problem_points`], leaked for a test's
/// lifetime.
pub(crate) fn whole_problem() -> kiln_anneal::Problem<'static> {
    let (points, n, d, m, params) = problem_points();
    let points: &'static [f32] = Vec::leak(points);
    kiln_anneal::validate(Points::F32(points), n, d, m, &params).unwrap()
}

/// Rank `rank` of `world`'s rows of [`problem_points`] as its problem
/// (`distributed::rows_of`), leaked for a test's lifetime.
pub(crate) fn rank_problem(rank: usize, world: usize) -> kiln_anneal::Problem<'static> {
    let (points, n, d, m, params) = problem_points();
    let points: &'static [f32] = Vec::leak(points);
    let rows = kiln_anneal::distributed::rows_of(rank, world, n).unwrap();
    let mine = Points::F32(&points[rows.start * d..rows.end * d]);
    kiln_anneal::validate_rows(mine, rows, n, d, m, &params).unwrap()
}

/// [`whole_problem`] run by one process on the CPU: what every rank
/// suite compares its ranks against.
pub(crate) fn one_process() -> kiln_anneal::Output {
    let whole = whole_problem();
    let mut engine = kiln_anneal::cpu::CpuEngine::new(&whole);
    kiln_anneal::run_with(&mut engine, &whole, &mut |_, _, _| {}).unwrap()
}
