//! The rate-limiting algorithms, as pure functions of `(state, params, cost, now)`.
//!
//! Nothing in here knows about Redis: no Redis types, no allocation, no clock. Every
//! function takes the current time as an argument so tests can inject any clock.
//!
//! Units: `now_us` is microseconds since the Unix epoch on the module clock. Durations in
//! parameters are whole milliseconds (like `PEXPIRE`). Internal arithmetic is exact integer
//! arithmetic in `u128`; the parameter limits below keep every intermediate in range.

pub mod algorithm;
pub mod cell;
pub mod codec;
pub mod gcra;
pub mod lease;
pub mod leaseset;
pub mod log;
pub mod request;
pub mod slot;
pub mod stamps;
pub mod table;
pub mod token;
pub mod window;

/// Microseconds per millisecond.
pub const US_PER_MS: u64 = 1_000;
/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;

/// Largest accepted duration argument and largest span any state can cover, in ms
/// (10^12 ms is about 31.7 years). Keeps every intermediate product inside `u128`.
pub const MAX_SPAN_MS: u64 = 1_000_000_000_000;

/// Largest module time accepted, in ms since the epoch (10^13 ms is the year 2286).
pub const MAX_TIME_MS: u64 = 10_000_000_000_000;

/// The outcome of one request: the five fields of the standard reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The request was admitted (its cost was spent).
    pub allowed: bool,
    /// The most cost-1 requests a fresh key admits at once.
    pub limit: u64,
    /// Cost-1 requests that would still be admitted right now, after this one.
    pub remaining: u64,
    /// 0 when admitted; else ms (rounded up) until this same request would be admitted.
    pub retry_after_ms: u64,
    /// ms (rounded up) until the state is equivalent to a fresh one; 0 means no state.
    pub reset_after_ms: u64,
}

/// Why a parameter set is refused. The command layer maps these to error texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamError {
    /// The named parameter must be at least 1.
    NotPositive(&'static str),
    /// The named duration exceeds [`MAX_SPAN_MS`].
    SpanTooLarge(&'static str),
    /// The named parameter exceeds a bound in its own unit (CL.THROTTLE's seconds).
    AtMost(&'static str, u64),
    /// The named parameter must not be negative.
    Negative(&'static str),
    /// The combination of parameters covers more than [`MAX_SPAN_MS`].
    TooLarge(&'static str),
    /// The cost exceeds the named limit parameter.
    CostAboveLimit(&'static str),
    /// The named option's value exceeds the named limit parameter.
    OptionAbove(&'static str, &'static str),
    /// The named option's value must be less than the named limit parameter.
    OptionBelow(&'static str, &'static str),
    /// The named parameter exceeds the maximum set by a module config.
    AboveConfig(&'static str, u64, &'static str),
    /// Options that do not go together (`ERR syntax error`, as Redis answers them).
    Syntax,
    /// An argument that is not an integer (`ERR value is not an integer or out of range`).
    NotInteger,
}

/// `ceil(num / den)` for `den > 0`.
#[inline]
pub(crate) fn div_ceil(num: u128, den: u128) -> u128 {
    num.div_ceil(den)
}

/// Clamp a `u128` into `u64` (values here are bounded well below, this is belt and braces).
#[inline]
pub(crate) fn sat_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Checks that `v` is at least 1.
pub(crate) fn positive(v: u64, name: &'static str) -> Result<u64, ParamError> {
    if v == 0 {
        Err(ParamError::NotPositive(name))
    } else {
        Ok(v)
    }
}

/// Checks that a duration is at least 1 ms and at most [`MAX_SPAN_MS`].
pub(crate) fn span(v: u64, name: &'static str) -> Result<u64, ParamError> {
    positive(v, name)?;
    if v > MAX_SPAN_MS {
        Err(ParamError::SpanTooLarge(name))
    } else {
        Ok(v)
    }
}

/// A quota: `limit` per span of `span_ms`. A window counter's or a log's rule (`limit`
/// per window of `span_ms`: [`window::Params`]) and a concurrency rule (`limit` leases held,
/// each of at most `span_ms`: [`lease::Params`]); `K` says which, and names the span in
/// errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota<K> {
    /// At least 1.
    pub limit: u64,
    /// At least 1 and at most [`MAX_SPAN_MS`].
    pub span_ms: u64,
    kind: std::marker::PhantomData<K>,
}

/// What a [`Quota`]'s span is, by the name of its argument.
pub trait SpanName {
    const NAME: &'static str;
}

impl<K: SpanName> Quota<K> {
    pub fn new(limit: u64, span_ms: u64) -> Result<Self, ParamError> {
        positive(limit, "limit")?;
        span(span_ms, K::NAME)?;
        Ok(Quota {
            limit,
            span_ms,
            kind: std::marker::PhantomData,
        })
    }
}

/// Checks `1 <= cost <= limit`.
pub fn check_cost(cost: u64, limit: u64, limit_name: &'static str) -> Result<(), ParamError> {
    positive(cost, "cost")?;
    if cost > limit {
        Err(ParamError::CostAboveLimit(limit_name))
    } else {
        Ok(())
    }
}

/// What the algorithms' tests (and the rule tests) share.
#[cfg(test)]
pub(crate) mod testutil {
    use proptest::prelude::*;
    use std::ops::Range;

    /// Clock steps, µs: mostly (6 in 8) a `small` move, else a jump `back` or `forward`
    /// (each a range of signed steps).
    pub(crate) fn clock_step(
        small: Range<i64>,
        back: Range<i64>,
        forward: Range<i64>,
    ) -> impl Strategy<Value = i64> {
        prop_oneof![6 => small, 1 => back, 1 => forward]
    }
}
