//! The lowest layer of gpu-core: thin functions over the CUDA driver (through
//! cudarc's `sys` and `result` layers) and over libnccl, loaded at run time.
//!
//! Everything here takes raw handles or cudarc's own types, and what can
//! fail returns `Result` with a driver- or NCCL-level error; nothing here
//! names a gpu-core type from the modules above, which turn these errors into
//! gpu-core's `Error`s with context. Each `unsafe fn` states its contract
//! under `# Safety`, each `unsafe` block why it holds under `// SAFETY:`.

pub(crate) mod driver;
pub(crate) mod nccl;

/// A `T` with every byte zero.
pub(crate) fn zeroed<T: kiln_abi::GpuRepr>() -> T {
    // SAFETY: `GpuRepr` promises every bit pattern of the fields is a valid
    // value, all-zero included.
    unsafe { std::mem::zeroed() }
}
