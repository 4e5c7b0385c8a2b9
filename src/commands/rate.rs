//! `RL.GCRA`, `RL.TOKENBUCKET`, `RL.SLIDING`.

use super::{reply_decision, run};
use crate::algo::{gcra, window};
use crate::args::{options, positive};
use crate::error::Error;
use crate::rm::{Ctx, RStr};
use crate::rule::Rule;
use crate::state::Algo;

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
    let d = run(ctx, *key, &Rule::Bucket(algo, p), opts)?;
    reply_decision(ctx, &d);
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

/// `RL.SLIDING key limit window_ms [COST n] [DRYRUN]`
pub fn sliding(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    let [_, key, limit, win, opts @ ..] = args else {
        return Err(Error::Arity);
    };
    let p = window::Params::new(positive(*limit, "limit")?, positive(*win, "window_ms")?)?;
    let opts = options(opts, p.limit, "limit")?;
    let d = run(ctx, *key, &Rule::Sliding(p), opts)?;
    reply_decision(ctx, &d);
    Ok(())
}
