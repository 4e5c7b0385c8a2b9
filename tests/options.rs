//! The options of the contract's "Beyond yes or no" on a real server, for every rate
//! command they apply to: `COST 0` (a peek), `REFUND n`, `PARTIAL`, `RESERVE r`,
//! `BLOCK ms`, `STAGGER`, with `DRYRUN`, in RL.ALL and against CL.THROTTLE. Exact replies on
//! the test clock (never a sleep); the PTTL after every write equals reset_after_ms; what
//! must not write leaves the key (type, expiry, RL.INFO) and the AOF (the stream replicas
//! get too) untouched; REFUND and BLOCK reach a replica as RL._APPLY effects and leave it
//! identical; a BLOCK survives DEBUG RELOAD; the INFO counters; the syntax errors.

use rl_testkit as common;
use rl_testkit::args;

use common::*;
use redis::{Connection, Value};
use std::collections::BTreeMap;

/// One rate command with limit 5 and the numbers the expected replies below assume.
struct Alg {
    cmd: &'static str,
    nums: &'static [i64],
    /// The name of its limit argument in errors.
    limit_name: &'static str,
    /// reset_after_ms after spending `n` of 5 units at T0 on a fresh key.
    reset: fn(i64) -> i64,
    /// retry_after_ms, at T0 with all 5 units spent at T0, until 1 unit is admitted.
    retry_one: i64,
    queue: bool,
}

fn per_second(n: i64) -> i64 {
    n * 1000
}

const ALGS: [Alg; 6] = [
    Alg {
        cmd: "RL.GCRA",
        nums: &[5, 1, 1000],
        limit_name: "burst",
        reset: per_second,
        retry_one: 1000,
        queue: false,
    },
    Alg {
        cmd: "RL.TOKENBUCKET",
        nums: &[5, 1, 1000],
        limit_name: "capacity",
        reset: per_second,
        retry_one: 1000,
        queue: false,
    },
    Alg {
        cmd: "RL.QUEUE",
        nums: &[5, 1000],
        limit_name: "capacity",
        reset: per_second,
        retry_one: 1000,
        queue: true,
    },
    // Windows of 60 s aligned at T0: the current window ends 60 s later.
    Alg {
        cmd: "RL.FIXED",
        nums: &[5, 60_000],
        limit_name: "limit",
        reset: |_| 60_000,
        retry_one: 60_000,
        queue: false,
    },
    // Both counters leave the estimate at the end of the next window; 5 in the previous
    // window weigh 4 or less once 1/5 of the next window has passed.
    Alg {
        cmd: "RL.SLIDING",
        nums: &[5, 60_000],
        limit_name: "limit",
        reset: |_| 120_000,
        retry_one: 72_000,
        queue: false,
    },
    Alg {
        cmd: "RL.LOG",
        nums: &[5, 60_000],
        limit_name: "limit",
        reset: |_| 60_000,
        retry_one: 60_000,
        queue: false,
    },
];

impl Alg {
    fn name(&self) -> String {
        self.cmd.trim_start_matches("RL.").to_lowercase()
    }

    fn call(&self, key: &str, opts: &[&str]) -> Vec<String> {
        let mut a = args!(self.cmd, key);
        a.extend(self.nums.iter().map(|n| n.to_string()));
        a.extend(opts.iter().map(|o| o.to_string()));
        a
    }

    /// The expected reply: the five fields, `delay_ms` for QUEUE, then `granted` if any.
    fn want(&self, five: [i64; 5], delay: i64, granted: Option<i64>) -> Vec<i64> {
        let mut v = five.to_vec();
        if self.queue {
            v.push(delay);
        }
        v.extend(granted);
        v
    }
}

/// A server on the test clock at T0 that writes an AOF (`appendfsync always`): the AOF
/// receives exactly what replicas receive, so it shows what a command propagated.
fn start() -> (Server, Connection) {
    let s = Server::builder().appendonly().start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    (s, c)
}

fn ints(args: &[String], v: &Value) -> Vec<i64> {
    match v {
        Value::Array(items) => items.iter().map(int).collect(),
        other => panic!("{args:?} answered {other:?}"),
    }
}

fn call(c: &mut Connection, args: &[String]) -> Vec<i64> {
    let v = ok(c, args);
    ints(args, &v)
}

/// The AOF's commands as text (the name uppercased, then the key).
fn aof(s: &Server) -> Vec<(String, String)> {
    aof_commands(s)
        .into_iter()
        .map(|c| {
            let name = String::from_utf8_lossy(&c[0]).to_uppercase();
            let key = c.get(1).map(|k| String::from_utf8_lossy(k).into_owned());
            (name, key.unwrap_or_default())
        })
        .collect()
}

/// The commands the last call added to the AOF, without MULTI/EXEC/SELECT.
fn propagated(s: &Server, before: usize) -> Vec<(String, String)> {
    aof(s)
        .into_iter()
        .skip(before)
        .filter(|(n, _)| !matches!(n.as_str(), "MULTI" | "EXEC" | "SELECT"))
        .collect()
}

/// A command that writes: its reply, with the PTTL read in the same MULTI equal to
/// reset_after_ms (no key when it is 0), and what it propagated: exactly one effect on
/// its key, `RL._APPLY` (or `DEL` when the state became fresh).
fn write(s: &Server, c: &mut Connection, args: &[String]) -> Vec<i64> {
    let key = args[1].clone();
    let before = aof(s).len();
    let out = multi(c, &[args.to_vec(), args!("PTTL", key)]);
    if let Some(e) = error_text(&out[0]) {
        panic!("{args:?} answered the error {e:?}");
    }
    let r = ints(args, &out[0]);
    let p = int(&out[1]);
    if r[4] == 0 {
        assert_eq!(p, -2, "{args:?} -> {r:?}: a fresh state leaves no key");
    } else {
        assert_pttl_in_multi(p, r[4], &format!("{args:?} -> {r:?}: reset_after_ms"));
    }
    let got = propagated(s, before);
    let want = if r[4] == 0 { "DEL" } else { "RL._APPLY" };
    assert_eq!(
        got,
        vec![(want.to_string(), key)],
        "{args:?} -> {r:?}: what it propagated"
    );
    r
}

/// A command that must write nothing: the key (type, absolute expiry, RL.INFO) and the
/// AOF are as before.
fn no_write(s: &Server, c: &mut Connection, args: &[String]) -> Vec<i64> {
    let key = &args[1];
    let snap_before = snap(c, key);
    let before = aof(s).len();
    let r = call(c, args);
    assert_eq!(
        snap(c, key),
        snap_before,
        "{args:?} -> {r:?} changed the key"
    );
    assert_eq!(
        propagated(s, before),
        vec![],
        "{args:?} -> {r:?} propagated something"
    );
    r
}

fn info_of(c: &mut Connection, key: &str) -> BTreeMap<String, String> {
    info(c, key).unwrap_or_else(|| panic!("RL.INFO {key} is nil"))
}

fn field(c: &mut Connection, key: &str, f: &str) -> i64 {
    info_int(&info_of(c, key), f)
}

// ------------------------------------------------------------------------------ COST 0

#[test]
fn a_peek_answers_what_is_left_and_writes_nothing() {
    let (s, mut c) = start();
    for a in &ALGS {
        let k = format!("peek:{}", a.name());
        let what = a.cmd;
        // A missing key: everything, no key.
        let r = no_write(&s, &mut c, &a.call(&k, &["COST", "0"]));
        assert_eq!(r, a.want([1, 5, 5, 0, 0], 0, None), "{what}");
        assert!(!exists(&mut c, &k));
        let r = write(&s, &mut c, &a.call(&k, &["COST", "3"]));
        assert_eq!(r, a.want([1, 5, 2, 0, (a.reset)(3)], 0, None), "{what}");
        // A peek: what a cost-1 request sees now, allowed, nothing spent. QUEUE: the wait
        // a request admitted now would get.
        let want = a.want([1, 5, 2, 0, (a.reset)(3)], 3000, None);
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &["COST", "0"])), want);
        assert_eq!(
            no_write(&s, &mut c, &a.call(&k, &["cost", "0", "DRYRUN"])),
            want
        );
        // The peek spent nothing: the 2 left are still there.
        let r = write(&s, &mut c, &a.call(&k, &["COST", "2"]));
        assert_eq!(r, a.want([1, 5, 0, 0, (a.reset)(5)], 3000, None), "{what}");
        // A full key: a peek is still allowed (nothing left, nothing to wait for).
        let want = a.want([1, 5, 0, 0, (a.reset)(5)], 5000, None);
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &["COST", "0"])), want);
    }
}

// ------------------------------------------------------------------------------ REFUND

#[test]
fn a_refund_gives_back_units_and_never_goes_past_fresh() {
    let (s, mut c) = start();
    for a in &ALGS {
        let k = format!("refund:{}", a.name());
        let what = a.cmd;
        // A missing key: nothing to give back, nothing created.
        let r = no_write(&s, &mut c, &a.call(&k, &["REFUND", "2"]));
        assert_eq!(r, a.want([1, 5, 5, 0, 0], 0, None), "{what}");
        assert!(!exists(&mut c, &k));
        write(&s, &mut c, &a.call(&k, &["COST", "4"]));
        // DRYRUN: the same answer, nothing written.
        let want = a.want([1, 5, 3, 0, (a.reset)(2)], 2000, None);
        let r = no_write(&s, &mut c, &a.call(&k, &["REFUND", "2", "DRYRUN"]));
        assert_eq!(r, want, "{what} REFUND 2 DRYRUN");
        // The reply is a peek of the state after the refund; the TTL follows it.
        let r = write(&s, &mut c, &a.call(&k, &["refund", "2"]));
        assert_eq!(r, want, "{what} REFUND 2");
        assert_eq!(
            no_write(&s, &mut c, &a.call(&k, &["COST", "0"])),
            want,
            "{what}"
        );
        // More than was spent (and than the limit): back to fresh, so the key is deleted.
        let r = write(&s, &mut c, &a.call(&k, &["REFUND", "100"]));
        assert_eq!(r, a.want([1, 5, 5, 0, 0], 0, None), "{what} REFUND 100");
        assert!(!exists(&mut c, &k));
    }
}

#[test]
fn gcra_refunds_move_the_tat_back_but_not_before_now() {
    let (s, mut c) = start();
    for cmd in ["RL.GCRA", "RL.TOKENBUCKET"] {
        let k = format!("tat:{cmd}");
        write(&s, &mut c, &args!(cmd, k, 5, 1, 1000, "COST", 5));
        assert_eq!(field(&mut c, &k, "tat_ns"), (T0 + 5000) * 1_000_000);
        clock_advance(&mut c, 2500);
        // 2.5 units back at T0+2500; one more back: the TAT 1 s earlier.
        let r = write(&s, &mut c, &args!(cmd, k, 5, 1, 1000, "REFUND", 1));
        assert_eq!(r, vec![1, 5, 3, 0, 1500], "{cmd}");
        assert_eq!(field(&mut c, &k, "tat_ns"), (T0 + 4000) * 1_000_000);
        // 2 more would put it at T0+2000, before now: it stops at now (fresh: no key).
        let r = write(&s, &mut c, &args!(cmd, k, 5, 1, 1000, "REFUND", 2));
        assert_eq!(r, vec![1, 5, 5, 0, 0], "{cmd}");
        clock_set(&mut c, T0);
    }
}

#[test]
fn window_and_log_refunds_take_the_newest_units() {
    let (s, mut c) = start();
    // SLIDING: the current window's count first, then the previous one's.
    write(
        &s,
        &mut c,
        &args!("RL.SLIDING", "sw", 10, 60_000, "COST", 4),
    );
    clock_advance(&mut c, 60_000);
    write(
        &s,
        &mut c,
        &args!("RL.SLIDING", "sw", 10, 60_000, "COST", 2),
    );
    let r = write(
        &s,
        &mut c,
        &args!("RL.SLIDING", "sw", 10, 60_000, "REFUND", 3),
    );
    // previous 3 (weight 1 at the window's start), current 0: 7 left; the previous count
    // leaves the estimate at the end of the current window.
    assert_eq!(r, vec![1, 10, 7, 0, 60_000]);
    let m = info_of(&mut c, "sw");
    assert_eq!(
        (
            info_int(&m, "previous_count"),
            info_int(&m, "current_count")
        ),
        (3, 0)
    );
    // FIXED: the current window only; the previous one is already forgotten.
    write(&s, &mut c, &args!("RL.FIXED", "fw", 10, 60_000, "COST", 6));
    let r = write(
        &s,
        &mut c,
        &args!("RL.FIXED", "fw", 10, 60_000, "REFUND", 4),
    );
    assert_eq!(r, vec![1, 10, 8, 0, 60_000]);
    assert_eq!(field(&mut c, "fw", "count"), 2);
    // LOG: the newest units. 2 at t, 3 at t+100: a refund of 4 leaves 1 of the first.
    let t = T0 + 60_000;
    write(&s, &mut c, &args!("RL.LOG", "lw", 10, 60_000, "COST", 2));
    clock_advance(&mut c, 100);
    write(&s, &mut c, &args!("RL.LOG", "lw", 10, 60_000, "COST", 3));
    clock_advance(&mut c, 100);
    let r = write(&s, &mut c, &args!("RL.LOG", "lw", 10, 60_000, "REFUND", 4));
    assert_eq!(r, vec![1, 10, 9, 0, 59_800]);
    let m = info_of(&mut c, "lw");
    assert_eq!(info_int(&m, "entries"), 1);
    assert_eq!(info_int(&m, "oldest_us"), t * 1000);
    assert_eq!(info_int(&m, "newest_us"), t * 1000);
}

// ------------------------------------------------------------------------------ PARTIAL

#[test]
fn partial_grants_what_is_available() {
    let (s, mut c) = start();
    for a in &ALGS {
        let k = format!("partial:{}", a.name());
        let what = a.cmd;
        let r = write(&s, &mut c, &a.call(&k, &["COST", "3", "PARTIAL"]));
        assert_eq!(r, a.want([1, 5, 2, 0, (a.reset)(3)], 0, Some(3)), "{what}");
        // 5 asked, 2 left: 2 granted.
        let r = write(&s, &mut c, &a.call(&k, &["PARTIAL", "COST", "5"]));
        assert_eq!(
            r,
            a.want([1, 5, 0, 0, (a.reset)(5)], 3000, Some(2)),
            "{what}"
        );
        // Nothing left: refused, granted 0, retry until 1 unit is admitted; no write.
        let want = a.want([0, 5, 0, a.retry_one, (a.reset)(5)], 0, Some(0));
        assert_eq!(
            no_write(&s, &mut c, &a.call(&k, &["COST", "2", "PARTIAL"])),
            want
        );
        // A cost above the limit: what is there (a dry run first, then for real).
        let k = format!("partial:big:{}", a.name());
        let want = a.want([1, 5, 0, 0, (a.reset)(5)], 0, Some(5));
        let dry = ["COST", "9", "PARTIAL", "DRYRUN"];
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &dry)), want, "{what}");
        assert!(!exists(&mut c, &k));
        let r = write(&s, &mut c, &a.call(&k, &["COST", "9", "PARTIAL"]));
        assert_eq!(r, want, "{what}");
        // With a reserve: up to what leaves the reserve.
        let k = format!("partial:reserve:{}", a.name());
        let opts = ["COST", "9", "PARTIAL", "RESERVE", "2"];
        let r = write(&s, &mut c, &a.call(&k, &opts));
        assert_eq!(r, a.want([1, 5, 2, 0, (a.reset)(3)], 0, Some(3)), "{what}");
    }
}

// ------------------------------------------------------------------------------ RESERVE

#[test]
fn reserve_keeps_units_back() {
    let (s, mut c) = start();
    // retry_after_ms until 4 units are available again, with 2 spent at T0.
    let retry_four = [1000, 1000, 1000, 60_000, 90_000, 60_000];
    for (a, retry) in ALGS.iter().zip(retry_four) {
        let k = format!("reserve:{}", a.name());
        let what = a.cmd;
        let r = write(&s, &mut c, &a.call(&k, &["COST", "2", "RESERVE", "2"]));
        assert_eq!(r, a.want([1, 5, 3, 0, (a.reset)(2)], 0, None), "{what}");
        // 3 left: spending 2 would leave 1 < 2: refused until 4 are there.
        let want = a.want([0, 5, 3, retry, (a.reset)(2)], 0, None);
        let opts = ["RESERVE", "2", "COST", "2"];
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &opts)), want, "{what}");
        let dry = ["RESERVE", "2", "COST", "2", "DRYRUN"];
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &dry)), want, "{what}");
        let r = write(&s, &mut c, &a.call(&k, &["reserve", "2"]));
        assert_eq!(r, a.want([1, 5, 2, 0, (a.reset)(3)], 2000, None), "{what}");
        // Without a reserve a caller may take it all.
        let r = write(&s, &mut c, &a.call(&k, &["COST", "2"]));
        assert_eq!(r, a.want([1, 5, 0, 0, (a.reset)(5)], 3000, None), "{what}");
        // RESERVE 0 is no reserve.
        let k0 = format!("reserve0:{}", a.name());
        let r = write(&s, &mut c, &a.call(&k0, &["COST", "5", "RESERVE", "0"]));
        assert_eq!(r, a.want([1, 5, 0, 0, (a.reset)(5)], 0, None), "{what}");
        // Never admissible: errors naming the limit argument.
        let name = a.limit_name;
        assert_eq!(
            err(&mut c, &a.call(&k, &["COST", "4", "RESERVE", "2"])),
            format!("ERR COST plus RESERVE must not exceed {name}")
        );
        for opts in [
            &["RESERVE", "5"][..],
            &["COST", "1", "PARTIAL", "RESERVE", "9"],
        ] {
            assert_eq!(
                err(&mut c, &a.call(&k, opts)),
                format!("ERR RESERVE must be less than {name}"),
                "{what} {opts:?}"
            );
        }
        assert_eq!(
            err(&mut c, &a.call(&k, &["RESERVE", "-1"])),
            "ERR reserve must not be negative"
        );
    }
}

// ------------------------------------------------------------------------------ BLOCK

#[test]
fn a_block_refuses_everything_until_it_ends() {
    let (s, mut c) = start();
    for a in &ALGS {
        let k = format!("block:{}", a.name());
        let twin = format!("twin:{}", a.name());
        let what = a.cmd;
        clock_set(&mut c, T0);
        for key in [&k, &twin] {
            write(&s, &mut c, &a.call(key, &["COST", "5"]));
        }
        // A refusal without BLOCK writes nothing.
        let want = a.want([0, 5, 0, a.retry_one, (a.reset)(5)], 0, None);
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &[])), want, "{what}");
        // With BLOCK: blocked for 300 s from now, stored, replicated, in the TTL.
        let r = write(&s, &mut c, &a.call(&k, &["BLOCK", "300000"]));
        assert_eq!(r, a.want([0, 5, 0, 300_000, 300_000], 0, None), "{what}");
        let m = info_of(&mut c, &k);
        assert_eq!(info_int(&m, "blocked_until_ms"), T0 + 300_000, "{what}");
        let names: Vec<&String> = m.keys().collect();
        let order: Vec<String> = match &ok(&mut c, &args!("RL.INFO", k)) {
            Value::Array(items) => items.iter().step_by(2).map(text).collect(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            &order[order.len() - 2..],
            ["blocked_until_ms", "ttl_ms"],
            "{what}: {names:?}"
        );
        // Under the block a refund still answers (nothing left) and still writes.
        // (QUEUE: a request admitted when the block ends would wait the 4 s still queued.)
        let r = write(&s, &mut c, &a.call(&k, &["REFUND", "1"]));
        assert_eq!(r, a.want([1, 5, 0, 0, 300_000], 4000, None), "{what}");
        write(&s, &mut c, &a.call(&twin, &["REFUND", "1"]));
        clock_advance(&mut c, 100_000);
        // Every request is refused, the one a refund made room for too; a peek answers.
        for opts in [&[][..], &["COST", "1", "PARTIAL"], &["RESERVE", "0"]] {
            let granted = (opts.contains(&"PARTIAL")).then_some(0);
            let want = a.want([0, 5, 0, 200_000, 200_000], 0, granted);
            assert_eq!(
                no_write(&s, &mut c, &a.call(&k, opts)),
                want,
                "{what} {opts:?}"
            );
        }
        let want = a.want([1, 5, 0, 0, 200_000], 0, None);
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &["COST", "0"])), want);
        // A shorter block leaves it as it is; a dry run answers as if extended.
        let want = a.want([0, 5, 0, 200_000, 200_000], 0, None);
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &["BLOCK", "1000"])), want);
        let want = a.want([0, 5, 0, 400_000, 400_000], 0, None);
        let dry = ["DRYRUN", "BLOCK", "400000"];
        assert_eq!(no_write(&s, &mut c, &a.call(&k, &dry)), want, "{what}");
        // A longer one extends it (from now).
        let r = write(&s, &mut c, &a.call(&k, &["BLOCK", "260000"]));
        assert_eq!(r, a.want([0, 5, 0, 260_000, 260_000], 0, None), "{what}");
        assert_eq!(field(&mut c, &k, "blocked_until_ms"), T0 + 360_000);
        // Over: no blocked_until_ms; the rule applies to the state as it was (long fresh
        // here), and the first write drops the block: the key holds what the twin holds.
        clock_advance(&mut c, 260_000);
        assert!(!info_of(&mut c, &k).contains_key("blocked_until_ms"));
        let want = a.want([1, 5, 4, 0, (a.reset)(1)], 0, None);
        assert_eq!(write(&s, &mut c, &a.call(&k, &[])), want, "{what}");
        assert_eq!(write(&s, &mut c, &a.call(&twin, &[])), want, "{what}");
        assert_eq!(digest(&mut c, &k), digest(&mut c, &twin), "{what}");
        assert_eq!(
            strip(info_of(&mut c, &k), &["ttl_ms"]),
            strip(info_of(&mut c, &twin), &["ttl_ms"])
        );
    }
}

#[test]
fn after_a_block_the_state_applies_as_it_was() {
    let (s, mut c) = start();
    // 1 per 100 s, burst 5: spent at T0, the TAT is T0+500 s; a block of 300 s ends first.
    let g = |opts: &[&str]| {
        let mut a = args!("RL.GCRA", "g", 5, 1, 100_000);
        a.extend(opts.iter().map(|o| o.to_string()));
        a
    };
    write(&s, &mut c, &g(&["COST", "5"]));
    let r = write(&s, &mut c, &g(&["BLOCK", "300000"]));
    assert_eq!(r, vec![0, 5, 0, 300_000, 500_000]);
    clock_advance(&mut c, 300_000);
    // 300 s of the 500 have passed: 3 units back.
    assert_eq!(
        no_write(&s, &mut c, &g(&["COST", "0"])),
        vec![1, 5, 3, 0, 200_000]
    );
    assert_eq!(
        write(&s, &mut c, &g(&["COST", "2"])),
        vec![1, 5, 1, 0, 400_000]
    );
    // A refusal whose own wait is longer than the block counts its own wait.
    let r = write(&s, &mut c, &g(&["COST", "2", "BLOCK", "1000"]));
    assert_eq!(r, vec![0, 5, 0, 100_000, 400_000]);
    assert_eq!(field(&mut c, "g", "blocked_until_ms"), T0 + 301_000);
}

#[test]
fn cl_throttle_on_a_blocked_key_answers_limited_and_writes_nothing() {
    let (s, mut c) = start();
    // RL.GCRA burst 2, 1 per 60 s is CL.THROTTLE max_burst 1, 1 per 60 s.
    for _ in 0..2 {
        write(&s, &mut c, &args!("RL.GCRA", "cell", 2, 1, 60_000));
    }
    // A block longer than the state's own wait (60 s).
    let r = write(
        &s,
        &mut c,
        &args!("RL.GCRA", "cell", 2, 1, 60_000, "BLOCK", 90_000),
    );
    assert_eq!(r, vec![0, 2, 0, 90_000, 120_000]);
    assert_eq!(field(&mut c, "cell", "blocked_until_ms"), T0 + 90_000);
    clock_advance(&mut c, 500);
    // 89.5 s of the block left: 90 s rounded up; reset_after is the state's own (120 s).
    let want = vec![1, 2, 0, 90, 120];
    assert_eq!(
        no_write(&s, &mut c, &args!("CL.THROTTLE", "cell", 1, 1, 60)),
        want
    );
    // redis-cell's peek (quantity 0) answers as RL.*'s peeks do: not limited, nothing left.
    assert_eq!(
        no_write(&s, &mut c, &args!("CL.THROTTLE", "cell", 1, 1, 60, 0)),
        vec![0, 2, 0, -1, 120]
    );
    // A block shorter than the state's own wait: retry_after is the state's.
    let r = write(
        &s,
        &mut c,
        &args!("RL.GCRA", "short", 2, 1, 60_000, "COST", 2),
    );
    assert_eq!(r, vec![1, 2, 0, 0, 120_000]);
    write(
        &s,
        &mut c,
        &args!("RL.GCRA", "short", 2, 1, 60_000, "BLOCK", 10_000),
    );
    assert_eq!(
        no_write(&s, &mut c, &args!("CL.THROTTLE", "short", 1, 1, 60)),
        vec![1, 2, 0, 60, 120]
    );
    // The block is over: the state as it was (TAT 30 s ahead) admits one more.
    clock_advance(&mut c, 89_500);
    let before = aof(&s).len();
    let r = call(&mut c, &args!("CL.THROTTLE", "cell", 1, 1, 60));
    assert_eq!(r, vec![0, 2, 0, -1, 90]);
    assert_eq!(
        propagated(&s, before),
        vec![("RL._APPLY".into(), "cell".into())]
    );
}

// ------------------------------------------------------------------------------ replication

/// What a replica and a reload must reproduce: RL.INFO (but the reading server's real-clock
/// fields), the absolute expiry, the value's digest.
fn durable(c: &mut Connection, key: &str) -> (BTreeMap<String, String>, i64, String) {
    let m = strip(info_of(c, key), &["ttl_ms", "tokens"]);
    (m, pexpiretime(c, key), digest(c, key))
}

#[test]
fn refunds_and_blocks_reach_a_replica_as_effects_and_survive_a_reload() {
    let (p, mut pc) = Server::at_clock(T0);
    let r = p.start_replica();
    let mut rc = r.con();
    // The replica reads blocked_until_ms on its own clock: the same time as the primary's.
    clock_set(&mut rc, T0);
    let mut keys = Vec::new();
    for a in &ALGS {
        let k = format!("repl:{}", a.name());
        call(&mut pc, &a.call(&k, &["COST", "4"]));
        call(&mut pc, &a.call(&k, &["REFUND", "1"]));
        call(&mut pc, &a.call(&k, &["COST", "5", "PARTIAL"]));
        let got = call(&mut pc, &a.call(&k, &["BLOCK", "600000"]));
        assert_eq!(got[..5], [0, 5, 0, 600_000, 600_000], "{}", a.cmd);
        call(&mut pc, &a.call(&k, &["REFUND", "2"]));
        keys.push(k);
        // A refund to fresh: a DEL on both sides.
        let k = format!("gone:{}", a.name());
        call(&mut pc, &a.call(&k, &["COST", "1"]));
        call(&mut pc, &a.call(&k, &["REFUND", "5"]));
        assert!(!exists(&mut pc, &k));
    }
    sync_replica(&mut pc, &mut rc);
    for k in &keys {
        let want = durable(&mut pc, k);
        assert_eq!(
            want.0["blocked_until_ms"],
            (T0 + 600_000).to_string(),
            "{k}"
        );
        assert_eq!(durable(&mut rc, k), want, "{k}: the replica differs");
    }
    assert_eq!(scan_all(&mut rc), scan_all(&mut pc));
    // Effects only: the replica never ran a rate command itself.
    let stats = text(&ok(&mut rc, &args!("INFO", "commandstats"))).to_lowercase();
    assert!(stats.contains("cmdstat_rl._apply:"), "{stats}");
    for a in &ALGS {
        let name = format!("cmdstat_{}:", a.cmd.to_lowercase());
        assert!(
            !stats.contains(&name),
            "the replica ran {}:\n{stats}",
            a.cmd
        );
    }
    // DEBUG RELOAD (RDB save and load): the block and everything else as before.
    let before: Vec<_> = keys.iter().map(|k| durable(&mut pc, k)).collect();
    assert_eq!(text(&ok(&mut pc, &args!("DEBUG", "RELOAD"))), "OK");
    let after: Vec<_> = keys.iter().map(|k| durable(&mut pc, k)).collect();
    assert_eq!(after, before, "DEBUG RELOAD changed a state");
    for a in &ALGS {
        let k = format!("repl:{}", a.name());
        let got = call(&mut pc, &a.call(&k, &[]));
        assert_eq!(
            got[..5],
            [0, 5, 0, 600_000, 600_000],
            "{} after RELOAD",
            a.cmd
        );
    }
}

// ------------------------------------------------------------------------------ STAGGER

/// The key's Redis Cluster hash slot, from `CLUSTER KEYSLOT`: on the server under test
/// where it answers without cluster mode (Valkey), else on a cluster-enabled node.
fn keyslot(c: &mut Connection, aux: &mut Option<Server>, key: &str) -> i64 {
    let v = raw(c, &args!("CLUSTER", "KEYSLOT", key));
    if error_text(&v).is_none() {
        return int(&v);
    }
    let node = aux.get_or_insert_with(|| Server::builder().cluster().start());
    int(&ok(&mut node.con(), &args!("CLUSTER", "KEYSLOT", key)))
}

#[test]
fn staggered_windows_start_at_the_slot_offset() {
    let (s, mut c) = start();
    let mut aux = None;
    let now = T0 + 12_345;
    clock_set(&mut c, now);
    let keys = [
        "user:1",
        "user:2",
        "{acct}:a",
        "{acct}:b",
        "login:10.0.0.1",
        "x",
    ];
    let mut starts = BTreeMap::new();
    for w in [60_000i64, 1000, 86_400_000] {
        for k in keys {
            let slot = keyslot(&mut c, &mut aux, k);
            assert!((0..16384).contains(&slot), "{k}: slot {slot}");
            let off = slot * w / 16384;
            let start = (now - off).div_euclid(w) * w + off;
            for (cmd, reset) in [
                ("RL.FIXED", start + w - now),
                ("RL.SLIDING", start + 2 * w - now),
            ] {
                let a = args!(cmd, k, 10, w, "STAGGER");
                let mut dry = a.clone();
                dry.push("DRYRUN".into());
                assert_eq!(
                    no_write(&s, &mut c, &dry),
                    vec![1, 10, 9, 0, reset],
                    "{dry:?}"
                );
                assert!(!exists(&mut c, k));
                assert_eq!(write(&s, &mut c, &a), vec![1, 10, 9, 0, reset], "{a:?}");
                assert_eq!(field(&mut c, k, "window_start_ms"), start, "{a:?}");
                if k.starts_with('{') {
                    starts.entry((cmd, w)).or_insert_with(Vec::new).push(start);
                }
                ok(&mut c, &args!("DEL", k));
            }
        }
    }
    // Keys with one hash tag share their slot, so their windows.
    for (what, v) in &starts {
        assert!(v.windows(2).all(|p| p[0] == p[1]), "{what:?}: {v:?}");
    }
    // RL.ALL's FIXED and SLIDING rules take STAGGER too.
    let k1 = "{acct}:all:f";
    let k2 = "{acct}:all:s";
    let slot = keyslot(&mut c, &mut aux, k1);
    let off = slot * 60_000 / 16384;
    let start = (now - off).div_euclid(60_000) * 60_000 + off;
    let v = ok(
        &mut c,
        &args!(
            "RL.ALL", 2, k1, k2, "FIXED", 10, 60_000, "STAGGER", "SLIDING", 10, 60_000, "STAGGER"
        ),
    );
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    assert_eq!(
        ints(&[], &items[2]),
        vec![1, 10, 9, 0, start + 60_000 - now]
    );
    assert_eq!(
        ints(&[], &items[3]),
        vec![1, 10, 9, 0, start + 120_000 - now]
    );
    assert_eq!(field(&mut c, k1, "window_start_ms"), start);
    assert_eq!(field(&mut c, k2, "window_start_ms"), start);
}

// ------------------------------------------------------------------------------ RL.ALL

fn all(c: &mut Connection, a: &[String]) -> (i64, i64, Vec<Vec<i64>>) {
    match ok(c, a) {
        Value::Array(items) => (
            int(&items[0]),
            int(&items[1]),
            items[2..].iter().map(|r| ints(a, r)).collect(),
        ),
        other => panic!("{a:?} answered {other:?}"),
    }
}

#[test]
fn rl_all_peeks_and_reserves_per_rule() {
    let (s, mut c) = start();
    let call_all = |opts_a: &[&str], opts_b: &[&str], dry: bool| {
        let mut a = args!("RL.ALL", 2, "{u}:peek", "{u}:res", "GCRA", 5, 1, 1000);
        a.extend(opts_a.iter().map(|o| o.to_string()));
        a.extend(args!("FIXED", 5, 60_000));
        a.extend(opts_b.iter().map(|o| o.to_string()));
        if dry {
            a.push("DRYRUN".into());
        }
        a
    };
    // A peek rule: allowed, nothing written for it; the reserve rule spends.
    let before = aof(&s).len();
    let (ok_, by, r) = all(
        &mut c,
        &call_all(&["COST", "0"], &["COST", "2", "RESERVE", "2"], false),
    );
    assert_eq!((ok_, by), (1, 0));
    assert_eq!(r, vec![vec![1, 5, 5, 0, 0], vec![1, 5, 3, 0, 60_000]]);
    assert!(!exists(&mut c, "{u}:peek"));
    assert_eq!(
        propagated(&s, before),
        vec![("RL._APPLY".into(), "{u}:res".into())]
    );
    // The reserve refuses: nothing spent anywhere, nothing propagated.
    let snap_peek = snap(&mut c, "{u}:peek");
    let snap_res = snap(&mut c, "{u}:res");
    let before = aof(&s).len();
    for dry in [true, false] {
        let a = call_all(&["COST", "1"], &["RESERVE", "2", "COST", "2"], dry);
        let (ok_, by, r) = all(&mut c, &a);
        assert_eq!((ok_, by), (0, 2), "{a:?}");
        assert_eq!(
            r,
            vec![vec![1, 5, 4, 0, 1000], vec![0, 5, 3, 60_000, 60_000]]
        );
    }
    assert_eq!(snap(&mut c, "{u}:peek"), snap_peek);
    assert_eq!(snap(&mut c, "{u}:res"), snap_res);
    assert_eq!(propagated(&s, before), vec![]);
    // A peek on a state: what is left, still no write for it.
    all(&mut c, &call_all(&["COST", "3"], &[], false));
    let before = aof(&s).len();
    let (ok_, _, r) = all(&mut c, &call_all(&["COST", "0"], &["COST", "0"], false));
    assert_eq!(ok_, 1);
    assert_eq!(r, vec![vec![1, 5, 2, 0, 3000], vec![1, 5, 2, 0, 60_000]]);
    assert_eq!(propagated(&s, before), vec![]);
    // PARTIAL, REFUND and BLOCK are not RL.ALL's; nor STAGGER on a GCRA rule; nor a
    // reserve on a peek; nor DRYRUN inside a rule.
    // (On the last rule: a misplaced word on an earlier one is read as the next rule.)
    for ob in [
        &["COST", "2", "PARTIAL"][..],
        &["REFUND", "1"],
        &["BLOCK", "1000"],
        &["COST", "0", "RESERVE", "1"],
        &["COST", "1", "COST", "1"],
        &["RESERVE", "1", "RESERVE", "1"],
        &["STAGGER", "STAGGER"],
        &["COST", "1", "DRYRUN", "DRYRUN"],
    ] {
        let a = call_all(&[], ob, false);
        assert_eq!(err(&mut c, &a), ERR_SYNTAX, "{a:?}");
    }
    for a in [
        args!("RL.ALL", 1, "{u}:peek", "GCRA", 5, 1, 1000, "STAGGER"),
        args!("RL.ALL", 1, "{u}:peek", "LOG", 5, 1000, "STAGGER"),
        args!("RL.ALL", 1, "{u}:peek", "QUEUE", 5, 1000, "PARTIAL"),
        // Misplaced on a rule that is not the last.
        args!("RL.ALL", 2, "{u}:a", "{u}:b", "GCRA", 5, 1, 1000, "PARTIAL", "FIXED", 5, 1000),
        args!("RL.ALL", 2, "{u}:a", "{u}:b", "FIXED", 5, 1000, "BLOCK", 10, "FIXED", 5, 1000),
    ] {
        assert_eq!(err(&mut c, &a), ERR_SYNTAX, "{a:?}");
    }
    let a = call_all(&["RESERVE", "5"], &[], false);
    assert_eq!(err(&mut c, &a), "ERR RESERVE must be less than burst");
    let a = call_all(&[], &["COST", "4", "RESERVE", "2"], false);
    assert_eq!(
        err(&mut c, &a),
        "ERR COST plus RESERVE must not exceed limit"
    );
}

// ------------------------------------------------------------------------------ counters

fn counters(c: &mut Connection) -> BTreeMap<String, i64> {
    let t = text(&ok(c, &args!("INFO", "ratelimit")));
    t.lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect()
}

#[test]
fn info_counts_each_option() {
    let (_s, mut c) = Server::at_clock(T0);
    let base = counters(&mut c);
    let g = |opts: &[&str]| {
        let mut a = args!("RL.GCRA", "cnt", 5, 1, 60_000);
        a.extend(opts.iter().map(|o| o.to_string()));
        a
    };
    let steps: [(&[&str], i64); 12] = [
        (&["COST", "0"], 1),                 // peek
        (&["REFUND", "1"], 1),               // refund (on a missing key)
        (&["COST", "3"], 1),                 // admitted
        (&["COST", "2", "RESERVE", "1"], 0), // reserve refusal
        (&["COST", "5", "PARTIAL"], 1),      // short grant of 2
        (&["COST", "1", "PARTIAL"], 0),      // refused: nothing left (not a reserve)
        (&["BLOCK", "5000"], 0),             // block set
        (&[], 0),                            // blocked refusal
        (&["BLOCK", "9000"], 0),             // blocked refusal that extends it
        (&["BLOCK", "1000"], 0),             // blocked refusal, no extension
        (&["COST", "0", "DRYRUN"], 1),       // peek
        (&["REFUND", "2"], 1),               // refund under the block
    ];
    for (opts, allowed) in steps {
        assert_eq!(call(&mut c, &g(opts))[0], allowed, "{opts:?}");
    }
    assert_eq!(err(&mut c, &g(&["COST", "0", "PARTIAL"])), ERR_SYNTAX);
    // RL.ALL: its peek rule counts as a peek, its reserve refusal as one.
    call(&mut c, &args!("RL.FIXED", "{a}2", 5, 60_000, "COST", 2));
    let a = args!(
        "RL.ALL", 2, "{a}1", "{a}2", "GCRA", 5, 1, 1000, "COST", 0, "FIXED", 5, 60_000, "COST", 3,
        "RESERVE", 1
    );
    let (allowed, by, _) = all(&mut c, &a);
    assert_eq!((allowed, by), (0, 2));
    let after = counters(&mut c);
    let d = |f: &str| after.get(f).copied().unwrap_or(-1) - base.get(f).copied().unwrap_or(0);
    assert_eq!(d("ratelimit_peeks"), 3);
    assert_eq!(d("ratelimit_refunds"), 2);
    assert_eq!(d("ratelimit_partial_short_grants"), 1);
    assert_eq!(d("ratelimit_reserve_refusals"), 2);
    assert_eq!(d("ratelimit_blocks_set"), 2);
    assert_eq!(d("ratelimit_blocked_refusals"), 3);
    // Peeks and refunds are neither admitted nor refused.
    assert_eq!(d("ratelimit_gcra_calls"), 13);
    assert_eq!(d("ratelimit_gcra_admitted"), 2);
    assert_eq!(d("ratelimit_gcra_refused"), 6);
    assert_eq!(d("ratelimit_gcra_errors"), 1);
    assert_eq!(d("ratelimit_all_refused"), 1);
}

// ------------------------------------------------------------------------------ errors

#[test]
fn impossible_combinations_are_syntax_errors() {
    let (s, mut c) = start();
    let before = aof(&s).len();
    let cases: Vec<Vec<&str>> = vec![
        vec!["REFUND", "1", "COST", "1"],
        vec!["COST", "1", "REFUND", "1"],
        vec!["REFUND", "1", "PARTIAL"],
        vec!["REFUND", "1", "RESERVE", "1"],
        vec!["REFUND", "1", "BLOCK", "10"],
        vec!["COST", "0", "PARTIAL"],
        vec!["COST", "0", "RESERVE", "0"],
        vec!["COST", "0", "BLOCK", "10"],
        vec!["COST", "1", "COST", "1"],
        vec!["REFUND", "1", "REFUND", "1"],
        vec!["COST", "2", "PARTIAL", "PARTIAL"],
        vec!["RESERVE", "1", "RESERVE", "1"],
        vec!["BLOCK", "1", "BLOCK", "1"],
        vec!["DRYRUN", "DRYRUN"],
        vec!["REFUND"],
        vec!["RESERVE"],
        vec!["BLOCK"],
        vec!["COST"],
        vec!["PARTIALLY"],
        vec!["BLOCK", "10", "BLOCKED"],
    ];
    for a in &ALGS {
        let stagger = matches!(a.cmd, "RL.FIXED" | "RL.SLIDING");
        let mut mine = cases.clone();
        if stagger {
            mine.push(vec!["STAGGER", "STAGGER"]);
            // STAGGER combines with the rest.
            let r = call(&mut c, &a.call("ok", &["STAGGER", "COST", "0", "DRYRUN"]));
            assert_eq!(r[0], 1);
        } else {
            mine.push(vec!["STAGGER"]);
        }
        for opts in &mine {
            let args = a.call(&format!("syn:{}", a.name()), opts);
            assert_eq!(err(&mut c, &args), ERR_SYNTAX, "{args:?}");
        }
        let k = "num";
        let e = |c: &mut Connection, opts: &[&str]| err(c, &a.call(k, opts));
        assert_eq!(e(&mut c, &["COST", "-1"]), "ERR cost must not be negative");
        assert_eq!(
            e(&mut c, &["REFUND", "0"]),
            "ERR refund must be a positive integer"
        );
        assert_eq!(
            e(&mut c, &["REFUND", "-3"]),
            "ERR refund must be a positive integer"
        );
        assert_eq!(e(&mut c, &["REFUND", "x"]), ERR_NOT_INT);
        assert_eq!(
            e(&mut c, &["BLOCK", "0"]),
            "ERR block_ms must be a positive integer"
        );
        assert_eq!(
            e(&mut c, &["BLOCK", "1000000000001"]),
            "ERR block_ms must be at most 1000000000000"
        );
        assert_eq!(
            e(&mut c, &["COST", "6"]),
            format!("ERR COST must not exceed {}", a.limit_name)
        );
        // The largest block is accepted (a dry run: no 31-year key left behind).
        let r = call(
            &mut c,
            &a.call(k, &["COST", "1", "BLOCK", "1000000000000", "DRYRUN"]),
        );
        assert_eq!(r[0], 1);
    }
    // RL.ACQUIRE takes DRYRUN only.
    for opts in [
        &["COST", "0"][..],
        &["COST", "1"],
        &["REFUND", "1"],
        &["PARTIAL"],
        &["RESERVE", "0"],
        &["BLOCK", "1000"],
        &["STAGGER"],
        &["DRYRUN", "DRYRUN"],
    ] {
        let mut args = args!("RL.ACQUIRE", "acq", 5, 1000);
        args.extend(opts.iter().map(|o| o.to_string()));
        assert_eq!(err(&mut c, &args), ERR_SYNTAX, "{args:?}");
    }
    let v = ok(&mut c, &args!("RL.ACQUIRE", "acq", 5, 1000, "DRYRUN"));
    assert!(
        matches!(&v, Value::Array(f) if f.first() == Some(&Value::Int(1))),
        "{v:?}"
    );
    // Nothing of it wrote.
    assert_eq!(scan_all(&mut c), Vec::<String>::new());
    assert_eq!(propagated(&s, before), vec![]);
}
