//! Helpers for tests that need a GPU (Cargo feature `testing`): each returns
//! what the test needs, or prints `skipped: <reason>` and returns `None` so
//! that the test can return early; where a GPU is required, the skip becomes a
//! failure instead.
//!
//! - `KILN_REQUIRE_GPU=N` (a whole number from 1, the GPUs the host has): a
//!   test that needs at most `N` GPUs panics with one line,
//!   `KILN_REQUIRE_GPU=N but no usable GPU: <reason>`, where it would have
//!   skipped. A test that needs more than `N` is out of this host's scope: it
//!   prints `not run: needs M GPUs, KILN_REQUIRE_GPU=N (<reason>)` and
//!   returns. Set it on machines that have GPUs, so that a broken driver or
//!   build cannot pass as a run of skipped tests.
//! - `KILN_REQUIRE_NCCL=1`: a test that needs libnccl panics, not skips,
//!   where it cannot be loaded.
//!
//! Depend on gpu-core with `features = ["testing"]` as a dev-dependency:
//! ```no_run
//! # static MODULES: &[&gpu_core::FatbinImage] = &[];
//! #[test]
//! fn saxpy_on_the_gpu() {
//!     // `MODULES`: your crate's `modules::ALL`.
//!     let Some(backend) = gpu_core::testing::cuda_backend(MODULES) else {
//!         return; // printed `skipped: <reason>`
//!     };
//!     let stream = backend.default_stream();
//!     // ...
//! #   let _ = stream;
//! }
//! ```

use std::fmt::Display;

use crate::{Backend, Collective, Devices, Error, FatbinImage, GpuCount, Stream};

/// The environment variable that turns a GPU skip into a failure.
pub const REQUIRE_GPU_ENV: &str = "KILN_REQUIRE_GPU";

/// The environment variable that turns an NCCL skip into a failure.
pub const REQUIRE_NCCL_ENV: &str = "KILN_REQUIRE_NCCL";

/// What this run requires, read from the environment once per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Requirement {
    /// GPUs a test may count on (`KILN_REQUIRE_GPU`); 0 when unset.
    gpus: usize,
    /// Whether libnccl must load (`KILN_REQUIRE_NCCL=1`).
    nccl: bool,
}

impl Requirement {
    fn from_env() -> Self {
        let var = |name| std::env::var(name).unwrap_or_default();
        Self::parse(&var(REQUIRE_GPU_ENV), &var(REQUIRE_NCCL_ENV))
    }

    /// Anything but a whole number requires nothing of the GPU count, except
    /// that a value that is set but unreadable panics: a typo must not turn a
    /// required run into a skipping one.
    fn parse(gpus: &str, nccl: &str) -> Self {
        let gpus = match gpus.trim() {
            "" | "0" => 0,
            value => value.parse().unwrap_or_else(|_| {
                panic!("{REQUIRE_GPU_ENV}={value:?} is not a gpu count; set it to 1 or more, or unset it")
            }),
        };
        Self {
            gpus,
            nccl: nccl.trim() == "1",
        }
    }

    /// What a test that needs `needed` GPUs and cannot have them does.
    fn gpu_verdict(self, needed: usize, reason: impl Display) -> Verdict {
        match self.gpus {
            0 => Verdict::Skip(format!("skipped: {reason}")),
            gpus if needed <= gpus => Verdict::Fail(format!(
                "{REQUIRE_GPU_ENV}={gpus} but no usable GPU: {reason}"
            )),
            gpus => Verdict::NotRun(format!(
                "not run: needs {needed} GPUs, {REQUIRE_GPU_ENV}={gpus} ({reason})"
            )),
        }
    }

    /// What a test that needs libnccl and cannot load it does.
    fn nccl_verdict(self, reason: impl Display) -> Verdict {
        if self.nccl {
            Verdict::Fail(format!("{REQUIRE_NCCL_ENV}=1 but no NCCL: {reason}"))
        } else {
            Verdict::Skip(format!("skipped: {reason}"))
        }
    }

    fn skip_gpu<T>(self, needed: usize, reason: impl Display) -> Option<T> {
        self.gpu_verdict(needed, reason).apply()
    }

    fn skip_nccl<T>(self, reason: impl Display) -> Option<T> {
        self.nccl_verdict(reason).apply()
    }
}

/// What a test does when it cannot have what it needs: decided apart from
/// doing it, so that the decision is tested without printing a skip line
/// (which the GPU bundle would count against the run).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Print the `skipped:` line and return.
    Skip(String),
    /// Print the `not run:` line and return: the host has too few GPUs.
    NotRun(String),
    /// Fail the test with this line.
    Fail(String),
}

impl Verdict {
    fn apply<T>(self) -> Option<T> {
        match self {
            Verdict::Skip(line) | Verdict::NotRun(line) => println!("{line}"),
            Verdict::Fail(line) => panic!("{line}"),
        }
        None
    }
}

/// The CUDA backend on device 0 with `modules` loaded, or `None` after
/// printing `skipped: <reason>` (no driver, no device, or `modules` built
/// without GPU code). A device that is present but cannot load the modules
/// is a failure, not a skip.
pub fn cuda_backend(modules: &[&'static FatbinImage]) -> Option<Backend> {
    cuda_backend_for(Requirement::from_env(), modules)
}

fn cuda_backend_for(require: Requirement, modules: &[&'static FatbinImage]) -> Option<Backend> {
    if let Some(verdict) = unbuilt_verdict(require, modules) {
        return verdict.apply();
    }
    match Backend::cuda(0, modules) {
        Ok(backend) => Some(backend),
        Err(Error::CudaUnavailable { reason }) => {
            require.skip_gpu(1, format_args!("no CUDA device ({reason})"))
        }
        Err(e) => panic!("a CUDA device is present but unusable: {e}"),
    }
}

/// `modules` carry no GPU code at all: decided before the driver is asked.
fn unbuilt_verdict(require: Requirement, modules: &[&'static FatbinImage]) -> Option<Verdict> {
    (!modules.is_empty() && !modules.iter().any(|m| m.is_built()))
        .then(|| require.gpu_verdict(1, "no gpu code (built without a cuda toolkit)"))
}

/// At least `min` GPUs, each with `modules` loaded (none for memory-only
/// tests), or `None` after printing why the test is skipped.
pub fn devices(modules: &[&'static FatbinImage], min: usize) -> Option<Devices> {
    let require = Requirement::from_env();
    match Devices::open(modules, GpuCount::All) {
        Ok(devices) if devices.len() >= min => Some(devices),
        Ok(devices) => require.skip_gpu(min, format_args!("needs {min} GPUs, {devices}")),
        Err(Error::GpusUnavailable {
            ordinal: None,
            reason,
        }) => require.skip_gpu(min, format_args!("no CUDA device ({reason})")),
        Err(e) => panic!("CUDA devices are present but unusable: {e}"),
    }
}

/// A collective over `streams`, or `None` after printing why the test is
/// skipped (libnccl cannot be loaded).
pub fn collective(streams: &[Stream]) -> Option<Collective> {
    match Collective::new(streams) {
        Ok(collective) => Some(collective),
        Err(Error::NcclUnavailable(reason)) => {
            Requirement::from_env().skip_nccl(format_args!("no NCCL ({reason})"))
        }
        Err(e) => panic!("NCCL is present but the collective failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let payload = std::panic::catch_unwind(f).expect_err("should panic");
        payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    }

    fn fail(line: &str) -> Verdict {
        Verdict::Fail(line.to_string())
    }

    #[test]
    fn requirements_parse() {
        let none = Requirement::parse("", "");
        assert_eq!(
            none,
            Requirement {
                gpus: 0,
                nccl: false
            }
        );
        assert_eq!(
            Requirement::parse("1", "1"),
            Requirement {
                gpus: 1,
                nccl: true
            }
        );
        assert_eq!(Requirement::parse(" 2 ", "0").gpus, 2);
        let typo = panic_message(|| {
            Requirement::parse("yes", "");
        });
        assert!(
            typo.starts_with("KILN_REQUIRE_GPU=\"yes\" is not a gpu count"),
            "{typo}"
        );
    }

    #[test]
    fn a_skip_is_a_failure_where_the_gpus_are_required() {
        let one = Requirement {
            gpus: 1,
            nccl: false,
        };
        assert_eq!(
            one.gpu_verdict(1, "no CUDA device (no driver)"),
            fail("KILN_REQUIRE_GPU=1 but no usable GPU: no CUDA device (no driver)")
        );
        // A test that needs more GPUs than the host has is not run, not failed.
        assert_eq!(
            one.gpu_verdict(2, "needs 2 GPUs"),
            Verdict::NotRun("not run: needs 2 GPUs, KILN_REQUIRE_GPU=1 (needs 2 GPUs)".into())
        );
        assert_eq!(
            Requirement::parse("", "").gpu_verdict(1, "no device"),
            Verdict::Skip("skipped: no device".into())
        );
        let nccl = Requirement {
            gpus: 0,
            nccl: true,
        };
        assert_eq!(
            nccl.nccl_verdict("no NCCL (cannot load libnccl.so.2)"),
            fail("KILN_REQUIRE_NCCL=1 but no NCCL: no NCCL (cannot load libnccl.so.2)")
        );
        // Applying a failure panics with its line.
        let message = panic_message(|| {
            fail("the line").apply::<()>();
        });
        assert_eq!(message, "the line");
    }

    #[test]
    fn modules_without_gpu_code_skip_before_the_driver_is_asked() {
        static UNBUILT: FatbinImage = FatbinImage {
            name: "m",
            image: b"",
            sass: &[],
            ptx: &[],
            kernels: &[],
            toolkit: (0, 0),
        };
        let free = Requirement {
            gpus: 0,
            nccl: false,
        };
        assert_eq!(
            unbuilt_verdict(free, &[&UNBUILT]),
            Some(Verdict::Skip(
                "skipped: no gpu code (built without a cuda toolkit)".into()
            ))
        );
        let required = Requirement {
            gpus: 1,
            nccl: false,
        };
        assert_eq!(
            unbuilt_verdict(required, &[&UNBUILT]),
            Some(fail(
                "KILN_REQUIRE_GPU=1 but no usable GPU: no gpu code (built without a cuda toolkit)"
            ))
        );
        assert_eq!(unbuilt_verdict(required, &[]), None, "memory-only tests");
    }
}
