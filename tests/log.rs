//! RL.LOG on a real server: reply fields across the trailing window (hand-computed at a
//! frozen test clock).
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::*;

#[test]
fn log_reply_fields_across_the_trailing_window() {
    let (_srv, mut c) = Server::at_clock(T0);
    let l = args!("RL.LOG", "l", 3, 1_000);
    assert_eq!(r5(&mut c, &l), [1, 3, 2, 0, 1_000]);
    clock_set(&mut c, T0 + 100);
    assert_eq!(r5(&mut c, &l), [1, 3, 1, 0, 1_000]);
    clock_set(&mut c, T0 + 200);
    assert_eq!(r5(&mut c, &l), [1, 3, 0, 0, 1_000]);
    assert_info(
        &mut c,
        "l",
        &[
            ("algorithm", s("log")),
            ("limit", s(3)),
            ("window_ms", s(1_000)),
            ("entries", s(3)),
            ("oldest_us", us(T0)),
            ("newest_us", us(T0 + 200)),
        ],
    );
    clock_set(&mut c, T0 + 300);
    let before = snap(&mut c, "l");
    // COST 2 needs the two oldest entries (T0, T0+100) gone: at T0+1100. Fresh once the
    // newest (T0+200) has left: T0+1200.
    assert_eq!(r5(&mut c, &with(&l, &["COST", "2"])), [0, 3, 0, 800, 900]);
    assert_eq!(r5(&mut c, &l), [0, 3, 0, 700, 900]);
    assert_eq!(
        snap(&mut c, "l"),
        before,
        "a refused RL.LOG changed the key"
    );
    clock_set(&mut c, T0 + 999);
    assert_eq!(r5(&mut c, &l), [0, 3, 0, 1, 201]);
    // The entry at T0 leaves the window (now - 1000, now] at exactly T0+1000.
    clock_set(&mut c, T0 + 1_000);
    assert_eq!(r5(&mut c, &l), [1, 3, 0, 0, 1_000]);
    assert_eq!(r5(&mut c, &with(&l, &["COST", "2"])), [0, 3, 0, 200, 1_000]);
    clock_set(&mut c, T0 + 1_200);
    assert_eq!(r5(&mut c, &with(&l, &["COST", "2"])), [1, 3, 0, 0, 1_000]);
    // Memory is bounded by the limit: exactly the 3 live units are stored.
    assert_info(
        &mut c,
        "l",
        &[
            ("entries", s(3)),
            ("oldest_us", us(T0 + 1_000)),
            ("newest_us", us(T0 + 1_200)),
        ],
    );
    // Long idle: a fresh key's answers.
    clock_set(&mut c, T0 + 5_000);
    assert_eq!(r5(&mut c, &l), [1, 3, 2, 0, 1_000]);
    let m = info_of(&mut c, "l");
    assert!(info_int(&m, "entries") <= 3, "{m:?}");
    assert_eq!(m["newest_us"], us(T0 + 5_000));
    // New numbers for an existing key: limit 2 with 1 live entry.
    assert_eq!(
        r5(&mut c, &args!("RL.LOG", "l", 2, 1_000)),
        [1, 2, 0, 0, 1_000]
    );
    assert_eq!(
        r5(&mut c, &args!("RL.LOG", "l", 2, 1_000)),
        [0, 2, 0, 1_000, 1_000]
    );
}
