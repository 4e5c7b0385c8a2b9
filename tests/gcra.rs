//! RL.GCRA on a real server: every reply field across boundaries (hand-computed at a frozen
//! test clock), non-unit rates, COST, and concurrent clients admitted exactly up to the
//! burst.
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::*;

#[test]
fn gcra_reply_fields_across_boundaries() {
    let (_s, mut c) = Server::at_clock(T0);
    let cmd = args!("RL.GCRA", "k", 5, 1, 1000);
    // Fresh key: five admissions, remaining 4..0, reset 1000..5000.
    for i in 1..=5 {
        assert_eq!(
            rate_ttl(&mut c, &cmd),
            [1, 5, 5 - i, 0, 1000 * i],
            "request {i}"
        );
    }
    assert_info(
        &mut c,
        "k",
        &[
            ("algorithm", "gcra"),
            ("burst", "5"),
            ("count", "1"),
            ("period_ms", "1000"),
            ("tat_ns", &ns(T0 + 5000)),
        ],
    );
    assert!(info_of(&mut c, "k").contains_key("ttl_ms"));
    // 6th refused: retry 1000, reset 5000.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1000, 5000]);
    clock_advance(&mut c, 999);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1, 4001]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 0, 0, 5000]);
    assert_info(&mut c, "k", &[("tat_ns", &ns(T0 + 6000))]);
    // 2500 ms later (now T0+3500, tat T0+6000): admitted, one more left.
    clock_advance(&mut c, 2500);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 1, 0, 3500]);
    // Long idle: back to a fresh key.
    clock_advance(&mut c, 100_000);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 4, 0, 1000]);
}

#[test]
fn gcra_non_unit_rates() {
    let (_s, mut c) = Server::at_clock(T0);
    // burst 3, 2 per 1000 ms: emission interval 500 ms.
    let cmd = args!("RL.GCRA", "half", 3, 2, 1000);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 2, 0, 500]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 1, 0, 1000]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 0, 0, 1500]);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 3, 0, 500, 1500]);
    clock_advance(&mut c, 499);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 3, 0, 1, 1001]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 0, 0, 1500]);
    assert_info(&mut c, "half", &[("tat_ns", &ns(T0 + 2000))]);

    // burst 2, 3 per 1000 ms: emission interval 333.33.. ms (not a whole ms or µs).
    let t1 = T0 + 10_000_000;
    clock_set(&mut c, t1);
    let cmd = args!("RL.GCRA", "third", 2, 3, 1000);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 2, 1, 0, 334]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 2, 0, 0, 667]);
    // allowed again at tat - burst*T + T = 333.33 ms: retry 334 (rounded up)
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 2, 0, 334, 667]);
    clock_advance(&mut c, 333);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 2, 0, 1, 334]);
    clock_advance(&mut c, 1);
    // tat becomes 3T = 1000 ms after t1; now t1+334.
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 2, 0, 0, 666]);
}

#[test]
fn gcra_cost() {
    let (_s, mut c) = Server::at_clock(T0);
    let with_cost = |n: i64| args!("RL.GCRA", "c", 5, 1, 1000, "COST", n);
    assert_eq!(rate_ttl(&mut c, &with_cost(3)), [1, 5, 2, 0, 3000]);
    assert_eq!(rate_ttl(&mut c, &with_cost(3)), [0, 5, 2, 1000, 3000]);
    assert_eq!(rate_ttl(&mut c, &with_cost(2)), [1, 5, 0, 0, 5000]);
    assert_info(&mut c, "c", &[("tat_ns", &ns(T0 + 5000))]);
    clock_advance(&mut c, 2000);
    assert_eq!(rate_ttl(&mut c, &with_cost(2)), [1, 5, 0, 0, 5000]);
    // Whole burst at once: only when the key is back to fresh.
    assert_eq!(rate_ttl(&mut c, &with_cost(5)), [0, 5, 0, 5000, 5000]);
    clock_advance(&mut c, 4999);
    assert_eq!(rate_ttl(&mut c, &with_cost(5)), [0, 5, 4, 1, 1]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &with_cost(5)), [1, 5, 0, 0, 5000]);
    // COST 1 written out equals the default.
    clock_advance(&mut c, 60_000);
    assert_eq!(rate_ttl(&mut c, &with_cost(1)), [1, 5, 4, 0, 1000]);
    assert_eq!(
        rate_ttl(&mut c, &args!("RL.GCRA", "c", 5, 1, 1000)),
        [1, 5, 3, 0, 2000]
    );
}

#[test]
fn concurrent_clients_gcra_exactly_burst() {
    let (_, remaining) = hammer(args!("RL.GCRA", "hot", 10, 1, 60000), 6);
    assert_eq!(remaining.len(), 10, "admissions: {remaining:?}");
    assert_eq!(remaining, (0..10).collect::<Vec<_>>());
}
