//! Another toolkit than the kernels serve, said in the build: one whose PTX
//! the driver floor (`kiln-audit.toml [driver]`) cannot JIT, and one the
//! user named that cannot compile, passed over for what the build took.

use std::path::Path;

use super::Vars;
use crate::error::Error;
use crate::floor::{self, DriverFloor, PtxIsa};
use crate::settings;
use crate::toolkit::{Discovery, ProcessEnv, Toolkit};

/// The toolkit's PTX against the driver floor: one warning naming the
/// three fixes when the floor's drivers cannot JIT it, an error under
/// `<P>_REQUIRE_CUDA`.
pub(super) fn check_floor(
    audit_file: &Path,
    toolkit: &Toolkit,
    vars: &Vars,
    cargo: &mut Vec<String>,
) -> Result<(), Error> {
    let floor = DriverFloor::read(audit_file)?;
    let isa = PtxIsa::written_by(toolkit.version);
    if isa <= floor.max_ptx_isa {
        return Ok(());
    }
    let store = crate::toolkit::store_default(&ProcessEnv)
        .map(|default| default.join("cuda"))
        .filter(|root| {
            root.join("bin").join("nvcc").is_file()
                && !crate::toolkit::same_root(root, &toolkit.root)
        });
    let pinned = match store {
        Some(root) => format!(
            "the toolkit `cargo kiln toolkit install` made the default, at {}, \
             which {} comes before: set CUDA_PATH to it",
            root.display(),
            toolkit.found_by
        ),
        None => "the pinned toolkit (`cargo kiln toolkit install`)".to_string(),
    };
    let detail = format!(
        "CUDA {} ({}, {}) writes PTX ISA {isa}, which the oldest driver these kernels \
         serve, CUDA {} ({}; PTX ISA {}), cannot JIT: build with {pinned}, build SASS \
         only, for every GPU they target ({} or kiln.toml's archs, each item `-real`), \
         or raise the floor in {} [driver]",
        toolkit.version,
        toolkit.found_by,
        toolkit.root.display(),
        floor.min_cuda,
        floor.origin,
        floor.max_ptx_isa,
        vars.archs,
        audit_file
            .file_name()
            .map_or(floor::AUDIT_FILE.into(), |name| name.to_string_lossy()),
    );
    if settings::switch(&vars.require)? == Some(true) {
        return Err(Error::PtxAboveFloor {
            var: vars.require.clone(),
            detail,
        });
    }
    cargo.push(format!("cargo::warning={detail}"));
    Ok(())
}

/// The variables a user sets to name a toolkit: one that cannot compile is
/// not passed over in silence.
const USER_NAMED: &[&str] = &["NVCC", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"];

/// What the build took in place of a toolkit the user named.
pub(super) enum Taken<'a> {
    /// A later place's toolkit.
    Toolkit(&'a Toolkit),
    /// The prebuilt kernels, of this toolkit version.
    Prebuilt(&'a str),
    /// Nothing: the build is CPU-only.
    Nothing,
}

/// The toolkits the user named that cannot compile (`CUDA_PATH=/x (no
/// bin/nvcc)`), in search order; under `<P>_REQUIRE_CUDA` the first is the
/// build's error. Other places set but unusable (`KILN_TOOLKIT_HOME`, a
/// failing nvcc on `PATH`) are a warning each, as before.
pub(super) fn passed_over(
    discovery: Option<&Discovery>,
    require: bool,
    vars: &Vars,
    cargo: &mut Vec<String>,
) -> Result<Vec<String>, Error> {
    let (named, other): (Vec<_>, Vec<_>) = discovery
        .into_iter()
        .flat_map(Discovery::misconfigured)
        .partition(|p| USER_NAMED.contains(&p.place.as_str()));
    if let (true, Some(first)) = (require, named.first()) {
        return Err(Error::ToolkitUnusable {
            var: vars.require.clone(),
            probe: first.to_string(),
        });
    }
    for probe in other {
        cargo.push(format!("cargo::warning={probe}: ignored, looking further"));
    }
    Ok(named.iter().map(ToString::to_string).collect())
}

/// One warning for the toolkits the user named and the build passed over:
/// what it took instead and the CUDA its kernels need at run time.
pub(super) fn warn_passed_over(passed_over: &[String], taken: Taken<'_>, cargo: &mut Vec<String>) {
    if passed_over.is_empty() {
        return;
    }
    let (took, cuda) = match taken {
        Taken::Toolkit(tk) => (
            format!(
                "CUDA {} ({}, {})",
                tk.version,
                tk.found_by,
                tk.root.display()
            ),
            Some((tk.version.major, tk.version.minor)),
        ),
        Taken::Prebuilt(version) => (
            format!("the prebuilt kernels of CUDA {version}"),
            Some(crate::prebuilt::major_minor(version)),
        ),
        Taken::Nothing => ("no kernels (CPU-only)".to_string(), None),
    };
    let needs = match cuda {
        Some((major, minor)) => format!(
            ", whose kernels need a CUDA {major} driver at run time \
             ({major}.{minor} or newer to JIT their PTX)"
        ),
        None => String::new(),
    };
    cargo.push(format!(
        "cargo::warning={} cannot compile CUDA: the build took {took} instead{needs}",
        passed_over.join("; ")
    ));
}
