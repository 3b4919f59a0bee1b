//! What [`super::Index::read`] checks beyond the files' shapes agreeing:
//! every field of `index.json` against what a run can write (sizes above
//! 0, finite energies, counts that add up, known names) and every anchor
//! finite and small enough for f32 distances, so that a reader never
//! computes with an impossible index; [`super::Index::write`] runs the same
//! checks, so that what it writes is read back. Each message names the
//! field.

use super::{IndexMeta, HASH_ALGORITHM};

/// The element types an index's input can have.
const DTYPES: [&str; 3] = ["float32", "float16", "bfloat16"];

/// The backends a run names.
const BACKENDS: [&str; 3] = ["cpu", "cuda", "wgpu"];

/// `index.json`'s fields, each against what a run writes; the message
/// names the first that cannot be.
pub(super) fn meta(meta: &IndexMeta) -> Result<(), String> {
    let fail = |message: String| Err(message);
    let (n, d, m) = (meta.n, meta.d, meta.m);
    let (Ok(nz), Ok(dz)) = (usize::try_from(n), usize::try_from(d)) else {
        return fail(format!("n = {n}, d = {d} do not fit in memory addresses"));
    };
    // The run's own checks of the sizes and parameters (n and d above 0
    // and within u32, every parameter finite and in range); one anchor
    // stands for m, which is checked below.
    crate::input::check_sizes(nz, dz, 1, &meta.params).map_err(|e| e.to_string())?;
    if m == 0 {
        return fail("m = 0: an index has at least one anchor".into());
    }
    if u32::try_from(m).is_err() {
        return fail(format!("m = {m} is over u32::MAX"));
    }
    if meta.params.max_anchors != 0 && m > meta.params.max_anchors as u64 {
        return fail(format!(
            "m = {m} is above params.max_anchors = {}",
            meta.params.max_anchors
        ));
    }
    if meta.seed != meta.params.seed {
        return fail(format!(
            "seed {} differs from params.seed {}",
            meta.seed, meta.params.seed
        ));
    }
    if meta.iterations == 0 || meta.iterations > meta.params.max_iters {
        return fail(format!(
            "iterations = {} is not in 1..={} (params.max_iters)",
            meta.iterations, meta.params.max_iters
        ));
    }
    energies(meta)?;
    maintenance(meta)?;
    if meta.world_size == 0 || u64::from(meta.world_size) > n {
        return fail(format!(
            "world_size = {} is not in 1..={n} (a run has at least one process, and every \
             process at least one point)",
            meta.world_size
        ));
    }
    if !BACKENDS.contains(&meta.backend.as_str()) {
        return fail(format!(
            "backend {:?} is none of {BACKENDS:?}",
            meta.backend
        ));
    }
    if meta.backend == "cpu" && meta.gpus != 0 {
        return fail(format!("gpus = {} for backend \"cpu\"", meta.gpus));
    }
    input(meta)
}

/// The energies: finite and not below 0.
fn energies(meta: &IndexMeta) -> Result<(), String> {
    let usable = |e: f64| e.is_finite() && e >= 0.0;
    if !usable(meta.energy) {
        return Err(format!("energy {} is not a finite value >= 0", meta.energy));
    }
    if let Some((i, e)) = meta
        .energy_history
        .iter()
        .enumerate()
        .find(|(_, &e)| !usable(e))
    {
        return Err(format!(
            "energy_history[{i}] = {e} is not a finite value >= 0"
        ));
    }
    Ok(())
}

/// The maintenance passes: after iterations that ran, in order.
fn maintenance(meta: &IndexMeta) -> Result<(), String> {
    let mut after = 0;
    for (i, pass) in meta.maintenance.iter().enumerate() {
        if pass.iteration <= after || pass.iteration > meta.iterations {
            return Err(format!(
                "maintenance[{i}].iteration = {} is not after the pass before it and within the \
                 {} iterations",
                pass.iteration, meta.iterations
            ));
        }
        after = pass.iteration;
    }
    Ok(())
}

/// The input's record: a known type, the hash's algorithm and form, and
/// files whose rows add up to `n`.
fn input(meta: &IndexMeta) -> Result<(), String> {
    let input = &meta.input;
    if !DTYPES.contains(&input.dtype.as_str()) {
        return Err(format!(
            "input.dtype {:?} is none of {DTYPES:?}",
            input.dtype
        ));
    }
    if input.hash_algorithm != HASH_ALGORITHM {
        return Err(format!(
            "input.hash_algorithm {:?} is not {HASH_ALGORITHM:?}",
            input.hash_algorithm
        ));
    }
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    if input.hash.len() != 32 || !input.hash.chars().all(hex) {
        return Err(format!(
            "input.hash {:?} is not 32 lower-case hex digits",
            input.hash
        ));
    }
    let rows = input
        .files
        .iter()
        .try_fold(0u64, |sum, f| sum.checked_add(f.rows));
    if !input.files.is_empty() && rows != Some(meta.n) {
        return Err(format!(
            "input.files hold {} rows in all, but n = {}",
            rows.map_or("more than 2^64".to_string(), |r| r.to_string()),
            meta.n
        ));
    }
    Ok(())
}

/// The assignments and the history against `index.json`: `n` of them,
/// every one below `m`, one energy per iteration.
pub(super) fn arrays(meta: &IndexMeta, assignments: &[u32]) -> Result<(), String> {
    use super::{ASSIGNMENTS_FILE, META_FILE};
    if assignments.len() as u64 != meta.n {
        return Err(format!(
            "{ASSIGNMENTS_FILE} holds {} assignments but {META_FILE} says n = {}",
            assignments.len(),
            meta.n
        ));
    }
    if let Some((point, &anchor)) = assignments
        .iter()
        .enumerate()
        .find(|(_, &a)| u64::from(a) >= meta.m)
    {
        return Err(format!(
            "point {point} is assigned to anchor {anchor}, but there are {} anchors",
            meta.m
        ));
    }
    if meta.energy_history.len() != meta.iterations as usize {
        return Err(format!(
            "{META_FILE} has {} energies for {} iterations",
            meta.energy_history.len(),
            meta.iterations
        ));
    }
    Ok(())
}

/// The anchors (`m × d` values): every value finite and within
/// [`crate::coordinate_bound`], as the run's points are.
pub(super) fn anchors(anchors: &[f32], meta: &IndexMeta) -> Result<(), crate::error::AnnealError> {
    crate::input::check_anchors(anchors, meta.m as usize, meta.d as usize)
}
