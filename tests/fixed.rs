//! RL.FIXED on a real server: reply fields across windows (hand-computed at a frozen,
//! minute-aligned test clock) and the boundary attack a fixed window allows (twice the
//! limit across a boundary), which RL.LOG and RL.SLIDING do not.
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::*;
use redis::Connection;
use std::collections::BTreeMap;

#[test]
fn fixed_reply_fields_across_windows() {
    let srv = Server::start();
    let mut c = srv.con();
    // Windows of 10 s aligned to the epoch: [T0, T0+10 s), [T0+10 s, T0+20 s), ...
    // The opening's exact replies are pinned by tests/cli/algorithms.cli; here the
    // contract's relations: remaining = limit - count, reset_after (and retry_after when
    // refused) = the time to the window's end.
    let now = T0 + 2_000;
    clock_set(&mut c, now);
    let to_end = T0 + 10_000 - now;
    let f = args!("RL.FIXED", "f", 3, 10_000);
    let mut count = 0;
    for (a, cost) in [(f.clone(), 1), (with(&f, &["COST", "2"]), 2)] {
        count += cost;
        assert_eq!(r5(&mut c, &a), [1, 3, 3 - count, 0, to_end], "{a:?}");
    }
    assert_info(
        &mut c,
        "f",
        &[
            ("algorithm", s("fixed")),
            ("limit", s(3)),
            ("window_ms", s(10_000)),
            ("window_start_ms", s(T0)),
            ("count", s(3)),
        ],
    );
    // Full: retry and reset are the time to the window's end; nothing changes.
    let before = snap(&mut c, "f");
    assert_eq!(r5(&mut c, &f), [0, 3, 0, to_end, to_end]);
    assert_eq!(
        snap(&mut c, "f"),
        before,
        "a refused RL.FIXED changed the key"
    );
    clock_set(&mut c, T0 + 9_999);
    assert_eq!(r5(&mut c, &f), [0, 3, 0, 1, 1]);
    // The next window starts empty.
    clock_set(&mut c, T0 + 10_000);
    assert_eq!(r5(&mut c, &f), [1, 3, 2, 0, 10_000]);
    assert_info(
        &mut c,
        "f",
        &[("window_start_ms", s(T0 + 10_000)), ("count", s(1))],
    );
    // COST 3 does not fit (1 + 3 > 3): refused, remaining 2, nothing spent.
    assert_eq!(
        r5(&mut c, &with(&f, &["COST", "3"])),
        [0, 3, 2, 10_000, 10_000]
    );
    assert_eq!(r5(&mut c, &with(&f, &["cost", "2"])), [1, 3, 0, 0, 10_000]);
    clock_set(&mut c, T0 + 15_500);
    assert_eq!(r5(&mut c, &f), [0, 3, 0, 4_500, 4_500]);
    // Two windows later: a fresh key's answers.
    clock_set(&mut c, T0 + 35_000);
    assert_eq!(r5(&mut c, &f), [1, 3, 2, 0, 5_000]);
    // New numbers for an existing key: the count is read under the new limit.
    assert_eq!(
        r5(&mut c, &args!("RL.FIXED", "f", 5, 10_000)),
        [1, 5, 3, 0, 5_000]
    );
    assert_eq!(
        r5(&mut c, &args!("RL.FIXED", "f", 1, 10_000)),
        [0, 1, 0, 5_000, 5_000]
    );
    // COST equal to the limit on a fresh key.
    assert_eq!(
        r5(&mut c, &args!("RL.FIXED", "g", 4, 60_000, "COST", 4)),
        [1, 4, 0, 0, 25_000]
    );
}

#[test]
fn boundary_attack() {
    let srv = Server::start();
    let mut c = srv.con();
    let (limit, w) = (100, 60_000);
    let fixed = args!("RL.FIXED", "fixed", limit, w);
    let log = args!("RL.LOG", "log", limit, w);
    let sliding = args!("RL.SLIDING", "sliding", limit, w);
    let mut admitted: BTreeMap<String, i64> = BTreeMap::new();
    let mut run = |c: &mut Connection, a: &[String], n: usize, out: &mut Vec<[i64; 5]>| {
        for _ in 0..n {
            let r = r5(c, a);
            *admitted.entry(a[0].clone()).or_default() += r[0];
            out.push(r);
        }
    };
    // 100 requests at 59.5 s of the window [T0, T0+60 s): all admitted everywhere.
    clock_set(&mut c, T0 + 59_500);
    for (a, reset) in [(&fixed, 500), (&log, 60_000), (&sliding, 60_500)] {
        let mut out = Vec::new();
        run(&mut c, a, 100, &mut out);
        for (i, r) in out.iter().enumerate() {
            assert_eq!(*r, [1, 100, 99 - i as i64, 0, reset], "{} #{}", a[0], i + 1);
        }
    }
    // The 101st: refused. Sliding: in the next window the 100 weigh 100*(1 - e/W); room
    // for 1 once e >= 600 ms, i.e. 1100 ms from now.
    assert_eq!(r5(&mut c, &fixed), [0, 100, 0, 500, 500]);
    assert_eq!(r5(&mut c, &log), [0, 100, 0, 60_000, 60_000]);
    assert_eq!(r5(&mut c, &sliding), [0, 100, 0, 1_100, 60_500]);

    // 100 more at 60.5 s, 500 ms into the next window.
    clock_set(&mut c, T0 + 60_500);
    let mut out = Vec::new();
    run(&mut c, &fixed, 100, &mut out);
    for (i, r) in out.iter().enumerate() {
        assert_eq!(
            *r,
            [1, 100, 99 - i as i64, 0, 59_500],
            "RL.FIXED #{}",
            i + 101
        );
    }
    let mut out = Vec::new();
    run(&mut c, &log, 100, &mut out);
    // The first burst leaves the trailing window at 59.5 s + 60 s.
    assert!(
        out.iter().all(|r| *r == [0, 100, 0, 59_000, 59_000]),
        "{out:?}"
    );
    let mut out = Vec::new();
    run(&mut c, &sliding, 100, &mut out);
    // estimate = 100 * 59.5/60 = 99.17: no room; room at e = 600 ms.
    assert!(
        out.iter().all(|r| *r == [0, 100, 0, 100, 59_500]),
        "{out:?}"
    );
    assert_eq!(admitted["RL.FIXED"], 200, "RL.FIXED admits twice the limit");
    assert_eq!(admitted["RL.LOG"], 100);
    assert_eq!(admitted["RL.SLIDING"], 100);

    // RL.LOG: nothing until the first burst has left the trailing window, then 100.
    clock_set(&mut c, T0 + 119_499);
    assert_eq!(r5(&mut c, &log), [0, 100, 0, 1, 1]);
    clock_set(&mut c, T0 + 119_500);
    for i in 0..100 {
        assert_eq!(r5(&mut c, &log), [1, 100, 99 - i, 0, 60_000], "late #{i}");
    }
    assert_eq!(r5(&mut c, &log), [0, 100, 0, 60_000, 60_000]);
    // RL.SLIDING: exactly one fits at 60.6 s, the next 600 ms later.
    clock_set(&mut c, T0 + 60_600);
    assert_eq!(r5(&mut c, &sliding), [1, 100, 0, 0, 119_400]);
    assert_eq!(r5(&mut c, &sliding), [0, 100, 0, 600, 119_400]);
}
