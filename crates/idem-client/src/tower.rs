//! [`IdempotentRetryLayer`]: the same retries for hyper and other tower clients, on
//! requests whose body is bytes in memory (sent again, unchanged, on every attempt).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tower_layer::Layer;
use tower_service::Service;

use crate::retry::{Answer, Failed, attempts};
use crate::{ClientError, Intent, RetryPolicy};

/// Wraps a client service so that each request is one intent, retried by the policy with
/// one key: the [`Intent`] in the request's extensions, or else one made for the call (a
/// key the request already carries is kept). The answer's extensions hold its
/// [`Attempts`](crate::Attempts). A retry layer outside this one sends clones of the
/// request, which never see an intent made inside: give the request its [`Intent`] when
/// another layer may retry it, or each of that layer's tries is a new intent.
///
/// A generic client's error cannot say whether the request left: every error of the
/// wrapped service is taken as "no answer" and retried, to the deadline. A request that
/// can never be sent (a relative URI for hyper's client) therefore ends as an unknown
/// outcome; build it whole before sending.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use idem_client::{Attempts, IdempotentRetryLayer, Intent, RetryPolicy};
/// use tower::{Service, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A stand-in for hyper's client: the first attempt gets a 503, the second the answer.
/// let tries = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let server = service_fn(move |request: http::Request<Full<Bytes>>| {
///     let n = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
///     let key = request.headers()["idempotency-key"].clone();
///     async move {
///         let status = if n == 0 { 503 } else { 201 };
///         let answer = http::Response::builder().status(status).header("seen-key", key);
///         answer.body(())
///     }
/// });
/// let mut client = tower::ServiceBuilder::new()
///     .layer(IdempotentRetryLayer::new(RetryPolicy::default()))
///     .service(server);
/// let intent = Intent::from_id("order-1042")?;
/// let mut request = http::Request::post("http://shop/checkout").body(Full::new(Bytes::new()))?;
/// request.extensions_mut().insert(intent);
/// let answer = client.ready().await?.call(request).await?;
/// assert_eq!(answer.status(), 201);
/// assert_eq!(answer.headers()["seen-key"], "\"order-1042\"");
/// assert_eq!(answer.extensions().get::<Attempts>().map(|a| a.count), Some(2));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct IdempotentRetryLayer {
    policy: RetryPolicy,
}

impl IdempotentRetryLayer {
    /// The layer, retrying by `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        Self { policy }
    }
}

impl<S> Layer<S> for IdempotentRetryLayer {
    type Service = IdempotentRetryService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotentRetryService { inner, policy: self.policy }
    }
}

/// The service [`IdempotentRetryLayer`] wraps around a client.
#[derive(Debug, Clone)]
pub struct IdempotentRetryService<S> {
    inner: S,
    policy: RetryPolicy,
}

impl<B> Answer for Response<B> {
    fn status(&self) -> http::StatusCode {
        self.status()
    }

    fn headers(&self) -> &http::HeaderMap {
        self.headers()
    }
}

impl<S, B> Service<Request<Full<Bytes>>> for IdempotentRetryService<S>
where
    S: Service<Request<Full<Bytes>>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Display + Send,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = ClientError<S::Error>;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ClientError::Request)
    }

    fn call(&mut self, mut request: Request<Full<Bytes>>) -> Self::Future {
        let intent = request.extensions().get::<Intent>().cloned().unwrap_or_default();
        let key = crate::intent::key_to_send(request.headers_mut(), &intent);
        // The first attempt on the service made ready by `poll_ready` (it may hold a
        // permit: a concurrency limit's); each later one on a clone, made ready in turn.
        let template = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, template.clone());
        let policy = self.policy;
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let mut first = Some(ready);
            let send = move || {
                let copy = Request::from_parts(parts.clone(), body.clone());
                let (service, is_ready) = match first.take() {
                    Some(ready) => (ready, true),
                    None => (template.clone(), false),
                };
                async move {
                    let mut service = service;
                    if !is_ready {
                        std::future::poll_fn(|cx| service.poll_ready(cx))
                            .await
                            .map_err(Failed::Unanswered)?;
                    }
                    service.call(copy).await.map_err(Failed::Unanswered)
                }
            };
            let answer = attempts(&policy, &key, send).await;
            let (mut response, tried) = answer?;
            response.extensions_mut().insert(tried);
            Ok(response)
        })
    }
}
