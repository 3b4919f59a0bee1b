// Squared norms of rows, each summed in dimension order (as the CPU engine
// does): of the points once, of the anchors after each update.

struct Params {
    rows: u32,
    d: u32,
    groups_x: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> norms: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (wg.x + wg.y * p.groups_x) * 256u + t;
    if (i >= p.rows) {
        return;
    }
    var s = 0.0;
    for (var k = 0u; k < p.d; k++) {
        let v = x[i * p.d + k];
        s += v * v;
    }
    norms[i] = s;
}
