//! Where a new crate's kiln dependencies come from when no flag says so: the
//! source this `cargo-kiln` was installed from (Cargo's own install record,
//! `$CARGO_HOME/.crates2.json`), else the kiln checkout it was built in, if
//! that is still there. Never a made-up URL: with neither, the caller is told
//! to pass `--kiln-path` or `--kiln-git`.

use std::path::{Path, PathBuf};

use super::template::KilnSource;

/// What Cargo recorded for an installed package, by its package id
/// (`cargo-kiln 0.1.0 (git+https://host/kiln?branch=main#0123abc)`).
#[derive(serde::Deserialize)]
struct InstallRecord {
    installs: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
}

/// The source in `record` (the text of `.crates2.json`) of the package
/// `package` at `version`, as a kiln source: a git URL and commit, or the
/// checkout holding `crates/<package dir>`. `None` when the record does not
/// name it, is damaged, or names a source kiln cannot point at (a registry).
pub(crate) fn from_install_record(
    record: &str,
    package: &str,
    version: &str,
) -> Option<KilnSource> {
    let record: InstallRecord = serde_json::from_str(record).ok()?;
    let prefix = format!("{package} {version} (");
    let id = record.installs.keys().find(|id| id.starts_with(&prefix))?;
    let source = id.strip_prefix(&prefix)?.strip_suffix(')')?;
    if let Some(git) = source.strip_prefix("git+") {
        let (location, rev) = match git.split_once('#') {
            Some((location, rev)) if !rev.is_empty() => (location, Some(rev.to_owned())),
            _ => (git, None),
        };
        // `?branch=`/`?tag=`/`?rev=` say what was asked; the commit after `#`
        // is what was built, and pins it.
        let url = location.split_once('?').map_or(location, |(url, _)| url);
        return (!url.is_empty()).then(|| KilnSource::Git {
            url: url.to_owned(),
            rev,
        });
    }
    let path = source.strip_prefix("path+file://")?;
    let path = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?;
    // The package is `<root>/crates/cargo-kiln`.
    let root = Path::new(path.as_ref()).parent()?.parent()?;
    Some(KilnSource::Path(root.to_owned()))
}

/// The source this program was installed from, when it runs from Cargo's
/// install folder (`$CARGO_HOME/bin`, or `$CARGO_INSTALL_ROOT/bin` with its
/// own record) and that folder's record names it.
pub(crate) fn installed() -> Option<KilnSource> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?;
    let root = bin.parent()?;
    let candidates: Vec<PathBuf> = [
        std::env::var_os("CARGO_INSTALL_ROOT").map(PathBuf::from),
        home::cargo_home().ok(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let install_root = candidates.iter().find(|c| same_dir(c, root))?;
    let record = std::fs::read_to_string(install_root.join(".crates2.json")).ok()?;
    from_install_record(&record, env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
}

/// The kiln checkout this program was compiled from (`cargo run`, tests, or
/// an install whose checkout is still on disk).
pub(crate) fn build_checkout() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(record: &str, expected: Option<KilnSource>) {
        assert_eq!(
            from_install_record(record, "cargo-kiln", "0.1.0"),
            expected,
            "{record}"
        );
    }

    fn record(id: &str) -> String {
        serde_json::json!({ "installs": { id: { "bins": ["cargo-kiln"] } } }).to_string()
    }

    #[test]
    fn a_git_install_pins_the_commit_it_built() {
        let git = |url: &str, rev: Option<&str>| {
            Some(KilnSource::Git {
                url: url.into(),
                rev: rev.map(Into::into),
            })
        };
        check(
            &record("cargo-kiln 0.1.0 (git+https://h.example/kiln#0123abcd)"),
            git("https://h.example/kiln", Some("0123abcd")),
        );
        check(
            &record("cargo-kiln 0.1.0 (git+https://h.example/kiln?branch=dev#0123abcd)"),
            git("https://h.example/kiln", Some("0123abcd")),
        );
        check(
            &record("cargo-kiln 0.1.0 (git+ssh://git@h.example/kiln.git)"),
            git("ssh://git@h.example/kiln.git", None),
        );
    }

    #[test]
    fn a_path_install_points_at_its_checkout() {
        check(
            &record("cargo-kiln 0.1.0 (path+file:///src/my%20kiln/crates/cargo-kiln)"),
            Some(KilnSource::Path("/src/my kiln".into())),
        );
    }

    #[test]
    fn damaged_foreign_and_missing_records_name_nothing() {
        check("", None);
        check("{", None);
        check("[]", None);
        check(r#"{"installs": 3}"#, None);
        check(
            &record("cargo-kiln 0.2.0 (git+https://h.example/kiln#01)"),
            None,
        );
        check(
            &record("cargo-kilnx 0.1.0 (git+https://h.example/kiln#01)"),
            None,
        );
        check(
            &record("cargo-kiln 0.1.0 (registry+https://github.com/rust-lang/crates.io-index)"),
            None,
        );
        check(&record("cargo-kiln 0.1.0 (git+)"), None);
        check(&record("cargo-kiln 0.1.0 (path+file:///)"), None);
        check(&record("cargo-kiln 0.1.0 (path+file:///a/%ff/b)"), None);
        check(&record("cargo-kiln 0.1.0 git+https://h.example/kiln"), None);
    }

    #[test]
    fn the_build_checkout_is_a_kiln_checkout_in_this_repository() {
        assert!(build_checkout()
            .join("crates/gpu-core/Cargo.toml")
            .is_file());
    }
}
