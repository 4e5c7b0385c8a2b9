//! The options of the rate commands in one place: the table (every list of them reads it:
//! the parser, COMMAND DOCS, each algorithm's row), the parser (one, for every command and
//! every RL.ALL rule, over any [`Word`]), and the rules by which they combine ([`check`],
//! which `RL._APPLY`'s operation decoder applies too). Pure: no Redis types.

use crate::algo::request::{Ask, Request};
use crate::algo::{span, ParamError};

/// An argument: its bytes, and the integer they spell (as Redis reads integers).
pub trait Word {
    fn bytes(&self) -> &[u8];

    /// The argument as a signed 64-bit integer ([`parse_i64`]).
    #[inline]
    fn int(&self) -> Option<i64> {
        parse_i64(self.bytes())
    }
}

impl Word for &[u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` does (what
/// `RedisModule_StringToLongLong` and Redis's own commands use): optional `-`, then digits
/// without a leading zero (but `0` itself), nothing else, at most 20 bytes, in range. Done
/// here on the argument's bytes: a third of the instructions of the API call.
#[inline]
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (negative, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &d in rest {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        // Down to i64::MIN, whose magnitude is 2^63.
        (v <= 1 << 63).then(|| 0i64.wrapping_sub_unsigned(v))
    } else {
        i64::try_from(v).ok()
    }
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
    Wait,
    Probe,
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
    /// An integer from 0 to the given bound.
    UpTo(&'static str, u64),
}

impl Value {
    /// The value's name (None for a flag).
    pub const fn name(self) -> Option<&'static str> {
        match self {
            Value::Flag => None,
            Value::AtLeast0(n) | Value::AtLeast1(n) | Value::SpanMs(n) | Value::UpTo(n, _) => {
                Some(n)
            }
        }
    }
}

/// One option: its keyword (matched case-insensitively) and its value.
pub struct OptSpec {
    pub opt: Opt,
    pub word: &'static str,
    pub value: Value,
}

// The option table is in `Opt` order.
const _: () = {
    let mut j = 0;
    while j < OPTIONS.len() {
        assert!(OPTIONS[j].opt as usize == j);
        j += 1;
    }
};

/// The largest `WAIT` (a day), in ms.
pub const MAX_WAIT_MS: u64 = 86_400_000;

/// Every option, in [`Opt`] order.
pub const OPTIONS: [OptSpec; 9] = [
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
    OptSpec {
        opt: Opt::Wait,
        word: "WAIT",
        value: Value::UpTo("wait_ms", MAX_WAIT_MS),
    },
    OptSpec {
        opt: Opt::Probe,
        word: "PROBE",
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
pub struct OptSet(u16);

impl OptSet {
    /// The set of `opts`.
    pub const fn of(opts: &[Opt]) -> OptSet {
        let mut bits = 0;
        let mut i = 0;
        while i < opts.len() {
            bits |= 1 << opts[i] as u16;
            i += 1;
        }
        OptSet(bits)
    }

    pub const fn has(self, o: Opt) -> bool {
        self.0 & (1 << o as u16) != 0
    }

    pub const fn with(self, o: Opt) -> OptSet {
        OptSet(self.0 | 1 << o as u16)
    }

    /// The options in both sets.
    /// These options but those of `other`.
    pub const fn without(self, other: OptSet) -> OptSet {
        OptSet(self.0 & !other.0)
    }

    pub const fn and(self, other: OptSet) -> OptSet {
        OptSet(self.0 & other.0)
    }

    /// The options of the set, in [`Opt`] order.
    pub fn iter(self) -> impl Iterator<Item = Opt> {
        OPTIONS.iter().map(|s| s.opt).filter(move |&o| self.has(o))
    }
}

/// The options of a rate command: every one but STAGGER.
pub const RATE: OptSet = OptSet::of(&[
    Opt::Cost,
    Opt::Refund,
    Opt::Partial,
    Opt::Reserve,
    Opt::Block,
    Opt::DryRun,
    Opt::Wait,
    Opt::Probe,
]);

/// The options an RL.ALL rule may take, where its algorithm takes them (RL.ALL takes DRYRUN
/// once, for the whole call).
pub const ALL_RULE_OPTIONS: OptSet = OptSet::of(&[Opt::Cost, Opt::Reserve, Opt::Stagger]);

/// The options of one request as the option parser read them (`args::leading_options`):
/// which were given, and the value of each (a flag's is 1), by [`Opt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Given {
    seen: OptSet,
    values: [u64; OPTIONS.len()],
}

impl Given {
    pub fn has(&self, o: Opt) -> bool {
        self.seen.has(o)
    }

    /// Option `o` given with value `v`.
    pub fn set(&mut self, o: Opt, v: u64) {
        self.seen = self.seen.with(o);
        if let Some(slot) = self.values.get_mut(o as usize) {
            *slot = v;
        }
    }

    fn get(&self, o: Opt) -> Option<u64> {
        self.has(o)
            .then(|| self.values.get(o as usize).copied().unwrap_or(0))
    }
}

/// The options of one request, as they combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opts {
    pub ask: Ask,
    pub partial: bool,
    pub reserve: u64,
    pub block_ms: u64,
    pub stagger: bool,
    pub dryrun: bool,
    /// `WAIT ms`: block until admitted, at most this long (None: not given).
    pub wait_ms: Option<u64>,
    pub probe: bool,
}

impl Opts {
    /// No options: one unit, written.
    pub const PLAIN: Opts = Opts {
        ask: Ask::Spend(1),
        partial: false,
        reserve: 0,
        block_ms: 0,
        stagger: false,
        dryrun: false,
        wait_ms: None,
        probe: false,
    };

    /// The options `g` make for a rule whose limit is `limit` (named `limit_name` in
    /// errors); `ParamError::Syntax` for options that do not go together.
    pub fn from_given(g: &Given, limit: u64, limit_name: &'static str) -> Result<Opts, ParamError> {
        let (cost, refund) = (g.get(Opt::Cost), g.get(Opt::Refund));
        let ask = match (cost, refund) {
            (None, Some(n)) => Ask::Refund(n),
            (_, Some(_)) => return Err(ParamError::Syntax),
            (c, None) => Ask::Spend(c.unwrap_or(1)),
        };
        // `RESERVE 0` is a reserve given, like any other, for the syntax rules.
        let reserve_given = g.has(Opt::Reserve);
        if reserve_given && !matches!(ask, Ask::Spend(c) if c > 0) {
            return Err(ParamError::Syntax);
        }
        let opts = Opts {
            ask,
            partial: g.has(Opt::Partial),
            reserve: g.get(Opt::Reserve).unwrap_or(0),
            block_ms: g.get(Opt::Block).unwrap_or(0),
            stagger: g.has(Opt::Stagger),
            dryrun: g.has(Opt::DryRun),
            wait_ms: g.get(Opt::Wait),
            probe: g.has(Opt::Probe),
        };
        // A penalty and a wait do not go together.
        if opts.wait_ms.is_some() && opts.block_ms > 0 {
            return Err(ParamError::Syntax);
        }
        check(&opts.request(), limit, limit_name)?;
        Ok(opts)
    }

    /// The request these options make.
    pub fn request(&self) -> Request {
        Request {
            ask: self.ask,
            partial: self.partial,
            reserve: self.reserve,
            block_ms: self.block_ms,
            probe: self.probe,
            commit: !self.dryrun,
        }
    }
}

/// The options of a rate command, in any order, case-insensitive, each at most once:
/// `[COST n | REFUND n] [PARTIAL] [RESERVE r] [BLOCK ms] [STAGGER] [DRYRUN] [PROBE]` (those in
/// `takes`). `limit` is the command's limit argument, named `limit_name` in errors.
/// Anything else is `ERR syntax error`.
pub fn options<W: Word>(
    args: &[W],
    limit: u64,
    limit_name: &'static str,
    takes: OptSet,
) -> Result<Opts, ParamError> {
    if args.is_empty() {
        // The common case, kept short: cost 1, nothing else.
        return Ok(Opts::PLAIN);
    }
    let (opts, used) = leading_options(args, limit, limit_name, takes)?;
    if used != args.len() {
        return Err(ParamError::Syntax);
    }
    Ok(opts)
}

/// How the options of one request combine, for a rule whose limit is `limit` (named
/// `limit_name` in errors): the parser's rules, and what `RL._APPLY`'s operation decoder
/// accepts (`replay.rs`).
pub fn check(req: &Request, limit: u64, limit_name: &'static str) -> Result<(), ParamError> {
    if req.block_ms > crate::algo::MAX_SPAN_MS {
        return Err(ParamError::SpanTooLarge("block_ms"));
    }
    match req.ask {
        // A refund is not a request: it takes no cost, grant, reserve or penalty. Any n: a
        // refund never goes past a fresh state, so more than the limit is all.
        Ask::Refund(0) => Err(ParamError::NotPositive("refund")),
        Ask::Refund(_) if req.partial || req.reserve > 0 || req.block_ms > 0 || req.probe => {
            Err(ParamError::Syntax)
        }
        Ask::Refund(_) => Ok(()),
        // A peek spends nothing: there is nothing to grant, reserve or penalise.
        Ask::Spend(0) if req.partial || req.reserve > 0 || req.block_ms > 0 => {
            Err(ParamError::Syntax)
        }
        // PARTIAL takes up to the cost: any cost, capped by what is available.
        Ask::Spend(c) if c > limit && !req.partial => Err(ParamError::CostAboveLimit(limit_name)),
        _ if req.reserve > 0 && req.reserve >= limit => {
            Err(ParamError::OptionBelow("RESERVE", limit_name))
        }
        // Never admissible: refused like a cost above the limit (PARTIAL takes what fits).
        Ask::Spend(c) if !req.partial && c.saturating_add(req.reserve) > limit => {
            Err(ParamError::OptionAbove("COST plus RESERVE", limit_name))
        }
        Ask::Spend(_) => Ok(()),
    }
}

/// The value of option `spec` at `arg`.
#[inline]
fn option_value<W: Word>(spec: &OptSpec, arg: Option<&W>) -> Result<u64, ParamError> {
    let int = || {
        arg.ok_or(ParamError::Syntax)?
            .int()
            .ok_or(ParamError::NotInteger)
    };
    let at_least_1 = |name| match int()? {
        v if v >= 1 => Ok(v as u64),
        _ => Err(ParamError::NotPositive(name)),
    };
    match spec.value {
        Value::Flag => Ok(1),
        Value::AtLeast0(name) => u64::try_from(int()?).map_err(|_| ParamError::Negative(name)),
        Value::AtLeast1(name) => at_least_1(name),
        Value::SpanMs(name) => span(at_least_1(name)?, name),
        Value::UpTo(name, max) => match u64::try_from(int()?) {
            Err(_) => Err(ParamError::Negative(name)),
            Ok(v) if v > max => Err(ParamError::AtMost(name, max)),
            Ok(v) => Ok(v),
        },
    }
}

/// Parses the options at the front of `args`, stopping at the first word that is not one
/// `takes` allows (RL.ALL: the next rule); returns them and how many arguments they took.
#[inline]
pub fn leading_options<W: Word>(
    args: &[W],
    limit: u64,
    limit_name: &'static str,
    takes: OptSet,
) -> Result<(Opts, usize), ParamError> {
    let mut given = Given::default();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let word = arg.bytes();
        let Some(spec) = OPTIONS
            .iter()
            .find(|o| takes.has(o.opt) && word.eq_ignore_ascii_case(o.word.as_bytes()))
        else {
            break;
        };
        if given.has(spec.opt) {
            // Repeated.
            return Err(ParamError::Syntax);
        }
        given.set(spec.opt, option_value(spec, args.get(i + 1))?);
        i += if spec.value == Value::Flag { 1 } else { 2 };
    }
    Ok((Opts::from_given(&given, limit, limit_name)?, i))
}
