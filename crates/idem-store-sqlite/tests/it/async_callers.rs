//! The store through its async contract, beyond the conformance suite: many callers on
//! one runtime thread, a failed commit, calls given up before their answer, and what an
//! operator sees.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use idem_core::{AsyncKeyStore, Claim, KeyStore, ManualClock, ScopedKey, StoreConfig, Timestamp};
use idem_store_sqlite::SqliteStore;

use super::{assert_write_failed, fp, key, poison_commits, side_connection, sqlite, temp_file};

/// Polls `future` once, with a waker that does nothing: what a runtime's first poll does.
fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// A runtime with one thread: every task runs on the thread that calls `block_on`.
fn one_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a runtime")
}

fn at_1000() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_millis(1_000)))
}

/// A claim and a completion for each of many keys, each caller a task on one runtime
/// thread: a call that blocked that thread until its commit would make each commit hold
/// one write. All are answered, and they share commits.
#[test]
fn async_callers_on_one_thread_are_all_answered_and_share_commits() {
    const CALLERS: usize = 200;
    let store: Arc<SqliteStore<String>> = Arc::new(sqlite(StoreConfig::default(), at_1000()));
    let settled = one_thread().block_on(async {
        let callers: Vec<_> = (0..CALLERS)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let key = ScopedKey::parse("tenant", &format!("k{i}")).expect("key");
                    let claim = AsyncKeyStore::claim(&store, &key, &fp()).await;
                    let Ok(Claim::Acquired(lease)) = claim else { panic!("{key}: {claim:?}") };
                    AsyncKeyStore::complete(&store, &lease, format!("r{i}")).await
                })
            })
            .collect();
        let mut settled = 0;
        for caller in callers {
            caller.await.expect("a caller's task").expect("claimed and completed");
            settled += 1;
        }
        settled
    });
    assert_eq!(settled, CALLERS);
    let stats = store.commit_stats();
    assert_eq!(stats.requests_committed, 2 * CALLERS as u64, "every write committed");
    assert!(stats.groups_committed < stats.requests_committed, "shared commits: {stats:?}");
    let k7 = ScopedKey::parse("tenant", "k7").expect("key");
    let replay = KeyStore::claim(&*store, &k7, &fp()).expect("claim");
    assert_eq!(replay, Claim::Replay("r7".into()));
}

/// A replay and a claim in flight, asked through the async contract, are answered on the
/// reader connection, as for the sync one: the writer commits nothing for them.
#[test]
fn async_replays_and_claims_in_flight_are_answered_beside_the_writer() {
    let store = sqlite(StoreConfig::default(), at_1000());
    let (done, held) = (ScopedKey::parse("tenant", "done").expect("key"), key());
    let runtime = one_thread();
    let claim = |key| runtime.block_on(AsyncKeyStore::claim(&store, key, &fp()));
    let Ok(Claim::Acquired(lease)) = claim(&done) else { panic!("a fresh key") };
    runtime.block_on(AsyncKeyStore::complete(&store, &lease, "r".into())).expect("complete");
    let Ok(Claim::Acquired(_)) = claim(&held) else { panic!("a fresh key") };
    let before = store.commit_stats();
    assert_eq!(claim(&done).expect("claim"), Claim::Replay("r".into()));
    assert!(matches!(claim(&held), Ok(Claim::InFlight { .. })));
    assert_eq!(store.commit_stats(), before, "nothing went to the writer");
}

/// A claim whose COMMIT fails, asked through the async contract: the caller gets the
/// failed transaction's error, nothing is stored, and the next claim succeeds.
#[test]
fn an_async_claim_whose_commit_fails_gets_the_error() {
    let path = temp_file("async-failed-commit");
    let store: SqliteStore<String> =
        SqliteStore::open(&path, StoreConfig::default()).expect("open");
    poison_commits(&side_connection(&path));
    let poisoned = ScopedKey::parse("tenant", "poisoned").expect("key");
    let runtime = one_thread();
    let answer = runtime.block_on(AsyncKeyStore::claim(&store, &poisoned, &fp()));
    assert_write_failed(answer, "the poisoned claim, awaited");
    let lookup = runtime.block_on(AsyncKeyStore::lookup(&store, &poisoned, &fp()));
    assert_eq!(lookup.expect("lookup"), idem_core::KeyState::Absent, "nothing stored");
    let after = runtime.block_on(AsyncKeyStore::claim(&store, &key(), &fp()));
    assert!(matches!(after, Ok(Claim::Acquired(_))), "{after:?}");
}

/// Calls given up (their futures dropped) once queued for the writer still happen: a
/// claim leaves its key in flight, to be recovered when its lease runs out; a completion
/// is stored and replays. The store goes on answering.
#[test]
fn async_calls_given_up_once_queued_still_commit() {
    let clock = at_1000();
    let store = sqlite(StoreConfig::default(), clock.clone());
    let (key, fp) = (key(), fp());
    {
        let mut claim = pin!(AsyncKeyStore::claim(&store, &key, &fp));
        assert!(poll_once(claim.as_mut()).is_pending(), "queued for the writer");
    }
    let in_flight = KeyStore::claim(&store, &key, &fp);
    assert!(matches!(in_flight, Ok(Claim::InFlight { .. })), "{in_flight:?}");
    clock.advance(StoreConfig::LEASE_DEFAULT);
    let Ok(Claim::Recover(lease)) = KeyStore::claim(&store, &key, &fp) else {
        panic!("the given-up claim's lease ran out: recovered")
    };
    {
        let mut complete = pin!(AsyncKeyStore::complete(&store, &lease, "done".into()));
        assert!(poll_once(complete.as_mut()).is_pending(), "queued for the writer");
    }
    // Answered after the given-up completion: the writer takes requests in order.
    assert_eq!(KeyStore::sweep(&store).expect("sweep"), 0);
    let replay = KeyStore::claim(&store, &key, &fp).expect("claim");
    assert_eq!(replay, Claim::Replay("done".into()));
}

/// The async contract reports what the sync one does: a `claim` or `settle` span naming
/// the key, and one event for the outcome.
#[cfg(feature = "tracing")]
#[test]
fn async_calls_report_the_sync_contracts_events() {
    use idem_testkit::capture::{Seen, capture};

    #[track_caller]
    fn only(seen: Vec<Seen>, span: &str) -> String {
        assert_eq!(seen.len(), 1, "one event per operation: {seen:?}");
        let event = seen.into_iter().next().expect("one");
        assert_eq!(event.span_field(span, "key"), Some("k"), "{event:?}");
        event.message
    }
    let clock = at_1000();
    let store = sqlite(StoreConfig::default(), clock.clone());
    let runtime = one_thread();
    let claim = || runtime.block_on(AsyncKeyStore::claim(&store, &key(), &fp()));
    let (first, seen) = capture(claim);
    let Ok(Claim::Acquired(first)) = first else { panic!("{first:?}") };
    assert_eq!(only(seen, "claim"), "acquired");
    clock.advance(StoreConfig::LEASE_DEFAULT);
    let Ok(Claim::Recover(second)) = claim() else { panic!("the lease ran out: recovered") };
    let complete = || runtime.block_on(AsyncKeyStore::complete(&store, &first, "x".into()));
    let (lost, seen) = capture(complete);
    assert!(lost.is_err(), "the first lease was taken over");
    assert!(only(seen, "settle").starts_with("lease lost"));
    let (lost, seen) = capture(|| runtime.block_on(AsyncKeyStore::release(&store, &first)));
    assert!(lost.is_err(), "the first lease was taken over");
    assert!(only(seen, "settle").starts_with("lease lost"));
    runtime.block_on(AsyncKeyStore::complete(&store, &second, "done".into())).expect("held");
    let (_, seen) = capture(claim);
    assert_eq!(only(seen, "claim"), "replay");
}
