//! `apps launch --nprocs N -- anneal ...` (or `--gpus N|all`, one process
//! per GPU): the launcher for users without one. Starts N copies of this
//! program on this host with the variables torchrun sets (`RANK`,
//! `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`: loopback and a
//! free port) and `KILN_JOB_SECRET` (a random secret of this job, which its
//! ranks prove to each other at the rendezvous), forwards their output line
//! by line behind `[rank N]`, and when one fails, gives the others a few
//! seconds to end on their own, then kills them and fails naming it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};

use gpu_core::GpuCount;
use kiln_anneal::distributed::{JobSecret, SECRET_ENV};

use crate::cli::LaunchArgs;
use crate::output::out;

/// Copies `from` to stdout or stderr, each line behind `[rank N] `.
fn forward(rank: usize, from: impl Read + Send + 'static, to_stderr: bool) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            // A closed stdout or stderr only loses the copy.
            let _ = if to_stderr {
                writeln!(std::io::stderr().lock(), "[rank {rank}] {line}")
            } else {
                writeln!(std::io::stdout().lock(), "[rank {rank}] {line}")
            };
        }
    })
}

/// A free TCP port on loopback (the OS's pick; free when this returns, and
/// rank 0 binds it at once).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .context("finding a free port on 127.0.0.1")?;
    Ok(listener.local_addr()?.port())
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => format!("ended ({status})"),
    }
}

/// Processes to start: `--nprocs`, or the GPUs `--gpus` asks for (checked
/// against the GPUs there are).
fn processes(args: &LaunchArgs) -> Result<usize> {
    let Some(count) = args.gpus else {
        return Ok(args.nprocs.unwrap_or(1) as usize);
    };
    let found = gpu_core::devices()
        .map_err(|e| anyhow::Error::new(e).context(format!("--gpus {count}")))?
        .len();
    match count {
        GpuCount::All if found > 0 => Ok(found),
        GpuCount::Exactly(n) if n <= found => Ok(n),
        _ => anyhow::bail!(
            "--gpus {count}: this host has {found} usable GPU{}; ask for fewer, or use --nprocs N for CPU ranks",
            if found == 1 { "" } else { "s" }
        ),
    }
}

/// The commands that run as one rank of several (they read the launcher's
/// variables); any other would run `nprocs` times over, or, for `launch`
/// itself, start `nprocs²` processes.
const RANK_COMMANDS: [&str; 1] = ["anneal"];

/// Refuses a command that is not a rank command.
fn check_rank_command(command: &[String]) -> Result<()> {
    let first = command.first().map_or("", String::as_str);
    if RANK_COMMANDS.contains(&first) {
        return Ok(());
    }
    anyhow::bail!(
        "launch -- {first}: `apps launch` runs only `apps anneal` as ranks; run `apps {first}` \
         without launch"
    )
}

pub(crate) fn run(args: &LaunchArgs) -> Result<()> {
    check_rank_command(&args.command)?;
    let nprocs = processes(args)?;
    let exe = std::env::current_exe().context("finding this program to start its ranks")?;
    let port = match args.port {
        Some(port) => port,
        None => free_port()?,
    };
    // Its ranks prove they hold it at the rendezvous: a rank of another job
    // on the same port is refused, and this job's never run with it.
    let secret = JobSecret::generate().map_err(|e| {
        anyhow::anyhow!(
            "making this job's secret: the operating system's random generator failed: {e}"
        )
    })?;
    out!(
        "launch: {nprocs} processes of `{}` on this host, rendezvous at 127.0.0.1:{port}",
        args.command.join(" ")
    );
    let mut children: Vec<Child> = Vec::with_capacity(nprocs);
    let mut threads = Vec::new();
    for rank in 0..nprocs {
        let spawned = Command::new(&exe)
            .args(&args.command)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", nprocs.to_string())
            .env("LOCAL_WORLD_SIZE", nprocs.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env(SECRET_ENV, &secret)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                stop(&mut children);
                return Err(anyhow::Error::new(e).context(format!("starting rank {rank}")));
            }
        };
        if let Some(stdout) = child.stdout.take() {
            threads.push(forward(rank, stdout, false));
        }
        if let Some(stderr) = child.stderr.take() {
            threads.push(forward(rank, stderr, true));
        }
        children.push(child);
    }
    let failure = wait_all(&mut children);
    for thread in threads {
        let _ = thread.join();
    }
    match failure? {
        None => {
            out!("launch: all {nprocs} processes succeeded");
            Ok(())
        }
        Some(failed) => anyhow::bail!("launch: {failed}; the other ranks were stopped"),
    }
}

/// Waits for every child; at the first failure, kills the rest. Returns
/// what failed (every rank found failed in that round, in rank order).
fn wait_all(children: &mut [Child]) -> Result<Option<String>> {
    let mut done = vec![false; children.len()];
    while done.iter().any(|d| !d) {
        let mut failed = Vec::new();
        for (rank, child) in children.iter_mut().enumerate() {
            if done[rank] {
                continue;
            }
            if let Some(status) = child
                .try_wait()
                .with_context(|| format!("waiting for rank {rank}"))?
            {
                done[rank] = true;
                if !status.success() {
                    failed.push(format!("rank {rank} {}", describe(status)));
                }
            }
        }
        if !failed.is_empty() {
            stop(children);
            return Ok(Some(failed.join(", ")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(None)
}

/// How long the other ranks get, after one fails, to end on their own: they
/// see its connection close and exit naming it, which says more than a kill.
const GRACE: Duration = Duration::from_secs(5);

/// Gives every child still running [`GRACE`] to exit, then kills and reaps
/// the rest.
fn stop(children: &mut [Child]) {
    let deadline = std::time::Instant::now() + GRACE;
    while std::time::Instant::now() < deadline
        && children
            .iter_mut()
            .any(|c| matches!(c.try_wait(), Ok(None)))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    for child in children.iter_mut() {
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}
