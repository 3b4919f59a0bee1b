//! nvcc command lines, built in one place so that the build script, xtask and
//! the snapshot tests see the same flags.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::arch::ArchList;

/// One module compiled into a fat binary.
#[derive(Debug, Clone)]
pub struct FatbinCommand<'a> {
    /// The nvcc executable.
    pub nvcc: &'a Path,
    /// The `.cu` file.
    pub source: &'a Path,
    /// The `.fatbin` to write.
    pub output: &'a Path,
    /// The dependency file to write (`-MD -MF`).
    pub depfile: &'a Path,
    /// `-I` directories.
    pub include_dirs: &'a [PathBuf],
    /// Targets.
    pub archs: &'a ArchList,
    /// Extra flags from the config (`-O3`, `-std=c++17`, ...).
    pub flags: &'a [String],
}

impl FatbinCommand<'_> {
    /// The arguments after the program name.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["-fatbin".into()];
        args.extend(self.flags.iter().map(OsString::from));
        for dir in self.include_dirs {
            let mut flag = OsString::from("-I");
            flag.push(dir);
            args.push(flag);
        }
        args.extend(self.archs.gencode_flags().into_iter().map(OsString::from));
        // ptxas -v: per-kernel registers, spills, stack and shared memory.
        args.push("--resource-usage".into());
        args.extend([
            "-MD".into(),
            "-MF".into(),
            self.depfile.as_os_str().to_owned(),
        ]);
        args.extend(["-o".into(), self.output.as_os_str().to_owned()]);
        args.push(self.source.as_os_str().to_owned());
        args
    }

    /// The whole command as a shell line, for logs and errors.
    pub fn display(&self) -> String {
        shell_line(self.nvcc, &self.args())
    }
}

/// `program arg arg`, quoting arguments with spaces.
pub fn shell_line(program: &Path, args: &[OsString]) -> String {
    std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| {
            let a = a.to_string_lossy();
            if a.contains([' ', '"', '\'']) {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{ArchSpec, SupportedArchs};

    fn command_for(spec: &str) -> String {
        let archs = ArchSpec::parse(spec, "test")
            .unwrap()
            .resolve(&SupportedArchs::cuda_13_0_builtin(), "test", || Ok(vec![]))
            .unwrap();
        let flags = [
            "-O3".to_string(),
            "-std=c++17".to_string(),
            "-lineinfo".to_string(),
        ];
        FatbinCommand {
            nvcc: Path::new("/cuda/bin/nvcc"),
            source: Path::new("/ws/kernels/vector_add.cu"),
            output: Path::new("/out/vector_add.fatbin"),
            depfile: Path::new("/out/vector_add.d"),
            include_dirs: &[PathBuf::from("/ws/kernels/include")],
            archs: &archs,
            flags: &flags,
        }
        .display()
    }

    #[test]
    fn nvcc_command_lines() {
        let specs = [
            "sm_80,sm_90",
            "sm_86",
            "90-real",
            "80-real,90-virtual",
            "sm_90+PTX,sm_80",
            "sm_90a",
            "all-major",
        ];
        let text: String = specs
            .iter()
            .map(|spec| format!("{spec}\n  {}\n", command_for(spec)))
            .collect();
        insta::assert_snapshot!(text);
    }

    #[test]
    fn quoting() {
        let line = shell_line(Path::new("/a b/nvcc"), &["-o".into(), "it's".into()]);
        assert_eq!(line, r"'/a b/nvcc' -o 'it'\''s'");
    }
}
