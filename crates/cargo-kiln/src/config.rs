//! Reading TOML config files into typed structs, with errors that fit on
//! one line (`ci/matrix.toml:3:9: unknown field ...`).

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::usage_error;

/// Reads and parses `path` (`shown` in messages); a missing or malformed
/// file is a usage error.
pub fn load<T: DeserializeOwned>(path: &Path, shown: &str) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage_error!("cannot read {shown}: {e}; restore it from git"))?;
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
mod tests {
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

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
