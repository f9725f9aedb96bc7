//! The checkout that records each order in PostgreSQL (`--store postgres:URL`), in the
//! transaction that stores its answer: the order row and the stored response commit
//! together, or neither does. A crash before the commit leaves the key in flight with no
//! order; the retry after the lease asks the gateway (which charged at most once, by the
//! key) and records the order then. Never an order without its answer, nor two orders.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use idem_core::{Lease, StoreError};
use idem_http::{Claimed, OutcomeUnknown, Recovering, StoredByHandler, StoredResponse};
use idem_payments::{Charge, SimulatedGateway};
use idem_store_postgres::AsyncPgStore;

use crate::app::{Shop, charge_json, layer, page, pay};

/// The namespace of the layer's keys and of the orders table.
pub(crate) const SCHEMA: &str = "checkout";

/// The keys' store, and the shop whose orders it records.
pub(crate) struct Orders {
    pub(crate) store: Arc<AsyncPgStore<StoredResponse>>,
    pub(crate) shop: Arc<Shop>,
    /// The namespace of the orders table (the store's own).
    pub(crate) schema: String,
}

/// `store` (on namespace `schema`) with its orders table made.
///
/// # Errors
///
/// The store's, if the server cannot be reached or the table made.
pub(crate) async fn with_orders(
    store: AsyncPgStore<StoredResponse>,
    schema: &str,
) -> Result<Arc<AsyncPgStore<StoredResponse>>, StoreError> {
    let storage = |e: idem_store_postgres::tokio_postgres::Error| StoreError::Storage(Box::new(e));
    let client = store.pool().get().await.map_err(|e| StoreError::Storage(Box::new(e)))?;
    let table = format!(
        "CREATE TABLE IF NOT EXISTS \"{schema}\".orders (key TEXT PRIMARY KEY, \
         charge TEXT NOT NULL, amount_minor BIGINT NOT NULL)"
    );
    client.batch_execute(&table).await.map_err(storage)?;
    drop(client);
    Ok(Arc::new(store))
}

/// The recorded checkout's router on `store` (namespace `schema`), charging `gateway`.
pub(crate) fn router(
    store: Arc<AsyncPgStore<StoredResponse>>,
    schema: &str,
    gateway: SimulatedGateway,
) -> (Router, Arc<Orders>) {
    let shop = Arc::new(Shop::new(gateway));
    let layer = layer(store.clone());
    let _ = shop.runs.set(layer.runs());
    let orders = Arc::new(Orders { store, shop, schema: schema.to_string() });
    let router = Router::new()
        .route("/", get(page))
        .route("/checkout", post(checkout).route_layer(layer))
        .with_state(orders.clone());
    (router, orders)
}

/// Pays, then records the order and stores the answer in one transaction.
async fn checkout(
    State(orders): State<Arc<Orders>>,
    Extension(claimed): Extension<Claimed>,
    recovering: Option<Extension<Recovering>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let recovering = recovering.is_some();
    let paying = orders.shop.paying(move |shop, gone| pay(shop, gone, recovering, &headers, &body));
    let (status, charge, how) = match paying.await {
        Ok(paid) => paid,
        Err(answer) => return *answer,
    };
    let json = HeaderValue::from_static("application/json");
    let body = charge_json(&charge, how);
    let answer =
        StoredResponse { status, headers: vec![(header::CONTENT_TYPE, json)], body: body.into() };
    match record(&orders, claimed.lease(), &charge, answer.clone()).await {
        Ok(()) => {
            let mut response: Response = answer.to_response();
            response.extensions_mut().insert(StoredByHandler);
            response
        }
        // Charged (at most once: the gateway key is the request's), but the order is not
        // recorded: another request recovered the key, or the database failed. Not
        // stored; the key stays in flight, and its next holder records the order.
        Err(_) => {
            let why = "the payment went through but its order is not recorded yet; retry with \
                       the same key: the retry records it, never a second charge";
            (StatusCode::SERVICE_UNAVAILABLE, Extension(OutcomeUnknown), why).into_response()
        }
    }
}

/// The order row and the stored answer, in one transaction.
async fn record(
    orders: &Orders,
    lease: &Lease,
    charge: &Charge,
    answer: StoredResponse,
) -> Result<(), StoreError> {
    let storage = |e: idem_store_postgres::tokio_postgres::Error| StoreError::Storage(Box::new(e));
    let pool = orders.store.pool();
    let mut client = pool.get().await.map_err(|e| StoreError::Storage(Box::new(e)))?;
    let tx = client.transaction().await.map_err(storage)?;
    let insert = format!(
        "INSERT INTO \"{}\".orders (key, charge, amount_minor) VALUES ($1, $2, $3)",
        orders.schema
    );
    let amount = i64::try_from(charge.amount.minor()).unwrap_or(i64::MAX);
    tx.execute(&insert, &[&lease.key().to_string(), &charge.id.to_string(), &amount])
        .await
        .map_err(storage)?;
    // Fenced by the lease's token: a stale lease is refused, and the order rolls back.
    orders.store.complete_in(&tx, lease, answer).await?;
    tx.commit().await.map_err(storage)
}
