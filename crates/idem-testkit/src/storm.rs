//! The retry storm the demo's examples replay: every intended operation once plus its
//! retries, in one list shuffled only locally, so a retry lands near the attempt it
//! repeats and, run on a few threads, often beside it.
//!
//! A [`Plan`] says how many intents, how often they are retried and how (once, or until
//! an attempt is not retried), and the seed. The list depends on nothing else: the same
//! plan gives the same attempts in the same order on every run and every machine, so the
//! demo's figures (`cargo xtask demo`) are the same each time.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use idem_testkit::storm::{self, Plan, Retries};
//!
//! let plan = Plan { intents: 100, retry_percent: 30, retries: Retries::Once, seed: 7 };
//! let list = plan.attempts();
//! let attempts = AtomicU64::new(0);
//! storm::run(&list, 4, |_intent| {
//!     attempts.fetch_add(1, Ordering::Relaxed);
//! });
//! assert_eq!(attempts.into_inner(), list.len() as u64);
//! ```

use std::sync::atomic::AtomicU64;
// ORDERING: only `Answers` uses it; argued at its impl.
use std::sync::atomic::Ordering::Relaxed;

/// An attempt changes places with one of this many positions at or before it, so the
/// shuffle moves retries only a little.
const SHUFFLE_SPAN: u64 = 8;

/// A small deterministic generator (Knuth's MMIX constants), so every run shows the same
/// storm. For test inputs only: it is neither fast nor random enough for anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lcg {
    state: u64,
}

impl Lcg {
    /// A generator whose stream is fixed by `seed`.
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next value of the stream, below 2^31: the state's high bits, because an LCG's
    /// low bits repeat with short periods.
    pub fn draw(&mut self) -> u64 {
        self.state = self.state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.state >> 33
    }
}

/// How an intent's retries are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retries {
    /// An intent is retried once with the plan's chance (a client that retries a timeout
    /// once): without idempotency, effects per intent are 1 + the chance.
    Once,
    /// Every attempt, retries included, is retried with the plan's chance (a client that
    /// retries until it hears back): the retries per intent are geometric.
    UntilAnswered,
}

/// A storm's shape: the intents `0..intents`, how often and how each is retried, and the
/// seed of the [`Lcg`] that draws the retries and the shuffle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The intended operations, numbered from 0.
    pub intents: u64,
    /// The chance, in percent, that an attempt is retried.
    pub retry_percent: u64,
    /// Whether a retry may itself be retried.
    pub retries: Retries,
    /// The generator's seed.
    pub seed: u64,
}

impl Plan {
    /// Every intent once plus its retries, in the order the storm attempts them.
    ///
    /// # Panics
    ///
    /// If `retry_percent` is over 100, or is 100 with [`Retries::UntilAnswered`] (every
    /// attempt retried: the list would never end).
    pub fn attempts(&self) -> Vec<u64> {
        assert!(self.retry_percent <= 100, "a chance over 100%: {}", self.retry_percent);
        let endless = self.retries == Retries::UntilAnswered && self.retry_percent == 100;
        assert!(!endless, "every attempt retried until answered: the storm would never end");
        let mut rng = Lcg::new(self.seed);
        let mut list = Vec::new();
        for intent in 0..self.intents {
            list.push(intent);
            match self.retries {
                Retries::Once => {
                    if rng.draw() % 100 < self.retry_percent {
                        list.push(intent);
                    }
                }
                Retries::UntilAnswered => {
                    while rng.draw() % 100 < self.retry_percent {
                        list.push(intent);
                    }
                }
            }
        }
        for i in (1..list.len()).rev() {
            let j = i.saturating_sub((rng.draw() % SHUFFLE_SPAN) as usize);
            list.swap(i, j);
        }
        list
    }
}

/// Runs `attempt` for every entry of `list` on `threads` threads, thread `t` taking
/// entries `t`, `t + threads`, `t + 2 * threads` and so on; returns when all are done.
///
/// # Panics
///
/// If `threads` is 0, or if an attempt panics (the panic is passed on).
pub fn run(list: &[u64], threads: usize, attempt: impl Fn(u64) + Sync) {
    assert!(threads > 0, "a storm needs at least one thread");
    std::thread::scope(|scope| {
        for t in 0..threads {
            let attempt = &attempt;
            scope.spawn(move || list.iter().skip(t).step_by(threads).for_each(|&i| attempt(i)));
        }
    });
}

/// The environment variable `cargo xtask demo` sets for the storms it runs: with it set to
/// `1`, [`Row::print`] adds the tab-separated line the demo's table reads. A person running
/// an example from a README sees only the sentence.
pub const TABLE_LINE_ENV: &str = "IDEM_DEMO_TABLE";

/// Every answer each intent got, held against the first one it got: the second half of the
/// invariant, "a repeat returns the original answer", counted where the answers arrive.
///
/// An answer is anything hashable that a caller would compare (a charge id, a response
/// body, a stored value). The first answer an intent gets is its original, whichever
/// thread it arrived on; each later one is a repeat, counted as the same when it hashes
/// the same. Lock-free: the storm's threads record beside each other.
#[derive(Debug)]
pub struct Answers {
    /// Each intent's first answer's hash, 0 while it has none (a hash of 0 is kept as 1).
    first: Vec<AtomicU64>,
    repeats: AtomicU64,
    same: AtomicU64,
}

// ORDERING: Relaxed throughout `Answers`: each counter and slot is one atomic
// read-modify-write or load, and the totals are read after the storm's threads are joined
// (the join orders them); no other memory is published through these.
impl Answers {
    /// Room for the intents `0..intents`.
    pub fn new(intents: u64) -> Self {
        let first = (0..intents).map(|_| AtomicU64::new(0)).collect();
        Self { first, repeats: AtomicU64::new(0), same: AtomicU64::new(0) }
    }

    fn slot(&self, intent: u64) -> Option<&AtomicU64> {
        usize::try_from(intent).ok().and_then(|i| self.first.get(i))
    }

    /// Records that `intent` was answered `answer`.
    ///
    /// # Panics
    ///
    /// If `intent` is not below the `intents` this was made for.
    pub fn answer(&self, intent: u64, answer: &impl std::hash::Hash) {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        // A hasher with fixed keys: the same answer hashes the same in every thread.
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(answer).max(1);
        let slot = self.slot(intent);
        let slot = slot.unwrap_or_else(|| panic!("intent {intent} is past the storm's intents"));
        // ORDERING: Relaxed, argued at the impl.
        if let Err(original) = slot.compare_exchange(0, hash, Relaxed, Relaxed) {
            self.repeats.fetch_add(1, Relaxed);
            if original == hash {
                self.same.fetch_add(1, Relaxed);
            }
        }
    }

    /// Whether `intent` has had an answer (false past the intents).
    pub fn answered(&self, intent: u64) -> bool {
        // ORDERING: Relaxed, argued at the impl.
        self.slot(intent).is_some_and(|s| s.load(Relaxed) != 0)
    }

    /// The answers that came after an intent's first.
    pub fn repeats(&self) -> u64 {
        // ORDERING: Relaxed, argued at the impl.
        self.repeats.load(Relaxed)
    }

    /// The repeats answered with their intent's original answer.
    pub fn same(&self) -> u64 {
        // ORDERING: Relaxed, argued at the impl.
        self.same.load(Relaxed)
    }
}

/// One storm's figures, as the demo's table shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// What the storm does, at most 36 characters (the table's column).
    pub scenario: String,
    /// The operations meant to happen once.
    pub intents: u64,
    /// What the storm sent, retries and redeliveries included.
    pub attempts: u64,
    /// Effects without idem: the same code done naively.
    pub without: u64,
    /// Effects with idem.
    pub with: u64,
    /// What an effect is.
    pub effect: String,
    /// What an attempt is.
    pub attempt: String,
    /// The repeats idem answered (answers after an intent's first).
    pub repeats: u64,
    /// Of those, the ones answered with the original answer.
    pub same: u64,
}

impl Row {
    /// Prints the row as a sentence, and as the demo's tab-separated line when
    /// [`TABLE_LINE_ENV`] is `1`.
    pub fn print(&self) {
        let Row { scenario, intents, attempts, without, with, effect, attempt, repeats, same } =
            self;
        println!(
            "{scenario}: {without} {effect} without idem, {with} with idem, for {intents} \
             intended operations ({attempts} {attempt}); with idem, {same} of {repeats} \
             repeats answered with the original"
        );
        if std::env::var(TABLE_LINE_ENV).is_ok_and(|v| v == "1") {
            println!(
                "retry_storm\t{scenario}\t{intents}\t{attempts}\t{without}\t{with}\t{effect}\t\
                 {attempt}\t{repeats}\t{same}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A digest of a list's order: two lists with the same entries in another order
    /// differ.
    fn digest(list: &[u64]) -> u64 {
        list.iter().fold(0, |d, &i| d.wrapping_mul(1_000_003).wrapping_add(i))
    }

    /// The demo's storms, pinned: their figures are these lists' lengths, and a change to
    /// the generator would change them (or only their order) silently. The digests are
    /// those of the copies each example had before they shared this one.
    #[test]
    fn the_demo_storms_are_the_ones_it_always_showed() {
        let plan =
            |intents, retry_percent, retries, seed| Plan { intents, retry_percent, retries, seed };
        let cases = [
            (plan(20_000, 50, Retries::UntilAnswered, 42), 40_013, 0x429b_1bc9_1b9f_cc3f),
            (plan(10_000, 30, Retries::Once, 7), 12_982, 0xd6ca_0c68_a76e_1c42),
            (plan(1_000, 30, Retries::Once, 7), 1_298, 0x43de_3896_b984_21bd),
        ];
        for (plan, len, order) in cases {
            let list = plan.attempts();
            assert_eq!((list.len(), digest(&list)), (len, order), "{plan:?}");
        }
    }

    #[test]
    fn every_intent_is_attempted_and_retries_follow_the_plan() {
        let once = Plan { intents: 500, retry_percent: 100, retries: Retries::Once, seed: 1 };
        let mut list = once.attempts();
        list.sort_unstable();
        let twice: Vec<u64> = (0..500).flat_map(|i| [i, i]).collect();
        assert_eq!(list, twice, "100% once: each intent exactly twice");
        let never = Plan { retry_percent: 0, retries: Retries::UntilAnswered, ..once };
        assert_eq!(never.attempts().len(), 500, "0%: each intent once");
    }

    #[test]
    #[should_panic(expected = "would never end")]
    fn a_storm_that_would_never_end_is_refused() {
        let plan =
            Plan { intents: 1, retry_percent: 100, retries: Retries::UntilAnswered, seed: 1 };
        plan.attempts();
    }

    #[test]
    fn answers_count_repeats_against_the_first_answer_of_each_intent() {
        let answers = Answers::new(3);
        answers.answer(0, &"ch_1");
        answers.answer(0, &"ch_1");
        answers.answer(1, &7u64);
        answers.answer(0, &"ch_2");
        answers.answer(1, &7u64);
        assert_eq!((answers.repeats(), answers.same()), (3, 2));
        assert!(answers.answered(1) && !answers.answered(2) && !answers.answered(3));
    }

    #[test]
    #[should_panic(expected = "intent 3 is past the storm's intents")]
    fn an_answer_past_the_intents_names_the_intent() {
        Answers::new(3).answer(3, &0u8);
    }
}
