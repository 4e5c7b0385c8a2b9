//! `CL.THROTTLE`: redis-cell's GCRA, reproduced to give identical replies for valid arguments.
//!
//! redis-cell works in integer nanoseconds with an emission interval truncated through `f64`
//! (`T = (period_ns as f64 / count as f64) as i64`), a tolerance `dvt = T * (max_burst + 1)`,
//! replies seconds truncated then plus one if at least a whole ms remains, and computes
//! `remaining` as `(next_us as f64 / T_us as f64) as i64`. Those choices are kept as they are.
//! Unlike redis-cell, time never runs backwards for a key: a request is decided as of the
//! key's own time when the clock reads earlier (see [`super::gcra`]), and nothing is
//! clamped or written on a refusal.

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
    /// Validates: every argument at least 1 (redis-cell answers nonsense otherwise), the
    /// interval at least 1 µs (redis-cell divides by it in µs), `dvt` within range.
    pub fn new(max_burst: u64, count: u64, period_s: u64) -> Result<Self, ParamError> {
        super::positive(max_burst, "max_burst")?;
        super::positive(count, "count_per_period")?;
        super::positive(period_s, "period")?;
        if period_s > MAX_SPAN_MS / 1000 {
            return Err(ParamError::SpanTooLarge("period"));
        }
        let period_ns = i128::from(period_s) * NS_PER_S;
        let t_ns = ((period_ns as f64) / (count as f64)) as i64 as i128;
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

/// The reply of `CL.THROTTLE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub limited: bool,
    pub limit: i64,
    pub remaining: i64,
    pub retry_after_s: i64,
    pub reset_after_s: i64,
}

/// redis-cell's rounding: whole seconds (truncated), plus one if a whole ms remains.
fn cell_secs(ns: i128) -> i64 {
    let s = ns / NS_PER_S;
    let sub_ms = (ns % NS_PER_S) / 1_000_000;
    (s + i128::from(sub_ms > 0)) as i64
}

/// A stored state as `CL.THROTTLE` reads it, in ns: the effective now (never before the
/// key's own time, never before now) and the TAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub at_ns: u64,
    pub tat_ns: u64,
}

impl Params {
    /// The emission interval in ns (redis-cell's truncation).
    pub fn t_ns(&self) -> u64 {
        u64::try_from(self.t_ns).unwrap_or(u64::MAX)
    }
}

/// One `CL.THROTTLE` of `quantity` (>= 1) at `now_ns`, decided as of the effective now
/// (`held.at_ns`; `now_ns` for a missing key or redis-cell's own state, which has no numbers
/// of its own). Returns the reply, the TAT in ns to store (when admitted; a refusal stores
/// nothing) and the time to fresh from `now_ns` in ns (the TTL). Retry and reset count from
/// `now_ns`, so they include the time the clock still needs to catch up.
pub fn throttle(
    held: Option<Held>,
    p: &Params,
    quantity: u64,
    now_ns: u64,
) -> (Reply, Option<u64>, i128) {
    let now = i128::from(now_ns);
    let at = held.map_or(now, |h| i128::from(h.at_ns).max(now));
    let t = p.t_ns;
    let dvt = t * (i128::from(p.max_burst) + 1);
    let increment = t * i128::from(quantity);
    let tat = held.map_or(at, |h| i128::from(h.tat_ns)).max(at);
    let new_tat = tat + increment;
    let diff = at - (new_tat - dvt);
    let (limited, retry, ttl, stored) = if diff < 0 {
        let retry = if increment <= dvt {
            -diff + (at - now)
        } else {
            -NS_PER_S
        };
        (true, retry, tat - now, None)
    } else {
        (false, -NS_PER_S, new_tat - now, u64::try_from(new_tat).ok())
    };
    // redis-cell's `remaining`, as of the effective now.
    let next = dvt - (ttl - (at - now));
    let remaining = if next > -t {
        ((next / 1_000) as f64 / (t / 1_000) as f64) as i64
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
        let held = tat.map(|tat_ns| Held { at_ns: now, tat_ns });
        let (r, n, _) = throttle(held, p, q, now);
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
    fn effective_now_ahead_of_the_clock() {
        // A re-timed state whose own time is 10 s ahead: decided there, counted from now.
        let p = Params::new(4, 1, 1).unwrap();
        let held = Held {
            at_ns: NOW + 10_000_000_000,
            tat_ns: NOW + 13_000_000_000,
        };
        let (r, stored, ttl) = throttle(Some(held), &p, 1, NOW);
        assert_eq!(
            [
                r.limited as i64,
                r.remaining,
                r.retry_after_s,
                r.reset_after_s
            ],
            [0, 1, -1, 14]
        );
        assert_eq!((stored, ttl), (Some(NOW + 14_000_000_000), 14_000_000_000));
        let held = Held {
            at_ns: NOW + 10_000_000_000,
            tat_ns: NOW + 15_000_000_000,
        };
        let (r, stored, _) = throttle(Some(held), &p, 1, NOW);
        assert_eq!(
            [
                r.limited as i64,
                r.remaining,
                r.retry_after_s,
                r.reset_after_s
            ],
            [1, 0, 11, 15]
        );
        assert_eq!(stored, None);
    }

    #[test]
    fn refuses_nonsense() {
        assert!(Params::new(0, 1, 1).is_err());
        assert!(Params::new(1, 0, 1).is_err());
        assert!(Params::new(1, 1, 0).is_err());
        assert!(Params::new(1, 2_000_000, 1).is_err());
    }
}
