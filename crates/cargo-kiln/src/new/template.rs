//! The new crate's files: the texts under `template/` (embedded, so an
//! installed `cargo-kiln` needs no checkout) and the `{{key}}` values they are
//! rendered with.

/// Where the new crate's kiln dependencies come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KilnSource {
    /// A kiln git repository, and the commit to pin (what `cargo install
    /// --git` built this tool from, or `--kiln-git`/`--kiln-rev`).
    Git {
        /// The repository's URL.
        url: String,
        /// The commit, tag or branch to pin, if any.
        rev: Option<String>,
    },
    /// A kiln checkout on disk (its root: the folder holding `crates/`).
    Path(std::path::PathBuf),
}

impl KilnSource {
    /// The TOML keys locating `crate_dir` (a folder under `crates/`), for an
    /// inline dependency table: `git = "..."` or `path = ".../crates/..."`.
    fn locate(&self, crate_dir: &str) -> String {
        match self {
            KilnSource::Git { url, rev: None } => format!("git = {}", toml_string(url)),
            KilnSource::Git {
                url,
                rev: Some(rev),
            } => format!("git = {}, rev = {}", toml_string(url), toml_string(rev)),
            KilnSource::Path(root) => {
                let path = root.join("crates").join(crate_dir);
                format!("path = {}", toml_string(&path.to_string_lossy()))
            }
        }
    }

    /// Where a reader finds kiln: the repository URL or the checkout.
    fn home(&self) -> String {
        match self {
            KilnSource::Git { url, .. } => url.clone(),
            KilnSource::Path(root) => root.to_string_lossy().into_owned(),
        }
    }

    /// The comment above the dependencies: where they point, and how to change it.
    fn note(&self) -> &'static str {
        match self {
            KilnSource::Git { rev: None, .. } => {
                "from kiln's git repository; add `rev = \"...\"` to pin a commit"
            }
            KilnSource::Git { rev: Some(_), .. } => "from kiln's git repository, pinned by `rev`",
            KilnSource::Path(_) => {
                "a kiln checkout on disk; replace `path` by `git` or a version to share this crate"
            }
        }
    }
}

/// A TOML basic string (quoted and escaped) holding `text`.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// One file of the template: where it goes in the new crate, and its text.
#[derive(Debug, Clone, Copy)]
pub struct TemplateFile {
    /// The path in the new crate, `/`-separated.
    pub path: &'static str,
    /// The text, with `{{key}}` placeholders.
    pub text: &'static str,
}

macro_rules! template {
    ($($path:literal => $file:literal,)*) => {
        &[$(TemplateFile { path: $path, text: include_str!(concat!("../../template/", $file)) },)*]
    };
}

/// Every file but the bindings, which carry the fingerprint of the headers
/// written from here ([`BINDINGS`]).
pub const FILES: &[TemplateFile] = template! {
    "Cargo.toml" => "Cargo.toml.tmpl",
    "README.md" => "README.md.tmpl",
    ".gitignore" => "gitignore.tmpl",
    "build.rs" => "build.rs.tmpl",
    "kernels/kiln.toml" => "kiln.toml.tmpl",
    "kernels/saxpy.cu" => "saxpy.cu.tmpl",
    "kernels/include/saxpy.h" => "saxpy.h.tmpl",
    "src/lib.rs" => "lib.rs.tmpl",
    "tests/saxpy.rs" => "saxpy_test.rs.tmpl",
};

/// The bindings generated from `kernels/include/saxpy.h` (what
/// `cargo kiln codegen` writes), with `{{fingerprint}}` for the
/// headers' fingerprint.
pub const BINDINGS: TemplateFile = TemplateFile {
    path: "src/bindings.rs",
    text: include_str!("../../template/bindings.rs.tmpl"),
};

/// The folder whose headers the bindings' fingerprint covers.
pub const INCLUDE_DIR: &str = "kernels/include";

/// The values a template is rendered with, derived from the crate name.
#[derive(Debug, Clone)]
pub struct Vars {
    values: Vec<(&'static str, String)>,
}

impl Vars {
    /// The values for crate `name` (already validated) depending on kiln
    /// through `source`.
    pub fn new(name: &str, source: &KilnSource) -> Self {
        let ident = name.replace('-', "_");
        let values = vec![
            ("name", name.to_owned()),
            ("PREFIX", ident.to_ascii_uppercase()),
            ("ident", ident),
            ("rust_version", cuda_build::RUST_VERSION.to_owned()),
            ("kiln_version", env!("CARGO_PKG_VERSION").to_owned()),
            ("kiln_home", source.home()),
            ("kiln_source_note", source.note().to_owned()),
            ("gpu_core_source", source.locate("gpu-core")),
            ("cuda_build_source", source.locate("cuda-build")),
        ];
        Vars { values }
    }

    /// These values and the headers' fingerprint, for [`BINDINGS`].
    pub fn with_fingerprint(&self, fingerprint: &str) -> Self {
        let mut values = self.values.clone();
        values.push(("fingerprint", fingerprint.to_owned()));
        Vars { values }
    }

    /// `text` with every `{{key}}` replaced by its value, in one pass (a
    /// value is never rendered again); an unknown key is left as it is.
    pub fn render(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let value = after.find("}}").and_then(|close| {
                let key = &after[..close];
                let value = self.values.iter().find(|(k, _)| *k == key)?;
                Some((close, &value.1))
            });
            match value {
                Some((close, value)) => {
                    out.push_str(value);
                    rest = &after[close + 2..];
                }
                None => {
                    out.push_str("{{");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Vars {
        let source = KilnSource::Git {
            url: "https://h.example/kiln".into(),
            rev: None,
        };
        Vars::new(name, &source).with_fingerprint("0123456789abcdef")
    }

    #[test]
    fn every_placeholder_has_a_value() {
        let vars = vars("my-kernels");
        for file in FILES.iter().chain([&BINDINGS]) {
            let text = vars.render(file.text);
            assert!(!text.contains("{{"), "{}: {text}", file.path);
        }
    }

    #[test]
    fn names_become_an_ident_and_an_env_prefix() {
        let vars = vars("my-kernels");
        assert_eq!(
            vars.render("{{name}} {{ident}} {{PREFIX}}_REQUIRE_CUDA"),
            "my-kernels my_kernels MY_KERNELS_REQUIRE_CUDA"
        );
    }

    #[test]
    fn dependencies_point_at_git_or_at_a_checkout() {
        let git = KilnSource::Git {
            url: "https://h.example/kiln".into(),
            rev: None,
        };
        assert_eq!(git.locate("gpu-core"), r#"git = "https://h.example/kiln""#);
        let pinned = KilnSource::Git {
            url: "https://h.example/kiln".into(),
            rev: Some("0123abc".into()),
        };
        assert_eq!(
            pinned.locate("gpu-core"),
            r#"git = "https://h.example/kiln", rev = "0123abc""#
        );
        let path = KilnSource::Path("/src/kiln \"x\"".into());
        assert_eq!(
            path.locate("cuda-build"),
            r#"path = '/src/kiln "x"/crates/cuda-build'"#
        );
    }

    #[test]
    fn a_value_is_not_rendered_again_and_unknown_keys_stay() {
        let source = KilnSource::Git {
            url: "{{name}}".into(),
            rev: None,
        };
        let vars = Vars::new("a", &source);
        assert_eq!(
            vars.render("{{gpu_core_source}} {{nope}} {{name"),
            r#"git = "{{name}}" {{nope}} {{name"#
        );
    }
}
