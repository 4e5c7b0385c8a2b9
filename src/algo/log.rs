//! Exact sliding log: one timestamp (µs) per admitted unit of cost, oldest first.
//!
//! A request of cost `c` at `now` is admitted iff the cost admitted in the trailing window
//! `(now - W, now]` plus `c` is at most `limit`. An entry at `e` is inside the window at `t`
//! iff `t < e + W`, so it leaves at exactly `e + W`. Entries stamped after `now` (the clock
//! went back) are read as stamped `now`: the most restrictive state possible now.
//! Memory: 4 bytes per unit admitted in the window while the entries span at most about
//! 71 min, else 8 ([`Stamps`]); the room doubles as it fills, so at most about `8 * limit`
//! bytes (`16 * limit` for entries spanning more).

use super::stamps::Stamps;
use super::window::Params;
use super::{div_ceil, sat_u64, Decision, US_PER_MS};

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

    /// Decides a request of `cost` (validated `1..=limit`); when admitted and `commit`,
    /// records it (dropping entries that left the window). Returns the decision and whether
    /// the log changed (admitted, or entries from the future clamped, when `commit`).
    pub fn hit(&mut self, p: &Params, cost: u64, now_us: u64, commit: bool) -> (Decision, bool) {
        let w = p.window_ms * US_PER_MS;
        let first = self.first_live(w, now_us);
        let live = (self.entries.len() - first) as u64;
        let newest = self.entries.back().map(|e| e.min(now_us));
        if live.saturating_add(cost) <= p.limit {
            if commit {
                self.entries.drain_front(first);
                // Clamps entries from the future (a clock that ran ahead) to `now` first.
                // Only a failed allocation leaves the entries unrecorded.
                self.entries
                    .push(now_us, usize::try_from(cost).unwrap_or(usize::MAX));
            }
            let d = Decision {
                allowed: true,
                limit: p.limit,
                remaining: p.limit - live - cost,
                retry_after_ms: 0,
                reset_after_ms: ms_until(now_us + w, now_us),
            };
            return (d, commit);
        }
        // Room appears once the (live + cost - limit) oldest live entries have left.
        let k = (live + cost - p.limit) as usize;
        let leaves = self
            .entries
            .get(first + k - 1)
            .map_or(now_us, |e| e.min(now_us) + w);
        let d = Decision {
            allowed: false,
            limit: p.limit,
            remaining: p.limit.saturating_sub(live),
            retry_after_ms: ms_until(leaves, now_us).max(1),
            reset_after_ms: if live > 0 {
                newest.map_or(0, |n| ms_until(n + w, now_us))
            } else {
                0
            },
        };
        (d, commit && self.entries.clamp(now_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            let w = p.window_ms * US_PER_MS;
            let first = self
                .entries
                .partition_point(|&e| e.saturating_add(w) <= now_us);
            let live = (self.entries.len() - first) as u64;
            let newest = self.entries.back().map(|&e| e.min(now_us));
            if live + cost <= p.limit {
                if commit {
                    self.entries.drain(..first);
                    self.clamp(now_us);
                    self.entries
                        .extend(std::iter::repeat_n(now_us, cost as usize));
                }
                let d = Decision {
                    allowed: true,
                    limit: p.limit,
                    remaining: p.limit - live - cost,
                    retry_after_ms: 0,
                    reset_after_ms: ms_until(now_us + w, now_us),
                };
                return (d, commit);
            }
            let k = (live + cost - p.limit) as usize;
            let leaves = self
                .entries
                .get(first + k - 1)
                .map_or(now_us, |&e| e.min(now_us) + w);
            let d = Decision {
                allowed: false,
                limit: p.limit,
                remaining: p.limit.saturating_sub(live),
                retry_after_ms: ms_until(leaves, now_us).max(1),
                reset_after_ms: if live > 0 {
                    newest.map_or(0, |n| ms_until(n + w, now_us))
                } else {
                    0
                },
            };
            (d, commit && self.clamp(now_us))
        }

        fn clamp(&mut self, now_us: u64) -> bool {
            let mut changed = false;
            for e in self.entries.iter_mut().rev() {
                if *e <= now_us {
                    break;
                }
                *e = now_us;
                changed = true;
            }
            changed
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

        /// With a clock that only moves forward, the cost admitted in every trailing window
        /// never exceeds the limit; with any clock, retry_after_ms is exact.
        #[test]
        fn never_more_than_limit_in_any_trailing_window(
            limit in 1u64..15, window_ms in 1u64..3000, back in any::<bool>(),
            steps in prop::collection::vec((-1_000_000i64..3_000_000, 1u64..5), 1..80),
        ) {
            let p = Params::new(limit, window_ms).unwrap();
            let mut log = Log::default();
            let mut now = T0 as i64;
            let mut admitted: Vec<(u64, u64)> = Vec::new();
            for (dt, cost) in steps {
                let dt = if back { dt } else { dt.abs() };
                now = (now + dt / 9) / 1000 * 1000;
                let cost = cost.min(limit);
                let d = log.hit(&p, cost, now as u64, true).0;
                if d.allowed {
                    admitted.push((now as u64, cost));
                } else {
                    let r = d.retry_after_ms;
                    let mut probe = log.clone();
                    prop_assert!(probe.hit(&p, cost, now as u64 + r * 1000, false).0.allowed);
                    prop_assert!(!probe.hit(&p, cost, now as u64 + (r - 1) * 1000, false).0.allowed);
                }
            }
            if !back {
                let w = window_ms * 1000;
                for &(t, _) in &admitted {
                    let sum: u64 = admitted.iter().filter(|a| a.0 >= t && a.0 < t + w).map(|a| a.1).sum();
                    prop_assert!(sum <= limit);
                }
            }
        }
    }
}
