//! The algorithms over a sequence of requests, as one key sees them: any algorithm, any
//! valid parameters (changed on the way), costs, DRYRUN, RL.RELEASE / RL.RENEW, and a clock
//! that moves forward, jumps forward and jumps back. The key expires when its TTL (the
//! `reset_after_ms` of the last write) is reached, as on a server.
//!
//! Every call is checked by `rl_fuzz::call` (reply, no change without a write, `remaining`
//! exact, fresh after `reset_after_ms`, no block beyond the algorithm's reset time, codec
//! round trip). Across calls, within each stretch of time where the clock does not go back
//! and the rule does not change (a segment), admissions are counted, at the key's own time
//! (the effective now the algorithms decide at), against what the algorithm allows:
//! - GCRA / token bucket / queue: `sum(cost) * T <= tau + elapsed` (exact, in ticks);
//! - fixed and sliding window: at most `limit` per aligned window;
//! - sliding log: at most `limit` in any trailing window;
//! - leases: at most `limit` live at once; RELEASE / RENEW answer 1 exactly for live leases;
//!   tokens strictly increase, also across the key's expiry, as long as the clock has never
//!   gone back (the contract's promise; after a jump back, a key that expires before the
//!   clock catches up is re-created with tokens from the earlier time).
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use rl_fuzz::algo::lease::Token;
use rl_fuzz::algo::{MAX_SPAN_MS, US_PER_MS};
use rl_fuzz::rule::{Extra, Rule};
use rl_fuzz::state::State;
use rl_fuzz::{behind, call, cost, limit, num, own_us, round_trip, rule, rule_of, MAX_NOW_US};
use std::collections::HashMap;

/// What happened since the clock last went back or the rule last changed.
#[derive(Default)]
struct Segment {
    start: u64,
    /// The key's own time: the latest effective now of this segment.
    key_time: u64,
    /// Admissions at their effective now (the key's own time), with their cost.
    admitted: Vec<(u64, u64)>,
    /// Leases granted in this segment: token -> expiry (µs), None once released.
    leases: Vec<(Token, Option<u64>)>,
}

impl Segment {
    fn new(start: u64) -> Segment {
        Segment {
            start,
            ..Segment::default()
        }
    }

    fn check(&self, r: &Rule, now: u64) {
        let fail = |what: &str| {
            panic!(
                "{what}: rule {r:?} segment from {} to {now}: {:?}",
                self.start, self.admitted
            )
        };
        match r {
            Rule::Bucket(r) => {
                let p = &r.params;
                let total: u128 = self.admitted.iter().map(|&(_, c)| u128::from(c)).sum();
                let t = u128::from(p.period_ms) * 1_000_000;
                let elapsed = u128::from(now - self.start) * 1_000 * u128::from(p.count);
                if total * t > u128::from(p.burst) * t + elapsed {
                    fail("GCRA admitted more than burst + rate * elapsed");
                }
            }
            Rule::Window(r) => {
                let p = &r.params;
                let mut per: HashMap<u64, u64> = HashMap::new();
                for &(at, c) in &self.admitted {
                    *per.entry(at / US_PER_MS / p.span_ms).or_default() += c;
                }
                if per.values().any(|&n| n > p.limit) {
                    fail("a window admitted more than its limit");
                }
            }
            Rule::Log(p) => {
                let w = p.span_ms * US_PER_MS;
                let Some(&(t, _)) = self.admitted.last() else {
                    return;
                };
                let inside: u64 = self
                    .admitted
                    .iter()
                    .filter(|&&(at, _)| at + w > t)
                    .map(|&(_, c)| c)
                    .sum();
                if inside > p.limit {
                    fail("the trailing window admitted more than its limit");
                }
            }
            Rule::Acquire(p) => {
                let live = self
                    .leases
                    .iter()
                    .filter(|(_, e)| e.is_some_and(|e| e > self.key_time.max(now)))
                    .count() as u64;
                if live > p.limit {
                    fail("more live leases than the limit");
                }
            }
        }
    }
}

/// `FUZZ_TRACE=1` prints every step (for replaying a finding).
fn trace() -> bool {
    std::env::var_os("FUZZ_TRACE").is_some()
}

fn run(u: &mut Unstructured) -> Result<()> {
    let Some(mut r) = rule(u)? else {
        return Ok(());
    };
    if trace() {
        eprintln!("rule {r:?}");
    }
    let algo = r.algo();
    let mut now = num(u, MAX_NOW_US)?;
    let mut s: Option<State> = None;
    // The key's expiry on this clock (µs): set by every write to now + reset_after_ms.
    let mut expires_at = 0u64;
    let mut seg = Segment::new(now);
    // The clock has not gone back in this run (tokens must then strictly increase).
    let mut monotone = true;
    let mut last_token: Option<Token> = None;
    let steps = u.int_in_range(1..=64)?;
    for _ in 0..steps {
        if u.is_empty() {
            break;
        }
        let op = u.int_in_range(0u8..=15)?;
        match op {
            // A jump anywhere (back or forward).
            0 => {
                let to = num(u, MAX_NOW_US)?;
                if to < now {
                    seg = Segment::new(to);
                    monotone = false;
                }
                now = to;
                continue;
            }
            // A small jump back.
            1 => {
                now = now.saturating_sub(num(u, 100_000_000)?);
                seg = Segment::new(now);
                monotone = false;
                continue;
            }
            // New numbers for the same key.
            2 => {
                if let Some(nr) = rule_of(u, algo)? {
                    r = nr;
                    seg = Segment::new(now);
                }
                continue;
            }
            _ => {}
        }
        // Time moves forward a little before every request.
        let step = match u.int_in_range(0u8..=3)? {
            0 => 0,
            1 => num(u, 2_000)?,
            2 => num(u, 2_000_000)?,
            _ => num(u, MAX_SPAN_MS * US_PER_MS)?,
        };
        now = now.saturating_add(step).min(MAX_NOW_US);
        if s.is_some() && now >= expires_at {
            s = None; // the key's TTL ran out
            if trace() {
                eprintln!("now {now}: the key expired");
            }
        }
        match (op, &r) {
            (3 | 4, Rule::Acquire(p)) => {
                // RL.RELEASE (3) / RL.RENEW (4) of a token granted earlier (or a made-up one).
                let tok = if !seg.leases.is_empty() && u.arbitrary::<bool>()? {
                    seg.leases[u.choose_index(seg.leases.len())?].0
                } else {
                    Token {
                        ms: num(u, u64::MAX)?,
                        seq: num(u, u64::MAX)?,
                    }
                };
                let lease_ms = num(u, MAX_SPAN_MS)?.max(1);
                let Some(State::Concurrency(mut c)) = s.clone() else {
                    continue; // no key: RELEASE / RENEW answer 0 and write nothing
                };
                let before = c.clone();
                let at = own_us(&State::Concurrency(c.clone()), now);
                seg.key_time = seg.key_time.max(at);
                let done = if op == 3 {
                    c.leases.release(tok, now)
                } else {
                    c.leases.renew(tok, lease_ms, now)
                };
                let model = seg.leases.iter_mut().rev().find(|(t, _)| *t == tok);
                if let Some((_, e)) = model {
                    let live = e.is_some_and(|e| e > at);
                    assert_eq!(done, live, "RELEASE/RENEW of {tok} at {now}: {before:?}");
                    if done {
                        *e = if op == 3 {
                            None
                        } else {
                            Some(at + lease_ms * US_PER_MS)
                        };
                    }
                }
                if !done {
                    assert_eq!(c, before, "RELEASE/RENEW answered 0 but changed the state");
                    continue;
                }
                let ttl = c.leases.ttl_ms(now);
                let most = c.leases.max_lease_ms.max(p.span_ms).max(lease_ms);
                if !behind(&State::Concurrency(before.clone()), now) {
                    assert!(ttl <= most, "TTL {ttl} after RELEASE/RENEW: {c:?}");
                }
                let st = round_trip(&State::Concurrency(c));
                if ttl == 0 {
                    // Nothing left to keep (no live lease, the last token's ms is past):
                    // the command deletes the key, which is then fresh.
                    s = None;
                    continue;
                }
                s = Some(st);
                expires_at = now.saturating_add(ttl.saturating_mul(US_PER_MS));
                seg.check(&r, now);
            }
            _ => {
                let c = cost(u, &r)?;
                let dry = u.ratio(1, 5)?;
                let at = s.as_ref().map_or(now, |st| own_us(st, now));
                let out = call(&r, &mut s, c, now, !dry);
                if trace() {
                    eprintln!("now {now} cost {c} dry {dry}: {out:?}");
                }
                if out.wrote {
                    expires_at = now.saturating_add(out.decision.reset_after_ms.saturating_mul(US_PER_MS));
                }
                if out.decision.allowed && !dry {
                    seg.key_time = seg.key_time.max(at);
                    seg.admitted.push((at, c));
                    if let Extra::Token(Some(t)) = out.extra {
                        if let (Some(prev), true) = (last_token, monotone) {
                            assert!(t > prev, "token {t} after {prev} (clock never gone back)");
                        }
                        last_token = Some(t);
                        if let Rule::Acquire(p) = r {
                            seg.leases.push((t, Some(at + p.span_ms * US_PER_MS)));
                        }
                    }
                }
                seg.check(&r, now);
                assert_eq!(limit(&r), out.decision.limit);
            }
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
