//! quantized.cu launched typed against the CPU references (issue 42): GGUF
//! q8_0 blocks through the `const void *` / `void *` parameters codegen
//! declares as `ConstVoidPtr` / `MutVoidPtr` (a byte buffer and an `f32`
//! buffer each converted into a `DevicePtr`), a `bool` flag by value, fp8
//! (e4m3) by pointer and by value, and `affine_fp8e4m3`, which only the
//! sm_89+ device passes define. Named `typed_*`: the GPU bundle runs them
//! under memcheck.

use crate::families::{launched_every, Gpu};
use candle_patterns::markers::{
    affine_fp8e4m3, cast_fp8e4m3_f32, dequantize_block_q8_0_f32, fill_flag_f32, quantize_q8_0,
};
use candle_patterns::modules;
use candle_patterns::reference::{self, Q8_0_BLOCK};
use gpu_core::{DevicePtr, DevicePtrMut, Fp8E4M3, KernelDecl, LaunchConfig};

/// 7 blocks of 32 values: signs, a zero block (its scale 0) and a spread.
fn values() -> Vec<f32> {
    (0..7 * 32)
        .map(|i| match i / 32 {
            3 => 0.0,
            b => ((i * 37 % 101) as f32 - 50.0) * 0.03 * (b + 1) as f32,
        })
        .collect()
}

fn grid(n: usize) -> LaunchConfig {
    let mut config = LaunchConfig::for_elements(n as u32, 64);
    config.grid.0 = config.grid.0.min(2);
    config
}

#[test]
fn typed_q8_0_blocks_through_void_pointers_match_the_cpu() {
    let Some(gpu) = Gpu::open() else { return };
    let x = values();
    let nb = x.len() / 32;
    // Quantize: `const float *x` typed, `void *vy` any buffer, here bytes.
    let quantize = gpu.backend.kernel::<quantize_q8_0>().unwrap();
    let input = gpu.up(&x);
    let mut blocks = gpu.stream.alloc_zeros::<u8>(nb * Q8_0_BLOCK).unwrap();
    gpu.stream
        .launch(
            &quantize,
            grid(nb),
            (input.view(), DevicePtrMut::from(&mut blocks), nb as i32),
        )
        .unwrap();
    let want_blocks = reference::quantize_q8_0(&x);
    assert_eq!(gpu.down(&blocks.view()), want_blocks, "quantize_q8_0");
    // Dequantize: `const void *vx` from the byte buffer.
    let dequantize = gpu.backend.kernel::<dequantize_block_q8_0_f32>().unwrap();
    let mut y = gpu.stream.alloc_zeros::<f32>(x.len()).unwrap();
    gpu.stream
        .launch(
            &dequantize,
            grid(x.len()),
            (DevicePtr::from(blocks.view()), y.view_mut(), nb as i32),
        )
        .unwrap();
    let want = reference::dequantize_q8_0(&want_blocks);
    assert_eq!(gpu.down(&y.view()), want, "dequantize_block_q8_0_f32");
    // The q8_0 round trip is within half a quant of each value.
    for (i, (a, b)) in x.iter().zip(&want).enumerate() {
        let d = want_blocks[i / 32 * Q8_0_BLOCK..][..2].to_vec();
        let d = half::f16::from_le_bytes([d[0], d[1]]).to_f32();
        assert!((a - b).abs() <= d * 0.51 + 1e-6, "{i}: {a} vs {b}");
    }
}

#[test]
fn typed_bool_flags_and_fp8_match_the_cpu() {
    let Some(gpu) = Gpu::open() else { return };
    let mut launched = vec![quantize_q8_0::NAME, dequantize_block_q8_0_f32::NAME];
    let fill = gpu.backend.kernel::<fill_flag_f32>().unwrap();
    let n = 300usize;
    let mut out = gpu.up(&vec![-1.0f32; n]);
    for on in [true, false] {
        gpu.stream
            .launch(&fill, grid(n), (out.view_mut(), 2.5, on, n))
            .unwrap();
        let want = vec![if on { 2.5 } else { 0.0 }; n];
        assert_eq!(gpu.down(&out.view()), want, "fill_flag_f32 on={on}");
    }
    launched.push(fill_flag_f32::NAME);
    // Every e4m3 code but the NaNs, decoded.
    let codes: Vec<Fp8E4M3> = (0..=255u8)
        .filter(|b| b & 0x7f != 0x7f)
        .map(Fp8E4M3)
        .collect();
    let cast = gpu.backend.kernel::<cast_fp8e4m3_f32>().unwrap();
    let inp = gpu.up(&codes);
    let mut decoded = gpu.stream.alloc_zeros::<f32>(codes.len()).unwrap();
    gpu.stream
        .launch(
            &cast,
            grid(codes.len()),
            (codes.len(), inp.view(), decoded.view_mut()),
        )
        .unwrap();
    let want: Vec<f32> = codes
        .iter()
        .map(|c| reference::fp8_e4m3_to_f32(c.0))
        .collect();
    assert_eq!(gpu.down(&decoded.view()), want, "cast_fp8e4m3_f32");
    launched.push(cast_fp8e4m3_f32::NAME);
    // The sm_89+ family: in the images of such a device only.
    let arch = gpu.backend.device().map_or(0, |d| d.arch());
    if arch >= 89 {
        let affine = gpu.backend.kernel::<affine_fp8e4m3>().unwrap();
        // Values whose doubles are e4m3 values too: the product is exact.
        let small: Vec<Fp8E4M3> = [0.5f32, -1.0, 1.5, 3.0, -6.0, 0.125, 0.0, 224.0]
            .iter()
            .map(|v| Fp8E4M3(reference::fp8_e4m3_exact(*v).unwrap()))
            .collect();
        let two = Fp8E4M3(reference::fp8_e4m3_exact(2.0).unwrap());
        let inp = gpu.up(&small);
        let mut out = gpu.stream.alloc_zeros::<Fp8E4M3>(small.len()).unwrap();
        gpu.stream
            .launch(
                &affine,
                grid(small.len()),
                (small.len(), inp.view(), out.view_mut(), two),
            )
            .unwrap();
        let want: Vec<Fp8E4M3> = small
            .iter()
            .map(|c| {
                Fp8E4M3(reference::fp8_e4m3_exact(2.0 * reference::fp8_e4m3_to_f32(c.0)).unwrap())
            })
            .collect();
        assert_eq!(gpu.down(&out.view()), want, "affine_fp8e4m3");
        launched.push(affine_fp8e4m3::NAME);
    } else {
        println!("affine_fp8e4m3 not launched: sm_{arch} builds no sm_89+ kernel");
        // Not in this device's image: resolving it fails, which is checked.
        assert!(gpu.backend.kernel::<affine_fp8e4m3>().is_err());
        launched.push(affine_fp8e4m3::NAME);
    }
    launched_every(&[&modules::QUANTIZED], launched);
}

/// The CPU references agree with GGUF's layout and e4m3's table.
#[test]
fn the_quantized_references_hold_their_formats() {
    let blocks = reference::quantize_q8_0(&values());
    assert_eq!(blocks.len(), 7 * Q8_0_BLOCK);
    assert_eq!(
        &blocks[3 * Q8_0_BLOCK..4 * Q8_0_BLOCK],
        &[0u8; 34],
        "a zero block"
    );
    assert_eq!(reference::fp8_e4m3_to_f32(0x38), 1.0);
    assert_eq!(reference::fp8_e4m3_to_f32(0x7e), 448.0);
    assert_eq!(reference::fp8_e4m3_to_f32(0x01), 2f32.powi(-9));
    assert!(reference::fp8_e4m3_to_f32(0xff).is_nan());
    assert_eq!(reference::fp8_e4m3_exact(-6.0), Some(0xcc));
}
