//! The rate commands: `RL.GCRA`, `RL.TOKENBUCKET`, `RL.QUEUE`, `RL.SLIDING`, `RL.FIXED`,
//! `RL.LOG`, and `RL.ACQUIRE` (which shares their shape and reply), and the one parser of
//! a rule's numbers that they and RL.ALL's rules share.

use super::{count, reply_outcome, run, wait_or_reply, Decided};
use crate::algo::{slot, window, ParamError};
use crate::args::positive;
use crate::config::{
    self, ACQUIRE_MAX_LIMIT, ACQUIRE_MAX_LIMIT_NAME, LOG_MAX_LIMIT, LOG_MAX_LIMIT_NAME,
};
use crate::error::Error;
use crate::options::options;
use crate::rm::{self, Ctx, RStr};
use crate::rule::{Rule, WindowRule};
use crate::state::Algo;
use std::sync::atomic::AtomicI64;

/// A rule parsed from its numbers.
pub struct Parsed {
    pub rule: Rule,
    /// The name of its limit argument, for errors about options.
    pub limit_name: &'static str,
    /// How many arguments its numbers took.
    pub used: usize,
}

/// The rule of `algo` from the numbers at the front of `a` (after the key, or after the
/// algorithm's name in RL.ALL), named as in its row of the algorithm table; `Error::Arity`
/// if there are too few.
#[inline(always)]
pub fn parse_rule(algo: Algo, a: &[RStr]) -> Result<Parsed, Error> {
    let names = algo.spec().args;
    let used = names.len();
    let (Some(nums), Some(&limit_name)) = (a.get(..used), names.first()) else {
        return Err(Error::Arity);
    };
    // The rule's numbers, each at least 1 (the table names at most three).
    let mut v = [0u64; 3];
    for ((slot, arg), &name) in v.iter_mut().zip(nums).zip(names) {
        *slot = positive(arg, name)?;
    }
    let rule = Rule::new(algo, v)?;
    // The configs' largest limits.
    match rule {
        Rule::Log(p) => at_most_config(p.limit, &LOG_MAX_LIMIT, LOG_MAX_LIMIT_NAME)?,
        Rule::Acquire(p) => at_most_config(p.limit, &ACQUIRE_MAX_LIMIT, ACQUIRE_MAX_LIMIT_NAME)?,
        _ => {}
    }
    Ok(Parsed {
        rule,
        limit_name,
        used,
    })
}

/// `STAGGER`: the rule's windows offset by `slot * window_ms / 16384` ms, with `slot` the
/// key's Redis Cluster hash slot.
pub fn staggered(rule: Rule, key: &RStr) -> Rule {
    match rule {
        Rule::Window(r) => {
            let offset_ms = window::stagger_ms(slot::key_slot(rm::bytes(key)), r.params.span_ms);
            Rule::Window(WindowRule { offset_ms, ..r })
        }
        other => other,
    }
}

/// Refuses a limit above the max-limit config `name`.
fn at_most_config(limit: u64, config: &AtomicI64, name: &'static str) -> Result<(), Error> {
    let max = config::max_limit(config);
    if limit > max {
        return Err(ParamError::AboveConfig("limit", max, name).into());
    }
    Ok(())
}

/// `RL.<ALGO> key numbers... [options]` (RL.GCRA, RL.TOKENBUCKET, RL.SLIDING, RL.FIXED,
/// RL.LOG, RL.QUEUE, RL.ACQUIRE: their rows in `table.rs`): parses, runs and replies.
/// Inlined into each command's entry point, so the rule parser's match on the algorithm
/// folds away.
#[inline(always)]
pub fn rate(ctx: Ctx, args: &[RStr], algo: Algo) -> Result<Decided, Error> {
    let [_, key, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let parsed = parse_rule(algo, rest)?;
    let opts = options(
        rest.get(parsed.used..).unwrap_or(&[]),
        parsed.rule.limit(),
        parsed.limit_name,
        algo.spec().options,
    )?;
    let rule = if opts.stagger {
        staggered(parsed.rule, key)
    } else {
        parsed.rule
    };
    let req = opts.request();
    let mut out = run(ctx, key, &rule, &req)?;
    if let Some(wait_ms) = opts.wait_ms {
        let now = crate::clock::now_us();
        let job = || crate::wait::one(key, &rule, &req);
        if wait_or_reply(ctx, wait_ms, &req, &mut out, now, job) {
            // Blocked: answered when admitted or out of time (`wait.rs`).
            return Ok(None);
        }
    }
    reply_outcome(ctx, &out);
    Ok(count(&req, &out))
}
