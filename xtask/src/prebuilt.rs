//! `cargo xtask prebuilt --manifest-path CRATE/Cargo.toml [--out DIR]`:
//! builds a crate's kernels with the toolkit and writes them, with their
//! manifest, into `CRATE/kernels-prebuilt/` (which its package then ships),
//! through `cuda_build::prebuilt::export`. Only the wiring is here: which
//! cargo build, which of its build scripts wrote the kernels, and the
//! folder, kiln's output folder (`kiln_output`): checked before the build
//! (a folder kiln did not write is refused, nothing touched), made beside
//! its place and swapped in, an earlier one's listed files alone removed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};
use cargo_kiln::project::{cargo_stdout, kernel_manifest};

use crate::cli::PrebuiltArgs;
use crate::workspace;

/// Runs the command.
pub(crate) fn run(root: &Path, args: &PrebuiltArgs) -> Result<()> {
    let manifest_path = std::path::absolute(&args.manifest_path)?;
    let crate_dir = manifest_path
        .parent()
        .context("--manifest-path names no file in a dir")?
        .to_path_buf();
    let dest = match &args.out {
        Some(dir) => std::path::absolute(dir)?,
        None => crate_dir.join(cuda_build::prebuilt::DEFAULT_DIR),
    };
    // Checked before the build: a folder kiln did not write is refused,
    // nothing touched; the crate and the checkout are never replaced.
    let protect = [crate_dir.as_path(), manifest_path.as_path(), root];
    let output =
        kiln_output::Output::prepare(&dest, SPEC, &protect).map_err(|e| anyhow!("--out: {e}"))?;
    for note in output.notes() {
        eprintln!("cargo xtask prebuilt: {note}");
    }
    let build_manifest = build_with_toolkit(root, &manifest_path, &crate_dir)?;
    // `export` writes a new folder at a path that does not exist yet: one
    // inside the staging folder, whose files then move up into it.
    let inner = output.path().join(".export");
    let prebuilt = cuda_build::prebuilt::export(&build_manifest, &inner)?;
    for entry in std::fs::read_dir(&inner)? {
        let entry = entry?;
        std::fs::rename(entry.path(), output.path().join(entry.file_name()))?;
    }
    std::fs::remove_dir(&inner)?;
    for note in output.commit()? {
        eprintln!("cargo xtask prebuilt: {note}");
    }
    let modules: Vec<String> = prebuilt
        .modules
        .iter()
        .filter_map(|m| m.output.as_ref())
        .map(|o| o.display().to_string())
        .collect();
    println!(
        "wrote {}: {} ({}), from {} inputs",
        workspace::display(&dest),
        prebuilt.summary(),
        modules.join(", "),
        prebuilt.inputs.len()
    );
    Ok(())
}

/// The prebuilt folder as kiln's output folder: replaced by a re-run, and
/// adopted when an older xtask wrote it without a marker.
const SPEC: kiln_output::Spec = kiln_output::Spec {
    tool: "cargo xtask prebuilt",
    kind: "kernels-prebuilt",
    replace: true,
    legacy: Some(unmarked_prebuilt),
};

/// The files of a prebuilt folder an older xtask wrote (no marker): its
/// `prebuilt.toml` (a regular file that parses), the images it names and
/// the static CUDA runtime where present.
fn unmarked_prebuilt(dir: &Path) -> Option<Vec<String>> {
    let manifest = dir.join(cuda_build::prebuilt::MANIFEST);
    let meta = std::fs::symlink_metadata(&manifest).ok()?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    let prebuilt = cuda_build::prebuilt::read(dir).ok()?;
    let mut files = vec![cuda_build::prebuilt::MANIFEST.to_string()];
    for module in &prebuilt.modules {
        if let Some(output) = &module.output {
            files.push(output.to_str()?.to_string());
        }
    }
    if dir.join("libcudart_static.a").is_file() {
        files.push("libcudart_static.a".into());
    }
    Some(files)
}

/// Builds the crate with the toolkit kiln's own build finds (handed over as
/// `NVCC` unless a discovery variable is set), in `target/prebuilt`; returns
/// the path of the crate's build manifest.
fn build_with_toolkit(root: &Path, manifest_path: &Path, crate_dir: &Path) -> Result<PathBuf> {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(root)
        .env("CARGO_TARGET_DIR", root.join("target/prebuilt"))
        .stdout(Stdio::piped())
        .args([
            "build",
            "--message-format=json-render-diagnostics",
            "--manifest-path",
        ])
        .arg(manifest_path);
    let discovery_set = ["NVCC", "CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
        .iter()
        .any(|var| std::env::var_os(var).is_some());
    if !discovery_set {
        match crate::discovery::toolkit_present() {
            Some(found) => {
                cargo.env("NVCC", found.nvcc);
            }
            None => {
                bail!("no CUDA toolkit found: run `cargo xtask toolkit install` or set CUDA_PATH")
            }
        }
    }
    let stdout = cargo_stdout(cargo)?;
    kernel_manifest(&stdout, crate_dir).with_context(|| {
        format!(
            "no build script of {} wrote a kernel build manifest: does its build.rs run cuda_build::KernelBuild?",
            workspace::display(crate_dir)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_output::testing::names;
    use std::fs;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn run_into(krate: &Path, out: Option<&Path>) -> String {
        let args = PrebuiltArgs {
            manifest_path: krate.join("Cargo.toml"),
            out: out.map(Path::to_path_buf),
        };
        run(&root(), &args).unwrap_err().to_string()
    }

    #[test]
    fn folders_kiln_did_not_write_are_refused_before_the_build() {
        let tmp = tempfile::tempdir().unwrap();
        let krate = tmp.path().join("k");
        fs::create_dir_all(krate.join(".git")).unwrap();
        fs::write(krate.join("Cargo.toml"), "[package]").unwrap();
        let mine = tmp.path().join("mine");
        fs::create_dir(&mine).unwrap();
        fs::write(mine.join("saxpy.fatbin"), "my own").unwrap();
        // A prebuilt folder with a file of the user's beside the images.
        let shipped = tmp.path().join("shipped");
        fs::create_dir(&shipped).unwrap();
        let example = root().join("examples/downstream/kernels-prebuilt");
        for file in names(&example) {
            fs::copy(example.join(&file), shipped.join(&file)).unwrap();
        }
        fs::write(shipped.join("NOTES.md"), "mine").unwrap();
        let before: Vec<Vec<String>> = [&krate, &mine, &shipped].map(|d| names(d)).into();
        for (out, says) in [
            (krate.clone(), "contains"),
            (tmp.path().to_path_buf(), "contains"),
            (krate.join("."), "contains"),
            (
                mine.clone(),
                "holds `saxpy.fatbin`, which kiln did not write",
            ),
            (
                shipped.clone(),
                "holds `NOTES.md`, which kiln did not write",
            ),
        ] {
            let err = run_into(&krate, Some(&out));
            assert!(
                err.starts_with("--out: ") && err.contains(says),
                "{out:?}: {err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
        let after: Vec<Vec<String>> = [&krate, &mine, &shipped].map(|d| names(d)).into();
        assert_eq!(before, after);
        assert_eq!(names(tmp.path()), ["k", "mine", "shipped"]);
    }

    #[test]
    fn a_prebuilt_folder_an_older_xtask_wrote_is_replaced_file_by_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kernels-prebuilt");
        fs::create_dir(&dir).unwrap();
        let example = root().join("examples/downstream/kernels-prebuilt");
        for file in names(&example) {
            fs::copy(example.join(&file), dir.join(&file)).unwrap();
        }
        assert_eq!(
            unmarked_prebuilt(&dir),
            Some(vec!["prebuilt.toml".into(), "saxpy.fatbin".into()])
        );
        let output = kiln_output::Output::prepare(&dir, SPEC, &[]).unwrap();
        fs::write(output.path().join("prebuilt.toml"), "new").unwrap();
        fs::write(output.path().join("other.fatbin"), "new").unwrap();
        output.commit().unwrap();
        assert_eq!(
            names(&dir),
            [kiln_output::MARKER, "other.fatbin", "prebuilt.toml"]
        );
        assert_eq!(names(tmp.path()), ["kernels-prebuilt"]);
        // Not a prebuilt folder: no manifest, or one that does not parse.
        fs::write(dir.join("prebuilt.toml"), "new").unwrap();
        assert_eq!(unmarked_prebuilt(&dir), None);
        assert_eq!(unmarked_prebuilt(tmp.path()), None);
    }
}
