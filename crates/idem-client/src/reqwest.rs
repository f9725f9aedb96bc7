//! [`IdempotentRetry`] for reqwest, as a `reqwest-middleware` middleware: the way reqwest
//! users add retries, with the one thing a plain retry lacks, the same key on every
//! attempt.

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::retry::{Answer, Failed, attempts};
use crate::{ClientError, Intent, RetryPolicy};

/// Retries each request as one intent: the [`Intent`] in its extensions
/// (`RequestBuilder::with_extension`), or else one made for this call and put there (so
/// that a retry middleware outside this one, which runs the chain again with the same
/// extensions, repeats the same intent), its key set as `Idempotency-Key` on every
/// attempt (a key the request already carries is kept). The
/// answer's extensions hold its [`Attempts`](crate::Attempts); an intent past its
/// deadline, or answered 422, is a [`ClientError`] inside
/// `reqwest_middleware::Error::Middleware`.
///
/// ```no_run
/// use idem_client::{Attempts, IdempotentRetry, Intent, RetryPolicy};
///
/// # async fn pay() -> Result<(), Box<dyn std::error::Error>> {
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(IdempotentRetry::new(RetryPolicy::default()))
///     .build();
/// let intent = Intent::new(); // once per click on "Pay", kept while it may be retried
/// let answer = client
///     .post("http://127.0.0.1:3000/checkout")
///     .body("customer=cus_1&amount=1050&currency=EUR")
///     .with_extension(intent)
///     .send()
///     .await?;
/// let attempts = answer.extensions().get::<Attempts>().copied();
/// println!("{} after {attempts:?}", answer.status());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct IdempotentRetry {
    policy: RetryPolicy,
}

impl IdempotentRetry {
    /// The middleware, retrying by `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        Self { policy }
    }
}

impl Answer for Response {
    fn status(&self) -> http::StatusCode {
        self.status()
    }

    fn headers(&self) -> &http::HeaderMap {
        self.headers()
    }
}

#[async_trait::async_trait]
impl Middleware for IdempotentRetry {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        // Kept in the extensions when made here: a retry middleware outside this one runs
        // the chain again with the same extensions, and its tries are the same intent.
        let intent = extensions.get_or_insert_with(Intent::new).clone();
        let key = crate::intent::key_to_send(request.headers_mut(), &intent);
        // A body is sent again only if it is bytes in memory (a stream is read once);
        // asked of the body itself, so no copy is made to find out.
        if request.body().is_some_and(|body| body.as_bytes().is_none()) {
            return Err(reqwest_middleware::Error::middleware(
                ClientError::<BoxError>::BodyNotReplayable,
            ));
        }
        let own_url = request.url().clone();
        let send = || {
            // Checked above: the body is bytes in memory, the same on every attempt, so
            // the copy is made.
            let copy = request.try_clone();
            let (next, mut extensions) = (next.clone(), extensions.clone());
            let own_url = own_url.clone();
            async move {
                let Some(copy) = copy else {
                    return Err(Failed::Unsendable(BoxError::from(
                        "the body cannot be sent again",
                    )));
                };
                match next.run(copy, &mut extensions).await {
                    Ok(response) => Ok(response),
                    // A builder error about this request: it was never sent. One about
                    // another URL is a redirect reqwest will not follow (a scheme it
                    // does not speak, a bad Location): the server answered, so it may
                    // have acted.
                    Err(reqwest_middleware::Error::Reqwest(e))
                        if e.is_builder() && e.url().is_none_or(|url| *url == own_url) =>
                    {
                        Err(Failed::Unsendable(Box::new(e) as BoxError))
                    }
                    // So is a chain of redirects past reqwest's policy (a loop): each
                    // try would get the same answers.
                    Err(reqwest_middleware::Error::Reqwest(e))
                        if e.is_builder() || e.is_redirect() =>
                    {
                        Err(Failed::Unfollowed(Box::new(e) as BoxError))
                    }
                    Err(e) => Err(Failed::Unanswered(Box::new(e) as BoxError)),
                }
            }
        };
        match attempts(&self.policy, &key, send).await {
            Ok((mut response, tried)) => {
                response.extensions_mut().insert(tried);
                Ok(response)
            }
            Err(error) => Err(reqwest_middleware::Error::middleware(error)),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
