//! The seed's checkout as a web service on loopback: `GET /` serves a page whose button
//! pays; `POST /checkout` charges a simulated gateway once per `Idempotency-Key`. Click
//! twice, reload after a failure: one charge.
//!
//! ```text
//! cargo run -p idem-http --example checkout_server            # http://127.0.0.1:3000/
//! IDEM_HTTP_ADDR=127.0.0.1:8080 cargo run -p idem-http --example checkout_server
//! cargo run -p idem-http --example checkout_server -- --naive   # without the layer
//! cargo run -p idem-http --example checkout_server -- --store sqlite:/tmp/keys.db
//! cargo run -p idem-http --example checkout_server -- --store postgres:postgres://...
//! cargo run -p idem-http --example checkout_server -- --store redis:redis://127.0.0.1:6379
//! cargo run -p idem-http --example checkout_server -- --gateway http://127.0.0.1:7000
//! cargo run -p idem-http --example checkout_server -- --lease-ms 2000
//! ```
//!
//! The server bounds its connections (1,024) and gives a client 10 s to send a request's
//! headers (or, idle on a keep-alive connection, its next request) and 10 s for its body.
//!
//! `--store` picks where the keys live: `memory` (the default: one process, lost with
//! it), `sqlite:PATH` (one machine, through crashes), `postgres:URL` (every server on
//! the database; each order is then recorded in the database in the transaction that
//! stores its answer) or `redis:URL` (every server on the Redis server; it must keep an
//! append-only file and never evict keys).
//!
//! `--gateway http://HOST:PORT` sends payments to a gateway over the network (the cluster
//! harness's `gateway_server`: `cargo run -p idem-crash --bin gateway_server -- --file
//! charges.log --addr 127.0.0.1:7000`) instead of the simulated one in the process. A
//! recovering request then asks that gateway whether its key was charged.

mod app;
mod orders;
mod remote;
mod serve;

use std::sync::Arc;

use idem_core::{MemoryStore, StoreConfig};
use idem_payments::SimulatedGateway;
use idem_store_postgres::AsyncPgStore;
use idem_store_redis::RedisStore;

/// Where the keys live, from `--store`.
enum Store {
    Memory,
    Sqlite(std::path::PathBuf),
    Postgres(String),
    Redis(String),
}

/// `--store memory|sqlite:PATH|postgres:URL|redis:URL`, or what is wrong with it.
fn store_arg(args: &[String]) -> Result<Store, String> {
    let Some(at) = args.iter().position(|a| a == "--store") else { return Ok(Store::Memory) };
    let value = args.get(at + 1).ok_or(EXPECTED_STORE)?;
    if value == "memory" {
        return Ok(Store::Memory);
    }
    if let Some(path) = value.strip_prefix("sqlite:").filter(|p| !p.is_empty()) {
        return Ok(Store::Sqlite(path.into()));
    }
    if let Some(url) = value.strip_prefix("postgres:").filter(|u| u.starts_with("postgres")) {
        return Ok(Store::Postgres(url.to_string()));
    }
    if let Some(url) = value.strip_prefix("redis:").filter(|u| u.starts_with("redis")) {
        return Ok(Store::Redis(url.to_string()));
    }
    Err(format!("--store {value:?}: {EXPECTED_STORE}"))
}

/// What `--store` takes.
const EXPECTED_STORE: &str = "--store takes memory, sqlite:PATH, postgres:URL or redis:URL";

/// `--lease-ms N`: the store's lease (how long a crashed server's claim holds its key
/// before a retry recovers it), or the default, 30 s.
fn config_arg(args: &[String]) -> Result<StoreConfig, String> {
    let Some(at) = args.iter().position(|a| a == "--lease-ms") else {
        return Ok(StoreConfig::default());
    };
    let ms: u64 = args
        .get(at + 1)
        .and_then(|v| v.parse().ok())
        .ok_or("--lease-ms needs a number of milliseconds")?;
    let lease = std::time::Duration::from_millis(ms);
    StoreConfig::builder().lease(lease).build().map_err(|e| format!("--lease-ms {ms}: {e}"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let refuse = |why: String| -> ! {
        eprintln!("checkout_server: {why}");
        std::process::exit(2)
    };
    let store = store_arg(&args).unwrap_or_else(|why| refuse(why));
    let config = config_arg(&args).unwrap_or_else(|why| refuse(why));
    let addr = std::env::var("IDEM_HTTP_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let naive = args.iter().any(|arg| arg == "--naive");
    if naive && !matches!(store, Store::Memory) {
        eprintln!("checkout_server: --naive runs without the layer, so without a --store");
        std::process::exit(2);
    }
    let mode = if naive { app::Mode::Naive } else { app::Mode::Idempotent };
    let remote = match args.iter().position(|a| a == "--gateway") {
        None => None,
        Some(at) => {
            let url = args.get(at + 1).map_or("", String::as_str);
            Some(remote::RemoteGateway::parse(url).unwrap_or_else(|why| refuse(why)))
        }
    };
    let (router, shop) = match store {
        Store::Memory => app::router(mode, Arc::new(MemoryStore::new(config))),
        Store::Sqlite(path) => {
            app::router(mode, idem_store_sqlite::SqliteStore::open(&path, config)?)
        }
        Store::Postgres(url) => {
            let store = AsyncPgStore::connect(&url, orders::SCHEMA, config).await?;
            let store = orders::with_orders(store, orders::SCHEMA).await?;
            let gateway = SimulatedGateway::new().without_dedup();
            let (router, recorded) = orders::router(store, orders::SCHEMA, gateway);
            (router, recorded.shop.clone())
        }
        Store::Redis(url) => {
            let store = RedisStore::connect(&url, orders::SCHEMA, config).await?;
            app::router(mode, store)
        }
    };
    if let Some(remote) = remote {
        let _ = shop.remote.set(remote);
    }
    println!("checkout ({mode:?}) on http://{}/ (Ctrl-C to stop)", listener.local_addr()?);
    // Bounded connections, and timeouts on headers, bodies and idle connections.
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve::serve(listener, router, serve::Limits::default(), stop).await?;
    // Runs whose clients left are still charging: let them end before the runtime does.
    if let Some(runs) = shop.runs.get() {
        let going = runs.going();
        if !runs.drained(idem_http::ConfigBuilder::ORPHAN_TIME_DEFAULT).await {
            eprintln!("checkout_server: {going} runs did not end in time; their keys recover");
        }
    }
    if shop.remote.get().is_none() {
        let totals = shop.gateway.totals();
        println!("charges made: {} ({} minor units)", totals.charges, totals.charged_minor);
    }
    Ok(())
}
