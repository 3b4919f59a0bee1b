//! `apps`: run kiln's workloads from the command line. Errors end the
//! program with one line on stderr and exit 1 (2 for a bad command line); a
//! closed stdout (`apps … | head -1`) ends it quietly with exit 0.

mod anneal_cmd;
mod anneal_run;
mod cli;
mod commands;
mod decode_cmd;
mod encode_cmd;
mod launch_cmd;
mod npy_args;
mod output;
mod rank_cmd;
mod rank_setup;

use std::io::{self, Write};

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;
use gpu_core::Backend;

use cli::{BackendChoice, Cli, Command};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = e.exit_code();
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                // Help is the answer asked for (or the usage, for `apps`
                // alone): clap prints it; a closed pipe is not an error.
                let _ = e.print();
            } else {
                let _ = writeln!(io::stderr(), "{}", one_line_clap_error(&e));
            }
            std::process::exit(code);
        }
    };
    let result = match cli.command {
        Command::Vadd(args) => commands::vadd(&args),
        Command::Anneal(args) => anneal(&args),
        Command::Decode(args) => decode_cmd::run(&args),
        Command::Encode(args) => encode_cmd::run(&args),
        Command::Batch(args) => commands::batch(&args),
        Command::Bench(args) => commands::bench(&args),
        Command::Devices => commands::devices(),
        Command::Launch(args) => launch_cmd::run(&args),
    };
    if let Err(e) = result {
        // The reader of stdout went away (`| head -1`): it has what it
        // wanted; stop as a killed-by-SIGPIPE program would, quietly, but
        // with exit 0 so that `set -o pipefail` scripts do not fail (as
        // ripgrep does). Rust ignores SIGPIPE, so every write reports it.
        if output::is_broken_pipe(&e) {
            std::process::exit(0);
        }
        let mut message = format!("{e:#}").replace('\n', " ");
        if let Some(hint) = gpu_error(&e).and_then(kiln_hint) {
            message = format!("{message}; {hint}");
        }
        let _ = writeln!(io::stderr(), "error: {message}");
        std::process::exit(1);
    }
}

/// `apps anneal`: one process, or one process of several (a launcher set
/// `WORLD_SIZE`).
fn anneal(args: &cli::AnnealArgs) -> anyhow::Result<()> {
    match kiln_anneal::distributed::RankEnv::from_env()? {
        Some(env) => rank_cmd::run(args, &env),
        None => anneal_cmd::run(args),
    }
}

/// The gpu-core error behind `e`, anywhere in its chain of sources (the
/// anneal's errors carry it as their source).
fn gpu_error(e: &anyhow::Error) -> Option<&gpu_core::Error> {
    e.chain().find_map(|c| c.downcast_ref::<gpu_core::Error>())
}

/// What to run in kiln's repository for a gpu-core error, whose own message
/// names no kiln tool.
fn kiln_hint(error: &gpu_core::Error) -> Option<String> {
    use gpu_core::Error as E;
    match error {
        E::ModuleNotBuilt { .. } => {
            Some("in kiln, `cargo xtask toolkit install` installs the pinned toolkit".into())
        }
        E::NoBinaryForDevice { device_arch, .. } => Some(format!(
            "in kiln, `cargo xtask build --arch sm_{device_arch}` builds it"
        )),
        E::NcclUnavailable(_) => Some("or run with `--gpus 1`".into()),
        _ => None,
    }
}

/// clap's error as one line: its first line, with the valid values where it
/// lists them (clap's own rendering spreads over several lines).
pub(crate) fn one_line_clap_error(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    // The message is the first paragraph (a missing argument's name is on
    // its second line); usage and tips follow after a blank line.
    let message = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let message = if message.is_empty() {
        "error: bad command line".to_string()
    } else {
        message
    };
    let valid = match e.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(values)) => {
            format!(" (possible values: {})", values.join(", "))
        }
        _ => String::new(),
    };
    let usage = match e.kind() {
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => "",
        _ => "; see `apps --help`",
    };
    format!("{message}{valid}{usage}")
}

/// The backend `--backend` asks for, with where the choice came from
/// (`--backend`, KILN_BACKEND, or empty for the default); `auto` (or none)
/// honours KILN_BACKEND, and a bad KILN_BACKEND is named as such.
pub(crate) fn backend_choice(
    choice: Option<BackendChoice>,
) -> anyhow::Result<(BackendChoice, String)> {
    use clap::ValueEnum;
    Ok(match choice {
        Some(BackendChoice::Auto) | None => match std::env::var(gpu_core::BACKEND_ENV) {
            Ok(value) if !value.trim().is_empty() => {
                let parsed = BackendChoice::from_str(value.trim(), true).map_err(|_| {
                    anyhow::anyhow!(
                        "{}={value:?} is not a backend; set it to auto, cpu, cuda or wgpu, or unset it",
                        gpu_core::BACKEND_ENV
                    )
                })?;
                (parsed, gpu_core::BACKEND_ENV.to_string())
            }
            _ => (BackendChoice::Auto, String::new()),
        },
        Some(other) => (other, "--backend".to_string()),
    })
}

/// How a choice is named in a message: `--backend cuda`, `KILN_BACKEND=cuda`.
pub(crate) fn setting(source: &str, value: &str) -> String {
    if source == "--backend" {
        format!("--backend {value}")
    } else {
        format!("{source}={value}")
    }
}

/// The backend `--backend` asks for; `auto` (or none) honours KILN_BACKEND,
/// and a bad KILN_BACKEND is named as such. wgpu runs only `apps anneal`
/// (see `anneal_cmd`), so here it is refused.
pub(crate) fn select_backend(choice: Option<BackendChoice>) -> anyhow::Result<Backend> {
    select_backend_on(choice, 0)
}

/// [`select_backend`] on CUDA device `ordinal` (a rank's own GPU): the
/// only device whose context it makes.
pub(crate) fn select_backend_on(
    choice: Option<BackendChoice>,
    ordinal: usize,
) -> anyhow::Result<Backend> {
    let modules = &apps::modules();
    let (choice, source) = backend_choice(choice)?;
    match choice {
        BackendChoice::Auto => Ok(Backend::select_on(ordinal, modules, Some(""))?),
        BackendChoice::Cpu => Ok(Backend::cpu()),
        BackendChoice::Cuda => Backend::select_on(ordinal, modules, Some("cuda")).map_err(|e| {
            let to_cpu = if source == "--backend" {
                "use --backend cpu or auto"
            } else {
                "unset KILN_BACKEND or set it to cpu"
            };
            let setting = setting(&source, "cuda");
            match e {
                gpu_core::Error::CudaUnavailable { reason } => {
                    anyhow::anyhow!("{setting}: the cuda backend cannot run ({reason}); {to_cpu}")
                }
                other => anyhow::anyhow!("{setting}: {other}"),
            }
        }),
        BackendChoice::Wgpu => Err(anyhow::anyhow!(
            "{}: the wgpu backend runs only `apps anneal` on one process; use auto, cpu or cuda here",
            setting(&source, "wgpu")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gpu-core error the CPU can produce: launches by name need CUDA.
    fn gpu_core_error() -> gpu_core::Error {
        Backend::cpu().kernel_by_name("k").unwrap_err()
    }

    #[test]
    fn gpu_core_errors_are_found_bare_and_as_the_anneal_errors_source() {
        let bare = anyhow::Error::new(gpu_core_error());
        assert!(matches!(
            gpu_error(&bare),
            Some(gpu_core::Error::ByNameNeedsCuda { .. })
        ));
        let wrapped =
            anyhow::Error::new(kiln_anneal::AnnealError::Gpu(gpu_core_error())).context("anneal");
        assert!(matches!(
            gpu_error(&wrapped),
            Some(gpu_core::Error::ByNameNeedsCuda { .. })
        ));
        // The one line the user reads holds gpu-core's message once.
        assert_eq!(
            format!("{wrapped:#}"),
            format!("anneal: gpu: {}", gpu_core_error())
        );
        assert!(gpu_error(&anyhow::anyhow!("plain")).is_none());
    }
}
