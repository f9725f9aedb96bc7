//! The processor: claim the key, charge, store the outcome, replay it; reconcile what a
//! crash or a lost answer left pending.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use std::fmt;

use idem_core::{
    Claim, Fingerprint, IdempotencyKey, KEY_LEN_MAX, KeyError, KeyStore, Lease, Scope, ScopedKey,
    StoreError,
};

use crate::gateway::{Charge, ChargeId, Gateway, GatewayError, GatewayKey, Lookup};
use crate::money::{PaymentRequest, ValidationError};
use crate::renewer::{Holding, Renewals, Renewer};

/// What becomes of a claim whose gateway call cannot be renewed (no renewing thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unheld {
    /// Given back: nothing was charged under it.
    Released,
    /// Left pending: an earlier holder may have charged.
    StaysPending,
}

/// The stored, replayed outcome of a payment: a charge, or a definitive decline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentOutcome {
    /// The card was charged.
    Charged(Charge),
    /// The card was declined; retrying the same key replays the decline.
    Declined(String),
}

/// What `pay` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// The outcome: identical on every replay.
    pub outcome: PaymentOutcome,
    /// Whether this answer is a replay of an earlier attempt's outcome (no new charge).
    pub replayed: bool,
}

/// Why `pay` did not return an outcome.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PayError {
    /// The request was invalid: nothing was claimed or charged.
    #[error("invalid payment: {0}")]
    Invalid(#[from] ValidationError),
    /// The key was used for a different request; the original payment is untouched.
    #[error("idempotency key {0} was used for a different payment")]
    KeyReused(ScopedKey),
    /// Another attempt with this key is in flight: retry after `retry_after`, or use
    /// `pay_wait`.
    #[error("a payment with this key is in progress; retry after {retry_after:?}")]
    InProgress {
        /// How long until that attempt's lease runs out.
        retry_after: Duration,
    },
    /// The gateway's answer was lost after sending, or it cannot say what happened: the
    /// payment may or may not have been charged. The claim stays pending and
    /// [`Processor::reconcile`] settles it; a retry with the same key never charges twice.
    #[error("payment {0} is pending: its outcome is unknown until reconciled")]
    Pending(ScopedKey),
    /// The gateway refused before charging: nothing was charged and the key is free again,
    /// so a retry with the same key may charge.
    #[error("gateway unavailable, nothing charged: {0}")]
    Unavailable(String),
    /// The gateway answered with a charge that does not match the request (another
    /// customer, amount or currency). The charge is neither stored nor returned; the claim
    /// stays pending, and [`Processor::reconcile`] reports it in
    /// [`ReconcileReport::mismatched`] until someone looks at the gateway.
    #[error("gateway answered payment {key} with a charge of another {field}: {charge:?}")]
    GatewayMismatch {
        /// The payment's key.
        key: ScopedKey,
        /// The first field that differs from the request.
        field: ChargeField,
        /// What the gateway answered.
        charge: Charge,
    },
    /// The claimed-key store refused or failed.
    #[error("key store: {0}")]
    Store(StoreError),
    /// The thread that renews the processor's leases during gateway calls could not be
    /// started (the OS refused a thread): this call charged nothing. A fresh claim was
    /// given back; a recovered one stays pending for a later retry or reconcile.
    #[error("the lease renewer could not start ({0}); nothing was charged, retry later")]
    NoRenewer(std::io::Error),
}

/// A field of a [`Charge`] that must match the request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChargeField {
    /// The customer charged.
    Customer,
    /// The amount charged.
    Amount,
    /// The currency charged.
    Currency,
}

impl fmt::Display for ChargeField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Customer => "customer",
            Self::Amount => "amount",
            Self::Currency => "currency",
        })
    }
}

/// The first field of `charge` that differs from `request`, if any.
fn mismatch(charge: &Charge, request: &PaymentRequest) -> Option<ChargeField> {
    if charge.customer != request.customer() {
        Some(ChargeField::Customer)
    } else if charge.amount != request.amount() {
        Some(ChargeField::Amount)
    } else if charge.currency != request.currency() {
        Some(ChargeField::Currency)
    } else {
        None
    }
}

/// Whether `charge` is what a request with `fingerprint` asked for (the reconciler has
/// the claim's fingerprint, not the request).
fn matches_fingerprint(charge: &Charge, fingerprint: &Fingerprint) -> bool {
    PaymentRequest::fingerprint_of(&charge.customer, charge.amount, charge.currency) == *fingerprint
}

impl From<StoreError> for PayError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::KeyReused { key } => Self::KeyReused(key),
            other => Self::Store(other),
        }
    }
}

/// What one [`Processor::reconcile`] pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Pending claims the gateway had charged or declined: completed with that outcome.
    pub completed: usize,
    /// Pending claims the gateway never charged: released, so a retry may charge.
    pub released: usize,
    /// Pending claims the gateway could not answer for: left pending, listed here.
    pub unresolved: Vec<ScopedKey>,
    /// Claims another caller settled or recovered first (fencing): left to it.
    pub skipped: usize,
    /// Pending claims the gateway reports charged with another customer, amount or
    /// currency than the claim's request: left pending, never completed with that charge.
    pub mismatched: Vec<MismatchedCharge>,
    /// Claims whose store operation failed; the rest of the batch went on.
    pub failed: Vec<FailedClaim>,
    /// Pending claims of other merchants on a shared store: left alone, each merchant's
    /// own processor (and gateway) settles its own. They take places in the batch, so a
    /// store shared by many merchants wants a larger `batch_max`.
    pub other_merchants: usize,
    /// The store could not list its pending claims (its error, as text): no claim was
    /// looked at in this pass, and every count and list above is empty.
    pub listing_failed: Option<String>,
}

/// A pending claim the gateway reports charged with another customer, amount or currency
/// than the claim's request (in [`ReconcileReport::mismatched`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MismatchedCharge {
    /// The claim's key.
    pub key: ScopedKey,
    /// What the gateway reports it charged under that key.
    pub charge: Charge,
}

/// A pending claim the reconciler could not settle because a store operation failed (in
/// [`ReconcileReport::failed`]); the claim stays pending for the next pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedClaim {
    /// The claim's key.
    pub key: ScopedKey,
    /// Why, as text: the store's error.
    pub error: String,
}

/// A payment processor over a [`Gateway`] and a claimed-key store.
///
/// ```
/// use idem_core::{IdempotencyKey, MemoryStore};
/// use idem_payments::{PaymentOutcome, PaymentRequest, Processor, SimulatedGateway};
///
/// let store = MemoryStore::new(Default::default());
/// let processor = Processor::new("shop", SimulatedGateway::new(), store)?;
/// let key = IdempotencyKey::new("checkout-7f3a")?;
/// let request = PaymentRequest::new("cus_42", 1250, "EUR")?;
///
/// let first = processor.pay(&key, &request)?;
/// let retry = processor.pay(&key, &request)?; // the network hiccuped; the client retries
/// assert_eq!(retry.outcome, first.outcome);    // the same charge
/// assert!(retry.replayed);                     // and no new one
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Processor<G, S> {
    merchant: Scope,
    gateway: G,
    store: Arc<S>,
    renewer: Renewer,
}

impl<G: Gateway, S: KeyStore<PaymentOutcome> + 'static> Processor<G, S> {
    /// A processor for `merchant`: keys are scoped to the merchant and the customer, as
    /// the scope `merchant/customer`. The merchant id may not contain `/`, so that no two
    /// (merchant, customer) pairs share a scope.
    ///
    /// The processor shares `store` with the thread that renews its leases during gateway
    /// calls, so the store is owned (`'static`): pass it by value or in an `Arc`.
    ///
    /// # Errors
    ///
    /// [`ValidationError::Merchant`] if `merchant` is not a valid scope part (empty, too
    /// long, not printable ASCII, whitespace at either end);
    /// [`ValidationError::MerchantSeparator`] if it contains `/`.
    pub fn new(merchant: &str, gateway: G, store: S) -> Result<Self, ValidationError> {
        let scope = Scope::new(merchant).map_err(ValidationError::Merchant)?;
        if let Some(position) = merchant.find('/') {
            return Err(ValidationError::MerchantSeparator { position });
        }
        Ok(Self { merchant: scope, gateway, store: Arc::new(store), renewer: Renewer::default() })
    }

    /// The gateway (for tests and the demo).
    pub fn gateway(&self) -> &G {
        &self.gateway
    }

    /// The store (for tests and the demo).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// How the renewals of leases during gateway calls went so far: a `lost` renewal is a
    /// gateway call that outlived its claim (the store unreachable for a whole lease).
    pub fn renewals(&self) -> Renewals {
        self.renewer.renewals()
    }

    /// How many gateway calls hold a lease for renewal now (none once every call ended).
    pub fn renewing(&self) -> usize {
        self.renewer.held()
    }

    /// The store key of `key` for this request's customer: merchant and customer scoped
    /// (`merchant/customer`), so two customers who pick the same key never meet. The
    /// merchant has no `/`, so the first `/` splits the scope: distinct pairs give
    /// distinct scopes, and so distinct gateway keys.
    ///
    /// # Errors
    ///
    /// [`ValidationError::ScopeTooLong`] if merchant and customer together exceed a scope.
    pub fn scoped_key(
        &self,
        key: &IdempotencyKey,
        request: &PaymentRequest,
    ) -> Result<ScopedKey, ValidationError> {
        // Both parts are valid scopes already: only the joined length can fail.
        let scope = self.merchant.join(request.customer_scope()).map_err(|error| match error {
            KeyError::TooLong { .. } => ValidationError::ScopeTooLong {
                merchant_bytes: self.merchant.as_str().len(),
                customer_bytes: request.customer().len(),
                max_bytes: KEY_LEN_MAX,
            },
            other => ValidationError::Customer(other),
        })?;
        Ok(ScopedKey::new(scope, key.clone()))
    }

    /// Pays once per key: the first call charges, every repeat with the same key and
    /// request replays the stored outcome without charging.
    ///
    /// # Errors
    ///
    /// [`PayError`]: invalid, key reused, in progress, pending (ambiguous), unavailable
    /// (nothing charged), or a store failure.
    pub fn pay(&self, key: &IdempotencyKey, request: &PaymentRequest) -> Result<Payment, PayError> {
        let scoped = self.scoped_key(key, request)?;
        let _span = idem_core::trace_span!(INFO, "pay", scope = %scoped.scope(), key = %key);
        let claim = self.store.claim(&scoped, &request.fingerprint())?;
        self.act(&scoped, request, claim)
    }

    /// As [`pay`](Self::pay), but while another attempt with this key is in flight, waits
    /// up to `timeout` for its outcome instead of answering `InProgress`.
    ///
    /// # Errors
    ///
    /// As [`pay`](Self::pay); `InProgress` only if `timeout` passes first.
    pub fn pay_wait(
        &self,
        key: &IdempotencyKey,
        request: &PaymentRequest,
        timeout: Duration,
    ) -> Result<Payment, PayError> {
        let scoped = self.scoped_key(key, request)?;
        let _span = idem_core::trace_span!(INFO, "pay", scope = %scoped.scope(), key = %key);
        let claim = self.store.claim_wait(&scoped, &request.fingerprint(), timeout)?;
        self.act(&scoped, request, claim)
    }

    fn act(
        &self,
        scoped: &ScopedKey,
        request: &PaymentRequest,
        claim: Claim<PaymentOutcome>,
    ) -> Result<Payment, PayError> {
        match claim {
            Claim::Replay(outcome) => Ok(Payment { outcome, replayed: true }),
            Claim::InFlight { retry_after } => Err(PayError::InProgress { retry_after }),
            Claim::Acquired(lease) => self.charge(scoped, request, &lease),
            // An earlier attempt crashed or hung after claiming: ask the gateway what
            // happened before charging, never charge blindly.
            Claim::Recover(lease) => {
                idem_core::trace_event!(WARN, "recover: asking the gateway before charging");
                self.recover(scoped, request, &lease)
            }
        }
    }

    /// Settles a recovered claim: the gateway's record if it has one, else a charge.
    fn recover(
        &self,
        scoped: &ScopedKey,
        request: &PaymentRequest,
        lease: &Lease,
    ) -> Result<Payment, PayError> {
        match self.settle_from_lookup(scoped, request, lease)? {
            Some(outcome) => Ok(Payment { outcome, replayed: true }),
            None => {
                // RACE (a recovery whose lookup outlasted its lease): the renewals during
                // the lookup failed, the lease ran out, and another caller recovered the
                // key, heard "not charged" too and charged. A renewal now, fenced by the
                // token, says whether this caller still holds the key: charge only then.
                // Test: `renewal::a_recovery_that_lost_its_lease_during_the_lookup_does_
                // not_charge`.
                let lease = self.store.renew(lease).map_err(|error| match error {
                    StoreError::LeaseLost { .. } => {
                        PayError::InProgress { retry_after: self.store.lease() }
                    }
                    other => other.into(),
                })?;
                self.charge(scoped, request, &lease)
            }
        }
    }

    /// Asks the gateway about `scoped` under a recovered lease: `Some(outcome)` if it was
    /// charged or declined (now stored), `None` if never charged (the caller may charge),
    /// `Err(Pending)` if the gateway cannot say (the claim stays pending), and
    /// `Err(GatewayMismatch)` if it reports a charge that is not this request's.
    fn settle_from_lookup(
        &self,
        scoped: &ScopedKey,
        request: &PaymentRequest,
        lease: &Lease,
    ) -> Result<Option<PaymentOutcome>, PayError> {
        let looked = {
            let _renewed = self.renewed_during_call(lease, Unheld::StaysPending)?;
            self.gateway.lookup(&GatewayKey::derive(scoped))
        };
        let outcome = match looked {
            Lookup::Charged(charge) => PaymentOutcome::Charged(checked(scoped, request, charge)?),
            Lookup::Declined(reason) => PaymentOutcome::Declined(reason),
            Lookup::NotCharged => return Ok(None),
            Lookup::Unknown => return Err(PayError::Pending(scoped.clone())),
        };
        // RACE (a recovery whose lookup outlasted its lease): another caller recovered
        // the key meanwhile, charged, and this lookup read that charge; the key is that
        // caller's to complete, and a retry replays it. Test: `renewal::a_recovery_that_
        // lost_its_lease_during_the_lookup_does_not_charge`.
        if !settled_here(self.store.complete(lease, outcome.clone()))? {
            return Err(PayError::InProgress { retry_after: self.store.lease() });
        }
        Ok(Some(outcome))
    }

    fn charge(
        &self,
        scoped: &ScopedKey,
        request: &PaymentRequest,
        lease: &Lease,
    ) -> Result<Payment, PayError> {
        let gateway_key = GatewayKey::derive(scoped);
        let holding = self.renewed_during_call(lease, Unheld::Released)?;
        let answer = self.gateway.charge(&gateway_key, request);
        // Counted once per call: a renewal that found the lease lost counted it already.
        let lost_unseen = holding.end();
        let outcome = match answer {
            // A charge that is not this request's is never stored: the claim stays
            // pending, as after an ambiguous answer.
            Ok(charge) => PaymentOutcome::Charged(checked(scoped, request, charge)?),
            Err(GatewayError::Declined(reason)) => PaymentOutcome::Declined(reason),
            Err(GatewayError::Refused(reason)) => {
                // Known to have charged nothing: give the key back so a retry can charge.
                self.store.release(lease)?;
                return Err(PayError::Unavailable(reason));
            }
            // Maybe charged: keep the claim pending for reconciliation, never release it
            // and never store an error as the final answer.
            Err(GatewayError::Ambiguous(_)) => {
                idem_core::trace_event!(WARN, "ambiguous gateway answer: the claim stays pending");
                return Err(PayError::Pending(scoped.clone()));
            }
        };
        match self.store.complete(lease, outcome.clone()) {
            Ok(()) => Ok(Payment { outcome, replayed: false }),
            // The lease was renewed during the call, yet lost: the store could not be
            // reached for a whole lease (every renewal failed) and someone recovered the
            // key. A gateway that deduplicates by key answers the recoverer with this same
            // outcome; one that does not may have told a lookup made before this charge
            // landed "not charged" (docs/payments.md says so).
            Err(StoreError::LeaseLost { .. }) => {
                if lost_unseen {
                    self.renewer.count_lost();
                }
                Ok(Payment { outcome, replayed: false })
            }
            Err(other) => Err(other.into()),
        }
    }

    /// Holds `lease` for renewal while a gateway call runs (until the guard drops). If the
    /// renewing thread cannot start, nothing is called: a fresh claim is given back
    /// (`Unheld::Released`), a recovered one, which may have been charged, is left pending.
    fn renewed_during_call(&self, lease: &Lease, unheld: Unheld) -> Result<Holding<'_>, PayError> {
        match self.renewer.hold(&self.store, lease) {
            Ok(holding) => Ok(holding),
            Err(error) => {
                if unheld == Unheld::Released {
                    self.store.release(lease)?;
                }
                Err(PayError::NoRenewer(error))
            }
        }
    }

    /// Settles up to `batch_max` pending claims whose lease ran out (their holder crashed,
    /// hung, or lost the gateway's answer): charged or declined means complete with that
    /// outcome, never charged means release, unknown means leave it and report it. One
    /// failing claim does not stop the batch; a client retry racing a claim is fenced:
    /// exactly one of them settles it.
    pub fn reconcile(&self, batch_max: usize) -> ReconcileReport {
        let _span = idem_core::trace_span!(INFO, "reconcile", merchant = %self.merchant, batch_max);
        let mut report = ReconcileReport::default();
        let pending = match self.store.pending(batch_max) {
            Ok(pending) => pending,
            Err(error) => {
                idem_core::trace_event!(ERROR, %error, "listing the pending claims failed");
                report.listing_failed = Some(error.to_string());
                return report;
            }
        };
        for claim in pending {
            // RACE (a shared store): another merchant's claim asked of this merchant's
            // gateway is "never charged" there, and releasing it would let its client's
            // retry charge again at its own gateway. Test:
            // `reconcile_leaves_another_merchants_claims_alone`.
            if !self.owns(&claim.key) {
                report.other_merchants += 1;
                continue;
            }
            if let Err(error) = self.reconcile_one(&claim, &mut report) {
                report
                    .failed
                    .push(FailedClaim { key: claim.key.clone(), error: error.to_string() });
            }
        }
        idem_core::trace_event!(
            INFO,
            completed = report.completed,
            released = report.released,
            skipped = report.skipped,
            unresolved = report.unresolved.len(),
            mismatched = report.mismatched.len(),
            failed = report.failed.len(),
            "reconciled"
        );
        report
    }

    fn reconcile_one(
        &self,
        pending: &idem_core::PendingClaim,
        report: &mut ReconcileReport,
    ) -> Result<(), PayError> {
        let lease = match self.store.claim(&pending.key, &pending.fingerprint)? {
            Claim::Recover(lease) => lease,
            // Released meanwhile: the key is free; give it back untouched.
            Claim::Acquired(lease) => {
                self.store.release(&lease)?;
                report.skipped += 1;
                return Ok(());
            }
            Claim::InFlight { .. } | Claim::Replay(_) => {
                report.skipped += 1;
                return Ok(());
            }
        };
        let gateway_key = GatewayKey::derive(&pending.key);
        // A gateway whose lookup panics could not answer: the claim stays pending (its
        // lease runs out, a later pass asks again), and the batch goes on.
        let looked = panic::catch_unwind(AssertUnwindSafe(|| self.gateway.lookup(&gateway_key)));
        // The panic's payload is dropped under a guard: one whose drop panics again would
        // end the pass here.
        let looked = looked.unwrap_or_else(|payload| {
            idem_core::drop_panic_payload(payload);
            Lookup::Unknown
        });
        let outcome = match looked {
            Lookup::Charged(charge) if !matches_fingerprint(&charge, &pending.fingerprint) => {
                report.mismatched.push(MismatchedCharge { key: pending.key.clone(), charge });
                return Ok(());
            }
            Lookup::Charged(charge) => PaymentOutcome::Charged(charge),
            Lookup::Declined(reason) => PaymentOutcome::Declined(reason),
            Lookup::NotCharged => {
                if settled_here(self.store.release(&lease))? {
                    report.released += 1;
                } else {
                    report.skipped += 1;
                }
                return Ok(());
            }
            Lookup::Unknown => {
                report.unresolved.push(pending.key.clone());
                return Ok(());
            }
        };
        if settled_here(self.store.complete(&lease, outcome))? {
            report.completed += 1;
        } else {
            report.skipped += 1;
        }
        Ok(())
    }

    /// Whether `key` is one of this merchant's (its scope is `merchant/customer`).
    fn owns(&self, key: &ScopedKey) -> bool {
        let scope = key.scope().as_str();
        scope.strip_prefix(self.merchant.as_str()).is_some_and(|rest| rest.starts_with('/'))
    }

    /// Marks a charge refunded at the gateway. An assignment to a named target, so it is
    /// idempotent by its shape: calling it twice leaves the same state, and it needs no
    /// idempotency key. Returns whether the charge exists.
    pub fn mark_refunded(&self, charge: ChargeId) -> bool {
        self.gateway.set_refunded(charge)
    }
}

/// Whether a recovered claim's fenced write (its completion or release) took effect:
/// `false` if another caller recovered the key meanwhile (the lease had run out during the
/// gateway's lookup, which is not renewed here), and settles it.
///
/// RACE (a reconcile's lookup outlasts its lease): a `pay` recovers the key meanwhile and
/// settles it; the reconcile's write is refused by the token, and the key counts as
/// skipped, not failed. Test: `renewal::a_reconcile_that_lost_its_lease_skips_the_key`.
fn settled_here(write: Result<(), StoreError>) -> Result<bool, StoreError> {
    match write {
        Ok(()) => Ok(true),
        Err(StoreError::LeaseLost { .. }) => Ok(false),
        Err(error) => Err(error),
    }
}

/// `charge` if it is what `request` asked for, else the typed mismatch.
fn checked(
    scoped: &ScopedKey,
    request: &PaymentRequest,
    charge: Charge,
) -> Result<Charge, PayError> {
    match mismatch(&charge, request) {
        None => Ok(charge),
        Some(field) => {
            idem_core::trace_event!(ERROR, %field, "the gateway answered with another charge");
            Err(PayError::GatewayMismatch { key: scoped.clone(), field, charge })
        }
    }
}
