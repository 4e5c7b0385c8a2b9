//! A bounded command fuzzer against a live redis-server with the module: random and
//! malformed calls of every command (every arity, random bytes, huge and negative numbers,
//! floats, `nan`, `inf`, `0x10`, unicode, 1 MB arguments, options in every order and
//! repeated, keys of every Redis type and of every algorithm, inside MULTI/EXEC too, on
//! RESP2 and RESP3 connections), with the test clock jumping about. It checks that:
//! - the server never dies or hangs (every call answers; PING at every check);
//! - every reply is an error or the documented reply shape of its command, with sane values;
//! - no error is the module's "internal error" (a panic caught by the command wrapper);
//! - errors, DRYRUN, RL.INFO, RL.CLOCK and RELEASE/RENEW answering 0 change nothing;
//! - keys of other types never change (DUMP before and after), except the one documented
//!   case: CL.THROTTLE adopting a redis-cell state (a string of decimal digits);
//! - no key the module writes is ever without a TTL (after every call on its key, and SCAN +
//!   PTTL over the whole keyspace periodically and at the end);
//! - nothing was printed to the server's stderr (a Rust panic message lands there).
//!
//! Env: `RL_FUZZ_SECONDS` (default 20), `RL_FUZZ_SEED` (default: a fixed seed; `random` for
//! a new one, printed). A failure prints the seed, the call number and the call.

use rl_testkit as common;
use rl_testkit::args;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use redis::{Connection, ConnectionLike, Value};
use std::collections::BTreeMap;
use std::fs;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const INTERNAL: &str = "ERR internal error in the ratelimit module";

/// Every command of the module: name, its algorithm for RL.INFO (if it writes a state).
const COMMANDS: [(&str, Option<&str>); 14] = [
    ("RL.GCRA", Some("gcra")),
    ("RL.TOKENBUCKET", Some("tokenbucket")),
    ("RL.SLIDING", Some("sliding")),
    ("RL.FIXED", Some("fixed")),
    ("RL.LOG", Some("log")),
    ("RL.QUEUE", Some("queue")),
    ("RL.ACQUIRE", Some("concurrency")),
    ("RL.RELEASE", Some("concurrency")),
    ("RL.RENEW", Some("concurrency")),
    ("CL.THROTTLE", Some("gcra")),
    ("RL.INFO", None),
    ("RL.CLOCK", None),
    ("RL._APPLY", None),
    ("RL.ALL", None),
];

/// Keys of every other Redis type, created once (without a TTL) and compared by DUMP.
const FOREIGN: [(&str, &str); 9] = [
    ("fz:foreign:string", "string"),
    ("fz:foreign:digits", "string"),
    ("fz:foreign:bigdigits", "string"),
    ("fz:foreign:list", "list"),
    ("fz:foreign:hash", "hash"),
    ("fz:foreign:set", "set"),
    ("fz:foreign:zset", "zset"),
    ("fz:foreign:stream", "stream"),
    ("fz:foreign:hll", "string"),
];

fn seconds() -> u64 {
    std::env::var("RL_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

fn seed() -> u64 {
    match std::env::var("RL_FUZZ_SEED").ok().as_deref() {
        Some("random") => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
        Some(s) => s.parse().expect("RL_FUZZ_SEED: an integer or `random`"),
        None => 0x5eed_0006,
    }
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn b(s: impl AsRef<[u8]>) -> Vec<u8> {
    s.as_ref().to_vec()
}

/// A call as text for messages (long arguments abbreviated).
fn show(args: &[Vec<u8>]) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| {
            if a.len() > 64 {
                format!(
                    "<{} bytes: {:?}...>",
                    a.len(),
                    String::from_utf8_lossy(&a[..16])
                )
            } else {
                format!("{:?}", String::from_utf8_lossy(a))
            }
        })
        .collect();
    parts.join(" ")
}

struct Fuzz {
    rng: StdRng,
    /// This call is well-formed (valid numbers and options, a key of its algorithm), so
    /// that states get written and read, not only refused.
    valid: bool,
    /// The key pool of the command being generated (its algorithm).
    pool: &'static str,
    n: u64,
    errors: BTreeMap<String, u64>,
    ok_replies: BTreeMap<String, u64>,
    clock_ms: i64,
}

impl Fuzz {
    /// A number-ish argument: valid, edge, or malformed.
    fn number(&mut self) -> Vec<u8> {
        let r = &mut self.rng;
        if self.valid {
            let v: i64 = match r.gen_range(0..100) {
                0..=64 => r.gen_range(1..=12),
                65..=84 => r.gen_range(1..=5_000),
                85..=94 => [1000, 60_000, 3_600_000, 86_400_000][r.gen_range(0..4)],
                _ => [1_000_000_000_000, 10_000, 9_223_372_036_854_775_807][r.gen_range(0..3)],
            };
            return b(v.to_string());
        }
        match r.gen_range(0..100) {
            0..=44 => b(r.gen_range(1..=12).to_string()),
            45..=54 => b(r.gen_range(1..=100_000).to_string()),
            55..=59 => b([1000, 60_000, 3_600_000, 86_400_000][r.gen_range(0..4)].to_string()),
            60..=84 => {
                let edges: &[&str] = &[
                    "0",
                    "-1",
                    "-0",
                    "+1",
                    "01",
                    "1000000000000",
                    "1000000000001",
                    "10000000000000",
                    "4294967296",
                    "9223372036854775807",
                    "9223372036854775808",
                    "-9223372036854775808",
                    "-9223372036854775809",
                    "18446744073709551615",
                    "18446744073709551616",
                    "99999999999999999999999999",
                    "1.5",
                    "1e3",
                    "1E3",
                    "0.0",
                    "nan",
                    "NaN",
                    "inf",
                    "-inf",
                    "+inf",
                    "infinity",
                    "0x10",
                    "0b11",
                    "0o7",
                    "1_000",
                    " 1",
                    "1 ",
                    "1\n",
                    "",
                    "\u{0663}",
                    "\u{ff11}",
                    "1\u{0301}",
                    "\u{1f4a5}",
                    "١٢",
                    "COST",
                    "DRYRUN",
                    "REFUND",
                    "PARTIAL",
                    "RESERVE",
                    "BLOCK",
                    "STAGGER",
                ];
                b(edges[r.gen_range(0..edges.len())])
            }
            _ => self.garbage(),
        }
    }

    /// Random bytes of a random length (rarely 1 MB).
    fn garbage(&mut self) -> Vec<u8> {
        let r = &mut self.rng;
        let len = match r.gen_range(0..1000) {
            0..=2 => 1 << 20,
            3..=30 => r.gen_range(100..5000),
            _ => r.gen_range(0..24),
        };
        let mut v = vec![0u8; len];
        if len == 1 << 20 && r.gen_bool(0.5) {
            v.fill(b'7'); // a 1 MB "number"
        } else {
            r.fill_bytes(&mut v);
        }
        v
    }

    /// A lease token argument: from a real acquisition, well-formed, or not.
    fn token(&mut self, real: &[Vec<u8>]) -> Vec<u8> {
        let r = &mut self.rng;
        match r.gen_range(0..10) {
            0..=3 if !real.is_empty() => real[r.gen_range(0..real.len())].clone(),
            4..=5 => b(format!("{}-{}", self.clock_ms, r.gen_range(0..4))),
            6 => b([
                "0-0",
                "18446744073709551615-18446744073709551615",
                "18446744073709551616-0",
                "1-",
                "-1",
                "1--1",
                "1-2-3",
                "+1-1",
                " 1-1",
                "1700000040000-0\u{0}",
            ][r.gen_range(0..10)]),
            _ => {
                let x = self.number();
                let y = self.number();
                let mut t = x;
                t.push(b'-');
                t.extend(y);
                t
            }
        }
    }

    /// A word in a random case.
    fn case(&mut self, w: &str) -> Vec<u8> {
        let r = &mut self.rng;
        match r.gen_range(0..3) {
            0 => b(w),
            1 => b(w.to_lowercase()),
            _ => w
                .chars()
                .map(|c| {
                    if r.gen_bool(0.5) {
                        c.to_ascii_lowercase()
                    } else {
                        c
                    }
                })
                .collect::<String>()
                .into_bytes(),
        }
    }

    /// The options of a rate command: any order, repeated, any case, or garbage. `limit`:
    /// the command's limit argument, when it is a number (valid options keep within it);
    /// `stagger`: the command takes STAGGER (FIXED, SLIDING).
    fn options(&mut self, acquire: bool, limit: Option<i64>, stagger: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if self.valid && acquire {
            if self.rng.gen_range(0..5) == 0 {
                out.push(b("DRYRUN"));
            }
            return out;
        }
        if self.valid {
            // A combination the contract allows, in a random order: one request (a spend
            // with PARTIAL / RESERVE / BLOCK, a peek or a refund), maybe STAGGER and DRYRUN.
            let limit = limit.unwrap_or(3).clamp(1, 1_000_000);
            let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
            match self.rng.gen_range(0..10) {
                0 => groups.push(vec![self.case("COST"), b("0")]),
                1 => {
                    let n = match self.rng.gen_range(0..4) {
                        0 => self.rng.gen_range(1..=1000),
                        _ => self.rng.gen_range(1..=4),
                    };
                    groups.push(vec![self.case("REFUND"), b(n.to_string())]);
                }
                2 | 3 => {}
                _ => {
                    let partial = self.rng.gen_range(0..3) == 0;
                    let reserve = if self.rng.gen_range(0..3) == 0 {
                        Some(self.rng.gen_range(0..limit))
                    } else {
                        None
                    };
                    let room = limit - reserve.unwrap_or(0);
                    let cost = if partial {
                        self.rng
                            .gen_range(1..=limit.saturating_mul(2).min(1_000_000))
                    } else {
                        self.rng.gen_range(1..=room.min(4))
                    };
                    groups.push(vec![self.case("COST"), b(cost.to_string())]);
                    if partial {
                        groups.push(vec![self.case("PARTIAL")]);
                    }
                    if let Some(r) = reserve {
                        groups.push(vec![self.case("RESERVE"), b(r.to_string())]);
                    }
                    if self.rng.gen_range(0..4) == 0 {
                        // (rarely the longest: it blocks a key of the pool for good)
                        let ms: i64 = match self.rng.gen_range(0..40) {
                            0 => 1_000_000_000_000,
                            1..=4 => 3_600_000,
                            _ => self.rng.gen_range(1..=5_000),
                        };
                        groups.push(vec![self.case("BLOCK"), b(ms.to_string())]);
                    }
                }
            }
            if stagger && self.rng.gen_range(0..3) == 0 {
                groups.push(vec![self.case("STAGGER")]);
            }
            if self.rng.gen_range(0..5) == 0 {
                groups.push(vec![self.case("DRYRUN")]);
            }
            // Shuffle the groups.
            for i in (1..groups.len()).rev() {
                let j = self.rng.gen_range(0..=i);
                groups.swap(i, j);
            }
            return groups.into_iter().flatten().collect();
        }
        let n = match self.rng.gen_range(0..10) {
            0..=3 => 0,
            4..=7 => 1,
            8 => 2,
            _ => self.rng.gen_range(3..7),
        };
        for _ in 0..n {
            match self.rng.gen_range(0..14) {
                0..=3 if !acquire => {
                    let w = self.case("COST");
                    out.push(w);
                    if self.rng.gen_range(0..10) > 0 {
                        let v = self.number();
                        out.push(v);
                    }
                }
                0..=7 => {
                    let w = self.case("DRYRUN");
                    out.push(w);
                }
                8 => out.push(b([
                    "COSTS", "DRY", "DRYRUN1", "NX", "PX", "REFUNDS", "BLOCKED",
                ][self.rng.gen_range(0..7)])),
                9 | 10 => {
                    // The new options, with or without a value, anywhere.
                    let w = ["REFUND", "RESERVE", "BLOCK"][self.rng.gen_range(0..3)];
                    let w = self.case(w);
                    out.push(w);
                    if self.rng.gen_range(0..10) > 0 {
                        let v = self.number();
                        out.push(v);
                    }
                }
                11 | 12 => {
                    let w = ["PARTIAL", "STAGGER"][self.rng.gen_range(0..2)];
                    let w = self.case(w);
                    out.push(w);
                }
                _ => {
                    let g = self.garbage();
                    out.push(g);
                }
            }
        }
        out
    }

    fn key(&mut self, keys: &[Vec<u8>]) -> Vec<u8> {
        if self.valid && self.rng.gen_range(0..10) > 0 {
            let pool = self.pool;
            return b(format!("fz:{pool}:{}", self.rng.gen_range(0..6)));
        }
        match self.rng.gen_range(0..100) {
            0 => b(""),
            1 => b("fz:\u{2603}:é"),
            2 => vec![b'f', b'z', 0, 0xff, 0xfe],
            3 if self.rng.gen_range(0..20) == 0 => {
                let mut k = b("fz:huge:");
                k.resize(1 << 20, b'k');
                k
            }
            _ => keys[self.rng.gen_range(0..keys.len())].clone(),
        }
    }

    /// One call of `cmd` with arguments: mostly the documented shape with some arguments
    /// replaced, sometimes any arity of anything.
    fn call(&mut self, cmd: &str, keys: &[Vec<u8>], tokens: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let name = match self.rng.gen_range(0..10) {
            0 => b(cmd.to_lowercase()),
            1 => cmd
                .chars()
                .map(|c| {
                    if self.rng.gen_bool(0.5) {
                        c.to_ascii_lowercase()
                    } else {
                        c
                    }
                })
                .collect::<String>()
                .into_bytes(),
            _ => b(cmd),
        };
        let mut args = vec![name];
        self.valid = self.rng.gen_bool(0.5);
        self.pool = match cmd {
            "RL.INFO" => [
                "gcra",
                "tokenbucket",
                "sliding",
                "fixed",
                "log",
                "queue",
                "concurrency",
            ][self.rng.gen_range(0..7)],
            "RL.GCRA" | "CL.THROTTLE" | "RL._APPLY" | "RL.ALL" => "gcra",
            "RL.TOKENBUCKET" => "tokenbucket",
            "RL.SLIDING" => "sliding",
            "RL.FIXED" => "fixed",
            "RL.LOG" => "log",
            "RL.QUEUE" => "queue",
            _ => "concurrency",
        };
        if !self.valid && self.rng.gen_range(0..8) == 0 {
            // Any arity, any arguments.
            let n = self.rng.gen_range(0..9);
            if n > 0 {
                args.push(self.key(keys));
            }
            for _ in 1..n {
                let a = if self.rng.gen_bool(0.5) {
                    self.number()
                } else {
                    self.garbage()
                };
                args.push(a);
            }
            return args;
        }
        let key = self.key(keys);
        match cmd {
            "RL.GCRA" | "RL.TOKENBUCKET" => {
                args.push(key);
                for _ in 0..3 {
                    let n = self.number();
                    args.push(n);
                }
                let limit = int_arg(&args[2]);
                let o = self.options(false, limit, false);
                args.extend(o);
            }
            "RL.SLIDING" | "RL.FIXED" | "RL.LOG" | "RL.QUEUE" => {
                args.push(key);
                for _ in 0..2 {
                    let n = self.number();
                    args.push(n);
                }
                let limit = int_arg(&args[2]);
                let stagger = matches!(cmd, "RL.SLIDING" | "RL.FIXED");
                let o = self.options(false, limit, stagger);
                args.extend(o);
            }
            "RL.ACQUIRE" => {
                args.push(key);
                for _ in 0..2 {
                    let n = self.number();
                    args.push(n);
                }
                let o = self.options(true, None, false);
                args.extend(o);
            }
            "RL.RELEASE" => {
                args.push(key);
                let t = self.token(tokens);
                args.push(t);
            }
            "RL.RENEW" => {
                args.push(key);
                let t = self.token(tokens);
                args.push(t);
                let n = self.number();
                args.push(n);
            }
            "CL.THROTTLE" => {
                args.push(key);
                let n = if self.rng.gen_bool(0.5) { 3 } else { 4 };
                for _ in 0..n {
                    let x = self.number();
                    args.push(x);
                }
            }
            "RL.INFO" => args.push(key),
            "RL.CLOCK" => {
                let sub = [
                    "GET", "SET", "ADVANCE", "REAL", "get", "set", "advance", "NOW", "",
                ][self.rng.gen_range(0..9)];
                args.push(b(sub));
                if sub.eq_ignore_ascii_case("SET") || sub.eq_ignore_ascii_case("ADVANCE") {
                    let v = if self.rng.gen_bool(0.3) {
                        self.number()
                    } else {
                        self.clock_arg(sub)
                    };
                    args.push(v);
                }
            }
            "RL._APPLY" => {
                args.push(key);
                let g = self.garbage();
                args.push(g);
            }
            "RL.ALL" => {
                let n = self.rng.gen_range(1..=4usize);
                let numkeys = if self.valid || self.rng.gen_bool(0.5) {
                    b(n.to_string())
                } else {
                    self.number()
                };
                args.push(numkeys);
                let algos = ["GCRA", "TOKENBUCKET", "SLIDING", "FIXED", "LOG", "QUEUE"];
                let pools = ["gcra", "tokenbucket", "sliding", "fixed", "log", "queue"];
                let picks: Vec<usize> = (0..n).map(|_| self.rng.gen_range(0..6)).collect();
                for (j, &a) in picks.iter().enumerate() {
                    let k = if self.valid && self.rng.gen_range(0..10) > 0 {
                        // Distinct keys of the rule's algorithm (j keeps them apart).
                        b(format!(
                            "fz:{}:{}",
                            pools[a],
                            (j + self.rng.gen_range(0..2) * 4) % 6
                        ))
                    } else {
                        self.key(keys)
                    };
                    args.push(k);
                }
                for &a in &picks {
                    let w =
                        if self.valid || self.rng.gen_range(0..8) > 0 {
                            b(algos[a])
                        } else {
                            b(["ALL", "CONCURRENCY", "ACQUIRE", "gcra2", ""]
                                [self.rng.gen_range(0..5)])
                        };
                    args.push(w);
                    let m = match a {
                        0 | 1 => 3,
                        _ => 2,
                    };
                    let m = if self.valid || self.rng.gen_range(0..6) > 0 {
                        m
                    } else {
                        self.rng.gen_range(0..5)
                    };
                    let first = args.len();
                    for _ in 0..m {
                        let x = self.number();
                        args.push(x);
                    }
                    let limit = args.get(first).and_then(|x| int_arg(x)).unwrap_or(1);
                    if self.rng.gen_range(0..4) == 0 {
                        args.push(b("COST"));
                        let x = match (self.valid, self.rng.gen_range(0..3)) {
                            (true, 0) => b("0"),
                            (true, _) => b("1"),
                            (false, _) => self.number(),
                        };
                        args.push(x);
                    }
                    if self.rng.gen_range(0..5) == 0
                        && !(self.valid && args.last() == Some(&b("0")))
                    {
                        args.push(self.case("RESERVE"));
                        let x = if self.valid && limit > 1 {
                            b(self.rng.gen_range(0..limit.min(1_000_000) - 1).to_string())
                        } else {
                            self.number()
                        };
                        args.push(x);
                    }
                    if (a == 2 || a == 3 || !self.valid) && self.rng.gen_range(0..4) == 0 {
                        args.push(self.case("STAGGER"));
                    }
                    if !self.valid && self.rng.gen_range(0..10) == 0 {
                        let w = ["PARTIAL", "REFUND", "BLOCK"][self.rng.gen_range(0..3)];
                        args.push(self.case(w));
                        if w != "PARTIAL" {
                            let x = self.number();
                            args.push(x);
                        }
                    }
                }
                if self.rng.gen_range(0..5) == 0 {
                    args.push(b("DRYRUN"));
                }
                if !self.valid && self.rng.gen_range(0..6) == 0 {
                    let g = self.garbage();
                    args.push(g);
                }
            }
            _ => unreachable!(),
        }
        args
    }

    /// A plausible RL.CLOCK SET / ADVANCE value: small steps, big jumps, both directions.
    fn clock_arg(&mut self, sub: &str) -> Vec<u8> {
        let r = &mut self.rng;
        if sub.eq_ignore_ascii_case("SET") {
            let v = match r.gen_range(0..10) {
                0 => 0,
                1 => 10_000_000_000_000,
                _ => T0 + r.gen_range(-86_400_000i64..86_400_000),
            };
            b(v.to_string())
        } else {
            let v = match r.gen_range(0..10) {
                0..=5 => r.gen_range(-2_000i64..5_000),
                6..=8 => r.gen_range(-3_600_000i64..3_600_000),
                _ => r.gen_range(-400_000_000_000i64..400_000_000_000),
            };
            b(v.to_string())
        }
    }
}

/// Sends one command; the raw reply. A transport failure is a dead or hung server.
fn send(con: &mut Connection, args: &[Vec<u8>], ctx: &dyn Fn() -> String) -> Value {
    let mut c = redis::cmd(std::str::from_utf8(&args[0]).unwrap_or("RL.INFO"));
    if std::str::from_utf8(&args[0]).is_err() {
        panic!("command names are ASCII here");
    }
    for a in &args[1..] {
        c.arg(a.as_slice());
    }
    match con.req_command(&c) {
        Ok(v) => v,
        Err(e) => panic!(
            "connection failure: {e} (server crashed or hung?)\n{}",
            ctx()
        ),
    }
}

fn is_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn int_arg(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// Checks a successful reply against the command's documented shape; Err(why) if not.
fn check_shape(cmd: &str, args: &[Vec<u8>], v: &Value) -> Result<(), String> {
    let ints = |items: &[Value], n: usize| -> Result<Vec<i64>, String> {
        items[..n]
            .iter()
            .enumerate()
            .map(|(i, x)| is_int(x).ok_or(format!("field {} is not an integer: {x:?}", i + 1)))
            .collect()
    };
    let standard = |f: &[i64], limit_arg: Option<i64>| -> Result<(), String> {
        let [allowed, limit, remaining, retry, reset] = [f[0], f[1], f[2], f[3], f[4]];
        if !(0..=1).contains(&allowed) {
            return Err(format!("allowed = {allowed}"));
        }
        if limit < 1 || remaining < 0 || remaining > limit || retry < 0 || reset < 0 {
            return Err(format!("fields out of range: {f:?}"));
        }
        if allowed == 1 && retry != 0 {
            return Err(format!("admitted with retry_after_ms {retry}"));
        }
        if allowed == 0 && retry == 0 {
            return Err("refused with retry_after_ms 0".into());
        }
        // Two of the largest windows (a sliding window is fresh at the end of the next one:
        // 2 * 10^12 ms) plus the time the clock may still need to catch up with a key
        // written under a clock that ran ahead ("time never runs backwards": the replies
        // count it), at most the whole clock range (10^13 ms).
        if reset > 12_000_000_000_000 || retry > 12_000_000_000_000 {
            return Err(format!(
                "a time beyond the largest duration plus the clock range: {f:?}"
            ));
        }
        if let Some(l) = limit_arg {
            if l != limit {
                return Err(format!("limit field {limit}, argument {l}"));
            }
        }
        Ok(())
    };
    let arr = match v {
        Value::Array(items) => Some(items.as_slice()),
        _ => None,
    };
    let limit_arg = args.get(2).and_then(|a| int_arg(a));
    // The options after the key (a success means they parsed as options).
    let opt = |w: &[u8]| args.iter().skip(2).position(|x| x.eq_ignore_ascii_case(w));
    let partial = opt(b"PARTIAL").is_some();
    let value_of = |w: &[u8]| {
        opt(w)
            .and_then(|i| args.get(i + 3))
            .and_then(|x| int_arg(x))
    };
    let peek = value_of(b"COST") == Some(0);
    let refund = opt(b"REFUND").is_some();
    // A peek or a refund: allowed, nothing to wait for. PARTIAL: `granted` last, at most
    // the cost, at least 1 exactly when admitted.
    let options = |f: &[i64]| -> Result<(), String> {
        if (peek || refund) && (f[0] != 1 || f[3] != 0) {
            return Err(format!("a peek or refund answered {f:?}"));
        }
        if partial {
            let g = f[f.len() - 1];
            let cost = value_of(b"COST").unwrap_or(1);
            if g < 0 || g > cost || (g >= 1) != (f[0] == 1) {
                return Err(format!("granted {g} of {cost} with allowed {}", f[0]));
            }
        }
        Ok(())
    };
    match cmd {
        "RL.GCRA" | "RL.TOKENBUCKET" | "RL.SLIDING" | "RL.FIXED" | "RL.LOG" => {
            let n = 5 + usize::from(partial);
            let a = arr
                .filter(|a| a.len() == n)
                .ok_or(format!("not an array of {n}"))?;
            let f = ints(a, n)?;
            standard(&f, limit_arg)?;
            options(&f)
        }
        "RL.QUEUE" => {
            let n = 6 + usize::from(partial);
            let a = arr
                .filter(|a| a.len() == n)
                .ok_or(format!("not an array of {n}"))?;
            let f = ints(a, n)?;
            standard(&f, limit_arg)?;
            options(&f)?;
            match (f[0], f[5]) {
                (0, 0) => Ok(()),
                (1, d) if d >= 0 && d <= f[4] => Ok(()),
                _ => Err(format!(
                    "delay_ms {} with allowed {} reset {}",
                    f[5], f[0], f[4]
                )),
            }
        }
        "RL.ACQUIRE" => {
            let a = arr.filter(|a| a.len() == 6).ok_or("not an array of 6")?;
            let f = ints(a, 5)?;
            standard(&f, limit_arg)?;
            match (&a[5], f[0]) {
                (Value::Nil, 0) => Ok(()),
                (Value::BulkString(t), 1) => {
                    let t = String::from_utf8_lossy(t);
                    let ok = t
                        .split_once('-')
                        .is_some_and(|(m, s)| m.parse::<u64>().is_ok() && s.parse::<u64>().is_ok());
                    if ok {
                        Ok(())
                    } else {
                        Err(format!("token {t:?}"))
                    }
                }
                (t, a) => Err(format!("token {t:?} with allowed {a}")),
            }
        }
        "RL.RELEASE" | "RL.RENEW" => match v {
            Value::Int(0 | 1) => Ok(()),
            _ => Err("not integer 0 or 1".into()),
        },
        "CL.THROTTLE" => {
            let a = arr.filter(|a| a.len() == 5).ok_or("not an array of 5")?;
            let f = ints(a, 5)?;
            if !(0..=1).contains(&f[0]) || f[1] < 1 || f[2] < 0 || f[3] < -1 || f[4] < 0 {
                return Err(format!("fields out of range: {f:?}"));
            }
            if f[0] == 0 && f[3] != -1 {
                return Err(format!("allowed with retry_after {}", f[3]));
            }
            if let Some(l) = limit_arg {
                if l + 1 != f[1] {
                    return Err(format!("limit {} for max_burst {l}", f[1]));
                }
            }
            Ok(())
        }
        "RL.INFO" => {
            let pairs: Vec<(Value, Value)> = match v {
                Value::Nil => return Ok(()),
                Value::Array(items) if items.len() % 2 == 0 => items
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
                Value::Map(m) => m.clone(),
                _ => return Err("neither nil nor a flat array of pairs nor a map".into()),
            };
            let mut seen = std::collections::BTreeSet::new();
            for (i, (k, val)) in pairs.iter().enumerate() {
                let Value::BulkString(k) = k else {
                    return Err(format!("field name {k:?}"));
                };
                let k = String::from_utf8_lossy(k).into_owned();
                if !seen.insert(k.clone()) {
                    return Err(format!("duplicate field {k}"));
                }
                match (i, k.as_str(), val) {
                    (0, "algorithm", Value::BulkString(_)) => {}
                    (0, _, _) => return Err("first field is not algorithm".into()),
                    (_, "last_token", Value::BulkString(_)) => {}
                    // 0: less than 1 ms left (a key expires once its time has passed).
                    (_, "ttl_ms", Value::Int(t)) if *t >= 0 => {}
                    (_, "ttl_ms", t) => return Err(format!("ttl_ms {t:?}: a key without TTL")),
                    (_, _, Value::Int(n)) if *n >= 0 => {}
                    (_, k, x) => return Err(format!("field {k}: {x:?}")),
                }
            }
            Ok(())
        }
        "RL.CLOCK" => match (v, args.get(1).map(|s| s.to_ascii_uppercase())) {
            (Value::Int(ms), Some(s)) if s == b"GET" && *ms >= 0 => Ok(()),
            (Value::Okay, Some(_)) => Ok(()),
            (Value::SimpleString(s), Some(_)) if s == "OK" => Ok(()),
            _ => Err("not an integer (GET) or OK".into()),
        },
        "RL._APPLY" => Err("RL._APPLY accepted from a normal client".into()),
        "RL.ALL" => {
            let a = arr.ok_or("not an array")?;
            let n = args.get(1).and_then(|x| int_arg(x)).ok_or("numkeys")? as usize;
            if a.len() != 2 + n {
                return Err(format!("{} elements for {n} keys", a.len()));
            }
            let (allowed, refused_by) = match (&a[0], &a[1]) {
                (Value::Int(x), Value::Int(y)) => (*x, *y),
                _ => return Err("allowed / refused_by are not integers".into()),
            };
            // The rules in order: their algorithm and limit argument.
            let mut rules = Vec::new();
            let mut i = 2 + n;
            while rules.len() < n {
                let w = String::from_utf8_lossy(&args[i]).to_uppercase();
                let m = if w == "GCRA" || w == "TOKENBUCKET" {
                    3
                } else {
                    2
                };
                rules.push((w, int_arg(&args[i + 1])));
                i += 1 + m;
                // The rule's options: COST n, RESERVE r, STAGGER, in any order.
                loop {
                    match args.get(i) {
                        Some(x)
                            if x.eq_ignore_ascii_case(b"COST")
                                || x.eq_ignore_ascii_case(b"RESERVE") =>
                        {
                            i += 2
                        }
                        Some(x) if x.eq_ignore_ascii_case(b"STAGGER") => i += 1,
                        _ => break,
                    }
                }
            }
            let mut first_refusal = 0;
            for (j, (sub, (w, limit))) in a[2..].iter().zip(&rules).enumerate() {
                let want = if w == "QUEUE" { 6 } else { 5 };
                let Value::Array(f) = sub else {
                    return Err(format!("rule {} reply {sub:?}", j + 1));
                };
                if f.len() != want {
                    return Err(format!("rule {} ({w}) reply of {} fields", j + 1, f.len()));
                }
                let f = ints(f, want)?;
                standard(&f, *limit).map_err(|e| format!("rule {} ({w}): {e}", j + 1))?;
                if f[0] == 0 && first_refusal == 0 {
                    first_refusal = j as i64 + 1;
                }
            }
            match (allowed, refused_by) {
                (1, 0) if first_refusal == 0 => Ok(()),
                (0, r) if r >= 1 && r == first_refusal => Ok(()),
                _ => Err(format!(
                    "allowed {allowed} refused_by {refused_by}, first refusing rule {first_refusal}"
                )),
            }
        }
        _ => Err(format!("unknown command {cmd}")),
    }
}

/// Fuzzes until the time is up; panics with the seed and the call on the first problem.
#[test]
fn fuzz_every_command() {
    let server = Server::start();
    let mut con = server.con();
    let client3 =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", server.port)).unwrap();
    let mut con3 = client3
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    con3.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut ctl = server.con();

    let seed = seed();
    let secs = seconds();
    eprintln!("fuzz_commands: seed {seed} (RL_FUZZ_SEED={seed} to replay), {secs} s");
    let mut f = Fuzz {
        rng: StdRng::seed_from_u64(seed),
        valid: false,
        pool: "gcra",
        n: 0,
        errors: BTreeMap::new(),
        ok_replies: BTreeMap::new(),
        clock_ms: T0,
    };
    clock_set(&mut ctl, T0);

    // Keys of every other type (no TTL: they must keep none) and of every algorithm.
    let make_foreign = |c: &mut Connection| {
        for (k, _) in FOREIGN {
            ok(c, &args!("DEL", k));
        }
        ok(c, &args!("SET", "fz:foreign:string", "hello"));
        ok(c, &args!("SET", "fz:foreign:digits", "1700000040000000000"));
        ok(
            c,
            &args!("SET", "fz:foreign:bigdigits", "99999999999999999999"),
        );
        ok(c, &args!("RPUSH", "fz:foreign:list", "a", "b", "1"));
        ok(c, &args!("HSET", "fz:foreign:hash", "f", "1", "g", "2"));
        ok(c, &args!("SADD", "fz:foreign:set", "1", "2"));
        ok(c, &args!("ZADD", "fz:foreign:zset", "1", "a", "2", "b"));
        ok(c, &args!("XADD", "fz:foreign:stream", "1-1", "f", "v"));
        ok(c, &args!("PFADD", "fz:foreign:hll", "a", "b"));
    };
    make_foreign(&mut ctl);
    let dumps = |c: &mut Connection| -> BTreeMap<&'static str, Vec<u8>> {
        FOREIGN
            .iter()
            .map(|(k, _)| match ok(c, &args!("DUMP", k)) {
                Value::BulkString(d) => (*k, d),
                other => panic!("DUMP {k}: {other:?}"),
            })
            .collect()
    };
    let foreign_dumps = dumps(&mut ctl);
    let algo_keys = [
        (
            "fz:algo:gcra",
            args!("RL.GCRA", "fz:algo:gcra", 10, 1, 3_600_000),
        ),
        (
            "fz:algo:tokenbucket",
            args!("RL.TOKENBUCKET", "fz:algo:tokenbucket", 10, 1, 3_600_000),
        ),
        (
            "fz:algo:sliding",
            args!("RL.SLIDING", "fz:algo:sliding", 10, 3_600_000),
        ),
        (
            "fz:algo:fixed",
            args!("RL.FIXED", "fz:algo:fixed", 10, 3_600_000),
        ),
        ("fz:algo:log", args!("RL.LOG", "fz:algo:log", 10, 3_600_000)),
        (
            "fz:algo:queue",
            args!("RL.QUEUE", "fz:algo:queue", 10, 3_600_000),
        ),
        (
            "fz:algo:concurrency",
            args!("RL.ACQUIRE", "fz:algo:concurrency", 10, 3_600_000),
        ),
        (
            "fz:algo:throttle",
            args!("CL.THROTTLE", "fz:algo:throttle", 10, 1, 3600),
        ),
    ];
    let refresh_algo_keys = |c: &mut Connection| {
        for (k, a) in &algo_keys {
            let t = key_type(c, k);
            if t == "none" || t == "ratelimit" {
                let _ = raw(c, a); // may be refused, or WRONGTYPE if the fuzzer changed it
            }
        }
    };
    refresh_algo_keys(&mut ctl);

    let mut keys: Vec<Vec<u8>> = FOREIGN.iter().map(|(k, _)| b(k)).collect();
    keys.extend(algo_keys.iter().map(|(k, _)| b(k)));
    keys.extend((0..24).map(|i| b(format!("fz:k:{i}"))));
    let mut tokens: Vec<Vec<u8>> = Vec::new();

    let start = Instant::now();
    let deadline = start + Duration::from_secs(secs);
    let mut last_scan = Instant::now();
    let mut scans = 0;
    let mut multis = 0;
    while Instant::now() < deadline {
        f.n += 1;
        // Now and then: move the test clock, scan the keyspace, refresh the fixtures.
        if f.n.is_multiple_of(50) {
            let sub = if f.rng.gen_bool(0.3) {
                "SET"
            } else {
                "ADVANCE"
            };
            let v = f.clock_arg(sub);
            let a = vec![b("RL.CLOCK"), b(sub), v];
            let _ = send(&mut ctl, &a, &|| {
                format!("seed {seed}: clock move {}", show(&a))
            });
        }
        if last_scan.elapsed() > Duration::from_millis(2000) {
            check_keyspace(&mut ctl, seed, f.n);
            refresh_algo_keys(&mut ctl);
            last_scan = Instant::now();
            scans += 1;
        }
        let in_multi = f.rng.gen_range(0..40) == 0;
        let batch = if in_multi { f.rng.gen_range(1..5) } else { 1 };
        let mut calls = Vec::new();
        for _ in 0..batch {
            let (cmd, _) = COMMANDS[f.rng.gen_range(0..COMMANDS.len())];
            // RL.CLOCK too often would keep the clock in odd places; keep it rarer.
            let cmd = if cmd == "RL.CLOCK" && f.rng.gen_bool(0.5) {
                "RL.GCRA"
            } else {
                cmd
            };
            let a = f.call(cmd, &keys, &tokens);
            calls.push((cmd, a));
        }
        let resp3 = f.rng.gen_range(0..10) == 0;
        let n = f.n;
        let ctx = |a: &[Vec<u8>]| {
            let s = show(a);
            move || format!("seed {seed}, call #{n}: {s}")
        };

        // Before: what the targeted keys hold, when it is cheap and meaningful.
        let snaps: Vec<Vec<(Vec<u8>, KeySnapB)>> = calls
            .iter()
            .map(|(cmd, a)| {
                keys_of(cmd, a)
                    .into_iter()
                    .filter(|k| k.len() <= 1024)
                    .map(|k| {
                        let s = snap_b(&mut ctl, &k);
                        (k, s)
                    })
                    .collect()
            })
            .collect();

        let replies: Vec<Value> = if in_multi {
            multis += 1;
            let c = if resp3 { &mut con3 } else { &mut con };
            let q = send(c, &[b("MULTI")], &ctx(&calls[0].1));
            assert!(matches!(q, Value::Okay), "MULTI: {q:?}");
            let mut queued_err = false;
            for (_, a) in &calls {
                let q = send(c, a, &ctx(a));
                match q {
                    Value::SimpleString(ref s) if s == "QUEUED" => {}
                    Value::ServerError(_) => queued_err = true,
                    other => panic!("queued reply {other:?}: {}", ctx(a)()),
                }
            }
            match send(c, &[b("EXEC")], &ctx(&calls[0].1)) {
                Value::Array(items) => {
                    assert!(!queued_err, "EXEC ran after a queueing error");
                    items
                }
                Value::ServerError(e) => {
                    assert!(queued_err, "EXEC failed: {e:?}: {}", ctx(&calls[0].1)());
                    calls
                        .iter()
                        .map(|_| Value::ServerError(e.clone()))
                        .collect()
                }
                other => panic!("EXEC answered {other:?}"),
            }
        } else {
            let c = if resp3 { &mut con3 } else { &mut con };
            vec![send(c, &calls[0].1, &ctx(&calls[0].1))]
        };
        assert_eq!(replies.len(), calls.len());

        // Per call: the reply. Per key touched: its state after the whole batch.
        let mut touched: Vec<(Vec<u8>, KeySnapB, bool, String)> = Vec::new();
        for (((cmd, a), v), before) in calls.iter().zip(&replies).zip(&snaps) {
            let why = |m: String| -> String { format!("{m}\n{}", ctx(a)()) };
            let is_err = match v {
                Value::ServerError(_) => {
                    let e = error_text(v).unwrap_or_default();
                    assert!(
                        !e.starts_with(INTERNAL),
                        "{}",
                        why(format!("a panic inside the module: {e}"))
                    );
                    assert!(
                        e.starts_with("ERR ")
                            || e.starts_with("WRONGTYPE ")
                            || e.starts_with("EXECABORT "),
                        "{}",
                        why(format!("unexpected error class: {e}"))
                    );
                    if *cmd == "RL._APPLY" && a.len() == 3 && !in_multi {
                        assert_eq!(e, ERR_APPLY, "{}", why("RL._APPLY from a client".into()));
                    }
                    let shape: String = e
                        .chars()
                        .take_while(|c| !c.is_ascii_digit())
                        .take(70)
                        .collect();
                    *f.errors.entry(shape).or_default() += 1;
                    true
                }
                _ => {
                    if let Err(m) = check_shape(cmd, a, v) {
                        panic!("{}", why(format!("bad reply {v:?}: {m}")));
                    }
                    *f.ok_replies.entry(cmd.to_string()).or_default() += 1;
                    false
                }
            };
            if let (Value::Array(items), "RL.ACQUIRE") = (v, *cmd) {
                if let Some(Value::BulkString(t)) = items.get(5) {
                    tokens.push(t.clone());
                    if tokens.len() > 64 {
                        tokens.remove(0);
                    }
                }
            }
            if *cmd == "RL.CLOCK" && !is_err {
                f.clock_ms = clock_get(&mut ctl);
            }
            let dry = a.len() > 2 && a[2..].iter().any(|x| x.eq_ignore_ascii_case(b"DRYRUN"));
            let may_change = !is_err
                && match *cmd {
                    "RL.INFO" | "RL.CLOCK" | "RL._APPLY" => false,
                    "RL.RELEASE" | "RL.RENEW" => matches!(v, Value::Int(1)),
                    // All or nothing: a refused RL.ALL changes no key.
                    "RL.ALL" => {
                        !dry && matches!(v, Value::Array(items) if items.first() == Some(&Value::Int(1)))
                    }
                    // A peek (COST 0) writes nothing.
                    _ => !dry && !is_peek(cmd, a),
                };
            for (key, before) in before {
                let adopt = *cmd == "CL.THROTTLE" && !is_err;
                match touched.iter_mut().find(|t| &t.0 == key) {
                    Some(t) => {
                        t.2 |= may_change;
                        t.3 = format!("{}\n{}", t.3, why(String::new()));
                    }
                    None => {
                        touched.push((key.clone(), before.clone(), may_change, why(String::new())))
                    }
                }
                if adopt {
                    if let Some(t) = touched.iter_mut().find(|t| &t.0 == key) {
                        t.3 = format!("{} [CL.THROTTLE]", t.3);
                    }
                }
            }
        }
        for (key, before, may_change, calls_text) in &touched {
            let after = snap_b(&mut ctl, key);
            // Every key the module holds has a TTL, right after every call.
            if after.ktype == "ratelimit" {
                assert!(
                    after.pexpiretime > 0,
                    "key left without a TTL: {after:?}{calls_text}"
                );
            }
            let expiring = before.pexpiretime > 0 && before.pexpiretime < wall_ms() + 2_000;
            if !may_change && !expiring && before != &after {
                panic!(
                    "changed a key it must not:\nbefore {before:?}\nafter  {after:?}{calls_text}\nreplies {replies:?}"
                );
            }
            if before.ktype != "ratelimit" && before.ktype != "none" && before != &after {
                // The one allowed change of a foreign key: CL.THROTTLE adopting redis-cell's
                // state (a string of decimal digits). Put the fixtures back.
                let adopt = calls_text.contains("[CL.THROTTLE]")
                    && before.ktype == "string"
                    // (adopted, then expired already if its TTL was short)
                    && (after.ktype == "ratelimit" || after.ktype == "none");
                assert!(
                    adopt,
                    "changed a key of another type: {before:?} -> {after:?}{calls_text}"
                );
                make_foreign(&mut ctl);
            }
        }
        if f.n.is_multiple_of(500) {
            ping(&mut con);
        }
    }

    // The end: server alive, every foreign key as it was, no key without a TTL, nothing on
    // the server's stderr.
    ping(&mut con);
    ping(&mut con3);
    assert_eq!(
        dumps(&mut ctl),
        foreign_dumps,
        "a key of another type changed"
    );
    check_keyspace(&mut ctl, seed, f.n);
    let stderr = fs::read_to_string(server.dir.join("stderr.log")).unwrap_or_default();
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "the module printed a panic (seed {seed}):\n{stderr}"
    );
    let log = fs::read_to_string(server.log_path()).unwrap_or_default();
    assert!(
        !log.contains("ASSERTION FAILED") && !log.contains("crashed by signal"),
        "{log}"
    );
    let rate = f.n as f64 / start.elapsed().as_secs_f64();
    eprintln!(
        "fuzz_commands: {} calls ({rate:.0}/s, {multis} in MULTI), {scans} keyspace scans, seed {seed}",
        f.n
    );
    eprintln!("successful replies: {:?}", f.ok_replies);
    for (e, n) in &f.errors {
        eprintln!("  {n:>7}  {e}");
    }
    // Every option of "Beyond yes or no" took effect at least once.
    let stats = text(&ok(&mut ctl, &args!("INFO", "ratelimit")));
    for name in [
        "peeks",
        "refunds",
        "partial_short_grants",
        "reserve_refusals",
        "blocks_set",
        "blocked_refusals",
    ] {
        let n: u64 = info_field(&mut ctl, "ratelimit", &format!("ratelimit_{name}"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        eprintln!("  ratelimit_{name}: {n}");
        if secs >= 10 {
            assert!(n > 0, "no {name} in {} calls:\n{stats}", f.n);
        }
    }
    // Every command was reached with a successful reply (except the internal one).
    for (cmd, _) in COMMANDS {
        if cmd != "RL._APPLY" && secs >= 10 {
            assert!(
                f.ok_replies.contains_key(cmd),
                "{cmd} never answered successfully"
            );
        }
    }
}

/// A rate command's `COST 0` (a peek, which writes nothing).
fn is_peek(cmd: &str, a: &[Vec<u8>]) -> bool {
    cmd.starts_with("RL.")
        && a.windows(2)
            .skip(2)
            .any(|w| w[0].eq_ignore_ascii_case(b"COST") && int_arg(&w[1]) == Some(0))
}

/// The keys a call names (for the before/after comparison): argument 1, or RL.ALL's
/// `numkeys` keys.
fn keys_of(cmd: &str, a: &[Vec<u8>]) -> Vec<Vec<u8>> {
    match cmd {
        "RL.CLOCK" => vec![],
        "RL.ALL" => {
            let n = a.get(1).and_then(|x| int_arg(x)).unwrap_or(0);
            if n < 1 || n as usize + 2 > a.len() {
                return vec![];
            }
            let mut ks: Vec<Vec<u8>> = a[2..2 + n as usize].to_vec();
            ks.sort();
            ks.dedup();
            ks
        }
        _ => a.get(1).cloned().into_iter().collect(),
    }
}

/// What a key holds (binary-safe key name): type, absolute expiry, RL.INFO (minus the
/// real-clock `ttl_ms`) or DUMP.
#[derive(Debug, Clone, PartialEq)]
struct KeySnapB {
    ktype: String,
    pexpiretime: i64,
    value: Option<Value>,
}

fn snap_b(con: &mut Connection, key: &[u8]) -> KeySnapB {
    let one = |con: &mut Connection, cmd: &str| -> Value {
        con.req_command(redis::cmd(cmd).arg(key))
            .unwrap_or_else(|e| panic!("{cmd}: {e} (server crashed?)"))
    };
    let ktype = text(&one(con, "TYPE"));
    let pexpiretime = match one(con, "PEXPIRETIME") {
        Value::Int(n) if ktype == "none" => n.min(-2),
        Value::Int(n) => n,
        other => panic!("PEXPIRETIME: {other:?}"),
    };
    if pexpiretime == -2 {
        // Gone between TYPE and PEXPIRETIME: it expired just now.
        return KeySnapB {
            ktype: "none".into(),
            pexpiretime,
            value: None,
        };
    }
    let value = match ktype.as_str() {
        "none" => None,
        "ratelimit" => match one(con, "RL.INFO") {
            Value::Array(items) => {
                // Without what depends on the reading clock (shown only while a block is in
                // force, blocked_until_ms); the digest of the stored encoding covers it.
                let mut kept: Vec<Value> = items
                    .chunks(2)
                    .filter(|p| {
                        !matches!(
                            text(&p[0]).as_str(),
                            "ttl_ms" | "tokens" | "blocked_until_ms"
                        )
                    })
                    .flat_map(|p| p.to_vec())
                    .collect();
                let d = con
                    .req_command(redis::cmd("DEBUG").arg("DIGEST-VALUE").arg(key))
                    .unwrap_or_else(|e| panic!("DEBUG DIGEST-VALUE: {e} (server crashed?)"));
                kept.push(d);
                Some(Value::Array(kept))
            }
            other => Some(other),
        },
        _ => Some(one(con, "DUMP")),
    };
    KeySnapB {
        ktype,
        pexpiretime,
        value,
    }
}

/// SCAN the whole keyspace: every key but the foreign fixtures has a TTL.
fn check_keyspace(con: &mut Connection, seed: u64, n: u64) {
    ping(con);
    let mut cursor = b("0");
    loop {
        let v = con
            .req_command(redis::cmd("SCAN").arg(&cursor).arg("COUNT").arg(1000))
            .expect("SCAN");
        let Value::Array(parts) = v else {
            panic!("SCAN: {v:?}")
        };
        let Value::BulkString(c) = &parts[0] else {
            panic!("SCAN cursor")
        };
        cursor = c.clone();
        let Value::Array(ks) = &parts[1] else {
            panic!("SCAN keys")
        };
        for k in ks {
            let Value::BulkString(k) = k else { continue };
            if k.starts_with(b"fz:foreign:") {
                continue;
            }
            let pttl = match con.req_command(redis::cmd("PTTL").arg(k.as_slice())) {
                Ok(Value::Int(p)) => p,
                other => panic!("PTTL: {other:?}"),
            };
            assert!(
                pttl != -1,
                "key {:?} has no TTL (seed {seed}, after call #{n}); type {}",
                String::from_utf8_lossy(&k[..k.len().min(64)]),
                text(
                    &con.req_command(redis::cmd("TYPE").arg(k.as_slice()))
                        .unwrap()
                )
            );
            if k.len() > 4096 {
                // The 1 MB key names: drop them, so the scans stay fast.
                let _ = con.req_command(redis::cmd("DEL").arg(k.as_slice()));
            }
        }
        if cursor == b"0" {
            break;
        }
    }
}
