//! A proptest model test: random gets, releases (first, double and stale), drops, guards
//! turned into loans, broken marks, clock moves and maintenance against a sequential model
//! of the pool. After every step: no connection is held twice, the counts match the model,
//! and the pool's invariants hold.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use std::sync::Arc;

use idem_core::ManualClock;
use idem_pool::{HealthCheck, Loan, LoanId, Pool, PooledConnection};
use proptest::prelude::*;

use crate::{TestManager, pool};

const MAX: usize = 3;
const LIFETIME_MS: u64 = 100_000;

#[derive(Debug, Clone)]
enum Op {
    Get,
    Release(usize),
    Drop(usize),
    IntoLoan(usize),
    ReleaseLoan(usize),
    MarkBroken(usize),
    Advance(u64),
    Maintain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Get),
        2 => any::<usize>().prop_map(Op::Release),
        2 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::IntoLoan),
        3 => any::<usize>().prop_map(Op::ReleaseLoan),
        1 => any::<usize>().prop_map(Op::MarkBroken),
        1 => prop::sample::select(vec![1_000, 50_000, LIFETIME_MS]).prop_map(Op::Advance),
        1 => Just(Op::Maintain),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    Idle,
    Lent,
    Parked,
}

#[derive(Debug)]
struct ModelSlot {
    created_ms: u64,
    /// When the current (or last) loan started: the pool reads no clock on return and
    /// judges a returned connection's lifetime by this.
    lent_ms: u64,
    held: Held,
    /// Parked by a guard marked broken: the loan's release closes it.
    parked_broken: bool,
}

#[derive(Default)]
struct Model {
    now_ms: u64,
    slots: HashMap<usize, ModelSlot>,
    /// Each slot's current generation, as learnt from loans; kept after a discard.
    generations: HashMap<usize, u64>,
    idle: BTreeSet<usize>,
    /// The slot last given back idle (the pool lends this thread's last slot first).
    last: Option<usize>,
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
            self.idle.insert(slot);
            self.last = Some(slot);
        }
    }
}

struct Guard {
    conn: PooledConnection<TestManager>,
    broken: bool,
}

/// One run: the pool, its clock, the model, and what the test holds.
struct Run {
    pool: Pool<TestManager>,
    clock: Arc<ManualClock>,
    m: Model,
    guards: Vec<Guard>,
    loans: Vec<Loan<TestManager>>,
}

impl Run {
    fn new() -> Self {
        let (pool, clock) = pool(MAX, |b| {
            b.max_lifetime(Some(Duration::from_millis(LIFETIME_MS)))
                .idle_timeout(None)
                .health_check(HealthCheck::Never)
        });
        Self { pool, clock, m: Model::default(), guards: Vec::new(), loans: Vec::new() }
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Get => self.get(),
            Op::Release(i) if !self.guards.is_empty() => self.give_back(i, false),
            Op::Drop(i) if !self.guards.is_empty() => self.give_back(i, true),
            Op::IntoLoan(i) if !self.guards.is_empty() => self.make_loan(i),
            Op::ReleaseLoan(i) if !self.loans.is_empty() => self.release_loan(i),
            Op::MarkBroken(i) if !self.guards.is_empty() => {
                let i = i % self.guards.len();
                self.guards[i].conn.mark_broken();
                self.guards[i].broken = true;
            }
            Op::Advance(ms) => {
                self.clock.advance(Duration::from_millis(ms));
                self.m.now_ms += ms;
            }
            Op::Maintain => self.maintain(),
            _ => {}
        }
    }

    /// The model's choice: the slot last given back if it is idle, else the lowest idle
    /// one, closing expired ones on the way; else a new one below MAX; else none.
    fn get(&mut self) {
        let m = &mut self.m;
        let mut expect_slot = None;
        loop {
            let last = m.last.filter(|slot| m.idle.contains(slot));
            let Some(slot) = last.or_else(|| m.idle.first().copied()) else { break };
            m.idle.remove(&slot);
            if m.expired(slot) {
                m.discard(slot);
                continue;
            }
            expect_slot = Some(slot);
            break;
        }
        let conn = match (self.pool.try_get(), expect_slot) {
            (Some(conn), Some(slot)) => {
                let first = "the slot last given back if idle, else the lowest idle slot";
                assert_eq!(conn.loan_id().slot(), slot, "{first}");
                conn
            }
            (Some(conn), None) => {
                assert!(m.slots.len() < MAX, "a new connection only below max_size");
                let slot = conn.loan_id().slot();
                assert!(!m.slots.contains_key(&slot), "a new connection in a free slot");
                let at = m.now_ms;
                let new = ModelSlot {
                    created_ms: at,
                    lent_ms: at,
                    held: Held::Idle,
                    parked_broken: false,
                };
                m.slots.insert(slot, new);
                m.created += 1;
                conn
            }
            (None, None) => return assert_eq!(m.slots.len(), MAX, "refused while room left"),
            (None, Some(slot)) => panic!("refused with slot {slot} idle"),
        };
        let (slot, generation) = (conn.loan_id().slot(), conn.loan_id().generation());
        let previous = m.generations.insert(slot, generation).unwrap_or(0);
        assert!(generation > previous, "each loan gets a new generation");
        let now_ms = m.now_ms;
        let s = m.slots.get_mut(&slot).expect("lent slot");
        (s.held, s.lent_ms) = (Held::Lent, now_ms);
        conn.hold();
        self.guards.push(Guard { conn, broken: false });
    }

    /// An explicit release (kept guard) or a drop (guard gone).
    fn give_back(&mut self, i: usize, drop_it: bool) {
        let i = i % self.guards.len();
        let guard = &mut self.guards[i];
        let live = !guard.conn.is_released();
        if live {
            guard.conn.unhold();
            self.m.give_back(guard.conn.loan_id().slot(), guard.broken);
        }
        if drop_it {
            self.guards.swap_remove(i);
        } else {
            assert_eq!(guard.conn.release(), live, "release returns whether it released");
            self.m.double += u64::from(!live);
        }
    }

    fn make_loan(&mut self, i: usize) {
        let i = i % self.guards.len();
        if self.guards[i].conn.is_released() {
            return;
        }
        let guard = self.guards.swap_remove(i);
        guard.conn.unhold();
        let loan = guard.conn.into_loan();
        let slot = self.m.slots.get_mut(&loan.loan_id().slot()).expect("lent");
        (slot.held, slot.parked_broken) = (Held::Parked, guard.broken);
        self.loans.push(loan);
    }

    fn release_loan(&mut self, i: usize) {
        let loan = &self.loans[i % self.loans.len()];
        let id: LoanId = loan.loan_id();
        let m = &mut self.m;
        let current = m.generations[&id.slot()] == id.generation();
        let parked = current && m.slots.get(&id.slot()).is_some_and(|s| s.held == Held::Parked);
        assert_eq!(loan.release(), parked, "loan {id}");
        if parked {
            let broken = m.slots[&id.slot()].parked_broken;
            m.give_back(id.slot(), broken);
        } else if current {
            m.double += 1;
        } else {
            m.stale += 1;
        }
    }

    fn maintain(&mut self) {
        self.pool.maintain();
        let idle = std::mem::take(&mut self.m.idle);
        for slot in idle {
            if self.m.expired(slot) {
                self.m.discard(slot);
            } else {
                self.m.idle.insert(slot);
            }
        }
    }

    /// After every step: the pool's counts are the model's, and its invariants hold.
    fn assert_matches(&self, op: &Op) {
        let (m, state) = (&self.m, self.pool.state());
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
        self.pool.assert_invariants();
    }
}

fn check(ops: &[Op]) {
    let mut run = Run::new();
    for op in ops {
        run.step(op);
        run.assert_matches(op);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn pool_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        check(&ops);
    }
}
