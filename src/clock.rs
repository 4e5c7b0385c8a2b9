//! The module clock: microseconds since the Unix epoch.
//!
//! The server's clock, never the process's own: `RedisModule_CachedMicroseconds` (Valkey,
//! Redis 7.2+: the command's start time, frozen for a whole MULTI/EXEC or script) where the
//! server has it, else `RedisModule_Milliseconds`. The test clock (`RL.CLOCK`, only with
//! `ratelimit.test-clock yes`) replaces both; it is per server and never replicated.

use crate::algo::{MAX_TIME_MS, US_PER_MS};
use redis_module::raw;
use std::sync::atomic::{AtomicI64, Ordering};

/// Frozen test time in ms, or `REAL` when the server's clock is in force.
static FROZEN_MS: AtomicI64 = AtomicI64::new(REAL);
const REAL: i64 = i64::MIN;

/// Which clock answers `now_us`.
pub fn source() -> &'static str {
    if FROZEN_MS.load(Ordering::Relaxed) != REAL {
        "test"
    } else if unsafe { raw::RedisModule_CachedMicroseconds }.is_some() {
        "cached-microseconds"
    } else {
        "milliseconds"
    }
}

/// The server's own clock in µs.
fn server_us() -> u64 {
    // SAFETY: these are function pointers filled in by RedisModule_Init; a missing one is None.
    unsafe {
        if let Some(f) = raw::RedisModule_CachedMicroseconds {
            return u64::try_from(f()).unwrap_or(0);
        }
        if let Some(f) = raw::RedisModule_Milliseconds {
            return u64::try_from(f()).unwrap_or(0).saturating_mul(US_PER_MS);
        }
    }
    0
}

/// Now, in µs since the epoch, on the module clock.
#[inline]
pub fn now_us() -> u64 {
    let frozen = FROZEN_MS.load(Ordering::Relaxed);
    if frozen == REAL {
        server_us().min(MAX_TIME_MS * US_PER_MS)
    } else {
        u64::try_from(frozen).unwrap_or(0).saturating_mul(US_PER_MS)
    }
}

/// Now in whole ms (floor).
pub fn now_ms() -> u64 {
    now_us() / US_PER_MS
}

/// A test time outside `0..=MAX_TIME_MS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange;

/// Freezes the test clock at `ms`; `Err` if outside `0..=MAX_TIME_MS`.
pub fn set_ms(ms: i64) -> Result<(), OutOfRange> {
    if ms < 0 || ms as u64 > MAX_TIME_MS {
        return Err(OutOfRange);
    }
    FROZEN_MS.store(ms, Ordering::Relaxed);
    Ok(())
}

/// Moves the test clock by `delta` ms from the current module time (freezing it).
pub fn advance_ms(delta: i64) -> Result<(), OutOfRange> {
    let now = i64::try_from(now_ms()).map_err(|_| OutOfRange)?;
    set_ms(now.checked_add(delta).ok_or(OutOfRange)?)
}

/// Returns to the server's clock.
pub fn real() {
    FROZEN_MS.store(REAL, Ordering::Relaxed);
}
