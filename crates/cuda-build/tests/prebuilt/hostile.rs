//! The hostile folder: each case damages an exported folder (or the package
//! around it) one way and expects a refusal naming the file. Read-level
//! cases go through `cuda_build::prebuilt::read`; build-level cases through
//! the fixture's build with no toolkit, which must build CPU-only with one
//! warning, fail in one line under `FIXTURE_REQUIRE_CUDA=1`, and write
//! nothing outside OUT_DIR (the fixture's tree unchanged, no file where a
//! hostile output pointed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cuda_build::prebuilt::{self, Prebuilt};
use sha2::{Digest as _, Sha256};

use super::support::{
    assert_failure, assert_success, build_script_errors, build_script_warnings, installed_nvcc,
    Fixture, COMMON_CUH, MODULE_SOURCES,
};
use super::{no_toolkit, Exported};

/// One way to damage a folder, and what its refusal says.
pub(crate) struct Case {
    what: &'static str,
    damage: Box<dyn Fn(&Exported)>,
    says: String,
}

pub(crate) fn case(
    what: &'static str,
    says: impl Into<String>,
    damage: impl Fn(&Exported) + 'static,
) -> Case {
    Case {
        what,
        damage: Box::new(damage),
        says: says.into(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `prebuilt.toml`'s text for a body, sealed as export seals it: what a
/// hostile editor who knows the format writes.
pub(crate) fn seal(body: &str) -> String {
    format!(
        "sha256 = \"{}\"\n{body}",
        hex(&Sha256::digest(body.as_bytes()))
    )
}

/// Rewrites the manifest after `edit`, sealed.
pub(crate) fn reseal(e: &Exported, edit: impl FnOnce(&mut Prebuilt)) {
    let path = e.file(prebuilt::MANIFEST);
    let mut manifest = prebuilt::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(&path, manifest.to_toml().unwrap()).unwrap();
}

/// Records the folder's file `name` as it is now (size and hash), sealed.
pub(crate) fn rerecord(e: &Exported, name: &str) {
    let bytes = std::fs::read(e.file(name)).unwrap();
    reseal(e, |p| {
        let file = p.files.iter_mut().find(|f| f.path == Path::new(name));
        let file = file.expect("a recorded file");
        file.size_bytes = bytes.len() as u64;
        file.sha256 = hex(&Sha256::digest(&bytes));
    });
}

/// Points module `single`'s image (and its `[[files]]` entry) at `name`.
fn output_of_single(e: &Exported, name: &str) {
    reseal(e, |p| {
        let module = p.modules.iter_mut().find(|m| m.name == "single").unwrap();
        module.output = Some(PathBuf::from(name));
        let file = p.files.iter_mut();
        let file = file
            .into_iter()
            .find(|f| f.path == Path::new("single.fatbin"));
        file.unwrap().path = PathBuf::from(name);
    });
}

pub(crate) fn single(p: &mut Prebuilt) -> &mut cuda_build::manifest::ModuleEntry {
    p.modules.iter_mut().find(|m| m.name == "single").unwrap()
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let status = std::process::Command::new("mkfifo").arg(path).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "mkfifo {}",
        path.display()
    );
}

fn symlink(target: &Path, link: &Path) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path, len: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len).unwrap();
}

/// A file outside the fixture's crate, with `bytes`.
fn outside(e: &Exported, name: &str, bytes: &[u8]) -> PathBuf {
    let path = e.fixture.root_path(&format!("outside/{name}"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Where a hostile absolute output points: beside the crate.
fn absolute_victim(e: &Exported) -> PathBuf {
    e.fixture.root_path("victim-abs.fatbin")
}

/// The cases a build must refuse (each also refused by `read`, but the
/// input's symlink and the output's name, which only a build can check).
fn build_cases(e: &Exported) -> Vec<Case> {
    let image = |e: &Exported| e.file("single.fatbin");
    let size = std::fs::metadata(e.file("single.fatbin")).unwrap().len();
    let changed = "single.fatbin does not hold the bytes prebuilt.toml records for it";
    let absolute = absolute_victim(e).display().to_string();
    vec![
        case("a flipped byte", format!("{changed} (another SHA-256)"), move |e| {
            flip(&image(e), 100)
        }),
        case(
            "a truncated image",
            format!("{changed} ({} bytes, not {size})", size / 2),
            move |e| truncate(&image(e), size / 2),
        ),
        case(
            "an emptied image",
            format!("{changed} (0 bytes, not {size})"),
            move |e| truncate(&image(e), 0),
        ),
        case("another file in its place", changed, move |e| {
            std::fs::copy(e.fixture.path("Cargo.toml"), image(e)).unwrap();
        }),
        case(
            "a symlink out of the tree (to the same bytes)",
            "single.fatbin is a symlink, not a regular file",
            move |e| {
                let bytes = std::fs::read(image(e)).unwrap();
                symlink(&outside(e, "single.fatbin", &bytes), &image(e));
            },
        ),
        case(
            "another arch's image, its hash recorded",
            "single.fatbin is not what prebuilt.toml declares for module `single`: holds no SASS for sm_80",
            move |e| {
                std::fs::copy(e.file("only90.fatbin"), image(e)).unwrap();
                rerecord(e, "single.fatbin");
            },
        ),
        case(
            "an output of ../../../../victim.fatbin",
            "names the file `../../../../victim.fatbin`, which is not a file inside the folder",
            |e| output_of_single(e, "../../../../victim.fatbin"),
        ),
        case(
            "an absolute output",
            format!("names the file `{absolute}`, which is not a file inside the folder"),
            move |e| output_of_single(e, &absolute),
        ),
        case(
            "sm_999 in sass",
            "lists `sm_999` in sass, which is not a real CUDA arch (`sm_90`)",
            |e| reseal(e, |p| p.sass.push("sm_999".into())),
        ),
        case(
            "a FIFO in place of an image",
            "single.fatbin is a FIFO, not a regular file",
            move |e| mkfifo(&image(e)),
        ),
        case(
            "an input that is a symlink out of the package (to the same bytes)",
            format!("input {COMMON_CUH} leads outside"),
            |e| {
                let header = e.fixture.path(COMMON_CUH);
                let bytes = std::fs::read(&header).unwrap();
                symlink(&outside(e, "common.cuh", &bytes), &header);
            },
        ),
        case(
            "an image named otherwise than the build names it",
            "names `other.fatbin` as module `single`'s image, not `single.fatbin`",
            move |e| {
                std::fs::rename(image(e), e.file("other.fatbin")).unwrap();
                output_of_single(e, "other.fatbin");
            },
        ),
    ]
}

/// Every file and link under `root`, with its content's hash.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut found = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            let what = if kind.is_dir() {
                pending.push(path.clone());
                "dir".to_string()
            } else if kind.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if kind.is_file() {
                hex(&Sha256::digest(std::fs::read(&path).unwrap()))
            } else {
                "special".to_string()
            };
            found.insert(path, what);
        }
    }
    found
}

/// Puts the folder and the kernels back, then damages them as `case` says.
fn damage(e: &Exported, case: &Case) {
    for (relative, _) in MODULE_SOURCES {
        let path = e.fixture.path(relative);
        if path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            std::fs::remove_file(&path).unwrap();
        }
    }
    e.fixture.restore_kernels();
    e.restore();
    (case.damage)(e);
}

/// Builds each case with no toolkit: CPU-only with one warning that says
/// what the case expects, then a one-line failure under
/// `FIXTURE_REQUIRE_CUDA=1`; the fixture's tree unchanged by either, and
/// nothing where a hostile output pointed. Returns how many were refused.
fn refused_by_builds(e: &Exported, cases: &[Case]) -> usize {
    let Some(env) = no_toolkit(&e.fixture) else {
        return 0;
    };
    let mut required = env.clone();
    required.push(("FIXTURE_REQUIRE_CUDA", "1"));
    let out_dir = e.fixture.out_dir();
    let victims = [
        out_dir.join("../../../../victim.fatbin"),
        absolute_victim(e),
    ];
    for case in cases {
        damage(e, case);
        e.fixture.touch("kernels");
        e.fixture.touch("kernels-prebuilt");
        let before = tree(e.fixture.root());
        let output = e.fixture.cargo_build(&env);
        assert_success(&output, case.what);
        let warnings = build_script_warnings(&output);
        assert!(
            warnings.len() == 1
                && warnings[0].starts_with("prebuilt kernels refused (")
                && warnings[0].contains(&case.says)
                && warnings[0].contains("building CPU-only"),
            "{}: expected one warning saying {:?}, got {warnings:#?}",
            case.what,
            case.says
        );
        assert!(
            e.fixture
                .build_script_output()
                .contains("cargo::rustc-cfg=cpu_only\n"),
            "{}",
            case.what
        );
        assert!(!e.fixture.generated_modules().contains("include_bytes!"));
        let output = e.fixture.cargo_build(&required);
        assert_failure(&output, case.what);
        let errors = build_script_errors(&output);
        assert!(
            errors.len() == 1
                && errors[0].contains("were refused: ")
                && errors[0].contains(&case.says),
            "{}: {errors:#?}",
            case.what
        );
        assert_eq!(
            e.fixture.nvcc_calls(),
            Vec::<String>::new(),
            "{}",
            case.what
        );
        assert_eq!(
            tree(e.fixture.root()),
            before,
            "{}: files changed",
            case.what
        );
        for victim in &victims {
            assert!(
                !victim.exists(),
                "{}: wrote {}",
                case.what,
                victim.display()
            );
        }
    }
    cases.len()
}

/// `read` refuses each case in one line that says what the case expects.
fn refused_by_read(e: &Exported, cases: &[Case]) -> usize {
    for case in cases {
        damage(e, case);
        let error = match prebuilt::read(&e.dir) {
            Ok(_) => panic!("{}: read accepted the folder", case.what),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains(&case.says) && !error.contains('\n'),
            "{}: expected one line saying {:?}, got {error:?}",
            case.what,
            case.says
        );
    }
    e.restore();
    prebuilt::read(&e.dir).expect("the folder as exported reads");
    cases.len()
}

#[test]
fn hostile_folders_are_refused_by_every_build() {
    let fixture = Fixture::with_sources("prebuilt-hostile", "prebuilthostile", MODULE_SOURCES);
    let e = Exported::new(fixture);
    let cases = build_cases(&e);
    let refused = refused_by_builds(&e, &cases);
    eprintln!("{refused} hostile folders refused by builds");
}

#[test]
fn hostile_folders_are_refused_by_read() {
    let fixture = Fixture::with_sources("prebuilt-read", "prebuiltread", MODULE_SOURCES);
    let e = Exported::new(fixture);
    let mut cases = build_cases(&e);
    // Only a build checks the sources and the names a build gives.
    cases.truncate(cases.len() - 2);
    cases.extend(super::reader::read_cases(&e));
    let refused = refused_by_read(&e, &cases);
    eprintln!("{refused} hostile folders refused by read");
}

/// The same with images the real nvcc built: read-level cases all, and the
/// build-level ones that depend on the images' bytes.
#[test]
fn hostile_folders_of_real_nvcc_images_are_refused() {
    let Some(nvcc) = installed_nvcc() else {
        return;
    };
    let fixture = Fixture::with_real_nvcc("prebuilt-real", "prebuiltreal", MODULE_SOURCES, &nvcc);
    let e = Exported::new(fixture);
    let built = prebuilt::read(&e.dir).expect("the real images pass every check");
    assert_eq!(built.summary(), "CUDA 13.0, sm_80 sm_90 + compute_90");
    let mut cases = build_cases(&e);
    let another_arch = cases.remove(5);
    let at_build = vec![cases.remove(0), another_arch];
    cases.truncate(cases.len() - 2);
    cases.extend(super::reader::read_cases(&e));
    let read = refused_by_read(&e, &cases);
    let built = refused_by_builds(&e, &at_build);
    eprintln!("real nvcc: {read} refused by read, {built} by builds");
}
