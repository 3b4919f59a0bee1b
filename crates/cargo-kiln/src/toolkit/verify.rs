//! Whether an install is whole: every file the pinned wheels promise (their
//! `*.dist-info/RECORD`, with sizes) is there, and the files a build needs are
//! in any toolkit discovery finds. Used by `toolkit install` (reinstall when
//! damaged), `cargo kiln toolkit` and `doctor` (report it).

use std::fmt;
use std::path::{Path, PathBuf};

use super::pins::{normalise_name, split_pin, Pins};
use super::{Record, RECORD_FILE};

/// Files a build runs or includes, relative to a toolkit root, and who needs
/// them. nvcc runs without some of them and fails later, naming a tool the
/// user never called (`cicc: not found`), so they are checked up front.
pub const ESSENTIAL: &[(&str, &str)] = &[
    ("bin/nvcc", "the compiler driver"),
    ("nvvm/bin/cicc", "nvcc's CUDA front end"),
    ("bin/ptxas", "nvcc's PTX assembler"),
    ("bin/fatbinary", "nvcc's fat-binary packer"),
    ("bin/cudafe++", "nvcc's host-code splitter"),
    ("include/cuda_runtime.h", "every kernel's includes"),
    ("bin/cuobjdump", "`ptx-audit` and `build`'s report"),
];

/// The [`ESSENTIAL`] files missing under `root`, in that order.
pub fn missing_essentials(root: &Path) -> Vec<&'static str> {
    ESSENTIAL
        .iter()
        .map(|(file, _)| *file)
        .filter(|file| !root.join(file).is_file())
        .collect()
}

/// Why an install in DIR is not whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// No DIR at all.
    Absent,
    /// DIR has no readable record: not an install, or an interrupted one.
    NoRecord,
    /// The record's pins are not `cargo-kiln's toolkit.toml`'s.
    PinsDiffer,
    /// A pinned wheel's RECORD is missing: the wheel is not installed.
    NoWheel { requirement: String },
    /// Files a wheel installed are missing or have another size (path
    /// relative to DIR, the requirement that ships it).
    Files {
        broken: Vec<(String, String)>,
        total: usize,
    },
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Absent => f.write_str("nothing installed"),
            Damage::NoRecord => write!(f, "no readable {RECORD_FILE}"),
            Damage::PinsDiffer => {
                f.write_str("installed pins differ from cargo-kiln's toolkit.toml")
            }
            Damage::NoWheel { requirement } => {
                write!(f, "damaged: {requirement} is not installed (no RECORD)")
            }
            Damage::Files { broken, total } => {
                let shown: Vec<String> = broken
                    .iter()
                    .take(3)
                    .map(|(file, req)| format!("{file} ({req})"))
                    .collect();
                let more = broken.len().saturating_sub(shown.len());
                write!(
                    f,
                    "damaged: {} of the {total} files the pins promise missing or changed: {}{}",
                    broken.len(),
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            }
        }
    }
}

/// Checks that DIR holds exactly `pins`, whole. `Ok` gives the number of
/// files checked.
pub fn verify(dir: &Path, pins: &Pins) -> Result<usize, Damage> {
    if !dir.exists() {
        return Err(Damage::Absent);
    }
    let record = Record::read(dir).ok_or(Damage::NoRecord)?;
    if record.cuda != pins.cuda || record.libclang != pins.libclang {
        return Err(Damage::PinsDiffer);
    }
    let site = site_packages(dir).ok_or(Damage::Files {
        broken: vec![("venv/lib/python*/site-packages".into(), "the venv".into())],
        total: 1,
    })?;
    let prefix = site.strip_prefix(dir).unwrap_or(&site).to_path_buf();
    let mut broken = Vec::new();
    let mut total = 0;
    for requirement in pins.requirements() {
        let Some(entries) = wheel_files(&site, requirement) else {
            return Err(Damage::NoWheel {
                requirement: requirement.to_string(),
            });
        };
        for (file, size) in entries {
            total += 1;
            let actual = std::fs::metadata(site.join(&file)).map(|m| m.len());
            let whole = match (actual, size) {
                (Ok(len), Some(size)) => len == size,
                (Ok(_), None) => true,
                (Err(_), _) => false,
            };
            if !whole {
                broken.push((shown(&prefix.join(&file), &record), requirement.to_string()));
            }
        }
    }
    // The links DIR/cuda and DIR/libclang are the install's, not a wheel's.
    for link in [super::CUDA_LINK, super::LIBCLANG_LINK] {
        total += 1;
        if !dir.join(link).is_dir() {
            broken.push((link.to_string(), "the install".to_string()));
        }
    }
    if broken.is_empty() {
        Ok(total)
    } else {
        Err(Damage::Files { broken, total })
    }
}

/// `file` (relative to DIR) as the user reaches it: through DIR's `cuda`
/// link when it is under the toolkit root.
fn shown(file: &Path, record: &Record) -> String {
    match file.strip_prefix(&record.installed.toolkit_root) {
        Ok(rest) => Path::new(super::CUDA_LINK).join(rest).display().to_string(),
        Err(_) => file.display().to_string(),
    }
}

/// `DIR/venv/lib/python3.X/site-packages`, when there is exactly one.
pub(crate) fn site_packages(dir: &Path) -> Option<PathBuf> {
    let lib = dir.join("venv").join("lib");
    let mut found: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    (found.len() == 1).then(|| found.remove(0))
}

/// The files (relative to site-packages) and sizes the installed wheel of
/// `requirement` lists in its RECORD; `None` when the wheel is not there.
pub(super) fn wheel_files(site: &Path, requirement: &str) -> Option<Vec<(String, Option<u64>)>> {
    let (name, version) = split_pin(requirement).ok()?;
    let dist_info = std::fs::read_dir(site)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|d| {
            d.strip_suffix(".dist-info")
                .and_then(|stem| stem.rsplit_once('-'))
                .is_some_and(|(n, v)| normalise_name(n) == name && v == version)
        })?;
    let text = std::fs::read_to_string(site.join(&dist_info).join("RECORD")).ok()?;
    Some(text.lines().filter_map(record_line).collect())
}

/// One RECORD line, `path,hash,size` (the path may hold commas; the hash and
/// size never do); `None` for a blank line.
fn record_line(line: &str) -> Option<(String, Option<u64>)> {
    let mut fields = line.rsplitn(3, ',');
    let size = fields.next()?;
    let _hash = fields.next()?;
    let path = fields.next()?.trim_matches('"');
    (!path.is_empty()).then(|| (path.to_string(), size.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::super::pins::tests::PINS;
    use super::super::{CudaPins, Installed};
    use super::*;

    /// A fake install of `PINS` in a temp dir: two CUDA wheels and
    /// libclang, each with a RECORD, the links and the record.
    fn fake_install() -> (tempfile::TempDir, Pins) {
        let pins = Pins::parse(PINS).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let site = dir.join("venv/lib/python3.11/site-packages");
        let wheels: [(&str, &[(&str, &str)]); 3] = [
            (
                "nvidia_cuda_nvcc-13.0.88",
                &[
                    ("nvidia/cu13/bin/nvcc", "#!/bin/sh\n"),
                    ("nvidia/cu13/include/crt/host_config.h", "//\n"),
                ],
            ),
            (
                "nvidia_nvvm-13.0.88",
                &[("nvidia/cu13/nvvm/bin/cicc", "cicc")],
            ),
            ("libclang-18.1.1", &[("clang/native/libclang.so", "elf")]),
        ];
        for (wheel, files) in wheels {
            let mut record = String::new();
            for (file, body) in files {
                let path = site.join(file);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, body).unwrap();
                record.push_str(&format!("{file},sha256=x,{}\n", body.len()));
            }
            record.push_str(&format!("{wheel}.dist-info/RECORD,,\n"));
            let info = site.join(format!("{wheel}.dist-info"));
            std::fs::create_dir_all(&info).unwrap();
            std::fs::write(info.join("RECORD"), record).unwrap();
        }
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, dir.join(name)).unwrap();
        };
        link("venv/lib/python3.11/site-packages/nvidia/cu13", "cuda");
        link("venv/lib/python3.11/site-packages/clang/native", "libclang");
        let record = Record {
            cuda: CudaPins {
                version: pins.cuda.version.clone(),
                packages: pins.cuda.packages.clone(),
            },
            libclang: pins.libclang.clone(),
            installed: Installed {
                python: "3.11.7".into(),
                toolkit_root: "venv/lib/python3.11/site-packages/nvidia/cu13".into(),
                nvcc: "release 13.0".into(),
                freeze: vec![],
            },
        };
        std::fs::write(dir.join(RECORD_FILE), record.to_toml().unwrap()).unwrap();
        (tmp, pins)
    }

    #[test]
    fn a_whole_install_verifies() {
        let (tmp, pins) = fake_install();
        // Seven RECORD lines (each RECORD lists itself, with no size) and
        // the two links.
        assert_eq!(verify(tmp.path(), &pins), Ok(9));
    }

    #[test]
    fn a_deleted_nvvm_is_damage_naming_the_file_and_its_wheel() {
        let (tmp, pins) = fake_install();
        let cu13 = tmp.path().join("cuda");
        std::fs::remove_dir_all(cu13.join("nvvm")).unwrap();
        let damage = verify(tmp.path(), &pins).unwrap_err();
        assert_eq!(
            damage.to_string(),
            "damaged: 1 of the 9 files the pins promise missing or changed: \
             cuda/nvvm/bin/cicc (nvidia-nvvm==13.0.88)"
        );
        assert_eq!(
            missing_essentials(&cu13)[..2],
            ["nvvm/bin/cicc", "bin/ptxas"]
        );
    }

    #[test]
    fn a_truncated_file_is_damage() {
        let (tmp, pins) = fake_install();
        std::fs::write(tmp.path().join("libclang/libclang.so"), "").unwrap();
        let Err(Damage::Files { broken, .. }) = verify(tmp.path(), &pins) else {
            panic!("a truncated libclang.so verified");
        };
        assert_eq!(broken[0].1, "libclang==18.1.1");
    }

    #[test]
    fn a_missing_wheel_a_missing_link_and_other_pins_are_damage() {
        let (tmp, pins) = fake_install();
        let site = site_packages(tmp.path()).unwrap();
        std::fs::remove_file(tmp.path().join("libclang")).unwrap();
        let Err(Damage::Files { broken, .. }) = verify(tmp.path(), &pins) else {
            panic!("a missing link verified");
        };
        assert_eq!(broken, [("libclang".into(), "the install".into())]);
        std::fs::remove_dir_all(site.join("nvidia_nvvm-13.0.88.dist-info")).unwrap();
        assert_eq!(
            verify(tmp.path(), &pins),
            Err(Damage::NoWheel {
                requirement: "nvidia-nvvm==13.0.88".into()
            })
        );
        let other = Pins::parse(&PINS.replace("18.1.1", "19.1.0")).unwrap();
        assert_eq!(verify(tmp.path(), &other), Err(Damage::PinsDiffer));
        std::fs::remove_file(tmp.path().join(RECORD_FILE)).unwrap();
        assert_eq!(verify(tmp.path(), &pins), Err(Damage::NoRecord));
        assert_eq!(
            verify(&tmp.path().join("absent"), &pins),
            Err(Damage::Absent)
        );
    }

    #[test]
    fn record_lines_split_from_the_right() {
        assert_eq!(
            record_line("a/b,c.h,sha256=x,12"),
            Some(("a/b,c.h".into(), Some(12)))
        );
        assert_eq!(
            record_line("x.dist-info/RECORD,,"),
            Some(("x.dist-info/RECORD".into(), None))
        );
        assert_eq!(record_line(""), None);
    }
}
