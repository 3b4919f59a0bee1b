//! Explicit instantiations of kernel templates, found in a source's tokens:
//! libclang leaves no cursor for `template __global__ void
//! scale<float>(...);`, so [`source_walk`](super::source_walk) finds each one
//! here (`template` not followed by `<` nor preceded by `extern`, naming a
//! `__global__` template before `<...>`) and resolves it by a second parse.

// clang-sys's constants keep C's names.
#![allow(non_upper_case_globals)]

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use clang_sys::*;

use super::scan::take_string;

/// An explicit instantiation in the source's tokens.
pub(super) struct Instantiation {
    /// `scale<float>` as written (tokens joined by spaces).
    pub(super) text: String,
    pub(super) line: u32,
    /// The byte offset just past its `;`.
    pub(super) end: usize,
}

/// What the tokens of a source say about its kernel templates.
#[derive(Default)]
pub(super) struct Found {
    /// The explicit instantiations written out.
    pub(super) instantiations: Vec<Instantiation>,
    /// `(name, line)` of each macro whose definition writes an explicit
    /// instantiation of a kernel template: not read, so said.
    pub(super) macros: Vec<(String, u32)>,
}

/// `template` not followed by `<` (nor preceded by `extern`), up to its
/// `;`, naming one of `templates` followed by `<...>`, in the tokens of
/// `source` (whose bytes are `text`) as `tu` read it; and the macros that
/// write such instantiations.
///
/// # Safety
/// `tu` must be a live translation unit, not disposed of before this returns.
pub(super) unsafe fn instantiations(
    tu: CXTranslationUnit,
    source: &Path,
    text: &[u8],
    templates: &BTreeSet<String>,
) -> Found {
    let Ok(c_name) = CString::new(source.as_os_str().as_bytes()) else {
        return Found::default();
    };
    // SAFETY: `tu` is live (the contract above); the name outlives the call.
    let file = unsafe { clang_getFile(tu, c_name.as_ptr()) };
    if file.is_null() {
        return Found::default();
    }
    // SAFETY: offsets within the file of the live unit.
    let range = unsafe {
        clang_getRange(
            clang_getLocationForOffset(tu, file, 0),
            clang_getLocationForOffset(tu, file, text.len() as u32),
        )
    };
    let mut tokens: *mut CXToken = ptr::null_mut();
    let mut count = 0u32;
    // SAFETY: the range belongs to the live unit; libclang writes both outputs.
    unsafe { clang_tokenize(tu, range, &mut tokens, &mut count) };
    if tokens.is_null() {
        return Found::default();
    }
    // SAFETY: libclang returned `count` tokens at `tokens`.
    let slice = unsafe { std::slice::from_raw_parts(tokens, count as usize) };
    let toks: Vec<(String, u32, usize)> = slice
        .iter()
        .map(|t| {
            // SAFETY: each token belongs to the live unit.
            let (spelled, extent) =
                unsafe { (clang_getTokenSpelling(tu, *t), clang_getTokenExtent(tu, *t)) };
            let mut f: CXFile = ptr::null_mut();
            let (mut line, mut column, mut offset) = (0u32, 0u32, 0u32);
            // SAFETY: as above; libclang writes the outputs.
            unsafe {
                clang_getFileLocation(
                    clang_getRangeEnd(extent),
                    &mut f,
                    &mut line,
                    &mut column,
                    &mut offset,
                );
            }
            (take_string(spelled), line, offset as usize)
        })
        .collect();
    // SAFETY: the tokens came from `clang_tokenize` on this unit.
    unsafe { clang_disposeTokens(tu, tokens, count) };
    let mut found = Found::default();
    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    // The last line of the macro definition being read: its tokens are no
    // instantiations of their own.
    let mut in_define = 0;
    for (i, (word, line, _)) in toks.iter().enumerate() {
        if word == "define" && i > 0 && toks[i - 1].0 == "#" {
            in_define = last_line(*line, &lines);
            if let Some(name) = instantiating_macro(&toks[i + 1..], in_define, templates) {
                found.macros.push((name, *line));
            }
            continue;
        }
        if *line <= in_define || !starts_instantiation(&toks, i) {
            continue;
        }
        let Some(semi) = toks[i..].iter().position(|(t, _, _)| t == ";") else {
            continue;
        };
        let body = &toks[i + 1..i + semi];
        if let Some(text) = instantiated_name(body, templates) {
            found.instantiations.push(Instantiation {
                text,
                line: *line,
                end: toks[i + semi].2,
            });
        }
    }
    found
}

/// Whether token `i` opens an explicit instantiation: `template` not
/// followed by `<` (a template's own head) nor preceded by `extern` (an
/// instantiation declared elsewhere).
fn starts_instantiation(toks: &[(String, u32, usize)], i: usize) -> bool {
    toks[i].0 == "template"
        && toks.get(i + 1).is_some_and(|(next, _, _)| next != "<")
        && (i == 0 || toks[i - 1].0 != "extern")
}

/// The last line of a macro definition that starts on `line` (1-based): it
/// runs on while a line ends with `\`.
fn last_line(line: u32, lines: &[&[u8]]) -> u32 {
    let mut last = line;
    while lines
        .get((last as usize).saturating_sub(1))
        .is_some_and(|l| l.trim_ascii_end().ends_with(b"\\"))
    {
        last += 1;
    }
    last
}

/// The name of a macro (its tokens start at `after`, its definition ends on
/// line `last`) when its body writes an explicit instantiation of a kernel
/// template.
fn instantiating_macro(
    after: &[(String, u32, usize)],
    last: u32,
    templates: &BTreeSet<String>,
) -> Option<String> {
    let body: Vec<(String, u32, usize)> = after
        .iter()
        .take_while(|(_, l, _)| *l <= last)
        .cloned()
        .collect();
    let (name, rest) = body.split_first()?;
    let writes = (0..rest.len()).any(|i| {
        starts_instantiation(rest, i) && instantiated_name(&rest[i + 1..], templates).is_some()
    });
    writes.then(|| name.0.clone())
}

/// `name<args>` (with any `ns::` before it) of the first token naming a
/// kernel template followed by `<`, up to the matching `>`.
fn instantiated_name(
    body: &[(String, u32, usize)],
    templates: &BTreeSet<String>,
) -> Option<String> {
    let at = (0..body.len().saturating_sub(1))
        .find(|&k| templates.contains(&body[k].0) && body[k + 1].0 == "<")?;
    let mut first = at;
    while first >= 2 && body[first - 1].0 == "::" {
        first -= 2;
    }
    if first >= 1 && body[first - 1].0 == "::" {
        first -= 1; // `::name`
    }
    let mut depth = 0i32;
    for (k, (t, _, _)) in body.iter().enumerate().skip(at + 1) {
        depth += match t.as_str() {
            "<" => 1,
            ">" => -1,
            ">>" => -2,
            _ => 0,
        };
        if depth <= 0 {
            return Some(join_tokens(
                body[first..=k].iter().map(|(t, _, _)| t.as_str()),
            ));
        }
    }
    None
}

/// Tokens as C++ reads them: a space only between two words.
fn join_tokens<'a>(tokens: impl Iterator<Item = &'a str>) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c == '_' || c.is_ascii_alphanumeric());
    let mut out = String::new();
    for token in tokens {
        if word(out.chars().last()) && word(token.chars().next()) {
            out.push(' ');
        }
        out.push_str(token);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<(String, u32, usize)> {
        text.split(' ').map(|t| (t.to_string(), 1, 0)).collect()
    }

    #[test]
    fn the_instantiated_name_is_the_template_id_with_its_scope() {
        let templates = BTreeSet::from(["scale".to_string()]);
        let name = |text: &str| instantiated_name(&tokens(text), &templates);
        assert_eq!(
            name("__global__ void scale < float > ( const float * , float * )").as_deref(),
            Some("scale<float>")
        );
        assert_eq!(
            name("void ns :: scale < unsigned int , 4 > ( )").as_deref(),
            Some("ns::scale<unsigned int,4>")
        );
        assert_eq!(
            name("void scale < Pair < int , int >> ( )").as_deref(),
            Some("scale<Pair<int,int>>")
        );
        assert_eq!(
            name("void other < float > ( )"),
            None,
            "not a kernel template"
        );
        assert_eq!(name("void scale < float"), None, "unterminated");
    }

    #[test]
    fn a_macro_writing_instantiations_is_found_across_continued_lines() {
        let templates = BTreeSet::from(["scale".to_string()]);
        let text = "#define INST(T) \\\n  template __global__ void scale<T>(T *);\nINST(float)\n";
        let lines: Vec<&[u8]> = text.as_bytes().split(|b| *b == b'\n').collect();
        let toks = |pairs: &[(&str, u32)]| -> Vec<(String, u32, usize)> {
            pairs.iter().map(|(t, l)| (t.to_string(), *l, 0)).collect()
        };
        let after = toks(&[
            ("INST", 1),
            ("(", 1),
            ("T", 1),
            (")", 1),
            ("template", 2),
            ("__global__", 2),
            ("void", 2),
            ("scale", 2),
            ("<", 2),
            ("T", 2),
            (">", 2),
            ("(", 2),
            ("T", 2),
            ("*", 2),
            (")", 2),
            (";", 2),
            ("INST", 3),
            ("(", 3),
            ("float", 3),
            (")", 3),
        ]);
        assert_eq!(last_line(1, &lines), 2);
        assert_eq!(
            instantiating_macro(&after, 2, &templates).as_deref(),
            Some("INST")
        );
        let other = BTreeSet::from(["other".to_string()]);
        assert_eq!(
            instantiating_macro(&after, 2, &other),
            None,
            "not a kernel template"
        );
        // Without the continuation the body is line 1 alone.
        let flat: Vec<&[u8]> = vec![b"#define INST(T)", b"template void scale<T>(T *);"];
        assert_eq!(last_line(1, &flat), 1);
        assert_eq!(instantiating_macro(&after, 1, &templates), None);
    }
}
