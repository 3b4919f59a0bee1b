//! `apps encode DIR --npy FILE... --out FILE`: each point's anchor in the
//! index at DIR (read and checked by [`Index::read`]), computed by
//! [`kiln_anneal::encode`] a chunk at a time from disk, written as one
//! uint32 `.npy` renamed into place at the end; progress on stderr.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use apps::describe_backend;
use kiln_anneal::encode::{self, EncodeError, EncodeOutput};
use kiln_anneal::index::Index;

use crate::cli::EncodeArgs;
use crate::npy_args::{npy_error, open_shards};
use crate::output::out;
use crate::select_backend;

pub(crate) fn run(args: &EncodeArgs) -> Result<()> {
    let backend = select_backend(args.backend.backend)?;
    let index = Index::read(&args.dir).context("encode")?;
    let shards = open_shards(&args.npy)?;
    let (n, d, m) = (shards.n(), shards.d(), index.meta.m);
    if d as u64 != index.meta.d {
        return Err(encode_error(
            EncodeError::Dimension {
                points: d,
                index: index.meta.d as usize,
            },
            args,
        ));
    }
    let chunk = args.chunk.map_or_else(
        || encode::default_chunk(&index, shards.dtype(), &backend),
        |c| (c as usize).min(n.max(1)),
    );
    let what = format!("encode in chunks of {chunk} points x {d} dims");
    encode::check_chunk(&what, &index, shards.dtype(), &backend, chunk).context("--chunk")?;
    let inputs: Vec<&Path> = shards.paths().collect();
    let output = EncodeOutput::prepare(&args.out, args.force, &inputs, &args.dir)
        .map_err(|e| encode_error(e, args))?;
    out!("{}", describe_backend(&backend));
    out!(
        "encode: {n} points x {d} dims ({}) onto {m} anchors, {chunk} points a chunk",
        shards.dtype().name()
    );
    let started = Instant::now();
    let mut last = Instant::now();
    let row_bytes = d as f64 * shards.dtype().size() as f64;
    let mut progress = |done: usize, total: usize| {
        // Every chunk of a long run, at most once a second, and the end.
        if done == total || last.elapsed().as_secs_f64() >= 1.0 {
            last = Instant::now();
            let seconds = started.elapsed().as_secs_f64();
            eprintln!(
                "encode: {done} of {total} points ({:.1}%), {seconds:.1} s, {:.2} GB/s of input",
                100.0 * done as f64 / total.max(1) as f64,
                done as f64 * row_bytes / seconds.max(1e-9) / 1e9,
            );
        }
    };
    let done = encode::encode(
        &index,
        shards.into_chunks(chunk),
        &backend,
        output,
        &mut progress,
    )
    .map_err(|e| encode_error(e, args))?;
    let seconds = started.elapsed().as_secs_f64();
    out!(
        "encoded: {} ({} points in {} chunk{}, {seconds:.2} s, {:.2} GB/s of input)",
        args.out.display(),
        done.n,
        done.chunks,
        if done.chunks == 1 { "" } else { "s" },
        done.n as f64 * row_bytes / seconds.max(1e-9) / 1e9
    );
    let st = done.stages;
    if st != encode::Stages::default() {
        out!(
            "stages: setup {:.2} s; reader {:.2} s reading, {:.2} s checking again; encode waited {:.2} s for input, {:.2} s for the device",
            st.setup.as_secs_f64(),
            st.reading.as_secs_f64(),
            st.checking.as_secs_f64(),
            st.waiting_for_input.as_secs_f64(),
            st.waiting_for_device.as_secs_f64()
        );
    }
    Ok(())
}

/// An [`EncodeError`] with the flag it is about, and the one that
/// overrides a refusal.
fn encode_error(e: EncodeError, args: &EncodeArgs) -> anyhow::Error {
    let out = args.out.display();
    match e {
        EncodeError::Exists(_) => anyhow::anyhow!(
            "--out {out}: already exists; pass --force to replace it, or choose another file"
        ),
        EncodeError::Shards(e) => npy_error(e),
        EncodeError::Dimension { .. } | EncodeError::Anneal(_) | EncodeError::NoPoints => {
            anyhow::Error::new(e).context("--npy")
        }
        other => anyhow::Error::new(other).context("--out"),
    }
}
