//! Several GPUs and NCCL: `Devices`, the peer-access matrix and
//! `Collective::all_reduce_sum`, checked against sums on the host. A test that
//! needs more GPUs than there are, or libnccl where there is none, prints
//! `skipped: ...` and returns (through `gpu_core::testing`, which fails
//! instead under `KILN_REQUIRE_GPU` / `KILN_REQUIRE_NCCL`); the errors that
//! need neither run everywhere.

use gpu_core::error::CollectiveMismatch;
use gpu_core::{
    driver_present, nccl_available, Backend, Collective, CollectiveElem, CpuReason, DeviceBuffer,
    Devices, Error, FatbinImage, GpuCount, Stream,
};

/// `assert!(matches!(..))` that prints the error when it does not match.
macro_rules! assert_error {
    ($err:expr, $($pattern:tt)+) => {
        assert!(matches!($err, $($pattern)+), "{}", $err)
    };
}

/// At least `min` devices (memory only, no module), or `None` after printing
/// why the test is skipped.
fn devices_or_skip(min: usize) -> Option<Devices> {
    let devices = gpu_core::testing::devices(&[], min)?;
    println!("{devices}");
    Some(devices)
}

/// A collective over `streams`, or `None` after printing why the test is
/// skipped (no libnccl).
fn collective_or_skip(streams: &[Stream]) -> Option<Collective> {
    let collective = gpu_core::testing::collective(streams)?;
    println!("nccl {:?}", gpu_core::nccl_version());
    Some(collective)
}

/// A collective over a new stream on each device, when there are at least
/// `min` devices and libnccl, or `None` after printing why the test is skipped.
fn ranks_or_skip(min: usize) -> Option<Collective> {
    let devices = devices_or_skip(min)?;
    collective_or_skip(&devices.new_streams().unwrap())
}

/// Deterministic pseudo-random numbers (xorshift64*), so that a failure
/// reproduces.
fn random_bits(seed: u64, n: usize) -> Vec<u64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
        .collect()
}

/// Uniform in `[-1, 1)`.
fn random_f32(seed: u64, n: usize) -> Vec<f32> {
    random_bits(seed, n)
        .into_iter()
        .map(|b| (b >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect()
}

fn random_u32(seed: u64, n: usize) -> Vec<u32> {
    random_bits(seed, n)
        .into_iter()
        .map(|b| (b >> 32) as u32)
        .collect()
}

/// `inputs[r]` copied to rank `r`'s device, all-reduced, and read back per
/// rank.
fn all_reduce<T: CollectiveElem + PartialEq + std::fmt::Debug>(
    collective: &Collective,
    inputs: &[Vec<T>],
) -> Vec<Vec<T>> {
    let streams = collective.streams();
    let mut bufs: Vec<DeviceBuffer<T>> = streams
        .iter()
        .zip(inputs)
        .map(|(stream, input)| stream.to_device(input).unwrap())
        .collect();
    let mut views: Vec<_> = bufs.iter_mut().map(DeviceBuffer::view_mut).collect();
    collective.all_reduce_sum(&mut views).unwrap();
    drop(views);
    streams
        .iter()
        .zip(&bufs)
        .map(|(stream, buf)| stream.to_host(&buf.view()).unwrap())
        .collect()
}

#[test]
fn one_rank_all_reduce_is_the_identity() {
    let Some(devices) = devices_or_skip(1) else {
        return;
    };
    let streams = vec![devices.backends()[0].new_stream().unwrap()];
    let Some(collective) = collective_or_skip(&streams) else {
        return;
    };
    assert_eq!(collective.ranks(), 1);
    let floats = random_f32(1, 1000);
    let got = all_reduce(&collective, std::slice::from_ref(&floats));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got[0]), bits(&floats));
    let ints = random_u32(2, 1000);
    assert_eq!(
        all_reduce(&collective, std::slice::from_ref(&ints))[0],
        ints
    );
}

#[test]
fn all_reduce_sums_f32_across_devices() {
    let Some(collective) = ranks_or_skip(2) else {
        return;
    };
    // Not a multiple of anything NCCL chunks by, and large enough for several
    // chunks per rank.
    let n = (1 << 20) + 7;
    let inputs: Vec<Vec<f32>> = (0..collective.ranks() as u64)
        .map(|r| random_f32(10 + r, n))
        .collect();
    let got = all_reduce(&collective, &inputs);
    for i in 0..n {
        let exact: f64 = inputs.iter().map(|v| f64::from(v[i])).sum();
        let magnitude: f64 = inputs.iter().map(|v| f64::from(v[i]).abs()).sum();
        let tolerance = magnitude * f64::from(f32::EPSILON) * inputs.len() as f64 + 1e-30;
        let value = f64::from(got[0][i]);
        assert!(
            (value - exact).abs() <= tolerance,
            "element {i}: got {value}, exact sum {exact}"
        );
    }
    for (rank, result) in got.iter().enumerate().skip(1) {
        let same = result
            .iter()
            .zip(&got[0])
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "rank {rank}'s result differs from rank 0's");
    }
}

#[test]
fn all_reduce_sums_u32_exactly_across_devices() {
    let Some(collective) = ranks_or_skip(2) else {
        return;
    };
    let n = 100_003;
    let inputs: Vec<Vec<u32>> = (0..collective.ranks() as u64)
        .map(|r| random_u32(20 + r, n))
        .collect();
    // NCCL's uint32 sum wraps, as `wrapping_add` does.
    let expected: Vec<u32> = (0..n)
        .map(|i| inputs.iter().fold(0u32, |sum, v| sum.wrapping_add(v[i])))
        .collect();
    for (rank, result) in all_reduce(&collective, &inputs).iter().enumerate() {
        assert!(*result == expected, "rank {rank}'s sum differs");
    }
}

#[test]
fn default_streams_work_as_ranks() {
    let Some(devices) = devices_or_skip(2) else {
        return;
    };
    let Some(collective) = collective_or_skip(&devices.default_streams()) else {
        return;
    };
    let ranks = devices.len();
    let inputs: Vec<Vec<u32>> = (0..ranks as u32).map(|r| vec![r + 1; 4096]).collect();
    let total = (ranks * (ranks + 1) / 2) as u32;
    for result in all_reduce(&collective, &inputs) {
        assert_eq!(result, vec![total; 4096]);
    }
}

#[test]
fn all_reduce_touches_only_the_views() {
    let Some(collective) = ranks_or_skip(2) else {
        return;
    };
    let streams = collective.streams();
    let mut bufs: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .map(|s| s.to_device(&[1.0f32; 16]).unwrap())
        .collect();
    let mut views: Vec<_> = bufs
        .iter_mut()
        .map(|b| b.slice_mut(4..12).unwrap())
        .collect();
    collective.all_reduce_sum(&mut views).unwrap();
    drop(views);
    let ranks = collective.ranks() as f32;
    let mut expected = [1.0f32; 16];
    expected[4..12].fill(ranks);
    for (stream, buf) in streams.iter().zip(&bufs) {
        assert_eq!(stream.to_host(&buf.view()).unwrap(), expected);
    }
}

#[test]
fn mismatched_buffers_are_errors() {
    let Some(collective) = ranks_or_skip(2) else {
        return;
    };
    let streams = collective.streams();
    let mut bufs: Vec<DeviceBuffer<u32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| s.alloc_zeros(8 + r).unwrap())
        .collect();
    let mut views: Vec<_> = bufs.iter_mut().map(DeviceBuffer::view_mut).collect();
    let err = collective.all_reduce_sum(&mut views).unwrap_err();
    assert_error!(
        err,
        Error::InvalidCollective(CollectiveMismatch::BufferLength {
            rank: 1,
            len: 9,
            expected: 8
        })
    );
    let err = collective.all_reduce_sum(&mut views[..1]).unwrap_err();
    assert_error!(
        err,
        Error::InvalidCollective(CollectiveMismatch::RankCount { got: 1, .. })
    );
    // Rank order swapped: rank 0's buffer is on device 1.
    let mut same: Vec<DeviceBuffer<u32>> =
        streams.iter().map(|s| s.alloc_zeros(8).unwrap()).collect();
    let mut views: Vec<_> = same.iter_mut().rev().map(DeviceBuffer::view_mut).collect();
    let err = collective.all_reduce_sum(&mut views).unwrap_err();
    assert_error!(
        err,
        Error::InvalidCollective(CollectiveMismatch::BufferDevice { rank: 0, .. })
    );
    let cpu = Backend::cpu().default_stream();
    let mut host = cpu.alloc_zeros::<u32>(8).unwrap();
    let mut views: Vec<_> = std::iter::once(host.view_mut())
        .chain(same.iter_mut().skip(1).map(DeviceBuffer::view_mut))
        .collect();
    let err = collective.all_reduce_sum(&mut views).unwrap_err();
    assert_error!(
        err,
        Error::InvalidCollective(CollectiveMismatch::HostBuffer { rank: 0 })
    );
}

#[test]
fn peer_access_is_true_on_the_diagonal() {
    let Some(devices) = devices_or_skip(1) else {
        return;
    };
    let peer = devices.peer_access();
    println!("peer access: {peer:?}");
    assert_eq!(peer.len(), devices.len());
    for (i, row) in peer.iter().enumerate() {
        assert_eq!(row.len(), devices.len());
        assert!(row[i], "device {i} cannot access itself");
    }
}

#[test]
fn two_ranks_on_one_device_are_an_error() {
    let Some(devices) = devices_or_skip(1) else {
        return;
    };
    let backend = &devices.backends()[0];
    let streams = [backend.new_stream().unwrap(), backend.default_stream()];
    let err = Collective::new(&streams).unwrap_err();
    assert_error!(
        err,
        Error::InvalidCollective(CollectiveMismatch::SameDevice {
            ordinal: 0,
            ranks: (0, 1)
        })
    );
}

#[test]
fn more_gpus_than_visible_is_an_error_naming_the_count() {
    let Some(devices) = devices_or_skip(1) else {
        return;
    };
    let available = devices.len();
    let err = Devices::open(&[], GpuCount::Exactly(available + 1)).unwrap_err();
    assert_error!(err, Error::NotEnoughGpus { requested, available: a } if requested == available + 1 && a == available);
    assert!(
        err.to_string().contains(&format!("{available} visible")),
        "{err}"
    );
    assert_eq!(
        Devices::open(&[], GpuCount::Exactly(available))
            .unwrap()
            .len(),
        available
    );
}

// The tests below need no GPU: they run (and check real behaviour) everywhere.

#[test]
fn no_driver_is_a_clear_error() {
    let result = Devices::open(&[], GpuCount::All);
    if driver_present() {
        // The converse: with a driver, "no driver" is never the reason.
        assert!(
            !matches!(
                result,
                Err(Error::GpusUnavailable {
                    reason: CpuReason::NoDriver,
                    ..
                })
            ),
            "{result:?}"
        );
        return;
    }
    let err = result.unwrap_err();
    assert_error!(
        err,
        Error::GpusUnavailable {
            ordinal: None,
            reason: CpuReason::NoDriver
        }
    );
    let message = err.to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(
        message.starts_with("no gpu to open (no driver)"),
        "{message}"
    );
}

#[test]
fn modules_without_gpu_code_are_an_error_before_the_driver() {
    static UNBUILT: FatbinImage = FatbinImage {
        name: "unbuilt",
        image: &[],
        sass: &[],
        ptx: &[],
        kernels: &[],
        toolkit: (0, 0),
    };
    let err = Devices::open(&[&UNBUILT], GpuCount::All).unwrap_err();
    assert_error!(
        err,
        Error::GpusUnavailable {
            ordinal: None,
            reason: CpuReason::NoGpuCode
        }
    );
}

#[test]
fn zero_gpus_is_an_invalid_count() {
    let err = Devices::open(&[], GpuCount::Exactly(0)).unwrap_err();
    assert_error!(err, Error::InvalidGpuCount { .. });
}

#[test]
fn cpu_streams_make_no_collective() {
    let cpu = Backend::cpu();
    let err = Collective::new(&[cpu.default_stream()]).unwrap_err();
    assert_error!(
        err,
        Error::InvalidCollective(CollectiveMismatch::CpuStream { rank: 0 })
    );
    let err = Collective::new(&[]).unwrap_err();
    assert_error!(err, Error::InvalidCollective(CollectiveMismatch::NoRanks));
}

#[test]
fn nccl_is_probed_without_panicking() {
    let available = nccl_available();
    assert_eq!(nccl_available(), available, "the probe is cached");
    println!(
        "nccl available: {available}, version {:?}",
        gpu_core::nccl_version()
    );
    if !available {
        assert_eq!(gpu_core::nccl_version(), None);
    }
}

#[test]
fn devices_and_collectives_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Devices>();
    shared::<Collective>();
}
