// Statistics, step 3 of 4: the member list, points grouped by anchor and in
// point order within each anchor (a stable counting sort). A workgroup per
// segment takes its points 256 at a time; a point's slot is its anchor's
// start, the members of that anchor in earlier segments and earlier rounds,
// and its rank among this round's points of the same anchor.

struct Params {
    n: u32,
    m: u32,
    segment: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> assign: array<u32>;
@group(0) @binding(2) var<storage, read_write> seg: array<u32>;
@group(0) @binding(3) var<storage, read> starts: array<u32>;
@group(0) @binding(4) var<storage, read_write> members: array<u32>;

var<workgroup> round_assign: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let s = wg.x + wg.y * p.groups_x;
    let first = s * p.segment;
    if (first >= p.n) {
        return;
    }
    let last = min(first + p.segment, p.n);
    for (var base = first; base < last; base += 256u) {
        let i = base + t;
        var a = 0xffffffffu;
        if (i < last) {
            a = assign[i];
        }
        round_assign[t] = a;
        workgroupBarrier();
        var before = 0u;
        var after = 0u;
        for (var u = 0u; u < 256u; u++) {
            let same = u32(round_assign[u] == a);
            before += select(0u, same, u < t);
            after += select(0u, same, u > t);
        }
        var slot = 0u;
        if (i < last) {
            slot = starts[a] + seg[s * p.m + a] + before;
            members[slot] = i;
        }
        // Every thread has read this round's offsets before the last
        // member of each anchor moves them on.
        storageBarrier();
        workgroupBarrier();
        if (i < last && after == 0u) {
            seg[s * p.m + a] += before + 1u;
        }
        storageBarrier();
        workgroupBarrier();
    }
}
