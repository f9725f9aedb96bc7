//! A proptest model test: random claims, completes, releases (fresh, repeated and stale),
//! clock moves and sweeps against a plain sequential model of the state machine. Every
//! answer must match the model's, and the store's invariants hold after every step.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    Claim, Fingerprint, KeyStore, Lease, ManualClock, MemoryStore, ScopedKey, StoreConfig,
    StoreError, Timestamp,
};
use proptest::prelude::*;

const LEASE_MS: u64 = 30_000;
const TTL_MS: u64 = 100_000;
const CAPACITY: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    Claim {
        scope: u8,
        key: u8,
        fp: u8,
    },
    /// Settles the `nth` lease ever handed out (modulo their number): fresh, settled
    /// already, or fenced by a later claim.
    Complete {
        nth: usize,
        value: u8,
    },
    Release {
        nth: usize,
    },
    Advance {
        ms: u64,
    },
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2u8, 0..3u8, 0..2u8).prop_map(|(scope, key, fp)| Op::Claim { scope, key, fp }),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(nth, value)| Op::Complete { nth, value }),
        1 => any::<usize>().prop_map(|nth| Op::Release { nth }),
        2 => prop::sample::select(vec![1, 999, 1_000, LEASE_MS - 1, LEASE_MS, TTL_MS])
            .prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Sweep),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    InFlight { lease_expires_ms: u64 },
    Done { value: u8, expires_ms: u64 },
}

#[derive(Debug, Clone)]
struct Rec {
    fp: u8,
    token: u64,
    phase: Phase,
}

/// The sequential model: what each key is, by the rules in DESIGN.md and nothing else.
#[derive(Default)]
struct Model {
    now_ms: u64,
    recs: HashMap<(u8, u8), Rec>,
    next_token: u64,
}

#[derive(Debug, PartialEq)]
enum Expect {
    Acquired,
    Recover,
    InFlight(u64),
    Replay(u8),
    KeyReused,
    StoreFull,
}

impl Model {
    fn live(&self, rec: &Rec) -> bool {
        !matches!(rec.phase, Phase::Done { expires_ms, .. } if expires_ms <= self.now_ms)
    }

    fn claim(&mut self, k: (u8, u8), fp: u8) -> (Expect, Option<u64>) {
        let now = self.now_ms;
        let live_count = self.recs.values().filter(|r| self.live(r)).count();
        let current = self.recs.get(&k).filter(|r| self.live(r)).cloned();
        let fresh = |m: &mut Self, fp| {
            m.next_token += 1;
            let phase = Phase::InFlight { lease_expires_ms: now + LEASE_MS };
            m.recs.insert(k, Rec { fp, token: m.next_token, phase });
            Some(m.next_token)
        };
        match current {
            None if live_count >= CAPACITY => (Expect::StoreFull, None),
            None => (Expect::Acquired, fresh(self, fp)),
            Some(r) if r.fp != fp => (Expect::KeyReused, None),
            Some(Rec { phase: Phase::Done { value, .. }, .. }) => (Expect::Replay(value), None),
            Some(Rec { phase: Phase::InFlight { lease_expires_ms }, .. })
                if now < lease_expires_ms =>
            {
                (Expect::InFlight(lease_expires_ms - now), None)
            }
            Some(_) => (Expect::Recover, fresh(self, fp)),
        }
    }

    /// Whether the lease with model token `token` on `k` still holds an in-flight claim.
    fn holds(&self, k: (u8, u8), token: u64) -> bool {
        let in_flight = |r: &&Rec| matches!(r.phase, Phase::InFlight { .. });
        self.recs.get(&k).filter(in_flight).is_some_and(|r| r.token == token)
    }
}

struct Harness {
    store: MemoryStore<u8>,
    clock: Arc<ManualClock>,
    model: Model,
    /// Every lease handed out: the store's lease, the model's token, and the key.
    leases: Vec<(Lease, u64, (u8, u8))>,
    /// The highest real fencing token seen per key, to check tokens only grow.
    last_token: HashMap<(u8, u8), u64>,
}

fn scoped(k: (u8, u8)) -> ScopedKey {
    ScopedKey::parse(&format!("scope-{}", k.0), &format!("key-{}", k.1)).expect("valid key")
}

fn fingerprint(fp: u8) -> Fingerprint {
    Fingerprint::builder("model").u64("fp", u64::from(fp)).finish()
}

impl Harness {
    fn new() -> Self {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
        let config = StoreConfig::builder()
            .lease(Duration::from_millis(LEASE_MS))
            .result_ttl(Duration::from_millis(TTL_MS))
            .capacity(CAPACITY)
            .build()
            .expect("valid config");
        let store = MemoryStore::with_clock(config, clock.clone());
        Self {
            store,
            clock,
            model: Model::default(),
            leases: Vec::new(),
            last_token: HashMap::new(),
        }
    }

    fn check(&mut self, op: &Op) {
        match *op {
            Op::Claim { scope, key, fp } => self.claim((scope, key), fp),
            Op::Complete { nth, value } => self.settle(nth, Some(value)),
            Op::Release { nth } => self.settle(nth, None),
            Op::Advance { ms } => {
                self.clock.advance(Duration::from_millis(ms));
                self.model.now_ms += ms;
            }
            Op::Sweep => {
                self.store.sweep().expect("memory sweep cannot fail");
            }
        }
        self.store.assert_invariants();
        let live = self.model.recs.values().filter(|r| self.model.live(r)).count();
        assert!(self.store.len() >= live, "store lost a live record");
    }

    fn claim(&mut self, k: (u8, u8), fp: u8) {
        let got = self.store.claim(&scoped(k), &fingerprint(fp));
        let (expected, model_token) = self.model.claim(k, fp);
        let (kind, lease) = match got {
            Ok(Claim::Acquired(l)) => (Expect::Acquired, Some(l)),
            Ok(Claim::Recover(l)) => (Expect::Recover, Some(l)),
            Ok(Claim::InFlight { retry_after }) => {
                let ms = u64::try_from(retry_after.as_millis()).expect("small");
                (Expect::InFlight(ms), None)
            }
            Ok(Claim::Replay(v)) => (Expect::Replay(v), None),
            Err(StoreError::KeyReused { .. }) => (Expect::KeyReused, None),
            Err(StoreError::StoreFull { .. }) => (Expect::StoreFull, None),
            Err(e) => panic!("unexpected error {e}"),
        };
        assert_eq!(kind, expected, "claim {k:?} fp {fp} at {}ms", self.model.now_ms);
        if let (Some(lease), Some(token)) = (lease, model_token) {
            let last = self.last_token.insert(k, lease.token().get()).unwrap_or(0);
            assert!(lease.token().get() > last, "fencing token did not grow on {k:?}");
            self.leases.push((lease, token, k));
        }
    }

    fn settle(&mut self, nth: usize, value: Option<u8>) {
        if self.leases.is_empty() {
            return;
        }
        let (lease, token, k) = self.leases[nth % self.leases.len()].clone();
        let holds = self.model.holds(k, token);
        let got = match value {
            Some(v) => self.store.complete(&lease, v),
            None => self.store.release(&lease),
        };
        match (holds, got) {
            (true, Ok(())) => match value {
                Some(v) => {
                    let expires_ms = self.model.now_ms + TTL_MS;
                    let rec = self.model.recs.get_mut(&k).expect("held");
                    rec.phase = Phase::Done { value: v, expires_ms };
                }
                None => {
                    self.model.recs.remove(&k);
                }
            },
            (false, Err(StoreError::LeaseLost { .. })) => {}
            (holds, got) => panic!("settle {k:?} holds={holds}: got {got:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn store_matches_model(ops in prop::collection::vec(op(), 1..80)) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.check(op);
        }
    }
}
