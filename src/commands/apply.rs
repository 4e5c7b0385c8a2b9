//! `RL._APPLY key payload`: the internal command that carries an effect to
//! replicas and the AOF. Accepted only from the primary link or while loading; a normal
//! client calling it could otherwise reset its own limit.

use crate::datatype::{self, Pending, Slot};
use crate::error::{Error, APPLY_INTERNAL, APPLY_PAYLOAD};
use crate::replay::{Op, OP_VERSION};
use crate::rm::{self, Ctx, Key, RStr};
use crate::state::{split_payload, State};
use redis_module::raw;

/// What a payload carries after its expiry: a whole state, or an operation to replay on the
/// key's state (`replay.rs`).
enum Effect {
    State(State),
    Op(Op),
}

fn parse(payload: &[u8]) -> Result<(Option<u64>, Effect), Error> {
    let bad = |_| Error::from(APPLY_PAYLOAD);
    let (head, body) = payload
        .split_first_chunk::<8>()
        .ok_or(Error::from(APPLY_PAYLOAD))?;
    if body.first() == Some(&OP_VERSION) {
        let at = u64::from_le_bytes(*head);
        return Ok((
            (at != 0).then_some(at),
            Effect::Op(Op::decode(body).map_err(bad)?),
        ));
    }
    let (at, s) = split_payload(payload).map_err(bad)?;
    Ok((at, Effect::State(s)))
}

pub fn apply(ctx: Ctx, args: &[RStr]) -> Result<super::Decided, Error> {
    let flags = rm::context_flags(ctx);
    if flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) == 0 {
        return Err(APPLY_INTERNAL.into());
    }
    let [_, name, payload] = args else {
        return Err(Error::Arity);
    };
    // The payload is the absolute expiry (unix ms, 8 bytes LE, 0 = none: the AOF rewrite,
    // where Redis appends PEXPIREAT itself), then the state's encoding or an operation.
    let (at, effect) = parse(rm::bytes(payload))?;
    let mut key = Key::open(ctx, name, true);
    let algo = match effect {
        Effect::State(s) => {
            let algo = s.algo();
            if let Slot::Foreign = datatype::slot(&mut key) {
                key.delete();
            }
            if !datatype::store(&mut key, s) {
                return Err(APPLY_PAYLOAD.into());
            }
            algo
        }
        Effect::Op(op) => {
            let algo = op.algo();
            // The state the primary decided on: the key's (a replica holds what its primary
            // held), or the rule's fresh state for an empty key.
            let owned = match datatype::slot(&mut key) {
                Slot::Ours(mut held) if held.algo() == algo => {
                    if !op.run(&mut held) {
                        // Only a replica that diverged gets here: nothing to replay on.
                        rm::reply_simple(ctx, c"OK");
                        return Ok(None);
                    }
                    held.to_store()
                }
                _ => {
                    let Some(mut s) = op.fresh() else {
                        rm::reply_simple(ctx, c"OK");
                        return Ok(None);
                    };
                    op.run(&mut s);
                    key.delete();
                    Pending::Set(s)
                }
            };
            if !datatype::finish(&mut key, owned) {
                return Err(APPLY_PAYLOAD.into());
            }
            algo
        }
    };
    if let Some(at) = at {
        key.set_abs_expire(i64::try_from(at).unwrap_or(i64::MAX));
    }
    rm::signal_modified(ctx, name);
    rm::notify(ctx, algo, name);
    // A replica's own AOF gets the effect too (the same effect, never the command verbatim).
    crate::propagate::apply(ctx, name, rm::bytes(payload));
    rm::reply_simple(ctx, c"OK");
    Ok(None)
}
