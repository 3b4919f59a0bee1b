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
