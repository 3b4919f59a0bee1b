//! What a build hands on: Cargo directives (cfgs, link lines, metadata) and
//! the Rust file that embeds each fat-binary module as a `static`. Names come
//! from the caller's env prefix (`<PREFIX>_TOOLKIT_MAJOR`,
//! `<prefix>_modules.rs`), never from kiln's.

use std::fmt::Write as _;
use std::path::Path;

use crate::arch::Arch;
use crate::config::LinkMode;
use crate::error::{io, Error};
use crate::manifest::Manifest;
use crate::regular::Links;

/// Toolkit versions published as `cuda_ge_MAJOR_MINOR` cfgs.
const VERSION_CFGS: &[(u32, u32)] = &[
    (11, 8),
    (12, 0),
    (12, 4),
    (12, 8),
    (12, 9),
    (13, 0),
    (13, 1),
    (13, 2),
];

/// `cuda_enabled` / `cpu_only` and `cuda_ge_*` cfgs, each declared with
/// `rustc-check-cfg` first, and (with a toolkit) `<PREFIX>_TOOLKIT_MAJOR` /
/// `_MINOR` for `option_env!`.
pub(crate) fn cfg_directives(prefix: &str, version: Option<(u32, u32)>) -> Vec<String> {
    let mut lines = vec![
        "cargo::rustc-check-cfg=cfg(cuda_enabled)".to_string(),
        "cargo::rustc-check-cfg=cfg(cpu_only)".to_string(),
    ];
    for (major, minor) in VERSION_CFGS {
        lines.push(format!(
            "cargo::rustc-check-cfg=cfg(cuda_ge_{major}_{minor})"
        ));
    }
    match version {
        None => lines.push("cargo::rustc-cfg=cpu_only".to_string()),
        Some((tk_major, tk_minor)) => {
            lines.push("cargo::rustc-cfg=cuda_enabled".to_string());
            for (major, minor) in VERSION_CFGS {
                if (tk_major, tk_minor) >= (*major, *minor) {
                    lines.push(format!("cargo::rustc-cfg=cuda_ge_{major}_{minor}"));
                }
            }
            lines.push(format!(
                "cargo::rustc-env={prefix}_TOOLKIT_MAJOR={tk_major}"
            ));
            lines.push(format!(
                "cargo::rustc-env={prefix}_TOOLKIT_MINOR={tk_minor}"
            ));
        }
    }
    lines
}

/// Link lines for the static-library modules and the static CUDA runtime
/// (in `runtime_dir`: the toolkit's lib dir, or beside prebuilt libraries).
pub(crate) fn link_directives(
    manifest: &Manifest,
    libraries: &[String],
    out_dir: &Path,
    runtime_dir: &Path,
) -> Vec<String> {
    if !manifest.modules.iter().any(|m| m.link == LinkMode::Static) {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "cargo::rustc-link-search=native={}",
        out_dir.display()
    )];
    for lib in libraries {
        lines.push(format!("cargo::rustc-link-lib=static={lib}"));
    }
    lines.push(format!(
        "cargo::rustc-link-search=native={}",
        runtime_dir.display()
    ));
    for lib in [
        "static=cudart_static",
        "dylib=stdc++",
        "dylib=dl",
        "dylib=rt",
        "dylib=pthread",
    ] {
        lines.push(format!("cargo::rustc-link-lib={lib}"));
    }
    lines
}

/// `90,80`: arch numbers of nvcc names, joined.
pub(crate) fn arch_numbers(names: &[String], separator: &str) -> String {
    names
        .iter()
        .filter_map(|n| Arch::from_nvcc_name(n))
        .map(|a| a.number().to_string())
        .collect::<Vec<_>>()
        .join(separator)
}

/// Writes `text` to `path` unless the file already holds it (keeps mtimes
/// still, so nothing downstream rebuilds for nothing); returns whether it
/// wrote. Only a regular file or nothing is taken at `path`: a link, a
/// FIFO (which would block the read for ever), a folder or a device there
/// is refused, untouched. The text goes to a temp file beside it, renamed
/// over it, so a killed run leaves the old file or the new one, never half
/// of one; an existing file keeps its permissions, a new one gets 0644.
pub(crate) fn write_if_changed(path: &Path, text: &str) -> Result<bool, Error> {
    // The old file's permissions from the file the reader opened (a
    // regular file, not a link), not from another look at the path.
    let existing = match crate::regular::read_opened(path, u64::MAX, Links::Refuse)? {
        Some((_, old)) if old == text.as_bytes() => return Ok(false),
        Some((file, _)) => Some(io(path, file.metadata())?),
        None => None,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp = io(
        dir,
        tempfile::Builder::new()
            .prefix(".kiln-write-")
            .tempfile_in(dir),
    )?;
    let written = std::io::Write::write_all(&mut temp, text.as_bytes());
    io(temp.path(), written)?;
    let permissions = match &existing {
        Some(meta) => Some(meta.permissions()),
        #[cfg(unix)]
        None => Some(std::os::unix::fs::PermissionsExt::from_mode(0o644)),
        #[cfg(not(unix))]
        None => None,
    };
    if let Some(permissions) = permissions {
        io(temp.path(), temp.as_file().set_permissions(permissions))?;
    }
    temp.persist(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(true)
}

/// The names the generated Rust defines beside the modules' statics.
pub(crate) const GENERATED_NAMES: [&str; 2] = ["ALL", "IMAGES_FROM"];

/// The name of a module's `static` in the generated Rust (`a-b` -> `A_B`).
pub(crate) fn rust_ident(module: &str) -> String {
    module
        .to_ascii_uppercase()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
}

/// The Rust that embeds each fat-binary module as a `static`, and `ALL`.
pub(crate) fn modules_rust(
    manifest: &Manifest,
    version: Option<(u32, u32)>,
    image_type: &str,
) -> String {
    let version = version.unwrap_or((0, 0));
    let mut text = String::from("// @generated by cuda-build's KernelBuild. Do not edit.\n");
    let mut names = Vec::new();
    for module in manifest
        .modules
        .iter()
        .filter(|m| m.link == LinkMode::Fatbin)
    {
        let ident = rust_ident(&module.name);
        // Older manifests carry the archs once, for every module.
        let (sass, ptx) = if module.sass.is_empty() && module.ptx.is_empty() {
            (&manifest.sass, &manifest.ptx)
        } else {
            (&module.sass, &module.ptx)
        };
        let (sass, ptx) = (arch_numbers(sass, ", "), arch_numbers(ptx, ", "));
        let image = match &module.output {
            Some(path) if manifest.cuda_enabled => {
                format!("include_bytes!({:?})", path.display().to_string())
            }
            _ => "&[]".to_string(),
        };
        let kernels: Vec<String> = module
            .kernel_names()
            .iter()
            .map(|k| format!("{k:?}"))
            .collect();
        let what = if manifest.cuda_enabled {
            format!("SASS for `{sass}`, PTX for `{ptx}`")
        } else {
            "empty: CPU-only build".to_string()
        };
        let sources: Vec<String> = module
            .sources
            .iter()
            .filter_map(|s| s.file_name())
            .map(|s| format!("`{}`", s.to_string_lossy()))
            .collect();
        let sources = if sources.is_empty() {
            format!("`{}.cu`", module.name)
        } else {
            sources.join(", ")
        };
        let _ = write!(
            text,
            "/// {sources}: {what}.\npub static {ident}: {image_type} = {image_type} {{\n    name: {:?},\n    \
             image: {image},\n    sass: &[{sass}],\n    ptx: &[{ptx}],\n    kernels: &[{}],\n    toolkit: {version:?},\n}};\n",
            module.name,
            kernels.join(", "),
        );
        names.push(format!("&{ident}"));
    }
    let _ = writeln!(
        text,
        "/// Every embedded module.\npub static ALL: &[&{image_type}] = &[{}];",
        names.join(", ")
    );
    let _ = writeln!(
        text,
        "/// Where the embedded images came from.\npub const IMAGES_FROM: &str = {:?};",
        images_from(manifest)
    );
    text
}

/// `nvcc of CUDA 13.0.88 at /usr/local/cuda`, `prebuilt kernels-prebuilt:
/// CUDA 13.0, sm_80 sm_90 + compute_90`, or `none: CPU-only build`.
fn images_from(manifest: &Manifest) -> String {
    if !manifest.cuda_enabled {
        return "none: CPU-only build".to_string();
    }
    if let Some(prebuilt) = &manifest.prebuilt {
        return format!(
            "prebuilt {}: {}",
            prebuilt.dir.display(),
            crate::prebuilt::summary(&prebuilt.toolkit, &manifest.sass, &manifest.ptx)
        );
    }
    match &manifest.toolkit {
        Some(tk) => format!("nvcc of CUDA {} at {}", tk.version, tk.root.display()),
        None => "nvcc".to_string(),
    }
}

#[cfg(all(test, unix))]
mod write_tests {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    use std::path::Path;

    use super::write_if_changed;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Only the file itself in the folder: no temp file left behind.
    fn only(dir: &Path, name: &str) {
        let names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [name.to_string()], "{names:?}");
    }

    #[test]
    fn a_new_file_is_written_whole_and_the_same_text_not_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bindings.rs");
        assert!(write_if_changed(&path, "one").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        assert_eq!(mode(&path), 0o644);
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(!write_if_changed(&path, "one").unwrap());
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            before
        );
        only(dir.path(), "bindings.rs");
    }

    #[test]
    fn a_changed_file_keeps_its_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bindings.rs");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(write_if_changed(&path, "new").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(mode(&path), 0o600);
        only(dir.path(), "bindings.rs");
    }

    /// A FIFO would block the read for ever; a link would be written
    /// through; a folder cannot be a file: each is refused at once, left as
    /// it is, and nothing else appears beside it.
    #[test]
    fn a_fifo_a_link_or_a_folder_at_the_path_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.rs");
        crate::regular::mkfifo(&fifo);
        let error = write_if_changed(&fifo, "text").unwrap_err().to_string();
        assert!(
            error.contains("not a regular file") && error.contains("fifo.rs"),
            "{error}"
        );
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());

        let target = dir.path().join("elsewhere.rs");
        std::fs::write(&target, "theirs").unwrap();
        let link = dir.path().join("link.rs");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = write_if_changed(&link, "text").unwrap_err().to_string();
        assert!(error.contains("remove it and rerun"), "{error}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());

        let folder = dir.path().join("folder.rs");
        std::fs::create_dir(&folder).unwrap();
        assert!(write_if_changed(&folder, "text").is_err());
        assert!(folder.is_dir());

        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["elsewhere.rs", "fifo.rs", "folder.rs", "link.rs"]);
    }
}
