//! A crate's `kiln-audit.toml`: per-kernel resource budgets, the f64
//! allow-list, the driver floor and where the generated bindings are, with
//! each limit's provenance (`[default] max_registers`) so that a violation
//! names the line that governs it. A crate without the file, or a file
//! without a table, gets [`Budgets::DEFAULTS`]. A `[kernel.KEY]` table names
//! one kernel or, where KEY holds `*`, `?` or `[`, a glob of kernel names
//! (`audit/tables.rs` resolves which table governs a kernel).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

use super::keys::shown_key;
use super::ptx::PtxIsa;

/// The config file's name, beside the crate's `Cargo.toml`.
pub const CONFIG_FILE: &str = "kiln-audit.toml";

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Where it was read from, as messages show it (`kiln-audit.toml`).
    #[serde(skip)]
    pub(crate) origin: String,
    /// The generated bindings (the Rust declarations the ABI check reads),
    /// relative to the crate; found under `src/` when not given.
    #[serde(default)]
    pub bindings: Option<PathBuf>,
    /// `[driver]`, accepted here and read into `driver` by cuda-build's
    /// parser, the one the build warns with.
    #[serde(default, rename = "driver")]
    _driver: Option<serde::de::IgnoredAny>,
    #[serde(skip)]
    pub(crate) driver: DriverFloor,
    #[serde(default)]
    pub(crate) default: Limits,
    #[serde(default)]
    pub(crate) kernel: BTreeMap<String, Overrides>,
    /// The `[kernel.KEY]` tables whose KEY is a glob, compiled.
    #[serde(skip)]
    pub(crate) patterns: Vec<(String, glob::Pattern)>,
    /// The toolkit that built the kernels audited (`13.5.37`), which picks
    /// the `[kernel.KEY.toolkit."MAJOR.MINOR"]` tables that apply.
    #[serde(skip)]
    pub(crate) toolkit: Option<String>,
}

/// The oldest driver the crate supports, and what PTX it can JIT
/// (`cuda_build::floor`'s, with the audit's ISA type).
#[derive(Debug, Clone)]
pub(crate) struct DriverFloor {
    pub(crate) min_cuda: String,
    pub(crate) max_ptx_isa: PtxIsa,
}

impl Default for DriverFloor {
    /// CUDA 13.0 drivers (r580) JIT PTX ISA up to 9.0.
    fn default() -> Self {
        Self::from(cuda_build::floor::DriverFloor::default_floor())
    }
}

impl From<cuda_build::floor::DriverFloor> for DriverFloor {
    fn from(floor: cuda_build::floor::DriverFloor) -> Self {
        Self {
            min_cuda: floor.min_cuda,
            max_ptx_isa: PtxIsa {
                major: floor.max_ptx_isa.major,
                minor: floor.max_ptx_isa.minor,
            },
        }
    }
}

/// The `[default]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Limits {
    #[serde(default = "Limits::hardware_registers")]
    pub(crate) max_registers: u32,
    #[serde(default = "Limits::static_shared_limit")]
    pub(crate) max_shared_bytes: u32,
    #[serde(default)]
    pub(crate) max_spill_bytes: u32,
    #[serde(default)]
    pub(crate) max_local_bytes: u32,
    #[serde(default)]
    pub(crate) allow_f64: bool,
    /// Every kernel without a Rust declaration is launched by name (a
    /// vendored tree launched through `launch_by_name` alone).
    #[serde(default)]
    pub(crate) by_name: bool,
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
    /// Launched by name only (no header declares it; gpu-core checks its
    /// arguments against its image's parameter table at launch): not an ABI violation.
    pub(crate) by_name: Option<bool>,
    /// `[kernel.KEY.toolkit."13.5"]`: the keys that differ when that
    /// toolkit (`MAJOR.MINOR`, any patch) built the kernels, where a newer
    /// ptxas allocates differently; they win over the table's own keys.
    #[serde(default)]
    pub(crate) toolkit: BTreeMap<String, Overrides>,
}

impl Limits {
    /// The most a thread can have: no register budget.
    fn hardware_registers() -> u32 {
        255
    }

    /// 48 KiB, the most static `__shared__` a block can declare.
    fn static_shared_limit() -> u32 {
        48 * 1024
    }
}

impl Default for Limits {
    /// No register or shared budget beyond the hardware's; no spills, no
    /// local memory, no f64.
    fn default() -> Self {
        Self {
            max_registers: Self::hardware_registers(),
            max_shared_bytes: Self::static_shared_limit(),
            max_spill_bytes: 0,
            max_local_bytes: 0,
            allow_f64: false,
            by_name: false,
        }
    }
}

/// A limit and the line it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limit<T> {
    pub(crate) value: T,
    /// `kiln-audit.toml [kernel.batch_stats] max_registers`.
    pub(crate) source: String,
}

impl Budgets {
    /// The defaults a crate without `kiln-audit.toml` gets, as that file
    /// would write them: CUDA 13.0's driver floor (PTX ISA 9.0), 255
    /// registers, 48 KiB of static shared memory, no spills, no local
    /// memory, no f64.
    pub const DEFAULTS: &'static str = "[driver]\nmin_cuda = \"13.0\"\nmax_ptx_isa = \"9.0\"\n\
        [default]\nmax_registers = 255\nmax_shared_bytes = 49152\nmax_spill_bytes = 0\n\
        max_local_bytes = 0\nallow_f64 = false\nby_name = false\n";

    /// The budgets of the crate in `crate_dir`: its `kiln-audit.toml`, or
    /// the defaults when it has none. `shown` names the file in messages.
    pub fn for_crate(crate_dir: &Path, shown: &str) -> Result<Self> {
        let path = crate_dir.join(CONFIG_FILE);
        if path.exists() {
            Self::read(&path, shown)
        } else {
            Self::parse("", &format!("the defaults (no {shown})"))
        }
    }

    /// Parses budgets text; `origin` names it in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let mut budgets: Self = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{origin}: {}", e.message()))
            .with_context(|| format!("fix {origin} (see the comments at its top)"))?;
        budgets.origin = origin.to_string();
        budgets.driver = cuda_build::floor::DriverFloor::parse(text)
            .map(DriverFloor::from)
            .map_err(|e| anyhow::anyhow!("{origin}: {e}"))
            .with_context(|| format!("fix {origin} (see the comments at its top)"))?;
        budgets.patterns = super::keys::compile(&budgets.kernel, origin)?;
        for (key, table) in &budgets.kernel {
            for (version, inner) in &table.toolkit {
                let shown = format!("{origin} [kernel.{}.toolkit.\"{version}\"]", shown_key(key));
                if !is_major_minor(version) {
                    anyhow::bail!("{shown}: a toolkit is named by its MAJOR.MINOR version (\"13.5\"); fix {origin}");
                }
                if !inner.toolkit.is_empty() {
                    anyhow::bail!("{shown}: a toolkit's table holds budgets, not other toolkits; fix {origin}");
                }
            }
        }
        Ok(budgets)
    }

    /// These budgets for kernels built by the toolkit of version `version`
    /// (`13.5.37`; `None` when unknown: no toolkit table applies).
    pub fn for_toolkit(&self, version: Option<&str>) -> Self {
        Self {
            toolkit: version.map(str::to_string),
            ..self.clone()
        }
    }

    /// The toolkit table of `table` that applies to the kernels audited.
    fn toolkit_table<'a>(&self, table: &'a Overrides) -> Option<(&'a str, &'a Overrides)> {
        let version = self.toolkit.as_deref()?;
        table
            .toolkit
            .iter()
            .find(|(key, _)| {
                version == key.as_str()
                    || version
                        .strip_prefix(key.as_str())
                        .is_some_and(|rest| rest.starts_with('.'))
            })
            .map(|(key, t)| (key.as_str(), t))
    }

    /// These budgets without their `[kernel.KEY]` tables: the driver floor
    /// and `[default]` alone, for auditing another crate's kernels (kiln's
    /// `ptx-audit --prebuilt` of examples/downstream's images): the tables
    /// name this crate's kernels, so there each would be one "names no
    /// kernel" violation.
    pub fn defaults_only(&self) -> Self {
        Self {
            kernel: BTreeMap::new(),
            patterns: Vec::new(),
            ..self.clone()
        }
    }

    /// Reads a budgets file.
    pub fn read(path: &Path, origin: &str) -> Result<Self> {
        let text = crate::config::read_file(path)
            .with_context(|| format!("cannot read {origin}; it holds the audit's budgets"))?;
        Self::parse(&text, origin)
    }

    fn pick<T: Copy>(
        &self,
        kernel: &str,
        key: &str,
        over: impl Fn(&Overrides) -> Option<T>,
        default: T,
    ) -> Limit<T> {
        let found = self.tables_for(kernel).find_map(|(table, o)| {
            let shown = shown_key(table);
            if let Some((version, t)) = self.toolkit_table(o) {
                if let Some(value) = over(t) {
                    return Some((format!("{shown}.toolkit.\"{version}\""), value));
                }
            }
            Some((shown.to_string(), over(o)?))
        });
        match found {
            Some((table, value)) => Limit {
                value,
                source: format!("{} [kernel.{table}] {key}", self.origin),
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

    /// Whether `by_name = true` (the kernel's table, a pattern's or
    /// `[default]`) says the kernel is launched by name, with no Rust
    /// declaration.
    pub(crate) fn by_name(&self, kernel: &str) -> Limit<bool> {
        let d = self.default.by_name;
        self.pick(kernel, "by_name", |o| o.by_name, d)
    }

    /// `kiln-audit.toml [driver] max_ptx_isa`.
    pub(crate) fn ptx_isa_source(&self) -> String {
        format!("{} [driver] max_ptx_isa", self.origin)
    }
}

/// Whether `text` is a `MAJOR.MINOR` version (`13.5`).
fn is_major_minor(text: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    text.split_once('.')
        .is_some_and(|(major, minor)| digits(major) && digits(minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO in place of the budgets file is refused at once.
    #[test]
    fn a_fifo_for_the_budgets_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = crate::config::tests::fifo_at(&dir.path().join("kiln-audit.toml"));
        let err = Budgets::read(&fifo, "kiln-audit.toml").unwrap_err();
        let text = crate::error::one_line(&err);
        assert!(
            text.starts_with("cannot read kiln-audit.toml; it holds the audit's budgets: ")
                && text.contains("is a FIFO, not a regular file"),
            "{text}"
        );
    }

    /// Another crate's kernels are held to the floor and defaults alone:
    /// kiln's tables neither govern them nor count as stale there.
    #[test]
    fn defaults_only_keeps_the_floor_and_default_and_drops_every_table() {
        let b = Budgets::parse(
            "[driver]\nmin_cuda = \"12.8\"\nmax_ptx_isa = \"8.7\"\n[default]\nmax_registers = 64\n\
             [kernel.mine]\nmax_registers = 128\n[kernel.\"mine_*\"]\nallow_f64 = true\n",
            "b.toml",
        )
        .unwrap();
        let d = b.defaults_only();
        assert_eq!(d.max_registers("mine").value, 64);
        assert!(!d.allow_f64("mine_x").value);
        assert_eq!(d.driver.min_cuda, "12.8");
        assert!(d.kernel.is_empty() && d.patterns.is_empty());
        assert!(crate::audit::tables::check_budget_names(&d, &[]).is_empty());
        // The original still has its tables.
        assert_eq!(b.max_registers("mine").value, 128);
    }

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

    /// Issue 43: a budget that changes with the toolkit is said per
    /// toolkit; it applies to that MAJOR.MINOR's kernels only, wins over
    /// the table's own key, and says where it comes from.
    #[test]
    fn a_toolkits_table_governs_that_toolkits_kernels_only() {
        let text = r#"
[kernel."wide_*"]
max_spill_bytes = 264
max_registers = 128
[kernel."wide_*".toolkit."13.5"]
max_spill_bytes = 544
"#;
        let b = Budgets::parse(text, "budgets.toml").unwrap();
        for version in [None, Some("13.0.88"), Some("13.50.1"), Some("13")] {
            let spill = b.for_toolkit(version).max_spill_bytes("wide_f32");
            assert_eq!(spill.value, 264, "{version:?}");
            assert_eq!(
                spill.source,
                "budgets.toml [kernel.\"wide_*\"] max_spill_bytes"
            );
        }
        for version in ["13.5", "13.5.37"] {
            let b = b.for_toolkit(Some(version));
            let spill = b.max_spill_bytes("wide_f32");
            assert_eq!(spill.value, 544, "{version}");
            assert_eq!(
                spill.source,
                "budgets.toml [kernel.\"wide_*\".toolkit.\"13.5\"] max_spill_bytes"
            );
            // A key the toolkit's table leaves out is the table's own.
            assert_eq!(b.max_registers("wide_f32").value, 128);
            assert_eq!(b.max_spill_bytes("narrow").value, 0);
        }
        for (bad, says) in [
            (
                "[kernel.k.toolkit.\"13\"]\nmax_registers = 1",
                "MAJOR.MINOR",
            ),
            (
                "[kernel.k.toolkit.\"v13.5\"]\nmax_registers = 1",
                "MAJOR.MINOR",
            ),
            (
                "[kernel.k.toolkit.\"13.5\".toolkit.\"13.6\"]\nmax_registers = 1",
                "not other toolkits",
            ),
            ("[kernel.k.toolkit.\"13.5\"]\nmax_regs = 1", "unknown field"),
        ] {
            let err = format!("{:#}", Budgets::parse(bad, "b.toml").unwrap_err());
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn the_documented_defaults_are_what_an_empty_file_gets() {
        let empty = Budgets::parse("", "none").unwrap();
        let written = Budgets::parse(Budgets::DEFAULTS, "defaults").unwrap();
        assert_eq!(
            format!("{:?}", empty.default),
            format!("{:?}", written.default)
        );
        assert_eq!(empty.driver.min_cuda, written.driver.min_cuda);
        assert_eq!(empty.driver.max_ptx_isa, written.driver.max_ptx_isa);
        assert!(empty.bindings.is_none() && empty.kernel.is_empty());
    }

    /// The build (cuda-build's floor, issue 43) and the audit read one
    /// `[driver]` one way: a floor given as a CUDA version alone takes the
    /// ISA that CUDA writes, and a key neither knows is refused by both.
    #[test]
    fn the_audit_reads_driver_as_the_build_does() {
        let b = Budgets::parse("[driver]\nmin_cuda = \"13.5\"\n", "k.toml").unwrap();
        assert_eq!(b.driver.max_ptx_isa, PtxIsa { major: 9, minor: 5 });
        assert_eq!(
            cuda_build::floor::DriverFloor::parse("[driver]\nmin_cuda = \"13.5\"\n")
                .unwrap()
                .max_ptx_isa
                .to_string(),
            b.driver.max_ptx_isa.to_string()
        );
        let error =
            Budgets::parse("[driver]\nmin_cuda = \"13.0\"\nfloor = 1\n", "k.toml").unwrap_err();
        assert_eq!(
            error.root_cause().to_string(),
            "k.toml: [driver] has no key `floor` (it takes min_cuda and max_ptx_isa)"
        );
    }

    #[test]
    fn a_crate_without_the_file_gets_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let b = Budgets::for_crate(dir.path(), CONFIG_FILE).unwrap();
        assert_eq!(b.max_registers("k").value, 255);
        assert_eq!(
            b.max_registers("k").source,
            "the defaults (no kiln-audit.toml) [default] max_registers"
        );
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
