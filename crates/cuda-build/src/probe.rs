//! Running a program to learn something (`nvcc --version`, a compiler's
//! `-dumpmachine`): never for longer than `KILN_PROBE_TIMEOUT` seconds, so
//! a toolkit whose nvcc hangs fails discovery in one line instead of
//! hanging every build. Past the limit the program and everything it
//! started (its process group) are killed.

use std::io::{self, Read};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::error::Error;

/// How long a probe may run, in seconds.
pub const PROBE_TIMEOUT_VAR: &str = "KILN_PROBE_TIMEOUT";
/// Without [`PROBE_TIMEOUT_VAR`]: long enough for a cold toolkit on a
/// network filesystem.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest limit accepted: a day (a larger one could overflow the
/// deadline).
const MAX_PROBE_SECONDS: u64 = 86_400;

/// The probe limit `value` of [`PROBE_TIMEOUT_VAR`] sets (whole seconds
/// from 1 to a day), or the default where it is unset or empty; one line
/// naming the variable otherwise.
pub(crate) fn limit_from(value: Option<std::ffi::OsString>) -> Result<Duration, Error> {
    let Some(value) = value else {
        return Ok(DEFAULT_PROBE_TIMEOUT);
    };
    let text = value.to_string_lossy();
    if text.trim().is_empty() {
        return Ok(DEFAULT_PROBE_TIMEOUT);
    }
    match text.trim().parse::<u64>() {
        Ok(secs) if (1..=MAX_PROBE_SECONDS).contains(&secs) => Ok(Duration::from_secs(secs)),
        _ => Err(Error::Setting {
            var: PROBE_TIMEOUT_VAR.to_string(),
            value: text.into_owned(),
            problem: format!("is not a whole number of seconds from 1 to {MAX_PROBE_SECONDS}"),
            fix: format!(
                "write one such as 120, or unset {PROBE_TIMEOUT_VAR} for {}s",
                DEFAULT_PROBE_TIMEOUT.as_secs()
            ),
        }),
    }
}

/// The limit of the process environment, the default where it is not
/// valid (the build refuses an invalid one before it probes).
pub(crate) fn process_limit() -> Duration {
    limit_from(std::env::var_os(PROBE_TIMEOUT_VAR)).unwrap_or(DEFAULT_PROBE_TIMEOUT)
}

/// Runs `command` (no stdin, stdout and stderr captured) for at most
/// `limit`. Past it, an error of kind [`io::ErrorKind::TimedOut`] saying
/// so and naming [`PROBE_TIMEOUT_VAR`]; the program and what it started
/// are killed either way once it is done with, so none is left running.
pub fn output_within(command: &mut Command, limit: Duration) -> io::Result<Output> {
    use wait_timeout::ChildExt as _;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(command, 0);
    let mut child = command.spawn()?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = child.wait_timeout(limit);
    // What it left behind (a hung grandchild holding the pipes) goes too.
    kill_group(&mut child);
    let status = match status? {
        Some(status) => status,
        None => {
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "did not finish within {}s (raise {PROBE_TIMEOUT_VAR} if it is only slow)",
                    limit.as_secs()
                ),
            ));
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Reads a pipe to its end on a thread of its own, so that a program
/// filling one pipe never blocks on it while the other is waited on.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Kills the child's process group (it leads one of its own), or the child
/// where there are no groups.
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_child(child),
            rustix::process::Signal::KILL,
        );
    }
    #[cfg(not(unix))]
    {
        let _ = child.kill();
    }
}
