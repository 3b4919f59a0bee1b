//! Reading what `cargo build` printed: the build script's warnings and
//! errors as Cargo shows them, and assertions that show Cargo's output when
//! a build went the wrong way.

use std::process::Output;

/// Cargo's stderr, as text.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Cargo's stderr without the lines about building the dependencies, for
/// failure messages.
fn fixture_stderr(output: &Output) -> String {
    let text = stderr(output);
    let start = text.find("   Compiling ").unwrap_or(0);
    text[start..].to_string()
}

/// The fixture build script's `cargo::warning`s as Cargo shows them
/// (`warning: <crate>@0.1.0: ...`), message only.
pub(crate) fn build_script_warnings(output: &Output) -> Vec<String> {
    build_script_lines(output, "warning: ")
}

/// The fixture build script's `cargo::error`s as Cargo shows them
/// (`error: <crate>@0.1.0: ...`), message only.
pub(crate) fn build_script_errors(output: &Output) -> Vec<String> {
    build_script_lines(output, "error: ")
}

fn build_script_lines(output: &Output, level: &str) -> Vec<String> {
    stderr(output)
        .lines()
        .filter_map(|line| line.strip_prefix(level)?.split_once("@0.1.0: "))
        .map(|(_, message)| message.to_string())
        .collect()
}

/// Panics with Cargo's output unless the build succeeded.
#[track_caller]
pub(crate) fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: cargo build failed ({})\n--- stderr\n{}\n--- stdout\n{}",
        output.status,
        fixture_stderr(output),
        String::from_utf8_lossy(&output.stdout)
    );
}

/// Panics with Cargo's output unless the build failed.
#[track_caller]
pub(crate) fn assert_failure(output: &Output, what: &str) {
    assert!(
        !output.status.success(),
        "{what}: cargo build succeeded but should have failed\n--- stderr\n{}",
        fixture_stderr(output)
    );
}
