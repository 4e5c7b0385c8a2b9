//! `RL._APPLY key payload`: the internal command that carries an effect to
//! replicas and the AOF. Accepted only from the primary link or while loading; a normal
//! client calling it could otherwise reset its own limit.

use crate::datatype;
use crate::error::{Error, APPLY_INTERNAL, APPLY_PAYLOAD};
use crate::rm::{self, Ctx, Key, RStr};
use crate::state::split_payload;
use redis_module::raw;

pub fn apply(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    let flags = rm::context_flags(ctx);
    if flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) == 0 {
        return Err(APPLY_INTERNAL.into());
    }
    let [_, name, payload] = args else {
        return Err(Error::Arity);
    };
    // The payload is the absolute expiry (unix ms, 8 bytes LE, 0 = none: the AOF rewrite,
    // where Redis appends PEXPIREAT itself) and the state's encoding.
    let (at, s) = split_payload(rm::bytes(payload)).map_err(|_| Error::from(APPLY_PAYLOAD))?;
    let algo = s.algo();
    let mut key = Key::open(ctx, name, true);
    if let datatype::Slot::Foreign = datatype::slot(&mut key) {
        key.delete();
    }
    if !datatype::store(&mut key, s) {
        return Err(APPLY_PAYLOAD.into());
    }
    if let Some(at) = at {
        key.set_abs_expire(i64::try_from(at).unwrap_or(i64::MAX));
    }
    rm::signal_modified(ctx, name);
    rm::notify(ctx, algo, name);
    // A replica's own AOF gets the effect too (the same effect, never the command verbatim).
    crate::propagate::apply(ctx, name, rm::bytes(payload));
    rm::reply_simple(ctx, c"OK");
    Ok(())
}
