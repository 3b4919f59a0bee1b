// Statistics, step 2 of 4: per anchor, the counts of the segments turned
// into exclusive prefixes (in place) and the anchor's total. A thread per
// anchor.

struct Params {
    m: u32,
    segments: u32,
    // This chunk's place in `counts` (chunk * anchors of the run).
    counts_offset: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> seg: array<u32>;
@group(0) @binding(2) var<storage, read_write> counts: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let j = id.x;
    if (j >= p.m) {
        return;
    }
    var run = 0u;
    for (var s = 0u; s < p.segments; s++) {
        let v = seg[s * p.m + j];
        seg[s * p.m + j] = run;
        run += v;
    }
    counts[p.counts_offset + j] = run;
}
