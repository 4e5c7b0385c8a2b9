//! `RL._APPLY key state [PXAT unix_ms]`: the internal command that carries an effect to
//! replicas and the AOF. Accepted only from the primary link or while loading; a normal
//! client calling it could otherwise reset its own limit.

use crate::args::int;
use crate::datatype;
use crate::error::{Error, APPLY_INTERNAL, APPLY_PAYLOAD, SYNTAX};
use crate::rm::{self, api, Ctx, Key, RStr};
use crate::state::State;
use redis_module::raw;

pub fn apply(ctx: Ctx, args: &[RStr]) -> Result<(), Error> {
    let flags = rm::context_flags(ctx);
    if flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) == 0 {
        return Err(APPLY_INTERNAL.into());
    }
    let (name, payload, at) = match args {
        [_, k, p] => (*k, *p, None),
        [_, k, p, word, at] if rm::bytes(*word).eq_ignore_ascii_case(b"PXAT") => {
            (*k, *p, Some(int(*at)?))
        }
        [_, _, _, ..] => return Err(SYNTAX.into()),
        _ => return Err(Error::Arity),
    };
    let s = State::decode(rm::bytes(payload)).map_err(|_| Error::from(APPLY_PAYLOAD))?;
    let key = Key::open(ctx, name, true);
    if let datatype::Slot::Foreign = datatype::slot(&key) {
        key.delete();
    }
    if !datatype::store(&key, s) {
        return Err(APPLY_PAYLOAD.into());
    }
    if let Some(at) = at {
        key.set_abs_expire(at);
    }
    rm::signal_modified(ctx, name);
    // A replica's own AOF gets the effect too.
    api!(RedisModule_ReplicateVerbatim(ctx) else 0);
    rm::reply_simple(ctx, c"OK");
    Ok(())
}
