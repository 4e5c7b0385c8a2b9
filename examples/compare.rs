//! `make compare`: identical traffic through every algorithm of the module, on a live
//! redis-server with the test clock, and a table of what each admitted.
//!
//! Every algorithm gets a comparable rule, "100 per 60000 ms", and its own key; every
//! request is sent at its scheduled instant of the module's test clock (`RL.CLOCK SET`),
//! so a run takes a second or two whatever the simulated span. For each algorithm and
//! scenario the table shows the requests offered and admitted, and the most requests
//! admitted in any trailing window of 60000 ms and of 1000 ms, computed from the admission
//! times. RL.QUEUE admits a request with a delay; it gets a second row with the times its
//! requests proceed (admission time + delay_ms).
//!
//! Usage: `cargo run --release --example compare` (after `cargo build --release`), or
//! `make compare`. Env: `RL_MODULE` (default target/release/libredis_ratelimit.so),
//! `RL_SERVER` (default redis-server).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use std::time::Instant;

/// A unix time in ms aligned to 60000: minute windows start here.
const T0: i64 = 1_700_000_040_000;
const LIMIT: i64 = 100;
const WINDOW: i64 = 60_000;

// ------------------------------------------------------------------------ the server

// The integration tests' server launcher (free port, own directory, the test clock,
// RL_SERVER / RL_MODULE); it panics with the server's log when the server cannot start.
use rl_testkit::Server;

// ------------------------------------------------------------------------ algorithms

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// The standard reply: allowed first.
    Rate,
    /// RL.QUEUE: allowed first, delay_ms 6th.
    Queue,
    /// CL.THROTTLE: limited first.
    Cell,
}

struct Algo {
    name: &'static str,
    rule: &'static str,
    args: &'static [&'static str],
    reply: Reply,
}

/// Each algorithm with a rule of "100 per 60000 ms".
const ALGOS: [Algo; 7] = [
    Algo {
        name: "RL.GCRA",
        rule: "burst 100, 100 per 60000 ms",
        args: &["100", "100", "60000"],
        reply: Reply::Rate,
    },
    Algo {
        name: "RL.TOKENBUCKET",
        rule: "capacity 100, 100 per 60000 ms",
        args: &["100", "100", "60000"],
        reply: Reply::Rate,
    },
    Algo {
        name: "RL.SLIDING",
        rule: "limit 100, window 60000 ms",
        args: &["100", "60000"],
        reply: Reply::Rate,
    },
    Algo {
        name: "RL.FIXED",
        rule: "limit 100, window 60000 ms",
        args: &["100", "60000"],
        reply: Reply::Rate,
    },
    Algo {
        name: "RL.LOG",
        rule: "limit 100, window 60000 ms",
        args: &["100", "60000"],
        reply: Reply::Rate,
    },
    Algo {
        name: "RL.QUEUE",
        rule: "capacity 100, interval 600 ms",
        args: &["100", "600"],
        reply: Reply::Queue,
    },
    Algo {
        name: "CL.THROTTLE",
        rule: "max_burst 99, 100 per 60 s",
        args: &["99", "100", "60"],
        reply: Reply::Cell,
    },
];

// ------------------------------------------------------------------------- scenarios

struct Scenario {
    name: &'static str,
    about: String,
    /// Request times (unix ms, ascending; several requests may share one instant).
    times: Vec<i64>,
}

fn scenarios() -> Vec<Scenario> {
    let boundary: Vec<i64> = (0..200)
        .map(|i| if i < 100 { T0 + 59_500 } else { T0 + 60_500 })
        .collect();
    let steady: Vec<i64> = (0..1_800).map(|i| T0 + 30_000 + 100 * i).collect();
    let mut rng = StdRng::seed_from_u64(42);
    let mut bursts = Vec::new();
    let mut n_bursts = 0;
    let mut t = T0 + 17_000;
    while t < T0 + 317_000 {
        let n = rng.gen_range(1..=60);
        bursts.extend(std::iter::repeat_n(t, n));
        n_bursts += 1;
        t += rng.gen_range(500..=15_000);
    }
    vec![
        Scenario {
            name: "boundary",
            about: "100 requests at 59.5 s and 100 at 60.5 s of an aligned minute".into(),
            times: boundary,
        },
        Scenario {
            name: "steady",
            about: "1 request every 100 ms for 3 min, from 30 s into a minute (600/min)".into(),
            times: steady,
        },
        Scenario {
            name: "bursts",
            about: format!(
                "{n_bursts} bursts of 1..60 requests, 0.5..15 s apart, over 5 min (seed 42)"
            ),
            times: bursts,
        },
    ]
}

// ---------------------------------------------------------------------------- driving

/// Admission times per algorithm (and proceed times for RL.QUEUE: admission + delay).
struct Run {
    admitted: Vec<Vec<i64>>,
    queue_proceed: Vec<i64>,
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn drive(con: &mut Connection, sc: &Scenario) -> Run {
    redis::cmd("FLUSHALL").query::<()>(con).expect("FLUSHALL");
    let mut run = Run {
        admitted: vec![Vec::new(); ALGOS.len()],
        queue_proceed: Vec::new(),
    };
    let keys: Vec<String> = ALGOS
        .iter()
        .map(|a| format!("{}:{}", sc.name, a.name.to_lowercase()))
        .collect();
    let mut i = 0;
    while i < sc.times.len() {
        let t = sc.times[i];
        let n = sc.times[i..].iter().take_while(|&&x| x == t).count();
        // One round trip per instant: set the clock, then every request at that instant.
        let mut p = redis::pipe();
        p.cmd("RL.CLOCK").arg("SET").arg(t);
        for _ in 0..n {
            for (a, key) in ALGOS.iter().zip(&keys) {
                p.cmd(a.name).arg(key).arg(a.args);
            }
        }
        let replies: Vec<Value> = p.query(con).expect("pipeline");
        for (j, r) in replies[1..].iter().enumerate() {
            let ai = j % ALGOS.len();
            let fields = match r {
                Value::Array(f) if f.len() >= 5 => f,
                other => panic!("{} answered {other:?}", ALGOS[ai].name),
            };
            let admitted = match ALGOS[ai].reply {
                Reply::Cell => int(&fields[0]) == 0,
                _ => int(&fields[0]) == 1,
            };
            if admitted {
                run.admitted[ai].push(t);
                if ALGOS[ai].reply == Reply::Queue {
                    run.queue_proceed.push(t + int(&fields[5]));
                }
            }
        }
        i += n;
    }
    run
}

/// The most of `times` in any window (t - span, t].
fn max_in_window(times: &[i64], span: i64) -> usize {
    let mut v = times.to_vec();
    v.sort_unstable();
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..v.len() {
        while v[lo] <= v[hi] - span {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

fn main() {
    let started = Instant::now();
    let server = Server::start();
    let mut con = server.con();
    let scs = scenarios();
    println!(
        "Identical traffic through every algorithm, rule \"{LIMIT} per {WINDOW} ms\" \
         (redis-server :{} with the module's test clock).",
        server.port
    );
    println!("Scenarios:");
    for sc in &scs {
        println!(
            "  {:<9} {} ({} requests)",
            sc.name,
            sc.about,
            sc.times.len()
        );
    }
    println!(
        "Columns: admitted; the most admitted in any trailing 60000 ms window (max/60s) and \
         in any trailing 1000 ms (max/1s)."
    );
    println!();
    let header = format!(
        "{:<16} {:<31} {:<9} {:>7} {:>8} {:>7} {:>6}",
        "algorithm", "rule", "scenario", "offered", "admitted", "max/60s", "max/1s"
    );
    println!("{header}");
    println!("{}", "-".repeat(header.len()));
    let runs: Vec<Run> = scs.iter().map(|sc| drive(&mut con, sc)).collect();
    for (ai, a) in ALGOS.iter().enumerate() {
        for (sc, run) in scs.iter().zip(&runs) {
            let t = &run.admitted[ai];
            println!(
                "{:<16} {:<31} {:<9} {:>7} {:>8} {:>7} {:>6}",
                a.name,
                a.rule,
                sc.name,
                sc.times.len(),
                t.len(),
                max_in_window(t, WINDOW),
                max_in_window(t, 1_000)
            );
        }
        if a.reply == Reply::Queue {
            for (sc, run) in scs.iter().zip(&runs) {
                let t = &run.queue_proceed;
                println!(
                    "{:<16} {:<31} {:<9} {:>7} {:>8} {:>7} {:>6}",
                    "RL.QUEUE",
                    "  ...when they proceed (+delay)",
                    sc.name,
                    sc.times.len(),
                    t.len(),
                    max_in_window(t, WINDOW),
                    max_in_window(t, 1_000)
                );
            }
        }
    }
    println!();
    for line in [
        "RL.LOG is exact: never more than the limit in any trailing window. RL.FIXED admits",
        "up to twice the limit across a window boundary. GCRA, the token bucket, RL.QUEUE and",
        "CL.THROTTLE (one algorithm) admit a full burst plus the refill within one window;",
        "RL.QUEUE spaces the requests it admits out to one per interval when they proceed.",
    ] {
        println!("{line}");
    }
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
}
