//! One worker process of the payment crash tests. It pays intents `first..first+count`
//! against an SQLite store file and a file gateway, printing `ACK <intent> <charge id>`
//! (flushed) for each answer it gives the client, and aborts at a named crash point if
//! asked: `after_claim`, `after_charge`, `after_record`, `before_reply` or `after_ack`
//! (right after the answer is printed, so the last acknowledged answer is checked every
//! round rather than by timing), for one intent.
//!
//! Usage:
//! `crash_worker <store file or postgres URL> <gateway file> <first> <count> [<point> <intent>]`

use std::io::Write;
use std::path::Path;

use idem_core::{
    Claim, Fingerprint, KeyStore, Lease, PendingClaim, ScopedKey, StoreConfig, StoreError,
};
use idem_crash::FileGateway;
use idem_crash::payments::{self, Ack, Intent, ack_line, intent};
use idem_payments::{
    Charge, ChargeId, Gateway, GatewayError, GatewayKey, Lookup, PaymentOutcome, PaymentRequest,
    Processor,
};
use idem_store_sqlite::SqliteStore;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Point {
    AfterClaim,
    AfterCharge,
    AfterRecord,
    BeforeReply,
    AfterAck,
}

/// The crash plan: abort at `point` while handling the intent with key `key`.
struct Plan {
    point: Option<Point>,
    key: String,
}

impl Plan {
    fn hit(&self, point: Point, key: &str) {
        if self.point == Some(point) && self.key == key {
            std::process::abort();
        }
    }
}

struct CrashStore<'a> {
    inner: Box<dyn KeyStore<PaymentOutcome>>,
    plan: &'a Plan,
}

impl KeyStore<PaymentOutcome> for CrashStore<'_> {
    fn claim(
        &self,
        key: &ScopedKey,
        fp: &Fingerprint,
    ) -> Result<Claim<PaymentOutcome>, StoreError> {
        let claim = self.inner.claim(key, fp)?;
        if matches!(claim, Claim::Acquired(_) | Claim::Recover(_)) {
            self.plan.hit(Point::AfterClaim, key.key().as_str());
        }
        Ok(claim)
    }
    fn complete(&self, lease: &Lease, result: PaymentOutcome) -> Result<(), StoreError> {
        self.inner.complete(lease, result)?;
        self.plan.hit(Point::AfterRecord, lease.key().key().as_str());
        Ok(())
    }
    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease)
    }
    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.inner.renew(lease)
    }
    fn lease(&self) -> std::time::Duration {
        self.inner.lease()
    }

    fn result_ttl(&self) -> std::time::Duration {
        self.inner.result_ttl()
    }
    fn sweep(&self) -> Result<usize, StoreError> {
        self.inner.sweep()
    }
    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.inner.pending(max)
    }
    fn lookup(
        &self,
        key: &ScopedKey,
        fp: &Fingerprint,
    ) -> Result<idem_core::KeyState<PaymentOutcome>, StoreError> {
        self.inner.lookup(key, fp)
    }
}

struct CrashGateway<'a> {
    inner: FileGateway,
    plan: &'a Plan,
    target: Option<GatewayKey>,
}

impl Gateway for CrashGateway<'_> {
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError> {
        let charge = self.inner.charge(key, request)?;
        if self.target.as_ref() == Some(key) {
            self.plan.hit(Point::AfterCharge, &self.plan.key);
        }
        Ok(charge)
    }
    fn lookup(&self, key: &GatewayKey) -> Lookup {
        self.inner.lookup(key)
    }
    fn set_refunded(&self, charge: ChargeId) -> bool {
        self.inner.set_refunded(charge)
    }
}

/// The store: a PostgreSQL URL (namespace from `IDEM_PG_SCHEMA`) or an SQLite file.
fn open_store(spec: &str, config: StoreConfig) -> Box<dyn KeyStore<PaymentOutcome>> {
    #[cfg(feature = "postgres")]
    if spec.starts_with("postgres://") {
        let schema = std::env::var("IDEM_PG_SCHEMA").expect("IDEM_PG_SCHEMA names the namespace");
        return Box::new(
            idem_store_postgres::PgStore::connect(spec, &schema, config)
                .expect("the store connects"),
        );
    }
    Box::new(SqliteStore::open(Path::new(spec), config).expect("the store opens"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, store, gateway, first, count, rest @ ..] = &args[..] else {
        eprintln!("usage: crash_worker <store> <gateway> <first> <count> [<point> <intent>]");
        std::process::exit(2);
    };
    let (first, count): (u64, u64) = (first.parse().expect("first"), count.parse().expect("count"));
    let point = match rest.first().map(String::as_str) {
        Some("after_claim") => Some(Point::AfterClaim),
        Some("after_charge") => Some(Point::AfterCharge),
        Some("after_record") => Some(Point::AfterRecord),
        Some("before_reply") => Some(Point::BeforeReply),
        Some("after_ack") => Some(Point::AfterAck),
        _ => None,
    };
    let target: Option<u64> = rest.get(1).and_then(|t| t.parse().ok());
    let plan = Plan { point, key: target.map(|t| format!("intent-{t}")).unwrap_or_default() };
    // The processor's store lives as long as its lease renewer: for the whole process.
    let plan: &'static Plan = Box::leak(Box::new(plan));
    let config = StoreConfig::builder().lease(payments::LEASE).build().expect("valid config");
    let inner = open_store(store, config);
    let gateway_target = target.map(|t| {
        let Intent { key, request } = intent(t);
        let scope = idem_core::Scope::new(&format!("shop/{}", request.customer())).expect("scope");
        GatewayKey::derive(&ScopedKey::new(scope, key))
    });
    let processor = Processor::new(
        "shop",
        CrashGateway {
            inner: FileGateway::open(Path::new(gateway)).expect("gateway file"),
            plan,
            target: gateway_target,
        },
        CrashStore { inner, plan },
    )
    .expect("valid merchant");
    let mut out = std::io::stdout().lock();
    for i in first..first + count {
        let Intent { key, request } = intent(i);
        if let Ok(payment) = processor.pay(&key, &request) {
            plan.hit(Point::BeforeReply, key.as_str());
            let charge = match payment.outcome {
                PaymentOutcome::Charged(c) => c.id.0,
                PaymentOutcome::Declined(_) => 0,
            };
            writeln!(out, "{}", ack_line(Ack { intent: i, charge })).expect("stdout");
            out.flush().expect("stdout");
            plan.hit(Point::AfterAck, key.as_str());
        }
    }
}
