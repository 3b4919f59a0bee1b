//! The report's format: every field and every workload survive a round
//! trip, and whatever the schema does not know is refused, at every level.

use kiln_bench_schema::{Data, Dtype, Engine, Figure, LaunchOverhead, Report, Shape, Workload};

const SHAPE: Shape = Shape {
    n: 1000,
    d: 64,
    m: 32,
};

fn anneal(engine: Engine, iterations: u32, dtype: Dtype, data: Data) -> Workload {
    Workload::Anneal {
        shape: SHAPE,
        engine,
        iterations,
        dtype,
        data,
    }
}

/// One figure of each workload and engine, every optional field set.
fn full_report() -> Report {
    let kinds = [
        Workload::DeviceCopy { n: 1 << 28 },
        Workload::Vadd { n: 1 << 20 },
        Workload::Batch { structures: 500 },
        anneal(Engine::Cpu, 30, Dtype::F32, Data::Clustered),
        anneal(Engine::Cuda { gpus: 1 }, 10, Dtype::F16, Data::Gaussian),
        anneal(Engine::Cuda { gpus: 4 }, 30, Dtype::F32, Data::Clustered),
        anneal(Engine::Wgpu, 30, Dtype::F32, Data::Clustered),
        Workload::Speedup {
            shape: SHAPE,
            gpus: 4,
        },
    ];
    Report {
        device: "NVIDIA H100 80GB HBM3".into(),
        cpu_threads: 16,
        figures: kinds
            .into_iter()
            .map(|kind| Figure {
                kind,
                ms: 1.5,
                runs: 3,
                gb_per_s: Some(2.5),
                note: Some("a note".into()),
                tflops: Some(0.25),
            })
            .collect(),
        launch_overhead: Some(LaunchOverhead {
            kiln_us: Some(2.0),
            raw_cudarc_us: Some(1.5),
            kiln_local_us: Some(0.75),
            overhead_us: Some(0.5),
            launches: 20_000,
            not_measured: Some("only to fill every field".into()),
        }),
    }
}

#[test]
fn every_field_and_workload_round_trips() {
    let report = full_report();
    let text = serde_json::to_string_pretty(&report).unwrap();
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(back, report);
    // And the text of the read report is the text written: nothing added.
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
}

#[test]
fn absent_optional_fields_stay_absent() {
    let mut report = full_report();
    report.launch_overhead = None;
    for f in &mut report.figures {
        (f.gb_per_s, f.note, f.tflops) = (None, None, None);
    }
    let text = serde_json::to_string(&report).unwrap();
    for key in ["launch_overhead", "gb_per_s", "note", "tflops"] {
        assert!(!text.contains(key), "{key} in {text}");
    }
    assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), report);
}

/// A named edit of a report's JSON.
type Plant = (&'static str, fn(&mut serde_json::Value));

/// `report` as JSON with `edit` applied, read back.
fn read_edited(edit: impl FnOnce(&mut serde_json::Value)) -> Result<Report, serde_json::Error> {
    let mut json = serde_json::to_value(full_report()).unwrap();
    edit(&mut json);
    serde_json::from_value(json)
}

#[test]
fn unknown_fields_are_errors_at_every_level() {
    let plants: [Plant; 6] = [
        ("report", |j| j["extra"] = 1.into()),
        ("figure", |j| j["figures"][0]["name"] = "vadd".into()),
        ("kind", |j| j["figures"][1]["kind"]["dtype"] = "f32".into()),
        ("shape", |j| {
            j["figures"][3]["kind"]["shape"]["k"] = 2.into();
        }),
        ("engine", |j| {
            j["figures"][4]["kind"]["engine"]["cuda"]["ranks"] = 2.into();
        }),
        ("launch_overhead", |j| {
            j["launch_overhead"]["kiln_ns"] = 1.into();
        }),
    ];
    for (level, plant) in plants {
        let err = read_edited(plant).expect_err(level);
        assert!(err.to_string().contains("unknown field"), "{level}: {err}");
    }
}

#[test]
fn unknown_kinds_are_errors() {
    let plants: [Plant; 5] = [
        ("workload", |j| {
            j["figures"][0]["kind"]["workload"] = "matmul".into();
        }),
        ("engine", |j| {
            j["figures"][3]["kind"]["engine"] = "tpu".into()
        }),
        ("dtype", |j| {
            j["figures"][3]["kind"]["dtype"] = "bf16".into()
        }),
        ("data", |j| j["figures"][3]["kind"]["data"] = "zeros".into()),
        ("missing kind", |j| {
            j["figures"][0].as_object_mut().unwrap().remove("kind");
        }),
    ];
    for (what, plant) in plants {
        let err = read_edited(plant).expect_err(what);
        assert!(
            err.to_string().contains("unknown variant") || err.to_string().contains("missing"),
            "{what}: {err}"
        );
    }
}

#[test]
fn names_are_derived_from_the_kind() {
    let check = |kind: Workload, name: &str| assert_eq!(kind.to_string(), name);
    check(
        Workload::DeviceCopy { n: 268_435_456 },
        "device copy 268435456 f32",
    );
    check(Workload::Vadd { n: 1 << 20 }, "vadd 1048576 f32");
    check(
        Workload::Batch { structures: 10_000 },
        "batch 10000 structures",
    );
    check(
        anneal(Engine::Cuda { gpus: 1 }, 30, Dtype::F32, Data::Clustered),
        "anneal 1000x64x32 gpu",
    );
    check(
        anneal(Engine::Cuda { gpus: 2 }, 30, Dtype::F32, Data::Clustered),
        "anneal 1000x64x32 gpu x2",
    );
    check(
        anneal(Engine::Cuda { gpus: 1 }, 10, Dtype::F16, Data::Gaussian),
        "anneal 1000x64x32 gpu 10it f16",
    );
    check(
        anneal(Engine::Cpu, 5, Dtype::F32, Data::Clustered),
        "anneal 1000x64x32 cpu 5it f32 clustered",
    );
    check(
        Workload::Speedup {
            shape: SHAPE,
            gpus: 8,
        },
        "anneal 1000x64x32 speedup x8 over x1",
    );
}

#[test]
fn the_overhead_summary_says_what_was_measured() {
    let measured = full_report().launch_overhead.unwrap();
    assert_eq!(
        measured.summary(),
        "launch overhead: gpu-core 2.000 µs, raw cudarc 1.500 µs per launch, +0.500 µs; stream-local buffers 0.750 µs"
    );
    // A report of an apps without the stream-local figure reads as before.
    let older = LaunchOverhead {
        kiln_local_us: None,
        ..measured.clone()
    };
    assert_eq!(
        older.summary(),
        "launch overhead: gpu-core 2.000 µs, raw cudarc 1.500 µs per launch, +0.500 µs"
    );
    let skipped = LaunchOverhead {
        kiln_us: None,
        raw_cudarc_us: None,
        kiln_local_us: None,
        overhead_us: None,
        launches: 1,
        not_measured: Some("cpu backend".into()),
    };
    assert_eq!(
        skipped.summary(),
        "launch overhead: not measured (cpu backend)"
    );
}
