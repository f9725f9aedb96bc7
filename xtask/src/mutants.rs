//! `cargo xtask mutants [name...]`: the mutation catalogue. Each entry is a small, named
//! break of the code (a dropped check, a skipped sync, a weakened ordering) and the test
//! or loom model that must catch it. The task copies the tree to a scratch directory, runs
//! every check once on the unbroken copy (each must pass there), then applies each
//! mutation in turn, runs its check, and restores the file. A check that still passes on
//! a broken tree is a missing check: the task fails and names the mutation. So does a
//! check that hangs on a broken tree (killed after `CHECK_LIMIT`): a test that hangs when
//! it should fail would spend a CI run's whole budget on one entry.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Result, root};

/// How a mutation is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// `cargo test -p <package> [--features <feature>] --test <test> <filter>` (`--lib`
    /// for the test "lib"), with the crash tests' rounds set by `IDEM_CRASH_ROUNDS`.
    Test { package: &'static str, feature: &'static str, test: &'static str, filter: &'static str },
    /// The package's loom models (`--cfg loom`, release, LOOM_MAX_PREEMPTIONS=3); only
    /// those whose name holds `model`, unless it is empty.
    Loom { package: &'static str, model: &'static str },
    /// `cargo xtask cluster --short`: the servers behind haproxy, with faults.
    Cluster,
    /// The same on Redis: `cargo xtask cluster --short --store redis`.
    ClusterRedis,
    /// `cargo xtask sim`: this many seeded worlds, stopping at the first that fails.
    Sim { seeds: u64 },
    /// `cargo xtask demo --check 1 --only <storm>`: that crate's storm once, its row
    /// proving its point.
    Demo { storm: &'static str },
}

/// One named break of the code.
#[derive(Debug)]
struct Mutant {
    name: &'static str,
    file: &'static str,
    from: &'static str,
    to: &'static str,
    check: Check,
}

const fn test(
    package: &'static str,
    feature: &'static str,
    test: &'static str,
    filter: &'static str,
) -> Check {
    Check::Test { package, feature, test, filter }
}

/// Crash-test rounds per check: enough for the fault plans to cover every point.
const CRASH_ROUNDS: &str = "150";

const CATALOGUE: &[Mutant] = &[
    Mutant {
        name: "sqlite-synchronous-off",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: r#"conn.pragma_update(None, "synchronous", "FULL")?;"#,
        to: r#"conn.pragma_update(None, "synchronous", "OFF")?;"#,
        check: test("idem-store-sqlite", "", "it", ""),
    },
    Mutant {
        name: "codec-result-checksum-unchecked",
        file: "crates/idem-durable/src/result.rs",
        from: "if u32::from_le_bytes(*checksum) != result_checksum(key, payload) {",
        to: "if false {",
        check: test("idem-store-sqlite", "", "it", ""),
    },
    Mutant {
        name: "codec-checksum-ignores-the-key",
        file: "crates/idem-durable/src/result.rs",
        from: "for part in [key.scope().as_str(), key.key().as_str()] {",
        to: "for part in [key.scope().as_str(), key.key().as_str()].iter().take(0) {",
        check: test("idem-store-sqlite", "", "it", ""),
    },
    Mutant {
        name: "wallet-skips-sync",
        file: "crates/idem-wallet/src/durable/writer.rs",
        from: "self.device.append(&self.bytes).and_then(|()| self.device.sync())?;",
        to: "self.device.append(&self.bytes)?;",
        check: test("idem-crash", "", "wallet", "killed"),
    },
    Mutant {
        name: "wallet-recovery-skips-the-last-record",
        file: "crates/idem-wallet/src/durable/recovery.rs",
        from: "            Ok((record, next)) => {",
        to: "            Ok((_, next)) if next == bytes.len() => at = next,\n            \
             Ok((record, next)) => {",
        check: test("idem-crash", "", "wallet", "killed"),
    },
    Mutant {
        name: "wallet-header-checksum-unchecked",
        file: "crates/idem-wallet/src/durable/format.rs",
        from: "if checksum(&header[..8]) != word(header, 8) {",
        to: "if false {",
        check: test("idem-crash", "", "wallet", "flipped_length"),
    },
    Mutant {
        name: "wallet-replayed-results-unchecked",
        file: "crates/idem-wallet/src/durable/recovery.rs",
        from: "if codes != record.results {",
        to: "if false {",
        check: test("idem-crash", "", "wallet", "other_limits"),
    },
    Mutant {
        name: "wallet-invariant-sum-overflows",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "let (low, carry) = self.low.overflowing_add(amount);",
        to: "let (low, carry) = (self.low + amount, false);",
        check: test("idem-wallet", "", "it", "u128_max"),
    },
    Mutant {
        name: "payments-recover-charges-blindly",
        file: "crates/idem-payments/src/processor.rs",
        from: "        match self.settle_from_lookup(scoped, request, lease)? {",
        to: "        match None::<PaymentOutcome> {",
        check: test("idem-crash", "", "payments", "crashed"),
    },
    Mutant {
        name: "payments-gateway-answer-trusted",
        file: "crates/idem-payments/src/processor.rs",
        from: "        None => Ok(charge),",
        to: "        _ => Ok(charge),",
        check: test("idem-payments", "", "it", "tenants::"),
    },
    Mutant {
        name: "payments-merchant-may-hold-the-separator",
        file: "crates/idem-payments/src/processor.rs",
        from: "if let Some(position) = merchant.find('/') {",
        to: "if let Some(position) = merchant.find('\\0') {",
        check: test("idem-payments", "", "it", "tenants::"),
    },
    Mutant {
        name: "pool-release-skips-the-generation-check",
        file: "crates/idem-pool/src/pool.rs",
        from: "if word.generation != generation {",
        to: "if false {",
        check: test("idem-pool", "", "it", "model::"),
    },
    Mutant {
        name: "pool-failed-connect-strands-its-slot",
        file: "crates/idem-pool/src/pool.rs",
        from: "`failed_connect_hands_the_slot_to_a_waiter`.\n                    \
               state.give_free(&self.shelf, claim);",
        to: "`failed_connect_hands_the_slot_to_a_waiter`.\n                    \
             let slot = claim.slot();\n                    self.shelf.empty(claim);\n\
             \x20                   state.free.push(slot);",
        check: test("idem-pool", "", "it", "connect::a_caller_that_times_out"),
    },
    Mutant {
        name: "core-waiter-notify-dropped",
        file: "crates/idem-core/src/memory.rs",
        from: "            shard.changed.notify_all();\n        }\n        Ok(())",
        to: "        }\n        Ok(())",
        check: Check::Loom { package: "idem-core", model: "" },
    },
    Mutant {
        name: "future-cell-snapshot-relaxed",
        file: "crates/idem-future/src/cell.rs",
        from: "did before it.\n        Snapshot(self.state.load(Ordering::Acquire))",
        to: "did before it.\n        Snapshot(self.state.load(Ordering::Relaxed))",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "future-publish-relaxed",
        file: "crates/idem-future/src/cell.rs",
        from: "self.state.store(before | READY | (kind << KIND_SHIFT), Ordering::Release);",
        to: "self.state.store(before | READY | (kind << KIND_SHIFT), Ordering::Relaxed);",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "future-owner-not-woken",
        file: "crates/idem-future/src/cell.rs",
        from: "if claimed.0 & OWNER == 0 {",
        to: "if claimed.0 & OWNER == 0 || true {",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "future-flag-set-during-a-write",
        file: "crates/idem-future/src/cell.rs",
        from: "            if current & PHASE != WRITING {\n                return current;",
        to: "            if current & PHASE != 7 {\n                return current;",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "future-owner-swap-on-a-claimed-word",
        file: "crates/idem-future/src/cell.rs",
        from: "Err(_) => current = self.settled(Ordering::Acquire),",
        to: "Err(actual) => current = actual,",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "future-share-flag-lost-to-the-publish",
        file: "crates/idem-future/src/cell.rs",
        from: "        self.set_flag(SHARED, true)",
        to: "        Snapshot(self.state.fetch_or(SHARED, Ordering::AcqRel))",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "future-free-without-the-fence",
        file: "crates/idem-future/src/cell.rs",
        from: "        fence(Ordering::Acquire);\n",
        to: "",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "notify-dead-letters-always-final",
        file: "crates/idem-notify/src/notifier.rs",
        from: "    let settle = if may_have_delivered {",
        to: "    let settle = if true {",
        check: test("idem-notify", "", "it", "dead_letter"),
    },
    Mutant {
        name: "core-retry-after-by-the-lagging-clock",
        file: "crates/idem-core/src/memory.rs",
        from: "deadline.saturating_duration_since(self.precise.now().max(self.cheap))",
        to: "deadline.saturating_duration_since(self.near(deadline))",
        check: test("idem-core", "", "it", "lagging::retry_after"),
    },
    Mutant {
        name: "http-waiters-max-never-refuses",
        file: "crates/idem-http/src/layer.rs",
        from: "        if before >= max {\n",
        to: "        if before >= max + 1000 {\n",
        check: test("idem-http", "", "it", "limits::past_waiters"),
    },
    Mutant {
        name: "http-decision-sent-to-a-gone-request-kept-held",
        file: "crates/idem-http/src/layer.rs",
        from: "        let Ok(Decision::Run(lease, false, _)) = self.decision.try_recv() else {",
        to: "        let Ok(Decision::Run(lease, false, _)) = Err::<Decision, ()>(()) else {",
        check: test("idem-http", "", "it", "runs::a_client_that_leaves_as_its_claim"),
    },
    Mutant {
        name: "http-give-back-for-a-gone-request-not-a-run",
        file: "crates/idem-http/src/layer.rs",
        from: "    let counted = state.runs.start();\n    async move {",
        to: "    let counted = ();\n    async move {",
        check: test("idem-http", "", "it", "runs::a_client_that_leaves_as_its_claim"),
    },
    Mutant {
        name: "http-give-back-only-from-inside-a-runtime",
        file: "crates/idem-http/src/layer.rs",
        from: "        self.runtime.spawn(give_back(",
        to: "        let Ok(_) = tokio::runtime::Handle::try_current() else { return };\n        \
             self.runtime.spawn(give_back(",
        check: test("idem-http", "", "it", "runs::a_request_dropped_off_its_runtime"),
    },
    Mutant {
        name: "http-dropped-request-gives-back-a-recovered-claim",
        file: "crates/idem-http/src/layer.rs",
        from: "        let Ok(Decision::Run(lease, false, _)) = self.decision.try_recv() else {",
        to: "        let Ok(Decision::Run(lease, _, _)) = self.decision.try_recv() else {",
        check: test("idem-http", "", "it", "runs::a_recovering_client_that_leaves"),
    },
    Mutant {
        name: "http-claim-task-gives-back-a-recovered-claim",
        file: "crates/idem-http/src/layer.rs",
        from: "        if let Err(Decision::Run(lease, false, _)) = decided.send(claimed) {",
        to: "        if let Err(Decision::Run(lease, _, _)) = decided.send(claimed) {",
        check: test("idem-http", "", "it", "runs::a_recovering_client_that_leaves"),
    },
    Mutant {
        name: "http-method-left-out-of-the-fingerprint",
        file: "crates/idem-http/src/layer.rs",
        from: "        .str(\"method\", parts.method.as_str())\n",
        to: "",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-content-length-at-the-limit-refused",
        file: "crates/idem-http/src/layer.rs",
        from: "is_some_and(|len| len > max as u64)",
        to: "is_some_and(|len| len >= max as u64)",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-response-at-the-stored-limit-not-kept",
        file: "crates/idem-http/src/run.rs",
        from: "if read.len() > limit {",
        to: "if read.len() >= limit {",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-waiter-place-never-given-back",
        file: "crates/idem-http/src/layer.rs",
        from: "        self.0.fetch_sub(1, Ordering::Relaxed);",
        to: "",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-failed-response-body-releases-the-claim",
        file: "crates/idem-http/src/run.rs",
        from: "        Err(error) => {\n            body_failed(state, error);",
        to: "        Err(error) => {\n            let _ = state.store.release(lease).await;\n\
             \x20           body_failed(state, error);",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-body-limit-per-frame",
        file: "crates/idem-http/src/layer.rs",
        from: "if read.len() + data.len() > max {",
        to: "if data.len() > max {",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-layer-ignores-the-store-limit",
        file: "crates/idem-http/src/layer.rs",
        from: "let limit = config.response_limit(store.result_bytes_max())?;",
        to: "let limit = config.response_limit(None)?;",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "sqlite-keeps-64-kib-results",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: "result_bytes_max: idem_durable::RESULT_BYTES_MAX_DEFAULT,",
        to: "result_bytes_max: 64 * 1024,",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-failed-completion-uncounted",
        file: "crates/idem-http/src/layer.rs",
        from: "        self.settled(\"complete\", Err(failed));\n    }",
        to: "        drop(failed);\n    }",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-forget-reason-asked-before-the-key",
        file: "crates/idem-http/src/operator.rs",
        from: "        let scoped = ScopedKey::parse(scope, key).map_err(|e| refusal(e.into()))?;\n\
               \x20       let why = query.get(\"reason\")?;",
        to: "        let why = query.get(\"reason\")?;\n\
             \x20       let scoped = ScopedKey::parse(scope, key).map_err(|e| refusal(e.into()))?;",
        check: test("idem-http", "", "it", "operator::a_bad_forget"),
    },
    Mutant {
        name: "http-bad-scope-detail-reaches-the-client",
        file: "crates/idem-http/src/layer.rs",
        from: "format!(\"{what}; the server's log says why, under error id {id}\");",
        to: "format!(\"{what}: {error}; the server's log says why, under error id {id}\");",
        check: test("idem-http", "", "it", "behaviour::an_invalid_scope"),
    },
    Mutant {
        name: "http-store-error-text-reaches-the-client",
        file: "crates/idem-http/src/layer.rs",
        from: "return Decision::Answer(store_unavailable(&id));",
        to: "return Decision::Answer(store_unavailable(&format!(\"{id}: {error}\")));",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "notify-refused-settle-uncounted",
        file: "crates/idem-notify/src/notifier.rs",
        from: "        add(&state.counters.settle_failed);",
        to: "",
        check: test("idem-notify", "", "it", "completion_the_id_store"),
    },
    Mutant {
        name: "pg-database-clock-frozen",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "(extract(epoch FROM now()) * 1000)::BIGINT)",
        to: "(extract(epoch FROM pg_postmaster_start_time()) * 1000)::BIGINT)",
        check: test("idem-store-postgres", "server-tests", "postgres", "run_out"),
    },
    Mutant {
        name: "pg-process-clock-instead-of-the-database",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "        self.clock.as_ref().map(|clock| ms(clock.now()))",
        to: "        Some(ms(idem_core::Clock::now(&idem_core::SystemClock)))",
        check: test("idem-store-postgres", "server-tests", "postgres", "offset"),
    },
    Mutant {
        name: "sqlite-unsynced-commit-answered-ok",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: r#"exec(&self.conn, "COMMIT", []).map(drop)"#,
        to: r#"exec(&self.conn, "COMMIT", []).map(drop).or(Ok(()))"#,
        check: test("idem-crash", "", "sqlite_sync", ""),
    },
    Mutant {
        name: "sqlite-failed-sync-stops-the-writer",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: "execute_batch(\"ROLLBACK\");\n        AfterFailure::Continue",
        to: "execute_batch(\"ROLLBACK\");\n        AfterFailure::Stop",
        check: test("idem-crash", "", "sqlite_sync", "the_next_write_succeeds"),
    },
    Mutant {
        name: "sqlite-recovery-skips-rollback",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: r#"let _ = self.conn.execute_batch("ROLLBACK");"#,
        to: "let _ = ();",
        check: test("idem-store-sqlite", "", "it", "failed_commit"),
    },
    Mutant {
        name: "core-failed-commit-answered-ok",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "if failed { Err(()) } else { Ok(()) }",
        to: "Ok(())",
        check: test("idem-durable", "", "it", "group_commit::"),
    },
    Mutant {
        name: "wallet-failed-commit-answered-ok-wedges-readers",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "if failed { Err(()) } else { Ok(()) }",
        to: "Ok(())",
        check: test("idem-wallet", "", "it", "durable::a_failed_append"),
    },
    Mutant {
        name: "core-scoped-key-names-no-part",
        file: "crates/idem-core/src/key.rs",
        from: "Scope::new(scope).map_err(ScopedKeyError::Scope)?",
        to: "Scope::new(scope).map_err(ScopedKeyError::Key)?",
        check: test("idem-core", "", "it", "key::scoped_key_parse_names_the_bad_part"),
    },
    Mutant {
        name: "core-release-keeps-its-quota-place",
        file: "crates/idem-core/src/memory.rs",
        from: "        self.scope_settled(lease.key());\n        match outcome {",
        to: "        if outcome.is_some() {\n            \
             self.scope_settled(lease.key());\n        }\n        match outcome {",
        check: test("idem-core", "", "it", "quota::"),
    },
    Mutant {
        name: "wallet-unknown-kind-cut-as-torn",
        file: "crates/idem-wallet/src/durable/recovery.rs",
        from: "Err(Bad::Undecodable) => {",
        to: "Err(Bad::Undecodable) if false => {",
        check: test("idem-wallet", "", "it", "unknown_kind"),
    },
    Mutant {
        name: "wallet-undecodable-after-bad-record-cut",
        file: "crates/idem-wallet/src/durable/recovery.rs",
        from: "matches!(format::read(bytes, y), Ok(_) | Err(Bad::Undecodable))",
        to: "matches!(format::read(bytes, y), Ok(_))",
        check: test("idem-wallet", "", "it", "unknown_kind"),
    },
    Mutant {
        name: "wallet-settle-ignores-the-code",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "if t.code != 0 && t.code != p.code {",
        to: "if false {",
        check: test("idem-wallet", "", "it", "two_phase::"),
    },
    Mutant {
        name: "wallet-settle-names-the-wrong-field",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "        return Err(R::PendingTransferHasDifferentLedger);",
        to: "        return Err(R::PendingTransferHasDifferentCode);",
        check: test("idem-wallet", "", "it", "two_phase::a_post_or_void_naming_another"),
    },
    Mutant {
        name: "wallet-post-of-zero-posts-all",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "(true, AMOUNT_MAX) | (false, 0) => pending,",
        to: "(true, 0) | (false, 0) => pending,",
        check: test("idem-wallet", "", "it", "two_phase::every_row_of_tigerbeetles"),
    },
    Mutant {
        name: "wallet-partial-void-taken-as-whole",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "    if !post && amount < pending {",
        to: "    if false {",
        check: test("idem-wallet", "", "it", "two_phase::every_row_of_tigerbeetles"),
    },
    Mutant {
        name: "wallet-closed-account-refuses-a-void",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "if post && credit.flags.contains(AccountFlags::CLOSED) {",
        to: "if credit.flags.contains(AccountFlags::CLOSED) {",
        check: test("idem-wallet", "", "it", "two_phase::a_reservation_of_zero"),
    },
    Mutant {
        name: "wallet-zero-amount-refused",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "    if t.code == 0 {\n        return Err(R::CodeMustNotBeZero);\n    }\n    Ok(())",
        to: "    if t.code == 0 || t.amount == 0 {\n        \
             return Err(R::CodeMustNotBeZero);\n    }\n    Ok(())",
        check: test("idem-wallet", "", "it", "codes::a_transfer_of_zero"),
    },
    Mutant {
        name: "wallet-result-code-parsed-by-its-prefix",
        file: "crates/idem-wallet/src/types.rs",
        from: "find(|code| code.to_string() == s)",
        to: "find(|code| code.to_string().starts_with(s))",
        check: test("idem-wallet", "", "it", "codes::every_result_code_prints"),
    },
    Mutant {
        name: "wallet-settle-repeat-compared-as-sent",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "let amount = if t.amount == whole { p.amount } else { t.amount };",
        to: "let amount = t.amount;",
        check: test("idem-wallet", "", "it", "tigerbeetle::a_repeat"),
    },
    Mutant {
        name: "wallet-settle-user-data-not-inherited",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "    if value == T::default() { pending } else { value }",
        to: "    if value == T::default() { T::default() } else { value }",
        check: test("idem-wallet", "", "it", "tigerbeetle::a_repeat"),
    },
    Mutant {
        name: "wallet-settle-kept-as-sent",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "        let resolved = Transfer { amount, timeout: 0, ..with_user_data(t, &p) };",
        to: "        let resolved = *t;",
        check: test("idem-wallet", "", "it", "tigerbeetle::a_repeat"),
    },
    Mutant {
        name: "wallet-lasting-failure-uses-up-its-id",
        file: "crates/idem-wallet/src/types.rs",
        from: "                | Self::CreditAccountAlreadyClosed\n        )",
        to: "                | Self::CreditAccountAlreadyClosed\n                \
             | Self::ExceedsPendingTransferAmount\n        )",
        check: test("idem-wallet", "", "it", "tigerbeetle::only_transient"),
    },
    Mutant {
        name: "wallet-chain-failure-keeps-its-id",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "if result.uses_up_id() {\n                    self.failed.insert(t.id);",
        to: "if false {\n                    self.failed.insert(t.id);",
        check: test("idem-wallet", "", "it", "tigerbeetle::an_open_chain"),
    },
    Mutant {
        name: "wallet-open-chain-last-event-as-failed",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "                if open {\n",
        to: "                if false {\n",
        check: test("idem-wallet", "", "it", "tigerbeetle::an_open_chain"),
    },
    Mutant {
        name: "wallet-debit-int-max-not-named",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "        (u128::MAX, _) => return Err(R::DebitAccountIdMustNotBeIntMax),\n",
        to: "",
        check: test("idem-wallet", "", "it", "tigerbeetle::malformed"),
    },
    Mutant {
        name: "wallet-closed-account-repeat-exists",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "            return if existing.flags != a.flags {",
        to: "            return if existing.flags.difference(AccountFlags::CLOSED) != a.flags {",
        check: test("idem-wallet", "", "it", "tigerbeetle::an_accounts"),
    },
    Mutant {
        name: "wallet-available-ignores-reservations",
        file: "crates/idem-wallet/src/types.rs",
        from: "        self.credit_balance().saturating_sub(self.debits_pending)",
        to: "        self.credit_balance()",
        check: test("idem-wallet", "", "it", "lookups::balances"),
    },
    Mutant {
        name: "wallet-replay-counted-as-a-failure",
        file: "crates/idem-wallet/src/types.rs",
        from: "impl Applied for TransferResult {\n    fn applied(self) -> bool {\n        \
               matches!(self, Self::Created | Self::Exists)",
        to: "impl Applied for TransferResult {\n    fn applied(self) -> bool {\n        \
             matches!(self, Self::Created)",
        check: test("idem-wallet", "", "it", "codes::all_applied"),
    },
    Mutant {
        name: "wallet-rollback-keeps-the-history",
        file: "crates/idem-wallet/src/query.rs",
        from: "        if let Some(history) = self.history.get_mut(&account) {\n            \
               history.pop();",
        to: "        if let Some(history) = self.history.get_mut(&account) {\n            \
             let _ = history;",
        check: test("idem-wallet", "", "it", "queries::a_history_account"),
    },
    Mutant {
        name: "wallet-history-keeps-the-wrong-balance",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "                credits_posted: account.credits_posted,\n                timestamp",
        to: "                credits_posted: account.credits_pending,\n                timestamp",
        check: test("idem-wallet", "", "it", "model::"),
    },
    Mutant {
        name: "wallet-rollback-keeps-the-field-index",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "        self.transfer_fields.remove_last(at, &Fields::of_transfer(&t));\n",
        to: "",
        check: test("idem-wallet", "", "it", "queries::query_filter_table"),
    },
    Mutant {
        name: "wallet-account-filter-ignores-the-side",
        file: "crates/idem-wallet/src/query.rs",
        from: "        let debit = self.flags.contains(AccountFilterFlags::DEBITS)\n            &&",
        to: "        let debit = true\n            &&",
        check: test("idem-wallet", "", "it", "queries::account_filter_table"),
    },
    Mutant {
        name: "wallet-query-timestamp-max-exclusive",
        file: "crates/idem-wallet/src/query.rs",
        from: "    let end = first_where(&|ts| ts > bounds.max);",
        to: "    let end = first_where(&|ts| ts >= bounds.max);",
        check: test("idem-wallet", "", "it", "queries::"),
    },
    Mutant {
        name: "wallet-query-reversed-ignores-the-limit",
        file: "crates/idem-wallet/src/query.rs",
        from: "        places.rev().filter(kept).take(bounds.limit).collect()",
        to: "        places.rev().filter(kept).collect()",
        check: test("idem-wallet", "", "it", "queries::"),
    },
    Mutant {
        name: "wallet-query-limit-over-the-max-served-whole",
        file: "crates/idem-wallet/src/query.rs",
        from: "        let limit = limit.min(QUERY_LIMIT_MAX);",
        to: "        let limit = limit;",
        check: test("idem-wallet", "", "it", "queries::a_query_at_its_limit"),
    },
    Mutant {
        name: "wallet-failed-event-shares-a-records-timestamp",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "(result, if result == R::Created { self.last_timestamp } else { self.timestamp() })",
        to: "(result, self.last_timestamp)",
        check: test("idem-wallet", "", "it", "queries::results_carry"),
    },
    Mutant {
        name: "wallet-rolled-back-chain-timeout-watched",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "            if self.recording_undo {\n                \
               self.chain_expiry.push(entry);",
        to: "            if false {\n                self.chain_expiry.push(entry);",
        check: test("idem-wallet", "", "it", "queries::a_rolled_back_chain"),
    },
    Mutant {
        name: "wallet-standing-chain-timeout-dropped",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "        self.expiry.extend(stood);",
        to: "        drop(stood);",
        check: test("idem-wallet", "", "it", "queries::a_rolled_back_chain"),
    },
    Mutant {
        name: "wallet-query-checks-only-the-rarest-field",
        file: "crates/idem-wallet/src/query.rs",
        from: "        let has = |place: usize| fields(list[place]).has(wanted);",
        to: "        let has = |_place: usize| true;",
        check: test("idem-wallet", "", "it", "queries::query_filter_table"),
    },
    Mutant {
        name: "wallet-replay-answered-with-a-new-timestamp",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "return (result, if result == R::Exists { original } else { self.timestamp() });",
        to: "return (result, self.timestamp());",
        check: test("idem-wallet", "", "it", "queries::results_carry"),
    },
    Mutant {
        name: "wallet-log-drops-account-user-data",
        file: "crates/idem-wallet/src/durable/format.rs",
        from: "            payload.extend_from_slice(&a.user_data_128.to_le_bytes());",
        to: "            payload.extend_from_slice(&0u128.to_le_bytes());",
        check: test("idem-wallet", "", "it", "durable::a_reopened_log"),
    },
    Mutant {
        name: "wallet-log-swaps-transfer-user-data",
        file: "crates/idem-wallet/src/durable/format.rs",
        from: "        user_data_64: f.u64()?,\n        user_data_32: f.u32()?,\n        timeout",
        to: "        user_data_64: f.u64()? & 0,\n        user_data_32: f.u32()?,\n        timeout",
        check: test("idem-wallet", "", "it", "durable::a_reopened_log"),
    },
    Mutant {
        name: "wallet-user-data-code-unnamed",
        file: "crates/idem-wallet/src/types.rs",
        from: "c.is_ascii_digit() && previous.is_some_and(|p| !p.is_ascii_digit())",
        to: "c.is_ascii_digit() && false",
        check: test("idem-wallet", "", "it", "codes::"),
    },
    Mutant {
        name: "redis-complete-ignores-the-token",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "if f[1] ~= ARGV[1] or f[2] ~= '0' then return 0 end\nlocal exp",
        to: "if f[2] ~= '0' then return 0 end\nlocal exp",
        check: test("idem-store-redis", "server-tests", "redis", "stale_lease"),
    },
    Mutant {
        name: "redis-claim-takes-over-a-live-lease",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "  elseif tonumber(f[3]) > now then\n    \
               if f[1] ~= ARGV[1] then return {'reused'} end",
        to: "  elseif false then\n    if f[1] ~= ARGV[1] then return {'reused'} end",
        check: test("idem-store-redis", "server-tests", "redis", "in_flight"),
    },
    Mutant {
        name: "redis-two-stores-both-take-a-live-key",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "  elseif tonumber(f[3]) > now then\n    \
               if f[1] ~= ARGV[1] then return {'reused'} end",
        to: "  elseif false then\n    if f[1] ~= ARGV[1] then return {'reused'} end",
        check: test("idem-store-redis", "server-tests", "redis", "racing_tasks"),
    },
    Mutant {
        name: "redis-recovery-ignores-the-fingerprint",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "  elseif f[1] ~= ARGV[1] then\n    return {'reused'}\n  else",
        to: "  elseif false then\n    return {'reused'}\n  else",
        check: test("idem-store-redis", "server-tests", "redis", "key_reused"),
    },
    Mutant {
        name: "redis-evicting-policy-accepted",
        file: "crates/idem-store-redis/src/server.rs",
        from: "    if policy != \"noeviction\" {",
        to: "    if false {",
        check: test("idem-store-redis", "server-tests", "redis", "evict"),
    },
    Mutant {
        name: "redis-no-append-only-file-accepted",
        file: "crates/idem-store-redis/src/server.rs",
        from: "    if appendonly != \"yes\" && !restart_may_forget {",
        to: "    if false {",
        check: test("idem-store-redis", "server-tests", "redis", "append_only"),
    },
    Mutant {
        name: "redis-unreplicated-change-acknowledged",
        file: "crates/idem-store-redis/src/store.rs",
        from: "        let Some(r) = self.replicas else { return Ok(()) };",
        to: "        let Some(r) = None::<Replicas> else { return Ok(()) };",
        check: test("idem-store-redis", "server-tests", "redis", "wait_for_replicas"),
    },
    Mutant {
        name: "redis-results-kept-without-a-ttl",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "if ARGV[6] == '1' then redis.call('PEXPIREAT', KEYS[1], int(exp)) end\n",
        to: "",
        check: test("idem-store-redis", "server-tests", "redis", "redis_expires"),
    },
    Mutant {
        name: "redis-claim-past-capacity",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "  if not replaced and records >= tonumber(ARGV[3]) then return {'full'} end",
        to: "  if false then return {'full'} end",
        check: test("idem-store-redis", "server-tests", "redis", "capacity"),
    },
    Mutant {
        name: "redis-scope-quota-never-counted",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "if not recovered then redis.call('INCR', KEYS[5]) end\n",
        to: "",
        check: test("idem-store-redis", "server-tests", "redis", "scope_quota"),
    },
    Mutant {
        name: "redis-deadlines-on-the-clients-clock",
        file: "crates/idem-store-redis/src/store.rs",
        from: "self.clock.as_ref().map_or_else(|| \"server\".into(),",
        to: "self.clock.as_ref().map_or_else(|| \
             idem_core::Clock::now(&idem_core::SystemClock).as_millis().to_string(),",
        check: test("idem-store-redis", "server-tests", "redis", "servers_clock"),
    },
    Mutant {
        name: "redis-tokens-restart-at-one",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "local token = last and tonumber(last) + 1 or clock('server') * 1000",
        to: "local token = last and tonumber(last) + 1 or 1",
        check: test("idem-store-redis", "server-tests", "redis", "tokens_only_grow"),
    },
    Mutant {
        name: "redis-replica-accepted",
        file: "crates/idem-store-redis/src/server.rs",
        from: "        Some(\"master\") => Ok(()),",
        to: "        Some(_) => Ok(()),",
        check: test("idem-store-redis", "server-tests", "redis", "a_replica_is_refused"),
    },
    Mutant {
        name: "redis-pending-unbounded",
        file: "crates/idem-store-redis/src/store.rs",
        from: "            .arg(max.min(PENDING_BATCH_MAX))",
        to: "            .arg(max)",
        check: test("idem-store-redis", "server-tests", "redis", "pending_answers"),
    },
    Mutant {
        name: "redis-scope-counter-kept-at-zero",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "if redis.call('DECR', KEYS[3]) <= 0 then redis.call('DEL', KEYS[3]) end",
        to: "redis.call('DECR', KEYS[3])",
        check: test("idem-store-redis", "server-tests", "redis", "settled_scopes"),
    },
    Mutant {
        name: "redis-unreplicated-result-replayed",
        file: "crates/idem-store-redis/src/store.rs",
        from: "                self.replicated(acked)?;\n                Ok(Claim::Replay(result))",
        to: "                Ok(Claim::Replay(result))",
        check: test("idem-store-redis", "server-tests", "redis", "wait_for_replicas"),
    },
    Mutant {
        name: "redis-resp3-config-unread",
        file: "crates/idem-store-redis/src/server.rs",
        from: "        redis::Value::Map(mut pairs) if pairs.len() == 1 => \
               pairs.pop().map(|(_, v)| v),\n",
        to: "",
        check: test("idem-store-redis", "server-tests", "redis", "resp3"),
    },
    Mutant {
        name: "wallet-old-log-version-unnamed",
        file: "crates/idem-wallet/src/durable/recovery.rs",
        from: "Some([found_magic @ .., version]) if found_magic == magic => {",
        to: "Some([found_magic @ .., version]) if found_magic == magic && false => {",
        check: test("idem-wallet", "", "it", "durable::a_log_of_an_older_format"),
    },
    Mutant {
        name: "pool-return-wakes-a-woken-waiter",
        file: "crates/idem-pool/src/state.rs",
        from: ".find(|w| w.grant.is_none() && !w.woken) {\n            waiter.woken = true;",
        to: ".find(|w| w.grant.is_none()) {\n            waiter.woken = true;",
        check: Check::Loom { package: "idem-pool", model: "two_returns_wake_two_waiters_barging" },
    },
    Mutant {
        name: "notify-recovery-starts-not-delivered",
        file: "crates/idem-notify/src/notifier.rs",
        from: "DeliveryStatus::Unknown if resend => tried.may_have_delivered = true,",
        to: "DeliveryStatus::Unknown if resend => {}",
        check: test("idem-notify", "", "it", "may_have_delivered"),
    },
    Mutant {
        name: "http-outcome-unknown-stored",
        file: "crates/idem-http/src/run.rs",
        from: "    if parts.extensions.remove::<OutcomeUnknown>().is_some() {",
        to: "        if false {",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-stand-in-keeps-the-body-headers",
        file: "crates/idem-http/src/layer.rs",
        from: "    kept.retain(|(name, _)| !describes_the_body(name));",
        to: "",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-header-values-cut-silently",
        file: "crates/idem-http/src/layer.rs",
        from: "headers.len() <= STORED_HEADERS_MAX && header_bytes <= \
               STORED_HEADER_BYTES_MAX;",
        to: "header_bytes <= STORED_HEADER_BYTES_MAX;",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-retry-after-rounded-up",
        file: "crates/idem-http/src/problem.rs",
        from: "HeaderValue::from(after.as_secs().max(1))",
        to: "HeaderValue::from((after.as_secs() + u64::from(after.subsec_nanos() > 0)).max(1))",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-request-body-error-text-reaches-the-client",
        file: "crates/idem-http/src/layer.rs",
        from: "            drop(error);\n            \
               let detail = \"reading the request body failed; nothing was claimed or run\";",
        to: "            let detail = format!(\"reading the body failed: {error}\");",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "http-whole-response-over-the-store-kept",
        file: "crates/idem-http/src/layer.rs",
        from: "        Some(body) if fits_store(STORED_ENVELOPE_BYTES + header_bytes + \
               body.len()) => {",
        to: "        Some(body) if true => {",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "pg-duration-max-overflows",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "    i64::try_from(span.as_millis()).unwrap_or(i64::MAX).min(SPAN_MS_MAX)",
        to: "    i64::try_from(span.as_millis()).unwrap_or(i64::MAX)",
        check: test("idem-store-postgres", "server-tests", "postgres", "duration_max"),
    },
    Mutant {
        name: "pg-early-losers-wait-past-the-lease",
        file: "crates/idem-durable/src/row.rs",
        from: "    until.saturating_duration_since(now).min(lease)",
        to: "    until.saturating_duration_since(now)",
        check: test("idem-store-postgres", "server-tests", "postgres", "losers"),
    },
    Mutant {
        name: "checkout-stores-an-ambiguous-charge-as-a-failure",
        file: "crates/idem-http/examples/checkout_server/app.rs",
        from: "    (StatusCode::BAD_GATEWAY, Extension(OutcomeUnknown), why).into_response()",
        to: "    (StatusCode::BAD_GATEWAY, why).into_response()",
        check: test("idem-http", "", "it", "sockets::"),
    },
    Mutant {
        name: "wallet-pending-expiry-overflows",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "self.batch_now_ms.saturating_add(u64::from(t.timeout) * 1000);",
        to: "self.batch_now_ms + u64::from(t.timeout) * 1000;",
        check: test("idem-wallet", "", "it", "a_clock_at_the_end"),
    },
    Mutant {
        name: "wallet-timestamp-overflows",
        file: "crates/idem-wallet/src/ledger.rs",
        from: "now.max(self.last_timestamp.saturating_add(1));",
        to: "now.max(self.last_timestamp + 1);",
        check: test("idem-wallet", "", "it", "a_clock_at_the_end"),
    },
    Mutant {
        name: "http-new-on-a-tiny-store-takes-the-default",
        file: "crates/idem-http/src/layer.rs",
        from: "            store_max.unwrap_or(usize::MAX).saturating_sub(\
               crate::STORED_ENVELOPE_BYTES)",
        to: "            crate::ConfigBuilder::RESPONSE_BYTES_DEFAULT",
        check: test("idem-http", "", "it", "edges::"),
    },
    Mutant {
        name: "durable-group-limit-of-zero-clamped",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "            if value == 0 {",
        to: "            if value == usize::MAX {",
        check: test("idem-durable", "", "it", "group_commit::a_limit_of_zero"),
    },
    Mutant {
        name: "durable-group-failure-repeats-its-cause",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        self.0.source()",
        to: "        Some(&*self.0)",
        check: test("idem-durable", "", "it", "group_commit::a_failed_group_keeps"),
    },
    Mutant {
        name: "core-with-clock-starts-the-clock-thread",
        file: "crates/idem-core/src/memory.rs",
        from: "        Self::with_clocks(config, Arc::clone(&clock), clock)",
        to: "        drop(clock);\n        Self::new(config)",
        check: test("idem-core", "", "clock_thread", ""),
    },
    Mutant {
        name: "payments-failed-listing-unreported",
        file: "crates/idem-payments/src/processor.rs",
        from: "                report.listing_failed = Some(error.to_string());",
        to: "                drop(error);",
        check: test("idem-payments", "", "it", "a_failed_listing"),
    },
    Mutant {
        name: "pg-migration-lock-id-changed",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "const MIGRATION_LOCK_ID: i64 = 4242;",
        to: "const MIGRATION_LOCK_ID: i64 = 4243;",
        check: test("idem-store-postgres", "server-tests", "postgres", "advisory_lock"),
    },
    Mutant {
        name: "pg-schema-name-64-bytes-allowed",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "const SCHEMA_NAME_BYTES_MAX: usize = 63;",
        to: "const SCHEMA_NAME_BYTES_MAX: usize = 64;",
        check: test("idem-store-postgres", "server-tests", "postgres", "schema_names"),
    },
    Mutant {
        name: "core-renew-ignores-the-token",
        file: "crates/idem-core/src/memory.rs",
        from: "find_mut(hash, |r| r.key == *lease.key() && held(r))",
        to: "find_mut(hash, |r| r.key == *lease.key() && held(r) || r.key == *lease.key())",
        check: test("idem-core", "", "it", "conformance::renew"),
    },
    Mutant {
        name: "core-renew-takes-a-recovered-key",
        file: "crates/idem-core/src/memory.rs",
        from: "find_mut(hash, |r| r.key == *lease.key() && held(r))",
        to: "find_mut(hash, |r| r.key == *lease.key() && held(r) || r.key == *lease.key())",
        check: Check::Loom { package: "idem-core", model: "" },
    },
    Mutant {
        name: "sqlite-renew-ignores-the-token",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: "SET lease_expires_at = ?4\n         WHERE scope = ?1 AND key = ?2 AND token = ?3",
        to: "SET lease_expires_at = ?4\n         WHERE scope = ?1 AND key = ?2 AND ?3 >= 0",
        check: test("idem-store-sqlite", "", "it", "renew"),
    },
    Mutant {
        name: "pg-renew-keeps-the-old-deadline",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "SET lease_expires_at = {} + $4",
        to: "SET lease_expires_at = lease_expires_at + 0 * {} * $4",
        check: test("idem-store-postgres", "server-tests", "postgres", "renew"),
    },
    Mutant {
        name: "core-forget-removes-a-live-holder",
        file: "crates/idem-core/src/admin.rs",
        from: "Some(KeyRecord { state: RecordState::InFlight { lease_expires_at }, .. }) => {",
        to: "Some(KeyRecord { state: RecordState::InFlight { lease_expires_at }, .. }) if false \
             => {",
        check: test("idem-core", "", "it", "conformance::forget"),
    },
    Mutant {
        name: "core-forget-beside-a-renewing-holder",
        file: "crates/idem-core/src/admin.rs",
        from: "Some(KeyRecord { state: RecordState::InFlight { lease_expires_at }, .. }) => {",
        to: "Some(KeyRecord { state: RecordState::InFlight { lease_expires_at }, .. }) if false \
             => {",
        check: Check::Loom { package: "idem-core", model: "" },
    },
    Mutant {
        name: "core-forget-keeps-the-record-count",
        file: "crates/idem-core/src/memory.rs",
        from: "            self.records.fetch_sub(1, Ordering::Relaxed);\n\
               \x20           // A waiter on the pending claim",
        to: "            // A waiter on the pending claim",
        check: test("idem-core", "", "it", "conformance::forget"),
    },
    Mutant {
        name: "core-forget-keeps-the-scope-count",
        file: "crates/idem-core/src/memory.rs",
        from: "if matches!(record.state, RecordState::Pending { .. }) {",
        to: "if matches!(record.state, RecordState::InFlight { .. }) {",
        check: test("idem-core", "", "it", "conformance::forget"),
    },
    Mutant {
        name: "core-forget-untraced-who-and-why",
        file: "crates/idem-core/src/trace.rs",
        from: "tracing::warn!(scope, key, who, why, ?was,",
        to: "tracing::warn!(scope, key, ?was,",
        check: test("idem-core", "tracing", "it", "a_forget_says"),
    },
    Mutant {
        name: "sqlite-forget-keeps-the-record-count",
        file: "crates/idem-store-sqlite/src/admin.rs",
        from: "        exec(conn, \"UPDATE meta SET records = records - 1 WHERE id = 1\", [])",
        to: "        exec(conn, \"UPDATE meta SET records = records - 0 WHERE id = 1\", [])",
        check: test("idem-store-sqlite", "", "it", "forget"),
    },
    Mutant {
        name: "pg-forget-keeps-the-record-count",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "    counted_delete_sql(\n        s,\n        \
               &format!(\"DELETE FROM {s}.claims WHERE scope = $1 AND key = $2 RETURNING 1\"),",
        to: "    format!(\n        \"WITH gone AS ({}) SELECT COUNT(*) FROM gone\",\n        \
             format!(\"DELETE FROM {s}.claims WHERE scope = $1 AND key = $2 RETURNING 1\"),",
        check: test("idem-store-postgres", "server-tests", "postgres", "forget"),
    },
    Mutant {
        name: "pg-forget-judges-the-row-unlocked",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "record_locked: format!(\"{} FOR UPDATE\", record_sql(&s)),",
        to: "record_locked: record_sql(&s),",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_forget_waits"),
    },
    Mutant {
        name: "http-forget-without-a-reason",
        file: "crates/idem-http/src/operator.rs",
        from: "if why.trim().is_empty() || why.len() > FORGET_REASON_BYTES_MAX {",
        to: "if why.len() > FORGET_REASON_BYTES_MAX {",
        check: test("idem-http", "", "it", "operator"),
    },
    Mutant {
        name: "http-operator-store-error-shown",
        file: "crates/idem-http/src/operator.rs",
        from: "        OperatorError::Store(_) => Problem::new(",
        to: "        OperatorError::Store(_) if false => Problem::new(",
        check: test("idem-http", "", "it", "operator"),
    },
    Mutant {
        name: "http-forget-uncounted",
        file: "crates/idem-http/src/operator.rs",
        from: "            self.state.counters.count(Count::Forgotten);",
        to: "",
        check: test("idem-http", "", "it", "operator"),
    },
    Mutant {
        name: "checkout-remote-unanswered-taken-as-refused",
        file: "crates/idem-http/examples/checkout_server/remote.rs",
        from: "Err(false) => Err(GatewayError::Ambiguous(",
        to: "Err(false) => Err(GatewayError::Refused(",
        check: test("idem-http", "", "it", "remote_gateway"),
    },
    Mutant {
        name: "checkout-remote-lookup-misses-the-charge",
        file: "crates/idem-http/examples/checkout_server/remote.rs",
        from: "Ok((200, found)) => charged(&found).map_or(Lookup::Unknown, Lookup::Charged),",
        to: "Ok((200, _)) => Lookup::NotCharged,",
        check: test("idem-http", "", "it", "remote_gateway"),
    },
    Mutant {
        name: "checkout-remote-unreachable-taken-as-unknown",
        file: "crates/idem-http/examples/checkout_server/remote.rs",
        from: "Err(true) => Err(GatewayError::Refused(",
        to: "Err(true) => Err(GatewayError::Ambiguous(",
        check: test("idem-http", "", "it", "unreachable_gateway"),
    },
    Mutant {
        name: "gateway-server-deduplicates",
        file: "crates/idem-crash/src/gateway_http.rs",
        from: "    let id = book.charges + 1;\n",
        to: "    let id = book.charges + 1;\n\
             \x20   if let Some(done) = book.by_key.get(key) {\n\
             \x20       return Some((\"200 OK\", done.id.0.to_string()));\n\
             \x20   }\n",
        check: test("idem-crash", "", "gateway_http", ""),
    },
    Mutant {
        name: "gateway-server-forgets-its-file",
        file: "crates/idem-crash/src/gateway_http.rs",
        from: "        for record in existing {",
        to: "        for record in existing.into_iter().take(0) {",
        check: test("idem-crash", "", "gateway_http", ""),
    },
    Mutant {
        name: "cluster-recovery-charges-blindly",
        file: "crates/idem-http/examples/checkout_server/app.rs",
        from: "    if recovering {\n",
        to: "    if false {\n",
        check: Check::Cluster,
    },
    Mutant {
        name: "cluster-redis-recovery-charges-blindly",
        file: "crates/idem-http/examples/checkout_server/app.rs",
        from: "    if recovering {\n",
        to: "    if false {\n",
        check: Check::ClusterRedis,
    },
    Mutant {
        name: "cluster-redis-claim-takes-over-a-live-lease",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "  elseif tonumber(f[3]) > now then\n    \
               if f[1] ~= ARGV[1] then return {'reused'} end",
        to: "  elseif false then\n    if f[1] ~= ARGV[1] then return {'reused'} end",
        check: Check::ClusterRedis,
    },
    Mutant {
        name: "cluster-servers-without-the-layer",
        file: "xtask/src/cluster.rs",
        from: "        naive: false,\n",
        to: "        naive: true,\n",
        check: Check::Cluster,
    },
    Mutant {
        name: "pg-pooler-refusal-unnamed",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "        && db.message().starts_with(\"unsupported startup parameter\")",
        to: "        && db.message().starts_with(\"unsupported startup parameter\") && false",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_transaction_pooler"),
    },
    Mutant {
        name: "gateway-server-keeps-a-torn-tail",
        file: "crates/idem-crash/src/gateway_http.rs",
        from: "        repair_torn_tail(path)?;\n",
        to: "",
        check: test("idem-crash", "", "gateway_http", ""),
    },
    Mutant {
        name: "gateway-server-writes-any-customer",
        file: "crates/idem-crash/src/gateway_http.rs",
        from: "plain(key, false) && plain(customer, true))",
        to: "true)",
        check: test("idem-crash", "", "gateway_http", ""),
    },
    Mutant {
        name: "gateway-server-lookup-blind-to-a-charge-under-way",
        file: "crates/idem-crash/src/gateway_http.rs",
        from: "        None if book.in_progress.contains(key) => (\"409 Conflict\", \"in progr\
               ess\".into()),\n",
        to: "",
        check: test("idem-crash", "", "gateway_http", ""),
    },
    Mutant {
        name: "gateway-server-head-unbounded",
        file: "crates/idem-crash/src/gateway_http.rs",
        from: "reader.by_ref().take(*left as u64).read_line(&mut line)?;",
        to: "reader.read_line(&mut line)?;",
        check: test("idem-crash", "", "gateway_http", ""),
    },
    Mutant {
        name: "checkout-remote-failure-before-taken-as-unknown",
        file: "crates/idem-http/examples/checkout_server/remote.rs",
        from: "Ok((503, why)) => Err(GatewayError::Refused(why)),",
        to: "Ok((503, why)) => Err(GatewayError::Ambiguous(why)),",
        check: test("idem-http", "", "it", "a_decline"),
    },
    Mutant {
        name: "checkout-remote-decline-taken-as-unknown",
        file: "crates/idem-http/examples/checkout_server/remote.rs",
        from: "Ok((402, reason)) => Err(GatewayError::Declined(reason)),",
        to: "Ok((402, reason)) => Err(GatewayError::Ambiguous(reason)),",
        check: test("idem-http", "", "it", "a_decline"),
    },
    Mutant {
        name: "core-forget-retry-after-zero",
        file: "crates/idem-core/src/admin.rs",
        from: "let retry_after = lease_expires_at.saturating_duration_since(now);",
        to: "let retry_after = Duration::ZERO.min(lease_expires_at.saturating_duration_since(n\
             ow));",
        check: test("idem-http", "", "it", "operator"),
    },
    Mutant {
        name: "core-forget-of-a-result-frees-a-quota-place",
        file: "crates/idem-core/src/memory.rs",
        from: "if matches!(record.state, RecordState::Pending { .. }) {",
        to: "if true {",
        check: test("idem-core", "", "it", "conformance::forget"),
    },
    Mutant {
        name: "pg-blocking-forget-judges-the-row-unlocked",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "record_locked: format!(\"{} FOR UPDATE\", record_sql(&s)),",
        to: "record_locked: record_sql(&s),",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_blocking_forget"),
    },
    Mutant {
        name: "http-operator-405-without-allow",
        file: "crates/idem-http/src/operator.rs",
        from: "                    response.headers_mut().insert(header::ALLOW, allow);\n",
        to: "                    let _ = allow;\n",
        check: test("idem-http", "", "it", "operator"),
    },
    Mutant {
        name: "client-streamed-body-refused-as-another-error",
        file: "crates/idem-client/src/reqwest.rs",
        from: "ClientError::<BoxError>::BodyNotReplayable,",
        to: "ClientError::<reqwest::Error>::BodyNotReplayable,",
        check: test("idem-client", "", "sockets", "a_streamed_body"),
    },
    Mutant {
        name: "client-streamed-body-sent",
        file: "crates/idem-client/src/reqwest.rs",
        from: "if request.body().is_some_and(|body| body.as_bytes().is_none()) {",
        to: "if false {",
        check: test("idem-client", "", "sockets", "a_streamed_body"),
    },
    Mutant {
        name: "client-reqwest-key-made-per-attempt",
        file: "crates/idem-client/src/reqwest.rs",
        from: "            let copy = request.try_clone();\n",
        to: "            let copy = request.try_clone().map(|mut c| {\n\
             \x20               c.headers_mut().insert(\"idempotency-key\", \
             Intent::new().header());\n\
             \x20               c\n\
             \x20           });\n",
        check: test("idem-client", "", "sockets", "a_lost_answer"),
    },
    Mutant {
        name: "client-tower-key-made-per-attempt",
        file: "crates/idem-client/src/tower.rs",
        from: "                let copy = Request::from_parts(parts.clone(), body.clone());\n",
        to: "                let mut copy = Request::from_parts(parts.clone(), body.clone());\n\
             \x20               copy.headers_mut().insert(\"idempotency-key\", \
             Intent::new().header());\n",
        check: test("idem-client", "", "sockets", "a_storm"),
    },
    Mutant {
        name: "client-422-retried",
        file: "crates/idem-client/src/policy.rs",
        from: "            return Verdict::KeyReused;",
        to: "            return Verdict::Retry(None);",
        check: test("idem-client", "", "sockets", "a_key_reused"),
    },
    Mutant {
        name: "client-409-not-retried",
        file: "crates/idem-client/src/policy.rs",
        from: "            409 | 429 | 503 => Verdict::Retry(told()),",
        to: "            429 | 503 => Verdict::Retry(told()),",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-retry-after-ignored",
        file: "crates/idem-client/src/policy.rs",
        from: "            Some(after) => after.min(RETRY_AFTER_MAX).max(jittered),",
        to: "            Some(_) => jittered,",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-retry-after-uncapped",
        file: "crates/idem-client/src/policy.rs",
        from: "            Some(after) => after.min(RETRY_AFTER_MAX).max(jittered),",
        to: "            Some(after) => after.max(jittered),",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-pauses-never-double",
        file: "crates/idem-client/src/policy.rs",
        from: "let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);",
        to: "let factor = 1u32;",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-attempt-past-the-deadline",
        file: "crates/idem-client/src/retry.rs",
        from: "tokio::time::timeout(policy.attempt_timeout().min(left), send())",
        to: "tokio::time::timeout(policy.attempt_timeout(), send())",
        check: test("idem-client", "", "policy", "near_the_deadline"),
    },
    Mutant {
        name: "client-replay-retried",
        file: "crates/idem-client/src/policy.rs",
        from: "        if replayed(headers) {",
        to: "        if false {",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-callers-key-overwritten",
        file: "crates/idem-client/src/intent.rs",
        from: "        Some(own) => own\n",
        to: "        Some(_) if true => {\n\
             \x20           headers.insert(name, intent.header());\n\
             \x20           intent.key().to_string()\n\
             \x20       }\n\
             \x20       Some(own) => own\n",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-deadline-unbounded",
        file: "crates/idem-client/src/policy.rs",
        from: "        if p.deadline.is_zero() || p.deadline > DEADLINE_MAX {",
        to: "        if p.deadline.is_zero() {",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-pauses-in-step",
        file: "crates/idem-client/src/retry.rs",
        from: "    let salt = uuid::Uuid::new_v4().as_u64_pair().0;",
        to: "    let salt = 7;",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "client-tower-ready-service-kept",
        file: "crates/idem-client/src/tower.rs",
        from: "        let ready = std::mem::replace(&mut self.inner, template.clone());",
        to: "        let ready = template.clone();",
        check: test("idem-client", "", "policy", ""),
    },
    Mutant {
        name: "http-operator-pending-shown-in-flight",
        file: "crates/idem-http/src/operator.rs",
        from: "(\"pending\", \"lease_expired_at\", lease_expired_at)",
        to: "(\"in_flight\", \"lease_expired_at\", lease_expired_at)",
        check: test("idem-http", "", "it", "operator"),
    },
    Mutant {
        name: "client-unknown-outcome-unexplained",
        file: "crates/idem-client/src/lib.rs",
        from: "it may have taken effect; retry the same intent later, never a new one\"",
        to: "try again\"",
        check: test("idem-client", "", "sockets", "past_its_deadline"),
    },
    Mutant {
        name: "gateway-server-never-fails-before-charging",
        file: "crates/idem-crash/src/gateway_http.rs",
        from: "    if book.flip(fail) {",
        to: "    if false && book.flip(fail) {",
        check: test("idem-crash", "", "gateway_http", ""),
    },
    Mutant {
        name: "cluster-orders-name-another-charge",
        file: "crates/idem-http/examples/checkout_server/orders.rs",
        from: "&[&lease.key().to_string(), &charge.id.to_string(), &amount]",
        to: "&[&lease.key().to_string(), &\"ch_0\".to_string(), &amount]",
        check: Check::Cluster,
    },
    Mutant {
        name: "pg-blocking-timeout-dropped-unnoticed",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "    crate::session_kept_its_timeout(crate::statement_timeout_ms(&timeout)?)?;",
        to: "    crate::statement_timeout_ms(&timeout)?;",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_transaction_pooler"),
    },
    Mutant {
        name: "pg-async-timeout-dropped-unnoticed",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "    if timeout_ms == asked {",
        to: "    if timeout_ms == asked || timeout_ms >= 0 {",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_transaction_pooler"),
    },
    Mutant {
        name: "http-handler-run-by-the-connection",
        file: "crates/idem-http/src/run.rs",
        from: "    tokio::spawn(async move {\n\
               \x20       let _counted = counted;\n\
               \x20       let run = run(&run_state, inner, request, (held, lost, vouched, stop), \
               reply);\n\
               \x20       orphan_bound(&run_state, run, gone).await;\n\
               \x20   });",
        to: "    async move {\n\
             \x20       let _counted = counted;\n\
             \x20       let run = run(&run_state, inner, request, (held, lost, vouched, stop), \
             reply);\n\
             \x20       orphan_bound(&run_state, run, gone).await;\n\
             \x20   }.await;",
        check: test("idem-http", "", "it", "sockets::an_awaiting_handler"),
    },
    Mutant {
        name: "http-lease-never-renewed",
        file: "crates/idem-http/src/run.rs",
        from: "match state.store.renew(&lease).await {",
        to: "match Err::<Lease, StoreError>(StoreError::Storage(\"off\".into())) {",
        check: test("idem-http", "", "it", "runs::a_handler_three_times_slower"),
    },
    Mutant {
        name: "http-lost-lease-still-completes",
        file: "crates/idem-http/src/layer.rs",
        from: "if lost.load(Ordering::Acquire) {\n            self.lease_lost",
        to: "if lost.load(Ordering::Acquire) && false {\n            self.lease_lost",
        check: test("idem-http", "", "it", "runs::a_lease_lost_while_the_body_streams"),
    },
    Mutant {
        name: "http-orphan-runs-unbounded",
        file: "crates/idem-http/src/run.rs",
        from: "match tokio::time::timeout(limit, run).await {",
        to: "match Ok::<(), ()>(run.await) {",
        check: test("idem-http", "", "it", "runs::an_orphaned_handler_past"),
    },
    Mutant {
        name: "http-orphan-cancelled-when-its-client-leaves",
        file: "crates/idem-http/src/run.rs",
        from: "        _ = gone => {}",
        to: "        _ = gone => return,",
        check: test("idem-http", "", "it", "runs::an_orphaned_handler_within"),
    },
    Mutant {
        name: "http-streamed-response-kept-before-it-ends",
        file: "crates/idem-http/src/run.rs",
        from: "    match stream_rest(body, &frames).await {",
        to: "    state.complete(lease, stored.clone(), kept, lost).await;\n\
             \x20   match stream_rest(body, &frames).await {",
        check: test("idem-http", "", "it", "a_streamed_response_that_fails"),
    },
    Mutant {
        name: "http-answer-stored-by-the-handler-stored-again",
        file: "crates/idem-http/src/run.rs",
        from: "    if parts.extensions.remove::<StoredByHandler>().is_some() {",
        to: "    if parts.extensions.remove::<StoredByHandler>().is_some() && false {",
        check: test("idem-http", "", "it", "runs::a_handler_that_stored"),
    },
    Mutant {
        name: "http-effect-free-status-kept",
        file: "crates/idem-http/src/run.rs",
        from: "let effect_free = state.config.effect_free.contains(parts.status);",
        to: "let effect_free = false;",
        check: test("idem-http", "", "it", "features::every_response_is_kept"),
    },
    Mutant {
        name: "http-meaning-ignored",
        file: "crates/idem-http/src/layer.rs",
        from: "let Some(meaning) = &config.meaning else {",
        to: "let Some(meaning) = config.meaning.as_ref().filter(|_| false) else {",
        check: test("idem-http", "", "it", "features::a_json_meaning"),
    },
    Mutant {
        name: "http-json-meaning-keeps-ignored-fields",
        file: "crates/idem-http/src/meaning.rs",
        from: ".filter(|(name, _)| !self.ignored.contains(name))",
        to: ".filter(|_| true)",
        check: test("idem-http", "", "it", "features::a_json_meaning"),
    },
    Mutant {
        name: "http-replay-hook-never-called",
        file: "crates/idem-http/src/layer.rs",
        from: "AssertUnwindSafe(|| (hook.0)(request, &mut parts))",
        to: "AssertUnwindSafe(|| { let _ = (&hook, request, &parts); })",
        check: test("idem-http", "", "it", "features::the_replay_hook"),
    },
    Mutant {
        name: "http-replays-counted-as-acquired",
        file: "crates/idem-http/src/layer.rs",
        from: "Ok(Claim::Replay(stored)) => (Count::Replayed,",
        to: "Ok(Claim::Replay(stored)) => (Count::Acquired,",
        check: test("idem-http", "", "it", "features::each_answer_is_counted"),
    },
    Mutant {
        name: "http-metrics-never-incremented",
        file: "crates/idem-http/src/outcomes.rs",
        from: "metrics::counter!(count.metric()).increment(1);",
        to: "metrics::counter!(count.metric()).increment(0);",
        check: test("idem-http", "metrics", "it", "features::the_counts_reach"),
    },
    Mutant {
        name: "http-retry-after-the-whole-lease",
        file: "crates/idem-http/src/layer.rs",
        from: ".retry_after(counters.retry_after(lease_left))",
        to: ".retry_after(lease_left)",
        check: test("idem-http", "", "it", "features::retry_after_follows"),
    },
    Mutant {
        name: "http-full-store-answered-as-a-failing-one",
        file: "crates/idem-http/src/layer.rs",
        from: "        Err(StoreError::StoreFull { .. }) => \
               (Count::StoreFull, Err(store_full())),\n",
        to: "",
        check: test("idem-http", "", "it", "limits::the_store_at_its_limits"),
    },
    Mutant {
        name: "durable-async-answered-before-the-commit",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "    let committed = state.commit().map_err(",
        to: "    for finish in pending.0.drain(..) {\n        finish(Ok(()));\n    }\n    let \
             committed = state.commit().map_err(",
        check: test("idem-durable", "", "it", "submit_async::an_async_caller_is_answered_only_aft"),
    },
    Mutant {
        name: "durable-queue-one-past-the-limit",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "channel::<Job<S>>(limits.queue_max)",
        to: "channel::<Job<S>>(limits.queue_max + 1)",
        check: test("idem-durable", "", "it", "submit_async::an_async_caller_at_the_limit"),
    },
    Mutant {
        name: "durable-room-not-woken-after-a-group",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        self.room.wake();\n        Some(group)",
        to: "        Some(group)",
        check: test("idem-durable", "", "it", "submit_async::a_caller_past_the_limit_waits"),
    },
    Mutant {
        name: "durable-room-not-woken-when-the-writer-stops",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        drop(self.queue.take());\n        self.room.wake();",
        to: "        drop(self.queue.take());",
        check: test("idem-durable", "", "it", "submit_async::callers_queued_or_waiting"),
    },
    Mutant {
        name: "durable-reply-to-a-gone-caller-panics",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "            let _ = tx.send(answer);",
        to: "            assert!(tx.send(answer).is_ok(), \"the caller waits\");",
        check: test("idem-durable", "", "it", "submit_async::a_future_dropped_after"),
    },
    Mutant {
        name: "durable-failed-commit-reply-lost",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "                reply.send(committed.map(|()| out).map_err(Clone::clone));",
        to: "                if committed.is_ok() {\n                    reply.send(Ok(out));\
             \n                }",
        check: test("idem-durable", "", "it", "submit_async::an_async_caller_of_a_failed_group"),
    },
    Mutant {
        name: "durable-async-failed-commit-answered-ok",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        finish(committed.as_ref().map(|_| ()));",
        to: "        finish(Ok(()));",
        check: test("idem-durable", "", "it", "submit_async::an_async_caller_of_a_failed_group"),
    },
    Mutant {
        name: "durable-groups-uncounted",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "counts.groups.fetch_add(1, Ordering::Relaxed);",
        to: "counts.groups.fetch_add(0, Ordering::Relaxed);",
        check: test("idem-durable", "", "it", "submit_async::a_future_dropped_after"),
    },
    Mutant {
        name: "durable-async-blocks-for-room",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "                Err(TrySendError::Full(back)) => job = back,",
        to: "                Err(TrySendError::Full(back)) => {\n                    jobs.send\
             (back).map_err(|_| CommitError::Stopped)?;\n                    return Ok(());\n \
             \x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20}",
        check: test("idem-durable", "", "it", "submit_async::callers_past_the_limit_never_park"),
    },
    Mutant {
        name: "durable-given-up-work-skipped",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        Some(state) => {\n            reply.started = true;",
        to: "        Some(_) if reply.tx.as_ref().is_some_and(oneshot::Sender::is_closed) => {\
             \n            Box::new(|_: Result<(), &CommitError>| {})\n        }\n        Some\
             (state) => {\n            reply.started = true;",
        check: test("idem-store-sqlite", "", "it", "async_callers::async_calls_given_up"),
    },
    Mutant {
        name: "sqlite-async-write-blocks-its-thread",
        file: "crates/idem-store-sqlite/src/async_store.rs",
        from: "written(self.writer.submit_async(job).await)",
        to: "written(self.writer.submit(job))",
        check: test("idem-store-sqlite", "", "it", "async_callers::async_callers_on_one_thread"),
    },
    Mutant {
        name: "sqlite-async-claim-never-sweeps",
        file: "crates/idem-store-sqlite/src/async_store.rs",
        from: "claim_with_sweep_async(claim, || self.write_async(sweep_write())).await",
        to: "claim().await",
        check: test("idem-store-sqlite", "", "it", "through_the_async_contract::capacity"),
    },
    Mutant {
        name: "sqlite-async-claim-skips-the-fast-path",
        file: "crates/idem-store-sqlite/src/async_store.rs",
        from: "        if let Some(answer) = self.read_claim(key, fingerprint)? {\n           \
               \x20return Ok(answer);\n        }\n        decode_claim(key, self.write_async(",
        to: "        decode_claim(key, self.write_async(",
        check: test("idem-store-sqlite", "", "it", "async_callers::async_replays"),
    },
    Mutant {
        name: "sqlite-async-claim-untraced",
        file: "crates/idem-store-sqlite/src/async_store.rs",
        from: "idem_core::trace::claim(key, || answer)",
        to: "answer",
        check: test("idem-store-sqlite", "tracing", "it", "async_callers::async_calls_report"),
    },
    Mutant {
        name: "sqlite-async-complete-untraced",
        file: "crates/idem-store-sqlite/src/async_store.rs",
        from: "idem_core::trace::settle(\"complete\", lease, || answer)",
        to: "answer",
        check: test("idem-store-sqlite", "tracing", "it", "async_callers::async_calls_report"),
    },
    Mutant {
        name: "sqlite-failed-write-answered-stopped",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: "Err(CommitError::Failed(why)) => Err(SqliteError::Write(why).into()),",
        to: "Err(CommitError::Failed(_)) => Err(SqliteError::WriterStopped.into()),",
        check: test("idem-store-sqlite", "", "it", "async_callers::an_async_claim_whose_commit_fa"),
    },
    Mutant {
        name: "http-blocking-complete-releases",
        file: "crates/idem-http/src/blocking.rs",
        from: "call(&self.0, move |s| s.complete(&lease, result)).await",
        to: "call(&self.0, move |s| s.release(&lease).map(|()| drop(result))).await",
        check: test("idem-http", "", "it", "concurrency::a_sync_store_behind"),
    },
    Mutant {
        name: "pg-async-complete-in-ignores-a-lost-lease",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "            rows::settled(changed, lease)",
        to: "            Ok(drop(changed))",
        check: test("idem-store-postgres", "server-tests", "postgres", "complete_in_with_a_stale_"),
    },
    Mutant {
        name: "pg-complete-ignores-the-token",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "result = $5\n                 WHERE scope = $1 AND key = $2 AND token = $3",
        to: "result = $5\n                 WHERE scope = $1 AND key = $2 AND (token = $3 OR to\
             ken <> $3)",
        check: test("idem-store-postgres", "server-tests", "postgres", "complete_in_with_a_stale_"),
    },
    Mutant {
        name: "pg-async-complete-in-on-its-own-connection",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "tx.execute(complete, &params.completion())",
        to: "self.connection().await?.execute(complete.as_str(), &params.completion())",
        check: test("idem-store-postgres", "server-tests", "postgres", "complete_in_"),
    },
    Mutant {
        name: "pg-async-pool-wait-unbounded",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "tokio::time::timeout(wait, pool.get())",
        to: "tokio::time::timeout(Duration::MAX, pool.get())",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_wait_for_a_free_connect"),
    },
    Mutant {
        name: "pg-async-busy-names-no-wait",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "Err(_elapsed) => Err(PgError::Busy { waited: wait }.into())",
        to: "Err(_elapsed) => Err(PgError::Busy { waited: Duration::ZERO }.into())",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_wait_for_a_free_connect"),
    },
    Mutant {
        name: "pg-async-own-pool-without-statement-timeout",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "    config.options(options);",
        to: "    let _ = options;",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_blocked_statement_gives"),
    },
    Mutant {
        name: "pg-async-callers-pool-timeout-unchecked",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "if timeout_ms <= 0 {",
        to: "if timeout_ms < 0 {",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_callers_pool_without_a_"),
    },
    Mutant {
        name: "pg-async-migration-skips-the-lock",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "    tx.execute(crate::MIGRATION_LOCK_SQL, &crate::MIGRATION_LOCK_PARAMS).await.\
               map_err(pg)?;\n",
        to: "",
        check: test("idem-store-postgres", "server-tests", "postgres", "an_async_migration_waits_"),
    },
    Mutant {
        name: "pg-async-reads-the-clients-clock",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "Settings::new(schema, config, clock)",
        to: "Settings::new(schema, config, Some(clock.unwrap_or_else(|| Arc::new(idem_core::Sy\
             stemClock))))",
        check: test("idem-store-postgres", "server-tests", "postgres", "an_async_stores_deadlines"),
    },
    Mutant {
        name: "pg-async-keeps-its-rows-elsewhere",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "Settings::new(schema, config, clock)",
        to: "Settings::new(&format!(\"{schema}_a\"), config, clock)",
        check: test("idem-store-postgres", "server-tests", "postgres", "the_sync_and_the_async_st"),
    },
    Mutant {
        name: "pg-async-tls-dropped",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "Some(tls) => Manager::from_config(session, tls, manager_config),",
        to: "Some(_tls) => Manager::from_config(session, NoTls, manager_config),",
        check: test("idem-store-postgres", "server-tests", "postgres", "tls::an_async_store_over_"),
    },
    Mutant {
        name: "pg-sessions-unnamed",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "        config.application_name(format!(\"idem:{schema}\"));",
        to: "        config.application_name(\"idem\");",
        check: test("idem-store-postgres", "server-tests", "postgres", "the_pool_replaces_connect"),
    },
    Mutant {
        name: "pg-claim-takes-over-a-live-lease",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "OR (NOT {s}.claims.finished AND {s}.claims.lease_expires_at <= {now}",
        to: "OR (NOT {s}.claims.finished AND {s}.claims.lease_expires_at >= 0",
        check: test("idem-store-postgres", "server-tests", "postgres", "two_async_stores_racing"),
    },
    Mutant {
        name: "pg-async-full-store-never-sweeps",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "|| self.sweep_now().await? == 0 {",
        to: "|| true {",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::capacity_ref"),
    },
    Mutant {
        name: "pg-async-capacity-unchecked",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "        taken.within_capacity(config)?;\n",
        to: "",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::capacity_ref"),
    },
    Mutant {
        name: "pg-async-scope-quota-unchecked",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "if taken.needs_quota_check(config) {",
        to: "if false {",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::scope_quota"),
    },
    Mutant {
        name: "pg-async-result-limit-ignored",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "self.settings.result_bytes_max = max;",
        to: "let _ = max;",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_result_over_the_async_s"),
    },
    Mutant {
        name: "pg-async-callers-pool-name-unchecked",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "        check_schema_name(schema)?;\n",
        to: "",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_callers_pool_without_a_"),
    },
    Mutant {
        name: "pg-async-pool-errors-lose-the-servers-words",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "PoolError::Backend(error) | PoolError::PostCreateHook(HookError::Backend(error)) =>",
        to: "PoolError::PostCreateHook(HookError::Backend(error)) =>",
        check: test("idem-store-postgres", "server-tests", "postgres", "an_async_connect_to_an_un"),
    },
    Mutant {
        name: "pg-async-renew-reports-lost",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "rows::renewed(row, lease)",
        to: "rows::renewed(row.filter(|_| false), lease)",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::renew_extend"),
    },
    Mutant {
        name: "pg-async-release-ignores-the-fence",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "rows::settled(rows::deleted(&row), lease)",
        to: "rows::settled(rows::deleted(&row).max(1), lease)",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::unknown_leas"),
    },
    Mutant {
        name: "pg-release-keeps-the-count",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "    counted_delete_sql(\n        s,\n        &format!(\n            \
               \"DELETE FROM {s}.claims WHERE scope = $1 AND key = $2 AND token = $3",
        to: "    format!(\n        \"WITH gone AS ({}) SELECT COUNT(*) FROM gone\",\n        \
             format!(\n            \
             \"DELETE FROM {s}.claims WHERE scope = $1 AND key = $2 AND token = $3",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::capacity_ref"),
    },
    Mutant {
        name: "pg-sweep-keeps-the-count",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "UPDATE {s}.meta SET records = records - removed.n FROM removed",
        to: "UPDATE {s}.meta SET records = records - 0 * removed.n FROM removed",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::capacity_ref"),
    },
    Mutant {
        name: "pg-claim-counts-no-new-row",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "EXISTS (SELECT 1 FROM taken WHERE fresh)",
        to: "EXISTS (SELECT 1 FROM taken WHERE NOT fresh)",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::capacity_ref"),
    },
    Mutant {
        name: "pg-statement-timeout-an-hour",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);",
        to: "const STATEMENT_TIMEOUT: Duration = Duration::from_secs(3600);",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_blocked_statement_gives"),
    },
    Mutant {
        name: "pg-acquired-reads-as-recovered",
        file: "crates/idem-store-postgres/src/rows.rs",
        from: "if self.recovered { Claim::Recover(lease) } else { Claim::Acquired(lease) }",
        to: "if !self.recovered { Claim::Recover(lease) } else { Claim::Acquired(lease) }",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::claim_wait"),
    },
    Mutant {
        name: "pg-given-clock-ignored",
        file: "crates/idem-store-postgres/src/rows.rs",
        from: "            clock: StatementClock { clock },",
        to: "            clock: StatementClock { clock: None },",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::expired_leas"),
    },
    Mutant {
        name: "pg-async-complete-says-lost",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "let changed = client.execute(&complete,",
        to: "let changed = 2 * client.execute(&complete,",
        check: test("idem-store-postgres", "server-tests", "postgres", "async_store::acquire_comp"),
    },
    Mutant {
        name: "checkout-order-recorded-without-its-answer",
        file: "crates/idem-http/examples/checkout_server/orders.rs",
        from: "    orders.store.complete_in(&tx, lease, answer).await?;",
        to: "    drop(answer);",
        check: test("idem-http", "server-tests", "checkout_pg", ""),
    },
    Mutant {
        name: "checkout-server-body-never-times-out",
        file: "crates/idem-http/examples/checkout_server/serve.rs",
        from: "let router = router.layer(RequestBodyTimeoutLayer::new(limits.body_timeout));",
        to: "let router = router;",
        check: test("idem-http", "", "it", "sockets::a_half_sent_request"),
    },
    Mutant {
        name: "checkout-server-connections-one-past-the-bound",
        file: "crates/idem-http/examples/checkout_server/serve.rs",
        from: "Arc::new(Semaphore::new(limits.connections_max))",
        to: "Arc::new(Semaphore::new(limits.connections_max + 1))",
        check: test("idem-http", "", "it", "sockets::past_its_connection_bound"),
    },
    Mutant {
        name: "core-memory-result-ttl-says-the-lease",
        file: "crates/idem-core/src/memory.rs",
        from: "        self.config.result_ttl()\n",
        to: "        self.config.lease()\n",
        check: test("idem-core", "", "it", "conformance::acquire_complete_replay"),
    },
    Mutant {
        name: "http-expiry-past-the-year-9999-dated",
        file: "crates/idem-http/src/header.rs",
        from: "    (at <= last).then(|| httpdate::fmt_http_date(at))",
        to: "    Some(httpdate::fmt_http_date(at))",
        check: test("idem-http", "", "it", "features::a_kept_response"),
    },
    Mutant {
        name: "http-expiry-not-kept-for-replays",
        file: "crates/idem-http/src/layer.rs",
        from: "        if config.advertise_expiry && !config.replay_headers.contains(&expires) {",
        to: "        if false {",
        check: test("idem-http", "", "it", "features::a_kept_response"),
    },
    Mutant {
        name: "http-recovered-claim-released",
        file: "crates/idem-http/src/run.rs",
        from: "    if recovering {\n        // This run did nothing",
        to: "    if recovering && false {\n        // This run did nothing",
        check: test("idem-http", "", "it", "runs::a_recovered_claim"),
    },
    Mutant {
        name: "http-cut-stream-ends-as-if-whole",
        file: "crates/idem-http/src/body.rs",
        from: "                        Some(Err(\"the response ended before it was whole\".int\
               o()))",
        to: "                        None",
        check: test("idem-http", "", "it", "edges::a_body_panicking"),
    },
    Mutant {
        name: "http-json-numbers-as-floats",
        file: "crates/idem-http/Cargo.toml",
        from: "serde_json = { workspace = true, features = [\"arbitrary_precision\"] }",
        to: "serde_json = { workspace = true }",
        check: test("idem-http", "", "it", "features::a_json_meaning_compares"),
    },
    Mutant {
        name: "http-ended-runs-never-uncounted",
        file: "crates/idem-http/src/run.rs",
        from: "        (self.0).0.send_modify(|going| *going -= 1);",
        to: "        let _ = &self.0;",
        check: test("idem-http", "", "it", "runs::a_shutdown_can_wait"),
    },
    Mutant {
        name: "http-stalled-reader-waited-for-ever",
        file: "crates/idem-http/src/run.rs",
        from: "        let sent = tokio::time::timeout(self.stall, self.sender.send(item)).await;",
        to: "        let sent = Ok::<_, ()>(self.sender.send(item).await);",
        check: test("idem-http", "", "it", "runs::a_client_that_stops"),
    },
    Mutant {
        name: "http-claim-dropped-with-its-client",
        file: "crates/idem-http/src/layer.rs",
        from: "    let (lease, recovering, vouched) = match decide_detached(&state, scoped, \
               fingerprint).await {",
        to: "    let (lease, recovering, vouched) = match state.decide(scoped, fingerprint).await \
             {",
        check: test("idem-http", "", "it", "runs::a_client_that_leaves_during"),
    },
    Mutant {
        name: "http-claim-of-a-gone-client-kept",
        file: "crates/idem-http/src/layer.rs",
        from: "        if let Err(Decision::Run(lease, false, _)) = decided.send(claimed) {",
        to: "        if let Err(Decision::Run(lease, true, _)) = decided.send(claimed) {",
        check: test("idem-http", "", "it", "runs::a_client_that_leaves_during"),
    },
    Mutant {
        name: "http-renewal-not-a-task-of-its-own",
        file: "crates/idem-http/src/run.rs",
        from: "    let renewal = tokio::spawn(keep_renewing(state.clone(), renewal));\n    \
               let stop = StopRenewing(renewal.abort_handle());",
        to: "    let stop = StopRenewing(tokio::spawn(async {}).abort_handle());",
        check: test("idem-http", "", "it", "runs::a_handler_that_blocks"),
    },
    Mutant {
        name: "checkout-retry-never-waits-for-the-first",
        file: "crates/idem-http/examples/checkout_server/app.rs",
        from: "        .wait_for_first(Some(Duration::from_secs(10)))",
        to: "        .wait_for_first(None)",
        check: test("idem-http", "", "it", "sockets::a_client_that_leaves_mid_handler"),
    },
    Mutant {
        name: "http-body-left-out-of-the-fingerprint",
        file: "crates/idem-http/src/layer.rs",
        from: "        return Ok(builder.bytes(\"body-sha256\", body_sha256).finish());",
        to: "        return Ok(builder.finish());",
        check: test("idem-http", "", "it", "features::by_default"),
    },
    Mutant {
        name: "http-missed-frames-end-as-if-whole",
        file: "crates/idem-http/src/run.rs",
        from: "            let end = if whole {",
        to: "            let end = if whole || true {",
        check: test("idem-http", "", "it", "runs::a_client_that_missed"),
    },
    Mutant {
        name: "sim-store-hash-unseeded",
        file: "crates/idem-core/src/memory.rs",
        from: "store.hasher = foldhash::fast::SeedableRandomState::with_seed(seed, &SHARED);",
        to: "store.hasher = foldhash::fast::SeedableRandomState::random();",
        check: test("idem-core", "", "it", "lagging::a_simulated_store_places_keys_by_its_seed"),
    },
    Mutant {
        // The same break as payments-recover-charges-blindly, found by the worlds: a
        // recovery after a lost answer charges again (found in 3 seeds when measured).
        name: "sim-finds-a-recovery-that-charges-blindly",
        file: "crates/idem-payments/src/processor.rs",
        from: "        match self.settle_from_lookup(scoped, request, lease)? {",
        to: "        match None::<PaymentOutcome> {",
        check: Check::Sim { seeds: 200 },
    },
    Mutant {
        name: "http-handler-outlives-its-lease",
        file: "crates/idem-http/src/run.rs",
        from: "            if doubt.poll_due(cx).is_ready() {",
        to: "            if false {",
        check: test("idem-http", "", "it", "runs::"),
    },
    Mutant {
        name: "sim-finds-a-handler-that-outlives-its-lease",
        file: "crates/idem-http/src/run.rs",
        from: "            if doubt.poll_due(cx).is_ready() {",
        to: "            if false {",
        check: Check::Sim { seeds: 1_000 },
    },
    Mutant {
        name: "http-lease-in-doubt-after-a-whole-lease",
        file: "crates/idem-http/src/run.rs",
        from: "    lease.min(FAR_FUTURE) * 3 / 8\n}",
        to: "    lease.min(FAR_FUTURE)\n}",
        check: test("idem-http", "", "it", "runs::a_handler_cut_from_its_store"),
    },
    Mutant {
        name: "http-waited-claim-not-vouched-afresh",
        file: "crates/idem-http/src/layer.rs",
        from: "            Ok(Ok(renewed)) => return Decision::Run(renewed, recovering, sent),",
        to: "            Ok(Ok(_)) => return Decision::Answer(claim_failed()),",
        check: test("idem-http", "", "it", "runs::a_claim_won_after_a_long_wait"),
    },
    Mutant {
        name: "http-failed-renewal-waits-a-whole-period",
        file: "crates/idem-http/src/run.rs",
        from: "                next = later(tokio::time::Instant::now(), again);",
        to: "                next = later(tokio::time::Instant::now(), every + again - again);",
        check: test("idem-http", "", "it", "runs::a_failed_renewal_tried_again"),
    },
    Mutant {
        name: "http-renewal-vouches-from-its-answer",
        file: "crates/idem-http/src/run.rs",
        from: "                vouch.send_modify(|at| *at = at.map(|at| at.max(sent)));",
        to: "                vouch.send_modify(|at| *at = at.map(|at| at.max(\
             tokio::time::Instant::now())));",
        check: test("idem-http", "", "it", "runs::a_late_renewal_answer"),
    },
    Mutant {
        name: "http-renewal-vouches-nothing",
        file: "crates/idem-http/src/run.rs",
        from: "                vouch.send_modify(|at| *at = at.map(|at| at.max(sent)));",
        to: "                let _ = sent;",
        check: test("idem-http", "", "it", "runs::a_handler_three_times_slower"),
    },
    Mutant {
        name: "sim-check-misses-a-leak",
        file: "crates/idem-sim/src/check.rs",
        from: "        if let Told::Leaked { status } = t {",
        to: "        if let Told::Leaked { status } = t && false {",
        check: test("idem-sim", "", "lib", "error_text"),
    },
    Mutant {
        name: "sim-check-misses-a-reused-key-answered",
        file: "crates/idem-sim/src/check.rs",
        from: "        if let Told::ReusedAnswered { status, charge } = t {",
        to: "        if let Told::ReusedAnswered { status, charge } = t && false {",
        check: test("idem-sim", "", "lib", "reused"),
    },
    Mutant {
        name: "sim-check-misses-a-second-charge",
        file: "crates/idem-sim/src/check.rs",
        from: "    if charges > 1 {",
        to: "    if charges > 2 {",
        check: test("idem-sim", "", "lib", "second_charge"),
    },
    Mutant {
        name: "sim-check-misses-a-broken-answer",
        file: "crates/idem-sim/src/check.rs",
        from: "        if let Told::Broken { why } = t {",
        to: "        if let Told::Broken { why } = t && false {",
        check: test("idem-sim", "", "lib", "a_broken_answer"),
    },
    Mutant {
        name: "sim-check-misses-a-breach-of-the-store-contract",
        file: "crates/idem-sim/src/check.rs",
        from: "    for breach in lock(&shared.breaches).iter() {",
        to: "    for breach in lock(&shared.breaches).iter().take(0) {",
        check: test("idem-sim", "", "lib", "a_broken_answer"),
    },
    Mutant {
        name: "sim-check-takes-a-stand-in-without-a-charge",
        file: "crates/idem-sim/src/check.rs",
        from: "    if stood_in && charges == 0 {",
        to: "    if false {",
        check: test("idem-sim", "", "lib", "a_stand_in_answers"),
    },
    Mutant {
        name: "sim-receipt-cut-taken-for-whole",
        file: "crates/idem-sim/src/receipt.rs",
        from: "    if types[0] != \"application/json\" || body.len() != bytes || \
               !body.ends_with(RECEIPT_END) {",
        to: "    if types[0] != \"application/json\" {",
        check: test("idem-sim", "", "lib", "receipt::"),
    },
    Mutant {
        name: "sim-receipt-stand-in-that-fits-taken",
        file: "crates/idem-sim/src/receipt.rs",
        from: "        if bytes <= RECEIPT_BODY_MAX && whole <= RECEIPT_STORE_MAX {",
        to: "        if false {",
        check: test("idem-sim", "", "lib", "receipt::"),
    },
    Mutant {
        name: "sim-receipt-replayed-whole-over-the-limit-taken",
        file: "crates/idem-sim/src/receipt.rs",
        from: "    if replayed && bytes > RECEIPT_BODY_MAX {",
        to: "    if false {",
        check: test("idem-sim", "", "lib", "receipt::"),
    },
    Mutant {
        name: "sim-receipt-stand-in-as-first-answer-taken",
        file: "crates/idem-sim/src/receipt.rs",
        from: "        if !replayed {",
        to: "        if false {",
        check: test("idem-sim", "", "lib", "receipt::"),
    },
    Mutant {
        name: "sim-receipt-order-not-padded-to-its-size",
        file: "crates/idem-sim/src/receipt.rs",
        from: "        let pad = len.saturating_sub(body.len() + frame.len());",
        to: "        let pad = len.saturating_sub(body.len());",
        check: test("idem-sim", "", "lib", "receipt::"),
    },
    Mutant {
        name: "sim-receipt-stand-in-types-unread",
        file: "crates/idem-sim/src/receipt.rs",
        from: "    if types.len() != 1 {",
        to: "    if false {",
        check: test("idem-sim", "", "lib", "receipt::"),
    },
    Mutant {
        name: "sim-finds-a-stand-in-for-a-receipt-that-fits",
        file: "crates/idem-http/src/run.rs",
        from: "if read.len() > limit {",
        to: "if read.len() >= limit {",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-result-larger-than-the-store-keeps",
        file: "crates/idem-http/src/layer.rs",
        from: "        Some(body) if fits_store(STORED_ENVELOPE_BYTES + header_bytes + \
               body.len()) => {",
        to: "        Some(body) if true => {",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-request-at-the-body-limit-refused",
        file: "crates/idem-http/src/layer.rs",
        from: "is_some_and(|len| len > max as u64)",
        to: "is_some_and(|len| len >= max as u64)",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-chunked-request-over-the-limit-run",
        file: "crates/idem-http/src/layer.rs",
        from: "if read.len() + data.len() > max {",
        to: "if data.len() > max {",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-quota-place-a-release-keeps",
        file: "crates/idem-core/src/memory.rs",
        from: "        self.scope_settled(lease.key());\n        match outcome {",
        to: "        if outcome.is_some() {\n            \
             self.scope_settled(lease.key());\n        }\n        match outcome {",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-quota-place-a-completion-keeps",
        file: "crates/idem-core/src/memory.rs",
        from: "        self.scope_settled(lease.key());\n        match outcome {",
        to: "        if outcome.is_none() {\n            \
             self.scope_settled(lease.key());\n        }\n        match outcome {",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-pending-claim-the-operator-shows-in-flight",
        file: "crates/idem-http/src/operator.rs",
        from: "(\"pending\", \"lease_expired_at\", lease_expired_at)",
        to: "(\"in_flight\", \"lease_expired_at\", lease_expired_at)",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-the-store-error-an-operator-lookup-shows",
        file: "crates/idem-http/src/operator.rs",
        from: "        OperatorError::Store(_) => Problem::new(",
        to: "        OperatorError::Store(_) if false => Problem::new(",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-world-task-ids-unaligned",
        file: "crates/idem-sim/src/world.rs",
        from: "    align_task_ids();\n",
        to: "",
        check: test("idem-sim", "", "worlds", "the_same_seed"),
    },
    Mutant {
        name: "sim-steady-world-recovery-unchecked",
        file: "crates/idem-sim/src/check.rs",
        from: "    if shared.plan.steady && !recovered.is_empty() {",
        to: "    if shared.plan.steady && recovered.is_empty() && false {",
        check: test("idem-sim", "", "lib", "check::tests::a_recovery"),
    },
    Mutant {
        name: "sim-finds-an-orphan-cancelled-with-its-client",
        file: "crates/idem-http/src/run.rs",
        from: "        _ = gone => {}",
        to: "        _ = gone => return,",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-an-effect-free-status-kept",
        file: "crates/idem-http/src/run.rs",
        from: "let effect_free = state.config.effect_free.contains(parts.status);",
        to: "let effect_free = false;",
        check: Check::Sim { seeds: 200 },
    },
    Mutant {
        name: "sim-finds-a-replay-the-hook-never-saw",
        file: "crates/idem-http/src/layer.rs",
        from: "AssertUnwindSafe(|| (hook.0)(request, &mut parts))",
        to: "AssertUnwindSafe(|| { let _ = (&hook, request, &parts); })",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-replay-without-its-expiry",
        file: "crates/idem-http/src/layer.rs",
        from: "        if config.advertise_expiry && !config.replay_headers.contains(&expires) {",
        to: "        if false {",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-receipt-replay-the-hook-missed-taken",
        file: "crates/idem-sim/src/receipt.rs",
        from: "    if replayed && headers.get(REPLAY_HOOK_HEADER).is_none() {",
        to: "    if false {",
        check: test("idem-sim", "", "lib", "receipt::"),
    },
    Mutant {
        name: "sim-finds-a-retry-whose-ignored-field-changed-refused",
        file: "crates/idem-http/src/meaning.rs",
        from: ".filter(|(name, _)| !self.ignored.contains(name))",
        to: ".filter(|_| true)",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-finds-a-failed-receipt-released",
        file: "crates/idem-http/src/run.rs",
        from: "        Err(error) => {\n            body_failed(state, error);",
        to: "        Err(error) => {\n            let _ = state.store.release(lease).await;\n\
             \x20           body_failed(state, error);",
        check: Check::Sim { seeds: 300 },
    },
    Mutant {
        name: "sim-check-misses-two-charges-answered",
        file: "crates/idem-sim/src/check.rs",
        from: "if charged.iter().any(|(charge, _)| *charge != first) {",
        to: "if charged.iter().all(|(charge, _)| *charge != first) {",
        check: test("idem-sim", "", "lib", "second_charge"),
    },
    Mutant {
        name: "sim-check-trusts-the-answer",
        file: "crates/idem-sim/src/check.rs",
        from: "            if charge.id.to_string() != *first || shown != *amount {",
        to: "            if false {",
        check: test("idem-sim", "", "lib", "did_not_make"),
    },
    Mutant {
        name: "sim-check-misses-a-claim-left-in-flight",
        file: "crates/idem-sim/src/check.rs",
        from: "        Ok(pending) if pending.is_empty() => {}",
        to: "        Ok(_) => {}",
        check: test("idem-sim", "", "lib", "left_in_flight"),
    },
    Mutant {
        name: "sim-check-misses-tokens-that-do-not-grow",
        file: "crates/idem-sim/src/check.rs",
        from: "if tokens.windows(2).any(|pair| pair[1] <= pair[0]) {",
        to: "if tokens.windows(2).any(|pair| pair[1] < pair[0]) {",
        check: test("idem-sim", "", "lib", "left_in_flight"),
    },
    Mutant {
        name: "sim-check-misses-an-unanswered-intent",
        file: "crates/idem-sim/src/check.rs",
        from: "    if charged.is_empty() && !declined && !stood_in {",
        to: "    if charged.is_empty() && declined && !stood_in {",
        check: test("idem-sim", "", "lib", "left_in_flight"),
    },
    Mutant {
        name: "demo-check-takes-a-repeat-answered-anew",
        file: "xtask/src/demo.rs",
        from: "    if row.repeats == 0 || row.same != row.repeats {",
        to: "    if row.repeats == 0 {",
        check: test("xtask", "", "bin", "demo::tests::a_row_proves"),
    },
    Mutant {
        name: "demo-check-takes-a-storm-without-harm",
        file: "xtask/src/demo.rs",
        from: "    if row.naive <= expected {",
        to: "    if row.naive < expected {",
        check: test("xtask", "", "bin", "demo::tests::a_row_without_harm"),
    },
    Mutant {
        name: "bench-criterion-run-starts-the-instruction-counts",
        file: "xtask/src/bench.rs",
        from: ".filter(|b| b != \"instructions\")",
        to: ".filter(|b| !b.is_empty())",
        check: test("xtask", "", "bin", "bench::tests::criterion_runs_every"),
    },
    Mutant {
        name: "bench-counts-read-the-previous-run",
        file: "xtask/src/bench.rs",
        from: "let number = rest.trim().split('|').next().unwrap_or(\"\").trim();",
        to: "let number = rest.trim().split('|').last().unwrap_or(\"\").trim();",
        check: test("xtask", "", "bin", "bench::tests::counts_are_read"),
    },
    Mutant {
        name: "bench-runner-version-not-the-library-s",
        file: "xtask/src/bench.rs",
        from: "const GUNGRAUN_VERSION: &str = \"0.20.0\";",
        to: "const GUNGRAUN_VERSION: &str = \"0.19.0\";",
        check: test("xtask", "", "bin", "bench::tests::the_runner_s_version"),
    },
    Mutant {
        name: "bench-counts-keep-the-case-s-arguments",
        file: "xtask/src/bench.rs",
        from: "current = Some((function.to_string(), case.to_string()));",
        to: "current = Some((function.to_string(), line.to_string()));",
        check: test("xtask", "", "bin", "bench::tests::counts_are_read"),
    },
    Mutant {
        name: "storm-answers-take-any-repeat-as-the-original",
        file: "crates/idem-testkit/src/storm.rs",
        from: "            if original == hash {",
        to: "            if original != 0 {",
        check: test("idem-testkit", "", "lib", "answers_count_repeats"),
    },
    Mutant {
        name: "storm-answers-take-every-intent-as-answered",
        file: "crates/idem-testkit/src/storm.rs",
        from: "self.slot(intent).is_some_and(|s| s.load(Relaxed) != 0)",
        to: "self.slot(intent).is_some()",
        check: test("idem-testkit", "", "lib", "answers_count_repeats"),
    },
    Mutant {
        name: "http-replay-headers-drop-the-content-type",
        file: "crates/idem-http/src/config.rs",
        from: "replay_headers: vec![http::header::CONTENT_TYPE, http::header::LOCATION],",
        to: "replay_headers: vec![http::header::LOCATION],",
        check: Check::Demo { storm: "idem-http" },
    },
    Mutant {
        name: "demo-storm-time-never-enforced",
        file: "xtask/src/demo.rs",
        from: "        if started.elapsed() > limit {",
        to: "        if started.elapsed() > limit && false {",
        check: test("xtask", "", "bin", "demo::tests::a_storm_past"),
    },
    Mutant {
        name: "demo-check-takes-a-storm-that-retried-nothing",
        file: "xtask/src/demo.rs",
        from: "    if row.attempts <= row.intents {\n",
        to: "    if row.attempts < row.intents {\n",
        check: test("xtask", "", "bin", "demo::tests"),
    },
    Mutant {
        name: "pool-stale-loan-release-uncounted",
        file: "crates/idem-pool/src/pool.rs",
        from: "            state.counters.stale_releases += 1;\n            drop(state);\n",
        to: "            drop(state);\n",
        check: Check::Demo { storm: "idem-pool" },
    },
    Mutant {
        name: "pool-demo-finds-a-stale-release-of-a-parked-loan",
        file: "crates/idem-pool/src/pool.rs",
        from: "if word.generation != generation {",
        to: "if false {",
        check: Check::Demo { storm: "idem-pool" },
    },
    Mutant {
        name: "pool-release-of-a-loan-whose-slot-is-idle-taken",
        file: "crates/idem-pool/src/pool.rs",
        from: "        if word.phase != Phase::Parked {",
        to: "        if !matches!(word.phase, Phase::Parked | Phase::Idle) {",
        check: test("idem-pool", "", "it", "behaviour::stale_loan_after_relend"),
    },
    Mutant {
        name: "future-lists-never-freed",
        file: "crates/idem-future/src/promise.rs",
        from: "            free_lists(lists);",
        to: "            mem::forget(lists);",
        check: Check::Loom { package: "idem-future", model: "" },
    },
    Mutant {
        name: "future-replaced-waker-dropped-under-the-lock",
        file: "crates/idem-future/src/promise.rs",
        from: "        drop(guard);\n        drop(replaced);\n        false\n",
        to: "        drop(replaced);\n        drop(guard);\n        false\n",
        check: test("idem-future", "", "it", "reentry::a_waker_dropped_by_a_repoll"),
    },
    Mutant {
        name: "future-forgotten-waker-dropped-under-the-lock",
        file: "crates/idem-future/src/promise.rs",
        from: "    drop(guard);\n    drop(forgotten);\n",
        to: "    drop(forgotten);\n    drop(guard);\n",
        check: test("idem-future", "", "it", "reentry::a_waker_dropped_by_forgetting"),
    },
    Mutant {
        name: "future-owner-waker-panic-skips-the-rest",
        file: "crates/idem-future/src/promise.rs",
        from: "        caught(&mut first_panic, || self.slot.wake_owner(claimed));",
        to: "        self.slot.wake_owner(claimed);",
        check: test("idem-future", "", "it", "reentry::a_panicking_owner_waker"),
    },
    Mutant {
        name: "future-reader-waker-panic-skips-the-rest",
        file: "crates/idem-future/src/promise.rs",
        from: "        caught(first_panic, || waker.wake());",
        to: "        waker.wake();",
        check: test("idem-future", "", "it", "reentry::a_panicking_reader_waker"),
    },
    Mutant {
        name: "future-watcher-panic-keeps-the-handle",
        file: "crates/idem-future/src/cell.rs",
        from: "served = panic::catch_unwind(AssertUnwindSafe(|| {\n                        \
               allocation.rest.last_reader_gone();\n                    }));",
        to: "allocation.rest.last_reader_gone();",
        check: test("idem-future", "", "it", "reentry::a_panicking_closed_waker"),
    },
    Mutant {
        name: "notify-queued-lease-never-checked",
        file: "crates/idem-notify/src/notifier.rs",
        from: "    if state.config.clock().now().saturating_add(half) < lease.expires_at() {",
        to: "    if true || state.config.clock().now().saturating_add(half) < lease.expires_at() {",
        check: test("idem-notify", "", "it", "hostile::a_message_queued_past_its_lease"),
    },
    Mutant {
        name: "notify-provider-panic-not-caught",
        file: "crates/idem-notify/src/notifier.rs",
        from: "panic::catch_unwind(AssertUnwindSafe(|| state.provider.send(n))).unwrap_or_else(",
        to: "Ok::<_, Box<dyn std::any::Any + Send>>(state.provider.send(n)).unwrap_or_else(",
        check: test("idem-notify", "", "it", "hostile::a_panicking_provider"),
    },
    Mutant {
        name: "notify-recovery-taken-as-may-have-delivered",
        file: "crates/idem-notify/src/notifier.rs",
        from: "may_have_delivered: false, last:",
        to: "may_have_delivered: job.recovering && resend, last:",
        check: test(
            "idem-notify",
            "",
            "it",
            "behaviour::a_recovery_the_provider_says_was_not_delivered",
        ),
    },
    Mutant {
        name: "notify-second-shutdown-reports-early",
        file: "crates/idem-notify/src/notifier.rs",
        from: "for worker in std::mem::take(&mut *workers) {",
        to: "let taken = std::mem::take(&mut *workers);\n        drop(workers);\n        \
             for worker in taken {",
        check: test("idem-notify", "", "it", "hostile::a_second_shutdown"),
    },
    Mutant {
        name: "notify-worker-joins-itself",
        file: "crates/idem-notify/src/notifier.rs",
        from: "        if self.worker_threads.contains(&std::thread::current().id()) {",
        to: "        if false {",
        check: test("idem-notify", "", "it", "hostile::a_notifier_dropped_by_its_own_worker"),
    },
    Mutant {
        name: "notify-retry-started-past-the-deadline",
        file: "crates/idem-notify/src/notifier.rs",
        from: "            if past_deadline(state, pause) {",
        to: "            if false && past_deadline(state, pause) {",
        check: test("idem-notify", "", "it", "hostile::a_retry_whose_pause_outlasts"),
    },
    Mutant {
        name: "notify-stored-dead-letter-reason-uncut",
        file: "crates/idem-notify/src/notifier.rs",
        from: "        let kept = kept_reason(&reason, state.store.result_bytes_max());",
        to: "        let kept = reason.clone();",
        check: test("idem-notify", "", "it", "hostile::a_final_dead_letter_whose_reason"),
    },
    Mutant {
        name: "pool-panicking-manager-call-keeps-its-slot",
        file: "crates/idem-pool/src/pool.rs",
        from: "            state.counters.discarded += 1;\n        }\n        \
               state.give_free(&self.shelf, claim);\n    }",
        to: "            state.counters.discarded += 1;\n        }\n        drop(claim);\n    }",
        check: test("idem-pool", "", "it", "hostile::a_connect_that_panics"),
    },
    Mutant {
        name: "pool-maintenance-panic-ends-maintenance",
        file: "crates/idem-pool/src/pool.rs",
        from: "if panic::catch_unwind(AssertUnwindSafe(|| lender.maintain())).is_err() {",
        to: "if { lender.maintain(); false } {",
        check: test("idem-pool", "", "it", "hostile::a_maintenance_round"),
    },
    Mutant {
        name: "pool-replaced-error-dropped-under-the-lock",
        file: "crates/idem-pool/src/pool.rs",
        from: "let replaced = Self::connect_failed(&mut state, error);\n                \
               drop(state);\n",
        to: "let replaced = Self::connect_failed(&mut state, error);\n",
        check: test("idem-pool", "", "it", "hostile::an_error_whose_drop"),
    },
    Mutant {
        name: "pool-handoff-lends-past-its-lifetime",
        file: "crates/idem-pool/src/pool.rs",
        from: "if self.expired(&held, now) {\n                    // Handed on past",
        to: "if false {\n                    // Handed on past",
        check: test("idem-pool", "", "it", "hostile::a_connection_handed_on"),
    },
    Mutant {
        name: "pool-grant-spends-a-woken-waiters-wake",
        file: "crates/idem-pool/src/state.rs",
        from: "if was_woken {\n                    self.pass_on_wake(shelf);\n                \
               }\n            }\n            None => {\n                let slot",
        to: "}\n            None => {\n                let slot",
        check: test("idem-pool", "", "lib", "state::tests::a_grant_to"),
    },
    Mutant {
        name: "payments-reconcile-takes-another-merchants-claims",
        file: "crates/idem-payments/src/processor.rs",
        from: "if !self.owns(&claim.key) {",
        to: "if false && !self.owns(&claim.key) {",
        check: test("idem-payments", "", "it", "tenants::reconcile_leaves"),
    },
    Mutant {
        name: "payments-lookup-panic-stops-the-batch",
        file: "crates/idem-payments/src/processor.rs",
        from: "panic::catch_unwind(AssertUnwindSafe(|| self.gateway.lookup(&gateway_key)));",
        to: "Ok::<_, Box<dyn std::any::Any + Send>>(self.gateway.lookup(&gateway_key));",
        check: test("idem-payments", "", "it", "tenants::a_lookup_that_panics"),
    },
    Mutant {
        name: "http-run-timers-overflow-on-a-huge-lease",
        file: "crates/idem-http/src/run.rs",
        from: "    lease.min(FAR_FUTURE) * 3 / 8",
        to: "    lease * 3 / 8",
        check: test("idem-http", "", "it", "limits::a_store_whose_leases"),
    },
    Mutant {
        name: "http-scope-panic-ends-the-connection",
        file: "crates/idem-http/src/layer.rs",
        from: "match panic::catch_unwind(AssertUnwindSafe(|| (state.scope)(parts))) {",
        to: "match Ok::<_, ()>((state.scope)(parts)) {",
        check: test("idem-http", "", "it", "limits::a_scope_function_that_panics"),
    },
    Mutant {
        name: "notify-zero-seed-stands-for-one",
        file: "crates/idem-notify/src/retry.rs",
        from: "Self(if seed == 0 { ZERO_SEED_STANDS_FOR } else { seed })",
        to: "Self(if seed == 0 { ZERO_SEED_STANDS_FOR.min(1) } else { seed })",
        check: test("idem-notify", "", "lib", "retry::tests::neighbouring_seeds"),
    },
    Mutant {
        name: "notify-shutdown-gives-back-a-recovered-id-never-asked",
        file: "crates/idem-notify/src/notifier.rs",
        from: "    if job.recovering {\n        state.left.lock().push(",
        to: "    if job.recovering && false {\n        state.left.lock().push(",
        check: test("idem-notify", "", "it", "hostile::a_recovering_job_the_shutdown_never"),
    },
    Mutant {
        name: "demo-only-takes-any-name",
        file: "xtask/src/demo.rs",
        from: "    if !crates.iter().any(|c| c == name) {",
        to: "    if false {",
        check: test("xtask", "", "bin", "demo::tests::only_names"),
    },
    Mutant {
        name: "wallet-log-opened-twice",
        file: "crates/idem-wallet/src/durable/mod.rs",
        from: "        file.try_lock().map_err(|e| match e {",
        to: "        Ok::<(), std::fs::TryLockError>(()).map_err(|e| match e {",
        check: test("idem-wallet", "", "it", "durable::a_log_open_in_one_wallet"),
    },
    Mutant {
        name: "wallet-torn-payload-searched-for-records",
        file: "crates/idem-wallet/src/durable/recovery.rs",
        from: "    let from = from.unwrap_or(at + 1).min(bytes.len());",
        to: "    let from = from.map_or(at + 1, |_| at + 1).min(bytes.len());",
        check: test("idem-wallet", "", "it", "durable::a_torn_append_whose_payload"),
    },
    Mutant {
        name: "wallet-second-cut-overwrites-the-first-side-file",
        file: "crates/idem-wallet/src/durable/mod.rs",
        from: "OpenOptions::new().write(true).create_new(true).open(&saved_to)",
        to: "OpenOptions::new().write(true).create(true).truncate(true).open(&saved_to)",
        check: test("idem-wallet", "", "it", "durable::cuts_at_one_offset"),
    },
    Mutant {
        name: "client-outer-retry-gets-a-new-intent",
        file: "crates/idem-client/src/reqwest.rs",
        from: "let intent = extensions.get_or_insert_with(Intent::new).clone();",
        to: "let intent = extensions.get::<Intent>().cloned().unwrap_or_default();",
        check: test("idem-client", "", "sockets", "an_outer_retry_of_a_call"),
    },
    Mutant {
        name: "client-unfollowed-redirect-called-unsendable",
        file: "crates/idem-client/src/reqwest.rs",
        from: "if e.is_builder() && e.url().is_none_or(|url| *url == own_url) =>",
        to: "if e.is_builder() && e.url().is_none_or(|url| *url != own_url) =>",
        check: test("idem-client", "", "sockets", "an_answer_the_client_cannot_follow"),
    },
    Mutant {
        name: "client-pause-ends-at-the-deadline",
        file: "crates/idem-client/src/retry.rs",
        from: "if tokio::time::Instant::now() + pause + TIMER_SLACK >= deadline {",
        to: "if tokio::time::Instant::now() + pause + TIMER_SLACK * 0 >= deadline {",
        check: test("idem-client", "", "policy", "a_pause_that_ends_at_the_deadline"),
    },
    Mutant {
        name: "client-own-key-named-as-sent",
        file: "crates/idem-client/src/intent.rs",
        from: ".and_then(|text| idem_core::key_text_of_header(text).ok())",
        to: ".map(str::to_string)",
        check: test("idem-client", "", "policy", "the_key_an_error_names"),
    },
    Mutant {
        name: "core-quoted-key-takes-any-escape",
        file: "crates/idem-core/src/key.rs",
        from: "                Some(c @ ('\"' | '\\\\')) => key.push(c),",
        to: "                Some(c) => key.push(c),",
        check: test("idem-http", "", "it", "header::"),
    },
    Mutant {
        name: "durable-gave-up-callers-pile-up",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        waiting.retain(|caller| !caller.is_closed());",
        to: "        waiting.retain(|caller| !caller.is_closed() || true);",
        check: test("idem-durable", "", "it", "submit_async::callers_that_give_up"),
    },
    Mutant {
        name: "durable-jobs-after-a-panic-answered-stopped",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        for job in self.0.by_ref() {\n            job(None)(Err(&panicked));",
        to: "        for job in self.0.by_ref() {\n            drop((job, &panicked));",
        check: test("idem-durable", "", "it", "submit_async::the_jobs_after_a_panicking"),
    },
    Mutant {
        name: "durable-queue-past-its-limit-allocated",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        if limits.queue_max > GroupLimits::QUEUE_MAX_LIMIT {",
        to: "        if limits.queue_max > usize::MAX - 1 {",
        check: test("idem-durable", "", "it", "group_commit::a_queue_past_its_limit"),
    },
    Mutant {
        name: "durable-nul-in-the-writers-name-panics",
        file: "crates/idem-durable/src/group_commit.rs",
        from: "        if name.contains('\\0') {",
        to: "        if name.is_empty() {",
        check: test("idem-durable", "", "it", "group_commit::a_queue_past_its_limit"),
    },
    Mutant {
        name: "sqlite-op-behind-a-rolled-back-group-run-alone",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: "        if self.conn.is_autocommit() {\n            // An earlier operation's",
        to: "        if false {\n            // An earlier operation's",
        check: test("idem-store-sqlite", "", "lib", "tests::an_operation_behind_one_that"),
    },
    Mutant {
        name: "sqlite-clock-past-its-range-taken",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: "    if now.as_millis() > CLOCK_MS_MAX {",
        to: "    if now.as_millis() > u64::MAX - 1 {",
        check: test("idem-store-sqlite", "", "lib", "tests::a_clock_past_what"),
    },
    Mutant {
        name: "sqlite-capacity-before-the-quota",
        file: "crates/idem-store-sqlite/src/lib.rs",
        from: "    if recovered == 0 {\n        scope_quota(conn, key, config)?;\n    }\n",
        to: "    if fresh == 1 && records >= config.capacity() as i64 {\n\
             \x20       return Err(StoreError::StoreFull { capacity: config.capacity() });\n\
             \x20   }\n\
             \x20   if recovered == 0 {\n        scope_quota(conn, key, config)?;\n    }\n",
        check: test("idem-store-sqlite", "", "it", "scope_quota_is_judged"),
    },
    Mutant {
        name: "redis-calls-bounded-by-one-reply-only",
        file: "crates/idem-store-redis/src/store.rs",
        from: "    match tokio::time::timeout(limit, call).await {",
        to: "    match tokio::time::timeout(Duration::MAX, call).await {",
        check: test("idem-store-redis", "server-tests", "redis", "a_call_to_a_server_gone"),
    },
    Mutant {
        name: "redis-token-base-from-the-given-clock",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "or clock('server') * 1000",
        to: "or now * 1000",
        check: test("idem-store-redis", "server-tests", "redis", "tokens_grow_after_a_drop"),
    },
    Mutant {
        name: "redis-capacity-before-the-quota",
        file: "crates/idem-store-redis/src/scripts.rs",
        from: "  local quota = tonumber(ARGV[4])\n",
        to: "  local n = redis.call('ZCARD', KEYS[2]) + redis.call('ZCARD', KEYS[3])\n\
             \x20 if not replaced and n >= tonumber(ARGV[3]) then return {'full'} end\n\
             \x20 local quota = tonumber(ARGV[4])\n",
        check: test("idem-store-redis", "server-tests", "redis", "scope_quota_is_judged"),
    },
    Mutant {
        name: "redis-result-limit-past-the-servers-taken",
        file: "crates/idem-store-redis/src/server.rs",
        from: "    if value_max > bulk_max {",
        to: "    if result_bytes_max as u64 > bulk_max {",
        check: test("idem-store-redis", "server-tests", "redis", "a_result_limit_past"),
    },
    Mutant {
        name: "pg-capacity-before-the-quota",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "(and the async store).\n            let mut taken = Taken::read(&row);\n",
        to: "(and the async store).\n            let mut taken = Taken::read(&row);\n\
             \x20           taken.within_capacity(config)?;\n",
        check: test("idem-store-postgres", "server-tests", "postgres", "scope_quota_is_judg"),
    },
    Mutant {
        name: "pg-async-capacity-before-the-quota",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "        let mut taken = Taken::read(&row);\n        if \
               taken.needs_quota_check(config)",
        to: "        let mut taken = Taken::read(&row);\n        taken.within_capacity(config)?;\n\
             \x20       if taken.needs_quota_check(config)",
        check: test("idem-store-postgres", "server-tests", "postgres", "scope_quota_is_judg"),
    },
    Mutant {
        name: "http-nested-route-fingerprinted-by-its-stripped-path",
        file: "crates/idem-http/src/layer.rs",
        from: "parts.extensions.get::<axum::extract::OriginalUri>() {",
        to: "parts.extensions.get::<axum::extract::OriginalUri>().filter(|_| false) {",
        check: test("idem-http", "", "it", "routes::a_key_sent_to_another_nested"),
    },
    Mutant {
        name: "http-replay-header-listed-twice-kept-twice",
        file: "crates/idem-http/src/config.rs",
        from: "            if !kept.contains(&name) {",
        to: "            if kept.len() < usize::MAX {",
        check: test("idem-http", "", "it", "routes::a_header_listed_twice"),
    },
    Mutant {
        name: "http-meaning-panic-not-caught",
        file: "crates/idem-http/src/layer.rs",
        from: "catch_unwind(AssertUnwindSafe(|| meaning.0.meaning(parts, body)))\n\
             \x20       .map_err(|_| meaning_panicked())?;",
        to: "catch_unwind(AssertUnwindSafe(|| meaning.0.meaning(parts, body)))\n\
             \x20       .unwrap_or_else(|p| std::panic::resume_unwind(p));",
        check: test("idem-http", "", "it", "routes::a_meaning_or_a_replay_hook"),
    },
    Mutant {
        name: "http-replay-hook-panic-not-caught",
        file: "crates/idem-http/src/layer.rs",
        from: "    if panic::catch_unwind(AssertUnwindSafe(|| (hook.0)(request, &mut parts)))",
        to: "    if Ok::<(), ()>((hook.0)(request, &mut parts))",
        check: test("idem-http", "", "it", "routes::a_meaning_or_a_replay_hook"),
    },
    Mutant {
        name: "http-operator-dates-past-the-year-9999",
        file: "crates/idem-http/src/operator.rs",
        from: "date.and_then(crate::header::http_date).map_or(",
        to: "date.map(httpdate::fmt_http_date).map_or(",
        check: test("idem-http", "", "it", "operator::a_record_whose_result_never"),
    },
    Mutant {
        name: "payments-simulated-total-overflows",
        file: "crates/idem-payments/src/simulated.rs",
        from: "state.charged_minor.saturating_add(request.amount().minor());",
        to: "state.charged_minor + request.amount().minor();",
        check: test("idem-payments", "", "it", "conversions::the_largest_amount"),
    },
    Mutant {
        name: "http-json-number-token-read-as-a-number",
        file: "crates/idem-http/src/meaning.rs",
        from: "        if holds_number_token(body) {",
        to: "        if holds_number_token(body) && false {",
        check: test("idem-http", "", "it", "routes::a_body_spelling_a_number"),
    },
    Mutant {
        name: "http-json-number-token-escapes-read-as-letters",
        file: "crates/idem-http/src/meaning.rs",
        from: "text.push(if matches!(escaped, b'\"' | b'\\\\' | b'/') { escaped } else { 0 });",
        to: "text.push(escaped);",
        check: test("idem-http", "", "it", "routes::a_body_spelling_a_number"),
    },
    Mutant {
        name: "client-redirect-loop-retried-to-the-deadline",
        file: "crates/idem-client/src/reqwest.rs",
        from: "                        if e.is_builder() || e.is_redirect() =>",
        to: "                        if e.is_builder() =>",
        check: test("idem-client", "", "sockets", "an_answer_the_client_cannot_follow"),
    },
    Mutant {
        name: "pg-tokens-restart-at-one-after-a-drop",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "             FROM {schema}.tokens WHERE NOT is_called;",
        to: "             FROM {schema}.tokens WHERE NOT is_called AND false;",
        check: test("idem-store-postgres", "server-tests", "postgres", "tokens_grow_across"),
    },
    Mutant {
        name: "pg-idle-transaction-held-for-ever",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "\"-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms} \\",
        to: "\"-c statement_timeout={ms} \\",
        check: test("idem-store-postgres", "server-tests", "postgres", "the_stores_sessions"),
    },
    Mutant {
        name: "mutants-hung-check-waited-for",
        file: "xtask/src/mutants.rs",
        from: "> limit {\n            // The group's id",
        to: "> limit && false {\n            // The group's id",
        check: test("xtask", "", "bin", "mutants::tests::a_run_past_its_limit"),
    },
    Mutant {
        name: "payments-charge-not-renewed-during-the-gateway-call",
        file: "crates/idem-payments/src/processor.rs",
        from: "let holding = self.renewed_during_call(lease, Unheld::Released)?;\n        \
               let answer = self.gateway.charge(&gateway_key, request);",
        to: "let answer = self.gateway.charge(&gateway_key, request);\n        \
             let holding = self.renewed_during_call(lease, Unheld::Released)?;",
        check: test("idem-payments", "", "it", "renewal::"),
    },
    Mutant {
        name: "payments-hold-outlives-its-call",
        file: "crates/idem-payments/src/renewer.rs",
        from: "let held = self.registry.release(self.id);",
        to: "let held = { let _ = self.id; true };",
        check: test("idem-payments", "", "it", "renewal::"),
    },
    Mutant {
        name: "payments-renewal-puts-a-released-hold-back",
        file: "crates/idem-payments/src/renewer.rs",
        from: "let Some(held) = state.held.get_mut(&id) else { return };",
        to: "let back = outcome.as_ref().ok().cloned().map(|lease| Held { lease, due: \
             Instant::now(), renewer: true }); let Some(held) = (match back { Some(b) => \
             Some(state.held.entry(id).or_insert(b)), None => state.held.get_mut(&id) }) \
             else { return };",
        check: Check::Loom { package: "idem-payments", model: "" },
    },
    Mutant {
        name: "pg-blocking-call-waits-for-ever",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "let call = async { tokio::time::timeout(wait, f(client)).await };",
        to: "let call = async { Ok::<_, ()>(f(client).await) };",
        check: test("idem-store-postgres", "server-tests", "postgres", "silent::a_blocking_call"),
    },
    Mutant {
        name: "pg-blocking-connect-waits-for-ever",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "tokio::time::timeout(bound, connect).await",
        to: "Ok::<_, ()>(connect.await)",
        check: test("idem-store-postgres", "server-tests", "postgres", "silent::a_blocking_conn"),
    },
    Mutant {
        name: "pg-async-call-waits-for-ever",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "let mut call = std::pin::pin!(tokio::time::timeout(waited, call));",
        to: "let mut call = std::pin::pin!(async { Ok::<_, ()>(call.await) });",
        check: test("idem-store-postgres", "server-tests", "postgres", "silent::an_async_call"),
    },
    Mutant {
        name: "payments-one-renewer-for-every-slow-call",
        file: "crates/idem-payments/src/renewer.rs",
        from: "let started = std::thread::Builder::new()",
        to: "renew_while_held(registry, &*store, id, schedule); let started = \
             std::io::Result::Ok(()); let _ = std::thread::Builder::new()",
        check: test("idem-payments", "", "it", "renewal::a_renewal_the_store_holds"),
    },
    Mutant {
        name: "payments-failed-renewal-retried-a-quarter-later",
        file: "crates/idem-payments/src/renewer.rs",
        from: "retry: at_least_a_ms(lease / 16)",
        to: "retry: at_least_a_ms(lease / 4)",
        check: test("idem-payments", "", "it", "renewal::a_store_away"),
    },
    Mutant {
        name: "payments-recovery-charges-without-its-lease",
        file: "crates/idem-payments/src/processor.rs",
        from: "let lease = self.store.renew(lease).map_err",
        to: "let lease = Ok::<_, StoreError>(lease.clone()).map_err",
        check: test("idem-payments", "", "it", "renewal::a_recovery_that_lost"),
    },
    Mutant {
        name: "notify-claim-before-a-place",
        file: "crates/idem-notify/src/notifier.rs",
        from: "        if !self.state.places.take() {",
        to: "        if !(self.state.places.take() || true) {",
        check: test("idem-notify", "", "it", "hostile::a_message_waiting_in_a_full_queue"),
    },
    Mutant {
        name: "notify-place-taken-by-a-load-and-a-store",
        file: "crates/idem-notify/src/places.rs",
        from: "let taken = self.taken.fetch_add(1, Ordering::Relaxed);\n        if taken < \
               self.capacity {\n            return true;",
        to: "let taken = self.taken.load(Ordering::Relaxed);\n        if taken < \
             self.capacity {\n            self.taken.store(taken + 1, Ordering::Relaxed);\n\
             \x20           return true;",
        check: Check::Loom { package: "idem-notify", model: "" },
    },
    Mutant {
        name: "notify-panic-payload-dropped-unguarded",
        file: "crates/idem-notify/src/notifier.rs",
        from: "            idem_core::drop_panic_payload(payload);\n            \
               idem_core::trace_event!(ERROR",
        to: "            drop(payload);\n            idem_core::trace_event!(ERROR",
        check: test("idem-notify", "", "it", "shutdown_and_limits::a_job_whose_panic"),
    },
    Mutant {
        name: "notify-store-keeping-no-bytes-accepted",
        file: "crates/idem-notify/src/notifier.rs",
        from: "if store.result_bytes_max().is_some_and(|max| max < OUTCOME_BYTES_MIN) {",
        to: "if store.result_bytes_max().is_some_and(|max| max < OUTCOME_BYTES_MIN - 1) {",
        check: test("idem-notify", "", "it", "shutdown_and_limits::a_store_that_keeps"),
    },
    Mutant {
        name: "notify-reason-kept-whole",
        file: "crates/idem-notify/src/notifier.rs",
        from: "let reason = cut(&reason, REASON_BYTES_MAX).to_string();",
        to: "let reason = reason.clone();",
        check: test("idem-notify", "", "it", "shutdown_and_limits::a_providers_reason"),
    },
    Mutant {
        name: "notify-unresolved-listed-per-replay",
        file: "crates/idem-notify/src/notifier.rs",
        from: "list.retain(|listed| listed.key() != notification.key());",
        to: "list.retain(|_| true);",
        check: test("idem-notify", "", "it", "shutdown_and_limits::an_unresolved"),
    },
    Mutant {
        name: "notify-recovery-found-delivered-counted-sent",
        file: "crates/idem-notify/src/notifier.rs",
        from: "return finish(state, &tried.lease, Outcome::Delivered, 0),",
        to: "return finish(state, &tried.lease, Outcome::Delivered, 1),",
        check: test("idem-notify", "", "it", "behaviour::a_crash_after_sending_with_status"),
    },
    Mutant {
        name: "notify-retry-cap-unbounded",
        file: "crates/idem-notify/src/config.rs",
        from: "if c.retry.cap > RETRY_CAP_MAX {",
        to: "if c.retry.cap > std::time::Duration::MAX {",
        check: test("idem-notify", "", "it", "behaviour::a_retry_policy_of_maximal"),
    },
    Mutant {
        name: "pg-sweep-deletes-a-row-taken-over-while-it-waited",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "                 LIMIT $2)\n                 AND finished AND expires_at <= {now}\n",
        to: "                 LIMIT $2)\n",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_sweep_never_deletes"),
    },
    Mutant {
        name: "pg-sessions-commit-as-the-url-says",
        file: "crates/idem-store-postgres/src/lib.rs",
        from: "-c synchronous_commit=on",
        to: "-c lock_timeout=0",
        check: test(
            "idem-store-postgres",
            "server-tests",
            "postgres",
            "the_stores_sessions_commit",
        ),
    },
    Mutant {
        name: "pg-async-callers-pool-commits-asynchronously",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "if value != \"off\" {",
        to: "if value != \"never\" {",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_callers_pool_without"),
    },
    Mutant {
        name: "pg-blocking-panics-inside-an-async-task",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "        Err(_panicked) => Err(PgError::InsideAsyncTask.into()),",
        to: "        Err(panicked) => panic::resume_unwind(panicked),",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_blocking_store_called"),
    },
    Mutant {
        name: "pg-blocking-drops-its-event-loops-in-place",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "        for conn in self.clients.get_mut().drain(..).flatten() {\n            \
               close(conn);\n        }\n",
        to: "",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_blocking_store_called"),
    },
    Mutant {
        name: "pg-blocking-empty-place-lost",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "        self.store.clients.lock().push(self.conn.take());",
        to: "        if let Some(c) = self.conn.take() { \
             self.store.clients.lock().push(Some(c)); }",
        check: test("idem-store-postgres", "server-tests", "postgres", "silent::a_blocking_call"),
    },
    Mutant {
        name: "pg-async-silent-connection-given-back",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "if let (true, Some(object)) = (late, self.object.take()) {",
        to: "if let (true, Some(object)) = (late && false, self.object.take()) {",
        check: test("idem-store-postgres", "server-tests", "postgres", "silent::an_async_store"),
    },
    Mutant {
        name: "pg-fresh-lease-cut-short-by-a-wait",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "            if taken.lease_cut_short(config) {",
        to: "            if false && taken.lease_cut_short(config) {",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_fresh_claim_that_waited"),
    },
    Mutant {
        name: "pg-async-fresh-lease-cut-short-by-a-wait",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "        if taken.lease_cut_short(config) {",
        to: "        if false && taken.lease_cut_short(config) {",
        check: test("idem-store-postgres", "server-tests", "postgres", "an_async_fresh_claim"),
    },
    Mutant {
        name: "notify-place-kept-by-a-claim-that-panicked",
        file: "crates/idem-notify/src/notifier.rs",
        from: "        if !self.queued {\n            self.places.free();",
        to: "        if false {\n            self.places.free();",
        check: test("idem-notify", "", "it", "shutdown_and_limits::a_claim_that_panics"),
    },
    Mutant {
        name: "notify-second-panic-payload-dropped-unguarded",
        file: "crates/idem-core/src/payload.rs",
        from: "            Err(next) => payload = next,",
        to: "            Err(next) => return drop(next),",
        check: test("idem-notify", "", "it", "shutdown_and_limits::a_job_whose_panic"),
    },
    Mutant {
        name: "notify-send-begun-past-the-deadline",
        file: "crates/idem-notify/src/notifier.rs",
        from: "    if past_deadline(state, Duration::ZERO) {\n        return Next::Stopped;",
        to: "    if false {\n        return Next::Stopped;",
        check: test("idem-notify", "", "it", "shutdown_and_limits::"),
    },
    Mutant {
        name: "notify-superseded-job-gives-the-id-back",
        file: "crates/idem-notify/src/notifier.rs",
        from: "Err(StoreError::LeaseLost { .. }) => add(&state.counters.superseded),",
        to: "Err(StoreError::LeaseLost { .. }) if false => add(&state.counters.superseded),",
        check: test("idem-notify", "", "it", "shutdown_and_limits::a_superseded_job"),
    },
    Mutant {
        name: "payments-renewal-panic-payload-dropped-unguarded",
        file: "crates/idem-payments/src/renewer.rs",
        from: "        idem_core::drop_panic_payload(payload);\n        Err(StoreError::Storage(",
        to: "        drop(payload);\n        Err(StoreError::Storage(",
        check: test("idem-payments", "", "it", "renewal::a_renewal_that_panics_twice"),
    },
    Mutant {
        name: "payments-call-that-outlived-its-claim-uncounted",
        file: "crates/idem-payments/src/processor.rs",
        from: "                self.renewer.count_lost();\n",
        to: "",
        check: test("idem-payments", "", "it", "renewal::a_call_that_outlived"),
    },
    Mutant {
        name: "payments-reconcile-lookup-payload-dropped-unguarded",
        file: "crates/idem-payments/src/processor.rs",
        from: "            idem_core::drop_panic_payload(payload);\n            Lookup::Unknown",
        to: "            drop(payload);\n            Lookup::Unknown",
        check: test("idem-payments", "", "it", "tenants::a_lookup_that_panics"),
    },
    Mutant {
        name: "pg-async-zero-wait-never-opens-a-connection",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "    let at_once = Timeouts { wait: Some(Duration::ZERO), create: None, recycle: \
               None };\n    match pool.timeout_get(&at_once).await {\n        \
               Err(PoolError::Timeout(TimeoutType::Wait)) if !wait.is_zero() => {}",
        to: "    match Err::<Object, PoolError>(PoolError::Timeout(TimeoutType::Wait)) {\n        \
             Err(PoolError::Timeout(TimeoutType::Wait)) if true => {}",
        check: test("idem-store-postgres", "server-tests", "postgres", "never_waits"),
    },
    Mutant {
        name: "pg-takeovers-counted-side-by-side",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "                if taken.counts_under_lock() {",
        to: "                if false && taken.counts_under_lock() {",
        check: test("idem-store-postgres", "server-tests", "postgres", "two_takeovers_in_one"),
    },
    Mutant {
        name: "pg-async-takeovers-counted-side-by-side",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "            if taken.counts_under_lock() {",
        to: "            if false && taken.counts_under_lock() {",
        check: test("idem-store-postgres", "server-tests", "postgres", "two_async_takeovers"),
    },
    Mutant {
        name: "payments-lost-call-counted-twice",
        file: "crates/idem-payments/src/processor.rs",
        from: "                if lost_unseen {",
        to: "                if true || lost_unseen {",
        check: test("idem-payments", "", "it", "renewal::a_call_whose_renewal_and"),
    },
    Mutant {
        name: "pg-takeover-lease-spent-waiting-on-the-count",
        file: "crates/idem-store-postgres/src/rows.rs",
        from: "        if self.count_locked_after {",
        to: "        if false && self.count_locked_after {",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_takeover_that_waited"),
    },
    Mutant {
        name: "pg-blocking-close-read-in-one-turn",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "const READ_TURNS: usize = 2;",
        to: "const READ_TURNS: usize = 1;",
        check: test(
            "idem-store-postgres",
            "server-tests",
            "postgres",
            "silent::a_connection_the_server_closed_between_calls",
        ),
    },
    Mutant {
        name: "pg-blocking-close-unread-before-a-call",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "catch_unwind(AssertUnwindSafe(|| conn.runtime.block_on(read)))",
        to: "catch_unwind(AssertUnwindSafe(|| drop(read)))",
        check: test(
            "idem-store-postgres",
            "server-tests",
            "postgres",
            "silent::a_connection_the_server_closed_between_calls",
        ),
    },
    Mutant {
        name: "pg-blocking-close-unread-in-spawn-blocking",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "    match panic::catch_unwind(AssertUnwindSafe(|| conn.runtime.block_on(read))) {",
        to: "    if tokio::runtime::Handle::try_current().is_ok() { return Ok(true); }\n\
             match panic::catch_unwind(AssertUnwindSafe(|| conn.runtime.block_on(read))) {",
        check: test(
            "idem-store-postgres",
            "server-tests",
            "postgres",
            "silent::a_connection_closed_between_calls_is_replaced_for_a_spawn",
        ),
    },
    Mutant {
        name: "payments-recovery-refused-completion-passed-on",
        file: "crates/idem-payments/src/processor.rs",
        from: "        if !settled_here(self.store.complete(lease, outcome.clone()))? {",
        to: "        if !{ self.store.complete(lease, outcome.clone())?; true } {",
        check: test("idem-payments", "", "it", "renewal::a_recovery_that_lost_its_lease"),
    },
    Mutant {
        name: "payments-reconcile-refused-write-counted-failed",
        file: "crates/idem-payments/src/processor.rs",
        from: "        Err(StoreError::LeaseLost { .. }) => Ok(false),\n",
        to: "",
        check: test("idem-payments", "", "it", "renewal::a_reconcile_that_lost_its_lease"),
    },
    Mutant {
        name: "payments-renewal-due-time-overflows",
        file: "crates/idem-payments/src/renewer.rs",
        from: "    at.checked_add(by).or_else(|| at.checked_add(NEVER)).unwrap_or(at)",
        to: "    at + by",
        check: test("idem-payments", "", "lib", "a_due_time_past_what_an_instant_holds"),
    },
    Mutant {
        name: "notify-superseded-give-up-listed-dead",
        file: "crates/idem-notify/src/notifier.rs",
        from: "    if let Err(StoreError::LeaseLost { .. }) = settle {\n        \
               add(&state.counters.superseded);\n        return;\n    }\n",
        to: "",
        check: test("idem-notify", "", "it", "hostile::a_give_up_after_the_id_was_recovered"),
    },
    Mutant {
        name: "notify-provider-panic-payload-dropped-unguarded",
        file: "crates/idem-notify/src/notifier.rs",
        from: "would escape here: dropped under a guard.\n        \
               idem_core::drop_panic_payload(payload);\n",
        to: "would escape here: dropped under a guard.\n        drop(payload);\n",
        check: test("idem-notify", "", "it", "hostile::a_provider_panic_whose_payload"),
    },
    Mutant {
        name: "notify-retry-counted-before-it-starts",
        file: "crates/idem-notify/src/notifier.rs",
        from: "        match attempt_once(state, n, &mut tried, attempt > 0) {",
        to: "        if attempt > 0 { add(&state.counters.retries); }\n\
             match attempt_once(state, n, &mut tried, false) {",
        check: test("idem-notify", "", "it", "hostile::a_retry_stopped_by_the_deadline"),
    },
    Mutant {
        name: "notify-shutdown-on-a-worker-waits-for-the-joiner",
        file: "crates/idem-notify/src/notifier.rs",
        from: "        if self.worker_threads.contains(&std::thread::current().id()) {",
        to: "        if self.worker_threads.is_empty() {",
        check: test("idem-notify", "", "it", "hostile::a_shutdown_from_a_worker_during"),
    },
    Mutant {
        name: "notify-shutdown-on-a-worker-says-drained",
        file: "crates/idem-notify/src/notifier.rs",
        from: "            return ShutdownReport { drained: false, left: Vec::new() };",
        to: "            return ShutdownReport { drained: true, left: Vec::new() };",
        check: test("idem-notify", "", "it", "hostile::a_shutdown_from_a_worker_does_not"),
    },
    Mutant {
        name: "pg-blocking-rollback-left-queued",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "                runtime.block_on(turns(READ_TURNS));\n",
        to: "",
        check: test("idem-store-postgres", "server-tests", "postgres", "a_refused_claim_leaves"),
    },
    Mutant {
        name: "pg-blocking-reconnect-outside-the-call-wait",
        file: "crates/idem-store-postgres/src/blocking.rs",
        from: "        open_client(&self.connector, self.call_wait_max.min(STATEMENT_TIMEOUT))",
        to: "        open_client(&self.connector, STATEMENT_TIMEOUT)",
        check: test("idem-store-postgres", "server-tests", "postgres", "silent::a_blocking_call"),
    },
    Mutant {
        name: "pool-shelf-return-unfenced",
        file: "crates/idem-pool/src/shelf.rs",
        from: "(the race above).\n        fence(Ordering::SeqCst);",
        to: "(the race above).",
        check: Check::Loom { package: "idem-pool", model: "close_races_get_and_release" },
    },
    Mutant {
        name: "pool-shelf-return-never-hands-on",
        file: "crates/idem-pool/src/shelf.rs",
        from: "self.waiting.load(Ordering::Relaxed) > 0 || self.closed.load(Ordering::Relaxed)",
        to: "false",
        check: Check::Loom { package: "idem-pool", model: "close_races_get_and_release" },
    },
    Mutant {
        name: "pool-fifo-waiter-never-looks-at-the-shelf",
        file: "crates/idem-pool/src/pool.rs",
        from: "let idle = (0..self.shelf.len()).find_map(|slot| self.shelf.reclaim(slot));",
        to: "let idle = None::<(Claim, Held<M::Connection>)>;",
        check: Check::Loom {
            package: "idem-pool",
            model: "failed_connect_hands_the_slot_to_a_waiter",
        },
    },
    Mutant {
        name: "pool-barging-waiter-never-looks-at-the-shelf",
        file: "crates/idem-pool/src/pool.rs",
        from: "} else if let Some((claim, held)) = self.shelf.take_any() {",
        to: "} else if let Some((claim, held)) = None::<(Claim, Held<M::Connection>)> {",
        check: Check::Loom {
            package: "idem-pool",
            model: "failed_connect_hands_the_slot_to_a_waiter",
        },
    },
    Mutant {
        name: "pool-shelf-forgets-the-threads-last-slot",
        file: "crates/idem-pool/src/pool.rs",
        from: "            self.shelf.remember(slot);\n",
        to: "",
        check: test("idem-pool", "", "it", "model::"),
    },
    Mutant {
        name: "pool-idle-loan-start-unrecorded",
        file: "crates/idem-pool/src/conn.rs",
        from: "        lender.shelf.set_lent_at(&lent.claim, lent.lent_at);\n",
        to: "",
        check: test("idem-pool", "", "it", "behaviour::leak_threshold"),
    },
    Mutant {
        name: "pool-leak-counted-every-round",
        file: "crates/idem-pool/src/pool.rs",
        from: "if !lent || state.leak_counted[slot] == word.generation {",
        to: "if !lent {",
        check: test("idem-pool", "", "it", "behaviour::leak_threshold"),
    },
    Mutant {
        name: "pool-expired-hand-off-dropped-unguarded",
        file: "crates/idem-pool/src/pool.rs",
        from: "let ((), mut claim) = self.holding(claim, false, || drop(held));",
        to: "drop(held);\n                    let mut claim = claim;",
        check: test(
            "idem-pool",
            "",
            "it",
            "hostile::a_connection_handed_on_past_its_lifetime_whose",
        ),
    },
    Mutant {
        name: "pool-clock-read-unguarded-while-a-place-is-held",
        file: "crates/idem-pool/src/pool.rs",
        from: "let (now, mut claim) = self.holding(claim, false, || self.now());",
        to: "let (now, mut claim) = (self.now(), claim);",
        check: test("idem-pool", "", "it", "hostile::a_clock_that_panics"),
    },
    Mutant {
        name: "pool-failed-check-hands-the-waiters-turn-on",
        file: "crates/idem-pool/src/pool.rs",
        from: "                    Err(claim) => Waited::Create(claim),\n                })",
        to: "                    Err(claim) => {\n                        \
             self.slot_emptied(Some(claim), false);\n                        \
             Waited::Again\n                    }\n                })",
        check: test("idem-pool", "", "it", "behaviour::fifo_keeps_a_waiters_turn"),
    },
    Mutant {
        name: "pool-failed-connect-gives-up-at-once",
        file: "crates/idem-pool/src/pool.rs",
        from: "            if past {",
        to: "            if true {",
        check: test("idem-pool", "", "it", "behaviour::fifo_keeps_a_waiters_turn"),
    },
    Mutant {
        name: "pool-state-counted-in-two-passes",
        file: "crates/idem-pool/src/state.rs",
        from: "        (state.idle, state.in_use, state.connecting) = shelf.counts();",
        to: "        state.idle = shelf.counts().0;\n        state.in_use = shelf.counts().1;",
        check: test("idem-pool", "", "it", "behaviour::state_counts_each_connection_once"),
    },
    Mutant {
        name: "pool-loan-start-recorded-before-its-check",
        file: "crates/idem-pool/src/pool.rs",
        from: "        Lent { conn: held.conn, claim, created_at: held.created_at, lent_at: now }",
        to: "        self.shelf.set_lent_at(&claim, now);\n        \
             Lent { conn: held.conn, claim, created_at: held.created_at, lent_at: now }",
        check: test("idem-pool", "", "it", "leaks::a_slow_health_check"),
    },
    Mutant {
        name: "pool-taken-slot-looks-lent",
        file: "crates/idem-pool/src/shelf.rs",
        from: "Word { phase: Phase::Taken, ..now }",
        to: "Word { phase: Phase::Lent, ..now }",
        check: test("idem-pool", "", "it", "leaks::a_connection_taken_off_the_shelf"),
    },
    Mutant {
        name: "pool-connect-error-dropped-unguarded",
        file: "crates/idem-pool/src/pool.rs",
        from: "let ((), claim) = self.holding(claim, false, || drop(replaced));",
        to: "drop(replaced);",
        check: test("idem-pool", "", "it", "hostile::a_connect_error_whose_drop"),
    },
    Mutant {
        name: "pool-connect-retried-past-the-deadline",
        file: "crates/idem-pool/src/pool.rs",
        from: "Deadline::At(deadline) => Instant::now() >= deadline,",
        to: "Deadline::At(_) => false,",
        check: test("idem-pool", "", "it", "connect::a_caller_does_not_connect_again"),
    },
    Mutant {
        name: "pool-clock-panic-discard-uncounted",
        file: "crates/idem-pool/src/pool.rs",
        from: "let (now, claim) = self.holding(claim, true, || self.now());\n                \
               if self.expired",
        to: "let (now, claim) = self.holding(claim, false, || self.now());\n                \
             if self.expired",
        check: test("idem-pool", "", "it", "hostile::a_clock_that_panics_as_a_waiter"),
    },
    Mutant {
        name: "pool-refill-after-close-uncounted",
        file: "crates/idem-pool/src/pool.rs",
        from: "                        state.counters.discarded += 1;\n\
               \x20                       self.shelf.empty(claim);",
        to: "                        self.shelf.empty(claim);",
        check: test("idem-pool", "", "it", "hostile::a_refill_that_ends"),
    },
    Mutant {
        name: "pool-broken-guard-parked-healthy",
        file: "crates/idem-pool/src/conn.rs",
        from: "self.lender.park(lent, self.broken);",
        to: "self.lender.park(lent, false);",
        check: test("idem-pool", "", "it", "model::"),
    },
    Mutant {
        name: "pool-return-check-counted-as-the-borrowers",
        file: "crates/idem-pool/src/pool.rs",
        from: "        self.shelf.end_loan(&claim);\n",
        to: "",
        check: test("idem-pool", "", "it", "leaks::a_slow_broken_check"),
    },
    Mutant {
        name: "payments-watcher-sleeps-through-a-hold",
        file: "crates/idem-payments/src/renewer.rs",
        from: "        if std::mem::take(&mut state.watcher_idle) {",
        to: "        if false {",
        check: test("idem-payments", "", "it", "renewal::"),
    },
    Mutant {
        name: "pool-shelf-claims-without-compare-and-swap",
        file: "crates/idem-pool/src/shelf.rs",
        from: "        let won = self.places[slot].word.compare_exchange(\n\
               \x20           from.pack(),\n            to.pack(),\n            \
               Ordering::AcqRel,\n            Ordering::Relaxed,\n        );\n        \
               won.ok().map(|_| Claim { slot, generation: to.generation })",
        to: "        let _ = from;\n        \
             self.places[slot].word.store(to.pack(), Ordering::Release);\n        \
             Some(Claim { slot, generation: to.generation })",
        check: Check::Loom { package: "idem-pool", model: "two_gets_race_for_one_idle_connection" },
    },
    Mutant {
        name: "http-failed-completion-never-tried-again",
        file: "crates/idem-http/src/layer.rs",
        from: "        for pause in COMPLETE_RETRY_PAUSES {\n",
        to: "        for pause in [] as [std::time::Duration; 0] {\n",
        check: test("idem-http", "", "it", "edges::a_completion_refused_for_a_moment"),
    },
    Mutant {
        name: "http-completion-settled-by-its-own-retry-counted-lost",
        file: "crates/idem-http/src/layer.rs",
        from: "                Err(StoreError::LeaseLost { .. }) => {\n                    \
               idem_core",
        to: "                Err(StoreError::LeaseLost { .. }) => {\n                    \
             return self.lease_lost(\"complete\");\n                    idem_core",
        check: test("idem-http", "", "it", "edges::a_completion_applied_but_answered"),
    },
    Mutant {
        name: "http-first-renewal-counted-from-the-renewals-start",
        file: "crates/idem-http/src/run.rs",
        from: "    let mut next = later(since, every);\n",
        to: "    let mut next = later(tokio::time::Instant::now(), every);\n",
        check: test("idem-http", "", "it", "runs::a_slow_claim_does_not_stop"),
    },
    Mutant {
        name: "pg-async-call-given-up-keeps-its-silent-connection",
        file: "crates/idem-store-postgres/src/async_store.rs",
        from: "        let abandoned = Abandoned(Some(out_of_time.clone()));\n",
        to: "        let abandoned = Abandoned(None);\n",
        check: test("idem-store-postgres", "server-tests", "postgres", "silent::a_call_given"),
    },
    Mutant {
        name: "redis-replica-wait-on-the-shared-connection",
        file: "crates/idem-store-redis/src/store.rs",
        from: "            let answer = Self::invoke(&pipe, invocation, lane.conn()).await;\n",
        to: "            let answer = Self::invoke(&pipe, invocation, &mut self.conn.clone())\n\
             .await;\n",
        check: test("idem-store-redis", "server-tests", "redis", "changes_waiting_for_replicas"),
    },
    Mutant {
        name: "redis-given-up-lane-kept-with-its-wait",
        file: "crates/idem-store-redis/src/lanes.rs",
        from: "            _ => {}\n        }\n    }\n}",
        to: "            (_, Some(conn)) => idle.push(conn),\n            _ => {}\n        }\n    \
             }\n}",
        check: test("idem-store-redis", "server-tests", "redis", "changes_waiting_for_replicas"),
    },
    Mutant {
        name: "redis-replica-waits-past-their-limit",
        file: "crates/idem-store-redis/src/lanes.rs",
        from: "Semaphore::new(REPLICA_WAITS_MAX));",
        to: "Semaphore::new(REPLICA_WAITS_MAX + 1));",
        check: test("idem-store-redis", "server-tests", "redis", "changes_waiting_for_replicas"),
    },
    Mutant {
        name: "checkout-payment-never-told-its-run-is-gone",
        file: "crates/idem-http/examples/checkout_server/app.rs",
        from: "        let mut gone = RaisedOnDrop(Some(abandoned.clone()));\n",
        to: "        let mut gone = RaisedOnDrop(None);\n",
        check: test("idem-http", "", "it", "sockets::a_payment_whose_run_was_dropped"),
    },
    Mutant {
        name: "checkout-charge-sent-for-a-gone-run",
        file: "crates/idem-http/examples/checkout_server/app.rs",
        from: "        _ if gone.raised() => Err(",
        to: "        _ if false => Err(",
        check: test("idem-http", "", "it", "sockets::a_payment_whose_run_was_dropped"),
    },
    Mutant {
        name: "pool-state-forgets-connections-being-made",
        file: "crates/idem-pool/src/shelf.rs",
        from: "                Phase::Creating => creating += 1,\n",
        to: "                Phase::Creating => creating += 0,\n",
        check: test("idem-pool", "", "it", "connect::"),
    },
    Mutant {
        name: "http-loss-found-after-a-failed-completion-counted",
        file: "crates/idem-http/src/layer.rs",
        from: "            if lost.load(Ordering::Acquire) {\n                idem_core",
        to: "            if lost.load(Ordering::Acquire) {\n                \
             return self.lease_lost(\"renew\");\n                idem_core",
        check: test("idem-http", "", "it", "runs::a_renewal_that_finds_a_failed_completion"),
    },
    Mutant {
        name: "redis-failed-lane-keeps-the-idle-ones",
        file: "crates/idem-store-redis/src/lanes.rs",
        from: "            (Ended::Failed, _) => idle.clear(),\n",
        to: "            (Ended::Failed, _) => {}\n",
        check: test("idem-store-redis", "server-tests", "redis", "after_a_restart_one_change"),
    },
    Mutant {
        name: "http-late-claim-not-vouched-afresh",
        file: "crates/idem-http/src/layer.rs",
        from: "            && crate::run::renewal_due(sent, self.store.lease())\n",
        to: "            && false\n",
        check: test("idem-http", "", "it", "runs::a_late_claim_whose_renewal_is_late_too"),
    },
    Mutant {
        name: "redis-refused-change-closes-the-idle-lanes",
        file: "crates/idem-store-redis/src/store.rs",
        from: "ErrorKind::Extension) => {\n                    lane.answered();",
        to: "ErrorKind::Extension) => {\n                    lane.failed();",
        check: test("idem-store-redis", "server-tests", "redis", "a_change_the_server_refuses"),
    },
    Mutant {
        name: "http-slow-completion-failure-tried-again",
        file: "crates/idem-http/src/layer.rs",
        from: "            if took > COMPLETE_RETRY_IF_FAILED_WITHIN {\n",
        to: "            if took > COMPLETE_RETRY_IF_FAILED_WITHIN * 1000 {\n",
        check: test("idem-http", "", "it", "runs::a_silent_store_is_not_waited_out_again"),
    },
    Mutant {
        name: "http-completion-retry-cut-at-a-second",
        file: "crates/idem-http/src/layer.rs",
        from: "            failed = match self.store.complete(lease, stored.clone()).await {\n",
        to: "            let again = self.store.complete(lease, stored.clone());\n            \
             let again = tokio::time::timeout(Duration::from_secs(1), again).await;\n            \
             failed = match again.unwrap_or(Err(StoreError::Storage(\"cut\".into()))) {\n",
        check: test("idem-http", "", "it", "runs::a_completion_the_store_answers_slowly"),
    },
    Mutant {
        name: "http-claim-just-inside-its-guard-not-vouched-afresh",
        file: "crates/idem-http/src/layer.rs",
        from: "            && crate::run::renewal_due(sent, self.store.lease())\n",
        to: "            && crate::run::renewal_due(sent, self.store.lease() * 3 / 2)\n",
        check: test("idem-http", "", "it", "runs::a_claim_answered_just_inside_its_guard"),
    },
    Mutant {
        name: "http-lost-late-claim-given-back",
        file: "crates/idem-http/src/layer.rs",
        from: "        if !recovering && !lost {\n",
        to: "        if !recovering {\n",
        check: test("idem-http", "", "it", "runs::a_late_claim_whose_renewal_finds_it_lost"),
    },
    Mutant {
        name: "http-vouching-renewal-accepted-up-to-the-guard",
        file: "crates/idem-http/src/layer.rs",
        from: "        let within = crate::run::start_within(self.store.lease());\n",
        to: "        let within = self.store.lease() * 3 / 8;\n",
        check: test("idem-http", "", "it", "runs::a_vouching_renewal_answered_past"),
    },
    Mutant {
        name: "http-run-start-past-a-tiny-lease-guard",
        file: "crates/idem-http/src/run.rs",
        from: "    renewal_period(lease).min(vouched_for(lease))\n",
        to: "    renewal_period(lease)\n",
        check: test("idem-http", "", "it", "runs::a_claim_past_the_guard_of_a_millisecond"),
    },
    Mutant {
        name: "http-vouching-renewal-waits-out-a-silent-store",
        file: "crates/idem-http/src/layer.rs",
        from: "match tokio::time::timeout(within, self.store.renew(&lease)).await {",
        to: "match tokio::time::timeout(within * 1000, self.store.renew(&lease)).await {",
        check: test("idem-http", "", "it", "runs::a_late_claim_on_a_store_gone_silent"),
    },
    Mutant {
        name: "http-give-back-of-a-late-claim-awaited-whole",
        file: "crates/idem-http/src/layer.rs",
        from: "            match tokio::time::timeout(within, release).await {\n",
        to: "            match Ok::<_, ()>(release.await) {\n",
        check: test("idem-http", "", "it", "runs::a_late_claim_on_a_store_gone_silent"),
    },
    Mutant {
        name: "http-late-claim-give-back-panic-uncounted",
        file: "crates/idem-http/src/layer.rs",
        from: "                Ok(Err(_)) => \
               self.left_in_flight(\"a late claim's release panicked\"),",
        to: "                Ok(Err(_)) => {}",
        check: test("idem-http", "", "it", "runs::a_late_claim_whose_release_panics"),
    },
    Mutant {
        name: "pool-guard-double-release-uncounted",
        file: "crates/idem-pool/src/conn.rs",
        from: "            None => {\n                self.lender.count_double_release();\n",
        to: "            None => {\n",
        check: Check::Demo { storm: "idem-pool" },
    },
];

/// Runs the catalogue (or the named entries of it).
pub(crate) fn run(args: &[String]) -> Result {
    let selected: Vec<&Mutant> =
        CATALOGUE.iter().filter(|m| args.is_empty() || args.iter().any(|a| a == m.name)).collect();
    if selected.is_empty() {
        let names: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
        return Err(format!("no mutation named {args:?}; the catalogue: {names:?}"));
    }
    let scratch = root().join("target/mutants");
    let tree = copy_tree(&scratch)?;
    let started = Instant::now();
    let mut baselines: Vec<Check> = Vec::new();
    for mutant in &selected {
        if !baselines.contains(&mutant.check) {
            baselines.push(mutant.check);
            let outcome = passes(&tree, &scratch, mutant.check)?;
            if outcome != Outcome::Passed {
                return Err(format!("{:?}: {outcome:?} on the unbroken tree", mutant.check));
            }
        }
    }
    let (mut survivors, mut unbuilt, mut hung) = (Vec::new(), Vec::new(), Vec::new());
    for mutant in &selected {
        let clock = Instant::now();
        let outcome = with_mutation(&tree, mutant, || passes(&tree, &scratch, mutant.check))?;
        let verdict = match outcome {
            Outcome::Failed => "caught",
            Outcome::Passed => "SURVIVED",
            Outcome::DoesNotBuild => "UNBUILT",
            Outcome::Hung => "HUNG",
        };
        println!("xtask: mutant {:<42} {verdict:<8} {:>5.1} s", mutant.name, seconds(clock));
        match outcome {
            Outcome::Failed => {}
            Outcome::Passed => survivors.push(mutant.name),
            Outcome::DoesNotBuild => unbuilt.push(mutant.name),
            Outcome::Hung => hung.push(mutant.name),
        }
    }
    println!("xtask: {} mutations in {:.0} s", selected.len(), seconds(started));
    if !survivors.is_empty() {
        return Err(format!("mutations survived: {survivors:?}"));
    }
    if !unbuilt.is_empty() {
        return Err(format!("mutations that do not compile (fix them): {unbuilt:?}"));
    }
    if !hung.is_empty() {
        let limit = CHECK_LIMIT.as_secs();
        return Err(format!("checks that hung past {limit} s (give them a bound): {hung:?}"));
    }
    Ok(())
}

fn seconds(since: Instant) -> f64 {
    since.elapsed().as_secs_f64()
}

/// Applies `mutant` to the scratch tree, runs `check`, and restores the file.
fn with_mutation<T>(tree: &Path, mutant: &Mutant, check: impl FnOnce() -> Result<T>) -> Result<T> {
    let path = tree.join(mutant.file);
    let original = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", mutant.file))?;
    if original.matches(mutant.from).count() != 1 {
        return Err(format!("{}: the text to break is not in {} once", mutant.name, mutant.file));
    }
    let write = |text: &str| std::fs::write(&path, text).map_err(|e| format!("{e}"));
    write(&original.replacen(mutant.from, mutant.to, 1))?;
    let result = check();
    write(&original)?;
    result
}

/// What a check did on the scratch tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    /// The tree does not build: a mutation that does not compile proves nothing about the
    /// check, so it is an error in the catalogue, never "caught".
    DoesNotBuild,
    /// The check ran past `CHECK_LIMIT` and was killed: a test that hangs on a break (a
    /// thread waiting for ever once an assertion failed) would spend the CI's whole budget
    /// on one entry, so it is an error in the catalogue too: give the test a bound.
    Hung,
}

/// How long one check's run (its build apart) may take before it is killed as hung. The
/// slowest entries (the crash tests, the cluster) run for under two minutes.
const CHECK_LIMIT: Duration = Duration::from_secs(600);

/// Runs `command` (its output discarded) in a process group of its own, killed whole
/// (cargo and the test binary under it) when it outlives `limit`.
fn run_bounded(command: &mut Command, limit: Duration) -> Result<Outcome> {
    use std::os::unix::process::CommandExt;
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("waiting for cargo: {e}"))? {
            return Ok(if status.success() { Outcome::Passed } else { Outcome::Failed });
        }
        if started.elapsed() > limit {
            // The group's id is the child's pid; a negative pid names the whole group.
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            return Ok(Outcome::Hung);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Builds `check`'s test binary on the scratch tree, then runs it.
fn passes(tree: &Path, scratch: &Path, check: Check) -> Result<Outcome> {
    let succeeds = |command: &mut Command| -> Result<bool> {
        let output = command.output().map_err(|e| format!("cannot start cargo: {e}"))?;
        Ok(output.status.success())
    };
    if let Check::Sim { seeds } = check {
        return sim_passes(tree, scratch, seeds).map(|(outcome, _)| outcome);
    }
    if let Check::Demo { storm } = check {
        return demo_passes(tree, scratch, storm);
    }
    if !succeeds(check_command(tree, scratch, check)?.arg("--no-run"))? {
        return Ok(Outcome::DoesNotBuild);
    }
    let mut run = check_command(tree, scratch, check)?;
    match check {
        Check::Test { filter, .. } => {
            run.args(["--", filter]);
        }
        Check::Loom { model, .. } if !model.is_empty() => {
            run.args(["--", model]);
        }
        _ => {}
    }
    run_bounded(&mut run, CHECK_LIMIT)
}

/// cargo on the scratch tree, building into its own target directory (`loom` checks
/// name their own below). Incremental builds on, whatever the caller's environment says
/// (the CI turns them off for its one clean build): each entry rebuilds the crate it
/// breaks, and an incremental rebuild of a small change takes about half the time.
fn scratch_cargo(tree: &Path, scratch: &Path) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .current_dir(tree)
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .env("CARGO_INCREMENTAL", "1");
    command
}

/// `cargo test` for `check` on the scratch tree, up to its test binary's arguments.
fn check_command(tree: &Path, scratch: &Path, check: Check) -> Result<Command> {
    let mut command = scratch_cargo(tree, scratch);
    command.env("IDEM_CRASH_ROUNDS", CRASH_ROUNDS);
    match check {
        Check::Test { package, feature, test, .. } => {
            command.args(["test", "-q", "-p", package]);
            // "lib": the crate's own unit tests, for checks kept private to it; "bin": those
            // of its binaries (xtask's own).
            if test == "lib" {
                command.arg("--lib")
            } else if test == "bin" {
                command.arg("--bins")
            } else {
                command.args(["--test", test])
            };
            if feature == "server-tests" {
                command.env("IDEM_PG_URL", crate::postgres_url()?);
                command.env("IDEM_PG_SKEWED_URL", crate::skewed_postgres_url()?);
                command.env("IDEM_PGBOUNCER_URL", crate::pgbouncer_url()?);
                command.env("IDEM_PGBOUNCER_IGNORING_URL", crate::pgbouncer_ignoring_url()?);
            }
            if !feature.is_empty() {
                command.args(["--features", feature]);
            }
        }
        Check::Loom { package, .. } => {
            command
                .args(["test", "-q", "--release", "-p", package, "--test", "loom"])
                .env("CARGO_TARGET_DIR", scratch.join("loom"))
                .env("RUSTFLAGS", "--cfg loom")
                .env("LOOM_MAX_PREEMPTIONS", "3");
        }
        // Its build step is `--no-run` as a test's is: the harness then builds only.
        Check::Cluster => {
            command
                .args(["xtask", "cluster", "--short"])
                .env("IDEM_CLUSTER_PG_URL", crate::cluster_postgres_url()?);
        }
        Check::ClusterRedis => {
            command.args(["xtask", "cluster", "--short", "--store", "redis"]);
        }
        Check::Sim { .. } => unreachable!("sim_passes runs the simulation"),
        Check::Demo { .. } => unreachable!("demo_passes runs the demo"),
    }
    Ok(command)
}

/// Builds `storm`'s crate's storm on the scratch tree (release), then runs `cargo xtask
/// demo --check 1 --only <storm>` there, which reads it from the scratch target directory.
fn demo_passes(tree: &Path, scratch: &Path, storm: &str) -> Result<Outcome> {
    let mut build = crate::demo::build_command(&[storm.to_string()]);
    build.current_dir(tree).env("CARGO_TARGET_DIR", scratch.join("target"));
    build.env("CARGO_INCREMENTAL", "1");
    if !build.output().map_err(|e| format!("cannot start cargo: {e}"))?.status.success() {
        return Ok(Outcome::DoesNotBuild);
    }
    let ran = scratch_cargo(tree, scratch)
        .args(["xtask", "demo", "--check", "1", "--only", storm])
        .output()
        .map_err(|e| format!("cannot start cargo xtask demo: {e}"))?;
    Ok(if ran.status.success() { Outcome::Passed } else { Outcome::Failed })
}

/// Builds the simulation on the scratch tree (release) and runs `seeds` worlds, stopping
/// at the first that fails: the outcome, and the seeds it took to fail (if it did).
fn sim_passes(tree: &Path, scratch: &Path, seeds: u64) -> Result<(Outcome, Option<u64>)> {
    let built = scratch_cargo(tree, scratch)
        .args(["build", "-q", "--release", "-p", "idem-sim"])
        .output()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !built.status.success() {
        return Ok((Outcome::DoesNotBuild, None));
    }
    let ran = Command::new(scratch.join("target/release/idem-sim"))
        .args(["--seeds", &seeds.to_string(), "--stop-at-first"])
        .output()
        .map_err(|e| format!("cannot start idem-sim: {e}"))?;
    if ran.status.success() {
        return Ok((Outcome::Passed, None));
    }
    let text = String::from_utf8_lossy(&ran.stdout);
    // "first failing seed: S (N seeds up to it)"; any other end is the runner's failure,
    // not a world's, and finds nothing.
    let first = text.lines().find_map(|l| l.strip_prefix("first failing seed: "));
    let (Some(1), Some(first)) = (ran.status.code(), first) else {
        let stderr = String::from_utf8_lossy(&ran.stderr);
        return Err(format!("idem-sim ended with {} and no failing seed: {stderr}", ran.status));
    };
    let took = first.split('(').nth(1).and_then(|r| r.split(' ').next()?.parse().ok());
    Ok((Outcome::Failed, took))
}

/// The files whose code the simulated worlds run: the layer, the checkout handler, the
/// payments crate and the memory store.
const SIM_REACHES: &[&str] = &[
    "crates/idem-http/src/",
    "crates/idem-http/examples/checkout_server/app.rs",
    "crates/idem-payments/src/",
    "crates/idem-core/src/memory.rs",
];

/// `cargo xtask sim --reach [name...]`: each catalogue entry in the code the worlds run
/// (or each one named), applied in turn; the seeds the simulation took to find it, or
/// that it did not within `seeds`.
pub(crate) fn reach(names: &[String], seeds: u64) -> Result {
    let selected: Vec<&Mutant> = CATALOGUE
        .iter()
        .filter(|m| SIM_REACHES.iter().any(|f| m.file.starts_with(f)))
        .filter(|m| names.is_empty() || names.iter().any(|n| n == m.name))
        .collect();
    let scratch = root().join("target/mutants-sim");
    let tree = copy_tree(&scratch)?;
    if sim_passes(&tree, &scratch, seeds)?.0 != Outcome::Passed {
        return Err("the simulation fails on the unbroken tree".into());
    }
    let mut missed = 0;
    for mutant in &selected {
        let clock = Instant::now();
        let (outcome, took) = with_mutation(&tree, mutant, || sim_passes(&tree, &scratch, seeds))?;
        let verdict = match (outcome, took) {
            (Outcome::Failed, Some(n)) => format!("found in {n} seeds"),
            (Outcome::Failed, None) => "found".to_string(),
            (Outcome::Passed, _) => {
                missed += 1;
                format!("not found in {seeds} seeds")
            }
            (Outcome::DoesNotBuild, _) => "UNBUILT".to_string(),
            // sim_passes runs the worlds unbounded: idem-sim ends each by its own budget.
            (Outcome::Hung, _) => "HUNG".to_string(),
        };
        println!("xtask: sim reach {:<46} {verdict:<24} {:>5.1} s", mutant.name, seconds(clock));
    }
    println!("xtask: {} mutations, {missed} not found", selected.len());
    Ok(())
}

/// Copies the tracked and untracked (not ignored) files of the workspace into
/// `<scratch>/tree`, fresh.
fn copy_tree(scratch: &Path) -> Result<PathBuf> {
    let tree = scratch.join("tree");
    let _ = std::fs::remove_dir_all(&tree);
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("git ls-files: {e}"))?;
    for file in listed.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let relative = PathBuf::from(String::from_utf8_lossy(file).into_owned());
        let (from, to) = (root().join(&relative), tree.join(&relative));
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        if from.is_file() {
            std::fs::copy(&from, &to).map_err(|e| format!("{}: {e}", relative.display()))?;
        }
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A check that runs past its limit is killed, with what it started (a shell and its
    /// child here, as cargo and its test binary), and reported hung; one that ends is not.
    #[test]
    fn a_run_past_its_limit_is_killed_and_reported_hung() {
        let mut hangs = Command::new("sh");
        hangs.args(["-c", "sleep 5; true"]);
        let hung = run_bounded(&mut hangs, Duration::from_millis(300)).expect("started");
        assert_eq!(hung, Outcome::Hung);
        let mut ends = Command::new("sh");
        ends.args(["-c", "exit 3"]);
        assert_eq!(run_bounded(&mut ends, Duration::from_secs(30)).expect("ran"), Outcome::Failed);
    }

    /// A catalogue entry whose text to break has moved or been duplicated cannot be
    /// applied; say so at `cargo test`, not only when someone runs the catalogue.
    #[test]
    fn every_mutation_names_text_found_once_in_its_file() {
        let stale: Vec<String> = CATALOGUE
            .iter()
            .filter_map(|m| {
                let text = std::fs::read_to_string(root().join(m.file)).unwrap_or_default();
                let found = text.matches(m.from).count();
                (found != 1).then(|| format!("{}: found {found} times in {}", m.name, m.file))
            })
            .collect();
        assert!(stale.is_empty(), "stale mutations: {stale:#?}");
    }
}
