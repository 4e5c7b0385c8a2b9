//! Argument parsing shared by every command: integers, the options of the rate commands
//! (parsed here once, for every command and every RL.ALL rule), precise errors.

use crate::algo::{span, ParamError};
use crate::algos::{OptSet, OptSpec, Value, OPTIONS};
use crate::error::{Error, NOT_INTEGER, SYNTAX};
use crate::rm::{self, RStr};
use crate::rule::{Given, Opts};

/// A signed 64-bit integer argument, parsed exactly like Redis parses integers.
#[inline]
pub fn int(s: &RStr) -> Result<i64, Error> {
    parse_i64(rm::bytes(s)).ok_or(Error::Static(NOT_INTEGER))
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

/// An integer argument that must be at least 1.
#[inline]
pub fn positive(s: &RStr, name: &'static str) -> Result<u64, Error> {
    match int(s)? {
        v if v >= 1 => Ok(v as u64),
        _ => Err(ParamError::NotPositive(name).into()),
    }
}

/// An integer argument that must be at least 0.
pub fn non_negative(s: &RStr, name: &'static str) -> Result<u64, Error> {
    match int(s)? {
        v if v >= 0 => Ok(v as u64),
        _ => Err(ParamError::Negative(name).into()),
    }
}

/// The options of a rate command, in any order, case-insensitive, each at most once:
/// `[COST n | REFUND n] [PARTIAL] [RESERVE r] [BLOCK ms] [STAGGER] [DRYRUN]` (those in
/// `takes`). `limit` is the command's limit argument, named `limit_name` in errors.
/// Anything else is `ERR syntax error`.
pub fn options(
    args: &[RStr],
    limit: u64,
    limit_name: &'static str,
    takes: OptSet,
) -> Result<Opts, Error> {
    if args.is_empty() {
        // The common case, kept short: cost 1, nothing else.
        return Ok(Opts::PLAIN);
    }
    let (opts, used) = leading_options(args, limit, limit_name, takes)?;
    if used != args.len() {
        return Err(Error::Static(SYNTAX));
    }
    Ok(opts)
}

/// The value of option `spec` at `arg`.
#[inline]
fn option_value(spec: &OptSpec, arg: Option<&RStr>) -> Result<u64, Error> {
    let arg = || arg.ok_or(Error::Static(SYNTAX));
    match spec.value {
        Value::Flag => Ok(1),
        Value::AtLeast0(name) => non_negative(arg()?, name),
        Value::AtLeast1(name) => positive(arg()?, name),
        Value::SpanMs(name) => Ok(span(positive(arg()?, name)?, name)?),
    }
}

/// Parses the options at the front of `args`, stopping at the first word that is not one
/// `takes` allows (RL.ALL: the next rule); returns them and how many arguments they took.
#[inline]
pub fn leading_options(
    args: &[RStr],
    limit: u64,
    limit_name: &'static str,
    takes: OptSet,
) -> Result<(Opts, usize), Error> {
    let mut given = Given::default();
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let word = rm::bytes(arg);
        let Some(spec) = OPTIONS
            .iter()
            .find(|o| takes.has(o.opt) && word.eq_ignore_ascii_case(o.word.as_bytes()))
        else {
            break;
        };
        if given.has(spec.opt) {
            // Repeated.
            return Err(Error::Static(SYNTAX));
        }
        given.set(spec.opt, option_value(spec, args.get(i + 1))?);
        i += if spec.value == Value::Flag { 1 } else { 2 };
    }
    Ok((Opts::from_given(&given, limit, limit_name)?, i))
}

#[cfg(test)]
mod tests {
    use super::parse_i64;
    use proptest::prelude::*;

    /// Redis's `string2ll`, as its rules read: the reference for [`parse_i64`].
    fn reference(b: &[u8]) -> Option<i64> {
        let s = std::str::from_utf8(b).ok()?;
        let digits = s.strip_prefix('-').unwrap_or(s);
        let well_formed = !digits.is_empty()
            && digits.bytes().all(|d| d.is_ascii_digit())
            && (s == "0" || !digits.starts_with('0'))
            && b.len() <= 20;
        if !well_formed {
            return None;
        }
        s.parse().ok()
    }

    #[test]
    fn integers_as_redis_reads_them() {
        for (s, want) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("-1", Some(-1)),
            ("3600000", Some(3_600_000)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("18446744073709551616", None),
            ("", None),
            ("-", None),
            ("-0", None),
            ("00", None),
            ("01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("1e3", None),
            ("0x10", None),
            ("1.0", None),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), want, "{s:?}");
            assert_eq!(reference(s.as_bytes()), want, "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn same_as_string2ll(
            s in prop_oneof![
                "-?[0-9]{1,21}",
                "[-+ 0-9a]{0,22}",
                any::<i64>().prop_map(|v| v.to_string()),
            ],
        ) {
            prop_assert_eq!(parse_i64(s.as_bytes()), reference(s.as_bytes()));
        }
    }
}
