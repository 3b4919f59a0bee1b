//! How nvcc is run, from the environment: the launcher put in front of every
//! compile (`<PREFIX>_NVCC_LAUNCHER=sccache`) and the host compiler nvcc uses
//! (`CUDAHOSTCXX`, else `NVCC_CCBIN`, passed as `-ccbin`). Both are checked
//! before anything compiles, so a wrong one is one line naming the variable.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::nvcc::Nvcc;

/// The host-compiler variables, in the order they are consulted.
pub(crate) const HOST_COMPILER_VARS: [&str; 2] = ["CUDAHOSTCXX", "NVCC_CCBIN"];

/// Variables nvcc reads by itself; they change what it produces, so a build
/// script reruns when they change.
pub(crate) const NVCC_OWN_VARS: [&str; 2] = ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"];

/// nvcc at `program`, with the launcher named by `launcher_var` and the host
/// compiler from [`HOST_COMPILER_VARS`], each checked.
pub(crate) fn nvcc_from_env(program: &Path, launcher_var: &str) -> Result<Nvcc, Error> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let launcher = match non_empty(launcher_var) {
        None => Vec::new(),
        Some(value) => {
            let mut words = shlex::split(&value)
                .filter(|w| !w.is_empty())
                .ok_or_else(|| Error::Setting {
                    var: launcher_var.to_string(),
                    value: value.clone(),
                    problem: "cannot be split into words (an open quote?)".into(),
                    fix: format!("quote it as a shell would, or unset {launcher_var}"),
                })?;
            let found = find_program(&words[0], &path).map_err(|problem| Error::Setting {
                var: launcher_var.to_string(),
                value: value.clone(),
                problem,
                fix: format!("install it, name it by path, or unset {launcher_var}"),
            })?;
            words[0] = found.display().to_string();
            words
        }
    };
    let mut ccbin = None;
    for var in HOST_COMPILER_VARS {
        if let Some(value) = non_empty(var) {
            let found = find_program(&value, &path).map_err(|problem| Error::Setting {
                var: var.to_string(),
                value: value.clone(),
                problem,
                fix: format!(
                    "set {var} to an installed host C++ compiler (a path, or a name on PATH), or unset it"
                ),
            })?;
            ccbin = Some((found, var.to_string()));
            break;
        }
    }
    Ok(Nvcc {
        program: program.to_path_buf(),
        launcher,
        ccbin,
        target_dir: None,
    })
}

fn non_empty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// A program named by path, or by name on `path`; it must be an executable
/// file.
pub(crate) fn find_program(name: &str, path: &OsString) -> Result<PathBuf, String> {
    let given = Path::new(name);
    let candidate = if given.components().count() > 1 || given.is_absolute() {
        if !given.exists() {
            return Err("does not exist".into());
        }
        given.to_path_buf()
    } else {
        std::env::split_paths(path)
            .map(|dir| dir.join(given))
            .find(|p| p.is_file())
            .ok_or_else(|| "not found on PATH".to_string())?
    };
    if !candidate.is_file() {
        return Err("is not a file".into());
    }
    if !is_executable(&candidate) {
        return Err("is not executable".into());
    }
    Ok(candidate)
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_: &Path) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_by_path_or_name() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        assert_eq!(
            find_program("/nonexistent/g++", &path).unwrap_err(),
            "does not exist"
        );
        assert_eq!(
            find_program("no-such-compiler-anywhere", &path).unwrap_err(),
            "not found on PATH"
        );
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let plain = dir.join("cxx");
        std::fs::write(&plain, "").unwrap();
        assert_eq!(
            find_program(plain.to_str().unwrap(), &path).unwrap_err(),
            "is not executable"
        );
        assert_eq!(
            find_program(dir.to_str().unwrap(), &path).unwrap_err(),
            "is not a file"
        );
    }
}
