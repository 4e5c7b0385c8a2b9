//! `RL.CLOCK GET | SET unix_ms | ADVANCE ms | REAL`: the test clock, only when the module
//! was loaded with `ratelimit.test-clock yes`. Per server, never replicated.

use crate::args::int;
use crate::clock;
use crate::config;
use crate::error::{Error, CLOCK_DISABLED, CLOCK_RANGE, CLOCK_SUBCOMMAND};
use crate::rm::{self, Ctx, RStr};

pub fn clock(ctx: Ctx, args: &[RStr]) -> Result<super::Decided, Error> {
    if args.len() < 2 {
        return Err(Error::Arity);
    }
    if !config::test_clock_enabled() {
        return Err(CLOCK_DISABLED.into());
    }
    let sub = rm::bytes(&args[1]);
    let is = |w: &[u8]| sub.eq_ignore_ascii_case(w);
    match args {
        [_, _] if is(b"GET") => {
            rm::reply_u64(ctx, clock::now_ms());
            return Ok(None);
        }
        [_, _] if is(b"REAL") => clock::real(),
        [_, _, v] if is(b"SET") => clock::set_ms(int(v)?).map_err(|_| Error::from(CLOCK_RANGE))?,
        [_, _, v] if is(b"ADVANCE") => {
            clock::advance_ms(int(v)?).map_err(|_| Error::from(CLOCK_RANGE))?
        }
        _ if is(b"GET") || is(b"REAL") || is(b"SET") || is(b"ADVANCE") => return Err(Error::Arity),
        _ => return Err(CLOCK_SUBCOMMAND.into()),
    }
    // Waiters are woken and timed out by the module clock.
    crate::wait::clock_moved(ctx);
    rm::reply_simple(ctx, c"OK");
    Ok(None)
}
