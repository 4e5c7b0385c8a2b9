//! The command layer: parse, open the key, call the algorithm, store, set the TTL,
//! replicate the effect, reply. Nothing else.

pub mod all;
pub mod apply;
pub mod clock;
pub mod info;
pub mod lease;
pub mod rate;
pub mod throttle;

use crate::algo::Decision;
use crate::clock as mclock;
use crate::datatype::{self, Held, Pending, Slot};
use crate::error::{Error, INTERNAL, WRONGTYPE};
use crate::propagate;
use crate::replay::Op;
use crate::rm::{self, Ctx, Key, RStr};
use crate::rule::{Ask, Extra, Outcome, Request, Rule};
use crate::state::{Algo, Encoded, State};
use crate::stats::{self, Stat};
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
/// the server, and turns errors into error replies.
pub fn dispatch(ctx: Ctx, args: &[RStr], h: Handler, stat: Stat) -> c_int {
    stats::call(stat);
    let res = catch_unwind(AssertUnwindSafe(|| h(ctx, args)));
    match res {
        Ok(Ok(decided)) => {
            if let Some(admitted) = decided {
                stats::decided(stat, admitted);
            }
            rm::OK
        }
        Ok(Err(Error::Arity)) => {
            stats::error(stat);
            rm::wrong_arity(ctx)
        }
        Ok(Err(e)) => {
            stats::error(stat);
            rm::reply_error(ctx, e.as_cstr());
            rm::OK
        }
        Err(_) => {
            stats::error(stat);
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
/// `delay_ms`, ACQUIRE's `token`), then `granted` for a PARTIAL request.
pub fn reply_outcome(ctx: Ctx, o: &Outcome) {
    let more = usize::from(o.granted.is_some());
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
}

/// Counts the events of a decided request, and says whether it was decided: admitted or
/// refused for a spend (peeks and refunds are counted only as such).
pub fn count(req: &Request, o: &Outcome) -> Decided {
    stats::events(o.events);
    matches!(req.ask, Ask::Spend(c) if c > 0).then_some(o.decision.allowed)
}

/// The key's state if it holds one of `algo`: `Ok(None)` when empty, `WRONGTYPE` otherwise.
pub fn state_of(key: &mut Key, algo: Algo) -> Result<Option<Held<'_>>, Error> {
    match datatype::slot(key) {
        Slot::Empty => Ok(None),
        Slot::Ours(s) if s.algo() == algo => Ok(Some(s)),
        Slot::Ours(s) => Err(Error::other_algorithm(s.algo().name())),
        Slot::Foreign => Err(Error::Static(WRONGTYPE)),
    }
}

/// Decides one request of `rule` on key `name` and, when it writes (see
/// [`Rule::request`]), stores the new state with its TTL and propagates the effect.
pub fn run(ctx: Ctx, name: &RStr, rule: &Rule, req: &Request) -> Result<Outcome, Error> {
    let now = mclock::now_us();
    let mut key = Key::open(ctx, name, req.commit);
    let mut held = state_of(&mut key, rule.algo())?;
    let mut fresh = None;
    let state: &mut State = match held.as_mut() {
        Some(h) => h,
        None => fresh.insert(rule.fresh()),
    };
    let out = rule.request(state, req, now);
    if out.wrote {
        let eff = effect_of_request(rule, req, now, state);
        let owned = held.map_or(fresh.map_or(Pending::Done, Pending::Set), Held::to_store);
        commit(
            ctx,
            &mut key,
            name,
            owned,
            eff,
            now,
            out.decision.reset_after_ms,
        );
    }
    Ok(out)
}

/// What a write propagates: the state's encoding, or for a state that grows with its limit
/// the operation that changed it (`replay.rs`); always (see [`propagate`]).
pub struct Effect {
    algo: Algo,
    enc: Encoded,
}

/// The effect of writing `s` whole (encoded before the state is moved into its key).
pub fn effect(s: &State) -> Effect {
    Effect {
        algo: s.algo(),
        enc: s.encode(),
    }
}

/// The effect of the write `op`.
pub fn effect_of_op(op: &Op) -> Effect {
    Effect {
        algo: op.algo(),
        enc: op.encode(),
    }
}

/// The effect of `req` of `rule` at `now_us`, which wrote `s`: the operation for an RL.LOG
/// or RL.ACQUIRE rule, else the state.
#[inline]
pub fn effect_of_request(rule: &Rule, req: &Request, now_us: u64, s: &State) -> Effect {
    match Op::of_request(rule, req, now_us) {
        Some(op) => effect_of_op(&op),
        None => effect(s),
    }
}

/// Finishes a write decided at module time `now_us`: stores what `owned` leaves to store
/// (see [`Held::to_store`]), sets the TTL to `ttl_ms`, signals the change and propagates
/// the effect `eff` (the encoded state and its absolute expiry), never the clock-dependent
/// command.
pub fn commit(
    ctx: Ctx,
    key: &mut Key,
    name: &RStr,
    owned: Pending,
    eff: Effect,
    now_us: u64,
    ttl_ms: u64,
) {
    let algo = eff.algo;
    if ttl_ms == 0 {
        // Equivalent to a fresh key: no state at all.
        if !matches!(datatype::slot(key), Slot::Empty) {
            key.delete();
            propagate::del(ctx, name);
        }
        return;
    }
    if !datatype::finish(key, owned) {
        return;
    }
    // The absolute expiry on the server's clock (what a relative SetExpire would compute),
    // set here and sent to replicas as is: both sides expire the key at the same instant.
    let at = mclock::expiry_base_ms(now_us).saturating_add(ttl_ms);
    key.set_abs_expire(i64::try_from(at).unwrap_or(i64::MAX));
    rm::signal_modified(ctx, name);
    rm::notify(ctx, algo, name);
    let mut enc = eff.enc;
    propagate::apply(ctx, name, enc.with_expiry(at));
}
