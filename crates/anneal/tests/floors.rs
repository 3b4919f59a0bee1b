//! The house of imports inside kiln-anneal: each module of `src/` lives on
//! a floor ([`FLOORS`]) and imports only from floors below its own, naming
//! the module an item lives in (`crate::vocab::Points`), never the crate
//! root's re-exports: the root (`lib.rs`, the facade) is the top floor,
//! which nothing inside the crate imports from. Unit tests are exempt.

use std::path::{Path, PathBuf};

/// The floors, ground first. A module on floor `f` may import modules on
/// floors `0..f`.
const FLOORS: &[&[&str]] = &[
    // What names nothing of the anneal: errors, the generator, file access,
    // memory sizes, the kernels' bindings and module list.
    &["error", "rng", "access", "memory", "bindings", "modules"],
    // The vocabulary: points, knobs, outputs; synthetic data; settings.
    &["vocab", "synthetic", "setting"],
    // Checked input, files, maintenance decisions.
    &["input", "npy", "maintenance"],
    // The engine trait, the index, the tensor-core assignment.
    &["engine", "index", "assign_tc"],
    // The driver and the engines, the run's input plan.
    &["driver", "cpu", "gpu", "wgpu", "plan"],
    // Choosing an engine.
    &["target"],
    // Ranks of several processes (given a target); assigning new points
    // to an index.
    &["distributed", "encode"],
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` without comments (line comments, doc comments included) and
/// without its unit tests: each `#[cfg(test)]` item, a `mod tests;` line or
/// a braced `mod tests { ... }`, is left out, and the code after it kept.
fn code(text: &str) -> String {
    let mut kept = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..i]);
        let after = &rest[i + "#[cfg(test)]".len()..];
        // The item ends at its `;` or at the brace that closes its first `{`,
        // whichever comes first.
        let mut depth = 0usize;
        let mut end = after.len();
        for (j, c) in after.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    kept.push_str(rest);
    kept.lines()
        .map(|line| {
            // A `//` inside a string literal is kept: only one outside
            // quotes starts a comment.
            let mut quoted = false;
            let bytes = line.as_bytes();
            for i in 0..bytes.len() {
                match bytes[i] {
                    b'"' if i == 0 || bytes[i - 1] != b'\\' => quoted = !quoted,
                    b'/' if !quoted && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
                    _ => {}
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first identifier of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The names right after each `root` in `code`: `root::a::X` gives `a`,
/// `root::{a::X, b::{Y, Z}}` gives `a` and `b`. A `root` that is the tail
/// of a longer path (`x::crate::`, or `super::` inside `super::super::`)
/// does not count.
fn names_after(code: &str, root: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find(root) {
        let at = from + found;
        from = at + root.len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[from..];
        if rest.starts_with(root) {
            // A longer run of the same segment (`super::super::`): skip it.
            while code[from..].starts_with(root) {
                from += root.len();
            }
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        entry(&group[start..j], &mut names);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        entry(&group[start..j], &mut names);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            names.push(ident(rest).to_string());
        }
    }
    // A glob (`crate::*`) or an entry that is not a path (an attribute, a
    // comment) is kept as `*`: reported, never skipped.
    for name in &mut names {
        if name.is_empty() {
            *name = "*".to_string();
        }
    }
    names
}

/// One entry of a `{...}` group: its first identifier, `*` when it has
/// none (a glob, an attribute, a comment); nothing for the empty entry a
/// trailing comma leaves.
fn entry(text: &str, names: &mut Vec<String>) {
    let text = text.trim();
    if !text.is_empty() {
        names.push(match ident(text) {
            "" => "*".to_string(),
            name => name.to_string(),
        });
    }
}

/// Whether `code` names the crate root under another name (`use crate as
/// root;`, `use crate::{self as root}`, `extern crate self as name;`), so
/// that paths through that name would slip past the scan.
fn aliases_the_root(code: &str) -> bool {
    let flat: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.contains("use crate as ") || flat.contains("extern crate self") {
        return true;
    }
    // `self` at the top level of a `crate::{...}` group.
    names_after(&flat, "crate::")
        .iter()
        .any(|name| name == "self")
}

/// Each module's imports of other modules (through `crate::` or enough
/// `super::`s to reach the root), as `(file, module, imported)`.
fn imports() -> Vec<(String, String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let name = relative.to_string_lossy().replace('\\', "/");
        // The bindings are generated (`cargo kiln codegen`), their `super::`
        // inside their own nested modules.
        if ["lib.rs", "bindings.rs"].contains(&name.as_str())
            || relative.file_name().is_some_and(|f| f == "tests.rs")
        {
            continue;
        }
        let module = name.split('/').next().unwrap().trim_end_matches(".rs");
        // `a/b.rs` is `a::b`, two `super::`s from the root; `a/mod.rs` is
        // `a`, one.
        let depth = name.matches('/').count() - usize::from(name.ends_with("/mod.rs"));
        let code = code(&std::fs::read_to_string(&file).unwrap());
        if aliases_the_root(&code) {
            found.push((name.clone(), module.to_string(), "crate as".to_string()));
        }
        let to_root = "super::".repeat(depth + 1);
        for imported in names_after(&code, "crate::")
            .into_iter()
            .chain(names_after(&code, &to_root))
        {
            // `self` (the root itself) is reported as an alias above.
            if imported != module && imported != "self" {
                found.push((name.clone(), module.to_string(), imported));
            }
        }
    }
    found
}

#[test]
fn every_module_is_on_a_floor() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines() {
        // `mod x;`, `pub mod x;`, `pub(crate) mod x;`, indented or after an
        // attribute on the same line.
        let line = line.rsplit(']').next().unwrap_or(line).trim_start();
        let line = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .fold(line, |l, vis| l.strip_prefix(vis).unwrap_or(l));
        if let Some(rest) = line.strip_prefix("mod ") {
            let module = ident(rest);
            if module == "tests" {
                continue;
            }
            assert!(
                floor_of(module).is_some(),
                "module `{module}` of lib.rs is on no floor: add it to FLOORS in tests/floors.rs"
            );
        }
    }
}

#[test]
fn no_import_runs_up_a_floor_or_through_the_root() {
    let imports = imports();
    assert!(
        imports
            .iter()
            .any(|(_, m, i)| m == "gpu" && i == "assign_tc"),
        "the scan found no import of the GPU engine's: it reads nothing"
    );
    let mut bad = Vec::new();
    for (file, module, imported) in &imports {
        if imported == "crate as" {
            bad.push(format!(
                "src/{file}: names the crate root under another name; write `crate::MODULE::Item` so the floors can be read"
            ));
            continue;
        }
        if imported == "*" {
            bad.push(format!(
                "src/{file}: a glob or an entry that is no path through the crate root (`crate::*`, `super::*`, an attribute in a group); name each module"
            ));
            continue;
        }
        let (Some(own), Some(theirs)) = (floor_of(module), floor_of(imported)) else {
            bad.push(format!(
                "src/{file}: imports `crate::{imported}`, which is the root's re-export, not a module; name the module it lives in"
            ));
            continue;
        };
        if theirs >= own {
            bad.push(format!(
                "src/{file}: `{module}` (floor {own}) imports `{imported}` (floor {theirs}): only lower floors"
            ));
        }
    }
    bad.sort();
    bad.dedup();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_scan_reads_groups_nested_paths_and_supers() {
    let text = "use crate::{error::AnnealError, vocab::{Dtype, Points}};\nlet x = crate::input::validate(p);\nuse super::super::gpu::X;\nuse a::crate::not;";
    assert_eq!(names_after(text, "crate::"), ["error", "vocab", "input"]);
    assert_eq!(names_after(text, "super::super::"), ["gpu"]);
    assert_eq!(names_after(text, "super::"), Vec::<String>::new());
    assert_eq!(
        code("use x; // crate::Points\n/// [`crate::run`]\n#[cfg(test)]\nmod tests { use crate::Points; }\nuse y;"),
        "use x; \n\n\nuse y;"
    );
    // A `mod tests;` line leaves the code after it in the scan.
    assert_eq!(
        code("#[cfg(test)]\nmod tests;\npub use crate::Target;"),
        "\npub use crate::Target;"
    );
    assert_eq!(code("let s = \"a // b\"; // c"), "let s = \"a // b\"; ");
    assert_eq!(names_after("use crate::*;", "crate::"), ["*"]);
    for aliased in [
        "use crate as root;",
        "use crate\n    as root;",
        "extern crate self as kiln_anneal;",
        "use crate::{self as root, vocab::Points};",
        "use crate::{vocab::Points, self as root};",
    ] {
        assert!(aliases_the_root(aliased), "{aliased}");
    }
    for plain in [
        "use crate::vocab::Points as P; let s = \"crate\";",
        "use std::io::{Read, self as io}; use crate::{vocab::Points};",
        "use crate::{vocab::{self as v}, error::E};",
    ] {
        assert!(!aliases_the_root(plain), "{plain}");
    }
    assert_eq!(
        names_after("use crate::{#[cfg(x)] a::B, c::D};", "crate::"),
        ["*", "c"]
    );
}
