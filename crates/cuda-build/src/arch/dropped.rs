//! The archs NVIDIA's toolkits dropped or renamed, so that refusing one says
//! which toolkit dropped it and which last built it, instead of only listing
//! what this toolkit supports. Jetson modules are named: their archs are the
//! ones a team building for an edge device asks for (sm_72 Xavier, sm_87
//! Orin, sm_110 Thor).

use super::Arch;

/// Archs (`major * 10 + minor`) one release dropped or renamed.
struct Dropped {
    numbers: &'static [u32],
    /// The release that no longer builds them.
    release: (u32, u32),
    /// What the refusal says, ending in `; ` (a `&'static str`, so that
    /// [`ArchError`](super::ArchError) stays small).
    note: &'static str,
}

/// From NVIDIA's release notes: Fermi gone in 9.0, Kepler in 11.0 and 12.0,
/// Maxwell, Pascal and Volta (offline compilation) in 13.0; Jetson Thor's
/// sm_101 of CUDA 12.8 and 12.9 is sm_110 from 13.0.
const DROPPED: &[Dropped] = &[
    Dropped {
        numbers: &[20, 21],
        release: (9, 0),
        note: "CUDA 9.0 dropped Fermi (sm_20, sm_21; CUDA 8.0 is the last to build it); ",
    },
    Dropped {
        numbers: &[30, 32],
        release: (11, 0),
        note: "CUDA 11.0 dropped sm_30 and sm_32 (Kepler; sm_32 is Jetson TK1; \
               CUDA 10.2 is the last to build them); ",
    },
    Dropped {
        numbers: &[35, 37],
        release: (12, 0),
        note: "CUDA 12.0 dropped sm_35 and sm_37 (Kepler; CUDA 11.8 is the last to build them); ",
    },
    Dropped {
        numbers: &[50, 52, 53],
        release: (13, 0),
        note: "CUDA 13.0 dropped Maxwell (sm_50, sm_52, sm_53; sm_53 is Jetson Nano and TX1; \
               CUDA 12.x is the last to build it); ",
    },
    Dropped {
        numbers: &[60, 61, 62],
        release: (13, 0),
        note: "CUDA 13.0 dropped Pascal (sm_60, sm_61, sm_62; sm_62 is Jetson TX2; \
               CUDA 12.x is the last to build it); ",
    },
    Dropped {
        numbers: &[70, 72],
        release: (13, 0),
        note: "CUDA 13.0 dropped Volta (sm_70, sm_72; sm_72 is Jetson AGX Xavier and Xavier NX; \
               CUDA 12.x is the last to build it); ",
    },
    Dropped {
        numbers: &[101],
        release: (13, 0),
        note: "CUDA 13.0 renamed sm_101 (Jetson Thor) to sm_110; ",
    },
];

/// What to say about `arch` when `toolkit` (`13.0`, possibly followed by
/// words) is a release that dropped or renamed it; else empty.
pub(super) fn note(arch: Arch, toolkit: &str) -> &'static str {
    let Some(version) = release(toolkit) else {
        return "";
    };
    DROPPED
        .iter()
        .find(|d| d.numbers.contains(&arch.number()) && version >= d.release)
        .map_or("", |d| d.note)
}

/// `(13, 0)` from `13.0` or `13.0 (built-in table; ...)`.
fn release(toolkit: &str) -> Option<(u32, u32)> {
    let word = toolkit.split_whitespace().next()?;
    let (major, rest) = word.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dropped_arch_names_the_release_that_dropped_it() {
        let xavier = note(Arch::new(7, 2), "13.0");
        assert_eq!(
            xavier,
            "CUDA 13.0 dropped Volta (sm_70, sm_72; sm_72 is Jetson AGX Xavier and Xavier NX; \
             CUDA 12.x is the last to build it); "
        );
        assert!(note(Arch::new(3, 5), "13.0").starts_with("CUDA 12.0 dropped sm_35"));
        assert!(
            note(Arch::new(5, 3), "13.0 (built-in table; no toolkit found)")
                .contains("Jetson Nano")
        );
        assert!(note(Arch::new(10, 1), "13.0").contains("to sm_110"));
        // Not dropped yet in that release, or not dropped at all.
        assert_eq!(note(Arch::new(7, 2), "12.8"), "");
        assert_eq!(note(Arch::new(10, 1), "12.9"), "");
        assert_eq!(note(Arch::new(9, 9), "13.0"), "");
        assert_eq!(note(Arch::new(7, 2), "garbage"), "");
        assert_eq!(release("13.1.2"), Some((13, 1)));
    }

    #[test]
    fn jetson_archs_of_cuda_13_resolve_and_the_dropped_ones_say_so() {
        use crate::arch::{ArchError, ArchSpec, SupportedArchs};
        let supported = SupportedArchs::cuda_13_0_builtin();
        let spec = ArchSpec::parse("sm_87,sm_88,sm_110,sm_90", "--arch").unwrap();
        let list = spec.resolve(&supported, "--arch", || Ok(vec![])).unwrap();
        let names: Vec<String> = list.sass.iter().map(|a| a.sm_name()).collect();
        assert_eq!(names, ["sm_87", "sm_88", "sm_90", "sm_110"]);
        for (item, says) in [
            (
                "sm_72",
                "CUDA 13.0 dropped Volta (sm_70, sm_72; sm_72 is Jetson AGX Xavier",
            ),
            (
                "8.7,6.2",
                "CUDA 13.0 dropped Pascal (sm_60, sm_61, sm_62; sm_62 is Jetson TX2",
            ),
            ("sm_101", "CUDA 13.0 renamed sm_101 (Jetson Thor) to sm_110"),
        ] {
            let spec = ArchSpec::parse(item, "KT_CUDA_ARCHS").unwrap();
            let err = spec
                .resolve(&supported, "KT_CUDA_ARCHS", || Ok(vec![]))
                .unwrap_err();
            assert!(matches!(err, ArchError::Unsupported { .. }));
            let text = err.to_string();
            assert!(text.contains(says), "{text}");
            assert!(text.contains("CUDA 13.0 (built-in table"), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
    }
}
