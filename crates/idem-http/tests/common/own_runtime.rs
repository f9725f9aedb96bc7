//! A server on a runtime of its own, shared by the tests and benches that drive the
//! checkout over sockets.

use std::net::SocketAddr;

/// Serves `router` on a fresh loopback port, on its own 2-worker runtime on its own
/// thread: the clients' runtime and the server's share no workers (a simulated gateway
/// that blocks its thread then stalls no client timer).
pub(crate) fn serve_on_own_runtime(router: axum::Router) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("bound");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a server runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
            axum::serve(listener, router).await
        })
    });
    addr
}
