//! One nvcc step that proves its output: nvcc writes into a temp dir made
//! for the step, each file it was asked for must be there and not empty
//! after it exits 0, and a fat binary must hold the archs the generated
//! module will declare, before anything is moved into place or stored.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Context;
use crate::arch::Arch;
use crate::cache;
use crate::error::{io, Error};
use crate::fatbin::{self, FatbinError};
use crate::nvcc::{first_diagnostic, shell_line, unsupported_host_compiler};

/// What a step's output must hold before it is used: for a fat binary, SASS
/// for `sass` and PTX for `ptx` (what the generated module declares);
/// objects and archives are not fat binaries and are only checked to exist.
#[derive(Debug, Clone, Default)]
pub(super) struct Expect {
    fatbin: Option<(Vec<Arch>, Vec<Arch>)>,
}

impl Expect {
    pub(super) fn fatbin(sass: &[Arch], ptx: &[Arch]) -> Self {
        Self {
            fatbin: Some((sass.to_vec(), ptx.to_vec())),
        }
    }

    pub(super) fn check(&self, bytes: &[u8]) -> Result<(), FatbinError> {
        match &self.fatbin {
            None => Ok(()),
            Some((sass, ptx)) => fatbin::check_archs(bytes, sass, ptx),
        }
    }

    /// Whether the file at `path` passes; always for what is not a fat
    /// binary (its stamp vouches for it).
    pub(super) fn holds(&self, path: &Path) -> bool {
        self.fatbin.is_none()
            || cache::read_regular(path, u64::MAX, crate::regular::Links::Follow)
                .is_some_and(|(_, bytes)| self.check(&bytes).is_ok())
    }
}

/// One nvcc step and the files it must write (the first is its output).
pub(super) struct Step<'a> {
    pub(super) module: &'a str,
    pub(super) args: &'a [OsString],
    pub(super) outputs: &'a [&'a Path],
    pub(super) expect: &'a Expect,
    /// Whether the launcher goes in front (compiles only).
    pub(super) launcher: bool,
}

impl Step<'_> {
    /// Runs nvcc with its outputs redirected into a temp dir made for this
    /// step beside the first (so none of them exists before it runs);
    /// after it exits 0 each must be there, not empty, and a fat binary
    /// must hold the archs expected; then they are moved into place.
    /// Returns what nvcc printed and the output's bytes.
    pub(super) fn run(&self, cx: &Context<'_>) -> Result<(String, Vec<u8>), Error> {
        let output = self.outputs[0];
        let dir = output.parent().unwrap_or(cx.out_dir);
        io(dir, std::fs::create_dir_all(dir))?;
        let fresh_dir = io(
            dir,
            tempfile::Builder::new()
                .prefix(".kiln-step-")
                .tempdir_in(dir),
        )?;
        let fresh: Vec<PathBuf> = self
            .outputs
            .iter()
            .map(|path| fresh_dir.path().join(path.file_name().unwrap_or_default()))
            .collect();
        let args: Vec<OsString> = self
            .args
            .iter()
            .map(
                |arg| match self.outputs.iter().position(|o| o.as_os_str() == arg) {
                    Some(i) => fresh[i].clone().into_os_string(),
                    None => arg.clone(),
                },
            )
            .collect();
        let (program, args) = if self.launcher {
            cx.nvcc.invocation(&args)
        } else {
            (cx.nvcc.program.clone(), args)
        };
        let log = run_nvcc(cx, self.module, &program, &args).inspect_err(|_| {
            let _ = std::fs::remove_file(output);
        })?;
        let no_output = |path: &Path| Error::NoOutput {
            module: self.module.to_string(),
            file: PathBuf::from(path.file_name().unwrap_or_default()),
            command: shell_line(&program, &args),
        };
        for (path, wanted) in fresh.iter().zip(self.outputs) {
            let written = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0);
            if !written {
                return Err(no_output(wanted));
            }
        }
        let bytes = io(&fresh[0], std::fs::read(&fresh[0]))?;
        self.expect.check(&bytes).map_err(|source| Error::Image {
            module: self.module.to_string(),
            file: PathBuf::from(output.file_name().unwrap_or_default()),
            source,
        })?;
        for (path, wanted) in fresh.iter().zip(self.outputs) {
            io(wanted, std::fs::rename(path, wanted))?;
        }
        Ok((log, bytes))
    }
}

/// Runs one nvcc step in the crate's root (the relative names on its command
/// line are the crate's files); returns what it printed. A failure is an
/// error headed by nvcc's first diagnostic, or by its refusal of the host
/// compiler.
fn run_nvcc(
    cx: &Context<'_>,
    module: &str,
    program: &Path,
    args: &[OsString],
) -> Result<String, Error> {
    let output = Command::new(program)
        .args(args)
        .current_dir(cx.base)
        .output()
        .map_err(|source| Error::Spawn {
            program: program.to_path_buf(),
            source,
        })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        return Ok(text);
    }
    let command = shell_line(program, args);
    if let Some(message) = unsupported_host_compiler(&text) {
        let (compiler, origin) = match &cx.nvcc.ccbin {
            Some((path, var)) => (path.display().to_string(), var.clone()),
            None => ("c++".to_string(), "nvcc's default".to_string()),
        };
        return Err(Error::HostCompiler {
            module: module.to_string(),
            compiler,
            origin,
            message,
            command,
        });
    }
    Err(Error::Compile {
        module: module.to_string(),
        first_diagnostic: first_diagnostic(&text, cx.base),
        command,
        output: text.trim().to_string(),
    })
}
