//! The k-means bench's data kinds (issue 39): standard normal and six
//! distributions shaped like the data users have (a shared offset, extreme
//! scales, unit-norm clusters, a few dominant directions, unit vectors in
//! one narrow cone as embedding models give them), each generated
//! from a seed, row by row, and written as f32 `KIND/x_N_D.npy`.

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result};
use rand_core::{Rng as _, SeedableRng as _};
use rand_distr::{Distribution as _, StandardNormal};
use rand_xorshift::XorShiftRng;
use serde::{Deserialize, Serialize};

/// One distribution of the points; its name is its folder and its key in
/// `bench.json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Kind {
    /// Standard normal: the points of every bench before issue 39.
    #[default]
    Normal,
    /// Standard normal plus one mean vector shared by every point, each of
    /// its coordinates drawn from N([`OFFSET_MEAN`], 1): every point near
    /// one direction, as real embeddings are.
    Offset,
    /// [`Kind::Normal`]'s points times [`SCALE_UP`].
    ScaledUp,
    /// [`Kind::Normal`]'s points times [`SCALE_DOWN`].
    ScaledDown,
    /// [`CENTRES`] random centres on the unit sphere, gaussian noise of
    /// `CLUSTER_NOISE / sqrt(d)` per coordinate, each point scaled to unit
    /// norm (normalised embeddings).
    Clustered,
    /// [`DOMINANT`] orthonormal random directions of scale
    /// [`DOMINANT_SCALE`] over isotropic unit noise.
    Anisotropic,
    /// Unit vectors in one narrow cone, as sentence-embedding models give
    /// them: one shared random unit direction plus gaussian noise of
    /// `1 / sqrt(d)` per coordinate, each point scaled to unit norm (cosine
    /// to the shared direction about 0.7, to each other about 0.5).
    Embedding,
}

/// Every kind, in the order the table shows them.
pub(crate) const ALL: [Kind; 7] = [
    Kind::Normal,
    Kind::Offset,
    Kind::ScaledUp,
    Kind::ScaledDown,
    Kind::Clustered,
    Kind::Anisotropic,
    Kind::Embedding,
];

/// The mean of each coordinate of [`Kind::Offset`]'s shared vector.
pub(crate) const OFFSET_MEAN: f32 = 8.0;
pub(crate) const SCALE_UP: f32 = 1e3;
pub(crate) const SCALE_DOWN: f32 = 1e-3;
/// [`Kind::Clustered`]'s centres and noise (its norm, about).
pub(crate) const CENTRES: usize = 1024;
pub(crate) const CLUSTER_NOISE: f64 = 0.05;
/// [`Kind::Anisotropic`]'s directions and their scale.
pub(crate) const DOMINANT: usize = 4;
pub(crate) const DOMINANT_SCALE: f32 = 10.0;

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Normal => "normal",
            Kind::Offset => "offset",
            Kind::ScaledUp => "scaled-up",
            Kind::ScaledDown => "scaled-down",
            Kind::Clustered => "clustered",
            Kind::Anisotropic => "anisotropic",
            Kind::Embedding => "embedding",
        }
    }

    /// One line for the table's section.
    pub(crate) fn description(self) -> &'static str {
        match self {
            Kind::Normal => "standard normal",
            Kind::Offset => "standard normal plus one shared mean, each coordinate N(8, 1)",
            Kind::ScaledUp => "the normal points x 1e3",
            Kind::ScaledDown => "the normal points x 1e-3",
            Kind::Clustered => {
                "1024 random unit centres, noise 0.05/sqrt(d) per coordinate, each point unit norm"
            }
            Kind::Anisotropic => "4 orthonormal random directions of scale 10 over unit noise",
            Kind::Embedding => {
                "one shared unit direction plus noise 1/sqrt(d) per coordinate, each point unit norm"
            }
        }
    }

    /// What `--kinds` defaults to: every kind, or two with `--quick`.
    pub(crate) fn defaults(quick: bool) -> Vec<Kind> {
        if quick {
            vec![Kind::Normal, Kind::Offset]
        } else {
            ALL.to_vec()
        }
    }
}

/// `--kinds`' names read, each kind once, in the order given; without
/// them, [`Kind::defaults`].
pub(crate) fn chosen(names: Option<&[String]>, quick: bool) -> Result<Vec<Kind>, String> {
    let Some(names) = names else {
        return Ok(Kind::defaults(quick));
    };
    let mut kinds = Vec::new();
    for name in names {
        let kind: Kind = name.trim().parse()?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = ALL.iter().map(|k| k.name()).collect();
            format!("unknown kind `{s}`; the kinds are {}", names.join(", "))
        })
    }
}

/// The seed of `(n, d)`'s points; [`Kind::Normal`]'s is the one the bench
/// used before there were kinds, so its points are unchanged, and the
/// scaled kinds share it, so that they are the normal points scaled.
fn seed(kind: Kind, n: u64, d: u64) -> u64 {
    let normal = n ^ (d << 40) ^ 0x6b69_6c6e;
    let salt: u64 = match kind {
        Kind::Normal | Kind::ScaledUp | Kind::ScaledDown => 0,
        Kind::Offset => 1,
        Kind::Clustered => 2,
        Kind::Anisotropic => 3,
        Kind::Embedding => 4,
    };
    normal ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64)
}

/// What a kind draws once per `(n, d)` before its points.
#[derive(Debug)]
enum Params {
    Scale(f32),
    /// The shared mean vector.
    Offset(Vec<f32>),
    /// `CENTRES × d`, each row of unit norm.
    Centres(Vec<f32>),
    /// `DOMINANT × d`, orthonormal rows.
    Directions(Vec<f32>),
    /// The cone's shared unit direction.
    Cone(Vec<f32>),
}

/// The points of one kind and `(n, d)`, one row at a time.
#[derive(Debug)]
pub(crate) struct Points {
    d: usize,
    rng: XorShiftRng,
    params: Params,
}

impl Points {
    pub(crate) fn new(kind: Kind, n: u64, d: u64) -> Self {
        let mut rng = XorShiftRng::seed_from_u64(seed(kind, n, d));
        let d = d as usize;
        let params = match kind {
            Kind::Normal => Params::Scale(1.0),
            Kind::ScaledUp => Params::Scale(SCALE_UP),
            Kind::ScaledDown => Params::Scale(SCALE_DOWN),
            Kind::Offset => {
                Params::Offset((0..d).map(|_| normal(&mut rng) + OFFSET_MEAN).collect())
            }
            Kind::Clustered => Params::Centres(unit_rows(&mut rng, CENTRES, d, false)),
            Kind::Anisotropic => Params::Directions(unit_rows(&mut rng, DOMINANT.min(d), d, true)),
            Kind::Embedding => Params::Cone(unit_rows(&mut rng, 1, d, false)),
        };
        Self { d, rng, params }
    }

    /// The next point.
    pub(crate) fn next_row(&mut self, row: &mut [f32]) {
        let rng = &mut self.rng;
        match &self.params {
            // Times 1 is exact: the normal kind's points are unchanged.
            Params::Scale(s) => row.iter_mut().for_each(|x| *x = normal(rng) * s),
            Params::Offset(mean) => {
                for (x, m) in row.iter_mut().zip(mean) {
                    *x = normal(rng) + m;
                }
            }
            Params::Centres(centres) => {
                let c = (rng.next_u64() % CENTRES as u64) as usize;
                let centre = &centres[c * self.d..(c + 1) * self.d];
                let sigma = (CLUSTER_NOISE / (self.d as f64).sqrt()) as f32;
                for (x, m) in row.iter_mut().zip(centre) {
                    *x = m + sigma * normal(rng);
                }
                normalise(row);
            }
            Params::Directions(dirs) => {
                row.iter_mut().for_each(|x| *x = normal(rng));
                for dir in dirs.chunks_exact(self.d) {
                    let g = DOMINANT_SCALE * normal(rng);
                    for (x, u) in row.iter_mut().zip(dir) {
                        *x += g * u;
                    }
                }
            }
            Params::Cone(direction) => {
                let sigma = (1.0 / (self.d as f64).sqrt()) as f32;
                for (x, u) in row.iter_mut().zip(direction) {
                    *x = u + sigma * normal(rng);
                }
                normalise(row);
            }
        }
    }
}

fn normal(rng: &mut XorShiftRng) -> f32 {
    StandardNormal.sample(rng)
}

/// Scales `v` to unit norm (a zero vector stays zero).
fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.iter_mut()
            .for_each(|x| *x = (f64::from(*x) / norm) as f32);
    }
}

/// `count` gaussian directions of unit norm (`count × d`), made orthogonal
/// to each other first when `orthogonal` (Gram-Schmidt; `count <= d`).
fn unit_rows(rng: &mut XorShiftRng, count: usize, d: usize, orthogonal: bool) -> Vec<f32> {
    let mut rows: Vec<Vec<f32>> = Vec::with_capacity(count);
    for _ in 0..count {
        let mut v: Vec<f32> = (0..d).map(|_| normal(rng)).collect();
        if orthogonal {
            for u in &rows {
                let dot: f64 = v
                    .iter()
                    .zip(u)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                for (a, b) in v.iter_mut().zip(u) {
                    *a -= (dot * f64::from(*b)) as f32;
                }
            }
        }
        normalise(&mut v);
        rows.push(v);
    }
    rows.concat()
}

/// `DIR/KIND/x_N_D.npy` of every `(n, d)` of `sizes`, each once, streamed
/// to disk; returns the kind's folder.
pub(crate) fn write_points(dir: &Path, kind: Kind, sizes: &[(u64, u64)]) -> Result<PathBuf> {
    use npyz::WriterBuilder as _;
    let kind_dir = dir.join(kind.name());
    // Not `create_dir_all`: `dir` is the bench's own folder, made first.
    if !kind_dir.is_dir() {
        std::fs::create_dir(&kind_dir)
            .with_context(|| format!("cannot create {}", kind_dir.display()))?;
    }
    let mut done = Vec::new();
    for &(n, d) in sizes {
        if done.contains(&(n, d)) {
            continue;
        }
        done.push((n, d));
        let path = points_path(&kind_dir, n, d);
        println!("bench: writing {} ({n} x {d} f32)", path.display());
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut writer = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(&[n, d])
            .writer(BufWriter::new(file))
            .begin_nd()
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut points = Points::new(kind, n, d);
        let mut row = vec![0.0_f32; d as usize];
        for _ in 0..n {
            points.next_row(&mut row);
            writer
                .extend(row.iter().copied())
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        writer
            .finish()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(kind_dir)
}

/// `DIR/x_N_D.npy`, the name `kmeans_anchors.py --npy DIR` reads.
pub(crate) fn points_path(dir: &Path, n: u64, d: u64) -> PathBuf {
    dir.join(format!("x_{n}_{d}.npy"))
}

#[cfg(test)]
#[path = "points_tests.rs"]
mod tests;
