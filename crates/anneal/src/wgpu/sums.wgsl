// Statistics, step 4 of 4: per anchor, the sum of its members' rows and of
// their distances, in point order (the member list's order), compensated
// (Kahan) in f32: the same bits on every run, close to the CPU engine's f64
// sums. Workgroup (anchor, block of 64 dimensions), a thread per dimension.

struct Params {
    m: u32,
    d: u32,
    // This chunk's place in `counts` / `sumsq` (chunk * anchors of the run)
    // and in `sums` (that times d).
    counts_offset: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dist: array<f32>;
@group(0) @binding(3) var<storage, read> members: array<u32>;
@group(0) @binding(4) var<storage, read> starts: array<u32>;
@group(0) @binding(5) var<storage, read> counts: array<u32>;
@group(0) @binding(6) var<storage, read_write> sums: array<f32>;
@group(0) @binding(7) var<storage, read_write> sumsq: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let j = wg.x + wg.y * p.groups_x;
    if (j >= p.m) {
        return;
    }
    let k = wg.z * 64u + t;
    let first = starts[j];
    let count = counts[p.counts_offset + j];
    let own_distances = wg.z == 0u && t == 0u;
    var s = 0.0;
    var s_err = 0.0;
    var q = 0.0;
    var q_err = 0.0;
    for (var e = 0u; e < count; e++) {
        let i = members[first + e];
        if (k < p.d) {
            let y = x[i * p.d + k] - s_err;
            let sum = s + y;
            s_err = (sum - s) - y;
            s = sum;
        }
        if (own_distances) {
            let y = dist[i] - q_err;
            let sum = q + y;
            q_err = (sum - q) - y;
            q = sum;
        }
    }
    if (k < p.d) {
        sums[p.counts_offset * p.d + j * p.d + k] = s;
    }
    if (own_distances) {
        sumsq[p.counts_offset + j] = q;
    }
}
