//! What codegen lets libclang read: libclang opens every `#include` itself,
//! and blocks for ever on a FIFO (or `/dev/stdin`) and reads `/dev/zero`
//! until the host's memory is gone. So before a parse, the include graph is
//! walked as the preprocessor would find it (`#include "..."` from the
//! including file's folder, then `-I`, then `-isystem` dirs; `<...>` from
//! the dirs only), and every file found must be a regular file of at most
//! [`MAX_INPUT`] bytes, read without blocking ([`crate::regular`]).
//!
//! An include the walk cannot resolve (a macro's, one in the compiler's own
//! dirs) is left to clang; one under a conditional not taken is still
//! checked, which only refuses more.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::regular::{self, Links, Refusal};

/// The largest header or source codegen reads (16 MiB).
pub(super) const MAX_INPUT: u64 = 16 << 20;

/// Checks `roots` (absolute) and every file they include, transitively,
/// with the include dirs of clang's `args`; the first refusal as one line
/// naming the file and the line that includes it.
pub(super) fn check_include_graph(roots: &[PathBuf], args: &[String]) -> Result<(), String> {
    let dirs = search_dirs(args);
    let mut seen = BTreeSet::new();
    let mut todo: Vec<(PathBuf, Option<(PathBuf, usize)>)> =
        roots.iter().map(|r| (r.clone(), None)).collect();
    while let Some((path, from)) = todo.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let bytes = read(&path).map_err(|why| {
            let from = from
                .map(|(file, line)| format!(" (included from {}:{line})", file.display()))
                .unwrap_or_default();
            format!(
                "{}{from} {why}; codegen reads only regular files of at most {} MiB: include the header itself",
                path.display(),
                MAX_INPUT >> 20
            )
        })?;
        let text = String::from_utf8_lossy(&bytes);
        for (index, line) in text.lines().enumerate() {
            let Some((name, quoted)) = included(line) else {
                continue;
            };
            let here = path.parent().filter(|_| quoted);
            if let Some(found) = resolve(name, here, &dirs) {
                todo.push((found, Some((path.clone(), index + 1))));
            }
        }
    }
    Ok(())
}

/// The bytes of `path`, or why not, in words that follow its name.
fn read(path: &Path) -> Result<Vec<u8>, String> {
    match regular::read(path, MAX_INPUT, Links::Follow) {
        Ok((_, bytes)) => Ok(bytes),
        Err(Refusal::Missing) => Err("does not exist".into()),
        Err(Refusal::NotRegular(kind)) => Err(format!("is {kind}")),
        Err(Refusal::TooLarge) => Err(format!("is larger than {} MiB", MAX_INPUT >> 20)),
        Err(Refusal::Io(e)) => Err(format!("cannot be read ({e})")),
    }
}

/// The dirs of `-I`, `-iquote` and `-isystem` (joined or separate), in
/// order: clang searches the user's before the system's.
fn search_dirs(args: &[String]) -> Vec<PathBuf> {
    let mut user = Vec::new();
    let mut system = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        for (flag, is_system) in [("-iquote", false), ("-isystem", true), ("-I", false)] {
            if let Some(rest) = arg.strip_prefix(flag) {
                let dir = if rest.is_empty() {
                    iter.next().cloned()
                } else {
                    Some(rest.to_string())
                };
                let list = if is_system { &mut system } else { &mut user };
                list.extend(dir.map(PathBuf::from));
                break;
            }
        }
    }
    user.extend(system);
    user
}

/// The name an `#include`, `#include_next` or `#import` line names, and
/// whether it is quoted.
fn included(line: &str) -> Option<(&str, bool)> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let rest = ["include_next", "include", "import"]
        .iter()
        .find_map(|d| rest.strip_prefix(d))?
        .trim_start();
    let (close, quoted) = match rest.chars().next()? {
        '"' => ('"', true),
        '<' => ('>', false),
        _ => return None,
    };
    let name = &rest[1..];
    let end = name.find(close)?;
    Some((&name[..end], quoted))
}

/// Where the preprocessor finds `name`: an absolute path as it is, else the
/// including file's folder (quoted includes), then the dirs. Anything at
/// the path counts (a FIFO too): that is what clang would open.
fn resolve(name: &str, here: Option<&Path>, dirs: &[PathBuf]) -> Option<PathBuf> {
    let name = Path::new(name);
    if name.is_absolute() {
        return Some(name.to_path_buf());
    }
    here.into_iter()
        .chain(dirs.iter().map(PathBuf::as_path))
        .map(|dir| dir.join(name))
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dirs: &[&Path]) -> Vec<String> {
        dirs.iter().map(|d| format!("-I{}", d.display())).collect()
    }

    #[test]
    fn include_lines_are_read_as_the_preprocessor_reads_them() {
        assert_eq!(included("#include \"a.h\""), Some(("a.h", true)));
        assert_eq!(
            included("  #  include <b/c.h> // x"),
            Some(("b/c.h", false))
        );
        assert_eq!(included("#include_next <d.h>"), Some(("d.h", false)));
        assert_eq!(included("#include MACRO"), None);
        assert_eq!(included("#define include \"x\""), None);
        assert_eq!(
            search_dirs(&[
                "-Ia".into(),
                "-isystem".into(),
                "s".into(),
                "-I".into(),
                "b".into()
            ]),
            [PathBuf::from("a"), "b".into(), "s".into()]
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_include_of_a_fifo_or_a_device_is_refused_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let fifo = dir.join("pipe.h");
        crate::regular::mkfifo(&fifo);
        std::fs::write(dir.join("ok.h"), "#include \"nested/inner.h\"\n").unwrap();
        std::fs::create_dir(dir.join("nested")).unwrap();
        std::fs::write(dir.join("nested/inner.h"), "\n#include <pipe.h>\n").unwrap();
        let root = dir.join("top.h");
        std::fs::write(&root, "#include \"ok.h\"\n").unwrap();
        let err = check_include_graph(std::slice::from_ref(&root), &args(&[dir])).unwrap_err();
        assert_eq!(
            err,
            format!(
                "{} (included from {}:2) is a FIFO; codegen reads only regular files of at most 16 MiB: include the header itself",
                fifo.display(),
                dir.join("nested/inner.h").display()
            )
        );
        for device in ["/dev/stdin", "/dev/zero"] {
            if std::fs::metadata(device).is_ok_and(|m| !m.is_file()) {
                std::fs::write(&root, format!("#include \"{device}\"\n")).unwrap();
                let err = check_include_graph(std::slice::from_ref(&root), &[]).unwrap_err();
                assert!(
                    err.starts_with(&format!("{device} (included from ")),
                    "{err}"
                );
            }
        }
        std::fs::write(&root, "#include \"ok.h\"\n").unwrap();
        std::fs::remove_file(&fifo).unwrap();
        std::fs::write(&fifo, "int x;\n").unwrap();
        check_include_graph(&[root], &args(&[dir])).unwrap();
    }

    #[test]
    fn a_header_past_the_bound_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let big = tmp.path().join("big.h");
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(MAX_INPUT + 1).unwrap();
        let err = check_include_graph(std::slice::from_ref(&big), &[]).unwrap_err();
        assert!(err.starts_with(&format!("{} is larger than 16 MiB", big.display())));
    }
}
