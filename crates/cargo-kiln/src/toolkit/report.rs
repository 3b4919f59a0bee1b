//! What `cargo kiln toolkit` prints: the install dir, the pins, what the
//! record says was installed and whether it is still whole, nvcc's release.

use std::path::Path;

use super::{nvcc_release, sibling, verify, Pins, Record, RECORD_FILE};

/// What `cargo kiln toolkit` prints: labelled lines, easy to add to.
#[derive(Debug, Default)]
pub(crate) struct Report {
    entries: Vec<(String, String)>,
}

impl Report {
    pub(crate) fn push(&mut self, label: &str, value: impl Into<String>) {
        self.entries.push((label.to_string(), value.into()));
    }

    pub(crate) fn render(&self) -> String {
        // Room for the longest label and its colon.
        let width = self
            .entries
            .iter()
            .map(|(l, _)| l.len() + 1)
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (label, value) in &self.entries {
            let mut lines = value.lines();
            let first = lines.next().unwrap_or("");
            out.push_str(&format!("{:width$}  {first}\n", format!("{label}:")));
            for line in lines {
                out.push_str(&format!("{:width$}  {line}\n", ""));
            }
        }
        out
    }
}

/// What is installed in `dir`, how it compares with the pins, and what
/// nvcc says.
pub(crate) fn report(dir: &Path) -> Report {
    let mut r = Report::default();
    let present = dir.join("cuda").join("bin").join("nvcc").is_file();
    r.push(
        "install dir",
        format!(
            "{} ({})",
            dir.display(),
            if present { "present" } else { "absent" }
        ),
    );
    let pins = Pins::pinned();
    match &pins {
        Ok(p) => r.push(
            "pinned",
            format!(
                "CUDA {} in cargo-kiln's toolkit.toml:\n{}",
                p.cuda.version,
                p.requirements().join("\n")
            ),
        ),
        Err(e) => r.push("pinned", format!("error: {e:#}")),
    }
    match Record::read(dir) {
        Some(record) => {
            let verdict = match &pins {
                Ok(p) => match verify(dir, p) {
                    Ok(files) => format!("matches the pins; all {files} files present"),
                    Err(damage) => {
                        format!("{damage}; run `cargo kiln toolkit install` to repair it")
                    }
                },
                Err(_) => "cannot compare".to_string(),
            };
            r.push(
                "installed",
                format!(
                    "CUDA {}, python {}; {verdict}",
                    record.cuda.version, record.installed.python
                ),
            );
            r.push("packages", record.installed.freeze.join("\n"));
        }
        None if dir.exists() => r.push(
            "installed",
            format!("no readable {RECORD_FILE}; run `cargo kiln toolkit install`"),
        ),
        None => r.push("installed", "nothing; run `cargo kiln toolkit install`"),
    }
    for suffix in ["partial", "old"] {
        if let Some(stale) = sibling(dir, suffix).filter(|p| p.exists()) {
            r.push(
                "leftover",
                format!(
                    "{} from an interrupted install; the next `cargo kiln toolkit install` removes it",
                    stale.display()
                ),
            );
        }
    }
    if present {
        let root = std::fs::read_link(dir.join("cuda"))
            .map(|t| format!(" -> {}", t.display()))
            .unwrap_or_default();
        r.push(
            "toolkit root",
            format!("{}{root}", dir.join("cuda").display()),
        );
        r.push(
            "nvcc",
            nvcc_release(&dir.join("cuda")).unwrap_or_else(|e| format!("error: {e:#}")),
        );
    }
    let libclang = dir.join("libclang").join("libclang.so");
    if libclang.is_file() {
        r.push("libclang", libclang.display().to_string());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_aligns_labels_and_continues_lines() {
        let mut r = Report::default();
        r.push("dir", "x");
        r.push("packages", "a==1\nb==2");
        assert_eq!(
            r.render(),
            "dir:       x\npackages:  a==1\n           b==2\n"
        );
    }
}
