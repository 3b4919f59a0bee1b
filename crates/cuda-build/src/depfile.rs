//! Make-style dependency files (`nvcc -MD -MF`): the headers a module
//! includes, so that editing one rebuilds exactly the modules that include it.

use std::path::{Path, PathBuf};

/// Parses a dependency file's text: every prerequisite of every rule, in
/// order, without duplicates. Handles `\`-newline continuations and `\ `
/// escaped spaces. Relative paths are resolved against `base` (the directory
/// nvcc ran in).
pub(crate) fn parse(text: &str, base: &Path) -> Vec<PathBuf> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut deps: Vec<PathBuf> = Vec::new();
    for line in joined.lines() {
        let Some(colon) = find_rule_colon(line) else {
            continue;
        };
        for word in split_words(&line[colon + 1..]) {
            let path = base.join(&word);
            if !deps.contains(&path) {
                deps.push(path);
            }
        }
    }
    deps
}

/// The `:` that ends the targets, skipping `C:`-style drive letters.
fn find_rule_colon(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    (0..bytes.len()).find(|&i| {
        bytes[i] == b':'
            && !(i == 1 && bytes[0].is_ascii_alphabetic() && bytes.get(2) == Some(&b'\\'))
    })
}

fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                word.push(' ');
                chars.next();
            }
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Whether a dependency belongs to the system or the toolkit (not worth a
/// `rerun-if-changed`: a toolkit change is caught by its version and path).
pub(crate) fn is_system_header(path: &Path, toolkit_root: &Path) -> bool {
    let normalized = normalize(path);
    normalized.starts_with("/usr/") || normalized.starts_with(normalize(toolkit_root))
}

/// Removes `.` and `..` components lexically (nvcc writes `bin/..//include`).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// How nvcc's command line and the kernel cache name a file: relative to
/// `base` (the crate's root, where nvcc runs) when it lies under it, so that
/// the same tree at another path gives the same command lines and keys;
/// `.` for `base` itself; else the path as it is (normalized).
pub(crate) fn relative_to(path: &Path, base: &Path) -> PathBuf {
    let normalized = normalize(path);
    match normalized.strip_prefix(normalize(base)) {
        Ok(inside) if base.is_absolute() && inside.as_os_str().is_empty() => PathBuf::from("."),
        Ok(inside) if base.is_absolute() => inside.to_path_buf(),
        _ => normalized,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nvcc_output() {
        let text = "a.fatbin : a.cu \\\n    /usr/include/stdc-predef.h \\\n    ./cuda/bin/..//include/cuda_runtime.h \\\n    include/h.h \\\n    /x/with\\ space.h\n";
        let deps = parse(text, Path::new("/w"));
        assert_eq!(
            deps,
            [
                PathBuf::from("/w/a.cu"),
                PathBuf::from("/usr/include/stdc-predef.h"),
                PathBuf::from("/w/./cuda/bin/..//include/cuda_runtime.h"),
                PathBuf::from("/w/include/h.h"),
                PathBuf::from("/x/with space.h"),
            ]
        );
        let root = Path::new("/w/cuda");
        let kept: Vec<_> = deps.iter().filter(|d| !is_system_header(d, root)).collect();
        assert_eq!(
            kept,
            [
                Path::new("/w/a.cu"),
                Path::new("/w/include/h.h"),
                Path::new("/x/with space.h")
            ]
        );
    }

    #[test]
    fn empty_and_phony_rules() {
        assert!(parse("", Path::new("/")).is_empty());
        let deps = parse("a.o: a.h\na.h:\n", Path::new("/b"));
        assert_eq!(deps, [PathBuf::from("/b/a.h")]);
    }

    #[test]
    fn files_of_the_crate_are_named_relative_to_it() {
        let base = Path::new("/w/crate");
        let check = |path: &str, expected: &str| {
            assert_eq!(
                relative_to(Path::new(path), base),
                Path::new(expected),
                "{path}"
            );
        };
        check("/w/crate/kernels/a.cu", "kernels/a.cu");
        check("/w/crate/kernels/../include/h.h", "include/h.h");
        check("/w/crate", ".");
        check("/w/crate2/a.cu", "/w/crate2/a.cu");
        check("/w/other/../crate/a.cu", "a.cu");
        check(
            "/cuda/include/cuda_runtime.h",
            "/cuda/include/cuda_runtime.h",
        );
        assert_eq!(
            relative_to(Path::new("/w/crate/a.cu"), Path::new("")),
            Path::new("/w/crate/a.cu")
        );
    }
}
