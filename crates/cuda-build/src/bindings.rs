//! The committed-bindings check that needs no libclang: generated files carry
//! a fingerprint of the headers they came from (and, generated with
//! sources, of what every source file read declares, each listed by its
//! path relative to the include dir: its tokens, with comments, whitespace
//! and plain function bodies left out, so a comment or a kernel
//! body edited leaves it as it was), and a test compares it with the files
//! on disk.

mod declared;

use std::path::{Path, PathBuf};

use crate::error::{io, Error};
use crate::regular::Links;

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
        let text = read_input(path)?;
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

/// What a sources fingerprint starts with: one made from the files' bytes
/// (an older cuda-build) has no such start.
const DECLARED_MARK: &str = "declared-";

/// FNV-1a (64-bit) over each source file's path (relative to `include_dir`,
/// as listed) and what it declares (`declared.rs`: comments, whitespace and
/// plain function bodies left out; a `kiln.toml` by its bytes).
pub fn sources_fingerprint(include_dir: &Path, files: &[String]) -> Result<String, Error> {
    let mut hash = Fnv::new();
    for file in files {
        let path = include_dir.join(file);
        if path.extension().is_some_and(|e| e == "toml") {
            hash.feed_file(file, &path)?;
            continue;
        }
        let bytes = read_input(&path)?;
        hash.feed(file.as_bytes());
        hash.feed(&[0]);
        hash.feed(declared::declared(&String::from_utf8_lossy(&bytes)).as_bytes());
        hash.feed(&[0]);
    }
    Ok(format!("{DECLARED_MARK}{:016x}", hash.0))
}

/// The largest header, source or bindings file read (64 MiB).
const INPUT_BOUND: u64 = 64 << 20;

/// A header or source the bindings were made from: a regular file (or a
/// link to one), never a FIFO waited on.
fn read_input(path: &Path) -> Result<Vec<u8>, Error> {
    crate::regular::read_bytes(path, INPUT_BOUND, Links::Follow)?.ok_or_else(|| Error::Io {
        path: path.to_path_buf(),
        source: std::io::ErrorKind::NotFound.into(),
    })
}

/// Checks that a committed generated file was made from the headers as they
/// are now. The error says what to run.
pub fn check_committed(generated: &Path, include_dir: &Path, command: &str) -> Result<(), String> {
    let text = match crate::regular::read_text(generated, INPUT_BOUND, Links::Follow) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(format!(
                "cannot read {}: it is not there; run `{command}`",
                generated.display()
            ))
        }
        Err(e) => return Err(format!("{e}; run `{command}`")),
    };
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
    if !recorded.starts_with(DECLARED_MARK) {
        return Err(format!(
            "{} is stale: an older cuda-build fingerprinted its sources byte by byte; run `{command}` and commit the result",
            generated.display()
        ));
    }
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

    /// The build's check (`check_bindings`) with a FIFO for the committed
    /// bindings, or for a header: one line naming it, never a wait.
    #[cfg(unix)]
    #[test]
    fn a_fifo_for_the_bindings_or_a_header_is_refused_not_waited_on() {
        let tmp = tempfile::tempdir().unwrap();
        let include = tmp.path().join("include");
        std::fs::create_dir(&include).unwrap();
        std::fs::write(include.join("a.h"), "struct A { int x; };\n").unwrap();
        let generated = tmp.path().join("bindings.rs");
        let fifo = crate::regular::mkfifo;
        fifo(&generated);
        let err = check_committed(&generated, &include, "regen").unwrap_err();
        assert!(
            err.contains("is a FIFO, not a regular file") && err.ends_with("run `regen`"),
            "{err}"
        );
        std::fs::remove_file(&generated).unwrap();
        let fingerprint = header_fingerprint(&include).unwrap();
        std::fs::write(&generated, format!("{FINGERPRINT_PREFIX}{fingerprint}\n")).unwrap();
        assert_eq!(check_committed(&generated, &include, "regen"), Ok(()));
        fifo(&include.join("b.h"));
        let err = check_committed(&generated, &include, "regen").unwrap_err();
        assert!(err.contains("b.h is a FIFO, not a regular file"), "{err}");
    }

    /// The regression of issue 42: a comment or a kernel body edited in a
    /// source made its bindings stale, failing the build until codegen ran.
    #[test]
    fn sources_fingerprint_follows_declarations_not_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let kernel = "extern \"C\" __global__ void k(float *x) { x[0] = 1.0f; }\n";
        std::fs::write(dir.join("k.cu"), kernel).unwrap();
        std::fs::write(dir.join("kiln.toml"), "archs = \"sm_80\"\n").unwrap();
        let files = ["k.cu".to_string(), "kiln.toml".to_string()];
        let first = sources_fingerprint(dir, &files).unwrap();
        std::fs::write(dir.join("gen.rs"), format!(
            "{FINGERPRINT_PREFIX}{}\n{SOURCES_PREFIX}{first}\n{SOURCE_PREFIX}k.cu\n{SOURCE_PREFIX}kiln.toml\n",
            header_fingerprint(dir).unwrap()
        )).unwrap();
        let check = || check_committed(&dir.join("gen.rs"), dir, "regen");
        assert_eq!(check(), Ok(()));
        std::fs::write(
            dir.join("k.cu"),
            format!("// a comment\n{}", kernel.replace("1.0f", "2.0f")),
        )
        .unwrap();
        assert_eq!(check(), Ok(()), "a comment and a body edit");
        std::fs::write(dir.join("k.cu"), kernel.replace("float *x", "double *x")).unwrap();
        assert!(
            check().unwrap_err().contains("is stale"),
            "a signature edit"
        );
        std::fs::write(dir.join("k.cu"), kernel).unwrap();
        std::fs::write(dir.join("kiln.toml"), "archs = \"sm_90\"\n").unwrap();
        assert!(check().is_err(), "kiln.toml by its bytes");
        std::fs::write(dir.join("kiln.toml"), "archs = \"sm_80\"\n").unwrap();
        let old = std::fs::read_to_string(dir.join("gen.rs"))
            .unwrap()
            .replace(&first, "0123456789abcdef");
        std::fs::write(dir.join("gen.rs"), old).unwrap();
        assert!(check().unwrap_err().contains("an older cuda-build"));
    }

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
