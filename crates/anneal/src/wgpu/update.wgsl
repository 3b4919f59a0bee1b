// The update: each anchor with members moves toward their mean by eta,
// `c += eta (mean - c)`; the chunks' partial sums are added in chunk order.
// A thread per (anchor, dimension); dimension 0 also writes the anchor's
// totals (members, distance sum) for the driver.

struct Params {
    m: u32,
    d: u32,
    chunks: u32,
    groups_x: u32,
    eta: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> counts: array<u32>;
@group(0) @binding(2) var<storage, read> sums: array<f32>;
@group(0) @binding(3) var<storage, read> sumsq: array<f32>;
@group(0) @binding(4) var<storage, read_write> anchors: array<f32>;
// Per anchor: members, then the distance sum's bits.
@group(0) @binding(5) var<storage, read_write> totals: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let j = wg.x + wg.y * p.groups_x;
    if (j >= p.m) {
        return;
    }
    let k = wg.z * 64u + t;
    var count = 0u;
    var s = 0.0;
    var q = 0.0;
    for (var c = 0u; c < p.chunks; c++) {
        count += counts[c * p.m + j];
        q += sumsq[c * p.m + j];
        if (k < p.d) {
            s += sums[(c * p.m + j) * p.d + k];
        }
    }
    if (k < p.d && count > 0u) {
        let mean = s / f32(count);
        let a = anchors[j * p.d + k];
        anchors[j * p.d + k] = a + p.eta * (mean - a);
    }
    if (wg.z == 0u && t == 0u) {
        totals[2u * j] = count;
        totals[2u * j + 1u] = bitcast<u32>(q);
    }
}
