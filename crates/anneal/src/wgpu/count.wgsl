// Statistics, step 1 of 4: members per (segment, anchor), segments being
// runs of SEGMENT points. Integer atomics: the counts do not depend on the
// order in which threads run.

struct Params {
    n: u32,
    m: u32,
    segment: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> assign: array<u32>;
@group(0) @binding(2) var<storage, read_write> seg: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (wg.x + wg.y * p.groups_x) * 256u + t;
    if (i >= p.n) {
        return;
    }
    atomicAdd(&seg[(i / p.segment) * p.m + assign[i]], 1u);
}
