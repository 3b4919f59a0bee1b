//! PTX as the audit needs it: the ISA `.version`, and per `.entry` / `.func`
//! its `.param` layout, the functions it calls and its f64 instructions.
//! Also splits `cuobjdump --dump-ptx` output into one text per virtual arch.

use std::fmt;

use serde::Serialize;

/// A PTX ISA version, `9.0` (also in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PtxIsa {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

impl PtxIsa {
    /// Parses `9.0`.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once('.')?;
        Some(Self {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

impl Serialize for PtxIsa {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for PtxIsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One PTX text from a fat binary, with the virtual arch it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PtxSection {
    /// `compute_90`.
    pub(crate) arch: String,
    /// The archive member it came from (`lib.a:reduce.o`), empty for a
    /// fat binary.
    pub(crate) member: String,
    /// The PTX itself.
    pub(crate) text: String,
}

/// Splits `cuobjdump --dump-ptx` output (which also prints an empty header
/// for every ELF, and `member ...:` lines for archives) into PTX texts.
pub(crate) fn split_ptx_dump(dump: &str) -> Vec<PtxSection> {
    let mut sections = Vec::new();
    let mut current: Option<PtxSection> = None;
    let mut member = String::new();
    let mut in_header = false;
    for line in dump.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("Fatbin ") && trimmed.ends_with(" code:") {
            sections.extend(current.take());
            if trimmed == "Fatbin ptx code:" {
                current = Some(PtxSection {
                    arch: String::new(),
                    member: member.clone(),
                    text: String::new(),
                });
            }
            in_header = true;
            continue;
        }
        if let Some(name) = member_line(trimmed) {
            sections.extend(current.take());
            member = name.to_string();
            continue;
        }
        let Some(section) = current.as_mut() else {
            continue;
        };
        if in_header {
            if let Some(arch) = trimmed.strip_prefix("arch = ") {
                section.arch = arch.replacen("sm_", "compute_", 1);
            }
            // The header ends at the first PTX directive.
            if !trimmed.starts_with('.') {
                continue;
            }
            in_header = false;
        }
        section.text.push_str(line);
        section.text.push('\n');
    }
    sections.extend(current);
    sections
}

/// The member's name in an archive's `member lib.a:reduce.o:` line
/// (cuobjdump prints one before each member's dump).
pub(crate) fn member_line(line: &str) -> Option<&str> {
    line.strip_prefix("member ")?.strip_suffix(':')
}

/// A parsed PTX module.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PtxModule {
    /// `.version`, if the text has one.
    pub(crate) version: Option<PtxIsa>,
    /// Every `.entry` and `.func` with a body, in text order.
    pub(crate) functions: Vec<PtxFunction>,
}

/// `.entry` (a kernel) or `.func` (a device function).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FunctionKind {
    Entry,
    Func,
}

/// One function of a PTX module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PtxFunction {
    pub(crate) name: String,
    pub(crate) kind: FunctionKind,
    /// The `.param` list (for a `.func`, its arguments, not its return value).
    pub(crate) params: Vec<PtxParam>,
    /// Direct call targets, in first-call order.
    pub(crate) calls: Vec<String>,
    /// Opcodes with a `.f64` type (`cvt.f64.f32`, `mul.f64`), deduplicated.
    pub(crate) f64_opcodes: Vec<String>,
}

/// A `.param`'s size and alignment in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PtxParam {
    pub(crate) size: usize,
    pub(crate) align: usize,
    /// The declaration as written, for messages.
    pub(crate) text: String,
}

impl PtxModule {
    /// The `.entry` named `name`.
    pub(crate) fn entry(&self, name: &str) -> Option<&PtxFunction> {
        self.functions
            .iter()
            .find(|f| f.kind == FunctionKind::Entry && f.name == name)
    }

    /// Names of the `.entry`s.
    pub(crate) fn entry_names(&self) -> impl Iterator<Item = &str> {
        self.functions
            .iter()
            .filter(|f| f.kind == FunctionKind::Entry)
            .map(|f| f.name.as_str())
    }

    /// The `.func`s reachable from `entry` through direct calls, in discovery
    /// order (the entry itself excluded).
    pub(crate) fn callees(&self, entry: &PtxFunction) -> Vec<&PtxFunction> {
        let mut found: Vec<&PtxFunction> = Vec::new();
        let mut queue: Vec<&str> = entry.calls.iter().map(String::as_str).collect();
        while let Some(name) = queue.pop() {
            let Some(func) = self.functions.iter().find(|f| f.name == name) else {
                continue; // declared `.extern` or a builtin: no body here
            };
            if func.kind == FunctionKind::Func && !found.iter().any(|f| f.name == name) {
                found.push(func);
                queue.extend(func.calls.iter().map(String::as_str));
            }
        }
        found
    }
}

/// Parses PTX text. Unknown top-level directives (`.global`, `.section`, ...)
/// are skipped; a `.param` that cannot be read is an error naming it.
pub(crate) fn parse_ptx(text: &str) -> Result<PtxModule, String> {
    let text = strip_comments(text);
    let mut module = PtxModule::default();
    // Newline-terminated directives carry no `;`; take them out first so that
    // statement splitting below sees only `;`-terminated statements.
    let mut body = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(v) = trimmed.strip_prefix(".version") {
            module.version = module.version.or(PtxIsa::parse(v));
        } else if [".target", ".address_size", ".file", ".loc"]
            .contains(&trimmed.split_whitespace().next().unwrap_or_default())
        {
            // `.loc 1 25 5` (but not `.local ...;`, which ends with `;`).
        } else {
            body.push_str(line);
            body.push('\n');
        }
    }
    let mut header = String::new();
    let mut chars = body.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            ';' => header.clear(),
            '{' => {
                let start = at + 1;
                let mut depth = 1;
                let mut end = body.len();
                for (i, c) in chars.by_ref() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(function) = function_header(&header)? {
                    module
                        .functions
                        .push(function_body(function, &body[start..end]));
                }
                header.clear();
            }
            _ => header.push(c),
        }
    }
    Ok(module)
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let line_comment = rest.find("//");
        let block_comment = rest.find("/*");
        match (line_comment, block_comment) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
                out.push(' ');
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out
}

/// The function a header before `{` declares, if it declares one.
fn function_header(header: &str) -> Result<Option<PtxFunction>, String> {
    let tokens_end = |s: &str| s.find(|c: char| c.is_whitespace() || c == '(');
    let (kind, rest) = if let Some(at) = find_word(header, ".entry") {
        (FunctionKind::Entry, &header[at + ".entry".len()..])
    } else if let Some(at) = find_word(header, ".func") {
        (FunctionKind::Func, &header[at + ".func".len()..])
    } else {
        return Ok(None);
    };
    let mut rest = rest.trim_start();
    if kind == FunctionKind::Func && rest.starts_with('(') {
        // The return value: `.func (.param .b32 func_retval0) name(...)`.
        rest = rest[matching_paren(rest)?..].trim_start();
    }
    let name_end = tokens_end(rest).unwrap_or(rest.len());
    let name = rest[..name_end].to_string();
    rest = rest[name_end..].trim_start();
    let mut params = Vec::new();
    if rest.starts_with('(') {
        let close = matching_paren(rest)?;
        for decl in rest[1..close - 1].split(',') {
            let decl = decl.split_whitespace().collect::<Vec<_>>().join(" ");
            if !decl.is_empty() {
                params.push(parse_param(&decl).map_err(|e| format!("{name}: {e}"))?);
            }
        }
    }
    Ok(Some(PtxFunction {
        name,
        kind,
        params,
        calls: Vec::new(),
        f64_opcodes: Vec::new(),
    }))
}

/// Byte index of `word` in `text` as a whole whitespace-separated token.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || c == '(');
        if boundary(before) && boundary(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The index just past the `)` matching the `(` that `text` starts with.
fn matching_paren(text: &str) -> Result<usize, String> {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
    }
    Err(format!("unbalanced parentheses in `{}`", text.trim()))
}

/// Size and alignment of one kernel or function parameter:
/// `.param .u32 n` is 4/4; `.param .u64 .ptr .global .align 4 p` is 8/8 (the
/// `.align` after `.ptr` is the pointee's); `.param .align 16 .b8 d[32]` is
/// 32/16.
pub(crate) fn parse_param(decl: &str) -> Result<PtxParam, String> {
    let mut tokens = decl.split_whitespace().peekable();
    if tokens.next() != Some(".param") {
        return Err(format!("`{decl}` is not a .param"));
    }
    let mut align = None;
    let mut size = None;
    let mut name = "";
    while let Some(token) = tokens.next() {
        match token {
            ".align" => {
                let n = tokens.next().and_then(|n| n.parse::<usize>().ok());
                // Before the type: the parameter's own alignment.
                if size.is_none() {
                    align = n;
                }
            }
            ".ptr" => {}
            t if t.starts_with('.') && size.is_none() => size = scalar_size(t),
            t if t.starts_with('.') => {} // the pointee's state space
            t => name = t,
        }
    }
    let element = size.ok_or_else(|| format!("no type in `{decl}`"))?;
    let count = match name.split_once('[') {
        Some((_, n)) => n
            .trim_end_matches(']')
            .parse::<usize>()
            .map_err(|_| format!("bad array length in `{decl}`"))?,
        None => 1,
    };
    Ok(PtxParam {
        size: element * count,
        align: align.unwrap_or(element),
        text: decl.to_string(),
    })
}

/// Bytes of a PTX fundamental type (`.u32`, `.b8`, `.f64`, `.pred`...).
fn scalar_size(ty: &str) -> Option<usize> {
    let bits: usize = ty
        .strip_prefix(".u")
        .or_else(|| ty.strip_prefix(".s"))
        .or_else(|| ty.strip_prefix(".b"))
        .or_else(|| ty.strip_prefix(".f"))?
        .parse()
        .ok()?;
    Some(bits / 8)
}

/// Fills in calls and f64 opcodes from a function body.
fn function_body(mut function: PtxFunction, body: &str) -> PtxFunction {
    for statement in body.split([';', '{', '}']) {
        let mut statement = statement.trim();
        // Labels (`$L__BB0_2:`) and guards (`@%p1`, `@!%p1`) come first.
        loop {
            let first = statement.split_whitespace().next().unwrap_or_default();
            if first.ends_with(':') || first.starts_with('@') {
                statement = statement[first.len()..].trim_start();
            } else {
                break;
            }
        }
        let Some(opcode) = statement.split_whitespace().next() else {
            continue;
        };
        if opcode.starts_with('.') {
            continue; // a directive: .reg, .shared, .param, .pragma
        }
        if opcode.split('.').skip(1).any(|t| t == "f64")
            && !function.f64_opcodes.iter().any(|o| o == opcode)
        {
            function.f64_opcodes.push(opcode.to_string());
        }
        if opcode == "call" || opcode.starts_with("call.") {
            if let Some(target) = call_target(statement[opcode.len()..].trim_start()) {
                if !function.calls.contains(&target) {
                    function.calls.push(target);
                }
            }
        }
    }
    function
}

/// `(retval0), name, (param0)` or `name, (param0)` -> `name`; `None` for an
/// indirect call through a register.
fn call_target(operands: &str) -> Option<String> {
    let mut rest = operands;
    if rest.starts_with('(') {
        rest = rest[matching_paren(rest).ok()?..].trim_start();
        rest = rest.strip_prefix(',')?.trim_start();
    }
    let target = rest.split([',', ' ', '\n', '\t']).next()?.trim();
    (!target.is_empty() && !target.starts_with('%')).then(|| target.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNELS: &str = r#"
//
// Generated by NVIDIA NVVM Compiler
.version 9.0
.target sm_90
.address_size 64

.global .align 4 .b8 table[8] = {1, 0, 0, 0, 2, 0, 0, 0};

.func  (.param .b64 func_retval0) half_d(
	.param .b64 half_d_param_0
)
{
	.reg .f64 	%fd<3>;
	ld.param.f64 	%fd1, [half_d_param_0];
	mul.f64 	%fd2, %fd1, 0d3FE0000000000000;
	st.param.f64 	[func_retval0], %fd2;
	ret;
}

.visible .entry scale(
	.param .u64 .ptr .global .align 4 scale_param_0,
	.param .align 16 .b8 scale_param_1[32],
	.param .u32 scale_param_2,
	.param .u8 scale_param_3
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<65>;
	.local .align 4 .b8 	__local_depot0[8];
	.loc	1 25 5
	cvt.f64.f32 %fd1, %f64;  /* a block comment; with a brace { */
	@%p1 bra 	$L__BB0_2;
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.f64 	[param0], %fd1;
	.param .b64 retval0;
	call.uni (retval0), 
	half_d, 
	(
	param0
	);
	} // callseq 0
$L__BB0_2:
	add.f32 	%f64, %f54, %f55;
	ret;
}

.visible .entry plain()
{
	ret;
}
"#;

    #[test]
    fn parses_version_entries_params_calls_and_f64() {
        let m = parse_ptx(KERNELS).unwrap();
        assert_eq!(m.version, Some(PtxIsa { major: 9, minor: 0 }));
        let names: Vec<_> = m
            .functions
            .iter()
            .map(|f| (f.kind, f.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (FunctionKind::Func, "half_d"),
                (FunctionKind::Entry, "scale"),
                (FunctionKind::Entry, "plain")
            ]
        );
        let scale = m.entry("scale").unwrap();
        let layout: Vec<_> = scale.params.iter().map(|p| (p.size, p.align)).collect();
        assert_eq!(layout, [(8, 8), (32, 16), (4, 4), (1, 1)]);
        assert_eq!(scale.calls, ["half_d"]);
        // `%f64` is a register name, not a type; `add.f32` is not flagged.
        assert_eq!(scale.f64_opcodes, ["cvt.f64.f32", "st.param.f64"]);
        assert_eq!(
            m.functions[0].f64_opcodes,
            ["ld.param.f64", "mul.f64", "st.param.f64"]
        );
        assert_eq!(m.functions[0].params.len(), 1);
        let callees: Vec<_> = m.callees(scale).iter().map(|f| f.name.as_str()).collect();
        assert_eq!(callees, ["half_d"]);
        assert!(m.entry("plain").unwrap().params.is_empty());
    }

    #[test]
    fn param_layouts() {
        let check = |decl: &str, expected: (usize, usize)| {
            let p = parse_param(decl).unwrap();
            assert_eq!((p.size, p.align), expected, "{decl}");
        };
        check(".param .u64 vector_add_param_0", (8, 8));
        check(".param .u64 .ptr .align 1 p", (8, 8));
        check(".param .u64 .ptr .shared .align 16 p", (8, 8));
        check(".param .u32 n", (4, 4));
        check(".param .f32 x", (4, 4));
        check(".param .u16 h", (2, 2));
        check(".param .align 16 .b8 desc[32]", (32, 16));
        check(".param .align 4 .b8 stats[12]", (12, 4));
        assert!(parse_param(".param x").is_err());
    }

    #[test]
    fn splits_a_ptx_dump_by_arch() {
        let dump = "
Fatbin elf code:
================
arch = sm_80
code version = [1,8]

Fatbin ptx code:
================
arch = sm_90
code version = [9,0]
host = linux
compressed
ptxasOptions =  --generate-line-info



.version 9.0
.target sm_90

.visible .entry k()
{
ret;
}

Fatbin elf code:
================
arch = sm_90
";
        let sections = split_ptx_dump(dump);
        assert_eq!(sections.len(), 1);
        assert_eq!(sections[0].arch, "compute_90");
        assert_eq!(sections[0].member, "");
        assert!(sections[0].text.starts_with(".version 9.0\n"));
        let m = parse_ptx(&sections[0].text).unwrap();
        assert_eq!(m.entry_names().collect::<Vec<_>>(), ["k"]);
    }
}
