//! The driver floor a crate's kernels serve (`kiln-audit.toml`'s `[driver]`,
//! default CUDA 13.0) and the PTX ISA each toolkit writes, so that a build
//! whose toolkit writes PTX the floor's drivers cannot JIT says so with the
//! fixes, instead of leaving it to the audit or to a user's GPU.

use std::fmt;
use std::path::Path;

use crate::error::Error;
use crate::toolkit::ToolkitVersion;

/// The file beside a crate's `Cargo.toml` that holds its audit budgets and
/// its `[driver]` floor (cargo-kiln's audit reads the whole of it).
pub const AUDIT_FILE: &str = "kiln-audit.toml";

/// A PTX ISA version (`.version 9.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PtxIsa {
    /// 9 for ISA 9.0.
    pub major: u32,
    /// 0 for ISA 9.0.
    pub minor: u32,
}

impl fmt::Display for PtxIsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl PtxIsa {
    /// The ISA a toolkit writes into `.version`: CUDA 11.x writes 7.x,
    /// 12.0 to 12.5 write 8.0 to 8.5, 12.6 8.5, 12.8 8.7, 12.9 8.8, and
    /// 13.x writes 9.x (13.5's PTX is `.version 9.5`); a later major is
    /// taken to go on the same way (`major - 4`).
    pub fn written_by(version: ToolkitVersion) -> Self {
        let (major, minor) = (version.major, version.minor);
        match (major, minor) {
            (12, 6) => Self { major: 8, minor: 5 },
            (12, 7..) => Self {
                major: 8,
                minor: minor - 1,
            },
            _ => Self {
                major: major.saturating_sub(4),
                minor,
            },
        }
    }

    /// `9.0`, as `kiln-audit.toml` writes it.
    fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once('.')?;
        Some(Self {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

/// The oldest driver a crate's kernels serve and the PTX ISA it can JIT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverFloor {
    /// `13.0`: the oldest CUDA driver served.
    pub min_cuda: String,
    /// The newest PTX ISA that driver JITs.
    pub max_ptx_isa: PtxIsa,
    /// Where it was read (`kiln-audit.toml [driver]`), or that it is the
    /// default.
    pub origin: String,
}

impl DriverFloor {
    /// CUDA 13.0 drivers (r580) JIT PTX ISA up to 9.0.
    pub fn default_floor() -> Self {
        Self {
            min_cuda: "13.0".to_string(),
            max_ptx_isa: PtxIsa { major: 9, minor: 0 },
            origin: format!("the default; set it in {AUDIT_FILE} [driver]"),
        }
    }

    /// The floor of the crate whose audit file is `path`: its `[driver]`
    /// table (`min_cuda`, and `max_ptx_isa`, which defaults to what that
    /// CUDA's toolkit writes), or the default where the file or the table
    /// is missing. The rest of the file is the audit's. A `[driver]` that
    /// cannot be read is one line naming the file.
    pub fn read(path: &Path) -> Result<Self, Error> {
        // A regular file (or a link to one): a FIFO is refused, never
        // waited on.
        let text = match crate::regular::read_text(path, 16 << 20, crate::regular::Links::Follow)? {
            Some(text) => text,
            None => return Ok(Self::default_floor()),
        };
        let mut floor = Self::parse(&text).map_err(|message| Error::Config {
            path: path.to_path_buf(),
            message,
        })?;
        // Named as the file is (`KernelBuild::audit_file` may name another).
        if let (true, Some(name)) = (floor.origin == DRIVER_TABLE, path.file_name()) {
            floor.origin = format!("{} [driver]", name.to_string_lossy());
        }
        Ok(floor)
    }

    /// The floor of an audit file's text: its `[driver]`, or the default
    /// without one; a key other than `min_cuda` and `max_ptx_isa`, or a
    /// value of the wrong form, is one line (cargo-kiln's audit reads the
    /// table through this, so the build and the audit agree on the file).
    pub fn parse(text: &str) -> Result<Self, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            format!("{} (the driver floor is read from [driver])", e.message())
        })?;
        let Some(driver) = table.get("driver") else {
            return Ok(Self::default_floor());
        };
        let bad = |key: &str, what: &str| format!("[driver] {key} must be {what}");
        let table = driver
            .as_table()
            .ok_or_else(|| "[driver] must be a table".to_string())?;
        if let Some(key) = table
            .keys()
            .find(|k| !["min_cuda", "max_ptx_isa"].contains(&k.as_str()))
        {
            return Err(format!(
                "[driver] has no key `{key}` (it takes min_cuda and max_ptx_isa)"
            ));
        }
        let min_cuda = driver
            .get("min_cuda")
            .ok_or_else(|| bad("min_cuda", "set (\"13.0\")"))?
            .as_str()
            .ok_or_else(|| bad("min_cuda", "a string (\"13.0\")"))?;
        let cuda = ToolkitVersion::parse_nvcc_version(&format!("release {min_cuda}"))
            .filter(|_| min_cuda.trim().split('.').count() == 2)
            .ok_or_else(|| bad("min_cuda", "a CUDA version (\"13.0\")"))?;
        let max_ptx_isa = match driver.get("max_ptx_isa") {
            None => PtxIsa::written_by(cuda),
            Some(value) => value
                .as_str()
                .and_then(PtxIsa::parse)
                .ok_or_else(|| bad("max_ptx_isa", "a PTX ISA version (\"9.0\")"))?,
        };
        Ok(Self {
            min_cuda: min_cuda.trim().to_string(),
            max_ptx_isa,
            origin: DRIVER_TABLE.to_string(),
        })
    }
}

/// Where a floor read from a file's `[driver]` comes from.
const DRIVER_TABLE: &str = "kiln-audit.toml [driver]";

#[cfg(test)]
mod tests {
    use super::*;

    fn version(major: u32, minor: u32) -> ToolkitVersion {
        ToolkitVersion {
            major,
            minor,
            patch: 0,
        }
    }

    #[test]
    fn each_toolkit_writes_its_ptx_isa() {
        for ((major, minor), isa) in [
            ((11, 8), "7.8"),
            ((12, 0), "8.0"),
            ((12, 4), "8.4"),
            ((12, 6), "8.5"),
            ((12, 8), "8.7"),
            ((12, 9), "8.8"),
            ((13, 0), "9.0"),
            ((13, 1), "9.1"),
            ((13, 5), "9.5"),
        ] {
            assert_eq!(
                PtxIsa::written_by(version(major, minor)).to_string(),
                isa,
                "CUDA {major}.{minor}"
            );
        }
    }

    #[test]
    fn the_floor_is_read_from_the_driver_table_or_defaults_to_cuda_13_0() {
        let default = DriverFloor::default_floor();
        assert_eq!(DriverFloor::parse("").unwrap(), default);
        assert_eq!(
            DriverFloor::parse("[default]\nmax_registers = 64\n").unwrap(),
            default
        );
        let floor =
            DriverFloor::parse("[driver]\nmin_cuda = \"12.8\"\nmax_ptx_isa = \"8.7\"\n").unwrap();
        assert_eq!(
            (floor.min_cuda.as_str(), floor.max_ptx_isa.to_string()),
            ("12.8", "8.7".to_string())
        );
        assert_eq!(floor.origin, "kiln-audit.toml [driver]");
        let derived = DriverFloor::parse("[driver]\nmin_cuda = \"13.5\"\n").unwrap();
        assert_eq!(derived.max_ptx_isa.to_string(), "9.5");
        for (text, error) in [
            ("[driver]\n", "[driver] min_cuda must be set (\"13.0\")"),
            (
                "[driver]\nmin_cuda = \"13.0\"\nmax_ptx = \"9.0\"\n",
                "[driver] has no key `max_ptx` (it takes min_cuda and max_ptx_isa)",
            ),
            (
                "[driver]\nmin_cuda = 13\n",
                "[driver] min_cuda must be a string (\"13.0\")",
            ),
            (
                "[driver]\nmin_cuda = \"new\"\n",
                "[driver] min_cuda must be a CUDA version (\"13.0\")",
            ),
            (
                "[driver]\nmin_cuda = \"13.0\"\nmax_ptx_isa = \"9\"\n",
                "[driver] max_ptx_isa must be a PTX ISA version (\"9.0\")",
            ),
        ] {
            assert_eq!(DriverFloor::parse(text).unwrap_err(), error, "{text}");
        }
    }

    /// A FIFO as the audit file stops the build with one line, at once.
    #[cfg(unix)]
    #[test]
    fn a_fifo_as_the_audit_file_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(AUDIT_FILE);
        crate::regular::mkfifo(&fifo);
        let err = DriverFloor::read(&fifo).unwrap_err().to_string();
        assert!(err.contains("is a FIFO, not a regular file"), "{err}");
    }

    #[test]
    fn a_missing_file_is_the_default_floor() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            DriverFloor::read(&dir.path().join(AUDIT_FILE)).unwrap(),
            DriverFloor::default_floor()
        );
        // Another file (`KernelBuild::audit_file`) is named as it is.
        let other = dir.path().join("floor.toml");
        std::fs::write(&other, "[driver]\nmin_cuda = \"12.8\"\n").unwrap();
        let floor = DriverFloor::read(&other).unwrap();
        assert_eq!(floor.origin, "floor.toml [driver]");
        assert_eq!(floor.max_ptx_isa.to_string(), "8.7");
    }
}
