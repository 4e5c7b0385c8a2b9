//! `RL.INFO key`: the stored state as field/value pairs (a map on RESP3).

use crate::clock;
use crate::datatype::{self, Holds};
use crate::error::{Error, WRONGTYPE};
use crate::rm::{self, Ctx, Key, RStr};
use crate::state::InfoValue as Val;

pub fn info(ctx: Ctx, args: &[RStr]) -> Result<super::Decided, Error> {
    let [_, name] = args else {
        return Err(Error::Arity);
    };
    let mut key = Key::open(ctx, name, false);
    let s = match datatype::holds(&mut key) {
        Holds::Empty => {
            rm::reply_null(ctx);
            return Ok(None);
        }
        Holds::Foreign => return Err(Error::Static(WRONGTYPE)),
        Holds::Ours(s) => (*s).clone(),
    };
    let mut fields = s.info(clock::now_us());
    fields.push(("ttl_ms", Val::Signed(key.expire())));
    rm::reply_map(ctx, fields.len());
    for (k, v) in fields {
        rm::reply_bulk(ctx, k.as_bytes());
        match v {
            Val::Str(s) => rm::reply_bulk(ctx, s.as_bytes()),
            Val::Int(n) => rm::reply_u64(ctx, n),
            Val::Signed(n) => rm::reply_i64(ctx, n),
            Val::Owned(s) => rm::reply_bulk(ctx, s.as_bytes()),
        }
    }
    Ok(None)
}
