//! `cargo kiln codegen [--check]`: regenerates a crate's committed bindings
//! from its kernels' headers with cuda-build's codegen (bindgen), using the
//! libclang and CUDA headers of the toolkit kiln finds (the crate's own, the
//! user's store, or `LIBCLANG_PATH`), so a crate needs no codegen crate of
//! its own; `--check` fails when the committed file differs. With
//! `--sources`, the kernels the crate's `.cu` sources define get typed
//! declarations too (a vendored tree with no `KILN_KERNEL` header).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use cuda_build::codegen::{read_committed, write_if_changed, Codegen};

use crate::project::Project;

/// `cargo kiln codegen`.
#[derive(Debug, Args)]
pub struct CodegenArgs {
    /// The headers' folder, relative to the crate (every `*.h` in it gets bindings).
    #[arg(long, value_name = "DIR", default_value = "kernels/include")]
    pub headers: PathBuf,
    /// The generated file, relative to the crate.
    #[arg(long, value_name = "FILE", default_value = "src/bindings.rs")]
    pub out: PathBuf,
    /// The Rust path the generated code names kiln's ABI traits through.
    #[arg(long, value_name = "PATH", default_value = "::gpu_core")]
    pub abi_path: String,
    /// Also implement cudarc's `DeviceRepr` for every generated type, so a
    /// crate launching with plain cudarc passes header structs by value.
    #[arg(long)]
    pub cudarc_device_repr: bool,
    /// With --cudarc-device-repr: put those impls behind this Cargo feature of the crate.
    #[arg(long, value_name = "FEATURE", requires = "cudarc_device_repr")]
    pub cudarc_feature: Option<String>,
    /// Also declare every kernel the `.cu` sources of the modules in this
    /// kernels folder (its `kiln.toml`, default `kernels`) define: vendored
    /// kernels with no header get typed launches. Without a headers folder,
    /// the kernels folder stands for it (pass it to `check_bindings`).
    #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = "kernels")]
    pub sources: Option<PathBuf>,
    /// With --sources: the config file naming the modules (the one the
    /// build script gives `KernelBuild::config_file`), relative to the
    /// crate; default DIR/kiln.toml. Without either, --sources refuses.
    #[arg(long, value_name = "FILE", requires = "sources")]
    pub kiln_toml: Option<PathBuf>,
    /// Write nothing; fail when the committed file is not what codegen writes.
    #[arg(long)]
    pub check: bool,
}

impl CodegenArgs {
    /// The command line that regenerates the file, as the file and the
    /// build's stale-bindings error name it.
    fn command(&self) -> String {
        let mut command = String::from("cargo kiln codegen");
        if self.headers != Path::new("kernels/include") {
            command += &format!(" --headers {}", self.headers.display());
        }
        if self.out != Path::new("src/bindings.rs") {
            command += &format!(" --out {}", self.out.display());
        }
        if self.abi_path != "::gpu_core" {
            command += &format!(" --abi-path {}", self.abi_path);
        }
        if self.cudarc_device_repr {
            command += " --cudarc-device-repr";
        }
        if let Some(feature) = &self.cudarc_feature {
            command += &format!(" --cudarc-feature {feature}");
        }
        match &self.sources {
            Some(dir) if dir == Path::new("kernels") => command += " --sources",
            Some(dir) => command += &format!(" --sources {}", dir.display()),
            None => {}
        }
        if let Some(file) = &self.kiln_toml {
            command += &format!(" --kiln-toml {}", file.display());
        }
        command
    }
}

/// Regenerates (or with `--check`, compares) the crate's bindings.
pub fn run(project: &Project, args: &CodegenArgs) -> Result<()> {
    let mut headers = project.dir.join(&args.headers);
    let sources = args.sources.as_ref().map(|dir| project.dir.join(dir));
    if let Some(dir) = &sources {
        if !dir.is_dir() {
            return Err(crate::error::usage_error!(
                "no kernels folder at {}; pass --sources DIR (the folder of kiln.toml, relative to the crate)",
                dir.display()
            ));
        }
        let config = args.kiln_toml.as_ref().map(|f| project.dir.join(f));
        if let Some(file) = config.as_ref().filter(|f| !f.is_file()) {
            return Err(crate::error::usage_error!(
                "--kiln-toml {}: no such file; name the config file the build script uses, relative to the crate",
                project.display(file)
            ));
        }
        if config.is_none() && !dir.join("kiln.toml").is_file() {
            return Err(crate::error::usage_error!(
                "{} has no kiln.toml, so nothing says which modules a build makes of its sources; write one, or pass --kiln-toml FILE (the config file the build script uses)",
                project.display(dir)
            ));
        }
        // A vendored tree may have no headers folder: its kernels folder
        // stands for it (the headers directly in it, if any).
        if !headers.is_dir() && args.headers == Path::new("kernels/include") {
            headers = dir.clone();
        }
    }
    if !headers.is_dir() {
        return Err(crate::error::usage_error!(
            "no headers folder at {}; pass --headers DIR (relative to the crate)",
            headers.display()
        ));
    }
    point_bindgen_at_libclang(project)?;
    let mut codegen = Codegen::new(&headers)
        .root(&project.dir)
        .include_dir(cuda_build::header::include_dir())
        .abi_path(&args.abi_path)
        .regenerate_with(&args.command())
        .cudarc_device_repr(args.cudarc_device_repr);
    if let Some(feature) = &args.cudarc_feature {
        codegen = codegen.cudarc_feature(feature);
    }
    if let Some(dir) = &sources {
        codegen = codegen.sources(dir);
    }
    if let Some(file) = &args.kiln_toml {
        codegen = codegen.sources_config(project.dir.join(file));
    }
    if let Some(toolkit) = project.discovery().toolkit {
        codegen = codegen.toolkit(toolkit.root);
    }
    let generated = codegen.generate().map_err(explain)?;
    for warning in &generated.warnings {
        eprintln!("cargo kiln codegen: warning: {warning}");
    }
    let path = project.dir.join(&args.out);
    let shown = project.display(&path);
    if args.check {
        let committed = read_committed(&path)?.unwrap_or_default();
        if committed != generated.text {
            bail!(
                "{shown} is not what codegen writes for {}; run `{}` and commit it",
                project.display(&headers),
                args.command()
            );
        }
        println!("{shown} is up to date");
    } else if write_if_changed(&path, &generated.text)? {
        println!("wrote {shown}");
    } else {
        println!("{shown} is up to date");
    }
    Ok(())
}

/// A codegen error as the user reads it: libclang's first diagnostic (or
/// whatever failed) as it is; the advice to install libclang only when it
/// could not be loaded.
fn explain(e: cuda_build::Error) -> anyhow::Error {
    match e {
        cuda_build::Error::Libclang { .. } => {
            anyhow::anyhow!("{e}, or run `cargo kiln toolkit install` (it installs one)")
        }
        other => other.into(),
    }
}

/// bindgen loads libclang at run time: unless the user chose one, the one
/// the toolkit install put beside the toolkit kiln finds.
fn point_bindgen_at_libclang(project: &Project) -> Result<()> {
    if std::env::var_os("LIBCLANG_PATH").is_some() {
        return Ok(());
    }
    match crate::doctor::find_libclang(&project.toolkit_dir()) {
        // The process is single-threaded here: nothing else reads the
        // environment while it changes.
        Ok(dir) => std::env::set_var("LIBCLANG_PATH", dir),
        Err(why) => eprintln!("cargo kiln codegen: libclang {why}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(headers: &str, out: &str, abi: &str) -> CodegenArgs {
        CodegenArgs {
            headers: headers.into(),
            out: out.into(),
            abi_path: abi.into(),
            cudarc_device_repr: false,
            cudarc_feature: None,
            sources: None,
            kiln_toml: None,
            check: false,
        }
    }

    /// The regression: every codegen error, a syntax error in the user's
    /// header too, began with advice to install libclang.
    #[test]
    fn only_a_missing_libclang_gets_the_install_advice() {
        let syntax = cuda_build::Error::Codegen {
            message: "kernels/include/k.h:3: unknown type name 'flaot'".into(),
        };
        assert_eq!(
            format!("{:#}", explain(syntax)),
            "codegen: kernels/include/k.h:3: unknown type name 'flaot'"
        );
        let missing = cuda_build::Error::Libclang {
            reason: "no libclang.so in /x".into(),
        };
        assert_eq!(
            format!("{:#}", explain(missing)),
            "codegen: cannot load libclang (no libclang.so in /x); set LIBCLANG_PATH to the directory holding libclang.so, or run `cargo kiln toolkit install` (it installs one)"
        );
    }

    #[test]
    fn the_regenerating_command_names_only_what_differs_from_the_defaults() {
        let defaults = args("kernels/include", "src/bindings.rs", "::gpu_core");
        assert_eq!(defaults.command(), "cargo kiln codegen");
        assert_eq!(
            args("inc", "src/gen.rs", "crate::abi").command(),
            "cargo kiln codegen --headers inc --out src/gen.rs --abi-path crate::abi"
        );
        let mut cudarc = defaults;
        cudarc.cudarc_device_repr = true;
        cudarc.cudarc_feature = Some("cudarc".into());
        assert_eq!(
            cudarc.command(),
            "cargo kiln codegen --cudarc-device-repr --cudarc-feature cudarc"
        );
        let mut sources = args("kernels/include", "src/bindings.rs", "::gpu_core");
        sources.sources = Some("kernels".into());
        assert_eq!(sources.command(), "cargo kiln codegen --sources");
        sources.sources = Some("vendor/kernels".into());
        assert_eq!(
            sources.command(),
            "cargo kiln codegen --sources vendor/kernels"
        );
        sources.kiln_toml = Some("build/kiln.toml".into());
        assert_eq!(
            sources.command(),
            "cargo kiln codegen --sources vendor/kernels --kiln-toml build/kiln.toml"
        );
    }
}
