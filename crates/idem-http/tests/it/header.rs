//! The header's two forms (an RFC 8941 string, Stripe's bare value) name one key; every
//! malformed header is a 400 problem that says what is wrong, and nothing runs.

use axum::body::Body;
use http::{HeaderValue, Request};

use crate::{app, config, runs, send, store};

fn with_key(values: &[HeaderValue]) -> Request<Body> {
    let mut request = Request::post("/charge").header("x-tenant", "t1");
    for value in values {
        request = request.header("idempotency-key", value.clone());
    }
    request.body(Body::from("10 EUR")).expect("request")
}

#[tokio::test]
async fn the_quoted_and_the_bare_form_name_the_same_key() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    let quoted = send(&router, with_key(&[HeaderValue::from_static("\"k-1 \\\"x\\\"\"")])).await;
    let bare = send(&router, with_key(&[HeaderValue::from_static("k-1 \"x\"")])).await;
    assert_eq!((quoted.replayed, bare.replayed), (false, true), "{quoted:?} {bare:?}");
    let spaced =
        send(&router, with_key(&[HeaderValue::from_static("  \"k-1 \\\"x\\\"\"  ")])).await;
    assert!(spaced.replayed, "spaces around the field are not part of it");
    assert_eq!(runs(&counter), 1);
}

#[tokio::test]
async fn malformed_headers_are_400_and_say_what_is_wrong() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    let long = "k".repeat(256);
    let cases: Vec<(Vec<HeaderValue>, &str)> = vec![
        (vec![HeaderValue::from_static("\"unterminated")], "no closing quote"),
        (vec![HeaderValue::from_static("\"a\\x\"")], "escape"),
        (vec![HeaderValue::from_static("\"a\";q=1")], "after the closing quote"),
        (vec![HeaderValue::from_static("\"\"")], "not a valid key"),
        (vec![HeaderValue::from_static("")], "not a valid key"),
        (vec![HeaderValue::from_bytes(b"caf\xc3\xa9").expect("obs-text")], "visible ASCII"),
        (vec![HeaderValue::from_str(&long).expect("ascii")], "255"),
        (vec![HeaderValue::from_static("a"), HeaderValue::from_static("b")], "2 times"),
    ];
    for (values, says) in cases {
        let refused = send(&router, with_key(&values)).await;
        assert_eq!(refused.status, 400, "{values:?}: {refused:?}");
        assert_eq!(refused.headers["content-type"], "application/problem+json");
        assert!(refused.body.contains("key-malformed"), "{refused:?}");
        assert!(refused.body.contains(says), "{values:?} should say {says:?}: {}", refused.body);
    }
    let longest = "k".repeat(255);
    let fits = send(&router, with_key(&[HeaderValue::from_str(&longest).expect("ascii")])).await;
    assert_eq!(fits.status, 201, "255 bytes is the limit, not past it");
    assert_eq!(runs(&counter), 1);
}
