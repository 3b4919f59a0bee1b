//! nvcc command lines, built in one place so that the build, its stamps and
//! the snapshot tests see the same flags: one compile per source (`-fatbin`,
//! `-c` or `-dc`), the device link of separately compiled objects (`-dlink`)
//! and the static library (`-lib`). Also how nvcc is run (launcher, `-ccbin`)
//! and how its output becomes a one-line headline.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::arch::ArchList;

/// How nvcc is invoked: the program, an optional launcher in front of it
/// (`sccache`, `ccache`) and an optional host compiler (`-ccbin`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nvcc {
    /// The nvcc to run (may be any executable: a wrapper script too).
    pub(crate) program: PathBuf,
    /// Launcher words put before `program` on compiles.
    pub(crate) launcher: Vec<String>,
    /// The host compiler and the variable that named it.
    pub(crate) ccbin: Option<(PathBuf, String)>,
    /// nvcc's `-target-dir` for a cross build, where the toolkit has one.
    pub(crate) target_dir: Option<&'static str>,
}

impl Nvcc {
    /// nvcc run as itself, with nothing in front and nvcc's own host compiler.
    #[cfg(test)]
    pub(crate) fn plain(program: &str) -> Self {
        Self {
            program: program.into(),
            launcher: Vec::new(),
            ccbin: None,
            target_dir: None,
        }
    }

    /// `-ccbin <compiler>` when one was chosen, and `-target-dir <dir>`.
    fn ccbin_args(&self) -> Vec<OsString> {
        let mut args = match &self.ccbin {
            Some((path, _)) => vec!["-ccbin".into(), path.as_os_str().to_owned()],
            None => Vec::new(),
        };
        if let Some(dir) = self.target_dir {
            args.extend(["-target-dir".into(), dir.into()]);
        }
        args
    }

    /// The program and arguments that run nvcc with `args`, the launcher in
    /// front.
    pub(crate) fn invocation(&self, args: &[OsString]) -> (PathBuf, Vec<OsString>) {
        match self.launcher.split_first() {
            None => (self.program.clone(), args.to_vec()),
            Some((first, rest)) => {
                let mut all: Vec<OsString> = rest.iter().map(OsString::from).collect();
                all.push(self.program.clone().into_os_string());
                all.extend(args.iter().cloned());
                (PathBuf::from(first), all)
            }
        }
    }
}

/// What one source compiles to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompileMode {
    /// `-fatbin`: a loadable image, for a one-source fat-binary module.
    Fatbin,
    /// `-c`: a host object with its device code, for a static library.
    Object,
    /// `-dc`: relocatable device code, device-linked later (`rdc`).
    Relocatable,
}

/// One source compiled on its own.
#[derive(Debug, Clone)]
pub(crate) struct CompileCommand<'a> {
    pub(crate) nvcc: &'a Nvcc,
    pub(crate) mode: CompileMode,
    /// The `.cu` file.
    pub(crate) source: &'a Path,
    /// The `.fatbin` or `.o` to write.
    pub(crate) output: &'a Path,
    /// The dependency file to write (`-MD -MF`).
    pub(crate) depfile: &'a Path,
    /// `-I` directories.
    pub(crate) include_dirs: &'a [PathBuf],
    /// Targets.
    pub(crate) archs: &'a ArchList,
    /// Flags from the config, then the module's, then its `-D` defines.
    pub(crate) flags: &'a [String],
    /// Host code goes into a Rust binary: position-independent.
    pub(crate) pic: bool,
}

impl CompileCommand<'_> {
    /// The arguments after the program name.
    pub(crate) fn args(&self) -> Vec<OsString> {
        let mode = match self.mode {
            CompileMode::Fatbin => "-fatbin",
            CompileMode::Object => "-c",
            CompileMode::Relocatable => "-dc",
        };
        let mut args: Vec<OsString> = vec![mode.into()];
        args.extend(self.nvcc.ccbin_args());
        args.extend(self.flags.iter().map(OsString::from));
        for dir in self.include_dirs {
            let mut flag = OsString::from("-I");
            flag.push(dir);
            args.push(flag);
        }
        args.extend(self.archs.gencode_flags().into_iter().map(OsString::from));
        if self.pic {
            args.extend(["-Xcompiler".into(), "-fPIC".into()]);
        }
        // ptxas -v: per-kernel registers, spills, stack and shared memory
        // (for -dc, nvlink reports them at the device link instead).
        if self.mode != CompileMode::Relocatable {
            args.push("--resource-usage".into());
        }
        args.extend([
            "-MD".into(),
            "-MF".into(),
            self.depfile.as_os_str().to_owned(),
        ]);
        args.extend(["-o".into(), self.output.as_os_str().to_owned()]);
        args.push(self.source.as_os_str().to_owned());
        args
    }
}

/// The device link of a module's relocatable objects: into a loadable fat
/// binary (`fatbin`), or into a host object for a static library.
#[derive(Debug, Clone)]
pub(crate) struct DeviceLinkCommand<'a> {
    pub(crate) nvcc: &'a Nvcc,
    pub(crate) objects: &'a [PathBuf],
    pub(crate) output: &'a Path,
    pub(crate) archs: &'a ArchList,
    pub(crate) fatbin: bool,
}

impl DeviceLinkCommand<'_> {
    /// The arguments after the program name.
    pub(crate) fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["-dlink".into()];
        if self.fatbin {
            args.push("-fatbin".into());
        }
        args.extend(self.nvcc.ccbin_args());
        args.extend(self.archs.gencode_flags().into_iter().map(OsString::from));
        if !self.fatbin {
            args.extend(["-Xcompiler".into(), "-fPIC".into()]);
        }
        // nvlink -v: the linked kernels' resources.
        args.push("--resource-usage".into());
        args.extend(["-o".into(), self.output.as_os_str().to_owned()]);
        args.extend(self.objects.iter().map(|o| o.as_os_str().to_owned()));
        args
    }
}

/// `nvcc -lib`: objects into a static library.
pub(crate) fn library_args(objects: &[PathBuf], output: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["-lib".into(), "-o".into(), output.into()];
    args.extend(objects.iter().map(|o| o.as_os_str().to_owned()));
    args
}

/// `program arg arg`, quoted for a POSIX shell where needed.
pub(crate) fn shell_line(program: &Path, args: &[OsString]) -> String {
    std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| {
            let a = a.to_string_lossy();
            // shlex quotes `=`, `+` and `,` too, which nvcc's flags are full
            // of: leave words of plain characters as they are.
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./=,:+@%[]".contains(c));
            if plain {
                a.into_owned()
            } else {
                shlex::try_quote(&a).map_or_else(|_| a.to_string(), |q| q.into_owned())
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first diagnostic in nvcc's output as `file:line: error: message`, the
/// file relative to `base` where it lies under it; the first non-empty line
/// when none looks like a diagnostic.
pub(crate) fn first_diagnostic(output: &str, base: &Path) -> String {
    let relative = |file: &str| -> String {
        Path::new(file)
            .strip_prefix(base)
            .map_or_else(|_| file.to_string(), |p| p.display().to_string())
    };
    for line in output.lines().map(str::trim) {
        // nvcc's front end: `/abs/x.cu(22): error: expected an expression`.
        if let Some((head, message)) = line.split_once("): ") {
            if let Some((file, number)) = head.rsplit_once('(') {
                let is_error = ["error", "catastrophic error", "fatal error"]
                    .iter()
                    .any(|kind| message.starts_with(kind));
                if is_error && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
                    return format!(
                        "{}:{number}: {message}{}",
                        relative(file),
                        missing_cccl(message)
                    );
                }
            }
        }
        // The host compiler: `x.cu:22:5: error: ...`.
        if let Some((file, rest)) = line.split_once(':') {
            if rest.contains(": error:") || rest.contains(": fatal error:") {
                return format!("{}:{rest}", relative(file));
            }
        }
        // ptxas on a line of its input: `ptxas /tmp/x.ptx, line 5; fatal   :
        // Unsupported .version 9.5; ...` (before its closing `ptxas fatal :
        // Ptx assembly aborted due to errors`, which says nothing).
        if let Some(headline) = located_tool_diagnostic(line) {
            return headline;
        }
        // nvcc, ptxas, nvlink: `nvlink error   : Undefined reference ...`.
        for tool in ["nvcc", "ptxas", "nvlink", "fatbinary"] {
            for kind in ["fatal", "error"] {
                let prefix = format!("{tool} {kind}");
                if let Some(rest) = line.strip_prefix(&prefix) {
                    if let Some(message) = rest.trim_start().strip_prefix(':') {
                        return format!("{prefix}: {}", message.trim());
                    }
                }
            }
        }
    }
    output
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("it printed nothing")
        .to_string()
}

/// What to install when `message` is a missing header of CUDA's C++ core
/// libraries (CCCL: `nv/target`, `cuda/std/...`, CUB, Thrust), which the
/// pip toolkit ships apart from nvcc; empty otherwise.
fn missing_cccl(message: &str) -> &'static str {
    let missing = message.contains("cannot open source file")
        && ["\"nv/", "\"cuda/std/", "\"cuda/", "\"cub/", "\"thrust/"]
            .iter()
            .any(|header| message.contains(header));
    if missing {
        " (CUDA's C++ core libraries are missing from the toolkit: install \
         nvidia-cuda-cccl of the toolkit's version, or use `cargo kiln toolkit install`)"
    } else {
        ""
    }
}

/// `TOOL FILE, line N; KIND : message` (ptxas, nvlink and fatbinary name a
/// line of their input so) as `TOOL KIND: message (FILE, line N)`; a PTX
/// ISA newer than the tool takes says which packages disagree.
fn located_tool_diagnostic(line: &str) -> Option<String> {
    let (tool, rest) = line.split_once(' ')?;
    if !["ptxas", "nvlink", "fatbinary"].contains(&tool) {
        return None;
    }
    let (place, diagnostic) = rest.split_once("; ")?;
    let (kind, message) = diagnostic.split_once(':')?;
    let kind = kind.trim();
    if !place.contains(", line ") || !["fatal", "error"].contains(&kind) {
        return None;
    }
    let message = message.trim();
    let hint = if message.starts_with("Unsupported .version") {
        " (the PTX comes from a newer compiler than this ptxas: the toolkit's \
         nvidia-cuda-nvcc, nvidia-nvvm and nvidia-cuda-crt versions disagree; install \
         one version of all three)"
    } else {
        ""
    };
    Some(format!("{tool} {kind}: {message} ({place}){hint}"))
}

/// nvcc's refusal of a host compiler version, one line (`unsupported GNU
/// version! gcc versions later than 13 are not supported!`), if that is what
/// the output says.
pub(crate) fn unsupported_host_compiler(output: &str) -> Option<String> {
    let line = output
        .lines()
        .find(|l| l.contains("unsupported") && l.contains("version"))?;
    let message = line.split_once("#error --").map_or(line, |(_, m)| m).trim();
    let message = message
        .split_once(" The nvcc flag")
        .map_or(message, |(m, _)| m);
    Some(message.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{ArchSpec, SupportedArchs};

    fn archs(spec: &str) -> ArchList {
        ArchSpec::parse(spec, "test")
            .unwrap()
            .resolve(&SupportedArchs::cuda_13_0_builtin(), "test", || Ok(vec![]))
            .unwrap()
    }

    const FLAGS: [&str; 3] = ["-O3", "-std=c++17", "-lineinfo"];

    fn command_for(spec: &str) -> String {
        let flags = FLAGS.map(String::from);
        let nvcc = Nvcc::plain("/cuda/bin/nvcc");
        let args = CompileCommand {
            nvcc: &nvcc,
            mode: CompileMode::Fatbin,
            source: Path::new("/ws/kernels/vector_add.cu"),
            output: Path::new("/out/vector_add.fatbin"),
            depfile: Path::new("/out/vector_add.d"),
            include_dirs: &[PathBuf::from("/ws/kernels/include")],
            archs: &archs(spec),
            flags: &flags,
            pic: false,
        }
        .args();
        shell_line(&nvcc.program, &args)
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

    /// Every step of a separately compiled module, in both link modes, with a
    /// launcher and a host compiler.
    #[test]
    fn rdc_and_static_command_lines() {
        let flags = FLAGS.map(String::from);
        let nvcc = Nvcc {
            program: "/cuda/bin/nvcc".into(),
            launcher: vec!["sccache".into()],
            ccbin: Some(("/usr/bin/g++-12".into(), "CUDAHOSTCXX".into())),
            target_dir: None,
        };
        let archs = archs("sm_80,sm_90");
        let include_dirs = [PathBuf::from("/ws/kernels/include")];
        let objects = [
            PathBuf::from("/out/m.objs/a.o"),
            PathBuf::from("/out/m.objs/b.o"),
        ];
        let mut lines = Vec::new();
        for (mode, pic, what) in [
            (
                CompileMode::Relocatable,
                false,
                "rdc source, fat-binary module",
            ),
            (CompileMode::Relocatable, true, "rdc source, static module"),
            (CompileMode::Object, true, "source of a static module"),
        ] {
            let args = CompileCommand {
                nvcc: &nvcc,
                mode,
                source: Path::new("/ws/kernels/m/a.cu"),
                output: Path::new("/out/m.objs/a.o"),
                depfile: Path::new("/out/m.objs/a.d"),
                include_dirs: &include_dirs,
                archs: &archs,
                flags: &flags,
                pic,
            }
            .args();
            let (program, args) = nvcc.invocation(&args);
            lines.push(format!("{what}\n  {}", shell_line(&program, &args)));
        }
        for (fatbin, output, what) in [
            (true, "/out/m.fatbin", "device link into a fat binary"),
            (
                false,
                "/out/m.objs/dlink.o",
                "device link for a static library",
            ),
        ] {
            let args = DeviceLinkCommand {
                nvcc: &nvcc,
                objects: &objects,
                output: Path::new(output),
                archs: &archs,
                fatbin,
            }
            .args();
            lines.push(format!("{what}\n  {}", shell_line(&nvcc.program, &args)));
        }
        let args = library_args(&objects, Path::new("/out/libkiln_m.a"));
        lines.push(format!(
            "static library\n  {}",
            shell_line(&nvcc.program, &args)
        ));
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn quoting() {
        let line = shell_line(Path::new("/a b/nvcc"), &["-o".into(), "it's".into()]);
        assert_eq!(line, r#"'/a b/nvcc' -o "it's""#);
    }

    #[test]
    fn first_diagnostic_is_the_headline() {
        let base = Path::new("/crate");
        let check = |output: &str, expected: &str| {
            assert_eq!(first_diagnostic(output, base), expected, "{output}");
        };
        check(
            "/crate/kernels/x.cu(22): error: expected an expression\n  x = ;\n\n1 error detected",
            "kernels/x.cu:22: error: expected an expression",
        );
        check(
            "/crate/kernels/x.cu(3): warning #177-D: unused\n/elsewhere/h.cuh(1): catastrophic error: cannot open source file \"y.h\"",
            "/elsewhere/h.cuh:1: catastrophic error: cannot open source file \"y.h\"",
        );
        check(
            "/crate/kernels/x.cu:7:3: error: 'foo' was not declared",
            "kernels/x.cu:7:3: error: 'foo' was not declared",
        );
        check(
            "nvlink error   : Undefined reference to '_Z6helperf' in '/out/a.o'",
            "nvlink error: Undefined reference to '_Z6helperf' in '/out/a.o'",
        );
        check(
            "nvcc fatal   : Unknown option '-bogus'",
            "nvcc fatal: Unknown option '-bogus'",
        );
        // A mixed install (nvcc 13.0 with nvvm 13.5): the line that names the
        // cause comes before ptxas's closing one.
        check(
            "ptxas /tmp/tmpxft_1_x.ptx, line 5; fatal   : Unsupported .version 9.5; current version is '9.0'\n\
             ptxas fatal   : Ptx assembly aborted due to errors",
            "ptxas fatal: Unsupported .version 9.5; current version is '9.0' (/tmp/tmpxft_1_x.ptx, \
             line 5) (the PTX comes from a newer compiler than this ptxas: the toolkit's \
             nvidia-cuda-nvcc, nvidia-nvvm and nvidia-cuda-crt versions disagree; install one \
             version of all three)",
        );
        check(
            "ptxas /tmp/a.ptx, line 12; error   : Call has wrong number of parameters\n\
             ptxas fatal   : Ptx assembly aborted due to errors",
            "ptxas error: Call has wrong number of parameters (/tmp/a.ptx, line 12)",
        );
        check(
            "/cuda/include/cuda_fp16.h(4): catastrophic error: cannot open source file \"nv/target\"",
            "/cuda/include/cuda_fp16.h:4: catastrophic error: cannot open source file \"nv/target\" \
             (CUDA's C++ core libraries are missing from the toolkit: install nvidia-cuda-cccl of \
             the toolkit's version, or use `cargo kiln toolkit install`)",
        );
        check("\n  something odd\n", "something odd");
        check("", "it printed nothing");
    }

    #[test]
    fn unsupported_host_compiler_is_one_line() {
        let output = "/cuda/include/crt/host_config.h:143:2: error: #error -- unsupported GNU version! gcc versions later than 13 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.\n  143 | #error -- unsupported GNU version!\n";
        assert_eq!(
            unsupported_host_compiler(output).as_deref(),
            Some("unsupported GNU version! gcc versions later than 13 are not supported!")
        );
        assert_eq!(unsupported_host_compiler("x.cu(1): error: nope"), None);
    }
}
