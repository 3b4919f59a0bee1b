//! ARCHITECTURE.md stays a five-minute map that tells the truth about its
//! proofs: at most `MAX_LINES` lines, and every test it names as
//! `path/to/file.rs::test_name` exists (the file, with `fn test_name(` in
//! it). Each problem is one line naming the reference; the rule is shown to
//! fail on planted bad references.

use std::path::Path;

/// The most lines ARCHITECTURE.md may have.
const MAX_LINES: usize = 400;

/// A test named in the text: the line it is on, the file and the function.
#[derive(Debug, PartialEq)]
struct Reference {
    line: usize,
    file: String,
    test: String,
}

/// Every `file.rs::name` in `text`, in order.
fn references(text: &str) -> Vec<Reference> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices(".rs::") {
            let before = &line[..at + ".rs".len()];
            let start = before.rfind(|c: char| !path_char(c)).map_or(0, |k| k + 1);
            let after = &line[at + ".rs::".len()..];
            let end = after.find(|c: char| !name_char(c)).unwrap_or(after.len());
            found.push(Reference {
                line: i + 1,
                file: before[start..].to_string(),
                test: after[..end].to_string(),
            });
        }
    }
    found
}

/// What is wrong with `text` as ARCHITECTURE.md of the tree at `root`: one
/// line each.
fn problems(root: &Path, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let lines = text.lines().count();
    if lines > MAX_LINES {
        found.push(format!(
            "ARCHITECTURE.md has {lines} lines, more than {MAX_LINES}: move details next to the code they describe"
        ));
    }
    for r in references(text) {
        let Reference { line, file, test } = &r;
        let at = format!("ARCHITECTURE.md:{line}: `{file}::{test}`");
        if test.is_empty() {
            found.push(format!("{at} names no test after `::`"));
            continue;
        }
        match std::fs::read_to_string(root.join(file)) {
            Err(_) => found.push(format!("{at}: no file {file}")),
            Ok(source) if !source.contains(&format!("fn {test}(")) => {
                found.push(format!("{at}: {file} has no `fn {test}(`"));
            }
            Ok(_) => {}
        }
    }
    found
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
}

#[test]
fn architecture_md_is_short_and_names_only_tests_that_exist() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    assert!(
        references(&text).len() >= 10,
        "ARCHITECTURE.md names fewer than 10 tests as `file.rs::test`: is the reference form still that?"
    );
    let found = problems(root(), &text);
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

#[test]
fn bad_references_and_a_long_file_are_each_one_line() {
    let text = "\
- true: `xtask/tests/architecture.rs::bad_references_and_a_long_file_are_each_one_line`.
- no such test: `xtask/tests/layering.rs::no_such_test`, and no such file:
  `xtask/tests/gone.rs::anything`; a prefix of a real name is no match:
  `xtask/tests/layering.rs::kiln_abi_has`, nor a name without `fn`:
  `xtask/tests/layering.rs::CLI_CRATES`.
";
    assert_eq!(
        problems(root(), text),
        [
            "ARCHITECTURE.md:2: `xtask/tests/layering.rs::no_such_test`: xtask/tests/layering.rs has no `fn no_such_test(`",
            "ARCHITECTURE.md:3: `xtask/tests/gone.rs::anything`: no file xtask/tests/gone.rs",
            "ARCHITECTURE.md:4: `xtask/tests/layering.rs::kiln_abi_has`: xtask/tests/layering.rs has no `fn kiln_abi_has(`",
            "ARCHITECTURE.md:5: `xtask/tests/layering.rs::CLI_CRATES`: xtask/tests/layering.rs has no `fn CLI_CRATES(`",
        ]
    );
    let long = "line\n".repeat(MAX_LINES + 1);
    assert_eq!(
        problems(root(), &long),
        ["ARCHITECTURE.md has 401 lines, more than 400: move details next to the code they describe"]
    );
    assert!(problems(root(), &"line\n".repeat(MAX_LINES)).is_empty());
}
