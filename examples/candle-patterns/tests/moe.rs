//! The static module's host launchers (two sources, one library, each a C
//! function launching with `<<<>>>`), through `extern "C"`, on the CPU
//! reference and on the GPU: the argsort of rows of every padded width
//! class, the expert routing with dropped ids, and the shapes they refuse.

use candle_patterns::{argsort_f32, moe_expert_offsets, reference, HostError, FATBINS};
use gpu_core::Backend;

fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::cpu()];
    all.extend(gpu_core::testing::cuda_backend(FATBINS));
    all
}

/// Distinct values (no ties, whose order the sort does not promise).
fn distinct(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 10007) as f32 - 5000.0)
        .collect()
}

#[test]
fn argsort_sorts_each_row_both_ways() {
    for backend in backends() {
        let stream = backend.default_stream();
        for ncols in [1, 2, 3, 31, 32, 33, 500, 1024] {
            let x = distinct(ncols * 5);
            for ascending in [true, false] {
                let got = argsort_f32(&stream, &x, ncols, ascending).unwrap();
                let want = reference::argsort(&x, ncols, ascending);
                assert_eq!(
                    got,
                    want,
                    "{:?} ncols {ncols} ascending {ascending}",
                    backend.kind()
                );
            }
        }
    }
}

#[test]
fn argsort_refuses_rows_it_cannot_hold() {
    for backend in backends() {
        let stream = backend.default_stream();
        for (len, ncols) in [(10, 0), (10, 3), (2050, 1025)] {
            let err = argsort_f32(&stream, &vec![0.0; len], ncols, true).unwrap_err();
            assert!(matches!(err, HostError::Shape { .. }), "{err}");
            assert!(err.to_string().starts_with("cp_argsort_f32: "), "{err}");
        }
        // No rows at all is an empty answer, not an error.
        assert_eq!(
            argsort_f32(&stream, &[], 4, true).unwrap(),
            Vec::<u32>::new()
        );
    }
}

#[test]
fn expert_offsets_count_scan_and_drop_out_of_range_ids() {
    for backend in backends() {
        let stream = backend.default_stream();
        for (n, experts) in [(0, 1), (1, 1), (1000, 8), (100_000, 1024), (5000, 3)] {
            // Every tenth id is past the last expert (dropped).
            let ids: Vec<u32> = (0..n)
                .map(|i| {
                    if i % 10 == 9 {
                        experts as u32 + 4
                    } else {
                        (i * 31 % experts) as u32
                    }
                })
                .collect();
            let got = moe_expert_offsets(&stream, &ids, experts).unwrap();
            assert_eq!(
                got,
                reference::expert_offsets(&ids, experts),
                "{n} ids, {experts} experts"
            );
        }
        for experts in [0, 1025] {
            let err = moe_expert_offsets(&stream, &[0], experts).unwrap_err();
            assert!(matches!(err, HostError::Shape { .. }), "{err}");
        }
    }
}
