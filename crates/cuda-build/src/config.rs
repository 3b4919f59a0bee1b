//! The kernels' config file (kiln's is `kernels/kiln.toml`): the default arch
//! spec, extra nvcc flags, and which modules link as static libraries.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{io, Error};

/// The arch spec used when neither the environment nor the config names one.
pub const DEFAULT_ARCHS: &str = "sm_80,sm_90";

/// The parsed config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KernelConfig {
    /// Default arch spec (see [`crate::arch`]).
    #[serde(default = "default_archs")]
    pub archs: String,
    /// Flags added to every nvcc command.
    #[serde(default)]
    pub nvcc_flags: Vec<String>,
    /// Per-module settings, by `.cu` stem.
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

/// Settings for one module.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleConfig {
    /// How the module reaches the program.
    #[serde(default)]
    pub link: LinkMode,
}

/// How a module reaches the program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkMode {
    /// A fat binary embedded with `include_bytes!`, loaded through the driver.
    #[default]
    Fatbin,
    /// Host-side CUDA C++ compiled by the `cc` crate's nvcc mode into a static
    /// library, linked with the static CUDA runtime.
    Static,
}

impl KernelConfig {
    /// Parses config text; `path` names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        toml::from_str(text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string().lines().collect::<Vec<_>>().join(" "),
        })
    }

    /// Reads the file, or the defaults when it does not exist.
    pub fn load(path: &Path) -> Result<Self, Error> {
        if !path.exists() {
            return Ok(Self::default());
        }
        let text = io(path, std::fs::read_to_string(path))?;
        Self::parse(&text, path)
    }

    /// The link mode of a module.
    pub fn link_mode(&self, module: &str) -> LinkMode {
        self.modules.get(module).map(|m| m.link).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kilns_own_config() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels/kiln.toml");
        let config = KernelConfig::load(&path).unwrap();
        assert_eq!(config.link_mode("reduce"), LinkMode::Static);
        assert_eq!(config.link_mode("vector_add"), LinkMode::Fatbin);
        assert!(!config.archs.is_empty());
    }

    #[test]
    fn defaults_and_errors() {
        let config = KernelConfig::parse("", Path::new("k.toml")).unwrap();
        assert_eq!(config, KernelConfig::default());
        let err = KernelConfig::parse("arch = \"sm_90\"", Path::new("k.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("invalid kernel config k.toml: "), "{msg}");
        assert!(msg.contains("unknown field `arch`"), "{msg}");
        assert!(!msg.contains('\n'));
        let err = KernelConfig::parse("[modules.x]\nlink = \"dynamic\"", Path::new("k.toml"))
            .unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `dynamic`"),
            "{err}"
        );
    }
}
