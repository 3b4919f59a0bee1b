//! The error that marks bad input found after parsing the command line
//! (a missing file, a bad spec, a malformed config): the binaries exit with
//! status 2 for it, as clap does for its own usage errors, and 1 otherwise.

use std::fmt;

/// Bad input, in one line saying what is wrong and how to fix it.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Returns a [`UsageError`] wrapped in `anyhow`, formatted like `format!`.
macro_rules! usage_error {
    ($($arg:tt)*) => {
        anyhow::Error::new($crate::UsageError(format!($($arg)*)))
    };
}
pub(crate) use usage_error;

/// The exit status for `error`: 2 for a [`UsageError`], else 1.
pub fn exit_status(error: &anyhow::Error) -> u8 {
    if error.is::<UsageError>() {
        2
    } else {
        1
    }
}

/// `error`'s message and its causes on one line, as `{:#}` joins them, but
/// without a cause whose text the line already holds (an error that shows
/// its source in its own message, as `cuda_build::Error::Io` does, and also
/// hands it on as its source, would otherwise say it twice).
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod one_line_tests {
    use super::one_line;

    #[test]
    fn a_cause_the_message_already_holds_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
        let error = anyhow::Error::new(cuda_build::Error::Io {
            path: "src/bindings.rs".into(),
            source: io,
        });
        assert_eq!(
            format!("{error:#}").matches("not a regular file").count(),
            2
        );
        assert_eq!(
            one_line(&error),
            "cannot access src/bindings.rs: not a regular file"
        );
    }

    #[test]
    fn context_and_a_new_cause_are_all_kept_in_order() {
        let error = anyhow::anyhow!("disk full")
            .context("cannot write the cache")
            .context("cargo kiln build");
        assert_eq!(
            one_line(&error),
            "cargo kiln build: cannot write the cache: disk full"
        );
    }
}
