//! `anneal_neighbors_exact`, the maintenance's search among few anchors for
//! each one's nearest other one, against what it replaces: the tensor-core
//! assignment (`TcAssign`, then the list kernel) of the anchors to
//! themselves with `EXCLUDE_SELF`, and its CPU reference, bit for bit, on
//! shapes with no other anchor, exact ties (repeated rows) and near ties.
//! Skips, saying why, without a CUDA device of sm_80 or newer.

mod tc_harness;

use gpu_core::LaunchConfig;
use kiln_anneal::assign_tc::{self, TcAssign};
use kiln_anneal::kernels::anneal_neighbors_exact;
use kiln_anneal::types::{KILN_ANNEAL_EXCLUDE_SELF as EXCLUDE_SELF, KILN_ANNEAL_NEIGHBORS_THREADS};
use kiln_anneal::Rng;
use tc_harness::*;

/// `m` anchors of `d`: random; with every third row a copy of row 0 when
/// `repeat` (exact ties: the lowest index wins); or clustered tightly
/// (near ties) when `clustered`.
fn anchors(m: usize, d: usize, seed: u64, kind: &str) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut a = rng.f32s(m * d);
    match kind {
        "repeat" => {
            for i in (3..m).step_by(3) {
                let (src, dst) = a.split_at_mut(i * d);
                dst[..d].copy_from_slice(&src[(i - 3) * d..(i - 2) * d]);
            }
        }
        "clustered" => {
            let centres: Vec<f32> = a[..4 * d].to_vec();
            for (i, v) in a.iter_mut().enumerate() {
                *v = centres[(i / d % 4) * d + i % d] + *v * 1e-4;
            }
        }
        _ => {}
    }
    a
}

#[test]
fn the_exact_search_gives_the_tensor_core_searchs_bits() {
    let Some(backend) = gpu_core::testing::cuda_backend(kiln_anneal::modules::ALL) else {
        return;
    };
    let arch = backend.device().map_or(0, |d| d.arch());
    let stream = backend.default_stream();
    let exact: gpu_core::Kernel<anneal_neighbors_exact> = backend.kernel().unwrap();
    for (m, d, kind) in [
        (1, 8, "random"),
        (2, 3, "random"),
        (7, 33, "repeat"),
        (256, 128, "random"),
        (300, 130, "repeat"),
        (1000, 16, "clustered"),
    ] {
        let what = format!("m {m} d {d} {kind}");
        let values = anchors(m, d, m as u64 + d as u64, kind);
        let norms = norms(&values, m, d);
        let (want, want_dist) =
            assign_tc::reference(&values, &norms, d, &values, &norms, EXCLUDE_SELF);
        let dev_values = stream.to_device(&values).unwrap();
        let dev_norms = stream.to_device(&norms).unwrap();
        let mut got = stream.alloc_zeros::<u32>(m).unwrap();
        let mut got_dist = stream.alloc_zeros::<f32>(m).unwrap();
        stream
            .launch(
                &exact,
                LaunchConfig {
                    grid: (m as u32, 1, 1),
                    block: (KILN_ANNEAL_NEIGHBORS_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                },
                (
                    dev_values.view(),
                    dev_norms.view(),
                    m as u32,
                    d as u32,
                    got.view_mut(),
                    got_dist.view_mut(),
                ),
            )
            .unwrap();
        let got = stream.to_host(&got.view()).unwrap();
        let got_dist = stream.to_host(&got_dist.view()).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(got, want, "{what}: neighbours against the reference");
        assert_eq!(bits(&got_dist), bits(&want_dist), "{what}: distances");
        if kind == "repeat" && m > 6 {
            // Rows 0, 3, 6, ... are one row: each one's nearest is row 0
            // (or row 3, for row 0), the lowest index of the tie.
            assert_eq!((got[0], got[3], got[6]), (3, 0, 0), "{what}: ties");
        }
        if !assign_tc::tc_wanted(arch, None) {
            println!("{what}: the reference's bits (no tensor-core path on sm_{arch})");
            continue;
        }
        let mut tc = TcAssign::new(&backend, &stream, m, d, m).unwrap().unwrap();
        let case = Case {
            name: what.clone(),
            x: Values::F32(values.clone()),
            n: m,
            d,
            anchors: values.clone(),
            m,
            flags: EXCLUDE_SELF,
            pad: 0,
        };
        let out = run_tc(&backend, &stream, &mut tc, &case);
        assert_eq!(got, out.assign, "{what}: neighbours against TcAssign");
        assert_eq!(
            bits(&got_dist),
            bits(&out.dist),
            "{what}: distances against TcAssign"
        );
        println!("{what}: the reference's and TcAssign's bits");
    }
}
