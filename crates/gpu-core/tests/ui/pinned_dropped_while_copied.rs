use gpu_core::Backend;

fn main() {
    let stream = Backend::cpu().default_stream();
    let on_device = stream.to_device(&[1.0f32; 4]).unwrap();
    let mut back = stream.alloc_pinned::<f32>(4).unwrap();
    let copy = stream
        .copy_to_host_async(on_device.slice(1..3).unwrap(), back.slice_mut(..2).unwrap())
        .unwrap();
    // Freed while the copy writes it: refused.
    drop(back);
    copy.wait().unwrap();
}
