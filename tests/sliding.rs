//! RL.SLIDING on a real server: the weighted estimate across a window boundary, the
//! retry_after and reset_after rules, COST, and concurrent clients admitted exactly up to
//! the limit.
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::*;

#[test]
fn sliding_weighted_estimate_across_boundary() {
    let (_s, mut c) = Server::at_clock(T0);
    let cmd = args!("RL.SLIDING", "s", 10, 1000);
    for i in 1..=10 {
        assert_eq!(
            rate_ttl(&mut c, &cmd),
            [1, 10, 10 - i, 0, 2000],
            "request {i}"
        );
    }
    assert_info(
        &mut c,
        "s",
        &[
            ("algorithm", "sliding"),
            ("limit", "10"),
            ("window_ms", "1000"),
            ("window_start_ms", T0.to_string().as_str()),
            ("previous_count", "0"),
            ("current_count", "10"),
        ],
    );
    assert!(info_of(&mut c, "s").contains_key("ttl_ms"));
    // Full: next window, the estimate 10*(1-f) + 1 <= 10 needs f >= 0.1: 1100 ms.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 1100, 2000]);
    // 250 ms into the next window: estimate 7.5, so exactly 2 more.
    clock_advance(&mut c, 1250);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 1, 0, 1750]); // 8.5
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 0, 0, 1750]); // 9.5
                                                             // 10*(1-f) + 2 + 1 <= 10 needs f >= 0.3: 50 ms from now, inside this window.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 50, 1750]);
    assert_info(
        &mut c,
        "s",
        &[
            ("window_start_ms", (T0 + 1000).to_string().as_str()),
            ("previous_count", "10"),
            ("current_count", "2"),
        ],
    );
    clock_advance(&mut c, 49);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 1, 1701]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 0, 0, 1700]); // 7 + 3 = 10
                                                             // COST 2 at f = 0.3: 10*(1-f) + 3 + 2 <= 10 needs f >= 0.5: 200 ms, inside this window.
    assert_eq!(
        rate_ttl(&mut c, &args!("RL.SLIDING", "s", 10, 1000, "COST", 2)),
        [0, 10, 0, 200, 1700]
    );
    // Window 2 starts: previous = 3, current = 0.
    clock_advance(&mut c, 700);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 6, 0, 2000]);
    assert_info(
        &mut c,
        "s",
        &[
            ("window_start_ms", (T0 + 2000).to_string().as_str()),
            ("previous_count", "3"),
            ("current_count", "1"),
        ],
    );
}

#[test]
fn sliding_retry_and_reset_rules() {
    let (_s, mut c) = Server::at_clock(T0);
    let cmd = args!("RL.SLIDING", "full", 10, 1000);
    for _ in 0..10 {
        rate_ttl(&mut c, &cmd);
    }
    // 50 ms into the next window: current 0, previous 10, estimate 9.5: refused;
    // reset_after = end of the current window (current count is zero).
    clock_advance(&mut c, 1050);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 50, 950]);
    clock_advance(&mut c, 49);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 1, 901]);
    clock_advance(&mut c, 1);
    // estimate 9 + 1: admitted; reset = end of the next window.
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 0, 0, 1900]);
    // current 1, previous 10 at f = 0.1: needs 10*(1-f) <= 8: f >= 0.2.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 100, 1900]);

    // One request mid-window: reset = end of the next window.
    let one = args!("RL.SLIDING", "one", 10, 1000);
    let t1 = T0 + 60_000;
    clock_set(&mut c, t1 + 300);
    assert_eq!(rate_ttl(&mut c, &one), [1, 10, 9, 0, 1700]);
    // Next window, 200 ms in: previous 1 weighs 0.8.
    clock_advance(&mut c, 900);
    assert_eq!(rate_ttl(&mut c, &one), [1, 10, 8, 0, 1800]);
    // Two windows after the last write: both counters are out, fresh again.
    clock_advance(&mut c, 2000);
    assert_eq!(rate_ttl(&mut c, &one), [1, 10, 9, 0, 1800]);

    // Windows aligned to multiples of window_ms since the epoch: T0 % 7000 == 4000.
    let t2 = T0 + 120_000; // t2 % 7000 == (4000 + 120000) % 7000 == 5000
    assert_eq!(t2 % 7000, 5000);
    clock_set(&mut c, t2 - 1000);
    let w7 = args!("RL.SLIDING", "w7", 3, 7000);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 2, 0, 10000]);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 1, 0, 10000]);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 0, 0, 10000]);
    // Next window: 3*(1-f) + 1 <= 3 needs f >= 1/3: 2333.33 ms in -> 3000 + 2334.
    assert_eq!(rate_ttl(&mut c, &w7), [0, 3, 0, 5334, 10000]);
    clock_advance(&mut c, 5333);
    assert_eq!(rate_ttl(&mut c, &w7), [0, 3, 0, 1, 4667]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 0, 0, 11666]);
}

#[test]
fn sliding_cost() {
    let (_s, mut c) = Server::at_clock(T0);
    let with_cost = |n: i64| args!("RL.SLIDING", "sc", 10, 1000, "COST", n);
    assert_eq!(rate_ttl(&mut c, &with_cost(4)), [1, 10, 6, 0, 2000]);
    // 4 + 7 > 10 for the rest of this window; next window 4*(1-f) + 7 <= 10: f >= 0.25.
    assert_eq!(rate_ttl(&mut c, &with_cost(7)), [0, 10, 6, 1250, 2000]);
    assert_eq!(rate_ttl(&mut c, &with_cost(6)), [1, 10, 0, 0, 2000]);
    assert_info(&mut c, "sc", &[("current_count", "10")]);
    // Whole limit at once: only when the current window's 10 are entirely out.
    assert_eq!(rate_ttl(&mut c, &with_cost(10)), [0, 10, 0, 2000, 2000]);
    clock_advance(&mut c, 1999);
    // 999 ms into the next window: estimate 10*0.001, 9 cost-1 requests would fit.
    assert_eq!(rate_ttl(&mut c, &with_cost(10)), [0, 10, 9, 1, 1]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &with_cost(10)), [1, 10, 0, 0, 2000]);
}

#[test]
fn concurrent_clients_sliding_exactly_limit() {
    let (_, remaining) = hammer(args!("RL.SLIDING", "hot", 10, 60000), 6);
    assert_eq!(remaining.len(), 10, "admissions: {remaining:?}");
    assert_eq!(remaining, (0..10).collect::<Vec<_>>());
}
