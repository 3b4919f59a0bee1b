//! The kernels' config file (kiln's is `kernels/kiln.toml`): the default arch
//! spec, nvcc flags for every module, and `[modules.NAME]` entries (sources,
//! flags, defines, include dirs, archs, link mode, separate compilation).
//! Parsing only; the build matches the entries against the files.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::Error;

/// The arch spec used when neither the environment nor the config names one.
pub(crate) const DEFAULT_ARCHS: &str = "sm_80,sm_90";

/// The parsed config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[non_exhaustive]
pub struct KernelConfig {
    /// Default arch spec (see [`crate::arch`]).
    #[serde(default = "default_archs")]
    pub archs: String,
    /// Flags added to every nvcc command.
    #[serde(default)]
    pub nvcc_flags: Vec<String>,
    /// Per-module settings, by module name.
    #[serde(default)]
    pub modules: BTreeMap<String, ModuleConfig>,
}

fn default_archs() -> String {
    DEFAULT_ARCHS.to_string()
}

impl Default for KernelConfig {
    fn default() -> Self {
        Self {
            archs: default_archs(),
            nvcc_flags: Vec::new(),
            modules: BTreeMap::new(),
        }
    }
}

/// Settings for one module (`[modules.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[non_exhaustive]
pub struct ModuleConfig {
    /// Files or globs under the kernels dir; empty means `NAME.cu`.
    #[serde(default)]
    pub sources: Vec<String>,
    /// nvcc flags for this module, after the config's `nvcc-flags`.
    #[serde(default)]
    pub flags: Vec<String>,
    /// `-D` defines (`"N=4"`, `"USE_FAST"`).
    #[serde(default)]
    pub defines: Vec<String>,
    /// `-I` dirs, relative to the kernels dir, searched before the build's own.
    #[serde(default)]
    pub include_dirs: Vec<String>,
    /// An arch spec that replaces the build's for this module.
    #[serde(default)]
    pub archs: Option<String>,
    /// How the module reaches the program.
    #[serde(default)]
    pub link: LinkMode,
    /// Separate compilation: each source compiled with `-dc`, then
    /// device-linked into one image.
    #[serde(default)]
    pub rdc: bool,
}

/// How a module reaches the program.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum LinkMode {
    /// A fat binary embedded with `include_bytes!`, loaded through the driver.
    #[default]
    Fatbin,
    /// Host-side CUDA C++ compiled into a static library, linked with the
    /// static CUDA runtime.
    Static,
}

impl KernelConfig {
    /// Parses config text; `path` names the file in errors, which are one
    /// line: `kiln.toml:12 in [modules.x]: unknown field ...`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: describe_toml_error(text, &e),
        })
    }

    /// Reads the file, or the defaults when there is none. A path that is
    /// there but cannot be read (a symlink loop or one to nothing, a dir)
    /// is an error, never the defaults.
    pub fn load(path: &Path) -> Result<Self, Error> {
        if !present(path) {
            return Ok(Self::default());
        }
        // Never waited on (a FIFO), never a dir: a regular file, or a link
        // to one, of at most 16 MiB.
        let unreadable = |why: String| Error::Config {
            path: path.to_path_buf(),
            message: format!("cannot be read ({why}); make it a readable file or remove it"),
        };
        let text = match crate::regular::read_text(path, 16 << 20, crate::regular::Links::Follow) {
            Ok(Some(text)) => text,
            Ok(None) => return Err(unreadable("a link to nothing".into())),
            Err(Error::Io { source, .. }) => return Err(unreadable(source.to_string())),
            Err(other) => return Err(other),
        };
        Self::parse(&text, path)
    }

    /// The link mode of a module.
    pub fn link_mode(&self, module: &str) -> LinkMode {
        self.modules.get(module).map(|m| m.link).unwrap_or_default()
    }
}

/// Whether anything is at `path`, a broken or looping symlink included
/// (`Path::exists` says no to those, which would read as "no config").
pub(crate) fn present(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// `line 12 in [modules.x]: unknown field ...; fix`: toml's message made one
/// line, with the table it is in.
fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().split_whitespace().collect::<Vec<_>>();
    let message = message.join(" ");
    let Some(span) = error.span() else {
        return message;
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|t| format!(" in {t}"))
        .unwrap_or_default();
    let fix = if message.starts_with("unknown field") {
        "; remove it or use one of those"
    } else {
        ""
    };
    format!("line {line}{table}: {message}{fix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_errors() {
        let config = KernelConfig::parse("", Path::new("k.toml")).unwrap();
        assert_eq!(config, KernelConfig::default());
        let err = KernelConfig::parse("arch = \"sm_90\"", Path::new("k.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("k.toml: line 1: unknown field `arch`"),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
        let err = KernelConfig::parse("[modules.x]\nlink = \"dynamic\"", Path::new("k.toml"))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("k.toml: line 2 in [modules.x]: unknown variant `dynamic`"),
            "{err}"
        );
    }

    #[test]
    fn unknown_module_key_names_the_entry_and_the_fix() {
        let text = "archs = \"sm_80\"\n\n[modules.affine]\nnvcc-flags = [\"-O3\"]\n";
        let err = KernelConfig::parse(text, Path::new("kernels/kiln.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "kernels/kiln.toml: line 4 in [modules.affine]: unknown field `nvcc-flags`, expected one of"
            ) && msg.ends_with("; remove it or use one of those"),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn module_keys() {
        let text = "[modules.family]\nsources = [\"vendor/*.cu\"]\nflags = [\"-G\"]\n\
                    defines = [\"N=4\"]\ninclude-dirs = [\"vendor/include\"]\n\
                    archs = \"sm_90a\"\nlink = \"static\"\nrdc = true\n";
        let config = KernelConfig::parse(text, Path::new("k.toml")).unwrap();
        let module = &config.modules["family"];
        assert_eq!(module.sources, ["vendor/*.cu"]);
        assert_eq!(module.flags, ["-G"]);
        assert_eq!(module.defines, ["N=4"]);
        assert_eq!(module.include_dirs, ["vendor/include"]);
        assert_eq!(module.archs.as_deref(), Some("sm_90a"));
        assert_eq!(module.link, LinkMode::Static);
        assert!(module.rdc);
        assert_eq!(config.link_mode("family"), LinkMode::Static);
        assert_eq!(config.link_mode("other"), LinkMode::Fatbin);
    }
}
