//! Exact sliding log: one timestamp (µs) per admitted unit of cost, oldest first.
//!
//! A request of cost `c` at `now` is admitted iff the cost admitted in the trailing window
//! `(now - W, now]` plus `c` is at most `limit`. An entry at `e` is inside the window at `t`
//! iff `t < e + W`, so it leaves at exactly `e + W`. Time never runs backwards for a key: a
//! request is decided, and recorded, as of the newest entry's time when the clock reads
//! earlier (the key's own time), so the entries stay ascending and a refusal writes
//! nothing.
//! Memory: 4 bytes per unit admitted in the window while the entries span at most about
//! 71 min, else 8 ([`Stamps`]); the room doubles as it fills, so at most about `8 * limit`
//! bytes (`16 * limit` for entries spanning more).

use super::algorithm::{rule_info, Algorithm, Spent};
use super::codec::{DecodeError, Encoded, InfoValue, Reader, MAX_TIME_US};
use super::request::Extra;
use super::stamps::Stamps;
use super::table::Algo;
use super::window::Params;
use super::{div_ceil, sat_u64, Decision, ParamError, US_PER_MS};

/// The log: admission timestamps in µs, ascending.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Log {
    entries: Stamps,
}

fn ms_until(at_us: u64, now_us: u64) -> u64 {
    sat_u64(div_ceil(
        u128::from(at_us.saturating_sub(now_us)),
        u128::from(US_PER_MS),
    ))
}

impl Log {
    /// A log holding `entries` (µs, which must be ascending); None if they are not, or the
    /// room for them cannot be allocated.
    pub fn from_sorted(entries: &[u64]) -> Option<Log> {
        Stamps::from_sorted(entries).map(|entries| Log { entries })
    }

    /// The timestamps, oldest first.
    pub fn entries(&self) -> &Stamps {
        &self.entries
    }

    /// Index of the first entry still inside the window at `now_us`.
    fn first_live(&self, w_us: u64, now_us: u64) -> usize {
        self.entries
            .partition_point(|e| e.saturating_add(w_us) <= now_us)
    }

    /// The effective now: never before the newest entry (the key's own time: every write
    /// appends entries stamped with it).
    #[inline]
    fn effective_us(&self, now_us: u64) -> u64 {
        self.entries.back().map_or(now_us, |b| b.max(now_us))
    }

    /// Decides a request of `cost` (validated `1..=limit`) as of the effective now; when
    /// admitted and `commit`, records it there (dropping entries that left the window).
    /// Returns the decision and whether the log changed (admitted, when `commit`); a refusal
    /// changes nothing. Retry and reset count from `now_us`.
    pub fn hit(&mut self, p: &Params, cost: u64, now_us: u64, commit: bool) -> (Decision, bool) {
        let w = p.span_ms * US_PER_MS;
        let at = self.effective_us(now_us);
        let first = self.first_live(w, at);
        let live = (self.entries.len() - first) as u64;
        if live.saturating_add(cost) <= p.limit {
            if commit {
                self.entries.drain_front(first);
                // Only a failed allocation leaves the entries unrecorded.
                self.entries
                    .push(at, usize::try_from(cost).unwrap_or(usize::MAX));
            }
            let d = Decision {
                allowed: true,
                limit: p.limit,
                remaining: p.limit - live - cost,
                retry_after_ms: 0,
                // A cost-0 request (a peek) adds no entry: the newest one, if any, counts.
                reset_after_ms: if cost > 0 {
                    ms_until(at + w, now_us)
                } else {
                    self.reset_ms(w, live, now_us)
                },
            };
            return (d, commit);
        }
        // Room appears once the (live + cost - limit) oldest live entries have left.
        let k = (live + cost - p.limit) as usize;
        let leaves = self.entries.get(first + k - 1).map_or(at, |e| e + w);
        let d = Decision {
            allowed: false,
            limit: p.limit,
            remaining: p.limit.saturating_sub(live),
            retry_after_ms: ms_until(leaves, now_us).max(1),
            reset_after_ms: self.reset_ms(w, live, now_us),
        };
        (d, false)
    }

    /// ms until the newest of `live` entries in the window leaves it (0 if none is live).
    fn reset_ms(&self, w_us: u64, live: u64, now_us: u64) -> u64 {
        if live > 0 {
            self.entries
                .back()
                .map_or(0, |n| ms_until(n + w_us, now_us))
        } else {
            0
        }
    }

    /// `REFUND n`: gives back the `n` newest units (entries) in the window of the effective
    /// now, dropping the entries that left it. Returns whether the log changed. The key's
    /// own time is its newest entry, so after a refund it may be earlier: a later request is
    /// still recorded no earlier than the newest entry left, and never admits more than the
    /// entries in its window allow.
    pub fn refund(&mut self, p: &Params, n: u64, now_us: u64) -> bool {
        let w = p.span_ms * US_PER_MS;
        let at = self.effective_us(now_us);
        let first = self.first_live(w, at);
        let before = self.entries.len();
        self.entries.drain_front(first);
        self.entries
            .truncate_back(usize::try_from(n).unwrap_or(usize::MAX));
        self.entries.len() != before
    }
}

/// A sliding-log state: the rule last applied and the log.
///
/// Codec (log 5): limit, window_ms, n, then n timestamps (µs, ascending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    pub params: Params,
    pub log: Log,
}

impl Algorithm for LogState {
    type Rule = Params;

    const GROWS: bool = true;

    fn rule(_algo: Algo, numbers: [u64; 3]) -> Result<Params, ParamError> {
        let [x, y, _] = numbers;
        Params::new(x, y)
    }

    #[inline]
    fn algo(_rule: &Params) -> Algo {
        Algo::Log
    }

    #[inline]
    fn limit(rule: &Params) -> u64 {
        rule.limit
    }

    fn fresh(rule: &Params) -> LogState {
        LogState {
            params: *rule,
            log: Log::default(),
        }
    }

    fn spend(&mut self, rule: &Params, cost: u64, now_us: u64, commit: bool) -> Spent {
        let (d, changed) = self.log.hit(rule, cost, now_us, commit);
        if d.allowed && commit {
            self.params = *rule;
        }
        (d, Extra::None, changed)
    }

    fn refund(&mut self, rule: &Params, n: u64, now_us: u64) -> bool {
        let changed = self.log.refund(rule, n, now_us);
        changed | (std::mem::replace(&mut self.params, *rule) != *rule)
    }

    fn info(&self, algo: Algo, _now_us: u64) -> Vec<(&'static str, InfoValue)> {
        let mut f = rule_info(algo, &[self.params.limit, self.params.span_ms]);
        let e = self.log.entries();
        f.extend([
            ("entries", InfoValue::Int(e.len() as u64)),
            ("oldest_us", InfoValue::Int(e.front().unwrap_or(0))),
            ("newest_us", InfoValue::Int(e.back().unwrap_or(0))),
        ]);
        f
    }

    fn encode(&self, algo: Algo) -> Encoded {
        let entries = self.log.entries();
        let n = entries.len();
        let mut e = Encoded::new(algo.tag(), 3 + n);
        for f in [self.params.limit, self.params.span_ms, n as u64] {
            e.push(f);
        }
        for t in entries.iter() {
            e.push(t);
        }
        e
    }

    fn decode(_algo: Algo, r: &mut Reader) -> Result<LogState, DecodeError> {
        let params =
            Params::new(r.u64()?, r.u64()?).map_err(|_| DecodeError("bad log parameters"))?;
        let n = r.count(1)?;
        let mut entries = Vec::with_capacity(n as usize);
        let mut prev = 0;
        for _ in 0..n {
            let t = r.u64()?;
            if t < prev || t > MAX_TIME_US {
                return Err(DecodeError("bad log entry"));
            }
            prev = t;
            entries.push(t);
        }
        let log = Log::from_sorted(&entries).ok_or(DecodeError("bad log entry"))?;
        Ok(LogState { params, log })
    }

    fn heap_bytes(&self) -> usize {
        self.log.entries().heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::testutil::clock_step;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const T0: u64 = 1_700_000_040_000_000;

    #[test]
    fn boundary_attack_admits_only_the_limit() {
        let p = Params::new(100, 60_000).unwrap();
        let mut log = Log::default();
        let mut admitted = 0;
        for _ in 0..100 {
            admitted += u64::from(log.hit(&p, 1, T0 + 59_500_000, true).0.allowed);
        }
        for _ in 0..100 {
            admitted += u64::from(log.hit(&p, 1, T0 + 60_500_000, true).0.allowed);
        }
        assert_eq!(admitted, 100);
        let d = log.hit(&p, 1, T0 + 60_500_000, true).0;
        // The first burst leaves at 59.5 s + 60 s.
        assert_eq!((d.retry_after_ms, d.reset_after_ms), (59_000, 59_000));
        assert!(!log.hit(&p, 1, T0 + 119_499_000, true).0.allowed);
        assert_eq!(log.hit(&p, 100, T0 + 119_500_000, true).0.remaining, 0);
        assert_eq!(log.entries().len(), 100);
    }

    #[test]
    fn retry_waits_for_enough_entries() {
        let p = Params::new(3, 1000).unwrap();
        let mut log = Log::default();
        log.hit(&p, 1, T0, true);
        log.hit(&p, 1, T0 + 100_000, true);
        log.hit(&p, 1, T0 + 200_000, true);
        let d = log.hit(&p, 2, T0 + 300_000, true).0;
        assert_eq!(
            (d.allowed, d.retry_after_ms, d.reset_after_ms),
            (false, 800, 900)
        );
    }

    /// The log as it was stored before [`Stamps`]: a plain deque of `u64`, with the same
    /// `hit`. The compact log must decide, and hold, exactly what this one does.
    #[derive(Default)]
    struct Reference {
        entries: VecDeque<u64>,
    }

    impl Reference {
        fn hit(&mut self, p: &Params, cost: u64, now_us: u64, commit: bool) -> (Decision, bool) {
            let w = p.span_ms * US_PER_MS;
            let at = self.entries.back().map_or(now_us, |&b| b.max(now_us));
            let first = self.entries.partition_point(|&e| e.saturating_add(w) <= at);
            let live = (self.entries.len() - first) as u64;
            if live + cost <= p.limit {
                if commit {
                    self.entries.drain(..first);
                    self.entries.extend(std::iter::repeat_n(at, cost as usize));
                }
                let d = Decision {
                    allowed: true,
                    limit: p.limit,
                    remaining: p.limit - live - cost,
                    retry_after_ms: 0,
                    reset_after_ms: ms_until(at + w, now_us),
                };
                return (d, commit);
            }
            let k = (live + cost - p.limit) as usize;
            let leaves = self.entries.get(first + k - 1).map_or(at, |&e| e + w);
            let d = Decision {
                allowed: false,
                limit: p.limit,
                remaining: p.limit.saturating_sub(live),
                retry_after_ms: ms_until(leaves, now_us).max(1),
                reset_after_ms: if live > 0 {
                    self.entries.back().map_or(0, |&n| ms_until(n + w, now_us))
                } else {
                    0
                },
            };
            (d, false)
        }
    }

    #[test]
    fn entries_spanning_more_than_an_offset_are_kept_exactly() {
        // A 3 h window: entries 2 h apart do not fit 32-bit offsets from one base.
        let p = Params::new(5, 3 * 3_600_000).unwrap();
        let mut log = Log::default();
        assert!(log.hit(&p, 2, T0, true).0.allowed);
        assert!(log.hit(&p, 2, T0 + 7_200_000_000, true).0.allowed);
        let d = log.hit(&p, 2, T0 + 7_200_000_001, true).0;
        // The first two leave at T0 + 3 h.
        assert_eq!((d.allowed, d.retry_after_ms), (false, 3_600_000));
        assert_eq!(
            log.entries().iter().collect::<Vec<_>>(),
            [T0, T0, T0 + 7_200_000_000, T0 + 7_200_000_000]
        );
        let d = log.hit(&p, 2, T0 + 10_800_000_000, true).0;
        assert_eq!((d.allowed, d.remaining), (true, 1));
        assert_eq!(
            log.entries().iter().collect::<Vec<_>>(),
            [
                T0 + 7_200_000_000,
                T0 + 7_200_000_000,
                T0 + 10_800_000_000,
                T0 + 10_800_000_000
            ]
        );
    }

    proptest! {
        /// The compact log and the plain deque decide every call the same, report the same
        /// change and hold the same entries: any window (up to the longest), clocks that jump
        /// forward by more than 2^32 µs and back, dry runs.
        #[test]
        fn same_as_a_plain_deque(
            limit in prop_oneof![1u64..8, 1u64..300],
            window_ms in prop_oneof![
                1u64..3_000,
                Just(3_600_000u64),
                4_000_000u64..4_600_000,
                Just(6_000_000u64),
                Just(1_000_000_000u64),
                Just(1_000_000_000_000u64),
            ],
            steps in prop::collection::vec((
                prop_oneof![
                    0i64..2_000,
                    0i64..5_000_000_000,
                    4_294_967_000i64..4_294_968_000,
                    0i64..20_000_000_000,
                    -8_000_000_000i64..0,
                ],
                1u64..40,
                prop::bool::weighted(0.9),
            ), 1..150),
        ) {
            let p = Params::new(limit, window_ms).unwrap();
            let mut log = Log::default();
            let mut reference = Reference::default();
            let mut now = T0 as i64;
            for (dt, cost, commit) in steps {
                now += dt;
                let cost = cost.min(limit);
                let got = log.hit(&p, cost, now as u64, commit);
                prop_assert_eq!(got, reference.hit(&p, cost, now as u64, commit));
                prop_assert!(log.entries().iter().eq(reference.entries.iter().copied()));
            }
        }

        /// Whatever the clock does (steps back and forward): (a) the cost admitted in every
        /// trailing window of the key's own time (the effective now, which never goes back)
        /// never exceeds the limit; (b) after a write whose reset_after_ms is R, the key is
        /// fresh R ms later on the clock, and no later reply counts beyond that; (c) a
        /// refusal or a dry run changes nothing; retry_after_ms is exact.
        #[test]
        fn time_never_runs_backwards(
            limit in 1u64..15, window_ms in 1u64..3000,
            steps in prop::collection::vec((
                clock_step(-300_000..300_000, -30_000_000..-1_000_000, 1_000_000..30_000_000),
                1u64..5,
                prop::bool::weighted(0.8),
            ), 1..80),
        ) {
            let p = Params::new(limit, window_ms).unwrap();
            let mut log = Log::default();
            let mut now = T0 as i64;
            let mut key_time = 0;
            let mut fresh_at: Option<u64> = None;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            for (dt, cost, commit) in steps {
                now += dt;
                let now_us = now as u64;
                let cost = cost.min(limit);
                let at = log.entries().back().map_or(now_us, |b| b.max(now_us));
                prop_assert!(at >= key_time);
                let before = log.clone();
                let (d, changed) = log.hit(&p, cost, now_us, commit);
                if let Some(f) = fresh_at {
                    if now_us >= f {
                        prop_assert_eq!(d, Log::default().hit(&p, cost, now_us, false).0);
                    } else if !d.allowed {
                        prop_assert!(d.reset_after_ms <= (f - now_us).div_ceil(1000));
                    }
                }
                if d.allowed && commit {
                    prop_assert!(changed);
                    key_time = at;
                    admitted.push((at, cost));
                    fresh_at = Some(now_us + d.reset_after_ms * 1000);
                } else {
                    prop_assert!(!changed);
                    prop_assert_eq!(&log, &before);
                }
                if !d.allowed {
                    let r = d.retry_after_ms;
                    let mut probe = log.clone();
                    prop_assert!(probe.hit(&p, cost, now_us + r * 1000, false).0.allowed);
                    prop_assert!(!probe.hit(&p, cost, now_us + (r - 1) * 1000, false).0.allowed);
                }
            }
            let w = window_ms * 1000;
            for &(t, _) in &admitted {
                let sum: u64 = admitted.iter().filter(|a| a.0 >= t && a.0 < t + w).map(|a| a.1).sum();
                prop_assert!(sum <= limit);
            }
        }

        /// A limit or window changed for an existing log keeps its entries with their times,
        /// read under the new numbers.
        #[test]
        fn rule_change_keeps_entries(
            limit in 1u64..15, window_ms in 1u64..3000,
            new_limit in 1u64..15, new_window_ms in 1u64..3000,
            steps in prop::collection::vec((0u64..300_000, 1u64..5), 1..30),
        ) {
            let p = Params::new(limit, window_ms).unwrap();
            let q = Params::new(new_limit, new_window_ms).unwrap();
            let mut log = Log::default();
            let mut now = T0;
            for (dt, cost) in steps {
                now += dt;
                log.hit(&p, cost.min(limit), now, true);
            }
            let w = new_window_ms * 1000;
            let live = log.entries().iter().filter(|&e| e + w > now).count() as u64;
            let d = log.clone().hit(&q, 1, now, false).0;
            prop_assert_eq!(d.allowed, live < new_limit);
            prop_assert_eq!(d.remaining, new_limit.saturating_sub(live + u64::from(d.allowed)));
        }
    }
}
