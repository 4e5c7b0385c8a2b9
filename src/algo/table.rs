//! The table of algorithms: every list of them in the module (the rule parser, RL.ALL's rule
//! names, COMMAND DOCS, the codec's tags, RL.INFO's names, keyspace events) reads it, and
//! each row names the options (`options.rs`) its command takes. Pure data, no Redis types.

use crate::options::{Opt, OptSet, RATE};
use std::ffi::CStr;

/// Which algorithm a rule or a state belongs to: an index into [`ALGOS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    Gcra,
    TokenBucket,
    Sliding,
    Fixed,
    Log,
    Queue,
    Concurrency,
}

/// One algorithm.
pub struct Spec {
    /// Shown by RL.INFO and in errors; in upper case, the rule's name in RL.ALL.
    pub name: &'static str,
    /// The keyspace event fired when a state of this algorithm is written.
    pub event: &'static CStr,
    /// The state codec's tag (`state.rs`).
    pub tag: u8,
    /// The names of the rule's numbers, in order (errors, COMMAND DOCS, arity).
    pub args: &'static [&'static str],
    /// The options its command takes.
    pub options: OptSet,
    /// Whether RL.ALL takes a rule of it.
    pub in_all: bool,
}

/// Every algorithm, in [`Algo`] order.
pub const ALGOS: [Spec; 7] = [
    Spec {
        name: "gcra",
        event: c"ratelimit.gcra",
        tag: 1,
        args: &["burst", "count", "period_ms"],
        options: RATE,
        in_all: true,
    },
    Spec {
        name: "tokenbucket",
        event: c"ratelimit.tokenbucket",
        tag: 2,
        args: &["capacity", "refill_tokens", "refill_period_ms"],
        options: RATE,
        in_all: true,
    },
    Spec {
        name: "sliding",
        event: c"ratelimit.sliding",
        tag: 3,
        args: &["limit", "window_ms"],
        options: RATE.with(Opt::Stagger),
        in_all: true,
    },
    Spec {
        name: "fixed",
        event: c"ratelimit.fixed",
        tag: 4,
        args: &["limit", "window_ms"],
        options: RATE.with(Opt::Stagger),
        in_all: true,
    },
    Spec {
        name: "log",
        event: c"ratelimit.log",
        tag: 5,
        args: &["limit", "window_ms"],
        options: RATE,
        in_all: true,
    },
    Spec {
        name: "queue",
        event: c"ratelimit.queue",
        tag: 6,
        args: &["capacity", "interval_ms"],
        options: RATE,
        in_all: true,
    },
    Spec {
        name: "concurrency",
        event: c"ratelimit.concurrency",
        tag: 7,
        args: &["limit", "lease_ms"],
        options: OptSet::of(&[Opt::DryRun, Opt::Wait, Opt::Probe]),
        in_all: false,
    },
];

/// Every algorithm, in table order.
pub const ALL: [Algo; 7] = [
    Algo::Gcra,
    Algo::TokenBucket,
    Algo::Sliding,
    Algo::Fixed,
    Algo::Log,
    Algo::Queue,
    Algo::Concurrency,
];

impl Algo {
    /// The algorithm's row in [`ALGOS`].
    #[inline]
    pub const fn spec(self) -> &'static Spec {
        &ALGOS[self as usize]
    }

    /// The name shown by `RL.INFO` and in errors.
    #[inline]
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The keyspace event fired when a state of this algorithm is written.
    #[inline]
    pub fn event(self) -> &'static CStr {
        self.spec().event
    }

    /// The state codec's tag.
    #[inline]
    pub fn tag(self) -> u8 {
        self.spec().tag
    }

    /// The algorithm with codec tag `tag`.
    pub fn of_tag(tag: u8) -> Option<Algo> {
        ALL.into_iter().find(|a| a.tag() == tag)
    }

    /// The algorithm an RL.ALL rule names (case-insensitive).
    pub fn of_rule_name(word: &[u8]) -> Option<Algo> {
        ALL.into_iter()
            .find(|a| a.spec().in_all && word.eq_ignore_ascii_case(a.name().as_bytes()))
    }
}

// The tables are in enum order, so indexing them by a variant cannot fail.
const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        assert!(ALL[i] as usize == i);
        i += 1;
    }
    assert!(ALGOS.len() == ALL.len());
    // The rule parser reads at most three numbers.
    let mut k = 0;
    while k < ALGOS.len() {
        assert!(ALGOS[k].args.len() <= 3);
        k += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_names_are_distinct() {
        for (i, a) in ALL.iter().enumerate() {
            for b in ALL.iter().skip(i + 1) {
                assert_ne!(a.tag(), b.tag());
                assert_ne!(a.name(), b.name());
            }
            assert_eq!(Algo::of_tag(a.tag()), Some(*a));
        }
        assert_eq!(Algo::of_tag(0), None);
        assert_eq!(Algo::of_rule_name(b"Gcra"), Some(Algo::Gcra));
        assert_eq!(Algo::of_rule_name(b"CONCURRENCY"), None);
    }

    use crate::options::ALL_RULE_OPTIONS;

    #[test]
    fn option_sets() {
        let s = OptSet::of(&[Opt::Cost, Opt::DryRun]);
        assert!(s.has(Opt::Cost) && s.has(Opt::DryRun) && !s.has(Opt::Block));
        assert_eq!(s.iter().collect::<Vec<_>>(), [Opt::Cost, Opt::DryRun]);
        assert_eq!(
            Algo::Fixed.spec().options.and(ALL_RULE_OPTIONS),
            ALL_RULE_OPTIONS
        );
        assert_eq!(
            Algo::Gcra.spec().options.and(ALL_RULE_OPTIONS),
            OptSet::of(&[Opt::Cost, Opt::Reserve])
        );
    }
}
