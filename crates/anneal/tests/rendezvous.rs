//! The rendezvous against hostile and careless peers, on loopback (a thread
//! per rank): strangers without the job's secret, ranks of a run of
//! another size, replayed hellos, silent connections, floods, frame-size
//! bombs and garbage are each refused and logged once while the real rank
//! still joins; a rank 0 without the secret is never joined; two jobs on
//! one port each run with their own ranks or one fails in one line.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use kiln_anneal::distributed::{
    rendezvous, Communicator, DistError, JobSecret, RankEnv, Refusal, RefusalReason, TcpComm,
    NCCL_ID_BYTES,
};

mod rank_support;

use rank_support::{env, free_port, job_env};

/// The id rank 0 hands out in these tests.
const ID: [u8; NCCL_ID_BYTES] = [9; NCCL_ID_BYTES];

/// Waits (bounded, so a broken build fails instead of hanging) until
/// `done()`.
#[track_caller]
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// A connection to the rendezvous at `port`, once rank 0 listens.
fn connect(port: u16) -> TcpStream {
    let mut stream = None;
    wait_until("rank 0 listens", || {
        stream = stream
            .take()
            .or_else(|| TcpStream::connect(("127.0.0.1", port)).ok());
        stream.is_some()
    });
    let stream = stream.unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
}

fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut out = (bytes.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// The next frame, `None` once the other end has closed.
fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 8];
    stream.read_exact(&mut len).ok()?;
    let mut bytes = vec![0u8; u64::from_le_bytes(len) as usize];
    stream.read_exact(&mut bytes).ok()?;
    Some(bytes)
}

/// Rank 0 of a 2-rank job, on a thread, logging what it refuses.
struct Root {
    port: u16,
    refusals: Arc<Mutex<Vec<Refusal>>>,
    run: JoinHandle<Result<[u8; NCCL_ID_BYTES], DistError>>,
}

impl Root {
    /// Starts it with `handshake` as each connection's handshake timeout.
    fn start(handshake: Duration) -> Self {
        let port = free_port();
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&refusals);
        let env = RankEnv {
            handshake_timeout: handshake,
            ..env(0, 2, port, 60)
        };
        let run = thread::spawn(move || {
            let logged = move |r: &Refusal| log.lock().unwrap().push(r.clone());
            rendezvous(&env, "p", || Ok(ID), logged).map(|(_, id)| id)
        });
        Self {
            port,
            refusals,
            run,
        }
    }

    fn wait_for_refusals(&self, count: usize) {
        wait_until(&format!("{count} refusals"), || {
            self.refusals.lock().unwrap().len() >= count
        });
    }

    /// The real rank 1 joins; returns every refusal rank 0 logged.
    fn finish(self) -> Vec<RefusalReason> {
        let leaf = RankEnv {
            handshake_timeout: Duration::from_secs(1),
            ..env(1, 2, self.port, 60)
        };
        let joined = rendezvous(&leaf, "p", || unreachable!(), |_| {});
        assert_eq!(joined.unwrap().1, ID, "the real rank got rank 0's id");
        assert_eq!(self.run.join().unwrap().unwrap(), ID);
        let log = self.refusals.lock().unwrap();
        for refusal in log.iter() {
            let text = refusal.to_string();
            assert!(text.starts_with("refused a connection from 127.0.0.1:"));
            assert!(!text.contains('\n'), "{text}");
        }
        log.iter().map(|r| r.reason.clone()).collect()
    }
}

/// A rank of another job (another secret, or none), and a rank of this job
/// but of a run of another size: each refused and logged once, told why,
/// and the real rank still joins.
#[test]
fn strangers_and_other_world_sizes_are_refused_and_the_real_rank_joins() {
    type Case = (RankEnv, fn(&RefusalReason) -> bool, fn(&DistError) -> bool);
    let cases: [Case; 4] = [
        (
            job_env(1, 2, 0, "another job"),
            |r| *r == RefusalReason::Stranger,
            |e| matches!(e, DistError::OtherJob { .. }),
        ),
        (
            RankEnv {
                secret: JobSecret::unset(),
                ..env(1, 2, 0, 30)
            },
            |r| *r == RefusalReason::Stranger,
            |e| matches!(e, DistError::OtherJob { .. }),
        ),
        (
            // The same secret differing only in its last byte.
            job_env(1, 2, 0, "the test joc"),
            |r| *r == RefusalReason::Stranger,
            |e| matches!(e, DistError::OtherJob { .. }),
        ),
        (
            env(1, 3, 0, 30),
            |r| matches!(r, RefusalReason::WorldSize { theirs: 3, ours: 2 }),
            // Rank 0's reason comes over the wire: text.
            |e| matches!(e, DistError::Refused(why) if why.contains("WORLD_SIZE 3 where rank 0 has 2")),
        ),
    ];
    for (hostile, expected, fails_with) in cases {
        let root = Root::start(Duration::from_secs(5));
        let hostile = RankEnv {
            master_port: root.port,
            ..hostile
        };
        let err = rendezvous(&hostile, "p", || unreachable!(), |_| {}).unwrap_err();
        let text = err.to_string();
        assert!(fails_with(&err), "{err:?}");
        assert!(!text.contains('\n'), "{text}");
        root.wait_for_refusals(1);
        let refusals = root.finish();
        assert_eq!(refusals.len(), 1, "logged once: {refusals:?}");
        assert!(expected(&refusals[0]), "{refusals:?}");
    }
}

/// Silent connections (connected only, half a length, a challenge read and
/// never answered), one or more than rank 0 handshakes at once, do not
/// hold rank 0: each times out on its own and the real rank joins.
#[test]
fn silent_connections_and_floods_do_not_hold_rank_0() {
    let half_a_length = |s: &mut TcpStream| s.write_all(&[1, 0, 0, 0]).unwrap();
    let read_challenge = |s: &mut TcpStream| assert!(read_frame(s).is_some());
    let nothing = |_: &mut TcpStream| {};
    type Act<'a> = &'a dyn Fn(&mut TcpStream);
    let cases: [(usize, Act<'_>); 4] = [
        (1, &nothing),
        (1, &half_a_length),
        (1, &read_challenge),
        (40, &nothing),
    ];
    for (count, act) in cases {
        let root = Root::start(Duration::from_secs(1));
        let mut idle: Vec<TcpStream> = (0..count).map(|_| connect(root.port)).collect();
        for stream in &mut idle {
            act(stream);
        }
        let refusals = root.finish();
        // Over the 32 at once, a slot freed (a silent one timed out) before
        // the real rank was taken in.
        let at_least = if count > 32 { count - 32 + 1 } else { 0 };
        assert!(refusals.len() >= at_least, "{refusals:?}");
        for reason in refusals {
            // Closed: a try of the real rank that gave up waiting in the
            // queue, taken in after it had gone.
            assert!(
                matches!(reason, RefusalReason::Silent { .. } | RefusalReason::Closed),
                "{reason:?}"
            );
        }
        // None is left open once the rendezvous is over.
        for mut stream in idle {
            let mut rest = Vec::new();
            if let Err(e) = stream.read_to_end(&mut rest) {
                let still_open = matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
                assert!(!still_open, "{e}");
            }
        }
    }
}

/// Lengths no handshake has, and bytes that are not the handshake: each
/// refused without allocating what it claims, logged once, and the real
/// rank joins.
#[test]
fn frame_size_bombs_and_garbage_are_refused() {
    let hello = |nonce: usize, proof: &str| {
        format!(
            r#"{{"rank":1,"world_size":2,"problem_hash":"x","problem":"p","nonce":{:?},"proof":{proof}}}"#,
            vec![0u8; nonce]
        )
    };
    let mut cases: Vec<(Vec<u8>, &str)> = vec![
        (
            u64::MAX.to_le_bytes().to_vec(),
            "a frame of 18446744073709551615 bytes",
        ),
        (
            (1u64 << 40).to_le_bytes().to_vec(),
            "a frame of 1099511627776 bytes",
        ),
        (
            ((64 << 10) + 1u64).to_le_bytes().to_vec(),
            "a frame of 65537 bytes",
        ),
        (frame(b"\xff\xfe not json"), "a hello that does not parse"),
        (frame(br#"{"rank":1}"#), "a hello that does not parse"),
        (frame(hello(3, "[]").as_bytes()), "a nonce of 3 bytes"),
        (frame(b""), "a hello that does not parse"),
    ];
    // A stranger's hello, well formed, with a proof of the right length.
    cases.push((frame(hello(32, &format!("{:?}", [0u8; 32])).as_bytes()), ""));
    for (bytes, says) in cases {
        let root = Root::start(Duration::from_secs(5));
        let mut stream = connect(root.port);
        stream.write_all(&bytes).unwrap();
        root.wait_for_refusals(1);
        let refusals = root.finish();
        assert_eq!(refusals.len(), 1, "{says}: {refusals:?}");
        match &refusals[0] {
            RefusalReason::Malformed(what) => assert!(what.contains(says), "{what}"),
            RefusalReason::Stranger => assert_eq!(says, ""),
            other => panic!("{says}: {other:?}"),
        }
    }
    // Closed before a word.
    let root = Root::start(Duration::from_secs(5));
    drop(connect(root.port));
    root.wait_for_refusals(1);
    assert_eq!(root.finish(), [RefusalReason::Closed]);
}

/// A hello a real rank of this job sent to someone else (here a fake rank
/// 0 that records it), replayed to the real rank 0, fails on rank 0's
/// fresh nonce.
#[test]
fn a_replayed_hello_is_refused() {
    let fake = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let fake_port = fake.local_addr().unwrap().port();
    let rank = thread::spawn(move || {
        let env = RankEnv {
            timeout: Duration::from_secs(5),
            ..env(1, 2, fake_port, 30)
        };
        rendezvous(&env, "p", || unreachable!(), |_| {})
    });
    let (mut victim, _) = fake.accept().unwrap();
    let challenge = format!(
        r#"{{"protocol":"kiln.rendezvous/2","nonce":{:?}}}"#,
        [7u8; 32]
    );
    victim.write_all(&frame(challenge.as_bytes())).unwrap();
    let hello = read_frame(&mut victim).unwrap();
    drop(victim);
    assert!(
        rank.join().unwrap().is_err(),
        "the fake rank 0 answered nothing"
    );
    let root = Root::start(Duration::from_secs(5));
    let mut stream = connect(root.port);
    assert!(read_frame(&mut stream).is_some(), "rank 0's challenge");
    stream.write_all(&frame(&hello)).unwrap();
    let answer = read_frame(&mut stream).unwrap();
    assert_eq!(answer, br#""Stranger""#);
    root.wait_for_refusals(1);
    assert_eq!(root.finish(), [RefusalReason::Stranger]);
}

/// A rank 0 that does not hold the job's secret (a fake one, which answers
/// as it likes) is never joined: its answers are refused in one line.
#[test]
fn a_rank_0_without_the_secret_is_never_joined() {
    let go = format!(
        r#"{{"Go":{{"nccl_id":{:?},"proof":{:?}}}}}"#,
        [9u8; NCCL_ID_BYTES], [0u8; 32]
    );
    let challenge = format!(
        r#"{{"protocol":"kiln.rendezvous/2","nonce":{:?}}}"#,
        [1u8; 32]
    );
    let other_protocol = r#"{"protocol":"kiln.rendezvous/1","nonce":[]}"#.to_string();
    let other_job: fn(&DistError) -> bool = |e| matches!(e, DistError::OtherJob { .. });
    let frame_bomb: fn(&DistError) -> bool = |e| {
        matches!(e, DistError::Protocol { rank: 0, what }
            if what.starts_with("a frame of 18446744073709551615 bytes"))
    };
    // What the fake rank 0 says first, then answers, and how the rank fails.
    type Case = (Option<String>, Vec<u8>, fn(&DistError) -> bool);
    let cases: [Case; 5] = [
        (Some(challenge.clone()), frame(go.as_bytes()), other_job),
        (Some(challenge.clone()), frame(br#""Stranger""#), other_job),
        (
            Some(challenge.clone()),
            u64::MAX.to_le_bytes().to_vec(),
            frame_bomb,
        ),
        (None, u64::MAX.to_le_bytes().to_vec(), frame_bomb),
        (Some(other_protocol), Vec::new(), |e| {
            matches!(e, DistError::Protocol { rank: 0, what }
                    if what.starts_with("handshake \"kiln.rendezvous/1\""))
        }),
    ];
    for (first, answer, fails_with) in cases {
        let fake = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = fake.local_addr().unwrap().port();
        let rank =
            thread::spawn(move || rendezvous(&env(1, 2, port, 30), "p", || unreachable!(), |_| {}));
        let (mut stream, _) = fake.accept().unwrap();
        if let Some(first) = &first {
            stream.write_all(&frame(first.as_bytes())).unwrap();
            if !answer.is_empty() {
                assert!(read_frame(&mut stream).is_some(), "the rank's hello");
            }
        }
        stream.write_all(&answer).unwrap();
        let err = rank.join().unwrap().unwrap_err();
        let text = err.to_string();
        assert!(fails_with(&err), "{err:?}");
        assert!(!text.contains('\n'), "{text}");
    }
}

/// What one rank of a concurrent job ended with: its sum, or the error.
type Ended = Result<f64, DistError>;

/// Rank 0 could not listen: another program holds the port.
fn port_taken(e: &DistError) -> bool {
    matches!(e, DistError::Io { rank: 0, source, .. } if source.kind() == std::io::ErrorKind::AddrInUse)
}

/// The peer `e` is about: the one that closed, went silent, sent garbage
/// or another problem, or whose socket failed.
fn names_rank(e: &DistError) -> Option<usize> {
    match e {
        DistError::Io { rank, .. }
        | DistError::PeerGone { rank, .. }
        | DistError::Timeout { rank, .. }
        | DistError::Mismatch { rank, .. }
        | DistError::Protocol { rank, .. } => Some(*rank),
        _ => None,
    }
}

/// Two jobs of two ranks each, started at once on one port, each rank
/// adding its job's own numbers (1 + 2, 10 + 20). In every trial each job
/// either sums its own numbers only or fails in one line (its rank 0 could
/// not listen; its rank 1 met the other job's rank 0, or none); one of
/// them always runs.
#[test]
fn two_jobs_on_one_port_never_mix() {
    for trial in 0..8 {
        let port = free_port();
        let mut ranks = Vec::new();
        for (job, values) in [("job a", [1.0, 2.0]), ("job b", [10.0, 20.0])] {
            for (rank, value) in values.into_iter().enumerate() {
                let env = RankEnv {
                    timeout: Duration::from_secs(if rank == 0 { 10 } else { 3 }),
                    ..job_env(rank, 2, port, job)
                };
                ranks.push(thread::spawn(move || -> Ended {
                    let (link, _) = rendezvous(&env, "p", || Ok(ID), |_| {})?;
                    let mut comm = TcpComm::new(rank, 2, link);
                    let mut value = [value];
                    comm.all_reduce_sum(&mut value, "the test's sum")?;
                    Ok(value[0])
                }));
            }
        }
        let ended: Vec<Ended> = ranks.into_iter().map(|r| r.join().unwrap()).collect();
        let mut ran = 0;
        for (job, sum) in [(0, 3.0), (1, 30.0)] {
            let mine = &ended[2 * job..2 * job + 2];
            for (rank, end) in mine.iter().enumerate() {
                let err = match end {
                    Ok(got) => {
                        assert_eq!(*got, sum, "trial {trial} job {job} rank {rank}: mixed");
                        continue;
                    }
                    Err(e) => e,
                };
                assert!(!err.to_string().contains('\n'), "{err}");
                // Rank 0 could not listen (or, had the other job come and
                // gone before it listened, its rank 1 is missing); rank 1
                // met the other job's rank 0, or none.
                let expected = if rank == 0 {
                    port_taken(err) || names_rank(err) == Some(1)
                } else {
                    matches!(err, DistError::OtherJob { .. } | DistError::Refused(_))
                        || names_rank(err) == Some(0)
                };
                assert!(expected, "trial {trial} job {job} rank {rank}: {err:?}");
            }
            ran += usize::from(mine.iter().all(Result::is_ok));
        }
        assert!(ran >= 1, "trial {trial}: neither job ran: {ended:?}");
    }
}
