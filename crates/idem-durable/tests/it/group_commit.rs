//! The group-commit writer: typed replies only after a commit, failures answered to the
//! whole group, a panicking job contained, and the stop rule.

use std::sync::{Arc, Mutex};

use idem_durable::group_commit::{AfterFailure, CommitError, Committer, GroupCommit, GroupLimits};

/// A state that logs what happens to it, fails on request, and can hold its commit.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) events: Arc<Mutex<Vec<String>>>,
    pub(crate) fail_begin: bool,
    pub(crate) fail_commit: bool,
    pub(crate) stop_after_failure: bool,
    /// Each commit, once logged, waits for a message here (or for its sender to go).
    pub(crate) hold_commit: Option<std::sync::mpsc::Receiver<()>>,
}

impl Log {
    pub(crate) fn note(&self, event: &str) {
        self.events.lock().expect("lock").push(event.to_string());
    }
}

impl Committer for Log {
    type Error = std::io::Error;
    fn begin(&mut self) -> std::io::Result<()> {
        self.note("begin");
        if self.fail_begin { Err(std::io::Error::other("no begin")) } else { Ok(()) }
    }
    fn commit(&mut self) -> std::io::Result<()> {
        self.note("commit");
        if let Some(gate) = &self.hold_commit {
            let _ = gate.recv();
        }
        if self.fail_commit { Err(std::io::Error::other("disk full")) } else { Ok(()) }
    }
    fn recover(&mut self) -> AfterFailure {
        self.note("recover");
        if self.stop_after_failure { AfterFailure::Stop } else { AfterFailure::Continue }
    }
}

/// A group failure that says `why`, as the committer's error does.
pub(crate) fn failure(why: &str) -> CommitError {
    let w = GroupCommit::start("failure", Failing(why.to_string()), GroupLimits::default());
    let w = w.expect("a thread");
    w.submit(|_: &mut Failing| ()).expect_err("a failing group")
}

/// A committer whose every group fails with its message.
#[derive(Debug)]
struct Failing(String);

impl Committer for Failing {
    type Error = std::io::Error;
    fn begin(&mut self) -> std::io::Result<()> {
        Err(std::io::Error::other(self.0.clone()))
    }
    fn commit(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) fn writer(log: Log) -> GroupCommit<Log> {
    GroupCommit::start("test-writer", log, GroupLimits::default()).expect("a thread")
}

#[test]
fn a_caller_gets_its_own_typed_result_after_the_commit() {
    let log = Log::default();
    let events = log.events.clone();
    let w = writer(log);
    let got: (u8, &str) = w
        .submit(|log: &mut Log| {
            log.note("work");
            (7, "seven")
        })
        .expect("committed");
    assert_eq!(got, (7, "seven"));
    events.lock().expect("lock").push("answered".into());
    let seen = events.lock().expect("lock").clone();
    assert_eq!(seen, ["begin", "work", "commit", "answered"]);
}

#[test]
fn a_failed_commit_answers_the_group_with_it_and_the_writer_goes_on() {
    let w = writer(Log { fail_commit: true, ..Log::default() });
    let failed = w.submit(|_: &mut Log| 1);
    assert_eq!(failed, Err(failure("disk full")));
    assert_eq!(w.submit(|_: &mut Log| 2), Err(failure("disk full")));
}

/// A failed commit is a failed group: `recover` runs before the next group starts (a
/// durable part rolls back or rebuilds there, and gives back what the group held), and
/// its answer decides whether the writer goes on.
#[test]
fn a_failed_commit_runs_recover_before_the_next_group() {
    for stop in [true, false] {
        let log = Log { fail_commit: true, stop_after_failure: stop, ..Log::default() };
        let events = log.events.clone();
        let w = writer(log);
        let failed = w.submit(|log: &mut Log| log.note("work"));
        assert_eq!(failed, Err(failure("disk full")));
        let next = w.submit(|log: &mut Log| log.note("next"));
        let expected = if stop { CommitError::Stopped } else { failure("disk full") };
        assert_eq!(next, Err(expected), "stop after failure: {stop}");
        drop(w); // joins the writer: the second group's recover (if it ran) is logged
        let seen = events.lock().expect("lock").clone();
        let first_group = ["begin", "work", "commit", "recover"];
        assert_eq!(seen[..4], first_group, "stop after failure: {stop}: {seen:?}");
        assert_eq!(seen.len(), if stop { 4 } else { 8 }, "{seen:?}");
    }
}

#[test]
fn a_group_that_cannot_begin_runs_nothing() {
    let log = Log { fail_begin: true, ..Log::default() };
    let events = log.events.clone();
    let w = writer(log);
    assert_eq!(w.submit(|log: &mut Log| log.note("work")), Err(failure("no begin")));
    assert!(!events.lock().expect("lock").contains(&"work".to_string()), "never ran");
}

#[test]
fn a_panicking_job_is_contained_and_the_stop_rule_holds() {
    let w = writer(Log { stop_after_failure: true, ..Log::default() });
    let lost = w.submit(|_: &mut Log| -> u8 { panic!("a bug in the work") });
    assert_eq!(lost, Err(CommitError::Lost));
    assert_eq!(w.submit(|_: &mut Log| 1), Err(CommitError::Stopped), "stopped after failure");
}

#[test]
fn concurrent_callers_share_commits_and_each_gets_its_own_answer() {
    let log = Log::default();
    let events = log.events.clone();
    let w = Arc::new(
        GroupCommit::start("test-writer", log, GroupLimits { queue_max: 8, group_max: 4 })
            .expect("a thread"),
    );
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let w = w.clone();
            s.spawn(move || {
                for i in 0..50u32 {
                    assert_eq!(w.submit(move |_: &mut Log| t * 1000 + i), Ok(t * 1000 + i));
                }
            });
        }
    });
    let commits = events.lock().expect("lock").iter().filter(|e| *e == "commit").count();
    assert!((50..=200).contains(&commits), "{commits} commits for 200 requests, groups of 4");
}

/// A limit of 0 would mean a writer that takes no work: refused by name, not clamped.
#[test]
fn a_limit_of_zero_is_refused_naming_it() {
    for (limits, name) in [
        (GroupLimits { queue_max: 0, group_max: 4 }, "queue_max"),
        (GroupLimits { queue_max: 4, group_max: 0 }, "group_max"),
    ] {
        let refused = GroupCommit::start("zero", Log::default(), limits).expect_err(name);
        assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
        assert!(refused.to_string().contains(name), "{refused}");
    }
}

/// The committer's own error reaches the caller as the failure's source, not as text.
#[test]
fn a_failed_group_keeps_the_committers_error_as_its_source() {
    let w = writer(Log { fail_commit: true, ..Log::default() });
    let Err(CommitError::Failed(failure)) = w.submit(|_: &mut Log| ()) else { panic!() };
    let source = failure.error().downcast_ref::<std::io::Error>().expect("an io::Error");
    assert_eq!(source.to_string(), "disk full");
    // Printed as a chain, each cause appears once.
    let top = CommitError::Failed(failure);
    let mut chain = vec![top.to_string()];
    let mut next = std::error::Error::source(&top);
    while let Some(error) = next {
        chain.push(error.to_string());
        next = error.source();
    }
    assert_eq!(chain, ["the group failed: disk full", "disk full"]);
}

/// The queue's places are allocated when the writer starts: a bound past
/// `QUEUE_MAX_LIMIT` is refused by name (not a panic, or an abort on allocation), the
/// limit itself accepted; a name a thread cannot take (a NUL byte) is refused too.
#[test]
fn a_queue_past_its_limit_or_a_name_with_a_nul_is_refused() {
    let at = GroupLimits { queue_max: GroupLimits::QUEUE_MAX_LIMIT, group_max: 4 };
    assert!(GroupCommit::start("at-limit", Log::default(), at).is_ok());
    for queue_max in [GroupLimits::QUEUE_MAX_LIMIT + 1, usize::MAX] {
        let past = GroupLimits { queue_max, group_max: 4 };
        let refused = GroupCommit::start("past", Log::default(), past).expect_err("refused");
        assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
        assert!(refused.to_string().contains("queue_max must be at most"), "{refused}");
    }
    let named = GroupCommit::start("a\0b", Log::default(), GroupLimits::default());
    let refused = named.expect_err("a NUL in the name");
    assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
    assert!(refused.to_string().contains("NUL"), "{refused}");
}
