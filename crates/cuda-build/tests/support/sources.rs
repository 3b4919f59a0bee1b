//! The fixtures' files: the rebuild fixture's three modules and headers, and
//! the modules fixture's `kiln.toml` with its sources. Real CUDA, so that the
//! real nvcc compiles them too.

/// Header included by `a.cu` and `b.cu`.
pub(crate) const SHARED_H: &str = "kernels/include/shared.h";
/// Header included by `c.cu` only.
pub(crate) const C_ONLY_H: &str = "kernels/include/c_only.h";

/// The fixture's kernels: real CUDA, so the real nvcc compiles them too.
pub(crate) const KERNEL_SOURCES: &[(&str, &str)] = &[
    (
        SHARED_H,
        "#pragma once\n__device__ inline float twice(float x) { return 2.0f * x; }\n",
    ),
    (
        C_ONLY_H,
        "#pragma once\n__device__ inline float halve(float x) { return 0.5f * x; }\n",
    ),
    (
        "kernels/a.cu",
        "#include \"shared.h\"\n\nextern \"C\" __global__ void a_kernel(float *x) {\n    x[threadIdx.x] = twice(x[threadIdx.x]);\n}\n",
    ),
    (
        "kernels/b.cu",
        "#include \"shared.h\"\n\nextern \"C\" __global__ void b_kernel(float *x) {\n    x[threadIdx.x] = twice(x[threadIdx.x]) + 1.0f;\n}\n",
    ),
    (
        "kernels/c.cu",
        "#include \"c_only.h\"\n\nextern \"C\" __global__ void c_kernel(float *x) {\n    x[threadIdx.x] = halve(x[threadIdx.x]);\n}\n",
    ),
];

/// Header included by `pair/caller.cu` and `single.cu` of the modules fixture.
pub(crate) const COMMON_CUH: &str = "kernels/include/common.cuh";

/// The modules fixture: `[modules]` entries of every shape (an `rdc` module
/// in each link mode, a static module, a module with its own archs, defines,
/// flags and include dir) beside a plain top-level `.cu`.
pub(crate) const MODULE_SOURCES: &[(&str, &str)] = &[
    (
        "kernels/kiln.toml",
        "archs = \"sm_80,sm_90\"\nnvcc-flags = [\"-O3\"]\n\n\
         [modules.pair]\nsources = [\"pair/*.cu\"]\nrdc = true\n\n\
         [modules.pairlib]\nsources = [\"pairlib/a.cu\", \"pairlib/b.cu\"]\nrdc = true\nlink = \"static\"\n\n\
         [modules.host]\nlink = \"static\"\n\n\
         [modules.only90]\nsources = [\"arch/only90.cu\"]\narchs = \"sm_90a\"\n\
         defines = [\"WIDTH=4\"]\nflags = [\"-lineinfo\"]\ninclude-dirs = [\"arch/include\"]\n",
    ),
    (
        COMMON_CUH,
        "#pragma once\n__device__ inline float twice(float x) { return 2.0f * x; }\n",
    ),
    (
        "kernels/pair/caller.cu",
        "#include \"common.cuh\"\n__device__ float helper(float x);\n\n\
         extern \"C\" __global__ void pair_kernel(float *x) {\n    x[threadIdx.x] = helper(twice(x[threadIdx.x]));\n}\n",
    ),
    (
        "kernels/pair/helper.cu",
        "__device__ float helper(float x) { return x + 1.0f; }\n",
    ),
    (
        "kernels/pairlib/a.cu",
        "__device__ float lib_helper(float x);\n\n\
         extern \"C\" __global__ void pairlib_kernel(float *x) {\n    x[threadIdx.x] = lib_helper(x[threadIdx.x]);\n}\n",
    ),
    (
        "kernels/pairlib/b.cu",
        "__device__ float lib_helper(float x) { return x * x; }\n",
    ),
    (
        "kernels/host.cu",
        "extern \"C\" __global__ void host_kernel(float *x) { x[threadIdx.x] = 0.0f; }\n\n\
         extern \"C\" int host_launch(float *x) {\n    host_kernel<<<1, 32>>>(x);\n    return 0;\n}\n",
    ),
    (
        "kernels/arch/include/width.cuh",
        "#pragma once\nconstexpr int width = WIDTH;\n",
    ),
    (
        "kernels/arch/only90.cu",
        "#include \"width.cuh\"\n\nextern \"C\" __global__ void only90_kernel(float *x) {\n    x[threadIdx.x * width] = 1.0f;\n}\n",
    ),
    (
        "kernels/single.cu",
        "#include \"common.cuh\"\n\nextern \"C\" __global__ void single_kernel(float *x) {\n    x[threadIdx.x] = twice(x[threadIdx.x]);\n}\n",
    ),
];
