//! `CL.THROTTLE key max_burst count_per_period period [quantity]`: redis-cell's command,
//! with its replies, on this module's state. A key still holding redis-cell's string state
//! (the TAT in ns) is adopted: it becomes a `gcra` state on the next admitted request.

use super::{commit, effect, state_of, Decided};
use crate::algo::{cell, gcra, NS_PER_MS};
use crate::args::{non_negative, positive};
use crate::clock;
use crate::datatype::Pending;
use crate::error::{Error, WRONGTYPE};
use crate::rm::{Ctx, Key, RStr};
use crate::state::{Algo, Bucket, State};
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
    let names = ["max_burst", "count_per_period", "period"];
    let gp = gcra::Params::new(p.limit(), p.count, p.period_s.saturating_mul(1000), names)?;
    let now_us = clock::now_us();
    let now_ns = now_us.saturating_mul(1000);
    let mut key = Key::open(ctx, name, true);
    let adopted = key.kind() == raw::REDISMODULE_KEYTYPE_STRING;
    // The stored TAT; `retimed`: written under another emission interval, so re-timed by
    // its units (stored even on a refusal, as RL.GCRA does).
    // A key under a BLOCK penalty (set by a rate command on the same key) refuses until it
    // ends, as every command does; afterwards its state applies as before.
    let mut blocked_until_us = 0;
    let mut held = None;
    let (tat, retimed) = if adopted {
        let tat_ns = key
            .string_value()
            .and_then(parse_cell_string)
            .ok_or(Error::Static(WRONGTYPE))?;
        (Some(tat_ns), false)
    } else {
        held = state_of(&mut key, Algo::Gcra)?;
        let state = held.as_deref();
        if let Some(s) = state {
            blocked_until_us = s.blocked_until_us();
        }
        match state.map(State::unblocked) {
            Some(State::Gcra(b)) => {
                let (tat_ns, retimed) = gcra::view_ns(b.stored(), &gp, p.t_ns(), now_us);
                (Some(tat_ns), retimed)
            }
            _ => (None, false),
        }
    };
    if blocked_until_us > now_us {
        // Refused until the block ends, and no sooner than the state alone would admit this
        // quantity; a peek (quantity 0) is answered as RL.*'s are: not limited, nothing
        // remaining. Nothing is written.
        let (peek, _, _) = cell::throttle(tat, &p, 0, now_ns);
        let (alone, _, _) = cell::throttle(tat, &p, quantity, now_ns);
        let left_s = i64::try_from((blocked_until_us - now_us).div_ceil(1_000_000)).unwrap_or(0);
        let mut reply = peek;
        reply.remaining = 0;
        reply.reset_after_s = reply.reset_after_s.max(left_s);
        if quantity > 0 {
            reply.limited = true;
            reply.retry_after_s = match (alone.limited, alone.retry_after_s) {
                // Above the limit: never admitted, as redis-cell answers.
                (true, -1) => -1,
                (true, r) => r.max(left_s),
                (false, _) => left_s,
            };
            crate::stats::events(crate::rule::Event::Blocked.bit());
        }
        reply_cell(ctx, &reply);
        return Ok((quantity > 0).then_some(false));
    }
    let (reply, stored, ttl_ns) = cell::throttle(tat, &p, quantity, now_ns);
    // A peek (quantity 0) writes nothing, not even a re-timed state.
    let stored = if quantity == 0 {
        None
    } else {
        stored.or(tat.filter(|_| retimed))
    };
    if let Some(ns) = stored {
        let next = State::Gcra(Bucket {
            params: gp,
            tat: gcra::Tat { ns, frac: 0 },
        });
        let eff = effect(&next);
        // The key lives until its TAT, rounded up to whole ms: a debt under 1 ms keeps the
        // key to the end of the current millisecond at least (redis-cell's key, expiring at
        // its truncated TTL, lives to the end of that millisecond too), so every call until
        // then sees the debt. Decisions are redis-cell's; only PTTL reads up to 1 ms longer.
        let ttl_ms = u64::try_from(ttl_ns).unwrap_or(0).div_ceil(NS_PER_MS);
        let owned = match held {
            Some(h) => h.replace_with(next),
            // redis-cell's string, replaced by the state.
            None if adopted => Pending::Store(next),
            None => Pending::Set(next),
        };
        commit(ctx, &mut key, name, owned, eff, now_us, ttl_ms);
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
