//! `RL.ALL numkeys key [key ...] rule [rule ...] [DRYRUN]`: several limits checked and spent
//! atomically, all or nothing.
//!
//! One rule per key, in the same order: `ALGO args... [COST n]` with ALGO one of `GCRA burst
//! count period_ms`, `TOKENBUCKET capacity refill_tokens refill_period_ms`, `SLIDING limit
//! window_ms`, `FIXED limit window_ms`, `LOG limit window_ms`, `QUEUE capacity interval_ms`.
//! The keys come first behind their count, as for EVAL, so Redis Cluster routes the call and
//! answers CROSSSLOT when they live in different slots.
//!
//! Reply: `allowed`, the 1-based index of the first rule that refused (0 when admitted), then
//! each rule's own reply (the standard five fields; six with `delay_ms` for QUEUE). When
//! refused, each rule's reply says what it alone would have decided, and nothing is spent.

use super::{commit, effect, reply_outcome, state_of};
use crate::algo::{check_cost, gcra, window, ParamError};
use crate::args::positive;
use crate::clock;
use crate::datatype::Held;
use crate::error::{Error, ALL_DUPLICATE, ALL_NUMKEYS, ALL_RULES, SYNTAX};
use crate::rm::{self, Ctx, Key, RStr};
use crate::rule::{Outcome, Rule};
use crate::state::Algo;
use crate::stats;

/// One parsed rule with its key and cost.
struct Item {
    key: RStr,
    rule: Rule,
    cost: u64,
}

/// Parses one rule starting at `args[0]` (the algorithm name); returns it, its limit's name
/// and value, and how many arguments it took.
fn parse_rule(args: &[RStr]) -> Result<(Rule, u64, &'static str, usize), Error> {
    let word = rm::bytes(*args.first().ok_or(Error::Static(ALL_RULES))?);
    let is = |w: &[u8]| word.eq_ignore_ascii_case(w);
    let arg = |i: usize| args.get(i).copied().ok_or(Error::Static(SYNTAX));
    if is(b"GCRA") || is(b"TOKENBUCKET") {
        let (algo, names) = if is(b"GCRA") {
            (Algo::Gcra, gcra::GCRA_NAMES)
        } else {
            (Algo::TokenBucket, gcra::BUCKET_NAMES)
        };
        let p = gcra::Params::new(
            positive(arg(1)?, names[0])?,
            positive(arg(2)?, names[1])?,
            positive(arg(3)?, names[2])?,
            names,
        )?;
        return Ok((Rule::Bucket(algo, p), p.burst, names[0], 4));
    }
    if is(b"QUEUE") {
        let names = ["capacity", "count", "interval_ms"];
        let p = gcra::Params::new(
            positive(arg(1)?, names[0])?,
            1,
            positive(arg(2)?, names[2])?,
            names,
        )?;
        return Ok((Rule::Bucket(Algo::Queue, p), p.burst, names[0], 3));
    }
    let algo = if is(b"SLIDING") {
        Algo::Sliding
    } else if is(b"FIXED") {
        Algo::Fixed
    } else if is(b"LOG") {
        Algo::Log
    } else {
        return Err(ALL_RULES.into());
    };
    let p = window::Params::new(positive(arg(1)?, "limit")?, positive(arg(2)?, "window_ms")?)?;
    let rule = match algo {
        Algo::Log => {
            let max = super::rate::log_max_limit();
            if p.limit > max {
                return Err(
                    ParamError::AboveConfig("limit", max, "ratelimit.log-max-limit").into(),
                );
            }
            Rule::Log(p)
        }
        _ => Rule::Window(algo, p),
    };
    Ok((rule, p.limit, "limit", 3))
}

/// Parses the whole call: the items and DRYRUN.
fn parse(args: &[RStr]) -> Result<(Vec<Item>, bool), Error> {
    let [_, numkeys, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let n = positive(*numkeys, "numkeys")? as usize;
    if n > rest.len() {
        return Err(ALL_NUMKEYS.into());
    }
    let (keys, mut tail) = rest.split_at(n);
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].iter().any(|o| rm::bytes(*o) == rm::bytes(*k)) {
            return Err(ALL_DUPLICATE.into());
        }
    }
    let mut items = Vec::with_capacity(n);
    for key in keys {
        let (rule, limit, limit_name, used) = parse_rule(tail)?;
        tail = &tail[used..];
        let mut cost = 1;
        if let Some(w) = tail.first() {
            if rm::bytes(*w).eq_ignore_ascii_case(b"COST") {
                cost = positive(*tail.get(1).ok_or(Error::Static(SYNTAX))?, "cost")?;
                tail = &tail[2..];
            }
        }
        check_cost(cost, limit, limit_name)?;
        items.push(Item {
            key: *key,
            rule,
            cost,
        });
    }
    let dryrun = match tail {
        [] => false,
        [w] if rm::bytes(*w).eq_ignore_ascii_case(b"DRYRUN") => true,
        _ => return Err(SYNTAX.into()),
    };
    Ok((items, dryrun))
}

/// Answers a key-position request (`getkeys-api`): the keys are arguments 2..2+numkeys.
fn key_positions(ctx: Ctx, args: &[RStr]) {
    let n = args.get(1).and_then(|a| rm::to_i64(*a)).unwrap_or(0);
    let n = usize::try_from(n)
        .unwrap_or(0)
        .min(args.len().saturating_sub(2));
    for pos in 2..2 + n {
        rm::key_at_pos(ctx, pos);
    }
}

pub fn all(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    if rm::is_keys_position_request(ctx) {
        key_positions(ctx, args);
        return Ok(());
    }
    let (items, dryrun) = parse(args)?;
    let now = clock::now_us();
    let keys: Vec<Key> = items
        .iter()
        .map(|it| Key::open(ctx, it.key, !dryrun))
        .collect();
    let mut states = Vec::with_capacity(items.len());
    for (it, key) in items.iter().zip(&keys) {
        states.push(state_of(key, it.rule.algo())?);
    }
    // Pass 1: every rule decides without writing.
    let decide = |it: &Item, st: &mut Option<Held>, commit: bool| match st {
        Some(s) => it.rule.hit(s, it.cost, now, commit),
        None => it.rule.hit(&mut it.rule.fresh(), it.cost, now, false),
    };
    let mut outs: Vec<Outcome> = items
        .iter()
        .zip(states.iter_mut())
        .map(|(it, st)| decide(it, st, false))
        .collect();
    let refused_by = outs.iter().position(|o| !o.decision.allowed);
    if refused_by.is_none() && !dryrun {
        // Pass 2: all admit, so each spends, in one atomic step (effects are replicated
        // together: Redis wraps a command's several effects in MULTI/EXEC).
        for (i, (it, st)) in items.iter().zip(states.drain(..)).enumerate() {
            let mut held = st;
            let mut fresh = None;
            let state: &mut crate::state::State = match held.as_mut() {
                Some(h) => h,
                None => fresh.insert(it.rule.fresh()),
            };
            let out = it.rule.hit(state, it.cost, now, true);
            if out.wrote {
                let eff = effect(state);
                let owned = held.map_or(fresh, Held::to_store);
                if let Some(k) = keys.get(i) {
                    commit(ctx, k, it.key, owned, eff, out.decision.reset_after_ms);
                }
            }
            if let Some(o) = outs.get_mut(i) {
                *o = out;
            }
        }
    }
    stats::decided(refused_by.is_none());
    rm::reply_array(ctx, 2 + outs.len());
    rm::reply_i64(ctx, i64::from(refused_by.is_none()));
    rm::reply_u64(ctx, refused_by.map_or(0, |i| i as u64 + 1));
    for o in &outs {
        reply_outcome(ctx, o);
    }
    Ok(())
}
