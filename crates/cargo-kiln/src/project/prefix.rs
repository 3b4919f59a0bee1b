//! A crate's env prefix read from its build script's source, so `cargo kiln
//! build --arch` needs no hidden build to learn it: the string literal of
//! the one `.env_prefix("...")` call `build.rs` makes (cuda-build's default,
//! `KILN`, when it makes none but does name `KernelBuild`).

use std::path::Path;

use syn::visit::Visit;

/// The prefix `build_rs` (a build script's source) gives its kernel build;
/// `None` when it cannot be told from the source alone (no `KernelBuild`,
/// a prefix that is not a literal, or several).
pub(crate) fn from_build_script(build_rs: &Path) -> Option<String> {
    let text = std::fs::read_to_string(build_rs).ok()?;
    from_source(&text)
}

fn from_source(text: &str) -> Option<String> {
    let file = syn::parse_file(text).ok()?;
    let mut calls = Calls::default();
    calls.visit_file(&file);
    if !calls.names_kernel_build {
        return None;
    }
    match calls.prefixes.as_slice() {
        [] if !calls.computed => Some("KILN".to_string()),
        [one] if !calls.computed => Some(one.clone()),
        _ => None,
    }
}

/// What the visit found: every literal `env_prefix` argument, whether one
/// was computed, and whether `KernelBuild` is named at all.
#[derive(Default)]
struct Calls {
    prefixes: Vec<String>,
    computed: bool,
    names_kernel_build: bool,
}

impl<'ast> Visit<'ast> for Calls {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        if call.method == "env_prefix" {
            match call.args.first() {
                Some(syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                })) if call.args.len() == 1 => self.prefixes.push(s.value()),
                _ => self.computed = true,
            }
        }
        syn::visit::visit_expr_method_call(self, call);
    }

    fn visit_path_segment(&mut self, segment: &'ast syn::PathSegment) {
        if segment.ident == "KernelBuild" {
            self.names_kernel_build = true;
        }
        syn::visit::visit_path_segment(self, segment);
    }
}

#[cfg(test)]
mod tests {
    use super::from_source;

    fn check(source: &str, expected: Option<&str>) {
        assert_eq!(from_source(source).as_deref(), expected, "{source}");
    }

    #[test]
    fn the_prefix_is_the_one_literal_the_build_script_gives() {
        let with = |call: &str| {
            format!(
                "fn main() {{ let b = cuda_build::KernelBuild::new(\"kernels\"){call}; b.run(); }}"
            )
        };
        check(&with(".env_prefix(\"DOWNSTREAM\")"), Some("DOWNSTREAM"));
        check(&with(""), Some("KILN"));
        check(&with(".env_prefix(&name)"), None);
        check(&with(".env_prefix(\"A\").env_prefix(\"B\")"), None);
        check("fn main() { println!(\"no kernels\"); }", None);
        check("fn main( {", None);
    }
}
