//! A reference model of the command contract (issue 24), checked against a real server.
//!
//! The model below is written from `shared/design/commands.md` (and, for CL.THROTTLE, from
//! redis-cell's published algorithm), never from the module's code: the bugs that reached
//! users so far were ones the code's own tests agreed with. It is small on purpose: exact
//! integer/rational arithmetic, one function per algorithm, no shared code with `src/`.
//!
//! Random episodes (one key each) of RL.GCRA, RL.TOKENBUCKET, RL.SLIDING, RL.FIXED, RL.LOG,
//! RL.QUEUE and CL.THROTTLE run on the test clock with rates from 1 per day to 1 per µs,
//! costs (0 = peek, up to the limit, above it: an error, or refused for CL.THROTTLE), DRYRUN,
//! clock steps from 0 (many calls in one frozen ms) to days and back (a corrected clock), and
//! rule changes on the live key (carried over by units). After every call:
//! - the reply equals the model's, field by field;
//! - an admitted write leaves the key with PTTL = the model's reset_after_ms (a key never
//!   exists without a TTL, a debt keeps the key); anything else (refused, DRYRUN, a peek, an
//!   error) leaves existence, PEXPIRETIME and DUMP as they were;
//! - independently of the model, what the module admitted never exceeds what the rule allows
//!   in any window (GCRA family: burst + elapsed / interval; windows and logs: the limit).
//!
//! How time is handled: an episode runs in ONE MULTI (its clock steps are `RL.CLOCK ADVANCE`
//! inside it). Redis freezes key expiry during a transaction (7.0+), so a TTL of 1 ms cannot
//! run out on the real clock between two calls the test clock puts in the same millisecond.
//! Expiry is emulated instead, on a real clock that moves with the test clock's steps forward
//! and never back: when the model says a key's TTL has run out, the episode sends `DEL key`
//! before the next call on it (not always: sometimes the outlived key is left, to check that
//! the module reads it as fresh). Nothing sleeps.
//!
//! Where the contract is not explicit, the model takes the reading a Redis user would expect;
//! each is marked `READING:` where it is used (peek of a queue, CL.THROTTLE's remaining and
//! its rule changes, carry-over after a step back or with the same interval, window counts
//! under a new window length, a log's memory, a window state's own time).
//!
//! A failure prints the seed, the shortest failing sequence found (shrunk on the server) as a
//! MULTI block to paste into redis-cli (a server loaded with `test-clock yes`), and what the
//! model expects of each call. A run reports every algorithm and kind of check that fails
//! (one shrunk example each) before the test fails.
//!
//! Env: `RL_MODEL_SEED` (an integer, or `random`; default: the fixed seed set below),
//! `RL_MODEL_EPISODES` (episodes per seed, default 2500), `RL_MODEL_RULE_CHANGES=0` (no rule
//! changes), `RL_MODEL_BACKWARDS=0` (no clock steps back): the last two to look past a known
//! failure.
use rl_testkit as common;
use rl_testkit::args;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use std::fmt::Write as _;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const DEFAULT_SEEDS: [u64; 3] = [0x24_0001, 0x24_0002, 0x24_0003];
const MS_NS: i128 = 1_000_000;
const S_NS: i128 = 1_000_000_000;

fn seeds() -> Vec<u64> {
    match std::env::var("RL_MODEL_SEED").ok().as_deref() {
        Some("random") => vec![SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64],
        Some(s) => vec![s.parse().expect("RL_MODEL_SEED: an integer or `random`")],
        None => DEFAULT_SEEDS.to_vec(),
    }
}

fn episodes_per_seed() -> usize {
    std::env::var("RL_MODEL_EPISODES")
        .ok()
        .map(|s| s.parse().expect("RL_MODEL_EPISODES: an integer"))
        .unwrap_or(2500)
}

/// `RL_MODEL_RULE_CHANGES=0` leaves rule changes out (to look past a rule-change failure).
fn rule_changes() -> bool {
    std::env::var("RL_MODEL_RULE_CHANGES").map_or(true, |v| v != "0")
}

/// `RL_MODEL_BACKWARDS=0` leaves clock steps back out.
fn backwards() -> bool {
    std::env::var("RL_MODEL_BACKWARDS").map_or(true, |v| v != "0")
}

fn ceil_div(a: i128, b: i128) -> i128 {
    assert!(b > 0);
    -((-a).div_euclid(b))
}

// ------------------------------------------------------------------------------- episodes

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Gcra,
    TokenBucket,
    Sliding,
    Fixed,
    Log,
    Queue,
    Throttle,
}

const KINDS: [Kind; 7] = [
    Kind::Gcra,
    Kind::TokenBucket,
    Kind::Sliding,
    Kind::Fixed,
    Kind::Log,
    Kind::Queue,
    Kind::Throttle,
];

impl Kind {
    fn command(self) -> &'static str {
        match self {
            Kind::Gcra => "RL.GCRA",
            Kind::TokenBucket => "RL.TOKENBUCKET",
            Kind::Sliding => "RL.SLIDING",
            Kind::Fixed => "RL.FIXED",
            Kind::Log => "RL.LOG",
            Kind::Queue => "RL.QUEUE",
            Kind::Throttle => "CL.THROTTLE",
        }
    }

    /// The most a call may cost without being an error (CL.THROTTLE: its `limit` field).
    fn limit(self, p: &[i64]) -> i64 {
        match self {
            Kind::Throttle => p[0] + 1,
            _ => p[0],
        }
    }
}

/// The cost a call sends.
#[derive(Clone, Copy, Debug)]
enum Cost {
    /// No COST option (no quantity for CL.THROTTLE): 1.
    Default,
    N(i64),
}

impl Cost {
    fn n(self) -> i64 {
        match self {
            Cost::Default => 1,
            Cost::N(n) => n,
        }
    }
}

#[derive(Clone, Debug)]
struct Step {
    /// Test-clock step before the call, in ms.
    dt: i64,
    /// The rule's numbers for this call (a change from the previous call is a rule change).
    p: Vec<i64>,
    cost: Cost,
    dry: bool,
    /// Spelling: option order and letter case.
    style: u8,
    /// When the model says the key's TTL ran out, delete it first (emulated expiry).
    expire: bool,
}

#[derive(Clone, Debug)]
struct Episode {
    kind: Kind,
    start: i64,
    steps: Vec<Step>,
}

fn pick<T: Copy>(rng: &mut StdRng, xs: &[T]) -> T {
    xs[rng.gen_range(0..xs.len())]
}

fn gen_limit(rng: &mut StdRng, max: i64) -> i64 {
    match rng.gen_range(0..10) {
        0 => 1,
        1..=6 => rng.gen_range(1..=10.min(max)),
        _ => rng.gen_range(1..=max),
    }
}

/// A count per period with an interval between 1 µs and the period (period_ms in ms).
fn gen_count(rng: &mut StdRng, period_ms: i64) -> i64 {
    let max = 1000 * period_ms; // one per µs
    match rng.gen_range(0..10) {
        0..=3 => rng.gen_range(1..=10.min(max)),
        4 => max,
        5 => (period_ms + 1).min(max), // just under one per ms
        6 => rng.gen_range(1..=max),
        _ => rng.gen_range(1..=5000.min(max)),
    }
}

const PERIODS_MS: [i64; 11] = [
    1, 2, 3, 7, 10, 100, 1000, 60_000, 3_600_000, 86_400_000, 1001,
];
const WINDOWS_MS: [i64; 10] = [1, 2, 3, 10, 100, 1000, 7000, 60_000, 3_600_000, 86_400_000];

fn gen_window(rng: &mut StdRng) -> i64 {
    if rng.gen_bool(0.2) {
        rng.gen_range(1..=5000)
    } else {
        pick(rng, &WINDOWS_MS)
    }
}

fn gen_rule(rng: &mut StdRng, kind: Kind) -> Vec<i64> {
    match kind {
        Kind::Gcra | Kind::TokenBucket => {
            let burst = gen_limit(rng, 100);
            let period = pick(rng, &PERIODS_MS);
            vec![burst, gen_count(rng, period), period]
        }
        Kind::Sliding | Kind::Fixed | Kind::Log => vec![gen_limit(rng, 100), gen_window(rng)],
        Kind::Queue => {
            let iv = if rng.gen_bool(0.2) {
                rng.gen_range(1..=3000)
            } else {
                pick(rng, &[1, 2, 10, 1000, 60_000, 3_600_000, 86_400_000])
            };
            vec![gen_limit(rng, 50), iv]
        }
        Kind::Throttle => {
            match rng.gen_range(0..10) {
                0 => return vec![4, 1001, 1],      // the repro
                1 => return vec![0, 1_000_000, 1], // one per µs, no burst
                _ => {}
            }
            let max_burst = if rng.gen_bool(0.2) {
                0
            } else {
                gen_limit(rng, 100) - 1
            };
            let period_s = pick(rng, &[1, 2, 60, 3600, 86_400]);
            vec![max_burst, gen_count(rng, period_s * 1000), period_s]
        }
    }
}

/// A rule change for an existing key.
///
/// READING (RL.SLIDING, RL.FIXED): the contract says window counts are kept "with their
/// times, read under the new numbers", not which time a count of a whole window has. A
/// window state knows one instant, the start of its current window: the current count is
/// timed at it, a sliding state's previous count just before it (the end of its window),
/// and under a new window length each counts in the new window that holds its instant (both
/// may land in one). This is the module's reading too; timing the previous count at its
/// window's start instead would forget it sooner, and admit more, when windows shrink.
fn change_rule(rng: &mut StdRng, kind: Kind, p: &[i64]) -> Vec<i64> {
    match kind {
        Kind::Sliding | Kind::Fixed if rng.gen_bool(0.5) => vec![gen_limit(rng, 100), p[1]],
        Kind::Gcra | Kind::TokenBucket | Kind::Throttle if rng.gen_bool(0.3) => {
            // Only the burst: the debt is kept (the contract's redis-cell example).
            let mut q = p.to_vec();
            q[0] = gen_limit(rng, 100) - if kind == Kind::Throttle { 1 } else { 0 };
            q
        }
        _ => gen_rule(rng, kind),
    }
}

/// The interval at which things happen for this rule, in ms (>= 1): clock steps are drawn
/// around it.
fn natural_ms(kind: Kind, p: &[i64]) -> i64 {
    match kind {
        Kind::Gcra | Kind::TokenBucket => (p[2] / p[1]).max(1),
        Kind::Sliding | Kind::Fixed | Kind::Log | Kind::Queue => p[1],
        Kind::Throttle => (p[2] * 1000 / p[1]).max(1),
    }
}

fn gen_episode(rng: &mut StdRng, kind: Kind) -> Episode {
    let hammer = rng.gen_bool(0.1);
    let n = if hammer {
        rng.gen_range(100..=400)
    } else {
        rng.gen_range(5..=60)
    };
    // Start somewhere in a day after T0, sometimes exactly on a window boundary.
    let start = if rng.gen_bool(0.3) {
        T0
    } else {
        T0 + rng.gen_range(0..DAY_MS)
    };
    let mut p = gen_rule(rng, kind);
    let mut steps = Vec::with_capacity(n);
    for i in 0..n {
        if i > 0 && rule_changes() && rng.gen_bool(0.05) {
            p = change_rule(rng, kind, &p);
        }
        let nat = natural_ms(kind, &p);
        let dt = if i == 0 {
            0
        } else if hammer {
            if rng.gen_bool(0.85) {
                0
            } else {
                1
            }
        } else {
            match rng.gen_range(0..100) {
                0..=34 => 0,
                35..=44 => 1,
                45..=69 => rng.gen_range(1..=nat),
                70..=84 => rng.gen_range(1..=3 * nat),
                85..=91 => rng.gen_range(1..=(nat / 4).max(1)),
                // The clock stepped back (a corrected clock, a failover).
                92..=94 => -rng.gen_range(1..=2 * nat),
                _ => rng.gen_range(1..=3 * DAY_MS),
            }
        };
        let dt = if backwards() { dt } else { dt.abs() };
        let limit = kind.limit(&p);
        let cost = match rng.gen_range(0..100) {
            0..=9 => Cost::N(0),
            10..=59 => Cost::Default,
            60..=69 => Cost::N(1),
            70..=95 => Cost::N(rng.gen_range(1..=limit)),
            // Above the limit: an error for RL.*, refused for CL.THROTTLE (as redis-cell).
            _ => Cost::N(limit + rng.gen_range(1..=3)),
        };
        let dry = kind != Kind::Throttle && rng.gen_bool(0.15);
        steps.push(Step {
            dt,
            p: p.clone(),
            cost,
            dry,
            style: rng.gen(),
            expire: !rng.gen_bool(0.2),
        });
    }
    Episode { kind, start, steps }
}

fn command(kind: Kind, key: &str, s: &Step) -> Vec<String> {
    let mut name = kind.command().to_string();
    if s.style & 1 == 1 {
        name = name.to_lowercase();
    }
    let mut a = vec![name, key.to_string()];
    a.extend(s.p.iter().map(|n| n.to_string()));
    if kind == Kind::Throttle {
        if let Cost::N(n) = s.cost {
            a.push(n.to_string());
        }
        return a;
    }
    let mut opts: Vec<Vec<String>> = Vec::new();
    if let Cost::N(n) = s.cost {
        let w = if s.style & 2 == 2 { "cost" } else { "COST" };
        opts.push(vec![w.into(), n.to_string()]);
    }
    if s.dry {
        let w = if s.style & 4 == 4 { "dryRun" } else { "DRYRUN" };
        opts.push(vec![w.into()]);
    }
    if s.style & 8 == 8 {
        opts.reverse();
    }
    a.extend(opts.into_iter().flatten());
    a
}

// ------------------------------------------------------------------------- exact times

/// An exact time or duration in ms: n / d (d > 0, reduced). GCRA intervals are period/count
/// ms, not whole ns in general, and a rule change mixes two of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rat {
    n: i128,
    d: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

thread_local! {
    /// Set when exact arithmetic would overflow i128 (denominators grow with every rate
    /// change a carried state goes through): `plan` ends the episode before that call.
    static OVERFLOWED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn ck(x: Option<i128>, fallback: i128) -> i128 {
    x.unwrap_or_else(|| {
        OVERFLOWED.with(|o| o.set(true));
        fallback
    })
}

impl Rat {
    fn new(n: i128, d: i128) -> Rat {
        assert!(d > 0);
        let g = gcd(n, d).max(1);
        Rat { n: n / g, d: d / g }
    }

    fn ms(x: i64) -> Rat {
        Rat::new(x as i128, 1)
    }

    /// Both over one denominator.
    fn common(self, o: Rat) -> (i128, i128, i128) {
        let g = gcd(self.d, o.d);
        let d = ck((self.d / g).checked_mul(o.d), 1);
        let a = ck(self.n.checked_mul(d / self.d), 0);
        let b = ck(o.n.checked_mul(d / o.d), 1);
        (a, b, d)
    }

    fn add(self, o: Rat) -> Rat {
        let (a, b, d) = self.common(o);
        Rat::new(ck(a.checked_add(b), 0), d)
    }

    fn sub(self, o: Rat) -> Rat {
        let (a, b, d) = self.common(o);
        Rat::new(ck(a.checked_sub(b), 0), d)
    }

    fn times(self, k: i128) -> Rat {
        Rat::new(ck(self.n.checked_mul(k), 0), self.d)
    }

    fn max(self, o: Rat) -> Rat {
        let (a, b, _) = self.common(o);
        if a >= b {
            self
        } else {
            o
        }
    }

    /// floor(self / o), o > 0.
    fn div_floor(self, o: Rat) -> i128 {
        let (a, b, _) = self.common(o);
        a.div_euclid(b)
    }

    /// ceil(self / o), o > 0.
    fn div_ceil(self, o: Rat) -> i128 {
        let (a, b, _) = self.common(o);
        ceil_div(a, b)
    }

    /// In whole ms, rounded up.
    fn ceil_ms(self) -> i64 {
        ceil_div(self.n, self.d) as i64
    }
}

// ---------------------------------------------------------------------------------- model

/// What the model says one call must do.
#[derive(Clone, Debug, PartialEq)]
enum Reply {
    Fields(Vec<i64>),
    /// An error (any `ERR ...`), nothing changed.
    Error,
}

#[derive(Clone, Debug)]
struct Expect {
    reply: Reply,
    /// The call writes: the key's new TTL in ms is in [lo, hi] (equal but for CL.THROTTLE).
    write: Option<(i64, i64)>,
}

/// The state of one key, as the contract describes it (never as the module stores it).
#[derive(Clone, Debug)]
enum State {
    /// GCRA family: the theoretical arrival time, and the rule `p` it was written with.
    Gcra { tat: Rat, p: Vec<i64> },
    /// Sliding window counter: the current window's start, previous and current counts.
    Sliding { start: i64, prev: i64, cur: i64 },
    /// Fixed window: the window's start and its count.
    Fixed { start: i64, count: i64 },
    /// Exact log: (time, units) of admitted requests, as of the last write.
    Log { entries: Vec<(i64, i64)> },
    /// Queue: the time the last scheduled request finishes (ms), and its interval.
    Queue { tat: i64, p: Vec<i64> },
    /// CL.THROTTLE's state: redis-cell's TAT in ns, and the numbers it was written with.
    Throttle { tat: i128, p: Vec<i64> },
}

struct Model {
    kind: Kind,
    state: Option<State>,
    /// When the key's TTL runs out, on the emulated real clock (see `plan`).
    expires_at: Option<i64>,
}

impl Model {
    fn new(kind: Kind) -> Model {
        Model {
            kind,
            state: None,
            expires_at: None,
        }
    }

    /// The key's TTL ran out on the test clock: it is deleted (emulated expiry).
    fn expire(&mut self) {
        self.state = None;
        self.expires_at = None;
    }

    /// One call at `now` on the module's clock; `real` is the emulated real clock (TTLs).
    fn call(&mut self, p: &[i64], now: i64, real: i64, cost: i64, dry: bool) -> Expect {
        let limit = self.kind.limit(p);
        if self.kind != Kind::Throttle && !(0..=limit).contains(&cost) {
            // Conventions: a cost is 0 <= n <= limit, otherwise an error; bad input never
            // changes state.
            return Expect {
                reply: Reply::Error,
                write: None,
            };
        }
        // Time never runs backwards for a key: windows and logs decide as if it were still
        // the latest time they were written at, and their retry_after_ms, reset_after_ms and
        // TTL include the time the clock needs to catch up. GCRA-family states need nothing:
        // their TAT already implies that time, and their durations are counted from now.
        //
        // READING: a window state's own time is what it holds: the start of its (current)
        // window for RL.FIXED and RL.SLIDING, the newest entry for RL.LOG.
        let own = match &self.state {
            Some(State::Fixed { start, .. }) | Some(State::Sliding { start, .. }) => *start,
            Some(State::Log { entries }) => entries.iter().map(|e| e.0).max().unwrap_or(now),
            _ => now,
        };
        let at = now.max(own);
        let catch_up = at - now;
        let (mut fields, new_state, mut ttl) = match self.kind {
            Kind::Gcra | Kind::TokenBucket => gcra(self.state.as_ref(), p, at, cost),
            Kind::Sliding => sliding(self.state.as_ref(), p, at, cost),
            Kind::Fixed => fixed(self.state.as_ref(), p, at, cost),
            Kind::Log => log(self.state.as_ref(), p, at, cost),
            Kind::Queue => queue(self.state.as_ref(), p, at, cost),
            Kind::Throttle => throttle(self.state.as_ref(), p, at, cost),
        };
        if catch_up > 0 {
            for f in &mut fields[3..5] {
                if *f > 0 {
                    *f += catch_up;
                }
            }
            ttl = ttl.map(|(lo, hi)| (lo + catch_up, hi + catch_up));
        }
        let admitted = if self.kind == Kind::Throttle {
            fields[0] == 0
        } else {
            fields[0] == 1
        };
        // Refused, DRYRUN and peeks write nothing (CL.THROTTLE's quantity 0 included).
        //
        // READING: but the first request under a new emission interval (GCRA family, queue,
        // CL.THROTTLE) stores the re-timed state even when it is refused: the rule change
        // takes effect once, from that request on. The conventions need it ("loosening a
        // rate takes effect at once: a caller who spent 10 is free after one second"; were
        // the re-timing never stored, the debt would keep decaying at the old rate, and a
        // debt carried into a tighter rule would vanish with the old, shorter TTL); it is
        // not a spend, and a TTL of 0 (the debt already paid) deletes the key.
        let retimed = !admitted && new_state.is_some();
        let write = (admitted || retimed) && !dry && cost > 0;
        let mut e = Expect {
            reply: Reply::Fields(fields),
            write: None,
        };
        if write {
            let (lo, hi) = ttl.expect("a write has a TTL");
            if hi == 0 && retimed {
                // Re-timed to a fresh state: the key is deleted.
                self.expire();
                e.write = Some((0, 0));
                return e;
            }
            assert!(lo >= 0 && hi >= 1, "model: a write with TTL {lo}..{hi}");
            self.state = new_state;
            self.expires_at = Some(real + hi);
            e.write = Some((lo, hi));
        }
        e
    }
}

/// What one algorithm answers: the reply fields, the state a write would leave, and the TTL
/// range that write sets.
type Out = (Vec<i64>, Option<State>, Option<(i64, i64)>);

/// GCRA and token bucket (`p` = burst, count, period_ms), exact.
fn gcra(st: Option<&State>, p: &[i64], now_ms: i64, cost: i64) -> Out {
    let b = p[0];
    let t = Rat::new(p[2] as i128, p[1] as i128); // the emission interval
    let tau = t.times(b as i128);
    let now = Rat::ms(now_ms);
    let tat = match st {
        None => now,
        Some(State::Gcra { tat, p: old }) => carry_over(*tat, old, p, now),
        Some(other) => panic!("model: {other:?} under GCRA"),
    };
    let tat = tat.max(now);
    let remaining_at = |x: Rat| now.add(tau).sub(x).div_floor(t).max(0) as i64;
    if cost == 0 {
        // Peek: allowed 1, remaining now, retry 0, reset_after as now.
        return (
            vec![1, b, remaining_at(tat), 0, tat.sub(now).ceil_ms()],
            None,
            None,
        );
    }
    let new_tat = tat.add(t.times(cost as i128));
    let allow_at = new_tat.sub(tau);
    if allow_at.max(now) == now {
        let reset = new_tat.sub(now).ceil_ms();
        (
            vec![1, b, remaining_at(new_tat), 0, reset],
            Some(State::Gcra {
                tat: new_tat,
                p: p.to_vec(),
            }),
            Some((reset, reset)),
        )
    } else {
        let reset = tat.sub(now).ceil_ms();
        // READING (see `Model::call`): a refusal under a new emission interval stores the
        // re-timed state, the rule change taking effect once.
        let retimed = matches!(st, Some(State::Gcra { p: old, .. })
            if Rat::new(old[2] as i128, old[1] as i128) != t);
        (
            vec![0, b, remaining_at(tat), allow_at.sub(now).ceil_ms(), reset],
            retimed.then(|| State::Gcra { tat, p: p.to_vec() }),
            retimed.then_some((reset, reset)),
        )
    }
}

/// The conventions' carry-over of a GCRA-family state to new numbers: the TAT's lead, in
/// units of the old emission interval rounded up, becomes that many new intervals.
///
/// READING: the lead is counted from now, or, when the clock reads earlier than the state's
/// own time, from that time ("decides as if it were still that time"; a GCRA state's time is
/// implied by its TAT: it was written no earlier than TAT - burst * interval). Counting from
/// an earlier now would turn the clock's gap into units nobody spent.
///
/// READING: when the emission interval is unchanged (only the burst changed, or the same
/// rate written with other numbers, 2/2000 = 1/1000), the TAT is kept as it is: nothing is
/// "re-timed", and rounding the lead up would add debt no one spent (the contract's own
/// example, lowering a burst, "keeps the caller's debt", as redis-cell does, exactly).
fn carry_over(tat: Rat, old: &[i64], p: &[i64], now: Rat) -> Rat {
    let t0 = Rat::new(old[2] as i128, old[1] as i128);
    let t = Rat::new(p[2] as i128, p[1] as i128);
    if t0 == t {
        return tat;
    }
    let base = now.max(tat.sub(t0.times(old[0] as i128)));
    let lead = tat.sub(base).max(Rat::ms(0));
    base.add(t.times(lead.div_ceil(t0)))
}

/// RL.SLIDING (`p` = limit, window_ms), exact: estimate * window compared in integers.
fn sliding(st: Option<&State>, p: &[i64], now: i64, cost: i64) -> Out {
    let (l, w) = (p[0] as i128, p[1] as i128);
    let cs = now.div_euclid(p[1]) * p[1];
    // The stored counters, timed at the one instant the state knows (see `change_rule`), are
    // read under this call's window.
    let counters = match st {
        None => vec![],
        Some(State::Sliding {
            start, prev, cur, ..
        }) => vec![(start - 1, *prev), (*start, *cur)],
        Some(other) => panic!("model: {other:?} under SLIDING"),
    };
    let in_window = |ws: i64| -> i128 {
        counters
            .iter()
            .filter(|&&(t, _)| t.div_euclid(p[1]) * p[1] == ws)
            .map(|&(_, n)| n as i128)
            .sum()
    };
    let (prev, cur) = (in_window(cs - p[1]), in_window(cs));
    let e = (now - cs) as i128;
    let to_end = cs + p[1] - now;
    let reset_of = |cur: i128, prev: i128| {
        if cur > 0 {
            to_end + p[1]
        } else if prev > 0 {
            to_end
        } else {
            0
        }
    };
    // w * (limit - estimate), the room left, scaled by the window.
    let room_w = |cur: i128| l * w - prev * (w - e) - cur * w;
    let remaining = |cur: i128| room_w(cur).div_euclid(w).max(0) as i64;
    let cost = cost as i128;
    if cost == 0 {
        return (
            vec![1, l as i64, remaining(cur), 0, reset_of(cur, prev)],
            None,
            None,
        );
    }
    if room_w(cur + cost) >= 0 {
        let reset = reset_of(cur + cost, prev);
        return (
            vec![1, l as i64, remaining(cur + cost), 0, reset],
            Some(State::Sliding {
                start: cs,
                prev: prev as i64,
                cur: (cur + cost) as i64,
            }),
            Some((reset, reset)),
        );
    }
    // Refused: the first whole ms at which the estimate leaves room for `cost`.
    let retry = if cur + cost <= l {
        // Still in this window: prev * (w - x) / w + cur + cost <= l, x >= e.
        ceil_div(w * (prev - (l - cur - cost)), prev) - e
    } else {
        // In the next window, where the current count is the previous one.
        (w - e) + ceil_div(w * (cur - (l - cost)), cur)
    };
    (
        vec![
            0,
            l as i64,
            remaining(cur),
            retry as i64,
            reset_of(cur, prev),
        ],
        None,
        None,
    )
}

/// RL.FIXED (`p` = limit, window_ms).
fn fixed(st: Option<&State>, p: &[i64], now: i64, cost: i64) -> Out {
    let (l, w) = (p[0], p[1]);
    let cs = now.div_euclid(w) * w;
    // The stored count is timed at its window's start and read under this call's window.
    let count = match st {
        None => 0,
        Some(State::Fixed { start, count }) if start.div_euclid(w) * w == cs => *count,
        Some(State::Fixed { .. }) => 0,
        Some(other) => panic!("model: {other:?} under FIXED"),
    };
    let to_end = cs + w - now;
    let reset_of = |n: i64| if n > 0 { to_end } else { 0 };
    if cost == 0 {
        return (
            vec![1, l, (l - count).max(0), 0, reset_of(count)],
            None,
            None,
        );
    }
    if count + cost <= l {
        (
            vec![1, l, l - count - cost, 0, to_end],
            Some(State::Fixed {
                start: cs,
                count: count + cost,
            }),
            Some((to_end, to_end)),
        )
    } else {
        (
            vec![0, l, (l - count).max(0), to_end, reset_of(count)],
            None,
            None,
        )
    }
}

/// RL.LOG (`p` = limit, window_ms): admitted iff the units in (now - w, now] plus cost fit.
///
/// READING: a write keeps only the entries inside its window (memory bounded by the limit),
/// so a later, longer window does not bring back entries that had aged out at the last write.
fn log(st: Option<&State>, p: &[i64], now: i64, cost: i64) -> Out {
    let (l, w) = (p[0], p[1]);
    let mut live: Vec<(i64, i64)> = match st {
        None => Vec::new(),
        Some(State::Log { entries }) => entries.clone(),
        Some(other) => panic!("model: {other:?} under LOG"),
    };
    live.retain(|&(t, _)| t > now - w);
    live.sort();
    let used: i64 = live.iter().map(|&(_, n)| n).sum();
    let reset_now = live.last().map_or(0, |&(t, _)| t + w - now);
    if cost == 0 {
        return (vec![1, l, (l - used).max(0), 0, reset_now], None, None);
    }
    if used + cost <= l {
        live.push((now, cost));
        (
            vec![1, l, l - used - cost, 0, w],
            Some(State::Log { entries: live }),
            Some((w, w)),
        )
    } else {
        // The oldest units must age out until `cost` fits.
        let mut must = used + cost - l;
        let mut retry = 0;
        for &(t, n) in &live {
            must -= n;
            if must <= 0 {
                retry = t + w - now;
                break;
            }
        }
        assert!(must <= 0, "model: LOG cost above the limit");
        (vec![0, l, (l - used).max(0), retry, reset_now], None, None)
    }
}

/// RL.QUEUE (`p` = capacity, interval_ms): requests scheduled one per interval; `tat` is the
/// end of the last scheduled one. Reply: the five fields and delay_ms.
fn queue(st: Option<&State>, p: &[i64], now: i64, cost: i64) -> Out {
    let (cap, iv) = (p[0], p[1]);
    let tat = match st {
        None => now,
        // GCRA family: the waiting requests are carried over and re-timed by units, counted
        // from now or the state's own time (as in `carry_over`).
        Some(State::Queue { tat, p: old }) => {
            if old[1] == iv {
                *tat
            } else {
                let base = now.max(tat - old[0] * old[1]);
                base + ceil_div((tat - base) as i128, old[1] as i128) as i64 * iv
            }
        }
        Some(other) => panic!("model: {other:?} under QUEUE"),
    };
    let cur = tat.max(now);
    let tau = cap * iv;
    let remaining_at = |t: i64| (tau - (t - now)).div_euclid(iv).max(0);
    if cost == 0 {
        // READING: a peek's delay_ms is the wait a request sent now would have (the queue's
        // current wait), as DRYRUN reports it: "0 when refused" does not apply (a peek is
        // allowed), and 0 would tell a caller peeking a full queue that it may go now.
        return (
            vec![1, cap, remaining_at(cur), 0, cur - now, cur - now],
            None,
            None,
        );
    }
    let next = cur + cost * iv;
    if next - now <= tau {
        (
            vec![1, cap, remaining_at(next), 0, next - now, cur - now],
            Some(State::Queue {
                tat: next,
                p: p.to_vec(),
            }),
            Some((next - now, next - now)),
        )
    } else {
        // READING (see `Model::call`): a refusal under a new interval stores the re-timed
        // queue.
        let retimed = matches!(st, Some(State::Queue { p: old, .. }) if old[1] != iv);
        (
            vec![0, cap, remaining_at(cur), next - tau - now, cur - now, 0],
            retimed.then(|| State::Queue {
                tat: cur,
                p: p.to_vec(),
            }),
            retimed.then_some((cur - now, cur - now)),
        )
    }
}

/// redis-cell 0.5's CL.THROTTLE (`p` = max_burst, count, period_s; quantity = cost), from its
/// published algorithm: integer ns, emission interval T = period / count truncated to whole
/// ns (redis-cell divides in f64 and truncates; for every period_ns < 2^53 that is the same
/// number), dvt = T * (max_burst + 1), `remaining` from whole µs, seconds rounded up only
/// when the sub-second part holds a whole ms, -1 for "no retry". The key's TTL is the debt in
/// whole ms: redis-cell truncates it (a debt under 1 ms gives PTTL 0, a key that lives to
/// the end of the current ms); rounding up is as good (the state is fresh by then), so the
/// model accepts either.
///
/// READING: a rule change on a key CL.THROTTLE wrote is carried over by units like every
/// GCRA-family state (conventions: only "a state with no numbers of its own (an adopted
/// redis-cell key)" is read as it is), in units of redis-cell's whole-ns interval. So a rate
/// change answers unlike redis-cell, which keeps the raw TAT; a burst change (same interval)
/// keeps the TAT, as redis-cell does.
fn throttle(st: Option<&State>, p: &[i64], now_ms: i64, q: i64) -> Out {
    let mb = p[0] as i128;
    let t = throttle_interval(p);
    assert!(t >= 1000, "model: CL.THROTTLE below 1 µs is out of scope");
    let dvt = t * (mb + 1);
    let inc = t * q as i128;
    let now = now_ms as i128 * MS_NS;
    let tat = match st {
        None => now,
        Some(State::Throttle { tat, p: old }) => {
            let t0 = throttle_interval(old);
            if t0 == t {
                *tat
            } else {
                // Counted from now or the state's own time (as in `carry_over`).
                let base = now.max(tat - t0 * (old[0] as i128 + 1));
                base + ceil_div((tat - base).max(0), t0) * t
            }
        }
        Some(other) => panic!("model: {other:?} under CL.THROTTLE"),
    };
    let tat = tat.max(now);
    let new_tat = tat + inc;
    let diff = now - (new_tat - dvt);
    let (limited, retry, ttl) = if diff < 0 {
        (true, (inc <= dvt).then_some(-diff), tat - now)
    } else {
        (false, None, new_tat - now)
    };
    let next = dvt - ttl;
    // READING: never below 0. redis-cell answers -1 when a debt beyond dvt (a lowered burst)
    // is within its µs truncation of the next interval; that is its nonsense, not a count.
    let remaining = if next > -t {
        ((next / 1000) / (t / 1000)).max(0) as i64
    } else {
        0
    };
    let secs = |d: i128| (d / S_NS + i128::from((d % S_NS) / MS_NS > 0)) as i64;
    let fields = vec![
        i64::from(limited),
        (mb + 1) as i64,
        remaining,
        retry.map_or(-1, secs),
        secs(ttl),
    ];
    let lo = (ttl / MS_NS) as i64;
    let hi = ceil_div(ttl, MS_NS) as i64;
    if limited {
        // READING (see `Model::call`): a refusal under a new interval stores the re-timed
        // TAT.
        let retimed = matches!(st, Some(State::Throttle { p: old, .. })
            if throttle_interval(old) != t);
        return (
            fields,
            retimed.then(|| State::Throttle { tat, p: p.to_vec() }),
            retimed.then_some((lo, hi)),
        );
    }
    (
        fields,
        Some(State::Throttle {
            tat: new_tat,
            p: p.to_vec(),
        }),
        Some((lo, hi)),
    )
}

/// redis-cell's emission interval in ns: period / count, truncated.
fn throttle_interval(p: &[i64]) -> i128 {
    p[2] as i128 * S_NS / p[1] as i128
}

// ------------------------------------------------------------------- window invariants

/// Independently of the model: the admissions seen since the rule last changed never exceed
/// what the rule allows in any window. `adm` = (time ms, cost) of admitted writes.
fn check_invariant(kind: Kind, p: &[i64], adm: &[(i64, i64)]) -> Result<(), String> {
    let Some(&(tj, _)) = adm.last() else {
        return Ok(());
    };
    // Only windows that end at the newest admission: earlier ones were checked before.
    match kind {
        Kind::Gcra | Kind::TokenBucket | Kind::Queue | Kind::Throttle => {
            // sum <= burst + (tj - ti) / T, with T = period / count (ms), for every ti.
            let (burst, num, den) = match kind {
                Kind::Queue => (p[0] as i128, p[1] as i128, 1),
                Kind::Throttle => (p[0] as i128 + 1, p[2] as i128 * S_NS / p[1] as i128, MS_NS),
                _ => (p[0] as i128, p[2] as i128, p[1] as i128),
            };
            let mut sum = 0i128;
            for &(ti, n) in adm.iter().rev() {
                sum += n as i128;
                if (sum - burst) * num > (tj - ti) as i128 * den {
                    return Err(format!(
                        "{sum} units admitted in [{ti}, {tj}]: more than burst {burst} + \
                         elapsed/interval allow"
                    ));
                }
            }
        }
        Kind::Fixed | Kind::Sliding => {
            let w = p[1];
            let cs = tj.div_euclid(w) * w;
            let cur: i64 = adm.iter().filter(|a| a.0 >= cs).map(|a| a.1).sum();
            let prev: i64 = adm
                .iter()
                .filter(|a| a.0 >= cs - w && a.0 < cs)
                .map(|a| a.1)
                .sum();
            let over = if kind == Kind::Fixed {
                cur > p[0]
            } else {
                // The estimate from the admissions seen (a lower bound of the true counts).
                prev as i128 * (w - (tj - cs)) as i128 + cur as i128 * w as i128
                    > p[0] as i128 * w as i128
            };
            if over {
                return Err(format!(
                    "window at {cs}: {cur} admitted (previous window {prev}), limit {}",
                    p[0]
                ));
            }
        }
        Kind::Log => {
            let sum: i64 = adm.iter().filter(|a| a.0 > tj - p[1]).map(|a| a.1).sum();
            if sum > p[0] {
                return Err(format!(
                    "{sum} units admitted in ({}, {tj}], limit {}",
                    tj - p[1],
                    p[0]
                ));
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------- running one

#[derive(Debug)]
struct Failure {
    step: usize,
    /// What kind of check failed: a run reports one failure per algorithm and class.
    class: &'static str,
    msg: String,
}

/// (MULTI commands, index of each step's call, (now, model, emulated expiry) of each step).
type Plan = (Vec<Vec<String>>, Vec<usize>, Vec<(i64, Expect, bool)>);

/// The calls of an episode as sent: the MULTI's commands, and for each step the index of its
/// rate command in the EXEC reply (EXISTS, PTTL, PEXPIRETIME, DUMP follow it).
fn plan(ep: &Episode, key: &str) -> Plan {
    let mut cmds = vec![args!("RL.CLOCK", "SET", ep.start)];
    let mut at = Vec::new();
    let mut expects = Vec::new();
    let mut model = Model::new(ep.kind);
    let mut now = ep.start;
    // The emulated real clock, that TTLs run on: it moves with the test clock's steps
    // forward and stays put when the test clock steps back.
    let mut real = 0;
    for s in &ep.steps {
        if s.dt != 0 {
            cmds.push(args!("RL.CLOCK", "ADVANCE", s.dt));
            now += s.dt;
            real += s.dt.max(0);
        }
        // Emulated expiry: the key's TTL has run out.
        let del = s.expire && model.expires_at.is_some_and(|x| real >= x);
        if del {
            cmds.push(args!("DEL", key));
            model.expire();
        }
        let e = model.call(&s.p, now, real, s.cost.n(), s.dry);
        if OVERFLOWED.with(|o| o.replace(false)) {
            // The model cannot follow this state exactly: the episode ends before this call.
            cmds.truncate(at.last().map_or(1, |&j| j + 5));
            break;
        }
        at.push(cmds.len());
        cmds.push(command(ep.kind, key, s));
        cmds.push(args!("EXISTS", key));
        cmds.push(args!("PTTL", key));
        cmds.push(args!("PEXPIRETIME", key));
        cmds.push(args!("DUMP", key));
        expects.push((now, e, del));
    }
    (cmds, at, expects)
}

fn fields(v: &Value) -> Result<Vec<i64>, String> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|x| match x {
                Value::Int(n) => Ok(*n),
                other => Err(format!("a field is not an integer: {other:?}")),
            })
            .collect(),
        Value::ServerError(_) => Err(format!("error {:?}", error_text(v).unwrap())),
        other => Err(format!("not an array: {other:?}")),
    }
}

fn run(c: &mut Connection, ep: &Episode, key: &str) -> Result<(), Failure> {
    let (cmds, at, expects) = plan(ep, key);
    let out = multi(c, &cmds);
    let slack = last_multi_ms() + 2;
    let mut exists = false;
    let mut pexpire = -2;
    let mut dump = Value::Nil;
    let mut adm: Vec<(i64, i64)> = Vec::new();
    // The latest admission's time: windows and logs decide as if time were still there.
    let mut latest = i64::MIN;
    for (i, (s, (now, e, del))) in ep.steps.iter().zip(&expects).enumerate() {
        let fail = |class: &'static str, msg: String| Failure {
            step: i,
            class,
            msg,
        };
        let j = at[i];
        if i > 0 && s.p != ep.steps[i - 1].p {
            // A rule change: the invariant restarts (what was spent before only restricts), and
            // so does the time a window state holds (a window's start under other numbers).
            adm.clear();
            latest = i64::MIN;
        }
        if *del {
            // The key's life ends: so do its bounds (after a clock step back, a TTL that ran
            // out frees the caller, as the contract allows).
            exists = false;
            pexpire = -2;
            dump = Value::Nil;
            adm.clear();
            latest = i64::MIN;
        }
        let (got, ex, pt, pe, du) = (
            &out[j],
            int(&out[j + 1]) == 1,
            int(&out[j + 2]),
            int(&out[j + 3]),
            &out[j + 4],
        );
        // The invariant first, on what the module admitted (not on what the model says).
        if let Ok(f) = fields(got) {
            let ok = if ep.kind == Kind::Throttle { 0 } else { 1 };
            if f.first() == Some(&ok) && !s.dry && s.cost.n() > 0 {
                let t = if matches!(ep.kind, Kind::Sliding | Kind::Fixed | Kind::Log) {
                    latest.max(*now)
                } else {
                    *now
                };
                latest = latest.max(t);
                adm.push((t, s.cost.n()));
                check_invariant(ep.kind, &s.p, &adm).map_err(|m| fail("invariant", m))?;
            }
        }
        match &e.reply {
            Reply::Error => {
                let t = error_text(got).unwrap_or_default();
                if !t.starts_with("ERR") {
                    return Err(fail("reply", format!("expected an ERR reply, got {got:?}")));
                }
            }
            Reply::Fields(want) => match fields(got) {
                Ok(f) if &f == want => {}
                Ok(f) => return Err(fail("reply", format!("reply {f:?}, model {want:?}"))),
                Err(m) => return Err(fail("reply", format!("{m}, model {want:?}"))),
            },
        }
        match e.write {
            Some((_, 0)) => {
                if ex {
                    return Err(fail(
                        "wrote",
                        "a re-timed state that is fresh again must delete the key".into(),
                    ));
                }
                exists = false;
                pexpire = pe;
                dump = du.clone();
            }
            Some((lo, hi)) => {
                if !ex {
                    return Err(fail(
                        "no key",
                        format!("admitted write but no key (model TTL {lo}..{hi} ms)"),
                    ));
                }
                if pt < (lo - slack).max(0) || pt > hi {
                    return Err(fail(
                        "pttl",
                        format!(
                            "PTTL {pt}, model {} (less at most {slack} ms: the MULTI's real time)",
                            if lo == hi {
                                lo.to_string()
                            } else {
                                format!("{lo}..{hi}")
                            }
                        ),
                    ));
                }
                exists = true;
                pexpire = pe;
                dump = du.clone();
            }
            None => {
                if ex != exists || pe != pexpire {
                    return Err(fail(
                        "wrote",
                        format!(
                            "a call that must not write changed the key: exists {exists} -> \
                             {ex}, PEXPIRETIME {pexpire} -> {pe}"
                        ),
                    ));
                }
                if *du != dump {
                    return Err(fail(
                        "wrote",
                        "a call that must not write changed the key's value (DUMP differs)".into(),
                    ));
                }
            }
        }
        if ex && pt < 0 {
            return Err(fail(
                "no ttl",
                format!("the key exists without a TTL (PTTL {pt})"),
            ));
        }
    }
    Ok(())
}

/// A failing episode made as short as the server still fails it: drop everything after the
/// failing step, then chunks of steps (their clock steps go to the next step, so the other
/// calls keep their times), down to single steps.
fn shrink(c: &mut Connection, ep: &Episode, first: Failure, tag: &str) -> (Episode, Failure) {
    let mut best = ep.clone();
    best.steps.truncate(first.step + 1);
    let mut fail = first;
    let mut tries = 0;
    let started = Instant::now();
    let mut chunk = best.steps.len() / 2;
    while chunk >= 1 && tries < 400 {
        let mut i = 0;
        let mut progress = false;
        while i < best.steps.len() && tries < 400 {
            let mut cand = best.clone();
            let end = (i + chunk).min(cand.steps.len());
            let dt: i64 = cand.steps[i..end].iter().map(|s| s.dt).sum();
            cand.steps.drain(i..end);
            if cand.steps.is_empty() {
                i += chunk;
                continue;
            }
            if i < cand.steps.len() {
                cand.steps[i].dt += dt;
            }
            tries += 1;
            let r = run(c, &cand, &format!("rm:shrink:{tag}:{tries}"));
            if let Some(f) = r.err().filter(|f| f.class == fail.class) {
                cand.steps.truncate(f.step + 1);
                best = cand;
                fail = f;
                progress = true;
            } else {
                i += chunk;
            }
        }
        if !progress {
            chunk /= 2;
        }
    }
    // Then plainer clock steps: each one 0 or 1 ms where the failure stays.
    let mut i = 0;
    while i < best.steps.len() && tries < 600 {
        for d in [0, 1] {
            if best.steps[i].dt <= d {
                continue;
            }
            let mut cand = best.clone();
            cand.steps[i].dt = d;
            tries += 1;
            let r = run(c, &cand, &format!("rm:shrink:{tag}:{tries}"));
            if let Some(f) = r.err().filter(|f| f.class == fail.class) {
                cand.steps.truncate(f.step + 1);
                best = cand;
                fail = f;
                break;
            }
        }
        i += 1;
    }
    eprintln!(
        "shrunk {} steps to {} in {tries} runs, {:.1} s",
        ep.steps.len(),
        best.steps.len(),
        started.elapsed().as_secs_f64()
    );
    (best, fail)
}

/// The episode as a MULTI block for redis-cli (a server loaded with test-clock yes), then
/// what the model expects of each call.
fn repro(ep: &Episode, fail: &Failure) -> String {
    let key = "k";
    let (cmds, at, expects) = plan(ep, key);
    let mut s = String::from("MULTI\n");
    for cmd in cmds.iter().filter(|c| c[0] != "DUMP") {
        let _ = writeln!(s, "{}", cmd.join(" "));
    }
    s.push_str(
        "EXEC\nThe model, call by call (DEL k emulates the key's expiry on the test clock):\n",
    );
    for (n, (now, e, del)) in expects.iter().enumerate() {
        let _ = write!(
            s,
            "  step {n} at {now}{}: {} -> {:?}",
            if *del { ", after DEL" } else { "" },
            cmds[at[n]].join(" "),
            e.reply
        );
        match e.write {
            Some((lo, hi)) if lo == hi => {
                let _ = write!(s, ", writes, PTTL {lo}");
            }
            Some((lo, hi)) => {
                let _ = write!(s, ", writes, PTTL {lo}..={hi}");
            }
            None => s.push_str(", writes nothing"),
        }
        if n == fail.step {
            let _ = write!(s, "   <-- FAILS: {}", fail.msg);
        }
        s.push('\n');
    }
    s
}

/// Runs the episodes; one (shrunk) failure report per algorithm.
fn run_all(c: &mut Connection, name: &str, eps: &[(u64, usize, Episode)]) -> Vec<String> {
    let mut reports: Vec<(Kind, &str, String)> = Vec::new();
    for (seed, n, ep) in eps {
        let key = format!("rm:{name}:{seed}:{n}");
        if let Err(f) = run(c, ep, &key) {
            if reports.iter().any(|r| r.0 == ep.kind && r.1 == f.class) {
                continue;
            }
            let (small, f) = shrink(c, ep, f, &format!("{name}:{seed}:{n}"));
            let s = &small.steps[f.step];
            let report = format!(
                "{} ({}): step {} of the shortest failing sequence ({} steps, rule {:?}, cost \
                 {:?}, dryrun {}): {}\n{}",
                ep.kind.command(),
                if name == "rand" {
                    format!("seed {seed} episode {n}; `RL_MODEL_SEED={seed}` replays it")
                } else {
                    format!("fixed scenario {name}:{n}")
                },
                f.step,
                small.steps.len(),
                s.p,
                s.cost,
                s.dry,
                f.msg,
                repro(&small, &f)
            );
            eprintln!("FAILURE {report}");
            reports.push((ep.kind, f.class, report));
        }
    }
    reports.into_iter().map(|r| r.2).collect()
}

#[test]
fn random_sequences_match_the_reference_model() {
    let started = Instant::now();
    let (_s, mut c) = Server::at_clock(T0);
    let mut eps = Vec::new();
    let mut calls = 0;
    for seed in seeds() {
        let mut rng = StdRng::seed_from_u64(seed);
        for n in 0..episodes_per_seed() {
            let ep = gen_episode(&mut rng, KINDS[n % KINDS.len()]);
            calls += ep.steps.len();
            eps.push((seed, n, ep));
        }
    }
    let reports = run_all(&mut c, "rand", &eps);
    eprintln!(
        "reference model: {} episodes, {calls} calls, seeds {:?}, {:.1} s",
        eps.len(),
        seeds(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        reports.is_empty(),
        "{} algorithm(s) disagree with the reference model:\n\n{}",
        reports.len(),
        reports.join("\n\n")
    );
}

/// Issue 24's report, as the model sees it: 1,000 back-to-back `CL.THROTTLE k 4 1001 1`
/// (emission interval 0.999 ms): the burst of 5 in one frozen millisecond and nothing more,
/// then about one per elapsed millisecond, never all of them; and the same at one per µs.
#[test]
fn sub_millisecond_throttle_limits_as_redis_cell() {
    let (_s, mut c) = Server::at_clock(T0);
    let mut eps = Vec::new();
    for (n, p) in [vec![4, 1001, 1], vec![0, 1_000_000, 1], vec![9, 2500, 1]]
        .into_iter()
        .enumerate()
    {
        let steps = (0..1000)
            .map(|i| Step {
                dt: i64::from(i >= 500 && i % 2 == 0),
                p: p.clone(),
                cost: Cost::Default,
                dry: false,
                style: 0,
                expire: true,
            })
            .collect();
        eps.push((
            0,
            n,
            Episode {
                kind: Kind::Throttle,
                start: T0 + 7,
                steps,
            },
        ));
    }
    // The run stops at the first algorithm that fails: run each rule on its own.
    let mut reports = Vec::new();
    for e in eps.chunks(1) {
        reports.extend(run_all(&mut c, "cl", e));
    }
    assert!(reports.is_empty(), "{}", reports.join("\n\n"));
}
