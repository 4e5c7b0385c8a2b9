//! `RL.RELEASE key token` and `RL.RENEW key token lease_ms` (RL.ACQUIRE is in `rate`).

use super::{commit, effect, state_of};
use crate::algo::lease::{self, Token};
use crate::args::positive;
use crate::clock;
use crate::error::{Error, TOKEN};
use crate::rm::{self, Ctx, Key, RStr};
use crate::state::{Algo, State};

/// Runs `f` on the key's leases; writes, expires and replicates when it returns true.
/// Replies 1 if it did, 0 otherwise (no key, stale or unknown token).
fn with_leases(
    ctx: Ctx,
    name: &RStr,
    f: impl FnOnce(&mut lease::Leases, u64) -> bool,
) -> Result<(), Error> {
    let now = clock::now_us();
    let mut key = Key::open(ctx, name, true);
    let done = match state_of(&mut key, Algo::Concurrency)? {
        Some(mut held) => {
            let (changed, ttl) = match &mut *held {
                State::Concurrency(c) => {
                    let changed = f(&mut c.leases, now);
                    (changed, c.leases.ttl_ms(now))
                }
                _ => (false, 0),
            };
            if changed {
                let eff = effect(&held);
                let owned = held.to_store();
                commit(ctx, &mut key, name, owned, eff, ttl);
            }
            changed
        }
        None => false,
    };
    crate::stats::decided(done);
    rm::reply_i64(ctx, i64::from(done));
    Ok(())
}

fn token(s: &RStr) -> Result<Token, Error> {
    Token::parse(rm::bytes(s)).ok_or(Error::Static(TOKEN))
}

/// `RL.RELEASE key token`
pub fn release(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    let [_, key, tok] = args else {
        return Err(Error::Arity);
    };
    let t = token(tok)?;
    with_leases(ctx, key, |l, now| l.release(t, now))
}

/// `RL.RENEW key token lease_ms`
pub fn renew(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    let [_, key, tok, ms] = args else {
        return Err(Error::Arity);
    };
    let t = token(tok)?;
    let p = lease::Params::new(1, positive(ms, "lease_ms")?)?;
    with_leases(ctx, key, |l, now| l.renew(t, p.lease_ms, now))
}
