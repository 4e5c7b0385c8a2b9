//! `RL.ALL numkeys key [key ...] rule [rule ...] [DRYRUN]`: several limits checked and spent
//! atomically, all or nothing.
//!
//! One rule per key, in the same order: `ALGO args... [COST n] [RESERVE r] [STAGGER]` with
//! ALGO one of `GCRA burst
//! count period_ms`, `TOKENBUCKET capacity refill_tokens refill_period_ms`, `SLIDING limit
//! window_ms`, `FIXED limit window_ms`, `LOG limit window_ms`, `QUEUE capacity interval_ms`.
//! `COST 0` peeks (never refuses, spends nothing); `STAGGER` is for FIXED and SLIDING.
//! The keys come first behind their count, as for EVAL, so Redis Cluster routes the call and
//! answers CROSSSLOT when they live in different slots.
//!
//! Reply: `allowed`, the 1-based index of the first rule that refused (0 when admitted), then
//! each rule's own reply (the standard five fields; six with `delay_ms` for QUEUE). When
//! refused, each rule's reply says what it alone would have decided, and nothing is spent.

use super::rate::{parse_rule, staggered};
use super::{reply_outcome, request, Decided};
use crate::args::positive;
use crate::clock;
use crate::error::{Error, ALL_DUPLICATE, ALL_NUMKEYS, SYNTAX};
use crate::options::{leading_options, ALL_RULE_OPTIONS, OPTIONS};
use crate::rm::{self, Ctx, RStr};
use crate::rule::{Request, Rule};
use crate::state::Algo;
use crate::txn::Txn;

/// One parsed rule with its key and request.
struct Item<'a> {
    key: &'a RStr,
    rule: Rule,
    req: Request,
}

/// A word of the rate commands' options.
fn is_option(word: &[u8]) -> bool {
    OPTIONS
        .iter()
        .any(|o| word.eq_ignore_ascii_case(o.word.as_bytes()))
}

/// Parses one rule for `key` at the front of `args` (its algorithm's name, its numbers, its
/// options: `COST n` (0 peeks), `RESERVE r`, and `STAGGER` for FIXED and SLIDING); returns
/// it and how many arguments it took.
fn parse_item<'a>(key: &'a RStr, args: &[RStr]) -> Result<(Item<'a>, usize), Error> {
    let word = rm::bytes(args.first().ok_or_else(Error::all_rules)?);
    let Some(algo) = Algo::of_rule_name(word) else {
        // An option the previous rule does not take (PARTIAL, BLOCK, ...) is misplaced, not
        // a missing rule.
        return Err(if is_option(word) {
            Error::Static(SYNTAX)
        } else {
            Error::all_rules()
        });
    };
    let nums = args.get(1..).unwrap_or(&[]);
    let parsed = match parse_rule(algo, nums) {
        // Too few numbers for the rule: the call's arity is fine, the rule is not.
        Err(Error::Arity) => return Err(Error::Static(SYNTAX)),
        other => other?,
    };
    let takes = algo.spec().options.and(ALL_RULE_OPTIONS);
    let rest = nums.get(parsed.used..).unwrap_or(&[]);
    let (opts, used) = leading_options(rest, parsed.rule.limit(), parsed.limit_name, takes)?;
    let rule = if opts.stagger {
        staggered(parsed.rule, key)
    } else {
        parsed.rule
    };
    let item = Item {
        key,
        rule,
        req: opts.request(),
    };
    Ok((item, 1 + parsed.used + used))
}

/// Parses the whole call: the items and DRYRUN.
fn parse(args: &[RStr]) -> Result<(Vec<Item<'_>>, bool), Error> {
    let [_, numkeys, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let n = positive(numkeys, "numkeys")? as usize;
    if n > rest.len() {
        return Err(ALL_NUMKEYS.into());
    }
    let (keys, mut tail) = rest.split_at(n);
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].iter().any(|o| rm::bytes(o) == rm::bytes(k)) {
            return Err(ALL_DUPLICATE.into());
        }
    }
    let mut items = Vec::with_capacity(n);
    for key in keys {
        let (item, used) = parse_item(key, tail)?;
        tail = tail.get(used..).unwrap_or(&[]);
        items.push(item);
    }
    let dryrun = match tail {
        [] => false,
        [w] if rm::bytes(w).eq_ignore_ascii_case(b"DRYRUN") => true,
        _ => return Err(SYNTAX.into()),
    };
    Ok((items, dryrun))
}

/// Answers a key-position request (`getkeys-api`): the keys are arguments 2..2+numkeys.
fn key_positions(ctx: Ctx, args: &[RStr]) {
    let n = args
        .get(1)
        .and_then(|a| crate::args::int(a).ok())
        .unwrap_or(0);
    let n = usize::try_from(n)
        .unwrap_or(0)
        .min(args.len().saturating_sub(2));
    for pos in 2..2 + n {
        rm::key_at_pos(ctx, pos);
    }
}

pub fn all(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    if rm::is_keys_position_request(ctx) {
        key_positions(ctx, args);
        return Ok(None);
    }
    let (items, dryrun) = parse(args)?;
    let now = clock::now_us();
    let mut txns: Vec<Txn> = items
        .iter()
        .map(|it| Txn::open(ctx, it.key, !dryrun, now))
        .collect();
    // Pass 1: every rule decides without writing.
    let mut outs = Vec::with_capacity(items.len());
    for (it, txn) in items.iter().zip(txns.iter_mut()) {
        let dry = Request {
            commit: false,
            ..it.req
        };
        outs.push(request(txn, &it.rule, &dry)?);
    }
    let refused_by = outs.iter().position(|o| !o.decision.allowed);
    if refused_by.is_none() && !dryrun {
        // Pass 2: all admit, so each spends, in one atomic step (effects are replicated
        // together: Redis wraps a command's several effects in MULTI/EXEC). The dry run
        // changed no state, so each key is read again as it was.
        for ((it, txn), o) in items.iter().zip(txns.iter_mut()).zip(outs.iter_mut()) {
            *o = request(txn, &it.rule, &it.req)?;
        }
    }
    for o in &outs {
        crate::stats::events(o.events);
    }
    rm::reply_array(ctx, 2 + outs.len());
    rm::reply_i64(ctx, i64::from(refused_by.is_none()));
    rm::reply_u64(ctx, refused_by.map_or(0, |i| i as u64 + 1));
    for o in &outs {
        reply_outcome(ctx, o);
    }
    Ok(Some(refused_by.is_none()))
}
