//! Each kind's points have the statistics its doc claims, the same bits for
//! the same seed, and the normal kind is the bench's points from before
//! there were kinds.

use super::*;

/// `n` points of `kind` at `d`, row-major.
fn sample(kind: Kind, n: u64, d: u64) -> Vec<f32> {
    let mut points = Points::new(kind, n, d);
    let mut row = vec![0.0; d as usize];
    let mut out = Vec::new();
    for _ in 0..n {
        points.next_row(&mut row);
        out.extend_from_slice(&row);
    }
    out
}

/// The rows a kind draws before its points: centres or directions.
fn drawn(kind: Kind, n: u64, d: usize) -> Vec<f32> {
    match Points::new(kind, n, d as u64).params {
        Params::Centres(rows) | Params::Directions(rows) | Params::Cone(rows) => rows,
        other => panic!("{kind:?} draws {other:?}"),
    }
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

fn mean_and_var(v: &[f32]) -> (f64, f64) {
    let mean = v.iter().map(|x| f64::from(*x)).sum::<f64>() / v.len() as f64;
    let var = v
        .iter()
        .map(|x| (f64::from(*x) - mean).powi(2))
        .sum::<f64>()
        / v.len() as f64;
    (mean, var)
}

/// The variance of the points projected on `u` (unit norm).
fn var_along(points: &[f32], d: usize, u: &[f32]) -> f64 {
    let proj: Vec<f32> = points.chunks_exact(d).map(|p| dot(p, u) as f32).collect();
    mean_and_var(&proj).1
}

#[test]
fn kinds_parse_by_name_and_a_bad_one_names_them_all() {
    for kind in ALL {
        assert_eq!(kind.name().parse::<Kind>(), Ok(kind));
        // The name in bench.json is the name on the command line.
        assert_eq!(
            serde_json::to_value(kind).unwrap(),
            serde_json::Value::from(kind.name())
        );
    }
    let err = "gaussian".parse::<Kind>().unwrap_err();
    assert_eq!(
        err,
        "unknown kind `gaussian`; the kinds are normal, offset, scaled-up, scaled-down, clustered, anisotropic, embedding"
    );
    assert_eq!(Kind::defaults(true), [Kind::Normal, Kind::Offset]);
    assert_eq!(Kind::defaults(false), ALL);
    // The table's descriptions say the constants the points are made with.
    let says = |kind: Kind, what: &[String]| {
        let text = kind.description();
        assert!(what.iter().all(|w| text.contains(w.as_str())), "{text}");
    };
    says(Kind::Offset, &[format!("N({OFFSET_MEAN}, 1)")]);
    says(Kind::ScaledUp, &[format!("{SCALE_UP:e}")]);
    says(Kind::ScaledDown, &[format!("{SCALE_DOWN:e}")]);
    says(
        Kind::Clustered,
        &[format!("{CENTRES} "), format!("{CLUSTER_NOISE}/sqrt(d)")],
    );
    says(
        Kind::Anisotropic,
        &[format!("{DOMINANT} "), format!("scale {DOMINANT_SCALE} ")],
    );
}

#[test]
fn chosen_kinds_keep_their_order_once_and_default_by_quick() {
    let names = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(chosen(None, false).unwrap(), ALL);
    assert_eq!(chosen(None, true).unwrap(), [Kind::Normal, Kind::Offset]);
    let given = names(&["clustered", " scaled-down", "clustered"]);
    for quick in [false, true] {
        assert_eq!(
            chosen(Some(&given), quick).unwrap(),
            [Kind::Clustered, Kind::ScaledDown]
        );
    }
    let err = chosen(Some(&names(&["normal", "gaussian"])), false).unwrap_err();
    assert!(err.starts_with("unknown kind `gaussian`"), "{err}");
}

#[test]
fn every_kind_is_deterministic_and_differs_from_the_others() {
    for kind in ALL {
        assert_eq!(sample(kind, 50, 7), sample(kind, 50, 7), "{kind:?}");
        // Another (n, d) is another seed.
        assert_ne!(
            sample(kind, 50, 7)[..7],
            sample(kind, 51, 7)[..7],
            "{kind:?}"
        );
        for other in ALL.into_iter().filter(|o| *o != kind) {
            assert_ne!(
                sample(kind, 20, 7),
                sample(other, 20, 7),
                "{kind:?} {other:?}"
            );
        }
    }
}

/// The normal kind is what `write_points` wrote before issue 39: the same
/// seed, the same stream.
#[test]
fn normal_points_are_the_ones_from_before_kinds() {
    use rand_core::SeedableRng as _;
    let (n, d) = (30_u64, 5_u64);
    let mut rng = XorShiftRng::seed_from_u64(n ^ (d << 40) ^ 0x6b69_6c6e);
    let before: Vec<f32> = (0..n * d)
        .map(|_| -> f32 { StandardNormal.sample(&mut rng) })
        .collect();
    assert_eq!(sample(Kind::Normal, n, d), before);
    let (mean, var) = mean_and_var(&sample(Kind::Normal, 2000, 8));
    assert!(
        mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
        "{mean} {var}"
    );
}

#[test]
fn scaled_kinds_are_the_normal_points_scaled() {
    let normal = sample(Kind::Normal, 500, 8);
    let up = sample(Kind::ScaledUp, 500, 8);
    let down = sample(Kind::ScaledDown, 500, 8);
    for ((x, u), w) in normal.iter().zip(&up).zip(&down) {
        assert_eq!(*u, x * 1e3);
        assert_eq!(*w, x * 1e-3);
    }
    let (_, var) = mean_and_var(&up);
    assert!((var.sqrt() / 1e3 - 1.0).abs() < 0.05, "{var}");
    let (_, var) = mean_and_var(&down);
    assert!((var.sqrt() / 1e-3 - 1.0).abs() < 0.05, "{var}");
}

/// Far from 0 in every dimension, the same direction for every point.
#[test]
fn offset_points_share_a_mean_far_from_zero() {
    let (n, d) = (2000, 16);
    let v = sample(Kind::Offset, n, d as u64);
    let mut mean = vec![0.0_f32; d];
    for p in v.chunks_exact(d) {
        for (m, x) in mean.iter_mut().zip(p) {
            *m += x / n as f32;
        }
    }
    assert!(mean.iter().all(|m| *m > 3.0), "{mean:?}");
    let average = mean.iter().sum::<f32>() / d as f32;
    assert!((average - OFFSET_MEAN).abs() < 1.0, "{average}");
    // Unit noise about that mean.
    let centred: Vec<f32> = v
        .chunks_exact(d)
        .flat_map(|p| p.iter().zip(&mean).map(|(x, m)| x - m))
        .collect();
    let (_, var) = mean_and_var(&centred);
    assert!((var - 1.0).abs() < 0.05, "{var}");
    let mean_norm = dot(&mean, &mean).sqrt();
    for p in v.chunks_exact(d) {
        let cos = dot(p, &mean) / (dot(p, p).sqrt() * mean_norm);
        assert!(cos > 0.9, "{cos}");
    }
}

/// Unit norm, each point close to one of the centres.
#[test]
fn clustered_points_are_unit_norm_near_their_centres() {
    let (n, d) = (3000, 32);
    let centres = drawn(Kind::Clustered, n, d);
    assert_eq!(centres.len(), CENTRES * d);
    for c in centres.chunks_exact(d) {
        assert!((dot(c, c) - 1.0).abs() < 1e-5);
    }
    let v = sample(Kind::Clustered, n, d as u64);
    let mut used = std::collections::BTreeSet::new();
    for p in v.chunks_exact(d) {
        assert!((dot(p, p).sqrt() - 1.0).abs() < 1e-5, "{}", dot(p, p));
        let (best, cos) = centres
            .chunks_exact(d)
            .map(|c| dot(p, c))
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        // Noise of norm about 0.05: the centre is within a few hundredths.
        assert!(cos > 0.99, "{cos}");
        used.insert(best);
    }
    assert!(used.len() > CENTRES / 2, "{} centres used", used.len());
}

/// Variance 1 + 100 along each dominant direction, 1 across them.
#[test]
fn anisotropic_points_have_four_dominant_directions() {
    let (n, d) = (4000, 16);
    let dirs = drawn(Kind::Anisotropic, n, d);
    assert_eq!(dirs.len(), DOMINANT * d);
    let rows: Vec<&[f32]> = dirs.chunks_exact(d).collect();
    for (i, a) in rows.iter().enumerate() {
        for (j, b) in rows.iter().enumerate() {
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((dot(a, b) - want).abs() < 1e-5, "{i} {j}");
        }
    }
    let v = sample(Kind::Anisotropic, n, d as u64);
    let dominant = f64::from(DOMINANT_SCALE).powi(2) + 1.0;
    for u in &rows {
        let var = var_along(&v, d, u);
        assert!((var / dominant - 1.0).abs() < 0.1, "{var}");
    }
    // A direction orthogonal to all four: unit variance.
    let mut e = vec![0.0_f32; d];
    e[0] = 1.0;
    for u in &rows {
        let c = dot(&e, u) as f32;
        e.iter_mut().zip(*u).for_each(|(x, y)| *x -= c * y);
    }
    let norm = dot(&e, &e).sqrt() as f32;
    e.iter_mut().for_each(|x| *x /= norm);
    let var = var_along(&v, d, &e);
    assert!((var - 1.0).abs() < 0.1, "{var}");
    // The total: d of noise and four dominant directions.
    let total: f64 = (0..d)
        .map(|j| mean_and_var(&v.iter().skip(j).step_by(d).copied().collect::<Vec<_>>()).1)
        .sum();
    let want = d as f64 + DOMINANT as f64 * (dominant - 1.0);
    assert!((total / want - 1.0).abs() < 0.1, "{total} {want}");
}

#[test]
fn each_kind_writes_its_own_folder_once_per_n_d() {
    let tmp = tempfile::tempdir().unwrap();
    let sizes = [(4, 3), (4, 3), (200, 8)];
    for kind in [Kind::Normal, Kind::Clustered] {
        let dir = write_points(tmp.path(), kind, &sizes).unwrap();
        assert_eq!(dir, tmp.path().join(kind.name()));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        let npy =
            npyz::NpyFile::new(std::fs::File::open(dir.join("x_200_8.npy")).unwrap()).unwrap();
        assert_eq!(npy.shape(), [200, 8]);
        assert_eq!(npy.into_vec::<f32>().unwrap(), sample(kind, 200, 8));
    }
    // A missing or unwritable folder is an error, not a panic.
    let file = tmp.path().join("file");
    std::fs::write(&file, "").unwrap();
    for dir in [tmp.path().join("nonexistent"), file] {
        assert!(write_points(&dir, Kind::Normal, &sizes).is_err(), "{dir:?}");
        assert!(!dir.join("normal").exists());
    }
}

/// Unit vectors in one narrow cone: every point at about 0.7 to the shared
/// direction, about 0.5 to each other, far from the origin's spread.
#[test]
fn embedding_points_are_unit_vectors_in_one_cone() {
    let (n, d) = (2000, 64);
    let cone = drawn(Kind::Embedding, n, d);
    assert_eq!(cone.len(), d);
    assert!((dot(&cone, &cone) - 1.0).abs() < 1e-5);
    let v = sample(Kind::Embedding, n, d as u64);
    let rows: Vec<&[f32]> = v.chunks_exact(d).collect();
    let mut to_cone = 0.0;
    for p in &rows {
        assert!((dot(p, p) - 1.0).abs() < 1e-5, "{}", dot(p, p));
        let cos = dot(p, &cone);
        assert!(cos > 0.3 && cos < 0.95, "{cos}");
        to_cone += cos / n as f64;
    }
    assert!((to_cone - 0.707).abs() < 0.03, "{to_cone}");
    let pairs: f64 = rows.windows(2).map(|w| dot(w[0], w[1])).sum::<f64>() / (n - 1) as f64;
    assert!((pairs - 0.5).abs() < 0.05, "{pairs}");
}
