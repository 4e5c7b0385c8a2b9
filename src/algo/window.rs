//! Window counters: the fixed window counter, and the sliding window counter (two fixed
//! windows, the previous one weighted by how much of it still overlaps the trailing window).
//!
//! Windows are aligned to multiples of `window_ms` since the Unix epoch. With `W` the window
//! in µs, `e` the µs elapsed in the current window, `prev` and `cur` the two counts:
//! `estimate * W = prev * (W - e) + cur * W`, and a request of cost `c` is admitted iff
//! `prev * (W - e) + (cur + c) * W <= limit * W`: exact integers, no fractions.
//!
//! Time never runs backwards for a key: a state counted in window `W+1` and read at a time
//! in `W` is decided as of the start of `W+1` (its window start is the key's own time), so
//! no window is counted afresh; retry and reset still count from the real now. A refusal
//! writes nothing.

use super::algorithm::{rule_info, Algorithm, Spent};
use super::codec::{DecodeError, Encoded, InfoValue, Reader};
use super::request::Extra;
use super::table::Algo;
use super::{div_ceil, sat_u64, Decision, ParamError, Quota, SpanName, MAX_TIME_MS, US_PER_MS};

/// A window rule: at most `limit` per window of `span_ms`.
pub type Params = Quota<WindowSpan>;

/// The span of a window rule is its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpan {}

impl SpanName for WindowSpan {
    const NAME: &'static str = "window_ms";
}

impl Params {
    #[inline]
    fn w_us(&self) -> u64 {
        self.span_ms * US_PER_MS
    }
}

/// Stored counters: `cur` for the window starting at `start_ms`, `prev` for the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub start_ms: u64,
    pub prev: u64,
    pub cur: u64,
}

/// The effective now for stored counters: never before the start of the window the key's
/// latest write was counted in (time never runs backwards for a key). The window start is
/// the only time a window state keeps; a sliding window read in an earlier window is
/// therefore read at the start of its own current window, its most restrictive instant.
#[inline]
fn effective_us(c: Option<&Counters>, now_us: u64) -> u64 {
    c.map_or(now_us, |c| now_us.max(c.start_ms.saturating_mul(US_PER_MS)))
}

/// The counters as seen at `now_us` under `p`: rolled forward to the window containing the
/// effective now. Each stored count moves to the window (of the new length) that contains
/// the start of the window it was counted in, so a changed `window_ms` keeps what was
/// counted.
pub fn current(c: Option<&Counters>, p: &Params, off_ms: u64, now_us: u64) -> Counters {
    roll(c, p, off_ms, effective_us(c, now_us))
}

/// The start (ms) of the window containing `at_ms` when windows start at multiples of `w`
/// plus `off_ms` (`off_ms < w`; 0 unless STAGGER). Before the first such start (a test
/// clock near the epoch) it is 0.
#[inline]
fn window_start(at_ms: u64, w: u64, off_ms: u64) -> u64 {
    let off = off_ms % w;
    at_ms.saturating_sub((at_ms % w + w - off) % w)
}

/// STAGGER's offset (ms) for a key in Redis Cluster hash slot `slot` (0..16384):
/// `slot * window_ms / 16384`, so callers' windows do not all start at the same instant.
pub fn stagger_ms(slot: u16, window_ms: u64) -> u64 {
    sat_u64(u128::from(slot) * u128::from(window_ms) / 16_384)
}

/// The counters rolled to the window containing `at_us` (never before the stored window).
fn roll(c: Option<&Counters>, p: &Params, off_ms: u64, at_us: u64) -> Counters {
    let w = p.span_ms;
    let at_ms = at_us / US_PER_MS;
    let start = window_start(at_ms, w, off_ms);
    let mut out = Counters {
        start_ms: start,
        prev: 0,
        cur: 0,
    };
    let Some(c) = c else { return out };
    let prev_start = c.start_ms.saturating_sub(1);
    for (at, n) in [(c.start_ms, c.cur), (prev_start, c.prev)] {
        if n == 0 {
            continue;
        }
        // `ws <= start`: the stored windows start at or before the effective now.
        let ws = window_start(at, w, off_ms);
        if ws >= start {
            out.cur = out.cur.saturating_add(n);
        } else if ws + w == start {
            out.prev = out.prev.saturating_add(n);
        }
    }
    out
}

/// `estimate * W` for counters positioned `e` µs into their window.
#[inline]
fn weighted(c: &Counters, w: u64, e: u64) -> u128 {
    u128::from(c.prev) * u128::from(w - e) + u128::from(c.cur) * u128::from(w)
}

/// ms, rounded up, from `now_us` to the instant `at_us` (0 if not after now).
#[inline]
fn ms_until(at_us: u128, now_us: u64) -> u64 {
    sat_u64(div_ceil(
        at_us.saturating_sub(u128::from(now_us)),
        u128::from(US_PER_MS),
    ))
}

/// Time to fresh: end of the next window if the current count is non-zero, else end of the
/// current window if the previous count is, else 0.
fn sliding_reset(c: &Counters, w: u64, now_us: u64) -> u64 {
    let start_us = u128::from(c.start_ms) * u128::from(US_PER_MS);
    if c.cur > 0 {
        ms_until(start_us + 2 * u128::from(w), now_us)
    } else if c.prev > 0 {
        ms_until(start_us + u128::from(w), now_us)
    } else {
        0
    }
}

/// Decides a request of `cost` (validated `1..=limit`) at `now_us` on a fixed or a sliding
/// window counter, as of the effective now. Returns the decision and, when admitted, the
/// counters to store. Retry and reset count from `now_us` (they include the time the clock
/// must catch up).
pub fn decide(
    c: Option<&Counters>,
    p: &Params,
    off_ms: u64,
    fixed_window: bool,
    cost: u64,
    now_us: u64,
) -> (Decision, Option<Counters>) {
    let at_us = effective_us(c, now_us);
    let c = roll(c, p, off_ms, at_us);
    if fixed_window {
        fixed(c, p, cost, now_us)
    } else {
        sliding(c, p, at_us, cost, now_us)
    }
}

/// Sliding window counter, on the counters `c` of the window containing `at_us`, the
/// effective now.
fn sliding(
    mut c: Counters,
    p: &Params,
    at_us: u64,
    cost: u64,
    now_us: u64,
) -> (Decision, Option<Counters>) {
    let w = p.w_us();
    let start_us = c.start_ms * US_PER_MS;
    let e = at_us - start_us;
    let cap = u128::from(p.limit) * u128::from(w);
    let est = weighted(&c, w, e);
    let wanted = u128::from(cost) * u128::from(w);
    if est + wanted <= cap {
        c.cur = c.cur.saturating_add(cost);
        let d = Decision {
            allowed: true,
            limit: p.limit,
            remaining: sat_u64((cap - (est + wanted)) / u128::from(w)),
            retry_after_ms: 0,
            reset_after_ms: sliding_reset(&c, w, now_us),
        };
        return (d, Some(c));
    }
    // Refused: find the first µs at which the estimate leaves room for `cost`.
    let room_at: u128 = match p.limit.checked_sub(c.cur.saturating_add(cost)) {
        // Still in this window: prev * (W - e') <= room * W  <=>  e' >= W - floor(room*W/prev).
        Some(room) if c.prev > 0 => {
            let keep = (u128::from(room) * u128::from(w) / u128::from(c.prev)).min(u128::from(w));
            u128::from(start_us) + u128::from(w) - keep
        }
        // Next window: prev' = cur, cur' = 0: cur * (W - e') <= (limit - cost) * W.
        _ => {
            let room = u128::from(p.limit.saturating_sub(cost));
            let keep = if c.cur == 0 {
                u128::from(w)
            } else {
                (room * u128::from(w) / u128::from(c.cur)).min(u128::from(w))
            };
            u128::from(start_us) + 2 * u128::from(w) - keep
        }
    };
    let d = Decision {
        allowed: false,
        limit: p.limit,
        remaining: sat_u64(cap.saturating_sub(est) / u128::from(w)),
        retry_after_ms: ms_until(room_at, now_us).max(1),
        reset_after_ms: sliding_reset(&c, w, now_us),
    };
    (d, None)
}

/// Fixed window counter, on the counters `c` of the window of the effective now: admitted
/// iff `count + cost <= limit`. Only `cur` is used. Retry and reset are both the time (from
/// `now_us`) to that window's end. A refusal stores nothing.
fn fixed(mut c: Counters, p: &Params, cost: u64, now_us: u64) -> (Decision, Option<Counters>) {
    c.prev = 0;
    let end = u128::from(c.start_ms + p.span_ms) * u128::from(US_PER_MS);
    let to_end = ms_until(end, now_us);
    let used = c.cur.saturating_add(cost);
    if used <= p.limit {
        c.cur = used;
        let d = Decision {
            allowed: true,
            limit: p.limit,
            remaining: p.limit - used,
            retry_after_ms: 0,
            reset_after_ms: if used > 0 { to_end } else { 0 },
        };
        return (d, Some(c));
    }
    let d = Decision {
        allowed: false,
        limit: p.limit,
        remaining: p.limit.saturating_sub(c.cur),
        retry_after_ms: to_end,
        reset_after_ms: if c.cur > 0 { to_end } else { 0 },
    };
    (d, None)
}

/// `REFUND n` on a window counter at `now_us`: the counters rolled to the window of the
/// effective now, with `n` units given back, never below 0: the current window's count
/// first, then (sliding only) the previous one's. Read the reply with a cost-0 request.
pub fn refund(
    c: Option<&Counters>,
    p: &Params,
    off_ms: u64,
    fixed_window: bool,
    n: u64,
    now_us: u64,
) -> Counters {
    let mut c = roll(c, p, off_ms, effective_us(c, now_us));
    if fixed_window {
        c.prev = 0;
    }
    let from_cur = n.min(c.cur);
    c.cur -= from_cur;
    c.prev -= (n - from_cur).min(c.prev);
    c
}

/// A window counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowAlgo {
    Sliding,
    Fixed,
}

/// A window-counter rule: which counter, its numbers, and its windows' offset in ms
/// (`STAGGER`; 0 for windows aligned to the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowRule {
    pub algo: WindowAlgo,
    pub params: Params,
    pub offset_ms: u64,
}

/// A window-counter state: the rule last applied and the counters.
///
/// Codec (sliding 3, fixed 4): limit, window_ms, window_start_ms, previous_count,
/// current_count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub params: Params,
    pub counters: Counters,
}

impl Window {
    /// The codec's five fields: limit, window_ms, the current window's start, the previous
    /// and current counts.
    #[inline]
    pub fn fields(&self) -> [u64; 5] {
        let (p, c) = (&self.params, &self.counters);
        [p.limit, p.span_ms, c.start_ms, c.prev, c.cur]
    }
}

impl Algorithm for Window {
    type Rule = WindowRule;

    fn rule(algo: Algo, numbers: [u64; 3]) -> Result<WindowRule, ParamError> {
        let [x, y, _] = numbers;
        Ok(WindowRule {
            algo: if algo == Algo::Fixed {
                WindowAlgo::Fixed
            } else {
                WindowAlgo::Sliding
            },
            params: Params::new(x, y)?,
            offset_ms: 0,
        })
    }

    #[inline]
    fn algo(rule: &WindowRule) -> Algo {
        match rule.algo {
            WindowAlgo::Sliding => Algo::Sliding,
            WindowAlgo::Fixed => Algo::Fixed,
        }
    }

    #[inline]
    fn limit(rule: &WindowRule) -> u64 {
        rule.params.limit
    }

    #[inline]
    fn fresh(rule: &WindowRule) -> Window {
        Window {
            params: rule.params,
            counters: Counters::default(),
        }
    }

    #[inline]
    fn spend(&mut self, rule: &WindowRule, cost: u64, now_us: u64, commit: bool) -> Spent {
        let (p, off) = (&rule.params, rule.offset_ms);
        let fixed = rule.algo == WindowAlgo::Fixed;
        let (d, next) = decide(Some(&self.counters), p, off, fixed, cost, now_us);
        match next {
            Some(counters) if commit => {
                *self = Window {
                    params: *p,
                    counters,
                };
                (d, Extra::None, true)
            }
            _ => (d, Extra::None, false),
        }
    }

    fn refund(&mut self, rule: &WindowRule, n: u64, now_us: u64) -> bool {
        let (p, off) = (&rule.params, rule.offset_ms);
        let fixed = rule.algo == WindowAlgo::Fixed;
        let counters = refund(Some(&self.counters), p, off, fixed, n, now_us);
        let next = Window {
            params: *p,
            counters,
        };
        std::mem::replace(self, next) != next
    }

    fn info(&self, algo: Algo, _now_us: u64) -> Vec<(&'static str, InfoValue)> {
        let (p, c) = (&self.params, &self.counters);
        let mut f = rule_info(algo, &[p.limit, p.span_ms]);
        f.push(("window_start_ms", InfoValue::Int(c.start_ms)));
        if algo == Algo::Sliding {
            f.push(("previous_count", InfoValue::Int(c.prev)));
            f.push(("current_count", InfoValue::Int(c.cur)));
        } else {
            f.push(("count", InfoValue::Int(c.cur)));
        }
        f
    }

    #[inline]
    fn encode(&self, algo: Algo) -> Encoded {
        Encoded::five(algo.tag(), self.fields())
    }

    fn decode(_algo: Algo, r: &mut Reader) -> Result<Window, DecodeError> {
        let params =
            Params::new(r.u64()?, r.u64()?).map_err(|_| DecodeError("bad window parameters"))?;
        let counters = Counters {
            start_ms: r.u64()?,
            prev: r.u64()?,
            cur: r.u64()?,
        };
        if counters.start_ms > MAX_TIME_MS {
            return Err(DecodeError("bad window start"));
        }
        Ok(Window { params, counters })
    }

    #[inline]
    fn five_fields(&self) -> Option<[u64; 5]> {
        Some(self.fields())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sliding window's decision (the test's shorthand for [`decide`]).
    fn sliding(c: Option<&Counters>, p: &Params, off: u64, cost: u64, now: u64) -> Decided {
        decide(c, p, off, false, cost, now)
    }

    /// A fixed window's decision.
    fn fixed(c: Option<&Counters>, p: &Params, off: u64, cost: u64, now: u64) -> Decided {
        decide(c, p, off, true, cost, now)
    }

    type Decided = (Decision, Option<Counters>);
    use crate::algo::testutil::clock_step;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_040_000_000; // µs, aligned to a minute

    fn hit(s: &mut Option<Counters>, p: &Params, cost: u64, now_us: u64) -> Decision {
        let (d, n) = sliding(s.as_ref(), p, 0, cost, now_us);
        if let Some(n) = n {
            *s = Some(n);
        }
        d
    }

    #[test]
    fn weighted_estimate_across_the_boundary() {
        let p = Params::new(10, 1000).unwrap();
        let mut s = None;
        for i in 0..10u64 {
            let d = hit(&mut s, &p, 1, T0 + 100_000);
            assert_eq!(
                (d.allowed, d.remaining, d.reset_after_ms),
                (true, 9 - i, 1900)
            );
        }
        let d = hit(&mut s, &p, 1, T0 + 100_000);
        // cur = 10: next window, 10 * (W - e') <= 9 * W  =>  e' >= 100 ms.
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 1000, 1900)
        );
        // 250 ms into the next window: estimate = 10 * 0.75 = 7.5, room for 2.
        let t = T0 + 1_250_000;
        assert!(hit(&mut s, &p, 1, t).allowed);
        let d = hit(&mut s, &p, 1, t);
        assert_eq!((d.allowed, d.remaining, d.reset_after_ms), (true, 0, 1750));
        let d = hit(&mut s, &p, 1, t);
        // estimate 9.5, need prev*(W-e) <= (10-2-1)*W = 7W  =>  W - e <= 0.7 W  =>  e >= 300 ms.
        assert_eq!((d.allowed, d.remaining, d.retry_after_ms), (false, 0, 50));
        assert!(!hit(&mut s, &p, 1, T0 + 1_299_000).allowed);
        assert!(hit(&mut s, &p, 1, T0 + 1_300_000).allowed);
    }

    #[test]
    fn reset_rules() {
        let p = Params::new(5, 1000).unwrap();
        let mut s = None;
        hit(&mut s, &p, 1, T0 + 400_000);
        // Current count non-zero: end of the next window.
        assert_eq!(
            sliding(s.as_ref(), &p, 0, 1, T0 + 400_000).0.reset_after_ms,
            1600
        );
        // One window later the count is "previous": end of the current window.
        let d = sliding(s.as_ref(), &p, 0, 5, T0 + 1_500_000).0;
        assert_eq!((d.allowed, d.reset_after_ms), (false, 500));
        // Two windows later: fresh.
        assert_eq!(
            current(s.as_ref(), &p, 0, T0 + 2_000_000),
            Counters {
                start_ms: T0 / 1000 + 2000,
                prev: 0,
                cur: 0
            }
        );
    }

    #[test]
    fn window_change_keeps_counts() {
        let mut s = None;
        hit(
            &mut s,
            &Params::new(100, 1000).unwrap(),
            30,
            T0 + 59_500_000,
        );
        let c = current(
            s.as_ref(),
            &Params::new(100, 60_000).unwrap(),
            0,
            T0 + 59_600_000,
        );
        assert_eq!((c.prev, c.cur), (0, 30));
    }

    #[test]
    fn clock_back_keeps_the_window() {
        // Counted in window 10, read in window 0: decided as of the start of window 10.
        let p = Params::new(5, 1000).unwrap();
        let mut s = None;
        hit(&mut s, &p, 1, T0 + 10_500_000);
        let d = hit(&mut s, &p, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after_ms),
            (true, 3, 12_000)
        );
        assert_eq!(
            s.map(|c| (c.start_ms, c.prev, c.cur)),
            Some((T0 / 1000 + 10_000, 0, 2))
        );
        for _ in 0..3 {
            assert!(hit(&mut s, &p, 1, T0).allowed);
        }
        let written = s;
        // Full: the room comes 800 ms into window 11 (prev 5 weighs 4 then).
        let d = hit(&mut s, &p, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 11_200, 12_000)
        );
        assert_eq!(s, written);
        // Fixed: the same.
        let mut s = None;
        for _ in 0..5 {
            let (_, n) = fixed(s.as_ref(), &p, 0, 1, T0 + 10_500_000);
            s = n.or(s);
        }
        let (d, n) = fixed(s.as_ref(), &p, 0, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 11_000, 11_000)
        );
        assert_eq!(n, None);
        assert!(fixed(s.as_ref(), &p, 0, 1, T0 + 11_000_000).0.allowed);
    }

    #[test]
    fn limit_change_reads_counts_under_the_new_limit() {
        let mut s = None;
        hit(&mut s, &Params::new(10, 1000).unwrap(), 8, T0);
        let d = sliding(s.as_ref(), &Params::new(5, 1000).unwrap(), 0, 1, T0).0;
        assert_eq!((d.allowed, d.remaining), (false, 0));
        let d = sliding(s.as_ref(), &Params::new(20, 1000).unwrap(), 0, 1, T0).0;
        assert_eq!((d.allowed, d.remaining), (true, 11));
    }

    #[test]
    fn fixed_window_boundary_attack_admits_twice_the_limit() {
        let p = Params::new(100, 60_000).unwrap();
        let mut s = None;
        let mut admitted = 0;
        for t in [T0 + 59_500_000, T0 + 60_500_000] {
            for _ in 0..100 {
                let (d, n) = fixed(s.as_ref(), &p, 0, 1, t);
                if let Some(n) = n {
                    s = Some(n);
                }
                admitted += u64::from(d.allowed);
            }
            let d = fixed(s.as_ref(), &p, 0, 1, t).0;
            let left = if t == T0 + 59_500_000 { 500 } else { 59_500 };
            assert_eq!(
                (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
                (false, 0, left, left)
            );
        }
        assert_eq!(admitted, 200);
    }

    proptest! {
        /// Both counters, whatever the clock does (steps back and forward): (a) in every
        /// aligned window of the key's own time (the window the effective now lies in, which
        /// never goes back) the admitted cost never exceeds the limit, and for the sliding
        /// counter the weighted estimate including each admitted request is within the limit
        /// at the effective now; (b) after a write whose reset_after_ms is R, the key is
        /// fresh R ms later on the clock, and no later reply counts beyond that; (c) a refusal
        /// stores nothing; retry_after_ms is exact.
        #[test]
        fn time_never_runs_backwards(
            limit in 1u64..20, window_ms in 1u64..3000, is_fixed in any::<bool>(),
            steps in prop::collection::vec((
                clock_step(-400_000..400_000, -60_000_000..-1_000_000, 1_000_000..60_000_000),
                1u64..6,
            ), 1..100),
        ) {
            let p = Params::new(limit, window_ms).unwrap();
            let run = |c: Option<&Counters>, cost: u64, now: u64| {
                if is_fixed { fixed(c, &p, 0, cost, now) } else { sliding(c, &p, 0, cost, now) }
            };
            let mut s: Option<Counters> = None;
            let mut now = T0 as i64;
            let mut per_window = std::collections::HashMap::<u64, u64>::new();
            let mut last_window = 0;
            let mut fresh_at: Option<u64> = None;
            for (dt, cost) in steps {
                now = (now + dt).max(0);
                let now_us = now as u64;
                let cost = cost.min(limit);
                let at = effective_us(s.as_ref(), now_us);
                let before = current(s.as_ref(), &p, 0, now_us);
                let (d, n) = run(s.as_ref(), cost, now_us);
                if let Some(f) = fresh_at {
                    if now_us >= f {
                        prop_assert_eq!(d, run(None, cost, now_us).0);
                    } else if !d.allowed {
                        prop_assert!(d.reset_after_ms <= (f - now_us).div_ceil(1000));
                    }
                }
                let idx = at / 1000 / window_ms;
                prop_assert!(idx >= last_window);
                if d.allowed {
                    last_window = idx;
                    let e = per_window.entry(idx).or_default();
                    *e += cost;
                    prop_assert!(*e <= limit);
                    if !is_fixed {
                        let w = u128::from(window_ms * 1000);
                        let el = u128::from(at - before.start_ms * 1000);
                        prop_assert!(u128::from(before.prev) * (w - el) + u128::from(before.cur + cost) * w <= u128::from(limit) * w);
                    }
                    fresh_at = Some(now_us + d.reset_after_ms * 1000);
                    s = n;
                } else {
                    prop_assert_eq!(n, None);
                    let r = d.retry_after_ms;
                    prop_assert!(run(s.as_ref(), cost, now_us + r * 1000).0.allowed);
                    prop_assert!(!run(s.as_ref(), cost, now_us + (r - 1) * 1000).0.allowed);
                }
            }
        }

        /// A jump back never adds room.
        #[test]
        fn clock_back_never_adds_room(
            limit in 1u64..20, window_ms in 1u64..3000,
            steps in prop::collection::vec((0i64..400_000, 1u64..6), 1..40),
            back_us in 1u64..100_000_000,
        ) {
            let p = Params::new(limit, window_ms).unwrap();
            let mut s = None;
            let mut now = T0;
            for (dt, cost) in steps {
                now += dt as u64;
                hit(&mut s, &p, cost.min(limit), now);
            }
            let room = sliding(s.as_ref(), &p, 0, 1, now).0.remaining;
            prop_assert!(sliding(s.as_ref(), &p, 0, 1, now - back_us).0.remaining <= room);
            let room = fixed(s.as_ref(), &p, 0, 1, now).0.remaining;
            prop_assert!(fixed(s.as_ref(), &p, 0, 1, now - back_us).0.remaining <= room);
        }

        /// retry_after_ms is exact at ms resolution; remaining unit requests fit now.
        #[test]
        fn replies_are_consistent(
            limit in 1u64..20, window_ms in 1u64..3000,
            steps in prop::collection::vec((0u64..2_000, 1u64..6), 1..60),
        ) {
            let p = Params::new(limit, window_ms).unwrap();
            let mut s = None;
            let mut now = T0;
            for (dt_ms, cost) in steps {
                now += dt_ms * 1000;
                let cost = cost.min(limit);
                let d = hit(&mut s, &p, cost, now);
                if !d.allowed {
                    let r = d.retry_after_ms;
                    prop_assert!(sliding(s.as_ref(), &p, 0, cost, now + r * 1000).0.allowed);
                    prop_assert!(!sliding(s.as_ref(), &p, 0, cost, now + (r - 1) * 1000).0.allowed);
                }
                let mut probe = s;
                for _ in 0..d.remaining {
                    prop_assert!(hit(&mut probe, &p, 1, now).allowed);
                }
                prop_assert!(!hit(&mut probe, &p, 1, now).allowed);
                let later = current(s.as_ref(), &p, 0, now + d.reset_after_ms * 1000);
                prop_assert_eq!((later.prev, later.cur), (0, 0));
                if d.reset_after_ms > 0 {
                    let before = current(s.as_ref(), &p, 0, now + d.reset_after_ms * 1000 - 1000);
                    prop_assert!(before.prev + before.cur > 0);
                }
            }
        }
    }
}
