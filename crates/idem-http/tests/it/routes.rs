//! What a request is, as the layer tells requests apart, where the application's own
//! structure could blur it: routers nested under a prefix, and header names listed twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use http::Request;
use idem_http::IdempotencyLayer;

use crate::{config, send, store, tenant};

/// A router answering `POST /pay` with `said`, counting its runs.
fn paying(said: &'static str) -> (Router, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { said }
    };
    (Router::new().route("/pay", post(handler)), runs)
}

fn pay(path: &str) -> Request<Body> {
    let request = Request::post(path).header("x-tenant", "t1").header("idempotency-key", "k-1");
    request.body(Body::from("amount=100")).expect("a request")
}

/// Behind `Router::nest`, each nested router sees its path with the prefix stripped
/// (`/pay` for both): the layer reads the path as sent, so one key sent to two routes that
/// share a store is two requests (the second is refused as a reuse, never answered with
/// the first route's response).
#[tokio::test]
async fn a_key_sent_to_another_nested_route_is_another_request() {
    let (store, _) = store();
    let layer = IdempotencyLayer::with_config(store, tenant, config(|c| c)).expect("fits");
    let (orders, order_runs) = paying("order created");
    let (refunds, refund_runs) = paying("refund created");
    let app = Router::new()
        .nest("/orders", orders.layer(layer.clone()))
        .nest("/refunds", refunds.layer(layer));
    let order = send(&app, pay("/orders/pay")).await;
    assert_eq!((order.status, order.body.as_str()), (200, "order created"));
    let refund = send(&app, pay("/refunds/pay")).await;
    assert!(!refund.replayed, "the order's answer replayed to a refund: {refund:?}");
    assert_eq!(refund.status, 422, "one key, another request: {refund:?}");
    assert_eq!((order_runs.load(Ordering::SeqCst), refund_runs.load(Ordering::SeqCst)), (1, 0));
    let again = send(&app, pay("/orders/pay")).await;
    assert!(again.replayed && again.body == "order created", "{again:?}");
}

/// A header listed twice in `replay_headers` is kept once: a replay carries what the
/// first answer carried, not its values twice.
#[tokio::test]
async fn a_header_listed_twice_for_replays_is_replayed_once() {
    let (store, _) = store();
    let (ct, location) = (http::header::CONTENT_TYPE, http::header::LOCATION);
    let twice = config(|c| c.replay_headers([location.clone(), ct, location]));
    let (app, _) = crate::app(store, twice);
    let first = send(&app, crate::charge(Some("k-1"), "x")).await;
    let again = send(&app, crate::charge(Some("k-1"), "x")).await;
    assert!(again.replayed, "{again:?}");
    let locations = |said: &crate::Said| said.headers.get_all("location").iter().count();
    assert_eq!((locations(&first), locations(&again)), (1, 1), "{again:?}");
}

/// A fingerprint meaning or a replay hook that panics is the server's bug: the meaning's
/// request is answered 500 with an error id (nothing claimed or run, never an unanswered
/// connection), and a replay whose hook panicked is sent as stored.
#[tokio::test]
async fn a_meaning_or_a_replay_hook_that_panics_is_answered() {
    let (store, _) = store();
    let meaning = |_: &http::request::Parts, body: &[u8]| -> Result<Vec<u8>, _> {
        assert!(std::str::from_utf8(body).is_ok(), "a meaning that only reads text");
        Ok(body.to_vec())
    };
    let hook = |_: &http::request::Parts, _: &mut http::response::Parts| panic!("a hook bug");
    let tuned = config(|c| c.fingerprint_meaning(meaning).on_replay(hook));
    let (app, runs) = crate::app(store, tuned);
    let mut bytes = crate::charge(Some("k-1"), "");
    *bytes.body_mut() = Body::from(vec![0xff, 0xfe]);
    let refused = send(&app, bytes).await;
    assert_eq!(refused.status, 500, "{refused:?}");
    assert!(refused.body.contains("bad-meaning") && refused.body.contains("error id"));
    assert_eq!(crate::runs(&runs), 0, "nothing run");
    let first = send(&app, crate::charge(Some("k-2"), "x")).await;
    let again = send(&app, crate::charge(Some("k-2"), "x")).await;
    assert!(again.replayed && again.body == first.body, "{again:?}");
    assert_eq!(crate::runs(&runs), 1);
}

/// serde_json, keeping numbers as written, reads an object whose one key is its private
/// number token as that number: such a body would be taken for `{"amount":100}` and
/// answered with its replay. It is refused (400, nothing claimed), however the key is
/// escaped; the same text as a value, or under `\n`, is a body like any other.
#[tokio::test]
async fn a_body_spelling_a_number_as_an_object_is_not_that_number() {
    let (store, _) = store();
    let (app, runs) =
        crate::app(store, config(|c| c.fingerprint_meaning(idem_http::JsonMeaning::new())));
    assert_eq!(send(&app, crate::charge(Some("k-1"), r#"{"amount":100}"#)).await.status, 201);
    for spelled in [
        r#"{"amount":{"$serde_json::private::Number":"100"}}"#,
        r#"{"amount":{"\u0024serde_json::private::Numbe\u0072":"100"}}"#,
    ] {
        let refused = send(&app, crate::charge(Some("k-1"), spelled)).await;
        assert_eq!(refused.status, 400, "{spelled}: {refused:?}");
    }
    let plain = [
        ("k-2", r#"{"note":"$serde_json::private::Numbe"}"#),
        ("k-3", r#"{"v":"$serde_jso\n::private::Number"}"#),
    ];
    for (key, body) in plain {
        assert_eq!(send(&app, crate::charge(Some(key), body)).await.status, 201, "{body}");
    }
    assert_eq!(crate::runs(&runs), 3);
}
