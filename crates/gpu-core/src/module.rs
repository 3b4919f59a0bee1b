//! Loading embedded fat binaries: which code in a [`FatbinImage`] fits a
//! device (SASS of the same major arch, not newer; else PTX to JIT), and
//! errors that name the module, the archs and the fix when none does.
//!
//! The driver picks the cubin or JITs the PTX itself (`cuModuleLoadData` on the
//! whole fat binary); checking first is what lets the error say why.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaModule, DriverError};
use cudarc::nvrtc::Ptx;

use crate::error::Error;
use crate::FatbinImage;

/// What a device will run from a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CodeChoice {
    /// SASS compiled for this real arch.
    Sass(u32),
    /// PTX for this virtual arch, JIT-compiled by the driver.
    Ptx(u32),
}

/// The code the driver will pick from `image` for a device of arch
/// `device_arch` (`major * 10 + minor`): the newest SASS of the same major
/// arch not newer than the device, else the newest PTX not newer than it.
pub(crate) fn code_for_arch(image: &FatbinImage, device_arch: u32) -> Option<CodeChoice> {
    let sass = image
        .sass
        .iter()
        .copied()
        .filter(|&a| a / 10 == device_arch / 10 && a <= device_arch)
        .max()
        .map(CodeChoice::Sass);
    sass.or_else(|| {
        image
            .ptx
            .iter()
            .copied()
            .filter(|&a| a <= device_arch)
            .max()
            .map(CodeChoice::Ptx)
    })
}

/// Checks that `image` is built and has code for `device_arch`.
pub(crate) fn check_fits(image: &FatbinImage, device_arch: u32) -> Result<CodeChoice, Error> {
    if !image.is_built() {
        return Err(Error::ModuleNotBuilt { module: image.name });
    }
    code_for_arch(image, device_arch).ok_or(Error::NoBinaryForDevice {
        module: image.name,
        sass: image.sass,
        ptx: image.ptx,
        device_arch,
    })
}

/// Loads `image` into `ctx`, mapping the driver's refusals to errors that say
/// what to do.
pub(crate) fn load(
    ctx: &Arc<CudaContext>,
    image: &'static FatbinImage,
    device_arch: u32,
) -> Result<Arc<CudaModule>, Error> {
    check_fits(image, device_arch)?;
    let mut bytes = image.image.to_vec();
    // cuModuleLoadData reads PTX text up to a NUL; fat binaries and cubins
    // carry their size in their header, so one trailing zero is harmless.
    bytes.push(0);
    ctx.load_module(Ptx::from_binary(bytes))
        .map_err(|source| load_error(image, device_arch, source))
}

fn load_error(image: &'static FatbinImage, device_arch: u32, source: DriverError) -> Error {
    use sys::CUresult as R;
    match source.0 {
        R::CUDA_ERROR_UNSUPPORTED_PTX_VERSION => Error::PtxTooNew {
            module: image.name,
            toolkit: image.toolkit,
            driver: crate::ffi::driver::driver_version().unwrap_or((0, 0)),
        },
        R::CUDA_ERROR_NO_BINARY_FOR_GPU => Error::NoBinaryForDevice {
            module: image.name,
            sass: image.sass,
            ptx: image.ptx,
            device_arch,
        },
        R::CUDA_ERROR_OUT_OF_MEMORY => Error::OutOfMemory {
            bytes: image.image.len(),
            source: source.into(),
        },
        _ => Error::ModuleLoad {
            module: image.name,
            source: source.into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(sass: &'static [u32], ptx: &'static [u32]) -> FatbinImage {
        FatbinImage {
            name: "m",
            image: b"x",
            sass,
            ptx,
            kernels: &[],
            toolkit: (13, 0),
        }
    }

    #[test]
    fn sass_of_same_major_not_newer_is_chosen() {
        let m = image(&[80, 86, 90], &[90]);
        assert_eq!(code_for_arch(&m, 89), Some(CodeChoice::Sass(86)));
        assert_eq!(code_for_arch(&m, 90), Some(CodeChoice::Sass(90)));
        assert_eq!(code_for_arch(&m, 80), Some(CodeChoice::Sass(80)));
    }

    #[test]
    fn ptx_is_jitted_when_no_sass_fits() {
        let m = image(&[80], &[80]);
        assert_eq!(code_for_arch(&m, 90), Some(CodeChoice::Ptx(80)));
        assert_eq!(code_for_arch(&m, 100), Some(CodeChoice::Ptx(80)));
    }

    #[test]
    fn nothing_fits_an_older_device() {
        let m = image(&[80, 90], &[90]);
        assert_eq!(code_for_arch(&m, 75), None);
        let err = check_fits(&m, 75).unwrap_err();
        assert_eq!(
            err.to_string(),
            "module `m` has sass for sm_80,sm_90 and ptx for sm_90, device is sm_75; \
             rebuild the kernels with sm_75 among their archs"
        );
    }

    #[test]
    fn unbuilt_module_is_an_error() {
        let m = FatbinImage {
            image: b"",
            ..image(&[], &[])
        };
        assert!(matches!(
            check_fits(&m, 90),
            Err(Error::ModuleNotBuilt { module: "m" })
        ));
    }

    #[test]
    fn ptx_too_new_names_both_versions() {
        let err = Error::PtxTooNew {
            module: "m",
            toolkit: (13, 0),
            driver: (12, 4),
        };
        assert_eq!(
            err.to_string(),
            "module `m` has ptx from toolkit 13.0 but the driver supports cuda 12.4; \
             update the driver or build sass for this device"
        );
    }
}
