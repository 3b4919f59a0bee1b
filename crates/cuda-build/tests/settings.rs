//! Settings parsed strictly, with the fake nvcc: on/off switches (`KILN_CACHE`,
//! `<P>_CUDA`, `<P>_REQUIRE_CUDA`) accept on/off/true/false/1/0/yes/no in any
//! case and refuse the rest; module names that are no Rust identifier or
//! collide after the mapping to one, bad `defines`, and a `kiln.toml` that
//! is a symlink loop each fail in one line naming the file, before any
//! compile and never as rustc errors in generated code.
#![cfg(unix)]

mod support;

use support::{
    assert_failure, assert_success, build_script_errors, compiles, stderr, Fixture, KERNEL_SOURCES,
};

/// The build script's one error line for a build with `env` that must fail.
#[track_caller]
fn refusal(fixture: &Fixture, env: &[(&str, &str)], what: &str) -> String {
    let output = fixture.cargo_build(env);
    assert_failure(&output, what);
    assert!(
        !stderr(&output).contains("error[E"),
        "{what}: no rustc error in generated code"
    );
    let errors = build_script_errors(&output);
    assert_eq!(errors.len(), 1, "{what}: one line: {errors:#?}");
    errors.into_iter().next().unwrap_or_default()
}

#[test]
fn switches_accept_the_documented_words_and_refuse_the_rest() {
    let fixture = Fixture::with_sources("settings-switches", "switches", KERNEL_SOURCES);
    let words = "on/off, true/false, 1/0, yes/no (any case)";
    for (var, value) in [
        ("KILN_CACHE", "disabled"),
        ("KILN_CACHE", "of"),
        ("FIXTURE_CUDA", "nope"),
        ("FIXTURE_CUDA", "2"),
        ("FIXTURE_REQUIRE_CUDA", "maybe"),
        ("FIXTURE_REQUIRE_CUDA", "enabled"),
    ] {
        let line = refusal(&fixture, &[(var, value)], &format!("{var}={value}"));
        assert_eq!(
            line,
            format!("{var}={value}: is not an on/off value; write one of {words}, or unset {var}")
        );
    }
    assert_eq!(
        fixture.nvcc_calls(),
        compiles(&[]),
        "refused before any compile"
    );

    let cache_dir = fixture.root_path("cache").display().to_string();
    let output = fixture.cargo_build(&[("KILN_CACHE", "OFF"), ("KILN_CACHE_DIR", &cache_dir)]);
    assert_success(&output, "KILN_CACHE=OFF");
    assert!(
        fixture.manifest().cache.is_none(),
        "KILN_CACHE=OFF turns the cache off"
    );
    assert!(!fixture.root_path("cache").exists());
    fixture.clean();
    let output = fixture.cargo_build(&[("KILN_CACHE", "Yes"), ("KILN_CACHE_DIR", &cache_dir)]);
    assert_success(&output, "KILN_CACHE=Yes");
    assert!(
        fixture.manifest().cache.is_some(),
        "KILN_CACHE=Yes turns it on"
    );

    let output = fixture.cargo_build(&[("FIXTURE_CUDA", "Off")]);
    assert_success(&output, "FIXTURE_CUDA=Off");
    assert!(
        !fixture.manifest().cuda_enabled,
        "FIXTURE_CUDA=Off builds CPU-only"
    );
    for value in ["YES", "true", "1"] {
        let line = refusal(
            &fixture,
            &[("FIXTURE_CUDA", "FALSE"), ("FIXTURE_REQUIRE_CUDA", value)],
            &format!("FIXTURE_REQUIRE_CUDA={value}"),
        );
        assert!(
            line.starts_with("FIXTURE_REQUIRE_CUDA=1 but no CUDA toolkit was found"),
            "{value}: {line}"
        );
    }
}

#[test]
fn unusable_and_colliding_module_names_fail_naming_the_file() {
    let fixture = Fixture::with_sources("settings-names", "names", KERNEL_SOURCES);
    let kernels = fixture.path("kernels");
    let toml = kernels.join("kiln.toml");
    let fix = |file: &str| {
        format!(
            "rename the file, or build it under another name with [modules.NAME] sources = \
             [\"{file}\"] in {}",
            toml.display()
        )
    };
    let kernel = "extern \"C\" __global__ void k(float *x) {}\n";
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["9lives.cu"],
            format!(
                "{}: `9lives` is not a usable module name: it must start with an ASCII letter or \
                 `_` and hold only letters, digits, `_` and `-`; {}",
                kernels.join("9lives.cu").display(),
                fix("9lives.cu")
            ),
        ),
        (
            vec!["ü.cu"],
            format!(
                "{}: `ü` is not a usable module name: it must start with an ASCII letter or `_` \
                 and hold only letters, digits, `_` and `-`; {}",
                kernels.join("ü.cu").display(),
                fix("ü.cu")
            ),
        ),
        (
            vec!["all.cu"],
            format!(
                "{}: `all` is not a usable module name: the generated Rust defines `ALL` itself; {}",
                kernels.join("all.cu").display(),
                fix("all.cu")
            ),
        ),
        (
            vec!["Saxpy.cu", "saxpy.cu"],
            format!(
                "{}: module `saxpy` and module `Saxpy` (from Saxpy.cu) both become `SAXPY` in the \
                 generated Rust; rename one file, or give one another name with a [modules.NAME] \
                 entry in {}",
                kernels.join("saxpy.cu").display(),
                toml.display()
            ),
        ),
        (
            vec!["a-b.cu", "a_b.cu"],
            format!(
                "{}: module `a_b` and module `a-b` (from a-b.cu) both become `A_B` in the \
                 generated Rust; rename one file, or give one another name with a [modules.NAME] \
                 entry in {}",
                kernels.join("a_b.cu").display(),
                toml.display()
            ),
        ),
    ];
    for (files, expected) in &cases {
        for file in files {
            fixture.write(&format!("kernels/{file}"), kernel);
        }
        assert_eq!(&refusal(&fixture, &[], &files.join(" ")), expected);
        for file in files {
            fixture.remove(&format!("kernels/{file}"));
        }
    }

    // The fix the message names works.
    fixture.write("kernels/9lives.cu", kernel);
    fixture.write(
        "kernels/kiln.toml",
        "[modules.lives]\nsources = [\"9lives.cu\"]\n",
    );
    assert_success(&fixture.cargo_build(&[]), "9lives.cu as [modules.lives]");
    assert!(fixture.generated_modules().contains("pub static LIVES:"));
}

#[test]
fn bad_defines_and_a_looping_kiln_toml_are_refused() {
    let fixture = Fixture::with_sources("settings-defines", "defines", KERNEL_SOURCES);
    let toml = fixture.path("kernels/kiln.toml");
    for (define, why) in [
        ("", "does not start with a macro name"),
        ("-O0", "does not start with a macro name"),
        ("=1", "does not start with a macro name"),
        ("9N=1", "does not start with a macro name"),
        ("N 1", "holds a space or control character"),
        (" N", "holds a space or control character"),
        ("N=\\t1", "holds a space or control character"),
    ] {
        fixture.write(
            "kernels/kiln.toml",
            &format!("[modules.a]\ndefines = [\"{define}\"]\n"),
        );
        let shown = define.replace("\\t", "\t");
        assert_eq!(
            refusal(&fixture, &[], &format!("defines = [{define:?}]")),
            format!(
                "{}: [modules.a] define {shown:?} {why}; write NAME or NAME=VALUE",
                toml.display()
            )
        );
    }
    fixture.write(
        "kernels/kiln.toml",
        "[modules.a]\ndefines = [\"N=4\", \"FAST\", \"F(x)=x\"]\n",
    );
    assert_success(&fixture.cargo_build(&[]), "good defines");

    std::fs::remove_file(&toml).unwrap();
    std::os::unix::fs::symlink("kiln.toml", &toml).unwrap();
    let line = refusal(&fixture, &[], "kiln.toml -> kiln.toml");
    assert!(
        line.starts_with(&format!("{}: cannot be read (", toml.display()))
            && line.ends_with("); make it a readable file or remove it"),
        "{line}"
    );
    std::fs::remove_file(&toml).unwrap();
    std::os::unix::fs::symlink("other.toml", &toml).unwrap();
    std::os::unix::fs::symlink("kiln.toml", fixture.path("kernels/other.toml")).unwrap();
    let line = refusal(&fixture, &[], "kiln.toml -> other.toml -> kiln.toml");
    assert!(line.contains("cannot be read"), "{line}");
    // A FIFO is refused at once, never waited on.
    std::fs::remove_file(&toml).unwrap();
    let status = std::process::Command::new("mkfifo").arg(&toml).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "mkfifo: a FIFO is what this test plants"
    );
    let line = refusal(&fixture, &[], "kiln.toml as a FIFO");
    assert_eq!(
        line,
        format!(
            "{} is a FIFO, not a regular file; kiln reads and writes only regular files there: remove it and rerun",
            toml.display()
        )
    );
}
