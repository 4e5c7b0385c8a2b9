//! The module's pure layers, compiled in from `../src` by path, and the checks the fuzz
//! targets share.
//!
//! Only `algo/` (with the algorithm table), `ops.rs`, `state.rs`, `rule.rs` and `replay.rs` are included: they use nothing from Redis (the
//! README's layout promises it), so the fuzzers need neither a server nor the Redis
//! allocator the module's own rlib installs as the global allocator.
//!
//! Every check here is a property the contract (`docs/commands.md`) promises for
//! one call of a rate command: reply shape and bounds, "refused / dry-run changes nothing",
//! `remaining` is exact, the state is fresh again after `reset_after_ms`, a reply counts
//! beyond the algorithm's own reset time only what the clock must catch up to the key's own
//! time (or a debt a rule change kept), and every state the algorithms
//! produce survives the codec (RDB, replication) unchanged.

#![allow(dead_code, clippy::all)]

#[path = "../../src/algo/mod.rs"]
pub mod algo;
#[path = "../../src/ops.rs"]
pub mod ops;
#[path = "../../src/options.rs"]
pub mod options;
#[path = "../../src/replay.rs"]
pub mod replay;
#[path = "../../src/rule.rs"]
pub mod rule;
#[path = "../../src/state.rs"]
pub mod state;

use algo::{lease, window, Decision, MAX_SPAN_MS, MAX_TIME_MS, US_PER_MS};
use arbitrary::{Result, Unstructured};
use rule::{BucketAlgo, BucketRule, Extra, Outcome, Rule, WindowAlgo, WindowRule};
use state::{Algo, State};

/// Largest module time, µs (the module clock is clamped to it; the test clock refuses more).
pub const MAX_NOW_US: u64 = MAX_TIME_MS * US_PER_MS;
/// Largest RL.LOG limit the fuzzers use (the config allows up to 10^6; kept small for speed).
pub const LOG_LIMIT: u64 = 1_000;
/// Largest RL.ACQUIRE limit the fuzzers use.
pub const ACQUIRE_LIMIT: u64 = 64;

/// A number in `0..=max`, biased towards the edges where arithmetic breaks.
pub fn num(u: &mut Unstructured, max: u64) -> Result<u64> {
    let edges = [
        0,
        1,
        2,
        3,
        7,
        10,
        999,
        1_000,
        1_001,
        60_000,
        3_600_000,
        MAX_SPAN_MS - 1,
        MAX_SPAN_MS,
        MAX_SPAN_MS + 1,
        MAX_TIME_MS,
        MAX_NOW_US,
        u64::MAX / 2,
        u64::MAX - 1,
        u64::MAX,
    ];
    let v = match u.int_in_range(0u8..=7)? {
        0..=1 => u.int_in_range(0..=16)?,
        2..=3 => edges[u.choose_index(edges.len())?],
        4 => u.int_in_range(0..=100_000)?,
        _ => u.arbitrary::<u64>()?,
    };
    Ok(v.min(max))
}

/// Every algorithm a rule can have.
pub const ALGOS: [Algo; 7] = [
    Algo::Gcra,
    Algo::TokenBucket,
    Algo::Queue,
    Algo::Sliding,
    Algo::Fixed,
    Algo::Log,
    Algo::Concurrency,
];

/// A rule of any algorithm with parameters the command layer would accept, or `None`.
pub fn rule(u: &mut Unstructured) -> Result<Option<Rule>> {
    let algo = ALGOS[u.choose_index(ALGOS.len())?];
    rule_of(u, algo)
}

/// A rule of `algo` with parameters from `u` the command layer would accept, or `None`.
pub fn rule_of(u: &mut Unstructured, algo: Algo) -> Result<Option<Rule>> {
    let (a, b, c) = (num(u, u64::MAX)?, num(u, u64::MAX)?, num(u, u64::MAX)?);
    // The command layer parses signed 64-bit integers and refuses anything below 1.
    let (a, b, c) = (
        a.min(i64::MAX as u64),
        b.min(i64::MAX as u64),
        c.min(i64::MAX as u64),
    );
    // The module's own rule constructor, with the numbers in its row's order; the limit
    // capped as the max-limit configs cap it.
    let numbers = match algo {
        Algo::Gcra | Algo::TokenBucket => [a, b, c],
        Algo::Log => [a.min(LOG_LIMIT), c, 0],
        Algo::Concurrency => [a.min(ACQUIRE_LIMIT), c, 0],
        _ => [a, c, 0],
    };
    Ok(Rule::new(algo, numbers).ok())
}

/// A valid cost for `r`: `1..=limit` (always 1 for RL.ACQUIRE, which takes no COST).
pub fn cost(u: &mut Unstructured, r: &Rule) -> Result<u64> {
    Ok(match r {
        Rule::Acquire(_) => 1,
        _ => num(u, limit(r))?.max(1),
    })
}

/// The rule's `limit` (burst, capacity or limit).
pub fn limit(r: &Rule) -> u64 {
    r.limit()
}

/// The algorithm's own reset time in ms under `r`: the longest any state can block a caller
/// (and the longest TTL a call may set). For leases: the longest lease ever granted.
pub fn bound_ms(r: &Rule, before: &State) -> u64 {
    match r {
        Rule::Bucket(BucketRule { params: p, .. }) => {
            let num = u128::from(p.burst) * u128::from(p.period_ms);
            num.div_ceil(u128::from(p.count)) as u64
        }
        Rule::Window(w) if w.algo == WindowAlgo::Fixed => w.params.span_ms,
        Rule::Log(p) => p.span_ms,
        Rule::Window(w) => 2 * w.params.span_ms,
        Rule::Acquire(p) => match before.own() {
            Some(State::Concurrency(c)) => c.leases.max_lease_ms.max(p.span_ms),
            _ => p.span_ms,
        },
    }
}

/// The key's own time (µs) as the algorithms read it, at `now`: the effective now of a
/// window (its start), a log (its newest entry) or leases (the last token's ms); `now` for
/// the GCRA family (its admissions are always decided at `now`).
pub fn own_us(s: &State, now: u64) -> u64 {
    match s.own() {
        Some(State::Sliding(w) | State::Fixed(w)) => now.max(w.counters.start_ms * US_PER_MS),
        Some(State::Log(l)) => l.log.entries().back().map_or(now, |b| b.max(now)),
        Some(State::Concurrency(c)) => now.max(c.leases.last.ms.saturating_mul(US_PER_MS)),
        _ => now,
    }
}

/// The clock reads earlier than the key's own time (replies then count the catch-up).
pub fn behind(s: &State, now: u64) -> bool {
    // A key holding only a pause has no time of its own.
    let Some(s) = s.own() else { return false };
    match s {
        State::Gcra(b) | State::TokenBucket(b) | State::Queue(b) => {
            let p = &b.params;
            let tau = u128::from(p.burst) * u128::from(p.period_ms) * 1_000_000;
            let tat = u128::from(b.tat.ns) * u128::from(p.count) + u128::from(b.tat.frac);
            tat.saturating_sub(tau) > u128::from(now) * 1000 * u128::from(p.count)
        }
        // Leases: also a lease renewed at a later time than the last token's, or one a
        // crafted payload holds expiring later than the longest lease from now.
        State::Concurrency(c) => {
            let latest = now.saturating_add(c.leases.max_lease_ms.saturating_mul(US_PER_MS));
            own_us(s, now) > now
                || c.leases.horizon_us > latest
                || c.leases.leases.iter().any(|l| l.expiry_us > latest)
        }
        _ => own_us(s, now) > now,
    }
}

/// A GCRA-family state written under other numbers (a kept debt may exceed the new bound).
pub fn rule_changed(r: &Rule, s: &State) -> bool {
    match (r, s.own()) {
        (Rule::Bucket(r), Some(State::Gcra(b) | State::TokenBucket(b) | State::Queue(b))) => {
            r.params != b.params && b.tat != Default::default()
        }
        _ => false,
    }
}

/// The last token of a concurrency state.
pub fn last_token(s: &State) -> Option<lease::Token> {
    match s.own() {
        Some(State::Concurrency(c)) => Some(c.leases.last),
        _ => None,
    }
}

/// The state as the module would store it, read back: what RDB, DEBUG RELOAD and a replica
/// (RL._APPLY) hold after this write. Panics if the codec refuses a state the algorithms made.
pub fn round_trip(s: &State) -> State {
    let enc = s.encode();
    let bytes = enc.as_slice();
    match State::decode(bytes) {
        Ok(back) => {
            assert_eq!(&back, s, "codec round trip changed the state");
            assert_eq!(back.encode().as_slice(), bytes, "re-encoding differs");
            back
        }
        Err(e) => panic!(
            "the codec refuses a state the algorithms produced ({e:?}): {s:?}\n\
             (RDB load, DEBUG RELOAD and replicas would lose or refuse this key)"
        ),
    }
}

/// Any write a command may make to `s` (a state of `algo`), from the fuzzer's bytes: a rate
/// request of the state's algorithm with any options, a lease operation naming one of its
/// tokens, or a CL.THROTTLE; None when the bytes give no valid one.
pub fn write_of(u: &mut Unstructured, algo: Algo, s: &State) -> Result<Option<ops::Write>> {
    use replay::Op;
    use rule::{Ask, Request};
    let now_us = num(u, MAX_NOW_US)?;
    Ok(Some(match u.int_in_range(0u8..=4)? {
        4 => {
            if u.arbitrary()? {
                ops::Write::Resume { now_us }
            } else {
                let probe_ms = if u.arbitrary()? {
                    Some(num(u, MAX_SPAN_MS)?.max(1))
                } else {
                    None
                };
                ops::Write::Pause {
                    ms: num(u, MAX_SPAN_MS)?.max(1),
                    probe_ms,
                    now_us,
                }
            }
        }
        0 | 1 => {
            let Some(rule) = rule_of(u, algo)? else {
                return Ok(None);
            };
            let rule = match rule {
                Rule::Window(w) if u.arbitrary()? => {
                    let slot = u.int_in_range(0u16..=16_383)?;
                    let offset_ms = window::stagger_ms(slot, w.params.span_ms);
                    Rule::Window(WindowRule { offset_ms, ..w })
                }
                r => r,
            };
            let lim = limit(&rule);
            let n = num(u, lim)?;
            let req = if matches!(rule, Rule::Acquire(_)) {
                Request::spend(1, true)
            } else {
                let partial = u.arbitrary::<bool>()?;
                let ask = if u.arbitrary()? && n > 0 {
                    Ask::Refund(n)
                } else {
                    Ask::Spend(n)
                };
                Request {
                    ask,
                    partial: partial && n > 0,
                    reserve: if partial { 0 } else { num(u, lim - 1)? },
                    block_ms: if u.arbitrary()? {
                        num(u, MAX_SPAN_MS)?.max(1)
                    } else {
                        0
                    },
                    probe: u.arbitrary()? && !matches!(ask, Ask::Refund(_)),
                    commit: true,
                }
            };
            ops::Write::Op(Op::Request { rule, req, now_us })
        }
        2 => {
            let token = match s {
                State::Concurrency(c) if !c.leases.leases.is_empty() => {
                    let i = u.int_in_range(0..=c.leases.leases.len() - 1)?;
                    c.leases
                        .leases
                        .iter()
                        .nth(i)
                        .map(|l| l.token)
                        .unwrap_or_default()
                }
                _ => lease::Token {
                    ms: num(u, u64::MAX)?,
                    seq: num(u, u64::MAX)?,
                },
            };
            ops::Write::Op(if u.arbitrary()? {
                Op::Release { token, now_us }
            } else {
                Op::Renew {
                    token,
                    lease_ms: num(u, MAX_SPAN_MS)?.max(1),
                    now_us,
                }
            })
        }
        _ => {
            let (b, c, p) = (num(u, u64::MAX)?, num(u, u64::MAX)?, num(u, u64::MAX)?);
            let Ok(p) = algo::cell::Params::new(b, c, p) else {
                return Ok(None);
            };
            ops::Write::Throttle {
                p,
                quantity: num(u, u64::MAX)?,
                now_us,
            }
        }
    }))
}

/// Runs one request like the command layer does: on `s` (the stored state; the rule's fresh
/// state when the key is empty), `commit` = not DRYRUN. Checks every per-call property and
/// returns the outcome.
pub fn call(r: &Rule, s: &mut Option<State>, cost: u64, now: u64, commit: bool) -> Outcome {
    let before = s.clone().unwrap_or_else(|| r.fresh());
    let mut cur = before.clone();
    let out = r.hit(&mut cur, cost, now, commit);
    check(r, &before, &cur, cost, now, commit, &out);
    if out.wrote {
        *s = Some(round_trip(&cur));
    }
    out
}

/// The properties of one call (see the module doc).
pub fn check(
    r: &Rule,
    before: &State,
    after: &State,
    cost: u64,
    now: u64,
    commit: bool,
    out: &Outcome,
) {
    let d = &out.decision;
    let lim = limit(r);
    let bound = bound_ms(r, before);
    let ctx = || {
        format!("rule {r:?} cost {cost} now {now} commit {commit}\nbefore {before:?}\nafter {after:?}\n{out:?}")
    };
    assert_eq!(d.limit, lim, "limit field: {}", ctx());
    assert!(d.remaining <= lim, "remaining above limit: {}", ctx());
    if d.allowed {
        assert_eq!(d.retry_after_ms, 0, "admitted with a retry: {}", ctx());
    } else {
        assert!(d.retry_after_ms >= 1, "refused without a retry: {}", ctx());
    }
    // Beyond the algorithm's own reset time only by what the clock must catch up (the
    // clock behind the key's own time) or a debt a rule change kept.
    // A BLOCK in force (a crafted payload may hold one far ahead) refuses until its end.
    // So does a pause (RL.PAUSE), or its probe mode after its end.
    let paused = before.pause().is_some_and(|p| p.refusing_us(now).is_some());
    let blocked = before.blocked_until_us() > now || paused;
    if !(behind(before, now) || rule_changed(r, before) || blocked) {
        assert!(
            d.retry_after_ms <= bound,
            "retry_after_ms beyond the algorithm's reset time {bound}: {}",
            ctx()
        );
        assert!(
            d.reset_after_ms <= bound,
            "reset_after_ms beyond the algorithm's reset time {bound}: {}",
            ctx()
        );
    }
    if !out.wrote {
        assert_eq!(before, after, "state changed without a write: {}", ctx());
    }
    if !commit {
        assert!(!out.wrote, "DRYRUN wrote: {}", ctx());
    }
    if out.wrote {
        assert!(
            d.reset_after_ms >= 1,
            "a write with reset_after_ms 0 (key without TTL or deleted at once): {}",
            ctx()
        );
    }
    match (r, out.extra) {
        (Rule::Bucket(BucketRule { algo: BucketAlgo::Queue, params: p }), Extra::Delay(delay)) => {
            if d.allowed {
                let most = (p.burst - cost).saturating_mul(p.period_ms);
                assert!(
                    delay <= most,
                    "queue delay above (capacity - cost) * interval: {}",
                    ctx()
                );
                assert!(
                    delay <= d.reset_after_ms,
                    "queue delay beyond reset: {}",
                    ctx()
                );
            } else {
                assert_eq!(delay, 0, "refused with a delay: {}", ctx());
            }
        }
        (Rule::Acquire(_), Extra::Token(t)) => {
            assert_eq!(t.is_some(), d.allowed, "token iff admitted: {}", ctx());
            if let (Some(t), Some(prev)) = (t, last_token(before)) {
                // Known and reported: a crafted state whose last token has seq u64::MAX
                // (unreachable by real use: 2^64 acquisitions in one ms) gets it again.
                let saturated = prev.seq == u64::MAX && t == prev;
                assert!(t > prev || saturated, "token not increasing: {}", ctx());
            }
            if out.wrote && d.allowed {
                assert_eq!(last_token(after), t, "stored last token: {}", ctx());
            }
        }
        (Rule::Bucket(BucketRule { algo: BucketAlgo::Queue, .. }), _) | (Rule::Acquire(_), _) => {
            panic!("missing extra field: {}", ctx())
        }
        (_, Extra::None) => {}
        _ => panic!("unexpected extra field: {}", ctx()),
    }
    // Known and reported edges of crafted states, where the probes below do not hold:
    // - under a BLOCK in force a request stores nothing, so a rule change is re-timed again
    //   at every later call, each rounding up (up to 1 ms later than reset_after_ms said);
    // - a last token within `limit` of seq u64::MAX (2^64 grants in one ms: unreachable by
    //   real use) moves the grants to the next ms, where a 1 ms lease may have expired.
    let retimed_under_block = blocked && rule_changed(r, before);
    let seq_at_end = last_token(before).is_some_and(|t| t.seq > u64::MAX - lim.saturating_add(2));
    // A probe-mode pause refuses until RL.RESUME: the key is fresh after reset_after_ms
    // because it expires then (its TTL), which a state alone does not model.
    let probe_mode = after.pause().is_some_and(|p| p.probe_ms > 0);
    if commit && !retimed_under_block && !seq_at_end && !probe_mode {
        probe_remaining(r, after, d, now, &ctx);
        probe_fresh_at(r, after, now, d.reset_after_ms, "reset_after_ms", &ctx);
    }
}

/// `remaining` more cost-1 requests are admitted at the same instant, and no more.
fn probe_remaining(r: &Rule, after: &State, d: &Decision, now: u64, ctx: &dyn Fn() -> String) {
    let mut s = after.clone();
    if let Rule::Acquire(_) = r {
        for i in 0..d.remaining {
            let o = r.hit(&mut s, 1, now, true);
            assert!(
                o.decision.allowed,
                "probe {i} of remaining {} refused: {}",
                d.remaining,
                ctx()
            );
        }
    } else if d.remaining > 0 {
        let o = r.hit(&mut s, d.remaining, now, true);
        assert!(
            o.decision.allowed,
            "a request of cost remaining={} refused right after: {}",
            d.remaining,
            ctx()
        );
    }
    let o = r.hit(&mut s, 1, now, true);
    assert!(
        !o.decision.allowed,
        "more than remaining={} admitted right after: {}",
        d.remaining,
        ctx()
    );
}

/// At `now + ms` the state is equivalent to a fresh key: a full-limit request is admitted
/// (for leases: `limit` acquisitions).
pub fn probe_fresh_at(
    r: &Rule,
    after: &State,
    now: u64,
    ms: u64,
    what: &str,
    ctx: &dyn Fn() -> String,
) {
    let t = now.saturating_add(ms.saturating_mul(US_PER_MS));
    let mut s = after.clone();
    let lim = limit(r);
    if let Rule::Acquire(_) = r {
        for i in 0..lim {
            let o = r.hit(&mut s, 1, t, true);
            assert!(
                o.decision.allowed,
                "acquire {i} of {lim} refused {what} later: {}",
                ctx()
            );
        }
    } else {
        let o = r.hit(&mut s, lim, t, true);
        assert!(
            o.decision.allowed,
            "not fresh {what}={ms} ms later: {o:?}\n{}",
            ctx()
        );
    }
}
