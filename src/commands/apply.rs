//! `RL._APPLY key payload [key payload ...]`: the internal command that carries an effect to
//! replicas and the AOF. Accepted only from the primary link or while loading; a normal
//! client calling it could otherwise reset its own limit.

use crate::clock;
use crate::error::{Error, APPLY_INTERNAL, APPLY_PAYLOAD};
use crate::propagate::Batch;
use crate::replay::{Op, OP_VERSION};
use crate::rm::{self, Ctx, RStr};
use crate::state::{split_payload, State};
use crate::stats::Counters;
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

/// `RL._APPLY`, counting a call in `counters` (its own) per key written beyond the first.
pub fn apply(ctx: Ctx, args: &[RStr], counters: &Counters) -> Result<super::Decided, Error> {
    // `key payload` pairs: one for the write of one key (and the AOF rewrite), several for
    // one call on several keys (RL.ALL; all in one slot). Any other shape is an arity error,
    // as the server's own check answered when the command took exactly one pair.
    let pairs = match args {
        [_, rest @ ..] if !rest.is_empty() && rest.len() % 2 == 0 => rest,
        _ => return Err(Error::Arity),
    };
    let flags = rm::context_flags(ctx);
    if flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) == 0 {
        return Err(APPLY_INTERNAL.into());
    }
    if pairs.len() > 2 {
        // Every payload is checked before any key is written.
        for p in pairs.iter().skip(1).step_by(2) {
            parse(rm::bytes(p))?;
        }
        // `INFO ratelimit` counts a call per key written, as when each key had its own.
        for _ in 1..pairs.len() / 2 {
            counters.call();
        }
    }
    // The call already is the effect: passed on verbatim, once, to this server's own
    // replicas and AOF (never the command verbatim: see `propagate`).
    let mut batch = Batch::new(ctx);
    let mut res = Ok(());
    for pair in pairs.chunks_exact(2) {
        if let [name, payload] = pair {
            res = parse(rm::bytes(payload)).and_then(|p| apply_one(ctx, name, p, &mut batch));
            if res.is_err() {
                break;
            }
        }
    }
    if batch.verbatim {
        rm::replicate_verbatim(ctx);
    }
    res?;
    rm::reply_simple(ctx, c"OK");
    Ok(None)
}

/// Applies one pair's payload (its expiry and body) to key `name`.
fn apply_one<'a>(
    ctx: Ctx,
    name: &'a RStr,
    (at, body): (Option<u64>, Payload),
    batch: &mut Batch<'a>,
) -> Result<(), Error> {
    // The payload is the absolute expiry (unix ms, 8 bytes LE, 0 = none: the AOF rewrite,
    // where Redis appends PEXPIREAT itself), then the state's encoding or an operation.
    let mut txn = Txn::open(ctx, name, true, clock::now_us());
    match body {
        Payload::State(s) => {
            let written = Written {
                effect: Effect::Verbatim(s.event()),
                expiry: Expiry::At(at),
            };
            txn.replace_in(s, written, Some(batch))?;
        }
        Payload::Op(op) => {
            // The state the primary decided on: the key's (a replica holds what its primary
            // held), or the rule's fresh state for an empty key (RELEASE and RENEW have none:
            // nothing to replay on, as on a replica that diverged).
            txn.decide_in(
                op.algo(),
                Other::Overwrite,
                || op.fresh(),
                |s| {
                    let written = op.run(s).then(|| Written {
                        effect: Effect::Verbatim(op.algo().event()),
                        expiry: Expiry::At(at),
                    });
                    ((), written)
                },
                Some(batch),
            )?;
        }
    }
    Ok(())
}
