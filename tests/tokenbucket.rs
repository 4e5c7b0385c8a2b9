//! RL.TOKENBUCKET on a real server: reply fields and tokens (hand-computed at a frozen test
//! clock), the same decisions as RL.GCRA with the same parameters, and concurrent clients
//! admitted exactly up to the capacity.
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rate::*;

#[test]
fn tokenbucket_reply_fields_and_tokens() {
    let (_s, mut c) = Server::at_clock(T0);
    let cmd = args!("RL.TOKENBUCKET", "tb", 5, 1, 1000);
    for i in 1..=5 {
        assert_eq!(
            rate_ttl(&mut c, &cmd),
            [1, 5, 5 - i, 0, 1000 * i],
            "request {i}"
        );
        assert_info(&mut c, "tb", &[("tokens", &(5 - i).to_string())]);
    }
    assert_info(
        &mut c,
        "tb",
        &[
            ("algorithm", "tokenbucket"),
            ("capacity", "5"),
            ("refill_tokens", "1"),
            ("refill_period_ms", "1000"),
            ("tokens", "0"),
            ("tat_ns", &ns(T0 + 5000)),
        ],
    );
    assert!(info_of(&mut c, "tb").contains_key("ttl_ms"));
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1000, 5000]);
    clock_advance(&mut c, 999);
    assert_info(&mut c, "tb", &[("tokens", "0")]);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1, 4001]);
    clock_advance(&mut c, 1);
    assert_info(&mut c, "tb", &[("tokens", "1")]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 0, 0, 5000]);
    clock_advance(&mut c, 2500);
    assert_info(&mut c, "tb", &[("tokens", "2")]);
    // Capped at capacity however long the idle time.
    clock_advance(&mut c, 100_000);
    assert_info(&mut c, "tb", &[("tokens", "5")]);
    assert_eq!(
        rate_ttl(
            &mut c,
            &args!("RL.TOKENBUCKET", "tb", 5, 1, 1000, "COST", 3)
        ),
        [1, 5, 2, 0, 3000]
    );
    assert_info(&mut c, "tb", &[("tokens", "2")]);
    // 3 tokens per 2000 ms, capacity 4: 666.67 ms per token.
    let cmd = args!("RL.TOKENBUCKET", "tb3", 4, 3, 2000, "COST", 4);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 4, 0, 0, 2667]);
    clock_advance(&mut c, 1334);
    assert_info(&mut c, "tb3", &[("tokens", "2")]);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 4, 2, 1333, 1333]);
}

#[test]
fn tokenbucket_decisions_equal_gcra() {
    let s = Server::start();
    let mut c = s.con();
    let mut rng = StdRng::seed_from_u64(0x7b_9c_a1);
    clock_set(&mut c, T0);
    // (capacity/burst, tokens/count, period_ms), including rates with fractional intervals.
    let params = [
        (5, 1, 1000),
        (7, 3, 1000),
        (10, 7, 3000),
        (3, 2, 999),
        (1, 1, 250),
        (20, 13, 1700),
    ];
    for (n, &(cap, per, period)) in params.iter().enumerate() {
        let g = format!("g{n}");
        let t = format!("t{n}");
        let interval = period as f64 / per as f64;
        let mut admitted = 0;
        for step in 0..250 {
            let adv = match rng.gen_range(0..10) {
                0..=3 => 0,
                4..=7 => rng.gen_range(1..=(interval as i64 + 1)),
                _ => rng.gen_range(1..=(interval as i64 * cap + 2)),
            };
            if adv > 0 {
                clock_advance(&mut c, adv);
            }
            let cost = if rng.gen_bool(0.6) {
                1
            } else {
                rng.gen_range(1..=cap)
            };
            let dry = rng.gen_bool(0.15);
            let mut ga = args!("RL.GCRA", g, cap, per, period, "COST", cost);
            let mut ta = args!("RL.TOKENBUCKET", t, cap, per, period, "COST", cost);
            if dry {
                ga.push("DRYRUN".into());
                ta.push("DRYRUN".into());
            }
            let out = multi(&mut c, &[ga.clone(), ta.clone(), args!("RL.INFO", t)]);
            let gr = reply5(&out[0]).unwrap_or_else(|m| panic!("{ga:?}: {m}"));
            let tr = reply5(&out[1]).unwrap_or_else(|m| panic!("{ta:?}: {m}"));
            assert_eq!(
                gr[0], tr[0],
                "params {cap}/{per}/{period} step {step}: allowed differs: gcra {gr:?} tokenbucket {tr:?}"
            );
            assert_eq!(
                gr, tr,
                "params {cap}/{per}/{period} step {step}: replies differ: gcra {gr:?} tokenbucket {tr:?}"
            );
            admitted += gr[0];
            if !dry {
                if let Some(m) = parse_info(&out[2]) {
                    assert_eq!(
                        info_int(&m, "tokens"),
                        tr[2],
                        "step {step}: RL.INFO tokens != remaining of {tr:?}"
                    );
                }
            }
        }
        assert!(
            admitted > 10,
            "schedule too restrictive for {cap}/{per}/{period}"
        );
    }
}

#[test]
fn concurrent_clients_tokenbucket_exactly_capacity() {
    let (_, remaining) = hammer(args!("RL.TOKENBUCKET", "hot", 10, 1, 60000), 6);
    assert_eq!(remaining, (0..10).collect::<Vec<_>>());
}
