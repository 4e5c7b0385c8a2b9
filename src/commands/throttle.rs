//! `CL.THROTTLE key max_burst count_per_period period [quantity]`: redis-cell's command,
//! with its replies, on this module's state. A key still holding redis-cell's string state
//! (the TAT in ns) is adopted: it becomes a `gcra` state on the next admitted request.

use super::{commit, effect, state_of, Decided};
use crate::algo::cell;
use crate::args::{non_negative, positive};
use crate::clock;
use crate::datatype::Pending;
use crate::error::{Error, WRONGTYPE};
use crate::ops;
use crate::rm::{Ctx, Key, RStr};
use crate::state::Algo;
use redis_module::raw;

/// redis-cell's stored value: the TAT in ns as decimal digits.
fn parse_cell_string(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

pub fn throttle(ctx: Ctx, args: &[RStr]) -> Result<Decided, Error> {
    let (name, burst, count, period, quantity) = match args {
        [_, k, b, c, p] => (k, b, c, p, None),
        [_, k, b, c, p, q] => (k, b, c, p, Some(q)),
        _ => return Err(Error::Arity),
    };
    let p = cell::Params::new(
        non_negative(burst, "max_burst")?,
        positive(count, "count_per_period")?,
        positive(period, "period")?,
    )?;
    // 0 is redis-cell's peek: the same reply, and nothing written here, ever.
    let quantity = match quantity {
        Some(q) => non_negative(q, "quantity")?,
        None => 1,
    };
    let now_us = clock::now_us();
    let mut key = Key::open(ctx, name, true);
    let adopted = key.kind() == raw::REDISMODULE_KEYTYPE_STRING;
    let (held, adopted_ns) = if adopted {
        let tat_ns = key
            .string_value()
            .and_then(parse_cell_string)
            .ok_or(Error::Static(WRONGTYPE))?;
        (None, Some(tat_ns))
    } else {
        (state_of(&mut key, Algo::Gcra)?, None)
    };
    let t = ops::throttle(held.as_deref(), adopted_ns, &p, quantity, now_us)?;
    let reply = t.reply;
    if t.blocked {
        if quantity > 0 {
            crate::stats::events(crate::rule::Event::Blocked.bit());
        }
        reply_cell(ctx, &reply);
        return Ok((quantity > 0).then_some(false));
    }
    if let Some(next) = t.next {
        let eff = effect(&next);
        let owned = match held {
            Some(h) => h.replace_with(next),
            // redis-cell's string, replaced by the state.
            None if adopted => Pending::Store(next),
            None => Pending::Set(next),
        };
        commit(ctx, &mut key, name, owned, eff, now_us, t.ttl_ms);
    }
    reply_cell(ctx, &reply);
    Ok(Some(!reply.limited))
}

/// redis-cell's reply: five integers.
fn reply_cell(ctx: Ctx, r: &cell::Reply) {
    let fields = [
        i64::from(r.limited),
        r.limit,
        r.remaining,
        r.retry_after_s,
        r.reset_after_s,
    ];
    super::reply_ints(ctx, &fields, 0);
}
