//! Worlds run end to end: they hold, and a seed replays its world exactly.

#[test]
fn the_same_seed_gives_the_same_trace_byte_for_byte() {
    for seed in [0, 220, 4_242] {
        // Another world between the two: a world must not depend on what ran before it.
        let first = idem_sim::simulate(seed);
        let _between = idem_sim::simulate(seed + 1);
        let second = idem_sim::simulate(seed);
        assert!(first.trace.lines().count() > 10, "a world of events: {}", first.trace);
        assert_eq!(first.trace, second.trace, "seed {seed} replayed differently");
        assert_eq!((first.requests, &first.faults), (second.requests, &second.faults));
    }
    let (a, b) = (idem_sim::simulate(1), idem_sim::simulate(2));
    assert_ne!(a.trace, b.trace, "two seeds, two worlds");
}

#[test]
fn worlds_with_faults_at_every_step_hold() {
    let mut faults = 0;
    for seed in 100..140 {
        let world = idem_sim::simulate(seed);
        assert!(world.violations.is_empty(), "{}", world.report());
        assert!(world.requests > 0);
        faults += world.faults.values().sum::<u64>();
    }
    assert!(faults > 100, "the worlds met faults: {faults}");
}
