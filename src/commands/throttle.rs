//! `CL.THROTTLE key max_burst count_per_period period [quantity]`: redis-cell's command,
//! with its replies, on this module's state. A key still holding redis-cell's string state
//! (the TAT in ns) is adopted: it becomes a `gcra` state on the next admitted request.

use super::Decided;
use crate::algo::cell;
use crate::args::{non_negative, positive};
use crate::clock;
use crate::error::{Error, INTERNAL};
use crate::ops;
use crate::rm::{Ctx, RStr};
use crate::state::Algo;
use crate::txn::{Effect, Expiry, Other, Txn, Written};

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
    let gp = ops::gcra_params(&p)?;
    let mut txn = Txn::open(ctx, name, true, clock::now_us());
    let now_us = txn.now_us();
    // A key that still holds redis-cell's own state (the TAT in ns) is adopted: read as a
    // `gcra` state under this call's numbers, replaced by it on the next write.
    let adopt = |b: &[u8]| parse_cell_string(b).map(|ns| ops::cell_state(&gp, ns));
    let t = txn.decide(
        Algo::Gcra,
        Other::AdoptString(&adopt),
        || Some(ops::cell_state(&gp, 0)),
        |s| {
            let mut t = ops::throttle(s, &p, &gp, quantity, now_us);
            let written = t.next.take().map(|next| {
                *s = next;
                Written {
                    effect: Effect::state(s),
                    expiry: Expiry::After(t.ttl_ms),
                }
            });
            (t, written)
        },
    )?;
    let t = t.ok_or(Error::Static(INTERNAL))?;
    let reply = t.reply;
    if t.blocked {
        if quantity > 0 {
            crate::stats::events(crate::rule::Event::Blocked.bit());
        }
        reply_cell(ctx, &reply);
        return Ok((quantity > 0).then_some(false));
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
