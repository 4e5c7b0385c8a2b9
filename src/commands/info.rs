//! `RL.INFO key`: the stored state as field/value pairs (a map on RESP3).

use crate::algo::gcra;
use crate::clock;
use crate::datatype::{self, Slot};
use crate::error::{Error, WRONGTYPE};
use crate::rm::{self, Ctx, Key, RStr};
use crate::state::{Algo, State};

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
    let algo = || ("algorithm", Val::Str(s.algo().name()));
    let now_us = clock::now_us();
    // The rule's numbers under their argument names (the algorithm table's), then the
    // state's own fields.
    let rule = |values: &[u64]| -> Vec<(&'static str, Val)> {
        let names = s.algo().spec().args.iter();
        let rule = names.zip(values).map(|(&n, &v)| (n, Val::Int(v)));
        std::iter::once(algo()).chain(rule).collect()
    };
    let mut fields = match s.unblocked() {
        State::Gcra(b) => {
            let mut f = rule(&[b.params.burst, b.params.count, b.params.period_ms]);
            f.push(("tat_ns", Val::Int(b.tat.ns)));
            f
        }
        State::TokenBucket(b) => {
            let mut f = rule(&[b.params.burst, b.params.count, b.params.period_ms]);
            let tokens = gcra::tokens(Some(b.stored()), &b.params, now_us);
            f.extend([("tokens", Val::Int(tokens)), ("tat_ns", Val::Int(b.tat.ns))]);
            f
        }
        State::Queue(b) => {
            let mut f = rule(&[b.params.burst, b.params.period_ms]);
            f.push(("tat_ns", Val::Int(b.tat.ns)));
            f
        }
        State::Sliding(w) | State::Fixed(w) => {
            let mut f = rule(&[w.params.limit, w.params.window_ms]);
            f.push(("window_start_ms", Val::Int(w.counters.start_ms)));
            if s.algo() == Algo::Sliding {
                f.push(("previous_count", Val::Int(w.counters.prev)));
                f.push(("current_count", Val::Int(w.counters.cur)));
            } else {
                f.push(("count", Val::Int(w.counters.cur)));
            }
            f
        }
        State::Log(l) => {
            let mut f = rule(&[l.params.limit, l.params.window_ms]);
            let e = l.log.entries();
            f.extend([
                ("entries", Val::Int(e.len() as u64)),
                ("oldest_us", Val::Int(e.front().unwrap_or(0))),
                ("newest_us", Val::Int(e.back().unwrap_or(0))),
            ]);
            f
        }
        // Its lease argument is a maximum: RL.RENEW may ask for less.
        State::Concurrency(c) => vec![
            algo(),
            ("limit", Val::Int(c.limit)),
            ("max_lease_ms", Val::Int(c.leases.max_lease_ms)),
            ("leases", Val::Int(c.leases.leases.len() as u64)),
            ("last_token", Val::Owned(c.leases.last.to_string())),
            ("horizon_us", Val::Int(c.leases.horizon_us)),
        ],
        // `unblocked` never returns a blocked state.
        State::Blocked(_) => vec![algo()],
    };
    fields.push(ttl);
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
