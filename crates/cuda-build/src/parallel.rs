//! Running a build's steps in parallel under Cargo's jobserver: `NUM_JOBS`
//! workers at most, each beyond the first holding a jobserver token, so that
//! nvcc processes never outnumber what `cargo build -j` allows.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::error::Error;

/// `f` over every item, in parallel; results in item order. The first error
/// (in item order) wins.
pub(crate) fn map<T: Sync, R: Send>(
    items: &[T],
    f: &(dyn Fn(&T) -> Result<R, Error> + Sync),
) -> Result<Vec<R>, Error> {
    let parallel = std::env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, items.len().max(1));
    let client = jobserver_client(parallel);
    let next = Mutex::new(0usize);
    let results: Mutex<BTreeMap<usize, Result<R, Error>>> = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for worker in 0..parallel {
            let (next, results, client) = (&next, &results, &client);
            scope.spawn(move || {
                // The build script itself holds one implicit token.
                let token = if worker == 0 {
                    None
                } else {
                    client.acquire().ok()
                };
                if worker > 0 && token.is_none() {
                    return;
                }
                loop {
                    let index = {
                        let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                        let index = *next;
                        *next += 1;
                        index
                    };
                    let Some(item) = items.get(index) else { break };
                    let result = f(item);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(index, result);
                }
                drop(token);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_values()
        .collect()
}

/// Cargo's jobserver when there is one, else a private one of `parallel`
/// tokens.
fn jobserver_client(parallel: usize) -> jobserver::Client {
    // SAFETY: `from_env` takes over file descriptors named in MAKEFLAGS /
    // CARGO_MAKEFLAGS; Cargo passes them open to build scripts, and nothing in
    // this process closes or reuses them.
    let inherited = unsafe { jobserver::Client::from_env() };
    inherited.unwrap_or_else(|| {
        jobserver::Client::new(parallel.saturating_sub(1).max(1)).expect("creating a jobserver")
    })
}
