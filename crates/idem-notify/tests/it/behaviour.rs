//! One test per documented behaviour.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use idem_core::{Claim, KeyError, KeyStore, MemoryStore, StoreConfig};
use idem_notify::{
    Channel, Config, ConfigError, InvalidNotification, Jitter, MarkReadError, Notification,
    Outcome, ProviderFault, RetryPolicy, ShutdownReport, SimulatedProvider, SubmitError, Submitted,
    UnknownPolicy, WORKERS_MAX,
};

use idem_testkit::faulty::{Faulty, Op};

use crate::{LEASE, WAIT, drain, note, setup, wait_until};

#[test]
fn a_notification_is_delivered_once_and_duplicates_are_answered() {
    let s = setup(SimulatedProvider::new(), |c| c);
    let n = note("m1");
    assert_eq!(s.notifier.submit(n.clone()).expect("submit"), Submitted::Accepted);
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
    let stats = s.notifier.stats();
    assert_eq!((stats.accepted, stats.sent), (1, 1));
    // After shutdown the notifier refuses, but the id store still answers a replay.
    assert!(matches!(s.notifier.submit(n.clone()), Err(SubmitError::ShutDown)));
    let replay = s
        .store
        .claim(&idem_core::ScopedKey::parse("user:1", "m1").expect("key"), &fingerprint_of(&n));
    assert!(matches!(replay, Ok(Claim::Replay(Outcome::Delivered))));
}

/// The claim a worker of a crashed process took on `n`'s id and never settled.
fn claim_as_a_crashed_attempt(s: &crate::Setup, n: &Notification) {
    let key = idem_core::ScopedKey::parse(n.recipient(), n.message_id()).expect("key");
    let Ok(Claim::Acquired(_lost)) = s.store.claim(&key, &fingerprint_of(n)) else {
        panic!("fresh id")
    };
}

fn fingerprint_of(n: &Notification) -> idem_core::Fingerprint {
    idem_core::Fingerprint::builder("idem-notify/send")
        .str("channel", n.channel().name())
        .str("content", n.content())
        .finish()
}

#[test]
fn duplicate_after_delivery_is_answered_with_the_outcome() {
    let s = setup(SimulatedProvider::new(), |c| c);
    let n = note("m1");
    s.notifier.submit(n.clone()).expect("submit");
    // Wait for the worker without stopping it (the count moves after the store write).
    wait_until("the delivery", WAIT, || s.notifier.stats().sent == 1);
    assert_eq!(
        s.notifier.submit(n.clone()).expect("submit"),
        Submitted::Duplicate(Outcome::Delivered)
    );
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
    assert_eq!(s.notifier.stats().duplicates, 1);
}

#[test]
fn same_id_different_content_is_refused() {
    let s = setup(SimulatedProvider::new(), |c| c);
    s.notifier.submit(note("m1")).expect("submit");
    let other = Notification::new("m1", "user:1", Channel::Email, "other text").expect("valid");
    assert!(matches!(s.notifier.submit(other), Err(SubmitError::ContentMismatch(_))));
    drain(&s.notifier);
}

#[test]
fn invalid_notifications_are_refused_by_field() {
    let long = "x".repeat(idem_notify::CONTENT_LEN_MAX + 1);
    let cases = [
        (
            Notification::new("", "u", Channel::Sms, "hi"),
            InvalidNotification::MessageId(idem_core::KeyError::Empty),
        ),
        (
            Notification::new("m", "", Channel::Sms, "hi"),
            InvalidNotification::Recipient(idem_core::KeyError::Empty),
        ),
        (
            Notification::new("m", "u", Channel::Sms, ""),
            InvalidNotification::Content { len_bytes: 0 },
        ),
        (
            Notification::new("m", "u", Channel::Sms, &long),
            InvalidNotification::Content { len_bytes: long.len() },
        ),
    ];
    for (got, expected) in cases {
        assert_eq!(got, Err(expected));
    }
}

#[test]
fn transient_failures_back_off_within_bounds_then_deliver() {
    let s = setup(SimulatedProvider::new(), |c| c);
    s.notifier.provider().inject(ProviderFault::Throttle);
    s.notifier.provider().inject(ProviderFault::FailBeforeSend);
    let n = note("m1");
    s.notifier.submit(n.clone()).expect("submit");
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
    let sleeps = s.sleeps.0.lock().expect("lock").clone();
    assert_eq!(sleeps.len(), 2);
    assert!(
        sleeps[0] <= Duration::from_millis(100) && sleeps[1] <= Duration::from_millis(200),
        "{sleeps:?}"
    );
    assert_eq!(s.notifier.stats().retries, 2);
}

#[test]
fn attempts_stop_at_the_cap_and_the_dead_letter_says_why() {
    let s = setup(SimulatedProvider::new(), |c| c);
    for _ in 0..4 {
        s.notifier.provider().inject(ProviderFault::Throttle);
    }
    let n = note("m1");
    s.notifier.submit(n.clone()).expect("submit");
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 0);
    let dead = s.notifier.dead_letters();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "gave up after 4 attempts: throttled");
    assert_eq!(s.sleeps.0.lock().expect("lock").len(), 3, "no wait after the last attempt");
}

#[test]
fn a_dead_letter_that_was_never_delivered_can_be_resubmitted() {
    // Every attempt answered "not delivered": throttled, refused before sending, a
    // timeout the provider's status settles as not delivered, and a permanent refusal.
    let faults = [
        vec![ProviderFault::Throttle; 4],
        vec![ProviderFault::FailBeforeSend; 4],
        vec![ProviderFault::TimeoutWithoutDelivery; 4],
        vec![ProviderFault::Permanent],
    ];
    for faults in faults {
        let s = setup(SimulatedProvider::new(), |c| c);
        faults.iter().for_each(|f| s.notifier.provider().inject(f.clone()));
        let n = note("m1");
        assert_eq!(s.notifier.submit(n.clone()).expect("submit"), Submitted::Accepted);
        wait_until("the dead letter", WAIT, || s.notifier.stats().dead_lettered == 1);
        let dead = s.notifier.dead_letters();
        assert!(!dead[0].may_have_delivered, "{faults:?}: {dead:?}");
        // The id was given back: the same id is sent again, once.
        assert_eq!(s.notifier.submit(n.clone()).expect("resubmit"), Submitted::Accepted);
        drain(&s.notifier);
        assert_eq!(s.notifier.provider().deliveries(&n), 1, "{faults:?}");
    }
}

#[test]
fn the_dead_letter_list_keeps_the_latest_and_counts_what_it_drops() {
    let s = setup(SimulatedProvider::new(), |c| c.reports_max(100).queue_capacity(10_000));
    let content = "x".repeat(1024);
    for i in 0..5_000 {
        s.notifier.provider().inject(ProviderFault::Permanent);
        let n =
            Notification::new(&format!("m{i}"), "user:1", Channel::Email, &content).expect("valid");
        // One at a time, so that fault i meets message i.
        s.notifier.submit(n).expect("submit");
        wait_until("the dead letter", WAIT, || s.notifier.stats().dead_lettered == i + 1);
    }
    let dead = s.notifier.dead_letters();
    assert_eq!(dead.len(), 100, "bounded by reports_max");
    assert_eq!(dead[0].notification.message_id(), "m4900", "the latest kept, oldest first");
    assert_eq!(s.notifier.stats().reports_dropped, 4_900);
    drain(&s.notifier);
}

#[test]
fn a_dead_letter_after_an_unsettled_ambiguous_send_is_final() {
    // The provider forgets ids, so it cannot settle a timeout; under Resend the retries
    // go on and end dead-lettered, having possibly delivered.
    let s = setup(SimulatedProvider::new().forgetting_ids(), |c| c.unknown(UnknownPolicy::Resend));
    s.notifier.provider().inject(ProviderFault::TimeoutWithoutDelivery);
    for _ in 0..3 {
        s.notifier.provider().inject(ProviderFault::Throttle);
    }
    let n = note("m1");
    s.notifier.submit(n.clone()).expect("submit");
    wait_until("the dead letter", WAIT, || s.notifier.stats().dead_lettered == 1);
    assert!(s.notifier.dead_letters()[0].may_have_delivered);
    let again = s.notifier.submit(n.clone()).expect("resubmit");
    assert!(matches!(again, Submitted::Duplicate(Outcome::DeadLettered(_))), "{again:?}");
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 0, "never resent");
}

#[test]
fn permanent_errors_are_not_retried() {
    let s = setup(SimulatedProvider::new(), |c| c);
    s.notifier.provider().inject(ProviderFault::Permanent);
    s.notifier.submit(note("m1")).expect("submit");
    drain(&s.notifier);
    let stats = s.notifier.stats();
    assert_eq!((stats.retries, stats.dead_lettered, stats.sent), (0, 1, 0));
}

#[test]
fn ambiguous_send_is_reconciled_by_status_not_repeated() {
    // Delivered, then the answer lost: status says delivered, nothing is resent, even by a
    // provider that would not deduplicate a resend.
    let s = setup(SimulatedProvider::new(), |c| c);
    s.notifier.provider().inject(ProviderFault::DeliverThenTimeout);
    let n = note("m1");
    s.notifier.submit(n.clone()).expect("submit");
    drain(&s.notifier);
    assert_eq!((s.notifier.provider().deliveries(&n), s.notifier.stats().retries), (1, 0));
    // Lost before delivering: status says not delivered; it is sent again, once.
    let s = setup(SimulatedProvider::new(), |c| c);
    s.notifier.provider().inject(ProviderFault::TimeoutWithoutDelivery);
    s.notifier.submit(n.clone()).expect("submit");
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
}

#[test]
fn without_status_an_ambiguous_send_is_unresolved_unless_at_least_once() {
    let n = note("m1");
    let s = setup(SimulatedProvider::new().forgetting_ids(), |c| c);
    s.notifier.provider().inject(ProviderFault::DeliverThenTimeout);
    s.notifier.submit(n.clone()).expect("submit");
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
    assert_eq!(s.notifier.unresolved(), vec![n.clone()]);
    let s = setup(SimulatedProvider::new().forgetting_ids(), |c| c.unknown(UnknownPolicy::Resend));
    s.notifier.provider().inject(ProviderFault::DeliverThenTimeout);
    s.notifier.submit(n.clone()).expect("submit");
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 2, "at least once: a second ping");
}

#[test]
fn a_crash_after_sending_is_settled_by_status_on_replay() {
    let s = setup(SimulatedProvider::new().without_status(), |c| c);
    let n = note("m1");
    // A worker of a crashed process claimed the id, delivered, and died before recording.
    claim_as_a_crashed_attempt(&s, &n);
    use idem_notify::Provider;
    s.notifier.provider().send(&n).expect("delivered");
    assert_eq!(s.notifier.submit(n.clone()).expect("submit"), Submitted::DuplicateInFlight);
    s.clock.advance(LEASE);
    // The replay after the lease recovers; this provider cannot say: unresolved, not resent.
    assert_eq!(s.notifier.submit(n.clone()).expect("submit"), Submitted::Recovering);
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
    assert_eq!(s.notifier.stats().unresolved, 1);
}

#[test]
fn a_crash_after_sending_with_status_completes_without_resending() {
    let s = setup(SimulatedProvider::new(), |c| c);
    let n = note("m1");
    claim_as_a_crashed_attempt(&s, &n);
    use idem_notify::Provider;
    s.notifier.provider().send(&n).expect("delivered");
    s.clock.advance(LEASE);
    assert_eq!(s.notifier.submit(n.clone()).expect("submit"), Submitted::Recovering);
    drain(&s.notifier);
    // Stored as delivered; not counted as sent by this notifier, which sent nothing.
    assert_eq!((s.notifier.provider().deliveries(&n), s.notifier.stats().sent), (1, 0));
}

/// A crashed attempt may have delivered. Under `Resend` its recovery asks the provider,
/// which cannot say (`Unknown`), so it sends again, and that send fails for good: the dead
/// letter says the message may have been delivered, and it is final (a resubmission is
/// answered with it, never sent).
#[test]
fn a_recovery_resent_under_resend_that_fails_for_good_may_have_delivered() {
    let s = setup(SimulatedProvider::new().without_status(), |c| c.unknown(UnknownPolicy::Resend));
    let n = note("m1");
    claim_as_a_crashed_attempt(&s, &n);
    use idem_notify::Provider;
    s.notifier.provider().send(&n).expect("delivered by the crashed attempt");
    s.clock.advance(LEASE);
    s.notifier.provider().inject(ProviderFault::Permanent);
    assert_eq!(s.notifier.submit(n.clone()).expect("submit"), Submitted::Recovering);
    wait_until("the dead letter", WAIT, || s.notifier.stats().dead_lettered == 1);
    let dead = s.notifier.dead_letters();
    assert!(dead[0].may_have_delivered, "the crashed attempt may have delivered: {dead:?}");
    let again = s.notifier.submit(n.clone()).expect("resubmit");
    assert!(matches!(again, Submitted::Duplicate(Outcome::DeadLettered(_))), "{again:?}");
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1, "never sent again");
}

/// Under `Resend`, a recovery the provider says was not delivered, whose one send is
/// then refused for good, reached nobody: its dead letter says so, and the id is given
/// back, so a resubmission (the address fixed) is sent.
#[test]
fn a_recovery_the_provider_says_was_not_delivered_gives_its_id_back_when_refused() {
    let s = setup(SimulatedProvider::new(), |c| c.unknown(UnknownPolicy::Resend));
    let n = note("m1");
    claim_as_a_crashed_attempt(&s, &n);
    s.clock.advance(LEASE);
    s.notifier.provider().inject(ProviderFault::Permanent);
    assert_eq!(s.notifier.submit(n.clone()).expect("submit"), Submitted::Recovering);
    wait_until("the dead letter", WAIT, || s.notifier.stats().dead_lettered == 1);
    let dead = s.notifier.dead_letters();
    assert!(!dead[0].may_have_delivered, "the provider said not delivered: {dead:?}");
    assert_eq!(s.notifier.submit(n.clone()).expect("resubmit"), Submitted::Accepted);
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1, "sent once the address was fixed");
}

#[test]
fn concurrent_duplicates_from_many_threads_deliver_once() {
    let s = setup(SimulatedProvider::new().forgetting_ids(), |c| c.workers(2));
    let n = note("m1");
    let barrier = Barrier::new(8);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let (notifier, n, barrier) = (&s.notifier, n.clone(), &barrier);
            scope.spawn(move || {
                barrier.wait();
                notifier.submit(n).expect("submit");
            });
        }
    });
    drain(&s.notifier);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
    assert_eq!(s.notifier.stats().accepted, 1);
}

#[test]
fn a_restart_replays_through_the_same_store_and_sends_nothing_twice() {
    let s = setup(SimulatedProvider::new().forgetting_ids(), |c| c);
    let n = note("m1");
    s.notifier.submit(n.clone()).expect("submit");
    drain(&s.notifier);
    // The restarted process: a new notifier over the same (durable) store replays its
    // queue.
    let restarted = idem_notify::Notifier::start(
        SimulatedProvider::new().forgetting_ids(),
        s.store.clone(),
        idem_notify::Config::default(),
    )
    .expect("workers start");
    assert_eq!(
        restarted.submit(n.clone()).expect("submit"),
        Submitted::Duplicate(Outcome::Delivered)
    );
    restarted.shutdown(Duration::from_secs(5));
    assert_eq!(restarted.provider().deliveries(&n), 0);
}

#[test]
fn fan_out_pings_each_channel_once_even_when_retried() {
    let s = setup(SimulatedProvider::new().forgetting_ids(), |c| c);
    let all = Notification::fan_out(
        "order-9",
        "user:1",
        &[Channel::Email, Channel::Sms, Channel::Push],
        "shipped",
    )
    .expect("valid");
    for _ in 0..3 {
        for n in &all {
            s.notifier.submit(n.clone()).expect("submit");
        }
    }
    drain(&s.notifier);
    for n in &all {
        assert_eq!(s.notifier.provider().deliveries(n), 1, "{}", n.message_id());
    }
}

#[test]
fn a_full_queue_refuses_and_drops_nothing_silently() {
    let s = setup(SimulatedProvider::new(), |c| c.queue_capacity(1));
    // Fill the queue faster than one worker drains it: some submissions are refused, and
    // every accepted one is delivered; a refused id is free to submit again.
    let notes: Vec<Notification> = (0..50).map(|i| note(&format!("m{i}"))).collect();
    let mut refused = Vec::new();
    for n in &notes {
        match s.notifier.submit(n.clone()) {
            Ok(Submitted::Accepted) => {}
            Err(SubmitError::QueueFull { capacity: 1 }) => refused.push(n.clone()),
            other => panic!("unexpected {other:?}"),
        }
    }
    for n in &refused {
        let accepted = (0..1_000_000).any(|_| match s.notifier.submit(n.clone()) {
            Ok(Submitted::Accepted) => true,
            Err(SubmitError::QueueFull { .. }) => {
                std::thread::yield_now();
                false
            }
            other => panic!("unexpected {other:?}"),
        });
        assert!(accepted, "the queue never drained");
    }
    drain(&s.notifier);
    for n in &notes {
        assert_eq!(s.notifier.provider().deliveries(n), 1, "{}", n.message_id());
    }
    assert_eq!(
        s.notifier.stats().refused,
        refused.len() as u64 + (s.notifier.stats().refused - refused.len() as u64)
    );
}

#[test]
fn shutdown_without_a_deadline_drains_everything() {
    let s = setup(SimulatedProvider::new(), |c| c.queue_capacity(100));
    let notes: Vec<Notification> = (0..20).map(|i| note(&format!("m{i}"))).collect();
    for n in &notes {
        s.notifier.submit(n.clone()).expect("submit");
    }
    // The longest deadline there is: nothing overflows, every message is sent.
    let report = s.notifier.shutdown(Duration::MAX);
    assert!(report.drained && report.left.is_empty(), "{report:?}");
    assert_eq!(s.notifier.stats().sent, notes.len() as u64);
    let again = s.notifier.shutdown(Duration::MAX);
    assert_eq!(again, ShutdownReport { drained: true, left: Vec::new() }, "idempotent");
}

#[test]
fn shutdown_past_its_deadline_reports_what_was_left_and_frees_the_ids() {
    let s = setup(SimulatedProvider::new(), |c| c.queue_capacity(100));
    // With a zero deadline, whatever the worker has not started yet is left behind.
    let notes: Vec<Notification> = (0..20).map(|i| note(&format!("m{i}"))).collect();
    for n in &notes {
        s.notifier.submit(n.clone()).expect("submit");
    }
    let report = s.notifier.shutdown(Duration::ZERO);
    let sent = s.notifier.stats().sent as usize;
    assert_eq!(
        report.left.len() + sent + s.notifier.stats().dead_lettered as usize,
        notes.len(),
        "{report:?}"
    );
    assert_eq!(report.drained, report.left.is_empty());
    // Every id left behind was released: a later replay is accepted.
    for id in &report.left {
        let key = idem_core::ScopedKey::parse("user:1", id).expect("key");
        let n = note(id);
        assert!(matches!(s.store.claim(&key, &fingerprint_of(&n)), Ok(Claim::Acquired(_))), "{id}");
    }
}

#[test]
fn mark_read_is_idempotent_by_shape() {
    let s = setup(SimulatedProvider::new(), |c| c);
    assert_eq!(s.notifier.mark_read("user:1", "m1"), Ok(true));
    assert_eq!(s.notifier.mark_read("user:1", "m1"), Ok(false));
    assert!(s.notifier.is_read("user:1", "m1"));
    drain(&s.notifier);
    let s = setup(SimulatedProvider::new(), |c| c.read_max(1));
    assert_eq!(s.notifier.mark_read("user:1", "a"), Ok(true));
    let full = s.notifier.mark_read("user:1", "b");
    assert_eq!(full, Err(MarkReadError::ReadSetFull { read_max: 1 }));
    drain(&s.notifier);
}

#[test]
fn mark_read_with_an_invalid_id_is_an_error_that_names_it() {
    let s = setup(SimulatedProvider::new(), |c| c);
    let cases = [
        ("", "m1", InvalidNotification::Recipient(KeyError::Empty)),
        ("user:1", "", InvalidNotification::MessageId(KeyError::Empty)),
        (
            "user:1",
            "m1 ",
            InvalidNotification::MessageId(KeyError::SurroundingSpace { position: 2 }),
        ),
    ];
    for (recipient, id, expected) in cases {
        let got = s.notifier.mark_read(recipient, id);
        assert_eq!(got, Err(MarkReadError::Invalid(expected)), "{recipient:?} {id:?}");
    }
    assert_eq!(s.notifier.mark_read("user:1", "m1"), Ok(true), "nothing was marked before");
    drain(&s.notifier);
}

#[test]
fn bad_configuration_is_a_typed_error_naming_the_setting() {
    let retry = |attempts_max, base| RetryPolicy { attempts_max, base, ..RetryPolicy::default() };
    let cases = [
        (Config::builder().workers(0), "workers", "0".to_string()),
        (Config::builder().workers(WORKERS_MAX + 1), "workers", (WORKERS_MAX + 1).to_string()),
        (Config::builder().queue_capacity(0), "queue_capacity", "0".into()),
        (Config::builder().queue_capacity(usize::MAX), "queue_capacity", usize::MAX.to_string()),
        (Config::builder().retry(retry(0, Duration::ZERO)), "retry.attempts_max", "0".into()),
        (
            Config::builder().retry(retry(u32::MAX, Duration::ZERO)),
            "retry.attempts_max",
            u32::MAX.to_string(),
        ),
        (
            Config::builder().retry(retry(3, Duration::MAX)),
            "retry.base",
            format!("{:?}", Duration::MAX),
        ),
        (Config::builder().read_max(0), "read_max", "0".into()),
        (Config::builder().reports_max(0), "reports_max", "0".into()),
    ];
    for (builder, setting, value) in cases {
        let error: ConfigError = builder.build().map(|_| ()).expect_err(setting);
        assert_eq!((error.setting, error.value.as_str()), (setting, value.as_str()));
        assert!(error.to_string().starts_with(&format!("{setting} is {value}; it must be")));
    }
    let at_limits = Config::builder().workers(WORKERS_MAX).queue_capacity(1).build();
    assert_eq!(at_limits.map(|c| c.workers()).ok(), Some(WORKERS_MAX));
}

#[test]
fn backoff_bounds_double_up_to_the_cap_and_jitter_stays_inside() {
    let policy = RetryPolicy {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(1),
        attempts_max: 10,
        seed: 3,
    };
    let bounds: Vec<u64> = (0..6).map(|a| policy.bound(a).as_millis() as u64).collect();
    assert_eq!(bounds, vec![100, 200, 400, 800, 1000, 1000]);
    let mut jitter = Jitter::new(3);
    let mut seen_high = false;
    for attempt in 0..40 {
        for _ in 0..50 {
            let d = policy.delay(attempt % 8, &mut jitter);
            assert!(d <= policy.bound(attempt % 8));
            seen_high |= d > policy.bound(attempt % 8) / 2;
        }
    }
    assert!(seen_high, "full jitter spreads over the whole range");
    assert_eq!(
        policy.bound(200),
        Duration::from_secs(1),
        "huge attempt numbers saturate at the cap"
    );
}

#[test]
fn a_retry_policy_of_maximal_durations_neither_panics_nor_overflows() {
    let longest = idem_notify::RETRY_CAP_MAX;
    let retry = RetryPolicy { base: longest, cap: longest, attempts_max: 3, seed: 1 };
    let past = RetryPolicy { cap: longest + Duration::from_nanos(1), ..retry };
    let refused = Config::builder().retry(past).build().map(|_| ());
    assert!(refused.is_err_and(|e| e.to_string().contains("retry.cap")));
    let s = setup(SimulatedProvider::new(), |c| c.retry(retry));
    s.notifier.provider().inject(ProviderFault::Throttle);
    s.notifier.provider().inject(ProviderFault::Throttle);
    let n = note("m1");
    s.notifier.submit(n.clone()).expect("submit");
    // No deadline: a shutdown with a finite one starts no retry whose pause outlasts it.
    assert!(s.notifier.shutdown(Duration::MAX).drained);
    assert_eq!(s.notifier.provider().deliveries(&n), 1);
    let waits = s.sleeps.0.lock().expect("lock").clone();
    assert_eq!(waits.len(), 2, "two backoffs (the second doubles the cap), recorded, not slept");
    let zero = RetryPolicy { base: Duration::ZERO, cap: Duration::ZERO, ..retry };
    assert_eq!(zero.delay(0, &mut Jitter::new(1)), Duration::ZERO);
    let max = RetryPolicy { base: Duration::MAX, cap: Duration::MAX, ..retry };
    assert!(max.delay(40, &mut Jitter::new(1)) <= Duration::MAX, "no overflow drawing it");
}

/// A million notifications through one notifier, the id store's results expiring as the
/// clock moves: what the notifier and its store keep stays bounded by their limits (the
/// store's records by its capacity and TTL, the report lists by `reports_max`), not by
/// how many messages went through.
#[test]
fn a_million_notifications_keep_memory_flat() {
    let s = setup(SimulatedProvider::new().forgetting_ids(), |c| c.reports_max(10).workers(2));
    let ttl = idem_core::StoreConfig::RESULT_TTL_DEFAULT;
    for i in 0..1_000_000u32 {
        if i % 5_000 == 0 {
            s.notifier.provider().inject(ProviderFault::Permanent);
        }
        let n = Notification::new(&format!("m{i}"), "user:1", Channel::Push, "hi").expect("ok");
        while let Err(SubmitError::QueueFull { .. }) = s.notifier.submit(n.clone()) {
            std::thread::yield_now();
        }
        if i % 10_000 == 9_999 {
            wait_until("the queue to drain", WAIT, || {
                let st = s.notifier.stats();
                st.sent + st.dead_lettered >= st.accepted
            });
            s.clock.advance(ttl);
            let stats = s.store.stats();
            assert!(stats.records <= 10_000 && stats.expiry_entries <= 10_002, "{i}: {stats:?}");
            assert!(s.notifier.dead_letters().len() <= 10);
        }
    }
    drain(&s.notifier);
}

#[test]
fn channels_print_and_parse_back_and_an_unknown_one_is_named() {
    for channel in [Channel::Email, Channel::Sms, Channel::Push] {
        assert_eq!(channel.to_string().parse::<Channel>(), Ok(channel));
    }
    let refused = "Email".parse::<Channel>().expect_err("names are lower case");
    assert_eq!(refused.to_string(), "unknown channel \"Email\": use email, sms or push");
    let long = "x".repeat(10_000).parse::<Channel>().expect_err("unknown");
    assert_eq!(long.name.len(), 64, "the error keeps a bounded prefix");
}

/// A completion the id store refused is counted, never silent, and the id stays in
/// flight: a duplicate submission is answered as in flight, not sent again.
#[test]
fn a_completion_the_id_store_refuses_is_counted_and_the_id_stays_in_flight() {
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let config = Config::builder().workers(1).build().expect("valid");
    let provider = SimulatedProvider::new();
    // An id store whose completions fail: the notifier cannot store what it delivered.
    let failing = Faulty::new(store).failing(Op::Complete, "the disk is full");
    let notifier = idem_notify::Notifier::start(provider, failing, config).expect("start");
    let n = note("m1");
    notifier.submit(n.clone()).expect("submit");
    wait_until("the refused completion", WAIT, || notifier.stats().settle_failed == 1);
    assert_eq!(notifier.submit(n.clone()).expect("submit"), Submitted::DuplicateInFlight);
    assert!(notifier.shutdown(Duration::from_secs(30)).drained);
    assert_eq!(notifier.provider().deliveries(&n), 1);
}
