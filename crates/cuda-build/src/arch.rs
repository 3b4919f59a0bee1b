//! GPU arch specs: one grammar for the config file, `KILN_CUDA_ARCHS` and
//! `--arch`, resolved against what a toolkit supports into the list of SASS and
//! PTX targets a fat binary carries.
//!
//! Accepted items (lists separated by `,` or `;`):
//! - `sm_86`, `86`, `8.6`: SASS for that arch (plus implicit PTX, see below);
//! - `compute_90`, `90-virtual`: PTX for that virtual arch;
//! - `90-real`: SASS only (CMake's grammar);
//! - `sm_90+PTX`, `9.0+PTX`: SASS and PTX (PyTorch's grammar);
//! - `sm_90a`, `sm_100f`: arch-specific / family-specific targets, only when
//!   written (an `a` or `f` suffix is never added on its own);
//! - `native`: the archs of the GPUs on this machine (probed only when asked);
//! - `all-major`: every `sm_X0` the toolkit supports.
//!
//! Implicit PTX: when no item asks for PTX explicitly (`compute_*`,
//! `*-virtual`, `*+PTX`), PTX for the highest plain arch among the items
//! written without `-real` is added, so newer GPUs can JIT it. Write `-real` on
//! every item for SASS only.

use std::collections::BTreeSet;
use std::fmt;

mod dropped;

/// The forms an arch spec accepts, for error messages.
pub(crate) const ACCEPTED_FORMS: &str =
    "sm_86, 86, 8.6, compute_90, 90-real, 90-virtual, sm_90+PTX, \
sm_90a, native, all-major (lists separated by ',' or ';')";

/// Architecture variants: portable, arch-specific (`a`) or family-specific (`f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// `sm_90`: runs on this arch and (as PTX) newer ones.
    Portable,
    /// `sm_90a`: arch-specific features; runs on exactly this arch.
    ArchSpecific,
    /// `sm_100f`: family-specific features; runs on this family.
    Family,
}

/// A GPU architecture, `major.minor` with a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch {
    /// Compute capability major version.
    pub major: u32,
    /// Compute capability minor version (one digit).
    pub minor: u32,
    /// Portable, `a` or `f`.
    pub variant: Variant,
}

impl Arch {
    /// A portable arch.
    pub(crate) const fn new(major: u32, minor: u32) -> Self {
        Self {
            major,
            minor,
            variant: Variant::Portable,
        }
    }

    /// `major * 10 + minor`: `90` for sm_90.
    pub(crate) const fn number(self) -> u32 {
        self.major * 10 + self.minor
    }

    /// The same arch without an `a` / `f` suffix.
    pub(crate) const fn portable(self) -> Self {
        Self::new(self.major, self.minor)
    }

    fn suffix(self) -> &'static str {
        match self.variant {
            Variant::Portable => "",
            Variant::ArchSpecific => "a",
            Variant::Family => "f",
        }
    }

    /// `sm_90a`.
    pub fn sm_name(self) -> String {
        format!("sm_{}{}", self.number(), self.suffix())
    }

    /// `compute_90a`.
    pub fn compute_name(self) -> String {
        format!("compute_{}{}", self.number(), self.suffix())
    }

    /// Parses `sm_90`, `compute_90a` or `90` as nvcc and cuobjdump print them.
    pub(crate) fn from_nvcc_name(text: &str) -> Option<Self> {
        let body = text
            .strip_prefix("sm_")
            .or_else(|| text.strip_prefix("compute_"))
            .unwrap_or(text);
        parse_arch_body(body)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sm_name())
    }
}

/// What one item of a spec asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// `sm_86`, `86`, `8.6`: SASS, eligible for the implicit PTX.
    Plain(Arch),
    /// `86-real`: SASS only.
    Real(Arch),
    /// `compute_86`, `86-virtual`: PTX only.
    Virtual(Arch),
    /// `sm_86+PTX`: SASS and PTX.
    RealAndPtx(Arch),
    /// `native`.
    Native,
    /// `all-major`.
    AllMajor,
}

/// A parsed arch spec, not yet checked against a toolkit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchSpec {
    text: String,
    items: Vec<(String, Item)>,
}

/// Why an arch spec was refused. Its `Display` is one line that names the bad
/// item, where it came from, and the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArchError {
    /// An item that is not an arch in any accepted form.
    #[error(
        "invalid CUDA arch `{item}` in {origin}: not an arch; accepted forms: {ACCEPTED_FORMS}"
    )]
    Syntax {
        /// The offending item, as written.
        item: String,
        /// Where the spec came from (`--arch`, `KILN_CUDA_ARCHS`, a file).
        origin: String,
    },
    /// A well-formed arch the toolkit cannot compile for.
    #[error(
        "unsupported CUDA arch `{item}` in {origin}: {dropped}CUDA {toolkit} supports \
         {supported}; accepted forms: {ACCEPTED_FORMS}"
    )]
    Unsupported {
        /// The offending item, as written.
        item: String,
        /// Where the spec came from.
        origin: String,
        /// The toolkit version it was checked against (`13.0`).
        toolkit: String,
        /// What that toolkit supports (`sm_75 sm_80 ...`).
        supported: String,
        /// Which release dropped or renamed it (`CUDA 13.0 dropped Volta
        /// (...); `), or empty.
        dropped: &'static str,
    },
    /// The spec has no items.
    #[error("empty CUDA arch list in {origin}; accepted forms: {ACCEPTED_FORMS}")]
    Empty {
        /// Where the spec came from.
        origin: String,
    },
    /// `native` was asked for and no GPU could be probed.
    #[error(
        "CUDA arch `native` in {origin} needs a GPU on this machine ({reason}); \
         name the archs instead, e.g. sm_86"
    )]
    NativeUnavailable {
        /// Where the spec came from.
        origin: String,
        /// What the probe said.
        reason: String,
    },
}

impl ArchSpec {
    /// Parses a spec. `origin` names where it came from, for errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ArchError> {
        let mut items = Vec::new();
        for raw in text.split([',', ';']) {
            let item = raw.trim();
            if item.is_empty() {
                continue;
            }
            let parsed = parse_item(item).ok_or_else(|| ArchError::Syntax {
                item: item.to_string(),
                origin: origin.to_string(),
            })?;
            items.push((item.to_string(), parsed));
        }
        if items.is_empty() {
            return Err(ArchError::Empty {
                origin: origin.to_string(),
            });
        }
        Ok(Self {
            text: text.trim().to_string(),
            items,
        })
    }

    /// Every arch the spec names, once each, lowest first (none for
    /// `native`, `all-major`): codegen reads a module's sources at each, so
    /// a kernel behind `#if __CUDA_ARCH__ >= 890` is declared.
    #[cfg(feature = "codegen")]
    pub(crate) fn named(&self) -> Vec<Arch> {
        let mut archs: Vec<Arch> = (self.items.iter())
            .filter_map(|(_, item)| match item {
                Item::Plain(a) | Item::Real(a) | Item::Virtual(a) | Item::RealAndPtx(a) => Some(*a),
                Item::Native | Item::AllMajor => None,
            })
            .collect();
        archs.sort_by_key(|a| (a.number(), a.variant));
        archs.dedup();
        archs
    }

    /// The spec as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether resolving needs a GPU probe (`native`).
    pub fn needs_native_probe(&self) -> bool {
        self.items.iter().any(|(_, item)| *item == Item::Native)
    }

    /// Resolves the spec against what a toolkit supports. `native` is called
    /// only when the spec contains `native`.
    pub fn resolve(
        &self,
        supported: &SupportedArchs,
        origin: &str,
        native: impl FnOnce() -> Result<Vec<Arch>, String>,
    ) -> Result<ArchList, ArchError> {
        let mut native = Some(native);
        let mut sass = BTreeSet::new();
        let mut ptx = BTreeSet::new();
        let mut implicit_ptx_from: Option<Arch> = None;
        let mut explicit_ptx = false;
        for (written, item) in &self.items {
            let check = |arch: Arch, as_ptx: bool| {
                if supported.allows(arch, as_ptx) {
                    Ok(arch)
                } else {
                    Err(ArchError::Unsupported {
                        item: written.clone(),
                        origin: origin.to_string(),
                        toolkit: supported.toolkit.clone(),
                        supported: supported.describe(),
                        dropped: dropped::note(arch, &supported.toolkit),
                    })
                }
            };
            let mut plain = |arch: Arch, sass: &mut BTreeSet<Arch>| -> Result<(), ArchError> {
                sass.insert(check(arch, false)?);
                if arch.variant == Variant::Portable {
                    implicit_ptx_from = implicit_ptx_from.max(Some(arch));
                }
                Ok(())
            };
            match *item {
                Item::Plain(arch) => plain(arch, &mut sass)?,
                Item::Real(arch) => {
                    sass.insert(check(arch, false)?);
                }
                Item::Virtual(arch) => {
                    ptx.insert(check(arch, true)?);
                    explicit_ptx = true;
                }
                Item::RealAndPtx(arch) => {
                    sass.insert(check(arch, false)?);
                    ptx.insert(check(arch, true)?);
                    explicit_ptx = true;
                }
                Item::AllMajor => {
                    for arch in supported.sass.iter().filter(|a| a.minor == 0) {
                        plain(*arch, &mut sass)?;
                    }
                }
                Item::Native => {
                    let probe = native.take().map(|probe| probe()).unwrap_or(Ok(Vec::new()));
                    let archs = probe.map_err(|reason| ArchError::NativeUnavailable {
                        origin: origin.to_string(),
                        reason,
                    })?;
                    if archs.is_empty() {
                        return Err(ArchError::NativeUnavailable {
                            origin: origin.to_string(),
                            reason: "no GPU found".to_string(),
                        });
                    }
                    for arch in archs {
                        plain(arch, &mut sass)?;
                    }
                }
            }
        }
        if !explicit_ptx {
            if let Some(arch) = implicit_ptx_from {
                ptx.insert(arch.portable());
            }
        }
        Ok(ArchList {
            sass: sass.into_iter().collect(),
            ptx: ptx.into_iter().collect(),
        })
    }
}

fn parse_item(item: &str) -> Option<Item> {
    // Every accepted form is ASCII; slicing below relies on it.
    if !item.is_ascii() {
        return None;
    }
    match item.to_ascii_lowercase().as_str() {
        "native" => return Some(Item::Native),
        "all-major" => return Some(Item::AllMajor),
        _ => {}
    }
    let (body, plus_ptx) = match item.len().checked_sub(4).map(|i| item.split_at(i)) {
        Some((body, suffix)) if suffix.eq_ignore_ascii_case("+ptx") => (body, true),
        _ => (item, false),
    };
    let (body, real, virt) = if let Some(body) = body.strip_suffix("-real") {
        (body, true, false)
    } else if let Some(body) = body.strip_suffix("-virtual") {
        (body, false, true)
    } else {
        (body, false, false)
    };
    if plus_ptx && (real || virt) {
        return None;
    }
    if let Some(rest) = body.strip_prefix("compute_") {
        let arch = parse_arch_body(rest)?;
        return (!real && !plus_ptx).then_some(Item::Virtual(arch));
    }
    let arch = parse_arch_body(body.strip_prefix("sm_").unwrap_or(body))?;
    Some(match (real, virt, plus_ptx) {
        (true, _, _) => Item::Real(arch),
        (_, true, _) => Item::Virtual(arch),
        (_, _, true) => Item::RealAndPtx(arch),
        _ => Item::Plain(arch),
    })
}

/// `90`, `90a`, `100f`, `8.6`, `9.0a` -> an arch.
fn parse_arch_body(body: &str) -> Option<Arch> {
    if !body.is_ascii() {
        return None;
    }
    let (digits, variant) = match body.as_bytes().last()? {
        b'a' => (&body[..body.len() - 1], Variant::ArchSpecific),
        b'f' => (&body[..body.len() - 1], Variant::Family),
        _ => (body, Variant::Portable),
    };
    let (major, minor) = match digits.split_once('.') {
        Some((major, minor)) => (major, minor),
        None if digits.len() >= 2 => digits.split_at(digits.len() - 1),
        None => return None,
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(major) || !all_digits(minor) || minor.len() != 1 || major.len() > 2 {
        return None;
    }
    let major: u32 = major.parse().ok()?;
    let minor: u32 = minor.parse().ok()?;
    (major > 0).then_some(Arch {
        major,
        minor,
        variant,
    })
}

/// The archs a toolkit can compile for (`nvcc --list-gpu-code` and
/// `--list-gpu-arch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedArchs {
    /// Toolkit version these came from (`13.0`), for messages.
    pub toolkit: String,
    /// Real archs (SASS), portable variants only.
    pub sass: Vec<Arch>,
    /// Virtual archs (PTX), portable variants only.
    pub ptx: Vec<Arch>,
}

impl SupportedArchs {
    /// What CUDA 13.0's nvcc lists; used when no toolkit is at hand to ask, so
    /// that a spec is still checked (a CPU-only build with `--arch sm_12`
    /// fails like any other).
    pub fn cuda_13_0_builtin() -> Self {
        let archs: Vec<Arch> = [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121]
            .into_iter()
            .map(|n| Arch::new(n / 10, n % 10))
            .collect();
        Self {
            toolkit: "13.0 (built-in table; no toolkit found)".into(),
            sass: archs.clone(),
            ptx: archs,
        }
    }

    /// Parses the output of `nvcc --list-gpu-code` and `nvcc --list-gpu-arch`.
    pub fn from_nvcc_lists(toolkit: &str, gpu_code: &str, gpu_arch: &str) -> Self {
        let parse = |text: &str, prefix: &str| -> Vec<Arch> {
            let mut archs: Vec<Arch> = text
                .split_whitespace()
                .filter_map(|word| word.strip_prefix(prefix))
                .filter_map(parse_arch_body)
                .filter(|arch| arch.variant == Variant::Portable)
                .collect();
            archs.sort();
            archs.dedup();
            archs
        };
        Self {
            toolkit: toolkit.to_string(),
            sass: parse(gpu_code, "sm_"),
            ptx: parse(gpu_arch, "compute_"),
        }
    }

    /// Whether `arch` can be compiled, as SASS or (`as_ptx`) as PTX. `a`
    /// variants exist from sm_90 on, `f` variants from sm_100 on, for archs
    /// whose portable variant is supported.
    pub(crate) fn allows(&self, arch: Arch, as_ptx: bool) -> bool {
        let list = if as_ptx { &self.ptx } else { &self.sass };
        let base_ok = list.contains(&arch.portable());
        match arch.variant {
            Variant::Portable => base_ok,
            Variant::ArchSpecific => base_ok && arch.major >= 9,
            Variant::Family => base_ok && arch.major >= 10,
        }
    }

    /// `sm_75 sm_80 ...`, for messages.
    pub fn describe(&self) -> String {
        self.sass
            .iter()
            .map(|a| a.sm_name())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The resolved targets of a fat binary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ArchList {
    /// Real archs: SASS inside.
    pub sass: Vec<Arch>,
    /// Virtual archs: PTX inside.
    pub ptx: Vec<Arch>,
}

impl ArchList {
    /// nvcc's `-gencode` flags, one per target.
    pub(crate) fn gencode_flags(&self) -> Vec<String> {
        let sass = self
            .sass
            .iter()
            .map(|a| format!("-gencode=arch={},code={}", a.compute_name(), a.sm_name()));
        let ptx = self.ptx.iter().map(|a| {
            format!(
                "-gencode=arch={},code={}",
                a.compute_name(),
                a.compute_name()
            )
        });
        sass.chain(ptx).collect()
    }

    /// `sm_80,sm_90+compute_90`: a short description, for the tests.
    #[cfg(test)]
    fn describe(&self) -> String {
        let sass: Vec<String> = self.sass.iter().map(|a| a.sm_name()).collect();
        let ptx: Vec<String> = self.ptx.iter().map(|a| a.compute_name()).collect();
        match (sass.is_empty(), ptx.is_empty()) {
            (_, true) => sass.join(","),
            (true, false) => ptx.join(","),
            (false, false) => format!("{}+{}", sass.join(","), ptx.join(",")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(spec: &str) -> Result<String, String> {
        let supported = SupportedArchs::cuda_13_0_builtin();
        ArchSpec::parse(spec, "test")
            .and_then(|s| s.resolve(&supported, "test", || Ok(vec![Arch::new(8, 9)])))
            .map(|list| list.describe())
            .map_err(|e| e.to_string())
    }

    #[track_caller]
    fn check(spec: &str, expected: &str) {
        assert_eq!(resolve(spec).as_deref(), Ok(expected), "spec {spec:?}");
    }

    /// Found by tests/properties.rs: `+PTX` was cut off by byte count.
    #[test]
    fn non_ascii_items_are_refused_not_sliced_mid_char() {
        for text in ["k🡔ਫ਼", "é", "sm_9é", "🡔+PTX"] {
            let err = ArchSpec::parse(text, "test").unwrap_err();
            assert!(matches!(err, ArchError::Syntax { .. }), "{text}: {err}");
        }
    }

    #[test]
    fn plain_forms_are_one_arch_with_implicit_ptx() {
        for spec in ["sm_86", "86", "8.6", " sm_86 "] {
            check(spec, "sm_86+compute_86");
        }
    }

    #[test]
    fn lists_take_ptx_for_the_highest_plain_arch() {
        check("sm_80,sm_90", "sm_80,sm_90+compute_90");
        check("sm_90;sm_80", "sm_80,sm_90+compute_90");
        check("80,90-real", "sm_80,sm_90+compute_80");
    }

    #[test]
    fn cmake_forms() {
        check("90-real", "sm_90");
        check("80-real,90-real", "sm_80,sm_90");
        check("90-virtual", "compute_90");
        check("80-real,90-virtual", "sm_80+compute_90");
    }

    #[test]
    fn explicit_ptx_replaces_implicit() {
        check("sm_80,compute_80", "sm_80+compute_80");
        check("sm_80,sm_90+PTX", "sm_80,sm_90+compute_90");
        check("sm_80+ptx,sm_90", "sm_80,sm_90+compute_80");
        check("8.6+PTX", "sm_86+compute_86");
    }

    #[test]
    fn arch_specific_only_when_written() {
        check("sm_90a", "sm_90a");
        check("sm_80,sm_90a", "sm_80,sm_90a+compute_80");
        check("sm_90,sm_90a", "sm_90,sm_90a+compute_90");
        check("sm_100f", "sm_100f");
        check("compute_90a", "compute_90a");
    }

    #[test]
    fn native_and_all_major() {
        check("native", "sm_89+compute_89");
        check("all-major", "sm_80,sm_90,sm_100,sm_110,sm_120+compute_120");
    }

    #[test]
    fn native_is_probed_only_when_asked() {
        let supported = SupportedArchs::cuda_13_0_builtin();
        let spec = ArchSpec::parse("sm_90", "test").unwrap();
        let list = spec
            .resolve(&supported, "test", || panic!("probed"))
            .unwrap();
        assert_eq!(list.describe(), "sm_90+compute_90");
    }

    #[test]
    fn errors_name_the_item_and_the_forms() {
        let err = resolve("sm_80,sm_12").unwrap_err();
        assert!(
            err.starts_with("unsupported CUDA arch `sm_12` in test: CUDA 13.0"),
            "{err}"
        );
        assert!(err.contains("accepted forms: sm_86, 86, 8.6"), "{err}");
        assert!(err.contains("sm_75 sm_80"), "{err}");
        assert!(!err.contains('\n'));
        for bad in [
            "sm_8",
            "foo",
            "sm_86b",
            "compute_90-real",
            "90-real+PTX",
            "1234",
            "sm_",
            "8.10",
        ] {
            let err = resolve(bad).unwrap_err();
            assert!(
                err.starts_with(&format!("invalid CUDA arch `{bad}` in test")),
                "{err}"
            );
        }
        assert!(resolve(" , ;")
            .unwrap_err()
            .starts_with("empty CUDA arch list in test"));
        assert!(resolve("sm_80a")
            .unwrap_err()
            .starts_with("unsupported CUDA arch `sm_80a`"));
        assert!(resolve("sm_90f")
            .unwrap_err()
            .starts_with("unsupported CUDA arch `sm_90f`"));
    }

    #[test]
    fn native_without_gpu_is_an_error() {
        let supported = SupportedArchs::cuda_13_0_builtin();
        let spec = ArchSpec::parse("native", "--arch").unwrap();
        let err = spec.resolve(&supported, "--arch", || Err("nvidia-smi not found".into()));
        assert_eq!(
            err.unwrap_err().to_string(),
            "CUDA arch `native` in --arch needs a GPU on this machine (nvidia-smi not found); \
             name the archs instead, e.g. sm_86"
        );
    }

    #[test]
    fn nvcc_lists_parse() {
        let s = SupportedArchs::from_nvcc_lists(
            "13.0",
            "sm_75\nsm_80\nsm_90\n",
            "compute_75 compute_90",
        );
        assert_eq!(s.describe(), "sm_75 sm_80 sm_90");
        assert!(s.allows(Arch::new(9, 0), true));
        assert!(!s.allows(Arch::new(8, 0), true));
    }

    #[test]
    fn gencode_flags() {
        let list = ArchSpec::parse("sm_80,sm_90a,sm_90", "t")
            .unwrap()
            .resolve(&SupportedArchs::cuda_13_0_builtin(), "t", || Ok(vec![]))
            .unwrap();
        assert_eq!(
            list.gencode_flags(),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90a,code=sm_90a",
                "-gencode=arch=compute_90,code=compute_90",
            ]
        );
    }
}
