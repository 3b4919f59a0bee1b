//! The rank of this process, from the variables launchers set: torchrun's
//! (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`; any
//! launcher that sets the same) or Slurm's (`SLURM_PROCID`, `SLURM_STEP_NUM_TASKS`
//! or `SLURM_NTASKS`, `SLURM_LOCALID`, the first host of
//! `SLURM_STEP_NODELIST` or `SLURM_JOB_NODELIST`), kiln's
//! `KILN_JOB_SECRET`, and the rows each rank holds.
//!
//! Which family wins: a launcher started under the other (torchrun or
//! another torchrun-style launcher inside an `srun` task: they set
//! `LOCAL_WORLD_SIZE`, torchrun
//! `TORCHELASTIC_RUN_ID`) describes the process, and Slurm's variables
//! describe only the launcher's task. Otherwise, where both families are
//! set, they are two descriptions of one process: each variable may come
//! from either, and where both give one they must agree. A family that is
//! set in part, or a rank outside its world, is refused naming the
//! variables.

use std::time::Duration;

use super::nodelist::first_host;
use super::secret::JobSecret;
use super::DistError;

/// The port of kiln's rendezvous on rank 0's host, when it must differ from
/// `MASTER_PORT` (under torchrun, whose own store listens there).
pub const PORT_ENV: &str = "KILN_MASTER_PORT";

/// Seconds a rank waits for a peer (to connect, or to send its part of a
/// step) before it fails naming that peer; default 600.
pub const TIMEOUT_ENV: &str = "KILN_RANK_TIMEOUT";

/// The most seconds [`TIMEOUT_ENV`] and [`HANDSHAKE_TIMEOUT_ENV`] take: a
/// year, as good as no limit, and far enough below where a deadline
/// (`Instant::now()` plus the timeout) overflows.
pub const MAX_TIMEOUT_SECS: u64 = 366 * 24 * 60 * 60;

/// Seconds one connection to the rendezvous may take to say who it is and
/// prove it holds the job's secret; default 10.
pub const HANDSHAKE_TIMEOUT_ENV: &str = "KILN_HANDSHAKE_TIMEOUT";

/// The first of the ports a Slurm job's rendezvous takes when neither
/// [`PORT_ENV`] nor `MASTER_PORT` is set: one of
/// `SLURM_PORT_BASE..SLURM_PORT_BASE + SLURM_PORTS`, picked by the job and
/// step ids, the same on every rank and (mostly) different between jobs.
/// Below Linux's ephemeral ports (32768 up), which the OS hands out.
pub const SLURM_PORT_BASE: u16 = 12000;

/// How many ports a Slurm job's rendezvous picks among ([`SLURM_PORT_BASE`]).
pub const SLURM_PORTS: u16 = 20000;

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
    /// no launcher describes one (a plain one-process run, or a Slurm
    /// step of one task).
    pub fn from_env() -> Result<Option<Self>, DistError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// [`RankEnv::from_env`] over any source of variables (`lookup(name)`).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, DistError> {
        let torchrun = ["WORLD_SIZE", "RANK", "LOCAL_RANK"]
            .into_iter()
            .find(|v| lookup(v).is_some());
        let slurm = lookup("SLURM_PROCID").is_some();
        // torchrun and `apps launch` set LOCAL_WORLD_SIZE: a launcher of
        // its own, inside a Slurm task when Slurm's variables are there too.
        let nested =
            lookup("LOCAL_WORLD_SIZE").is_some() || lookup("TORCHELASTIC_RUN_ID").is_some();
        let place = match (torchrun, slurm) {
            (None, false) => return Ok(None),
            (Some(_), false) => torchrun_place(&lookup)?,
            (Some(_), true) if nested => torchrun_place(&lookup)?,
            (None, true) => match slurm_place(&lookup)? {
                // One task: a plain run, as outside Slurm.
                p if p.world_size == 1 => return Ok(None),
                p => p,
            },
            (Some(_), true) => both(&lookup)?,
        };
        // torchrun's own store listens on MASTER_PORT; PORT_ENV moves kiln's
        // rendezvous off it.
        let (port_var, port_text) = match (lookup(PORT_ENV), lookup("MASTER_PORT")) {
            (Some(v), _) => (PORT_ENV, v),
            (None, Some(v)) => ("MASTER_PORT", v),
            (None, None) if place.slurm => {
                return Ok(Some(place.into_env(slurm_port(&lookup)?, &lookup)?))
            }
            (None, None) => return Err(DistError::MissingVar { var: "MASTER_PORT" }),
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
        Ok(Some(place.into_env(master_port, &lookup)?))
    }
}

/// Where this process stands, before the port and the timeouts are read.
struct Place {
    rank: usize,
    world_size: usize,
    local_rank: usize,
    master_addr: String,
    /// Slurm's variables placed it (its port may come from the job id).
    slurm: bool,
}

impl Place {
    fn into_env(
        self,
        master_port: u16,
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<RankEnv, DistError> {
        Ok(RankEnv {
            rank: self.rank,
            world_size: self.world_size,
            local_rank: self.local_rank,
            master_addr: self.master_addr,
            master_port,
            timeout: seconds(lookup, TIMEOUT_ENV, 600)?,
            handshake_timeout: seconds(lookup, HANDSHAKE_TIMEOUT_ENV, 10)?,
            secret: JobSecret::from_lookup(lookup)?,
        })
    }
}

fn number(var: &'static str, value: &str) -> Result<usize, DistError> {
    value
        .trim()
        .parse::<usize>()
        .map_err(|_| DistError::BadVar {
            var,
            value: value.to_string(),
            why: "not a whole number".into(),
        })
}

/// `var`'s number, if set.
fn number_of(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<Option<usize>, DistError> {
    lookup(var).map(|v| number(var, &v)).transpose()
}

const TORCHRUN_FIX: &str = "a launcher sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT \
     together (torchrun and launchers like it); set the rest, or unset it for a one-process run";

const SLURM_FIX: &str = "srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID together; \
     start the processes with srun, or unset SLURM_PROCID for a one-process run";

/// The world, the rank and the local rank checked against each other.
fn checked(
    world: (&'static str, usize),
    rank: (&'static str, usize),
    local: (&'static str, usize),
) -> Result<(), DistError> {
    if world.1 == 0 {
        return Err(DistError::BadVar {
            var: world.0,
            value: "0".into(),
            why: "a run has at least one process".into(),
        });
    }
    if rank.1 >= world.1 {
        return Err(DistError::BadVar {
            var: rank.0,
            value: rank.1.to_string(),
            why: format!("ranks are 0..{} ({}={})", world.1, world.0, world.1),
        });
    }
    if local.1 > rank.1 {
        return Err(DistError::BadVar {
            var: local.0,
            value: local.1.to_string(),
            why: format!(
                "above {}={}: a host's ranks are a part of the run's",
                rank.0, rank.1
            ),
        });
    }
    Ok(())
}

fn master_addr(value: String) -> Result<String, DistError> {
    if value.trim().is_empty() {
        return Err(DistError::BadVar {
            var: "MASTER_ADDR",
            value,
            why: "empty; give rank 0's host name or address".into(),
        });
    }
    Ok(value.trim().to_string())
}

/// torchrun's variables (any launcher that sets them).
fn torchrun_place(lookup: &impl Fn(&str) -> Option<String>) -> Result<Place, DistError> {
    let incomplete = |set, missing| DistError::Incomplete {
        set,
        missing,
        fix: TORCHRUN_FIX,
    };
    let world_size = match (number_of(lookup, "WORLD_SIZE")?, lookup("RANK")) {
        (Some(w), _) => w,
        (None, Some(_)) => return Err(incomplete("RANK", "WORLD_SIZE")),
        (None, None) => return Err(incomplete("LOCAL_RANK", "WORLD_SIZE")),
    };
    let rank = number_of(lookup, "RANK")?.ok_or_else(|| incomplete("WORLD_SIZE", "RANK"))?;
    let local_rank = number_of(lookup, "LOCAL_RANK")?.unwrap_or(rank);
    checked(
        ("WORLD_SIZE", world_size),
        ("RANK", rank),
        ("LOCAL_RANK", local_rank),
    )?;
    let addr = lookup("MASTER_ADDR").ok_or(DistError::MissingVar { var: "MASTER_ADDR" })?;
    Ok(Place {
        rank,
        world_size,
        local_rank,
        master_addr: master_addr(addr)?,
        slurm: false,
    })
}

/// The variable Slurm's task count is in: the step's inside a step.
fn slurm_world_var(lookup: &impl Fn(&str) -> Option<String>) -> Option<&'static str> {
    ["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"]
        .into_iter()
        .find(|v| lookup(v).is_some())
}

/// Slurm's variables (an `srun` task).
fn slurm_place(lookup: &impl Fn(&str) -> Option<String>) -> Result<Place, DistError> {
    let incomplete = |missing| DistError::Incomplete {
        set: "SLURM_PROCID",
        missing,
        fix: SLURM_FIX,
    };
    let world_var = slurm_world_var(lookup).ok_or_else(|| incomplete("SLURM_NTASKS"))?;
    let world_size = number_of(lookup, world_var)?.unwrap_or_default();
    let rank = number_of(lookup, "SLURM_PROCID")?.unwrap_or_default();
    let local_rank =
        number_of(lookup, "SLURM_LOCALID")?.ok_or_else(|| incomplete("SLURM_LOCALID"))?;
    checked(
        (world_var, world_size),
        ("SLURM_PROCID", rank),
        ("SLURM_LOCALID", local_rank),
    )?;
    // Rank 0 of a step runs on its first host.
    let addr = match lookup("MASTER_ADDR") {
        Some(addr) => master_addr(addr)?,
        None => {
            let var = ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"]
                .into_iter()
                .find(|v| lookup(v).is_some())
                .ok_or_else(|| incomplete("SLURM_JOB_NODELIST (or MASTER_ADDR)"))?;
            let list = lookup(var).unwrap_or_default();
            first_host(&list).map_err(|why| DistError::BadVar {
                var,
                value: shortened(&list),
                why: format!("not a Slurm nodelist ({why}); set MASTER_ADDR to rank 0's host"),
            })?
        }
    };
    Ok(Place {
        rank,
        world_size,
        local_rank,
        master_addr: addr,
        slurm: true,
    })
}

/// Both families set on one process with no launcher inside the other:
/// Slurm's complete, torchrun's variables agreeing with it.
fn both(lookup: &impl Fn(&str) -> Option<String>) -> Result<Place, DistError> {
    let place = slurm_place(lookup)?;
    let world_var = slurm_world_var(lookup).unwrap_or("SLURM_NTASKS");
    for (a, b, theirs, what) in [
        (
            "WORLD_SIZE",
            world_var,
            place.world_size,
            "number of processes",
        ),
        ("RANK", "SLURM_PROCID", place.rank, "rank"),
        (
            "LOCAL_RANK",
            "SLURM_LOCALID",
            place.local_rank,
            "rank on its host",
        ),
    ] {
        if let Some(ours) = number_of(lookup, a)? {
            if ours != theirs {
                return Err(DistError::Conflict {
                    a,
                    a_value: ours.to_string(),
                    b,
                    b_value: theirs.to_string(),
                    what,
                });
            }
        }
    }
    Ok(place)
}

/// A Slurm job's rendezvous port: [`SLURM_PORT_BASE`] plus a hash of the
/// job and step ids, so that two jobs (or two steps) sharing a host seldom
/// share a port (and the job's secret refuses the other's ranks when they
/// do).
fn slurm_port(lookup: &impl Fn(&str) -> Option<String>) -> Result<u16, DistError> {
    let job = lookup("SLURM_JOB_ID").ok_or(DistError::Incomplete {
        set: "SLURM_PROCID",
        missing: "SLURM_JOB_ID (or MASTER_PORT)",
        fix: "srun sets SLURM_JOB_ID; set MASTER_PORT to a free port, the same on every rank",
    })?;
    let step = lookup("SLURM_STEP_ID").unwrap_or_default();
    let key = format!("{}.{}", job.trim(), step.trim());
    let hash = xxhash_rust::xxh3::xxh3_64(key.as_bytes());
    Ok(SLURM_PORT_BASE + (hash % u64::from(SLURM_PORTS)) as u16)
}

/// `value` cut to a length an error line can show.
fn shortened(value: &str) -> String {
    const SHOWN: usize = 64;
    match value.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}...", &value[..at]),
        None => value.to_string(),
    }
}

/// The GPU a rank of local rank `local_rank` runs on, given
/// `CUDA_VISIBLE_DEVICES` (`visible`): GPU `local_rank` of those it sees,
/// but GPU 0 when the launcher left it exactly one (`srun
/// --gpus-per-task=1`, or a site's per-task binding).
pub fn gpu_ordinal(local_rank: usize, visible: Option<&str>) -> usize {
    match visible.map(|v| v.split(',').filter(|d| !d.trim().is_empty()).count()) {
        Some(1) => 0,
        _ => local_rank,
    }
}

/// `var`'s whole seconds, 1 to [`MAX_TIMEOUT_SECS`], `default` when unset.
fn seconds(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
) -> Result<Duration, DistError> {
    let Some(value) = lookup(var) else {
        return Ok(Duration::from_secs(default));
    };
    match value.trim().parse::<u64>() {
        Ok(s) if (1..=MAX_TIMEOUT_SECS).contains(&s) => Ok(Duration::from_secs(s)),
        _ => Err(DistError::BadVar {
            var,
            value,
            why: format!("not a whole number of seconds from 1 to {MAX_TIMEOUT_SECS} (a year)"),
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
    // In u128: `rank × n` passes usize for a large enough `n`.
    let at = |r: usize| (r as u128 * n as u128 / world as u128) as usize;
    Some(at(rank)..at(rank + 1))
}
