//! The committed-bindings check that needs no libclang: generated files carry
//! a fingerprint of the headers they came from (and, generated with
//! sources, of every source file read, each listed by its path relative to
//! the include dir), and a test compares it with the files on disk.

use std::path::{Path, PathBuf};

use crate::error::{io, Error};

/// The line that carries the fingerprint in a generated file.
pub const FINGERPRINT_PREFIX: &str = "// kiln-codegen-headers: ";

/// The line that carries the sources' fingerprint, when codegen read sources.
pub const SOURCES_PREFIX: &str = "// kiln-codegen-sources: ";

/// One line per source file read, relative to the include dir.
pub const SOURCE_PREFIX: &str = "// kiln-codegen-source: ";

/// FNV-1a (64-bit): stable across Rust releases and platforms, unlike std's
/// hasher.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn feed(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// A file's name and its bytes, line endings aside (they do not change
    /// the bindings).
    fn feed_file(&mut self, name: &str, path: &Path) -> Result<(), Error> {
        let text = io(path, std::fs::read(path))?;
        let text: Vec<u8> = text.into_iter().filter(|b| *b != b'\r').collect();
        self.feed(name.as_bytes());
        self.feed(&[0]);
        self.feed(&text);
        self.feed(&[0]);
        Ok(())
    }
}

/// Every `*.h` directly in `include_dir`, sorted.
pub fn list_headers(include_dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut headers = Vec::new();
    for entry in io(include_dir, std::fs::read_dir(include_dir))? {
        let path = io(include_dir, entry)?.path();
        if path.extension().is_some_and(|e| e == "h") {
            headers.push(path);
        }
    }
    headers.sort();
    Ok(headers)
}

/// FNV-1a (64-bit) over each header's name and bytes.
pub fn header_fingerprint(include_dir: &Path) -> Result<String, Error> {
    let mut hash = Fnv::new();
    for header in list_headers(include_dir)? {
        let name = header
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        hash.feed_file(&name, &header)?;
    }
    Ok(format!("{:016x}", hash.0))
}

/// FNV-1a (64-bit) over each source file's path (relative to `include_dir`,
/// as listed) and bytes.
pub fn sources_fingerprint(include_dir: &Path, files: &[String]) -> Result<String, Error> {
    let mut hash = Fnv::new();
    for file in files {
        hash.feed_file(file, &include_dir.join(file))?;
    }
    Ok(format!("{:016x}", hash.0))
}

/// Checks that a committed generated file was made from the headers as they
/// are now. The error says what to run.
pub fn check_committed(generated: &Path, include_dir: &Path, command: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(generated)
        .map_err(|e| format!("cannot read {}: {e}; run `{command}`", generated.display()))?;
    let recorded = text
        .lines()
        .find_map(|l| l.strip_prefix(FINGERPRINT_PREFIX))
        .ok_or_else(|| {
            format!(
                "{} has no header fingerprint; run `{command}`",
                generated.display()
            )
        })?;
    let current = header_fingerprint(include_dir).map_err(|e| e.to_string())?;
    if recorded.trim() != current {
        return Err(format!(
            "{} is stale: the headers in {} changed since it was generated; run `{command}` and commit the result",
            generated.display(),
            include_dir.display()
        ));
    }
    let Some(recorded) = text.lines().find_map(|l| l.strip_prefix(SOURCES_PREFIX)) else {
        return Ok(());
    };
    let files = source_files(&text);
    let current = sources_fingerprint(include_dir, &files).map_err(|e| {
        format!(
            "{} is stale: a source it was generated from cannot be read ({e}); run `{command}` and commit the result",
            generated.display()
        )
    })?;
    if recorded.trim() != current {
        return Err(format!(
            "{} is stale: the sources it was generated from changed since; run `{command}` and commit the result",
            generated.display()
        ));
    }
    Ok(())
}

/// The source files a generated file lists, relative to the include dir.
pub fn source_files(generated_text: &str) -> Vec<String> {
    generated_text
        .lines()
        .filter_map(|l| l.strip_prefix(SOURCE_PREFIX))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_follows_header_edits() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("a.h"), "int a;\n").unwrap();
        let generated = dir.join("gen.rs");
        let first = header_fingerprint(dir).unwrap();
        std::fs::write(&generated, format!("// x\n{FINGERPRINT_PREFIX}{first}\n")).unwrap();
        assert_eq!(check_committed(&generated, dir, "fix it"), Ok(()));
        std::fs::write(dir.join("a.h"), "int a;\r\n").unwrap();
        assert_eq!(
            header_fingerprint(dir).unwrap(),
            first,
            "CRLF does not count"
        );
        std::fs::write(dir.join("a.h"), "int b;\n").unwrap();
        let err = check_committed(&generated, dir, "fix it").unwrap_err();
        assert!(
            err.contains("is stale") && err.ends_with("run `fix it` and commit the result"),
            "{err}"
        );
        std::fs::write(dir.join("b.h"), "").unwrap();
        assert_ne!(header_fingerprint(dir).unwrap(), first);
    }
}
