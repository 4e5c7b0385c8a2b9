//! `RL.RELEASE key token` and `RL.RENEW key token lease_ms` (RL.ACQUIRE is in `rate`).

use super::Decided;
use crate::algo::lease::{self, Token};
use crate::args::positive;
use crate::clock;
use crate::error::{Error, TOKEN};
use crate::replay::Op;
use crate::rm::{self, Ctx, RStr};
use crate::state::Algo;
use crate::txn::{Effect, Expiry, Other, Txn, Written};

/// Runs `op` on the key's leases; writes, expires and replicates the operation (never the
/// leases: see `replay.rs`) when it changed them. Replies 1 if it did, 0 otherwise (no key,
/// stale or unknown token).
fn with_leases(ctx: Ctx, name: &RStr, op: Op) -> Result<Decided, Error> {
    let mut txn = Txn::open(ctx, name, true, op.now_us());
    let done = txn.decide(
        Algo::Concurrency,
        Other::Refuse,
        || None,
        |s| {
            if !op.run(s) {
                return (false, None);
            }
            // The leases' TTL, or a pause's end if later.
            let ttl = crate::rule::reset_ms(s, op.now_us());
            let written = Written {
                effect: Effect::Encoded(op.algo().event(), op.encode()),
                expiry: Expiry::After(ttl),
            };
            (true, Some(written))
        },
    )?;
    let done = done.unwrap_or(false);
    rm::reply_i64(ctx, i64::from(done));
    Ok(Some(done))
}

fn token(s: &RStr) -> Result<Token, Error> {
    Token::parse(rm::bytes(s)).ok_or(Error::Static(TOKEN))
}

/// `RL.RELEASE key token`
pub fn release(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, key, tok] = args else {
        return Err(Error::Arity);
    };
    let token = token(tok)?;
    let now_us = clock::now_us();
    with_leases(ctx, key, Op::Release { token, now_us })
}

/// `RL.RENEW key token lease_ms`
pub fn renew(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let [_, key, tok, ms] = args else {
        return Err(Error::Arity);
    };
    let token = token(tok)?;
    let lease_ms = lease::lease_ms(positive(ms, "lease_ms")?)?;
    let now_us = clock::now_us();
    let op = Op::Renew {
        token,
        lease_ms,
        now_us,
    };
    with_leases(ctx, key, op)
}
