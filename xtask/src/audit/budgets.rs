//! `ci/budgets.toml`: per-kernel resource budgets, the f64 allow-list and the
//! driver floor, with each limit's provenance (`[default] max_registers`) so
//! that a violation names the line that governs it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

use super::ptx::PtxIsa;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Budgets {
    /// Where it was read from, as messages show it (`ci/budgets.toml`).
    #[serde(skip)]
    pub(crate) origin: String,
    pub(crate) driver: DriverFloor,
    pub(crate) default: Limits,
    #[serde(default)]
    pub(crate) kernel: BTreeMap<String, Overrides>,
}

/// The oldest driver kiln supports, and what PTX it can JIT.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DriverFloor {
    pub(crate) min_cuda: String,
    #[serde(deserialize_with = "ptx_isa")]
    pub(crate) max_ptx_isa: PtxIsa,
}

/// The `[default]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Limits {
    pub(crate) max_registers: u32,
    pub(crate) max_shared_bytes: u32,
    #[serde(default)]
    pub(crate) max_spill_bytes: u32,
    #[serde(default)]
    pub(crate) max_local_bytes: u32,
    #[serde(default)]
    pub(crate) allow_f64: bool,
}

/// A `[kernel.NAME]` table: any subset of [`Limits`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Overrides {
    pub(crate) max_registers: Option<u32>,
    pub(crate) max_shared_bytes: Option<u32>,
    pub(crate) max_spill_bytes: Option<u32>,
    pub(crate) max_local_bytes: Option<u32>,
    pub(crate) allow_f64: Option<bool>,
}

fn ptx_isa<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PtxIsa, D::Error> {
    let text = String::deserialize(d)?;
    PtxIsa::parse(&text)
        .ok_or_else(|| serde::de::Error::custom(format!("max_ptx_isa `{text}` is not MAJOR.MINOR")))
}

/// A limit and the line it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limit<T> {
    pub(crate) value: T,
    /// `ci/budgets.toml [kernel.batch_stats] max_registers`.
    pub(crate) source: String,
}

impl Budgets {
    /// Parses budgets text; `origin` names it in messages.
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Self> {
        let mut budgets: Self = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{origin}: {}", e.message()))
            .with_context(|| format!("fix {origin} (see the comments at its top)"))?;
        budgets.origin = origin.to_string();
        Ok(budgets)
    }

    /// Reads a budgets file.
    pub(crate) fn read(path: &Path, origin: &str) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {origin}; it holds ptx-audit's budgets"))?;
        Self::parse(&text, origin)
    }

    fn pick<T: Copy>(
        &self,
        kernel: &str,
        key: &str,
        over: impl Fn(&Overrides) -> Option<T>,
        default: T,
    ) -> Limit<T> {
        match self.kernel.get(kernel).and_then(&over) {
            Some(value) => Limit {
                value,
                source: format!("{} [kernel.{kernel}] {key}", self.origin),
            },
            None => Limit {
                value: default,
                source: format!("{} [default] {key}", self.origin),
            },
        }
    }

    pub(crate) fn max_registers(&self, kernel: &str) -> Limit<u32> {
        let d = self.default.max_registers;
        self.pick(kernel, "max_registers", |o| o.max_registers, d)
    }

    pub(crate) fn max_shared_bytes(&self, kernel: &str) -> Limit<u32> {
        let d = self.default.max_shared_bytes;
        self.pick(kernel, "max_shared_bytes", |o| o.max_shared_bytes, d)
    }

    pub(crate) fn max_spill_bytes(&self, kernel: &str) -> Limit<u32> {
        let d = self.default.max_spill_bytes;
        self.pick(kernel, "max_spill_bytes", |o| o.max_spill_bytes, d)
    }

    pub(crate) fn max_local_bytes(&self, kernel: &str) -> Limit<u32> {
        let d = self.default.max_local_bytes;
        self.pick(kernel, "max_local_bytes", |o| o.max_local_bytes, d)
    }

    pub(crate) fn allow_f64(&self, kernel: &str) -> Limit<bool> {
        let d = self.default.allow_f64;
        self.pick(kernel, "allow_f64", |o| o.allow_f64, d)
    }

    /// `ci/budgets.toml [driver] max_ptx_isa`.
    pub(crate) fn ptx_isa_source(&self) -> String {
        format!("{} [driver] max_ptx_isa", self.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_and_say_where_they_come_from() {
        let b = Budgets::parse(
            r#"
[driver]
min_cuda = "13.0"
max_ptx_isa = "9.0"
[default]
max_registers = 64
max_shared_bytes = 4096
[kernel.big]
max_registers = 128
allow_f64 = true
"#,
            "budgets.toml",
        )
        .unwrap();
        assert_eq!(b.driver.max_ptx_isa, PtxIsa { major: 9, minor: 0 });
        let regs = b.max_registers("big");
        assert_eq!(regs.value, 128);
        assert_eq!(regs.source, "budgets.toml [kernel.big] max_registers");
        assert_eq!(b.max_spill_bytes("big").value, 0);
        assert_eq!(
            b.max_spill_bytes("big").source,
            "budgets.toml [default] max_spill_bytes"
        );
        assert!(b.allow_f64("big").value);
        assert!(!b.allow_f64("small").value);
    }

    #[test]
    fn the_repository_budgets_parse() {
        let root = crate::workspace::root();
        Budgets::read(&root.join("ci/budgets.toml"), "ci/budgets.toml").unwrap();
    }

    #[test]
    fn a_misspelt_key_is_an_error_naming_the_file() {
        let e = Budgets::parse(
            "[driver]\nmin_cuda = \"13.0\"\nmax_ptx_isa = \"9.0\"\n[default]\nmax_registers = 1\nmax_shared_bytes = 1\n[kernel.k]\nmax_regs = 3\n",
            "b.toml",
        )
        .unwrap_err();
        let text = format!("{e:#}");
        assert!(text.starts_with("fix b.toml"), "{text}");
        assert!(text.contains("max_regs"), "{text}");
    }
}
