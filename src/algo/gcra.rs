//! GCRA: the generic cell rate algorithm (leaky bucket as a meter), which is also the
//! continuous token bucket and the shaping queue seen from other sides.
//!
//! The whole state is one instant, the theoretical arrival time (TAT): the time at which
//! the key would be back to fresh. With emission interval `T = period / count` and
//! tolerance `tau = burst * T`, a request of cost `c` at `now` is admitted iff
//! `max(TAT, now) + c*T - now <= tau`, and then `TAT' = max(TAT, now) + c*T`.
//! A fresh key therefore admits exactly `burst` unit requests at once, then one per `T`.
//!
//! Exactness: `T` is rarely a whole number of nanoseconds (1000 ms / 3), so the math runs
//! in *ticks* of `1/count` ns, where `T = period_ms * 10^6` ticks exactly. The stored TAT
//! is `ns + frac/count` ns, which is exact for the count it was written with; read under a
//! different count the fraction is rounded up (at most 1 ns later: never admits more).

use super::{div_ceil, sat_u64, span, Decision, ParamError, MAX_SPAN_MS, NS_PER_MS};

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

    /// Ticks per ms.
    #[inline]
    fn tick_ms(&self) -> u128 {
        u128::from(NS_PER_MS) * u128::from(self.count)
    }
}

/// The stored theoretical arrival time: `ns + frac/den` ns since the epoch, where `den` is
/// the `count` it was written with (stored beside it, in the rule) and `frac < den`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tat {
    pub ns: u64,
    pub frac: u64,
}

/// A stored TAT together with the denominator of its fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored<'a> {
    pub tat: &'a Tat,
    pub den: u64,
}

impl Stored<'_> {
    /// This instant in ticks of `1/count` ns, rounding a foreign fraction up.
    #[inline]
    fn ticks(&self, count: u64) -> u128 {
        let c = u128::from(count);
        let t = self.tat;
        let whole = u128::from(t.ns) * c;
        if t.frac == 0 || self.den == 0 {
            whole
        } else if self.den == count {
            whole + u128::from(t.frac)
        } else {
            whole + div_ceil(u128::from(t.frac) * c, u128::from(self.den))
        }
    }
}

impl Tat {
    /// The instant `ticks` (of `1/count` ns) as a stored TAT.
    #[inline]
    fn from_ticks(ticks: u128, count: u64) -> Tat {
        let c = u128::from(count);
        Tat {
            ns: sat_u64(ticks / c),
            frac: sat_u64(ticks % c),
        }
    }
}

/// The TAT as seen at `now`, in ticks: never before `now` (idle time earns nothing beyond a
/// fresh key) and never after `now + tau` (a state from a clock that ran ahead is read as
/// fully spent, the most restrictive state GCRA can be in now).
#[inline]
fn effective(tat: Option<Stored>, p: &Params, now: u128) -> u128 {
    let tau = u128::from(p.burst) * p.t();
    match tat {
        None => now,
        Some(t) => t.ticks(p.count).clamp(now, now + tau),
    }
}

/// Decides one request of `cost` (validated `1..=burst`) at `now_us`.
/// Returns the decision and the TAT to store: the new one when admitted; on a refusal, the
/// clamped one if the stored TAT lay further ahead than GCRA can reach (a clock that ran
/// ahead), so the caller is never blocked for longer than `tau`; else `None`.
pub fn decide(tat: Option<Stored>, p: &Params, cost: u64, now_us: u64) -> (Decision, Option<Tat>) {
    let t = p.t();
    let tau = u128::from(p.burst) * t;
    let now = u128::from(now_us) * 1_000 * u128::from(p.count);
    let cur = effective(tat, p, now);
    let next = cur + u128::from(cost) * t;
    let tick_ms = p.tick_ms();
    if next - now <= tau {
        let d = Decision {
            allowed: true,
            limit: p.burst,
            remaining: sat_u64((tau - (next - now)) / t),
            retry_after_ms: 0,
            reset_after_ms: sat_u64(div_ceil(next - now, tick_ms)),
        };
        (d, Some(Tat::from_ticks(next, p.count)))
    } else {
        // Admitted once `next - now' <= tau`, i.e. at `now' = next - tau` (> now here).
        let d = Decision {
            allowed: false,
            limit: p.burst,
            remaining: sat_u64((tau - (cur - now)) / t),
            retry_after_ms: sat_u64(div_ceil(next - tau - now, tick_ms)),
            reset_after_ms: sat_u64(div_ceil(cur - now, tick_ms)),
        };
        let clamped = tat.is_some_and(|t| t.ticks(p.count) > cur);
        (d, clamped.then(|| Tat::from_ticks(cur, p.count)))
    }
}

/// ms (rounded up) a request admitted at `now_us` waits before its turn: the queue view.
pub fn delay_ms(tat: Option<Stored>, p: &Params, now_us: u64) -> u64 {
    let now = u128::from(now_us) * 1_000 * u128::from(p.count);
    sat_u64(div_ceil(effective(tat, p, now) - now, p.tick_ms()))
}

/// Whole tokens available at `now_us` (the token-bucket view of the same state).
pub fn tokens(tat: Option<Stored>, p: &Params, now_us: u64) -> u64 {
    let now = u128::from(now_us) * 1_000 * u128::from(p.count);
    let tau = u128::from(p.burst) * p.t();
    sat_u64((tau - (effective(tat, p, now) - now)) / p.t())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_040_000_000; // µs, aligned to a minute

    fn p(burst: u64, count: u64, period_ms: u64) -> Params {
        Params::new(burst, count, period_ms, GCRA_NAMES).unwrap()
    }

    /// Runs a request and stores the result, like the command layer does.
    /// The stored TAT of a test run (written under `p`, so its fraction is over `p.count`).
    fn st<'a>(s: &'a Option<Tat>, p: &Params) -> Option<Stored<'a>> {
        s.as_ref().map(|tat| Stored { tat, den: p.count })
    }

    fn hit(s: &mut Option<Tat>, p: &Params, cost: u64, now_us: u64) -> Decision {
        let (d, n) = decide(st(s, p), p, cost, now_us);
        if let Some(n) = n {
            *s = Some(n);
        }
        d
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
    fn clock_far_behind_reads_fully_spent() {
        let p = p(2, 1, 1000);
        let mut s = None;
        hit(&mut s, &p, 1, T0 + 3_600_000_000);
        // An hour back: the stored TAT is an hour ahead; read as fully spent, blocked at most
        // for the algorithm's own reset time (2 s), not an hour.
        let d = hit(&mut s, &p, 1, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 1000, 2000)
        );
    }

    #[test]
    fn changing_count_rounds_up_never_admits_more() {
        let mut s = None;
        hit(&mut s, &p(3, 3, 1000), 1, T0); // TAT = T0 + 333333333.33 ns
        let tat = s.unwrap();
        assert_eq!(tat.frac, 1);
        let ticks = Stored { tat: &tat, den: 3 }.ticks(7);
        assert_eq!(ticks, u128::from(tat.ns) * 7 + 3); // ceil(1*7/3) = 3
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
        /// For any two admitted requests i <= j, the cost admitted between them is at most
        /// `burst + (now_j - now_i) / T`.
        #[test]
        fn never_more_than_burst_plus_rate(
            p in arb_params(),
            steps in prop::collection::vec((-3_000_000i64..3_000_000, 1u64..5), 1..80),
        ) {
            let mut s = None;
            let mut now = T0 as i64;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            for (dt, cost) in steps {
                now += dt.abs() / 7;
                let cost = cost.min(p.burst);
                if hit(&mut s, &p, cost, now as u64).allowed {
                    admitted.push((now as u64, cost));
                }
            }
            for i in 0..admitted.len() {
                let mut sum: u128 = 0;
                for j in i..admitted.len() {
                    sum += u128::from(admitted[j].1);
                    let elapsed_ns = u128::from(admitted[j].0.saturating_sub(admitted[i].0)) * 1000;
                    // sum * T <= tau + elapsed, in ns scaled by count.
                    let lhs = sum * u128::from(p.period_ms) * 1_000_000;
                    let rhs = u128::from(p.burst) * u128::from(p.period_ms) * 1_000_000
                        + elapsed_ns * u128::from(p.count);
                    prop_assert!(lhs <= rhs, "admitted {} between {} and {}", sum, i, j);
                }
            }
        }

        /// A clock moved backwards never adds credit: fewer or as many requests fit right
        /// after the jump as right before it; the caller is blocked at most `tau`, and the
        /// retry it is told is exact.
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
            let tau_ms = (u128::from(p.burst) * u128::from(p.period_ms)).div_ceil(u128::from(p.count));
            prop_assert!(u128::from(d.retry_after_ms) <= tau_ms && u128::from(d.reset_after_ms) <= tau_ms);
            if !d.allowed {
                prop_assert!(decide(st(&s, &p), &p, 1, back + d.retry_after_ms * 1000).0.allowed);
            }
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
