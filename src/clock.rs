//! The module clock: microseconds since the Unix epoch.
//!
//! The server's clock, never one of the module's own: `RedisModule_CachedMicroseconds`
//! (Valkey, Redis 7.2+: the command's start time, frozen for a whole MULTI/EXEC or script)
//! where the server has it. Redis 7.0's module API offers only milliseconds, so there the
//! module reads the system realtime clock itself (`clock_gettime(CLOCK_REALTIME)`, the clock the server's
//! own `gettimeofday` reads) at µs resolution. The test clock (`RL.CLOCK`, only with
//! `ratelimit.test-clock yes`) replaces both; it is per server and never replicated.

use crate::algo::{MAX_TIME_MS, US_PER_MS};
use crate::rm;
use std::sync::atomic::{AtomicI64, Ordering};

/// Frozen test time in ms, or `REAL` when the server's clock is in force.
static FROZEN_MS: AtomicI64 = AtomicI64::new(REAL);
const REAL: i64 = i64::MIN;

/// Which clock answers `now_us`.
pub fn source() -> &'static str {
    if FROZEN_MS.load(Ordering::Relaxed) != REAL {
        "test"
    } else if rm::has_cached_clock() {
        "cached-microseconds"
    } else {
        "system-microseconds"
    }
}

/// The server's own clock in µs.
fn server_us() -> u64 {
    if let Some(us) = rm::cached_us() {
        return us;
    }
    system_us()
}

/// The system realtime clock in µs since the epoch (0 before the epoch).
fn system_us() -> u64 {
    rm::realtime_us()
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

/// The base, in ms on the server's expiry clock, of the absolute expiry a command sets after
/// reading the module clock at `now_us`. Where the module clock is the system clock read by
/// the module (Redis 7.0), that reading itself: the clock the server's own `mstime()` reads,
/// so one read serves the decision and the expiry. Elsewhere the server's expiry clock
/// ([`rm::server_ms`]): the cached command time, or the real clock under the test clock.
#[inline]
pub fn expiry_base_ms(now_us: u64) -> u64 {
    if FROZEN_MS.load(Ordering::Relaxed) == REAL && !rm::has_cached_clock() {
        now_us / US_PER_MS
    } else {
        rm::server_ms()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn system_clock_is_the_realtime_clock_in_microseconds() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let us = system_us();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        assert!(u128::from(us) >= before.as_micros() && u128::from(us) <= after.as_micros());
        // µs resolution, not ms * 1000: three distinct reads (a bounded loop, not a timer)
        // a few µs apart are not all on whole milliseconds.
        let mut seen = vec![system_us()];
        for _ in 0..100_000_000 {
            let v = system_us();
            if seen.last() != Some(&v) {
                seen.push(v);
                if seen.len() == 3 {
                    break;
                }
            }
        }
        assert_eq!(seen.len(), 3, "the clock did not move");
        assert!(seen.iter().any(|v| v % US_PER_MS != 0), "{seen:?}");
    }

    #[test]
    fn without_the_cached_clock_the_source_is_the_system_clock() {
        // Unit tests run without a server: no RedisModule_CachedMicroseconds.
        assert!(!rm::has_cached_clock());
        let before = system_us();
        let us = server_us();
        assert!(before <= us && us <= system_us());
    }
}
