//! The rules of the tidy test, one `check_*` function each, over the parsed
//! tree; each returns its violations with file, line and what to do.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::str::FromStr;

use proc_macro2::{TokenStream, TokenTree};

use crate::tree::{line, listed, matches_any, Scan, SourceFile};
use crate::{
    FFI_LAYERS, LINE_CAP, LINE_CAP_EXEMPT, MODULE_DOC_EXEMPT, MODULE_DOC_REQUIRED, TOOL_NAMES,
    TOOL_NAME_FREE, UNSAFE_ALLOWED,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rule {
    Parse,
    Unsafe,
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

fn violation(rule: Rule, path: &str, line: usize, message: String) -> Violation {
    Violation {
        rule,
        path: path.to_owned(),
        line,
        message,
    }
}

pub(crate) fn check_parse(files: &[SourceFile]) -> Vec<Violation> {
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

pub(crate) fn check_unsafe(files: &[SourceFile]) -> Vec<Violation> {
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !listed(UNSAFE_ALLOWED, &f.path)) {
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

pub(crate) fn check_ffi_upward(files: &[SourceFile]) -> Vec<Violation> {
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
                .filter(|r| r.resolved.first().is_none_or(|m| m != layer))
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

/// Where a module first names another: file, line, the path as written.
type Site = (String, usize, String);

pub(crate) fn check_import_circles(files: &[SourceFile]) -> Vec<Violation> {
    let mut crates: BTreeMap<&str, BTreeMap<(String, String), Site>> = BTreeMap::new();
    let mut nodes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for file in files {
        if let Some((src, module)) = &file.module {
            let set = nodes.entry(src.as_str()).or_default();
            set.extend(module.first().map(String::as_str));
        }
    }
    for file in files {
        let Some((src, module)) = &file.module else {
            continue;
        };
        let (Some(from), Some(scan)) = (module.first(), Scan::of(file)) else {
            continue;
        };
        for r in &scan.references {
            let Some(to) = r
                .resolved
                .first()
                .filter(|to| *to != from && nodes[src.as_str()].contains(to.as_str()))
            else {
                continue;
            };
            let site = (file.path.clone(), r.line, r.written.clone());
            crates
                .entry(src.as_str())
                .or_default()
                .entry((from.clone(), to.clone()))
                .or_insert(site);
        }
    }
    crates.values().flat_map(circles).collect()
}

/// One violation per strongly connected set of modules, naming its shortest
/// circle through the first module in name order.
fn circles(edges: &BTreeMap<(String, String), Site>) -> Vec<Violation> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &str| -> BTreeSet<String> {
        let (mut seen, mut queue) = (BTreeSet::new(), VecDeque::from([start.to_owned()]));
        while let Some(n) = queue.pop_front() {
            for &m in next.get(n.as_str()).into_iter().flatten() {
                if seen.insert(m.to_owned()) {
                    queue.push_back(m.to_owned());
                }
            }
        }
        seen
    };
    let (mut reported, mut found) = (BTreeSet::new(), Vec::new());
    for &start in next.keys() {
        if reported.contains(start) || !reach(start).contains(start) {
            continue;
        }
        let members: Vec<String> = reach(start)
            .into_iter()
            .filter(|m| reach(m).contains(start))
            .collect();
        reported.extend(members.iter().cloned());
        let cycle = shortest_circle(&next, start);
        let sites: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let (path, line, written) = &edges[&(w[0].to_owned(), w[1].to_owned())];
                format!("{path}:{line} names {written}")
            })
            .collect();
        let (path, line, _) = &edges[&(cycle[0].to_owned(), cycle[1].to_owned())];
        let message = format!(
            "import circle {} ({}){}",
            cycle.join(" → "),
            sites.join("; "),
            match members.len() + 1 - cycle.len() {
                0 => String::new(),
                _ => format!("; the modules {} all reach each other", members.join(", ")),
            }
        );
        found.push(violation(Rule::ImportCircle, path, *line, message));
    }
    found
}

fn shortest_circle<'a>(next: &BTreeMap<&'a str, Vec<&'a str>>, start: &'a str) -> Vec<&'a str> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &m in next.get(n).into_iter().flatten() {
            if m == start {
                let mut cycle = vec![n];
                while let Some(&p) = parent.get(cycle[cycle.len() - 1]) {
                    cycle.push(p);
                }
                cycle.reverse();
                cycle.push(start);
                return cycle;
            }
            if !parent.contains_key(m) {
                parent.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    unreachable!("start is on a circle")
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

pub(crate) fn check_tool_names(files: &[SourceFile]) -> Vec<Violation> {
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

pub(crate) fn check_module_docs(files: &[SourceFile]) -> Vec<Violation> {
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

pub(crate) fn check_line_cap(files: &[SourceFile]) -> Vec<Violation> {
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
