//! Reading TOML config files into typed structs, with errors that fit on
//! one line (`ci/matrix.toml:3:9: unknown field ...`).

use std::path::Path;

use cuda_build::regular::Links;
use serde::de::DeserializeOwned;

use crate::error::usage_error;

/// The largest config file read (16 MiB).
pub const CONFIG_BOUND: u64 = 16 << 20;

/// The text of the file kiln reads at `path`: a regular file, or a link to
/// one, of at most [`CONFIG_BOUND`] bytes (cuda-build's reader of untrusted
/// files: a FIFO is refused, never waited on); nothing there is an error.
pub fn read_file(path: &Path) -> anyhow::Result<String> {
    use anyhow::Context as _;
    cuda_build::regular::read_text(path, CONFIG_BOUND, Links::Follow)?
        .with_context(|| format!("{} is not there", path.display()))
}

/// Reads and parses `path` (`shown` in messages); a missing or malformed
/// file is a usage error.
pub fn load<T: DeserializeOwned>(path: &Path, shown: &str) -> anyhow::Result<T> {
    // A regular file (or a link to one) only: a FIFO is refused, never
    // waited on.
    let text = match cuda_build::regular::read_text(path, CONFIG_BOUND, Links::Follow) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(usage_error!(
                "cannot read {shown}: it is not there; restore it from git"
            ))
        }
        Err(cuda_build::Error::Io { source, .. }) => {
            return Err(usage_error!(
                "cannot read {shown}: {source}; restore it from git"
            ))
        }
        Err(e) => return Err(usage_error!("{e}")),
    };
    parse(shown, &text).map_err(|msg| usage_error!("{msg}"))
}

/// Parses `text`; the error is one line: `name:line:col: message`.
pub fn parse<T: DeserializeOwned>(name: &str, text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e: toml::de::Error| {
        let at = e
            .span()
            .map(|span| {
                let (line, col) = line_col(text, span.start);
                format!(":{line}:{col}")
            })
            .unwrap_or_default();
        let message = e.message().trim().replace('\n', "; ");
        format!("{name}{at}: {message}")
    })
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct T {
        a: u32,
    }

    #[test]
    fn error_is_one_line_with_position() {
        let err = parse::<T>("f.toml", "\na = \"x\"\n").unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.starts_with("f.toml:2:5: "), "{err}");
    }

    /// Makes a FIFO at `path` (what the tests that plant one read).
    pub(crate) fn fifo_at(path: &Path) -> std::path::PathBuf {
        let status = std::process::Command::new("mkfifo").arg(path).status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "mkfifo: a FIFO is what this test reads"
        );
        path.to_path_buf()
    }

    /// A FIFO, a folder or nothing where a config file should be: one line,
    /// a usage error, and the FIFO is never waited on.
    #[test]
    fn a_fifo_a_folder_or_nothing_is_one_line_never_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = fifo_at(&dir.path().join("kiln-audit.toml"));
        let err = load::<T>(&fifo, "kiln-audit.toml").unwrap_err();
        assert_eq!(crate::error::exit_status(&err), 2);
        let text = crate::error::one_line(&err);
        assert!(
            text.contains("is a FIFO, not a regular file") && !text.contains('\n'),
            "{text}"
        );
        let err = load::<T>(dir.path(), "the folder").unwrap_err();
        assert!(crate::error::one_line(&err).contains("is a dir"), "{err:#}");
        let err = load::<T>(&dir.path().join("none.toml"), "none.toml").unwrap_err();
        assert_eq!(
            crate::error::one_line(&err),
            "cannot read none.toml: it is not there; restore it from git"
        );
        std::fs::write(dir.path().join("t.toml"), "a = 1\n").unwrap();
        assert_eq!(
            load::<T>(&dir.path().join("t.toml"), "t.toml").unwrap().a,
            1
        );
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
