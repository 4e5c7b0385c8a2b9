//! `RL._APPLY key payload`: the internal command that carries an effect to
//! replicas and the AOF. Accepted only from the primary link or while loading; a normal
//! client calling it could otherwise reset its own limit.

use crate::clock;
use crate::error::{Error, APPLY_INTERNAL, APPLY_PAYLOAD};
use crate::replay::{Op, OP_VERSION};
use crate::rm::{self, Ctx, RStr};
use crate::state::{split_payload, State};
use crate::txn::{Effect, Expiry, Other, Txn, Written};
use redis_module::raw;

/// What a payload carries after its expiry: a whole state, or an operation to replay on the
/// key's state (`replay.rs`).
enum Payload {
    State(State),
    Op(Op),
}

fn parse(payload: &[u8]) -> Result<(Option<u64>, Payload), Error> {
    let bad = |_| Error::from(APPLY_PAYLOAD);
    let (head, body) = payload
        .split_first_chunk::<8>()
        .ok_or(Error::from(APPLY_PAYLOAD))?;
    if body.first() == Some(&OP_VERSION) {
        let at = u64::from_le_bytes(*head);
        return Ok((
            (at != 0).then_some(at),
            Payload::Op(Op::decode(body).map_err(bad)?),
        ));
    }
    let (at, s) = split_payload(payload).map_err(bad)?;
    Ok((at, Payload::State(s)))
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
    let (at, body) = parse(rm::bytes(payload))?;
    // The call already is the effect: passed on verbatim to this server's own replicas and
    // AOF (never the command verbatim: see `propagate`).
    let mut txn = Txn::open(ctx, name, true, clock::now_us());
    match body {
        Payload::State(s) => {
            let written = Written {
                effect: Effect::Verbatim(s.algo()),
                expiry: Expiry::At(at),
            };
            txn.replace(s, written)?;
        }
        Payload::Op(op) => {
            // The state the primary decided on: the key's (a replica holds what its primary
            // held), or the rule's fresh state for an empty key (RELEASE and RENEW have none:
            // nothing to replay on, as on a replica that diverged).
            txn.decide(
                op.algo(),
                Other::Overwrite,
                || op.fresh(),
                |s| {
                    let written = op.run(s).then(|| Written {
                        effect: Effect::Verbatim(op.algo()),
                        expiry: Expiry::At(at),
                    });
                    ((), written)
                },
            )?;
        }
    }
    rm::reply_simple(ctx, c"OK");
    Ok(None)
}
