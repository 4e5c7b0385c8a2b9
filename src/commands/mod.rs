//! The command layer: parse, open the key, call the algorithm, store, set the TTL,
//! replicate the effect, reply. Nothing else.

pub mod apply;
pub mod clock;
pub mod info;
pub mod rate;

use crate::algo::Decision;
use crate::datatype::{self, Slot};
use crate::error::{Error, INTERNAL, WRONGTYPE};
use crate::rm::{self, api, Ctx, Key, RStr};
use crate::rule::Rule;
use crate::state::State;
use crate::{args::Opts, clock as mclock};
use redis_module::raw;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A command implementation: `args[0]` is the command name. Replies itself on success.
pub type Handler = fn(Ctx, &[RStr]) -> Result<(), Error>;

/// Runs a handler for a raw Redis call: never lets a panic reach the server, and turns
/// errors into error replies.
pub fn dispatch(ctx: Ctx, argv: *mut RStr, argc: c_int, h: Handler) -> c_int {
    let args: &[RStr] = match usize::try_from(argc) {
        // SAFETY: Redis passes `argc` valid argument pointers.
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    };
    match catch_unwind(AssertUnwindSafe(|| h(ctx, args))) {
        Ok(Ok(())) => rm::OK,
        Ok(Err(Error::Arity)) => rm::wrong_arity(ctx),
        Ok(Err(e)) => {
            rm::reply_error(ctx, e.as_cstr());
            rm::OK
        }
        Err(_) => {
            rm::reply_error(ctx, INTERNAL);
            rm::OK
        }
    }
}

/// Replies the five standard fields.
pub fn reply_decision(ctx: Ctx, d: &Decision) {
    rm::reply_array(ctx, 5);
    for v in [
        u64::from(d.allowed),
        d.limit,
        d.remaining,
        d.retry_after_ms,
        d.reset_after_ms,
    ] {
        rm::reply_u64(ctx, v);
    }
}

/// The state a rule may read from an open key: none, or ours of the same algorithm.
pub fn read_state(key: &Key, rule: &Rule) -> Result<Option<State>, Error> {
    match datatype::slot(key) {
        Slot::Empty => Ok(None),
        Slot::Ours(s) if s.algo() == rule.algo() => Ok(Some(*s)),
        Slot::Ours(s) => Err(Error::other_algorithm(s.algo().name())),
        Slot::Foreign => Err(Error::Static(WRONGTYPE)),
    }
}

/// Decides one request of `rule` on key `name` and, when admitted and not a dry run,
/// writes the new state with its TTL and propagates the effect.
pub fn run(ctx: Ctx, name: RStr, rule: &Rule, opts: Opts) -> Result<Decision, Error> {
    let now = mclock::now_us();
    let key = Key::open(ctx, name, !opts.dryrun);
    let prev = read_state(&key, rule)?;
    let (d, next) = rule.decide(prev.as_ref(), opts.cost, now);
    if let (Some(next), false) = (next, opts.dryrun) {
        write(ctx, &key, name, next, d.reset_after_ms);
    }
    Ok(d)
}

/// Writes `s` with a TTL of `ttl_ms`, signals the change and replicates the effect
/// (the state and its absolute expiry), never the clock-dependent command.
pub fn write(ctx: Ctx, key: &Key, name: RStr, s: State, ttl_ms: u64) {
    if ttl_ms == 0 {
        // A state equivalent to a fresh key is no state (never reached after an admission).
        return;
    }
    if !datatype::store(key, s) {
        return;
    }
    key.set_expire(i64::try_from(ttl_ms).unwrap_or(i64::MAX));
    rm::signal_modified(ctx, name);
    let at = key.abs_expire();
    let buf = s.encode();
    api!(RedisModule_Replicate(
        ctx,
        c"RL._APPLY".as_ptr(),
        c"sbcl".as_ptr(),
        name,
        buf.as_ptr(),
        buf.len(),
        c"PXAT".as_ptr(),
        at as std::ffi::c_longlong
    ) else raw::REDISMODULE_ERR as c_int);
}
