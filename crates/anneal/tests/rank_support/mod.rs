//! What the rank suites share: a free loopback port, and a rank's
//! variables for a rendezvous on it (one job's secret unless told).
#![allow(dead_code)]

use std::time::Duration;

use kiln_anneal::distributed::{JobSecret, RankEnv};

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
