//! One request of a rule decided on an open key: the pure decision inside the one key
//! transaction (`txn.rs`), with its write's effect (the state, or the operation that
//! replays it). Every command that decides a request, and a woken waiter, go through it.

use crate::error::{Error, INTERNAL};
use crate::replay::Op;
use crate::rule::{Outcome, Request, Rule};
use crate::state::State;
use crate::txn::{Effect, Expiry, Other, Txn, Written};

/// One request of `rule` on an open key (`commands::run` opens it).
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
#[inline(always)]
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
