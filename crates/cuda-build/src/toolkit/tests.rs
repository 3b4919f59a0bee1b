//! Discovery's tests: every place of the search order from tables of
//! variables and fake toolkits, what each reports, and the probes' limit.

use super::*;

#[test]
fn version_parses_nvcc_output() {
    let text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";
    let v = ToolkitVersion::parse_nvcc_version(text).unwrap();
    assert_eq!(
        v,
        ToolkitVersion {
            major: 13,
            minor: 0,
            patch: 88
        }
    );
    assert_eq!(v.to_string(), "13.0.88");
    let old = ToolkitVersion::parse_nvcc_version("Cuda compilation tools, release 12.4, V12.4.131")
        .unwrap();
    assert_eq!(
        old,
        ToolkitVersion {
            major: 12,
            minor: 4,
            patch: 131
        }
    );
    assert_eq!(ToolkitVersion::parse_nvcc_version("garbage"), None);
}

#[test]
fn empty_environment_reports_every_place() {
    let env: &[(&str, &str)] = &[("PATH", "/nonexistent-kiln-test")];
    let d = discover(
        env,
        &[("project-local".into(), "/nonexistent-kiln-tk".into())],
    );
    let places: Vec<&str> = d.probes.iter().map(|p| p.place.as_str()).collect();
    assert_eq!(
        places,
        [
            "NVCC",
            "CUDA_PATH",
            "CUDA_HOME",
            "CUDA_ROOT",
            "PATH",
            "project-local",
            "user store",
            "/usr/local/cuda",
            "/opt/cuda"
        ]
    );
    assert_eq!(d.probes[6].to_string(), "user store (not set)");
    assert_eq!(d.probes[0].outcome, ProbeOutcome::NotSet);
    assert_eq!(
        d.probes[5].to_string(),
        "project-local=/nonexistent-kiln-tk (does not exist)"
    );
    if d.toolkit.is_none() {
        assert!(d
            .looked_at()
            .starts_with("NVCC (not set), CUDA_PATH (not set)"));
    }
}

#[test]
fn a_dir_without_nvcc_or_headers_is_reported_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let root = dir.to_str().unwrap();
    let env: &[(&str, &str)] = &[("CUDA_PATH", root), ("PATH", "")];
    let d = discover(env, &[]);
    assert_eq!(d.probes[1].outcome, ProbeOutcome::NoNvcc(dir.clone()));
    assert_eq!(d.misconfigured().count(), 1);
    std::fs::write(dir.join("bin/nvcc"), "").unwrap();
    let d = discover(env, &[]);
    assert_eq!(d.probes[1].outcome, ProbeOutcome::NoHeaders(dir.clone()));
}

#[test]
fn nvcc_may_be_any_executable_beside_no_toolkit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let toolkit = dir.join("toolkit");
    std::fs::create_dir_all(toolkit.join("include")).unwrap();
    std::fs::write(toolkit.join("include/cuda_runtime.h"), "").unwrap();
    let wrapper = dir.join("elsewhere/log-nvcc");
    std::fs::create_dir_all(wrapper.parent().unwrap()).unwrap();
    std::fs::write(&wrapper, "").unwrap();
    let given = wrapper.to_str().unwrap();
    let root = toolkit.to_str().unwrap();

    // No root beside it and none named: the probe says which path was given.
    let env: &[(&str, &str)] = &[("NVCC", given), ("PATH", "")];
    let probe = discover(env, &[]).probes[0].to_string();
    assert_eq!(
        probe,
        format!("NVCC={given} (no toolkit root with include/cuda_runtime.h beside it; set CUDA_PATH to the toolkit it uses)")
    );
    // With CUDA_PATH naming the root, the wrapper itself is run (and here,
    // being empty, fails `--version`, which the probe says naming it).
    let env: &[(&str, &str)] = &[("NVCC", given), ("CUDA_PATH", root), ("PATH", "")];
    let probe = discover(env, &[]).probes[0].to_string();
    assert!(probe.starts_with(&format!("NVCC={given} (")), "{probe}");
}

#[test]
fn nvcc_bin_false_is_reported_as_given() {
    if !Path::new("/bin/false").is_file() {
        println!("skipped: no /bin/false on this system");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("include")).unwrap();
    std::fs::write(dir.join("include/cuda_runtime.h"), "").unwrap();
    let env: &[(&str, &str)] = &[
        ("NVCC", "/bin/false"),
        ("CUDA_PATH", dir.to_str().unwrap()),
        ("PATH", ""),
    ];
    let d = discover(env, &[]);
    let probe = d.probes[0].to_string();
    assert!(
        probe.starts_with(
            "NVCC=/bin/false (`/bin/false --version` printed no CUDA release; exit status: 1)"
        ),
        "{probe}"
    );
    assert!(d.misconfigured().any(|p| p.place == "NVCC"));
}

/// A fake toolkit whose nvcc prints a CUDA release, in `root`.
#[cfg(unix)]
fn fake_toolkit(root: &Path) {
    fake_toolkit_after(root, "");
}

/// A fake toolkit whose nvcc runs `first`, then prints a CUDA release.
#[cfg(unix)]
fn fake_toolkit_after(root: &Path, first: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("include")).unwrap();
    std::fs::write(root.join("include/cuda_runtime.h"), "").unwrap();
    let nvcc = root.join("bin/nvcc");
    std::fs::write(
        &nvcc,
        format!("#!/bin/sh\n{first}\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
#[cfg(unix)]
fn the_user_store_default_is_taken_after_the_callers_candidates() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    fake_toolkit(&store.join("cuda-13.0.88/cuda"));
    let env_store = store.to_str().unwrap();
    let env: &[(&str, &str)] = &[("PATH", ""), (STORE_VAR, env_store)];
    // No `default` link yet: the store is looked at and not taken.
    let d = discover(env, &[]);
    assert!(d.toolkit.is_none() || d.toolkit.as_ref().unwrap().found_by != STORE_VAR);
    assert!(d.misconfigured().any(|p| p.place == STORE_VAR), "{d:?}");
    std::os::unix::fs::symlink("cuda-13.0.88", store.join(STORE_DEFAULT)).unwrap();
    let d = discover(env, &[]);
    assert_eq!(d.misconfigured().count(), 0);
    let taken = d.toolkit.expect("the store's default is taken");
    assert_eq!(taken.found_by, STORE_VAR);
    assert_eq!(taken.root, store.join("default/cuda"));
    // A candidate of the caller's comes first.
    let local = tmp.path().join("local");
    fake_toolkit(&local);
    let d = discover(env, &[("project-local".into(), local.clone())]);
    assert_eq!(d.toolkit.unwrap().root, local);
}

/// Issue 41: a toolkit whose nvcc lists no archs is the toolkit's
/// fault, said so with the nvcc and the place that found it, never
/// blamed on the crate's arch spec or `kiln.toml`.
#[test]
#[cfg(unix)]
fn a_toolkit_listing_no_archs_is_named_as_the_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cuda");
    fake_toolkit(&root);
    let env: &[(&str, &str)] = &[("CUDA_PATH", root.to_str().unwrap()), ("PATH", "")];
    let toolkit = discover(env, &[]).toolkit.expect("the fake toolkit");
    let err = toolkit.supported_archs().unwrap_err().to_string();
    assert!(
        err.contains(&format!("{} --list-gpu-code", toolkit.nvcc.display()))
            && err.contains("found by CUDA_PATH")
            && err.contains("listed no archs")
            && !err.contains("kiln.toml")
            && !err.contains('\n'),
        "{err}"
    );
}

/// Issue 41: a toolkit whose nvcc hangs (here: answers only after 30s)
/// is given up after `KILN_PROBE_TIMEOUT` seconds, named with the
/// variable, instead of hanging `doctor` and every plain build.
#[test]
#[cfg(unix)]
fn a_hanging_nvcc_is_given_up_after_the_probe_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cuda");
    fake_toolkit_after(&root, "sleep 30");
    let env: &[(&str, &str)] = &[
        ("CUDA_PATH", root.to_str().unwrap()),
        ("PATH", ""),
        (PROBE_TIMEOUT_VAR, "1"),
    ];
    let d = discover(env, &[]);
    assert_eq!(d.toolkit, None, "{d:?}");
    let probe = d.probes.iter().find(|p| p.place == "CUDA_PATH").unwrap();
    let text = probe.to_string();
    assert!(
        text.contains("did not finish within 1s") && text.contains(PROBE_TIMEOUT_VAR),
        "{text}"
    );
    assert!(d.misconfigured().any(|p| p.place == "CUDA_PATH"));
}

/// Issue 41: the probe timeout is a whole number of seconds within a
/// bound (no overflow of an instant), else one line naming it.
#[test]
fn the_probe_timeout_is_checked() {
    let limit = |v: &str| {
        let env: &[(&str, &str)] = &[(PROBE_TIMEOUT_VAR, v)];
        probe_timeout(env)
    };
    assert_eq!(limit("").unwrap(), DEFAULT_PROBE_TIMEOUT);
    assert_eq!(limit(" 5 ").unwrap(), Duration::from_secs(5));
    for bad in ["0", "-1", "1.5", "ten", "18446744073709551615", "86401"] {
        let err = limit(bad).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{PROBE_TIMEOUT_VAR}={bad}:")),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }
}

#[test]
fn the_store_is_the_variable_else_the_data_dir() {
    let env: &[(&str, &str)] = &[(STORE_VAR, "/s")];
    assert_eq!(user_store(env), Some(PathBuf::from("/s")));
    let env: &[(&str, &str)] = &[(STORE_VAR, "")];
    assert_eq!(user_store(env), None, "a table has no data dir");
    if let Some(data) = dirs::data_local_dir() {
        if std::env::var_os(STORE_VAR).is_none() {
            assert_eq!(user_store(&ProcessEnv), Some(data.join("kiln/toolkits")));
        }
    }
}

/// A fake toolkit whose nvcc reports `release`.
#[cfg(unix)]
fn fake_toolkit_of(root: &Path, release: &str) {
    fake_toolkit_after(root, "");
    std::fs::write(
        root.join("bin/nvcc"),
        format!("#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.37'\n"),
    )
    .unwrap();
}

#[test]
#[cfg(unix)]
fn nvcc_on_path_shadows_the_store_and_discover_every_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let newer = tmp.path().join("cuda-13.5");
    fake_toolkit_of(&newer, "13.5");
    let store = tmp.path().join("store");
    fake_toolkit(&store.join("cuda-13.0.88/cuda"));
    std::os::unix::fs::symlink("cuda-13.0.88", store.join(STORE_DEFAULT)).unwrap();
    let path = newer.join("bin").display().to_string();
    let env: &[(&str, &str)] = &[("PATH", &path), (STORE_VAR, store.to_str().unwrap())];
    // The build's search stops at the first: the store is not looked at.
    let d = discover(env, &[]);
    assert_eq!(d.toolkit.as_ref().unwrap().found_by, "PATH");
    assert_eq!(d.shadowed().count(), 0);
    let every = discover_every(env, &[]);
    assert_eq!(every.toolkit, d.toolkit, "the same toolkit wins");
    let shadowed: Vec<String> = every.shadowed().map(ToString::to_string).collect();
    assert_eq!(
        shadowed,
        [format!(
            "{STORE_VAR}={} (CUDA 13.0.88, shadowed)",
            store.join("default/cuda").display()
        )]
    );
    // The same toolkit reached twice (PATH at the store's nvcc) shadows
    // nothing.
    let store_bin = store.join("default/cuda/bin").display().to_string();
    let env: &[(&str, &str)] = &[("PATH", &store_bin), (STORE_VAR, store.to_str().unwrap())];
    assert_eq!(discover_every(env, &[]).shadowed().count(), 0);
}
