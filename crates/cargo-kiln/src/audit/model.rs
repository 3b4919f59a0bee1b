//! What the audit reads, as plain data: the archs asked for, the facts of
//! one module's fat binary, and one kernel's resources on one arch.

use std::collections::BTreeSet;

use cuda_build::resources::KernelResources;
use serde::Serialize;

use super::ptx::{PtxFunction, PtxModule};
use super::sass::SassFunction;

/// The archs the build was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Requested {
    /// The spec as written (`sm_80,sm_90`).
    pub(crate) spec: String,
    /// Where it came from (`KILN_CUDA_ARCHS`).
    pub(crate) origin: String,
    /// Real archs that must have SASS (`sm_80`).
    pub(crate) sass: Vec<String>,
    /// Virtual archs that must have PTX (`compute_90`).
    pub(crate) ptx: Vec<String>,
}

/// Everything read from one module's fat binary (or static library).
#[derive(Debug, Clone)]
pub(crate) struct ModuleFacts {
    /// The `.cu` stem.
    pub(crate) name: String,
    /// A static library: host code plus whatever kernels it instantiates
    /// (CUB's), which have no Rust declarations.
    pub(crate) is_static: bool,
    /// PTX per virtual arch (`compute_90`): one per arch for a fat binary,
    /// one per arch per member for a static library, whose members each
    /// carry their own kernels.
    pub(crate) ptx: Vec<(String, PtxModule)>,
    /// The ELFs' resource tables.
    pub(crate) sass: Vec<SassFunction>,
    /// The archive members with PTX of any arch (`""` for a fat binary
    /// with PTX): a member without any has its kernels named by its ELFs.
    pub(crate) ptx_members: BTreeSet<String>,
    /// ptxas's report from the build, the only source of spill counts.
    pub(crate) ptxas: Vec<KernelResources>,
    /// The module's own archs when they are not the build's (a `[modules]`
    /// entry with `archs`; `rdc`, whose device link keeps SASS only).
    pub(crate) own_archs: Option<Requested>,
}

impl ModuleFacts {
    /// The archs this module was asked for: its own, else the build's.
    pub(crate) fn requested<'a>(&'a self, build: &'a Requested) -> &'a Requested {
        self.own_archs.as_ref().unwrap_or(build)
    }

    /// Kernel names: the PTX `.entry`s and ptxas's entry functions, and,
    /// where there is no ptxas report, the ELF functions of each member
    /// with no PTX (an ELF's table does not tell a kernel from a device
    /// function, so they are read only where nothing better names them; a
    /// static library's SASS-only member is still audited). Sorted.
    pub(crate) fn kernels(&self) -> Vec<String> {
        let mut names: BTreeSet<String> = self
            .ptx
            .iter()
            .flat_map(|(_, m)| m.entry_names().map(str::to_string))
            .chain(self.ptxas.iter().map(|k| k.kernel.clone()))
            .collect();
        if self.ptxas.is_empty() {
            names.extend(
                self.sass
                    .iter()
                    .filter(|f| !self.ptx_members.contains(&f.member))
                    .map(|f| f.function.clone()),
            );
        }
        names.into_iter().collect()
    }

    pub(crate) fn sass_of(&self, kernel: &str, arch: &str) -> Option<&SassFunction> {
        self.sass
            .iter()
            .find(|f| f.function == kernel && f.arch == arch)
    }

    pub(crate) fn ptxas_of(&self, kernel: &str, arch: &str) -> Option<&KernelResources> {
        self.ptxas
            .iter()
            .find(|k| k.kernel == kernel && k.arch == arch)
    }

    /// The kernel's PTX entry for `arch`, from whichever PTX holds it: a
    /// static library has one PTX per member, so the first of an arch need
    /// not be the kernel's.
    pub(crate) fn ptx_entry(&self, kernel: &str, arch: &str) -> Option<&PtxFunction> {
        self.ptx
            .iter()
            .filter(|(a, _)| a == arch)
            .find_map(|(_, m)| m.entry(kernel))
    }

    /// Real archs with an ELF, and virtual archs with PTX, as numbers.
    pub(crate) fn arch_numbers(&self) -> BTreeSet<u32> {
        self.sass
            .iter()
            .map(|f| f.arch.as_str())
            .chain(self.ptx.iter().map(|(a, _)| a.as_str()))
            .filter_map(arch_number)
            .collect()
    }
}

/// `90` for `sm_90` or `compute_90`; `90` for `sm_90a` too (family suffixes
/// share a row with the base arch).
pub(crate) fn arch_number(arch: &str) -> Option<u32> {
    let digits = arch
        .strip_prefix("sm_")
        .or_else(|| arch.strip_prefix("compute_"))?;
    digits.trim_end_matches(char::is_alphabetic).parse().ok()
}

/// What the resource check and the table read for one kernel on one real
/// arch: the ELF's resource table, with ptxas's spill counts and static
/// shared memory (the ELF's shared figure on sm_90 adds the 1 KiB the system
/// reserves per block, which no kernel can budget away).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct Resources {
    pub(crate) registers: u32,
    /// `None` when ptxas's report is missing (static libraries).
    pub(crate) spill_store_bytes: Option<u32>,
    pub(crate) spill_load_bytes: Option<u32>,
    pub(crate) shared_bytes: u32,
    /// Stack frame plus other local memory, per thread.
    pub(crate) local_bytes: u32,
}

pub(crate) fn resources(module: &ModuleFacts, kernel: &str, arch: &str) -> Option<Resources> {
    let elf = module.sass_of(kernel, arch)?;
    let ptxas = module.ptxas_of(kernel, arch);
    Some(Resources {
        registers: elf.registers,
        spill_store_bytes: ptxas.map(|p| p.spill_store_bytes),
        spill_load_bytes: ptxas.map(|p| p.spill_load_bytes),
        shared_bytes: ptxas.map_or(elf.shared_bytes, |p| p.shared_bytes),
        local_bytes: elf.stack_bytes + elf.local_bytes,
    })
}
