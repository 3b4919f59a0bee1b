//! The tree the tidy rules read: every `.rs` file under the source roots,
//! parsed once, placed in its crate's module tree (a library, `main.rs`
//! and each `bin/` target are crates of their own), and scanned for
//! `unsafe`, for the paths it names and for the names its `use` items bring
//! in (which `graph.rs` follows to the module that defines them).

use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::{GENERATED_MARKERS, SOURCE_ROOTS};

/// One source file: its workspace path (`/`-separated), text and syntax, and
/// where it sits: its crate (the library's `src/` folder, or the path of a
/// binary's root) and module path (None outside `src/`).
pub(crate) struct SourceFile {
    pub(crate) path: String,
    pub(crate) text: String,
    pub(crate) syntax: Result<syn::File, syn::Error>,
    pub(crate) module: Option<(String, Vec<String>)>,
}

impl SourceFile {
    pub(crate) fn generated(&self) -> bool {
        let head = self.text.lines().take(5);
        head.into_iter()
            .any(|l| GENERATED_MARKERS.iter().any(|m| l.contains(m)))
    }
}

pub(crate) fn load(root: &Path) -> Vec<SourceFile> {
    let mut paths = Vec::new();
    for top in SOURCE_ROOTS {
        collect_rs(&root.join(top), &mut paths);
    }
    paths.sort();
    let load = |file: PathBuf| {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let rel = file.strip_prefix(root).expect("walked under the root");
        let path = rel
            .iter()
            .map(|c| c.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let module = module_of(root, &path);
        SourceFile {
            syntax: syn::parse_file(&text),
            path,
            text,
            module,
        }
    };
    paths.into_iter().map(load).collect()
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a readable folder entry").path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() && name != "target" && !name.starts_with('.') {
            collect_rs(&path, out);
        } else if path.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The crate and module path of a file: `src/a/b.rs` and `src/a/b/mod.rs`
/// are `a::b` of the library `src`; `src/lib.rs` is its root. A binary is a
/// crate of its own: `src/main.rs` (`src` itself where there is no
/// library), `src/bin/x.rs`, and `src/bin/x/main.rs` with its modules
/// `src/bin/x/a.rs` (crate `src/bin/x`).
fn module_of(root: &Path, path: &str) -> Option<(String, Vec<String>)> {
    let segs: Vec<&str> = path.split('/').collect();
    let src = (0..segs.len()).rev().find(|&k| {
        segs[k] == "src" && root.join(segs[..k].join("/")).join("Cargo.toml").is_file()
    })?;
    let src_dir = segs[..=src].join("/");
    let mut module: Vec<String> = segs[src + 1..]
        .iter()
        .map(|s| s.trim_end_matches(".rs").to_owned())
        .collect();
    let mut krate = src_dir.clone();
    if module.first().is_some_and(|m| m == "bin") {
        match module.len() {
            1 => return None,
            2 => return Some((path.to_owned(), Vec::new())),
            _ => {
                krate = format!("{src_dir}/bin/{}", module[1]);
                module.drain(..2);
                if module == ["main"] {
                    module.clear();
                }
            }
        }
    } else if module == ["main"] && root.join(&src_dir).join("lib.rs").is_file() {
        return Some((path.to_owned(), Vec::new()));
    }
    if module.last().is_some_and(|m| m == "mod")
        || (module.len() == 1 && ["lib", "main"].contains(&module[0].as_str()))
    {
        module.pop();
    }
    Some((krate, module))
}

/// `**` matches any number of folders, `*` any part of one name.
fn glob(pattern: &str, path: &str) -> bool {
    fn name(p: &str, s: &str) -> bool {
        match p.split_once('*') {
            None => p == s,
            Some((pre, post)) => {
                s.len() >= pre.len() + post.len() && s.starts_with(pre) && s.ends_with(post)
            }
        }
    }
    fn segs(p: &[&str], s: &[&str]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((&"**", rest)) => (0..=s.len()).any(|i| segs(rest, &s[i..])),
            Some((first, rest)) => s
                .split_first()
                .is_some_and(|(h, t)| name(first, h) && segs(rest, t)),
        }
    }
    segs(
        &pattern.split('/').collect::<Vec<_>>(),
        &path.split('/').collect::<Vec<_>>(),
    )
}

/// Whether `path` matches one of the (glob, reason) entries of a table.
pub(crate) fn listed(table: &[(&str, &str)], path: &str) -> bool {
    table.iter().any(|(pattern, _)| glob(pattern, path))
}

pub(crate) fn matches_any(patterns: &[&str], path: &str) -> bool {
    patterns.iter().any(|p| glob(p, path))
}

/// A path a file names. Anchored at `crate`, `self` or `super`, `resolved`
/// is the path from the crate root (empty: the root itself); otherwise it
/// is relative to `from`, whose child module or `use` name it may start
/// with (else it names another crate, a type or a local item).
pub(crate) struct Reference {
    pub(crate) line: usize,
    pub(crate) written: String,
    /// The module it is written in (inline modules included).
    pub(crate) from: Vec<String>,
    pub(crate) anchored: bool,
    pub(crate) resolved: Vec<String>,
}

/// A name a `use` item brings into module `module`: `name` stands for
/// `target` (a [`Reference`], resolved as one). Glob imports bring no name.
pub(crate) struct UseName {
    pub(crate) module: Vec<String>,
    pub(crate) name: String,
    pub(crate) target: Reference,
}

pub(crate) struct Scan {
    module: Vec<String>,
    pub(crate) unsafe_sites: Vec<(usize, &'static str)>,
    pub(crate) references: Vec<Reference>,
    pub(crate) use_names: Vec<UseName>,
    /// Inline `mod x { .. }` blocks, as module paths.
    pub(crate) inline_modules: Vec<Vec<String>>,
    /// The inline modules under `#[cfg(test)]`.
    pub(crate) test_modules: Vec<Vec<String>>,
}

pub(crate) fn line(span: Span) -> usize {
    span.start().line
}

impl Scan {
    pub(crate) fn of(file: &SourceFile) -> Option<Scan> {
        let syntax = file.syntax.as_ref().ok()?;
        let module = file
            .module
            .as_ref()
            .map(|(_, m)| m.clone())
            .unwrap_or_default();
        let mut scan = Scan {
            module,
            unsafe_sites: Vec::new(),
            references: Vec::new(),
            use_names: Vec::new(),
            inline_modules: Vec::new(),
            test_modules: Vec::new(),
        };
        scan.visit_file(syntax);
        Some(scan)
    }

    fn unsafe_at(&mut self, span: Span, what: &'static str) {
        self.unsafe_sites.push((line(span), what));
    }

    /// A path as written here: anchored ones resolved from this module
    /// (`None` when `super` climbs past the root), others kept relative.
    fn path_from_here(&self, segs: &[String], line: usize) -> Option<Reference> {
        let (mut resolved, mut rest) = match segs.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &segs[1..]),
            Some("self" | "super") => (self.module.clone(), segs),
            Some(_) => (self.module.clone(), segs),
            None => return None,
        };
        let anchored = segs[0] == "crate" || segs[0] == "self" || segs[0] == "super";
        while let Some((first, tail)) = rest.split_first().filter(|_| anchored) {
            match first.as_str() {
                "self" => {}
                "super" if resolved.pop().is_some() => {}
                "super" => return None,
                _ => break,
            }
            rest = tail;
        }
        resolved.extend_from_slice(rest);
        Some(Reference {
            line,
            written: segs.join("::"),
            from: self.module.clone(),
            anchored,
            resolved,
        })
    }

    /// Records a path this file names.
    fn reference(&mut self, segs: &[String], line: usize) {
        if let Some(r) = self.path_from_here(segs, line) {
            self.references.push(r);
        }
    }

    /// Macro bodies are tokens to syn: find `unsafe` and `crate::a::b` in them.
    fn scan_tokens(&mut self, stream: TokenStream) {
        let tokens: Vec<TokenTree> = stream.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(id) if id == "unsafe" => {
                    self.unsafe_at(id.span(), "unsafe in a macro")
                }
                TokenTree::Ident(id) => {
                    let mut segs = vec![id.to_string()];
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(next)),
                    ) = (tokens.get(i + 1), tokens.get(i + 2), tokens.get(i + 3))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segs.push(next.to_string());
                        i += 3;
                    }
                    if segs.len() > 1 {
                        self.reference(&segs, line(id.span()));
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// One leaf of a `use` tree: its full path, the name it brings in (`None`
/// for a glob; `a::{self}` brings `a`, `a::B as C` brings `C`) and line.
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
    line: usize,
}

fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    let mut leaf = |ident: &syn::Ident, name: &syn::Ident, prefix: &[String]| {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        let name = match name == "self" {
            true => prefix.last().cloned(),
            false => Some(name.to_string()),
        };
        out.push(UseLeaf {
            path,
            name,
            line: line(ident.span()),
        });
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => leaf(&n.ident, &n.ident, prefix),
        syn::UseTree::Rename(r) => leaf(&r.ident, &r.rename, prefix),
        syn::UseTree::Glob(g) => out.push(UseLeaf {
            path: prefix.clone(),
            name: None,
            line: line(g.star_token.spans[0]),
        }),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_leaves(t, prefix, out)),
    }
}

impl<'ast> Visit<'ast> for Scan {
    fn visit_expr_unsafe(&mut self, i: &'ast syn::ExprUnsafe) {
        self.unsafe_at(i.unsafe_token.span, "unsafe block");
        visit::visit_expr_unsafe(self, i);
    }
    fn visit_signature(&mut self, i: &'ast syn::Signature) {
        if let syn::Safety::Unsafe(token) = &i.safety {
            self.unsafe_at(token.span, "unsafe fn");
        }
        visit::visit_signature(self, i);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(token) = &i.unsafety {
            self.unsafe_at(token.span, "unsafe impl");
        }
        visit::visit_item_impl(self, i);
    }
    fn visit_item_trait(&mut self, i: &'ast syn::ItemTrait) {
        if let Some(token) = &i.unsafety {
            self.unsafe_at(token.span, "unsafe trait");
        }
        visit::visit_item_trait(self, i);
    }
    fn visit_item_foreign_mod(&mut self, i: &'ast syn::ItemForeignMod) {
        self.unsafe_at(i.abi.extern_token.span, "extern block");
        visit::visit_item_foreign_mod(self, i);
    }
    fn visit_attribute(&mut self, i: &'ast syn::Attribute) {
        if i.path().is_ident("unsafe") {
            self.unsafe_at(i.pound_token.spans[0], "unsafe attribute");
        }
        visit::visit_attribute(self, i);
    }
    fn visit_item_mod(&mut self, i: &'ast syn::ItemMod) {
        let inline = i.content.is_some();
        if inline {
            self.module.push(i.ident.to_string());
            self.inline_modules.push(self.module.clone());
            let cfg_test = i.attrs.iter().any(|a| {
                a.path().is_ident("cfg")
                    && a.parse_args::<syn::Ident>().is_ok_and(|arg| arg == "test")
            });
            if cfg_test {
                self.test_modules.push(self.module.clone());
            }
        }
        visit::visit_item_mod(self, i);
        if inline {
            self.module.pop();
        }
    }
    fn visit_macro(&mut self, i: &'ast syn::Macro) {
        self.scan_tokens(i.tokens.clone());
        visit::visit_macro(self, i);
    }
    fn visit_item_use(&mut self, i: &'ast syn::ItemUse) {
        if i.leading_colon.is_some() {
            return; // `use ::name`: another crate
        }
        let mut leaves = Vec::new();
        use_leaves(&i.tree, &mut Vec::new(), &mut leaves);
        for leaf in leaves.into_iter().filter(|l| !l.path.is_empty()) {
            self.reference(&leaf.path, leaf.line);
            let (Some(name), Some(target)) =
                (leaf.name, self.path_from_here(&leaf.path, leaf.line))
            else {
                continue;
            };
            self.use_names.push(UseName {
                module: self.module.clone(),
                name,
                target,
            });
        }
    }
    fn visit_path(&mut self, i: &'ast syn::Path) {
        if i.leading_colon.is_none() && i.segments.len() > 1 {
            let segs: Vec<String> = i.segments.iter().map(|s| s.ident.to_string()).collect();
            self.reference(&segs, line(i.segments[0].ident.span()));
        }
        visit::visit_path(self, i);
    }
    /// `pub(crate)` and `pub(super)` name no item.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}
}
