//! The archs NVIDIA's toolkits dropped or renamed, so that refusing one says
//! which toolkit dropped it and which last built it, instead of only listing
//! what this toolkit supports. Jetson modules are named: their archs are the
//! ones a team building for an edge device asks for (sm_72 Xavier, sm_87
//! Orin, sm_110 Thor).

use super::Arch;

/// Archs (`major * 10 + minor`) one release dropped.
struct Dropped {
    numbers: &'static [u32],
    /// The release that no longer builds them.
    release: (u32, u32),
    /// The parts, Jetson modules named.
    parts: &'static str,
    /// The last toolkit that builds them.
    last: &'static str,
}

/// From NVIDIA's release notes: Fermi gone in 9.0, Kepler in 11.0 and 12.0,
/// Maxwell, Pascal and Volta (offline compilation) in 13.0.
const DROPPED: &[Dropped] = &[
    Dropped {
        numbers: &[20, 21],
        release: (9, 0),
        parts: "Fermi",
        last: "CUDA 8.0",
    },
    Dropped {
        numbers: &[30, 32],
        release: (11, 0),
        parts: "Kepler; sm_32 is Jetson TK1",
        last: "CUDA 10.2",
    },
    Dropped {
        numbers: &[35, 37],
        release: (12, 0),
        parts: "Kepler",
        last: "CUDA 11.8",
    },
    Dropped {
        numbers: &[50, 52, 53],
        release: (13, 0),
        parts: "Maxwell; sm_53 is Jetson Nano and TX1",
        last: "CUDA 12.x",
    },
    Dropped {
        numbers: &[60, 61, 62],
        release: (13, 0),
        parts: "Pascal; sm_62 is Jetson TX2",
        last: "CUDA 12.x",
    },
    Dropped {
        numbers: &[70, 72],
        release: (13, 0),
        parts: "Volta; sm_72 is Jetson AGX Xavier and Xavier NX",
        last: "CUDA 12.x",
    },
];

/// `"CUDA 13.0 dropped sm_72 (...); "` when `toolkit` (`13.0`, possibly
/// followed by words) is a release that dropped or renamed `arch`, else
/// empty.
pub(super) fn note(arch: Arch, toolkit: &str) -> String {
    let Some(version) = release(toolkit) else {
        return String::new();
    };
    let name = arch.sm_name();
    // CUDA 12.8 and 12.9 called Jetson Thor sm_101; 13.0 calls it sm_110.
    if arch.number() == 101 && version >= (13, 0) {
        return format!("CUDA 13.0 renamed {name} (Jetson Thor) to sm_110; ");
    }
    DROPPED
        .iter()
        .find(|d| d.numbers.contains(&arch.number()) && version >= d.release)
        .map(|d| {
            format!(
                "CUDA {}.{} dropped {name} ({}; {} is the last to build it); ",
                d.release.0, d.release.1, d.parts, d.last
            )
        })
        .unwrap_or_default()
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
            "CUDA 13.0 dropped sm_72 (Volta; sm_72 is Jetson AGX Xavier and Xavier NX; \
             CUDA 12.x is the last to build it); "
        );
        assert!(note(Arch::new(3, 5), "13.0").starts_with("CUDA 12.0 dropped sm_35"));
        assert!(note(Arch::new(5, 3), "13.0 (built-in table; no toolkit found)")
            .contains("Jetson Nano"));
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
            ("sm_72", "CUDA 13.0 dropped sm_72 (Volta; sm_72 is Jetson AGX Xavier"),
            ("8.7,6.2", "CUDA 13.0 dropped sm_62 (Pascal; sm_62 is Jetson TX2"),
            ("sm_101", "CUDA 13.0 renamed sm_101 (Jetson Thor) to sm_110"),
        ] {
            let spec = ArchSpec::parse(item, "KT_CUDA_ARCHS").unwrap();
            let err = spec.resolve(&supported, "KT_CUDA_ARCHS", || Ok(vec![])).unwrap_err();
            assert!(matches!(err, ArchError::Unsupported { .. }));
            let text = err.to_string();
            assert!(text.contains(says), "{text}");
            assert!(text.contains("CUDA 13.0 (built-in table"), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
    }
}
