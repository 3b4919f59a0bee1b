//! `cargo xtask build [--arch SPEC] [--release]`: builds the workspace with
//! those archs and reports, per module, what the fat binary holds (read back
//! with cuobjdump), its size and its compile time, and what the kernel cache
//! served.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cargo_metadata::Message;
use cuda_build::{ArchSpec, Manifest, SupportedArchs};

use crate::cli::BuildArgs;
use crate::discovery::kiln_discovery;

/// Checks an arch spec before anything is built: against the toolkit that
/// would be used, or CUDA 13.0's list when there is none. Exits 2 with one
/// line on a bad spec.
pub(crate) fn validate_spec_or_exit(root: &Path, spec: &str, origin: &str) {
    let supported = kiln_discovery(root)
        .and_then(|d| d.toolkit)
        .and_then(|tk| tk.supported_archs().ok())
        .unwrap_or_else(SupportedArchs::cuda_13_0_builtin);
    let checked = ArchSpec::parse(spec, origin).and_then(|parsed| {
        if parsed.needs_native_probe() {
            // `native` is probed by the build itself, on the machine it runs on.
            return Ok(());
        }
        parsed
            .resolve(&supported, origin, || Ok(Vec::new()))
            .map(|_| ())
    });
    if let Err(e) = checked {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

/// Runs the command.
pub(crate) fn run(root: &Path, args: &BuildArgs) -> Result<()> {
    let arch = args.arch.arch.as_deref();
    if let Some(spec) = arch {
        validate_spec_or_exit(root, spec, "--arch");
    }
    let started = Instant::now();
    let manifest = build_workspace(root, arch, args.release)?;
    print!("{}", report(&manifest, &Cuobjdump::find(root)));
    println!("built in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `cargo build --workspace` with `KILN_CUDA_ARCHS=spec` (when given); returns
/// the manifest cuda-sys's build script wrote.
pub(crate) fn build_workspace(root: &Path, spec: Option<&str>, release: bool) -> Result<Manifest> {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(root)
        .args([
            "build",
            "--workspace",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped());
    if release {
        cargo.arg("--release");
    }
    if let Some(spec) = spec {
        cargo.env("KILN_CUDA_ARCHS", spec);
    }
    let stdout = cargo_stdout(cargo)?;
    let out_dir =
        cuda_sys_out_dir(&stdout).context("cargo did not report cuda-sys's build script output")?;
    Ok(Manifest::read(
        &out_dir.join(cuda_build::manifest::file_name("KILN")),
    )?)
}

/// Runs a cargo build whose stdout is piped (its JSON messages); fails
/// when the build does.
pub(crate) fn cargo_stdout(mut cargo: Command) -> Result<Vec<u8>> {
    let output = cargo
        .spawn()
        .context("cannot run cargo")?
        .wait_with_output()?;
    if !output.status.success() {
        bail!("cargo build failed ({})", output.status);
    }
    Ok(output.stdout)
}

/// The OUT_DIR of cuda-sys's build script, from cargo's JSON messages.
pub(crate) fn cuda_sys_out_dir(messages: &[u8]) -> Option<PathBuf> {
    Message::parse_stream(messages)
        .map_while(Result::ok)
        .filter_map(|msg| match msg {
            Message::BuildScriptExecuted(script) => Some(script),
            _ => None,
        })
        .filter(|script| script.package_id.repr.contains("cuda-sys"))
        .map(|script| script.out_dir.into_std_path_buf())
        .find(|dir| dir.join(cuda_build::manifest::file_name("KILN")).exists())
}

/// cuobjdump, to read back what a fat binary holds.
pub(crate) struct Cuobjdump(Option<PathBuf>);

impl Cuobjdump {
    pub(crate) fn find(root: &Path) -> Self {
        Self(
            kiln_discovery(root)
                .and_then(|d| d.toolkit)
                .map(|tk| tk.tool("cuobjdump"))
                .filter(|p| p.is_file()),
        )
    }

    /// The tool, when the toolkit has one.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.0.as_deref()
    }

    /// `(sass, ptx)` arch lists inside `file`, e.g. `(["sm_80","sm_90"], ["sm_90"])`.
    pub(crate) fn contents(&self, file: &Path) -> Option<(Vec<String>, Vec<String>)> {
        let tool = self.0.as_ref()?;
        let list = |flag: &str| -> Option<Vec<String>> {
            let out = Command::new(tool).arg(flag).arg(file).output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let mut archs: Vec<String> = text
                .lines()
                .filter_map(|l| l.rsplit('.').nth(1).map(str::to_string))
                .filter(|a| a.starts_with("sm_"))
                .collect();
            archs.sort();
            archs.dedup();
            Some(archs)
        };
        let ptx = list("--list-ptx")?
            .iter()
            .map(|a| a.replacen("sm_", "compute_", 1))
            .collect();
        Some((list("--list-elf")?, ptx))
    }
}

/// The per-module table.
fn report(manifest: &Manifest, cuobjdump: &Cuobjdump) -> String {
    let mut text = String::new();
    if !manifest.cuda_enabled {
        text.push_str(&format!(
            "CPU-only build: {}\n",
            manifest.cpu_only_reason.as_deref().unwrap_or("no toolkit")
        ));
        return text;
    }
    let toolkit = manifest.toolkit.as_ref().map_or(String::new(), |t| {
        format!("CUDA {} ({})", t.version, t.found_by)
    });
    text.push_str(&format!(
        "archs `{}` from {}: SASS {} PTX {}; {toolkit}\n",
        manifest.arch_spec,
        manifest.arch_origin,
        manifest.sass.join(","),
        manifest.ptx.join(",")
    ));
    text.push_str(&format!(
        "{:<12} {:<7} {:<28} {:<16} {:>10} {:>10}\n",
        "module", "link", "SASS (cuobjdump)", "PTX (cuobjdump)", "size", "compile"
    ));
    for module in &manifest.modules {
        let (sass, ptx) = module
            .output
            .as_deref()
            .and_then(|f| cuobjdump.contents(f))
            .map_or(("?".to_string(), "?".to_string()), |(s, p)| {
                (s.join(","), p.join(","))
            });
        let compile = match module.compile_ms {
            Some(ms) => format!("{:.1} s", ms as f64 / 1000.0),
            None => "up to date".to_string(),
        };
        text.push_str(&format!(
            "{:<12} {:<7} {:<28} {:<16} {:>10} {:>10}\n",
            module.name,
            format!("{:?}", module.link).to_lowercase(),
            sass,
            ptx,
            human_size(module.size_bytes),
            compile
        ));
    }
    if let Some(cache) = &manifest.cache {
        text.push_str(&format!("{cache}\n"));
    }
    text
}

fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}
