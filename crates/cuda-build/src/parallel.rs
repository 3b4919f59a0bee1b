//! Running a build's steps in parallel under Cargo's jobserver: `NUM_JOBS`
//! workers at most, each beyond the first holding a jobserver token, so that
//! nvcc processes never outnumber what `cargo build -j` allows. A worker
//! beyond the first waits for a token only while steps remain: two build
//! scripts of kernel crates running at once under `-j2` hold both of
//! Cargo's tokens implicitly, and a worker that waited for a third would
//! wait for ever (each script's first worker does its steps meanwhile).

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
    map_with(&jobserver_client(parallel), parallel, items, f)
}

/// [`map`] with `parallel` workers at most under `client`'s tokens.
fn map_with<T: Sync, R: Send>(
    client: &jobserver::Client,
    parallel: usize,
    items: &[T],
    f: &(dyn Fn(&T) -> Result<R, Error> + Sync),
) -> Result<Vec<R>, Error> {
    let next = Mutex::new(0usize);
    let results: Mutex<BTreeMap<usize, Result<R, Error>>> = Mutex::new(BTreeMap::new());
    // Tokens for the workers beyond the first, asked for by a helper thread
    // that dropping `helper` stops; a token nobody took is released when
    // `tokens` is dropped.
    let (send, tokens) = std::sync::mpsc::channel();
    let helper = client.clone().into_helper_thread(move |token| {
        let _ = send.send(token);
    });
    if let Ok(helper) = &helper {
        for _ in 1..parallel {
            helper.request_token();
        }
    }
    let tokens = Mutex::new(tokens);
    let has_helper = helper.is_ok();
    std::thread::scope(|scope| {
        for worker in 0..parallel {
            let (next, results, tokens) = (&next, &results, &tokens);
            scope.spawn(move || {
                // The build script itself holds one implicit token.
                let token = if worker == 0 {
                    None
                } else if !has_helper {
                    return;
                } else {
                    let remaining =
                        || *next.lock().unwrap_or_else(|e| e.into_inner()) < items.len();
                    match token_while(tokens, &remaining) {
                        Some(token) => Some(token),
                        None => return,
                    }
                };
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
    // Stops the helper thread, which may be waiting for a token.
    drop(helper);
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_values()
        .collect()
}

/// A token from the helper thread, waited for while `remaining()` holds;
/// `None` once it no longer does, or the jobserver failed.
fn token_while(
    tokens: &Mutex<std::sync::mpsc::Receiver<std::io::Result<jobserver::Acquired>>>,
    remaining: &dyn Fn() -> bool,
) -> Option<jobserver::Acquired> {
    use std::sync::mpsc::RecvTimeoutError;
    while remaining() {
        let tokens = tokens.lock().unwrap_or_else(|e| e.into_inner());
        match tokens.recv_timeout(std::time::Duration::from_millis(20)) {
            Ok(Ok(token)) => return Some(token),
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two kernel crates' build scripts at once under `cargo build -j2`:
    /// Cargo's two tokens are both held implicitly, none is free. Each
    /// map still finishes (its first worker does every step), and the
    /// results come in item order. Before, a worker beyond the first waited
    /// for a token for ever (a hang: the channel's bound turns it into a
    /// failure).
    #[test]
    fn maps_finish_when_the_jobserver_has_no_free_token() {
        let client = jobserver::Client::new(1).unwrap();
        let _held = client.acquire().unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        for _ in 0..2 {
            let (client, done) = (client.clone(), done.clone());
            std::thread::spawn(move || {
                let items: Vec<u32> = (0..7).collect();
                let doubled = map_with(&client, 4, &items, &|x| Ok(x * 2)).unwrap();
                done.send(doubled).unwrap();
            });
        }
        for _ in 0..2 {
            let doubled = finished
                .recv_timeout(std::time::Duration::from_secs(120))
                .expect("a map waited for a jobserver token no one would give back");
            assert_eq!(doubled, [0, 2, 4, 6, 8, 10, 12]);
        }
    }

    /// With tokens free, the extra workers take them and give them back.
    #[test]
    fn workers_give_their_tokens_back() {
        let client = jobserver::Client::new(3).unwrap();
        let items: Vec<u32> = (0..50).collect();
        let out = map_with(&client, 4, &items, &|x| Ok(*x)).unwrap();
        assert_eq!(out, items);
        // Every token is back: three can be taken again.
        let all: Vec<_> = (0..3).map(|_| client.acquire().unwrap()).collect();
        assert_eq!(all.len(), 3);
    }
}
