//! Claims one key and prints the lease's deadline: the Redis store's clock test runs it
//! under libfaketime, as a client whose clock is two days ahead of the server's.
//! `cargo run -p idem-store-redis --features server-tests --bin claim_once -- <url> <prefix>
//! <key> server|own`
//! (`own`: the store reads this process's clock instead of the server's).

use std::sync::Arc;

use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig, SystemClock};
use idem_store_redis::{RedisOptions, RedisStore};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, prefix, key, clock] = &args[..] else {
        return Err("usage: claim_once <url> <prefix> <key> server|own".into());
    };
    let options = match clock.as_str() {
        "own" => RedisOptions::new().clock(Arc::new(SystemClock)),
        _ => RedisOptions::new(),
    };
    let store =
        RedisStore::<String>::connect_with(url, prefix, StoreConfig::default(), options).await?;
    let key = ScopedKey::parse("shop", key)?;
    let request = Fingerprint::builder("claim_once").finish();
    match store.claim(&key, &request).await? {
        Claim::Acquired(lease) => println!("expires_at_ms {}", lease.expires_at().as_millis()),
        other => println!("not acquired: {other:?}"),
    }
    Ok(())
}
