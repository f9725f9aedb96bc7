//! Serving the checkout as a production service must: a bound on open connections, and
//! timeouts on a request's headers (which also ends a keep-alive connection left idle)
//! and on its body, so that a slow or half-sent request cannot hold a connection, and
//! the memory behind it, for ever.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_http::timeout::RequestBodyTimeoutLayer;

/// The server's limits; see each default.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections served at once; one more waits in the listen backlog until one closes.
    /// Default [`Limits::CONNECTIONS_DEFAULT`].
    pub(crate) connections_max: usize,
    /// How long a client has to send a request's headers, and how long a keep-alive
    /// connection may sit idle before its next request. Default 10 s.
    pub(crate) header_timeout: Duration,
    /// How long a client has to send a request's body. Default 10 s. A body cut off is
    /// answered 400 before anything is claimed or run.
    pub(crate) body_timeout: Duration,
}

impl Limits {
    /// The default connection bound: 1,024.
    pub(crate) const CONNECTIONS_DEFAULT: usize = 1024;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connections_max: Self::CONNECTIONS_DEFAULT,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
        }
    }
}

/// The pause after a failed accept (out of file descriptors, say) before the next one.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` within `limits` until `shutdown` completes (connections
/// open then are left to finish on their own tasks).
///
/// # Errors
///
/// Never returns an error of its own: a failed accept is retried after a pause.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let router = router.layer(RequestBodyTimeoutLayer::new(limits.body_timeout));
    let permits = Arc::new(Semaphore::new(limits.connections_max));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit,
            () = &mut shutdown => return Ok(()),
        };
        let Ok(permit) = permit else { return Ok(()) };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            // A connection that ends badly (a timeout, a reset) ends only itself.
            let _ = connection.await;
            drop(permit);
        });
    }
}
