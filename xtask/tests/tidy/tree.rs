//! The tree the tidy rules read: every `.rs` file under the source roots,
//! parsed once, placed in its crate's module tree, and scanned for `unsafe`
//! and for the paths it names from `crate`, `self` or `super`.

use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::visit::{self, Visit};

use crate::{GENERATED_MARKERS, SOURCE_ROOTS};

/// One source file: its workspace path (`/`-separated), text and syntax, and
/// where it sits in its crate's module tree (None outside `src/` or in `bin/`).
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

/// The crate `src/` folder and module path of a file: `src/a/b.rs` and
/// `src/a/b/mod.rs` are `a::b`; `src/lib.rs` and `src/main.rs` the root.
fn module_of(root: &Path, path: &str) -> Option<(String, Vec<String>)> {
    let segs: Vec<&str> = path.split('/').collect();
    let src = (0..segs.len()).rev().find(|&k| {
        segs[k] == "src" && root.join(segs[..k].join("/")).join("Cargo.toml").is_file()
    })?;
    let mut module: Vec<String> = segs[src + 1..]
        .iter()
        .map(|s| s.trim_end_matches(".rs").to_owned())
        .collect();
    if module.first().is_some_and(|m| m == "bin") {
        return None;
    }
    if module.last().is_some_and(|m| m == "mod")
        || (module.len() == 1 && ["lib", "main"].contains(&module[0].as_str()))
    {
        module.pop();
    }
    Some((segs[..=src].join("/"), module))
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

/// A path anchored at `crate`, `self` or `super`, resolved to a path from the
/// crate root (`resolved` empty: the root itself).
pub(crate) struct Reference {
    pub(crate) line: usize,
    pub(crate) written: String,
    pub(crate) resolved: Vec<String>,
}

pub(crate) struct Scan {
    module: Vec<String>,
    pub(crate) unsafe_sites: Vec<(usize, &'static str)>,
    pub(crate) references: Vec<Reference>,
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
        };
        scan.visit_file(syntax);
        Some(scan)
    }

    fn unsafe_at(&mut self, span: Span, what: &'static str) {
        self.unsafe_sites.push((line(span), what));
    }

    /// Records a path that starts at `crate`, `self` or `super`, resolved
    /// from the module it is written in; other paths name no module of ours.
    fn reference(&mut self, segs: &[String], line: usize) {
        let (mut resolved, mut rest) = match segs.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &segs[1..]),
            Some("self" | "super") => (self.module.clone(), segs),
            _ => return,
        };
        while let Some((first, tail)) = rest.split_first() {
            match first.as_str() {
                "self" => {}
                "super" if resolved.pop().is_some() => {}
                "super" => return,
                _ => break,
            }
            rest = tail;
        }
        resolved.extend_from_slice(rest);
        self.references.push(Reference {
            line,
            written: segs.join("::"),
            resolved,
        });
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
                TokenTree::Ident(id) if id == "crate" || id == "self" || id == "super" => {
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

/// Each leaf of a `use` tree as its full path and line (`a::{self}` is `a`).
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    let mut leaf = |ident: &syn::Ident, prefix: &[String]| {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        out.push((path, line(ident.span())));
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => leaf(&n.ident, prefix),
        syn::UseTree::Rename(r) => leaf(&r.ident, prefix),
        syn::UseTree::Glob(g) => out.push((prefix.clone(), line(g.star_token.spans[0]))),
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
        let mut leaves = Vec::new();
        use_leaves(&i.tree, &mut Vec::new(), &mut leaves);
        for (path, line) in leaves.into_iter().filter(|(path, _)| !path.is_empty()) {
            self.reference(&path, line);
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
