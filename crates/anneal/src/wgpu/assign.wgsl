// The assignment: each row's nearest anchor in squared L2 distance, ties to
// the lowest index, as `|x|^2 + |c|^2 - 2 x.c` clamped at 0 (as the CPU and
// CUDA engines compute it). The CUDA SIMT kernel's tiling (kernels/anneal.cu):
// a workgroup of 256 threads takes 128 rows and walks the anchors 128 at a
// time; each step stages 8 dimensions of the rows and of the anchors in
// workgroup memory (rows padded to 132 floats: the stores hit distinct
// banks), and thread (ty, tx) keeps 8 rows x 8 anchors of dot products:
// rows 4 ty .. +3 and 64 + 4 ty .. +3, anchors 4 tx .. +3 and 64 + 4 tx .. +3
// of the tile, read from workgroup memory as vectors of 4 (four loads per 64
// fused multiply-adds). The dot products and running minima are named
// variables, never arrays indexed by a loop variable: the NVIDIA Vulkan
// compiler kept such arrays in local memory (every multiply-add a load and
// a store; the kernel ran at 2 TFLOP/s on the H100). At the end the 16
// threads sharing a row fold their running minima in order.

struct Params {
    // Rows of this dispatch, dimensions, anchors.
    n: u32,
    d: u32,
    m: u32,
    // 1: row i may not take anchor i + self_offset (the anchors' own
    // nearest-neighbour search), and a row with no other anchor keeps
    // 0xffffffff; 0: the points' assignment (such a row takes anchor 0).
    exclude_self: u32,
    // Workgroups along x of the dispatch (it may be 2-D past 65535).
    groups_x: u32,
    self_offset: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> x_norms: array<f32>;
@group(0) @binding(3) var<storage, read> c: array<f32>;
@group(0) @binding(4) var<storage, read> c_norms: array<f32>;
@group(0) @binding(5) var<storage, read_write> assign: array<u32>;
@group(0) @binding(6) var<storage, read_write> dist: array<f32>;

const TP: u32 = 128u;
const TA: u32 = 128u;
const TK: u32 = 8u;
// A staged dimension's row of 128 values, padded.
const STRIDE: u32 = 132u;

// k-major, 4 rows (anchors) a vector: xs[(k * STRIDE + row) / 4][row % 4].
var<workgroup> xs: array<vec4<f32>, 264>;
var<workgroup> cs: array<vec4<f32>, 264>;
var<workgroup> fold_d: array<f32, 128>;
var<workgroup> fold_i: array<u32, 128>;

fn better(dd: f32, a: u32, best_d: f32, best_i: u32) -> bool {
    return dd < best_d || (dd == best_d && a < best_i);
}

// Row `row`'s distances to anchors a .. a + 3 from its dot products `dots`,
// folded into its running minimum. A thread sees its anchors in increasing
// order: a strict `<` keeps the lowest index among equal distances.
fn consider(row: u32, a: u32, dots: vec4<f32>, bd: ptr<function, f32>, bi: ptr<function, u32>) {
    if (row >= p.n) {
        return;
    }
    let xn = x_norms[row];
    for (var q = 0u; q < 4u; q++) {
        let aq = a + q;
        if (aq < p.m && !(p.exclude_self != 0u && aq == row + p.self_offset)) {
            let dd = max(xn + c_norms[aq] - 2.0 * dots[q], 0.0);
            if (dd < *bd) {
                *bd = dd;
                *bi = aq;
            }
        }
    }
}

// Row r (0..8) of thread row ty, as a row of the tile.
fn tile_row(ty: u32, r: u32) -> u32 {
    return select(64u + 4u * ty + (r - 4u), 4u * ty + r, r < 4u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let group = wg.x + wg.y * p.groups_x;
    let row0 = group * TP;
    if (row0 >= p.n) {
        return;
    }
    let tx = t % 16u;
    let ty = t / 16u;
    let inf = bitcast<f32>(0x7f800000u);
    let none = select(0u, 0xffffffffu, p.exclude_self != 0u);
    let r0 = row0 + 4u * ty + 0u;
    let r1 = row0 + 4u * ty + 1u;
    let r2 = row0 + 4u * ty + 2u;
    let r3 = row0 + 4u * ty + 3u;
    let r4 = row0 + 64u + 4u * ty + 0u;
    let r5 = row0 + 64u + 4u * ty + 1u;
    let r6 = row0 + 64u + 4u * ty + 2u;
    let r7 = row0 + 64u + 4u * ty + 3u;
    var bd0 = inf; var bd1 = inf; var bd2 = inf; var bd3 = inf;
    var bd4 = inf; var bd5 = inf; var bd6 = inf; var bd7 = inf;
    var bi0 = none; var bi1 = none; var bi2 = none; var bi3 = none;
    var bi4 = none; var bi5 = none; var bi6 = none; var bi7 = none;
    for (var a0 = 0u; a0 < p.m; a0 += TA) {
        var pa0 = vec4(0.0); var pb0 = vec4(0.0);
        var pa1 = vec4(0.0); var pb1 = vec4(0.0);
        var pa2 = vec4(0.0); var pb2 = vec4(0.0);
        var pa3 = vec4(0.0); var pb3 = vec4(0.0);
        var pa4 = vec4(0.0); var pb4 = vec4(0.0);
        var pa5 = vec4(0.0); var pb5 = vec4(0.0);
        var pa6 = vec4(0.0); var pb6 = vec4(0.0);
        var pa7 = vec4(0.0); var pb7 = vec4(0.0);
        for (var k0 = 0u; k0 < p.d; k0 += TK) {
            // 1024 values of each, 4 per thread: 8 consecutive dimensions of
            // a row read by 8 consecutive threads.
            for (var s = 0u; s < 4u; s++) {
                let e = t + 256u * s;
                let kk = e % TK;
            let rr = e / TK;
                let k = k0 + kk;
            let row = row0 + rr;
                var v = 0.0;
                if (row < p.n && k < p.d) {
                    v = x[row * p.d + k];
                }
                xs[(kk * STRIDE + rr) / 4u][rr % 4u] = v;
                let a = a0 + rr;
                var w = 0.0;
                if (a < p.m && k < p.d) {
                    w = c[a * p.d + k];
                }
                cs[(kk * STRIDE + rr) / 4u][rr % 4u] = w;
            }
            workgroupBarrier();
            for (var kk = 0u; kk < TK; kk++) {
                let base = kk * (STRIDE / 4u);
                let xa = xs[base + ty];
                let xb = xs[base + 16u + ty];
                let ca = cs[base + tx];
                let cb = cs[base + 16u + tx];
                pa0 = fma(vec4(xa.x), ca, pa0);
                pb0 = fma(vec4(xa.x), cb, pb0);
                pa1 = fma(vec4(xa.y), ca, pa1);
                pb1 = fma(vec4(xa.y), cb, pb1);
                pa2 = fma(vec4(xa.z), ca, pa2);
                pb2 = fma(vec4(xa.z), cb, pb2);
                pa3 = fma(vec4(xa.w), ca, pa3);
                pb3 = fma(vec4(xa.w), cb, pb3);
                pa4 = fma(vec4(xb.x), ca, pa4);
                pb4 = fma(vec4(xb.x), cb, pb4);
                pa5 = fma(vec4(xb.y), ca, pa5);
                pb5 = fma(vec4(xb.y), cb, pb5);
                pa6 = fma(vec4(xb.z), ca, pa6);
                pb6 = fma(vec4(xb.z), cb, pb6);
                pa7 = fma(vec4(xb.w), ca, pa7);
                pb7 = fma(vec4(xb.w), cb, pb7);
            }
            workgroupBarrier();
        }
        consider(r0, a0 + 4u * tx, pa0, &bd0, &bi0);
        consider(r0, a0 + 64u + 4u * tx, pb0, &bd0, &bi0);
        consider(r1, a0 + 4u * tx, pa1, &bd1, &bi1);
        consider(r1, a0 + 64u + 4u * tx, pb1, &bd1, &bi1);
        consider(r2, a0 + 4u * tx, pa2, &bd2, &bi2);
        consider(r2, a0 + 64u + 4u * tx, pb2, &bd2, &bi2);
        consider(r3, a0 + 4u * tx, pa3, &bd3, &bi3);
        consider(r3, a0 + 64u + 4u * tx, pb3, &bd3, &bi3);
        consider(r4, a0 + 4u * tx, pa4, &bd4, &bi4);
        consider(r4, a0 + 64u + 4u * tx, pb4, &bd4, &bi4);
        consider(r5, a0 + 4u * tx, pa5, &bd5, &bi5);
        consider(r5, a0 + 64u + 4u * tx, pb5, &bd5, &bi5);
        consider(r6, a0 + 4u * tx, pa6, &bd6, &bi6);
        consider(r6, a0 + 64u + 4u * tx, pb6, &bd6, &bi6);
        consider(r7, a0 + 4u * tx, pa7, &bd7, &bi7);
        consider(r7, a0 + 64u + 4u * tx, pb7, &bd7, &bi7);
    }
    var best_d = array<f32, 8>(bd0, bd1, bd2, bd3, bd4, bd5, bd6, bd7);
    var best_i = array<u32, 8>(bi0, bi1, bi2, bi3, bi4, bi5, bi6, bi7);
    // Fold the 16 threads of each row, one after the other.
    if (tx == 0u) {
        for (var r = 0u; r < 8u; r++) {
            fold_d[tile_row(ty, r)] = best_d[r];
            fold_i[tile_row(ty, r)] = best_i[r];
        }
    }
    workgroupBarrier();
    for (var lane = 1u; lane < 16u; lane++) {
        if (tx == lane) {
            for (var r = 0u; r < 8u; r++) {
            let rr = tile_row(ty, r);
                if (better(best_d[r], best_i[r], fold_d[rr], fold_i[rr])) {
                    fold_d[rr] = best_d[r];
                    fold_i[rr] = best_i[r];
                }
            }
        }
        workgroupBarrier();
    }
    if (t < TP && row0 + t < p.n) {
        assign[row0 + t] = fold_i[t];
        dist[row0 + t] = fold_d[t];
    }
}
