//! The launchers' variables as `srun`, torchrun, torchrun inside `srun` and
//! `apps launch` set them, and every partial or contradictory set of them:
//! each refused in one line naming the variables.

use std::collections::HashMap;

use kiln_anneal::distributed::{
    gpu_ordinal, RankEnv, HANDSHAKE_TIMEOUT_ENV, MAX_TIMEOUT_SECS, SLURM_PORTS, SLURM_PORT_BASE,
    TIMEOUT_ENV,
};

fn env(vars: &[(&str, &str)]) -> Result<Option<RankEnv>, String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    RankEnv::from_lookup(move |name| map.get(name).cloned()).map_err(|e| {
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        text
    })
}

/// The error of `vars`, which must contain every one of `needles`.
fn refused(vars: &[(&str, &str)], needles: &[&str]) {
    match env(vars) {
        Ok(got) => panic!("{vars:?}: accepted as {got:?}"),
        Err(text) => {
            for needle in needles {
                assert!(text.contains(needle), "{vars:?}: {text:?} lacks {needle:?}");
            }
        }
    }
}

/// A variable set to a value, or unset (`None`).
type Change = (&'static str, Option<&'static str>);

/// What `srun -N2 -n4` gives task 2 (on the second host).
const SRUN: [(&str, &str); 7] = [
    ("SLURM_PROCID", "2"),
    ("SLURM_NTASKS", "4"),
    ("SLURM_STEP_NUM_TASKS", "4"),
    ("SLURM_LOCALID", "0"),
    ("SLURM_JOB_NODELIST", "gpu[07-08],cpu5"),
    ("SLURM_JOB_ID", "4242"),
    ("SLURM_STEP_ID", "0"),
];

/// What torchrun gives rank 3 of 4 (two hosts of two).
const TORCHRUN: [(&str, &str); 7] = [
    ("RANK", "3"),
    ("WORLD_SIZE", "4"),
    ("LOCAL_RANK", "1"),
    ("LOCAL_WORLD_SIZE", "2"),
    ("MASTER_ADDR", "node-a"),
    ("MASTER_PORT", "29500"),
    ("TORCHELASTIC_RUN_ID", "job7"),
];

fn changed(
    base: &[(&'static str, &'static str)],
    changes: &[(&'static str, Option<&'static str>)],
) -> Vec<(&'static str, &'static str)> {
    let mut vars = base.to_vec();
    for (name, value) in changes {
        vars.retain(|(k, _)| k != name);
        if let Some(v) = value {
            vars.push((name, v));
        }
    }
    vars
}

#[test]
fn srun_places_the_task_at_the_first_host_of_its_list() {
    let e = env(&SRUN).unwrap().unwrap();
    assert_eq!((e.rank, e.world_size, e.local_rank), (2, 4, 0));
    assert_eq!(e.master_addr, "gpu07");
    assert!((SLURM_PORT_BASE..SLURM_PORT_BASE + SLURM_PORTS).contains(&e.master_port));
    // The same job and step: the same port on every rank; another step,
    // (mostly) another port.
    let rank0 = env(&changed(&SRUN, &[("SLURM_PROCID", Some("0"))]))
        .unwrap()
        .unwrap();
    assert_eq!(rank0.master_port, e.master_port);
    let step1 = env(&changed(&SRUN, &[("SLURM_STEP_ID", Some("1"))]))
        .unwrap()
        .unwrap();
    assert_ne!(step1.master_port, e.master_port);
    // The step's own list and task count win over the job's.
    let step = changed(
        &SRUN,
        &[
            ("SLURM_STEP_NODELIST", Some("cpu5")),
            ("SLURM_STEP_NUM_TASKS", Some("3")),
        ],
    );
    let e = env(&step).unwrap().unwrap();
    assert_eq!((e.master_addr.as_str(), e.world_size), ("cpu5", 3));
    // Without a step's count, the job's.
    let e = env(&changed(&SRUN, &[("SLURM_STEP_NUM_TASKS", None)]))
        .unwrap()
        .unwrap();
    assert_eq!(e.world_size, 4);
    // MASTER_ADDR and MASTER_PORT, when set, win over the list and the hash.
    let e = env(&changed(
        &SRUN,
        &[
            ("MASTER_ADDR", Some("10.0.0.1")),
            ("MASTER_PORT", Some("2000")),
        ],
    ))
    .unwrap()
    .unwrap();
    assert_eq!((e.master_addr.as_str(), e.master_port), ("10.0.0.1", 2000));
    let e = env(&changed(&SRUN, &[("KILN_MASTER_PORT", Some("2001"))]))
        .unwrap()
        .unwrap();
    assert_eq!(e.master_port, 2001);
}

#[test]
fn one_slurm_task_is_a_plain_run() {
    let one = changed(
        &SRUN,
        &[
            ("SLURM_PROCID", Some("0")),
            ("SLURM_NTASKS", Some("1")),
            ("SLURM_STEP_NUM_TASKS", Some("1")),
        ],
    );
    assert_eq!(env(&one).unwrap(), None);
    // Slurm's allocation alone (salloc's shell) describes no task.
    assert_eq!(
        env(&[("SLURM_NTASKS", "4"), ("SLURM_JOB_NODELIST", "a[1-4]")]).unwrap(),
        None
    );
    assert_eq!(env(&[]).unwrap(), None);
}

#[test]
fn torchrun_alone_and_torchrun_inside_srun_follow_torchrun() {
    let e = env(&TORCHRUN).unwrap().unwrap();
    assert_eq!((e.rank, e.world_size, e.local_rank), (3, 4, 1));
    assert_eq!((e.master_addr.as_str(), e.master_port), ("node-a", 29500));
    // `srun -N2 torchrun --nproc-per-node 2`: Slurm's task 1 of 2 is the
    // launcher, and torchrun's variables describe this process.
    let nested = [
        &TORCHRUN[..],
        &changed(
            &SRUN,
            &[
                ("SLURM_PROCID", Some("1")),
                ("SLURM_NTASKS", Some("2")),
                ("SLURM_STEP_NUM_TASKS", Some("2")),
            ],
        ),
    ]
    .concat();
    let e = env(&nested).unwrap().unwrap();
    assert_eq!(
        (e.rank, e.world_size, e.local_rank, e.master_port),
        (3, 4, 1, 29500)
    );
    // `apps launch` inside an srun task sets LOCAL_WORLD_SIZE, as torchrun.
    let launch = changed(&nested, &[("TORCHELASTIC_RUN_ID", None)]);
    assert_eq!(env(&launch).unwrap().unwrap().rank, 3);
}

#[test]
fn both_families_on_one_process_must_agree() {
    // A script that exports torchrun's names from Slurm's: one process,
    // two descriptions.
    let agreeing = [
        &SRUN[..],
        &[("RANK", "2"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "0")],
    ]
    .concat();
    assert_eq!(env(&agreeing).unwrap().unwrap().rank, 2);
    // Some of torchrun's names: the others come from Slurm.
    let e = env(&[&SRUN[..], &[("RANK", "2")]].concat())
        .unwrap()
        .unwrap();
    assert_eq!((e.world_size, e.master_addr.as_str()), (4, "gpu07"));
    for (var, value, needles) in [
        (
            "RANK",
            "1",
            &["RANK=\"1\"", "SLURM_PROCID=\"2\"", "rank"][..],
        ),
        (
            "WORLD_SIZE",
            "8",
            &["WORLD_SIZE=\"8\"", "SLURM_STEP_NUM_TASKS=\"4\""][..],
        ),
        (
            "LOCAL_RANK",
            "1",
            &["LOCAL_RANK=\"1\"", "SLURM_LOCALID=\"0\""][..],
        ),
        ("RANK", "x", &["RANK=\"x\": not a whole number"][..]),
    ] {
        refused(&[&SRUN[..], &[(var, value)]].concat(), needles);
    }
    // A partial Slurm set beside torchrun's (no launcher nested) is Slurm's
    // partial set.
    refused(
        &[
            &TORCHRUN[..2],
            &[
                ("SLURM_PROCID", "3"),
                ("MASTER_ADDR", "a"),
                ("MASTER_PORT", "1"),
            ],
        ]
        .concat(),
        &["SLURM_PROCID is set but not SLURM_NTASKS"],
    );
}

#[test]
fn partial_and_impossible_slurm_sets_are_refused_naming_the_variables() {
    let cases: &[(&[Change], &[&str])] = &[
        (
            &[("SLURM_NTASKS", None), ("SLURM_STEP_NUM_TASKS", None)],
            &["SLURM_PROCID is set but not SLURM_NTASKS", "srun"],
        ),
        (
            &[("SLURM_LOCALID", None)],
            &["SLURM_PROCID is set but not SLURM_LOCALID"],
        ),
        (
            &[("SLURM_JOB_NODELIST", None)],
            &["SLURM_PROCID is set but not SLURM_JOB_NODELIST (or MASTER_ADDR)"],
        ),
        (
            &[("SLURM_JOB_ID", None)],
            &["SLURM_PROCID is set but not SLURM_JOB_ID (or MASTER_PORT)"],
        ),
        (
            &[("SLURM_PROCID", Some("4"))],
            &[
                "SLURM_PROCID=\"4\"",
                "ranks are 0..4 (SLURM_STEP_NUM_TASKS=4)",
            ],
        ),
        (
            &[("SLURM_PROCID", Some("9")), ("SLURM_STEP_NUM_TASKS", None)],
            &["SLURM_PROCID=\"9\"", "(SLURM_NTASKS=4)"],
        ),
        (
            &[("SLURM_STEP_NUM_TASKS", Some("0"))],
            &["SLURM_STEP_NUM_TASKS=\"0\"", "at least one"],
        ),
        (
            &[("SLURM_PROCID", Some("-1"))],
            &["SLURM_PROCID=\"-1\": not a whole number"],
        ),
        (
            &[
                ("SLURM_NTASKS", Some("four")),
                ("SLURM_STEP_NUM_TASKS", None),
            ],
            &["SLURM_NTASKS=\"four\""],
        ),
        (
            &[("SLURM_LOCALID", Some("3"))],
            &["SLURM_LOCALID=\"3\"", "above SLURM_PROCID=2"],
        ),
        (
            &[("SLURM_JOB_NODELIST", Some("gpu[07-"))],
            &[
                "SLURM_JOB_NODELIST=\"gpu[07-\"",
                "not closed",
                "set MASTER_ADDR",
            ],
        ),
        (
            &[("SLURM_STEP_NODELIST", Some("a,,b"))],
            &["SLURM_STEP_NODELIST", "empty host"],
        ),
        (
            &[("SLURM_JOB_NODELIST", Some(""))],
            &["SLURM_JOB_NODELIST=\"\"", "empty"],
        ),
        (&[("MASTER_ADDR", Some(" "))], &["MASTER_ADDR", "empty"]),
        (&[("MASTER_PORT", Some("0"))], &["MASTER_PORT=\"0\""]),
    ];
    for (changes, needles) in cases {
        refused(&changed(&SRUN, changes), needles);
    }
}

#[test]
fn partial_torchrun_sets_are_refused_naming_the_variables() {
    let cases: &[(&[Change], &[&str])] = &[
        (&[("WORLD_SIZE", None)], &["RANK is set but not WORLD_SIZE"]),
        (
            &[("WORLD_SIZE", None), ("RANK", None)],
            &["LOCAL_RANK is set but not WORLD_SIZE"],
        ),
        (&[("RANK", None)], &["WORLD_SIZE is set but not RANK"]),
        (&[("MASTER_ADDR", None)], &["MASTER_ADDR is not set"]),
        (&[("MASTER_PORT", None)], &["MASTER_PORT is not set"]),
        (
            &[("RANK", Some("4"))],
            &["RANK=\"4\"", "ranks are 0..4 (WORLD_SIZE=4)"],
        ),
        (
            &[("LOCAL_RANK", Some("7"))],
            &["LOCAL_RANK=\"7\"", "above RANK=3"],
        ),
    ];
    for (changes, needles) in cases {
        refused(&changed(&TORCHRUN, changes), needles);
    }
}

/// A timeout whose deadline would overflow `Instant` (it panicked in both
/// ranks) is refused naming the variable; the largest one taken is used.
#[test]
fn timeouts_past_the_maximum_are_refused_naming_the_variable() {
    for var in [TIMEOUT_ENV, HANDSHAKE_TIMEOUT_ENV] {
        for value in ["18446744073709551615", "31622401", "0", "-1", "1e3"] {
            refused(
                &changed(&TORCHRUN, &[(var, Some(value))]),
                &[var, "seconds from 1 to 31622400"],
            );
        }
        let max = MAX_TIMEOUT_SECS.to_string();
        let vars: Vec<(&str, &str)> = TORCHRUN.into_iter().chain([(var, &*max)]).collect();
        let got = env(&vars).unwrap().unwrap();
        let timeout = match var {
            TIMEOUT_ENV => got.timeout,
            _ => got.handshake_timeout,
        };
        assert_eq!(timeout.as_secs(), MAX_TIMEOUT_SECS);
    }
}

/// A hostile nodelist costs its text, not its hosts: a billion-host range
/// is read in one pass, and a huge value is cut in the error line.
#[test]
fn hostile_nodelists_are_read_without_expanding_them() {
    let e = env(&changed(
        &SRUN,
        &[("SLURM_JOB_NODELIST", Some("node[1-999999999]"))],
    ))
    .unwrap()
    .unwrap();
    assert_eq!(e.master_addr, "node1");
    let huge = format!("x[{}", "1,".repeat(500_000));
    let mut vars: Vec<(&str, &str)> = SRUN.to_vec();
    vars.retain(|(k, _)| *k != "SLURM_JOB_NODELIST");
    vars.push(("SLURM_JOB_NODELIST", huge.as_str()));
    let text = env(&vars).unwrap_err();
    assert!(
        text.len() < 400 && text.contains("not closed"),
        "{} bytes",
        text.len()
    );
}

#[test]
fn a_task_left_one_gpu_runs_on_it() {
    assert_eq!(gpu_ordinal(3, None), 3);
    assert_eq!(gpu_ordinal(3, Some("5")), 0);
    assert_eq!(gpu_ordinal(3, Some("GPU-1b2c")), 0);
    assert_eq!(gpu_ordinal(1, Some("0,1")), 1);
    assert_eq!(gpu_ordinal(1, Some("")), 1);
}
