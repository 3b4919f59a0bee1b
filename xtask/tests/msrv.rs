//! Each crate's `rust-version` is true: no crate it builds with (normal,
//! build and dev dependencies, resolved by `cargo metadata` from the lock
//! file) asks for a newer Rust. No older toolchain can be fetched on the
//! build machines, so this is read from the dependencies' own manifests.

use std::collections::BTreeSet;
use std::path::Path;

use cargo_metadata::semver::Version;
use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, PackageId};

/// `(member, dependency, its rust-version)` for every dependency of a
/// workspace member that needs a newer Rust than the member declares.
fn violations(metadata: &Metadata) -> Vec<String> {
    let resolve = metadata.resolve.as_ref().expect("cargo metadata resolves");
    let mut found = Vec::new();
    for member in &metadata.workspace_members {
        let declared = metadata[member]
            .rust_version
            .clone()
            .unwrap_or_else(|| panic!("{} declares no rust-version", metadata[member].name));
        for (dep, needs) in reachable(metadata, resolve, member) {
            if needs > declared {
                found.push(format!(
                    "{} says rust-version {declared} but {dep} needs {needs}",
                    metadata[member].name
                ));
            }
        }
    }
    found
}

/// Every package `member` builds with, and the Rust it asks for: the member's
/// own dependencies of every kind, and their normal and build dependencies.
fn reachable(
    metadata: &Metadata,
    resolve: &cargo_metadata::Resolve,
    member: &PackageId,
) -> Vec<(String, Version)> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![member.clone()];
    let mut out = Vec::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        if &id != member {
            let package = &metadata[&id];
            if let Some(needs) = &package.rust_version {
                out.push((
                    format!("{} {}", package.name, package.version),
                    needs.clone(),
                ));
            }
        }
        let node = resolve
            .nodes
            .iter()
            .find(|n| n.id == id)
            .expect("resolved node");
        for dep in &node.deps {
            let builds_with = &id == member
                || dep
                    .dep_kinds
                    .iter()
                    .any(|k| matches!(k.kind, DependencyKind::Normal | DependencyKind::Build));
            if builds_with {
                stack.push(dep.pkg.clone());
            }
        }
    }
    out
}

fn metadata(manifest: &Path) -> Metadata {
    MetadataCommand::new()
        .manifest_path(manifest)
        .exec()
        .expect("cargo metadata")
}

#[test]
fn every_crate_declares_a_rust_version_its_dependencies_accept() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let found = violations(&metadata(&root));
    assert!(found.is_empty(), "raise rust-version: {found:#?}");
}

/// Planted: the same workspace with one member claiming an older Rust than
/// its dependencies need is caught.
#[test]
fn a_rust_version_older_than_a_dependency_needs_is_caught() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let mut planted = metadata(&root);
    let xtask = planted
        .packages
        .iter_mut()
        .find(|p| p.name.as_str() == "xtask")
        .expect("xtask is a member");
    xtask.rust_version = Some(Version::new(1, 60, 0));
    let found = violations(&planted);
    assert!(
        found
            .iter()
            .any(|v| v.starts_with("xtask says rust-version 1.60.0")),
        "{found:#?}"
    );
}
