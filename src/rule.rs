//! A rule is one algorithm with its parameters: what a rate command asks for. It connects
//! the stored [`State`] to the pure algorithms; still no Redis types here.

use crate::algo::{gcra, window, Decision};
use crate::state::{Algo, Bucket, State, Window};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// GCRA or token bucket (`algo` says which; the arithmetic is the same).
    Bucket(Algo, gcra::Params),
    /// Sliding window counter.
    Sliding(window::Params),
}

impl Rule {
    pub fn algo(&self) -> Algo {
        match self {
            Rule::Bucket(a, _) => *a,
            Rule::Sliding(_) => Algo::Sliding,
        }
    }

    /// Decides a request of `cost` against `prev` (which must be of this rule's algorithm;
    /// anything else reads as no state). Returns the state to store when admitted.
    pub fn decide(
        &self,
        prev: Option<&State>,
        cost: u64,
        now_us: u64,
    ) -> (Decision, Option<State>) {
        match self {
            Rule::Bucket(algo, p) => {
                let tat = match prev {
                    Some(State::Gcra(b) | State::TokenBucket(b)) => Some(&b.tat),
                    _ => None,
                };
                let (d, next) = gcra::decide(tat, p, cost, now_us);
                let next = next.map(|tat| {
                    let b = Bucket { params: *p, tat };
                    match algo {
                        Algo::TokenBucket => State::TokenBucket(b),
                        _ => State::Gcra(b),
                    }
                });
                (d, next)
            }
            Rule::Sliding(p) => {
                let c = match prev {
                    Some(State::Sliding(w)) => Some(&w.counters),
                    _ => None,
                };
                let (d, next) = window::sliding(c, p, cost, now_us);
                (
                    d,
                    next.map(|counters| {
                        State::Sliding(Window {
                            params: *p,
                            counters,
                        })
                    }),
                )
            }
        }
    }
}
