//! Several GPUs: `Devices` and the peer-access matrix. A test that needs more
//! GPUs than there are prints `skipped: ...` and returns; the errors that need
//! none run everywhere.

use gpu_core::{driver_present, CpuReason, Devices, Error, FatbinImage, GpuCount};

/// `assert!(matches!(..))` that prints the error when it does not match.
macro_rules! assert_error {
    ($err:expr, $($pattern:tt)+) => {
        assert!(matches!($err, $($pattern)+), "{}", $err)
    };
}

/// At least `min` devices (memory only, no module), or `None` after printing
/// why the test is skipped.
fn devices_or_skip(min: usize) -> Option<Devices> {
    match Devices::open(&[], GpuCount::All) {
        Ok(devices) if devices.len() >= min => {
            println!("{devices}");
            Some(devices)
        }
        Ok(devices) => {
            println!("skipped: needs {min} GPUs, {devices}");
            None
        }
        Err(Error::GpusUnavailable { reason, .. }) => {
            println!("skipped: no CUDA device ({reason})");
            None
        }
        Err(e) => panic!("CUDA devices are present but unusable: {e}"),
    }
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

#[test]
fn no_driver_is_a_clear_error() {
    let result = Devices::open(&[], GpuCount::All);
    if driver_present() {
        println!("skipped: a driver is present ({result:?})");
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
