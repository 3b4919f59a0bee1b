use gpu_core::Backend;

fn main() {
    let stream = Backend::cpu().default_stream();
    let on_device = stream.to_device(&[1.0f32; 4]).unwrap();
    let mut back = stream.alloc_pinned::<f32>(4).unwrap();
    let copy = stream.copy_to_host_async(&on_device, &mut back).unwrap();
    // The copy is still writing `back`: no reading it until it is waited for.
    let _ = back.as_slice().unwrap()[0];
    copy.wait().unwrap();
}
