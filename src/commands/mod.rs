//! The command layer: parse, hand a pure decision to the key transaction (`txn.rs`: open,
//! decide, store, expire, notify, effect), reply. Nothing else.

pub mod all;
pub mod apply;
pub mod info;
pub mod lease;
pub mod pause;
pub mod policy;
pub mod rate;
pub mod testclock;
pub mod throttle;

use crate::algo::Decision;
use crate::clock;
use crate::error::{Error, INTERNAL};
use crate::replay::Op;
use crate::rm::{self, Ctx, RStr};
use crate::rule::{Ask, Extra, Outcome, Request, Rule};
use crate::state::State;
use crate::stats::{self, Counters};
use crate::txn::{Effect, Expiry, Other, Txn, Written};
use std::ffi::c_int;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A command implementation: `args[0]` is the command name. Replies itself on success, and
/// returns what it decided, for the command's counters.
pub type Handler = fn(Ctx, &[RStr]) -> Result<Decided, Error>;

/// What a call decided: `Some(admitted)` for a decided request (RELEASE/RENEW: whether the
/// lease was found), `None` for anything else (a peek, a refund, RL.INFO, ...).
pub type Decided = Option<bool>;

/// Runs a handler on the arguments of a call (from [`rm::entry`]): never lets a panic reach
/// the server, and turns errors into error replies; counts the call and its outcome in the
/// command's `counters`.
pub fn dispatch(ctx: Ctx, args: &[RStr], h: Handler, counters: &Counters) -> c_int {
    counters.call();
    let res = catch_unwind(AssertUnwindSafe(|| h(ctx, args)));
    match res {
        Ok(Ok(decided)) => {
            if let Some(admitted) = decided {
                counters.decided(admitted);
            }
            rm::OK
        }
        Ok(Err(Error::Arity)) => {
            counters.error();
            rm::wrong_arity(ctx)
        }
        Ok(Err(e)) => {
            counters.error();
            rm::reply_error(ctx, e.as_cstr());
            rm::OK
        }
        Err(_) => {
            counters.error();
            rm::reply_error(ctx, INTERNAL);
            rm::OK
        }
    }
}

/// Replies an array of `values` and room for `extra` more elements.
pub fn reply_ints(ctx: Ctx, values: &[i64], extra: usize) {
    rm::reply_array(ctx, values.len() + extra);
    for &v in values {
        rm::reply_i64(ctx, v);
    }
}

/// Replies the five standard fields, and room for `extra_fields` more.
pub fn reply_decision(ctx: Ctx, d: &Decision, extra_fields: usize) {
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let fields = [
        i64::from(d.allowed),
        int(d.limit),
        int(d.remaining),
        int(d.retry_after_ms),
        int(d.reset_after_ms),
    ];
    reply_ints(ctx, &fields, extra_fields);
}

/// Replies an outcome: the five fields, the command's extra field if any (QUEUE's
/// `delay_ms`, ACQUIRE's `token`), then `granted` for a PARTIAL request, then `probe` for a
/// PROBE request.
pub fn reply_outcome(ctx: Ctx, o: &Outcome) {
    let more = usize::from(o.granted.is_some())
        + usize::from(o.probe.is_some())
        + usize::from(o.waited.is_some());
    match o.extra {
        Extra::None => reply_decision(ctx, &o.decision, more),
        Extra::Delay(ms) => {
            reply_decision(ctx, &o.decision, 1 + more);
            rm::reply_u64(ctx, ms);
        }
        Extra::Token(t) => {
            reply_decision(ctx, &o.decision, 1 + more);
            match t {
                Some(t) => {
                    let mut buf = [0u8; 48];
                    let n = {
                        let mut w = &mut buf[..];
                        let _ = write!(w, "{t}");
                        48 - w.len()
                    };
                    rm::reply_bulk(ctx, buf.get(..n).unwrap_or(&[]));
                }
                None => rm::reply_null(ctx),
            }
        }
    }
    if let Some(g) = o.granted {
        rm::reply_u64(ctx, g);
    }
    if let Some(p) = o.probe {
        rm::reply_i64(ctx, i64::from(p));
    }
    if let Some(w) = o.waited {
        rm::reply_u64(ctx, w);
    }
}

/// Counts the events of a decided request, and says whether it was decided: admitted or
/// refused for a spend (peeks and refunds are counted only as such).
pub fn count(req: &Request, o: &Outcome) -> Decided {
    stats::events(o.events);
    matches!(req.ask, Ask::Spend(c) if c > 0).then_some(o.decision.allowed)
}

/// Decides one request of `rule` on key `name` and, when it writes (see
/// [`Rule::request`]), stores the new state with its TTL and propagates the effect: one key
/// transaction (`txn.rs`).
#[inline(always)]
pub fn run(ctx: Ctx, name: &RStr, rule: &Rule, req: &Request) -> Result<Outcome, Error> {
    let mut txn = Txn::open(ctx, name, req.commit, clock::now_us());
    if crate::wait::any() {
        // Behind the key's waiters, if it has any.
        let req = crate::wait::behind_waiters(ctx, name, req);
        return request(&mut txn, rule, &req);
    }
    request(&mut txn, rule, req)
}

/// A decided request with `WAIT ms` (`wait_ms`): refused, it blocks the client (true: the
/// reply comes later) where the client can block; else it is answered now, with
/// `waited_ms` 0.
pub fn wait_or_reply(
    ctx: Ctx,
    key: &RStr,
    wait: &crate::wait::Wait,
    out: &mut Outcome,
    now_us: u64,
) -> bool {
    if !out.decision.allowed
        && wait.wait_ms > 0
        && matches!(wait.req.ask, Ask::Spend(c) if c > 0)
        && wait.req.commit
        && crate::wait::can_block(ctx)
        && crate::wait::enqueue(ctx, key, wait, now_us, out)
    {
        return true;
    }
    out.waited = Some(0);
    false
}

/// [`run`] on an open key.
#[inline(always)]
pub fn request(txn: &mut Txn, rule: &Rule, req: &Request) -> Result<Outcome, Error> {
    request_in(txn, rule, req, Other::Refuse)
}

/// [`request`], with a key holding something else handled as `other` says.
#[inline(always)]
pub fn request_in(
    txn: &mut Txn,
    rule: &Rule,
    req: &Request,
    other: Other,
) -> Result<Outcome, Error> {
    let now = txn.now_us();
    let out = txn.decide(
        rule.algo(),
        other,
        || Some(rule.fresh()),
        |s| {
            let out = rule.request(s, req, now);
            let written = out.wrote.then(|| Written {
                effect: effect_of_request(rule, req, now, s),
                expiry: Expiry::After(out.decision.reset_after_ms),
            });
            (out, written)
        },
    )?;
    out.ok_or(Error::Static(INTERNAL))
}

/// The effect of `req` of `rule` at `now_us`, which wrote `s`: the operation for an RL.LOG
/// or RL.ACQUIRE rule, else the state.
#[inline]
pub fn effect_of_request(rule: &Rule, req: &Request, now_us: u64, s: &State) -> Effect {
    if let State::Paused(_) = s {
        // A paused key (a probe, a refund under a pause): the whole state, so no replica
        // replays a PROBE request.
        return Effect::state(s);
    }
    match Op::of_request(rule, req, now_us) {
        Some(op) => Effect::Encoded(op.algo().event(), op.encode()),
        None => Effect::state(s),
    }
}
