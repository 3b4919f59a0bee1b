//! Where clang finds the headers a kernel header includes, without the user
//! listing them: the CUDA toolkit's (`cuda_fp16.h`, `cuda_bf16.h`, CCCL) and
//! the compiler's builtin headers (`stddef.h`, `limits.h`, ...), which the
//! libclang of the PyPI wheel does not ship.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `<root>/include` and, where the toolkit has it (CUDA 13), `<root>/include/cccl`.
pub(super) fn toolkit_include_dirs(root: &Path) -> Vec<PathBuf> {
    [root.join("include"), root.join("include").join("cccl")]
        .into_iter()
        .filter(|dir| dir.is_dir())
        .collect()
}

/// The toolkit a build would use (`NVCC`, `CUDA_PATH`, ..., `PATH`, the
/// system directories), if any.
pub(super) fn discovered_toolkit() -> Option<PathBuf> {
    crate::toolkit::discover(&crate::toolkit::ProcessEnv, &[])
        .toolkit
        .map(|toolkit| toolkit.root)
}

/// A directory of compiler builtin headers (the one holding `stddef.h`), in
/// order of preference: libclang's own resource dir, that of a `clang` next
/// to libclang or on `PATH`, then the C++ compiler's (`CXX`, else `c++`;
/// GCC's builtin headers serve clang for the declarations bindings need).
pub(super) fn builtin_include_dir(libclang: &Path) -> Option<PathBuf> {
    let lib_dir = libclang.parent()?;
    resource_dir_beside(lib_dir)
        .or_else(|| {
            let beside = lib_dir.join("../bin/clang");
            let clang = if beside.is_file() {
                beside
            } else {
                PathBuf::from("clang")
            };
            ask(&clang, "-print-resource-dir").map(|dir| dir.join("include"))
        })
        .filter(|dir| has_builtins(dir))
        .or_else(|| {
            let cxx = std::env::var_os("CXX")
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "c++".into());
            ask(Path::new(&cxx), "-print-file-name=include")
        })
        .filter(|dir| has_builtins(dir))
}

/// `<lib>/clang/<version>/include` (LLVM's layout), newest version first.
fn resource_dir_beside(lib_dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(lib_dir.join("clang"))
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("include")))
        .filter(|dir| has_builtins(dir))
        .collect();
    found.sort();
    found.pop()
}

fn has_builtins(dir: &Path) -> bool {
    dir.join("stddef.h").is_file()
}

/// Runs `program flag` and reads one path from its stdout.
fn ask(program: &Path, flag: &str) -> Option<PathBuf> {
    let output = Command::new(program).arg(flag).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let path = PathBuf::from(text.trim());
    path.is_absolute().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llvm_layout_gives_the_newest_resource_dir_with_builtins() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tmp.path();
        for (version, builtins) in [("17", true), ("18", true), ("19", false)] {
            let include = lib.join("clang").join(version).join("include");
            std::fs::create_dir_all(&include).unwrap();
            if builtins {
                std::fs::write(include.join("stddef.h"), "").unwrap();
            }
        }
        std::fs::write(lib.join("libclang.so"), "").unwrap();
        assert_eq!(
            builtin_include_dir(&lib.join("libclang.so")),
            Some(lib.join("clang/18/include")),
            "19 has no stddef.h"
        );
        std::fs::create_dir_all(lib.join("cuda/include")).unwrap();
        assert_eq!(
            toolkit_include_dirs(&lib.join("cuda")),
            [lib.join("cuda/include")],
            "no cccl dir before CUDA 13"
        );
    }
}
