//! What bindgen does not say about a header, read with libclang from the same
//! translation unit: for every prototype in the include dir, the header whose
//! text declares it after macro expansion, whether it was written with
//! `KILN_HOST_API` (directly or through a macro whose definition uses it), and
//! clang's size of each kernel parameter; and the size of every top-level enum.
//!
//! All of it comes from source locations, so a kernel family written by a
//! user's macro (`ELEMENTWISE(float, f32)` expanding to `KILN_KERNEL(...)`) is
//! attributed to the header that invokes the macro.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use clang_sys::{
    clang_Cursor_getArgument, clang_Cursor_getNumArguments, clang_Cursor_getStorageClass,
    clang_Cursor_isFunctionInlined, clang_Type_getAlignOf, clang_Type_getSizeOf, clang_createIndex,
    clang_disposeIndex, clang_disposeString, clang_disposeTokens, clang_disposeTranslationUnit,
    clang_getCString, clang_getCanonicalType, clang_getCursorExtent, clang_getCursorKind,
    clang_getCursorLocation, clang_getCursorSpelling, clang_getCursorType,
    clang_getExpansionLocation, clang_getFileLocation, clang_getFileName, clang_getRangeStart,
    clang_getTokenKind, clang_getTokenSpelling, clang_getTranslationUnitCursor,
    clang_getTypedefDeclUnderlyingType, clang_parseTranslationUnit2, clang_tokenize,
    clang_visitChildren, CXChildVisitResult, CXChildVisit_Continue, CXChildVisit_Recurse,
    CXClientData, CXCursor, CXCursor_AnnotateAttr, CXCursor_EnumDecl, CXCursor_FunctionDecl,
    CXCursor_LinkageSpec, CXCursor_MacroDefinition, CXCursor_MacroExpansion, CXCursor_TypedefDecl,
    CXError_Success, CXFile, CXSourceLocation, CXString, CXToken, CXToken_Identifier,
    CXTranslationUnit, CXTranslationUnit_DetailedPreprocessingRecord,
    CXTranslationUnit_SkipFunctionBodies, CXType, CXType_Enum, CXUnsavedFile, CX_SC_Static,
};

/// The macro that marks a host function of a static-library module.
pub(super) const HOST_API_MACRO: &str = "KILN_HOST_API";

/// How a prototype in the include dir was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// `KILN_KERNEL(...)`: the name carries the kernel prefix.
    Kernel,
    /// Written with `KILN_HOST_API`.
    HostApi,
    /// A `__device__` function (not callable from the host; no binding).
    Device,
    /// A `__global__` function declared without `KILN_KERNEL`.
    Global,
    /// None of these: a plain prototype.
    Plain,
}

/// The marks [`PRELUDE`](super::PRELUDE) gives `__device__` and `__global__`.
pub(super) const DEVICE_MARK: &str = "kiln_codegen:device";
pub(super) const GLOBAL_MARK: &str = "kiln_codegen:global";

/// A function prototype declared in a header of the include dir.
#[derive(Debug, Clone)]
pub(super) struct Prototype {
    /// The C name (`kiln_kernel__affine_f32` for a kernel).
    pub(super) name: String,
    /// The declaring header, relative to the include dir, `/`-separated.
    pub(super) header: String,
    /// Its line there (of the macro invocation, when a macro wrote it).
    pub(super) line: u32,
    /// How it was declared.
    pub(super) role: Role,
    /// clang's `sizeof` of each parameter type, in order.
    pub(super) param_sizes: Vec<Option<u64>>,
}

/// clang's size and alignment of an enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) size: u64,
    pub(super) align: u64,
}

/// What the walk found.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// Every prototype in the include dir, in source order.
    pub(super) prototypes: Vec<Prototype>,
    /// Every enum (by tag or typedef name) declared at the top level.
    pub(super) enums: HashMap<String, Layout>,
}

impl Scan {
    /// The prototype named `name`.
    pub(super) fn prototype(&self, name: &str) -> Option<&Prototype> {
        self.prototypes.iter().find(|p| p.name == name)
    }
}

/// Loads libclang for this thread (bindgen then uses the same library) and
/// returns its path.
pub(super) fn load_libclang() -> Result<PathBuf, String> {
    if !clang_sys::is_loaded() {
        clang_sys::load()?;
    }
    clang_sys::get_library()
        .map(|lib| lib.path().to_path_buf())
        .ok_or_else(|| "libclang is not loaded".to_string())
}

/// Parses `contents` (a header named `file_name` that includes the headers)
/// with `args` and walks it. libclang must be loaded ([`load_libclang`]).
pub(super) fn scan(
    file_name: &str,
    contents: &str,
    args: &[String],
    include_dir: &Path,
) -> Result<Scan, String> {
    let c_file = CString::new(file_name).map_err(|e| e.to_string())?;
    let c_contents = CString::new(contents).map_err(|e| e.to_string())?;
    let c_args: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let arg_ptrs: Vec<*const std::os::raw::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    let mut unsaved = CXUnsavedFile {
        Filename: c_file.as_ptr(),
        Contents: c_contents.as_ptr(),
        Length: contents.len() as std::os::raw::c_ulong,
    };
    // SAFETY: libclang is loaded (the caller's contract); 0, 0 asks for no
    // PCH exclusion and no diagnostics printing.
    let index = unsafe { clang_createIndex(0, 0) };
    if index.is_null() {
        return Err("libclang could not create an index".into());
    }
    let mut tu: CXTranslationUnit = ptr::null_mut();
    // SAFETY: every pointer is valid for the call: the strings and the
    // unsaved file outlive it, the counts match the arrays, `tu` is written.
    let code = unsafe {
        clang_parseTranslationUnit2(
            index,
            c_file.as_ptr(),
            arg_ptrs.as_ptr(),
            arg_ptrs.len() as i32,
            &mut unsaved,
            1,
            CXTranslationUnit_DetailedPreprocessingRecord | CXTranslationUnit_SkipFunctionBodies,
            &mut tu,
        )
    };
    if code != CXError_Success || tu.is_null() {
        // SAFETY: the index was created above and is not used again.
        unsafe { clang_disposeIndex(index) };
        return Err(format!(
            "libclang could not parse the headers (error {code})"
        ));
    }
    let include_dir = include_dir
        .canonicalize()
        .unwrap_or_else(|_| include_dir.to_path_buf());
    let mut walk = Walk {
        tu,
        include_dir,
        files: HashMap::new(),
        expansions: HashMap::new(),
        definitions: HashMap::new(),
        functions: Vec::new(),
        scan: Scan::default(),
    };
    // SAFETY: `tu` is a live translation unit.
    let root = unsafe { clang_getTranslationUnitCursor(tu) };
    // SAFETY: the visitor casts the client data back to `&mut Walk`, which
    // outlives the call and is not touched elsewhere meanwhile.
    unsafe { clang_visitChildren(root, visit, ptr::from_mut(&mut walk).cast::<c_void>()) };
    let scan = walk.finish();
    // SAFETY: both were created above; no cursor or token outlives this point.
    unsafe {
        clang_disposeTranslationUnit(tu);
        clang_disposeIndex(index);
    }
    Ok(scan)
}

/// A function seen by the visitor, before macros are resolved.
struct SeenFunction {
    prototype: Prototype,
    /// Where its declaration starts, as `(file, offset)` of the expansion.
    start: Option<(String, u32)>,
}

struct Walk {
    tu: CXTranslationUnit,
    include_dir: PathBuf,
    /// clang's file name -> the header relative to the include dir, if inside.
    files: HashMap<String, Option<String>>,
    /// `(file, offset)` -> the macro expanded there (include dir only).
    expansions: HashMap<(String, u32), String>,
    /// Macro name -> the identifiers of its definition.
    definitions: HashMap<String, Vec<String>>,
    functions: Vec<SeenFunction>,
    scan: Scan,
}

extern "C" fn visit(cursor: CXCursor, parent: CXCursor, data: CXClientData) -> CXChildVisitResult {
    // SAFETY: `data` is the `&mut Walk` that `scan` passed, alive for the walk.
    let walk = unsafe { &mut *data.cast::<Walk>() };
    walk.visit(cursor, parent)
}

impl Walk {
    fn visit(&mut self, cursor: CXCursor, parent: CXCursor) -> CXChildVisitResult {
        // SAFETY: cursors handed to the visitor belong to the live unit.
        let kind = unsafe { clang_getCursorKind(cursor) };
        if kind == CXCursor_LinkageSpec {
            return CXChildVisit_Recurse;
        }
        if kind == CXCursor_MacroDefinition {
            let name = spelling(cursor);
            if !self.definitions.contains_key(&name) {
                let body = self.identifiers(cursor);
                self.definitions.insert(name, body);
            }
            return CXChildVisit_Continue;
        }
        if kind == CXCursor_EnumDecl || kind == CXCursor_TypedefDecl {
            // Wherever declared: bindgen binds an enum from a toolkit header
            // when a kernel in the include dir takes it.
            self.enum_layout(cursor, kind);
            return CXChildVisit_Continue;
        }
        let Some((file, offset, line)) = file_location(
            // SAFETY: as above.
            unsafe { clang_getCursorLocation(cursor) },
        ) else {
            return CXChildVisit_Continue;
        };
        let Some(header) = self.header(&file) else {
            return CXChildVisit_Continue;
        };
        if kind == CXCursor_MacroExpansion {
            self.expansions.insert((file, offset), spelling(cursor));
        } else if kind == CXCursor_FunctionDecl {
            self.function(cursor, parent, header, line);
        }
        CXChildVisit_Continue
    }

    fn function(&mut self, cursor: CXCursor, parent: CXCursor, header: String, line: u32) {
        // SAFETY: cursors handed to the visitor belong to the live unit.
        let (inlined, storage) = unsafe {
            (
                clang_Cursor_isFunctionInlined(cursor),
                clang_Cursor_getStorageClass(cursor),
            )
        };
        if inlined != 0 || storage == CX_SC_Static {
            return; // bindgen binds no inline or static function
        }
        let name = spelling(cursor);
        // `KILN_HOST_API` opens the linkage spec in C++; without one the
        // declaration itself starts at the macro.
        // SAFETY: as above.
        let declared_by = if unsafe { clang_getCursorKind(parent) } == CXCursor_LinkageSpec {
            parent
        } else {
            cursor
        };
        // SAFETY: as above.
        let start =
            expansion_location(unsafe { clang_getRangeStart(clang_getCursorExtent(declared_by)) });
        // SAFETY: as above; a negative count (not a function) reads as none.
        let count = u32::try_from(unsafe { clang_Cursor_getNumArguments(cursor) }).unwrap_or(0);
        let param_sizes = (0..count)
            .map(|i| {
                // SAFETY: `i` is below the argument count of a live cursor.
                let ty = unsafe { clang_getCursorType(clang_Cursor_getArgument(cursor, i)) };
                size_of_type(ty)
            })
            .collect();
        let marks = annotations(cursor);
        let role = if name.starts_with(super::KERNEL_PREFIX) {
            Role::Kernel
        } else if marks.iter().any(|m| m == GLOBAL_MARK) {
            Role::Global
        } else if marks.iter().any(|m| m == DEVICE_MARK) {
            Role::Device
        } else {
            Role::Plain // settled in `finish`, once every macro is known
        };
        self.functions.push(SeenFunction {
            prototype: Prototype {
                name,
                header,
                line,
                role,
                param_sizes,
            },
            start,
        });
    }

    fn enum_layout(&mut self, cursor: CXCursor, kind: clang_sys::CXCursorKind) {
        // SAFETY: cursors handed to the visitor belong to the live unit.
        let ty = unsafe {
            if kind == CXCursor_TypedefDecl {
                clang_getCanonicalType(clang_getTypedefDeclUnderlyingType(cursor))
            } else {
                clang_getCursorType(cursor)
            }
        };
        if ty.kind != CXType_Enum {
            return;
        }
        let name = spelling(cursor);
        // Anonymous enums spell as `enum (unnamed at ...)`; their typedef
        // carries the name bindgen uses.
        if name.is_empty() || !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()) {
            return;
        }
        // SAFETY: `ty` belongs to the live unit.
        let align = unsafe { clang_Type_getAlignOf(ty) };
        if let (Some(size), Ok(align)) = (size_of_type(ty), u64::try_from(align)) {
            self.scan.enums.insert(name, Layout { size, align });
        }
    }

    /// The header relative to the include dir, when `file` is inside it.
    fn header(&mut self, file: &str) -> Option<String> {
        if let Some(known) = self.files.get(file) {
            return known.clone();
        }
        let relative = Path::new(file)
            .canonicalize()
            .ok()
            .and_then(|path| {
                path.strip_prefix(&self.include_dir)
                    .ok()
                    .map(Path::to_path_buf)
            })
            .map(|rel| {
                rel.components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/")
            });
        self.files.insert(file.to_string(), relative.clone());
        relative
    }

    /// The identifiers in a macro definition's tokens.
    fn identifiers(&self, cursor: CXCursor) -> Vec<String> {
        let mut tokens: *mut CXToken = ptr::null_mut();
        let mut count = 0u32;
        // SAFETY: the cursor and unit are live; libclang writes both outputs.
        unsafe {
            clang_tokenize(
                self.tu,
                clang_getCursorExtent(cursor),
                &mut tokens,
                &mut count,
            )
        };
        if tokens.is_null() {
            return Vec::new();
        }
        // SAFETY: libclang returned `count` tokens at `tokens`.
        let slice = unsafe { std::slice::from_raw_parts(tokens, count as usize) };
        let names = slice
            .iter()
            // SAFETY: each token belongs to the live unit.
            .filter(|t| unsafe { clang_getTokenKind(**t) } == CXToken_Identifier)
            // SAFETY: as above.
            .map(|t| take_string(unsafe { clang_getTokenSpelling(self.tu, *t) }))
            .collect();
        // SAFETY: the tokens came from `clang_tokenize` on this unit and are
        // not used after this.
        unsafe { clang_disposeTokens(self.tu, tokens, count) };
        names
    }

    /// Resolves host APIs: a declaration starting at an expansion of
    /// `KILN_HOST_API`, or of a macro whose definition (transitively) uses it.
    fn finish(mut self) -> Scan {
        let mut host_macros: HashSet<String> = HashSet::from([HOST_API_MACRO.to_string()]);
        loop {
            let before = host_macros.len();
            for (name, body) in &self.definitions {
                if body.iter().skip(1).any(|id| host_macros.contains(id)) {
                    host_macros.insert(name.clone());
                }
            }
            if host_macros.len() == before {
                break;
            }
        }
        for seen in self.functions {
            let mut prototype = seen.prototype;
            let by_macro = seen.start.and_then(|start| self.expansions.get(&start));
            if prototype.role == Role::Plain && by_macro.is_some_and(|m| host_macros.contains(m)) {
                prototype.role = Role::HostApi;
            }
            self.scan.prototypes.push(prototype);
        }
        self.scan
    }
}

/// The `annotate("...")` attributes of a declaration.
pub(super) fn annotations(cursor: CXCursor) -> Vec<String> {
    extern "C" fn collect(child: CXCursor, _: CXCursor, data: CXClientData) -> CXChildVisitResult {
        // SAFETY: `data` is the `Vec` that `annotations` passed, alive for the walk.
        let found = unsafe { &mut *data.cast::<Vec<String>>() };
        // SAFETY: the child belongs to the live unit.
        if unsafe { clang_getCursorKind(child) } == CXCursor_AnnotateAttr {
            found.push(spelling(child));
        }
        CXChildVisit_Continue
    }
    let mut found: Vec<String> = Vec::new();
    // SAFETY: the cursor belongs to the live unit; `found` outlives the call
    // and is touched only by the visitor meanwhile.
    unsafe { clang_visitChildren(cursor, collect, ptr::from_mut(&mut found).cast::<c_void>()) };
    found
}

pub(super) fn size_of_type(ty: CXType) -> Option<u64> {
    // SAFETY: `ty` belongs to a live unit; libclang returns a negative error
    // code for incomplete or dependent types.
    u64::try_from(unsafe { clang_Type_getSizeOf(ty) }).ok()
}

pub(super) fn spelling(cursor: CXCursor) -> String {
    // SAFETY: the cursor belongs to a live unit.
    take_string(unsafe { clang_getCursorSpelling(cursor) })
}

/// Copies and frees a libclang string.
pub(super) fn take_string(s: CXString) -> String {
    // SAFETY: `s` is a string libclang just returned; it is read once, then
    // disposed of and never used again.
    unsafe {
        let text = clang_getCString(s);
        let owned = if text.is_null() {
            String::new()
        } else {
            CStr::from_ptr(text).to_string_lossy().into_owned()
        };
        clang_disposeString(s);
        owned
    }
}

/// `(file, offset, line)` of a location, mapped out of macros to where the
/// macro was invoked or its argument written.
pub(super) fn file_location(location: CXSourceLocation) -> Option<(String, u32, u32)> {
    let mut file: CXFile = ptr::null_mut();
    let (mut line, mut column, mut offset) = (0u32, 0u32, 0u32);
    // SAFETY: the location belongs to a live unit; libclang writes the outputs.
    unsafe { clang_getFileLocation(location, &mut file, &mut line, &mut column, &mut offset) };
    file_name(file).map(|name| (name, offset, line))
}

/// `(file, offset)` of the outermost macro invocation covering a location.
fn expansion_location(location: CXSourceLocation) -> Option<(String, u32)> {
    let mut file: CXFile = ptr::null_mut();
    let (mut line, mut column, mut offset) = (0u32, 0u32, 0u32);
    // SAFETY: as in `file_location`.
    unsafe { clang_getExpansionLocation(location, &mut file, &mut line, &mut column, &mut offset) };
    file_name(file).map(|name| (name, offset))
}

pub(super) fn file_name(file: CXFile) -> Option<String> {
    if file.is_null() {
        return None;
    }
    // SAFETY: a non-null file handle of a live unit.
    Some(take_string(unsafe { clang_getFileName(file) }))
}
