//! cargo-kiln's `toolkit.toml`: the pinned CUDA wheels and the libclang wheel, read
//! and checked (every requirement an exact `name==version`, nvcc among them).

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::config;
use crate::error::usage_error;

/// cargo-kiln's `toolkit.toml`, the one place the pinned versions live.
pub(crate) const PINNED: &str = include_str!("../../toolkit.toml");

/// The pinned versions, as written in `cargo-kiln's toolkit.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pins {
    pub cuda: CudaPins,
    pub libclang: LibclangPin,
    /// `[targets.<rust triple>]`: the runtime wheels a cross build for that
    /// target links, installed by `toolkit install --target`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, TargetPins>,
}

/// `[targets.<rust triple>]`: the target's wheels, each pinned and hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetPins {
    /// pip's `--platform` for the target's wheels (`manylinux2014_aarch64`).
    pub platform: String,
    /// The wheels, each an exact pin with the SHA-256 of its file.
    pub wheels: Vec<TargetWheel>,
}

/// One wheel of a target: `name==version` and the SHA-256 pip checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetWheel {
    pub package: String,
    pub sha256: String,
}

/// `[cuda]`: the toolkit's version and its exactly pinned wheels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaPins {
    /// `major.minor`, e.g. `13.0`; for people and reports.
    pub version: String,
    /// `name==version` requirements handed to pip.
    pub packages: Vec<String>,
}

/// `[libclang]`: the wheel that ships libclang.so for bindgen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LibclangPin {
    pub package: String,
}

impl Pins {
    /// The pins compiled in from cargo-kiln's `toolkit.toml`.
    pub fn pinned() -> Result<Self> {
        Self::parse(PINNED).map_err(|e| usage_error!("{e}"))
    }

    /// Parses and checks the text of a `toolkit.toml`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let pins: Pins = config::parse("toolkit.toml", text)?;
        pins.check()?;
        Ok(pins)
    }

    /// Every requirement handed to pip, CUDA wheels first.
    pub fn requirements(&self) -> Vec<&str> {
        let cuda = self.cuda.packages.iter().map(String::as_str);
        cuda.chain([self.libclang.package.as_str()]).collect()
    }

    /// Rejects what would make the install unreproducible or useless.
    fn check(&self) -> Result<(), String> {
        if self.cuda.packages.is_empty() {
            return Err("`cuda.packages` is empty; list the pinned CUDA wheels".into());
        }
        let mut names = Vec::new();
        for req in self.requirements() {
            let (name, _) = split_pin(req)?;
            if names.contains(&name) {
                return Err(format!("`{name}` is listed twice; keep one pin"));
            }
            names.push(name);
        }
        if !names.contains(&"nvidia-cuda-nvcc".to_string()) {
            return Err("`nvidia-cuda-nvcc` is not pinned; nvcc comes from it".into());
        }
        for (target, pins) in &self.targets {
            if cuda_build::cross::nvcc_target_dir(target).is_none() {
                return Err(format!(
                    "`targets.{target}`: nvcc builds no host code for it; pin x86_64 or aarch64 Linux (gnu) targets"
                ));
            }
            if pins.wheels.is_empty() {
                return Err(format!(
                    "`targets.{target}.wheels` is empty; pin the target's nvidia-cuda-runtime"
                ));
            }
            for wheel in &pins.wheels {
                split_pin(&wheel.package)?;
                let hex =
                    wheel.sha256.len() == 64 && wheel.sha256.chars().all(|c| c.is_ascii_hexdigit());
                if !hex {
                    return Err(format!(
                        "`targets.{target}`: the sha256 of `{}` is not 64 hex digits; take it from the wheel's PyPI page",
                        wheel.package
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Splits `name==version` into a normalised name and the version; anything
/// but an exact pin is an error.
pub(crate) fn split_pin(req: &str) -> Result<(String, &str), String> {
    let not_pinned = || {
        format!(
            "`{req}` is not an exact pin; write it as `name==version` (pip index versions NAME)"
        )
    };
    let (name, version) = req.split_once("==").ok_or_else(not_pinned)?;
    let name = name.trim();
    let version = version.trim();
    let bad = |s: &str| {
        s.is_empty()
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if bad(name) || bad(version) {
        return Err(not_pinned());
    }
    Ok((normalise_name(name), version))
}

/// PyPI names compare case-insensitively with `-`, `_` and `.` equivalent.
pub(crate) fn normalise_name(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const PINS: &str = r#"
[cuda]
version = "13.0"
packages = ["nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88"]
[libclang]
package = "libclang==18.1.1"
"#;

    #[test]
    fn the_committed_pins_parse() {
        let text = PINNED;
        let pins = Pins::parse(text).unwrap();
        assert_eq!(pins.cuda.version, "13.0");
        assert!(pins.requirements().contains(&"nvidia-cuda-nvcc==13.0.88"));
        assert!(pins.libclang.package.starts_with("libclang=="));
    }

    #[test]
    fn requirements_list_cuda_then_libclang() {
        let pins = Pins::parse(PINS).unwrap();
        assert_eq!(
            pins.requirements(),
            [
                "nvidia-cuda-nvcc==13.0.88",
                "nvidia-nvvm==13.0.88",
                "libclang==18.1.1"
            ]
        );
    }

    #[test]
    fn unpinned_package_is_rejected() {
        let text = PINS.replace("nvidia-nvvm==13.0.88", "nvidia-nvvm>=13.0");
        let err = Pins::parse(&text).unwrap_err();
        assert!(
            err.contains("`nvidia-nvvm>=13.0` is not an exact pin"),
            "{err}"
        );
        let text = PINS.replace("nvidia-nvvm==13.0.88", "nvidia-nvvm");
        assert!(Pins::parse(&text).is_err());
    }

    #[test]
    fn duplicate_package_is_rejected() {
        let text = PINS.replace("nvidia-nvvm==13.0.88", "NVIDIA_CUDA_NVCC==13.0.99");
        let err = Pins::parse(&text).unwrap_err();
        assert!(err.contains("listed twice"), "{err}");
    }

    #[test]
    fn missing_nvcc_is_rejected() {
        let text = PINS.replace("nvidia-cuda-nvcc==13.0.88", "nvidia-cuda-crt==13.0.88");
        let err = Pins::parse(&text).unwrap_err();
        assert!(err.contains("nvidia-cuda-nvcc"), "{err}");
    }

    #[test]
    fn target_pins_are_exact_hashed_and_for_a_target_nvcc_knows() {
        let pins = Pins::parse(PINNED).unwrap();
        let arm = &pins.targets["aarch64-unknown-linux-gnu"];
        assert_eq!(arm.platform, "manylinux2014_aarch64");
        assert!(arm.wheels[0].package.starts_with("nvidia-cuda-runtime=="));
        let target = |table: &str| format!("{PINS}\n[targets.{table}]\nplatform = \"p\"\n");
        let good = format!(
            "wheels = [{{ package = \"a==1\", sha256 = \"{}\" }}]",
            "0".repeat(64)
        );
        assert!(Pins::parse(&(target("aarch64-unknown-linux-gnu") + &good)).is_ok());
        for (table, wheels, says) in [
            (
                "riscv64gc-unknown-linux-gnu",
                good.as_str(),
                "nvcc builds no host code for it",
            ),
            ("aarch64-unknown-linux-gnu", "wheels = []", "is empty"),
            (
                "aarch64-unknown-linux-gnu",
                "wheels = [{ package = \"a>=1\", sha256 = \"\" }]",
                "not an exact pin",
            ),
            (
                "aarch64-unknown-linux-gnu",
                "wheels = [{ package = \"a==1\", sha256 = \"xyz\" }]",
                "not 64 hex digits",
            ),
            (
                "aarch64-unknown-linux-gnu",
                "wheels = [{ package = \"a==1\" }]",
                "missing field `sha256`",
            ),
        ] {
            let err = Pins::parse(&(target(table) + wheels)).unwrap_err();
            assert!(err.contains(says), "{table} {wheels}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn unknown_key_is_a_one_line_error() {
        let text = PINS.replace("version = ", "verison = ");
        let err = Pins::parse(&text).unwrap_err();
        assert!(
            err.starts_with("toolkit.toml:3:1: unknown field `verison`"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }
}
