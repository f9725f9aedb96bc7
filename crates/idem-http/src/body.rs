//! The body of every response that leaves the layer: the handler's own, a stored one
//! replayed, a problem the layer answered itself, or a response too large to keep,
//! whose head the layer read and whose rest the run task streams on to the client.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{mpsc, oneshot};

/// A boxed error, as tower's.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the run task sends down a streamed body: a frame, the body's failure, or its end.
/// The end is said, not inferred: a channel that closes without it (the run task
/// panicked, or was stopped past its orphan bound) is a body that failed, never one that
/// ended well.
pub(crate) enum Streamed {
    Frame(Frame<Bytes>),
    Failed(BoxError),
    End,
}

/// The body of a response from [`Idempotency`](crate::Idempotency): the handler's body
/// `B` passed through, read whole (a response the layer kept, a replay, a problem), or a
/// head read while deciding whether to keep it followed by the rest of `B` as the run
/// task reads it (the task reads on if the client leaves, to learn whether it ended well).
pub struct ResponseBody<B> {
    kind: Kind<B>,
}

enum Kind<B> {
    /// The handler's body, untouched (no key, a method the layer ignores).
    Inner(Pin<Box<B>>),
    /// Bytes read whole; `None` once sent.
    Full(Option<Bytes>),
    /// A head already read (sent first), then the frames the run task reads on, and the
    /// sign that the client is still here (dropped with the body).
    Streamed {
        head: Option<Bytes>,
        frames: mpsc::Receiver<Streamed>,
        present: Option<oneshot::Sender<()>>,
        ended: bool,
    },
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self { kind: Kind::Inner(Box::pin(body)) }
    }

    pub(crate) fn full(bytes: Bytes) -> Self {
        Self { kind: Kind::Full(Some(bytes).filter(|b| !b.is_empty())) }
    }

    pub(crate) fn streamed(head: Bytes, frames: mpsc::Receiver<Streamed>) -> Self {
        let head = Some(head).filter(|b| !b.is_empty());
        Self { kind: Kind::Streamed { head, frames, present: None, ended: false } }
    }

    /// Keeps `present` for as long as the client reads a streamed body: its drop tells
    /// the run task the client left. Any other body is whole already: dropped at once.
    pub(crate) fn hold_presence(&mut self, present: oneshot::Sender<()>) {
        if let Kind::Streamed { present: held, .. } = &mut self.kind {
            *held = Some(present);
        }
    }
}

impl<B> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Inner(_) => "inner",
            Kind::Full(_) => "full",
            Kind::Streamed { .. } => "streamed",
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
            Kind::Streamed { head, frames, ended, .. } => {
                if let Some(head) = head.take() {
                    return Poll::Ready(Some(Ok(Frame::data(head))));
                }
                if *ended {
                    return Poll::Ready(None);
                }
                Poll::Ready(match std::task::ready!(frames.poll_recv(cx)) {
                    Some(Streamed::Frame(frame)) => Some(Ok(frame)),
                    Some(Streamed::Failed(error)) => Some(Err(error)),
                    Some(Streamed::End) => {
                        *ended = true;
                        None
                    }
                    None => {
                        *ended = true;
                        Some(Err("the response ended before it was whole".into()))
                    }
                })
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner(body) => body.is_end_stream(),
            Kind::Full(bytes) => bytes.is_none(),
            // The task's channel tells its end only when polled.
            Kind::Streamed { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner(body) => body.size_hint(),
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Streamed { head, .. } => {
                let mut hint = SizeHint::new();
                hint.set_lower(head.as_ref().map_or(0, |b| b.len() as u64));
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
