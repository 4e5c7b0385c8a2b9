//! Argument parsing shared by every command: integers, the common options, precise errors.

use crate::algo::{check_cost, ParamError};
use crate::error::{Error, NOT_INTEGER, SYNTAX};
use crate::rm::{self, RStr};

/// A signed 64-bit integer argument, parsed exactly like Redis parses integers.
pub fn int(s: RStr) -> Result<i64, Error> {
    rm::to_i64(s).ok_or(Error::Static(NOT_INTEGER))
}

/// An integer argument that must be at least 1.
pub fn positive(s: RStr, name: &'static str) -> Result<u64, Error> {
    match int(s)? {
        v if v >= 1 => Ok(v as u64),
        _ => Err(ParamError::NotPositive(name).into()),
    }
}

/// An integer argument that must be at least 0.
pub fn non_negative(s: RStr, name: &'static str) -> Result<u64, Error> {
    match int(s)? {
        v if v >= 0 => Ok(v as u64),
        _ => Err(ParamError::Negative(name).into()),
    }
}

/// The options every rate command takes: `[COST n] [DRYRUN]`, any order, case-insensitive,
/// each at most once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opts {
    pub cost: u64,
    pub dryrun: bool,
}

/// Parses the options in `args`; `limit` is the command's limit argument (for `COST`).
pub fn options(args: &[RStr], limit: u64, limit_name: &'static str) -> Result<Opts, Error> {
    let mut cost = None;
    let mut dryrun = false;
    let mut i = 0;
    while i < args.len() {
        let word = rm::bytes(args[i]);
        if word.eq_ignore_ascii_case(b"COST") && cost.is_none() {
            let v = args.get(i + 1).ok_or(Error::Static(SYNTAX))?;
            cost = Some(positive(*v, "cost")?);
            i += 2;
        } else if word.eq_ignore_ascii_case(b"DRYRUN") && !dryrun {
            dryrun = true;
            i += 1;
        } else {
            return Err(Error::Static(SYNTAX));
        }
    }
    let cost = cost.unwrap_or(1);
    check_cost(cost, limit, limit_name)?;
    Ok(Opts { cost, dryrun })
}
