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

/// `template` not followed by `<` (nor preceded by `extern`), up to its
/// `;`, naming one of `templates` followed by `<...>`, in the tokens of
/// `source` (whose bytes are `text`) as `tu` read it.
///
/// # Safety
/// `tu` must be a live translation unit, not disposed of before this returns.
pub(super) unsafe fn instantiations(
    tu: CXTranslationUnit,
    source: &Path,
    text: &[u8],
    templates: &BTreeSet<String>,
) -> Vec<Instantiation> {
    let Ok(c_name) = CString::new(source.as_os_str().as_bytes()) else {
        return Vec::new();
    };
    // SAFETY: `tu` is live (the contract above); the name outlives the call.
    let file = unsafe { clang_getFile(tu, c_name.as_ptr()) };
    if file.is_null() {
        return Vec::new();
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
        return Vec::new();
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
    let mut found = Vec::new();
    for (i, (word, line, _)) in toks.iter().enumerate() {
        let starts = word == "template"
            && toks.get(i + 1).is_some_and(|(next, _, _)| next != "<")
            && (i == 0 || toks[i - 1].0 != "extern");
        if !starts {
            continue;
        }
        let Some(semi) = toks[i..].iter().position(|(t, _, _)| t == ";") else {
            continue;
        };
        let body = &toks[i + 1..i + semi];
        if let Some(text) = instantiated_name(body, templates) {
            found.push(Instantiation {
                text,
                line: *line,
                end: toks[i + semi].2,
            });
        }
    }
    found
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
}
