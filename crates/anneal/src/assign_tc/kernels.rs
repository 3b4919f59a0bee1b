//! The kernels of the tensor-core assignment: their parameter tuples, and
//! the kernels of each point type ([`TcPoint`], [`TypedKernels`]) out of all
//! of them ([`TcKernels`]), which [`super::TcAssign`] loads.

use crate::bindings::kernels::{
    anneal_absmax_f16, anneal_absmax_f32, anneal_assign_list_f16, anneal_assign_list_f32,
    anneal_assign_tc_f16, anneal_assign_tc_f32, anneal_assign_tc_slim_f16,
    anneal_assign_tc_slim_f32, anneal_assign_wgmma, anneal_assign_wgmma_chunked,
    anneal_column_sums_f16, anneal_column_sums_f32, anneal_refine_lists_f16,
    anneal_refine_lists_f32, anneal_to_half_f16, anneal_to_half_f32,
};
use crate::bindings::types::{
    AnnealControl, KILN_ANNEAL_TC_SLIM_SMEM, KILN_ANNEAL_TC_SMEM, KILN_ANNEAL_WGMMA_SMEM,
};
use crate::error::AnnealError;
use gpu_core::{Backend, GpuRepr, Kernel, KernelDecl};

/// Parameter tuple of `anneal_assign_tc_*` for points of type `T`.
pub type TcParams<T> = (
    *const T,
    *const u16,
    *const f32,
    *const f32,
    u32,
    u32,
    u32,
    *const f32,
    *const u16,
    *const f32,
    *const f32,
    u32,
    u32,
    *const u32,
    *const AnnealControl,
    *mut u32,
    *mut f32,
    *mut u32,
    *mut u32,
    *mut u32,
);

/// Parameter tuple of `anneal_assign_wgmma` and `anneal_assign_wgmma_chunked`
/// (anneal_wgmma.h): the f16 copies in, each point's candidate list out.
pub type WgmmaParams = (
    *const u16,
    *const f32,
    *const f32,
    u32,
    u32,
    u32,
    *const u16,
    *const f32,
    u32,
    u32,
    *const u32,
    *const AnnealControl,
    *mut u32,
);

/// Parameter tuple of `anneal_refine_lists_*` for points of type `T`.
pub type RefineParams<T> = (
    *const T,
    *const f32,
    u32,
    u32,
    *const f32,
    *const f32,
    u32,
    *const AnnealControl,
    *const u32,
    *mut u32,
    *mut f32,
    *mut u32,
    *mut u32,
    *mut u32,
);

/// Parameter tuple of `anneal_column_sums_*` for points of type `T`.
pub type ColumnSumsParams<T> = (*const T, u32, u32, *mut f32);

/// Parameter tuple of `anneal_absmax_*` for points of type `T`.
pub type AbsmaxParams<T> = (*const T, u32, u32, *const f32, f32, *mut u32);

/// Parameter tuple of `anneal_to_half_*` for values of type `T`.
pub type ToHalfParams<T> = (
    *const T,
    *const f32,
    u32,
    u32,
    u32,
    *const f32,
    f32,
    *mut u32,
    *mut u32,
    *mut u16,
    *mut f32,
);

/// Parameter tuple of `anneal_assign_list_*` for points of type `T` (the
/// list kernel and, in its last block, the finish).
pub type ListParams<T> = (
    *const T,
    *const f32,
    u32,
    *const f32,
    *const f32,
    u32,
    u32,
    *const AnnealControl,
    *const u32,
    *const u32,
    *mut u64,
    *mut u32,
    *mut f32,
    *mut u32,
    *mut u32,
);

/// A point type the tensor-core kernels read: `f32`, or `u16` for f16 points
/// (raw IEEE half bits). Picks the kernels of that type.
pub trait TcPoint: GpuRepr {
    /// `anneal_assign_tc_*` for this type.
    type Tc: KernelDecl<Params = TcParams<Self>>;
    /// `anneal_assign_tc_slim_*` for this type.
    type TcSlim: KernelDecl<Params = TcParams<Self>>;
    /// `anneal_refine_lists_*` for this type (after the wgmma kernels).
    type Refine: KernelDecl<Params = RefineParams<Self>>;
    /// `anneal_assign_list_*` for this type.
    type List: KernelDecl<Params = ListParams<Self>>;
    /// `anneal_column_sums_*` for this type.
    type ColumnSums: KernelDecl<Params = ColumnSumsParams<Self>>;
    /// `anneal_absmax_*` for this type.
    type Absmax: KernelDecl<Params = AbsmaxParams<Self>>;
    /// `anneal_to_half_*` for this type.
    type ToHalf: KernelDecl<Params = ToHalfParams<Self>>;
    /// The kernels of this type, from `all`.
    fn kernels(all: &TcKernels) -> TypedKernels<'_, Self>;
}

/// The kernels of one point type.
#[derive(Debug)]
pub struct TypedKernels<'a, T: TcPoint> {
    pub(super) tc: &'a Kernel<T::Tc>,
    pub(super) tc_slim: &'a Kernel<T::TcSlim>,
    /// Present where [`super::wgmma_available`] (and the backend has the
    /// module).
    pub(super) wg: Option<TypedWgmma<'a, T>>,
    pub(super) list: &'a Kernel<T::List>,
    pub(super) column_sums: &'a Kernel<T::ColumnSums>,
    pub(super) absmax: &'a Kernel<T::Absmax>,
    pub(super) to_half: &'a Kernel<T::ToHalf>,
}

/// The wgmma kernels (plain and chunked, for every point type) and the
/// refinement of their lists for one point type.
pub struct TypedWgmma<'a, T: TcPoint> {
    pub(super) plain: &'a Kernel<anneal_assign_wgmma>,
    pub(super) chunked: &'a Kernel<anneal_assign_wgmma_chunked>,
    pub(super) refine: &'a Kernel<T::Refine>,
}

// By hand: a derive would ask the kernel declarations for Debug.
impl<T: TcPoint> std::fmt::Debug for TypedWgmma<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedWgmma")
            .field("plain", &<anneal_assign_wgmma as KernelDecl>::NAME)
            .field(
                "chunked",
                &<anneal_assign_wgmma_chunked as KernelDecl>::NAME,
            )
            .field("refine", &<T::Refine as KernelDecl>::NAME)
            .finish()
    }
}

impl TcPoint for f32 {
    type Tc = anneal_assign_tc_f32;
    type TcSlim = anneal_assign_tc_slim_f32;
    type Refine = anneal_refine_lists_f32;
    type List = anneal_assign_list_f32;
    type ColumnSums = anneal_column_sums_f32;
    type Absmax = anneal_absmax_f32;
    type ToHalf = anneal_to_half_f32;
    fn kernels(all: &TcKernels) -> TypedKernels<'_, Self> {
        TypedKernels {
            tc: &all.tc_f32,
            tc_slim: &all.tc_slim_f32,
            wg: all.wgmma.as_ref().map(|w| TypedWgmma {
                plain: &w.plain,
                chunked: &w.chunked,
                refine: &w.refine_f32,
            }),
            list: &all.list_f32,
            column_sums: &all.column_sums_f32,
            absmax: &all.absmax_f32,
            to_half: &all.to_half_f32,
        }
    }
}

impl TcPoint for u16 {
    type Tc = anneal_assign_tc_f16;
    type TcSlim = anneal_assign_tc_slim_f16;
    type Refine = anneal_refine_lists_f16;
    type List = anneal_assign_list_f16;
    type ColumnSums = anneal_column_sums_f16;
    type Absmax = anneal_absmax_f16;
    type ToHalf = anneal_to_half_f16;
    fn kernels(all: &TcKernels) -> TypedKernels<'_, Self> {
        TypedKernels {
            tc: &all.tc_f16,
            tc_slim: &all.tc_slim_f16,
            wg: all.wgmma.as_ref().map(|w| TypedWgmma {
                plain: &w.plain,
                chunked: &w.chunked,
                refine: &w.refine_f16,
            }),
            list: &all.list_f16,
            column_sums: &all.column_sums_f16,
            absmax: &all.absmax_f16,
            to_half: &all.to_half_f16,
        }
    }
}

/// The wgmma kernels, plain and chunked, and the refinement of their lists
/// for both point types: one module, so all four or none.
#[derive(Debug)]
pub(super) struct WgmmaKernels {
    pub(super) plain: Kernel<anneal_assign_wgmma>,
    pub(super) chunked: Kernel<anneal_assign_wgmma_chunked>,
    pub(super) refine_f32: Kernel<anneal_refine_lists_f32>,
    pub(super) refine_f16: Kernel<anneal_refine_lists_f16>,
}

/// The kernels, both point types.
#[derive(Debug)]
pub struct TcKernels {
    pub(super) tc_f32: Kernel<anneal_assign_tc_f32>,
    pub(super) tc_slim_f32: Kernel<anneal_assign_tc_slim_f32>,
    pub(super) list_f32: Kernel<anneal_assign_list_f32>,
    pub(super) column_sums_f32: Kernel<anneal_column_sums_f32>,
    pub(super) absmax_f32: Kernel<anneal_absmax_f32>,
    pub(super) to_half_f32: Kernel<anneal_to_half_f32>,
    pub(super) tc_f16: Kernel<anneal_assign_tc_f16>,
    pub(super) tc_slim_f16: Kernel<anneal_assign_tc_slim_f16>,
    pub(super) list_f16: Kernel<anneal_assign_list_f16>,
    pub(super) column_sums_f16: Kernel<anneal_column_sums_f16>,
    pub(super) absmax_f16: Kernel<anneal_absmax_f16>,
    pub(super) to_half_f16: Kernel<anneal_to_half_f16>,
    /// Where [`super::wgmma_available`] (and the backend has the module).
    pub(super) wgmma: Option<WgmmaKernels>,
}

impl TcKernels {
    /// Loads every kernel from `backend` (the wgmma ones where
    /// [`super::wgmma_available`] on a device of `compute_capability` and the
    /// backend has their module), each with its shared memory reserved.
    pub(super) fn load(
        backend: &Backend,
        compute_capability: (u32, u32),
    ) -> Result<Self, AnnealError> {
        let mut tc_f32: Kernel<anneal_assign_tc_f32> = backend.kernel()?;
        let mut tc_f16: Kernel<anneal_assign_tc_f16> = backend.kernel()?;
        let mut tc_slim_f32: Kernel<anneal_assign_tc_slim_f32> = backend.kernel()?;
        let mut tc_slim_f16: Kernel<anneal_assign_tc_slim_f16> = backend.kernel()?;
        tc_f32.reserve_dynamic_shared(KILN_ANNEAL_TC_SMEM)?;
        tc_f16.reserve_dynamic_shared(KILN_ANNEAL_TC_SMEM)?;
        tc_slim_f32.reserve_dynamic_shared(KILN_ANNEAL_TC_SLIM_SMEM)?;
        tc_slim_f16.reserve_dynamic_shared(KILN_ANNEAL_TC_SLIM_SMEM)?;
        let wgmma = if super::wgmma_available(compute_capability, crate::modules::ALL) {
            wgmma_kernels(backend)?
        } else {
            None
        };
        Ok(Self {
            tc_f32,
            tc_slim_f32,
            list_f32: backend.kernel()?,
            column_sums_f32: backend.kernel()?,
            absmax_f32: backend.kernel()?,
            to_half_f32: backend.kernel()?,
            tc_f16,
            tc_slim_f16,
            list_f16: backend.kernel()?,
            column_sums_f16: backend.kernel()?,
            absmax_f16: backend.kernel()?,
            to_half_f16: backend.kernel()?,
            wgmma,
        })
    }
}

/// The wgmma kernels and their lists' refinement, or `None` where the
/// backend was not handed their module.
fn wgmma_kernels(backend: &Backend) -> Result<Option<WgmmaKernels>, AnnealError> {
    let (Some(plain), Some(chunked)) = (wgmma_kernel(backend)?, wgmma_kernel(backend)?) else {
        return Ok(None);
    };
    let (Some(refine_f32), Some(refine_f16)) =
        (optional_kernel(backend)?, optional_kernel(backend)?)
    else {
        return Ok(None);
    };
    Ok(Some(WgmmaKernels {
        plain,
        chunked,
        refine_f32,
        refine_f16,
    }))
}

/// The wgmma kernel `K` with its shared memory reserved, or `None` where the
/// backend was not handed its module.
fn wgmma_kernel<K: KernelDecl>(backend: &Backend) -> Result<Option<Kernel<K>>, AnnealError>
where
    K::Params: gpu_core::LaunchParams,
{
    let Some(mut kernel) = optional_kernel::<K>(backend)? else {
        return Ok(None);
    };
    kernel.reserve_dynamic_shared(KILN_ANNEAL_WGMMA_SMEM)?;
    Ok(Some(kernel))
}

/// The kernel `K`, or `None` where the backend was not handed its module.
fn optional_kernel<K: KernelDecl>(backend: &Backend) -> Result<Option<Kernel<K>>, AnnealError>
where
    K::Params: gpu_core::LaunchParams,
{
    match backend.kernel::<K>() {
        Ok(kernel) => Ok(Some(kernel)),
        Err(gpu_core::Error::KernelNotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
