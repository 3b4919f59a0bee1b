//! Output: lines to stdout whose write errors are returned (a closed pipe
//! ends the program quietly), and result files checked for writability
//! before a long run and written atomically (temp file, then rename).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// `println!` that returns write errors instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*)
            .map_err(|e| anyhow::Error::new(e).context("writing to stdout"))?
    };
}
pub(crate) use out;

/// Whether `e` comes from a write to a closed pipe.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// A result file, opened (as a temp file beside it) before the run.
#[derive(Debug)]
pub(crate) struct ResultFile {
    flag: &'static str,
    path: PathBuf,
    temp: tempfile::NamedTempFile,
}

impl ResultFile {
    /// Checks that `path` (given as `flag`) can be written: not a
    /// directory, in a directory that exists and takes a new file.
    pub(crate) fn prepare(flag: &'static str, path: &Path) -> Result<Self> {
        let shown = path.display();
        if path.is_dir() {
            anyhow::bail!("{flag} {shown}: is a directory; give a file path");
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            anyhow::bail!(
                "{flag} {shown}: directory {} does not exist; create it first",
                dir.display()
            );
        }
        let temp = tempfile::Builder::new()
            .prefix(".apps-")
            .suffix(".tmp")
            .tempfile_in(&dir)
            .with_context(|| format!("{flag} {shown}: cannot write in {}", dir.display()))?;
        Ok(Self {
            flag,
            path: path.to_path_buf(),
            temp,
        })
    }

    /// Writes `text` and moves it into place in one rename.
    pub(crate) fn commit(mut self, text: &str) -> Result<()> {
        let shown = self.path.display().to_string();
        let flag = self.flag;
        self.temp
            .write_all(text.as_bytes())
            .and_then(|()| self.temp.as_file().sync_all())
            .with_context(|| format!("{flag} {shown}: writing"))?;
        self.temp
            .persist(&self.path)
            .map_err(|e| e.error)
            .with_context(|| format!("{flag} {shown}: renaming the finished file into place"))?;
        Ok(())
    }
}
