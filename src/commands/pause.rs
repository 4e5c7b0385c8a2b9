//! `RL.PAUSE key ms [PROBE probe_ms]` and `RL.RESUME key`: pause a key of any algorithm (or
//! a missing one) and lift it. The pure parts are `rule::pause` and `rule::resume`; both
//! write through the key transaction (the state with its absolute expiry, the keyspace
//! event, and the state's encoding as the effect: never the clock-dependent command).

use super::Decided;
use crate::algo::span;
use crate::args::positive;
use crate::clock;
use crate::error::{Error, SYNTAX};
use crate::rm::{self, Ctx, RStr};
use crate::rule;
use crate::state::{Algo, Paused, State, PAUSE_EVENT, RESUME_EVENT};
use crate::txn::{Effect, Expiry, Other, Txn, Written};

/// `RL.PAUSE key ms [PROBE probe_ms]`: replies the ms until the pause ends.
pub fn pause(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, key, ms, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let ms = span(positive(ms, "ms")?, "ms")?;
    let probe_ms = match rest {
        [] => None,
        [word, v] if rm::bytes(word).eq_ignore_ascii_case(b"PROBE") => {
            Some(span(positive(v, "probe_ms")?, "probe_ms")?)
        }
        _ => return Err(Error::Static(SYNTAX)),
    };
    let mut txn = Txn::open(ctx, key, true, clock::now_us());
    let now_us = txn.now_us();
    let left = txn.decide(
        // Any algorithm's state, or none: `Other::Any` takes whatever the key holds.
        Algo::Gcra,
        Other::Any,
        || {
            Some(State::Paused(Box::new(Paused {
                until_us: 0,
                probe_ms: 0,
                state: None,
            })))
        },
        |s| {
            let (left, ttl) = rule::pause(s, ms, probe_ms, now_us);
            let written = Written {
                effect: Effect::Encoded(PAUSE_EVENT, s.encode()),
                expiry: Expiry::After(ttl),
            };
            (left, Some(written))
        },
    )?;
    rm::reply_u64(ctx, left.unwrap_or(0));
    Ok(None)
}

/// `RL.RESUME key`: replies 1 if a pause or a BLOCK penalty was lifted, else 0.
pub fn resume(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, key] = args else {
        return Err(Error::Arity);
    };
    let mut txn = Txn::open(ctx, key, true, clock::now_us());
    let now_us = txn.now_us();
    let lifted = txn.decide(
        Algo::Gcra,
        Other::Any,
        || None,
        |s| match rule::resume(s, now_us) {
            None => (false, None),
            Some(ttl) => {
                // TTL 0: nothing is left (a key holding only a pause), the key goes.
                let written = Written {
                    effect: Effect::Encoded(RESUME_EVENT, s.encode_effect()),
                    expiry: Expiry::After(ttl),
                };
                (true, Some(written))
            }
        },
    )?;
    rm::reply_i64(ctx, i64::from(lifted.unwrap_or(false)));
    Ok(None)
}
