//! `CL.THROTTLE`: redis-cell's GCRA, reproduced to give identical replies for valid arguments.
//!
//! redis-cell works in integer nanoseconds with an emission interval truncated through `f64`
//! (`T = (period_ns as f64 / count as f64) as i64`), a tolerance `dvt = T * (max_burst + 1)`,
//! replies seconds truncated then plus one if at least a whole ms remains, and computes
//! `remaining` as `(next_us as f64 / T_us as f64) as i64`. Those choices are kept as they are.
//! As in redis-cell, a TAT ahead of the clock is read as it is (nothing clamped, a refusal
//! writes nothing): time never runs backwards for the key (see [`super::gcra`]).

use super::{ParamError, MAX_SPAN_MS, NS_PER_MS};

const NS_PER_S: i128 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub max_burst: u64,
    pub count: u64,
    pub period_s: u64,
    /// Emission interval, ns (redis-cell's truncation).
    t_ns: i128,
}

impl Params {
    /// Validates: count and period at least 1 (redis-cell answers nonsense otherwise; a
    /// `max_burst` of 0 is no burst, one request per interval), the period at most
    /// [`MAX_SPAN_MS`] in seconds, the interval at least 1 µs (redis-cell divides by it in
    /// µs), `dvt` within range.
    pub fn new(max_burst: u64, count: u64, period_s: u64) -> Result<Self, ParamError> {
        super::positive(count, "count_per_period")?;
        super::positive(period_s, "period")?;
        if period_s > MAX_SPAN_MS / 1000 {
            return Err(ParamError::AtMost("period", MAX_SPAN_MS / 1000));
        }
        let t_ns = interval_ns(i128::from(period_s) * NS_PER_S, count);
        if t_ns < 1_000 {
            return Err(ParamError::TooLarge(
                "count_per_period / period gives an emission interval below 1 microsecond",
            ));
        }
        let dvt = t_ns * (i128::from(max_burst) + 1);
        if dvt > i128::from(MAX_SPAN_MS) * i128::from(NS_PER_MS) {
            return Err(ParamError::TooLarge(
                "(max_burst + 1) * period / count_per_period must not exceed 1000000000000 ms",
            ));
        }
        Ok(Params {
            max_burst,
            count,
            period_s,
            t_ns,
        })
    }

    /// The limit redis-cell reports: `max_burst + 1`.
    pub fn limit(&self) -> u64 {
        self.max_burst.saturating_add(1)
    }
}

/// redis-cell's emission interval in ns: `period_ns / count` through `f64`, truncated.
pub fn interval_ns(period_ns: i128, count: u64) -> i128 {
    ((period_ns as f64) / (count as f64)) as i64 as i128
}

/// The reply of `CL.THROTTLE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub limited: bool,
    pub limit: i64,
    pub remaining: i64,
    pub retry_after_s: i64,
    pub reset_after_s: i64,
}

/// redis-cell's rounding: the duration in seconds through `f64` (`as_seconds_f64() as
/// i64`: exact below 2^53 s except that a fraction within an `f64` step of 1 rounds up),
/// plus one if a whole ms remains.
fn cell_secs(ns: i128) -> i64 {
    let s = ns / NS_PER_S;
    let sub = ns % NS_PER_S;
    let secs = (s as f64 + sub as f64 / NS_PER_S as f64) as i64;
    secs + i64::from(sub / 1_000_000 > 0)
}

impl Params {
    /// The emission interval in ns (redis-cell's truncation).
    pub fn t_ns(&self) -> u64 {
        u64::try_from(self.t_ns).unwrap_or(u64::MAX)
    }
}

/// One `CL.THROTTLE` of `quantity` at `now_ns` (0 is a peek: the caller stores nothing).
/// Returns the reply, the TAT in ns to store (when admitted; a refusal stores nothing) and
/// the time to fresh in ns (the TTL).
/// A TAT further ahead than an admission could leave it (a clock that reads earlier than the
/// key's own time) is read as it is: refused, with the time the clock must catch up counted.
pub fn throttle(
    tat_ns: Option<u64>,
    p: &Params,
    quantity: u64,
    now_ns: u64,
) -> (Reply, Option<u64>, i128) {
    let now = i128::from(now_ns);
    let t = p.t_ns;
    let dvt = t * (i128::from(p.max_burst) + 1);
    let increment = t * i128::from(quantity);
    let tat = tat_ns.map_or(now, i128::from).max(now);
    let new_tat = tat + increment;
    let diff = now - (new_tat - dvt);
    let (limited, retry, ttl, stored) = if diff < 0 {
        let retry = if increment <= dvt { -diff } else { -NS_PER_S };
        (true, retry, tat - now, None)
    } else {
        (false, -NS_PER_S, new_tat - now, u64::try_from(new_tat).ok())
    };
    let next = dvt - ttl;
    // (Never negative: redis-cell's truncation answers -1 for a TAT within a µs of `t`
    // beyond `dvt`, which only a clock behind the key or a lowered burst leaves.)
    let remaining = if next > -t {
        (((next / 1_000) as f64 / (t / 1_000) as f64) as i64).max(0)
    } else {
        0
    };
    let reply = Reply {
        limited,
        limit: p.limit() as i64,
        remaining,
        retry_after_s: cell_secs(retry),
        reset_after_s: cell_secs(ttl),
    };
    (reply, stored, ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_040_000_000_000;

    fn run(p: &Params, tat: &mut Option<u64>, q: u64, now: u64) -> [i64; 5] {
        let (r, n, _) = throttle(*tat, p, q, now);
        if let Some(n) = n {
            *tat = Some(n);
        }
        [
            i64::from(r.limited),
            r.limit,
            r.remaining,
            r.retry_after_s,
            r.reset_after_s,
        ]
    }

    #[test]
    fn redis_cell_readme_sequence() {
        let p = Params::new(15, 30, 60).unwrap();
        let mut tat = None;
        assert_eq!(run(&p, &mut tat, 1, NOW), [0, 16, 15, -1, 2]);
        for _ in 2..16 {
            run(&p, &mut tat, 1, NOW);
        }
        assert_eq!(run(&p, &mut tat, 1, NOW), [0, 16, 0, -1, 32]);
        for _ in 17..=20 {
            assert_eq!(run(&p, &mut tat, 1, NOW), [1, 16, 0, 2, 32]);
        }
    }

    #[test]
    fn quantity_above_the_limit_never_retries() {
        let p = Params::new(5, 1, 1).unwrap();
        let mut tat = None;
        assert_eq!(run(&p, &mut tat, 7, NOW), [1, 6, 6, -1, 0]);
        assert_eq!(tat, None);
    }

    #[test]
    fn clock_back_decides_at_the_keys_own_time() {
        let p = Params::new(1, 1, 60).unwrap();
        let day = 86_400_000_000_000;
        let mut tat = None;
        for _ in 0..3 {
            run(&p, &mut tat, 1, NOW + day);
        }
        let written = tat;
        // A day back: still spent; the replies count the day the clock must catch up, and
        // nothing is written.
        assert_eq!(run(&p, &mut tat, 1, NOW), [1, 2, 0, 86_460, 86_520]);
        assert_eq!(tat, written);
        assert_eq!(run(&p, &mut tat, 1, NOW + day + 59_000_000_000)[0], 1);
        assert_eq!(run(&p, &mut tat, 1, NOW + day + 60_000_000_000)[0], 0);
    }

    #[test]
    fn lowering_max_burst_keeps_the_debt() {
        // redis-cell: `99 1 1 100` then `4 1 1` answers [1, 5, 0, 96, 100].
        let mut tat = None;
        assert_eq!(
            run(&Params::new(99, 1, 1).unwrap(), &mut tat, 100, NOW),
            [0, 100, 0, -1, 100]
        );
        assert_eq!(
            run(&Params::new(4, 1, 1).unwrap(), &mut tat, 1, NOW),
            [1, 5, 0, 96, 100]
        );
    }

    #[test]
    fn max_burst_zero_is_one_request_per_interval() {
        let p = Params::new(0, 1, 2).unwrap();
        let mut tat = None;
        assert_eq!(run(&p, &mut tat, 1, NOW), [0, 1, 0, -1, 2]);
        assert_eq!(run(&p, &mut tat, 1, NOW), [1, 1, 0, 2, 2]);
        assert_eq!(run(&p, &mut tat, 1, NOW + 2_000_000_000), [0, 1, 0, -1, 2]);
    }

    #[test]
    fn quantity_zero_peeks() {
        let p = Params::new(5, 1, 1).unwrap();
        assert_eq!(throttle(None, &p, 0, NOW).0.remaining, 6);
        let mut tat = None;
        run(&p, &mut tat, 2, NOW);
        let (r, _, ttl) = throttle(tat, &p, 0, NOW + 500_000_000);
        assert_eq!((r.limited, r.remaining, r.reset_after_s), (false, 4, 2));
        assert_eq!(ttl, 1_500_000_000);
    }

    #[test]
    fn seconds_round_as_redis_cell_does() {
        assert_eq!(cell_secs(-NS_PER_S), -1);
        assert_eq!(cell_secs(0), 0);
        assert_eq!(cell_secs(999_999), 0);
        assert_eq!(cell_secs(1_000_000), 1);
        assert_eq!(cell_secs(2 * NS_PER_S), 2);
        // Near 10^9 s an f64 step is 2^-23 s: a fraction that close to 1 rounds up first.
        assert_eq!(
            cell_secs(999_999_999 * NS_PER_S + 999_999_990),
            1_000_000_001
        );
    }

    #[test]
    fn refuses_nonsense() {
        assert!(Params::new(0, 1, 1).is_ok());
        assert!(Params::new(1, 0, 1).is_err());
        assert!(Params::new(1, 1, 0).is_err());
        assert!(Params::new(1, 2_000_000, 1).is_err());
    }
}
