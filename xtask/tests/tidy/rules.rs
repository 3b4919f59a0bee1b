//! The rules of the tidy test, one `check_*` function each, over the parsed
//! tree; each returns its violations with file, line and what to do.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use proc_macro2::{TokenStream, TokenTree};

use crate::tree::{line, listed, matches_any, Scan, SourceFile};
use crate::{
    Tables, FFI_LAYERS, LINE_CAP, LINE_CAP_EXEMPT, MODULE_DOC_EXEMPT, MODULE_DOC_REQUIRED,
    TABLES_FILE, TOOL_NAMES, TOOL_NAME_FREE,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rule {
    Parse,
    Unsafe,
    UnsafeList,
    UnsafeContract,
    FfiUpward,
    ImportCircle,
    ToolNames,
    ModuleDoc,
    LineCap,
}

impl Rule {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Rule::Parse => "parse",
            Rule::Unsafe => "unsafe",
            Rule::UnsafeList => "unsafe-list",
            Rule::UnsafeContract => "unsafe-contract",
            Rule::FfiUpward => "ffi-upward",
            Rule::ImportCircle => "import-circle",
            Rule::ToolNames => "tool-names",
            Rule::ModuleDoc => "module-doc",
            Rule::LineCap => "line-cap",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Rule::Parse => "make the file valid Rust",
            Rule::Unsafe => "move the unsafe code into the FFI layer or launch marshalling, or add the file to UNSAFE_ALLOWED with a reason",
            Rule::UnsafeList => "name each file with unsafe code exactly in UNSAFE_ALLOWED, and only those",
            Rule::UnsafeContract => "list exactly the files with unsafe code in the `# Unsafe contract` section of the crate's lib.rs (and in ARCHITECTURE.md)",
            Rule::FfiUpward => "the FFI layer takes raw handles only: pass raw values in, convert in the layer above",
            Rule::ImportCircle => "break the circle: move what both modules need into a lower module",
            Rule::ToolNames => "say what to do in the library's words (a setting, an API); only binaries name kiln's commands and flags",
            Rule::ModuleDoc => "open the file with a `//!` doc: what the module is for, in two or three lines",
            Rule::LineCap => "split the file by concern (a generated file carries an `@generated` marker)",
        }
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Violation {
    pub(crate) rule: Rule,
    pub(crate) path: String,
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (rule, hint) = (self.rule.name(), self.rule.hint());
        write!(
            f,
            "{}:{}: [{rule}] {}\n    fix: {hint}",
            self.path, self.line, self.message
        )
    }
}

pub(crate) fn violation(rule: Rule, path: &str, line: usize, message: String) -> Violation {
    Violation {
        rule,
        path: path.to_owned(),
        line,
        message,
    }
}

pub(crate) fn check_parse(files: &[SourceFile], _: &Tables) -> Vec<Violation> {
    let failed = files
        .iter()
        .filter_map(|f| Some((f, f.syntax.as_ref().err()?)));
    failed
        .map(|(f, e)| {
            violation(
                Rule::Parse,
                &f.path,
                line(e.span()),
                format!("cannot parse: {e}"),
            )
        })
        .collect()
}

pub(crate) fn check_unsafe(files: &[SourceFile], tables: &Tables) -> Vec<Violation> {
    let mut found = Vec::new();
    for file in files
        .iter()
        .filter(|f| !tables.unsafe_allowed.iter().any(|(p, _)| *p == f.path))
    {
        let Some(scan) = Scan::of(file) else { continue };
        let Some(&(first, what)) = scan.unsafe_sites.iter().min() else {
            continue;
        };
        let mut lines: Vec<usize> = scan.unsafe_sites.iter().map(|(l, _)| *l).collect();
        lines.sort();
        lines.dedup();
        let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
        let message = format!(
            "{} unsafe site(s) (first: {what}) in a file not in UNSAFE_ALLOWED; lines {}",
            scan.unsafe_sites.len(),
            lines.join(", ")
        );
        found.push(violation(Rule::Unsafe, &file.path, first, message));
    }
    found
}

/// The line of the tables' file (main.rs) that holds `needle` (1 when none
/// does: the planted tests' tables are not in that file).
pub(crate) fn table_line(needle: &str) -> usize {
    include_str!("main.rs")
        .lines()
        .position(|l| l.contains(needle))
        .map_or(1, |i| i + 1)
}

/// Whether `file` has unsafe code (a file that does not parse has none
/// here: rule `parse` reports it).
fn has_unsafe(file: &SourceFile) -> bool {
    Scan::of(file).is_some_and(|s| !s.unsafe_sites.is_empty())
}

pub(crate) fn check_unsafe_list(files: &[SourceFile], tables: &Tables) -> Vec<Violation> {
    let mut found = Vec::new();
    for (entry, _) in tables.unsafe_allowed {
        let problem = match files.iter().find(|f| f.path == *entry) {
            _ if entry.contains(['*', '?', '[']) => "is a pattern, not a file: name each file",
            None => "names no file: remove it, or fix the path",
            Some(f) if !has_unsafe(f) => "names a file with no unsafe code: remove it",
            Some(_) => continue,
        };
        let message = format!("UNSAFE_ALLOWED entry `{entry}` {problem}");
        found.push(violation(
            Rule::UnsafeList,
            TABLES_FILE,
            table_line(&format!("\"{entry}\"")),
            message,
        ));
    }
    found
}

/// The backticked `src/…rs` paths of the `# Unsafe contract` section of a
/// crate's root doc, each with its line.
fn contract_files(lib: &SourceFile) -> Vec<(String, usize)> {
    let mut in_section = false;
    let mut listed = Vec::new();
    for (i, text) in lib.text.lines().enumerate() {
        let Some(doc) = text.trim_start().strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim();
        if let Some(heading) = doc.strip_prefix("# ") {
            in_section = heading.trim() == "Unsafe contract";
            continue;
        }
        if in_section {
            let quoted = doc.split('`').skip(1).step_by(2);
            let paths = quoted.filter(|q| q.starts_with("src/") && q.ends_with(".rs"));
            listed.extend(paths.map(|p| (p.to_owned(), i + 1)));
        }
    }
    listed
}

pub(crate) fn check_unsafe_contract(files: &[SourceFile], tables: &Tables) -> Vec<Violation> {
    let mut found = Vec::new();
    for &(lib_path, src) in tables.unsafe_contracts {
        let Some(lib) = files.iter().find(|f| f.path == lib_path) else {
            let message = format!("UNSAFE_CONTRACTS names `{lib_path}`, which does not exist");
            found.push(violation(Rule::UnsafeContract, TABLES_FILE, 1, message));
            continue;
        };
        let crate_dir = src.trim_end_matches("/src");
        let listed = contract_files(lib);
        let named: BTreeSet<String> = listed
            .iter()
            .map(|(p, _)| format!("{crate_dir}/{p}"))
            .collect();
        for (path, line) in &listed {
            let full = format!("{crate_dir}/{path}");
            if !files.iter().any(|f| f.path == full && has_unsafe(f)) {
                let message = format!(
                    "the unsafe contract lists `{path}`, which has no unsafe code (or does not exist)"
                );
                found.push(violation(Rule::UnsafeContract, lib_path, *line, message));
            }
        }
        let under = format!("{src}/");
        for file in files.iter().filter(|f| f.path.starts_with(&under)) {
            let Some(scan) = Scan::of(file) else { continue };
            let Some(&(first, _)) = scan.unsafe_sites.iter().min() else {
                continue;
            };
            if !named.contains(&file.path) {
                let message = format!(
                    "has unsafe code, but the unsafe contract in `{lib_path}` does not list it"
                );
                found.push(violation(Rule::UnsafeContract, &file.path, first, message));
            }
        }
        if listed.is_empty() {
            let message = "has no `# Unsafe contract` section listing `src/…rs` files".to_owned();
            found.push(violation(Rule::UnsafeContract, lib_path, 1, message));
        }
    }
    found
}

pub(crate) fn check_ffi_upward(files: &[SourceFile], _: &Tables) -> Vec<Violation> {
    let mut found = Vec::new();
    for &(src, layer) in FFI_LAYERS {
        let in_layer = |f: &&SourceFile| {
            f.module
                .as_ref()
                .is_some_and(|(s, m)| s == src && m.first().is_some_and(|m| m == layer))
        };
        for file in files.iter().filter(in_layer) {
            let Some(scan) = Scan::of(file) else { continue };
            for r in scan
                .references
                .iter()
                .filter(|r| r.anchored && r.resolved.first().is_none_or(|m| m != layer))
            {
                let target = match r.resolved.is_empty() {
                    true => "the crate root".to_owned(),
                    false => format!("crate::{}", r.resolved.join("::")),
                };
                let message = format!(
                    "`{}` names {target}, outside the `{layer}` layer",
                    r.written
                );
                found.push(violation(Rule::FfiUpward, &file.path, r.line, message));
            }
        }
    }
    found
}

/// Where `needle` first occurs in `hay` as a whole word (a word is made of
/// `[A-Za-z0-9_-]`; a needle edge that is not a word character needs no gap).
fn find_word(hay: &str, needle: &str) -> Option<usize> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let (starts_word, ends_word) = (needle.starts_with(word), needle.ends_with(word));
    hay.match_indices(needle).map(|(at, _)| at).find(|&at| {
        let before = hay[..at].chars().next_back().is_some_and(word);
        let after = hay[at + needle.len()..].chars().next().is_some_and(word);
        !((starts_word && before) || (ends_word && after))
    })
}

/// Each string literal (doc comments included) with the line it starts on.
fn string_literals(stream: TokenStream, out: &mut Vec<(usize, String)>) {
    for tt in stream {
        match tt {
            TokenTree::Group(g) => string_literals(g.stream(), out),
            TokenTree::Literal(lit) => {
                let text = lit.to_string();
                let body = text.trim_start_matches(['b', 'c', 'r']);
                if body.starts_with('"') || body.starts_with('#') {
                    out.push((line(lit.span()), text));
                }
            }
            _ => {}
        }
    }
}

pub(crate) fn check_tool_names(files: &[SourceFile], _: &Tables) -> Vec<Violation> {
    let mut found = Vec::new();
    for file in files
        .iter()
        .filter(|f| matches_any(TOOL_NAME_FREE, &f.path))
    {
        // Doc comments arrive as `#[doc = "..."]` literals; plain comments not at all.
        let Ok(tokens) = TokenStream::from_str(&file.text) else {
            continue;
        };
        let mut literals = Vec::new();
        string_literals(tokens, &mut literals);
        for (start, text) in literals {
            let hits: Vec<(usize, &str)> = TOOL_NAMES
                .iter()
                .filter_map(|n| Some((find_word(&text, n)?, *n)))
                .collect();
            let Some(&(at, _)) = hits.iter().min() else {
                continue;
            };
            let names: Vec<String> = hits
                .iter()
                .map(|(_, n)| format!("`{}`", n.trim()))
                .collect();
            let line = start + text[..at].matches('\n').count();
            let from = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let to = text[at..].find('\n').map_or(text.len(), |i| at + i);
            let message = format!(
                "a string or doc names {}: {}",
                names.join(", "),
                text[from..to].trim()
            );
            found.push(violation(Rule::ToolNames, &file.path, line, message));
        }
    }
    found
}

pub(crate) fn check_module_docs(files: &[SourceFile], _: &Tables) -> Vec<Violation> {
    let mut found = Vec::new();
    for file in files
        .iter()
        .filter(|f| matches_any(MODULE_DOC_REQUIRED, &f.path) && !f.generated())
        .filter(|f| !listed(MODULE_DOC_EXEMPT, &f.path))
    {
        let plain_comment =
            |t: &str| t.starts_with("//") && !t.starts_with("//!") && !t.starts_with("///");
        let mut lines = file
            .text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()));
        match lines.find(|(_, t)| !t.is_empty() && !plain_comment(t)) {
            Some((_, t)) if t.starts_with("//!") || t.starts_with("/*!") => {}
            Some((n, t)) => found.push(violation(
                Rule::ModuleDoc,
                &file.path,
                n,
                format!("opens with `{t}`, not a `//!` doc"),
            )),
            None => found.push(violation(
                Rule::ModuleDoc,
                &file.path,
                1,
                "has no `//!` doc".to_owned(),
            )),
        }
    }
    found
}

pub(crate) fn check_line_cap(files: &[SourceFile], _: &Tables) -> Vec<Violation> {
    let exempt = |f: &&SourceFile| f.generated() || listed(LINE_CAP_EXEMPT, &f.path);
    let long = files
        .iter()
        .filter(|f| !exempt(f))
        .filter(|f| f.text.lines().count() > LINE_CAP);
    long.map(|f| {
        let message = format!(
            "{} lines, over the cap of {LINE_CAP}",
            f.text.lines().count()
        );
        violation(Rule::LineCap, &f.path, LINE_CAP + 1, message)
    })
    .collect()
}
