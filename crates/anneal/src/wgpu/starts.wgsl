// Statistics, step 2b: each anchor's first slot in the member list (the
// exclusive prefix of the counts, anchors in order). One workgroup: each
// thread sums a block of anchors, the block sums are scanned in workgroup
// memory, then each thread writes its block's slots.

struct Params {
    m: u32,
    counts_offset: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> counts: array<u32>;
@group(0) @binding(2) var<storage, read_write> starts: array<u32>;

var<workgroup> block_sums: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    let block = (p.m + 255u) / 256u;
    let lo = min(t * block, p.m);
    let hi = min(lo + block, p.m);
    var own = 0u;
    for (var j = lo; j < hi; j++) {
        own += counts[p.counts_offset + j];
    }
    block_sums[t] = own;
    workgroupBarrier();
    // Inclusive Hillis-Steele scan of the 256 block sums.
    for (var step = 1u; step < 256u; step *= 2u) {
        var v = block_sums[t];
        if (t >= step) {
            v += block_sums[t - step];
        }
        workgroupBarrier();
        block_sums[t] = v;
        workgroupBarrier();
    }
    var run = block_sums[t] - own;
    for (var j = lo; j < hi; j++) {
        starts[j] = run;
        run += counts[p.counts_offset + j];
    }
}
