//! A proptest model test: random gets, releases (first, double and stale), drops,
//! detaches, broken marks, clock moves and maintenance against a sequential model of the
//! pool. After every step: no connection is held twice, the counts match the model, and
//! the pool's invariants hold.

use std::collections::HashMap;
use std::time::Duration;

use idem_pool::{HealthCheck, Lease, PooledConnection};
use proptest::prelude::*;

use crate::{TestManager, pool};

const MAX: usize = 3;
const LIFETIME_MS: u64 = 100_000;

#[derive(Debug, Clone)]
enum Op {
    Get,
    Release(usize),
    Drop(usize),
    Detach(usize),
    ReleaseLease(usize),
    MarkBroken(usize),
    Advance(u64),
    Maintain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Get),
        2 => any::<usize>().prop_map(Op::Release),
        2 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::Detach),
        3 => any::<usize>().prop_map(Op::ReleaseLease),
        1 => any::<usize>().prop_map(Op::MarkBroken),
        1 => prop::sample::select(vec![1_000, 50_000, LIFETIME_MS]).prop_map(Op::Advance),
        1 => Just(Op::Maintain),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    Idle,
    Lent,
    Detached,
}

#[derive(Debug)]
struct ModelSlot {
    created_ms: u64,
    /// When the current (or last) loan started: the pool reads no clock on return and
    /// judges a returned connection's lifetime by this.
    lent_ms: u64,
    held: Held,
}

#[derive(Default)]
struct Model {
    now_ms: u64,
    slots: HashMap<usize, ModelSlot>,
    /// Each slot's current generation, as learnt from loans; kept after a discard.
    generations: HashMap<usize, u64>,
    idle: Vec<usize>,
    created: u64,
    discarded: u64,
    double: u64,
    stale: u64,
}

impl Model {
    fn expired(&self, slot: usize) -> bool {
        self.slots[&slot].created_ms + LIFETIME_MS <= self.now_ms
    }

    fn discard(&mut self, slot: usize) {
        self.slots.remove(&slot);
        self.discarded += 1;
    }

    /// A loan comes back: discarded if broken or past its lifetime at the loan's start,
    /// else idle.
    fn give_back(&mut self, slot: usize, broken: bool) {
        let s = &self.slots[&slot];
        if broken || s.created_ms + LIFETIME_MS <= s.lent_ms {
            self.discard(slot);
        } else {
            self.slots.get_mut(&slot).expect("lent slot").held = Held::Idle;
            self.idle.push(slot);
        }
    }
}

struct Guard {
    conn: PooledConnection<TestManager>,
    broken: bool,
}

fn check(ops: &[Op]) {
    let (pool, clock) = pool(MAX, |b| {
        b.max_lifetime(Some(Duration::from_millis(LIFETIME_MS)))
            .idle_timeout(None)
            .health_check(HealthCheck::Never)
    });
    let mut m = Model::default();
    let mut guards: Vec<Guard> = Vec::new();
    let mut leases: Vec<(Lease<TestManager>, usize, u64)> = Vec::new();
    for op in ops {
        match *op {
            Op::Get => {
                // The model's choice: the most recently returned idle connection, closing
                // expired ones on the way; else a new one below MAX; else none.
                let mut expect_slot = None;
                while let Some(slot) = m.idle.pop() {
                    if m.expired(slot) {
                        m.discard(slot);
                        continue;
                    }
                    expect_slot = Some(slot);
                    break;
                }
                match (pool.try_get(), expect_slot) {
                    (Ok(conn), Some(slot)) => {
                        let (got, generation) = conn.loan_id();
                        assert_eq!(got, slot, "the most recently returned idle connection");
                        let previous = m.generations.insert(slot, generation).unwrap_or(0);
                        assert!(generation > previous, "each loan gets a new generation");
                        let now_ms = m.now_ms;
                        let s = m.slots.get_mut(&slot).expect("idle slot");
                        (s.held, s.lent_ms) = (Held::Lent, now_ms);
                        conn.hold();
                        guards.push(Guard { conn, broken: false });
                    }
                    (Ok(conn), None) => {
                        assert!(m.slots.len() < MAX, "a new connection only below max_size");
                        let (slot, generation) = conn.loan_id();
                        assert!(!m.slots.contains_key(&slot), "a new connection in a free slot");
                        let previous = m.generations.insert(slot, generation).unwrap_or(0);
                        assert!(generation > previous);
                        let now_ms = m.now_ms;
                        m.slots.insert(
                            slot,
                            ModelSlot { created_ms: now_ms, lent_ms: now_ms, held: Held::Lent },
                        );
                        m.created += 1;
                        conn.hold();
                        guards.push(Guard { conn, broken: false });
                    }
                    (Err(_), None) => assert_eq!(m.slots.len(), MAX, "refused while room left"),
                    (Err(e), Some(slot)) => panic!("refused ({e}) with slot {slot} idle"),
                }
            }
            Op::Release(i) | Op::Drop(i) if !guards.is_empty() => {
                let i = i % guards.len();
                let drop_it = matches!(op, Op::Drop(_));
                let guard = &mut guards[i];
                let live = !guard.conn.is_released();
                if live {
                    guard.conn.unhold();
                    m.give_back(guard.conn.loan_id().0, guard.broken);
                }
                if drop_it {
                    guards.swap_remove(i);
                } else {
                    assert_eq!(guard.conn.release(), live, "release returns whether it released");
                    m.double += u64::from(!live);
                }
            }
            Op::Detach(i) if !guards.is_empty() => {
                let i = i % guards.len();
                if !guards[i].conn.is_released() && !guards[i].broken {
                    let guard = guards.swap_remove(i);
                    guard.conn.unhold();
                    let lease = guard.conn.detach();
                    let (slot, generation) = lease.loan_id();
                    m.slots.get_mut(&slot).expect("lent").held = Held::Detached;
                    leases.push((lease, slot, generation));
                }
            }
            Op::ReleaseLease(i) if !leases.is_empty() => {
                let (lease, slot, generation) = &leases[i % leases.len()];
                let current = m.generations[slot] == *generation;
                let detached =
                    current && m.slots.get(slot).is_some_and(|s| s.held == Held::Detached);
                assert_eq!(lease.release(), detached, "lease {slot}/{generation}");
                if detached {
                    m.give_back(*slot, false);
                } else if current {
                    m.double += 1;
                } else {
                    m.stale += 1;
                }
            }
            Op::MarkBroken(i) if !guards.is_empty() => {
                let i = i % guards.len();
                guards[i].conn.mark_broken();
                guards[i].broken = true;
            }
            Op::Advance(ms) => {
                clock.advance(Duration::from_millis(ms));
                m.now_ms += ms;
            }
            Op::Maintain => {
                pool.maintain();
                let idle = std::mem::take(&mut m.idle);
                for slot in idle {
                    if m.expired(slot) {
                        m.discard(slot);
                    } else {
                        m.idle.push(slot);
                    }
                }
            }
            _ => {}
        }
        let state = pool.state();
        let in_use = m.slots.values().filter(|s| s.held != Held::Idle).count();
        let expected =
            (m.slots.len(), m.idle.len(), in_use, m.created, m.discarded, m.double, m.stale);
        let got = (
            state.size,
            state.idle,
            state.in_use,
            state.created,
            state.discarded,
            state.double_releases,
            state.stale_releases,
        );
        assert_eq!(
            got, expected,
            "after {op:?}: (size, idle, in_use, created, discarded, double, stale)"
        );
        pool.assert_invariants();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pool_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        check(&ops);
    }
}
