//! Shared by the integration tests: a tiny kernel as hand-written PTX (so that
//! GPU tests launch real code even when built without a toolkit), its typed
//! declaration and CPU body, the backends to run on (the skip helper is
//! `gpu_core::testing`), and a read-only file mapping.
#![allow(dead_code, non_camel_case_types)]

use gpu_core::{
    Backend, ConstVoidPtr, FatbinImage, HostPtr, HostPtrMut, KernelDecl, LaunchConfig, MutVoidPtr,
};

/// `c[i] = a[i] + b[i]` for `i < n`; PTX ISA 7.0 so that any driver since
/// CUDA 11.0 JITs it for any device since sm_70.
pub(crate) const ADD_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry add_f32(
    .param .u64 add_f32_a,
    .param .u64 add_f32_b,
    .param .u64 add_f32_c,
    .param .u32 add_f32_n
)
{
    .reg .pred %p<2>;
    .reg .f32 %f<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<11>;

    ld.param.u64 %rd1, [add_f32_a];
    ld.param.u64 %rd2, [add_f32_b];
    ld.param.u64 %rd3, [add_f32_c];
    ld.param.u32 %r2, [add_f32_n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r1, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
DONE:
    ret;
}

.visible .entry trap_kernel()
{
    trap;
}

.visible .entry oob_write(
    .param .u64 oob_write_c,
    .param .u32 oob_write_n
)
{
    .reg .b32 %r<2>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<4>;

    ld.param.u64 %rd1, [oob_write_c];
    ld.param.u32 %r1, [oob_write_n];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd2, %rd2, %rd3;
    mov.f32 %f1, 0f3F800000;
    st.global.f32 [%rd2], %f1;
    ret;
}
"#;

pub(crate) static TEST_MODULE: FatbinImage = FatbinImage {
    name: "gpu_core_test",
    image: ADD_PTX.as_bytes(),
    sass: &[],
    ptx: &[70],
    kernels: &["add_f32", "trap_kernel", "oob_write"],
    toolkit: (11, 0),
};

#[derive(Debug, Clone, Copy)]
pub(crate) struct add_f32;
// SAFETY: `NAME` and `Params` are the test kernel's own entry point and C
// parameter types.
unsafe impl KernelDecl for add_f32 {
    const NAME: &'static str = "add_f32";
    const HEADER: &'static str = "tests/common/mod.rs";
    const PARAM_NAMES: &'static [&'static str] = &["a", "b", "c", "n"];
    const PARAM_LAYOUT: &'static [(usize, usize)] = &[(8, 8), (8, 8), (8, 8), (4, 4)];
    type Params = (*const f32, *const f32, *mut f32, u32);
}

/// `add_f32` declared as codegen declares a kernel whose source takes
/// `const void *` / `void *` (a GGUF block, say): any view converts into
/// each pointer; PTX passes every pointer as one `.u64` either way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct add_f32_untyped;
// SAFETY: the test kernel's entry point; `void *` parameters are its
// pointers as untyped addresses (the same `.u64` params), then `n`.
unsafe impl KernelDecl for add_f32_untyped {
    const NAME: &'static str = "add_f32";
    const HEADER: &'static str = "tests/common/mod.rs";
    const PARAM_NAMES: &'static [&'static str] = &["a", "b", "c", "n"];
    const PARAM_LAYOUT: &'static [(usize, usize)] = &[(8, 8), (8, 8), (8, 8), (4, 4)];
    type Params = (ConstVoidPtr, ConstVoidPtr, MutVoidPtr, u32);
}

/// The CPU body of `add_f32_untyped`: the pointers read back as `f32`, as
/// the kernel's source casts them.
pub(crate) fn add_f32_untyped_cpu(
    config: &LaunchConfig,
    (a, b, c, n): (HostPtr<'_>, HostPtr<'_>, HostPtrMut<'_>, u32),
) {
    let (a, b) = (a.get::<f32>().unwrap(), b.get::<f32>().unwrap());
    add_f32_cpu(config, (a, b, c.into_mut::<f32>().unwrap(), n));
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct trap_kernel;
// SAFETY: `NAME` and `Params` are the test kernel's own entry point and C
// parameter types.
unsafe impl KernelDecl for trap_kernel {
    const NAME: &'static str = "trap_kernel";
    const HEADER: &'static str = "tests/common/mod.rs";
    const PARAM_NAMES: &'static [&'static str] = &[];
    const PARAM_LAYOUT: &'static [(usize, usize)] = &[];
    type Params = ();
}

/// Writes `c[n]`: one element past a buffer of `n`. The positive control for
/// compute-sanitizer's memcheck (`tests/memcheck_control.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct oob_write;
// SAFETY: `NAME` and `Params` are the test kernel's own entry point and C
// parameter types.
unsafe impl KernelDecl for oob_write {
    const NAME: &'static str = "oob_write";
    const HEADER: &'static str = "tests/common/mod.rs";
    const PARAM_NAMES: &'static [&'static str] = &["c", "n"];
    const PARAM_LAYOUT: &'static [(usize, usize)] = &[(8, 8), (4, 4)];
    type Params = (*mut f32, u32);
}

/// The CPU body of `add_f32`, written as a grid of threads would run it.
pub(crate) fn add_f32_cpu(config: &LaunchConfig, (a, b, c, n): (&[f32], &[f32], &mut [f32], u32)) {
    let threads = config.grid.0 as usize * config.block.0 as usize;
    for i in 0..threads.min(n as usize) {
        c[i] = a[i] + b[i];
    }
}

/// The CUDA backend with the test module, or `None` after printing why the
/// test is skipped (a failure under `KILN_REQUIRE_GPU`).
pub(crate) fn cuda_or_skip() -> Option<Backend> {
    gpu_core::testing::cuda_backend(&[&TEST_MODULE])
}

/// A file of the test's own mapped read-only (`PROT_READ`): pages the
/// driver can page-lock only as read-only (`tests/pinned.rs`).
pub(crate) fn map_read_only(file: &std::fs::File) -> memmap2::Mmap {
    // SAFETY: the tests map files they wrote themselves, and nothing writes
    // or truncates them while they are mapped.
    unsafe { memmap2::Mmap::map(file) }.unwrap()
}

/// Every backend present on this machine: the CPU always, CUDA when it runs.
pub(crate) fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::cpu()];
    all.extend(cuda_or_skip());
    all
}
