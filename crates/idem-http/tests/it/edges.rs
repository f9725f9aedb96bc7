//! The edges a careless edit would move: each limit compared at exactly its value, the
//! body limit over the whole body, the method in the fingerprint, a waiter's place given
//! back, a response body that fails half-way, and a durable store's own result limit.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::IntoResponse;
use axum::routing::post;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::StreamBody;
use idem_core::StoreConfig;
use idem_http::{Config, ConfigError, IdempotencyLayer, Recovering, StoredResponse};
use idem_store_sqlite::SqliteStore;
use idem_testkit::faulty::{Faulty, Op};
use idem_testkit::scratch_dir;
use tokio::sync::Notify;

use crate::{LEASE, app, charge, config, runs, send, store};

/// A handler counting its runs, answering `201` with `body(n)` for its n-th run, and
/// seeing whether it ran as [`Recovering`].
fn counting<F>(body: F) -> (axum::routing::MethodRouter, Arc<AtomicUsize>, Arc<AtomicUsize>)
where
    F: Fn(usize) -> Body + Clone + Send + Sync + 'static,
{
    let (runs, recovering) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, rec) = (runs.clone(), recovering.clone());
    let handler = move |request: Request<Body>| {
        let n = r.fetch_add(1, Ordering::SeqCst) + 1;
        if request.extensions().get::<Recovering>().is_some() {
            rec.fetch_add(1, Ordering::SeqCst);
        }
        let body = body(n);
        async move { Response::builder().status(201).body(body).expect("valid") }
    };
    (post(handler.clone()).patch(handler), runs, recovering)
}

#[tokio::test]
async fn the_same_key_with_patch_after_post_is_422_and_runs_nothing() {
    let (store, _) = store();
    let (route, runs, _) = counting(|n| Body::from(format!("charged {n}")));
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    let first = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!(first.status, 201);
    let mut patch = charge(Some("k1"), "10 EUR");
    *patch.method_mut() = http::Method::PATCH;
    let patched = send(&router, patch).await;
    assert_eq!(patched.status, 422, "the method is part of the request: {patched:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_of_exactly_the_limit_with_its_content_length_runs() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c.body_bytes_max(16)));
    let mut at = charge(Some("k1"), &"x".repeat(16));
    at.headers_mut().insert(http::header::CONTENT_LENGTH, 16.into());
    let said = send(&router, at).await;
    assert_eq!((said.status, said.replayed), (201, false), "{said:?}");
    let mut over = charge(Some("k2"), &"x".repeat(17));
    over.headers_mut().insert(http::header::CONTENT_LENGTH, 17.into());
    assert_eq!(send(&router, over).await.status, 413);
    assert_eq!(runs(&counter), 1);
}

#[tokio::test]
async fn a_body_over_the_limit_in_small_chunks_is_413_with_nothing_claimed() {
    let (store, _) = store();
    let (router, counter) = app(store.clone(), config(|c| c.body_bytes_max(16)));
    let chunks = (0..17).map(|_| Ok::<_, Infallible>(http_body::Frame::data(Bytes::from("x"))));
    let body = Body::new(StreamBody::new(futures_lite_iter(chunks)));
    let request = Request::post("/charge").header("x-tenant", "t1");
    let request = request.header("idempotency-key", "k1").body(body).expect("request");
    let said = send(&router, request).await;
    assert_eq!(said.status, 413, "17 bytes in 17 frames are over 16: {said:?}");
    assert_eq!(runs(&counter), 0);
    assert_eq!(store.stats().acquired, 0, "nothing was claimed");
}

/// A stream of `items`, ready at once.
fn futures_lite_iter<I: Iterator + Unpin>(items: I) -> impl futures_core::Stream<Item = I::Item> {
    struct Iter<I>(I);
    impl<I: Iterator + Unpin> futures_core::Stream for Iter<I> {
        type Item = I::Item;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<I::Item>> {
            std::task::Poll::Ready(self.get_mut().0.next())
        }
    }
    Iter(items)
}

#[tokio::test]
async fn a_response_of_exactly_the_stored_limit_is_kept_and_replays_byte_for_byte() {
    let (store, _) = store();
    let (route, runs, _) = counting(|n| Body::from(format!("{n}").repeat(32)));
    let config = config(|c| c.response_bytes_max(32));
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.body.len(), 32);
    let replay = send(&router, charge(Some("k1"), "x")).await;
    assert!(replay.replayed, "{replay:?}");
    assert_eq!(replay.body, first.body, "32 bytes at a 32-byte limit are kept whole");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// A waiter gives its place back when it is answered: after more waits than
/// `waiters_max`, one after another, a duplicate still waits and replays.
#[tokio::test]
async fn after_more_waits_than_waiters_max_a_duplicate_still_waits_and_replays() {
    let (store, _) = store();
    let config = config(|c| c.wait_for_first(Some(Duration::from_secs(10))).waiters_max(1));
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let handler = {
        let (started, release) = (started.clone(), release.clone());
        move || {
            let (started, release) = (started.clone(), release.clone());
            async move {
                started.notify_one();
                release.notified().await;
                "charged"
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store.clone(), crate::tenant, config).expect("fits");
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    for round in 0..3 {
        let key = format!("k{round}");
        let spawn = |router: Router, key: String| {
            tokio::spawn(async move { send(&router, charge(Some(&key), "x")).await })
        };
        let first = spawn(router.clone(), key.clone());
        crate::bounded("the handler to start", started.notified()).await;
        let in_flight_before = store.stats().in_flight;
        let waiting = spawn(router.clone(), key.clone());
        crate::yield_until("the duplicate to wait", || store.stats().in_flight > in_flight_before)
            .await;
        release.notify_one();
        assert_eq!(crate::bounded("the first", first).await.expect("first").status, 200);
        let waited = crate::bounded("the waiter", waiting).await.expect("waiter");
        assert!(waited.replayed, "round {round}: the duplicate waited and replayed: {waited:?}");
    }
}

/// A body that sends `head`, then fails.
fn failing_body(head: &'static str) -> Body {
    let frames = [
        Ok(http_body::Frame::data(Bytes::from(head))),
        Err(std::io::Error::other("the handler's stream broke")),
    ];
    Body::new(StreamBody::new(futures_lite_iter(frames.into_iter())))
}

/// The handler's response failed half-way: whether it acted is unknown, so its claim is
/// neither stored nor released. The caller gets 502, a duplicate in the lease 409, and
/// the first request after the lease runs as `Recovering`.
#[tokio::test]
async fn a_response_body_that_fails_half_way_is_502_then_409_then_recovering() {
    let (store, clock) = store();
    let (route, runs, recovering) =
        counting(|n| if n == 1 { failing_body("char") } else { Body::from("charged") });
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    let failed = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(failed.status, 502, "{failed:?}");
    assert!(!failed.body.contains("broke"), "the handler's error stays inside: {failed:?}");
    let duplicate = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(duplicate.status, 409, "the claim is still held: {duplicate:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    clock.advance(LEASE);
    let after = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((after.status, after.body.as_str()), (201, "charged"));
    assert_eq!(recovering.load(Ordering::SeqCst), 1, "the run after the lease recovers");
}

fn sqlite(max: Option<usize>) -> SqliteStore<StoredResponse> {
    let path = scratch_dir("http-edges").join("keys.db");
    let store = SqliteStore::open(&path, StoreConfig::default()).expect("open");
    match max {
        Some(max) => store.with_result_bytes_max(max),
        None => store,
    }
}

/// A 100 KiB response through the SQLite store replays whole: the store keeps what the
/// layer's default limit lets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_kib_response_through_sqlite_replays() {
    let (route, runs, _) = counting(|n| Body::from(vec![b'0' + n as u8; 100 * 1024]));
    let layer = IdempotencyLayer::with_config(sqlite(None), crate::tenant, Config::default());
    let layer = layer.expect("fits");
    let stats = layer.clone();
    let router = Router::new().route("/charge", route).layer(layer);
    let first = send(&router, charge(Some("k1"), "x")).await;
    let again = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((first.body.len(), again.replayed), (100 * 1024, true), "{:?}", again.status);
    assert!(again.body == first.body, "the replay is the original, byte for byte");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(stats.stats().store_errors, 0);
}

/// A layer whose stored-response limit the store cannot keep is refused when it is
/// built, naming both numbers; the default limit shrinks to what the store keeps.
#[test]
fn a_layer_limit_the_store_cannot_keep_is_refused_naming_both_numbers() {
    let config = Config::builder().response_bytes_max(1 << 20).build().expect("valid");
    let refused = IdempotencyLayer::with_config(sqlite(Some(64 * 1024)), crate::tenant, config);
    let error = refused.expect_err("1 MiB does not fit a 64 KiB store");
    assert_eq!(error.setting, "response_bytes_max", "{error:?}");
    let text = error.to_string();
    assert!(text.contains("1048576") && text.contains("65536"), "{text}");
    let fitted = IdempotencyLayer::new(sqlite(Some(64 * 1024)), crate::tenant);
    assert_eq!(fitted.response_bytes_max(), 64 * 1024 - idem_http::STORED_ENVELOPE_BYTES);
    let tiny = sqlite(Some(idem_http::NOT_KEPT_BYTES_MAX - 1));
    let refused = IdempotencyLayer::with_config(tiny, crate::tenant, Config::default());
    let refused: ConfigError = refused.map(|_| ()).expect_err("cannot keep a stand-in");
    assert_eq!(refused.setting, "response_bytes_max", "{refused}");
    let tiny = IdempotencyLayer::new(sqlite(Some(300)), crate::tenant);
    assert_eq!(tiny.response_bytes_max(), 300 - idem_http::STORED_ENVELOPE_BYTES, "never more");
}

/// The first response past a limit it can fit is kept; an oversized one on SQLite is
/// kept as a problem (never dropped at completion), and the handler never runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_over_what_sqlite_keeps_replays_as_a_problem_and_never_runs_again() {
    let (route, runs, _) = counting(|_| Body::from(vec![b'x'; 100 * 1024]));
    let store = sqlite(Some(64 * 1024));
    let layer = IdempotencyLayer::new(store, crate::tenant);
    let stats = layer.clone();
    let router = Router::new().route("/charge", route).layer(layer);
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.body.len(), 100 * 1024, "the first caller gets it whole");
    let again = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((again.status, again.replayed), (201, true), "{again:?}");
    assert!(again.body.contains("response-too-large"), "{again:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!((stats.stats().store_errors, stats.stats().not_kept), (0, 1));
}

/// An error that carries internal detail, as PostgreSQL's messages and SQLite's paths do.
const INTERNAL: &str = "ERROR: relation \"idem.claims\" does not exist at /var/lib/secret.db";

/// A store that fails answers 503 with a stable type and an error id, never the store's
/// own message; the failure is counted for the operator.
#[tokio::test]
async fn a_failing_store_is_503_with_an_error_id_and_no_internal_detail() {
    let (inner, _) = store();
    let failing = Faulty::new(inner).failing(Op::Claim, INTERNAL);
    let layer = IdempotencyLayer::with_config(failing, crate::tenant, config(|c| c)).expect("ok");
    let stats = layer.clone();
    let (route, runs, _) = counting(|_| Body::from("charged"));
    let router = Router::new().route("/charge", route).layer(layer);
    let refused = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.body.contains("store-unavailable") && refused.body.contains("id"));
    for secret in ["relation", "idem.claims", "/var/lib", "secret.db", "ERROR"] {
        assert!(!refused.body.contains(secret), "{secret} reached the client: {}", refused.body);
    }
    assert_eq!((runs.load(Ordering::SeqCst), stats.stats().store_errors), (0, 1));
}

/// A completion the store refused is never silent: it is counted, and the key stays in
/// flight (a duplicate in the lease is 409, not a second run).
#[tokio::test]
async fn a_completion_the_store_refuses_is_counted_and_the_key_stays_in_flight() {
    let (inner, clock) = store();
    let failing = Faulty::new(inner).failing(Op::Complete, INTERNAL);
    let layer = IdempotencyLayer::with_config(failing, crate::tenant, config(|c| c)).expect("ok");
    let stats = layer.clone();
    let (route, runs, recovering) = counting(|_| Body::from("charged"));
    let router = Router::new().route("/charge", route).layer(layer);
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.status, 201, "the caller still gets its handler's answer");
    let attempts = 1 + idem_http::COMPLETE_RETRY_PAUSES.len() as u64;
    assert_eq!(stats.stats().store_errors, attempts, "each refused completion is counted");
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 409);
    clock.advance(LEASE);
    send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((runs.load(Ordering::SeqCst), recovering.load(Ordering::SeqCst)), (2, 1));
}

/// A store away for a moment as the handler answers (its first two completions fail):
/// the completion is tried again, and a repeat replays the original answer instead of
/// finding the key in flight and, after the lease, recovering it with another answer.
#[tokio::test]
async fn a_completion_refused_for_a_moment_is_tried_again_and_a_repeat_replays_it() {
    let (inner, _) = store();
    let failing = Faulty::new(inner).failing_first(Op::Complete, INTERNAL, 2);
    let layer = IdempotencyLayer::with_config(failing, crate::tenant, config(|c| c)).expect("ok");
    let stats = layer.clone();
    let (route, runs, _) = counting(|_| Body::from("charged"));
    let router = Router::new().route("/charge", route).layer(layer);
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((first.status, first.body.as_str()), (201, "charged"));
    let repeat = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((repeat.status, repeat.body.as_str()), (201, "charged"), "{repeat:?}");
    assert!(repeat.replayed, "the repeat is a replay: {repeat:?}");
    assert_eq!((runs.load(Ordering::SeqCst), stats.stats().store_errors), (1, 2));
}

/// A completion that took effect but whose answer was lost (the connection cut after the
/// write): the retry finds the key settled, which is not a lease lost to another request,
/// and the repeat replays the answer.
#[tokio::test]
async fn a_completion_applied_but_answered_as_failed_is_not_counted_as_a_lost_lease() {
    let (inner, _) = store();
    let failing = Faulty::new(inner).completing_then_failing(INTERNAL, 1);
    let layer = IdempotencyLayer::with_config(failing, crate::tenant, config(|c| c)).expect("ok");
    let stats = layer.clone();
    let (route, runs, _) = counting(|_| Body::from("charged"));
    let router = Router::new().route("/charge", route).layer(layer);
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 201);
    let repeat = send(&router, charge(Some("k1"), "x")).await;
    assert!(repeat.replayed && repeat.body == "charged", "{repeat:?}");
    let stats = stats.stats();
    assert_eq!((runs.load(Ordering::SeqCst), stats.store_errors, stats.leases_lost), (1, 1, 0));
}

/// A router on `layer` whose `POST /charge` answers `201` with `body` and `headers`,
/// counting its runs.
fn answering(
    layer: IdempotencyLayer<
        impl idem_core::AsyncKeyStore<StoredResponse> + 'static,
        fn(&http::request::Parts) -> Option<String>,
    >,
    body: &'static str,
    headers: Vec<(&'static str, String)>,
) -> (Router, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = move || {
        counter.fetch_add(1, Ordering::SeqCst);
        let mut response = Response::builder().status(201);
        for (name, value) in &headers {
            response = response.header(*name, value.as_str());
        }
        let response = response.body(Body::from(body)).expect("valid");
        async move { response }
    };
    (Router::new().route("/charge", post(handler)).layer(layer), runs)
}

/// On a store that keeps little, the default limit is what fits: a small response is kept
/// whole, headers and all; one whose headers make it larger than the store keeps is kept
/// as a stand-in problem. Nothing is refused by the store, nothing runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_small_store_what_fits_is_kept_and_what_does_not_is_a_stand_in() {
    let tenant: fn(&http::request::Parts) -> Option<String> = crate::tenant;
    let layer = IdempotencyLayer::new(sqlite(Some(3000)), tenant);
    let stats = layer.clone();
    let long = "/orders/".to_string() + &"x".repeat(2850);
    let (router, runs) = answering(layer, "ok", vec![("location", long)]);
    let first = send(&router, charge(Some("k1"), "x")).await;
    let again = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((again.replayed, again.body.as_str()), (true, "ok"), "kept whole: {again:?}");
    assert_eq!(again.headers["location"], first.headers["location"]);
    let layer = IdempotencyLayer::new(sqlite(Some(3000)), tenant);
    let stats_2 = layer.clone();
    let longer = "/orders/".to_string() + &"x".repeat(3100);
    let (router, runs_2) = answering(layer, "ok", vec![("location", longer)]);
    send(&router, charge(Some("k1"), "x")).await;
    let again = send(&router, charge(Some("k1"), "x")).await;
    assert!(again.replayed && again.body.contains("response-too-large"), "{again:?}");
    assert_eq!(runs.load(Ordering::SeqCst) + runs_2.load(Ordering::SeqCst), 2);
    assert_eq!((stats.stats().store_errors, stats_2.stats().store_errors), (0, 0));
}

/// Headers that frame a message are refused in `replay_headers`; a stand-in problem keeps
/// no header about the original body (its encoding), but keeps one that names the effect.
#[tokio::test]
async fn a_stand_in_keeps_no_header_about_the_body_it_replaces() {
    let framing = Config::builder().replay_headers([http::header::CONTENT_LENGTH]).build();
    let framing = framing.expect_err("framing header");
    assert_eq!(framing.setting, "replay_headers", "{framing}");
    assert!(framing.value.contains("content-length"), "{framing}");
    let (store, _) = store();
    let names =
        [http::header::CONTENT_TYPE, http::header::CONTENT_ENCODING, http::header::LOCATION];
    let config = config(|c| c.response_bytes_max(4).replay_headers(names));
    let tenant: fn(&http::request::Parts) -> Option<String> = crate::tenant;
    let layer = IdempotencyLayer::with_config(store, tenant, config).expect("fits");
    let headers = vec![("content-encoding", "gzip".into()), ("location", "/charges/1".into())];
    let (router, _) = answering(layer, "more than four bytes", headers);
    send(&router, charge(Some("k1"), "x")).await;
    let again = send(&router, charge(Some("k1"), "x")).await;
    assert!(again.body.contains("response-too-large"), "{again:?}");
    assert!(again.headers.get("content-encoding").is_none(), "{again:?}");
    assert_eq!(again.headers["location"], "/charges/1");
}

/// More header values than are kept: the response is not kept (never cut without a word).
#[tokio::test]
async fn more_header_values_than_are_kept_make_a_stand_in_and_are_counted() {
    let (store, _) = store();
    let config = config(|c| c.replay_headers([http::header::LINK]));
    let tenant: fn(&http::request::Parts) -> Option<String> = crate::tenant;
    let layer = IdempotencyLayer::with_config(store, tenant, config).expect("fits");
    let stats = layer.clone();
    let links = (0..=idem_http::STORED_HEADERS_MAX).map(|i| ("link", format!("</{i}>"))).collect();
    let (router, _) = answering(layer, "ok", links);
    send(&router, charge(Some("k1"), "x")).await;
    let again = send(&router, charge(Some("k1"), "x")).await;
    assert!(again.body.contains("response-too-large"), "{again:?}");
    assert_eq!(stats.stats().not_kept, 1);
}

/// A handler that cannot know whether it acted marks its answer `OutcomeUnknown`: it is
/// not stored, the key stays in flight (409), and after the lease the next run recovers.
#[tokio::test]
async fn an_outcome_unknown_answer_is_never_stored_and_the_key_recovers() {
    let (store, clock) = store();
    let (runs, recovering) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, rec) = (runs.clone(), recovering.clone());
    let handler = move |request: Request<Body>| {
        let first = r.fetch_add(1, Ordering::SeqCst) == 0;
        if request.extensions().get::<Recovering>().is_some() {
            rec.fetch_add(1, Ordering::SeqCst);
        }
        async move {
            if first {
                // Both marks: the unknown outcome must win (releasing would act twice).
                let unknown = axum::Extension(idem_http::OutcomeUnknown);
                let nothing = axum::Extension(idem_http::NothingHappened);
                (http::StatusCode::BAD_GATEWAY, unknown, nothing, "unknown").into_response()
            } else {
                (http::StatusCode::CREATED, "charged").into_response()
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("ok");
    let stats = layer.clone();
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 502);
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 409, "left in flight");
    clock.advance(LEASE);
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 201);
    assert_eq!((runs.load(Ordering::SeqCst), recovering.load(Ordering::SeqCst)), (2, 1));
    assert_eq!(stats.stats().left_in_flight, 1);
}

/// A request body that fails to read says so without the error's own text.
#[tokio::test]
async fn a_request_body_that_fails_is_400_without_its_error_text() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    let frames = [
        Ok(http_body::Frame::data(Bytes::from("10 EUR"))),
        Err(std::io::Error::other("/srv/app/internal/secret.rs:42 db=10.0.0.5")),
    ];
    let body = Body::new(StreamBody::new(futures_lite_iter(frames.into_iter())));
    let request = Request::post("/charge").header("x-tenant", "t1");
    let request = request.header("idempotency-key", "k1").body(body).expect("request");
    let said = send(&router, request).await;
    assert_eq!(said.status, 400, "{said:?}");
    assert!(!said.body.contains("secret") && !said.body.contains("10.0.0.5"), "{said:?}");
    assert_eq!(runs(&counter), 0);
}

/// `Retry-After` never names a time past the lease left: a 1.5 s lease says 1, not 2.
#[tokio::test]
async fn retry_after_never_names_a_time_past_the_lease() {
    let clock = Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(1)));
    let short = StoreConfig::builder().lease(Duration::from_millis(1500)).build().expect("ok");
    let store = Arc::new(idem_core::MemoryStore::with_clock(short, clock));
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let handler = {
        let (started, release) = (started.clone(), release.clone());
        move || {
            let (started, release) = (started.clone(), release.clone());
            async move {
                started.notify_one();
                release.notified().await;
                "charged"
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("ok");
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    let first = {
        let router = router.clone();
        tokio::spawn(async move { send(&router, charge(Some("k1"), "x")).await })
    };
    crate::bounded("the first to start", started.notified()).await;
    let duplicate = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(duplicate.status, 409, "{duplicate:?}");
    assert_eq!(duplicate.headers["retry-after"], "1", "1.5 s left: 1, never 2");
    release.notify_one();
    crate::bounded("the first", first).await.expect("first");
}

/// A response over the stored limit streams on to its caller, and is kept (as the
/// stand-in saying it was too large) only once its stream ended well: one that fails
/// after the limit leaves its key in flight, so the retry in the lease is 409 and the
/// one after it runs as `Recovering`, never a stand-in 200 for a response that failed.
#[tokio::test]
async fn a_streamed_response_that_fails_past_the_limit_is_left_in_flight() {
    let (store, clock) = store();
    let (route, runs, recovering) =
        counting(|n| if n == 1 { failing_body("charged, and more") } else { Body::from("ok") });
    let config = config(|c| c.response_bytes_max(8));
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config).expect("fits");
    let stats = layer.clone();
    let router = Router::new().route("/charge", route).layer(layer);
    let streamed = tower::ServiceExt::oneshot(router.clone(), charge(Some("k1"), "x")).await;
    let streamed = streamed.expect("infallible");
    let read = http_body_util::BodyExt::collect(streamed.into_body()).await;
    assert!(read.is_err(), "the caller sees the stream fail");
    let retry = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(retry.status, 409, "not kept as if it had ended well: {retry:?}");
    assert_eq!((stats.stats().left_in_flight, stats.stats().not_kept), (1, 0));
    clock.advance(crate::LEASE);
    let after = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((after.status, runs.load(Ordering::SeqCst)), (201, 2), "{after:?}");
    assert_eq!(recovering.load(Ordering::SeqCst), 1, "the run after the lease recovers");
}

/// A body of `frames` chunks of 1 KiB, then a panic in the middle of the stream.
fn panicking_body(frames: usize) -> Body {
    struct Chunks(usize);
    impl futures_core::Stream for Chunks {
        type Item = Result<Bytes, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            assert!(self.0 > 0, "the handler's body stream panicked");
            self.0 -= 1;
            std::task::Poll::Ready(Some(Ok(Bytes::from(vec![b'x'; 1024]))))
        }
    }
    Body::from_stream(Chunks(frames))
}

/// A body that panics after the stored limit ends the caller's body with an error, never
/// cleanly as if it were whole, and its key stays in flight.
#[tokio::test]
async fn a_body_panicking_past_the_limit_reaches_its_caller_as_a_failure() {
    let (store, _) = store();
    let route = post(|| async { Response::new(panicking_body(8)) });
    let config = config(|c| c.response_bytes_max(1024));
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config).expect("fits");
    let stats = layer.clone();
    let router = Router::new().route("/charge", route).layer(layer);
    let response = tower::ServiceExt::oneshot(router.clone(), charge(Some("k1"), "x")).await;
    let read = http_body_util::BodyExt::collect(response.expect("infallible").into_body()).await;
    assert!(read.is_err(), "a truncated body must not end as if whole");
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 409, "left in flight");
    assert_eq!(stats.stats().left_in_flight, 1);
}
