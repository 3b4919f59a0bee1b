//! The crate names `cargo kiln new` accepts: cargo's rules for a package with
//! a library (no keyword, no name of a standard crate), lowercase so that the
//! env prefix is the name in capitals. The names of the crates it depends
//! on are checked against the graph it makes (`graph`).

/// The longest name: the template's Rust lines that hold the name stay
/// within rustfmt's width up to this length (checked by a test).
pub const MAX_NAME_LEN: usize = 32;

/// Rust's keywords (strict and reserved, 2021 edition): not a library name.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Names of the standard crates, and kiln's own (the crates of the new
/// crate's graph are read from it: `graph`).
const TAKEN: &[&str] = &["alloc", "core", "proc_macro", "std", "test", "kiln"];

/// A name `cargo kiln new` does not accept, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// No name.
    #[error("the crate name is empty; give one, such as `my-kernels`")]
    Empty,
    /// Longer than [`MAX_NAME_LEN`].
    #[error("the crate name `{name}` is {len} characters long; use at most {MAX_NAME_LEN}")]
    TooLong {
        /// The name given.
        name: String,
        /// Its length.
        len: usize,
    },
    /// Does not start with a lowercase letter.
    #[error("the crate name `{name}` must start with a lowercase letter (a-z)")]
    BadStart {
        /// The name given.
        name: String,
    },
    /// Holds a character other than `a-z`, `0-9`, `-`, `_`.
    #[error("the crate name `{name}` holds {found:?}; use lowercase letters, digits, `-` and `_`")]
    BadChar {
        /// The name given.
        name: String,
        /// The first character not allowed.
        found: char,
    },
    /// A Rust keyword or a name already taken.
    #[error("the crate name `{name}` is {why}; choose another")]
    Reserved {
        /// The name given.
        name: String,
        /// "a Rust keyword" or what takes it.
        why: &'static str,
    },
}

/// Checks `name` against the rules above.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let owned = || name.to_owned();
    let first = name.chars().next().ok_or(NameError::Empty)?;
    let len = name.chars().count();
    if len > MAX_NAME_LEN {
        return Err(NameError::TooLong { name: owned(), len });
    }
    if !first.is_ascii_lowercase() {
        return Err(NameError::BadStart { name: owned() });
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if let Some(found) = name.chars().find(|c| !allowed(*c)) {
        return Err(NameError::BadChar {
            name: owned(),
            found,
        });
    }
    let ident = name.replace('-', "_");
    if KEYWORDS.contains(&ident.as_str()) {
        return Err(NameError::Reserved {
            name: owned(),
            why: "a Rust keyword",
        });
    }
    if TAKEN.contains(&ident.as_str()) {
        return Err(NameError::Reserved {
            name: owned(),
            why: "a standard crate's or kiln's own",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, expected: Result<(), &str>) {
        let got = validate_name(name).map_err(|e| e.to_string());
        assert_eq!(got, expected.map_err(str::to_owned), "{name:?}");
    }

    #[test]
    fn names() {
        check("my-kernels", Ok(()));
        check("saxpy_2", Ok(()));
        check("a", Ok(()));
        check(&"a".repeat(MAX_NAME_LEN), Ok(()));
        check(
            "",
            Err("the crate name is empty; give one, such as `my-kernels`"),
        );
        check(
            &"a".repeat(MAX_NAME_LEN + 1),
            Err(&format!(
                "the crate name `{}` is 33 characters long; use at most 32",
                "a".repeat(33)
            )),
        );
        check(
            "9lives",
            Err("the crate name `9lives` must start with a lowercase letter (a-z)"),
        );
        check(
            "-x",
            Err("the crate name `-x` must start with a lowercase letter (a-z)"),
        );
        check(
            "My-Kernels",
            Err("the crate name `My-Kernels` must start with a lowercase letter (a-z)"),
        );
        check(
            "my kernels",
            Err(
                "the crate name `my kernels` holds ' '; use lowercase letters, digits, `-` and `_`",
            ),
        );
        check(
            "myKernels",
            Err("the crate name `myKernels` holds 'K'; use lowercase letters, digits, `-` and `_`"),
        );
        check(
            "fn",
            Err("the crate name `fn` is a Rust keyword; choose another"),
        );
        check(
            "proc-macro",
            Err("the crate name `proc-macro` is a standard crate's or kiln's own; choose another"),
        );
        check(
            "test",
            Err("the crate name `test` is a standard crate's or kiln's own; choose another"),
        );
    }
}
