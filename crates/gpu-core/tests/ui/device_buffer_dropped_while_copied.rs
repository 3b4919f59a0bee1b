use gpu_core::Backend;

fn main() {
    let stream = Backend::cpu().default_stream();
    let staging = stream.alloc_pinned::<f32>(4).unwrap();
    let mut on_device = stream.alloc_zeros::<f32>(4).unwrap();
    let copy = stream
        .copy_to_device_async(&staging, &mut on_device)
        .unwrap();
    // The device side is borrowed by the copy too.
    drop(on_device);
    copy.wait().unwrap();
}
