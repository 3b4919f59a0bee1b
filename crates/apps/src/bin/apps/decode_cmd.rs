//! `apps decode DIR [--npy FILE...]`: reads an index back (checked by
//! [`Index::read`]), checks that the points given are the ones it was made
//! from, and reports the reconstruction error and the anchors' spread, as
//! text or JSON.

use std::io::Write;

use anyhow::{Context, Result};
use kiln_anneal::index::{Index, Reconstruction, ENERGY_TOLERANCE, HASH_ALGORITHM};
use serde::Serialize;

use crate::cli::DecodeArgs;
use crate::npy_args::{npy_error, open_shards};
use crate::output::out;

/// The `--json` report.
#[derive(Serialize)]
struct Report<'a> {
    dir: String,
    n: u64,
    d: u64,
    m: u64,
    iterations: u32,
    energy: f64,
    backend: &'a str,
    device: &'a str,
    dtype: &'a str,
    input_hash: &'a str,
    hash_algorithm: &'a str,
    /// Per anchor, members: min / median / max (from the index alone).
    members: kiln_anneal::index::Spread,
    empty_anchors: u64,
    /// With --npy: the reconstruction error.
    #[serde(skip_serializing_if = "Option::is_none")]
    reconstruction: Option<Reconstruction>,
}

pub(crate) fn run(args: &DecodeArgs) -> Result<()> {
    let dir = &args.dir;
    let index = Index::read(dir).with_context(|| "decode".to_string())?;
    let meta = &index.meta;
    let reconstruction = if args.npy.is_empty() {
        None
    } else {
        let shards = open_shards(&args.npy)?;
        let (n, d) = (shards.n(), shards.d());
        let what = format!("--npy {}", shards.describe());
        let loaded = shards.load().map_err(npy_error)?;
        let parts = loaded.parts();
        let points = kiln_anneal::join(&parts);
        index
            .check_input(points, n, d)
            .with_context(|| what.clone())?;
        let r = Reconstruction::measure(&index, points).with_context(|| what.clone())?;
        if r.energy_relative_difference > ENERGY_TOLERANCE {
            anyhow::bail!(
                "{}: the energy recomputed from the index, {:.12e}, differs from index.json's \
                 {:.12e} by {:.2e} relative (over {ENERGY_TOLERANCE:e}); the index is corrupt, \
                 write it again",
                dir.display(),
                r.mse,
                r.stored_energy,
                r.energy_relative_difference
            );
        }
        Some(r)
    };
    let members = kiln_anneal::index::member_spread(&index).context("decode")?;
    let report = Report {
        dir: dir.display().to_string(),
        n: meta.n,
        d: meta.d,
        m: meta.m,
        iterations: meta.iterations,
        energy: meta.energy,
        backend: &meta.backend,
        device: &meta.device,
        dtype: &meta.input.dtype,
        input_hash: &meta.input.hash,
        hash_algorithm: &meta.input.hash_algorithm,
        members: members.0,
        empty_anchors: members.1,
        reconstruction,
    };
    if args.json {
        let text = serde_json::to_string_pretty(&report)?;
        out!("{text}");
        return Ok(());
    }
    print_text(&report)
}

fn print_text(r: &Report<'_>) -> Result<()> {
    out!(
        "index {}: {} points x {} dims -> {} anchors ({:.5} of the points), {} iterations on {} ({})",
        r.dir,
        r.n,
        r.d,
        r.m,
        r.m as f64 / r.n.max(1) as f64,
        r.iterations,
        r.backend,
        r.device
    );
    out!(
        "input: {} ({} {}), stored energy {:.8}",
        r.dtype,
        HASH_ALGORITHM,
        r.input_hash,
        r.energy
    );
    out!(
        "members per anchor: min {} median {} max {} ({} empty)",
        r.members.min,
        r.members.median,
        r.members.max,
        r.empty_anchors
    );
    match &r.reconstruction {
        None => out!("reconstruction error: give the original points with --npy"),
        Some(rec) => {
            out!(
                "reconstruction: mean squared error {:.8} (recomputed energy; index.json's {:.8}, \
                 {:.1e} relative), max squared error {:.8} (point {})",
                rec.mse,
                rec.stored_energy,
                rec.energy_relative_difference,
                rec.max_squared_error,
                rec.max_point
            );
            out!(
                "per-anchor mean squared distance: min {:.8} median {:.8} max {:.8}",
                rec.anchor_mse.min,
                rec.anchor_mse.median,
                rec.anchor_mse.max
            );
        }
    }
    Ok(())
}
