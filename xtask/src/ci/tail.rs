//! A cell's output, passed through live and its last lines kept: a CI log
//! that shows only its end (the summary table) still says why a cell in the
//! middle failed, because `ci-cpu` prints each failed cell's last lines
//! again just before the table.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many of a failed cell's last lines are printed again.
pub(crate) const KEPT_LINES: usize = 40;

/// How long the pipe may stay quiet after the command exits before its
/// reader is left to itself: a process the command left behind holding the
/// pipe open must not hold up the matrix.
const DRAIN: Duration = Duration::from_secs(5);

/// The last `cap` lines pushed, oldest first.
#[derive(Debug)]
pub(crate) struct Tail {
    lines: VecDeque<String>,
    cap: usize,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Self {
        Tail {
            lines: VecDeque::with_capacity(cap),
            cap,
        }
    }

    pub(crate) fn push(&mut self, line: String) {
        if self.cap == 0 {
            return;
        }
        if self.lines.len() == self.cap {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

/// The longest line kept, in bytes: the rest of a longer one is dropped
/// from the tail (not from the output).
const LINE_BYTES: usize = 1000;

/// Copies `from` to `to` as it comes (flushed per read, so the output stays
/// live, whatever its lines' length) and keeps its lines in `tail`, each cut
/// to [`LINE_BYTES`], before passing them on; counts the bytes read in
/// `moved`. Bytes that are not UTF-8 are kept lossily.
pub(crate) fn pass_through(
    mut from: impl Read,
    mut to: impl Write,
    tail: &Mutex<Tail>,
    moved: &AtomicU64,
) {
    let mut buf = [0u8; 8192];
    let mut line = Vec::new();
    let keep = |line: &mut Vec<u8>| {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\n', '\r']).to_string();
        if let Ok(mut tail) = tail.lock() {
            tail.push(text);
        }
        line.clear();
    };
    loop {
        let read = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        moved.fetch_add(read as u64, Ordering::Relaxed);
        for &byte in &buf[..read] {
            if byte == b'\n' {
                keep(&mut line);
            } else if line.len() < LINE_BYTES {
                line.push(byte);
            }
        }
        // A closed terminal must not stop the cell: its output is still
        // kept.
        let _ = to.write_all(&buf[..read]).and_then(|()| to.flush());
    }
    if !line.is_empty() {
        keep(&mut line);
    }
}

/// Runs `command` in `root` with `env`, its stdout and stderr passed through
/// to our stdout in the order it wrote them (one pipe for both); returns
/// its exit status and its last [`KEPT_LINES`] lines.
pub(crate) fn run(
    command: &[String],
    root: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> std::io::Result<(ExitStatus, Vec<String>)> {
    let (reader, writer) = std::io::pipe()?;
    let mut child = {
        // Dropped once the child has its ends: the reader then sees the
        // pipe's end when the child (and what it left running) closes them.
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..])
            .current_dir(root)
            .envs(env)
            .stdin(Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer);
        cmd.spawn()?
    };
    let tail = Arc::new(Mutex::new(Tail::new(KEPT_LINES)));
    let moved = Arc::new(AtomicU64::new(0));
    let (done, finished) = mpsc::channel();
    let passer = {
        let (tail, moved) = (Arc::clone(&tail), Arc::clone(&moved));
        std::thread::spawn(move || {
            pass_through(reader, std::io::stdout(), &tail, &moved);
            let _ = done.send(());
        })
    };
    let status = child.wait()?;
    // A process the command left holding the pipe may keep it open: the
    // passer is waited for while output still comes, then left to it once
    // the pipe has been quiet for `DRAIN`.
    let mut seen = moved.load(Ordering::Relaxed);
    loop {
        match finished.recv_timeout(DRAIN) {
            Ok(()) => {
                let _ = passer.join();
                break;
            }
            Err(_) => {
                let now = moved.load(Ordering::Relaxed);
                if now == seen {
                    break;
                }
                seen = now;
            }
        }
    }
    let lines = tail.lock().map(|t| t.lines()).unwrap_or_default();
    Ok((status, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_lines_in_order() {
        let mut tail = Tail::new(3);
        for i in 0..7 {
            tail.push(i.to_string());
        }
        assert_eq!(tail.lines(), ["4", "5", "6"]);
        let mut none = Tail::new(0);
        none.push("x".into());
        assert!(none.lines().is_empty());
    }

    #[test]
    fn pass_through_copies_every_byte_and_keeps_lines() {
        let input: &[u8] = b"one\r\ntwo\n\xffbad\nlast without newline";
        let tail = Mutex::new(Tail::new(2));
        let mut copy = Vec::new();
        pass_through(input, &mut copy, &tail, &AtomicU64::new(0));
        assert_eq!(copy, input);
        let lines = tail.lock().unwrap().lines();
        assert_eq!(lines, ["\u{fffd}bad", "last without newline"]);
    }

    #[test]
    fn a_line_without_end_is_passed_on_whole_and_kept_cut() {
        let input = vec![b'x'; 100_000];
        let tail = Mutex::new(Tail::new(4));
        let mut copy = Vec::new();
        pass_through(input.as_slice(), &mut copy, &tail, &AtomicU64::new(0));
        assert_eq!(copy, input);
        assert_eq!(tail.lock().unwrap().lines(), ["x".repeat(LINE_BYTES)]);
    }

    #[test]
    fn a_failing_command_returns_its_status_and_last_lines() {
        let command = [
            "sh".to_string(),
            "-c".into(),
            "i=0; while [ $i -lt 50 ]; do echo out $i; i=$((i+1)); done; echo why >&2; exit 3"
                .into(),
        ];
        let (status, lines) = run(&command, Path::new("."), &Default::default()).unwrap();
        assert_eq!(status.code(), Some(3));
        assert_eq!(lines.len(), KEPT_LINES);
        // stdout and stderr share one pipe: in the order written.
        assert_eq!(lines.last().map(String::as_str), Some("why"));
        assert!(lines.contains(&"out 49".to_string()), "{lines:?}");
        assert!(!lines.contains(&"out 0".to_string()), "{lines:?}");
    }

    #[test]
    fn a_process_left_holding_the_pipe_does_not_hold_up_the_cell() {
        // The background sleep keeps stdout open after `sh` exits; the run
        // returns while it still lives.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let command = [
            "sh".to_string(),
            "-c".into(),
            format!(
                "sleep 600 & echo $! > '{}'; echo started; exit 1",
                pid_file.display()
            ),
        ];
        let (status, lines) = run(&command, Path::new("."), &Default::default()).unwrap();
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_string();
        let alive = Path::new("/proc").join(&pid).exists();
        let _ = Command::new("kill").arg(&pid).status();
        assert_eq!(status.code(), Some(1));
        assert_eq!(lines, ["started"]);
        assert!(alive, "the sleeper {pid} had ended: the run waited for it");
    }
}
