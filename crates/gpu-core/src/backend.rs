//! Choosing the backend at run time: CUDA when GPU code was built, a driver
//! loads and a device can run every module; otherwise the CPU, with the reason.
//!
//! `KILN_BACKEND=cpu|cuda` forces one; forcing CUDA where it cannot run is an
//! error, never a silent fallback. Loaded modules and functions are cached per
//! backend (one primary context per device). Streams are made from a backend
//! in `stream.rs`, which builds on this module.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};

use crate::device::{self, BackendKind, DeviceInfo, MemoryInfo};
use crate::error::{driver, CpuReason, Error};
use crate::launch::{CpuKernel, Kernel, KernelByName, LaunchParams};
use crate::{module, FatbinImage, KernelDecl};

/// The environment variable that forces a backend.
pub const BACKEND_ENV: &str = "KILN_BACKEND";

/// A backend: a CUDA context with its loaded modules, or the CPU.
///
/// Cheap to clone (an `Arc`); buffers, streams and kernels made from it keep
/// it alive.
#[derive(Debug, Clone)]
pub struct Backend {
    inner: Arc<Inner>,
}

#[derive(Debug)]
enum Inner {
    Cuda(CudaBackend),
    Cpu { reason: CpuReason },
}

#[derive(Debug)]
pub(crate) struct CudaBackend {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) device: DeviceInfo,
    modules: Vec<(&'static FatbinImage, Arc<CudaModule>)>,
    functions: Mutex<HashMap<&'static str, (CudaFunction, &'static FatbinImage)>>,
}

impl Backend {
    /// Picks the backend: `KILN_BACKEND` if set, else CUDA when it can run
    /// every built module in `modules`, else the CPU with the reason.
    ///
    /// Errors only when `KILN_BACKEND` is invalid, or is `cuda` and CUDA
    /// cannot run.
    pub fn auto(modules: &[&'static FatbinImage]) -> Result<Self, Error> {
        let choice = std::env::var(BACKEND_ENV).ok();
        Self::select(modules, choice.as_deref())
    }

    /// [`Backend::auto`] with the value of `KILN_BACKEND` given (`None` when
    /// unset), so that callers and tests need not touch the environment.
    pub fn select(modules: &[&'static FatbinImage], choice: Option<&str>) -> Result<Self, Error> {
        Self::select_on(0, modules, choice)
    }

    /// [`Backend::select`] on CUDA device `ordinal` instead of device 0:
    /// one process per GPU probes (and makes its context on) its own GPU
    /// only, not on device 0 as well.
    pub fn select_on(
        ordinal: usize,
        modules: &[&'static FatbinImage],
        choice: Option<&str>,
    ) -> Result<Self, Error> {
        match choice.map(str::trim) {
            None | Some("") => Ok(match CudaBackend::probe(ordinal, modules, true) {
                Ok(cuda) => Self::from_inner(Inner::Cuda(cuda)),
                Err(reason) => Self::from_inner(Inner::Cpu { reason }),
            }),
            Some(v) if v.eq_ignore_ascii_case("cpu") => Ok(Self::cpu()),
            Some(v) if v.eq_ignore_ascii_case("cuda") => CudaBackend::probe(ordinal, modules, true)
                .map(|cuda| Self::from_inner(Inner::Cuda(cuda)))
                .map_err(|reason| Error::CudaUnavailable { reason }),
            Some(v) => Err(Error::InvalidBackendEnv {
                value: v.to_owned(),
            }),
        }
    }

    /// The CPU backend.
    pub fn cpu() -> Self {
        Self::from_inner(Inner::Cpu {
            reason: CpuReason::Forced,
        })
    }

    /// The CUDA backend on device `ordinal`, loading every built module in
    /// `modules` (which may be empty, for memory-only work).
    pub fn cuda(ordinal: usize, modules: &[&'static FatbinImage]) -> Result<Self, Error> {
        Self::probe_cuda(ordinal, modules, false).map_err(|reason| match reason {
            CpuReason::Unusable(e) => *e,
            reason => Error::CudaUnavailable { reason },
        })
    }

    /// The CUDA backend on device `ordinal`, or why it cannot run there.
    pub(crate) fn probe_cuda(
        ordinal: usize,
        modules: &[&'static FatbinImage],
        require_code: bool,
    ) -> Result<Self, CpuReason> {
        CudaBackend::probe(ordinal, modules, require_code)
            .map(|cuda| Self::from_inner(Inner::Cuda(cuda)))
    }

    fn from_inner(inner: Inner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Which backend this is.
    pub fn kind(&self) -> BackendKind {
        match *self.inner {
            Inner::Cuda(_) => BackendKind::Cuda,
            Inner::Cpu { .. } => BackendKind::Cpu,
        }
    }

    /// Why the CPU was chosen; `None` for CUDA.
    pub fn cpu_reason(&self) -> Option<&CpuReason> {
        match &*self.inner {
            Inner::Cuda(_) => None,
            Inner::Cpu { reason } => Some(reason),
        }
    }

    /// The device, for CUDA.
    pub fn device(&self) -> Option<&DeviceInfo> {
        self.cuda_state().map(|c| &c.device)
    }

    /// The device's free and total memory, read in this backend's context;
    /// `Ok(None)` on the CPU backend, which has no device memory (its
    /// buffers are host memory).
    pub fn memory_info(&self) -> Result<Option<MemoryInfo>, Error> {
        self.cuda_state()
            .map(|c| MemoryInfo::read(&c.ctx))
            .transpose()
    }

    /// cudarc's context under the CUDA backend (the device's primary
    /// context), for work gpu-core does not do: load your own modules, make
    /// streams, allocate `CudaSlice`s, with the `cudarc` gpu-core re-exports
    /// (see the crate docs, "With plain cudarc"). `None` on the CPU backend.
    ///
    /// Memory and streams made here are cudarc's: gpu-core records nothing
    /// about them, so ordering them against gpu-core's streams is the
    /// caller's (events, or [`Stream::from_cudarc`](crate::Stream::from_cudarc)).
    pub fn cudarc_context(&self) -> Option<&Arc<CudaContext>> {
        self.cuda_state().map(|c| &c.ctx)
    }

    pub(crate) fn cuda_state(&self) -> Option<&CudaBackend> {
        match &*self.inner {
            Inner::Cuda(c) => Some(c),
            Inner::Cpu { .. } => None,
        }
    }

    /// Blocks until all work on the device is done, returning the first
    /// asynchronous error.
    pub fn synchronize(&self) -> Result<(), Error> {
        match self.cuda_state() {
            Some(c) => {
                let sync = c.ctx.synchronize();
                let deferred = c.ctx.check_err();
                sync.and(deferred).map_err(|source| Error::Async {
                    kernel: None,
                    module: None,
                    source: source.into(),
                })
            }
            None => Ok(()),
        }
    }

    /// Kernel `K` from the modules handed in; on the CPU backend this fails
    /// with [`Error::NoCpuKernel`] (use [`Backend::kernel_with_cpu`]).
    pub fn kernel<K: KernelDecl>(&self) -> Result<Kernel<K>, Error>
    where
        K::Params: LaunchParams,
    {
        match self.cuda_state() {
            Some(c) => {
                let (func, image) = c.function(K::NAME)?;
                Kernel::cuda(func, image.name, &c.device.limits)
            }
            None => Err(Error::NoCpuKernel { kernel: K::NAME }),
        }
    }

    /// The function `name` from the modules handed in, for launches with a
    /// runtime argument list ([`Stream::launch_by_name`](crate::Stream::launch_by_name)),
    /// checked against the parameter sizes of its image's table (the
    /// cubin's `.nv.info`; the driver's report where the image has none).
    ///
    /// For kernels without a header to generate a typed declaration from.
    /// Needs the CUDA backend ([`Error::ByNameNeedsCuda`] on the CPU); a
    /// damaged table is [`Error::ParamTable`]; an image without one (PTX
    /// only, compressed cubins) needs a driver of CUDA 12.4 or later
    /// ([`Error::ParamInfoUnavailable`]).
    pub fn kernel_by_name(&self, name: &str) -> Result<KernelByName, Error> {
        match self.cuda_state() {
            Some(c) => {
                let name = intern(name);
                let (func, image) = c.function(name)?;
                KernelByName::cuda(func, name, image, &c.device.limits)
            }
            None => Err(Error::ByNameNeedsCuda {
                kernel: name.to_owned(),
            }),
        }
    }

    /// Kernel `K`, with `cpu` as its body on the CPU backend.
    pub fn kernel_with_cpu<K: KernelDecl>(&self, cpu: CpuKernel<K>) -> Result<Kernel<K>, Error>
    where
        K::Params: LaunchParams,
    {
        match self.cuda_state() {
            Some(_) => self.kernel::<K>(),
            None => Ok(Kernel::cpu(cpu)),
        }
    }
}

impl CudaBackend {
    /// Everything `auto` checks, in order: driver, device, GPU code (when
    /// `require_code`), archs, context, module loads.
    fn probe(
        ordinal: usize,
        modules: &[&'static FatbinImage],
        require_code: bool,
    ) -> Result<Self, CpuReason> {
        device::init_driver()?;
        let count = cudarc::driver::result::device::get_count()
            .map_err(|e| CpuReason::DriverInit(e.into()))?;
        if usize::try_from(count).unwrap_or(0) <= ordinal {
            return Err(CpuReason::NoDevice);
        }
        let built: Vec<&'static FatbinImage> =
            modules.iter().copied().filter(|m| m.is_built()).collect();
        if require_code && built.is_empty() {
            return Err(CpuReason::NoGpuCode);
        }
        let unusable = |e: Error| CpuReason::Unusable(Box::new(e));
        let device = DeviceInfo::query(ordinal).map_err(unusable)?;
        let arch = device.arch();
        if let Some(m) = built
            .iter()
            .find(|m| module::code_for_arch(m, arch).is_none())
        {
            return Err(CpuReason::ArchMismatch {
                module: m.name,
                sass: m.sass,
                ptx: m.ptx,
                device_arch: arch,
            });
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(driver("create context"))
            .map_err(unusable)?;
        let modules = built
            .into_iter()
            .map(|m| module::load(&ctx, m, arch).map(|loaded| (m, loaded)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(unusable)?;
        Ok(Self {
            ctx,
            device,
            modules,
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// The function named `kernel` and its module's name, cached.
    fn function(
        &self,
        kernel: &'static str,
    ) -> Result<(CudaFunction, &'static FatbinImage), Error> {
        // A poisoned lock only means another thread panicked while inserting;
        // the map is still a valid cache.
        let mut cache = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = cache.get(kernel) {
            return Ok(found.clone());
        }
        let listed = self.modules.iter().find(|(m, _)| m.has_kernel(kernel));
        // Modules that do not list their kernels are searched in order.
        let candidates = listed
            .into_iter()
            .chain(self.modules.iter().filter(|(m, _)| m.kernels.is_empty()));
        for (image, loaded) in candidates {
            if let Ok(func) = loaded.load_function(kernel) {
                cache.insert(kernel, (func.clone(), image));
                return Ok((func, image));
            }
        }
        Err(Error::KernelNotFound {
            kernel,
            modules: self.modules.iter().map(|(m, _)| m.name).collect(),
        })
    }
}

/// `name` with a `'static` lifetime, leaked once per distinct name: kernel
/// names looked up at run time are few, and the function cache, launch sites
/// and errors keep `&'static str`s.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    // A poisoned lock only means another thread panicked while inserting; the
    // set is still valid.
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}
