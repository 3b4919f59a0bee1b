//! Where one rank's setup goes: each part of the time from the process's
//! start to its first iteration, as `rank R: setup ...` says it. Parts that
//! overlap are each timed whole: the points are made or mapped while the
//! GPU's context and modules load, and the rendezvous (which waits for the
//! slowest rank) runs while this rank checks and uploads its rows, so the
//! parts add up to more than the setup when the overlap works.

use std::time::Instant;

use kiln_anneal::distributed::SessionTimes;

/// Seconds of each part of a rank's setup (0 where the part did not run).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Setup {
    /// The backend: the CUDA context on this rank's GPU and its modules.
    pub(crate) context: f64,
    /// The points made (synthetic: this rank's rows only) or mapped.
    pub(crate) points: f64,
    /// This rank's rows checked (read, for mapped files).
    pub(crate) rows: f64,
    /// The library's part: upload, rendezvous, NCCL, barrier, CPU engine.
    pub(crate) session: SessionTimes,
}

impl Setup {
    /// The setup's `total` seconds and its parts, in milliseconds, on one
    /// line.
    pub(crate) fn describe(&self, total: f64) -> String {
        let parts = [
            ("context and modules", self.context),
            ("points", self.points),
            ("rows checked", self.rows),
            ("upload", self.session.upload),
            ("rendezvous", self.session.rendezvous),
            ("nccl init", self.session.nccl_init),
            ("nccl warm-up", self.session.warmup),
            ("barrier", self.session.barrier),
            ("cpu engine", self.session.engine),
        ];
        let shown: Vec<String> = parts
            .iter()
            .map(|(name, s)| format!("{name} {:.1} ms", s * 1e3))
            .collect();
        format!("{:.1} ms ({})", total * 1e3, shown.join(", "))
    }
}

/// `f`'s result and the seconds it took.
pub(crate) fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed().as_secs_f64())
}
