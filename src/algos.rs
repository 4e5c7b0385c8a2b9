//! The table of algorithms and the table of options: every list of them in the module (the
//! rule parser, RL.ALL's rule names, the option parser, COMMAND DOCS, the codec's tags,
//! RL.INFO's names, keyspace events) reads these two tables. Pure data, no Redis types.

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

/// An option of the rate commands: an index into [`OPTIONS`], in the order COMMAND DOCS
/// lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    Cost,
    Refund,
    Partial,
    Reserve,
    Block,
    Stagger,
    DryRun,
}

/// What follows an option's keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Nothing: a flag.
    Flag,
    /// An integer, at least 0, named so in errors.
    AtLeast0(&'static str),
    /// An integer, at least 1.
    AtLeast1(&'static str),
    /// A span of time in ms, at least 1 and at most `MAX_SPAN_MS`.
    SpanMs(&'static str),
}

impl Value {
    /// The value's name (None for a flag).
    pub const fn name(self) -> Option<&'static str> {
        match self {
            Value::Flag => None,
            Value::AtLeast0(n) | Value::AtLeast1(n) | Value::SpanMs(n) => Some(n),
        }
    }
}

/// One option: its keyword (matched case-insensitively) and its value.
pub struct OptSpec {
    pub opt: Opt,
    pub word: &'static str,
    pub value: Value,
}

/// Every option, in [`Opt`] order.
pub const OPTIONS: [OptSpec; 7] = [
    OptSpec {
        opt: Opt::Cost,
        word: "COST",
        value: Value::AtLeast0("cost"),
    },
    OptSpec {
        opt: Opt::Refund,
        word: "REFUND",
        value: Value::AtLeast1("refund"),
    },
    OptSpec {
        opt: Opt::Partial,
        word: "PARTIAL",
        value: Value::Flag,
    },
    OptSpec {
        opt: Opt::Reserve,
        word: "RESERVE",
        value: Value::AtLeast0("reserve"),
    },
    OptSpec {
        opt: Opt::Block,
        word: "BLOCK",
        value: Value::SpanMs("block_ms"),
    },
    OptSpec {
        opt: Opt::Stagger,
        word: "STAGGER",
        value: Value::Flag,
    },
    OptSpec {
        opt: Opt::DryRun,
        word: "DRYRUN",
        value: Value::Flag,
    },
];

impl Opt {
    /// The option's row in [`OPTIONS`].
    pub fn spec(self) -> &'static OptSpec {
        &OPTIONS[self as usize]
    }
}

/// A set of options (bit `1 << opt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptSet(u8);

impl OptSet {
    /// The set of `opts`.
    pub const fn of(opts: &[Opt]) -> OptSet {
        let mut bits = 0;
        let mut i = 0;
        while i < opts.len() {
            bits |= 1 << opts[i] as u8;
            i += 1;
        }
        OptSet(bits)
    }

    pub const fn has(self, o: Opt) -> bool {
        self.0 & (1 << o as u8) != 0
    }

    pub const fn with(self, o: Opt) -> OptSet {
        OptSet(self.0 | 1 << o as u8)
    }

    /// The options in both sets.
    pub const fn and(self, other: OptSet) -> OptSet {
        OptSet(self.0 & other.0)
    }

    /// The options of the set, in [`Opt`] order.
    pub fn iter(self) -> impl Iterator<Item = Opt> {
        OPTIONS.iter().map(|s| s.opt).filter(move |&o| self.has(o))
    }
}

/// The options of a rate command: every one but STAGGER.
const RATE: OptSet = OptSet::of(&[
    Opt::Cost,
    Opt::Refund,
    Opt::Partial,
    Opt::Reserve,
    Opt::Block,
    Opt::DryRun,
]);

/// The options an RL.ALL rule may take, where its algorithm takes them (RL.ALL takes DRYRUN
/// once, for the whole call).
pub const ALL_RULE_OPTIONS: OptSet = OptSet::of(&[Opt::Cost, Opt::Reserve, Opt::Stagger]);

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
        options: OptSet::of(&[Opt::DryRun]),
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
    let mut j = 0;
    while j < OPTIONS.len() {
        assert!(OPTIONS[j].opt as usize == j);
        j += 1;
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
