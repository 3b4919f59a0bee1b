//! `prebuilt.toml`'s reader under damage: the read-level hostile cases (a
//! damaged manifest, every arch list, every name, every file kind), and
//! property tests: arbitrary text, sealed or not, never panics and ends in
//! `Ok` or one line; a valid file mutated anywhere is either refused or read
//! as equal; hostile values in any field are refused.

use std::path::{Path, PathBuf};

use cuda_build::prebuilt::{self, Prebuilt};
use proptest::prelude::*;

use super::hostile::{case, rerecord, reseal, seal, single, Case};
use super::support::workspace_root;
use super::Exported;

type Damage = Box<dyn Fn(&Exported)>;

/// The manifest's body (its text after the seal line).
fn body(e: &Exported) -> String {
    let text = std::fs::read_to_string(e.file(prebuilt::MANIFEST)).unwrap();
    text.split_once('\n').unwrap().1.to_string()
}

/// Writes the manifest's body edited by `edit`, sealed again.
fn rewrite_body(e: &Exported, edit: impl Fn(String) -> String) {
    std::fs::write(e.file(prebuilt::MANIFEST), seal(&edit(body(e)))).unwrap();
}

/// The cases only `read` is asked about (the build shares its code).
pub(crate) fn read_cases(e: &Exported) -> Vec<Case> {
    let manifest = e.file(prebuilt::MANIFEST).display().to_string();
    let cases: Vec<(&'static str, String, Damage)> = vec![
        (
            "a flipped byte in prebuilt.toml",
            "its text is not the text its sha256 line was written for".into(),
            Box::new(|e: &Exported| {
                let path = e.file(prebuilt::MANIFEST);
                let mut bytes = std::fs::read(&path).unwrap();
                let at = bytes.len() / 2;
                bytes[at] ^= 1;
                std::fs::write(path, bytes).unwrap();
            }),
        ),
        (
            "prebuilt.toml of format 1 (no seal)",
            "its first line is not the `sha256 = \"...\"` of format 2".into(),
            Box::new(|e: &Exported| {
                std::fs::write(
                    e.file(prebuilt::MANIFEST),
                    body(e).replace("format = 2", "format = 1"),
                )
                .unwrap();
            }),
        ),
        (
            "sealed text that is not TOML",
            format!("{manifest} is damaged ("),
            Box::new(|e: &Exported| {
                std::fs::write(e.file(prebuilt::MANIFEST), seal("[[[ not toml")).unwrap();
            }),
        ),
        (
            "a missing key",
            "missing field `toolkit`".into(),
            Box::new(|e: &Exported| {
                rewrite_body(e, |b| b.replace("toolkit = ", "toolkid = "));
            }),
        ),
        (
            "a wrong type",
            "damaged (".into(),
            Box::new(|e: &Exported| {
                rewrite_body(e, |b| b.replace("format = 2", "format = \"2\""));
            }),
        ),
        (
            "format 3",
            "(format 3, not 2)".into(),
            Box::new(|e: &Exported| {
                rewrite_body(e, |b| b.replace("format = 2", "format = 3"));
            }),
        ),
        (
            "a huge prebuilt.toml",
            "prebuilt.toml is larger than 16777216 bytes".into(),
            Box::new(|e: &Exported| {
                let padding = "#".repeat(17 << 20);
                rewrite_body(e, |b| format!("{b}\n{padding}\n"));
            }),
        ),
        (
            "prebuilt.toml not UTF-8",
            "it is not UTF-8 text".into(),
            Box::new(|e: &Exported| {
                std::fs::write(e.file(prebuilt::MANIFEST), b"sha256 = \"\xff\xfe\"\n").unwrap();
            }),
        ),
        (
            "an empty prebuilt.toml",
            "it is not one of format 2".into(),
            Box::new(|e: &Exported| {
                std::fs::write(e.file(prebuilt::MANIFEST), "").unwrap();
            }),
        ),
        (
            "prebuilt.toml a FIFO",
            "prebuilt.toml is a FIFO, not a regular file".into(),
            Box::new(|e: &Exported| {
                let path = e.file(prebuilt::MANIFEST);
                std::fs::remove_file(&path).unwrap();
                let ok = std::process::Command::new("mkfifo").arg(&path).status();
                assert!(ok.is_ok_and(|s| s.success()));
            }),
        ),
        (
            "prebuilt.toml a symlink to a good copy",
            "prebuilt.toml is a symlink, not a regular file".into(),
            Box::new(|e: &Exported| {
                let path = e.file(prebuilt::MANIFEST);
                let copy = e.fixture.root_path("pristine").join(prebuilt::MANIFEST);
                std::fs::remove_file(&path).unwrap();
                std::os::unix::fs::symlink(copy, path).unwrap();
            }),
        ),
        (
            "a toolkit version that adds a cargo directive",
            "toolkit `13.0\\ncargo::rustc-cfg=evil` is not a version".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.toolkit = "13.0\ncargo::rustc-cfg=evil".into());
            }),
        ),
        (
            "junk in ptx",
            "lists `sm_8x` in ptx, which is not a virtual CUDA arch".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.ptx.push("sm_8x".into()));
            }),
        ),
        (
            "a virtual arch in sass",
            "lists `compute_90` in sass".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.sass.push("compute_90".into()));
            }),
        ),
        (
            "a real arch in ptx",
            "lists `sm_90` in ptx".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.ptx.push("sm_90".into()));
            }),
        ),
        (
            "an arch not in nvcc's spelling",
            "lists `9.0` in sass".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.sass.push("9.0".into()));
            }),
        ),
        (
            "an arch with a newline",
            "lists `sm_90\\ncargo::warning=x` in sass".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.sass.push("sm_90\ncargo::warning=x".into()));
            }),
        ),
        (
            "an unknown arch in a module's sass",
            "lists `sm_12` in modules.single.sass".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| single(p).sass.push("sm_12".into()));
            }),
        ),
        (
            "an unknown arch of a kernel",
            "lists `sm_999` in modules.single.kernels".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| single(p).kernels[0].arch = "sm_999".into());
            }),
        ),
        (
            "an output in a subdir",
            "names the file `sub/single.fatbin`".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| {
                    single(p).output = Some("sub/single.fatbin".into());
                    file(p, "single.fatbin").path = "sub/single.fatbin".into();
                });
            }),
        ),
        (
            "a module's output that is not among the files",
            "module `single`'s image is not one of its own [[files]]".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| single(p).output = Some("pair.fatbin".into()));
            }),
        ),
        (
            "a file no module uses",
            "it lists libextra.a as a file, which no module uses".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| {
                    let mut extra = p.files[0].clone();
                    extra.path = "libextra.a".into();
                    p.files.push(extra);
                });
            }),
        ),
        (
            "static libraries without the static runtime",
            "it lists no libcudart_static.a, which its static libraries link".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| {
                    p.files
                        .retain(|f| f.path != Path::new("libcudart_static.a"))
                });
            }),
        ),
        (
            "an input of ../",
            "names the input `../outside.h`, which is not a file inside the package".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.inputs[0].path = "../outside.h".into());
            }),
        ),
        (
            "an absolute input",
            "names the input `/etc/passwd`".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| p.inputs[0].path = "/etc/passwd".into());
            }),
        ),
        (
            "a source of ../",
            "names the source of module `single` `../../x.cu`".into(),
            Box::new(|e: &Exported| {
                reseal(e, |p| single(p).sources.push("../../x.cu".into()));
            }),
        ),
        (
            "a static library with a flipped byte",
            "libfixture_host.a does not hold the bytes".into(),
            Box::new(|e: &Exported| {
                let path = e.file("libfixture_host.a");
                let mut bytes = std::fs::read(&path).unwrap();
                bytes[0] ^= 1;
                std::fs::write(path, bytes).unwrap();
            }),
        ),
        (
            "the static runtime replaced, its hash recorded",
            "for the static CUDA runtime: not a static library".into(),
            Box::new(|e: &Exported| {
                std::fs::write(e.file("libcudart_static.a"), "not an archive").unwrap();
                rerecord(e, "libcudart_static.a");
            }),
        ),
        (
            "an image that is no fat binary, its hash recorded",
            "no fat binary magic".into(),
            Box::new(|e: &Exported| {
                std::fs::copy(e.fixture.path("Cargo.toml"), e.file("single.fatbin")).unwrap();
                rerecord(e, "single.fatbin");
            }),
        ),
        (
            "a truncated image, its hash recorded",
            "(truncated)".into(),
            Box::new(|e: &Exported| {
                let path = e.file("single.fatbin");
                let bytes = std::fs::read(&path).unwrap();
                std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
                rerecord(e, "single.fatbin");
            }),
        ),
        (
            "a dir in place of an image",
            "single.fatbin is a dir, not a regular file".into(),
            Box::new(|e: &Exported| {
                std::fs::remove_file(e.file("single.fatbin")).unwrap();
                std::fs::create_dir(e.file("single.fatbin")).unwrap();
            }),
        ),
        (
            "a symlink inside the folder",
            "single.fatbin is a symlink".into(),
            Box::new(|e: &Exported| {
                std::fs::remove_file(e.file("single.fatbin")).unwrap();
                std::os::unix::fs::symlink("pair.fatbin", e.file("single.fatbin")).unwrap();
            }),
        ),
        (
            "a missing image",
            "single.fatbin is missing".into(),
            Box::new(|e: &Exported| {
                std::fs::remove_file(e.file("single.fatbin")).unwrap();
            }),
        ),
        (
            "an image over the size bound (sparse)",
            "single.fatbin is larger than 1073741824 bytes".into(),
            Box::new(|e: &Exported| {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(e.file("single.fatbin"))
                    .unwrap();
                file.set_len((1 << 30) + 1).unwrap();
            }),
        ),
    ];
    cases
        .into_iter()
        .map(|(what, says, damage)| case(what, says, damage))
        .collect()
}

fn file<'a>(p: &'a mut Prebuilt, name: &str) -> &'a mut cuda_build::prebuilt::PrebuiltFile {
    p.files
        .iter_mut()
        .find(|f| f.path == Path::new(name))
        .unwrap()
}

/// The committed example's manifest: a valid file of this format.
fn valid_text() -> String {
    let path = workspace_root().join("examples/downstream/kernels-prebuilt/prebuilt.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn one_line(message: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        !message.is_empty() && !message.contains('\n'),
        "{message:?}"
    );
    Ok(())
}

fn parse_checked(text: &str) -> Result<Option<Prebuilt>, TestCaseError> {
    match prebuilt::parse(text) {
        Ok(p) => Ok(Some(p)),
        Err(e) => one_line(&e.to_string()).map(|()| None),
    }
}

/// A line of a manifest: one of the valid file's, or a near miss.
fn line(valid: Vec<String>) -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(valid),
        prop::sample::select(vec![
            "format = 2",
            "format = -1",
            "format = 99999999999999999999",
            "toolkit = \"13.0\"",
            "toolkit = 13",
            "sass = [\"sm_999\"]",
            "sass = [\"sm_90a\", \"sm_100f\"]",
            "ptx = [\"compute_90\", 7]",
            "[[modules]]",
            "[[files]]",
            "[[inputs]]",
            "path = \"../x\"",
            "path = \"/etc/passwd\"",
            "output = \"a/../b\"",
            "output = \"x.fatbin\"",
            "size_bytes = 18446744073709551615",
            "name = \"\\n\"",
            "link = \"dynamic\"",
            "[modules",
            "= 1",
            "\"",
            "[[modules.kernels]]",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        parse_checked(&text)?;
        parse_checked(&seal(&text))?;
    }

    #[test]
    fn arbitrary_sealed_manifests_are_read_checked_or_refused_in_one_line(
        lines in prop::collection::vec(line(valid_text().lines().map(str::to_string).collect()), 0..60)
    ) {
        if let Some(p) = parse_checked(&seal(&lines.join("\n")))? {
            for name in p.modules.iter().filter_map(|m| m.output.as_deref()) {
                prop_assert_eq!(name.components().count(), 1, "{:?}", name);
                prop_assert!(!name.starts_with(".."), "{:?}", name);
            }
            for arch in &p.sass {
                prop_assert!(arch.starts_with("sm_"), "{:?}", arch);
            }
        }
    }

    #[test]
    fn a_mutated_valid_file_is_refused_or_read_as_equal(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<char>()), 1..4)
    ) {
        let text = valid_text();
        let original = prebuilt::parse(&text).expect("the committed manifest reads");
        let mut chars: Vec<char> = text.chars().collect();
        for (at, how, c) in edits {
            let i = at.index(chars.len().max(1));
            match how {
                0 if !chars.is_empty() => { chars.remove(i); }
                1 => chars.insert(i, c),
                _ if !chars.is_empty() => chars[i] = c,
                _ => {}
            }
        }
        let mutated: String = chars.into_iter().collect();
        if let Some(p) = parse_checked(&mutated)? {
            prop_assert_eq!(p, original.clone(), "{:?}", mutated);
        }
    }

    #[test]
    fn hostile_names_are_refused_wherever_they_stand(
        name in prop::sample::select(vec![
            "..", "../x", "/x", "a/../b", "./a", "a/", "\n", "a\nb", "", "/", "C:\\x", "a\u{7f}",
        ]),
        field in 0usize..5,
    ) {
        let mut p = prebuilt::parse(&valid_text()).unwrap();
        let name = PathBuf::from(name);
        match field {
            0 => p.modules[0].output = Some(name.clone()),
            1 => p.files[0].path = name.clone(),
            2 => p.inputs[0].path = name.clone(),
            3 => p.modules[0].sources.push(name.clone()),
            _ => p.modules[0].deps.push(name.clone()),
        }
        // `a/` and `C:\x` are one plain name on unix: fine as an input or
        // source, not as a file of the folder the module's output is.
        let plain = name.components().count() == 1
            && matches!(name.components().next(), Some(std::path::Component::Normal(_)))
            && !name.to_string_lossy().contains(|c: char| c.is_control());
        let result = prebuilt::parse(&p.to_toml().unwrap());
        if !plain || field <= 1 {
            prop_assert!(result.is_err(), "{:?} as field {}", name, field);
        }
        if let Err(e) = result {
            one_line(&e.to_string())?;
        }
    }
}

#[test]
fn deeply_nested_toml_is_refused_not_a_stack_overflow() {
    for depth in [1_000, 100_000] {
        let body = format!("format = {}{}", "[".repeat(depth), "]".repeat(depth));
        let error = prebuilt::parse(&seal(&body)).unwrap_err().to_string();
        assert!(!error.contains('\n'), "{error}");
        let body = format!("x = {}1{}", "{a = ".repeat(depth), "}".repeat(depth));
        let error = prebuilt::parse(&seal(&body)).unwrap_err().to_string();
        assert!(!error.contains('\n'), "{error}");
    }
}

#[test]
fn a_manifest_with_crlf_line_ends_reads_as_written() {
    let text = valid_text();
    let crlf = text.replace('\n', "\r\n");
    assert_eq!(
        prebuilt::parse(&crlf).unwrap(),
        prebuilt::parse(&text).unwrap()
    );
}

/// What `to_toml` writes, `parse` reads back equal, at the extremes too.
#[test]
fn a_manifest_written_reads_back_equal() {
    let mut p = prebuilt::parse(&valid_text()).unwrap();
    for size in [0, i64::MAX as u64, u64::MAX] {
        p.files[0].size_bytes = size;
        let text = p.to_toml().unwrap();
        assert_eq!(prebuilt::parse(&text).unwrap(), p, "size {size}");
    }
}
