//! The module's configs (`CONFIG GET ratelimit.*`, or arguments of `loadmodule`), in one
//! place: their values, read by the commands, and their names for errors. Registered by the
//! `redis_module!` block in `lib.rs`.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// `ratelimit.log-max-limit`: the largest limit `RL.LOG` accepts.
pub static LOG_MAX_LIMIT: AtomicI64 = AtomicI64::new(10_000);
pub const LOG_MAX_LIMIT_NAME: &str = "ratelimit.log-max-limit";

/// `ratelimit.acquire-max-limit`: the largest limit `RL.ACQUIRE` accepts.
pub static ACQUIRE_MAX_LIMIT: AtomicI64 = AtomicI64::new(10_000);
pub const ACQUIRE_MAX_LIMIT_NAME: &str = "ratelimit.acquire-max-limit";

/// `ratelimit.test-clock`: whether `RL.CLOCK` may replace the server's clock (immutable).
pub static TEST_CLOCK: AtomicBool = AtomicBool::new(false);

/// The value of a max-limit config, as a limit.
pub fn max_limit(config: &AtomicI64) -> u64 {
    u64::try_from(config.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Whether the module was loaded with `ratelimit.test-clock yes`.
pub fn test_clock_enabled() -> bool {
    TEST_CLOCK.load(Ordering::Relaxed)
}
