//! What the store reads of the server's configuration at connect, and what it refuses.

use redis::aio::ConnectionManager;

use crate::RedisError;

/// The server's settings that decide what an acknowledged change survives, as read at
/// connect ([`RedisStore::server`](crate::RedisStore::server)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerDurability {
    /// `maxmemory-policy` (the store accepts only `noeviction`), or `None` if the operator
    /// vouched for the server instead.
    pub maxmemory_policy: Option<String>,
    /// Whether the server keeps an append-only file (`appendonly`).
    pub appendonly: Option<bool>,
    /// `appendfsync`: `always` (no acknowledged change lost to a crash), `everysec` (up
    /// to a second of them), or `no` (what the operating system had not written).
    pub appendfsync: Option<String>,
}

impl ServerDurability {
    /// Settings nobody read: the operator vouched for the server.
    pub(crate) fn vouched() -> Self {
        Self { maxmemory_policy: None, appendonly: None, appendfsync: None }
    }
}

/// One configuration parameter, by `CONFIG GET`: a name-value array (RESP2) or a map
/// (RESP3, `?protocol=resp3`).
async fn config_get(conn: &mut ConnectionManager, name: &str) -> Result<String, RedisError> {
    let reply: redis::Value = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await
        .map_err(RedisError::ConfigUnreadable)?;
    let value = match reply {
        redis::Value::Array(mut pair) if pair.len() == 2 => pair.pop(),
        redis::Value::Map(mut pairs) if pairs.len() == 1 => pairs.pop().map(|(_, v)| v),
        _ => None,
    };
    let text = value.and_then(|v| redis::from_redis_value::<String>(v).ok());
    text.ok_or_else(|| RedisError::Reply(format!("CONFIG GET {name}: not one name and value")))
}

/// Refuses a replica: a store must write to the primary (a replica that accepts writes
/// keeps them to itself, so a store on it and one on the primary would both own a key).
pub(crate) async fn check_primary(conn: &mut ConnectionManager) -> Result<(), RedisError> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await
        .map_err(RedisError::ConfigUnreadable)?;
    let role = info.lines().find_map(|line| line.trim().strip_prefix("role:"));
    match role {
        Some("master") => Ok(()),
        Some(other) => Err(RedisError::NotPrimary { role: other.to_owned() }),
        None => Err(RedisError::Reply("INFO replication names no role".into())),
    }
}

/// Reads the server's eviction policy and persistence, refusing a policy that can evict
/// a key and, unless `restart_may_forget`, a server without an append-only file; and its
/// largest argument, refusing a `result_bytes_max` it would not take (a result the store
/// promised to keep would be refused at `complete`, and the protocol error breaks the
/// other calls in flight on the shared connection).
pub(crate) async fn check(
    conn: &mut ConnectionManager,
    restart_may_forget: bool,
    result_bytes_max: usize,
) -> Result<ServerDurability, RedisError> {
    let bulk = config_get(conn, "proto-max-bulk-len").await?;
    let bulk_max = bulk.parse::<u64>().map_err(|_| {
        RedisError::Reply(format!("CONFIG GET proto-max-bulk-len: {bulk:?} is not a number"))
    })?;
    // A result is sent as one value: its payload and the durable encoding's prefix.
    let value_max = (result_bytes_max as u64).saturating_add(idem_durable::RESULT_PREFIX as u64);
    if value_max > bulk_max {
        return Err(RedisError::ResultsPastTheServer { result_bytes_max, bulk_max });
    }
    let policy = config_get(conn, "maxmemory-policy").await?;
    // Every other policy (allkeys-*, volatile-*) evicts keys: finished results carry a
    // TTL, so even volatile-* can evict a result before the TTL ends.
    if policy != "noeviction" {
        return Err(RedisError::EvictionPolicy { policy });
    }
    let appendonly = config_get(conn, "appendonly").await?;
    if appendonly != "yes" && !restart_may_forget {
        return Err(RedisError::NoPersistence { appendonly });
    }
    let appendfsync = config_get(conn, "appendfsync").await?;
    Ok(ServerDurability {
        maxmemory_policy: Some(policy),
        appendonly: Some(appendonly == "yes"),
        appendfsync: Some(appendfsync),
    })
}
