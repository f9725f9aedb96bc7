//! One test per documented behaviour.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use idem_pool::{ConfigError, Error, HealthCheck, Pool};

use crate::{TestManager, WAIT_LIMIT, pool, wait_for_waiters, wait_until};

#[test]
fn drop_gives_back_and_the_connection_is_reused() {
    let (pool, _) = pool(2, |b| b);
    let id = pool.get().expect("get").id;
    assert_eq!(pool.state().idle, 1);
    assert_eq!(pool.get().expect("get").id, id, "the idle connection is reused");
    assert_eq!(pool.state().created, 1);
    pool.assert_invariants();
}

#[test]
fn double_release_is_a_counted_no_op() {
    let (pool, _) = pool(1, |b| b);
    let mut conn = pool.get().expect("get");
    assert!(conn.release());
    assert!(conn.is_released());
    assert!(!conn.release());
    drop(conn); // the drop after a release is a no-op too
    let state = pool.state();
    assert_eq!((state.idle, state.in_use, state.double_releases), (1, 0, 1));
    pool.assert_invariants();
}

#[test]
#[should_panic(expected = "use of a PooledConnection after release")]
fn use_after_release_panics_instead_of_touching_the_next_holder() {
    let (pool, _) = pool(1, |b| b);
    let mut conn = pool.get().expect("get");
    conn.release();
    let _next = pool.get().expect("get");
    let _ = conn.id;
}

#[test]
fn stale_loan_after_relend_leaves_the_new_holder_alone() {
    let (pool, _) = pool(1, |b| b);
    let loan = pool.get().expect("get").into_loan();
    let stale = loan.clone();
    assert!(loan.release());
    assert!(!loan.release(), "double release");
    let holder = pool.get().expect("get");
    holder.hold();
    assert!(!stale.release(), "stale release");
    assert!(!pool.release(&stale));
    let state = pool.state();
    assert_eq!((state.in_use, state.double_releases, state.stale_releases), (1, 1, 2));
    assert!(pool.try_get().is_none(), "the holder still has the only connection");
    holder.unhold();
    pool.assert_invariants();
}

#[test]
fn loan_released_from_another_thread() {
    let (pool, _) = pool(1, |b| b);
    let loan = pool.get().expect("get").into_loan();
    assert_eq!(pool.state().in_use, 1);
    let released = thread::spawn(move || loan.release()).join().expect("thread");
    assert!(released);
    assert_eq!(pool.state().idle, 1);
}

/// A manager that writes only `connect`: the default checks pass every connection on
/// checkout and know of no breakage on return, so the one connection is lent again.
#[test]
fn a_manager_that_only_connects_gets_healthy_defaults() {
    #[derive(Debug)]
    struct OnlyConnects;
    impl idem_pool::Manager for OnlyConnects {
        type Connection = u8;
        type Error = crate::TestError;
        fn connect(&self) -> Result<u8, crate::TestError> {
            Ok(7)
        }
    }
    let pool = Pool::builder()
        .max_size(1)
        .health_check(HealthCheck::OnCheckout)
        .maintenance_interval(None)
        .build(OnlyConnects)
        .expect("valid config");
    assert_eq!(*pool.get().expect("checked and lent"), 7);
    assert_eq!(*pool.get().expect("kept and lent again"), 7);
    let state = pool.state();
    assert_eq!((state.created, state.discarded, state.idle), (1, 0, 1));
    pool.assert_invariants();
}

#[test]
fn broken_connections_are_discarded_never_lent() {
    let (pool, _) = pool(1, |b| b);
    let mut conn = pool.get().expect("get");
    let first = conn.id;
    conn.mark_broken();
    drop(conn);
    let conn = pool.get().expect("get");
    assert_ne!(conn.id, first, "a broken connection is replaced");
    pool.manager().broken.lock().expect("lock").insert(conn.id);
    let second = conn.id;
    drop(conn);
    assert_ne!(pool.get().expect("get").id, second, "has_broken on return discards");
    assert_eq!(pool.state().discarded, 2);
}

#[test]
fn failed_health_check_discards_and_lends_another() {
    let (pool, _) = pool(2, |b| b);
    let first = pool.get().expect("get").id;
    pool.manager().fail_checks.store(true, Ordering::SeqCst);
    // The idle connection fails its check and is closed; a new one is made (a connection
    // just made is not checked again).
    let conn = pool.get().expect("get");
    assert_ne!(conn.id, first);
    let state = pool.state();
    assert_eq!((state.discarded, state.created, state.size), (1, 2, 1));
}

#[test]
fn no_health_check_when_disabled() {
    let (pool, _) = pool(1, |b| b.health_check(HealthCheck::Never));
    drop(pool.get().expect("get"));
    pool.manager().fail_checks.store(true, Ordering::SeqCst);
    assert!(pool.get().is_ok());
}

#[test]
fn max_lifetime_closes_old_connections() {
    let (pool, clock) =
        pool(1, |b| b.max_lifetime(Some(Duration::from_secs(60))).idle_timeout(None));
    let first = pool.get().expect("get").id;
    clock.advance(Duration::from_secs(59));
    assert_eq!(pool.get().expect("get").id, first);
    clock.advance(Duration::from_secs(1));
    assert_ne!(pool.get().expect("get").id, first, "past its lifetime: replaced");
}

#[test]
fn idle_timeout_closes_idle_connections() {
    let (pool, clock) = pool(2, |b| b.idle_timeout(Some(Duration::from_secs(10))));
    let first = pool.get().expect("get").id;
    clock.advance(Duration::from_secs(10));
    pool.maintain();
    assert_eq!(pool.state().size, 0, "maintenance closed the idle connection");
    assert_ne!(pool.get().expect("get").id, first);
}

#[test]
fn timeout_error_carries_the_last_cause() {
    let (pool, _) = pool(1, |b| b.connection_timeout(Duration::from_millis(50)));
    pool.manager().refuse_connect.store(true, Ordering::SeqCst);
    match pool.get() {
        Err(error @ Error::Timeout { in_use: 0, max_size: 1, last_error: Some(_), .. }) => {
            let cause = std::error::Error::source(&error).map(ToString::to_string);
            assert_eq!(cause.as_deref(), Some("connection refused"));
            // The message alone says why, as r2d2's does: a log line needs no chain walk.
            let message = error.to_string();
            let tail = "waiting for a connection (0 of 1 in use); last connection error: \
                        connection refused";
            assert!(message.ends_with(tail), "{message}");
        }
        other => panic!("expected a timeout with a cause, got {other:?}"),
    }
    assert_eq!(pool.state().timeouts, 1);
    pool.manager().refuse_connect.store(false, Ordering::SeqCst);
    assert!(pool.get().is_ok(), "the pool recovers when connecting works again");
}

#[test]
fn timeout_when_every_connection_is_lent() {
    let (pool, _) = pool(1, |b| b);
    let _held = pool.get().expect("get");
    let error = pool.get_timeout(Duration::from_millis(20)).expect_err("none free");
    assert!(matches!(error, Error::Timeout { in_use: 1, max_size: 1, last_error: None, .. }));
    assert!(error.to_string().ends_with("waiting for a connection (1 of 1 in use)"), "{error}");
    assert!(pool.try_get().is_none(), "nothing idle and no room: none, at once");
    assert_eq!(pool.state().timeouts, 1, "a try_get that found nothing is no timeout");
}

#[test]
fn try_get_answers_none_for_a_closed_pool_and_a_failed_connect() {
    let (pool, _) = pool(2, |b| b);
    pool.manager().refuse_connect.store(true, Ordering::SeqCst);
    assert!(pool.try_get().is_none(), "the connect failed");
    pool.manager().refuse_connect.store(false, Ordering::SeqCst);
    pool.close();
    assert!(pool.try_get().is_none(), "closed");
    assert_eq!(pool.state().timeouts, 0);
    pool.assert_invariants();
}

#[test]
fn close_wakes_waiters_and_is_idempotent() {
    let (pool, _) = pool(1, |b| b.connection_timeout(Duration::from_secs(30)));
    let held = pool.get().expect("get");
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let pool = pool.clone();
            thread::spawn(move || pool.get().map(|_| ()))
        })
        .collect();
    wait_for_waiters(&pool, 3);
    pool.close();
    pool.close();
    for waiter in waiters {
        assert!(matches!(waiter.join().expect("waiter"), Err(Error::Closed)));
    }
    assert!(matches!(pool.get(), Err(Error::Closed)));
    drop(held);
    assert_eq!(pool.state().size, 0, "a connection returned to a closed pool is closed");
    assert!(pool.is_closed());
}

#[test]
fn waiters_are_served_in_arrival_order() {
    let (pool, _) = pool(1, |b| b.connection_timeout(Duration::from_secs(30)));
    let held = pool.get().expect("get");
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..4 {
        let (waiting, order) = (pool.clone(), order.clone());
        waiters.push(thread::spawn(move || {
            let conn = waiting.get().expect("get");
            order.lock().expect("lock").push(i);
            drop(conn);
        }));
        wait_for_waiters(&pool, i + 1);
    }
    drop(held);
    for waiter in waiters {
        waiter.join().expect("waiter");
    }
    assert_eq!(*order.lock().expect("lock"), vec![0, 1, 2, 3]);
}

#[test]
fn min_idle_is_made_at_build_and_refilled_after_discards() {
    let (pool, _) = pool(4, |b| b.min_idle(2));
    assert_eq!(pool.state().idle, 2);
    let mut a = pool.get().expect("get");
    let mut b = pool.get().expect("get");
    a.mark_broken();
    b.mark_broken();
    drop((a, b));
    assert_eq!(pool.state().idle, 0);
    pool.maintain();
    let state = pool.state();
    assert_eq!((state.idle, state.created, state.discarded), (2, 4, 2));
}

#[test]
fn leak_threshold_counts_each_long_loan_once() {
    let (pool, clock) = pool(2, |b| b.leak_threshold(Some(Duration::from_secs(5))));
    // Made and given back: the loans below take it off the shelf.
    drop(pool.get().expect("get"));
    let held = pool.get().expect("get");
    pool.maintain();
    assert_eq!(pool.state().leaks_suspected, 0);
    clock.advance(Duration::from_secs(5));
    pool.maintain();
    pool.maintain();
    assert_eq!(pool.state().leaks_suspected, 1);
    // The same slot lent again is a new loan, counted anew once it too is held too long.
    let slot = held.loan_id().slot();
    drop(held);
    let again = pool.get().expect("get");
    assert_eq!(again.loan_id().slot(), slot);
    pool.maintain();
    assert_eq!(pool.state().leaks_suspected, 1);
    clock.advance(Duration::from_secs(5));
    pool.maintain();
    assert_eq!(pool.state().leaks_suspected, 2);
}

#[test]
fn a_wait_of_duration_max_waits_until_served() {
    let (pool, _) = pool(1, |b| b);
    let held = pool.get().expect("get");
    let waiter = {
        let pool = pool.clone();
        thread::spawn(move || pool.get_timeout(Duration::MAX).map(|conn| conn.id))
    };
    wait_for_waiters(&pool, 1);
    let id = held.id;
    drop(held);
    assert_eq!(waiter.join().expect("waiter").expect("served, not timed out"), id);
}

#[test]
fn too_many_waiters_is_refused() {
    let (pool, _) = pool(1, |b| b.waiters_max(1).connection_timeout(Duration::from_secs(30)));
    let held = pool.get().expect("get");
    let waiter = {
        let pool = pool.clone();
        thread::spawn(move || pool.get().map(|_| ()))
    };
    wait_for_waiters(&pool, 1);
    let refused = pool.get();
    assert!(matches!(refused, Err(Error::TooManyWaiters { waiters_max: 1 })), "{refused:?}");
    drop(held);
    assert!(waiter.join().expect("waiter").is_ok());
}

#[test]
fn invalid_settings_are_refused_by_name() {
    let ms = Duration::from_millis;
    let range = "between 1 and 65536";
    // Each builder, and the refusal it gets: (setting, value, accepted).
    type Refused = (&'static str, &'static str, &'static str);
    let cases: Vec<(idem_pool::Builder<TestManager>, Refused)> = vec![
        (Pool::builder().max_size(0), ("max_size", "0", range)),
        (Pool::builder().max_size((1 << 16) + 1), ("max_size", "65537", range)),
        (Pool::builder().max_size(2).min_idle(3), ("min_idle", "3", "at most max_size (2)")),
        (Pool::builder().connection_timeout(ms(0)), ("connection_timeout", "0ns", "at least 1ms")),
        (Pool::builder().idle_timeout(Some(ms(0))), ("idle_timeout", "0ns", "at least 1ms")),
        (Pool::builder().max_lifetime(Some(ms(0))), ("max_lifetime", "0ns", "at least 1ms")),
        (Pool::builder().waiters_max(0), ("waiters_max", "0", "at least 1")),
    ];
    for (builder, (setting, value, accepted)) in cases {
        let error: ConfigError =
            builder.build(TestManager::default()).map(|_| ()).expect_err("refused");
        assert_eq!(
            (error.setting, error.value.as_str(), error.accepted.as_str()),
            (setting, value, accepted)
        );
    }
    let refused = Pool::builder().max_size(2).min_idle(3).build(TestManager::default());
    assert_eq!(
        refused.map(|_| ()).expect_err("refused").to_string(),
        "min_idle is 3; it must be at most max_size (2)"
    );
}

/// The maintenance thread's kernel task, seen from the manager it calls.
#[cfg(target_os = "linux")]
#[derive(Debug, Default)]
struct TaskRecorder {
    inner: TestManager,
    maintenance_task: std::sync::Mutex<Option<std::path::PathBuf>>,
}

#[cfg(target_os = "linux")]
impl idem_pool::Manager for TaskRecorder {
    type Connection = crate::TestConn;
    type Error = crate::TestError;

    fn connect(&self) -> Result<crate::TestConn, crate::TestError> {
        if thread::current().name() == Some("idem-pool-maintenance") {
            // "/proc/thread-self" links to "<pid>/task/<tid>".
            let task = std::fs::read_link("/proc/thread-self").expect("linux /proc");
            *self.maintenance_task.lock().expect("lock") = Some(task);
        }
        self.inner.connect()
    }
    fn is_valid(&self, conn: &mut crate::TestConn) -> Result<(), crate::TestError> {
        self.inner.is_valid(conn)
    }
    fn has_broken(&self, conn: &mut crate::TestConn) -> bool {
        self.inner.has_broken(conn)
    }
}

/// The thread stops when the last `Pool` goes, even while a guard keeps the pool's state
/// alive (so it cannot be stopping only because its state is gone).
#[cfg(target_os = "linux")]
#[test]
fn maintenance_thread_stops_with_the_pool() {
    let pool = Pool::builder()
        .max_size(2)
        .min_idle(1)
        .maintenance_interval(Some(Duration::from_millis(1)))
        .build(TaskRecorder::default())
        .expect("valid");
    // Take the idle connection: the thread refills `min_idle`, and so shows its task.
    let guard = pool.get().expect("get");
    let task = || pool.manager().maintenance_task.lock().expect("lock").clone();
    wait_until("the maintenance thread to connect", WAIT_LIMIT, || task().is_some());
    let task = std::path::Path::new("/proc").join(task().expect("recorded"));
    assert!(task.exists(), "{} runs", task.display());
    drop(pool);
    wait_until("the maintenance thread to exit", WAIT_LIMIT, || !task.exists());
    drop(guard);
}

#[test]
fn public_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Pool<TestManager>>();
    send_sync::<idem_pool::PooledConnection<TestManager>>();
    send_sync::<idem_pool::Loan<TestManager>>();
    send_sync::<Error>();
}

#[test]
fn barging_lets_a_running_thread_take_a_returned_connection() {
    let (pool, _) = pool(1, |b| {
        b.fairness(idem_pool::Fairness::Barging).connection_timeout(Duration::from_secs(30))
    });
    let held = pool.get().expect("get");
    let waiter = {
        let pool = pool.clone();
        thread::spawn(move || pool.get().map(|conn| conn.id))
    };
    wait_for_waiters(&pool, 1);
    drop(held);
    // The connection went back to the idle list (a running thread may take it before the
    // woken waiter does), not handed to the waiter as under Fifo.
    assert_eq!(pool.state().handoffs, 0, "barging never hands off");
    if let Some(again) = pool.try_get() {
        drop(again);
    }
    assert!(waiter.join().expect("waiter").is_ok(), "the waiter still gets it");
    assert_eq!(pool.state().handoffs, 0);
    pool.assert_invariants();
}

#[test]
fn fifo_hands_a_returned_connection_to_the_waiter_not_to_a_newcomer() {
    let (pool, _) = pool(1, |b| {
        b.fairness(idem_pool::Fairness::Fifo).connection_timeout(Duration::from_secs(30))
    });
    let held = pool.get().expect("get");
    let release_waiter = std::sync::Arc::new(std::sync::Barrier::new(2));
    let waiter = {
        let (pool, release_waiter) = (pool.clone(), release_waiter.clone());
        thread::spawn(move || {
            let conn = pool.get();
            release_waiter.wait();
            conn.map(|conn| conn.id)
        })
    };
    wait_for_waiters(&pool, 1);
    drop(held);
    // Handed to the waiter (granted or already taken): never to this newcomer.
    assert_eq!(pool.state().handoffs, 1, "handed straight to the waiter");
    assert!(pool.try_get().is_none(), "the returned connection is the waiter's");
    release_waiter.wait();
    assert!(waiter.join().expect("waiter").is_ok());
}

#[test]
fn duration_settings_at_zero_and_max() {
    let ms = Duration::from_millis;
    assert!(matches!(
        Pool::builder().connection_timeout(Duration::ZERO).build(TestManager::default()),
        Err(ConfigError { setting: "connection_timeout", .. })
    ));
    let (pool, clock) = pool(1, |b| {
        b.connection_timeout(Duration::MAX)
            .idle_timeout(Some(Duration::MAX))
            .max_lifetime(Some(Duration::MAX))
            .leak_threshold(Some(Duration::MAX))
    });
    let held = pool.get().expect("get");
    let id = held.id;
    clock.advance(Duration::from_secs(100 * 365 * 24 * 3600)); // a century: nothing ends
    pool.maintain();
    drop(held);
    assert_eq!(pool.get_timeout(ms(1)).expect("kept: nothing expires").id, id);
    let held = pool.get().expect("get");
    assert!(matches!(pool.get_timeout(Duration::ZERO), Err(Error::Timeout { .. })));
    drop(held);
    pool.assert_invariants();
}

/// The default, `Eventual`: a returned connection goes to the idle list (barging) while
/// the longest waiter has waited less than `fair_after`, and straight to it once it has.
#[test]
fn eventual_fairness_barges_until_the_waiter_has_waited_long_enough() {
    for (fair_after, handoffs) in [(Duration::from_secs(3600), 0), (Duration::ZERO, 1)] {
        let (pool, _) =
            pool(1, |b| b.fair_after(fair_after).connection_timeout(Duration::from_secs(30)));
        let held = pool.get().expect("get");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || pool.get().map(|conn| conn.id))
        };
        wait_for_waiters(&pool, 1);
        drop(held);
        assert_eq!(pool.state().handoffs, handoffs, "fair_after {fair_after:?}");
        assert!(waiter.join().expect("waiter").is_ok(), "the waiter is served either way");
        pool.assert_invariants();
    }
}

/// Two waiters, two returns in a row, barging (each return goes to the idle list and wakes
/// one waiter to take it): both waiters get a connection while the other holds one (each
/// keeps its connection until both have one, so neither can rescue the other by returning
/// it). Each return must wake a waiter not woken yet: waking the first one twice leaves
/// the second asleep beside an idle connection until its timeout. Rounds, since real
/// threads decide whether the first waiter runs between the two returns; the loom model
/// `two_returns_wake_two_waiters_barging` explores every order.
#[test]
fn two_returns_in_a_row_wake_two_waiters() {
    type Tune = fn(idem_pool::Builder<TestManager>) -> idem_pool::Builder<TestManager>;
    let barging: Tune = |b| b.fairness(idem_pool::Fairness::Barging);
    let never_fair: Tune = |b| b.fair_after(Duration::MAX);
    for (name, tune) in [("barging", barging), ("eventual, never due", never_fair)] {
        let (pool, _) = pool(2, |b| tune(b).connection_timeout(WAIT_LIMIT));
        for round in 0..100 {
            let held = [pool.get().expect("get"), pool.get().expect("get")];
            let both = std::sync::Arc::new(std::sync::Barrier::new(2));
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let (pool, both) = (pool.clone(), both.clone());
                    thread::spawn(move || {
                        let conn = pool.get();
                        both.wait();
                        conn.map(|conn| conn.id)
                    })
                })
                .collect();
            wait_for_waiters(&pool, 2);
            drop(held);
            for waiter in waiters {
                let got = waiter.join().expect("waiter");
                assert!(got.is_ok(), "{name}, round {round}: a waiter was left: {got:?}");
            }
            assert_eq!(pool.state().handoffs, 0, "{name}: barging never hands off");
            pool.assert_invariants();
        }
    }
}

/// Three threads queued in order as waiters on `pool`, each sending its number once
/// served and giving the connection back at once.
fn three_waiters(pool: &Pool<TestManager>) -> (mpsc::Receiver<u32>, Vec<thread::JoinHandle<()>>) {
    let (served, order) = mpsc::channel();
    let waiters = (1..=3)
        .map(|n| {
            let (waiting, served) = (pool.clone(), served.clone());
            let waiter = thread::spawn(move || {
                let conn = waiting.get().expect("served");
                served.send(n).expect("the test listens");
                drop(conn);
            });
            wait_for_waiters(pool, n as usize);
            waiter
        })
        .collect();
    (order, waiters)
}

/// The order the three were served in.
fn served(order: &mpsc::Receiver<u32>, waiters: Vec<thread::JoinHandle<()>>) -> Vec<u32> {
    let order = (1..=3).map(|_| order.recv_timeout(WAIT_LIMIT).expect("served")).collect();
    for waiter in waiters {
        waiter.join().expect("waiter");
    }
    order
}

fn fifo(max_size: usize) -> Pool<TestManager> {
    pool(max_size, |b| b.fairness(idem_pool::Fairness::Fifo).connection_timeout(WAIT_LIMIT)).0
}

#[test]
fn fifo_keeps_a_waiters_turn_when_its_connection_fails_its_check() {
    let pool = fifo(1);
    let held = pool.get().expect("get");
    let (order, waiters) = three_waiters(&pool);
    // Every hand-off now fails its check: each waiter connects anew into its slot.
    pool.manager().fail_checks.store(true, Ordering::SeqCst);
    drop(held);
    assert_eq!(served(&order, waiters), [1, 2, 3]);
    pool.assert_invariants();
}

#[test]
fn fifo_keeps_a_waiters_turn_when_its_connect_fails() {
    let pool = fifo(2);
    let other = pool.get().expect("get");
    let mut broken = pool.get().expect("get");
    broken.mark_broken();
    let (order, waiters) = three_waiters(&pool);
    pool.manager().refuse_connect.store(true, Ordering::SeqCst);
    let connects = pool.manager().connects.load(Ordering::SeqCst);
    drop(broken); // closed: its slot goes to the first waiter to connect into, refused
    wait_until("a refused connect", WAIT_LIMIT, || {
        pool.manager().connects.load(Ordering::SeqCst) > connects
    });
    pool.manager().refuse_connect.store(false, Ordering::SeqCst);
    assert_eq!(served(&order, waiters), [1, 2, 3]);
    drop(other);
    pool.assert_invariants();
}

#[test]
fn state_counts_each_connection_once_while_threads_take_and_return() {
    let (pool, _) = pool(1, |b| b.health_check(HealthCheck::Never));
    drop(pool.get().expect("made"));
    // The getters take and return until the state was read 200,000 times and they made
    // 20,000 cycles meanwhile (counts, not a time: a slow machine does as many).
    let (done, cycles) = (std::sync::atomic::AtomicBool::new(false), AtomicU64::new(0));
    /// Stops the getters however the reads end (a failed assertion too).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    drop(pool.get().expect("get"));
                    cycles.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        let _stop = Stop(&done);
        let mut reads = 0u64;
        while reads < 200_000 || cycles.load(Ordering::SeqCst) < 20_000 {
            let state = pool.state();
            assert_eq!(state.size, 1, "one connection, counted once: {state:?}");
            assert_eq!(state.idle + state.in_use, 1, "{state:?}");
            reads += 1;
        }
    });
}

#[test]
fn a_broken_guard_turned_into_a_loan_is_closed_when_the_loan_is_released() {
    let (pool, _) = pool(1, |b| b);
    let mut guard = pool.get().expect("get");
    let id = guard.id;
    guard.mark_broken();
    let loan = guard.into_loan();
    assert!(loan.release());
    assert_eq!(pool.state().discarded, 1, "closed, not put back");
    assert_ne!(pool.get().expect("a new connection").id, id, "a broken connection lent again");
    pool.assert_invariants();
}
