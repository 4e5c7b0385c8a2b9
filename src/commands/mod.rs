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

pub use crate::decide::{effect_of_request, request, request_in};
pub use crate::reply::{reply_decision, reply_ints, reply_outcome};

use crate::clock;
use crate::error::{Error, INTERNAL};
use crate::rm::{self, Ctx, RStr};
use crate::rule::{Ask, Outcome, Request, Rule};
use crate::stats::{self, Counters};
use crate::txn::Txn;
use std::ffi::c_int;
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
/// reply comes later) where the client can block, waiting with the job `job` makes; else
/// it is answered now, with `waited_ms` 0.
pub fn wait_or_reply(
    ctx: Ctx,
    wait_ms: u64,
    req: &Request,
    out: &mut Outcome,
    now_us: u64,
    job: impl FnOnce() -> Option<Box<dyn crate::wait::Job>>,
) -> bool {
    if !out.decision.allowed
        && wait_ms > 0
        && matches!(req.ask, Ask::Spend(c) if c > 0)
        && req.commit
        && crate::wait::can_block(ctx)
    {
        if let Some(job) = job() {
            let retry_ms = out.decision.retry_after_ms;
            if crate::wait::enqueue(ctx, job, wait_ms, now_us, retry_ms) {
                return true;
            }
        }
    }
    out.waited = Some(0);
    false
}
