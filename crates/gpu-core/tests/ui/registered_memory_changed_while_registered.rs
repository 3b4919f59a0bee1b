use gpu_core::Backend;

fn main() {
    let stream = Backend::cpu().default_stream();
    let mut data = vec![1.0f32; 4];
    let registered = stream.register_host(&data).unwrap();
    let mut on_device = stream.alloc_zeros::<f32>(4).unwrap();
    let copy = stream
        .copy_to_device_async(&registered, &mut on_device)
        .unwrap();
    // The registration borrows the caller's memory: no growing (moving) it,
    // nor dropping the registration, while the copy reads it.
    data.push(2.0);
    drop(registered);
    copy.wait().unwrap();
}
