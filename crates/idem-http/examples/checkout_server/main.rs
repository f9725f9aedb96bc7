//! The seed's checkout as a web service on loopback: `GET /` serves a page whose button
//! pays; `POST /checkout` charges a simulated gateway once per `Idempotency-Key`. Click
//! twice, reload after a failure: one charge.
//!
//! ```text
//! cargo run -p idem-http --example checkout_server            # http://127.0.0.1:3000/
//! IDEM_HTTP_ADDR=127.0.0.1:8080 cargo run -p idem-http --example checkout_server
//! cargo run -p idem-http --example checkout_server -- --naive   # without the layer
//! ```

mod app;

use std::sync::Arc;

use idem_core::{MemoryStore, StoreConfig};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("IDEM_HTTP_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let naive = std::env::args().any(|arg| arg == "--naive");
    let mode = if naive { app::Mode::Naive } else { app::Mode::Idempotent };
    let (router, shop) = app::router(mode, store);
    println!("checkout ({mode:?}) on http://{}/ (Ctrl-C to stop)", listener.local_addr()?);
    let served = axum::serve(listener, router).with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    served.await?;
    let totals = shop.gateway.totals();
    println!("charges made: {} ({} minor units)", totals.charges, totals.charged_minor);
    Ok(())
}
