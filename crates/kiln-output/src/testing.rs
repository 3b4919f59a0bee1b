//! Helpers for the tests of commands that write output folders (feature
//! `testing`): what a tree holds, to prove a refusal touched nothing.

use std::fs;
use std::path::Path;

/// Every path under `root`, relative and sorted, with its bytes: a file's
/// contents, a symlink's target (never followed), `/` for a folder.
///
/// # Panics
/// Where the tree cannot be read (a test's own temp folder).
pub fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("a readable folder") {
            let path = entry.expect("a readable entry").path();
            let meta = fs::symlink_metadata(&path).expect("an entry's metadata");
            let body = if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).expect("a symlink's target");
                target.into_os_string().into_encoded_bytes()
            } else if meta.is_dir() {
                stack.push(path.clone());
                b"/".to_vec()
            } else {
                fs::read(&path).expect("a readable file")
            };
            let rel = path.strip_prefix(root).expect("below root");
            found.push((rel.display().to_string(), body));
        }
    }
    found.sort();
    found
}

/// The names in `dir`, sorted.
///
/// # Panics
/// Where `dir` cannot be read.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("a readable folder")
        .map(|e| {
            e.expect("a readable entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}
