//! The crate graph a new crate makes, read rather than listed: the
//! dependencies of the template's `Cargo.toml` (each by its key and its
//! `package`), and, where kiln's checkout is on disk, kiln's crates and what
//! they depend on, through their path dependencies. A new crate named like
//! any of them does not build (cargo refuses a package that depends on a
//! crate of its own name), so `cargo kiln new` refuses the name first.
//!
//! The same reading says what a kiln checkout is: the folders under
//! `crates/` that the template's kiln dependencies point at, each holding
//! the package the template names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::template::{self, KilnSource, Vars};
use super::Error;

/// The sections of a manifest whose crates are in the graph (a dependency's
/// dev-dependencies are not).
const SECTIONS: [&str; 2] = ["dependencies", "build-dependencies"];

/// The template's `Cargo.toml` rendered for a crate depending on `source`.
fn template_manifest(source: &KilnSource) -> toml::Table {
    let file = template::FILES
        .iter()
        .find(|f| f.path == "Cargo.toml")
        .expect("the template has a Cargo.toml");
    Vars::new("x", source)
        .render(file.text)
        .parse()
        .expect("the template's Cargo.toml is TOML (the template's tests render it)")
}

/// `(folder under crates/, package)` of each kiln crate the template
/// depends on: what a kiln checkout must hold.
pub(super) fn kiln_crates() -> Vec<(String, String)> {
    let manifest = template_manifest(&KilnSource::Path("/kiln".into()));
    table(&manifest, &["workspace", "dependencies"])
        .into_iter()
        .flatten()
        .filter_map(|(_, spec)| {
            let path = Path::new(spec.get("path")?.as_str()?);
            let dir = path.strip_prefix("/kiln/crates").ok()?;
            let package = spec.get("package")?.as_str()?;
            Some((dir.to_string_lossy().into_owned(), package.to_owned()))
        })
        .collect()
}

/// Checks that `root` is a kiln checkout: every crate of [`kiln_crates`] is
/// there under its package name.
pub(super) fn check_checkout(root: &Path) -> Result<(), Error> {
    for (dir, package) in kiln_crates() {
        let manifest = root.join("crates").join(dir).join("Cargo.toml");
        let name = read_manifest(&manifest).and_then(|m| {
            let name = m.get("package")?.get("name")?.as_str()?.to_owned();
            Some(name)
        });
        if name.as_deref() != Some(package.as_str()) {
            return Err(Error::NotAKilnCheckout {
                root: root.to_owned(),
                missing: manifest,
                package,
            });
        }
    }
    Ok(())
}

/// Every crate name (`-` as `_`) in the graph of a new crate depending on
/// `source`, with what brings it in; `checkout` is kiln's checkout on disk,
/// if any, whose crates are read for their own dependencies.
pub(super) fn names(source: &KilnSource, checkout: Option<&Path>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let manifest = template_manifest(source);
    for section in ["dependencies", "build-dependencies", "dev-dependencies"] {
        add_deps(&mut names, &manifest, &[section], "the template");
    }
    add_deps(
        &mut names,
        &manifest,
        &["workspace", "dependencies"],
        "the template",
    );
    if let Some(root) = checkout {
        let workspace = read_manifest(&root.join("Cargo.toml")).unwrap_or_default();
        let mut todo: Vec<PathBuf> = kiln_crates()
            .into_iter()
            .map(|(dir, _)| root.join("crates").join(dir))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        while let Some(dir) = todo.pop() {
            if !seen.insert(dir.clone()) {
                continue;
            }
            let Some(manifest) = read_manifest(&dir.join("Cargo.toml")) else {
                continue;
            };
            let Some(package) = manifest
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                .map(str::to_owned)
            else {
                continue;
            };
            let by = format!("a dependency of {package}");
            for section in SECTIONS {
                for (key, spec) in table(&manifest, &[section]).into_iter().flatten() {
                    // `dep.workspace = true`: the workspace's entry says
                    // where, relative to the workspace's root.
                    let inherited = spec.get("workspace").and_then(|w| w.as_bool()) == Some(true);
                    let (spec, base) = match table(&workspace, &["workspace", "dependencies"])
                        .and_then(|t| t.get(key))
                    {
                        Some(entry) if inherited => (entry, root),
                        _ => (spec, dir.as_path()),
                    };
                    add(&mut names, key, spec, &by);
                    if let Some(path) = spec.get("path").and_then(|p| p.as_str()) {
                        todo.push(base.join(path));
                    }
                }
            }
        }
    }
    names
}

fn add_deps(names: &mut BTreeMap<String, String>, manifest: &toml::Table, keys: &[&str], by: &str) {
    for (key, spec) in table(manifest, keys).into_iter().flatten() {
        add(names, key, spec, by);
    }
}

/// A dependency's key and the package it renames, as crate names.
fn add(names: &mut BTreeMap<String, String>, key: &str, spec: &toml::Value, by: &str) {
    let package = spec.get("package").and_then(|p| p.as_str());
    for name in std::iter::once(key).chain(package) {
        names
            .entry(name.replace('-', "_"))
            .or_insert_with(|| format!("`{name}` ({by})"));
    }
}

fn table<'a>(manifest: &'a toml::Table, keys: &[&str]) -> Option<&'a toml::Table> {
    let mut value = manifest.get(keys[0])?;
    for key in &keys[1..] {
        value = value.get(key)?;
    }
    value.as_table()
}

/// A manifest, when it is a regular file of at most 1 MiB that parses.
fn read_manifest(path: &Path) -> Option<toml::Table> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    std::fs::read_to_string(path).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_names_kilns_crates_and_their_packages() {
        assert_eq!(
            kiln_crates(),
            [
                ("cuda-build".to_string(), "kiln-cuda-build".to_string()),
                ("gpu-core".to_string(), "kiln-gpu-core".to_string())
            ]
        );
    }

    #[test]
    fn the_graph_holds_the_templates_and_kilns_dependencies() {
        let root = super::super::source::build_checkout();
        let names = names(&KilnSource::Path(root.clone()), Some(&root));
        for name in [
            "half",
            "gpu_core",
            "kiln_gpu_core",
            "cuda_build",
            "kiln_abi",
        ] {
            assert!(names.contains_key(name), "{name}: {names:?}");
        }
        let alone = super::names(&KilnSource::Path(root), None);
        assert!(
            !alone.contains_key("kiln_abi"),
            "read from the checkout only"
        );
    }
}
