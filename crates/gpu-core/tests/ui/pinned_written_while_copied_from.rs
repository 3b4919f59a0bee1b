use gpu_core::Backend;

fn main() {
    let stream = Backend::cpu().default_stream();
    let mut staging = stream.alloc_pinned::<f32>(4).unwrap();
    let mut on_device = stream.alloc_zeros::<f32>(4).unwrap();
    let copy = stream
        .copy_to_device_async(&staging, &mut on_device)
        .unwrap();
    // The copy is still reading `staging`: no writing it meanwhile.
    staging.as_mut_slice().unwrap()[0] = 1.0;
    copy.wait().unwrap();
}
