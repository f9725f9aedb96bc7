//! The body of every response that leaves the layer: the handler's own, a stored one
//! replayed, a problem the layer answered itself, or a response too large to keep,
//! whose head the layer read and whose rest streams on to the client untouched.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// A boxed error, as tower's.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of a response from [`Idempotency`](crate::Idempotency): the handler's body
/// `B` passed through, read whole (a response the layer kept, a replay, a problem), or a
/// head read while deciding whether to keep it followed by the rest of `B` as it comes.
pub struct ResponseBody<B> {
    kind: Kind<B>,
}

enum Kind<B> {
    /// The handler's body, untouched (no key, a method the layer ignores).
    Inner(Pin<Box<B>>),
    /// Bytes read whole; `None` once sent.
    Full(Option<Bytes>),
    /// A head already read (sent first), then the handler's body from where it stopped.
    Rest { head: Option<Bytes>, rest: Pin<Box<B>> },
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self { kind: Kind::Inner(Box::pin(body)) }
    }

    pub(crate) fn full(bytes: Bytes) -> Self {
        Self { kind: Kind::Full(Some(bytes).filter(|b| !b.is_empty())) }
    }

    pub(crate) fn rest(head: Bytes, rest: Pin<Box<B>>) -> Self {
        Self { kind: Kind::Rest { head: Some(head).filter(|b| !b.is_empty()), rest } }
    }
}

impl<B> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Inner(_) => "inner",
            Kind::Full(_) => "full",
            Kind::Rest { .. } => "rest",
        };
        f.debug_struct("ResponseBody").field("kind", &kind).finish()
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // Every field is boxed or `Unpin`: the body itself may move.
        let this = self.get_mut();
        match &mut this.kind {
            Kind::Inner(body) => body.as_mut().poll_frame(cx).map_err(Into::into),
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Rest { head, rest } => match head.take() {
                Some(head) => Poll::Ready(Some(Ok(Frame::data(head)))),
                None => rest.as_mut().poll_frame(cx).map_err(Into::into),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner(body) => body.is_end_stream(),
            Kind::Full(bytes) => bytes.is_none(),
            Kind::Rest { head, rest } => head.is_none() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner(body) => body.size_hint(),
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Rest { head, rest } => {
                let head = head.as_ref().map_or(0, |b| b.len() as u64);
                let rest = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower().saturating_add(head));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(head));
                }
                hint
            }
        }
    }
}

impl<B> From<Bytes> for ResponseBody<B> {
    fn from(bytes: Bytes) -> Self {
        Self::full(bytes)
    }
}
