//! The rate commands: `RL.GCRA`, `RL.TOKENBUCKET`, `RL.QUEUE`, `RL.SLIDING`, `RL.FIXED`,
//! `RL.LOG`, and `RL.ACQUIRE` (which shares their shape and reply).

use super::{reply_outcome, run};
use crate::algo::{gcra, lease, window, ParamError};
use crate::args::{options, positive};
use crate::error::Error;
use crate::rm::{Ctx, RStr};
use crate::rule::Rule;
use crate::state::Algo;
use std::sync::atomic::{AtomicI64, Ordering};

/// `ratelimit.log-max-limit`: the largest limit `RL.LOG` accepts.
pub static LOG_MAX_LIMIT: AtomicI64 = AtomicI64::new(10_000);
/// `ratelimit.acquire-max-limit`: the largest limit `RL.ACQUIRE` accepts.
pub static ACQUIRE_MAX_LIMIT: AtomicI64 = AtomicI64::new(10_000);

/// Parses `key a b c [options]` for the GCRA family and runs it.
fn bucket(ctx: Ctx, args: &[RStr], algo: Algo, names: gcra::Names) -> Result<(), Error> {
    let [_, key, a, b, c, opts @ ..] = args else {
        return Err(Error::Arity);
    };
    let p = gcra::Params::new(
        positive(*a, names[0])?,
        positive(*b, names[1])?,
        positive(*c, names[2])?,
        names,
    )?;
    let opts = options(opts, p.burst, names[0])?;
    reply_outcome(ctx, &run(ctx, *key, &Rule::Bucket(algo, p), opts)?);
    Ok(())
}

/// `RL.GCRA key burst count period_ms [COST n] [DRYRUN]`
pub fn gcra(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    bucket(ctx, args, Algo::Gcra, gcra::GCRA_NAMES)
}

/// `RL.TOKENBUCKET key capacity refill_tokens refill_period_ms [COST n] [DRYRUN]`
pub fn tokenbucket(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    bucket(ctx, args, Algo::TokenBucket, gcra::BUCKET_NAMES)
}

/// `RL.QUEUE key capacity interval_ms [COST n] [DRYRUN]`: a GCRA with one request per
/// interval and `capacity` waiting at most.
pub fn queue(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    let [_, key, cap, interval, opts @ ..] = args else {
        return Err(Error::Arity);
    };
    let names = ["capacity", "count", "interval_ms"];
    let p = gcra::Params::new(
        positive(*cap, "capacity")?,
        1,
        positive(*interval, names[2])?,
        names,
    )?;
    let opts = options(opts, p.burst, "capacity")?;
    reply_outcome(ctx, &run(ctx, *key, &Rule::Bucket(Algo::Queue, p), opts)?);
    Ok(())
}

/// Parses `key limit window_ms [options]` for the window family and runs `make(params)`.
fn windowed(
    ctx: Ctx,
    args: &[RStr],
    make: fn(window::Params) -> Result<Rule, Error>,
) -> Result<(), Error> {
    let [_, key, limit, win, opts @ ..] = args else {
        return Err(Error::Arity);
    };
    let p = window::Params::new(positive(*limit, "limit")?, positive(*win, "window_ms")?)?;
    let rule = make(p)?;
    let opts = options(opts, p.limit, "limit")?;
    reply_outcome(ctx, &run(ctx, *key, &rule, opts)?);
    Ok(())
}

/// `RL.SLIDING key limit window_ms [COST n] [DRYRUN]`
pub fn sliding(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    windowed(ctx, args, |p| Ok(Rule::Window(Algo::Sliding, p)))
}

/// `RL.FIXED key limit window_ms [COST n] [DRYRUN]`
pub fn fixed(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    windowed(ctx, args, |p| Ok(Rule::Window(Algo::Fixed, p)))
}

/// The value of a max-limit config, as a limit.
fn max_of(config: &AtomicI64) -> u64 {
    u64::try_from(config.load(Ordering::Relaxed)).unwrap_or(0)
}

/// The largest limit `RL.LOG` accepts now.
pub fn log_max_limit() -> u64 {
    max_of(&LOG_MAX_LIMIT)
}

/// `RL.LOG key limit window_ms [COST n] [DRYRUN]`
pub fn log(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    windowed(ctx, args, |p| {
        let max = log_max_limit();
        if p.limit > max {
            return Err(ParamError::AboveConfig("limit", max, "ratelimit.log-max-limit").into());
        }
        Ok(Rule::Log(p))
    })
}

/// `RL.ACQUIRE key limit lease_ms [DRYRUN]`
pub fn acquire(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    let [_, key, limit, lease, opts @ ..] = args else {
        return Err(Error::Arity);
    };
    let p = lease::Params::new(positive(*limit, "limit")?, positive(*lease, "lease_ms")?)?;
    let max = max_of(&ACQUIRE_MAX_LIMIT);
    if p.limit > max {
        return Err(ParamError::AboveConfig("limit", max, "ratelimit.acquire-max-limit").into());
    }
    // ACQUIRE takes no COST: only DRYRUN.
    let opts = match opts {
        [] => crate::args::Opts {
            cost: 1,
            dryrun: false,
        },
        [w] if crate::rm::bytes(*w).eq_ignore_ascii_case(b"DRYRUN") => crate::args::Opts {
            cost: 1,
            dryrun: true,
        },
        _ => return Err(crate::error::SYNTAX.into()),
    };
    reply_outcome(ctx, &run(ctx, *key, &Rule::Acquire(p), opts)?);
    Ok(())
}
