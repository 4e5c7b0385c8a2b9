//! GCRA: the generic cell rate algorithm (leaky bucket as a meter), which is also the
//! continuous token bucket and the shaping queue seen from other sides.
//!
//! The whole state is one instant, the theoretical arrival time (TAT): the time at which
//! the key would be back to fresh. With emission interval `T = period / count` and
//! tolerance `tau = burst * T`, a request of cost `c` at `now` is admitted iff
//! `max(TAT, now) + c*T - now <= tau`, and then `TAT' = max(TAT, now) + c*T`.
//! A fresh key therefore admits exactly `burst` unit requests at once, then one per `T`.
//!
//! Time never runs backwards for a key: every write leaves `TAT <= now + tau`, so the TAT
//! implies the key's own time, `TAT - tau` at the earliest. A request is decided at the
//! effective now `max(now, TAT - tau)` (under the numbers the state was written with); for
//! an unchanged rule that is the same decision as at `now` (a state further ahead than `tau`
//! is refused either way), and the replies count from the real `now`, so they include the
//! time the clock still needs to catch up. Nothing is clamped and a refusal writes nothing.
//!
//! A rule changed for an existing key carries the state over by its units: the TAT's lead
//! over the effective now (under the old rule), in units of the old interval rounded up,
//! becomes that many units of the new interval from there; the result is then read like any
//! TAT under the new rule. The new lead is capped at [`MAX_SPAN_MS`] (no state spans more). An unchanged interval (only the burst changed) keeps the TAT as it
//! is, so a lowered burst keeps the caller's debt. The re-timed state is stored by the first
//! request under the new interval even when it is refused (the rule change taking effect,
//! once: from then on the state decays at the new rate; its TTL counts the time the clock
//! must catch up, if it is behind the key's own time).
//!
//! Exactness: `T` is rarely a whole number of nanoseconds (1000 ms / 3), so the math runs
//! in *ticks* of `1/count` ns, where `T = period_ms * 10^6` ticks exactly. The stored TAT
//! is `ns + frac/count` ns, which is exact for the count it was written with; read under a
//! different count the fraction is rounded up (at most 1 ns later: never admits more).

use super::algorithm::{rule_info, Algorithm, Spent};
use super::codec::{DecodeError, Encoded, InfoValue, Reader};
use super::request::Extra;
use super::table::Algo;
use super::{div_ceil, sat_u64, span, Decision, ParamError, MAX_SPAN_MS, MAX_TIME_MS, NS_PER_MS};

/// Parameters of one GCRA rule (token bucket: capacity, refill_tokens, refill_period_ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Requests a fresh key admits at once (`limit`).
    pub burst: u64,
    /// Requests gained per period.
    pub count: u64,
    /// The period in ms.
    pub period_ms: u64,
}

/// Argument names used in errors: GCRA's and the token bucket's wording of one thing.
pub type Names = [&'static str; 3];
/// `RL.GCRA`'s argument names.
pub const GCRA_NAMES: Names = ["burst", "count", "period_ms"];
/// `RL.TOKENBUCKET`'s argument names.
pub const BUCKET_NAMES: Names = ["capacity", "refill_tokens", "refill_period_ms"];

impl Params {
    /// Validates a rule: every number at least 1, the period at most [`MAX_SPAN_MS`], and
    /// `tau = burst * period / count` at most [`MAX_SPAN_MS`] (so sums stay in range).
    pub fn new(burst: u64, count: u64, period_ms: u64, names: Names) -> Result<Self, ParamError> {
        super::positive(burst, names[0])?;
        super::positive(count, names[1])?;
        span(period_ms, names[2])?;
        if u128::from(burst) * u128::from(period_ms) > u128::from(MAX_SPAN_MS) * u128::from(count) {
            return Err(ParamError::TooLarge(
                "burst * period_ms / count must not exceed 1000000000000 ms",
            ));
        }
        Ok(Params {
            burst,
            count,
            period_ms,
        })
    }

    /// Emission interval in ticks (`1/count` ns): exactly `period_ms * 10^6`.
    #[inline]
    fn t(&self) -> u128 {
        u128::from(self.period_ms) * u128::from(NS_PER_MS)
    }

    /// Tolerance in ticks: `burst * T`.
    #[inline]
    fn tau(&self) -> u128 {
        u128::from(self.burst) * self.t()
    }

    /// [`MAX_SPAN_MS`] in ticks: the longest lead a re-timed state may get (no state covers
    /// more, so every stored TAT stays within what the codec accepts).
    #[inline]
    fn max_span(&self) -> u128 {
        u128::from(MAX_SPAN_MS) * self.tick_ms()
    }

    /// Ticks per ms.
    #[inline]
    fn tick_ms(&self) -> u128 {
        u128::from(NS_PER_MS) * u128::from(self.count)
    }

    /// The instant `now_us` in ticks.
    #[inline]
    fn ticks_of(&self, now_us: u64) -> u128 {
        u128::from(now_us) * 1_000 * u128::from(self.count)
    }

    /// Both rules have the same emission interval (`period_ms / count`, exactly).
    #[inline]
    pub fn same_interval(&self, o: &Params) -> bool {
        u128::from(self.period_ms) * u128::from(o.count)
            == u128::from(o.period_ms) * u128::from(self.count)
    }
}

/// The latest TAT a state may hold, ns: the latest module time plus the longest span (what
/// the codec accepts). Admissions never reach it; a re-timing is capped at it.
pub const MAX_TAT_NS: u128 = (MAX_TIME_MS as u128 + MAX_SPAN_MS as u128) * NS_PER_MS as u128;

/// The stored theoretical arrival time: `ns + frac/den` ns since the epoch, where `den` is
/// the `count` it was written with (stored beside it, in the rule) and `frac < den`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tat {
    pub ns: u64,
    pub frac: u64,
}

/// A stored TAT together with the rule it was written under (its fraction is over that
/// rule's `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored<'a> {
    pub tat: &'a Tat,
    pub rule: &'a Params,
}

/// `num / den` (`den >= 1`), by the 64-bit division when both fit in 64 bits: the same
/// quotient, without the call into the 128-bit division. On the hot path they fit: the
/// differences of instants (at most a few spans) always, absolute instants when `count` is small.
#[inline]
fn div(num: u128, den: u128) -> u128 {
    if (num | den) >> 64 == 0 {
        u128::from(num as u64 / den as u64)
    } else {
        num / den
    }
}

/// `ceil(num / den)` (`den >= 1`), as [`div`] computes it.
#[inline]
fn ceil_div(num: u128, den: u128) -> u128 {
    if (num | den) >> 64 == 0 {
        u128::from((num as u64).div_ceil(den as u64))
    } else {
        div_ceil(num, den)
    }
}

/// `x` ticks of `1/from` ns as ticks of `1/to` ns, rounded up (`from`, `to` >= 1).
#[inline]
fn rescale(x: u128, from: u64, to: u64) -> u128 {
    if from == to {
        return x;
    }
    let (f, t) = (u128::from(from), u128::from(to));
    (x / f) * t + div_ceil((x % f) * t, f)
}

impl Stored<'_> {
    /// The TAT in ticks of its own rule's count.
    #[inline]
    fn own_ticks(&self) -> u128 {
        u128::from(self.tat.ns) * u128::from(self.rule.count) + u128::from(self.tat.frac)
    }

    /// In ticks of its own rule: the effective now (`max(now, TAT - tau)`), the TAT, and the
    /// units it holds there (the lead over the effective now in intervals, rounded up).
    #[inline]
    fn own_view(&self, now_us: u64) -> (u128, u128, u128) {
        let o = self.rule;
        let tat = self.own_ticks();
        let at = o.ticks_of(now_us).max(tat.saturating_sub(o.tau()));
        (at, tat, div_ceil(tat.saturating_sub(at), o.t()))
    }
}

impl Tat {
    /// The instant `ticks` (of `1/count` ns) as a stored TAT.
    #[inline]
    fn from_ticks(ticks: u128, count: u64) -> Tat {
        if ticks >> 64 == 0 {
            // The 64-bit division (see [`div`]): the same quotient and remainder.
            let t = ticks as u64;
            return Tat {
                ns: t / count,
                frac: t % count,
            };
        }
        let c = u128::from(count);
        Tat {
            ns: sat_u64(ticks / c),
            frac: sat_u64(ticks % c),
        }
    }
}

/// A state as a request under `p` sees it, in ticks of `p`: the real now, the effective now
/// (never before the key's own time), the TAT (never before the effective now), and whether
/// it was re-timed from another emission interval (then a refusal stores it).
struct View {
    now: u128,
    at: u128,
    tat: u128,
    retimed: bool,
}

/// The stored state read under `p` at `now_us` (see the module documentation): re-timed if
/// its interval differs (units counted at the key's own time under its own rule), then read
/// like any TAT under `p`, at `max(now, TAT - tau)`.
#[inline(always)]
fn view(s: Option<Stored>, p: &Params, now_us: u64) -> View {
    let now = p.ticks_of(now_us);
    let Some(s) = s else {
        return View {
            now,
            at: now,
            tat: now,
            retimed: false,
        };
    };
    let o = s.rule;
    let (tat, retimed) = if o == p {
        (s.own_ticks(), false)
    } else if o.same_interval(p) {
        (rescale(s.own_ticks(), o.count, p.count), false)
    } else {
        let (own_at, _, units) = s.own_view(now_us);
        let at = rescale(own_at, o.count, p.count).max(now);
        let lead = (units * p.t()).min(p.max_span());
        ((at + lead).min(MAX_TAT_NS * u128::from(p.count)), true)
    };
    View {
        now,
        at: now.max(tat.saturating_sub(p.tau())),
        tat: tat.max(now),
        retimed,
    }
}

/// The stored state read by `CL.THROTTLE` under `p` (the call's numbers), re-timed with
/// redis-cell's emission interval `t_ns` if its own interval differs, at `now_us`: the TAT in
/// whole ns (rounded up), and whether it was re-timed (then a refusal stores it), as
/// [`view`] defines them.
pub fn view_ns(s: Stored, p: &Params, t_ns: u64, now_us: u64) -> (u64, bool) {
    let o = s.rule;
    if o.same_interval(p) {
        return (sat_u64(div_ceil(s.own_ticks(), u128::from(o.count))), false);
    }
    let (own_at, _, units) = s.own_view(now_us);
    let at = div_ceil(own_at, u128::from(o.count));
    let lead = (units * u128::from(t_ns)).min(u128::from(MAX_SPAN_MS) * u128::from(NS_PER_MS));
    (sat_u64((at + lead).min(MAX_TAT_NS)), true)
}

/// Decides one request of `cost` (validated `1..=burst`) at `now_us`, as of the effective
/// now. Returns the decision and the TAT to store (under `p`): the new one when admitted;
/// on a refusal nothing, unless the state was written under another emission interval: then
/// the re-timed one (see the module documentation).
#[inline]
pub fn decide(s: Option<Stored>, p: &Params, cost: u64, now_us: u64) -> (Decision, Option<Tat>) {
    decide_in(&view(s, p, now_us), p, cost)
}

/// [`decide`] for `RL.QUEUE`, with the ms (rounded up) an admitted request waits before its
/// turn ([`delay_ms`]), from the same view.
#[inline]
pub fn decide_queued(
    s: Option<Stored>,
    p: &Params,
    cost: u64,
    now_us: u64,
) -> (Decision, Option<Tat>, u64) {
    let v = view(s, p, now_us);
    let (d, next) = decide_in(&v, p, cost);
    (d, next, wait_ms(&v, p))
}

/// ms (rounded up) from the view's now to its TAT: what a request admitted there waits.
#[inline]
fn wait_ms(v: &View, p: &Params) -> u64 {
    sat_u64(ceil_div(v.tat - v.now, p.tick_ms()))
}

/// [`decide`] on the state's view.
#[inline(always)]
fn decide_in(v: &View, p: &Params, cost: u64) -> (Decision, Option<Tat>) {
    let t = p.t();
    let tau = p.tau();
    let next = v.tat + u128::from(cost) * t;
    let tick_ms = p.tick_ms();
    if next - v.at <= tau {
        let d = Decision {
            allowed: true,
            limit: p.burst,
            remaining: sat_u64(div(tau - (next - v.at), t)),
            retry_after_ms: 0,
            reset_after_ms: sat_u64(ceil_div(next - v.now, tick_ms)),
        };
        (d, Some(Tat::from_ticks(next, p.count)))
    } else {
        // Admitted once `next - at' <= tau`, i.e. at `at' = next - tau` (> at >= now here).
        let d = Decision {
            allowed: false,
            limit: p.burst,
            remaining: sat_u64(div(tau.saturating_sub(v.tat - v.at), t)),
            retry_after_ms: sat_u64(ceil_div(next - tau - v.now, tick_ms)),
            reset_after_ms: sat_u64(ceil_div(v.tat - v.now, tick_ms)),
        };
        (d, v.retimed.then(|| Tat::from_ticks(v.tat, p.count)))
    }
}

/// `REFUND n` at `now_us`: the TAT (under `p`, re-timed like any request's view) moved back
/// by `n` intervals, but not before the effective now, so never past a fresh state. Read
/// the reply with a cost-0 request.
pub fn refund(s: Option<Stored>, p: &Params, n: u64, now_us: u64) -> Tat {
    let v = view(s, p, now_us);
    let back = u128::from(n) * p.t();
    Tat::from_ticks(v.tat.saturating_sub(back).max(v.at), p.count)
}

/// ms (rounded up) a request admitted at `now_us` waits before its turn: the queue view.
pub fn delay_ms(s: Option<Stored>, p: &Params, now_us: u64) -> u64 {
    wait_ms(&view(s, p, now_us), p)
}

/// Whole tokens available at `now_us` (the token-bucket view of the same state).
pub fn tokens(s: Option<Stored>, p: &Params, now_us: u64) -> u64 {
    let v = view(s, p, now_us);
    sat_u64(p.tau().saturating_sub(v.tat - v.at) / p.t())
}
/// A member of the GCRA family (the arithmetic is the same; the replies differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketAlgo {
    Gcra,
    TokenBucket,
    Queue,
}

/// A GCRA-family rule: which member, and its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketRule {
    pub algo: BucketAlgo,
    pub params: Params,
}

/// The names `Params` gives errors about RL.QUEUE (its count is always 1).
const QUEUE_NAMES: Names = ["capacity", "count", "interval_ms"];

/// A GCRA-family state: the rule last applied and the theoretical arrival time.
///
/// Codec (gcra 1, tokenbucket 2, queue 6): burst, count, period_ms, tat_ns, tat_frac (the
/// TAT is `tat_ns + tat_frac / count` ns since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub params: Params,
    pub tat: Tat,
}

impl Bucket {
    /// The codec's five fields: burst, count, period_ms, the TAT's ns and fraction.
    #[inline]
    pub fn fields(&self) -> [u64; 5] {
        let p = &self.params;
        [p.burst, p.count, p.period_ms, self.tat.ns, self.tat.frac]
    }

    /// The stored TAT with the rule it was written under.
    #[inline]
    pub fn stored(&self) -> Stored<'_> {
        Stored {
            tat: &self.tat,
            rule: &self.params,
        }
    }
}

impl Algorithm for Bucket {
    type Rule = BucketRule;

    fn rule(algo: Algo, numbers: [u64; 3]) -> Result<BucketRule, ParamError> {
        let [x, y, z] = numbers;
        let (algo, params) = match algo {
            Algo::TokenBucket => (BucketAlgo::TokenBucket, Params::new(x, y, z, BUCKET_NAMES)?),
            Algo::Queue => (BucketAlgo::Queue, Params::new(x, 1, y, QUEUE_NAMES)?),
            _ => (BucketAlgo::Gcra, Params::new(x, y, z, GCRA_NAMES)?),
        };
        Ok(BucketRule { algo, params })
    }

    #[inline]
    fn algo(rule: &BucketRule) -> Algo {
        match rule.algo {
            BucketAlgo::Gcra => Algo::Gcra,
            BucketAlgo::TokenBucket => Algo::TokenBucket,
            BucketAlgo::Queue => Algo::Queue,
        }
    }

    #[inline]
    fn limit(rule: &BucketRule) -> u64 {
        rule.params.burst
    }

    #[inline]
    fn fresh(rule: &BucketRule) -> Bucket {
        Bucket {
            params: rule.params,
            tat: Tat { ns: 0, frac: 0 },
        }
    }

    #[inline]
    fn spend(&mut self, rule: &BucketRule, cost: u64, now_us: u64, commit: bool) -> Spent {
        let p = &rule.params;
        let stored = Some(self.stored());
        let mut extra = Extra::None;
        let (d, next) = if rule.algo == BucketAlgo::Queue {
            let (d, next, delay) = decide_queued(stored, p, cost, now_us);
            extra = Extra::Delay(if d.allowed { delay } else { 0 });
            (d, next)
        } else {
            decide(stored, p, cost, now_us)
        };
        match next {
            // Admitted, or re-timed under a changed emission interval (the rule change
            // taking effect, also on a refusal): store under this rule's numbers.
            Some(tat) if commit => {
                *self = Bucket { params: *p, tat };
                (d, extra, true)
            }
            _ => (d, extra, false),
        }
    }

    fn refund(&mut self, rule: &BucketRule, n: u64, now_us: u64) -> bool {
        let p = &rule.params;
        let tat = refund(Some(self.stored()), p, n, now_us);
        let next = Bucket { params: *p, tat };
        std::mem::replace(self, next) != next
    }

    fn info(&self, algo: Algo, now_us: u64) -> Vec<(&'static str, InfoValue)> {
        let p = &self.params;
        let mut f = if algo == Algo::Queue {
            rule_info(algo, &[p.burst, p.period_ms])
        } else {
            rule_info(algo, &[p.burst, p.count, p.period_ms])
        };
        if algo == Algo::TokenBucket {
            f.push((
                "tokens",
                InfoValue::Int(tokens(Some(self.stored()), p, now_us)),
            ));
        }
        f.push(("tat_ns", InfoValue::Int(self.tat.ns)));
        f
    }

    #[inline]
    fn encode(&self, algo: Algo) -> Encoded {
        Encoded::five(algo.tag(), self.fields())
    }

    fn decode(algo: Algo, r: &mut Reader) -> Result<Bucket, DecodeError> {
        let names = if algo == Algo::TokenBucket {
            BUCKET_NAMES
        } else {
            GCRA_NAMES
        };
        let params = Params::new(r.u64()?, r.u64()?, r.u64()?, names)
            .map_err(|_| DecodeError("bad gcra parameters"))?;
        let (ns, frac) = (r.u64()?, r.u64()?);
        // The furthest a TAT can lie: the latest module time plus the longest span.
        if u128::from(ns) > MAX_TAT_NS || frac >= params.count {
            return Err(DecodeError("bad gcra arrival time"));
        }
        Ok(Bucket {
            params,
            tat: Tat { ns, frac },
        })
    }

    #[inline]
    fn five_fields(&self) -> Option<[u64; 5]> {
        Some(self.fields())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::testutil::clock_step;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_040_000_000; // µs, aligned to a minute
    const HOUR_US: u64 = 3_600_000_000;

    fn p(burst: u64, count: u64, period_ms: u64) -> Params {
        Params::new(burst, count, period_ms, GCRA_NAMES).unwrap()
    }

    /// The stored TAT of a test run (written under `p`, so its fraction is over `p.count`).
    fn st<'a>(s: &'a Option<Tat>, p: &'a Params) -> Option<Stored<'a>> {
        s.as_ref().map(|tat| Stored { tat, rule: p })
    }

    /// Runs a request and stores the result, like the command layer does.
    fn hit(s: &mut Option<Tat>, p: &Params, cost: u64, now_us: u64) -> Decision {
        let (d, n) = decide(st(s, p), p, cost, now_us);
        if let Some(n) = n {
            *s = Some(n);
        }
        d
    }

    /// A state written under one rule, read under others (what the rule layer stores).
    #[derive(Debug, Clone, Copy)]
    struct Key {
        tat: Tat,
        rule: Params,
    }

    impl Key {
        fn stored(&self) -> Stored<'_> {
            Stored {
                tat: &self.tat,
                rule: &self.rule,
            }
        }
    }

    fn hit_key(k: &mut Option<Key>, p: &Params, cost: u64, now_us: u64) -> Decision {
        let (d, n) = decide(k.as_ref().map(Key::stored), p, cost, now_us);
        if let Some(tat) = n {
            *k = Some(Key { tat, rule: *p });
        }
        d
    }

    /// A fresh key after one admitted request of `cost` under `rule` at `now_us`.
    fn spent(rule: &Params, cost: u64, now_us: u64) -> Option<Key> {
        let mut k = None;
        assert!(hit_key(&mut k, rule, cost, now_us).allowed);
        k
    }

    #[test]
    fn fresh_key_admits_burst_then_one_per_interval() {
        let p = p(5, 1, 1000);
        let mut s = None;
        for i in 0..5u64 {
            let d = hit(&mut s, &p, 1, T0);
            assert_eq!(
                d,
                Decision {
                    allowed: true,
                    limit: 5,
                    remaining: 4 - i,
                    retry_after_ms: 0,
                    reset_after_ms: 1000 * (i + 1)
                }
            );
        }
        let d = hit(&mut s, &p, 1, T0);
        assert_eq!(
            d,
            Decision {
                allowed: false,
                limit: 5,
                remaining: 0,
                retry_after_ms: 1000,
                reset_after_ms: 5000
            }
        );
        assert!(!hit(&mut s, &p, 1, T0 + 999_000).allowed);
        let d = hit(&mut s, &p, 1, T0 + 1_000_000);
        assert_eq!(
            d,
            Decision {
                allowed: true,
                limit: 5,
                remaining: 0,
                retry_after_ms: 0,
                reset_after_ms: 5000
            }
        );
    }

    #[test]
    fn non_integral_interval_has_no_drift() {
        // 3 per second: T = 333333333.33 ns. Every second exactly 3 more, forever.
        let p = p(3, 3, 1000);
        let mut s = None;
        for sec in 0..10_000u64 {
            let now = T0 + sec * 1_000_000;
            for _ in 0..3 {
                assert!(hit(&mut s, &p, 1, now).allowed, "second {sec}");
            }
            assert!(!hit(&mut s, &p, 1, now).allowed);
        }
    }

    #[test]
    fn cost_spends_several() {
        let p = p(10, 10, 1000);
        let mut s = None;
        let d = hit(&mut s, &p, 7, T0);
        assert_eq!((d.allowed, d.remaining, d.reset_after_ms), (true, 3, 700));
        let d = hit(&mut s, &p, 4, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 3, 100, 700)
        );
    }

    #[test]
    fn clock_behind_decides_at_the_keys_own_time() {
        let p = p(2, 1, 1000);
        let mut s = None;
        hit(&mut s, &p, 2, T0 + HOUR_US);
        let written = s;
        // An hour back: still spent (no second burst); the replies count the hour the clock
        // needs to catch up, and nothing is written.
        let (d, next) = decide(st(&s, &p), &p, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 3_601_000, 3_602_000)
        );
        assert_eq!(next, None);
        // Nothing is admitted until the key's own time has come again.
        assert!(!hit(&mut s, &p, 1, T0 + HOUR_US + 999_999).allowed);
        assert_eq!(s, written);
        assert!(hit(&mut s, &p, 1, T0 + HOUR_US + 1_000_000).allowed);
        // Partly spent, then back a little: less than was left, never more (the TAT is all
        // the key knows of its time, and it is read at the earliest instant it allows).
        let mut s = None;
        hit(&mut s, &p, 1, T0 + 10_000_000);
        let d = hit(&mut s, &p, 1, T0 + 9_500_000);
        assert_eq!((d.allowed, d.remaining, d.reset_after_ms), (false, 0, 1500));
        assert!(hit(&mut s, &p, 1, T0 + 10_000_000).allowed);
    }

    #[test]
    fn changing_count_rounds_up_never_admits_more() {
        let mut s = None;
        hit(&mut s, &p(3, 3, 1000), 1, T0); // TAT = T0 + 333333333.33 ns
        let tat = s.unwrap();
        assert_eq!(tat.frac, 1);
        let own = u128::from(tat.ns) * 3 + 1;
        assert_eq!(rescale(own, 3, 7), u128::from(tat.ns) * 7 + 3); // ceil(1*7/3) = 3
        assert_eq!(rescale(own, 3, 3), own);
        assert_eq!(
            rescale(u128::from(tat.ns) * 3, 3, 7),
            u128::from(tat.ns) * 7
        );
    }

    #[test]
    fn rule_change_carries_the_units_over() {
        // 10 per hour, all 10 spent; now 10 per second: free after one second.
        let hourly = p(10, 10, 3_600_000);
        let fast = p(10, 10, 1000);
        let mut k = spent(&hourly, 10, T0);
        // The first request under the new rule is refused, and stores the re-timed state
        // (the rule change taking effect): the caller is free a second later.
        let d = hit_key(&mut k, &fast, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 100, 1000)
        );
        assert_eq!(k.map(|k| k.rule), Some(fast));
        let s = k.as_ref().map(Key::stored);
        assert!(!decide(s, &fast, 1, T0 + 99_000).0.allowed);
        assert!(decide(s, &fast, 1, T0 + 100_000).0.allowed);
        assert_eq!(
            tokens(k.as_ref().map(Key::stored), &fast, T0 + 1_000_000),
            10
        );
        // Half an interval used: rounded up to a whole unit of the new interval.
        let mut k = spent(&hourly, 3, T0);
        // 15 min later: lead 18 - 15 = 3 min = half a unit of 6 min -> 1 unit of 100 ms.
        let d = decide(k.as_ref().map(Key::stored), &fast, 1, T0 + 900_000_000).0;
        assert_eq!((d.allowed, d.remaining, d.reset_after_ms), (true, 8, 200));
        // Back to the hourly rule: the 2 units now held become 2 units of 6 min.
        hit_key(&mut k, &fast, 1, T0 + 900_000_000);
        let d = decide(k.as_ref().map(Key::stored), &hourly, 1, T0 + 900_000_000).0;
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after_ms),
            (true, 7, 1_080_000)
        );
    }

    #[test]
    fn a_re_timed_lead_is_capped_at_the_longest_span() {
        // A million units of 1 ms become a million of 10^12 ms: capped at 10^12 ms.
        let k = spent(&p(1_000_000, 1_000_000, 1_000_000), 1_000_000, T0);
        let slow = p(1, 1, MAX_SPAN_MS);
        let s = k.as_ref().map(Key::stored);
        assert_eq!(delay_ms(s, &slow, T0), MAX_SPAN_MS);
        let (d, next) = decide(s, &slow, 1, T0);
        assert_eq!((d.allowed, d.reset_after_ms), (false, MAX_SPAN_MS));
        assert_eq!(
            next.map(|t| t.ns),
            Some((T0 / 1000 + MAX_SPAN_MS) * NS_PER_MS)
        );
    }

    #[test]
    fn lowering_the_burst_keeps_the_debt() {
        // redis-cell's case: 100 at once under burst 100, 1 per second; then burst 5.
        let big = p(100, 1, 1000);
        let small = p(5, 1, 1000);
        let k = spent(&big, 100, T0);
        let (d, next) = decide(k.as_ref().map(Key::stored), &small, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 96_000, 100_000)
        );
        assert_eq!(next, None);
        // Raising it back: the same debt, now within the burst.
        let d = decide(k.as_ref().map(Key::stored), &p(200, 1, 1000), 1, T0).0;
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after_ms),
            (true, 99, 101_000)
        );
        // The same interval written otherwise (2 per 2 s) keeps the exact TAT too.
        let d = decide(k.as_ref().map(Key::stored), &p(5, 2, 2000), 1, T0 + 500_000).0;
        assert_eq!((d.retry_after_ms, d.reset_after_ms), (95_500, 99_500));
    }

    #[test]
    fn rule_change_while_the_clock_is_behind() {
        // Spent under 10 per hour at T0 + 1 h; the clock reads T0; the rule becomes 10 per
        // second with burst 20. The 10 units held at the key's own time (T0 + 1 h) become
        // 10 of 100 ms from there; read at T0 that state is refused, with the hour counted,
        // and stored (the rule change taking effect; its TTL counts the hour).
        let hourly = p(10, 10, 3_600_000);
        let fast = p(20, 10, 1000);
        let k = spent(&hourly, 10, T0 + HOUR_US);
        let (d, next) = decide(k.as_ref().map(Key::stored), &fast, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 3_599_100, 3_601_000)
        );
        assert_eq!(next.map(|t| t.ns), Some((T0 + HOUR_US + 1_000_000) * 1000));
        // At the key's own time: the new burst has room for 10 more at once.
        let d = decide(k.as_ref().map(Key::stored), &fast, 10, T0 + HOUR_US).0;
        assert_eq!((d.allowed, d.remaining, d.reset_after_ms), (true, 0, 2000));
    }

    #[test]
    fn view_ns_for_redis_cell() {
        let k = spent(&p(100, 1, 1000), 100, T0);
        let s = k.as_ref().map(Key::stored).unwrap();
        // Same interval: the TAT as it is.
        assert_eq!(
            view_ns(s, &p(5, 1, 1000), 1_000_000_000, T0),
            (T0 * 1000 + 100_000_000_000, false)
        );
        // Another interval: 100 units of 10 ms.
        assert_eq!(
            view_ns(s, &p(100, 100, 1000), 10_000_000, T0),
            (T0 * 1000 + 1_000_000_000, true)
        );
        // Far behind: from the key's own time.
        assert_eq!(
            view_ns(s, &p(100, 100, 1000), 10_000_000, T0 - HOUR_US),
            (T0 * 1000 + 1_000_000_000, true)
        );
    }

    #[test]
    fn params_validation() {
        assert_eq!(
            Params::new(0, 1, 1, GCRA_NAMES),
            Err(ParamError::NotPositive("burst"))
        );
        assert_eq!(
            Params::new(1, 0, 1, BUCKET_NAMES),
            Err(ParamError::NotPositive("refill_tokens"))
        );
        assert_eq!(
            Params::new(1, 1, 0, GCRA_NAMES),
            Err(ParamError::NotPositive("period_ms"))
        );
        assert!(matches!(
            Params::new(1, 1, MAX_SPAN_MS + 1, GCRA_NAMES),
            Err(ParamError::SpanTooLarge(_))
        ));
        assert!(matches!(
            Params::new(2, 1, MAX_SPAN_MS, GCRA_NAMES),
            Err(ParamError::TooLarge(_))
        ));
        assert!(Params::new(u64::MAX >> 1, u64::MAX >> 1, MAX_SPAN_MS, GCRA_NAMES).is_ok());
    }

    fn arb_params() -> impl Strategy<Value = Params> {
        (1u64..20, 1u64..10, 1u64..5_000).prop_map(|(b, c, per)| p(b, c, per))
    }

    proptest! {
        /// (a) For any two admitted requests i <= j, the cost admitted between them is at
        /// most `burst + (K_j - K_i) / T`, where K is the key's own time (the latest time it
        /// was written at, non-decreasing), whatever the clock did in between. (c) A refusal
        /// stores nothing. (b) After a write whose reset_after_ms is R, the key is fresh
        /// again R ms later on the clock, and no later reply counts beyond that instant.
        #[test]
        fn time_never_runs_backwards(
            p in arb_params(),
            steps in prop::collection::vec((
                clock_step(
                    -3_000_000..3_000_000,
                    -100_000_000_000..-1_000_000,
                    1_000_000..100_000_000_000,
                ),
                1u64..5,
            ), 1..80),
        ) {
            let mut s = None;
            let mut now = (T0 + 200_000_000_000) as i64;
            let mut key_time = 0u64;
            let mut fresh_at: Option<u64> = None;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            for (dt, cost) in steps {
                now += dt;
                let now_us = now as u64;
                let cost = cost.min(p.burst);
                let before = s;
                let d = hit(&mut s, &p, cost, now_us);
                if let Some(at) = fresh_at {
                    if now_us >= at {
                        prop_assert_eq!(d, decide(None, &p, cost, now_us).0);
                    } else if !d.allowed {
                        prop_assert!(d.reset_after_ms <= (at - now_us).div_ceil(1000));
                    }
                }
                if d.allowed {
                    key_time = key_time.max(now_us);
                    admitted.push((key_time, cost));
                    fresh_at = Some(now_us + d.reset_after_ms * 1000);
                } else {
                    prop_assert_eq!(s, before);
                }
            }
            let t = u128::from(p.period_ms) * 1_000_000;
            for i in 0..admitted.len() {
                let mut sum: u128 = 0;
                for j in i..admitted.len() {
                    sum += u128::from(admitted[j].1);
                    let elapsed_ns = u128::from(admitted[j].0 - admitted[i].0) * 1000;
                    // sum * T <= tau + elapsed, in ns scaled by count.
                    prop_assert!(
                        sum * t <= u128::from(p.burst) * t + elapsed_ns * u128::from(p.count),
                        "admitted {} between {} and {}", sum, i, j
                    );
                }
            }
        }

        /// A clock moved backwards never adds credit: fewer or as many requests fit right
        /// after the jump as right before it, and the retry it is told is exact.
        #[test]
        fn clock_back_never_adds_credit(
            p in arb_params(),
            steps in prop::collection::vec((0u64..3_000, 1u64..5), 1..30),
            back_ms in 1u64..100_000_000,
        ) {
            let mut s = None;
            let mut now = T0 + 200_000_000_000;
            for (dt_ms, cost) in steps {
                now += dt_ms * 1000;
                hit(&mut s, &p, cost.min(p.burst), now);
            }
            let before = decide(st(&s, &p), &p, 1, now).0;
            let back = now - back_ms * 1000;
            let d = hit(&mut s, &p, 1, back);
            prop_assert!(d.remaining <= before.remaining);
            if !d.allowed {
                prop_assert!(decide(st(&s, &p), &p, 1, back + d.retry_after_ms * 1000).0.allowed);
                prop_assert!(!decide(st(&s, &p), &p, 1, back + d.retry_after_ms * 1000 - 1000).0.allowed);
            }
        }

        /// (d) A changed rule holds the units the old one had spent, rounded up: the tokens
        /// the new rule sees are its burst less those units, and the key is fresh after those
        /// units of the new interval. An unchanged interval keeps the TAT exactly.
        #[test]
        fn rule_change_carries_units(
            old in arb_params(),
            new in arb_params(),
            steps in prop::collection::vec((0u64..3_000, 1u64..5), 1..20),
            later_us in 0u64..10_000_000,
        ) {
            let mut k = None;
            let mut now = T0;
            for (dt_ms, cost) in steps {
                now += dt_ms * 1000;
                hit_key(&mut k, &old, cost.min(old.burst), now);
            }
            let now = now + later_us;
            let Some(key) = k else { return Ok(()) };
            // The lead over now in ns, exactly: (tat_ns * c + frac - now_ns * c) / c.
            let c = u128::from(old.count);
            let tat = u128::from(key.tat.ns) * c + u128::from(key.tat.frac);
            let lead = tat.saturating_sub(u128::from(now) * 1000 * c); // ns * c
            let t_old = u128::from(old.period_ms) * 1_000_000; // ns * c
            let units = lead.div_ceil(t_old);
            let s = Some(key.stored());
            let t_new = u128::from(new.period_ms) * 1_000_000; // ns * new.count
            let same = u128::from(old.period_ms) * u128::from(new.count)
                == u128::from(new.period_ms) * u128::from(old.count);
            // The new lead, ns * new.count.
            let new_lead = if same {
                (lead * u128::from(new.count)).div_ceil(c)
            } else {
                units * t_new
            };
            let want_tokens = (u128::from(new.burst) * t_new).saturating_sub(new_lead) / t_new;
            prop_assert_eq!(u128::from(tokens(s, &new, now)), want_tokens);
            let want_delay = new_lead.div_ceil(1_000_000 * u128::from(new.count));
            prop_assert_eq!(u128::from(delay_ms(s, &new, now)), want_delay);
            let (d, next) = decide(s, &new, 1, now);
            prop_assert_eq!(d.allowed, new_lead + t_new <= u128::from(new.burst) * t_new);
            // A refusal stores only a re-timing (another interval).
            if !d.allowed {
                prop_assert_eq!(next.is_some(), !same);
            }
            // Unchanged rules change nothing.
            prop_assert_eq!(decide(s, &old, 1, now), decide(st(&Some(key.tat), &old), &old, 1, now));
        }

        /// retry_after_ms is exact at ms resolution: admitted that many ms later, refused one
        /// ms earlier. remaining is how many unit requests are admitted right now.
        #[test]
        fn replies_are_consistent(
            p in arb_params(),
            steps in prop::collection::vec((0u64..3_000, 1u64..5), 1..60),
        ) {
            let mut s = None;
            let mut now = T0;
            for (dt_ms, cost) in steps {
                now += dt_ms * 1000;
                let cost = cost.min(p.burst);
                let d = hit(&mut s, &p, cost, now);
                if d.allowed {
                    prop_assert_eq!(d.retry_after_ms, 0);
                    prop_assert!(d.reset_after_ms > 0);
                } else {
                    let r = d.retry_after_ms;
                    prop_assert!(r > 0);
                    prop_assert!(decide(st(&s, &p), &p, cost, now + r * 1000).0.allowed);
                    prop_assert!(!decide(st(&s, &p), &p, cost, now + (r - 1) * 1000).0.allowed);
                }
                // `remaining` unit requests fit now, one more does not.
                let mut probe = s;
                for _ in 0..d.remaining {
                    prop_assert!(hit(&mut probe, &p, 1, now).allowed);
                }
                prop_assert!(!hit(&mut probe, &p, 1, now).allowed);
                // After reset_after_ms the key behaves as fresh.
                let later = now + d.reset_after_ms * 1000;
                prop_assert_eq!(tokens(st(&s, &p), &p, later), p.burst);
            }
        }
    }
}
