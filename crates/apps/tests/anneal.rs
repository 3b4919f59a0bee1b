//! The anneal on the GPU against the CPU engine (the oracle): on random data
//! with a fixed seed, final energy within 0.1% relative, iterations within 1,
//! the same number of anchors after maintenance. Skips, saying why, without a
//! usable GPU.

use apps::anneal::{self, Params, Points};
use gpu_core::Backend;

fn cuda_or_skip() -> Option<Backend> {
    match Backend::select(cuda_sys::modules::ALL, Some("cuda")) {
        Ok(backend) => Some(backend),
        Err(e) => {
            println!("skipped: no CUDA backend ({e})");
            None
        }
    }
}

#[track_caller]
fn check_agreement(cpu: &anneal::Output, gpu: &anneal::Output, what: &str) {
    let rel = (gpu.energy - cpu.energy).abs() / cpu.energy;
    println!(
        "{what}: energy cpu {:.6} gpu {:.6} ({rel:.2e}), iterations {} / {}, anchors {} / {}",
        cpu.energy, gpu.energy, cpu.iterations, gpu.iterations, cpu.m, gpu.m
    );
    assert!(rel <= 1e-3, "{what}: energy differs by {rel:.3e} relative");
    assert!(
        cpu.iterations.abs_diff(gpu.iterations) <= 1,
        "{what}: iterations"
    );
    assert_eq!(cpu.m, gpu.m, "{what}: anchors after maintenance");
    assert!(
        gpu.assignments.iter().all(|&a| (a as usize) < gpu.m),
        "{what}: assignments in range"
    );
}

#[test]
fn gpu_matches_cpu_on_awkward_and_seed_shapes() {
    let Some(gpu) = cuda_or_skip() else { return };
    let cpu = Backend::cpu();
    // The seed's small shape, d not a multiple of 4 or 32, m not a multiple of
    // the 128-wide tile, and maintenance passes that merge and split.
    for (n, d, m, seed) in [
        (1000, 64, 32, 1u64),
        (3001, 37, 131, 2),
        (10_000, 128, 256, 3),
        (257, 5, 1, 4),
    ] {
        let points = anneal::synthetic_points(n, d, (m / 2).max(1), 0.25, seed);
        let params = Params {
            seed,
            ..Params::default()
        };
        let a = anneal::run(
            &cpu,
            Points::F32(&points),
            n,
            d,
            m,
            &params,
            &mut |_, _, _| {},
        )
        .unwrap();
        let b = anneal::run(
            &gpu,
            Points::F32(&points),
            n,
            d,
            m,
            &params,
            &mut |_, _, _| {},
        )
        .unwrap();
        check_agreement(&a, &b, &format!("{n}x{d}x{m}"));
    }
}

#[test]
fn gpu_keeps_f16_points_and_agrees() {
    let Some(gpu) = cuda_or_skip() else { return };
    let (n, d, m) = (4000, 48, 64);
    let values = anneal::synthetic_points(n, d, 32, 0.25, 5);
    let bits: Vec<u16> = values
        .iter()
        .map(|v| half::f16::from_f32(*v).to_bits())
        .collect();
    let params = Params {
        seed: 5,
        ..Params::default()
    };
    let a = anneal::run(
        &Backend::cpu(),
        Points::F16(&bits),
        n,
        d,
        m,
        &params,
        &mut |_, _, _| {},
    )
    .unwrap();
    let b = anneal::run(
        &gpu,
        Points::F16(&bits),
        n,
        d,
        m,
        &params,
        &mut |_, _, _| {},
    )
    .unwrap();
    check_agreement(&a, &b, "f16");
}

#[test]
fn bad_input_is_refused_on_every_backend() {
    let mut backends = vec![Backend::cpu()];
    backends.extend(cuda_or_skip());
    for backend in backends {
        let run = |points: &[f32], n, d, m| {
            anneal::run(
                &backend,
                Points::F32(points),
                n,
                d,
                m,
                &Params::default(),
                &mut |_, _, _| {},
            )
            .unwrap_err()
            .to_string()
        };
        assert!(run(&[], 0, 3, 1).contains("n = 0"));
        assert!(run(&[1.0; 6], 2, 3, 3).contains("more anchors (3) than points (2)"));
        assert!(run(&[1.0, f32::NAN, 1.0], 1, 3, 1).contains("NaN"));
    }
}
