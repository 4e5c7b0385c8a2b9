//! `RL.INFO key`: the stored state as field/value pairs (a map on RESP3).

use crate::algo::gcra;
use crate::clock;
use crate::datatype::{self, Slot};
use crate::error::{Error, WRONGTYPE};
use crate::rm::{self, Ctx, Key, RStr};
use crate::state::State;

enum Val {
    Str(&'static str),
    Int(u64),
    Signed(i64),
    Owned(String),
}

pub fn info(ctx: Ctx, args: &[RStr]) -> Result<super::Decided, Error> {
    let [_, name] = args else {
        return Err(Error::Arity);
    };
    let mut key = Key::open(ctx, name, false);
    let s = match datatype::slot(&mut key) {
        Slot::Empty => {
            rm::reply_null(ctx);
            return Ok(None);
        }
        Slot::Foreign => return Err(Error::Static(WRONGTYPE)),
        Slot::Ours(s) => (*s).clone(),
    };
    let ttl = ("ttl_ms", Val::Signed(key.expire()));
    let algo = ("algorithm", Val::Str(s.algo().name()));
    let now_us = clock::now_us();
    let mut fields: Vec<(&str, Val)> = match s.unblocked() {
        State::Gcra(b) => vec![
            algo,
            ("burst", Val::Int(b.params.burst)),
            ("count", Val::Int(b.params.count)),
            ("period_ms", Val::Int(b.params.period_ms)),
            ("tat_ns", Val::Int(b.tat.ns)),
            ttl,
        ],
        State::TokenBucket(b) => vec![
            algo,
            ("capacity", Val::Int(b.params.burst)),
            ("refill_tokens", Val::Int(b.params.count)),
            ("refill_period_ms", Val::Int(b.params.period_ms)),
            (
                "tokens",
                Val::Int(gcra::tokens(Some(b.stored()), &b.params, now_us)),
            ),
            ("tat_ns", Val::Int(b.tat.ns)),
            ttl,
        ],
        State::Sliding(w) => vec![
            algo,
            ("limit", Val::Int(w.params.limit)),
            ("window_ms", Val::Int(w.params.window_ms)),
            ("window_start_ms", Val::Int(w.counters.start_ms)),
            ("previous_count", Val::Int(w.counters.prev)),
            ("current_count", Val::Int(w.counters.cur)),
            ttl,
        ],
        State::Queue(b) => vec![
            algo,
            ("capacity", Val::Int(b.params.burst)),
            ("interval_ms", Val::Int(b.params.period_ms)),
            ("tat_ns", Val::Int(b.tat.ns)),
            ttl,
        ],
        State::Fixed(w) => vec![
            algo,
            ("limit", Val::Int(w.params.limit)),
            ("window_ms", Val::Int(w.params.window_ms)),
            ("window_start_ms", Val::Int(w.counters.start_ms)),
            ("count", Val::Int(w.counters.cur)),
            ttl,
        ],
        State::Log(l) => vec![
            algo,
            ("limit", Val::Int(l.params.limit)),
            ("window_ms", Val::Int(l.params.window_ms)),
            ("entries", Val::Int(l.log.entries().len() as u64)),
            ("oldest_us", Val::Int(l.log.entries().front().unwrap_or(0))),
            ("newest_us", Val::Int(l.log.entries().back().unwrap_or(0))),
            ttl,
        ],
        State::Concurrency(c) => vec![
            algo,
            ("limit", Val::Int(c.limit)),
            ("max_lease_ms", Val::Int(c.leases.max_lease_ms)),
            ("leases", Val::Int(c.leases.leases.len() as u64)),
            ("last_token", Val::Owned(c.leases.last.to_string())),
            ("horizon_us", Val::Int(c.leases.horizon_us)),
            ttl,
        ],
        // `unblocked` never returns a blocked state.
        State::Blocked(_) => vec![algo, ttl],
    };
    // A BLOCK penalty in force: when it ends (unix ms, rounded up), before `ttl_ms`.
    let until_us = s.blocked_until_us();
    if until_us > now_us {
        let at = fields.len().saturating_sub(1);
        let until_ms = until_us.div_ceil(crate::algo::US_PER_MS);
        fields.insert(at, ("blocked_until_ms", Val::Int(until_ms)));
    }
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
