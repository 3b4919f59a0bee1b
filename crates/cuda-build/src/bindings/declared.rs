//! What a source declares, as text to fingerprint without a C++ parser: its
//! tokens after line splices, with comments and whitespace gone and the
//! bodies of plain functions (`f(...) { ... }`) emptied, so that a comment
//! or a kernel-body edit leaves the sources' fingerprint as it was while a
//! signature, a struct, a macro's parameters or a preprocessor line changes
//! it.
//!
//! Conservative where it cannot tell: a body is emptied only when the `{`
//! follows the `)` of a declarator whose name is an identifier (not
//! `__align__(8)`, `__attribute__((...))`, `alignas(...)`, a control
//! statement), the declaration has no `constexpr`, `consteval` or `auto`
//! (a body that can size an array or deduce a type), and the braces close
//! with no preprocessor line between (a `#if` inside a body keeps the body);
//! anything else is kept, so a change there still counts as a change.

/// Tokens: words and numbers, literals, one punctuation character each,
/// `\n#` where a preprocessor line starts and `\n` where it ends.
fn tokens(text: &str) -> Vec<String> {
    // Phase 2 of translation: a backslash-newline joins two lines.
    let text = text.replace("\r\n", "\n").replace("\\\n", "");
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    let mut in_directive = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            if in_directive {
                out.push("\n".into());
                in_directive = false;
            }
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
            continue;
        }
        let at_line_start = std::mem::replace(&mut line_start, false);
        if c == '#' && at_line_start {
            out.push("\n#".into());
            in_directive = true;
            i += 1;
            continue;
        }
        let start = i;
        if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
        } else if c.is_alphanumeric() || c == '_' || (c == '.' && next_is_digit(&chars, i)) {
            while i < chars.len() {
                let d = chars[i];
                let exponent_sign = (d == '+' || d == '-')
                    && chars[start].is_ascii_digit()
                    && matches!(chars[i - 1], 'e' | 'E' | 'p' | 'P');
                if d.is_alphanumeric() || d == '_' || d == '.' || exponent_sign {
                    i += 1;
                } else {
                    break;
                }
            }
        } else {
            i += 1;
        }
        out.push(chars[start..i.min(chars.len())].iter().collect());
    }
    if in_directive {
        out.push("\n".into());
    }
    out
}

fn next_is_digit(chars: &[char], i: usize) -> bool {
    chars.get(i + 1).is_some_and(char::is_ascii_digit)
}

/// Names before a `(` whose `) {` is no function body.
const NOT_DECLARATORS: [&str; 14] = [
    "__align__",
    "__attribute__",
    "alignas",
    "__declspec",
    "decltype",
    "sizeof",
    "alignof",
    "static_assert",
    "if",
    "while",
    "for",
    "switch",
    "catch",
    "requires",
];

/// Words that make a body part of the declaration.
const BODY_MATTERS: [&str; 3] = ["constexpr", "consteval", "auto"];

/// The declarations of `text` ([module docs](self)), tokens joined by one
/// space.
pub(crate) fn declared(text: &str) -> String {
    let tokens = tokens(text);
    let mut out: Vec<&str> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "{" && is_plain_function(&tokens, i) {
            if let Some(end) = closing_brace(&tokens, i) {
                out.extend(["{", "}"]);
                i = end + 1;
                continue;
            }
        }
        out.push(&tokens[i]);
        i += 1;
    }
    out.join(" ")
}

/// Whether the `{` at `open` starts the body of a function whose body does
/// not matter to its declaration.
fn is_plain_function(tokens: &[String], open: usize) -> bool {
    if open == 0 || tokens[open - 1] != ")" {
        return false;
    }
    let mut depth = 0usize;
    let mut j = open - 1;
    loop {
        match tokens[j].as_str() {
            ")" => depth += 1,
            "(" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            "\n" | "\n#" | ";" | "{" | "}" => return false,
            _ => {}
        }
        if j == 0 {
            return false;
        }
        j -= 1;
    }
    let Some(name) = j.checked_sub(1).map(|k| tokens[k].as_str()) else {
        return false;
    };
    let identifier = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_');
    if !identifier || NOT_DECLARATORS.contains(&name) {
        return false;
    }
    // The rest of the declaration, back to where it starts.
    !tokens[..j]
        .iter()
        .rev()
        .take_while(|t| !matches!(t.as_str(), ";" | "{" | "}" | "\n" | "\n#"))
        .any(|t| BODY_MATTERS.contains(&t.as_str()))
}

/// The index of the `}` closing the `{` at `open`, unless a preprocessor
/// line starts or ends before it.
fn closing_brace(tokens: &[String], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, token) in tokens.iter().enumerate().skip(open) {
        match token.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            "\n" | "\n#" => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = r#"#include "dtype.cuh"
#define UNARY(T, NAME) \
    extern "C" __global__ void NAME(const size_t n, const T *inp, T *out) { \
        for (size_t i = 0; i < n; ++i) { out[i] = inp[i]; } \
    }
UNARY(float, ucopy_f32)
struct __align__(8) Pair { float a; int b; };
typedef struct __attribute__((aligned(16))) { float x; } Quad;
constexpr int width() { return 4; }
struct Row { float v[width()]; };
template <typename T>
__global__ void scale(T *x, T a, size_t n) {
    const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { x[i] *= a; }
}
__global__ void guarded(float *x) {
#if __CUDA_ARCH__ >= 800
    x[0] = 1.0f;
#endif
}
"#;

    fn same(edited: &str) -> bool {
        declared(KERNEL) == declared(edited)
    }

    #[test]
    fn comments_whitespace_and_plain_bodies_do_not_count() {
        assert!(same(
            &KERNEL.replace("struct __align__", "// a note\nstruct  __align__")
        ));
        assert!(same(
            &KERNEL.replace("x[i] *= a;", "x[i] = x[i] * a; /* edited */")
        ));
        assert!(same(
            &KERNEL.replace("out[i] = inp[i];", "out[i] = -inp[i];")
        ));
        assert!(same(&KERNEL.replace('\n', "\r\n")));
        assert!(same(&format!(
            "/* a licence\n over lines */\n{KERNEL}\n// the end"
        )));
    }

    #[test]
    fn what_the_bindings_declare_counts() {
        for (from, to) in [
            ("T a, size_t n", "T a, int n"),
            ("const T *inp, T *out", "const T *inp, float *out"),
            ("UNARY(float, ucopy_f32)", "UNARY(double, ucopy_f32)"),
            ("float a; int b;", "float a; double b;"),
            ("float x; } Quad", "double x; } Quad"),
            ("return 4;", "return 8;"),
            (">= 800", ">= 890"),
            // Conservative: a body with a preprocessor line in it is kept.
            ("x[0] = 1.0f;", "x[0] = 2.0f;"),
            ("#include \"dtype.cuh\"", "#include \"other.cuh\""),
        ] {
            assert!(KERNEL.contains(from), "{from}");
            assert!(!same(&KERNEL.replace(from, to)), "{from} -> {to}");
        }
    }

    #[test]
    fn every_cut_of_a_source_is_read_without_a_panic() {
        let text = format!("{KERNEL}\"esc\\\"aped\" 'x' 1.5e+3f .5 R\"(raw)\" /* open");
        let chars: Vec<char> = text.chars().collect();
        for end in 0..=chars.len() {
            let cut: String = chars[..end].iter().collect();
            let _ = declared(&cut);
            let from: String = chars[end..].iter().collect();
            let _ = declared(&from);
        }
    }

    #[test]
    fn unbalanced_or_odd_text_keeps_every_token() {
        for text in ["f() {", "f() { #", "}", "/* open", "\"open", "(", ") {"] {
            let tokens = tokens(text);
            assert_eq!(declared(text), tokens.join(" "), "{text:?}");
        }
    }
}
