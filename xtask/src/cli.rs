//! Command-line plumbing shared by the subcommands: a tiny flag parser and
//! the error type that marks bad input (exit status 2 instead of 1).
//!
//! Hand-written rather than clap: xtask is rebuilt often on 2-core machines.

use std::fmt;

/// Bad input from the user (unknown flag, unknown cell, malformed config).
/// `main` turns it into exit status 2; other errors exit 1.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Returns a [`UsageError`] wrapped in `anyhow`, formatted like `format!`.
macro_rules! usage_error {
    ($($arg:tt)*) => {
        anyhow::Error::new($crate::cli::UsageError(format!($($arg)*)))
    };
}
pub(crate) use usage_error;

/// The arguments of one subcommand, consumed flag by flag.
#[derive(Debug)]
pub(crate) struct Args {
    /// Used in error messages, e.g. `ci-cpu`.
    command: String,
    rest: Vec<String>,
}

impl Args {
    pub(crate) fn new(command: &str, rest: Vec<String>) -> Self {
        Self {
            command: command.to_string(),
            rest,
        }
    }

    /// Removes every `--name` and reports whether there was one.
    pub(crate) fn flag(&mut self, name: &str) -> bool {
        let before = self.rest.len();
        self.rest.retain(|a| a != name);
        self.rest.len() != before
    }

    /// Removes every `--name VALUE` / `--name=VALUE` and returns the values in
    /// order.
    pub(crate) fn values(&mut self, name: &str) -> anyhow::Result<Vec<String>> {
        let prefix = format!("{name}=");
        let mut values = Vec::new();
        let mut kept = Vec::new();
        let mut args = std::mem::take(&mut self.rest).into_iter();
        while let Some(arg) = args.next() {
            if arg == name {
                match args.next() {
                    Some(v) if !v.starts_with("--") => values.push(v),
                    _ => {
                        return Err(usage_error!(
                            "`{name}` needs a value: `cargo xtask {} {name} VALUE`",
                            self.command
                        ))
                    }
                }
            } else if let Some(v) = arg.strip_prefix(&prefix) {
                values.push(v.to_string());
            } else {
                kept.push(arg);
            }
        }
        self.rest = kept;
        Ok(values)
    }

    /// Like [`Args::values`], for a flag given at most once.
    pub(crate) fn value(&mut self, name: &str) -> anyhow::Result<Option<String>> {
        let mut values = self.values(name)?;
        if values.len() > 1 {
            return Err(usage_error!(
                "`{name}` given {} times to `cargo xtask {}`; give it once",
                values.len(),
                self.command
            ));
        }
        Ok(values.pop())
    }

    /// Takes the first argument if it is not a flag (a sub-subcommand).
    pub(crate) fn positional(&mut self) -> Option<String> {
        if self.rest.first().is_some_and(|a| !a.starts_with('-')) {
            Some(self.rest.remove(0))
        } else {
            None
        }
    }

    /// Fails on anything not consumed, naming what is accepted.
    pub(crate) fn finish(self, usage: &str) -> anyhow::Result<()> {
        match self.rest.first() {
            None => Ok(()),
            Some(arg) => Err(usage_error!(
                "unexpected argument `{arg}` to `cargo xtask {}`; usage: {usage}",
                self.command
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::new("t", v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn values_take_both_spellings_in_order() {
        let mut a = args(&["--only", "fmt", "--x", "--only=test"]);
        assert_eq!(a.values("--only").unwrap(), ["fmt", "test"]);
        assert!(a.flag("--x"));
        a.finish("t").unwrap();
    }

    #[test]
    fn value_without_argument_is_a_usage_error() {
        let err = args(&["--only"]).values("--only").unwrap_err();
        assert!(err.is::<UsageError>());
    }

    #[test]
    fn leftover_argument_is_a_usage_error() {
        let err = args(&["--bogus"]).finish("t [--x]").unwrap_err();
        assert!(err.is::<UsageError>());
        assert!(err.to_string().contains("--bogus"));
    }

    #[test]
    fn positional_does_not_take_flags() {
        let mut a = args(&["--dir", "x"]);
        assert_eq!(a.positional(), None);
        let mut a = args(&["install", "--dir", "x"]);
        assert_eq!(a.positional().as_deref(), Some("install"));
    }
}
