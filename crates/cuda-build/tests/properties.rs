//! Hostile input never panics: property tests for the arch grammar and for
//! `kiln.toml`, from random text and from structured near-misses. Every input
//! ends in `Ok` or in an error whose message is one line.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use cuda_build::{ArchSpec, KernelBuild, KernelConfig, SupportedArchs};
use proptest::prelude::*;

fn one_line(message: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        !message.is_empty() && !message.contains('\n'),
        "{message:?}"
    );
    Ok(())
}

/// Parses and resolves a spec against CUDA 13.0's table: `Ok` or one line.
fn check_spec(text: &str) -> Result<(), TestCaseError> {
    match ArchSpec::parse(text, "the test") {
        Err(e) => one_line(&e.to_string()),
        Ok(spec) => {
            let supported = SupportedArchs::cuda_13_0_builtin();
            match spec.resolve(&supported, "the test", || Err("no GPU here".into())) {
                Ok(list) => {
                    prop_assert!(!list.sass.is_empty() || !list.ptx.is_empty(), "{text:?}");
                    Ok(())
                }
                Err(e) => one_line(&e.to_string()),
            }
        }
    }
}

/// One item of a spec, often valid, often a near miss.
fn arch_item() -> impl Strategy<Value = String> {
    let number = (0u32..130).prop_map(|n| n.to_string());
    let prefix = prop::sample::select(vec!["", "sm_", "compute_", "SM_", "sm", "compute"]);
    let suffix = prop::sample::select(vec![
        "",
        "a",
        "f",
        "-real",
        "-virtual",
        "+PTX",
        "+ptx",
        "a+PTX",
        "-real+PTX",
        ".0",
        "x",
    ]);
    let keyword = prop::sample::select(vec![
        "native",
        "all-major",
        "ALL-MAJOR",
        "",
        " ",
        "8.6",
        "9.0a",
    ]);
    prop_oneof![
        (prefix, number, suffix).prop_map(|(p, n, s)| format!("{p}{n}{s}")),
        keyword.prop_map(str::to_string),
        "[ -~]{0,12}",
    ]
}

proptest! {
    // Failures are reported with their minimal input; none is stored.
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_text_is_a_spec_or_one_line(text in "\\PC{0,64}") {
        check_spec(&text)?;
    }

    #[test]
    fn near_miss_lists_are_a_spec_or_one_line(
        items in prop::collection::vec(arch_item(), 0..6),
        separator in prop::sample::select(vec![",", ";", " , ", ",,"]),
    ) {
        check_spec(&items.join(separator))?;
    }

    #[test]
    fn every_supported_arch_parses_in_each_form(index in 0usize..12, form in 0usize..4) {
        let supported = SupportedArchs::cuda_13_0_builtin();
        let arch = supported.sass[index];
        let (major, minor) = (arch.major, arch.minor);
        let text = match form {
            0 => format!("sm_{major}{minor}"),
            1 => format!("{major}{minor}"),
            2 => format!("{major}.{minor}"),
            _ => format!("{major}{minor}-real"),
        };
        let list = ArchSpec::parse(&text, "the test")
            .and_then(|s| s.resolve(&supported, "the test", || Ok(Vec::new())));
        prop_assert_eq!(list.map(|l| l.sass), Ok(vec![arch]), "{}", text);
    }

    #[test]
    fn any_text_is_a_config_or_one_line(text in "\\PC{0,200}") {
        if let Err(e) = KernelConfig::parse(&text, Path::new("kiln.toml")) {
            one_line(&e.to_string())?;
        }
    }

    #[test]
    fn toml_shaped_text_is_a_config_or_one_line(text in "[\\[\\]a-z.=\"{} ,\n-]{0,160}") {
        if let Err(e) = KernelConfig::parse(&text, Path::new("kiln.toml")) {
            one_line(&e.to_string())?;
        }
    }
}

/// A value of some TOML type, for any key.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "\"static\"",
            "\"fatbin\"",
            "\"dynamic\"",
            "true",
            "false",
            "3",
            "\"sm_90a\"",
            "\"sm_12\"",
            "\"\"",
            "[]",
            "[\"a.cu\"]",
            "[\"vendor/*.cu\"]",
            "[\"vendor/[\"]",
            "[\"../a.cu\"]",
            "[\"/etc/passwd\"]",
            "[\"missing.cu\"]",
            "[\"none/*.cu\"]",
            "[\"inc\"]",
            "[\"nope\"]",
            "[\"N=4\"]",
            "[\"-O3\"]",
            "[1, 2]",
            "{}",
        ])
        .prop_map(str::to_string),
        "\"[ -~&&[^\"\\\\]]{0,8}\"",
    ]
}

/// A `kiln.toml` of known and unknown keys with values of any type.
fn kiln_toml() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "sources",
        "flags",
        "defines",
        "include-dirs",
        "archs",
        "link",
        "rdc",
        "nvcc-flags",
        "src",
    ]);
    let name = prop::sample::select(vec!["a", "b", "reduc", "vendor", "v1", "a b", "x-y", ""]);
    let module = (name, prop::collection::vec((key, toml_value()), 0..4));
    let top = prop::collection::vec(
        (
            prop::sample::select(vec!["archs", "nvcc-flags", "arch", "modules"]),
            toml_value(),
        ),
        0..3,
    );
    (top, prop::collection::vec(module, 0..4)).prop_map(|(top, modules)| {
        let mut text = String::new();
        for (key, value) in top {
            text.push_str(&format!("{key} = {value}\n"));
        }
        for (name, keys) in modules {
            text.push_str(&format!("[modules.\"{name}\"]\n"));
            for (key, value) in keys {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        text
    })
}

/// A kernels dir with a few sources and an include dir, fresh per case.
fn kernels_dir(config: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("properties")
        .join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
    let _ = std::fs::remove_dir_all(&dir);
    for file in ["a.cu", "b.cu", "vendor/v1.cu", "vendor/v2.cu", "inc/h.cuh"] {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("a file in a dir")).expect("creating dirs");
        std::fs::write(&path, "").expect("writing a source");
    }
    std::fs::write(dir.join("kiln.toml"), config).expect("writing kiln.toml");
    dir
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The whole CPU-only build (config, modules matched against files, arch
    /// specs): `Ok` or one line that names the file or the arch.
    #[test]
    fn structured_configs_build_or_fail_in_one_line(config in kiln_toml()) {
        // No toolkit is searched for: the prefix's switch is off.
        std::env::set_var("PROPS_CUDA", "off");
        let dir = kernels_dir(&config);
        let result = KernelBuild::new(&dir)
            .env_prefix("PROPS")
            .out_dir(dir.join("out"))
            .build();
        match result {
            Ok(report) => prop_assert!(!report.manifest.cuda_enabled),
            Err(e) => {
                let message = e.to_string();
                one_line(&message)?;
                prop_assert!(
                    message.contains("kiln.toml") || message.contains("CUDA arch"),
                    "{message}\n--- kiln.toml\n{config}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
