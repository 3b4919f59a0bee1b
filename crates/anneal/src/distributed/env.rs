//! The rank of this process, from the variables launchers set (torchrun's
//! names: `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
//! `MASTER_PORT`; kiln's `KILN_JOB_SECRET`), and the rows each rank holds.

use std::time::Duration;

use super::secret::JobSecret;
use super::DistError;

/// The port of kiln's rendezvous on rank 0's host, when it must differ from
/// `MASTER_PORT` (under torchrun, whose own store listens there).
pub const PORT_ENV: &str = "KILN_MASTER_PORT";

/// Seconds a rank waits for a peer (to connect, or to send its part of a
/// step) before it fails naming that peer; default 600.
pub const TIMEOUT_ENV: &str = "KILN_RANK_TIMEOUT";

/// Seconds one connection to the rendezvous may take to say who it is and
/// prove it holds the job's secret; default 10.
pub const HANDSHAKE_TIMEOUT_ENV: &str = "KILN_HANDSHAKE_TIMEOUT";

/// Where this process stands in a multi-process run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankEnv {
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// Processes in the run, over every host.
    pub world_size: usize,
    /// This process's rank on its host (its GPU ordinal); `RANK` when unset.
    pub local_rank: usize,
    /// Rank 0's host: where the rendezvous listens.
    pub master_addr: String,
    /// The rendezvous's port on rank 0's host (`KILN_MASTER_PORT`, else
    /// `MASTER_PORT`).
    pub master_port: u16,
    /// How long a rank waits for a peer ([`TIMEOUT_ENV`]).
    pub timeout: Duration,
    /// How long one connection to the rendezvous may take to prove it is a
    /// rank of this job ([`HANDSHAKE_TIMEOUT_ENV`]): a silent one is closed
    /// after this, while rank 0 goes on waiting for the others.
    pub handshake_timeout: Duration,
    /// The job's secret ([`super::SECRET_ENV`], else the launcher's job id).
    pub secret: JobSecret,
}

impl RankEnv {
    /// The run this process belongs to, from the environment; `None` when
    /// `WORLD_SIZE` is unset (a plain one-process run).
    pub fn from_env() -> Result<Option<Self>, DistError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// [`RankEnv::from_env`] over any source of variables (`lookup(name)`).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, DistError> {
        let Some(world) = lookup("WORLD_SIZE") else {
            return Ok(None);
        };
        let number = |var: &'static str, value: &str| {
            value
                .trim()
                .parse::<usize>()
                .map_err(|_| DistError::BadVar {
                    var,
                    value: value.to_string(),
                    why: "not a whole number".into(),
                })
        };
        let required = |var: &'static str| lookup(var).ok_or(DistError::MissingVar { var });
        let world_size = number("WORLD_SIZE", &world)?;
        if world_size == 0 {
            return Err(DistError::BadVar {
                var: "WORLD_SIZE",
                value: world,
                why: "a run has at least one process".into(),
            });
        }
        let rank_text = required("RANK")?;
        let rank = number("RANK", &rank_text)?;
        if rank >= world_size {
            return Err(DistError::BadVar {
                var: "RANK",
                value: rank_text,
                why: format!("ranks are 0..{world_size} (WORLD_SIZE={world_size})"),
            });
        }
        let local_rank = match lookup("LOCAL_RANK") {
            Some(v) => number("LOCAL_RANK", &v)?,
            None => rank,
        };
        if local_rank > rank {
            return Err(DistError::BadVar {
                var: "LOCAL_RANK",
                value: local_rank.to_string(),
                why: format!("above RANK={rank}: a host's ranks are a part of the run's"),
            });
        }
        let master_addr = required("MASTER_ADDR")?;
        if master_addr.trim().is_empty() {
            return Err(DistError::BadVar {
                var: "MASTER_ADDR",
                value: master_addr,
                why: "empty; give rank 0's host name or address".into(),
            });
        }
        // torchrun's own store listens on MASTER_PORT; PORT_ENV moves kiln's
        // rendezvous off it.
        let (port_var, port_text) = match lookup(PORT_ENV) {
            Some(v) => (PORT_ENV, v),
            None => ("MASTER_PORT", required("MASTER_PORT")?),
        };
        let master_port = match port_text.trim().parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(DistError::BadVar {
                    var: port_var,
                    value: port_text,
                    why: "not a port number (1 to 65535)".into(),
                })
            }
        };
        let timeout = seconds(&lookup, TIMEOUT_ENV, 600)?;
        let handshake_timeout = seconds(&lookup, HANDSHAKE_TIMEOUT_ENV, 10)?;
        Ok(Some(Self {
            rank,
            world_size,
            local_rank,
            master_addr: master_addr.trim().to_string(),
            master_port,
            timeout,
            handshake_timeout,
            secret: JobSecret::from_lookup(&lookup)?,
        }))
    }
}

/// `var`'s whole seconds above 0, `default` when unset.
fn seconds(
    lookup: impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
) -> Result<Duration, DistError> {
    let Some(value) = lookup(var) else {
        return Ok(Duration::from_secs(default));
    };
    match value.trim().parse::<u64>() {
        Ok(s) if s > 0 => Ok(Duration::from_secs(s)),
        _ => Err(DistError::BadVar {
            var,
            value,
            why: "not a whole number of seconds above 0".into(),
        }),
    }
}

/// The rows of `n` rank `rank` of `world` holds: contiguous, in rank order,
/// balanced (sizes differ by at most one), the same split as the
/// one-process multi-GPU engine's shards. `None` when some rank would get
/// no row (`world > n`): such a run is refused rather than run with idle
/// ranks.
pub fn rows_of(rank: usize, world: usize, n: usize) -> Option<std::ops::Range<usize>> {
    if world == 0 || world > n || rank >= world {
        return None;
    }
    Some(rank * n / world..(rank + 1) * n / world)
}
