//! A rule is one algorithm with its parameters: what a rate command asks for. It connects
//! the stored [`State`] to the pure algorithms; still no Redis types here.

use crate::algo::{gcra, lease, log, window, Decision};
use crate::state::{Algo, Bucket, LeaseState, LogState, State, Window};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// GCRA, token bucket or queue (`Algo` says which; the arithmetic is the same).
    Bucket(Algo, gcra::Params),
    /// Sliding or fixed window counter.
    Window(Algo, window::Params),
    /// Exact sliding log.
    Log(window::Params),
    /// Concurrency leases (`RL.ACQUIRE`).
    Acquire(lease::Params),
}

/// What a command appends after the five standard fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    None,
    /// `RL.QUEUE`: ms the admitted request waits (0 when refused).
    Delay(u64),
    /// `RL.ACQUIRE`: the lease's token (None when refused).
    Token(Option<lease::Token>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub decision: Decision,
    pub extra: Extra,
    /// The state was changed and must be stored, expired and replicated.
    pub wrote: bool,
}

impl Rule {
    pub fn algo(&self) -> Algo {
        match self {
            Rule::Bucket(a, _) | Rule::Window(a, _) => *a,
            Rule::Log(_) => Algo::Log,
            Rule::Acquire(_) => Algo::Concurrency,
        }
    }

    /// The state of a key that does not exist.
    pub fn fresh(&self) -> State {
        match *self {
            Rule::Bucket(a, params) => {
                let b = Bucket {
                    params,
                    tat: gcra::Tat { ns: 0, frac: 0 },
                };
                match a {
                    Algo::TokenBucket => State::TokenBucket(b),
                    Algo::Queue => State::Queue(b),
                    _ => State::Gcra(b),
                }
            }
            Rule::Window(a, params) => {
                let w = Window {
                    params,
                    counters: window::Counters::default(),
                };
                match a {
                    Algo::Fixed => State::Fixed(w),
                    _ => State::Sliding(w),
                }
            }
            Rule::Log(params) => State::Log(LogState {
                params,
                log: log::Log::default(),
            }),
            Rule::Acquire(p) => State::Concurrency(Box::new(LeaseState {
                limit: p.limit,
                leases: lease::Leases::default(),
            })),
        }
    }

    /// Decides a request of `cost` against `s` (the stored state, or [`Rule::fresh`]), as
    /// of the key's own time when the clock reads earlier. When admitted and `commit`,
    /// updates `s` in place under this rule's parameters; a refusal or a dry run changes
    /// nothing (but for a GCRA-family state re-timed under another emission interval, which
    /// a committed refusal stores).
    pub fn hit(&self, s: &mut State, cost: u64, now_us: u64, commit: bool) -> Outcome {
        if s.algo() != self.algo() {
            return self.hit(&mut self.fresh(), cost, now_us, false);
        }
        let mut extra = Extra::None;
        let (decision, wrote) = match (self, s) {
            (Rule::Bucket(algo, p), State::Gcra(b) | State::TokenBucket(b) | State::Queue(b)) => {
                let stored = Some(b.stored());
                let (d, next) = gcra::decide(stored, p, cost, now_us);
                if *algo == Algo::Queue {
                    let delay = gcra::delay_ms(stored, p, now_us);
                    extra = Extra::Delay(if d.allowed { delay } else { 0 });
                }
                match next {
                    // Admitted, or re-timed under a changed emission interval (the rule change
                    // taking effect, also on a refusal): store under this rule's numbers.
                    Some(tat) if commit => {
                        *b = Bucket { params: *p, tat };
                        (d, true)
                    }
                    _ => (d, false),
                }
            }
            (Rule::Window(algo, p), State::Sliding(w) | State::Fixed(w)) => {
                let (d, next) = match algo {
                    Algo::Fixed => window::fixed(Some(&w.counters), p, cost, now_us),
                    _ => window::sliding(Some(&w.counters), p, cost, now_us),
                };
                match next {
                    Some(counters) if commit => {
                        *w = Window {
                            params: *p,
                            counters,
                        };
                        (d, true)
                    }
                    _ => (d, false),
                }
            }
            (Rule::Log(p), State::Log(l)) => {
                let (d, changed) = l.log.hit(p, cost, now_us, commit);
                if d.allowed && commit {
                    l.params = *p;
                }
                (d, changed)
            }
            (Rule::Acquire(p), State::Concurrency(c)) => {
                let (d, token, changed) = c.leases.acquire(p, now_us, commit);
                extra = Extra::Token(token);
                if d.allowed && commit {
                    c.limit = p.limit;
                }
                (d, changed)
            }
            // Unreachable: the algorithms were checked equal above.
            _ => return self.hit(&mut self.fresh(), cost, now_us, false),
        };
        Outcome {
            decision,
            extra,
            wrote,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_040_000_000;

    #[test]
    fn queue_shapes_one_per_interval() {
        let rule = Rule::Bucket(
            Algo::Queue,
            gcra::Params::new(5, 1, 1000, gcra::GCRA_NAMES).unwrap(),
        );
        let mut s = rule.fresh();
        let mut got = vec![];
        for _ in 0..8 {
            let o = rule.hit(&mut s, 1, T0, true);
            got.push((o.decision.allowed, o.extra));
        }
        let delays: Vec<_> = got.iter().map(|g| g.1).collect();
        assert_eq!(
            delays,
            [0, 1000, 2000, 3000, 4000, 0, 0, 0]
                .map(Extra::Delay)
                .to_vec()
        );
        assert_eq!(got.iter().filter(|g| g.0).count(), 5);
        let o = rule.hit(&mut s, 1, T0 + 1_000_000, true);
        assert_eq!((o.decision.allowed, o.extra), (true, Extra::Delay(4000)));
        assert!(!rule.hit(&mut s, 1, T0 + 1_000_000, true).decision.allowed);
    }

    #[test]
    fn refused_and_dry_run_change_nothing() {
        let rules = [
            Rule::Bucket(
                Algo::Gcra,
                gcra::Params::new(2, 1, 1000, gcra::GCRA_NAMES).unwrap(),
            ),
            Rule::Window(Algo::Sliding, window::Params::new(2, 1000).unwrap()),
            Rule::Window(Algo::Fixed, window::Params::new(2, 1000).unwrap()),
            Rule::Log(window::Params::new(2, 1000).unwrap()),
            Rule::Acquire(lease::Params::new(2, 1000).unwrap()),
        ];
        for rule in rules {
            let mut s = rule.fresh();
            assert!(rule.hit(&mut s, 1, T0, true).wrote);
            let before = s.clone();
            let o = rule.hit(&mut s, 1, T0, false);
            assert!(o.decision.allowed && !o.wrote);
            assert_eq!(s, before);
            assert!(rule.hit(&mut s, 1, T0, true).wrote);
            let before = s.clone();
            let o = rule.hit(&mut s, 1, T0, true);
            assert!(!o.decision.allowed && !o.wrote, "{rule:?}");
            assert_eq!(s, before);
        }
    }

    use proptest::prelude::*;

    fn any_rule() -> impl Strategy<Value = Rule> {
        let n = (1u64..8, 1u64..4, 1u64..3000);
        prop_oneof![
            n.clone().prop_map(|(b, c, p)| Rule::Bucket(
                Algo::Gcra,
                gcra::Params::new(b, c, p, gcra::GCRA_NAMES).unwrap()
            )),
            n.clone().prop_map(|(b, c, p)| Rule::Bucket(
                Algo::TokenBucket,
                gcra::Params::new(b, c, p, gcra::BUCKET_NAMES).unwrap()
            )),
            n.clone().prop_map(|(b, _, p)| Rule::Bucket(
                Algo::Queue,
                gcra::Params::new(b, 1, p, gcra::GCRA_NAMES).unwrap()
            )),
            n.clone().prop_map(|(l, _, w)| Rule::Window(
                Algo::Sliding,
                window::Params::new(l, w).unwrap()
            )),
            n.clone().prop_map(|(l, _, w)| Rule::Window(
                Algo::Fixed,
                window::Params::new(l, w).unwrap()
            )),
            n.clone()
                .prop_map(|(l, _, w)| Rule::Log(window::Params::new(l, w).unwrap())),
            n.prop_map(|(l, _, w)| Rule::Acquire(lease::Params::new(l, w).unwrap())),
        ]
    }

    proptest! {
        /// Every algorithm, one rule, a clock stepping back and forward: (c) a refusal or a
        /// dry run changes nothing and writes nothing; (b) after a write whose
        /// reset_after_ms is R, the key decides like a fresh one R ms later on the clock,
        /// and no refusal before then counts beyond that instant.
        #[test]
        fn refusals_write_nothing_and_ttls_hold(
            rule in any_rule(),
            steps in prop::collection::vec((
                prop_oneof![
                    6 => -2_000_000i64..2_000_000,
                    1 => -100_000_000i64..-1,
                    1 => 1i64..100_000_000,
                ],
                1u64..8,
                prop::bool::weighted(0.8),
            ), 1..60),
        ) {
            let limit = match rule {
                Rule::Bucket(_, p) => p.burst,
                Rule::Window(_, p) | Rule::Log(p) => p.limit,
                Rule::Acquire(p) => p.limit,
            };
            let mut s = rule.fresh();
            let mut now = T0 as i64;
            let mut fresh_at: Option<u64> = None;
            for (dt, cost, commit) in steps {
                now += dt;
                let now_us = now as u64;
                let cost = if matches!(rule, Rule::Acquire(_)) { 1 } else { cost.min(limit) };
                let before = s.clone();
                let o = rule.hit(&mut s, cost, now_us, commit);
                if let Some(f) = fresh_at {
                    if now_us >= f {
                        let fresh = rule.hit(&mut rule.fresh(), cost, now_us, false);
                        prop_assert_eq!(o.decision, fresh.decision);
                    } else if !o.decision.allowed {
                        prop_assert!(o.decision.reset_after_ms <= (f - now_us).div_ceil(1000));
                    }
                }
                if o.wrote {
                    prop_assert!(o.decision.allowed && commit);
                    fresh_at = Some(now_us + o.decision.reset_after_ms * 1000);
                } else {
                    prop_assert_eq!(&s, &before);
                }
            }
        }
    }
}
