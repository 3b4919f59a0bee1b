//! `gpu_core::testing` under `KILN_REQUIRE_GPU=1`: where no GPU can run the
//! test, the helper fails the test with one line instead of skipping it.
//! Checked in a child process (this test binary, run again with the variable
//! set), so that no other test sees the variable change.

mod common;

use std::process::Command;

/// Set in the child run; the child only calls the helper.
const CHILD: &str = "GPU_CORE_REQUIRE_GPU_CHILD";

#[test]
fn a_required_gpu_fails_the_test_instead_of_skipping() {
    if std::env::var_os(CHILD).is_some() {
        let _ = gpu_core::testing::cuda_backend(&[&common::TEST_MODULE]);
        return;
    }
    let usable = gpu_core::Backend::cuda(0, &[&common::TEST_MODULE]).is_ok();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_required_gpu_fails_the_test_instead_of_skipping",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("KILN_REQUIRE_GPU", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    let stdout = String::from_utf8_lossy(&child.stdout);
    println!("child (gpu usable: {usable}):\n{stdout}\n{stderr}");
    assert_eq!(child.status.success(), usable, "{stdout}\n{stderr}");
    if !usable {
        let line = stderr
            .lines()
            .find(|l| l.starts_with("KILN_REQUIRE_GPU=1 but no usable GPU: "))
            .unwrap_or_else(|| panic!("no failure line in:\n{stderr}"));
        assert!(line.len() > "KILN_REQUIRE_GPU=1 but no usable GPU: ".len());
        assert!(!stdout.contains("skipped:"), "{stdout}");
    }
}
