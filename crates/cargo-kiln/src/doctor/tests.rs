//! doctor's tests: the report of fake findings (snapshots), a damaged
//! toolkit, and a toolkit above the driver floor with the ones it shadows.

use super::*;
use cuda_build::toolkit::{Probe, ProbeOutcome, Toolkit, ToolkitVersion};

fn fake_findings() -> Findings {
    let root = PathBuf::from("/fake/cuda");
    let probes = vec![
        Probe {
            place: "NVCC".into(),
            outcome: ProbeOutcome::NotSet,
        },
        Probe {
            place: "CUDA_PATH".into(),
            outcome: ProbeOutcome::NoNvcc("/opt/broken".into()),
        },
        Probe {
            place: "CUDA_HOME".into(),
            outcome: ProbeOutcome::NotSet,
        },
        Probe {
            place: "CUDA_ROOT".into(),
            outcome: ProbeOutcome::NotSet,
        },
        Probe {
            place: "PATH".into(),
            outcome: ProbeOutcome::NotOnPath,
        },
        Probe {
            place: "project-local".into(),
            outcome: ProbeOutcome::Found(root.clone()),
        },
        Probe {
            place: "/usr/local/cuda".into(),
            outcome: ProbeOutcome::Shadowed {
                root: "/usr/local/cuda".into(),
                version: ToolkitVersion {
                    major: 12,
                    minor: 9,
                    patch: 86,
                },
            },
        },
        Probe {
            place: "/opt/cuda".into(),
            outcome: ProbeOutcome::NotReached,
        },
    ];
    let toolkit = Toolkit {
        nvcc: root.join("bin/nvcc"),
        root,
        version: ToolkitVersion {
            major: 13,
            minor: 0,
            patch: 88,
        },
        found_by: "project-local".into(),
    };
    Findings {
        off_by: None,
        floor: Ok(DriverFloor::default_floor()),
        discovery: Some(Discovery {
            probes,
            toolkit: Some(toolkit),
        }),
        supported: Some(Ok(SupportedArchs::from_nvcc_lists(
            "13.0",
            "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
            "compute_75 compute_80 compute_86 compute_90 compute_100 compute_120",
        ))),
        libclang: Ok(PathBuf::from("/fake/libclang")),
        gpus: Err("no nvidia-smi: no NVIDIA driver on this machine".into()),
        spec: ("sm_80,sm_90".into(), "kernels/kiln.toml".into()),
        modules: vec![
            ("reduce".into(), "static".into()),
            ("vector_add".into(), "fatbin".into()),
        ],
        problems: vec![],
    }
}

#[test]
fn doctor_report_for_a_fake_toolkit() {
    insta::assert_snapshot!(render(&fake_findings()));
}

#[test]
fn doctor_report_without_toolkit_or_with_a_bad_spec() {
    let mut f = fake_findings();
    f.discovery = None;
    f.off_by = Some("KILN_CUDA=off".into());
    f.supported = None;
    f.spec = ("sm_12".into(), "KILN_CUDA_ARCHS".into());
    insta::assert_snapshot!(render(&f));
}

#[test]
fn a_toolkit_without_cicc_is_a_problem_saying_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cuda");
    for file in toolkit::ESSENTIAL.iter().map(|(f, _)| f) {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    let mut f = fake_findings();
    let d = f.discovery.as_mut().unwrap();
    let tk = d.toolkit.as_mut().unwrap();
    tk.root = root.clone();
    tk.found_by = "CUDA_PATH".into();
    assert_eq!(
        toolkit_problems(f.discovery.as_ref(), Path::new("/nonexistent"))
            .iter()
            .filter(|p| p.contains("lacks"))
            .count(),
        0
    );
    std::fs::remove_dir_all(root.join("nvvm")).unwrap();
    let problems = toolkit_problems(f.discovery.as_ref(), Path::new("/nonexistent"));
    let lacks: Vec<&String> = problems.iter().filter(|p| p.contains("lacks")).collect();
    assert_eq!(
        lacks,
        [&format!(
            "the toolkit at {} (found by CUDA_PATH) lacks nvvm/bin/cicc (nvcc's CUDA front end); \
             reinstall that toolkit, or point CUDA_PATH elsewhere (`cargo kiln toolkit install` provides the pinned one)",
            root.display()
        )]
    );
    f.problems = problems;
    assert!(render(&f).contains("\nproblem: the toolkit at "));
}

#[test]
fn a_toolkit_newer_than_the_floor_is_a_problem_and_doctor_shows_what_it_shadows() {
    let mut f = fake_findings();
    let d = f.discovery.as_mut().unwrap();
    d.probes[4].outcome = ProbeOutcome::Found("/opt/cuda-13.5".into());
    d.probes[5].outcome = ProbeOutcome::Shadowed {
        root: "/fake/cuda".into(),
        version: ToolkitVersion {
            major: 13,
            minor: 0,
            patch: 88,
        },
    };
    let tk = d.toolkit.as_mut().unwrap();
    tk.root = "/opt/cuda-13.5".into();
    tk.found_by = "PATH".into();
    tk.version = ToolkitVersion {
        major: 13,
        minor: 5,
        patch: 37,
    };
    let problem = floor_problem(Some(tk), &f.floor).expect("13.5 is above a 13.0 floor");
    assert_eq!(
        problem,
        "CUDA 13.5.37 (found by PATH) writes PTX ISA 9.5, which drivers of the floor, \
         CUDA 13.0 (PTX ISA 9.0, the default; set it in kiln-audit.toml [driver]), cannot \
         JIT; build with the pinned toolkit (`cargo kiln toolkit install`, first in the \
         search), build SASS only for every GPU the kernels target (each arch `-real`), or \
         raise the floor in kiln-audit.toml [driver]"
    );
    let raised = Ok(DriverFloor {
        min_cuda: "13.5".into(),
        max_ptx_isa: PtxIsa { major: 9, minor: 5 },
        origin: "kiln-audit.toml [driver]".into(),
    });
    assert_eq!(floor_problem(Some(tk), &raised), None);
    f.problems = vec![problem];
    let report = render(&f);
    assert!(
        report.contains(
            "toolkit: CUDA 13.5.37 at /opt/cuda-13.5 (via PATH)\n  \
             shadows: project-local=/fake/cuda (CUDA 13.0.88, shadowed)\n  \
             shadows: /usr/local/cuda=/usr/local/cuda (CUDA 12.9.86, shadowed)\n\
             driver floor: CUDA 13.0 (PTX ISA 9.0, the default; set it in kiln-audit.toml [driver])\n"
        ),
        "{report}"
    );
    assert!(report.contains("\nproblem: CUDA 13.5.37 (found by PATH) writes PTX ISA 9.5"));
    let json = f.json();
    assert_eq!(json.shadowed.len(), 2);
    assert_eq!(json.driver_floor, Some("13.0"));
}
