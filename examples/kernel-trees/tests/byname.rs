//! Kernels with no header, launched by name: the argument list is checked
//! against the parameter sizes the driver reports, so a wrong count or a
//! wrong size is an `Err` naming the kernel and the parameter, and the kernel
//! never runs (its output stays as it was). The same kernels launched typed,
//! through the declarations codegen read from `byname.cu` itself (the
//! template's instantiations under their mangled names).

use gpu_core::{Arg, Args, Backend, DeviceView, Error, KernelDecl, LaunchConfig};
use kernel_trees::kernels::{byname_fill_float, byname_fill_uint32_t, byname_iota, byname_scatter};
use kernel_trees::{modules, reference, CUDA_ENABLED};

/// `struct Span { uint32_t start; uint32_t len; }` in byname.cu, by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    len: u32,
}
gpu_core::gpu_repr!(Span = "Span" { size: 8, align: 4, fields: { start: 0, len: 4 } });

#[test]
fn a_launch_by_name_needs_cuda() {
    let err = Backend::cpu().kernel_by_name("byname_iota").unwrap_err();
    assert!(matches!(err, Error::ByNameNeedsCuda { .. }), "{err}");
}

#[test]
fn by_name_right_lists_run_and_wrong_ones_never_reach_the_gpu() {
    let Some(backend) = gpu_core::testing::cuda_backend(&[&modules::BYNAME]) else {
        return;
    };
    let stream = backend.default_stream();
    let iota = backend.kernel_by_name("byname_iota").unwrap();
    assert_eq!(
        iota.param_sizes(),
        [8, 4, 8],
        "uint32_t *, uint32_t, size_t"
    );
    let n = 1000usize;
    let sentinel = vec![u32::MAX; n];
    let mut out = stream.to_device(&sentinel).unwrap();
    let config = LaunchConfig::for_elements(n as u32, 128);

    // The list kinds (the contract of `Args::new`): `out` is a u32 view of `n`
    // elements where the kernel takes `uint32_t *out` and writes at most `n`
    // elements; the rest are values. The wrong lists differ in count or size
    // only, which the launch checks.
    // SAFETY: see the list kinds above (views where it takes pointers).
    let too_few = unsafe { Args::new([Arg::view_mut(out.view_mut()), Arg::value(7u32)]) };
    let err = stream.launch_by_name(&iota, config, too_few).unwrap_err();
    assert!(err.to_string().contains("byname_iota"), "{err}");
    assert!(matches!(err, Error::LaunchArgs { .. }), "{err}");
    // SAFETY: see the list kinds above (views where it takes pointers).
    let n_as_u32 = unsafe {
        Args::new([
            Arg::view_mut(out.view_mut()),
            Arg::value(7u32),
            Arg::value(n as u32),
        ])
    };
    let err = stream.launch_by_name(&iota, config, n_as_u32).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("byname_iota") && text.contains('2'),
        "names the kernel and parameter 2: {text}"
    );
    stream.synchronize().unwrap();
    assert_eq!(
        stream.to_host(&out.view()).unwrap(),
        sentinel,
        "a rejected launch ran"
    );

    // SAFETY: see the list kinds above (views where it takes pointers).
    let right = unsafe {
        Args::new([
            Arg::view_mut(out.view_mut()),
            Arg::value(7u32),
            Arg::value(n),
        ])
    };
    stream.launch_by_name(&iota, config, right).unwrap();
    assert_eq!(stream.to_host(&out.view()).unwrap(), reference::iota(7, n));

    // A struct by value: its size is what the driver checks.
    let fill = backend.kernel_by_name("byname_fill_span").unwrap();
    assert_eq!(fill.param_sizes(), [8, 8, 4]);
    let span = Span { start: 10, len: 20 };
    // SAFETY: see the list kinds above (views where it takes pointers).
    let args = unsafe {
        Args::new([
            Arg::view_mut(out.view_mut()),
            Arg::value(span),
            Arg::value(5u32),
        ])
    };
    stream
        .launch_by_name(&fill, LaunchConfig::for_elements(20, 32), args)
        .unwrap();
    let got = stream.to_host(&out.view()).unwrap();
    let mut want = reference::iota(7, n);
    want[10..30].fill(5);
    assert_eq!(got, want);
}

#[test]
fn by_name_a_null_pointer_is_an_argument_of_its_own() {
    let Some(backend) = gpu_core::testing::cuda_backend(&[&modules::BYNAME]) else {
        return;
    };
    let stream = backend.default_stream();
    let scatter = backend.kernel_by_name("byname_scatter").unwrap();
    assert_eq!(scatter.param_sizes(), [8, 8, 4, 8]);
    let n = 64usize;
    let config = LaunchConfig::for_elements(n as u32, 32);
    let mut out = stream.to_device(&vec![0u32; n]).unwrap();
    // The list kinds: `out` is a u32 view of `n` elements where the kernel
    // takes `uint32_t *out`; `index` is null (contiguous) or a u32 view of
    // `n` indices below `n`; the rest are values.
    // SAFETY: see the list kinds above.
    let contiguous = unsafe {
        Args::new([
            Arg::view_mut(out.view_mut()),
            Arg::null(),
            Arg::value(3u32),
            Arg::value(n),
        ])
    };
    stream.launch_by_name(&scatter, config, contiguous).unwrap();
    assert_eq!(stream.to_host(&out.view()).unwrap(), vec![3u32; n]);
    // Every other slot, through an index: the null was not a stale pointer.
    let index: Vec<u32> = (0..n as u32).map(|i| i / 2 * 2).collect();
    let index = stream.to_device(&index).unwrap();
    let mut out = stream.to_device(&vec![0u32; n]).unwrap();
    // SAFETY: see the list kinds above.
    let scattered = unsafe {
        Args::new([
            Arg::view_mut(out.view_mut()),
            Arg::view(index.view()),
            Arg::value(9u32),
            Arg::value(n),
        ])
    };
    stream.launch_by_name(&scatter, config, scattered).unwrap();
    let want: Vec<u32> = (0..n).map(|i| if i % 2 == 0 { 9 } else { 0 }).collect();
    assert_eq!(stream.to_host(&out.view()).unwrap(), want);
    // A null where a value belongs is refused before the GPU, by its size.
    // SAFETY: see the list kinds above (refused before any launch).
    let wrong = unsafe {
        Args::new([
            Arg::view_mut(out.view_mut()),
            Arg::null(),
            Arg::null(),
            Arg::value(n),
        ])
    };
    let err = stream.launch_by_name(&scatter, config, wrong).unwrap_err();
    assert!(matches!(err, Error::LaunchArgs { .. }), "{err}");
}

/// The declarations from the source: the C parameter types, and the
/// template's instantiations under the symbols nvcc gives them.
#[test]
fn source_declarations_carry_the_definitions_types_and_symbols() {
    fn params<K: KernelDecl>(p: K::Params) -> K::Params {
        p
    }
    let _: (*mut u32, u32, usize) = params::<byname_iota>((std::ptr::null_mut(), 7, 0));
    let _: (*mut u32, *const u32, u32, usize) =
        params::<byname_scatter>((std::ptr::null_mut(), std::ptr::null(), 3, 0));
    let _: (*mut f32, f32, usize) = params::<byname_fill_float>((std::ptr::null_mut(), 1.5, 0));
    let _: (*mut u32, u32, usize) = params::<byname_fill_uint32_t>((std::ptr::null_mut(), 9, 0));
    assert_eq!(byname_iota::NAME, "byname_iota");
    assert_eq!(byname_fill_float::NAME, "_Z11byname_fillIfEvPT_S0_m");
    assert_eq!(byname_fill_uint32_t::NAME, "_Z11byname_fillIjEvPT_S0_m");
    assert_eq!(byname_fill_float::HEADER, "byname/byname.cu");
    if CUDA_ENABLED {
        for name in [
            byname_iota::NAME,
            byname_scatter::NAME,
            byname_fill_float::NAME,
            byname_fill_uint32_t::NAME,
        ] {
            assert!(
                modules::BYNAME.has_kernel(name),
                "{name} is not in the image"
            );
        }
    }
}

#[test]
fn source_declared_kernels_launch_typed() {
    let Some(backend) = gpu_core::testing::cuda_backend(&[&modules::BYNAME]) else {
        return;
    };
    let stream = backend.default_stream();
    let n = 1000usize;
    let config = LaunchConfig::for_elements(n as u32, 128);
    let iota = backend.kernel::<byname_iota>().unwrap();
    let mut out = stream.alloc_zeros::<u32>(n).unwrap();
    stream
        .launch(&iota, config, (out.view_mut(), 7u32, n))
        .unwrap();
    assert_eq!(stream.to_host(&out.view()).unwrap(), reference::iota(7, n));
    let fill = backend.kernel::<byname_fill_float>().unwrap();
    let mut floats = stream.alloc_zeros::<f32>(n).unwrap();
    stream
        .launch(&fill, config, (floats.view_mut(), 1.5f32, n))
        .unwrap();
    assert_eq!(stream.to_host(&floats.view()).unwrap(), vec![1.5f32; n]);
    let fill = backend.kernel::<byname_fill_uint32_t>().unwrap();
    stream
        .launch(&fill, config, (out.view_mut(), 9u32, n))
        .unwrap();
    assert_eq!(stream.to_host(&out.view()).unwrap(), vec![9u32; n]);
    // A typed null: `index` is `const uint32_t *`, and DeviceView::null()
    // passes nullptr (contiguous), then a real index (every other slot).
    let scatter = backend.kernel::<byname_scatter>().unwrap();
    let mut out = stream.alloc_zeros::<u32>(n).unwrap();
    stream
        .launch(
            &scatter,
            config,
            (out.view_mut(), DeviceView::null(), 3u32, n),
        )
        .unwrap();
    assert_eq!(stream.to_host(&out.view()).unwrap(), vec![3u32; n]);
    let index: Vec<u32> = (0..n as u32).map(|i| i / 2 * 2).collect();
    let index = stream.to_device(&index).unwrap();
    let mut out = stream.alloc_zeros::<u32>(n).unwrap();
    stream
        .launch(&scatter, config, (out.view_mut(), index.view(), 9u32, n))
        .unwrap();
    let want: Vec<u32> = (0..n).map(|i| if i % 2 == 0 { 9 } else { 0 }).collect();
    assert_eq!(stream.to_host(&out.view()).unwrap(), want);
}
