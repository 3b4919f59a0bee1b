//! The libclang walk of one `.cu` source, for kernels declared by their
//! definitions: every `__global__` function the source itself spells (not an
//! included header's), after the preprocessor (so a macro family counts
//! kernel by kernel), `extern "C"` ones by name and C++ ones by their
//! mangled names; and every explicit instantiation of a `__global__`
//! function template.
//!
//! libclang does not visit explicit instantiations (`template __global__
//! void scale<float>(...);` leaves no cursor), so they are found in the
//! file's tokens and resolved by a second parse of the same file with
//! `static auto *const kiln_codegen_ref_N = &scale<float>;` written on the
//! instantiation's own line, in its own scope: the reference names the
//! specialization clang made, whose mangled name and parameter types
//! libclang then gives. An instantiation written by a macro leaves no
//! `template` token in the file and is not found.

// clang-sys's constants keep C's names, matched as patterns here.
#![allow(non_upper_case_globals)]

use std::collections::BTreeSet;
use std::ffi::{c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr;

use clang_sys::*;

use super::scan::{annotations, file_name, size_of_type, spelling, take_string, GLOBAL_MARK};
use super::source_templates::instantiations;
use super::source_types::{map_type, CType};
use super::KERNEL_PREFIX;

/// The main file of each parse: the prelude, then the source.
const MAIN: &str = "kiln_codegen_source.cu";

/// The prefix of the references the second parse adds.
const REF_PREFIX: &str = "kiln_codegen_ref_";

/// A kernel a source defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Defined {
    /// The symbol in the image: the C name, or the mangled one.
    pub(super) symbol: String,
    /// What the Rust marker is named after: the C name, `ns::name`, or
    /// `scale<float>` for an instantiation.
    pub(super) source_name: String,
    /// The file that defines it (or instantiates it) and the line there.
    pub(super) file: PathBuf,
    pub(super) line: u32,
    /// `(name, type)` of each parameter; clang's size of each.
    pub(super) params: Vec<(String, CType)>,
    pub(super) sizes: Vec<Option<u64>>,
}

/// What one source gives.
#[derive(Debug, Default)]
pub(super) struct Walked {
    pub(super) kernels: Vec<Defined>,
    pub(super) warnings: Vec<String>,
    /// Every file the parse read outside system headers.
    pub(super) files: BTreeSet<PathBuf>,
}

/// A parsed translation unit, disposed of on drop.
struct Tu {
    index: CXIndex,
    tu: CXTranslationUnit,
}

impl Drop for Tu {
    fn drop(&mut self) {
        // SAFETY: both were created by `parse` and no cursor outlives `self`.
        unsafe {
            clang_disposeTranslationUnit(self.tu);
            clang_disposeIndex(self.index);
        }
    }
}

/// Parses `source` (absolute) behind `prelude` with `args`, `replaced`
/// standing for the source's text when given. Without `replaced`, an error
/// in a file outside the system headers is `Err(file:line: message)`; with
/// it, the only errors are the added references' (the first parse had
/// none), and a reference that did not resolve is a warning of the caller's.
fn parse(
    source: &Path,
    prelude: &str,
    replaced: Option<&[u8]>,
    args: &[String],
) -> Result<Tu, String> {
    let cstr = |bytes: &[u8]| {
        CString::new(bytes).map_err(|_| format!("{} holds a NUL byte", source.display()))
    };
    let main_text = format!("{prelude}{}", super::include_line(source)?);
    let source_name = cstr(source.as_os_str().as_bytes())?;
    let replaced = replaced.map(cstr).transpose()?;
    let extra: Vec<(&CString, &CString)> = replaced.iter().map(|t| (&source_name, t)).collect();
    let tu = parse_text(
        MAIN,
        &main_text,
        &extra,
        args,
        &source.display().to_string(),
    )?;
    if replaced.is_some() {
        return Ok(tu);
    }
    first_error(&tu).map_or(Ok(tu), Err)
}

/// Parses `main_text` as the file `main_name`, `extra` (name, text)
/// standing for files on disk; `shown` names the input in an error.
fn parse_text(
    main_name: &str,
    main_text: &str,
    extra: &[(&CString, &CString)],
    args: &[String],
    shown: &str,
) -> Result<Tu, String> {
    let cstr = |bytes: &[u8]| CString::new(bytes).map_err(|_| format!("{shown} holds a NUL byte"));
    let main_name = cstr(main_name.as_bytes())?;
    let main_text = cstr(main_text.as_bytes())?;
    let c_args: Vec<CString> = args
        .iter()
        .map(|a| cstr(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let arg_ptrs: Vec<*const std::os::raw::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    let mut unsaved = vec![CXUnsavedFile {
        Filename: main_name.as_ptr(),
        Contents: main_text.as_ptr(),
        Length: main_text.as_bytes().len() as std::os::raw::c_ulong,
    }];
    unsaved.extend(extra.iter().map(|(name, text)| CXUnsavedFile {
        Filename: name.as_ptr(),
        Contents: text.as_ptr(),
        Length: text.as_bytes().len() as std::os::raw::c_ulong,
    }));
    // SAFETY: libclang is loaded (`generate` loads it first); 0, 0 asks for
    // no PCH exclusion and no diagnostics printing.
    let index = unsafe { clang_createIndex(0, 0) };
    if index.is_null() {
        return Err("libclang could not create an index".into());
    }
    let mut tu: CXTranslationUnit = ptr::null_mut();
    // SAFETY: every pointer is valid for the call: the strings and the
    // unsaved files outlive it, the counts match the arrays, `tu` is written.
    let code = unsafe {
        clang_parseTranslationUnit2(
            index,
            main_name.as_ptr(),
            arg_ptrs.as_ptr(),
            arg_ptrs.len() as i32,
            unsaved.as_mut_ptr(),
            unsaved.len() as u32,
            CXTranslationUnit_SkipFunctionBodies,
            &mut tu,
        )
    };
    if code != CXError_Success || tu.is_null() {
        // SAFETY: the index was created above and is not used again.
        unsafe { clang_disposeIndex(index) };
        if code == CXError_Crashed {
            return Err(super::child::crashed(shown));
        }
        return Err(format!(
            "{shown}: libclang could not parse it (error {code})"
        ));
    }
    Ok(Tu { index, tu })
}

/// Parses the headers' wrapper (`main_text`, named `main_name`) as bindgen
/// will: `Err(file:line: message)` of the first error outside the system
/// headers, as clang gives it.
pub(super) fn check_text(
    main_name: &str,
    main_text: &str,
    args: &[String],
    shown: &str,
) -> Result<(), String> {
    let tu = parse_text(main_name, main_text, &[], args, shown)?;
    first_error(&tu).map_or(Ok(()), Err)
}

/// Parses `source` as [`walk`] does: `Err(file:line: message)` of its
/// first error.
pub(super) fn check_source(source: &Path, prelude: &str, args: &[String]) -> Result<(), String> {
    parse(source, prelude, None, args).map(drop)
}

/// The first error outside the system headers, as `file:line: message`.
/// Errors inside them are clang reading CUDA's headers without nvcc (the
/// cooperative groups, say) and do not touch the declarations read here.
fn first_error(tu: &Tu) -> Option<String> {
    // SAFETY: `tu` is live for the whole function.
    let count = unsafe { clang_getNumDiagnostics(tu.tu) };
    for i in 0..count {
        // SAFETY: `i` is below the count; the diagnostic is disposed below.
        let diagnostic = unsafe { clang_getDiagnostic(tu.tu, i) };
        // SAFETY: a live diagnostic of the live unit, and its location.
        let (severity, location, system) = unsafe {
            let location = clang_getDiagnosticLocation(diagnostic);
            (
                clang_getDiagnosticSeverity(diagnostic),
                location,
                clang_Location_isInSystemHeader(location) != 0,
            )
        };
        let mut found = None;
        if severity >= CXDiagnostic_Error && !system {
            let mut file: CXFile = ptr::null_mut();
            let (mut line, mut column, mut offset) = (0u32, 0u32, 0u32);
            // SAFETY: as above; libclang writes the outputs.
            unsafe {
                clang_getFileLocation(location, &mut file, &mut line, &mut column, &mut offset);
            }
            // SAFETY: as above.
            let message = take_string(unsafe { clang_getDiagnosticSpelling(diagnostic) });
            let place = file_name(file).unwrap_or_else(|| MAIN.to_string());
            found = Some(format!("{place}:{line}: {message}"));
        }
        // SAFETY: created above and not used again.
        unsafe { clang_disposeDiagnostic(diagnostic) };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Walks `source`: the kernels it defines, its explicit instantiations of
/// kernel templates, the files it read.
pub(super) fn walk(source: &Path, prelude: &str, args: &[String]) -> Result<Walked, String> {
    let tu = parse(source, prelude, None, args)?;
    let mut state = State {
        source: source.to_path_buf(),
        ..State::default()
    };
    visit_all(&tu, &mut state);
    let mut walked = Walked {
        files: included_files(&tu),
        ..Walked::default()
    };
    walked.kernels = std::mem::take(&mut state.kernels);
    walked.warnings = std::mem::take(&mut state.warnings);
    if state.templates.is_empty() {
        return Ok(walked);
    }
    // Explicit instantiations of the kernel templates, from the tokens of
    // the source (other files' instantiations would need their own pass).
    let text = std::fs::read(source).map_err(|e| format!("{}: {e}", source.display()))?;
    // SAFETY: `tu` is live until the `drop` below.
    let found = unsafe { instantiations(tu.tu, source, &text, &state.templates) };
    drop(tu);
    for (name, line) in &found.macros {
        walked.warnings.push(format!(
            "{}:{line}: macro `{name}` writes explicit instantiations of a kernel template, which codegen does not read from a macro, so they get no typed launch; write them out in the source, or launch them by name",
            source.display()
        ));
    }
    let found = found.instantiations;
    if found.is_empty() {
        return Ok(walked);
    }
    let mut edited = text.clone();
    for (i, inst) in found.iter().enumerate().rev() {
        let reference = format!(" static auto *const {REF_PREFIX}{i} = &{};", inst.text);
        edited.splice(inst.end..inst.end, reference.bytes());
    }
    let tu = parse(source, prelude, Some(&edited), args).map_err(|e| {
        format!("{e} (while resolving the explicit instantiations of kernel templates)")
    })?;
    let mut state = State {
        resolving: true,
        ..State::default()
    };
    visit_all(&tu, &mut state);
    for (i, inst) in found.iter().enumerate() {
        match state.references.iter().find(|(n, _)| *n == i) {
            Some((_, kernel)) => walked.kernels.push(Defined {
                source_name: inst.text.clone(),
                file: source.to_path_buf(),
                line: inst.line,
                ..kernel.clone()
            }),
            None => walked.warnings.push(format!(
                "{}:{}: explicit instantiation `{}` of a kernel template could not be resolved, so it gets no typed launch; launch it by name",
                source.display(),
                inst.line,
                inst.text
            )),
        }
    }
    Ok(walked)
}

#[derive(Default)]
struct State {
    /// The source walked: only what it spells itself is read (see
    /// [`function`]).
    source: PathBuf,
    kernels: Vec<Defined>,
    warnings: Vec<String>,
    /// Names (last component) of the `__global__` templates seen.
    templates: BTreeSet<String>,
    /// In the second parse: the referenced specialization of each reference.
    resolving: bool,
    references: Vec<(usize, Defined)>,
}

fn visit_all(tu: &Tu, state: &mut State) {
    // SAFETY: `tu` is live.
    let root = unsafe { clang_getTranslationUnitCursor(tu.tu) };
    // SAFETY: the visitor casts the client data back to `&mut State`, which
    // outlives the call and is not touched elsewhere meanwhile.
    unsafe { clang_visitChildren(root, visit, ptr::from_mut(state).cast::<c_void>()) };
}

extern "C" fn visit(cursor: CXCursor, _: CXCursor, data: CXClientData) -> CXChildVisitResult {
    // SAFETY: `data` is the `&mut State` that `visit_all` passed.
    let state = unsafe { &mut *data.cast::<State>() };
    // SAFETY: cursors handed to the visitor belong to the live unit.
    let (kind, location) =
        unsafe { (clang_getCursorKind(cursor), clang_getCursorLocation(cursor)) };
    // SAFETY: as above.
    if unsafe { clang_Location_isInSystemHeader(location) } != 0 {
        return CXChildVisit_Continue;
    }
    match kind {
        CXCursor_Namespace | CXCursor_LinkageSpec => CXChildVisit_Recurse,
        CXCursor_VarDecl if state.resolving => {
            let name = spelling(cursor);
            if let Some(i) = name.strip_prefix(REF_PREFIX).and_then(|i| i.parse().ok()) {
                if let Some(function) = referenced_function(cursor) {
                    let (file, line) = place(location);
                    let defined = defined(function, mangling(function), String::new(), file, line);
                    state.references.push((i, defined));
                }
            }
            CXChildVisit_Continue
        }
        CXCursor_FunctionDecl if !state.resolving => {
            function(cursor, location, state);
            CXChildVisit_Continue
        }
        CXCursor_FunctionTemplate if !state.resolving => {
            if annotations(cursor).iter().any(|m| m == GLOBAL_MARK) {
                state.templates.insert(spelling(cursor));
            }
            CXChildVisit_Continue
        }
        _ => CXChildVisit_Continue,
    }
}

/// A kernel the source itself declares (a definition, or a prototype of
/// one it defines further down): libclang cannot tell a definition whose
/// body it skipped from a prototype, so prototypes in included headers are
/// left out by where they are, and the prototypes a source writes of its
/// own kernels are one kernel with their definitions (C linkage allows no
/// other parameters).
fn function(cursor: CXCursor, location: CXSourceLocation, state: &mut State) {
    let (file, line) = place(location);
    if file != state.source {
        return;
    }
    let name = spelling(cursor);
    // KILN_KERNEL(...) { ... } under KILN_BINDGEN: `kiln_kernel__NAME`, C
    // linkage under nvcc.
    if let Some(kernel) = name.strip_prefix(KERNEL_PREFIX) {
        let d = defined(cursor, kernel.to_string(), kernel.to_string(), file, line);
        state.kernels.push(d);
        return;
    }
    if !annotations(cursor).iter().any(|m| m == GLOBAL_MARK) {
        return;
    }
    // SAFETY: as above.
    if unsafe { clang_getCursorLinkage(cursor) } != CXLinkage_External {
        state.warnings.push(format!(
            "{}:{line}: kernel `{name}` has internal linkage (static or in an anonymous namespace), so its symbol in the image is not its name and it gets no typed launch; launch it from host code or give it external linkage",
            file.display()
        ));
        return;
    }
    let symbol = mangling(cursor);
    let source_name = if symbol == name {
        name
    } else {
        qualified(cursor)
    };
    let d = defined(cursor, symbol, source_name, file, line);
    state.kernels.push(d);
}

fn defined(
    function: CXCursor,
    symbol: String,
    source_name: String,
    file: PathBuf,
    line: u32,
) -> Defined {
    // SAFETY: a function cursor of the live unit; a negative count reads as none.
    let count = u32::try_from(unsafe { clang_Cursor_getNumArguments(function) }).unwrap_or(0);
    let mut params = Vec::new();
    let mut sizes = Vec::new();
    for i in 0..count {
        // SAFETY: `i` is below the argument count of a live cursor.
        let arg = unsafe { clang_Cursor_getArgument(function, i) };
        // SAFETY: as above.
        let ty = unsafe { clang_getCursorType(arg) };
        let name = match spelling(arg) {
            n if n.is_empty() => format!("arg{i}"),
            n => n,
        };
        params.push((name, map_type(ty)));
        sizes.push(size_of_type(ty));
    }
    Defined {
        symbol,
        source_name,
        file,
        line,
        params,
        sizes,
    }
}

/// The function a reference's initializer names (`&scale<float>`).
fn referenced_function(var: CXCursor) -> Option<CXCursor> {
    extern "C" fn find(child: CXCursor, _: CXCursor, data: CXClientData) -> CXChildVisitResult {
        // SAFETY: `data` is the `Option<CXCursor>` `referenced_function` passed.
        let found = unsafe { &mut *data.cast::<Option<CXCursor>>() };
        // SAFETY: the child belongs to the live unit.
        if unsafe { clang_getCursorKind(child) } == CXCursor_DeclRefExpr {
            // SAFETY: as above.
            let target = unsafe { clang_getCursorReferenced(child) };
            // SAFETY: as above.
            if unsafe { clang_getCursorKind(target) } == CXCursor_FunctionDecl {
                *found = Some(target);
                return CXChildVisit_Break;
            }
        }
        CXChildVisit_Recurse
    }
    let mut found: Option<CXCursor> = None;
    // SAFETY: the cursor belongs to the live unit; `found` outlives the call.
    unsafe { clang_visitChildren(var, find, ptr::from_mut(&mut found).cast::<c_void>()) };
    found
}

fn mangling(cursor: CXCursor) -> String {
    // SAFETY: a cursor of the live unit.
    take_string(unsafe { clang_Cursor_getMangling(cursor) })
}

/// `ns::name` for a function in namespaces.
fn qualified(cursor: CXCursor) -> String {
    let mut parts = vec![spelling(cursor)];
    // SAFETY: cursors of the live unit.
    let mut parent = unsafe { clang_getCursorSemanticParent(cursor) };
    // SAFETY: as above.
    while unsafe { clang_getCursorKind(parent) } == CXCursor_Namespace {
        parts.push(spelling(parent));
        // SAFETY: as above.
        parent = unsafe { clang_getCursorSemanticParent(parent) };
    }
    parts.reverse();
    parts.join("::")
}

fn place(location: CXSourceLocation) -> (PathBuf, u32) {
    let mut file: CXFile = ptr::null_mut();
    let (mut line, mut column, mut offset) = (0u32, 0u32, 0u32);
    // SAFETY: the location belongs to a live unit; libclang writes the outputs.
    unsafe { clang_getFileLocation(location, &mut file, &mut line, &mut column, &mut offset) };
    (PathBuf::from(file_name(file).unwrap_or_default()), line)
}

/// Every file the unit read, but the system headers and the prelude.
fn included_files(tu: &Tu) -> BTreeSet<PathBuf> {
    struct Seen {
        tu: CXTranslationUnit,
        files: BTreeSet<PathBuf>,
    }
    extern "C" fn each(file: CXFile, _: *mut CXSourceLocation, _: u32, data: CXClientData) {
        // SAFETY: `data` is the `Seen` `included_files` passed.
        let seen = unsafe { &mut *data.cast::<Seen>() };
        // SAFETY: the file belongs to the live unit; offset 0 is in it.
        let system = unsafe {
            clang_Location_isInSystemHeader(clang_getLocationForOffset(seen.tu, file, 0))
        } != 0;
        if let Some(name) = file_name(file).filter(|n| n != MAIN && !system) {
            seen.files.insert(PathBuf::from(name));
        }
    }
    let mut seen = Seen {
        tu: tu.tu,
        files: BTreeSet::new(),
    };
    // SAFETY: `tu` is live; `seen` outlives the call.
    unsafe { clang_getInclusions(tu.tu, each, ptr::from_mut(&mut seen).cast::<c_void>()) };
    seen.files
}
