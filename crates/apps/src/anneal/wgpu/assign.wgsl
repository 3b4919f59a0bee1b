// The assignment: each row's nearest anchor in squared L2 distance, ties to
// the lowest index, as `|x|^2 + |c|^2 - 2 x.c` clamped at 0 (as the CPU and
// CUDA engines compute it). Tiled like the CUDA SIMT kernel: a workgroup
// takes 128 rows and walks the anchors 64 at a time; each step stages 16
// dimensions of the rows and of the anchors in workgroup memory, and each of
// the 256 threads keeps 8 rows x 4 anchors of dot products in registers
// (named variables: see `main`).
// Thread (tx, ty) holds rows 8 ty + r and anchors 4 tx + q of the tile, read
// from workgroup memory as vectors of 4 (three loads per 32 fused
// multiply-adds). At the end the 16 threads sharing a row fold their running
// minima in order.

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
const TA: u32 = 64u;
const TK: u32 = 16u;
const RP: u32 = 8u;
const RA: u32 = 4u;

// k-major, 4 rows (anchors) a vector: xs[k * TP / 4 + row / 4][row % 4].
// (Padding each k's row by 4 floats, so that the 16 threads storing one
// row's 16 dimensions hit 8 banks instead of one, measured no faster on the
// H100: 341 against 326 ms for 10 iterations at 1M x 128 x 2048.)
var<workgroup> xs: array<vec4<f32>, 512>;
var<workgroup> cs: array<vec4<f32>, 256>;
var<workgroup> fold_d: array<f32, 128>;
var<workgroup> fold_i: array<u32, 128>;

fn better(dd: f32, a: u32, best_d: f32, best_i: u32) -> bool {
    return dd < best_d || (dd == best_d && a < best_i);
}

// Row `row`'s distances to anchors 4 tx + q of the tile at a0, from its dot
// products `dots`, folded into its running minimum. The thread sees its
// anchors in increasing order: a strict `<` keeps the lowest index among
// equal distances.
fn consider(row: u32, a0: u32, tx: u32, dots: vec4<f32>, bd: ptr<function, f32>, bi: ptr<function, u32>) {
    if (row >= p.n) {
        return;
    }
    let xn = x_norms[row];
    for (var q = 0u; q < RA; q++) {
        let a = a0 + 4u * tx + q;
        if (a < p.m && !(p.exclude_self != 0u && a == row + p.self_offset)) {
            let dd = max(xn + c_norms[a] - 2.0 * dots[q], 0.0);
            if (dd < *bd) {
                *bd = dd;
                *bi = a;
            }
        }
    }
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
    // The 8 x 4 dot products and the 8 running minima are named variables,
    // never an array indexed by a loop variable: the NVIDIA Vulkan compiler
    // put such arrays in local memory (every multiply-add a load and a
    // store: this kernel ran at 2 TFLOP/s on the H100).
    var bd0 = inf; var bd1 = inf; var bd2 = inf; var bd3 = inf;
    var bd4 = inf; var bd5 = inf; var bd6 = inf; var bd7 = inf;
    var bi0 = none; var bi1 = none; var bi2 = none; var bi3 = none;
    var bi4 = none; var bi5 = none; var bi6 = none; var bi7 = none;
    for (var a0 = 0u; a0 < p.m; a0 += TA) {
        var acc0 = vec4(0.0); var acc1 = vec4(0.0); var acc2 = vec4(0.0); var acc3 = vec4(0.0);
        var acc4 = vec4(0.0); var acc5 = vec4(0.0); var acc6 = vec4(0.0); var acc7 = vec4(0.0);
        for (var k0 = 0u; k0 < p.d; k0 += TK) {
            // 2048 row values, 8 per thread, 16 consecutive dimensions of a
            // row read by 16 consecutive threads.
            for (var s = 0u; s < 8u; s++) {
                let idx = t + 256u * s;
                let kk = idx % TK;
                let rr = idx / TK;
                let row = row0 + rr;
                let k = k0 + kk;
                var v = 0.0;
                if (row < p.n && k < p.d) {
                    v = x[row * p.d + k];
                }
                xs[(kk * TP + rr) / 4u][rr % 4u] = v;
            }
            for (var s = 0u; s < 4u; s++) {
                let idx = t + 256u * s;
                let kk = idx % TK;
                let aa = idx / TK;
                let a = a0 + aa;
                let k = k0 + kk;
                var v = 0.0;
                if (a < p.m && k < p.d) {
                    v = c[a * p.d + k];
                }
                cs[(kk * TA + aa) / 4u][aa % 4u] = v;
            }
            workgroupBarrier();
            for (var kk = 0u; kk < TK; kk++) {
                let x0 = xs[kk * 32u + 2u * ty];
                let x1 = xs[kk * 32u + 2u * ty + 1u];
                let cv = cs[kk * 16u + tx];
                acc0 = fma(vec4(x0.x), cv, acc0);
                acc1 = fma(vec4(x0.y), cv, acc1);
                acc2 = fma(vec4(x0.z), cv, acc2);
                acc3 = fma(vec4(x0.w), cv, acc3);
                acc4 = fma(vec4(x1.x), cv, acc4);
                acc5 = fma(vec4(x1.y), cv, acc5);
                acc6 = fma(vec4(x1.z), cv, acc6);
                acc7 = fma(vec4(x1.w), cv, acc7);
            }
            workgroupBarrier();
        }
        let r0 = row0 + 8u * ty;
        consider(r0, a0, tx, acc0, &bd0, &bi0);
        consider(r0 + 1u, a0, tx, acc1, &bd1, &bi1);
        consider(r0 + 2u, a0, tx, acc2, &bd2, &bi2);
        consider(r0 + 3u, a0, tx, acc3, &bd3, &bi3);
        consider(r0 + 4u, a0, tx, acc4, &bd4, &bi4);
        consider(r0 + 5u, a0, tx, acc5, &bd5, &bi5);
        consider(r0 + 6u, a0, tx, acc6, &bd6, &bi6);
        consider(r0 + 7u, a0, tx, acc7, &bd7, &bi7);
    }
    var best_d = array<f32, 8>(bd0, bd1, bd2, bd3, bd4, bd5, bd6, bd7);
    var best_i = array<u32, 8>(bi0, bi1, bi2, bi3, bi4, bi5, bi6, bi7);
    // Fold the 16 threads of each row, one after the other.
    if (tx == 0u) {
        for (var r = 0u; r < RP; r++) {
            fold_d[8u * ty + r] = best_d[r];
            fold_i[8u * ty + r] = best_i[r];
        }
    }
    workgroupBarrier();
    for (var lane = 1u; lane < 16u; lane++) {
        if (tx == lane) {
            for (var r = 0u; r < RP; r++) {
                let rr = 8u * ty + r;
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
