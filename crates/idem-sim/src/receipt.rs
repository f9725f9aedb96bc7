//! The third workload: `POST /receipt` on every server, the checkout's handler behind
//! a layer on a store that keeps little, whose answer streams in frames as a receipt:
//! its JSON with lines of padding, often larger than the layer keeps, sometimes exactly
//! as large, and, while the faults last, cut (after the charge) or stalled before a
//! frame. The layer must keep a receipt whole when it fits, keep a stand-in when it does
//! not, never end a cut one as whole, and never send the store more than it keeps.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use idem_http::header::IDEMPOTENCY_EXPIRES;
use idem_http::{Config, EffectFree, IdempotencyLayer, JsonMeaning};
use idem_payments::SimulatedGateway;

use crate::checkout::app;
use crate::hosts::Intent;
use crate::seam::Seam;
use crate::shared::{Told, WorldState};

/// What the receipt route's store keeps of one response, in its encoding (status,
/// kept headers, body): the layer must never send it more.
pub(crate) const RECEIPT_STORE_MAX: usize = 1024;
/// The largest receipt body the layer keeps (its `response_bytes_max`): a body this
/// large is kept whole when its headers leave room in the store.
pub(crate) const RECEIPT_BODY_MAX: usize = 768;
/// The largest request body the receipt layer takes (its `body_bytes_max`): some
/// intents are padded to exactly this, and some attempts sent over it.
pub(crate) const REQUEST_BYTES_MAX: usize = 160;
/// The bytes of one frame of a receipt.
const FRAME_BYTES: usize = 256;
/// The largest receipt, in bytes: four times what the store keeps, well inside what a
/// client reads.
const RECEIPT_BYTES_MAX: usize = 4 * RECEIPT_STORE_MAX;
/// The header that names a receipt's whole length, kept (and beside a stand-in).
pub(crate) const RECEIPT_BYTES_HEADER: &str = "receipt-bytes";
/// A kept header of a drawn length (up to `NOTE_BYTES_MAX`): with it, a body within
/// `RECEIPT_BODY_MAX` may still be too large for the store.
pub(crate) const RECEIPT_NOTE_HEADER: &str = "receipt-note";
/// The longest note.
const NOTE_BYTES_MAX: u64 = 300;
/// The field of a receipt's JSON order that differs on every attempt (the request's
/// number): the layer's meaning ignores it, so a retry is the same request.
const CLIENT_TIME: &str = "client_time";
/// The field that pads an order to its size, ignored by the meaning too.
const NOTE: &str = "note";

/// The JSON order `intent`'s client sends as its request `number`: its fields in one
/// order or the other (by the number), with `client_time`, padded with a note to
/// `padded` bytes if asked.
pub(crate) fn order_json(intent: &Intent, number: u64, padded: Option<usize>) -> String {
    let (customer, amount) = (format!("cus_{}", intent.index), intent.amount);
    let mut body = if number.is_multiple_of(2) {
        format!(
            "{{\"customer\":\"{customer}\",\"amount\":{amount},\"currency\":\"EUR\",\
             \"{CLIENT_TIME}\":{number}"
        )
    } else {
        format!(
            "{{\"{CLIENT_TIME}\":{number},\"currency\":\"EUR\",\"amount\":{amount},\
             \"customer\":\"{customer}\""
        )
    };
    if let Some(len) = padded {
        let frame = format!(",\"{NOTE}\":\"\"}}");
        let pad = len.saturating_sub(body.len() + frame.len());
        body.push_str(&format!(",\"{NOTE}\":\"{}\"", "n".repeat(pad)));
    }
    body.push('}');
    body
}

/// The checkout's form for a JSON order, or `None` if it is not one (the checkout then
/// refuses the body as it is).
pub(crate) fn order_form(json: &str) -> Option<String> {
    let order: serde_json::Value = serde_json::from_str(json).ok()?;
    let customer = order.get("customer")?.as_str()?;
    let amount = order.get("amount")?.as_u64()?;
    let currency = order.get("currency")?.as_str()?;
    Some(format!("customer={customer}&amount={amount}&currency={currency}"))
}

/// The header the receipt layer's replay hook adds to every replay.
pub(crate) const REPLAY_HOOK_HEADER: &str = "receipt-replay-seen";
/// How a whole receipt ends: a cut one does not.
pub(crate) const RECEIPT_END: &str = ",\"end\":true}";

/// `router` with `POST /receipt`: the checkout's handler (slow at times, as on
/// `/checkout`), its answer streamed as a receipt, behind a layer on `seam`,
/// which keeps at most `RECEIPT_STORE_MAX` bytes of a response.
pub(crate) fn route(
    router: axum::Router,
    shared: &Arc<WorldState>,
    seam: Seam,
    gateway: Arc<SimulatedGateway>,
) -> axum::Router {
    let shop = Arc::new(app::Shop::new(gateway));
    let config = Config::builder()
        .require_key(true)
        .wait_for_first(Some(Duration::from_secs(10)))
        .response_bytes_max(RECEIPT_BODY_MAX)
        .body_bytes_max(REQUEST_BYTES_MAX)
        .advertise_expiry(true)
        .release_on(EffectFree::statuses([http::StatusCode::SERVICE_UNAVAILABLE]))
        .fingerprint_meaning(JsonMeaning::new().ignoring(CLIENT_TIME).ignoring(NOTE))
        .on_replay(|_, parts| {
            parts.headers.insert(REPLAY_HOOK_HEADER, http::HeaderValue::from_static("yes"));
        })
        .replay_headers([
            http::header::CONTENT_TYPE,
            http::HeaderName::from_static(RECEIPT_BYTES_HEADER),
            http::HeaderName::from_static(RECEIPT_NOTE_HEADER),
        ])
        .build()
        .expect("valid settings");
    let merchant: fn(&http::request::Parts) -> Option<String> = |_| Some(app::MERCHANT.to_string());
    let layer = IdempotencyLayer::with_config(seam.keeping(RECEIPT_STORE_MAX), merchant, config)
        .expect("the store keeps the layer's responses");
    let route = axum::routing::post(crate::hosts::checkout(shared, true)).route_layer(layer);
    router.merge(axum::Router::new().route("/receipt", route).with_state(shop))
}

/// The checkout's `answer` as a receipt: a success padded to the size drawn, its length
/// in `RECEIPT_BYTES_HEADER` and `content-length`, a note of drawn length, streamed in
/// frames with the faults drawn; any other answer as it is (a 503 without its
/// nothing-happened mark: the layer knows it by its status).
pub(crate) async fn streamed(shared: &WorldState, answer: Response) -> Response {
    let (mut parts, body) = answer.into_parts();
    let Ok(whole) = body.collect().await.map(|b| b.to_bytes()) else {
        return Response::from_parts(parts, Body::empty());
    };
    if !parts.status.is_success() || whole.last() != Some(&b'}') {
        // The receipt layer knows a 503 of its handler (the gateway refused: nothing
        // charged) by its status (`release_on`), not by the handler's mark.
        if parts.status == http::StatusCode::SERVICE_UNAVAILABLE {
            parts.extensions.remove::<idem_http::NothingHappened>();
        }
        return Response::from_parts(parts, Body::from(whole));
    }
    let receipt = padded(&whole, shared.draw(|rng| draw_size(rng, whole.len())));
    let length = http::HeaderValue::from(receipt.len());
    parts.headers.insert(RECEIPT_BYTES_HEADER, length.clone());
    // Half the receipts say their length (hyper then frames them by it, and a client
    // notices one cut short); the rest are chunked, where only the end mark tells.
    if shared.draw(|rng| rng.below(2) == 0) {
        parts.headers.insert(http::header::CONTENT_LENGTH, length);
    }
    let note = shared.draw(|rng| match rng.below(10) {
        0..=6 => rng.below(100),
        _ => rng.between(100, NOTE_BYTES_MAX),
    });
    let note = "n".repeat(usize::try_from(note).unwrap_or(0));
    parts.headers.insert(RECEIPT_NOTE_HEADER, http::HeaderValue::from_str(&note).expect("ascii"));
    let frames: VecDeque<Bytes> = receipt.chunks(FRAME_BYTES).map(Bytes::copy_from_slice).collect();
    let count = frames.len();
    let plan = &shared.plan;
    let cut_at = shared.strikes(plan.receipt_cut).then(|| {
        let at = shared.draw(|rng| rng.below(count as u64) as usize);
        if shared.draw(|rng| rng.below(2) == 0) {
            shared.fault("handler", "receipt cut by an error");
            (at, Cut::Fails)
        } else {
            shared.fault("handler", "receipt cut by a panic");
            (at, Cut::Panics)
        }
    });
    let stall = shared.strikes(plan.receipt_stall).then(|| {
        shared.fault("handler", "receipt stalled before a frame");
        let at = shared.draw(|rng| rng.below(count as u64) as usize);
        (at, shared.draw(|rng| rng.duration(Duration::ZERO, Duration::from_secs(3))))
    });
    let body = Frames { frames, sent: 0, cut_at, stall, sleep: None };
    Response::from_parts(parts, Body::new(body))
}

/// A receipt's length, for a success of `base` bytes: four in ten as short as it can
/// be, two exactly the layer's limit, one a byte over it, the rest up to four times what
/// the store keeps.
fn draw_size(rng: &mut crate::rng::Rng, base: usize) -> usize {
    let least = base + RECEIPT_END.len() + PAD_FIELD.len();
    let drawn = match rng.below(10) {
        0..=3 => least,
        5..=6 => RECEIPT_BODY_MAX,
        7 => RECEIPT_BODY_MAX + 1,
        _ => usize::try_from(rng.between(least as u64, RECEIPT_BYTES_MAX as u64)).unwrap_or(0),
    };
    drawn.max(least)
}

/// The padding field a receipt carries before its end.
const PAD_FIELD: &str = ",\"lines\":\"\"";

/// `json` (an object) with a padding field and the end mark, `size` bytes in all (or as
/// few as that takes).
fn padded(json: &[u8], size: usize) -> Vec<u8> {
    let open = &json[..json.len() - 1];
    let pad = size.saturating_sub(open.len() + PAD_FIELD.len() + RECEIPT_END.len());
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(open);
    out.extend_from_slice(b",\"lines\":\"");
    out.resize(out.len() + pad, b'.');
    out.push(b'"');
    out.extend_from_slice(RECEIPT_END.as_bytes());
    out
}

/// What a receipt's body panics with, when the world cuts it so.
pub(crate) const INJECTED_PANIC: &str = "the receipt's body panicked half-way (injected)";

/// How a receipt is cut.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Its body returns an error.
    Fails,
    /// Its body panics (the layer must catch it, and not take the end for whole).
    Panics,
}

/// A body in frames: a receipt's, cut or stalled where the faults drew, or a client's
/// request sent chunked.
pub(crate) struct Frames {
    frames: VecDeque<Bytes>,
    sent: usize,
    /// Before this frame, the body is cut.
    cut_at: Option<(usize, Cut)>,
    /// Before this frame, the body waits this long.
    stall: Option<(usize, Duration)>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Frames {
    /// A body of `frames`, neither cut nor stalled.
    pub(crate) fn new(frames: Vec<Bytes>) -> Self {
        Self { frames: frames.into(), sent: 0, cut_at: None, stall: None, sleep: None }
    }
}

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        if let Some((at, cut)) = this.cut_at
            && at == this.sent
        {
            this.cut_at = None;
            this.frames.clear();
            match cut {
                Cut::Fails => {
                    return Poll::Ready(Some(Err(std::io::Error::other("the receipt was cut"))));
                }
                // The world's fault, on purpose: a handler's body that panics half-way.
                Cut::Panics => std::panic::panic_any(INJECTED_PANIC),
            }
        }
        if let Some((at, pause)) = this.stall
            && at == this.sent
        {
            let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
            ready!(sleep.as_mut().poll(cx));
            this.stall = None;
        }
        let Some(frame) = this.frames.pop_front() else { return Poll::Ready(None) };
        this.sent += 1;
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }
}

/// What a client makes of a success from `/receipt`: a whole receipt (its own content
/// type, its kept headers, as long as it says and ending with its end mark; replayed
/// only if within the layer's limit) names its charge; a stand-in (the problem kept in
/// place of a receipt too large to keep) says the intent was paid, and must be a replay,
/// with only its own content type and the receipt's kept headers, for a receipt the
/// limits do not let the store keep. Anything else is broken.
pub(crate) fn judge(status: u16, headers: &HeaderMap, body: &str) -> Told {
    let types: Vec<_> = headers.get_all(http::header::CONTENT_TYPE).iter().collect();
    let replayed = headers.get("idempotent-replayed").is_some_and(|v| v == "true");
    let bytes = headers.get(RECEIPT_BYTES_HEADER).and_then(|v| v.to_str().ok()?.parse().ok());
    let note = headers.get(RECEIPT_NOTE_HEADER).map(http::HeaderValue::len);
    let expires = headers.get(IDEMPOTENCY_EXPIRES).map(http::HeaderValue::len);
    let broken = |why: String| Told::Broken { why: format!("a {status} receipt: {why}") };
    let (Some(bytes), Some(note), Some(expires)) = (bytes, note, expires) else {
        return broken(format!("without its kept headers ({types:?}, {} bytes)", body.len()));
    };
    if replayed && headers.get(REPLAY_HOOK_HEADER).is_none() {
        return broken("a replay the layer's replay hook never saw".into());
    }
    if types.len() != 1 {
        return broken(format!("with content types {types:?}"));
    }
    if types[0] == "application/problem+json" {
        if !replayed {
            return broken("a stand-in in place of the first answer".into());
        }
        let whole = kept_bytes(bytes, note, expires);
        if bytes <= RECEIPT_BODY_MAX && whole <= RECEIPT_STORE_MAX {
            return broken(format!("a stand-in for {bytes} bytes ({whole} kept), which fit"));
        }
        return Told::StoodIn;
    }
    if types[0] != "application/json" || body.len() != bytes || !body.ends_with(RECEIPT_END) {
        return broken(format!("cut short or altered ({bytes} bytes said): {body:?}"));
    }
    if replayed && bytes > RECEIPT_BODY_MAX {
        return broken(format!("replayed whole, {bytes} bytes over the layer's limit"));
    }
    Told::Charged {
        charge: crate::hosts::json_field(body, "charge").unwrap_or_default(),
        amount: crate::hosts::json_field(body, "amount").unwrap_or_default(),
    }
}

/// What a whole receipt of `bytes` with a note of `note` bytes and an expiry date of
/// `expires` takes in the store's encoding: the envelope, its kept headers (each with 6
/// bytes of lengths: its one content type, its length, its note, its expiry; the layer's
/// `replay_headers` above, and the expiry it advertises) and its body.
fn kept_bytes(bytes: usize, note: usize, expires: usize) -> usize {
    let kept_headers = (6 + "content-type".len() + "application/json".len())
        + (6 + RECEIPT_BYTES_HEADER.len() + bytes.to_string().len())
        + (6 + RECEIPT_NOTE_HEADER.len() + note)
        + (6 + IDEMPOTENCY_EXPIRES.len() + expires);
    idem_http::STORED_ENVELOPE_BYTES + kept_headers + bytes
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    use super::{RECEIPT_BODY_MAX, RECEIPT_BYTES_HEADER, RECEIPT_NOTE_HEADER, judge, padded};
    use crate::shared::Told;

    const JSON: &[u8] = br#"{"charge":"ch_1","amount":"1.05 EUR","how":"charged"}"#;
    const PROBLEM: &str = r#"{"type":"about:blank","title":"Response not kept","status":201}"#;

    fn headers(types: &[&'static str], bytes: usize, note: usize, replayed: bool) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for t in types {
            headers.append(http::header::CONTENT_TYPE, HeaderValue::from_static(t));
        }
        headers.insert(RECEIPT_BYTES_HEADER, HeaderValue::from(bytes));
        let note = HeaderValue::from_str(&"n".repeat(note)).expect("ascii");
        headers.insert(RECEIPT_NOTE_HEADER, note);
        let date = HeaderValue::from_static("Thu, 03 Dec 2026 08:00:00 GMT");
        headers.insert(super::IDEMPOTENCY_EXPIRES, date);
        if replayed {
            headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
            headers.insert(super::REPLAY_HOOK_HEADER, HeaderValue::from_static("yes"));
        }
        headers
    }

    fn is_broken(told: &Told) -> bool {
        matches!(told, Told::Broken { .. })
    }

    #[test]
    fn a_whole_receipt_names_its_charge_and_a_cut_one_is_broken() {
        let receipt = String::from_utf8(padded(JSON, 700)).expect("utf-8");
        assert_eq!(receipt.len(), 700);
        let json = headers(&["application/json"], 700, 10, false);
        let told = judge(201, &json, &receipt);
        assert_eq!(told, Told::Charged { charge: "ch_1".into(), amount: "1.05 EUR".into() });
        assert_eq!(judge(201, &headers(&["application/json"], 700, 10, true), &receipt), told);
        assert!(is_broken(&judge(201, &json, &receipt[..600])), "a cut receipt passed");
        let shorter = format!("{}{}", &receipt[..500], &receipt[600..]);
        assert!(is_broken(&judge(201, &json, &shorter)), "a receipt missing a frame passed");
        assert!(is_broken(&judge(201, &HeaderMap::new(), &receipt)), "no kept headers passed");
        let mut unhooked = headers(&["application/json"], 700, 10, true);
        unhooked.remove(super::REPLAY_HOOK_HEADER);
        assert!(is_broken(&judge(201, &unhooked, &receipt)), "a replay the hook missed passed");
        let mut undated = headers(&["application/json"], 700, 10, true);
        undated.remove(super::IDEMPOTENCY_EXPIRES);
        assert!(is_broken(&judge(201, &undated, &receipt)), "a replay without its expiry");
    }

    #[test]
    fn a_json_order_is_padded_to_its_size_in_either_order_and_read_back_as_a_form() {
        let intent = crate::hosts::Intent {
            index: 3,
            key: "k".into(),
            amount: 115,
            path: "/receipt",
            reused: false,
            size: crate::hosts::Size::AtLimit,
        };
        for number in [7, 12, 1_234] {
            let body = super::order_json(&intent, number, Some(super::REQUEST_BYTES_MAX));
            assert_eq!(body.len(), super::REQUEST_BYTES_MAX, "{body}");
            let form = super::order_form(&body).expect("an order");
            assert_eq!(form, "customer=cus_3&amount=115&currency=EUR");
        }
        assert_eq!(super::order_form("customer=cus_3"), None);
    }

    #[test]
    fn a_receipt_over_the_limit_is_replayed_as_a_stand_in_never_whole() {
        let receipt = String::from_utf8(padded(JSON, RECEIPT_BODY_MAX + 1)).expect("utf-8");
        let first = headers(&["application/json"], receipt.len(), 10, false);
        assert!(matches!(judge(201, &first, &receipt), Told::Charged { .. }));
        let again = headers(&["application/json"], receipt.len(), 10, true);
        assert!(is_broken(&judge(201, &again, &receipt)), "kept whole over the limit");
    }

    #[test]
    fn a_stand_in_must_be_due_replayed_and_alone_in_its_content_type() {
        let problem = ["application/problem+json"];
        let due = headers(&problem, RECEIPT_BODY_MAX + 1, 10, true);
        assert_eq!(judge(201, &due, PROBLEM), Told::StoodIn);
        let too_long_a_note = headers(&problem, RECEIPT_BODY_MAX, 290, true);
        assert_eq!(judge(201, &too_long_a_note, PROBLEM), Told::StoodIn);
        let fits = headers(&problem, RECEIPT_BODY_MAX, 10, true);
        assert!(is_broken(&judge(201, &fits, PROBLEM)), "a stand-in for a receipt that fits");
        for types in [["application/json", problem[0]], [problem[0], "application/json"]] {
            let both = headers(&types, 4000, 10, true);
            assert!(is_broken(&judge(201, &both, PROBLEM)), "a stand-in typed {types:?}");
        }
        let first = headers(&problem, 4000, 10, false);
        assert!(is_broken(&judge(201, &first, PROBLEM)), "a stand-in as the first answer");
    }
}
