//! CL.THROTTLE on a real redis-server: redis-cell's replies for the same calls (its README
//! sequence, a quantity above the limit, an independent reimplementation of redis-cell's
//! formula compared reply by reply over randomized schedules), its string state adopted,
//! the documented deviations (ERR for zero/negative arguments, WRONGTYPE for other types).

use rl_testkit as common;
use rl_testkit::args;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use std::collections::BTreeMap;

/// T0 in ns: redis-cell stores the theoretical arrival time (TAT) in ns since the epoch.
const T0_NS: i128 = T0 as i128 * 1_000_000;

/// CL.THROTTLE and PTTL of its key in one MULTI: the five integers, and the PTTL.
fn throttle_ttl(c: &mut Connection, a: &[String]) -> ([i64; 5], i64) {
    let out = multi(c, &[a.to_vec(), args!("PTTL", a[1])]);
    if let Some(e) = error_text(&out[0]) {
        panic!("{a:?} answered the error {e:?}");
    }
    let r = reply5(&out[0]).unwrap_or_else(|m| panic!("{a:?}: {m}"));
    (r, int(&out[1]))
}

fn throttle(c: &mut Connection, a: &[String]) -> [i64; 5] {
    throttle_ttl(c, a).0
}

// ------------------------------------------------- redis-cell, reimplemented for the test

/// redis-cell's GCRA (redis-cell-impl `RateLimiter::rate_limit` and the command's reply),
/// written from its published formula: integer ns; emission interval
/// `T = (period_ns as f64 / count as f64) as i64`; `dvt = T * (max_burst + 1)`;
/// remaining `(next_us as f64 / T_us as f64) as i64`; seconds truncated, plus one if the
/// sub-second part holds at least one whole ms; -1 s as "no retry".
struct Cell {
    max_burst: i64,
    count: i64,
    period_s: i64,
}

struct CellOut {
    reply: [i64; 5],
    /// The TAT written (admitted), None when refused.
    new_tat: Option<i128>,
    /// The key's TTL after the call (ns), redis-cell's `ttl`.
    ttl: i128,
}

fn cell_secs(d: i128) -> i64 {
    let s = d / 1_000_000_000;
    let sub_ms = (d % 1_000_000_000) / 1_000_000;
    (s + if sub_ms > 0 { 1 } else { 0 }) as i64
}

impl Cell {
    fn t(&self) -> i128 {
        ((self.period_s as i128 * 1_000_000_000) as f64 / self.count as f64) as i64 as i128
    }

    /// One call at `now` (ns) on a key holding `tat` (None: no key; redis-cell's key
    /// expires by the time its TAT has passed, so a stored TAT <= now reads as no key).
    fn call(&self, tat: Option<i128>, quantity: i64, now: i128) -> CellOut {
        let t = self.t();
        let dvt = t * (self.max_burst as i128 + 1);
        let increment = t * quantity as i128;
        let tat = match tat {
            Some(v) if v > now => v,
            _ => now,
        };
        let new_tat = if now > tat {
            now + increment
        } else {
            tat + increment
        };
        let allow_at = new_tat - dvt;
        let diff = now - allow_at;
        let mut retry = -1_000_000_000i128;
        let (limited, ttl, stored) = if diff < 0 {
            if increment <= dvt {
                retry = -diff;
            }
            (true, tat - now, None)
        } else {
            (false, new_tat - now, Some(new_tat))
        };
        let next = dvt - ttl;
        let remaining = if next > -t {
            ((next / 1_000) as f64 / (t / 1_000) as f64) as i64
        } else {
            0
        };
        CellOut {
            reply: [
                limited as i64,
                self.max_burst + 1,
                remaining,
                cell_secs(retry),
                cell_secs(ttl),
            ],
            new_tat: stored,
            ttl,
        }
    }
}

// ------------------------------------------------------------------------ the README

#[test]
fn readme_sequence_twenty_calls_at_a_fixed_clock() {
    let (_srv, mut c) = Server::at_clock(T0);
    let a = args!("CL.THROTTLE", "user123", 15, 30, 60);
    let mut got = Vec::new();
    for i in 1..=20 {
        let (r, p) = throttle_ttl(&mut c, &a);
        // T = 2 s: the key lives until its TAT, 2 s per admitted call. A refused call
        // (17 on) writes nothing: the TTL of call 16 runs on in real time meanwhile.
        if i <= 16 {
            assert_pttl_in_multi(p, 2_000 * i, &format!("call {i}"));
        } else {
            assert!(p > 0 && p <= 32_000, "call {i}: PTTL {p}");
        }
        got.push(r);
    }
    assert_eq!(got[0], [0, 16, 15, -1, 2]);
    for (i, r) in got.iter().enumerate().take(16) {
        assert_eq!(
            *r,
            [0, 16, 15 - i as i64, -1, 2 * (i as i64 + 1)],
            "call {}",
            i + 1
        );
    }
    assert_eq!(got[15], [0, 16, 0, -1, 32]);
    for (i, r) in got.iter().enumerate().skip(16) {
        assert_eq!(*r, [1, 16, 0, 2, 32], "call {}", i + 1);
    }
    let m = info(&mut c, "user123").unwrap();
    assert_eq!(m["algorithm"], "gcra");
    assert_eq!(m["burst"], "16");
    assert_eq!(m["count"], "30");
    assert_eq!(m["period_ms"], "60000");
    assert_eq!(m["tat_ns"], (T0_NS + 32_000_000_000).to_string());
    // 2 s later one more fits; 1 ms earlier it does not (retry rounds up to 1 s).
    clock_advance(&mut c, 1_999);
    assert_eq!(throttle(&mut c, &a), [1, 16, 0, 1, 31]);
    clock_advance(&mut c, 1);
    assert_eq!(throttle(&mut c, &a), [0, 16, 0, -1, 32]);
}

#[test]
fn quantity_above_the_limit_is_refused_and_writes_nothing() {
    let (_srv, mut c) = Server::at_clock(T0);
    // max_burst 5: limit 6, T = 1 s.
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "q", 5, 1, 1, 7)),
        [1, 6, 6, -1, 0]
    );
    assert!(
        !exists(&mut c, "q"),
        "a refused CL.THROTTLE created the key"
    );
    // Exactly the limit fits a fresh key.
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "q", 5, 1, 1, 6)),
        [0, 6, 0, -1, 6]
    );
    ok(&mut c, &args!("DEL", "q"));
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "q", 5, 1, 1)),
        [0, 6, 5, -1, 1]
    );
    let before = snap(&mut c, "q");
    // Above the limit on an existing key: never any retry time.
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "q", 5, 1, 1, 7)),
        [1, 6, 5, -1, 1]
    );
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "q", 5, 1, 1, 1000)),
        [1, 6, 5, -1, 1]
    );
    // Within the limit but not now: a retry time.
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "q", 5, 1, 1, 6)),
        [1, 6, 5, 1, 1]
    );
    assert_eq!(
        snap(&mut c, "q"),
        before,
        "a refused CL.THROTTLE changed the key"
    );
}

/// Lowering max_burst with the same rate keeps the caller's debt, as redis-cell does:
/// `99 1 1 100` then `4 1 1` answers redis-cell's `[1, 5, 0, 96, 100]` (the test clock
/// frozen), and the refusal writes nothing. Raising it again: the same debt, within it.
#[test]
fn lowering_max_burst_keeps_the_debt() {
    let (_s, mut c) = Server::at_clock(T0);
    let (r, ttl) = throttle_ttl(&mut c, &args!("CL.THROTTLE", "debt", 99, 1, 1, 100));
    assert_eq!(r, [0, 100, 0, -1, 100]);
    assert!((99_000..=100_000).contains(&ttl), "PTTL {ttl}");
    let before = snap(&mut c, "debt");
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "debt", 4, 1, 1)),
        [1, 5, 0, 96, 100]
    );
    assert_eq!(snap(&mut c, "debt"), before, "the refusal wrote");
    clock_advance(&mut c, 95_999);
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "debt", 4, 1, 1))[0],
        1
    );
    clock_advance(&mut c, 1);
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "debt", 4, 1, 1)),
        [0, 5, 0, -1, 5]
    );
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "debt", 99, 1, 1)),
        [0, 100, 94, -1, 6]
    );
}

#[test]
fn zero_and_negative_arguments_are_errors() {
    let (_srv, mut c) = Server::at_clock(T0);
    throttle(&mut c, &args!("CL.THROTTLE", "k", 5, 10, 60));
    let before = snap_all(&mut c);
    let pos = |n: &str| format!("ERR {n} must be a positive integer");
    let neg = |n: &str| format!("ERR {n} must not be negative");
    let mut cases: Vec<(Vec<String>, String)> = Vec::new();
    for key in ["k", "new"] {
        for bad in [0, -1, -100] {
            cases.push((
                args!("CL.THROTTLE", key, 5, bad, 60),
                pos("count_per_period"),
            ));
            cases.push((args!("CL.THROTTLE", key, 5, 10, bad), pos("period")));
        }
        // max_burst 0 (no burst) and quantity 0 (a peek) are redis-cell's own.
        for bad in [-1, -100] {
            cases.push((args!("CL.THROTTLE", key, bad, 10, 60), neg("max_burst")));
            cases.push((args!("CL.THROTTLE", key, 5, 10, 60, bad), neg("quantity")));
        }
        // The period's bound is in its own unit, seconds.
        cases.push((
            args!("CL.THROTTLE", key, 1, 1, 2_000_000_000),
            "ERR period must be at most 1000000000".into(),
        ));
        for bad in ["x", "1.5", "", "99999999999999999999"] {
            cases.push((args!("CL.THROTTLE", key, bad, 10, 60), ERR_NOT_INT.into()));
            cases.push((args!("CL.THROTTLE", key, 5, bad, 60), ERR_NOT_INT.into()));
            cases.push((args!("CL.THROTTLE", key, 5, 10, bad), ERR_NOT_INT.into()));
            cases.push((
                args!("CL.THROTTLE", key, 5, 10, 60, bad),
                ERR_NOT_INT.into(),
            ));
        }
        let arity = "ERR wrong number of arguments for 'cl.throttle' command".to_string();
        cases.push((args!("CL.THROTTLE", key), arity.clone()));
        cases.push((args!("CL.THROTTLE", key, 5, 10), arity.clone()));
        cases.push((args!("CL.THROTTLE", key, 5, 10, 60, 1, 1), arity.clone()));
    }
    for (a, want) in &cases {
        assert_eq!(&err(&mut c, a), want, "{a:?}");
    }
    assert_eq!(snap_all(&mut c), before, "bad input changed data");
    ping(&mut c);
}

// ------------------------------------------------------- redis-cell's replies, as facts

/// Replies recorded from redis-cell itself (brandur/redis-cell at 4d42338, built locally,
/// its clock read from a file so that every call ran at the exact instant given; key expiry
/// emulated at those instants: redis-cell's key expires at its TTL truncated to whole ms,
/// and lives to the end of that millisecond, so a debt under 1 ms is seen by every call in
/// the same millisecond; the rows "us" and "mb" are the contract's sub-ms case): (key,
/// instant in ms after T0, the arguments after the key, redis-cell's reply, whether the key
/// exists afterwards). Each key is one sequence, in order. Covered: max_burst 0, quantity 0
/// on fresh and existing keys, quantity equal to and above the limit, the smallest and
/// largest periods, emission intervals of 1 µs and of a fraction of a ns, big bursts and
/// big intervals. Not here (the rule-change carry-over of GCRA states): lowering max_burst
/// keeps the debt (`99 1 1 100` then `4 1 1`: redis-cell `[1,5,0,96,100]`).
/// One recorded call: see [`CELL_FACTS`].
type Fact = (&'static str, i64, &'static [i64], [i64; 5], bool);

#[rustfmt::skip]
const CELL_FACTS: &[Fact] = &[
    ("b0", 0, &[0, 1, 2], [0, 1, 0, -1, 2], true),
    ("b0", 0, &[0, 1, 2], [1, 1, 0, 2, 2], true),
    ("b0", 1000, &[0, 1, 2], [1, 1, 0, 1, 1], true),
    ("b0", 1999, &[0, 1, 2], [1, 1, 0, 1, 1], true),
    ("b0", 2000, &[0, 1, 2], [0, 1, 0, -1, 2], true),
    ("b0", 2000, &[0, 1, 2], [1, 1, 0, 2, 2], true),
    ("b0f", 0, &[0, 10, 1], [0, 1, 0, -1, 1], true),
    ("b0f", 50, &[0, 10, 1], [1, 1, 0, 1, 1], true),
    ("b0f", 99, &[0, 10, 1], [1, 1, 0, 1, 1], true),
    ("b0f", 100, &[0, 10, 1], [0, 1, 0, -1, 1], true),
    ("b0f", 100, &[0, 10, 1, 0], [0, 1, 0, -1, 1], true),
    ("b0f", 150, &[0, 10, 1, 2], [1, 1, 0, -1, 1], true),
    ("p", 0, &[5, 1, 1, 0], [0, 6, 6, -1, 0], false),
    ("p", 0, &[5, 1, 1, 0], [0, 6, 6, -1, 0], false),
    ("p0", 0, &[0, 1, 2, 0], [0, 1, 1, -1, 0], false),
    ("e", 0, &[5, 1, 1], [0, 6, 5, -1, 1], true),
    ("e", 0, &[5, 1, 1], [0, 6, 4, -1, 2], true),
    ("e", 0, &[5, 1, 1, 2], [0, 6, 2, -1, 4], true),
    ("e", 500, &[5, 1, 1, 0], [0, 6, 2, -1, 4], true),
    ("e", 500, &[5, 1, 1, 0], [0, 6, 2, -1, 4], true),
    ("e", 500, &[5, 1, 1], [0, 6, 1, -1, 5], true),
    ("e", 4000, &[5, 1, 1, 0], [0, 6, 5, -1, 1], true),
    ("e", 5500, &[5, 1, 1, 0], [0, 6, 6, -1, 0], false),
    ("e", 6000, &[5, 1, 1, 0], [0, 6, 6, -1, 0], false),
    ("full", 0, &[1, 1, 10], [0, 2, 1, -1, 10], true),
    ("full", 0, &[1, 1, 10], [0, 2, 0, -1, 20], true),
    ("full", 1, &[1, 1, 10, 0], [0, 2, 0, -1, 20], true),
    ("full", 1, &[1, 1, 10], [1, 2, 0, 10, 20], true),
    ("l", 0, &[5, 1, 1, 6], [0, 6, 0, -1, 6], true),
    ("l", 0, &[5, 1, 1, 1], [1, 6, 0, 1, 6], true),
    ("l", 0, &[5, 1, 1, 0], [0, 6, 0, -1, 6], true),
    ("l", 999, &[5, 1, 1, 1], [1, 6, 0, 1, 6], true),
    ("l", 1000, &[5, 1, 1, 1], [0, 6, 0, -1, 6], true),
    ("g", 0, &[5, 1, 1, 7], [1, 6, 6, -1, 0], false),
    ("g", 0, &[5, 1, 1], [0, 6, 5, -1, 1], true),
    ("g", 0, &[5, 1, 1, 7], [1, 6, 5, -1, 1], true),
    ("g", 0, &[5, 1, 1, 1000000], [1, 6, 5, -1, 1], true),
    ("g", 0, &[5, 1, 1, 6], [1, 6, 5, 1, 1], true),
    ("g0", 0, &[0, 1, 1, 2], [1, 1, 1, -1, 0], false),
    ("g0", 0, &[0, 1, 1, 1], [0, 1, 0, -1, 1], true),
    ("g0", 0, &[0, 1, 1, 2], [1, 1, 0, -1, 1], true),
    ("pmin", 0, &[0, 1, 1], [0, 1, 0, -1, 1], true),
    ("pmin", 0, &[3, 1, 1], [0, 4, 2, -1, 2], true),
    ("pmax", 0, &[0, 1, 1000000000], [0, 1, 0, -1, 1000000000], true),
    ("pmax", 0, &[0, 1, 1000000000, 0], [0, 1, 0, -1, 1000000000], true),
    ("pmax", 86400000, &[0, 1, 1000000000], [1, 1, 0, 999913600, 999913600], true),
    ("us", 0, &[1, 1000000, 1], [0, 2, 1, -1, 0], true),
    ("us", 0, &[1, 1000000, 1], [0, 2, 0, -1, 0], true),
    ("us", 0, &[1, 1000000, 1], [1, 2, 0, 0, 0], true),
    ("mb", 0, &[999999, 1000000, 1], [0, 1000000, 999999, -1, 0], true),
    ("mb", 0, &[999999, 1000000, 1, 1000000], [1, 1000000, 999999, 0, 0], true),
    ("mb", 0, &[999999, 1000000, 1, 1], [0, 1000000, 999998, -1, 0], true),
    ("mb", 1, &[999999, 1000000, 1, 1000], [0, 1000000, 999000, -1, 1], true),
    ("big", 0, &[998, 1, 1000000], [0, 999, 998, -1, 1000000], true),
    ("big", 0, &[998, 1, 1000000, 998], [0, 999, 0, -1, 999000000], true),
    ("big", 0, &[998, 1, 1000000], [1, 999, 0, 1000000, 999000000], true),
    ("big", 1000, &[998, 1, 1000000, 0], [0, 999, 0, -1, 998999999], true),
    ("frac", 0, &[4, 3, 7], [0, 5, 4, -1, 3], true),
    ("frac", 0, &[4, 3, 7, 3], [0, 5, 1, -1, 10], true),
    ("frac", 0, &[4, 3, 7, 2], [1, 5, 1, 3, 10], true),
    ("frac", 2333, &[4, 3, 7], [0, 5, 0, -1, 10], true),
    ("frac", 2334, &[4, 3, 7], [0, 5, 0, -1, 12], true),
    ("third", 0, &[2, 3, 1], [0, 3, 2, -1, 1], true),
    ("third", 0, &[2, 3, 1, 3], [1, 3, 2, 1, 1], true),
    ("third", 333, &[2, 3, 1], [0, 3, 1, -1, 1], true),
    ("third", 334, &[2, 3, 1], [0, 3, 1, -1, 1], true),
    ("third", 334, &[2, 3, 1, 0], [0, 3, 1, -1, 1], true),
];

#[test]
fn replies_and_keys_equal_redis_cells_recorded_facts() {
    let srv = Server::start();
    let mut c = srv.con();
    // Per key: when its TTL runs out at the test clock's instants (the server's own expiry
    // runs on the real clock). The rows of one key at one instant run in one MULTI: the
    // server's expiry clock stands still inside it, so a key with a TTL of 1 ms (a debt
    // under 1 ms) is seen by every call of that instant, whatever the machine's speed.
    let mut expires: BTreeMap<&str, i64> = BTreeMap::new();
    let mut i = 0;
    while i < CELL_FACTS.len() {
        let (key, off, ..) = CELL_FACTS[i];
        let group: Vec<(usize, &Fact)> = CELL_FACTS
            .iter()
            .enumerate()
            .skip(i)
            .take_while(|(_, f)| f.0 == key && f.1 == off)
            .collect();
        i += group.len();
        let now_ms = T0 + off;
        clock_set(&mut c, now_ms);
        if expires.get(key).is_some_and(|&at| now_ms >= at) {
            ok(&mut c, &args!("DEL", key));
            expires.remove(key);
        }
        let mut cmds = vec![args!("RL.INFO", key)];
        for (_, &(_, _, rest, _, _)) in &group {
            let mut a = args!("CL.THROTTLE", key);
            a.extend(rest.iter().map(|v| v.to_string()));
            cmds.push(a);
            cmds.push(args!("RL.INFO", key));
        }
        let out = multi(&mut c, &cmds);
        let tat_of = |v: &Value| parse_info(v).map(|m| info_int(&m, "tat_ns"));
        let mut before = tat_of(&out[0]);
        for (n, (row, &(_, _, rest, want, exists_after))) in group.iter().enumerate() {
            let a = &cmds[1 + 2 * n];
            let got = reply5(&out[1 + 2 * n]).unwrap_or_else(|m| panic!("row {row}: {a:?}: {m}"));
            assert_eq!(got, want, "row {row}: {a:?} at T0 + {off} ms");
            let after = tat_of(&out[2 + 2 * n]);
            assert_eq!(
                after.is_some(),
                exists_after,
                "row {row}: {a:?} at T0 + {off} ms: key exists afterwards"
            );
            match after {
                Some(tat) if after != before => {
                    // The key lives until its TAT, rounded up to whole ms.
                    let ttl_ns = i128::from(tat) - i128::from(now_ms) * 1_000_000;
                    let ttl_ms = (ttl_ns + 999_999) / 1_000_000;
                    expires.insert(key, now_ms + ttl_ms as i64);
                }
                Some(_) => {}
                None => {
                    expires.remove(key);
                }
            }
            if rest.get(3) == Some(&0) {
                assert_eq!(after, before, "row {row}: a peek wrote");
            }
            before = after;
        }
    }
}

// ------------------------------------------------------------------ redis-cell's state

#[test]
fn redis_cell_string_state_is_adopted() {
    let (_srv, mut c) = Server::at_clock(T0);
    // redis-cell's value: the TAT in ns, 1 s ahead of now.
    let tat = T0_NS + 1_000_000_000;
    ok(&mut c, &args!("SET", "cell", tat, "PX", 1_000));
    assert_eq!(key_type(&mut c, "cell"), "string");
    let a = args!("CL.THROTTLE", "cell", 15, 30, 60);
    let cell = Cell {
        max_burst: 15,
        count: 30,
        period_s: 60,
    };
    let want = cell.call(Some(tat), 1, T0_NS);
    let (r, p) = throttle_ttl(&mut c, &a);
    assert_eq!(r, want.reply);
    assert_eq!(r, [0, 16, 14, -1, 3]);
    assert!((2_998..=3_000).contains(&p), "PTTL {p} after adoption");
    assert_eq!(key_type(&mut c, "cell"), "ratelimit");
    let m = info(&mut c, "cell").unwrap();
    assert_eq!(m["algorithm"], "gcra");
    assert_eq!(m["burst"], "16");
    assert_eq!(m["tat_ns"], want.new_tat.unwrap().to_string());
    // ... and goes on as redis-cell would.
    let mut tat = want.new_tat;
    for i in 0..16 {
        let w = cell.call(tat, 1, T0_NS);
        assert_eq!(throttle(&mut c, &a), w.reply, "call {}", i + 2);
        tat = w.new_tat.or(tat);
    }

    // A spent redis-cell state: refused with redis-cell's answer (TAT 32 s ahead).
    let full = T0_NS + 32_000_000_000;
    ok(&mut c, &args!("SET", "full", full));
    let w = cell.call(Some(full), 1, T0_NS);
    assert_eq!(w.reply, [1, 16, 0, 2, 32]);
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "full", 15, 30, 60)),
        w.reply
    );
    clock_advance(&mut c, 2_000);
    let (r, p) = throttle_ttl(&mut c, &args!("CL.THROTTLE", "full", 15, 30, 60));
    assert_eq!(r, [0, 16, 0, -1, 32]);
    assert!((31_998..=32_000).contains(&p), "PTTL {p}");
    assert_eq!(key_type(&mut c, "full"), "ratelimit");
    assert_eq!(info(&mut c, "full").unwrap()["algorithm"], "gcra");

    // A TAT long past (the key outlived it): a fresh key's answer.
    ok(&mut c, &args!("SET", "old", 5));
    assert_eq!(
        throttle(&mut c, &args!("CL.THROTTLE", "old", 15, 30, 60)),
        [0, 16, 15, -1, 2]
    );
    assert_eq!(key_type(&mut c, "old"), "ratelimit");
}

#[test]
fn other_types_get_wrongtype_and_stay_untouched() {
    let (_srv, mut c) = Server::at_clock(T0);
    for (k, v) in [
        ("s:text", "hello"),
        ("s:mixed", "12abc"),
        ("s:hex", "0x10"),
        ("s:space", " 1700000041000000000"),
        ("s:empty", ""),
    ] {
        ok(&mut c, &args!("SET", k, v));
    }
    ok(&mut c, &args!("HSET", "hash", "f", "v"));
    ok(&mut c, &args!("RPUSH", "list", "1700000041000000000"));
    ok(&mut c, &args!("SADD", "set", "x"));
    ok(&mut c, &args!("ZADD", "zset", 1, "m"));
    assert_eq!(
        rate(&mut c, &args!("RL.FIXED", "fixed", 5, 60_000))[0],
        1,
        "RL.FIXED setup"
    );
    assert_eq!(
        rate(&mut c, &args!("RL.SLIDING", "sliding", 5, 60_000))[0],
        1
    );
    let before = snap_all(&mut c);
    for k in [
        "s:text", "s:mixed", "s:hex", "s:space", "s:empty", "hash", "list", "set", "zset",
    ] {
        for q in [1, 100] {
            let e = err(&mut c, &args!("CL.THROTTLE", k, 15, 30, 60, q));
            assert!(e.starts_with("WRONGTYPE"), "CL.THROTTLE {k} answered {e:?}");
        }
    }
    for algo in ["fixed", "sliding"] {
        assert_eq!(
            err(&mut c, &args!("CL.THROTTLE", algo, 15, 30, 60)),
            format!("WRONGTYPE key holds a ratelimit state of another algorithm ({algo})")
        );
    }
    assert_eq!(snap_all(&mut c), before, "WRONGTYPE calls changed data");
    // Numbers redis-cell never writes (negative, fractional, beyond 64 bits): whatever
    // the answer, the server stays up, and an error leaves the key as it was.
    for (k, v) in [
        ("n:neg", "-1700000041000000000"),
        ("n:float", "1700000041000000000.5"),
        ("n:huge", "99999999999999999999999"),
    ] {
        ok(&mut c, &args!("SET", k, v));
        let before = snap(&mut c, k);
        let r = raw(&mut c, &args!("CL.THROTTLE", k, 15, 30, 60));
        if error_text(&r).is_some() {
            assert_eq!(snap(&mut c, k), before, "CL.THROTTLE {k} answered {r:?}");
        } else {
            reply5(&r).unwrap_or_else(|m| panic!("CL.THROTTLE {k}: {m}"));
        }
        ping(&mut c);
    }
}

// --------------------------------------------- randomized, against the reimplementation

#[test]
fn randomized_schedules_match_redis_cell_reply_for_reply() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0 + 123);
    let mut rng = StdRng::seed_from_u64(0xce11);
    // (max_burst, count, period_s): emission intervals of whole seconds, of fractions of
    // a ns (7 s / 3), truncated through f64; all >= 5 s, so that no key expires in real
    // time while the run lasts (its TTL is at least one interval).
    let mut rules: Vec<(i64, i64, i64)> = vec![
        (15, 30, 600),
        (1, 1, 7),
        (4, 3, 17),
        (9, 7, 3600),
        (2, 11, 61),
        (99, 100, 3600),
    ];
    for _ in 0..6 {
        let period = rng.gen_range(5..=7200);
        let count = rng.gen_range(1..=(period / 5).max(1));
        rules.push((rng.gen_range(1..=30), count, period));
    }
    // How often each kind of answer came up: admitted, refused with a retry time,
    // refused for good (quantity above the limit).
    let mut seen = [0usize; 3];
    for (n, &(max_burst, count, period_s)) in rules.iter().enumerate() {
        let cell = Cell {
            max_burst,
            count,
            period_s,
        };
        let t_ms = (cell.t() / 1_000_000) as i64;
        let key = format!("k{n}");
        let mut tat: Option<i128> = None;
        for step in 0..150 {
            let dt = match rng.gen_range(0..10) {
                0..=3 => 0,
                4..=6 => rng.gen_range(1..=t_ms.max(2)),
                7 | 8 => rng.gen_range(1..1_000),
                _ => rng.gen_range(1..=t_ms * (max_burst + 3)),
            };
            clock_advance(&mut c, dt);
            let now = clock_get(&mut c) as i128 * 1_000_000;
            let limit = max_burst + 1;
            let quantity = match rng.gen_range(0..10) {
                0..=5 => 1,
                6..=8 => rng.gen_range(1..=limit),
                _ => rng.gen_range(limit..=limit + 3),
            };
            let mut a = args!("CL.THROTTLE", &key, max_burst, count, period_s);
            if quantity != 1 || rng.gen_bool(0.3) {
                a.push(quantity.to_string());
            }
            let want = cell.call(tat, quantity, now);
            seen[match want.reply {
                [0, ..] => 0,
                [_, _, _, -1, _] => 2,
                _ => 1,
            }] += 1;
            let out = multi(&mut c, &[a.clone(), args!("PTTL", &key)]);
            // Byte for byte: an array of five integers, the same ones.
            let expected = Value::Array(want.reply.iter().map(|&v| Value::Int(v)).collect());
            assert_eq!(
                out[0],
                expected,
                "rule {n} {:?} step {step}: {a:?} at +{} ms (TAT {tat:?})",
                (max_burst, count, period_s),
                (now - T0_NS) / 1_000_000
            );
            if let Some(nt) = want.new_tat {
                tat = Some(nt);
                // The key lives until its TAT (rounded up to whole ms).
                let ttl_ms = ((want.ttl + 999_999) / 1_000_000) as i64;
                let p = int(&out[1]);
                assert_pttl_in_multi(p, ttl_ms, &format!("rule {n} step {step}"));
            }
            if step % 25 == 0 {
                if let Some(t) = tat {
                    let m = info(&mut c, &key).unwrap();
                    assert_eq!(m["tat_ns"], t.to_string(), "rule {n} step {step}");
                }
            }
        }
    }
    assert!(
        seen.iter().all(|&n| n >= 50),
        "too little variety: {seen:?}"
    );
}

/// Rates faster than one per ms (the contract's CL.THROTTLE section): 1,000 back-to-back
/// `CL.THROTTLE k 4 1001 1` admit the burst of 5 and then one per elapsed millisecond,
/// never all of them, and the key holds the debt. One MULTI per burst: the server's expiry
/// clock stands still inside it, as the module's test clock does.
#[test]
fn sub_millisecond_rates_limit_as_redis_cell() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let call = args!("CL.THROTTLE", "fast", 4, 1001, 1);
    // One MULTI for the whole run: the key's TTL is a few ms of real time, and between two
    // MULTIs the server's expiry clock would move on while the test clock stands still.
    let mut cmds = vec![call.clone(); 1000];
    // Then about one per elapsed ms: 100 ms of 10 calls each admit 100 (the interval is
    // 999,000 ns, so 100 ms hold 100.1 intervals).
    for _ in 0..100 {
        cmds.push(args!("RL.CLOCK", "ADVANCE", 1));
        cmds.extend(std::iter::repeat_n(call.clone(), 10));
    }
    cmds.push(args!("EXISTS", "fast"));
    let out = multi(&mut c, &cmds);
    let admitted = |v: &[Value]| {
        v.iter()
            .filter_map(|v| reply5(v).ok())
            .filter(|r| r[0] == 0)
            .count()
    };
    assert_eq!(
        admitted(&out[..1000]),
        5,
        "one instant admits the burst only"
    );
    let later = admitted(&out[1000..]);
    assert!((100..=101).contains(&later), "admitted {later} in 100 ms");
    assert_eq!(
        int(out.last().expect("EXISTS")),
        1,
        "the key holds the debt"
    );
    // The same rate through RL.GCRA limits alike (reference: burst 5, 1001 per 1000 ms).
    let out = multi(
        &mut c,
        &vec![args!("RL.GCRA", "fast2", 5, 1001, 1000); 1000],
    );
    let admitted = out
        .iter()
        .filter(|v| reply5(v).expect("five integers")[0] == 1)
        .count();
    assert_eq!(admitted, 5);
}
